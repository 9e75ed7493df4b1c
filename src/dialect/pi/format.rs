//! The pi session line format: the header, the entry types of pi 1.6.0, and the
//! probe that reads one line into the small facts the tree and the projection need.
//!
//! A line is never re-serialized: the probe borrows from the line's bytes and keeps
//! only ids, parents, types, roles and a few small fields. Message bodies stay in the
//! file (see `storage`), so unknown entry types and unknown fields survive untouched.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use ecow::EcoString;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

pub use crate::core::diagnostics::{LineProblem, ProblemKind};
pub use crate::core::ids::{EntryId, JsTime, LineSpan};
use crate::core::recent::{self, Recent};
use crate::dialect::pi::verbatim::{Keyed, MessageKeys, Verbatim};
use crate::js::jsstr;
use crate::js::timestamp::js_time_of_raw;

/// The current pi session format version (pi 1.6.0 `CURRENT_SESSION_VERSION`).
pub const CURRENT_VERSION: u32 = 3;

/// The session header (line 1): `{"type":"session","version"?,"id","timestamp","cwd","parentSession"?}`.
#[derive(Clone, Debug)]
pub struct Header {
    /// The session id.
    pub id: String,
    /// Format version; files without one are version 1.
    pub version: u32,
    /// The working directory the session ran in, if the header names one.
    pub cwd: Option<String>,
    /// The header line exactly as stored.
    pub raw: Box<RawValue>,
    /// Where the header line is.
    pub span: LineSpan,
}

/// A message role. `HookMessage` is version 2's name for `Custom` (in a file of version 3 or
/// later, `hookMessage` is a role like any other: [`Role::Other`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// `user`.
    User,
    /// `assistant`.
    Assistant,
    /// `toolResult`.
    ToolResult,
    /// `bashExecution`.
    BashExecution,
    /// `custom` (version 3; version 2 wrote `hookMessage`).
    Custom,
    /// `system`.
    System,
    /// `branchSummary`.
    BranchSummary,
    /// `compactionSummary`.
    CompactionSummary,
    /// `hookMessage` in a file of version 2 or older, which pi migrates to `custom`.
    HookMessage,
    /// Any other role, or a non-string role (`""` when missing). Boxed twice so that the
    /// role is 16 bytes in every message's node (a `Box<str>` is a wide pointer); such roles
    /// are rare.
    #[allow(clippy::redundant_allocation)]
    Other(Box<Box<str>>),
}

impl Role {
    /// The role of a message in a file of `version`. pi 1.6.0 renames `hookMessage` to `custom`
    /// only when it migrates a file older than version 3 (`migrateV2ToV3`); a later file's
    /// `hookMessage` passes through as written.
    fn parse(raw: Option<&RawValue>, version: u32) -> Self {
        match raw.and_then(raw_str).as_deref() {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("toolResult") => Role::ToolResult,
            Some("bashExecution") => Role::BashExecution,
            Some("custom") => Role::Custom,
            Some("system") => Role::System,
            Some("branchSummary") => Role::BranchSummary,
            Some("compactionSummary") => Role::CompactionSummary,
            Some("hookMessage") if version < 3 => Role::HookMessage,
            Some(other) => Role::Other(Box::new(other.into())),
            None => Role::Other(Box::default()),
        }
    }

    /// The role's wire name.
    pub fn as_str(&self) -> &str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "toolResult",
            Role::BashExecution => "bashExecution",
            Role::Custom => "custom",
            Role::System => "system",
            Role::BranchSummary => "branchSummary",
            Role::CompactionSummary => "compactionSummary",
            Role::HookMessage => "hookMessage",
            Role::Other(s) => s,
        }
    }
}

/// A tool call's id as the tree holds it: inline up to 15 bytes, shared beyond, so the
/// tool pairing check keeps clones of the ids it has seen without copying them.
pub type ToolCallId = EcoString;

/// A model as pi names it: `{provider, modelId}` with absent fields omitted (raw JSON, `None`
/// when absent). An assistant message's `provider` and `model`, a `model_change`'s `provider`
/// and `modelId`, and the session model of a projection.
#[derive(Clone, Debug)]
pub struct ModelRef {
    /// `provider` as raw JSON; `None` when absent.
    pub provider: Option<SharedRaw>,
    /// `modelId` (or an assistant message's `model`) as raw JSON; `None` when absent.
    pub model_id: Option<SharedRaw>,
}

/// The small facts of a `message` entry: 56 bytes (checked below), as every entry of a long
/// session is one.
#[derive(Clone, Debug)]
pub struct MessageInfo {
    /// The role (already migrated: version-2 `hookMessage` is read as `custom` by the projection).
    pub role: Role,
    /// True when `content` is `null` or absent (pi substitutes `[]` or `""`).
    pub content_missing: bool,
    /// An assistant message's `provider` and `model`, which set the session model (`None` for
    /// other roles). Shared by the messages that name the same pair.
    pub model: Option<Arc<ModelRef>>,
    /// The message's `toolCallId` (when it is a string; first, and only then), followed for
    /// an assistant message by the ids of its `toolCall` content blocks. Read them with
    /// [`MessageInfo::tool_call_id`] and [`MessageInfo::tool_call_ids`].
    tool_ids: ToolIds,
    /// `tool_ids` starts with the `toolCallId`.
    has_tool_call_id: bool,
    /// Where the message lies in the entry's line, for rendering it as written without
    /// reading the line again (`None` when the probe could not place it; see [`Verbatim`]).
    pub verbatim: Option<Verbatim>,
}

// Every entry of a long session is nearly always a message: its size is its node's size.
const _: () = assert!(std::mem::size_of::<MessageInfo>() == 56);

/// A message's tool ids. Nearly every message has none or one (a tool result's `toolCallId`,
/// a call of an assistant message), held without an allocation of their own.
#[derive(Clone, Debug, Default)]
enum ToolIds {
    #[default]
    None,
    One(ToolCallId),
    Many(Box<[ToolCallId]>),
}

impl ToolIds {
    fn as_slice(&self) -> &[ToolCallId] {
        match self {
            ToolIds::None => &[],
            ToolIds::One(id) => std::slice::from_ref(id),
            ToolIds::Many(ids) => ids,
        }
    }
}

impl FromIterator<ToolCallId> for ToolIds {
    fn from_iter<I: IntoIterator<Item = ToolCallId>>(iter: I) -> Self {
        let mut iter = iter.into_iter();
        match (iter.next(), iter.next()) {
            (None, _) => ToolIds::None,
            (Some(one), None) => ToolIds::One(one),
            (Some(a), Some(b)) => ToolIds::Many([a, b].into_iter().chain(iter).collect()),
        }
    }
}

impl MessageInfo {
    /// Ids of the `toolCall` content blocks of an assistant message (empty for other roles).
    pub fn tool_call_ids(&self) -> &[ToolCallId] {
        match self
            .tool_ids
            .as_slice()
            .get(usize::from(self.has_tool_call_id)..)
        {
            Some(calls) if self.role == Role::Assistant => calls,
            _ => &[],
        }
    }
    /// The message's `toolCallId` (a tool result's call), when it is a string.
    pub fn tool_call_id(&self) -> Option<&ToolCallId> {
        self.tool_ids
            .as_slice()
            .first()
            .filter(|_| self.has_tool_call_id)
    }
}

/// What kind of entry a line is, with the fields the tree and projection need.
#[derive(Clone, Debug)]
pub enum EntryKind {
    /// A `message` entry.
    Message(MessageInfo),
    /// A `model_change` entry, which sets the session model.
    ModelChange {
        /// `provider` as raw JSON, `None` when absent.
        provider: Option<SharedRaw>,
        /// `modelId` as raw JSON, `None` when absent.
        model_id: Option<SharedRaw>,
    },
    /// `level` is `None` when the field is absent (pi then reports no thinking level).
    ThinkingLevelChange {
        /// The `thinkingLevel` field as raw JSON.
        level: Option<SharedRaw>,
    },
    /// A `compaction` entry.
    Compaction {
        /// `firstKeptEntryId`: where the kept messages start on the path (`None` when absent or not
        /// a string).
        first_kept_entry_id: Option<EntryId>,
        /// JavaScript truthiness of the entry's `systemMessage`.
        has_system_message: bool,
        /// A version-1 compaction's `firstKeptEntryIndex` (a position among the parsed lines),
        /// which the reader resolves into `first_kept_entry_id` once the lines are read.
        v1_first_kept_index: Option<u32>,
    },
    /// `has_summary` is JavaScript truthiness of `summary`: an empty summary projects nothing.
    BranchSummary {
        /// JavaScript truthiness of `summary`.
        has_summary: bool,
    },
    /// A `custom` entry (extension state; never in the context).
    Custom,
    /// A `custom_message` entry (an extension's message in the context).
    CustomMessage,
    /// `label` is `None` for an empty or absent label, which clears the target's label.
    Label {
        /// The labelled entry's id (`targetId`).
        target_id: Option<EntryId>,
        /// The label text.
        label: Option<Box<str>>,
    },
    /// A `session_info` entry; the latest one names the session.
    SessionInfo {
        /// The session name (`None` when absent or not a string).
        name: Option<Box<str>>,
    },
    /// `omits` is true for `replacement: null`; `tool_call_ids` are those in the replacement content.
    ContextEdit {
        /// The entry whose message is replaced or omitted (`targetId`).
        target_id: Option<EntryId>,
        /// True for `replacement: null`.
        omits: bool,
        /// Tool-call ids in the replacement content.
        tool_call_ids: Box<[ToolCallId]>,
    },
    /// A `usage` entry (never in the context).
    Usage,
    /// A type sessiond does not know; kept and passed through untouched.
    Other(Box<str>),
    /// An entry without a string `type`, which pi keeps and never projects (only a lenient
    /// read keeps one; see [`Line::Irregular`]). Its type name is empty.
    Untyped,
}

impl EntryKind {
    /// The entry's `type` as written in the file.
    pub fn type_name(&self) -> &str {
        match self {
            EntryKind::Message(_) => "message",
            EntryKind::ModelChange { .. } => "model_change",
            EntryKind::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryKind::Compaction { .. } => "compaction",
            EntryKind::BranchSummary { .. } => "branch_summary",
            EntryKind::Custom => "custom",
            EntryKind::CustomMessage => "custom_message",
            EntryKind::Label { .. } => "label",
            EntryKind::SessionInfo { .. } => "session_info",
            EntryKind::ContextEdit { .. } => "context_edit",
            EntryKind::Usage => "usage",
            EntryKind::Other(name) => name,
            EntryKind::Untyped => "",
        }
    }

    /// The message role, for `message` entries.
    pub fn role(&self) -> Option<&Role> {
        match self {
            EntryKind::Message(m) => Some(&m.role),
            _ => None,
        }
    }
}

/// One entry of the tree: identity, parent, kind and where its line is.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The entry's `id` (assigned from the line number for version 1).
    pub id: EntryId,
    /// The `parentId` as written (`None` for `null` or absent).
    pub parent_id: Option<EntryId>,
    /// Type and the fields the tree and projection need.
    pub kind: EntryKind,
    /// `new Date(timestamp).getTime()` (read it with [`JsTime::ms`]: `None` where JavaScript
    /// gives `NaN`).
    pub time_ms: JsTime,
    /// Where the entry's line is in the file.
    pub span: LineSpan,
}

/// What one line turned out to be.
#[derive(Debug)]
pub enum Line {
    /// The session header (line 1).
    Header(Header),
    /// An entry.
    Entry(Entry),
    /// An object pi reads as an entry though it is not a well-formed one (no string `type`,
    /// or a `parentId` that is neither a string nor null), with what is wrong with it. The
    /// entry is what pi makes of it: an untyped entry contributes nothing to a context, and
    /// a `parentId` pi finds no entry by makes a root. Strict reads refuse the line; lenient
    /// ones keep the entry, as pi does, and note the problem.
    Irregular(Entry, Box<LineProblem>),
    /// A `type: "session"` line after the header; pi ignores those, and so do we.
    ExtraHeader,
}

/// How a line should be read: as the header, or as an entry of a file of `version`.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// Line 1: must be the `type: "session"` header.
    Header,
    /// A line after the header, in a file of `version`.
    Entry {
        /// The header's `version` (1 when absent).
        version: u32,
    },
}

/// Reads one line (without its newline). Pure; `span` only labels the result.
///
/// Version-1 entries get [`EntryId::for_v1_line`] ids; their parents are assigned by the
/// tree builder (version 1 is linear). Errors name the problem; the caller adds file and line.
pub fn parse_line(bytes: &[u8], span: LineSpan, expect: Expect) -> Result<Line, LineProblem> {
    if u32::try_from(bytes.len()).is_err() {
        // Spans store lengths as u32; no pi entry comes near 4 GiB.
        return Err(problem(
            ProblemKind::InvalidEntry,
            "the line is longer than 4 GiB",
        ));
    }
    // Any depth is read, as JSON.parse reads it: the probe skips what it does not read without
    // recursion, and a `Value` made of the line holds the part deeper than
    // [`jsstr::VALUE_DEPTH`] as text.
    // A line of valid UTF-8 (every line pi writes) is checked once here and then read as
    // text, so the probe's fields are not checked again one by one; any other line is read as
    // bytes, exactly as before (serde_json skips unread strings without checking them).
    // Only a line of valid UTF-8 has its message placed (rendering passes it on as bytes).
    let probed = match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str::<MaybeObject<Keyed<LineProbe<'_>>>>(text),
        Err(_) => serde_json::from_slice::<MaybeObject<LineProbe<'_>>>(bytes).map(|p| match p {
            MaybeObject::Object(fields) => MaybeObject::Object(Keyed {
                fields,
                keys: MessageKeys::Lost,
            }),
            MaybeObject::NotObject => MaybeObject::NotObject,
        }),
    };
    match probed {
        Ok(MaybeObject::Object(Keyed { fields, keys })) => {
            parse_probe(fields, keys, RawText::File, bytes, span, expect)
        }
        Ok(MaybeObject::NotObject) => Err(problem(
            ProblemKind::NotAnObject,
            "the line is JSON but not an object",
        )),
        Err(e) => match as_the_probe_reads(bytes) {
            // `JSON.parse` lets the last of duplicate keys win, and pi passes on content of
            // any type; the probe refuses duplicates among the fields it reads and content
            // that is neither a string nor an array, so retry on a copy that reads as pi does.
            Some(deduped) => match serde_json::from_slice::<LineProbe<'_>>(&deduped) {
                Ok(probe) => parse_probe(
                    probe,
                    MessageKeys::Lost,
                    RawText::Decoded,
                    bytes,
                    span,
                    expect,
                ),
                Err(e) => Err(problem(
                    ProblemKind::InvalidEntry,
                    format!("the entry's fields cannot be read: {}", in_line(&e)),
                )),
            },
            None => Err(classify_json_error(bytes, e)),
        },
    }
}

/// The line as `JSON.parse` reads it, in a shape the probe reads: duplicate keys collapsed
/// (first position, last value, at every depth), and a message's or a replacement's `content`
/// that is neither a string, an array nor `null` (pi passes an object, a number or a boolean
/// on as it is) made an empty array, which is what the probe makes of it: content without
/// tool calls. Rendering reads the message from the file, so the content is passed on as
/// written. `None` when the line is not a JSON object.
fn as_the_probe_reads(bytes: &[u8]) -> Option<Vec<u8>> {
    use serde_json::Value;
    let Ok(Value::Object(mut line)) = jsstr::parse_value(bytes) else {
        return None;
    };
    for key in ["message", "replacement"] {
        if let Some(Value::Object(holder)) = line.get_mut(key)
            && let Some(content) = holder.get_mut("content")
            && matches!(
                content,
                Value::Object(_) | Value::Number(_) | Value::Bool(_)
            )
        {
            *content = Value::Array(Vec::new());
        }
    }
    // Decoded strings hold lone surrogates as MARK pairs, which the probe reads back as such.
    serde_json::to_vec(&line).ok()
}

/// What the probe's raw values are the text of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RawText {
    /// The line as the file holds it: a U+FDD0 in it is text ([`to_owned_raw`] escapes it).
    File,
    /// A serialization of the decoded line (the duplicate-key fallback): a U+FDD0 pair in it is a
    /// decoded lone surrogate, which output restores (see [`jsstr`]).
    Decoded,
}

/// The line read by the probe (`keys`: where its `message` key lies, see [`Verbatim::of`];
/// `text`: what the probe read).
fn parse_probe(
    probe: LineProbe<'_>,
    keys: MessageKeys,
    text: RawText,
    bytes: &[u8],
    span: LineSpan,
    expect: Expect,
) -> Result<Line, LineProblem> {
    let ty = probe.ty.and_then(raw_str);
    if ty.as_deref() == Some("session") {
        return match expect {
            Expect::Header => parse_header(&probe, bytes, span).map(Line::Header),
            Expect::Entry { .. } => Ok(Line::ExtraHeader),
        };
    }
    let version = match expect {
        Expect::Header => {
            return Err(problem(
                ProblemKind::MissingHeader,
                "the first line is not a session header",
            ));
        }
        Expect::Entry { version } => version,
    };
    // What makes the entry irregular (see [`Line::Irregular`]), if anything.
    let mut irregular = None;
    let (id, parent_id) = if version < 2 {
        (EntryId::for_v1_line(span.line), None)
    } else {
        let id = probe
            .id
            .and_then(raw_str)
            .ok_or_else(|| problem(ProblemKind::InvalidEntry, "the entry has no string \"id\""))?;
        let parent = match probe.parent_id {
            // pi tests `parentId` for truthiness, so an empty string is a root too.
            None => None,
            Some(raw) if raw.get() == "null" || raw.get() == "\"\"" => None,
            Some(raw) => match raw_str(raw) {
                Some(text) => Some(previous_or_new_id(&text)),
                None => {
                    // pi looks the value up among the ids, which are strings, and finds
                    // nothing (or, when it is falsy, does not look): the entry is a root.
                    irregular = Some(problem(
                        ProblemKind::InvalidEntry,
                        format!(
                            "\"parentId\" is {}, neither a string nor null",
                            js_type_name(raw)
                        ),
                    ));
                    None
                }
            },
        };
        let id = EntryId::new(id);
        remember_id(&id);
        (id, parent)
    };
    let share = |raw: &RawValue| match text {
        RawText::File => to_owned_raw(raw),
        RawText::Decoded => Arc::from(raw.to_owned()),
    };
    let Some(ty) = ty else {
        // pi compares `type` with the names it knows, so an entry without a string `type`
        // is kept, and is one of a type it does not know.
        let detail = match probe.ty {
            None => "the entry has no \"type\"".to_owned(),
            Some(raw) => format!(
                "the entry's \"type\" is {}, not a string",
                js_type_name(raw)
            ),
        };
        let entry = Entry {
            id,
            parent_id,
            kind: EntryKind::Untyped,
            time_ms: JsTime::new(js_time_of_raw(probe.timestamp)),
            span,
        };
        return Ok(Line::Irregular(
            entry,
            Box::new(problem(ProblemKind::InvalidEntry, detail)),
        ));
    };
    let kind = match &*ty {
        "message" => {
            let Some(MaybeObject::Object(m)) = probe.message else {
                return Err(problem(
                    ProblemKind::InvalidEntry,
                    "a message entry without a \"message\" object",
                ));
            };
            let role = Role::parse(m.role, version);
            let content_missing = matches!(m.content, Content::Missing);
            let result_id = m
                .tool_call_id
                .and_then(raw_str)
                .map(|id| recent_call_id(&id));
            let has_tool_call_id = result_id.is_some();
            let (model, calls) = match role {
                Role::Assistant => (
                    Some(shared_model(m.provider.map(share), m.model.map(share))),
                    remember_call_ids(m.content.into_tool_call_ids()),
                ),
                _ => (None, Vec::new()),
            };
            let tool_ids = result_id.into_iter().chain(calls).collect();
            MessageInfo {
                role,
                content_missing,
                model,
                tool_ids,
                has_tool_call_id,
                verbatim: Verbatim::of(bytes, keys),
            }
            .into()
        }
        "model_change" => EntryKind::ModelChange {
            provider: probe.provider.map(share),
            model_id: probe.model_id.map(share),
        },
        "thinking_level_change" => EntryKind::ThinkingLevelChange {
            level: probe.thinking_level.map(share),
        },
        "compaction" => EntryKind::Compaction {
            // Version 1 names the kept entry by index; the tree builder resolves it.
            first_kept_entry_id: probe
                .first_kept_entry_id
                .and_then(raw_str)
                .map(EntryId::new),
            has_system_message: probe.system_message.is_some_and(js_truthy),
            v1_first_kept_index: None,
        },
        "branch_summary" => EntryKind::BranchSummary {
            has_summary: probe.summary.is_some_and(js_truthy),
        },
        "custom" => EntryKind::Custom,
        "custom_message" => EntryKind::CustomMessage,
        "label" => EntryKind::Label {
            target_id: probe.target_id.and_then(raw_str).map(EntryId::new),
            label: probe.label.filter(|r| js_truthy(r)).map(display_text),
        },
        "session_info" => EntryKind::SessionInfo {
            name: probe.name.map(display_text),
        },
        "context_edit" => {
            let (omits, tool_call_ids) = match probe.replacement {
                None | Some(MaybeObject::NotObject) => (true, Box::default()),
                Some(MaybeObject::Object(r)) => {
                    (false, r.content.into_tool_call_ids().into_boxed_slice())
                }
            };
            EntryKind::ContextEdit {
                target_id: probe.target_id.and_then(raw_str).map(EntryId::new),
                omits,
                tool_call_ids,
            }
        }
        "usage" => EntryKind::Usage,
        other => EntryKind::Other(other.into()),
    };
    let entry = Entry {
        id,
        parent_id,
        kind,
        time_ms: JsTime::new(js_time_of_raw(probe.timestamp)),
        span,
    };
    Ok(match irregular {
        None => Line::Entry(entry),
        Some(p) => Line::Irregular(entry, Box::new(p)),
    })
}

/// The kind of a raw JSON value, as a message names it ("a number", "an object").
fn js_type_name(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

impl From<MessageInfo> for EntryKind {
    fn from(m: MessageInfo) -> Self {
        EntryKind::Message(m)
    }
}

thread_local! {
    /// The id of the entry this thread read last. Most entries are the child of the entry
    /// before them, so their `parentId` shares that id's allocation (ids are stored once).
    static LAST_ID: RefCell<Recent<EntryId>> = const { RefCell::new(Recent::new(1)) };
}

fn previous_or_new_id(text: &str) -> EntryId {
    recent::with(&LAST_ID, |last| last.find(|id| id.as_str() == text))
        .flatten()
        .unwrap_or_else(|| EntryId::new(text))
}

fn remember_id(id: &EntryId) {
    recent::with(&LAST_ID, |last| last.push(id.clone()));
}

/// The version-1 `firstKeptEntryIndex` of a compaction line, if it has one.
pub fn v1_first_kept_index(bytes: &[u8]) -> Option<usize> {
    #[derive(Deserialize)]
    struct P {
        #[serde(rename = "firstKeptEntryIndex")]
        index: Option<f64>,
    }
    let p: P = serde_json::from_slice(bytes).ok()?;
    p.index
        .filter(|i| i.fract() == 0.0 && *i >= 0.0)
        .map(|i| i as usize)
}

fn parse_header(
    probe: &LineProbe<'_>,
    bytes: &[u8],
    span: LineSpan,
) -> Result<Header, LineProblem> {
    let id = probe.id.and_then(raw_str).ok_or_else(|| {
        problem(
            ProblemKind::InvalidHeader,
            "the session header has no string \"id\"",
        )
    })?;
    let version = match probe.version {
        None => 1,
        Some(raw) => match raw.get().parse::<f64>() {
            Ok(v) if v >= 1.0 && v.fract() == 0.0 => v.min(f64::from(u32::MAX)) as u32,
            _ => {
                return Err(problem(
                    ProblemKind::InvalidHeader,
                    "the session header's \"version\" is not a positive integer",
                ));
            }
        },
    };
    let raw = std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| RawValue::from_string(s.to_owned()).ok())
        .ok_or_else(|| {
            problem(
                ProblemKind::InvalidJson,
                "the header is not valid UTF-8 JSON",
            )
        })?;
    Ok(Header {
        id: id.into_owned(),
        version,
        cwd: probe.cwd.and_then(raw_str).map(Cow::into_owned),
        raw,
        span,
    })
}

fn problem(kind: ProblemKind, detail: impl Into<String>) -> LineProblem {
    LineProblem {
        kind,
        detail: detail.into(),
    }
}

fn classify_json_error(bytes: &[u8], e: serde_json::Error) -> LineProblem {
    // A syntactically valid line can still fail the probe (a duplicate key among the fields
    // we read, say). Tell the two apart so the message is true.
    if serde_json::from_slice::<IgnoredAny>(bytes).is_ok() {
        problem(
            ProblemKind::InvalidEntry,
            format!("the entry's fields cannot be read: {}", in_line(&e)),
        )
    } else if bytes.starts_with("\u{FEFF}".as_bytes()) {
        // An editor's byte-order mark: `JSON.parse` refuses it as pi reads the line.
        problem(
            ProblemKind::InvalidJson,
            "invalid JSON: the line starts with a byte-order mark (U+FEFF), which JSON.parse \
             refuses; pi skips this line too",
        )
    } else {
        problem(
            ProblemKind::InvalidJson,
            format!("invalid JSON: {}", in_line(&e)),
        )
    }
}

/// A serde_json error located within the line ("... at column 12"): serde_json counts lines of
/// the text it was given, which is always 1 here and would contradict the file's line number.
fn in_line(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let message = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(m, _)| m);
    format!("{message} at column {}", e.column())
}

/// The text of a raw JSON string as `JSON.parse` reads it, or `None` for any other JSON value.
/// Lone surrogates are held as [`jsstr::MARK`] pairs (see [`jsstr`]).
pub fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    jsstr::decode_str(raw)
}

/// JavaScript truthiness of a raw JSON value.
pub fn js_truthy(raw: &RawValue) -> bool {
    match raw.get() {
        "null" | "false" | "\"\"" => false,
        // Rust reads JSON number text as JavaScript does (`1e400` is infinite, so truthy).
        t if t.starts_with(|c: char| c == '-' || c.is_ascii_digit()) => {
            t.parse::<f64>().is_ok_and(|n| n != 0.0)
        }
        _ => true,
    }
}

/// A string field's text, or the JSON text of a non-string value.
fn display_text(raw: &RawValue) -> Box<str> {
    raw_str(raw).map_or_else(|| raw.get().into(), |s| s.into())
}

/// Raw JSON shared between the entries that repeat it (provider, model and thinking level
/// names recur on every assistant message): cloning one costs no allocation.
pub type SharedRaw = Arc<RawValue>;

/// How many distinct small values [`to_owned_raw`] keeps per thread.
const INTERNED_MAX: usize = 64;
/// Values longer than this are not interned (provider and model names are short).
const INTERNED_LEN: usize = 128;

thread_local! {
    /// The small raw values read most recently on this thread, so that the thousands of
    /// messages naming the same provider and model share one allocation.
    static INTERNED: RefCell<Recent<SharedRaw>> = const { RefCell::new(Recent::new(INTERNED_MAX)) };
}

/// `raw` shared, as the file's JSON text, except that a literal U+FDD0 is written as its
/// escape ([`jsstr::escape_marks`]): a document restores decoded text around these values, and
/// must not read a noncharacter in them as a lone surrogate.
fn to_owned_raw(raw: &RawValue) -> SharedRaw {
    if let Cow::Owned(escaped) = jsstr::escape_marks(raw.get()) {
        return RawValue::from_string(escaped)
            .map_or_else(|_| Arc::from(raw.to_owned()), Arc::from);
    }
    let text = raw.get();
    let make = || Arc::from(raw.to_owned());
    if text.len() > INTERNED_LEN {
        return make();
    }
    recent::with(&INTERNED, |interned| {
        interned.find_or_insert(|r| r.get() == text, make)
    })
    .unwrap_or_else(make)
}

/// How many tool-call ids [`remember_call_ids`] keeps per thread.
const CALLS_MAX: usize = 16;

thread_local! {
    /// The tool-call ids of the assistant messages read most recently on this thread, so that
    /// the result answering a call shares its id's allocation.
    static RECENT_CALLS: RefCell<Recent<ToolCallId>> = const { RefCell::new(Recent::new(CALLS_MAX)) };
}

/// Notes an assistant message's tool-call ids for [`recent_call_id`]; returns them. Ids of
/// up to 15 bytes are held inline, so sharing them would save nothing.
fn remember_call_ids(ids: Vec<ToolCallId>) -> Vec<ToolCallId> {
    recent::with(&RECENT_CALLS, |recent| {
        for id in ids.iter().filter(|id| id.len() > 15) {
            recent.push(id.clone());
        }
    });
    ids
}

/// A tool result's `toolCallId`: the call's own id when it was read recently (no allocation),
/// else a new one.
fn recent_call_id(text: &str) -> ToolCallId {
    recent::with(&RECENT_CALLS, |recent| {
        recent.find(|id| id.as_str() == text)
    })
    .flatten()
    .unwrap_or_else(|| ToolCallId::from(text))
}

/// How many distinct model pairs [`shared_model`] keeps per thread.
const MODELS_MAX: usize = 16;

thread_local! {
    /// The model pairs read most recently on this thread, so that the thousands of assistant
    /// messages of a session share one [`ModelRef`].
    static MODELS: RefCell<Recent<Arc<ModelRef>>> = const { RefCell::new(Recent::new(MODELS_MAX)) };
}

/// The shared [`ModelRef`] of an assistant message. Its parts come from [`to_owned_raw`], so
/// a repeated pair is found by comparing pointers before text.
fn shared_model(provider: Option<SharedRaw>, model_id: Option<SharedRaw>) -> Arc<ModelRef> {
    let pair = ModelRef { provider, model_id };
    let same = |a: &Option<SharedRaw>, b: &Option<SharedRaw>| match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a.get() == b.get(),
        (None, None) => true,
        _ => false,
    };
    let is_pair =
        |m: &&Arc<ModelRef>| same(&m.provider, &pair.provider) && same(&m.model_id, &pair.model_id);
    match recent::with(&MODELS, |models| models.find(is_pair)).flatten() {
        Some(found) => found,
        None => {
            let shared = Arc::new(pair);
            recent::with(&MODELS, |models| models.push(shared.clone()));
            shared
        }
    }
}

// ---------------------------------------------------------------------------
// The probe: serde structs that borrow from the line and skip everything else.

/// A JSON value that may or may not be an object; non-objects are skipped, not errors.
enum MaybeObject<T> {
    Object(T),
    NotObject,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MaybeObject<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = MaybeObject<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(MaybeObject::Object)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeObject::NotObject)
            }
            crate::core::scalars::visit_scalars!(Self::Value, _ => MaybeObject::NotObject);
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
                d.deserialize_any(self)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Deserializes a field as its raw JSON text, so `null` stays distinguishable from absent.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct LineProbe<'a> {
    #[serde(rename = "type", borrow, default, deserialize_with = "present")]
    ty: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(rename = "parentId", borrow, default, deserialize_with = "present")]
    parent_id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    timestamp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<MaybeObject<MessageProbe<'a>>>,
    // header
    #[serde(borrow, default, deserialize_with = "present")]
    version: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    cwd: Option<&'a RawValue>,
    // model_change / thinking_level_change
    #[serde(borrow, default, deserialize_with = "present")]
    provider: Option<&'a RawValue>,
    #[serde(rename = "modelId", borrow, default, deserialize_with = "present")]
    model_id: Option<&'a RawValue>,
    #[serde(
        rename = "thinkingLevel",
        borrow,
        default,
        deserialize_with = "present"
    )]
    thinking_level: Option<&'a RawValue>,
    // compaction / branch_summary
    #[serde(
        rename = "firstKeptEntryId",
        borrow,
        default,
        deserialize_with = "present"
    )]
    first_kept_entry_id: Option<&'a RawValue>,
    #[serde(
        rename = "systemMessage",
        borrow,
        default,
        deserialize_with = "present"
    )]
    system_message: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    summary: Option<&'a RawValue>,
    // label / session_info / context_edit
    #[serde(rename = "targetId", borrow, default, deserialize_with = "present")]
    target_id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    label: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    name: Option<&'a RawValue>,
    #[serde(default)]
    replacement: Option<MaybeObject<ReplacementProbe>>,
}

#[derive(Deserialize)]
struct MessageProbe<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    role: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    provider: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    model: Option<&'a RawValue>,
    #[serde(rename = "toolCallId", borrow, default, deserialize_with = "present")]
    tool_call_id: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "content")]
    content: Content,
}

#[derive(Deserialize)]
struct ReplacementProbe {
    #[serde(default, deserialize_with = "content")]
    content: Content,
}

/// A message's `content`, reduced to what the tree needs: whether it is missing, and
/// the ids of its `toolCall` blocks. Text is skipped without being copied.
#[derive(Default)]
enum Content {
    #[default]
    Missing,
    Present(Vec<ToolCallId>),
}

impl Content {
    fn into_tool_call_ids(self) -> Vec<ToolCallId> {
        match self {
            Content::Missing => Vec::new(),
            Content::Present(ids) => ids,
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    /// Reads content through `deserialize_bytes`: serde_json then hands a string over without
    /// decoding it into a Rust `str`, so strings with lone UTF-16 surrogate escapes (which pi
    /// writes when it cuts text inside an emoji) are accepted, and arrays still arrive as
    /// sequences. `null` is handled by the `Option` around it.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("message content (a string or an array of blocks)")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut ids = Vec::new();
                while let Some(block) = seq.next_element::<MaybeObject<BlockProbe<'de>>>()? {
                    if let MaybeObject::Object(b) = block
                        && b.ty.and_then(raw_str).as_deref() == Some("toolCall")
                        && let Some(id) = b.id.and_then(raw_str)
                    {
                        ids.push(ToolCallId::from(&*id));
                    }
                }
                Ok(Content::Present(ids))
            }
            fn visit_bytes<E>(self, _: &[u8]) -> Result<Content, E> {
                Ok(Content::Present(Vec::new()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Content, E> {
                Ok(Content::Present(Vec::new()))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// `content` as it appears in a message or a context edit replacement: absent or `null` is
/// [`Content::Missing`].
fn content<'de, D: Deserializer<'de>>(d: D) -> Result<Content, D::Error> {
    Ok(Option::<Content>::deserialize(d)?.unwrap_or(Content::Missing))
}

#[derive(Deserialize)]
struct BlockProbe<'a> {
    #[serde(rename = "type", borrow, default, deserialize_with = "present")]
    ty: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const SPAN: LineSpan = LineSpan {
        line: 2,
        offset: 0,
        len: 0,
    };

    #[test]
    fn duplicate_keys_last_wins_like_json_parse() {
        let line = br#"{"type":"message","id":"a","parentId":null,"message":{"role":"system","content":null,"role":"user"}}"#;
        let Line::Entry(e) = parse_line(line, SPAN, Expect::Entry { version: 3 }).unwrap() else {
            panic!("not an entry")
        };
        assert_eq!(e.kind.role(), Some(&Role::User));
    }

    /// pi keeps any JSON object as an entry: content of any type is read (no tool calls in
    /// it), and an entry without a string `type` or with a non-string `parentId` is irregular:
    /// the entry pi makes of it, with the problem.
    #[test]
    fn what_pi_keeps_is_read_or_kept_as_irregular() {
        let read = |line: &str| parse_line(line.as_bytes(), SPAN, Expect::Entry { version: 3 });
        for content in [r#"{"a":[1]}"#, "42", "-0.5", "true", r#"{"x":"\ud800"}"#] {
            let line = format!(
                r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"assistant","content":{content}}}}}"#
            );
            let Ok(Line::Entry(e)) = read(&line) else {
                panic!("{content}: {:?}", read(&line))
            };
            let EntryKind::Message(m) = e.kind else {
                panic!("{content}: not a message")
            };
            assert!(
                m.tool_call_ids().is_empty() && !m.content_missing,
                "{content}"
            );
        }
        let Ok(Line::Irregular(e, p)) = read(r#"{"id":"b","parentId":"a"}"#) else {
            panic!("untyped")
        };
        assert!(matches!(e.kind, EntryKind::Untyped) && e.parent_id.is_some());
        assert_eq!(p.kind, ProblemKind::InvalidEntry);
        for parent in ["7", "false", "{}", r#"["a"]"#] {
            let line = format!(r#"{{"type":"custom","id":"b","parentId":{parent}}}"#);
            let Ok(Line::Irregular(e, p)) = read(&line) else {
                panic!("{parent}: {:?}", read(&line))
            };
            assert!(e.parent_id.is_none(), "{parent}");
            assert!(p.detail.contains("parentId"), "{parent}: {}", p.detail);
        }
        // What pi cannot use stays a problem: no id, a message that is no object.
        assert!(read(r#"{"type":"custom","parentId":null}"#).is_err());
        assert!(read(r#"{"type":"message","id":"m","message":"hi"}"#).is_err());
    }

    /// A raw thinking level is the file's text with a literal U+FDD0 escaped, so that restoring
    /// a document around it leaves it the text it is; a lone surrogate read through the
    /// duplicate-key fallback is decoded text, which output restores to pi's escape.
    #[test]
    fn raw_settings_are_final_text() {
        let level = |line: &str| {
            let Line::Entry(e) =
                parse_line(line.as_bytes(), SPAN, Expect::Entry { version: 3 }).unwrap()
            else {
                panic!("not an entry")
            };
            let EntryKind::ThinkingLevelChange { level: Some(level) } = e.kind else {
                panic!("no thinking level")
            };
            level.get().to_owned()
        };
        let literal = "{\"type\":\"thinking_level_change\",\"id\":\"a\",\"parentId\":null,\"thinkingLevel\":\"hi\u{FDD0}\u{E002}\"}";
        assert_eq!(level(literal), "\"hi\\ufdd0\u{E002}\"");
        assert_eq!(jsstr::restore_json(&level(literal)), level(literal));
        let plain =
            r#"{"type":"thinking_level_change","id":"a","parentId":null,"thinkingLevel":"high"}"#;
        assert_eq!(level(plain), r#""high""#);
        // Read through the fallback, the raw value is decoded text: its pair leaves restored.
        let duplicate = r#"{"type":"thinking_level_change","id":"a","parentId":null,"thinkingLevel":"x","thinkingLevel":"lo\ud800w"}"#;
        assert_eq!(jsstr::restore_json(&level(duplicate)), r#""lo\ud800w""#);
    }

    /// An id on a line with duplicate keys is the id other lines name: two U+FDD0 pairs in it
    /// (a high and a low one) stay two, as the probe reads them on any line.
    #[test]
    fn an_id_read_through_the_duplicate_key_fallback_is_the_same_id() {
        let id = "a\u{FDD0}\u{E03D}\u{FDD0}\u{E600}";
        let named = format!(r#"{{"type":"custom","id":"b","parentId":"{id}"}}"#);
        let Line::Entry(child) =
            parse_line(named.as_bytes(), SPAN, Expect::Entry { version: 3 }).unwrap()
        else {
            panic!("not an entry")
        };
        let duplicate = format!(r#"{{"type":"custom","id":"zz","id":"{id}","parentId":null}}"#);
        let Line::Entry(e) =
            parse_line(duplicate.as_bytes(), SPAN, Expect::Entry { version: 3 }).unwrap()
        else {
            panic!("not an entry")
        };
        assert_eq!(Some(&e.id), child.parent_id.as_ref());
        assert_eq!(e.id.as_str(), id);
    }

    #[test]
    fn lone_surrogates_in_content_are_accepted() {
        let line = br#"{"type":"custom_message","id":"a","parentId":null,"content":"x\ud83d"}"#;
        assert!(parse_line(line, SPAN, Expect::Entry { version: 3 }).is_ok());
        let line = br#"{"type":"context_edit","id":"a","parentId":null,"targetId":"b","replacement":{"content":"\ude80"}}"#;
        assert!(parse_line(line, SPAN, Expect::Entry { version: 3 }).is_ok());
    }

    #[test]
    fn a_byte_order_mark_is_named() {
        let line = "\u{FEFF}{\"type\":\"custom\",\"id\":\"a\",\"parentId\":null}".as_bytes();
        let Err(p) = parse_line(line, SPAN, Expect::Entry { version: 3 }) else {
            panic!("a BOM is no JSON")
        };
        assert_eq!(p.kind, ProblemKind::InvalidJson);
        assert!(p.detail.contains("byte-order mark"), "{}", p.detail);
    }

    #[test]
    fn empty_parent_id_is_a_root_as_in_pi() {
        let line = br#"{"type":"custom","id":"a","parentId":""}"#;
        let Line::Entry(e) = parse_line(line, SPAN, Expect::Entry { version: 3 }).unwrap() else {
            panic!("not an entry")
        };
        assert_eq!(e.parent_id, None);
    }
}
