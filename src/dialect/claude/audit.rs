//! Where a Claude Code compaction summary came from, and what it kept: for a compact boundary
//! (or the `isCompactSummary` user line after it), the lines it replaced and the retention
//! probes of them ([`crate::core::retention`]) looked up in the context the summary starts
//! (docs/claude-code.md §4). Pure: lines are read through [`LineSource`].
//!
//! The span is what Claude sent at the leaf the boundary compacted (its `logicalParentUuid`),
//! the file read as it was before the boundary was written: the messages of the context there
//! ([`context`], which starts after the compact boundary before it, if any), less the preserved segment (`compactMetadata.preservedSegment` or
//! `preservedMessages`), which Claude keeps verbatim under the summary. The probes are pi's
//! kinds read from the Anthropic Messages shape: every `file_path` a `Read` call read and a
//! `Write`, `Edit`, `MultiEdit` or `NotebookEdit` call changed, the first line of each
//! `tool_result` with `is_error`, each `tool_use` without a result in the span or the preserved
//! lines, each open task (an unchecked `- [ ]` item not checked later, and the items the last
//! `TodoWrite` left not completed), and the first line of the last typed prompt. The new
//! context is the summary's (the context at the summary line) with the preserved lines' messages.
//!
//! What this cannot see: the summarization request Claude sent (its instructions and any
//! attachments it added) is not in the file, so the span is the conversation as it would be
//! sent at the compacted leaf today.

use std::collections::HashSet;

use serde_json::Value;

use crate::core::ids::EntryId;
use crate::core::retention::{
    self, Probe, ProbeKind, Retention, SummarySource, first_line, task_items,
};
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::context::{ContextError, ContextOptions, context};
use crate::dialect::claude::format::{Kind, Preserved};

/// The tools whose calls change a file, and the argument that names it.
const CHANGES: [(&str, &str); 4] = [
    ("Write", "file_path"),
    ("Edit", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// The compact boundary `n` is, or the boundary a compaction summary line `n` follows.
pub fn boundary_of(tree: &Tree, n: NodeIdx) -> Option<NodeIdx> {
    let entry = &tree.node(n).entry;
    match &entry.kind {
        k if k.is_compact_boundary() => Some(n),
        Kind::User {
            compact_summary: true,
            ..
        } => tree
            .node(n)
            .parent
            .filter(|&p| tree.node(p).entry.kind.is_compact_boundary()),
        _ => None,
    }
}

/// The compaction summary line after boundary `b` (its child with `isCompactSummary`, else
/// the next such line in the file).
fn summary_of(tree: &Tree, b: NodeIdx) -> Option<NodeIdx> {
    let is_summary = |n: NodeIdx| {
        matches!(
            tree.node(n).entry.kind,
            Kind::User {
                compact_summary: true,
                ..
            }
        )
    };
    tree.node(b)
        .children
        .iter()
        .copied()
        .find(|&c| is_summary(c))
        .or_else(|| ((b + 1)..tree.len() as NodeIdx).find(|&n| is_summary(n)))
}

/// The lines boundary `b` preserves (see the module docs), those the tree holds.
fn preserved(tree: &Tree, p: Option<&Preserved>) -> HashSet<NodeIdx> {
    let mut out = HashSet::new();
    let Some(p) = p else { return out };
    if let Some(uuids) = p.messages.as_ref().and_then(|m| m.uuids.as_ref()) {
        out.extend(uuids.iter().filter_map(|u| tree.find(u.as_str())));
        return out;
    }
    let Some(seg) = &p.segment else { return out };
    let head = seg.head.as_ref().and_then(|h| tree.find(h.as_str()));
    let mut cur = seg.tail.as_ref().and_then(|t| tree.find(t.as_str()));
    while let Some(c) = cur {
        if !out.insert(c) || Some(c) == head {
            break;
        }
        cur = tree.node(c).parent;
    }
    if head.is_some_and(|h| !out.contains(&h)) {
        // The head is not above the tail: no segment the tree holds.
        out.clear();
    }
    out
}

/// A message of the span or of the new context, with the lines it holds.
struct Message<'a> {
    message: &'a Value,
    sources: &'a [NodeIdx],
}

impl Message<'_> {
    fn role(&self) -> &str {
        self.message["role"].as_str().unwrap_or("")
    }

    fn blocks(&self) -> Vec<&Value> {
        match &self.message["content"] {
            Value::Array(a) => a.iter().collect(),
            _ => Vec::new(),
        }
    }

    /// The line block `i` came from (one line per block of a response when they match).
    fn line_of(&self, i: usize, tree: &Tree) -> Option<EntryId> {
        let n = if self.sources.len() == self.blocks().len() {
            self.sources.get(i)
        } else {
            self.sources.first()
        };
        n.map(|&n| tree.node(n).entry.id.clone())
    }

    /// The text of its text blocks (or its string content), attachments' reminders left out.
    fn text(&self) -> String {
        match &self.message["content"] {
            Value::String(s) => s.clone(),
            Value::Array(a) => a
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .filter(|t| !t.trim_start().starts_with("<system-reminder>"))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }
}

/// The text of a `tool_result` block's `content`.
fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Everything of a message a probe can be found in: text, thinking, tool calls (id, name,
/// JSON input and its strings), tool results (id and text).
pub fn searchable_text(message: &Value) -> String {
    let mut parts = Vec::new();
    match &message["content"] {
        Value::String(s) => parts.push(s.clone()),
        Value::Array(blocks) => {
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => parts.extend(b["text"].as_str().map(str::to_owned)),
                    Some("thinking") => parts.extend(b["thinking"].as_str().map(str::to_owned)),
                    Some("tool_use") => {
                        for key in ["id", "name"] {
                            parts.extend(b[key].as_str().map(str::to_owned));
                        }
                        parts.push(b["input"].to_string());
                        if let Value::Object(map) = &b["input"] {
                            parts.extend(map.values().filter_map(Value::as_str).map(str::to_owned));
                        }
                    }
                    Some("tool_result") => {
                        parts.extend(b["tool_use_id"].as_str().map(str::to_owned));
                        parts.push(result_text(b));
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    parts.join("\n")
}

/// Whether a line is a prompt a person typed (not a tool result, not one of Claude's own
/// `isMeta` lines, not a summary, not a slash command's echo).
fn typed_prompt(tree: &Tree, n: NodeIdx) -> bool {
    matches!(
        tree.node(n).entry.kind,
        Kind::User {
            meta: false,
            compact_summary: false,
            tool_result: false,
            ..
        }
    )
}

/// The audit of the compaction whose boundary is `target` or whose summary line `target` is:
/// what it replaced and the retention report. `None` when `target` is neither, or the boundary
/// names no compacted leaf the file holds. Errors: a context that cannot be computed.
pub fn audit(
    tree: &Tree,
    source: &(dyn LineSource + Sync),
    target: NodeIdx,
    options: &ContextOptions,
) -> Result<Option<(SummarySource, Retention)>, ContextError> {
    let Some(b) = boundary_of(tree, target) else {
        return Ok(None);
    };
    let Kind::System {
        logical_parent,
        preserved: kept_meta,
        ..
    } = &tree.node(b).entry.kind
    else {
        return Ok(None);
    };
    let Some(p) = logical_parent.as_ref().and_then(|p| tree.find(p.as_str())) else {
        return Ok(None);
    };
    let kept_lines = preserved(tree, kept_meta.as_deref());
    // The conversation as it was when the boundary was written: a later boundary may re-link
    // the compacted leaf under its own summary.
    let before = |line: u32| ContextOptions {
        before_line: Some(line),
        ..options.clone()
    };
    let at_p = context(tree, source, p, &before(tree.node(b).entry.span.line))?;
    let messages: Vec<Message<'_>> = at_p
        .messages
        .iter()
        .zip(&at_p.sources)
        .map(|(message, sources)| Message { message, sources })
        .collect();
    let is_kept =
        |m: &Message<'_>| !m.sources.is_empty() && m.sources.iter().all(|n| kept_lines.contains(n));
    let (kept, span): (Vec<&Message<'_>>, Vec<&Message<'_>>) =
        messages.iter().partition(|m| is_kept(m));

    // What it replaced: the path's lines after the boundary before it (or from the root), the
    // preserved ones left out.
    let start = at_p
        .path
        .iter()
        .rposition(|&n| tree.node(n).entry.kind.is_compact_boundary());
    let replaced: Vec<NodeIdx> = at_p.path[start.map_or(0, |s| s + 1)..]
        .iter()
        .copied()
        .filter(|n| !kept_lines.contains(n))
        .collect();
    let id = |n: NodeIdx| tree.node(n).entry.id.clone();
    let head = at_p.path.iter().copied().find(|n| kept_lines.contains(n));
    let source_of = SummarySource {
        count: replaced.len(),
        first_id: replaced.first().map(|&n| id(n)),
        last_id: replaced.last().map(|&n| id(n)),
        first_kept_entry_id: head.map(id),
        previous_compaction_id: start.map(|s| id(at_p.path[s])),
    };

    let probes = probes(tree, &span, &kept);
    // The new context: the summary's, and the preserved lines under it.
    let mut texts: Vec<(EntryId, String)> = Vec::new();
    if let Some(s) = summary_of(tree, b) {
        let at_s = context(tree, source, s, &before(tree.node(s).entry.span.line + 1))?;
        for (m, sources) in at_s.messages.iter().zip(&at_s.sources) {
            let owner = sources.first().map_or_else(|| id(s), |&n| id(n));
            texts.push((owner, searchable_text(m)));
        }
    }
    for m in &kept {
        if let Some(&n) = m.sources.first() {
            texts.push((id(n), searchable_text(m.message)));
        }
    }
    Ok(Some((source_of, retention::check_texts(probes, &texts))))
}

/// The probes of a span (see the module docs), in pi's order.
fn probes(tree: &Tree, span: &[&Message<'_>], kept: &[&Message<'_>]) -> Vec<Probe> {
    let mut answered: HashSet<String> = HashSet::new();
    for m in span.iter().chain(kept) {
        for b in m.blocks() {
            if b["type"] == "tool_result"
                && let Some(id) = b["tool_use_id"].as_str()
            {
                answered.insert(id.to_owned());
            }
        }
    }
    let mut read: Vec<(String, Option<EntryId>)> = Vec::new();
    let mut modified: Vec<(String, Option<EntryId>)> = Vec::new();
    let mut errors = Vec::new();
    let mut pending = Vec::new();
    let mut open: Vec<(String, Option<EntryId>)> = Vec::new();
    let mut todos: Vec<(String, Option<EntryId>)> = Vec::new();
    let mut last_request = None;
    let note = |list: &mut Vec<(String, Option<EntryId>)>, path: &str, at: Option<EntryId>| {
        if !list.iter().any(|(p, _)| p == path) {
            list.push((path.to_owned(), at));
        }
    };
    for m in span {
        let role = m.role();
        for (i, b) in m.blocks().into_iter().enumerate() {
            let at = m.line_of(i, tree);
            match b["type"].as_str() {
                Some("tool_use") => {
                    let name = b["name"].as_str().unwrap_or("");
                    let input = &b["input"];
                    if name == "Read"
                        && let Some(p) = input["file_path"].as_str()
                    {
                        note(&mut read, p, at.clone());
                    }
                    if let Some((_, arg)) = CHANGES.iter().find(|(t, _)| *t == name)
                        && let Some(p) = input[*arg].as_str()
                    {
                        note(&mut modified, p, at.clone());
                    }
                    if name == "TodoWrite"
                        && let Value::Array(items) = &input["todos"]
                    {
                        // Each call writes the whole list: the last one decides.
                        todos = items
                            .iter()
                            .filter(|t| t["status"].as_str() != Some("completed"))
                            .filter_map(|t| t["content"].as_str())
                            .map(|t| {
                                (
                                    retention::cut_chars(t.trim(), retention::PROBE_TEXT_MAX_CHARS),
                                    at.clone(),
                                )
                            })
                            .collect();
                    }
                    if let Some(call) = b["id"].as_str()
                        && !answered.contains(call)
                    {
                        pending.push(Probe {
                            kind: ProbeKind::PendingToolCall,
                            text: call.to_owned(),
                            entry_id: at.clone(),
                            tool_call_id: Some(call.to_owned()),
                        });
                    }
                }
                Some("tool_result") if b["is_error"] == Value::Bool(true) => {
                    let call = b["tool_use_id"].as_str().unwrap_or("").to_owned();
                    errors.push(Probe {
                        kind: ProbeKind::ToolError,
                        text: first_line(&result_text(b)).unwrap_or_else(|| call.clone()),
                        entry_id: at.clone(),
                        tool_call_id: Some(call),
                    });
                }
                _ => {}
            }
        }
        if matches!(role, "user" | "assistant") {
            let at = m.sources.first().map(|&n| tree.node(n).entry.id.clone());
            for (checked, item) in task_items(&m.text()) {
                if checked {
                    open.retain(|(t, _)| *t != item);
                } else if !open.iter().any(|(t, _)| *t == item) {
                    open.push((item, at.clone()));
                }
            }
        }
        if role == "user"
            && let Some(&n) = m.sources.iter().find(|&&n| typed_prompt(tree, n))
            && let Some(text) = first_line(&m.text()).filter(|t| !t.starts_with('<'))
        {
            last_request = Some((text, tree.node(n).entry.id.clone()));
        }
    }
    retention::probes_in_order(read, modified, errors, pending, open, todos, last_request)
}
