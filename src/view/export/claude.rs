//! A Claude Code transcript's branch as a document to read or share (`sessiond export`,
//! `session/export` on a transcript), in the same Markdown or HTML as a pi session's
//! ([`super`]). Pure: takes the tree, a leaf, a [`LineSource`] and the subagents' transcripts
//! the caller read; the caller writes the document wherever it goes.
//!
//! The branch is the path to the leaf as Claude Code follows it (docs/claude-code.md §7.2:
//! parents, the closest earlier line for a parent that names none, the results of parallel tool
//! calls put back beside their calls, the attachments hanging below the leaf), continued across
//! each compact boundary to the line it compacted (its `logicalParentUuid`), so the document
//! reads from the first prompt to the leaf: the conversation before a boundary, the boundary
//! marked (what the model no longer sees), the compaction summary marked, and what follows.
//! Shown: user and assistant messages (the lines of one response merged back into one message),
//! thinking collapsed, each tool call collapsed with its result, images, attachments collapsed
//! with what Claude Code renders them to, local commands and their output as notes. A subagent
//! started by an `Agent` tool call on the branch is linked from that call to a section after
//! the branch holding the subagent's own conversation. Branches that leave the path (a rewind
//! with `--resume-session-at`, a concurrent run) are not shown but noted where they leave.
//! Every text goes through the [`Redactor`], as for pi.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::Value;

use super::{
    Block, Build, Common, Exported, Kind, Options, Part, Section, ToolResult, count_meta,
    leaf_meta, preview_of, read_values, str_of, texts,
};
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::dialect::claude::attachment::{self, Rendering};
use crate::dialect::claude::format::Kind as LineKind;
use crate::dialect::claude::subagent::Meta;
use crate::dialect::claude::{Tree, context::SYNTHETIC_MODEL};
use crate::dialect::pi::render::RenderError;
use crate::js::jsstr;
use crate::js::timestamp::format_iso;
use crate::storage::subagents::SubagentFile;

/// A subagent's transcript beside the exported one (`<session>/subagents/agent-<id>.jsonl`),
/// read by the caller.
pub struct Subagent<'a> {
    /// The agent id (`agent-<id>.jsonl`).
    pub agent_id: &'a str,
    /// The file, as the document names it.
    pub file_name: String,
    /// Its `agent-<id>.meta.json` (`toolUseId` names the parent's `Agent` call).
    pub meta: &'a Meta,
    /// Its tree.
    pub tree: &'a Tree,
    /// Its lines.
    pub lines: &'a dyn LineSource,
}

impl<'a> Subagent<'a> {
    /// A subagent transcript read beside `transcript` ([`crate::storage::subagents::read`]).
    pub fn of(transcript: &std::path::Path, f: &'a SubagentFile) -> Self {
        Subagent {
            agent_id: &f.agent_id,
            file_name: crate::storage::subagents::shown_name(transcript, &f.path),
            meta: &f.meta,
            tree: &f.session.tree,
            lines: &f.lines,
        }
    }
}

/// The branch to `leaf` as the document shows it, root first
/// ([`crate::dialect::claude::load::history`]): the path Claude Code follows to the leaf,
/// continued from each compact boundary at its start to the line it compacted.
pub fn branch(tree: &Tree, leaf: NodeIdx) -> Vec<NodeIdx> {
    crate::dialect::claude::load::history(tree, leaf)
}

/// Exports the branch to `leaf` (`None`: an empty transcript) of the transcript `tree` (lines
/// through `source`; `session_id` names it) as `options.format`, with the conversations of
/// the `subagents` its `Agent` calls started. Errors: a line that cannot be read, or no
/// longer holds what the tree was built from ([`RenderError`]).
pub fn export(
    tree: &Tree,
    leaf: Option<NodeIdx>,
    source: &dyn LineSource,
    session_id: &str,
    subagents: &[Subagent<'_>],
    options: &Options,
) -> Result<Exported, RenderError> {
    let path = leaf.map_or_else(Vec::new, |l| branch(tree, l));
    let values = read_values(tree, &path, source, jsstr::parse_value)?;
    let mut b = Builder {
        c: Common::new(options),
        linked: HashMap::new(),
    };
    // The subagents an `Agent` call on the branch started, each linked from its call.
    let calls_on_path: HashSet<String> = path
        .iter()
        .flat_map(|&n| match &tree.node(n).entry.kind {
            LineKind::Assistant { tool_use_ids, .. } => {
                tool_use_ids.iter().map(|s| s.to_string()).collect()
            }
            _ => Vec::new(),
        })
        .collect();
    let mut shown_subagents = Vec::new();
    let mut other_subagents = 0usize;
    for s in subagents {
        match s.meta.tool_use_id.as_deref() {
            Some(call) if calls_on_path.contains(call) => {
                let anchor = format!("subagent-{}", s.agent_id);
                let kind = s.meta.agent_type.as_deref().unwrap_or("subagent");
                let text = format!(
                    "Subagent {} ({kind}{}): its conversation is below",
                    s.agent_id,
                    s.meta
                        .description
                        .as_deref()
                        .map_or(String::new(), |d| format!(": {}", b.redact(d)))
                );
                b.linked.insert(call.to_owned(), (anchor, text));
                shown_subagents.push(s);
            }
            _ => other_subagents += 1,
        }
    }
    let blocks = b.blocks(tree, &path, &values);
    let mut sections = Vec::new();
    for s in shown_subagents {
        let sub_path = crate::dialect::claude::default_leaf(s.tree)
            .map_or_else(Vec::new, |l| branch(s.tree, l));
        let sub_values = read_values(s.tree, &sub_path, s.lines, jsstr::parse_value)?;
        let call = s.meta.tool_use_id.clone().unwrap_or_default();
        let started_by = crate::dialect::claude::subagent::tool_use_line(tree, &call)
            .map_or(call.clone(), |n| {
                format!("tool_use {call} at entry {}", tree.node(n).entry.id)
            });
        let mut meta = vec![("File", s.file_name.clone()), ("Started by", started_by)];
        if let Some(t) = &s.meta.agent_type {
            meta.push(("Agent type", b.redact(t)));
        }
        meta.push((
            "Conversation",
            crate::view::tree::count(sub_path.len(), "line", "lines"),
        ));
        let blocks = b.blocks(s.tree, &sub_path, &sub_values);
        sections.push(Section {
            anchor: format!("subagent-{}", s.agent_id),
            title: format!(
                "Subagent {}{}",
                s.agent_id,
                s.meta
                    .description
                    .as_deref()
                    .map_or(String::new(), |d| format!(" — {}", b.redact(d)))
            ),
            meta,
            blocks,
        });
    }

    let leaf_value = leaf.and_then(|l| path.iter().position(|&n| n == l).map(|i| &values[i]));
    let mut meta: Vec<(&str, String)> = vec![
        ("File", options.file_name.clone()),
        ("Session", session_id.to_owned()),
        ("Format", "Claude Code transcript".to_owned()),
    ];
    if let Some(cwd) = leaf_value.and_then(|v| str_of(v, "cwd")) {
        meta.push(("Working directory", b.redact(cwd)));
    }
    if let Some(created) = tree.nodes().first().and_then(|n| n.entry.time_ms.ms()) {
        meta.push(("Created", format_iso(created)));
    }
    meta.push(leaf_meta(tree, leaf));
    if let Some(model) = model_on(tree, &path) {
        meta.push(("Model at the leaf", model));
    }
    if let Some(v) = leaf_value.and_then(|v| str_of(v, "version")) {
        meta.push(("Claude Code version", b.redact(v)));
    }
    let lines = crate::view::tree::count(path.len(), "line", "lines");
    meta.push(count_meta("Branch", lines, &blocks, b.c.tool_calls));
    let boundaries = path
        .iter()
        .filter(|&&n| tree.node(n).entry.kind.is_compact_boundary())
        .count();
    if boundaries > 0 {
        meta.push((
            "Compactions",
            format!("{boundaries} on this branch; the model sees what follows the last one"),
        ));
    }
    let on_path: HashSet<NodeIdx> = path.iter().copied().collect();
    let off = tree.len() - on_path.len();
    let sidechain = tree.nodes().iter().filter(|n| n.entry.sidechain).count();
    if off > 0 {
        let mut text = format!(
            "{} of this file not on this branch (other branches are noted where they leave it)",
            crate::view::tree::count(off, "line", "lines")
        );
        if sidechain > 0 && !path.iter().any(|&n| tree.node(n).entry.sidechain) {
            let _ = write!(
                text,
                "; {} of them a subagent's sidechain",
                sidechain.min(off)
            );
        }
        meta.push(("Not shown", text));
    }
    if !sections.is_empty() || other_subagents > 0 {
        let mut text = format!("{} started on this branch, shown after it", sections.len());
        if other_subagents > 0 {
            let _ = write!(text, "; {other_subagents} started elsewhere, not shown");
        }
        meta.push(("Subagents", text));
    }
    let title = format!("Claude Code session {session_id}");
    Ok(b.c.finish(options, &title, &meta, &blocks, &sections, path.len()))
}

/// The model of the last assistant line on `path` a model wrote.
fn model_on(tree: &Tree, path: &[NodeIdx]) -> Option<String> {
    path.iter()
        .rev()
        .find_map(|&n| match &tree.node(n).entry.kind {
            LineKind::Assistant { model: Some(m), .. } if m != SYNTHETIC_MODEL => {
                Some(m.to_string())
            }
            _ => None,
        })
}

/// Builder state: the redactor, the counters, the subagent links.
struct Builder {
    c: Common,
    /// `tool_use` id → (anchor, link text) of the subagent it started.
    linked: HashMap<String, (String, String)>,
}

impl Build for Builder {
    fn common(&mut self) -> &mut Common {
        &mut self.c
    }

    /// An image block (`source: {type: "base64", media_type, data}`).
    fn image_fields(block: &Value) -> Option<(&str, &str)> {
        let source = block.get("source")?;
        if str_of(source, "type") != Some("base64") {
            return None;
        }
        Some((str_of(source, "media_type")?, str_of(source, "data")?))
    }
}

/// A `tool_result` block on the branch, by the call it answers.
struct Answer<'v> {
    block: &'v Value,
    taken: bool,
}

impl Builder {
    /// The blocks of the branch `path` of `tree` (its lines parsed in `values`).
    fn blocks(&mut self, tree: &Tree, path: &[NodeIdx], values: &[Value]) -> Vec<Block> {
        // The results on the branch, by the call they answer, to show each inside its call.
        let mut answers: HashMap<&str, Answer<'_>> = HashMap::new();
        for v in values {
            if str_of(v, "type") != Some("user") {
                continue;
            }
            for block in content_blocks(v) {
                if str_of(block, "type") == Some("tool_result")
                    && let Some(id) = str_of(block, "tool_use_id")
                {
                    answers.entry(id).or_insert(Answer {
                        block,
                        taken: false,
                    });
                }
            }
        }
        let on_path: HashSet<NodeIdx> = path.iter().copied().collect();
        let mut blocks = Vec::new();
        let mut i = 0;
        while i < path.len() {
            // The lines of one response (one `message.id`, one after the other) are one message.
            let mut j = i + 1;
            if let LineKind::Assistant {
                message_id: Some(id),
                ..
            } = &tree.node(path[i]).entry.kind
                && !id.is_empty()
            {
                while j < path.len()
                    && matches!(&tree.node(path[j]).entry.kind,
                        LineKind::Assistant { message_id: Some(m), .. } if m == id)
                {
                    j += 1;
                }
            }
            let group = &path[i..j];
            if let Some(block) = self.block(tree, group, &values[i..j], &mut answers) {
                blocks.push(block);
            }
            for &n in group {
                blocks.extend(self.branches_leaving(tree, n, &on_path));
            }
            i = j;
        }
        blocks
    }

    /// Notes for the branches that leave the path at `n` (children of `n` not on it).
    fn branches_leaving(
        &mut self,
        tree: &Tree,
        n: NodeIdx,
        on_path: &HashSet<NodeIdx>,
    ) -> Vec<Block> {
        let mut notes = Vec::new();
        for &c in tree.node(n).children.as_slice() {
            if on_path.contains(&c) {
                continue;
            }
            // The branch's size and where it ends (its newest leaf).
            let mut count = 0usize;
            let mut leaves = Vec::new();
            let mut stack = vec![c];
            while let Some(x) = stack.pop() {
                count += 1;
                let children = tree.node(x).children.as_slice();
                if children.is_empty() {
                    leaves.push(x);
                }
                stack.extend(children.iter().copied());
            }
            let last = leaves.iter().copied().max();
            let e = &tree.node(c).entry;
            notes.push(Block {
                id: e.id.to_string(),
                time: e.time_ms.ms().map(format_iso),
                label: None,
                kind: Kind::Note {
                    class: "rewind",
                    title: "Another branch leaves here (not shown)".to_owned(),
                    body: Some(format!(
                        "{} from {}{}: a rewind (`--resume-session-at`), or a run beside this one.",
                        crate::view::tree::count(count, "line", "lines"),
                        e.id,
                        match (leaves.len(), last) {
                            (1, Some(l)) if l != c =>
                                format!(" to its leaf {}", tree.node(l).entry.id),
                            (k, Some(l)) if k > 1 =>
                                format!(", {k} leaves, the last written {}", tree.node(l).entry.id),
                            _ => String::new(),
                        }
                    )),
                },
            });
        }
        notes
    }

    /// The block of one line, or of the lines of one response (`group`, parsed in `values`).
    fn block(
        &mut self,
        tree: &Tree,
        group: &[NodeIdx],
        values: &[Value],
        answers: &mut HashMap<&str, Answer<'_>>,
    ) -> Option<Block> {
        let first = &tree.node(group[0]).entry;
        let v = &values[0];
        let kind = match &first.kind {
            LineKind::Assistant { .. } => self.assistant(values, answers),
            LineKind::User { .. } => self.user(v, answers)?,
            LineKind::Attachment { attachment } => self.attachment(v, attachment),
            LineKind::System { subtype, .. } => self.system(v, subtype),
        };
        Some(Block {
            id: first.id.to_string(),
            time: first.time_ms.ms().map(format_iso),
            label: tree.label_of(first.id.as_str()).map(|l| l.text.to_string()),
            kind,
        })
    }

    fn assistant(&mut self, values: &[Value], answers: &mut HashMap<&str, Answer<'_>>) -> Kind {
        let message = values[0].get("message");
        let model = message.and_then(|m| str_of(m, "model"));
        let synthetic = model == Some(SYNTHETIC_MODEL);
        let mut parts = Vec::new();
        for v in values {
            for block in v.get("message").map(content_blocks).into_iter().flatten() {
                match str_of(block, "type") {
                    Some("text") => {
                        if let Some(t) = str_of(block, "text") {
                            parts.push(Part::Text(self.redact(t)));
                        }
                    }
                    Some("thinking") => {
                        if let Some(t) = str_of(block, "thinking").filter(|t| !t.trim().is_empty())
                        {
                            parts.push(Part::Thinking(self.redact(t)));
                        }
                    }
                    Some("redacted_thinking") => {
                        parts.push(Part::Thinking("(redacted by the provider)".into()));
                    }
                    Some("tool_use") => self.tool_call(block, answers, &mut parts),
                    _ => {}
                }
            }
        }
        let api_error = values[0].get("isApiErrorMessage") == Some(&Value::Bool(true));
        Kind::Message {
            role: "assistant",
            title: "Assistant".into(),
            meta: if synthetic {
                Some("written by Claude Code, not the model".into())
            } else {
                model.map(|m| self.redact(m))
            },
            parts,
            error: api_error.then(|| "an API error Claude Code recorded".to_owned()),
        }
    }

    fn tool_call(
        &mut self,
        block: &Value,
        answers: &mut HashMap<&str, Answer<'_>>,
        parts: &mut Vec<Part>,
    ) {
        self.c.tool_calls += 1;
        let name = self.redact(str_of(block, "name").unwrap_or("tool"));
        let args = self.args(block.get("input"));
        let preview = preview_of(&args);
        let id = str_of(block, "id");
        let result = id
            .and_then(|id| answers.get_mut(id))
            .filter(|a| !a.taken)
            .map(|a| {
                a.taken = true;
                a.block
            })
            .map(|r| self.tool_result(r));
        parts.push(Part::ToolCall {
            name,
            preview,
            args,
            result,
        });
        if let Some((anchor, text)) = id.and_then(|id| self.linked.get(id)) {
            parts.push(Part::Link {
                anchor: anchor.clone(),
                text: text.clone(),
            });
        }
    }

    /// A `tool_result` block: its content (a string, or text and image blocks) and `is_error`.
    fn tool_result(&mut self, block: &Value) -> ToolResult {
        ToolResult {
            is_error: block.get("is_error") == Some(&Value::Bool(true)),
            parts: self.result_parts(block.get("content")),
        }
    }

    /// A user line: a prompt, Claude Code's own line, a command and its output, the
    /// compaction summary, tool results whose call is not on the branch. `None` for a line that
    /// holds only results shown inside their calls.
    fn user(&mut self, v: &Value, answers: &mut HashMap<&str, Answer<'_>>) -> Option<Kind> {
        let meta = v.get("isMeta") == Some(&Value::Bool(true));
        let content = v.get("message").and_then(|m| m.get("content"));
        if v.get("isCompactSummary") == Some(&Value::Bool(true)) {
            let text = match content {
                Some(Value::String(s)) => s.clone(),
                _ => String::new(),
            };
            let text = if text.is_empty() {
                let parts = self.user_parts(content);
                texts(&parts)
            } else {
                self.redact(&text)
            };
            return Some(Kind::Note {
                class: "compaction",
                title: "Compaction summary: the model reads this in place of the conversation before the boundary".into(),
                body: Some(text),
            });
        }
        if let Some(Value::String(s)) = content {
            if let Some(command) = tag(s, "command-name") {
                let args = tag(s, "command-args").unwrap_or_default();
                return Some(Kind::Note {
                    class: "command",
                    title: format!(
                        "Local command {}{}",
                        self.redact(command.trim()),
                        if args.trim().is_empty() {
                            String::new()
                        } else {
                            format!(" {}", self.redact(args.trim()))
                        }
                    ),
                    body: None,
                });
            }
            if let Some(out) = tag(s, "local-command-stdout") {
                return Some(Kind::Note {
                    class: "command",
                    title: "Local command output".into(),
                    body: Some(self.redact(out)),
                });
            }
        }
        let mut parts = self.user_parts(content);
        // Results whose call is not on the branch (or came later): shown on their own.
        let mut lone: Vec<&Value> = Vec::new();
        if let Some(Value::Array(blocks)) = content {
            for b in blocks
                .iter()
                .filter(|b| str_of(b, "type") == Some("tool_result"))
            {
                let answer = str_of(b, "tool_use_id").and_then(|id| answers.get_mut(id));
                match answer {
                    Some(a) if std::ptr::eq(a.block, b) && a.taken => {}
                    Some(a) if std::ptr::eq(a.block, b) => {
                        a.taken = true;
                        lone.push(b);
                    }
                    _ => lone.push(b),
                }
            }
        }
        if parts.is_empty() && lone.is_empty() {
            return None;
        }
        for r in lone {
            self.c.tool_calls += 1;
            let result = self.tool_result(r);
            parts.push(Part::lone_result("tool".into(), result));
        }
        Some(Kind::Message {
            role: "user",
            title: if meta {
                "User (a line Claude Code wrote itself)".into()
            } else {
                "User".into()
            },
            meta: None,
            parts,
            error: None,
        })
    }

    /// The text and images of a user line's content (tool results aside).
    fn user_parts(&mut self, content: Option<&Value>) -> Vec<Part> {
        let text = |b: &mut Self, s: &str| Part::Text(b.redact(s));
        self.parts_of(content, text, Self::text_or_image)
    }

    /// An attachment: what Claude Code renders it to, collapsed.
    fn attachment(&mut self, v: &Value, ty: &str) -> Kind {
        let rendering = v
            .get("attachment")
            .map_or(Rendering::Unknown, attachment::render);
        let (summary, text) = match rendering {
            Rendering::Messages(m) if m.is_empty() => {
                return Kind::Note {
                    class: "attachment",
                    title: format!("Attachment {ty}: Claude Code sends nothing for it"),
                    body: None,
                };
            }
            Rendering::Messages(m) => (
                "What Claude Code adds to the request for it".to_owned(),
                m.iter()
                    .map(|t| attachment::unwrap(t).to_owned())
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            ),
            Rendering::Unknown => (
                "Its fields (sessiond does not know what Claude Code renders it to)".to_owned(),
                v.get("attachment")
                    .map(|a| serde_json::to_string_pretty(a).unwrap_or_default())
                    .unwrap_or_default(),
            ),
        };
        let text = self.cut(&text);
        Kind::Message {
            role: "attachment",
            title: "Attachment".into(),
            meta: Some(self.redact(ty)),
            parts: vec![Part::Collapsed { summary, text }],
            error: None,
        }
    }

    /// A system line: a compact boundary, a local command's output, or another kind of note.
    fn system(&mut self, v: &Value, subtype: &str) -> Kind {
        let content = str_of(v, "content").map(|c| self.redact(c));
        match subtype {
            "compact_boundary" => {
                let meta = v.get("compactMetadata");
                let trigger = meta.and_then(|m| str_of(m, "trigger")).unwrap_or("");
                let tokens = meta
                    .and_then(|m| m.get("preTokens"))
                    .and_then(Value::as_u64)
                    .map_or(String::new(), |t| format!(", {t} tokens before"));
                let kept = meta
                    .and_then(|m| m.get("preservedMessages"))
                    .and_then(|p| p.get("uuids"))
                    .and_then(Value::as_array)
                    .map(|u| {
                        u.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .filter(|u| !u.is_empty());
                let compacted =
                    str_of(v, "logicalParentUuid").map_or(String::new(), |p| format!(" up to {p}"));
                Kind::Note {
                    class: "compaction",
                    title: format!(
                        "Compacted here ({trigger}{tokens}): from now on the model sees the summary below instead of the conversation above{compacted}"
                    ),
                    body: kept.map(|k| format!("Kept verbatim after the summary: {k}")),
                }
            }
            "local_command" => Kind::Note {
                class: "command",
                title: "Local command output (sent to the model)".into(),
                body: content,
            },
            _ => Kind::Note {
                class: "system",
                title: format!(
                    "System line {}: shown in Claude Code, not sent to the model",
                    self.redact(subtype)
                ),
                body: content,
            },
        }
    }
}

/// The content blocks of a line's `message` (or of a `message` value): none for a string.
fn content_blocks(v: &Value) -> impl Iterator<Item = &Value> {
    let content = v.get("message").unwrap_or(v).get("content");
    content.and_then(Value::as_array).into_iter().flatten()
}

/// The text between `<name>` and `</name>` in `s`.
fn tag<'s>(s: &'s str, name: &str) -> Option<&'s str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = s.find(&open)? + open.len();
    let end = start + s[start..].find(&close)?;
    Some(&s[start..end])
}
