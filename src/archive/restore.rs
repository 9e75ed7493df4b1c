//! Reading an archive back: its sessions listed (with whether each original still exists),
//! one found by name, a version's bytes checked chunk by chunk, and `restore`, which writes a
//! version back where its agent looks for it and never overwrites a different file.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{Archive, ArchiveError, Manifest, Version, io_at, make_dirs, read_chunk};

/// One archived session, as `list --archive` shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchivedSession {
    /// Its directory under `sessions/`.
    pub key: String,
    /// Whether a file still exists at its source path.
    pub original_exists: bool,
    /// Bytes of its newest version.
    pub size: u64,
    /// How many versions it has.
    pub version_count: usize,
    /// When bytes were last added (ms since the epoch).
    pub last_archived_ms: i64,
    /// The manifest.
    pub manifest: Manifest,
}

/// Every session in the archive at `dir`, newest archived first; a session whose manifest
/// cannot be read is skipped with a warning. Errors: not an archive, I/O on its directory.
pub fn list_sessions(dir: &Path) -> Result<Vec<ArchivedSession>, ArchiveError> {
    let archive = Archive::open(dir)?;
    let sessions_dir = archive.sessions_dir();
    let entries = match fs::read_dir(&sessions_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_at(&sessions_dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let key = entry.file_name().to_string_lossy().into_owned();
        let m = match archive.manifest(&key) {
            Ok(Some(m)) => m,
            // A directory of an interrupted first pass: nothing archived yet.
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!("{e}");
                continue;
            }
        };
        let last = m.versions.last();
        out.push(ArchivedSession {
            key,
            original_exists: fs::symlink_metadata(&m.source).is_ok(),
            size: last.map_or(0, |v| v.size),
            version_count: m.versions.len(),
            last_archived_ms: last.map_or(0, |v| v.last_archived_ms),
            manifest: m,
        });
    }
    out.sort_by(|a, b| {
        b.last_archived_ms
            .cmp(&a.last_archived_ms)
            .then_with(|| a.key.cmp(&b.key))
    });
    Ok(out)
}

/// The archived session `name` names: its key, its source path, its file name or stem, or a
/// session id its file name ends with (pi's `<time>_<id>`, Codex's `rollout-<time>-<id>`).
/// Errors: none or several match ([`ArchiveError::NoSuchSession`]), or the archive's.
pub fn find_session(dir: &Path, name: &str) -> Result<ArchivedSession, ArchiveError> {
    let sessions = list_sessions(dir)?;
    let matches = |s: &ArchivedSession| {
        let src = &s.manifest.source;
        let stem = src
            .file_stem()
            .map(|x| x.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = src
            .file_name()
            .map(|x| x.to_string_lossy().into_owned())
            .unwrap_or_default();
        s.key == name
            || src.as_os_str() == name
            || file == name
            || stem == name
            || stem.ends_with(&format!("_{name}"))
            || stem.ends_with(&format!("-{name}"))
    };
    let mut found: Vec<ArchivedSession> = sessions.into_iter().filter(matches).collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(ArchiveError::NoSuchSession {
            archive: dir.to_owned(),
            detail: format!(
                "no archived session is named {name} (give its key, original path, file name, \
                 or the session id its file name ends with; `sessiond list --archive {}` lists \
                 them)",
                dir.display()
            ),
        }),
        _ => Err(ArchiveError::NoSuchSession {
            archive: dir.to_owned(),
            detail: format!(
                "{name} names {} archived sessions ({}); give the key",
                found.len(),
                found
                    .iter()
                    .map(|s| s.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// Version `number` (default: the newest) of an archived session. Errors: no such version.
pub fn version_of(
    dir: &Path,
    s: &ArchivedSession,
    number: Option<u32>,
) -> Result<Version, ArchiveError> {
    let v = match number {
        None => s.manifest.versions.last(),
        Some(n) => s.manifest.versions.iter().find(|v| v.number == n),
    };
    v.cloned().ok_or_else(|| ArchiveError::NoSuchSession {
        archive: dir.to_owned(),
        detail: format!(
            "{} has versions 1 to {}, not {}",
            s.key,
            s.version_count,
            number.map_or_else(|| "any".to_owned(), |n| n.to_string())
        ),
    })
}

/// A version's bytes, every chunk decompressed and checked. Errors: I/O, damage.
pub fn read_version(dir: &Path, key: &str, v: &Version) -> Result<Vec<u8>, ArchiveError> {
    let archive = Archive::open(dir)?;
    let vdir = archive.session_dir(key).join(v.dir());
    let mut out = Vec::with_capacity(usize::try_from(v.size).unwrap_or(0));
    for c in &v.chunks {
        out.extend_from_slice(&read_chunk(&vdir, c)?);
    }
    Ok(out)
}

/// What `restore` did.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Restored {
    /// The archived session's key.
    pub key: String,
    /// The version restored.
    pub version: u32,
    /// The file written (or found already holding these bytes).
    pub path: PathBuf,
    /// Bytes.
    pub size: u64,
    /// False when the file already held exactly these bytes (nothing written).
    pub written: bool,
    /// SHA-256 of the bytes restored.
    pub sha256: String,
}

/// Writes `bytes` to `target` as a new 0600 file (missing directories created 0700), or does
/// nothing when `target` holds exactly them. Errors: [`ArchiveError::Exists`] when it holds
/// anything else (nothing written), I/O.
pub fn write_new(target: &Path, bytes: &[u8]) -> Result<bool, ArchiveError> {
    if let Ok(existing) = fs::symlink_metadata(target) {
        if existing.is_file()
            && existing.len() == bytes.len() as u64
            && fs::read(target).map_err(io_at(target))? == bytes
        {
            return Ok(false);
        }
        return Err(ArchiveError::Exists {
            path: target.to_owned(),
        });
    }
    let dir = target.parent().unwrap_or(Path::new("."));
    make_dirs(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".sessiond-restore-")
        .tempfile_in(dir)
        .map_err(io_at(dir))?;
    tmp.write_all(bytes).map_err(io_at(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io_at(target))?;
    tmp.persist_noclobber(target).map_err(|e| {
        if e.error.kind() == io::ErrorKind::AlreadyExists {
            ArchiveError::Exists {
                path: target.to_owned(),
            }
        } else {
            io_at(target)(e.error)
        }
    })?;
    Ok(true)
}

/// Rewrites an archived session's bytes for another place: the new bytes and their path.
pub type Rewrite<'a> = dyn Fn(&Manifest, Vec<u8>) -> Result<(PathBuf, Vec<u8>), ArchiveError> + 'a;

/// Restores version `number` (default: the newest) of the session `name` names in the archive
/// at `dir`: to its original path, or below `to` at its path relative to its root. With
/// `rewrite`, the bytes pass through it first and it chooses the path (a moved project's
/// session). Errors: as [`find_session`], [`read_version`], [`write_new`].
pub fn restore(
    dir: &Path,
    name: &str,
    number: Option<u32>,
    to: Option<&Path>,
    rewrite: Option<&Rewrite<'_>>,
) -> Result<Restored, ArchiveError> {
    let s = find_session(dir, name)?;
    let v = version_of(dir, &s, number)?;
    let bytes = read_version(dir, &s.key, &v)?;
    let (target, bytes) = match rewrite {
        Some(f) => f(&s.manifest, bytes)?,
        None => {
            let target = match to {
                Some(to) => crate::paths::absolute(to).join(&s.manifest.relative),
                None => s.manifest.source.clone(),
            };
            (target, bytes)
        }
    };
    let written = write_new(&target, &bytes)?;
    Ok(Restored {
        key: s.key,
        version: v.number,
        path: target,
        size: bytes.len() as u64,
        written,
        sha256: super::hex(&Sha256::digest(&bytes)),
    })
}
