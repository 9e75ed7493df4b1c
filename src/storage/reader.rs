//! Reading session files: one streaming pass that records every line's byte offset,
//! classifies torn tails and corruption, and builds the tree. Never writes.
//!
//! A torn tail is an unparsable final line without a newline (a writer was interrupted
//! or is mid-write): the session opens without it and reports where it starts. Any other
//! unreadable line is corruption (SPEC §3).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use thiserror::Error;

use crate::core::diagnostics::{Corruption, CorruptionKind};
use crate::core::format::{self, Expect, Line, LineSpan, ProblemKind};
use crate::core::render::LineSource;
use crate::core::tree::{Mode, Tree};

/// Bytes read from the file per `read` call.
const CHUNK_BYTES: usize = 1 << 20;
/// Longest line a span can describe, in bytes (longer lines are `invalidEntry`).
pub const MAX_LINE_BYTES: usize = u32::MAX as usize;

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
}

/// An unparsable final line without a newline, left out of the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TornTail {
    /// 1-based line number.
    pub line: u32,
    /// Byte offset where the torn bytes start.
    pub offset: u64,
    /// Number of torn bytes.
    pub len: u64,
}

/// What the file looked like when it was read: used to notice appends, shrinks and replacement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    /// File size in bytes.
    pub size: u64,
    /// Device id (`st_dev`); with `ino` it tells a replaced file apart.
    pub dev: u64,
    /// Inode number (`st_ino`).
    pub ino: u64,
    /// Modification time, when the platform reports one.
    pub mtime: Option<SystemTime>,
}

impl FileStamp {
    /// The stamp of an open file.
    pub fn of(file: &File) -> io::Result<Self> {
        let m = file.metadata()?;
        Ok(FileStamp {
            size: m.len(),
            dev: m.dev(),
            ino: m.ino(),
            mtime: m.modified().ok(),
        })
    }
}

/// A session read from disk.
#[derive(Debug)]
pub struct OpenedSession {
    /// The session's tree.
    pub tree: Tree,
    /// An unparsable unterminated last line, left unapplied.
    pub torn_tail: Option<TornTail>,
    /// Byte offset just past the last complete line applied (where tailing resumes).
    pub applied_len: u64,
    /// Number of physical lines consumed up to `applied_len`.
    pub applied_lines: u32,
    /// The file as it was when read.
    pub stamp: FileStamp,
}

/// Opens and reads a session file. Strict mode refuses corruption with [`OpenError::Corrupt`];
/// lenient mode skips it the way pi does and lists it in the tree's diagnostics.
pub fn open_session(path: &Path, mode: Mode) -> Result<OpenedSession, OpenError> {
    let io_err = |source| OpenError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io_err)?;
    let stamp = FileStamp::of(&file).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if !meta.is_file() {
        return Err(OpenError::NotAFile {
            path: path.to_owned(),
        });
    }
    let mut loader = Loader::new(mode, stamp.size);
    let mut splitter = LineSplitter::new(0, 0);
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        };
        splitter
            .feed(&buf[..n], |bytes, span| loader.line(bytes, span))
            .map_err(|corruption| OpenError::Corrupt {
                path: path.to_owned(),
                corruption,
            })?;
    }
    let corrupt = |corruption| OpenError::Corrupt {
        path: path.to_owned(),
        corruption,
    };
    let read_len = splitter.offset + splitter.pending().len() as u64;
    let (mut applied_len, mut applied_lines) = (splitter.offset, splitter.line);
    let torn_tail = match splitter.finish() {
        Some((bytes, span)) => match loader.final_line(&bytes, span) {
            Ok(()) => {
                (applied_len, applied_lines) = (read_len, span.line);
                None
            }
            Err(FinalLine::Torn) => Some(TornTail {
                line: span.line,
                offset: span.offset,
                len: bytes.len() as u64,
            }),
            Err(FinalLine::Corrupt(c)) => return Err(corrupt(c)),
        },
        None => None,
    };
    let tree = loader.finish(torn_tail.as_ref()).map_err(corrupt)?;
    Ok(OpenedSession {
        tree,
        torn_tail,
        applied_len,
        applied_lines,
        stamp,
    })
}

/// Splits a byte stream into lines, tracking 1-based line numbers and byte offsets.
/// Keeps an unterminated last line pending until its newline arrives.
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
    /// Offset of the first pending byte (= end of the last complete line).
    pub offset: u64,
    /// Number of complete lines seen.
    pub line: u32,
}

impl LineSplitter {
    /// A splitter that resumes after `line` complete lines ending at byte `offset`.
    pub fn new(offset: u64, line: u32) -> Self {
        LineSplitter {
            pending: Vec::new(),
            offset,
            line,
        }
    }

    /// Feeds bytes; calls `on_line(bytes, span)` for each complete line (without `\n`).
    pub fn feed<E>(
        &mut self,
        mut chunk: &[u8],
        mut on_line: impl FnMut(&[u8], LineSpan) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some(nl) = memchr::memchr(b'\n', chunk) {
            let (head, rest) = (&chunk[..nl], &chunk[nl + 1..]);
            let span_len;
            if self.pending.is_empty() {
                span_len = head.len();
                self.line += 1;
                on_line(
                    head,
                    LineSpan {
                        line: self.line,
                        offset: self.offset,
                        len: span_len as u32,
                    },
                )?;
            } else {
                self.pending.extend_from_slice(head);
                span_len = self.pending.len();
                self.line += 1;
                let line = std::mem::take(&mut self.pending);
                on_line(
                    &line,
                    LineSpan {
                        line: self.line,
                        offset: self.offset,
                        len: span_len as u32,
                    },
                )?;
            }
            self.offset += span_len as u64 + 1;
            chunk = rest;
        }
        self.pending.extend_from_slice(chunk);
        Ok(())
    }

    /// Bytes after the last newline, if any.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Ends the stream: the unterminated final line, if there is one.
    pub fn finish(self) -> Option<(Vec<u8>, LineSpan)> {
        if self.pending.is_empty() {
            return None;
        }
        let len = self.pending.len() as u32;
        Some((
            self.pending,
            LineSpan {
                line: self.line + 1,
                offset: self.offset,
                len,
            },
        ))
    }
}

enum FinalLine {
    Torn,
    Corrupt(Corruption),
}

/// Applies lines to a tree: the header first, then entries.
struct Loader {
    mode: Mode,
    tree: Option<Tree>,
    first_span: Option<LineSpan>,
    /// Entries expected, from the file size: reserved up front so the arena is not copied
    /// while it grows (reserved pages that are never written cost no memory).
    expected_entries: usize,
}

/// Smallest typical entry line, in bytes, for [`Loader::expected_entries`].
const SMALL_ENTRY_BYTES: u64 = 512;

impl Loader {
    fn new(mode: Mode, file_size: u64) -> Self {
        Loader {
            mode,
            tree: None,
            first_span: None,
            expected_entries: usize::try_from(file_size / SMALL_ENTRY_BYTES).unwrap_or(0),
        }
    }

    fn line(&mut self, bytes: &[u8], span: LineSpan) -> Result<(), Corruption> {
        if is_blank(bytes) {
            return Ok(());
        }
        self.first_span.get_or_insert(span);
        match &mut self.tree {
            None => {
                let header = match format::parse_line(bytes, span, Expect::Header) {
                    Ok(Line::Header(h)) => h,
                    Ok(_) => {
                        return Err(corruption(
                            CorruptionKind::MissingHeader,
                            span,
                            "the first line is not a session header",
                        ));
                    }
                    Err(p) => return Err(corruption(p.kind.into(), span, &p.detail)),
                };
                let mut tree = Tree::new(header, self.mode);
                tree.reserve(self.expected_entries);
                self.tree = Some(tree);
                Ok(())
            }
            Some(tree) => apply_entry_line(tree, bytes, span),
        }
    }

    /// The unterminated final line: a normal entry when it parses, a torn tail when it is
    /// not valid JSON, corruption otherwise.
    fn final_line(&mut self, bytes: &[u8], span: LineSpan) -> Result<(), FinalLine> {
        if is_blank(bytes) {
            return Ok(());
        }
        let expect = match &self.tree {
            None => Expect::Header,
            Some(t) => Expect::Entry {
                version: t.header().version,
            },
        };
        match format::parse_line(bytes, span, expect) {
            Err(p) if p.kind == ProblemKind::InvalidJson => Err(FinalLine::Torn),
            _ => self.line(bytes, span).map_err(FinalLine::Corrupt),
        }
    }

    fn finish(self, torn: Option<&TornTail>) -> Result<Tree, Corruption> {
        let Some(mut tree) = self.tree else {
            let (line, offset) = torn.map_or((1, 0), |t| (t.line, t.offset));
            return Err(Corruption {
                kind: CorruptionKind::EmptyFile,
                line,
                offset,
                id: None,
                message: "the file has no session header".into(),
            });
        };
        tree.settle()?;
        Ok(tree)
    }
}

/// Parses one entry line and pushes it onto the tree (strict: corruption is an error;
/// lenient: noted and skipped).
pub fn apply_entry_line(tree: &mut Tree, bytes: &[u8], span: LineSpan) -> Result<(), Corruption> {
    if is_blank(bytes) {
        return Ok(());
    }
    let version = tree.header().version;
    match format::parse_line(bytes, span, Expect::Entry { version }) {
        Ok(Line::Entry(entry)) => {
            let v1_index =
                if version < 2 && matches!(entry.kind, format::EntryKind::Compaction { .. }) {
                    format::v1_first_kept_index(bytes)
                } else {
                    None
                };
            tree.push(entry, v1_index).map(|_| ())
        }
        Ok(Line::ExtraHeader) => {
            tree.push_extra_header();
            Ok(())
        }
        Ok(Line::Header(_)) => Ok(()),
        Err(p) => tree.line_problem(p, span),
    }
}

/// Whether a line holds only whitespace (pi skips those).
pub fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

fn corruption(kind: CorruptionKind, span: LineSpan, message: &str) -> Corruption {
    Corruption {
        kind,
        line: span.line,
        offset: span.offset,
        id: None,
        message: message.to_owned(),
    }
}

/// Reads entry lines from a session file with positioned reads (no shared cursor).
#[derive(Debug)]
pub struct FileLines {
    file: File,
}

impl FileLines {
    /// Opens `path` for reading lines.
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(FileLines {
            file: File::open(path)?,
        })
    }
    /// Wraps an open file.
    pub fn new(file: File) -> Self {
        FileLines { file }
    }
}

impl LineSource for FileLines {
    fn line(&self, span: LineSpan) -> io::Result<Cow<'_, [u8]>> {
        let mut buf = vec![0u8; span.len as usize];
        self.file.read_exact_at(&mut buf, span.offset)?;
        Ok(Cow::Owned(buf))
    }
}
