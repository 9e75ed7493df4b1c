//! The failing inputs reported against sessiond (tests/data/cases, copied from the shared case
//! folder with pi 1.6.0's answers beside them), each checked through the CLI and the daemon.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use sessiond::js::jsstr;
use support::Daemon;
use support::common::{self, json_eq, restrict_to_context};

fn case(name: &str) -> PathBuf {
    common::repo("tests/data/cases").join(name)
}

/// A JSON file or command output read as `JSON.parse` reads it (lone surrogates kept).
fn js(bytes: &[u8]) -> Value {
    jsstr::parse_value(bytes).expect("JSON")
}

fn cli(args: &[&str]) -> Value {
    let out = Command::new(support::BIN).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", common::describe(&out));
    js(&out.stdout)
}

/// Copies a case into a fresh session root for the daemon.
fn root_with(test: &str, file: &str) -> (PathBuf, PathBuf) {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(test);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let copy = common::copy_into(&root, &case(file));
    (root, copy)
}

#[test]
fn lone_surrogate_name() {
    let file = case("lone-surrogate-name.jsonl");
    let f = file.to_str().unwrap();
    let pi_name = js(&std::fs::read(case("lone-surrogate-name.pi-name.json")).unwrap());
    let pi_context = js(&std::fs::read(case("lone-surrogate-name.pi-context.json")).unwrap());

    // The CLI: the name is pi's, and is printed as pi prints it.
    let out = Command::new(support::BIN)
        .args(["tree", f, "--json"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(r#""name":"fix \ud83d""#),
        "the name is not written as pi writes it"
    );
    let tree = js(&out.stdout);
    assert_eq!(tree["name"], pi_name["name"]);
    for node in tree["nodes"].as_array().unwrap() {
        assert!(node["timestamp"].is_string(), "{node}");
        assert_ne!(node["preview"], "", "{node}");
        if node["type"] == "message" {
            assert!(node["role"].is_string(), "{node}");
        }
    }
    let u1 = &tree["nodes"][0];
    assert_eq!(u1["label"], js(br#""tag \ud83d""#));
    assert_eq!(u1["preview"], js(br#""summarize \ud83d please""#));
    let context = restrict_to_context(&cli(&["context", f, "--json"]));
    assert!(
        json_eq(&pi_context, &context),
        "{}",
        common::diff_report(&pi_context, &context)
    );

    // The daemon: the test client spells a lone surrogate as literal text, so read pi's
    // answers the same way.
    let (root, copy) = root_with("case-lone-surrogate-name", "lone-surrogate-name.jsonl");
    let path = copy.to_str().unwrap();
    let pi_name =
        common::parse_json(&std::fs::read(case("lone-surrogate-name.pi-name.json")).unwrap())
            .unwrap();
    let pi_context =
        common::parse_json(&std::fs::read(case("lone-surrogate-name.pi-context.json")).unwrap())
            .unwrap();
    let (mut d, _) = Daemon::start(&[&root]);
    let open = support::checked(&mut d, "session/open", json!({"path": path}));
    assert_eq!(open["name"], pi_name["name"]);
    let page = support::checked(&mut d, "session/tree", json!({"path": path}));
    for node in page["nodes"].as_array().unwrap() {
        assert!(node["timestamp"].is_string(), "{node}");
        assert_ne!(node["preview"], "", "{node}");
        if node["type"] == "message" {
            assert!(node["role"].is_string(), "{node}");
        }
    }
    let ctx = support::checked(&mut d, "session/contextAt", json!({"path": path}));
    let ctx = restrict_to_context(&ctx);
    assert!(
        json_eq(&pi_context, &ctx),
        "{}",
        common::diff_report(&pi_context, &ctx)
    );
    let previews = support::checked(
        &mut d,
        "session/contextAt",
        json!({"path": path, "fields": "previews"}),
    );
    for m in previews["messages"].as_array().unwrap() {
        assert!(m["role"].is_string(), "{m}");
    }
    let entry = support::checked(&mut d, "session/entry", json!({"path": path, "id": "n1"}));
    assert_eq!(entry["entry"]["name"], pi_name["name"]);
}

/// The node with this id in a tree document's `nodes`.
fn node<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["id"] == id))
        .unwrap_or_else(|| panic!("no node {id} in {doc}"))
}

#[test]
fn tree_order_bad_timestamp() {
    let pi = js(&std::fs::read(case("tree-order-bad-timestamp.pi-tree.json")).unwrap());
    let want: Vec<Value> = pi[0]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(
        want,
        [
            json!("c1"),
            json!("c4"),
            json!("c3"),
            json!("c0"),
            json!("c2")
        ]
    );

    let file = case("tree-order-bad-timestamp.jsonl");
    let tree = cli(&["tree", file.to_str().unwrap(), "--json"]);
    assert_eq!(node(&tree, "q1")["children"], json!(want));

    let (root, copy) = root_with("case-tree-order", "tree-order-bad-timestamp.jsonl");
    let path = copy.to_str().unwrap();
    let (mut d, _) = Daemon::start(&[&root]);
    support::checked(&mut d, "session/open", json!({"path": path}));
    let page = support::checked(&mut d, "session/tree", json!({"path": path}));
    assert_eq!(node(&page, "q1")["children"], json!(want));
    // Nodes of a page come breadth-first, so the children follow q1 in pi's order too.
    let ids: Vec<&Value> = page["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["id"])
        .collect();
    assert_eq!(ids[1..], want.iter().collect::<Vec<_>>()[..]);
}
