//! Fault injection for writes: appends that fail part-way and writers killed mid-append leave
//! the session readable, with every acknowledged entry present exactly once and nothing
//! half-written that is not reported as a torn tail.
//!
//! The faults are real ones, injected from outside the process so the code under test is the
//! shipped binary: `RLIMIT_FSIZE` (`ulimit -f`, with `SIGXFSZ` ignored so `write(2)` comes back
//! short or with `EFBIG` part-way, exactly as on a full disk), and `SIGKILL` at random moments of
//! an append with `--sync` (between `write` and `fdatasync`, or anywhere else). Needs `bash`.
//! Errors the system cannot be made to give on demand are injected into the binary through
//! `SESSIOND_TEST_FAULT` (`storage::faults`): `EIO` and `ENOSPC` from `write(2)` and from
//! `fdatasync`/`fsync`, and a failing `rename` of a published file. A read-only directory is
//! a real read-only bind mount in a mount namespace of the test's own (`unshare -m`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use sessiond::core::tree::Mode;
use sessiond::dialect::pi::Pi;
use sessiond::storage::reader::open_session;

/// A fixed seed per run, printed, so a failure can be replayed with `SESSIOND_FAULT_SEED`.
fn rng() -> fastrand::Rng {
    let seed = std::env::var("SESSIOND_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("write faults: seed {seed} (SESSIOND_FAULT_SEED={seed} replays)");
    fastrand::Rng::with_seed(seed)
}

/// An entry whose content carries `marker`, padded to about `len` bytes.
fn entry(marker: &str, len: usize) -> String {
    format!(
        r#"{{"type":"message","message":{{"role":"user","content":"{marker} {}","timestamp":1}}}}"#,
        "y".repeat(len)
    )
}

/// `sessiond append` on `file` under the session's current default leaf, run through bash
/// with `limit_kib` as the file size limit (`ulimit -f`) and `SIGXFSZ` ignored.
fn append_command(
    file: &Path,
    entry: &str,
    leaf: &str,
    limit_kib: Option<u64>,
    sync: bool,
) -> Command {
    let mut script = String::from("trap '' XFSZ; ");
    if let Some(kib) = limit_kib {
        script.push_str(&format!("ulimit -f {kib}; "));
    }
    script.push_str("exec \"$@\"");
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        &script,
        "bash",
        env!("CARGO_BIN_EXE_sessiond"),
        "append",
    ])
    .arg(file)
    .args(["--entry", entry, "--expected-leaf", leaf, "--json"]);
    if sync {
        cmd.arg("--sync");
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The session's default leaf as read by the library (`null` when empty).
fn leaf(file: &Path) -> String {
    let opened = open_session::<Pi>(file, Mode::Strict).unwrap();
    opened.tree.default_leaf().map_or("null".to_owned(), |n| {
        opened.tree.node(n).entry.id.to_string()
    })
}

/// How many entries of the file carry each marker, by id; and the torn tail, if any.
fn survivors(file: &Path) -> (HashMap<String, Vec<String>>, bool) {
    let opened = open_session::<Pi>(file, Mode::Strict)
        .unwrap_or_else(|e| panic!("the session no longer opens: {e}"));
    let bytes = std::fs::read(file).unwrap();
    let mut by_marker: HashMap<String, Vec<String>> = HashMap::new();
    for n in opened.tree.nodes() {
        let span = n.entry.span;
        let line = &bytes[span.offset as usize..(span.offset + u64::from(span.len)) as usize];
        let v: Value = serde_json::from_slice(line).unwrap();
        if let Some(marker) = v["message"]["content"]
            .as_str()
            .and_then(|text| text.split(' ').next())
            .filter(|m| m.starts_with("ack-"))
        {
            by_marker
                .entry(marker.to_owned())
                .or_default()
                .push(n.entry.id.to_string());
        }
    }
    (by_marker, opened.torn_tail.is_some())
}

/// The session the appends go to, in a temporary folder: (the folder, the file).
fn target() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = common::copy_into(
        dir.path(),
        &common::repo("tests/data/cases/tree-order-bad-timestamp.jsonl"),
    );
    (dir, file)
}

/// Every acknowledged (marker, id) is in the file once, as that id.
fn every_acknowledged_once(found: &HashMap<String, Vec<String>>, acked: &[(String, String)]) {
    for (marker, id) in acked {
        assert_eq!(
            found.get(marker),
            Some(&vec![id.clone()]),
            "{marker} once, as {id}"
        );
    }
}

#[test]
fn a_write_cut_short_by_the_file_size_limit_leaves_nothing_half_written() {
    let mut rng = rng();
    let (_dir, file) = target();
    let mut acked: Vec<(String, String)> = Vec::new();
    let (mut short, mut refused) = (0, 0);
    for i in 0..40 {
        let marker = format!("ack-{i}");
        let text = entry(&marker, 100 + rng.usize(..3000));
        let before = std::fs::read(&file).unwrap();
        let size = before.len() as u64;
        // A limit anywhere from the current size to past the end of the new line: the write
        // fits, comes back short, or is refused outright.
        let limit_kib = (size + rng.u64(..2 * text.len() as u64 + 2048)) / 1024;
        let out = append_command(&file, &text, &leaf(&file), Some(limit_kib), false)
            .output()
            .unwrap();
        let after = std::fs::read(&file).unwrap();
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            acked.push((marker, v["id"].as_str().unwrap().to_owned()));
            assert!(after.starts_with(&before) && after.len() > before.len());
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            assert!(
                stderr.contains("short write")
                    || stderr.contains("too large")
                    || stderr.contains("EFBIG"),
                "an I/O error is reported: {stderr}"
            );
            if stderr.contains("short write") {
                short += 1;
            } else {
                refused += 1;
            }
            // Nothing of the line stays behind.
            assert_eq!(after, before, "a failed append left bytes in the file");
        }
        let (found, torn) = survivors(&file);
        assert!(!torn, "a failed append left a torn tail");
        every_acknowledged_once(&found, &acked);
        assert_eq!(
            found.len(),
            acked.len(),
            "only acknowledged entries are in the file"
        );
    }
    eprintln!(
        "write faults (file size limit): {} appends acknowledged, {short} cut short and rolled back, {refused} refused with nothing written",
        acked.len()
    );
    assert!(
        short > 0,
        "no write was cut part-way; the limits missed the lines"
    );
}

#[test]
fn a_writer_killed_at_any_moment_loses_no_acknowledged_entry() {
    let mut rng = rng();
    let (_dir, file) = target();
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut unacked: Vec<String> = Vec::new();
    let mut torn_seen = 0;
    for i in 0..60 {
        let marker = format!("ack-{i}");
        let text = entry(&marker, 50 + rng.usize(..20_000));
        let mut child = append_command(&file, &text, &leaf(&file), None, true)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.u64(..30_000)));
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            acked.push((marker, v["id"].as_str().unwrap().to_owned()));
        } else {
            unacked.push(marker);
        }
        let (found, torn) = survivors(&file);
        every_acknowledged_once(&found, &acked);
        for marker in &unacked {
            assert!(
                found.get(marker).is_none_or(|ids| ids.len() == 1),
                "{marker} at most once"
            );
        }
        if torn {
            // Only a kill inside write(2) can tear a line; the next append repairs it once it
            // is older than the grace period.
            torn_seen += 1;
            std::thread::sleep(Duration::from_millis(2100));
        }
    }
    eprintln!(
        "write faults (SIGKILL): {} appends acknowledged, {} killed (torn tails seen: {torn_seen})",
        acked.len(),
        unacked.len()
    );
    assert!(
        !unacked.is_empty(),
        "no writer was killed; the delays missed the appends"
    );
}

#[test]
fn a_fork_that_cannot_be_written_leaves_no_file_behind() {
    let dir = tempfile::tempdir().unwrap();
    let src = common::copy_into(dir.path(), &common::repo("examples/pi-v3-branched.jsonl"));
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let before = std::fs::read(&src).unwrap();
    let leaf = leaf(&src);
    let status = Command::new("bash")
        .args([
            "-c",
            "trap '' XFSZ; ulimit -f 1; exec \"$@\"",
            "bash",
            env!("CARGO_BIN_EXE_sessiond"),
            "fork",
        ])
        .arg(&src)
        .arg(&leaf)
        .arg("--out")
        .arg(&out_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(
        status.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "a failed fork left {left:?}");
    assert_eq!(
        std::fs::read(&src).unwrap(),
        before,
        "the source is untouched"
    );
}

/// The files of a folder, by name, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What an injected error says, by the name given in `SESSIOND_TEST_FAULT`.
fn says(fault: &str) -> &'static str {
    if fault.ends_with("enospc") {
        "No space left on device (os error 28)"
    } else if fault.ends_with("eio") {
        "Input/output error (os error 5)"
    } else {
        "removed again"
    }
}

/// Every injected fault of an append (`write(2)` failing with `EIO` or `ENOSPC` or cut short,
/// `fdatasync` failing with either) fails it with exit 2 and an error naming the file and what
/// failed; the file is byte for byte what it was, nothing else is left in its folder, and the
/// next append is read back once.
#[test]
fn injected_append_faults_leave_the_file_as_it_was() {
    let (dir, file) = target();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    for fault in [
        "write-eio",
        "write-enospc",
        "write-short",
        "sync-eio",
        "sync-enospc",
    ] {
        let before = std::fs::read(&file).unwrap();
        let marker = format!("lost-{fault}");
        let out = append_command(&file, &entry(&marker, 200), &leaf(&file), None, true)
            .env(sessiond::storage::faults::FAULT_ENV, fault)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{fault}: {stderr}");
        assert!(stderr.contains(&name), "{fault}: names the file: {stderr}");
        assert!(stderr.contains(says(fault)), "{fault}: {stderr}");
        if fault.starts_with("sync") {
            assert!(stderr.contains("fdatasync failed"), "{fault}: {stderr}");
        }
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "{fault}: the file changed"
        );
        assert_eq!(
            names_in(dir.path()),
            std::slice::from_ref(&name),
            "{fault}: left behind"
        );
    }
    let out = append_command(&file, &entry("ack-after", 200), &leaf(&file), None, true)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (found, torn) = survivors(&file);
    assert!(!torn);
    assert_eq!(found.get("ack-after"), Some(&vec![id]));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("lost-"), "a failed append left its entry");
}

/// `sessiond fork` with an injected fault in its publish (the new file's write or `fsync`
/// failing with `EIO` or `ENOSPC`, or the rename that puts it in place): exit 2, an error
/// naming the new file, no new file and no temporary file, the source unchanged; without the
/// fault the same fork publishes.
#[test]
fn injected_publish_faults_leave_no_file_behind() {
    let (dir, file) = target();
    let at = leaf(&file);
    let before = std::fs::read(&file).unwrap();
    let names = names_in(dir.path());
    let fork = |fault: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sessiond"));
        cmd.arg("fork").arg(&file).arg(&at).arg("--json");
        if let Some(f) = fault {
            cmd.env(sessiond::storage::faults::FAULT_ENV, f);
        }
        cmd.output().unwrap()
    };
    for fault in [
        "write-eio",
        "write-enospc",
        "sync-eio",
        "sync-enospc",
        "rename-eio",
        "rename-enospc",
    ] {
        let out = fork(Some(fault));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{fault}: {stderr}");
        assert!(stderr.contains(says(fault)), "{fault}: {stderr}");
        let dir_text = dir.path().to_string_lossy();
        assert!(
            stderr.contains(&*dir_text) && stderr.contains(".jsonl:"),
            "{fault}: names the new file: {stderr}"
        );
        assert!(
            !stderr.contains(".jsonl.tmp"),
            "{fault}: names a temporary file: {stderr}"
        );
        assert_eq!(names_in(dir.path()), names, "{fault}: left behind");
        assert_eq!(std::fs::read(&file).unwrap(), before);
    }
    let out = fork(None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(names_in(dir.path()).len(), names.len() + 1);
}

/// Runs `sessiond ARGS…` with `dir` mounted read-only (a bind mount in a mount namespace of its
/// own: a real `EROFS`, which no file mode gives root); `None` where namespaces are refused.
fn in_read_only(dir: &Path, args: &[&std::ffi::OsStr]) -> Option<std::process::Output> {
    let probe = Command::new("unshare").args(["-m", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: `unshare -m` is not allowed here (a read-only mount needs it)");
        assert!(
            std::env::var_os("CI").is_none(),
            "unshare -m refused under CI"
        );
        return None;
    }
    let script = r#"mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@""#;
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(dir)
        .arg(env!("CARGO_BIN_EXE_sessiond"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Some(out)
}

/// A session in a read-only directory: an append fails naming the file (`EROFS`), a fork into
/// a read-only directory fails naming the directory; nothing changes on either side.
#[test]
fn a_read_only_directory_refuses_writes_and_changes_nothing() {
    let (dir, file) = target();
    let out_dir = tempfile::tempdir().unwrap();
    let before = std::fs::read(&file).unwrap();
    let at = leaf(&file);
    let text = entry("lost-ro", 100);
    let Some(out) = in_read_only(
        dir.path(),
        &[
            "append".as_ref(),
            file.as_os_str(),
            "--entry".as_ref(),
            text.as_ref(),
            "--expected-leaf".as_ref(),
            at.as_ref(),
        ],
    ) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&*file.to_string_lossy()),
        "names the file: {stderr}"
    );
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert_eq!(std::fs::read(&file).unwrap(), before);

    let out = in_read_only(
        out_dir.path(),
        &[
            "fork".as_ref(),
            file.as_os_str(),
            at.as_ref(),
            "--out".as_ref(),
            out_dir.path().as_os_str(),
        ],
    )
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&*out_dir.path().to_string_lossy()),
        "names the directory: {stderr}"
    );
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(names_in(out_dir.path()).is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), before);
}
