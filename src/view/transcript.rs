//! What both front doors print of a Claude Code transcript at a leaf: the context document
//! (`sessiond context --json`, `session/contextAt`) and the request options a leaf's context
//! is computed for.

use std::io::{self, Write};

use serde::Serialize;
use serde::ser::SerializeSeq;
use serde_json::Value;

use crate::core::ahead;
use crate::core::diagnostics::Diagnostic;
use crate::core::ids::EntryId;
use crate::core::source::{ByRange, LineSource};
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::context::{
    Context, ContextOptions, Dropped, PlacedTexts, ReadAs, SendTime,
};
use crate::storage::lines::TornTail;
use crate::view::convert;
use crate::view::wire;

/// The options of the request a context is for: `model` (the request's model; absent: the
/// session's, as Claude Code resumes).
pub fn options(model: Option<&str>) -> ContextOptions {
    ContextOptions {
        model: model.map(str::to_owned),
        ..ContextOptions::default()
    }
}

/// The context document of a transcript at a leaf, borrowed from the context it shows:
/// `{format: "claude-code", sessionId, leafId, continuesAfterId, messages, entryIds,
/// messageEntryIds, model, midConversationSystem, readAs, sendTime, notRendered, dropped,
/// diagnostics, tornTail}`. `messages` are exactly what Claude Code sends (as it resumes at the
/// leaf, docs/claude-code.md §7), less what it adds at send time, which `sendTime` lists.
/// Serialized as it is ([`ContextDocument::write_to`]), nothing of the context is copied.
#[derive(Serialize)]
pub struct ContextDocument<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    messages: &'a [Value],
    #[serde(flatten)]
    tail: Tail<'a>,
    #[serde(skip)]
    placed: &'a PlacedTexts,
}

/// The fields before `messages`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Head<'a> {
    format: &'static str,
    session_id: Option<String>,
    leaf_id: &'a str,
    continues_after_id: &'a str,
}

/// The fields after `messages`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tail<'a> {
    entry_ids: &'a [EntryId],
    message_entry_ids: Ids<'a>,
    model: &'a Option<String>,
    mid_conversation_system: bool,
    read_as: ReadAs,
    send_time: &'a SendTime,
    not_rendered: &'a [String],
    dropped: DroppedLines<'a>,
    diagnostics: &'a [Diagnostic],
    torn_tail: Option<wire::TornTail>,
}

/// The buffer the document is written through, in bytes.
const WRITE_BUFFER: usize = 64 << 10;

/// `messageEntryIds`: for each message, the uuids of its lines.
struct Ids<'a> {
    tree: &'a Tree,
    sources: &'a [Vec<NodeIdx>],
}

impl Serialize for Ids<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.sources.len()))?;
        for lines in self.sources {
            let ids: Vec<&str> = lines
                .iter()
                .map(|&n| self.tree.node(n).entry.id.as_str())
                .collect();
            seq.serialize_element(&ids)?;
        }
        seq.end()
    }
}

/// `dropped`: `{id, line, why}` for each line of the path not sent.
struct DroppedLines<'a> {
    tree: &'a Tree,
    dropped: &'a [(NodeIdx, Dropped)],
}

#[derive(Serialize)]
struct DroppedLine<'a> {
    id: &'a str,
    line: u32,
    why: &'a Dropped,
}

impl Serialize for DroppedLines<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.dropped.len()))?;
        for (n, why) in self.dropped {
            let e = &self.tree.node(*n).entry;
            seq.serialize_element(&DroppedLine {
                id: e.id.as_str(),
                line: e.span.line,
                why,
            })?;
        }
        seq.end()
    }
}

impl<'a> ContextDocument<'a> {
    /// The document of `ctx`, computed on `tree` (with its torn tail, if any).
    pub fn new(
        session_id: Option<String>,
        tree: &'a Tree,
        torn_tail: Option<TornTail>,
        ctx: &'a Context,
    ) -> ContextDocument<'a> {
        let id = |n: NodeIdx| tree.node(n).entry.id.as_str();
        ContextDocument {
            head: Head {
                format: "claude-code",
                session_id,
                leaf_id: id(ctx.leaf),
                continues_after_id: id(ctx.continues_after),
            },
            messages: &ctx.messages,
            tail: Tail {
                entry_ids: &ctx.entry_ids,
                message_entry_ids: Ids {
                    tree,
                    sources: &ctx.sources,
                },
                model: &ctx.model,
                mid_conversation_system: ctx.mid_conversation_system,
                read_as: ctx.read_as,
                send_time: &ctx.send_time,
                not_rendered: &ctx.not_rendered,
                dropped: DroppedLines {
                    tree,
                    dropped: &ctx.dropped,
                },
                diagnostics: tree.diagnostics(),
                torn_tail: torn_tail.map(convert::torn_tail),
            },
            placed: &ctx.placed,
        }
    }

    /// Writes the document's JSON text to `out`, as `serde_json::to_writer` writes the value of
    /// [`context_document`]; the texts the messages leave in the file
    /// ([`Context::placed`]) are read from `source`, the file the context was computed on.
    /// Many messages are written on rayon's pool, [`MESSAGES_PER_PIECE`] at a time, into
    /// buffers written out in order on the calling thread. Errors: writing `out` or reading
    /// `source` failed.
    pub fn write_to<W: io::Write + ?Sized>(
        &self,
        source: &(dyn LineSource + Sync),
        out: &mut W,
    ) -> io::Result<()> {
        let mut out = io::BufWriter::with_capacity(WRITE_BUFFER, out);
        // `{head…` and `…tail}` around the messages, as one object.
        let head = serde_json::to_vec(&self.head)?;
        let tail = serde_json::to_vec(&self.tail)?;
        out.write_all(&head[..head.len() - 1])?;
        out.write_all(b",\"messages\":[")?;
        if self.messages.len() > MESSAGES_PER_PIECE && ahead::available() {
            // Each piece's messages each after a comma; the first piece's first comma goes.
            let mut pieces = self.messages.chunks(MESSAGES_PER_PIECE);
            let mut first = true;
            let source = ByRange(source);
            ahead::in_order(
                &mut out,
                ahead::Limit {
                    items: 4,
                    weight: usize::MAX,
                },
                |_| Ok(pieces.next().map(|p| (p, 1))),
                &|piece: &[Value]| {
                    let mut text = Vec::new();
                    for m in piece {
                        text.push(b',');
                        self.write_message(&source, &mut text, m)?;
                    }
                    Ok(text)
                },
                |out, text: io::Result<Vec<u8>>| {
                    let text = text?;
                    let skip = usize::from(std::mem::take(&mut first));
                    out.write_all(text.get(skip..).unwrap_or_default())
                },
            )?;
        } else {
            for (i, m) in self.messages.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                self.write_message(source, &mut out, m)?;
            }
        }
        out.write_all(b"],")?;
        out.write_all(&tail[1..])?;
        out.flush()
    }

    /// One message's JSON text, its placed texts read from `source`.
    fn write_message<W: io::Write + ?Sized>(
        &self,
        source: &dyn LineSource,
        out: &mut W,
        m: &Value,
    ) -> io::Result<()> {
        if self.placed.is_empty() {
            serde_json::to_writer(out, m).map_err(io::Error::from)
        } else {
            self.placed.write_value(source, out, m)
        }
    }
}

/// Messages written as one piece of work by [`ContextDocument::write_to`] (a few hundred KB
/// of text in a long session's context).
const MESSAGES_PER_PIECE: usize = 64;

/// The context document ([`ContextDocument`]) as a JSON value.
pub fn context_document(
    session_id: Option<String>,
    tree: &Tree,
    torn_tail: Option<TornTail>,
    ctx: &Context,
) -> Value {
    serde_json::to_value(ContextDocument::new(session_id, tree, torn_tail, ctx))
        .unwrap_or(Value::Null)
}
