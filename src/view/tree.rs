//! A session tree for a human (`sessiond tree`), for every dialect: depth-first, indented only
//! where it branches, and folded by default. A session is mostly long runs of entries with one
//! child each (a conversation); what a reader needs is where it branches, where each branch
//! ends, and the marked entries. So a run keeps its landmarks — roots, branch points and the
//! first entry of each branch, leaves, the default leaf, labelled entries, and what the dialect
//! marks ([`Describe::landmark`]: compactions, summaries, names, compact boundaries) — and every
//! stretch of three or more entries between them is one line that counts them. `--full` prints
//! every entry, as pi's /tree lists them. Entries that belong to a conversation apart
//! ([`Describe::apart`]: a subagent's sidechain) are printed after the main tree.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::io::{self, Write};
use std::rc::Rc;

use crate::core::describe::Describe;
use crate::core::preview::{ShortIds, one_line};
use crate::core::source::LineSource;
use crate::core::tree::{NodeIdx, Tree};
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

/// How the default leaf is marked, and what the dialect calls it.
#[derive(Clone, Copy, Debug)]
pub struct DefaultLeaf<'a> {
    /// The default leaf (the entry a read without `--leaf` uses), if any.
    pub node: Option<NodeIdx>,
    /// Its mark in a row, e.g. `current leaf` (pi) or `resume leaf` (Claude Code).
    pub mark: &'a str,
}

/// Prints the tree of `tree` (lines read through `lines` for previews): folded unless `full`.
/// Errors: the output's.
pub fn print<E: Describe>(
    out: &mut dyn Write,
    tree: &Tree<E>,
    lines: &dyn LineSource,
    full: bool,
    default_leaf: DefaultLeaf<'_>,
) -> io::Result<()> {
    let width = tree
        .nodes()
        .iter()
        .map(|n| n.entry.kind_name().chars().count())
        .filter(|&w| w <= MAX_KIND_WIDTH)
        .max()
        .unwrap_or(0);
    // A root that continues an entry (a compact boundary and the line it compacted): both
    // rows say so, for the link a tree of parents does not draw.
    let continued_by: HashMap<NodeIdx, NodeIdx> = (0..tree.nodes().len())
        .filter_map(|n| {
            let n = NodeIdx::try_from(n).ok()?;
            let p = tree.node(n).entry.continues()?;
            Some((tree.find(p)?, n))
        })
        .collect();
    let printer = Printer {
        tree,
        lines,
        width,
        default_leaf,
        full,
        continued_by,
        short: ShortIds::of(tree),
    };
    let (mut main, mut apart): (Vec<NodeIdx>, Vec<NodeIdx>) = tree
        .roots()
        .iter()
        .partition(|&&r| !tree.node(r).entry.apart());
    if main.is_empty() {
        // Every conversation stands apart (a subagent's own transcript): it is the main one.
        std::mem::swap(&mut main, &mut apart);
    }
    let mut folds = printer.forest(out, &main)?;
    if !apart.is_empty() {
        writeln!(
            out,
            "apart from the main conversation ({}):",
            count(apart.len(), "sidechain", "sidechains")
        )?;
        folds += printer.forest(out, &apart)?;
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
struct Printer<'a, E: Describe> {
    tree: &'a Tree<E>,
    lines: &'a dyn LineSource,
    /// The type column's width.
    width: usize,
    default_leaf: DefaultLeaf<'a>,
    full: bool,
    /// An entry continued by a root ([`Describe::continues`]), and that root.
    continued_by: HashMap<NodeIdx, NodeIdx>,
    /// How a row shows a uuid (a Claude Code line's): by its head where that names it alone.
    short: ShortIds,
}

impl<E: Describe> Printer<'_, E> {
    /// Whether an entry is kept when the tree is folded (see the module docs).
    fn landmark(&self, n: NodeIdx) -> bool {
        let tree = self.tree;
        let node = tree.node(n);
        node.children.len() != 1
            || node.parent.is_none_or(|p| tree.node(p).children.len() != 1)
            || Some(n) == self.default_leaf.node
            || tree.label_of(node.entry.id().as_str()).is_some()
            || node.entry.landmark()
    }

    /// Prints the trees under `roots`, depth-first; several roots (a lenient read's orphans, a
    /// transcript's boundaries) are drawn as branches of the file. Returns the folds made.
    fn forest(&self, out: &mut dyn Write, roots: &[NodeIdx]) -> io::Result<usize> {
        let tree = self.tree;
        let mut folds = 0usize;
        // A stack item is the first entry of a run, its prefix, its branch mark and how many
        // branch levels its prefix holds.
        let mut stack: Vec<(NodeIdx, Rc<str>, &str, usize)> = roots
            .iter()
            .enumerate()
            .rev()
            .map(|(i, &r)| {
                let mark = match (roots.len(), i + 1 == roots.len()) {
                    (1, _) => "",
                    (_, true) => "└─ ",
                    (_, false) => "├─ ",
                };
                (r, Rc::from(""), mark, 0)
            })
            .collect();
        while let Some((first, prefix, branch, depth)) = stack.pop() {
            self.row(out, first, &format!("{prefix}{branch}"))?;
            let segment = match branch {
                "├─ " => "│  ",
                "└─ " => "   ",
                _ => "",
            };
            // Past MAX_INDENT levels, one `…` column stands for every deeper level.
            let (inner, depth): (Rc<str>, usize) = match depth.cmp(&MAX_INDENT) {
                _ if segment.is_empty() => (prefix.clone(), depth),
                Ordering::Less => (format!("{prefix}{segment}").into(), depth + 1),
                Ordering::Equal => (format!("{prefix}…  ").into(), depth + 1),
                Ordering::Greater => (prefix.clone(), depth),
            };
            // Down the run while each entry has one child; it ends at a leaf or a branch point.
            let mut hidden: Vec<NodeIdx> = Vec::new();
            let mut cur = first;
            while let [only] = tree.node(cur).children.as_slice() {
                cur = *only;
                if self.full || self.landmark(cur) {
                    folds += usize::from(self.flush(out, &inner, &mut hidden)?);
                    self.row(out, cur, &inner)?;
                } else {
                    hidden.push(cur);
                }
            }
            folds += usize::from(self.flush(out, &inner, &mut hidden)?);
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
        Ok(folds)
    }

    /// One entry: `id type preview [label]  ◀ leaf`.
    fn row(&self, out: &mut dyn Write, n: NodeIdx, prefix: &str) -> io::Result<()> {
        let tree = self.tree;
        let node = tree.node(n);
        let e = &node.entry;
        let mut marks = String::new();
        if let Some(label) = tree.label_of(e.id().as_str()) {
            // On the row's one line, whatever the label holds.
            marks.push_str(&format!(" [{}]", one_line(&label.text)));
        }
        if Some(n) == self.default_leaf.node {
            marks.push_str(&format!("  ◀ {}", self.default_leaf.mark));
        } else if node.children.is_empty() {
            marks.push_str("  ◀ leaf");
        }
        if let Some(&root) = self.continued_by.get(&n) {
            let by = tree.node(root).entry.id();
            marks.push_str(&format!(
                "  ⇢ compacted by {}",
                self.short.show(by.as_str())
            ));
        }
        if let Some(p) = e.continues() {
            marks.push_str(&format!("  ⇠ compacts {}", self.short.show(p)));
        }
        // One read per printed entry, for its preview.
        let text = self
            .lines
            .line(e.span())
            .map(|l| e.preview(&l))
            .unwrap_or_default();
        let line = format!(
            "{prefix}{} {:<width$} {text}",
            self.short.show(e.id().as_str()),
            e.kind_name(),
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
                fold_summary(hidden.iter().map(|&n| self.tree.node(n).entry.kind_name()))
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
