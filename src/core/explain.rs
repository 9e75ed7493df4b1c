//! `explain`: whether an entry reaches the model at a leaf, and exactly why not.
//! Built on [`projection`](super::projection); pure, no I/O.

use serde::Serialize;

use super::format::{EntryId, EntryKind};
use super::projection::{Contribution, Projection, Silence, is_system_message, kept_start};
use super::tree::{NodeIdx, Tree};

/// The answer for one entry at one leaf.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The entry asked about.
    pub entry_id: EntryId,
    /// The leaf the question was asked at (`None`: the empty leaf).
    pub leaf_id: Option<EntryId>,
    /// The entry's `type`.
    #[serde(rename = "type")]
    pub entry_type: String,
    /// Whether any of the entry's messages reach the model at the leaf.
    pub in_context: bool,
    /// Why (or why not), with the entries responsible.
    pub reason: Reason,
    /// Indexes (0-based) into the projected messages that this entry produced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub message_indexes: Vec<usize>,
}

/// Why an entry is, or is not, part of the model's context.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Reason {
    /// The entry's message(s) reach the model unchanged.
    InContext,
    /// The entry reaches the model with content replaced by context edit `edit_id`.
    #[serde(rename_all = "camelCase")]
    ReplacedByEdit {
        /// The `context_edit` entry that replaces the content.
        edit_id: EntryId,
    },
    /// The entry is not on the leaf's path. `diverges_at` is the last entry both paths share
    /// (`None`: different roots); `branch_entry_id` is the child of it that leads to the entry.
    #[serde(rename_all = "camelCase")]
    NotOnPath {
        /// The last entry both paths share; `None`: different roots.
        diverges_at: Option<EntryId>,
        /// The child of `diverges_at` that leads to the entry.
        branch_entry_id: EntryId,
    },
    /// The entry is before the kept range of compaction `compaction_id`, whose summary replaces it.
    #[serde(rename_all = "camelCase")]
    SummarizedByCompaction {
        /// The compaction whose summary replaces the entry.
        compaction_id: EntryId,
        /// The compaction's `firstKeptEntryId`.
        first_kept_entry_id: Option<EntryId>,
    },
    /// A system message inside the kept range: pi drops those (the compaction's
    /// `systemMessage` checkpoint stands in for them).
    #[serde(rename_all = "camelCase")]
    SystemMessageInKeptRange {
        /// The compaction whose kept range holds the system message.
        compaction_id: EntryId,
    },
    /// A context edit with `replacement: null` omits the entry.
    #[serde(rename_all = "camelCase")]
    OmittedByEdit {
        /// The `context_edit` entry with `replacement: null`.
        edit_id: EntryId,
    },
    /// The entry's type never enters the context.
    #[serde(rename_all = "camelCase")]
    NeverInContext {
        /// The entry's `type`.
        entry_type: String,
    },
    /// A branch summary whose summary is empty.
    EmptyBranchSummary,
    /// An older compaction inside a newer compaction's kept range contributes nothing.
    #[serde(rename_all = "camelCase")]
    SupersededCompaction {
        /// The newer compaction whose kept range holds this one.
        by_compaction_id: EntryId,
    },
}

/// Explains `target` at the projection's leaf.
pub fn explain(tree: &Tree, projection: &Projection, target: NodeIdx) -> Explanation {
    let entry = &tree.node(target).entry;
    let id = |n: NodeIdx| tree.node(n).entry.id.clone();
    let mut message_indexes = Vec::new();
    let reason = if let Some(pos) = projection.items.iter().position(|i| i.node == target) {
        let item = projection.items[pos];
        let first_message: usize = projection.items[..pos]
            .iter()
            .map(|i| message_count(i.contribution))
            .sum();
        message_indexes =
            (first_message..first_message + message_count(item.contribution)).collect();
        match item.contribution {
            Contribution::Nothing(Silence::OmittedByEdit) => Reason::OmittedByEdit {
                edit_id: edit_id(tree, item.edit),
            },
            Contribution::Nothing(Silence::EmptyBranchSummary) => Reason::EmptyBranchSummary,
            Contribution::Nothing(Silence::SupersededCompaction) => Reason::SupersededCompaction {
                by_compaction_id: id(projection.items[0].node),
            },
            Contribution::Nothing(Silence::NeverInContext) => Reason::NeverInContext {
                entry_type: entry.kind.type_name().to_owned(),
            },
            _ => match item.edit {
                Some(e) if replaces_content(tree, target) => {
                    Reason::ReplacedByEdit { edit_id: id(e) }
                }
                _ => Reason::InContext,
            },
        }
    } else if let (
        Some(pos),
        Some(compaction),
        EntryKind::Compaction {
            first_kept_entry_id,
            ..
        },
    ) = (
        projection.path.iter().position(|&n| n == target),
        projection.compaction,
        projection
            .compaction
            .map(|c| &tree.node(c).entry.kind)
            .unwrap_or(&EntryKind::Usage),
    ) {
        // On the path but not in the context: only a compaction removes path entries.
        let cpos = projection
            .path
            .iter()
            .position(|&n| n == compaction)
            .unwrap_or(0);
        let kept = kept_start(
            tree,
            &projection.path[..cpos],
            first_kept_entry_id.as_ref().map(EntryId::as_str),
        );
        if kept.is_some_and(|k| pos >= k) && is_system_message(tree, target) {
            Reason::SystemMessageInKeptRange {
                compaction_id: id(compaction),
            }
        } else {
            Reason::SummarizedByCompaction {
                compaction_id: id(compaction),
                first_kept_entry_id: first_kept_entry_id.clone(),
            }
        }
    } else {
        let target_path = tree.path_to(Some(target));
        let shared = target_path
            .iter()
            .zip(&projection.path)
            .take_while(|(a, b)| a == b)
            .count();
        Reason::NotOnPath {
            diverges_at: shared.checked_sub(1).map(|i| id(target_path[i])),
            branch_entry_id: id(target_path.get(shared).copied().unwrap_or(target)),
        }
    };
    let in_context = matches!(reason, Reason::InContext | Reason::ReplacedByEdit { .. });
    Explanation {
        entry_id: entry.id.clone(),
        leaf_id: projection.leaf.map(id),
        entry_type: entry.kind.type_name().to_owned(),
        in_context,
        reason,
        message_indexes,
    }
}

/// How many messages a contribution produces.
pub fn message_count(c: Contribution) -> usize {
    match c {
        Contribution::Nothing(_) => 0,
        Contribution::CompactionSummary {
            with_system_message: true,
        } => 2,
        _ => 1,
    }
}

fn edit_id(tree: &Tree, edit: Option<NodeIdx>) -> EntryId {
    edit.map_or_else(|| EntryId::new(""), |e| tree.node(e).entry.id.clone())
}

/// Whether a (non-null) context edit changes this entry's content: pi edits only user,
/// assistant, toolResult and custom messages.
fn replaces_content(tree: &Tree, target: NodeIdx) -> bool {
    use super::format::Role;
    match &tree.node(target).entry.kind {
        EntryKind::CustomMessage => true,
        EntryKind::Message(m) => {
            matches!(
                m.role,
                Role::User | Role::Assistant | Role::ToolResult | Role::Custom | Role::HookMessage
            )
        }
        _ => false,
    }
}
