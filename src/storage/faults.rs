//! Fault injection for the writers' unit tests: a failing `write(2)` (`EIO`), a short write, a
//! failing `fdatasync` and a failing rename, planned per thread before a call into the writer.
//! None of this exists outside `cargo test`; the faults a real disk gives without help (a full
//! file system, a killed process) are tested on the real binary in `tests/write_faults.rs`.
//!
//! The invariant every test checks: after a failure the file holds exactly what it held before
//! (nothing half-written, nothing the caller was told failed), and the next write succeeds
//! with every acknowledged entry present exactly once.

use std::cell::Cell;
use std::fs::File;
use std::io;

use super::writer::append::AppendTarget;

/// One planned failure.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    /// `write(2)` fails with `EIO` and writes nothing.
    WriteEio,
    /// `write(2)` writes only this many bytes and reports it.
    ShortWrite(usize),
    /// The bytes are written, then `fdatasync(2)` fails with `EIO`.
    SyncEio,
    /// The rename that publishes a new file fails with `EIO`.
    RenameEio,
}

thread_local! {
    static PLANNED: Cell<Option<Fault>> = const { Cell::new(None) };
}

/// Plans `fault` for the next write or publish on this thread.
pub(crate) fn plan(fault: Fault) {
    PLANNED.with(|p| p.set(Some(fault)));
}

fn take_if(pred: impl Fn(Fault) -> bool) -> Option<Fault> {
    PLANNED.with(|p| match p.get() {
        Some(f) if pred(f) => p.take(),
        _ => None,
    })
}

/// The error of a planned failing rename, once.
pub(crate) fn rename_fails() -> Option<io::Error> {
    take_if(|f| matches!(f, Fault::RenameEio)).map(|_| eio())
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(5)
}

/// A session file with this thread's planned append fault, if any.
pub(crate) struct Faulty<'a> {
    file: &'a File,
    fault: Cell<Option<Fault>>,
}

impl<'a> Faulty<'a> {
    /// Wraps `file`, taking the planned write or sync fault.
    pub(crate) fn planned(file: &'a File) -> Self {
        let fault = take_if(|f| !matches!(f, Fault::RenameEio));
        Faulty {
            file,
            fault: Cell::new(fault),
        }
    }
}

impl AppendTarget for Faulty<'_> {
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match self.fault.get() {
            Some(Fault::WriteEio) => Err(eio()),
            Some(Fault::ShortWrite(n)) => AppendTarget::write(self.file, &buf[..n.min(buf.len())]),
            _ => AppendTarget::write(self.file, buf),
        }
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        AppendTarget::set_len(self.file, len)
    }
    fn sync_data(&self) -> io::Result<()> {
        match self.fault.get() {
            Some(Fault::SyncEio) => Err(eio()),
            _ => AppendTarget::sync_data(self.file),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::{Path, PathBuf};

    use super::{Fault, plan};
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
        fails_then_recovers(Fault::WriteEio, false, &["os error 5"]);
    }

    #[test]
    fn a_short_write_is_rolled_back() {
        fails_then_recovers(Fault::ShortWrite(17), false, &["removed again"]);
    }

    #[test]
    fn a_failing_fdatasync_takes_the_entry_back_out() {
        fails_then_recovers(Fault::SyncEio, true, &["fdatasync failed", "removed again"]);
    }

    #[test]
    fn a_failing_rename_publishes_nothing_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let lines = vec![HEADER.as_bytes().to_vec(), FIRST.as_bytes().to_vec()];
        let id = "4f9c7d0e-0000-4000-8000-00000000f417";
        let name = publish::session_file_name("2025-01-01T00:00:00.000Z", id);
        plan(Fault::RenameEio);
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
