//! The session list kept live for the daemon's client (`session/didChangeList`): once the
//! client has listed sessions, every session file under the roots it listed that appears,
//! changes (size, entries, tokens, name, leaves: any field of its row) or goes away is pushed
//! to it, as rows in exactly the shape `session/list` gives them.
//!
//! The roots listed are watched recursively (`notify`); every event marks its path. A thread
//! acts on the marks once the events have been quiet for [`QUIET`] (at most [`MAX_DELAY`]
//! after the first), and never sooner than [`MIN_INTERVAL`] after its last notification, so
//! a session an agent appends to all the time costs one notification per half second. Only
//! the files the marks name are looked at, through the listing cache
//! ([`crate::listing::ListCache`]): a file whose size, mtime and inode are unchanged is only
//! `stat`ed, a changed one read again. Each row sent is compared with the row the client last
//! got (from `session/list` or from a notification), so a touched file whose row is the same
//! is not announced.
//!
//! Events are hints: a directory named as a whole (created, renamed in or away) is listed
//! again, and the rows the client has under it are checked. The whole roots are passed over
//! again (one `stat` per file) every [`RESCAN`], after the watcher lost events, right after
//! each `session/list` (so a change made while the listing was read is not lost), and every
//! [`POLL`] when events cannot be had (a root that cannot be watched, `SESSIOND_WATCH=poll`).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::listing::{ListCache, Listed, ListedSession};
use crate::storage::list;
use crate::watch_roots::{Debounce, Marks, RootsWatcher};

/// Events are acted on once none has come for this long.
pub const QUIET: Duration = Duration::from_millis(100);
/// ... or this long after the first of a burst, whichever comes first.
pub const MAX_DELAY: Duration = Duration::from_millis(400);
/// A burst of events, waited out.
const BURST: Debounce = Debounce {
    quiet: QUIET,
    max_delay: MAX_DELAY,
};
/// At most one notification per this long.
pub const MIN_INTERVAL: Duration = Duration::from_millis(500);
/// How often the listed roots are passed over again while events are watched.
pub const RESCAN: Duration = Duration::from_secs(30);
/// How often they are passed over when some root cannot be watched.
pub const POLL: Duration = Duration::from_secs(2);

/// What changed in the listing since the client last heard: `session/didChangeList`.
#[derive(Debug, Default, PartialEq)]
pub struct ListChange {
    /// New or changed sessions, as `session/list` lists them, by path.
    pub changed: Vec<ListedSession>,
    /// Sessions the client had that are gone (deleted, moved away, no longer a session).
    pub removed: Vec<PathBuf>,
}

/// Where a [`ListChange`] goes (the server's notification queue).
pub type Sink = Box<dyn Fn(ListChange) + Send + 'static>;

/// The listing cache the daemon shares between `session/list` and this feed.
pub type CacheSlot = Arc<Mutex<Option<ListCache>>>;

/// What the client has been told, and what is watched for it.
#[derive(Default)]
struct Feed {
    /// Roots listed so far (the subscription).
    roots: Vec<PathBuf>,
    /// Roots given to the watcher.
    watched: Vec<PathBuf>,
    watcher: Option<RootsWatcher>,
    /// The row the client last got, by path.
    known: HashMap<PathBuf, ListedSession>,
}

/// The live session list of one daemon. See the module docs.
pub struct ListFeed {
    marks: Arc<Mutex<Marks>>,
    feed: Arc<Mutex<Feed>>,
    kick: mpsc::Sender<()>,
    /// False under `SESSIOND_WATCH=poll`: the roots are passed over every [`POLL`].
    use_events: bool,
}

impl ListFeed {
    /// Starts the feed's thread; nothing is watched or sent until [`ListFeed::listed`].
    /// `cache` and `cache_file` are `session/list`'s; `send` delivers each change.
    pub fn start(cache: CacheSlot, cache_file: PathBuf, send: Sink) -> Arc<ListFeed> {
        let (kick, rx) = mpsc::channel::<()>();
        // Paths marked by events, shared with the watcher's callback (which takes nothing
        // else).
        let marks = Arc::new(Mutex::new(Marks::default()));
        let feed = Arc::new(Mutex::new(Feed::default()));
        let use_events = crate::watch_roots::events_wanted();
        let live = Arc::new(ListFeed {
            marks: marks.clone(),
            feed: feed.clone(),
            kick,
            use_events,
        });
        let worker = Worker {
            marks,
            feed,
            cache,
            cache_file,
            send,
        };
        std::thread::Builder::new()
            .name("sessiond-list-feed".into())
            .spawn(move || worker.run(&rx))
            .map_err(|e| tracing::warn!("list changes: no thread ({e}); none is announced"))
            .ok();
        live
    }

    /// A `session/list` over `roots` answered `sessions`: the client has these rows now, and
    /// changes under `roots` are announced from here on. The roots are passed over once more
    /// shortly, for what changed while the listing was read.
    pub fn listed(&self, roots: &[PathBuf], sessions: &[ListedSession]) {
        let new_roots: Vec<PathBuf> = {
            let mut feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
            feed.known
                .retain(|p, _| !roots.iter().any(|r| p.starts_with(r)));
            for s in sessions {
                feed.known.insert(s.path.clone(), s.clone());
            }
            let new: Vec<PathBuf> = roots
                .iter()
                .filter(|r| !feed.roots.contains(r))
                .cloned()
                .collect();
            feed.roots.extend(new.iter().cloned());
            new
        };
        if self.use_events && !new_roots.is_empty() {
            self.watch(&new_roots);
        }
        self.marks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rescan = true;
        let _ = self.kick.send(());
    }

    /// Adds `roots` to the recursive watch (made on first use). Not under the marks' lock:
    /// notify's thread may be delivering an event (which takes it) while `watch` waits for
    /// that thread's answer.
    fn watch(&self, roots: &[PathBuf]) {
        let mut feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
        if feed.watcher.is_none() {
            let made = RootsWatcher::new(
                self.marks.clone(),
                self.kick.clone(),
                "list changes",
                "the roots are passed over again",
            );
            match made {
                Ok(w) => feed.watcher = Some(w),
                Err(e) => {
                    tracing::warn!(
                        "list changes: no watcher ({e}); the roots are passed over every {}s",
                        POLL.as_secs()
                    );
                    return;
                }
            }
        }
        let watched = feed.watcher.as_mut().map_or_else(Vec::new, |w| {
            w.watch(roots, |r, e| {
                tracing::warn!(
                    "list changes: cannot watch {} ({e}); it is passed over every {}s",
                    r.display(),
                    POLL.as_secs()
                );
            })
        });
        feed.watched.extend(watched);
    }
}

/// The feed's thread: its state, the cache it lists through and where changes go.
struct Worker {
    marks: Arc<Mutex<Marks>>,
    feed: Arc<Mutex<Feed>>,
    cache: CacheSlot,
    cache_file: PathBuf,
    send: Sink,
}

impl Worker {
    fn run(&self, rx: &mpsc::Receiver<()>) {
        let mut last_sent: Option<Instant> = None;
        let mut last_pass = Instant::now();
        loop {
            let every = self.pass_every();
            match rx.recv_timeout(every.saturating_sub(last_pass.elapsed())) {
                Ok(()) => {
                    if !BURST.settle(rx) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.marks
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .rescan = true;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if let Some(at) = last_sent {
                std::thread::sleep(MIN_INTERVAL.saturating_sub(at.elapsed()));
            }
            let (dirty, rescan) = self
                .marks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if rescan {
                last_pass = Instant::now();
            }
            let change = self.apply(&dirty, rescan);
            if !change.changed.is_empty() || !change.removed.is_empty() {
                (self.send)(change);
                last_sent = Some(Instant::now());
            }
        }
    }

    /// How long the thread may sleep before passing over the roots: [`POLL`] while a listed
    /// root is not watched, else [`RESCAN`] (nothing to do before the first listing).
    fn pass_every(&self) -> Duration {
        let feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
        if feed.roots.is_empty() {
            Duration::from_secs(3600)
        } else if feed.roots.iter().all(|r| feed.watched.contains(r)) {
            RESCAN
        } else {
            POLL
        }
    }

    /// The change the marked paths (or, with `rescan`, the whole listed roots) make to what
    /// the client has; the client is then taken to have it.
    fn apply(&self, dirty: &BTreeSet<PathBuf>, rescan: bool) -> ListChange {
        let (roots, mut candidates) = {
            let feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
            let roots = feed.roots.clone();
            let mut candidates = BTreeSet::new();
            if rescan {
                candidates.extend(feed.known.keys().cloned());
            } else {
                for p in dirty {
                    candidates.extend(feed.known.keys().filter(|k| k.starts_with(p)).cloned());
                }
            }
            (roots, candidates)
        };
        if roots.is_empty() {
            return ListChange::default();
        }
        if rescan {
            candidates.extend(roots.iter().flat_map(|r| list::session_files(r)));
        } else {
            for p in dirty {
                if !roots.iter().any(|r| p.starts_with(r)) {
                    continue;
                }
                match std::fs::symlink_metadata(p) {
                    Ok(m) if m.is_dir() => candidates.extend(list::session_files(p)),
                    Ok(m) if m.is_file() => {
                        candidates.insert(p.clone());
                    }
                    _ => {}
                }
            }
        }
        // What `session/list` would list now, for each candidate.
        let mut now: Vec<(PathBuf, Option<ListedSession>)> = Vec::new();
        {
            let mut guard = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            let cache = guard.get_or_insert_with(|| ListCache::load(&self.cache_file));
            for path in candidates {
                let listable = roots.iter().any(|r| list::is_listed_under(r, &path))
                    && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
                let row = if listable {
                    match cache.list_file(&path) {
                        Listed::Session(s) => Some(*s),
                        // Being created: announced once its header is written.
                        Listed::Pending => continue,
                        Listed::Skipped(_) => None,
                    }
                } else {
                    None
                };
                now.push((path, row));
            }
        }
        let mut feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
        let mut change = ListChange::default();
        for (path, row) in now {
            match row {
                Some(row) => {
                    if feed.known.get(&path) != Some(&row) {
                        feed.known.insert(path, row.clone());
                        change.changed.push(row);
                    }
                }
                None => {
                    if feed.known.remove(&path).is_some() {
                        change.removed.push(path);
                    }
                }
            }
        }
        change
    }
}
