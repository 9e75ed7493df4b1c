//! The world-facing half of a rewind ([`crate::core::rewind`] works out the plan): the files
//! as they are now ([`SystemDisk`]), the plan applied ([`apply`]: each file replaced atomically
//! by a temporary file renamed over it, its mode kept (0600 for a file created again), after
//! a copy of it went into one backup directory with a manifest), and a backup put back
//! ([`undo`]).
//!
//! Nothing here executes anything: files are read, written, renamed and removed. Every path
//! is resolved through symlinks before it is touched, and a path that lands outside the
//! working directory is never written ([`SystemDisk::place`]); writes go to the resolved
//! path, so a symlink inside the working directory stays a symlink. The session file is never
//! written by a rewind.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::core::rewind::{Disk, FileStatus, Place, Plan, Present, Target};

/// Largest file a rewind reads (a session's own files are source files).
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The name of the manifest in a backup directory.
pub const MANIFEST: &str = "manifest.json";

/// This machine's files.
#[derive(Clone, Debug)]
pub struct SystemDisk {
    /// The home directory, for `~` in tool paths.
    pub home: Option<PathBuf>,
}

impl SystemDisk {
    /// With `$HOME`.
    pub fn from_env() -> SystemDisk {
        SystemDisk {
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
        }
    }
}

/// A path with every existing ancestor resolved through symlinks (the rest, not there yet,
/// joined as it is).
pub fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = fs::canonicalize(p) {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) => canonical(dir).join(name),
        _ => p.to_owned(),
    }
}

fn read_present(path: &Path) -> Present {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Present::Missing,
        Err(e) => return Present::Unreadable(e.to_string()),
    };
    if !meta.is_file() {
        return Present::NotAFile;
    }
    if meta.len() > MAX_FILE_BYTES {
        return Present::Unreadable(format!("larger than {} MB", MAX_FILE_BYTES / 1024 / 1024));
    }
    match fs::read(path) {
        Ok(b) => Present::Bytes(b),
        Err(e) => Present::Unreadable(e.to_string()),
    }
}

impl Disk for SystemDisk {
    fn home(&self) -> Option<String> {
        self.home.as_ref().map(|h| h.to_string_lossy().into_owned())
    }

    fn read(&self, path: &str) -> Present {
        read_present(Path::new(path))
    }

    fn born_ms(&self, path: &str) -> Option<i64> {
        let born = fs::metadata(path).ok()?.created().ok()?;
        let ms = born.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
        i64::try_from(ms).ok()
    }

    fn is_dir(&self, path: &str) -> bool {
        fs::metadata(path).is_ok_and(|m| m.is_dir())
    }

    fn place(&self, path: &str, cwd: &str) -> Place {
        let real = canonical(Path::new(path));
        let base = canonical(Path::new(cwd));
        let text = real.to_string_lossy().into_owned();
        if real != base && real.starts_with(&base) {
            Place::Inside(text)
        } else {
            Place::Outside(text)
        }
    }
}

/// A file's text for a rewind: `None` when it is missing, not a regular file, larger than
/// [`MAX_FILE_BYTES`] or not UTF-8.
pub fn read_text(path: &Path) -> Option<String> {
    match read_present(path) {
        Present::Bytes(b) => String::from_utf8(b).ok(),
        _ => None,
    }
}

/// The checkpoints Claude Code kept at the entry `entry_id` of the transcript `transcript`
/// (its file history, [`crate::dialect::claude::rewind::snapshot_at`]): each tracked file with
/// its content there (`None`: there was no file). A copy that cannot be read is left out
/// (the records decide that file). Empty when the entry has no snapshot.
pub fn claude_checkpoints(transcript: &Path, entry_id: &str) -> Vec<(String, Option<String>)> {
    use crate::dialect::claude::rewind::{backup_path, config_dir, snapshot_at};
    let Ok(text) = fs::read(transcript) else {
        return Vec::new();
    };
    let Some(snapshot) = snapshot_at(&text, entry_id) else {
        return Vec::new();
    };
    let Some(session_id) = crate::view::convert::claude_session_id(transcript) else {
        return Vec::new();
    };
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let env_dir = std::env::var_os("CLAUDE_CONFIG_DIR").map(PathBuf::from);
    let config = config_dir(env_dir.as_deref(), &home);
    snapshot
        .into_iter()
        .filter_map(|(path, name)| match name {
            None => Some((path, None)),
            Some(name) => {
                let copy = backup_path(&config, &session_id, &name)?;
                read_text(&copy).map(|t| (path, Some(t)))
            }
        })
        .collect()
}

/// Why applying or undoing failed.
#[derive(Debug, Error)]
pub enum RewindError {
    /// A file could not be read, written or removed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file changed between the plan and its write; the files before it were rewound (the
    /// backup directory holds them).
    #[error("{}: changed while the rewind ran; stopped before it (backup of what was done: {})", path.display(), backup.display())]
    Changed {
        /// The file.
        path: PathBuf,
        /// The backup directory.
        backup: PathBuf,
    },
    /// A backup directory without a readable manifest.
    #[error("{}: {detail}", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// `--undo`: files changed since the rewind; nothing put back.
    #[error("{} changed since the rewind; nothing put back (--force puts them back anyway)", paths.join(", "))]
    UndoDrift {
        /// Their paths.
        paths: Vec<String>,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RewindError + '_ {
    move |source| RewindError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One file in a backup's manifest.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestFile {
    /// The file (symlinks resolved).
    pub path: String,
    /// `restored` (its content replaced), `removed`, or `created` (none was there).
    pub action: String,
    /// Its copy before the rewind, relative to the backup directory (`null`: there was none).
    pub backup: Option<String>,
    /// Its mode before (`null`: there was none).
    pub mode: Option<u32>,
    /// SHA-256 of what the rewind left (`null`: removed).
    pub sha256_after: Option<String>,
}

/// A backup directory's manifest.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// 1.
    pub version: u32,
    /// The session file.
    pub session: String,
    /// The entry rewound to.
    pub entry_id: String,
    /// The working directory.
    pub cwd: String,
    /// When (ISO 8601).
    pub created_at: String,
    /// What was done, in order.
    pub files: Vec<ManifestFile>,
}

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The default directory of backup directories: `$XDG_STATE_HOME/sessiond/rewind`, else
/// `$HOME/.local/state/sessiond/rewind` (state, not cache: it must survive a cache cleanup).
pub fn default_backup_root() -> PathBuf {
    crate::paths::xdg_dir("XDG_STATE_HOME", ".local/state", "rewind")
}

/// The mode of a file a rewind writes when no earlier mode is known (a file deleted since
/// the session wrote it, created again from the session's content): the owner's only, as
/// everything holding session content (SPEC §8).
const NEW_FILE_MODE: u32 = 0o600;

/// Replaces `path`'s content atomically: a temporary file beside it, then a rename over it,
/// with `mode`.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), RewindError> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir).map_err(io(dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".sessiond-rewind-")
        .tempfile_in(dir)
        .map_err(io(dir))?;
    tmp.write_all(bytes).map_err(io(path))?;
    tmp.as_file().sync_all().map_err(io(path))?;
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode)).map_err(io(path))?;
    tmp.persist(path).map_err(|e| RewindError::Io {
        path: path.to_owned(),
        source: e.error,
    })?;
    Ok(())
}

fn write_manifest(dir: &Path, m: &Manifest) -> Result<(), RewindError> {
    let text = serde_json::to_vec_pretty(m).map_err(|e| RewindError::Io {
        path: dir.join(MANIFEST),
        source: std::io::Error::other(e),
    })?;
    write_atomic(&dir.join(MANIFEST), &text, 0o600)
}

/// A new backup directory under `root` (0700, and its `files/`), named by the time and a random suffix.
fn new_backup_dir(root: &Path) -> Result<PathBuf, RewindError> {
    crate::search::create_owner_only_dirs(root).map_err(io(root))?;
    let stamp = crate::js::timestamp::now_iso()
        .replace([':', '-'], "")
        .replace('.', "-");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let dir = root.join(format!("{stamp}-{suffix}"));
    for d in [dir.clone(), dir.join("files")] {
        fs::create_dir(&d).map_err(io(&d))?;
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).map_err(io(&d))?;
    }
    Ok(dir)
}

/// What [`apply`] did.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// The backup directory (`sessiond rewind --undo` takes it).
    pub backup_dir: String,
    /// What was done to each file.
    pub files: Vec<ManifestFile>,
}

/// Applies a plan that is not refused: each file to restore or remove is checked again
/// (it must still be as the plan read it), copied into a new backup directory under `root`,
/// then replaced or removed. Errors: I/O, or a file that changed since the plan (the files
/// before it stay rewound; the manifest lists them).
pub fn apply(
    plan: &Plan,
    session: &Path,
    root: &Path,
    disk: &dyn Disk,
) -> Result<Applied, RewindError> {
    let dir = new_backup_dir(root)?;
    let mut manifest = Manifest {
        version: 1,
        session: session.to_string_lossy().into_owned(),
        entry_id: plan.entry_id.clone(),
        cwd: plan.cwd.clone().unwrap_or_default(),
        created_at: crate::js::timestamp::now_iso(),
        files: Vec::new(),
    };
    write_manifest(&dir, &manifest)?;
    for (i, f) in plan.files.iter().enumerate() {
        if !matches!(f.status, FileStatus::Restore | FileStatus::Remove) {
            continue;
        }
        let Some(real) = f.real_path.as_deref().map(PathBuf::from) else {
            continue;
        };
        // The same bytes as when planned, and still inside the working directory.
        let now = read_present(&real);
        let inside = matches!(
            disk.place(&real.to_string_lossy(), &manifest.cwd),
            Place::Inside(_)
        );
        if now != f.present || !inside {
            return Err(RewindError::Changed {
                path: real,
                backup: dir,
            });
        }
        let mode = fs::metadata(&real)
            .ok()
            .map(|m| m.permissions().mode() & 0o7777);
        let backup = match &now {
            Present::Bytes(b) => {
                let name = format!("files/{i:04}");
                write_atomic(&dir.join(&name), b, 0o600)?;
                Some(name)
            }
            _ => None,
        };
        let (action, after) = match &f.target {
            Target::Write(content) => {
                write_atomic(&real, content.as_bytes(), mode.unwrap_or(NEW_FILE_MODE))?;
                let action = if backup.is_some() {
                    "restored"
                } else {
                    "created"
                };
                (action, Some(sha256_hex(content.as_bytes())))
            }
            Target::Remove => {
                fs::remove_file(&real).map_err(io(&real))?;
                ("removed", None)
            }
            Target::Nothing => continue,
        };
        manifest.files.push(ManifestFile {
            path: real.to_string_lossy().into_owned(),
            action: action.into(),
            backup,
            mode,
            sha256_after: after,
        });
        write_manifest(&dir, &manifest)?;
    }
    Ok(Applied {
        backup_dir: dir.to_string_lossy().into_owned(),
        files: manifest.files,
    })
}

/// Reads a backup directory's manifest.
pub fn read_manifest(dir: &Path) -> Result<Manifest, RewindError> {
    let path = dir.join(MANIFEST);
    let bytes = fs::read(&path).map_err(io(&path))?;
    serde_json::from_slice(&bytes).map_err(|e| RewindError::Manifest {
        path: path.clone(),
        detail: format!("not a rewind manifest: {e}"),
    })
}

/// Puts back what the rewind recorded in `dir` did, newest first: each file must be as the
/// rewind left it (else refused as a whole, unless `force`) and inside the manifest's working
/// directory. Returns the manifest's files.
pub fn undo(dir: &Path, force: bool) -> Result<Vec<ManifestFile>, RewindError> {
    let m = read_manifest(dir)?;
    let manifest_path = dir.join(MANIFEST);
    let base = canonical(Path::new(&m.cwd));
    let mut drifted = Vec::new();
    for f in &m.files {
        let real = canonical(Path::new(&f.path));
        if m.cwd.is_empty() || real == base || !real.starts_with(&base) {
            return Err(RewindError::Manifest {
                path: manifest_path,
                detail: format!("{} is outside the working directory {}", f.path, m.cwd),
            });
        }
        if f.backup
            .as_deref()
            .is_some_and(|b| !b.starts_with("files/") || b.contains(".."))
        {
            return Err(RewindError::Manifest {
                path: manifest_path,
                detail: format!("{}: its backup is not under files/", f.path),
            });
        }
        let now = read_present(Path::new(&f.path));
        let as_left = match (&f.sha256_after, &now) {
            (Some(sha), Present::Bytes(b)) => sha256_hex(b) == *sha,
            (None, Present::Missing) => true,
            _ => false,
        };
        if !as_left {
            drifted.push(f.path.clone());
        }
    }
    if !drifted.is_empty() && !force {
        return Err(RewindError::UndoDrift { paths: drifted });
    }
    for f in m.files.iter().rev() {
        let path = Path::new(&f.path);
        match &f.backup {
            Some(b) => {
                let src = dir.join(b);
                let bytes = fs::read(&src).map_err(io(&src))?;
                write_atomic(path, &bytes, f.mode.unwrap_or(NEW_FILE_MODE))?;
            }
            None => match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(path)(e)),
            },
        }
    }
    Ok(m.files)
}

/// The JSON document of a rewind: the plan with `path`, `dryRun`, `applied`, `backupDir` and
/// `fork` (`sessiond rewind --json` and the result of `session/rewind`).
pub fn document(
    session: &Path,
    plan: &Plan,
    dry_run: bool,
    applied: Option<&crate::rewind::Applied>,
    forked: Option<&Value>,
) -> Value {
    let mut doc = json!(plan);
    if let Value::Object(m) = &mut doc {
        m.insert("path".into(), json!(session.to_string_lossy()));
        m.insert("dryRun".into(), json!(dry_run));
        m.insert("applied".into(), json!(applied.is_some()));
        m.insert(
            "backupDir".into(),
            json!(applied.map(|a| a.backup_dir.clone())),
        );
        m.insert("fork".into(), forked.cloned().unwrap_or(Value::Null));
    }
    doc
}
