//! The branch graph: a session's tree as a commit-graph-like picture, the model shared by
//! `sessiond graph` (text and SVG), the daemon's `session/graph` and Neovim's `:SessiondGraph`.
//! The VS Code webview (`editors/vscode/src/graph.ts`) draws the same model in the same shape:
//! nodes that are entries or folds of plain single-child runs, the default and the selected
//! leaf, branch points, labels, names, the entries in context at the selected leaf, and what
//! only one dialect has — for each of pi's compactions the range of its path it summarizes,
//! for each of Claude Code's compact boundaries (a root of the file) the line it compacted (its
//! `logicalParentUuid`), drawn as a dashed link; a subagent's sidechain is drawn apart, after
//! the main conversation, linked to the `Agent` (or `Task`) tool call whose prompt started it;
//! a tool call that started a subagent's own transcript (`<session>/subagents/agent-<id>.jsonl`)
//! names it, and that transcript's graph names the call that started it.
//!
//! The model is one for every dialect ([`Describe`] says how an entry is shown); what only the
//! dialect can say about a session at a leaf — its path, what reaches the model, the marks of
//! its own — comes in a [`Lens`] ([`Lens::pi`], [`Lens::claude`]).
//!
//! Layout is lanes and rows, as `git log --graph` draws history: one row per node in
//! depth-first order (the tree's order, root first), the first child of a branch point drawn
//! first on a new lane to the right, the last child continuing on its parent's lane. The
//! lane being drawn is always the rightmost open one, so lanes close from the right and never
//! shift; the same rows serve the text form and the SVG. (A general layered layout such as
//! `layout-rs`' Sugiyama pass solves crossings a tree does not have, in more than linear time,
//! and would give the SVG a different picture from the text form; the lane layout is linear.)
//!
//! Pure: no I/O beyond the [`LineSource`] that gives previews, read once per drawn node.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;

use crate::core::describe::{Describe, Mark};
use crate::core::ids::EntryId;
use crate::core::preview::one_line;
use crate::core::source::LineSource;
use crate::core::tree::{Effect, NodeIdx, Tree, TreeEntry};
use crate::dialect::pi::format::EntryKind;
use crate::dialect::pi::projection;
use crate::dialect::{claude, codex, pi};
use crate::js::jsstr;
use crate::listing::Subagent;

/// A run of at least this many plain entries (one child each, nothing to mark) is one fold
/// node; shorter runs are drawn entry by entry (as `sessiond tree` and the webview fold).
pub const FOLD_MIN: usize = 3;

/// Longest preview in the text form and the SVG, in characters.
pub const GRAPH_PREVIEW_CHARS: usize = 72;

/// Lanes the text form and the SVG draw one by one. A row on a lane past them is drawn in
/// the last of them, after a `…` that stands for the lanes folded away, and a branch point
/// opens at most this many columns (`|\ \ … 9984 more lanes`): a line's length, and the
/// picture's width, never grow with the number of branches. (One entry with 10,000 children
/// drew 10,000 lines of 20,000 characters each, 200 MB of text for a 1 MB session.)
pub const DRAWN_LANES: usize = 16;

/// The column a lane is drawn in ([`DRAWN_LANES`]).
fn column(lane: usize) -> usize {
    lane.min(DRAWN_LANES - 1)
}

/// What a node of the graph holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// One entry.
    Entry,
    /// A run of [`FOLD_MIN`] or more plain entries with one child each.
    Fold,
}

/// The range of its path a compaction summarizes, as pi 1.6.0 `prepareCompaction` chooses
/// it: the entries after the previous compaction's kept start (or the root) up to the one
/// before `firstKeptEntryId`; an earlier compaction is carried in by its summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summarized {
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

/// A subagent's own transcript (Claude Code's `<session>/subagents/agent-<agentId>.jsonl`) and
/// the tool call that started it (its `agent-<agentId>.meta.json`'s `toolUseId`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubagentLink {
    /// The agent's id (the file name's).
    pub agent_id: String,
    /// The subagent's transcript.
    pub path: PathBuf,
    /// The `tool_use` block that started it.
    pub tool_use_id: String,
}

/// For a subagent's own transcript: the transcript whose tool call started it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentLink {
    /// The parent's transcript (`<session>.jsonl`), whether or not it is there.
    pub path: PathBuf,
    /// The agent's id (the file name's).
    pub agent_id: String,
    /// The parent's `tool_use` block that started it, from the metadata; `None` when the
    /// metadata is missing or names none.
    pub tool_use_id: Option<String>,
}

impl ParentLink {
    /// `subagent agent-ID started by tool_use TOOL of PATH`, the line the text form and the
    /// SVG say it in.
    pub fn sentence(&self) -> String {
        format!(
            "subagent agent-{} started by tool_use {} of {}",
            self.agent_id,
            self.tool_use_id.as_deref().unwrap_or("(unknown)"),
            self.path.display()
        )
    }
}

/// A sidechain written in the file itself (older Claude Code: `isSidechain: true` lines beside
/// the main conversation) and the tool call that started it: the `Agent` or `Task` `tool_use`
/// whose `input.prompt` is the sidechain's first user message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SidechainCall {
    /// The sidechain's root.
    pub root: NodeIdx,
    /// The line holding the tool call.
    pub call: NodeIdx,
    /// The `tool_use` block's id.
    pub tool_use_id: String,
}

/// One node of the picture: an entry, or a fold of plain entries.
#[derive(Clone, Debug)]
pub struct GraphNode {
    /// Entry or fold.
    pub kind: NodeKind,
    /// The first entry (the only one of an entry node).
    pub first: NodeIdx,
    /// The last entry (equal to `first` for an entry node).
    pub last: NodeIdx,
    /// How many entries the node holds (1 for an entry).
    pub count: usize,
    /// The row of the parent node; `None` for a root.
    pub parent_row: Option<usize>,
    /// The node's lane (0 is the leftmost).
    pub lane: usize,
    /// `role` for a message, else the entry type; a fold's most frequent kinds
    /// (`8 assistant, 4 toolResult`, at most three, then `…`).
    pub title: String,
    /// One line of the entry's text (at most [`GRAPH_PREVIEW_CHARS`]); for a compaction, the
    /// range it summarizes; empty for a fold.
    pub preview: String,
    /// The entry's resolved label.
    pub label: Option<String>,
    /// The name a naming entry (pi's `session_info`) sets.
    pub name: Option<String>,
    /// The last entry has no child.
    pub leaf: bool,
    /// The node holds the default leaf (pi: the file's last entry; Claude Code: the line
    /// `claude --resume` continues from).
    pub default_leaf: bool,
    /// The node holds the selected leaf (the one the context is computed at).
    pub selected_leaf: bool,
    /// The last entry has several children.
    pub branch_point: bool,
    /// The node's entries reach the model at the selected leaf (pi's `buildContextEntries`;
    /// a fold never mixes entries in and out of context).
    pub in_context: bool,
    /// The node is on the path from the root to the selected leaf.
    pub on_path: bool,
    /// For a compaction: the range it summarizes.
    pub summarizes: Option<Summarized>,
    /// What the entry is drawn as ([`Describe::mark`]); `None` for a fold.
    pub mark: Option<Mark>,
    /// The node belongs to a conversation apart from the main one (a subagent's sidechain).
    pub apart: bool,
    /// For a Claude Code compact boundary: the row of the line it compacted (its
    /// `logicalParentUuid`), when that line is in the file.
    pub logical_parent_row: Option<usize>,
    /// The subagent's transcript the node's tool call started (an entry node only).
    pub subagent: Option<SubagentLink>,
    /// For the root of a sidechain written in the file: the row of the tool call that started
    /// it (never a fold), and that call's `tool_use` id.
    pub started_by: Option<(usize, String)>,
    /// For a tool call that started a sidechain written in the file: the row of its root.
    pub sidechain_row: Option<usize>,
}

/// The graph of a session at a selected leaf: nodes in row order (row = index).
#[derive(Clone, Debug)]
pub struct Graph {
    /// The nodes, one per row, depth-first.
    pub nodes: Vec<GraphNode>,
    /// How many lanes the widest row uses.
    pub lanes: usize,
    /// Entries in the session.
    pub entry_count: usize,
    /// Entries without children.
    pub leaf_count: usize,
    /// The session's id (pi: the header's `id`; Claude Code: the transcript's session id).
    pub session_id: String,
    /// The session name (pi's `getSessionName`).
    pub name: Option<String>,
    /// The default leaf (pi: the last entry in file order; Claude Code: the line `claude
    /// --resume` continues from).
    pub default_leaf: Option<NodeIdx>,
    /// The leaf the context is computed at.
    pub selected_leaf: Option<NodeIdx>,
    /// The entries in context at the selected leaf, in the order the dialect gives them (pi's
    /// `buildContextEntries`; Claude Code: the lines whose content reaches the model).
    pub context_entries: Vec<NodeIdx>,
    /// The first row of the conversations apart from the main one (subagents' sidechains),
    /// and how many there are.
    pub apart: Option<(usize, usize)>,
    /// What the SVG's legend says of compactions (the dialect's words).
    pub compaction_legend: &'static str,
    /// For a subagent's own transcript: the transcript and tool call that started it.
    pub parent: Option<ParentLink>,
}

/// What a dialect says about a session at a selected leaf that the graph cannot tell from the
/// tree: the session's id, the path to the leaf and the entries that reach the model there,
/// and the marks only that dialect has. [`Lens::pi`] and [`Lens::claude`] make one.
pub struct Lens<E: TreeEntry> {
    /// The session's id, for the headers.
    pub session_id: String,
    /// The leaf the context is computed at (`None`: nothing in context).
    pub selected: Option<NodeIdx>,
    /// The entries on the path to the selected leaf.
    pub path: Vec<NodeIdx>,
    /// The entries that reach the model at the selected leaf, in the dialect's order.
    pub context_entries: Vec<NodeIdx>,
    /// Entries a fold must not swallow besides the [`Describe::landmark`]s (pi: where a
    /// compaction's kept range starts).
    pub kept_starts: Vec<NodeIdx>,
    /// The range a compaction entry summarizes (pi), worked out for the rows drawn only.
    pub summarizes: Option<Summarize<E>>,
    /// The line an entry continues beyond the tree's parent (Claude Code: a compact boundary's
    /// `logicalParentUuid`).
    pub logical_parent: Option<LogicalParent<E>>,
    /// What the SVG's legend says of compactions.
    pub compaction_legend: &'static str,
    /// The default leaf: the one the agent continues from ([`Describe::default_leaf`]; for a
    /// Codex thread of several files, the last line of the file asked for).
    pub default_leaf: Option<NodeIdx>,
    /// Entries whose tool call started a subagent's own transcript, with that transcript
    /// ([`Lens::with_subagents`]).
    pub subagents: Vec<(NodeIdx, SubagentLink)>,
    /// Sidechains written in the file, each with the tool call that started it.
    pub sidechains: Vec<SidechainCall>,
    /// For a subagent's own transcript: what started it ([`Lens::with_subagents`]).
    pub parent: Option<ParentLink>,
}

/// The range compaction entry `n` of a tree summarizes (`None`: `n` is no compaction).
pub type Summarize<E> = fn(&Tree<E>, NodeIdx) -> Option<Summarized>;
/// The node an entry continues beyond its parent (`None`: none, or not in the file).
pub type LogicalParent<E> = fn(&Tree<E>, NodeIdx) -> Option<NodeIdx>;

impl Lens<pi::format::Entry> {
    /// A pi session at `selected`: pi's projection (its path and `buildContextEntries`), the
    /// compactions' kept starts and summarized ranges.
    pub fn pi(tree: &pi::Tree, selected: Option<NodeIdx>) -> Self {
        let proj = projection::project(tree, selected);
        // Entries some compaction keeps from: a range's end is drawn, not folded away.
        let kept_starts = tree
            .nodes()
            .iter()
            .filter_map(|node| match &node.entry.kind {
                EntryKind::Compaction {
                    first_kept_entry_id: Some(id),
                    ..
                } => tree.find(id.as_str()),
                _ => None,
            })
            .collect();
        Lens {
            session_id: tree.header().id.clone(),
            selected,
            path: proj.path.clone(),
            context_entries: proj.items.iter().map(|i| i.node).collect(),
            kept_starts,
            summarizes: Some(|tree: &pi::Tree, n| {
                matches!(tree.node(n).entry.kind, EntryKind::Compaction { .. })
                    .then(|| summarized(tree, n))
            }),
            logical_parent: None,
            compaction_legend: "diamond: compaction, bracket: what it summarizes",
            default_leaf: Describe::default_leaf(tree),
            subagents: Vec::new(),
            sidechains: Vec::new(),
            parent: None,
        }
    }
}

impl Lens<claude::format::Entry> {
    /// A Claude Code transcript at `selected`: the path Claude Code loads to that leaf and the
    /// lines whose content it sends ([`claude::context::context`], lines read through
    /// `source`), each compact boundary linked to the line it compacted. A context that cannot
    /// be worked out (a line that cannot be read back) leaves nothing in context and the
    /// tree's path highlighted: the graph is a picture, not a check. `session_id` names the
    /// transcript (its file's stem).
    pub fn claude(
        tree: &claude::Tree,
        source: &(dyn LineSource + Sync),
        selected: Option<NodeIdx>,
        session_id: String,
    ) -> Self {
        let ctx = selected.and_then(|leaf| {
            claude::context::context(tree, source, leaf, &Default::default()).ok()
        });
        let (path, context_entries) = match ctx {
            Some(ctx) => {
                let entries = ctx
                    .entry_ids
                    .iter()
                    .filter_map(|id| tree.find(id.as_str()))
                    .collect();
                (ctx.path, entries)
            }
            None => (tree.path_to(selected), Vec::new()),
        };
        Lens {
            session_id,
            selected,
            path,
            context_entries,
            kept_starts: Vec::new(),
            summarizes: None,
            logical_parent: Some(|tree: &claude::Tree, n| match &tree.node(n).entry.kind {
                claude::format::Kind::System {
                    logical_parent: Some(p),
                    ..
                } => tree.find(p.as_str()),
                _ => None,
            }),
            compaction_legend: "diamond: compact boundary, dashed: the line it compacted",
            default_leaf: Describe::default_leaf(tree),
            subagents: Vec::new(),
            sidechains: sidechain_calls(tree, source),
            parent: None,
        }
    }

    /// The lens linked to the transcripts beside its file: `parent`, the mark of the file when
    /// it is a subagent's own transcript ([`crate::listing::subagent_of`]), and `subagents`,
    /// the subagents' transcripts it started ([`crate::listing::subagents_of`]), each on the
    /// line of the tool call its metadata names (one whose call is not a line of `tree`, or
    /// whose metadata names none, is left out).
    pub fn with_subagents(
        mut self,
        tree: &claude::Tree,
        parent: Option<Subagent>,
        subagents: Vec<(PathBuf, Subagent)>,
    ) -> Self {
        self.parent = parent.map(|p| ParentLink {
            path: p.parent_path,
            agent_id: p.agent_id,
            tool_use_id: p.tool_use_id,
        });
        if subagents.is_empty() {
            return self;
        }
        let mut calls: std::collections::HashMap<&str, NodeIdx> = Default::default();
        for (i, node) in tree.nodes().iter().enumerate() {
            if let claude::format::Kind::Assistant { tool_use_ids, .. } = &node.entry.kind {
                for id in tool_use_ids.iter() {
                    calls.entry(id.as_str()).or_insert(i as NodeIdx);
                }
            }
        }
        for (path, s) in subagents {
            let Some(tool_use_id) = s.tool_use_id else {
                continue;
            };
            let Some(&n) = calls.get(tool_use_id.as_str()) else {
                continue;
            };
            // One link a line: Claude Code writes one content block, one tool call, a line.
            if self.subagents.iter().any(|(m, _)| *m == n) {
                continue;
            }
            self.subagents.push((
                n,
                SubagentLink {
                    agent_id: s.agent_id,
                    path,
                    tool_use_id,
                },
            ));
        }
        self
    }
}

/// The sidechains written in a transcript beside its main conversation (older Claude Code),
/// each matched to the `Agent` or `Task` tool call that started it: the call whose
/// `input.prompt` equals the sidechain's first user message, the latest such call before the
/// sidechain in the file not matched already (else the first after it). A sidechain no call
/// matches is left out. Reads
/// the lines of the sidechains' roots and of the tool calls through `source`, and only when
/// there is a sidechain beside a main conversation (a subagent's own transcript, all
/// sidechain, reads nothing).
fn sidechain_calls(tree: &claude::Tree, source: &dyn LineSource) -> Vec<SidechainCall> {
    let roots: Vec<NodeIdx> = tree
        .roots()
        .iter()
        .copied()
        .filter(|&r| tree.node(r).entry.apart())
        .collect();
    if roots.is_empty() || roots.len() == tree.roots().len() {
        return Vec::new();
    }
    let read = |n: NodeIdx| -> Option<Value> {
        let line = source.line(tree.node(n).entry.span).ok()?;
        jsstr::parse_value(&line).ok()
    };
    // Every Agent/Task call with a prompt: its line, its id, its prompt.
    let mut calls: Vec<(NodeIdx, String, String)> = Vec::new();
    for (i, node) in tree.nodes().iter().enumerate() {
        let claude::format::Kind::Assistant { tool_use_ids, .. } = &node.entry.kind else {
            continue;
        };
        if tool_use_ids.is_empty() || node.entry.apart() {
            continue;
        }
        let Some(v) = read(i as NodeIdx) else {
            continue;
        };
        for block in v["message"]["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_use"
                && matches!(block["name"].as_str(), Some("Agent" | "Task"))
                && let (Some(id), Some(prompt)) =
                    (block["id"].as_str(), block["input"]["prompt"].as_str())
            {
                calls.push((i as NodeIdx, id.to_owned(), prompt.to_owned()));
            }
        }
    }
    if calls.is_empty() {
        return Vec::new();
    }
    let mut taken = vec![false; calls.len()];
    let mut out = Vec::new();
    for root in roots {
        let Some(v) = read(root) else {
            continue;
        };
        if v["type"] != "user" {
            continue;
        }
        let Some(text) = user_text(&v["message"]["content"]) else {
            continue;
        };
        let free = |k: &usize| !taken[*k] && calls[*k].2 == text;
        let found = (0..calls.len())
            .rev()
            .filter(free)
            .find(|&k| calls[k].0 < root)
            .or_else(|| (0..calls.len()).find(free));
        if let Some(k) = found {
            taken[k] = true;
            out.push(SidechainCall {
                root,
                call: calls[k].0,
                tool_use_id: calls[k].1.clone(),
            });
        }
    }
    out
}

/// A user message's text: its content when that is a string, else its `text` blocks joined by
/// newlines; `None` when it has no text.
fn user_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

impl Lens<codex::format::Entry> {
    /// A Codex thread's files at `selected`: the path through the files' prefixes, the lines
    /// whose content Codex sends there (a sent response item, a compaction whose replacement
    /// history is the base; [`codex::thread::Thread::context_nodes`]). A context that cannot
    /// be worked out (a file gone) leaves nothing in context: the graph is a picture, not a
    /// check.
    pub fn codex(thread: &codex::thread::Thread, selected: Option<NodeIdx>) -> Self {
        let context_entries = selected
            .and_then(|l| thread.context_nodes(l).ok())
            .map(|(n, _)| n)
            .unwrap_or_default();
        Lens {
            session_id: thread.thread_id().unwrap_or_default().to_owned(),
            selected,
            path: thread.tree.path_to(selected),
            context_entries,
            kept_starts: Vec::new(),
            summarizes: None,
            logical_parent: None,
            compaction_legend: "diamond: compaction (its replacement history is the new base); \
                                branches: forks and revert segments (other files)",
            default_leaf: thread.last_node(thread.own),
            subagents: Vec::new(),
            sidechains: Vec::new(),
            parent: None,
        }
    }
}

/// What a run of folded entries holds, for a person: the three most frequent kinds with
/// their counts, most frequent first (ties in order of first appearance), then "…" when
/// there are more kinds: `"12 message, 3 label, 1 custom, …"`. Shared by the graph's fold
/// nodes and `sessiond tree`'s folded runs.
pub fn fold_summary<'a>(kinds: impl IntoIterator<Item = &'a str>) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for k in kinds {
        match counts.iter_mut().find(|(name, _)| *name == k) {
            Some((_, c)) => *c += 1,
            None => counts.push((k, 1)),
        }
    }
    counts.sort_by_key(|k| std::cmp::Reverse(k.1));
    let mut parts: Vec<String> = counts
        .iter()
        .take(3)
        .map(|(k, c)| format!("{c} {k}"))
        .collect();
    if counts.len() > 3 {
        parts.push("…".to_owned());
    }
    parts.join(", ")
}

/// One line of the text form, and the entry it stands for (a fold: its first entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextLine {
    /// The line, without its newline.
    pub text: String,
    /// The entry a reader jumps to from this line; `None` for the header and connectors.
    pub entry: Option<NodeIdx>,
}

/// Cuts `text` to `max` characters, ending a cut one with `…`.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Builds the graph of `tree` as `lens` sees it at its selected leaf (`None`: no entry
/// selected, nothing in context). Previews are read through `lines`; an unreadable line gives
/// an empty preview, never an error (the graph is a picture, not a check).
pub fn build<E: Describe>(tree: &Tree<E>, lens: &Lens<E>, lines: &dyn LineSource) -> Graph {
    build_rows(tree, lens, lines, 0..usize::MAX)
}

/// [`build`], with the rows' text (previews, read from `lines`, and compaction ranges) worked
/// out only for the rows in `rows`; every other row has its place, kind, counts and marks but
/// an empty preview. What one page of `session/graph` needs: the layout of a whole session
/// reads no line, so a page costs its own rows' reading, not the session's.
pub fn build_rows<E: Describe>(
    tree: &Tree<E>,
    lens: &Lens<E>,
    lines: &dyn LineSource,
    rows: std::ops::Range<usize>,
) -> Graph {
    let len = tree.len();
    let selected = lens.selected;
    let mut in_context = vec![false; len];
    for &n in &lens.context_entries {
        in_context[n as usize] = true;
    }
    let mut on_path = vec![false; len];
    for &n in &lens.path {
        on_path[n as usize] = true;
    }
    // Entries a fold stops at: a compaction's kept start, a line a boundary compacted.
    let mut kept_start = vec![false; len];
    for &k in &lens.kept_starts {
        kept_start[k as usize] = true;
    }
    let logical_of = |n: NodeIdx| lens.logical_parent.and_then(|f| f(tree, n));
    if lens.logical_parent.is_some() {
        for n in 0..len as NodeIdx {
            if let Some(p) = logical_of(n) {
                kept_start[p as usize] = true;
            }
        }
    }
    // A tool call that started a subagent or a sidechain, and a sidechain's root, have rows of
    // their own: the links name them.
    for (n, _) in &lens.subagents {
        kept_start[*n as usize] = true;
    }
    for s in &lens.sidechains {
        kept_start[s.call as usize] = true;
        kept_start[s.root as usize] = true;
    }
    let default_leaf = lens.default_leaf;
    let plain = |n: NodeIdx| {
        let node = tree.node(n);
        node.children.len() == 1
            && Some(n) != selected
            && Some(n) != default_leaf
            && !kept_start[n as usize]
            && tree.label_of(node.entry.id().as_str()).is_none()
            && !node.entry.landmark()
    };

    // The main conversation's roots, then those of the conversations apart (subagents'
    // sidechains); a file of sidechains only (a subagent's own transcript) is its main one.
    let (mut main, mut apart): (Vec<NodeIdx>, Vec<NodeIdx>) = tree
        .roots()
        .iter()
        .partition(|&&r| !tree.node(r).entry.apart());
    if main.is_empty() {
        std::mem::swap(&mut main, &mut apart);
    }
    let apart_count = apart.len();
    let mut nodes: Vec<GraphNode> = Vec::new();
    let mut lanes = 0usize;
    let mut apart_from = None;
    for (is_apart, roots) in [(false, main), (true, apart)] {
        if is_apart && !roots.is_empty() {
            apart_from = Some(nodes.len());
        }
        // Depth-first; the top of the stack is always the rightmost open lane. Several roots
        // (a lenient read's orphans, a transcript's compact boundaries) are drawn one after
        // the other on lane 0: each one's lanes have all closed before the next starts.
        let mut stack: Vec<(NodeIdx, usize, Option<usize>)> =
            roots.iter().rev().map(|&r| (r, 0, None)).collect();
        while let Some((start, lane, parent_row)) = stack.pop() {
            // A fold: the plain run from `start`, cut where context membership changes.
            let mut last = start;
            let mut count = 1usize;
            if plain(start) {
                let mut run_end = start;
                let mut run = 1usize;
                while let [only] = tree.node(run_end).children.as_slice() {
                    let next = *only;
                    if !plain(next) || in_context[next as usize] != in_context[start as usize] {
                        break;
                    }
                    run_end = next;
                    run += 1;
                }
                if run >= FOLD_MIN {
                    last = run_end;
                    count = run;
                }
            }
            let row = nodes.len();
            lanes = lanes.max(lane + 1);
            let source = rows.contains(&row).then_some(lines);
            let mut g = node_of(
                tree,
                source,
                (start, last, count),
                lane,
                parent_row,
                (selected, default_leaf),
            );
            g.in_context = in_context[start as usize];
            g.on_path = on_path[start as usize];
            g.apart = is_apart;
            nodes.push(g);
            let children = tree.node(last).children.as_slice();
            let k = children.len();
            // The last child continues on this lane; the others open lanes to its right, the
            // first child on the rightmost (drawn first).
            for (i, &c) in children.iter().enumerate().rev() {
                let child_lane = if i + 1 == k { lane } else { lane + (k - 1 - i) };
                stack.push((c, child_lane, Some(row)));
            }
        }
    }
    let linked = !lens.subagents.is_empty() || !lens.sidechains.is_empty();
    if lens.logical_parent.is_some() || linked {
        // A line a boundary compacted, a tool call that started a subagent or a sidechain and
        // a sidechain's root are never folded: each has a row of its own.
        let mut row_of: Vec<usize> = vec![usize::MAX; len];
        for (row, g) in nodes.iter().enumerate() {
            row_of[g.first as usize] = row;
        }
        let row = |n: NodeIdx| Some(row_of[n as usize]).filter(|&r| r != usize::MAX);
        for g in &mut nodes {
            if g.kind == NodeKind::Entry {
                g.logical_parent_row = logical_of(g.first).and_then(row);
            }
        }
        for (n, link) in &lens.subagents {
            if let Some(r) = row(*n) {
                nodes[r].subagent = Some(link.clone());
            }
        }
        for s in &lens.sidechains {
            if let (Some(root), Some(call)) = (row(s.root), row(s.call)) {
                nodes[root].started_by = Some((call, s.tool_use_id.clone()));
                nodes[call].sidechain_row = Some(root);
            }
        }
    }
    let end = rows.end.min(nodes.len());
    if let Some(summarize) = lens.summarizes {
        for g in nodes.get_mut(rows.start.min(end)..end).unwrap_or_default() {
            if let Some(s) = summarize(tree, g.first) {
                g.preview = redacted(&summary_text(tree, &s));
                g.summarizes = Some(s);
            }
        }
    }
    Graph {
        nodes,
        lanes,
        entry_count: len,
        leaf_count: tree.leaves().count(),
        session_id: lens.session_id.clone(),
        name: tree.name().map(redacted),
        default_leaf,
        selected_leaf: selected,
        context_entries: lens.context_entries.clone(),
        apart: apart_from.map(|row| (row, apart_count)),
        compaction_legend: lens.compaction_legend,
        parent: lens.parent.clone(),
    }
}

/// The node of a row holding entries `first..=last` (`count` of them); its preview is read
/// through `lines` when given (see [`build_rows`]). `leaves` are the selected and the default
/// leaf.
fn node_of<E: Describe>(
    tree: &Tree<E>,
    lines: Option<&dyn LineSource>,
    (first, last, count): (NodeIdx, NodeIdx, usize),
    lane: usize,
    parent_row: Option<usize>,
    (selected, default_leaf): (Option<NodeIdx>, Option<NodeIdx>),
) -> GraphNode {
    let kind = if count > 1 {
        NodeKind::Fold
    } else {
        NodeKind::Entry
    };
    let node = tree.node(first);
    let (title, preview) = match kind {
        NodeKind::Fold => {
            let mut titles = Vec::new();
            let mut cur = first;
            loop {
                titles.push(tree.node(cur).entry.kind_name());
                if cur == last {
                    break;
                }
                match tree.node(cur).children.as_slice() {
                    [only] => cur = *only,
                    _ => break,
                }
            }
            (fold_summary(titles), String::new())
        }
        NodeKind::Entry => {
            let preview = lines.map_or_else(String::new, |lines| {
                let value: Value = lines
                    .line(node.entry.span())
                    .ok()
                    .and_then(|l| jsstr::parse_value(&l).ok())
                    .unwrap_or(Value::Null);
                cut(
                    &redacted(&node.entry.preview_value(&value)),
                    GRAPH_PREVIEW_CHARS,
                )
            });
            (node.entry.kind_name().to_owned(), preview)
        }
    };
    let name = match (node.entry.effect(), kind) {
        (Effect::Name(Some(n)), NodeKind::Entry) => Some(redacted(jsstr::trim(n))),
        _ => None,
    };
    let contains = |target: Option<NodeIdx>| {
        target.is_some_and(|t| {
            let mut cur = last;
            loop {
                if cur == t {
                    return true;
                }
                if cur == first {
                    return false;
                }
                match tree.node(cur).parent {
                    Some(p) => cur = p,
                    None => return false,
                }
            }
        })
    };
    let last_node = tree.node(last);
    GraphNode {
        kind,
        first,
        last,
        count,
        parent_row,
        lane,
        title,
        preview,
        label: match kind {
            NodeKind::Entry => tree
                .label_of(node.entry.id().as_str())
                .map(|l| redacted(&l.text)),
            NodeKind::Fold => None,
        },
        name,
        leaf: last_node.children.is_empty(),
        default_leaf: contains(default_leaf),
        selected_leaf: contains(selected),
        branch_point: last_node.children.len() > 1,
        in_context: false,
        on_path: false,
        summarizes: None,
        mark: match kind {
            NodeKind::Entry => node.entry.mark(),
            NodeKind::Fold => None,
        },
        apart: false,
        logical_parent_row: None,
        subagent: None,
        started_by: None,
        sidechain_row: None,
    }
}

/// The range pi's compaction `c` summarizes (see [`Summarized`]): the dialect's
/// ([`pi::compaction::audit::source`], which `explain` reports too).
fn summarized(tree: &pi::Tree, c: NodeIdx) -> Summarized {
    let s = pi::compaction::audit::source(tree, c);
    Summarized {
        count: s.count,
        first: s.first,
        last: s.last,
        first_kept_entry_id: s.first_kept_entry_id,
        previous: s.previous,
    }
}

/// `summarizes 12 entries a1…b2 (and compaction c3's summary), keeps from d4`.
fn summary_text<E: TreeEntry>(tree: &Tree<E>, s: &Summarized) -> String {
    let id = |n: NodeIdx| tree.node(n).entry.id().to_string();
    let mut text = match (s.first, s.last) {
        (Some(f), Some(l)) if f == l => format!("summarizes 1 entry {}", id(f)),
        (Some(f), Some(l)) => format!("summarizes {} entries {}…{}", s.count, id(f), id(l)),
        _ => "summarizes no entries".to_owned(),
    };
    if let Some(p) = s.previous {
        let _ = write!(text, " and compaction {}'s summary", id(p));
    }
    if let Some(k) = &s.first_kept_entry_id {
        let _ = write!(text, ", keeps from {k}");
    }
    text
}

impl Graph {
    /// The text form, as `git log --graph` draws: a header, then one line per node with its
    /// lanes (`*` an entry, `:` a fold, `|` an open lane) and a `|\` line under each branch
    /// point. Each node line is `LANES  C ID TITLE PREVIEW [LABEL]  MARKS` where `C` is `●`
    /// for entries that reach the model at the selected leaf, `○` for entries on the path to
    /// it that do not, blank otherwise.
    ///
    /// At most [`DRAWN_LANES`] lanes are drawn: a row past them is drawn in the last column
    /// after a `…`, and a branch point's connector says how many lanes it leaves out.
    pub fn text<E: TreeEntry>(&self, tree: &Tree<E>) -> Vec<TextLine> {
        self.text_rows(tree, 0..self.nodes.len())
    }

    /// [`Graph::text`] of the rows in `rows` (each row's line and its connector), after the
    /// header and legend when `rows` starts at the first row: the lines of consecutive row
    /// ranges, one after the other, are the whole text.
    pub fn text_rows<E: TreeEntry>(
        &self,
        tree: &Tree<E>,
        rows: std::ops::Range<usize>,
    ) -> Vec<TextLine> {
        let id = |n: NodeIdx| tree.node(n).entry.id().to_string();
        let end = rows.end.min(self.nodes.len());
        let start = rows.start.min(end);
        let mut out = Vec::with_capacity(end - start + 4);
        if start == 0 {
            self.header_lines(tree, &mut out);
        }
        let width = self.title_width();
        let drawn = self.lanes.clamp(1, DRAWN_LANES);
        for (row, g) in self.nodes.iter().enumerate().take(end).skip(start) {
            if let Some((from, count)) = self.apart
                && row == from
            {
                out.push(TextLine {
                    text: format!(
                        "apart from the main conversation ({}):",
                        plural(count, "sidechain", "sidechains")
                    ),
                    entry: None,
                });
            }
            let col = column(g.lane);
            let mut lanes = String::new();
            for l in 0..=col {
                if l > 0 {
                    // The lanes folded away stand between the last drawn one and this row's.
                    lanes.push(if l == col && g.lane > col { '…' } else { ' ' });
                }
                lanes.push(match (l == col, g.kind) {
                    (false, _) => '|',
                    (true, NodeKind::Entry) => '*',
                    (true, NodeKind::Fold) => ':',
                });
            }
            let pad = " ".repeat(2 * (drawn - 1 - col));
            let c = if g.in_context {
                '●'
            } else if g.on_path {
                '○'
            } else {
                ' '
            };
            let mut line = format!("{lanes}{pad} {c} ");
            match g.kind {
                NodeKind::Entry => {
                    let _ = write!(line, "{} {:<width$} ", id(g.first), g.title);
                    // The label before the preview, where a narrow window still shows it.
                    if let Some(l) = &g.label {
                        let _ = write!(line, "[{}] ", one_line(l));
                    }
                    line.push_str(&g.preview);
                }
                NodeKind::Fold => {
                    let _ = write!(
                        line,
                        "{}…{} {} folded: {}",
                        id(g.first),
                        id(g.last),
                        plural(g.count, "entry", "entries"),
                        g.title
                    );
                }
            }
            let mut line = line.trim_end().to_owned();
            if let (NodeKind::Fold, Some(l)) = (g.kind, &g.label) {
                let _ = write!(line, " [{}]", one_line(l));
            }
            if g.parent_row.is_none() && tree.roots().len() > 1 {
                line.push_str("  ◇ root");
            }
            if let Some(p) = g.logical_parent_row {
                let _ = write!(line, "  ⇠ compacted {}", id(self.nodes[p].first));
            }
            if let Some((call, tool_use_id)) = &g.started_by {
                let _ = write!(
                    line,
                    "  ⇠ started by {} (tool_use {tool_use_id})",
                    id(self.nodes[*call].first)
                );
            }
            if let Some(root) = g.sidechain_row {
                let _ = write!(line, "  ↳ sidechain {}", id(self.nodes[root].first));
            }
            if let Some(s) = &g.subagent {
                let _ = write!(
                    line,
                    "  ↳ subagent agent-{} ({})",
                    s.agent_id,
                    s.path.display()
                );
            }
            if g.selected_leaf && !g.default_leaf {
                line.push_str("  ◆ selected leaf");
            }
            if g.default_leaf {
                line.push_str("  ◀ resume leaf");
            } else if g.leaf {
                line.push_str("  ◀ leaf");
            }
            out.push(TextLine {
                text: line,
                entry: Some(g.first),
            });
            let k = tree.node(g.last).children.len();
            if k > 1 {
                let mut conn = String::new();
                for _ in 0..col {
                    conn.push_str("| ");
                }
                conn.push('|');
                // The children's lanes to the right of this one, as far as they are drawn.
                let shown = (k - 1).min(DRAWN_LANES - 1 - col);
                for _ in 0..shown {
                    conn.push_str("\\ ");
                }
                let left_out = k - 1 - shown;
                if left_out > 0 {
                    let lanes = if left_out == 1 { "lane" } else { "lanes" };
                    let _ = write!(conn, "… {left_out} more {lanes}");
                }
                out.push(TextLine {
                    text: conn.trim_end().to_owned(),
                    entry: None,
                });
            }
        }
        out
    }

    /// The widest entry title (at most 24 characters), for the title column.
    fn title_width(&self) -> usize {
        self.nodes
            .iter()
            .filter(|g| g.kind == NodeKind::Entry)
            .map(|g| g.title.chars().count())
            .filter(|&w| w <= 24)
            .max()
            .unwrap_or(0)
    }

    /// The text form's first two lines: the session, and the legend.
    fn header_lines<E: TreeEntry>(&self, tree: &Tree<E>, out: &mut Vec<TextLine>) {
        let id = |n: NodeIdx| tree.node(n).entry.id().to_string();
        let header = match &self.name {
            Some(n) => format!("session {} ({})", one_line(n), self.session_id),
            None => format!("session {}", self.session_id),
        };
        out.push(TextLine {
            text: format!(
                "{header} · {} · {}",
                plural(self.entry_count, "entry", "entries"),
                plural(self.leaf_count, "leaf", "leaves"),
            ),
            entry: None,
        });
        if let Some(p) = &self.parent {
            out.push(TextLine {
                text: p.sentence(),
                entry: None,
            });
        }
        let at = match (self.selected_leaf, self.default_leaf) {
            (Some(s), d) if Some(s) == d => format!("the resume leaf {}", id(s)),
            (Some(s), _) => format!("leaf {}", id(s)),
            (None, _) => "no leaf".to_owned(),
        };
        let mut legend = format!(
            "● reaches the model at {at} ({}) · ○ on its path, not sent · : folded run",
            plural(
                self.context_entries.len(),
                "context entry",
                "context entries"
            ),
        );
        if self.lanes > DRAWN_LANES {
            let _ = write!(legend, " · … lanes past {DRAWN_LANES} folded");
        }
        if self.nodes.iter().any(|g| g.logical_parent_row.is_some()) {
            legend.push_str(" · ⇠ a compact boundary and the line it compacted");
        }
        if self.nodes.iter().any(|g| g.started_by.is_some()) {
            legend.push_str(" · ⇠ a sidechain and the tool call that started it");
        }
        if self.nodes.iter().any(|g| g.subagent.is_some()) {
            legend.push_str(" · ↳ a tool call and the subagent's transcript it started");
        }
        out.push(TextLine {
            text: legend,
            entry: None,
        });
    }
}

/// `1 entry`, `2 entries`.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Row height, lane width and the left gutter's column width (compaction ranges), in SVG units.
const ROW_H: usize = 26;
const LANE_W: usize = 16;
const GUTTER_W: usize = 10;
/// Width the compact boundaries' links take in the left gutter, in SVG units.
const LINK_W: usize = 12;
/// Height of the header above the first row.
const HEAD_H: usize = 58;
/// Height of the header's line naming what started a subagent's own transcript.
const PARENT_H: usize = 18;

/// XML text and attribute escaping.
fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            // Not allowed in XML 1.0 at all.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

const SVG_STYLE: &str = r#"
:root { color-scheme: light dark; }
svg { --bg: #ffffff; --fg: #1f2328; --muted: #656d76; --edge: #afb8c1; --ctx: #0969da;
  --path: #8250df; --compaction: #9a6700; --summary: #1a7f37; --label-bg: #ddf4ff; --label-fg: #0550ae;
  --fold: #eaeef2; }
@media (prefers-color-scheme: dark) {
  svg { --bg: #0d1117; --fg: #e6edf3; --muted: #8d96a0; --edge: #484f58; --ctx: #4493f8;
    --path: #ab7df8; --compaction: #d29922; --summary: #3fb950; --label-bg: #121d2f; --label-fg: #79c0ff;
    --fold: #21262d; }
}
.bg { fill: var(--bg); }
text { fill: var(--fg); font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
text.head { font: 600 14px system-ui, -apple-system, "Segoe UI", sans-serif; }
text.legend, .muted { fill: var(--muted); }
.edge { fill: none; stroke: var(--edge); stroke-width: 1.5; }
.edge.on-path { stroke: var(--path); stroke-width: 2.5; }
.node circle, .node rect, .node path { fill: var(--bg); stroke: var(--edge); stroke-width: 1.5; }
.node.on-path circle, .node.on-path rect, .node.on-path path { stroke: var(--path); }
.node.in-context circle, .node.in-context rect, .node.in-context path { fill: var(--ctx); stroke: var(--ctx); }
.node.fold rect { fill: var(--fold); }
.node.in-context.fold rect { fill: var(--ctx); }
.node.compaction path { stroke: var(--compaction); }
.node.branch-summary circle { stroke: var(--summary); stroke-width: 2.5; }
.node.in-context .id { fill: var(--ctx); font-weight: 600; }
.node .kind { fill: var(--muted); }
.node.compaction .preview { fill: var(--compaction); }
.node.branch-summary .preview { fill: var(--summary); }
.label-text { fill: var(--label-fg); }
.mark { fill: var(--path); font-weight: 600; }
.edge.sidechain { stroke: var(--path); }
.range path { fill: none; stroke: var(--compaction); stroke-width: 2; }
.range text { fill: var(--compaction); font-size: 10px; }
"#;

impl Graph {
    /// The picture as one self-contained SVG document (no script, no external reference;
    /// light and dark by `prefers-color-scheme`). Every node is a `<g class="node entry|fold
    /// …">` with `data-id` (its first entry), `data-last`, `data-count`, `data-row` and
    /// `data-lane`; its classes say `in-context`, `on-path`, `leaf`, `default-leaf`,
    /// `selected-leaf`, `branch-point`, `compaction`, `branch-summary`. Each compaction's range
    /// is a `<g class="range">` bracket in the left gutter with `data-compaction`,
    /// `data-first`, `data-last` and `data-count`. Edges are `<path class="edge">`, marked
    /// `on-path` on the path to the selected leaf; a compact boundary's link to the line it
    /// compacted is a dashed `<path class="edge logical">` through the left gutter with
    /// `data-boundary` and `data-compacted`; a sidechain's link to the tool call that started
    /// it a dotted `<path class="edge sidechain">` with `data-sidechain`, `data-call` and
    /// `data-tool-use-id`. A tool call that started a subagent's own transcript is a node of
    /// class `subagent-call` with `data-subagent` (the agent id), `data-subagent-path` and
    /// `data-tool-use-id`, and says `↳ subagent agent-ID (PATH)`; a subagent's own transcript
    /// names what started it in a `<text class="legend parent">` with `data-parent-path`,
    /// `data-agent-id` and `data-tool-use-id`.
    pub fn svg<E: TreeEntry>(&self, tree: &Tree<E>) -> String {
        let id = |n: NodeIdx| tree.node(n).entry.id().to_string();
        // The row of every entry (folds hold several), for the compaction ranges.
        let mut row_of: Vec<usize> = vec![usize::MAX; tree.len()];
        for (row, g) in self.nodes.iter().enumerate() {
            let mut cur = g.last;
            loop {
                row_of[cur as usize] = row;
                if cur == g.first {
                    break;
                }
                match tree.node(cur).parent {
                    Some(p) => cur = p,
                    None => break,
                }
            }
        }
        let ranges: Vec<(&GraphNode, &Summarized)> = self
            .nodes
            .iter()
            .filter_map(|g| g.summarizes.as_ref().map(|s| (g, s)))
            .filter(|(_, s)| s.count > 0)
            .collect();
        let ranges_w = ranges.len() * GUTTER_W + if ranges.is_empty() { 0 } else { 6 };
        let links = self
            .nodes
            .iter()
            .any(|g| g.logical_parent_row.is_some() || g.started_by.is_some());
        let gutter = ranges_w + if links { LINK_W } else { 0 };
        // Lanes past [`DRAWN_LANES`] are drawn in the last column, as in the text form.
        let lane_x = |lane: usize| 14 + gutter + column(lane) * LANE_W;
        // A subagent's own transcript says what started it on a line of the header.
        let head_h = HEAD_H + if self.parent.is_some() { PARENT_H } else { 0 };
        let row_y = |row: usize| head_h + row * ROW_H + ROW_H / 2;
        let text_x = 14 + gutter + self.lanes.clamp(1, DRAWN_LANES) * LANE_W + 6;
        let longest = self
            .nodes
            .iter()
            .map(|g| {
                g.title.chars().count()
                    + g.preview.chars().count()
                    + g.label.as_ref().map_or(0, |l| l.chars().count() + 3)
                    + g.subagent.as_ref().map_or(0, |s| {
                        s.agent_id.chars().count() + s.path.to_string_lossy().chars().count() + 20
                    })
                    + 40
            })
            .max()
            .unwrap_or(40);
        let at = match (self.selected_leaf, self.default_leaf) {
            (Some(s), d) if Some(s) == d => format!("the resume leaf {}", id(s)),
            (Some(s), _) => format!("leaf {}", id(s)),
            (None, _) => "no leaf".to_owned(),
        };
        let mut legend = format!(
            "filled: reaches the model at {at} ({}) · coloured: its path · square: folded run · {}",
            plural(
                self.context_entries.len(),
                "context entry",
                "context entries"
            ),
            self.compaction_legend,
        );
        if self.nodes.iter().any(|g| g.started_by.is_some()) {
            legend.push_str(" · dotted: a sidechain and the tool call that started it");
        }
        // Wide enough for the longest row and for the legend (12px monospace, about 7.5 units
        // a character), so neither is cut off.
        let legend_w = 14 + legend.chars().count() * 15 / 2 + 20;
        let width = (text_x + longest * 7 + 20).max(legend_w).max(960);
        let height = head_h + self.nodes.len() * ROW_H + 12;

        let mut o = String::with_capacity(256 * self.nodes.len() + 4096);
        let title = match &self.name {
            Some(n) => format!("{n} ({})", self.session_id),
            None => self.session_id.clone(),
        };
        let _ = write!(
            o,
            r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="branch graph of session {t}" data-entries="{entries}" data-leaves="{leaves}" data-nodes="{n}" data-lanes="{lanes}">
<title>Branch graph of session {t}</title>
<style>{SVG_STYLE}</style>
<rect class="bg" width="100%" height="100%"/>
"#,
            t = xml(&title),
            entries = self.entry_count,
            leaves = self.leaf_count,
            n = self.nodes.len(),
            lanes = self.lanes,
        );
        let _ = write!(
            o,
            r#"<text class="head" x="14" y="22">{} · {} · {}</text>
<text class="legend" x="14" y="42">{}</text>
"#,
            xml(&title),
            plural(self.entry_count, "entry", "entries"),
            plural(self.leaf_count, "leaf", "leaves"),
            xml(&legend),
        );
        if let Some(p) = &self.parent {
            let _ = writeln!(
                o,
                r#"<text class="legend parent" x="14" y="{y}" data-parent-path="{path}" data-agent-id="{agent}" data-tool-use-id="{call}">{text}</text>"#,
                y = HEAD_H + 2,
                path = xml(&p.path.to_string_lossy()),
                agent = xml(&p.agent_id),
                call = xml(p.tool_use_id.as_deref().unwrap_or("")),
                text = xml(&p.sentence()),
            );
        }
        // Compaction ranges, one gutter column each.
        for (i, (g, s)) in ranges.iter().enumerate() {
            let (Some(f), Some(l)) = (s.first, s.last) else {
                continue;
            };
            let (rf, rl) = (row_of[f as usize], row_of[l as usize]);
            if rf == usize::MAX || rl == usize::MAX {
                continue;
            }
            let (top, bottom) = (row_y(rf.min(rl)) - 8, row_y(rf.max(rl)) + 8);
            let x = 8 + i * GUTTER_W;
            let _ = writeln!(
                o,
                r#"<g class="range" data-compaction="{c}" data-first="{fi}" data-last="{la}" data-count="{n}"><title>compaction {c} summarizes {n} entries {fi}…{la}</title><path d="M{x1} {top} H{x} V{bottom} H{x1}"/></g>"#,
                c = xml(&id(g.first)),
                fi = xml(&id(f)),
                la = xml(&id(l)),
                n = s.count,
                x1 = x + 5,
            );
        }
        // Compact boundaries' links to what they compacted, bowed through the gutter.
        for (row, g) in self.nodes.iter().enumerate() {
            let Some(p) = g.logical_parent_row else {
                continue;
            };
            let (xp, yp) = (lane_x(self.nodes[p].lane), row_y(p));
            let (xb, yb) = (lane_x(g.lane), row_y(row));
            let xg = 8 + ranges_w;
            let _ = writeln!(
                o,
                r#"<path class="edge logical" stroke-dasharray="4 3" data-boundary="{b}" data-compacted="{c}" d="M{xp} {yp} C{xg} {yp} {xg} {yb} {xb} {yb}"><title>compact boundary {b} compacted the conversation up to {c}</title></path>"#,
                b = xml(&id(g.first)),
                c = xml(&id(self.nodes[p].first)),
            );
        }
        // Sidechains' links to the tool calls that started them, bowed through the gutter.
        for (row, g) in self.nodes.iter().enumerate() {
            let Some((call, tool_use_id)) = &g.started_by else {
                continue;
            };
            let (xp, yp) = (lane_x(self.nodes[*call].lane), row_y(*call));
            let (xb, yb) = (lane_x(g.lane), row_y(row));
            let xg = 8 + ranges_w;
            let _ = writeln!(
                o,
                r#"<path class="edge sidechain" stroke-dasharray="2 3" data-sidechain="{r}" data-call="{c}" data-tool-use-id="{t}" d="M{xp} {yp} C{xg} {yp} {xg} {yb} {xb} {yb}"><title>sidechain {r} started by tool_use {t} of {c}</title></path>"#,
                r = xml(&id(g.first)),
                c = xml(&id(self.nodes[*call].first)),
                t = xml(tool_use_id),
            );
        }
        // Edges under the nodes.
        for (row, g) in self.nodes.iter().enumerate() {
            let Some(p) = g.parent_row else { continue };
            let pg = &self.nodes[p];
            let (xp, yp) = (lane_x(pg.lane), row_y(p));
            let (xc, yc) = (lane_x(g.lane), row_y(row));
            let d = if pg.lane == g.lane {
                format!("M{xp} {yp} V{yc}")
            } else {
                let mid = yp + ROW_H / 2;
                format!(
                    "M{xp} {yp} C{xp} {mid} {xc} {mid} {xc} {} V{yc}",
                    yp + ROW_H
                )
            };
            let _ = writeln!(
                o,
                r#"<path class="edge{}" d="{d}"/>"#,
                if g.on_path { " on-path" } else { "" }
            );
        }
        for (row, g) in self.nodes.iter().enumerate() {
            let mut class = String::from(match g.kind {
                NodeKind::Entry => "node entry",
                NodeKind::Fold => "node fold",
            });
            for (on, c) in [
                (g.in_context, " in-context"),
                (g.on_path, " on-path"),
                (g.leaf, " leaf"),
                (g.default_leaf, " default-leaf"),
                (g.selected_leaf, " selected-leaf"),
                (g.branch_point, " branch-point"),
                (g.mark == Some(Mark::Compaction), " compaction"),
                (g.mark == Some(Mark::Summary), " branch-summary"),
                (g.apart, " apart"),
                (g.subagent.is_some(), " subagent-call"),
                (g.sidechain_row.is_some(), " sidechain-call"),
            ] {
                if on {
                    class.push_str(c);
                }
            }
            let (x, y) = (lane_x(g.lane), row_y(row));
            let first = id(g.first);
            let tooltip = match g.kind {
                NodeKind::Entry => format!("{first} {} {}", g.title, g.preview),
                NodeKind::Fold => format!(
                    "{first}…{} {} folded: {}",
                    id(g.last),
                    plural(g.count, "entry", "entries"),
                    g.title
                ),
            };
            let subagent = g.subagent.as_ref().map_or(String::new(), |s| {
                format!(
                    r#" data-subagent="{}" data-subagent-path="{}" data-tool-use-id="{}""#,
                    xml(&s.agent_id),
                    xml(&s.path.to_string_lossy()),
                    xml(&s.tool_use_id)
                )
            });
            let _ = write!(
                o,
                r#"<g class="{class}" data-id="{fid}" data-last="{lid}" data-count="{count}" data-row="{row}" data-lane="{lane}"{subagent}><title>{tip}</title>"#,
                fid = xml(&first),
                lid = xml(&id(g.last)),
                count = g.count,
                lane = g.lane,
                tip = xml(&tooltip),
            );
            match (g.kind, g.mark) {
                (NodeKind::Fold, _) => {
                    let _ = write!(
                        o,
                        r#"<rect x="{}" y="{}" width="10" height="14" rx="2"/>"#,
                        x - 5,
                        y - 7
                    );
                }
                (NodeKind::Entry, Some(Mark::Compaction)) => {
                    let _ = write!(
                        o,
                        r#"<path d="M{x} {} L{} {y} L{x} {} L{} {y} Z"/>"#,
                        y - 7,
                        x + 7,
                        y + 7,
                        x - 7
                    );
                }
                (NodeKind::Entry, _) => {
                    let _ = write!(o, r#"<circle cx="{x}" cy="{y}" r="5"/>"#);
                }
            }
            let ty = y + 4;
            match g.kind {
                NodeKind::Entry => {
                    let _ = write!(
                        o,
                        r#"<text x="{text_x}" y="{ty}"><tspan class="id">{}</tspan> <tspan class="kind">{}</tspan> <tspan class="preview">{}</tspan>"#,
                        xml(&first),
                        xml(&g.title),
                        xml(&g.preview),
                    );
                }
                NodeKind::Fold => {
                    let _ = write!(
                        o,
                        r#"<text x="{text_x}" y="{ty}" class="muted"><tspan class="id">{}…{}</tspan> <tspan class="kind">{} folded: {}</tspan>"#,
                        xml(&first),
                        xml(&id(g.last)),
                        plural(g.count, "entry", "entries"),
                        xml(&g.title),
                    );
                }
            }
            if let Some(l) = &g.label {
                let _ = write!(o, r#" <tspan class="label-text">[{}]</tspan>"#, xml(l));
            }
            if let Some((call, _)) = &g.started_by {
                let _ = write!(
                    o,
                    r#" <tspan class="mark">⇠ started by {}</tspan>"#,
                    xml(&id(self.nodes[*call].first))
                );
            }
            if let Some(root) = g.sidechain_row {
                let _ = write!(
                    o,
                    r#" <tspan class="mark">↳ sidechain {}</tspan>"#,
                    xml(&id(self.nodes[root].first))
                );
            }
            if let Some(s) = &g.subagent {
                let _ = write!(
                    o,
                    r#" <tspan class="mark subagent">↳ subagent agent-{} ({})</tspan>"#,
                    xml(&s.agent_id),
                    xml(&s.path.to_string_lossy())
                );
            }
            if g.selected_leaf && !g.default_leaf {
                o.push_str(r#" <tspan class="mark">◆ selected leaf</tspan>"#);
            }
            if g.default_leaf {
                o.push_str(r#" <tspan class="mark">◀ resume leaf</tspan>"#);
            } else if g.leaf {
                o.push_str(r#" <tspan class="mark">◀ leaf</tspan>"#);
            }
            o.push_str("</text></g>\n");
        }
        o.push_str("</svg>\n");
        o
    }
}

/// `text` with what looks like a secret replaced ([`crate::core::redact`], as an export
/// redacts by default): the graph shows previews, names and labels of entries, which may
/// quote a key.
fn redacted(text: &str) -> String {
    crate::core::redact::Redactor::new(true)
        .redact(text)
        .into_owned()
}
