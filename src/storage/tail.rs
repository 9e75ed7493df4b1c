//! Reading what was appended to a session file that is already open: the stamp of a file (size,
//! identity, mtime, ctime) by handle or by path, positioned reads from the last applied offset, and
//! the bytes just before it (to notice a file rewritten in place). Never writes.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::time::SystemTime;

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
    /// Status change time (`st_ctime`, seconds and nanoseconds): every write moves it, and
    /// unlike the mtime no tool can set it back, so a rewrite that restores the mtime is seen.
    pub ctime: (i64, i64),
    /// Creation time (`statx`'s `btime`), where the file system keeps one. With `dev` and
    /// `ino` it names the file: a file deleted and another created in its place may get the
    /// same inode number (nothing holds the old one open), never the same birth.
    pub btime: Option<SystemTime>,
}

impl FileStamp {
    /// Whether `other` is a stamp of the same file (device, inode and creation time).
    pub fn same_file(&self, other: &FileStamp) -> bool {
        (self.dev, self.ino, self.btime) == (other.dev, other.ino, other.btime)
    }
}

impl FileStamp {
    /// The stamp of an open file.
    pub fn of(file: &File) -> io::Result<Self> {
        Ok(FileStamp::of_metadata(&file.metadata()?))
    }

    /// The stamp `m` gives.
    pub fn of_metadata(m: &std::fs::Metadata) -> Self {
        FileStamp {
            size: m.len(),
            dev: m.dev(),
            ino: m.ino(),
            mtime: m.modified().ok(),
            ctime: (m.ctime(), m.ctime_nsec()),
            btime: m.created().ok(),
        }
    }
}

/// Bytes read per positioned read while tailing.
const TAIL_CHUNK: usize = 1 << 20;

/// The stamp of the file a path names now (following symlinks): size, identity, mtime.
pub fn stamp_path(path: &Path) -> io::Result<FileStamp> {
    Ok(FileStamp::of_metadata(&std::fs::metadata(path)?))
}

/// Reads `[offset, end)` of `file`, stopping early at end of file.
pub fn read_range(file: &File, offset: u64, end: u64) -> io::Result<Vec<u8>> {
    let want = usize::try_from(end.saturating_sub(offset)).unwrap_or(usize::MAX);
    let mut out = Vec::with_capacity(want.min(TAIL_CHUNK));
    let mut pos = offset;
    while (out.len()) < want {
        let take = (want - out.len()).min(TAIL_CHUNK);
        let start = out.len();
        out.resize(start + take, 0);
        let n = loop {
            match file.read_at(&mut out[start..], pos) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        out.truncate(start + n);
        if n == 0 {
            break;
        }
        pos += n as u64;
    }
    Ok(out)
}
