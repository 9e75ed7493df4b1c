//! Claude Code transcripts for benchmarks and measurements, deterministic by seed: the same
//! options always give the same bytes. The shapes are those Claude Code 2.1.197 writes
//! (docs/claude-code.md §2–§4, `tests/data/claude/real/`):
//!
//! * per prompt: `queue-operation` enqueue / dequeue and a `file-history-snapshot` (bookkeeping),
//!   the prompt's `user` line, `attachment` lines after the first prompt (agent and skill
//!   listings) and now and then after a tool result (todo and task reminders);
//! * each model response written one line per content block (thinking with its signature, text,
//!   `tool_use`), the lines chained and sharing `message.id` and `requestId`; a response with
//!   several `tool_use` blocks (parallel calls) is answered by one `tool_result` line under each
//!   `tool_use` line, and what follows hangs under the last one;
//! * `tool_result` user lines with their `toolUseResult` copy and `sourceToolAssistantUUID`:
//!   Bash output, Read file contents, Grep matches, Edit patches with the original file, a failing
//!   command now and then, and rarely an image read by the Read tool; results of a few hundred
//!   bytes to about 100 KB, as in real work;
//! * the answer, then a `last-prompt` naming the last line, and a `mode` line now and then;
//! * a rewind branch now and then (a prompt continuing from the answer before the last one, as
//!   `--resume-session-at` writes it);
//! * with `compact_at`, one manual `/compact` once that share of the bytes is written: the
//!   `compact_boundary` system line (`parentUuid: null`, `logicalParentUuid`, a preserved segment
//!   of the last answer), the summary (`isCompactSummary`), the command's caveat, name and
//!   output lines under the summary, the agent listing again, and a `last-prompt`.
//!
//! Used by `gen-session --format claude-code` (scripts/gen_session.rs) and by the measurement in
//! tests/claude_referee.rs, which both include this file.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use serde_json::{Map, Value, json};

/// What to write.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Stop after the turn during which the file reaches this many bytes (a turn of
    /// `tools_per_prompt: Some(usize::MAX)` stops at the tool call that reaches it).
    pub bytes: u64,
    /// The seed of everything drawn.
    pub seed: u64,
    /// Tool calls answered per prompt; `None` draws 0 to 12 per prompt.
    pub tools_per_prompt: Option<usize>,
    /// Write one `/compact` once this share of `bytes` is written (at the end of a turn).
    pub compact_at: Option<f64>,
}

/// splitmix64, as in gen-session: small, fast and deterministic (also the random transcripts'
/// source in tests/claude_live_leaf.rs).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// A length in `lo..hi`.
    fn len(&mut self, lo: u64, hi: u64) -> usize {
        (lo + self.below(hi - lo)) as usize
    }
}

const WORDS: &[&str] = &[
    "session", "tree", "leaf", "parse", "render", "context", "token", "file", "read", "write",
    "async", "error", "result", "value", "index", "offset", "buffer", "stream", "config", "module",
    "test", "build", "request", "handler", "cache", "retry", "the", "a", "of", "to",
];

const FILES: &[&str] = &[
    "src/server/handler.ts",
    "src/lib/cache.ts",
    "src/index.ts",
    "src/config.ts",
    "tests/handler.test.ts",
    "src/util/retry.ts",
    "README.md",
    "package.json",
];

const SESSION: &str = "0f0e0d0c-0b0a-4908-8706-050403020100";
const CWD: &str = "/home/dev/project";
const VERSION: &str = "2.1.197";
const MODEL: &str = "claude-opus-4-8";

const SKILLS: &str = "- deep-research: Deep research harness \u{2014} fan-out web searches, fetch sources, adversarially verify claims, synthesize a cited report. - When the user wants a deep, multi-source, fact-checked research report on any topic.\n- simplify: Review changed code for reuse, quality, and efficiency, then fix any issues found.";
const AGENTS: &[&str] = &[
    "- general-purpose: General-purpose agent for researching complex questions, searching for code, and executing multi-step tasks. (Tools: *)",
    "- Explore: Read-only search agent for broad fan-out searches. (Tools: Glob, Grep, Read, Bash)",
    "- Plan: Software architect agent for designing implementation plans. (Tools: Glob, Grep, Read)",
];
const CAVEAT: &str = "<local-command-caveat>Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages or otherwise consider them in your response unless the user explicitly asks you to.</local-command-caveat>";

struct Writer {
    rng: Rng,
    out: BufWriter<File>,
    written: u64,
    clock: i64,
}

impl Writer {
    fn uuid(&mut self) -> String {
        let (a, b) = (self.rng.next(), self.rng.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:x}{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            8 + (b >> 62),
            (b >> 48) & 0xfff,
            b & 0xffff_ffff_ffff
        )
    }

    fn words(&mut self, bytes: usize) -> String {
        let mut s = String::with_capacity(bytes + 16);
        while s.len() < bytes {
            s.push_str(WORDS[self.rng.below(WORDS.len() as u64) as usize]);
            s.push(if self.rng.chance(10) { '\n' } else { ' ' });
        }
        s
    }

    /// Source-like lines as the Read tool numbers them (`     1→…`).
    fn numbered(&mut self, bytes: usize) -> String {
        let mut s = String::with_capacity(bytes + 64);
        let mut n = 0;
        while s.len() < bytes {
            n += 1;
            let len = self.rng.len(10, 90);
            let line = self.words(len).replace('\n', " ");
            s.push_str(&format!("{n:>6}\u{2192}{}\n", line.trim_end()));
        }
        s
    }

    fn base64ish(&mut self, bytes: usize) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        (0..bytes)
            .map(|_| A[self.rng.below(64) as usize] as char)
            .collect()
    }

    fn words_of(&mut self, lo: u64, hi: u64) -> String {
        let n = self.rng.len(lo, hi);
        self.words(n)
    }

    fn numbered_of(&mut self, lo: u64, hi: u64) -> String {
        let n = self.rng.len(lo, hi);
        self.numbered(n)
    }

    fn base64ish_of(&mut self, lo: u64, hi: u64) -> String {
        let n = self.rng.len(lo, hi);
        self.base64ish(n)
    }

    fn timestamp(&mut self) -> String {
        self.clock += 40 + self.rng.below(4_000) as i64;
        sessiond::js::timestamp::format_iso(self.clock)
    }

    fn write(&mut self, line: Map<String, Value>) -> io::Result<()> {
        let bytes = serde_json::to_vec(&Value::Object(line))?;
        self.out.write_all(&bytes)?;
        self.out.write_all(b"\n")?;
        self.written += bytes.len() as u64 + 1;
        Ok(())
    }

    /// A tree line, its keys in Claude Code's order: `parentUuid`, `isSidechain`, `fields`,
    /// `uuid`, `timestamp`, `after`, then what every tree line carries.
    fn node(
        &mut self,
        uuid: &str,
        parent: Option<&str>,
        fields: Vec<(&str, Value)>,
        after: Vec<(&str, Value)>,
    ) -> io::Result<()> {
        let mut m = Map::new();
        m.insert("parentUuid".into(), json!(parent));
        m.insert("isSidechain".into(), json!(false));
        for (k, v) in fields {
            m.insert(k.into(), v);
        }
        m.insert("uuid".into(), json!(uuid));
        let ts = self.timestamp();
        m.insert("timestamp".into(), json!(ts));
        for (k, v) in after {
            m.insert(k.into(), v);
        }
        for (k, v) in [
            ("userType", "external"),
            ("entrypoint", "cli"),
            ("cwd", CWD),
            ("sessionId", SESSION),
            ("version", VERSION),
            ("gitBranch", "main"),
        ] {
            m.insert(k.into(), json!(v));
        }
        self.write(m)
    }

    /// A bookkeeping line (no `uuid`).
    fn aside(&mut self, v: Value) -> io::Result<()> {
        match v {
            Value::Object(m) => self.write(m),
            _ => Ok(()),
        }
    }

    fn usage(&mut self, turn: u64) -> Value {
        json!({"input_tokens": 3 + self.rng.below(20), "cache_creation_input_tokens": self.rng.below(4_000),
            "cache_read_input_tokens": 12_000 + 900 * turn, "output_tokens": 1 + self.rng.below(900),
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}, "service_tier": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
            "inference_geo": "", "iterations": [], "speed": "standard"})
    }

    /// One model response, one line per block, chained from `parent`; returns the uuid of each
    /// block's line.
    fn response(
        &mut self,
        parent: &str,
        blocks: Vec<Value>,
        stop: &str,
        turn: u64,
    ) -> io::Result<Vec<String>> {
        let id = format!("msg_01{:016x}{:06x}", self.rng.next(), turn & 0xff_ffff);
        let request = format!("req_011C{:020x}", self.rng.next());
        let usage = self.usage(turn);
        let mut parent = parent.to_owned();
        let mut uuids = Vec::with_capacity(blocks.len());
        for block in blocks {
            let uuid = self.uuid();
            let message = json!({"id": id, "type": "message", "role": "assistant", "model": MODEL,
                "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage,
                "stop_details": null});
            self.node(
                &uuid,
                Some(&parent),
                vec![
                    ("message", message),
                    ("requestId", json!(request)),
                    ("type", json!("assistant")),
                ],
                vec![],
            )?;
            parent.clone_from(&uuid);
            uuids.push(uuid);
        }
        Ok(uuids)
    }

    fn thinking(&mut self) -> Value {
        let t = self.words_of(80, 1_200);
        let sig = self.base64ish_of(200, 600);
        json!({"type": "thinking", "thinking": t, "signature": sig})
    }

    fn text(&mut self, lo: u64, hi: u64) -> Value {
        json!({"type": "text", "text": self.words_of(lo, hi)})
    }

    /// A tool call and what answers it: (`tool_use` block, `tool_result` content, is_error,
    /// `toolUseResult`).
    fn tool(&mut self) -> (Value, Value, bool, Value) {
        let id = format!(
            "toolu_01{:016x}{:06x}",
            self.rng.next(),
            self.rng.below(1 << 24)
        );
        let file = FILES[self.rng.below(FILES.len() as u64) as usize];
        let path = format!("{CWD}/{file}");
        // Result sizes: mostly a few KB, some tens of KB, a few about 100 KB.
        let size = match self.rng.below(20) {
            0..=12 => self.rng.len(200, 4_000),
            13..=18 => self.rng.len(4_000, 30_000),
            _ => self.rng.len(30_000, 120_000),
        };
        match self.rng.below(100) {
            0..=39 => {
                let command = format!("npm test -- {}", file.rsplit('/').next().unwrap_or(file));
                let use_ = json!({"type": "tool_use", "id": id, "name": "Bash",
                    "input": {"command": command, "description": "Run the tests"}});
                if self.rng.chance(8) {
                    let out = format!("Exit code 1\n{}", self.words(size.min(6_000)));
                    let record = Value::String(format!("Error: {out}"));
                    (use_, json!(out), true, record)
                } else {
                    let out = self.words(size);
                    let record = json!({"stdout": out, "stderr": "", "interrupted": false, "isImage": false,
                        "noOutputExpected": false});
                    (use_, json!(out), false, record)
                }
            }
            40..=69 => {
                let use_ = json!({"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": path}});
                if self.rng.chance(2) {
                    let data = self.base64ish_of(40_000, 250_000);
                    let content = json!([{"type": "image", "source": {"type": "base64", "data": data,
                        "media_type": "image/png"}}]);
                    let record = json!({"type": "image", "file": {"base64": data, "type": "image/png",
                        "originalSize": data.len() * 3 / 4}});
                    (use_, content, false, record)
                } else {
                    let body = self.numbered(size);
                    let lines = body.lines().count();
                    let record = json!({"type": "text", "file": {"filePath": path, "content": body,
                        "numLines": lines, "startLine": 1, "totalLines": lines}});
                    (use_, json!(body), false, record)
                }
            }
            70..=84 => {
                let pattern = WORDS[self.rng.below(WORDS.len() as u64) as usize];
                let use_ = json!({"type": "tool_use", "id": id, "name": "Grep",
                    "input": {"pattern": pattern, "path": "src", "output_mode": "content", "-n": true}});
                let out = self.numbered(size.min(8_000)).replace('\u{2192}', ":");
                let record = json!({"mode": "content", "numFiles": 0, "filenames": [], "content": out,
                    "numLines": out.lines().count()});
                (use_, json!(out), false, record)
            }
            _ => {
                let old = self.words_of(20, 400);
                let new = self.words_of(20, 600);
                let use_ = json!({"type": "tool_use", "id": id, "name": "Edit",
                    "input": {"file_path": path, "old_string": old, "new_string": new, "replace_all": false}});
                let snippet = self.numbered_of(300, 1_500);
                let out = format!(
                    "The file {path} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{snippet}"
                );
                let original = self.numbered(size);
                let record = json!({"filePath": path, "oldString": old, "newString": new, "originalFile": original,
                    "structuredPatch": [{"oldStart": 10, "oldLines": 3, "newStart": 10, "newLines": 4,
                        "lines": [format!("-{old}"), format!("+{new}")]}],
                    "userModified": false, "replaceAll": false});
                (use_, json!(out), false, record)
            }
        }
    }

    fn reminder(&mut self) -> Value {
        let items = 1 + self.rng.below(6);
        if self.rng.chance(50) {
            let content: Vec<Value> = (0..items)
                .map(|i| {
                    let subject = self.words(30).replace('\n', " ");
                    json!({"id": (i + 1).to_string(), "subject": subject.trim_end(),
                        "status": if i == 0 { "in_progress" } else { "pending" }})
                })
                .collect();
            json!({"type": "task_reminder", "content": content, "itemCount": items})
        } else {
            let content: Vec<Value> = (0..items)
                .map(|i| {
                    let what = self.words(40).replace('\n', " ");
                    json!({"content": what.trim_end(), "status": if i == 0 { "completed" } else { "pending" },
                        "activeForm": "Working"})
                })
                .collect();
            json!({"type": "todo_reminder", "content": content, "itemCount": items})
        }
    }

    /// The attachment lines of a session's first prompt (and of the first after `/compact`).
    fn listings(&mut self, parent: &str, initial: bool, skills: bool) -> io::Result<String> {
        let x = self.uuid();
        let agents = json!({"type": "agent_listing_delta",
            "addedTypes": ["general-purpose", "Explore", "Plan"], "addedLines": AGENTS,
            "removedTypes": [], "isInitial": initial, "showConcurrencyNote": initial});
        self.node(
            &x,
            Some(parent),
            vec![("attachment", agents), ("type", json!("attachment"))],
            vec![],
        )?;
        if !skills {
            return Ok(x);
        }
        let y = self.uuid();
        let listing = json!({"type": "skill_listing", "content": SKILLS, "skillCount": 2, "isInitial": initial});
        self.node(
            &y,
            Some(&x),
            vec![("attachment", listing), ("type", json!("attachment"))],
            vec![],
        )?;
        Ok(y)
    }
}

/// Writes a transcript to `path`.
pub fn write(path: &Path, options: &Options) -> io::Result<()> {
    let mut w = Writer {
        rng: Rng(options.seed),
        out: BufWriter::with_capacity(1 << 20, File::create(path)?),
        written: 0,
        clock: 1_780_000_000_000,
    };
    let more = |w: &Writer| w.written < options.bytes;
    let compact_after = options
        .compact_at
        .map(|f| (options.bytes as f64 * f) as u64);
    let mut compacted = false;
    let mut parent: Option<String> = None;
    // The answer of the turn before the last, where a rewind continues from.
    let (mut before_last, mut last): (Option<String>, Option<String>) = (None, None);
    let mut turn = 0u64;
    while more(&w) {
        turn += 1;
        if turn.is_multiple_of(50) && before_last.is_some() {
            parent.clone_from(&before_last);
        }
        let prompt_len = w.rng.len(20, 600);
        let prompt = w.words(prompt_len);
        let ts = w.timestamp();
        w.aside(json!({"type": "queue-operation", "operation": "enqueue", "timestamp": ts, "sessionId": SESSION,
            "content": prompt}))?;
        let ts = w.timestamp();
        w.aside(json!({"type": "queue-operation", "operation": "dequeue", "timestamp": ts, "sessionId": SESSION}))?;
        let u = w.uuid();
        let ts = w.timestamp();
        w.aside(json!({"type": "file-history-snapshot", "messageId": u,
            "snapshot": {"messageId": u, "trackedFileBackups": {}, "timestamp": ts}, "isSnapshotUpdate": false}))?;
        let prompt_id = w.uuid();
        let content = if w.rng.chance(10) {
            json!([{"type": "text", "text": prompt}])
        } else {
            json!(prompt)
        };
        w.node(
            &u,
            parent.as_deref(),
            vec![
                ("promptId", json!(prompt_id)),
                ("type", json!("user")),
                ("message", json!({"role": "user", "content": content})),
            ],
            vec![("permissionMode", json!("default"))],
        )?;
        let mut at = if turn == 1 {
            w.listings(&u, true, true)?
        } else {
            u
        };
        let tools = options
            .tools_per_prompt
            .unwrap_or_else(|| [0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 8, 12][w.rng.below(12) as usize]);
        let mut k = 0;
        while k < tools && more(&w) {
            // A response: thinking and text now and then, one tool call or a few in parallel.
            let parallel = if w.rng.chance(15) {
                2 + w.rng.below(2) as usize
            } else {
                1
            };
            let parallel = parallel.min(tools - k);
            let mut blocks = Vec::new();
            if w.rng.chance(60) {
                blocks.push(w.thinking());
            }
            if w.rng.chance(70) {
                blocks.push(w.text(30, 500));
            }
            let mut answers = Vec::new();
            for _ in 0..parallel {
                let (use_, content, is_error, record) = w.tool();
                answers.push((use_["id"].clone(), content, is_error, record));
                blocks.push(use_);
            }
            let lines = w.response(&at, blocks, "tool_use", turn)?;
            let uses = &lines[lines.len() - parallel..];
            for ((id, content, is_error, record), use_line) in answers.into_iter().zip(uses) {
                let r = w.uuid();
                w.node(
                    &r,
                    Some(use_line),
                    vec![("promptId", json!(prompt_id)), ("type", json!("user")),
                        ("message", json!({"role": "user", "content": [{"tool_use_id": id, "type": "tool_result",
                            "content": content, "is_error": is_error}]}))],
                    vec![("toolUseResult", record), ("sourceToolAssistantUUID", json!(use_line))],
                )?;
                at = r;
            }
            if w.rng.chance(8) {
                let x = w.uuid();
                let reminder = w.reminder();
                w.node(
                    &x,
                    Some(&at),
                    vec![("attachment", reminder), ("type", json!("attachment"))],
                    vec![],
                )?;
                at = x;
            }
            k += parallel;
        }
        // The answer; before a `/compact`, one text line (the preserved segment, as observed).
        let compacting = !compacted && compact_after.is_some_and(|c| w.written >= c);
        let mut blocks = Vec::new();
        if w.rng.chance(50) && !compacting {
            blocks.push(w.thinking());
        }
        blocks.push(w.text(100, 2_500));
        let end = w
            .response(&at, blocks, "end_turn", turn)?
            .pop()
            .unwrap_or(at);
        w.aside(json!({"type": "last-prompt", "lastPrompt": prompt.chars().take(200).collect::<String>(),
            "leafUuid": end, "sessionId": SESSION}))?;
        if turn.is_multiple_of(20) {
            w.aside(json!({"type": "mode", "mode": "normal", "sessionId": SESSION}))?;
        }
        before_last = last.replace(end.clone());
        parent = Some(end);
        if compacting && more(&w) {
            compacted = true;
            parent = Some(compact(&mut w, parent.as_deref().unwrap_or_default())?);
            (before_last, last) = (None, None);
        }
    }
    w.out.flush()
}

/// A manual `/compact` after the answer `kept` (§4): returns the line the next prompt hangs under.
fn compact(w: &mut Writer, kept: &str) -> io::Result<String> {
    for op in ["enqueue", "dequeue"] {
        let ts = w.timestamp();
        let mut v = json!({"type": "queue-operation", "operation": op, "timestamp": ts, "sessionId": SESSION});
        if op == "enqueue" {
            v["content"] = json!("/compact");
        }
        w.aside(v)?;
    }
    w.aside(json!({"type": "mode", "mode": "normal", "sessionId": SESSION}))?;
    let (b, s) = (w.uuid(), w.uuid());
    let summary_len = w.rng.len(2_000, 6_000);
    let summary = w.words(summary_len);
    let pre_tokens = 150_000 + w.rng.below(10_000);
    w.node(
        &b,
        None,
        vec![
            ("logicalParentUuid", json!(kept)),
            ("type", json!("system")),
            ("subtype", json!("compact_boundary")),
            ("content", json!("Conversation compacted")),
            ("isMeta", json!(false)),
        ],
        vec![
            ("level", json!("info")),
            (
                "compactMetadata",
                json!({"trigger": "manual", "preTokens": pre_tokens, "durationMs": 41_000,
                "preservedSegment": {"headUuid": kept, "anchorUuid": s, "tailUuid": kept},
                "preservedMessages": {"anchorUuid": s, "uuids": [kept], "allUuids": [kept]},
                "postTokens": 9_000, "cumulativeDroppedTokens": 0}),
            ),
        ],
    )?;
    let prompt_id = w.uuid();
    let text = format!(
        "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\nSummary:\n{summary}\n\nIf you need specific details from before compaction (like exact code snippets, error messages, or content you generated), read the full transcript at: /home/dev/.claude/projects/-home-dev-project/{SESSION}.jsonl\nContinue the conversation from where it left off without asking the user any further questions. Resume directly \u{2014} do not acknowledge the summary, do not recap what was happening, do not preface with \"I'll continue\" or similar. Pick up the last task as if the break never happened."
    );
    w.node(
        &s,
        Some(&b),
        vec![
            ("promptId", json!(prompt_id)),
            ("type", json!("user")),
            ("message", json!({"role": "user", "content": text})),
            ("isVisibleInTranscriptOnly", json!(true)),
            ("isCompactSummary", json!(true)),
        ],
        vec![],
    )?;
    let mut at = s;
    for (content, meta) in [
        (CAVEAT, true),
        (
            "<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n            <command-args></command-args>",
            false,
        ),
        (
            "<local-command-stdout>Compacted (ctrl+o to see full summary)</local-command-stdout>",
            false,
        ),
    ] {
        let c = w.uuid();
        let mut fields = vec![
            ("promptId", json!(prompt_id)),
            ("type", json!("user")),
            ("message", json!({"role": "user", "content": content})),
        ];
        if meta {
            fields.push(("isMeta", json!(true)));
        }
        w.node(&c, Some(&at), fields, vec![])?;
        at = c;
    }
    let x = w.listings(&at, true, false)?;
    w.aside(json!({"type": "last-prompt", "leafUuid": x, "sessionId": SESSION}))?;
    Ok(x)
}
