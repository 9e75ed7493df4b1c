#!/usr/bin/env bash
# Regenerates the examples in protocol/README.md from what the daemon answers.
#
# How to run (from anywhere inside the repository):
#   bash scripts/protocol-examples.sh
# It runs tests/protocol_examples.rs with SESSIOND_UPDATE_EXAMPLES=1: a fixed sequence of
# requests against a copy of examples/pi-v3-branched.jsonl (shown as /s/a.jsonl), whose
# messages replace the fenced block after each `<!-- example: NAME -->` line of the README.
# Without the variable the same test fails when the README differs, so examples cannot go
# stale. Review the git diff after regenerating: a changed example is a changed answer.
set -euo pipefail

root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "$root"
SESSIOND_UPDATE_EXAMPLES=1 cargo test --quiet --test protocol_examples readme_examples
git --no-pager diff --stat -- protocol/README.md
