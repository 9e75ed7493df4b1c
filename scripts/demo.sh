#!/usr/bin/env bash
# Shows what sessiond does on a shipped real pi session, with no setup beyond Rust and Python 3:
# the session tree (branches, leaves, labels, the resume leaf), the model's context at the
# resume leaf, why entries are or are not in it, the same session served by the daemon, and
# the write side on a temporary copy: a fork, a label and a compaction. The shipped file is
# never changed.
#
#   bash scripts/demo.sh [SESSION.jsonl]
#
# SESSIOND_BIN=path runs that binary instead of building one (tests/cli.rs does).
set -euo pipefail
default=examples/pi-v3-branched.jsonl
if [ $# -ge 1 ]; then
  # Named from where the script was called, before moving to the repository.
  file="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
fi
cd "$(dirname "$0")/.."
file="${file:-$default}"
if [ -n "${SESSIOND_BIN:-}" ]; then
  bin="$(cd "$(dirname "$SESSIOND_BIN")" && pwd)/$(basename "$SESSIOND_BIN")"
else
  echo "building sessiond (release; the first build takes five to ten minutes on two cores)..." >&2
  cargo build --release --bin sessiond
  bin="$PWD/target/release/sessiond"
fi

# Headings in bold on a terminal only.
if [ -t 1 ]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi
# Prints the command as one would type it, then runs it.
show() {
  printf '$ sessiond'
  printf ' %q' "$@"
  printf '\n'
  "$bin" "$@"
}

if [ "$file" = "$default" ]; then
  step "The tree: one file, three branches. Long runs are folded; --full prints all of them."
else
  step "The tree: branches, leaves and the resume leaf. Long runs are folded; --full prints all of them."
fi
show tree "$file"

step "What the model sees at the resume leaf (pi's buildSessionContext)"
show context "$file"

if [ "$file" = "$default" ]; then
  step "Why an entry is or is not in that context"
  show explain "$file" 6fa656a2   # a tool result whose content a context edit replaced
  show explain "$file" 610f9c1e   # a context entry that adds a setting, not a message
  show explain "$file" de19adb3   # an entry on another branch
  show explain "$file" 818a7c7b   # an entry a compaction summarized
fi

step "The daemon (sessiond serve): JSON-RPC over stdio, as an editor speaks it"
SESSIOND_BIN="$bin" python3 scripts/rpc.py --pretty --root "$(dirname "$file")" \
  session/open "{\"path\":\"$file\"}" \
  session/contextAt "{\"path\":\"$file\",\"fields\":\"previews\",\"limit\":3}"

step "Writing, on a temporary copy"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$file" "$tmp/"
cd "$tmp"
copy="$(basename "$file")"
echo "(in $tmp, removed at the end)"
current_leaf() { "$bin" check "$1" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["currentLeafId"])'; }
leaf="$(current_leaf "$copy")"
echo "Every write names the file's resume leaf (--expected-leaf); check --json says it: $leaf"
if [ "$file" = "$default" ]; then
  echo
  echo "A fork: the path from the root to an entry, as a new session file beside it:"
  show fork "$copy" 92bfec97
  echo
  echo "A label on the entry where the branches part:"
  show label "$copy" 521cf246 "fork point" --expected-leaf "$leaf"
  leaf="$(current_leaf "$copy")"
  echo
  echo "A compaction of another branch (the embedded summarizer; no model needed):"
  show compact "$copy" --leaf de19adb3 --expected-leaf "$leaf"
else
  version="$("$bin" check "$copy" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')"
  if [ "$version" != 3 ]; then
    echo
    echo "A version-$version file is not appended to (pi migrates it when it opens it); a fork of"
    echo "the resume leaf is a version-3 copy, and the compaction goes there:"
    copy="$("$bin" fork "$copy" "$leaf" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["path"])')"
    echo "$copy"
    leaf="$(current_leaf "$copy")"
  fi
  echo
  show compact "$copy" --expected-leaf "$leaf"
fi
echo
show tree "$copy"
