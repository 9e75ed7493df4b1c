//! The advisory write lock on a session file: `flock(2)` exclusive, taken with a deadline.
//!
//! Why `flock` (through rustix, which tempfile already brings in): its locks belong to the open
//! file description, so two handles in one process exclude each other just as two processes do
//! (POSIX `fcntl` locks are per process: two threads of one daemon would both "hold" them, and
//! closing any descriptor of the file would drop them). It is advisory: it orders sessiond
//! writers (several daemons, the CLI); pi itself takes no lock, which is why every write also
//! re-reads the tail under the lock and appends with one `write` of a whole line.

use std::fs::File;
use std::io;
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, flock};
use rustix::io::Errno;

/// An exclusive lock held on a file; released when dropped (closing the file releases it too).
#[derive(Debug)]
pub struct FileLock<'f> {
    file: &'f File,
}

/// Why the lock could not be taken.
#[derive(Debug)]
pub enum LockError {
    /// Another writer held the lock for the whole `waited`.
    TimedOut {
        /// How long the lock was waited for.
        waited: Duration,
    },
    /// `flock` failed for another reason (e.g. the file system does not support it).
    Io(io::Error),
}

/// Takes an exclusive lock on `file`, retrying with short sleeps until `timeout` has passed.
pub fn lock_exclusive(file: &File, timeout: Duration) -> Result<FileLock<'_>, LockError> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        match flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(FileLock { file }),
            Err(Errno::INTR) => continue,
            Err(Errno::WOULDBLOCK) => {
                let waited = start.elapsed();
                if waited >= timeout {
                    return Err(LockError::TimedOut { waited });
                }
                std::thread::sleep(pause.min(timeout - waited));
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            Err(e) => return Err(LockError::Io(e.into())),
        }
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        // Closing the file would release the lock anyway; unlocking now lets the next
        // writer in before our caller gets around to dropping the file.
        let _ = flock(self.file, FlockOperation::Unlock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_handle_in_the_same_process_is_excluded() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let a = File::open(f.path()).unwrap();
        let b = File::open(f.path()).unwrap();
        let held = lock_exclusive(&a, Duration::from_millis(10)).unwrap();
        assert!(matches!(
            lock_exclusive(&b, Duration::from_millis(20)),
            Err(LockError::TimedOut { .. })
        ));
        drop(held);
        assert!(lock_exclusive(&b, Duration::from_millis(10)).is_ok());
    }
}
