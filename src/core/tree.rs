//! The session tree, for every dialect: entries in an arena, an id index, child lists in
//! timestamp order, resolved labels, the session name and the set of leaves. It knows ids,
//! parents, times and spans ([`TreeEntry`]); what an entry *is* belongs to its dialect.
//!
//! Invariants: `nodes` is in file order; a node's `parent` is resolved once both ends
//! exist (a child may be written before its parent); `children` are in the order a Node-written
//! agent gives them (pi 1.6.0 `getTree`): file order sorted by V8's `Array.prototype.sort` with
//! the comparator `new Date(a.timestamp).getTime() - new Date(b.timestamp).getTime()` (oldest
//! first, ties in file order while every time is valid; see [`v8sort`] for times `Date` cannot
//! parse); `leaves` holds exactly the nodes without children. Appending one entry is O(1)
//! amortized in the common case (newest child appended last); nothing here does I/O.
//!
//! The child order is the same for every dialect: Claude Code orders no siblings (it reads one
//! chain, from the leaf its resume rule picks: `dialect::claude::leaf`, `load`), so what it
//! sends does not depend on this order; a Codex rollout is linear. What a lenient read did
//! about a corrupt spot is worded by the dialect ([`TreeEntry::lenient_action`]), since each
//! agent reads such a file its own way.

use std::collections::HashMap;

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use indexmap::IndexMap;
use thiserror::Error;

use crate::core::diagnostics::{Corruption, CorruptionKind, Diagnostic, Related};
use crate::core::ids::{EntryId, JsTime, LineSpan};
use crate::js::jsstr;
use crate::js::v8sort;

/// Index of a node in the tree's arena (file order).
pub type NodeIdx = u32;

/// What the tree needs of a dialect's entry: its identity, its parent, its time and where its
/// line is, and what it does to the tree's labels and name. The dialect keeps everything else.
pub trait TreeEntry: Clone + std::fmt::Debug {
    /// The file's header (pi's `session` line; a format without a header line has a unit type).
    type Header: Clone + std::fmt::Debug + Send + Sync;
    /// What the dialect keeps beside the tree while it is built (pi: version-1 line positions).
    type Ext: Default + std::fmt::Debug + Send + Sync;

    /// The entry's id.
    fn id(&self) -> &EntryId;
    /// The parent's id as written (`None` for a root).
    fn parent_id(&self) -> Option<&EntryId>;
    /// Replaces the parent id (the tree shares its parent's allocation; a linear file names the
    /// entry before; a loop is broken).
    fn set_parent_id(&mut self, parent: Option<EntryId>);
    /// `new Date(timestamp).getTime()`, which orders siblings.
    fn time(&self) -> JsTime;
    /// Where the entry's line is.
    fn span(&self) -> LineSpan;
    /// The span, to grow it ([`Tree::extend_line`]).
    fn span_mut(&mut self) -> &mut LineSpan;
    /// What pushing this entry does to the tree's labels and name.
    fn effect(&self) -> Effect<'_> {
        Effect::None
    }
    /// Whether a file with this header is linear: each entry's parent is the entry before it,
    /// whatever it names (pi's version 1).
    fn linear(_header: &Self::Header) -> bool {
        false
    }
    /// The sentence a lenient read notes beside a corrupt spot ([`Diagnostic::Corrupt`]'s
    /// `action`): what the tree did about it, and what the agent that writes the format does.
    fn lenient_action(repair: Repair) -> &'static str;
}

/// What a lenient read does about a corrupt spot. The tree does the same for every dialect;
/// the dialect words it ([`TreeEntry::lenient_action`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// A second entry with an earlier entry's id: the later one owns the id (and the earlier
    /// one's children).
    DuplicateId,
    /// An entry that names itself as its parent: made a root.
    OwnParent,
    /// An entry whose chain of parents loops back to it: made a root.
    Cycle,
    /// An entry whose parent names no entry in the file: made a root.
    MissingParent,
    /// A line that is not JSON: skipped.
    SkippedNotJson,
    /// A JSON line that is no entry of the format: skipped.
    SkippedUnreadable,
    /// An entry that is not well-formed ([`crate::core::lines::Item::Irregular`]): kept.
    KeptIrregular,
}

/// The accessors of [`TreeEntry`] over an entry's own fields, written inside its `impl` block:
/// `tree_entry_fields!(id, parent_id, time_ms, span)` names the fields that hold the id (an
/// [`EntryId`]), the parent's id (`Option<EntryId>`), the time ([`JsTime`]) and the line's
/// [`LineSpan`]. Every dialect's entry keeps these four as fields; what differs is the rest.
macro_rules! tree_entry_fields {
    ($id:ident, $parent:ident, $time:ident, $span:ident) => {
        fn id(&self) -> &$crate::core::ids::EntryId {
            &self.$id
        }
        fn parent_id(&self) -> Option<&$crate::core::ids::EntryId> {
            self.$parent.as_ref()
        }
        fn set_parent_id(&mut self, parent: Option<$crate::core::ids::EntryId>) {
            self.$parent = parent;
        }
        fn time(&self) -> $crate::core::ids::JsTime {
            self.$time
        }
        fn span(&self) -> $crate::core::ids::LineSpan {
            self.$span
        }
        fn span_mut(&mut self) -> &mut $crate::core::ids::LineSpan {
            &mut self.$span
        }
    };
}
pub(crate) use tree_entry_fields;

/// What an entry does to the tree besides being a node.
#[derive(Clone, Copy, Debug)]
pub enum Effect<'a> {
    /// Nothing more.
    None,
    /// Sets (`Some`) or clears (`None`) the label of the entry `target`.
    Label {
        /// The labelled entry's id.
        target: &'a EntryId,
        /// The label text; `None` clears it.
        text: Option<&'a str>,
    },
    /// Names the session (the latest naming entry wins); `None` or blank: no name.
    Name(Option<&'a str>),
}

/// One entry and its place in the tree.
#[derive(Clone, Debug)]
pub struct Node<E> {
    /// The entry read from the file.
    pub entry: E,
    /// The parent node; `None` for a root.
    pub parent: Option<NodeIdx>,
    /// Child nodes in pi's `getTree` order: by timestamp, ties in file order, and V8's sort
    /// order when a sibling's timestamp is one `Date` cannot parse.
    pub children: Children,
}

/// A node's child list, read as a slice (`&[NodeIdx]`). Most nodes of a session have no child
/// or one (a conversation is a long chain), so those two are held inline and only a fork
/// allocates: an open of 100,000 entries makes no allocation per node for its child lists.
#[derive(Clone, Debug, Default)]
pub enum Children {
    /// A leaf.
    #[default]
    None,
    /// Exactly one child.
    One(NodeIdx),
    /// Two or more children, behind one pointer so that a child list is 16 bytes in every
    /// node (forks are rare).
    Many(Box<ChildList>),
}

/// The children of a fork (two or more).
#[derive(Clone, Debug, Default)]
pub struct ChildList(Vec<NodeIdx>);

impl Children {
    /// The children as a slice, in pi's `getTree` order.
    pub fn as_slice(&self) -> &[NodeIdx] {
        match self {
            Children::None => &[],
            Children::One(c) => std::slice::from_ref(c),
            Children::Many(v) => &v.0,
        }
    }

    fn insert(&mut self, at: usize, child: NodeIdx) {
        *self = match std::mem::take(self) {
            Children::None => Children::One(child),
            Children::One(c) => Children::Many(Box::new(ChildList(if at == 0 {
                vec![child, c]
            } else {
                vec![c, child]
            }))),
            Children::Many(mut v) => {
                v.0.insert(at, child);
                Children::Many(v)
            }
        };
    }

    fn retain(&mut self, keep: impl Fn(NodeIdx) -> bool) {
        let kept: Vec<NodeIdx> = self
            .as_slice()
            .iter()
            .copied()
            .filter(|&c| keep(c))
            .collect();
        *self = Children::from(kept);
    }
}

impl From<Vec<NodeIdx>> for Children {
    fn from(v: Vec<NodeIdx>) -> Self {
        match v.as_slice() {
            [] => Children::None,
            [c] => Children::One(*c),
            _ => Children::Many(Box::new(ChildList(v))),
        }
    }
}

impl std::ops::Deref for Children {
    type Target = [NodeIdx];
    fn deref(&self) -> &[NodeIdx] {
        self.as_slice()
    }
}

/// Whether corruption refuses the open (`Strict`) or is skipped or repaired and noted
/// (`Lenient`; see [`Repair`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Corruption refuses the open.
    Strict,
    /// Corruption is skipped or repaired ([`Repair`]) and listed in the diagnostics.
    Lenient,
}

impl Mode {
    /// `Lenient` when corruption is allowed (the CLI's `--allow-corrupt`, `session/open`'s
    /// `allowCorrupt`), else `Strict`.
    pub fn allowing_corrupt(allow: bool) -> Mode {
        if allow { Mode::Lenient } else { Mode::Strict }
    }
}

/// A resolved label: the latest non-empty label entry for a target.
#[derive(Clone, Debug)]
pub struct Label {
    /// The label text (never empty).
    pub text: Box<str>,
    /// The label entry that set it.
    pub entry: NodeIdx,
}

/// A session's tree. Build it with [`Tree::new`], [`Tree::push`] per entry in file order,
/// then [`Tree::settle`] once the lines at hand are all pushed.
#[derive(Debug)]
pub struct Tree<E: TreeEntry> {
    header: E::Header,
    mode: Mode,
    nodes: Vec<Node<E>>,
    index: IdIndex,
    roots: Vec<NodeIdx>,
    /// Keyed by target id, in pi's `labelsById` insertion order (a cleared label is removed).
    labels: IndexMap<EntryId, Label>,
    /// The name the latest naming entry gave.
    name: Option<Box<str>>,
    leaves: LeafSet,
    /// How many children with a timestamp `Date` cannot parse each parent has (absent: none),
    /// so attaching a child to a wide node does not scan its siblings.
    untimed_children: HashMap<NodeIdx, u32, RandomState>,
    /// Children whose parent has not appeared yet, by the parent id they name.
    waiting: HashMap<EntryId, Vec<NodeIdx>>,
    /// See [`Tree::relinks`].
    relinks: u64,
    /// The file is linear ([`TreeEntry::linear`]).
    linear: bool,
    ext: E::Ext,
    diagnostics: Vec<Diagnostic>,
}

/// The id index: node indices in a hash table keyed by their entry's id, read from the arena.
/// An id is stored once (in its node) and a slot costs 4 bytes, where a map from `EntryId`
/// to index cost 24 and a reference count per entry. foldhash: the index is the hottest
/// table of an open (SipHash took a tenth of it).
#[derive(Debug, Default)]
struct IdIndex {
    table: HashTable<NodeIdx>,
    hasher: RandomState,
}

impl IdIndex {
    fn hash(hasher: &RandomState, id: &str) -> u64 {
        hasher.hash_one(id)
    }

    fn id_of<E: TreeEntry>(nodes: &[Node<E>], idx: NodeIdx) -> &str {
        nodes
            .get(idx as usize)
            .map_or("", |n| n.entry.id().as_str())
    }

    /// The node `id` names, if any.
    fn get<E: TreeEntry>(&self, nodes: &[Node<E>], id: &str) -> Option<NodeIdx> {
        self.find(nodes, id, Self::hash(&self.hasher, id))
    }

    /// The node `id` (whose [`IdIndex::hash`] is `hash`) names, if any.
    fn find<E: TreeEntry>(&self, nodes: &[Node<E>], id: &str, hash: u64) -> Option<NodeIdx> {
        self.table
            .find(hash, |&i| Self::id_of(nodes, i) == id)
            .copied()
    }

    /// Makes the id of node `idx` (whose hash is `hash`) name it: `earlier` is the node the
    /// id named until now ([`IdIndex::find`]), which the id now leaves for the later entry, as
    /// in pi.
    fn insert<E: TreeEntry>(
        &mut self,
        nodes: &[Node<E>],
        idx: NodeIdx,
        hash: u64,
        earlier: Option<NodeIdx>,
    ) {
        let Self { table, hasher } = self;
        if let Some(earlier) = earlier
            && let Some(slot) = table.find_mut(hash, |&i| i == earlier)
        {
            *slot = idx;
            return;
        }
        table.insert_unique(hash, idx, |&i| Self::hash(hasher, Self::id_of(nodes, i)));
    }

    /// Makes room for `additional` more ids without growing the table on the way.
    fn reserve<E: TreeEntry>(&mut self, nodes: &[Node<E>], additional: usize) {
        let Self { table, hasher } = self;
        table.reserve(additional, |&i| Self::hash(hasher, Self::id_of(nodes, i)));
    }
}

impl<E: TreeEntry> Tree<E> {
    /// An empty tree for a file with this header.
    pub fn new(header: E::Header, mode: Mode) -> Self {
        let linear = E::linear(&header);
        Tree {
            header,
            mode,
            nodes: Vec::new(),
            index: IdIndex::default(),
            roots: Vec::new(),
            labels: IndexMap::new(),
            name: None,
            leaves: LeafSet::default(),
            untimed_children: HashMap::default(),
            waiting: HashMap::new(),
            relinks: 0,
            linear,
            ext: E::Ext::default(),
            diagnostics: Vec::new(),
        }
    }

    /// Adds the next entry in file order.
    ///
    /// Errors (strict mode only): `duplicateId`, `parentCycle`. In lenient mode the same
    /// problems become diagnostics and the entry is kept (a duplicate id now names the later
    /// entry; a cycle is broken by making this entry a root), each noted in the dialect's words
    /// ([`TreeEntry::lenient_action`]).
    pub fn push(&mut self, mut entry: E) -> Result<NodeIdx, Corruption> {
        let idx = NodeIdx::try_from(self.nodes.len()).unwrap_or(NodeIdx::MAX);
        if self.linear {
            // A linear file: each entry's parent is the previous entry.
            entry.set_parent_id(self.nodes.last().map(|n| n.entry.id().clone()));
        }
        let id_hash = IdIndex::hash(&self.index.hasher, entry.id().as_str());
        let shadowed = self.index.find(&self.nodes, entry.id().as_str(), id_hash);
        if let Some(earlier) = shadowed {
            let earlier = self.nodes[earlier as usize].entry.span();
            let related = Related {
                shadowed_line: Some(earlier.line),
                shadowed_offset: Some(earlier.offset),
                ..Related::default()
            };
            let c = duplicate_id(&entry, earlier);
            let action = E::lenient_action(Repair::DuplicateId);
            self.fail_or_note_related(c, related, action)?;
        }
        if entry.parent_id() == Some(entry.id()) {
            let c = corruption(
                CorruptionKind::ParentCycle,
                entry.span(),
                Some(entry.id()),
                "the entry is its own parent",
            );
            self.fail_or_note(c, E::lenient_action(Repair::OwnParent))?;
            entry.set_parent_id(None);
        }
        match entry.effect() {
            Effect::Label {
                target,
                text: Some(text),
            } => {
                self.labels.insert(
                    target.clone(),
                    Label {
                        text: text.into(),
                        entry: idx,
                    },
                );
            }
            Effect::Label { target, text: None } => {
                self.labels.shift_remove(target);
            }
            Effect::Name(name) => self.name = name.map(Into::into),
            Effect::None => {}
        }
        let parent = entry.parent_id().map(|p| {
            // Most entries follow their parent. The node pushed last is the one the index
            // gives for its id (the latest node with an id owns it), so it is checked first,
            // without a lookup.
            let last = idx.checked_sub(1).filter(|&l| {
                self.nodes
                    .get(l as usize)
                    .is_some_and(|n| n.entry.id() == p)
            });
            last.or_else(|| self.index.get(&self.nodes, p.as_str()))
                .ok_or_else(|| p.clone())
        });
        if let Some(Ok(p)) = parent {
            // Ids are stored once: the parent id shares its parent's allocation.
            entry.set_parent_id(Some(self.nodes[p as usize].entry.id().clone()));
        }
        let id = entry.id().clone();
        self.nodes.push(Node {
            entry,
            parent: None,
            children: Children::None,
        });
        self.index.insert(&self.nodes, idx, id_hash, shadowed);
        self.leaves.insert(idx);
        match parent {
            None => self.roots.push(idx),
            Some(Ok(p)) => self.attach(idx, p),
            Some(Err(missing)) => self.waiting.entry(missing).or_default().push(idx),
        }
        let mut adopted = false;
        if let Some(owner) = shadowed {
            // (Lenient only: strict returned above.) pi and Claude Code find a parent by its
            // id, which the later of two entries owns: the earlier one's children are the
            // later one's.
            let children = self.nodes[owner as usize].children.to_vec();
            for &child in &children {
                self.detach(child);
                self.attach(child, idx);
            }
            adopted = !children.is_empty();
        }
        // (Checked first: most files name no parent before it appears, and hashing every id
        // into an empty map costs a tenth of a push.)
        if !self.waiting.is_empty()
            && let Some(children) = self.waiting.remove(&id)
        {
            for child in children {
                self.attach(child, idx);
                self.relinks += 1;
            }
            adopted = true;
        }
        if adopted && self.has_cycle_through(idx) {
            let span = self.nodes[idx as usize].entry.span();
            let c = corruption(
                CorruptionKind::ParentCycle,
                span,
                Some(&id),
                "the chain of parents loops back to this entry",
            );
            self.fail_or_note(c, E::lenient_action(Repair::Cycle))?;
            self.detach(idx);
            self.roots.push(idx);
            self.roots.sort_unstable();
        }
        Ok(idx)
    }

    /// How many times a node already in the tree was linked to a parent pushed after it (a
    /// parent named before it appeared), or unlinked from its parent (to break a loop of
    /// parents). A path walked from a node to its root stays the path while this count is
    /// unchanged: a push links only the new node otherwise, and [`Tree::settle`] links none.
    pub fn relinks(&self) -> u64 {
        self.relinks
    }

    /// Resolves what can only be resolved once the lines at hand are all pushed: parents that
    /// never appeared (`missingParent`; lenient: the orphan becomes a root).
    pub fn settle(&mut self) -> Result<(), Corruption> {
        if !self.waiting.is_empty() {
            let mut orphans: Vec<NodeIdx> = self.waiting.drain().flat_map(|(_, v)| v).collect();
            orphans.sort_unstable();
            for &o in &orphans {
                let e = &self.nodes[o as usize].entry;
                let parent = e.parent_id().map_or("", EntryId::as_str);
                let c = corruption(
                    CorruptionKind::MissingParent,
                    e.span(),
                    Some(e.id()),
                    &format!("parent {parent} names no entry in the file"),
                );
                let related = Related {
                    parent_id: e.parent_id().cloned(),
                    ..Related::default()
                };
                let action = E::lenient_action(Repair::MissingParent);
                if let Err(c) = self.fail_or_note_related(c, related, action) {
                    // Put the waiting list back so a strict caller sees an unchanged tree.
                    for &o in &orphans {
                        if let Some(p) = self.nodes[o as usize].entry.parent_id().cloned() {
                            self.waiting.entry(p).or_default().push(o);
                        }
                    }
                    return Err(c);
                }
            }
            self.roots.extend(orphans);
            self.roots.sort_unstable();
            // A missing parent is known only now, after the problems of later lines: the
            // diagnostics are kept in file order.
            self.diagnostics.sort_by_key(|d| match d {
                Diagnostic::Corrupt { corruption, .. } => corruption.line,
                _ => u32::MAX,
            });
        }
        Ok(())
    }

    /// Checks that `batch` (entries in file order, about to be appended) would push and
    /// settle without corruption in strict mode: no id already used in the tree or earlier
    /// in the batch, no entry that is its own parent or closes a loop of parents, and every
    /// parent names an entry in the tree or in the batch. Returns the batch index and the
    /// corruption of the first problem. The tree is not changed, so live tailing can refuse
    /// a corrupt batch and keep the last good state. The entries of a linear file (pi's
    /// version 1: ids from line numbers) always pass.
    pub fn check_append(&self, batch: &[&E]) -> Result<(), (usize, Corruption)> {
        if self.linear {
            return Ok(());
        }
        let mut in_batch: HashMap<&str, usize> = HashMap::with_capacity(batch.len());
        for (i, e) in batch.iter().enumerate() {
            let earlier = match (self.find(e.id().as_str()), in_batch.get(e.id().as_str())) {
                (_, Some(&j)) => Some(batch[j].span()),
                (Some(n), None) => Some(self.nodes[n as usize].entry.span()),
                (None, None) => None,
            };
            if let Some(earlier) = earlier {
                return Err((i, duplicate_id(*e, earlier)));
            }
            in_batch.insert(e.id().as_str(), i);
        }
        for (i, e) in batch.iter().enumerate() {
            let Some(parent) = e.parent_id() else {
                continue;
            };
            // The entry's line is the corrupt spot.
            let refused =
                |kind, message: &str| (i, corruption(kind, e.span(), Some(e.id()), message));
            if parent == e.id() {
                let own = "the entry is its own parent";
                return Err(refused(CorruptionKind::ParentCycle, own));
            }
            if self.find(parent.as_str()).is_some() {
                continue;
            }
            let Some(&p) = in_batch.get(parent.as_str()) else {
                let missing = format!("parent {parent} names no entry in the file");
                return Err(refused(CorruptionKind::MissingParent, &missing));
            };
            // Following parents that come earlier in the batch strictly decreases the index,
            // so only a forward reference can start a loop.
            if p > i {
                let mut cur = p;
                for _ in 0..=batch.len() {
                    match batch[cur]
                        .parent_id()
                        .and_then(|q| in_batch.get(q.as_str()))
                    {
                        Some(&next) if next == i => {
                            let cycle = "the chain of parents loops back to this entry";
                            return Err(refused(CorruptionKind::ParentCycle, cycle));
                        }
                        Some(&next) => cur = next,
                        None => break,
                    }
                }
            }
        }
        Ok(())
    }

    /// The last entry's line, read whole before its ending arrived, turned out `extra` bytes
    /// longer (the whitespace before its `\n`, e.g. a CRLF file's `\r`): its span grows, so it
    /// names the same bytes as when the whole file is read at once. Nothing happens unless the
    /// last entry is on line `line`.
    pub fn extend_line(&mut self, line: u32, extra: u32) {
        if let Some(last) = self.nodes.last_mut()
            && last.entry.span().line == line
        {
            let span = last.entry.span_mut();
            span.len = span.len.saturating_add(extra);
        }
    }

    /// Reserves room for `additional` more entries in the arena (a capacity hint; nothing else
    /// changes).
    pub fn reserve(&mut self, additional: usize) {
        // Only the arena: reserving the id index would touch memory for every slot.
        self.nodes.reserve(additional);
    }

    /// Makes room in the id index for `additional` more entries, so that it does not grow
    /// (and rehash every id) while they are pushed. Unlike the arena's, the index's reserved
    /// room costs memory, about 5 bytes an entry: reserve what is expected, not a bound.
    pub fn reserve_ids(&mut self, additional: usize) {
        self.index.reserve(&self.nodes, additional);
    }

    /// Records a line that could not be read. Strict mode returns it as the error; lenient
    /// mode notes it in the diagnostics (what the agent does with such a line, in the dialect's
    /// words: [`Repair::SkippedNotJson`], [`Repair::SkippedUnreadable`]) and skips the line.
    pub fn skip_line(&mut self, c: Corruption) -> Result<(), Corruption> {
        let repair = match c.kind {
            CorruptionKind::InvalidJson => Repair::SkippedNotJson,
            _ => Repair::SkippedUnreadable,
        };
        self.fail_or_note(c, E::lenient_action(repair))
    }

    /// Records an entry the agent keeps though it is not well-formed (`c` says why; pi's
    /// `Line::Irregular`). Strict mode returns `c` as the error;
    /// lenient mode notes it ([`Repair::KeptIrregular`]), and the caller pushes the entry.
    pub fn keep_irregular(&mut self, c: Corruption) -> Result<(), Corruption> {
        self.fail_or_note(c, E::lenient_action(Repair::KeptIrregular))
    }

    /// What the dialect keeps beside the tree ([`TreeEntry::Ext`]).
    pub fn ext(&self) -> &E::Ext {
        &self.ext
    }

    /// What the dialect keeps beside the tree, to change it.
    pub fn ext_mut(&mut self) -> &mut E::Ext {
        &mut self.ext
    }

    /// One entry, to change what the tree does not derive from (its parent, id, time and
    /// effect stay as pushed: a dialect resolves its own fields here, such as pi's version-1
    /// `firstKeptEntryIndex`).
    pub fn entry_mut(&mut self, idx: NodeIdx) -> Option<&mut E> {
        self.nodes.get_mut(idx as usize).map(|n| &mut n.entry)
    }

    /// A problem a dialect finds beyond ids and parents: strict mode returns `c` as the error;
    /// lenient mode notes it with what the reading did about it (`action`).
    pub fn fail_or_note(&mut self, c: Corruption, action: &'static str) -> Result<(), Corruption> {
        self.fail_or_note_related(c, Related::default(), action)
    }

    /// Strict: `c` refuses the open (`related` is not part of the error). Lenient: `c` and what
    /// it refers to become a diagnostic, and the caller goes on as `action` says.
    fn fail_or_note_related(
        &mut self,
        c: Corruption,
        related: Related,
        action: &'static str,
    ) -> Result<(), Corruption> {
        match self.mode {
            Mode::Strict => Err(c),
            Mode::Lenient => {
                self.diagnostics.push(Diagnostic::Corrupt {
                    corruption: c,
                    related,
                    action,
                });
                Ok(())
            }
        }
    }

    fn attach(&mut self, child: NodeIdx, parent: NodeIdx) {
        self.nodes[child as usize].parent = Some(parent);
        self.leaves.remove(parent);
        let time = self.nodes[child as usize].entry.time().ms();
        let untimed_sibling =
            !self.untimed_children.is_empty() && self.untimed_children.contains_key(&parent);
        if time.is_none() {
            *self.untimed_children.entry(parent).or_default() += 1;
        }
        let siblings = &self.nodes[parent as usize].children;
        let time_of = |n: NodeIdx| self.nodes[n as usize].entry.time().ms();
        if time.is_none() || untimed_sibling {
            // A time JavaScript reads as NaN compares "equal" to everything, which is no
            // consistent order: only V8's own algorithm, run on pi's starting order (file
            // order), gives pi's answer.
            let mut children = siblings.to_vec();
            children.push(child);
            children.sort_unstable();
            v8sort::sort_by(&mut children, |&a, &b| match (time_of(a), time_of(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => std::cmp::Ordering::Equal,
            });
            self.nodes[parent as usize].children = Children::from(children);
            return;
        }
        // Every time is valid: the comparator is consistent, and any stable sort of the file
        // order agrees with pi's. Stable insertion by timestamp, ties in file order.
        let mut at = siblings.len();
        while at > 0 {
            let prev = siblings[at - 1];
            let earlier = match (time, time_of(prev)) {
                (Some(t), Some(p)) => t < p || (t == p && child < prev),
                _ => child < prev,
            };
            if !earlier {
                break;
            }
            at -= 1;
        }
        self.nodes[parent as usize].children.insert(at, child);
    }

    fn detach(&mut self, child: NodeIdx) {
        if let Some(p) = self.nodes[child as usize].parent.take() {
            self.relinks += 1;
            if self.nodes[child as usize].entry.time().ms().is_none()
                && let Some(n) = self.untimed_children.get_mut(&p)
            {
                *n -= 1;
                if *n == 0 {
                    self.untimed_children.remove(&p);
                }
            }
            let siblings = &mut self.nodes[p as usize].children;
            siblings.retain(|c| c != child);
            if siblings.is_empty() {
                self.leaves.insert(p);
            }
        }
    }

    fn has_cycle_through(&self, start: NodeIdx) -> bool {
        let mut cur = self.nodes[start as usize].parent;
        let mut steps = 0usize;
        while let Some(c) = cur {
            if c == start || steps > self.nodes.len() {
                return true;
            }
            steps += 1;
            cur = self.nodes[c as usize].parent;
        }
        false
    }

    // --- read access -----------------------------------------------------------------

    /// The session header.
    pub fn header(&self) -> &E::Header {
        &self.header
    }
    /// Whether this tree refuses corruption.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// All nodes in file order.
    pub fn nodes(&self) -> &[Node<E>] {
        &self.nodes
    }
    /// One node.
    pub fn node(&self, idx: NodeIdx) -> &Node<E> {
        &self.nodes[idx as usize]
    }
    /// Number of entries (the header excluded).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    /// True when the session has no entries yet.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    /// The node with this id.
    pub fn find(&self, id: &str) -> Option<NodeIdx> {
        self.index.get(&self.nodes, id)
    }
    /// Roots in file order (entries whose parent is null, plus lenient-mode orphans).
    pub fn roots(&self) -> &[NodeIdx] {
        &self.roots
    }
    /// Entries without children, in file order.
    pub fn leaves(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.leaves.iter()
    }
    /// The default leaf: the last entry in file order (pi's leaf after load).
    pub fn default_leaf(&self) -> Option<NodeIdx> {
        self.nodes.len().checked_sub(1).map(|i| i as NodeIdx)
    }
    /// The leaf a request names: `Some(id)` is that entry, `None` the default leaf (the last
    /// entry in file order; `Ok(None)` for a session without entries). An id that names no
    /// entry is an error naming it: unlike pi, which silently falls back to the last entry
    /// (SPEC §3). The one leaf resolution of the CLI, the daemon and compaction.
    pub fn resolve_leaf(&self, requested: Option<&str>) -> Result<Option<NodeIdx>, UnknownId> {
        UnknownId::resolve(requested, || self.default_leaf(), |id| self.lookup(id))
    }
    /// The entry an id argument names, as git names a commit: the entry with exactly this id,
    /// else the one entry whose id begins with it. Errors: [`UnknownId`], with the candidates
    /// when the prefix begins more than one id. For what a user or a client gives; the tree's
    /// own links (`parentId`, label targets) are exact ids and go through [`Tree::find`].
    pub fn lookup(&self, given: &str) -> Result<NodeIdx, UnknownId> {
        if let Some(n) = self.find(given) {
            return Ok(n);
        }
        UnknownId::by_prefix(
            given,
            self.nodes.iter().map(|n| n.entry.id().as_str()).enumerate(),
        )
        .map(|i| i as NodeIdx)
    }
    /// The fence of a write (SPEC §4): the writer's view `expected` (the id of the session's
    /// last entry in file order as the writer last saw it; `None`: a session without entries)
    /// must still be the current leaf, the last entry in file order of this tree. Otherwise the
    /// write is refused with [`Stale`], naming the current leaf and the entries `added` since
    /// the expected one: the ids after it in file order when it is in the tree, every id when
    /// `expected` is `None` (the writer saw no entries), else (an id this tree does not hold)
    /// the ids from node index `caught_up_from` on, the entries read by the catch-up that
    /// brought the tree up to date (pass `self.len()` when nothing was caught up: `added` is
    /// then empty).
    ///
    /// Pure: the caller reads the file (under its lock, for a write) before asking.
    pub fn fence(&self, expected: Option<&str>, caught_up_from: usize) -> Result<(), Stale> {
        let current_leaf = self.default_leaf().map(|n| self.node(n).entry.id().clone());
        if current_leaf.as_ref().map(EntryId::as_str) == expected {
            return Ok(());
        }
        let from = match expected.map(|id| self.find(id)) {
            None => 0,
            Some(Some(n)) => n as usize + 1,
            Some(None) => caught_up_from,
        };
        Err(Stale {
            expected: expected.map(str::to_owned),
            current_leaf,
            added: self
                .nodes
                .get(from..)
                .unwrap_or_default()
                .iter()
                .map(|n| n.entry.id().clone())
                .collect(),
        })
    }
    /// The resolved label of an entry.
    pub fn label_of(&self, id: &str) -> Option<&Label> {
        self.labels.get(id)
    }
    /// All resolved labels, in pi's `labelsById` order.
    pub fn labels(&self) -> impl Iterator<Item = (&EntryId, &Label)> {
        self.labels.iter()
    }
    /// The session name: the latest naming entry's name ([`Effect::Name`]), trimmed as
    /// JavaScript trims ([`jsstr::trim`]); `None` when empty (pi 1.6.0 `getSessionName`).
    pub fn name(&self) -> Option<&str> {
        let name = self.name.as_deref()?;
        Some(jsstr::trim(name)).filter(|n| !n.is_empty())
    }
    /// Problems a lenient open skipped.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
    /// The root-to-node path (node indices, root first). Empty for `None`.
    pub fn path_to(&self, leaf: Option<NodeIdx>) -> Vec<NodeIdx> {
        self.path_to_with(leaf, |_| {})
    }
    /// [`Tree::path_to`], showing `visit` each node of the path on the way, from the leaf back
    /// to the root: a caller that reads every entry of the path reads it while the walk has
    /// its node at hand, instead of in a walk of its own.
    pub fn path_to_with<'t>(
        &'t self,
        leaf: Option<NodeIdx>,
        mut visit: impl FnMut(&'t Node<E>),
    ) -> Vec<NodeIdx> {
        let mut path = Vec::new();
        let mut cur = leaf;
        while let Some(c) = cur {
            path.push(c);
            // Most entries follow their parent in the file. Reading the node a few places
            // back, which does not wait on this node's parent, starts loading it early:
            // otherwise the walk waits one memory latency per entry of a long path.
            let ahead = (c as usize).wrapping_sub(AHEAD_OF_WALK);
            std::hint::black_box(self.nodes.get(ahead).map(|n| n.parent));
            let node = &self.nodes[c as usize];
            visit(node);
            cur = node.parent;
        }
        path.reverse();
        // Held as long as its projection (a compaction of a 400,000-entry path holds 1.6 MB):
        // without the spare capacity doubling left, up to as much again.
        path.shrink_to_fit();
        path
    }
    /// Depth of a node (a root has depth 0).
    pub fn depth(&self, idx: NodeIdx) -> usize {
        let mut d = 0;
        let mut cur = self.nodes[idx as usize].parent;
        while let Some(c) = cur {
            d += 1;
            cur = self.nodes[c as usize].parent;
        }
        d
    }
}

/// A set of nodes as one bit per node, in node order: a push adds its node and takes its
/// parent out (a B-tree did that in 6% of an open's calling thread), and listing the leaves
/// of a long chain reads one word per 64 nodes.
#[derive(Clone, Debug, Default)]
struct LeafSet {
    words: Vec<u64>,
}

impl LeafSet {
    fn insert(&mut self, idx: NodeIdx) {
        let (word, bit) = (idx as usize / 64, idx % 64);
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << bit;
    }

    fn remove(&mut self, idx: NodeIdx) {
        if let Some(word) = self.words.get_mut(idx as usize / 64) {
            *word &= !(1 << (idx % 64));
        }
    }

    /// The nodes in the set, in node order.
    fn iter(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros();
                    rest &= rest - 1;
                    (i * 64) as NodeIdx + bit
                })
            })
        })
    }
}

/// How many nodes back [`Tree::path_to`] reads ahead of its walk.
const AHEAD_OF_WALK: usize = 16;

/// An id that names no entry of the tree (a requested leaf, say), or a prefix of more than one
/// entry's id (then `candidates` lists a few of them; the CLI and the daemon report both
/// with the unknown-entry exit code and error code).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{}", self.describe("entry id"))]
pub struct UnknownId {
    /// The id as given.
    pub id: String,
    /// Empty: no id begins with it. Otherwise the first ids in file order that begin with it
    /// (at most [`UnknownId::SHOWN`]) ...
    pub candidates: Vec<String>,
    /// ... out of this many.
    pub matches: usize,
}

impl UnknownId {
    /// How many candidates an ambiguous prefix names.
    pub const SHOWN: usize = 4;

    /// An id no entry has and no entry's id begins with.
    pub fn unknown(id: &str) -> UnknownId {
        UnknownId {
            id: id.to_owned(),
            candidates: Vec::new(),
            matches: 0,
        }
    }

    /// Whether the id is a prefix of more than one entry's id (else it names none).
    pub fn is_ambiguous(&self) -> bool {
        self.matches > 1
    }

    /// The error's words, `what` naming the argument (`entry id`, `leaf id`):
    /// `unknown entry id X`, or `ambiguous entry id X: 6 ids begin with it: a, b, c, d, …`.
    pub fn describe(&self, what: &str) -> String {
        if !self.is_ambiguous() {
            return format!("unknown {what} {}", self.id);
        }
        let more = if self.matches > self.candidates.len() {
            ", …"
        } else {
            ""
        };
        format!(
            "ambiguous {what} {}: {} ids begin with it: {}{more}",
            self.id,
            self.matches,
            self.candidates.join(", ")
        )
    }

    /// The one of `ids` (index, id) that begins with `prefix`. Errors: none or several do
    /// (an empty prefix names nothing).
    pub fn by_prefix<'a>(
        prefix: &str,
        ids: impl Iterator<Item = (usize, &'a str)>,
    ) -> Result<usize, UnknownId> {
        let mut found = None;
        let mut e = UnknownId::unknown(prefix);
        if prefix.is_empty() {
            return Err(e);
        }
        for (i, id) in ids.filter(|(_, id)| id.starts_with(prefix)) {
            found.get_or_insert(i);
            e.matches += 1;
            if e.candidates.len() < UnknownId::SHOWN {
                e.candidates.push(id.to_owned());
            }
        }
        match found {
            Some(i) if e.matches == 1 => Ok(i),
            _ => {
                if !e.is_ambiguous() {
                    e.candidates.clear();
                }
                Err(e)
            }
        }
    }

    /// The leaf a request names: `Some(id)` is the entry `find` finds, `None` the `default` one.
    /// Errors: what `find` says of the id. What every `resolve_leaf` does over its tree.
    pub fn resolve(
        requested: Option<&str>,
        default: impl FnOnce() -> Option<NodeIdx>,
        find: impl FnOnce(&str) -> Result<NodeIdx, UnknownId>,
    ) -> Result<Option<NodeIdx>, UnknownId> {
        match requested {
            None => Ok(default()),
            Some(id) => find(id).map(Some),
        }
    }
}

/// A writer's view is stale: the session's last entry is not the one the writer expected.
/// Returned by [`Tree::fence`]; the writer turns it into its conflict error.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error(
    "expected leaf {}, resume leaf is {} ({} since)",
    expected.as_deref().unwrap_or("null"),
    current_leaf.as_ref().map_or("null", EntryId::as_str),
    match added.len() { 1 => "1 entry added".to_owned(), n => format!("{n} entries added") }
)]
pub struct Stale {
    /// The writer's expected leaf (`None`: `null`, a session without entries).
    pub expected: Option<String>,
    /// The session's last entry in file order (`None`: it has no entries).
    pub current_leaf: Option<EntryId>,
    /// Entries added since the expected leaf, in file order (see [`Tree::fence`]).
    pub added: Vec<EntryId>,
}

/// The `duplicateId` corruption of `entry`, whose id the entry on the `earlier` line holds.
fn duplicate_id<E: TreeEntry>(entry: &E, earlier: LineSpan) -> Corruption {
    let message = format!(
        "this id is already used by the entry on line {}",
        earlier.line
    );
    corruption(
        CorruptionKind::DuplicateId,
        entry.span(),
        Some(entry.id()),
        &message,
    )
}

fn corruption(
    kind: CorruptionKind,
    span: LineSpan,
    id: Option<&EntryId>,
    message: &str,
) -> Corruption {
    Corruption {
        kind,
        line: span.line,
        offset: span.offset,
        id: id.cloned(),
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod check_append_tests {
    use super::*;

    /// A neutral entry for the tree's own tests: an id, a parent and a line.
    #[derive(Clone, Debug)]
    pub(super) struct Entry {
        id: EntryId,
        parent: Option<EntryId>,
        time: JsTime,
        span: LineSpan,
    }

    impl TreeEntry for Entry {
        type Header = ();
        type Ext = ();
        tree_entry_fields!(id, parent, time, span);
        fn lenient_action(_: Repair) -> &'static str {
            "noted"
        }
    }

    pub(super) type Tree = super::Tree<Entry>;

    /// `{"id", "parentId"}` on line `line`.
    pub(super) fn entry(line: u32, json: &str) -> Entry {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        let id = |k: &str| v[k].as_str().map(EntryId::new);
        Entry {
            id: id("id").unwrap(),
            parent: id("parentId"),
            time: JsTime::new(Some(0)),
            span: LineSpan {
                line,
                offset: 0,
                len: json.len() as u32,
            },
        }
    }

    pub(super) fn tree() -> Tree {
        let mut t = Tree::new((), Mode::Strict);
        t.push(entry(2, r#"{"type":"custom","id":"a","parentId":null}"#))
            .unwrap();
        t
    }

    fn kind(t: &Tree, batch: &[Entry]) -> Option<(usize, CorruptionKind)> {
        let refs: Vec<&Entry> = batch.iter().collect();
        t.check_append(&refs).err().map(|(i, c)| (i, c.kind))
    }

    #[test]
    fn accepts_good_batches_and_names_the_first_bad_entry() {
        let t = tree();
        let b = entry(3, r#"{"type":"custom","id":"b","parentId":"a"}"#);
        let c_before_parent = entry(4, r#"{"type":"custom","id":"c","parentId":"d"}"#);
        let d = entry(5, r#"{"type":"custom","id":"d","parentId":"b"}"#);
        assert_eq!(
            kind(&t, &[b.clone(), c_before_parent.clone(), d.clone()]),
            None
        );
        let dup = entry(4, r#"{"type":"custom","id":"a","parentId":null}"#);
        assert_eq!(
            kind(&t, &[b.clone(), dup]),
            Some((1, CorruptionKind::DuplicateId))
        );
        let orphan = entry(4, r#"{"type":"custom","id":"x","parentId":"nope"}"#);
        assert_eq!(
            kind(&t, &[b.clone(), orphan]),
            Some((1, CorruptionKind::MissingParent))
        );
        let selfish = entry(3, r#"{"type":"custom","id":"s","parentId":"s"}"#);
        assert_eq!(kind(&t, &[selfish]), Some((0, CorruptionKind::ParentCycle)));
        let x = entry(3, r#"{"type":"custom","id":"x","parentId":"y"}"#);
        let y = entry(4, r#"{"type":"custom","id":"y","parentId":"x"}"#);
        assert_eq!(kind(&t, &[x, y]), Some((0, CorruptionKind::ParentCycle)));
        assert_eq!(t.len(), 1, "checking never changes the tree");
    }

    /// `relinks` counts the links made to a parent pushed after its child and the links
    /// broken to end a loop of parents; a push that links only the new node counts none.
    #[test]
    fn relinks_count_links_between_entries_pushed_before() {
        let mut t = tree();
        t.mode = Mode::Lenient;
        let push = |t: &mut Tree, line: u32, json: &str| {
            t.push(entry(line, json)).unwrap();
            t.relinks()
        };
        let b = r#"{"type":"custom","id":"b","parentId":"a"}"#;
        assert_eq!(push(&mut t, 3, b), 0);
        let c = r#"{"type":"custom","id":"c","parentId":"d"}"#;
        let d = r#"{"type":"custom","id":"d","parentId":"b"}"#;
        assert_eq!(
            (push(&mut t, 4, c), push(&mut t, 5, d)),
            (0, 1),
            "c links to d, pushed after it"
        );
        let x = r#"{"type":"custom","id":"x","parentId":"y"}"#;
        let y = r#"{"type":"custom","id":"y","parentId":"x"}"#;
        assert_eq!(
            (push(&mut t, 6, x), push(&mut t, 7, y)),
            (1, 3),
            "x links to y, then y is unlinked to end the loop"
        );
        t.settle().unwrap();
        assert_eq!(t.relinks(), 3);
    }
}

#[cfg(test)]
mod leaf_and_fence_tests {
    use super::*;
    use crate::core::tree::check_append_tests::{Tree, entry, tree};

    /// The leaf set gives its nodes in order across words, and forgets removed ones.
    #[test]
    fn leaf_set_in_node_order() {
        let mut set = LeafSet::default();
        for idx in [130, 0, 63, 64, 5, 200] {
            set.insert(idx);
        }
        set.remove(5);
        set.remove(999);
        set.insert(63);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![0, 63, 64, 130, 200]);
        assert_eq!(LeafSet::default().iter().count(), 0);
    }

    /// `a` (from the shared helper), then `b` under `a`, then `c`, a second child of `a`.
    fn branched() -> Tree {
        let mut t = tree();
        for (line, json) in [
            (3, r#"{"type":"custom","id":"b","parentId":"a"}"#),
            (4, r#"{"type":"custom","id":"c","parentId":"a"}"#),
        ] {
            assert!(t.push(entry(line, json)).is_ok());
        }
        t
    }

    fn ids(v: &[EntryId]) -> Vec<&str> {
        v.iter().map(EntryId::as_str).collect()
    }

    #[test]
    fn resolve_leaf_defaults_to_the_last_entry_and_names_an_unknown_id() {
        let t = branched();
        assert_eq!(t.resolve_leaf(None), Ok(Some(2)));
        assert_eq!(t.resolve_leaf(Some("b")), Ok(Some(1)));
        assert_eq!(
            t.resolve_leaf(Some("nope")),
            Err(UnknownId::unknown("nope"))
        );
        assert_eq!(Tree::new((), Mode::Strict).resolve_leaf(None), Ok(None));
    }

    /// An id argument may be a unique prefix, as in git; an exact id wins over a longer id it
    /// begins; an ambiguous prefix names its candidates in file order.
    #[test]
    fn lookup_takes_an_exact_id_or_a_unique_prefix() {
        let mut t = tree();
        for (line, json) in [
            (3, r#"{"type":"custom","id":"ab12","parentId":"a"}"#),
            (4, r#"{"type":"custom","id":"ab34","parentId":"ab12"}"#),
            (5, r#"{"type":"custom","id":"ab345","parentId":"ab34"}"#),
        ] {
            assert!(t.push(entry(line, json)).is_ok());
        }
        assert_eq!(t.lookup("ab12"), Ok(1));
        assert_eq!(t.lookup("ab1"), Ok(1));
        assert_eq!(
            t.lookup("ab34"),
            Ok(2),
            "exact, though ab345 begins with it"
        );
        assert_eq!(t.lookup("ab345"), Ok(3));
        assert_eq!(t.resolve_leaf(Some("ab3")).map_err(|e| e.matches), Err(2));
        let e = t.lookup("ab").unwrap_err();
        assert!(e.is_ambiguous());
        assert_eq!(e.candidates, ["ab12", "ab34", "ab345"]);
        assert_eq!(
            e.to_string(),
            "ambiguous entry id ab: 3 ids begin with it: ab12, ab34, ab345"
        );
        assert_eq!(t.lookup("zz"), Err(UnknownId::unknown("zz")));
        assert_eq!(t.lookup(""), Err(UnknownId::unknown("")));
        assert_eq!(
            t.lookup("zz").unwrap_err().to_string(),
            "unknown entry id zz"
        );
        let many = UnknownId::by_prefix("x", (0..7).map(|i| (i, "xy")));
        assert_eq!(
            many.unwrap_err().describe("leaf id"),
            "ambiguous leaf id x: 7 ids begin with it: xy, xy, xy, xy, …"
        );
    }

    #[test]
    fn fence_passes_only_at_the_last_entry_in_file_order() {
        let t = branched();
        assert_eq!(t.fence(Some("c"), 0), Ok(()));
        // `b` is a leaf too, but not the last entry.
        let stale = t.fence(Some("b"), 3).err();
        let stale = stale
            .as_ref()
            .map(|s| (s.current_leaf.as_ref(), ids(&s.added)));
        assert_eq!(stale, Some((Some(&EntryId::new("c")), vec!["c"])));
    }

    #[test]
    fn fence_lists_what_came_after_the_expected_leaf_or_else_the_catch_up() {
        let t = branched();
        // Known expected leaf: everything after it, whatever the catch-up read.
        let s = t.fence(Some("a"), 3).err();
        assert_eq!(s.as_ref().map(|s| ids(&s.added)), Some(vec!["b", "c"]));
        // Unknown expected leaf: the entries the catch-up read (from index 1 here) ...
        let s = t.fence(Some("gone"), 1).err();
        assert_eq!(s.as_ref().map(|s| ids(&s.added)), Some(vec!["b", "c"]));
        assert_eq!(s.as_ref().and_then(|s| s.expected.as_deref()), Some("gone"));
        // ... none when nothing was caught up, and an index past the end is no panic.
        let s = t.fence(Some("gone"), t.len()).err();
        assert_eq!(s.map(|s| s.added), Some(Vec::new()));
        // `null` (the writer saw no entries): every entry came after, whatever was caught up.
        let s = t.fence(None, 99).err();
        let added = s.as_ref().map(|s| ids(&s.added));
        assert_eq!(added, Some(vec!["a", "b", "c"]));
        assert_eq!(s.and_then(|s| s.expected), None);
        // An empty session passes only `null`.
        let empty = Tree::new((), Mode::Strict);
        assert_eq!(empty.fence(None, 0), Ok(()));
        let s = empty.fence(Some("a"), 0).err();
        assert_eq!(s.map(|s| s.current_leaf), Some(None));
    }
}
