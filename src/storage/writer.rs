//! Writing sessions: appends under an advisory lock with fencing, torn-tail repair, forks and
//! salvage into new files. The only code that changes session files.
//!
//! # The API the session owner task calls
//!
//! The owner task of an open session holds its [`OpenedSession`] (from
//! [`reader::open_session`] in strict mode, or [`open_for_write`]) and one [`Reservations`] shared
//! by the whole daemon. Each JSON-RPC method is one call:
//!
//! | method | call |
//! | --- | --- |
//! | `session/append {path, entry, parentId?, expectedLeafId}` | [`write_entry`] with [`Change::Append`] |
//! | `session/label {path, targetId, label\|null, expectedLeafId}` | [`write_entry`] with [`Change::Label`] |
//! | `session/setName {path, name, expectedLeafId}` | [`write_entry`] with [`Change::SetName`] |
//! | `session/branch {path, fromId\|null, summary?, details?, expectedLeafId}` | [`write_entry`] with [`Change::Branch`] |
//! | `session/compact {path, leafId?, expectedLeafId, ...}` | [`write_prebuilt`] with the compaction entry |
//! | `session/fork {path, entryId, position, targetDir?}` | [`fork`] (reads only; no lock) |
//! | `session/salvage {path}` | [`salvage`] (reads the source leniently; writes a new file) |
//!
//! `expectedLeafId` is the writer's view: the id of the session's last entry in file order as
//! the client last saw it (`None`/`null` for a session with no entries). [`write_entry`] updates
//! the session in place (new entries read from the file, the written entry, the new offset), so
//! the owner can push `session/didChange` from [`Written::added`] and [`Written::id`].
//!
//! Every error is a [`WriteError`]; its [`WriteError::kind`] is the stable name the server maps
//! to a JSON-RPC code, and the CLI to an exit code: `conflict` (stale `expectedLeafId`: names
//! the current leaf and the entries added since), `busy` (a torn or unterminated tail younger
//! than the grace period, or the lock held too long: retry), `corrupt` (never written to; offer
//! salvage), `unknownEntry`, `invalidEntry`, `notAUserMessage`, `unsupportedVersion` (only
//! version-3 files are appended to; fork an older file first), `reserved`/`exists` (a new file's
//! id is taken), `replaced` (the file shrank or is another file now: reload), `io`.
//!
//! # The append protocol (SPEC §4)
//!
//! Under an exclusive `flock` ([`super::lock`]): check the file is still the one the session was
//! read from; read any new tail from the last applied offset and apply it to the tree (strict);
//! classify an unterminated last line (young: `busy`; old and torn: repair; old and complete:
//! terminated by our write); check the fencing token; build and validate the entry; repair a torn
//! tail; then one `write` of the complete line(s) ending in `\n`; then read back from the old
//! offset so the tree holds exactly what the file holds (including lines that an unlocked writer
//! such as pi appended meanwhile). A refused or failed write changes neither the file nor the
//! tree, apart from applying lines that were already in the file.
//!
//! pi appends without any lock (plain `O_APPEND` writes of whole lines). Our appends are also
//! `O_APPEND` and single-`write`, so lines never interleave; but fencing cannot stop pi from
//! appending between our check and our write: the result is still a valid file with two children.
//!
//! # Torn-tail repair
//!
//! Only here, under the lock: a final line without a newline that is not valid JSON, unchanged
//! (file mtime) for [`WriteOptions::torn_grace`], is copied to a sidecar file
//! `<session>.torn-<offset>.bak` (`-1`, `-2`... if taken; never overwritten; fsynced), then the
//! session is truncated to its last complete line, right before our append. The file size is
//! re-checked just before truncating, so bytes that arrived after our read are never cut.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::value::RawValue;
use thiserror::Error;
use uuid::Uuid;

use super::lock::{self, LockError};
use super::publish::{self, PublishError, Reservations};
use super::reader::{self, FileLines, FileStamp, LineSplitter, OpenError, OpenedSession, TornTail};
use crate::core::diagnostics::{Corruption, CorruptionKind, Diagnostic};
use crate::core::entries::{self, EntryContext, EntryError, NewEntry, ParentChoice};
use crate::core::fork::{self, ForkError, LineEdit, NewHeader, Position};
use crate::core::format::{self, CURRENT_VERSION, EntryId, EntryKind, Expect, LineSpan};
use crate::core::raw_object::RawObject;
use crate::core::render::LineSource;
use crate::core::timestamp;
use crate::core::tree::{Mode, NodeIdx, Tree};

/// Tunables of the write path.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// How long an unterminated tail must stay unchanged before it is repaired (default 2 s).
    pub torn_grace: Duration,
    /// How long to wait for another sessiond writer's lock before answering `busy` (default 5 s).
    pub lock_timeout: Duration,
    /// `fdatasync` after each append. Off by default: pi does not sync its appends either, a
    /// torn tail after a power loss is repairable, and syncing costs most of the throughput.
    pub sync: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            torn_grace: Duration::from_secs(2),
            lock_timeout: Duration::from_secs(5),
            sync: false,
        }
    }
}

/// Why a write was refused or failed. Session paths are named in every message.
#[derive(Debug, Error)]
pub enum WriteError {
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
        "{}: conflict: expected leaf {}, current leaf is {} ({} entries added since)",
        path.display(),
        expected.as_deref().unwrap_or("null"),
        current_leaf.as_ref().map_or("null", EntryId::as_str),
        added.len()
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
    /// Only version-3 sessions are appended to.
    #[error("{}: version {version} sessions are not appended to; fork it to get a version-3 file", path.display())]
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
    /// A new session file's `{cwd, id}` is being created by another request.
    #[error("session id {id} in {cwd} is being created by another request")]
    Reserved {
        /// The header `cwd` of the session being created.
        cwd: String,
        /// The session id being created.
        id: String,
    },
    /// A new session file's id or name is taken on disk.
    #[error("{}: a session file with id {id} already exists", path.display())]
    Exists {
        /// The existing file with that id.
        path: PathBuf,
        /// The session id that is taken.
        id: String,
    },
    /// A requested session id is not valid (pi's `assertValidSessionId`).
    #[error(
        "invalid session id {id:?}: use letters, digits, '.', '_' and '-', starting and ending with a letter or digit"
    )]
    InvalidSessionId {
        /// The requested id, as given.
        id: String,
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
            WriteError::Reserved { .. } => "reserved",
            WriteError::Exists { .. } => "exists",
            WriteError::InvalidSessionId { .. } => "invalidSessionId",
        }
    }

    fn io(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
        move |source| WriteError::Io {
            path: path.to_owned(),
            source,
        }
    }

    fn from_open(e: OpenError) -> Self {
        match e {
            OpenError::Io { path, source } => WriteError::Io { path, source },
            OpenError::NotAFile { path } => WriteError::Io {
                path,
                source: io::Error::other("not a regular file"),
            },
            OpenError::Corrupt { path, corruption } => WriteError::Corrupt { path, corruption },
        }
    }

    fn from_publish(e: PublishError) -> Self {
        match e {
            PublishError::Reserved { cwd, id } => WriteError::Reserved { cwd, id },
            PublishError::Exists { path, id } => WriteError::Exists { path, id },
            PublishError::Io { path, source } => WriteError::Io { path, source },
            PublishError::Verify { path, source } => WriteError::Io {
                path,
                source: io::Error::other(source.to_string()),
            },
        }
    }

    fn from_entry(path: &Path, e: EntryError) -> Self {
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

/// Opens a session for writing: a strict read (corruption refuses with `Corrupt`).
pub fn open_for_write(path: &Path) -> Result<OpenedSession, WriteError> {
    reader::open_session(path, Mode::Strict).map_err(WriteError::from_open)
}

/// One change to append to a session.
#[derive(Clone, Copy, Debug)]
pub enum Change<'a> {
    /// Set (`Some`) or clear (`None`) the label of an entry (pi `appendLabelChange`).
    Label {
        /// The entry whose label changes.
        target_id: &'a str,
        /// The new label; `None` clears it.
        label: Option<&'a str>,
    },
    /// Name the session (pi `appendSessionInfo`).
    SetName {
        /// The name as given; the builder normalizes it as pi does.
        name: &'a str,
    },
    /// Start a branch at `from_id` (`None`: a new root) with a summary of the branch left
    /// (pi `branchWithSummary`). `details` is raw JSON.
    Branch {
        /// The entry the branch starts from; `None`: before the first entry.
        from_id: Option<&'a str>,
        /// The summary stored in the `branch_summary` entry.
        summary: &'a str,
        /// Stored as the entry's `details`, byte for byte.
        details: Option<&'a RawValue>,
    },
    /// A front-end's entry as JSON text; sessiond fills `id`, `parentId`, `timestamp`.
    Append {
        /// The entry object as JSON text; its field bytes are kept exactly.
        entry_json: &'a str,
        /// Where the entry goes: under the session's last entry, a given id, or as a new root.
        parent: ParentChoice<'a>,
    },
}

/// A torn tail moved aside before an append.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repair {
    /// The sidecar file holding the torn bytes.
    pub sidecar: PathBuf,
    /// Where the torn bytes started in the session file, and how many there were.
    pub offset: u64,
    /// Number of torn bytes moved aside.
    pub len: u64,
}

/// The result of an append.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    /// The new entry's id.
    pub id: EntryId,
    /// The new entry's `parentId`.
    pub parent_id: Option<EntryId>,
    /// Byte offset of the new line in the file.
    pub offset: u64,
    /// The session's last entry after the write (ours unless an unlocked writer appended since).
    pub leaf_id: Option<EntryId>,
    /// Entries found in the file before the write (appended by others since the last read).
    pub added: Vec<EntryId>,
    /// Entries found after ours when reading back (appended by unlocked writers meanwhile).
    pub added_after: Vec<EntryId>,
    /// The torn tail moved aside, if one was repaired.
    pub repaired: Option<Repair>,
    /// File length after the write: the session's new revision.
    pub applied_len: u64,
}

/// Whose view a write is fenced by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected<'a> {
    /// The session's last entry in file order must be this id (`None`: no entries yet).
    Leaf(Option<&'a str>),
    /// No fencing: for a command-line run that read the file under the lock itself (`sessiond
    /// compact` without `--expected-leaf`). The daemon always fences.
    Unfenced,
}

/// Appends one change to the session at `path`, fenced by `expected_leaf` (see the module docs).
///
/// `session` must have been read from `path` in strict mode; it is brought up to date with the
/// file and then holds the new entry. Errors: every [`WriteError`] kind but `reserved`/`exists`.
pub fn write_entry(
    path: &Path,
    session: &mut OpenedSession,
    change: Change<'_>,
    expected_leaf: Option<&str>,
    opts: &WriteOptions,
) -> Result<Written, WriteError> {
    let (written, ()) = write_with(
        path,
        session,
        Expected::Leaf(expected_leaf),
        opts,
        |tree: &Tree, _: &dyn LineSource| {
            let now = timestamp::now_iso();
            let mut uuids = Uuid::new_v4;
            let leaf = tree.default_leaf().map(|n| tree.node(n).entry.id.clone());
            let mut cx = EntryContext {
                tree,
                leaf: leaf.as_ref(),
                timestamp: &now,
                uuids: &mut uuids,
            };
            let entry = match change {
                Change::Label { target_id, label } => entries::label(&mut cx, target_id, label),
                Change::SetName { name } => entries::session_info(&mut cx, name),
                Change::Branch {
                    from_id,
                    summary,
                    details,
                } => entries::branch_summary(&mut cx, from_id, summary, details),
                Change::Append { entry_json, parent } => {
                    entries::append(&mut cx, entry_json, parent)
                }
            }
            .map_err(|e| WriteError::from_entry(path, e))?;
            Ok::<_, WriteError>((Some(entry), ()))
        },
    )?;
    written.ok_or_else(|| WriteError::Io {
        path: path.to_owned(),
        source: io::Error::other("the entry builder produced no entry"),
    })
}

/// Appends an entry that the caller builds under the lock, for entries whose content depends
/// on the file as it is at the moment of writing and that carry their own id: a compaction
/// (pi's `appendCompaction` line with the id it chose, its cut point computed from the fresh
/// tree). Same protocol as [`write_entry`]: lock, catch up (strict), fencing by `expected`,
/// torn-tail repair, one `write`, read back.
///
/// `build` sees the caught-up tree and a [`LineSource`] on the locked file, and returns the
/// entry to append (or `None` to write nothing, e.g. "nothing to compact") plus a value handed
/// back to the caller. The entry is checked before anything is written: one line of JSON that
/// reads back as a version-3 entry with the [`NewEntry`]'s `id` and `parentId`, an id the
/// session does not use, and a parent that exists (`InvalidEntry`, `UnknownEntry`).
/// `build`'s own errors are returned as they are; nothing is written then.
pub fn write_prebuilt<T, E: From<WriteError>>(
    path: &Path,
    session: &mut OpenedSession,
    expected: Expected<'_>,
    opts: &WriteOptions,
    build: impl FnOnce(&Tree, &dyn LineSource) -> Result<(Option<NewEntry>, T), E>,
) -> Result<(Option<Written>, T), E> {
    write_with(path, session, expected, opts, |tree, lines| {
        let (entry, out) = build(tree, lines)?;
        if let Some(e) = &entry {
            check_prebuilt(path, tree, e)?;
        }
        Ok((entry, out))
    })
}

/// A caller-built entry must be exactly what it claims to be.
fn check_prebuilt(path: &Path, tree: &Tree, entry: &NewEntry) -> Result<(), WriteError> {
    let invalid = |detail: String| WriteError::InvalidEntry {
        path: path.to_owned(),
        source: EntryError::NotAnObject { detail },
    };
    if entry.line.contains(['\n', '\r']) {
        return Err(invalid(format!(
            "entry {} is not a single line of JSON",
            entry.id
        )));
    }
    let span = LineSpan {
        line: 0,
        offset: 0,
        len: 0,
    };
    let parsed = match format::parse_line(entry.line.as_bytes(), span, Expect::Entry { version: 3 })
    {
        Ok(format::Line::Entry(e)) => e,
        Ok(_) => return Err(invalid(format!("entry {} reads as a header", entry.id))),
        Err(p) => return Err(invalid(format!("entry {}: {}", entry.id, p.detail))),
    };
    if parsed.id != entry.id || parsed.parent_id != entry.parent_id {
        return Err(invalid(format!(
            "entry {}: the line says id {} and parentId {}",
            entry.id,
            parsed.id,
            parsed.parent_id.as_ref().map_or("null", EntryId::as_str)
        )));
    }
    if tree.find(entry.id.as_str()).is_some() {
        return Err(WriteError::from_entry(
            path,
            EntryError::DuplicateId {
                id: entry.id.to_string(),
            },
        ));
    }
    if let Some(p) = &entry.parent_id
        && tree.find(p.as_str()).is_none()
    {
        return Err(WriteError::UnknownEntry {
            path: path.to_owned(),
            id: p.to_string(),
            role: "parent",
        });
    }
    Ok(())
}

/// The append protocol (module docs) around an entry built by `build` on the fresh tree.
fn write_with<T, E: From<WriteError>>(
    path: &Path,
    session: &mut OpenedSession,
    expected: Expected<'_>,
    opts: &WriteOptions,
    build: impl FnOnce(&Tree, &dyn LineSource) -> Result<(Option<NewEntry>, T), E>,
) -> Result<(Option<Written>, T), E> {
    let version = session.tree.header().version;
    if version != CURRENT_VERSION {
        return Err(WriteError::UnsupportedVersion {
            path: path.to_owned(),
            version,
        }
        .into());
    }
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(path)
        .map_err(WriteError::io(path))?;
    let _lock = lock::lock_exclusive(&file, opts.lock_timeout).map_err(|e| match e {
        LockError::TimedOut { waited } => WriteError::Busy {
            path: path.to_owned(),
            age_ms: waited.as_millis() as u64,
            reason: "another sessiond writer holds the lock",
        },
        LockError::Io(source) => WriteError::Io {
            path: path.to_owned(),
            source,
        },
    })?;

    let before_len = session.tree.len();
    let tail = catch_up(&file, path, session, opts)?;
    let added: Vec<EntryId> = tree_ids_from(&session.tree, before_len);

    // Fencing.
    let current = session
        .tree
        .default_leaf()
        .map(|n| session.tree.node(n).entry.id.clone());
    if let Expected::Leaf(expected_leaf) = expected
        && current.as_ref().map(EntryId::as_str) != expected_leaf
    {
        let since = match expected_leaf.and_then(|id| session.tree.find(id)) {
            Some(n) => tree_ids_from(&session.tree, n as usize + 1),
            None => added,
        };
        return Err(WriteError::Conflict {
            path: path.to_owned(),
            expected: expected_leaf.map(str::to_owned),
            current_leaf: current,
            added: since,
        }
        .into());
    }

    // Build and validate the entry before touching the file.
    let lines = FileLines::new(file.try_clone().map_err(WriteError::io(path))?);
    let (entry, out) = build(&session.tree, &lines)?;
    let Some(entry) = entry else {
        return Ok((None, out));
    };

    let repaired = match &tail {
        Tail::Torn { offset, bytes } => Some(repair_torn(&file, path, *offset, bytes)?),
        Tail::Clean { .. } => None,
    };
    if repaired.is_some() {
        session.torn_tail = None;
    }
    let needs_newline = matches!(
        tail,
        Tail::Clean {
            needs_newline: true
        }
    );

    let mut buf = Vec::with_capacity(entry.line.len() + 2);
    if needs_newline {
        buf.push(b'\n');
    }
    buf.extend_from_slice(entry.line.as_bytes());
    buf.push(b'\n');
    let start = file.metadata().map_err(WriteError::io(path))?.len();
    write_once(&file, path, &buf, start)?;
    if opts.sync {
        file.sync_data().map_err(WriteError::io(path))?;
    }

    // Read back what the file now holds: our line, and anything an unlocked writer added.
    if needs_newline {
        // Our leading newline ends the last line, which the tree already holds.
        session.applied_len += 1;
    }
    let count_before_ours = session.tree.len();
    catch_up_after_write(&file, path, session)?;
    let ours = session.tree.find(entry.id.as_str());
    let offset = ours.map_or(start, |n| session.tree.node(n).entry.span.offset);
    let after_ours = ours.map_or(count_before_ours, |n| n as usize + 1);
    let added_before_ours: Vec<EntryId> = session.tree.nodes()
        [count_before_ours..ours.map_or(count_before_ours, |n| n as usize)]
        .iter()
        .map(|n| n.entry.id.clone())
        .collect();
    let mut added = added;
    added.extend(added_before_ours);
    let written = Written {
        id: entry.id,
        parent_id: entry.parent_id,
        offset,
        leaf_id: session
            .tree
            .default_leaf()
            .map(|n| session.tree.node(n).entry.id.clone()),
        added,
        added_after: tree_ids_from(&session.tree, after_ours),
        repaired,
        applied_len: session.applied_len,
    };
    Ok((Some(written), out))
}

fn tree_ids_from(tree: &Tree, from: usize) -> Vec<EntryId> {
    tree.nodes()
        .get(from..)
        .unwrap_or(&[])
        .iter()
        .map(|n| n.entry.id.clone())
        .collect()
}

/// What the end of the file looks like after catching up.
enum Tail {
    /// Ends in a complete line; `needs_newline` when the last entry has no `\n` after it.
    Clean { needs_newline: bool },
    /// An old torn tail at `offset` (to be repaired before appending).
    Torn { offset: u64, bytes: Vec<u8> },
}

/// Reads what was appended since the session's last applied offset and applies it (strict),
/// then classifies an unterminated final line. Errors: `Replaced`, `Corrupt`, `Busy`, `Io`.
fn catch_up(
    file: &File,
    path: &Path,
    session: &mut OpenedSession,
    opts: &WriteOptions,
) -> Result<Tail, WriteError> {
    let meta = file.metadata().map_err(WriteError::io(path))?;
    check_identity(path, session, &meta)?;
    let pending = read_lines(file, path, session, meta.len())?;
    session.stamp = FileStamp::of(file).map_err(WriteError::io(path))?;
    let Some((bytes, span)) = pending else {
        let needs_newline = session.applied_len > 0 && {
            let mut last = [0u8; 1];
            file.read_exact_at(&mut last, session.applied_len - 1)
                .map_err(WriteError::io(path))?;
            last[0] != b'\n'
        };
        return Ok(Tail::Clean { needs_newline });
    };
    let age = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .unwrap_or_default();
    let version = session.tree.header().version;
    let complete = reader::is_blank(&bytes)
        || !matches!(
            format::parse_line(&bytes, span, Expect::Entry { version }),
            Err(p) if p.kind == format::ProblemKind::InvalidJson
        );
    if age < opts.torn_grace {
        return Err(WriteError::Busy {
            path: path.to_owned(),
            age_ms: age.as_millis() as u64,
            reason: if complete {
                "the last line has no newline yet"
            } else {
                "the last line is incomplete and still young"
            },
        });
    }
    if complete {
        // A whole entry without its newline, unchanged for the grace period: take it as the
        // reader does, and let our write end it with the newline.
        reader::apply_entry_line(&mut session.tree, &bytes, span)
            .and_then(|()| session.tree.settle())
            .map_err(|corruption| WriteError::Corrupt {
                path: path.to_owned(),
                corruption,
            })?;
        session.applied_len = span.offset + bytes.len() as u64;
        session.applied_lines = span.line;
        return Ok(Tail::Clean {
            needs_newline: true,
        });
    }
    Ok(Tail::Torn {
        offset: span.offset,
        bytes,
    })
}

fn check_identity(
    path: &Path,
    session: &OpenedSession,
    meta: &std::fs::Metadata,
) -> Result<(), WriteError> {
    let replaced = |detail| WriteError::Replaced {
        path: path.to_owned(),
        detail,
    };
    if meta.dev() != session.stamp.dev || meta.ino() != session.stamp.ino {
        return Err(replaced("it is another file now"));
    }
    if meta.len() < session.applied_len {
        return Err(replaced("it shrank"));
    }
    Ok(())
}

/// Applies the complete lines between the session's applied offset and `end`; returns the
/// unterminated rest, if any. On corruption the session keeps the lines before the bad one.
fn read_lines(
    file: &File,
    path: &Path,
    session: &mut OpenedSession,
    end: u64,
) -> Result<Option<(Vec<u8>, LineSpan)>, WriteError> {
    let mut splitter = LineSplitter::new(session.applied_len, session.applied_lines);
    let mut good = (session.applied_len, session.applied_lines);
    let mut pos = session.applied_len;
    let mut buf = vec![0u8; 1 << 16];
    let tree = &mut session.tree;
    let mut result = Ok(());
    while pos < end && result.is_ok() {
        let want = usize::try_from(end - pos).map_or(buf.len(), |r| r.min(buf.len()));
        let n = file
            .read_at(&mut buf[..want], pos)
            .map_err(WriteError::io(path))?;
        if n == 0 {
            break;
        }
        pos += n as u64;
        result = splitter.feed(&buf[..n], |bytes, span| {
            reader::apply_entry_line(tree, bytes, span)?;
            good = (span.offset + u64::from(span.len) + 1, span.line);
            Ok::<(), Corruption>(())
        });
    }
    (session.applied_len, session.applied_lines) = good;
    let corrupt = |corruption| WriteError::Corrupt {
        path: path.to_owned(),
        corruption,
    };
    result.map_err(corrupt)?;
    session.tree.settle().map_err(corrupt)?;
    Ok(splitter.finish())
}

fn catch_up_after_write(
    file: &File,
    path: &Path,
    session: &mut OpenedSession,
) -> Result<(), WriteError> {
    let end = file.metadata().map_err(WriteError::io(path))?.len();
    // Lines after ours that an unlocked writer is still writing stay pending, as for a reader.
    let _pending = read_lines(file, path, session, end)?;
    session.stamp = FileStamp::of(file).map_err(WriteError::io(path))?;
    Ok(())
}

/// One `write(2)` of `buf` at the end of the file (`O_APPEND`). A short write is rolled back when
/// nothing else was appended after it, so the file never keeps half of our line.
fn write_once(file: &File, path: &Path, buf: &[u8], start: u64) -> Result<(), WriteError> {
    let mut f = file;
    let result = loop {
        match f.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    match result {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(n) => {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if len == start + n as u64 {
                let _ = file.set_len(start);
            }
            Err(WriteError::Io {
                path: path.to_owned(),
                source: io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("short write: {n} of {} bytes", buf.len()),
                ),
            })
        }
        Err(source) => Err(WriteError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Moves an old torn tail aside: sidecar written and synced, size re-checked, file truncated.
fn repair_torn(file: &File, path: &Path, offset: u64, bytes: &[u8]) -> Result<Repair, WriteError> {
    let base = path.as_os_str().to_string_lossy().into_owned();
    let mut n = 0u32;
    let (sidecar, mut out) = loop {
        let candidate = if n == 0 {
            PathBuf::from(format!("{base}.torn-{offset}.bak"))
        } else {
            PathBuf::from(format!("{base}.torn-{offset}-{n}.bak"))
        };
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(f) => break (candidate, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(source) => {
                return Err(WriteError::Io {
                    path: candidate,
                    source,
                });
            }
        }
    };
    out.write_all(bytes)
        .and_then(|()| out.sync_all())
        .map_err(WriteError::io(&sidecar))?;
    let len = file.metadata().map_err(WriteError::io(path))?.len();
    if len != offset + bytes.len() as u64 {
        // Someone appended after our read: the tail is alive after all. The sidecar stays (it
        // holds a copy, nothing was removed); the caller retries.
        return Err(WriteError::Busy {
            path: path.to_owned(),
            age_ms: 0,
            reason: "the torn tail changed while it was being repaired",
        });
    }
    file.set_len(offset)
        .and_then(|()| file.sync_data())
        .map_err(WriteError::io(path))?;
    tracing::info!(
        file = %path.display(),
        offset,
        len = bytes.len(),
        sidecar = %sidecar.display(),
        "moved a torn tail aside"
    );
    Ok(Repair {
        sidecar,
        offset,
        len: bytes.len() as u64,
    })
}

// ---------------------------------------------------------------------------------------------
// New files: fork and salvage.

/// A fork request (`session/fork`).
#[derive(Clone, Copy, Debug)]
pub struct ForkRequest<'a> {
    /// The entry the fork is cut at.
    pub entry_id: &'a str,
    /// Whether the new session ends with the entry or at its parent (pi's `before`, to ask again).
    pub position: Position,
    /// Directory of the new file; default: the source's directory.
    pub target_dir: Option<&'a Path>,
    /// The new session id; default: a new UUIDv7 (pi's `createSessionId`).
    pub session_id: Option<&'a str>,
}

/// The result of a fork.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forked {
    /// The new session file.
    pub path: PathBuf,
    /// The new file's header `id`.
    pub session_id: String,
    /// The new file's last entry.
    pub leaf_id: Option<EntryId>,
    /// Number of path entries copied.
    pub entry_count: usize,
    /// Label entries on the path that were left out (pi 1.6.0 `createBranchedSession` re-creates
    /// labels after the path instead).
    pub dropped_labels: Vec<EntryId>,
    /// Ids of the label entries re-created after the path, one per labelled kept entry.
    pub new_labels: Vec<EntryId>,
    /// Entries whose line was re-serialized.
    pub rewritten: Vec<EntryId>,
}

/// Forks the session at `path` (already read into `tree`, strictly) into a new file; the
/// source is only read. Errors: `UnknownEntry`, `NotAUserMessage`, `InvalidSessionId`,
/// `Reserved`, `Exists`, `Replaced` (a line changed under us), `Io`.
pub fn fork(
    path: &Path,
    tree: &Tree,
    req: ForkRequest<'_>,
    reservations: &Reservations,
) -> Result<Forked, WriteError> {
    let lines = FileLines::open(path).map_err(WriteError::io(path))?;
    let session_id = new_session_id(req.session_id)?;
    let now = timestamp::now_iso();
    let header = RawObject::parse(tree.header().raw.get().as_bytes()).unwrap_or_default();
    let cwd = header.get("cwd");
    let source = absolute(path);
    let new_header = NewHeader {
        id: &session_id,
        timestamp: &now,
        cwd,
        parent_session: Some(&source.to_string_lossy()),
    };
    let plan = fork::plan_fork(
        tree,
        &lines,
        req.entry_id,
        req.position,
        &new_header,
        &mut Uuid::new_v4,
    )
    .map_err(|e| match e {
        ForkError::UnknownEntry { id } => WriteError::UnknownEntry {
            path: path.to_owned(),
            id,
            role: "fork point",
        },
        ForkError::NotAUserMessage { id } => WriteError::NotAUserMessage {
            path: path.to_owned(),
            id,
        },
        ForkError::Io { source, .. } => WriteError::Io {
            path: path.to_owned(),
            source,
        },
        ForkError::Changed { .. } => WriteError::Replaced {
            path: path.to_owned(),
            detail: "a line changed since it was read",
        },
    })?;
    let dir = destination_dir(path, req.target_dir);
    let cwd_text = header
        .get_str("cwd")
        .map(|c| c.into_owned())
        .unwrap_or_default();
    let _reservation = reservations
        .reserve(&cwd_text, &session_id)
        .map_err(WriteError::from_publish)?;
    let name = publish::session_file_name(&now, &session_id);
    let out = publish::publish_new(&dir, &name, &session_id, &plan.lines)
        .map_err(WriteError::from_publish)?;
    Ok(Forked {
        path: out,
        session_id,
        leaf_id: plan.leaf_id,
        entry_count: plan.path_ids.len(),
        dropped_labels: plan.dropped_labels,
        new_labels: plan.new_labels,
        rewritten: plan.rewritten,
    })
}

fn destination_dir(source: &Path, target: Option<&Path>) -> PathBuf {
    match target {
        Some(d) => d.to_owned(),
        None => match source.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        },
    }
}

/// A requested session id checked as pi's `assertValidSessionId`, or a new UUIDv7.
fn new_session_id(requested: Option<&str>) -> Result<String, WriteError> {
    let Some(id) = requested else {
        return Ok(Uuid::now_v7().to_string());
    };
    let ok_end = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let valid = ok_end(id.chars().next())
        && ok_end(id.chars().last())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(id.to_owned())
    } else {
        Err(WriteError::InvalidSessionId { id: id.to_owned() })
    }
}

/// The absolute, lexically normalized path (Node's `path.resolve`; symlinks are not followed).
fn absolute(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// One line left out of a salvaged file.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    /// 1-based line number and byte offset in the source.
    pub line: u32,
    /// Byte offset of the line in the source.
    pub offset: u64,
    /// `invalidJson`, `notAnObject`, `invalidEntry`, `duplicateId`, `tornTail`...
    pub kind: String,
    /// The line's entry id, when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What was wrong with the line, naming the problem.
    pub message: String,
}

/// An entry whose parent changed in the salvaged file.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reattached {
    /// The reattached entry.
    pub id: EntryId,
    /// The parent the source names (missing or dropped).
    pub was: Option<String>,
    /// The nearest surviving ancestor, or `None` when it became a root.
    pub now: Option<EntryId>,
}

/// The result of a salvage.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Salvaged {
    /// The new session file (the source is untouched).
    pub path: PathBuf,
    /// The new file's header `id`.
    pub session_id: String,
    /// Entries written.
    pub kept: usize,
    /// Lines left out of the new file, in source order.
    pub dropped: Vec<Dropped>,
    /// Entries whose parent became their nearest surviving ancestor.
    pub reattached: Vec<Reattached>,
}

/// Writes the readable part of a corrupt (or clean) session into a NEW version-3 file; the
/// source stays byte-identical. Kept: every entry a lenient read keeps (as pi keeps them), the
/// later of two entries with one id (pi's lookups find the later one). Each kept entry's parent
/// is the nearest surviving ancestor: a dropped line that still names its own `id` and
/// `parentId` is stepped over; a parent never seen makes the entry a root; so does a cycle.
/// Errors: `Corrupt` when there is no usable header, `Reserved`/`Exists`/`Io` as for forks.
pub fn salvage(
    path: &Path,
    target_dir: Option<&Path>,
    reservations: &Reservations,
) -> Result<Salvaged, WriteError> {
    let session = reader::open_session(path, Mode::Lenient).map_err(WriteError::from_open)?;
    let tree = &session.tree;
    let source = FileLines::open(path).map_err(WriteError::io(path))?;
    let version = tree.header().version;

    let mut dropped: Vec<Dropped> = tree
        .diagnostics()
        .iter()
        .filter_map(|d| match d {
            Diagnostic::Corrupt { corruption: c, .. }
                if c.kind != CorruptionKind::DuplicateId
                    && c.kind != CorruptionKind::MissingParent
                    && c.kind != CorruptionKind::ParentCycle =>
            {
                Some(Dropped {
                    line: c.line,
                    offset: c.offset,
                    kind: c.kind.as_str().to_owned(),
                    id: c.id.as_ref().map(|i| i.to_string()),
                    message: c.message.clone(),
                })
            }
            _ => None,
        })
        .collect();
    if let Some(TornTail { line, offset, len }) = session.torn_tail {
        dropped.push(Dropped {
            line,
            offset,
            kind: "tornTail".into(),
            id: None,
            message: format!("{len} bytes of an unfinished last line"),
        });
    }
    // What dropped lines still say about the tree: their id and parent, when readable.
    let links = dropped_links(path, &session, &dropped)?;

    let owner = |i: NodeIdx| tree.find(tree.node(i).entry.id.as_str()) == Some(i);
    for (i, node) in tree.nodes().iter().enumerate() {
        if !owner(i as NodeIdx) {
            let later = tree
                .find(node.entry.id.as_str())
                .map_or(0, |o| tree.node(o).entry.span.line);
            dropped.push(Dropped {
                line: node.entry.span.line,
                offset: node.entry.span.offset,
                kind: CorruptionKind::DuplicateId.as_str().to_owned(),
                id: Some(node.entry.id.to_string()),
                message: format!("the id is used again on line {later}, which is kept"),
            });
        }
    }
    dropped.sort_by_key(|d| d.offset);

    // Resolve each kept entry's parent to the nearest surviving ancestor.
    let n = tree.len();
    let mut parent: Vec<Option<NodeIdx>> = vec![None; n];
    for (i, node) in tree.nodes().iter().enumerate() {
        if !owner(i as NodeIdx) {
            continue;
        }
        let mut want = node.entry.parent_id.as_ref().map(|p| p.as_str().to_owned());
        let mut steps = 0;
        parent[i] = loop {
            let Some(p) = want else { break None };
            if let Some(o) = tree.find(&p) {
                break Some(o);
            }
            match links.iter().find(|(id, _)| *id == p) {
                Some((_, grand)) if steps < links.len() => {
                    want = grand.clone();
                    steps += 1;
                }
                _ => break None,
            }
        };
    }
    break_cycles(&mut parent);

    let mut reattached = Vec::new();
    let header = salvage_header(tree)?;
    let session_id = header.1.clone();
    let mut lines = vec![header.0];
    for (i, node) in tree.nodes().iter().enumerate() {
        if !owner(i as NodeIdx) {
            continue;
        }
        let e = &node.entry;
        let new_parent = parent[i].map(|p| &tree.node(p).entry.id);
        if version >= 2 && e.parent_id.as_ref() != new_parent {
            reattached.push(Reattached {
                id: e.id.clone(),
                was: e.parent_id.as_ref().map(|p| p.to_string()),
                now: new_parent.cloned(),
            });
        }
        let first_kept = match &e.kind {
            EntryKind::Compaction {
                first_kept_entry_id,
                ..
            } => first_kept_entry_id.as_ref(),
            _ => None,
        };
        let bytes = reader_line(&source, path, e.span)?;
        let out = fork::edit_line(
            &bytes,
            LineEdit {
                version,
                id: &e.id,
                parent: new_parent,
                first_kept,
            },
        )
        .map_err(|_| WriteError::Replaced {
            path: path.to_owned(),
            detail: "a line changed since it was read",
        })?;
        lines.push(out.into_owned());
    }
    let kept = lines.len() - 1;
    let cwd_text = RawObject::parse(tree.header().raw.get().as_bytes())
        .ok()
        .and_then(|h| h.get_str("cwd").map(|c| c.into_owned()))
        .unwrap_or_default();
    let _reservation = reservations
        .reserve(&cwd_text, &session_id)
        .map_err(WriteError::from_publish)?;
    let dir = destination_dir(path, target_dir);
    let name = publish::session_file_name(&header.2, &session_id);
    let out =
        publish::publish_new(&dir, &name, &session_id, &lines).map_err(WriteError::from_publish)?;
    Ok(Salvaged {
        path: out,
        session_id,
        kept,
        dropped,
        reattached,
    })
}

fn reader_line(source: &FileLines, path: &Path, span: LineSpan) -> Result<Vec<u8>, WriteError> {
    source
        .line(span)
        .map(|c| c.into_owned())
        .map_err(WriteError::io(path))
}

/// The salvaged file's header: the source header with a new id, version 3 and a new timestamp
/// (other fields, such as `cwd`, kept). Returns (line, id, timestamp).
fn salvage_header(tree: &Tree) -> Result<(Vec<u8>, String, String), WriteError> {
    let mut h = RawObject::parse(tree.header().raw.get().as_bytes()).unwrap_or_default();
    let id = Uuid::now_v7().to_string();
    let now = timestamp::now_iso();
    h.set_value("version", &CURRENT_VERSION);
    h.set_value("id", &id);
    h.set_value("timestamp", &now);
    Ok((h.to_line().into_bytes(), id, now))
}

/// `(id, parentId)` of dropped lines that are objects with a string `id`.
fn dropped_links(
    path: &Path,
    session: &OpenedSession,
    dropped: &[Dropped],
) -> Result<Vec<(String, Option<String>)>, WriteError> {
    if session.tree.header().version < 2 {
        // Version 1 has no ids; the lenient tree already chains each entry to the previous one.
        return Ok(Vec::new());
    }
    let bytes = std::fs::read(path).map_err(WriteError::io(path))?;
    let mut links = Vec::new();
    for d in dropped {
        let Some(rest) = bytes.get(d.offset as usize..) else {
            continue;
        };
        let line = &rest[..memchr::memchr(b'\n', rest).unwrap_or(rest.len())];
        if let Ok(o) = RawObject::parse(line)
            && let Some(id) = o.get_str("id")
        {
            let parent = o.get_str("parentId").map(|p| p.into_owned());
            links.push((id.into_owned(), parent));
        }
    }
    Ok(links)
}

/// Makes the entry where each parent cycle is found a root, so the file reads strictly.
fn break_cycles(parent: &mut [Option<NodeIdx>]) {
    // 0 = not seen, 1 = on the current walk, 2 = known to reach a root.
    let mut state = vec![0u8; parent.len()];
    for start in 0..parent.len() {
        let mut walk = Vec::new();
        let mut cur = start;
        loop {
            match state[cur] {
                2 => break,
                1 => {
                    // `cur` is on this walk: cut the edge that closed the loop.
                    if let Some(&last) = walk.last() {
                        parent[last] = None;
                    }
                    break;
                }
                _ => {}
            }
            state[cur] = 1;
            walk.push(cur);
            match parent[cur] {
                Some(p) => cur = p as usize,
                None => break,
            }
        }
        for w in walk {
            state[w] = 2;
        }
    }
}
