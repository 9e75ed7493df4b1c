//! Reading session files: one streaming pass that records every line's byte offset and builds
//! the tree, with the line policy of [`super::lines`] (torn tails, corruption, CRLF). Never
//! writes.
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

use super::lines::{self, Item};
pub use super::lines::{Position, TornTail};
pub use super::tail::FileStamp;
use crate::core::diagnostics::{Corruption, CorruptionKind};
use crate::core::format::LineSpan;
use crate::core::render::LineSource;
use crate::core::tree::{Mode, Tree};

/// Bytes read from the file per `read` call.
const CHUNK_BYTES: usize = 1 << 20;
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
pub struct OpenedSession {
    /// The session's tree.
    pub tree: Tree,
    /// An unparsable unterminated last line, left unapplied (as of the last read).
    pub torn_tail: Option<TornTail>,
    /// How far the file is applied: reading resumes there.
    pub position: Position,
    /// The file as it was when last read.
    pub stamp: FileStamp,
}

impl OpenedSession {
    /// Reads what `file` (this session's file, whose stat is `stamp`) holds after the applied
    /// position and applies it by the one line policy ([`lines::apply_batch`]): the position,
    /// the torn tail and the stamp then describe the bytes read (bytes that arrive meanwhile
    /// are read next time). The live tail and the writer's catch-up both read this way.
    /// Errors: reading the file failed (nothing changed).
    pub fn read_appended(&mut self, file: &File, stamp: FileStamp) -> io::Result<lines::Applied> {
        let from = self.position.offset;
        let bytes = super::tail::read_range(file, from, stamp.size)?;
        let applied = lines::apply_batch(&mut self.tree, self.position, &bytes);
        self.position = applied.position;
        self.torn_tail = applied.torn_tail;
        self.stamp = FileStamp {
            size: from + bytes.len() as u64,
            ..stamp
        };
        Ok(applied)
    }
}

/// Opens and reads a session file. Strict mode refuses corruption with [`OpenError::Corrupt`];
/// lenient mode skips it the way pi does and lists it in the tree's diagnostics. Lines are read
/// by the one policy of [`super::lines`]. Errors: `Io`, `NotAFile`, `Pending` (no complete
/// header yet in a file younger than [`BIRTH_GRACE`]), `Corrupt` (including an older file
/// without a header: `emptyFile`).
pub fn open_session(path: &Path, mode: Mode) -> Result<OpenedSession, OpenError> {
    let io_err = |source| OpenError::Io {
        path: path.to_owned(),
        source,
    };
    let corrupt = |corruption| OpenError::Corrupt {
        path: path.to_owned(),
        corruption,
    };
    let mut file = open_regular(path)?;
    let stamp = FileStamp::of(&file).map_err(io_err)?;
    let mut loader = Loader::new(mode, stamp.size);
    let mut splitter = Position::default().splitter();
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
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
    let mut torn_tail = None;
    // Whether the torn bytes could be the start of a JSON object (a header being written).
    let mut torn_object = false;
    if let Some((bytes, span)) = splitter.finish() {
        if lines::is_torn(&bytes, span, loader.version()) {
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

/// `O_NONBLOCK` for [`OpenOptionsExt::custom_flags`].
pub(crate) const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;

/// Applies lines to a tree as they stream in: the header first, then entries. An open that
/// fails leaves nothing behind, so lines are pushed one by one (no batch check needed).
struct Loader {
    mode: Mode,
    tree: Option<Tree>,
    position: Position,
    /// Entries expected, from the file size: reserved up front so the arena is not copied
    /// while it grows (reserved pages that are never written cost no memory).
    expected_entries: usize,
}

/// Smallest typical entry line, in bytes, for [`Loader::expected_entries`].
const SMALL_ENTRY_BYTES: u64 = 256;

impl Loader {
    fn new(mode: Mode, file_size: u64) -> Self {
        Loader {
            mode,
            tree: None,
            position: Position::default(),
            expected_entries: usize::try_from(file_size / SMALL_ENTRY_BYTES).unwrap_or(0),
        }
    }

    fn version(&self) -> Option<u32> {
        self.tree.as_ref().map(|t| t.header().version)
    }

    /// Applies one line; `unterminated` for the final line without a newline.
    fn line(&mut self, bytes: &[u8], span: LineSpan, unterminated: bool) -> Result<(), Corruption> {
        match lines::classify(bytes, span, self.version()) {
            Item::Header(header) if self.tree.is_none() => {
                let mut tree = Tree::new(header, self.mode);
                tree.reserve(self.expected_entries);
                self.tree = Some(tree);
            }
            Item::Blank => {}
            item => match &mut self.tree {
                Some(tree) => lines::apply_item(tree, item)?,
                // Before the header, only blank lines may come (`classify` reports the rest).
                None => {
                    if let Item::Problem(c) = item {
                        return Err(c);
                    }
                }
            },
        }
        self.position = if unterminated {
            Position::after_open(span)
        } else {
            Position::after(span)
        };
        Ok(())
    }

    /// The tree once every line is read. Without a header: `emptyFile` for a file that holds
    /// nothing yet, or only the unfinished start of a JSON object (a header pi is writing);
    /// `missingHeader` ("not a pi session") for text or binary data without a newline.
    fn finish(
        self,
        torn: Option<&TornTail>,
        torn_object: bool,
    ) -> Result<(Tree, Position), Corruption> {
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
                    lines::not_a_session(t.line, "it is not JSON"),
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
        tree.settle()?;
        Ok((tree, self.position))
    }
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
pub const READ_AHEAD_BYTES: usize = 1 << 20;

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
                w.bytes.resize(READ_AHEAD_BYTES, 0);
                let mut got = 0;
                while got < READ_AHEAD_BYTES {
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
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, span.offset)?;
        Ok(Cow::Owned(buf))
    }

    fn range(&self, offset: u64, len: usize) -> io::Result<Option<Vec<u8>>> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset)?;
        Ok(Some(buf))
    }
}
