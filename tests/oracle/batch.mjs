// Batch pi oracle for the test suite: runs pi 1.6.0's own session functions on many {file, leaf} jobs in one node process.
//
//   SESSIOND_ORACLE_DIR=DIR node tests/oracle/batch.mjs < jobs.jsonl > results.jsonl
//
// DIR holds node_modules/@earendil-works/pi-coding-agent (a copy of ../shared/oracle after `npm install`).
// Input: one JSON object per line, {"file": PATH, "leaf": ID | null}; a missing or null leaf means pi's
// default leaf (the last entry in file order). Output: one JSON line per job, in input order:
//   {"file", "leaf", "version", "context": {messages, thinkingLevel, model}, "entries": [ids] | null,
//    "entryLines": [1-based line numbers of the context entries], "path": [ids of the root-to-leaf path] | null,
//    "leaves": [ids of entries with no children],
//    "tree": {"roots": [ids], "children": {id: [child ids in pi's getTree order]}} (default leaf, version >= 2 only)}
// It makes the same calls as oracle.mjs: loadEntriesFromFile on a copy of the file (pi's loader may append a
// newline to the file it reads), migrateSessionEntries, buildSessionContext and buildContextEntries.
// With "side": true the result also has "pathEntries" (the root-to-leaf path's entries as pi loaded and migrated
// them) and "tokens" (estimateProjectedContextTokens of buildSessionProjection at the leaf and that path, as
// tests/oracle/list.mjs counts a session's tokens; null where pi throws), for tests/compare.rs's side counts.
// For version-1 files pi invents random ids while migrating, so "entries" and "leaves" are null there;
// "entryLines" locates the same entries by their physical line, which is stable for every version.
// A job that throws prints {"file", "leaf", "error": MESSAGE} instead of failing the whole batch.
//
// A job with "op": "compact" ({file, leaf, keep}) runs pi's prepareCompaction on the leaf's path (as oracle.mjs
// compact does: an unknown leaf falls back to the last entry) and then pi's own compact() with a stand-in model
// that records each summarization request and answers "<<HISTORY>>" / "<<TURN PREFIX>>". It prints
// {"nothingToCompact": true} or {firstKeptEntryId, firstKeptEntryLine, tokensBefore, isSplitTurn, previousSummary,
// messagesToSummarize, turnPrefixMessages (counts), readFiles, modifiedFiles, conversation (serializeConversation
// of the messages to summarize), request: {systemPrompt, prompt, turnPrefixPrompt}, summary, details}.
//
// A job {"op": "fork", "file", "leaf" | "leafLine", "outDir"} runs pi's createBranchedSession on a copy of the
// file (loaded as SessionManager.open(copy, outDir) loads it, see forkSource) and prints {"file", "leaf", "path", "entries"}:
// the written file's lines parsed, header first (path and entries are null when pi writes no file).
// "leafLine" names the fork point by its 1-based physical line, which works for version-1 files too.
// While pi forks, crypto.randomUUID yields 00000001-..., 00000002-..., so re-created label ids are deterministic,
// and pi's random version-1 ids are translated to sessiond's (the 1-based line as 8 hex digits).
// With "ours": PATH the job compares that file with pi's instead of printing pi's entries, and prints
// {"file", "leaf", "piWrote": bool, "equal": bool, "diffs": [first differences]}. Lines are equal when their
// text is, or else when JSON.stringify(JSON.parse(line)) is (same values, same key order at every level);
// the headers are compared on type, version, cwd and key order (id, timestamp, parentSession differ by design).
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import crypto from "node:crypto";
import { syncBuiltinESMExports } from "node:module";
import { createInterface } from "node:readline";
import { piCore } from "./pi.mjs";

const sm = await piCore("session-manager.js");
const compaction = await piCore("compaction/compaction.js");
const utils = await piCore("compaction/utils.js");
const messagesModule = await piCore("messages.js");

const scratch = mkdtempSync(join(tmpdir(), "sessiond-batch-oracle-"));
let copyCounter = 0;

// Physical 1-based line numbers of the lines pi's loader turns into entries, in the same order
// (blank lines, unparsable lines and JSON values that are falsy are skipped, exactly as pi skips them).
function entryLineNumbers(text) {
  const lines = text.split("\n");
  const out = [];
  lines.forEach((line, index) => {
    if (!line.trim()) return;
    let value;
    try {
      value = JSON.parse(line);
    } catch {
      return;
    }
    if (value) out.push(index + 1);
  });
  return out;
}

function pathTo(entries, byId, leafId) {
  const out = [];
  let cur = leafId ? byId.get(leafId) : undefined;
  if (!cur) cur = entries[entries.length - 1];
  while (cur) {
    out.push(cur);
    cur = cur.parentId ? byId.get(cur.parentId) : undefined;
  }
  return out.reverse();
}

// "pathEntries" and "tokens" of a "side" job.
function sideOf(entries, byId, leaf) {
  const path = pathTo(entries, byId, leaf);
  return { pathEntries: path, tokens: projectedTokens(entries, byId, path) };
}

// pi's projected context tokens at the end of `path` (null where pi throws).
function projectedTokens(entries, byId, path) {
  try {
    const leafId = path.length > 0 ? path[path.length - 1].id : null;
    return compaction.estimateProjectedContextTokens(sm.buildSessionProjection(entries, leafId, byId), path).tokens;
  } catch {
    return null;
  }
}

const ZERO_USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

async function runCompactJob(job, entries, byId, lineOf) {
  const path = pathTo(entries, byId, job.leaf ?? undefined);
  const keep = job.keep ?? compaction.DEFAULT_COMPACTION_SETTINGS.keepRecentTokens;
  const prep = compaction.prepareCompaction(path, { ...compaction.DEFAULT_COMPACTION_SETTINGS, keepRecentTokens: keep });
  if (!prep) return { file: job.file, leaf: job.leaf ?? null, keep, nothingToCompact: true };
  const conversation = utils.serializeConversation(messagesModule.convertToLlm(prep.messagesToSummarize));
  const request = { systemPrompt: null, prompt: null, turnPrefixPrompt: null };
  const streamFn = async (_model, context) => {
    const [system, user] = context.messages;
    const text = user.content[0].text;
    request.systemPrompt = system.content;
    const turn = text.startsWith("# Conversation\n");
    if (turn) request.turnPrefixPrompt = text;
    else request.prompt = text;
    const answer = turn ? "<<TURN PREFIX>>" : "<<HISTORY>>";
    return {
      result: async () => ({ role: "assistant", stopReason: "stop", content: [{ type: "text", text: answer }], usage: ZERO_USAGE }),
    };
  };
  const result = await compaction.compact(prep, { reasoning: false, id: "stand-in", provider: "stand-in" }, "key", undefined, undefined, undefined, undefined, streamFn);
  const { readFiles, modifiedFiles } = utils.computeFileLists(prep.fileOps);
  const firstKept = byId.get(prep.firstKeptEntryId);
  return {
    file: job.file,
    leaf: job.leaf ?? null,
    keep,
    firstKeptEntryId: prep.firstKeptEntryId,
    firstKeptEntryLine: (firstKept && lineOf.get(firstKept)) ?? null,
    tokensBefore: prep.tokensBefore,
    isSplitTurn: prep.isSplitTurn,
    previousSummary: prep.previousSummary ?? null,
    messagesToSummarize: prep.messagesToSummarize.length,
    turnPrefixMessages: prep.turnPrefixMessages.length,
    readFiles,
    modifiedFiles,
    conversation,
    request,
    summary: result.summary,
    details: result.details,
  };
}

async function runJob(job) {
  const leaf = job.leaf ?? undefined;
  const copy = join(scratch, `input-${copyCounter++}.jsonl`);
  copyFileSync(job.file, copy);
  const text = readFileSync(copy, "utf8");
  const fileEntries = sm.loadEntriesFromFile(copy);
  rmSync(copy, { force: true });

  const lineNumbers = entryLineNumbers(text);
  const lineOf = new Map();
  if (lineNumbers.length === fileEntries.length) {
    fileEntries.forEach((entry, i) => lineOf.set(entry, lineNumbers[i]));
  }
  const header = fileEntries.find((e) => e.type === "session");
  const version = header?.version ?? 1;

  sm.migrateSessionEntries(fileEntries);
  const entries = fileEntries.filter((e) => e.type !== "session");
  const byId = new Map(entries.map((e) => [e.id, e]));
  if (job.op === "compact") return runCompactJob(job, entries, byId, lineOf);

  const { messages, thinkingLevel, model } = sm.buildSessionContext(entries, leaf, byId);
  const contextEntries = sm.buildContextEntries(entries, leaf, byId);

  const hasChildren = new Set(entries.map((e) => e.parentId).filter((p) => p));
  const stableIds = version >= 2;
  // pi's tree order (getTree sorts siblings by timestamp with a comparator that can give NaN),
  // once per file: with the default leaf only, and only where ids are stable.
  let tree;
  if (stableIds && job.leaf == null) {
    const cwd = typeof header?.cwd === "string" ? header.cwd : process.cwd();
    const manager = new sm.SessionManager(cwd, scratch, undefined, false, undefined, [...fileEntries]);
    const children = {};
    const stack = manager.getTree();
    const roots = stack.map((n) => n.entry.id);
    while (stack.length > 0) {
      const node = stack.pop();
      children[node.entry.id] = node.children.map((c) => c.entry.id);
      stack.push(...node.children);
    }
    tree = { roots, children };
  }
  return {
    file: job.file,
    leaf: job.leaf ?? null,
    version,
    context: { messages, thinkingLevel, model },
    entries: stableIds ? contextEntries.map((e) => e.id) : null,
    entryLines: contextEntries.map((e) => lineOf.get(e) ?? null),
    path: stableIds ? pathTo(entries, byId, job.leaf ?? undefined).map((e) => e.id) : null,
    leaves: stableIds ? entries.filter((e) => !hasChildren.has(e.id)).map((e) => e.id) : null,
    ...(tree ? { tree } : {}),
    ...(job.side ? sideOf(entries, byId, job.leaf ?? undefined) : {}),
  };
}

function withCountingUuids(fn) {
  const real = crypto.randomUUID;
  let n = 0;
  crypto.randomUUID = () => `${(++n).toString(16).padStart(8, "0")}-0000-0000-0000-000000000000`;
  syncBuiltinESMExports();
  try {
    return fn();
  } finally {
    crypto.randomUUID = real;
    syncBuiltinESMExports();
  }
}

// A file is loaded and migrated once, as SessionManager.open does, then every fork of it starts from a
// SessionManager built on those entries (createBranchedSession reads entries and never mutates them).
const forkSources = new Map();
function forkSource(file) {
  let src = forkSources.get(file);
  if (src) return src;
  const copy = join(scratch, `input-${copyCounter++}.jsonl`);
  copyFileSync(file, copy);
  const text = readFileSync(copy, "utf8");
  const lineNumbers = entryLineNumbers(text);
  const entries = sm.loadEntriesFromFile(copy);
  const header = entries.find((e) => e.type === "session");
  const version = header?.version ?? 1;
  sm.migrateSessionEntries(entries);
  const aligned = lineNumbers.length === entries.length;
  const ourIds = new Map();
  if (version < 2 && aligned) entries.forEach((e, i) => ourIds.set(e.id, lineNumbers[i].toString(16).padStart(8, "0")));
  const cwd = typeof header?.cwd === "string" ? header.cwd : process.cwd();
  src = { copy, lineNumbers, entries, aligned, ourIds, cwd };
  forkSources.set(file, src);
  return src;
}

function runFork(job) {
  const { copy, lineNumbers, entries, aligned, ourIds, cwd } = forkSource(job.file);
  const manager = new sm.SessionManager(cwd, job.outDir, copy, true, undefined, [...entries]);
  let leaf = job.leaf;
  if (job.leafLine !== undefined) {
    const at = lineNumbers.indexOf(job.leafLine);
    if (at < 0 || !aligned) throw new Error(`no entry on line ${job.leafLine}`);
    leaf = entries[at].id;
  }
  const path = withCountingUuids(() => manager.createBranchedSession(leaf)) ?? null;
  if (!path || !existsSync(path)) {
    return job.ours ? { file: job.file, leaf, piWrote: false, equal: false, diffs: [] } : { file: job.file, leaf, path: null, entries: null };
  }
  let lines = readFileSync(path, "utf8").split("\n").filter((l) => l.trim());
  rmSync(path, { force: true });
  if (ourIds.size) {
    lines = lines.map((l, i) => {
      if (i === 0) return l;
      const e = JSON.parse(l);
      for (const k of ["id", "parentId", "firstKeptEntryId", "targetId"]) {
        if (typeof e[k] === "string" && ourIds.has(e[k])) e[k] = ourIds.get(e[k]);
      }
      return JSON.stringify(e);
    });
  }
  if (!job.ours) return { file: job.file, leaf, path, entries: lines.map((l) => JSON.parse(l)) };
  const ours = readFileSync(job.ours, "utf8").split("\n").filter((l) => l.trim());
  const diffs = [];
  if (ours.length !== lines.length) diffs.push(`ours has ${ours.length} lines, pi ${lines.length}`);
  const h = [JSON.parse(ours[0]), JSON.parse(lines[0])];
  const hk = h.map((x) => Object.keys(x).join(","));
  if (hk[0] !== hk[1]) diffs.push(`header keys ${hk[0]} vs pi ${hk[1]}`);
  for (const k of ["type", "version", "cwd"]) {
    if (JSON.stringify(h[0][k]) !== JSON.stringify(h[1][k])) diffs.push(`header ${k}: ${h[0][k]} vs pi ${h[1][k]}`);
  }
  for (let i = 1; i < Math.min(ours.length, lines.length) && diffs.length < 5; i++) {
    if (ours[i] === lines[i]) continue;
    if (JSON.stringify(JSON.parse(ours[i])) === JSON.stringify(JSON.parse(lines[i]))) continue;
    diffs.push(`line ${i + 1}: ${ours[i].slice(0, 400)} vs pi ${lines[i].slice(0, 400)}`);
  }
  return { file: job.file, leaf, piWrote: true, equal: diffs.length === 0, diffs };
}

const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of input) {
  if (!line.trim()) continue;
  const job = JSON.parse(line);
  let result;
  try {
    result = job.op === "fork" ? runFork(job) : await runJob(job);
  } catch (error) {
    result = { file: job.file, leaf: job.leaf ?? null, error: String(error?.stack ?? error) };
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
rmSync(scratch, { recursive: true, force: true });
