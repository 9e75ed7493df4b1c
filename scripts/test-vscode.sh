#!/usr/bin/env bash
# Builds and tests the VS Code extension (editors/vscode) against this repository's daemon:
# runs `npm ci` when node_modules is missing or was installed from another lock file, brings
# target/debug/sessiond up to date with cargo (unless SESSIOND_BIN names a binary), then
# `npm test` (tsc, then node --test on the compiled tests).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ext="$repo/editors/vscode"

if [[ -z "${SESSIOND_BIN:-}" ]]; then
    # A no-op when the binary is current; rebuilding keeps the tests from running an old daemon.
    (cd "$repo" && cargo build --quiet --bin sessiond)
    SESSIOND_BIN="${CARGO_TARGET_DIR:-$repo/target}/debug/sessiond"
fi
export SESSIOND_BIN

stamp="$ext/node_modules/.installed-from"
want="$(cat "$ext/package.json" "$ext/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    (cd "$ext" && npm ci --no-audit --no-fund)
    echo "$want" >"$stamp"
fi

cd "$ext"
npm test
