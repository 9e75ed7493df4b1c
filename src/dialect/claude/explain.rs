//! `explain` for Claude Code transcripts: whether a line's content reaches the model at a leaf,
//! and exactly why not, as Claude Code 2.1.197 builds its request ([`super::context`],
//! docs/claude-code.md §7–§8). Built on the context at the leaf; pure, no I/O of its own.
//!
//! The vocabulary is `context`'s and pi's explain's: a line is in context (and then the
//! message indexes say where; several lines often merge into one message, since Claude writes
//! one line per content block) or it is not, and then the reason says why: not on the leaf's
//! path (where the branches diverge), before the last compact boundary (summarized by the
//! compaction summary), a subagent's line, a bookkeeping line, a system line of a subtype never
//! sent, dropped by one of Claude's filters (which), an attachment that renders to nothing.
//! [`Explanation::text`] says it in one sentence.

use serde::Serialize;
use thiserror::Error;

use crate::core::ids::EntryId;
use crate::core::retention::{Retention, SummarySource};
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::context::{
    Context, ContextError, ContextOptions, Dropped, context, loaded_for,
};
use crate::dialect::claude::format::Kind;
use crate::dialect::claude::load::{Fate, Loaded};

/// What to explain: a tree line, or any line by its 1-based number (a bookkeeping line has no
/// node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A tree line.
    Node(NodeIdx),
    /// The line with this number.
    Line(u32),
}

/// The answer for one line at one leaf.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The line's `uuid` (`None`: a bookkeeping line, which has none).
    pub entry_id: Option<EntryId>,
    /// The line's number.
    pub line: u32,
    /// The leaf the question was asked at.
    pub leaf_id: EntryId,
    /// The line's `type`.
    #[serde(rename = "type")]
    pub entry_type: String,
    /// Whether the line's content reaches the model at the leaf.
    pub in_context: bool,
    /// Why (or why not), with the lines responsible.
    pub reason: Reason,
    /// Indexes (0-based) of the messages that hold the line's content.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub message_indexes: Vec<usize>,
    /// The answer in one sentence.
    pub text: String,
    /// A compact boundary or its summary line: the lines the compaction replaced
    /// ([`super::audit`], from [`explain`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SummarySource>,
    /// A compact boundary or its summary line: the retention probes of what it replaced,
    /// looked up in the context the summary starts ([`super::audit`], from [`explain`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<Retention>,
}

/// Why a line is, or is not, part of what the model is sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Reason {
    /// The line's content is a message of its own (or several).
    InContext,
    /// The line's content is part of one message, with the content of other lines (the blocks
    /// of one response, consecutive user lines, attachments folded into a user message).
    #[serde(rename_all = "camelCase")]
    MergedIntoMessage {
        /// The message.
        message_index: usize,
        /// The other lines in it, in order.
        with: Vec<EntryId>,
    },
    /// The line is not on the leaf's path. `diverges_at` is the last line both paths share
    /// (`None`: different roots; the leaf itself: the line comes after the leaf);
    /// `branch_entry_id` is the child of it that leads to the line.
    #[serde(rename_all = "camelCase")]
    NotOnPath {
        /// The last line both paths share.
        diverges_at: Option<EntryId>,
        /// The child of `diverges_at` that leads to the line.
        branch_entry_id: EntryId,
    },
    /// The line is before the last compact boundary (on the path, or dropped when Claude loads
    /// the file, §4): the compaction summary stands for it.
    #[serde(rename_all = "camelCase")]
    BeforeCompactBoundary {
        /// The boundary.
        boundary_id: EntryId,
        /// The compaction summary after it.
        summary_id: Option<EntryId>,
    },
    /// A subagent's line (`isSidechain`) at a leaf of the main conversation.
    Sidechain,
    /// A bookkeeping line (`last-prompt`, `queue-operation`, `progress`, …): never sent.
    #[serde(rename_all = "camelCase")]
    Bookkeeping {
        /// Its `type`.
        line_type: String,
    },
    /// A `system` line of a subtype Claude never sends (only `local_command` is sent; a
    /// `compact_boundary` marks where the context starts).
    #[serde(rename_all = "camelCase")]
    SystemNeverSent {
        /// Its `subtype`.
        subtype: String,
    },
    /// On the path, but dropped by one of Claude's filters (§7.3, §7.6).
    DroppedByFilter {
        /// Which.
        filter: Dropped,
    },
    /// An attachment of a type that renders to nothing (§8.2).
    #[serde(rename_all = "camelCase")]
    RendersToNothing {
        /// `attachment.type`.
        attachment_type: String,
    },
    /// An attachment of a type sessiond does not know how to render: Claude sends something for
    /// it that the context does not show.
    #[serde(rename_all = "camelCase")]
    NotRendered {
        /// `attachment.type`.
        attachment_type: String,
    },
    /// The file is over 5 MiB and Claude keeps only the chains of its last line and of the last
    /// `last-prompt`'s leaf, which this line is off (§7.1).
    PrunedBigFile,
    /// A later line with the same `uuid` replaces this one.
    #[serde(rename_all = "camelCase")]
    Shadowed {
        /// The later line's number.
        by_line: u32,
    },
}

/// Why an explanation cannot be given.
#[derive(Debug, Error)]
pub enum ExplainError {
    /// No line of the transcript has this number (blank, unreadable, or past the end).
    #[error("line {0}: not a line the transcript holds (blank, unreadable or past the end)")]
    NoSuchLine(u32),
    /// The context at the leaf could not be computed.
    #[error(transparent)]
    Context(#[from] ContextError),
}

/// Explains `target` at `leaf`: computes the context at the leaf (as Claude Code 2.1.197 builds
/// its request, §7) and says what became of the line; for a compact boundary or its summary
/// line, also where the summary came from and what it kept ([`super::audit`]).
pub fn explain(
    tree: &Tree,
    source: &(dyn LineSource + Sync),
    leaf: NodeIdx,
    target: Target,
    options: &ContextOptions,
) -> Result<Explanation, ExplainError> {
    let ctx = context(tree, source, leaf, options)?;
    let mut ex = explain_in(tree, &ctx, target)?;
    // A compaction: where its summary came from, and what it kept.
    if let Target::Node(n) = target
        && let Some((from, retention)) = super::audit::audit(tree, source, n, options)?
    {
        let range = match (&from.first_id, &from.last_id) {
            (Some(f), Some(l)) if f == l => format!("1 line {f}"),
            (Some(f), Some(l)) => format!("{} lines {f}…{l}", from.count),
            _ => "no lines".to_owned(),
        };
        let kept = from
            .first_kept_entry_id
            .as_ref()
            .map_or(String::new(), |k| format!(", keeps from {k}"));
        ex.text = format!(
            "{}; its compaction summarizes {range}{kept}; {}",
            ex.text,
            crate::core::retention::retention_text(&retention)
        );
        ex.source = Some(from);
        ex.audit = Some(retention);
    }
    Ok(ex)
}

/// Explains `target` in a context already computed.
pub fn explain_in(tree: &Tree, ctx: &Context, target: Target) -> Result<Explanation, ExplainError> {
    let leaf_id = tree.node(ctx.leaf).entry.id.clone();
    let node = match target {
        Target::Node(n) if (n as usize) < tree.len() => n,
        Target::Node(n) => return Err(ContextError::NoSuchNode(n).into()),
        Target::Line(line) => match find_line(tree, line) {
            Some(n) => n,
            None => {
                let aside = tree.ext().asides().iter().find(|a| a.span.line == line);
                let Some(a) = aside else {
                    return Err(ExplainError::NoSuchLine(line));
                };
                let mut ex = Explanation {
                    entry_id: a.progress.as_ref().map(|(u, _)| u.clone()),
                    line,
                    leaf_id,
                    entry_type: a.kind.to_string(),
                    in_context: false,
                    reason: Reason::Bookkeeping {
                        line_type: a.kind.to_string(),
                    },
                    message_indexes: Vec::new(),
                    text: String::new(),
                    source: None,
                    audit: None,
                };
                ex.text = sentence(&ex);
                return Ok(ex);
            }
        },
    };
    let entry = &tree.node(node).entry;
    let message_indexes: Vec<usize> = ctx
        .sources
        .iter()
        .enumerate()
        .filter(|(_, s)| s.contains(&node))
        .map(|(i, _)| i)
        .collect();
    let reason = if let [one] = message_indexes[..]
        && ctx.sources[one].len() > 1
    {
        Reason::MergedIntoMessage {
            message_index: one,
            with: ctx.sources[one]
                .iter()
                .filter(|&&n| n != node)
                .map(|&n| tree.node(n).entry.id.clone())
                .collect(),
        }
    } else if !message_indexes.is_empty() {
        Reason::InContext
    } else if let Some((_, why)) = ctx.dropped.iter().find(|(n, _)| *n == node) {
        dropped_reason(tree, why)
    } else {
        let loaded = loaded_for(tree, ctx);
        off_path(tree, &loaded, ctx, node)
    };
    let in_context = matches!(reason, Reason::InContext | Reason::MergedIntoMessage { .. });
    let mut ex = Explanation {
        entry_id: Some(entry.id.clone()),
        line: entry.span.line,
        leaf_id,
        entry_type: entry.kind.type_name().to_owned(),
        in_context,
        reason,
        message_indexes,
        text: String::new(),
        source: None,
        audit: None,
    };
    ex.text = sentence(&ex);
    Ok(ex)
}

/// Why a line of the leaf's path that Claude drops does not reach the model.
pub(crate) fn dropped_reason(tree: &Tree, why: &Dropped) -> Reason {
    match why {
        Dropped::BeforeCompactBoundary { boundary } => Reason::BeforeCompactBoundary {
            summary_id: tree
                .find(boundary.as_str())
                .and_then(|b| summary_after(tree, b)),
            boundary_id: boundary.clone(),
        },
        Dropped::SystemNotSent { subtype } => Reason::SystemNeverSent {
            subtype: subtype.clone(),
        },
        Dropped::RendersToNothing { attachment_type } => Reason::RendersToNothing {
            attachment_type: attachment_type.clone(),
        },
        Dropped::NotRendered { attachment_type } => Reason::NotRendered {
            attachment_type: attachment_type.clone(),
        },
        other => Reason::DroppedByFilter {
            filter: other.clone(),
        },
    }
}

/// The node on line `line`, if a tree line is there.
fn find_line(tree: &Tree, line: u32) -> Option<NodeIdx> {
    let nodes = tree.nodes();
    let at = nodes.partition_point(|n| n.entry.span.line < line);
    nodes
        .get(at)
        .filter(|n| n.entry.span.line == line)
        .map(|_| at as NodeIdx)
}

/// The compaction summary that follows boundary `b` in the file.
pub(crate) fn summary_after(tree: &Tree, b: NodeIdx) -> Option<EntryId> {
    tree.nodes()[b as usize + 1..]
        .iter()
        .find(|n| {
            matches!(
                n.entry.kind,
                Kind::User {
                    compact_summary: true,
                    ..
                }
            )
        })
        .map(|n| n.entry.id.clone())
}

/// Why a line that is not on the leaf's loaded path is not there.
pub(crate) fn off_path(tree: &Tree, loaded: &Loaded<'_>, ctx: &Context, node: NodeIdx) -> Reason {
    match loaded.fate(node) {
        Fate::Pruned => return Reason::PrunedBigFile,
        Fate::Shadowed => {
            let by = tree.find(tree.node(node).entry.id.as_str()).unwrap_or(node);
            return Reason::Shadowed {
                by_line: tree.node(by).entry.span.line,
            };
        }
        Fate::Compacted => {
            if let Some(b) = loaded.compacted_by {
                return Reason::BeforeCompactBoundary {
                    boundary_id: tree.node(b).entry.id.clone(),
                    summary_id: summary_after(tree, b),
                };
            }
        }
        // A line written after the read's end is not on any of its paths: the chain below
        // says where it is.
        Fate::Live | Fate::Later => {}
    }
    if tree.node(node).entry.sidechain && !tree.node(ctx.leaf).entry.sidechain {
        return Reason::Sidechain;
    }
    let chain = |from: NodeIdx| {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut cur = Some(from);
        while let Some(c) = cur {
            if !seen.insert(c) {
                break;
            }
            out.push(c);
            cur = loaded.parent(c);
        }
        out.reverse();
        out
    };
    let target_path = chain(node);
    let leaf_path = chain(ctx.leaf);
    let shared = target_path
        .iter()
        .zip(&leaf_path)
        .take_while(|(a, b)| a == b)
        .count();
    let id = |n: NodeIdx| tree.node(n).entry.id.clone();
    Reason::NotOnPath {
        diverges_at: shared.checked_sub(1).map(|i| id(target_path[i])),
        branch_entry_id: id(target_path.get(shared).copied().unwrap_or(node)),
    }
}

/// `as message 3`, `as messages 3 and 4`: numbered from 1.
fn as_messages(indexes: &[usize]) -> String {
    match indexes {
        [one] => format!("as message {}", one + 1),
        [init @ .., last] => format!(
            "as messages {} and {}",
            init.iter()
                .map(|i| (i + 1).to_string())
                .collect::<Vec<_>>()
                .join(", "),
            last + 1
        ),
        [] => "as no message".to_owned(),
    }
}

/// What a filter does, for the sentence.
fn filter_text(d: &Dropped) -> String {
    match d {
        Dropped::Retracted { by } => {
            format!("a resume filter drops it: retracted by the model_refusal_fallback line {by}")
        }
        Dropped::AttachmentTypeDropped { attachment_type } => format!(
            "a resume filter drops it: attachments of type {attachment_type} are dropped when a transcript is loaded"
        ),
        Dropped::NoTextLeft => {
            "a resume filter drops it: none of its text blocks has a string text".to_owned()
        }
        Dropped::UnresolvedToolUse => {
            "a resume filter drops it: no tool_result answers any of its tool_use blocks".to_owned()
        }
        Dropped::OrphanThinking => {
            "a filter drops it: it holds only thinking, and its response has no other block"
                .to_owned()
        }
        Dropped::WhitespaceOnly => {
            "a filter drops it: its text is blank, and its response has no other block".to_owned()
        }
        Dropped::ApiErrorMessage => {
            "a filter drops it: a synthetic API error message is never sent".to_owned()
        }
        Dropped::Virtual => {
            "a filter drops it: a virtual message (isVirtual) is never sent".to_owned()
        }
        Dropped::BeforeCompactBoundary { boundary } => {
            format!("it is before compact boundary {boundary}")
        }
        Dropped::SystemNotSent { subtype } => format!("a system line of subtype {subtype}"),
        Dropped::RendersToNothing { attachment_type }
        | Dropped::NotRendered { attachment_type } => {
            format!("an attachment of type {attachment_type}")
        }
    }
}

/// The explanation in one sentence.
fn sentence(ex: &Explanation) -> String {
    let head = match &ex.entry_id {
        Some(id) => format!(
            "line {} ({} {id}) at leaf {}: ",
            ex.line, ex.entry_type, ex.leaf_id
        ),
        None => format!(
            "line {} ({}) at leaf {}: ",
            ex.line, ex.entry_type, ex.leaf_id
        ),
    };
    let list = |ids: &[EntryId]| {
        ids.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let why = match &ex.reason {
        Reason::InContext => format!("it reaches the model {}", as_messages(&ex.message_indexes)),
        Reason::MergedIntoMessage {
            message_index,
            with,
        } => format!(
            "it reaches the model merged into message {} with {}",
            message_index + 1,
            list(with)
        ),
        Reason::NotOnPath {
            diverges_at,
            branch_entry_id,
        } => match diverges_at {
            Some(d) if *d == ex.leaf_id => format!(
                "not on the leaf's path: it comes after the leaf (below it, through {branch_entry_id})"
            ),
            Some(d) => format!(
                "not on the leaf's path: it is on another branch, which leaves the path after {d} \
                 (the branch starts at {branch_entry_id})"
            ),
            None => format!(
                "not on the leaf's path: it is under another root ({branch_entry_id}) than the leaf"
            ),
        },
        Reason::BeforeCompactBoundary {
            boundary_id,
            summary_id,
        } => match summary_id {
            Some(s) => format!(
                "before compact boundary {boundary_id}: the compaction summary {s} stands for it"
            ),
            None => format!("before compact boundary {boundary_id}: the context starts after it"),
        },
        Reason::Sidechain => "a subagent's line (isSidechain): it is sent in the subagent's own \
                              requests, never in the main conversation's"
            .to_owned(),
        Reason::Bookkeeping { line_type } => {
            format!("a bookkeeping line ({line_type}): never sent to the model")
        }
        Reason::SystemNeverSent { subtype } if subtype == "compact_boundary" => {
            "a compact boundary: never sent; the context starts after it".to_owned()
        }
        Reason::SystemNeverSent { subtype } => format!(
            "a system line of subtype {subtype}, which is never sent (only local_command is)"
        ),
        Reason::DroppedByFilter { filter } => {
            format!("on the leaf's path, but {}", filter_text(filter))
        }
        Reason::RendersToNothing { attachment_type } => {
            format!("an attachment of type {attachment_type}, which renders to nothing")
        }
        Reason::NotRendered { attachment_type } => format!(
            "an attachment of type {attachment_type}, whose rendering sessiond does not know: \
             Claude sends something for it that the context does not show"
        ),
        Reason::PrunedBigFile => "the file is over 5 MiB, and Claude Code keeps only the chains \
                                  of its last line and of the last-prompt leaf, which this line \
                                  is off"
            .to_owned(),
        Reason::Shadowed { by_line } => {
            format!("a later line (line {by_line}) has the same uuid and replaces it")
        }
    };
    head + &why
}
