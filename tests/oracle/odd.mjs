// pi 1.6.0's answers for the odd-lines corpus (tests/odd_lines.rs), one node process for all files:
//
//   SESSIOND_ORACLE_DIR=DIR node tests/oracle/odd.mjs FILE...
//
// Prints one JSON line per file: {"file", "context": {messages, thinkingLevel, model}, "tree": getTree()
// reduced to {id, label?, children}, "name": getSessionName() ?? null}, or {"file", "error"} when pi throws.
// Every file is read from a copy, as oracle.mjs does (pi's loader may append a newline).
import { copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { piCore } from "./pi.mjs";

const sm = await piCore("session-manager.js");

const scratch = mkdtempSync(join(tmpdir(), "sessiond-odd-oracle-"));
let n = 0;
for (const file of process.argv.slice(2)) {
  try {
    const copy = join(scratch, `input-${n++}.jsonl`);
    copyFileSync(file, copy);
    const fileEntries = sm.loadEntriesFromFile(copy);
    sm.migrateSessionEntries(fileEntries);
    const entries = fileEntries.filter((e) => e.type !== "session");
    const byId = new Map(entries.map((e) => [e.id, e]));
    const { messages, thinkingLevel, model } = sm.buildSessionContext(entries, undefined, byId);
    const manager = sm.SessionManager.open(copy, scratch);
    const strip = (node) => ({
      id: node.entry.id,
      ...(node.label === undefined ? {} : { label: node.label }),
      children: node.children.map(strip),
    });
    const tree = manager.getTree().map(strip);
    const name = manager.getSessionName() ?? null;
    process.stdout.write(`${JSON.stringify({ file, context: { messages, thinkingLevel, model }, tree, name })}\n`);
  } catch (e) {
    process.stdout.write(`${JSON.stringify({ file, error: String(e && e.message) })}\n`);
  }
}
