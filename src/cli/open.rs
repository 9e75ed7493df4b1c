//! Opening a session file for a command: its dialect told from its first line, a pi session
//! read with a reader of its lines, and an id argument resolved to an entry. Shared by every
//! subcommand, below the modules that print.

use std::path::Path;

use super::error::CliError;
use crate::core::tree::{Mode, NodeIdx, TreeEntry};
use crate::dialect::Dialect;
use crate::dialect::pi::{Pi, Tree};
use crate::storage::reader::{self, FileLines, OpenError, OpenedSession};

/// A session read for printing: its tree and a reader of its lines.
pub struct Opened {
    /// The session as read.
    pub session: OpenedSession<Pi>,
    /// The file's lines, read again by position while printing.
    pub lines: FileLines,
}

/// Reads the pi session `file` strictly, or with `allow_corrupt` the way pi does (see
/// [`Mode`]), for `operation` (a command built for pi sessions only). Errors: `Open` (I/O, not
/// a file, corrupt), `UnsupportedForFormat` (a file of another format, named with `operation`).
pub fn open(file: &Path, allow_corrupt: bool, operation: &'static str) -> Result<Opened, CliError> {
    require_pi(file, operation)?;
    let session = reader::open_session::<Pi>(file, Mode::allowing_corrupt(allow_corrupt))?;
    with_lines(file, session)
}

/// The format of `file`, told from its first line ([`reader::sniff_file`]). Errors: `Open`
/// (I/O, not a file, an unknown format as corrupt).
pub fn dialect_of(file: &Path) -> Result<Dialect, CliError> {
    let opened = reader::open_regular(file)?;
    Ok(reader::sniff_file(file, &opened)?)
}

/// The refusal of `operation` on a file of `format`, which does not support it.
pub(crate) fn unsupported(file: &Path, format: Dialect, operation: &'static str) -> CliError {
    CliError::UnsupportedForFormat {
        path: file.to_owned(),
        format,
        operation,
    }
}

/// Refuses a file that is not a pi session for `operation` (a command built for pi only).
pub(crate) fn require_pi(file: &Path, operation: &'static str) -> Result<(), CliError> {
    match dialect_of(file)? {
        Dialect::Pi => Ok(()),
        format => Err(CliError::UnsupportedForFormat {
            path: file.to_owned(),
            format,
            operation,
        }),
    }
}

/// `session` with its file's lines, to be read again by position.
pub(crate) fn with_lines(file: &Path, session: OpenedSession<Pi>) -> Result<Opened, CliError> {
    Ok(Opened {
        session,
        lines: lines_of(file)?,
    })
}

/// A reader of `file`'s lines for one command: read ahead in blocks (a path is mostly in file
/// order).
pub(crate) fn lines_of(file: &Path) -> Result<FileLines, CliError> {
    Ok(FileLines::open(file)
        .map(FileLines::read_ahead)
        .map_err(|source| OpenError::Io {
            path: file.to_owned(),
            source,
        })?)
}

/// The leaf named by `--leaf`, or the default leaf (the last entry) without one. Errors:
/// [`CliError::UnknownEntry`] naming the file and the id.
pub fn resolve(tree: &Tree, file: &Path, id: Option<&str>) -> Result<Option<NodeIdx>, CliError> {
    tree.resolve_leaf(id)
        .map_err(|unknown| CliError::UnknownEntry {
            path: file.to_owned(),
            unknown,
            what: "leaf id",
        })
}

/// The entry an id argument names: that id, or a unique prefix of one ([`Tree::lookup`], pi
/// and Claude Code alike); `what` names the argument in the error.
pub fn find<E: TreeEntry>(
    tree: &crate::core::tree::Tree<E>,
    file: &Path,
    id: &str,
    what: &'static str,
) -> Result<NodeIdx, CliError> {
    tree.lookup(id).map_err(|unknown| CliError::UnknownEntry {
        path: file.to_owned(),
        unknown,
        what,
    })
}

/// Hands over what a one-shot command read, just before the process ends: the memory goes
/// back with the process instead of being freed node by node (a few percent of reading a
/// session of 100,000 entries; of a Claude Code context, its every block). Files are closed by
/// the exit all the same.
pub(crate) fn exiting_with<T>(read: T) {
    std::mem::forget(read);
}

/// What `context` and `explain` are asked about a Claude Code transcript or a Codex rollout
/// (their arguments, as the CLI's argument types give them).
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a> {
    /// The transcript.
    pub file: &'a Path,
    /// `--leaf`.
    pub leaf: Option<&'a str>,
    /// `--json`.
    pub json: bool,
    /// `--allow-corrupt`.
    pub allow_corrupt: bool,
    /// `--model`.
    pub model: Option<&'a str>,
}
