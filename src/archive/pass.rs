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
    crate::storage::list::session_files_within(root, MAX_DEPTH)
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
/// Files are read and compressed several at once on rayon's pool (they are independent, and
/// compressing is most of a first pass's work), ahead of this thread, which takes their
/// results in order and commits them in batches ([`commit`]) while the pool goes on: the
/// same decisions, the same order, as one file after another. Errors: as [`archive_pass`].
pub fn archive_files<'a>(
    dir: &Path,
    files: &'a [(PathBuf, PathBuf)],
) -> Result<PassReport, ArchiveError> {
    let archive = Archive::create(dir)?;
    let _lock = archive.lock()?;
    // Written before and removed after: found at the start, a pass was interrupted and may
    // have left chunk files no manifest names in sessions it will not touch again.
    let marker = archive.dir.join("pass-running");
    if marker.exists() {
        sweep_all(&archive);
    }
    super::write_atomic(&marker, b"")?;
    let mut run = Run {
        archive: archive.clone(),
        total: files.len(),
        files: files.iter(),
        seen: HashSet::new(),
        report: PassReport {
            archive: archive.dir.clone(),
            ..PassReport::default()
        },
        batch: Batch::default(),
        committed: 0,
        renamed: false,
        stopped: None,
    };
    let work = |piece: Vec<(&'a Path, &'a Path)>| {
        piece
            .into_iter()
            .map(|(root, file)| (file, archive_file(&archive, root, file)))
            .collect::<Vec<_>>()
    };
    if crate::core::ahead::available() {
        let _ = crate::core::ahead::in_order(
            &mut run,
            AHEAD,
            |run| {
                let piece: Vec<_> = std::iter::from_fn(|| run.next()).take(PIECE).collect();
                Ok::<_, ()>((!piece.is_empty()).then_some((piece, 1)))
            },
            &work,
            |run, results| {
                results.into_iter().for_each(|r| run.take(r));
                Ok(())
            },
        );
    } else {
        while let Some(f) = run.next() {
            work(vec![f]).into_iter().for_each(|r| run.take(r));
        }
    }
    if run.stopped.is_none() {
        run.renamed |= !run.batch.pending.is_empty();
        if let Err(e) = commit(&archive, &mut run.batch) {
            run.stopped = Some(if is_out_of_space(&e) {
                run.no_space(e, run.committed)
            } else {
                e
            });
        }
    }
    // The last renames made durable before the pass says it is done.
    if run.renamed
        && let Err(e) = sync_archive(&archive)
    {
        run.stopped.get_or_insert(e);
    }
    if let Some(e) = run.stopped {
        let _ = fs::remove_file(&marker);
        return Err(e);
    }
    fs::remove_file(&marker).map_err(io_at(&marker))?;
    Ok(run.report)
}

/// Files are handed to the pool this many at a time: one wake-up of the committing thread per
/// piece rather than per file (on a busy machine every wake-up is a chance for another
/// process to take the core a compressing thread was on).
const PIECE: usize = 32;

/// Pieces read and compressed ahead of the thread that commits them: enough to keep the pool
/// busy while a batch is synced.
const AHEAD: crate::core::ahead::Limit = crate::core::ahead::Limit {
    items: 16,
    weight: usize::MAX,
};

/// One file's result: what happened, the manifest to commit, the bytes counted.
type FileResult = Result<(Outcome, Option<Pending>, Counts), ArchiveError>;

/// Bytes one file's archiving read, added and wrote ([`PassReport`]'s counters).
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    read: u64,
    added: u64,
    written: u64,
}

/// A pass under way: the files left, the report, the batch not committed yet, and why it
/// stopped (then every later result is put back, not committed).
struct Run<'a, I> {
    archive: Archive,
    total: usize,
    files: I,
    seen: HashSet<&'a Path>,
    report: PassReport,
    batch: Batch,
    /// Files passed over by the batches committed so far.
    committed: usize,
    /// Whether a batch's manifests were renamed into place (to be synced at the end).
    renamed: bool,
    stopped: Option<ArchiveError>,
}

impl<'a, I: Iterator<Item = &'a (PathBuf, PathBuf)>> Run<'a, I> {
    /// The next file to archive (each path once); none once the pass stopped.
    fn next(&mut self) -> Option<(&'a Path, &'a Path)> {
        if self.stopped.is_some() {
            return None;
        }
        self.files
            .by_ref()
            .find(|(_, file)| self.seen.insert(file.as_path()))
            .map(|(root, file)| (root.as_path(), file.as_path()))
    }

    /// `e` (an `ENOSPC` or `EDQUOT`) as the pass's `NoSpace`, `done` files passed over.
    fn no_space(&self, e: ArchiveError, done: usize) -> ArchiveError {
        match e {
            ArchiveError::Io { source, .. } => ArchiveError::NoSpace {
                path: self.archive.dir.clone(),
                done,
                files: self.total,
                source,
            },
            other => other,
        }
    }

    /// Takes one file's result, in the files' order: counted and added to the batch, which is
    /// committed when full. After the pass stopped, a session the result wrote to is put back.
    fn take(&mut self, (file, result): (&Path, FileResult)) {
        if self.stopped.is_some() {
            if let Ok((_, Some(p), _)) = result {
                put_back(&self.archive, &p.key);
            }
            return;
        }
        self.report.files += 1;
        match result {
            Ok((outcome, pending, counts)) => {
                match outcome {
                    Outcome::Added => self.report.added += 1,
                    Outcome::Appended => self.report.appended += 1,
                    Outcome::NewVersion => self.report.new_versions += 1,
                    Outcome::Unchanged => self.report.unchanged += 1,
                }
                self.report.bytes_read += counts.read;
                self.report.bytes_added += counts.added;
                self.report.bytes_written += counts.written;
                if let Some(p) = pending {
                    self.batch.bytes += p.added;
                    self.batch.pending.push(p);
                }
            }
            Err(e) if is_out_of_space(&e) => {
                // Every file after this one would fail the same way: stop, and say so once.
                // The failed session was put back as its manifest names it; the batch's
                // other sessions are committed when there is room for their manifests, else
                // put back too, so nothing the pass began is left half-written.
                self.renamed |= !self.batch.pending.is_empty();
                let done = match commit(&self.archive, &mut self.batch) {
                    Ok(()) => self.report.files - 1,
                    Err(_) => self.committed,
                };
                self.stopped = Some(self.no_space(e, done));
                return;
            }
            Err(e) => self.report.errors.push(PassFailure {
                path: file.to_owned(),
                message: e.to_string(),
            }),
        }
        if self.batch.pending.len() >= BATCH_FILES || self.batch.bytes >= BATCH_BYTES {
            self.renamed = true;
            if let Err(e) = commit(&self.archive, &mut self.batch) {
                self.stopped = Some(if is_out_of_space(&e) {
                    self.no_space(e, self.committed)
                } else {
                    e
                });
                return;
            }
            self.committed = self.report.files;
        }
    }
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
    /// The sessions written to (a file found unchanged has nothing to commit).
    pending: Vec<Pending>,
    bytes: u64,
}

/// Commits a batch: every manifest written to a temporary file, then these and the chunks the
/// batch wrote made durable with one file-system sync, then the manifests renamed into place.
/// The renames are made durable by the next batch's sync, or the one that ends the pass
/// ([`archive_files`]): a crash before leaves the earlier manifest, as consistent. One sync
/// per batch instead of two `fsync`s per file (a journal commit each, several milliseconds on
/// common disks, which made a first pass over many small files spend most of its time
/// waiting), with the same guarantee: a manifest names only chunks already on the disk, so a
/// crash leaves at most chunk or temporary files no manifest names (swept by the next pass).
/// On failure every session of the batch is put back as its manifest on disk names it.
fn commit(archive: &Archive, batch: &mut Batch) -> Result<(), ArchiveError> {
    let pending = std::mem::take(&mut batch.pending);
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
    let mut temps = Vec::with_capacity(pending.len());
    for p in pending {
        temps.push(super::manifest_temp(archive, &p.key, &p.manifest)?);
    }
    sync_archive(archive)?;
    for (p, tmp) in pending.iter().zip(temps) {
        let path = archive.session_dir(&p.key).join("manifest.json");
        tmp.persist(&path).map_err(|e| io_at(&path)(e.error))?;
    }
    Ok(())
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
fn archive_file(archive: &Archive, root: &Path, source: &Path) -> FileResult {
    let mut counts = Counts::default();
    let result = archive_file_inner(archive, root, source, &mut counts);
    match result {
        Ok((outcome, manifest)) => Ok((
            outcome,
            manifest.map(|manifest| Pending {
                key: session_key(source),
                manifest,
                added: counts.added,
            }),
            counts,
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
    counts: &mut Counts,
) -> Result<(Outcome, Option<Manifest>), ArchiveError> {
    let meta = fs::symlink_metadata(source).map_err(io_at(source))?;
    if !meta.is_file() {
        return Err(io_at(source)(io::Error::other("not a regular file")));
    }
    let seen = Seen::of(&meta);
    let key = session_key(source);
    let manifest = archive.manifest(&key)?;
    if manifest.as_ref().is_some_and(|m| m.seen == Some(seen)) {
        // Unchanged since it was last archived: not even opened.
        return Ok((Outcome::Unchanged, None));
    }
    let file = open_source(source, &seen)?;
    let file = &file;
    let Some(mut m) = manifest else {
        let session_dir = archive.session_dir(&key);
        if !new_dir(&session_dir)? {
            sweep_session(&session_dir, None);
        }
        let version = new_version(1, &session_dir, (source, file), seen.size, counts)?;
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
    let session_dir = archive.session_dir(&key);
    let Some(last) = m.versions.last() else {
        return Err(ArchiveError::Damaged {
            path: session_dir.join("manifest.json"),
            detail: "no versions".into(),
        });
    };
    let grown = seen.size >= last.size && prefix_matches((source, file), last, counts)?;
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
            counts,
        )?;
        version.last_archived_ms = now_ms();
        Outcome::Appended
    } else {
        let version = new_version(
            last.number + 1,
            &session_dir,
            (source, file),
            seen.size,
            counts,
        )?;
        m.versions.push(version);
        Outcome::NewVersion
    };
    m.seen = Some(seen);
    Ok((outcome, Some(m)))
}

/// Version `number` of a session, archived now from the first `size` bytes of `source`.
/// Errors: those of [`add_chunk`].
fn new_version(
    number: u32,
    session_dir: &Path,
    source: (&Path, &fs::File),
    size: u64,
    counts: &mut Counts,
) -> Result<Version, ArchiveError> {
    let now = now_ms();
    let mut version = Version {
        number,
        size: 0,
        first_archived_ms: now,
        last_archived_ms: now,
        chunks: Vec::new(),
    };
    add_chunk(session_dir, &mut version, source, 0, size, counts)?;
    Ok(version)
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
    counts: &mut Counts,
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
            counts.read += n as u64;
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
/// empty), compressed into its file in the version's directory, created 0600 under the name
/// the manifest will give it. Until [`commit`] writes that manifest no manifest names the file,
/// so a pass that stops before leaves a file the next sweep removes ([`sweep_session`]), never
/// a chunk a manifest names half-written. Syncing it, and the manifest, are [`commit`]'s.
fn add_chunk(
    session_dir: &Path,
    version: &mut Version,
    (source, file): (&Path, &fs::File),
    from: u64,
    to: u64,
    counts: &mut Counts,
) -> Result<(), ArchiveError> {
    if to <= from {
        return Ok(());
    }
    let vdir = session_dir.join(version.dir());
    if version.chunks.is_empty() {
        new_dir(&vdir)?;
    }
    let name = chunk_name(version.chunks.len());
    let dest = vdir.join(&name);
    let out = {
        use std::os::unix::fs::OpenOptionsExt;
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&dest)
            .map_err(io_at(&dest))?
    };
    let length = to - from;
    let (compressed, sha256) = if length <= WHOLE_MAX {
        compress_whole((source, file), from, length, (&dest, &out))?
    } else {
        compress_streamed((source, file), from, length, (&dest, out))?
    };
    counts.read += length;
    counts.added += length;
    counts.written += compressed;
    version.chunks.push(Chunk {
        file: name,
        offset: from,
        length,
        compressed,
        sha256,
    });
    version.size = to;
    Ok(())
}

/// Creates `dir` (0700) below its existing parent; one already there is taken as it is.
/// Errors: I/O.
fn new_dir(dir: &Path) -> Result<bool, ArchiveError> {
    use std::os::unix::fs::DirBuilderExt;
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(false),
        Err(e) => Err(io_at(dir)(e)),
    }
}

/// Chunks up to this many bytes are read whole and compressed in one call with the thread's
/// compression context, kept from file to file (a new context per file costs its tables'
/// allocation and page faults, a tenth of a first pass over sessions of some 100 KB); larger
/// ones are streamed.
const WHOLE_MAX: u64 = 8 << 20;

/// A pool thread's compression context and buffers, kept for its next chunk.
struct Whole {
    zstd: zstd::bulk::Compressor<'static>,
    input: Vec<u8>,
    output: Vec<u8>,
}

thread_local! {
    static WHOLE: std::cell::RefCell<Option<Whole>> = const { std::cell::RefCell::new(None) };
}

/// The error for a source that is shorter now than when it was looked at.
fn shrank(source: &Path) -> ArchiveError {
    // Shrunk while read: rewritten under us; the next pass sees it whole.
    io_at(source)(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the file shrank while it was archived",
    ))
}

/// Compresses `length` bytes of the source from `from` (at most [`WHOLE_MAX`]) in one call into
/// `out` as one zstd frame with its content checksum. Returns the frame's size and the bytes'
/// SHA-256. Errors: I/O, the source shorter than that.
fn compress_whole(
    (source, file): (&Path, &fs::File),
    from: u64,
    length: u64,
    (dest, out): (&Path, &fs::File),
) -> Result<(u64, String), ArchiveError> {
    use std::os::unix::fs::FileExt;
    let len = usize::try_from(length).map_err(|_| shrank(source))?;
    WHOLE.with_borrow_mut(|whole| {
        let whole = match whole {
            Some(w) => w,
            None => {
                let mut zstd = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(io_at(source))?;
                zstd.include_checksum(true).map_err(io_at(source))?;
                whole.insert(Whole {
                    zstd,
                    input: Vec::new(),
                    output: Vec::new(),
                })
            }
        };
        if whole.input.len() < len {
            whole.input.resize(len, 0);
        }
        let input = &mut whole.input[..len];
        file.read_exact_at(input, from).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                shrank(source)
            } else {
                io_at(source)(e)
            }
        })?;
        let sha256 = hex(&Sha256::digest(&*input));
        whole.output.clear();
        whole.output.reserve(zstd::zstd_safe::compress_bound(len));
        whole
            .zstd
            .compress_to_buffer(&*input, &mut whole.output)
            .map_err(io_at(dest))?;
        let mut out = out;
        out.write_all(&whole.output).map_err(io_at(dest))?;
        Ok((whole.output.len() as u64, sha256))
    })
}

/// [`compress_whole`] for larger ranges: read, hashed and compressed a piece at a time.
fn compress_streamed(
    (source, file): (&Path, &fs::File),
    from: u64,
    length: u64,
    (dest, out): (&Path, fs::File),
) -> Result<(u64, String), ArchiveError> {
    let mut file = file;
    io::Seek::seek(&mut file, io::SeekFrom::Start(from)).map_err(io_at(source))?;
    let mut encoder = zstd::stream::write::Encoder::new(io::BufWriter::new(out), ZSTD_LEVEL)
        .map_err(io_at(dest))?;
    encoder.include_checksum(true).map_err(io_at(dest))?;
    encoder
        .set_pledged_src_size(Some(length))
        .map_err(io_at(dest))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 17];
    let mut left = length;
    while left > 0 {
        let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        let n = file.read(&mut buf[..want]).map_err(io_at(source))?;
        if n == 0 {
            return Err(shrank(source));
        }
        hasher.update(&buf[..n]);
        encoder.write_all(&buf[..n]).map_err(io_at(dest))?;
        left -= n as u64;
    }
    let out = encoder
        .finish()
        .and_then(|w| w.into_inner().map_err(io::IntoInnerError::into_error))
        .map_err(io_at(dest))?;
    let compressed = out.metadata().map_err(io_at(dest))?.len();
    Ok((compressed, hex(&hasher.finalize())))
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
