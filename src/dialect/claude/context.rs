//! What the model is sent at a leaf of a Claude Code transcript: exactly the Anthropic Messages
//! API `messages` Claude Code 2.1.197 sends when it continues the transcript at that leaf, less
//! what it adds at send time that the file does not hold ([`SendTime`]). The steps are Claude
//! Code's, in its order (docs/claude-code.md §7; each names the *source* function): load
//! ([`super::load`]: `rfe`, `uim`, `Dcc`), the path (`FAe`, `Xsm`, `Jsm`, `Ksm`), the resume
//! filters (`Zwo`), the slice from the last compact boundary (`My`), the thinking of another
//! model (`vpc`), normalizeMessagesForAPI (`Ak`) with the attachment renderings of §8, and the
//! conversion to the wire (`xlm`/`klm`).
//!
//! Line bodies are read through a [`LineSource`], only for the lines of the leaf's path. Pure:
//! no I/O of its own; a line that cannot be read back is a [`ContextError`], never a panic.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::core::ids::{EntryId, LineSpan};
use crate::core::source::{Buffered, LineSource, line_blocks};
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::attachment::{self, DROPPED_ON_LOAD, Rendering, reminder, unwrap};
use crate::dialect::claude::format::{Entry, Kind, ResultCopy};
use crate::dialect::claude::load::{Loaded, Plan, is_boundary, offset_of_line, size_read};
use crate::js::jsstr;
use crate::js::value::{template_string, truthy};

/// `message.model` of the lines Claude Code writes itself.
pub const SYNTHETIC_MODEL: &str = "<synthetic>";
const NO_CONTENT: &str = "(no content)";

/// The models Claude Code 2.1.197 sends no mid-conversation system messages to (*source*
/// `sxn`; besides any `claude-3-*`).
pub const NO_MID_CONVERSATION_SYSTEM: [&str; 9] = [
    "claude-opus-4-0",
    "claude-opus-4-1",
    "claude-opus-4-5",
    "claude-opus-4-6",
    "claude-opus-4-7",
    "claude-sonnet-4-0",
    "claude-sonnet-4-5",
    "claude-sonnet-4-6",
    "claude-haiku-4-5",
];

/// What the request goes to: two things depend on it, not on the file (§7.5, §8.1).
#[derive(Clone, Debug, Default)]
pub struct ContextOptions {
    /// The request's model; default: the session's, the `message.model` of the last assistant
    /// line a model wrote (a resume keeps it, §7.5).
    pub model: Option<String>,
    /// Whether attachments travel as `role: "system"` messages; default: from the model (§8.1).
    pub mid_conversation_system: Option<bool>,
    /// The file's size as `stat` gives it (files over 5 MiB are pruned first, §7.1); default:
    /// the end of the last line the tree read.
    pub file_size: Option<u64>,
    /// Read the file as it was before this line (1-based) was written, as when a compaction
    /// audit reads the conversation a compact boundary replaced; `file_size` then defaults to
    /// that line's offset. `None`: the whole file.
    pub before_line: Option<u32>,
    /// Leave the long string `content` of `tool_result` blocks in the file: the message holds a
    /// stand-in ([`PlacedTexts`]) for each, and only a writer that reads them back from the
    /// file ([`PlacedTexts::write_value`]) writes the messages. For a document written once
    /// (`sessiond context --json`): the context then holds no copy of the results' text.
    pub results_in_place: bool,
}

/// How the transcript was read for this leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReadAs {
    /// As Claude Code loads it (§7.1).
    Loaded,
    /// Without the last compaction's re-link: the leaf is before the last compact boundary,
    /// where Claude no longer reaches; this is the file as it was when that leaf was current
    /// (§7.1).
    BeforeLastBoundary,
    /// Without the pruning of a file over 5 MiB: the leaf is off the chains Claude keeps of such
    /// a file; this is the file as Claude reads one under 5 MiB.
    Unpruned,
    /// Neither pruned nor re-linked: both of the above.
    UnprunedBeforeLastBoundary,
}

impl ReadAs {
    /// (compaction re-link, big-file pruning) as applied.
    fn plan(self) -> (bool, bool) {
        match self {
            ReadAs::Loaded => (true, true),
            ReadAs::BeforeLastBoundary => (false, true),
            ReadAs::Unpruned => (true, false),
            ReadAs::UnprunedBeforeLastBoundary => (false, false),
        }
    }
}

/// A line a resume writes before its prompt (§6.3): the context at the leaf does not hold it,
/// a resume there would.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ResumeAppend {
    /// A user line (`isMeta`) "Continue from where you left off." (an interrupted turn).
    ContinueFromWhereYouLeftOff,
    /// An assistant line "No response requested." (`model: "<synthetic>"`): the last loaded
    /// message is a user line.
    NoResponseRequested,
}

/// What Claude Code adds to the request at send time that the file does not hold (§9): data
/// to show beside the messages, never put into them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SendTime {
    /// The userContext user message (§9.1), merged into the first user message.
    pub user_context: &'static str,
    /// The cache marker (§9.2).
    pub cache_control: &'static str,
    /// What `/compact` adds on its summary request (§9.3).
    pub compact_instruction: &'static str,
    /// The lines a resume at this leaf would write first (§6.3).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resume_appends: Vec<ResumeAppend>,
    /// The leaf is a subagent's line: attachments computed during the agent's run are sent but
    /// not recorded in its file (§9.5).
    pub unrecorded_subagent_attachments: bool,
}

const USER_CONTEXT: &str = "Claude prepends a user <system-reminder> (\"As you answer the user's questions, you can use the following context:\" with # currentDate and, when a CLAUDE.md is found, # claudeMd) merged into messages[0]; with system messages it is the first block, without them the attachments that open the conversation come before it";
const CACHE_CONTROL: &str = "one cache_control {\"type\": \"ephemeral\"} marker on the last block of the last message (a string content becomes one text block to carry it)";
const COMPACT_INSTRUCTION: &str = "on a /compact request: a text block appended to the last user message (the block before gains \"\\n\"), starting \"CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\", the messages ending at the parent of the preserved segment's head";

/// Why a line of the leaf's path does not reach the model (or not as a message of its own).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Dropped {
    /// Resume filter 1: retracted by a `model_refusal_fallback` system line.
    #[serde(rename_all = "camelCase")]
    Retracted {
        /// The `model_refusal_fallback` line.
        by: EntryId,
    },
    /// Resume filter 2: an attachment type Claude drops on load.
    #[serde(rename_all = "camelCase")]
    AttachmentTypeDropped {
        /// `attachment.type`.
        attachment_type: String,
    },
    /// Resume filter 3: all its text blocks have a `text` that is not a string.
    NoTextLeft,
    /// Resume filter 4 (`xyt`): an assistant line whose `tool_use` blocks all lack a result.
    UnresolvedToolUse,
    /// Resume filter 5 / post-pass (`e6e`): thinking only, and its response has no other block.
    OrphanThinking,
    /// Resume filter 6 / post-pass (`Z8e`): blank text only, and its response has no real block.
    WhitespaceOnly,
    /// Before the last compact boundary on the path (`My`).
    #[serde(rename_all = "camelCase")]
    BeforeCompactBoundary {
        /// The boundary.
        boundary: EntryId,
    },
    /// A `system` line of a subtype Claude never sends (only `local_command` is sent).
    #[serde(rename_all = "camelCase")]
    SystemNotSent {
        /// Its `subtype`.
        subtype: String,
    },
    /// A synthetic API error assistant line (`isApiErrorMessage`, `<synthetic>`).
    ApiErrorMessage,
    /// A user/assistant line with `isVirtual: true` (`jcm`).
    Virtual,
    /// An attachment whose type renders to nothing (§8.2).
    #[serde(rename_all = "camelCase")]
    RendersToNothing {
        /// `attachment.type`.
        attachment_type: String,
    },
    /// An attachment of a type sessiond does not know how to render (listed in `notRendered`).
    #[serde(rename_all = "camelCase")]
    NotRendered {
        /// `attachment.type`.
        attachment_type: String,
    },
}

/// The `messages` at a leaf, with where each came from.
#[derive(Clone, Debug)]
pub struct Context {
    /// The leaf.
    pub leaf: NodeIdx,
    /// The last line of the leaf's loaded path that the resume filters keep: the parent a
    /// continuation's first line takes.
    pub continues_after: NodeIdx,
    /// Exactly the `messages` Claude Code sends, minus what it adds at send time. Strings hold
    /// lone surrogates as [`jsstr`] pairs: write them out through [`jsstr::restore_json`].
    pub messages: Vec<Value>,
    /// The lines whose content reaches the model, in message order.
    pub entry_ids: Vec<EntryId>,
    /// For each message, the lines it holds, in order (several when lines merged).
    pub sources: Vec<Vec<NodeIdx>>,
    /// The leaf's loaded path (`FAe`), before the filters.
    pub path: Vec<NodeIdx>,
    /// The lines of the path that do not reach the model, and why.
    pub dropped: Vec<(NodeIdx, Dropped)>,
    /// The model the request goes to (`None`: no assistant line names one).
    pub model: Option<String>,
    /// Whether attachments travel as `role: "system"` messages.
    pub mid_conversation_system: bool,
    /// What Claude adds at send time.
    pub send_time: SendTime,
    /// Attachment types on the path that sessiond does not know how to render (not in
    /// `messages`; Claude sends something for them).
    pub not_rendered: Vec<String>,
    /// How the file was read for this leaf.
    pub read_as: ReadAs,
    /// The file's size the read went by.
    pub file_size: u64,
    /// The line the read stopped before ([`ContextOptions::before_line`]).
    pub before_line: Option<u32>,
    /// The texts the messages name by their place in the file
    /// ([`ContextOptions::results_in_place`]; empty without it).
    pub placed: PlacedTexts,
}

/// Strings of the file a context's messages name by their place instead of holding them
/// ([`ContextOptions::results_in_place`]): each is a JSON string literal exactly as
/// `serde_json` writes the string it holds, so that the literal copied from the file is the
/// text the message would have been written as. In the message stands a string made of a mark
/// no file can foresee (two noncharacters and a number drawn for the run) and the literal's
/// place (`line:offset:len`), so that lines read at once on several threads place their texts
/// without sharing anything.
#[derive(Clone, Debug, Default)]
pub struct PlacedTexts {
    /// The stand-ins' common start (empty: none made).
    prefix: String,
    /// Whether any message holds a stand-in.
    used: bool,
}

/// The shortest literal worth leaving in the file, in bytes.
const PLACED_MIN: usize = 256;

impl PlacedTexts {
    fn new() -> PlacedTexts {
        use std::hash::BuildHasher;
        let drawn = std::collections::hash_map::RandomState::new().hash_one(0x05e5_510d_u64);
        PlacedTexts {
            prefix: format!("\u{FDD0}\u{FDD1}{drawn:016x}:"),
            used: false,
        }
    }

    /// Whether no text is left in the file.
    pub fn is_empty(&self) -> bool {
        !self.used
    }

    /// The stand-in for the literal at `place`.
    fn place(&self, place: LineSpan) -> Value {
        let LineSpan { line, offset, len } = place;
        Value::String(format!("{}{line}:{offset}:{len}", self.prefix))
    }

    /// Where the literal `s` stands for lies, if `s` is a stand-in.
    fn find(&self, s: &str) -> Option<LineSpan> {
        if self.prefix.is_empty() {
            return None;
        }
        let mut parts = s.strip_prefix(self.prefix.as_str())?.splitn(3, ':');
        Some(LineSpan {
            line: parts.next()?.parse().ok()?,
            offset: parts.next()?.parse().ok()?,
            len: parts.next()?.parse().ok()?,
        })
    }

    /// The string `s` stands for, read from `source` (`s` itself when it is no stand-in).
    fn text<'s>(&self, source: &dyn LineSource, s: &'s str) -> std::io::Result<Cow<'s, str>> {
        let Some(place) = self.find(s) else {
            return Ok(Cow::Borrowed(s));
        };
        let bytes = source.line(place)?;
        serde_json::from_slice::<String>(&bytes)
            .map(Cow::Owned)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    /// Writes `v` to `out` as `serde_json::to_writer` writes it, each stand-in as the literal
    /// it stands for, read from `source` (the file the context was computed on). Errors:
    /// writing `out` or reading `source` failed.
    pub fn write_value<W: std::io::Write + ?Sized>(
        &self,
        source: &dyn LineSource,
        out: &mut W,
        v: &Value,
    ) -> std::io::Result<()> {
        match v {
            Value::String(s) => match self.find(s) {
                Some(place) => {
                    let literal = source.line(place)?;
                    if !(literal.len() >= 2
                        && literal.starts_with(b"\"")
                        && literal.ends_with(b"\""))
                    {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!(
                                "line {}: a tool result's text is no longer where it was read",
                                place.line
                            ),
                        ));
                    }
                    out.write_all(&literal)
                }
                None => serde_json::to_writer(out, s).map_err(std::io::Error::from),
            },
            Value::Array(a) => {
                out.write_all(b"[")?;
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.write_all(b",")?;
                    }
                    self.write_value(source, out, x)?;
                }
                out.write_all(b"]")
            }
            Value::Object(o) => {
                out.write_all(b"{")?;
                for (i, (k, x)) in o.iter().enumerate() {
                    if i > 0 {
                        out.write_all(b",")?;
                    }
                    serde_json::to_writer(&mut *out, k).map_err(std::io::Error::from)?;
                    out.write_all(b":")?;
                    self.write_value(source, out, x)?;
                }
                out.write_all(b"}")
            }
            other => serde_json::to_writer(out, other).map_err(std::io::Error::from),
        }
    }
}

/// Whether the JSON string literal `raw` is what `serde_json` writes for the string it reads
/// as: its only escapes are the ones serde_json writes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
/// `\t`, and `\u00xx` in lowercase for the other control characters).
fn canonical_literal(raw: &[u8]) -> bool {
    let [b'"', inner @ .., b'"'] = raw else {
        return false;
    };
    let mut i = 0;
    while let Some(at) = memchr::memchr(b'\\', &inner[i..]) {
        let j = i + at + 1;
        match inner.get(j) {
            Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => i = j + 1,
            Some(b'u') => {
                let Some(&[b'0', b'0', hi @ (b'0' | b'1'), lo]) = inner.get(j + 1..j + 5) else {
                    return false;
                };
                let lo = match lo {
                    b'0'..=b'9' => lo - b'0',
                    b'a'..=b'f' => lo - b'a' + 10,
                    _ => return false,
                };
                let code = (hi - b'0') * 16 + lo;
                if matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                    return false;
                }
                i = j + 5;
            }
            _ => return false,
        }
    }
    true
}

/// Why a context cannot be computed.
#[derive(Debug, Error)]
pub enum ContextError {
    /// The node is not in the tree.
    #[error("no node {0} in the transcript")]
    NoSuchNode(NodeIdx),
    /// A later line with the same `uuid` replaces this one in what Claude loads.
    #[error("line {line} ({id}): a later line (line {by_line}) has the same uuid and replaces it")]
    Shadowed {
        /// The line.
        line: u32,
        /// Its uuid.
        id: EntryId,
        /// The line that replaces it.
        by_line: u32,
    },
    /// A line of the path could not be read back.
    #[error("line {line} ({id}): cannot read the line: {source}")]
    Read {
        /// The line.
        line: u32,
        /// Its uuid.
        id: EntryId,
        /// The read's error.
        #[source]
        source: std::io::Error,
    },
    /// A line of the path is no longer the JSON object it was when the file was opened.
    #[error("line {line} ({id}): the line is no longer what was read: {detail}")]
    Changed {
        /// The line.
        line: u32,
        /// Its uuid.
        id: EntryId,
        /// What is wrong.
        detail: String,
    },
}

impl ContextError {
    /// [`ContextError::Read`] for `e`'s line.
    pub(crate) fn read(e: &Entry, source: std::io::Error) -> ContextError {
        ContextError::Read {
            line: e.span.line,
            id: e.id.clone(),
            source,
        }
    }

    /// [`ContextError::Changed`] for `e`'s line.
    pub(crate) fn changed(e: &Entry, detail: impl Into<String>) -> ContextError {
        ContextError::Changed {
            line: e.span.line,
            id: e.id.clone(),
            detail: detail.into(),
        }
    }

    /// [`ContextError::Shadowed`] for node `n`, which a later line with its uuid replaces.
    pub(crate) fn shadowed(tree: &Tree, n: NodeIdx) -> ContextError {
        let e = &tree.node(n).entry;
        let by = tree.find(e.id.as_str()).unwrap_or(n);
        ContextError::Shadowed {
            line: e.span.line,
            id: e.id.clone(),
            by_line: tree.node(by).entry.span.line,
        }
    }
}

/// The JSON of node `n`'s line, read again from the file as `JSON.parse` reads it. Errors: the
/// line cannot be read, or is no longer JSON.
pub(crate) fn line_value(
    tree: &Tree,
    source: &dyn LineSource,
    n: NodeIdx,
) -> Result<Value, ContextError> {
    let e = &tree.node(n).entry;
    let bytes = source
        .line(e.span)
        .map_err(|err| ContextError::read(e, err))?;
    jsstr::parse_value(&bytes).map_err(|err| ContextError::changed(e, err.to_string()))
}

/// The `messages` Claude Code 2.1.197 sends when it continues the transcript at `leaf` (§7–§8),
/// less what it adds at send time (listed in [`Context::send_time`]).
///
/// A leaf that Claude's loader no longer reaches is read as the file was when it was current:
/// before the last compact boundary without the re-link, off the chains of a file over 5 MiB
/// without the pruning ([`Context::read_as`] says which). Errors: a node not in the tree, a
/// line shadowed by a later line with its uuid, a line that cannot be read back.
pub fn context(
    tree: &Tree,
    source: &(dyn LineSource + Sync),
    leaf: NodeIdx,
    options: &ContextOptions,
) -> Result<Context, ContextError> {
    if leaf as usize >= tree.len() {
        return Err(ContextError::NoSuchNode(leaf));
    }
    let size = options
        .file_size
        .unwrap_or_else(|| match options.before_line {
            Some(line) => offset_of_line(tree, line),
            None => size_read(tree),
        });
    let plans = [
        ReadAs::Loaded,
        ReadAs::BeforeLastBoundary,
        ReadAs::Unpruned,
        ReadAs::UnprunedBeforeLastBoundary,
    ];
    let mut found = None;
    for read_as in plans {
        let (relink, prune) = read_as.plan();
        let loaded = Loaded::new(
            tree,
            Plan {
                size,
                relink,
                prune,
                before_line: options.before_line,
            },
        );
        if loaded.live(leaf) {
            found = Some((loaded, read_as));
            break;
        }
    }
    let Some((loaded, read_as)) = found else {
        return Err(ContextError::shadowed(tree, leaf));
    };
    let path = loaded.path(leaf);
    let mut run = Run::default();
    let mut placed = if options.results_in_place {
        PlacedTexts::new()
    } else {
        PlacedTexts::default()
    };
    let (items, used) = read_items(
        tree,
        source,
        &path,
        options.results_in_place.then_some(&placed),
    )?;
    placed.used = used;
    let items = run.resume_filters(&loaded, items);
    // A resume's first line hangs below the last line the resume filters keep (experiment k3:
    // a tool call killed before its result drops out).
    let continues_after = items.last().map_or(leaf, |i| i.node);
    let resume_appends = resume_appends(&items);
    // My: the messages from the last compact boundary on.
    let items = match items.iter().rposition(|i| i.ty == Ty::System && i.boundary) {
        Some(b) => {
            let mut items = items;
            let kept = items.split_off(b);
            let boundary = tree.node(kept[0].node).entry.id.clone();
            for i in &items {
                run.drop_all(
                    i,
                    Dropped::BeforeCompactBoundary {
                        boundary: boundary.clone(),
                    },
                );
            }
            kept
        }
        None => items,
    };
    let model = options.model.clone().or_else(|| model_of(&items));
    let mid_conv = options
        .mid_conversation_system
        .unwrap_or_else(|| mid_conversation_system_for(model.as_deref()));
    let items = strip_foreign_thinking(items, model.as_deref());
    let msgs = run.normalize(items, mid_conv, &placed, tree, source)?;
    let msgs = errors_text_only(msgs);
    let mut entry_ids = Vec::new();
    let mut listed = HashSet::new();
    for m in &msgs {
        for &n in &m.sources {
            if listed.insert(n) {
                entry_ids.push(tree.node(n).entry.id.clone());
            }
        }
    }
    let mut msgs = msgs;
    let sources = msgs
        .iter_mut()
        .map(|m| std::mem::take(&mut m.sources))
        .collect();
    let messages = if msgs.len() >= PARALLEL_ITEMS {
        use rayon::prelude::*;
        msgs.into_par_iter().map(to_param).collect()
    } else {
        msgs.into_iter().map(to_param).collect()
    };
    Ok(Context {
        leaf,
        continues_after,
        messages,
        entry_ids,
        sources,
        path,
        dropped: run.dropped,
        model,
        mid_conversation_system: mid_conv,
        send_time: SendTime {
            user_context: USER_CONTEXT,
            cache_control: CACHE_CONTROL,
            compact_instruction: COMPACT_INSTRUCTION,
            resume_appends,
            unrecorded_subagent_attachments: tree.node(leaf).entry.sidechain,
        },
        not_rendered: run.not_rendered,
        read_as,
        file_size: size,
        before_line: options.before_line,
        placed,
    })
}

/// Whether Claude Code 2.1.197 sends attachments as mid-conversation `role: "system"` messages
/// to `model` (*source* `sxn`, §8.1): not to `claude-3-*` and the models of
/// [`NO_MID_CONVERSATION_SYSTEM`] (a `[1m]`/`[2m]` suffix aside); to every other, and when no
/// model is known.
pub fn mid_conversation_system_for(model: Option<&str>) -> bool {
    let base = base_model(model.unwrap_or(""));
    !(base.contains("claude-3-") || NO_MID_CONVERSATION_SYSTEM.contains(&base.as_str()))
}

/// The model name without its `[1m]`/`[2m]` context suffix (any case, anywhere).
fn base_model(model: &str) -> String {
    let mut out = String::with_capacity(model.len());
    let mut rest = model;
    while !rest.is_empty() {
        let b = rest.as_bytes();
        if b.len() >= 4
            && b[0] == b'['
            && (b[1] == b'1' || b[1] == b'2')
            && (b[2] == b'm' || b[2] == b'M')
            && b[3] == b']'
        {
            rest = &rest[4..];
            continue;
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The model of the last assistant line a model wrote (a resume keeps it).
fn model_of(items: &[Item]) -> Option<String> {
    items.iter().rev().find_map(|i| match &i.model {
        Some(m) if i.ty == Ty::Assistant && m != SYNTHETIC_MODEL => Some(m.clone()),
        _ => None,
    })
}

// ---------------------------------------------------------------------------------------------
// The lines of the path, read back.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    User,
    Assistant,
    Attachment,
    System,
    /// A `role: "system"` message made by normalization.
    ApiSystem,
}

/// A line of the path or a message being built from lines.
#[derive(Clone, Debug)]
struct Item {
    ty: Ty,
    /// The first line it comes from.
    node: NodeIdx,
    /// `message.content` (user/assistant), `content` (system), the text (api system).
    content: Value,
    /// An attachment's `attachment`.
    attachment: Value,
    /// `message.id` (assistant; `None` when absent or null).
    id: Option<Value>,
    /// `message.model` when a string (assistant).
    model: Option<String>,
    meta: bool,
    compact_summary: bool,
    virtual_: bool,
    tool_use_result: bool,
    api_error: bool,
    boundary: bool,
    subtype: String,
    /// A `model_refusal_fallback` line's `retractedMessageUuids`.
    retracted: Option<Vec<String>>,
    /// The lines it holds.
    sources: Vec<NodeIdx>,
}

impl Item {
    fn message(ty: Ty, node: NodeIdx, content: Value, sources: Vec<NodeIdx>) -> Item {
        Item {
            ty,
            node,
            content,
            attachment: Value::Null,
            id: None,
            model: None,
            meta: false,
            compact_summary: false,
            virtual_: false,
            tool_use_result: false,
            api_error: false,
            boundary: false,
            subtype: String::new(),
            retracted: None,
            sources,
        }
    }

    fn is(&self, ty: Ty) -> bool {
        self.ty == ty
    }

    fn blocks(&self) -> Option<&Vec<Value>> {
        self.content.as_array()
    }

    /// A user message one of whose blocks is a `tool_result`.
    fn holds_result(&self) -> bool {
        self.is(Ty::User)
            && self
                .blocks()
                .is_some_and(|c| c.iter().any(|b| block_type(b) == Some("tool_result")))
    }

    /// A user message whose first block is a `tool_result`.
    fn starts_with_result(&self) -> bool {
        self.blocks()
            .and_then(|c| c.first())
            .is_some_and(|b| block_type(b) == Some("tool_result"))
    }
}

/// What a line's body holds for the context.
#[derive(Default)]
struct Body<'a> {
    uuid: Option<String>,
    meta: bool,
    compact_summary: bool,
    virtual_: bool,
    api_error: bool,
    tool_use_result: bool,
    /// `message.content`, `message.id`, `message.model`.
    content: Option<Content<'a>>,
    id: Option<Value>,
    model: Option<Value>,
    attachment: Option<Value>,
    /// A system line's `content`.
    system_content: Option<Value>,
    retracted: Option<Value>,
}

/// The fields of a line the context reads, in one pass over the line: the values it keeps are
/// built as they are read, the rest (`toolUseResult`, usage, …) is skipped. A `null` reads as
/// absent, which every use of a field treats alike.
#[derive(serde::Deserialize)]
struct BodyProbe<'a> {
    #[serde(borrow)]
    uuid: Option<&'a RawValue>,
    #[serde(rename = "isMeta", borrow)]
    is_meta: Option<&'a RawValue>,
    #[serde(rename = "isCompactSummary", borrow)]
    is_compact_summary: Option<&'a RawValue>,
    #[serde(rename = "isVirtual", borrow)]
    is_virtual: Option<&'a RawValue>,
    #[serde(rename = "isApiErrorMessage", borrow)]
    is_api_error: Option<&'a RawValue>,
    #[serde(
        rename = "toolUseResult",
        borrow,
        default,
        deserialize_with = "raw_or_null"
    )]
    tool_use_result: Option<&'a RawValue>,
    /// Not an object (nor null): the line goes the slow way.
    #[serde(borrow)]
    message: Option<MessageProbe<'a>>,
    attachment: Option<Value>,
    content: Option<Value>,
    #[serde(rename = "retractedMessageUuids")]
    retracted: Option<Value>,
}

#[derive(serde::Deserialize)]
struct MessageProbe<'a> {
    id: Option<Value>,
    model: Option<Value>,
    #[serde(borrow)]
    content: Option<Content<'a>>,
}

/// `message.content` as the one-pass read takes it: the blocks of a list with the `content` of
/// each left as its JSON text until the block's type is known ([`Content::into_value`]).
enum Content<'a> {
    Value(Value),
    Blocks(Vec<Block<'a>>),
}

/// A block of a list content: an object (with its `content` key holding `null` in its place
/// and the value's text beside), or any other value.
enum Block<'a> {
    Value(Value),
    Object(Map<String, Value>, Option<&'a RawValue>),
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Content<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Content<'a>, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(b) = seq.next_element::<Block<'a>>()? {
                    blocks.push(b);
                }
                Ok(Content::Blocks(blocks))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Content<'a>, A::Error> {
                serde::Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(Content::Value)
            }
            crate::core::scalars::visit_scalars!(Content<'a>, value => Content::Value);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Block<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Block<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Block<'a>, A::Error> {
                let mut o = Map::new();
                let mut content = None;
                while let Some(k) = map.next_key::<String>()? {
                    if k == "content" {
                        content = Some(map.next_value::<&'a RawValue>()?);
                        o.insert(k, Value::Null);
                    } else {
                        let v = map.next_value::<Value>()?;
                        o.insert(k, v);
                    }
                }
                Ok(Block::Object(o, content))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<Block<'a>, A::Error> {
                serde::Deserialize::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(Block::Value)
            }
            crate::core::scalars::visit_scalars!(Block<'a>, value => Block::Value);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl Content<'_> {
    /// The content as a value; with `placed`, the long string `content` of a `tool_result`
    /// block that is written as serde_json writes it is left in the line (`line`, read at
    /// `span`) and named by a stand-in. `None`: a block's `content` is not what serde_json
    /// reads (the line takes the slow path).
    /// `line` is the line as read, less the result copy `copy` when it is given.
    fn into_value(
        self,
        line: &[u8],
        span: LineSpan,
        copy: Option<ResultCopy>,
        placed: Option<&PlacedTexts>,
        used: &mut bool,
    ) -> Option<Value> {
        let blocks = match self {
            Content::Value(v) => return Some(v),
            Content::Blocks(b) => b,
        };
        let mut out = Vec::with_capacity(blocks.len());
        for b in blocks {
            match b {
                Block::Value(v) => out.push(v),
                Block::Object(o, None) => out.push(Value::Object(o)),
                Block::Object(mut o, Some(raw)) => {
                    let text = raw.get().as_bytes();
                    let value = match placed {
                        Some(placed)
                            if text.len() >= PLACED_MIN
                                && o.get("type").and_then(Value::as_str) == Some("tool_result")
                                && canonical_literal(text) =>
                        {
                            let at = (text.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
                            let at = copy.map_or(at, |c| c.offset_in_line(at));
                            *used = true;
                            placed.place(LineSpan {
                                line: span.line,
                                offset: span.offset + at as u64,
                                len: u32::try_from(text.len()).ok()?,
                            })
                        }
                        _ => match text {
                            [b'"', inner @ .., b'"'] if memchr::memchr(b'\\', inner).is_none() => {
                                Value::String(std::str::from_utf8(inner).ok()?.to_owned())
                            }
                            _ => serde_json::from_str(raw.get()).ok()?,
                        },
                    };
                    o.insert("content".into(), value);
                    out.push(Value::Object(o));
                }
            }
        }
        Some(Value::Array(out))
    }
}

/// A present field's raw value, `null` included.
fn raw_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue as serde::Deserialize>::deserialize(d).map(Some)
}

impl<'a> Body<'a> {
    /// Reads the fields without building the rest of the line (`None`: the line needs the slow
    /// path, e.g. a repeated key, a lone surrogate, or a `message` that is not an object). The
    /// values are serde_json's, as [`jsstr::parse_value`] reads any text that needs no slow path.
    fn fast(bytes: &'a [u8]) -> Option<Body<'a>> {
        let p: BodyProbe<'_> = serde_json::from_slice(bytes).ok()?;
        let flag = |raw: Option<&RawValue>| raw.is_some_and(|r| r.get() == "true");
        let message = p.message.unwrap_or(MessageProbe {
            id: None,
            model: None,
            content: None,
        });
        Some(Body {
            uuid: p.uuid.and_then(jsstr::decode_str).map(|s| s.into_owned()),
            meta: flag(p.is_meta),
            compact_summary: flag(p.is_compact_summary),
            virtual_: flag(p.is_virtual),
            api_error: flag(p.is_api_error),
            tool_use_result: match p.tool_use_result {
                None => false,
                Some(r) if r.get().starts_with(['{', '[']) => true,
                Some(r) => truthy(jsstr::parse_value(r.get().as_bytes()).ok().as_ref()),
            },
            content: message.content,
            id: message.id,
            model: message.model,
            attachment: p.attachment,
            system_content: p.content,
            retracted: p.retracted,
        })
    }

    /// Reads the whole line as `JSON.parse` does.
    fn slow(bytes: &[u8]) -> Result<Body<'a>, String> {
        let value = jsstr::parse_value(bytes).map_err(|e| format!("invalid JSON: {e}"))?;
        let Value::Object(mut line) = value else {
            return Err("not a JSON object".into());
        };
        let flag = |line: &Map<String, Value>, k: &str| line.get(k) == Some(&Value::Bool(true));
        let mut message = match line.remove("message") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        Ok(Body {
            uuid: line.get("uuid").and_then(Value::as_str).map(str::to_owned),
            meta: flag(&line, "isMeta"),
            compact_summary: flag(&line, "isCompactSummary"),
            virtual_: flag(&line, "isVirtual"),
            api_error: flag(&line, "isApiErrorMessage"),
            tool_use_result: truthy(line.get("toolUseResult")),
            content: message.remove("content").map(Content::Value),
            id: message.remove("id"),
            model: message.remove("model"),
            attachment: line.remove("attachment"),
            system_content: line.remove("content"),
            retracted: line.remove("retractedMessageUuids"),
        })
    }
}

/// A leaf's path of fewer bytes of lines than this is read on the calling thread; from this on,
/// on rayon's pool ([`context`]).
pub const PARALLEL_FROM: u64 = 4 << 20;

/// [`read_item`] of every line of `path`, in order, and whether any text was left in the file
/// (`placed`). A long path is read on rayon's pool in blocks of lines that lie close together
/// (256 KiB of the file, one range read each): the lines are independent until the filters.
/// Errors: the first line (in path order) that cannot be read or changed.
fn read_items(
    tree: &Tree,
    source: &(dyn LineSource + Sync),
    path: &[NodeIdx],
    placed: Option<&PlacedTexts>,
) -> Result<(Vec<Item>, bool), ContextError> {
    let spans = path.iter().map(|&n| tree.node(n).entry.span);
    let bytes: u64 = spans.clone().map(|s| u64::from(s.len)).sum();
    let mut used = false;
    if bytes < PARALLEL_FROM || rayon::current_num_threads() < 2 {
        let items = path
            .iter()
            .map(|&n| read_item(tree, source, n, placed, &mut used))
            .collect::<Result<_, _>>()?;
        return Ok((items, used));
    }
    use rayon::prelude::*;
    let blocks = line_blocks(spans, 256 << 10, 1024);
    let read: Vec<Result<(Vec<Item>, bool), ContextError>> = blocks
        .par_iter()
        .map(|block| {
            let lines = Buffered::read(source, block);
            let mut used = false;
            let items = path[block.items.clone()]
                .iter()
                .map(|&n| read_item(tree, &lines, n, placed, &mut used))
                .collect::<Result<_, _>>()?;
            Ok((items, used))
        })
        .collect();
    let mut items = Vec::with_capacity(path.len());
    for block in read {
        let (block, u) = block?;
        used |= u;
        items.extend(block);
    }
    Ok((items, used))
}

fn read_item(
    tree: &Tree,
    source: &dyn LineSource,
    n: NodeIdx,
    mut placed: Option<&PlacedTexts>,
    used: &mut bool,
) -> Result<Item, ContextError> {
    let e = &tree.node(n).entry;
    let bytes = source
        .line(e.span)
        .map_err(|err| ContextError::read(e, err))?;
    let changed = |detail: String| ContextError::changed(e, detail);
    if !matches!(e.kind, Kind::User { .. }) {
        placed = None;
    }
    // Claude's copy of a tool's result is left out of what is read: only its truthiness counts.
    let (bytes, copy) = match &e.kind {
        Kind::User {
            result_copy: Some(copy),
            ..
        } => match copy.cut_from(&bytes) {
            Some(cut) => (Cow::Owned(cut), Some(*copy)),
            None => (bytes, None),
        },
        _ => (bytes, None),
    };
    let fast = Body::fast(&bytes).and_then(|mut b| {
        let content = match b.content.take() {
            Some(c) => Some(c.into_value(&bytes, e.span, copy, placed, used)?),
            None => None,
        };
        Some((b, content))
    });
    let (body, content) = match fast {
        Some(read) => read,
        None => {
            let mut b = Body::slow(&bytes).map_err(changed)?;
            let content = b
                .content
                .take()
                .and_then(|c| c.into_value(&bytes, e.span, copy, None, &mut false));
            (b, content)
        }
    };
    if body.uuid.as_deref() != Some(e.id.as_str()) {
        return Err(changed("its uuid differs".into()));
    }
    let mut item = Item::message(Ty::User, n, Value::Null, vec![n]);
    item.meta = body.meta;
    item.compact_summary = body.compact_summary;
    item.virtual_ = body.virtual_;
    item.api_error = body.api_error;
    item.tool_use_result = body.tool_use_result;
    match &e.kind {
        Kind::User { .. } => {
            item.content = content.unwrap_or(Value::Null);
        }
        Kind::Assistant { .. } => {
            item.ty = Ty::Assistant;
            item.content = content.unwrap_or(Value::Null);
            item.id = body.id.filter(|v| !v.is_null());
            item.model = body.model.and_then(|m| m.as_str().map(str::to_owned));
        }
        Kind::Attachment { .. } => {
            item.ty = Ty::Attachment;
            item.attachment = body.attachment.unwrap_or(Value::Null);
        }
        Kind::System { subtype, .. } => {
            item.ty = Ty::System;
            item.subtype = subtype.to_string();
            item.boundary = is_boundary(e);
            item.content = body.system_content.unwrap_or(Value::Null);
            if subtype == "model_refusal_fallback" {
                item.retracted = body.retracted.filter(|v| !v.is_null()).map(|v| match v {
                    Value::Array(a) => a
                        .iter()
                        .map(|u| template_string(Some(u)).chars().take(36).collect())
                        .collect(),
                    other => vec![template_string(Some(&other))],
                });
            }
        }
    }
    Ok(item)
}

// ---------------------------------------------------------------------------------------------
// Block helpers.

/// `b[k]` when `b` is an object. A block has a handful of keys, which a scan finds sooner than
/// a lookup that hashes `k` (the normalization asks each block for its type many times).
fn field<'v>(b: &'v Value, k: &str) -> Option<&'v Value> {
    match b {
        Value::Object(o) if o.len() <= 8 => o.iter().find(|(key, _)| *key == k).map(|(_, v)| v),
        _ => b.get(k),
    }
}

fn block_type(b: &Value) -> Option<&str> {
    field(b, "type").and_then(Value::as_str)
}

fn is_thinking(b: &Value) -> bool {
    matches!(block_type(b), Some("thinking" | "redacted_thinking"))
}

/// A text block whose `text` is not a string.
fn is_bad_text(b: &Value) -> bool {
    block_type(b) == Some("text") && !field(b, "text").is_some_and(Value::is_string)
}

fn text_of(b: &Value) -> Option<&str> {
    field(b, "text").and_then(Value::as_str)
}

/// A string content as one text block; a list as is; anything else as no block.
fn blocks_of(content: Value) -> Vec<Value> {
    match content {
        Value::String(s) => vec![object([
            ("type", "text".into()),
            ("text", Value::String(s)),
        ])],
        Value::Array(a) => a,
        _ => Vec::new(),
    }
}

/// `tum`: two block lists joined; when `a` ends and `b` starts with text, `a`'s last text gains
/// `"\n"`.
fn join_blocks(mut a: Vec<Value>, b: Vec<Value>) -> Vec<Value> {
    if let (Some(last), Some(first)) = (a.last_mut(), b.first())
        && block_type(last) == Some("text")
        && block_type(first) == Some("text")
        && let Value::Object(o) = last
    {
        let text = format!("{}\n", template_string(o.get("text")));
        o.insert("text".into(), Value::String(text));
    }
    a.extend(b);
    a
}

/// `jfc`: `tool_result` blocks first, each group in order.
fn results_first(blocks: Vec<Value>) -> Vec<Value> {
    let (mut results, rest): (Vec<Value>, Vec<Value>) = blocks
        .into_iter()
        .partition(|b| block_type(b) == Some("tool_result"));
    results.extend(rest);
    results
}

/// `rdr`: a user message merged into the one before it.
fn merge_users(mut a: Item, b: Item) -> Item {
    let content = results_first(join_blocks(
        blocks_of(std::mem::take(&mut a.content)),
        blocks_of(b.content),
    ));
    a.content = Value::Array(content);
    a.sources.extend(b.sources);
    a
}

/// `Ufc`: in one assistant message, `tool_use` blocks move after the others when a
/// non-`tool_use` block follows one (unless thinking would be reordered).
fn tool_uses_last(blocks: Vec<Value>) -> Vec<Value> {
    let mut first = None;
    let mut after = false;
    let mut thinking_pair = false;
    let mut prev_thinking = false;
    let mut tool_since = false;
    for (i, b) in blocks.iter().enumerate() {
        if block_type(b) == Some("tool_use") {
            first.get_or_insert(i);
            tool_since = true;
        } else {
            if first.is_some() {
                after = true;
            }
            let c = is_thinking(b);
            if c && prev_thinking && tool_since {
                thinking_pair = true;
            }
            prev_thinking = c;
            tool_since = false;
        }
    }
    if !after || thinking_pair {
        return blocks;
    }
    let (uses, mut rest): (Vec<Value>, Vec<Value>) = blocks
        .into_iter()
        .partition(|b| block_type(b) == Some("tool_use"));
    rest.extend(uses);
    rest
}

/// `Zcm`: a line of the same response joins the assistant message.
fn merge_assistants(mut a: Item, b: Item) -> Item {
    let n: Vec<Value> = blocks_of(std::mem::take(&mut a.content))
        .into_iter()
        .chain(blocks_of(b.content))
        .filter(|x| !is_bad_text(x))
        .collect();
    // The blocks kept: all but blank text blocks, unless between two thinking blocks.
    let keep: Vec<bool> = n
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let blank = text_of(x).is_some_and(|t| !t.is_empty() && jsstr::trim(t).is_empty());
            if block_type(x) != Some("text") || !blank {
                return true;
            }
            let prev = i
                .checked_sub(1)
                .and_then(|p| n.get(p))
                .is_some_and(is_thinking);
            prev && n.get(i + 1).is_some_and(is_thinking)
        })
        .collect();
    // Unless that would leave only thinking.
    let real = n.iter().zip(&keep).any(|(x, k)| *k && !is_thinking(x));
    let r = if real {
        n.into_iter()
            .zip(keep)
            .filter_map(|(x, k)| k.then_some(x))
            .collect()
    } else {
        n
    };
    a.content = Value::Array(tool_uses_last(r));
    a.sources.extend(b.sources);
    a
}

/// `Kdc`: the `input` of two tools loses keys (the others keep their order).
fn normalize_tool_input(name: Option<&Value>, input: Value) -> Value {
    let drop_keys: &[&str] = match (name.and_then(Value::as_str), &input) {
        (Some("ExitPlanMode"), Value::Object(o))
            if o.contains_key("plan") || o.contains_key("planFilePath") =>
        {
            &["plan", "planFilePath"]
        }
        (Some("Edit"), Value::Object(o)) if o.contains_key("edits") => {
            &["old_string", "new_string", "replace_all"]
        }
        _ => return input,
    };
    let Value::Object(mut o) = input else {
        return input;
    };
    for k in drop_keys {
        o.shift_remove(*k);
    }
    Value::Object(o)
}

/// A `tool_use` block as it is sent: exactly `{type, id, name, input}` (its values moved, not
/// copied).
fn rebuild_tool_use(b: Value) -> Value {
    let mut from = match b {
        Value::Object(from) => from,
        _ => Map::new(),
    };
    let mut o = Map::new();
    o.insert("type".into(), Value::String("tool_use".into()));
    for k in ["id", "name"] {
        if let Some(v) = from.get_mut(k) {
            o.insert(k.into(), v.take());
        }
    }
    if let Some(input) = from.get_mut("input") {
        let input = input.take();
        o.insert("input".into(), normalize_tool_input(o.get("name"), input));
    }
    Value::Object(o)
}

/// `Dfc`: only text blocks, each blank or "(no content)" (or not a string).
fn whitespace_only(content: &[Value]) -> bool {
    !content.is_empty()
        && content.iter().all(|b| {
            block_type(b) == Some("text")
                && text_of(b).is_none_or(|t| {
                    let t = jsstr::trim(t);
                    t.is_empty() || t == NO_CONTENT
                })
        })
}

/// A key for an id value (`message.id`, `tool_use.id`) in a set: a string is itself; absent
/// and other values are marked apart.
fn key(v: Option<&Value>) -> Cow<'_, str> {
    match v {
        None => Cow::Borrowed("\u{0}undefined"),
        Some(Value::String(s)) => Cow::Borrowed(s),
        Some(v) => Cow::Owned(format!("\u{0}{v}")),
    }
}

/// Keeps the items `keep` says (decided beforehand), recording why the others were dropped.
fn retain_decided(run: &mut Run, items: Vec<Item>, keep: &[bool], why: &Dropped) -> Vec<Item> {
    let mut out = Vec::with_capacity(items.len());
    for (i, k) in items.into_iter().zip(keep) {
        if *k {
            out.push(i);
        } else {
            run.drop_all(&i, why.clone());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The run: the filters and normalization, recording what each drops.

#[derive(Default)]
struct Run {
    dropped: Vec<(NodeIdx, Dropped)>,
    not_rendered: Vec<String>,
}

impl Run {
    fn drop_all(&mut self, item: &Item, why: Dropped) {
        for &n in &item.sources {
            self.dropped.push((n, why.clone()));
        }
    }

    /// `Zwo`'s filters, in order (§7.3).
    fn resume_filters(&mut self, loaded: &Loaded<'_>, items: Vec<Item>) -> Vec<Item> {
        // 1. U8t: lines retracted by a model_refusal_fallback system line.
        let mut retracted: HashMap<String, EntryId> = HashMap::new();
        for i in &items {
            if let (Ty::System, Some(r)) = (i.ty, &i.retracted) {
                for u in r {
                    retracted.insert(u.clone(), loaded.entry(i.node).id.clone());
                }
            }
        }
        let mut out = Vec::with_capacity(items.len());
        for mut i in items {
            if !retracted.is_empty() && i.ty != Ty::System {
                let uuid: String = loaded.entry(i.node).id.as_str().chars().take(36).collect();
                if let Some(by) = retracted.get(&uuid) {
                    self.drop_all(&i, Dropped::Retracted { by: by.clone() });
                    continue;
                }
            }
            // 2. Attachment types dropped on load.
            if i.ty == Ty::Attachment {
                let t = i
                    .attachment
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if DROPPED_ON_LOAD.contains(&t) {
                    self.drop_all(
                        &i,
                        Dropped::AttachmentTypeDropped {
                            attachment_type: t.to_owned(),
                        },
                    );
                    continue;
                }
            }
            // 3. Text blocks whose text is not a string.
            if matches!(i.ty, Ty::User | Ty::Assistant)
                && let Value::Array(c) = &mut i.content
                && c.iter().any(is_bad_text)
            {
                c.retain(|b| !is_bad_text(b));
                if c.is_empty() {
                    self.drop_all(&i, Dropped::NoTextLeft);
                    continue;
                }
            }
            out.push(i);
        }
        let out = self.drop_unresolved_tool_uses(out);
        let out = self.drop_orphan_thinking(out);
        self.drop_whitespace_assistants(out)
    }

    /// `xyt`: assistant lines whose `tool_use` blocks all have no `tool_result` anywhere.
    fn drop_unresolved_tool_uses(&mut self, items: Vec<Item>) -> Vec<Item> {
        let keep: Vec<bool> = {
            let mut uses = HashSet::new();
            let mut results = HashSet::new();
            for i in &items {
                if !matches!(i.ty, Ty::User | Ty::Assistant) {
                    continue;
                }
                for b in i.blocks().map_or(&[][..], Vec::as_slice) {
                    match block_type(b) {
                        Some("tool_use") => {
                            uses.insert(key(field(b, "id")));
                        }
                        Some("tool_result") => {
                            results.insert(key(field(b, "tool_use_id")));
                        }
                        _ => {}
                    }
                }
            }
            if uses.iter().all(|u| results.contains(u)) {
                return items;
            }
            items
                .iter()
                .map(|i| {
                    let Some(c) = i.blocks().filter(|_| i.is(Ty::Assistant)) else {
                        return true;
                    };
                    let mut ids = c
                        .iter()
                        .filter(|b| block_type(b) == Some("tool_use"))
                        .map(|b| key(field(b, "id")))
                        .peekable();
                    ids.peek().is_none() || ids.any(|id| results.contains(&id))
                })
                .collect()
        };
        retain_decided(self, items, &keep, &Dropped::UnresolvedToolUse)
    }

    /// `e6e`: an assistant message holding only thinking blocks whose response has no other
    /// block.
    fn drop_orphan_thinking(&mut self, items: Vec<Item>) -> Vec<Item> {
        let keep: Vec<bool> = {
            let mut real = HashSet::new();
            for i in &items {
                if let (Ty::Assistant, Some(c), Some(id)) = (i.ty, i.blocks(), &i.id)
                    && c.iter().any(|b| !is_thinking(b))
                    && truthy(Some(id))
                {
                    real.insert(key(Some(id)));
                }
            }
            items
                .iter()
                .map(|i| {
                    !(i.is(Ty::Assistant)
                        && i.blocks()
                            .is_some_and(|c| !c.is_empty() && c.iter().all(is_thinking))
                        && !i
                            .id
                            .as_ref()
                            .is_some_and(|id| real.contains(&key(Some(id)))))
                })
                .collect()
        };
        if keep.iter().all(|k| *k) {
            return items;
        }
        retain_decided(self, items, &keep, &Dropped::OrphanThinking)
    }

    /// `Z8e`: assistant messages with only blank text (and no real block in their response)
    /// are dropped, then adjacent user messages merged.
    fn drop_whitespace_assistants(&mut self, items: Vec<Item>) -> Vec<Item> {
        let blank =
            |i: &Item| i.is(Ty::Assistant) && i.blocks().is_some_and(|c| whitespace_only(c));
        if !items.iter().any(blank) {
            return items;
        }
        let keep: Vec<bool> = {
            let mut real = HashSet::new();
            for i in &items {
                let (Ty::Assistant, Some(id), Some(c)) = (i.ty, &i.id, i.blocks()) else {
                    continue;
                };
                if !truthy(Some(id)) {
                    continue;
                }
                let has_real = c.iter().filter(|b| !is_thinking(b)).any(|b| {
                    let t = jsstr::trim(text_of(b).unwrap_or(""));
                    block_type(b) != Some("text") || !(t.is_empty() || t == NO_CONTENT)
                });
                if has_real {
                    real.insert(key(Some(id)));
                }
            }
            items
                .iter()
                .map(|i| {
                    let of_real =
                        i.id.as_ref()
                            .is_some_and(|id| real.contains(&key(Some(id))));
                    !blank(i) || of_real
                })
                .collect()
        };
        let kept = retain_decided(self, items, &keep, &Dropped::WhitespaceOnly);
        let mut out: Vec<Item> = Vec::with_capacity(kept.len());
        for i in kept {
            push_user_or(&mut out, i);
        }
        out
    }

    /// normalizeMessagesForAPI (`Ak`, §7.6), with mid-conversation system messages or without.
    fn normalize(
        &mut self,
        items: Vec<Item>,
        mid_conv: bool,
        placed: &PlacedTexts,
        tree: &Tree,
        source: &dyn LineSource,
    ) -> Result<Vec<Item>, ContextError> {
        let items = self.reorder_attachments(items);
        let mut g = Built::default();
        let mut held: Vec<(String, NodeIdx)> = Vec::new();
        let mut made_system = false;
        for k in items {
            match k.ty {
                Ty::System | Ty::ApiSystem if k.subtype != "local_command" => {
                    self.drop_all(
                        &k,
                        Dropped::SystemNotSent {
                            subtype: k.subtype.clone(),
                        },
                    );
                }
                Ty::Assistant if k.api_error && k.model.as_deref() == Some(SYNTHETIC_MODEL) => {
                    self.drop_all(&k, Dropped::ApiErrorMessage);
                }
                Ty::System | Ty::ApiSystem | Ty::User => {
                    let d = Item::message(Ty::User, k.node, k.content, k.sources);
                    push_user(&mut g, d);
                }
                Ty::Assistant => {
                    let mut d = k;
                    if let Value::Array(c) = &mut d.content {
                        for b in c.iter_mut() {
                            if block_type(b) == Some("tool_use") {
                                *b = rebuild_tool_use(b.take());
                            }
                        }
                    }
                    let at = g.same_response(d.id.as_ref());
                    match at {
                        Some(i) => {
                            let x = std::mem::replace(
                                &mut g.g[i],
                                Item::message(Ty::User, 0, Value::Null, vec![]),
                            );
                            g.g[i] = merge_assistants(x, d);
                        }
                        None => {
                            flush(&mut g, &mut held, &mut made_system);
                            if let Value::Array(c) = d.content {
                                d.content = Value::Array(tool_uses_last(c));
                            }
                            g.push(d);
                        }
                    }
                }
                Ty::Attachment => {
                    let ty = k
                        .attachment
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    let rendered = match attachment::render(&k.attachment) {
                        Rendering::Messages(m) => m,
                        Rendering::Unknown => {
                            if !self.not_rendered.contains(&ty) {
                                self.not_rendered.push(ty.clone());
                            }
                            self.drop_all(
                                &k,
                                Dropped::NotRendered {
                                    attachment_type: ty,
                                },
                            );
                            continue;
                        }
                    };
                    if rendered.is_empty() {
                        self.drop_all(
                            &k,
                            Dropped::RendersToNothing {
                                attachment_type: ty,
                            },
                        );
                        continue;
                    }
                    if mid_conv {
                        let text = rendered
                            .iter()
                            .map(|m| unwrap(m))
                            .collect::<Vec<_>>()
                            .join("\n");
                        if !jsstr::trim(&text).is_empty() {
                            held.push((text, k.node));
                            continue;
                        }
                    }
                    match g.last_mut() {
                        Some(last) if last.is(Ty::User) => {
                            for m in rendered {
                                fold_attachment(last, Value::String(m), placed, source).map_err(
                                    |err| ContextError::read(&tree.node(k.node).entry, err),
                                )?;
                            }
                            last.sources.push(k.node);
                        }
                        _ => {
                            for m in rendered {
                                g.push(Item::message(
                                    Ty::User,
                                    k.node,
                                    Value::String(m),
                                    vec![k.node],
                                ));
                            }
                        }
                    }
                }
            }
        }
        flush(&mut g, &mut held, &mut made_system);
        let out = self.drop_orphan_thinking(g.g);
        let out = drop_trailing_thinking(out);
        let out = self.drop_whitespace_assistants(out);
        let out = fill_empty_assistants(out);
        Ok(if mid_conv && made_system {
            place_systems(out)
        } else {
            out
        })
    }

    /// `jcm`: attachments move up past plain user messages to just after the nearest earlier
    /// assistant message or `tool_result` user message; virtual messages are dropped.
    fn reorder_attachments(&mut self, items: Vec<Item>) -> Vec<Item> {
        let virtual_ = |i: &Item| matches!(i.ty, Ty::User | Ty::Assistant) && i.virtual_;
        if !items.iter().any(|i| i.is(Ty::Attachment) || virtual_(i)) {
            return items;
        }
        let mut r = Vec::with_capacity(items.len());
        let mut held: Vec<Item> = Vec::new();
        for m in items.into_iter().rev() {
            if m.is(Ty::Attachment) {
                held.push(m);
                continue;
            }
            let anchor = m.is(Ty::Assistant) || (m.is(Ty::User) && m.starts_with_result());
            if anchor && !held.is_empty() {
                r.append(&mut held);
                if virtual_(&m) {
                    self.drop_all(&m, Dropped::Virtual);
                } else {
                    r.push(m);
                }
            } else if virtual_(&m) {
                self.drop_all(&m, Dropped::Virtual);
            } else {
                r.push(m);
            }
        }
        r.append(&mut held);
        r.reverse();
        r
    }
}

/// Where normalization appends messages.
trait Sink {
    fn last_mut(&mut self) -> Option<&mut Item>;
    fn push(&mut self, item: Item);
}

impl Sink for Vec<Item> {
    fn last_mut(&mut self) -> Option<&mut Item> {
        self.as_mut_slice().last_mut()
    }
    fn push(&mut self, item: Item) {
        Vec::push(self, item);
    }
}

/// The list `Ak` builds, indexed for its look-back: an assistant line joins the latest
/// assistant message of its response within the trailing run of assistant, system and
/// `tool_result` user messages. Only the last message of the list can stop being part of such
/// a run (a user message merged into), so the run restarts only on a push, and the
/// assistants in the run are kept by response: each look-back is one lookup instead of a walk
/// over the run (a long agentic turn is thousands of messages).
#[derive(Default)]
struct Built {
    g: Vec<Item>,
    /// The latest assistant message of the run by the hash of its response's id (a hit is
    /// checked; a collision falls back to the walk).
    by_id: HashMap<u64, usize>,
    hasher: foldhash::fast::FixedState,
}

impl Built {
    /// Whether a message continues the run the look-back walks.
    fn in_run(x: &Item) -> bool {
        x.is(Ty::Assistant) || x.is(Ty::ApiSystem) || x.holds_result()
    }

    /// The latest assistant message of response `id` in the trailing run.
    fn same_response(&self, id: Option<&Value>) -> Option<usize> {
        let last = self.g.last()?;
        if !Built::in_run(last) {
            return None;
        }
        let i = *self.by_id.get(&self.hash(id))?;
        if self.g[i].id.as_ref() == id {
            return Some(i);
        }
        // Two responses whose ids share a hash: walk the run.
        self.g
            .iter()
            .enumerate()
            .rev()
            .take_while(|(_, x)| Built::in_run(x))
            .find(|(_, x)| x.is(Ty::Assistant) && x.id.as_ref() == id)
            .map(|(i, _)| i)
    }

    fn hash(&self, id: Option<&Value>) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(key(id).as_ref())
    }
}

impl Sink for Built {
    fn last_mut(&mut self) -> Option<&mut Item> {
        self.g.last_mut()
    }
    fn push(&mut self, item: Item) {
        if self.g.last().is_some_and(|last| !Built::in_run(last)) {
            self.by_id.clear();
        }
        if item.is(Ty::Assistant) {
            let h = self.hash(item.id.as_ref());
            self.by_id.insert(h, self.g.len());
        }
        self.g.push(item);
    }
}

/// A user message joins the user message before it, or is appended.
fn push_user(g: &mut impl Sink, d: Item) {
    match g.last_mut() {
        Some(last) if last.is(Ty::User) => {
            let prev = std::mem::replace(last, Item::message(Ty::User, 0, Value::Null, vec![]));
            *last = merge_users(prev, d);
        }
        _ => g.push(d),
    }
}

/// The held attachment texts become one message: appended to a system message, a system
/// message after a user message, else a user `<system-reminder>` message.
fn flush(g: &mut impl Sink, held: &mut Vec<(String, NodeIdx)>, made_system: &mut bool) {
    if held.is_empty() {
        return;
    }
    let text = held
        .iter()
        .map(|(t, _)| t.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let nodes: Vec<NodeIdx> = held.drain(..).map(|(_, n)| n).collect();
    let first = nodes[0];
    match g.last_mut() {
        Some(last) if last.is(Ty::ApiSystem) => {
            let t = format!("{}\n\n{text}", last.content.as_str().unwrap_or(""));
            last.content = Value::String(t);
            last.sources.extend(nodes);
        }
        Some(last) if last.is(Ty::User) => {
            *made_system = true;
            g.push(Item::message(
                Ty::ApiSystem,
                first,
                Value::String(text),
                nodes,
            ));
        }
        _ => g.push(Item::message(
            Ty::User,
            first,
            Value::String(reminder(&text)),
            nodes,
        )),
    }
}

/// `Qcm`: an attachment's user message joins the user message before it without the `"\n"` of
/// a user merge; after a `tool_result` whose content is a string, its text goes into that
/// result (`D8o`).
fn fold_attachment(
    a: &mut Item,
    b: Value,
    placed: &PlacedTexts,
    source: &dyn LineSource,
) -> std::io::Result<()> {
    let mut e = blocks_of(std::mem::take(&mut a.content));
    let t = blocks_of(b);
    let into_result = e.last().is_some_and(|last| {
        block_type(last) == Some("tool_result")
            && field(last, "content").is_some_and(Value::is_string)
            && t.iter().all(|x| block_type(x) == Some("text"))
    });
    if into_result {
        if let Some(mut last) = e.pop() {
            // A result's text left in the file is read back to be joined.
            if let Some(Value::String(s)) = last.get_mut("content")
                && let Cow::Owned(text) = placed.text(source, s)?
            {
                *s = text;
            }
            e.push(result_with_text(last, &t));
        }
    } else {
        e.extend(t);
    }
    a.content = Value::Array(results_first(e));
    Ok(())
}

/// `D8o` for a string `tool_result` content and text blocks.
fn result_with_text(mut r: Value, texts: &[Value]) -> Value {
    if texts.is_empty() {
        return r;
    }
    let mut parts =
        vec![jsstr::trim(field(&r, "content").and_then(Value::as_str).unwrap_or("")).to_owned()];
    parts.extend(
        texts
            .iter()
            .map(|x| jsstr::trim(text_of(x).unwrap_or("")).to_owned()),
    );
    let joined = parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    if let Value::Object(o) = &mut r {
        o.insert("content".into(), Value::String(joined));
    }
    r
}

/// `Aum`: the last message, an assistant ending in thinking blocks, loses them.
fn drop_trailing_thinking(mut msgs: Vec<Item>) -> Vec<Item> {
    let Some(last) = msgs.last_mut() else {
        return msgs;
    };
    if !last.is(Ty::Assistant) {
        return msgs;
    }
    let Value::Array(c) = &mut last.content else {
        return msgs;
    };
    if !c.last().is_some_and(is_thinking) {
        return msgs;
    }
    while c.last().is_some_and(is_thinking) {
        c.pop();
    }
    if c.is_empty() {
        c.push(json!({"type": "text", "text": "[No message content]", "citations": []}));
    }
    msgs
}

/// `Hum`: an assistant message (not the last) with an empty content array says "(no content)".
fn fill_empty_assistants(mut msgs: Vec<Item>) -> Vec<Item> {
    let n = msgs.len();
    for m in msgs.iter_mut().take(n.saturating_sub(1)) {
        if m.is(Ty::Assistant)
            && let Value::Array(c) = &mut m.content
            && c.is_empty()
        {
            c.push(json!({"type": "text", "text": NO_CONTENT, "citations": []}));
        }
    }
    msgs
}

/// `eum`: a system message stays only right after a user message and before an assistant,
/// another system message or the end; two in a row join; any other becomes a user
/// `<system-reminder>` message, and adjacent user messages merge.
fn place_systems(msgs: Vec<Item>) -> Vec<Item> {
    let kinds: Vec<Ty> = msgs.iter().map(|m| m.ty).collect();
    let mut changed = false;
    let mut t: Vec<Item> = Vec::with_capacity(msgs.len());
    for (n, r) in msgs.into_iter().enumerate() {
        if !r.is(Ty::ApiSystem) {
            t.push(r);
            continue;
        }
        let next = kinds.get(n + 1).copied();
        match t.last_mut() {
            Some(o) if o.is(Ty::ApiSystem) => {
                let text = format!(
                    "{}\n\n{}",
                    o.content.as_str().unwrap_or(""),
                    r.content.as_str().unwrap_or("")
                );
                o.content = Value::String(text);
                o.sources.extend(r.sources);
                changed = true;
            }
            Some(o)
                if o.is(Ty::User)
                    && next.is_none_or(|s| matches!(s, Ty::Assistant | Ty::ApiSystem)) =>
            {
                t.push(r);
            }
            _ => {
                changed = true;
                let text = reminder(r.content.as_str().unwrap_or(""));
                t.push(Item::message(
                    Ty::User,
                    r.node,
                    Value::String(text),
                    r.sources,
                ));
            }
        }
    }
    if !changed {
        return t;
    }
    let mut out: Vec<Item> = Vec::with_capacity(t.len());
    for r in t {
        push_user_or(&mut out, r);
    }
    out
}

/// Appends `r`, merging it into the previous message when both are user messages.
fn push_user_or(out: &mut Vec<Item>, r: Item) {
    if r.is(Ty::User) {
        push_user(out, r);
    } else {
        out.push(r);
    }
}

/// `Vcm`: an `is_error` tool result with non-text blocks keeps only its text, joined.
fn errors_text_only(mut msgs: Vec<Item>) -> Vec<Item> {
    each_mut(&mut msgs, |m| {
        if !m.is(Ty::User) {
            return;
        }
        let Value::Array(c) = &mut m.content else {
            return;
        };
        for b in c.iter_mut() {
            let mixed = block_type(b) == Some("tool_result")
                && truthy(field(b, "is_error"))
                && field(b, "content")
                    .and_then(Value::as_array)
                    .is_some_and(|inner| !inner.iter().all(|x| block_type(x) == Some("text")));
            if !mixed {
                continue;
            }
            let texts: Vec<String> = b
                .get("content")
                .and_then(Value::as_array)
                .map(|inner| {
                    inner
                        .iter()
                        .filter(|x| block_type(x) == Some("text"))
                        .map(|x| template_string(field(x, "text")))
                        .collect()
                })
                .unwrap_or_default();
            let content = if texts.is_empty() {
                json!([])
            } else {
                json!([{"type": "text", "text": texts.join("\n\n")}])
            };
            if let Value::Object(o) = b {
                o.insert("content".into(), content);
            }
        }
    });
    msgs
}

/// `xlm`/`klm` without cache markers: a user array content drops blank and non-string text
/// blocks (`ypc`; none left: one "(no content)" block).
fn to_param(m: Item) -> Value {
    match m.ty {
        Ty::ApiSystem => object([("role", "system".into()), ("content", m.content)]),
        Ty::Assistant => object([("role", "assistant".into()), ("content", m.content)]),
        _ => {
            let content = match m.content {
                Value::Array(c) => {
                    let kept: Vec<Value> = c
                        .into_iter()
                        .filter(|b| {
                            !(block_type(b) == Some("text")
                                && text_of(b).is_none_or(|t| jsstr::trim(t).is_empty()))
                        })
                        .collect();
                    if kept.is_empty() {
                        json!([{"type": "text", "text": NO_CONTENT}])
                    } else {
                        Value::Array(kept)
                    }
                }
                other => other,
            };
            object([("role", "user".into()), ("content", content)])
        }
    }
}

/// An object of `fields`, in order, their values moved in (`json!` would copy a value it is
/// given: a whole message's content).
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// `vpc`: signed thinking and redacted thinking of assistant lines another model wrote are
/// not sent (§7.5).
fn strip_foreign_thinking(mut items: Vec<Item>, model: Option<&str>) -> Vec<Item> {
    let base = base_model(model.unwrap_or(""));
    each_mut(&mut items, |i| {
        if !i.is(Ty::Assistant) {
            return;
        }
        let mine = matches!(i.model.as_deref(), Some(m) if m == SYNTHETIC_MODEL || m == base);
        if mine {
            return;
        }
        if let Value::Array(c) = &mut i.content {
            c.retain(|b| {
                !(block_type(b) == Some("redacted_thinking")
                    || (block_type(b) == Some("thinking") && truthy(field(b, "signature"))))
            });
        }
    });
    items
}

/// Lines or messages at least this many are changed on rayon's pool, each apart ([`context`]).
pub const PARALLEL_ITEMS: usize = 512;

/// `f` on each of `items`, whose changes are each its own: on rayon's pool when they are many.
fn each_mut<T: Send>(items: &mut [T], f: impl Fn(&mut T) + Sync + Send) {
    if items.len() >= PARALLEL_ITEMS {
        use rayon::prelude::*;
        items.par_iter_mut().for_each(f);
    } else {
        items.iter_mut().for_each(f);
    }
}

/// What a resume at the end of these (filtered) lines writes first (§6.3, `oof` less the
/// turn-ending tools and interruption markers).
fn resume_appends(items: &[Item]) -> Vec<ResumeAppend> {
    let rest: Vec<&Item> = items
        .iter()
        .filter(|m| !(m.is(Ty::System) || (m.is(Ty::Assistant) && m.api_error)))
        .collect();
    let mut out = Vec::new();
    let Some(last) = rest.last() else {
        return out;
    };
    let interrupted = match last.ty {
        Ty::User => {
            !last.meta
                && !last.compact_summary
                && (last.starts_with_result() || last.tool_use_result)
        }
        Ty::Attachment => {
            let before = rest[..rest.len() - 1]
                .iter()
                .rev()
                .find(|m| !m.is(Ty::Attachment));
            !before.is_some_and(|m| m.is(Ty::Assistant) || m.compact_summary)
        }
        _ => false,
    };
    if interrupted {
        out.push(ResumeAppend::ContinueFromWhereYouLeftOff);
    }
    if last.is(Ty::User) || interrupted {
        out.push(ResumeAppend::NoResponseRequested);
    }
    out
}

/// The transcript loaded as it was for `ctx` (to say what became of a line).
pub(crate) fn loaded_for<'t>(tree: &'t Tree, ctx: &Context) -> Loaded<'t> {
    let (relink, prune) = ctx.read_as.plan();
    Loaded::new(
        tree,
        Plan {
            size: ctx.file_size,
            relink,
            prune,
            before_line: ctx.before_line,
        },
    )
}
