//! Two leaves of one tree compared, in the shape every dialect fills: where their paths part
//! (the fork point), the entries on each side after it, what each side did, and what the model
//! sees at one leaf and not at the other, each difference with its reason in the dialect's
//! `explain` vocabulary. The dialects compute the counts and the reasons (`dialect::pi::compare`,
//! `dialect::claude::compare`); `view::compare` prints the report. Pure: lines are read through
//! [`LineSource`] for previews only.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::core::describe::Describe;
use crate::core::diagnostics::Diagnostic;
use crate::core::ids::EntryId;
use crate::core::source::LineSource;
use crate::core::tree::{NodeIdx, Tree, TreeEntry};

/// Two leaves compared (`sessiond diff --json`, `session/compareBranches`); `R` is the
/// dialect's explain reason.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison<R> {
    /// The first leaf.
    pub leaf_a: EntryId,
    /// The second leaf.
    pub leaf_b: EntryId,
    /// The last entry both paths share; `None`: they share none (two roots).
    pub fork_point_id: Option<EntryId>,
    /// The entries on A's path after the fork point, in path order.
    pub only_a: Vec<PathEntry>,
    /// The entries on B's path after the fork point, in path order.
    pub only_b: Vec<PathEntry>,
    /// What A's side (its entries after the fork point) did.
    pub side_a: Side,
    /// What B's side did.
    pub side_b: Side,
    /// The context entries at A that are not context entries at B, with why not at B.
    pub context_only_a: Vec<ContextDifference<R>>,
    /// The context entries at B that are not context entries at A, with why not at A.
    pub context_only_b: Vec<ContextDifference<R>>,
    /// The context entries at both leaves that reach the model differently at each.
    pub context_changed: Vec<ContextChange<R>>,
    /// The context entries at both leaves that reach the model the same way at each.
    pub context_common: usize,
    /// The thinking level at each leaf, when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<Differ>,
    /// The model at each leaf, when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Differ>,
    /// Problems of the read (a lenient read of a corrupt file: what it skipped or repaired).
    pub diagnostics: Vec<Diagnostic>,
}

impl<R> Comparison<R> {
    /// Leaves `a` and `b` of `tree`, whose paths part at `fork`: the leaves, the fork point, each
    /// side's entries and the read's diagnostics; every count and difference empty, for the
    /// dialect to fill.
    pub fn parted<E: Describe>(
        tree: &Tree<E>,
        lines: &dyn LineSource,
        (a, b): (NodeIdx, NodeIdx),
        fork: &Fork,
    ) -> Self {
        let id = |n: NodeIdx| tree.node(n).entry.id().clone();
        Comparison {
            leaf_a: id(a),
            leaf_b: id(b),
            fork_point_id: fork.point.map(id),
            only_a: path_entries(tree, lines, &fork.only_a),
            only_b: path_entries(tree, lines, &fork.only_b),
            side_a: Side::default(),
            side_b: Side::default(),
            context_only_a: Vec::new(),
            context_only_b: Vec::new(),
            context_changed: Vec::new(),
            context_common: 0,
            thinking_level: None,
            model: None,
            diagnostics: tree.diagnostics().to_vec(),
        }
    }
}

/// An entry of one side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathEntry {
    /// The entry's id.
    pub id: EntryId,
    /// Its `type` as written.
    #[serde(rename = "type")]
    pub entry_type: String,
    /// A message's role.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// One line of its content, as `tree` shows it.
    pub preview: String,
}

/// What one side did: counts over its entries after the fork point, and the context tokens at
/// its leaf.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// Entries after the fork point.
    pub entries: usize,
    /// User messages (a user's turn each).
    pub user_turns: usize,
    /// Assistant messages.
    pub assistant_messages: usize,
    /// Tool calls by tool name.
    pub tool_calls: BTreeMap<String, usize>,
    /// The files the side wrote or edited (calls whose result reports success), as `verify`
    /// reads them: resolved against the session's working directory, in first-touch order.
    pub files_changed: Vec<String>,
    /// The tokens of the context at the leaf, as `list` counts them; `None` where the count
    /// cannot be made.
    pub token_estimate: Option<u64>,
    /// Model and thinking-level changes on the side, in path order.
    pub setting_changes: Vec<SettingChange>,
}

/// A model or thinking-level change.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingChange {
    /// The entry that changes it.
    pub id: EntryId,
    /// `model` or `thinkingLevel`.
    pub setting: &'static str,
    /// The new value, as written.
    pub value: Value,
}

/// A context entry of one leaf that is not one of the other's.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextDifference<R> {
    /// The entry.
    pub id: EntryId,
    /// Its `type`.
    #[serde(rename = "type")]
    pub entry_type: String,
    /// A message's role.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Why it is not a context entry at the other leaf (the dialect's explain reason there).
    pub reason: R,
    /// The reason in a few words, naming the side of the entry responsible
    /// (`summarized by compaction 4909db93, on A only`).
    pub text: String,
}

/// A context entry of both leaves that reaches the model differently at each.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextChange<R> {
    /// The entry.
    pub id: EntryId,
    /// Its `type`.
    #[serde(rename = "type")]
    pub entry_type: String,
    /// A message's role.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// How it reaches the model at A.
    pub a: R,
    /// How it reaches the model at B.
    pub b: R,
    /// The difference in a few words.
    pub text: String,
}

/// A setting that differs: its value at each leaf (`null`: none).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Differ {
    /// At A.
    pub a: Value,
    /// At B.
    pub b: Value,
}

/// Where two paths part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fork {
    /// The last entry both share; `None` when they share none.
    pub point: Option<NodeIdx>,
    /// A's entries after it.
    pub only_a: Vec<NodeIdx>,
    /// B's entries after it.
    pub only_b: Vec<NodeIdx>,
}

/// Where two root-to-leaf paths part: their longest common prefix.
pub fn fork(path_a: &[NodeIdx], path_b: &[NodeIdx]) -> Fork {
    let shared = path_a
        .iter()
        .zip(path_b)
        .take_while(|(a, b)| a == b)
        .count();
    Fork {
        point: shared.checked_sub(1).map(|i| path_a[i]),
        only_a: path_a[shared..].to_vec(),
        only_b: path_b[shared..].to_vec(),
    }
}

/// `nodes` as [`PathEntry`]s, each previewed from its line (an unreadable line: no preview).
pub fn path_entries<E: Describe>(
    tree: &Tree<E>,
    lines: &dyn LineSource,
    nodes: &[NodeIdx],
) -> Vec<PathEntry> {
    nodes
        .iter()
        .map(|&n| {
            let e = &tree.node(n).entry;
            PathEntry {
                id: e.id().clone(),
                entry_type: e.type_name().to_owned(),
                role: e.role().map(str::to_owned),
                preview: lines
                    .line(e.span())
                    .map(|l| e.preview(&l))
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Which side of a [`Fork`] an entry is on, asked for many entries.
pub struct Sides {
    a: HashSet<NodeIdx>,
    b: HashSet<NodeIdx>,
}

impl Sides {
    /// Indexes the two sides of `fork`.
    pub fn new(fork: &Fork) -> Self {
        Sides {
            a: fork.only_a.iter().copied().collect(),
            b: fork.only_b.iter().copied().collect(),
        }
    }

    /// `on A only`, `on B only` or `on both` (an entry of the shared prefix).
    pub fn of(&self, n: NodeIdx) -> &'static str {
        if self.a.contains(&n) {
            "on A only"
        } else if self.b.contains(&n) {
            "on B only"
        } else {
            "on both"
        }
    }

    /// [`Sides::of`] the entry `id` names in `tree`; empty when it names none.
    pub fn of_id<E: TreeEntry>(&self, tree: &Tree<E>, id: &EntryId) -> &'static str {
        tree.find(id.as_str()).map_or("", |n| self.of(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_is_the_common_prefix() {
        let f = fork(&[0, 1, 2, 3], &[0, 1, 4]);
        assert_eq!(f.point, Some(1));
        assert_eq!((f.only_a, f.only_b), (vec![2, 3], vec![4]));
        let same = fork(&[0, 1], &[0, 1]);
        assert_eq!(same.point, Some(1));
        assert!(same.only_a.is_empty() && same.only_b.is_empty());
        let roots = fork(&[0, 1], &[2]);
        assert_eq!(roots.point, None);
        assert_eq!((roots.only_a, roots.only_b), (vec![0, 1], vec![2]));
    }
}
