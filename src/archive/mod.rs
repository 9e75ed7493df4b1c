//! The session archive: a directory that keeps every byte of every session file it was
//! shown, whatever the agents later do to their files (Claude Code's `cleanupPeriodDays`
//! deleting old transcripts, pi's migration rewriting a file, a user's editor).
//!
//! Format-agnostic: it copies bytes and needs no dialect to archive. The layout
//! (docs/archive.md) is readable with standard tools:
//!
//! ```text
//! ARCHIVE/archive.json                       {"format": "sessiond-archive", "version": 1}
//! ARCHIVE/lock                               flock(2) held by the pass writing
//! ARCHIVE/sessions/<key>/manifest.json       source path, versions, chunks with sha256
//! ARCHIVE/sessions/<key>/v<N>/<index>.zst    one zstd frame per chunk, in order
//! ```
//!
//! so that `cat ARCHIVE/sessions/<key>/v<N>/*.zst | zstd -d` gives version N's bytes.
//!
//! Invariants:
//!
//! * **Append-only growth adds only the new bytes**: the source's first `size` bytes are checked
//!   against the archived chunks' checksums; when they match, the bytes after them become one
//!   new chunk. When they do not (the file was rewritten in place, or shrank), the file's
//!   whole content becomes a new version; earlier versions stay.
//! * **Nothing archived is changed or deleted** except by [`prune`] with its stated rule.
//!   A chunk is written under its own new name, which no manifest names yet; a batch of
//!   sessions' chunks is made durable with one sync, and only then are their manifests
//!   replaced (temporary files, synced together, renamed). A crash leaves at most chunk files
//!   no manifest names (the leftovers of that interrupted pass), which the next pass that
//!   touches the session removes before it writes ([`pass`]).
//! * **Private**: directories 0700, files 0600, whatever the umask.

pub mod live;
pub mod pass;
pub mod restore;
pub mod view;

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use pass::{PassReport, archive_files, archive_pass, prune};
pub use restore::{ArchivedSession, Restored, find_session, list_sessions, read_version, restore};

/// The `format` of `archive.json`.
pub const FORMAT_NAME: &str = "sessiond-archive";
/// The layout version this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The zstd level of chunks: `zstd -3`, the tool's default.
pub const ZSTD_LEVEL: i32 = 3;

/// Why an archive operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// An I/O error on a named file or directory.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The archive's file system is full (or the quota is spent): the pass stopped at the
    /// first file that did not fit. What it archived before is complete; the file that failed
    /// is as the previous pass left it; the next pass, with room, archives the rest.
    #[error(
        "{}: {source}: the pass stopped after {done} of {files} files; the archive is \
         consistent, and the next pass with room archives the rest",
        path.display()
    )]
    NoSpace {
        /// The archive.
        path: PathBuf,
        /// Files passed over (archived, or unchanged) before the one that did not fit.
        done: usize,
        /// Files the pass was given.
        files: usize,
        /// The error (`ENOSPC` or `EDQUOT`).
        source: io::Error,
    },
    /// The directory is not empty and holds no `archive.json` of ours: never written to.
    #[error("{}: not a sessiond archive (no archive.json, and not empty); nothing written", path.display())]
    NotAnArchive {
        /// The directory.
        path: PathBuf,
    },
    /// A manifest or chunk does not hold what it should (damaged archive).
    #[error("{}: {detail}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// No archived session matches the name given, or more than one does.
    #[error("{}: {detail}", archive.display())]
    NoSuchSession {
        /// The archive.
        archive: PathBuf,
        /// The name and what matched.
        detail: String,
    },
    /// The restore target exists with other content: nothing written.
    #[error("{}: exists and differs from the archived version; nothing written", path.display())]
    Exists {
        /// The target file.
        path: PathBuf,
    },
    /// The restore target could not be rewritten for the new cwd (the dialect refused).
    #[error("{}: {detail}", path.display())]
    Rewrite {
        /// The archived source.
        path: PathBuf,
        /// Why.
        detail: String,
    },
}

impl ArchiveError {
    /// The machine-readable kind for `--json` error documents.
    pub fn kind(&self) -> &'static str {
        match self {
            ArchiveError::Io { .. } => "io",
            ArchiveError::NoSpace { .. } => "noSpace",
            ArchiveError::NotAnArchive { .. } => "notAnArchive",
            ArchiveError::Damaged { .. } => "damaged",
            ArchiveError::NoSuchSession { .. } => "noSuchSession",
            ArchiveError::Exists { .. } => "conflict",
            ArchiveError::Rewrite { .. } => "rewrite",
        }
    }
}

/// `f(path)`'s I/O error, named.
pub(crate) fn io_at(path: &Path) -> impl FnOnce(io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One archived session file: `sessions/<key>/manifest.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The layout version ([`FORMAT_VERSION`]).
    pub format: u32,
    /// The source file's absolute path.
    pub source: PathBuf,
    /// The root the source was found under, and its path below it (what `restore --to DIR`
    /// puts below DIR).
    pub root: PathBuf,
    /// `source` relative to `root`.
    pub relative: PathBuf,
    /// The source as last archived: when unchanged, a pass reads nothing of it.
    pub seen: Option<Seen>,
    /// Every content the file had, oldest first; the last grows by appends.
    pub versions: Vec<Version>,
}

/// A source file's identity and size, from `stat`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Seen {
    /// Bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Inode number.
    pub ino: u64,
    /// Device number.
    pub dev: u64,
}

impl Seen {
    /// `meta`'s identity and size.
    pub fn of(meta: &fs::Metadata) -> Seen {
        Seen {
            size: meta.len(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }
}

/// One content of a session file: its chunks concatenated.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// 1, 2, ...: the directory is `v<number>`.
    pub number: u32,
    /// Bytes archived (the sum of the chunks' lengths).
    pub size: u64,
    /// When this version was first archived (ms since the epoch).
    pub first_archived_ms: i64,
    /// When bytes were last added to it (ms since the epoch).
    pub last_archived_ms: i64,
    /// The chunks, in order.
    pub chunks: Vec<Chunk>,
}

impl Version {
    /// The version's directory name.
    pub fn dir(&self) -> String {
        format!("v{}", self.number)
    }
}

/// A run of the source's bytes, stored as one zstd frame.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Chunk {
    /// File name inside the version directory (`00000000.zst`, ...: sorted as they follow).
    pub file: String,
    /// Where the bytes start in the source.
    pub offset: u64,
    /// How many bytes (uncompressed).
    pub length: u64,
    /// Bytes of the zstd frame.
    pub compressed: u64,
    /// SHA-256 of the uncompressed bytes, lowercase hex.
    pub sha256: String,
}

/// The chunk file name for the `index`th chunk of a version.
pub fn chunk_name(index: usize) -> String {
    format!("{index:08}.zst")
}

/// Lowercase hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The directory name of the session archived from `source`: its file stem (made safe, at most
/// 80 bytes) and 16 hex digits of the SHA-256 of its path, so two files with one name in
/// different directories never share a key, and a person can still tell which is which.
pub fn session_key(source: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let stem: String = source
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let digest = Sha256::digest(source.as_os_str().as_bytes());
    format!("{stem}-{}", &hex(&digest)[..16])
}

/// An archive directory, opened for reading or writing.
#[derive(Clone, Debug)]
pub struct Archive {
    /// Its path (absolute).
    pub dir: PathBuf,
}

impl Archive {
    /// Opens the archive at `dir` for writing, creating it (0700) when missing or empty.
    /// Errors: I/O; [`ArchiveError::NotAnArchive`] for a non-empty directory without our
    /// `archive.json` (it is never written to).
    pub fn create(dir: &Path) -> Result<Archive, ArchiveError> {
        let dir = crate::paths::absolute(dir);
        make_dirs(&dir)?;
        let marker = dir.join("archive.json");
        if !marker.exists() {
            let empty = fs::read_dir(&dir).map_err(io_at(&dir))?.next().is_none();
            if !empty {
                return Err(ArchiveError::NotAnArchive { path: dir });
            }
            let doc = serde_json::json!({"format": FORMAT_NAME, "version": FORMAT_VERSION});
            write_atomic(&marker, format!("{doc}\n").as_bytes())?;
        }
        let archive = Archive::open(&dir)?;
        make_dirs(&archive.sessions_dir())?;
        Ok(archive)
    }

    /// Opens an existing archive for reading. Errors: I/O, or not an archive.
    pub fn open(dir: &Path) -> Result<Archive, ArchiveError> {
        let dir = crate::paths::absolute(dir);
        let marker = dir.join("archive.json");
        let text = fs::read(&marker).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ArchiveError::NotAnArchive { path: dir.clone() },
            _ => io_at(&marker)(e),
        })?;
        let doc: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| ArchiveError::Damaged {
                path: marker.clone(),
                detail: e.to_string(),
            })?;
        if doc.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
            return Err(ArchiveError::NotAnArchive { path: dir });
        }
        if doc.get("version").and_then(serde_json::Value::as_u64) != Some(u64::from(FORMAT_VERSION))
        {
            return Err(ArchiveError::Damaged {
                path: marker,
                detail: format!("archive layout version is not {FORMAT_VERSION}"),
            });
        }
        Ok(Archive { dir })
    }

    /// `ARCHIVE/sessions`.
    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }

    /// The directory of one session.
    pub fn session_dir(&self, key: &str) -> PathBuf {
        self.sessions_dir().join(key)
    }

    /// Takes the archive's writer lock (`ARCHIVE/lock`), waiting for another pass to end.
    /// Errors: I/O.
    pub fn lock(&self) -> Result<WriterLock, ArchiveError> {
        let path = self.dir.join("lock");
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode_private()
            .open(&path)
            .map_err(io_at(&path))?;
        loop {
            match rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => return Ok(WriterLock { _file: file }),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(io_at(&path)(e.into())),
            }
        }
    }

    /// Reads the manifest of `key`; `None` when the session is not archived. Errors: I/O, or
    /// a manifest that cannot be read.
    pub fn manifest(&self, key: &str) -> Result<Option<Manifest>, ArchiveError> {
        let path = self.session_dir(key).join("manifest.json");
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_at(&path)(e)),
        };
        let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| ArchiveError::Damaged {
            path: path.clone(),
            detail: format!("manifest: {e}"),
        })?;
        if m.format != FORMAT_VERSION {
            return Err(ArchiveError::Damaged {
                path,
                detail: format!("manifest format {} is not {FORMAT_VERSION}", m.format),
            });
        }
        Ok(Some(m))
    }

    /// Replaces the manifest of `key` atomically (temporary file, sync, rename). A pass
    /// writes its manifests in batches instead ([`manifest_temp`]), syncing them together.
    pub fn write_manifest(&self, key: &str, m: &Manifest) -> Result<(), ArchiveError> {
        let path = self.session_dir(key).join("manifest.json");
        let mut text = serde_json::to_vec_pretty(m).map_err(|e| ArchiveError::Damaged {
            path: path.clone(),
            detail: format!("manifest: {e}"),
        })?;
        text.push(b'\n');
        write_atomic(&path, &text)
    }
}

/// The manifest of `key` written to a 0600 temporary file beside its place, not synced: the
/// caller syncs and renames it.
pub(crate) fn manifest_temp(
    archive: &Archive,
    key: &str,
    m: &Manifest,
) -> Result<tempfile::NamedTempFile, ArchiveError> {
    let dir = archive.session_dir(key);
    let mut text = serde_json::to_vec_pretty(m).map_err(|e| ArchiveError::Damaged {
        path: dir.join("manifest.json"),
        detail: format!("manifest: {e}"),
    })?;
    text.push(b'\n');
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(&dir)
        .map_err(io_at(&dir))?;
    tmp.write_all(&text).map_err(io_at(tmp.path()))?;
    Ok(tmp)
}

/// The archive's writer lock; released when dropped.
#[derive(Debug)]
pub struct WriterLock {
    _file: fs::File,
}

/// `OpenOptions` that create files 0600.
trait Private {
    fn mode_private(&mut self) -> &mut Self;
}

impl Private for fs::OpenOptions {
    fn mode_private(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

/// Creates `dir` and its missing parents, each new one 0700 (an existing one is left as it is).
pub fn make_dirs(dir: &Path) -> Result<(), ArchiveError> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_at(dir))
}

/// Writes `bytes` to `path` atomically: a 0600 temporary file beside it, synced, renamed over.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ArchiveError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(io_at(dir))?;
    tmp.write_all(bytes).map_err(io_at(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io_at(path))?;
    tmp.persist(path).map_err(|e| io_at(path)(e.error))?;
    Ok(())
}

/// Reads and checks one chunk: its frame decompressed, its length and SHA-256 as the manifest
/// says. Errors: I/O, or [`ArchiveError::Damaged`].
pub fn read_chunk(dir: &Path, chunk: &Chunk) -> Result<Vec<u8>, ArchiveError> {
    let path = dir.join(&chunk.file);
    let file = fs::File::open(&path).map_err(io_at(&path))?;
    let mut out = Vec::with_capacity(usize::try_from(chunk.length).unwrap_or(0));
    zstd::stream::read::Decoder::new(file)
        .and_then(|mut d| d.read_to_end(&mut out))
        .map_err(|e| ArchiveError::Damaged {
            path: path.clone(),
            detail: format!("zstd frame: {e}"),
        })?;
    if out.len() as u64 != chunk.length {
        return Err(ArchiveError::Damaged {
            path,
            detail: format!(
                "holds {} bytes, the manifest says {}",
                out.len(),
                chunk.length
            ),
        });
    }
    let sum = hex(&Sha256::digest(&out));
    if sum != chunk.sha256 {
        return Err(ArchiveError::Damaged {
            path,
            detail: format!("sha256 {sum}, the manifest says {}", chunk.sha256),
        });
    }
    Ok(out)
}
