//! How a dialect's entries are shown to a person and to an editor: the entry's type and role,
//! the type column, which entries are landmarks when a long run is folded, a one-line preview
//! of the entry's line, and the leaf shown as the default. Printed trees, tree pages, listings
//! and graphs use it for every dialect alike.

use serde_json::Value;

use crate::core::tree::{NodeIdx, Tree, TreeEntry};

/// What a branch graph draws an entry as, beyond a dot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Where a conversation was compacted (pi's `compaction`, Claude Code's compact boundary):
    /// a diamond.
    Compaction,
    /// A summary the model reads in place of a stretch of the conversation (pi's branch
    /// summary, Claude Code's compaction summary): a ring.
    Summary,
}

/// How an entry is shown (see the module docs).
pub trait Describe: TreeEntry + Sized {
    /// The entry's `type` as written (`message`, `compaction`, `user`, `attachment`, …).
    fn type_name(&self) -> &str;

    /// The role of a message entry (`user`, `assistant`, `toolResult`, …); `None` otherwise.
    fn role(&self) -> Option<&str>;

    /// The type column: a message's role, else the entry's type (`user`, `compaction`,
    /// `compact_boundary`, …).
    fn kind_name(&self) -> &str;

    /// Whether the entry is a landmark by what it is (kept when a run is folded): compactions,
    /// summaries, names and boundaries. Branch points, branch starts, leaves and labelled
    /// entries are landmarks whatever they are.
    fn landmark(&self) -> bool;

    /// Whether the entry belongs to a conversation apart from the main one (a Claude Code
    /// subagent's sidechain): printed after the main tree.
    fn apart(&self) -> bool {
        false
    }

    /// The entry this one continues though it is a root of the file: a Claude Code compact
    /// boundary's `logicalParentUuid`, the line it compacted (`None` for any other entry).
    fn continues(&self) -> Option<&str> {
        None
    }

    /// How a branch graph marks the entry by what it is (`None`: a plain dot).
    fn mark(&self) -> Option<Mark> {
        None
    }

    /// A one-line preview of the entry's parsed line, at most
    /// [`crate::core::preview::PREVIEW_CHARS`] characters; empty when there is nothing to show.
    fn preview_value(&self, line: &Value) -> String;

    /// [`Describe::preview_value`] of the entry's line as read (`line`, without its newline).
    fn preview(&self, line: &[u8]) -> String {
        crate::js::jsstr::parse_value(line)
            .map(|v| self.preview_value(&v))
            .unwrap_or_default()
    }

    /// The leaf a read without a named leaf uses, and the one the agent continues from: pi's
    /// last entry in file order; the leaf `claude --resume` continues from.
    fn default_leaf(tree: &Tree<Self>) -> Option<NodeIdx> {
        tree.default_leaf()
    }
}
