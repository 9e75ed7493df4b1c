//! Why a write was refused or failed: [`WriteError`], with the stable kind names the server maps
//! to JSON-RPC codes and the CLI to exit codes.

use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::core::diagnostics::Corruption;
use crate::core::tree::Stale;
use crate::dialect::pi::entries::EntryError;
use crate::dialect::pi::format::EntryId;
use crate::storage::publish::{PublishError, Taken};
use crate::storage::reader::OpenError;

/// Why a write was refused or failed. Session paths are named in every message.
#[derive(Debug, Error)]
pub enum WriteError {
    /// The session's format is read only (a Claude Code transcript): nothing is written.
    #[error(
        "{}: a {} session (format {}) is read only: sessiond does not write to it",
        path.display(),
        format.agent(),
        format.as_str()
    )]
    UnsupportedForFormat {
        /// The session file.
        path: PathBuf,
        /// The session's format.
        format: crate::dialect::Dialect,
    },
    /// The session file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The session file.
        path: PathBuf,
        /// The failed operation's error.
        source: io::Error,
    },
    /// The session is corrupt; nothing is written to it (use salvage).
    #[error("{}: {corruption}", path.display())]
    Corrupt {
        /// The session file.
        path: PathBuf,
        /// The first problem found (kind, line, offset, id).
        corruption: Corruption,
    },
    /// The writer's view is stale: the session's last entry is not `expectedLeafId`.
    #[error(
        "{}: conflict: expected leaf {}, resume leaf is {} ({} since)",
        path.display(),
        expected.as_deref().unwrap_or("null"),
        current_leaf.as_ref().map_or("null", EntryId::as_str),
        match added.len() { 1 => "1 entry added".to_owned(), n => format!("{n} entries added") }
    )]
    Conflict {
        /// The session file.
        path: PathBuf,
        /// The request's `expectedLeafId` (`None`: `null`, a session without entries).
        expected: Option<String>,
        /// The session's actual last entry in file order, read under the lock.
        current_leaf: Option<EntryId>,
        /// Entries after the expected leaf in file order (all entries added since this session
        /// was read when the expected leaf is unknown).
        added: Vec<EntryId>,
    },
    /// A writer seems to be mid-line (an unterminated tail younger than the grace period), or
    /// another sessiond writer held the lock too long. Retry.
    #[error("{}: busy: {reason} ({age_ms} ms)", path.display())]
    Busy {
        /// The session file.
        path: PathBuf,
        /// Age of the unterminated tail, or how long the lock was waited for, in milliseconds.
        age_ms: u64,
        /// What is busy (a writer mid-line, another sessiond holding the lock, ...).
        reason: &'static str,
    },
    /// An id the request names does not exist.
    #[error("{}: unknown entry id {id} ({role})", path.display())]
    UnknownEntry {
        /// The session file.
        path: PathBuf,
        /// The id that names no entry.
        id: String,
        /// What the id was given as (`parent`, `fork point`, ...).
        role: &'static str,
    },
    /// The entry to append is malformed.
    #[error("{}: invalid entry: {source}", path.display())]
    InvalidEntry {
        /// The session file.
        path: PathBuf,
        /// What is wrong with the entry.
        source: EntryError,
    },
    /// Fork `before` an entry that is not a user message.
    #[error("{}: entry {id} is not a user message; fork before needs one", path.display())]
    NotAUserMessage {
        /// The session file.
        path: PathBuf,
        /// The entry that is not a user message.
        id: String,
    },
    /// Only version-3 sessions are written to (pi migrates older ones in place when it resumes
    /// them; sessiond never rewrites a file): a fork is a version-3 file with the same path.
    #[error("{}: a version-{version} session is only read (sessiond writes labels, names and entries to version-3 files); fork it to a version-3 file first", path.display())]
    UnsupportedVersion {
        /// The session file.
        path: PathBuf,
        /// The header's `version` (1 when absent, as pi reads it).
        version: u32,
    },
    /// The file shrank or was replaced since the session was read; reload it.
    #[error("{}: the file changed under the session ({detail}); reload it", path.display())]
    Replaced {
        /// The session file.
        path: PathBuf,
        /// What changed (shrank, replaced, a line rewritten).
        detail: &'static str,
    },
    /// A new session file's id is taken: by another request creating it, or on disk.
    #[error(transparent)]
    Taken(#[from] Taken),
    /// A requested session id is not valid for the format (pi's `assertValidSessionId`; a
    /// Claude Code session id is a UUID).
    #[error("invalid session id {id:?}: {rule}")]
    InvalidSessionId {
        /// The requested id, as given.
        id: String,
        /// What the format takes.
        rule: &'static str,
    },
}

impl WriteError {
    /// The stable machine name of the error kind (see the module docs).
    pub fn kind(&self) -> &'static str {
        match self {
            WriteError::Io { .. } => "io",
            WriteError::Corrupt { .. } => "corrupt",
            WriteError::Conflict { .. } => "conflict",
            WriteError::Busy { .. } => "busy",
            WriteError::UnknownEntry { .. } => "unknownEntry",
            WriteError::InvalidEntry { .. } => "invalidEntry",
            WriteError::NotAUserMessage { .. } => "notAUserMessage",
            WriteError::UnsupportedVersion { .. } => "unsupportedVersion",
            WriteError::Replaced { .. } => "replaced",
            WriteError::Taken(Taken::Reserved { .. }) => "reserved",
            WriteError::Taken(Taken::Exists { .. }) => "exists",
            WriteError::InvalidSessionId { .. } => "invalidSessionId",
            WriteError::UnsupportedForFormat { .. } => "unsupportedForFormat",
        }
    }

    pub(super) fn io(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
        move |source| WriteError::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// The `conflict` error for a stale view of the session at `path` (see [`Tree::fence`]).
    ///
    /// [`Tree::fence`]: crate::core::tree::Tree::fence
    pub fn conflict(path: &Path, stale: Stale) -> Self {
        WriteError::Conflict {
            path: path.to_owned(),
            expected: stale.expected,
            current_leaf: stale.current_leaf,
            added: stale.added,
        }
    }

    pub(super) fn from_open(e: OpenError) -> Self {
        match e {
            OpenError::Io { path, source } => WriteError::Io { path, source },
            OpenError::NotAFile { path } => WriteError::Io {
                path,
                source: io::Error::other("not a regular file"),
            },
            OpenError::NotInRoots { path } => WriteError::Io {
                path,
                source: io::Error::other(
                    "not a regular file inside the session roots (a symbolic link, or reached through one)",
                ),
            },
            OpenError::Corrupt { path, corruption } => WriteError::Corrupt { path, corruption },
            OpenError::Pending { path, age_ms } => WriteError::Busy {
                path,
                age_ms,
                reason: "the file has no session header yet (being created)",
            },
        }
    }

    pub(super) fn from_publish(e: PublishError) -> Self {
        match e {
            PublishError::Taken(taken) => WriteError::Taken(taken),
            PublishError::Io { path, source } => WriteError::Io { path, source },
            PublishError::Verify { path, source } => WriteError::Io {
                path,
                source: io::Error::other(source.to_string()),
            },
        }
    }

    pub(super) fn from_entry(path: &Path, e: EntryError) -> Self {
        match e {
            EntryError::UnknownEntry { id, role } => WriteError::UnknownEntry {
                path: path.to_owned(),
                id,
                role,
            },
            other => WriteError::InvalidEntry {
                path: path.to_owned(),
                source: other,
            },
        }
    }
}
