//! Which file of a Codex thread is current (`docs/codex.md` §7): `threads.rollout_path` in
//! Codex's SQLite state (`$CODEX_HOME/state_<N>.sqlite`, the highest N), read only; without the
//! database or the thread's row, the file of the thread whose path sorts last (what Codex itself
//! continued without its database). Nothing in the rollout files says which segment is current.
//!
//! Codex must never be kept from writing: the database (WAL mode) is opened read-only
//! (`SQLITE_OPEN_READONLY`, no `immutable=1`, which would ignore the WAL where Codex's latest
//! `rollout_path` lives and could read half-written pages), with a short busy timeout, and each
//! answer is one statement whose read transaction ends as soon as it is stepped through: a
//! reader holding a transaction would not stop Codex from writing, but would keep seeing an old
//! `rollout_path` and pin the WAL.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::lineage::Index;

/// Where the current file of a thread was learnt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// `threads.rollout_path` in Codex's SQLite state.
    State,
    /// No database or no row for the thread: the thread's file whose path sorts last.
    LastByName,
}

/// A thread's current file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Current {
    /// The file Codex continues on its next resume.
    pub file: PathBuf,
    /// Where that was learnt.
    pub source: Source,
    /// The database it was read from, when it was.
    pub database: Option<PathBuf>,
}

/// Codex's state database in `home`: the `state_<N>.sqlite` with the highest N.
pub fn database(home: &Path) -> Option<PathBuf> {
    let rd = std::fs::read_dir(home).ok()?;
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n: u32 = name
                .strip_prefix("state_")?
                .strip_suffix(".sqlite")?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, p)| p)
}

/// `threads.rollout_path` of `thread` in the database at `db`, read as the module docs say.
/// `None` when the database cannot be opened or read, or has no row for the thread.
pub fn rollout_path(db: &Path, thread: &str) -> Option<PathBuf> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )
    .ok()?;
    conn.busy_timeout(Duration::from_millis(200)).ok()?;
    let path: String = conn
        .query_row(
            "SELECT rollout_path FROM threads WHERE id = ?1",
            [thread],
            |row| row.get(0),
        )
        .ok()?;
    Some(PathBuf::from(path))
}

/// The current file of `thread`, whose files `index` holds (of the `CODEX_HOME` `home`). A
/// `rollout_path` that is not there (the home was moved) is taken as the thread's file of the
/// same name in `index`, when there is one.
pub fn current(home: &Path, index: &Index, thread: &str) -> Option<Current> {
    if let Some(db) = database(home)
        && let Some(file) = rollout_path(&db, thread)
    {
        // A `CODEX_HOME` moved or copied elsewhere: the database still names the old place;
        // the thread's file of the same name here is the one it means.
        let file = match file.exists() {
            true => file,
            false => index
                .of_thread(thread)
                .find(|f| f.path.file_name() == file.file_name())
                .map_or(file, |f| f.path.clone()),
        };
        return Some(Current {
            file,
            source: Source::State,
            database: Some(db),
        });
    }
    index
        .of_thread(thread)
        .max_by(|a, b| a.path.file_name().cmp(&b.path.file_name()))
        .map(|f| Current {
            file: f.path.clone(),
            source: Source::LastByName,
            database: None,
        })
}
