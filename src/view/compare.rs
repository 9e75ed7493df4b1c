//! Two leaves compared, for a person (`sessiond diff`): the fork point; the two sides after it
//! side by side, each folded as `sessiond tree` folds a run (its landmarks kept: the first and
//! last entry, branch points, labelled entries, compactions, summaries, names); what each side
//! did; then the context difference in a few lines, the entries
//! grouped by reason. For every dialect: the report is made from a
//! [`Comparison`](crate::core::compare::Comparison) and the tree's [`Describe`].

use std::io::{self, Write};

use serde::Serialize;

use crate::core::compare::{Comparison, ContextDifference, PathEntry, SettingChange, Side};
use crate::core::describe::Describe;
use crate::core::preview::ShortIds;
use crate::core::tree::Tree;
use crate::storage::reader::TornTail;
use crate::view::graph::fold_summary;
use crate::view::tree::count;

/// Stretches this short are printed, not folded (as `sessiond tree`).
const MIN_FOLD: usize = 3;
/// Characters of one column of the side-by-side part.
const COLUMN: usize = 60;
/// Changed context entries listed one by one; more are counted.
const CHANGES_LISTED: usize = 8;
/// Changed files named in a side's line; more are counted.
const FILES_LISTED: usize = 8;

/// A setting's value for a person: a string as is, a model as `provider/modelId`.
fn value_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(v) => v.clone(),
        serde_json::Value::Object(m) => m
            .values()
            .map(|v| v.as_str().map_or(v.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join("/"),
        serde_json::Value::Null => "(none)".to_owned(),
        v => v.to_string(),
    }
}

/// The comparison as `sessiond diff --json` prints it and `session/compareBranches` returns
/// it (the daemon adds `revision`): the comparison's fields, `tornTail`, and `format:
/// "claude-code"` for a transcript.
pub fn document<R: Serialize>(
    cmp: &Comparison<R>,
    torn_tail: Option<TornTail>,
    format: Option<&str>,
) -> serde_json::Result<serde_json::Value> {
    let mut doc = serde_json::to_value(cmp)?;
    doc["tornTail"] = serde_json::json!(torn_tail.map(crate::view::convert::torn_tail));
    if let Some(f) = format {
        doc["format"] = serde_json::json!(f);
    }
    Ok(doc)
}

/// Prints the report of `cmp`, the sides' entries looked up in `tree`. Errors: the output's.
pub fn print<E: Describe, R: Serialize>(
    out: &mut dyn Write,
    tree: &Tree<E>,
    cmp: &Comparison<R>,
) -> io::Result<()> {
    let fork = match &cmp.fork_point_id {
        Some(id) => {
            let preview = tree
                .find(id.as_str())
                .map(|n| tree.node(n).entry.kind_name().to_owned())
                .unwrap_or_default();
            format!("fork point {id} ({preview})")
        }
        None => "no fork point: the leaves are under different roots".to_owned(),
    };
    writeln!(out, "A {} · B {} · {fork}", cmp.leaf_a, cmp.leaf_b)?;
    if cmp.leaf_a == cmp.leaf_b {
        writeln!(out, "the same leaf twice: nothing differs")?;
    }
    let short = ShortIds::of(tree);
    let left = rows(tree, &short, &cmp.only_a);
    let right = rows(tree, &short, &cmp.only_b);
    let head = |n: usize, letter: &str| {
        format!(
            "{letter}: {} after the fork point",
            count(n, "entry", "entries")
        )
    };
    let heads = [head(cmp.only_a.len(), "A"), head(cmp.only_b.len(), "B")];
    let mut table = vec![(heads[0].clone(), heads[1].clone())];
    for i in 0..left.len().max(right.len()) {
        table.push((
            left.get(i).cloned().unwrap_or_default(),
            right.get(i).cloned().unwrap_or_default(),
        ));
    }
    for (l, r) in table {
        let l = cut(&l, COLUMN);
        let pad = COLUMN.saturating_sub(l.chars().count());
        let line = format!("{l}{:pad$} │ {}", "", cut(&r, COLUMN));
        writeln!(out, "{}", line.trim_end())?;
    }
    writeln!(out, "A did: {}", side_text(&cmp.side_a))?;
    writeln!(out, "B did: {}", side_text(&cmp.side_b))?;
    let at_a = cmp.context_only_a.len() + cmp.context_common + cmp.context_changed.len();
    let at_b = cmp.context_only_b.len() + cmp.context_common + cmp.context_changed.len();
    writeln!(
        out,
        "context: {} at A, {} at B; {} the same at both, {} reaching the model differently",
        count(at_a, "entry", "entries"),
        at_b,
        cmp.context_common,
        cmp.context_changed.len()
    )?;
    groups(out, "A", "B", &cmp.context_only_a)?;
    groups(out, "B", "A", &cmp.context_only_b)?;
    for c in cmp.context_changed.iter().take(CHANGES_LISTED) {
        writeln!(out, "  changed {} ({}): {}", c.id, c.entry_type, c.text)?;
    }
    if cmp.context_changed.len() > CHANGES_LISTED {
        writeln!(
            out,
            "  … and {} more changed",
            cmp.context_changed.len() - CHANGES_LISTED
        )?;
    }
    for (what, d) in [
        ("thinking level", &cmp.thinking_level),
        ("model", &cmp.model),
    ] {
        if let Some(d) = d {
            writeln!(
                out,
                "{what}: A {}, B {}",
                value_text(&d.a),
                value_text(&d.b)
            )?;
        }
    }
    if !cmp.diagnostics.is_empty() {
        writeln!(
            out,
            "read leniently: {} (compared as read)",
            count(cmp.diagnostics.len(), "problem", "problems")
        )?;
    }
    Ok(())
}

/// One side's rows: its entries (uuids shown short, [`ShortIds`]), runs between landmarks
/// folded.
fn rows<E: Describe>(tree: &Tree<E>, short: &ShortIds, entries: &[PathEntry]) -> Vec<String> {
    let landmark = |i: usize| {
        let e = &entries[i];
        if i == 0 || i + 1 == entries.len() {
            return true;
        }
        let Some(n) = tree.find(e.id.as_str()) else {
            return true;
        };
        let node = tree.node(n);
        node.children.len() != 1 || tree.label_of(e.id.as_str()).is_some() || node.entry.landmark()
    };
    let row = |e: &PathEntry| {
        let kind = e.role.as_deref().unwrap_or(&e.entry_type);
        format!("{} {kind} {}", short.show(e.id.as_str()), e.preview)
    };
    let mut out = Vec::new();
    let mut hidden: Vec<usize> = Vec::new();
    let flush = |out: &mut Vec<String>, hidden: &mut Vec<usize>| {
        if hidden.len() >= MIN_FOLD {
            out.push(format!(
                "┆ {} folded: {}",
                count(hidden.len(), "entry", "entries"),
                fold_summary(hidden.iter().map(|&i| {
                    let e = &entries[i];
                    e.role.as_deref().unwrap_or(&e.entry_type)
                }))
            ));
        } else {
            out.extend(hidden.iter().map(|&i| row(&entries[i])));
        }
        hidden.clear();
    };
    for (i, e) in entries.iter().enumerate() {
        if landmark(i) {
            flush(&mut out, &mut hidden);
            out.push(row(e));
        } else {
            hidden.push(i);
        }
    }
    flush(&mut out, &mut hidden);
    out
}

/// `text` cut to `max` characters, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((i, _)) if text.chars().count() > max => format!("{}…", &text[..i]),
        _ => text.to_owned(),
    }
}

/// `1 user turn · 2 assistant messages · tool calls read 2, edit 1 · changed a.ts · …`.
fn side_text(side: &Side) -> String {
    let mut parts = vec![
        count(side.user_turns, "user turn", "user turns"),
        count(
            side.assistant_messages,
            "assistant message",
            "assistant messages",
        ),
    ];
    let calls: usize = side.tool_calls.values().sum();
    if calls > 0 {
        let mut by_name: Vec<(&String, &usize)> = side.tool_calls.iter().collect();
        by_name.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        parts.push(format!(
            "{} ({})",
            count(calls, "tool call", "tool calls"),
            by_name
                .iter()
                .map(|(n, c)| format!("{} {c}", if n.is_empty() { "(unnamed)" } else { n }))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !side.files_changed.is_empty() {
        let names: Vec<&str> = side
            .files_changed
            .iter()
            .map(|f| f.rsplit('/').next().unwrap_or(f))
            .collect();
        let more = names.len().saturating_sub(FILES_LISTED);
        parts.push(format!(
            "changed {}{}",
            names[..names.len() - more].join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    for (setting, what) in [("thinkingLevel", "thinking"), ("model", "model")] {
        let changes: Vec<&SettingChange> = side
            .setting_changes
            .iter()
            .filter(|c| c.setting == setting)
            .collect();
        match changes.as_slice() {
            [] => {}
            [one] => parts.push(format!("{what} → {} ({})", value_text(&one.value), one.id)),
            [.., last] => parts.push(format!(
                "{} {what} changes, the last → {} ({})",
                changes.len(),
                value_text(&last.value),
                last.id
            )),
        }
    }
    parts.push(match side.token_estimate {
        Some(t) => format!("context {t} tokens at the leaf"),
        None => "context tokens unknown".to_owned(),
    });
    parts.join(" · ")
}

/// `only at A (10): 9 after the fork point, on A only (92bfec97…610f9c1e); …`, one line per
/// reason.
fn groups<R>(
    out: &mut dyn Write,
    here: &str,
    there: &str,
    items: &[ContextDifference<R>],
) -> io::Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  context entries at {here} only, not at {there}: {}",
        items.len()
    )?;
    // Groups in order of first appearance.
    let mut order: Vec<(&str, Vec<&ContextDifference<R>>)> = Vec::new();
    for item in items {
        match order.iter_mut().find(|(t, _)| *t == item.text) {
            Some((_, list)) => list.push(item),
            None => order.push((&item.text, vec![item])),
        }
    }
    for (text, list) in order {
        let ids = match list.as_slice() {
            [one] => one.id.to_string(),
            [first, .., last] => format!("{}…{}", first.id, last.id),
            [] => String::new(),
        };
        writeln!(out, "    {} {text}: {ids}", list.len())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn cut_marks_what_it_cuts() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcd", 4), "abcd");
        assert_eq!(cut("", 4), "");
    }
}
