//! Live following that recovers by itself: the real `sessiond serve` over pipes, with the
//! session's directory deleted and recreated, the file moved away and back, a root created
//! after the start, and live events replaced by polling. The tests only wait on
//! notifications between the file operations: no request may be needed to get them.
// Helpers fail the test by panicking, like assertions.
#![allow(clippy::expect_used)]

mod support;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Daemon, Spawn, assert_schema, checked, v3_session};

/// Long enough for polling (one second per round) on a loaded machine.
const NOTE_WAIT: Duration = Duration::from_secs(10);

/// A session file with `n` entries, plus the line of entry `n` (the next one to append).
fn write_session(path: &Path, n: usize) -> (String, String) {
    let (header, entries) = v3_session(n + 1);
    let mut text = header;
    text.push('\n');
    for (_, line) in &entries[..n] {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(path, text).expect("write session");
    let (id, line) = entries[n].clone();
    (id, line)
}

fn append(path: &Path, line: &str) {
    let mut f = OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open for append");
    f.write_all(format!("{line}\n").as_bytes()).expect("append");
}

/// Puts `text` at `path` in one step (written beside it, then renamed), so the daemon never
/// sees a half-written file.
fn publish(path: &Path, text: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// Waits for the next notification `method` about `path`; returns its params and the methods
/// of the notifications about `path` that came before it.
fn wait_for(d: &mut Daemon, method: &str, path: &Path) -> (Value, Vec<String>) {
    let deadline = Instant::now() + NOTE_WAIT;
    let mut before = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(msg) = d.next_message(left) else {
            panic!("no {method} for {} (saw {before:?})", path.display());
        };
        let Some(m) = msg.get("method").and_then(Value::as_str) else {
            continue;
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        if params["path"].as_str() != path.to_str() {
            continue;
        }
        assert_schema(m, "params", &params);
        if m == method {
            return (params, before);
        }
        before.push(m.to_owned());
    }
}

/// A root with one session `proj/s.jsonl` of three entries; returns (tempdir, root, file,
/// next entry's id, next entry's line).
fn fixture() -> (tempfile::TempDir, PathBuf, PathBuf, String, String) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical").join("root");
    std::fs::create_dir_all(root.join("proj")).expect("mkdir");
    let file = root.join("proj/s.jsonl");
    let (id, line) = write_session(&file, 3);
    (tmp, root, file, id, line)
}

#[test]
fn directory_deleted_and_recreated_is_followed_again_without_requests() {
    let (_tmp, root, file, next_id, next_line) = fixture();
    let (mut d, _) = Daemon::start(&[&root]);
    let opened = checked(&mut d, "session/open", json!({"path": file}));
    assert_eq!(opened["liveMode"], "events");
    let text = std::fs::read(&file).expect("read");

    std::fs::remove_dir_all(file.parent().expect("dir")).expect("rm -rf");
    let (missing, before) = wait_for(&mut d, "session/fileMissing", &file);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(missing["revision"]["entryCount"], 3);
    assert!(missing["since"].as_str().is_some_and(|s| s.ends_with('Z')));

    std::fs::create_dir(file.parent().expect("dir")).expect("mkdir");
    publish(&file, &text);
    let (_, before) = wait_for(&mut d, "session/fileRestored", &file);
    assert!(before.is_empty(), "{before:?}");
    let (reload, before) = wait_for(&mut d, "session/didReload", &file);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(reload["reason"], "replaced");
    assert_eq!(reload["entryCount"], 3);

    append(&file, &next_line);
    let (change, before) = wait_for(&mut d, "session/didChange", &file);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(change["added"][0]["id"], next_id.as_str());
    assert_eq!(change["entryCount"], 4);
    assert_eq!(change["revision"]["generation"], 1);
    d.stop();
}

#[test]
fn file_moved_away_and_back_is_followed_again() {
    let (tmp, root, file, next_id, next_line) = fixture();
    let (mut d, _) = Daemon::start(&[&root]);
    checked(&mut d, "session/open", json!({"path": file}));

    // Renamed in its directory.
    let beside = file.with_extension("jsonl.bak");
    std::fs::rename(&file, &beside).expect("rename away");
    wait_for(&mut d, "session/fileMissing", &file);
    std::fs::rename(&beside, &file).expect("rename back");
    wait_for(&mut d, "session/fileRestored", &file);
    // The same file, unchanged: nothing is reloaded, the next append is a change.
    append(&file, &next_line);
    let (change, before) = wait_for(&mut d, "session/didChange", &file);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(change["added"][0]["id"], next_id.as_str());
    assert_eq!(change["revision"]["generation"], 0);

    // Moved out of the watched tree, appended to there, moved back.
    let away = tmp.path().join("away.jsonl");
    std::fs::rename(&file, &away).expect("move away");
    let (missing, _) = wait_for(&mut d, "session/fileMissing", &file);
    assert_eq!(missing["revision"]["entryCount"], 4);
    let (_, entries) = v3_session(5);
    append(&away, &entries[4].1);
    std::fs::rename(&away, &file).expect("move back");
    let (_, before) = wait_for(&mut d, "session/fileRestored", &file);
    assert!(before.is_empty(), "{before:?}");
    let (change, before) = wait_for(&mut d, "session/didChange", &file);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(change["added"][0]["id"], entries[4].0.as_str());
    assert_eq!(change["entryCount"], 5);
    d.stop();
}

#[test]
fn a_root_created_after_the_start_is_listed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let real = tmp.path().canonicalize().expect("canonical").join("real");
    std::fs::create_dir(&real).expect("mkdir");
    // Through a symlinked ancestor: the root's canonical path is known only once it exists.
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let root = link.join("sessions");
    let (mut d, _) = Daemon::start_with(
        &[&root],
        &Spawn {
            capture_stderr: true,
            args: Vec::new(),
            ..Spawn::default()
        },
    );
    let listed = checked(&mut d, "session/list", json!({}));
    assert_eq!(listed["sessions"], json!([]));
    let deadline = Instant::now() + NOTE_WAIT;
    while !d.stderr().contains("does not exist") {
        assert!(Instant::now() < deadline, "no warning: {}", d.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }

    let dir = real.join("sessions/proj");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join("s.jsonl");
    write_session(&file, 2);
    let listed = checked(&mut d, "session/list", json!({}));
    let sessions = listed["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["path"], file.to_str().expect("utf-8"));
    let opened = checked(&mut d, "session/open", json!({"path": sessions[0]["path"]}));
    assert_eq!(opened["entryCount"], 2);
    d.stop();
}

fn polling() -> Spawn<'static> {
    Spawn {
        env: vec![("SESSIOND_WATCH", "poll")],
        ..Spawn::default()
    }
}

#[test]
fn forced_polling_is_reported_and_still_announces_appends() {
    let (_tmp, root, file, next_id, next_line) = fixture();
    let (mut d, _) = Daemon::start_with(&[&root], &polling());
    let opened = checked(&mut d, "session/open", json!({"path": file}));
    assert_eq!(opened["liveMode"], "polling");

    append(&file, &next_line);
    let (change, _) = wait_for(&mut d, "session/didChange", &file);
    assert_eq!(change["added"][0]["id"], next_id.as_str());
    // Two appends within one second: the second is announced too (the poll watcher alone
    // compares whole-second modification times).
    let (_, entries) = v3_session(6);
    append(&file, &entries[4].1);
    wait_for(&mut d, "session/didChange", &file);
    append(&file, &entries[5].1);
    let (change, _) = wait_for(&mut d, "session/didChange", &file);
    assert_eq!(change["added"][0]["id"], entries[5].0.as_str());
    d.stop();
}

#[test]
fn forced_polling_follows_a_recreated_directory() {
    let (_tmp, root, file, next_id, next_line) = fixture();
    let (mut d, _) = Daemon::start_with(&[&root], &polling());
    checked(&mut d, "session/open", json!({"path": file}));
    let text = std::fs::read(&file).expect("read");

    std::fs::remove_dir_all(file.parent().expect("dir")).expect("rm -rf");
    wait_for(&mut d, "session/fileMissing", &file);
    std::fs::create_dir(file.parent().expect("dir")).expect("mkdir");
    publish(&file, &text);
    wait_for(&mut d, "session/fileRestored", &file);
    wait_for(&mut d, "session/didReload", &file);
    append(&file, &next_line);
    let (change, _) = wait_for(&mut d, "session/didChange", &file);
    assert_eq!(change["added"][0]["id"], next_id.as_str());
    d.stop();
}

/// `session/close` is the last word of an open: while a writer keeps appending, no notification
/// about the session follows the close's answer, and a reopen sent right behind the close (not
/// waiting for its answer) counts every entry exactly once.
#[test]
fn nothing_of_a_closed_open_follows_the_close_and_a_pipelined_reopen_counts_once() {
    let (_tmp, root, file, _, _) = fixture();
    let (_, entries) = v3_session(600);
    let (mut d, _) = Daemon::start(&[&root]);
    checked(&mut d, "session/open", json!({"path": file}));
    let writer = {
        let file = file.clone();
        let lines: Vec<String> = entries[3..].iter().map(|(_, l)| l.clone()).collect();
        std::thread::spawn(move || {
            for line in lines {
                append(&file, &line);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    wait_for(&mut d, "session/didChange", &file);

    // Close while appends arrive: everything of this open comes before the answer.
    let close = d.request("session/close", json!({"path": file}));
    assert!(close.get("error").is_none(), "close failed: {close}");
    d.inbox.clear();
    let quiet_until = Instant::now() + Duration::from_millis(300);
    while let Some(msg) = d.next_message(quiet_until.saturating_duration_since(Instant::now())) {
        assert!(
            msg["params"]["path"].as_str() != file.to_str(),
            "a notification of the closed open came after the close's answer: {msg}"
        );
    }

    // Close and reopen pipelined: the reopen's count plus what later changes add is the file.
    let id = d.next_request_id();
    d.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "session/open", "params": {"path": file}}),
    );
    let reopened = d.response(&json!(id));
    let mut count = reopened["result"]["entryCount"]
        .as_u64()
        .expect("entryCount");
    let close_id = d.next_request_id();
    d.send(&json!({"jsonrpc": "2.0", "id": close_id, "method": "session/close", "params": {"path": file}}));
    d.send(&json!({"jsonrpc": "2.0", "id": close_id + 1, "method": "session/open", "params": {"path": file}}));
    let reopened = d.response(&json!(close_id + 1));
    let early: Vec<Value> = d.inbox.drain(..).collect();
    let closed_at = early
        .iter()
        .position(|m| m.get("id") == Some(&json!(close_id)))
        .expect("the close answered before the reopen");
    // Nothing of the session comes between the close's answer and the reopen's.
    let after_open = reopened["result"]["entryCount"]
        .as_u64()
        .expect("entryCount");
    assert!(after_open >= count);
    count = after_open;
    let mut seen = std::collections::HashSet::new();
    let judge = |msg: &Value, count: &mut u64, seen: &mut std::collections::HashSet<String>| {
        if msg["method"] != "session/didChange" || msg["params"]["path"].as_str() != file.to_str() {
            return;
        }
        let p = &msg["params"];
        let n = p["entryCount"].as_u64().expect("entryCount");
        let added = p["added"].as_array().expect("added");
        assert_eq!(n, *count + added.len() as u64, "overlapping change: {msg}");
        for a in added {
            assert!(
                seen.insert(a["id"].as_str().unwrap_or_default().to_owned()),
                "{a} twice"
            );
        }
        *count = n;
    };
    for msg in &early[closed_at + 1..] {
        assert!(
            msg["params"]["path"].as_str() != file.to_str(),
            "between the close's answer and the reopen's: {msg}"
        );
    }
    writer.join().expect("writer");
    let total = std::fs::read_to_string(&file)
        .expect("read")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count() as u64
        - 1;
    let deadline = Instant::now() + NOTE_WAIT;
    while count < total {
        let msg = d
            .next_message(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|| panic!("stuck at {count} of {total} entries"));
        judge(&msg, &mut count, &mut seen);
    }
    assert_eq!(count, total);
    d.stop();
}

/// Many close/reopen cycles, each pipelined (the reopen sent right behind the close) while a
/// writer appends: between a close's answer and the reopen's answer no change of the session
/// arrives (the closed open is silent, the new one announces nothing its answer holds), and
/// after the answer every change adds exactly the entries after the answer's count, each once.
/// Any notification of a closed open, or of an earlier open of the path, fails it.
#[test]
fn pipelined_close_and_reopen_cycles_announce_only_the_current_open() {
    const CYCLES: i64 = 120;
    let (_tmp, root, file, _, _) = fixture();
    let (_, entries) = v3_session(3 + 2000);
    let (mut d, _) = Daemon::start(&[&root]);
    let opened = checked(&mut d, "session/open", json!({"path": file}));
    let mut count = opened["entryCount"].as_u64().expect("entryCount");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (file, stop) = (file.clone(), stop.clone());
        let lines: Vec<String> = entries[3..].iter().map(|(_, l)| l.clone()).collect();
        std::thread::spawn(move || {
            for line in lines {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                append(&file, &line);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let path = file.to_str().expect("utf-8 path").to_owned();
    let mut seen = std::collections::HashSet::new();
    let mut judged = 0u64;
    /// A change of the open session: it adds the entries after `count`, each announced once.
    fn judge(
        p: &Value,
        count: &mut u64,
        seen: &mut std::collections::HashSet<String>,
        judged: &mut u64,
        why: &str,
    ) {
        let n = p["entryCount"].as_u64().expect("entryCount");
        let added = p["added"].as_array().expect("added");
        assert_eq!(
            n,
            *count + added.len() as u64,
            "{why}: a change that does not follow the count {count}: {p}"
        );
        for a in added {
            let id = a["id"].as_str().unwrap_or_default().to_owned();
            assert!(seen.insert(id), "{why}: {a} announced twice");
        }
        *count = n;
        *judged += 1;
    }
    let mut id = 1_000_000;
    for cycle in 0..CYCLES {
        d.send(&json!({"jsonrpc": "2.0", "id": id, "method": "session/close", "params": {"path": file}}));
        d.send(&json!({"jsonrpc": "2.0", "id": id + 1, "method": "session/open", "params": {"path": file}}));
        let mut closed = false;
        loop {
            let msg = d.next_message(NOTE_WAIT).expect("the reopen's answer");
            if msg.get("id") == Some(&json!(id)) {
                assert!(msg.get("error").is_none(), "close failed: {msg}");
                closed = true;
                continue;
            }
            if msg.get("id") == Some(&json!(id + 1)) {
                assert!(
                    closed,
                    "cycle {cycle}: the reopen answered before the close"
                );
                count = msg["result"]["entryCount"].as_u64().expect("entryCount");
                seen.clear();
                break;
            }
            if msg["params"]["path"].as_str() != Some(path.as_str()) {
                continue;
            }
            assert!(
                !closed,
                "cycle {cycle}: {} between the close's answer and the reopen's: {msg}",
                msg["method"]
            );
            if msg["method"] == "session/didChange" {
                judge(
                    &msg["params"],
                    &mut count,
                    &mut seen,
                    &mut judged,
                    "before the close's answer",
                );
            }
        }
        // Let some appends be announced by this open before the next cycle.
        let until = Instant::now() + Duration::from_millis(u64::try_from(cycle % 7).unwrap_or(0));
        while let Some(msg) = d.next_message(until.saturating_duration_since(Instant::now())) {
            if msg["method"] == "session/didChange"
                && msg["params"]["path"].as_str() == Some(path.as_str())
            {
                judge(
                    &msg["params"],
                    &mut count,
                    &mut seen,
                    &mut judged,
                    "after the reopen's answer",
                );
            }
        }
        id += 2;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().expect("writer");
    let total = std::fs::read_to_string(&file)
        .expect("read")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count() as u64
        - 1;
    let deadline = Instant::now() + NOTE_WAIT;
    while count < total {
        let msg = d
            .next_message(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|| panic!("stuck at {count} of {total} entries"));
        if msg["method"] == "session/didChange"
            && msg["params"]["path"].as_str() == Some(path.as_str())
        {
            judge(
                &msg["params"],
                &mut count,
                &mut seen,
                &mut judged,
                "at the end",
            );
        }
    }
    assert_eq!(count, total);
    eprintln!("{CYCLES} close/reopen cycles; {judged} changes judged; {total} entries");
    d.stop();
}
