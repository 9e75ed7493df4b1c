//! The append protocol: lock, catch up by the one line policy, check the request (the entry,
//! the expected leaf), fence, repair an old torn tail, one `write`, read back (see the module
//! docs of [`super`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::SystemTime;

use serde_json::value::RawValue;
use uuid::Uuid;

use super::repair::{self, Repair};
use super::{WriteError, WriteOptions};
use crate::core::tree::Mode;
use crate::dialect::pi::Pi;
use crate::dialect::pi::Tree;
use crate::dialect::pi::entries::{self, EntryContext, NewEntry, ParentChoice};
use crate::dialect::pi::format::{CURRENT_VERSION, EntryId};
use crate::dialect::pi::render::LineSource;
use crate::js::timestamp;
use crate::storage::faults::{self, Fault};
use crate::storage::lines::TornTail;
use crate::storage::lock::{self, LockError};
use crate::storage::reader::{self, FileLines, FileStamp, OpenedSession};
use crate::storage::tail;

/// Opens a session for writing: a strict read (corruption refuses with `Corrupt`) of a pi
/// session; a file of a format sessiond only reads is refused with `UnsupportedForFormat`.
pub fn open_for_write(path: &Path) -> Result<OpenedSession<Pi>, WriteError> {
    require_writable(path)?;
    reader::open_session::<Pi>(path, Mode::Strict).map_err(WriteError::from_open)
}

/// Refuses a file whose format sessiond reads but never writes (a Claude Code transcript,
/// [`Dialect::writable`]) with `UnsupportedForFormat`, before anything else is looked at.
/// Errors: that, or the sniff's own (`Io`, `NotAFile`, an unknown format as `Corrupt`).
pub fn require_writable(path: &Path) -> Result<(), WriteError> {
    let file = reader::open_regular(path).map_err(WriteError::from_open)?;
    let dialect = reader::sniff_file(path, &file).map_err(WriteError::from_open)?;
    if dialect.writable() {
        Ok(())
    } else {
        Err(WriteError::UnsupportedForFormat {
            path: path.to_owned(),
            format: dialect,
        })
    }
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

/// The result of an append.
#[derive(Clone, Debug)]
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
    /// No view to check: a dry run that names none (`compact --dry-run` without
    /// `--expected-leaf`, `session/compact {dryRun: true}` without `expectedLeafId`). Every
    /// write names its view, in the CLI as in the daemon.
    Unfenced,
}

/// Appends one change to the session at `path`, fenced by `expected_leaf` (see the module docs).
///
/// `session` must have been read from `path` in strict mode; it is brought up to date with the
/// file and then holds the new entry. Errors: every [`WriteError`] kind but `reserved`/`exists`.
pub fn write_entry(
    path: &Path,
    session: &mut OpenedSession<Pi>,
    change: Change<'_>,
    expected_leaf: Option<&str>,
    opts: &WriteOptions,
) -> Result<Written, WriteError> {
    // Building the entry is checking the request: before the fence (see `write_with`).
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
            match change {
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
            .map_err(|e| WriteError::from_entry(path, e))
        },
        |entry, _: &Tree, _: &dyn LineSource| Ok::<_, WriteError>((Some(entry), ())),
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
///
/// `check` sees the caught-up tree first, before the fence: it checks the request's arguments
/// (the leaf to compact names an entry), so a malformed request is never reported as a
/// conflict. `build` runs after the fence: only a writer whose view is current may plan.
pub fn write_prebuilt<T, E: From<WriteError>>(
    path: &Path,
    session: &mut OpenedSession<Pi>,
    expected: Expected<'_>,
    opts: &WriteOptions,
    check: impl FnOnce(&Tree) -> Result<(), E>,
    build: impl FnOnce(&Tree, &dyn LineSource) -> Result<(Option<NewEntry>, T), E>,
) -> Result<(Option<Written>, T), E> {
    let check = |tree: &Tree, _: &dyn LineSource| check(tree);
    write_with(path, session, expected, opts, check, |(), tree, lines| {
        let (entry, out) = build(tree, lines)?;
        if let Some(e) = &entry {
            entries::check_prebuilt(tree, e).map_err(|e| WriteError::from_entry(path, e))?;
        }
        Ok((entry, out))
    })
}

/// An expected leaf that names no entry of the (caught-up) session is a mistake in the request,
/// not a stale view: entries are only ever appended, so no view of this file ever held it.
/// Checked before the fence, so the caller hears `UnknownEntry` instead of a conflict.
pub fn check_expected_leaf(
    path: &Path,
    tree: &Tree,
    expected: Expected<'_>,
) -> Result<(), WriteError> {
    match expected {
        Expected::Leaf(Some(id)) if tree.find(id).is_none() => Err(WriteError::UnknownEntry {
            path: path.to_owned(),
            id: id.to_owned(),
            role: "expected leaf",
        }),
        _ => Ok(()),
    }
}

/// The append protocol (module docs) around an entry built by `build` on the fresh tree.
///
/// The request before the view: `check` runs on the caught-up tree, then the expected leaf's own
/// check ([`check_expected_leaf`]), then the fence, then `build`, all before the file
/// is touched. A request that is wrong in itself (an entry that cannot be built, an id that
/// names nothing) is reported as what it is, never as a conflict that a retry with a fresh
/// leaf would only turn into the real error.
fn write_with<C, T, E: From<WriteError>>(
    path: &Path,
    session: &mut OpenedSession<Pi>,
    expected: Expected<'_>,
    opts: &WriteOptions,
    check: impl FnOnce(&Tree, &dyn LineSource) -> Result<C, E>,
    build: impl FnOnce(C, &Tree, &dyn LineSource) -> Result<(Option<NewEntry>, T), E>,
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
        .custom_flags(reader::NONBLOCK)
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

    // The request, then the view, then the entry; all before the file is touched.
    let lines = FileLines::new(file.try_clone().map_err(WriteError::io(path))?);
    let checked = check(&session.tree, &lines)?;
    check_expected_leaf(path, &session.tree, expected)?;
    if let Expected::Leaf(expected_leaf) = expected {
        session
            .tree
            .fence(expected_leaf, before_len)
            .map_err(|stale| WriteError::conflict(path, stale))?;
    }
    let (entry, out) = build(checked, &session.tree, &lines)?;
    let Some(entry) = entry else {
        return Ok((None, out));
    };

    let repaired = match tail {
        Tail::Torn(torn) => {
            let bytes = tail::read_range(&file, torn.offset, torn.offset + torn.len)
                .map_err(WriteError::io(path))?;
            let repair = repair::repair_torn(&file, path, torn.offset, &bytes)?;
            session.torn_tail = None;
            Some(repair)
        }
        Tail::Clean => None,
    };

    let mut buf = Vec::with_capacity(entry.line.len() + 2);
    if session.position.open {
        // The last line was read whole but has no newline: ours ends it first.
        buf.push(b'\n');
    }
    buf.extend_from_slice(entry.line.as_bytes());
    buf.push(b'\n');
    // The file itself unless a test injects a fault (`storage::faults`).
    let faulty = Faulty {
        file: &file,
        fault: faults::append_fails(),
    };
    let target: &dyn AppendTarget = &faulty;
    let start = target.len().map_err(WriteError::io(path))?;
    write_once(target, path, &buf, start)?;
    if opts.sync
        && let Err(e) = target.sync_data()
    {
        // Whether the bytes reached the disk is unknown now: the caller hears that the entry
        // was not written, so the file must not keep it either.
        return Err(roll_back(target, path, start, buf.len(), e, "fdatasync failed").into());
    }

    // Read back what the file now holds: our line, and anything an unlocked writer added.
    let count_before_ours = session.tree.len();
    read_on(&file, path, session)?;
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
        applied_len: session.position.offset,
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
    /// Ends in a line the tree holds (terminated, or open: see
    /// [`Position::open`](crate::storage::lines::Position::open)).
    Clean,
    /// An old torn tail (to be repaired before appending).
    Torn(TornTail),
}

/// Reads what was appended since the session's applied position and applies it by the one line
/// policy (strict), then judges the end of the file for writing: an unterminated last line
/// younger than the grace period means a writer is mid-line (`busy`); an old one is ended by our
/// newline (when it was read whole) or repaired (when torn). Errors: `Replaced`, `Corrupt`,
/// `Busy`, `Io`.
fn catch_up(
    file: &File,
    path: &Path,
    session: &mut OpenedSession<Pi>,
    opts: &WriteOptions,
) -> Result<Tail, WriteError> {
    let meta = file.metadata().map_err(WriteError::io(path))?;
    check_identity(path, session, &meta)?;
    read_on(file, path, session)?;
    let unterminated = session.position.open || session.torn_tail.is_some();
    if !unterminated {
        return Ok(Tail::Clean);
    }
    let age = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .unwrap_or_default();
    if age < opts.torn_grace {
        return Err(WriteError::Busy {
            path: path.to_owned(),
            age_ms: age.as_millis() as u64,
            reason: if session.torn_tail.is_some() {
                "the last line is incomplete and still young"
            } else {
                "the last line has no newline yet"
            },
        });
    }
    Ok(session.torn_tail.map_or(Tail::Clean, Tail::Torn))
}

fn check_identity(
    path: &Path,
    session: &OpenedSession<Pi>,
    meta: &std::fs::Metadata,
) -> Result<(), WriteError> {
    let replaced = |detail| WriteError::Replaced {
        path: path.to_owned(),
        detail,
    };
    // The creation time too: another file created where this one was deleted may reuse its
    // inode number.
    if meta.dev() != session.stamp.dev
        || meta.ino() != session.stamp.ino
        || meta.created().ok() != session.stamp.btime
    {
        return Err(replaced("it is another file now"));
    }
    if meta.len() < session.position.offset {
        return Err(replaced("it shrank"));
    }
    Ok(())
}

/// Applies what the file holds after the session's position (strict, by the one line policy)
/// and records the file's stamp as read. On corruption the session keeps the lines before the
/// bad one and the error names it.
fn read_on(file: &File, path: &Path, session: &mut OpenedSession<Pi>) -> Result<(), WriteError> {
    let stamp = FileStamp::of(file).map_err(WriteError::io(path))?;
    let applied = session
        .read_appended(file, stamp)
        .map_err(WriteError::io(path))?;
    match applied.corruption {
        None => Ok(()),
        Some(corruption) => Err(WriteError::Corrupt {
            path: path.to_owned(),
            corruption,
        }),
    }
}

/// The file operations an append makes once its checks passed: one `write(2)` at the end
/// (`O_APPEND`), the length, a truncation to roll back, and `fdatasync`. [`File`] in use;
/// [`Faulty`] wraps it when a test injects `EIO`, `ENOSPC` or a short write (`storage::faults`).
trait AppendTarget {
    /// One `write(2)`; `Ok(n)` may be short.
    fn write(&self, buf: &[u8]) -> io::Result<usize>;
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Truncates the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// `fdatasync(2)`.
    fn sync_data(&self) -> io::Result<()>;
}

impl AppendTarget for File {
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        Write::write(&mut &*self, buf)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
}

/// A session file with the append fault a test planned ([`faults::append_fails`]), if any.
struct Faulty<'a> {
    file: &'a File,
    fault: Option<Fault>,
}

impl AppendTarget for Faulty<'_> {
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match self.fault {
            Some(Fault::Write(errno)) => Err(io::Error::from_raw_os_error(errno)),
            Some(Fault::ShortWrite(n)) => AppendTarget::write(self.file, &buf[..n.min(buf.len())]),
            _ => AppendTarget::write(self.file, buf),
        }
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        AppendTarget::set_len(self.file, len)
    }
    fn sync_data(&self) -> io::Result<()> {
        match self.fault {
            Some(Fault::Sync(errno)) => Err(io::Error::from_raw_os_error(errno)),
            _ => AppendTarget::sync_data(self.file),
        }
    }
}

/// One `write(2)` of `buf` at the end of the file, which was `start` bytes long. A short
/// write is rolled back ([`roll_back`]), so the file never keeps half of our line.
fn write_once(
    target: &dyn AppendTarget,
    path: &Path,
    buf: &[u8],
    start: u64,
) -> Result<(), WriteError> {
    let result = loop {
        match target.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    match result {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(n) => Err(roll_back(
            target,
            path,
            start,
            n,
            io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {n} of {} bytes", buf.len()),
            ),
            "the write was cut short",
        )),
        Err(source) => Err(WriteError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// After a failed append of `written` bytes at `start`: truncates the file back to `start` when
/// it still ends with exactly those bytes (no other writer appended after them; an unlocked
/// writer's line is never cut), and returns the `Io` error saying which happened.
fn roll_back(
    target: &dyn AppendTarget,
    path: &Path,
    start: u64,
    written: usize,
    cause: io::Error,
    what: &str,
) -> WriteError {
    let ours_last = target.len().is_ok_and(|len| len == start + written as u64);
    let outcome = if written == 0 {
        "nothing was written"
    } else if ours_last && target.set_len(start).is_ok() {
        "the entry was removed again"
    } else {
        "the entry could not be removed again (another writer appended after it)"
    };
    WriteError::Io {
        path: path.to_owned(),
        source: io::Error::new(cause.kind(), format!("{what} ({cause}); {outcome}")),
    }
}
