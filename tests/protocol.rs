//! The protocol as `protocol/README.md` states it, where a client author found it untrue or
//! unsaid: `initialize` with only `initializationOptions`, roots listed once, the errors of
//! the lifecycle, fork counts that `session/open` of the new file confirms, previews within
//! their length. The real binary over pipes; every message is checked against the schemas.
// Helpers fail the test by panicking, like assertions.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::{Daemon, error_of, repo};

/// A session root holding a copy of the example session, as `<root>/a.jsonl`.
fn root_with_example() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a.jsonl");
    std::fs::copy(repo().join("examples/pi-v3-branched.jsonl"), &file).unwrap();
    let file = std::fs::canonicalize(file).unwrap();
    (tmp, file.to_str().unwrap().to_owned())
}

fn roots_of(init: &Value) -> Value {
    init["result"]["capabilities"]["experimental"]["sessiond"]["roots"].clone()
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn initialize_needs_only_initialization_options() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Daemon::spawn(&[]);
    let init = d.request(
        "initialize",
        json!({"initializationOptions": {"roots": [tmp.path()]}}),
    );
    assert_eq!(roots_of(&init), json!([canonical(tmp.path())]), "{init}");
    d.notify("initialized", json!({}));
    let listed = d.call("session/list", json!({}));
    assert_eq!(listed["sessions"], json!([]));
    assert_eq!(d.stop(), Some(0));

    // No params at all: LSP's capabilities are taken as {}, the roots are the --root ones.
    let mut d = Daemon::spawn(&[tmp.path()]);
    d.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"}));
    let init = d.response(&json!(1));
    assert_eq!(roots_of(&init), json!([canonical(tmp.path())]), "{init}");
    drop(d);
}

#[test]
fn bad_initialization_options_are_refused_and_initialize_can_be_sent_again() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Daemon::spawn(&[]);
    for options in [
        json!({"roots": "/not/an/array"}),
        json!({"roots": [1]}),
        json!({"roots": [""]}),
        json!("roots"),
    ] {
        let r = d.request(
            "initialize",
            json!({"capabilities": {}, "initializationOptions": options}),
        );
        let (code, message, _) = error_of(&r);
        assert_eq!(code, -32602, "{options}: {message}");
        assert!(message.contains("initializationOptions"), "{message}");
    }
    // Still not initialized: requests are refused as before initialize.
    let (code, ..) = error_of(&d.request("session/list", json!({})));
    assert_eq!(code, -32002);
    let init = d.request(
        "initialize",
        json!({"capabilities": {}, "initializationOptions": {"roots": [tmp.path()]}}),
    );
    assert_eq!(roots_of(&init), json!([canonical(tmp.path())]));
    d.notify("initialized", json!({}));
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn the_same_root_given_twice_is_listed_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink(&root, tmp.path().join("alias")).unwrap();
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let mut d = Daemon::spawn(&[&root, &other]);
    let init = d.request(
        "initialize",
        json!({"capabilities": {}, "initializationOptions": {"roots": [
            root, format!("{}/", root.display()), tmp.path().join("alias"),
            tmp.path().join("other/../sessions"),
        ]}}),
    );
    assert_eq!(
        roots_of(&init),
        json!([canonical(&root), canonical(&other)]),
        "initializationOptions.roots first, then --root, each once"
    );
    d.notify("initialized", json!({}));
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn lifecycle_errors_are_the_documented_ones() {
    let (tmp, _) = root_with_example();
    let (mut d, _) = Daemon::start(&[tmp.path()]);
    // An unknown `$/` request is answered (tower-lsp-server alone would stay silent).
    let (code, _, data) = error_of(&d.request("$/unknownRequest", json!({})));
    assert_eq!((code, data), (-32601, json!("$/unknownRequest")));
    let (code, _, data) = error_of(&d.request("session/nope", json!({})));
    assert_eq!((code, data), (-32601, json!("session/nope")));
    // A notification method sent as a request.
    let (code, ..) = error_of(&d.request("initialized", json!({})));
    assert_eq!(code, -32600);
    let (code, ..) = error_of(&d.request("initialize", json!({})));
    assert_eq!(code, -32600, "a second initialize");
    let r = d.request("shutdown", Value::Null);
    assert_eq!(r["result"], Value::Null);
    for method in ["session/list", "shutdown", "initialize"] {
        let (code, message, _) = error_of(&d.request(method, json!({})));
        assert_eq!(code, -32600, "{method} after shutdown: {message}");
    }
    d.notify("exit", Value::Null);
    assert_eq!(d.wait(), Some(0));
}

#[test]
fn fork_counts_are_what_open_of_the_new_file_reports() {
    let (tmp, path) = root_with_example();
    let (mut d, _) = Daemon::start(&[tmp.path()]);
    let open = d.call("session/open", json!({"path": path}));
    let mut rechained = 0;
    for (entry, position) in [
        (open["leafId"].clone(), "at"),
        (open["leaves"][0].clone(), "at"),
        (json!("00247798"), "at"),
    ] {
        let fork = d.call(
            "session/fork",
            json!({"path": path, "entryId": entry, "position": position}),
        );
        let new = d.call("session/open", json!({"path": fork["path"]}));
        assert_eq!(fork["entryCount"], new["entryCount"], "{entry} {position}");
        assert_eq!(fork["leafId"], new["leafId"], "{entry} {position}");
        assert_eq!(fork["sessionId"], new["sessionId"]);
        let labels = fork["newLabels"].as_array().unwrap();
        match labels.last() {
            // Labels re-chained after the path: the last one is the new file's last entry.
            Some(last) => {
                rechained += 1;
                assert_eq!(&fork["leafId"], last);
            }
            None => assert_eq!(fork["leafId"], entry),
        }
        d.call("session/close", json!({"path": fork["path"]}));
    }
    assert!(rechained > 0, "the example re-chains a label on some path");
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn previews_are_at_most_80_code_points() {
    let (tmp, path) = root_with_example();
    let (mut d, _) = Daemon::start(&[tmp.path()]);
    d.call("session/open", json!({"path": path}));
    let page = d.call(
        "session/tree",
        json!({"path": path, "limit": 10000, "depth": 10000}),
    );
    let nodes = page["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1033);
    let lengths: Vec<usize> = nodes
        .iter()
        .map(|n| n["preview"].as_str().unwrap().chars().count())
        .collect();
    assert!(
        lengths.iter().all(|&l| l <= 80),
        "{:?}",
        lengths.iter().max()
    );
    // Cut texts end with an ellipsis at exactly 80 (55 of them had 81 before).
    let cut = nodes
        .iter()
        .map(|n| n["preview"].as_str().unwrap())
        .filter(|p| p.chars().count() == 80 && p.ends_with('…'))
        .count();
    assert!(cut > 50, "{cut}");
    assert_eq!(d.stop(), Some(0));
}
