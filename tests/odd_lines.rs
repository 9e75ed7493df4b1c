//! Odd but valid lines (tests/data/odd/*.jsonl, plus a few MB-long lines and the case files made
//! here): lone surrogates in names, labels, text, tool arguments, ids and timestamps; escaped and
//! raw control characters where JSON allows them; raw U+2028/U+2029; nesting below
//! `jsstr::VALUE_DEPTH`; numbers beyond a double (1e400) or a u64; duplicate keys.
//!
//! Every reader runs over every file: the CLI's `check`, `context`, `tree`, `explain` (each
//! entry) and `compact --dry-run` (all with `--json`), and the
//! daemon's `session/open`, `session/entry` (each entry), `session/tree`, `session/contextAt`,
//! `session/explain` (each entry), `session/list` and `session/prepareCompaction`. None may fail
//! where the open succeeded, and every answer must be JSON that `JSON.parse` reads. With
//! SESSIOND_ORACLE_DIR set, the context, the tree's order and labels, and the session name are
//! compared with pi 1.6.0's own (tests/oracle/odd.mjs); without it that comparison is skipped
//! loudly, the reader checks still run. A line nested 1,500, 100,000 and 1,000,000 levels deep is
//! read by every reader as an ordinary entry (JSON.parse reads any depth), its context pi's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use sessiond::js::jsstr;
use support::Daemon;
use support::common::{self, json_eq, restrict_to_context};

/// Parses an answer as `JSON.parse` would (lone surrogates kept as sessiond holds them).
fn parse(bytes: &[u8], what: &str) -> Value {
    jsstr::parse_value(bytes).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}): {}",
            common::truncate(&String::from_utf8_lossy(bytes), 400)
        )
    })
}

/// The files of the corpus, copied into a fresh session root, plus generated ones.
fn corpus(root: &Path) -> Vec<PathBuf> {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root).unwrap();
    let mut files = Vec::new();
    for src in common::jsonl_files(&common::repo("tests/data/odd"))
        .into_iter()
        .chain([common::repo("tests/data/cases/lone-surrogate-name.jsonl")])
        .chain([common::repo(
            "tests/data/cases/tree-order-bad-timestamp.jsonl",
        )])
    {
        files.push(common::copy_into(root, &src));
    }
    // Long lines: a 3 MB tool result and 1 MB of tool arguments, with a lone surrogate at the
    // far end of each.
    let header = r#"{"type":"session","version":3,"id":"0199eeee-0000-7000-8000-000000000009","timestamp":"2026-06-01T10:00:00.000Z","cwd":"/w/odd"}"#;
    let big = "abc ".repeat(750_000);
    let args = "x".repeat(1_000_000);
    let long = root.join("long-lines.jsonl");
    common::write_lines(
        &long,
        &[
            header,
            r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-06-01T10:00:01.000Z","message":{"role":"user","content":"read it","timestamp":1}}"#,
            &format!(
                r#"{{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-06-01T10:00:02.000Z","message":{{"role":"assistant","content":[{{"type":"toolCall","id":"c1","name":"write","arguments":{{"path":"big.txt","content":"{args}\ud83d"}}}}],"provider":"p","model":"m","usage":{{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{{"total":0}}}},"stopReason":"toolUse","timestamp":2}}}}"#
            ),
            &format!(
                r#"{{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-06-01T10:00:03.000Z","message":{{"role":"toolResult","toolCallId":"c1","toolName":"write","content":[{{"type":"text","text":"{big}\ude80"}}],"isError":false,"timestamp":3}}}}"#
            ),
            r#"{"type":"message","id":"u2","parentId":"r1","timestamp":"2026-06-01T10:00:04.000Z","message":{"role":"user","content":"thanks","timestamp":4}}"#,
        ],
    );
    files.push(long);
    files
}

/// Runs the CLI, asserting success and a JSON answer.
fn cli(args: &[&str]) -> Value {
    let out = Command::new(support::BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "sessiond {}: {}",
        args.join(" "),
        common::describe(&out)
    );
    parse(&out.stdout, &format!("sessiond {}", args.join(" ")))
}

/// Sends a request whose params may hold lone surrogates (as jsstr pairs): written as the
/// escapes a JavaScript client sends.
fn request(d: &mut Daemon, id: i64, method: &str, params: Value) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let body = jsstr::restore_bytes(serde_json::to_vec(&msg).unwrap());
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(&body);
    d.write_raw(&frame);
    let response = d.response(&json!(id));
    assert!(
        response.get("error").is_none(),
        "{method} {}: {}",
        common::truncate(&params.to_string(), 300),
        common::truncate(&response.to_string(), 600)
    );
    response["result"].clone()
}

/// pi's tree (`{id, label?, children}`) as (id → children ids) and (id → label).
fn pi_tree(
    nodes: &Value,
    children: &mut HashMap<String, Vec<String>>,
    labels: &mut HashMap<String, Value>,
) {
    for n in nodes.as_array().unwrap() {
        let id = n["id"].as_str().unwrap().to_owned();
        let kids: Vec<String> = n["children"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        if let Some(l) = n.get("label") {
            labels.insert(id.clone(), l.clone());
        }
        children.insert(id, kids);
        pi_tree(&n["children"], children, labels);
    }
}

#[test]
fn every_reader_reads_odd_lines_like_json_parse() {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("odd-lines");
    let files = corpus(&root);
    let mut checked = 0usize;
    let mut trees: Vec<(PathBuf, Value)> = Vec::new();

    // The CLI.
    for file in &files {
        let f = file.to_str().unwrap();
        let check = cli(&["check", f, "--json"]);
        assert_eq!(check["ok"], json!(true), "{f}: {check}");
        let context = cli(&["context", f, "--json"]);
        assert!(context["messages"].is_array(), "{f}");
        let tree = cli(&["tree", f, "--json"]);
        for node in tree["nodes"].as_array().unwrap() {
            let id = node["id"].as_str().unwrap();
            if node["type"] == "message" {
                assert!(node["role"].is_string(), "{f}: {id} has no role");
            }
            // A lone surrogate cannot be written on a command line; the daemon covers those.
            if !jsstr::has_lone_surrogate(id) {
                let ex = cli(&["explain", f, id, "--json"]);
                assert!(ex.is_object(), "{f}: explain {id}");
                checked += 1;
            }
        }
        let compact = cli(&[
            "compact",
            f,
            "--dry-run",
            "--json",
            "--keep-recent-tokens",
            "10",
        ]);
        assert!(compact.is_object(), "{f}: compact");
        checked += 4;
        trees.push((file.clone(), tree));
    }

    // The daemon.
    let (mut d, _) = Daemon::start(&[&root]);
    let mut next = 1000;
    let mut id = || {
        next += 1;
        next
    };
    let listed = request(&mut d, id(), "session/list", json!({"root": root}));
    assert_eq!(
        listed["sessions"].as_array().map(Vec::len),
        Some(files.len()),
        "{listed}"
    );
    checked += 1;
    let mut daemon_names = HashMap::new();
    for (file, tree) in &trees {
        let path = file.to_str().unwrap();
        let open = request(&mut d, id(), "session/open", json!({"path": path}));
        daemon_names.insert(file.clone(), open["name"].clone());
        let page = request(
            &mut d,
            id(),
            "session/tree",
            json!({"path": path, "depth": 10_000, "limit": 10_000}),
        );
        let nodes = page["nodes"].as_array().unwrap();
        assert_eq!(
            nodes.len(),
            tree["nodes"].as_array().unwrap().len(),
            "{path}"
        );
        for node in nodes {
            if node["type"] == "message" {
                assert!(node["role"].is_string(), "{path}: {node}");
            }
        }
        for node in tree["nodes"].as_array().unwrap() {
            let entry_id = node["id"].clone();
            let entry = request(
                &mut d,
                id(),
                "session/entry",
                json!({"path": path, "id": entry_id}),
            );
            assert!(entry["entry"].is_object(), "{path}: entry {entry_id}");
            let ex = request(
                &mut d,
                id(),
                "session/explain",
                json!({"path": path, "entryId": entry_id}),
            );
            assert!(ex.is_object());
            checked += 2;
        }
        let ctx = request(&mut d, id(), "session/contextAt", json!({"path": path}));
        assert!(ctx["messages"].is_array(), "{path}");
        let prep = request(
            &mut d,
            id(),
            "session/prepareCompaction",
            json!({"path": path, "keepRecentTokens": 10}),
        );
        assert!(prep.is_object());
        checked += 4;
    }
    assert!(
        checked > 100,
        "only {checked} (file, reader) pairs were checked"
    );

    // pi's own answers.
    let Some(oracle) = common::oracle_dir("odd-lines comparison with pi") else {
        return;
    };
    let mut compared = 0;
    for (line, (file, tree)) in common::oracle_lines(&oracle, "odd.mjs", &files)
        .iter()
        .zip(&trees)
    {
        let pi = parse(line, "odd.mjs");
        let f = file.to_str().unwrap();
        assert!(pi.get("error").is_none(), "pi failed on {f}: {pi}");
        let ours = restrict_to_context(&cli(&["context", f, "--json"]));
        assert!(
            json_eq(&pi["context"], &ours),
            "{f}: context differs: {}",
            common::diff_report(&pi["context"], &ours)
        );
        assert_eq!(tree["name"], pi["name"], "{f}: session name");
        // The daemon's answer went through the test client's reader, which spells a lone
        // surrogate as literal text; spell pi's the same way.
        let pi_name = common::parse_json(&jsstr::restore_bytes(
            serde_json::to_vec(&pi["name"]).unwrap(),
        ))
        .unwrap();
        assert_eq!(daemon_names[file], pi_name, "{f}: daemon session name");
        let (mut children, mut labels) = (HashMap::new(), HashMap::new());
        pi_tree(&pi["tree"], &mut children, &mut labels);
        for node in tree["nodes"].as_array().unwrap() {
            let id = node["id"].as_str().unwrap();
            let kids: Vec<&str> = node["children"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect();
            assert_eq!(kids, children[id], "{f}: children of {id}");
            assert_eq!(node.get("label"), labels.get(id), "{f}: label of {id}");
        }
        compared += 1;
    }
    assert_eq!(compared, files.len(), "pi answered for every file");
}

/// A session whose tool result's `details` nest `n` levels (objects and arrays by turns), and
/// that text of the details.
fn deep_session(dir: &Path, n: usize) -> (PathBuf, String) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join(format!("deep-{n}.jsonl"));
    let mut details = String::new();
    for k in 0..n {
        details.push_str(if k % 2 == 0 { r#"{"d":"# } else { "[" });
    }
    details.push_str(r#""end \ud83d""#);
    for k in (0..n).rev() {
        details.push(if k % 2 == 0 { '}' } else { ']' });
    }
    common::write_lines(
        &file,
        &[
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-06-01T10:00:00.000Z","cwd":"/w"}"#,
            r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-06-01T10:00:01.000Z","message":{"role":"user","content":"list it","timestamp":1}}"#,
            r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-06-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"ls","arguments":{}}],"provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"total":0}},"stopReason":"toolUse","timestamp":2}}"#,
            &format!(
                r#"{{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-06-01T10:00:03.000Z","message":{{"role":"toolResult","toolCallId":"c1","toolName":"ls","content":[{{"type":"text","text":"ok"}}],"details":{details},"isError":false,"timestamp":3}}}}"#
            ),
            r#"{"type":"message","id":"u2","parentId":"r1","timestamp":"2026-06-01T10:00:04.000Z","message":{"role":"user","content":"thanks","timestamp":4}}"#,
        ],
    );
    (file, details)
}

/// Every reader reads the session of [`deep_session`] as an ordinary one: `check` finds it clean,
/// the context passes the details through as the file writes them, `tree` and `explain` answer,
/// and the daemon opens it and answers `contextAt`, `explain` and `export`, and lives on.
fn deep_session_is_read(n: usize) -> (PathBuf, String) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("odd-lines-deep-{n}"));
    let (file, details) = deep_session(&dir, n);
    let f = file.to_str().unwrap();
    let check = cli(&["check", f, "--json"]);
    assert_eq!(check["ok"], json!(true), "{n}: {check}");
    let out = Command::new(support::BIN)
        .args(["context", f, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{n}: {}", common::describe(&out));
    let context = parse(&out.stdout, "context");
    let messages = context["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{n}");
    assert_eq!(messages[2]["role"], "toolResult");
    assert!(
        memchr::memmem::find(&out.stdout, details.as_bytes()).is_some(),
        "{n}: the context does not hold the details as written"
    );
    let tree = cli(&["tree", f, "--json"]);
    assert_eq!(tree["nodes"].as_array().unwrap().len(), 4, "{n}: {tree}");
    let ex = cli(&["explain", f, "r1", "--json"]);
    assert!(ex.is_object(), "{n}: {ex}");
    let export = cli(&["export", f, "--json"]);
    assert!(export.is_object(), "{n}: {export}");

    let (mut d, _) = Daemon::start(&[&dir]);
    let opened = request(&mut d, 1, "session/open", json!({"path": f}));
    assert!(opened.is_object(), "{n}: {opened}");
    let ctx = request(&mut d, 2, "session/contextAt", json!({"path": f}));
    let messages = ctx["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{n}");
    // The details as the daemon sent them: as many levels as the test's reader holds, then
    // the rest of the file's text, unchanged.
    let mut held = &messages[2]["details"];
    let (mut levels, mut opened) = (0, 0);
    let rest = loop {
        match held {
            Value::Object(map) => {
                held = &map["d"];
                opened += r#"{"d":"#.len();
            }
            Value::Array(items) => {
                held = &items[0];
                opened += 1;
            }
            Value::String(text) => break text,
            other => panic!("{n}: details hold {other}"),
        }
        levels += 1;
    };
    assert!(levels < n, "{n}");
    assert!(
        *rest == details[opened..details.len() - levels],
        "{n}: contextAt's details differ from the file's below level {levels}"
    );
    let ex = request(
        &mut d,
        3,
        "session/explain",
        json!({"path": f, "entryId": "r1"}),
    );
    assert!(ex.is_object(), "{n}: {ex}");
    let export = request(&mut d, 4, "session/export", json!({"path": f}));
    assert!(export.is_object(), "{n}: {export}");
    let again = request(&mut d, 5, "session/contextAt", json!({"path": f}));
    assert_eq!(again["messages"].as_array().unwrap().len(), 4);
    assert!(d.alive(), "{n}: the daemon died");
    (file, details)
}

/// JSON.parse reads any depth, and pi reads a tool result whose details nest 1,500 levels (or
/// 100,000: pi reads both entries every time; only its own JSON.stringify of the context gives
/// up beyond a few thousand). So does every reader here; at 1,500 levels the context is pi's.
#[test]
fn a_line_nested_at_any_depth_json_parse_reads_is_an_entry() {
    let (shallow, details) = deep_session_is_read(1_500);
    deep_session_is_read(100_000);
    let Some(oracle) = common::oracle_dir("deep nesting comparison with pi") else {
        return;
    };
    let lines = common::oracle_lines(&oracle, "odd.mjs", std::slice::from_ref(&shallow));
    // pi's answer holds the details as the file has them, byte for byte (as ours does, checked
    // above); the readers here hold 1,000 levels of a value from where each answer starts, so
    // the rest of the two contexts is compared with the details set aside.
    assert!(
        memchr::memmem::find(&lines[0], details.as_bytes()).is_some(),
        "pi's context does not hold the details as written"
    );
    let without_details = |mut v: Value| {
        for m in v["messages"].as_array_mut().into_iter().flatten() {
            if let Some(d) = m.get_mut("details") {
                *d = Value::Null;
            }
        }
        v
    };
    let pi = parse(&lines[0], "odd.mjs");
    assert!(pi.get("error").is_none(), "pi failed: {pi}");
    let f = shallow.to_str().unwrap();
    let ours = without_details(restrict_to_context(&cli(&["context", f, "--json"])));
    let pi = without_details(pi["context"].clone());
    assert!(
        json_eq(&pi, &ours),
        "context differs: {}",
        common::diff_report(&pi, &ours)
    );
}

/// A million levels: read like any other line (no stack overflow in the CLI or the daemon).
#[test]
fn a_line_nested_a_million_levels_is_read_without_a_crash() {
    deep_session_is_read(1_000_000);
}
