//! `export` and `verify` on Claude Code transcripts written by the real Claude Code 2.1.197
//! (`tests/data/claude/real/`), through the command line and the daemon: the branch to the leaf
//! across its compact boundaries, tool calls with their results (the parallel ones too), images,
//! the subagent linked from its `Agent` call, rewinds noted, redaction; and Claude's tool calls
//! checked against the work tree.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn real(name: &str) -> PathBuf {
    repo().join("tests/data/claude/real").join(name)
}

fn sessiond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(args)
        .output()
        .expect("sessiond runs")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The compacted transcript's resume leaf, and the leaf of its rewound branch (parallel tool
/// calls, an image, a failing command, a denied write).
const RESUME_LEAF: &str = "ec228510-5a3b-4462-aad5-e3f6654df41b";
const REWOUND_LEAF: &str = "0b5e3c50-369b-45ad-a35e-c68a63fa334e";

/// `sessiond export FILE ARGS --json`: the result document.
fn export(file: &Path, args: &[&str]) -> Value {
    let mut all = vec!["export", path(file)];
    all.extend(args);
    all.push("--json");
    let out = sessiond(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

/// The positions of `needles` in `doc`, each found.
fn positions(doc: &str, needles: &[&str]) -> Vec<usize> {
    needles
        .iter()
        .map(|n| {
            doc.find(n)
                .unwrap_or_else(|| panic!("{n:?} not in the document"))
        })
        .collect()
}

#[test]
fn export_reads_the_branch_across_its_compactions_and_notes_the_rewind() {
    let file = real("compacted.jsonl");
    let r = export(&file, &[]);
    assert_eq!(r["leafId"], RESUME_LEAF);
    let md = r["document"].as_str().unwrap();
    // From the first prompt to the leaf, through both boundaries, in order.
    let at = positions(
        md,
        &[
            "# Claude Code session compacted",
            "Run a command",
            "Another branch leaves here (not shown)",
            "Branch prompt",
            "Answer to: After the branch",
            "Compacted here (manual, 122 tokens before)",
            "Kept verbatim after the summary: 7f1509ff-4e18-403f-ab85-226b98c46dbf",
            "Compaction summary: the model reads this",
            "Local command /compact",
            "After compaction",
            "Run a command again",
            "Compacted here (manual, 127 tokens before)",
            "After the second compaction",
            "Answer to: After the second compaction",
        ],
    );
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
    assert_eq!(md.matches("Compacted here").count(), 2);
    // The rewound branch is noted where it leaves, not shown.
    assert_eq!(md.matches("Another branch leaves here").count(), 1);
    assert!(md.contains("22 lines from 0bee5823-8661-4b82-b6cc-d43e45fabb1d, 2 leaves"));
    assert!(
        !md.contains("Second prompt"),
        "the rewound branch is not shown"
    );
    // The lines Claude Code wrote itself are said to be its own.
    assert!(md.contains("Assistant · written by Claude Code, not the model"));
    assert_eq!(r["toolCalls"], 2);
    assert_eq!(r["entries"], 40);
}

#[test]
fn export_shows_parallel_calls_with_their_results_images_and_errors() {
    let file = real("compacted.jsonl");
    let r = export(&file, &["--leaf", REWOUND_LEAF, "--format", "html"]);
    let html = r["document"].as_str().unwrap();
    assert_eq!(
        (r["toolCalls"].as_u64(), r["images"].as_u64()),
        (Some(6), Some(1))
    );
    // Both parallel calls hold their own result (Claude puts the other branch's result back).
    let tools: Vec<&str> = html
        .split("<details class=\"tool\"")
        .skip(1)
        .map(|t| &t[..t.find("</details>").unwrap()])
        .collect();
    assert_eq!(tools.len(), 6);
    assert!(tools[1].contains("echo alpha") && tools[1].contains("<pre>alpha</pre>"));
    assert!(tools[2].contains("echo beta") && tools[2].contains("<pre>beta</pre>"));
    assert!(tools[3].contains("data:image/png;base64,"), "{}", tools[3]);
    assert_eq!(
        html.matches("<span class=\"status error\">error</span>")
            .count(),
        2
    );
    assert!(html.contains("haven&#39;t granted it yet") || html.contains("haven't granted it yet"));
    assert!(!html.contains("<script"));
    // No lone result: every result sits in its call.
    assert!(!html.contains("its call is not on this branch"));
}

#[test]
fn export_links_the_subagent_to_its_agent_call() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("with-subagent.jsonl");
    std::fs::copy(real("with-subagent.jsonl"), &file).unwrap();
    let subs = dir.path().join("with-subagent/subagents");
    std::fs::create_dir_all(&subs).unwrap();
    for f in std::fs::read_dir(real("with-subagent/subagents")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, subs.join(f.file_name().unwrap())).unwrap();
    }
    let md = export(&file, &[])["document"].as_str().unwrap().to_owned();
    let at = positions(
        &md,
        &[
            "Tool call <b>Agent</b>",
            "[Subagent a46c5597fd4041ded (general-purpose: Inspect the directory): its conversation is below](#subagent-a46c5597fd4041ded)",
            "After the agent",
            "<a id=\"subagent-a46c5597fd4041ded\"></a>",
            "## Subagent a46c5597fd4041ded — Inspect the directory",
            "**Started by:** tool_use toolu_21_0 at entry b1326216-29c9-4f4d-b962-952158f6cccc",
            "`41d0546a-9759-4ff6-9988-88d5f7b45bd2`\n\nSUBAGENT TASK: list the work directory and report.",
            "Tool call <b>Bash</b>",
            "`79bd0d52-e4d7-410a-8077-4216dd3e7ef2`\n\nSubagent report: the directory is nearly empty.",
        ],
    );
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
    // A subagent file that is a symbolic link is not followed.
    let secret = dir.path().join("elsewhere.jsonl");
    std::fs::copy(
        real("with-subagent/subagents/agent-a46c5597fd4041ded.jsonl"),
        &secret,
    )
    .unwrap();
    std::os::unix::fs::symlink(&secret, subs.join("agent-zzz.jsonl")).unwrap();
    let md2 = export(&file, &[])["document"].as_str().unwrap().to_owned();
    assert_eq!(md2, md);
}

#[test]
fn export_redacts_a_transcript_as_it_does_a_pi_session() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jsonl");
    let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789";
    let text = std::fs::read_to_string(real("compacted.jsonl"))
        .unwrap()
        .replace(
            "After the second compaction",
            &format!("After the second compaction {key}"),
        );
    std::fs::write(&file, text).unwrap();
    let r = export(&file, &[]);
    let md = r["document"].as_str().unwrap();
    assert!(!md.contains(key) && md.contains("[REDACTED:anthropic-key]"));
    assert_eq!(
        r["redactions"], 2,
        "the prompt and the answer that repeats it"
    );
    let r = export(&file, &["--no-redact"]);
    assert!(r["document"].as_str().unwrap().contains(key));
    assert_eq!(r["redacted"], false);
}

#[test]
fn the_daemon_exports_a_transcript_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("with-subagent.jsonl");
    std::fs::copy(real("with-subagent.jsonl"), &file).unwrap();
    let subs = dir.path().join("with-subagent/subagents");
    std::fs::create_dir_all(&subs).unwrap();
    for f in std::fs::read_dir(real("with-subagent/subagents")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, subs.join(f.file_name().unwrap())).unwrap();
    }
    let cli = export(&file, &["--format", "html"]);
    let (mut d, _) = support::Daemon::start(&[dir.path()]);
    // Closed: read once, in its format, and not opened.
    let closed = support::checked(
        &mut d,
        "session/export",
        json!({"path": file, "format": "html"}),
    );
    // Open: read from the daemon's tree.
    let _: Value = d.call("session/open", json!({"path": file}));
    let open = support::checked(
        &mut d,
        "session/export",
        json!({"path": file, "format": "html"}),
    );
    for r in [&closed, &open] {
        assert_eq!(r["document"], cli["document"]);
        assert_eq!(r["leafId"], cli["leafId"]);
        assert_eq!(r["toolCalls"], cli["toolCalls"]);
    }
    assert!(
        cli["document"]
            .as_str()
            .unwrap()
            .contains("id=\"subagent-a46c5597fd4041ded\"")
    );
    let bad = d.request("session/export", json!({"path": file, "leafId": "zz"}));
    assert_eq!(support::error_of(&bad).0, -33004);
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn verify_reads_claude_s_tool_calls_on_the_branch_across_compactions() {
    let file = real("compacted.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_str().unwrap();
    // On the rewound branch: the denied Write failed, and nothing else touched a file.
    let out = sessiond(&[
        "verify",
        path(&file),
        "--leaf",
        REWOUND_LEAF,
        "--cwd",
        cwd,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(8), "attention");
    let r = json_of(&out);
    let kinds: Vec<(&str, &str)> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap(), f["status"].as_str().unwrap()))
        .collect();
    let failed: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "failedTool")
        .collect();
    assert_eq!(failed.len(), 1, "{kinds:?}");
    assert_eq!(failed[0]["toolCallId"], "toolu_9_0");
    assert!(
        failed[0]["message"]
            .as_str()
            .unwrap()
            .contains("The Write of /tmp/corpus-final/work/denied.txt failed")
    );
    assert!(
        kinds.contains(&("cwd", "warn")),
        "another directory than the session's: {kinds:?}"
    );
    assert!(kinds.contains(&("credentials", "ok")) || kinds.contains(&("credentials", "warn")));
    // At the resume leaf, after two compactions: the calls before them are still checked (the
    // Bash calls ran a builtin only), the denied Write is on the other branch and failed there.
    let r = json_of(&sessiond(&["verify", path(&file), "--cwd", cwd, "--json"]));
    assert_eq!(r["leafId"], RESUME_LEAF);
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] != "failedTool" && f["kind"] != "otherBranchEffect"),
        "{r}"
    );
}

#[test]
fn the_daemon_verifies_a_transcript_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jsonl");
    std::fs::copy(real("compacted.jsonl"), &file).unwrap();
    let cwd = dir.path().to_str().unwrap();
    let cli = json_of(&sessiond(&[
        "verify",
        path(&file),
        "--leaf",
        REWOUND_LEAF,
        "--cwd",
        cwd,
        "--json",
    ]));
    let (mut d, _) = support::Daemon::start(&[dir.path()]);
    let params = json!({"path": file, "leafId": REWOUND_LEAF, "cwd": cwd});
    let closed = support::checked(&mut d, "session/verifyResume", params.clone());
    let _: Value = d.call("session/open", json!({"path": file}));
    let open = support::checked(&mut d, "session/verifyResume", params);
    for r in [&closed, &open] {
        assert_eq!(r["findings"], cli["findings"]);
    }
    let bad = d.request(
        "session/verifyResume",
        json!({"path": file, "leafId": "zz"}),
    );
    assert_eq!(support::error_of(&bad).0, -33004);
    assert_eq!(d.stop(), Some(0));
}
