//! Where a summary came from, and what it kept: for any `compaction` or `branch_summary` entry
//! in a file (pi's, a model's, an old one, sessiond's), the entries it replaced and the
//! [`retention`](super::retention) probes of that span looked up in the context the summary
//! starts. Pure: lines are read through [`LineSource`].
//!
//! A compaction's span is read back as [`prepare`](super::prepare::prepare) chose it when the
//! entry was written under its parent: the path to the parent, projected as pi projects it,
//! cut at the entry's `firstKeptEntryId` ([`prepare::prepare_written`]). The probes are the
//! ones sessiond runs before it writes a compaction, and the context they are looked up in is
//! the one the entry starts (the context at the entry: its summary and the kept messages), so
//! for a compaction sessiond wrote the audit is the retention report it gave at commit.
//!
//! A branch summary replaces the branch pi left when it wrote it (pi's
//! `collectEntriesForBranchSummary`): the entries from its `fromId` back to the deepest entry
//! that branch shares with the summary's parent. Its probes are taken from that branch's
//! messages (tool results too: a failed result is a fact the summary may drop) with the file
//! lists pi's `prepareBranchEntries` gathers, and looked up in the context at the summary.

use serde_json::Value;

use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::compaction::CompactionError;
use crate::dialect::pi::compaction::files::FileOps;
use crate::dialect::pi::compaction::prepare::{self, Span, SpanMessage};
use crate::dialect::pi::compaction::retention::{self, Retention, Summarized};
use crate::dialect::pi::format::{EntryId, EntryKind};
use crate::dialect::pi::projection;
use crate::dialect::pi::render::{self, LineSource, RenderError};
use crate::js::value as js;

/// The range of its path a compaction summarizes, as pi 1.6.0 `prepareCompaction` chooses
/// it: the entries after the previous compaction's kept start (or the root) up to the one
/// before `firstKeptEntryId`; an earlier compaction is carried in by its summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// How many entries of the range (compaction entries not counted).
    pub count: usize,
    /// The range's first entry; `None` when it is empty.
    pub first: Option<NodeIdx>,
    /// The range's last entry; `None` when it is empty.
    pub last: Option<NodeIdx>,
    /// The compaction's `firstKeptEntryId` as written.
    pub first_kept_entry_id: Option<EntryId>,
    /// The previous compaction on the path, whose summary this one carries forward.
    pub previous: Option<NodeIdx>,
}

/// The range compaction `c` summarizes (see [`Source`]).
pub fn source(tree: &Tree, c: NodeIdx) -> Source {
    let first_kept = match &tree.node(c).entry.kind {
        EntryKind::Compaction {
            first_kept_entry_id,
            ..
        } => first_kept_entry_id.clone(),
        _ => None,
    };
    let above = tree.path_to(tree.node(c).parent);
    let kept_first_of = |n: NodeIdx| match &tree.node(n).entry.kind {
        EntryKind::Compaction {
            first_kept_entry_id: Some(id),
            ..
        } => above.iter().position(|&a| tree.node(a).entry.id == *id),
        _ => None,
    };
    let previous_at = above
        .iter()
        .rposition(|&a| matches!(tree.node(a).entry.kind, EntryKind::Compaction { .. }));
    let start = match previous_at {
        Some(p) => match kept_first_of(above[p]) {
            Some(k) if k < p => k,
            _ => p + 1,
        },
        None => 0,
    };
    let end = first_kept
        .as_ref()
        .and_then(|id| above.iter().position(|&a| tree.node(a).entry.id == *id))
        .filter(|&e| e >= start)
        .unwrap_or(above.len());
    let range: Vec<NodeIdx> = above[start..end]
        .iter()
        .copied()
        .filter(|&n| !matches!(tree.node(n).entry.kind, EntryKind::Compaction { .. }))
        .collect();
    Source {
        count: range.len(),
        first: range.first().copied(),
        last: range.last().copied(),
        first_kept_entry_id: first_kept,
        previous: previous_at.map(|p| above[p]),
    }
}

impl Source {
    /// `summarizes 12 entries a1…b2 and compaction c3's summary, keeps from d4`.
    pub fn text(&self, tree: &Tree) -> String {
        let id = |n: NodeIdx| tree.node(n).entry.id.to_string();
        let mut text = match (self.first, self.last) {
            (Some(f), Some(l)) if f == l => format!("summarizes 1 entry {}", id(f)),
            (Some(f), Some(l)) => format!("summarizes {} entries {}…{}", self.count, id(f), id(l)),
            _ => "summarizes no entries".to_owned(),
        };
        if let Some(p) = self.previous {
            text.push_str(&format!(" and compaction {}'s summary", id(p)));
        }
        if let Some(k) = &self.first_kept_entry_id {
            text.push_str(&format!(", keeps from {k}"));
        }
        text
    }
}

/// The branch a branch summary replaces (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchSource {
    /// The summary's `fromId` as written (pi writes `root` when it left the empty leaf).
    pub from_id: Option<EntryId>,
    /// The entry `fromId` names, when the tree holds it.
    pub from: Option<NodeIdx>,
    /// The deepest entry the branch shares with the summary's parent: where the branch left
    /// (`None`: none shared, or no branch).
    pub left_at: Option<NodeIdx>,
    /// The branch's entries, root first, after `left_at` up to `from`.
    pub entries: Vec<NodeIdx>,
}

/// The branch summary `b`'s branch (see [`BranchSource`]), its `fromId` read from its line.
/// Errors: the line cannot be read or no longer holds the entry.
pub fn branch_source(
    tree: &Tree,
    source: &dyn LineSource,
    b: NodeIdx,
) -> Result<BranchSource, RenderError> {
    let line = render::line_value(tree, b, source)?;
    let from_id = line.get("fromId").and_then(Value::as_str).map(EntryId::new);
    let from = from_id.as_ref().and_then(|id| tree.find(id.as_str()));
    let Some(from) = from else {
        return Ok(BranchSource {
            from_id,
            from: None,
            left_at: None,
            entries: Vec::new(),
        });
    };
    let target = tree.path_to(tree.node(b).parent);
    let on_target: std::collections::HashSet<NodeIdx> = target.iter().copied().collect();
    let branch = tree.path_to(Some(from));
    let shared = branch.iter().rposition(|n| on_target.contains(n));
    Ok(BranchSource {
        from_id,
        from: Some(from),
        left_at: shared.map(|i| branch[i]),
        entries: branch[shared.map_or(0, |i| i + 1)..].to_vec(),
    })
}

impl BranchSource {
    /// `summarizes the branch of 12 entries a1…b2 (to c3), which left the path after d4`.
    pub fn text(&self, tree: &Tree) -> String {
        let id = |n: NodeIdx| tree.node(n).entry.id.to_string();
        let from = self
            .from_id
            .as_ref()
            .map_or("(none)".to_owned(), ToString::to_string);
        let mut text = match (self.entries.first(), self.entries.last()) {
            (Some(&f), Some(&l)) if f == l => {
                format!("summarizes the branch of 1 entry {} (fromId {from})", id(f))
            }
            (Some(&f), Some(&l)) => format!(
                "summarizes the branch of {} entries {}…{} (fromId {from})",
                self.entries.len(),
                id(f),
                id(l)
            ),
            _ if self.from.is_none() => {
                format!("summarizes no branch the file holds (fromId {from})")
            }
            _ => format!("summarizes no entries (fromId {from})"),
        };
        match self.left_at {
            Some(l) => text.push_str(&format!(", which left this path after {}", id(l))),
            None if self.from.is_some() => text.push_str(", which shares no entry with this path"),
            None => {}
        }
        text
    }
}

/// The messages of the context at `leaf`, each with the entry it came from, as `context`
/// renders them (a compaction's system message and summary both name the compaction).
/// Errors: a line that cannot be read or no longer holds its entry.
pub fn context_messages(
    tree: &Tree,
    source: &dyn LineSource,
    leaf: Option<NodeIdx>,
) -> Result<Vec<(EntryId, Value)>, RenderError> {
    let projection = projection::project_path(tree, leaf);
    let mut out = Vec::new();
    for i in 0..projection.len() {
        let Some(item) = projection.item(tree, i) else {
            break;
        };
        let entry = &tree.node(item.node).entry;
        for message in render::item_values(tree, &item, source)? {
            out.push((entry.id.clone(), message));
        }
    }
    Ok(out)
}

/// The audit of compaction `c` (see the module docs): its span's probes looked up in the
/// context at `c`. A compaction with nothing before its cut has no probes. Errors: a line
/// that cannot be read, or a span pi itself would fail on.
pub fn audit_compaction(
    tree: &Tree,
    source: &dyn LineSource,
    c: NodeIdx,
) -> Result<Retention, CompactionError> {
    let entry = &tree.node(c).entry;
    let EntryKind::Compaction {
        first_kept_entry_id,
        ..
    } = &entry.kind
    else {
        return Ok(empty());
    };
    let projection = projection::project_path(tree, tree.node(c).parent);
    let projected = prepare::projected_entries(tree, &projection, source)?;
    // A `firstKeptEntryId` off the path (or the entry's own id: pi's retain-none) keeps
    // nothing: pi's context then starts with the summary alone.
    let first_kept = first_kept_entry_id
        .as_ref()
        .and_then(|k| (0..projected.len()).find(|&i| projected.id(i) == k))
        .unwrap_or(projected.len());
    let kept_id = first_kept_entry_id
        .clone()
        .unwrap_or_else(|| entry.id.clone());
    let prep = match prepare::prepare_written(&projected, first_kept, kept_id, f64::NAN)? {
        Ok(prep) => prep,
        Err(_) => return Ok(empty()),
    };
    let kept_messages = projected.messages_from(prep.first_kept_index)?;
    let probes = retention::probes(&prep, &projected, &kept_messages)?;
    drop(projected);
    let context = context_messages(tree, source, Some(c))?;
    Ok(retention::check(probes, &context))
}

/// The audit of branch summary `b` whose branch is `branch` ([`branch_source`]): the branch's
/// probes looked up in the context at `b`. Errors: a line that cannot be read.
pub fn audit_branch_summary(
    tree: &Tree,
    source: &dyn LineSource,
    b: NodeIdx,
    branch: &BranchSource,
) -> Result<Retention, CompactionError> {
    // The branch's messages, context edits within it applied, as pi's
    // `prepareBranchEntries` takes them (tool results kept, see the module docs).
    let mut messages = Vec::new();
    let mut file_ops = FileOps::default();
    for item in projection::context_items(tree, &branch.entries, false) {
        let entry = &tree.node(item.node).entry;
        if let EntryKind::BranchSummary { .. } = entry.kind {
            // pi carries a nested branch summary's file lists unless a hook wrote it.
            let line = render::line_value(tree, item.node, source)?;
            if !js::truthy(line.get("fromHook"))
                && let Some(details) = line.get("details").filter(|d| js::truthy(Some(*d)))
            {
                file_ops.add_details(details);
            }
        }
        for message in render::item_values(tree, &item, source)? {
            if message.get("role").and_then(Value::as_str) == Some("system") {
                continue;
            }
            file_ops.add_message(&message);
            messages.push(SpanMessage {
                entry_id: entry.id.clone(),
                message,
            });
        }
    }
    let span = Span {
        entries: 0..messages.len(),
        messages: messages.len(),
    };
    let file_lists = file_ops.lists();
    let carried_from = branch
        .entries
        .iter()
        .rev()
        .find(|&&n| matches!(tree.node(n).entry.kind, EntryKind::BranchSummary { .. }))
        .map(|&n| tree.node(n).entry.id.clone());
    let probes = retention::probes_of(
        &Summarized {
            spans: &[&span],
            file_lists: &file_lists,
            carried_from: carried_from.as_ref(),
        },
        &messages,
        &[],
    )?;
    let context = context_messages(tree, source, Some(b))?;
    Ok(retention::check(probes, &context))
}

fn empty() -> Retention {
    Retention {
        kept: 0,
        lost: 0,
        probes: Vec::new(),
    }
}
