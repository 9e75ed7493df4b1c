//! The write subcommands end to end: what they write, what they refuse (with the documented
//! exit code and not one byte changed), torn-tail repair, salvage, crash safety of publishing
//! and the in-process reservation of new session ids.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use common::{copy_into, jsonl_files, leaf_of, repo, run};
use serde_json::Value;

const BRANCHED: &str = "tests/data/synthetic/branches-labels.jsonl";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn last_line(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

fn age(p: &Path, by: Duration) {
    let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
    f.set_modified(SystemTime::now() - by).unwrap();
}

fn check_ok(p: &Path) {
    let (code, out, err) = run(&["check", s(p), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tornTail"], false, "{out}");
}

#[test]
fn label_name_branch_append_write_what_pi_writes() {
    let dir = tempfile::tempdir().unwrap();
    let f = copy_into(dir.path(), &repo(BRANCHED));
    let leaf = leaf_of(&f);
    assert_eq!(leaf, "b200000d");

    let (code, out, err) = run(&[
        "label",
        s(&f),
        "b2000002",
        "bookmark",
        "--expected-leaf",
        &leaf,
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let w: Value = serde_json::from_str(&out).unwrap();
    let e = last_line(&f);
    let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["type", "id", "parentId", "timestamp", "targetId", "label"]
    );
    assert_eq!(e["id"], w["id"]);
    assert_eq!(e["parentId"], "b200000d");
    assert_eq!(e["label"], "bookmark");
    let id = e["id"].as_str().unwrap();
    assert!(
        id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    let ts = e["timestamp"].as_str().unwrap();
    assert!(ts.len() == 24 && ts.ends_with('Z'), "{ts}");

    let (code, out, _) = run(&["tree", s(&f), "--json"]);
    assert_eq!(code, 0);
    let tree: Value = serde_json::from_str(&out).unwrap();
    let node = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "b2000002")
        .unwrap();
    assert_eq!(node["label"], "bookmark");

    // No LABEL clears: the label key is omitted, as pi writes it.
    let (code, _, err) = run(&["label", s(&f), "b2000002", "--clear", "--expected-leaf", id]);
    assert_eq!(code, 0, "{err}");
    let e = last_line(&f);
    assert!(e.get("label").is_none(), "{e}");

    let leaf = e["id"].as_str().unwrap().to_owned();
    let (code, _, err) = run(&["name", s(&f), "  My\r\nsession\n", "--expected-leaf", &leaf]);
    assert_eq!(code, 0, "{err}");
    let e = last_line(&f);
    assert_eq!(e["type"], "session_info");
    assert_eq!(e["name"], "My session");

    let leaf = e["id"].as_str().unwrap().to_owned();
    let (code, _, err) = run(&[
        "branch",
        s(&f),
        "b2000002",
        "--summary",
        "Tried express",
        "--details",
        r#"{"k":1}"#,
        "--expected-leaf",
        &leaf,
    ]);
    assert_eq!(code, 0, "{err}");
    let e = last_line(&f);
    let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "type",
            "id",
            "parentId",
            "timestamp",
            "fromId",
            "summary",
            "details"
        ]
    );
    assert_eq!(e["parentId"], "b2000002");
    assert_eq!(e["fromId"], leaf.as_str());

    let leaf = e["id"].as_str().unwrap().to_owned();
    let (code, _, err) = run(&[
        "append",
        s(&f),
        "--entry",
        r#"{"type":"message","message":{"role":"user","content":"hi"}}"#,
        "--expected-leaf",
        &leaf,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(last_line(&f)["parentId"], leaf.as_str());
    check_ok(&f);
}

/// Every refusal: its exit code, its error kind, and the file unchanged byte for byte.
#[test]
fn bad_input_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let f = copy_into(dir.path(), &repo(BRANCHED));
    let before = std::fs::read(&f).unwrap();
    let leaf = "b200000d";
    // (command, its arguments after the file, the expected leaf, exit code, error kind)
    let cases: &[(&str, &[&str], &str, i32, &str)] = &[
        ("label", &["nope", "x"], leaf, 2, "unknownEntry"),
        ("label", &["b2000002", "x"], "b2000001", 4, "conflict"),
        ("label", &["b2000002", "x"], "null", 4, "conflict"),
        (
            "branch",
            &["nope", "--summary", "s"],
            leaf,
            2,
            "unknownEntry",
        ),
        (
            "append",
            &[
                "--entry",
                r#"{"type":"custom","customType":"x"}"#,
                "--parent",
                "nope",
            ],
            leaf,
            2,
            "unknownEntry",
        ),
        (
            "append",
            &["--entry", r#"{"customType":"x"}"#],
            leaf,
            2,
            "invalidEntry",
        ),
        (
            "append",
            &["--entry", r#"{"type":"message","message":"hi"}"#],
            leaf,
            2,
            "invalidEntry",
        ),
        (
            "append",
            &[
                "--entry",
                r#"{"type":"label","targetId":"nope","label":"x"}"#,
            ],
            leaf,
            2,
            "unknownEntry",
        ),
        (
            "append",
            &[
                "--entry",
                r#"{"type":"custom","id":"b2000001","customType":"x"}"#,
            ],
            leaf,
            2,
            "invalidEntry",
        ),
        ("append", &["--entry", "[1]"], leaf, 2, "invalidEntry"),
    ];
    for &(command, rest, expected, code, kind) in cases {
        let mut args = vec![command, s(&f)];
        args.extend(rest);
        args.extend(["--expected-leaf", expected, "--json"]);
        let (got, out, err) = run(&args);
        assert_eq!(got, code, "{args:?}: {out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["error"]["kind"], kind, "{args:?}: {out}");
        assert_eq!(
            std::fs::read(&f).unwrap(),
            before,
            "{args:?} changed the file"
        );
    }
    // A conflict names the current leaf and what was added since the expected one.
    let (_, out, _) = run(&[
        "label",
        s(&f),
        "b2000002",
        "x",
        "--expected-leaf",
        "b200000b",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["error"]["currentLeafId"], "b200000d");
    assert_eq!(
        v["error"]["added"],
        serde_json::json!(["b200000c", "b200000d"])
    );

    // Fork: unknown id, before a non-user entry: exit 2 and no new file.
    let out_dir = dir.path().join("forks");
    std::fs::create_dir(&out_dir).unwrap();
    for (args, kind) in [
        (vec!["fork", s(&f), "nope"], "unknownEntry"),
        (
            vec!["fork", s(&f), "b2000002", "--before"],
            "notAUserMessage",
        ),
    ] {
        let mut args = args;
        args.extend(["--out", s(&out_dir), "--json"]);
        let (code, out, _) = run(&args);
        assert_eq!(code, 2, "{out}");
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap()["error"]["kind"],
            kind
        );
    }
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 0);

    // Version-1 files are never appended to (fork them first).
    let v1 = copy_into(
        dir.path(),
        &repo("tests/data/synthetic/v1-linear-compaction.jsonl"),
    );
    let v1_before = std::fs::read(&v1).unwrap();
    let leaf = leaf_of(&v1);
    let (code, out, _) = run(&["name", s(&v1), "x", "--expected-leaf", &leaf, "--json"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("unsupportedVersion"), "{out}");
    assert_eq!(std::fs::read(&v1).unwrap(), v1_before);
}

#[test]
fn young_torn_tail_is_busy_and_an_old_one_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let f = copy_into(dir.path(), &repo("tests/data/corrupt/torn-tail.jsonl"));
    let before = std::fs::read(&f).unwrap();
    let (code, out, _) = run(&["check", s(&f), "--json"]);
    assert_eq!(code, 0);
    let torn: Value = serde_json::from_str::<Value>(&out).unwrap()["tornTailAt"].clone();
    let offset = torn["offset"].as_u64().unwrap() as usize;
    let leaf = leaf_of(&f);

    let (code, out, _) = run(&["name", s(&f), "n", "--expected-leaf", &leaf, "--json"]);
    assert_eq!(code, 7, "{out}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["error"]["kind"],
        "busy"
    );
    assert_eq!(std::fs::read(&f).unwrap(), before);

    age(&f, Duration::from_secs(10));
    let (code, out, err) = run(&["name", s(&f), "n", "--expected-leaf", &leaf, "--json"]);
    assert_eq!(code, 0, "{err}");
    let w: Value = serde_json::from_str(&out).unwrap();
    let sidecar = PathBuf::from(w["repaired"]["sidecar"].as_str().unwrap());
    assert_eq!(
        sidecar,
        PathBuf::from(format!("{}.torn-{offset}.bak", f.display()))
    );
    assert_eq!(std::fs::read(&sidecar).unwrap(), &before[offset..]);
    let after = std::fs::read(&f).unwrap();
    assert_eq!(&after[..offset], &before[..offset]);
    let new_line: Value = serde_json::from_slice(&after[offset..after.len() - 1]).unwrap();
    assert_eq!(new_line["type"], "session_info");
    assert_eq!(new_line["parentId"], leaf.as_str());
    check_ok(&f);

    // A second repair at the same offset never overwrites the first sidecar.
    std::fs::write(&f, &before).unwrap();
    age(&f, Duration::from_secs(10));
    let (code, out, err) = run(&["name", s(&f), "n", "--expected-leaf", &leaf, "--json"]);
    assert_eq!(code, 0, "{err}");
    let w: Value = serde_json::from_str(&out).unwrap();
    assert_ne!(
        w["repaired"]["sidecar"].as_str().unwrap(),
        sidecar.to_str().unwrap()
    );
    assert_eq!(std::fs::read(&sidecar).unwrap(), &before[offset..]);
}

#[test]
fn an_old_complete_line_without_newline_is_ended_by_the_append() {
    let dir = tempfile::tempdir().unwrap();
    let f = copy_into(
        dir.path(),
        &repo("tests/data/corrupt/complete-final-line-without-newline.jsonl"),
    );
    let before = std::fs::read(&f).unwrap();
    let leaf = leaf_of(&f);
    age(&f, Duration::from_secs(10));
    let (code, _, err) = run(&["name", s(&f), "n", "--expected-leaf", &leaf]);
    assert_eq!(code, 0, "{err}");
    let after = std::fs::read(&f).unwrap();
    assert_eq!(&after[..before.len()], &before[..]);
    assert_eq!(after[before.len()], b'\n');
    assert_eq!(last_line(&f)["parentId"], leaf.as_str());
    check_ok(&f);
}

#[test]
fn corrupt_sessions_are_never_written_and_salvage_makes_a_clean_copy() {
    for name in [
        "invalid-json-middle.jsonl",
        "missing-parent.jsonl",
        "duplicate-id.jsonl",
        "parent-cycle-loop.jsonl",
        "not-an-object.jsonl",
        "untyped-entry.jsonl",
        "type-not-a-string.jsonl",
        "parent-not-a-string.jsonl",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let f = copy_into(dir.path(), &repo(&format!("tests/data/corrupt/{name}")));
        let before = std::fs::read(&f).unwrap();
        for args in [
            vec!["name", s(&f), "n", "--expected-leaf", "c0000001", "--json"],
            vec![
                "label",
                s(&f),
                "c0000001",
                "x",
                "--expected-leaf",
                "c0000001",
                "--json",
            ],
            vec![
                "append",
                s(&f),
                "--entry",
                r#"{"type":"custom","customType":"x"}"#,
                "--expected-leaf",
                "c0000001",
                "--json",
            ],
        ] {
            let (code, out, _) = run(&args);
            assert_eq!(code, 3, "{name} {args:?}: {out}");
            assert_eq!(
                serde_json::from_str::<Value>(&out).unwrap()["error"]["kind"],
                "corrupt"
            );
        }
        let out_dir = dir.path().join("out");
        std::fs::create_dir(&out_dir).unwrap();
        let (code, out, err) = run(&["salvage", s(&f), "--out", s(&out_dir), "--json"]);
        assert_eq!(code, 0, "{name}: {err}");
        let report: Value = serde_json::from_str(&out).unwrap();
        let salvaged = PathBuf::from(report["path"].as_str().unwrap());
        assert_eq!(jsonl_files(&out_dir), vec![salvaged.clone()]);
        check_ok(&salvaged);
        assert_eq!(
            std::fs::read(&f).unwrap(),
            before,
            "{name}: the original changed"
        );
        let dropped = report["dropped"].as_array().unwrap().len();
        let reattached = report["reattached"].as_array().unwrap().len();
        assert!(dropped + reattached > 0, "{name}: nothing reported: {out}");
        // Everything not reported as dropped is in the new file.
        let (_, tree, _) = run(&["tree", s(&salvaged), "--json"]);
        let tree: Value = serde_json::from_str(&tree).unwrap();
        assert_eq!(
            tree["entryCount"].as_u64().unwrap() as usize,
            report["kept"].as_u64().unwrap() as usize
        );
    }
}

/// `s.jsonl` in `dir`: a header, a root user message `a`, then `lines`.
fn salvage_source(dir: &Path, lines: &[&str]) -> PathBuf {
    let f = dir.join("s.jsonl");
    let head = [
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"x"}}"#,
    ];
    let all: Vec<&str> = head.iter().chain(lines).copied().collect();
    common::write_lines(&f, &all);
    f
}

/// `sessiond salvage FILE --json`, which must succeed, and its report: `kept` entries kept, one
/// dropped at `dropped_line`, the entries given another parent as (id, was, now); the new file
/// reads strictly. Returns the report and the new file.
fn salvage(
    f: &Path,
    kept: u64,
    dropped_line: u64,
    reattached: &[(&str, &str, Option<&str>)],
) -> (Value, PathBuf) {
    let (code, out, err) = run(&["salvage", s(f), "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["kept"], kept, "{r}");
    assert_eq!(r["dropped"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["dropped"][0]["line"], dropped_line, "{r}");
    let reattached: Vec<Value> = reattached
        .iter()
        .map(|(id, was, now)| serde_json::json!({"id": id, "was": was, "now": now}))
        .collect();
    assert_eq!(r["reattached"], Value::Array(reattached), "{r}");
    let salvaged = PathBuf::from(r["path"].as_str().unwrap());
    check_ok(&salvaged);
    (r, salvaged)
}

#[test]
fn salvage_reattaches_to_the_nearest_surviving_ancestor() {
    let dir = tempfile::tempdir().unwrap();
    let f = salvage_source(
        dir.path(),
        &[
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":"not an object"}"#,
            r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"y"}}"#,
            r#"{"type":"message","id":"d","parentId":"zz","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"user","content":"z"}}"#,
        ],
    );
    let (r, salvaged) = salvage(&f, 3, 3, &[("c", "b", Some("a")), ("d", "zz", None)]);
    assert_eq!(r["dropped"][0]["kind"], "invalidEntry");
    assert_eq!(salvaged.parent(), f.parent());
}

/// Entries a lenient read keeps though pi's format does not allow them: one without a string
/// `type` is left out of the salvaged file and its child moves up to its parent; one whose
/// `parentId` is a number becomes the root pi makes of it. The new file reads strictly.
#[test]
fn salvage_resolves_the_irregular_entries_a_lenient_read_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let f = salvage_source(
        dir.path(),
        &[
            r#"{"id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z"}"#,
            r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"y"}}"#,
            r#"{"type":"message","id":"d","parentId":7,"timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"user","content":"z"}}"#,
            r#"{"type":"message","id":"e","parentId":"d","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"user","content":"w"}}"#,
        ],
    );
    let (code, out, _) = run(&["context", s(&f), "--json", "--allow-corrupt"]);
    assert_eq!(code, 0, "{out}");
    let lenient: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(lenient["entryIds"], serde_json::json!(["d", "e"]));
    let (code, out, _) = run(&["context", s(&f), "--leaf", "c", "--json", "--allow-corrupt"]);
    assert_eq!(code, 0, "{out}");
    let lenient: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(lenient["entryIds"], serde_json::json!(["a", "b", "c"]));

    let (r, salvaged) = salvage(&f, 4, 3, &[("c", "b", Some("a")), ("d", "7", None)]);
    assert_eq!(r["dropped"][0]["id"], "b");
    let (_, out, _) = run(&["context", s(&salvaged), "--leaf", "c", "--json"]);
    let strict: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(strict["entryIds"], serde_json::json!(["a", "c"]));
}

/// kill -9 in the middle of publishing a fork: the destination is absent or complete.
#[test]
fn a_killed_fork_leaves_no_file_or_a_whole_one() {
    let dir = tempfile::tempdir().unwrap();
    let src = repo("examples/pi-v3-branched.jsonl");
    let expected_lines = {
        let out = dir.path().join("reference");
        std::fs::create_dir(&out).unwrap();
        let (code, _, err) = run(&["fork", s(&src), "de19adb3", "--out", s(&out)]);
        assert_eq!(code, 0, "{err}");
        std::fs::read_to_string(&jsonl_files(&out)[0])
            .unwrap()
            .lines()
            .count()
    };
    // Killed while paused between the fsync of the temp file and the rename.
    let out = dir.path().join("paused");
    std::fs::create_dir(&out).unwrap();
    let mut child = common::bin()
        .args(["fork", s(&src), "de19adb3", "--out", s(&out)])
        .env(sessiond::storage::publish::TEST_PAUSE_ENV, "5000")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::fs::read_dir(&out).unwrap().count() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no temp file appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        jsonl_files(&out).is_empty(),
        "a session file appeared: {:?}",
        jsonl_files(&out)
    );

    // Killed at arbitrary moments.
    for i in 0..12u64 {
        let out = dir.path().join(format!("k{i}"));
        std::fs::create_dir(&out).unwrap();
        let mut child = common::bin()
            .args(["fork", s(&src), "de19adb3", "--out", s(&out)])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(i * 7));
        let _ = child.kill();
        child.wait().unwrap();
        for f in jsonl_files(&out) {
            check_ok(&f);
            let n = std::fs::read_to_string(&f).unwrap().lines().count();
            assert_eq!(n, expected_lines, "{} is partial", f.display());
        }
    }
}

const RESERVATION_CHILD: &str = "SESSIOND_TEST_RESERVATION_CHILD";

/// Two concurrent forks to the same `{cwd, id}` in one process: exactly one wins. Runs in a
/// child process so that the publish pause (which keeps both forks in flight) is set there only.
#[test]
fn concurrent_forks_to_one_id_have_one_winner() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "reservation_child", "--nocapture"])
        .env(RESERVATION_CHILD, "1")
        .env(sessiond::storage::publish::TEST_PAUSE_ENV, "300")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("reservation child: 1 ok, 1 reserved"),
        "{text}"
    );
}

#[test]
fn reservation_child() {
    use sessiond::dialect::pi::fork::Position;
    use sessiond::storage::publish::Reservations;
    use sessiond::storage::publish::Taken;
    use sessiond::storage::writer::{self, ForkRequest, WriteError};
    if std::env::var_os(RESERVATION_CHILD).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = repo(BRANCHED);
    let session = writer::open_for_write(&src).unwrap();
    let reservations = Reservations::new();
    // A fork into the same folder under the same new session id.
    let fork = || {
        let request = ForkRequest {
            entry_id: "b2000005",
            position: Position::At,
            target_dir: Some(dir.path()),
            session_id: Some("same-id"),
        };
        writer::fork(&src, &session.tree, request, &reservations)
    };
    let barrier = std::sync::Barrier::new(2);
    let results: Vec<Result<writer::Forked, WriteError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    fork()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let reserved = results
        .iter()
        .filter(|r| matches!(r, Err(WriteError::Taken(Taken::Reserved { .. }))))
        .count();
    eprintln!("reservation child: {ok} ok, {reserved} reserved");
    assert_eq!(jsonl_files(dir.path()).len(), 1);
    // Afterwards the id is on disk, so a third fork is refused too.
    let third = fork();
    assert!(
        matches!(third, Err(WriteError::Taken(Taken::Exists { .. }))),
        "{third:?}"
    );
}
