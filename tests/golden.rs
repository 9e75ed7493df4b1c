//! Golden tests: `sessiond context --json` equals pi 1.6.0 for every case in tests/data/golden (see scripts/regen-golden.sh).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{
    context_args, describe, diff_report, json_eq, repo_root, restrict_to_context, sessiond,
    sessiond_json, v1_line_id,
};
use serde_json::Value;

fn golden_files() -> Vec<PathBuf> {
    let dir = repo_root().join("tests/data/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/data/golden is missing; run scripts/regen-golden.sh")
        .map(|e| e.expect("reading tests/data/golden").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// Checks one golden case; Err holds a readable account of the mismatch.
fn check_case(path: &PathBuf) -> Result<(), String> {
    let golden: Value =
        common::parse_json(&std::fs::read(path).expect("read golden")).expect("golden is JSON");
    let file = golden["file"].as_str().expect("golden.file");
    let args = context_args(Path::new(file), golden["leaf"].as_str());
    let actual = sessiond_json(&args)?;
    let context = restrict_to_context(&actual);
    let mut problems = Vec::new();
    if !json_eq(&golden["context"], &context) {
        problems.push(format!(
            "context differs from pi: {}",
            diff_report(&golden["context"], &context)
        ));
    }
    // Ids: pi's own for version 2 and 3; for version 1 pi's are random, so sessiond's line-derived ids are
    // checked against the physical lines of the entries pi selected.
    let expected_ids: Value = match &golden["entries"] {
        Value::Array(ids) => Value::Array(ids.clone()),
        _ => Value::Array(
            golden["entryLines"]
                .as_array()
                .expect("golden.entryLines")
                .iter()
                .map(|line| Value::String(v1_line_id(line.as_u64().expect("entry line number"))))
                .collect(),
        ),
    };
    match actual.get("entryIds") {
        Some(ids) if json_eq(&expected_ids, ids) => {}
        Some(ids) => problems.push(format!(
            "entryIds differ: {}",
            diff_report(&expected_ids, ids)
        )),
        None => problems.push("output has no entryIds".to_string()),
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "`sessiond {}`: {}",
            args.join(" "),
            problems.join("\n")
        ))
    }
}

#[test]
fn every_golden_context_matches_pi() {
    let files = golden_files();
    assert!(
        !files.is_empty(),
        "no golden cases; run scripts/regen-golden.sh"
    );
    let results = common::parallel_map(&files, check_case);
    let failures: Vec<(String, String)> = files
        .iter()
        .zip(results)
        .filter_map(|(path, r)| {
            r.err()
                .map(|e| (path.file_name().unwrap().to_string_lossy().into_owned(), e))
        })
        .collect();
    eprintln!(
        "golden: {} cases, {} passed, {} failed",
        files.len(),
        files.len() - failures.len(),
        failures.len()
    );
    if let Some((first, report)) = failures.first() {
        let names: Vec<&str> = failures.iter().map(|(n, _)| n.as_str()).collect();
        panic!(
            "{} of {} golden cases differ from pi:\n  {}\n\nfirst mismatch, {first}:\n{report}",
            failures.len(),
            files.len(),
            names.join("\n  ")
        );
    }
}

/// Every input file has at least its default-leaf golden, so a new fixture without goldens is noticed.
#[test]
fn every_input_file_has_goldens() {
    let root = repo_root();
    let mut missing = Vec::new();
    for (dir, prefix) in [
        ("examples", "examples"),
        ("tests/data/synthetic", "synthetic"),
    ] {
        for entry in std::fs::read_dir(root.join(dir)).expect("input dir") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                let stem = path.file_stem().unwrap().to_string_lossy();
                let golden = root.join(format!("tests/data/golden/{prefix}__{stem}__default.json"));
                if !golden.exists() {
                    missing.push(golden.display().to_string());
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "goldens missing (run scripts/regen-golden.sh): {missing:?}"
    );
}

/// The comparison itself: numbers by value, absent keys noticed, lone surrogate escapes accepted.
#[test]
fn comparison_helpers_behave_like_javascript() {
    use serde_json::json;
    assert!(json_eq(
        &json!({"a": 1, "b": [1.0, 2]}),
        &json!({"b": [1, 2.0], "a": 1.0})
    ));
    assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    assert!(!json_eq(&json!([1, 2]), &json!([1, 2, 3])));
    assert!(!json_eq(&json!("1"), &json!(1)));
    let diff = diff_report(
        &json!({"messages": [{"content": "x"}]}),
        &json!({"messages": [{}]}),
    );
    assert!(
        diff.contains("/messages/0/content") && diff.contains("<absent>"),
        "{diff}"
    );
    let lone = common::parse_json(br#"{"t":"a \ud83d b \ude80 \ud83d\ude80 \\ud83d"}"#)
        .expect("lone surrogates");
    // The same string spelled another way: the surrogate pair as the raw character.
    let same = common::parse_json("{\"t\":\"a \\ud83d b \\ude80 🚀 \\\\ud83d\"}".as_bytes())
        .expect("lone surrogates");
    let other = common::parse_json(br#"{"t":"a \ud83e b \ude80 \ud83d\ude80 \\ud83d"}"#)
        .expect("lone surrogates");
    assert_eq!(lone, same);
    assert_ne!(lone, other);
    assert_eq!(lone["t"], json!("a \\ud83d b \\ude80 🚀 \\ud83d"));
}

/// pi's answer for tests/data/text/noncharacter-text.jsonl, made by the oracle:
/// `node .oracle/oracle.mjs context tests/data/text/noncharacter-text.jsonl >
/// tests/data/text/noncharacter-text.pi-context.json`.
const NONCHARACTER_PI: &str = "tests/data/text/noncharacter-text.pi-context.json";

/// A context's messages are pi's bytes: U+FDD0 followed by a private-use character is text
/// that pi writes back as it is (only an entry id, which sessiond decodes, holds a lone
/// surrogate, written with pi's escape).
#[test]
fn message_text_is_pi_s_bytes() {
    let root = repo_root();
    let pi = std::fs::read(root.join(NONCHARACTER_PI)).expect("pi's answer");
    // pi prints {messages, thinkingLevel, model}; sessiond the same fields first, then its own.
    let pi = pi.strip_suffix(b"}\n").expect("pi's document");
    let output = sessiond([
        "context",
        "tests/data/text/noncharacter-text.jsonl",
        "--json",
    ]);
    assert!(output.status.success(), "{}", describe(&output));
    let ours = &output.stdout;
    let rest = ours.strip_prefix(pi).unwrap_or_else(|| {
        panic!(
            "not pi's messages:\n  pi:       {}\n  sessiond: {}",
            String::from_utf8_lossy(pi),
            String::from_utf8_lossy(ours)
        )
    });
    assert!(
        rest.starts_with(br#","entryIds":["f3100001","f3100002\ud800","f3100003"]"#),
        "{}",
        String::from_utf8_lossy(rest)
    );
}

/// A context's `thinkingLevel` and `model` equal pi's where they hold U+FDD0 followed by a
/// private-use character (text, not a lone surrogate): from a `thinking_level_change`, a
/// `model_change` and an assistant message, and beside a line with duplicate keys whose last
/// thinking level holds a lone surrogate (read through the duplicate-key fallback). pi's answers
/// were made by the oracle: `node .oracle/oracle.mjs context tests/data/text/NAME.jsonl >
/// tests/data/text/NAME.pi-context.json`.
#[test]
fn settings_text_is_pi_s() {
    let root = repo_root();
    for name in [
        "noncharacter-settings",
        "noncharacter-settings-duplicate-keys",
    ] {
        let file = format!("tests/data/text/{name}.jsonl");
        let pi = common::parse_json(
            &std::fs::read(root.join(format!("tests/data/text/{name}.pi-context.json")))
                .expect("pi's answer"),
        )
        .expect("pi's answer is JSON");
        let last = pi_last_entry_id(&root.join(&file));
        // The default leaf (the projection followed while reading) and the same leaf named.
        for leaf in [None, Some(last.as_str())] {
            let mut args = vec!["context", file.as_str(), "--json"];
            if let Some(id) = leaf {
                args.extend(["--leaf", id]);
            }
            let output = sessiond(args);
            assert!(output.status.success(), "{}", describe(&output));
            let ours = common::parse_json_output(&output).unwrap_or_else(|e| panic!("{e}"));
            for key in ["messages", "thinkingLevel", "model"] {
                assert_eq!(ours[key], pi[key], "{name} {key} (leaf {leaf:?})");
            }
        }
    }
}

/// The id of the last line of `file` (a session whose ids are plain ASCII).
fn pi_last_entry_id(file: &std::path::Path) -> String {
    let text = std::fs::read_to_string(file).expect("session file");
    let last = text.lines().last().expect("a line");
    let id = last.split("\"id\":\"").nth(1).expect("an id");
    id[..id.find('"').expect("the id's end")].to_owned()
}
