//! The Claude Code transcript line format (as Claude Code 2.1 writes and reads it; the facts are
//! in `docs/claude-code.md`): one JSON object per line, no header line. `user`, `assistant`,
//! `attachment` and `system` lines are tree lines (`uuid`, `parentUuid`); every other line is
//! bookkeeping (`queue-operation`, `last-prompt {leafUuid}`, `mode`, `summary`,
//! `file-history-snapshot`, …) and never a node, and a `progress` line that carries a `uuid` is
//! not a node either: a line naming it as parent hangs from the progress line's own parent.
//!
//! Like pi's probe, this one borrows from the line and keeps only the small facts the tree, the
//! leaf rule and the context need; bodies stay in the file. Pure: no I/O.

use std::borrow::Cow;

use ecow::EcoString;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::core::diagnostics::{LineProblem, ProblemKind};
use crate::core::ids::{EntryId, JsTime, LineSpan};
use crate::js::jsstr;
use crate::js::timestamp::js_time_of_raw;

/// The types of tree lines (Claude Code's loader keeps exactly these in its map by `uuid`).
pub const TREE_TYPES: [&str; 4] = ["user", "assistant", "attachment", "system"];

/// A transcript has no header line; the tree's header is this empty stand-in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header;

/// One tree line: identity, parent, what it is and where its line is.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The line's `uuid`.
    pub id: EntryId,
    /// `parentUuid` as written, re-linked through `progress` lines (`None` for `null`).
    pub parent_id: Option<EntryId>,
    /// What the line is.
    pub kind: Kind,
    /// `isSidechain: true` (a subagent's line).
    pub sidechain: bool,
    /// `new Date(timestamp).getTime()`.
    pub time_ms: JsTime,
    /// Where the line is in the file.
    pub span: LineSpan,
}

/// What a tree line is, with the fields the tree, the leaf rule and the context need.
#[derive(Clone, Debug)]
pub enum Kind {
    /// A `user` line.
    User {
        /// `isMeta: true`: a line Claude Code wrote itself (sent like any user line).
        meta: bool,
        /// `isCompactSummary: true`: the summary that opens the context after a boundary.
        compact_summary: bool,
        /// Its content holds a `tool_result` block.
        tool_result: bool,
        /// The `tool_use_id`s its `tool_result` blocks answer (string ids only).
        result_ids: Box<[EcoString]>,
        /// Where its `toolUseResult` lies in the line, when that is a large object or array.
        result_copy: Option<ResultCopy>,
    },
    /// An `assistant` line: one content block of a model response.
    Assistant {
        /// `message.id`, shared by the lines of one response.
        message_id: Option<EcoString>,
        /// `message.model` (`<synthetic>` for lines Claude Code wrote itself).
        model: Option<EcoString>,
        /// The type of its (first) content block: `text`, `thinking`, `tool_use`, ….
        block: Option<EcoString>,
        /// The ids of its `tool_use` blocks (string ids only).
        tool_use_ids: Box<[EcoString]>,
        /// `isApiErrorMessage: true`.
        api_error: bool,
    },
    /// An `attachment` line: context Claude Code computed for a turn.
    Attachment {
        /// `attachment.type` (`agent_listing_delta`, `skill_listing`, …).
        attachment: EcoString,
    },
    /// A `system` line.
    System {
        /// `subtype` (`compact_boundary`, `local_command`, `turn_duration`, …).
        subtype: EcoString,
        /// A compact boundary's `logicalParentUuid`: the leaf it compacted.
        logical_parent: Option<EntryId>,
        /// A compact boundary's preserved segment (`compactMetadata.preservedSegment` /
        /// `preservedMessages`), when it names one.
        preserved: Option<Box<Preserved>>,
    },
}

/// Where a user line's `toolUseResult` lies in its line: Claude Code's own copy of a tool's
/// result (an object or an array), which no request holds. A reader of the line's message
/// (`context`) leaves it out of what it reads again; that the value is an object or array is
/// all it needs of it (a truthy value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResultCopy {
    /// Its first byte's offset within the line.
    pub at: u32,
    /// Its length in bytes.
    pub len: u32,
}

impl ResultCopy {
    /// The smallest copy worth recording, in bytes.
    const MIN: usize = 256;

    /// The copy whose text is `raw`, a value of `line` (`None` when it is small, not an object
    /// or array, or not within `line`).
    fn of(line: &[u8], raw: &RawValue) -> Option<ResultCopy> {
        let text = raw.get().as_bytes();
        if text.len() < ResultCopy::MIN || !matches!(text.first(), Some(b'{' | b'[')) {
            return None;
        }
        let at = (text.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
        if at + text.len() > line.len() {
            return None;
        }
        Some(ResultCopy {
            at: u32::try_from(at).ok()?,
            len: u32::try_from(text.len()).ok()?,
        })
    }

    /// `line` with the copy replaced by an empty object or array (as truthy as it), when the
    /// line still has one where the copy was.
    pub fn cut_from(self, line: &[u8]) -> Option<Vec<u8>> {
        let (at, len) = (self.at as usize, self.len as usize);
        let value = line.get(at..at.checked_add(len)?)?;
        let empty: &[u8] = match (value.first(), value.last()) {
            (Some(b'{'), Some(b'}')) => b"{}",
            (Some(b'['), Some(b']')) => b"[]",
            _ => return None,
        };
        let before = line[..at].trim_ascii_end();
        let after = line[at + len..].trim_ascii_start();
        if !(before.ends_with(b":") && matches!(after.first(), Some(b',' | b'}'))) {
            return None;
        }
        let mut out = Vec::with_capacity(line.len() - len + empty.len());
        out.extend_from_slice(&line[..at]);
        out.extend_from_slice(empty);
        out.extend_from_slice(&line[at + len..]);
        Some(out)
    }

    /// The offset in the line of byte `i` of the line [`ResultCopy::cut_from`] made.
    pub fn offset_in_line(self, i: usize) -> usize {
        if i > self.at as usize {
            i + self.len as usize - 2
        } else {
            i
        }
    }
}

/// What a compact boundary kept verbatim (its `compactMetadata`, docs/claude-code.md §4): the
/// lines Claude Code 2.1.197 re-links under the compaction summary when it loads the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preserved {
    /// `preservedSegment {headUuid, anchorUuid, tailUuid}`, when it is an object.
    pub segment: Option<Segment>,
    /// `preservedMessages {anchorUuid, uuids}`, when it is an object (it wins over the walk of
    /// `segment`, *source* `zsm`).
    pub messages: Option<PreservedMessages>,
}

/// `compactMetadata.preservedSegment`: the preserved lines are the chain from `tail` up to
/// `head`; `anchor` (the compaction summary) becomes the head's parent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// `headUuid`: the first preserved line.
    pub head: Option<EntryId>,
    /// `anchorUuid`: the line the head is re-linked under (the summary).
    pub anchor: Option<EntryId>,
    /// `tailUuid`: the last preserved line.
    pub tail: Option<EntryId>,
}

/// `compactMetadata.preservedMessages`: the preserved lines by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreservedMessages {
    /// `anchorUuid`.
    pub anchor: Option<EntryId>,
    /// `uuids`, in order (`None` when it is not an array of strings: such a list names no line
    /// of the file, which disables the re-link).
    pub uuids: Option<Vec<EntryId>>,
}

impl Kind {
    /// The line's `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Kind::User { .. } => "user",
            Kind::Assistant { .. } => "assistant",
            Kind::Attachment { .. } => "attachment",
            Kind::System { .. } => "system",
        }
    }

    /// Whether this is a `user` or `assistant` line (a message line).
    pub fn is_message(&self) -> bool {
        matches!(self, Kind::User { .. } | Kind::Assistant { .. })
    }

    /// Whether this is a `compact_boundary` system line.
    pub fn is_compact_boundary(&self) -> bool {
        matches!(self, Kind::System { subtype, .. } if subtype == "compact_boundary")
    }
}

/// A line that is no node of the tree: bookkeeping, or a `progress` line.
#[derive(Clone, Debug)]
pub struct Aside {
    /// The line's `type` (empty when it has none).
    pub kind: EcoString,
    /// Where the line is.
    pub span: LineSpan,
    /// A `last-prompt` or `summary` line's `leafUuid` (`None` when absent or null).
    pub leaf_uuid: Option<EntryId>,
    /// `leafUuid` is present and `null` (an interactive `/rewind` that cleared the leaf).
    pub leaf_cleared: bool,
    /// A `last-prompt` line's `explicit: true`.
    pub explicit: bool,
    /// A `progress` line's `uuid` and `parentUuid`.
    pub progress: Option<(EntryId, Option<EntryId>)>,
}

/// What one line turned out to be.
#[derive(Debug)]
pub enum Line {
    /// A tree line.
    Entry(Entry),
    /// A bookkeeping or progress line.
    Aside(Aside),
}

/// The fields the probe reads; everything else (message content, tool results) is skipped.
/// `M` is how `message` is read: in one pass with the line ([`MessageOnce`]), or kept as its
/// text and read again (`&RawValue`, the way every line reads when the first does not).
#[derive(Deserialize)]
struct Probe<'a, M> {
    #[serde(rename = "type", borrow)]
    ty: Option<&'a RawValue>,
    #[serde(borrow)]
    uuid: Option<&'a RawValue>,
    #[serde(rename = "parentUuid", borrow)]
    parent_uuid: Option<&'a RawValue>,
    #[serde(rename = "logicalParentUuid", borrow)]
    logical_parent_uuid: Option<&'a RawValue>,
    #[serde(rename = "isSidechain", borrow)]
    is_sidechain: Option<&'a RawValue>,
    #[serde(borrow)]
    timestamp: Option<&'a RawValue>,
    #[serde(borrow)]
    subtype: Option<&'a RawValue>,
    #[serde(rename = "isMeta", borrow)]
    is_meta: Option<&'a RawValue>,
    #[serde(rename = "isCompactSummary", borrow)]
    is_compact_summary: Option<&'a RawValue>,
    #[serde(rename = "isApiErrorMessage", borrow)]
    is_api_error: Option<&'a RawValue>,
    /// Kept as written, `null` included (an explicit `null` clears the leaf).
    #[serde(rename = "leafUuid", borrow, default, deserialize_with = "raw_or_null")]
    leaf_uuid: Option<&'a RawValue>,
    #[serde(borrow)]
    explicit: Option<&'a RawValue>,
    message: Option<M>,
    #[serde(borrow)]
    attachment: Option<&'a RawValue>,
    #[serde(rename = "compactMetadata", borrow)]
    compact_metadata: Option<&'a RawValue>,
    #[serde(rename = "toolUseResult", borrow)]
    tool_use_result: Option<&'a RawValue>,
}

/// `compactMetadata` of a compact boundary: the preserved segment only.
#[derive(Deserialize)]
struct CompactMetadataProbe<'a> {
    #[serde(rename = "preservedSegment", borrow)]
    preserved_segment: Option<&'a RawValue>,
    #[serde(rename = "preservedMessages", borrow)]
    preserved_messages: Option<&'a RawValue>,
}

/// `preservedSegment` and `preservedMessages` (each reads the keys it has).
#[derive(Deserialize)]
struct PreservedProbe<'a> {
    #[serde(rename = "headUuid", borrow)]
    head: Option<&'a RawValue>,
    #[serde(rename = "anchorUuid", borrow)]
    anchor: Option<&'a RawValue>,
    #[serde(rename = "tailUuid", borrow)]
    tail: Option<&'a RawValue>,
    #[serde(borrow)]
    uuids: Option<&'a RawValue>,
}

/// `message` of a tree line: what the probe needs of it.
#[derive(Deserialize)]
struct MessageProbe<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

/// A content block: its `type` only.
#[derive(Deserialize)]
struct BlockProbe<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(rename = "tool_use_id", borrow)]
    tool_use_id: Option<&'a RawValue>,
}

/// What the probe keeps of a tree line's `message` (an object).
struct MessageFacts<'a> {
    id: Option<&'a RawValue>,
    model: Option<&'a RawValue>,
    /// Its `content` blocks (none for a content that is not a list).
    blocks: Vec<Block>,
}

/// `message` read in the line's one pass: an object's facts, or another value (`null` aside,
/// which reads as absent) that names none. What the reading of `message` apart from the line
/// ([`MessageProbe`], [`blocks`]) could read otherwise than here is an error, and the line is
/// read again that way: a repeated key, a `message` that is an array, a content block that is
/// not an object.
enum MessageOnce<'a> {
    Object(MessageFacts<'a>),
    Other,
}

/// The keys of `message` the probe reads.
#[derive(Deserialize)]
#[serde(field_identifier)]
enum MessageKey {
    #[serde(rename = "id")]
    Id,
    #[serde(rename = "model")]
    Model,
    #[serde(rename = "content")]
    Content,
    #[serde(other)]
    Other,
}

/// The keys of a content block the probe reads.
#[derive(Deserialize)]
#[serde(field_identifier)]
enum BlockKey {
    #[serde(rename = "type")]
    Type,
    #[serde(rename = "id")]
    Id,
    #[serde(rename = "tool_use_id")]
    ToolUseId,
    #[serde(other)]
    Other,
}

/// A repeated key: the line is read again (as [`MessageProbe`] refuses it).
fn repeated<E: serde::de::Error>(key: &str) -> E {
    E::custom(format_args!("duplicate field `{key}`"))
}

/// Reads the next value into `slot`, once.
fn once<'de, A: serde::de::MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    key: &str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(repeated(key));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

impl<'de: 'a, 'a> Deserialize<'de> for MessageOnce<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = MessageOnce<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value other than an array")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<MessageOnce<'a>, A::Error> {
                let (mut id, mut model) = (None, None);
                let mut content: Option<Option<ContentOnce>> = None;
                while let Some(k) = map.next_key::<MessageKey>()? {
                    match k {
                        MessageKey::Id => once(&mut map, &mut id, "id")?,
                        MessageKey::Model => once(&mut map, &mut model, "model")?,
                        MessageKey::Content => once(&mut map, &mut content, "content")?,
                        MessageKey::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                let blocks = match content.flatten() {
                    Some(ContentOnce(blocks)) => blocks,
                    None => Vec::new(),
                };
                Ok(MessageOnce::Object(MessageFacts {
                    id: id.flatten(),
                    model: model.flatten(),
                    blocks,
                }))
            }
            crate::core::scalars::visit_scalars!(MessageOnce<'a>, _ => MessageOnce::Other);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// `message.content` read in one pass: the blocks of a list of objects; no block for any other
/// value. A list holding anything but objects is an error (read again).
struct ContentOnce(Vec<Block>);

impl<'de> Deserialize<'de> for ContentOnce {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ContentOnce;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<ContentOnce, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(b) = seq.next_element::<BlockOnce>()? {
                    blocks.push(b.0);
                }
                Ok(ContentOnce(blocks))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ContentOnce, A::Error> {
                serde::de::Visitor::visit_map(serde::de::IgnoredAny, map)?;
                Ok(ContentOnce(Vec::new()))
            }
            crate::core::scalars::visit_scalars!(ContentOnce, _ => ContentOnce(Vec::new()));
        }
        d.deserialize_any(V)
    }
}

/// A content block read in one pass: an object only.
struct BlockOnce(Block);

impl<'de> Deserialize<'de> for BlockOnce {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = BlockOnce;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a content block object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<BlockOnce, A::Error> {
                let (mut ty, mut id, mut tool_use_id) = (None, None, None);
                while let Some(k) = map.next_key::<BlockKey>()? {
                    match k {
                        BlockKey::Type => once(&mut map, &mut ty, "type")?,
                        BlockKey::Id => once(&mut map, &mut id, "id")?,
                        BlockKey::ToolUseId => once(&mut map, &mut tool_use_id, "tool_use_id")?,
                        BlockKey::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(BlockOnce(Block::of(&BlockProbe {
                    ty: ty.flatten(),
                    id: id.flatten(),
                    tool_use_id: tool_use_id.flatten(),
                })))
            }
        }
        d.deserialize_map(V)
    }
}

/// `attachment`: its `type` only.
#[derive(Deserialize)]
struct AttachmentProbe<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<&'a RawValue>,
}

/// Reads one line (without its newline). Pure; `span` only labels the result. Errors name the
/// problem (`invalidJson`, `notAnObject`, `invalidEntry`); the caller adds file and line.
pub fn parse_line(bytes: &[u8], span: LineSpan) -> Result<Line, LineProblem> {
    // One pass over the line, `message` included; a line it does not take (any error: bad
    // JSON, a repeated key, a `message` or content block of an unusual shape) is read again
    // the way that says exactly what it is.
    match serde_json::from_slice::<Probe<'_, MessageOnce<'_>>>(bytes) {
        Ok(probe) => {
            let message = match &probe.message {
                Some(MessageOnce::Object(facts)) => Some(facts),
                _ => None,
            };
            from_probe(&probe, message, Some(bytes), span)
        }
        Err(_) => parse_line_again(bytes, span),
    }
}

/// [`parse_line`] with `message` read apart from the line.
fn parse_line_again(bytes: &[u8], span: LineSpan) -> Result<Line, LineProblem> {
    match serde_json::from_slice::<Probe<'_, &RawValue>>(bytes) {
        Ok(probe) => from_raw_probe(&probe, Some(bytes), span),
        // Syntax errors and non-objects are what they look like; anything else (a duplicate
        // key, which JSON.parse resolves as "the last one wins") is read the slow way.
        Err(e) if e.is_syntax() || e.is_eof() => Err(problem(
            ProblemKind::InvalidJson,
            format!("invalid JSON: {e}"),
        )),
        Err(_) => {
            let value = jsstr::parse_value(bytes)
                .map_err(|e| problem(ProblemKind::InvalidJson, format!("invalid JSON: {e}")))?;
            let Value::Object(_) = &value else {
                return Err(problem(
                    ProblemKind::NotAnObject,
                    "the line is JSON but not an object",
                ));
            };
            let text = serde_json::to_string(&value).unwrap_or_default();
            let probe = serde_json::from_str::<Probe<'_, &RawValue>>(&text)
                .map_err(|e| problem(ProblemKind::InvalidEntry, format!("unreadable line: {e}")))?;
            from_raw_probe(&probe, None, span)
        }
    }
}

/// [`from_probe`] of a probe that kept `message` as its text.
fn from_raw_probe(
    p: &Probe<'_, &RawValue>,
    line: Option<&[u8]>,
    span: LineSpan,
) -> Result<Line, LineProblem> {
    let message = p
        .message
        .and_then(|raw| serde_json::from_str::<MessageProbe<'_>>(raw.get()).ok())
        .map(|m| MessageFacts {
            id: m.id,
            model: m.model,
            blocks: m.content.map(blocks).unwrap_or_default(),
        });
    from_probe(p, message.as_ref(), line, span)
}

/// The line a probe read: `message` as read, and `line` when the probe borrows from the file's
/// line itself (not from a text made of it).
fn from_probe<M>(
    p: &Probe<'_, M>,
    message: Option<&MessageFacts<'_>>,
    line: Option<&[u8]>,
    span: LineSpan,
) -> Result<Line, LineProblem> {
    let ty = p.ty.and_then(raw_str);
    let ty_name = ty.as_deref().unwrap_or("");
    if !TREE_TYPES.contains(&ty_name) {
        let progress = match (ty_name, p.uuid.and_then(raw_str)) {
            ("progress", Some(uuid)) => Some((EntryId::new(uuid), id_of(p.parent_uuid))),
            _ => None,
        };
        return Ok(Line::Aside(Aside {
            kind: ty_name.into(),
            span,
            leaf_uuid: id_of(p.leaf_uuid),
            leaf_cleared: p.leaf_uuid.is_some_and(|r| r.get() == "null"),
            explicit: is_true(p.explicit),
            progress,
        }));
    }
    let id = p.uuid.and_then(raw_str).ok_or_else(|| {
        problem(
            ProblemKind::InvalidEntry,
            "a tree line without a string \"uuid\"",
        )
    })?;
    let parent_id = match p.parent_uuid {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => Some(raw_str(raw).map(EntryId::new).ok_or_else(|| {
            problem(
                ProblemKind::InvalidEntry,
                "\"parentUuid\" is neither a string nor null",
            )
        })?),
    };
    let content = message.map_or(&[][..], |m| m.blocks.as_slice());
    let ids = |ty: &str| -> Box<[EcoString]> {
        content
            .iter()
            .filter(|b| b.ty == ty)
            .filter_map(|b| b.id.clone())
            .collect()
    };
    let kind = match ty_name {
        "user" => Kind::User {
            meta: is_true(p.is_meta),
            compact_summary: is_true(p.is_compact_summary),
            tool_result: content.iter().any(|b| b.ty == "tool_result"),
            result_ids: ids("tool_result"),
            result_copy: line
                .zip(p.tool_use_result)
                .and_then(|(line, raw)| ResultCopy::of(line, raw)),
        },
        "assistant" => Kind::Assistant {
            message_id: message.and_then(|m| m.id).and_then(raw_str).map(Into::into),
            model: message
                .and_then(|m| m.model)
                .and_then(raw_str)
                .map(Into::into),
            block: content.first().map(|b| b.ty.clone()),
            tool_use_ids: ids("tool_use"),
            api_error: is_true(p.is_api_error),
        },
        "attachment" => Kind::Attachment {
            attachment: p
                .attachment
                .and_then(|raw| serde_json::from_str::<AttachmentProbe<'_>>(raw.get()).ok())
                .and_then(|a| a.ty)
                .and_then(raw_str)
                .map(Into::into)
                .unwrap_or_default(),
        },
        _ => Kind::System {
            subtype: p
                .subtype
                .and_then(raw_str)
                .map(Into::into)
                .unwrap_or_default(),
            logical_parent: id_of(p.logical_parent_uuid),
            preserved: p.compact_metadata.and_then(preserved_of),
        },
    };
    Ok(Line::Entry(Entry {
        id: EntryId::new(id),
        parent_id,
        kind,
        sidechain: is_true(p.is_sidechain),
        time_ms: JsTime::new(js_time_of_raw(p.timestamp)),
        span,
    }))
}

/// The preserved segment a `compactMetadata` names: `preservedSegment` and `preservedMessages`
/// count when they are objects (JavaScript truthiness); `None` when neither is.
fn preserved_of(meta: &RawValue) -> Option<Box<Preserved>> {
    let meta = serde_json::from_str::<CompactMetadataProbe<'_>>(meta.get()).ok()?;
    fn object(raw: Option<&RawValue>) -> Option<PreservedProbe<'_>> {
        raw.filter(|r| r.get().starts_with('{'))
            .and_then(|r| serde_json::from_str::<PreservedProbe<'_>>(r.get()).ok())
    }
    let segment = object(meta.preserved_segment).map(|s| Segment {
        head: id_of(s.head),
        anchor: id_of(s.anchor),
        tail: id_of(s.tail),
    });
    let messages = object(meta.preserved_messages).map(|m| PreservedMessages {
        anchor: id_of(m.anchor),
        uuids: match m.uuids {
            None => Some(Vec::new()),
            Some(raw) if raw.get() == "null" => Some(Vec::new()),
            Some(raw) => serde_json::from_str::<Vec<&RawValue>>(raw.get())
                .ok()
                .and_then(|items| {
                    items
                        .into_iter()
                        .map(|r| raw_str(r).map(EntryId::new))
                        .collect::<Option<Vec<_>>>()
                }),
        },
    });
    (segment.is_some() || messages.is_some()).then(|| Box::new(Preserved { segment, messages }))
}

/// The `type` of each block of a content array (none for a string content).
fn blocks(content: &RawValue) -> Vec<Block> {
    serde_json::from_str::<Vec<BlockProbe<'_>>>(content.get())
        .map(|bs| bs.iter().map(Block::of).collect())
        .unwrap_or_default()
}

impl Block {
    /// The block a probe read.
    fn of(b: &BlockProbe<'_>) -> Block {
        let ty: EcoString = b.ty.and_then(raw_str).map(Into::into).unwrap_or_default();
        // A tool_use names itself by `id`, a tool_result the call it answers.
        let id = if ty == "tool_result" {
            b.tool_use_id
        } else {
            b.id
        };
        Block {
            id: id.and_then(raw_str).map(Into::into),
            ty,
        }
    }
}

/// A content block as the probe keeps it: its type and the tool call id it carries.
struct Block {
    ty: EcoString,
    id: Option<EcoString>,
}

/// A present field's raw value, `null` included (serde reads `null` as `None` otherwise).
fn raw_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// A string value's text as `JSON.parse` reads it.
fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    jsstr::decode_str(raw)
}

/// A string field as an id (`None` for absent, `null` or another type).
fn id_of(raw: Option<&RawValue>) -> Option<EntryId> {
    raw.and_then(raw_str)
        .filter(|s| !s.is_empty())
        .map(EntryId::new)
}

/// Whether a field is JSON `true` (Claude Code tests these flags with `=== true` or truthiness;
/// files only ever hold booleans there).
fn is_true(raw: Option<&RawValue>) -> bool {
    raw.is_some_and(|r| r.get() == "true")
}

fn problem(kind: ProblemKind, detail: impl Into<String>) -> LineProblem {
    LineProblem {
        kind,
        detail: detail.into(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn span() -> LineSpan {
        LineSpan {
            line: 1,
            offset: 0,
            len: 0,
        }
    }

    #[test]
    fn tree_lines_bookkeeping_and_progress() {
        let user = br#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"t","type":"tool_result","content":"x"}]},"uuid":"u1","timestamp":"2026-12-04T16:52:12.960Z"}"#;
        let Ok(Line::Entry(e)) = parse_line(user, span()) else {
            panic!("user line")
        };
        assert_eq!(e.id.as_str(), "u1");
        assert!(e.parent_id.is_none());
        assert!(matches!(
            e.kind,
            Kind::User {
                tool_result: true,
                ..
            }
        ));
        let asst = br#"{"parentUuid":"u1","isSidechain":true,"message":{"id":"msg_1","model":"m","content":[{"type":"thinking","thinking":"x"}]},"type":"assistant","uuid":"a1"}"#;
        let Ok(Line::Entry(e)) = parse_line(asst, span()) else {
            panic!("assistant line")
        };
        assert!(e.sidechain);
        match e.kind {
            Kind::Assistant {
                message_id, block, ..
            } => {
                assert_eq!(message_id.as_deref(), Some("msg_1"));
                assert_eq!(block.as_deref(), Some("thinking"));
            }
            k => panic!("{k:?}"),
        }
        let last = br#"{"type":"last-prompt","leafUuid":"a1","sessionId":"s"}"#;
        let Ok(Line::Aside(a)) = parse_line(last, span()) else {
            panic!("last-prompt")
        };
        assert_eq!(a.leaf_uuid.as_ref().map(EntryId::as_str), Some("a1"));
        let cleared = br#"{"type":"last-prompt","leafUuid":null,"explicit":true}"#;
        let Ok(Line::Aside(a)) = parse_line(cleared, span()) else {
            panic!("last-prompt")
        };
        assert!(a.leaf_cleared && a.explicit && a.leaf_uuid.is_none());
        let boundary = br#"{"type":"system","subtype":"compact_boundary","uuid":"b","parentUuid":null,"compactMetadata":{"preservedSegment":{"headUuid":"h","anchorUuid":"s","tailUuid":"t"},"preservedMessages":{"anchorUuid":"s","uuids":["h",1]}}}"#;
        let Ok(Line::Entry(e)) = parse_line(boundary, span()) else {
            panic!("boundary")
        };
        let Kind::System {
            preserved: Some(p), ..
        } = e.kind
        else {
            panic!("preserved segment")
        };
        assert_eq!(
            p.segment.as_ref().and_then(|s| s.tail.clone()),
            Some(EntryId::new("t"))
        );
        assert_eq!(p.messages.as_ref().map(|m| m.uuids.is_none()), Some(true));
        let progress = br#"{"type":"progress","uuid":"p1","parentUuid":"a1"}"#;
        let Ok(Line::Aside(a)) = parse_line(progress, span()) else {
            panic!("progress")
        };
        assert_eq!(a.progress.map(|(u, _)| u), Some(EntryId::new("p1")));
        // A duplicate key: the last one wins, as in JSON.parse.
        let dup = br#"{"type":"user","uuid":"x","uuid":"y","parentUuid":null}"#;
        let Ok(Line::Entry(e)) = parse_line(dup, span()) else {
            panic!("duplicate key")
        };
        assert_eq!(e.id.as_str(), "y");
        assert!(matches!(
            parse_line(b"{\"type\":\"user\"}", span()),
            Err(LineProblem {
                kind: ProblemKind::InvalidEntry,
                ..
            })
        ));
        assert!(matches!(
            parse_line(b"{\"type\":", span()),
            Err(LineProblem {
                kind: ProblemKind::InvalidJson,
                ..
            })
        ));
    }
    /// The one-pass read and the read of `message` apart from the line agree on every shape
    /// of `message` and its content; the copy of a tool's result is found where it is.
    #[test]
    fn one_pass_reads_what_the_second_read_reads() {
        let big = "x".repeat(300);
        let lines = [
            r#"{"type":"user","uuid":"u","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}}"#.to_owned(),
            r#"{"type":"assistant","uuid":"a","message":{"id":"m","model":"x","content":[{"type":"tool_use","id":"c","input":{}}]}}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":{"content":"plain"}}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":{"content":{"type":"text"}}}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":{"content":null}}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":null}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":"text"}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":["a","b",[]]}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":{"content":["text",{"type":"text"}]}}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":{"content":[null]}}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":{"content":[["tool_result","x","y"]]}}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":{"content":[{"type":"tool_result","type":"text","tool_use_id":"t"}]}}"#.to_owned(),
            r#"{"type":"assistant","uuid":"a","message":{"id":"m","id":"n","content":[{"type":"text"}]}}"#.to_owned(),
            r#"{"type":"assistant","uuid":"a","message":{"\u0069d":"m","content":[{"type":"t\u0065xt","id":1}]}}"#.to_owned(),
            r#"{"type":"user","uuid":"u","message":{"content":[]},"message":{"content":[{"type":"tool_result","tool_use_id":"t"}]}}"#.to_owned(),
            format!(r#"{{"type":"user","uuid":"u","message":{{"content":"x"}},"toolUseResult":{{"stdout":"{big}"}},"x":1}}"#),
            format!(r#"{{"type":"user","uuid":"u","toolUseResult":["{big}"],"message":{{"content":"x"}}}}"#),
            format!(r#"{{"type":"user","uuid":"u","toolUseResult":"{big}","message":{{"content":"x"}}}}"#),
        ];
        for line in &lines {
            let bytes = line.as_bytes();
            let one = format!("{:?}", parse_line(bytes, span()));
            let again = format!("{:?}", parse_line_again(bytes, span()));
            assert_eq!(one, again, "{line}");
            if let Ok(Line::Entry(Entry {
                kind:
                    Kind::User {
                        result_copy: Some(copy),
                        ..
                    },
                ..
            })) = parse_line(bytes, span())
            {
                let cut = copy.cut_from(bytes).unwrap();
                let value: Value = serde_json::from_slice(&cut).unwrap();
                assert!(
                    value["toolUseResult"]
                        .as_object()
                        .is_some_and(|o| o.is_empty())
                        || value["toolUseResult"]
                            .as_array()
                            .is_some_and(|a| a.is_empty())
                );
                let after = cut.len() - 5;
                assert_eq!(cut[after..], bytes[copy.offset_in_line(after)..][..5]);
            }
        }
    }
}
