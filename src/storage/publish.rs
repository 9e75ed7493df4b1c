//! Publishing new session files: an in-process reservation of `{cwd, id}`, then a temp file in
//! the destination directory, written, fsynced, checked and renamed into place without replace.
//!
//! Why this way: a crash at any moment leaves either no session file or a whole one (a stray
//! `.sessiond-*.jsonl.tmp` at worst, which pi's session listing ignores since it only reads
//! `*.jsonl`), and an existing file is never overwritten. The rename is tempfile's
//! `persist_noclobber`: `renameat2(RENAME_NOREPLACE)` where the kernel and file system support
//! it, else `link` + `unlink`; both fail with `AlreadyExists` instead of replacing.
//!
//! The reservation is not a cross-process lease (SPEC §4): another process choosing the same
//! session id at the same instant is only caught by the no-replace rename when it also picks the
//! same file name. A check for an existing `*_<id>.jsonl` in the directory narrows that window.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use thiserror::Error;

use super::reader::{self, OpenError};
use crate::core::lines::LineFormat;
use crate::core::tree::Mode;
use crate::dialect::pi::Pi;

/// Test-only: milliseconds to sleep after the temp file is written and fsynced, before the
/// rename, so tests can kill a publish half-way or overlap two of them. Never set it otherwise.
pub const TEST_PAUSE_ENV: &str = "SESSIOND_TEST_PUBLISH_PAUSE_MS";

/// A new session's id is taken: the file is not published (and the writer passes this on).
#[derive(Debug, Error)]
pub enum Taken {
    /// Another publish in this process holds `{cwd, id}`.
    #[error("session id {id} in {cwd} is being created by another request")]
    Reserved {
        /// The header `cwd` of the new session.
        cwd: String,
        /// The new session id.
        id: String,
    },
    /// A session file with this id (or this exact name) already exists.
    #[error("{}: a session file with id {id} already exists", path.display())]
    Exists {
        /// The existing file.
        path: PathBuf,
        /// The session id that is taken.
        id: String,
    },
}

/// Why a new session file was not published. The destination is untouched in every case.
#[derive(Debug, Error)]
pub enum PublishError {
    /// The id is taken.
    #[error(transparent)]
    Taken(#[from] Taken),
    /// Writing, syncing or renaming failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file being written.
        path: PathBuf,
        /// The failed operation's error.
        source: io::Error,
    },
    /// The written file does not read back as a clean session (a bug guard: never published).
    #[error("{}: the new file does not read back cleanly: {source}", path.display())]
    Verify {
        /// The new file (never published).
        path: PathBuf,
        /// What the read back found.
        source: OpenError,
    },
}

/// The `{cwd, id}` pairs being created in this process. Share one per daemon (or per CLI run).
#[derive(Debug, Default)]
pub struct Reservations {
    held: Mutex<HashSet<(String, String)>>,
}

/// A held reservation; released when dropped.
#[derive(Debug)]
pub struct Reservation<'a> {
    owner: &'a Reservations,
    key: (String, String),
}

impl Reservations {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserves `{cwd, id}`. Errors: [`Taken::Reserved`] when it is already held.
    pub fn reserve(&self, cwd: &str, id: &str) -> Result<Reservation<'_>, PublishError> {
        let key = (cwd.to_owned(), id.to_owned());
        // A poisoned lock only means another thread panicked while holding the set; the set
        // itself is always consistent (one insert or remove), so keep using it.
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if !held.insert(key.clone()) {
            return Err(Taken::Reserved {
                cwd: key.0,
                id: key.1,
            }
            .into());
        }
        Ok(Reservation { owner: self, key })
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut held = self.owner.held.lock().unwrap_or_else(|p| p.into_inner());
        held.remove(&self.key);
    }
}

/// pi's session file name: `<timestamp with ':' and '.' replaced by '-'>_<id>.jsonl`.
pub fn session_file_name(timestamp: &str, id: &str) -> String {
    format!("{}_{id}.jsonl", timestamp.replace([':', '.'], "-"))
}

/// Whether `dir` already holds a session file for `id` (pi's `*_<id>.jsonl`, Claude Code's
/// `<id>.jsonl`).
fn existing_with_id(dir: &Path, id: &str) -> io::Result<Option<PathBuf>> {
    let suffix = format!("_{id}.jsonl");
    let whole = format!("{id}.jsonl");
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(&suffix) || name == whole {
            return Ok(Some(entry.path()));
        }
    }
    Ok(None)
}

/// The mode a new session file made from `source` (a fork, a salvage) is created with: the
/// source's own read and write bits, so the new file is never readable by more users than the
/// session it holds (less the umask, as any new file); 0600 when the source cannot be
/// examined. A session holds secrets (SPEC §8): a fork of a 0600 session is 0600, not the
/// 0644 a umask of 022 would give.
pub fn mode_like(source: &Path) -> u32 {
    std::fs::metadata(source).map_or(0o600, |m| m.permissions().mode() & 0o666)
}

/// Writes `lines` (each without its newline) as a new session file `dir/name` for session `id`
/// with permission bits `mode` (less the umask; see [`mode_like`]) and returns its path. The
/// caller holds the `{cwd, id}` reservation.
///
/// Steps: refuse if a `*_<id>.jsonl` exists; write a temp file in `dir`, created with `mode`;
/// fsync it; read it back strictly (it must open without corruption or torn tail); rename
/// without replace; fsync `dir`. Errors: `Exists`, `Io` (also when `dir` is not an existing
/// directory), `Verify`; on any error no file named `name` was created.
pub fn publish_new(
    dir: &Path,
    name: &str,
    id: &str,
    lines: &[Vec<u8>],
    mode: u32,
) -> Result<PathBuf, PublishError> {
    publish_new_as::<Pi>(dir, name, id, lines, mode)
}

/// [`publish_new`] of a file in format `F` (read back strictly as `F`): a pi session, or a
/// new Claude Code transcript (a fork).
pub fn publish_new_as<F: LineFormat>(
    dir: &Path,
    name: &str,
    id: &str,
    lines: &[Vec<u8>],
    mode: u32,
) -> Result<PathBuf, PublishError> {
    let dest = dir.join(name);
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |source| PublishError::Io { path, source }
    };
    if !dir.is_dir() {
        let (kind, what) = if dir.exists() {
            (io::ErrorKind::NotADirectory, "not a directory")
        } else {
            (io::ErrorKind::NotFound, "no such directory")
        };
        return Err(PublishError::Io {
            path: dir.to_owned(),
            source: io::Error::new(
                kind,
                format!("{what}; the new file is written into an existing directory"),
            ),
        });
    }
    if let Some(path) = existing_with_id(dir, id).map_err(io_err(dir))? {
        return Err(Taken::Exists {
            path,
            id: id.to_owned(),
        }
        .into());
    }
    // Created with its mode: no moment where the bytes are readable by more users. Errors
    // from here on name the new file's path (the temporary file is removed as they return).
    let temp = tempfile::Builder::new()
        .prefix(".sessiond-")
        .suffix(".jsonl.tmp")
        .permissions(std::fs::Permissions::from_mode(mode & 0o666))
        .tempfile_in(dir)
        .map_err(io_err(dir))?;
    {
        if let Some(source) = super::faults::write_fails() {
            return Err(PublishError::Io {
                path: dest.clone(),
                source,
            });
        }
        let mut out = BufWriter::new(temp.as_file());
        for line in lines {
            out.write_all(line).map_err(io_err(&dest))?;
            out.write_all(b"\n").map_err(io_err(&dest))?;
        }
        out.flush().map_err(io_err(&dest))?;
    }
    if let Some(source) = super::faults::sync_fails() {
        return Err(PublishError::Io {
            path: dest.clone(),
            source,
        });
    }
    temp.as_file().sync_all().map_err(io_err(&dest))?;
    match reader::open_session::<F>(temp.path(), Mode::Strict) {
        Ok(s) if s.torn_tail.is_none() => {}
        Ok(_) => {
            return Err(PublishError::Io {
                path: temp.path().to_owned(),
                source: io::Error::other("the new file ends in a torn line"),
            });
        }
        Err(source) => {
            return Err(PublishError::Verify { path: dest, source });
        }
    }
    if let Some(ms) = std::env::var(TEST_PAUSE_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    if let Some(source) = super::faults::rename_fails() {
        return Err(PublishError::Io { path: dest, source });
    }
    temp.persist_noclobber(&dest).map_err(|e| {
        if e.error.kind() == io::ErrorKind::AlreadyExists {
            Taken::Exists {
                path: dest.clone(),
                id: id.to_owned(),
            }
            .into()
        } else {
            PublishError::Io {
                path: dest.clone(),
                source: e.error,
            }
        }
    })?;
    // The rename is durable only once the directory is synced.
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_follow_pi() {
        assert_eq!(
            session_file_name("2025-01-02T03:04:05.678Z", "abc"),
            "2025-01-02T03-04-05-678Z_abc.jsonl"
        );
    }

    #[test]
    fn a_reservation_is_exclusive_until_dropped() {
        let r = Reservations::new();
        let a = r.reserve("/w", "x").unwrap();
        assert!(matches!(
            r.reserve("/w", "x"),
            Err(PublishError::Taken(Taken::Reserved { .. }))
        ));
        assert!(r.reserve("/other", "x").is_ok());
        drop(a);
        assert!(r.reserve("/w", "x").is_ok());
    }

    #[test]
    fn an_existing_file_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let header = br#"{"type":"session","version":3,"id":"s1","timestamp":"t"}"#.to_vec();
        let p = publish_new(
            dir.path(),
            "a_s1.jsonl",
            "s1",
            std::slice::from_ref(&header),
            0o600,
        )
        .unwrap();
        let before = std::fs::read(&p).unwrap();
        assert!(matches!(
            publish_new(dir.path(), "a_s1.jsonl", "s1", &[header], 0o600),
            Err(PublishError::Taken(Taken::Exists { .. }))
        ));
        assert_eq!(std::fs::read(&p).unwrap(), before);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temp file left behind");
    }
}
