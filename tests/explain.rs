//! `explain`, checked two ways: a table of hand-picked cases with their exact reasons
//! (tests/data/explain.json), and, for every golden case, every entry of the file at that
//! leaf against pi's own context entries: an entry is `inContext` exactly when pi's
//! buildContextEntries keeps it and it produces a message, and the reason's kind agrees with
//! whether pi kept it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::Path;

use serde_json::{Value, json};
use sessiond::core::tree::Mode;
use sessiond::dialect::pi::Pi;
use sessiond::dialect::pi::explain::{Explanation, explain};
use sessiond::dialect::pi::projection::project;
use sessiond::storage::reader::open_session;

fn explain_json(file: &Path, leaf: Option<&str>, entry: &str) -> Value {
    let session = open_session::<Pi>(file, Mode::Strict).expect("session opens");
    let tree = &session.tree;
    let leaf = leaf.map_or(tree.default_leaf(), |l| {
        Some(tree.find(l).expect("leaf exists"))
    });
    let projection = project(tree, leaf);
    let target = tree.find(entry).expect("entry exists");
    serde_json::to_value(explain(tree, &projection, target)).expect("serializes")
}

#[test]
fn hand_picked_reasons() {
    let root = common::repo_root();
    let cases: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/data/explain.json")).expect("table"),
    )
    .expect("JSON");
    assert!(cases.len() >= 14, "only {} hand-picked cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let file = root.join(case["file"].as_str().expect("file"));
        let got = explain_json(
            &file,
            case["leaf"].as_str(),
            case["entry"].as_str().expect("entry"),
        );
        let expected = &case["reason"];
        let indexes = case.get("messageIndexes").cloned().unwrap_or(json!(null));
        if &got["reason"] != expected
            || got.get("messageIndexes").cloned().unwrap_or(json!(null)) != indexes
        {
            failures.push(format!("{case}\n  got {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn every_entry_agrees_with_pis_context_entries() {
    let root = common::repo_root();
    let mut checked = 0usize;
    let mut failures = Vec::new();
    for golden in std::fs::read_dir(root.join("tests/data/golden")).expect("goldens") {
        let path = golden.expect("dir entry").path();
        let case =
            common::parse_json(&std::fs::read(&path).expect("read golden")).expect("golden JSON");
        let Some(pi_entries) = case["entries"].as_array() else {
            continue;
        }; // version 1: no stable ids
        let file = root.join(case["file"].as_str().expect("file"));
        let leaf = case["leaf"].as_str();
        let session = open_session::<Pi>(&file, Mode::Strict).expect("golden files open");
        let tree = &session.tree;
        let leaf_idx = leaf.map_or(tree.default_leaf(), |l| tree.find(l));
        let projection = project(tree, leaf_idx);
        let kept: Vec<&str> = pi_entries.iter().filter_map(Value::as_str).collect();
        for node in 0..tree.len() {
            let ex: Explanation = explain(tree, &projection, node as u32);
            let v = serde_json::to_value(&ex).expect("serializes");
            let id = ex.entry_id.as_str();
            let kind = v["reason"]["kind"].as_str().unwrap_or("");
            let pi_kept = kept.contains(&id);
            let consistent = match kind {
                "inContext" | "replacedByEdit" => pi_kept && !ex.message_indexes.is_empty(),
                "neverInContext"
                | "emptyBranchSummary"
                | "supersededCompaction"
                | "omittedByEdit" => pi_kept && ex.message_indexes.is_empty(),
                "notOnPath" | "summarizedByCompaction" | "systemMessageInKeptRange" => !pi_kept,
                _ => false,
            } && ex.in_context == matches!(kind, "inContext" | "replacedByEdit")
                // One vocabulary with `context`: the context entries are pi's.
                && ex.context_entry == pi_kept
                && (v["contributes"] == "message") == ex.in_context
                && ex.text.contains("not a context entry") != pi_kept;
            checked += 1;
            if !consistent {
                failures.push(format!(
                    "{} leaf {:?} entry {id}: {v} (pi keeps it: {pi_kept})",
                    file.display(),
                    leaf
                ));
            }
        }
    }
    assert!(checked > 500, "only {checked} entries checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} explanations disagree with pi:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// An entry below the leaf (a linear session asked at an earlier leaf) comes after the leaf:
/// no other branch exists to name. An entry on a sibling branch is still on another branch.
#[test]
fn after_the_leaf_is_not_another_branch() {
    let root = common::repo_root();
    let linear = root.join("tests/data/synthetic/linear-tool-calls-usage-session-info.jsonl");
    let after = explain_json(&linear, Some("a1000004"), "a1000008");
    assert_eq!(
        after["reason"],
        json!({"kind": "notOnPath", "divergesAt": "a1000004", "branchEntryId": "a1000005"})
    );
    assert_eq!(
        after["text"],
        json!(
            "entry a1000008 (message) at leaf a1000004: not a context entry: it comes after \
             the leaf (below it, through a1000005)"
        )
    );
    let branched = root.join("tests/data/synthetic/branches-labels.jsonl");
    let other = explain_json(&branched, Some("b2000008"), "b200000a");
    let text = other["text"].as_str().expect("text");
    assert!(
        text.contains("it is on another branch, which leaves the leaf's path after b2000002"),
        "{text}"
    );
}
