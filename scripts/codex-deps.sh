#!/usr/bin/env bash
# Installs what the Codex dialect's referee tests need, under the repository, nothing global: the
# real Codex CLI (npm @openai/codex 0.171.0, whose native binary comes in the optional dependency
# @openai/codex-linux-x64; no postinstall, no Node at run time) and, as `codex-legacy`, Codex
# 0.144.6, the last release tried that writes legacy rollouts (no ordinals, rollbacks recorded
# in-file as `thread_rolled_back`, forks that copy their parent), pinned by tests/codex/package.json
# and package-lock.json, into .tools/codex (ignored by git).
#
#   bash scripts/codex-deps.sh        # prints one line once installed (idempotent)
#
# Needs npm. Fails loudly when the native binary is missing afterwards or reports another version
# (an npm that skipped optional dependencies, or a platform without a prebuilt binary). The tests
# find the install through SESSIOND_CODEX_DIR or at .tools/codex; the binaries are
# node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex and
# node_modules/codex-legacy/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
# under it.
set -euo pipefail

version="0.171.0"
legacy_version="0.144.6"
root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
spec="$root/tests/codex"
dest="$root/.tools/codex"
bin_path="@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
codex="$dest/node_modules/$bin_path"
legacy="$dest/node_modules/codex-legacy/node_modules/$bin_path"
. "$root/scripts/npm-pinned.sh"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) echo "codex-deps: only linux x86_64 is provided for (the binary path above); this is $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac

installed() {
  [ -x "$codex" ] && [ -x "$legacy" ] && same_pins "$spec" "$dest"
}

if ! installed; then
  # --include=optional: the native binary is an optional dependency; an npm configured to omit
  # optional dependencies would otherwise install only the JavaScript launcher.
  npm_install_pinned codex-deps "Codex $version and $legacy_version" "$spec" "$dest" --include=optional
fi

if ! installed; then
  echo "codex-deps: the install finished but $codex or $legacy is missing (was the optional dependency @openai/codex-linux-x64 skipped?)" >&2
  exit 1
fi
# The binary wants a CODEX_HOME that exists; ask it in a scratch one so nothing of the user's is read.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/.codex"
check() {
  local bin="$1" want="$2" reported
  reported="$(HOME="$scratch" CODEX_HOME="$scratch/.codex" "$bin" --version 2>/dev/null </dev/null || true)"
  if [ "$reported" != "codex-cli $want" ]; then
    echo "codex-deps: $bin reports '$reported', expected 'codex-cli $want'" >&2
    exit 1
  fi
}
check "$codex" "$version"
check "$legacy" "$legacy_version"
echo "codex-deps: Codex $version (and $legacy_version, legacy rollouts) in $dest" >&2
