//! File watching: `notify` on the parent directories of open sessions (directories, not
//! files, so a rename-replace or a delete-and-recreate is seen), turned into hints.
//!
//! Events are hints, not facts: they are debounced for a few milliseconds, deduplicated,
//! and handed on as "something under these paths changed". The owners then check the file
//! themselves, so a duplicated, coalesced or dropped event costs at most one `stat`.
//!
//! Watches are kept alive by themselves:
//!
//! * **A directory that does not exist** (deleted, renamed away, not created yet) is watched
//!   through its nearest existing ancestor. An event naming a directory on the way down
//!   (created, renamed in) moves the watch back down; an event saying a watched directory
//!   itself went away moves it up. After every move the directory's sessions are hinted, so
//!   whatever happened between the change and the new watch is seen (arm, then check).
//! * **Live events can be unavailable**: when the platform watcher cannot be created (the
//!   user's inotify instances are used up) or refuses a directory (its watches are used up),
//!   that directory is followed by `notify`'s [`PollWatcher`] instead, and the change of
//!   [`LiveMode`] is reported so clients are told. Every [`EVENTS_RETRY`] the live backend is
//!   tried again for the directories that fell back.
//! * `PollWatcher` compares modification times in whole seconds, so a second append within
//!   the same second would go unseen; each [`POLL_INTERVAL`] the sessions of polled
//!   directories are therefore hinted as well (one `stat` per session, the same check every
//!   request makes).
//! * Every [`RECHECK`] each watched directory is looked up again (a few `stat`s per
//!   directory), for what no event reports: an ancestor renamed away leaves an inotify watch
//!   following the moved directory.
//!
//! Nothing here blocks on the file system beyond `stat` and the watch calls themselves; the
//! background thread sleeps until an event arrives or a timer is due.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify::{Config, PollWatcher, RecursiveMode, Watcher};

/// How long to wait after an event for more before handing the batch on. Short, because
/// the append→`didChange` latency budget is tens of milliseconds.
pub const DEBOUNCE: Duration = Duration::from_millis(3);

/// How often polled directories are scanned and their sessions hinted.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How often every watched directory is looked up again (see the module comment).
pub const RECHECK: Duration = Duration::from_secs(10);

/// How often directories that fell back to polling try live events again.
pub const EVENTS_RETRY: Duration = Duration::from_secs(30);

pub use crate::watch_roots::WATCH_ENV;

/// How an open session's file is followed, as told to clients (`liveMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveMode {
    /// Live file-system events: changes are announced within milliseconds.
    Events,
    /// Polling every [`POLL_INTERVAL`]: changes are announced within about a second.
    Polling,
    /// Not followed: the session is brought up to date only by requests for it.
    Requests,
}

impl LiveMode {
    /// The stable wire name: `events`, `polling` or `requests`.
    pub fn as_str(self) -> &'static str {
        match self {
            LiveMode::Events => "events",
            LiveMode::Polling => "polling",
            LiveMode::Requests => "requests",
        }
    }
}

/// Which backends a [`DirWatcher`] may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WatchBackend {
    /// Live events where the platform gives them, polling where it does not.
    #[default]
    Auto,
    /// Polling for every directory.
    Poll,
}

impl WatchBackend {
    /// The backend chosen by [`WATCH_ENV`]; an unknown value is logged and ignored.
    pub fn from_env() -> Self {
        match std::env::var(WATCH_ENV) {
            Ok(v) if v.eq_ignore_ascii_case("poll") => WatchBackend::Poll,
            Ok(v) if v.is_empty() || v.eq_ignore_ascii_case("auto") => WatchBackend::Auto,
            Ok(v) => {
                tracing::warn!("{WATCH_ENV}={v:?} is not `poll` or `auto`; using `auto`");
                WatchBackend::Auto
            }
            Err(_) => WatchBackend::Auto,
        }
    }
}

/// One debounced batch of changes.
#[derive(Debug, Default)]
pub struct Changed {
    /// Paths named by the events, and watched directories whose sessions should check their
    /// file (re-watched, or polled).
    pub paths: HashSet<PathBuf>,
    /// The watcher lost events (queue overflow): treat everything as changed.
    pub everything: bool,
    /// Watched directories whose [`LiveMode`] changed, with the new mode.
    pub modes: Vec<(PathBuf, LiveMode)>,
}

/// What the background thread receives.
enum Msg {
    Event(notify::Result<notify::Event>),
    /// Something is polled now: start the poll timer.
    Wake,
}

/// Watches directories, each as many times as it is asked to (reference counted), keeping
/// each watch alive across deletion and falling back to polling (see the module comment).
pub struct DirWatcher {
    inner: Arc<Mutex<Inner>>,
}

/// Which notify watcher holds a watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Events,
    Poll,
}

impl Via {
    fn mode(self) -> LiveMode {
        match self {
            Via::Events => LiveMode::Events,
            Via::Poll => LiveMode::Polling,
        }
    }
}

/// `(device, inode)` of a directory, to notice one deleted and recreated under the same name.
type DirId = (u64, u64);

/// One notify watch on an existing directory, shared by the wanted directories armed there.
struct Armed {
    via: Via,
    users: usize,
    id: DirId,
    /// Polled because live events failed or were unavailable (not because polling was forced).
    fell_back: bool,
}

/// A directory the registry asked to watch.
struct Wanted {
    users: usize,
    /// Where it is watched: itself, or its nearest existing ancestor; `None` when arming
    /// failed (retried at the next timer).
    at: Option<PathBuf>,
    via: Via,
}

struct Inner {
    backend: WatchBackend,
    tx: mpsc::Sender<Msg>,
    events: Option<Box<dyn Watcher + Send>>,
    poll: Option<PollWatcher>,
    armed: HashMap<PathBuf, Armed>,
    wanted: HashMap<PathBuf, Wanted>,
}

impl DirWatcher {
    /// Starts watching nothing yet; `on_change` is called on a background thread with each
    /// debounced batch. With [`WatchBackend::Auto`], a platform watcher that cannot be created
    /// is logged and every directory is polled. Errors: the background thread cannot start.
    pub fn start(
        backend: WatchBackend,
        on_change: impl Fn(Changed) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let events = match backend {
            WatchBackend::Poll => {
                tracing::info!("{WATCH_ENV}=poll: following session files by polling");
                None
            }
            WatchBackend::Auto => match live_watcher(&tx) {
                Ok(w) => Some(w),
                Err(e) => {
                    tracing::warn!("live file events unavailable, polling instead: {e}");
                    None
                }
            },
        };
        Self::start_with(backend, events, tx, rx, on_change)
    }

    fn start_with(
        backend: WatchBackend,
        events: Option<Box<dyn Watcher + Send>>,
        tx: mpsc::Sender<Msg>,
        rx: mpsc::Receiver<Msg>,
        on_change: impl Fn(Changed) + Send + 'static,
    ) -> std::io::Result<Self> {
        let inner = Arc::new(Mutex::new(Inner {
            backend,
            tx,
            events,
            poll: None,
            armed: HashMap::new(),
            wanted: HashMap::new(),
        }));
        let weak = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("watch-debounce".into())
            .spawn(move || run(&rx, &weak, &on_change))?;
        Ok(DirWatcher { inner })
    }

    /// Starts (or counts one more use of) a watch on `dir`, non-recursive, and returns how the
    /// directory is followed now. A directory that does not exist is watched from its nearest
    /// existing ancestor until it appears.
    pub fn watch(&self, dir: &Path) -> LiveMode {
        let mut inner = self.lock();
        if let Some(w) = inner.wanted.get_mut(dir) {
            w.users += 1;
            return w.via.mode();
        }
        inner.wanted.insert(
            dir.to_owned(),
            Wanted {
                users: 1,
                at: None,
                via: Via::Poll,
            },
        );
        inner.arm(dir, false).mode()
    }

    /// How `dir` is followed, if it is watched.
    pub fn mode(&self, dir: &Path) -> Option<LiveMode> {
        self.lock().wanted.get(dir).map(|w| w.via.mode())
    }

    /// Drops one use of the watch on `dir`; the last one stops it.
    pub fn unwatch(&self, dir: &Path) {
        let mut inner = self.lock();
        let Some(w) = inner.wanted.get_mut(dir) else {
            return;
        };
        w.users -= 1;
        if w.users == 0
            && let Some(w) = inner.wanted.remove(dir)
            && let Some(at) = w.at
        {
            inner.disarm(&at);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The platform's live watcher, sending into `tx`.
fn live_watcher(tx: &mpsc::Sender<Msg>) -> notify::Result<Box<dyn Watcher + Send>> {
    let tx = tx.clone();
    let w = notify::recommended_watcher(move |e| {
        let _ = tx.send(Msg::Event(e));
    })?;
    Ok(Box::new(w))
}

/// The directory `dir` or its nearest existing ancestor, with its id (`/` at worst).
fn nearest_existing(dir: &Path) -> Option<(PathBuf, DirId)> {
    let mut at = Some(dir);
    while let Some(p) = at {
        if let Ok(m) = std::fs::metadata(p)
            && m.is_dir()
        {
            return Some((p.to_owned(), (m.dev(), m.ino())));
        }
        at = p.parent();
    }
    None
}

fn dir_id(dir: &Path) -> Option<DirId> {
    std::fs::metadata(dir)
        .ok()
        .filter(std::fs::Metadata::is_dir)
        .map(|m| (m.dev(), m.ino()))
}

/// The watch could not be placed because the directory went away meanwhile.
struct Vanished;

/// How many times arming looks again when the tree changes under it (each retry means a
/// directory appeared or vanished between the look and the watch).
const ARM_ATTEMPTS: usize = 8;

impl Inner {
    /// Places the watch for the wanted directory `dir` (whose entry exists, disarmed): on
    /// `dir`, or on its nearest existing ancestor. `quiet`: a retry, log failures at debug.
    fn arm(&mut self, dir: &Path, quiet: bool) -> Via {
        for _ in 0..ARM_ATTEMPTS {
            let Some((at, id)) = nearest_existing(dir) else {
                break;
            };
            let Ok(via) = self.arm_path(&at, id, quiet) else {
                continue;
            };
            // A directory on the way down may have appeared between the look and the watch:
            // its creation event went to nobody, so look once more.
            if at != dir && below(dir, &at).is_some_and(|next| next.exists()) {
                self.disarm(&at);
                continue;
            }
            if let Some(w) = self.wanted.get_mut(dir) {
                w.at = Some(at);
                w.via = via;
            }
            return via;
        }
        tracing::warn!(
            "cannot place a watch for {}; looking again in {}s",
            dir.display(),
            POLL_INTERVAL.as_secs()
        );
        let via = Via::Poll;
        if let Some(w) = self.wanted.get_mut(dir) {
            w.at = None;
            w.via = via;
        }
        let _ = self.tx.send(Msg::Wake);
        via
    }

    /// Counts one more user of a watch on the existing directory `at`, placing it if needed:
    /// live events unless forced or refused, polling otherwise.
    fn arm_path(&mut self, at: &Path, id: DirId, quiet: bool) -> Result<Via, Vanished> {
        if let Some(a) = self.armed.get_mut(at) {
            a.users += 1;
            return Ok(a.via);
        }
        let (via, fell_back) = match (&mut self.events, self.backend) {
            (_, WatchBackend::Poll) => (Via::Poll, false),
            (None, WatchBackend::Auto) => (Via::Poll, true),
            (Some(w), WatchBackend::Auto) => match w.watch(at, RecursiveMode::NonRecursive) {
                Ok(()) => (Via::Events, false),
                Err(e) if is_not_found(&e) => return Err(Vanished),
                Err(e) => {
                    if quiet {
                        tracing::debug!("still cannot watch {}: {e}", at.display());
                    } else {
                        tracing::warn!("cannot watch {}, polling it: {e}", at.display());
                    }
                    (Via::Poll, true)
                }
            },
        };
        if via == Via::Poll {
            if let Some(p) = self.poll_watcher() {
                // Never fails; a directory missing by now is simply not scanned.
                let _ = p.watch(at, RecursiveMode::NonRecursive);
            }
            if dir_id(at).is_none() {
                if let Some(p) = &mut self.poll {
                    let _ = p.unwatch(at);
                }
                return Err(Vanished);
            }
            let _ = self.tx.send(Msg::Wake);
        }
        self.armed.insert(
            at.to_owned(),
            Armed {
                via,
                users: 1,
                id,
                fell_back,
            },
        );
        Ok(via)
    }

    /// Drops one user of the watch on `at`; the last one removes it from its backend.
    fn disarm(&mut self, at: &Path) {
        let Some(a) = self.armed.get_mut(at) else {
            return;
        };
        a.users -= 1;
        if a.users > 0 {
            return;
        }
        let via = a.via;
        self.armed.remove(at);
        // Errors are expected: notify drops a watch by itself when its directory goes away.
        let _ = match via {
            Via::Events => self.events.as_mut().map(|w| w.unwatch(at)),
            Via::Poll => self.poll.as_mut().map(|w| w.unwatch(at)),
        };
    }

    /// The poll watcher, created on first use.
    fn poll_watcher(&mut self) -> Option<&mut PollWatcher> {
        if self.poll.is_none() {
            let tx = self.tx.clone();
            let config = Config::default().with_poll_interval(POLL_INTERVAL);
            match PollWatcher::new(
                move |e| {
                    let _ = tx.send(Msg::Event(e));
                },
                config,
            ) {
                Ok(p) => self.poll = Some(p),
                // The poll timer still hints polled sessions every interval.
                Err(e) => tracing::warn!("cannot start the poll watcher: {e}"),
            }
        }
        self.poll.as_mut()
    }

    /// Whether the background thread must wake on its own (something is polled or unarmed).
    fn polling(&self) -> bool {
        self.wanted
            .values()
            .any(|w| w.via == Via::Poll || w.at.is_none())
    }

    /// Re-places the watches a batch shows to be stale and completes the batch for the
    /// registry: moved directories and, on a timer tick, polled ones are added to `paths`;
    /// mode changes to `modes`.
    fn settle(&mut self, batch: Batch, timers: Timers) -> Changed {
        let mut recheck: HashSet<PathBuf> = HashSet::new();
        let mut stale: HashSet<PathBuf> = batch
            .gone
            .iter()
            .filter(|p| self.armed.contains_key(*p))
            .cloned()
            .collect();
        if batch.everything || timers.recheck {
            recheck.extend(self.wanted.keys().cloned());
        } else {
            for (dir, w) in &self.wanted {
                if (w.at.is_none() && timers.tick) || batch.paths.iter().any(|p| dir.starts_with(p))
                {
                    recheck.insert(dir.clone());
                }
            }
        }
        if timers.retry && self.backend == WatchBackend::Auto {
            if self.events.is_none() {
                match live_watcher(&self.tx) {
                    Ok(w) => {
                        tracing::info!("live file events are available again");
                        self.events = Some(w);
                    }
                    Err(e) => tracing::debug!("live file events still unavailable: {e}"),
                }
            }
            if self.events.is_some() {
                stale.extend(
                    self.armed
                        .iter()
                        .filter(|(_, a)| a.fell_back)
                        .map(|(p, _)| p.clone()),
                );
            }
        }

        // Which wanted directories to re-place: those whose watch is stale (its directory
        // went away or was replaced: every user moves, so the notify watch is really
        // removed before it is placed again) and those whose nearest existing directory moved.
        let mut moved: Vec<PathBuf> = Vec::new();
        for dir in &recheck {
            let Some(w) = self.wanted.get(dir) else {
                continue;
            };
            let now = nearest_existing(dir);
            match (&w.at, now) {
                (Some(at), Some((near, id))) if *at == near => {
                    if self.armed.get(at).is_some_and(|a| a.id != id) {
                        stale.insert(at.clone());
                    }
                }
                _ => moved.push(dir.clone()),
            }
        }
        for (dir, w) in &self.wanted {
            if w.at.as_ref().is_some_and(|at| stale.contains(at)) && !moved.contains(dir) {
                moved.push(dir.clone());
            }
        }

        let mut out = Changed {
            paths: batch.paths,
            everything: batch.everything,
            modes: Vec::new(),
        };
        let before: Vec<(PathBuf, Via)> = moved
            .iter()
            .filter_map(|d| self.wanted.get(d).map(|w| (d.clone(), w.via)))
            .collect();
        for dir in &moved {
            if let Some(at) = self.wanted.get_mut(dir).and_then(|w| w.at.take()) {
                self.disarm(&at);
            }
        }
        for (dir, old) in before {
            let via = self.arm(&dir, timers.retry);
            tracing::debug!(dir = %dir.display(), ?via, "watch placed again");
            if via != old {
                if via == Via::Poll {
                    tracing::warn!("{}: following by polling", dir.display());
                } else {
                    tracing::info!("{}: following by live events again", dir.display());
                }
                out.modes.push((dir.clone(), via.mode()));
            }
            // Arm, then check: what changed before the new watch is found by the owners.
            out.paths.insert(dir);
        }
        if timers.tick {
            out.paths.extend(
                self.wanted
                    .iter()
                    .filter(|(_, w)| w.via == Via::Poll)
                    .map(|(d, _)| d.clone()),
            );
        }
        out
    }
}

/// The child of `ancestor` on the way down to `dir`.
fn below(dir: &Path, ancestor: &Path) -> Option<PathBuf> {
    let rest = dir.strip_prefix(ancestor).ok()?;
    let first = rest.components().next()?;
    Some(ancestor.join(first))
}

fn is_not_found(e: &notify::Error) -> bool {
    match &e.kind {
        notify::ErrorKind::PathNotFound => true,
        notify::ErrorKind::Io(io) => io.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

/// Events gathered in one debounce window.
#[derive(Default)]
struct Batch {
    paths: HashSet<PathBuf>,
    /// Paths reported removed or renamed away (a watched directory among them lost its watch).
    gone: HashSet<PathBuf>,
    everything: bool,
}

impl Batch {
    fn absorb(&mut self, msg: Msg) {
        match msg {
            Msg::Wake => {}
            // Opening, reading and closing a file without writing changes nothing, and the
            // owners themselves open their file to read it: a hint per such event would make
            // each read a cause of the next. A writer closing its file (`IN_CLOSE_WRITE`)
            // still counts.
            Msg::Event(Ok(e)) if matches!(e.kind, EventKind::Access(a) if a != AccessKind::Close(AccessMode::Write)) =>
                {}
            Msg::Event(Ok(e)) => {
                if e.need_rescan() {
                    self.everything = true;
                }
                if matches!(
                    e.kind,
                    EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
                ) {
                    self.gone.extend(e.paths.iter().cloned());
                }
                self.paths.extend(e.paths);
            }
            // A path-less error may mean lost events; one about paths (a polled directory that
            // cannot be read) is a hint about them.
            Msg::Event(Err(e)) if e.paths.is_empty() => {
                tracing::warn!("watch error: {e}");
                self.everything = true;
            }
            Msg::Event(Err(e)) => {
                tracing::debug!("watch error: {e}");
                self.paths.extend(e.paths);
            }
        }
    }
}

/// Which timers are due in one round of the background thread.
#[derive(Clone, Copy, Default)]
struct Timers {
    tick: bool,
    recheck: bool,
    retry: bool,
}

fn run(rx: &mpsc::Receiver<Msg>, inner: &Weak<Mutex<Inner>>, on_change: &dyn Fn(Changed)) {
    let start = Instant::now();
    let mut next_tick = start + POLL_INTERVAL;
    let mut next_recheck = start + RECHECK;
    let mut next_retry = start + EVENTS_RETRY;
    loop {
        let Some(polling) = inner
            .upgrade()
            .map(|i| i.lock().unwrap_or_else(PoisonError::into_inner).polling())
        else {
            return;
        };
        let now = Instant::now();
        if !polling {
            // Nothing polled: the poll timer restarts when something is.
            next_tick = now + POLL_INTERVAL;
        }
        let due = if polling {
            next_tick.min(next_recheck)
        } else {
            next_recheck
        };
        let mut batch = Batch::default();
        match rx.recv_timeout(due.saturating_duration_since(now)) {
            Ok(first) => {
                batch.absorb(first);
                let deadline = Instant::now() + DEBOUNCE;
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(m) => batch.absorb(m),
                        Err(mpsc::RecvTimeoutError::Timeout) => break,
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        let mut timers = Timers::default();
        if polling && now >= next_tick {
            timers.tick = true;
            next_tick = now + POLL_INTERVAL;
        }
        if now >= next_recheck {
            timers.recheck = true;
            next_recheck = now + RECHECK;
        }
        if now >= next_retry {
            timers.retry = true;
            next_retry = now + EVENTS_RETRY;
        }
        let quiet = batch.paths.is_empty() && !batch.everything;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let changed = inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .settle(batch, timers);
        drop(inner);
        if !(quiet && changed.paths.is_empty() && changed.modes.is_empty()) {
            on_change(changed);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A live backend that refuses every watch, like inotify with its watches used up.
    struct Refusing;

    impl Watcher for Refusing {
        fn new<F: notify::EventHandler>(_: F, _: Config) -> notify::Result<Self> {
            Ok(Refusing)
        }
        fn watch(&mut self, _: &Path, _: RecursiveMode) -> notify::Result<()> {
            Err(notify::Error::new(notify::ErrorKind::MaxFilesWatch))
        }
        fn unwatch(&mut self, _: &Path) -> notify::Result<()> {
            Ok(())
        }
        fn kind() -> notify::WatcherKind {
            notify::WatcherKind::NullWatcher
        }
    }

    fn collecting() -> (impl Fn(Changed) + Send + 'static, mpsc::Receiver<Changed>) {
        let (tx, rx) = mpsc::channel();
        (
            move |c| {
                let _ = tx.send(c);
            },
            rx,
        )
    }

    /// Waits until a batch satisfies `f`.
    fn wait_for(rx: &mpsc::Receiver<Changed>, f: impl Fn(&Changed) -> bool) -> Changed {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let c = rx.recv_timeout(left).expect("no matching batch in time");
            if f(&c) {
                return c;
            }
        }
    }

    #[test]
    fn a_refused_live_watch_falls_back_to_polling() {
        let tmp = tempfile::tempdir().unwrap();
        let (on_change, rx) = collecting();
        let (tx, mrx) = mpsc::channel();
        let w = DirWatcher::start_with(
            WatchBackend::Auto,
            Some(Box::new(Refusing)),
            tx,
            mrx,
            on_change,
        )
        .unwrap();
        assert_eq!(w.watch(tmp.path()), LiveMode::Polling);
        assert_eq!(w.mode(tmp.path()), Some(LiveMode::Polling));
        // The poll timer hints the directory even without a change.
        wait_for(&rx, |c| c.paths.contains(tmp.path()));
        w.unwatch(tmp.path());
        assert_eq!(w.mode(tmp.path()), None);
    }

    #[test]
    fn without_a_live_watcher_everything_is_polled() {
        let tmp = tempfile::tempdir().unwrap();
        let (on_change, rx) = collecting();
        let (tx, mrx) = mpsc::channel();
        let w = DirWatcher::start_with(WatchBackend::Auto, None, tx, mrx, on_change).unwrap();
        assert_eq!(w.watch(tmp.path()), LiveMode::Polling);
        wait_for(&rx, |c| c.paths.contains(tmp.path()));
    }

    #[test]
    fn forced_polling_reports_polling() {
        let tmp = tempfile::tempdir().unwrap();
        let (on_change, rx) = collecting();
        let w = DirWatcher::start(WatchBackend::Poll, on_change).unwrap();
        assert_eq!(w.watch(tmp.path()), LiveMode::Polling);
        std::fs::write(tmp.path().join("a.jsonl"), "x").unwrap();
        wait_for(&rx, |c| c.paths.contains(tmp.path()));
    }

    #[test]
    fn a_deleted_and_recreated_directory_is_watched_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let (on_change, rx) = collecting();
        let w = DirWatcher::start(WatchBackend::Auto, on_change).unwrap();
        assert_eq!(w.watch(&dir), LiveMode::Events);
        std::fs::remove_dir_all(&dir).unwrap();
        wait_for(&rx, |c| c.paths.contains(&dir));
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("s.jsonl");
        std::fs::write(&file, "x").unwrap();
        // The write may come before the new watch: then the directory is reported as placed.
        wait_for(&rx, |c| c.paths.contains(&file) || c.paths.contains(&dir));
        // The watch placed on the new directory is live.
        std::fs::write(&file, "xy").unwrap();
        wait_for(&rx, |c| c.paths.contains(&file));
    }

    #[test]
    fn a_directory_created_later_is_watched_from_its_ancestor() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/c");
        let (on_change, rx) = collecting();
        let w = DirWatcher::start(WatchBackend::Auto, on_change).unwrap();
        assert_eq!(w.watch(&dir), LiveMode::Events);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("s.jsonl");
        // The watch moves down one or more steps; each step reports the directory.
        wait_for(&rx, |c| c.paths.contains(&dir));
        // Once it reached the directory, a write in it is an event.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            std::fs::write(&file, "x").unwrap();
            if rx
                .recv_timeout(Duration::from_millis(200))
                .is_ok_and(|c| c.paths.contains(&file))
            {
                break;
            }
            assert!(Instant::now() < deadline, "no event for {}", file.display());
        }
    }
}
