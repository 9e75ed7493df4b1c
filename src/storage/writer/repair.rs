//! Torn-tail repair, only under the write lock: the torn bytes go to a sidecar backup file
//! first, then the session is truncated to its last complete line (see the module docs of
//! [`super`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::WriteError;

/// A torn tail moved aside before an append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// The sidecar file holding the torn bytes.
    pub sidecar: PathBuf,
    /// Where the torn bytes started in the session file, and how many there were.
    pub offset: u64,
    /// Number of torn bytes moved aside.
    pub len: u64,
}

/// Moves an old torn tail aside: sidecar written and synced, size re-checked, file truncated.
pub(super) fn repair_torn(
    file: &File,
    path: &Path,
    offset: u64,
    bytes: &[u8],
) -> Result<Repair, WriteError> {
    let base = path.as_os_str().to_string_lossy().into_owned();
    let mut n = 0u32;
    let (sidecar, mut out) = loop {
        let candidate = if n == 0 {
            PathBuf::from(format!("{base}.torn-{offset}.bak"))
        } else {
            PathBuf::from(format!("{base}.torn-{offset}-{n}.bak"))
        };
        // The torn bytes are session content: readable by the owner only (SPEC §8).
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&candidate)
        {
            Ok(f) => break (candidate, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(source) => {
                return Err(WriteError::Io {
                    path: candidate,
                    source,
                });
            }
        }
    };
    out.write_all(bytes)
        .and_then(|()| out.sync_all())
        .map_err(WriteError::io(&sidecar))?;
    let len = file.metadata().map_err(WriteError::io(path))?.len();
    if len != offset + bytes.len() as u64 {
        // Someone appended after our read: the tail is alive after all. The sidecar stays (it
        // holds a copy, nothing was removed); the caller retries.
        return Err(WriteError::Busy {
            path: path.to_owned(),
            age_ms: 0,
            reason: "the torn tail changed while it was being repaired",
        });
    }
    file.set_len(offset)
        .and_then(|()| file.sync_data())
        .map_err(WriteError::io(path))?;
    tracing::info!(
        file = %path.display(),
        offset,
        len = bytes.len(),
        sidecar = %sidecar.display(),
        "moved a torn tail aside"
    );
    Ok(Repair {
        sidecar,
        offset,
        len: bytes.len() as u64,
    })
}
