#!/usr/bin/env bash
# Installs what the Claude Code referee (tests/claude/) needs, under the repository, nothing
# global: the real Claude Code CLI (npm @anthropic-ai/claude-code 2.1.197, whose native binary
# ships in the optional platform package @anthropic-ai/claude-code-linux-x64), pinned by
# tests/claude/package.json and package-lock.json, into .tools/claude (ignored by git).
#
#   bash scripts/claude-deps.sh        # prints one line once installed (idempotent)
#
# Needs npm (any Node 18+). The package's postinstall copies the platform binary over the
# bin/claude.exe placeholder; when the npm client skipped it, it is run here. Fails loudly when
# the binary is missing afterwards or reports another version. The referee finds the binary
# through SESSIOND_CLAUDE_BIN or at .tools/claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe.
set -euo pipefail

want="2.1.197"
root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
spec="$root/tests/claude"
dest="$root/.tools/claude"
pkg="$dest/node_modules/@anthropic-ai/claude-code"
claude="$pkg/bin/claude.exe"
. "$root/scripts/npm-pinned.sh"

version_of() {
  # The placeholder is a script that prints instructions; only the native binary says "(Claude Code)".
  HOME="$dest/.home" "$claude" --version 2>/dev/null | head -n 1 || true
}

installed() {
  [ -x "$claude" ] && same_pins "$spec" "$dest" && [ "$(version_of)" = "$want (Claude Code)" ]
}

if ! installed; then
  npm_install_pinned claude-deps "Claude Code $want" "$spec" "$dest"
  if [ -f "$pkg/install.cjs" ] && [ "$(version_of)" != "$want (Claude Code)" ]; then
    # The npm client did not run the postinstall that puts the native binary in place.
    (cd "$pkg" && node install.cjs)
  fi
fi

if [ ! -x "$claude" ]; then
  echo "claude-deps: the install finished but $claude is missing" >&2
  exit 1
fi
if ! head -c 4 "$claude" | grep -q "ELF"; then
  echo "claude-deps: $claude is not the native binary (is the optional package @anthropic-ai/claude-code-linux-x64 missing?)" >&2
  exit 1
fi
got="$(version_of)"
if [ "$got" != "$want (Claude Code)" ]; then
  echo "claude-deps: $claude reports version '$got', expected '$want (Claude Code)'" >&2
  exit 1
fi
echo "claude-deps: Claude Code $want in $dest" >&2
