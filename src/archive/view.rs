//! The archive as plain session files, for the search index ([`crate::search`]) to read as it
//! reads any root: `search --archive ARCHIVE` and the daemon's `session/search` when it
//! archives. The index cannot read zstd chunks, and a second indexer would duplicate it; so
//! the sessions the live roots no longer offer — the original is gone (Claude Code's cleanup
//! deleted it), or it lies outside the roots searched — are decompressed (their newest
//! version, every chunk checked) into a cache directory, the *view*, kept in step
//! incrementally: bytes appended to an archived version are appended to its view file (so the
//! index reads only them), a new version replaces the file (the index re-reads it), and a
//! session whose original is searched live again leaves the view (the index drops it). A
//! session is never in both, so no entry is found twice.
//!
//! ```text
//! VIEW/<key>/<source file name>     the newest version's bytes
//! VIEW/<key>/version                its number, as text
//! ```
//!
//! Hits in the view are then told apart by their path ([`View::locate`]): the archive key and
//! the original path, which still names the session (and `restore` brings it back).
//! Everything in the view holds session content: directories 0700, files 0600.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Archive, ArchiveError, Version, io_at, make_dirs, read_chunk, write_atomic};

/// An archived session as the view holds it.
#[derive(Clone, Debug)]
pub struct Viewed {
    /// Its key in the archive.
    pub key: String,
    /// Its original path.
    pub source: PathBuf,
    /// Whether a file still exists there (false: the archive is all that is left).
    pub original_exists: bool,
}

/// The view of one archive, brought up to date.
#[derive(Clone, Debug)]
pub struct View {
    /// The view's directory (a root for the index).
    pub dir: PathBuf,
    /// The sessions in it, by key.
    pub sessions: BTreeMap<String, Viewed>,
}

impl View {
    /// Hits in view files made hits of the archived sessions: the original path (and its
    /// URI when not UTF-8), the archive key, and whether the archive is all that is left.
    pub fn relabel(&self, hits: &mut [crate::search::Hit]) {
        for h in hits {
            if let Some(v) = self.locate(&h.path) {
                h.path_uri = crate::paths::uri_if_not_utf8(&v.source);
                h.path = v.source.clone();
                h.archive_key = Some(v.key.clone());
                h.archived_only = Some(!v.original_exists);
            }
        }
    }

    /// The archived session a view file belongs to, when `path` is one.
    pub fn locate(&self, path: &Path) -> Option<&Viewed> {
        let rest = path.strip_prefix(&self.dir).ok()?;
        let key = rest.components().next()?.as_os_str().to_str()?;
        self.sessions.get(key)
    }
}

/// The view directory of the archive at `archive` below `cache` (a directory of its own per
/// archive, named by a hash of the archive's absolute path).
pub fn view_dir(cache: &Path, archive: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let abs = crate::paths::absolute(archive);
    let digest = Sha256::digest(abs.as_os_str().as_bytes());
    cache.join(&super::hex(&digest)[..16])
}

/// Brings the view at `dir` in step with the archive at `archive` for a search over
/// `live_roots`: every archived session whose original is gone or not under `live_roots` is
/// in it, with its newest version's bytes; nothing else is. Errors: the archive cannot be read
/// (a damaged chunk or manifest of one session only leaves that session out, with a warning),
/// the view cannot be written.
pub fn sync(archive: &Path, dir: &Path, live_roots: &[PathBuf]) -> Result<View, ArchiveError> {
    let archive = Archive::open(archive)?;
    make_dirs(dir)?;
    let mut view = View {
        dir: dir.to_owned(),
        sessions: BTreeMap::new(),
    };
    for s in super::list_sessions(&archive.dir)? {
        let searched_live =
            s.original_exists && live_roots.iter().any(|r| s.manifest.source.starts_with(r));
        let Some(version) = s.manifest.versions.last() else {
            continue;
        };
        if searched_live {
            continue;
        }
        let Some(name) = s.manifest.source.file_name() else {
            continue;
        };
        let key_dir = dir.join(&s.key);
        match sync_one(&archive, &s.key, version, &key_dir, &key_dir.join(name)) {
            Ok(()) => {
                view.sessions.insert(
                    s.key.clone(),
                    Viewed {
                        key: s.key.clone(),
                        source: s.manifest.source.clone(),
                        original_exists: s.original_exists,
                    },
                );
            }
            Err(e @ ArchiveError::Damaged { .. }) => {
                tracing::warn!("archive search: {e}; the session is left out");
            }
            Err(e) => return Err(e),
        }
    }
    // What the view holds beyond that goes (the index drops it).
    let keep: BTreeSet<&str> = view.sessions.keys().map(String::as_str).collect();
    for entry in fs::read_dir(dir).map_err(io_at(dir))?.flatten() {
        let name = entry.file_name();
        if !keep.contains(name.to_string_lossy().as_ref()) {
            let p = entry.path();
            let removed = if p.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
            removed.map_err(io_at(&p))?;
        }
    }
    Ok(view)
}

/// Makes `file` hold `version`'s bytes: nothing when it does, the missing chunks appended
/// when it holds a shorter run of the same version ending at a chunk's start, else the whole
/// version written anew.
fn sync_one(
    archive: &Archive,
    key: &str,
    version: &Version,
    key_dir: &Path,
    file: &Path,
) -> Result<(), ArchiveError> {
    let marker = key_dir.join("version");
    let held = fs::read_to_string(&marker)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    let size = fs::symlink_metadata(file).ok().map(|m| m.len());
    let vdir = archive.session_dir(key).join(version.dir());
    if held == Some(version.number)
        && let Some(size) = size
    {
        if size == version.size {
            return Ok(());
        }
        if let Some(first) = version.chunks.iter().position(|c| c.offset == size) {
            let mut out = fs::OpenOptions::new()
                .append(true)
                .open(file)
                .map_err(io_at(file))?;
            for c in &version.chunks[first..] {
                out.write_all(&read_chunk(&vdir, c)?).map_err(io_at(file))?;
            }
            return Ok(());
        }
    }
    // Anew: other files of this key (an older version's name) go first.
    if key_dir.is_dir() {
        fs::remove_dir_all(key_dir).map_err(io_at(key_dir))?;
    }
    make_dirs(key_dir)?;
    let mut bytes = Vec::with_capacity(usize::try_from(version.size).unwrap_or(0));
    for c in &version.chunks {
        bytes.extend_from_slice(&read_chunk(&vdir, c)?);
    }
    write_atomic(file, &bytes)?;
    write_atomic(&marker, format!("{}\n", version.number).as_bytes())?;
    Ok(())
}

/// Where the daemon and the CLI keep the views of archives: `archive-view/` beside the search
/// index directory `index_dir` (never inside it: the index's directory holds only the index).
pub fn cache_beside(index_dir: &Path) -> PathBuf {
    index_dir
        .parent()
        .map_or_else(|| PathBuf::from("archive-view"), |p| p.join("archive-view"))
}
