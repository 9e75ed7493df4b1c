//! Writes a realistic, deterministic pi v3 session of a given size, for benchmarks.
//!
//! `cargo run --release --example gen-session -- OUT.jsonl SIZE_MB [SEED] [--entries N | --chain N]`
//! (`--format claude-code`: a Claude Code transcript, below)
//!
//! Turns look like pi's: a user request, assistant messages with text and tool calls
//! (read/bash/edit/write), tool results of a few KB to a few hundred KB, an occasional
//! ~1 MB base64 image, plus branches, labels, compactions and context edits. The same
//! seed and size always give the same bytes.
//!
//! `--entries N` writes about N entries instead (SIZE_MB is then ignored; the last turn is
//! finished, so a few more may follow) with small bodies: short texts, tool results of a
//! few hundred bytes and no images. Long paths over many small entries are where per-entry
//! costs (tree walks, projections) show, rather than JSON parsing of large bodies.
//!
//! `--chain N` writes exactly N entries after the header as one chain (no branches, labels or
//! compactions) of turns: a user message, an assistant message with text and one tool call,
//! its tool result, ~480 bytes an entry. The whole path is the context: the shape of a long
//! agent session.
//!
//! `--corpus N` writes N sessions instead, under `OUT/sessions/` in 50 project directories (OUT a
//! directory; SIZE_MB ignored): a heavy user's pi sessions directory, median 66 KB, 15 of every
//! 10,000 from 5 to 50 MB, about 1.25 GB for 10,000 ([`corpus_sizes`]).
//!
//! `--format claude-code` writes a Claude Code transcript of SIZE_MB instead (scripts/gen_claude.rs
//! says its shapes): `--tools-per-prompt N` fixes the tool calls a prompt (default: drawn, 0 to
//! 12), `--compact-at F` writes the one `/compact` once that share of the size is written
//! (default 0.1; 1: none).
//!
//! `--format codex` writes a Codex rollout of SIZE_MB instead (scripts/gen_codex.rs says its
//! shapes), compacting every `--compact-every-mb M` (default 4: a history of a few MB, what a
//! model window of some 272,000 tokens holds, with the events Codex writes beside it).

#[path = "gen_claude.rs"]
mod gen_claude;
#[path = "gen_codex.rs"]
mod gen_codex;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

use serde_json::{Value, json};
use sessiond::js::timestamp::format_iso;

/// splitmix64: small, fast and deterministic; quality is ample for shaping test data.
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
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const WORDS: &[&str] = &[
    "session",
    "tree",
    "leaf",
    "entry",
    "parse",
    "render",
    "context",
    "compaction",
    "token",
    "file",
    "read",
    "write",
    "async",
    "error",
    "result",
    "value",
    "index",
    "offset",
    "buffer",
    "stream",
    "config",
    "module",
    "test",
    "build",
];

fn text(rng: &mut Rng, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 16);
    while s.len() < bytes {
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        s.push(if rng.chance(8) { '\n' } else { ' ' });
    }
    s
}

fn base64ish(rng: &mut Rng, bytes: usize) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..bytes)
        .map(|_| A[rng.below(64) as usize] as char)
        .collect()
}

struct Gen {
    rng: Rng,
    out: BufWriter<File>,
    written: u64,
    next_id: u64,
    ts: i64,
    /// Ids in file order, with their parents, for choosing branch points.
    ids: Vec<String>,
    user_ids: Vec<String>,
    /// Small bodies (`--entries`): texts scaled down, no images.
    small: bool,
    /// The tool call a `--chain` tool result answers.
    last_call: Option<String>,
    /// `--corpus`: a tool result is cut to what the session's size has left (at least 500
    /// bytes), so a small session ends near its size instead of a whole large result past it.
    fit: Option<u64>,
    /// Whether tool results carry an occasional ~1 MB image (not in `--corpus` sessions under
    /// 5 MB: one image would make a 66 KB session a 1 MB one).
    images: bool,
}

impl Gen {
    /// A length drawn from `base + below(spread)`, scaled down for small sessions.
    fn len(&mut self, base: u64, spread: u64) -> usize {
        let n = base + self.rng.below(spread);
        self.scaled(n)
    }
    /// A fixed length, scaled down for small sessions (draws nothing, so the byte-sized
    /// sessions stay the same bytes).
    fn scaled(&self, n: u64) -> usize {
        (if self.small { n / 8 + 16 } else { n }) as usize
    }
}

impl Gen {
    fn id(&mut self) -> String {
        self.next_id += 1;
        format!(
            "{:08x}",
            self.next_id.wrapping_mul(0x9E37_79B1) & 0xffff_ffff
        )
    }
    fn timestamp(&mut self) -> String {
        self.ts += 500 + self.rng.below(30_000) as i64;
        format_iso(self.ts)
    }
    fn emit(&mut self, mut v: Value, parent: Option<&str>) -> std::io::Result<String> {
        let id = self.id();
        let ts = self.timestamp();
        let obj = v.as_object_mut().map(std::mem::take).unwrap_or_default();
        let mut line = serde_json::Map::new();
        line.insert(
            "type".into(),
            obj.get("type").cloned().unwrap_or(Value::Null),
        );
        line.insert("id".into(), json!(id));
        line.insert("parentId".into(), json!(parent));
        line.insert("timestamp".into(), json!(ts));
        for (k, val) in obj {
            if k != "type" {
                line.insert(k, val);
            }
        }
        let bytes = serde_json::to_vec(&Value::Object(line))?;
        self.out.write_all(&bytes)?;
        self.out.write_all(b"\n")?;
        self.written += bytes.len() as u64 + 1;
        self.ids.push(id.clone());
        Ok(id)
    }
}

/// How much to write: bytes, or (small bodies) entries.
#[derive(Clone, Copy)]
enum Target {
    Bytes(u64),
    Entries(usize),
    Chain(usize),
}

/// Where and when a session is: its header's `cwd` and creation time, and the `--corpus`
/// choices ([`Gen::fit`], [`Gen::images`]).
struct Place<'a> {
    cwd: &'a str,
    start_ms: i64,
    corpus: bool,
    /// Words the first user message starts with (`--corpus`: a word only this session has,
    /// for a search's rare queries).
    tag: &'a str,
}

const PLACE: Place<'static> = Place {
    cwd: "/home/dev/project",
    start_ms: 1_764_000_000_000,
    corpus: false,
    tag: "",
};

fn run(path: &str, target: Target, seed: u64, place: &Place) -> std::io::Result<()> {
    let file = File::create(path)?;
    let mut g = Gen {
        rng: Rng(seed),
        out: BufWriter::with_capacity(1 << 20, file),
        written: 0,
        next_id: seed.wrapping_mul(7919),
        ts: place.start_ms,
        ids: Vec::new(),
        user_ids: Vec::new(),
        small: matches!(target, Target::Entries(_) | Target::Chain(_)),
        last_call: None,
        fit: match target {
            Target::Bytes(b) if place.corpus => Some(b),
            _ => None,
        },
        images: !matches!(target, Target::Bytes(b) if place.corpus && b < 5 << 20),
    };
    let header = json!({"type":"session","version":3,"id":format!("0196a000-0000-7000-8000-{:012x}", seed),
        "timestamp": format_iso(g.ts), "cwd": place.cwd});
    let h = serde_json::to_vec(&header)?;
    g.out.write_all(&h)?;
    g.out.write_all(b"\n")?;
    g.written += h.len() as u64 + 1;
    if let Target::Chain(n) = target {
        return chain(&mut g, n);
    }
    let mut leaf: Option<String> = None;
    let provider = "anthropic";
    let model = "claude-sonnet-4-5";
    leaf = Some(g.emit(
        json!({"type":"model_change","provider":provider,"modelId":model}),
        leaf.as_deref(),
    )?);
    let mut turn = 0u64;
    let more = |g: &Gen| match target {
        Target::Bytes(b) => g.written < b,
        Target::Entries(n) => g.ids.len() < n,
        Target::Chain(_) => false,
    };
    while more(&g) {
        turn += 1;
        // Now and then, branch back to an earlier user message (a fork in place).
        if turn.is_multiple_of(40) && !g.user_ids.is_empty() {
            let back = g.user_ids[g.rng.below(g.user_ids.len() as u64) as usize].clone();
            let n = g.scaled(400);
            let summary = text(&mut g.rng, n);
            let from = leaf.clone();
            leaf = Some(g.emit(
                json!({"type":"branch_summary","fromId":from,"summary":summary}),
                Some(&back),
            )?);
        }
        let n = g.len(80, 600);
        let ask = text(&mut g.rng, n);
        let ask = if turn == 1 && !place.tag.is_empty() {
            format!("{} {ask}", place.tag)
        } else {
            ask
        };
        let ms = g.ts;
        let u = g.emit(json!({"type":"message","message":{"role":"user","content":[{"type":"text","text":ask}],"timestamp":ms}}), leaf.as_deref())?;
        g.user_ids.push(u.clone());
        leaf = Some(u);
        let steps = 1 + g.rng.below(6);
        for step in 0..steps {
            let call_id = format!("toolu_{:016x}", g.rng.next());
            let (tool, args) = match g.rng.below(4) {
                0 => (
                    "read",
                    json!({"path": format!("src/{}.rs", WORDS[g.rng.below(24) as usize])}),
                ),
                1 => ("bash", json!({"command": "cargo test --quiet"})),
                2 => (
                    "edit",
                    json!({"path": format!("src/{}.rs", WORDS[g.rng.below(24) as usize]), "oldText":"a","newText":"b"}),
                ),
                _ => (
                    "write",
                    json!({"path": format!("docs/{}.md", WORDS[g.rng.below(24) as usize]), "content": text(&mut g.rng, 300)}),
                ),
            };
            let n = g.len(100, 800);
            let thought = text(&mut g.rng, n);
            let ms = g.ts;
            let a = g.emit(json!({"type":"message","message":{"role":"assistant","content":[
                {"type":"text","text":thought},{"type":"toolCall","id":call_id,"name":tool,"arguments":args}],
                "api":"anthropic-messages","provider":provider,"model":model,
                "usage":{"input":1000*turn,"output":200,"cacheRead":0,"cacheWrite":0,"totalTokens":1000*turn+200,
                "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":ms}}), leaf.as_deref())?;
            leaf = Some(a);
            let size = match g.rng.below(10) {
                0..=5 => g.len(2_000, 8_000),
                6..=8 => g.len(10_000, 60_000),
                _ => g.len(100_000, 300_000),
            };
            let size = if g.small { size.min(600) } else { size };
            let size = match g.fit {
                Some(b) => size.min((b.saturating_sub(g.written) as usize).max(500)),
                None => size,
            };
            let mut content = vec![json!({"type":"text","text": text(&mut g.rng, size)})];
            if g.rng.chance(2) && !g.small && g.images {
                content.push(json!({"type":"image","data": base64ish(&mut g.rng, 1_000_000),"mimeType":"image/png"}));
            }
            let ms = g.ts;
            let is_error = g.rng.chance(5);
            let r = g.emit(json!({"type":"message","message":{"role":"toolResult","toolCallId":call_id,"toolName":tool,
                "content":content,"isError": is_error,"timestamp":ms}}), leaf.as_deref())?;
            leaf = Some(r.clone());
            if step == 0 && g.rng.chance(3) {
                leaf = Some(g.emit(json!({"type":"context_edit","targetId":r,"replacement":{"content":"[output elided]"}}), leaf.as_deref())?);
            }
        }
        let n = g.len(200, 1500);
        let done = text(&mut g.rng, n);
        let ms = g.ts;
        leaf = Some(g.emit(json!({"type":"message","message":{"role":"assistant","content":[{"type":"text","text":done}],
            "api":"anthropic-messages","provider":provider,"model":model,"usage":{"input":1000*turn,"output":300,"cacheRead":0,"cacheWrite":0,"totalTokens":1000*turn+300,
            "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":ms}}), leaf.as_deref())?);
        if g.rng.chance(5) {
            let target = g.user_ids[g.rng.below(g.user_ids.len() as u64) as usize].clone();
            leaf = Some(g.emit(
                json!({"type":"label","targetId":target,"label":format!("checkpoint-{turn}")}),
                leaf.as_deref(),
            )?);
        }
        if turn.is_multiple_of(25) {
            // Keep roughly the last few turns: the kept entry is a recent user message.
            let kept = g.user_ids[g.user_ids.len().saturating_sub(3)].clone();
            let n = g.scaled(3_000);
            let summary = text(&mut g.rng, n);
            leaf = Some(g.emit(json!({"type":"compaction","summary":summary,"firstKeptEntryId":kept,"tokensBefore":150_000,
                "details":{"readFiles":[],"modifiedFiles":[]}}), leaf.as_deref())?);
        }
    }
    g.out.flush()
}

/// `--chain N`: N entries in one chain of user / assistant-with-tool-call / tool-result turns.
fn chain(g: &mut Gen, n: usize) -> std::io::Result<()> {
    let mut leaf: Option<String> = None;
    for i in 0..n {
        let text = |g: &mut Gen, len: usize| -> String {
            let mut t = String::with_capacity(len + 16);
            while t.len() < len {
                t.push_str(WORDS[g.rng.below(WORDS.len() as u64) as usize]);
                t.push(' ');
            }
            t
        };
        let ts = g.ts;
        let message = match i % 3 {
            0 => {
                let t = text(g, 200);
                json!({"role": "user", "content": [{"type": "text", "text": t}], "timestamp": ts})
            }
            1 => {
                let t = text(g, 120);
                let call = format!("toolu_{:016x}", g.rng.next());
                json!({"role": "assistant", "content": [{"type": "text", "text": t},
                    {"type": "toolCall", "id": call, "name": "read", "arguments": {"path": "src/session.rs"}}],
                    "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                    "usage": {"input": 1000, "output": 200, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1200,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                    "stopReason": "toolUse", "timestamp": ts})
            }
            _ => {
                let t = text(g, 260);
                json!({"role": "toolResult", "toolCallId": format!("toolu_{:016x}", g.rng.next()), "toolName": "read",
                    "content": [{"type": "text", "text": t}], "isError": false, "timestamp": ts})
            }
        };
        // The tool result answers the call just made (the id drawn above is replaced).
        let message = if i % 3 == 2 {
            let mut m = message;
            if let Some(call) = g.last_call.take() {
                m["toolCallId"] = json!(call);
            }
            m
        } else {
            if i % 3 == 1 {
                g.last_call = message["content"][1]["id"].as_str().map(str::to_owned);
            }
            message
        };
        let id = g.emit(
            json!({"type": "message", "message": message}),
            leaf.as_deref(),
        )?;
        leaf = Some(id);
    }
    g.out.flush()
}

/// The size of each of `n` `--corpus` sessions, in bytes: `15 * n / 10,000` (at least one for
/// 700 sessions and more) of 5 to 50 MB, evenly spread; the rest drawn from a log-normal
/// distribution of median 66 KB and σ 0.656 (a mean of 82 KB), so that 10,000 sessions weigh
/// about 1.25 GB. Deterministic for a seed; the large ones are spread through the list.
fn corpus_sizes(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng(seed ^ 0x5EED_C0FF_EE00_0000);
    let mut uniform = || (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    let mut sizes: Vec<u64> = (0..n)
        .map(|_| {
            // Box–Muller: one standard normal from two uniforms.
            let (u1, u2) = (uniform().max(f64::MIN_POSITIVE), uniform());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            (66_000.0 * (0.656 * z).exp()).max(2_000.0) as u64
        })
        .collect();
    let big = (15 * n).div_ceil(10_000).min(n);
    for k in 0..big {
        let mb = if big == 1 {
            5.0
        } else {
            5.0 + 45.0 * k as f64 / (big - 1) as f64
        };
        sizes[(k * n / big + n / (2 * big)).min(n - 1)] = (mb * 1_048_576.0) as u64;
    }
    sizes
}

/// `--corpus N`: N pi sessions under `dir/sessions/`, in 50 project directories named as pi
/// names them (`--home-dev-pNN--`, each session's `cwd` `/home/dev/pNN`), files named as pi
/// names them (`<creation time>_<id>.jsonl`), sizes from [`corpus_sizes`]; session `i`'s first
/// prompt starts with the word `ticket<i, five digits>`. A heavy user's
/// session directory (issue 48), for `scripts/bench-scale.py`. Returns the bytes written.
fn corpus(dir: &std::path::Path, n: usize, seed: u64) -> std::io::Result<u64> {
    let sizes = corpus_sizes(n, seed);
    let mut total = 0;
    for (i, &bytes) in sizes.iter().enumerate() {
        let project = i % 50;
        let sub = dir
            .join("sessions")
            .join(format!("--home-dev-p{project:02}--"));
        std::fs::create_dir_all(&sub)?;
        let session_seed = (seed << 32) + i as u64 + 1;
        // A session every ten minutes, the newest about now.
        let start_ms = 1_764_000_000_000 - (n - i) as i64 * 600_000;
        let name = format!(
            "{}_0196a000-0000-7000-8000-{:012x}.jsonl",
            format_iso(start_ms).replace([':', '.'], "-"),
            session_seed
        );
        let path = sub.join(name);
        let cwd = format!("/home/dev/p{project:02}");
        let tag = format!("ticket{i:05}");
        let place = Place {
            cwd: &cwd,
            start_ms,
            corpus: true,
            tag: &tag,
        };
        run(
            &path.to_string_lossy(),
            Target::Bytes(bytes),
            session_seed,
            &place,
        )?;
        total += std::fs::metadata(&path)?.len();
    }
    Ok(total)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(size)) = (args.get(1), args.get(2).and_then(|s| s.parse::<f64>().ok()))
    else {
        eprintln!(
            "usage: gen-session OUT.jsonl SIZE_MB [SEED] [--entries N | --chain N | --corpus N | --format claude-code [--tools-per-prompt N] [--compact-at F] | --format codex [--compact-every-mb M]]"
        );
        return ExitCode::from(2);
    };
    let seed = args
        .get(3)
        .filter(|s| !s.starts_with("--"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    if option("--format").is_some_and(|f| f == "codex") {
        let options = gen_codex::Options {
            bytes: (size * 1_048_576.0) as u64,
            seed,
            compact_every: Some(
                (option("--compact-every-mb")
                    .and_then(|f| f.parse::<f64>().ok())
                    .unwrap_or(4.0)
                    * 1_048_576.0) as u64,
            ),
        };
        return match gen_codex::write(std::path::Path::new(path), &options) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gen-session: {path}: {e}");
                ExitCode::from(2)
            }
        };
    }
    if option("--format").is_some_and(|f| f == "claude-code") {
        let options = gen_claude::Options {
            bytes: (size * 1_048_576.0) as u64,
            seed,
            tools_per_prompt: option("--tools-per-prompt").and_then(|n| n.parse().ok()),
            compact_at: Some(
                option("--compact-at")
                    .and_then(|f| f.parse().ok())
                    .unwrap_or(0.1),
            ),
        };
        return match gen_claude::write(std::path::Path::new(path), &options) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gen-session: {path}: {e}");
                ExitCode::from(2)
            }
        };
    }
    let entries = option("--entries").and_then(|n| n.parse().ok());
    let chain = option("--chain").and_then(|n| n.parse().ok());
    let target = match (chain, entries) {
        (Some(n), _) => Target::Chain(n),
        (None, Some(n)) => Target::Entries(n),
        (None, None) => Target::Bytes((size * 1_048_576.0) as u64),
    };
    if let Some(n) = option("--corpus").and_then(|n| n.parse().ok()) {
        return match corpus(std::path::Path::new(path), n, seed) {
            Ok(bytes) => {
                eprintln!("gen-session: {n} sessions, {bytes} bytes under {path}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("gen-session: {path}: {e}");
                ExitCode::from(2)
            }
        };
    }
    match run(path, target, seed, &PLACE) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen-session: {path}: {e}");
            ExitCode::from(2)
        }
    }
}
