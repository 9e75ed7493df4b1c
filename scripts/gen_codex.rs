//! Codex rollouts for benchmarks and measurements, deterministic by seed: the same options
//! always give the same bytes. The shapes are those Codex CLI 0.171.0 writes (docs/codex.md
//! §2–§4, the referee's corpus): a paginated file, one ordinal per line, and per turn
//! `event_msg task_started`, `turn_context`, `world_state` now and then, the user's prompt as a
//! `response_item` message, tool calls (`function_call` `exec_command` with its
//! `function_call_output`, outputs of a few hundred bytes to about 100 KB, as Codex stores them
//! already cut at about 10 KB tokens' worth), `token_usage_record` and `event_msg token_count`
//! after each answer, the assistant's message and `event_msg task_complete`. With
//! `compact_every`, a compaction once that many bytes were written since the last one: the
//! summarizer's answer, then `compacted` whose `replacement_history` holds the thread's user
//! prompts (the last 20) and the summary, then `world_state {full: true}`.
//!
//! Used by `gen-session --format codex` (scripts/gen_session.rs).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use serde_json::{Value, json};

/// What to write.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Stop after the turn during which the file reaches this many bytes.
    pub bytes: u64,
    /// The seed of everything drawn.
    pub seed: u64,
    /// Compact once this many bytes were written since the last compaction (`None`: never).
    pub compact_every: Option<u64>,
}

/// The thread id every line names.
const THREAD: &str = "01a2461f-9fe7-76b1-b04b-3d7cc5a73f3f";

/// splitmix64, as in gen-session: small, fast and deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn len(&mut self, lo: u64, hi: u64) -> usize {
        (lo + self.below(hi - lo)) as usize
    }
}

const WORDS: [&str; 16] = [
    "cargo", "test", "fn", "struct", "the", "file", "error", "line", "build", "ok", "value",
    "path", "read", "write", "tree", "leaf",
];

struct Writer {
    rng: Rng,
    out: BufWriter<File>,
    written: u64,
    ordinal: u64,
    clock: u64,
}

impl Writer {
    fn words(&mut self, bytes: usize) -> String {
        let mut s = String::with_capacity(bytes + 8);
        while s.len() < bytes {
            if !s.is_empty() {
                s.push(if self.rng.below(12) == 0 { '\n' } else { ' ' });
            }
            s.push_str(WORDS[self.rng.below(WORDS.len() as u64) as usize]);
        }
        s
    }

    fn line(&mut self, ty: &str, payload: Value) -> io::Result<()> {
        self.clock += 1 + self.rng.below(900);
        let secs = self.clock / 1000;
        let ts = format!(
            "2026-12-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            1 + (secs / 86_400) % 28,
            (secs / 3600) % 24,
            (secs / 60) % 60,
            secs % 60,
            self.clock % 1000
        );
        let mut text = serde_json::to_string(
            &json!({"timestamp": ts, "ordinal": self.ordinal, "type": ty, "payload": payload}),
        )?;
        text.push('\n');
        self.out.write_all(text.as_bytes())?;
        self.written += text.len() as u64;
        self.ordinal += 1;
        Ok(())
    }

    fn message(&mut self, role: &str, text: &str, id: String) -> Value {
        let kind = if role == "assistant" {
            "output_text"
        } else {
            "input_text"
        };
        json!({"type": "message", "id": id, "role": role,
               "content": [{"type": kind, "text": text}],
               "internal_chat_message_metadata_passthrough": {"turn_id": "t"}})
    }

    fn usage(&mut self, turn: u64, tokens: u64) -> io::Result<()> {
        let usage = json!({"input_tokens": tokens, "cached_input_tokens": 0,
            "cache_write_input_tokens": 0, "output_tokens": 40, "reasoning_output_tokens": 0,
            "total_tokens": tokens + 40});
        self.line(
            "token_usage_record",
            json!({"thread_id": THREAD, "turn_id": format!("turn-{turn}"), "session_id": THREAD,
                "root_turn_id": format!("turn-{turn}"), "response_id": format!("resp-{turn}"),
                "usage": usage, "turn_token_usage": usage, "thread_token_usage": usage}),
        )?;
        self.line(
            "event_msg",
            json!({"type": "token_count", "info": {"total_token_usage": usage}, "rate_limits": null}),
        )
    }
}

/// Writes the rollout at `path`.
pub fn write(path: &Path, options: &Options) -> io::Result<()> {
    let mut w = Writer {
        rng: Rng(options.seed),
        out: BufWriter::with_capacity(1 << 20, File::create(path)?),
        written: 0,
        ordinal: 0,
        clock: 1_780_000_000_000,
    };
    let instructions = w.words(20_000);
    w.line(
        "session_meta",
        json!({"id": THREAD, "session_id": THREAD, "timestamp": "2026-12-01T00:00:00.000Z",
            "cwd": "/work/project", "originator": "codex_exec", "cli_version": "0.171.0",
            "source": "exec", "thread_source": "user", "model_provider": "openai",
            "base_instructions": {"text": instructions, "provenance": "default"},
            "history_mode": "paginated"}),
    )?;
    let mut prompts: Vec<Value> = Vec::new();
    let mut since_compaction = 0u64;
    let mut turn = 0u64;
    while w.written < options.bytes {
        turn += 1;
        let start = w.written;
        w.line(
            "event_msg",
            json!({"type": "task_started", "turn_id": format!("turn-{turn}")}),
        )?;
        w.line(
            "turn_context",
            json!({"turn_id": format!("turn-{turn}"), "cwd": "/work/project", "model": "gpt-5.5",
                "approval_policy": "never", "sandbox_policy": {"type": "danger-full-access"},
                "summary": "none"}),
        )?;
        if turn == 1 || w.rng.below(10) == 0 {
            let state = w.words(600);
            w.line(
                "world_state",
                json!({"full": turn == 1, "state": {"filesystem": state}}),
            )?;
        }
        let len = w.rng.len(20, 800);
        let text = w.words(len);
        let prompt = w.message("user", &text, format!("msg_u{turn}"));
        w.line("response_item", prompt.clone())?;
        prompts.push(prompt);
        let tools = w.rng.below(8);
        for k in 0..tools {
            let call = format!("call_{turn}_{k}");
            let cmd = w.words(30);
            w.line(
                "response_item",
                json!({"type": "function_call", "status": "completed", "id": format!("item_{turn}_{k}"),
                    "name": "exec_command", "arguments": json!({"cmd": cmd}).to_string(),
                    "call_id": call}),
            )?;
            let tokens = 2_000 + w.rng.below(100_000);
            w.usage(turn, tokens)?;
            let size = if w.rng.below(10) == 0 {
                w.rng.len(20_000, 100_000)
            } else {
                w.rng.len(200, 6_000)
            };
            let body = w.words(size);
            w.line(
                "response_item",
                json!({"type": "function_call_output", "call_id": call,
                    "output": format!("Chunk ID: c{turn}\nWall time: 0.0100 seconds\nProcess exited with code 0\nOutput:\n{body}")}),
            )?;
        }
        let len = w.rng.len(40, 2_000);
        let answer = w.words(len);
        let msg = w.message("assistant", &answer, format!("item_{turn}_a"));
        w.line("response_item", msg)?;
        let tokens = 2_000 + w.rng.below(100_000);
        w.usage(turn, tokens)?;
        w.line(
            "event_msg",
            json!({"type": "task_complete", "turn_id": format!("turn-{turn}")}),
        )?;
        since_compaction += w.written - start;
        if options
            .compact_every
            .is_some_and(|every| since_compaction >= every)
        {
            since_compaction = 0;
            let summary = format!("SUMMARY: {}", w.words(3_000));
            let msg = w.message("assistant", &summary, format!("item_{turn}_s"));
            w.line("response_item", msg)?;
            let keep = prompts.len().saturating_sub(20);
            let mut history: Vec<Value> = prompts[keep..].to_vec();
            history.push(w.message(
                "user",
                &format!("Another language model started to solve this problem and produced a summary of its thinking process.\n{summary}"),
                format!("msg_s{turn}"),
            ));
            w.line(
                "compacted",
                json!({"message": summary, "replacement_history": history, "window_number": turn}),
            )?;
            let state = w.words(600);
            w.line(
                "world_state",
                json!({"full": true, "state": {"filesystem": state}}),
            )?;
        }
    }
    w.out.flush()
}
