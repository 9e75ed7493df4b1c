#!/usr/bin/env bash
# The single test command: installs what the tests need, runs every suite, and ends with one
# verdict line naming each suite and its counts, what did not run and why, and what failed.
#
#   bash scripts/test.sh [--allow-system-install]
#
# Needs Rust, Python 3 with pip, and npm with Node.js 20 or newer (pi 1.6.0 itself needs Node.js
# >= 22.19, which is installed under the repository).
#
# Under the repository (ignored by git; `rm -rf .oracle .tools target editors/vscode/node_modules`
# removes all of it):
# * .oracle: pi 1.6.0's own code, which the differential tests run, copied from
#   $SESSIOND_ORACLE_SRC or ../shared/oracle (beside the repository) and installed with npm once;
# * .tools/python: Neovim for the headless editor test (scripts/test-deps.sh: one already on PATH
#   is used instead), .tools/live: the real pi agent and Node 22 for the live tests
#   (scripts/live-deps.sh), .tools/vscode-host: Node 24, code-server and playwright-core for the
#   extension in a real VS Code (scripts/vscode-host-deps.sh), .tools/claude: the Claude Code CLI
#   for its referee (scripts/claude-deps.sh), .tools/codex: the Codex CLI 0.171.0 and 0.144.6 for
#   its referee (scripts/codex-deps.sh);
# * editors/vscode/node_modules: the extension's npm dependencies; target/: cargo's builds.
#
# System-wide, and only with CI=true, SESSIOND_ALLOW_SYSTEM_INSTALL=1 or --allow-system-install
# (as root, with apt-get): the Debian packages git (tests/verify.rs), chromium (the HTML export
# and the SVG graph rendered in a browser; the real-host VS Code test), libkrb5-dev and pkg-config
# (code-server's native modules), each only when missing. apt-get may upgrade what they depend on.
# Without the opt-in nothing outside the repository is touched: what needs a missing package does
# not run, and the verdict says so.
#
# The last line is the verdict, for example
#   verdict: cargo 1204 passed, 0 failed, 1 ignored; vscode 31 passed, 0 failed; vscode-host 9 passed, 0 failed; NOT RUN: none; FAILED: none
# Exit 0 when nothing failed (under CI=true, also nothing may be left out); 1 otherwise. The
# suites' whole output is kept in target/test-logs/ (cargo.log, vscode.log, vscode-host.log).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

allow_install=
case "${1:-}" in
  --allow-system-install) allow_install=1 ;;
  "") ;;
  *) echo "usage: bash scripts/test.sh [--allow-system-install]" >&2; exit 2 ;;
esac
[ "${CI:-}" = true ] && allow_install=1
[ "${SESSIOND_ALLOW_SYSTEM_INSTALL:-}" = 1 ] && allow_install=1
export SESSIOND_ALLOW_SYSTEM_INSTALL="${allow_install:-0}"

say() { echo "test.sh: $*" >&2; }
not_run=()   # "what (why)": a suite or a part of one that did not run
failed=()    # "what": a suite that failed, or a test by name

# --- System packages (only with the opt-in) -------------------------------------------------

# Whether the Debian package $1 is installed (as scripts/vscode-host-deps.sh asks it).
have_pkg() {
  dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'
}

wanted=()
command -v git >/dev/null 2>&1 || wanted+=(git)
if [ -z "${SESSIOND_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  wanted+=(chromium)
fi
for pkg in libkrb5-dev pkg-config; do have_pkg "$pkg" || wanted+=("$pkg"); done
if [ "${#wanted[@]}" -gt 0 ]; then
  if [ -z "$allow_install" ]; then
    say "not installing the system packages ${wanted[*]}: run with SESSIOND_ALLOW_SYSTEM_INSTALL=1 (or --allow-system-install) to let apt-get install them"
  elif ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
    say "cannot install ${wanted[*]}: that takes apt-get as root"
  else
    say "installing ${wanted[*]} with apt-get (system-wide)"
    # Another build on the machine may hold the dpkg lock: wait for it rather than fail.
    apt-get -o DPkg::Lock::Timeout=900 update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq \
        "${wanted[@]}" >&2 || say "apt-get install ${wanted[*]} failed"
  fi
fi
why_missing() {
  local it=it
  case "$1" in *" "*) it=them ;; esac
  if [ -n "$allow_install" ]; then echo "$1 missing and could not be installed"
  else echo "$1 missing; SESSIOND_ALLOW_SYSTEM_INSTALL=1 lets apt-get install $it"; fi
}
command -v git >/dev/null 2>&1 ||
  not_run+=("tests/verify.rs's git cases ($(why_missing git))")
if [ -z "${SESSIOND_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  not_run+=("the browser checks of tests/export.rs and tests/graph.rs ($(why_missing chromium))")
fi
host_missing=()
for pkg in chromium libkrb5-dev pkg-config; do have_pkg "$pkg" || host_missing+=("$pkg"); done

# --- Tools under the repository ---------------------------------------------------------------

# pi's own code, for the differential tests.
shared_oracle="${SESSIOND_ORACLE_SRC:-$root/../shared/oracle}"
oracle="$root/.oracle"
installed="$oracle/node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js"
if [ -f "$shared_oracle/oracle.mjs" ] && [ -f "$shared_oracle/package.json" ]; then
  if [ ! -f "$installed" ] || ! cmp -s "$shared_oracle/package.json" "$oracle/package.json"; then
    say "installing the pi oracle into $oracle"
    rm -rf "$oracle"
    mkdir -p "$oracle"
    # The source may be read-only; the copy must be writable for npm.
    cp -R "$shared_oracle/." "$oracle/"
    chmod -R u+w "$oracle"
    (cd "$oracle" && npm install --no-audit --no-fund) >&2 || say "npm install of the pi oracle failed"
  fi
elif [ -f "$installed" ]; then
  say "no pi oracle at $shared_oracle; using the one installed in $oracle"
fi
if [ -f "$installed" ]; then
  export SESSIOND_ORACLE_DIR="$oracle"
else
  not_run+=("the comparisons with pi's own code (no pi oracle at $shared_oracle; set SESSIOND_ORACLE_SRC to a directory with oracle.mjs and package.json)")
fi

# Neovim for the editor test: found, or installed under .tools/ (never globally).
if SESSIOND_NVIM="$(bash scripts/test-deps.sh)"; then
  export SESSIOND_NVIM
else
  not_run+=("tests/neovim.rs (no Neovim 0.10+; see scripts/test-deps.sh's message above)")
fi

# The live tests (tests/live_pi.rs, tests/born.rs) run the real pi agent against a scripted model
# server.
if bash scripts/live-deps.sh; then
  export SESSIOND_PI_DIR="$root/.tools/live"
else
  not_run+=("the live pi tests (pi 1.6.0 and Node 22 could not be installed into .tools/live)")
fi

# The Claude Code referee (tests/claude_referee.rs) runs the real Claude Code CLI (a native
# binary from npm, pinned by tests/claude/package.json) against a scripted Anthropic server.
if bash scripts/claude-deps.sh; then
  export SESSIOND_CLAUDE_BIN="$root/.tools/claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
else
  not_run+=("the Claude Code referee (Claude Code could not be installed into .tools/claude)")
fi

# The Codex referee (tests/codex_referee.rs) runs the real Codex CLI (native binaries from npm,
# pinned by tests/codex/package.json) against a scripted Responses API server.
if bash scripts/codex-deps.sh; then
  export SESSIOND_CODEX_DIR="$root/.tools/codex"
else
  not_run+=("the Codex referee (Codex could not be installed into .tools/codex)")
fi

# code-server, for the real-host tests and for the extension's unit test that runs VS Code's own
# diff computation (editors/vscode/src/test/compare.test.ts): installed before either suite.
if [ "${#host_missing[@]}" -eq 0 ]; then
  bash scripts/vscode-host-deps.sh || say "installing code-server failed (scripts/vscode-host-deps.sh)"
fi

# --- The suites -------------------------------------------------------------------------------

logs="${CARGO_TARGET_DIR:-$root/target}/test-logs"
mkdir -p "$logs"

# A clean CI checkout gains nothing from incremental compilation but its disk (about 2 GB).
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0
fi
say "free disk before building: $(df -Ph . | awk 'NR == 2 { print $4 }')"

cargo test --all-targets --no-fail-fast 2>&1 | tee "$logs/cargo.log"
cargo_status=${PIPESTATUS[0]}
# libtest prints one "test result:" line per test binary; "Running X" names the binary before it.
read -r c_pass c_fail c_ign c_bins < <(awk '
  /^test result: / {
    for (i = 1; i <= NF; i++) {
      if ($(i + 1) ~ /^passed;?$/) p += $i
      if ($(i + 1) ~ /^failed;?$/) f += $i
      if ($(i + 1) ~ /^ignored;?$/) g += $i
    }
    n++
  }
  END { print p + 0, f + 0, g + 0, n + 0 }' "$logs/cargo.log")
# A failed test's captured output starts with "---- NAME stdout ----".
cargo_failed="$(awk '
  /^ +Running [^ ]+( [^ ]+)? \(/ {
    bin = ($2 == "unittests") ? $3 : $2; sub(/^(tests|src|benches|scripts)\//, "", bin); sub(/\.rs$/, "", bin)
  }
  /^---- .* stdout ----$/ { printf "%s%s::%s", sep, bin, $2; sep = ", " }' "$logs/cargo.log")"
cargo_verdict="cargo $c_pass passed, $c_fail failed, $c_ign ignored"
if [ -n "$cargo_failed" ]; then
  failed+=("cargo: $cargo_failed")
elif [ "$cargo_status" != 0 ]; then
  if [ "$c_bins" = 0 ]; then
    cargo_verdict="cargo did not build (exit $cargo_status)"
  fi
  failed+=("cargo exited $cargo_status (see $logs/cargo.log)")
fi

# node --test ends with "ℹ pass N", "ℹ fail N", "ℹ skipped N" lines ("# pass N" and so on from
# the TAP reporter, Node's default when the output is not a terminal).
node_counts() {
  awk '
    /^(ℹ|#) pass [0-9]/ { p = $3 } /^(ℹ|#) fail [0-9]/ { f = $3 } /^(ℹ|#) skipped [0-9]/ { s = $3 }
    END { if (p == "") print "none"; else printf "%d passed, %d failed%s\n", p, f, (s > 0 ? ", " s " skipped" : "") }' "$1"
}

# Runs a node --test suite through its script (its output also in $logs/NAME.log) and sets the
# variable VERDICT to its counts; a suite that failed, or did not reach its tests, is added to
# `failed`.
node_suite() {  # NAME SCRIPT VERDICT
  local name="$1" status counts
  bash "$2" 2>&1 | tee "$logs/$name.log"
  status=${PIPESTATUS[0]}
  counts="$(node_counts "$logs/$name.log")"
  if [ "$counts" = none ]; then
    printf -v "$3" '%s' "$name did not reach its tests (exit $status)"
    failed+=("$name (see $logs/$name.log)")
  else
    printf -v "$3" '%s' "$name $counts"
    if [ "$status" != 0 ]; then failed+=("$name (see $logs/$name.log)"); fi
  fi
}

say "VS Code extension tests (editors/vscode)"
node_suite vscode scripts/test-vscode.sh vscode_verdict

# The extension in a real VS Code: code-server and chromium (scripts/vscode-host-deps.sh installs
# code-server into .tools/vscode-host; the Debian packages must be there).
if [ "${#host_missing[@]}" -gt 0 ]; then
  vscode_host_verdict="vscode-host not run"
  not_run+=("vscode-host ($(why_missing "${host_missing[*]}"))")
else
  say "VS Code extension in a real VS Code (editors/vscode/host-test)"
  node_suite vscode-host scripts/test-vscode-host.sh vscode_host_verdict
fi

# --- The verdict ------------------------------------------------------------------------------

join() { local sep="$1" out="" x; shift; for x in "$@"; do out="${out:+$out$sep}$x"; done; echo "${out:-none}"; }
say "left on disk under the repository: $(du -sh .oracle .tools "${CARGO_TARGET_DIR:-target}" \
  editors/vscode/node_modules 2>/dev/null | awk '{ printf "%s%s %s", sep, $2, $1; sep = ", " }')"
if [ "${#not_run[@]}" -gt 0 ]; then
  echo >&2
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  for x in "${not_run[@]}"; do echo "!!! NOT RUN: $x" >&2; done
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  if [ "${CI:-}" = true ]; then
    failed+=("under CI=true everything must run")
  fi
fi
echo
echo "verdict: $cargo_verdict; $vscode_verdict; $vscode_host_verdict; NOT RUN: $(join "; " "${not_run[@]}"); FAILED: $(join "; " "${failed[@]}")"
[ "${#failed[@]}" -eq 0 ]
