//! The resume leaf a live tail carries forward (src/dialect/claude/resume_memo.rs) is the one
//! computed in full (`resume_leaf_sized`, docs/claude-code.md §6.1) after every read of a
//! growing transcript: the real transcripts Claude Code wrote (tests/data/claude/real), the
//! benchmarks' generator (scripts/gen_claude.rs: rewinds, parallel tool calls, `/compact`, and
//! a file over 5 MiB on both sides of the pruning threshold), and random transcripts that
//! branch, compact, go back in time, share responses and write sidechain, progress and
//! `last-prompt` lines anywhere. The transcript is appended to a file and read as the daemon
//! reads it (`read_appended`), a line or a few at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../scripts/gen_claude.rs"]
#[allow(dead_code)]
mod gen_claude;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use gen_claude::Rng;
use serde_json::{Value, json};
use sessiond::core::tree::Mode;
use sessiond::dialect::claude::Claude;
use sessiond::dialect::claude::leaf::{resume_leaf, resume_leaf_sized};
use sessiond::dialect::claude::load::size_read;
use sessiond::storage::reader::{OpenedSession, open_session};
use sessiond::storage::tail::FileStamp;

/// What following one transcript found.
#[derive(Debug)]
struct Followed {
    /// Reads after the open, each compared.
    reads: usize,
    /// Answers carried forward rather than computed in full.
    carried: usize,
}

/// Appends `bytes` to a file in pieces ending at `cuts` (byte offsets, increasing, the last
/// `bytes.len()`), reads each piece as the live tail does and compares the carried answer with
/// the one computed in full after each.
fn follow(dir: &Path, name: &str, bytes: &[u8], cuts: &[usize]) -> Followed {
    let path = dir.join(format!("{name}.jsonl"));
    std::fs::write(&path, &bytes[..cuts[0]]).unwrap();
    let mut s: OpenedSession<Claude> = open_session(&path, Mode::Lenient).unwrap();
    let check = |s: &OpenedSession<Claude>, at: usize| {
        let full = resume_leaf_sized(&s.tree, size_read(&s.tree));
        let carried = resume_leaf(&s.tree);
        assert_eq!(
            carried,
            full,
            "{name}: the resume leaf after {at} bytes of\n{}",
            String::from_utf8_lossy(&bytes[..at])
        );
    };
    check(&s, cuts[0]);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    let mut from = cuts[0];
    for &to in &cuts[1..] {
        file.write_all(&bytes[from..to]).unwrap();
        let reader = File::open(&path).unwrap();
        let stamp = FileStamp::of(&reader).unwrap();
        s.read_appended(&reader, stamp).unwrap();
        check(&s, to);
        from = to;
    }
    Followed {
        reads: cuts.len() - 1,
        carried: s.tree.ext().resume_memo().carried_forward(),
    }
}

/// The end of every line of `bytes`, from the line `skip` lines in, taking `every` lines at a
/// time.
fn line_cuts(bytes: &[u8], skip: usize, every: usize) -> Vec<usize> {
    let ends: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    let mut cuts: Vec<usize> = ends
        .iter()
        .skip(skip)
        .step_by(every.max(1))
        .copied()
        .collect();
    if cuts.last() != ends.last() {
        cuts.extend(ends.last());
    }
    cuts
}

#[test]
fn real_transcripts_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["compacted", "with-subagent"] {
        let bytes = std::fs::read(format!("tests/data/claude/real/{name}.jsonl")).unwrap();
        let f = follow(dir.path(), name, &bytes, &line_cuts(&bytes, 1, 1));
        assert!(f.reads > 10, "{name}: {f:?}");
    }
}

#[test]
fn generated_transcripts_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("plain", 400_000, None, 11),
        ("compacted", 400_000, Some(0.3), 12),
        ("tool-heavy", 300_000, Some(0.5), 13),
    ];
    for (name, bytes_wanted, compact_at, seed) in cases {
        let path = dir.path().join(format!("{name}-source.jsonl"));
        gen_claude::write(
            &path,
            &gen_claude::Options {
                bytes: bytes_wanted,
                seed,
                tools_per_prompt: None,
                compact_at,
            },
        )
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let f = follow(dir.path(), name, &bytes, &line_cuts(&bytes, 1, 1));
        // An ordinary conversation carries most answers forward: a full read is left for
        // `last-prompt` lines, the compaction and the odd shape.
        assert!(
            f.carried * 2 > f.reads,
            "{name}: only {} of {} answers carried forward",
            f.carried,
            f.reads
        );
    }
}

#[test]
fn generated_transcript_across_the_pruning_threshold() {
    let dir = tempfile::tempdir().unwrap();
    for (name, compact_at, seed) in [("big", None, 21), ("big-compacted", Some(0.2), 22)] {
        let path = dir.path().join(format!("{name}-source.jsonl"));
        gen_claude::write(
            &path,
            &gen_claude::Options {
                bytes: 6_000_000,
                seed,
                tools_per_prompt: None,
                compact_at,
            },
        )
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        // From about 4.5 MB on, a line at a time: the reads cross 5 MiB.
        let start = bytes[..4_500_000].iter().filter(|&&b| b == b'\n').count();
        let f = follow(dir.path(), name, &bytes, &line_cuts(&bytes, start, 1));
        assert!(f.carried > 0 && f.reads > 50, "{name}: {f:?}");
    }
}

/// A random index into a list of `n`.
fn pick(rng: &mut Rng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

/// A random transcript of `lines` lines: mostly a conversation growing at its end, with
/// every shape the leaf rule tells apart mixed in.
fn random_transcript(seed: u64, lines: usize) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut out: Vec<Value> = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    let mut responses: Vec<String> = Vec::new();
    let mut open_calls: Vec<String> = Vec::new();
    let mut clock: i64 = 1_780_000_000_000;
    let mut last: Option<String> = None;
    for i in 0..lines {
        clock += 1000;
        let mut time = clock;
        if rng.chance(3) {
            time -= 5000; // back in time
        }
        let stamp = json!(sessiond::js::timestamp::format_iso(time));
        let uuid = format!("u{seed}-{i}");
        let roll = rng.below(100);
        let parent = if rng.chance(6) && !ids.is_empty() {
            Some(ids[pick(&mut rng, ids.len())].clone()) // a branch, as a rewind writes it
        } else {
            last.clone()
        };
        let sidechain = rng.chance(3);
        let mut line = match roll {
            0..=7 => {
                let leaf = if rng.chance(85) || ids.is_empty() {
                    last.clone()
                } else {
                    Some(ids[pick(&mut rng, ids.len())].clone())
                };
                let mut v = json!({"type": "last-prompt", "leafUuid": leaf, "sessionId": "s"});
                if rng.chance(10) {
                    v["explicit"] = json!(true);
                }
                out.push(v);
                continue;
            }
            8..=9 => {
                out.push(json!({"type": "file-history-snapshot", "messageId": uuid}));
                continue;
            }
            10 if last.is_some() => {
                // A compaction: the boundary, then its summary, the last line preserved.
                let kept = last.clone().unwrap();
                let summary = format!("{uuid}-summary");
                out.push(
                    json!({"type": "system", "subtype": "compact_boundary", "uuid": uuid,
                    "parentUuid": null, "logicalParentUuid": kept, "isSidechain": false,
                    "timestamp": stamp, "content": "Conversation compacted",
                    "compactMetadata": {"trigger": "manual", "preservedSegment":
                        {"headUuid": kept, "anchorUuid": summary, "tailUuid": kept}}}),
                );
                out.push(json!({"type": "user", "uuid": summary, "parentUuid": uuid,
                    "isSidechain": false, "isCompactSummary": true, "timestamp": stamp,
                    "message": {"role": "user", "content": "summary"}}));
                ids.push(uuid);
                ids.push(summary.clone());
                last = Some(summary);
                continue;
            }
            11..=13 if parent.is_some() => {
                let p = parent.clone();
                out.push(json!({"type": "progress", "uuid": uuid, "parentUuid": p,
                    "timestamp": stamp, "isSidechain": false}));
                // A progress line is no tree line: the next line's parent re-links through it.
                last = Some(uuid);
                continue;
            }
            14..=30 => {
                json!({"type": "user", "message": {"role": "user", "content": format!("prompt {i}")}})
            }
            31..=45 if !open_calls.is_empty() => {
                let call = open_calls.remove(pick(&mut rng, open_calls.len()));
                json!({"type": "user", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": call, "content": "ok"}]},
                    "toolUseResult": {"stdout": "ok"}})
            }
            46..=60 => {
                let call = format!("toolu_{seed}_{i}");
                open_calls.push(call.clone());
                let id = if rng.chance(30) && !responses.is_empty() {
                    responses[pick(&mut rng, responses.len())].clone()
                } else {
                    format!("msg_{i}")
                };
                responses.push(id.clone());
                json!({"type": "assistant", "message": {"id": id, "role": "assistant",
                    "content": [{"type": "tool_use", "id": call, "name": "Bash", "input": {}}]}})
            }
            61..=70 => {
                let id = if rng.chance(40) && !responses.is_empty() {
                    responses[responses.len() - 1].clone()
                } else {
                    format!("msg_{i}")
                };
                responses.push(id.clone());
                let block = if rng.chance(30) {
                    json!({"type": "thinking", "thinking": "hm", "signature": "s"})
                } else {
                    json!({"type": "text", "text": format!("answer {i}")})
                };
                json!({"type": "assistant", "message": {"id": id, "role": "assistant", "content": [block]}})
            }
            71..=85 => json!({"type": "attachment", "attachment": {"type": if rng.chance(20) {
                "hook_success" } else { "todo_reminder" }, "content": "x"}}),
            _ => json!({"type": "system", "subtype": "turn_duration", "durationMs": 5}),
        };
        line["uuid"] = json!(uuid);
        line["parentUuid"] = json!(parent);
        line["isSidechain"] = json!(sidechain);
        if !rng.chance(2) {
            line["timestamp"] = stamp;
        }
        out.push(line);
        ids.push(uuid.clone());
        if !sidechain {
            last = Some(uuid);
        }
    }
    let mut bytes = Vec::new();
    for v in out {
        bytes.extend_from_slice(v.to_string().as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

#[test]
fn random_transcripts_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut carried = 0;
    let mut reads = 0;
    let seeds: u64 = std::env::var("SESSIOND_RANDOM_TRANSCRIPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    for seed in 0..seeds {
        let bytes = random_transcript(seed, 160);
        let every = 1 + (seed as usize % 3);
        let f = follow(
            dir.path(),
            &format!("random-{seed}"),
            &bytes,
            &line_cuts(&bytes, 1, every),
        );
        carried += f.carried;
        reads += f.reads;
    }
    eprintln!("random transcripts: {carried} of {reads} answers carried forward");
    // The random shapes fall back to a full read often; enough of them must still be carried
    // for the comparison to test the carrying.
    assert!(
        carried * 10 > reads,
        "only {carried} of {reads} answers carried forward"
    );
}
