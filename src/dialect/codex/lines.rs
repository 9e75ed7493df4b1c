//! Codex's rollout format as the storage layer reads it ([`LineFormat`]): no header line, every
//! line a node, each hanging from the line before it (a rollout file is linear; its branches
//! are other files, see [`super::lineage`]).

use crate::core::diagnostics::Corruption;
use crate::core::ids::{EntryId, LineSpan};
use crate::core::lines::{Item, LineFormat, corruption, is_blank};
use crate::core::tree::{NodeIdx, Repair, TreeEntry, tree_entry_fields};
use crate::dialect::codex::Tree;
use crate::dialect::codex::format::{self, Entry, Header};

/// Codex's rollout format, for the storage layer (a marker type: see [`LineFormat`]).
#[derive(Clone, Copy, Debug)]
pub struct Codex;

/// What the Codex dialect keeps beside the tree: the last line pushed, which the next one
/// hangs from.
#[derive(Debug, Default)]
pub struct CodexExt {
    last: Option<EntryId>,
}

impl TreeEntry for Entry {
    type Header = Header;
    type Ext = CodexExt;

    tree_entry_fields!(id, parent_id, time_ms, span);
    /// Codex skips a line it cannot parse and a repeated or regressed ordinal (its log says
    /// "failed to parse rollout line", "skipping duplicate or regressed rollout ordinal during
    /// projection"). The tree keeps a repeated ordinal's line, which can loop the linear chain
    /// back on itself (no parent is ever missing: each names the line before).
    fn lenient_action(repair: Repair) -> &'static str {
        match repair {
            Repair::DuplicateId => {
                "the later line takes the ordinal; Codex skips a repeated ordinal, so its answers \
                 may differ here"
            }
            Repair::OwnParent | Repair::Cycle | Repair::MissingParent => {
                "treated as a root; Codex skips a repeated ordinal, so its answers may differ here"
            }
            Repair::SkippedNotJson => "line skipped, as Codex does",
            Repair::SkippedUnreadable => "line skipped, as Codex skips a line it cannot parse",
            // The Codex reader keeps no irregular line: each is an entry or skipped.
            Repair::KeptIrregular => "line kept",
        }
    }
}

impl LineFormat for Codex {
    type Entry = Entry;
    /// Every line is a node: there are no asides.
    type Aside = std::convert::Infallible;
    type Context = ();

    const NAME: &'static str = "Codex rollout";

    fn implicit_header() -> Option<Header> {
        Some(Header)
    }

    fn context(_header: &Header) {}

    fn classify(bytes: &[u8], span: LineSpan, _cx: Option<()>) -> Item<Codex> {
        if is_blank(bytes) {
            return Item::Blank;
        }
        match format::parse_line(bytes, span) {
            Ok(entry) => Item::Entry(entry),
            Err(p) => Item::Problem(corruption(p.kind.into(), span, &p.detail)),
        }
    }

    fn push(tree: &mut Tree, mut entry: Entry) -> Result<NodeIdx, Corruption> {
        entry.parent_id = tree.ext().last.clone();
        let id = entry.id.clone();
        let n = tree.push(entry)?;
        tree.ext_mut().last = Some(id);
        Ok(n)
    }

    fn aside(_tree: &mut Tree, aside: std::convert::Infallible) {
        match aside {}
    }
}
