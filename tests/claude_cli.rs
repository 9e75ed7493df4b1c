//! The command line and the daemon on Claude Code transcripts written by the real Claude Code
//! 2.1.197 (`tests/data/claude/real/`, copied from a run of `node tests/claude/corpus.mjs DIR`:
//! see its README): `check`, `tree`, `context` and `explain` read them, and so do
//! `session/open`, `tree`, `contextAt`, `explain` and `entry`; every write and every command not
//! built for them is refused with `unsupportedForFormat` (exit 10, -33021) and leaves the file as
//! it was. What the model sees is held to Claude Code itself by `tests/claude_referee.rs`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

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

fn text_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The compacted transcript: two `/compact`s, a rewind branch, parallel tool calls.
const RESUME_LEAF: &str = "ec228510-5a3b-4462-aad5-e3f6654df41b";

/// `check` on the hand-made corrupt transcripts (tests/data/claude/): the kind, line and byte
/// offset of the first problem and exit 3, or a torn tail and exit 0; a transcript is read
/// only, so neither output points to `salvage`, which refuses it, but to `--allow-corrupt`.
#[test]
fn check_reports_corrupt_transcripts_without_pointing_to_salvage() {
    let cases = [
        ("duplicate-uuid.jsonl", Some(("duplicateId", 5, 1336))),
        ("dangling-parent.jsonl", Some(("missingParent", 3, 1008))),
        (
            "dangling-logical-parent.jsonl",
            Some(("missingParent", 4, 1160)),
        ),
        ("torn-tail.jsonl", None),
    ];
    for (name, corrupt) in cases {
        let file = repo().join("tests/data/claude").join(name);
        let json = sessiond(&["check", path(&file), "--json"]);
        let human = sessiond(&["check", path(&file)]);
        let report = json_of(&json);
        let text = String::from_utf8_lossy(&human.stdout).into_owned();
        assert_eq!(report["format"], "claude-code", "{name}: {report}");
        match corrupt {
            Some((kind, line, offset)) => {
                for out in [&json, &human] {
                    assert_eq!(out.status.code(), Some(3), "{name}: {out:?}");
                }
                assert_eq!(report["ok"], false, "{name}: {report}");
                assert_eq!(report["kind"], kind, "{name}: {report}");
                assert_eq!(report["line"], line, "{name}: {report}");
                assert_eq!(report["offset"], offset, "{name}: {report}");
                assert_eq!(report["salvageable"], false, "{name}: {report}");
                let at = format!("line {line} (byte {offset}): {kind}");
                assert!(text.contains(&at), "{name}: {text}");
                assert!(text.contains("--allow-corrupt"), "{name}: {text}");
            }
            None => {
                for out in [&json, &human] {
                    assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
                }
                assert_eq!(report["ok"], true, "{name}: {report}");
                assert_eq!(report["tornTailAt"]["line"], 6, "{name}: {report}");
                assert_eq!(report["tornTailAt"]["offset"], 2228, "{name}: {report}");
                assert!(
                    text.contains("torn tail at line 6 (byte 2228)"),
                    "{name}: {text}"
                );
            }
        }
        for out in [&json, &human] {
            let all = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!all.contains("salvage FILE"), "{name}: {all}");
        }
    }
}

#[test]
fn check_names_the_format_and_the_leaf_claude_resumes() {
    let file = real("compacted.jsonl");
    let report = json_of(&sessiond(&["check", path(&file), "--json"]));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["format"], "claude-code", "{report}");
    assert_eq!(report["defaultLeafId"], RESUME_LEAF, "{report}");
    assert_eq!(report["entryCount"], 62, "{report}");
    assert_eq!(report["leafCount"], 5, "{report}");
    assert!(report["bookkeepingLines"].as_u64().unwrap() > 0, "{report}");
    let human = text_of(&sessiond(&["check", path(&file)]));
    assert!(
        human.contains("Claude Code transcript") && human.contains(RESUME_LEAF),
        "{human}"
    );
}

#[test]
fn tree_marks_boundaries_the_resume_leaf_and_bookkeeping() {
    let file = real("compacted.jsonl");
    let human = text_of(&sessiond(&["tree", path(&file)]));
    assert_eq!(human.matches("compact_boundary").count(), 2, "{human}");
    assert!(
        human.contains(&format!("{} assistant", &RESUME_LEAF[..8]))
            && human.contains("◀ resume leaf"),
        "{human}"
    );
    assert!(human.contains("bookkeeping lines"), "{human}");
    // Each boundary is a root of the file: its row and the row of the line it compacted say
    // so, with the ids the file gives.
    let text = std::fs::read_to_string(&file).unwrap();
    let boundaries: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["subtype"] == "compact_boundary")
        .collect();
    assert_eq!(boundaries.len(), 2);
    for b in &boundaries {
        let (uuid, parent) = (
            b["uuid"].as_str().unwrap(),
            b["logicalParentUuid"].as_str().unwrap(),
        );
        // Rows show a uuid by its first 8 characters where they name it alone.
        let row = |id: &str| {
            human
                .lines()
                .find(|l| l.contains(&format!("{} ", &id[..8])))
                .unwrap_or_else(|| panic!("no row for {id}:\n{human}"))
                .to_owned()
        };
        assert!(
            row(uuid).ends_with(&format!("⇠ compacts {}", &parent[..8])),
            "{human}"
        );
        assert!(
            row(parent).ends_with(&format!("⇢ compacted by {}", &uuid[..8])),
            "{human}"
        );
    }
    let doc = json_of(&sessiond(&["tree", path(&file), "--json"]));
    assert_eq!(doc["format"], "claude-code");
    assert_eq!(doc["defaultLeafId"], RESUME_LEAF);
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 62);
    let kinds: Vec<&str> = doc["bookkeeping"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["type"].as_str())
        .collect();
    assert!(kinds.contains(&"last-prompt") && kinds.contains(&"queue-operation"));
}

#[test]
fn a_subagent_links_to_the_tool_call_that_started_it_and_back() {
    let parent = real("with-subagent.jsonl");
    let sub = real("with-subagent/subagents/agent-a46c5597fd4041ded.jsonl");
    let doc = json_of(&sessiond(&["tree", path(&parent), "--json"]));
    let subagents = doc["subagents"].as_array().unwrap();
    assert_eq!(subagents.len(), 1, "{doc}");
    assert_eq!(subagents[0]["toolUseId"], "toolu_21_0");
    let call = subagents[0]["toolUseEntryId"].as_str().unwrap();
    let node = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == call)
        .expect("the Agent call is a line of the parent");
    assert!(
        node["preview"].as_str().unwrap().starts_with("Agent("),
        "{node}"
    );
    let back = json_of(&sessiond(&["tree", path(&sub), "--json"]));
    assert_eq!(back["subagentOf"]["toolUseEntryId"], call, "{back}");
    assert_eq!(
        back["subagentOf"]["file"].as_str().map(PathBuf::from),
        Some(parent)
    );
    // Its own transcript is its main conversation: the last line is the leaf read by default.
    let human = text_of(&sessiond(&["tree", path(&sub)]));
    assert!(!human.contains("apart from"), "{human}");
    assert!(human.contains("◀ last line"), "{human}");
}

#[test]
fn context_and_explain_speak_of_what_claude_sends() {
    let file = real("compacted.jsonl");
    let doc = json_of(&sessiond(&["context", path(&file), "--json"]));
    assert_eq!(doc["format"], "claude-code");
    assert_eq!(doc["leafId"], RESUME_LEAF);
    let messages = doc["messages"].as_array().unwrap();
    // After the second /compact: the summary opens the context.
    let first = messages[0]["content"].as_str().unwrap_or_default();
    assert!(
        first.starts_with("This session is being continued"),
        "{first}"
    );
    assert_eq!(doc["midConversationSystem"], true);
    assert!(doc["sendTime"]["userContext"].is_string());
    // A line before the last boundary, a bookkeeping line, and a line of the context.
    let before = doc["dropped"].as_array().unwrap();
    assert!(
        before.is_empty() || before.iter().all(|d| d["why"]["kind"].is_string()),
        "{doc}"
    );
    let first_prompt = "7c758304-dca2-4984-b8be-edfce669f4c5";
    let ex = json_of(&sessiond(&["explain", path(&file), first_prompt, "--json"]));
    assert_eq!(ex["inContext"], false);
    assert_eq!(ex["reason"]["kind"], "beforeCompactBoundary", "{ex}");
    let ex = json_of(&sessiond(&["explain", path(&file), "line:1", "--json"]));
    assert_eq!(ex["reason"]["kind"], "bookkeeping", "{ex}");
    let ex = json_of(&sessiond(&["explain", path(&file), RESUME_LEAF, "--json"]));
    assert_eq!(ex["inContext"], true, "{ex}");
    // --model is Claude's: a pi session refuses it.
    let pi = repo().join("examples/pi-v3-branched.jsonl");
    let out = sessiond(&["context", path(&pi), "--model", "m"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn writes_and_pi_only_commands_are_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jsonl");
    std::fs::copy(real("compacted.jsonl"), &file).unwrap();
    let before = std::fs::read(&file).unwrap();
    let f = path(&file);
    let refused: Vec<Vec<&str>> = vec![
        vec!["label", f, RESUME_LEAF, "x", "--expected-leaf", RESUME_LEAF],
        vec!["name", f, "x", "--expected-leaf", RESUME_LEAF],
        vec![
            "append",
            f,
            "--entry",
            "{\"type\":\"custom\"}",
            "--expected-leaf",
            RESUME_LEAF,
        ],
        vec!["compact", f, "--expected-leaf", RESUME_LEAF],
        vec!["salvage", f],
    ];
    for args in refused {
        let mut with_json = args.clone();
        with_json.push("--json");
        let out = sessiond(&with_json);
        assert_eq!(out.status.code(), Some(10), "{args:?}: {out:?}");
        let doc = json_of(&out);
        assert_eq!(
            doc["error"]["kind"], "unsupportedForFormat",
            "{args:?}: {doc}"
        );
        assert_eq!(doc["error"]["format"], "claude-code", "{args:?}: {doc}");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains("Claude Code"), "{message}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), before, "nothing was written");
}

#[test]
fn a_codex_rollout_is_told_apart_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let codex = dir.path().join("rollout.jsonl");
    std::fs::write(
        &codex,
        "{\"timestamp\":\"2026-12-04T00:00:00Z\",\"type\":\"session_meta\",\"payload\":{\"id\":\"t1\"}}\n",
    )
    .unwrap();
    let out = sessiond(&["check", path(&codex), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let doc = json_of(&out);
    assert_eq!(doc["format"], "codex", "{doc}");
    assert_eq!(doc["sessionId"], "t1", "{doc}");
    let before = std::fs::read(&codex).unwrap();
    let out = sessiond(&[
        "label",
        path(&codex),
        "0",
        "x",
        "--expected-leaf",
        "0",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(10), "{out:?}");
    assert_eq!(json_of(&out)["error"]["format"], "codex");
    assert_eq!(
        std::fs::read(&codex).unwrap(),
        before,
        "nothing was written"
    );
}

#[test]
fn the_daemon_reads_a_transcript_as_the_command_line_does_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jsonl");
    std::fs::copy(real("compacted.jsonl"), &file).unwrap();
    let before = std::fs::read(&file).unwrap();
    let f = path(&file);
    let (mut d, _) = support::Daemon::start(&[dir.path()]);
    let open = support::checked(&mut d, "session/open", serde_json::json!({"path": f}));
    assert_eq!(open["format"], "claude-code", "{open}");
    assert_eq!(open["leafId"], RESUME_LEAF, "{open}");
    assert_eq!(open["entryCount"], 62);
    let tree = support::checked(&mut d, "session/tree", serde_json::json!({"path": f}));
    assert_eq!(tree["leafId"], RESUME_LEAF);
    assert_eq!(tree["format"], "claude-code", "the tree says its format");
    let ctx = support::checked(&mut d, "session/contextAt", serde_json::json!({"path": f}));
    let cli = json_of(&sessiond(&["context", f, "--json"]));
    assert_eq!(ctx["messages"], cli["messages"]);
    assert_eq!(ctx["entryIds"], cli["entryIds"]);
    assert_eq!(
        ctx["messageCount"],
        cli["messages"].as_array().unwrap().len()
    );
    let ids = support::checked(
        &mut d,
        "session/contextAt",
        serde_json::json!({"path": f, "fields": "ids", "offset": 1}),
    );
    assert!(ids.get("messages").is_none(), "{ids}");
    assert_eq!(ids["entryIds"], cli["entryIds"]);
    // A window of the messages, whole and as previews (each the preview of a user line holding
    // the message's content, with the message's role).
    let all = cli["messages"].as_array().unwrap();
    let window = serde_json::json!({"path": f, "offset": 2, "limit": 3});
    let full = support::checked(&mut d, "session/contextAt", window.clone());
    assert_eq!(full["messages"].as_array().unwrap()[..], all[2..5]);
    assert_eq!(full["messageCount"], all.len());
    let mut previews = window;
    previews["fields"] = "previews".into();
    let previews = support::checked(&mut d, "session/contextAt", previews);
    let expected: Vec<Value> = all[2..5]
        .iter()
        .map(|m| {
            let line = serde_json::json!({"type": "user", "message": {"content": m["content"]}});
            serde_json::json!({
                "role": m["role"],
                "preview": sessiond::dialect::claude::preview::line_preview(&line),
            })
        })
        .collect();
    assert_eq!(previews["messages"], Value::Array(expected), "{previews}");
    let ex = support::checked(
        &mut d,
        "session/explain",
        serde_json::json!({"path": f, "entryId": "line:1"}),
    );
    assert_eq!(ex["reason"]["kind"], "bookkeeping", "{ex}");
    let entry = support::checked(
        &mut d,
        "session/entry",
        serde_json::json!({"path": f, "id": RESUME_LEAF}),
    );
    assert_eq!(entry["entry"]["uuid"], RESUME_LEAF);
    assert_eq!(entry["format"], "claude-code", "the entry says its format");
    let graph = support::checked(&mut d, "session/graph", serde_json::json!({"path": f}));
    assert_eq!(graph["format"], "claude-code", "the graph says its format");
    assert_eq!(
        json_of(&sessiond(&["graph", f, "--json"]))["format"],
        "claude-code"
    );
    let verified = support::checked(
        &mut d,
        "session/verifyResume",
        serde_json::json!({"path": f}),
    );
    assert_eq!(verified["format"], "claude-code", "{verified}");
    assert_eq!(
        json_of(&sessiond(&["verify", f, "--json"]))["format"],
        "claude-code"
    );
    let forked = support::checked(
        &mut d,
        "session/fork",
        serde_json::json!({"path": f, "entryId": RESUME_LEAF, "position": "at"}),
    );
    assert_eq!(forked["format"], "claude-code", "{forked}");
    for (method, params) in [
        (
            "session/label",
            serde_json::json!({"path": f, "targetId": RESUME_LEAF, "label": "x", "expectedLeafId": RESUME_LEAF}),
        ),
        (
            "session/append",
            serde_json::json!({"path": f, "entry": {"type": "custom"}, "expectedLeafId": RESUME_LEAF}),
        ),
        (
            "session/setName",
            serde_json::json!({"path": f, "name": "x", "expectedLeafId": RESUME_LEAF}),
        ),
        (
            "session/branch",
            serde_json::json!({"path": f, "fromId": RESUME_LEAF, "summary": "s", "expectedLeafId": RESUME_LEAF}),
        ),
        (
            "session/compact",
            serde_json::json!({"path": f, "summary": "s", "expectedLeafId": RESUME_LEAF}),
        ),
        ("session/salvage", serde_json::json!({"path": f})),
    ] {
        let (code, message, data) = support::error_of(&d.request(method, params));
        assert_eq!(code, -33021, "{method}: {message}");
        assert_eq!(data["format"], "claude-code", "{method}: {data}");
        assert_eq!(
            data["operation"], method,
            "the refusal names the method: {data}"
        );
        assert!(message.contains(method), "{message}");
    }
    let pi_only = d.request(
        "session/contextAt",
        serde_json::json!({"path": f, "model": "claude-sonnet-4-5"}),
    );
    assert!(
        pi_only.get("result").is_some(),
        "model is taken for a transcript: {pi_only}"
    );
    d.stop();
    assert_eq!(std::fs::read(&file).unwrap(), before, "nothing was written");
}

/// With no root configured, the daemon serves pi's sessions directory and, when it exists,
/// Claude Code's projects directory (`$CLAUDE_CONFIG_DIR/projects`).
#[test]
fn claude_s_projects_directory_is_a_default_root() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claude-config");
    let project = config.join("projects").join("-w");
    std::fs::create_dir_all(&project).unwrap();
    let file = project.join("t.jsonl");
    std::fs::copy(real("compacted.jsonl"), &file).unwrap();
    let pi = home.path().join("pi");
    let options = support::Spawn {
        env: vec![
            ("HOME", home.path().to_str().unwrap()),
            ("CLAUDE_CONFIG_DIR", config.to_str().unwrap()),
            ("PI_CODING_AGENT_DIR", pi.to_str().unwrap()),
        ],
        ..support::Spawn::default()
    };
    let (mut d, init) = support::Daemon::start_with(&[], &options);
    let roots = init["result"]["capabilities"]["experimental"]["sessiond"]["roots"].clone();
    let projects = std::fs::canonicalize(config.join("projects")).unwrap();
    assert!(
        roots
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str() == projects.to_str()),
        "{roots}"
    );
    let open = support::checked(
        &mut d,
        "session/open",
        serde_json::json!({"path": path(&file)}),
    );
    assert_eq!(open["format"], "claude-code");
    d.stop();
}

/// A line that adds no entry but moves the leaf Claude Code resumes (a `last-prompt` naming
/// another leaf) is announced: one `session/didChange` with nothing added and the new leaf,
/// which `session/tree` then uses. A line that moves nothing is not announced.
#[test]
fn a_bookkeeping_line_that_moves_the_resume_leaf_is_announced() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let file = root.join("t.jsonl");
    let first = serde_json::json!({"parentUuid": null, "isSidechain": false, "type": "user",
        "message": {"role": "user", "content": "p"}, "uuid": "p",
        "timestamp": "2026-12-04T17:59:00.000Z", "userType": "external",
        "cwd": "/tmp/corpus-final/work", "sessionId": "6d2e238c-d8e6-4579-9b3a-0130d30ea9b9",
        "version": "2.1.197", "gitBranch": "HEAD"});
    std::fs::write(
        &file,
        format!(
            "{first}\n{}\n{}\n",
            support::claude_prompt("one", "p", "one"),
            support::claude_prompt("two", "p", "two")
        ),
    )
    .unwrap();
    let f = path(&file);
    let (mut d, _) = support::Daemon::start(&[&root]);
    let open = support::checked(&mut d, "session/open", serde_json::json!({"path": f}));
    assert_eq!(open["leafId"], "two", "{open}");
    let last_prompt = format!(
        "{}\n",
        serde_json::json!({"type": "last-prompt", "lastPrompt": "one", "leafUuid": "one",
            "sessionId": "6d2e238c-d8e6-4579-9b3a-0130d30ea9b9"})
    );
    support::append(&file, &last_prompt);
    let change = d
        .notification("session/didChange", support::NOTE_WAIT)
        .expect("a didChange for the moved leaf");
    assert_eq!(change["added"], serde_json::json!([]), "{change}");
    assert_eq!(change["leafId"], "one", "{change}");
    assert_eq!(change["entryCount"], open["entryCount"], "{change}");
    assert_eq!(change["leaves"], open["leaves"], "{change}");
    let tree = support::checked(&mut d, "session/tree", serde_json::json!({"path": f}));
    assert_eq!(tree["leafId"], "one");
    support::append(&file, &last_prompt);
    let _ = support::checked(&mut d, "session/tree", serde_json::json!({"path": f}));
    assert!(
        d.notification("session/didChange", std::time::Duration::from_millis(500))
            .is_none(),
        "nothing moved"
    );
    d.stop();
}

/// A transcript's `session/tree` pages as a pi session's does: pages of at most `limit`
/// nodes whose `next` cursors, followed, bring every node once, and equal the one-page tree.
#[test]
fn the_daemon_pages_a_transcript_s_tree() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jsonl");
    std::fs::copy(real("compacted.jsonl"), &file).unwrap();
    let f = path(&file);
    let (mut d, _) = support::Daemon::start(&[dir.path()]);
    support::checked(&mut d, "session/open", serde_json::json!({"path": f}));
    let whole = support::checked(&mut d, "session/tree", serde_json::json!({"path": f}));
    assert_eq!(whole["complete"], true, "{whole}");
    let mut want: Vec<String> = whole["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(want.len(), 62);
    let mut seen: Vec<String> = Vec::new();
    let mut todo = vec![serde_json::json!({})];
    let mut pages = 0;
    while let Some(start) = todo.pop() {
        let mut params = serde_json::json!({"path": f, "limit": 5});
        for (k, v) in start.as_object().unwrap() {
            params[k] = v.clone();
        }
        let page = support::checked(&mut d, "session/tree", params.clone());
        pages += 1;
        let nodes = page["nodes"].as_array().unwrap();
        assert!(!nodes.is_empty() && nodes.len() <= 5, "{params}: {page}");
        assert_eq!(page["leafId"], RESUME_LEAF);
        seen.extend(nodes.iter().map(|n| n["id"].as_str().unwrap().to_owned()));
        let next = page["next"].as_array().unwrap();
        assert_eq!(page["complete"], serde_json::json!(next.is_empty()));
        todo.extend(next.iter().rev().cloned());
    }
    assert!(pages > 62 / 5, "{pages} pages");
    seen.sort();
    want.sort();
    assert_eq!(seen, want, "every node once");
    d.stop();
}

/// Without `CLAUDE_CONFIG_DIR`, Claude Code's projects directory is `$HOME/.claude/projects`:
/// a default root of the daemon when it exists.
#[test]
fn claude_s_projects_directory_under_home_is_a_default_root() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join(".claude").join("projects").join("-w");
    std::fs::create_dir_all(&project).unwrap();
    let file = project.join("t.jsonl");
    std::fs::copy(real("compacted.jsonl"), &file).unwrap();
    let pi = home.path().join("pi");
    let options = support::Spawn {
        env: vec![
            ("HOME", home.path().to_str().unwrap()),
            ("PI_CODING_AGENT_DIR", pi.to_str().unwrap()),
            // Empty is unset, as Claude Code reads it.
            ("CLAUDE_CONFIG_DIR", ""),
        ],
        ..support::Spawn::default()
    };
    let (mut d, init) = support::Daemon::start_with(&[], &options);
    let roots = init["result"]["capabilities"]["experimental"]["sessiond"]["roots"].clone();
    let projects = std::fs::canonicalize(home.path().join(".claude/projects")).unwrap();
    assert!(
        roots
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str() == projects.to_str()),
        "{roots}"
    );
    let open = support::checked(
        &mut d,
        "session/open",
        serde_json::json!({"path": path(&file)}),
    );
    assert_eq!(open["format"], "claude-code");
    d.stop();
}
