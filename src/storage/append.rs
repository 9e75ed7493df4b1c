//! Appending one entry line under an exclusive advisory lock (SPEC §4): lock, re-read the
//! file under the lock, let the caller decide on that fresh view (fencing), then one
//! `write` of the complete line ending in `\n`.
//!
//! Deliberately minimal: a file whose tail is torn is refused (repairing it is the write
//! path's job), and a file replaced while waiting for the lock is refused rather than
//! retried.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::reader::{self, FileLines, OpenError, OpenedSession};
use crate::core::tree::Mode;

/// Why an append did not happen.
#[derive(Debug, Error)]
pub enum AppendError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// The final line is torn; sessiond does not append after it without a repair.
    #[error("{}: the file ends in a torn line (line {line}, byte {offset}); not appending after it", path.display())]
    TornTail {
        path: PathBuf,
        line: u32,
        offset: u64,
    },
    /// The path was renamed over while this process waited for the lock.
    #[error("{}: the file was replaced while waiting for its lock", path.display())]
    Replaced { path: PathBuf },
    /// The caller produced something that is not one complete JSON line.
    #[error("{}: refusing to append a line that is not a single line ending in a newline", path.display())]
    NotOneLine { path: PathBuf },
}

/// Locks `path` exclusively, reads it under the lock, and calls `decide` with that view.
/// When `decide` returns a line, appends it with one `write` (preceded by the missing
/// newline if the last complete line has none) and syncs the data. The lock is released
/// when this returns.
pub fn append_under_lock<T, E>(
    path: &Path,
    decide: impl FnOnce(&OpenedSession, &FileLines) -> Result<(Option<String>, T), E>,
) -> Result<T, E>
where
    E: From<AppendError>,
{
    let io_err = |source| AppendError::Io {
        path: path.to_owned(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(path)
        .map_err(io_err)?;
    file.lock().map_err(io_err)?;
    let session = reader::open_session(path, Mode::Strict).map_err(AppendError::from)?;
    let meta = file.metadata().map_err(io_err)?;
    if (meta.dev(), meta.ino()) != (session.stamp.dev, session.stamp.ino) {
        return Err(AppendError::Replaced {
            path: path.to_owned(),
        }
        .into());
    }
    if let Some(t) = session.torn_tail {
        return Err(AppendError::TornTail {
            path: path.to_owned(),
            line: t.line,
            offset: t.offset,
        }
        .into());
    }
    let lines = FileLines::new(file.try_clone().map_err(io_err)?);
    let (line, out) = decide(&session, &lines)?;
    if let Some(line) = line {
        if !line.ends_with('\n') || line[..line.len() - 1].contains('\n') {
            return Err(AppendError::NotOneLine {
                path: path.to_owned(),
            }
            .into());
        }
        let mut bytes = Vec::with_capacity(line.len() + 1);
        if needs_newline(&file, meta.len()).map_err(io_err)? {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(line.as_bytes());
        write_once(&file, &bytes).map_err(io_err)?;
        file.sync_data().map_err(io_err)?;
    }
    Ok(out)
}

fn needs_newline(file: &File, len: u64) -> io::Result<bool> {
    if len == 0 {
        return Ok(false);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, len - 1)?;
    Ok(last[0] != b'\n')
}

/// One `write` call for the whole buffer; a short write is reported, not continued, so a
/// reader never sees a line assembled from two writes.
fn write_once(mut file: &File, bytes: &[u8]) -> io::Result<()> {
    let n = file.write(bytes)?;
    if n != bytes.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short write: {n} of {} bytes", bytes.len()),
        ));
    }
    Ok(())
}
