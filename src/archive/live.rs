//! The daemon's continuous archive (`serve --archive DIR`, `initializationOptions.archive`):
//! one pass over the roots when it starts, then the session files that file-system events
//! under the roots name, archived once the events have been quiet for [`QUIET`] (at most
//! [`MAX_DELAY`] after the first), so a transcript is in the archive within a second of being
//! written. A full pass runs again every [`FULL_PASS`] and after the watcher lost events (a
//! full pass only `stat`s unchanged files), so a missed event delays a file, never loses it.
//!
//! Everything runs on one thread of its own; the server only starts it and keeps it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::watch_roots::{Debounce, Marks, RootsWatcher};

/// Events are acted on once none has come for this long.
pub const QUIET: Duration = Duration::from_millis(100);
/// ... or this long after the first of a burst.
pub const MAX_DELAY: Duration = Duration::from_millis(500);
/// How often the whole roots are passed over again.
pub const FULL_PASS: Duration = Duration::from_secs(60);

/// A burst of events, waited out.
const BURST: Debounce = Debounce {
    quiet: QUIET,
    max_delay: MAX_DELAY,
};

/// The continuous archive of one daemon; stops when dropped.
pub struct Archiver {
    dir: PathBuf,
    _watcher: Option<RootsWatcher>,
    stop: mpsc::Sender<()>,
}

impl Drop for Archiver {
    fn drop(&mut self) {
        let _ = self.stop.send(());
    }
}

impl Archiver {
    /// The archive (absolute).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts archiving the session files under `roots` into the archive at `archive`.
    /// Errors: the archive cannot be created or is not one (checked here, so the client hears
    /// of it); events that cannot be watched only log a warning (the full passes remain).
    pub fn start(archive: &Path, roots: Vec<PathBuf>) -> Result<Archiver, super::ArchiveError> {
        let archive = super::Archive::create(archive)?.dir;
        let roots: Vec<PathBuf> = roots
            .iter()
            .map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| crate::paths::absolute(r)))
            .collect();
        let marks = Arc::new(Mutex::new(Marks {
            rescan: true,
            ..Marks::default()
        }));
        let (kick, rx) = mpsc::channel::<()>();
        let (stop, stopped) = mpsc::channel::<()>();
        let watcher = RootsWatcher::new(
            marks.clone(),
            kick.clone(),
            "archive events",
            "the whole roots are archived again",
        );
        let watcher = match watcher {
            Ok(mut w) => {
                w.watch(&roots, |r, e| {
                    tracing::warn!(
                        "archive: cannot watch {} ({e}); it is archived every {}s",
                        r.display(),
                        FULL_PASS.as_secs()
                    );
                });
                Some(w)
            }
            Err(e) => {
                tracing::warn!(
                    "archive: no watcher ({e}); archiving every {}s",
                    FULL_PASS.as_secs()
                );
                None
            }
        };
        std::thread::Builder::new()
            .name("sessiond-archive".into())
            .spawn({
                let archive = archive.clone();
                move || run(&archive, &roots, &marks, &rx, &stopped)
            })
            .map_err(|e| super::ArchiveError::Io {
                path: PathBuf::from("(archive thread)"),
                source: e,
            })?;
        let _ = kick.send(());
        Ok(Archiver {
            dir: archive,
            _watcher: watcher,
            stop,
        })
    }
}

/// The archive thread (see the module docs).
fn run(
    archive: &Path,
    roots: &[PathBuf],
    marks: &Mutex<Marks>,
    rx: &mpsc::Receiver<()>,
    stopped: &mpsc::Receiver<()>,
) {
    let mut last_full = Instant::now();
    loop {
        if !matches!(stopped.try_recv(), Err(mpsc::TryRecvError::Empty)) {
            return;
        }
        let due = FULL_PASS.saturating_sub(last_full.elapsed());
        match rx.recv_timeout(due) {
            Ok(()) => {
                if !BURST.settle(rx) {
                    return;
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                marks.lock().unwrap_or_else(PoisonError::into_inner).rescan = true;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if !matches!(stopped.try_recv(), Err(mpsc::TryRecvError::Empty)) {
            return;
        }
        let (dirty, rescan) = marks.lock().unwrap_or_else(PoisonError::into_inner).take();
        let result = if rescan {
            last_full = Instant::now();
            super::archive_pass(archive, roots)
        } else {
            super::archive_files(archive, &named_files(roots, &dirty))
        };
        match result {
            Ok(r) => {
                for f in &r.errors {
                    tracing::warn!("archive: {}: {}", f.path.display(), f.message);
                }
                tracing::debug!(
                    added = r.added,
                    appended = r.appended,
                    versions = r.new_versions,
                    "archive pass"
                );
            }
            Err(e) => tracing::warn!("archive: {e}"),
        }
    }
}

/// The session files that `paths` (from events) name under `roots`, each with its root: a
/// file itself, or every session file below a directory (created or renamed in).
fn named_files(roots: &[PathBuf], paths: &BTreeSet<PathBuf>) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for p in paths {
        let Some(root) = roots.iter().find(|r| p.starts_with(r)) else {
            continue;
        };
        if p.is_dir() {
            out.extend(
                super::pass::session_files(p)
                    .into_iter()
                    .map(|f| (root.clone(), f)),
            );
        } else if p.is_file() && p.extension().is_some_and(|e| e == "jsonl") {
            out.push((root.clone(), p.clone()));
        }
    }
    out
}
