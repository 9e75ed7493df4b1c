#!/usr/bin/env bash
# Regenerates tests/data/golden/ from pi 1.6.0 (the oracle) for the real fixtures and the synthetic sessions.
#
# How to run (from anywhere inside the repository):
#   bash scripts/regen-golden.sh
# It uses $SESSIOND_ORACLE_DIR when set, otherwise ./.oracle (which scripts/test.sh installs); that directory
# must hold node_modules/@earendil-works/pi-coding-agent. Needs Node.js 20+.
#
# Cases: every file in examples/*.jsonl and tests/data/synthetic/*.jsonl at its default leaf, plus, for every
# file with stable ids (version 2 and 3), each leaf (an entry with no children). Version-1 files are linear,
# so only their default leaf is used. Each case becomes one JSON file
#   tests/data/golden/<dir>__<file stem>__<leaf or "default">.json
# holding {file, leaf, version, context, entries, entryLines}: context is pi's {messages, thinkingLevel, model},
# entries the ids of buildContextEntries (null for version 1, where pi invents random ids), entryLines the
# 1-based physical lines of those entries. The old goldens are deleted first, so the directory always
# matches the inputs. Review the git diff after regenerating: a changed golden is a changed expectation.
set -euo pipefail

root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "$root"

export SESSIOND_ORACLE_DIR="${SESSIOND_ORACLE_DIR:-$root/.oracle}"
if [ ! -d "$SESSIOND_ORACLE_DIR/node_modules/@earendil-works/pi-coding-agent" ]; then
  echo "regen-golden: no pi install in $SESSIOND_ORACLE_DIR; run scripts/test.sh once or set SESSIOND_ORACLE_DIR" >&2
  exit 2
fi

node --input-type=module - <<'EOF'
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

const goldenDir = "tests/data/golden";
const sources = ["examples", "tests/data/synthetic"];
const files = sources.flatMap((dir) =>
  readdirSync(dir)
    .filter((name) => name.endsWith(".jsonl"))
    .sort()
    .map((name) => join(dir, name)),
);

function batch(jobs) {
  const input = jobs.map((job) => JSON.stringify(job)).join("\n") + "\n";
  const run = spawnSync("node", ["tests/oracle/batch.mjs"], { input, maxBuffer: 1 << 30, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`batch.mjs failed (${run.status}): ${run.stderr}`);
  const results = run.stdout.trim().split("\n").map((line) => JSON.parse(line));
  for (const result of results) {
    if (result.error) throw new Error(`oracle failed on ${result.file} leaf ${result.leaf}: ${result.error}`);
  }
  return results;
}

const defaults = batch(files.map((file) => ({ file, leaf: null })));
const leafJobs = defaults.flatMap((result) => (result.leaves ?? []).map((leaf) => ({ file: result.file, leaf })));
const results = [...defaults, ...batch(leafJobs)];

rmSync(goldenDir, { recursive: true, force: true });
mkdirSync(goldenDir, { recursive: true });
for (const result of results) {
  const dir = basename(sources.find((source) => result.file.startsWith(`${source}/`)));
  const name = `${dir}__${basename(result.file, ".jsonl")}__${result.leaf ?? "default"}.json`;
  const golden = {
    file: result.file,
    leaf: result.leaf,
    version: result.version,
    context: result.context,
    entries: result.entries,
    entryLines: result.entryLines,
  };
  writeFileSync(join(goldenDir, name), `${JSON.stringify(golden, null, 1)}\n`);
}
console.log(`regen-golden: wrote ${results.length} cases for ${files.length} files into ${goldenDir}`);
EOF
