// Builds the Codex referee corpus: runs the real Codex CLI (as scripts/codex-deps.sh installs it)
// with an isolated HOME and CODEX_HOME against the scripted Responses API server
// (tests/codex/model-server.mjs) on 127.0.0.1, through the scenarios sessiond's Codex dialect
// must read, and writes what happened to OUTDIR/manifest.json.
//
//   node tests/codex/corpus.mjs OUTDIR
//
// Needs the install of scripts/codex-deps.sh (found through SESSIOND_CODEX_DIR, else .tools/codex
// in this repository) and, for reading Codex's SQLite state read-only, python3 (without it the
// manifest's `current` maps are null). OUTDIR must not exist or be empty. Steps run one at a time;
// each has a time limit, the whole run has one (CORPUS_DEADLINE_MS, default 300000), and every
// process started is killed by process group when its step ends, when the run fails and at exit;
// last, any process still carrying OUTDIR's CODEX_HOME in its environment is killed by id.
//
// OUTDIR/
//   home/.codex/…            CODEX_HOME of the current Codex (0.171.0): sessions/, state_5.sqlite, …
//   legacy/home/.codex/…     CODEX_HOME of the legacy Codex (0.144.6) steps and their resumes
//   nostate/home/.codex/…    a copy of home/ without state_*.sqlite, resumed once
//   work/ work2/ legacy/work/  the working directories (trusted in config.toml)
//   script.json requests.jsonl  the model server's script and its record of every request
//   logs/STEP.*               each step's stdout/stderr (app-server steps: the JSON-RPC exchange)
//   manifest.json
//
// manifest.json: {codex: {current, legacy}, homes, steps: [STEP], requests: [REQUEST], threads}.
//   STEP = {name, codex (version), home, kind: exec|app-server, args | calls, exit, thread,
//           turns (turn ids started in the step), files_before, files_after (FILE maps),
//           current_before, current_after ({thread id: rollout path} from state_*.sqlite),
//           requests ([n]), resumed_from (LEAF | null: where the stored thread the step continued
//           ended; null for a new thread), expect (what the step demonstrates), result (checks)}
//   FILE = {path, size, lines, last_ordinal, thread_id, history_base, forked_from_id}
//   REQUEST = {n, step, codex, request_kind, history_initialization, thread_id, window_id,
//              leaf: LEAF | null, resumed_from: LEAF | null, input: [...], instructions}
//   LEAF = {file (relative to OUTDIR), line (0-based), ordinal (null in legacy files), byte_end}
// A request's `leaf` is the line just before the first line that records its answer (the server
// gives request n's output items the ids item_<n>_<k>): the state of the thread the request was
// built from. `resumed_from` is set on the first request of a step that continues a stored thread.
// All paths are relative to OUTDIR.
import { spawn, spawnSync } from "node:child_process";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..", "..");
const outArg = process.argv[2];
if (!outArg) {
  console.error("usage: corpus.mjs OUTDIR");
  process.exit(2);
}
const OUT = resolve(outArg);
if (existsSync(OUT) && readdirSync(OUT).length > 0) {
  console.error(`corpus.mjs: ${OUT} is not empty`);
  process.exit(2);
}
const toolDir = process.env.SESSIOND_CODEX_DIR || join(repo, ".tools", "codex");
const binPath = "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
const CODEX = { current: join(toolDir, "node_modules", binPath), legacy: join(toolDir, "node_modules", "codex-legacy", "node_modules", binPath) };
const VERSION = { current: "0.171.0", legacy: "0.144.6" };
for (const [k, b] of Object.entries(CODEX)) {
  if (!existsSync(b)) {
    console.error(`corpus.mjs: ${b} is missing; run scripts/codex-deps.sh (or set SESSIOND_CODEX_DIR)`);
    process.exit(2);
  }
}
const DEADLINE = Date.now() + Number(process.env.CORPUS_DEADLINE_MS || 300000);
const STEP_MS = 60000;

const HOMES = { main: join(OUT, "home"), legacy: join(OUT, "legacy", "home") };
const WORK = { main: join(OUT, "work"), main2: join(OUT, "work2"), legacy: join(OUT, "legacy", "work") };
const LOGS = join(OUT, "logs");
for (const d of [...Object.values(HOMES).map((h) => join(h, ".codex")), ...Object.values(WORK), LOGS]) mkdirSync(d, { recursive: true });
const rel = (p) => relative(OUT, p);

// ---------------------------------------------------------------------------------------------
// Processes: each in its own process group, killed with it.
const children = new Set();
function track(child) {
  children.add(child);
  child.on("exit", () => children.delete(child));
  return child;
}
function killGroup(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    try {
      child.kill("SIGKILL");
    } catch {}
  }
}
function sweep() {
  for (const c of [...children]) killGroup(c);
  // Codex may start tool processes in their own sessions: find what still carries our CODEX_HOME.
  const marks = Object.values(HOMES).map((h) => `CODEX_HOME=${join(h, ".codex")}`);
  let pids = [];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number);
  } catch {}
  for (const pid of pids) {
    if (pid === process.pid) continue;
    let env;
    try {
      env = readFileSync(`/proc/${pid}/environ`, "latin1");
    } catch {
      continue;
    }
    const vars = env.split("\0");
    if (marks.some((m) => vars.includes(m))) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
  }
}
process.on("exit", sweep);
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    sweep();
    process.exit(130);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function remaining() {
  const left = DEADLINE - Date.now();
  if (left <= 0) throw new Error("the corpus run exceeded its deadline (CORPUS_DEADLINE_MS)");
  return Math.min(left, STEP_MS);
}

// ---------------------------------------------------------------------------------------------
// The model server.
const SCRIPT = {
  prompts: {
    "run a tool": [{ tool: { cmd: "echo hello-from-tool" } }, { text: "The tool said hello." }],
    "two tools": [{ tool: { cmd: "echo one" } }, { tool: { cmd: "echo two" } }, { text: "Both tools ran." }],
    "say hi": [{ text: "hi there" }],
    "say hi again": [{ text: "hi again" }],
    "fork: say hi": [{ text: "hi from the fork" }],
    "after revert": [{ text: "answered after the revert" }],
    // The tool call reports a context this large, so that with model_auto_compact_token_limit below
    // it Codex compacts before it samples again, in the middle of the turn.
    "compact me": [{ tool: { cmd: "echo big" }, inputTokens: 200000 }, { text: "unreached: after compaction the summary is the last user input" }],
    hang: [{ tool: { cmd: "sleep 30" } }, { text: "unreached: the turn is interrupted" }],
    slow: [{ text: "a slow answer", delayMs: 4000 }],
  },
  prefixes: {
    // Codex's compaction request ends with its summarization prompt as a user message.
    "You are performing a CONTEXT CHECKPOINT COMPACTION": [{ text: "SUMMARY: the user ran echo commands and asked for greetings." }],
    // After compaction the summary message is the last user input of the turn that goes on.
    "Another language model started to solve this problem": [{ text: "Going on after the summary." }],
  },
  default: [{ text: "default answer" }],
};
writeFileSync(join(OUT, "script.json"), JSON.stringify(SCRIPT, null, 2) + "\n");
const REQUESTS = join(OUT, "requests.jsonl");
writeFileSync(REQUESTS, "");

async function startServer() {
  const child = track(
    spawn(process.execPath, [join(here, "model-server.mjs"), join(OUT, "script.json"), REQUESTS], {
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    }),
  );
  child.stderr.on("data", (d) => appendFileSync(join(LOGS, "model-server.stderr"), d));
  const port = await new Promise((resolvePort, reject) => {
    let buf = "";
    const t = setTimeout(() => reject(new Error("the model server did not print its port")), 10000);
    child.stdout.on("data", (d) => {
      buf += d;
      const i = buf.indexOf("\n");
      if (i >= 0) {
        clearTimeout(t);
        resolvePort(JSON.parse(buf.slice(0, i)).port);
      }
    });
    child.on("exit", (c) => reject(new Error(`the model server exited (${c})`)));
  });
  return { child, port };
}

function readRequests() {
  return readFileSync(REQUESTS, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

function configToml(port, works) {
  const trusted = works.map((w) => `[projects."${w}"]\ntrust_level = "trusted"\n`).join("\n");
  return `model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:${port}/v1"
wire_api = "responses"
env_key = "SESSIOND_CODEX_FAKE_KEY"
request_max_retries = 0
stream_max_retries = 0

${trusted}`;
}

// ---------------------------------------------------------------------------------------------
// Rollout files, SQLite state, locks.
function rolloutFiles(home) {
  const root = join(home, ".codex", "sessions");
  const out = [];
  const walk = (d) => {
    if (!existsSync(d)) return;
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.startsWith("rollout-") && e.name.endsWith(".jsonl")) out.push(p);
    }
  };
  walk(root);
  return out.sort();
}

/** Lines of a rollout file with their byte ranges (a final line without newline is kept). */
function readLines(path) {
  const buf = readFileSync(path);
  const lines = [];
  let start = 0;
  while (start < buf.length) {
    let end = buf.indexOf(10, start);
    const last = end < 0;
    if (last) end = buf.length;
    const text = buf.subarray(start, end).toString("utf8");
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {}
    lines.push({ start, end: last ? end : end + 1, json });
    start = last ? end : end + 1;
  }
  return lines;
}

function fileInfo(path) {
  const lines = readLines(path);
  const meta = lines[0]?.json?.type === "session_meta" ? lines[0].json.payload : {};
  let lastOrdinal = null;
  for (let i = lines.length - 1; i >= 0; i--) {
    if (lines[i].json && Number.isInteger(lines[i].json.ordinal)) {
      lastOrdinal = lines[i].json.ordinal;
      break;
    }
  }
  return {
    path: rel(path),
    size: statSync(path).size,
    lines: lines.length,
    last_ordinal: lastOrdinal,
    thread_id: meta.id ?? null,
    history_base: meta.history_base ?? null,
    forked_from_id: meta.forked_from_id ?? null,
  };
}

function snapshot(home) {
  const files = {};
  for (const p of rolloutFiles(home)) files[rel(p)] = fileInfo(p);
  return files;
}

/** {thread id: rollout_path} from Codex's state database, opened read-only; null without python3. */
function currentSegments(home) {
  const dir = join(home, ".codex");
  const dbs = existsSync(dir) ? readdirSync(dir).filter((n) => /^state_\d+\.sqlite$/.test(n)) : [];
  if (dbs.length === 0) return {};
  const db = join(dir, dbs.sort((a, b) => Number(a.match(/\d+/)[0]) - Number(b.match(/\d+/)[0])).at(-1));
  const code =
    "import json,sqlite3,sys\n" +
    "c=sqlite3.connect('file:'+sys.argv[1]+'?mode=ro',uri=True)\n" +
    "print(json.dumps(dict(c.execute('select id, rollout_path from threads'))))\n";
  const r = spawnSync("python3", ["-c", code, db], { encoding: "utf8", timeout: 10000 });
  if (r.status !== 0) return null;
  const map = JSON.parse(r.stdout);
  for (const k of Object.keys(map)) map[k] = map[k].startsWith(OUT) ? rel(map[k]) : map[k];
  return map;
}

/** The writer-lock directory and, on Linux, the /proc/locks entries on its files. */
function lockEvidence(home) {
  const dir = join(home, ".codex", "thread-writer-locks");
  if (!existsSync(dir)) return null;
  const files = readdirSync(dir).sort();
  const inodes = {};
  for (const f of files) inodes[String(statSync(join(dir, f)).ino)] = f;
  let held = [];
  try {
    held = readFileSync("/proc/locks", "utf8")
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f.length >= 6)
      .map((f) => ({ kind: f[1], mode: f[3], pid: Number(f[4]), inode: f[5].split(":").at(-1) }))
      .filter((l) => inodes[l.inode])
      .map((l) => ({ file: inodes[l.inode], lock: l.kind, mode: l.mode, pid: l.pid }));
  } catch {}
  return { dir: rel(dir), files, held };
}

// ---------------------------------------------------------------------------------------------
// Running Codex.
function envFor(home) {
  const env = {};
  for (const k of ["PATH", "LANG", "LC_ALL", "TERM", "TZ"]) if (process.env[k] !== undefined) env[k] = process.env[k];
  return { ...env, HOME: home, CODEX_HOME: join(home, ".codex"), SESSIOND_CODEX_FAKE_KEY: "sessiond-fake-key", NO_COLOR: "1" };
}

function runExec(step, which, home, cwd, args) {
  return new Promise((resolveRun) => {
    const child = track(
      spawn(CODEX[which], args, { cwd, env: envFor(home), stdio: ["ignore", "pipe", "pipe"], detached: true }),
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const limit = remaining();
    const timer = setTimeout(() => {
      stderr += `\n[corpus: killed after ${limit} ms]\n`;
      killGroup(child);
    }, limit);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      killGroup(child); // anything the step left in its group
      writeFileSync(join(LOGS, `${step}.stdout`), stdout);
      writeFileSync(join(LOGS, `${step}.stderr`), stderr);
      let thread = null;
      for (const l of stdout.split("\n")) {
        try {
          const e = JSON.parse(l);
          if (e.type === "thread.started") thread = e.thread_id;
        } catch {}
      }
      resolveRun({ exit: code ?? signal, thread, stderr });
    });
  });
}

/** A JSON-RPC session with `codex app-server` over stdio. */
class AppServer {
  constructor(step, which, home, cwd) {
    this.log = join(LOGS, `${step}.jsonrpc.jsonl`);
    this.child = track(
      spawn(CODEX[which], ["app-server"], { cwd, env: envFor(home), stdio: ["pipe", "pipe", "pipe"], detached: true }),
    );
    this.child.stderr.on("data", (d) => appendFileSync(join(LOGS, `${step}.stderr`), d));
    this.pending = new Map();
    this.waiters = [];
    this.notes = [];
    this.next = 1;
    let buf = "";
    this.child.stdout.on("data", (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) this.receive(JSON.parse(line));
      }
    });
    this.exited = new Promise((r) => this.child.on("exit", (c, s) => r(c ?? s)));
  }
  receive(m) {
    appendFileSync(this.log, JSON.stringify({ in: m }) + "\n");
    if (m.id !== undefined && m.method === undefined) {
      const p = this.pending.get(m.id);
      if (p) {
        this.pending.delete(m.id);
        p(m);
      }
    } else if (m.id !== undefined) {
      // A request from the server (an approval): none is expected with approval_policy = never.
      this.send({ id: m.id, error: { code: -32601, message: "the corpus answers no server requests" } });
    } else {
      this.notes.push(m);
      for (const w of [...this.waiters]) {
        if (w.match(m)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(m);
        }
      }
    }
  }
  send(m) {
    appendFileSync(this.log, JSON.stringify({ out: m }) + "\n");
    this.child.stdin.write(JSON.stringify(m) + "\n");
  }
  async call(method, params) {
    const id = this.next++;
    const reply = new Promise((r) => this.pending.set(id, r));
    this.send({ id, method, params });
    const m = await Promise.race([reply, sleep(remaining()).then(() => ({ error: { message: `no answer to ${method}` } }))]);
    if (m.error) throw new Error(`${method}: ${m.error.message ?? JSON.stringify(m.error)}`);
    return m.result;
  }
  /** The first notification (already received or to come) that matches. */
  waitFor(match, what) {
    const seen = this.notes.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolveWait, reject) => {
      const w = { match, resolve: resolveWait };
      this.waiters.push(w);
      sleep(remaining()).then(() => reject(new Error(`no ${what} notification`)));
    });
  }
  async start() {
    await this.call("initialize", {
      clientInfo: { name: "sessiond-corpus", title: null, version: "0" },
      capabilities: { experimentalApi: true, requestAttestation: false },
    });
    this.send({ method: "initialized" });
  }
  async close() {
    this.child.stdin.end();
    const code = await Promise.race([this.exited, sleep(5000).then(() => "killed")]);
    killGroup(this.child);
    return code;
  }
}

const turnCompleted = (threadId, turnId) => (m) =>
  m.method === "turn/completed" && m.params?.threadId === threadId && (!turnId || m.params?.turn?.id === turnId);

// ---------------------------------------------------------------------------------------------
// Steps.
const manifest = {
  codex: VERSION,
  homes: { main: rel(join(HOMES.main, ".codex")), legacy: rel(join(HOMES.legacy, ".codex")), nostate: "nostate/home/.codex" },
  steps: [],
  requests: [],
  threads: {},
};
const threads = manifest.threads; // name -> thread id

async function step(name, which, homeKey, expect, body) {
  const home = HOMES[homeKey];
  const before = snapshot(home);
  const current_before = currentSegments(home);
  const firstRequest = readRequests().length + 1;
  const rec = { name, codex: VERSION[which], home: homeKey, expect, files_before: before, current_before };
  const t0 = Date.now();
  try {
    Object.assign(rec, await body(rec));
  } catch (e) {
    rec.error = String(e.message ?? e);
  }
  rec.ms = Date.now() - t0;
  rec.files_after = snapshot(home);
  rec.current_after = currentSegments(home);
  const all = readRequests();
  rec.requests = all.slice(firstRequest - 1).map((r) => r.n);
  // Turn ids started in this step: task_started lines written during it (a legacy fork's copies
  // of its parent's task_started lines carry new timestamps and are counted too).
  rec.turns = [];
  for (const p of Object.keys(rec.files_after)) {
    for (const l of readLines(join(OUT, p)).slice(before[p]?.lines ?? 0)) {
      const j = l.json;
      if (j?.type === "event_msg" && j.payload?.type === "task_started" && Date.parse(j.timestamp) >= t0 - 1000) {
        rec.turns.push(j.payload.turn_id);
      }
    }
  }
  manifest.steps.push(rec);
  const status = rec.error ? `FAILED: ${rec.error}` : `exit ${rec.exit ?? "-"}`;
  console.error(`corpus: ${name} (${VERSION[which]}): ${rec.requests.length} requests, ${status}, ${rec.ms} ms`);
  return rec;
}

const execStep = (name, which, homeKey, cwd, args, expect, after) =>
  step(name, which, homeKey, expect, async () => {
    const full = ["exec", "--skip-git-repo-check", "--json", ...args];
    const r = await runExec(name, which, HOMES[homeKey], cwd, full);
    const out = { kind: "exec", args: full, exit: r.exit, thread: r.thread };
    if (r.exit !== 0) out.stderr_tail = r.stderr.split("\n").filter((l) => l && !l.startsWith("WARNING")).slice(0, 4);
    if (after) Object.assign(out, await after(r));
    return out;
  });

const appStep = (name, which, homeKey, cwd, expect, script) =>
  step(name, which, homeKey, expect, async () => {
    const app = new AppServer(name, which, HOMES[homeKey], cwd);
    const calls = [];
    const call = async (method, params) => {
      const result = await app.call(method, params);
      calls.push({ method, params });
      return result;
    };
    let out;
    try {
      await app.start();
      out = (await script(app, call)) ?? {};
    } finally {
      out = { ...(out ?? {}), exit: await app.close() };
    }
    return { kind: "app-server", calls, ...out };
  });

/** Runs a turn in an app-server session and waits for it to complete. */
async function appTurn(app, call, threadId, text) {
  const r = await call("turn/start", { threadId, input: [{ type: "text", text, text_elements: [] }] });
  const done = await app.waitFor(turnCompleted(threadId, r.turn.id), "turn/completed");
  return { turn: r.turn.id, status: done.params.turn.status };
}

async function main() {
  const server = await startServer();
  writeFileSync(join(HOMES.main, ".codex", "config.toml"), configToml(server.port, [WORK.main, WORK.main2]));
  writeFileSync(join(HOMES.legacy, ".codex", "config.toml"), configToml(server.port, [WORK.legacy]));
  const C = "current";

  // Thread A: a new thread with a tool call, then resumes.
  const s1 = await execStep("new", C, "main", WORK.main, ["run a tool"], "a new thread: a tool call and its output, then an answer");
  threads.A = s1.thread;
  const A = threads.A;
  await execStep("resume-1", C, "main", WORK.main, ["resume", A, "say hi"], "the first resume: appends to the same file");
  await execStep("resume-2-autocompact", C, "main", WORK.main,
    ["-c", "model_auto_compact_token_limit=50000", "resume", A, "compact me"],
    "the second resume; the tool call reports 200000 input tokens, so Codex compacts before it samples again (mid-turn): a compaction request, a `compacted` line, and the turn goes on from the replacement history");
  await execStep("resume-3", C, "main", WORK.main, ["resume", A, "say hi again"], "a resume after compaction: the replacement history is the base");
  await appStep("compact-manual", C, "main", WORK.main, "manual compaction through app-server thread/compact/start", async (app, call) => {
    await call("thread/resume", { threadId: A, excludeTurns: true });
    // A loaded thread holds its writer lock while idle, as well as while a turn runs.
    const locks = lockEvidence(HOMES.main);
    await call("thread/compact/start", { threadId: A });
    const done = await app.waitFor(turnCompleted(A), "turn/completed");
    return { compaction_turn: done.params.turn.id, status: done.params.turn.status, locks_while_loaded: locks };
  });
  await execStep("resume-4-tools", C, "main", WORK.main, ["resume", A, "two tools"], "a resume after the manual compaction, with two tool calls in one turn");
  await execStep("resume-5-cwd", C, "main", WORK.main2, ["resume", A, "say hi"],
    "a resume from another working directory: Codex records a context update (environment_context) and a world_state diff before the prompt");
  await appStep("interrupt", C, "main", WORK.main, "a turn interrupted while its tool runs (app-server turn/interrupt)", async (app, call) => {
    await call("thread/resume", { threadId: A, excludeTurns: true });
    const r = await call("turn/start", { threadId: A, input: [{ type: "text", text: "hang", text_elements: [] }] });
    await app.waitFor((m) => m.method === "item/started" && m.params?.item?.type === "commandExecution", "item/started");
    await sleep(500);
    await call("turn/interrupt", { threadId: A, turnId: r.turn.id });
    const done = await app.waitFor(turnCompleted(A, r.turn.id), "turn/completed");
    return { status: done.params.turn.status };
  });
  const afterInterrupt = await execStep("resume-6", C, "main", WORK.main, ["resume", A, "say hi"], "a resume after the interrupted turn");

  // Forks.
  const f1 = await execStep("fork", C, "main", WORK.main, ["fork", A, "fork: say hi"],
    "codex exec fork: a new thread file whose session_meta has history_base at the end of the parent file");
  threads.F = f1.thread;
  await execStep("fork-resume", C, "main", WORK.main, ["resume", threads.F, "run a tool"], "a resume of the fork: the parent prefix then the fork's own lines");
  const resume1 = manifest.steps.find((s) => s.name === "resume-1");
  await appStep("fork-mid", C, "main", WORK.main, "app-server thread/fork with lastTurnId: the prefix ends in the middle of the parent file", async (app, call) => {
    const r = await call("thread/fork", { threadId: A, lastTurnId: resume1.turns[0], excludeTurns: true });
    threads.G = r.thread.id;
    return { thread: r.thread.id, turn: await appTurn(app, call, r.thread.id, "fork: say hi") };
  });

  // Reverts: new segment files of thread A.
  await appStep("revert", C, "main", WORK.main, "app-server thread/revert before the latest turn, then a turn: a new segment file of the same thread", async (app, call) => {
    await call("thread/resume", { threadId: A, excludeTurns: true });
    const rv = await call("thread/revert", { threadId: A, beforeTurnId: afterInterrupt.turns[0] });
    return { segment: rel(rv.thread.path ?? ""), turn: await appTurn(app, call, A, "after revert") };
  });
  const revertResume = await execStep("revert-resume", C, "main", WORK.main, ["resume", A, "say hi"],
    "codex exec resume after the revert: Codex continues the segment named by state_*.sqlite threads.rollout_path");
  await appStep("revert-in-segment", C, "main", WORK.main, "a second revert, before a turn recorded in the first segment: a segment whose history_base is a segment", async (app, call) => {
    await call("thread/resume", { threadId: A, excludeTurns: true });
    const rv = await call("thread/revert", { threadId: A, beforeTurnId: revertResume.turns[0] });
    return { segment: rel(rv.thread.path ?? ""), turn: await appTurn(app, call, A, "after revert") };
  });
  const resume4 = manifest.steps.find((s) => s.name === "resume-4-tools");
  await appStep("revert-across", C, "main", WORK.main, "a third revert, before a turn recorded in the original file while the current segment is the second one", async (app, call) => {
    await call("thread/resume", { threadId: A, excludeTurns: true });
    const rv = await call("thread/revert", { threadId: A, beforeTurnId: resume4.turns[0] });
    return { segment: rel(rv.thread.path ?? ""), turn: await appTurn(app, call, A, "after revert") };
  });
  await execStep("revert-resume-2", C, "main", WORK.main, ["resume", A, "run a tool"], "a resume of the latest segment");
  const fs1 = await execStep("fork-of-segment", C, "main", WORK.main, ["fork", A, "fork: say hi"],
    "a fork of a reverted thread: history_base names the thread, and its prefix is the current segment, whose own history_base goes on");
  threads.H = fs1.thread;

  // The refused second writer.
  await step("second-writer", C, "main", "a second codex exec resume of a thread whose turn is in flight is refused (thread-writer-locks)", async () => {
    const seen = readRequests().length;
    const first = runExec("second-writer.first", C, HOMES.main, WORK.main, ["exec", "--skip-git-repo-check", "--json", "resume", A, "slow"]);
    // Wait until the first writer's request reached the model (its answer is held back 4 s).
    const lockFile = join(HOMES.main, ".codex", "thread-writer-locks", `${A}.lock`);
    const t0 = Date.now();
    while (!(readRequests().length > seen && existsSync(lockFile))) {
      if (Date.now() - t0 > 20000) throw new Error("the first writer never reached the model");
      await sleep(100);
    }
    const locks = lockEvidence(HOMES.main);
    const sizes = snapshot(HOMES.main);
    const second = await runExec("second-writer.second", C, HOMES.main, WORK.main, ["exec", "--skip-git-repo-check", "--json", "resume", A, "say hi"]);
    const requestsDuringSecond = readRequests().length - seen - 1;
    const unchanged = JSON.stringify(snapshot(HOMES.main)) === JSON.stringify(sizes);
    const firstDone = await first;
    return {
      kind: "exec",
      exit: firstDone.exit,
      second: {
        exit: second.exit,
        refused: second.exit !== 0 && /already has an active writer/.test(second.stderr),
        stderr_tail: second.stderr.split("\n").filter((l) => /active writer/.test(l)).slice(0, 3),
        requests: requestsDuringSecond,
        files_unchanged: unchanged,
      },
      locks_while_first_runs: locks,
      locks_after: lockEvidence(HOMES.main),
    };
  });

  // Without Codex's state database: a copy of the home without state_*.sqlite, resumed there.
  HOMES.nostate = join(OUT, "nostate", "home");
  cpSync(HOMES.main, HOMES.nostate, { recursive: true });
  for (const n of readdirSync(join(HOMES.nostate, ".codex"))) {
    if (/^state_\d+\.sqlite/.test(n)) rmSync(join(HOMES.nostate, ".codex", n));
  }
  await execStep("no-state-resume", C, "nostate", WORK.main, ["resume", A, "say hi"],
    "a copy of the home without state_*.sqlite: which of thread A's files does Codex continue? (the one whose name sorts last)");

  // Legacy rollouts (Codex 0.144.6): no ordinals; rollback recorded in-file; forks copy the parent.
  const L = "legacy";
  const l1 = await execStep("legacy-new", L, "legacy", WORK.legacy, ["run a tool"], "a legacy rollout (no ordinals, no history_mode)");
  threads.L = l1.thread;
  await execStep("legacy-resume", L, "legacy", WORK.legacy, ["resume", threads.L, "say hi"], "a legacy resume");
  await appStep("legacy-rollback", L, "legacy", WORK.legacy, "app-server thread/rollback numTurns 1: event_msg thread_rolled_back appended to the file", async (app, call) => {
    await call("thread/resume", { threadId: threads.L });
    await call("thread/rollback", { threadId: threads.L, numTurns: 1 });
    return {};
  });
  await appStep("legacy-fork", L, "legacy", WORK.legacy, "a legacy fork: a new file that copies the parent's lines (its session_meta included) after its own session_meta", async (app, call) => {
    const r = await call("thread/fork", { threadId: threads.L });
    threads.LF = r.thread.id;
    return { thread: r.thread.id, turn: await appTurn(app, call, r.thread.id, "say hi again") };
  });
  await execStep("legacy-resume-current", C, "legacy", WORK.legacy, ["resume", threads.L, "say hi"],
    "the current Codex resumes the legacy file: it replays thread_rolled_back and appends legacy-shaped lines");
  await execStep("legacy-fork-resume-current", C, "legacy", WORK.legacy, ["resume", threads.LF, "run a tool"],
    "the current Codex resumes the legacy fork (copied parent lines, two session_meta lines, a copied rollback marker)");

  server.child.stdin.end();
  await Promise.race([new Promise((r) => server.child.on("exit", r)), sleep(3000)]);
  killGroup(server.child);
}

// ---------------------------------------------------------------------------------------------
// Requests: leaves and resume points.
function allLines() {
  const files = {};
  for (const home of Object.values(HOMES)) for (const p of rolloutFiles(home)) files[rel(p)] = readLines(p);
  return files;
}

function leafAt(file, lines, index) {
  if (index < 0) return null;
  const l = lines[index];
  return { file, line: index, ordinal: Number.isInteger(l.json?.ordinal) ? l.json.ordinal : null, byte_end: l.end };
}

function describeRequests() {
  const files = allLines();
  // Where each request's answer was recorded first.
  const answers = new Map();
  for (const [file, lines] of Object.entries(files)) {
    lines.forEach((l, i) => {
      const id = l.json?.type === "response_item" ? l.json.payload?.id : null;
      const m = typeof id === "string" ? id.match(/^item_(\d+)_\d+$/) : null;
      if (m && !answers.has(Number(m[1]))) answers.set(Number(m[1]), { file, line: i });
    });
  }
  const stepOf = new Map();
  for (const s of manifest.steps) for (const n of s.requests) stepOf.set(n, s);
  for (const r of readRequests()) {
    const s = stepOf.get(r.n);
    let body = null;
    try {
      body = JSON.parse(r.raw);
    } catch {}
    const meta = (() => {
      try {
        return JSON.parse(r.headers["x-codex-turn-metadata"] ?? "{}");
      } catch {
        return {};
      }
    })();
    const a = answers.get(r.n);
    manifest.requests.push({
      n: r.n,
      step: s?.name ?? null,
      codex: s?.codex ?? null,
      method: r.method,
      path: r.path,
      request_kind: meta.request_kind ?? null,
      history_initialization: meta.history_initialization ?? null,
      thread_id: r.headers["thread-id"] ?? r.headers["session_id"] ?? r.headers["session-id"] ?? null,
      window_id: r.headers["x-codex-window-id"] ?? null,
      leaf: a ? leafAt(a.file, files[a.file], a.line - 1) : null,
      resumed_from: null,
      instructions: body?.instructions ?? null,
      input: body?.input ?? null,
    });
  }
  // The first request of each step that continued a stored thread.
  for (const s of manifest.steps) {
    const n = s.requests[0];
    const req = manifest.requests.find((r) => r.n === n);
    if (!req || !req.leaf) continue;
    const file = req.leaf.file;
    const before = s.files_before[file];
    let from = null;
    if (before && before.lines > 0) {
      // The step appended to an existing file: it resumed from that file's last line.
      from = leafAt(file, files[file], before.lines - 1);
    } else {
      const info = s.files_after[file];
      if (info?.history_base) {
        // A new file (fork or revert segment) built on a prefix of another: its session_meta line.
        from = leafAt(file, files[file], 0);
      } else if (info?.forked_from_id) {
        // A legacy fork copies its parent: it continued from the parent's last line.
        const parent = Object.values(s.files_before).find((f) => f.thread_id === info.forked_from_id);
        if (parent) from = leafAt(parent.path, files[parent.path], parent.lines - 1);
      }
    }
    req.resumed_from = from;
    s.resumed_from = from;
  }
}

try {
  await main();
} catch (e) {
  manifest.error = String(e.stack ?? e);
  console.error(`corpus: ${manifest.error}`);
}
try {
  describeRequests();
} catch (e) {
  manifest.error = (manifest.error ? manifest.error + "\n" : "") + String(e.stack ?? e);
}
sweep();
writeFileSync(join(OUT, "manifest.json"), JSON.stringify(manifest, null, 1) + "\n");
const failed = manifest.error || manifest.steps.some((s) => s.error);
console.error(`corpus: ${manifest.steps.length} steps, ${manifest.requests.length} requests, manifest at ${join(OUT, "manifest.json")}`);
process.exit(failed ? 1 : 0);
