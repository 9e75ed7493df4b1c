//! The owner of one open session: a task that holds the session's tree, its file offset
//! and the pending partial line, and applies commands from its mailbox in arrival order.
//!
//! Requests and watcher hints arrive through the same channel. Every command starts with a
//! cheap refresh (one `stat`; reads only when the file changed), so a watcher event that was
//! coalesced or lost cannot leave an answer stale. Hints are facts about nothing: a hint for
//! an unchanged file costs one `stat`.
//!
//! The owner is a task on the daemon's runtime, not a thread of its own: its work per command
//! is short (a `stat`, the appended bytes, a walk of the tree), the first read of the file
//! runs on the blocking pool, and requests await its reply without holding anything across
//! the await. Threads per session cost more than their stacks: each thread allocating on its
//! own made glibc keep a heap arena per thread, and 200 sessions under writers grew the
//! daemon's RSS to five times its live heap (the soak test, `tests/soak.rs`).

use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use super::activity::{self, Agent};
use super::opened::{Opened, PiSession};
use super::roots::Roots;
use crate::core::diagnostics::Corruption;
use crate::core::source::LineSource;
use crate::core::tree::{Mode, NodeIdx};
use crate::dialect::Dialect;
use crate::dialect::claude;
use crate::dialect::pi::Pi;
use crate::storage::lines::{self, TornTail};
use crate::storage::reader::{self, FileOnDemand, FileStamp, OpenError, OpenedSession};
use crate::storage::tail;
use crate::storage::writer::{self, WriteError};
use crate::watch::LiveMode;

/// How many bytes before the applied offset are compared on each change and each request, to
/// notice a file rewritten in place with different content (with the header line): the last
/// line or lines of most sessions, in one small positioned read. A same-size rewrite that
/// changes only bytes before these and keeps mtime and ctime (one tick of a coarse clock) is
/// not seen until the file changes again.
const SIGNATURE_BYTES: u64 = 4096;

/// How long [`Session::agent`] reuses its last look at `/proc`.
pub const AGENT_CACHE: Duration = Duration::from_secs(1);

/// Why an open session was read again from the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadReason {
    /// The file is shorter than the bytes already applied (truncated).
    Shrank,
    /// The path now names another file (replaced by rename, or deleted and recreated).
    Replaced,
    /// The bytes already applied changed (rewritten in place, as pi does on migration).
    Rewritten,
    /// The session was pending (its file had no session header yet) and now has one: the
    /// tree holds every entry written so far; later entries come as `appended`.
    Born,
}

impl ReloadReason {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadReason::Shrank => "shrank",
            ReloadReason::Replaced => "replaced",
            ReloadReason::Rewritten => "rewritten",
            ReloadReason::Born => "born",
        }
    }
}

/// Where an open session stands: how many entries and how many bytes of the file are
/// applied. Two answers with the same revision describe the same state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Revision {
    /// Entries in the tree.
    pub entry_count: usize,
    /// Bytes of the file applied so far.
    pub applied_bytes: u64,
    /// How many times the session was reloaded from the start.
    pub generation: u64,
}

/// Receives what happens to open sessions. Implemented by the server, which turns each call
/// into a notification; called by the owner with the session borrowed.
pub trait EventSink: Send + Sync {
    /// New entries were applied; `added` are their node indexes (file order).
    fn appended(&self, session: &Session, added: Range<NodeIdx>);
    /// The session was read again from the start.
    fn reloaded(&self, session: &Session, reason: ReloadReason);
    /// New bytes are corrupt; the session keeps its last good state.
    fn corrupt(&self, session: &Session, corruption: &Corruption);
    /// The path no longer names a file (deleted, renamed away, its directory removed); the
    /// session keeps its last good state, and [`Session::missing_since`] says since when.
    /// Sent once per absence. Default: ignored.
    fn missing(&self, _session: &Session) {}
    /// The path names a file again after [`EventSink::missing`]. Sent before what the file
    /// holds is reported (`appended` or `reloaded`, if it differs). Default: ignored.
    fn restored(&self, _session: &Session) {}
    /// How the session's file is followed changed ([`Session::live_mode`]). Default: ignored.
    fn live_mode_changed(&self, _session: &Session) {}
    /// A session file appeared beside an open session (see [`super::births`]). Default:
    /// ignored.
    fn created(&self, _created: &super::births::Created) {}
    /// Resolves once every event sent before the call was handed on to the client, so an
    /// answer sent after it follows them. Default: at once (the events were delivered when
    /// sent).
    fn barrier(&self) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// The state of one open session, owned by its task. Read access for request handlers.
pub struct Session {
    path: PathBuf,
    mode: Mode,
    /// The tree, how far the file is applied and the file's stamp, in the session's dialect: the
    /// writer appends through this same value, so there is one position for reads, the live
    /// tail and writes.
    state: Opened,
    /// The file, held open only while a command reads it ([`Session::release_file`]).
    file: FileOnDemand,
    /// Up to [`SIGNATURE_BYTES`] bytes just before `state.position.offset`.
    signature: Vec<u8>,
    /// Set when new bytes were corrupt: tailing stays at the last good line and retries
    /// from there on every change (and `needs_reload` retries a failed reload).
    corrupt: Option<Corruption>,
    needs_reload: bool,
    generation: u64,
    /// Which open of the daemon this is ([`Session::open_seq`]).
    open_seq: u64,
    /// How the daemon follows the file; [`LiveMode::Requests`] until the watcher says.
    live_mode: LiveMode,
    /// When the path was first found not to name a file, while it does not.
    missing_since: Option<SystemTime>,
    /// The file has no session header yet and was young when last read
    /// ([`OpenError::Pending`]): the tree is an empty stand-in, every refresh reads the file
    /// whole again, and the header's arrival is reported as a reload ([`ReloadReason::Born`]).
    pending: bool,
    /// The session roots the file must stay inside, checked on every (re)open; `None` outside
    /// the daemon.
    roots: Option<Roots>,
    /// What the path named when a reload refused it ([`OpenError::NotInRoots`], a symlink
    /// swapped in): the session is missing meanwhile, and the path is tried again only when
    /// it names something else.
    refused: Option<FileStamp>,
    /// The writer lock the session's agent holds while it writes (Codex's), worked out from
    /// the first line once.
    writer_lock: std::sync::OnceLock<Option<PathBuf>>,
}

impl Session {
    /// Reads a session file (see [`reader::open_session`]) and prepares to tail it. A file
    /// being created (young, no complete header yet) opens as pending ([`Session::is_pending`]).
    /// Errors: those of [`reader::open_session`] except `Pending`; `NotInRoots` for a symbolic
    /// link (see [`Session::open_within`]).
    pub fn open(path: &Path, mode: Mode) -> Result<Session, OpenError> {
        Session::open_within(path, mode, None)
    }

    /// [`Session::open`] of a canonical `path` that must stay inside `roots` (the daemon's),
    /// checked on this open and on every reload: the path is opened without following a
    /// symbolic link in its last component, and the descriptor opened must be a regular file
    /// that the path, resolved now, names inside the roots ([`opened_within`]). What is read is
    /// that descriptor. A session file replaced by a symlink (or whose directory was) is
    /// refused with [`OpenError::NotInRoots`], and nothing of what it leads to is read.
    pub fn open_within(
        path: &Path,
        mode: Mode,
        roots: Option<Roots>,
    ) -> Result<Session, OpenError> {
        let io_err = |source| OpenError::Io {
            path: path.to_owned(),
            source,
        };
        let file = reader::open_regular_nofollow(path)?;
        if let Some(roots) = &roots {
            opened_within(&file, path, roots)?;
        }
        let dialect = reader::sniff_file(path, &file)?;
        let read = file.try_clone().map_err(io_err)?;
        let (state, pending) = match Opened::read(dialect, path, read, mode) {
            Ok(state) => (state, false),
            Err(OpenError::Pending { .. }) => (
                Opened::pending(mode, FileStamp::of(&file).map_err(io_err)?),
                true,
            ),
            Err(e) => return Err(e),
        };
        let file = FileOnDemand::new(path, file).map_err(io_err)?;
        let mut session = Session {
            path: path.to_owned(),
            mode,
            state,
            file,
            signature: Vec::new(),
            corrupt: None,
            needs_reload: false,
            generation: 0,
            open_seq: 0,
            live_mode: LiveMode::Requests,
            missing_since: None,
            pending,
            roots,
            refused: None,
            writer_lock: std::sync::OnceLock::new(),
        };
        session.signature = session.read_signature().map_err(io_err)?;
        Ok(session)
    }

    /// The agent working on this session (see [`activity`]), from the daemon-wide look at
    /// `/proc` made at most [`AGENT_CACHE`] ago ([`activity::shared`]): cheap enough to report
    /// with every change of every open session.
    pub fn agent(&self) -> Option<Agent> {
        activity::detect_in(&activity::shared(AGENT_CACHE), &self.probe())
    }

    /// The agent working on this session, looked up now (one pass over `/proc`), for deciding
    /// whether a context-changing write may go ahead.
    pub fn agent_now(&self) -> Option<Agent> {
        activity::detect(&self.probe())
    }

    fn probe(&self) -> activity::Probe<'_> {
        activity::Probe {
            path: &self.path,
            cwd: if self.pending { None } else { self.state.cwd() },
            turn_open: self.state.turn_open(),
            agent_names: activity::PI_NAMES,
            mtime: self.state.stamp().mtime,
            writer_lock: self.writer_lock(),
        }
    }

    /// The writer lock the session's agent holds while it writes (Codex's; `None` for the
    /// other agents), worked out from the first line once it can be read.
    fn writer_lock(&self) -> Option<PathBuf> {
        if let Some(known) = self.writer_lock.get() {
            return known.clone();
        }
        let found = match &self.state {
            Opened::Codex(s) => s.tree.nodes().first().and_then(|first| {
                let line = self.source().line(first.entry.span).ok()?;
                crate::dialect::codex::lineage::writer_lock_of(&self.path, &line)
            }),
            Opened::Pi(_) | Opened::Claude(_) => None,
        };
        if found.is_some() {
            let _ = self.writer_lock.set(found.clone());
        }
        found
    }

    /// Whether the file has no session header yet (it is being created): the tree is empty
    /// and the header's arrival is announced as a reload with [`ReloadReason::Born`].
    pub fn is_pending(&self) -> bool {
        self.pending
    }

    /// The session file (canonical path).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The roots the file must stay inside (the daemon's); `None` outside the daemon.
    pub fn roots(&self) -> Option<&Roots> {
        self.roots.as_ref()
    }
    /// Strict, or lenient (`allowCorrupt`).
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The session's dialect.
    pub fn dialect(&self) -> Dialect {
        self.state.dialect()
    }
    /// The session in its dialect, as of the last refresh.
    pub fn opened(&self) -> &Opened {
        &self.state
    }
    /// The pi session, when this is one.
    pub fn pi(&self) -> Option<&PiSession> {
        match &self.state {
            Opened::Pi(s) => Some(s),
            Opened::Claude(_) | Opened::Codex(_) => None,
        }
    }
    /// The Claude Code transcript's tree, when this is one.
    pub fn claude(&self) -> Option<&claude::Tree> {
        match &self.state {
            Opened::Claude(s) => Some(&s.tree),
            Opened::Pi(_) | Opened::Codex(_) => None,
        }
    }
    /// The Codex rollout's tree, when this is one.
    pub fn codex(&self) -> Option<&crate::dialect::codex::Tree> {
        match &self.state {
            Opened::Codex(s) => Some(&s.tree),
            Opened::Pi(_) | Opened::Claude(_) => None,
        }
    }
    /// Entries in the tree.
    pub fn len(&self) -> usize {
        self.state.len()
    }
    /// Whether the tree has no entries.
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }
    /// Reads entry lines of this session's file.
    pub fn source(&self) -> &(dyn LineSource + Sync) {
        &self.file
    }

    /// Closes the session's file until something reads it again: the owner calls this after
    /// each command, so an idle session holds no descriptor.
    pub fn release_file(&self) {
        self.file.release();
    }
    /// The unparsable unterminated last line as of the last read, if any.
    pub fn torn_tail(&self) -> Option<TornTail> {
        self.state.torn_tail()
    }
    /// The corruption that stopped tailing, if new bytes were corrupt.
    pub fn corruption(&self) -> Option<&Corruption> {
        self.corrupt.as_ref()
    }
    /// How the daemon follows this session's file.
    pub fn live_mode(&self) -> LiveMode {
        self.live_mode
    }
    /// Since when the path has not named a file, while it does not (see [`EventSink::missing`]).
    pub fn missing_since(&self) -> Option<SystemTime> {
        self.missing_since
    }
    /// Records how the file is followed; `announce` reports a change to `sink`.
    pub(crate) fn set_live_mode(&mut self, mode: LiveMode, announce: bool, sink: &dyn EventSink) {
        if mode != self.live_mode {
            self.live_mode = mode;
            if announce {
                sink.live_mode_changed(self);
            }
        }
    }
    /// Which open of the daemon this session is: a number the registry gives each open, never
    /// reused, kept across reloads; 0 outside the daemon. Every event the session sends carries
    /// it, so that the events of a closed open, or of an earlier open of the same path, can be
    /// told from the current open's and dropped.
    pub fn open_seq(&self) -> u64 {
        self.open_seq
    }
    /// The current revision.
    pub fn revision(&self) -> Revision {
        Revision {
            entry_count: self.state.len(),
            applied_bytes: self.state.position().offset,
            generation: self.generation,
        }
    }

    /// Brings the session up to date with the file: one `stat`, then (only if the file
    /// changed) reads the bytes after the applied position, or reloads on shrink, replacement
    /// or rewrite.
    pub fn refresh(&mut self, sink: &dyn EventSink) {
        let stamp = match tail::stamp_path(&self.path) {
            Ok(s) => s,
            Err(e) => {
                // Deleted or unreadable: keep the last good state; a new file at the path
                // is noticed as a replacement.
                let gone = matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                );
                if gone && self.missing_since.is_none() {
                    tracing::info!(path = %self.path.display(), "session file is missing");
                    self.missing_since = Some(SystemTime::now());
                    sink.missing(self);
                } else if !gone {
                    tracing::debug!(path = %self.path.display(), "cannot stat: {e}");
                }
                return;
            }
        };
        if let Some(refused) = self.refused {
            // Missing since a reload refused what the path named: tried again only when the
            // path names something else, and back only when that reads.
            if stamp != refused {
                self.reload(ReloadReason::Replaced, stamp, sink);
            }
            return;
        }
        if self.missing_since.take().is_some() {
            tracing::info!(path = %self.path.display(), "session file is back");
            sink.restored(self);
        }
        if self.pending {
            // A file being born is tiny: read it whole again. An old one is read on each
            // request too, so that its corruption (no header after the grace) is reported.
            if stamp != self.state.stamp() || reader::young_age_ms(stamp.mtime).is_none() {
                self.refresh_pending(stamp, sink);
            }
            return;
        }
        let last = self.state.stamp();
        // An equal stamp is not proof: a rewrite to the same size within one tick of a coarse
        // clock leaves size, mtime and ctime as they were. The header line and the bytes just
        // before the applied offset are compared as well (two small positioned reads).
        if stamp == last && (self.needs_reload || self.signature_holds()) {
            return;
        }
        let from = self.state.position().offset;
        let reason = if !stamp.same_file(&last) {
            Some(ReloadReason::Replaced)
        } else if stamp.size < from {
            Some(ReloadReason::Shrank)
        } else if self.needs_reload || !self.signature_holds() {
            Some(ReloadReason::Rewritten)
        } else {
            None
        };
        if let Some(reason) = reason {
            self.reload(reason, stamp, sink);
            return;
        }
        let leaf_before = self.state.default_leaf();
        let read = self
            .file
            .file()
            .and_then(|file| self.state.read_appended(&file, stamp));
        match read {
            Ok(applied) => self.applied(leaf_before, applied, sink),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "cannot read appended bytes: {e}")
            }
        }
    }

    /// Whether the header line and the bytes just before the applied offset are unchanged:
    /// a cheap test for a file rewritten in place (pi's migration rewrites every line).
    fn signature_holds(&self) -> bool {
        // The span holds the whole line (a CRLF file's `\r` too); the raw header is the JSON value.
        let header_holds = |(span, raw): (crate::core::ids::LineSpan, &str)| {
            let end = span.offset + u64::from(span.len);
            self.file
                .file()
                .and_then(|file| tail::read_range(&file, span.offset, end))
                .is_ok_and(|b| b.trim_ascii() == raw.as_bytes())
        };
        self.read_signature().is_ok_and(|b| b == self.signature)
            && self.state.header_line().is_none_or(header_holds)
    }

    fn read_signature(&self) -> io::Result<Vec<u8>> {
        let end = self.state.position().offset;
        tail::read_range(
            &*self.file.file()?,
            end.saturating_sub(SIGNATURE_BYTES),
            end,
        )
    }

    /// Reads a pending session's file again: once it has a header, the session is born.
    fn refresh_pending(&mut self, stamp: FileStamp, sink: &dyn EventSink) {
        match Session::open_within(&self.path, self.mode, self.roots.clone()) {
            Ok(fresh) if fresh.pending => self.state.set_stamp(stamp),
            Ok(mut fresh) => {
                fresh.generation = self.generation + 1;
                fresh.open_seq = self.open_seq;
                fresh.live_mode = self.live_mode;
                *self = fresh;
                sink.reloaded(self, ReloadReason::Born);
            }
            Err(OpenError::Corrupt { corruption, .. }) => {
                // Past the grace without a header, or a bad line after it: report once, keep
                // following (a header that comes later still gives birth).
                self.state.set_stamp(stamp);
                if self.corrupt.as_ref() != Some(&corruption) {
                    sink.corrupt(self, &corruption);
                }
                self.corrupt = Some(corruption);
            }
            Err(e) => tracing::warn!("cannot read a pending session: {e}"),
        }
    }

    fn reload(&mut self, reason: ReloadReason, stamp: FileStamp, sink: &dyn EventSink) {
        match Session::open_within(&self.path, self.mode, self.roots.clone()) {
            Ok(fresh) if fresh.pending => {
                // Caught in the middle of a rewrite (pi truncates the file, then writes every
                // line again): keep the last good state and read again on every refresh (the
                // stamp is not taken), so the rewrite gives one reload once it reads. Writes
                // wait meanwhile. A file that stays without a header past the grace is then
                // reported as corrupt by the branch below.
                self.needs_reload = true;
            }
            Ok(mut fresh) => {
                fresh.generation = self.generation + 1;
                fresh.open_seq = self.open_seq;
                fresh.live_mode = self.live_mode;
                let was_refused = self.refused.is_some();
                *self = fresh;
                if was_refused {
                    tracing::info!(path = %self.path.display(), "session file is back");
                    sink.restored(self);
                }
                sink.reloaded(self, reason);
            }
            Err(OpenError::NotInRoots { .. } | OpenError::NotAFile { .. }) => {
                // A symlink (or a directory leading out) where the session file was: nothing
                // of it is read, and the session is missing until a file is back. The last good
                // state is kept, as for a deleted file.
                if self.refused.is_none() {
                    tracing::warn!(
                        path = %self.path.display(),
                        "session file replaced by something that is not a regular file inside the roots; not read"
                    );
                }
                self.refused = Some(stamp);
                if self.missing_since.is_none() {
                    self.missing_since = Some(SystemTime::now());
                    sink.missing(self);
                }
            }
            Err(OpenError::Corrupt { corruption, .. }) => {
                // Keep the last good state; retry on the next change of the file.
                self.state.set_stamp(stamp);
                self.needs_reload = true;
                if self.corrupt.as_ref() != Some(&corruption) {
                    sink.corrupt(self, &corruption);
                }
                self.corrupt = Some(corruption);
            }
            Err(e) => tracing::warn!("cannot reload: {e}"),
        }
    }

    /// Announces what a read applied (see [`lines::apply_batch`]): in strict mode the good lines
    /// before a corrupt one are applied and the corrupt one is reported once and retried on
    /// every later change; lenient mode notes problems and goes on. A read that adds no entry
    /// but moves the default leaf (a Claude Code `last-prompt` line naming another resume
    /// leaf) is announced too, with nothing added.
    fn applied(
        &mut self,
        leaf_before: Option<NodeIdx>,
        applied: lines::Applied,
        sink: &dyn EventSink,
    ) {
        self.update_signature();
        if !applied.added.is_empty() || self.state.default_leaf() != leaf_before {
            sink.appended(self, applied.added);
        }
        match applied.corruption {
            None => self.corrupt = None,
            Some(corruption) => {
                // Every later change retries from here; report each problem once.
                if self.corrupt.as_ref() != Some(&corruption) {
                    sink.corrupt(self, &corruption);
                }
                self.corrupt = Some(corruption);
            }
        }
    }

    /// Runs a write of [`crate::storage::writer`] against this session's file, as the owner
    /// of the session: `f` gets the session's own [`OpenedSession<Pi>`] (tree, position, stamp) and
    /// appends (or refuses). Afterwards the session holds exactly what the writer read and wrote
    /// (entries read under the lock, the new entry, entries an unlocked writer appended just
    /// after it), and one `appended` event names all of them, also when the write was refused
    /// after reading new lines. The stamp is the file's as read after the write, so the
    /// watcher's event for our own write finds nothing new: each entry is announced once.
    ///
    /// A session opened with `allowCorrupt` is written through a fresh strict read (a corrupt
    /// file is refused with the writer's `corrupt` error), then refreshed like after any
    /// change of the file.
    pub fn write<R, E: From<WriteError>>(
        &mut self,
        sink: &dyn EventSink,
        f: impl FnOnce(&Path, &mut OpenedSession<Pi>) -> Result<R, E>,
    ) -> Result<R, E> {
        if self.pending {
            return Err(WriteError::Busy {
                path: self.path.clone(),
                age_ms: reader::young_age_ms(self.state.stamp().mtime).unwrap_or(0),
                reason: "the file has no session header yet (being created)",
            }
            .into());
        }
        if self.mode == Mode::Lenient {
            let mut fresh = writer::open_for_write(&self.path)?;
            let result = f(&self.path, &mut fresh);
            self.refresh(sink);
            return result;
        }
        if self.needs_reload {
            // The bytes already applied changed and the file does not read cleanly now: the
            // tree no longer describes the file, so nothing may be appended on its account.
            return Err(WriteError::Replaced {
                path: self.path.clone(),
                detail: "it was rewritten and does not read cleanly",
            }
            .into());
        }
        let Opened::Pi(pi) = &mut self.state else {
            return Err(WriteError::UnsupportedForFormat {
                path: self.path.clone(),
                format: self.state.dialect(),
            }
            .into());
        };
        let before = pi.opened.tree.len() as NodeIdx;
        let result = f(&self.path, &mut pi.opened);
        // Bytes after the last applied line (an unlocked writer's unfinished line) are read
        // again by the next refresh.
        pi.opened.stamp.size = pi.opened.position.offset;
        self.update_signature();
        if result.is_ok() {
            // The writer read every byte up to its line strictly: nothing corrupt is left.
            self.corrupt = None;
        }
        let after = self.state.len() as NodeIdx;
        if after > before {
            sink.appended(self, before..after);
        }
        result
    }

    fn update_signature(&mut self) {
        match self.read_signature() {
            Ok(b) => self.signature = b,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "cannot read: {e}");
                self.needs_reload = true;
            }
        }
    }
}

/// What a request's work grows with, which decides where the owner runs it (see
/// [`off_the_runtime`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cost {
    /// One entry's line (`session/entry`): microseconds, run on the runtime's thread.
    Line,
    /// The session's path, tree or file: milliseconds on a large session.
    Session,
    /// Work that may wait on something outside the daemon (a write takes the file's lock,
    /// which pi may hold for a while): always run off the runtime.
    Wait,
}

/// Applied bytes from which a session's work ([`Cost::Session`], a refresh on a hint) may
/// hold a thread for milliseconds: 4 MiB, the size from which the reader parses in
/// parallel. Below it the whole file reads in a few milliseconds.
pub const LONG_WORK_FROM_BYTES: u64 = 4 << 20;

/// Runs `work`, the owner's work on a session of `applied_bytes`, of `cost`. The daemon's
/// runtime has one worker thread (a small request then crosses no other thread, and wakes no
/// sibling worker: on a 2-vCPU machine that is a fifth of its round trip), so work that may
/// take milliseconds must not hold it: such work runs through
/// [`tokio::task::block_in_place`], which hands the worker's other tasks (every other session,
/// the transport) to another thread for the time it takes. Elsewhere than on a multi-thread
/// runtime (a test's, the CLI's) `work` runs as it is. A refresh that finds a small session's
/// file grown by megabytes at once runs where it is; the next request on it is moved.
fn off_the_runtime<R>(cost: Cost, applied_bytes: u64, work: impl FnOnce() -> R) -> R {
    let long = match cost {
        Cost::Line => false,
        Cost::Session => applied_bytes >= LONG_WORK_FROM_BYTES,
        Cost::Wait => true,
    };
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if long && multi_thread {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// Opens the canonical `path` for reading as [`Session::open_within`] does: without following
/// a final symlink, and only when what was opened is a regular file the path names inside
/// `roots`. For a one-time read of a session that is not open; read from the file returned,
/// not from the path again. Errors: `Io`, `NotAFile`, `NotInRoots`.
pub fn open_within_roots(path: &Path, roots: &Roots) -> Result<File, OpenError> {
    let file = reader::open_regular_nofollow(path)?;
    opened_within(&file, path, roots)?;
    Ok(file)
}

/// Checks that `file`, just opened from the canonical `path`, is a regular file inside `roots`:
/// the path resolved now (symlinks followed) lies inside a root and names the very file that
/// was opened (same device and inode), so a directory on the way swapped for a symlink out of
/// the roots is refused, and so is a swap back between the open and this check. Errors:
/// `NotAFile`, `NotInRoots`.
fn opened_within(file: &File, path: &Path, roots: &Roots) -> Result<(), OpenError> {
    use std::os::unix::fs::MetadataExt;
    let refused = || OpenError::NotInRoots {
        path: path.to_owned(),
    };
    let opened = file.metadata().map_err(|source| OpenError::Io {
        path: path.to_owned(),
        source,
    })?;
    if !opened.is_file() {
        return Err(OpenError::NotAFile {
            path: path.to_owned(),
        });
    }
    let real = std::fs::canonicalize(path).map_err(|_| refused())?;
    if !roots.admits(&real) {
        return Err(refused());
    }
    let named = std::fs::metadata(&real).map_err(|_| refused())?;
    if (named.dev(), named.ino()) != (opened.dev(), opened.ino()) {
        return Err(refused());
    }
    Ok(())
}

/// A write run by the owner (see [`Command::Write`]).
pub(crate) type WriteFn = Box<dyn FnOnce(&mut Session, &dyn EventSink) + Send>;

/// A command for an owner.
pub(crate) enum Command {
    /// The watcher saw a change in the session's directory.
    Hint,
    /// Refresh, then run a request against the session; its [`Cost`] says whether it may
    /// hold the thread for long.
    Run(Box<dyn FnOnce(&Session) + Send>, Cost),
    /// Refresh, then run a write (see [`Session::write`]); events go to the sink.
    Write(WriteFn),
    /// The watcher follows the file this way now; `announce`: report a change to the sink.
    Live {
        /// The new mode.
        mode: LiveMode,
        /// Whether the client is told (not before `session/open` answered).
        announce: bool,
    },
    /// Refresh, then make the answer to the open that started this owner: what is applied
    /// from here on is announced once [`Command::Announce`] comes (see [`Gate`]).
    Answer(Box<dyn FnOnce(&Session) + Send>),
    /// The answer to the open is on its way to the client: announce what was applied since it
    /// was made, and every change from now on (see [`Gate`]).
    Announce,
    /// Stop the owner; `done` is answered once it stopped, after its last event was sent.
    Close {
        /// Answered when the owner stopped.
        done: oneshot::Sender<()>,
    },
}

/// Where an owner stands with the answer to its open.
#[derive(Clone, Copy, Debug)]
enum Stage {
    /// Not made yet: what is applied now is in the answer.
    Before,
    /// Made at this many entries, this default leaf and this generation, not yet handed to the
    /// client: what is applied now is announced at [`Command::Announce`], after the answer;
    /// `reloaded` is the reason of the last reload meanwhile.
    Made {
        entries: usize,
        leaf: Option<NodeIdx>,
        generation: u64,
        reloaded: Option<ReloadReason>,
    },
    /// Handed on: every change is announced as it is applied.
    Announced,
}

/// The owner's sink around the answer to its open. Changes and reloads applied before the
/// answer is made are in the answer: announcing them too would tell the client twice. Those
/// applied after it is made but before it is handed to the client would overtake it (a
/// notification and an answer travel separately): they are announced, as one `didChange` (or
/// one `didReload`), when the handler hands the answer on ([`Command::Announce`], sent in the
/// same step that completes the handler, so the answer is in the output first). Every other
/// event passes.
struct Gate<'a> {
    sink: &'a dyn EventSink,
    stage: std::sync::Mutex<Stage>,
}

impl Gate<'_> {
    fn stage(&self) -> std::sync::MutexGuard<'_, Stage> {
        self.stage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The answer was made from `session` as it is now.
    fn answered(&self, session: &Session) {
        let mut stage = self.stage();
        if matches!(*stage, Stage::Before) {
            *stage = Stage::Made {
                entries: session.len(),
                leaf: session.state.default_leaf(),
                generation: session.generation,
                reloaded: None,
            };
        }
    }

    /// The answer is handed on: what was applied since it was made is announced now.
    fn announce(&self, session: &Session) {
        let was = std::mem::replace(&mut *self.stage(), Stage::Announced);
        if let Stage::Made {
            entries,
            leaf,
            generation,
            reloaded,
        } = was
        {
            if session.generation != generation {
                if let Some(reason) = reloaded {
                    self.sink.reloaded(session, reason);
                }
            } else if session.len() > entries || session.state.default_leaf() != leaf {
                self.sink
                    .appended(session, entries as NodeIdx..session.len() as NodeIdx);
            }
        }
    }
}

impl EventSink for Gate<'_> {
    fn appended(&self, session: &Session, added: Range<NodeIdx>) {
        if matches!(*self.stage(), Stage::Announced) {
            self.sink.appended(session, added);
        }
    }
    fn reloaded(&self, session: &Session, reason: ReloadReason) {
        let mut stage = self.stage();
        match &mut *stage {
            Stage::Before => {}
            Stage::Made { reloaded, .. } => *reloaded = Some(reason),
            Stage::Announced => {
                drop(stage);
                self.sink.reloaded(session, reason);
            }
        }
    }
    fn corrupt(&self, session: &Session, corruption: &Corruption) {
        self.sink.corrupt(session, corruption);
    }
    fn missing(&self, session: &Session) {
        self.sink.missing(session);
    }
    fn restored(&self, session: &Session) {
        self.sink.restored(session);
    }
    fn live_mode_changed(&self, session: &Session) {
        self.sink.live_mode_changed(session);
    }
    fn created(&self, created: &super::births::Created) {
        self.sink.created(created);
    }
    fn barrier(&self) -> futures::future::BoxFuture<'static, ()> {
        self.sink.barrier()
    }
}

/// Starts the owner task of `path`, the daemon's open number `open_seq`
/// ([`Session::open_seq`]): opens the session on the blocking pool and reports the result
/// before serving its mailbox. Its changes are announced from [`Command::Announce`] on. Must
/// be called on a Tokio runtime.
pub(crate) fn spawn(
    path: PathBuf,
    mode: Mode,
    roots: Option<Roots>,
    sink: std::sync::Arc<dyn EventSink>,
    open_seq: u64,
) -> oneshot::Receiver<Result<mpsc::UnboundedSender<Command>, OpenError>> {
    let (ready_tx, ready_rx) = oneshot::channel();
    let span = tracing::debug_span!("session", path = %path.display());
    let owner = async move {
        let opened = tokio::task::spawn_blocking({
            let path = path.clone();
            move || Session::open_within(&path, mode, roots)
        })
        .await;
        let mut session = match opened {
            Ok(Ok(mut s)) => {
                s.open_seq = open_seq;
                s
            }
            Ok(Err(e)) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
            // The open panicked or the runtime is shutting down: the request sees the owner
            // gone (its `ready` is dropped).
            Err(e) => {
                tracing::error!("opening {} failed: {e}", path.display());
                return;
            }
        };
        session.release_file();
        let (tx, mut rx) = mpsc::unbounded_channel();
        if ready_tx.send(Ok(tx)).is_err() {
            return;
        }
        let mut stopped = None;
        let gate = Gate {
            sink: &*sink,
            stage: std::sync::Mutex::new(Stage::Before),
        };
        while let Some(cmd) = rx.recv().await {
            let applied = session.revision().applied_bytes;
            match cmd {
                Command::Hint => {
                    off_the_runtime(Cost::Session, applied, || session.refresh(&gate));
                }
                Command::Run(f, cost) => off_the_runtime(cost, applied, || {
                    session.refresh(&gate);
                    f(&session);
                }),
                Command::Write(f) => off_the_runtime(Cost::Wait, applied, || {
                    session.refresh(&gate);
                    f(&mut session, &gate);
                }),
                Command::Live { mode, announce } => {
                    session.set_live_mode(mode, announce, &gate);
                }
                Command::Answer(f) => off_the_runtime(Cost::Session, applied, || {
                    session.refresh(&gate);
                    f(&session);
                    gate.answered(&session);
                }),
                Command::Announce => gate.announce(&session),
                Command::Close { done } => {
                    stopped = Some(done);
                    break;
                }
            }
            session.release_file();
        }
        tracing::debug!("session closed");
        drop(session);
        if let Some(done) = stopped {
            let _ = done.send(());
        }
    };
    tokio::spawn(owner.instrument(span));
    ready_rx
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The events a session sent, in order.
    #[derive(Default)]
    struct Events(Mutex<Vec<String>>);

    impl Events {
        fn push(&self, e: String) {
            self.0.lock().unwrap().push(e);
        }
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    impl EventSink for Events {
        fn appended(&self, _: &Session, added: Range<NodeIdx>) {
            self.push(format!("appended {}", added.len()));
        }
        fn reloaded(&self, s: &Session, _: ReloadReason) {
            self.push(format!("reloaded {}", s.len()));
        }
        fn corrupt(&self, _: &Session, _: &Corruption) {
            self.push("corrupt".into());
        }
        fn missing(&self, _: &Session) {
            self.push("missing".into());
        }
        fn restored(&self, _: &Session) {
            self.push("restored".into());
        }
    }

    fn write_session(path: &Path, entries: usize) {
        let mut text =
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#
                .to_owned();
        let mut parent = "null".to_owned();
        for i in 0..entries {
            text.push_str(&format!(
                "\n{{\"type\":\"custom\",\"id\":\"e{i}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"customType\":\"c\"}}"
            ));
            parent = format!("\"e{i}\"");
        }
        text.push('\n');
        std::fs::write(path, text).unwrap();
    }

    /// A session file, or its directory, replaced by a symlink out of the roots: the session
    /// goes missing, keeps its state and reads nothing of the outside file; a regular file
    /// back at the path is read again.
    #[test]
    fn a_symlink_swapped_in_is_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let root = base.join("sessions");
        let sub = root.join("sub");
        let outside = base.join("outside");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let roots = Roots::new([root.clone()]);
        let file = sub.join("a.jsonl");
        write_session(&file, 1);
        write_session(&outside.join("a.jsonl"), 3);
        let events = Events::default();
        let mut s = Session::open_within(&file, Mode::Strict, Some(roots.clone())).unwrap();

        // The directory on the way.
        std::fs::rename(&sub, root.join("sub.old")).unwrap();
        std::os::unix::fs::symlink(&outside, &sub).unwrap();
        s.refresh(&events);
        assert_eq!(events.take(), ["missing"]);
        assert_eq!(s.len(), 1);
        s.refresh(&events);
        write_session(&outside.join("a.jsonl"), 4);
        s.refresh(&events);
        assert_eq!(events.take(), Vec::<String>::new());
        assert_eq!(s.len(), 1);
        assert!(matches!(
            Session::open_within(&file, Mode::Strict, Some(roots.clone())),
            Err(OpenError::NotInRoots { .. })
        ));

        // The file itself, once its directory is back.
        std::fs::remove_file(&sub).unwrap();
        std::fs::rename(root.join("sub.old"), &sub).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.join("a.jsonl"), &file).unwrap();
        s.refresh(&events);
        assert_eq!(
            events.take(),
            Vec::<String>::new(),
            "still missing, still refused"
        );
        assert_eq!(s.len(), 1);

        // A regular file back: restored, then read.
        std::fs::remove_file(&file).unwrap();
        write_session(&file, 2);
        s.refresh(&events);
        assert_eq!(events.take(), ["restored", "reloaded 2"]);
    }
}
