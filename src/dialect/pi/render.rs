//! Turns a [`Projection`] into the model's messages, reading each context entry's line
//! through a [`LineSource`]. Matches pi 1.6.0 `sessionEntryToContextMessages`,
//! `projectContextEntry` and the `create*Message` helpers in `messages.js`.
//!
//! A `message` entry's message is passed through byte-for-byte unless pi changes it
//! (null content, the version-2 `hookMessage` role, a context edit); only then is it
//! re-serialized, keeping key order (`{...message, content}` semantics).

use std::borrow::Cow;

use serde_json::value::RawValue;
use thiserror::Error;

use crate::core::ahead;
use crate::core::raw_object::{RawObject, raw_field};
use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::{Entry, EntryKind, LineSpan, MessageInfo, Role};
use crate::dialect::pi::projection::{ContextItem, Contribution, Projection};
use crate::dialect::pi::verbatim::Verbatim;
use crate::js::jsstr;
use crate::js::timestamp::js_time_of_raw;

pub use crate::core::source::LineSource;
use crate::core::source::{Buffered, LineBlock, line_blocks};

/// Why a message could not be rendered.
#[derive(Debug, Error)]
pub enum RenderError {
    /// The entry's line could not be read.
    #[error("cannot read line {line} (entry {id}): {source}")]
    Io {
        /// 1-based line number of the entry.
        line: u32,
        /// The entry's id.
        id: String,
        /// The read error.
        source: std::io::Error,
    },
    /// The caller's `emit` failed (writing the output, say); its error is passed on as is.
    #[error("{0}")]
    Emit(std::io::Error),
    /// The line no longer holds the entry it held when the tree was built.
    #[error("line {line} (entry {id}) changed since the session was read: {detail}")]
    Changed {
        /// 1-based line number of the entry.
        line: u32,
        /// The entry's id.
        id: String,
        /// What differs.
        detail: String,
    },
}

/// One rendered message and the entry it came from.
#[derive(Debug)]
pub struct RenderedMessage<'m> {
    /// The entry that produced the message.
    pub entry: NodeIdx,
    /// The message JSON, byte-faithful where pi passes it through (then as it lies in the
    /// line just read: nothing is copied).
    pub message: &'m RawValue,
}

/// Renders every message of `projection`, calling `emit` in order (so large contexts can
/// stream without being held in memory).
pub fn for_each_message(
    tree: &Tree,
    projection: &Projection,
    source: &dyn LineSource,
    mut emit: impl FnMut(RenderedMessage<'_>) -> std::io::Result<()>,
) -> Result<(), RenderError> {
    for item in &projection.items {
        item_messages(tree, item, source, &mut |message| {
            emit(RenderedMessage {
                entry: item.node,
                message,
            })
        })?;
    }
    Ok(())
}

/// How [`for_each_fragment`] renders a long context ahead of its writer.
#[derive(Clone, Copy, Debug)]
pub struct Ahead {
    /// Contexts whose entry lines add up to fewer bytes than this render in order on the
    /// calling thread.
    pub from_bytes: u64,
    /// A block ends before its lines would span more bytes of the file than this (a longer
    /// line is a block of its own).
    pub block_bytes: u64,
    /// A block holds this many context entries at most.
    pub block_items: usize,
    /// Blocks in flight (read and rendered ahead of the one being written) and their bytes
    /// of the file.
    pub limit: ahead::Limit,
}

/// The plan of every context document: contexts of 4 MiB of lines or more render ahead in
/// blocks of up to 256 KiB of the file, at most three blocks and 768 KiB of lines ahead
/// (a block is a copy of its messages; six ahead measured no faster).
pub const AHEAD: Ahead = Ahead {
    from_bytes: 4 << 20,
    block_bytes: 256 << 10,
    block_items: 1024,
    limit: ahead::Limit {
        items: 3,
        weight: 3 << 18,
    },
};

/// Renders every message of `projection` as the text of a JSON array's elements: `emit` is
/// called in order with fragments (UTF-8 JSON text) whose concatenation is the messages joined
/// by commas, each message as [`for_each_message`] renders it, and the sum of `measure` over
/// the fragment's messages (0 without one). A fragment brings the comma before its first
/// message, except the first fragment (so that a block is written in one piece). A message
/// the open placed in its line
/// ([`MessageInfo::verbatim`]) is copied from the line as written, without reading the line
/// as JSON again, while the line is unchanged.
///
/// A long context is cut into blocks of entries whose lines lie close together in the file;
/// each block is read in one [`LineSource::range`] and rendered (and measured) on the rayon
/// thread pool within `ahead.limit`, while `emit` runs on the calling thread
/// ([`ahead::in_order`]). A short context, or one rendered where the pool cannot help
/// ([`ahead::available`]), renders in order: a message, or the comma between two, per
/// fragment. Errors: [`for_each_message`]'s; the first in message order is returned (the
/// messages of the failing block before it are not emitted).
pub fn for_each_fragment(
    tree: &Tree,
    projection: &Projection,
    source: &(dyn LineSource + Sync),
    plan: Ahead,
    measure: Option<&Measure>,
    mut emit: impl FnMut(&[u8], u64) -> std::io::Result<()>,
) -> Result<(), RenderError> {
    let blocks = if ahead::available() {
        blocks(tree, &projection.items, plan)
    } else {
        Vec::new()
    };
    let bytes: u64 = blocks.iter().map(|b| b.len as u64).sum();
    let mut first = true;
    if blocks.len() < 2 || bytes < plan.from_bytes {
        for item in &projection.items {
            item_texts(tree, item, source, &mut |m| {
                if !std::mem::take(&mut first) {
                    emit(b",", 0)?;
                }
                emit(m, measured(measure, m))
            })?;
        }
        return Ok(());
    }
    let mut next = blocks.iter();
    ahead::in_order(
        &mut emit,
        plan.limit,
        |_| Ok(next.next().map(|b| (b, b.len))),
        &|block: &LineBlock| {
            let items = &projection.items[block.items.clone()];
            render_block(tree, items, block, source, measure)
        },
        |emit, rendered| {
            let (fragment, measured) = rendered?;
            if fragment.is_empty() {
                return Ok(());
            }
            // Every message of a block comes after a comma.
            let text = if std::mem::take(&mut first) {
                fragment.get(1..).unwrap_or_default()
            } else {
                &fragment[..]
            };
            emit(text, measured).map_err(RenderError::Emit)
        },
    )
}

/// What [`for_each_fragment`] measures each message by (its JSON text): the context's token
/// estimate, say.
pub type Measure = dyn Fn(&str) -> u64 + Sync;

/// `measure` of the message `text` (0 when there is nothing to measure by). Every message is
/// UTF-8: as read from a line of UTF-8 ([`Verbatim`](crate::dialect::pi::verbatim::Verbatim)) or as
/// rendered.
fn measured(measure: Option<&Measure>, text: &[u8]) -> u64 {
    measure.map_or(0, |measure| std::str::from_utf8(text).map_or(0, measure))
}

/// Cuts `items` into blocks of lines ([`line_blocks`]) of at most `plan.block_bytes` of the
/// file and `plan.block_items` entries.
fn blocks(tree: &Tree, items: &[ContextItem], plan: Ahead) -> Vec<LineBlock> {
    line_blocks(
        items.iter().map(|item| tree.node(item.node).entry.span),
        plan.block_bytes,
        plan.block_items,
    )
}

/// The messages of one block's entries joined by commas, and the sum of their measures, read
/// through one range read of the block (line by line when the source cannot read ranges or the
/// range read fails: the line that cannot be read is then named).
fn render_block(
    tree: &Tree,
    items: &[ContextItem],
    block: &LineBlock,
    source: &(dyn LineSource + Sync),
    measure: Option<&Measure>,
) -> Result<(Vec<u8>, u64), RenderError> {
    let lines = Buffered::read(source, block);
    let mut fragment = Vec::with_capacity(block.len);
    let mut sum = 0;
    for item in items {
        item_texts(tree, item, &lines, &mut |m| {
            fragment.push(b',');
            fragment.extend_from_slice(m);
            sum += measured(measure, m);
            Ok(())
        })?;
    }
    Ok((fragment, sum))
}

/// Calls `emit` with the JSON text of each message `item` contributes, as [`item_messages`]
/// renders them. A message pi passes through whose place in the line the open noted
/// ([`MessageInfo::verbatim`]) is taken from the line as written, without reading the line as
/// JSON again, when the line is still the line read (else as `item_messages` renders it,
/// which reports a changed line).
fn item_texts(
    tree: &Tree,
    item: &ContextItem,
    source: &dyn LineSource,
    emit: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<(), RenderError> {
    texts_placed_by(tree, item, source, Verbatim::message, emit)
}

/// [`item_texts`] for an entry whose line the caller holds as read (the reader, while it reads
/// the file): the messages `item` contributes, rendered from `line` alone, without a
/// fingerprint check of a message placed in it. Errors: [`item_messages`]'s, and
/// [`RenderError::Io`] when rendering would need any other line.
pub fn item_texts_in_read_line(
    tree: &Tree,
    item: &ContextItem,
    line: &[u8],
    emit: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<(), RenderError> {
    let source = ReadLine {
        span: tree.node(item.node).entry.span,
        line,
    };
    texts_placed_by(tree, item, &source, Verbatim::message_in_read_line, emit)
}

/// [`item_texts`], a placed message taken from its line by `placed`.
fn texts_placed_by(
    tree: &Tree,
    item: &ContextItem,
    source: &dyn LineSource,
    placed: for<'l> fn(&Verbatim, &'l [u8]) -> Option<&'l [u8]>,
    emit: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<(), RenderError> {
    let entry = &tree.node(item.node).entry;
    if let EntryKind::Message(info) = &entry.kind
        && passes_through(item, info)
        && let Some(verbatim) = info.verbatim
        && let Ok(line) = source.line(entry.span)
        && let Some(message) = placed(&verbatim, &line)
    {
        return emit(message).map_err(RenderError::Emit);
    }
    item_messages(tree, item, source, &mut |m| emit(m.get().as_bytes()))
}

/// One line as the reader holds it: the only line it serves.
struct ReadLine<'l> {
    span: LineSpan,
    line: &'l [u8],
}

impl LineSource for ReadLine<'_> {
    fn line(&self, span: LineSpan) -> std::io::Result<Cow<'_, [u8]>> {
        if span == self.span {
            Ok(Cow::Borrowed(self.line))
        } else {
            Err(std::io::Error::other(format!(
                "line {} is not the line at hand",
                span.line
            )))
        }
    }
}

/// Calls `emit` with each message `item` contributes, as [`render_item`] renders them; a
/// message pi passes through unchanged (the common case) is handed over where it lies in its
/// line, not copied into a message of its own. Errors: [`render_item`]'s, and `emit`'s as
/// [`RenderError::Emit`].
pub fn item_messages(
    tree: &Tree,
    item: &ContextItem,
    source: &dyn LineSource,
    emit: &mut dyn FnMut(&RawValue) -> std::io::Result<()>,
) -> Result<(), RenderError> {
    let entry = &tree.node(item.node).entry;
    if let EntryKind::Message(info) = &entry.kind
        && passes_through(item, info)
    {
        let bytes = read_line(tree, item.node, source)?;
        let text = utf8_lossy(&bytes);
        return emit(message_of(entry, &text)?).map_err(RenderError::Emit);
    }
    for message in render_item(tree, item, source)? {
        emit(&message).map_err(RenderError::Emit)?;
    }
    Ok(())
}

/// True when pi passes the message of `item` (a `message` entry described by `info`) to the
/// model as written: no context edit replaces its content, its content is present, and it is
/// not a version-2 `hookMessage` (matches pi 1.6.0 `projectContextEntry`).
fn passes_through(item: &ContextItem, info: &MessageInfo) -> bool {
    matches!(item.contribution, Contribution::Message)
        && item.edit.is_none()
        && !(info.content_missing || info.role == Role::HookMessage)
}

/// The line of `node`'s entry. Errors: [`RenderError::Io`] naming the entry's line and id.
pub fn read_line<'s>(
    tree: &Tree,
    node: NodeIdx,
    source: &'s dyn LineSource,
) -> Result<Cow<'s, [u8]>, RenderError> {
    let entry = &tree.node(node).entry;
    source.line(entry.span).map_err(|source| RenderError::Io {
        line: entry.span.line,
        id: entry.id.to_string(),
        source,
    })
}

/// The `message` of `entry`'s line `text`, as written. Errors: [`RenderError::Changed`] when
/// the line is no longer a JSON object with a message.
fn message_of<'t>(entry: &Entry, text: &'t str) -> Result<&'t RawValue, RenderError> {
    raw_field(text, "message")
        .map_err(|e| changed(entry, &e))?
        .ok_or_else(|| changed(entry, "the message is missing"))
}

/// The line of `node`'s entry parsed as JSON, lone surrogates kept as [`jsstr`] reads them.
/// Errors: [`RenderError::Io`], and [`RenderError::Changed`] when the line is no JSON now.
pub fn line_value(
    tree: &Tree,
    node: NodeIdx,
    source: &dyn LineSource,
) -> Result<serde_json::Value, RenderError> {
    let bytes = read_line(tree, node, source)?;
    jsstr::parse_value(&bytes).map_err(|e| changed(&tree.node(node).entry, &e.to_string()))
}

/// The content blocks of a line's `message` (none when its content is a string or absent).
pub fn content_blocks(line: &serde_json::Value) -> impl Iterator<Item = &serde_json::Value> {
    line.get("message")
        .and_then(|m| m.get("content"))
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
}

/// [`RenderError::Changed`] for `entry`'s line.
pub fn changed(entry: &Entry, detail: &str) -> RenderError {
    RenderError::Changed {
        line: entry.span.line,
        id: entry.id.to_string(),
        detail: detail.to_owned(),
    }
}

/// `String::from_utf8_lossy`, validating with `str::from_utf8` first: that checks a valid line
/// (nearly every line) several bytes at a time, where the lossy decoder goes byte by byte.
fn utf8_lossy(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// [`render_item`]'s messages read as `JSON.parse` reads them. Errors: those of
/// [`render_item`], and [`RenderError::Changed`] for a message that is no JSON.
pub fn item_values(
    tree: &Tree,
    item: &ContextItem,
    source: &dyn LineSource,
) -> Result<Vec<serde_json::Value>, RenderError> {
    let entry = &tree.node(item.node).entry;
    render_item(tree, item, source)?
        .iter()
        .map(|raw| {
            jsstr::parse_value(raw.get().as_bytes()).map_err(|e| changed(entry, &e.to_string()))
        })
        .collect()
}

/// The messages one context entry contributes (zero, one, or two for a compaction with a
/// `systemMessage` checkpoint).
pub fn render_item(
    tree: &Tree,
    item: &ContextItem,
    source: &dyn LineSource,
) -> Result<Vec<Box<RawValue>>, RenderError> {
    let entry = &tree.node(item.node).entry;
    let changed = |detail: &str| changed(entry, detail);
    if let Contribution::Nothing(_) = item.contribution {
        return Ok(Vec::new());
    }
    let bytes = read_line(tree, item.node, source)?;
    if let EntryKind::Message(info) = &entry.kind
        && passes_through(item, info)
    {
        return Ok(vec![message_of(entry, &utf8_lossy(&bytes))?.to_owned()]);
    }
    let edit_bytes = match item.edit {
        Some(e) => Some(read_line(tree, e, source)?),
        None => None,
    };
    // pi decodes the file as UTF-8 with U+FFFD for invalid bytes before `JSON.parse` sees it.
    let edit_text = edit_bytes.as_deref().map(utf8_lossy);
    let edit = match &edit_text {
        Some(b) => Some(replacement(b.as_bytes()).map_err(|d| changed(&d))?),
        None => None,
    };
    let text = utf8_lossy(&bytes);
    let mut line = RawObject::parse_text(&text).map_err(|e| changed(&e))?;
    let messages = match item.contribution {
        Contribution::Message => {
            let EntryKind::Message(info) = &entry.kind else {
                return Err(changed("not a message entry"));
            };
            let raw = line
                .take("message")
                .ok_or_else(|| changed("the message is missing"))?;
            // pi changes this message (see `passes_through`): `{...message, content}`.
            let mut message = RawObject::parse_text(raw.get()).map_err(|e| changed(&e))?;
            let role = match &info.role {
                Role::HookMessage => {
                    message.set("role", raw_json("\"custom\"".into()));
                    &Role::Custom
                }
                r => r,
            };
            let content_missing = message.get("content").is_none_or(|c| c.get() == "null");
            match role {
                Role::System if content_missing => message.set("content", raw_json("\"\"".into())),
                Role::User | Role::Assistant | Role::ToolResult if content_missing => {
                    message.set("content", raw_json("[]".into()))
                }
                _ => {}
            }
            apply_edit(&mut message, role, edit.as_ref());
            vec![message.to_raw()]
        }
        Contribution::CustomMessage => {
            let mut m = RawObject::new();
            m.set("role", raw_json("\"custom\"".into()));
            if let Some(v) = line.take("customType") {
                m.put("customType", v);
            }
            match line.take("content") {
                Some(v) if v.get() != "null" => m.put("content", v),
                _ => m.set("content", raw_json("[]".into())),
            }
            for key in ["display", "details"] {
                if let Some(v) = line.take(key) {
                    m.put(key, v);
                }
            }
            m.set("timestamp", raw_json(js_time(&line)));
            apply_edit(&mut m, &Role::Custom, edit.as_ref());
            vec![m.to_raw()]
        }
        Contribution::BranchSummary => {
            vec![summary_message(
                "branchSummary",
                ["summary", "fromId"],
                &mut line,
            )]
        }
        Contribution::CompactionSummary {
            with_system_message,
        } => {
            let mut out = Vec::with_capacity(2);
            if with_system_message && let Some(system) = line.take("systemMessage") {
                out.push(system.into_owned());
            }
            out.push(summary_message(
                "compactionSummary",
                ["summary", "tokensBefore"],
                &mut line,
            ));
            out
        }
        Contribution::Nothing(_) => Vec::new(),
    };
    Ok(messages)
}

/// A context edit's replacement content: `Some(raw content)`, or `None` when absent.
struct Replacement(Option<Box<RawValue>>);

fn replacement(edit_line: &[u8]) -> Result<Replacement, String> {
    let mut line = RawObject::parse(edit_line)?;
    let Some(r) = line.take("replacement") else {
        return Ok(Replacement(None));
    };
    if !r.get().starts_with('{') {
        return Ok(Replacement(None));
    }
    let mut r = RawObject::parse_text(r.get())?;
    Ok(Replacement(r.take("content").map(Cow::into_owned)))
}

/// pi's `projectContextEntry` for a non-null replacement: user, assistant, toolResult and
/// custom messages get the replacement content (a string becomes one text block for
/// assistant and toolResult); other roles are unchanged.
fn apply_edit(message: &mut RawObject<'_>, role: &Role, edit: Option<&Replacement>) {
    let Some(Replacement(content)) = edit else {
        return;
    };
    if !matches!(
        role,
        Role::User | Role::Assistant | Role::ToolResult | Role::Custom
    ) {
        return;
    }
    match content {
        None => {
            message.take("content");
        }
        Some(text)
            if text.get().starts_with('"')
                && matches!(role, Role::Assistant | Role::ToolResult) =>
        {
            message.set(
                "content",
                raw_json(format!("[{{\"type\":\"text\",\"text\":{}}}]", text.get())),
            );
        }
        Some(v) => message.set("content", v.clone()),
    }
}

/// `new Date(entry.timestamp).getTime()` as JSON text (`null` for NaN).
/// The message pi makes of a summary entry's `line`: `role`, the line's `keys` as written (those
/// present), and its time.
fn summary_message(role: &str, keys: [&str; 2], line: &mut RawObject<'_>) -> Box<RawValue> {
    let mut m = RawObject::new();
    m.set("role", raw_json(format!("\"{role}\"")));
    for key in keys {
        if let Some(v) = line.take(key) {
            m.put(key, v);
        }
    }
    m.set("timestamp", raw_json(js_time(line)));
    m.to_raw()
}

fn js_time(line: &RawObject<'_>) -> String {
    js_time_of_raw(line.get("timestamp")).map_or_else(|| "null".to_owned(), |ms| ms.to_string())
}

/// Wraps JSON text we built ourselves from valid parts.
fn raw_json(json: String) -> Box<RawValue> {
    RawValue::from_string(json).unwrap_or_else(|_| RawValue::NULL.to_owned())
}
