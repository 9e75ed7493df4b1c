//! Writing sessions: appends under an advisory lock with fencing, torn-tail repair, forks and
//! salvage into new files. The only code that changes session files.
//!
//! # The API the session owner task calls
//!
//! The owner task of an open session holds its
//! [`OpenedSession<Pi>`](crate::storage::reader::OpenedSession<Pi>) (from
//! [`open_session`](crate::storage::reader::open_session) in strict mode, or
//! [`open_for_write`]) and one [`Reservations`](crate::storage::publish::Reservations) shared
//! by the whole daemon. Each JSON-RPC method is one call:
//!
//! | method | call |
//! | --- | --- |
//! | `session/append {path, entry, parentId?, expectedLeafId}` | [`write_entry`] with [`Change::Append`] |
//! | `session/label {path, targetId, label\|null, expectedLeafId}` | [`write_entry`] with [`Change::Label`] |
//! | `session/setName {path, name, expectedLeafId}` | [`write_entry`] with [`Change::SetName`] |
//! | `session/branch {path, fromId\|null, summary?, details?, expectedLeafId}` | [`write_entry`] with [`Change::Branch`] |
//! | `session/compact {path, leafId?, expectedLeafId, ...}` | [`write_prebuilt`] with the compaction entry |
//! | `session/fork {path, entryId, position, targetDir?}` | [`fork`] (reads only; no lock); a Claude Code transcript: [`fork_transcript`] |
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
//! terminated by our write); check the request (an entry that cannot be built, an expected leaf
//! that names no entry: `invalidEntry`, `unknownEntry`), then the fencing token (a compaction,
//! planned from the session as it stands, is planned after the fence); repair a torn tail; then one `write` of the complete line(s) ending in `\n`; then read back from the old
//! offset so the tree holds exactly what the file holds (including lines that an unlocked writer
//! such as pi appended meanwhile). A refused or failed write changes neither the file nor the
//! tree, apart from applying lines that were already in the file: a `write` cut short, or one
//! whose `fdatasync` fails ([`WriteOptions::sync`]), is rolled back by truncating the file to its
//! length before our line, unless another writer appended after it (then the error says so).
//! Tests inject `EIO`, `ENOSPC`, short writes, failing syncs and a failing rename
//! (`storage::faults`).
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

//!
//! # Where things are
//!
//! [`append`] holds the append protocol, [`repair`] the torn-tail repair, [`new_file`] forks and
//! salvage, [`error`] the errors. Planning that needs no I/O lives in `core` (entries, the fork
//! plan, the salvage plan); reading lines is [`crate::storage::lines`], shared with the reader
//! and the live tail.

use std::time::Duration;

pub mod append;
pub mod error;
pub mod new_file;
pub mod repair;

pub use crate::dialect::pi::salvage::{Dropped, Reattached};
pub use append::{
    Change, Expected, Written, check_expected_leaf, open_for_write, require_writable, write_entry,
    write_prebuilt,
};
pub use error::WriteError;
pub use new_file::{ForkRequest, Forked, Salvaged, fork, fork_transcript, salvage};
pub use repair::Repair;

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
