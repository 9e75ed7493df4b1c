//! A branch of a session as a document to read or share (`sessiond export`, `session/export`):
//! Markdown or one self-contained HTML file. Pure: takes the tree, a leaf and a
//! [`LineSource`]; the caller writes the document wherever it goes.
//!
//! What is shown: every entry on the path from the root to the leaf ([`Tree::path_to`]), in
//! order — user and assistant messages (text rendered from Markdown), thinking collapsed,
//! tool calls with their arguments and result collapsed together (outputs longer than
//! [`Options::max_output_bytes`] cut, with their full size), images as `data:` URIs,
//! compaction and branch summaries marked as such, labels on the entries they name, model,
//! thinking-level, name, label and context-edit changes as notes. Entries pi never shows
//! (`custom` extension state, `usage`) are left out. Every text taken from the session goes
//! through a [`Redactor`] first (on by default), and the document says how many strings it
//! redacted and which patterns it looks for.
//!
//! HTML: no script and no network (a Content-Security-Policy allows only inline styles and
//! `data:` images); `<details>` collapses; colours follow `prefers-color-scheme`. Raw HTML in a
//! message is shown as text, never interpreted, and Markdown images become links.
//!
//! pi 1.6.0's own export (`pi --export`, `core/export-html`) embeds the whole file as base64
//! JSON and renders it with JavaScript; this one renders on our side so the document reads
//! without a script engine and can be redacted.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use pulldown_cmark::{CowStr, Event, Options as MdOptions, Parser, Tag, TagEnd};
use serde_json::Value;

use crate::core::redact::{self, Redactor};
use crate::core::tree::{NodeIdx, Tree as CoreTree, TreeEntry};
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::EntryKind;
use crate::dialect::pi::projection;
use crate::dialect::pi::render::{self, LineSource, RenderError};
use crate::js::jsstr;
use crate::js::timestamp::format_iso;

pub mod claude;
pub mod codex;

/// Default [`Options::max_output_bytes`]: 8 KiB of each tool output or argument is shown.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 8 * 1024;

/// The document's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Markdown (CommonMark with `<details>` blocks, as GitHub renders it).
    Markdown,
    /// One self-contained HTML file.
    Html,
}

impl Format {
    /// `md`/`markdown` or `html`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "md" | "markdown" => Some(Format::Markdown),
            "html" => Some(Format::Html),
            _ => None,
        }
    }

    /// The wire name: `md` or `html`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Markdown => "md",
            Format::Html => "html",
        }
    }
}

/// How to export.
#[derive(Clone, Debug)]
pub struct Options {
    /// The document's format.
    pub format: Format,
    /// Redact strings that look like secrets ([`redact::PATTERNS`]).
    pub redact: bool,
    /// Longest tool output or argument shown, in bytes (cut at a character boundary).
    pub max_output_bytes: usize,
    /// The session file's name, shown in the document's heading block.
    pub file_name: String,
}

/// An exported document and what it holds.
#[derive(Clone, Debug)]
pub struct Exported {
    /// The document text.
    pub document: String,
    /// Strings replaced by the redactor.
    pub redactions: usize,
    /// Entries on the exported path.
    pub entries: usize,
    /// Message blocks shown (user, assistant, lone tool results, bash executions).
    pub messages: usize,
    /// Tool calls shown.
    pub tool_calls: usize,
    /// Tool outputs and arguments that were cut.
    pub truncated: usize,
    /// Images embedded.
    pub images: usize,
}

/// Text cut to a limit, with its full size.
struct Cut {
    text: String,
    full_bytes: usize,
    full_lines: usize,
    cut: bool,
}

enum ResultPart {
    Text(Cut),
    Image { mime: String, data: String },
}

struct ToolResult {
    is_error: bool,
    parts: Vec<ResultPart>,
}

enum Part {
    /// Markdown text.
    Text(String),
    Thinking(String),
    Image {
        mime: String,
        data: String,
    },
    ToolCall {
        name: String,
        preview: String,
        args: Vec<(Option<String>, Cut)>,
        result: Option<ToolResult>,
    },
    /// Text shown collapsed under a one-line summary (what a Claude Code attachment adds).
    Collapsed {
        summary: String,
        text: Cut,
    },
    /// A link to a section of the document (a subagent's conversation).
    Link {
        anchor: String,
        text: String,
    },
}

/// A part of the document after the branch: a subagent's conversation, started by a tool call
/// of the branch that links to it.
struct Section {
    /// The `id` a link names.
    anchor: String,
    title: String,
    meta: Vec<(&'static str, String)>,
    blocks: Vec<Block>,
}

enum Kind {
    Message {
        role: &'static str,
        title: String,
        meta: Option<String>,
        parts: Vec<Part>,
        error: Option<String>,
    },
    Note {
        class: &'static str,
        title: String,
        body: Option<String>,
    },
}

struct Block {
    id: String,
    time: Option<String>,
    label: Option<String>,
    kind: Kind,
}

/// What every dialect's builder keeps: the redactor and the counters the document reports.
struct Common {
    redactor: Redactor,
    max: usize,
    tool_calls: usize,
    truncated: usize,
    images: usize,
}

impl Common {
    fn new(options: &Options) -> Common {
        Common {
            redactor: Redactor::new(options.redact),
            max: options.max_output_bytes.max(1),
            tool_calls: 0,
            truncated: 0,
            images: 0,
        }
    }

    /// The document in `options.format`: the heading block (`title`, `meta`, what was
    /// redacted), `blocks` and then `sections`; `entries` are those on the exported path.
    fn finish(
        &self,
        options: &Options,
        title: &str,
        meta: &[(&str, String)],
        blocks: &[Block],
        sections: &[Section],
        entries: usize,
    ) -> Exported {
        let redactions = self.redactor.count();
        let redaction_note = if options.redact {
            format!(
                "Redacted {redactions} string{} that look like secrets (patterns: {}).",
                if redactions == 1 { "" } else { "s" },
                pattern_names().join(", ")
            )
        } else {
            "Redaction was off: secrets in this session are shown as written.".to_owned()
        };
        let doc = Doc {
            title,
            meta,
            redaction_note: &redaction_note,
            blocks,
            sections,
        };
        let document = match options.format {
            Format::Markdown => doc.markdown(),
            Format::Html => doc.html(),
        };
        Exported {
            document,
            redactions,
            entries,
            messages: messages(blocks),
            tool_calls: self.tool_calls,
            truncated: self.truncated,
            images: self.images,
        }
    }
}

/// What every dialect's builder does alike, over the [`Common`] state it holds: redacting,
/// cutting, images, a tool call's arguments and a tool result's content.
trait Build {
    /// The redactor and the counters.
    fn common(&mut self) -> &mut Common;

    /// An image block's MIME type and base64 data, where the dialect writes them.
    fn image_fields(block: &Value) -> Option<(&str, &str)>;

    /// `s` as shown: lone surrogates displayed, secrets redacted.
    fn redact(&mut self, s: &str) -> String {
        self.common()
            .redactor
            .redact(&jsstr::display(s))
            .into_owned()
    }

    /// `s` redacted and cut to the longest output shown.
    fn cut(&mut self, s: &str) -> Cut {
        let text = self.redact(s);
        let c = self.common();
        let cut = cut_text(text, c.max);
        c.truncated += usize::from(cut.cut);
        cut
    }

    /// An image block's MIME type and data, when both are safe to embed.
    fn image(&mut self, block: &Value) -> Option<(String, String)> {
        let (mime, data) = Self::image_fields(block)?;
        let mime = image_mime(mime)?;
        if !is_base64(data) {
            return None;
        }
        self.common().images += 1;
        Some((mime, data.replace(['\n', '\r'], "")))
    }

    /// A tool call's arguments: each field of an object (its name is shown as much as its
    /// value: redacted too), none for null, else the value pretty-printed.
    fn args(&mut self, input: Option<&Value>) -> Vec<(Option<String>, Cut)> {
        match input {
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => serde_json::to_string_pretty(other).unwrap_or_default(),
                    };
                    (Some(self.redact(k)), self.cut(&text))
                })
                .collect(),
            None | Some(Value::Null) => Vec::new(),
            Some(other) => vec![(
                None,
                self.cut(&serde_json::to_string_pretty(other).unwrap_or_default()),
            )],
        }
    }

    /// What a `content` shows: a string is one part (`string`); each block with a `type` is
    /// given to `block`, which pushes what it shows of it.
    fn parts_of<P>(
        &mut self,
        content: Option<&Value>,
        string: impl FnOnce(&mut Self, &str) -> P,
        mut block: impl FnMut(&mut Self, &str, &Value, &mut Vec<P>),
    ) -> Vec<P>
    where
        Self: Sized,
    {
        let mut parts = Vec::new();
        match content {
            Some(Value::String(s)) => parts.push(string(self, s)),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    if let Some(ty) = str_of(b, "type") {
                        block(self, ty, b, &mut parts);
                    }
                }
            }
            _ => {}
        }
        parts
    }

    /// A `text` block's text (redacted) or an `image` block's image; nothing for another.
    fn text_or_image(&mut self, ty: &str, block: &Value, parts: &mut Vec<Part>) {
        match ty {
            "text" => {
                if let Some(t) = str_of(block, "text") {
                    parts.push(Part::Text(self.redact(t)));
                }
            }
            "image" => {
                if let Some((mime, data)) = self.image(block) {
                    parts.push(Part::Image { mime, data });
                }
            }
            _ => {}
        }
    }

    /// A tool result's `content`: a string, or its text and image blocks, texts cut.
    fn result_parts(&mut self, content: Option<&Value>) -> Vec<ResultPart>
    where
        Self: Sized,
    {
        let text = |b: &mut Self, t: &str| ResultPart::Text(b.cut(t));
        self.parts_of(content, text, |b, ty, block, parts| match ty {
            "text" => parts.extend(str_of(block, "text").map(|t| text(b, t))),
            "image" => parts.extend(
                b.image(block)
                    .map(|(mime, data)| ResultPart::Image { mime, data }),
            ),
            _ => {}
        })
    }
}

/// The message blocks of a document (attachments are not messages).
fn messages(blocks: &[Block]) -> usize {
    blocks
        .iter()
        .filter(|b| matches!(b.kind, Kind::Message { role, .. } if role != "attachment"))
        .count()
}

/// The line of a document's heading block that counts what it shows: `key: {what}, N messages,
/// N tool calls`.
fn count_meta(
    key: &'static str,
    what: String,
    blocks: &[Block],
    tool_calls: usize,
) -> (&'static str, String) {
    (
        key,
        format!(
            "{what}, {} messages, {tool_calls} tool calls",
            messages(blocks)
        ),
    )
}

/// The `Leaf` line of a document's heading block.
fn leaf_meta<E: TreeEntry>(tree: &CoreTree<E>, leaf: Option<NodeIdx>) -> (&'static str, String) {
    (
        "Leaf",
        leaf.map_or("(none)".into(), |l| tree.node(l).entry.id().to_string()),
    )
}

/// The lines of `path` in `tree` (through `source`), each parsed by `parse`.
fn read_values<E: TreeEntry, Err: std::fmt::Display>(
    tree: &CoreTree<E>,
    path: &[NodeIdx],
    source: &dyn LineSource,
    parse: impl Fn(&[u8]) -> Result<Value, Err>,
) -> Result<Vec<Value>, RenderError> {
    path.iter()
        .map(|&n| {
            let e = &tree.node(n).entry;
            let span = e.span();
            let bytes = source.line(span).map_err(|source| RenderError::Io {
                line: span.line,
                id: e.id().to_string(),
                source,
            })?;
            parse(&bytes).map_err(|err| RenderError::Changed {
                line: span.line,
                id: e.id().to_string(),
                detail: err.to_string(),
            })
        })
        .collect()
}

impl Part {
    /// A tool result whose call is not on the branch (or came after it), shown on its own.
    fn lone_result(name: String, result: ToolResult) -> Part {
        Part::ToolCall {
            name,
            preview: "(its call is not on this branch)".into(),
            args: Vec::new(),
            result: Some(result),
        }
    }
}

impl Kind {
    /// A message without an error.
    fn message(
        role: &'static str,
        title: impl Into<String>,
        meta: Option<String>,
        parts: Vec<Part>,
    ) -> Kind {
        Kind::Message {
            role,
            title: title.into(),
            meta,
            parts,
            error: None,
        }
    }
}

/// Builder state: the tree, the path's lines, the redactor and the counters.
struct Builder<'a> {
    tree: &'a Tree,
    c: Common,
    /// The path's lines, parsed.
    values: &'a [Value],
    /// Tool results by the call they answer (an index into `values`).
    results: &'a HashMap<String, usize>,
    /// The lines already shown (results inside their calls).
    consumed: HashSet<usize>,
}

impl Build for Builder<'_> {
    fn common(&mut self) -> &mut Common {
        &mut self.c
    }

    fn image_fields(block: &Value) -> Option<(&str, &str)> {
        Some((str_of(block, "mimeType")?, str_of(block, "data")?))
    }
}

/// Exports the path from the root to `leaf` (`None`: an empty session) as `options.format`.
/// Errors: an entry's line cannot be read, or no longer holds the entry the tree was built
/// from ([`RenderError`]).
pub fn export(
    tree: &Tree,
    leaf: Option<NodeIdx>,
    source: &dyn LineSource,
    options: &Options,
) -> Result<Exported, RenderError> {
    let path = tree.path_to(leaf);
    let mut values = Vec::with_capacity(path.len());
    for &n in &path {
        values.push(render::line_value(tree, n, source)?);
    }
    // Tool results by the call they answer, so each is shown inside its call.
    let mut results: HashMap<String, usize> = HashMap::new();
    for (i, &n) in path.iter().enumerate() {
        if let EntryKind::Message(info) = &tree.node(n).entry.kind
            && let Some(id) = info.tool_call_id()
        {
            results.entry(id.to_string()).or_insert(i);
        }
    }
    let mut b = Builder {
        tree,
        c: Common::new(options),
        values: &values,
        results: &results,
        consumed: HashSet::new(),
    };
    let mut blocks = Vec::new();
    for (i, &n) in path.iter().enumerate() {
        if b.consumed.contains(&i) {
            continue;
        }
        if let Some(block) = b.block(n, &values[i]) {
            blocks.push(block);
        }
    }
    let proj = projection::project(tree, leaf);
    let raw_text = |r: &Option<crate::dialect::pi::format::SharedRaw>| {
        r.as_ref().map(|r| {
            crate::dialect::pi::format::raw_str(r).map_or(r.get().to_owned(), |s| s.into_owned())
        })
    };
    let model = proj.model.as_ref().map(|m| {
        format!(
            "{}/{}",
            raw_text(&m.provider).unwrap_or_default(),
            raw_text(&m.model_id).unwrap_or_default()
        )
    });
    let thinking = raw_text(&proj.thinking_level);
    let header = tree.header();
    let title = b.redact(
        &tree
            .name()
            .map_or_else(|| format!("Session {}", header.id), str::to_owned),
    );
    let created = jsstr::parse_value(header.raw.get().as_bytes())
        .ok()
        .and_then(|v| {
            v.get("timestamp")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
    let mut meta: Vec<(&str, String)> = vec![
        ("File", options.file_name.clone()),
        ("Session", header.id.clone()),
    ];
    if let Some(cwd) = &header.cwd {
        meta.push(("Working directory", b.redact(cwd)));
    }
    if let Some(c) = created {
        meta.push(("Created", c));
    }
    meta.push(leaf_meta(tree, leaf));
    if let Some(m) = model {
        meta.push(("Model at the leaf", m));
    }
    if let Some(t) = thinking {
        meta.push(("Thinking level", t));
    }
    let entries = format!("{} entries", path.len());
    meta.push(count_meta("Branch", entries, &blocks, b.c.tool_calls));
    Ok(b.c.finish(options, &title, &meta, &blocks, &[], path.len()))
}

/// The kinds of [`redact::PATTERNS`], each once, in order.
fn pattern_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for (kind, _) in redact::PATTERNS {
        if !names.contains(kind) {
            names.push(kind);
        }
    }
    names
}

fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// Whether `data` can go into a `data:` URI as is (base64 alphabet only).
fn is_base64(data: &str) -> bool {
    data.bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'\n' | b'\r'))
}

/// An image MIME type safe to embed (`image/` and a plain subtype).
fn image_mime(mime: &str) -> Option<String> {
    let sub = mime.strip_prefix("image/")?;
    (!sub.is_empty()
        && sub
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))
    .then(|| mime.to_owned())
}

fn count_lines(s: &str) -> usize {
    if s.is_empty() { 0 } else { s.lines().count() }
}

/// `text` (already redacted) cut to `max` bytes at a character boundary, with its full size.
fn cut_text(text: String, max: usize) -> Cut {
    let full_bytes = text.len();
    let full_lines = count_lines(&text);
    if full_bytes <= max {
        return Cut {
            text,
            full_bytes,
            full_lines,
            cut: false,
        };
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cut {
        text: text[..end].to_owned(),
        full_bytes,
        full_lines,
        cut: true,
    }
}

impl Builder<'_> {
    /// Text, thinking, images and tool calls of a message's `content` (a string or blocks).
    fn content_parts(&mut self, content: Option<&Value>) -> Vec<Part> {
        let text = |b: &mut Self, s: &str| Part::Text(b.redact(s));
        self.parts_of(content, text, |b, ty, block, parts| match ty {
            "thinking" => {
                if let Some(t) = str_of(block, "thinking")
                    && !t.trim().is_empty()
                {
                    parts.push(Part::Thinking(b.redact(t)));
                } else if block.get("redacted").and_then(Value::as_bool) == Some(true) {
                    parts.push(Part::Thinking("(redacted by the provider)".into()));
                }
            }
            "toolCall" => parts.push(b.tool_call(block)),
            _ => b.text_or_image(ty, block, parts),
        })
    }

    fn tool_call(&mut self, block: &Value) -> Part {
        self.c.tool_calls += 1;
        let name = self.redact(str_of(block, "name").unwrap_or("tool"));
        let args = self.args(block.get("arguments"));
        let preview = preview_of(&args);
        let result = str_of(block, "id")
            .and_then(|id| self.results.get(id))
            .copied()
            .filter(|i| !self.consumed.contains(i))
            .and_then(|i| {
                let message = self.values[i].get("message")?;
                self.consumed.insert(i);
                Some(self.tool_result(message))
            });
        Part::ToolCall {
            name,
            preview,
            args,
            result,
        }
    }

    fn tool_result(&mut self, message: &Value) -> ToolResult {
        ToolResult {
            is_error: message.get("isError").and_then(Value::as_bool) == Some(true),
            parts: self.result_parts(message.get("content")),
        }
    }

    fn block(&mut self, n: NodeIdx, value: &Value) -> Option<Block> {
        let tree = self.tree;
        let entry = &tree.node(n).entry;
        let id = entry.id.to_string();
        let label = tree
            .label_of(&id)
            .map(|l| l.text.to_string())
            .map(|l| self.redact(&l));
        let time = entry.time_ms.ms().map(format_iso);
        let s = |k: &str| str_of(value, k).unwrap_or("").to_owned();
        let kind = match &entry.kind {
            EntryKind::Message(_) => {
                let message = value.get("message")?;
                self.message(message)
            }
            EntryKind::ModelChange { .. } => Kind::Note {
                class: "model-change",
                title: format!("Model changed to {}/{}", s("provider"), s("modelId")),
                body: None,
            },
            EntryKind::ThinkingLevelChange { .. } => Kind::Note {
                class: "thinking-change",
                title: format!("Thinking level changed to {}", s("thinkingLevel")),
                body: None,
            },
            EntryKind::Compaction { .. } => {
                let tokens = value
                    .get("tokensBefore")
                    .and_then(Value::as_u64)
                    .map_or(String::new(), |t| format!(" ({t} tokens before)"));
                let kept = str_of(value, "firstKeptEntryId")
                    .map_or(String::new(), |k| format!("; kept from entry {k}"));
                Kind::Note {
                    class: "compaction",
                    title: format!(
                        "Compaction: the model sees this summary instead of the earlier entries{tokens}{kept}"
                    ),
                    body: Some(self.redact(&s("summary"))),
                }
            }
            EntryKind::BranchSummary { .. } => Kind::Note {
                class: "branch-summary",
                title: match str_of(value, "fromId") {
                    Some(from) => format!("Branch summary of the branch left at entry {from}"),
                    None => "Branch summary".to_owned(),
                },
                body: Some(self.redact(&s("summary"))),
            },
            EntryKind::CustomMessage => {
                let custom = s("customType");
                let parts = self.content_parts(value.get("content"));
                Kind::Note {
                    class: "custom-message",
                    title: format!("Extension message {custom}"),
                    body: Some(texts(&parts)),
                }
            }
            EntryKind::Label { target_id, label } => Kind::Note {
                class: "label-change",
                title: match (target_id, label) {
                    (Some(t), Some(l)) => {
                        format!("Label “{}” set on entry {t}", self.redact(l))
                    }
                    (Some(t), None) => format!("Label cleared on entry {t}"),
                    _ => "Label".to_owned(),
                },
                body: None,
            },
            EntryKind::SessionInfo { name } => Kind::Note {
                class: "session-info",
                title: match name {
                    Some(name) => format!("Session named “{}”", self.redact(name)),
                    None => "Session info".to_owned(),
                },
                body: None,
            },
            EntryKind::ContextEdit {
                target_id, omits, ..
            } => Kind::Note {
                class: "context-edit",
                title: format!(
                    "Context edit: entry {} {} in what the model sees",
                    target_id.as_ref().map_or("?", |t| t.as_str()),
                    if *omits { "is left out" } else { "is replaced" }
                ),
                body: None,
            },
            EntryKind::Custom | EntryKind::Usage | EntryKind::Untyped => return None,
            EntryKind::Other(t) => Kind::Note {
                class: "other",
                title: format!("Entry of type {t}"),
                body: None,
            },
        };
        Some(Block {
            id,
            time,
            label,
            kind,
        })
    }

    fn message(&mut self, message: &Value) -> Kind {
        let role = str_of(message, "role").unwrap_or("");
        match role {
            "user" => Kind::Message {
                role: "user",
                title: "User".into(),
                meta: None,
                parts: self.content_parts(message.get("content")),
                error: None,
            },
            "assistant" => {
                let meta = match (str_of(message, "provider"), str_of(message, "model")) {
                    (Some(p), Some(m)) => Some(format!("{p}/{m}")),
                    (None, Some(m)) => Some(m.to_owned()),
                    _ => None,
                };
                let error = str_of(message, "errorMessage")
                    .map(|e| self.redact(e))
                    .or_else(|| {
                        (str_of(message, "stopReason") == Some("aborted"))
                            .then(|| "aborted".to_owned())
                    });
                Kind::Message {
                    role: "assistant",
                    title: "Assistant".into(),
                    meta,
                    parts: self.content_parts(message.get("content")),
                    error,
                }
            }
            "toolResult" => {
                // A result whose call is not on the path (or came first): shown on its own.
                self.c.tool_calls += 1;
                let name = self.redact(str_of(message, "toolName").unwrap_or("tool"));
                let result = self.tool_result(message);
                Kind::message(
                    "tool-result",
                    "Tool result",
                    None,
                    vec![Part::lone_result(name, result)],
                )
            }
            "bashExecution" => {
                self.c.tool_calls += 1;
                let command = s_of(message, "command");
                let exit = message.get("exitCode").and_then(Value::as_i64);
                let cancelled = message.get("cancelled").and_then(Value::as_bool) == Some(true);
                let output = self.cut(&s_of(message, "output"));
                let args = vec![(Some("command".to_owned()), self.cut(&command))];
                let preview = preview_of(&args);
                Kind::Message {
                    role: "bash",
                    title: "User ran a command".into(),
                    meta: None,
                    parts: vec![Part::ToolCall {
                        name: "bash".into(),
                        preview,
                        args,
                        result: Some(ToolResult {
                            is_error: cancelled || exit.is_some_and(|c| c != 0),
                            parts: vec![ResultPart::Text(output)],
                        }),
                    }],
                    error: None,
                }
            }
            "branchSummary" | "compactionSummary" => Kind::Note {
                class: if role == "branchSummary" {
                    "branch-summary"
                } else {
                    "compaction"
                },
                title: if role == "branchSummary" {
                    "Branch summary".into()
                } else {
                    "Compaction summary".into()
                },
                body: Some(self.redact(&s_of(message, "summary"))),
            },
            other => {
                let parts = self.content_parts(message.get("content"));
                Kind::Note {
                    class: "custom-message",
                    title: match str_of(message, "customType") {
                        Some(t) => format!("Extension message {t}"),
                        None => format!("Message ({other})"),
                    },
                    body: Some(texts(&parts)),
                }
            }
        }
    }
}

/// The first line of the first argument that says what a call does (already redacted).
fn preview_of(args: &[(Option<String>, Cut)]) -> String {
    ["command", "path", "file_path", "pattern", "query", "url"]
        .iter()
        .find_map(|k| {
            args.iter()
                .find(|(name, _)| name.as_deref() == Some(k))
                .map(|(_, c)| c.text.as_str())
        })
        .map(|s| {
            let first = s.lines().next().unwrap_or("");
            let short: String = first.chars().take(100).collect();
            let more = short.len() < s.len();
            format!("{short}{}", if more { " …" } else { "" })
        })
        .unwrap_or_default()
}

fn s_of(v: &Value, key: &str) -> String {
    str_of(v, key).unwrap_or("").to_owned()
}

/// The text parts joined, for notes.
fn texts(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `12,345 bytes`.
fn bytes_text(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("{out} bytes")
}

fn cut_note(c: &Cut) -> Option<String> {
    c.cut.then(|| {
        format!(
            "… cut: {} of {} shown ({} lines in full)",
            bytes_text(c.text.len()),
            bytes_text(c.full_bytes),
            c.full_lines
        )
    })
}

/// Escapes text for HTML (element content and quoted attributes).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let _ = pulldown_cmark_escape::escape_html(&mut out, s);
    out
}

/// Whether a link target may stay a link (no script or data URLs).
fn safe_href(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    !(lower.starts_with("javascript:")
        || lower.starts_with("vbscript:")
        || lower.starts_with("data:"))
}

/// Markdown to HTML: raw HTML is shown as text, images become links (nothing is fetched),
/// script and data links are neutralized.
fn markdown_html(text: &str) -> String {
    let mut opts = MdOptions::empty();
    opts.insert(MdOptions::ENABLE_TABLES);
    opts.insert(MdOptions::ENABLE_STRIKETHROUGH);
    opts.insert(MdOptions::ENABLE_TASKLISTS);
    let events = Parser::new_ext(text, opts).map(|event| match event {
        Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: if safe_href(&dest_url) {
                dest_url
            } else {
                CowStr::Borrowed("#")
            },
            title,
            id,
        }),
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) if !safe_href(&dest_url) => Event::Start(Tag::Link {
            link_type,
            dest_url: CowStr::Borrowed("#"),
            title,
            id,
        }),
        other => other,
    });
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, events);
    out
}

/// A code fence longer than any run of backticks in `text`.
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

struct Doc<'a> {
    title: &'a str,
    meta: &'a [(&'a str, String)],
    redaction_note: &'a str,
    blocks: &'a [Block],
    sections: &'a [Section],
}

const CSS: &str = r#"
:root { color-scheme: light dark; --bg: #fafafa; --fg: #1d1d1f; --muted: #6b6b70; --card: #ffffff;
  --border: #dcdce0; --user: #e8f0fe; --assistant: #ffffff; --note: #f3efe2; --code: #f1f1f4;
  --error: #b3261e; --ok: #1e7b34; --accent: #3b5bdb; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #16171a; --fg: #e6e6e9; --muted: #9a9aa2; --card: #1f2024; --border: #34353b;
    --user: #1f2a3d; --assistant: #1f2024; --note: #2d2a20; --code: #26272c; --error: #f28b82;
    --ok: #81c995; --accent: #8ab4f8; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 15px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif; }
main, body > header, body > footer { max-width: 60rem; margin: 0 auto; padding: 0 1rem; }
body > header { padding-top: 1.5rem; }
h1 { font-size: 1.5rem; margin: 0 0 .5rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0 0 .5rem;
  color: var(--muted); font-size: .9rem; }
dl.meta dt { font-weight: 600; } dl.meta dd { margin: 0; overflow-wrap: anywhere; }
p.redaction { font-size: .85rem; color: var(--muted); }
article, aside { background: var(--card); border: 1px solid var(--border); border-radius: 8px;
  margin: .75rem 0; padding: .6rem .9rem; }
article.user { background: var(--user); }
aside.note { background: var(--note); font-size: .92rem; }
.entry-head { display: flex; gap: .6rem; align-items: baseline; flex-wrap: wrap; font-size: .82rem;
  color: var(--muted); }
.entry-head .role { font-weight: 700; color: var(--fg); font-size: .9rem; }
.entry-head a.id { color: var(--muted); font-family: ui-monospace, monospace; text-decoration: none; }
.label { background: var(--accent); color: var(--bg); border-radius: 4px; padding: 0 .4rem; font-weight: 600; }
.error { color: var(--error); }
details { border: 1px solid var(--border); border-radius: 6px; margin: .4rem 0; padding: .2rem .6rem; }
details > summary { cursor: pointer; color: var(--muted); font-size: .88rem; }
details.tool > summary .tool-name { font-weight: 700; color: var(--fg); font-family: ui-monospace, monospace; }
details.tool > summary code { overflow-wrap: anywhere; }
.status.ok { color: var(--ok); } .status.error { color: var(--error); }
pre, code { font-family: ui-monospace, "SF Mono", Menlo, monospace; font-size: .85rem; }
pre { background: var(--code); padding: .5rem .7rem; border-radius: 6px; overflow-x: auto;
  white-space: pre-wrap; overflow-wrap: anywhere; }
.arg-name { font-size: .8rem; font-weight: 600; color: var(--muted); margin-top: .4rem; }
p.truncated { font-size: .8rem; color: var(--muted); font-style: italic; }
img.embedded { max-width: 100%; border-radius: 6px; border: 1px solid var(--border); }
.md table { border-collapse: collapse; } .md td, .md th { border: 1px solid var(--border); padding: .2rem .5rem; }
a { color: var(--accent); }
footer { color: var(--muted); font-size: .8rem; padding-bottom: 2rem; }
"#;

impl Doc<'_> {
    fn html(&self) -> String {
        let mut h = String::with_capacity(64 * 1024);
        h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        h.push_str("<meta name=\"color-scheme\" content=\"light dark\">\n");
        h.push_str(
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">\n",
        );
        h.push_str("<meta name=\"generator\" content=\"sessiond ");
        h.push_str(env!("CARGO_PKG_VERSION"));
        h.push_str("\">\n");
        let _ = writeln!(h, "<title>{}</title>", esc(self.title));
        let _ = writeln!(h, "<style>{CSS}</style>\n</head>\n<body>");
        let _ = writeln!(
            h,
            "<header class=\"session\">\n<h1>{}</h1>",
            esc(self.title)
        );
        h.push_str("<dl class=\"meta\">\n");
        for (k, v) in self.meta {
            let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
        }
        h.push_str("</dl>\n");
        let _ = writeln!(
            h,
            "<p class=\"redaction\">{}</p>\n</header>\n<main>",
            esc(self.redaction_note)
        );
        for b in self.blocks {
            block_html(&mut h, b);
        }
        for s in self.sections {
            let _ = writeln!(
                h,
                "<section class=\"subagent\" id=\"{}\">\n<h2>{}</h2>\n<dl class=\"meta\">",
                esc(&s.anchor),
                esc(&s.title)
            );
            for (k, v) in &s.meta {
                let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
            }
            h.push_str("</dl>\n");
            for b in &s.blocks {
                block_html(&mut h, b);
            }
            h.push_str("</section>\n");
        }
        let _ = writeln!(
            h,
            "</main>\n<footer>Exported by sessiond {}.</footer>\n</body>\n</html>",
            env!("CARGO_PKG_VERSION")
        );
        h
    }

    fn markdown(&self) -> String {
        let mut m = String::with_capacity(64 * 1024);
        let _ = writeln!(m, "# {}\n", self.title.replace('\n', " "));
        for (k, v) in self.meta {
            let _ = writeln!(m, "- **{k}:** {}", v.replace('\n', " "));
        }
        let _ = writeln!(m, "\n_{}_\n", self.redaction_note);
        for b in self.blocks {
            m.push_str("---\n\n");
            block_markdown(&mut m, b);
        }
        for s in self.sections {
            let _ = writeln!(
                m,
                "---\n\n<a id=\"{}\"></a>\n\n## {}\n",
                esc(&s.anchor),
                s.title.replace('\n', " ")
            );
            for (k, v) in &s.meta {
                let _ = writeln!(m, "- **{k}:** {}", v.replace('\n', " "));
            }
            m.push('\n');
            for b in &s.blocks {
                m.push_str("---\n\n");
                block_markdown(&mut m, b);
            }
        }
        let _ = writeln!(
            m,
            "---\n\n_Exported by sessiond {}._",
            env!("CARGO_PKG_VERSION")
        );
        m
    }
}

/// A tool call's status: its class in HTML and its word.
fn status(result: Option<&ToolResult>) -> (&'static str, &'static str) {
    match result {
        Some(r) if r.is_error => ("error", "error"),
        Some(_) => ("ok", "ok"),
        None => ("pending", "no result"),
    }
}

fn image_html(h: &mut String, mime: &str, data: &str) {
    let _ = writeln!(
        h,
        "<img class=\"embedded\" alt=\"image ({0})\" src=\"data:{0};base64,{1}\">",
        esc(mime),
        data
    );
}

fn image_markdown(m: &mut String, mime: &str, data: &str) {
    let _ = writeln!(m, "![image ({mime})](data:{mime};base64,{data})\n");
}

fn head_html(h: &mut String, b: &Block, role_title: &str, meta: Option<&str>) {
    let _ = write!(
        h,
        "<div class=\"entry-head\"><span class=\"role\">{}</span>",
        esc(role_title)
    );
    if let Some(m) = meta {
        let _ = write!(h, "<span class=\"model\">{}</span>", esc(m));
    }
    if let Some(t) = &b.time {
        let _ = write!(h, "<time datetime=\"{0}\">{0}</time>", esc(t));
    }
    let _ = write!(h, "<a class=\"id\" href=\"#entry-{0}\">{0}</a>", esc(&b.id));
    if let Some(l) = &b.label {
        let _ = write!(h, "<span class=\"label\" title=\"label\">{}</span>", esc(l));
    }
    h.push_str("</div>\n");
}

fn cut_html(h: &mut String, c: &Cut) {
    let _ = writeln!(h, "<pre>{}</pre>", esc(&c.text));
    if let Some(note) = cut_note(c) {
        let _ = writeln!(h, "<p class=\"truncated\">{}</p>", esc(&note));
    }
}

fn block_html(h: &mut String, b: &Block) {
    match &b.kind {
        Kind::Message {
            role,
            title,
            meta,
            parts,
            error,
        } => {
            let _ = writeln!(
                h,
                "<article class=\"message {role}\" id=\"entry-{0}\" data-entry-id=\"{0}\">",
                esc(&b.id)
            );
            head_html(h, b, title, meta.as_deref());
            for p in parts {
                part_html(h, p);
            }
            if let Some(e) = error {
                let _ = writeln!(h, "<p class=\"error\">{}</p>", esc(e));
            }
            h.push_str("</article>\n");
        }
        Kind::Note { class, title, body } => {
            let _ = writeln!(
                h,
                "<aside class=\"note {class}\" id=\"entry-{0}\" data-entry-id=\"{0}\">",
                esc(&b.id)
            );
            head_html(h, b, title, None);
            if let Some(body) = body.as_deref().filter(|s| !s.is_empty()) {
                let _ = writeln!(h, "<div class=\"md\">{}</div>", markdown_html(body));
            }
            h.push_str("</aside>\n");
        }
    }
}

fn part_html(h: &mut String, p: &Part) {
    match p {
        Part::Text(t) => {
            let _ = writeln!(h, "<div class=\"md\">{}</div>", markdown_html(t));
        }
        Part::Collapsed { summary, text } => {
            let _ = writeln!(h, "<details><summary>{}</summary>", esc(summary));
            cut_html(h, text);
            h.push_str("</details>\n");
        }
        Part::Link { anchor, text } => {
            let _ = writeln!(
                h,
                "<p class=\"link\"><a href=\"#{}\">{}</a></p>",
                esc(anchor),
                esc(text)
            );
        }
        Part::Thinking(t) => {
            let _ = writeln!(
                h,
                "<details class=\"thinking\"><summary>Thinking</summary><div class=\"md\">{}</div></details>",
                markdown_html(t)
            );
        }
        Part::Image { mime, data } => image_html(h, mime, data),
        Part::ToolCall {
            name,
            preview,
            args,
            result,
        } => {
            let (class, word) = status(result.as_ref());
            let _ = write!(
                h,
                "<details class=\"tool\" data-tool=\"{0}\"><summary><span class=\"tool-name\">{0}</span> ",
                esc(name)
            );
            if !preview.is_empty() {
                let _ = write!(h, "<code>{}</code> ", esc(preview));
            }
            let _ = writeln!(h, "<span class=\"status {class}\">{word}</span></summary>");
            if !args.is_empty() {
                h.push_str("<div class=\"args\">\n");
                for (k, c) in args {
                    if let Some(k) = k {
                        let _ = writeln!(h, "<div class=\"arg-name\">{}</div>", esc(k));
                    }
                    cut_html(h, c);
                }
                h.push_str("</div>\n");
            }
            if let Some(r) = result {
                let _ = writeln!(
                    h,
                    "<div class=\"result{}\"><div class=\"arg-name\">result</div>",
                    if r.is_error { " error" } else { "" }
                );
                for part in &r.parts {
                    match part {
                        ResultPart::Text(c) => cut_html(h, c),
                        ResultPart::Image { mime, data } => image_html(h, mime, data),
                    }
                }
                h.push_str("</div>\n");
            }
            h.push_str("</details>\n");
        }
    }
}

fn head_markdown(m: &mut String, b: &Block, title: &str, meta: Option<&str>) {
    let _ = write!(m, "### {title}");
    if let Some(x) = meta {
        let _ = write!(m, " · {x}");
    }
    if let Some(t) = &b.time {
        let _ = write!(m, " · {t}");
    }
    let _ = write!(m, " · `{}`", b.id);
    if let Some(l) = &b.label {
        let _ = write!(m, " · label **{}**", l.replace('\n', " "));
    }
    m.push_str("\n\n");
}

fn fenced(m: &mut String, info: &str, text: &str) {
    let f = fence(text);
    let _ = writeln!(m, "{f}{info}\n{}\n{f}\n", text.trim_end_matches('\n'));
}

fn cut_markdown(m: &mut String, c: &Cut) {
    fenced(m, "", &c.text);
    if let Some(note) = cut_note(c) {
        let _ = writeln!(m, "_{note}_\n");
    }
}

fn block_markdown(m: &mut String, b: &Block) {
    match &b.kind {
        Kind::Message {
            title,
            meta,
            parts,
            error,
            ..
        } => {
            head_markdown(m, b, title, meta.as_deref());
            for p in parts {
                part_markdown(m, p);
            }
            if let Some(e) = error {
                let _ = writeln!(m, "**Error:** {e}\n");
            }
        }
        Kind::Note { title, body, .. } => {
            head_markdown(m, b, title, None);
            if let Some(body) = body.as_deref().filter(|s| !s.is_empty()) {
                for line in body.lines() {
                    let _ = writeln!(m, "> {line}");
                }
                m.push('\n');
            }
        }
    }
}

fn part_markdown(m: &mut String, p: &Part) {
    match p {
        Part::Collapsed { summary, text } => {
            let _ = writeln!(m, "<details><summary>{}</summary>\n", esc(summary));
            cut_markdown(m, text);
            m.push_str("</details>\n\n");
        }
        Part::Link { anchor, text } => {
            let _ = writeln!(m, "[{}](#{anchor})\n", text.replace(['[', ']'], ""));
        }
        Part::Text(t) => {
            let _ = writeln!(m, "{}\n", t.trim_end());
        }
        Part::Thinking(t) => {
            let _ = writeln!(
                m,
                "<details><summary>Thinking</summary>\n\n{}\n\n</details>\n",
                t.trim_end()
            );
        }
        Part::Image { mime, data } => image_markdown(m, mime, data),
        Part::ToolCall {
            name,
            preview,
            args,
            result,
        } => {
            let (_, status) = status(result.as_ref());
            let _ = write!(m, "<details><summary>Tool call <b>{}</b>", esc(name));
            if !preview.is_empty() {
                let _ = write!(m, " <code>{}</code>", esc(preview));
            }
            let _ = writeln!(m, " — {status}</summary>\n");
            for (k, c) in args {
                if let Some(k) = k {
                    let _ = writeln!(m, "`{k}`:\n");
                }
                cut_markdown(m, c);
            }
            if let Some(r) = result {
                m.push_str("Result:\n\n");
                for part in &r.parts {
                    match part {
                        ResultPart::Text(c) => cut_markdown(m, c),
                        ResultPart::Image { mime, data } => image_markdown(m, mime, data),
                    }
                }
            }
            m.push_str("</details>\n\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::pi::format::LineSpan;
    use std::borrow::Cow;

    /// A session held in memory, read the way `storage` reads a file.
    struct Mem {
        text: String,
    }

    impl LineSource for Mem {
        fn line(&self, span: LineSpan) -> std::io::Result<Cow<'_, [u8]>> {
            let start = span.offset as usize;
            Ok(Cow::Borrowed(
                &self.text.as_bytes()[start..start + span.len as usize],
            ))
        }
    }

    fn tree_of(text: &str) -> Tree {
        use crate::core::tree::Mode;
        use crate::dialect::pi::format::{Expect, Line, parse_line};
        let mut offset = 0u64;
        let mut tree: Option<Tree> = None;
        for (i, l) in text.lines().enumerate() {
            let span = LineSpan {
                line: i as u32 + 1,
                offset,
                len: l.len() as u32,
            };
            offset += l.len() as u64 + 1;
            match &mut tree {
                None => {
                    let Ok(Line::Header(h)) = parse_line(l.as_bytes(), span, Expect::Header) else {
                        panic!("bad header")
                    };
                    tree = Some(Tree::new(h, Mode::Strict));
                }
                Some(t) => {
                    let Ok(Line::Entry(e)) =
                        parse_line(l.as_bytes(), span, Expect::Entry { version: 3 })
                    else {
                        panic!("bad entry {l}")
                    };
                    t.push(e).unwrap();
                }
            }
        }
        let mut t = tree.unwrap();
        t.settle().unwrap();
        t
    }

    const SESSION: &str = concat!(
        r#"{"type":"session","id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","version":3}"#,
        "\n",
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"Use key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 <script>alert(1)</script>"},{"type":"image","mimeType":"image/png","data":"iVBORw0KGgo="}]}}"#,
        "\n",
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","provider":"anthropic","model":"claude","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Running **it**"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls -la"}}]}}"#,
        "\n",
        r#"{"type":"message","id":"c","parentId":"b","timestamp":"2025-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","isError":false,"content":[{"type":"text","text":"0123456789abcdefghijXYZ"}]}}"#,
        "\n",
        r#"{"type":"label","id":"d","parentId":"c","timestamp":"2025-01-01T00:00:04.000Z","targetId":"b","label":"here"}"#,
        "\n",
        r#"{"type":"compaction","id":"e","parentId":"d","timestamp":"2025-01-01T00:00:05.000Z","summary":"Did things","firstKeptEntryId":"b","tokensBefore":1234}"#,
        "\n",
    );

    fn run(format: Format, redact: bool) -> Exported {
        let tree = tree_of(SESSION);
        let leaf = tree.default_leaf();
        export(
            &tree,
            leaf,
            &Mem {
                text: SESSION.into(),
            },
            &Options {
                format,
                redact,
                max_output_bytes: 10,
                file_name: "s.jsonl".into(),
            },
        )
        .unwrap()
    }

    #[test]
    fn html_shows_the_branch_collapsed_redacted_and_escaped() {
        let e = run(Format::Html, true);
        let d = &e.document;
        assert_eq!((e.entries, e.messages, e.tool_calls), (5, 2, 1));
        assert_eq!((e.redactions, e.truncated, e.images), (1, 1, 1));
        assert!(d.contains("[REDACTED:anthropic-key]") && !d.contains("sk-ant-api03"));
        assert!(d.contains("&lt;script&gt;") && !d.contains("<script>"));
        assert!(d.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""));
        assert!(d.contains("<details class=\"thinking\">"));
        assert!(d.contains("<details class=\"tool\" data-tool=\"bash\">"));
        assert!(d.contains("<code>ls -la</code>"));
        assert!(d.contains("<pre>0123456789</pre>"));
        assert!(d.contains("… cut: 10 bytes of 23 bytes shown (1 lines in full)"));
        assert!(d.contains("<span class=\"label\" title=\"label\">here</span>"));
        assert!(d.contains("aside class=\"note compaction\""));
        assert!(d.contains("Redacted 1 string that look"));
        assert!(d.contains("prefers-color-scheme: dark"));
        // The tool result is shown inside its call, not again on its own.
        assert_eq!(d.matches("data-entry-id=\"c\"").count(), 0);
    }

    #[test]
    fn markdown_and_no_redact() {
        let e = run(Format::Markdown, false);
        let d = &e.document;
        assert_eq!(e.redactions, 0);
        assert!(d.contains("sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"));
        assert!(d.contains("### User · 2025-01-01T00:00:01.000Z · `a`"));
        assert!(d.contains("### Assistant · anthropic/claude"));
        assert!(d.contains("label **here**"));
        assert!(d.contains(
            "<details><summary>Tool call <b>bash</b> <code>ls -la</code> — ok</summary>"
        ));
        assert!(d.contains("> Did things"));
        assert!(d.contains("Redaction was off"));
    }

    #[test]
    fn fences_outgrow_backticks_and_links_are_defused() {
        assert_eq!(fence("a ```` b"), "`````");
        assert_eq!(fence("plain"), "```");
        let h =
            markdown_html("[x](javascript:alert(1)) ![i](https://example.com/a.png) <b>raw</b>");
        assert!(!h.contains("javascript:"), "{h}");
        assert!(!h.contains("<img"), "{h}");
        assert!(h.contains("&lt;b&gt;raw"), "{h}");
    }
}
