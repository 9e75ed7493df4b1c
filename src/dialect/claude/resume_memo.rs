//! The resume leaf of a transcript that grows, kept from one read to the next: a daemon that
//! follows a running Claude Code answers every appended line with the leaf `claude --resume`
//! would continue from (`session/didChange`'s `leafId`), and computing it afresh reads the
//! whole tree (§6.1: the loaded view, pruned and re-linked, then the leaf's path).
//!
//! [`resume_leaf`] gives what [`leaf::resume_leaf_sized`] gives for the file as the tree read
//! it, remembering the answer with the tree. When the tree has grown since, and what was
//! appended is the ordinary growth of a conversation, the answer is carried forward from the
//! appended lines alone: a chain of non-sidechain lines hanging below the last line (`O`), with
//! no compact boundary, no explicit or clearing `last-prompt`, no new finding, the file on the
//! same side of the 5 MiB pruning threshold, and no response of the new lines with parallel
//! lines elsewhere (§7.2 `Jsm`). Everything else — and every transcript whose remembered answer
//! does not come from `O` in the plain way — is computed in full. `tests` checks the two agree
//! at every line of real and generated transcripts.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use ecow::EcoString;

use crate::core::ids::EntryId;
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::format::{Entry, Kind};
use crate::dialect::claude::leaf::{self, PathFacts, ResumeLeaf};
use crate::dialect::claude::load::{BIG_FILE, Loaded, is_boundary, size_read};

/// How far up from `O` a new `last-prompt`'s leaf is looked for before the answer is computed
/// in full instead.
const ANCESTOR_WALK: usize = 256;

/// No node (in [`Growth::parent`]).
const NONE: u32 = u32::MAX;

/// Per-node flags of the loaded view ([`Growth::flags`]).
const LIVE: u8 = 1;
const HAS_CHILD: u8 = 2;
const MESSAGE_PARENT: u8 = 4;

/// The remembered answer, kept beside a transcript's tree ([`super::lines::ClaudeExt`]).
#[derive(Debug, Default)]
pub struct ResumeMemo {
    slot: Mutex<Option<Box<Memo>>>,
    /// How many answers were carried forward rather than computed in full.
    carried: AtomicUsize,
}

/// An answer and the tree it was computed on.
#[derive(Debug)]
struct Memo {
    /// Nodes, bookkeeping lines and bytes the tree had.
    nodes: usize,
    asides: usize,
    size: u64,
    result: Option<ResumeLeaf>,
    /// How to carry the answer forward (`None`: compute the next one in full).
    growth: Option<Growth>,
}

/// What carrying the answer forward needs: the loaded view of §7.1 as far as the leaf rule
/// reads it, and the leaf's path with the facts the resume filters read.
#[derive(Debug)]
struct Growth {
    /// The file was over 5 MiB.
    big: bool,
    /// The pruning kept the chains of `O` and `L` only.
    chain_pruned: bool,
    /// There is no preserved tail: rule 1 of §6.1 decides.
    tail_none: bool,
    /// `O`: the last non-sidechain tree line.
    last: NodeIdx,
    /// The answer's leaf: the message at or above `O`.
    leaf: NodeIdx,
    /// `L`: the last `last-prompt`'s `leafUuid`.
    prompt_leaf: Option<EntryId>,
    /// `O` descends from `L`, or `L` names no loaded line.
    last_from_prompt: bool,
    /// The anchors of every preserved segment (a line below one is re-linked).
    anchors: Vec<EntryId>,
    /// `message.id`s with a line, or a `tool_result` below a line, off the leaf's path: `Jsm`
    /// would put those back beside a new line of that response.
    grouped: HashSet<EcoString>,
    /// Per node: its parent in the loaded view (`NONE`: none), and [`LIVE`] etc.
    parent: Vec<u32>,
    flags: Vec<u8>,
    /// Per message: how many childless loaded lines have it as their nearest message.
    leaf_lines: HashMap<NodeIdx, u32>,
    /// How many messages rule 2 lists as leaf messages.
    listed: usize,
    /// The leaf's path (§7.2) and what the resume filters know of it.
    path: Vec<NodeIdx>,
    facts: PathFacts,
    /// The `timestamp` of the last line below the leaf on the path, when there is one (`Ksm`
    /// sorts those lines by it).
    below_leaf_ms: Option<i64>,
}

impl ResumeMemo {
    /// The leaf `claude --resume` continues from, on the file as `tree` read it: as
    /// [`leaf::resume_leaf_sized`] with [`size_read`], carried forward from the last answer
    /// when the tree only grew in the ordinary way since.
    pub fn resume_leaf(&self, tree: &Tree) -> Option<ResumeLeaf> {
        let size = size_read(tree);
        let asides = tree.ext().asides().len();
        let mut slot = match self.slot.lock() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(memo) = slot.as_deref_mut() {
            if memo.nodes == tree.len() && memo.asides == asides && memo.size == size {
                return memo.result;
            }
            let grown = memo.nodes <= tree.len() && memo.asides <= asides;
            if grown
                && let Some(g) = memo.growth.as_mut()
                && let Some(result) = g.extend(tree, memo.nodes, memo.asides, size)
            {
                memo.nodes = tree.len();
                memo.asides = asides;
                memo.size = size;
                memo.result = Some(result);
                self.carried.fetch_add(1, Ordering::Relaxed);
                return memo.result;
            }
        }
        // Remember how to carry the answer forward only once the tree has been seen to grow:
        // a one-off read (the CLI) pays for the answer alone.
        let follow = slot.is_some();
        let memo = full(tree, size, asides, follow);
        let result = memo.result;
        *slot = Some(Box::new(memo));
        result
    }

    /// How many answers were carried forward from the last one rather than computed in full
    /// (for tests and logs: a transcript that grows in the ordinary way carries nearly all).
    pub fn carried_forward(&self) -> usize {
        self.carried.load(Ordering::Relaxed)
    }
}

/// The answer computed in full, with what carries it forward when `follow`.
fn full(tree: &Tree, size: u64, asides: usize, follow: bool) -> Memo {
    let loaded = leaf::resume_view(tree, size);
    let found = leaf::resume_on(&loaded);
    let result = found.as_ref().map(|(r, _, _)| *r);
    let growth = match found {
        Some((r, path, facts)) if follow => Growth::new(tree, &loaded, r.leaf, path, facts, size),
        _ => None,
    };
    Memo {
        nodes: tree.len(),
        asides,
        size,
        result,
        growth,
    }
}

/// The `timestamp` key `Ksm` sorts by.
fn sort_key(e: &Entry) -> i64 {
    e.time_ms.ms().unwrap_or(i64::MIN)
}

/// The response a line belongs to, as `Jsm` groups lines (`message.id`, when not empty).
fn response_id(e: &Entry) -> Option<&EcoString> {
    match &e.kind {
        Kind::Assistant {
            message_id: Some(id),
            ..
        } if !id.is_empty() => Some(id),
        _ => None,
    }
}

impl Growth {
    /// What carries forward the answer `leaf` (with its path and facts), or `None` when the
    /// answer does not come from `O` in the plain way: the leaf is the message at or above `O`,
    /// the lines below the leaf on its path are the chain down to `O`, `O` has no child, and
    /// the transcript has no finding and no explicit or cleared `last-prompt`.
    fn new(
        tree: &Tree,
        t: &Loaded<'_>,
        leaf: NodeIdx,
        path: Vec<NodeIdx>,
        facts: PathFacts,
        size: u64,
    ) -> Option<Growth> {
        if !tree.diagnostics().is_empty() || t.explicit || t.cleared {
            return None;
        }
        let last = t.last_line.as_ref().and_then(|o| t.get(o.as_str()))?;
        if t.nearest_message(last) != Some(leaf) {
            return None;
        }
        // The chain from the leaf down to `O` must be the path's end, in order.
        let mut below = Vec::new();
        let mut x = last;
        while x != leaf {
            below.push(x);
            x = t.parent(x)?;
            if below.len() > path.len() {
                return None;
            }
        }
        below.reverse();
        let k = below.len();
        if path.len() < k + 1 || path[path.len() - k - 1] != leaf || path[path.len() - k..] != below
        {
            return None;
        }
        let mut anchors = Vec::new();
        let mut any_preserved = false;
        for node in tree.nodes() {
            if let Kind::System {
                preserved: Some(p), ..
            } = &node.entry.kind
                && is_boundary(&node.entry)
            {
                any_preserved = true;
                anchors.extend(p.segment.as_ref().and_then(|s| s.anchor.clone()));
                anchors.extend(p.messages.as_ref().and_then(|m| m.anchor.clone()));
            }
        }
        if any_preserved && t.tail.is_none() {
            return None;
        }
        let o_id = &t.entry(last).id;
        if anchors.contains(o_id) {
            return None;
        }
        let n = tree.len();
        let mut parent = vec![NONE; n];
        let mut flags = vec![0u8; n];
        for x in t.entries() {
            flags[x as usize] |= LIVE;
            if let Some(p) = t.parent(x) {
                parent[x as usize] = p;
                flags[p as usize] |= HAS_CHILD;
                if t.entry(x).kind.is_message() {
                    flags[p as usize] |= MESSAGE_PARENT;
                }
            }
        }
        if flags[last as usize] & HAS_CHILD != 0 {
            return None;
        }
        let mut leaf_lines: HashMap<NodeIdx, u32> = HashMap::new();
        for x in t.entries() {
            if flags[x as usize] & HAS_CHILD == 0
                && let Some(m) = t.nearest_message(x)
            {
                *leaf_lines.entry(m).or_default() += 1;
            }
        }
        let listed = leaf_lines
            .keys()
            .filter(|&&m| flags[m as usize] & MESSAGE_PARENT == 0)
            .count();
        // Lines off the leaf's chain (those `Jsm` put back on the path included) make their
        // response's group.
        let mut chain: HashSet<NodeIdx> = HashSet::new();
        let mut root = leaf;
        let mut x = Some(leaf);
        while let Some(c) = x.filter(|&c| chain.insert(c)) {
            root = c;
            x = t.parent(c);
        }
        // A chain that ends at a parent the load dropped (a line before a compaction) goes on
        // at the closest line by time (`Xsm`), which a new line can become.
        if x.is_some() || t.parent_id(root).is_some() {
            return None;
        }
        let mut grouped = HashSet::new();
        for x in t.entries().filter(|x| !chain.contains(x)) {
            let e = t.entry(x);
            if let Some(id) = response_id(e) {
                grouped.insert(id.clone());
            }
            if let Kind::User {
                tool_result: true, ..
            } = e.kind
                && let Some(id) = t.parent(x).and_then(|p| response_id(t.entry(p)))
            {
                grouped.insert(id.clone());
            }
        }
        let prompt_node = t.prompt_leaf.as_ref().and_then(|l| t.get(l.as_str()));
        let last_from_prompt = prompt_node.is_none_or(|l| leaf::descends(t, last, l));
        Some(Growth {
            big: size > BIG_FILE,
            chain_pruned: t.chain_pruned,
            tail_none: t.tail.is_none(),
            last,
            leaf,
            prompt_leaf: t.prompt_leaf.clone(),
            last_from_prompt,
            anchors,
            grouped,
            parent,
            flags,
            leaf_lines,
            listed,
            below_leaf_ms: (k > 0).then(|| sort_key(t.entry(last))),
            path,
            facts,
        })
    }

    /// Whether message `m` is a leaf message of rule 2 (before a change).
    fn is_listed(&self, m: NodeIdx) -> bool {
        self.flags[m as usize] & MESSAGE_PARENT == 0
            && self.leaf_lines.get(&m).is_some_and(|&c| c > 0)
    }

    /// The answer for `tree`, grown from `nodes` nodes and `asides` bookkeeping lines to what
    /// it holds now (`size` bytes), carried forward; `None` when the growth is not the plain
    /// kind (then nothing here has changed, and the caller computes the answer in full).
    fn extend(
        &mut self,
        tree: &Tree,
        nodes: usize,
        asides: usize,
        size: u64,
    ) -> Option<ResumeLeaf> {
        if !tree.diagnostics().is_empty() || (size > BIG_FILE) != self.big {
            return None;
        }
        let mut prompt_leaf = self.prompt_leaf.clone();
        for a in &tree.ext().asides()[asides..] {
            if a.kind != "last-prompt" {
                continue;
            }
            if a.explicit && (a.leaf_uuid.is_some() || a.leaf_cleared) {
                return None;
            }
            if let Some(l) = &a.leaf_uuid {
                prompt_leaf = Some(l.clone());
            }
        }
        let prompt_moved = prompt_leaf != self.prompt_leaf;
        if prompt_moved && self.chain_pruned {
            return None;
        }
        // The new lines: a chain below `O`, each with a timestamp, of no response that has
        // lines elsewhere.
        let mut prev = self.last;
        let mut newest_message = None;
        for i in nodes..tree.len() {
            let x = i as NodeIdx;
            let e = &tree.node(x).entry;
            let below_prev = e.parent_id.as_ref() == Some(&tree.node(prev).entry.id);
            if e.sidechain
                || is_boundary(e)
                || e.time_ms.ms().is_none()
                || !below_prev
                || self.anchors.contains(&e.id)
                || response_id(e).is_some_and(|id| self.grouped.contains(id))
            {
                return None;
            }
            if e.kind.is_message() {
                newest_message = Some(x);
            }
            prev = x;
        }
        let new_last = prev;
        let leaf = newest_message.unwrap_or(self.leaf);
        // `Ksm` sorts the lines below the leaf by timestamp: they must already be in order.
        let mut below_ms = match newest_message {
            Some(_) => None,
            None => self.below_leaf_ms,
        };
        let first_below = newest_message.map_or(nodes, |m| m as usize + 1);
        for i in first_below..tree.len() {
            let ms = sort_key(&tree.node(i as NodeIdx).entry);
            if below_ms.is_some_and(|b| ms < b) {
                return None;
            }
            below_ms = Some(ms);
        }
        let prompt_node = prompt_leaf.as_ref().and_then(|l| {
            tree.find(l.as_str())
                .filter(|&x| x as usize >= nodes || self.flags[x as usize] & LIVE != 0)
        });
        let listing = Listing::after(self, tree, nodes, leaf);
        let last_from_prompt = if self.tail_none {
            // Rule 1: `L`, unless `O` descends from it (or it names no line).
            let descends = match prompt_node {
                None => true,
                Some(l) if l as usize >= nodes => true,
                Some(_) if !prompt_moved => self.last_from_prompt,
                Some(l) => self.ancestor_within(l, ANCESTOR_WALK),
            };
            if !descends {
                return None;
            }
            true
        } else {
            // Rule 2: the leaf messages; with several, `L` when it is one, else `O`'s.
            let chosen = match listing.count {
                0 => return None,
                1 => leaf,
                _ => match prompt_node {
                    Some(l) if listing.lists(self, l) => l,
                    _ => leaf,
                },
            };
            if chosen != leaf || !listing.lists(self, leaf) {
                return None;
            }
            self.last_from_prompt
        };
        // Carry forward.
        for i in nodes..tree.len() {
            let x = i as NodeIdx;
            let p = if i == nodes { self.last } else { x - 1 };
            self.parent.push(p);
            self.flags.push(LIVE);
            self.flags[p as usize] |= HAS_CHILD;
            if tree.node(x).entry.kind.is_message() {
                self.flags[p as usize] |= MESSAGE_PARENT;
            }
            self.path.push(x);
            self.facts.add(&tree.node(x).entry);
        }
        for (m, c) in listing.counts {
            if c == 0 {
                self.leaf_lines.remove(&m);
            } else {
                self.leaf_lines.insert(m, c);
            }
        }
        self.listed = listing.count;
        self.last = new_last;
        self.leaf = leaf;
        self.last_from_prompt = last_from_prompt;
        self.prompt_leaf = prompt_leaf;
        self.below_leaf_ms = below_ms.filter(|_| new_last != leaf);
        let continues_after = self
            .facts
            .last_kept(&self.path, |n| &tree.node(n).entry)
            .unwrap_or(leaf);
        Some(ResumeLeaf {
            leaf,
            continues_after,
        })
    }

    /// Whether walking up from `O` reaches old node `l` within `steps` lines (`false` also when
    /// the walk is cut short: the caller then computes in full).
    fn ancestor_within(&self, l: NodeIdx, steps: usize) -> bool {
        let mut x = self.last;
        for _ in 0..steps {
            if x == l {
                return true;
            }
            match self.parent[x as usize] {
                NONE => return false,
                p => x = p,
            }
        }
        false
    }
}

/// Rule 2's leaf messages once the new lines hang below `O`: only two messages can change —
/// the leaf (`O`'s message), whose leaf line `O` gains a child, and the new lines' last message,
/// whose leaf line is the new last line; and `O` stops being listed when a message line hangs
/// right below it.
struct Listing {
    /// The new count of leaf lines of each message that changed.
    counts: Vec<(NodeIdx, u32)>,
    /// Whether `O` gets a message line as its child.
    last_gets_message: bool,
    /// `O` before the change.
    last: NodeIdx,
    /// The first new node.
    nodes: usize,
    /// The new last line's message (a new node, or the old leaf).
    leaf: NodeIdx,
    /// How many messages are listed.
    count: usize,
}

impl Listing {
    fn after(g: &Growth, tree: &Tree, nodes: usize, leaf: NodeIdx) -> Listing {
        let grew = tree.len() > nodes;
        let mut listing = Listing {
            counts: Vec::new(),
            last_gets_message: grew && tree.node(nodes as NodeIdx).entry.kind.is_message(),
            last: g.last,
            nodes,
            leaf,
            count: g.listed,
        };
        if !grew {
            return listing;
        }
        let old = |m: NodeIdx| g.leaf_lines.get(&m).copied().unwrap_or(0);
        if leaf == g.leaf {
            // `O` and the new last line both lead to the leaf: no count changes.
            listing.counts.push((leaf, old(leaf)));
        } else {
            listing.counts.push((g.leaf, old(g.leaf).saturating_sub(1)));
            listing.counts.push((leaf, 1));
        }
        let mut count = g.listed as i64;
        let mut seen = Vec::new();
        for m in [g.leaf, leaf, g.last] {
            if seen.contains(&m) {
                continue;
            }
            seen.push(m);
            let was = (m as usize) < nodes && g.is_listed(m);
            count += i64::from(listing.lists(g, m)) - i64::from(was);
        }
        listing.count = usize::try_from(count).unwrap_or(0);
        listing
    }

    /// Whether rule 2 lists message `m` after the change.
    fn lists(&self, g: &Growth, m: NodeIdx) -> bool {
        if m as usize >= self.nodes {
            // Of the new lines only the last message leads a leaf line, and no message hangs
            // below it.
            return m == self.leaf;
        }
        let count = self
            .counts
            .iter()
            .find(|(x, _)| *x == m)
            .map_or_else(|| g.leaf_lines.get(&m).copied().unwrap_or(0), |(_, c)| *c);
        let message_parent =
            g.flags[m as usize] & MESSAGE_PARENT != 0 || (m == self.last && self.last_gets_message);
        count > 0 && !message_parent
    }
}
