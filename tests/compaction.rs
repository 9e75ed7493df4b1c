//! Behaviour of `sessiond compact` that writes (or refuses to): a committed compaction that pi's own loader
//! resumes, retention refusals, compaction on a branch, a second compaction on the same path, bad input, and
//! the embedded summarizer's determinism and size bound. Every case works on a copy in a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{
    context_args, describe, diff_report, json_eq, parse_json, parse_json_output, repo_root,
    restrict_to_context, sessiond, sessiond_json,
};
use serde_json::{Value, json};

/// Longest embedded summary before the file blocks (src/core/compaction/summarizer.rs SUMMARY_MAX_CHARS).
const SUMMARY_MAX_CHARS: usize = 12_000;

fn copy_fixture(dir: &Path, rel: &str) -> PathBuf {
    let to = dir.join(Path::new(rel).file_name().expect("file name"));
    std::fs::copy(repo_root().join(rel), &to).expect("copy fixture");
    to
}

/// The id of the file's last entry (`null` without one): the view every write names.
fn current_leaf(file: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .rev()
        .filter_map(|l| parse_json(l.as_bytes()).ok())
        .find_map(|v| {
            v["id"]
                .as_str()
                .filter(|_| v["type"] != "session")
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "null".to_owned())
}

/// `args` with `--expected-leaf` set to the file's current leaf, for a `compact` that writes and
/// names no view itself: every write names its view (`sessiond compact --help`).
fn with_view(args: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let writes = args.first() == Some(&"compact") && !args.contains(&"--dry-run");
    if writes && !args.contains(&"--expected-leaf") {
        out.extend(["--expected-leaf".to_owned(), current_leaf(args[1])]);
    }
    out
}

/// `sessiond compact FILE --json ARGS…` (see [`with_view`]).
fn compact_args(file: &Path, args: &[&str]) -> Vec<String> {
    let file = file.to_str().expect("utf-8 path");
    let args: Vec<&str> = ["compact", file, "--json"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    with_view(&args)
}

/// `sessiond compact FILE --json ARGS…`: its exit code, output and stderr.
fn run(file: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    let output = sessiond(compact_args(file, args));
    let json = parse_json_output(&output).unwrap_or(Value::Null);
    (
        output.status.code(),
        json,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `sessiond compact FILE --json ARGS…`, which must succeed: its output.
fn compact_ok(file: &Path, args: &[&str]) -> Value {
    let args = compact_args(file, args);
    let output = sessiond(&args);
    assert!(
        output.status.success(),
        "`sessiond {}` failed: {}",
        args.join(" "),
        describe(&output)
    );
    parse_json_output(&output).expect("compact --json prints JSON")
}

fn context(file: &Path, leaf: Option<&str>) -> Value {
    restrict_to_context(&sessiond_json(&context_args(file, leaf)).unwrap_or_else(|e| panic!("{e}")))
}

/// pi's own context (loadEntriesFromFile + buildSessionContext) for each (file, leaf).
fn pi_contexts(jobs: &[(PathBuf, Option<String>)]) -> Option<Vec<Value>> {
    let oracle = common::oracle_dir("compaction resume test")?;
    let jobs: Vec<Value> = jobs
        .iter()
        .map(|(f, l)| json!({"file": f.to_string_lossy(), "leaf": l}))
        .collect();
    Some(
        common::run_batch_oracle(&oracle, &jobs)
            .into_iter()
            .map(|r| {
                assert!(r.get("error").is_none(), "pi failed: {r}");
                r["context"].clone()
            })
            .collect(),
    )
}

/// A compact's exit code and output when there is nothing to compact, for pi's `reason`.
fn nothing(reason: &str) -> (Option<i32>, Value) {
    (Some(0), json!({"nothingToCompact": true, "reason": reason}))
}

fn last_line(file: &Path) -> Value {
    let text = std::fs::read_to_string(file).expect("read");
    parse_json(text.lines().last().expect("a line").as_bytes()).expect("last line is JSON")
}

#[test]
fn committed_compaction_is_resumed_by_pi() {
    let dir = tempfile::tempdir().expect("tempdir");
    // (fixture, leaf, keepRecentTokens); leaf b1400009 has system messages in its context.
    let cases: &[(&str, Option<&str>, &str)] = &[
        ("examples/pi-v3-branched.jsonl", None, "1"),
        (
            "tests/data/synthetic/system-messages-checkpoint.jsonl",
            Some("b1400009"),
            "1",
        ),
        (
            "tests/data/synthetic/linear-tool-calls-usage-session-info.jsonl",
            None,
            "1",
        ),
        (
            "tests/data/synthetic/context-edit-with-compaction.jsonl",
            None,
            "1",
        ),
        ("tests/data/synthetic/bash-execution.jsonl", None, "1"),
        // Lone surrogates in the summarized text come back as pi's escapes in the entry.
        (
            "tests/data/synthetic/lone-surrogate-escapes.jsonl",
            None,
            "1",
        ),
    ];
    let mut jobs = Vec::new();
    for (rel, leaf, keep) in cases {
        let file = copy_fixture(dir.path(), rel);
        let before = std::fs::read(&file).expect("read");
        let leaf_before = leaf.map_or_else(|| context_leaf(&file), str::to_owned);
        let mut args = vec!["--keep-recent-tokens", keep];
        if let Some(l) = leaf {
            args.extend(["--leaf", l]);
        }
        let result = compact_ok(&file, &args);
        assert_eq!(result["written"], json!(true), "{rel}: {result}");
        let after = std::fs::read(&file).expect("read");
        assert!(after.starts_with(&before), "{rel}: existing bytes changed");
        let appended = &after[before.len()..];
        assert_eq!(
            appended.iter().filter(|&&b| b == b'\n').count(),
            1,
            "{rel}: one line appended"
        );
        assert!(appended.ends_with(b"\n"));
        if rel.contains("lone-surrogate") {
            let line = String::from_utf8_lossy(appended);
            assert!(
                line.contains(r"message: \ude80 lone low") && !line.contains('\u{E680}'),
                "{rel}: the lone surrogate is not written as pi writes it: {line}"
            );
        }
        let entry = last_line(&file);
        assert_eq!(entry["type"], "compaction");
        assert_eq!(entry["id"], result["entryId"]);
        assert_eq!(
            entry["parentId"],
            json!(leaf_before),
            "{rel}: child of the leaf"
        );
        assert_eq!(entry["firstKeptEntryId"], result["firstKeptEntryId"]);
        assert_eq!(entry["summary"], result["summary"]);
        assert_eq!(entry["fromHook"], json!(false));
        assert!(
            entry["details"]["readFiles"].is_array()
                && entry["details"]["modifiedFiles"].is_array()
        );
        if rel.contains("system-messages") {
            assert_eq!(
                entry["systemMessage"]["role"], "system",
                "{rel}: systemMessage replayed"
            );
            assert_eq!(
                entry["systemMessage"]["timestamp"],
                result["entry"]["systemMessage"]["timestamp"]
            );
        }
        jobs.push((
            file,
            Some(result["entryId"].as_str().expect("entryId").to_owned()),
        ));
    }
    let Some(pi) = pi_contexts(&jobs) else { return };
    for ((file, leaf), pi) in jobs.iter().zip(pi) {
        let ours = context(file, leaf.as_deref());
        assert!(
            json_eq(&pi, &ours),
            "{}: pi's context of the compacted file differs from sessiond's: {}",
            file.display(),
            diff_report(&pi, &ours)
        );
        assert_eq!(
            pi["messages"][0]["role"]
                .as_str()
                .map(|r| r == "compactionSummary" || r == "system"),
            Some(true)
        );
    }
}

fn context_leaf(file: &Path) -> String {
    let output = sessiond(["context", file.to_str().unwrap(), "--json"]);
    parse_json_output(&output).expect("context")["leafId"]
        .as_str()
        .expect("leafId")
        .to_owned()
}

#[test]
fn client_summary_that_omits_a_modified_path_is_lost_and_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = copy_fixture(dir.path(), "examples/pi-v1-large-session.jsonl");
    // Version-1 files are never appended to; use a version-3 copy of the same conversation's shape instead.
    let file3 = copy_fixture(dir.path(), "examples/pi-v3-branched.jsonl");
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "## Goal\nSplit the run modes.\n").expect("write summary");
    for (f, keep) in [(&file, "20000"), (&file3, "1")] {
        let plan = compact_ok(
            f,
            &[
                "--dry-run",
                "--keep-recent-tokens",
                keep,
                "--summary-file",
                summary.to_str().unwrap(),
            ],
        );
        assert_eq!(
            plan["summary"], "## Goal\nSplit the run modes.\n",
            "the client summary is stored verbatim"
        );
        let modified = plan["modifiedFiles"].as_array().expect("modifiedFiles");
        assert!(
            !modified.is_empty(),
            "{}: the fixture modifies files",
            f.display()
        );
        let probes = plan["retention"]["probes"].as_array().expect("probes");
        let mut lost = 0;
        for path in modified {
            let probe = probes
                .iter()
                .find(|p| p["kind"] == "modifiedFile" && &p["text"] == path)
                .unwrap_or_else(|| panic!("no probe for modified path {path}"));
            assert!(
                probe["entryId"].is_string(),
                "the probe names its entry: {probe}"
            );
            // The summary does not name the path; a kept message still may.
            assert_ne!(probe["foundIn"], plan["entryId"], "{probe}");
            if probe["status"] == "lost" {
                lost += 1;
            } else {
                assert!(probe["foundIn"].is_string(), "{probe}");
            }
        }
        assert!(lost > 0, "{}: some modified path is lost", f.display());
    }
    // Committing with --require-retention writes nothing.
    let summary_file = summary.to_str().unwrap();
    let commit = [
        "--keep-recent-tokens",
        "1",
        "--require-retention",
        "--summary-file",
        summary_file,
    ];
    let (code, out, stderr) = writes_nothing(&file3, &commit);
    assert_eq!(code, Some(5), "refused: {stderr}");
    assert_eq!(out["written"], json!(false));
    assert!(
        stderr.contains("modifiedFile"),
        "the error lists the lost probes: {stderr}"
    );
    // A summary that quotes every probe passes the same check and is written.
    let plan = compact_ok(&file3, &["--dry-run", "--keep-recent-tokens", "1"]);
    let quoted: Vec<&str> = plan["retention"]["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .map(|p| p["text"].as_str().expect("text"))
        .collect();
    std::fs::write(&summary, quoted.join("\n")).expect("write summary");
    let written = compact_ok(&file3, &commit);
    assert_eq!(written["retention"]["lost"], json!(0));
    assert_eq!(last_line(&file3)["id"], written["entryId"]);
}

#[test]
fn embedded_summary_keeps_every_probe_on_the_examples() {
    for rel in [
        "examples/pi-v1-large-session.jsonl",
        "examples/pi-v1-before-compaction.jsonl",
    ] {
        let file = repo_root().join(rel);
        let plan = compact_ok(&file, &["--dry-run"]);
        assert_eq!(plan["summarySource"], "embedded");
        assert!(plan["retention"]["kept"].as_u64().unwrap_or(0) > 0);
        assert_eq!(
            plan["retention"]["lost"],
            json!(0),
            "{rel}: {}",
            plan["retention"]
        );
        assert!(plan["tokensAfter"].as_f64() < plan["tokensBefore"].as_f64());
    }
}

#[test]
fn embedded_summarizer_is_deterministic_and_bounded() {
    let file = repo_root().join("examples/pi-v1-large-session.jsonl");
    for keep in ["1", "2000", "20000"] {
        let args = ["--dry-run", "--keep-recent-tokens", keep];
        let a = compact_ok(&file, &args);
        let b = compact_ok(&file, &args);
        assert_eq!(a["summary"], b["summary"], "same input, same summary");
        // Probes and outcomes match too; only the new entry's id (named by foundIn) differs.
        let outcome = |v: &Value| -> Vec<(Value, Value, Value)> {
            v["retention"]["probes"]
                .as_array()
                .expect("probes")
                .iter()
                .map(|p| (p["kind"].clone(), p["text"].clone(), p["status"].clone()))
                .collect()
        };
        assert_eq!(outcome(&a), outcome(&b));
        let summary = a["summary"].as_str().expect("summary");
        let blocks = a["fileOperations"].as_str().expect("fileOperations");
        assert!(
            summary.ends_with(blocks),
            "pi's file blocks close the summary"
        );
        let body = summary.chars().count() - blocks.chars().count();
        assert!(
            body <= SUMMARY_MAX_CHARS,
            "summary body is {body} characters"
        );
        for heading in [
            "## Goal",
            "## Constraints & Preferences",
            "## Progress",
            "### Done",
            "### In Progress",
            "### Blocked",
            "## Key Decisions",
            "## Next Steps",
            "## Critical Context",
        ] {
            assert!(summary.contains(heading), "missing {heading}");
        }
        if a["isSplitTurn"] == json!(true) {
            assert!(
                summary
                    .contains("\n\n---\n\n**Turn Context (split turn):**\n\n## Original Request\n")
            );
        }
    }
}

#[test]
fn compaction_on_a_branch_leaves_siblings_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = copy_fixture(dir.path(), "examples/pi-v3-branched.jsonl");
    let output = sessiond(["tree", file.to_str().unwrap(), "--json"]);
    let tree = parse_json_output(&output).expect("tree");
    let leaves: Vec<String> = tree["leaves"]
        .as_array()
        .expect("leaves")
        .iter()
        .map(|l| l.as_str().expect("id").to_owned())
        .collect();
    let default = tree["defaultLeafId"]
        .as_str()
        .expect("default leaf")
        .to_owned();
    // Compact a leaf that is not the default one and has something to compact.
    let target = leaves
        .iter()
        .filter(|l| **l != default)
        .find(|l| {
            let plan = compact_ok(
                &file,
                &["--dry-run", "--leaf", l, "--keep-recent-tokens", "1"],
            );
            plan.get("nothingToCompact").is_none()
        })
        .expect("a non-default leaf with something to compact")
        .clone();
    let before: Vec<Value> = leaves.iter().map(|l| context(&file, Some(l))).collect();
    let result = compact_ok(&file, &["--leaf", &target, "--keep-recent-tokens", "1"]);
    let new_leaf = result["entryId"].as_str().expect("entryId").to_owned();
    assert_eq!(last_line(&file)["parentId"], json!(target));
    for (leaf, was) in leaves.iter().zip(&before) {
        if *leaf == target {
            continue;
        }
        let now = context(&file, Some(leaf));
        assert!(
            json_eq(was, &now),
            "sibling leaf {leaf} changed: {}",
            diff_report(was, &now)
        );
    }
    // The compacted branch continues from the new entry, and pi agrees on every leaf.
    let mut jobs: Vec<(PathBuf, Option<String>)> = leaves
        .iter()
        .filter(|l| **l != target)
        .map(|l| (file.clone(), Some(l.clone())))
        .collect();
    jobs.push((file.clone(), Some(new_leaf.clone())));
    let Some(pi) = pi_contexts(&jobs) else { return };
    for ((_, leaf), pi) in jobs.iter().zip(pi) {
        let ours = context(&file, leaf.as_deref());
        assert!(
            json_eq(&pi, &ours),
            "leaf {leaf:?}: {}",
            diff_report(&pi, &ours)
        );
    }
}

#[test]
fn second_compaction_uses_the_first_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = copy_fixture(
        dir.path(),
        "tests/data/synthetic/linear-tool-calls-usage-session-info.jsonl",
    );
    let first = compact_ok(&file, &["--keep-recent-tokens", "1"]);
    let first_id = first["entryId"].as_str().expect("entryId");
    // The conversation goes on after the compaction.
    let more = [
        json!({"type": "message", "id": "c0ffee01", "parentId": first_id, "timestamp": "2026-03-01T10:00:00.000Z",
               "message": {"role": "user", "content": [{"type": "text", "text": "Now also fix src/cart.rs rounding."}], "timestamp": 1772359200000_i64}}),
        json!({"type": "message", "id": "c0ffee02", "parentId": "c0ffee01", "timestamp": "2026-03-01T10:00:05.000Z",
               "message": {"role": "assistant", "content": [{"type": "text", "text": "Looking at the rounding code now."},
                   {"type": "toolCall", "id": "toolu_more1", "name": "read", "arguments": {"path": "src/cart.rs"}}],
                   "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                   "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}, "stopReason": "toolUse", "timestamp": 1772359205000_i64}}),
        json!({"type": "message", "id": "c0ffee03", "parentId": "c0ffee02", "timestamp": "2026-03-01T10:00:06.000Z",
               "message": {"role": "toolResult", "toolCallId": "toolu_more1", "toolName": "read", "content": [{"type": "text", "text": "fn round() {}"}], "isError": false, "timestamp": 1772359206000_i64}}),
        json!({"type": "message", "id": "c0ffee04", "parentId": "c0ffee03", "timestamp": "2026-03-01T10:00:09.000Z",
               "message": {"role": "user", "content": "thanks", "timestamp": 1772359209000_i64}}),
    ];
    let mut text = std::fs::read_to_string(&file).expect("read");
    for line in &more {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    std::fs::write(&file, text).expect("append");
    let second = compact_ok(&file, &["--keep-recent-tokens", "1"]);
    assert_eq!(second["previousSummary"], first["summary"]);
    let previous = first["summary"].as_str().expect("summary");
    let prompt = second["request"]["prompt"]
        .as_str()
        .expect("history prompt");
    assert!(prompt.contains(&format!(
        "<previous-summary>\n{previous}\n</previous-summary>"
    )));
    assert!(
        prompt.contains("NEW conversation messages"),
        "pi's update prompt"
    );
    // The embedded summary merges the first one: its goal survives, the new read is listed.
    let summary = second["summary"].as_str().expect("summary");
    let first_goal = previous
        .lines()
        .skip_while(|l| *l != "## Goal" && *l != "## Original Request")
        .nth(1)
        .expect("first request line")
        .trim_start_matches("- ");
    assert!(
        summary.contains(first_goal),
        "first goal {first_goal:?} kept in {summary}"
    );
    assert!(
        second["readFiles"]
            .as_array()
            .expect("readFiles")
            .contains(&json!("src/cart.rs"))
    );
    let Some(pi) = pi_contexts(&[(file.clone(), None)]) else {
        return;
    };
    let ours = context(&file, None);
    assert!(json_eq(&pi[0], &ours), "{}", diff_report(&pi[0], &ours));
}

/// Runs a compact that must write nothing: the file is as it was; returns its exit code, output
/// and stderr.
fn writes_nothing(file: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    let before = std::fs::read(file).expect("read");
    let got = run(file, args);
    assert_eq!(
        std::fs::read(file).expect("read"),
        before,
        "compact {args:?}: the file changed"
    );
    got
}

/// A compact refused with exit `code` and a message holding each of `says`, the file untouched.
fn refused(file: &Path, args: &[&str], code: i32, says: &[&str]) {
    let (got, _, stderr) = writes_nothing(file, args);
    assert_eq!(got, Some(code), "{stderr}");
    for part in says {
        assert!(stderr.contains(part), "{part:?} not in {stderr}");
    }
}

#[test]
fn bad_input_gets_its_documented_result_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let branched = copy_fixture(dir.path(), "examples/pi-v3-branched.jsonl");
    let before = std::fs::read(&branched).expect("read");
    let nothing_at = |file: &Path, args: &[&str]| {
        let (code, out, _) = writes_nothing(file, args);
        (code, out)
    };

    // A leaf that is itself a compaction: pi's "already compacted".
    let leaf_is_compaction = ["--leaf", "4909db93", "--keep-recent-tokens", "1"];
    assert_eq!(
        nothing_at(&branched, &leaf_is_compaction),
        nothing("leafIsCompaction")
    );
    // An unknown leaf.
    let unknown = ["--leaf", "0badc0de"];
    refused(&branched, &unknown, 2, &["unknown leaf id 0badc0de"]);
    // A stale expected leaf.
    let stale = ["--keep-recent-tokens", "1", "--expected-leaf", "8a9bb12f"];
    refused(
        &branched,
        &stale,
        4,
        &["expected leaf 8a9bb12f", "resume leaf"],
    );
    // Nothing before the cut (the default keep covers this whole session).
    assert_eq!(nothing_at(&branched, &[]), nothing("nothingBeforeCut"));

    // An empty session: a header and no entries.
    let empty = dir.path().join("empty.jsonl");
    let header = "{\"type\":\"session\",\"version\":3,\"id\":\"019b8a10-0000-7000-8000-000000000001\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/tmp\"}\n";
    std::fs::write(&empty, header).expect("write");
    assert_eq!(nothing_at(&empty, &[]), nothing("emptyPath"));

    // A young torn tail may still be completed by its writer: busy, nothing written.
    let torn = dir.path().join("torn.jsonl");
    let mut bytes = before.clone();
    bytes.extend_from_slice(b"{\"type\":\"message\",\"id\":\"dead");
    std::fs::write(&torn, &bytes).expect("write");
    let young = ["--keep-recent-tokens", "1", "--torn-grace-ms", "60000"];
    refused(&torn, &young, 7, &["busy"]);

    // An old torn tail is moved to a sidecar file under the lock, then the entry is appended.
    let (code, out, stderr) = run(
        &torn,
        &["--keep-recent-tokens", "1", "--torn-grace-ms", "0"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(out["written"], json!(true), "{out}");
    let after = std::fs::read(&torn).expect("read");
    assert!(after.starts_with(&before), "the complete lines are kept");
    assert_eq!(
        after[before.len()..]
            .iter()
            .filter(|&&b| b == b'\n')
            .count(),
        1
    );
    assert_eq!(last_line(&torn)["id"], out["entryId"]);
    let sidecar = PathBuf::from(format!("{}.torn-{}.bak", torn.display(), before.len()));
    assert_eq!(
        std::fs::read(&sidecar).expect("sidecar"),
        b"{\"type\":\"message\",\"id\":\"dead"
    );

    // Version-1 files are compacted in a dry run only.
    let v1 = copy_fixture(
        dir.path(),
        "tests/data/synthetic/v1-linear-compaction.jsonl",
    );
    let says = [
        "a version-1 session is only read",
        "fork it to a version-3 file first",
    ];
    refused(&v1, &["--keep-recent-tokens", "1"], 2, &says);
}
