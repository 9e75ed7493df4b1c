//! The daemon's search index kept fresh from file-system events, so a `session/search` does
//! not stat every session under the roots.
//!
//! The first search over a set of roots reconciles the index with the files once
//! ([`SearchIndex::update`]) and starts watching those roots recursively (`notify`). From then
//! on every event under them (an append, a rewrite, a new or deleted file or directory) marks
//! its path; a thread applies the marked paths to the index after the events have been quiet
//! for [`QUIET`] (at most [`MAX_DELAY`] after the first one), and a search applies whatever is
//! still marked before it queries ([`SearchIndex::update_paths`]), so an answer never misses a
//! change the watcher saw. When the watcher cannot be used (a root that does not exist,
//! inotify used up, `SESSIOND_WATCH=poll`) or it reports lost events, the next search
//! reconciles the whole roots again, as without a watcher.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::search::{SearchError, SearchIndex, UpdateReport};
use crate::watch_roots::{Debounce, Marks, RootsWatcher};

/// Events are applied once none has come for this long.
pub const QUIET: Duration = Duration::from_millis(15);
/// ... or this long after the first of a burst, whichever comes first.
pub const MAX_DELAY: Duration = Duration::from_millis(60);

/// A burst of events, waited out.
const BURST: Debounce = Debounce {
    quiet: QUIET,
    max_delay: MAX_DELAY,
};

/// The index slot the daemon shares between requests (opened by the first search).
pub type IndexSlot = Arc<Mutex<Option<SearchIndex>>>;

#[derive(Default)]
struct Live {
    /// Roots reconciled once and watched since.
    watched: Vec<PathBuf>,
    watcher: Option<RootsWatcher>,
    /// Paths events named since they were last applied; a rescan: the watcher lost events,
    /// reconcile everything on the next search.
    marks: Marks,
}

impl AsMut<Marks> for Live {
    fn as_mut(&mut self) -> &mut Marks {
        &mut self.marks
    }
}

/// Index freshness for one daemon. See the module docs.
pub struct Freshness {
    live: Arc<Mutex<Live>>,
    kick: mpsc::Sender<()>,
    /// False under `SESSIOND_WATCH=poll`: every search reconciles.
    use_events: bool,
}

impl Freshness {
    /// Starts the thread that applies events to the index in `index`.
    pub fn new(index: IndexSlot) -> Arc<Freshness> {
        let (kick, rx) = mpsc::channel::<()>();
        let live = Arc::new(Mutex::new(Live::default()));
        let fresh = Arc::new(Freshness {
            live: live.clone(),
            kick,
            use_events: crate::watch_roots::events_wanted(),
        });
        std::thread::Builder::new()
            .name("sessiond-index-events".into())
            .spawn(move || apply_events(&rx, &index, &live))
            .map_err(|e| tracing::warn!("index events: no thread ({e}); searches reconcile"))
            .ok();
        fresh
    }

    /// Marks `paths` as changed, as the watcher's events would: for files the daemon itself
    /// has just written (the archive view), whose events may not have come yet when the
    /// search that follows applies what is marked.
    pub fn mark(&self, paths: impl IntoIterator<Item = PathBuf>) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.marks.dirty.extend(paths);
    }

    /// Brings `idx` (the index in the slot, locked by the caller) up to date for a search
    /// over `roots`: a full reconcile the first time (or after lost events, or without a
    /// watcher), else only the paths events named. `progress(done, total)` as in
    /// [`SearchIndex::update`]. Errors: those of the update.
    pub fn prepare(
        &self,
        idx: &mut SearchIndex,
        roots: &[PathBuf],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<UpdateReport, SearchError> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let fresh = !live.marks.rescan && roots.iter().all(|r| live.watched.contains(r));
        if fresh {
            let changed: Vec<PathBuf> = take_under(&mut live.marks.dirty, roots);
            drop(live);
            return idx.update_paths(roots, &changed, progress);
        }
        // After lost events, start over with a new watcher (the old one is dropped below,
        // outside the lock).
        let old = if live.marks.rescan {
            live.marks.rescan = false;
            live.watched.clear();
            live.watcher.take()
        } else {
            None
        };
        // Whatever was marked under these roots is covered by the reconcile.
        let _ = take_under(&mut live.marks.dirty, roots);
        let missing: Vec<PathBuf> = roots
            .iter()
            .filter(|r| !live.watched.contains(r))
            .cloned()
            .collect();
        let watcher = live.watcher.take();
        drop(live);
        drop(old);
        if self.use_events {
            // Not under the lock: notify's thread may be delivering an event (which takes
            // it) while `watch` waits for that thread's answer.
            let (watcher, watched) = self.watch(watcher, &missing);
            let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
            live.watcher = watcher;
            live.watched.extend(watched);
        }
        idx.update(roots, progress)
    }

    /// Watches `roots` with `watcher` (made here when `None`); returns the watcher and the
    /// roots now watched. A root that cannot be watched stays unwatched (and is reconciled by
    /// every search).
    fn watch(
        &self,
        watcher: Option<RootsWatcher>,
        roots: &[PathBuf],
    ) -> (Option<RootsWatcher>, Vec<PathBuf>) {
        let mut watcher = match watcher {
            Some(w) => w,
            None => {
                let made = RootsWatcher::new(
                    self.live.clone(),
                    self.kick.clone(),
                    "index events",
                    "the next search reconciles",
                );
                match made {
                    Ok(w) => w,
                    Err(e) => {
                        tracing::warn!("index events: no watcher ({e}); every search reconciles");
                        return (None, Vec::new());
                    }
                }
            }
        };
        let watched = watcher.watch(roots, |r, e| {
            tracing::warn!(
                "index events: cannot watch {} ({e}); searches reconcile it",
                r.display()
            );
        });
        (Some(watcher), watched)
    }
}

/// Removes and returns the marked paths under any of `roots`.
fn take_under(dirty: &mut BTreeSet<PathBuf>, roots: &[PathBuf]) -> Vec<PathBuf> {
    let under = |p: &Path| roots.iter().any(|r| p.starts_with(r));
    let taken: Vec<PathBuf> = dirty.iter().filter(|p| under(p)).cloned().collect();
    dirty.retain(|p| !under(p));
    taken
}

/// The event thread: waits for a burst of events to settle, then applies the marked paths to
/// the index (when a search has opened it and reconciled the watched roots).
fn apply_events(rx: &mpsc::Receiver<()>, index: &IndexSlot, live: &Arc<Mutex<Live>>) {
    while rx.recv().is_ok() {
        if !BURST.settle(rx) {
            return;
        }
        let mut slot = index.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(idx) = slot.as_mut() else {
            continue;
        };
        let mut l = live.lock().unwrap_or_else(PoisonError::into_inner);
        if l.marks.rescan || l.watched.is_empty() {
            continue;
        }
        let roots = l.watched.clone();
        let changed = take_under(&mut l.marks.dirty, &roots);
        drop(l);
        if changed.is_empty() {
            continue;
        }
        if let Err(e) = idx.update_paths(&roots, &changed, &mut |_, _| {}) {
            tracing::warn!("index events: {e}; the next search reconciles");
            live.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .marks
                .rescan = true;
        }
    }
}
