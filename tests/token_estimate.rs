//! The context's token estimate read straight from message text
//! (`core::compaction::text_tokens`) against the full reading (`JSON.parse` as pi reads it,
//! then pi 1.6.0's `estimateTokens`, `core::compaction::tokens`): equal on every message every
//! leaf of every shipped session renders, and on variations of those messages that move them
//! off the ordinary shapes (keys repeated, reordered, retyped, removed).

mod common;

use serde_json::Value;
use sessiond::core::tree::Mode;
use sessiond::dialect::pi::Pi;
use sessiond::dialect::pi::compaction::text_tokens::{estimate_tokens_text, fast_estimate};
use sessiond::dialect::pi::compaction::tokens::estimate_tokens;
use sessiond::dialect::pi::projection;
use sessiond::dialect::pi::render;
use sessiond::js::value as js;
use sessiond::storage::reader::{FileLines, OpenedSession, open_session};
use std::path::PathBuf;

/// The full reading, with a throw (or text `JSON.parse` refuses) counted as 0, as the context's
/// estimate counts it.
fn full(text: &str) -> u64 {
    match js::parse_json(text.as_bytes()) {
        Ok(v) => estimate_tokens(&v).unwrap_or(0.0) as u64,
        Err(_) => 0,
    }
}

/// Every shipped session pi reads, opened leniently, with its lines.
fn shipped_sessions() -> Vec<(PathBuf, OpenedSession<Pi>, FileLines)> {
    let mut files = common::jsonl_files_under(&common::repo("examples"));
    files.extend(common::jsonl_files_under(&common::repo("tests/data")));
    assert!(
        files.len() > 40,
        "shipped sessions not found: {}",
        files.len()
    );
    files
        .into_iter()
        .filter_map(|f| {
            let opened = open_session::<Pi>(&f, Mode::Lenient).ok()?;
            let lines = FileLines::open(&f).ok()?;
            Some((f, opened, lines))
        })
        .collect()
}

/// Every message every leaf of every shipped session renders, as text.
fn rendered_messages() -> Vec<String> {
    let mut out = Vec::new();
    for (_, opened, lines) in shipped_sessions() {
        let tree = &opened.tree;
        for leaf in tree.leaves() {
            let proj = projection::project(tree, Some(leaf));
            // A line that does not render is the renderer's business, tested elsewhere.
            let _ = render::for_each_message(tree, &proj, &lines, |m| {
                out.push(m.message.get().to_owned());
                Ok(())
            });
        }
    }
    out
}

/// Variations of a message that take it off the ordinary shapes one way or another.
fn variations(text: &str) -> Vec<String> {
    let Ok(Value::Object(m)) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut with = |k: &str, v: Value| {
        let mut c = m.clone();
        c.insert(k.to_owned(), v);
        out.push(Value::Object(c).to_string());
    };
    with("role", Value::from("system"));
    with("role", Value::from("assistant"));
    with("role", Value::from("user"));
    with("role", Value::Null);
    with("content", Value::Null);
    with("content", Value::from(""));
    with("content", Value::from(7));
    with("summary", Value::from(3));
    with("command", Value::Null);
    if let Some(Value::Array(blocks)) = m.get("content") {
        let mut stripped = blocks.clone();
        for b in &mut stripped {
            if let Value::Object(b) = b {
                b.remove("text");
                b.remove("arguments");
            }
        }
        with("content", Value::Array(stripped));
        let mut retyped = blocks.clone();
        for b in &mut retyped {
            if let Value::Object(b) = b {
                b.insert("type".into(), Value::from("text"));
            }
        }
        with("content", Value::Array(retyped));
        let mut nulls = blocks.clone();
        nulls.push(Value::Null);
        with("content", Value::Array(nulls));
    }
    // Keys written twice: the last one wins in `JSON.parse`.
    if let Some(open) = text.strip_suffix('}') {
        out.push(format!(r#"{open},"content":"0123456789"}}"#));
        out.push(format!(r#"{open},"role":"user"}}"#));
    }
    // Keys in the other order (`role` after `content`).
    let mut reversed = serde_json::Map::new();
    for (k, v) in m.iter().rev() {
        reversed.insert(k.clone(), v.clone());
    }
    out.push(Value::Object(reversed).to_string());
    out
}

#[test]
fn every_shipped_message_estimates_as_pi_reads_it() {
    let messages = rendered_messages();
    assert!(messages.len() > 500, "too few messages: {}", messages.len());
    let mut decided = 0usize;
    for text in &messages {
        if let Some(fast) = fast_estimate(text) {
            decided += 1;
            assert_eq!(fast as u64, full(text), "fast reading differs on {text}");
        }
        assert_eq!(estimate_tokens_text(text), full(text), "{text}");
    }
    // The fast reading is meant for the common case: it must decide most real messages.
    assert!(
        decided * 10 >= messages.len() * 9,
        "decided {decided} of {}",
        messages.len()
    );
}

#[test]
fn variations_estimate_as_pi_reads_them() {
    let mut checked = 0usize;
    for text in rendered_messages() {
        for v in variations(&text) {
            assert_eq!(estimate_tokens_text(&v), full(&v), "{v}");
            checked += 1;
        }
    }
    assert!(checked > 5000, "too few variations: {checked}");
}

/// pi's context estimate as a number, `None` for a throw: `NaN` compared by its bits.
fn estimate_bits(
    r: Result<f64, sessiond::dialect::pi::compaction::CompactionError>,
) -> Option<u64> {
    r.ok().map(f64::to_bits)
}

#[test]
fn the_estimate_read_from_the_path_s_end_is_the_whole_path_s() {
    use sessiond::dialect::pi::compaction::prepare;
    let (mut decided, mut undecided) = (0, 0);
    for (f, opened, lines) in shipped_sessions() {
        let tree = &opened.tree;
        for leaf in tree.leaves() {
            let proj = projection::project_path(tree, Some(leaf));
            let whole = prepare::projected_entries(tree, &proj, &lines)
                .map_err(Into::into)
                .and_then(|p| prepare::estimate_projected_context_tokens(&p));
            match prepare::estimate_from_tail(tree, &proj, &lines) {
                Some(tail) => {
                    decided += 1;
                    assert_eq!(
                        estimate_bits(tail),
                        estimate_bits(whole),
                        "{}: leaf {}",
                        f.display(),
                        tree.node(leaf).entry.id
                    );
                }
                None => undecided += 1,
            }
        }
    }
    // Both ways are taken: sessions answered since their last compaction, and sessions with
    // no usage after it (or none at all).
    assert!(
        decided > 40 && undecided > 20,
        "{decided} decided, {undecided} undecided"
    );
}
