//! A recursive watch of session roots, shared by the services that follow the roots as a whole
//! (the live listing, the search index's freshness, the continuous archive): `notify` events
//! under the roots become marks — the paths they name, or "pass over everything again" when
//! the watcher lost events or failed — and a kick on a channel; [`Debounce::settle`] waits for
//! a burst of kicks to end. Each service keeps its own watcher, roots, timing and words for
//! its logs; what it does with the marks is its own.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

pub use crate::storage::WATCH_ENV;

/// Whether events are wanted: false under `SESSIOND_WATCH=poll`.
pub fn events_wanted() -> bool {
    std::env::var(WATCH_ENV).as_deref() != Ok("poll")
}

/// What events marked since a service last looked.
#[derive(Debug, Default)]
pub struct Marks {
    /// The paths events named.
    pub dirty: BTreeSet<PathBuf>,
    /// The watcher lost events (or failed): pass over the whole roots again.
    pub rescan: bool,
}

impl Marks {
    /// Takes the marked paths and the rescan flag, leaving none.
    pub fn take(&mut self) -> (BTreeSet<PathBuf>, bool) {
        (
            std::mem::take(&mut self.dirty),
            std::mem::take(&mut self.rescan),
        )
    }
}

impl AsMut<Marks> for Marks {
    fn as_mut(&mut self) -> &mut Marks {
        self
    }
}

/// A recursive `notify` watcher whose events mark the [`Marks`] inside a service's shared
/// state `S` and then kick a channel.
pub struct RootsWatcher {
    watcher: RecommendedWatcher,
}

impl RootsWatcher {
    /// A watcher that, for every event, locks `state` and marks its paths (an access marks
    /// nothing and kicks nothing; lost events or an error mark a rescan, an error logged as
    /// `"{what}: {e}; {fallback}"`), then sends `kick`. Errors: `notify` cannot make one.
    pub fn new<S: AsMut<Marks> + Send + 'static>(
        state: Arc<Mutex<S>>,
        kick: mpsc::Sender<()>,
        what: &'static str,
        fallback: &'static str,
    ) -> notify::Result<RootsWatcher> {
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let mut guard = state.lock().unwrap_or_else(PoisonError::into_inner);
            let m = guard.as_mut();
            match res {
                Ok(ev) if ev.need_rescan() => m.rescan = true,
                Ok(ev) if matches!(ev.kind, EventKind::Access(_)) => return,
                Ok(ev) => m.dirty.extend(ev.paths),
                Err(e) => {
                    tracing::warn!("{what}: {e}; {fallback}");
                    m.rescan = true;
                }
            }
            drop(guard);
            let _ = kick.send(());
        })?;
        Ok(RootsWatcher { watcher })
    }

    /// Watches each of `roots` recursively; returns those now watched. A root that cannot be
    /// watched is passed to `refused` with the error. Call it without holding the lock of the
    /// state the events mark: `notify`'s thread may be delivering an event (which takes it)
    /// while a watch waits for that thread's answer.
    pub fn watch(
        &mut self,
        roots: &[PathBuf],
        mut refused: impl FnMut(&Path, &notify::Error),
    ) -> Vec<PathBuf> {
        let mut watched = Vec::new();
        for r in roots {
            match self.watcher.watch(r, RecursiveMode::Recursive) {
                Ok(()) => watched.push(r.clone()),
                Err(e) => refused(r, &e),
            }
        }
        watched
    }

    /// Stops watching `root`, one of those [`RootsWatcher::watch`] watched. An error is only
    /// logged at debug: `notify` drops a watch by itself when its directory goes away.
    pub fn unwatch(&mut self, root: &Path) {
        if let Err(e) = self.watcher.unwatch(root) {
            tracing::debug!("unwatching {}: {e}", root.display());
        }
    }
}

/// How long a burst of events is let run before it is acted on.
#[derive(Clone, Copy, Debug)]
pub struct Debounce {
    /// Acted on once no event has come for this long ...
    pub quiet: Duration,
    /// ... or this long after the first of the burst, whichever comes first.
    pub max_delay: Duration,
}

impl Debounce {
    /// After the first kick of a burst has been received: waits until the kicks have been
    /// quiet for `quiet`, or `max_delay` has passed since now. False when every sender is gone.
    pub fn settle(&self, rx: &mpsc::Receiver<()>) -> bool {
        let first = Instant::now();
        loop {
            let left = self.max_delay.saturating_sub(first.elapsed());
            if left.is_zero() {
                return true;
            }
            match rx.recv_timeout(self.quiet.min(left)) {
                Ok(()) => continue,
                Err(RecvTimeoutError::Timeout) => return true,
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
    }
}
