//! The daemon against what clients really send and what really happens to its files: request
//! ids the framework cannot hold, frames written all at once and the input closed, a parent
//! process that dies, writes through another name, rewrites that keep size and mtime, and
//! close/reopen loops while a writer appends. Each test spawns the real `sessiond serve`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{BIN, Daemon, append, checked, error_of, v3_session, write_v3_session};

/// One frame around `body`, as it is (the text of a request the test writes by hand).
fn raw_frame(body: &str) -> Vec<u8> {
    let mut f = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    f.extend_from_slice(body.as_bytes());
    f
}

/// Runs `sessiond serve --root root` with `input` written at once and then closed; returns every
/// frame body it wrote, as text, and its exit code.
fn serve_all_at_once(root: &Path, input: &[u8]) -> (Vec<String>, Option<i32>) {
    let mut child = Command::new(BIN)
        .args(["serve", "--root"])
        .arg(root)
        .env("SESSIOND_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn sessiond serve");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write");
    drop(stdin);
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_end(&mut out)
        .expect("read");
    let code = child.wait().expect("wait").code();
    (split_frames(&out), code)
}

/// The bodies of the frames in `out`, as text.
fn split_frames(mut out: &[u8]) -> Vec<String> {
    let mut bodies = Vec::new();
    while !out.is_empty() {
        let end = out
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("header end");
        let header = std::str::from_utf8(&out[..end]).expect("header");
        let len: usize = header
            .strip_prefix("Content-Length: ")
            .expect("Content-Length")
            .parse()
            .expect("length");
        let body = &out[end + 4..end + 4 + len];
        bodies.push(String::from_utf8(body.to_vec()).expect("utf-8"));
        out = &out[end + 4 + len..];
    }
    bodies
}

const INITIALIZE: &str =
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;

/// Integer ids beyond `i64` and `u64` come back as the same number text; an id the server does
/// not take (a number beyond a double, a fraction, a boolean, an object) is refused with -32600
/// and `id: null`, and the request does not run (a refused `session/open` leaves the session
/// closed).
#[test]
fn request_ids_are_echoed_exactly_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let file = root.join("s.jsonl");
    write_v3_session(&file, 3);
    let path = file.to_str().unwrap();
    let echoed = [
        "-9223372036854775809",
        "18446744073709551616",
        "9223372036854775808",
        "123456789012345678901234567890",
        "-9223372036854775808",
        "7",
        r#""a string""#,
    ];
    let refused = ["1e400", "-1e400", "1.5", "2e3", "true", r#"{"n":1}"#, "[1]"];
    let mut input = raw_frame(INITIALIZE);
    input.extend(raw_frame(INITIALIZED));
    for id in echoed {
        input.extend(raw_frame(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"session/list","params":{{}}}}"#
        )));
        // An error answer carries the id too.
        input.extend(raw_frame(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"session/nope","params":{{}}}}"#
        )));
    }
    for id in refused {
        input.extend(raw_frame(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"session/open","params":{{"path":"{path}"}}}}"#
        )));
    }
    // Had any refused open run, this close would succeed.
    input.extend(raw_frame(&format!(
        r#"{{"jsonrpc":"2.0","id":99,"method":"session/close","params":{{"path":"{path}"}}}}"#
    )));
    let (bodies, _) = serve_all_at_once(&root, &input);
    for id in echoed {
        let answers: Vec<&String> = bodies
            .iter()
            .filter(|b| b.ends_with(&format!(",\"id\":{id}}}")))
            .collect();
        assert_eq!(answers.len(), 2, "id {id}: {bodies:#?}");
        assert!(answers.iter().any(|b| b.contains("\"sessions\"")), "{id}");
        assert!(answers.iter().any(|b| b.contains("-32601")), "{id}");
    }
    let nulls: Vec<Value> = bodies
        .iter()
        .map(|b| serde_json::from_str::<Value>(b).unwrap())
        .filter(|v| v["id"].is_null())
        .collect();
    assert_eq!(nulls.len(), refused.len(), "{bodies:#?}");
    for (v, id) in nulls.iter().zip(refused) {
        assert_eq!(error_of(v).0, -32600, "{v}");
        assert!(error_of(v).1.contains(id), "{v} names {id}");
    }
    let close = bodies.iter().find(|b| b.ends_with(",\"id\":99}")).unwrap();
    let close: Value = serde_json::from_str(close).unwrap();
    assert_eq!(error_of(&close).0, -33005, "a refused open ran: {close}");
}

/// A client that writes `initialize`, `initialized`, `session/open` and `session/contextAt` at
/// once and closes its input (`printf … | sessiond serve`) gets every request answered, each as
/// if it had waited for the one before: `initialize` first, the open, then the context of the
/// session it opened; `shutdown` and `exit` behind them end the daemon with 0.
#[test]
fn frames_written_at_once_are_all_answered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut input = raw_frame(INITIALIZE);
    input.extend(raw_frame(INITIALIZED));
    let mut paths = Vec::new();
    for n in 0..6 {
        let file = root.join(format!("s{n}.jsonl"));
        write_v3_session(&file, 3 + n);
        let path = file.to_str().unwrap().to_owned();
        for (id, method) in [
            (10 + 2 * n, "session/open"),
            (11 + 2 * n, "session/contextAt"),
        ] {
            input.extend(support::frame(&json!({
                "jsonrpc": "2.0", "id": id, "method": method, "params": {"path": path},
            })));
        }
        paths.push(path);
    }
    let (bodies, code) = serve_all_at_once(&root, &input);
    assert_eq!(code, Some(1), "no shutdown: exit 1");
    let answers: Vec<Value> = bodies
        .iter()
        .map(|b| serde_json::from_str::<Value>(b).unwrap())
        .filter(|v| v.get("method").is_none())
        .collect();
    assert_eq!(answers.len(), 13, "{bodies:#?}");
    assert_eq!(answers[0]["id"], 0);
    assert!(
        answers[0]["result"]["capabilities"].is_object(),
        "{}",
        answers[0]
    );
    for n in 0..6 {
        let open = answers.iter().find(|a| a["id"] == 10 + 2 * n).unwrap();
        assert_eq!(open["result"]["entryCount"], 3 + n, "{open}");
        let context = answers.iter().find(|a| a["id"] == 11 + 2 * n).unwrap();
        assert_eq!(
            context["result"]["messages"].as_array().map(Vec::len),
            Some(3 + n as usize),
            "{context}"
        );
    }

    let mut input = raw_frame(INITIALIZE);
    input.extend(support::frame(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "session/open", "params": {"path": paths[0]},
    })));
    input.extend(raw_frame(r#"{"jsonrpc":"2.0","id":2,"method":"shutdown"}"#));
    input.extend(raw_frame(r#"{"jsonrpc":"2.0","method":"exit"}"#));
    let (bodies, code) = serve_all_at_once(&root, &input);
    assert_eq!(bodies.len(), 3, "{bodies:#?}");
    for (body, id) in bodies.iter().zip([0, 1, 2]) {
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!((v["id"].clone(), v.get("error")), (json!(id), None), "{v}");
    }
    assert_eq!(code, Some(0));
}

/// The process `initialize.processId` names ends while the daemon's input stays open: the
/// daemon exits (1: no `shutdown`) within a few seconds. A pid with no process behind it ends
/// the daemon at once, after answering `initialize`.
#[test]
fn the_daemon_exits_when_the_client_process_named_at_initialize_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Command::new("sleep").arg("60").spawn().expect("sleep");
    let mut d = Daemon::spawn(&[dir.path()]);
    let init = d.request(
        "initialize",
        json!({"capabilities": {}, "processId": client.id()}),
    );
    assert!(init.get("result").is_some(), "{init}");
    d.notify("initialized", json!({}));
    assert!(d.call("session/list", json!({}))["sessions"].is_array());
    std::thread::sleep(Duration::from_millis(300));
    assert!(d.alive(), "exited while the client process runs");
    client.kill().expect("kill");
    client.wait().expect("reap");
    let deadline = Instant::now() + Duration::from_secs(5);
    while d.alive() {
        assert!(
            Instant::now() < deadline,
            "still running 5 s after its client ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The input is still open (the test holds it); the daemon ended on its own.
    assert_eq!(d.wait(), Some(1));

    let mut d = Daemon::spawn(&[dir.path()]);
    let init = d.request(
        "initialize",
        json!({"capabilities": {}, "processId": 1 << 30}),
    );
    assert!(init.get("result").is_some(), "{init}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while d.alive() {
        assert!(
            Instant::now() < deadline,
            "still running for a process that is not"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An open session in a folder of its own, and the daemon following it.
fn open_in_folder(n: usize) -> (tempfile::TempDir, std::path::PathBuf, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("d")).unwrap();
    let file = root.join("d/s.jsonl");
    write_v3_session(&file, n);
    let (mut d, _) = Daemon::start(&[&root]);
    checked(&mut d, "session/open", json!({"path": file}));
    (dir, file, d)
}

/// Lines appended through another name of the file (a hard link in a folder nobody watches, and
/// the file's `/proc/self/fd` name) are announced within 4 s, with no request to prompt it.
#[test]
fn writes_through_another_name_are_announced() {
    let (_dir, file, mut d) = open_in_folder(3);
    let elsewhere = tempfile::tempdir().unwrap();
    let link = elsewhere.path().join("x.jsonl");
    std::fs::hard_link(&file, &link).unwrap();
    let (_, entries) = v3_session(5);
    append(&link, &format!("{}\n", entries[3].1));
    let change = d
        .notification("session/didChange", Duration::from_secs(4))
        .expect("a didChange within 4 s of a write through a hard link");
    assert_eq!(change["added"][0]["id"], entries[3].0.as_str(), "{change}");
    let held = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    let by_fd = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held));
    append(Path::new(&by_fd), &format!("{}\n", entries[4].1));
    let change = d
        .notification("session/didChange", Duration::from_secs(4))
        .expect("a didChange within 4 s of a write through /proc/self/fd");
    assert_eq!(change["added"][0]["id"], entries[4].0.as_str(), "{change}");
    d.stop();
}

/// A file rewritten in place to the same size, its modification time put back (as tools that
/// keep times do): the daemon reloads it (announced within 4 s, unprompted) and serves the new
/// text, not the old tree. Members: a changed last line, a changed header.
#[test]
fn a_same_size_rewrite_that_keeps_the_mtime_is_seen() {
    for (from, to) in [("answer 3", "answer X"), ("4f9c7d0e", "4f9c7d0f")] {
        let (_dir, file, mut d) = open_in_folder(4);
        let before = std::fs::read_to_string(&file).unwrap();
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        let after = before.replacen(from, to, 1);
        assert_ne!(before, after);
        assert_eq!(before.len(), after.len());
        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, after.as_bytes(), 0).unwrap();
        f.set_modified(mtime).unwrap();
        drop(f);
        assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), mtime);
        let reload = d
            .notification("session/didReload", Duration::from_secs(4))
            .unwrap_or_else(|| panic!("no didReload within 4 s after {from} → {to}"));
        assert_eq!(reload["path"], file.to_str().unwrap(), "{reload}");
        let text = d
            .call("session/contextAt", json!({"path": file}))
            .to_string();
        if from.starts_with("answer") {
            assert!(text.contains(to) && !text.contains(from), "{text}");
        }
        d.stop();
    }
}

/// `$/cancelRequest` naming an id beyond `i64` cancels the request that carries it (answered
/// -32800 with the id as written); one naming an id the server does not take, or no request,
/// is ignored, and the daemon goes on answering.
#[test]
fn a_cancel_naming_an_id_beyond_i64_cancels_that_request() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let file = root.join("big.jsonl");
    // About 48 MB: its open is under way when the cancel comes.
    let (header, entries) = v3_session(2);
    let mut text = format!("{header}\n{}\n", entries[0].1);
    let mut parent = entries[0].0.clone();
    for i in 0..1500 {
        let id = format!("b{i:06}");
        let line = json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2025-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "x".repeat(32_000), "timestamp": 1}});
        text.push_str(&format!("{line}\n"));
        parent = id;
    }
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();
    let big = "18446744073709551616";
    let mut input = raw_frame(INITIALIZE);
    input.extend(raw_frame(INITIALIZED));
    input.extend(raw_frame(&format!(
        r#"{{"jsonrpc":"2.0","id":{big},"method":"session/open","params":{{"path":"{path}"}}}}"#
    )));
    for id in [big, "1e400", "-9223372036854775809", "1.5"] {
        input.extend(raw_frame(&format!(
            r#"{{"jsonrpc":"2.0","method":"$/cancelRequest","params":{{"id":{id}}}}}"#
        )));
    }
    input.extend(raw_frame(
        r#"{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}"#,
    ));
    input.extend(raw_frame(r#"{"jsonrpc":"2.0","id":6,"method":"shutdown"}"#));
    input.extend(raw_frame(r#"{"jsonrpc":"2.0","method":"exit"}"#));
    let (bodies, code) = serve_all_at_once(&root, &input);
    let open: Vec<&String> = bodies
        .iter()
        .filter(|b| b.ends_with(&format!(",\"id\":{big}}}")))
        .collect();
    assert_eq!(open.len(), 1, "{bodies:#?}");
    let open: Value = serde_json::from_str(open[0]).unwrap();
    assert_eq!(error_of(&open).0, -32800, "not cancelled: {open}");
    let list = bodies.iter().find(|b| b.ends_with(",\"id\":5}")).unwrap();
    assert!(list.contains("\"sessions\""), "{list}");
    // The cancels are notifications: nothing answers them.
    assert_eq!(bodies.len(), 4, "{bodies:#?}");
    assert_eq!(code, Some(0));
}
