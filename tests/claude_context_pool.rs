//! A long Claude Code context is read and written on rayon's pool (the path's lines in blocks of
//! nearby lines, the per-message steps, the document in pieces of messages): the document must
//! be byte for byte the one computed on one thread, which `tests/claude_referee.rs` holds to
//! Claude Code itself. Transcripts from the benchmarks' generator (scripts/gen_claude.rs:
//! rewinds, parallel tool calls, `/compact`), past the size from which the pool is used, at the
//! leaf `claude --resume` continues from and at other leaves.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "../scripts/gen_claude.rs"]
#[allow(dead_code)]
mod gen_claude;

use sessiond::core::tree::Mode;
use sessiond::dialect::claude::Claude;
use sessiond::dialect::claude::context::{self, ContextOptions, PARALLEL_FROM, PARALLEL_ITEMS};
use sessiond::dialect::claude::leaf::resume_leaf;
use sessiond::storage::reader::{FileLines, OpenedSession, open_session};
use sessiond::view::transcript::ContextDocument;

/// The context document at `leaf` as `sessiond context --json` writes it, and its count of
/// messages.
fn document(s: &OpenedSession<Claude>, lines: &FileLines, leaf: u32) -> (Vec<u8>, usize) {
    let options = ContextOptions {
        results_in_place: true,
        ..ContextOptions::default()
    };
    let ctx = context::context(&s.tree, lines, leaf, &options).unwrap();
    let doc = ContextDocument::new(None, &s.tree, s.torn_tail, &ctx);
    let mut out = Vec::new();
    doc.write_to(lines, &mut out).unwrap();
    (out, ctx.messages.len())
}

#[test]
fn a_long_context_computed_on_the_pool_is_the_one_computed_on_one_thread() {
    // Two threads at least, whatever the machine (the first test to ask sets the pool up).
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build_global();
    assert!(rayon::current_num_threads() >= 2);
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("plain", None, 31, None),
        ("compacted", Some(0.25), 32, None),
        ("tool-heavy", Some(0.1), 33, Some(12)),
    ];
    for (name, compact_at, seed, tools_per_prompt) in cases {
        let path = dir.path().join(format!("{name}.jsonl"));
        gen_claude::write(
            &path,
            &gen_claude::Options {
                bytes: 9_000_000,
                seed,
                tools_per_prompt,
                compact_at,
            },
        )
        .unwrap();
        let s: OpenedSession<Claude> = open_session(&path, Mode::Strict).unwrap();
        let lines = FileLines::open(&path).unwrap().read_ahead();
        let resume = resume_leaf(&s.tree).expect("a resume leaf").leaf;
        let path_bytes = |leaf: u32| -> u64 {
            s.tree
                .path_to(Some(leaf))
                .iter()
                .map(|&n| u64::from(s.tree.node(n).entry.span.len))
                .sum()
        };
        assert!(
            path_bytes(resume) >= PARALLEL_FROM && document(&s, &lines, resume).1 >= PARALLEL_ITEMS,
            "{name}: the resume leaf's context is computed on the pool ({} bytes of path, {} messages)",
            path_bytes(resume),
            document(&s, &lines, resume).1
        );
        // The resume leaf, and every 50th other leaf.
        let leaves: Vec<u32> = std::iter::once(resume)
            .chain(s.tree.leaves().step_by(50))
            .collect();
        for leaf in leaves {
            let pooled = document(&s, &lines, leaf);
            let alone = one_thread.install(|| document(&s, &lines, leaf));
            assert!(
                pooled == alone,
                "{name}: leaf {} ({} bytes of path): the documents differ",
                s.tree.node(leaf).entry.id,
                path_bytes(leaf)
            );
        }
    }
}
