#!/usr/bin/env bash
# The single test command: installs the pi 1.6.0 oracle the tests diff against, then runs the whole cargo test suite.
#
#   bash scripts/test.sh
#
# Needs Rust, Node.js 20+ and npm. The oracle is copied from ../shared/oracle (beside the repository) into
# ./.oracle and installed there with npm once; later runs reuse it. SESSIOND_ORACLE_DIR is exported so the
# differential test runs pi instead of skipping.
set -euo pipefail

root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "$root"

shared_oracle="$root/../shared/oracle"
oracle="$root/.oracle"
if [ ! -f "$shared_oracle/oracle.mjs" ] || [ ! -f "$shared_oracle/package.json" ]; then
  echo "test.sh: the pi oracle is missing: expected $shared_oracle with oracle.mjs and package.json" >&2
  exit 1
fi

installed="$oracle/node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js"
if [ ! -f "$installed" ] || ! cmp -s "$shared_oracle/package.json" "$oracle/package.json"; then
  echo "test.sh: installing the pi oracle into $oracle" >&2
  rm -rf "$oracle"
  mkdir -p "$oracle"
  # shared/ is read-only; the copy must be writable for npm.
  cp -R "$shared_oracle/." "$oracle/"
  chmod -R u+w "$oracle"
  (cd "$oracle" && npm install --no-audit --no-fund)
  if [ ! -f "$installed" ]; then
    echo "test.sh: npm install finished but $installed is missing" >&2
    exit 1
  fi
fi
export SESSIOND_ORACLE_DIR="$oracle"

cargo test --all-targets --no-fail-fast
