//! How a dialect's entries are shown to a person: the type column, which entries are landmarks
//! when a long run is folded, and a one-line preview of the entry's line. Printed trees,
//! listings and graphs use it for every dialect alike.

use crate::core::tree::TreeEntry;

/// How an entry is shown (see the module docs).
pub trait Describe: TreeEntry {
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

    /// A one-line preview of the entry's line (`line`, without its newline), at most
    /// [`crate::core::preview::PREVIEW_CHARS`] characters; empty when there is nothing to show.
    fn preview(&self, line: &[u8]) -> String;
}
