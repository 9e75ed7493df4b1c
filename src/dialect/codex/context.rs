//! What Codex sends when it resumes a rollout at a line, and why a line is not part of it:
//! the chain of files ([`super::lineage`]) replayed ([`super::replay`]) into the `input` item
//! list, with the thread's stored base instructions beside it, and the explanation of one
//! line. Reads the chain's files (through [`super::lineage`]); no lock is taken.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::leaf_replay::Replay;
use super::lineage::{Index, LineageError, codex_home_of};
use super::replay::{Fate, Origin};
use crate::core::retention::{Retention, SummarySource, retention_text};

/// One file of the chain, as the context document shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainLink {
    /// The file.
    pub file: PathBuf,
    /// Its history id (thread id, or a revert segment's id).
    pub history_id: Option<String>,
    /// The last line of the file in the history (1-based).
    pub last_line: usize,
    /// That line's ordinal (`None` in legacy files).
    pub last_ordinal: Option<u64>,
    /// Where that line ends: for a parent's prefix, the `history_base.end_byte_offset`
    /// checked against the file.
    pub end_byte_offset: u64,
}

/// `context`'s document for a rollout at a leaf.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// `"codex"`.
    pub format: &'static str,
    /// The rollout file.
    pub file: PathBuf,
    /// The leaf: its ordinal, or `line:N`.
    pub leaf_id: Option<String>,
    /// The Responses API `input` items Codex sends after its base-instructions message.
    pub messages: Vec<Value>,
    /// Messages in `messages`.
    pub message_count: usize,
    /// `session_meta.base_instructions.text` of the thread (Codex sends it first, as a
    /// developer message built at send time, with sections about absent tools left out).
    pub base_instructions: Option<String>,
    /// The files the history is read from, oldest first; the leaf's own file last.
    pub chain: Vec<ChainLink>,
    /// What the prompt's normalization did (synthetic outputs, orphan outputs dropped).
    pub notes: Vec<String>,
}

impl Replay {
    /// The context document.
    pub fn document(self, leaf_id: Option<String>) -> Context {
        let base_instructions = self.chain.links.iter().find_map(|l| {
            l.file
                .meta()?
                .get("base_instructions")?
                .get("text")?
                .as_str()
                .map(str::to_owned)
        });
        let chain = self
            .chain
            .links
            .iter()
            .map(|l| ChainLink {
                file: l.file.path.clone(),
                history_id: l.history_id.clone(),
                last_line: l.last_line + 1,
                last_ordinal: l
                    .file
                    .record(l.last_line)
                    .and_then(|r| r.get("ordinal").and_then(Value::as_u64)),
                end_byte_offset: if l.file.is_empty() {
                    0
                } else {
                    l.file.end_of(l.last_line)
                },
            })
            .collect();
        let file = self
            .chain
            .links
            .last()
            .map(|l| l.file.path.clone())
            .unwrap_or_default();
        Context {
            format: "codex",
            file,
            leaf_id,
            message_count: self.replayed.messages.len(),
            messages: self.replayed.messages,
            base_instructions,
            chain,
            notes: self.replayed.notes,
        }
    }
}

/// The `CODEX_HOME` index for a rollout file ([`Index::scan`] of [`codex_home_of`]).
pub fn index_for(path: &Path) -> Index {
    Index::scan(&codex_home_of(path))
}

/// [`index_for`] of the files `admits` lets in only (the daemon's: inside its roots).
pub fn index_admitted(path: &Path, admits: &dyn Fn(&Path) -> bool) -> Index {
    Index::scan_admitted(&codex_home_of(path), admits)
}

/// Why a line is (or is not) in the context, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Reason {
    /// A response item Codex sends.
    Sent,
    /// A line the model never sees: an event, settings, world state, token usage, metadata, an
    /// unknown type, or a response item that is not sent.
    EventOnly,
    /// A response item replaced by a later compaction's `replacement_history`.
    ReplacedByCompaction,
    /// A compaction: its `replacement_history` is the base of what follows.
    CompactionBase,
    /// A response item dropped by an in-file rollback marker.
    Reverted,
    /// A rollback marker: it drops turns.
    RollbackMarker,
    /// A tool output whose call is not in the history: dropped from the prompt.
    OrphanOutput,
    /// The line comes after the leaf.
    AfterLeaf,
}

/// Another file that leaves this line out: a revert segment of the thread or a fork whose
/// `history_base` prefix ends before it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Elsewhere {
    /// The file.
    pub file: PathBuf,
    /// `reverted` (a revert segment of the same thread) or `outsideParentPrefix` (a fork).
    pub reason: &'static str,
    /// The sentence.
    pub text: String,
}

/// `explain`'s answer for one line of a rollout at a leaf.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `"codex"`.
    pub format: &'static str,
    /// The line's id (ordinal, or `line:N`).
    pub entry_id: String,
    /// Its 1-based line.
    pub line: usize,
    /// Its `type`.
    pub line_type: String,
    /// Whether Codex sends it (or, for a compaction, what it sets) at the leaf.
    pub in_context: bool,
    /// Its position in `messages`, when sent.
    pub position: Option<usize>,
    /// Why.
    pub reason: Reason,
    /// The line that decided it (the compaction or the rollback marker), 1-based, in the
    /// leaf's file or a prefix of the chain.
    pub by_line: Option<usize>,
    /// The file of that line.
    pub by_file: Option<PathBuf>,
    /// Other files that leave the line out.
    pub elsewhere: Vec<Elsewhere>,
    /// The explanation in words.
    pub text: String,
    /// A compaction: the items it replaced ([`super::audit`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SummarySource>,
    /// A compaction: the retention probes of what it replaced, looked up in its `message` and
    /// `replacement_history` ([`super::audit`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<Retention>,
}

/// Explains line `target` (0-based) of the rollout `path` at its line `leaf` (0-based;
/// `None`: the last); for a compaction, also where its summary came from and what it kept
/// ([`super::audit`]). Errors: the chain's.
pub fn explain(
    index: &Index,
    path: &Path,
    target: usize,
    leaf: Option<usize>,
) -> Result<Explanation, LineageError> {
    let r = Replay::at(index, path, leaf)?;
    let own = r.chain.links.len() - 1;
    let file = &r.chain.links[own].file;
    let record = (target < file.len()).then(|| file.record(target)).flatten();
    let line_type = record
        .as_ref()
        .and_then(|v| v.get("type").and_then(Value::as_str))
        .unwrap_or("")
        .to_owned();
    let entry_id = super::format::line_id(
        record
            .as_ref()
            .and_then(|v| v.get("ordinal").and_then(Value::as_u64)),
        target as u32 + 1,
    )
    .as_str()
    .to_owned();
    let where_ = |k: usize| {
        let (link, line) = r.at[k];
        (
            line as usize + 1,
            r.chain.links[link as usize].file.path.clone(),
        )
    };
    let rec_idx =
        r.at.iter()
            .position(|&(l, i)| l as usize == own && i as usize == target);
    let leaf_line = r.chain.links[own].last_line;
    let (reason, position, by) = match rec_idx.map(|k| r.replayed.fates[k]) {
        None if target > leaf_line => (Reason::AfterLeaf, None, None),
        None => (Reason::EventOnly, None, None),
        Some(Fate::NotSent) => (Reason::EventOnly, None, None),
        Some(Fate::Sent(p)) => (Reason::Sent, Some(p), None),
        Some(Fate::Compacted(by)) => (Reason::ReplacedByCompaction, None, Some(where_(by))),
        Some(Fate::RolledBack(by)) => (Reason::Reverted, None, Some(where_(by))),
        Some(Fate::Orphan) => (Reason::OrphanOutput, None, None),
        Some(Fate::Base) => (Reason::CompactionBase, None, None),
        Some(Fate::Rollback) => (Reason::RollbackMarker, None, None),
    };
    let from_base = |k: usize| {
        r.replayed
            .origins
            .iter()
            .filter(|o| matches!(o, Origin::Replacement(c, _) if *c == k))
            .count()
    };
    let text = match reason {
        Reason::Sent => format!(
            "sent: item {} of the {} input items Codex sends when it resumes at the leaf",
            position.unwrap_or(0) + 1,
            r.replayed.messages.len()
        ),
        Reason::EventOnly if line_type == "response_item" => {
            "not sent: a response item of a kind Codex keeps out of the model's input".to_owned()
        }
        Reason::EventOnly => format!(
            "not sent: a {} line is a record for Codex and its app, never part of the model's \
             input",
            if line_type.is_empty() {
                "corrupt"
            } else {
                &line_type
            }
        ),
        Reason::ReplacedByCompaction => format!(
            "not sent: replaced by the compaction at line {}, whose replacement history is the \
             new base",
            by.as_ref().map_or(0, |b| b.0)
        ),
        Reason::CompactionBase => format!(
            "a compaction: its replacement history replaces everything before it ({} of its \
             items still sent at the leaf)",
            rec_idx.map_or(0, from_base)
        ),
        Reason::Reverted => format!(
            "not sent: reverted by the rollback marker at line {} (thread_rolled_back)",
            by.as_ref().map_or(0, |b| b.0)
        ),
        Reason::RollbackMarker => {
            "a rollback marker: drops the last user turns from the history before it".to_owned()
        }
        Reason::OrphanOutput => {
            "not sent: a tool output whose call is not in the history is dropped".to_owned()
        }
        Reason::AfterLeaf => format!("not sent: after the leaf (line {})", leaf_line + 1),
    };
    let elsewhere = elsewhere_of(index, path, file.end_of(target.min(file.len() - 1)));
    let (mut text, mut source, mut audit) = (text, None, None);
    // The leaf's replay holds the compaction when the leaf is at or after it.
    let audited = match rec_idx {
        _ if line_type != "compacted" => None,
        Some(k) => super::audit::audit_in(&r, k),
        None => super::audit::audit(index, path, target)?,
    };
    if let Some((from, retention)) = audited {
        let range = match (&from.first_id, &from.last_id) {
            (Some(f), Some(l)) if f == l => format!("1 line {f}"),
            (Some(f), Some(l)) => format!("{} lines {f}…{l}", from.count),
            _ => "no lines".to_owned(),
        };
        let after = from
            .previous_compaction_id
            .as_ref()
            .map_or(String::new(), |p| format!(" (after the compaction {p})"));
        text = format!(
            "{text}; it summarizes {range}{after}; {}",
            retention_text(&retention)
        );
        source = Some(from);
        audit = Some(retention);
    }
    Ok(Explanation {
        format: "codex",
        entry_id,
        line: target + 1,
        line_type,
        in_context: matches!(reason, Reason::Sent | Reason::CompactionBase),
        position,
        reason,
        by_line: by.as_ref().map(|b| b.0),
        by_file: by.map(|b| b.1),
        elsewhere,
        text,
        source,
        audit,
    })
}

/// The files whose `history_base` takes a prefix of `path` that ends before the line ending
/// at `line_end`.
fn elsewhere_of(index: &Index, path: &Path, line_end: u64) -> Vec<Elsewhere> {
    let Some(me) = index.get(path) else {
        return Vec::new();
    };
    index
        .files
        .iter()
        .filter(|f| {
            f.base
                .as_ref()
                .is_some_and(|b| b.history_id == me.history_id && b.end_byte_offset < line_end)
        })
        .map(|f| {
            let segment = f.forked_from.is_none() && f.thread_id == me.thread_id;
            let name = f.path.file_name().unwrap_or_default().to_string_lossy();
            Elsewhere {
                file: f.path.clone(),
                reason: if segment {
                    "reverted"
                } else {
                    "outsideParentPrefix"
                },
                text: if segment {
                    format!("reverted: the thread's segment {name} continues from before this line")
                } else {
                    format!(
                        "outside the parent prefix: the fork {name} takes this file only up to \
                         byte {}",
                        f.base.as_ref().map_or(0, |b| b.end_byte_offset)
                    )
                },
            }
        })
        .collect()
}
