//! The leaf `claude --resume ID` continues from, as Claude Code 2.1.197 resumes
//! (docs/claude-code.md §6.1, *source* `rfe` + `UAe` + `Ksm`; every part confirmed by an
//! experiment of §6.2): the last `last-prompt`'s `leafUuid` — unless the file's last tree line
//! descends from it, then that last line; with no (valid) `last-prompt`, the last tree line;
//! after a compaction with a preserved segment, the leaf messages of the re-linked tree.
//! Timestamps only break a tie. Pure: no I/O.

use foldhash::{HashSet, HashSetExt};

use ecow::EcoString;

use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::attachment::DROPPED_ON_LOAD;
use crate::dialect::claude::format::{Entry, Kind};
use crate::dialect::claude::load::{Loaded, Plan};

/// Where a resume continues: the leaf message, and the line the resume's first new line hangs
/// below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumeLeaf {
    /// The leaf message (a `user` or `assistant` line): whose context a resume continues.
    pub leaf: NodeIdx,
    /// The parent of the first line a resume writes (rule 4 of §6.1): the last line of the
    /// leaf's loaded path — the last `attachment`/`system` line hanging below the leaf, when
    /// there is one (after `/compact`, the agent listing below the command's output), else
    /// the leaf. This is the line a session's default leaf should name.
    pub continues_after: NodeIdx,
}

/// The leaf `claude --resume` continues from, as Claude Code 2.1.197 resumes (§6.1), on the
/// file as the tree read it (its size, for the pruning of files over 5 MiB, is the end of the
/// last line read: see [`resume_leaf_sized`]). `None` for a transcript without a message line,
/// or whose leaf an interactive `/rewind` cleared. Remembered with the tree and carried forward
/// as it grows ([`super::resume_memo`]): a live tail asks after every appended line.
pub fn resume_leaf(tree: &Tree) -> Option<ResumeLeaf> {
    tree.ext().resume_memo().resume_leaf(tree)
}

/// [`resume_leaf`] for a file of `size` bytes (as `stat` gives it: Claude Code prunes files
/// over 5 MiB before it reads them, §7.1).
pub fn resume_leaf_sized(tree: &Tree, size: u64) -> Option<ResumeLeaf> {
    resume_on(&resume_view(tree, size)).map(|(r, _, _)| r)
}

/// The resume leaf on a loaded view, with the leaf's path (§7.2) and what the resume filters
/// know of it (for carrying the answer forward, [`super::resume_memo`]).
pub(crate) fn resume_on(t: &Loaded<'_>) -> Option<(ResumeLeaf, Vec<NodeIdx>, PathFacts)> {
    let leaf = chosen_leaf(t)?;
    let path = t.path(leaf);
    let mut facts = PathFacts::default();
    for &n in &path {
        facts.add(t.entry(n));
    }
    let continues_after = facts.last_kept(&path, |n| t.entry(n)).unwrap_or(leaf);
    let r = ResumeLeaf {
        leaf,
        continues_after,
    };
    Some((r, path, facts))
}

/// The transcript as a resume loads it, for a file of `size` bytes: pruned and re-linked
/// (§7.1).
pub(crate) fn resume_view(tree: &Tree, size: u64) -> Loaded<'_> {
    Loaded::new(
        tree,
        Plan {
            size,
            relink: true,
            prune: true,
            before_line: None,
        },
    )
}

/// What the resume filters of [`PathFacts::last_kept`] need to know of a whole path, gathered
/// one line at a time (so that a path that grows at its end is not read again).
#[derive(Debug, Default)]
pub(crate) struct PathFacts {
    /// The `tool_use_id`s the path's `tool_result` blocks answer.
    results: HashSet<EcoString>,
    /// The path's `tool_use` ids that no `tool_result` on the path answers.
    unanswered: HashSet<EcoString>,
    /// The `message.id`s of responses with a line on the path that is not thinking.
    real_responses: HashSet<EcoString>,
}

impl PathFacts {
    /// Takes in the next line of the path.
    pub(crate) fn add(&mut self, e: &Entry) {
        match &e.kind {
            Kind::User { result_ids, .. } => {
                for id in result_ids.iter() {
                    self.unanswered.remove(id);
                    self.results.insert(id.clone());
                }
            }
            Kind::Assistant {
                tool_use_ids,
                message_id,
                block,
                ..
            } => {
                for id in tool_use_ids.iter() {
                    if !self.results.contains(id) {
                        self.unanswered.insert(id.clone());
                    }
                }
                if let Some(id) = message_id.as_ref().filter(|id| !id.is_empty())
                    && !block.as_deref().is_some_and(is_thinking)
                {
                    self.real_responses.insert(id.clone());
                }
            }
            _ => {}
        }
    }

    /// Whether the filters keep line `e` of the path these facts were gathered from.
    fn keeps(&self, e: &Entry) -> bool {
        match &e.kind {
            Kind::Attachment { attachment } => !DROPPED_ON_LOAD.contains(&attachment.as_str()),
            Kind::Assistant {
                tool_use_ids,
                message_id,
                block,
                ..
            } => {
                let unanswered = !self.unanswered.is_empty()
                    && !tool_use_ids.is_empty()
                    && !tool_use_ids.iter().any(|id| self.results.contains(id));
                let orphan_thinking = block.as_deref().is_some_and(is_thinking)
                    && !message_id
                        .as_ref()
                        .is_some_and(|id| self.real_responses.contains(id));
                !unanswered && !orphan_thinking
            }
            _ => true,
        }
    }

    /// The last line of `path` (the lines these facts were gathered from) that the resume
    /// filters keep (§7.3; a resume's first line hangs below it, as experiment k3 showed: a tool
    /// call killed before its result drops out), as far as the tree's facts decide them: filter 2 (attachment types dropped on load), filter 4
    /// (`xyt`: an assistant line whose `tool_use` blocks all lack a `tool_result` on the path,
    /// when any call on the path lacks one) and filter 5 (`e6e`: a thinking line whose response
    /// has no other block on the path). Filters 1, 3 and 6 need the lines' text and are left to
    /// the context ([`crate::dialect::claude::context::Context::continues_after`]).
    pub(crate) fn last_kept<'e>(
        &self,
        path: &[NodeIdx],
        entry: impl Fn(NodeIdx) -> &'e Entry,
    ) -> Option<NodeIdx> {
        path.iter().rev().copied().find(|&n| self.keeps(entry(n)))
    }
}

/// A thinking block's type.
fn is_thinking(block: &str) -> bool {
    matches!(block, "thinking" | "redacted_thinking")
}

/// `UAe`: the newest (by timestamp) non-sidechain `user`/`assistant` line among the candidates
/// (one, except in a tie of rule 2), or, with no candidate and nothing cleared, the newest
/// non-sidechain line.
pub(crate) fn chosen_leaf(t: &Loaded<'_>) -> Option<NodeIdx> {
    let cands = candidates(t);
    let mut best: Option<(NodeIdx, i64)> = None;
    for n in t.entries() {
        let e = t.entry(n);
        if !cands.contains(&n) || e.sidechain || !e.kind.is_message() {
            continue;
        }
        if let Some(ms) = e.time_ms.ms()
            && best.is_none_or(|(_, b)| ms > b)
        {
            best = Some((n, ms));
        }
    }
    if best.is_none() && cands.is_empty() && !t.cleared {
        for n in t.entries() {
            let e = t.entry(n);
            if e.sidechain {
                continue;
            }
            if let Some(ms) = e.time_ms.ms()
                && best.is_none_or(|(_, b)| ms > b)
            {
                best = Some((n, ms));
            }
        }
    }
    best.map(|(n, _)| n)
}

/// `rfe`'s candidate leaves (rules 1–2 of §6.1).
fn candidates(t: &Loaded<'_>) -> Vec<NodeIdx> {
    if t.cleared {
        return Vec::new();
    }
    let l = t.prompt_leaf.as_ref().and_then(|l| t.get(l.as_str()));
    let o = t.last_line.as_ref().and_then(|o| t.get(o.as_str()));
    let explicit_ok = t.explicit && l.is_some_and(|l| !t.entry(l).sidechain);
    if t.tail.is_none() || explicit_ok {
        let mut start = l;
        if let (Some(ln), false, Some(on)) = (l, t.explicit, o)
            && on != ln
            && descends(t, on, ln)
        {
            // A non-explicit last-prompt leaf that the last line descends from gives way to it.
            start = Some(on);
        }
        if t.tail.is_none() && start.is_none() {
            start = o;
        }
        if let Some(m) = start.and_then(|s| t.nearest_message(s)) {
            return vec![m];
        }
    }
    // Rule 2: the leaf messages of the (re-linked) tree.
    let mut parents: HashSet<&str> = HashSet::new();
    let mut message_parents: HashSet<&str> = HashSet::new();
    for n in t.entries() {
        if let Some(p) = t.parent_id(n) {
            parents.insert(p.as_str());
            if t.entry(n).kind.is_message() {
                message_parents.insert(p.as_str());
            }
        }
    }
    let mut leaves: Vec<NodeIdx> = Vec::new();
    let mut listed = HashSet::new();
    for n in t.entries() {
        if parents.contains(t.entry(n).id.as_str()) {
            continue;
        }
        if let Some(m) = t.nearest_message(n)
            && !message_parents.contains(t.entry(m).id.as_str())
            && listed.insert(m)
        {
            leaves.push(m);
        }
    }
    if leaves.len() > 1 {
        let ne = match l {
            Some(l) if listed.contains(&l) => Some(l),
            _ => o,
        };
        if let Some(m) = ne.and_then(|s| t.nearest_message(s)) {
            return vec![m];
        }
    }
    leaves
}

/// Whether walking parents from `from` reaches `to` (stops at a loop or a broken chain).
pub(crate) fn descends(t: &Loaded<'_>, from: NodeIdx, to: NodeIdx) -> bool {
    let mut seen = HashSet::new();
    let mut cur = Some(from);
    while let Some(c) = cur {
        if c == to {
            return true;
        }
        if !seen.insert(c) {
            return false;
        }
        cur = t.parent(c);
    }
    false
}
