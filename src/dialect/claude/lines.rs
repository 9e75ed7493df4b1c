//! Claude Code's line format as the storage layer reads it ([`LineFormat`]): no header line;
//! tree lines become nodes, bookkeeping lines are kept beside the tree in file order, and a
//! line whose parent is a `progress` line is re-linked to that line's own parent, as Claude
//! Code's loader does.

use std::collections::HashMap;

use crate::core::diagnostics::{Corruption, CorruptionKind};
use crate::core::ids::{EntryId, LineSpan};
use crate::core::lines::{Item, LineFormat, corruption, is_blank};
use crate::core::tree::{NodeIdx, Repair, TreeEntry, tree_entry_fields};
use crate::dialect::claude::Tree;
use crate::dialect::claude::format::{self, Aside, Entry, Header, Line};
use crate::dialect::claude::resume_memo::ResumeMemo;

/// Claude Code's transcript format, for the storage layer (a marker type: see [`LineFormat`]).
#[derive(Clone, Copy, Debug)]
pub struct Claude;

/// What the Claude dialect keeps beside the tree: the bookkeeping lines in file order, and
/// where each `progress` line's children re-link to.
#[derive(Debug, Default)]
pub struct ClaudeExt {
    asides: Vec<Aside>,
    /// `uuid` of a progress line → the parent its children take (already re-linked).
    progress: HashMap<EntryId, Option<EntryId>>,
    /// Nodes whose logical parent [`Claude::settle`] has checked.
    checked: usize,
    /// The last resume leaf computed on this tree, carried forward as it grows.
    resume: ResumeMemo,
}

impl ClaudeExt {
    /// The lines that are no tree nodes (bookkeeping and progress), in file order.
    pub fn asides(&self) -> &[Aside] {
        &self.asides
    }

    /// The resume leaf remembered with this tree ([`ResumeMemo::resume_leaf`]).
    pub fn resume_memo(&self) -> &ResumeMemo {
        &self.resume
    }
}

impl TreeEntry for Entry {
    type Header = Header;
    type Ext = ClaudeExt;

    tree_entry_fields!(id, parent_id, time_ms, span);
    /// Claude Code (docs/claude-code.md §7.1–§7.2) skips a line that does not parse, keeps a
    /// repeated uuid's later line at the first one's place, and walks a path past a parent
    /// that names no line (or one already on the path) to the closest line of the same
    /// `isSidechain` at most 5 s older. The tree draws such an entry as a root; a context
    /// follows Claude Code ([`super::load`]).
    fn lenient_action(repair: Repair) -> &'static str {
        match repair {
            Repair::DuplicateId => {
                "the later line takes the uuid and the earlier line's place, as in Claude Code"
            }
            Repair::OwnParent | Repair::Cycle | Repair::MissingParent => {
                "a root in the tree; a path through it goes on at the closest line at most 5 s \
                 older, as in Claude Code"
            }
            Repair::SkippedNotJson => "line skipped, as Claude Code does",
            Repair::SkippedUnreadable => {
                "line skipped; Claude Code may read this JSON line, so its answers may differ here"
            }
            // The Claude Code reader keeps no irregular line: each is a tree line or skipped.
            Repair::KeptIrregular => "line kept",
        }
    }
}

impl LineFormat for Claude {
    type Entry = Entry;
    type Aside = Aside;
    type Context = ();

    const NAME: &'static str = "Claude Code transcript";

    fn implicit_header() -> Option<Header> {
        Some(Header)
    }

    fn context(_header: &Header) {}

    fn classify(bytes: &[u8], span: LineSpan, _cx: Option<()>) -> Item<Claude> {
        if is_blank(bytes) {
            return Item::Blank;
        }
        match format::parse_line(bytes, span) {
            Ok(Line::Entry(entry)) => Item::Entry(entry),
            Ok(Line::Aside(aside)) => Item::Aside(aside),
            Err(p) => Item::Problem(corruption(p.kind.into(), span, &p.detail)),
        }
    }

    fn push(tree: &mut Tree, mut entry: Entry) -> Result<NodeIdx, Corruption> {
        if let Some(parent) = &entry.parent_id
            && let Some(through) = tree.ext().progress.get(parent)
        {
            entry.parent_id = through.clone();
        }
        tree.push(entry)
    }

    fn aside(tree: &mut Tree, aside: Aside) {
        let ext = tree.ext_mut();
        if let Some((uuid, parent)) = &aside.progress {
            // A progress line's children hang from its parent, itself re-linked when that is a
            // progress line too.
            let through = match parent {
                Some(p) => ext.progress.get(p).cloned().unwrap_or(Some(p.clone())),
                None => None,
            };
            ext.progress.insert(uuid.clone(), through);
        }
        ext.asides.push(aside);
    }

    fn settle(tree: &mut Tree) -> Result<(), Corruption> {
        tree.settle()?;
        // A compact boundary's `logicalParentUuid` must name a line: Claude Code follows it to
        // tell what was compacted. Each node is checked once, however often the tree settles.
        let from = tree.ext().checked;
        tree.ext_mut().checked = tree.len();
        let dangling =
            tree.nodes()[from.min(tree.len())..]
                .iter()
                .find_map(|n| match &n.entry.kind {
                    format::Kind::System {
                        logical_parent: Some(p),
                        ..
                    } if tree.find(p.as_str()).is_none() => {
                        Some((n.entry.span, n.entry.id.clone(), p.clone()))
                    }
                    _ => None,
                });
        if let Some((span, id, parent)) = dangling {
            let mut c = corruption(
                CorruptionKind::MissingParent,
                span,
                &format!("logicalParentUuid {parent} names no line in the file"),
            );
            c.id = Some(id);
            return tree.fail_or_note(c, "kept; what the boundary compacted is unknown");
        }
        Ok(())
    }
}
