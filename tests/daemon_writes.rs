//! Integration tests of the daemon's write methods over JSON-RPC with the real binary: fork
//! equals the CLI's fork, appends fenced by `expectedLeafId` (a stale view writes nothing),
//! one `session/didChange` per written entry, compaction (dry run, commit, context after it
//! equal to pi's loader), the retention gate, and paths outside the roots. Every result and
//! params object is validated against `protocol/schema/`.
// Helpers fail the test by panicking, like assertions.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::{
    Daemon, assert_schema, checked, cli_json, common, error_of, repo, v3_session, write_v3_session,
};

const NOTE_WAIT: Duration = Duration::from_secs(10);
/// How long to listen for a duplicate notification after a write was announced.
const QUIET: Duration = Duration::from_millis(1500);

fn copy_to(dir: &Path, rel: &str) -> PathBuf {
    let to = dir.join(Path::new(rel).file_name().expect("file name"));
    std::fs::copy(repo().join(rel), &to).expect("copy fixture");
    to
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A scratch directory holding `s.jsonl`, a version-3 session of `n` entries ([`v3_session`]):
/// the directory (kept alive by the caller), the file and the entries' `(id, line)`.
/// A daemon over `root` with `file` open: the daemon, the file's path and the open's result.
fn opened(root: &Path, file: &Path) -> (Daemon, String, Value) {
    let (mut d, _) = Daemon::start(&[root]);
    let path = s(file).to_owned();
    let open = checked(&mut d, "session/open", json!({"path": path}));
    (d, path, open)
}

/// The branched example copied to a temporary folder and open in a daemon over it: the folder,
/// the file, the daemon, the file's path and its leaf.
fn branched_open() -> (tempfile::TempDir, PathBuf, Daemon, String, Value) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = copy_to(tmp.path(), "examples/pi-v3-branched.jsonl");
    let (d, path, open) = opened(tmp.path(), &file);
    let leaf = open["leafId"].clone();
    (tmp, file, d, path, leaf)
}

fn session_file(n: usize) -> (tempfile::TempDir, PathBuf, Vec<(String, String)>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("s.jsonl");
    let entries = write_v3_session(&file, n);
    (tmp, file, entries)
}

/// Every `session/didChange` that arrives within `quiet` of the previous one: id → count.
fn drain_changes(d: &mut Daemon, quiet: Duration) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    while let Some(n) = d.notification("session/didChange", quiet) {
        for a in n["added"].as_array().expect("added") {
            *seen
                .entry(a["id"].as_str().expect("id").to_owned())
                .or_default() += 1;
        }
    }
    seen
}

/// Waits for the `session/didChange` that announces `id` and checks it announces only `id`.
fn announced(d: &mut Daemon, path: &str, id: &str) -> Value {
    let n = d
        .notification("session/didChange", NOTE_WAIT)
        .unwrap_or_else(|| panic!("no didChange for {id}"));
    assert_schema("session/didChange", "params", &n);
    assert_eq!(n["path"], json!(path));
    let added: Vec<&str> = n["added"]
        .as_array()
        .expect("added")
        .iter()
        .map(|a| a["id"].as_str().expect("id"))
        .collect();
    assert_eq!(added, [id], "{n}");
    assert_eq!(n["leafId"], json!(id));
    n
}

/// Replaces the ids of re-chained labels (random in each fork) by their position.
fn normalize_labels(text: &str, new_labels: &Value) -> String {
    let mut out = text.to_owned();
    for (i, id) in new_labels.as_array().expect("newLabels").iter().enumerate() {
        out = out.replace(id.as_str().expect("id"), &format!("label#{i}"));
    }
    out
}

/// The file without its header's `id` and `timestamp`, label ids normalized.
fn fork_body(path: &Path, new_labels: &Value) -> (Value, String) {
    let text = std::fs::read_to_string(path).expect("read fork");
    let (head, rest) = text.split_once('\n').expect("header line");
    let mut header: Value = serde_json::from_str(head).expect("header");
    let obj = header.as_object_mut().expect("object");
    obj.remove("id");
    obj.remove("timestamp");
    (header, normalize_labels(rest, new_labels))
}

#[test]
fn fork_writes_what_the_cli_writes_and_stays_inside_the_roots() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    for d in [
        &root,
        &outside,
        &root.join("by-daemon"),
        &root.join("by-cli"),
    ] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let (mut d, init) = Daemon::start(&[&root]);
    let methods = &init["result"]["capabilities"]["experimental"]["sessiond"]["methods"];
    for m in [
        "session/fork",
        "session/salvage",
        "session/label",
        "session/setName",
        "session/branch",
        "session/append",
        "session/prepareCompaction",
        "session/compact",
    ] {
        assert!(
            methods.as_array().expect("methods").contains(&json!(m)),
            "{m} is not advertised"
        );
    }

    for (rel, position) in [
        ("tests/data/fork/labels-in-path.jsonl", "at"),
        ("examples/pi-v3-branched.jsonl", "at"),
        ("examples/pi-v3-branched.jsonl", "before"),
    ] {
        let file = copy_to(&root, rel);
        let path = s(&file);
        let open = checked(&mut d, "session/open", json!({"path": path}));
        // `before` needs a user message: the newest one on the default path.
        let entry = if position == "at" {
            open["leafId"].as_str().expect("leaf").to_owned()
        } else {
            let ctx = d.call(
                "session/contextAt",
                json!({"path": path, "fields": "previews"}),
            );
            let roles = ctx["messages"].as_array().expect("messages");
            let i = roles
                .iter()
                .rposition(|m| m["role"] == "user")
                .expect("a user message");
            ctx["messageEntryIds"][i].as_str().expect("id").to_owned()
        };
        let before = std::fs::read(&file).expect("read");
        let ours = checked(
            &mut d,
            "session/fork",
            json!({"path": path, "entryId": entry, "position": position,
                   "targetDir": s(&root.join("by-daemon"))}),
        );
        let mut args = vec!["fork", path, entry.as_str(), "--json", "--out"];
        let cli_dir = root.join("by-cli");
        args.push(s(&cli_dir));
        if position == "before" {
            args.push("--before");
        }
        let cli = cli_json(&args);
        assert_eq!(
            std::fs::read(&file).expect("read"),
            before,
            "source unchanged"
        );
        assert_ne!(ours["path"], cli["path"]);
        for k in ["leafId", "entryCount", "droppedLabels", "rewritten"] {
            assert_eq!(
                normalize_labels(&ours[k].to_string(), &ours["newLabels"]),
                normalize_labels(&cli[k].to_string(), &cli["newLabels"]),
                "{rel} {position}: {k}"
            );
        }
        assert_eq!(
            ours["newLabels"].as_array().map(Vec::len),
            cli["newLabels"].as_array().map(Vec::len)
        );
        let ours_body = fork_body(
            Path::new(ours["path"].as_str().unwrap()),
            &ours["newLabels"],
        );
        let cli_body = fork_body(Path::new(cli["path"].as_str().unwrap()), &cli["newLabels"]);
        assert_eq!(
            ours_body, cli_body,
            "{rel} {position}: the forked files differ"
        );
        assert!(
            ours["path"]
                .as_str()
                .unwrap()
                .starts_with(s(&root.join("by-daemon")))
        );
        d.call("session/close", json!({"path": path}));
    }

    // targetDir outside the roots: refused, nothing created there.
    let file = copy_to(&root, "examples/pi-v3-branched.jsonl");
    let path = s(&file);
    let open = d.call("session/open", json!({"path": path}));
    let leaf = open["leafId"].clone();
    let r = d.request(
        "session/fork",
        json!({"path": path, "entryId": leaf, "position": "at", "targetDir": s(&outside)}),
    );
    let (code, msg, _) = error_of(&r);
    assert_eq!(code, -33002, "{msg}");
    let r = d.request(
        "session/salvage",
        json!({"path": path, "targetDir": s(&outside)}),
    );
    assert_eq!(error_of(&r).0, -33002);
    let r = d.request(
        "session/fork",
        json!({"path": path, "entryId": leaf, "position": "at", "targetDir": s(&root.join("../outside"))}),
    );
    assert_eq!(error_of(&r).0, -33002);
    assert_eq!(std::fs::read_dir(&outside).expect("ls").count(), 0);

    // Fork before an entry that is not a user message; an unknown entry.
    let r = d.request(
        "session/fork",
        json!({"path": path, "entryId": leaf, "position": "before"}),
    );
    let (code, msg, data) = error_of(&r);
    assert_eq!(code, -33016, "fork before a non-user entry: {r}");
    assert!(msg.contains(leaf.as_str().unwrap()), "{msg}");
    assert_eq!(data["id"], leaf);
    let r = d.request(
        "session/fork",
        json!({"path": path, "entryId": "0badc0de", "position": "at"}),
    );
    assert_eq!(error_of(&r).0, -33004);

    // Salvage of a corrupt file that is not open: a new file, the source untouched.
    let corrupt = copy_to(&root, "tests/data/corrupt/invalid-json-middle.jsonl");
    let corrupt_before = std::fs::read(&corrupt).expect("read");
    let salvaged = checked(&mut d, "session/salvage", json!({"path": s(&corrupt)}));
    assert_eq!(std::fs::read(&corrupt).expect("read"), corrupt_before);
    assert!(!salvaged["dropped"].as_array().expect("dropped").is_empty());
    let reopened = checked(
        &mut d,
        "session/open",
        json!({"path": salvaged["path"].clone()}),
    );
    assert_eq!(reopened["entryCount"], salvaged["kept"]);
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn appends_are_fenced_and_announced_once() {
    let (tmp, file, entries) = session_file(6);
    let (mut d, path, open) = opened(tmp.path(), &file);
    let first = entries[0].0.clone();
    let mut leaf = open["leafId"].as_str().expect("leaf").to_owned();
    let stale = leaf.clone();
    let mut written: Vec<String> = Vec::new();

    let writes: Vec<(&str, Value)> = vec![
        (
            "session/label",
            json!({"path": path, "targetId": first, "label": "start"}),
        ),
        (
            "session/setName",
            json!({"path": path, "name": "Fenced\nwrites "}),
        ),
        (
            "session/append",
            json!({"path": path, "entry": {"type": "message", "message": {"role": "user", "content": "more", "timestamp": 1_735_689_700_000_i64}}}),
        ),
        (
            "session/append",
            json!({"path": path, "entry": "{\"type\":\"custom\",\"customType\":\"note\",\"data\":{\"n\":1.50}}", "parentId": first}),
        ),
        (
            "session/branch",
            json!({"path": path, "fromId": first, "summary": "left the first branch", "details": {"why": "test"}}),
        ),
        (
            "session/label",
            json!({"path": path, "targetId": first, "label": null}),
        ),
    ];
    for (method, mut params) in writes {
        // A stale view: refused with the current leaf and the entries since; nothing written.
        if leaf != stale {
            params["expectedLeafId"] = json!(stale);
            let bytes = std::fs::read(&file).expect("read");
            let r = d.request(method, params.clone());
            let (code, msg, data) = error_of(&r);
            assert_eq!(code, -33010, "{method}: {r}");
            assert!(msg.contains(&path) && msg.contains(&stale), "{msg}");
            assert_eq!(data["currentLeafId"], json!(leaf), "{method}");
            assert_eq!(data["expectedLeafId"], json!(stale));
            assert_eq!(data["added"], json!(written), "{method}");
            assert_eq!(
                std::fs::read(&file).expect("read"),
                bytes,
                "{method}: bytes"
            );
        }
        params["expectedLeafId"] = json!(leaf);
        let result = checked(&mut d, method, params);
        assert_eq!(result["written"], json!(true));
        let id = result["id"].as_str().expect("id").to_owned();
        assert_eq!(result["leafId"], json!(id));
        let note = announced(&mut d, &path, &id);
        assert_eq!(note["revision"], result["revision"]);
        // The file's last line is the entry, and the daemon's entry says the same.
        let last = std::fs::read_to_string(&file).expect("read");
        let last = last.lines().last().expect("line");
        let entry = d.call("session/entry", json!({"path": path, "id": id}));
        assert_eq!(entry["raw"], json!(last));
        if method == "session/append" && last.contains("customType") {
            assert!(last.contains(r#""data":{"n":1.50}"#), "bytes kept: {last}");
            assert_eq!(entry["entry"]["parentId"], json!(first));
        }
        if method == "session/setName" {
            assert_eq!(entry["entry"]["name"], json!("Fenced writes"));
        }
        written.push(id.clone());
        leaf = id;
    }
    // No entry is announced twice (the watcher sees our own writes too).
    let late = drain_changes(&mut d, QUIET);
    assert!(late.is_empty(), "duplicate didChange: {late:?}");

    // A branch without summary writes nothing and answers the leaf to stand on.
    let bytes = std::fs::read(&file).expect("read");
    let nav = checked(
        &mut d,
        "session/branch",
        json!({"path": path, "fromId": first, "expectedLeafId": leaf}),
    );
    assert_eq!(
        (&nav["written"], &nav["id"], &nav["leafId"]),
        (&json!(false), &Value::Null, &json!(first))
    );
    assert_eq!(std::fs::read(&file).expect("read"), bytes);

    // Missing or malformed params, unknown ids, an invalid entry: refused, nothing written.
    let bad: Vec<(&str, Value, i64)> = vec![
        (
            "session/label",
            json!({"path": path, "targetId": first, "label": "x"}),
            -32602,
        ),
        (
            "session/label",
            json!({"path": path, "targetId": "0badc0de", "label": "x", "expectedLeafId": leaf}),
            -33004,
        ),
        (
            "session/append",
            json!({"path": path, "entry": {"no": "type"}, "expectedLeafId": leaf}),
            -33013,
        ),
        (
            "session/append",
            json!({"path": path, "entry": 7, "expectedLeafId": leaf}),
            -32602,
        ),
        (
            "session/append",
            json!({"path": path, "entry": {"type": "message"}, "parentId": "0badc0de", "expectedLeafId": leaf}),
            -33004,
        ),
        (
            "session/branch",
            json!({"path": path, "fromId": "0badc0de", "summary": "s", "expectedLeafId": leaf}),
            -33004,
        ),
        (
            "session/setName",
            json!({"path": s(&tmp.path().join("none.jsonl")), "name": "n", "expectedLeafId": leaf}),
            -33001,
        ),
    ];
    for (method, params, want) in bad {
        let r = d.request(method, params.clone());
        assert_eq!(error_of(&r).0, want, "{method} {params}: {r}");
    }
    assert_eq!(std::fs::read(&file).expect("read"), bytes);
    assert!(drain_changes(&mut d, Duration::from_millis(300)).is_empty());

    // Another process appends; our next write reads it under the lock and announces both.
    let (_, more) = v3_session(8);
    let foreign = more[7].1.replace(
        &format!("\"parentId\":\"{}\"", more[6].0),
        &format!("\"parentId\":\"{leaf}\""),
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .expect("open");
    std::io::Write::write_all(&mut f, format!("{foreign}\n").as_bytes()).expect("append");
    drop(f);
    let r = d.request(
        "session/label",
        json!({"path": path, "targetId": first, "label": "again", "expectedLeafId": leaf}),
    );
    // Either the watcher applied the foreign line first (conflict), or the write found it
    // under the lock (conflict as well): the view is stale in both cases.
    let (code, _, data) = error_of(&r);
    assert_eq!(code, -33010);
    assert_eq!(data["currentLeafId"], json!(more[7].0));
    let result = checked(
        &mut d,
        "session/label",
        json!({"path": path, "targetId": first, "label": "again", "expectedLeafId": more[7].0}),
    );
    let changes = drain_changes(&mut d, QUIET);
    let id = result["id"].as_str().expect("id");
    assert_eq!(changes.get(id), Some(&1), "{changes:?}");
    assert_eq!(changes.get(&more[7].0), Some(&1), "{changes:?}");
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(d.stop(), Some(0));
}

/// pi's context for (file, leaf) through the oracle, or `None` without one.
fn pi_context(file: &Path, leaf: &str) -> Option<Value> {
    let oracle = common::oracle_dir("compact_dry_run_then_commit")?;
    let r = common::run_batch_oracle(
        &oracle,
        &[json!({"file": file.to_string_lossy(), "leaf": leaf})],
    );
    assert!(r[0].get("error").is_none(), "pi failed: {}", r[0]);
    Some(r[0]["context"].clone())
}

#[test]
fn compact_dry_run_then_commit_resumes_like_pi() {
    let (_tmp, file, mut d, path, leaf) = branched_open();
    let bytes = std::fs::read(&file).expect("read");

    // prepareCompaction equals the CLI's dry run (apart from the new id and time).
    let prep = checked(
        &mut d,
        "session/prepareCompaction",
        json!({"path": path, "keepRecentTokens": 1}),
    );
    let cli = cli_json(&[
        "compact",
        &path,
        "--dry-run",
        "--json",
        "--keep-recent-tokens",
        "1",
    ]);
    for (k, v) in cli.as_object().expect("object") {
        if k == "entryId" || k == "entry" || k == "retention" {
            continue;
        }
        assert_eq!(&prep[k], v, "prepareCompaction {k}");
    }
    assert!(prep["request"]["systemPrompt"].is_string());
    assert!(prep["conversation"].as_str().is_some_and(|c| !c.is_empty()));

    // A dry run writes nothing and leaves out the prepare-only fields.
    let dry = checked(
        &mut d,
        "session/compact",
        json!({"path": path, "expectedLeafId": leaf, "keepRecentTokens": 1, "dryRun": true}),
    );
    assert_eq!(
        (&dry["dryRun"], &dry["written"]),
        (&json!(true), &json!(false))
    );
    assert!(dry.get("conversation").is_none() && dry.get("request").is_none());
    for k in [
        "firstKeptEntryId",
        "tokensBefore",
        "tokensAfter",
        "isSplitTurn",
    ] {
        assert_eq!(dry[k], prep[k], "dry run {k}");
    }
    assert_eq!(std::fs::read(&file).expect("read"), bytes);

    // Too small to compact with the default keep: a result, not an error.
    let nothing = checked(
        &mut d,
        "session/compact",
        json!({"path": path, "expectedLeafId": leaf}),
    );
    assert_eq!(nothing["reason"], json!("nothingBeforeCut"), "{nothing}");
    assert_eq!(std::fs::read(&file).expect("read"), bytes);

    // Commit: one line appended, announced once, the context after it is pi's.
    let done = checked(
        &mut d,
        "session/compact",
        json!({"path": path, "expectedLeafId": leaf, "keepRecentTokens": 1}),
    );
    assert_eq!(done["written"], json!(true));
    assert_eq!(done["leafId"], leaf);
    assert_eq!(done["firstKeptEntryId"], prep["firstKeptEntryId"]);
    assert_eq!(done["tokensBefore"], prep["tokensBefore"]);
    let id = done["entryId"].as_str().expect("entryId").to_owned();
    announced(&mut d, &path, &id);
    let after = std::fs::read(&file).expect("read");
    assert!(after.starts_with(&bytes));
    assert_eq!(
        after[bytes.len()..].iter().filter(|&&b| b == b'\n').count(),
        1
    );
    let written: Value = serde_json::from_slice(&after[bytes.len()..]).expect("entry line");
    assert_eq!(written, done["entry"]);
    let ctx = checked(&mut d, "session/contextAt", json!({"path": path}));
    assert_eq!(ctx["leafId"], json!(id));
    match pi_context(&file, &id) {
        Some(pi) => {
            let ours = common::restrict_to_context(&ctx);
            assert!(
                common::json_eq(&pi, &ours),
                "pi's context differs: {}",
                common::diff_report(&pi, &ours)
            );
        }
        None => {
            let cli = cli_json(&["context", "--json", &path]);
            for (k, v) in cli.as_object().expect("object") {
                assert_eq!(&ctx[k], v, "contextAt {k}");
            }
        }
    }
    assert!(drain_changes(&mut d, QUIET).is_empty(), "announced twice");

    // Compacting the compaction: pi's "already compacted".
    let again = checked(
        &mut d,
        "session/compact",
        json!({"path": path, "expectedLeafId": id, "keepRecentTokens": 1}),
    );
    assert_eq!(again["reason"], json!("leafIsCompaction"));
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn required_retention_refuses_a_summary_that_drops_a_modified_path() {
    let (_tmp, file, mut d, path, leaf) = branched_open();
    let bytes = std::fs::read(&file).expect("read");
    let summary = "## Goal\nSplit the run modes.\n";

    let dry = checked(
        &mut d,
        "session/compact",
        json!({"path": path, "expectedLeafId": leaf, "keepRecentTokens": 1, "summary": summary,
               "requireRetention": true, "dryRun": true}),
    );
    assert_eq!(dry["summarySource"], json!("client"));
    assert!(
        dry["retention"]["lost"].as_u64().unwrap_or(0) > 0,
        "{}",
        dry["retention"]
    );

    let params = json!({"path": path, "expectedLeafId": leaf, "keepRecentTokens": 1,
                        "summary": summary, "requireRetention": true});
    assert_schema("session/compact", "params", &params);
    let r = d.request("session/compact", params);
    let (code, msg, data) = error_of(&r);
    assert_eq!(code, -33014, "{r}");
    assert!(
        msg.contains(&path) && msg.contains("nothing written"),
        "{msg}"
    );
    let lost = data["lost"].as_array().expect("lost");
    let modified = dry["modifiedFiles"].as_array().expect("modifiedFiles");
    assert!(
        lost.iter()
            .any(|p| p["kind"] == "modifiedFile" && modified.contains(&p["text"])),
        "{data}"
    );
    assert!(
        lost.iter()
            .all(|p| p["status"] == "lost" && p["entryId"].is_string())
    );
    assert_eq!(data["retention"]["lost"], json!(lost.len()));
    assert_eq!(
        std::fs::read(&file).expect("read"),
        bytes,
        "nothing written"
    );
    assert!(drain_changes(&mut d, Duration::from_millis(500)).is_empty());

    // Stale view and missing expectedLeafId on a commit.
    let r = d.request(
        "session/compact",
        json!({"path": path, "expectedLeafId": "8a9bb12f", "keepRecentTokens": 1}),
    );
    assert_eq!(error_of(&r).0, -33010);
    let r = d.request(
        "session/compact",
        json!({"path": path, "keepRecentTokens": 1}),
    );
    assert_eq!(error_of(&r).0, -32602);
    assert_eq!(std::fs::read(&file).expect("read"), bytes);
    assert_eq!(d.stop(), Some(0));
}

/// A lone surrogate a client sends in a written entry (`session/append`'s entry, as an object
/// and as JSON text, `session/branch`'s details, a label, a name) is written as pi writes one,
/// the escape `\udXXX`, never as the U+FDD0 pair sessiond decodes it to; pi's loader reads it
/// back.
#[test]
fn written_entries_hold_a_client_s_lone_surrogates_as_pi_s_escapes() {
    let (tmp, file, entries) = session_file(2);
    let (mut d, path, open) = opened(tmp.path(), &file);
    let mut leaf = open["leafId"].as_str().expect("leaf").to_owned();
    let path_json = serde_json::to_string(&path).expect("path");
    // Raw frames: the escapes must reach the daemon as a client writes them.
    let bodies = [
        r#""method":"session/append","params":{"path":PATH,"expectedLeafId":"LEAF","entry":{"type":"thinking_level_change","thinkingLevel":"x\ud800"}}"#,
        r#""method":"session/append","params":{"path":PATH,"expectedLeafId":"LEAF","entry":"{\"type\":\"custom\",\"customType\":\"n\",\"data\":\"y\ud83d\"}"}"#,
        r#""method":"session/branch","params":{"path":PATH,"expectedLeafId":"LEAF","fromId":"FIRST","summary":"s\ude80","details":{"d":"z\udbff"}}"#,
        r#""method":"session/label","params":{"path":PATH,"expectedLeafId":"LEAF","targetId":"FIRST","label":"l\ud801 x"}"#,
        r#""method":"session/setName","params":{"path":PATH,"expectedLeafId":"LEAF","name":"n\udc02 y"}"#,
    ];
    let escapes = [
        r"x\ud800",
        r"y\ud83d",
        r"z\udbff",
        r"l\ud801 x",
        r"n\udc02 y",
    ];
    let mut ids = Vec::new();
    for (body, escape) in bodies.iter().zip(escapes) {
        let id = d.next_request_id() + 1000;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},{}}}"#,
            body.replace("PATH", &path_json)
                .replace("LEAF", &leaf)
                .replace("FIRST", &entries[0].0)
        );
        d.write_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
        let r = d.response(&json!(id));
        let written = r["result"]["id"].as_str().unwrap_or_else(|| panic!("{r}"));
        leaf = written.to_owned();
        ids.push(leaf.clone());
        let bytes = std::fs::read(&file).expect("read");
        let last = String::from_utf8_lossy(
            bytes
                .trim_ascii_end()
                .rsplit(|b| *b == b'\n')
                .next()
                .expect("a line"),
        )
        .into_owned();
        assert!(last.contains(escape), "{last}");
        assert!(!last.contains('\u{FDD0}'), "{last}");
    }
    // pi reads back the lone surrogates (the test client reads an escape as its text).
    if let Some(pi) = pi_context(&file, &ids[0]) {
        assert_eq!(pi["thinkingLevel"], json!(r"x\ud800"), "{pi}");
    }
    if let Some(pi) = pi_context(&file, &ids[2]) {
        assert_eq!(pi["messages"][1]["summary"], json!(r"s\ude80"), "{pi}");
    }
    assert_eq!(d.stop(), Some(0));
}

/// A label or a name on a version-1 session is refused, the file untouched, with a message
/// that says what to do: fork it to a version-3 file first. The open's `header` has no
/// `version` (pi reads it as 1), which is what an editor checks before asking for the text.
#[test]
fn label_and_name_on_a_version_1_session_say_fork_it_first() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = copy_to(
        tmp.path(),
        "tests/data/synthetic/v1-linear-compaction.jsonl",
    );
    let before = std::fs::read(&file).expect("read");
    let (mut d, path, open) = opened(tmp.path(), &file);
    assert_eq!(open["header"].get("version"), None, "{open}");
    let leaf = open["leafId"].clone();
    let first = open["leaves"][0].clone();
    for (method, params) in [
        (
            "session/label",
            json!({"path": path, "targetId": first, "label": "x", "expectedLeafId": leaf}),
        ),
        (
            "session/setName",
            json!({"path": path, "name": "x", "expectedLeafId": leaf}),
        ),
    ] {
        let (code, message, data) = error_of(&d.request(method, params));
        assert_eq!(code, -33015, "{method}: {message}");
        assert_eq!(data, json!({"path": path, "version": 1}), "{method}");
        assert_eq!(
            message,
            format!(
                "{path}: a version-1 session is only read (sessiond writes labels, names and \
                 entries to version-3 files); fork it to a version-3 file first"
            ),
            "{method}"
        );
    }
    assert_eq!(std::fs::read(&file).expect("read"), before);
    assert_eq!(d.stop(), Some(0));
}

/// Input that ends while a write is in flight (a client that sends its requests and closes
/// its end, as a script piping them in does): the write's answer and its `session/didChange`
/// both reach the client before the daemon exits. Ten rounds: the notification travels
/// through tasks of its own, and a transport that closes its output once the last answer is
/// written loses it in most rounds.
#[test]
fn a_write_s_notification_reaches_the_client_when_input_ends_during_the_write() {
    for round in 0..10 {
        let (tmp, file, _) = session_file(3);
        let (mut d, path, open) = opened(tmp.path(), &file);
        let id = d.next_request_id();
        d.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "session/append", "params": {
                "path": path,
                "expectedLeafId": open["leafId"],
                "entry": {"type": "custom", "customType": "note", "data": {"round": round}},
            }}),
        );
        d.close_input();
        let mut answer = None;
        let mut announced = Vec::new();
        while let Some(msg) = d.next_message(NOTE_WAIT) {
            if msg.get("id") == Some(&json!(id)) {
                answer = Some(msg);
            } else if msg["method"] == json!("session/didChange") {
                for a in msg["params"]["added"].as_array().expect("added") {
                    announced.push(a["id"].as_str().expect("id").to_owned());
                }
            }
        }
        let answer = answer.unwrap_or_else(|| panic!("round {round}: no answer"));
        let written = answer["result"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("round {round}: {answer}"));
        assert_eq!(announced, [written], "round {round}");
    }
}
