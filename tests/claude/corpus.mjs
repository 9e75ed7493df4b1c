// Builds the Claude Code referee corpus: runs the real `claude` binary headless against the
// scripted model server (model-server.mjs) and records what it wrote and what it sent.
//
//   node tests/claude/corpus.mjs OUTDIR        # → OUTDIR/manifest.json
//
// The binary is $SESSIOND_CLAUDE_BIN, or .tools/claude/node_modules/@anthropic-ai/claude-code/
// bin/claude.exe (scripts/claude-deps.sh installs it). Everything happens under OUTDIR: an
// isolated HOME (OUTDIR/home; transcripts land in OUTDIR/home/.claude/projects/<cwd, / as ->/),
// a fresh work directory as cwd (OUTDIR/work), the server's request log (OUTDIR/requests.jsonl).
// Only 127.0.0.1 is ever contacted. Every process is started in its own process group with a
// deadline and killed through that group; the whole run is bounded (RUN_DEADLINE_MS).
//
// Needs only Node 18+ (the machine's v20 does) and no npm package. Steps run one after another;
// the runs of one step run together (the concurrent pairs; a run with `after` starts once a given
// line is in the file). After each step the manifest records, per transcript file, the line
// counts before and after, and for each model request the step made:
//   * kind: "turn" (a streamed request answered by assistant lines), "compact", "side", …
//   * file, leaf: the transcript the answer was written to, and the parent of the first line
//     holding the answer (message.id = msg_N): the leaf the request was built from;
//   * linesBefore: how many lines that file had before the first answering line (truncate the
//     file there to see it as Claude saw it);
//   * messages: the request's `messages`, as sent.
// A run that resumes a stored session also records linesBeforeRun (the file when the run
// started), firstLineIndex (the run loaded the file somewhere between the two), firstLine (the first tree line it wrote: its prompt, or a line Claude writes on resume
// such as "No response requested.") and resumedFrom (firstLine's parent: the leaf Claude
// continued from).
//
// Then the leaf experiments: copies of HOME in which a transcript is edited so that the
// candidate rules for "which leaf does --resume continue" disagree (the last last-prompt's
// leafUuid, the last tree line in the file, the newest timestamp); `claude --resume` runs on each
// and the manifest records which leaf it continued from (its requests are listed with the others,
// marked `experiment`). These edited files are experiments, not corpus files.
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const RUN_TIMEOUT_MS = 120_000;
const RUN_DEADLINE_MS = 15 * 60_000;
const started = Date.now();

const outArg = process.argv[2];
if (!outArg) {
  console.error("usage: corpus.mjs OUTDIR");
  process.exit(2);
}
const out = resolve(outArg);
const bin = process.env.SESSIOND_CLAUDE_BIN || join(repo, ".tools/claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe");
if (!existsSync(bin)) {
  console.error(`corpus.mjs: no claude binary at ${bin} (run bash scripts/claude-deps.sh)`);
  process.exit(2);
}
rmSync(out, { recursive: true, force: true });
const home = join(out, "home");
const work = join(out, "work");
mkdirSync(join(home, ".claude"), { recursive: true });
mkdirSync(work, { recursive: true });
const projects = join(home, ".claude", "projects");
const projectDir = join(projects, work.replace(/[^A-Za-z0-9]/g, "-"));

// ---------------------------------------------------------------------------------------------
// Processes: every child in its own group, every group killed on the way out.
const groups = new Set();
function killAll() {
  for (const pid of groups) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {}
  }
  groups.clear();
}
process.on("exit", killAll);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(1));

function startServer(scriptPath, logPath) {
  const child = spawn(process.execPath, [join(here, "model-server.mjs"), scriptPath, logPath], {
    stdio: ["pipe", "pipe", "inherit"],
    detached: true,
  });
  groups.add(child.pid);
  return new Promise((ok, fail) => {
    const lines = createInterface({ input: child.stdout });
    const timer = setTimeout(() => fail(new Error("model server did not start")), 10_000);
    lines.once("line", (line) => {
      clearTimeout(timer);
      ok({ child, port: JSON.parse(line).port });
    });
    child.once("exit", (code) => fail(new Error(`model server exited with ${code}`)));
  });
}

function claudeEnv(homeDir, port) {
  return {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: homeDir,
    LANG: "C.UTF-8",
    TZ: "UTC",
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}`,
    ANTHROPIC_API_KEY: "sk-ant-referee-fake-key",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_ERROR_REPORTING: "1",
  };
}

/** Runs claude with args to its end (bounded); resolves {code, stdout, stderr, json}. With
 * `killWhen` {path, text}, the run is killed (its whole process group) once the file holds text. */
function runClaude(args, homeDir, port, killWhen = null) {
  const left = RUN_DEADLINE_MS - (Date.now() - started);
  if (left <= 0) throw new Error("corpus.mjs: the run's deadline passed");
  return new Promise((ok) => {
    const child = spawn(bin, args, { cwd: work, env: claudeEnv(homeDir, port), stdio: ["ignore", "pipe", "pipe"], detached: true });
    groups.add(child.pid);
    const so = [];
    const se = [];
    child.stdout.on("data", (d) => so.push(d));
    child.stderr.on("data", (d) => se.push(d));
    let timedOut = false;
    let killed = false;
    const poll = killWhen
      ? setInterval(() => {
          if (existsSync(killWhen.path) && readFileSync(killWhen.path, "utf8").includes(killWhen.text)) {
            killed = true;
            clearInterval(poll);
            try {
              process.kill(-child.pid, "SIGKILL");
            } catch {}
          }
        }, 20)
      : null;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
    }, Math.min(RUN_TIMEOUT_MS, left));
    child.on("close", (code) => {
      clearTimeout(timer);
      if (poll) clearInterval(poll);
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
      groups.delete(child.pid);
      const stdout = Buffer.concat(so).toString("utf8");
      let json = null;
      try {
        json = JSON.parse(stdout.trim().split("\n").pop());
      } catch {}
      ok({ code, timedOut, killed, stdout, stderr: Buffer.concat(se).toString("utf8"), json });
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Transcript files.
function walk(dir) {
  if (!existsSync(dir)) return [];
  const found = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) found.push(...walk(p));
    else if (e.name.endsWith(".jsonl") || e.name.endsWith(".meta.json")) found.push(p);
  }
  return found.sort();
}
function linesOf(path) {
  const text = readFileSync(path, "utf8");
  return text.split("\n").filter((l) => l !== "");
}
function snapshot(root = projects) {
  const snap = {};
  for (const p of walk(root)) snap[p] = p.endsWith(".jsonl") ? linesOf(p).length : statSync(p).size;
  return snap;
}
function parse(line) {
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// Requests.
function readRequests(logPath) {
  if (!existsSync(logPath)) return [];
  return linesOf(logPath).map((l) => JSON.parse(l));
}

/** For request n: the transcript line(s) holding its answer. */
function answerOf(n, files) {
  const id = `msg_${n}`;
  for (const path of files) {
    if (!path.endsWith(".jsonl")) continue;
    const lines = linesOf(path);
    for (let i = 0; i < lines.length; i++) {
      const e = parse(lines[i]);
      if (e && e.type === "assistant" && e.message && e.message.id === id) {
        const uuids = [];
        for (let j = i; j < lines.length; j++) {
          const f = parse(lines[j]);
          if (f && f.type === "assistant" && f.message && f.message.id === id) uuids.push(f.uuid);
        }
        return { file: path, leaf: e.parentUuid, linesBefore: i, answerUuids: uuids };
      }
    }
  }
  return null;
}

/** The compaction a compact request produced: the boundary and summary lines after it. */
function compactionIn(path, from) {
  const lines = linesOf(path);
  for (let i = from; i < lines.length; i++) {
    const e = parse(lines[i]);
    if (e && e.type === "system" && e.subtype === "compact_boundary") {
      // The summarized part ends where the preserved segment (kept verbatim) begins.
      const head = e.compactMetadata?.preservedSegment?.headUuid;
      let leaf = e.logicalParentUuid ?? null;
      if (head) {
        const h = lines.map(parse).find((x) => x && x.uuid === head);
        if (h) leaf = h.parentUuid ?? null;
      }
      return { file: path, boundary: e.uuid, logicalParentUuid: e.logicalParentUuid ?? null, leaf, preservedHead: head ?? null };
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// The script the model server answers from.
const PICTURE = join(work, "pixel.png");
const SCRIPT = {
  prompts: {
    "Run a command": [
      { thinking: "The user wants a command run; echo is enough.", text: "I will run it.", tools: [{ name: "Bash", input: { command: "echo referee-one", description: "Print a marker" } }] },
      { text: "The command printed referee-one." },
    ],
    "Run two commands": [
      { text: "Two at once.", tools: [
        { name: "Bash", input: { command: "echo alpha", description: "Print alpha" } },
        { name: "Bash", input: { command: "echo beta", description: "Print beta" } },
      ] },
      { thinking: "Both printed.", text: "They printed alpha and beta." },
    ],
    "Inspect the picture": [
      { tools: [{ name: "Read", input: { file_path: PICTURE } }] },
      { text: "A one-pixel image. Now a failing command.", tools: [{ name: "Bash", input: { command: "echo failing >&2; exit 3", description: "Fail on purpose" } }] },
      { text: "The command failed with status 3." },
    ],
    "Write a file": [
      { tools: [{ name: "Write", input: { file_path: join(work, "denied.txt"), content: "never written\n" } }] },
      { text: "Writing was not permitted." },
    ],
    "Delegate to an agent": [
      { text: "Delegating.", tools: [{ name: "Agent", input: { description: "Inspect the directory", prompt: "SUBAGENT TASK: list the work directory and report.", subagent_type: "general-purpose" } }] },
      { text: "The agent reported back." },
    ],
    "SUBAGENT TASK": [
      { tools: [{ name: "Bash", input: { command: "ls -a", description: "List the directory" } }] },
      { text: "Subagent report: the directory is nearly empty." },
    ],
    "Sleep a while": [
      { text: "Sleeping.", tools: [{ name: "Bash", input: { command: "sleep 30", description: "Wait" } }] },
      { text: "Slept." },
    ],
    "Concurrent one": [{ delayMs: 2500, text: "Answer to concurrent one." }],
    "Concurrent two": [{ delayMs: 2500, text: "Answer to concurrent two." }],
    "Concurrent three": [{ delayMs: 2500, text: "Answer to concurrent three." }],
    "Concurrent four": [{ delayMs: 500, text: "Answer to concurrent four." }],
  },
  default: [{ text: "Answer to: {prompt}" }],
  compact: "<analysis>scripted</analysis>\n<summary>\n1. Primary Request: the referee conversation (scripted summary).\n</summary>",
  side: "Scripted side answer",
};

// The work directory: a CLAUDE.md (Claude sends it at send time, never in the transcript) and a
// one-pixel PNG for the Read tool (an image inside a tool_result).
writeFileSync(join(work, "CLAUDE.md"), "# Referee project\n\nThe referee's scripted project notes.\n");
writeFileSync(PICTURE, Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64"));

// ---------------------------------------------------------------------------------------------
const manifest = {
  version: 1,
  claudeVersion: null,
  home: relative(out, home),
  work: relative(out, work),
  projectDir: relative(out, projectDir),
  requestsLog: "requests.jsonl",
  steps: [],
  requests: [],
  experiments: [],
};

const logPath = join(out, "requests.jsonl");
const scriptPath = join(out, "script.json");
writeFileSync(scriptPath, JSON.stringify(SCRIPT, null, 2));
const { child: server, port } = await startServer(scriptPath, logPath);

const version = spawnSync(bin, ["--version"], { env: claudeEnv(join(out, "version-home"), port), encoding: "utf8", timeout: 30_000 });
manifest.claudeVersion = (version.stdout || "").trim();
rmSync(join(out, "version-home"), { recursive: true, force: true });

const sessions = {};
let requestsSeen = 0;

function rel(p) {
  return relative(out, p);
}

const MAIN = { home, projects, projectDir };

/** Where a run continued. Its own lines start at the line carrying its prompt (two runs may
 * share a file), preceded by the lines a resume writes before the prompt ("Continue from where
 * you left off." and the synthetic "No response requested.", §6.3 of docs/claude-code.md); the
 * parent of the first of them is the leaf the run continued from. */
function continuation(path, from, prompt) {
  const entries = linesOf(path).map(parse);
  const byUuid = new Map();
  entries.forEach((e, k) => {
    if (e && typeof e.uuid === "string") byUuid.set(e.uuid, k);
  });
  const resumeLine = (e) =>
    (e.type === "assistant" && e.message?.model === "<synthetic>") ||
    (e.type === "user" && e.isMeta === true && JSON.stringify(e.message?.content ?? "").includes("Continue from where you left off."));
  let k0 = -1;
  for (let k = from; k < entries.length; k++) {
    const e = entries[k];
    if (!e || typeof e.uuid !== "string" || !["user", "assistant", "attachment", "system"].includes(e.type)) continue;
    const text = JSON.stringify(e.message?.content ?? "");
    if (prompt === undefined || (e.type === "user" && text.includes(JSON.stringify(prompt).slice(1, -1)))) {
      k0 = k;
      break;
    }
  }
  if (k0 < 0) return { resumedFrom: null, firstLine: null, firstLineIndex: null };
  let k = k0;
  for (;;) {
    const p = entries[k].parentUuid;
    const kp = p ? byUuid.get(p) : undefined;
    if (kp === undefined || kp < from || prompt === undefined || !resumeLine(entries[kp])) break;
    k = kp;
  }
  return { firstLine: entries[k].uuid, firstLineIndex: k, resumedFrom: entries[k].parentUuid ?? null };
}

/** Resolves once a line holding `text` is in the file (polls; bounded). */
async function appeared(path, text) {
  const until = Date.now() + 30_000;
  while (Date.now() < until) {
    if (existsSync(path) && readFileSync(path, "utf8").includes(text)) return;
    await new Promise((ok) => setTimeout(ok, 50));
  }
  throw new Error(`corpus.mjs: ${text} never appeared in ${path}`);
}

/** Runs one step (its runs at once; a run with `after` starts once its text is in the file) in
 * `where` and records it. */
async function step(name, runs, note, where = MAIN, experiment = null) {
  const before = snapshot(where.projects);
  const results = await Promise.all(runs.map(async (r) => {
    if (r.after) await appeared(join(where.projectDir, `${r.after.session}.jsonl`), r.after.text);
    // The file as this run finds it (another run of the step may have written to it already).
    const path = r.resumes ? join(where.projectDir, `${r.resumes}.jsonl`) : null;
    const linesAtStart = path && existsSync(path) ? linesOf(path).length : 0;
    const killWhen = r.killWhen ? { path: join(where.projectDir, `${r.killWhen.session}.jsonl`), text: r.killWhen.text } : null;
    return { ...(await runClaude(r.args, where.home, port, killWhen)), linesAtStart };
  }));
  const after = snapshot(where.projects);
  const record = { name, note, runs: [], files: [], requests: [] };
  for (const path of Object.keys(after)) {
    if (before[path] !== after[path]) record.files.push({ path: rel(path), before: before[path] ?? 0, after: after[path] });
  }
  results.forEach((res, i) => {
    const r = runs[i];
    const sessionId = res.json?.session_id ?? null;
    if (r.as && sessionId) sessions[r.as] = sessionId;
    const run = { args: r.args, exit: res.code, timedOut: res.timedOut, sessionId, result: res.json?.result ?? null, isError: res.json?.is_error ?? null };
    if (res.killed) run.killed = true;
    if ((res.code !== 0 || res.timedOut) && !res.killed) {
      run.stderr = res.stderr.slice(-4000);
      run.stdout = res.stdout.slice(-4000);
      console.error(`corpus.mjs: ${name} run ${i}: exit ${res.code}${res.timedOut ? " (timed out)" : ""}\n${res.stderr.slice(-2000)}`);
    }
    if (r.resumes) {
      const path = join(where.projectDir, `${r.resumes}.jsonl`);
      const from = res.linesAtStart;
      run.file = rel(path);
      run.linesBeforeRun = from;
      Object.assign(run, continuation(path, from, r.prompt));
    }
    if (r.forks) {
      run.forkOf = r.forks;
      run.file = sessionId ? rel(join(where.projectDir, `${sessionId}.jsonl`)) : null;
    }
    record.runs.push(run);
  });
  if (record.runs.length > 1) {
    // Two resumes of one file: both from one leaf (siblings), or one from the other's prompt.
    record.concurrency = new Set(record.runs.map((r) => r.resumedFrom)).size === 1 ? "siblings" : "chained";
  }
  const all = readRequests(logPath);
  const fresh = all.slice(requestsSeen);
  requestsSeen = all.length;
  const files = Object.keys(after);
  for (const q of fresh) {
    const body = JSON.parse(q.raw);
    const entry = { n: q.n, step: name, kind: q.kind, path: q.path, anthropicBeta: q.headers["anthropic-beta"] ?? null, sessionHeader: q.headers["x-claude-code-session-id"] ?? null, model: body.model ?? null, stream: body.stream === true };
    if (experiment) entry.experiment = experiment;
    if (q.kind === "stream") {
      const a = answerOf(q.n, files);
      if (a) {
        entry.kind = "turn";
        entry.file = rel(a.file);
        entry.leaf = a.leaf;
        entry.linesBefore = a.linesBefore;
        entry.answerUuids = a.answerUuids;
      } else {
        entry.kind = "stream-unanswered";
      }
    } else if (q.kind === "compact") {
      for (const r of record.runs) {
        if (!r.file) continue;
        const c = compactionIn(join(out, r.file), r.linesBeforeRun ?? 0);
        if (c) {
          entry.file = rel(c.file);
          entry.boundary = c.boundary;
          entry.logicalParentUuid = c.logicalParentUuid;
          entry.preservedHead = c.preservedHead;
          entry.leaf = c.leaf;
          entry.linesBefore = r.linesBeforeRun;
        }
      }
    }
    entry.messages = body.messages;
    record.requests.push(q.n);
    manifest.requests.push(entry);
  }
  if (!experiment) manifest.steps.push(record);
  console.error(`corpus.mjs: ${name}: ${record.runs.map((r) => `exit ${r.exit}`).join(", ")}, ${fresh.length} request(s)`);
  return record;
}

/** The uuid of the last line of `type` (`assistant`, `user`) in a file whose content contains `needle`. */
function lineWith(type, sessionId, needle) {
  const lines = linesOf(join(projectDir, `${sessionId}.jsonl`));
  let found = null;
  for (const l of lines) {
    const e = parse(l);
    if (e && e.type === type && JSON.stringify(e.message?.content ?? "").includes(needle)) found = e.uuid;
  }
  return found;
}

const J = ["--output-format", "json"];
try {
  // Session A: tool turns, resumes, a rewind branch, resume, fork, two compactions with resumes
  // after each, and a fork after the compaction.
  await step("a1-tool-turn", [{ as: "A", args: ["-p", "Run a command", "--allowedTools", "Bash", ...J] }], "new session; thinking + text + Bash tool_use, then text");
  const A = sessions.A;
  await step("a2-resume", [{ resumes: A, prompt: "Second prompt", args: ["--resume", A, "-p", "Second prompt", ...J] }], "first plain resume");
  await step("a3-resume-parallel-tools", [{ resumes: A, prompt: "Run two commands", args: ["--resume", A, "-p", "Run two commands", "--allowedTools", "Bash", ...J] }], "second resume; two tool_use blocks in one response");
  await step("a3b-image-and-error", [{ resumes: A, prompt: "Inspect the picture", args: ["--resume", A, "-p", "Inspect the picture", "--allowedTools", "Bash,Read", ...J] }], "Read of a PNG (an image in a tool_result), then a Bash command that fails (is_error)");
  await step("a3c-permission-denied", [{ resumes: A, prompt: "Write a file", args: ["--resume", A, "-p", "Write a file", ...J] }], "a Write tool_use without permission: the denial as tool_result");
  const rewindAt = lineWith("assistant", A, "The command printed referee-one.");
  await step("a4-rewind", [{ resumes: A, prompt: "Branch prompt", args: ["--resume", A, "--resume-session-at", rewindAt, "-p", "Branch prompt", ...J] }], `--resume-session-at the answer of a1`);
  await step("a5-resume-after-rewind", [{ resumes: A, prompt: "After the branch", args: ["--resume", A, "-p", "After the branch", ...J] }], "plain resume of a file with two leaves");
  await step("a6-fork", [{ forks: A, as: "F", args: ["--resume", A, "--fork-session", "-p", "Fork prompt", ...J] }], "--fork-session: a new file");
  await step("a7-compact", [{ resumes: A, args: ["--resume", A, "-p", "/compact", ...J] }], "manual /compact");
  await step("a8-resume-after-compact", [{ resumes: A, prompt: "After compaction", args: ["--resume", A, "-p", "After compaction", ...J] }], "resume after the compaction");
  await step("a9-resume-after-compact-2", [{ resumes: A, prompt: "Run a command again", args: ["--resume", A, "-p", "Run a command again", "--allowedTools", "Bash", ...J] }], "another resume after the compaction, with a tool turn");
  await step("a10-compact-again", [{ resumes: A, args: ["--resume", A, "-p", "/compact", ...J] }], "a second manual /compact: two boundaries in one file");
  await step("a11-resume-after-second-compact", [{ resumes: A, prompt: "After the second compaction", args: ["--resume", A, "-p", "After the second compaction", ...J] }], "resume after the second compaction");
  await step("a12-fork-after-compact", [{ forks: A, as: "G", args: ["--resume", A, "--fork-session", "-p", "Fork after compaction", ...J] }], "--fork-session of a compacted session");

  // Session B: a subagent.
  await step("b1-subagent", [{ as: "B", args: ["-p", "Delegate to an agent", "--allowedTools", "Agent,Bash", ...J] }], "Agent tool_use → subagents/agent-*.jsonl");
  const B = sessions.B;
  await step("b2-resume-after-subagent", [{ resumes: B, prompt: "After the agent", args: ["--resume", B, "-p", "After the agent", ...J] }], "resume of a session that ran a subagent");

  // Session C: two concurrent resumes of one session.
  await step("c1-start", [{ as: "C", args: ["-p", "Start concurrency", ...J] }], "new session");
  const C = sessions.C;
  await step("c2-concurrent", [
    { resumes: C, prompt: "Concurrent one", args: ["--resume", C, "-p", "Concurrent one", ...J] },
    { resumes: C, prompt: "Concurrent two", args: ["--resume", C, "-p", "Concurrent two", ...J] },
  ], "two resumes at once (answers delayed 2.5 s so both are in flight)");
  await step("c3-resume-after-concurrent", [{ resumes: C, prompt: "After concurrency", args: ["--resume", C, "-p", "After concurrency", ...J] }], "plain resume of the file both wrote");
  await step("c4-staggered", [
    { resumes: C, prompt: "Concurrent three", args: ["--resume", C, "-p", "Concurrent three", ...J] },
    { resumes: C, prompt: "Concurrent four", after: { session: C, text: '{"role":"user","content":"Concurrent three"}' }, args: ["--resume", C, "-p", "Concurrent four", ...J] },
  ], "two resumes, the second started once the first's prompt is in the file (the first still waits for its answer)");
  await step("c5-resume-after-staggered", [{ resumes: C, prompt: "After the staggered pair", args: ["--resume", C, "-p", "After the staggered pair", ...J] }], "plain resume after them");

  // Session K: a run killed while its tool runs (the tool_use is written, its result never),
  // then resumed.
  await step("k1-start", [{ as: "K", args: ["-p", "Start the interrupted session", ...J] }], "new session");
  const K = sessions.K;
  await step("k2-killed-mid-tool", [{ resumes: K, prompt: "Sleep a while", killWhen: { session: K, text: '"name":"Bash"' }, args: ["--resume", K, "-p", "Sleep a while", "--allowedTools", "Bash", ...J] }], "killed once the Bash tool_use line is written: a tool_use without result, no last-prompt");
  await step("k3-resume-after-kill", [{ resumes: K, prompt: "After the interruption", args: ["--resume", K, "-p", "After the interruption", ...J] }], "resume of a file ending in an unanswered tool_use");

  // Session D: a model without mid-conversation system messages (attachments are then sent as
  // user <system-reminder> text), and a resume of it on the default model (with them).
  await step("d1-older-model", [{ as: "D", args: ["-p", "Run a command", "--model", "claude-sonnet-4-5", "--allowedTools", "Bash", ...J] }], "--model claude-sonnet-4-5: no mid-conversation system messages");
  const D = sessions.D;
  await step("d2-resume-older-model", [{ resumes: D, prompt: "Older model again", args: ["--resume", D, "-p", "Older model again", "--model", "claude-sonnet-4-5", ...J] }], "resume on the same model");
  await step("d3-resume-default-model", [{ resumes: D, prompt: "Default model now", args: ["--resume", D, "-p", "Default model now", "--model", "claude-opus-4-8", ...J] }], "resume of the same file on the default model (a resume keeps the session's model unless --model names one): the same lines, sent with system messages");
} finally {
  writeFileSync(join(out, "manifest.json"), JSON.stringify(manifest, null, 1));
}

// ---------------------------------------------------------------------------------------------
// Leaf experiments, each on its own copy of HOME (so the corpus files stay as Claude wrote them).
async function experiment(name, sessionId, edit, note) {
  const dir = join(out, "experiments", name);
  const h = join(dir, "home");
  cpSync(home, h, { recursive: true });
  const where = { home: h, projects: join(h, ".claude", "projects"), projectDir: join(h, ".claude", "projects", relative(projects, projectDir)) };
  const path = join(where.projectDir, `${sessionId}.jsonl`);
  const edited = edit(linesOf(path).map((l) => JSON.parse(l)));
  writeFileSync(path, edited.map((e) => JSON.stringify(e)).join("\n") + "\n");
  const prompt = `Experiment ${name}`;
  const record = await step(name, [{ resumes: sessionId, prompt, args: ["--resume", sessionId, "-p", prompt, ...J] }], note, where, name);
  const run = record.runs[0];
  manifest.experiments.push({ name, note, file: rel(path), editedLines: edited.length, candidates: candidatesOf(edited), resumedFrom: run.resumedFrom, firstLine: run.firstLine, exit: run.exit, requests: record.requests });
  console.error(`corpus.mjs: experiment ${name}: continued from ${run.resumedFrom}`);
}

/** The candidate leaves of a transcript (see docs/claude-code.md). */
function candidatesOf(entries) {
  const tree = entries.filter((e) => typeof e.uuid === "string" && ["user", "assistant", "attachment", "system"].includes(e.type) && !e.isSidechain);
  const lastPrompt = [...entries].reverse().find((e) => e.type === "last-prompt");
  const parents = new Set(tree.map((e) => e.parentUuid).filter(Boolean));
  const leaves = tree.filter((e) => !parents.has(e.uuid));
  let newest = null;
  for (const e of leaves) if (!newest || Date.parse(e.timestamp) > Date.parse(newest.timestamp)) newest = e;
  return {
    lastPromptLeaf: lastPrompt?.leafUuid ?? null,
    lastTreeLine: tree.length ? tree[tree.length - 1].uuid : null,
    newestLeaf: newest?.uuid ?? null,
    leaves: leaves.map((e) => e.uuid),
  };
}

try {
  const C = sessions.C;
  if (C) {
    const one = lineWith("assistant", C, "Answer to concurrent one.");
    const two = lineWith("assistant", C, "Answer to concurrent two.");
    const bump = (e, ms) => ({ ...e, timestamp: new Date(Date.parse(e.timestamp) + ms).toISOString() });
    const without = (es, type) => es.filter((e) => e.type !== type);
    const moveLast = (es, uuid) => {
      const i = es.findIndex((e) => e.uuid === uuid);
      const [moved] = es.splice(i, 1);
      es.push(moved);
      return moved;
    };
    await experiment("e1-last-prompt-vs-last-line", C, (es) => {
      const keep = without(es, "last-prompt");
      const moved = moveLast(keep, two);
      keep[keep.length - 1] = bump(moved, 3_600_000);
      keep.push({ type: "last-prompt", lastPrompt: "Concurrent one", leafUuid: one, sessionId: C });
      return keep;
    }, "the last last-prompt names the answer of 'Concurrent one'; the last tree line, also the newest leaf, is the answer of 'Concurrent two'");
    await experiment("e2-last-line-vs-newest", C, (es) => {
      const keep = without(es, "last-prompt");
      moveLast(keep, one);
      const i2 = keep.findIndex((e) => e.uuid === two);
      keep[i2] = bump(keep[i2], 3_600_000);
      return keep;
    }, "no last-prompt line; the last tree line is the answer of 'Concurrent one'; the newest leaf (an hour later) is elsewhere");
    await experiment("e3-last-prompt-dangling", C, (es) => {
      const keep = without(es, "last-prompt");
      moveLast(keep, one);
      keep.push({ type: "last-prompt", lastPrompt: "x", leafUuid: "00000000-0000-4000-8000-000000000000", sessionId: C });
      return keep;
    }, "the last-prompt's leafUuid names no line; the last tree line is the answer of 'Concurrent one'");
    await experiment("e4-last-prompt-ancestor", C, (es) => {
      const keep = without(es, "last-prompt");
      const moved = moveLast(keep, one);
      keep.push({ type: "last-prompt", lastPrompt: "x", leafUuid: moved.parentUuid, sessionId: C });
      return keep;
    }, "the last-prompt names the parent of the last tree line (the answer of 'Concurrent one')");
    await experiment("e5-last-prompt-explicit-ancestor", C, (es) => {
      const keep = without(es, "last-prompt");
      const moved = moveLast(keep, one);
      keep.push({ type: "last-prompt", lastPrompt: "x", leafUuid: moved.parentUuid, explicit: true, sessionId: C });
      return keep;
    }, "as e4, with the last-prompt marked explicit (as a rewind writes it): a user line as leaf");
    await experiment("e6-explicit-attachment", C, (es) => {
      const keep = without(es, "last-prompt");
      const att = keep.find((e) => e.type === "attachment" && e.attachment?.type === "skill_listing");
      keep.push({ type: "last-prompt", lastPrompt: "x", leafUuid: att.uuid, explicit: true, sessionId: C });
      return keep;
    }, "an explicit last-prompt naming an attachment line (under the first prompt)");
    await experiment("e10-duplicate-uuid", C, (es) => {
      // A second line with the uuid of the first answer, its text changed, appended at the end.
      const first = es.find((e) => e.type === "assistant");
      const dup = JSON.parse(JSON.stringify(first));
      dup.message.content = [{ type: "text", text: "A duplicated line's text." }];
      return [...es, dup];
    }, "the first answer's uuid appears again at the end with other text: which one is sent, and where");
    const A = sessions.A;
    const a4 = manifest.steps.find((x) => x.name === "a4-rewind")?.runs[0];
    if (A && a4) {
      // The file as it was after a3c (parallel tool calls, an image, two errors; no branch yet),
      // as is and padded past 5 MiB with a bookkeeping line: Claude reads files over 5 MiB
      // (5 242 880 bytes) another way, keeping only the chains of the last line and of the
      // last-prompt's leaf.
      const upTo = a4.linesBeforeRun;
      await experiment("e8-before-rewind", A, (es) => es.slice(0, upTo), "session A as it was after a3c (control for e9)");
      await experiment("e9-over-5-mib", A, (es) => [
        { type: "queue-operation", operation: "enqueue", timestamp: es[0].timestamp, sessionId: A, content: "x".repeat(5_400_000) },
        ...es.slice(0, upTo),
      ], "e8's file with a 5.4 MB queue-operation line first: over the 5 MiB threshold");
    }
    await experiment("e7-missing-parent-fallback", C, (es) => {
      // Drop the user line "After concurrency": its answer's parent names no line.
      const gone = lineWith("user", C, "After concurrency");
      return es.filter((e) => e.uuid !== gone);
    }, "the parent of the last answer names no line (its prompt line removed): Claude's timestamp fallback");
  }
} finally {
  writeFileSync(join(out, "manifest.json"), JSON.stringify(manifest, null, 1));
  try {
    server.stdin.end();
  } catch {}
  killAll();
}
console.error(`corpus.mjs: ${manifest.steps.length} steps, ${manifest.requests.length} requests, ${manifest.experiments.length} experiments in ${Math.round((Date.now() - started) / 1000)} s → ${join(out, "manifest.json")}`);
