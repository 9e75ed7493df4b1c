//! `explain`: whether an entry reaches the model at a leaf, and exactly why not.
//! Built on [`projection`](super::projection); pure, no I/O.
//!
//! One vocabulary, the one `context` uses: the **context entries** at a leaf are pi's
//! `buildContextEntries` (`entryIds`): the leaf's path from its newest compaction on. An entry
//! is either a context entry that contributes a message; or a context entry that contributes
//! a setting (the thinking level or model in effect) or nothing; or not a context entry, and
//! then the reason says why (another branch, summarized by a compaction, a system message a
//! compaction drops). [`Explanation::text`] says it in one sentence, for the CLI and, through
//! the daemon, the editors.

use std::collections::HashMap;

use serde::Serialize;

pub use crate::core::retention::SummarySource;
use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::compaction::CompactionError;
use crate::dialect::pi::compaction::audit;
use crate::dialect::pi::compaction::retention::Retention;
use crate::dialect::pi::format::{EntryId, EntryKind};
use crate::dialect::pi::projection::{
    ContextItem, Contribution, Projection, Silence, is_system_message, kept_start,
};
use crate::dialect::pi::render::LineSource;

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
    /// Whether the entry is one of the context entries at the leaf (`entryIds` of `context`).
    pub context_entry: bool,
    /// What the entry adds to what the model gets at the leaf.
    pub contributes: Contributes,
    /// Why (or why not), with the entries responsible.
    pub reason: Reason,
    /// Indexes (0-based) into the projected messages that this entry produced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub message_indexes: Vec<usize>,
    /// The answer in one sentence, in the vocabulary of the module docs.
    pub text: String,
    /// A compaction: the entries it replaced ([`explain_with_audit`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SummarySource>,
    /// A branch summary: the branch it replaced ([`explain_with_audit`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<SummarizedBranch>,
    /// A compaction or branch summary: the retention probes of what it replaced, looked up
    /// in the context it starts ([`explain_with_audit`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<Retention>,
}

/// The branch a branch summary replaced ([`audit::BranchSource`]), by id.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SummarizedBranch {
    /// The summary's `fromId` as written: the leaf pi left (`root`: the empty leaf).
    pub from_id: Option<EntryId>,
    /// The deepest entry the branch shares with the summary's path: where the branch left it
    /// (`null`: none shared).
    pub left_at_id: Option<EntryId>,
    /// Entries of the branch after `leftAtId` up to `fromId`.
    pub count: usize,
    /// The branch's first entry; `null` when it is empty.
    pub first_id: Option<EntryId>,
    /// The branch's last entry (`fromId`'s); `null` when it is empty.
    pub last_id: Option<EntryId>,
}

/// [`explain`], and for a compaction or a branch summary where its summary came from and
/// what it kept ([`audit`]): `source` or `branch`, `audit`, and both said in `text`.
/// Errors: a line that cannot be read, or a span pi itself would fail on.
pub fn explain_with_audit(
    tree: &Tree,
    projection: &Projection,
    target: NodeIdx,
    lines: &dyn LineSource,
) -> Result<Explanation, CompactionError> {
    let mut ex = explain(tree, projection, target);
    let id = |n: Option<NodeIdx>| n.map(|n| tree.node(n).entry.id.clone());
    let (what, retention) = match &tree.node(target).entry.kind {
        EntryKind::Compaction { .. } => {
            let s = audit::source(tree, target);
            let what = s.text(tree);
            ex.source = Some(SummarySource {
                count: s.count,
                first_id: id(s.first),
                last_id: id(s.last),
                first_kept_entry_id: s.first_kept_entry_id.clone(),
                previous_compaction_id: id(s.previous),
            });
            (what, audit::audit_compaction(tree, lines, target)?)
        }
        EntryKind::BranchSummary { .. } => {
            let b = audit::branch_source(tree, lines, target)?;
            let what = b.text(tree);
            ex.branch = Some(SummarizedBranch {
                from_id: b.from_id.clone(),
                left_at_id: id(b.left_at),
                count: b.entries.len(),
                first_id: id(b.entries.first().copied()),
                last_id: id(b.entries.last().copied()),
            });
            (what, audit::audit_branch_summary(tree, lines, target, &b)?)
        }
        _ => return Ok(ex),
    };
    ex.text = format!(
        "{}; it {what}; {}",
        ex.text,
        crate::core::retention::retention_text(&retention)
    );
    ex.audit = Some(retention);
    Ok(ex)
}

/// What an entry adds to what the model gets at a leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Contributes {
    /// One or more messages (`messageIndexes`).
    Message,
    /// The thinking level or the model in effect at the leaf: the entry is the latest change of
    /// it on the leaf's path (pi reads settings from the whole path, before any compaction too).
    Setting,
    /// Nothing.
    Nothing,
}

/// Why an entry is, or is not, part of the model's context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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
    let mut message_indexes = Vec::new();
    let reason = if let Some(pos) = projection.items.iter().position(|i| i.node == target) {
        let item = projection.items[pos];
        let first_message: usize = projection.items[..pos]
            .iter()
            .map(|i| message_count(i.contribution))
            .sum();
        message_indexes =
            (first_message..first_message + message_count(item.contribution)).collect();
        item_reason(tree, projection, &item)
    } else if let Some(pos) = projection.path.iter().position(|&n| n == target)
        && let Some(reason) =
            path_reason(tree, projection, target, pos, kept_range(tree, projection))
    {
        reason
    } else {
        let target_path = tree.path_to(Some(target));
        let shared = target_path
            .iter()
            .zip(&projection.path)
            .take_while(|(a, b)| a == b)
            .count();
        let id = |n: NodeIdx| tree.node(n).entry.id.clone();
        Reason::NotOnPath {
            diverges_at: shared.checked_sub(1).map(|i| id(target_path[i])),
            branch_entry_id: id(target_path.get(shared).copied().unwrap_or(target)),
        }
    };
    let in_context = matches!(reason, Reason::InContext | Reason::ReplacedByEdit { .. });
    let context_entry = projection.items.iter().any(|i| i.node == target);
    let setting = setting_of(tree, projection, target);
    let contributes = if in_context {
        Contributes::Message
    } else if matches!(setting, Some(Setting { later: None, .. })) {
        Contributes::Setting
    } else {
        Contributes::Nothing
    };
    let mut ex = Explanation {
        entry_id: entry.id.clone(),
        leaf_id: projection.leaf.map(|n| tree.node(n).entry.id.clone()),
        entry_type: entry.kind.type_name().to_owned(),
        in_context,
        context_entry,
        contributes,
        reason,
        message_indexes,
        text: String::new(),
        source: None,
        branch: None,
        audit: None,
    };
    ex.text = sentence(&ex, setting.as_ref(), &entry.kind);
    ex
}

/// Why a context entry contributes what it does (`item` is its context item).
fn item_reason(tree: &Tree, projection: &Projection, item: &ContextItem) -> Reason {
    let id = |n: NodeIdx| tree.node(n).entry.id.clone();
    match item.contribution {
        Contribution::Nothing(Silence::OmittedByEdit) => Reason::OmittedByEdit {
            edit_id: edit_id(tree, item.edit),
        },
        Contribution::Nothing(Silence::EmptyBranchSummary) => Reason::EmptyBranchSummary,
        Contribution::Nothing(Silence::SupersededCompaction) => Reason::SupersededCompaction {
            by_compaction_id: id(projection.items[0].node),
        },
        Contribution::Nothing(Silence::NeverInContext) => Reason::NeverInContext {
            entry_type: tree.node(item.node).entry.kind.type_name().to_owned(),
        },
        _ => match item.edit {
            Some(e) if replaces_content(tree, item.node) => {
                Reason::ReplacedByEdit { edit_id: id(e) }
            }
            _ => Reason::InContext,
        },
    }
}

/// The projection's compaction and its `firstKeptEntryId`, if it has one.
fn compaction_of<'t>(
    tree: &'t Tree,
    projection: &Projection,
) -> Option<(NodeIdx, &'t Option<EntryId>)> {
    let compaction = projection.compaction?;
    let EntryKind::Compaction {
        first_kept_entry_id,
        ..
    } = &tree.node(compaction).entry.kind
    else {
        return None;
    };
    Some((compaction, first_kept_entry_id))
}

/// Where the kept range of the projection's compaction starts on its path, if it has one.
fn kept_range(tree: &Tree, projection: &Projection) -> Option<usize> {
    let (compaction, first_kept_entry_id) = compaction_of(tree, projection)?;
    let cpos = projection
        .path
        .iter()
        .position(|&n| n == compaction)
        .unwrap_or(0);
    kept_start(
        tree,
        &projection.path[..cpos],
        first_kept_entry_id.as_ref().map(EntryId::as_str),
    )
}

/// Why an entry at `pos` on the leaf's path is not a context entry (`kept`: [`kept_range`]):
/// only a compaction removes path entries. `None` without one (the entry is then a context
/// entry).
fn path_reason(
    tree: &Tree,
    projection: &Projection,
    target: NodeIdx,
    pos: usize,
    kept: Option<usize>,
) -> Option<Reason> {
    let (compaction, first_kept_entry_id) = compaction_of(tree, projection)?;
    let compaction_id = tree.node(compaction).entry.id.clone();
    Some(
        if kept.is_some_and(|k| pos >= k) && is_system_message(tree, target) {
            Reason::SystemMessageInKeptRange { compaction_id }
        } else {
            Reason::SummarizedByCompaction {
                compaction_id,
                first_kept_entry_id: first_kept_entry_id.clone(),
            }
        },
    )
}

/// The [`Reason`]s of many entries at one leaf, each found without walking the path again
/// (a comparison of two leaves asks for thousands): the context items and the path are
/// indexed once. The same answers as [`explain`]'s `reason`.
pub struct Reasons<'a> {
    tree: &'a Tree,
    projection: &'a Projection,
    items: HashMap<NodeIdx, usize>,
    path: HashMap<NodeIdx, usize>,
    kept: Option<usize>,
}

impl<'a> Reasons<'a> {
    /// Indexes the projection's context items and path.
    pub fn new(tree: &'a Tree, projection: &'a Projection) -> Self {
        Reasons {
            tree,
            projection,
            items: projection
                .items
                .iter()
                .enumerate()
                .map(|(i, item)| (item.node, i))
                .collect(),
            path: projection
                .path
                .iter()
                .enumerate()
                .map(|(i, &n)| (n, i))
                .collect(),
            kept: kept_range(tree, projection),
        }
    }

    /// Whether `target` is one of the context entries.
    pub fn is_context_entry(&self, target: NodeIdx) -> bool {
        self.items.contains_key(&target)
    }

    /// Whether `target` is on the leaf's path.
    pub fn on_path(&self, target: NodeIdx) -> bool {
        self.path.contains_key(&target)
    }

    /// Why `target` is or is not part of the context. An entry off the path is walked up to
    /// the path (as far as where it leaves it).
    pub fn of(&self, target: NodeIdx) -> Reason {
        let (tree, projection) = (self.tree, self.projection);
        if let Some(&i) = self.items.get(&target) {
            return item_reason(tree, projection, &projection.items[i]);
        }
        if let Some(&pos) = self.path.get(&target)
            && let Some(reason) = path_reason(tree, projection, target, pos, self.kept)
        {
            return reason;
        }
        let id = |n: NodeIdx| tree.node(n).entry.id.clone();
        let mut child = target;
        let mut up = tree.node(target).parent;
        while let Some(p) = up {
            if self.path.contains_key(&p) {
                break;
            }
            child = p;
            up = tree.node(p).parent;
        }
        Reason::NotOnPath {
            diverges_at: up.map(id),
            branch_entry_id: id(child),
        }
    }
}

/// A `thinking_level_change` or `model_change` on the leaf's path: what it sets, and the
/// later change of the same setting on the path that overrides it, if any.
struct Setting {
    /// `thinking level (high)`, `model (anthropic/claude-sonnet-4-5)`.
    what: String,
    /// The later entry on the path that sets it again.
    later: Option<EntryId>,
}

fn setting_of(tree: &Tree, projection: &Projection, target: NodeIdx) -> Option<Setting> {
    use crate::dialect::pi::format::{Role, raw_str};
    let text = |r: &Option<crate::dialect::pi::format::SharedRaw>| {
        r.as_ref().map_or(String::new(), |r| {
            raw_str(r).map_or(r.get().to_owned(), |s| s.into_owned())
        })
    };
    let (what, same): (String, fn(&EntryKind) -> bool) = match &tree.node(target).entry.kind {
        EntryKind::ThinkingLevelChange { level } => {
            (format!("thinking level ({})", text(level)), |k| {
                matches!(k, EntryKind::ThinkingLevelChange { .. })
            })
        }
        EntryKind::ModelChange { provider, model_id } => (
            format!("model ({}/{})", text(provider), text(model_id)),
            |k| {
                matches!(k, EntryKind::ModelChange { .. })
                    || matches!(k, EntryKind::Message(m) if m.role == Role::Assistant)
            },
        ),
        _ => return None,
    };
    let pos = projection.path.iter().position(|&n| n == target)?;
    let later = projection.path[pos + 1..]
        .iter()
        .rev()
        .find(|&&n| same(&tree.node(n).entry.kind))
        .map(|&n| tree.node(n).entry.id.clone());
    Some(Setting { what, later })
}

/// `as message 3`, `as messages 3 and 4`: numbered from 1, as `sessiond context` and the
/// editors number them (`messageIndexes` count from 0).
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

/// The explanation in one sentence (see the module docs for the vocabulary).
fn sentence(ex: &Explanation, setting: Option<&Setting>, kind: &EntryKind) -> String {
    let leaf = ex
        .leaf_id
        .as_ref()
        .map_or("(the empty leaf)".to_owned(), ToString::to_string);
    let head = match &*ex.entry_type {
        "" => format!("entry {} (no type) at leaf {leaf}: ", ex.entry_id),
        ty => format!("entry {} ({ty}) at leaf {leaf}: ", ex.entry_id),
    };
    let no_message = "a context entry that adds no message";
    // What a setting entry still does, whatever happened to it as an entry.
    let sets = match setting {
        Some(Setting { what, later: None }) => format!("; it sets the {what}, in effect here"),
        Some(Setting {
            what,
            later: Some(l),
        }) => format!("; its {what} is overridden by the later entry {l}"),
        None => String::new(),
    };
    // What an entry that never becomes a message is for.
    let target = |t: &Option<EntryId>| t.as_ref().map_or("(none)".to_owned(), ToString::to_string);
    let role = match kind {
        EntryKind::Label { target_id, .. } => format!("it labels entry {}", target(target_id)),
        EntryKind::SessionInfo { .. } => "it names the session".to_owned(),
        EntryKind::ContextEdit {
            target_id, omits, ..
        } => format!(
            "it {} the content of entry {} for the model",
            if *omits { "omits" } else { "replaces" },
            target(target_id)
        ),
        EntryKind::Custom => "extension state, never a message".to_owned(),
        EntryKind::Usage => "usage numbers, never a message".to_owned(),
        // An entry without a string `type` (kept by a lenient read, as pi keeps it).
        EntryKind::Untyped => "an entry without a type never becomes a message".to_owned(),
        k => format!("a {} entry never becomes a message", k.type_name()),
    };
    let why = match &ex.reason {
        Reason::InContext => format!(
            "a context entry; it reaches the model {}",
            as_messages(&ex.message_indexes)
        ),
        Reason::ReplacedByEdit { edit_id } => format!(
            "a context entry; it reaches the model {}, its content replaced by context edit {edit_id}",
            as_messages(&ex.message_indexes)
        ),
        Reason::NeverInContext { .. } => match setting {
            Some(_) => format!("{no_message}{sets}"),
            None => format!("{no_message}: {role}"),
        },
        Reason::EmptyBranchSummary => format!("{no_message}: its summary is empty"),
        Reason::SupersededCompaction { by_compaction_id } => format!(
            "{no_message}: an older compaction inside the kept range of compaction \
             {by_compaction_id}, whose summary replaces it"
        ),
        Reason::OmittedByEdit { edit_id } => {
            format!("{no_message}: context edit {edit_id} omits its content")
        }
        Reason::NotOnPath {
            diverges_at,
            branch_entry_id,
        } => match diverges_at {
            // Below the leaf (a linear session asked at an earlier leaf): no other branch.
            Some(d) if Some(d) == ex.leaf_id.as_ref() => format!(
                "not a context entry: it comes after the leaf (below it, through \
                 {branch_entry_id})"
            ),
            Some(d) => format!(
                "not a context entry: it is on another branch, which leaves the leaf's path \
                 after {d} (the branch starts at {branch_entry_id})"
            ),
            None => format!(
                "not a context entry: it is under another root ({branch_entry_id}) than the leaf"
            ),
        },
        Reason::SummarizedByCompaction {
            compaction_id,
            first_kept_entry_id,
        } => format!(
            "not a context entry: compaction {compaction_id} summarizes it (and keeps entries \
             from {} on){sets}",
            first_kept_entry_id
                .as_ref()
                .map_or("(none)".to_owned(), ToString::to_string)
        ),
        Reason::SystemMessageInKeptRange { compaction_id } => format!(
            "not a context entry: a system message inside the kept range of compaction \
             {compaction_id}, which pi drops (the compaction's own systemMessage stands in)"
        ),
    };
    head + &why
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
    use crate::dialect::pi::format::Role;
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
