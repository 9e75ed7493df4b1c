//! The command line as a user meets it: the exit-code table as `--help` prints it and the
//! README repeats it, and the failing inputs of `tests/data/cases/` (pi 1.6.0's answers beside
//! them) read, checked and compacted through the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{describe, json_eq, repo_root, sessiond};
use serde_json::{Value, json};

/// The `Exit codes: …` line of `sessiond --help`.
fn exit_codes_line() -> String {
    let output = sessiond(["--help"]);
    assert!(output.status.success(), "{}", describe(&output));
    let help = String::from_utf8(output.stdout).expect("utf-8 help");
    help.lines()
        .find(|l| l.starts_with("Exit codes: "))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no exit codes in --help:\n{help}"))
}

#[test]
fn help_and_readme_print_the_one_exit_code_table() {
    let line = exit_codes_line();
    for code in [
        "0 ok",
        "2 usage",
        "3 corrupt",
        "4 conflict",
        "5 retention",
        "6 pi",
        "7 busy",
    ] {
        assert!(line.contains(code), "{code:?} missing from {line}");
    }
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    assert!(
        readme.lines().any(|l| l == line),
        "README.md must hold the exit codes exactly as `sessiond --help` prints them:\n{line}"
    );
    for sub in ["context", "check", "compact", "label", "salvage"] {
        let output = sessiond([sub, "--help"]);
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(help.lines().any(|l| l == line), "{sub} --help:\n{help}");
    }
}

/// A case file and pi's answer `name` beside it.
fn case(file: &str, answer: &str) -> (String, Value) {
    let dir = repo_root().join("tests/data/cases");
    let text = std::fs::read(dir.join(answer)).expect("pi's answer");
    let answer = serde_json::from_slice(&text).expect("pi's answer is JSON");
    (dir.join(file).to_string_lossy().into_owned(), answer)
}

/// stdout as exactly one JSON document.
fn one_document(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            describe(output)
        )
    })
}

const LENIENT: &str = "lenient-missing-parent-duplicate.jsonl";

/// pi compacts a file it reads leniently; so does a dry run with --allow-corrupt, with pi's
/// cut point and tokensBefore. A real compaction still refuses the corrupt file.
#[test]
fn a_lenient_dry_run_compacts_as_pi_and_a_real_compaction_refuses() {
    let (file, pi) = case(
        LENIENT,
        "lenient-missing-parent-duplicate.pi-compact-keep1.json",
    );
    let before = std::fs::read(&file).expect("read");
    let args = [
        "compact",
        &file,
        "--dry-run",
        "--allow-corrupt",
        "--json",
        "--keep-recent-tokens",
        "1",
    ];
    let output = sessiond(args);
    assert!(output.status.success(), "{}", describe(&output));
    let ours = one_document(&output);
    assert_eq!(pi["firstKeptEntryId"], "k5");
    assert_eq!(pi["tokensBefore"], 21);
    for (key, want) in pi.as_object().expect("pi's answer is an object") {
        assert!(
            json_eq(want, &ours[key]),
            "{key}: pi {want}, sessiond {}",
            ours[key]
        );
    }
    assert_eq!(ours["written"], json!(false));

    // Strictly, the file is corrupt: no plan, and no write with or without --allow-corrupt.
    let strict = sessiond(["compact", &file, "--dry-run", "--json"]);
    assert_eq!(strict.status.code(), Some(3), "{}", describe(&strict));
    assert_eq!(one_document(&strict)["error"]["kind"], "corrupt");
    for extra in [&[][..], &["--allow-corrupt"][..]] {
        let mut args = vec!["compact", &file, "--json", "--keep-recent-tokens", "1"];
        args.extend_from_slice(extra);
        let output = sessiond(&args);
        assert_eq!(
            output.status.code(),
            Some(3),
            "{args:?}: {}",
            describe(&output)
        );
        let doc = one_document(&output);
        assert_eq!(doc["error"]["kind"], "corrupt", "{doc}");
        assert_eq!(doc["error"]["corruption"]["line"], 4, "{doc}");
    }
    assert_eq!(
        std::fs::read(&file).expect("read"),
        before,
        "nothing written"
    );
}

/// Read leniently, the case's context is pi's, and each problem names what it is about as a
/// field: the missing parent `k3`, and both lines of the duplicate id `k5` (6, shadowed by 8).
#[test]
fn lenient_diagnostics_carry_the_missing_parent_and_both_duplicate_lines() {
    let (file, pi) = case(LENIENT, "lenient-missing-parent-duplicate.pi-context.json");
    let output = sessiond(["context", &file, "--json", "--allow-corrupt"]);
    assert!(output.status.success(), "{}", describe(&output));
    let ours = one_document(&output);
    for key in ["messages", "thinkingLevel", "model"] {
        assert!(
            json_eq(&pi[key], &ours[key]),
            "{key}: pi {}, sessiond {}",
            pi[key],
            ours[key]
        );
    }
    let corruptions: Vec<&Value> = ours["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| &d["corruption"])
        .collect();
    let of = |kind: &str| {
        corruptions
            .iter()
            .find(|c| c["kind"] == kind)
            .copied()
            .unwrap_or_else(|| panic!("no {kind} among {corruptions:?}"))
    };
    let missing = of("missingParent");
    assert_eq!(missing["id"], "k4");
    assert_eq!(missing["line"], 5);
    assert_eq!(missing["parentId"], "k3");
    let dup = of("duplicateId");
    assert_eq!(dup["id"], "k5");
    assert_eq!((&dup["line"], &dup["shadowedLine"]), (&json!(8), &json!(6)));
    let text = std::fs::read(&file).expect("read");
    let line_start = |n: usize| {
        let at = text
            .split(|&b| b == b'\n')
            .take(n - 1)
            .map(|l| l.len() + 1)
            .sum::<usize>();
        json!(at)
    };
    assert_eq!(
        (&dup["offset"], &dup["shadowedOffset"]),
        (&line_start(8), &line_start(6))
    );
    assert_eq!(of("invalidJson")["line"], 4);

    // Strictly the first problem refuses the file; a duplicate id's message names both lines.
    let strict = sessiond(["check", &file, "--json"]);
    assert_eq!(strict.status.code(), Some(3), "{}", describe(&strict));
    assert_eq!(one_document(&strict)["kind"], "invalidJson");
    let dup_file = repo_root().join("tests/data/corrupt/duplicate-id.jsonl");
    let strict = sessiond(["check", &dup_file.to_string_lossy(), "--json"]);
    let report = one_document(&strict);
    assert_eq!(report["kind"], "duplicateId");
    let message = report["message"].as_str().unwrap_or_default();
    assert!(message.contains("line 3"), "{report}");
}
