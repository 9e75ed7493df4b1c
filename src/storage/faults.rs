//! Fault injection for the writers: a failing `write(2)` (`EIO`, `ENOSPC`), a short write, a
//! failing `fdatasync`/`fsync` and a failing rename, planned per thread by the unit tests
//! ([`plan`]) or, for the shipped binary under test (`tests/write_faults.rs`), named by
//! [`FAULT_ENV`] for every write of the process. The faults a real system gives without help (a
//! file size limit cutting a write short, a read-only file system, a killed process) are
//! tested on the real binary as they are.
//!
//! The invariant every test checks: after a failure the file holds exactly what it held before
//! (nothing half-written, nothing the caller was told failed, no temporary file left), the
//! error names the file, and the next write succeeds with every acknowledged entry present
//! exactly once.

use std::cell::Cell;
use std::io;

/// Names a fault every write of the process meets: `write-eio`, `write-enospc`, `sync-eio`,
/// `sync-enospc`, `rename-eio` or `rename-enospc` (the operation, then the error it fails
/// with), or `write-short` (an append's `write(2)` writes one byte). For tests of the shipped binary only; never set it otherwise.
pub const FAULT_ENV: &str = "SESSIOND_TEST_FAULT";

/// `EIO`.
pub(crate) const EIO: i32 = 5;
/// `ENOSPC`.
pub(crate) const ENOSPC: i32 = 28;

/// One planned failure.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    /// `write(2)` fails with this `errno` and writes nothing.
    Write(i32),
    /// `write(2)` writes only this many bytes and reports it.
    ShortWrite(usize),
    /// The bytes are written, then `fdatasync(2)` (or `fsync(2)`) fails with this `errno`.
    Sync(i32),
    /// The rename that publishes a new file fails with this `errno`.
    Rename(i32),
}

thread_local! {
    static PLANNED: Cell<Option<Fault>> = const { Cell::new(None) };
}

/// Plans `fault` for the next write or publish on this thread.
#[cfg(test)]
pub(crate) fn plan(fault: Fault) {
    PLANNED.with(|p| p.set(Some(fault)));
}

/// The fault [`FAULT_ENV`] names, if any (an unknown name is none).
fn from_env() -> Option<Fault> {
    let named = std::env::var_os(FAULT_ENV)?;
    let (op, errno) = named.to_str()?.split_once('-')?;
    if (op, errno) == ("write", "short") {
        return Some(Fault::ShortWrite(1));
    }
    let errno = match errno {
        "eio" => EIO,
        "enospc" => ENOSPC,
        _ => return None,
    };
    match op {
        "write" => Some(Fault::Write(errno)),
        "sync" => Some(Fault::Sync(errno)),
        "rename" => Some(Fault::Rename(errno)),
        _ => None,
    }
}

/// This thread's planned fault if `pred` takes it (taken once), else the process's.
fn take_if(pred: impl Fn(Fault) -> bool) -> Option<Fault> {
    PLANNED
        .with(|p| match p.get() {
            Some(f) if pred(f) => p.take(),
            _ => None,
        })
        .or_else(|| from_env().filter(|f| pred(*f)))
}

/// The error of a planned failing rename.
pub(crate) fn rename_fails() -> Option<io::Error> {
    match take_if(|f| matches!(f, Fault::Rename(_))) {
        Some(Fault::Rename(errno)) => Some(io::Error::from_raw_os_error(errno)),
        _ => None,
    }
}

/// The error of a planned failing write of a new file (a publish writes it whole).
pub(crate) fn write_fails() -> Option<io::Error> {
    match take_if(|f| matches!(f, Fault::Write(_))) {
        Some(Fault::Write(errno)) => Some(io::Error::from_raw_os_error(errno)),
        _ => None,
    }
}

/// The error of a planned failing `fsync` of a new file.
pub(crate) fn sync_fails() -> Option<io::Error> {
    match take_if(|f| matches!(f, Fault::Sync(_))) {
        Some(Fault::Sync(errno)) => Some(io::Error::from_raw_os_error(errno)),
        _ => None,
    }
}

/// The fault planned for the next append's `write(2)` or `fdatasync` (a failing or short write,
/// a failing sync), taken once; the writer wraps the session file in it
/// ([`crate::storage::writer`]'s `append`).
pub(crate) fn append_fails() -> Option<Fault> {
    take_if(|f| !matches!(f, Fault::Rename(_)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::{Path, PathBuf};

    use super::{EIO, ENOSPC, Fault, plan};
    use crate::core::tree::Mode;
    use crate::dialect::pi::entries::ParentChoice;
    use crate::storage::publish;
    use crate::storage::reader;
    use crate::storage::writer::{Change, WriteError, WriteOptions, open_for_write, write_entry};

    const HEADER: &str = r#"{"type":"session","version":3,"id":"4f9c7d0e-0000-4000-8000-00000000f417","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/work"}"#;
    const FIRST: &str = r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hello","timestamp":1735689601000}}"#;

    fn session(dir: &Path) -> PathBuf {
        let path = dir.join("s.jsonl");
        std::fs::write(&path, format!("{HEADER}\n{FIRST}\n")).unwrap();
        path
    }

    fn append(path: &Path, text: &str, sync: bool) -> Result<String, WriteError> {
        let mut s = open_for_write(path)?;
        let entry = format!(
            r#"{{"type":"message","message":{{"role":"user","content":"{text}","timestamp":1735689602000}}}}"#
        );
        let opts = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        let change = Change::Append {
            entry_json: &entry,
            parent: ParentChoice::Leaf,
        };
        let leaf = s
            .tree
            .default_leaf()
            .map(|n| s.tree.node(n).entry.id.clone());
        let leaf = leaf.as_ref().map(|id| id.as_str());
        write_entry(path, &mut s, change, leaf, &opts).map(|w| w.id.as_str().to_owned())
    }

    /// An append (synced or not) under `fault` fails with an error that names the file and
    /// says each of `says`; it leaves the file as it was, and the next one is read back once.
    fn fails_then_recovers(fault: Fault, sync: bool, says: &[&str]) {
        let dir = tempfile::tempdir().unwrap();
        let path = session(dir.path());
        let before = std::fs::read(&path).unwrap();
        plan(fault);
        let text = append(&path, "lost", sync).unwrap_err().to_string();
        for part in says {
            assert!(text.contains(part), "{part:?} not in {text}");
        }
        assert!(text.contains("s.jsonl"), "the error names the file: {text}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "after: {text}");
        let id = append(&path, "after the fault", true).unwrap();
        let s = reader::open_session::<crate::dialect::pi::Pi>(&path, Mode::Strict).unwrap();
        assert!(s.torn_tail.is_none());
        assert_eq!(s.tree.len(), 2);
        assert!(s.tree.find(&id).is_some());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches("after the fault").count(), 1);
        assert!(!text.contains("lost"));
    }

    #[test]
    fn a_write_failing_with_eio_changes_nothing() {
        fails_then_recovers(Fault::Write(EIO), false, &["os error 5"]);
    }

    #[test]
    fn a_write_failing_with_enospc_changes_nothing() {
        fails_then_recovers(Fault::Write(ENOSPC), true, &["No space left on device"]);
    }

    #[test]
    fn a_failing_fdatasync_with_enospc_takes_the_entry_back_out() {
        fails_then_recovers(
            Fault::Sync(ENOSPC),
            true,
            &[
                "fdatasync failed",
                "No space left on device",
                "removed again",
            ],
        );
    }

    #[test]
    fn a_short_write_is_rolled_back() {
        fails_then_recovers(Fault::ShortWrite(17), false, &["removed again"]);
    }

    #[test]
    fn a_failing_fdatasync_takes_the_entry_back_out() {
        fails_then_recovers(
            Fault::Sync(EIO),
            true,
            &["fdatasync failed", "removed again"],
        );
    }

    #[test]
    fn a_failing_rename_publishes_nothing_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let lines = vec![HEADER.as_bytes().to_vec(), FIRST.as_bytes().to_vec()];
        let id = "4f9c7d0e-0000-4000-8000-00000000f417";
        let name = publish::session_file_name("2025-01-01T00:00:00.000Z", id);
        plan(Fault::Rename(EIO));
        let err = publish::publish_new(dir.path(), &name, id, &lines, 0o600).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&name), "the error names the file: {text}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        // Nothing was reserved for good: the same publish now succeeds.
        let path = publish::publish_new(dir.path(), &name, id, &lines, 0o600).unwrap();
        let s = reader::open_session::<crate::dialect::pi::Pi>(&path, Mode::Strict).unwrap();
        assert_eq!(s.tree.len(), 1);
    }
}
