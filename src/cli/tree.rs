//! `sessiond tree` for a human: the session tree depth-first, indented only where it branches,
//! and folded by default. A pi session is mostly long runs of entries with one child each (a
//! conversation); what a reader needs is where it branches, where each branch ends, and the
//! marked entries. So a run keeps its landmarks — roots, branch points and the first entry of
//! each branch, leaves, the current leaf, labelled entries, compactions, branch summaries and
//! session names — and every stretch of three or more entries between them is one line that
//! counts them. `--full` prints every entry, as pi's /tree lists them.

use std::io::{self, Write};

use serde_json::Value;

use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::EntryKind;
use crate::dialect::pi::preview;
use crate::dialect::pi::render::LineSource;
use crate::view::graph::fold_summary;

/// Stretches this short are printed, not folded: a fold line would save nothing.
const MIN_FOLD: usize = 3;

/// The widest type column; a longer (unknown) type overflows its row alone.
const MAX_KIND_WIDTH: usize = 24;

/// Branch levels drawn as indentation; deeper ones share one `…` column, so a row's indent
/// (and the whole output) never grows with the nesting: 5,000 nested branch points drew rows
/// indented by up to 15,000 characters.
const MAX_INDENT: usize = 16;

/// `1 entry`, `2 entries`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The type column of an entry: a message's role, else the entry type.
fn kind(tree: &Tree, n: NodeIdx) -> &str {
    match &tree.node(n).entry.kind {
        EntryKind::Message(m) => m.role.as_str(),
        k => k.type_name(),
    }
}

/// Whether an entry is kept when the tree is folded (see the module docs).
fn landmark(tree: &Tree, n: NodeIdx) -> bool {
    let node = tree.node(n);
    node.children.len() != 1
        || node.parent.is_none_or(|p| tree.node(p).children.len() != 1)
        || Some(n) == tree.default_leaf()
        || tree.label_of(node.entry.id.as_str()).is_some()
        || matches!(
            node.entry.kind,
            EntryKind::Compaction { .. }
                | EntryKind::BranchSummary { .. }
                | EntryKind::SessionInfo { .. }
        )
}

/// Prints the tree of `tree` (lines read through `lines` for previews): folded unless `full`.
pub fn print(
    out: &mut dyn Write,
    tree: &Tree,
    lines: &dyn LineSource,
    full: bool,
) -> io::Result<()> {
    let width = tree
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, _)| kind(tree, i as NodeIdx).chars().count())
        .filter(|&w| w <= MAX_KIND_WIDTH)
        .max()
        .unwrap_or(0);
    let printer = Printer { tree, lines, width };
    let mut folds = 0usize;
    // Depth-first; a stack item is the first entry of a run, its prefix, its branch mark and
    // how many branch levels its prefix holds. Several roots (a lenient read's orphans) are
    // drawn as branches of the file.
    let roots = tree.roots();
    let mut stack: Vec<(NodeIdx, std::rc::Rc<str>, &str, usize)> = roots
        .iter()
        .enumerate()
        .rev()
        .map(|(i, &r)| {
            let mark = match (roots.len(), i + 1 == roots.len()) {
                (1, _) => "",
                (_, true) => "└─ ",
                (_, false) => "├─ ",
            };
            (r, std::rc::Rc::from(""), mark, 0)
        })
        .collect();
    while let Some((first, prefix, branch, depth)) = stack.pop() {
        printer.row(out, first, &format!("{prefix}{branch}"))?;
        let segment = match branch {
            "├─ " => "│  ",
            "└─ " => "   ",
            _ => "",
        };
        // Past MAX_INDENT levels, one `…` column stands for every deeper level.
        let (inner, depth): (std::rc::Rc<str>, usize) = match depth.cmp(&MAX_INDENT) {
            _ if segment.is_empty() => (prefix.clone(), depth),
            std::cmp::Ordering::Less => (format!("{prefix}{segment}").into(), depth + 1),
            std::cmp::Ordering::Equal => (format!("{prefix}…  ").into(), depth + 1),
            std::cmp::Ordering::Greater => (prefix.clone(), depth),
        };
        // Down the run while each entry has one child; the run ends at a leaf or a branch point.
        let mut hidden: Vec<NodeIdx> = Vec::new();
        let mut cur = first;
        while let [only] = tree.node(cur).children.as_slice() {
            cur = *only;
            if full || landmark(tree, cur) {
                folds += usize::from(printer.flush(out, &inner, &mut hidden)?);
                printer.row(out, cur, &inner)?;
            } else {
                hidden.push(cur);
            }
        }
        folds += usize::from(printer.flush(out, &inner, &mut hidden)?);
        let children = &tree.node(cur).children;
        for (i, &c) in children.iter().enumerate().rev() {
            let mark = if i + 1 == children.len() {
                "└─ "
            } else {
                "├─ "
            };
            stack.push((c, inner.clone(), mark, depth));
        }
    }
    if folds > 0 {
        writeln!(
            out,
            "({} folded; `sessiond tree --full` prints all {})",
            count(folds, "run of entries", "runs of entries"),
            count(tree.len(), "entry", "entries"),
        )?;
    }
    Ok(())
}

/// Prints rows and fold lines of one tree.
struct Printer<'a> {
    tree: &'a Tree,
    lines: &'a dyn LineSource,
    /// The type column's width.
    width: usize,
}

impl Printer<'_> {
    /// One entry: `id type preview [label]  ◀ leaf`.
    fn row(&self, out: &mut dyn Write, n: NodeIdx, prefix: &str) -> io::Result<()> {
        let tree = self.tree;
        let node = tree.node(n);
        let e = &node.entry;
        let mut marks = String::new();
        if let Some(label) = tree.label_of(e.id.as_str()) {
            // On the row's one line, whatever the label holds.
            marks.push_str(&format!(" [{}]", preview::one_line(&label.text)));
        }
        if Some(n) == tree.default_leaf() {
            marks.push_str("  ◀ current leaf");
        } else if node.children.is_empty() {
            marks.push_str("  ◀ leaf");
        }
        // One read per printed entry, for its preview.
        let value: Value = self
            .lines
            .line(e.span)
            .ok()
            .and_then(|l| crate::js::jsstr::parse_value(&l).ok())
            .unwrap_or(Value::Null);
        let text = preview::entry_preview(&value);
        let line = format!(
            "{prefix}{} {:<width$} {text}",
            e.id,
            kind(tree, n),
            width = self.width
        );
        writeln!(out, "{}{marks}", line.trim_end())
    }

    /// The entries folded since the last row: printed when too few to fold, else one line
    /// that counts them by type. Returns whether it folded.
    fn flush(
        &self,
        out: &mut dyn Write,
        prefix: &str,
        hidden: &mut Vec<NodeIdx>,
    ) -> io::Result<bool> {
        let folded = hidden.len() >= MIN_FOLD;
        if folded {
            writeln!(
                out,
                "{prefix}┆ {} folded: {}",
                count(hidden.len(), "entry", "entries"),
                fold_summary(hidden.iter().map(|&n| kind(self.tree, n)))
            )?;
        } else {
            for &n in hidden.iter() {
                self.row(out, n, prefix)?;
            }
        }
        hidden.clear();
        Ok(folded)
    }
}
