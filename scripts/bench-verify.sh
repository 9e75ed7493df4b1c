#!/usr/bin/env bash
# Times `sessiond verify` (release build) on a session file in a prepared work tree.
#
#   bash scripts/bench-verify.sh [SESSION_FILE] [RUNS]
#
# Default file: the largest .jsonl under ../shared/fixtures/real (beside the repository), else
# examples/. The work tree is a temporary git repository (made with the git program, HOME and
# pi's agent directory pointed into it) passed as --cwd, so the session's relative paths
# resolve into it and git is asked for real; absolute paths the session touched are simply
# missing. Two measurements: with that --cwd, and with the header's cwd (usually absent on
# this machine). Uses farm-bench when installed (median of RUNS), else repeated `time`.
set -euo pipefail

root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "$root"
file="${1:-}"
runs="${2:-10}"
if [[ -z "$file" ]]; then
    file="$(ls -S "$root"/../shared/fixtures/real/*.jsonl 2>/dev/null | head -1 || true)"
    [[ -n "$file" ]] || file="$(ls -S examples/*.jsonl | head -1)"
fi
cargo build --release --quiet --bin sessiond
bin="$root/target/release/sessiond"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo" "$work/home" "$work/agent"
export HOME="$work/home" PI_CODING_AGENT_DIR="$work/agent" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
git -C "$work/repo" init -q -b main
git -C "$work/repo" -c user.name=bench -c user.email=bench@example.com commit -q --allow-empty -m start

echo "file: $file ($(stat -c %s "$file") bytes)"
"$bin" verify "$file" --cwd "$work/repo" >"$work/out.txt" || true
tail -1 "$work/out.txt"
if command -v farm-bench >/dev/null 2>&1; then
    farm-bench -n "$runs" --warmup 2 -- sh -c "\"$bin\" verify \"$file\" --cwd \"$work/repo\" --json >/dev/null; exit 0"
    farm-bench -n "$runs" --warmup 2 -- sh -c "\"$bin\" verify \"$file\" --json >/dev/null; exit 0"
else
    for _ in $(seq "$runs"); do
        /usr/bin/time -f "%e s %M KB" "$bin" verify "$file" --cwd "$work/repo" --json >/dev/null || true
    done
fi
