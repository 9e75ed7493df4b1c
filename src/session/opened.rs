//! An open session's state in its dialect: the tree, how far the file is applied and the file's
//! stamp (what the reader opened and the live tail extends), plus what only one dialect keeps
//! (pi's recent projections). The one place where the session layer tells dialects apart; the
//! owner's tailing, reloading and signature logic speak of [`Opened`] alone.

use std::cell::{RefCell, RefMut};
use std::fs::File;
use std::io;
use std::path::Path;

use super::context_cache::ContextCache;
use crate::core::describe::Describe;
use crate::core::diagnostics::Diagnostic;
use crate::core::ids::LineSpan;
use crate::core::tree::{Mode, NodeIdx, UnknownId};
use crate::dialect::Dialect;
use crate::dialect::claude::Claude;
use crate::dialect::codex::Codex;
use crate::dialect::pi::incremental::LiveProjection;
use crate::dialect::pi::{self, Pi};
use crate::storage::lines::{self, Position, TornTail};
use crate::storage::reader::{self, FileStamp, OpenError, OpenedSession};

/// A pi session as the owner holds it: what was read, and the projections recent requests
/// asked for (extended as entries are appended, see [`ContextCache`]).
#[derive(Debug)]
pub struct PiSession {
    /// The tree, position and stamp; the writer appends through this same value.
    pub opened: OpenedSession<Pi>,
    contexts: RefCell<ContextCache>,
}

impl PiSession {
    fn new(opened: OpenedSession<Pi>) -> Self {
        PiSession {
            opened,
            contexts: RefCell::default(),
        }
    }

    /// The tree as of the last refresh.
    pub fn tree(&self) -> &pi::Tree {
        &self.opened.tree
    }

    /// The projection at `leaf` (`None`: the empty leaf), from the session's cache of recent
    /// projections: extended when entries were appended below a cached leaf, projected
    /// afresh otherwise (see `context_cache`). Holds the cache until the guard is dropped.
    pub fn context(&self, leaf: Option<NodeIdx>) -> RefMut<'_, LiveProjection> {
        RefMut::map(self.contexts.borrow_mut(), |c| {
            c.get(&self.opened.tree, leaf)
        })
    }
}

/// An open session in its dialect.
#[derive(Debug)]
pub enum Opened {
    /// A pi session.
    Pi(PiSession),
    /// A Claude Code transcript (read only).
    Claude(OpenedSession<Claude>),
    /// A Codex rollout (read only).
    Codex(OpenedSession<Codex>),
}

impl Opened {
    /// Reads `file` (opened from `path`, at its start) in `dialect`. Errors: the reader's.
    pub fn read(
        dialect: Dialect,
        path: &Path,
        file: File,
        mode: Mode,
    ) -> Result<Opened, OpenError> {
        Ok(match dialect {
            Dialect::Pi => Opened::Pi(PiSession::new(reader::open_session_from::<Pi>(
                path, file, mode,
            )?)),
            Dialect::Claude => {
                Opened::Claude(reader::open_session_from::<Claude>(path, file, mode)?)
            }
            Dialect::Codex => Opened::Codex(reader::open_session_from::<Codex>(path, file, mode)?),
        })
    }

    /// An empty pi session standing in for a file that has no session header yet.
    pub fn pending(mode: Mode, stamp: FileStamp) -> Opened {
        Opened::Pi(PiSession::new(OpenedSession {
            tree: pi::Tree::new(stand_in_header(), mode),
            torn_tail: None,
            position: Position::default(),
            stamp,
        }))
    }

    /// The session's dialect.
    pub fn dialect(&self) -> Dialect {
        match self {
            Opened::Pi(_) => Dialect::Pi,
            Opened::Claude(_) => Dialect::Claude,
            Opened::Codex(_) => Dialect::Codex,
        }
    }

    /// Entries in the tree.
    pub fn len(&self) -> usize {
        match self {
            Opened::Pi(s) => s.opened.tree.len(),
            Opened::Claude(s) => s.tree.len(),
            Opened::Codex(s) => s.tree.len(),
        }
    }

    /// Whether the tree has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How far the file is applied.
    pub fn position(&self) -> Position {
        match self {
            Opened::Pi(s) => s.opened.position,
            Opened::Claude(s) => s.position,
            Opened::Codex(s) => s.position,
        }
    }

    /// The file as it was when last read.
    pub fn stamp(&self) -> FileStamp {
        match self {
            Opened::Pi(s) => s.opened.stamp,
            Opened::Claude(s) => s.stamp,
            Opened::Codex(s) => s.stamp,
        }
    }

    /// Records the file's stamp (after a write, or to wait for the next change).
    pub fn set_stamp(&mut self, stamp: FileStamp) {
        match self {
            Opened::Pi(s) => s.opened.stamp = stamp,
            Opened::Claude(s) => s.stamp = stamp,
            Opened::Codex(s) => s.stamp = stamp,
        }
    }

    /// The unparsable unterminated last line as of the last read, if any.
    pub fn torn_tail(&self) -> Option<TornTail> {
        match self {
            Opened::Pi(s) => s.opened.torn_tail,
            Opened::Claude(s) => s.torn_tail,
            Opened::Codex(s) => s.torn_tail,
        }
    }

    /// The node an id argument names: that id, or a unique prefix of one ([`Tree::lookup`]).
    /// Errors: none or several ids begin with it.
    ///
    /// [`Tree::lookup`]: crate::core::tree::Tree::lookup
    pub fn find(&self, id: &str) -> Result<NodeIdx, UnknownId> {
        match self {
            Opened::Pi(s) => s.opened.tree.lookup(id),
            Opened::Claude(s) => s.tree.lookup(id),
            Opened::Codex(s) => s.tree.lookup(id),
        }
    }

    /// The default leaf: the leaf a request without one uses ([`Describe::default_leaf`]).
    pub fn default_leaf(&self) -> Option<NodeIdx> {
        match self {
            Opened::Pi(s) => Describe::default_leaf(&s.opened.tree),
            Opened::Claude(s) => Describe::default_leaf(&s.tree),
            Opened::Codex(s) => Describe::default_leaf(&s.tree),
        }
    }

    /// The leaf a request names: `Some(id)` is that entry, `None` the default leaf. Errors: an
    /// id that names no entry.
    pub fn resolve_leaf(&self, requested: Option<&str>) -> Result<Option<NodeIdx>, UnknownId> {
        UnknownId::resolve(requested, || self.default_leaf(), |id| self.find(id))
    }

    /// An entry's id.
    pub fn id(&self, n: NodeIdx) -> &str {
        match self {
            Opened::Pi(s) => s.opened.tree.node(n).entry.id.as_str(),
            Opened::Claude(s) => s.tree.node(n).entry.id.as_str(),
            Opened::Codex(s) => s.tree.node(n).entry.id.as_str(),
        }
    }

    /// Where an entry's line is.
    pub fn span(&self, n: NodeIdx) -> LineSpan {
        match self {
            Opened::Pi(s) => s.opened.tree.node(n).entry.span,
            Opened::Claude(s) => s.tree.node(n).entry.span,
            Opened::Codex(s) => s.tree.node(n).entry.span,
        }
    }

    /// Problems a lenient open skipped.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            Opened::Pi(s) => s.opened.tree.diagnostics(),
            Opened::Claude(s) => s.tree.diagnostics(),
            Opened::Codex(s) => s.tree.diagnostics(),
        }
    }

    /// The header line, for formats that have one: its span and its JSON text (a file
    /// rewritten in place is noticed by a changed header).
    pub fn header_line(&self) -> Option<(LineSpan, &str)> {
        match self {
            Opened::Pi(s) => {
                let h = s.opened.tree.header();
                Some((h.span, h.raw.get()))
            }
            Opened::Claude(_) | Opened::Codex(_) => None,
        }
    }

    /// The working directory the session says it ran in (pi's header `cwd`), if known.
    pub fn cwd(&self) -> Option<&str> {
        match self {
            Opened::Pi(s) => s.opened.tree.header().cwd.as_deref(),
            Opened::Claude(_) | Opened::Codex(_) => None,
        }
    }

    /// Whether the session's last turn looks unfinished (an agent may be mid-turn).
    pub fn turn_open(&self) -> bool {
        match self {
            Opened::Pi(s) => super::activity::turn_open(&s.opened.tree),
            Opened::Claude(_) | Opened::Codex(_) => false,
        }
    }

    /// Reads what `file` holds after the applied position and applies it ([`lines::apply_batch`]).
    /// Errors: reading the file failed (nothing changed).
    pub fn read_appended(&mut self, file: &File, stamp: FileStamp) -> io::Result<lines::Applied> {
        match self {
            Opened::Pi(s) => s.opened.read_appended(file, stamp),
            Opened::Claude(s) => s.read_appended(file, stamp),
            Opened::Codex(s) => s.read_appended(file, stamp),
        }
    }
}

/// The header of a pending session's empty stand-in tree: no id, the current version, no
/// line. Never shown (a pending session reports no header) and never written.
fn stand_in_header() -> pi::format::Header {
    pi::format::Header {
        id: String::new(),
        version: pi::format::CURRENT_VERSION,
        cwd: None,
        raw: serde_json::value::RawValue::NULL.to_owned(),
        span: LineSpan {
            line: 0,
            offset: 0,
            len: 0,
        },
    }
}
