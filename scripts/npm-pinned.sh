# Sourced (not run) by the scripts that install an npm package pinned by a package.json and
# package-lock.json pair into a folder of .tools/ (claude-deps.sh, codex-deps.sh, live-deps.sh,
# vscode-host-deps.sh): whether an install is of the pinned versions, and a fresh install.

# Whether DEST holds the package.json and package-lock.json of SPEC (the pins it was installed from).
same_pins() { # SPEC DEST
  cmp -s "$1/package.json" "$2/package.json" && cmp -s "$1/package-lock.json" "$2/package-lock.json"
}

# Installs SPEC's pinned packages afresh into DEST (emptied first) with `npm ci` and any further
# arguments; TOOL names the calling script in messages, WHAT the install. Exits when there is no npm.
npm_install_pinned() { # TOOL WHAT SPEC DEST [NPM_CI_ARGUMENTS...]
  local tool="$1" what="$2" spec="$3" dest="$4"
  shift 4
  if ! command -v npm >/dev/null 2>&1; then
    echo "$tool: npm is required to install $what into $dest" >&2
    exit 1
  fi
  echo "$tool: installing $what into $dest" >&2
  rm -rf "$dest"
  mkdir -p "$dest"
  cp "$spec/package.json" "$spec/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error "$@")
}
