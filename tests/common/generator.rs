//! A seeded generator of pi session files for the randomized differential tests: every entry type
//! pi 1.6.0 knows, odd shapes (null content, missing fields, unknown types), branches, compactions with
//! arbitrary kept ranges, context edits, version-1 and version-2 files.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sessiond::js::timestamp::{civil_from_days, format_iso};

use super::v1_line_id;

/// SplitMix64: small, fast and good enough to drive a generator reproducibly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Stands for a lone UTF-16 surrogate in generated text; written to the file as the escape pi writes.
const LONE_SURROGATE: &str = "\u{e000}";
const WORDS: &[&str] = &[
    "refactor",
    "the",
    "cart",
    "total",
    "rounding",
    "test",
    "fails",
    "in",
    "CI",
    "read",
    "src/main.rs",
    "ünïcödé",
    "日本語",
    "quote\"d",
    "back\\slash",
    "tab\tand\nnewline",
    "🚀",
    "ok",
    "done",
    "why",
    "edit",
    "build",
    "deploy",
    "",
];
const MODELS: &[(&str, &str)] = &[
    ("anthropic", "claude-sonnet-4-5"),
    ("anthropic", "claude-opus-4-5"),
    ("openai", "gpt-5.1-codex"),
    ("google", "gemini-2.5-pro"),
];
const THINKING: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// One generated entry before it is written: its JSON and its id (None for version-1 files).
struct Entry {
    id: String,
    parent: Option<usize>,
    value: Value,
}

struct Generator {
    rng: Rng,
    version: u64,
    entries: Vec<Entry>,
    clock_ms: i64,
    calls: Vec<String>,
    /// Sibling order under test: entry timestamps that are missing, empty, garbled, tied or out of
    /// order, and hubs with many children, so pi's `getTree` sort (V8's TimSort with a comparator
    /// that gives NaN) decides the order of children.
    messy_timestamps: bool,
}

impl Generator {
    fn text(&mut self) -> String {
        let n = 1 + self.rng.below(8);
        let mut text = (0..n)
            .map(|_| *self.rng.pick(WORDS))
            .collect::<Vec<_>>()
            .join(" ");
        if self.rng.chance(1) {
            text.push_str(LONE_SURROGATE);
        }
        text
    }

    fn iso(&mut self) -> String {
        self.clock_ms += 1 + self.rng.below(90_000) as i64;
        let secs = self.clock_ms.div_euclid(1000);
        let ms = self.clock_ms.rem_euclid(1000);
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = civil_from_days(days);
        let base = format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        );
        match self.rng.below(40) {
            0 => format!("{base}Z"),
            1 => format!("{base}.{:03}+00:00", ms),
            _ => format!("{base}.{ms:03}Z"),
        }
    }

    /// An entry's timestamp; None leaves the field out. Messy files get bad and tied ones.
    fn entry_timestamp(&mut self) -> Option<String> {
        if !self.messy_timestamps {
            return Some(self.iso());
        }
        match self.rng.below(100) {
            0..=7 => None,
            8..=15 => Some(String::new()),
            16..=27 => Some(
                (*self.rng.pick(&[
                    "garbled",
                    "2026-13-01T00:00:00Z",
                    "yesterday",
                    "2026-01-01T25:00:00.000Z",
                    "2026-02-30T00:00:00.000Z",
                ]))
                .to_string(),
            ),
            28..=54 => {
                // A handful of instants shared by many entries: ties and descending runs.
                let minute = self.rng.below(4) as i64;
                Some(format_iso(1_767_225_600_000 + minute * 60_000))
            }
            _ => Some(self.iso()),
        }
    }

    fn content_blocks(&mut self) -> Value {
        let mut blocks = vec![json!({"type": "text", "text": self.text()})];
        if self.rng.chance(10) {
            blocks.push(json!({"type": "image", "data": PNG, "mimeType": "image/png"}));
        }
        if self.rng.chance(15) {
            blocks.push(json!({"type": "text", "text": self.text()}));
        }
        Value::Array(blocks)
    }

    fn user_content(&mut self) -> Value {
        match self.rng.below(20) {
            0 => Value::Null,
            1 | 2 => Value::String(self.text()),
            _ => self.content_blocks(),
        }
    }

    fn message(&mut self) -> Value {
        let ts = self.clock_ms;
        match self.rng.below(100) {
            0..=29 => {
                let mut m =
                    json!({"role": "user", "content": self.user_content(), "timestamp": ts});
                if self.rng.chance(3) {
                    m.as_object_mut().unwrap().remove("content");
                }
                m
            }
            30..=59 => {
                let (provider, model) = *self.rng.pick(MODELS);
                let mut content = Vec::new();
                if self.rng.chance(30) {
                    content.push(json!({"type": "thinking", "thinking": self.text(), "thinkingSignature": "EqQBCkYIBRgC"}));
                }
                content.push(json!({"type": "text", "text": self.text()}));
                let tool_use = self.rng.chance(40);
                if tool_use {
                    let id = format!("toolu_{:08x}", self.rng.next() as u32);
                    self.calls.push(id.clone());
                    let tool = *self.rng.pick(&["read", "bash", "edit", "write"]);
                    content.push(json!({"type": "toolCall", "id": id, "name": tool, "arguments": {"path": self.text()}}));
                }
                let content = if self.rng.chance(4) {
                    Value::Null
                } else {
                    Value::Array(content)
                };
                json!({"role": "assistant", "content": content, "api": "anthropic-messages", "provider": provider,
                       "model": model, "usage": {"input": self.rng.below(5000), "output": self.rng.below(900), "cacheRead": 0,
                       "cacheWrite": 0, "totalTokens": 1, "cost": {"input": 0.001, "output": 0.002, "cacheRead": 0, "cacheWrite": 0, "total": 0.003}},
                       "stopReason": if tool_use { "toolUse" } else { "stop" }, "timestamp": ts})
            }
            60..=79 => {
                let call = if self.calls.is_empty() {
                    "toolu_orphan".to_string()
                } else {
                    self.rng.pick(&self.calls).clone()
                };
                let content = if self.rng.chance(4) {
                    Value::Null
                } else {
                    self.content_blocks()
                };
                json!({"role": "toolResult", "toolCallId": call, "toolName": "read", "content": content,
                       "isError": self.rng.chance(20), "timestamp": ts})
            }
            80..=86 => {
                let content = match self.rng.below(4) {
                    0 => Value::Null,
                    1 => Value::String(self.text()),
                    _ => Value::String(String::new()),
                };
                json!({"role": "system", "content": content, "sections": {"preamble": self.text(), "cwd": "/home/dev/app"},
                       "toolsAdded": [{"name": "read", "description": "Read a file", "parameters": {}}], "timestamp": ts})
            }
            87..=93 => {
                json!({"role": "bashExecution", "command": self.text(), "output": self.text(),
                              "exitCode": if self.rng.chance(20) { json!(1) } else { json!(0) }, "cancelled": self.rng.chance(10),
                              "truncated": false, "excludeFromContext": self.rng.chance(10), "timestamp": ts})
            }
            94..=96 => {
                let role = if self.version == 2 {
                    "hookMessage"
                } else {
                    "custom"
                };
                json!({"role": role, "customType": "hook", "content": self.user_content(), "display": self.rng.chance(50), "timestamp": ts})
            }
            _ => {
                json!({"role": "notification", "content": self.text(), "level": "info", "timestamp": ts})
            }
        }
    }

    /// Indices on the path from `parent` to the root (parent first).
    fn ancestors(&self, parent: Option<usize>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = parent;
        while let Some(i) = cur {
            out.push(i);
            cur = self.entries[i].parent;
        }
        out
    }

    /// An id to point at: mostly an ancestor, sometimes any entry, rarely an id that does not exist.
    fn target_id(&mut self, ancestors: &[usize]) -> String {
        if !ancestors.is_empty() && self.rng.chance(75) {
            let i = *self.rng.pick(ancestors);
            return self.entries[i].id.clone();
        }
        if !self.entries.is_empty() && self.rng.chance(85) {
            let i = self.rng.below(self.entries.len());
            return self.entries[i].id.clone();
        }
        "0badc0de".to_string()
    }

    fn add(&mut self) {
        let n = self.entries.len();
        let index = n;
        let parent = if n == 0 || (self.version >= 2 && self.rng.chance(3)) {
            None
        } else if self.messy_timestamps && self.rng.chance(45) {
            // A hub among the first entries collects many siblings.
            Some(self.rng.below(n.min(3)))
        } else if self.version == 1 || self.rng.chance(75) {
            Some(n - 1)
        } else {
            Some(self.rng.below(n))
        };
        let id = if self.version == 1 {
            v1_line_id(index as u64 + 2)
        } else {
            loop {
                let id = format!("{:08x}", self.rng.next() as u32);
                if self.entries.iter().all(|e| e.id != id) {
                    break id;
                }
            }
        };
        let ancestors = self.ancestors(parent);
        let timestamp = self.entry_timestamp();
        let kind = self.rng.below(100);
        let mut fields = serde_json::Map::new();
        let mut put = |k: &str, v: Value| {
            fields.insert(k.to_string(), v);
        };
        let ty = match kind {
            0..=54 => {
                put("message", self.message());
                "message"
            }
            55..=58 => {
                let (provider, model) = *self.rng.pick(MODELS);
                put("provider", json!(provider));
                put("modelId", json!(model));
                "model_change"
            }
            59..=62 => {
                if !self.rng.chance(3) {
                    put("thinkingLevel", json!(*self.rng.pick(THINKING)));
                }
                "thinking_level_change"
            }
            63..=71 => {
                put(
                    "summary",
                    json!(format!(
                        "## Goal\n{}\n\n## Progress\n- [x] {}",
                        self.text(),
                        self.text()
                    )),
                );
                if self.version == 1 {
                    // firstKeptEntryIndex counts entries including the header at index 0.
                    let kept = if n == 0 { 1 } else { 1 + self.rng.below(n) };
                    put("firstKeptEntryIndex", json!(kept));
                } else {
                    let first_kept = match self.rng.below(10) {
                        0 | 1 => id.clone(),
                        _ => self.target_id(&ancestors),
                    };
                    put("firstKeptEntryId", json!(first_kept));
                }
                put("tokensBefore", json!(1000 + self.rng.below(200_000)));
                if self.rng.chance(40) {
                    let ts = self.clock_ms;
                    put(
                        "systemMessage",
                        json!({"role": "system", "content": "", "sections": {"preamble": self.text()}, "toolsAdded": [], "timestamp": ts}),
                    );
                }
                if self.rng.chance(50) {
                    put(
                        "details",
                        json!({"readFiles": ["src/a.rs"], "modifiedFiles": []}),
                    );
                }
                if self.rng.chance(10) {
                    put("fromHook", json!(true));
                }
                "compaction"
            }
            72..=76 if self.version >= 2 => {
                let from = self.target_id(&[]);
                put("fromId", json!(from));
                match self.rng.below(6) {
                    0 => {}
                    1 => put("summary", json!("")),
                    _ => put("summary", json!(self.text())),
                }
                "branch_summary"
            }
            77..=79 => {
                put("customType", json!("plan-mode"));
                put("data", json!({"enabled": self.rng.chance(50)}));
                "custom"
            }
            80..=84 if self.version >= 2 => {
                put("customType", json!("reminder"));
                match self.rng.below(8) {
                    0 => {}
                    1 => put("content", Value::Null),
                    2..=4 => put("content", json!(self.text())),
                    _ => put("content", self.content_blocks()),
                }
                if !self.rng.chance(10) {
                    put("display", json!(self.rng.chance(60)));
                }
                if self.rng.chance(30) {
                    put("details", json!({"source": self.text()}));
                }
                "custom_message"
            }
            85..=86 if self.version >= 2 => {
                let target = self.target_id(&ancestors);
                put("targetId", json!(target));
                match self.rng.below(4) {
                    0 => {}
                    1 => put("label", json!("")),
                    _ => put("label", json!(self.text())),
                }
                "label"
            }
            87..=94 if self.version >= 2 => {
                let target = self.target_id(&ancestors);
                put("targetId", json!(target));
                let replacement = match self.rng.below(5) {
                    0 | 1 => Value::Null,
                    2 => json!({"content": self.text()}),
                    _ => json!({"content": self.content_blocks()}),
                };
                put("replacement", replacement);
                "context_edit"
            }
            95 => {
                put("name", json!(self.text()));
                "session_info"
            }
            96 | 97 => {
                put("kind", json!("cache_warm"));
                put("provider", json!("anthropic"));
                put("model", json!("claude-sonnet-4-5"));
                put(
                    "usage",
                    json!({"input": 0, "output": 0, "cacheRead": 5000, "cacheWrite": 0, "totalTokens": 5000}),
                );
                "usage"
            }
            _ => {
                put("payload", json!({"future": [1, 2.5, null]}));
                "future_entry_kind"
            }
        };
        let mut value = serde_json::Map::new();
        value.insert("type".into(), json!(ty));
        if self.version >= 2 {
            value.insert("id".into(), json!(id));
            value.insert(
                "parentId".into(),
                parent.map_or(Value::Null, |p| json!(self.entries[p].id)),
            );
        }
        if let Some(timestamp) = timestamp {
            value.insert("timestamp".into(), json!(timestamp));
        }
        value.extend(fields);
        if self.rng.chance(3) {
            value.insert("unknownField".into(), json!({"kept": true}));
        }
        self.entries.push(Entry {
            id,
            parent,
            value: Value::Object(value),
        });
    }
}

/// One generated file: its path, version, and the leaves (None = default) to compare it at.
pub struct Case {
    pub file: PathBuf,
    pub leaves: Vec<Option<String>>,
}

pub fn generate(seed: u64, index: usize, dir: &Path) -> Case {
    let mut rng = Rng(seed ^ (index as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let version = match rng.below(20) {
        0 => 1,
        1 => 2,
        _ => 3,
    };
    let mut g = Generator {
        rng,
        version,
        entries: Vec::new(),
        clock_ms: 1_767_225_600_000,
        calls: Vec::new(),
        messy_timestamps: false,
    };
    g.messy_timestamps = version >= 2 && g.rng.chance(25);
    let max = if g.messy_timestamps && g.rng.chance(30) {
        // Enough siblings under one hub for V8's merges and galloping, not only insertion sort.
        400
    } else if g.rng.chance(15) {
        80
    } else {
        30
    };
    let count = 1 + g.rng.below(max);
    for _ in 0..count {
        g.add();
    }
    let mut lines: Vec<String> = g
        .entries
        .iter()
        .map(|e| e.value.to_string().replace(LONE_SURROGATE, "\\ud83d"))
        .collect();
    // Sometimes write a few children before their parents (two agent processes, or a hand-edited file).
    if version >= 2 && lines.len() > 2 && g.rng.chance(10) {
        for _ in 0..1 + g.rng.below(3) {
            let i = g.rng.below(lines.len() - 1);
            lines.swap(i, i + 1);
        }
    }
    let mut header = json!({"type": "session", "id": format!("019b8a10-0000-7000-8000-{index:012x}"),
                            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/home/dev/app"});
    if version > 1 || g.rng.chance(50) {
        header["version"] = json!(version);
    }
    let mut text = header.to_string();
    for line in &lines {
        text.push('\n');
        text.push_str(line);
    }
    if !g.rng.chance(5) {
        text.push('\n');
    }
    let file = dir.join(format!("case-{index:04}-v{version}.jsonl"));
    std::fs::write(&file, text).expect("write generated session");
    let mut leaves = vec![None];
    if version >= 2 {
        for _ in 0..2 {
            let i = g.rng.below(g.entries.len());
            leaves.push(Some(g.entries[i].id.clone()));
        }
    }
    Case { file, leaves }
}

pub fn seed_from_env(default: u64) -> u64 {
    match std::env::var("SESSIOND_DIFF_SEED") {
        Ok(s) if s == "random" => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(default, |d| d.as_nanos() as u64),
        Ok(s) => s.parse().unwrap_or_else(|_| {
            panic!("SESSIOND_DIFF_SEED must be a number or \"random\", got {s:?}")
        }),
        Err(_) => default,
    }
}

/// A randomized run: its seed ([`seed_from_env`]), how many session files to generate
/// (`SESSIOND_DIFF_TREES`, else a default) and the empty folder they are written to.
pub struct Run {
    pub seed: u64,
    pub trees: usize,
    pub dir: PathBuf,
}

/// The run of the test `name`: the folder is `{name}-{seed}` under the tests' temporary
/// directory, emptied first.
pub fn run_from_env(name: &str, default_seed: u64, default_trees: usize) -> Run {
    let seed = seed_from_env(default_seed);
    let trees: usize = std::env::var("SESSIOND_DIFF_TREES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_trees);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{seed}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create case dir");
    Run { seed, trees, dir }
}
