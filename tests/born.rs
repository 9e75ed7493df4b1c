//! A session file is born in pieces: pi creates it, then writes the header and its first
//! entries separately. A young empty or header-less file is pending — for `session/open`,
//! `session/list` and the CLI — and its entries are announced as they arrive; an old one is
//! the `emptyFile` corruption it looks like.
// Helpers fail the test by panicking, like assertions.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use support::{
    BIN, Daemon, NOTE_WAIT, append, assert_schema, checked, error_of, followed, session_text,
    v3_session,
};

/// Makes a file look `secs` seconds old.
fn age(path: &Path, secs: u64) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs))
        .unwrap();
}

/// `sessiond check FILE --json`: exit code and the JSON document.
fn check(path: &Path) -> (Option<i32>, Value) {
    let out = Command::new(BIN)
        .args(["check", "--json"])
        .arg(path)
        .output()
        .unwrap();
    let doc = support::common::parse_json(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), doc)
}

/// A temporary folder and its canonical path (the daemon answers canonical paths).
fn root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    (dir, root)
}

#[test]
fn a_young_empty_file_is_pending_and_its_entries_are_announced_as_they_arrive() {
    let (_dir, root) = root();
    let file = root.join("born.jsonl");
    std::fs::write(&file, "").unwrap();
    let (header, entries) = v3_session(3);

    // The CLI: busy (7), kind `pending`, not corrupt (3).
    let (code, doc) = check(&file);
    assert_eq!(code, Some(7), "{doc}");
    assert_eq!(doc["error"]["kind"], "pending", "{doc}");

    let (mut d, _) = Daemon::start(&[&root]);
    let listed = checked(&mut d, "session/list", json!({}));
    assert_eq!(listed["pending"], json!([file]), "{listed}");
    assert_eq!(listed["skipped"], json!([]));

    let opened = checked(&mut d, "session/open", json!({"path": file}));
    assert_eq!(opened["pending"], true);
    assert_eq!(opened["sessionId"], Value::Null);
    assert_eq!(opened["header"], Value::Null);
    assert_eq!(opened["entryCount"], 0);
    // Writes wait for the header: busy.
    let r = d.request(
        "session/setName",
        json!({"path": file, "name": "x", "expectedLeafId": null}),
    );
    let (code, _, data) = error_of(&r);
    assert_eq!(code, -33011, "{r}");
    assert!(data["reason"].as_str().unwrap().contains("header"), "{r}");

    // Part of the header: still pending, nothing reported.
    append(&file, &header[..20]);
    let again = checked(&mut d, "session/open", json!({"path": file}));
    assert_eq!(again["pending"], true);

    // The rest of the header and the first entry in one write: born.
    append(&file, &format!("{}\n{}\n", &header[20..], entries[0].1));
    let born = d
        .notification("session/didReload", NOTE_WAIT)
        .expect("didReload");
    assert_schema("session/didReload", "params", &born);
    assert_eq!(born["reason"], "born");
    assert_eq!(born["entryCount"], 1);
    let opened = checked(&mut d, "session/open", json!({"path": file}));
    assert_eq!(opened["pending"], false);
    assert_eq!(opened["sessionId"], "4f9c7d0e-0000-4000-8000-000000000001");

    // Later entries one by one, each announced once.
    for (id, line) in &entries[1..] {
        append(&file, &format!("{line}\n"));
        let change = d
            .notification("session/didChange", NOTE_WAIT)
            .expect("didChange");
        assert_eq!(change["added"][0]["id"], json!(id));
        assert_eq!(change["added"].as_array().unwrap().len(), 1);
    }
    assert!(
        d.notification("session/didCorrupt", Duration::from_millis(200))
            .is_none()
    );
    let listed = checked(&mut d, "session/list", json!({}));
    assert_eq!(listed["pending"], json!([]));
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1);
    d.stop();
}

#[test]
fn an_old_empty_file_is_corrupt_and_a_pending_one_that_stays_empty_is_reported() {
    let (_dir, root) = root();
    let old = root.join("old.jsonl");
    std::fs::write(&old, "").unwrap();
    age(&old, 60);
    let (code, doc) = check(&old);
    assert_eq!(code, Some(3), "{doc}");

    let (mut d, _) = Daemon::start(&[&root]);
    let r = d.request("session/open", json!({"path": old}));
    let (code, _, data) = error_of(&r);
    assert_eq!(code, -33003, "{r}");
    assert_eq!(data["kind"], "emptyFile");
    let listed = checked(&mut d, "session/list", json!({}));
    assert_eq!(listed["skipped"], json!([old]));
    assert_eq!(listed["pending"], json!([]));

    // Pending when opened; still empty after the grace: reported once as corrupt.
    let young = root.join("young.jsonl");
    std::fs::write(&young, "").unwrap();
    let opened = checked(&mut d, "session/open", json!({"path": young}));
    assert_eq!(opened["pending"], true);
    age(&young, 60);
    let r = d.call("session/tree", json!({"path": young}));
    assert_eq!(r["entryCount"], 0);
    let corrupt = d
        .notification("session/didCorrupt", NOTE_WAIT)
        .expect("didCorrupt");
    assert_eq!(corrupt["kind"], "emptyFile");
    d.stop();
}

#[test]
fn a_young_header_only_file_opens_as_a_session_without_entries() {
    let mut live = followed("header.jsonl", 1, |h, e| session_text(h, &e[..0]));
    assert_eq!(live.opened["pending"], false);
    assert_eq!(live.opened["entryCount"], 0);
    append(&live.file, &format!("{}\n", live.entries[0].1));
    let change = live.next_change();
    assert_eq!(change["added"][0]["id"], json!(live.entries[0].0));
    live.d.stop();
}

#[test]
fn a_file_caught_empty_in_the_middle_of_a_rewrite_reloads_once() {
    let live = followed("rewrite.jsonl", 3, |h, e| session_text(h, &e[..2]));
    let (file, mut d) = (live.file, live.d);
    assert_eq!(live.opened["entryCount"], 2);
    // pi's rewrite truncates first: the daemon keeps the last good state meanwhile.
    std::fs::write(&file, "").unwrap();
    let tree = d.call("session/tree", json!({"path": file}));
    assert_eq!(tree["entryCount"], 2, "{tree}");
    assert!(
        d.notification("session/didReload", Duration::from_millis(300))
            .is_none()
    );
    std::fs::write(&file, session_text(&live.header, &live.entries)).unwrap();
    let reload = d
        .notification("session/didReload", NOTE_WAIT)
        .expect("didReload");
    assert_eq!(reload["entryCount"], 3, "{reload}");
    assert!(
        d.notification("session/didReload", Duration::from_millis(500))
            .is_none(),
        "one reload"
    );
    assert!(
        d.notification("session/didCorrupt", Duration::from_millis(10))
            .is_none()
    );
    d.stop();
}
