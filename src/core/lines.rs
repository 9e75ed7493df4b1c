//! The seam between a dialect's line format and the storage layer that reads files: a dialect
//! says what one line is ([`LineFormat::classify`]) and what it does to the tree
//! ([`LineFormat::apply`]); storage splits the bytes, keeps positions and torn tails, and calls
//! these in file order. Pure: no I/O.

use std::fmt::Debug;

use crate::core::diagnostics::{Corruption, CorruptionKind};
use crate::core::ids::LineSpan;
use crate::core::tree::{NodeIdx, Tree, TreeEntry};

/// The header type of a format's entries.
pub type HeaderOf<F> = <<F as LineFormat>::Entry as TreeEntry>::Header;

/// A dialect's line format, as the storage layer reads it.
pub trait LineFormat: Sized + 'static {
    /// The entries of the tree.
    type Entry: TreeEntry + Send + Sync;
    /// A line that is no node of the tree but that the dialect keeps track of (pi: a second
    /// `session` line; Claude Code: a bookkeeping line without a uuid).
    type Aside: Debug + Send;
    /// What every line after the header is read against (pi: the header's version), small
    /// enough to hand to the threads that read a large file in parallel.
    type Context: Copy + Debug + Send + Sync;

    /// The format's name in messages ("pi session", "Claude Code transcript").
    const NAME: &'static str;

    /// The header a file starts with when the format has no header line (every line is then
    /// read as an entry from the first); `None` when line 1 must be the header.
    fn implicit_header() -> Option<HeaderOf<Self>>;

    /// The context lines after `header` are read in.
    fn context(header: &HeaderOf<Self>) -> Self::Context;

    /// Reads one complete line (without its `\n`). `cx` is `None` while no header has been
    /// read: the line must then be the header.
    fn classify(bytes: &[u8], span: LineSpan, cx: Option<Self::Context>) -> Item<Self>;

    /// Whether the unterminated final line is a torn tail (left unapplied) rather than a line.
    /// By default: it is not JSON.
    fn is_torn(bytes: &[u8], _span: LineSpan, _cx: Option<Self::Context>) -> bool {
        !is_blank(bytes) && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err()
    }

    /// Pushes one entry ([`Tree::push`]), keeping what the dialect tracks beside the tree.
    fn push(tree: &mut Tree<Self::Entry>, entry: Self::Entry) -> Result<NodeIdx, Corruption> {
        tree.push(entry)
    }

    /// Records a line that is no tree node ([`Item::Aside`]).
    fn aside(tree: &mut Tree<Self::Entry>, aside: Self::Aside);

    /// Resolves what can only be resolved once the lines at hand are all pushed: the tree's
    /// own [`Tree::settle`], then the dialect's (pi: version-1 compaction indices).
    fn settle(tree: &mut Tree<Self::Entry>) -> Result<(), Corruption> {
        tree.settle()
    }

    /// Applies one classified line to a tree (strict: corruption is an error; lenient: noted,
    /// and the line skipped or, when irregular, kept as the agent keeps it).
    fn apply(tree: &mut Tree<Self::Entry>, item: Item<Self>) -> Result<(), Corruption> {
        match item {
            Item::Blank | Item::Header(_) => Ok(()),
            Item::Aside(aside) => {
                Self::aside(tree, aside);
                Ok(())
            }
            Item::Entry(entry) => Self::push(tree, entry).map(|_| ()),
            Item::Irregular(entry, c) => {
                tree.keep_irregular(*c)?;
                Self::push(tree, entry).map(|_| ())
            }
            Item::Problem(c) => tree.skip_line(c),
            Item::Continuation { line, extra } => {
                tree.extend_line(line, extra);
                Ok(())
            }
        }
    }
}

/// What one line is.
#[derive(Debug)]
pub enum Item<F: LineFormat> {
    /// Whitespace only: skipped.
    Blank,
    /// The header (line 1 of a format that has one).
    Header(HeaderOf<F>),
    /// An entry: a node of the tree.
    Entry(F::Entry),
    /// A line that is no node but that the dialect records ([`LineFormat::Aside`]).
    Aside(F::Aside),
    /// An entry the agent keeps though it is not well-formed: strict reads refuse it with the
    /// corruption, lenient ones keep the entry and note the corruption.
    Irregular(F::Entry, Box<Corruption>),
    /// A line that cannot be read.
    Problem(Corruption),
    /// Whitespace that ends an open line (a line read whole before its `\n` arrived): `extra`
    /// bytes, before the `\n`, that belong to line `line`.
    Continuation {
        /// The open line's number.
        line: u32,
        /// Bytes of whitespace it grew by.
        extra: u32,
    },
}

/// Whether a line holds only whitespace (the agents skip those).
pub fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// A corruption at a line (no id).
pub fn corruption(kind: CorruptionKind, span: LineSpan, message: &str) -> Corruption {
    Corruption {
        kind,
        line: span.line,
        offset: span.offset,
        id: None,
        message: message.to_owned(),
    }
}
