//! Two leaves of a Claude Code transcript compared ([`crate::core::compare`]): Claude's rewinds
//! (`--resume-session-at`) and concurrent resumes leave several branches in one file. Built on
//! [`context`] (what Claude sends at each leaf) and the reasons of [`super::explain`]; pure,
//! lines read through [`LineSource`].
//!
//! The path of a leaf is its *logical* path: the path Claude loads (`FAe`, [`Context::path`]),
//! and when it starts at a compact boundary, the path of the leaf that boundary compacted
//! (`logicalParentUuid`) before it, each line once (a preserved line where the boundary
//! re-links it, after the summary). So a leaf after `/compact` and a leaf before it part where
//! the conversation did, not at the boundary, and the lines the compaction summarizes are on
//! both paths.
//!
//! The context difference is over the lines whose content reaches the model (`context`'s
//! `entryIds`): a line sent at one leaf and not at the other is listed with why not at the
//! other, in `explain`'s vocabulary (after the fork point, before the compact boundary, dropped
//! by one of Claude's filters, …). A line sent at both is common (Claude has no context edits;
//! how lines merge into messages is not a difference of what is sent).
//!
//! The counts of a side are over its lines after the fork point: typed prompts (user lines
//! that are not tool results, not Claude's own `isMeta` lines, not a compaction summary),
//! assistant messages (lines of one response share `message.id`), tool calls by name, the files
//! its `Write`, `Edit`, `MultiEdit` and `NotebookEdit` calls changed (a `tool_result` on the
//! side without `is_error`), and the model changes; its tokens are Claude's own count at the
//! leaf: the usage of the last assistant line on its path (input, cache creation, cache read
//! and output tokens), the number Claude Code compares with its context window.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::core::compare::{
    self, Comparison, ContextDifference, Differ, SettingChange, Side, Sides,
};
use crate::core::ids::EntryId;
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::context::{
    Context, ContextError, ContextOptions, SYNTHETIC_MODEL, context, line_value, loaded_for,
};
use crate::dialect::claude::explain::{Reason, dropped_reason, off_path};
use crate::dialect::claude::format::Kind;

/// The tools whose calls change a file, and the argument that names it.
const FILE_TOOLS: [(&str, &str); 4] = [
    ("Write", "file_path"),
    ("Edit", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// Compares leaves `a` and `b` (see the module docs). Errors: a context that cannot be
/// computed (a line that cannot be read back, a leaf another line shadows).
pub fn compare(
    tree: &Tree,
    lines: &(dyn LineSource + Sync),
    a: NodeIdx,
    b: NodeIdx,
    options: &ContextOptions,
) -> Result<Comparison<Reason>, ContextError> {
    let ctx_a = context(tree, lines, a, options)?;
    let ctx_b = context(tree, lines, b, options)?;
    let path_a = logical_path(tree, &ctx_a.path);
    let path_b = logical_path(tree, &ctx_b.path);
    let fork = compare::fork(&path_a, &path_b);
    let sides = Sides::new(&fork);
    let id = |n: NodeIdx| tree.node(n).entry.id.clone();

    let sent_a: HashSet<&EntryId> = ctx_a.entry_ids.iter().collect();
    let sent_b: HashSet<&EntryId> = ctx_b.entry_ids.iter().collect();
    let common = ctx_a
        .entry_ids
        .iter()
        .filter(|e| sent_b.contains(e))
        .count();
    let only = |here: &Context,
                there: &Context,
                there_path: &[NodeIdx],
                there_sent: &HashSet<&EntryId>,
                mine: &[NodeIdx],
                letter: &str|
     -> Vec<ContextDifference<Reason>> {
        let on_there: HashSet<NodeIdx> = there_path.iter().copied().collect();
        let dropped: HashMap<NodeIdx, &crate::dialect::claude::context::Dropped> =
            there.dropped.iter().map(|(n, d)| (*n, d)).collect();
        let loaded = loaded_for(tree, there);
        let mut out = Vec::new();
        for e in &here.entry_ids {
            if there_sent.contains(e) {
                continue;
            }
            let Some(n) = tree.find(e.as_str()) else {
                continue;
            };
            let (reason, text) = if !on_there.contains(&n) {
                (
                    Reason::NotOnPath {
                        diverges_at: fork.point.map(id),
                        branch_entry_id: mine.first().map_or_else(|| id(n), |&f| id(f)),
                    },
                    format!("after the fork point, on {letter} only"),
                )
            } else {
                let reason = match dropped.get(&n) {
                    Some(why) => dropped_reason(tree, why),
                    None => off_path(tree, &loaded, there, n),
                };
                let text = reason_text(tree, &sides, &reason);
                (reason, text)
            };
            let entry = &tree.node(n).entry;
            out.push(ContextDifference {
                id: entry.id.clone(),
                entry_type: entry.kind.type_name().to_owned(),
                role: crate::core::describe::Describe::role(entry).map(str::to_owned),
                reason,
                text,
            });
        }
        out
    };
    let context_only_a = only(&ctx_a, &ctx_b, &path_b, &sent_b, &fork.only_a, "A");
    let context_only_b = only(&ctx_b, &ctx_a, &path_a, &sent_a, &fork.only_b, "B");
    let model = |c: &Context| c.model.clone().map_or(Value::Null, Value::String);
    let (model_a, model_b) = (model(&ctx_a), model(&ctx_b));
    Ok(Comparison {
        side_a: side(tree, lines, &path_a, fork.only_a.len())?,
        side_b: side(tree, lines, &path_b, fork.only_b.len())?,
        context_only_a,
        context_only_b,
        context_common: common,
        model: (model_a != model_b).then_some(Differ {
            a: model_a,
            b: model_b,
        }),
        ..Comparison::parted(tree, lines, (a, b), &fork)
    })
}

/// The logical path of a loaded path (see the module docs): a path that starts at a compact
/// boundary follows its `logicalParentUuid` back, each line kept once (where it comes last).
pub fn logical_path(tree: &Tree, loaded: &[NodeIdx]) -> Vec<NodeIdx> {
    let mut segments = vec![loaded.to_vec()];
    let mut boundaries = HashSet::new();
    let mut first = loaded.first().copied();
    while let Some(f) = first {
        let Kind::System {
            logical_parent: Some(p),
            ..
        } = &tree.node(f).entry.kind
        else {
            break;
        };
        // A boundary followed twice would be a loop.
        let Some(p) = tree.find(p.as_str()).filter(|_| boundaries.insert(f)) else {
            break;
        };
        let before = tree.path_to(Some(p));
        first = before.first().copied();
        segments.push(before);
    }
    // Each line once, where it comes last: a preserved line the boundary re-links under its
    // summary is on the path there (the leaf stays last).
    let mut out = Vec::new();
    let mut kept = HashSet::new();
    for segment in &segments {
        for &n in segment.iter().rev() {
            if kept.insert(n) {
                out.push(n);
            }
        }
    }
    out.reverse();
    out
}

/// Why a line on the other leaf's path is not sent there, in a few words.
fn reason_text(tree: &Tree, sides: &Sides, reason: &Reason) -> String {
    let at = |id: &EntryId| sides.of_id(tree, id);
    match reason {
        Reason::BeforeCompactBoundary { boundary_id, .. } => format!(
            "before compact boundary {boundary_id} (summarized), {}",
            at(boundary_id)
        ),
        Reason::DroppedByFilter { filter } => {
            let kind = serde_json::to_value(filter)
                .ok()
                .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            format!("dropped by Claude's filter ({kind})")
        }
        Reason::SystemNeverSent { subtype } => format!("a system line ({subtype}), never sent"),
        Reason::RendersToNothing { attachment_type } => {
            format!("an attachment ({attachment_type}) that renders to nothing")
        }
        Reason::NotRendered { attachment_type } => {
            format!("an attachment ({attachment_type}) sessiond does not render")
        }
        Reason::PrunedBigFile => "off the chains Claude keeps of a file over 5 MiB".to_owned(),
        Reason::Shadowed { by_line } => format!("replaced by line {by_line} (same uuid)"),
        Reason::Sidechain => "a subagent's line".to_owned(),
        Reason::NotOnPath { .. } => "not on the path".to_owned(),
        Reason::Bookkeeping { line_type } => format!("a bookkeeping line ({line_type})"),
        Reason::InContext | Reason::MergedIntoMessage { .. } => "sent".to_owned(),
    }
}

/// What a side did: its last `count` lines of `path` (see the module docs).
fn side(
    tree: &Tree,
    lines: &dyn LineSource,
    path: &[NodeIdx],
    count: usize,
) -> Result<Side, ContextError> {
    let start = path.len() - count;
    let mut side = Side {
        entries: count,
        ..Side::default()
    };
    let mut responses: HashSet<&str> = HashSet::new();
    let mut model: Option<&str> = path[..start].iter().rev().find_map(|&n| model_of(tree, n));
    let mut changes: Vec<(String, String)> = Vec::new();
    let mut succeeded: HashMap<String, bool> = HashMap::new();
    for &n in &path[start..] {
        let entry = &tree.node(n).entry;
        match &entry.kind {
            Kind::User {
                meta,
                compact_summary,
                tool_result,
                result_ids,
                ..
            } => {
                if !tool_result && !meta && !compact_summary {
                    side.user_turns += 1;
                }
                if *tool_result
                    && result_ids
                        .iter()
                        .any(|r| changes.iter().any(|(c, _)| c == r.as_str()))
                {
                    let line = line_value(tree, lines, n)?;
                    for block in blocks(&line) {
                        if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                            continue;
                        }
                        if let Some(call) = block.get("tool_use_id").and_then(Value::as_str) {
                            let failed =
                                block.get("is_error").and_then(Value::as_bool) == Some(true);
                            succeeded.entry(call.to_owned()).or_insert(!failed);
                        }
                    }
                }
            }
            Kind::Assistant {
                message_id,
                tool_use_ids,
                api_error,
                ..
            } => {
                let new_response = match message_id {
                    Some(m) if !m.is_empty() => responses.insert(m.as_str()),
                    _ => true,
                };
                if new_response && !api_error {
                    side.assistant_messages += 1;
                }
                if let Some(m) = model_of(tree, n)
                    && model != Some(m)
                {
                    model = Some(m);
                    side.setting_changes.push(SettingChange {
                        id: entry.id.clone(),
                        setting: "model",
                        value: Value::String(m.to_owned()),
                    });
                }
                if tool_use_ids.is_empty() {
                    continue;
                }
                let line = line_value(tree, lines, n)?;
                for block in blocks(&line) {
                    if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                        continue;
                    }
                    let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                    *side.tool_calls.entry(name.to_owned()).or_default() += 1;
                    let target = FILE_TOOLS
                        .iter()
                        .find(|(tool, _)| *tool == name)
                        .and_then(|(_, arg)| block.get("input")?.get(*arg)?.as_str());
                    if let (Some(call), Some(target)) =
                        (block.get("id").and_then(Value::as_str), target)
                    {
                        changes.push((call.to_owned(), target.to_owned()));
                    }
                }
            }
            _ => {}
        }
    }
    for (call, target) in changes {
        if succeeded.get(&call) == Some(&true) && !side.files_changed.contains(&target) {
            side.files_changed.push(target);
        }
    }
    side.token_estimate = token_count(tree, lines, path)?;
    Ok(side)
}

/// The model of an assistant line a model wrote.
fn model_of(tree: &Tree, n: NodeIdx) -> Option<&str> {
    match &tree.node(n).entry.kind {
        Kind::Assistant {
            model: Some(m),
            api_error: false,
            ..
        } if m != SYNTHETIC_MODEL => Some(m.as_str()),
        _ => None,
    }
}

/// Claude's token count at the end of `path`: the usage of its last assistant line.
fn token_count(
    tree: &Tree,
    lines: &dyn LineSource,
    path: &[NodeIdx],
) -> Result<Option<u64>, ContextError> {
    let Some(&last) = path.iter().rev().find(|&&n| model_of(tree, n).is_some()) else {
        return Ok(None);
    };
    let line = line_value(tree, lines, last)?;
    let Some(usage) = line.get("message").and_then(|m| m.get("usage")) else {
        return Ok(None);
    };
    let sum = [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
    ]
    .iter()
    .filter_map(|k| usage.get(*k).and_then(Value::as_u64))
    .sum();
    Ok(Some(sum))
}

fn blocks(line: &Value) -> impl Iterator<Item = &Value> {
    line.get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}
