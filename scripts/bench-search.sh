#!/usr/bin/env bash
# Measures the search index on a generated corpus (release build):
#   bash scripts/bench-search.sh [SESSIONS] [SIZE_MB_PER_SESSION]     (default 1000 x 0.1)
# Sessions come from the generator (scripts/gen_session.rs, one seed each) under
# target/bench-search/corpus; the index goes to target/bench-search/index. Prints: corpus size,
# full index build time and peak RSS (GNU time), index size, an incremental update after one
# appended line, and query latency (median, p99 over repeated runs of `sessiond search
# --no-update`, so each includes process start and opening the index) for single terms,
# phrases, rare terms and prefixes; then the same inside the daemon
# (scripts/bench-search-daemon.py: a build by the first session/search with the daemon's RSS
# sampled as the index grows, request round trips with the index warm, and one append found by
# session/search after its didChange). Speed is measured here, never asserted in tests.
# BENCH_DIR moves the corpus and indexes (e.g. /tmp for the 10,000-session, 1 GB corpus:
# BENCH_DIR=/tmp/sessiond-bench bash scripts/bench-search.sh 10000 0.1).
set -euo pipefail
n="${1:-1000}"
mb="${2:-0.1}"
root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "$root"
cargo build --release --quiet --bin sessiond --example gen-session
bin="$root/target/release/sessiond"
gen="$root/target/release/examples/gen-session"
work="${BENCH_DIR:-$root/target/bench-search}"
corpus="$work/corpus-$n-$mb"
index="$work/index"
mkdir -p "$corpus"
if [ "$(find "$corpus" -name '*.jsonl' | wc -l)" -lt "$n" ]; then
  echo "generating $n sessions of $mb MB in $corpus" >&2
  for i in $(seq 1 "$n"); do
    d="$corpus/$(( i % 100 ))"
    mkdir -p "$d"
    "$gen" "$d/s$i.jsonl" "$mb" "$i" >/dev/null
  done
fi
echo "corpus: $(find "$corpus" -name '*.jsonl' | wc -l) sessions, $(du -sh "$corpus" | cut -f1)"
rm -rf "$index"
/usr/bin/time -f "full build: %e s wall, %M KB peak RSS" \
  "$bin" search --root "$corpus" --index-dir "$index" --limit 1 --json zzzz >/dev/null
echo "index size: $(du -sh "$index" | cut -f1)"
/usr/bin/time -f "no-change update + query: %e s wall, %M KB peak RSS" \
  "$bin" search --root "$corpus" --index-dir "$index" --limit 1 --json zzzz >/dev/null
first="$(find "$corpus" -name '*.jsonl' -print -quit)"
leaf="$("$bin" check "$first" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["currentLeafId"])')"
cp "$first" "$work/saved.jsonl"
printf '{"type":"message","id":"benchx01","parentId":"%s","timestamp":"2030-01-01T00:00:00.000Z","message":{"role":"user","content":"xylophonequartz appended"}}\n' "$leaf" >>"$first"
/usr/bin/time -f "update after one append + query: %e s wall, %M KB peak RSS" \
  "$bin" search --root "$corpus" --index-dir "$index" --limit 1 --json xylophonequartz |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print("  found:", d["total"], "update:", {k: d["index"]["update"][k] for k in ("indexed","appended","entries")})'
cp "$work/saved.jsonl" "$first"
python3 - "$bin" "$corpus" "$index" <<'PY'
import statistics, subprocess, sys, time
bin, corpus, index = sys.argv[1:4]
queries = {
    "single term": ["error", "function", "test", "file"],
    "phrase": ['"cargo test"', '"the file"', '"tool result"'],
    "rare term": ["xylophonequartz", "zzyzx", "quokka"],
    "prefix": ["compil*", "refact*"],
}
for kind, qs in queries.items():
    times = []
    for _ in range(10):
        for q in qs:
            t = time.perf_counter()
            subprocess.run([bin, "search", "--root", corpus, "--index-dir", index, "--no-update",
                            "--limit", "20", "--json", q], check=True, stdout=subprocess.DEVNULL)
            times.append((time.perf_counter() - t) * 1000)
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(f"{kind:12} median {statistics.median(times):7.1f} ms   p99 {p99:7.1f} ms   ({len(times)} runs, process start included)")
PY
rm -rf "$work/index-daemon"
python3 "$root/scripts/bench-search-daemon.py" "$bin" "$corpus" "$work/index-daemon"
echo "daemon index size: $(du -sh "$work/index-daemon" | cut -f1)"
