//! `sessiond export` and `session/export`: the branch as a document, run through the real
//! binary. The HTML export of the real sessions in `examples/` is rendered by headless
//! Chromium (Debian's `chromium`, installed by scripts/test.sh; `$SESSIOND_CHROMIUM`
//! overrides): the rendered DOM must hold one message element per user and assistant message
//! of the branch and one collapsed `<details>` per tool call, counted independently from
//! `sessiond context --json`; a screenshot is kept in `target/test-artefacts/`. Without
//! Chromium the browser test skips, except under `CI=true`, where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;

use serde_json::json;
use support::{Daemon, checked, chromium, cli_json, repo};

const BIN: &str = env!("CARGO_BIN_EXE_sessiond");

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().expect("run sessiond")
}

/// User and assistant messages and tool calls of the context at the default leaf, counted
/// from `sessiond context --json` (a session without compaction: its context is its branch).
fn context_counts(file: &str) -> (usize, usize, usize) {
    let ctx = cli_json(&["context", file, "--json"]);
    let messages = ctx["messages"].as_array().unwrap();
    let role = |r: &str| messages.iter().filter(|m| m["role"] == r).count();
    let calls = messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "toolCall")
        .count();
    (role("user"), role("assistant"), calls)
}

#[test]
fn html_export_of_real_sessions_renders_in_chromium() {
    let Some(chromium_bin) = chromium::find() else {
        return;
    };
    let out_dir = chromium::artefacts();
    for name in ["pi-v1-large-session", "pi-v3-branched"] {
        let file = repo().join(format!("examples/{name}.jsonl"));
        let file = file.to_str().unwrap();
        let html = out_dir.join(format!("export-{name}.html"));
        let r = run(&["export", file, "--out", html.to_str().unwrap()]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(stderr.contains("redacted 0 strings"), "{stderr}");
        // The format follows the extension; the file is one document with no network.
        let text = std::fs::read_to_string(&html).unwrap();
        assert!(text.starts_with("<!DOCTYPE html>"));
        assert!(!text.contains("<script") && !text.contains("http-equiv=\"refresh\""));
        assert!(text.contains("default-src 'none'"));

        let dom = chromium::dom(&chromium_bin, &html);
        let users = dom.matches("<article class=\"message user\"").count();
        let assistants = dom.matches("<article class=\"message assistant\"").count();
        let tools = dom.matches("<details class=\"tool\"").count();
        let open_tools = dom.matches("<details class=\"tool\" open").count();
        if name == "pi-v1-large-session" {
            // No compaction: the context holds every message of the branch.
            let (u, a, calls) = context_counts(file);
            assert_eq!((users, assistants, tools), (u, a, calls), "{name}");
        }
        assert!(
            users > 10 && assistants > 10 && tools > 50,
            "{name}: {users} {assistants} {tools}"
        );
        assert_eq!(open_tools, 0, "tool calls are collapsed");
        // Every tool call of the branch has its result inside it (none stands alone).
        assert_eq!(
            dom.matches("<article class=\"message tool-result\"")
                .count(),
            0
        );
        if name == "pi-v3-branched" {
            // The branched example's compaction, label and name reach the document.
            assert!(
                dom.contains("<aside class=\"note compaction\""),
                "compaction"
            );
            assert!(dom.contains("<span class=\"label\""), "label");
            assert!(dom.contains("<h1>Untangle run modes</h1>"), "name");
        }

        let shot = out_dir.join(format!("export-{name}.png"));
        chromium::screenshot(&chromium_bin, &html, &shot, "1200,1600");
    }
}

#[test]
fn secrets_are_redacted_unless_asked_and_outputs_cut() {
    let file = repo().join("tests/data/export/secrets.jsonl");
    let file = file.to_str().unwrap();
    let doc = cli_json(&["export", file, "--format", "html", "--json"]);
    assert_eq!(doc["redactions"], 4, "{}", doc["redactions"]);
    assert_eq!(
        (
            doc["entries"].as_u64(),
            doc["messages"].as_u64(),
            doc["toolCalls"].as_u64()
        ),
        (Some(8), Some(3), Some(2))
    );
    assert_eq!(
        (doc["truncated"].as_u64(), doc["images"].as_u64()),
        (Some(1), Some(1))
    );
    let html = doc["document"].as_str().unwrap();
    for secret in [
        "sk-ant-api03-EXAMPLE",
        "EXAMPLEexampleEXAMPLE0123456789",
        "ghp_EXAMPLE",
        "MIIEexample",
    ] {
        assert!(!html.contains(secret), "{secret} leaked");
    }
    for kind in [
        "anthropic-key",
        "bearer-token",
        "github-token",
        "private-key",
    ] {
        assert!(html.contains(&format!("[REDACTED:{kind}]")), "{kind}");
    }
    assert!(html.contains("Redacted 4 strings that look like secrets"));
    assert!(html.contains("src=\"data:image/png;base64,iVBORw0KGgo"));
    assert!(
        html.contains("&lt;b&gt;this&lt;/b&gt;"),
        "raw HTML is shown as text"
    );
    assert!(
        html.contains("… cut: 8,192 bytes of"),
        "the long output is cut with its size"
    );
    assert!(html.contains("Thinking level changed to high"));
    assert!(html.contains("<span class=\"label\" title=\"label\">deploy</span>"));
    assert!(html.contains("<span class=\"status error\">error</span>"));

    let plain = run(&["export", file, "--no-redact", "--leaf", "r1"]);
    assert!(plain.status.success());
    let md = String::from_utf8(plain.stdout).unwrap();
    assert!(md.contains("sk-ant-api03-EXAMPLEexampleEXAMPLEexample0000"));
    assert!(md.contains("Redaction was off"));
    assert!(md.contains("- **Leaf:** r1"));
    assert!(!md.contains("Compaction"), "the branch ends at --leaf");
    assert!(String::from_utf8_lossy(&plain.stderr).contains("redaction off"));

    let unknown = run(&["export", file, "--leaf", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn session_export_over_the_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    std::fs::copy(repo().join("tests/data/export/secrets.jsonl"), &file).unwrap();
    let (mut d, _) = Daemon::start(&[dir.path()]);
    // A closed session is read without being opened.
    let r = checked(
        &mut d,
        "session/export",
        json!({"path": file, "format": "md", "maxOutputBytes": 100}),
    );
    assert_eq!(r["redactions"], 4);
    assert_eq!(r["leafId"], "r2");
    assert!(
        r["document"]
            .as_str()
            .unwrap()
            .contains("# Session 5e1f0000")
    );
    // An open session is read from the daemon's tree.
    d.call("session/open", json!({"path": file}));
    let r = checked(
        &mut d,
        "session/export",
        json!({"path": file, "format": "html", "redact": false, "leafId": "a1"}),
    );
    assert_eq!(
        (r["redactions"].as_u64(), r["entries"].as_u64()),
        (Some(0), Some(2))
    );
    let html = r["document"].as_str().unwrap();
    assert!(html.contains("sk-ant-api03-EXAMPLE"));
    let bad = d.request("session/export", json!({"path": file, "format": "pdf"}));
    assert_eq!(support::error_of(&bad).0, -32602);
    let bad = d.request("session/export", json!({"path": file, "leafId": "zz"}));
    assert_eq!(support::error_of(&bad).0, -33004);
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn an_out_path_that_cannot_be_a_file_is_named_in_the_users_terms() {
    let tmp = tempfile::tempdir().unwrap();
    let session = repo().join("examples/pi-v3-branched.jsonl");
    let missing_dir = tmp.path().join("no-such-dir").join("x.md");
    let dir_with_slash = format!("{}/", tmp.path().join("sub").display());
    for (out, says) in [
        (tmp.path().to_str().unwrap().to_owned(), "names a directory"),
        (dir_with_slash, "names a directory"),
        (
            missing_dir.to_str().unwrap().to_owned(),
            "no such directory",
        ),
    ] {
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .args(["export", session.to_str().unwrap(), "--out", &out])
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(2), "{out}");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            stderr.contains(says) && stderr.contains(&out),
            "{out}: {stderr}"
        );
        assert!(!stderr.contains("at path"), "{stderr}");
    }
    // Nothing was left behind in the directory.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}
