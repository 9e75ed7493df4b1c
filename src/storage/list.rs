//! Finding session files under a directory and reading just their headers, for listings.
//! Reads only the first line of each file; never writes.

use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::dialect::pi::format::{self, Expect, Header, Line, LineSpan};
use crate::storage::reader::{OpenError, young_age_ms};

/// How deep below the root to look: pi keeps one directory per cwd under `sessions/`; Claude
/// Code one per cwd under `projects/`, and a session's subagents three levels down
/// (`<cwd>/<session>/subagents/agent-<id>.jsonl`); Codex one per day under `sessions/`
/// (`sessions/YYYY/MM/DD/rollout-*.jsonl`), so a `CODEX_HOME` given as a root, or one directory
/// beside pi's and Claude Code's, is listed too.
const MAX_DEPTH: usize = 5;
/// A header line longer than this is not read (pi headers are a few hundred bytes).
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// A session file's header and file facts.
#[derive(Debug)]
pub struct HeaderInfo {
    /// The parsed header line.
    pub header: Header,
    /// File size in bytes.
    pub size: u64,
    /// Modification time in milliseconds since the Unix epoch.
    pub modified_ms: Option<i64>,
}

/// Every `*.jsonl` file under `root` (in directories up to five levels below it), sorted by
/// path.
/// Unreadable directories are skipped.
pub fn session_files(root: &Path) -> Vec<PathBuf> {
    session_files_within(root, MAX_DEPTH)
}

/// Every `*.jsonl` file under `root` in directories up to `max_depth` levels below it (symbolic
/// links not followed), sorted by path. Unreadable directories are skipped.
pub fn session_files_within(root: &Path, max_depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_owned(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && depth < max_depth {
                stack.push((path, depth + 1));
            } else if kind.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The files [`session_files`] finds, each with its metadata (not following a symbolic
/// link; `None` when it could not be read), taken relative to its directory as the directory
/// is read: no path is looked up again, the cheapest way to tell which files changed. In no
/// particular order.
///
/// Directories are read several at once (rayon): a stat per file is most of this, and files
/// are independent.
pub fn session_files_with_metadata(root: &Path) -> Vec<(PathBuf, Option<std::fs::Metadata>)> {
    let mut out = Vec::new();
    walk_with_metadata(root.to_owned(), 0, &mut out);
    out
}

/// [`session_files_with_metadata`] of `dir`, `depth` levels below the root, into `out`.
fn walk_with_metadata(
    dir: PathBuf,
    depth: usize,
    out: &mut Vec<(PathBuf, Option<std::fs::Metadata>)>,
) {
    use rayon::prelude::*;
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < MAX_DEPTH {
            dirs.push(entry.path());
        } else if kind.is_file() && is_jsonl_name(&entry.file_name()) {
            out.push((entry.path(), entry.metadata().ok()));
        }
    }
    let below: Vec<Vec<(PathBuf, Option<std::fs::Metadata>)>> = dirs
        .into_par_iter()
        .map(|d| {
            let mut v = Vec::new();
            walk_with_metadata(d, depth + 1, &mut v);
            v
        })
        .collect();
    out.extend(below.into_iter().flatten());
}

/// Whether a file name's extension is `jsonl`, as [`Path::extension`] tells (`.jsonl` alone
/// is a name without one).
fn is_jsonl_name(name: &std::ffi::OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let b = name.as_bytes();
    b.len() > ".jsonl".len() && b.ends_with(b".jsonl")
}

/// Whether `path` is where [`session_files`] of `root` would find a session file: a `*.jsonl`
/// name below `root`, in a directory at most five levels below it. (Whether it is a regular
/// file is the caller's to check.)
pub fn is_listed_under(root: &Path, path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "jsonl")
        && path
            .strip_prefix(root)
            .is_ok_and(|rel| (1..=MAX_DEPTH + 1).contains(&rel.components().count()))
}

/// Reads the header (line 1) of a session file. Errors: I/O; `Pending` when the file is
/// empty or holds only part of its first line and is younger than
/// [`BIRTH_GRACE`](super::reader::BIRTH_GRACE) (being created); `Corrupt` when line 1 is not a
/// session header.
pub fn read_header(path: &Path) -> Result<HeaderInfo, OpenError> {
    let io_err = |source| OpenError::Io {
        path: path.to_owned(),
        source,
    };
    let file = super::reader::open_regular(path)?;
    let meta = file.metadata().map_err(io_err)?;
    let mut line = Vec::new();
    BufReader::new(file)
        .take(MAX_HEADER_BYTES)
        .read_until(b'\n', &mut line)
        .map_err(io_err)?;
    let terminated = line.last() == Some(&b'\n');
    if terminated {
        line.pop();
    }
    let span = LineSpan {
        line: 1,
        offset: 0,
        len: line.len() as u32,
    };
    match format::parse_line(&line, span, Expect::Header) {
        Ok(Line::Header(header)) => Ok(HeaderInfo {
            header,
            size: meta.len(),
            modified_ms: meta
                .modified()
                .ok()
                .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
                .and_then(|d| i64::try_from(d.as_millis()).ok()),
        }),
        Ok(_) => Err(io_err(io::Error::other("line 1 is not a session header"))),
        Err(_) if !terminated && let Some(age_ms) = young_age_ms(meta.modified().ok()) => {
            // Empty, or the header's first bytes only: a writer is creating the file.
            Err(OpenError::Pending {
                path: path.to_owned(),
                age_ms,
            })
        }
        Err(p) => Err(OpenError::Corrupt {
            path: path.to_owned(),
            corruption: crate::core::diagnostics::Corruption {
                kind: p.kind.into(),
                line: 1,
                offset: 0,
                id: None,
                message: p.detail,
            },
        }),
    }
}
