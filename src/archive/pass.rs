//! An archive pass: every session file under the roots mirrored into the archive, only what
//! changed since the last pass read and written (see the invariants in [`super`]); and
//! `--prune`, the one operation that removes archived sessions.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{
    Archive, ArchiveError, Chunk, Manifest, Seen, Version, ZSTD_LEVEL, chunk_name, hex, io_at,
    make_dirs, now_ms, session_key,
};

/// How deep below a root session files are looked for: pi's `<cwd>/<file>`, Claude Code's
/// `<project>/<session>/subagents/<file>`, Codex's `YYYY/MM/DD/rollout-*.jsonl`, with room.
const MAX_DEPTH: usize = 6;

/// What a pass did.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassReport {
    /// The archive.
    pub archive: PathBuf,
    /// The roots walked.
    pub roots: Vec<PathBuf>,
    /// Session files found.
    pub files: usize,
    /// Files archived for the first time.
    pub added: usize,
    /// Files that grew: only their new bytes were added.
    pub appended: usize,
    /// Files rewritten in place: archived again as a new version.
    pub new_versions: usize,
    /// Files unchanged since the last pass.
    pub unchanged: usize,
    /// Source bytes read (for checks and for new chunks).
    pub bytes_read: u64,
    /// Source bytes added to the archive (uncompressed).
    pub bytes_added: u64,
    /// Bytes of the chunk files written.
    pub bytes_written: u64,
    /// Files that could not be archived this time (the next pass tries again).
    pub errors: Vec<PassFailure>,
}

/// A file a pass could not archive.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassFailure {
    /// The source file.
    pub path: PathBuf,
    /// Why.
    pub message: String,
}

/// What happened to one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// First archived.
    Added,
    /// New bytes appended.
    Appended,
    /// Archived again as a new version.
    NewVersion,
    /// Nothing new.
    Unchanged,
}

/// Every `*.jsonl` file under `root` (directories up to [`MAX_DEPTH`] below it, symbolic links
/// not followed), sorted. Unreadable directories are skipped.
pub fn session_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_owned(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() && depth < MAX_DEPTH {
                stack.push((path, depth + 1));
            } else if kind.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// One pass over `roots` into the archive at `dir` (created when missing or empty), holding
/// the archive's lock. Errors: the archive's own (cannot be created, is not an archive, the
/// lock); a file that cannot be archived is reported in [`PassReport::errors`] instead.
pub fn archive_pass(dir: &Path, roots: &[PathBuf]) -> Result<PassReport, ArchiveError> {
    let mut files = Vec::new();
    for root in roots {
        let root = fs::canonicalize(root).unwrap_or_else(|_| crate::paths::absolute(root));
        for f in session_files(&root) {
            files.push((root.clone(), f));
        }
    }
    let mut report = archive_files(dir, &files)?;
    report.roots = roots.to_vec();
    Ok(report)
}

/// Archives `files` (each with the root it was found under) into the archive at `dir`.
/// Errors: as [`archive_pass`].
pub fn archive_files(dir: &Path, files: &[(PathBuf, PathBuf)]) -> Result<PassReport, ArchiveError> {
    let archive = Archive::create(dir)?;
    let _lock = archive.lock()?;
    // Written before and removed after: found at the start, a pass was interrupted and may
    // have left chunk files no manifest names in sessions it will not touch again.
    let marker = archive.dir.join("pass-running");
    if marker.exists() {
        sweep_all(&archive);
    }
    super::write_atomic(&marker, b"")?;
    let mut report = PassReport {
        archive: archive.dir.clone(),
        ..PassReport::default()
    };
    let mut seen = HashSet::new();
    let mut batch = Batch::default();
    let mut committed = 0usize;
    let no_space = |e: ArchiveError, done: usize| match e {
        ArchiveError::Io { source, .. } => ArchiveError::NoSpace {
            path: archive.dir.clone(),
            done,
            files: files.len(),
            source,
        },
        other => other,
    };
    for (root, file) in files {
        if !seen.insert(file) {
            continue;
        }
        report.files += 1;
        match archive_file(&archive, root, file, &mut report) {
            Ok((outcome, pending)) => {
                match outcome {
                    Outcome::Added => report.added += 1,
                    Outcome::Appended => report.appended += 1,
                    Outcome::NewVersion => report.new_versions += 1,
                    Outcome::Unchanged => report.unchanged += 1,
                }
                if let Some(p) = pending {
                    batch.bytes += p.added;
                    batch.pending.push(p);
                }
                batch.files += 1;
            }
            Err(e) if is_out_of_space(&e) => {
                // Every file after this one would fail the same way: stop, and say so once.
                // The failed session was put back as its manifest names it; the batch's
                // other sessions are committed when there is room for their manifests, else
                // put back too, so nothing the pass began is left half-written.
                let done = match commit(&archive, &mut batch) {
                    Ok(()) => report.files - 1,
                    Err(_) => committed,
                };
                let _ = fs::remove_file(&marker);
                return Err(no_space(e, done));
            }
            Err(e) => report.errors.push(PassFailure {
                path: file.clone(),
                message: e.to_string(),
            }),
        }
        if batch.files >= BATCH_FILES || batch.bytes >= BATCH_BYTES {
            if let Err(e) = commit(&archive, &mut batch) {
                let _ = fs::remove_file(&marker);
                return Err(if is_out_of_space(&e) {
                    no_space(e, committed)
                } else {
                    e
                });
            }
            committed = report.files;
        }
    }
    if let Err(e) = commit(&archive, &mut batch) {
        let _ = fs::remove_file(&marker);
        return Err(if is_out_of_space(&e) {
            no_space(e, committed)
        } else {
            e
        });
    }
    fs::remove_file(&marker).map_err(io_at(&marker))?;
    Ok(report)
}

/// Files whose chunks are made durable together ([`commit`]): at most this many ...
const BATCH_FILES: usize = 1000;
/// ... or this many new bytes (uncompressed).
const BATCH_BYTES: u64 = 256 << 20;

/// A session whose new chunks are written and whose manifest is not yet.
struct Pending {
    key: String,
    manifest: Manifest,
    /// Source bytes its new chunks hold.
    added: u64,
}

/// The sessions of a pass not committed yet.
#[derive(Default)]
struct Batch {
    pending: Vec<Pending>,
    files: usize,
    bytes: u64,
}

/// Commits a batch: the chunks it wrote made durable with one file-system sync, then every
/// manifest written to a temporary file, synced likewise, and renamed into place, and the
/// renames synced. One sync per step instead of two `fsync`s per file (a journal commit each,
/// several milliseconds on common disks, which made a first pass over many small files spend
/// most of its time waiting), with the same guarantee: a manifest names only chunks already
/// on the disk, so a crash leaves at most chunk or temporary files no manifest names (swept
/// by the next pass). On failure every session of the batch is put back as its manifest on
/// disk names it.
fn commit(archive: &Archive, batch: &mut Batch) -> Result<(), ArchiveError> {
    let pending = std::mem::take(&mut batch.pending);
    batch.files = 0;
    batch.bytes = 0;
    if pending.is_empty() {
        return Ok(());
    }
    let result = commit_pending(archive, &pending);
    if result.is_err() {
        for p in &pending {
            put_back(archive, &p.key);
        }
    }
    result
}

fn commit_pending(archive: &Archive, pending: &[Pending]) -> Result<(), ArchiveError> {
    sync_archive(archive)?;
    let mut temps = Vec::with_capacity(pending.len());
    for p in pending {
        temps.push(super::manifest_temp(archive, &p.key, &p.manifest)?);
    }
    sync_archive(archive)?;
    for (p, tmp) in pending.iter().zip(temps) {
        let path = archive.session_dir(&p.key).join("manifest.json");
        tmp.persist(&path).map_err(|e| io_at(&path)(e.error))?;
    }
    sync_archive(archive)
}

/// Makes everything written in the archive durable: `syncfs(2)` on Linux (the archive's file
/// system at once), else `sync(2)`.
fn sync_archive(archive: &Archive) -> Result<(), ArchiveError> {
    #[cfg(target_os = "linux")]
    {
        let dir = fs::File::open(&archive.dir).map_err(io_at(&archive.dir))?;
        rustix::fs::syncfs(&dir).map_err(|e| io_at(&archive.dir)(e.into()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        rustix::fs::sync();
        Ok(())
    }
}

/// Puts a session's directory back as its manifest on disk names it: chunks and temporary
/// files it does not name removed, and a session with no manifest yet removed whole.
fn put_back(archive: &Archive, key: &str) {
    let session_dir = archive.session_dir(key);
    match archive.manifest(key) {
        Ok(Some(m)) => sweep_session(&session_dir, Some(&m)),
        Ok(None) if session_dir.is_dir() => {
            let _ = fs::remove_dir_all(&session_dir);
        }
        // No directory, or a manifest that cannot be read: left as it is.
        Ok(None) | Err(_) => {}
    }
}

/// Whether `e` says the archive's file system is full (or the user's quota is spent).
fn is_out_of_space(e: &ArchiveError) -> bool {
    matches!(
        e,
        ArchiveError::Io { source, .. }
            if matches!(
                source.kind(),
                io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
            )
    )
}

/// Archives one file's bytes; the caller holds the lock and commits the returned manifest
/// ([`commit`]; `None`: nothing to write). On failure the session's directory is put back as
/// its manifest names it (a chunk written before the failure is removed, and a session
/// archived for the first time leaves no directory), so a failed file leaves nothing
/// half-written, whatever the next pass does.
fn archive_file(
    archive: &Archive,
    root: &Path,
    source: &Path,
    report: &mut PassReport,
) -> Result<(Outcome, Option<Pending>), ArchiveError> {
    let added_before = report.bytes_added;
    let result = archive_file_inner(archive, root, source, report);
    match result {
        Ok((outcome, manifest)) => Ok((
            outcome,
            manifest.map(|manifest| Pending {
                key: session_key(source),
                manifest,
                added: report.bytes_added - added_before,
            }),
        )),
        Err(e) => {
            put_back(archive, &session_key(source));
            Err(e)
        }
    }
}

/// [`archive_file`]'s work.
fn archive_file_inner(
    archive: &Archive,
    root: &Path,
    source: &Path,
    report: &mut PassReport,
) -> Result<(Outcome, Option<Manifest>), ArchiveError> {
    let meta = fs::symlink_metadata(source).map_err(io_at(source))?;
    if !meta.is_file() {
        return Err(io_at(source)(io::Error::other("not a regular file")));
    }
    let seen = Seen::of(&meta);
    let file = open_source(source, &seen)?;
    let file = &file;
    let key = session_key(source);
    let manifest = archive.manifest(&key)?;
    let Some(mut m) = manifest else {
        let session_dir = archive.session_dir(&key);
        make_dirs(&session_dir)?;
        sweep_session(&session_dir, None);
        let now = now_ms();
        let mut version = Version {
            number: 1,
            size: 0,
            first_archived_ms: now,
            last_archived_ms: now,
            chunks: Vec::new(),
        };
        add_chunk(
            &session_dir,
            &mut version,
            (source, file),
            0,
            seen.size,
            report,
        )?;
        let m = Manifest {
            format: super::FORMAT_VERSION,
            source: source.to_owned(),
            root: root.to_owned(),
            relative: source.strip_prefix(root).unwrap_or(source).to_owned(),
            seen: Some(seen),
            versions: vec![version],
        };
        return Ok((Outcome::Added, Some(m)));
    };
    if m.seen == Some(seen) {
        return Ok((Outcome::Unchanged, None));
    }
    let session_dir = archive.session_dir(&key);
    let Some(last) = m.versions.last() else {
        return Err(ArchiveError::Damaged {
            path: session_dir.join("manifest.json"),
            detail: "no versions".into(),
        });
    };
    let grown = seen.size >= last.size && prefix_matches((source, file), last, report)?;
    sweep_session(&session_dir, Some(&m));
    let outcome = if grown && seen.size == last.size {
        Outcome::Unchanged
    } else if grown {
        let Some(version) = m.versions.last_mut() else {
            return Ok((Outcome::Unchanged, None));
        };
        let from = version.size;
        add_chunk(
            &session_dir,
            version,
            (source, file),
            from,
            seen.size,
            report,
        )?;
        version.last_archived_ms = now_ms();
        Outcome::Appended
    } else {
        let now = now_ms();
        let mut version = Version {
            number: last.number + 1,
            size: 0,
            first_archived_ms: now,
            last_archived_ms: now,
            chunks: Vec::new(),
        };
        add_chunk(
            &session_dir,
            &mut version,
            (source, file),
            0,
            seen.size,
            report,
        )?;
        m.versions.push(version);
        Outcome::NewVersion
    };
    m.seen = Some(seen);
    Ok((outcome, Some(m)))
}

/// Opens the session file `source` just checked as `seen` without following a symbolic link
/// or waiting on a FIFO, and refuses a descriptor that is not that file (swapped between the
/// check and the open). Errors: `Io`.
fn open_source(source: &Path, seen: &Seen) -> Result<fs::File, ArchiveError> {
    use std::os::unix::fs::MetadataExt;
    let file = crate::storage::reader::open_regular_nofollow(source).map_err(|e| match e {
        crate::storage::reader::OpenError::Io { source: e, .. } => io_at(source)(e),
        _ => io_at(source)(io::Error::other("not a regular file")),
    })?;
    let meta = file.metadata().map_err(io_at(source))?;
    if (meta.dev(), meta.ino()) != (seen.dev, seen.ino) {
        return Err(io_at(source)(io::Error::other(
            "replaced while it was being archived",
        )));
    }
    Ok(file)
}

/// Whether the source's first `version.size` bytes are the version's chunks (each chunk's
/// range hashed and compared with its checksum; stops at the first difference). `source` is
/// the path and the file opened from it.
fn prefix_matches(
    (source, file): (&Path, &fs::File),
    version: &Version,
    report: &mut PassReport,
) -> Result<bool, ArchiveError> {
    let mut file = file;
    io::Seek::seek(&mut file, io::SeekFrom::Start(0)).map_err(io_at(source))?;
    let mut buf = vec![0u8; 1 << 16];
    for chunk in &version.chunks {
        let mut hasher = Sha256::new();
        let mut left = chunk.length;
        while left > 0 {
            let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
            let n = file.read(&mut buf[..want]).map_err(io_at(source))?;
            if n == 0 {
                return Ok(false);
            }
            report.bytes_read += n as u64;
            hasher.update(&buf[..n]);
            left -= n as u64;
        }
        if hex(&hasher.finalize()) != chunk.sha256 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Adds the source's bytes `from..to` to `version` as one chunk (none when the range is
/// empty): compressed into a 0600 temporary file in the session's directory and renamed to
/// its place in the version's directory. Syncing it, and the manifest, are [`commit`]'s.
fn add_chunk(
    session_dir: &Path,
    version: &mut Version,
    (source, file): (&Path, &fs::File),
    from: u64,
    to: u64,
    report: &mut PassReport,
) -> Result<(), ArchiveError> {
    if to <= from {
        return Ok(());
    }
    let vdir = session_dir.join(version.dir());
    make_dirs(&vdir)?;
    let mut file = file;
    io::Seek::seek(&mut file, io::SeekFrom::Start(from)).map_err(io_at(source))?;
    let tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(session_dir)
        .map_err(io_at(session_dir))?;
    let mut encoder = zstd::stream::write::Encoder::new(io::BufWriter::new(tmp), ZSTD_LEVEL)
        .map_err(io_at(session_dir))?;
    encoder.include_checksum(true).map_err(io_at(session_dir))?;
    encoder
        .set_pledged_src_size(Some(to - from))
        .map_err(io_at(session_dir))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 17];
    let mut left = to - from;
    while left > 0 {
        let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        let n = file.read(&mut buf[..want]).map_err(io_at(source))?;
        if n == 0 {
            // Shrunk while read: rewritten under us; the next pass sees it whole.
            return Err(io_at(source)(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file shrank while it was archived",
            )));
        }
        hasher.update(&buf[..n]);
        encoder.write_all(&buf[..n]).map_err(io_at(session_dir))?;
        left -= n as u64;
    }
    let tmp = encoder
        .finish()
        .and_then(|w| w.into_inner().map_err(io::IntoInnerError::into_error))
        .map_err(io_at(session_dir))?;
    // Made durable with the rest of its batch before a manifest names it ([`commit`]).
    let compressed = tmp.as_file().metadata().map_err(io_at(session_dir))?.len();
    let name = chunk_name(version.chunks.len());
    let dest = vdir.join(&name);
    tmp.persist(&dest).map_err(|e| io_at(&dest)(e.error))?;
    report.bytes_read += to - from;
    report.bytes_added += to - from;
    report.bytes_written += compressed;
    version.chunks.push(Chunk {
        file: name,
        offset: from,
        length: to - from,
        compressed,
        sha256: hex(&hasher.finalize()),
    });
    version.size = to;
    Ok(())
}

/// Removes from a session's directory what no manifest names: temporary files, version
/// directories and chunk files an interrupted pass left. Best effort: what cannot be removed
/// stays until the next sweep.
fn sweep_session(session_dir: &Path, m: Option<&Manifest>) {
    let versions: Vec<&Version> = m.map(|m| m.versions.iter().collect()).unwrap_or_default();
    let Ok(entries) = fs::read_dir(session_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == "manifest.json" {
            continue;
        }
        let path = entry.path();
        match versions.iter().find(|v| v.dir() == name) {
            Some(v) => {
                let Ok(files) = fs::read_dir(&path) else {
                    continue;
                };
                for f in files.flatten() {
                    let fname = f.file_name();
                    if !v.chunks.iter().any(|c| *c.file == *fname) {
                        let _ = fs::remove_file(f.path());
                    }
                }
            }
            None if path.is_dir() => {
                let _ = fs::remove_dir_all(&path);
            }
            None => {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

/// Sweeps every session (after an interrupted pass); a session whose manifest cannot be read
/// is left alone.
fn sweep_all(archive: &Archive) {
    let Ok(entries) = fs::read_dir(archive.sessions_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let key = entry.file_name().to_string_lossy().into_owned();
        if let Ok(m) = archive.manifest(&key) {
            sweep_session(&entry.path(), m.as_ref());
        }
    }
}

/// One session `--prune` removes or, in a dry run, would remove.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pruned {
    /// The session's key (its directory under `sessions/`).
    pub key: String,
    /// Its source path.
    pub source: PathBuf,
    /// When bytes were last added to it (ms since the epoch).
    pub last_archived_ms: i64,
    /// Bytes of its chunk files.
    pub bytes: u64,
}

/// `archive --prune --older-than DAYS`: the archived sessions whose original no longer exists
/// and to which nothing was added for `older_than_days` days. Removed only when `apply`
/// (each session's directory is renamed out of `sessions/` first, so a crash never leaves
/// half a session behind a manifest); otherwise only listed. Errors: the archive's.
pub fn prune(dir: &Path, older_than_days: u64, apply: bool) -> Result<Vec<Pruned>, ArchiveError> {
    let archive = Archive::open(dir)?;
    let _lock = archive.lock()?;
    let trash = archive.dir.join("pruning");
    if trash.exists() {
        fs::remove_dir_all(&trash).map_err(io_at(&trash))?;
    }
    let cutoff = now_ms().saturating_sub(
        i64::try_from(older_than_days.saturating_mul(86_400_000)).unwrap_or(i64::MAX),
    );
    let mut out = Vec::new();
    for s in super::list_sessions(&archive.dir)? {
        if s.original_exists || s.last_archived_ms > cutoff {
            continue;
        }
        out.push(Pruned {
            key: s.key.clone(),
            source: s.manifest.source.clone(),
            last_archived_ms: s.last_archived_ms,
            bytes: s
                .manifest
                .versions
                .iter()
                .flat_map(|v| &v.chunks)
                .map(|c| c.compressed)
                .sum(),
        });
    }
    if apply && !out.is_empty() {
        make_dirs(&trash)?;
        for p in &out {
            let from = archive.session_dir(&p.key);
            let to = trash.join(&p.key);
            fs::rename(&from, &to).map_err(io_at(&from))?;
        }
        fs::remove_dir_all(&trash).map_err(io_at(&trash))?;
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A session file replaced (by another file, a symbolic link or a FIFO) between the look
    /// at it and the open is not read, and the open never waits.
    #[test]
    fn a_source_swapped_after_the_check_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("s.jsonl");
        fs::write(&source, "{}\n").unwrap();
        let seen = Seen::of(&fs::symlink_metadata(&source).unwrap());
        assert!(open_source(&source, &seen).is_ok());
        let other = dir.path().join("other.jsonl");
        fs::write(&other, "{\"secret\":1}\n").unwrap();
        // Another file renamed over it.
        let copy = dir.path().join("copy.jsonl");
        fs::copy(&other, &copy).unwrap();
        fs::rename(&copy, &source).unwrap();
        assert!(open_source(&source, &seen).is_err(), "another file");
        // A symbolic link.
        fs::remove_file(&source).unwrap();
        std::os::unix::fs::symlink(&other, &source).unwrap();
        assert!(open_source(&source, &seen).is_err(), "a link");
        // A FIFO: refused at once.
        fs::remove_file(&source).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &source,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(open_source(&source, &seen).is_err(), "a FIFO");
    }
}
