//! Open sessions: one owner task per session ([`owner`]), the handle requests use to
//! reach it, and the registry of open sessions keyed by canonical path. Also the session
//! [`roots`], and whether an agent is working on a session ([`activity`]). Nothing here knows
//! JSON-RPC.
//!
//! Rule: a request's first step is to send a command to the owner and await the reply; the
//! tree is only ever touched by its owner.

pub mod activity;
pub mod births;
pub mod context_cache;
pub mod opened;
pub mod owner;
pub mod roots;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use futures::future::Shared;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};

use crate::core::tree::Mode;
use crate::dialect::Dialect;
use crate::storage::reader::OpenError;
use crate::watch::{DirWatcher, LiveMode, WatchBackend};
use owner::{Command, Cost, EventSink, Session};

/// Why a session request failed below the protocol.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The session could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The path is not an open session.
    #[error("{}: session not open", path.display())]
    NotOpen {
        /// The path as given.
        path: PathBuf,
    },
    /// The owner stopped (its task ended) before answering.
    #[error("{}: the session's owner stopped", path.display())]
    OwnerGone {
        /// The session file.
        path: PathBuf,
    },
}

/// A cheap, cloneable way to reach an open session's owner.
#[derive(Clone, Debug)]
pub struct SessionHandle {
    path: PathBuf,
    mode: Mode,
    /// Which open of the daemon this is ([`owner::Session::open_seq`]).
    open_seq: u64,
    tx: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Hint => "Hint",
            Command::Run(_, _) => "Run",
            Command::Write(_) => "Write",
            Command::Live { .. } => "Live",
            Command::Answer(_) => "Answer",
            Command::Announce => "Announce",
            Command::Close { .. } => "Close",
        })
    }
}

impl SessionHandle {
    /// The canonical path of the session file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` by the owner after a refresh and returns its result. `f` sees the
    /// session as of this request's place in the mailbox. `f`'s work may grow with the
    /// session ([`Cost::Session`]); [`SessionHandle::query_line`] is for work on one line.
    pub async fn query<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Session) -> R + Send + 'static,
    ) -> Result<R, SessionError> {
        self.query_costing(Cost::Session, f).await
    }

    /// [`SessionHandle::query`] that makes the answer to the open that started this owner.
    /// Nothing applied before `f` runs is announced (the answer holds it); what is applied
    /// after is announced once this call returns, so that the caller hands its answer to the
    /// client first: it must do so without awaiting anything else.
    pub async fn answer_open<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Session) -> R + Send + 'static,
    ) -> Result<R, SessionError> {
        /// Announces when the call ends, however it ends (a request dropped half-way too).
        struct AnnounceOnDrop<'a>(&'a SessionHandle);
        impl Drop for AnnounceOnDrop<'_> {
            fn drop(&mut self) {
                self.0.announce();
            }
        }
        let (tx, rx) = oneshot::channel();
        let gone = || SessionError::OwnerGone {
            path: self.path.clone(),
        };
        self.tx
            .send(Command::Answer(Box::new(move |s| {
                let _ = tx.send(f(s));
            })))
            .map_err(|_| gone())?;
        let _announce = AnnounceOnDrop(self);
        rx.await.map_err(|_| gone())
    }

    /// Tells the owner that the answer to its open is handed on: its changes are announced.
    fn announce(&self) {
        let _ = self.tx.send(Command::Announce);
    }

    /// [`SessionHandle::query`] for work on one entry's line ([`Cost::Line`]), which the owner
    /// runs on the runtime's thread however large the session is.
    pub async fn query_line<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Session) -> R + Send + 'static,
    ) -> Result<R, SessionError> {
        self.query_costing(Cost::Line, f).await
    }

    /// [`SessionHandle::query`] for work that may wait on something outside the daemon (a
    /// salvage takes file locks), or that grows with what it makes rather than with the
    /// session (an export) ([`Cost::Wait`]): the owner runs it off the runtime.
    pub async fn query_waiting<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Session) -> R + Send + 'static,
    ) -> Result<R, SessionError> {
        self.query_costing(Cost::Wait, f).await
    }

    async fn query_costing<R: Send + 'static>(
        &self,
        cost: Cost,
        f: impl FnOnce(&Session) -> R + Send + 'static,
    ) -> Result<R, SessionError> {
        let (tx, rx) = oneshot::channel();
        let gone = || SessionError::OwnerGone {
            path: self.path.clone(),
        };
        self.tx
            .send(Command::Run(
                Box::new(move |s| {
                    let _ = tx.send(f(s));
                }),
                cost,
            ))
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    /// Runs `f` by the owner after a refresh, with write access: `f` calls
    /// [`Session::write`] with the sink it is given, so the session's events are sent as the
    /// write applies entries. Writes and reads of one session run in arrival order.
    pub async fn update<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Session, &dyn EventSink) -> R + Send + 'static,
    ) -> Result<R, SessionError> {
        let (tx, rx) = oneshot::channel();
        let gone = || SessionError::OwnerGone {
            path: self.path.clone(),
        };
        self.tx
            .send(Command::Write(Box::new(move |s, sink| {
                let _ = tx.send(f(s, sink));
            })))
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    /// Tells the owner its file may have changed.
    pub fn hint(&self) {
        let _ = self.tx.send(Command::Hint);
    }

    /// Tells the owner how its file is followed now; `announce`: tell the client too (not
    /// before `session/open` has answered).
    fn set_live_mode(&self, mode: LiveMode, announce: bool) {
        let _ = self.tx.send(Command::Live { mode, announce });
    }

    /// Asks the owner to stop; the answer resolves once it stopped (at once if it already
    /// had), after every event it sent.
    fn close(&self) -> Shared<oneshot::Receiver<()>> {
        let (done, stopped) = oneshot::channel();
        let _ = self.tx.send(Command::Close { done });
        stopped.shared()
    }
}

/// The open sessions and the owners still stopping, under one lock.
#[derive(Default)]
struct Sessions {
    /// The last open number given ([`owner::Session::open_seq`]).
    last_seq: u64,
    open: HashMap<PathBuf, SessionHandle>,
    /// Closes in progress: an open of the same path waits for them (resolved when the close
    /// returns, after its owner stopped and its events were handed on), so no event of an
    /// earlier open follows the answer of a later one, and a close is answered before a
    /// reopen sent behind it.
    closing: HashMap<PathBuf, Shared<oneshot::Receiver<()>>>,
    /// Opens in progress: a request on the path waits for its open rather than find the
    /// session not open (a client that sends `session/contextAt` right behind `session/open`,
    /// without waiting for its answer). Resolves (its sender dropped) when the open ends,
    /// whether it succeeded or not.
    opening: HashMap<PathBuf, Shared<oneshot::Receiver<()>>>,
}

/// Marks an open of a path in progress (in the registry) until dropped: requests on the path wait
/// for it. [`Registry::open_held`] hands it to the caller, who drops it once the open's answer is
/// made, so theirs come after it.
pub struct Opening {
    sessions: Arc<Mutex<Sessions>>,
    path: PathBuf,
    done: Shared<oneshot::Receiver<()>>,
    _tx: oneshot::Sender<()>,
}

impl Drop for Opening {
    fn drop(&mut self) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions
            .opening
            .get(&self.path)
            .is_some_and(|d| d.ptr_eq(&self.done))
        {
            sessions.opening.remove(&self.path);
        }
    }
}

/// How often every open session checks its file whatever the watcher says: a write through
/// another name of the file (a hard link elsewhere, a bind mount) raises no event in the
/// watched directory, and a rewrite that keeps size and times raises one the stamp cannot
/// tell. Each check is a `stat` and two small reads per session (about 20 µs).
pub const SWEEP: std::time::Duration = std::time::Duration::from_secs(2);

/// Hints every open session every [`SWEEP`], on a thread of its own, until the registry is
/// gone. A thread that cannot start leaves sessions to the watcher and to requests.
fn sweep(sessions: std::sync::Weak<Mutex<Sessions>>) {
    let spawned = std::thread::Builder::new()
        .name("sessiond-sweep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(SWEEP);
                let Some(sessions) = sessions.upgrade() else {
                    return;
                };
                let sessions = sessions.lock().unwrap_or_else(PoisonError::into_inner);
                for handle in sessions.open.values() {
                    handle.hint();
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the sweep of open sessions: {e}");
    }
}

/// Tells whether an event of a session comes from the path's current open: a cheap clone of
/// the registry's table for the code that hands events to the client ([`Registry::current`]).
#[derive(Clone)]
pub struct Current(Arc<Mutex<Sessions>>);

impl Current {
    /// Whether `open_seq` is the open of `path` that is open now: false once the session was
    /// closed (or its close began), and for an earlier open of a path opened again.
    pub fn is_current(&self, path: &Path, open_seq: u64) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .get(path)
            .is_some_and(|h| h.open_seq == open_seq)
    }
}

/// The open sessions, by canonical path, and the directories watched for them.
pub struct Registry {
    sessions: Arc<Mutex<Sessions>>,
    sink: Arc<dyn EventSink>,
    watcher: Option<DirWatcher>,
    /// The watched directories whose new session files are announced, with each open
    /// session's companion directories ([`crate::dialect::Dialect::companion_dirs`]).
    births: Arc<Mutex<births::Births>>,
    companions: Mutex<HashMap<PathBuf, Vec<PathBuf>>>,
    /// The recursive watch of the Codex session trees of open rollouts (see [`TreeWatch`]),
    /// made for the first; `None` inside when it cannot be made, or with polling chosen.
    trees: Mutex<Option<Option<TreeWatch>>>,
    /// Each open rollout's Codex session tree, watched while it is open.
    codex_trees: Mutex<HashMap<PathBuf, PathBuf>>,
    /// Whether live events are used ([`WatchBackend::Auto`]).
    events: bool,
}

/// How long a burst of events under a Codex session tree is let run before its new files are
/// looked at.
const TREE_BURST: crate::watch_roots::Debounce = crate::watch_roots::Debounce {
    quiet: std::time::Duration::from_millis(10),
    max_delay: std::time::Duration::from_millis(100),
};

/// A recursive watch ([`crate::watch_roots::RootsWatcher`]) of the `$CODEX_HOME/sessions` trees
/// of open rollouts, whose events go to [`births::Births`] on a thread of its own: a fork or a
/// revert segment Codex writes into another day's directory is announced like one beside the
/// rollout. The thread ends when the watch is dropped.
struct TreeWatch {
    watcher: crate::watch_roots::RootsWatcher,
}

impl TreeWatch {
    /// Starts the watch (watching nothing yet) and its thread. `None` (logged) when either
    /// cannot start.
    fn start(
        births: std::sync::Weak<Mutex<births::Births>>,
        sink: Arc<dyn EventSink>,
    ) -> Option<Self> {
        use crate::watch_roots::{Marks, RootsWatcher};
        let marks: Arc<Mutex<Marks>> = Arc::default();
        let (kick, rx) = std::sync::mpsc::channel::<()>();
        let watcher = match RootsWatcher::new(
            marks.clone(),
            kick,
            "watching Codex's session tree",
            "looking at the whole tree again",
        ) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("Codex files made on another day are not announced: {e}");
                return None;
            }
        };
        let run = move || {
            while rx.recv().is_ok() {
                let open = TREE_BURST.settle(&rx);
                let (paths, everything) =
                    marks.lock().unwrap_or_else(PoisonError::into_inner).take();
                let Some(births) = births.upgrade() else {
                    return;
                };
                let changed = crate::watch::Changed {
                    paths: paths.into_iter().collect(),
                    everything,
                    modes: Vec::new(),
                };
                let created = births
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .changed(&changed);
                for c in &created {
                    sink.created(c);
                }
                if !open {
                    return;
                }
            }
        };
        match std::thread::Builder::new()
            .name("codex-births".into())
            .spawn(run)
        {
            Ok(_) => Some(TreeWatch { watcher }),
            Err(e) => {
                tracing::warn!("Codex files made on another day are not announced: {e}");
                None
            }
        }
    }
}

/// The Codex session tree of the rollout at `path` that its births are looked for in: the
/// highest directory above the rollout's own, up to `$CODEX_HOME/sessions`, inside the roots
/// (the rollout's own directory is watched already). `None` for a file not under a `sessions`
/// directory, or when only its own directory is inside the roots.
fn codex_tree(path: &Path, roots: &roots::Roots) -> Option<PathBuf> {
    let dir = path.parent()?;
    let sessions = dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "sessions"))?;
    dir.ancestors()
        .skip(1)
        .take_while(|a| a.starts_with(sessions))
        .filter(|a| roots.admits(a))
        .last()
        .map(Path::to_owned)
}

impl Registry {
    /// An empty registry whose sessions report to `sink`, watching with the default backend
    /// (see [`Registry::with_backend`]).
    pub fn new(sink: Arc<dyn EventSink>) -> Self {
        Self::with_backend(sink, WatchBackend::Auto)
    }

    /// An empty registry whose sessions report to `sink`. Starts the directory watcher with
    /// `backend`; without one (its thread could not start), sessions still refresh on every
    /// request and report [`LiveMode::Requests`].
    pub fn with_backend(sink: Arc<dyn EventSink>, backend: WatchBackend) -> Self {
        let sessions: Arc<Mutex<Sessions>> = Arc::default();
        let births: Arc<Mutex<births::Births>> = Arc::default();
        let hint_target = Arc::downgrade(&sessions);
        let births_target = Arc::downgrade(&births);
        let births_sink = sink.clone();
        let watcher = DirWatcher::start(backend, move |changed| {
            let Some(sessions) = hint_target.upgrade() else {
                return;
            };
            if let Some(births) = births_target.upgrade() {
                let created = births
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .changed(&changed);
                for c in &created {
                    births_sink.created(c);
                }
            }
            let sessions = sessions.lock().unwrap_or_else(PoisonError::into_inner);
            for handle in sessions.open.values() {
                let p = handle.path();
                for (dir, mode) in &changed.modes {
                    if p.parent() == Some(dir.as_path()) {
                        handle.set_live_mode(*mode, true);
                    }
                }
                // Only the session a path names, or every session of a directory named as a
                // whole (re-watched, polled): another file changing beside a session is no
                // reason to stat it (200 sessions in one directory would all wake per append).
                if changed.everything
                    || changed
                        .paths
                        .iter()
                        .any(|c| c.as_path() == p || Some(c.as_path()) == p.parent())
                {
                    handle.hint();
                }
            }
        });
        sweep(Arc::downgrade(&sessions));
        let watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!("file watching unavailable, sessions refresh on requests only: {e}");
                None
            }
        };
        Registry {
            sessions,
            sink,
            watcher,
            births,
            companions: Mutex::default(),
            trees: Mutex::default(),
            codex_trees: Mutex::default(),
            events: backend == WatchBackend::Auto,
        }
    }

    /// What tells the events of the current opens from those of closed or earlier ones.
    pub fn current(&self) -> Current {
        Current(self.sessions.clone())
    }

    /// The open session at a canonical path, once an open of it in progress has ended (a
    /// request sent right behind its `session/open` is served by that open). Errors:
    /// [`SessionError::NotOpen`].
    pub async fn get(&self, path: &Path) -> Result<SessionHandle, SessionError> {
        loop {
            let opening = {
                let sessions = self.lock();
                if let Some(h) = sessions.open.get(path) {
                    return Ok(h.clone());
                }
                match sessions.opening.get(path) {
                    Some(done) => done.clone(),
                    None => {
                        return Err(SessionError::NotOpen {
                            path: path.to_owned(),
                        });
                    }
                }
            };
            let _ = opening.await;
        }
    }

    /// Opens the session at a canonical path inside `roots`, or returns it if it is already
    /// open in a mode that satisfies the request (a strict open also serves lenient requests).
    /// Its owner checks that the file stays inside `roots` whenever it opens it again.
    pub async fn open(
        &self,
        path: &Path,
        mode: Mode,
        roots: &roots::Roots,
    ) -> Result<SessionHandle, SessionError> {
        let handle = self.open_held(path, mode, roots).await?.0;
        handle.announce();
        Ok(handle)
    }

    /// [`Registry::open`], with the mark that the open is in progress, if this call made one:
    /// requests on the path wait until it is dropped. A new owner announces nothing until its
    /// answer is made ([`SessionHandle::answer_open`]).
    pub async fn open_held(
        &self,
        path: &Path,
        mode: Mode,
        roots: &roots::Roots,
    ) -> Result<(SessionHandle, Option<Opening>), SessionError> {
        let (stopping, opening, open_seq) = {
            let mut sessions = self.lock();
            if let Some(h) = sessions.open.get(path)
                && (h.mode == Mode::Strict || mode == Mode::Lenient)
            {
                return Ok((h.clone(), None));
            }
            // Registered before the first await: the transport polls a request once before
            // it hands on the next, so a request read after this open finds it here.
            let (tx, rx) = oneshot::channel();
            let done = rx.shared();
            sessions.opening.insert(path.to_owned(), done.clone());
            let opening = Opening {
                sessions: self.sessions.clone(),
                path: path.to_owned(),
                done,
                _tx: tx,
            };
            sessions.last_seq += 1;
            let seq = sessions.last_seq;
            (sessions.closing.get(path).cloned(), opening, seq)
        };
        if let Some(stopped) = stopping {
            let _ = stopped.await;
        }
        let ready = owner::spawn(
            path.to_owned(),
            mode,
            Some(roots.clone()),
            self.sink.clone(),
            open_seq,
        );
        let tx = ready.await.map_err(|_| SessionError::OwnerGone {
            path: path.to_owned(),
        })??;
        let handle = SessionHandle {
            path: path.to_owned(),
            mode,
            open_seq,
            tx,
        };
        let replaced = {
            let mut sessions = self.lock();
            let replaced = match sessions.open.get(path) {
                // Another request opened it meanwhile in a mode that serves this one.
                Some(h) if h.mode == Mode::Strict || mode == Mode::Lenient => {
                    drop(handle.close());
                    return Ok((h.clone(), Some(opening)));
                }
                _ => sessions.open.insert(path.to_owned(), handle.clone()),
            };
            // Still under the lock: the watcher reports mode changes to the open sessions
            // under this same lock, so the owner cannot get an older mode after a newer one.
            let live = match (&self.watcher, path.parent()) {
                (Some(w), Some(dir)) => match &replaced {
                    None => w.watch(dir),
                    Some(_) => w.mode(dir).unwrap_or(LiveMode::Requests),
                },
                _ => LiveMode::Requests,
            };
            handle.set_live_mode(live, false);
            replaced
        };
        if replaced.is_none() {
            self.follow_births(&handle, roots).await;
        }
        if let Some(old) = replaced {
            // A lenient open replaced by a strict one: its events come before this answer.
            let _ = old.close().await;
            self.sink.barrier().await;
        }
        Ok((handle, Some(opening)))
    }

    /// Closes an open session and returns once its owner stopped and every event it sent was
    /// handed on ([`EventSink::barrier`]): nothing of this open reaches the client after the
    /// answer. Errors: [`SessionError::NotOpen`].
    pub async fn close(&self, path: &Path) -> Result<(), SessionError> {
        // An open of the path waits until this close is answered (not only until the owner
        // stopped): a pipelined close and reopen are answered in that order.
        let (closed_tx, closed_rx) = oneshot::channel::<()>();
        let closed = closed_rx.shared();
        let stopped = {
            let mut sessions = self.lock();
            let handle = sessions
                .open
                .remove(path)
                .ok_or_else(|| SessionError::NotOpen {
                    path: path.to_owned(),
                })?;
            sessions.closing.insert(path.to_owned(), closed.clone());
            handle.close()
        };
        if let (Some(w), Some(dir)) = (&self.watcher, path.parent()) {
            w.unwatch(dir);
        }
        self.unfollow_births(path);
        let _ = stopped.await;
        self.sink.barrier().await;
        let mut sessions = self.lock();
        if sessions
            .closing
            .get(path)
            .is_some_and(|s| s.ptr_eq(&closed))
        {
            sessions.closing.remove(path);
        }
        // Dropped as this call returns: the caller answers in the same step.
        drop(closed_tx);
        Ok(())
    }

    /// Closes every session (at shutdown).
    pub async fn close_all(&self) {
        let all: Vec<PathBuf> = self.lock().open.keys().cloned().collect();
        for p in all {
            let _ = self.close(&p).await;
        }
    }

    /// Announces the new session files of an opened session's directory and of its
    /// companion directories (watched too; one that does not exist yet is followed through
    /// its nearest ancestor until it does). A session still being born may be of any
    /// dialect: every dialect's companions are followed.
    async fn follow_births(&self, handle: &SessionHandle, roots: &roots::Roots) {
        let path = handle.path().to_owned();
        let Some(dir) = path.parent() else { return };
        let dialects = match handle.query_line(|s| (s.dialect(), s.is_pending())).await {
            Ok((d, false)) => vec![d],
            Ok((_, true)) => vec![Dialect::Pi, Dialect::Claude],
            Err(_) => return,
        };
        // A rollout's forks and segments may land in another day's directory.
        let tree = match dialects[..] {
            [Dialect::Codex] if self.events => codex_tree(&path, roots),
            _ => None,
        };
        let companions: Vec<PathBuf> = dialects
            .into_iter()
            .flat_map(|d| d.companion_dirs(&path))
            .collect();
        let mut births = self.births.lock().unwrap_or_else(PoisonError::into_inner);
        births.track(dir, roots);
        for c in &companions {
            if let Some(w) = &self.watcher {
                w.watch(c);
            }
            births.track(c, roots);
        }
        let first = tree.as_ref().map(|t| births.track_tree(t, roots));
        drop(births);
        self.companions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.clone(), companions);
        if let Some(tree) = tree {
            if first == Some(true) {
                let mut trees = self.trees.lock().unwrap_or_else(PoisonError::into_inner);
                let watch = trees.get_or_insert_with(|| {
                    TreeWatch::start(Arc::downgrade(&self.births), self.sink.clone())
                });
                if let Some(w) = watch {
                    w.watcher.watch(std::slice::from_ref(&tree), |dir, e| {
                        tracing::warn!(
                            "cannot watch {}: Codex files made below it on another day are not announced: {e}",
                            dir.display()
                        );
                    });
                }
            }
            self.codex_trees
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(path, tree);
        }
    }

    /// Stops what [`Registry::follow_births`] started for a closed session.
    fn unfollow_births(&self, path: &Path) {
        let companions = self
            .companions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(path);
        let tree = self
            .codex_trees
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(path);
        if let Some(tree) = tree {
            let last = self
                .births
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .untrack_tree(&tree);
            if last
                && let Some(Some(w)) =
                    &mut *self.trees.lock().unwrap_or_else(PoisonError::into_inner)
            {
                w.watcher.unwatch(&tree);
            }
        }
        let Some(companions) = companions else { return };
        let mut births = self.births.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dir) = path.parent() {
            births.untrack(dir);
        }
        for c in &companions {
            if let Some(w) = &self.watcher {
                w.unwatch(c);
            }
            births.untrack(c);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::Write;
    use std::ops::Range;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::core::tree::NodeIdx;
    use owner::ReloadReason;

    /// The changes sessions announced: (open number, entries added).
    #[derive(Default)]
    struct Changes(Mutex<Vec<(u64, usize)>>);

    impl EventSink for Changes {
        fn appended(&self, s: &owner::Session, added: Range<NodeIdx>) {
            self.0.lock().unwrap().push((s.open_seq(), added.len()));
        }
        fn reloaded(&self, s: &owner::Session, _: ReloadReason) {
            self.0.lock().unwrap().push((s.open_seq(), usize::MAX));
        }
        fn corrupt(&self, _: &owner::Session, _: &crate::core::diagnostics::Corruption) {}
    }

    fn entry(i: usize) -> String {
        format!(
            "{{\"type\":\"custom\",\"id\":\"e{i}\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"customType\":\"c\"}}\n"
        )
    }

    fn append(path: &Path, i: usize) {
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(entry(i).as_bytes()).unwrap();
    }

    /// What an owner applies before the answer to its open is in the answer and is never
    /// announced; what it applies after is announced once, tagged with its open's number; a
    /// closed open, or an earlier open of a path opened again, is no longer current.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn an_open_announces_only_what_follows_its_answer() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(tmp.path()).unwrap();
        let path = dir.join("s.jsonl");
        let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
        std::fs::write(&path, format!("{header}\n{}", entry(0))).unwrap();
        let changes = Arc::new(Changes::default());
        let registry = Registry::new(changes.clone());
        let current = registry.current();
        let roots = roots::Roots::new([dir.clone()]);

        let (handle, opening) = registry
            .open_held(&path, Mode::Strict, &roots)
            .await
            .unwrap();
        // Appended and applied before the answer: in the answer, not announced.
        append(&path, 1);
        handle.query(|s| s.len()).await.unwrap();
        let answered = handle.answer_open(|s| s.len()).await.unwrap();
        drop(opening);
        assert_eq!(answered, 2);
        assert_eq!(*changes.0.lock().unwrap(), []);
        // After the answer: announced once, by this open.
        append(&path, 2);
        assert_eq!(handle.query(|s| s.len()).await.unwrap(), 3);
        let first = handle.open_seq;
        assert_eq!(*changes.0.lock().unwrap(), [(first, 1)]);
        assert!(current.is_current(&path, first));

        registry.close(&path).await.unwrap();
        assert!(!current.is_current(&path, first), "closed");
        let again = registry.open(&path, Mode::Strict, &roots).await.unwrap();
        assert_ne!(again.open_seq, first);
        assert!(current.is_current(&path, again.open_seq));
        assert!(!current.is_current(&path, first), "an earlier open");
        append(&path, 3);
        assert_eq!(again.query(|s| s.len()).await.unwrap(), 4);
        assert_eq!(
            *changes.0.lock().unwrap(),
            [(first, 1), (again.open_seq, 1)]
        );
    }
}
