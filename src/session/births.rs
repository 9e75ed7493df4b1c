//! New session files: the files that appear in the directories the daemon watches for its open
//! sessions (a session's own directory, and where its agent writes files linked to it:
//! [`Dialect::companion_dirs`], Claude Code's `<session>/subagents/`; and, for a Codex rollout,
//! the whole `$CODEX_HOME/sessions` tree inside the roots, watched recursively: a fork or a
//! revert segment made on a later day lands in that day's directory). Each is announced once
//! ([`Created`]), when its format can be told: a fork (a new file beside its source) is a
//! session of its own, a subagent's transcript is linked to the transcript that started it, a
//! Codex fork or revert segment to the history it continues.
//!
//! The watcher's events are hints here too: a directory named as a whole (re-watched, polled,
//! events lost) is listed again, a file named is checked; a file already present when its
//! directory started being watched, or already announced, is known and never announced
//! (again). A file whose format cannot be told yet (empty, its first line still being written)
//! stays unknown, and the next event for it checks it again.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::dialect::Dialect;
use crate::listing::{Subagent, subagent_of};
use crate::storage::reader;
use crate::watch::Changed;

use super::roots::Roots;

/// A session file that appeared in a watched directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Created {
    /// The file's canonical path.
    pub path: PathBuf,
    /// Its format.
    pub dialect: Dialect,
    /// Its session id ([`Dialect::session_id`]), when it can be read.
    pub session_id: Option<String>,
    /// For a Claude Code subagent's transcript: the transcript that started it.
    pub subagent: Option<Subagent>,
    /// For a Codex rollout that continues a thread (a fork, a revert segment): what it
    /// continues.
    pub thread: Option<crate::dialect::codex::lineage::ThreadLink>,
}

/// One watched directory: who wants it, the roots it was opened under, the files known in it.
struct Dir {
    users: usize,
    roots: Roots,
    known: HashSet<PathBuf>,
}

/// The directories whose new files are announced, with the files already known in each.
#[derive(Default)]
pub struct Births {
    dirs: HashMap<PathBuf, Dir>,
    /// Directories whose new files are announced at any depth (their `known`: every session
    /// file below them).
    trees: HashMap<PathBuf, Dir>,
}

impl Births {
    /// Starts (or counts one more user of) announcing the new files of `dir`; the session
    /// files it holds now are known.
    pub fn track(&mut self, dir: &Path, roots: &Roots) {
        if let Some(d) = self.dirs.get_mut(dir) {
            d.users += 1;
            return;
        }
        let known = session_files(dir).collect();
        self.dirs.insert(
            dir.to_owned(),
            Dir {
                users: 1,
                roots: roots.clone(),
                known,
            },
        );
    }

    /// One user fewer of `dir`; forgotten with its last.
    pub fn untrack(&mut self, dir: &Path) {
        if let Some(d) = self.dirs.get_mut(dir) {
            d.users -= 1;
            if d.users == 0 {
                self.dirs.remove(dir);
            }
        }
    }

    /// Starts (or counts one more user of) announcing the new files anywhere below `dir`; the
    /// session files below it now are known. True for its first user (the caller starts
    /// watching it).
    pub fn track_tree(&mut self, dir: &Path, roots: &Roots) -> bool {
        if let Some(d) = self.trees.get_mut(dir) {
            d.users += 1;
            return false;
        }
        let known = session_files_below(dir);
        self.trees.insert(
            dir.to_owned(),
            Dir {
                users: 1,
                roots: roots.clone(),
                known,
            },
        );
        true
    }

    /// One user fewer of the tree `dir`; forgotten with its last (true: the caller stops
    /// watching it).
    pub fn untrack_tree(&mut self, dir: &Path) -> bool {
        if let Some(d) = self.trees.get_mut(dir) {
            d.users -= 1;
            if d.users == 0 {
                self.trees.remove(dir);
                return true;
            }
        }
        false
    }

    /// The files a batch of changes made new, each once (a file in a watched directory that is
    /// also in a watched tree too).
    pub fn changed(&mut self, changed: &Changed) -> Vec<Created> {
        // (directory or tree, is a tree, file)
        let mut candidates: Vec<(PathBuf, bool, PathBuf)> = Vec::new();
        for (dir, _) in self.dirs.iter() {
            if changed.everything || changed.paths.contains(dir) {
                candidates.extend(session_files(dir).map(|f| (dir.clone(), false, f)));
            }
        }
        for p in &changed.paths {
            if let Some(dir) = p.parent()
                && self.dirs.contains_key(dir)
                && is_session_name(p)
            {
                candidates.push((dir.to_owned(), false, p.clone()));
            }
        }
        for (tree, _) in self.trees.iter() {
            if changed.everything || changed.paths.contains(tree) {
                let below = session_files_below(tree);
                candidates.extend(below.into_iter().map(|f| (tree.clone(), true, f)));
                continue;
            }
            for p in changed.paths.iter().filter(|p| p.starts_with(tree)) {
                if is_session_name(p) {
                    candidates.push((tree.clone(), true, p.clone()));
                } else if p.is_dir() {
                    // A directory made (a new day's): its files' own events may have come
                    // before its watch did.
                    let below = session_files_below(p);
                    candidates.extend(below.into_iter().map(|f| (tree.clone(), true, f)));
                }
            }
        }
        let mut out = Vec::new();
        for (dir, is_tree, file) in candidates {
            let entries = if is_tree {
                &mut self.trees
            } else {
                &mut self.dirs
            };
            let Some(d) = entries.get_mut(&dir) else {
                continue;
            };
            if d.known.contains(&file) {
                continue;
            }
            if let Some(created) = told(&file, &d.roots) {
                // Known wherever it is watched from: announced once.
                for (at, d) in &mut self.dirs {
                    if file.parent() == Some(at.as_path()) {
                        d.known.insert(file.clone());
                    }
                }
                for (at, d) in &mut self.trees {
                    if file.starts_with(at) {
                        d.known.insert(file.clone());
                    }
                }
                out.push(created);
            }
        }
        out
    }
}

/// The session files at any depth below `dir` (symbolic links not followed).
fn session_files_below(dir: &Path) -> HashSet<PathBuf> {
    let mut out = HashSet::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(p),
                Ok(t) if t.is_file() && is_session_name(&p) => {
                    out.insert(p);
                }
                _ => {}
            }
        }
    }
    out
}

/// Whether a file name is a session file's (`*.jsonl`).
fn is_session_name(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "jsonl")
}

/// The session files directly in `dir` (none when it cannot be read).
fn session_files(dir: &Path) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_session_name(p))
}

/// What `file` is, once its format can be told; `None` before (and for a file that is gone, no
/// regular file, outside the roots, or of no format sessiond reads).
fn told(file: &Path, roots: &Roots) -> Option<Created> {
    let path = roots.resolve(file).ok()?;
    let opened = reader::open_regular_nofollow(&path).ok()?;
    let (dialect, first) = reader::sniff_decided(&opened).ok()??;
    Some(Created {
        session_id: dialect.session_id(&path, &first),
        subagent: match dialect {
            Dialect::Claude => subagent_of(&path),
            Dialect::Pi | Dialect::Codex => None,
        },
        thread: match dialect {
            Dialect::Codex => crate::dialect::codex::lineage::ThreadLink::of_first_line(&first),
            Dialect::Pi | Dialect::Claude => None,
        },
        dialect,
        path,
    })
}
