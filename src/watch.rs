//! File watching: `notify` on the parent directories of open sessions (directories, not
//! files, so a rename-replace or a delete-and-recreate is seen), turned into hints.
//!
//! Events are hints, not facts: they are debounced for a few milliseconds, deduplicated,
//! and handed on as "something under these paths changed". The owners then check the file
//! themselves, so a duplicated, coalesced or dropped event costs at most one `stat`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};

/// How long to wait after an event for more before handing the batch on. Short, because
/// the append→`didChange` latency budget is tens of milliseconds.
pub const DEBOUNCE: Duration = Duration::from_millis(3);

/// One debounced batch of changes.
#[derive(Debug, Default)]
pub struct Changed {
    /// Paths named by the events.
    pub paths: HashSet<PathBuf>,
    /// The watcher lost events (queue overflow): treat everything as changed.
    pub everything: bool,
}

/// Watches directories, each as many times as it is asked to (reference counted).
pub struct DirWatcher {
    watcher: Mutex<RecommendedWatcher>,
    counts: Mutex<HashMap<PathBuf, usize>>,
}

impl DirWatcher {
    /// Starts watching nothing yet; `on_change` is called on a background thread with
    /// each debounced batch.
    pub fn start(on_change: impl Fn(Changed) + Send + 'static) -> notify::Result<Self> {
        let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let watcher = notify::recommended_watcher(move |event| {
            let _ = tx.send(event);
        })?;
        std::thread::Builder::new()
            .name("watch-debounce".into())
            .spawn(move || debounce(&rx, &on_change))
            .map_err(notify::Error::io)?;
        Ok(DirWatcher {
            watcher: Mutex::new(watcher),
            counts: Mutex::new(HashMap::new()),
        })
    }

    /// Starts (or counts one more use of) a watch on `dir`, non-recursive.
    pub fn watch(&self, dir: &Path) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let n = counts.entry(dir.to_owned()).or_insert(0);
        if *n == 0 {
            let mut w = self.watcher.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(e) = w.watch(dir, RecursiveMode::NonRecursive) {
                tracing::warn!("cannot watch {}: {e}", dir.display());
            }
        }
        *n += 1;
    }

    /// Drops one use of the watch on `dir`; the last one stops it.
    pub fn unwatch(&self, dir: &Path) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(dir) {
            *n -= 1;
            if *n == 0 {
                counts.remove(dir);
                let mut w = self.watcher.lock().unwrap_or_else(PoisonError::into_inner);
                let _ = w.unwatch(dir);
            }
        }
    }
}

fn debounce(rx: &mpsc::Receiver<notify::Result<notify::Event>>, on_change: &dyn Fn(Changed)) {
    let absorb = |batch: &mut Changed, event: notify::Result<notify::Event>| match event {
        Ok(e) => {
            if e.need_rescan() {
                batch.everything = true;
            }
            batch.paths.extend(e.paths);
        }
        Err(e) => {
            tracing::warn!("watch error: {e}");
            batch.everything = true;
        }
    };
    while let Ok(first) = rx.recv() {
        let mut batch = Changed::default();
        absorb(&mut batch, first);
        let deadline = Instant::now() + DEBOUNCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(e) => absorb(&mut batch, e),
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    on_change(batch);
                    return;
                }
            }
        }
        on_change(batch);
    }
}
