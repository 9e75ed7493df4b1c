//! The owner of one open session: a thread that holds the session's tree, its file offset
//! and the pending partial line, and applies commands from its mailbox in arrival order.
//!
//! Requests and watcher hints arrive through the same channel. Every command starts with a
//! cheap refresh (one `stat`; reads only when the file changed), so a watcher event that was
//! coalesced or lost cannot leave an answer stale. Hints are facts about nothing: a hint for
//! an unchanged file costs one `stat`.
//!
//! The owner is a thread, not an async task, because everything it does is file I/O and
//! CPU work on the tree; requests await its reply without holding anything across the await.

use std::cell::{RefCell, RefMut};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use tokio::sync::{mpsc, oneshot};

use super::context_cache::ContextCache;
use crate::core::diagnostics::Corruption;
use crate::core::format::{self, Expect, Line, LineSpan};
use crate::core::incremental::LiveProjection;
use crate::core::render::LineSource;
use crate::core::tree::{Mode, NodeIdx, Tree};
use crate::storage::reader::{
    self, FileLines, FileStamp, LineSplitter, OpenError, OpenedSession, TornTail,
};
use crate::storage::tail;
use crate::storage::writer::{self, WriteError};

/// How many bytes before the applied offset are compared on each change, to notice a file
/// rewritten in place with different content.
const SIGNATURE_BYTES: u64 = 64;

/// Why an open session was read again from the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadReason {
    /// The file is shorter than the bytes already applied (truncated).
    Shrank,
    /// The path now names another file (replaced by rename, or deleted and recreated).
    Replaced,
    /// The bytes already applied changed (rewritten in place, as pi does on migration).
    Rewritten,
}

impl ReloadReason {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadReason::Shrank => "shrank",
            ReloadReason::Replaced => "replaced",
            ReloadReason::Rewritten => "rewritten",
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
/// into a notification; called on the owner's thread with the session borrowed.
pub trait EventSink: Send + Sync {
    /// New entries were applied; `added` are their node indexes (file order).
    fn appended(&self, session: &Session, added: Range<NodeIdx>);
    /// The session was read again from the start.
    fn reloaded(&self, session: &Session, reason: ReloadReason);
    /// New bytes are corrupt; the session keeps its last good state.
    fn corrupt(&self, session: &Session, corruption: &Corruption);
}

/// The state of one open session, owned by its thread. Read access for request handlers.
pub struct Session {
    path: PathBuf,
    mode: Mode,
    tree: Tree,
    lines: FileLines,
    file: File,
    torn_tail: Option<TornTail>,
    /// `offset` = end of the last applied line; `pending` = bytes of an unterminated line.
    splitter: LineSplitter,
    stamp: FileStamp,
    /// Up to [`SIGNATURE_BYTES`] bytes just before `splitter.offset`.
    signature: Vec<u8>,
    /// Set when new bytes were corrupt: tailing stays at the last good line and retries
    /// from there on every change (and `needs_reload` retries a failed reload).
    corrupt: Option<Corruption>,
    needs_reload: bool,
    generation: u64,
    /// Recent projections (requests borrow the session shared; only its thread touches this).
    contexts: RefCell<ContextCache>,
}

impl Session {
    /// Reads a session file (see [`reader::open_session`]) and prepares to tail it.
    pub fn open(path: &Path, mode: Mode) -> Result<Session, OpenError> {
        let io_err = |source| OpenError::Io {
            path: path.to_owned(),
            source,
        };
        let OpenedSession {
            tree,
            torn_tail,
            applied_len,
            applied_lines,
            stamp,
        } = reader::open_session(path, mode)?;
        let file = File::open(path).map_err(io_err)?;
        let lines = FileLines::new(File::open(path).map_err(io_err)?);
        let mut session = Session {
            path: path.to_owned(),
            mode,
            tree,
            lines,
            file,
            torn_tail: None,
            splitter: LineSplitter::default(),
            stamp,
            signature: Vec::new(),
            corrupt: None,
            needs_reload: false,
            generation: 0,
            contexts: RefCell::default(),
        };
        session
            .adopt_position(applied_len, applied_lines)
            .map_err(io_err)?;
        session.torn_tail = torn_tail;
        Ok(session)
    }

    /// Sets the tail position from a fresh read. An unterminated final line that parsed was
    /// applied; the newline that completes it later must not count as a new line.
    fn adopt_position(&mut self, applied_len: u64, applied_lines: u32) -> io::Result<()> {
        let start = applied_len.saturating_sub(SIGNATURE_BYTES);
        self.signature = tail::read_range(&self.file, start, applied_len)?;
        let unterminated = self.signature.last().is_some_and(|&b| b != b'\n');
        let line = if unterminated {
            applied_lines.saturating_sub(1)
        } else {
            applied_lines
        };
        self.splitter = LineSplitter::new(applied_len, line);
        Ok(())
    }

    /// The session file (canonical path).
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Strict, or lenient (`allowCorrupt`).
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The tree as of the last refresh.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }
    /// Reads entry lines of this session's file.
    pub fn source(&self) -> &dyn LineSource {
        &self.lines
    }
    /// The torn tail found when the file was last read from the start, if any.
    pub fn torn_tail(&self) -> Option<TornTail> {
        self.torn_tail
    }
    /// The corruption that stopped tailing, if new bytes were corrupt.
    pub fn corruption(&self) -> Option<&Corruption> {
        self.corrupt.as_ref()
    }
    /// The projection at `leaf` (`None`: the empty leaf), from the session's cache of recent
    /// projections: extended when entries were appended below a cached leaf, projected
    /// afresh otherwise (see `context_cache`). Holds the cache until the guard is dropped.
    pub fn context(&self, leaf: Option<NodeIdx>) -> RefMut<'_, LiveProjection> {
        RefMut::map(self.contexts.borrow_mut(), |c| c.get(&self.tree, leaf))
    }
    /// The current revision.
    pub fn revision(&self) -> Revision {
        Revision {
            entry_count: self.tree.len(),
            applied_bytes: self.splitter.offset,
            generation: self.generation,
        }
    }

    /// Brings the session up to date with the file: one `stat`, then (only if the file
    /// changed) reads the new bytes, or reloads on shrink, replacement or rewrite.
    pub fn refresh(&mut self, sink: &dyn EventSink) {
        let stamp = match tail::stamp_path(&self.path) {
            Ok(s) => s,
            Err(e) => {
                // Deleted or unreadable: keep the last good state; a new file at the path
                // is noticed as a replacement.
                tracing::debug!(path = %self.path.display(), "cannot stat: {e}");
                return;
            }
        };
        if stamp == self.stamp {
            return;
        }
        let known = self.splitter.offset + self.splitter.pending().len() as u64;
        let reason = if (stamp.dev, stamp.ino) != (self.stamp.dev, self.stamp.ino) {
            Some(ReloadReason::Replaced)
        } else if stamp.size < known {
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
        let bytes = match tail::read_range(&self.file, known, stamp.size) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "cannot read appended bytes: {e}");
                return;
            }
        };
        self.stamp = stamp;
        self.stamp.size = known + bytes.len() as u64;
        self.apply_bytes(&bytes, sink);
    }

    /// Whether the header line and the bytes just before the applied offset are unchanged:
    /// a cheap test for a file rewritten in place (pi's migration rewrites every line).
    fn signature_holds(&self) -> bool {
        let end = self.splitter.offset;
        let start = end.saturating_sub(SIGNATURE_BYTES);
        let header = self.tree.header();
        let header_end = header.span.offset + u64::from(header.span.len);
        tail::read_range(&self.file, start, end).is_ok_and(|b| b == self.signature)
            && tail::read_range(&self.file, header.span.offset, header_end)
                .is_ok_and(|b| b == header.raw.get().as_bytes())
    }

    fn reload(&mut self, reason: ReloadReason, stamp: FileStamp, sink: &dyn EventSink) {
        match Session::open(&self.path, self.mode) {
            Ok(mut fresh) => {
                fresh.generation = self.generation + 1;
                *self = fresh;
                sink.reloaded(self, reason);
            }
            Err(OpenError::Corrupt { corruption, .. }) => {
                // Keep the last good state; retry on the next change of the file.
                self.stamp = stamp;
                self.needs_reload = true;
                if self.corrupt.as_ref() != Some(&corruption) {
                    sink.corrupt(self, &corruption);
                }
                self.corrupt = Some(corruption);
            }
            Err(e) => tracing::warn!("cannot reload: {e}"),
        }
    }

    /// Applies the complete lines in `bytes` (which continue the pending partial line).
    fn apply_bytes(&mut self, bytes: &[u8], sink: &dyn EventSink) {
        let mut lines: Vec<(Vec<u8>, LineSpan)> = Vec::new();
        let _ = self.splitter.feed(bytes, |line, span| {
            lines.push((line.to_vec(), span));
            Ok::<(), ()>(())
        });
        if lines.is_empty() {
            // A corrupt line is always complete, so with no complete line left after the
            // offset it is gone (the file was cut back to the last good line).
            self.corrupt = None;
            return;
        }
        let before = self.tree.len() as NodeIdx;
        match self.mode {
            Mode::Lenient => {
                for (line, span) in &lines {
                    // Lenient mode notes problems as diagnostics instead of failing.
                    let _ = reader::apply_entry_line(&mut self.tree, line, *span);
                }
                let _ = self.tree.settle();
            }
            Mode::Strict => {
                if let Err((applied, corruption)) = self.apply_strict(&lines) {
                    // Resume after the last applied line; the corrupt bytes stay unread.
                    let (end, line) = applied.map_or(
                        (lines[0].1.offset, lines[0].1.line.saturating_sub(1)),
                        |i| {
                            (
                                lines[i].1.offset + u64::from(lines[i].1.len) + 1,
                                lines[i].1.line,
                            )
                        },
                    );
                    self.splitter = LineSplitter::new(end, line);
                    self.update_signature();
                    let after = self.tree.len() as NodeIdx;
                    if after > before {
                        sink.appended(self, before..after);
                    }
                    // Every later change retries from here; report each problem once.
                    if self.corrupt.as_ref() != Some(&corruption) {
                        sink.corrupt(self, &corruption);
                    }
                    self.corrupt = Some(corruption);
                    return;
                }
            }
        }
        self.corrupt = None;
        self.update_signature();
        let after = self.tree.len() as NodeIdx;
        if after > before {
            sink.appended(self, before..after);
        }
    }

    /// Parses and checks all lines, then applies the longest good prefix. On a problem,
    /// returns the index of the last applied line (if any) and the first corruption.
    fn apply_strict(
        &mut self,
        lines: &[(Vec<u8>, LineSpan)],
    ) -> Result<(), (Option<usize>, Corruption)> {
        enum Item {
            Entry(Box<format::Entry>, Option<usize>),
            ExtraHeader,
            Blank,
        }
        let version = self.tree.header().version;
        let mut items: Vec<Item> = Vec::with_capacity(lines.len());
        let mut problem: Option<Corruption> = None;
        for (bytes, span) in lines {
            if reader::is_blank(bytes) {
                items.push(Item::Blank);
                continue;
            }
            match format::parse_line(bytes, *span, Expect::Entry { version }) {
                Ok(Line::Entry(e)) => {
                    let v1 = (version < 2
                        && matches!(e.kind, format::EntryKind::Compaction { .. }))
                    .then(|| format::v1_first_kept_index(bytes))
                    .flatten();
                    items.push(Item::Entry(Box::new(e), v1));
                }
                Ok(Line::ExtraHeader | Line::Header(_)) => items.push(Item::ExtraHeader),
                Err(p) => {
                    problem = Some(Corruption {
                        kind: p.kind.into(),
                        line: span.line,
                        offset: span.offset,
                        id: None,
                        message: p.detail,
                    });
                    break;
                }
            }
        }
        // Shrink the candidate prefix until the tree accepts it whole.
        loop {
            let entries: Vec<format::Entry> = items
                .iter()
                .filter_map(|i| match i {
                    Item::Entry(e, _) => Some((**e).clone()),
                    _ => None,
                })
                .collect();
            match self.tree.check_append(&entries) {
                Ok(()) => break,
                Err((j, c)) => {
                    problem = Some(c);
                    let mut seen = 0;
                    let cut = items
                        .iter()
                        .position(|i| {
                            if let Item::Entry(..) = i {
                                seen += 1;
                                seen > j
                            } else {
                                false
                            }
                        })
                        .unwrap_or(items.len());
                    items.truncate(cut);
                }
            }
        }
        let applied = items.len().checked_sub(1);
        for item in items {
            match item {
                Item::Entry(e, v1) => {
                    if let Err(c) = self.tree.push(*e, v1) {
                        // check_append rules this out; keep the state consistent regardless.
                        tracing::error!("entry refused after its batch was checked: {c}");
                    }
                }
                Item::ExtraHeader => self.tree.push_extra_header(),
                Item::Blank => {}
            }
        }
        if let Err(c) = self.tree.settle() {
            tracing::error!("batch did not settle after it was checked: {c}");
        }
        match problem {
            None => Ok(()),
            Some(c) => Err((applied, c)),
        }
    }

    /// Runs a write of [`crate::storage::writer`] against this session's file, as the owner
    /// of the session: `f` gets the session as the writer's [`OpenedSession`] and appends
    /// (or refuses). Afterwards the session holds exactly what the writer read and wrote
    /// (entries read under the lock, the new entry, entries an unlocked writer appended just
    /// after it), and one `appended` event names all of them, also when the write was refused
    /// after reading new lines. The session's stamp is the file's after the write, so the
    /// watcher's event for our own write finds nothing new: each entry is announced once.
    ///
    /// A session opened with `allowCorrupt` is written through a fresh strict read (a corrupt
    /// file is refused with the writer's `corrupt` error), then refreshed like after any
    /// change of the file.
    pub fn write<R, E: From<WriteError>>(
        &mut self,
        sink: &dyn EventSink,
        f: impl FnOnce(&Path, &mut OpenedSession) -> Result<R, E>,
    ) -> Result<R, E> {
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
        let before = self.tree.len() as NodeIdx;
        // The writer counts an applied unterminated last line as a line; the splitter counts
        // it once its newline arrives (see `adopt_position`).
        let unterminated = self.signature.last().is_some_and(|&b| b != b'\n');
        let placeholder = Tree::new(self.tree.header().clone(), self.mode);
        let mut opened = OpenedSession {
            tree: std::mem::replace(&mut self.tree, placeholder),
            torn_tail: self.torn_tail,
            applied_len: self.splitter.offset,
            applied_lines: self.splitter.line + u32::from(unterminated),
            stamp: self.stamp,
        };
        let result = f(&self.path, &mut opened);
        let OpenedSession {
            tree,
            torn_tail,
            applied_len,
            applied_lines,
            stamp,
        } = opened;
        self.tree = tree;
        self.torn_tail = torn_tail;
        if let Err(e) = self.adopt_position(applied_len, applied_lines) {
            tracing::warn!(path = %self.path.display(), "cannot read after a write: {e}");
            self.needs_reload = true;
        }
        // Bytes after the last applied line (an unlocked writer's unfinished line) are read
        // again by the next refresh, as pending bytes.
        self.stamp = FileStamp {
            size: applied_len,
            ..stamp
        };
        if result.is_ok() {
            // The writer read every byte up to its line strictly: nothing corrupt is left.
            self.corrupt = None;
        }
        let after = self.tree.len() as NodeIdx;
        if after > before {
            sink.appended(self, before..after);
        }
        result
    }

    fn update_signature(&mut self) {
        let end = self.splitter.offset;
        let start = end.saturating_sub(SIGNATURE_BYTES);
        match tail::read_range(&self.file, start, end) {
            Ok(b) => self.signature = b,
            Err(e) => tracing::warn!(path = %self.path.display(), "cannot read: {e}"),
        }
    }
}

/// A write run on the owner's thread (see [`Command::Write`]).
pub(crate) type WriteFn = Box<dyn FnOnce(&mut Session, &dyn EventSink) + Send>;

/// A command for an owner.
pub(crate) enum Command {
    /// The watcher saw a change in the session's directory.
    Hint,
    /// Refresh, then run a request against the session.
    Run(Box<dyn FnOnce(&Session) + Send>),
    /// Refresh, then run a write (see [`Session::write`]); events go to the sink.
    Write(WriteFn),
    /// Stop the owner.
    Close,
}

/// Starts an owner thread for `path`: opens the session on that thread and reports the
/// result before serving its mailbox.
pub(crate) fn spawn(
    path: PathBuf,
    mode: Mode,
    sink: std::sync::Arc<dyn EventSink>,
) -> oneshot::Receiver<Result<mpsc::UnboundedSender<Command>, OpenError>> {
    let (ready_tx, ready_rx) = oneshot::channel();
    let name = format!(
        "session:{}",
        path.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    );
    let spawned = std::thread::Builder::new().name(name).spawn({
        let path = path.clone();
        move || {
            let mut session = match Session::open(&path, mode) {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let (tx, mut rx) = mpsc::unbounded_channel();
            if ready_tx.send(Ok(tx)).is_err() {
                return;
            }
            while let Some(cmd) = rx.blocking_recv() {
                match cmd {
                    Command::Hint => session.refresh(&*sink),
                    Command::Run(f) => {
                        session.refresh(&*sink);
                        f(&session);
                    }
                    Command::Write(f) => {
                        session.refresh(&*sink);
                        f(&mut session, &*sink);
                    }
                    Command::Close => break,
                }
            }
            tracing::debug!(path = %session.path.display(), "session closed");
        }
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start a session thread for {}: {e}", path.display());
    }
    ready_rx
}
