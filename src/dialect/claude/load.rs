//! The transcript as Claude Code 2.1.197 loads it before it resumes or builds a request
//! (docs/claude-code.md §7.1–§7.2, *source* `rfe`, `uim`, `Dcc`, `FAe`): a map from `uuid` to
//! line in first-seen order (a repeated `uuid` keeps the first position and takes the later
//! line), parents re-linked through `progress` lines (done by [`super::lines`]), files over
//! 5 MiB pruned to the chains of the last line and of the last `last-prompt`, the last compact
//! boundary's preserved segment re-linked under its summary and every line before that
//! boundary dropped; then the path from a leaf to its root, with the parallel tool calls put
//! back and the attachments hanging below the leaf appended.
//!
//! Everything here works on the tree's small fields; no line body is read. Pure: no I/O.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use crate::core::diagnostics::{CorruptionKind, Diagnostic};
use crate::core::ids::EntryId;
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::format::{Aside, Entry, Kind, Preserved};

/// Files larger than this are pruned before they are read (*source* `zCe`, §7.1).
pub const BIG_FILE: u64 = 5_242_880;

/// A parent that names no line is replaced by the closest earlier line at most this much older
/// (*source* `Xsm`, §7.2).
pub const TIMESTAMP_FALLBACK_MS: i64 = 5000;

const DEAD: u32 = u32::MAX;

/// What became of a node when the transcript was loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// It is in the loaded map.
    Live,
    /// Dropped by the pruning of a file over 5 MiB (§7.1): off the chains Claude keeps.
    Pruned,
    /// A later line with the same `uuid` took its place in the map.
    Shadowed,
    /// Dropped by the compaction re-link: positioned before the last compact boundary and not
    /// preserved (§4).
    Compacted,
    /// Written at or after the line the plan reads the file before ([`Plan::before_line`]).
    Later,
}

/// How to load, as Claude Code 2.1.197 would or as the file was earlier: the file's size
/// (decides the pruning of §7.1) and whether to apply the compaction re-link (§4).
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// The size of the file in bytes, as `stat` gives it.
    pub size: u64,
    /// Apply the last boundary's re-link and drop what comes before it.
    pub relink: bool,
    /// Apply the pruning of a file over 5 MiB.
    pub prune: bool,
    /// Read the file as it was before this line (1-based) was written: the lines from it on
    /// do not exist (`None`: every line).
    pub before_line: Option<u32>,
}

/// The transcript as Claude Code 2.1.197 loads it (§7.1, *source* `rfe`; the prototype's
/// `Transcript`).
#[derive(Debug)]
pub struct Loaded<'t> {
    /// The tree read from the file.
    pub tree: &'t Tree,
    /// The map's slots in first-seen order: the node holding each uuid's line (`DEAD`: deleted).
    slots: Vec<NodeIdx>,
    /// Per node: its slot while it is the line of its uuid in the map, else `DEAD`.
    slot_of: Vec<u32>,
    /// Per node: what became of it.
    fate: Vec<Fate>,
    /// With duplicate uuids in the tree: uuid → the node holding its line.
    dups: Option<HashMap<&'t str, NodeIdx>>,
    /// Parents the compaction re-link changed.
    relinked: HashMap<NodeIdx, Option<EntryId>>,
    /// `O`: the `uuid` of the last non-sidechain tree line.
    pub last_line: Option<EntryId>,
    /// `L`: the `leafUuid` of the last `last-prompt` line (reset by a compact boundary).
    pub prompt_leaf: Option<EntryId>,
    /// `E`: that `last-prompt` was `explicit: true` (reset by a later non-sidechain tree line).
    pub explicit: bool,
    /// An explicit `last-prompt` with `leafUuid: null` cleared the leaf (interactive `/rewind`).
    pub cleared: bool,
    /// The preserved segment's tail after the re-link, if there was one.
    pub tail: Option<EntryId>,
    /// The last compact boundary in map order, when the re-link dropped lines before it.
    pub compacted_by: Option<NodeIdx>,
    /// The file was pruned as a file over 5 MiB.
    pub pruned: bool,
    /// That pruning kept only the chains of `O` and `L` (no boundary with a preserved segment
    /// came after the reset): which lines it keeps depends on `L`.
    pub chain_pruned: bool,
}

/// One tree line or bookkeeping line, in file order.
enum Line<'t> {
    Node(NodeIdx, &'t Entry),
    Aside(&'t Aside),
}

impl Line<'_> {
    /// Its line number in the file (1-based).
    fn number(&self) -> u32 {
        match self {
            Line::Node(_, e) => e.span.line,
            Line::Aside(a) => a.span.line,
        }
    }
}

/// The tree's nodes and the asides merged back into file order.
fn lines(tree: &Tree) -> impl Iterator<Item = Line<'_>> {
    let nodes = tree.nodes();
    let asides = tree.ext().asides();
    let (mut n, mut a) = (0usize, 0usize);
    std::iter::from_fn(move || {
        let node = nodes.get(n);
        let aside = asides.get(a);
        match (node, aside) {
            (Some(x), Some(y)) if y.span.line < x.entry.span.line => {
                a += 1;
                Some(Line::Aside(y))
            }
            (Some(x), _) => {
                n += 1;
                Some(Line::Node((n - 1) as NodeIdx, &x.entry))
            }
            (None, Some(y)) => {
                a += 1;
                Some(Line::Aside(y))
            }
            (None, None) => None,
        }
    })
}

/// The size of the file as far as the tree read it: the end of its last line (with its
/// newline). A file that ends in lines the reader skipped (corrupt, blank, torn) is larger.
pub fn size_read(tree: &Tree) -> u64 {
    let end = |s: crate::core::ids::LineSpan| s.offset + u64::from(s.len) + 1;
    let node = tree.nodes().last().map_or(0, |n| end(n.entry.span));
    let aside = tree.ext().asides().last().map_or(0, |a| end(a.span));
    node.max(aside)
}

/// The offset of file line `line` (1-based): the size of the file before it was written (the
/// end of the last line the tree read when no line the tree holds is at or after it).
pub fn offset_of_line(tree: &Tree, line: u32) -> u64 {
    lines(tree).find(|l| l.number() >= line).map_or_else(
        || size_read(tree),
        |l| match l {
            Line::Node(_, e) => e.span.offset,
            Line::Aside(a) => a.span.offset,
        },
    )
}

/// Whether the tree holds two lines with one `uuid` (a lenient open notes each).
fn has_duplicates(tree: &Tree) -> bool {
    tree.diagnostics().iter().any(|d| {
        matches!(d, Diagnostic::Corrupt { corruption, .. } if corruption.kind == CorruptionKind::DuplicateId)
    })
}

/// A parent id as Claude Code follows it: `null` and `""` end the chain.
fn nonempty(id: Option<&EntryId>) -> Option<&EntryId> {
    id.filter(|p| !p.as_str().is_empty())
}

/// Whether a line is a compact boundary (`system`, `subtype: "compact_boundary"`, §4).
pub fn is_boundary(e: &Entry) -> bool {
    e.kind.is_compact_boundary()
}

fn preserved(e: &Entry) -> Option<&Preserved> {
    match &e.kind {
        Kind::System {
            preserved: Some(p),
            subtype,
            ..
        } if subtype == "compact_boundary" => Some(p),
        _ => None,
    }
}

impl<'t> Loaded<'t> {
    /// Loads `tree` by `plan` (the prototype's `read_lines` + `Transcript`).
    pub fn new(tree: &'t Tree, plan: Plan) -> Loaded<'t> {
        let n = tree.len();
        let (kept, chain_pruned) = if plan.prune && plan.size > BIG_FILE {
            let (kept, by_chain) = big_file_keep(tree, plan.before_line);
            (Some(kept), by_chain)
        } else {
            (None, false)
        };
        let written = |line: u32| plan.before_line.is_none_or(|b| line < b);
        let mut fate = vec![Fate::Live; n];
        for (f, node) in fate.iter_mut().zip(tree.nodes()) {
            if !written(node.entry.span.line) {
                *f = Fate::Later;
            }
        }
        if let Some(kept) = &kept {
            for (f, k) in fate.iter_mut().zip(kept) {
                if !k && *f == Fate::Live {
                    *f = Fate::Pruned;
                }
            }
        }
        let keep: Vec<bool> = fate.iter().map(|&f| f == Fate::Live).collect();
        let is_kept = |i: usize| keep[i];
        let mut slots = Vec::with_capacity(n);
        let mut slot_of = vec![DEAD; n];
        let mut dups = has_duplicates(tree).then(HashMap::new);
        for (i, node) in tree.nodes().iter().enumerate() {
            if !is_kept(i) {
                continue;
            }
            let idx = i as NodeIdx;
            match &mut dups {
                Some(map) => match map.insert(node.entry.id.as_str(), idx) {
                    Some(earlier) => {
                        let slot = slot_of[earlier as usize];
                        slot_of[earlier as usize] = DEAD;
                        fate[earlier as usize] = Fate::Shadowed;
                        slots[slot as usize] = idx;
                        slot_of[i] = slot;
                    }
                    None => {
                        slot_of[i] = slots.len() as u32;
                        slots.push(idx);
                    }
                },
                None => {
                    slot_of[i] = slots.len() as u32;
                    slots.push(idx);
                }
            }
        }
        let mut loaded = Loaded {
            tree,
            slots,
            slot_of,
            fate,
            dups,
            relinked: HashMap::new(),
            last_line: None,
            prompt_leaf: None,
            explicit: false,
            cleared: false,
            tail: None,
            compacted_by: None,
            pruned: kept.is_some(),
            chain_pruned,
        };
        for line in lines(tree) {
            match line {
                Line::Node(i, e) => {
                    if !is_kept(i as usize) {
                        continue;
                    }
                    if !e.sidechain {
                        loaded.last_line = Some(e.id.clone());
                        loaded.explicit = false;
                        loaded.cleared = false;
                    }
                    if is_boundary(e) {
                        loaded.prompt_leaf = None;
                        loaded.explicit = false;
                    }
                }
                Line::Aside(a) if !written(a.span.line) => {}
                Line::Aside(a) if a.kind == "last-prompt" => {
                    if let Some(leaf) = &a.leaf_uuid {
                        let same = loaded.prompt_leaf.as_ref() == Some(leaf);
                        loaded.explicit = a.explicit || (loaded.explicit && same);
                        loaded.prompt_leaf = Some(leaf.clone());
                        loaded.cleared = false;
                    } else if a.leaf_cleared && a.explicit {
                        loaded.cleared = true;
                        loaded.prompt_leaf = None;
                        loaded.explicit = false;
                    }
                }
                Line::Aside(_) => {}
            }
        }
        if plan.relink {
            loaded.tail = loaded.relink_compaction();
        }
        loaded
    }

    /// What became of node `n` when the file was loaded.
    pub fn fate(&self, n: NodeIdx) -> Fate {
        self.fate.get(n as usize).copied().unwrap_or(Fate::Pruned)
    }

    /// Whether node `n` is the line of its uuid in the loaded map.
    pub fn live(&self, n: NodeIdx) -> bool {
        self.slot_of.get(n as usize).is_some_and(|&s| s != DEAD)
    }

    /// The loaded line `id` names.
    pub fn get(&self, id: &str) -> Option<NodeIdx> {
        let n = match &self.dups {
            Some(map) => map.get(id).copied(),
            None => self.tree.find(id),
        }?;
        self.live(n).then_some(n)
    }

    /// A node's entry.
    pub fn entry(&self, n: NodeIdx) -> &'t Entry {
        &self.tree.node(n).entry
    }

    /// The parent id of a loaded line (after the re-links); `None` ends the chain.
    pub fn parent_id(&self, n: NodeIdx) -> Option<&EntryId> {
        match self.relinked.get(&n) {
            Some(p) => nonempty(p.as_ref()),
            None => nonempty(self.entry(n).parent_id.as_ref()),
        }
    }

    /// The loaded line a line's parent id names.
    pub fn parent(&self, n: NodeIdx) -> Option<NodeIdx> {
        self.parent_id(n).and_then(|p| self.get(p.as_str()))
    }

    /// The loaded lines in map order.
    pub fn entries(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.slots.iter().copied().filter(|&n| n != DEAD)
    }

    fn delete(&mut self, n: NodeIdx) {
        if let Some(slot) = self.slot_of.get_mut(n as usize) {
            if *slot != DEAD {
                self.slots[*slot as usize] = DEAD;
            }
            *slot = DEAD;
        }
    }

    /// `Dcc`: re-links the preserved segment of the last compact boundary and drops every line
    /// positioned before that boundary except the preserved ones. Returns the preserved tail.
    fn relink_compaction(&mut self) -> Option<EntryId> {
        let mut meta: Option<(&'t Preserved, u32)> = None;
        let mut last_boundary: Option<(u32, NodeIdx)> = None;
        for (slot, &n) in self.slots.iter().enumerate() {
            if n == DEAD {
                continue;
            }
            let e = &self.tree.node(n).entry;
            if is_boundary(e) {
                last_boundary = Some((slot as u32, n));
                if let Some(p) = preserved(e) {
                    meta = Some((p, slot as u32));
                }
            }
        }
        let (meta, meta_at) = meta?;
        let (last_at, last_node) = last_boundary?;
        // The preserved lines (anchor, uuids), when the last boundary is the one that names them.
        let mut segment: Option<(Option<EntryId>, Vec<EntryId>)> = None;
        if meta_at == last_at {
            let (anchor, uuids) = self.preserved_of(meta)?;
            let uuids = uuids?; // not an array of strings: names no line of the file
            segment = Some((anchor, uuids));
        }
        let segment = segment.filter(|(_, u)| !u.is_empty());
        if let Some((_, uuids)) = &segment
            && uuids.iter().any(|u| self.get(u.as_str()).is_none())
        {
            return None;
        }
        let keep: HashSet<&str> = segment
            .as_ref()
            .map(|(_, u)| u.iter().map(EntryId::as_str).collect())
            .unwrap_or_default();
        if let Some((anchor, uuids)) = &segment {
            let mut prev = anchor.clone();
            for u in uuids {
                if let Some(n) = self.get(u.as_str()) {
                    self.relinked.insert(n, prev.clone());
                }
                prev = Some(u.clone());
            }
            let tail = uuids.last().cloned();
            let head = uuids.first().map(EntryId::as_str);
            let under_anchor: Vec<NodeIdx> = self
                .entries()
                .filter(|&n| {
                    self.parent_id(n) == anchor.as_ref()
                        && anchor.is_some()
                        && Some(self.entry(n).id.as_str()) != head
                })
                .collect();
            for n in under_anchor {
                self.relinked.insert(n, tail.clone());
            }
        }
        let dropped: Vec<NodeIdx> = self
            .slots
            .iter()
            .take(last_at as usize)
            .copied()
            .filter(|&n| n != DEAD && !keep.contains(self.tree.node(n).entry.id.as_str()))
            .collect();
        let gone: HashSet<&str> = dropped
            .iter()
            .map(|&n| self.tree.node(n).entry.id.as_str())
            .collect();
        for &n in &dropped {
            self.delete(n);
            self.fate[n as usize] = Fate::Compacted;
        }
        if !dropped.is_empty() {
            self.compacted_by = Some(last_node);
        }
        let (_, uuids) = segment?;
        let tail = uuids.last().cloned();
        if !dropped.is_empty() {
            let orphans: Vec<NodeIdx> = self
                .entries()
                .filter(|&n| {
                    self.entry(n).kind.is_message()
                        && self.parent_id(n).is_some_and(|p| gone.contains(p.as_str()))
                })
                .collect();
            for n in orphans {
                self.relinked.insert(n, tail.clone());
            }
        }
        tail
    }

    /// `zsm`: the preserved lines (anchor, uuids), from `preservedMessages` or by walking the
    /// segment from its tail up to its head; `None` when the walk breaks. The uuids are `None`
    /// when `preservedMessages.uuids` is not an array of strings.
    #[allow(clippy::type_complexity)]
    fn preserved_of(&self, meta: &Preserved) -> Option<(Option<EntryId>, Option<Vec<EntryId>>)> {
        if let Some(m) = &meta.messages {
            return Some((m.anchor.clone(), m.uuids.clone()));
        }
        let seg = meta.segment.as_ref()?;
        let mut seen = HashSet::new();
        let mut uuids = Vec::new();
        let mut x = seg.tail.as_ref().and_then(|t| self.get(t.as_str()));
        while let Some(n) = x {
            if !seen.insert(n) {
                break;
            }
            let id = &self.entry(n).id;
            uuids.push(id.clone());
            if Some(id) == seg.head.as_ref() {
                uuids.reverse();
                return Some((seg.anchor.clone(), Some(uuids)));
            }
            x = self.parent(n);
        }
        None
    }

    /// From `n` up to the first `user`/`assistant` line, as Claude Code 2.1.197 walks up from a
    /// leaf it resumes (§6.1; `None` on a loop or a broken chain).
    pub fn nearest_message(&self, n: NodeIdx) -> Option<NodeIdx> {
        let mut seen = HashSet::new();
        let mut x = Some(n).filter(|&n| self.live(n));
        while let Some(c) = x {
            if !seen.insert(c) {
                return None;
            }
            if self.entry(c).kind.is_message() {
                return Some(c);
            }
            x = self.parent(c);
        }
        None
    }

    /// `FAe`: the path from the root to `leaf` (following a parent that names no line to the
    /// closest line at most 5 s older, `Xsm`), the parallel tool calls recovered (`Jsm`), and
    /// the `attachment`/`system` lines hanging below the leaf appended (`Ksm`).
    pub fn path(&self, leaf: NodeIdx) -> Vec<NodeIdx> {
        let mut seen = vec![false; self.tree.len()];
        let mut out = Vec::new();
        let mut x = Some(leaf).filter(|&n| self.live(n));
        while let Some(c) = x {
            if seen[c as usize] {
                break;
            }
            seen[c as usize] = true;
            out.push(c);
            let Some(p) = self.parent_id(c) else {
                break;
            };
            x = match self.get(p.as_str()) {
                Some(next) if !seen[next as usize] => Some(next),
                _ => self.timestamp_fallback(c, &seen),
            };
        }
        out.reverse();
        let mut out = self.recover_parallel_results(out, &mut seen);
        out.extend(self.trailing_attachments(leaf, &mut seen));
        out
    }

    /// `Xsm`: the closest loaded line (same `isSidechain`, not yet on the path) at most 5 s
    /// older than `x`; ties go to the first in map order.
    fn timestamp_fallback(&self, x: NodeIdx, seen: &[bool]) -> Option<NodeIdx> {
        let e = self.entry(x);
        let t = e.time_ms.ms()?;
        let mut best: Option<(NodeIdx, i64)> = None;
        for n in self.entries() {
            let y = self.entry(n);
            if seen[n as usize] || y.sidechain != e.sidechain {
                continue;
            }
            let Some(ty) = y.time_ms.ms() else {
                continue;
            };
            let d = t - ty;
            if (0..=TIMESTAMP_FALLBACK_MS).contains(&d) && best.is_none_or(|(_, b)| d < b) {
                best = Some((n, d));
            }
        }
        best.map(|(n, _)| n)
    }

    /// `Jsm`: the assistant lines of one response (one `message.id`) and the `tool_result`
    /// lines answering them that sit on other branches (parallel tool calls chain one under
    /// another) go back in after the last line of that response on the path, each group
    /// oldest first.
    fn recover_parallel_results(&self, path: Vec<NodeIdx>, seen: &mut [bool]) -> Vec<NodeIdx> {
        let id_of = |n: NodeIdx| match &self.entry(n).kind {
            Kind::Assistant {
                message_id: Some(id),
                ..
            } if !id.is_empty() => Some(id),
            _ => None,
        };
        // The last line of each response on the path.
        let mut last_of: HashMap<&str, NodeIdx> = HashMap::new();
        for &n in &path {
            if let Some(id) = id_of(n) {
                last_of.insert(id.as_str(), n);
            }
        }
        if last_of.is_empty() {
            return path;
        }
        // Every loaded line of those responses, and the tool results hanging under them.
        let mut by_id: HashMap<&str, Vec<NodeIdx>> = HashMap::new();
        let mut results_under: HashMap<&str, Vec<NodeIdx>> = HashMap::new();
        for n in self.entries() {
            let e = self.entry(n);
            match &e.kind {
                Kind::Assistant { .. } => {
                    if let Some(id) = id_of(n)
                        && last_of.contains_key(id.as_str())
                    {
                        by_id.entry(id.as_str()).or_default().push(n);
                    }
                }
                Kind::User {
                    tool_result: true, ..
                } => {
                    if let Some(p) = self.parent_id(n) {
                        results_under.entry(p.as_str()).or_default().push(n);
                    }
                }
                _ => {}
            }
        }
        let mut insert: HashMap<NodeIdx, Vec<NodeIdx>> = HashMap::new();
        let mut done = HashSet::new();
        for &n in &path {
            let Some(id) = id_of(n) else { continue };
            if !done.insert(id.as_str()) {
                continue;
            }
            let lines = by_id.get(id.as_str()).map_or(&[][..], Vec::as_slice);
            let mut missing: Vec<NodeIdx> = lines
                .iter()
                .copied()
                .filter(|&y| !seen[y as usize])
                .collect();
            let mut results = Vec::new();
            for &y in lines {
                for &r in results_under
                    .get(self.entry(y).id.as_str())
                    .map_or(&[][..], Vec::as_slice)
                {
                    if !seen[r as usize] {
                        results.push(r);
                    }
                }
            }
            if missing.is_empty() && results.is_empty() {
                continue;
            }
            self.sort_by_time(&mut missing);
            self.sort_by_time(&mut results);
            missing.extend(results);
            for &y in &missing {
                seen[y as usize] = true;
            }
            insert.insert(last_of[id.as_str()], missing);
        }
        if insert.is_empty() {
            return path;
        }
        let mut out = Vec::with_capacity(path.len());
        for n in path {
            out.push(n);
            if let Some(more) = insert.remove(&n) {
                out.extend(more);
            }
        }
        out
    }

    /// `Ksm`: the `attachment`/`system` lines that descend from `leaf` through such lines,
    /// breadth first, then oldest first.
    pub fn trailing_attachments(&self, leaf: NodeIdx, seen: &mut [bool]) -> Vec<NodeIdx> {
        let mut children: HashMap<&str, Vec<NodeIdx>> = HashMap::new();
        for n in self.entries() {
            if self.entry(n).kind.is_message() {
                continue;
            }
            if let Some(p) = self.parent_id(n) {
                children.entry(p.as_str()).or_default().push(n);
            }
        }
        let mut extra = Vec::new();
        if children.is_empty() {
            return extra;
        }
        let mut queue = std::collections::VecDeque::from([leaf]);
        while let Some(u) = queue.pop_front() {
            for &c in children
                .get(self.entry(u).id.as_str())
                .map_or(&[][..], Vec::as_slice)
            {
                if seen[c as usize] {
                    continue;
                }
                seen[c as usize] = true;
                extra.push(c);
                queue.push_back(c);
            }
        }
        if extra.len() > 1 {
            self.sort_by_time(&mut extra);
        }
        extra
    }

    /// Oldest first by `timestamp`, ties (and lines without a readable one, first) in order.
    fn sort_by_time(&self, v: &mut [NodeIdx]) {
        v.sort_by_key(|&n| self.entry(n).time_ms.ms().unwrap_or(i64::MIN));
    }
}

/// `uim`: which nodes a file over 5 MiB keeps, and whether the chains decided it. Tree lines
/// before the last compact boundary without a preserved segment are dropped; then, unless a
/// boundary with a preserved segment comes after that, only the lines on the parent chain of
/// the last non-sidechain line and on the chain of the last `last-prompt`'s `leafUuid` are kept
/// (all of them when a chain meets a parent that is not in the file).
fn big_file_keep(tree: &Tree, before_line: Option<u32>) -> (Vec<bool>, bool) {
    let mut from = 0usize;
    let mut preserved_after = false;
    let mut leaf: Option<&EntryId> = None;
    let written = |line: &Line<'_>| before_line.is_none_or(|b| line.number() < b);
    for line in lines(tree).take_while(written) {
        match line {
            Line::Aside(a) if a.kind == "last-prompt" => {
                if let Some(l) = &a.leaf_uuid {
                    leaf = Some(l);
                }
            }
            Line::Aside(_) => {}
            Line::Node(i, e) if is_boundary(e) => {
                if preserved(e).is_some() {
                    preserved_after = true;
                } else {
                    from = i as usize;
                    preserved_after = false;
                    leaf = None;
                }
            }
            Line::Node(..) => {}
        }
    }
    let n = tree.len();
    let mut keep = vec![false; n];
    if preserved_after {
        keep[from..].iter_mut().for_each(|k| *k = true);
        return (keep, false);
    }
    // The lines since the reset, by uuid (the last of a repeated one).
    let index = |id: &str| tree.find(id).filter(|&i| i as usize >= from);
    let mut chain = vec![false; n];
    let mut phantom = false;
    let mut walk = |start: Option<NodeIdx>| {
        let mut cur = start;
        while let Some(i) = cur {
            if chain[i as usize] {
                return;
            }
            chain[i as usize] = true;
            let Some(p) = nonempty(tree.node(i).entry.parent_id.as_ref()) else {
                return;
            };
            match index(p.as_str()) {
                Some(next) => cur = Some(next),
                None => {
                    phantom = true;
                    return;
                }
            }
        }
    };
    let last = (from..n)
        .rev()
        .find(|&i| !tree.node(i as NodeIdx).entry.sidechain);
    walk(last.map(|i| i as NodeIdx));
    walk(leaf.and_then(|l| index(l.as_str())));
    if phantom {
        keep[from..].iter_mut().for_each(|k| *k = true);
    } else {
        keep = chain;
    }
    (keep, true)
}

/// The history of `leaf`, root first: the path Claude Code follows to it (with the parallel
/// tool results put back and the attachments below it, [`Loaded::path`], the file read whole,
/// neither pruned nor re-linked), continued from each compact boundary at its start to the line
/// that boundary compacted (its `logicalParentUuid`). What happened on the way to the leaf,
/// compactions or not: what an export shows and what a verification checks.
pub fn history(tree: &Tree, leaf: NodeIdx) -> Vec<NodeIdx> {
    let loaded = Loaded::new(
        tree,
        Plan {
            size: 0,
            relink: false,
            prune: false,
            before_line: None,
        },
    );
    let mut segments: Vec<Vec<NodeIdx>> = Vec::new();
    let mut seen: HashSet<NodeIdx> = HashSet::new();
    let mut cur = Some(leaf);
    while let Some(l) = cur.filter(|l| !seen.contains(l)) {
        let segment = if loaded.live(l) {
            loaded.path(l)
        } else {
            tree.path_to(Some(l))
        };
        let segment: Vec<NodeIdx> = segment.into_iter().filter(|n| seen.insert(*n)).collect();
        cur = segment
            .first()
            .and_then(|&first| match &tree.node(first).entry.kind {
                Kind::System {
                    logical_parent: Some(p),
                    ..
                } => tree.find(p.as_str()),
                _ => None,
            });
        segments.push(segment);
    }
    segments.into_iter().rev().flatten().collect()
}
