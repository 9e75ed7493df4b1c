//! Reading session files: one streaming pass that records every line's byte offset and builds
//! the tree, with the line policy of [`super::lines`] (torn tails, corruption, CRLF). Never
//! writes. A file of 4 MiB or more has its lines parsed on rayon's pool once the header is
//! read, and applied to the tree in file order on the calling thread.
//!
//! A torn tail is an unparsable final line without a newline (a writer was interrupted
//! or is mid-write): the session opens without it and reports where it starts. Any other
//! unreadable line is corruption (SPEC §3).
//!
//! A session file is born in pieces: pi creates it, then writes the header and its first
//! entries in separate writes, so a reader can find it empty or holding part of the header.
//! Such a file is *pending* ([`OpenError::Pending`]) while it is younger than [`BIRTH_GRACE`]
//! by modification time; older, it is the `emptyFile` corruption it looks like (SPEC §5).

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use thiserror::Error;

use super::lines;
pub use super::lines::{Position, TornTail};
pub use super::tail::FileStamp;
use crate::core::ahead;
use crate::core::diagnostics::{Corruption, CorruptionKind};
use crate::core::ids::LineSpan;
use crate::core::lines::{Item, LineFormat};
use crate::core::source::LineSource;
use crate::core::tree::{Mode, NodeIdx, Tree};
use crate::dialect::{Dialect, Sniffed};

/// How long after its last modification a file without a complete session header is taken
/// to be still being created ([`OpenError::Pending`]) rather than corrupt (`emptyFile`).
pub const BIRTH_GRACE: Duration = Duration::from_secs(2);

/// Why a session could not be opened.
#[derive(Debug, Error)]
pub enum OpenError {
    /// The file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The session file.
        path: PathBuf,
        /// The failed operation's error.
        source: io::Error,
    },
    /// The path is not a regular file.
    #[error("{}: not a regular file", path.display())]
    NotAFile {
        /// The session file.
        path: PathBuf,
    },
    /// The file is corrupt (strict mode).
    #[error("{}: {corruption}", path.display())]
    Corrupt {
        /// The session file.
        path: PathBuf,
        /// The first corrupt spot.
        corruption: Corruption,
    },
    /// The path does not lead to a regular file inside the session roots any more: it is a
    /// symbolic link, or a directory on the way was replaced by one that leads out. Nothing
    /// was read from what it leads to.
    #[error("{}: not a regular file inside the session roots (a symbolic link, or reached through one); not read", path.display())]
    NotInRoots {
        /// The session file.
        path: PathBuf,
    },
    /// The file has no complete session header yet and was modified less than
    /// [`BIRTH_GRACE`] ago: a writer is creating it. Not corruption; read it again later.
    #[error("{}: no session header yet (modified {age_ms} ms ago): the file is being created", path.display())]
    Pending {
        /// The session file.
        path: PathBuf,
        /// Milliseconds since the file's last modification.
        age_ms: u64,
    },
}

/// Milliseconds since a file was last modified, when that is less than [`BIRTH_GRACE`] (a
/// modification time in the future counts as now); `None` for an older file or an unknown time.
pub fn young_age_ms(mtime: Option<SystemTime>) -> Option<u64> {
    let age = SystemTime::now()
        .duration_since(mtime?)
        .unwrap_or(Duration::ZERO);
    (age < BIRTH_GRACE).then(|| u64::try_from(age.as_millis()).unwrap_or(u64::MAX))
}

/// A session read from disk: its tree and how far the file is applied. The session owner keeps
/// one for as long as the session is open and the writer appends through it, so the tree, the
/// position and the stamp always describe the same bytes.
#[derive(Debug)]
pub struct OpenedSession<F: LineFormat> {
    /// The session's tree.
    pub tree: Tree<F::Entry>,
    /// An unparsable unterminated last line, left unapplied (as of the last read).
    pub torn_tail: Option<TornTail>,
    /// How far the file is applied: reading resumes there.
    pub position: Position,
    /// The file as it was when last read.
    pub stamp: FileStamp,
}

impl<F: LineFormat> OpenedSession<F> {
    /// Reads what `file` (this session's file, whose stat is `stamp`) holds after the applied
    /// position and applies it by the one line policy ([`lines::apply_batch`]): the position,
    /// the torn tail and the stamp then describe the bytes read (bytes that arrive meanwhile
    /// are read next time). The live tail and the writer's catch-up both read this way.
    /// Errors: reading the file failed (nothing changed).
    pub fn read_appended(&mut self, file: &File, stamp: FileStamp) -> io::Result<lines::Applied> {
        let from = self.position.offset;
        let bytes = super::tail::read_range(file, from, stamp.size)?;
        let applied = lines::apply_batch::<F>(&mut self.tree, self.position, &bytes);
        self.position = applied.position;
        self.torn_tail = applied.torn_tail;
        self.stamp = FileStamp {
            size: from + bytes.len() as u64,
            ..stamp
        };
        Ok(applied)
    }
}

/// Opens and reads a session file of format `F`. Strict mode refuses corruption with
/// [`OpenError::Corrupt`]; lenient mode skips it the way the agent does and lists it in the
/// tree's diagnostics. Lines are read by the one policy of [`super::lines`]. Errors: `Io`,
/// `NotAFile`, `Pending` (no complete header yet in a file younger than [`BIRTH_GRACE`]),
/// `Corrupt` (including an older file without a header: `emptyFile`).
pub fn open_session<F: LineFormat>(path: &Path, mode: Mode) -> Result<OpenedSession<F>, OpenError> {
    open_with(path, mode, PLAN, None)
}

/// [`open_session`] of a file already opened (`file`, at its start; `path` names it in errors
/// and diagnostics): what is read is exactly what was opened, checked or not, and the path is
/// not looked up again. Errors: as [`open_session`].
pub fn open_session_from<F: LineFormat>(
    path: &Path,
    file: File,
    mode: Mode,
) -> Result<OpenedSession<F>, OpenError> {
    read_opened(path, file, mode, PLAN, None)
}

/// Each entry as the reader pushes it, in file order: the tree so far, the entry's node and its
/// line. A caller that works something out from every entry (pi's projection at the last
/// entry, its messages written ahead) does it while the line is at hand.
pub type Visit<'v, E> = dyn FnMut(&Tree<E>, NodeIdx, &[u8]) + 'v;

/// [`open_session`], showing `visit` each entry as it is pushed. Errors: [`open_session`]'s.
pub fn open_session_visiting<F: LineFormat>(
    path: &Path,
    mode: Mode,
    visit: &mut Visit<'_, F::Entry>,
) -> Result<OpenedSession<F>, OpenError> {
    open_with(path, mode, PLAN, Some(visit))
}

/// [`open_session`] by `plan`, showing `visit` each entry as it is pushed when given.
fn open_with<F: LineFormat>(
    path: &Path,
    mode: Mode,
    plan: Plan,
    visit: Option<&mut Visit<'_, F::Entry>>,
) -> Result<OpenedSession<F>, OpenError> {
    read_opened(path, open_regular(path)?, mode, plan, visit)
}

/// [`open_with`] of a file already opened.
fn read_opened<F: LineFormat>(
    path: &Path,
    mut file: File,
    mode: Mode,
    plan: Plan,
    visit: Option<&mut Visit<'_, F::Entry>>,
) -> Result<OpenedSession<F>, OpenError> {
    let io_err = |source| OpenError::Io {
        path: path.to_owned(),
        source,
    };
    let corrupt = |corruption| OpenError::Corrupt {
        path: path.to_owned(),
        corruption,
    };
    let stamp = FileStamp::of(&file).map_err(io_err)?;
    let mut loader = Loader::<F>::new(mode, stamp.size);
    loader.visit = visit;
    let parallel = stamp.size >= plan.parallel_from && ahead::available();
    // Line by line: the header (the first line of every real file), and the whole of a file
    // too small for parallel reading to pay for itself.
    let mut splitter = Position::default().splitter();
    let mut buf = vec![
        0u8;
        if parallel {
            plan.batch_bytes
        } else {
            plan.chunk_bytes
        }
    ];
    while loader.context().is_none() || !parallel {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        };
        splitter
            .feed(&buf[..n], |bytes, span| loader.line(bytes, span, false))
            .map_err(corrupt)?;
    }
    drop(buf);
    let unterminated = match loader.context().filter(|_| parallel) {
        Some(cx) => {
            let mut reader = BatchReader::resume(file, splitter);
            read_in_parallel(&mut loader, &mut reader, cx, plan).map_err(|e| match e {
                Stop::Io(e) => io_err(e),
                Stop::Corrupt(c) => corrupt(c),
            })?;
            reader.finish()
        }
        None => splitter.finish(),
    };
    let mut torn_tail = None;
    // Whether the torn bytes could be the start of a JSON object (a header being written).
    let mut torn_object = false;
    if let Some((bytes, span)) = unterminated {
        if F::is_torn(&bytes, span, loader.context()) {
            torn_object = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
            torn_tail = Some(TornTail {
                line: span.line,
                offset: span.offset,
                len: bytes.len() as u64,
            });
        } else {
            loader.line(&bytes, span, true).map_err(corrupt)?;
        }
    }
    let (tree, position) = loader
        .finish(torn_tail.as_ref(), torn_object)
        .map_err(|c| match young_age_ms(stamp.mtime) {
            Some(age_ms) if c.kind == CorruptionKind::EmptyFile => OpenError::Pending {
                path: path.to_owned(),
                age_ms,
            },
            _ => corrupt(c),
        })?;
    Ok(OpenedSession {
        tree,
        torn_tail,
        position,
        stamp,
    })
}

/// Bytes of a file's start read to tell its format: its first line, or this much of it.
const SNIFF_BYTES: usize = 64 << 10;

/// The first non-blank line of `file` (without its newline) and whether its newline is there,
/// read by position (at most [`SNIFF_BYTES`] when no newline comes). Errors: reading failed.
fn first_line(file: &File) -> io::Result<(Vec<u8>, bool)> {
    let mut head = Vec::new();
    let mut chunk = vec![0u8; 4096];
    let (line, complete) = loop {
        let n = loop {
            match file.read_at(&mut chunk, head.len() as u64) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        head.extend_from_slice(&chunk[..n]);
        // The first line that is not blank, once its newline is here.
        let mut start = 0;
        let mut found = None;
        while let Some(nl) = memchr::memchr(b'\n', &head[start..]) {
            let line = &head[start..start + nl];
            if !line.trim_ascii().is_empty() {
                found = Some((start, start + nl));
                break;
            }
            start += nl + 1;
        }
        match found {
            Some((s, e)) => break (head[s..e].to_vec(), true),
            None if n == 0 || head.len() >= SNIFF_BYTES => break (head[start..].to_vec(), false),
            None => {}
        }
    };
    Ok((line, complete))
}

/// The format and first line of a file whose format is told: its first line complete, or far
/// enough along to be a Claude Code line (whose session id is its file name); `None` while
/// nothing can be told yet (empty, or a first line still being written) and for a file of no
/// format sessiond reads. Errors: reading failed.
pub fn sniff_decided(file: &File) -> io::Result<Option<(Dialect, Vec<u8>)>> {
    let (line, complete) = first_line(file)?;
    Ok(match crate::dialect::sniff(&line, complete) {
        Sniffed::Known(d) if complete || d == Dialect::Claude => Some((d, line)),
        _ => None,
    })
}

/// The format of the opened `file` (named `path` in errors), told from its first non-blank line
/// ([`crate::dialect::sniff`]), read by position (the file's cursor does not move). A file
/// nothing can be told of yet (empty, or a first line that may be pi's header being written)
/// is read as pi, whose reader says whether it is pending, empty or no session. Errors: `Io`;
/// `Corrupt` with kind `unknownFormat` for a file of no format sessiond reads.
pub fn sniff_file(path: &Path, file: &File) -> Result<Dialect, OpenError> {
    let (line, complete) = first_line(file).map_err(|source| OpenError::Io {
        path: path.to_owned(),
        source,
    })?;
    match crate::dialect::sniff(&line, complete) {
        Sniffed::Known(d) => Ok(d),
        Sniffed::Undecided => Ok(Dialect::Pi),
        Sniffed::Unknown(what) => Err(OpenError::Corrupt {
            path: path.to_owned(),
            corruption: Corruption {
                kind: CorruptionKind::UnknownFormat,
                line: 1,
                offset: 0,
                id: None,
                message: format!("not a session sessiond reads: {what}"),
            },
        }),
    }
}

/// Opens a session file for reading without ever blocking: a FIFO, a device or a directory
/// named like a session is refused with `NotAFile` (a FIFO would otherwise block the open until
/// some writer appears). Errors: `Io`, `NotAFile`.
pub fn open_regular(path: &Path) -> Result<File, OpenError> {
    let io_err = |source| OpenError::Io {
        path: path.to_owned(),
        source,
    };
    // O_NONBLOCK makes opening a FIFO return at once; it changes nothing for regular files.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(NONBLOCK)
        .open(path)
        .map_err(io_err)?;
    if !file.metadata().map_err(io_err)?.is_file() {
        return Err(OpenError::NotAFile {
            path: path.to_owned(),
        });
    }
    Ok(file)
}

/// [`open_regular`] without following a symbolic link in the last component of `path`
/// (`O_NOFOLLOW`): a session the daemon opened by its canonical path and finds replaced by a
/// symlink is refused with [`OpenError::NotInRoots`], whatever the link leads to. (A directory
/// on the way is the caller's to check, against the roots.) Errors: `Io`, `NotAFile`,
/// `NotInRoots`.
pub fn open_regular_nofollow(path: &Path) -> Result<File, OpenError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(NONBLOCK | NOFOLLOW)
        .open(path)
        .map_err(|source| {
            // ELOOP: the last component is a symbolic link.
            if source.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                OpenError::NotInRoots {
                    path: path.to_owned(),
                }
            } else {
                OpenError::Io {
                    path: path.to_owned(),
                    source,
                }
            }
        })?;
    let meta = file.metadata().map_err(|source| OpenError::Io {
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_file() {
        return Err(OpenError::NotAFile {
            path: path.to_owned(),
        });
    }
    Ok(file)
}

/// `O_NOFOLLOW` for [`OpenOptionsExt::custom_flags`].
const NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;

/// `O_NONBLOCK` for [`OpenOptionsExt::custom_flags`].
pub(crate) const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;

/// Applies lines to a tree as they stream in: the header first, then entries. An open that
/// fails leaves nothing behind, so lines are pushed one by one (no batch check needed).
struct Loader<'a, 'v, F: LineFormat> {
    mode: Mode,
    tree: Option<Tree<F::Entry>>,
    position: Position,
    /// The file's size in bytes, for [`Loader::expected_entries`] and [`Loader::expect_like`].
    file_size: u64,
    /// Shown each entry as it is pushed ([`open_session_visiting`]).
    visit: Option<&'a mut Visit<'v, F::Entry>>,
}

/// Smallest typical entry line, in bytes, for [`Loader::expected_entries`].
const SMALL_ENTRY_BYTES: u64 = 256;

impl<'a, 'v, F: LineFormat> Loader<'a, 'v, F> {
    fn new(mode: Mode, file_size: u64) -> Self {
        let mut loader = Loader {
            mode,
            tree: None,
            position: Position::default(),
            file_size,
            visit: None,
        };
        // A format without a header line reads every line as an entry from the first.
        if let Some(header) = F::implicit_header() {
            loader.start(header);
        }
        loader
    }

    /// Starts the tree once the header is known.
    fn start(&mut self, header: crate::core::lines::HeaderOf<F>) {
        let mut tree = Tree::new(header, self.mode);
        tree.reserve(self.expected_entries());
        self.tree = Some(tree);
    }

    /// Entries expected at most, from the file size: reserved up front so the arena is not
    /// copied while it grows (reserved pages that are never written cost no memory).
    fn expected_entries(&self) -> usize {
        usize::try_from(self.file_size / SMALL_ENTRY_BYTES).unwrap_or(0)
    }

    /// Reserves room in the id index for the entries the rest of the file holds if its lines
    /// are like the `lines` lines of `bytes` bytes that end at byte `end` (never more than
    /// [`Loader::expected_entries`]), so that the index is not rehashed as it grows. No margin:
    /// the table rounds its room up to a power of two anyway, and an estimate just past one
    /// would double the table's memory.
    fn expect_like(&mut self, lines: usize, bytes: usize, end: u64) {
        let rest = self.file_size.saturating_sub(end);
        let per_line = (bytes / lines.max(1)).max(1) as u64;
        let left = rest / per_line;
        let expected = usize::try_from(left)
            .unwrap_or(usize::MAX)
            .min(self.expected_entries());
        if let Some(tree) = &mut self.tree {
            tree.reserve_ids(expected);
        }
    }

    fn context(&self) -> Option<F::Context> {
        self.tree.as_ref().map(|t| F::context(t.header()))
    }

    /// Applies one line; `unterminated` for the final line without a newline.
    fn line(&mut self, bytes: &[u8], span: LineSpan, unterminated: bool) -> Result<(), Corruption> {
        let item = F::classify(bytes, span, self.context());
        self.apply(item, bytes, span, unterminated)
    }

    /// Applies the lines of `batch`, classified beforehand ([`classify_batch`]), in order.
    fn apply_classified(
        &mut self,
        items: Vec<(Item<F>, LineSpan)>,
        batch: &Batch,
    ) -> Result<(), Corruption> {
        for (item, span) in items {
            let line = batch.line(span);
            match (item, &mut self.tree) {
                // Nearly every line: the entry goes straight to the tree, not moved through
                // `apply` and `apply_item` (each move of an entry is a copy of 136 bytes).
                (Item::Entry(entry), Some(tree)) => {
                    let node = F::push(tree, entry)?;
                    if let Some(visit) = &mut self.visit {
                        visit(tree, node, line);
                    }
                    self.passed(span, false);
                }
                (item, _) => self.apply(item, line, span, false)?,
            }
        }
        Ok(())
    }

    /// Applies one classified line, `line` (see [`Loader::line`]).
    fn apply(
        &mut self,
        item: Item<F>,
        line: &[u8],
        span: LineSpan,
        unterminated: bool,
    ) -> Result<(), Corruption> {
        match item {
            Item::Header(header) if self.tree.is_none() => self.start(header),
            Item::Blank => {}
            item => match &mut self.tree {
                Some(tree) => {
                    let before = tree.len();
                    F::apply(tree, item)?;
                    if tree.len() > before
                        && let Some(visit) = &mut self.visit
                    {
                        visit(tree, (tree.len() - 1) as NodeIdx, line);
                    }
                }
                // Before the header, only blank lines may come (`classify` reports the rest).
                None => {
                    if let Item::Problem(c) = item {
                        return Err(c);
                    }
                }
            },
        }
        self.passed(span, unterminated);
        Ok(())
    }

    /// Reading now stands after the line at `span` (`unterminated`: the final line, without a
    /// newline, which may still grow).
    fn passed(&mut self, span: LineSpan, unterminated: bool) {
        self.position = if unterminated {
            Position::after_open(span)
        } else {
            Position::after(span)
        };
    }

    /// The tree once every line is read. Without a header: `emptyFile` for a file that holds
    /// nothing yet, or only the unfinished start of a JSON object (a header pi is writing);
    /// `missingHeader` ("not a session") for text or binary data without a newline.
    fn finish(
        self,
        torn: Option<&TornTail>,
        torn_object: bool,
    ) -> Result<(Tree<F::Entry>, Position), Corruption> {
        let Some(mut tree) = self.tree else {
            let (line, offset) = torn.map_or((1, 0), |t| (t.line, t.offset));
            let (kind, message) = match torn {
                None => (
                    CorruptionKind::EmptyFile,
                    "the file is empty: no session header yet".to_owned(),
                ),
                Some(t) if torn_object => (
                    CorruptionKind::EmptyFile,
                    format!(
                        "no session header yet: line {} is unfinished (a writer may still be writing it)",
                        t.line
                    ),
                ),
                Some(t) => (
                    CorruptionKind::MissingHeader,
                    format!(
                        "not a session: line {} is not JSON (read as a {})",
                        t.line,
                        F::NAME
                    ),
                ),
            };
            return Err(Corruption {
                kind,
                line,
                offset,
                id: None,
                message,
            });
        };
        F::settle(&mut tree)?;
        Ok((tree, self.position))
    }
}

/// How [`open_session`] reads a file: line by line, `chunk_bytes` per read, until the header
/// is read, and the whole of a file smaller than `parallel_from` bytes; the rest of a larger
/// one in parallel ([`read_in_parallel`]), in batches of `batch_bytes` with at most
/// `batches_ahead` batches and `bytes_ahead` bytes in flight.
#[derive(Clone, Copy, Debug)]
struct Plan {
    chunk_bytes: usize,
    parallel_from: u64,
    batch_bytes: usize,
    batches_ahead: usize,
    bytes_ahead: usize,
}

/// The plan of every open: a file of 4 MiB or more is read in parallel, in batches of 64 KiB,
/// up to sixteen of them and 1 MiB ahead (a batch holds at least one whole line, so a session
/// of long lines has fewer batches in flight). Against twelve and 768 KiB, on 100,000 small
/// entries: `check` 3% faster, `context --json` 2-3.5% faster, 0.3-0.5 MiB more held at the
/// peak; eight and 512 KiB were 5-6% slower than twelve for 0.5 MiB less.
const PLAN: Plan = Plan {
    chunk_bytes: 1 << 20,
    parallel_from: 4 << 20,
    batch_bytes: 64 << 10,
    batches_ahead: 16,
    bytes_ahead: 1 << 20,
};

/// Whole lines of a file: `bytes[..len]`, which ends with a newline (or is empty), starts at
/// `from`. (`bytes` is a reused buffer; what follows `len` is stale.)
#[derive(Debug)]
struct Batch {
    bytes: Vec<u8>,
    len: usize,
    from: Position,
    /// Lines in `bytes[..len]`.
    lines: usize,
}

impl Batch {
    fn lines(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The line at `span`, one of this batch's (empty for any other).
    fn line(&self, span: LineSpan) -> &[u8] {
        let start = span.offset.saturating_sub(self.from.offset) as usize;
        self.lines()
            .get(start..start.saturating_add(span.len as usize))
            .unwrap_or_default()
    }
}

/// Reads a file front to back as [`Batch`]es of whole lines, carrying an incomplete last line
/// over to the next batch.
struct BatchReader {
    file: File,
    /// The next batch's buffer: `buf[..filled]` are bytes read after the last whole line.
    buf: Vec<u8>,
    filled: usize,
    /// Where `buf` starts.
    at: Position,
    /// Buffers of batches already applied, for reuse (they are not cleared: a buffer is
    /// zeroed once, when it grows).
    spare: Vec<Vec<u8>>,
    /// The longest buffer kept for reuse: twice the largest batch asked for.
    keep: usize,
}

impl BatchReader {
    /// A reader that goes on where `splitter` stands in `file` (its pending bytes are carried).
    fn resume(file: File, splitter: lines::LineSplitter) -> Self {
        let (pending, at) = splitter.into_parts();
        BatchReader {
            file,
            filled: pending.len(),
            buf: pending,
            at,
            spare: Vec::new(),
            keep: 0,
        }
    }

    /// The next batch: the whole lines among the carried bytes and at most `want` bytes more
    /// (a read that ends inside a longer line reads on until the line ends). `None` at the end
    /// of the file, when the carried bytes are an unterminated last line ([`Self::finish`]).
    fn next(&mut self, want: usize) -> io::Result<Option<Batch>> {
        self.keep = self.keep.max(want.saturating_mul(2));
        loop {
            let start = self.filled;
            let end = start + want.max(1);
            if self.buf.len() < end {
                self.buf.resize(end, 0);
            }
            let n = loop {
                match self.file.read(&mut self.buf[start..end]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            };
            if n == 0 {
                return Ok(None);
            }
            self.filled += n;
            let Some(last) = memchr::memrchr(b'\n', &self.buf[start..self.filled]) else {
                continue;
            };
            let cut = start + last + 1;
            let rest = self.filled - cut;
            let mut next = self.spare.pop().unwrap_or_default();
            if next.len() < rest {
                next.resize(rest, 0);
            }
            next[..rest].copy_from_slice(&self.buf[cut..self.filled]);
            let bytes = std::mem::replace(&mut self.buf, next);
            self.filled = rest;
            let from = self.at;
            let lines = memchr::memchr_iter(b'\n', &bytes[..cut]).count();
            self.at = Position {
                offset: from.offset + cut as u64,
                line: from
                    .line
                    .saturating_add(u32::try_from(lines).unwrap_or(u32::MAX)),
                open: false,
            };
            return Ok(Some(Batch {
                bytes,
                len: cut,
                from,
                lines,
            }));
        }
    }

    /// Takes back the buffer of a batch that was applied. One that grew to hold a long line
    /// (beyond twice the largest batch asked for) is dropped, so that every buffer in use does
    /// not end up as long as the longest line.
    fn recycle(&mut self, bytes: Vec<u8>) {
        if bytes.len() <= self.keep {
            self.spare.push(bytes);
        }
    }

    /// The unterminated last line, once [`Self::next`] returned `None`.
    fn finish(self) -> Option<(Vec<u8>, LineSpan)> {
        let mut splitter = self.at.splitter();
        let _ = splitter.feed(&self.buf[..self.filled], |_, _| Ok::<(), ()>(()));
        splitter.finish()
    }
}

/// Why parallel reading stopped early.
enum Stop {
    Io(io::Error),
    Corrupt(Corruption),
}

/// Bytes of lines [`read_in_parallel`] reads before it sizes the id index by them.
const SAMPLE_BYTES: usize = 1 << 20;

/// Reads the rest of the file as a pipeline ([`ahead::in_order`]): the calling thread reads
/// batches and rayon's pool classifies their lines (parses and checks them: the bulk of an
/// open), while the calling thread applies the classified batches to the tree in file order,
/// with at most `plan.batches_ahead` batches and `plan.bytes_ahead` bytes in flight. The tree
/// sees the lines in the order a line-by-line read gives them, so it is the same tree; a
/// corrupt line stops a strict read there as it would (the batches in flight are dropped).
/// Every buffer is allocated and freed on the calling thread.
fn read_in_parallel<F: LineFormat>(
    loader: &mut Loader<'_, '_, F>,
    reader: &mut BatchReader,
    cx: F::Context,
    plan: Plan,
) -> Result<(), Stop> {
    let limit = ahead::Limit {
        items: plan.batches_ahead,
        weight: plan.bytes_ahead,
    };
    // The first mebibyte tells how long the lines are, and so how many ids to make room for.
    let mut sample = Some((0usize, 0usize));
    ahead::in_order(
        &mut (loader, reader),
        limit,
        |(_, reader)| {
            let batch = reader.next(plan.batch_bytes).map_err(Stop::Io)?;
            Ok(batch.map(|b| {
                let len = b.len;
                (b, len)
            }))
        },
        &|batch: Batch| (classify_batch::<F>(&batch, cx), batch),
        |(loader, reader), (items, batch)| {
            if let Some((lines, bytes)) = &mut sample {
                *lines += batch.lines;
                *bytes += batch.len;
                if *bytes >= SAMPLE_BYTES {
                    let end = batch.from.offset + batch.len as u64;
                    loader.expect_like(*lines, *bytes, end);
                    sample = None;
                }
            }
            let applied = loader.apply_classified(items, &batch);
            reader.recycle(batch.bytes);
            applied.map_err(Stop::Corrupt)
        },
    )
}

/// Classifies every line of `batch` (lines after the header, read in `cx`) without applying it.
fn classify_batch<F: LineFormat>(batch: &Batch, cx: F::Context) -> Vec<(Item<F>, LineSpan)> {
    let mut items = Vec::with_capacity(batch.lines);
    let _ = batch.from.splitter().feed(batch.lines(), |bytes, span| {
        items.push((F::classify(bytes, span, Some(cx)), span));
        Ok::<(), ()>(())
    });
    items
}

/// Reads entry lines from a session file with positioned reads (no shared cursor).
///
/// Made with [`FileLines::read_ahead`], it reads the file in blocks of [`READ_AHEAD_BYTES`] and
/// serves the lines within the last block from memory: a command that renders a long path
/// of small entries in file order (`context`, `tree`) then makes one read per block instead
/// of one per line. The block is what the file held when it was read, so this is for one
/// command's reading of a file, not for a long-lived reader of a file that may be rewritten.
#[derive(Debug)]
pub struct FileLines {
    file: File,
    window: Option<std::sync::Mutex<Window>>,
}

/// Bytes read at once by a [`FileLines::read_ahead`] reader.
pub const READ_AHEAD_BYTES: usize = 256 << 10;

/// The last block a read-ahead reader read: `bytes` from file offset `offset`.
#[derive(Debug, Default)]
struct Window {
    offset: u64,
    bytes: Vec<u8>,
}

impl FileLines {
    /// Opens `path` for reading lines (a regular file only, never blocking: see
    /// [`open_regular`]; anything else is an `InvalidInput` error).
    pub fn open(path: &Path) -> io::Result<Self> {
        match open_regular(path) {
            Ok(file) => Ok(FileLines::new(file)),
            Err(OpenError::Io { source, .. }) => Err(source),
            Err(e) => Err(io::Error::new(io::ErrorKind::InvalidInput, e.to_string())),
        }
    }
    /// Wraps an open file.
    pub fn new(file: File) -> Self {
        FileLines { file, window: None }
    }
    /// This reader, reading ahead in blocks (see the type's docs).
    pub fn read_ahead(mut self) -> Self {
        self.window = Some(std::sync::Mutex::new(Window::default()));
        self
    }
}

impl LineSource for FileLines {
    fn line(&self, span: LineSpan) -> io::Result<Cow<'_, [u8]>> {
        let len = span.len as usize;
        if let Some(window) = &self.window
            && len < READ_AHEAD_BYTES / 4
            && let Ok(mut w) = window.lock()
        {
            let within = |w: &Window| {
                span.offset >= w.offset
                    && span.offset + len as u64 <= w.offset + w.bytes.len() as u64
            };
            if !within(&w) {
                // A block, or what the file has left when that is less (a listing reads a
                // few lines of files of tens of KB: zeroing a whole block for each cost more
                // than reading the file), and never less than the line.
                let left = self
                    .file
                    .metadata()
                    .map_or(u64::MAX, |m| m.len().saturating_sub(span.offset));
                let block = usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .clamp(len, READ_AHEAD_BYTES);
                w.bytes.resize(block, 0);
                let mut got = 0;
                while got < block {
                    match self
                        .file
                        .read_at(&mut w.bytes[got..], span.offset + got as u64)
                    {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            w.bytes.clear();
                            return Err(e);
                        }
                    }
                }
                w.bytes.truncate(got);
                w.offset = span.offset;
                if !within(&w) {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "failed to fill whole buffer",
                    ));
                }
            }
            let at = (span.offset - w.offset) as usize;
            return Ok(Cow::Owned(w.bytes[at..at + len].to_vec()));
        }
        read_exact_at(&self.file, len, span.offset).map(Cow::Owned)
    }

    fn range(&self, offset: u64, len: usize) -> io::Result<Option<Vec<u8>>> {
        read_exact_at(&self.file, len, offset).map(Some)
    }
}

/// An open session's file, opened only while it is read. The daemon follows hundreds of
/// sessions at once, and a descriptor held per session (two, with a reader's clone) passed the
/// default limit of 1,024 open files at about 500 sessions; the owner of a session now opens its
/// file when a command reads it and lets it go when the command is done ([`FileOnDemand::release`]).
///
/// Every open is of the very file first opened: without following a symbolic link, and with the
/// device, inode and creation time it had. The path naming another file by then (replaced by a rename, deleted
/// and written again) is an error here, never a read of the other file at this file's offsets;
/// the owner's next refresh sees the new identity and reloads. While the path names no file
/// (deleted, moved away) the session's lines cannot be read: requests that show entries' text
/// fail naming the file, until it is back.
#[derive(Debug)]
pub struct FileOnDemand {
    path: PathBuf,
    /// The stamp of the file first opened: only its identity counts
    /// ([`super::tail::FileStamp::same_file`]).
    identity: super::tail::FileStamp,
    /// The descriptor while a command reads; shared with readers on other threads (a parallel
    /// render), which keep it open only as long as they read.
    held: std::sync::Mutex<Option<std::sync::Arc<File>>>,
}

impl FileOnDemand {
    /// Keeps `file`, just opened from `path`, until the first [`FileOnDemand::release`].
    pub fn new(path: &Path, file: File) -> io::Result<Self> {
        Ok(FileOnDemand {
            path: path.to_owned(),
            identity: super::tail::FileStamp::of(&file)?,
            held: std::sync::Mutex::new(Some(std::sync::Arc::new(file))),
        })
    }

    /// The file, opened again if it was released. Errors: the open's (`NotFound` for a path
    /// that names nothing), or `Other` naming the path when it names another file now.
    pub fn file(&self) -> io::Result<std::sync::Arc<File>> {
        let mut held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(f) = &*held {
            return Ok(f.clone());
        }
        let file = match open_regular_nofollow(&self.path) {
            Ok(f) => f,
            Err(OpenError::Io { source, .. }) => return Err(source),
            Err(e) => return Err(io::Error::other(e.to_string())),
        };
        if !super::tail::FileStamp::of(&file)?.same_file(&self.identity) {
            return Err(io::Error::other(format!(
                "{}: the path names another file now",
                self.path.display()
            )));
        }
        let file = std::sync::Arc::new(file);
        *held = Some(file.clone());
        Ok(file)
    }

    /// Lets the descriptor go (closed once no reader holds it); the next read opens it again.
    pub fn release(&self) {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }

    /// Whether a descriptor is held now.
    pub fn is_held(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }
}

impl LineSource for FileOnDemand {
    fn line(&self, span: LineSpan) -> io::Result<Cow<'_, [u8]>> {
        read_exact_at(&*self.file()?, span.len as usize, span.offset).map(Cow::Owned)
    }

    fn range(&self, offset: u64, len: usize) -> io::Result<Option<Vec<u8>>> {
        read_exact_at(&*self.file()?, len, offset).map(Some)
    }
}

/// `len` bytes of `file` from `offset`, read into fresh memory without zeroing it first
/// (rendering reads every block of a long context this way: zeroing it cost as much as a
/// tenth of the reading). Errors: as `FileExt::read_exact_at` (`UnexpectedEof` when the file
/// ends before `offset + len`).
fn read_exact_at(file: &File, len: usize, offset: u64) -> io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        let at = offset + buf.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), at) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ));
            }
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::dialect::pi::Pi;
    use crate::dialect::pi::incremental::Following;
    use crate::testdata::{pool_of_several, session_files};

    /// A file read on demand holds no descriptor once released, reads again by opening the
    /// same file, and refuses to read when the path names another file (or none): never the
    /// other file's bytes at this file's offsets.
    #[test]
    fn a_file_on_demand_reads_only_the_file_it_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "first line\nsecond\n").unwrap();
        let f = FileOnDemand::new(&path, open_regular_nofollow(&path).unwrap()).unwrap();
        let span = LineSpan {
            line: 2,
            offset: 11,
            len: 6,
        };
        f.release();
        assert!(!f.is_held());
        assert_eq!(&*f.line(span).unwrap(), b"second");
        assert!(f.is_held(), "held while a command reads");
        f.release();
        // Replaced by a rename: another file at the path.
        let other = dir.path().join("other");
        std::fs::write(&other, "XXXXXXXXXXXXXXXXXXXXXX\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let err = f.line(span).unwrap_err();
        assert!(err.to_string().contains("names another file now"), "{err}");
        assert!(err.to_string().contains("s.jsonl"), "{err}");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(f.line(span).unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    /// What an open gave, in a form two opens can be compared by: every node, the tree's
    /// diagnostics, the position and the torn tail, or the error.
    fn outcome(result: Result<OpenedSession<Pi>, OpenError>) -> String {
        match result {
            Ok(s) => format!(
                "{:#?}\n{:#?}\n{:?}\n{:?}",
                s.tree.nodes(),
                s.tree.diagnostics(),
                s.position,
                s.torn_tail
            ),
            Err(e) => format!("error: {e:?}"),
        }
    }

    /// Plans that take the parallel path on any file: tiny chunks and batches (down to one
    /// byte, so every batch is read on until its line ends), one batch in flight and more.
    const PARALLEL: [Plan; 4] = [
        Plan {
            chunk_bytes: 1,
            parallel_from: 0,
            batch_bytes: 1,
            batches_ahead: 1,
            bytes_ahead: 1,
        },
        Plan {
            chunk_bytes: 7,
            parallel_from: 0,
            batch_bytes: 1,
            batches_ahead: 3,
            bytes_ahead: 1 << 20,
        },
        Plan {
            chunk_bytes: 64,
            parallel_from: 0,
            batch_bytes: 300,
            batches_ahead: 2,
            bytes_ahead: 600,
        },
        Plan {
            chunk_bytes: 4096,
            parallel_from: 0,
            batch_bytes: 2048,
            batches_ahead: 5,
            bytes_ahead: 1 << 20,
        },
    ];

    const LINE_BY_LINE: Plan = Plan {
        parallel_from: u64::MAX,
        ..PLAN
    };

    /// Positioned reads into fresh memory give the file's bytes exactly, nothing for an empty
    /// range, and `UnexpectedEof` for a range past the end (as `read_exact_at`).
    #[test]
    fn positioned_reads_give_the_bytes_or_unexpected_eof() {
        let mut file = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::io::Write::write_all(&mut file, &bytes).unwrap();
        let lines = FileLines::new(file);
        for (offset, len) in [(0, 0), (0, 1), (7, 4096), (1, 299_999), (299_999, 1)] {
            let got = lines.range(offset as u64, len).unwrap().unwrap();
            assert_eq!(got, &bytes[offset..offset + len], "{offset} + {len}");
        }
        for (offset, len) in [(0, 300_001), (299_999, 2), (300_000, 1), (400_000, 1)] {
            let err = lines.range(offset, len).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{offset} + {len}");
        }
    }

    /// Runs `check` on every shipped session in each mode, strict and lenient, with a pool of
    /// several threads.
    fn every_shipped_session(mut check: impl FnMut(&Path, Mode)) {
        pool_of_several();
        for file in session_files() {
            for mode in [Mode::Strict, Mode::Lenient] {
                check(&file, mode);
            }
        }
    }

    /// Opens every shipped session strictly and leniently line by line and by each parallel
    /// plan: the trees, their diagnostics, positions, torn tails and errors are the same.
    #[test]
    fn parallel_reading_gives_what_line_by_line_reading_gives() {
        let mut compared = 0;
        every_shipped_session(|file, mode| {
            let expected = outcome(open_with::<Pi>(file, mode, LINE_BY_LINE, None));
            for plan in PARALLEL {
                let got = outcome(open_with::<Pi>(file, mode, plan, None));
                assert_eq!(
                    got,
                    expected,
                    "{} ({mode:?}) read by {plan:?}",
                    file.display()
                );
                compared += 1;
            }
        });
        assert!(compared > 100);
    }

    /// The projection followed while reading, where the reading gives one, is the projection
    /// at the default leaf, by every plan: for `file` in `mode`, how many were followed.
    fn followed_equals_projected(file: &Path, mode: Mode) -> usize {
        let mut followed = 0;
        for plan in PARALLEL.into_iter().chain([LINE_BY_LINE]) {
            let mut follow = Following::new();
            let visit: &mut Visit<'_, _> = &mut |tree, node, _| follow.push(tree, node);
            let Ok(session) = open_with::<Pi>(file, mode, plan, Some(visit)) else {
                continue;
            };
            let Some(got) = follow.finish(&session.tree) else {
                continue;
            };
            let tree = &session.tree;
            let expected = crate::dialect::pi::projection::project(tree, tree.default_leaf());
            assert_eq!(
                format!("{got:?}"),
                format!("{expected:?}"),
                "{} ({mode:?}) read by {plan:?}",
                file.display()
            );
            followed += 1;
        }
        followed
    }

    /// Every shipped session: the projection followed while reading equals the projection
    /// at the default leaf.
    #[test]
    fn following_gives_the_projection_of_every_shipped_session() {
        let mut followed = 0;
        every_shipped_session(|file, mode| followed += followed_equals_projected(file, mode));
        assert!(followed > 50, "{followed}");
    }

    /// Random sessions of chains with what can change a path after an entry was read (a
    /// parent named before it appears, a duplicate id, a new root, a branch) and what ends
    /// the following (a compaction, a context edit): whenever the reading gives a projection,
    /// it is the projection at the default leaf; and every session of one chain gives one.
    #[test]
    fn following_gives_the_projection_of_random_sessions() {
        pool_of_several();
        let dir = tempfile::tempdir().unwrap();
        let mut rng = fastrand::Rng::with_seed(11);
        let (mut chains, mut chains_followed) = (0, 0);
        for round in 0..80 {
            let path = dir.path().join(format!("s{round}.jsonl"));
            let mut text = String::from(
                "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}\n",
            );
            let n = rng.usize(1..400);
            // A quarter of the rounds one chain; a quarter with changes to the tree's shape;
            // a quarter with compactions, a quarter with context edits (each alone, so that
            // one does not end the following before the other is met).
            let round_kind = rng.u8(..4);
            let (odd, rewrites) = (round_kind == 1, round_kind >= 2);
            for i in 0..n {
                let id = if odd && i > 2 && rng.u8(..40) == 0 {
                    format!("e{:05}", rng.usize(..i))
                } else {
                    format!("e{i:05}")
                };
                let parent = match (i, odd.then(|| rng.u8(..40))) {
                    (0, _) | (_, Some(0)) => "null".to_owned(),
                    (_, Some(1)) => format!("\"e{:05}\"", rng.usize(..i)),
                    (_, Some(2)) => format!("\"e{:05}\"", i + 1 + rng.usize(..3)),
                    _ => format!("\"e{:05}\"", i - 1),
                };
                let call = format!("c{}", i / 3);
                let kind = match (round_kind, rng.u8(..if rewrites { 12 } else { 8 })) {
                    (2, 9) => 8,
                    (3, 8) => 9,
                    (_, k) => k,
                };
                let body = match kind {
                    0 | 1 => {
                        r#""type":"message","message":{"role":"user","content":"q"}"#.to_owned()
                    }
                    2 | 3 => format!(
                        r#""type":"message","message":{{"role":"assistant","provider":"p","model":"m{}","content":[{{"type":"toolCall","id":"{call}","name":"read","arguments":{{}}}}]}}"#,
                        i % 3
                    ),
                    4 | 5 => format!(
                        r#""type":"message","message":{{"role":"toolResult","toolCallId":"{call}","content":"r"}}"#
                    ),
                    6 => r#""type":"thinking_level_change","thinkingLevel":"high""#.to_owned(),
                    7 => r#""type":"model_change","provider":"q","modelId":"n""#.to_owned(),
                    8 => format!(
                        r#""type":"compaction","summary":"s","tokensBefore":1,"firstKeptEntryId":"e{:05}""#,
                        i.saturating_sub(2)
                    ),
                    9 => format!(
                        r#""type":"context_edit","targetId":"e{:05}","replacement":null"#,
                        i.saturating_sub(1)
                    ),
                    10 => r#""type":"label","targetId":"e00000","label":"l""#.to_owned(),
                    _ => r#""type":"custom_message","customType":"x","content":"c","display":true"#
                        .to_owned(),
                };
                text.push_str(&format!(
                    "{{\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:{:02}.000Z\",{body}}}\n",
                    i % 60
                ));
            }
            std::fs::write(&path, text).unwrap();
            let followed = followed_equals_projected(&path, Mode::Lenient);
            if round_kind == 0 {
                chains += 1;
                chains_followed += followed.min(1);
            }
        }
        assert_eq!(
            chains_followed, chains,
            "every one-chain session is followed"
        );
    }

    /// A corrupt line deep in a file read in parallel: a strict open stops at that line with
    /// the error a line-by-line open gives, and a lenient one skips it the same way.
    #[test]
    fn parallel_reading_stops_at_the_first_corrupt_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}"#,
        );
        text.push('\n');
        let mut parent = "null".to_owned();
        for i in 0..2000 {
            let line = match i {
                700 => "{not json".to_owned(),
                1300 => format!(r#"{{"type":"message","id":"e{}","parentId":"nowhere"}}"#, i),
                _ => format!(
                    r#"{{"type":"message","id":"e{i}","parentId":{parent},"timestamp":"2025-01-01T00:00:00.000Z","message":{{"role":"user","content":"line {i}"}}}}"#
                ),
            };
            if !matches!(i, 700 | 1300) {
                parent = format!("\"e{i}\"");
            }
            text.push_str(&line);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        pool_of_several();
        for mode in [Mode::Strict, Mode::Lenient] {
            let expected = outcome(open_with::<Pi>(&path, mode, LINE_BY_LINE, None));
            for plan in PARALLEL {
                let got = outcome(open_with::<Pi>(&path, mode, plan, None));
                assert_eq!(got, expected, "{mode:?} read by {plan:?}");
            }
        }
        let strict = open_with::<Pi>(&path, Mode::Strict, PARALLEL[2], None);
        assert!(
            matches!(&strict, Err(OpenError::Corrupt { corruption, .. }) if corruption.line == 702),
            "{strict:?}"
        );
    }
}
