//! Retention probes: facts from the summarized span that a summary must not lose, found
//! deterministically, and looked up in the context after compaction (the summary plus the
//! kept messages).
//!
//! Probes, in this order: every read path, every modified path (pi's file lists, including
//! the previous compaction's details), the first non-empty line of each failed tool result
//! (`isError`), each tool call with no result in the span or in the kept messages (probed by
//! its `toolCallId`), each unchecked task item (`- [ ] text`, not checked later in the span),
//! and the first line of the last user request. Probe texts longer than
//! [`PROBE_TEXT_MAX_CHARS`] characters are cut there, so a summary can quote them whole.
//! A probe is `kept` when its text occurs verbatim (case-sensitive) in the searchable text of
//! some message of the new context; the report names that message's entry. The report's
//! shapes and the lookup are every dialect's ([`crate::core::retention`]); this module reads
//! pi's messages.

use serde_json::Value;

pub use crate::core::retention::{
    PROBE_TEXT_MAX_CHARS, Probe, ProbeKind, ProbeResult, ProbeStatus, Retention, check_texts,
    cut_chars, first_line, retention_text, task_items,
};
use crate::core::tree::NodeIdx;
use crate::dialect::pi::compaction::CompactionError;
use crate::dialect::pi::compaction::files::FileLists;
use crate::dialect::pi::compaction::prepare::{Preparation, Span, SpanMessage, SpanSource};
use crate::dialect::pi::format::{EntryId, ToolCallId};

/// The text blocks of a message's `content` joined by `\n` (lenient: odd shapes give "").
pub fn content_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A tool call found in an assistant message.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// The call's `id` (matched by a tool result's `toolCallId`).
    pub id: String,
    /// The tool's `name`.
    pub name: String,
    /// The call's `arguments` as stored.
    pub arguments: Value,
    /// The assistant entry holding the call.
    pub entry_id: EntryId,
}

/// Tool calls of one assistant message.
pub fn tool_calls(m: &SpanMessage) -> Vec<ToolCall> {
    if m.message.get("role").and_then(Value::as_str) != Some("assistant") {
        return Vec::new();
    }
    let Some(Value::Array(blocks)) = m.message.get("content") else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
        .map(|b| ToolCall {
            id: b.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
            name: b
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            arguments: b.get("arguments").cloned().unwrap_or(Value::Null),
            entry_id: m.entry_id.clone(),
        })
        .collect()
}

/// The `toolCallId` of a tool result message.
pub fn result_call_id(message: &Value) -> Option<&str> {
    (message.get("role").and_then(Value::as_str) == Some("toolResult"))
        .then(|| message.get("toolCallId").and_then(Value::as_str))
        .flatten()
}

/// The tool results of a span by `toolCallId`: for each id, the position (among the span's
/// results, in order) of its first result. A result whose id the tree holds is named by its
/// node (12 bytes a result with the id's hash and its position, the id looked up through the
/// [`SpanSource`] only where hashes are equal); any other id (a context edit's, a kept
/// message's) is copied. Sorted in place (no scratch buffer), rather than a map of owned
/// strings.
#[derive(Debug, Default)]
pub struct ResultIds {
    /// In span order until [`ResultIds::finish`], then sorted by (hash, id) with only each
    /// id's first result.
    by_node: Vec<NamedResult>,
    /// `(id, position)` of the results the tree does not name, likewise.
    owned: Vec<(ToolCallId, u32)>,
    /// Results pushed so far.
    len: usize,
}

impl ResultIds {
    /// An empty list with room for `capacity` results named by their node.
    pub fn with_capacity(capacity: usize) -> Self {
        ResultIds {
            by_node: Vec::with_capacity(capacity),
            owned: Vec::new(),
            len: 0,
        }
    }

    /// Adds the next result of the span, `m` with `toolCallId` `id`; returns its position.
    pub fn push(&mut self, source: &dyn SpanSource, m: &SpanMessage, id: &str) -> usize {
        match source.tool_result_node(m, id) {
            Some(node) => {
                let at = self.position();
                self.by_node.push(NamedResult {
                    hash: id_hash(id),
                    node,
                    at,
                });
                self.next()
            }
            None => self.push_id(id),
        }
    }

    /// Adds the next result, by its `toolCallId` alone; returns its position.
    pub fn push_id(&mut self, id: &str) -> usize {
        let at = self.position();
        self.owned.push((ToolCallId::from(id), at));
        self.next()
    }

    /// The next position as stored: every result is a tree node, so positions fit the tree's
    /// 32-bit node indices.
    fn position(&self) -> u32 {
        u32::try_from(self.len).unwrap_or(u32::MAX)
    }

    fn next(&mut self) -> usize {
        self.len += 1;
        self.len - 1
    }

    /// Sorts the lists by id and keeps each id's first result (call once, after the last
    /// push, with the source of the pushes).
    pub fn finish(&mut self, source: &dyn SpanSource) {
        let id = |n: NodeIdx| source.node_tool_call_id(n).unwrap_or("");
        // By (hash, id), then position: an id's results stay in span order and dedup keeps
        // the first.
        self.by_node.sort_unstable_by(|a, b| {
            a.hash
                .cmp(&b.hash)
                .then_with(|| id(a.node).cmp(id(b.node)))
                .then(a.at.cmp(&b.at))
        });
        self.by_node
            .dedup_by(|later, first| later.hash == first.hash && id(later.node) == id(first.node));
        self.owned
            .sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()).then(a.1.cmp(&b.1)));
        self.owned.dedup_by(|later, first| later.0 == first.0);
    }

    /// The position of `id`'s first result, if the span has one (after [`ResultIds::finish`],
    /// with the source of the pushes).
    pub fn first(&self, source: &dyn SpanSource, id: &str) -> Option<usize> {
        let hash = id_hash(id);
        let by_node = self
            .by_node
            .binary_search_by(|r| {
                r.hash
                    .cmp(&hash)
                    .then_with(|| source.node_tool_call_id(r.node).unwrap_or("").cmp(id))
            })
            .ok()
            .and_then(|i| self.by_node.get(i))
            .map(|r| r.at);
        let owned = self
            .owned
            .binary_search_by(|(k, _)| k.as_str().cmp(id))
            .ok()
            .and_then(|i| self.owned.get(i))
            .map(|(_, at)| *at);
        let first = match (by_node, owned) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        first.map(|at| at as usize)
    }
}

/// A result [`ResultIds`] names by its node.
#[derive(Clone, Copy, Debug)]
struct NamedResult {
    /// [`id_hash`] of its `toolCallId`.
    hash: u32,
    /// The node whose `toolCallId` it is.
    node: NodeIdx,
    /// Its position among the results.
    at: u32,
}

/// FNV-1a of an id: orders [`ResultIds`] without reading the ids from the tree (equal ids have
/// equal hashes; only equal hashes compare the ids).
fn id_hash(id: &str) -> u32 {
    id.bytes().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Whether a tool result reports failure (`isError` truthy).
pub fn is_error_result(message: &Value) -> bool {
    crate::js::value::truthy(message.get("isError"))
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// The probes of a preparation, its spans' messages read from `source` (two passes, one
/// message at a time). `kept_messages` are the messages kept after the cut (a tool call
/// answered there is not pending). Errors: a message that cannot be read again.
pub fn probes(
    prep: &Preparation,
    source: &dyn SpanSource,
    kept_messages: &[SpanMessage],
) -> Result<Vec<Probe>, CompactionError> {
    probes_of(
        &Summarized {
            spans: &[&prep.messages_to_summarize, &prep.turn_prefix_messages],
            file_lists: &prep.file_lists,
            carried_from: prep.previous_compaction_id.as_ref(),
        },
        source,
        kept_messages,
    )
}

/// What a summary replaced, as the probes read it: the spans of messages (in order), the
/// files they read and modified (pi's lists, with what an earlier summary carried in), and
/// the entry that carried a file no message of the spans names (an earlier compaction or
/// branch summary).
#[derive(Clone, Copy, Debug)]
pub struct Summarized<'a> {
    /// The spans of messages the summary replaced, in order.
    pub spans: &'a [&'a Span],
    /// pi's read and modified files of those spans.
    pub file_lists: &'a FileLists,
    /// The entry a listed file comes from when no call of the spans names it.
    pub carried_from: Option<&'a EntryId>,
}

/// [`probes`] of any summary: the spans it replaced read from `source`, `kept_messages` the
/// messages kept beside it (a tool call answered there is not pending).
pub fn probes_of(
    summarized: &Summarized<'_>,
    source: &dyn SpanSource,
    kept_messages: &[SpanMessage],
) -> Result<Vec<Probe>, CompactionError> {
    use std::collections::HashMap;
    let spans = summarized.spans;
    // Pass 1: every call the span or the kept messages answer.
    let hint: usize = spans.iter().map(|s| source.tool_results_hint(s)).sum();
    let mut answered = ResultIds::with_capacity(hint);
    for m in kept_messages {
        if let Some(id) = result_call_id(&m.message) {
            answered.push_id(id);
        }
    }
    for &span in spans {
        source.for_each_message(span, &mut |m| {
            if let Some(id) = result_call_id(&m.message) {
                answered.push(source, m, id);
            }
            Ok(())
        })?;
    }
    answered.finish(source);
    // Pass 2: the first call that read or modified each listed path, failed results, calls
    // without a result, open tasks and the last request, in the span's order.
    let read = path_set(&summarized.file_lists.read_files);
    let modified = path_set(&summarized.file_lists.modified_files);
    let mut first_read: HashMap<String, EntryId> = HashMap::new();
    let mut first_modified: HashMap<String, EntryId> = HashMap::new();
    let mut errors = Vec::new();
    let mut pending = Vec::new();
    let mut open = OpenTasks::default();
    let mut last_request = None;
    let mut pass = |m: &SpanMessage| -> Result<(), CompactionError> {
        for call in tool_calls(m) {
            if let Some(path) = call.arguments.get("path").and_then(Value::as_str) {
                let first = match call.name.as_str() {
                    "read" if read.contains(path) => Some(&mut first_read),
                    "write" | "edit" if modified.contains(path) => Some(&mut first_modified),
                    _ => None,
                };
                if let Some(first) = first
                    && !first.contains_key(path)
                {
                    first.insert(path.to_owned(), call.entry_id.clone());
                }
            }
            if !call.id.is_empty() && answered.first(source, &call.id).is_none() {
                pending.push(Probe {
                    kind: ProbeKind::PendingToolCall,
                    text: call.id.clone(),
                    entry_id: Some(call.entry_id),
                    tool_call_id: Some(call.id),
                });
            }
        }
        if let Some(id) = result_call_id(&m.message)
            && is_error_result(&m.message)
        {
            let text = first_line(&content_text(&m.message)).unwrap_or_else(|| id.to_owned());
            errors.push(Probe {
                kind: ProbeKind::ToolError,
                text,
                entry_id: Some(m.entry_id.clone()),
                tool_call_id: Some(id.to_owned()),
            });
        }
        open.add(m);
        if let Some(request) = user_request(m) {
            last_request = Some(request);
        }
        Ok(())
    };
    for &span in spans {
        source.for_each_message(span, &mut pass)?;
    }
    let file_entry = |path: &str, first: &HashMap<String, EntryId>| {
        first
            .get(path)
            .cloned()
            .or_else(|| summarized.carried_from.cloned())
    };
    let mut out = Vec::new();
    let lists = [
        (
            ProbeKind::ReadFile,
            &summarized.file_lists.read_files,
            &first_read,
        ),
        (
            ProbeKind::ModifiedFile,
            &summarized.file_lists.modified_files,
            &first_modified,
        ),
    ];
    for (kind, paths, first) in lists {
        for path in paths {
            out.push(Probe {
                kind,
                text: path.clone(),
                entry_id: file_entry(path, first),
                tool_call_id: None,
            });
        }
    }
    out.extend(errors);
    out.extend(pending);
    for (item, entry) in open.into_vec() {
        out.push(Probe {
            kind: ProbeKind::OpenTask,
            text: item,
            entry_id: Some(entry),
            tool_call_id: None,
        });
    }
    if let Some((text, entry)) = last_request {
        out.push(Probe {
            kind: ProbeKind::LastUserRequest,
            text,
            entry_id: Some(entry),
            tool_call_id: None,
        });
    }
    Ok(out)
}

/// Unchecked task items of user and assistant messages, first occurrence first, minus the
/// ones checked later in the span; fed one message at a time.
#[derive(Debug, Default)]
pub struct OpenTasks(Vec<(String, EntryId)>);

impl OpenTasks {
    /// Takes the task items of the next message of the span.
    pub fn add(&mut self, m: &SpanMessage) {
        if !matches!(role(&m.message), "user" | "assistant") {
            return;
        }
        for (checked, item) in task_items(&content_text(&m.message)) {
            if checked {
                self.0.retain(|(t, _)| *t != item);
            } else if !self.0.iter().any(|(t, _)| *t == item) {
                self.0.push((item, m.entry_id.clone()));
            }
        }
    }

    /// The open items and the entries they came from.
    pub fn into_vec(self) -> Vec<(String, EntryId)> {
        self.0
    }
}

/// The first line of a user message with text, and its entry (the last one of a span is the
/// last user request).
pub fn user_request(m: &SpanMessage) -> Option<(String, EntryId)> {
    (role(&m.message) == "user")
        .then(|| first_line(&content_text(&m.message)))
        .flatten()
        .map(|t| (t, m.entry_id.clone()))
}

/// Everything a probe can match in one message: its text, thinking, tool calls (name and
/// JSON arguments), summary, bash command and output.
pub fn searchable_text(message: &Value) -> String {
    let mut parts = vec![content_text(message)];
    if let Some(Value::Array(blocks)) = message.get("content") {
        for b in blocks {
            match b.get("type").and_then(Value::as_str) {
                Some("toolCall") => {
                    for key in ["id", "name"] {
                        if let Some(s) = b.get(key).and_then(Value::as_str) {
                            parts.push(s.to_owned());
                        }
                    }
                    if let Some(args) = b.get("arguments") {
                        parts.push(args.to_string());
                        if let Value::Object(map) = args {
                            parts.extend(map.values().filter_map(Value::as_str).map(str::to_owned));
                        }
                    }
                }
                Some("thinking") => {
                    if let Some(s) = b.get("thinking").and_then(Value::as_str) {
                        parts.push(s.to_owned());
                    }
                }
                _ => {}
            }
        }
    }
    for key in ["summary", "command", "output", "toolCallId"] {
        if let Some(s) = message.get(key).and_then(Value::as_str) {
            parts.push(s.to_owned());
        }
    }
    parts.join("\n")
}

/// Looks every probe up in the new context (`(entry, message)` in context order), each
/// message's [`searchable_text`].
pub fn check(probes: Vec<Probe>, new_context: &[(EntryId, Value)]) -> Retention {
    let texts: Vec<(EntryId, String)> = new_context
        .iter()
        .map(|(id, m)| (id.clone(), searchable_text(m)))
        .collect();
    check_texts(probes, &texts)
}

/// The paths of a file list, to look them up.
fn path_set(files: &[String]) -> std::collections::HashSet<&str> {
    files.iter().map(String::as_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_items_and_first_lines() {
        let text = "Plan:\n- [ ] write tests\n* [x] read code\n2. [ ] ship it\n- [] not a task\n";
        assert_eq!(
            task_items(text),
            vec![
                (false, "write tests".to_owned()),
                (true, "read code".to_owned()),
                (false, "ship it".to_owned())
            ]
        );
        assert_eq!(
            first_line("\n  \n  error: boom  \nmore"),
            Some("error: boom".to_owned())
        );
        assert_eq!(
            first_line(&"é".repeat(200)).map(|s| s.chars().count()),
            Some(160)
        );
    }
}
