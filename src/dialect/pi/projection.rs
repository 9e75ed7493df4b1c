//! The projection: which entries on a leaf's path become the model's context, and how
//! each one contributes. Matches pi 1.6.0 `buildSessionPath`, `buildContextEntries`,
//! `getSessionContextSettings`, `sessionEntryToContextMessages` and `projectContextEntry`.
//!
//! This module decides everything from the tree's small fields; turning the decision into
//! message JSON needs the entries' bodies and lives in `core::render`.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use foldhash::fast::RandomState;

use serde_json::value::RawValue;

use crate::core::diagnostics::Diagnostic;
use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
pub use crate::dialect::pi::format::ModelRef;
use crate::dialect::pi::format::{EntryId, EntryKind, Role, SharedRaw, ToolCallId};

/// How one context entry contributes to the model's messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contribution {
    /// A `message` entry's message (with pi's null-content and `hookMessage` fixes).
    Message,
    /// A `custom_message` entry as a `custom` message.
    CustomMessage,
    /// A `branch_summary` with a summary, as a `branchSummary` message.
    BranchSummary,
    /// The newest compaction: its `systemMessage` (if any), then a `compactionSummary` message.
    CompactionSummary {
        /// The compaction has a truthy `systemMessage`, emitted before the summary.
        with_system_message: bool,
    },
    /// Nothing reaches the model; see [`Silence`] for why.
    Nothing(Silence),
}

/// Why a context entry contributes no message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Silence {
    /// Labels, custom entries, session info, model/thinking changes, usage, context edits
    /// and unknown types never enter the context.
    NeverInContext,
    /// A `branch_summary` whose summary is empty.
    EmptyBranchSummary,
    /// An older compaction inside the newest compaction's kept range.
    SupersededCompaction,
    /// A context edit with `replacement: null` targets this entry.
    OmittedByEdit,
}

/// One entry of the compaction-aware context list.
#[derive(Clone, Copy, Debug)]
pub struct ContextItem {
    /// The entry's node.
    pub node: NodeIdx,
    /// What the entry adds to the messages.
    pub contribution: Contribution,
    /// The latest context edit (within the context) that targets this entry.
    pub edit: Option<NodeIdx>,
}

/// The projection of a session at one leaf.
#[derive(Clone, Debug)]
pub struct Projection {
    /// The leaf; `None` for the explicit empty leaf or an empty session.
    pub leaf: Option<NodeIdx>,
    /// Root-to-leaf path.
    pub path: Vec<NodeIdx>,
    /// The compaction that starts the context, if the path has one.
    pub compaction: Option<NodeIdx>,
    /// pi's `buildContextEntries`, each with how it contributes.
    pub items: Vec<ContextItem>,
    /// `None` when the latest `thinking_level_change` has no level (pi then omits the key);
    /// otherwise the raw level, `"off"` by default.
    pub thinking_level: Option<SharedRaw>,
    /// `None` prints as `null`.
    pub model: Option<ModelRef>,
    /// Tool pairing problems in the projected context.
    pub diagnostics: Vec<Diagnostic>,
}

/// Projects the session at `leaf` (`None`: the empty leaf, before the first entry).
/// Use [`Tree::default_leaf`] for pi's default.
pub fn project(tree: &Tree, leaf: Option<NodeIdx>) -> Projection {
    // The walk to the root ([`walk_path`]) decides the settings on the way; the items and the
    // tool pairing share one pass forward.
    let (walked, settings) = walk_path(tree, leaf);
    let (thinking_level, model) = settings.decided();
    let mut pairing = ToolPairing::<&str>::with_capacity(walked.len());
    let items = context_items_with(tree, walked.entries(), false, &walked.edits, |item| {
        pairing.push(tree, item)
    });
    let diagnostics = pairing.diagnostics(tree);
    let PathProjection {
        leaf,
        path,
        compaction,
        ..
    } = walked;
    Projection {
        leaf,
        path,
        compaction,
        items,
        thinking_level,
        model,
        diagnostics,
    }
}

/// The path to `leaf` and its context entries ([`PathProjection`]), and the settings seen on
/// the way: one walk from the leaf to the root reads each entry of the path once, for the
/// settings and for whether the path holds a compaction (without one the context entries are
/// the path itself, not a copy) or a context edit (without one no edit is looked for).
fn walk_path(tree: &Tree, leaf: Option<NodeIdx>) -> (PathProjection, SettingsBack<'_>) {
    let mut walk = PathWalk::default();
    let path = tree.path_to_with(leaf, |node| walk.see(&node.entry.kind));
    let entries = walk.has_compaction.then(|| context_entries(tree, &path));
    let list = entries.as_deref().unwrap_or(&path);
    let compaction = list
        .first()
        .copied()
        .filter(|&n| matches!(tree.node(n).entry.kind, EntryKind::Compaction { .. }));
    let edits = if walk.has_context_edit {
        edits_by_target(tree, list)
    } else {
        HashMap::new()
    };
    let walked = PathProjection {
        leaf,
        path,
        compaction,
        entries,
        edits,
    };
    (walked, walk.settings)
}

/// What [`walk_path`] reads on its walk from the leaf to the root.
#[derive(Default)]
struct PathWalk<'t> {
    settings: SettingsBack<'t>,
    /// Whether an entry of the path is a compaction (the context entries are then not the
    /// whole path).
    has_compaction: bool,
    /// Whether an entry of the path is a context edit (without one, no entry is edited).
    has_context_edit: bool,
}

impl<'t> PathWalk<'t> {
    fn see(&mut self, kind: &'t EntryKind) {
        self.settings.see(kind);
        self.has_compaction |= matches!(kind, EntryKind::Compaction { .. });
        self.has_context_edit |= matches!(kind, EntryKind::ContextEdit { .. });
    }
}

/// The projection compaction reads: the path and its compaction-aware context entries,
/// without the per-entry [`ContextItem`] list of [`Projection`] (16 bytes an entry) nor the
/// tool pairing check (whose map holds every call id). An entry's item is worked out when
/// asked for ([`PathProjection::item`]), the same as [`context_items`] would have it.
///
/// Memory: the path (4 bytes an entry), the context entries only when they are not the whole
/// path (a path with a compaction, 4 bytes an entry), and the context edits by target.
#[derive(Clone, Debug)]
pub struct PathProjection {
    /// The leaf; `None` for the explicit empty leaf or an empty session.
    pub leaf: Option<NodeIdx>,
    /// Root-to-leaf path.
    pub path: Vec<NodeIdx>,
    /// The compaction that starts the context, if the path has one.
    pub compaction: Option<NodeIdx>,
    /// pi's `buildContextEntries`; `None` when they are the whole path (no compaction).
    entries: Option<Vec<NodeIdx>>,
    /// The latest context edit (within the context) per target id.
    edits: HashMap<EntryId, NodeIdx>,
}

impl PathProjection {
    /// Number of context entries.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// True when the context has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }

    /// The context entries, in order.
    pub fn entries(&self) -> &[NodeIdx] {
        self.entries.as_deref().unwrap_or(&self.path)
    }

    /// The node of context entry `i`, if there is one.
    pub fn node(&self, i: usize) -> Option<NodeIdx> {
        self.entries().get(i).copied()
    }

    /// Context entry `i` as [`context_items`] gives it (`None` past the end).
    pub fn item(&self, tree: &Tree, i: usize) -> Option<ContextItem> {
        let node = self.node(i)?;
        Some(context_item(
            tree,
            node,
            i > 0,
            edit_of(tree, &self.edits, node),
        ))
    }
}

/// [`project`] for compaction (see [`PathProjection`]): the path and the context entries.
pub fn project_path(tree: &Tree, leaf: Option<NodeIdx>) -> PathProjection {
    walk_path(tree, leaf).0
}

/// The latest context edit per target id among `entries` (pi 1.6.0: a later edit of the same
/// target replaces an earlier one). Ids are cloned, which for pi's 8-character ids copies 16
/// bytes and allocates nothing.
fn edits_by_target(tree: &Tree, entries: &[NodeIdx]) -> HashMap<EntryId, NodeIdx> {
    let mut edits = HashMap::new();
    for &n in entries {
        if let EntryKind::ContextEdit {
            target_id: Some(t), ..
        } = &tree.node(n).entry.kind
        {
            edits.insert(t.clone(), n);
        }
    }
    edits
}

/// The edit in `edits` (see [`edits_by_target`]) that targets `node`, if any.
fn edit_of(tree: &Tree, edits: &HashMap<EntryId, NodeIdx>, node: NodeIdx) -> Option<NodeIdx> {
    if edits.is_empty() {
        return None;
    }
    edits.get(tree.node(node).entry.id.as_str()).copied()
}

/// How each entry of a compaction-aware context list contributes: the first entry, if a
/// compaction, gives its summary and any later compaction nothing; context edits within the
/// list apply (the latest per target). Shared by [`project`] and by compaction, which
/// projects the context an entry not yet written would start: with `after_new_compaction`
/// the list is what follows such an entry, so every compaction in it is superseded.
pub fn context_items(
    tree: &Tree,
    entries: &[NodeIdx],
    after_new_compaction: bool,
) -> Vec<ContextItem> {
    let edits = edits_by_target(tree, entries);
    context_items_with(tree, entries, after_new_compaction, &edits, |_| {})
}

/// [`context_items`] with the context edits of `entries` ([`edits_by_target`]) at hand,
/// showing `each` every item as it is made.
fn context_items_with(
    tree: &Tree,
    entries: &[NodeIdx],
    after_new_compaction: bool,
    edits: &HashMap<EntryId, NodeIdx>,
    mut each: impl FnMut(&ContextItem),
) -> Vec<ContextItem> {
    entries
        .iter()
        .enumerate()
        .map(|(i, &node)| {
            let edit = edit_of(tree, edits, node);
            let item = context_item(tree, node, i > 0 || after_new_compaction, edit);
            each(&item);
            item
        })
        .collect()
}

/// How one entry of a context list contributes, given whether a compaction in it is
/// superseded (it is not the list's first entry) and the latest edit that targets it.
pub(crate) fn context_item(
    tree: &Tree,
    node: NodeIdx,
    superseded: bool,
    edit: Option<NodeIdx>,
) -> ContextItem {
    let entry = &tree.node(node).entry;
    let omitted = edit.is_some_and(|e| {
        matches!(
            tree.node(e).entry.kind,
            EntryKind::ContextEdit { omits: true, .. }
        )
    });
    let contribution = match &entry.kind {
        EntryKind::Compaction { .. } if superseded => {
            Contribution::Nothing(Silence::SupersededCompaction)
        }
        _ if omitted => Contribution::Nothing(Silence::OmittedByEdit),
        EntryKind::Message(_) => Contribution::Message,
        EntryKind::CustomMessage => Contribution::CustomMessage,
        EntryKind::BranchSummary { has_summary: true } => Contribution::BranchSummary,
        EntryKind::BranchSummary { has_summary: false } => {
            Contribution::Nothing(Silence::EmptyBranchSummary)
        }
        EntryKind::Compaction {
            has_system_message, ..
        } => Contribution::CompactionSummary {
            with_system_message: *has_system_message,
        },
        _ => Contribution::Nothing(Silence::NeverInContext),
    };
    ContextItem {
        node,
        contribution,
        edit,
    }
}

/// pi's `buildContextEntries` on an already computed path: with no compaction, the path;
/// otherwise the latest compaction, the entries from its `firstKeptEntryId` up to it
/// (system messages dropped), then everything after it.
pub fn context_entries(tree: &Tree, path: &[NodeIdx]) -> Vec<NodeIdx> {
    let Some(ci) = path
        .iter()
        .rposition(|&n| matches!(tree.node(n).entry.kind, EntryKind::Compaction { .. }))
    else {
        return path.to_vec();
    };
    let EntryKind::Compaction {
        first_kept_entry_id,
        ..
    } = &tree.node(path[ci]).entry.kind
    else {
        return path.to_vec();
    };
    let mut out = Vec::with_capacity(path.len() - ci);
    out.push(path[ci]);
    if let Some(start) = kept_start(
        tree,
        &path[..ci],
        first_kept_entry_id.as_ref().map(|k| k.as_str()),
    ) {
        out.extend(
            path[start..ci]
                .iter()
                .copied()
                .filter(|&n| !is_system_message(tree, n)),
        );
    }
    out.extend_from_slice(&path[ci + 1..]);
    out
}

/// Index in `before` of the first kept entry, if it is on the path before the compaction.
pub fn kept_start(tree: &Tree, before: &[NodeIdx], first_kept: Option<&str>) -> Option<usize> {
    let first_kept = first_kept?;
    before
        .iter()
        .position(|&n| tree.node(n).entry.id.as_str() == first_kept)
}

/// True for a `message` entry whose role is `system` (dropped from a compaction's kept range).
pub fn is_system_message(tree: &Tree, n: NodeIdx) -> bool {
    tree.node(n).entry.kind.role() == Some(&Role::System)
}

/// The thinking level and the model at the end of a path (pi's `getSessionContextSettings`),
/// from the path's entries seen from the leaf back ([`SettingsBack::see`]).
///
/// pi walks the path forward and each setting entry overwrites the one before, so the last
/// entry of each kind decides: the first one seen from the leaf. Nothing is cloned but the
/// deciding settings.
#[derive(Default)]
struct SettingsBack<'t> {
    thinking: Option<&'t Option<SharedRaw>>,
    model: Option<ModelOf<'t>>,
}

impl<'t> SettingsBack<'t> {
    /// Sees an entry of kind `kind`, the next one back towards the root.
    fn see(&mut self, kind: &'t EntryKind) {
        if self.thinking.is_some() && self.model.is_some() {
            return;
        }
        match setting(kind) {
            Some(Setting::Thinking(level)) if self.thinking.is_none() => {
                self.thinking = Some(level)
            }
            Some(Setting::Model(m)) if self.model.is_none() => self.model = Some(m),
            _ => {}
        }
    }

    /// The thinking level (`"off"` when no entry set one) and the model (`None` when no
    /// entry set one).
    fn decided(&self) -> (Option<SharedRaw>, Option<ModelRef>) {
        let thinking = match self.thinking {
            Some(level) => level.clone(),
            None => Some(SharedRaw::from(raw_literal("\"off\""))),
        };
        (thinking, self.model.as_ref().and_then(ModelOf::kept))
    }
}

/// What a setting entry sets.
enum Setting<'a> {
    /// A thinking-level change: the level as written (`None` when absent).
    Thinking(&'a Option<SharedRaw>),
    /// A model change, or an assistant message (whose model, or none, becomes the model).
    Model(ModelOf<'a>),
}

/// The model a [`Setting::Model`] entry sets, borrowed until it is kept.
enum ModelOf<'a> {
    /// A `model_change` entry's provider and model id.
    Change(&'a Option<SharedRaw>, &'a Option<SharedRaw>),
    /// An assistant message's model (`None`: the message names none).
    Message(Option<&'a ModelRef>),
}

impl ModelOf<'_> {
    /// The model, cloned to be kept (`None`: the entry sets no model).
    fn kept(&self) -> Option<ModelRef> {
        match *self {
            ModelOf::Change(provider, model_id) => Some(ModelRef {
                provider: provider.clone(),
                model_id: model_id.clone(),
            }),
            ModelOf::Message(model) => model.cloned(),
        }
    }
}

/// What an entry of kind `kind` sets, if it is a setting entry.
fn setting(kind: &EntryKind) -> Option<Setting<'_>> {
    match kind {
        EntryKind::ThinkingLevelChange { level } => Some(Setting::Thinking(level)),
        EntryKind::ModelChange { provider, model_id } => {
            Some(Setting::Model(ModelOf::Change(provider, model_id)))
        }
        EntryKind::Message(m) if m.role == Role::Assistant => {
            Some(Setting::Model(ModelOf::Message(m.model.as_deref())))
        }
        _ => None,
    }
}

/// Which settings an entry of `kind` makes: `(thinking level, model)` (pi's
/// `buildSessionContext` takes the last entry of each kind on the path).
pub(crate) fn sets(kind: &EntryKind) -> (bool, bool) {
    match setting(kind) {
        Some(Setting::Thinking(_)) => (true, false),
        Some(Setting::Model(_)) => (false, true),
        None => (false, false),
    }
}

/// What [`project`] gives at the last entry of `path`, a whole path from a root that holds
/// no compaction and no context edit, with its context items `items` (one per entry of the
/// path, as [`context_items`] makes them), the last entries of the path that set the
/// thinking level and the model ([`sets`]) and the tool pairing's diagnostics of the items
/// ([`ToolPairing`]). For a projection worked out entry by entry while a session is read
/// ([`crate::dialect::pi::incremental::Following`]).
pub(crate) fn project_path_items(
    tree: &Tree,
    path: Vec<NodeIdx>,
    items: Vec<ContextItem>,
    (thinking_at, model_at): (Option<NodeIdx>, Option<NodeIdx>),
    diagnostics: Vec<Diagnostic>,
) -> Projection {
    let mut settings = SettingsBack::default();
    for n in [thinking_at, model_at].into_iter().flatten() {
        settings.see(&tree.node(n).entry.kind);
    }
    let (thinking_level, model) = settings.decided();
    Projection {
        leaf: path.last().copied(),
        path,
        compaction: None,
        items,
        thinking_level,
        model,
        diagnostics,
    }
}

/// What one path entry does to the thinking level and the model (pi's
/// `getSessionContextSettings`, one entry at a time).
pub(crate) fn apply_setting(
    tree: &Tree,
    n: NodeIdx,
    thinking: &mut Option<SharedRaw>,
    model: &mut Option<ModelRef>,
) {
    match setting(&tree.node(n).entry.kind) {
        Some(Setting::Thinking(level)) => *thinking = level.clone(),
        Some(Setting::Model(m)) => *model = m.kept(),
        None => {}
    }
}

/// The check of tool calls and results as the model will see them (a result whose call is
/// not in the context, and a call with no result after it), item by item: [`project`] runs it
/// in its pass over the items, and a context extended by a few items (`core::incremental`)
/// checks only those. `K` is how call ids are kept ([`CallKey`]).
///
/// A result answers a call with its id seen earlier; a call counts as answered when any
/// result, anywhere in the context, answered its id (so `pending` drops every call with an
/// id once it is answered, and never takes a call whose id already was).
#[derive(Clone, Debug)]
pub(crate) struct ToolPairing<K = ToolCallId> {
    /// Every call id seen, and whether a result has answered it.
    calls: HashMap<K, bool, RandomState>,
    /// Calls whose id no result has answered yet, in context order.
    pending: Vec<(K, NodeIdx)>,
    orphans: Vec<Diagnostic>,
}

impl<K> Default for ToolPairing<K> {
    fn default() -> Self {
        ToolPairing {
            calls: HashMap::default(),
            pending: Vec::new(),
            orphans: Vec::new(),
        }
    }
}

/// A tool call id as [`ToolPairing`] keeps it: owned, to outlive a borrow of the tree (the
/// running state of `core::incremental`), or borrowed from the tree for one pass (a
/// projection's check, which then clones no id).
pub(crate) trait CallKey<'t>: Clone + Eq + Hash + Borrow<str> {
    /// The key of `id`.
    fn of(id: &'t ToolCallId) -> Self;
}

impl<'t> CallKey<'t> for ToolCallId {
    fn of(id: &'t ToolCallId) -> Self {
        id.clone()
    }
}

impl<'t> CallKey<'t> for &'t str {
    fn of(id: &'t ToolCallId) -> Self {
        id.as_str()
    }
}

impl<'t, K: CallKey<'t>> ToolPairing<K> {
    /// Room for the ids of a context of `items` entries without growing: a growing set hashes
    /// every id it holds again, and reading an id is a cache miss in a long context.
    pub(crate) fn with_capacity(items: usize) -> Self {
        // About half the messages of an agent's context are calls and half results.
        let ids = items / 2;
        ToolPairing {
            calls: HashMap::with_capacity_and_hasher(ids, RandomState::default()),
            ..ToolPairing::default()
        }
    }

    /// Takes the next context item.
    pub(crate) fn push(&mut self, tree: &'t Tree, item: &ContextItem) {
        pairing_events(tree, item, |event| match event {
            PairingEvent::Call(id) => self.call(K::of(id), item.node),
            PairingEvent::Result(id) => self.result(id, item.node, tree),
        });
    }

    /// A call with id `id` in the assistant message of `node`.
    pub(crate) fn call(&mut self, id: K, node: NodeIdx) {
        if !*self.calls.entry(id.clone()).or_insert(false) {
            self.pending.push((id, node));
        }
    }

    /// A tool result of entry `node` for the call id `id`.
    pub(crate) fn result(&mut self, id: &str, node: NodeIdx, tree: &Tree) {
        match self.calls.get_mut(id) {
            Some(answered) => {
                if !std::mem::replace(answered, true) {
                    self.pending.retain(|(p, _)| p.borrow() != id);
                }
            }
            None => self.orphans.push(Diagnostic::OrphanToolResult {
                entry_id: tree.node(node).entry.id.clone(),
                tool_call_id: id.to_owned(),
            }),
        }
    }

    /// Orphan results in context order, then unanswered calls in context order.
    pub(crate) fn diagnostics(&self, tree: &Tree) -> Vec<Diagnostic> {
        let mut out = self.orphans.clone();
        out.extend(
            self.pending
                .iter()
                .map(|(id, node)| Diagnostic::MissingToolResult {
                    entry_id: tree.node(*node).entry.id.clone(),
                    tool_call_id: id.borrow().to_owned(),
                }),
        );
        out
    }
}

/// What a context item does to the tool pairing ([`pairing_events`]).
pub(crate) enum PairingEvent<'t> {
    /// An assistant message calls a tool with this id.
    Call(&'t ToolCallId),
    /// A tool result answers the call with this id (`""` when it names none).
    Result(&'t str),
}

/// The tool-pairing events of a context item, in order: each call id of an assistant message
/// (as its context edit leaves them), or the call id a tool result answers. Other items have
/// none.
pub(crate) fn pairing_events<'t>(
    tree: &'t Tree,
    item: &ContextItem,
    mut each: impl FnMut(PairingEvent<'t>),
) {
    if item.contribution != Contribution::Message {
        return;
    }
    let EntryKind::Message(m) = &tree.node(item.node).entry.kind else {
        return;
    };
    match m.role {
        Role::Assistant => {
            let edited = item.edit.map(|e| &tree.node(e).entry.kind);
            let ids = match edited {
                Some(EntryKind::ContextEdit { tool_call_ids, .. }) => tool_call_ids,
                _ => m.tool_call_ids(),
            };
            for id in ids {
                each(PairingEvent::Call(id));
            }
        }
        Role::ToolResult => each(PairingEvent::Result(
            m.tool_call_id().map_or("", |id| id.as_str()),
        )),
        _ => {}
    }
}

/// A `RawValue` for a literal we know is valid JSON.
pub(crate) fn raw_literal(json: &str) -> Box<RawValue> {
    // Only called with constant, valid JSON; fall back to null rather than panic.
    RawValue::from_string(json.to_owned()).unwrap_or_else(|_| RawValue::NULL.to_owned())
}
