# Sourced (not run) by test-vscode.sh and test-vscode-host.sh, with $repo and $ext set: exports
# SESSIOND_BIN, building target/debug/sessiond with cargo unless it names a binary already, and
# runs `npm ci` in the extension when node_modules is missing or was installed from another
# package.json or lock file.

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
