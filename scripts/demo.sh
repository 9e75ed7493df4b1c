#!/usr/bin/env bash
# Shows what sessiond does on a shipped real pi session, with no setup beyond Rust:
# the session tree (branches, labels, name, leaves), the model's context at the default leaf,
# why one entry on another branch is not in it, and the same session served by the daemon.
#
#   bash scripts/demo.sh [SESSION.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
file="${1:-examples/pi-v3-branched.jsonl}"
echo "building sessiond (release; the first build takes a few minutes)..." >&2
cargo build --release --quiet --bin sessiond
bin=target/release/sessiond
echo "== sessiond tree $file"
"$bin" tree "$file"
echo
echo "== sessiond context $file   (what the model sees at the default leaf)"
"$bin" context "$file"
if [ "$file" = examples/pi-v3-branched.jsonl ]; then
  echo
  echo "== sessiond explain: an edited tool result, an entry on another branch, one summarized by compaction"
  "$bin" explain "$file" 6fa656a2
  "$bin" explain "$file" de19adb3
  "$bin" explain "$file" 818a7c7b
fi
echo
echo "== sessiond serve (the daemon): initialize, session/open, session/contextAt (previews), shutdown"
SESSIOND_BIN="$bin" python3 scripts/rpc.py --root "$(dirname "$file")" \
  session/open "{\"path\":\"$file\"}" \
  session/contextAt "{\"path\":\"$file\",\"fields\":\"previews\",\"limit\":3}"
