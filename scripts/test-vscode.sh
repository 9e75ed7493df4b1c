#!/usr/bin/env bash
# Builds and tests the VS Code extension (editors/vscode) against this repository's daemon:
# runs `npm ci` when node_modules is missing or was installed from another lock file, brings
# target/debug/sessiond up to date with cargo (unless SESSIOND_BIN names a binary), then
# `npm test` (tsc, then node --test on the compiled tests).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ext="$repo/editors/vscode"

. "$repo/scripts/vscode-ext-deps.sh"

cd "$ext"
npm test
