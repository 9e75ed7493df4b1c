//! Property-based fuzzing on the stable toolchain (proptest): the line reader and classifier,
//! where the probe places a message in its line, the LSP frame decoder, and projection and
//! compaction planning over random trees, search queries, file names as bytes, nesting depth,
//! and request ids in JSON-RPC frames.
//!
//! Invariants: no input panics (proptest catches a panic, shrinks the input and reports it), no
//! input hangs (every input is bounded in size), a refusal is always a typed error, and on valid
//! input the fuzzed path gives what the ordinary path gives (a file applied in random chunks
//! through `apply_batch` equals `open_session` of the whole file; a frame stream split anywhere
//! decodes as the stream read at once).
//!
//! Each target runs `SESSIOND_FUZZ_CASES` inputs (default: a count that keeps the whole file near
//! a minute in a debug build on a shared machine) and prints how many it tried. A longer run:
//!
//! ```text
//! SESSIOND_FUZZ_CASES=200000 cargo test --release --test fuzz -- --nocapture
//! ```
//!
//! The generator's seed is random on every run; a failure prints the shrunk input, and
//! `PROPTEST_RNG_SEED=<n>` replays a run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use sessiond::core::tree::Mode;
use sessiond::dialect::pi::Pi;
use sessiond::dialect::pi::Tree;
use sessiond::dialect::pi::compaction::{self, Options};
use sessiond::dialect::pi::format::EntryId;
use sessiond::dialect::pi::projection::project;
use sessiond::server::transport::decode_frames;
use sessiond::storage::lines::{Position, apply_batch};
use sessiond::storage::reader::{FileLines, OpenError, OpenedSession, open_session};

/// Inputs per target: `SESSIOND_FUZZ_CASES`, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("SESSIOND_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The generator's seed: `SESSIOND_FUZZ_SEED` (a number, or `random` for a time-based one),
/// fixed by default so the test command is deterministic; printed with every run.
fn seed() -> u64 {
    match std::env::var("SESSIOND_FUZZ_SEED").ok().as_deref() {
        Some("random") => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        Some(n) => n.parse().unwrap_or(0x5e55_10d0_f022),
        None => 0x5e55_10d0_f022,
    }
}

/// Runs `test` on `cases` inputs from `strategy`, prints how many were tried, and fails with
/// proptest's shrunk counterexample.
fn fuzz<S: Strategy>(
    name: &str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let cases = cases(default_cases);
    let seed = seed();
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            // Inputs are bounded; give shrinking a bounded budget too.
            max_shrink_iters: 2048,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let tried = AtomicU64::new(0);
    let started = std::time::Instant::now();
    let result = runner.run(&strategy, |value| {
        tried.fetch_add(1, Ordering::Relaxed);
        test(value)
    });
    // Straight to stderr, past the test harness's capture, so CI logs carry the figure.
    let _ = writeln!(
        std::io::stderr(),
        "fuzz {name}: {} inputs tried in {:.1?} ({cases} cases asked, seed {seed})",
        tried.load(Ordering::Relaxed),
        started.elapsed()
    );
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
}

/// A scratch directory for this test binary.
fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// Writes `bytes` to a fresh file in the scratch directory.
fn write_temp(bytes: &[u8]) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let path = scratch().join(format!("f{}.jsonl", N.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Real sessions to cut and splice: every `.jsonl` under examples/ and tests/data/ up to 256 KiB.
fn samples() -> &'static [Vec<u8>] {
    static SAMPLES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let mut files = common::jsonl_files_under(&common::repo("examples"));
        files.extend(common::jsonl_files_under(&common::repo("tests/data")));
        files
            .iter()
            .filter_map(|f| std::fs::read(f).ok())
            .filter(|b| !b.is_empty() && b.len() <= 256 << 10)
            .collect()
    })
}

/// The samples that open strictly, parents first: the valid input for the equality properties.
fn valid_samples() -> &'static [Vec<u8>] {
    static VALID: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    VALID.get_or_init(|| {
        samples()
            .iter()
            .filter(|b| {
                // Every prefix of these is valid too: parents come before their children (a
                // child written before its parent makes a prefix refuse, rightly).
                open_session::<Pi>(&write_temp(b), Mode::Strict).is_ok_and(|o| {
                    o.tree
                        .nodes()
                        .iter()
                        .enumerate()
                        .all(|(i, n)| n.parent.is_none_or(|p| (p as usize) < i))
                })
            })
            .cloned()
            .collect()
    })
}

/// Opens `bytes` in both modes; neither may panic, and strict success implies lenient success
/// with the same entries.
fn open_both(bytes: &[u8]) -> Result<Option<OpenedSession<Pi>>, TestCaseError> {
    let path = write_temp(bytes);
    let strict = open_session::<Pi>(&path, Mode::Strict);
    let lenient = open_session::<Pi>(&path, Mode::Lenient);
    let _ = std::fs::remove_file(&path);
    if let Err(e) = &strict {
        // A refusal is typed and says what it is about.
        prop_assert!(!e.to_string().is_empty());
        prop_assert!(
            matches!(
                e,
                OpenError::Corrupt { .. } | OpenError::Pending { .. } | OpenError::Io { .. }
            ),
            "unexpected refusal {e:?}"
        );
    }
    if let (Ok(s), Ok(l)) = (&strict, &lenient) {
        prop_assert_eq!(ids(&s.tree), ids(&l.tree));
    }
    if strict.is_ok() {
        prop_assert!(
            lenient.is_ok(),
            "strict opened, lenient refused: {:?}",
            lenient.err()
        );
    }
    Ok(strict.ok())
}

/// Each node's id and parent id, in file order.
fn ids(tree: &Tree) -> Vec<(String, Option<String>)> {
    tree.nodes()
        .iter()
        .map(|n| {
            (
                n.entry.id.to_string(),
                n.parent.map(|p| tree.node(p).entry.id.to_string()),
            )
        })
        .collect()
}

/// Everything a reader of the tree sees: ids, parents, spans and children in order.
fn shape(tree: &Tree) -> Vec<String> {
    tree.nodes()
        .iter()
        .map(|n| {
            format!(
                "{} {:?} {:?} {:?}",
                n.entry.id, n.parent, n.entry.span, n.children
            )
        })
        .collect()
}

/// Bytes that look like session lines: JSON punctuation, keys, ids, newlines, CR, UTF-8 pieces.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    const TOKENS: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\n",
        "\r\n",
        " ",
        "\\",
        "\\u",
        "d83d",
        "null",
        "0",
        "-1e999",
        "\"type\"",
        "\"session\"",
        "\"message\"",
        "\"compaction\"",
        "\"label\"",
        "\"id\"",
        "\"parentId\"",
        "\"a1\"",
        "\"b2\"",
        "\"version\"",
        "3",
        "1",
        "\"timestamp\"",
        "\"role\"",
        "\"user\"",
        "\"content\"",
        "\"firstKeptEntryId\"",
        "\"targetId\"",
        "é",
        "🚀",
        "\u{0}",
        "\u{ff}",
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"cwd\":\"/\"}\n",
        "{\"type\":\"message\",\"id\":\"a1\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
        "{\"type\":\"message\",\"id\":\"b2\",\"parentId\":\"a1\",\"timestamp\":\"x\",\"message\":{\"role\":\"assistant\",\"content\":[]}}\n",
    ];
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1024),
        prop::collection::vec(prop::sample::select(TOKENS), 0..120)
            .prop_map(|t| t.concat().into_bytes()),
    ]
}

#[derive(Clone, Debug)]
enum Edit {
    Truncate(u32),
    Delete(u32, u16),
    Insert(u32, Vec<u8>),
    /// Copies a range of the file to another place (a line spliced into another).
    Splice(u32, u16, u32),
    Flip(u32, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<u32>().prop_map(Edit::Truncate),
        (any::<u32>(), any::<u16>()).prop_map(|(a, n)| Edit::Delete(a, n % 512)),
        (any::<u32>(), jsonish()).prop_map(|(a, b)| Edit::Insert(a, b)),
        (any::<u32>(), any::<u16>(), any::<u32>()).prop_map(|(a, n, b)| Edit::Splice(
            a,
            n % 2048,
            b
        )),
        (any::<u32>(), any::<u8>()).prop_map(|(a, v)| Edit::Flip(a, v)),
    ]
}

fn apply_edit(bytes: &mut Vec<u8>, e: &Edit) {
    let at = |x: u32, len: usize| (x as usize) % (len + 1);
    match e {
        Edit::Truncate(x) => bytes.truncate(at(*x, bytes.len())),
        Edit::Delete(x, n) => {
            let a = at(*x, bytes.len());
            let b = (a + *n as usize).min(bytes.len());
            bytes.drain(a..b);
        }
        Edit::Insert(x, ins) => {
            let a = at(*x, bytes.len());
            bytes.splice(a..a, ins.iter().copied());
        }
        Edit::Splice(x, n, y) => {
            let a = at(*x, bytes.len());
            let b = (a + *n as usize).min(bytes.len());
            let piece = bytes[a..b].to_vec();
            let to = at(*y, bytes.len());
            bytes.splice(to..to, piece);
        }
        Edit::Flip(x, v) => {
            if !bytes.is_empty() {
                let a = (*x as usize) % bytes.len();
                bytes[a] = *v;
            }
        }
    }
}

/// A tree holding only a version-3 header, for `apply_batch` on arbitrary bytes.
fn header_tree(mode: Mode) -> (Tree, Position) {
    let header = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"cwd\":\"/\"}\n";
    let path = write_temp(header);
    let opened = open_session::<Pi>(&path, mode).unwrap();
    (opened.tree, opened.position)
}

#[test]
fn reader_random_bytes() {
    fuzz("reader: random bytes", 3000, jsonish(), |bytes| {
        open_both(&bytes)?;
        for mode in [Mode::Strict, Mode::Lenient] {
            let (mut tree, from) = header_tree(mode);
            let applied = apply_batch::<Pi>(&mut tree, from, &bytes);
            prop_assert!(applied.position.offset >= from.offset);
            prop_assert!(applied.position.offset <= from.offset + bytes.len() as u64);
            if let Some(c) = applied.corruption {
                prop_assert!(!c.to_string().is_empty());
            }
        }
        Ok(())
    });
}

#[test]
fn reader_cut_and_spliced_sessions() {
    let n = samples().len();
    assert!(
        n > 10,
        "expected session samples under examples/ and tests/data/"
    );
    fuzz(
        "reader: cuts and splices of real sessions",
        3000,
        (0..n, prop::collection::vec(edit(), 1..4)),
        |(i, edits)| {
            let original = &samples()[i];
            let mut bytes = original.clone();
            for e in &edits {
                apply_edit(&mut bytes, e);
            }
            let opened = open_both(&bytes)?;
            // A file cut short opens (if at all) with the first entries of the whole file.
            if let ([Edit::Truncate(_)], Some(cut), Ok(whole)) = (
                &edits[..],
                opened,
                open_session::<Pi>(&write_temp(original), Mode::Strict),
            ) {
                let (cut, whole) = (ids(&cut.tree), ids(&whole.tree));
                prop_assert!(cut.len() <= whole.len());
                prop_assert_eq!(&cut[..], &whole[..cut.len()]);
            }
            Ok(())
        },
    );
}

#[test]
fn reader_chunked_apply_equals_open() {
    let n = valid_samples().len();
    assert!(n > 5, "expected valid session samples");
    fuzz(
        "reader: apply_batch in random chunks = open_session",
        2000,
        (0..n, prop::collection::vec(any::<u32>(), 0..12)),
        |(i, cuts)| {
            let bytes = &valid_samples()[i];
            let header_end = memchr::memchr(b'\n', bytes).map_or(bytes.len(), |p| p + 1);
            let span = bytes.len() - header_end;
            let mut ends: Vec<usize> = cuts
                .iter()
                .map(|c| header_end + (*c as usize) % (span + 1))
                .collect();
            ends.push(bytes.len());
            ends.sort_unstable();
            // The first piece is opened as a file (the open-time reader), the rest is tailed.
            let first = ends[0];
            let start = match open_session::<Pi>(&write_temp(&bytes[..first]), Mode::Strict) {
                Ok(o) => o,
                Err(e) => return Err(TestCaseError::fail(format!("prefix of {first} bytes: {e}"))),
            };
            let (mut tree, mut pos, mut torn) = (start.tree, start.position, start.torn_tail);
            for &end in &ends[1..] {
                let from = usize::try_from(pos.offset).unwrap();
                let applied = apply_batch::<Pi>(&mut tree, pos, &bytes[from..end]);
                prop_assert!(
                    applied.corruption.is_none(),
                    "{:?} at {end}",
                    applied.corruption
                );
                pos = applied.position;
                torn = applied.torn_tail;
            }
            let whole = open_session::<Pi>(&write_temp(bytes), Mode::Strict).unwrap();
            prop_assert_eq!(shape(&tree), shape(&whole.tree));
            prop_assert_eq!(pos, whole.position);
            prop_assert_eq!(torn, whole.torn_tail);
            let leaf = whole.tree.default_leaf();
            prop_assert_eq!(
                format!("{:?}", project(&tree, leaf)),
                format!("{:?}", project(&whole.tree, leaf))
            );
            Ok(())
        },
    );
}

/// One frame's header, in the shapes clients send.
fn frame(body: &[u8], style: u8) -> Vec<u8> {
    let n = body.len();
    let head = match style % 4 {
        0 => format!("Content-Length: {n}\r\n\r\n"),
        1 => format!("content-length:{n}\r\n\r\n"),
        2 => format!(
            "Content-Length: {n}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
        ),
        _ => format!("Content-Type: x\r\nCONTENT-LENGTH:   {n}  \r\n\r\n"),
    };
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

/// `bytes` cut at `cuts` (taken modulo its length).
fn split<'a>(bytes: &'a [u8], cuts: &[u32]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| (*c as usize) % (bytes.len() + 1))
        .collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    at.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

#[test]
fn frames_valid_streams_split_anywhere() {
    fuzz(
        "transport: valid frame streams split anywhere",
        5000,
        (
            prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 0..300), any::<u8>()),
                0..8,
            ),
            prop::collection::vec(any::<u32>(), 0..16),
        ),
        |(frames, cuts)| {
            let mut stream = Vec::new();
            for (body, style) in &frames {
                stream.extend(frame(body, *style));
            }
            let got = decode_frames(split(&stream, &cuts));
            let want: Vec<Result<Vec<u8>, String>> =
                frames.into_iter().map(|(b, _)| Ok(b)).collect();
            prop_assert_eq!(got, want);
            Ok(())
        },
    );
}

#[test]
fn frames_garbage_is_split_invariant() {
    // Headers, lengths (huge, negative, missing), bodies and noise, mixed.
    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..64),
            (prop::collection::vec(any::<u8>(), 0..64), any::<u8>())
                .prop_map(|(b, s)| frame(&b, s)),
            prop::sample::select(vec![
                "Content-Length: 99999999999999999999\r\n\r\n",
                "Content-Length: 300000000\r\n\r\n",
                "Content-Length: -1\r\n\r\n",
                "Content-Length: \r\n\r\n",
                "Content-Length: 5\r\n",
                "X: y\r\n\r\n",
                "\r\n\r\n",
                "\n",
                "Content-Length",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}",
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
        ]
    }
    fuzz(
        "transport: random headers and lengths, split reads",
        5000,
        (
            prop::collection::vec(piece(), 0..24),
            prop::collection::vec(any::<u32>(), 0..16),
        ),
        |(pieces, cuts)| {
            let stream = pieces.concat();
            let whole = decode_frames([&stream[..]]);
            let got = decode_frames(split(&stream, &cuts));
            prop_assert_eq!(&got, &whole);
            let body_bytes: usize = got.iter().flatten().map(Vec::len).sum();
            prop_assert!(body_bytes <= stream.len());
            for e in got.iter().filter_map(|f| f.as_ref().err()) {
                prop_assert!(!e.is_empty());
            }
            Ok(())
        },
    );
}

/// One generated entry: its type and fields, the parent chosen among earlier entries.
#[derive(Clone, Debug)]
struct GenEntry {
    kind: u8,
    parent: u16,
    target: u16,
    size: u16,
    ts: u8,
}

fn session_text(entries: &[GenEntry]) -> String {
    let mut out = String::from(
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}\n",
    );
    for (i, e) in entries.iter().enumerate() {
        let id = format!("e{i}");
        let parent = match (i, e.parent % 8) {
            (0, _) | (_, 0) => "null".to_owned(),
            (_, 1..=4) => format!("\"e{}\"", i - 1),
            _ => format!("\"e{}\"", e.parent as usize % i),
        };
        let target = match e.target % 10 {
            0 => id.clone(),
            1 => "nope".to_owned(),
            _ => format!("e{}", e.target as usize % (i + 1)),
        };
        let text = "word ".repeat(e.size as usize % 3000);
        let ts = match e.ts % 5 {
            0 => String::new(),
            1 => ",\"timestamp\":\"bad\"".to_owned(),
            _ => format!(",\"timestamp\":\"2026-01-01T00:{:02}:00.000Z\"", e.ts % 60),
        };
        let call = format!("t{}", e.target % 4);
        let body = match e.kind % 12 {
            0 | 1 => format!(
                "\"type\":\"message\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\",\"timestamp\":1}}"
            ),
            2 | 3 => format!(
                "\"type\":\"message\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}},{{\"type\":\"toolCall\",\"id\":\"{call}\",\"name\":\"read\",\"arguments\":{{\"path\":\"src/{i}.rs\"}}}}],\"provider\":\"p\",\"model\":\"m\",\"usage\":{{\"input\":{},\"output\":1,\"cacheRead\":0,\"cacheWrite\":0,\"totalTokens\":2}},\"stopReason\":\"toolUse\",\"timestamp\":1}}",
                e.size
            ),
            4 => format!(
                "\"type\":\"message\",\"message\":{{\"role\":\"toolResult\",\"toolCallId\":\"{call}\",\"toolName\":\"read\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"isError\":{},\"timestamp\":1}}",
                e.size % 2 == 0
            ),
            5 => format!(
                "\"type\":\"compaction\",\"summary\":\"s{text}\",\"firstKeptEntryId\":\"{target}\",\"tokensBefore\":{}",
                e.size
            ),
            6 => format!(
                "\"type\":\"branch_summary\",\"fromId\":\"{target}\",\"summary\":\"{text}\""
            ),
            7 => format!("\"type\":\"label\",\"targetId\":\"{target}\",\"label\":\"l{i}\""),
            8 => format!(
                "\"type\":\"custom_message\",\"customType\":\"c\",\"content\":\"{text}\",\"display\":true"
            ),
            9 => format!(
                "\"type\":\"context_edit\",\"targetId\":\"{target}\",\"replacement\":{}",
                if e.size % 2 == 0 {
                    "null".to_owned()
                } else {
                    format!("{{\"content\":\"{text}\"}}")
                }
            ),
            10 => "\"type\":\"model_change\",\"provider\":\"p\",\"modelId\":\"m2\"".to_owned(),
            _ => format!(
                "\"type\":\"message\",\"message\":{{\"role\":\"bashExecution\",\"command\":\"ls\",\"output\":\"{text}\",\"exitCode\":0,\"timestamp\":1}}"
            ),
        };
        out.push_str(&format!(
            "{{\"id\":\"{id}\",\"parentId\":{parent}{ts},{body}}}\n"
        ));
    }
    out
}

#[test]
fn projection_and_compaction_over_random_trees() {
    let entry = (
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
    )
        .prop_map(|(kind, parent, target, size, ts)| GenEntry {
            kind,
            parent,
            target,
            size,
            ts,
        });
    fuzz(
        "core: projection and compaction planning over random trees",
        600,
        (
            prop::collection::vec(entry, 0..40),
            prop::sample::select(vec![0u64, 1, 50, 500, 5000, 20_000]),
        ),
        |(entries, keep)| {
            let path = write_temp(session_text(&entries).as_bytes());
            let opened = match open_session::<Pi>(&path, Mode::Strict) {
                Ok(o) => o,
                // A compaction or label naming an unknown id is still a valid tree; only an
                // unknown parent cannot occur here, so a refusal is a finding.
                Err(e) => return Err(TestCaseError::fail(format!("generated file refused: {e}"))),
            };
            let tree = &opened.tree;
            let lines = FileLines::open(&path).unwrap();
            let mut leaves: Vec<_> = tree.leaves().map(Some).collect();
            leaves.push(None);
            leaves.push(tree.default_leaf());
            for leaf in leaves {
                let p = project(tree, leaf);
                // The path runs from a root to the leaf through parents.
                prop_assert_eq!(p.path.last().copied(), leaf);
                if let Some(&first) = p.path.first() {
                    prop_assert!(tree.node(first).parent.is_none());
                }
                for w in p.path.windows(2) {
                    prop_assert_eq!(tree.node(w[1]).parent, Some(w[0]));
                }
                for item in &p.items {
                    prop_assert!(p.path.contains(&item.node));
                }
                let options = Options {
                    keep_recent_tokens: keep,
                    summary: None,
                    summary_source: compaction::SummarySource::Client,
                    custom_instructions: None,
                    new_entry_id: EntryId::new("fuzz0001"),
                    time_ms: 1_767_225_600_000,
                    with_request: true,
                };
                match compaction::plan(tree, &lines, leaf, &options) {
                    Ok(Ok(plan)) => {
                        let kept = plan.preparation.first_kept_entry_id.as_str();
                        prop_assert!(
                            p.path
                                .iter()
                                .any(|&n| tree.node(n).entry.id.as_str() == kept),
                            "first kept entry {kept} is not on the path"
                        );
                    }
                    Ok(Err(_nothing)) => {}
                    Err(e) => prop_assert!(!e.to_string().is_empty()),
                }
            }
            let _ = std::fs::remove_file(&path);
            Ok(())
        },
    );
}

/// A JSON value as text, written with random whitespace, escapes and nesting (depth ≤ 2).
fn json_value(depth: u32) -> BoxedStrategy<String> {
    let text = prop::sample::select(vec![
        r#""a""#,
        r#""message""#,
        r#""\"message\":{}""#,
        r#""}""#,
        r#""é \u00e9 😀""#,
        r#""\\""#,
        r#""""#,
    ]);
    let scalar = prop_oneof![
        text.prop_map(str::to_owned),
        prop::sample::select(vec!["0", "-1.5e3", "true", "null"]).prop_map(str::to_owned),
    ];
    if depth == 0 {
        return scalar.boxed();
    }
    let array = prop::collection::vec(json_value(depth - 1), 0..3)
        .prop_map(|v| format!("[{}]", v.join(" , ")));
    prop_oneof![2 => scalar, 3 => json_object(depth), 1 => array].boxed()
}

/// A JSON object as text (see [`json_value`]), its keys distinct.
fn json_object(depth: u32) -> BoxedStrategy<String> {
    let space = || prop::sample::select(vec!["", "", " ", "\t", "\n ", "\r\n"]);
    let keys = prop::sample::subsequence(
        vec![
            "message",
            "mess\\u0061ge",
            "id",
            "type",
            "k",
            "\\u0069d",
            "text",
        ],
        0..4,
    );
    let values = prop::collection::vec(json_value(depth.saturating_sub(1)), 4);
    (keys, values, space(), space(), space())
        .prop_map(|(keys, values, a, b, c)| {
            let members: Vec<String> = keys
                .iter()
                .zip(values)
                .map(|(k, v)| format!("{a}\"{k}\"{b}:{c}{v}"))
                .collect();
            format!("{{{}}}", members.join(","))
        })
        .boxed()
}

/// The place the probe notes for a `message` entry's message is exactly the message as written:
/// over random lines (keys in any order, escaped keys, whitespace anywhere, messages of any
/// shape, `"message"` inside strings and nested objects), a placed message equals the field
/// `raw_field` reads, and a line with one byte changed never gives a placed message.
#[test]
fn message_placement_is_the_message_as_written() {
    use sessiond::core::raw_object::raw_field;
    use sessiond::dialect::pi::format::{EntryKind, Expect, Line, LineSpan, parse_line};
    let space = || prop::sample::select(vec!["", " ", "\n", "\t "]);
    let member = (
        prop::sample::select(vec![
            r#""parentId":null"#,
            r#""timestamp":"2025-01-01T00:00:00Z""#,
            r#""other":{"message":{"x":1}}"#,
            r#""name":"\"message\":{}""#,
        ]),
        space(),
    )
        .prop_map(|(m, s)| format!("{m}{s}"));
    let value = prop_oneof![4 => json_object(2), 1 => json_value(2)];
    let message =
        (value, space(), space(), prop::bool::weighted(0.1)).prop_map(|(v, a, b, escaped)| {
            let key = if escaped { "mess\\u0061ge" } else { "message" };
            format!("\"{key}\"{a}:{b}{v}")
        });
    let strategy = (
        prop::collection::vec(member, 0..3),
        message,
        0usize..4,
        space(),
        any::<u16>(),
    );
    let placed_lines = AtomicU64::new(0);
    fuzz(
        "message placement",
        3000,
        strategy,
        |(mut members, message, at, s, flip)| {
            members.sort_unstable();
            members.dedup();
            members.push(r#""type":"message""#.to_owned());
            members.push(r#""id":"e1""#.to_owned());
            // pi writes the message last; half the lines do here.
            let at = if at >= 2 {
                members.len()
            } else {
                at.min(members.len())
            };
            members.insert(at, message);
            let line = format!("{s}{{{s}{}{s}}}{s}", members.join(","));
            let span = LineSpan {
                offset: 0,
                len: line.len() as u32,
                line: 2,
            };
            let Ok(Line::Entry(entry)) =
                parse_line(line.as_bytes(), span, Expect::Entry { version: 3 })
            else {
                return Ok(());
            };
            let EntryKind::Message(info) = &entry.kind else {
                return Ok(());
            };
            let Some(verbatim) = info.verbatim else {
                return Ok(());
            };
            let placed = verbatim.message(line.as_bytes());
            let expected = raw_field(&line, "message")
                .ok()
                .flatten()
                .map(|r| r.get().as_bytes());
            prop_assert_eq!(placed, expected, "{}", line);
            let mut changed = line.clone().into_bytes();
            let i = usize::from(flip) % changed.len();
            changed[i] = if changed[i] == b' ' { b'\t' } else { b' ' };
            prop_assert_eq!(verbatim.message(&changed), None, "{}", line);
            placed_lines.fetch_add(1, Ordering::Relaxed);
            Ok(())
        },
    );
    // Most lines hold a message object under a plain key: the property was really tried.
    let placed = placed_lines.load(Ordering::Relaxed);
    assert!(placed > u64::from(cases(3000)) / 4, "{placed} lines placed");
}

/// Characters that would act on a terminal (see `sessiond::dialect::pi::preview::visible`).
fn acts_on_terminal(c: char) -> bool {
    (c < ' ' && c != '\n' && c != '\t')
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// Text with escape sequences, bells, carriage returns, C1 controls and bidirectional
/// overrides among ordinary characters: what a hostile session puts in names and previews.
fn hostile_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            6 => prop::char::range('a', 'z'),
            1 => Just(' '),
            1 => Just('\u{1b}'),
            1 => Just('\u{7}'),
            1 => Just('\r'),
            1 => Just('\n'),
            1 => Just('\u{9b}'),
            1 => Just('\u{7f}'),
            1 => Just('\u{202e}'),
            1 => Just('\u{2066}'),
            1 => Just('\u{0}'),
            1 => Just(']'),
            1 => any::<char>(),
        ],
        0..24,
    )
    .prop_map(|c| c.into_iter().collect())
}

/// A session whose ids, names, labels, previews, tool names and model names are `texts`.
fn named_session(entries: &[(u8, u16, String)]) -> String {
    use serde_json::json;
    let mut out = json!({"type": "session", "version": 3, "id": "s",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"})
    .to_string();
    out.push('\n');
    let mut ids: Vec<String> = Vec::new();
    for (i, (kind, parent, text)) in entries.iter().enumerate() {
        let id = if kind % 5 == 0 {
            format!("e{i}{text}")
        } else {
            format!("e{i}")
        };
        let pick = usize::from(*parent);
        let parent = match (i, pick % 6) {
            (0, _) | (_, 0) => None,
            (_, 1..=3) => Some(ids[i - 1].clone()),
            _ => Some(ids[pick % i].clone()),
        };
        let target = ids.get(pick % (i + 1)).cloned().unwrap_or_default();
        let mut v = match kind % 7 {
            0 | 1 => {
                json!({"type": "message", "message": {"role": "user", "content": text, "timestamp": 1}})
            }
            2 => json!({"type": "message", "message": {"role": "assistant", "content": [
                {"type": "text", "text": text},
                {"type": "toolCall", "id": "t", "name": text, "arguments": {text.as_str(): text}}],
                "provider": text, "model": text, "timestamp": 1}}),
            3 => json!({"type": "label", "targetId": target, "label": text}),
            4 => json!({"type": "session_info", "name": text}),
            5 => json!({"type": "custom", "customType": text, "data": {}}),
            _ => json!({"type": "model_change", "provider": text, "modelId": text}),
        };
        v["id"] = json!(id);
        v["parentId"] = json!(parent);
        v["timestamp"] = json!("2026-01-01T00:00:00.000Z");
        out.push_str(&v.to_string());
        out.push('\n');
        ids.push(id);
    }
    out
}

/// What a person sees of a session (the tree, folded and full; the graph's text; every entry's
/// preview) shows the characters that act on a terminal visibly, however the text is cut into
/// writes, and never sends them raw; and it grows with the session, not with its square.
#[test]
fn human_output_shows_control_characters_in_names_and_previews() {
    use sessiond::core::preview::{Visible, visible};
    use sessiond::dialect::pi::preview::entry_preview;
    let entry = (any::<u8>(), any::<u16>(), hostile_text());
    fuzz(
        "human output: control characters in names and previews",
        300,
        (prop::collection::vec(entry, 1..64), any::<u16>()),
        |(entries, cut)| {
            let path = write_temp(named_session(&entries).as_bytes());
            let opened = match open_session::<sessiond::dialect::pi::Pi>(&path, Mode::Strict) {
                Ok(o) => o,
                Err(e) => return Err(TestCaseError::fail(format!("generated file refused: {e}"))),
            };
            let tree = &opened.tree;
            let lines = FileLines::open(&path).unwrap();
            let mut text = Vec::new();
            for full in [false, true] {
                let default = sessiond::view::tree::DefaultLeaf {
                    node: tree.default_leaf(),
                    mark: "resume leaf",
                };
                sessiond::view::tree::print(&mut text, tree, &lines, full, default).unwrap();
            }
            let lens = sessiond::view::graph::Lens::pi(tree, tree.default_leaf());
            let g = sessiond::view::graph::build(tree, &lens, &lines);
            for l in g.text(tree) {
                text.extend_from_slice(l.text.as_bytes());
                text.push(b'\n');
            }
            // What is printed grows with the session, never with its square: a line is at
            // most a bounded indent, a bounded preview and what the entry's own fields hold.
            let input = std::fs::metadata(&path).unwrap().len() as usize;
            prop_assert!(
                text.len() <= 600 * (tree.len() + 4) + 8 * input,
                "{} bytes printed for {} entries, {} bytes",
                text.len(),
                tree.len(),
                input
            );
            for n in tree.nodes() {
                let line = sessiond::core::source::LineSource::line(&lines, n.entry.span).unwrap();
                let value = sessiond::js::jsstr::parse_value(&line).unwrap();
                text.extend_from_slice(entry_preview(&value).as_bytes());
                text.push(b'\n');
            }
            // Through the writer in two pieces cut anywhere, as a command's output leaves.
            let at = usize::from(cut) % (text.len() + 1);
            let mut shown = Visible::new(Vec::new(), true);
            shown.write_all(&text[..at]).unwrap();
            shown.write_all(&text[at..]).unwrap();
            shown.flush().unwrap();
            let shown = String::from_utf8(shown.get_mut().unwrap().clone()).unwrap();
            // (A CR just before a newline is a line ending: it overwrites nothing.)
            let raw: Vec<char> = shown
                .replace("\r\n", "\n")
                .chars()
                .filter(|&c| acts_on_terminal(c))
                .collect();
            prop_assert!(raw.is_empty(), "raw {:?} in\n{}", raw, shown);
            prop_assert_eq!(
                &shown,
                &visible(&String::from_utf8_lossy(&text)).into_owned()
            );
            let _ = std::fs::remove_file(&path);
            Ok(())
        },
    );
}

/// Search: whatever a user types is text to find (operators where they parse), never an error.
#[test]
fn search_queries_never_error() {
    let root = scratch().join("search-root");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/odd/lone-surrogates.jsonl"),
        root.join("s.jsonl"),
    )
    .unwrap();
    let mut index = sessiond::search::SearchIndex::open(&scratch().join("search-index")).unwrap();
    index
        .update(std::slice::from_ref(&root), &mut |_, _| {})
        .unwrap();
    let query = prop::collection::vec(
        prop_oneof![
            any::<char>().prop_map(String::from),
            prop::sample::select(vec![
                "\"",
                "-",
                "*",
                ":",
                "(",
                ")",
                " OR ",
                " AND ",
                "^",
                "~",
                "[",
                "]",
                "{",
                "}",
                "\\",
                "src/lib.rs:42",
                "fn(x)",
                "std::io::Error",
                "配置",
                " ",
                "+",
                "!",
            ])
            .prop_map(str::to_owned),
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat());
    fuzz("search: random queries", 400, query, |text| {
        let q = sessiond::search::SearchQuery {
            text: text.clone(),
            limit: 5,
            ..Default::default()
        };
        let found = index.search(&q);
        prop_assert!(found.is_ok(), "{text:?}: {:?}", found.err());
        Ok(())
    });
}

/// File names are bytes: listing a folder of sessions named by random bytes never panics, and
/// lists each session file.
#[test]
fn listing_file_names_as_bytes_never_panics() {
    use std::os::unix::ffi::OsStrExt;
    let session = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/odd/lone-surrogates.jsonl"),
    )
    .unwrap();
    let names = prop::collection::vec(
        prop::collection::vec(
            any::<u8>().prop_filter("no / or NUL", |b| *b != b'/' && *b != 0),
            1..24,
        ),
        1..6,
    );
    let n = AtomicU64::new(0);
    fuzz("list: file names as bytes", 200, names, |names| {
        let dir = scratch().join(format!("names-{}", n.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut made = std::collections::BTreeSet::new();
        for mut name in names {
            name.extend_from_slice(b".jsonl");
            let path = dir.join(std::ffi::OsStr::from_bytes(&name));
            if std::fs::write(&path, &session).is_ok() {
                made.insert(path);
            }
        }
        let listed: std::collections::BTreeSet<PathBuf> =
            sessiond::storage::list::session_files(&dir)
                .into_iter()
                .collect();
        for path in &listed {
            prop_assert!(
                sessiond::storage::list::read_header(path).is_ok(),
                "{path:?}"
            );
        }
        prop_assert_eq!(&listed, &made);
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    });
}

/// Nesting depth: a line whose details nest any number of levels (arrays and objects mixed,
/// whole or cut anywhere) is read without a stack overflow; a whole one is an entry, and its
/// `Value` holds at most `VALUE_DEPTH` levels.
#[test]
fn reader_nesting_at_any_depth() {
    let input = (
        prop::collection::vec(any::<bool>(), 1..64),
        0usize..300_000,
        prop::option::of(any::<prop::sample::Index>()),
    );
    fuzz("reader: nesting depth", 60, input, |(kinds, depth, cut)| {
        let mut details = Vec::with_capacity(depth * 6);
        for k in 0..depth {
            details.extend_from_slice(if kinds[k % kinds.len()] {
                b"{\"k\":"
            } else {
                b"["
            });
        }
        details.extend_from_slice(b"1");
        for k in (0..depth).rev() {
            details.push(if kinds[k % kinds.len()] { b'}' } else { b']' });
        }
        let mut line = br#"{"type":"custom","id":"b","parentId":null,"timestamp":"2026-06-01T10:00:02.000Z","customType":"x","data":"#.to_vec();
        line.extend_from_slice(&details);
        line.push(b'}');
        let whole = cut.is_none();
        if let Some(at) = cut {
            line.truncate(at.index(line.len()));
        }
        let value = sessiond::js::jsstr::parse_value(&line);
        prop_assert_eq!(value.is_ok(), whole);
        if let Ok(v) = value {
            let mut held = &v["data"];
            let mut levels = 0;
            loop {
                held = match held {
                    serde_json::Value::Object(m) => &m["k"],
                    serde_json::Value::Array(a) => &a[0],
                    _ => break,
                };
                levels += 1;
            }
            prop_assert!(levels <= sessiond::js::jsstr::VALUE_DEPTH);
        }
        let mut file = br#"{"type":"session","version":3,"id":"s","timestamp":"2026-06-01T10:00:00.000Z","cwd":"/w"}"#.to_vec();
        file.push(b'\n');
        file.extend_from_slice(&line);
        file.push(b'\n');
        let opened = open_both(&file)?;
        if whole {
            prop_assert!(opened.is_some(), "depth {depth}: not read");
        }
        Ok(())
    });
}

/// A request id as a client may write it, and what the transport must make of it.
#[derive(Clone, Debug)]
enum GenId {
    /// An integer of any size (no leading zeros): its answer carries this very text.
    Integer(String),
    /// A string (any characters, escaped as serde_json escapes them): echoed as the same string.
    Text(String),
    /// A fraction, an exponent, a boolean, an object or an array: refused with -32600 and
    /// `id: null`, nothing run.
    Refused(String),
    /// `null`, or no id at all: a notification (or a request tower-lsp-server reads as one).
    Other(Option<&'static str>),
}

fn gen_id() -> impl Strategy<Value = GenId> {
    let integer = (
        any::<bool>(),
        1u8..=9,
        prop::collection::vec(0u8..=9, 0..45),
    )
        .prop_map(|(neg, first, rest)| {
            let mut t = String::from(if neg { "-" } else { "" });
            t.push(char::from(b'0' + first));
            t.extend(rest.iter().map(|d| char::from(b'0' + d)));
            GenId::Integer(t)
        });
    let refused = prop_oneof![
        (any::<i32>(), 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        (any::<i16>(), -400i32..400).prop_map(|(a, e)| format!("{a}e{e}")),
        prop::sample::select(vec![
            "1e400",
            "-1e400",
            "true",
            "false",
            "{\"n\":1}",
            "[1]",
            "[]",
            "{}",
            "0.0",
            "1E2",
        ])
        .prop_map(str::to_owned),
    ]
    .prop_map(GenId::Refused);
    prop_oneof![
        4 => integer,
        2 => any::<String>().prop_map(|s| GenId::Text(serde_json::to_string(&s).unwrap())),
        1 => Just(GenId::Integer("0".into())),
        2 => refused,
        1 => prop::sample::select(vec![None, Some("null")]).prop_map(GenId::Other),
    ]
}

/// One JSON-RPC message around `id`: members in any order, whitespace anywhere, a method (or
/// none, or a result instead), params of any shape.
fn gen_message() -> impl Strategy<Value = (GenId, String, bool)> {
    (
        gen_id(),
        prop::sample::select(vec![
            Some("session/list"),
            Some("session/nope"),
            Some("$/cancelRequest"),
            Some("$/unknown"),
            Some("shutdown"),
            None,
        ]),
        prop::sample::select(vec![None, Some("{}"), Some("[]"), Some("null"), Some("7")]),
        any::<bool>(),
        prop::collection::vec(prop::sample::select(vec!["", " ", "\n", "\t", "\r\n"]), 8),
        any::<u8>(),
    )
        .prop_map(|(id, method, params, result, ws, order)| {
            let mut members = vec![format!("\"jsonrpc\":{}\"2.0\"", ws[0])];
            match &id {
                GenId::Integer(t) | GenId::Text(t) | GenId::Refused(t) => {
                    members.push(format!("\"id\"{}:{}{t}", ws[1], ws[2]));
                }
                GenId::Other(Some(t)) => members.push(format!("\"id\":{t}")),
                GenId::Other(None) => {}
            }
            if let Some(m) = method {
                members.push(format!("\"method\":{}\"{m}\"", ws[3]));
            }
            if let Some(p) = params {
                members.push(format!("\"params\":{p}{}", ws[4]));
            }
            if result || method.is_none() {
                members.push(format!("\"result\":{}null", ws[5]));
            }
            let n = members.len();
            members.rotate_left(usize::from(order) % n);
            let plain_request = method.is_some()
                && !result
                && matches!(params, None | Some("{}" | "[]"))
                && matches!(id, GenId::Integer(_) | GenId::Text(_));
            (
                id,
                format!("{}{{{}}}{}", ws[6], members.join(","), ws[7]),
                plain_request,
            )
        })
}

/// Request ids and JSON-RPC frames: messages with ids of every kind (integers of any size,
/// strings, fractions, exponents, other types, none), framed, split anywhere and decoded. Every
/// integer or string id comes back as the same id (an integer beyond `i64` as its very text),
/// every other id is refused with -32600 and `id: null` and nothing runs, a refusal is a JSON
/// error response with a message, and no input panics.
#[test]
fn request_ids_and_frames_are_taken_exactly() {
    use sessiond::server::transport::{Taken, take_body};
    fuzz(
        "transport: request ids in frames split anywhere",
        3000,
        (
            prop::collection::vec((gen_message(), any::<u8>()), 1..6),
            prop::collection::vec(any::<u32>(), 0..12),
        ),
        |(messages, cuts)| {
            let mut stream = Vec::new();
            for ((_, body, _), style) in &messages {
                stream.extend(frame(body.as_bytes(), *style));
            }
            let decoded = decode_frames(split(&stream, &cuts));
            prop_assert_eq!(decoded.len(), messages.len());
            for (((id, body, plain), _), got) in messages.iter().zip(decoded) {
                prop_assert_eq!(got.as_deref(), Ok(body.as_bytes()));
                let taken = take_body(body.as_bytes());
                match (&taken, id) {
                    (Taken::Rejected(text), _) => {
                        let v: serde_json::Value = serde_json::from_str(text)
                            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
                        let code = v["error"]["code"].as_i64().unwrap_or(0);
                        prop_assert!(code == -32600 || code == -32700, "{}", text);
                        prop_assert!(
                            v["error"]["message"]
                                .as_str()
                                .is_some_and(|m| !m.is_empty()),
                            "{}",
                            text
                        );
                        if let GenId::Refused(_) = id {
                            prop_assert!(v["id"].is_null(), "{}", text);
                            prop_assert_eq!(code, -32600);
                        }
                        prop_assert!(!plain, "a plain request refused: {} -> {}", body, text);
                    }
                    (_, GenId::Refused(_)) => {
                        return Err(TestCaseError::fail(format!("{body}: taken as {taken:?}")));
                    }
                    (Taken::Request { answer_id, .. }, GenId::Integer(t)) => {
                        prop_assert_eq!(answer_id.as_deref(), Some(t.as_str()), "{}", body);
                    }
                    (Taken::Request { answer_id, .. }, GenId::Text(t)) => {
                        let want: String = serde_json::from_str(t).unwrap();
                        let got: Option<String> = answer_id
                            .as_deref()
                            .and_then(|a| serde_json::from_str(a).ok());
                        prop_assert_eq!(got, Some(want), "{}", body);
                    }
                    (Taken::Request { .. } | Taken::Response, _) => {}
                }
            }
            Ok(())
        },
    );
}
