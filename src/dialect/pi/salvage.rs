//! Planning a salvage (pure): which lines of a corrupt session are left out of the new file,
//! and which surviving ancestor each kept entry hangs from. The storage layer reads the lines,
//! asks for the plan, then writes the new file (`storage::writer::salvage`).
//!
//! The rules: every entry a lenient read keeps is kept (as pi keeps them); of two entries with
//! one id the later is kept (pi's lookups find the later one); each kept entry's parent is the
//! nearest surviving ancestor: a dropped line that still names its own `id` and `parentId` is
//! stepped over, a parent never seen makes the entry a root, and so does a cycle. Irregular
//! entries a lenient read keeps are resolved too: one without a string `type` is stepped over,
//! one whose `parentId` is no string becomes a root (see [`plan_salvage`]).

use std::collections::HashMap;

use crate::core::diagnostics::{CorruptionKind, Diagnostic};
use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::{EntryId, EntryKind};

/// One line left out of a salvaged file.
#[derive(Clone, Debug)]
pub struct Dropped {
    /// 1-based line number in the source.
    pub line: u32,
    /// Byte offset of the line in the source.
    pub offset: u64,
    /// `invalidJson`, `notAnObject`, `invalidEntry`, `duplicateId`, `tornTail`...
    pub kind: String,
    /// The line's entry id, when it could be read.
    pub id: Option<String>,
    /// What was wrong with the line, naming the problem.
    pub message: String,
}

/// An entry whose parent changed in the salvaged file.
#[derive(Clone, Debug)]
pub struct Reattached {
    /// The reattached entry.
    pub id: EntryId,
    /// The parent the source names (missing or dropped).
    pub was: Option<String>,
    /// The nearest surviving ancestor, or `None` when it became a root.
    pub now: Option<EntryId>,
}

/// An unfinished last line of the source: `(line, offset, len)` in lines and bytes.
#[derive(Clone, Copy, Debug)]
pub struct TornLine {
    /// 1-based line number.
    pub line: u32,
    /// Byte offset of the torn bytes.
    pub offset: u64,
    /// Number of torn bytes.
    pub len: u64,
}

/// The lines a lenient read could not use (bad lines and a torn tail), in file order of
/// discovery. Duplicates and orphans are not dropped lines: their entries are in the tree.
pub fn unreadable_lines(tree: &Tree, torn: Option<TornLine>) -> Vec<Dropped> {
    let mut dropped: Vec<Dropped> = tree
        .diagnostics()
        .iter()
        .filter_map(|d| match d {
            Diagnostic::Corrupt { corruption: c, .. }
                if c.kind != CorruptionKind::DuplicateId
                    && c.kind != CorruptionKind::MissingParent
                    && c.kind != CorruptionKind::ParentCycle =>
            {
                Some(Dropped {
                    line: c.line,
                    offset: c.offset,
                    kind: c.kind.as_str().to_owned(),
                    id: c.id.as_ref().map(|i| i.to_string()),
                    message: c.message.clone(),
                })
            }
            _ => None,
        })
        .collect();
    if let Some(TornLine { line, offset, len }) = torn {
        dropped.push(Dropped {
            line,
            offset,
            kind: "tornTail".into(),
            id: None,
            message: format!("{len} bytes of an unfinished last line"),
        });
    }
    dropped
}

/// What a salvage keeps and how it re-links it.
#[derive(Debug)]
pub struct SalvagePlan {
    /// Every line left out, sorted by offset: unreadable lines and shadowed duplicates.
    pub dropped: Vec<Dropped>,
    /// The kept nodes, in file order.
    pub kept: Vec<NodeIdx>,
    /// The new parent of each node (indexed by node; meaningful for kept nodes).
    pub parent: Vec<Option<NodeIdx>>,
    /// Kept entries whose parent changed (version 2 and later; version 1 has no parent ids).
    pub reattached: Vec<Reattached>,
}

/// What a line the tree left out, or kept though it is irregular, says about its place
/// (read from the file by the caller).
#[derive(Clone, Debug)]
pub struct Link {
    /// The line's string `id`.
    pub id: String,
    /// Its `parentId`, when that is a string.
    pub parent: Option<String>,
    /// The JSON text of a `parentId` that is neither a string nor `null` (`7`, `{}`), which
    /// names no entry.
    pub parent_json: Option<String>,
}

/// Plans a salvage of a leniently read `tree`. `unreadable` comes from [`unreadable_lines`];
/// `links` are the [`Link`]s of those unreadable lines that are objects with a string `id`.
///
/// An irregular entry the tree kept (see [`crate::dialect::pi::format::Line::Irregular`]) would make
/// the new file corrupt again, so: an entry without a string `type` is left out and stepped
/// over like a dropped line; an entry whose `parentId` is neither a string nor `null` is kept
/// as the root pi makes of it, and listed as reattached.
pub fn plan_salvage(tree: &Tree, mut dropped: Vec<Dropped>, links: &[Link]) -> SalvagePlan {
    let owner = |i: NodeIdx| tree.find(tree.node(i).entry.id.as_str()) == Some(i);
    let untyped = |i: NodeIdx| matches!(tree.node(i).entry.kind, EntryKind::Untyped);
    // Lines of entries the tree kept though they were noted: irregular entries. Those with a
    // type are kept (written as roots), so they are not dropped lines.
    let kept_line = |d: &Dropped| {
        d.id.as_deref()
            .and_then(|id| tree.find(id))
            .filter(|&o| tree.node(o).entry.span.line == d.line)
    };
    // Kept irregular entries written as roots → the JSON text of the `parentId` they had.
    let mut rooted: HashMap<NodeIdx, Option<String>> = HashMap::new();
    dropped.retain(|d| match kept_line(d) {
        Some(o) if !untyped(o) => {
            let was = links
                .iter()
                .find(|l| Some(l.id.as_str()) == d.id.as_deref())
                .and_then(|l| l.parent_json.clone());
            rooted.insert(o, was);
            false
        }
        _ => true,
    });
    for (i, node) in tree.nodes().iter().enumerate() {
        if !owner(i as NodeIdx) {
            let later = tree
                .find(node.entry.id.as_str())
                .map_or(0, |o| tree.node(o).entry.span.line);
            dropped.push(Dropped {
                line: node.entry.span.line,
                offset: node.entry.span.offset,
                kind: CorruptionKind::DuplicateId.as_str().to_owned(),
                id: Some(node.entry.id.to_string()),
                message: format!("the id is used again on line {later}, which is kept"),
            });
        }
    }
    dropped.sort_by_key(|d| d.offset);

    // Resolve each kept entry's parent to the nearest surviving ancestor.
    let n = tree.len();
    let mut parent: Vec<Option<NodeIdx>> = vec![None; n];
    let mut kept = Vec::with_capacity(n);
    for (i, node) in tree.nodes().iter().enumerate() {
        if !owner(i as NodeIdx) || untyped(i as NodeIdx) {
            continue;
        }
        kept.push(i as NodeIdx);
        let mut want = node.entry.parent_id.as_ref().map(|p| p.as_str().to_owned());
        let mut steps = 0;
        parent[i] = loop {
            let Some(p) = want else { break None };
            if steps > links.len() + n {
                break None;
            }
            steps += 1;
            match tree.find(&p) {
                // An untyped entry is left out: step over it to its parent.
                Some(o) if untyped(o) => {
                    want = tree
                        .node(o)
                        .entry
                        .parent_id
                        .as_ref()
                        .map(|q| q.as_str().to_owned());
                }
                Some(o) => break Some(o),
                None => match links.iter().find(|l| l.id == p) {
                    Some(l) => want = l.parent.clone(),
                    None => break None,
                },
            }
        };
    }
    break_cycles(&mut parent);

    let mut reattached = Vec::new();
    if tree.header().version >= 2 {
        for &i in &kept {
            let e = &tree.node(i).entry;
            let new_parent = parent[i as usize].map(|p| &tree.node(p).entry.id);
            if let Some(was) = rooted.get(&i) {
                reattached.push(Reattached {
                    id: e.id.clone(),
                    was: was.clone(),
                    now: new_parent.cloned(),
                });
            } else if e.parent_id.as_ref() != new_parent {
                reattached.push(Reattached {
                    id: e.id.clone(),
                    was: e.parent_id.as_ref().map(|p| p.to_string()),
                    now: new_parent.cloned(),
                });
            }
        }
    }
    SalvagePlan {
        dropped,
        kept,
        parent,
        reattached,
    }
}

/// Makes the entry where each parent cycle is found a root, so the file reads strictly.
fn break_cycles(parent: &mut [Option<NodeIdx>]) {
    // 0 = not seen, 1 = on the current walk, 2 = known to reach a root.
    let mut state = vec![0u8; parent.len()];
    for start in 0..parent.len() {
        let mut walk = Vec::new();
        let mut cur = start;
        loop {
            match state[cur] {
                2 => break,
                1 => {
                    // `cur` is on this walk: cut the edge that closed the loop.
                    if let Some(&last) = walk.last() {
                        parent[last] = None;
                    }
                    break;
                }
                _ => {}
            }
            state[cur] = 1;
            walk.push(cur);
            match parent[cur] {
                Some(p) => cur = p as usize,
                None => break,
            }
        }
        for w in walk {
            state[w] = 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_of_parents_is_cut_where_it_closes() {
        // 0 -> 1 -> 2 -> 0, and 3 -> 1.
        let mut parent = vec![Some(1), Some(2), Some(0), Some(1)];
        break_cycles(&mut parent);
        let roots = parent.iter().filter(|p| p.is_none()).count();
        assert_eq!(roots, 1, "{parent:?}");
        // Every node now reaches a root.
        for start in 0..parent.len() {
            let mut cur = start;
            for _ in 0..=parent.len() {
                match parent[cur] {
                    Some(p) => cur = p as usize,
                    None => break,
                }
            }
            assert!(parent[cur].is_none(), "node {start} loops: {parent:?}");
        }
    }
}
