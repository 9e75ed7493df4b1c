//! Conversions from core and session types to wire types: the one place where the daemon
//! decides how a tree node, a revision, a context or a corruption looks on the wire.

use serde_json::{Value, json};

use crate::core::describe::Describe;
use crate::core::source::LineSource;
use crate::core::tree::{NodeIdx, Tree};
use crate::dialect::Dialect;
use crate::dialect::pi::format::EntryId;
use crate::js::jsstr;
use crate::session::activity::Agent;
use crate::session::opened::Opened;
use crate::session::owner::{self, Session};
use crate::storage::{lines, writer};
use crate::view::wire::AgentInfo;
use crate::view::wire::{Dropped, Forked, Reattached, Repair, Salvaged, TornTail, Written};
use crate::view::wire::{Node, OpenResult, Revision, TreeCursor, TreeResult};

/// The wire revision of a session.
pub fn revision(r: owner::Revision) -> Revision {
    Revision {
        entry_count: r.entry_count,
        applied_bytes: r.applied_bytes,
        generation: r.generation,
    }
}

fn id<E: Describe>(tree: &Tree<E>, n: NodeIdx) -> String {
    // A copy of the text, not `to_string` through the formatting machinery: every
    // `didChange` names all the leaves.
    tree.node(n).entry.id().as_str().to_owned()
}

/// The default leaf's id ([`Describe::default_leaf`]: pi's last entry in file order, the leaf
/// `claude --resume` continues from).
pub fn leaf_id<E: Describe>(tree: &Tree<E>) -> Option<String> {
    E::default_leaf(tree).map(|l| id(tree, l))
}

/// Ids of all leaves, in file order.
pub fn leaves<E: Describe>(tree: &Tree<E>) -> Vec<String> {
    tree.leaves().map(|l| id(tree, l)).collect()
}

/// One node. Reads the entry's line (as `JSON.parse` does, [`jsstr::parse_value`]) for its
/// preview and timestamp; a line that cannot be read gives an empty preview and a null timestamp
/// rather than failing the whole answer.
pub fn node<E: Describe>(
    tree: &Tree<E>,
    source: &dyn LineSource,
    n: NodeIdx,
    with_children: bool,
) -> Node {
    let node = tree.node(n);
    let e = &node.entry;
    let line: Value = source
        .line(e.span())
        .ok()
        .and_then(|l| jsstr::parse_value(&l).ok())
        .unwrap_or(Value::Null);
    Node {
        id: e.id().to_string(),
        parent_id: node.parent.map(|p| id(tree, p)),
        entry_type: e.type_name().to_owned(),
        role: e.role().map(str::to_owned),
        label: tree.label_of(e.id().as_str()).map(|l| l.text.to_string()),
        preview: e.preview_value(&line),
        timestamp: line.get("timestamp").cloned().unwrap_or(Value::Null),
        child_count: node.children.len(),
        children: with_children.then(|| node.children.iter().map(|&c| id(tree, c)).collect()),
    }
}

/// `session/open`'s result for a freshly opened (or already open) session.
pub fn open_result(session: &Session) -> OpenResult {
    let pending = session.is_pending();
    let (session_id, header, leaf_id, leaves, name) = match session.opened() {
        Opened::Pi(s) => {
            let tree = s.tree();
            let header = if pending {
                Value::Null
            } else {
                jsstr::parse_value(tree.header().raw.get().as_bytes()).unwrap_or(Value::Null)
            };
            let id = (!pending).then(|| tree.header().id.clone());
            (
                id,
                header,
                self::leaf_id(tree),
                self::leaves(tree),
                tree.name().map(str::to_owned),
            )
        }
        Opened::Claude(s) => {
            let tree = &s.tree;
            let id = claude_session_id(session.path());
            (
                id,
                Value::Null,
                self::leaf_id(tree),
                self::leaves(tree),
                tree.name().map(str::to_owned),
            )
        }
        Opened::Codex(s) => {
            let tree = &s.tree;
            let first = tree
                .nodes()
                .first()
                .and_then(|n| session.source().line(n.entry.span).ok());
            let id =
                first.and_then(|l| crate::dialect::Dialect::Codex.session_id(session.path(), &l));
            (
                id,
                Value::Null,
                self::leaf_id(tree),
                self::leaves(tree),
                None,
            )
        }
    };
    OpenResult {
        path: session.path().to_owned(),
        format: session.dialect(),
        session_id,
        pending,
        header,
        leaf_id,
        leaves,
        entry_count: session.len(),
        name,
        torn_tail: session.torn_tail().map(torn_tail),
        diagnostics: json!(session.opened().diagnostics()),
        revision: revision(session.revision()),
        live_mode: session.live_mode().as_str().to_owned(),
        agent: session.agent().as_ref().map(agent),
    }
}

/// An agent working on a session, for the wire.
pub fn agent(a: &Agent) -> AgentInfo {
    AgentInfo {
        pid: a.pid,
        command: a.command.clone(),
        evidence: a.evidence.as_str().to_owned(),
    }
}

/// Where a `session/tree` page starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeStart {
    /// At the roots.
    Roots,
    /// At this node (included): `fromId`.
    At(NodeIdx),
    /// At this node's children: `childrenOf`.
    ChildrenOf(NodeIdx),
    /// At the siblings after this node: `after`.
    After(NodeIdx),
}

/// A page of the tree: breadth-first from `start`, down to `depth` levels below the page's
/// first level, at most `limit` nodes (at least one when there is any). Siblings are split
/// across pages when they do not fit, so every page makes progress whatever the tree's shape.
/// A node lists its `children` only when all of them are in the page; `next` says where each
/// part left out continues, so the pages partition the nodes below the start: a node left
/// out of a page is in exactly one of the pages `next` names.
pub fn tree_page(session: &Session, start: TreeStart, depth: usize, limit: usize) -> TreeResult {
    match session.opened() {
        Opened::Pi(s) => tree_page_of(session, s.tree(), start, depth, limit),
        Opened::Claude(s) => tree_page_of(session, &s.tree, start, depth, limit),
        Opened::Codex(s) => tree_page_of(session, &s.tree, start, depth, limit),
    }
}

/// [`tree_page`] of `session`'s tree, `tree`.
fn tree_page_of<E: Describe>(
    session: &Session,
    tree: &Tree<E>,
    start: TreeStart,
    depth: usize,
    limit: usize,
) -> TreeResult {
    page_in(
        tree,
        session.source(),
        start,
        (depth, limit),
        leaf_id(tree),
        session,
    )
}

/// [`tree_page`] of an open Codex rollout's thread, read as one tree of files
/// ([`crate::dialect::codex::thread::Thread`]): forks and revert segments hang from the line
/// their prefix ends at, their lines named `<tag>:<id>`. The default leaf is the open file's
/// last line; `thread` is the report `sessiond tree --json` gives in its `thread` field
/// ([`crate::dialect::codex::report::report`]).
pub fn thread_tree_page(
    session: &Session,
    thread: &crate::dialect::codex::thread::Thread,
    start: TreeStart,
    depth: usize,
    limit: usize,
    report: Value,
) -> TreeResult {
    let tree = &thread.tree;
    let leaf = thread.last_node(thread.own).map(|n| id(tree, n));
    let mut page = page_in(tree, &thread.lines(), start, (depth, limit), leaf, session);
    page.thread = Some(report);
    page
}

/// A page of `tree`, its lines read through `source`, at `session`'s revision.
fn page_in<E: Describe>(
    tree: &Tree<E>,
    source: &dyn LineSource,
    start: TreeStart,
    (depth, limit): (usize, usize),
    leaf_id: Option<String>,
    session: &Session,
) -> TreeResult {
    let (page, next) = tree_walk(tree, start, depth, limit);
    let nodes = page
        .iter()
        .map(|&(n, expanded)| node(tree, source, n, expanded))
        .collect();
    TreeResult {
        nodes,
        roots: (start == TreeStart::Roots)
            .then(|| tree.roots().iter().map(|&r| id(tree, r)).collect()),
        complete: next.is_empty(),
        next,
        leaf_id,
        entry_count: tree.len(),
        revision: revision(session.revision()),
        thread: None,
    }
}

/// The nodes of a page (each with whether all its children are in the page) and the cursors
/// of what was left out. Iterative, so any depth is fine.
fn tree_walk<E: Describe>(
    tree: &Tree<E>,
    start: TreeStart,
    depth: usize,
    limit: usize,
) -> (Vec<(NodeIdx, bool)>, Vec<TreeCursor>) {
    let single;
    let starts: &[NodeIdx] = match start {
        TreeStart::Roots => tree.roots(),
        TreeStart::At(n) => {
            single = [n];
            &single
        }
        TreeStart::ChildrenOf(n) => &tree.node(n).children,
        TreeStart::After(n) => {
            let siblings = match tree.node(n).parent {
                Some(p) => &tree.node(p).children[..],
                None => tree.roots(),
            };
            let at = siblings.iter().position(|&s| s == n);
            at.map_or(&[][..], |i| &siblings[i + 1..])
        }
    };
    let limit = limit.max(1);
    let mut page: Vec<(NodeIdx, bool)> = Vec::new();
    let mut levels: Vec<usize> = Vec::new();
    let mut next = Vec::new();
    let take = starts.len().min(limit);
    for &s in &starts[..take] {
        page.push((s, false));
        levels.push(0);
    }
    if take < starts.len()
        && let Some(&last) = starts[..take].last()
    {
        next.push(TreeCursor::After(id(tree, last)));
    }
    let mut at = 0;
    while at < page.len() {
        let n = page[at].0;
        let level = levels[at];
        let children = &tree.node(n).children;
        let room = limit - page.len();
        if children.is_empty() {
            page[at].1 = true;
        } else if level >= depth || room == 0 {
            next.push(TreeCursor::ChildrenOf(id(tree, n)));
        } else {
            let fits = children.len().min(room);
            for &c in &children[..fits] {
                page.push((c, false));
                levels.push(level + 1);
            }
            if fits == children.len() {
                page[at].1 = true;
            } else {
                next.push(TreeCursor::After(id(tree, children[fits - 1])));
            }
        }
        at += 1;
    }
    (page, next)
}

fn ids(ids: &[EntryId]) -> Vec<String> {
    ids.iter().map(ToString::to_string).collect()
}

/// The wire torn tail.
pub fn torn_tail(t: lines::TornTail) -> TornTail {
    TornTail {
        line: t.line,
        offset: t.offset,
        len: t.len,
    }
}

/// The wire form of an append's result; `applied_len` only where the CLI prints it.
pub fn written(w: &writer::Written, with_applied_len: bool) -> Written {
    Written {
        id: w.id.to_string(),
        parent_id: w.parent_id.as_ref().map(ToString::to_string),
        offset: w.offset,
        leaf_id: w.leaf_id.as_ref().map(ToString::to_string),
        added: ids(&w.added),
        added_after: ids(&w.added_after),
        repaired: w.repaired.as_ref().map(|r| Repair {
            sidecar: r.sidecar.clone(),
            offset: r.offset,
            len: r.len,
        }),
        applied_len: with_applied_len.then_some(w.applied_len),
    }
}

/// The wire form of a fork's result.
pub fn forked(f: &writer::Forked) -> Forked {
    Forked {
        path: f.path.clone(),
        session_id: f.session_id.clone(),
        leaf_id: f.leaf_id.as_ref().map(ToString::to_string),
        entry_count: f.entry_count,
        dropped_labels: ids(&f.dropped_labels),
        new_labels: ids(&f.new_labels),
        rewritten: ids(&f.rewritten),
    }
}

/// The wire form of a salvage's result.
pub fn salvaged(s: &writer::Salvaged) -> Salvaged {
    Salvaged {
        path: s.path.clone(),
        session_id: s.session_id.clone(),
        kept: s.kept,
        dropped: s
            .dropped
            .iter()
            .map(|d| Dropped {
                line: d.line,
                offset: d.offset,
                kind: d.kind.clone(),
                id: d.id.clone(),
                message: d.message.clone(),
            })
            .collect(),
        reattached: s
            .reattached
            .iter()
            .map(|r| Reattached {
                id: r.id.to_string(),
                was: r.was.clone(),
                now: r.now.as_ref().map(ToString::to_string),
            })
            .collect(),
    }
}

/// `session/graph`'s result and `sessiond graph --json`: the whole graph `g` of `tree`.
pub fn graph<E: Describe>(
    format: Dialect,
    tree: &Tree<E>,
    g: &crate::view::graph::Graph,
    revision: Option<Revision>,
) -> super::wire::GraphResult {
    graph_page(format, tree, g, 0..g.nodes.len(), revision)
}

/// One page of `session/graph`: the rows of `g` in `rows` (their nodes and text lines), with
/// the header and legend lines and `contextEntryIds` on the first page; `nextOffset` names
/// the row the next page starts at.
pub fn graph_page<E: Describe>(
    format: Dialect,
    tree: &Tree<E>,
    g: &crate::view::graph::Graph,
    rows: std::ops::Range<usize>,
    revision: Option<Revision>,
) -> super::wire::GraphResult {
    use crate::view::graph::NodeKind;
    use crate::view::wire::{
        GraphLine, GraphNode, GraphParent, GraphRange, GraphResult, GraphRow, GraphStartedBy,
        GraphSubagent,
    };
    let opt = |n: Option<NodeIdx>| n.map(|n| id(tree, n));
    let end = rows.end.min(g.nodes.len());
    let start = rows.start.min(end);
    GraphResult {
        format: format.as_str(),
        name: g.name.clone(),
        entry_count: g.entry_count,
        leaf_count: g.leaf_count,
        lanes: g.lanes,
        default_leaf_id: opt(g.default_leaf),
        selected_leaf_id: opt(g.selected_leaf),
        context_entry_ids: (start == 0)
            .then(|| g.context_entries.iter().map(|&n| id(tree, n)).collect()),
        row_count: g.nodes.len(),
        offset: start,
        next_offset: (end < g.nodes.len()).then_some(end),
        nodes: g.nodes[start..end]
            .iter()
            .map(|n| GraphNode {
                kind: match n.kind {
                    NodeKind::Entry => "entry",
                    NodeKind::Fold => "fold",
                },
                id: id(tree, n.first),
                last_id: id(tree, n.last),
                count: n.count,
                parent_row: n.parent_row,
                lane: n.lane,
                r#type: tree.node(n.first).entry.type_name().to_owned(),
                title: n.title.clone(),
                preview: n.preview.clone(),
                label: n.label.clone(),
                name: n.name.clone(),
                leaf: n.leaf,
                default_leaf: n.default_leaf,
                selected_leaf: n.selected_leaf,
                branch_point: n.branch_point,
                in_context: n.in_context,
                on_path: n.on_path,
                summarizes: n.summarizes.as_ref().map(|s| GraphRange {
                    count: s.count,
                    first_id: opt(s.first),
                    last_id: opt(s.last),
                    first_kept_entry_id: s.first_kept_entry_id.as_ref().map(|k| k.to_string()),
                    previous_compaction_id: opt(s.previous),
                }),
                apart: n.apart,
                logical_parent_id: n.logical_parent_row.map(|r| id(tree, g.nodes[r].first)),
                logical_parent_row: n.logical_parent_row,
                subagent: n.subagent.as_ref().map(|s| GraphSubagent {
                    agent_id: s.agent_id.clone(),
                    path: s.path.clone(),
                    tool_use_id: s.tool_use_id.clone(),
                }),
                started_by: n.started_by.as_ref().map(|(row, t)| GraphStartedBy {
                    id: id(tree, g.nodes[*row].first),
                    row: *row,
                    tool_use_id: t.clone(),
                }),
                sidechain: n.sidechain_row.map(|row| GraphRow {
                    id: id(tree, g.nodes[row].first),
                    row,
                }),
            })
            .collect(),
        lines: g
            .text_rows(tree, start..end)
            .into_iter()
            .map(|l| GraphLine {
                text: l.text,
                entry_id: opt(l.entry),
            })
            .collect(),
        revision,
        parent: g.parent.as_ref().map(|p| GraphParent {
            path: p.path.clone(),
            agent_id: p.agent_id.clone(),
            tool_use_id: p.tool_use_id.clone(),
        }),
    }
}

/// A Claude Code transcript's session id: its file name (`<sessionId>.jsonl`), as Claude Code
/// names the file after the session.
pub fn claude_session_id(path: &std::path::Path) -> Option<String> {
    path.file_stem().and_then(|s| s.to_str()).map(str::to_owned)
}
