// pi 1.6.0's session-picker facts for tests/listing.rs, one node process for all files:
//
//   SESSIOND_ORACLE_DIR=DIR node tests/oracle/list.mjs FILE...
//
// Prints one JSON line per file: {"file", "name", "firstMessage", "messageCount", "cwd", "tokens",
// "leafCount", "entryCount"}: name, firstMessage, messageCount and cwd from SessionManager.listAll (pi's
// buildSessionInfo, which the /resume picker shows), tokens from estimateProjectedContextTokens of the
// session's projection at its leaf (what pi compares with the context window; null where pi throws), leafCount and
// entryCount from the loaded entries. Every file is read from a copy (pi's loader may append a newline).
import { copyFileSync, mkdtempSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { piCore } from "./pi.mjs";

const sm = await piCore("session-manager.js");
const compaction = await piCore("compaction/compaction.js");

const scratch = mkdtempSync(join(tmpdir(), "sessiond-list-oracle-"));
let n = 0;
for (const file of process.argv.slice(2)) {
  try {
    const dir = join(scratch, `d${n++}`);
    mkdirSync(dir);
    const copy = join(dir, "session.jsonl");
    copyFileSync(file, copy);
    const [info] = await sm.SessionManager.listAll(dir);
    const manager = sm.SessionManager.open(copy, dir);
    let tokens = null;
    try {
      tokens = compaction.estimateProjectedContextTokens(manager.buildSessionProjection(), manager.getBranch()).tokens;
    } catch {
      // pi throws on this session (sessiond says null).
    }
    const entries = manager.getEntries();
    const hasChildren = new Set(entries.map((e) => e.parentId).filter((p) => p));
    process.stdout.write(
      `${JSON.stringify({
        file,
        name: info?.name ?? null,
        firstMessage: info?.firstMessage ?? null,
        messageCount: info?.messageCount ?? null,
        cwd: info?.cwd ?? null,
        tokens,
        entryCount: entries.length,
        leafCount: entries.filter((e) => !hasChildren.has(e.id)).length,
      })}\n`,
    );
  } catch (e) {
    process.stdout.write(`${JSON.stringify({ file, error: String(e && e.stack) })}\n`);
  }
}
