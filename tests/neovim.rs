//! The Neovim plugin (editors/neovim) driven by a real headless Neovim, as a user drives it:
//! `tests/neovim/plugin.lua` types commands, presses mappings on the cursor line of the tree
//! view and answers prompts, against the real daemon, on a copy of the real example session
//! (1,033 entries, three leaves); it reports what buffers, lists and messages then hold, and
//! these tests check that against the session file, the CLI and the file after each write.
//! `tests/neovim/capture.lua` captures the tree view from a terminal, kept in
//! `tests/neovim/tree-view.screen` (shown in editors/neovim/README.md).
//!
//! Neovim comes from `$SESSIOND_NVIM` or `PATH` (`scripts/test-deps.sh` installs one); without
//! it the tests skip, except under `CI=true`, where they fail.
#![allow(clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::{cli_json, repo};

/// `nvim` from `$SESSIOND_NVIM` or `PATH`; None (the test skips) only outside CI.
fn find_nvim() -> Option<PathBuf> {
    support::find_program("SESSIOND_NVIM", "nvim", "run scripts/test-deps.sh")
}

/// Headless `nvim --clean -l tests/neovim/SCRIPT` in `dir` with the plugin and this build's
/// daemon, its state and configuration under `dir`.
fn headless(nvim: &Path, script: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(nvim);
    cmd.args(["--headless", "--clean", "-l"])
        .arg(repo().join("tests/neovim").join(script))
        .current_dir(dir)
        .env("SESSIOND_PLUGIN", repo().join("editors/neovim"))
        .env("SESSIOND_HARNESS", repo().join("tests/neovim/harness.lua"))
        .env("SESSIOND_BIN", support::BIN)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdin(Stdio::null());
    cmd
}

const EXAMPLE: &str = "examples/pi-v3-branched.jsonl";

/// Entry ids of a session file, in file order (the header has none).
fn file_entries(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("read session")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("entry line"))
        .collect()
}

/// A JSON array of strings (`what` names it when it is not).
fn strs<'a>(v: &'a Value, what: &str) -> Vec<&'a str> {
    v.as_array()
        .unwrap_or_else(|| panic!("{what} is not an array: {v}"))
        .iter()
        .map(|x| s(x, what))
        .collect()
}

fn s<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"))
}

#[test]
fn neovim_plugin_driven_as_a_user() {
    let Some(nvim) = find_nvim() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).expect("mkdir");
    let file = root.join("s.jsonl");
    std::fs::copy(repo().join(EXAMPLE), &file).expect("copy");
    let out = dir.path().join("report.json");
    let append = json!({"type": "message", "id": "a0a0a0a0", "parentId": "de19adb3",
        "timestamp": "2025-11-21T00:00:00.000Z", "message": {"role": "user", "content": "hello"}});
    let append2 = json!({"type": "message", "id": "b1b1b1b1", "parentId": "a0a0a0a0",
        "timestamp": "2025-11-21T00:00:01.000Z", "message": {"role": "user", "content": "again"}});
    let status = headless(&nvim, "plugin.lua", dir.path())
        .env("SESSIOND_ROOT", &root)
        .env("SESSIOND_FILE", &file)
        .env("SESSIOND_APPEND", append.to_string())
        .env("SESSIOND_APPEND2", append2.to_string())
        .env("SESSIOND_ORIGINAL", repo().join(EXAMPLE))
        .env("SESSIOND_OUT", &out)
        .status()
        .expect("run nvim");
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("no report ({status}): {e}")),
    )
    .expect("report is JSON");
    assert!(status.success(), "nvim failed: {r:#}");

    // Commands exist before setup(); a command before any open says what to do.
    for (name, defined) in r["commandsBeforeSetup"].as_object().expect("commands") {
        assert_eq!(defined, &json!(true), "{name}");
    }
    assert_eq!(
        r["commandsBeforeSetup"].as_object().map(|o| o.len()),
        Some(14)
    );
    assert!(
        s(&r["beforeOpen"], "beforeOpen").contains("no session open: run :SessiondOpen FILE"),
        "{}",
        r["beforeOpen"]
    );
    assert_eq!(
        r["open"],
        json!("sessiond: Untangle run modes: 1033 entries, 3 leaves")
    );

    // The tree: every entry of the file once, folded where the CLI folds, leaves marked.
    let example = file_entries(&repo().join(EXAMPLE));
    let want: BTreeSet<&str> = example.iter().map(|e| s(&e["id"], "id")).collect();
    let ids: Vec<&str> = strs(&r["tree"]["ids"], "tree id");
    assert_eq!(ids.len(), 1033);
    assert_eq!(ids.iter().copied().collect::<BTreeSet<_>>(), want);
    let tree = &r["tree"];
    assert_eq!(tree["filetype"], json!("sessiondtree"));
    assert_eq!(tree["syntax"], json!("sessiondtree"));
    assert_eq!(
        tree["header"][0],
        json!("Untangle run modes · 1033 entries · 3 leaves · 2 branch points")
    );
    assert_eq!(tree["closedFolds"], json!(4));
    assert_eq!(
        tree["foldText"],
        json!("┆ 23 entries folded: 12 toolResult, 8 assistant, 2 user, …")
    );
    assert_eq!(tree["foldTextInside"], tree["foldText"]);
    let leaf_lines: Vec<&str> = strs(&tree["leafLines"], "leaf line");
    assert_eq!(leaf_lines.len(), 3, "{leaf_lines:?}");
    // Marks and labels before the preview, where any window shows them.
    assert!(
        leaf_lines[0].ends_with("8a9bb12f session_info          ◀ leaf  name: Untangle run modes"),
        "{}",
        leaf_lines[0]
    );
    assert!(
        leaf_lines[1].ends_with("610f9c1e thinking_level_change ◀ resume leaf  thinking: high"),
        "{}",
        leaf_lines[1]
    );
    assert!(
        leaf_lines[2].contains("de19adb3 user                  ◀ leaf  Actually,"),
        "{}",
        leaf_lines[2]
    );
    assert_eq!(tree["branchLines"].as_array().map(Vec::len), Some(4));
    assert!(
        s(&tree["labelled"], "labelled")
            .starts_with("e82f60b2 user                  [before-refactor] "),
        "{}",
        tree["labelled"]
    );
    assert!(s(&tree["compaction"], "compaction").contains("4909db93 compaction"));
    assert_eq!(tree["q"], json!("sessiond: close the view"));

    // Showing the view again reuses its buffer and window.
    let reuse = &r["reuse"];
    assert_eq!(reuse["sameBuffer"], json!(true));
    assert_eq!(reuse["windowsAfter"], reuse["windowsBefore"]);
    assert_eq!(reuse["treeBuffers"], json!(1));

    // K: the CLI's sentence, and the entry it points to.
    let cli = Command::new(support::BIN)
        .args(["explain"])
        .arg(repo().join(EXAMPLE))
        .arg("00247798")
        .output()
        .expect("sessiond explain");
    let sentence = String::from_utf8_lossy(&cli.stdout).trim().to_owned();
    let explain = s(&r["explain"], "explain");
    let capitalized = format!("E{}", &sentence[1..]);
    assert!(explain.contains(&capitalized), "{explain} vs {sentence}");
    assert!(explain.contains("→ 4909db93 compaction"), "{explain}");

    // Jumps.
    assert_eq!(
        r["jumps"],
        json!({"referenced": "4909db93", "parent": "c4e3e103", "leaf": "610f9c1e",
            "prevBranch": "521cf246", "nextBranch": "088a3b48"})
    );

    // <CR>: the context at the entry, as the CLI computes it; its diagnostics in the location list.
    let ctx = cli_json(&[
        "context",
        "--json",
        "--leaf",
        "088a3b48",
        repo().join(EXAMPLE).to_str().expect("utf-8"),
    ]);
    let context = &r["context"];
    assert_eq!(context["leafLine"], json!("- leaf: 088a3b48"));
    assert_eq!(
        context["headings"].as_u64(),
        ctx["messages"].as_array().map(|m| m.len() as u64)
    );
    assert_eq!(
        context["loclist"].as_u64(),
        ctx["diagnostics"].as_array().map(|d| d.len() as u64)
    );
    assert_eq!(context["loclist"], json!(18));
    assert!(s(&context["firstDiagnostic"], "diagnostic").contains("entry 7e62fec3"));

    // Writes, checked in the file (as it was before it was replaced at the end).
    let entries = file_entries(&root.join("s.jsonl.before-replace"));
    let label = entries
        .iter()
        .rev()
        .find(|e| e["type"] == json!("label"))
        .expect("a label entry in the file");
    assert_eq!(label["targetId"], json!("521cf246"));
    assert_eq!(label["label"], json!("before refactor"));
    assert!(
        s(&r["label"]["line"], "label line")
            .contains("521cf246 user                  [before refactor] "),
        "{}",
        r["label"]["line"]
    );
    assert_eq!(r["label"]["cursor"], json!("521cf246"));

    // :SessiondGraph: the daemon's text form, line for line what `sessiond graph` prints;
    // <CR> on a fold or an entry jumps to that entry in the tree, its fold opened.
    let graph = &r["graph"];
    assert_eq!(graph["lines"], graph["cli"]);
    let glines: Vec<&str> = strs(&graph["lines"], "graph line");
    assert!(glines.len() < 30, "folded: {glines:#?}");
    assert!(
        glines[0].starts_with("session Untangle run modes"),
        "{}",
        glines[0]
    );
    assert!(
        glines.iter().any(|l| l.starts_with("|\\")),
        "a branch: {glines:#?}"
    );
    assert!(
        glines
            .iter()
            .any(|l| l.contains("● 4909db93 compaction") && l.contains("keeps from 521cf246")),
        "{glines:#?}"
    );
    assert!(s(&graph["name"], "graph name").starts_with("sessiond://graph/"));
    assert_eq!(
        graph["jump"],
        json!("sessiond: jump to this entry in the tree view")
    );
    for (jump, id) in [("jumpFold", "74473962"), ("jumpCompaction", "4909db93")] {
        assert_eq!(graph[jump]["buf"], json!(true), "{jump}");
        assert_eq!(graph[jump]["id"], json!(id), "{jump}");
        assert_eq!(graph[jump]["fold"], json!(-1), "{jump}: the fold is open");
    }

    // A live append from another process: in the open view, the cursor where it was.
    let app = &r["append"];
    assert!(
        s(&app["line"], "appended").contains("a0a0a0a0 user"),
        "{app}"
    );
    assert_eq!(app["cursor"], json!("de19adb3"));
    assert_eq!(
        app["contextLeafLine"],
        json!("- leaf: a0a0a0a0 (the resume leaf)")
    );
    assert_eq!(
        app["linesAfter"].as_u64(),
        app["linesBefore"].as_u64().map(|n| n + 1)
    );

    let fork = s(&r["fork"], "fork");
    let forked = fork
        .split(" into ")
        .nth(1)
        .and_then(|t| t.split(" (").next())
        .expect("the fork's path");
    let fork_entries = file_entries(Path::new(forked));
    // The path ends at the entry; pi re-chains the path's labels after it.
    assert_eq!(
        fork_entries
            .iter()
            .rev()
            .find(|e| e["type"] != json!("label"))
            .map(|e| e["id"].clone()),
        Some(json!("886c2fdc"))
    );

    let compact = s(&r["compact"], "compact");
    assert!(
        compact.contains("Retention:") && r["compactChoices"] == json!(["Compact", "Cancel"]),
        "{compact}"
    );
    assert!(
        s(&r["compactPrompt"], "prompt").contains("compaction would take the context of 088a3b48")
    );
    let new_id = compact
        .split("New entry ")
        .nth(1)
        .map(|t| t.trim_end_matches('.'))
        .expect("new entry id");
    let written = entries
        .iter()
        .find(|e| e["id"] == json!(new_id))
        .expect("the compaction in the file");
    assert_eq!(written["type"], json!("compaction"));
    assert_eq!(written["parentId"], json!("088a3b48"));
    assert!(s(&r["compactLine"], "compaction line").contains(&format!("{new_id} compaction")));

    // Errors say what to do; ids complete.
    let unknown = s(&r["unknownId"], "unknown id");
    assert!(
        unknown.contains("unknown entry id deadbeef") && unknown.contains("pick an entry"),
        "{unknown}"
    );
    assert!(!unknown.contains("invalid"), "{unknown}");
    let completion: Vec<&str> = strs(&r["completion"], "id");
    assert!(completion.contains(&"4909db93"), "{completion:?}");
    assert!(completion.iter().all(|c| c.starts_with("4909")));
    assert_eq!(r["completionLeaves"][0], json!("8a9bb12f"));

    // Verify and search: used when the daemon offers them, refused clearly when not.
    for (key, method) in [
        ("verify", "session/verifyResume"),
        ("search", "session/search"),
    ] {
        let msg = s(&r[key], key);
        if r["offers"][key] == json!(true) {
            assert!(!msg.contains("does not offer"), "{msg}");
        } else {
            assert!(msg.contains(&format!("does not offer {method}")), "{msg}");
        }
    }
    // This daemon serves session/verifyResume: the quickfix list holds exactly its warn and
    // fail findings. The copy's cwd (the author's machine) does not exist here: that is a fail.
    assert_eq!(
        r["offers"]["verify"],
        json!(true),
        "verifyResume not offered"
    );
    let qf = &r["verifyQuickfix"];
    let title = s(&qf["title"], "quickfix title");
    let counts: Vec<u64> = title
        .rsplit(": ")
        .next()
        .unwrap_or_default()
        .split(", ")
        .filter_map(|c| c.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(counts.len(), 3, "ok, warn, fail counts in {title}");
    assert!(title.starts_with("sessiond verify"), "{title}");
    assert_eq!(qf["size"], json!(counts[1] + counts[2]), "{title}");
    let items = qf["items"].as_array().expect("quickfix items");
    assert!(
        items
            .iter()
            .any(|i| s(&i["text"], "text").starts_with("[fail] cwd: ") && i["type"] == json!("E")),
        "{items:?}"
    );
    assert!(
        items
            .iter()
            .all(|i| s(&i["text"], "text").starts_with("[warn] ") == (i["type"] == json!("W"))),
        "{items:?}"
    );
    assert_eq!(
        r["verifyItems"],
        json!([
            {"filename": "/x/b.ts", "lnum": 1, "type": "W",
             "text": "[warn] fileChanged: changed since the session read it (entry abcd1234)"},
            {"filename": file.to_str().expect("utf-8"), "lnum": 1, "type": "E",
             "text": "[fail] cwdMissing: the working directory is gone"},
        ])
    );

    // The picker lists the sessions under the root, with their agent and project, counts and
    // pi's token estimate (the session has grown by three entries and a branch above).
    let items: Vec<&str> = strs(&r["list"]["items"], "item");
    assert!(
        items.iter().any(|i| i.starts_with(
            "pi › pi-mono  ·  Untangle run modes  ·  1036 entries, 4 leaves  ·  ~21507 tokens"
        )),
        "{items:?}"
    );

    // A killed daemon: reported, restarted, sessions opened again and followed.
    assert!(s(&r["crash"], "crash").contains("stopped unexpectedly (signal 9)"));
    assert!(s(&r["restarted"], "restarted").contains("2 sessions open again"));
    assert_ne!(r["newPid"], r["killedPid"]);
    assert!(s(&r["afterRestart"], "after restart").contains("b1b1b1b1 user"));

    // The file replaced under the open view (a rename over it): read again, redrawn, the
    // cursor still on its entry.
    assert!(s(&r["reloaded"], "reload").contains("s.jsonl was read again (replaced)"));
    assert_eq!(
        r["afterReload"],
        json!({"lines": 1035, "cursor": "521cf246",
            "header": "Untangle run modes · 1033 entries · 3 leaves · 2 branch points"})
    );
    assert_eq!(r["chained"], json!(true));

    assert_eq!(r["closed"], json!(true));

    let health = r["health"]
        .as_array()
        .expect("health")
        .iter()
        .map(|v| s(v, "health line"))
        .collect::<Vec<_>>()
        .join("\n");
    for want in [
        "OK found ",
        "OK version: sessiond ",
        "OK protocol version 0.2.0",
        "is readable",
    ] {
        assert!(health.contains(want), "{want} not in\n{health}");
    }
    for (tag, ok) in r["help"].as_object().expect("help") {
        assert_eq!(ok, &json!(true), ":help {tag}");
    }
}

/// The tree view of the real example as a terminal shows it, compared with the kept capture
/// `tests/neovim/tree-view.screen`; `SESSIOND_UPDATE_CAPTURE=1` writes it instead.
#[test]
fn neovim_tree_view_terminal_capture() {
    let Some(nvim) = find_nvim() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("s.jsonl");
    std::fs::copy(repo().join(EXAMPLE), &file).expect("copy");
    let capture = dir.path().join("screen.txt");
    let status = headless(&nvim, "capture.lua", dir.path())
        .env("SESSIOND_NVIM_BIN", &nvim)
        .env("SESSIOND_ROOT", dir.path())
        .env("SESSIOND_FILE", &file)
        .env("SESSIOND_CAPTURE", &capture)
        .status()
        .expect("run nvim");
    let screen = std::fs::read_to_string(&capture).expect("capture written");
    assert!(status.success(), "the tree did not appear:\n{screen}");
    let kept_path = repo().join("tests/neovim/tree-view.screen");
    if std::env::var_os("SESSIOND_UPDATE_CAPTURE").is_some() {
        std::fs::write(&kept_path, &screen).expect("write capture");
        return;
    }
    let kept = std::fs::read_to_string(&kept_path).expect("tests/neovim/tree-view.screen");
    let readme = std::fs::read_to_string(repo().join("editors/neovim/README.md")).expect("README");
    assert!(
        readme.contains(&format!(
            "```\n{}```",
            kept.trim_end_matches('\n').to_owned() + "\n"
        )),
        "editors/neovim/README.md must show tests/neovim/tree-view.screen as it is"
    );
    assert_eq!(
        screen, kept,
        "the tree view changed; if intended, run with SESSIOND_UPDATE_CAPTURE=1 and update editors/neovim/README.md"
    );
}

/// Runs `tests/neovim/SCRIPT` in `dir` with `envs`; the report it wrote (the test fails with it
/// when Neovim did).
fn run_script(nvim: &Path, script: &str, dir: &Path, envs: &[(&str, &Path)]) -> Value {
    let out = dir.join("report.json");
    let mut cmd = headless(nvim, script, dir);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let status = cmd.env("SESSIOND_OUT", &out).status().expect("run nvim");
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("no report ({status}): {e}")),
    )
    .expect("report is JSON");
    assert!(status.success(), "nvim failed: {r:#}");
    r
}

/// The entry ids a report buffer lists under its heading `## TITLE (N)`, in order, and N.
fn section_ids<'a>(lines: &[&'a str], title: &str) -> (Vec<&'a str>, usize) {
    let head = format!("## {title} (");
    let at = lines
        .iter()
        .position(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no section {title:?} in {lines:#?}"));
    let n = lines[at][head.len()..]
        .trim_end_matches(')')
        .parse()
        .expect("a count");
    let ids = lines[at + 1..]
        .iter()
        .take_while(|l| !l.starts_with("## ") && !l.is_empty())
        .map(|l| l.split_whitespace().next().expect("an id"))
        .collect();
    (ids, n)
}

/// The ids of a list of `{id, …}` objects.
fn ids_of(v: &Value) -> Vec<&str> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|e| s(&e["id"], "id"))
        .collect()
}

/// What a context window of the comparison shows, checked against `sessiond context --json`:
/// its leaf line, and one heading per message the CLI computes.
fn assert_context_window(w: &Value, kind: &str, file: &Path, leaf: &str, leaf_line: &str) {
    assert!(
        s(&w["name"], "name").starts_with(&format!("sessiond://{kind}/")),
        "{}",
        w["name"]
    );
    assert_eq!(w["diff"], json!(true), "{kind} in diff mode");
    assert!(
        w["differing"].as_u64() > Some(0),
        "{kind}: diff marks lines"
    );
    let lines = strs(&w["lines"], "line");
    assert_eq!(lines[3], leaf_line);
    let cli = cli_json(&[
        "context",
        "--json",
        "--leaf",
        leaf,
        file.to_str().expect("utf-8"),
    ]);
    let headings = lines
        .iter()
        .filter(|l| {
            l.strip_prefix("## ")
                .and_then(|t| t.split(". ").next())
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    assert_eq!(Some(headings), cli["messages"].as_array().map(Vec::len));
}

/// `:SessiondDiff` and `D`: two leaves' contexts side by side in diff mode over the comparison's
/// report, each checked against the CLI (`sessiond diff --json`, `sessiond context --json`);
/// `K` on the compaction and on the branch summary: their audits as `sessiond explain --json`
/// gives them, and <CR> on a lost fact or a report line landing on its entry in the tree, its
/// fold opened.
/// "Rewind files to here": `gR` on a prompt of a pi session whose records wrote and edited
/// files shows the dry run's diff before asking, then rewinds; a drifted file refuses the
/// rewind (nothing changed, not asked); `:SessiondRewind!` rewinds it anyway.
#[test]
fn neovim_rewinds_files_to_an_entry_after_showing_the_diff() {
    let Some(nvim) = find_nvim() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    let (root, work) = (base.join("sessions"), base.join("work"));
    for d in [&root, &work] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(work.join("existing.txt"), "alpha\nBETA\n").expect("write");
    std::fs::write(work.join("notes.txt"), "one\n").expect("write");
    let t = "2026-01-01T00:00:00.000Z";
    let assistant = |id: &str, parent: &str, call: Value| {
        json!({"type": "message", "id": id, "parentId": parent, "timestamp": t, "message": {
            "role": "assistant", "content": [call], "api": "openai-completions", "provider": "p",
            "model": "m", "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
            "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
            "total": 0}}, "stopReason": "toolUse", "timestamp": 1}})
    };
    let result = |id: &str, parent: &str, call: &str, details: Value| {
        json!({"type": "message", "id": id, "parentId": parent, "timestamp": t, "message": {
            "role": "toolResult", "toolCallId": call, "toolName": "x",
            "content": [{"type": "text", "text": "Successfully done"}], "details": details,
            "isError": false, "timestamp": 1}})
    };
    let user = |id: &str, parent: Value, text: &str| {
        json!({"type": "message", "id": id, "parentId": parent, "timestamp": t, "message": {
            "role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}})
    };
    let lines = [
        json!({"type": "session", "version": 3, "id": "0199a0b2-0000-7000-8000-00000000aaaa",
            "timestamp": t, "cwd": work}),
        user("aaaa0001", Value::Null, "make notes"),
        assistant(
            "aaaa0002",
            "aaaa0001",
            json!({"type": "toolCall", "id": "c1", "name": "write",
            "arguments": {"path": "notes.txt", "content": "one\n"}}),
        ),
        result("aaaa0003", "aaaa0002", "c1", Value::Null),
        user("aaaa0004", json!("aaaa0003"), "edit it"),
        assistant(
            "aaaa0005",
            "aaaa0004",
            json!({"type": "toolCall", "id": "c2", "name": "edit",
            "arguments": {"path": "existing.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}}),
        ),
        result(
            "aaaa0006",
            "aaaa0005",
            "c2",
            json!({"diff": "", "firstChangedLine": 2,
            "patch": "--- existing.txt\n+++ existing.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n"}),
        ),
    ];
    let file = root.join("s.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).expect("write session");
    let session = std::fs::read(&file).expect("read");
    let r = run_script(
        &nvim,
        "rewind.lua",
        &base,
        &[
            ("SESSIOND_ROOT", &root),
            ("SESSIOND_FILE", &file),
            ("SESSIOND_WORK", &work),
        ],
    );
    assert_eq!(
        r["mapping"],
        json!("sessiond: rewind files to this entry (the dry run's diff first, then confirm)")
    );
    // The diff was on screen when the question came, and it is the CLI's dry run's.
    let shown = strs(&r["shownWhenAsked"], "shown");
    assert!(
        shown[0].starts_with("# Rewind files to aaaa0004"),
        "{shown:#?}"
    );
    assert!(
        shown.contains(
            &"# restore   existing.txt: the session's edits after the entry, undone in reverse"
        ),
        "{shown:#?}"
    );
    for l in ["--- a/existing.txt", "+++ b/existing.txt", "-BETA", "+beta"] {
        assert!(shown.contains(&l), "{l}: {shown:#?}");
    }
    assert_eq!(r["choices"], json!(["Rewind files", "Cancel"]));
    assert!(s(&r["prompt"], "prompt").contains("rewind 1 file to aaaa0004"));
    assert!(s(&r["rewound"], "rewound").contains("sessiond rewind --undo"));
    assert_eq!(
        r["afterFirst"],
        json!({"existing": "alpha\nbeta\n", "notes": "one\n"})
    );
    // Drift refuses, asks nothing, changes nothing, and says why.
    assert_eq!(r["refused"], json!("drift"));
    assert!(
        s(&r["refusedMessage"], "refusal")
            .contains("notes.txt is not as the session's records leave it ("),
        "{r:#}"
    );
    assert!(
        strs(&r["refusedLines"], "line")
            .iter()
            .any(|l| l.starts_with("# REFUSED: ")),
        "{r:#}"
    );
    assert_eq!(
        r["afterRefused"],
        json!({"existing": "alpha\nBETA\n", "notes": "mine\n"})
    );
    // Forced: the file the session created is removed, the edit undone.
    assert_eq!(
        r["afterForced"],
        json!({"existing": "alpha\nbeta\n", "notes": null})
    );
    assert_eq!(
        std::fs::read(&file).expect("read"),
        session,
        "the session file is not written"
    );
}

#[test]
fn neovim_compares_two_leaves_and_audits_summaries() {
    let Some(nvim) = find_nvim() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).expect("mkdir");
    let file = root.join("s.jsonl");
    std::fs::copy(repo().join(EXAMPLE), &file).expect("copy");
    let r = run_script(
        &nvim,
        "compare.lua",
        dir.path(),
        &[("SESSIOND_ROOT", &root), ("SESSIOND_FILE", &file)],
    );
    let path = file.to_str().expect("utf-8");

    // D: the leaf under the cursor (A) against the active leaf, the default one (B).
    assert_eq!(
        r["diffMapping"],
        json!("sessiond: compare this leaf with the active leaf (:SessiondDiff)")
    );
    let diff = &r["diff"];
    assert_eq!(diff["newTab"], json!(true));
    let wins = diff["windows"].as_array().expect("windows");
    assert_eq!(wins.len(), 3, "{wins:#?}");
    assert_context_window(&wins[0], "diff-a", &file, "de19adb3", "- leaf: de19adb3");
    assert_context_window(
        &wins[1],
        "diff-b",
        &file,
        "610f9c1e",
        "- leaf: 610f9c1e (the resume leaf)",
    );
    assert!(s(&wins[2]["name"], "name").starts_with("sessiond://compare/"));
    assert_eq!(wins[2]["diff"], json!(false));
    assert_eq!(diff["current"], wins[2]["name"]);

    // The report says what `sessiond diff --json` says.
    let check_report = |report: &Value, a: &str, b: &str| {
        let cli = cli_json(&["diff", path, a, b, "--json"]);
        let lines = strs(report, "report line");
        assert_eq!(lines[2], format!("- A: {a}"));
        assert_eq!(lines[3], format!("- B: {b}"));
        assert_eq!(
            lines[4],
            format!(
                "- fork point: {} (the last entry both paths share)",
                s(&cli["forkPointId"], "fork point")
            )
        );
        for (title, key) in [
            ("On A only, after the fork point", "onlyA"),
            ("On B only, after the fork point", "onlyB"),
            ("Context at A, not at B", "contextOnlyA"),
            ("Context at B, not at A", "contextOnlyB"),
        ] {
            let (ids, n) = section_ids(&lines, title);
            assert_eq!(ids, ids_of(&cli[key]), "{title}");
            assert_eq!(n, ids.len(), "{title}");
        }
        let common = cli["contextCommon"].as_u64().expect("contextCommon");
        assert!(
            lines.contains(&format!(
                "- context: {} entries at A, {} at B; {common} the same at both, 0 reaching the model differently",
                common + ids_of(&cli["contextOnlyA"]).len() as u64,
                common + ids_of(&cli["contextOnlyB"]).len() as u64,
            ).as_str()),
            "{lines:#?}"
        );
        cli
    };
    let cli = check_report(&wins[2]["lines"], "de19adb3", "610f9c1e");
    assert!(lines_contain(
        &wins[2]["lines"],
        "- thinking level: A off, B high"
    ));
    assert!(
        s(&r["diffMessage"], "message").contains(&format!(
            "fork point {}, 1 entry on A only, 10 entries on B only",
            s(&cli["forkPointId"], "fork point")
        )),
        "{}",
        r["diffMessage"]
    );
    // <CR> on a context entry B has and A does not: the tree, at that entry, its fold open.
    assert!(s(&r["diffJumpLine"], "line").starts_with("  00247798 "));
    assert_eq!(
        r["diffJump"],
        json!({"tree": true, "id": "00247798", "fold": -1})
    );

    // :SessiondDiff A B: the same tab page, redrawn.
    let d2 = &r["diff2"];
    assert_eq!(d2["tabsAfter"], d2["tabsBefore"]);
    let w2 = d2["windows"].as_array().expect("windows");
    assert_eq!(w2.len(), 3);
    assert_context_window(&w2[0], "diff-a", &file, "8a9bb12f", "- leaf: 8a9bb12f");
    assert_context_window(&w2[1], "diff-b", &file, "de19adb3", "- leaf: de19adb3");
    check_report(&w2[2]["lines"], "8a9bb12f", "de19adb3");

    // K on the compaction: the audit `sessiond explain --json` gives, lost facts first; <CR>
    // on a lost fact: its entry in the tree, its fold open.
    let check_audit = |lines: &Value, id: &str, jump_text: &str, jump: &Value| {
        let ex = assert_audit(path, id, lines);
        assert_jump(&ex, jump_text, jump);
        ex
    };
    let audit = &r["audit"];
    assert!(s(&audit["name"], "name").starts_with("sessiond://audit/"));
    assert_eq!(audit["filetype"], json!("sessiondaudit"));
    let ex = check_audit(
        &audit["lines"],
        "4909db93",
        "packages/coding-agent/src/tui/custom-editor.ts",
        &r["auditJump"],
    );
    let src = &ex["source"];
    assert!(lines_contain(
        &audit["lines"],
        &format!(
            "- summarizes {} entries {}…{}, keeps from {}",
            src["count"],
            s(&src["firstId"], "firstId"),
            s(&src["lastId"], "lastId"),
            s(&src["firstKeptEntryId"], "firstKeptEntryId")
        )
    ));
    let sentence = s(&ex["text"], "text");
    assert!(
        s(&r["auditMessage"], "message").contains(&format!("E{}", &sentence[1..])),
        "{}",
        r["auditMessage"]
    );

    // K on the branch summary: the branch it replaced, and its audit.
    let ex = check_audit(
        &r["branchAudit"],
        "12bbdff5",
        "AGENTS.md",
        &r["branchAuditJump"],
    );
    let b = &ex["branch"];
    assert!(lines_contain(
        &r["branchAudit"],
        &format!(
            "- summarizes the branch of {} entries {}…{} (from {}), which left this path after {}",
            b["count"],
            s(&b["firstId"], "firstId"),
            s(&b["lastId"], "lastId"),
            s(&b["fromId"], "fromId"),
            s(&b["leftAtId"], "leftAtId")
        )
    ));
    assert_eq!(r["noAuditWindow"], json!(true));
}

/// The audit `K` showed on a summary (the audit buffer's `lines`) as `sessiond explain FILE ID
/// --json` gives it: the counts, then one fact line per probe, lost first and otherwise in the
/// daemon's order, each with its mark, kind, text, the entry it came from and where it was found;
/// the explanation.
fn assert_audit(path: &str, id: &str, lines: &Value) -> Value {
    let ex = cli_json(&["explain", path, id, "--json"]);
    let audit = &ex["audit"];
    let probes = audit["probes"].as_array().expect("probes");
    let lines = strs(lines, "audit line");
    let (lost_marks, lost) = section_ids(&lines, "Lost");
    let (kept_marks, kept) = section_ids(&lines, "Kept");
    assert_eq!(Some(lost as u64), audit["lost"].as_u64(), "{lines:#?}");
    assert_eq!(Some(kept as u64), audit["kept"].as_u64(), "{lines:#?}");
    assert_eq!((lost_marks.len(), kept_marks.len()), (lost, kept));
    let facts = if kept + lost == 1 { "fact" } else { "facts" };
    assert!(
        lines.contains(&format!("- kept {kept} of {} {facts}, lost {lost}", kept + lost).as_str()),
        "{lines:#?}"
    );
    let fact_lines: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("✗ ") || l.starts_with("✓ "))
        .collect();
    let want: Vec<&Value> = probes
        .iter()
        .filter(|p| p["status"] == json!("lost"))
        .chain(probes.iter().filter(|p| p["status"] != json!("lost")))
        .collect();
    assert_eq!(fact_lines.len(), want.len(), "{lines:#?}");
    for (line, p) in fact_lines.iter().zip(want) {
        let mark = if p["status"] == json!("lost") {
            "✗"
        } else {
            "✓"
        };
        let (shown, from) = line.split_once("  ← ").expect("a fact names its entry");
        let text = shown
            .strip_prefix(&format!("{mark} {} ", s(&p["kind"], "kind")))
            .unwrap_or_else(|| panic!("{line:?} is not a {mark} fact of {p}"));
        assert_eq!(text.trim_start(), s(&p["text"], "text").replace('\n', " "));
        let entry = s(&p["entryId"], "entryId");
        match p["foundIn"].as_str() {
            Some(found) => assert_eq!(from, format!("{entry} (found in {found})")),
            None => assert_eq!(from, entry),
        }
    }
    ex
}

/// Where <CR> on the lost fact `text` of explanation `ex` landed (`jump`): on the entry it came
/// from in the tree, its fold open.
fn assert_jump(ex: &Value, text: &str, jump: &Value) {
    let from = ex["audit"]["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .find(|p| p["text"] == json!(text) && p["status"] == json!("lost"))
        .unwrap_or_else(|| panic!("no lost fact {text:?} in {ex:#}"));
    assert_eq!(
        jump,
        &json!({"tree": true, "id": from["entryId"], "fold": -1})
    );
}

/// Whether the array of strings `lines` holds `want` as one of its lines.
fn lines_contain(lines: &Value, want: &str) -> bool {
    strs(lines, "line").contains(&want)
}

/// Whether a line of `lines`, its tree drawing left out, starts with `prefix`.
fn lines_contain_prefix(lines: &Value, prefix: &str) -> bool {
    strs(lines, "line").iter().any(|l| {
        l.trim_start_matches(['│', '├', '└', '─', ' '])
            .starts_with(prefix)
    })
}

/// A transcript written by the real Claude Code 2.1.197 (`tests/data/claude/real/`) under a
/// Claude projects root beside a pi root: listed with pi's sessions, grouped by agent then
/// project (a subagent under its parent); its tree, context, explanations, graph and comparison
/// as the CLI computes them; only fork offered among the writes, label and compact refused
/// before the daemon is asked, the daemon's own refusal (-33021) said plainly, the transcript
/// never written; the fork a new transcript beside it.
#[test]
fn neovim_claude_code_transcript_beside_pi_sessions() {
    let Some(nvim) = find_nvim() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let pi_root = dir.path().join("pi");
    let claude_root = dir.path().join("claude/projects");
    let project = claude_root.join("-tmp-corpus-final-work");
    std::fs::create_dir_all(&pi_root).expect("mkdir");
    std::fs::create_dir_all(project.join("with-subagent/subagents")).expect("mkdir");
    let pi_file = pi_root.join("s.jsonl");
    std::fs::copy(repo().join(EXAMPLE), &pi_file).expect("copy");
    let real = repo().join("tests/data/claude/real");
    let file = project.join("compacted.jsonl");
    std::fs::copy(real.join("compacted.jsonl"), &file).expect("copy");
    std::fs::copy(
        real.join("with-subagent.jsonl"),
        project.join("with-subagent.jsonl"),
    )
    .expect("copy");
    for f in std::fs::read_dir(real.join("with-subagent/subagents")).expect("subagents") {
        let f = f.expect("entry").path();
        std::fs::copy(
            &f,
            project
                .join("with-subagent/subagents")
                .join(f.file_name().expect("name")),
        )
        .expect("copy");
    }
    let original = std::fs::read(&file).expect("read");
    // What `sessiond list` says of the roots before the plugin forks a transcript into one.
    let listed = cli_json(&[
        "list",
        "--json",
        "--root",
        pi_root.to_str().expect("utf-8"),
        "--root",
        claude_root.to_str().expect("utf-8"),
        "--cache",
        dir.path().join("list-cache.json").to_str().expect("utf-8"),
    ]);
    const REWOUND: &str = "0b5e3c50-369b-45ad-a35e-c68a63fa334e";
    const BEFORE: &str = "7c758304-dca2-4984-b8be-edfce669f4c5";
    const BOUNDARY: &str = "6b9b1c20-9e05-4138-a222-b80f484495b0";
    const OLD_LEAF: &str = "7f1509ff-4e18-403f-ab85-226b98c46dbf";
    const FORK_AT: &str = "d49e5e29-e5ef-46c2-a87c-bf2f85c28185";
    // The compaction summary line right after BOUNDARY, and the first compact boundary.
    const SUMMARY: &str = "a2459777-6023-4897-b441-7f9c488df38c";
    const AUDITED: [&str; 3] = ["ae800328-172e-4b1c-a40d-ccf52c5420db", BOUNDARY, SUMMARY];
    let r = run_script(
        &nvim,
        "claude.lua",
        dir.path(),
        &[
            ("SESSIOND_PI_ROOT", &pi_root),
            ("SESSIOND_CLAUDE_ROOT", &claude_root),
            ("SESSIOND_FILE", &file),
            ("SESSIOND_PI_FILE", &pi_file),
            ("SESSIOND_REWOUND", Path::new(REWOUND)),
            ("SESSIOND_BEFORE", Path::new(BEFORE)),
            ("SESSIOND_BOUNDARY", Path::new(BOUNDARY)),
            ("SESSIOND_OLD_LEAF", Path::new(OLD_LEAF)),
            ("SESSIOND_FORK_AT", Path::new(FORK_AT)),
            ("SESSIOND_AUDITED", Path::new(&AUDITED.join(","))),
        ],
    );
    let path = file.to_str().expect("utf-8");

    // The picker: pi's session, then Claude Code's project with its two transcripts, the
    // subagent's right under the one that started it; counts as `sessiond list` gives them.
    let items = strs(&r["list"]["items"], "item");
    let paths = strs(&r["list"]["paths"], "path");
    assert_eq!(items.len(), 4, "{items:#?}");
    assert_eq!(
        listed["sessions"].as_array().map(Vec::len),
        Some(items.len())
    );
    assert!(items[0].starts_with("pi › pi-mono  ·  Untangle run modes  ·  1033 entries, 3 leaves"));
    assert!(
        items[1..]
            .iter()
            .all(|i| i.starts_with("Claude Code › work  ·  ")),
        "{items:#?}"
    );
    let at = |p: &str| paths.iter().position(|x| x.ends_with(p)).expect(p);
    let sub = at("agent-a46c5597fd4041ded.jsonl");
    assert_eq!(sub, at("/with-subagent.jsonl") + 1, "{paths:#?}");
    assert!(
        items[sub].contains("  ↳ subagent general-purpose: "),
        "{}",
        items[sub]
    );
    let mine = &items[at("/compacted.jsonl")];
    let row = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|x| {
            x["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/compacted.jsonl"))
        })
        .expect("the transcript listed");
    assert!(
        mine.contains(&format!(
            "  ·  {}  ·  {} entries, {} leaves  ·  ~{} tokens",
            s(&row["firstMessage"], "firstMessage"),
            row["entryCount"],
            row["leafCount"],
            row["tokenEstimate"]
        )),
        "{mine}"
    );

    // The tree: every entry once, the leaves marked, the resume leaf as Claude Code uses it.
    let cli_tree = cli_json(&["tree", "--json", path]);
    let tree = &r["tree"];
    assert_eq!(tree["format"], json!("claude-code"));
    let ids: BTreeSet<&str> = strs(&tree["ids"], "id").into_iter().collect();
    assert_eq!(ids, ids_of(&cli_tree["nodes"]).into_iter().collect());
    assert_eq!(ids.len(), 62);
    let resume = s(&cli_tree["defaultLeafId"], "defaultLeafId");
    assert_eq!(
        tree["header"][1],
        json!(format!(
            "resume leaf {resume} (claude --resume continues here)"
        ))
    );
    let leaf_lines = strs(&tree["leafLines"], "leaf line");
    assert_eq!(leaf_lines.len(), 5);
    assert!(
        leaf_lines
            .iter()
            .any(|l| l.contains(&format!("{resume} ")) && l.contains(" ◀ resume leaf  ")),
        "{leaf_lines:#?}"
    );

    // Only fork among the writes: no label or compact mapping, none listed by g?.
    let maps = tree["mappings"].as_object().expect("mappings");
    for lhs in ["f", "F", "K", "D", "<CR>"] {
        assert!(maps.contains_key(lhs), "{lhs} missing: {maps:?}");
    }
    for lhs in ["L", "C"] {
        assert!(!maps.contains_key(lhs), "{lhs} offered on a transcript");
    }
    let help = s(&tree["help"], "help");
    assert!(help.contains("fork the path") && !help.contains("label") && !help.contains("compact"));
    // The pi session beside it still offers them.
    let pi_maps = r["piTree"]["mappings"].as_object().expect("mappings");
    assert!(pi_maps.contains_key("L") && pi_maps.contains_key("C"));
    assert_eq!(
        r["piTree"]["header"],
        json!("resume leaf 610f9c1e (pi resumes here)")
    );
    // gf on the graph's `↳ subagent` line opens the subagent's own transcript (its tree);
    // gf on the subagent's graph's "started by" line opens the transcript that started it.
    let sub = &r["subagent"];
    let parent = project
        .join("with-subagent.jsonl")
        .canonicalize()
        .expect("parent");
    let agent = project
        .join("with-subagent/subagents/agent-a46c5597fd4041ded.jsonl")
        .canonicalize()
        .expect("subagent");
    assert_eq!(sub["parent"], json!(parent.to_str().expect("utf-8")));
    assert!(
        s(&sub["mapping"], "gf").contains("a subagent's"),
        "{}",
        sub["mapping"]
    );
    assert!(
        s(&sub["elsewhere"], "gf elsewhere").contains("↳ subagent"),
        "{}",
        sub["elsewhere"]
    );
    assert!(
        s(&sub["line"], "subagent line").contains("Agent(")
            && s(&sub["line"], "subagent line").contains("↳ subagent agent-a46c5597fd4041ded"),
        "{}",
        sub["line"]
    );
    assert_eq!(sub["target"], json!(agent.to_str().expect("utf-8")));
    assert!(
        lines_contain_prefix(&sub["tree"], "79bd0d52-e4d7-410a-8077-4216dd3e7ef2 "),
        "{:#?}",
        sub["tree"]
    );
    assert!(
        s(&sub["startedBy"], "started by")
            .starts_with("subagent agent-a46c5597fd4041ded started by tool_use toolu_21_0 of "),
        "{}",
        sub["startedBy"]
    );
    assert_eq!(sub["back"], json!(parent.to_str().expect("utf-8")));
    for (key, op) in [("labelRefused", "label"), ("compactRefused", "compact")] {
        assert_eq!(
            r[key],
            json!(format!(
                "sessiond: {op}: a Claude Code session is read only (sessiond never writes to it); fork it (f, :SessiondFork) to continue in a new session"
            ))
        );
    }
    let refusal = &r["daemonRefusal"];
    assert_eq!(refusal["code"], json!(-33021));
    let msg = s(&refusal["message"], "refusal");
    assert!(
        msg.starts_with("session/label is not supported for Claude Code sessions (")
            && msg.contains(path)
            && msg.ends_with("fork it (f, :SessiondFork) to continue in a new session"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(&file).expect("read"),
        original,
        "the transcript was written to"
    );

    // <CR>: the context at the rewound leaf, one heading per message sessiond computes; tool
    // calls and their results as Claude Code sent them.
    let ctx = cli_json(&["context", "--json", "--leaf", REWOUND, path]);
    let context = &r["context"];
    assert_eq!(
        context["headings"].as_u64(),
        ctx["messages"].as_array().map(|m| m.len() as u64)
    );
    let cl = strs(&context["lines"], "context line");
    assert_eq!(cl[3], format!("- leaf: {REWOUND}"));
    assert_eq!(cl[4], format!("- model: {}", s(&ctx["model"], "model")));
    assert!(cl.iter().any(|l| l.starts_with("→ Bash({")), "{cl:#?}");
    assert!(
        cl.iter().any(|l| l.starts_with("← result of toolu_")),
        "{cl:#?}"
    );

    // K: the CLI's sentence; before the boundary it points to it (gr jumps there).
    let explain = |id: &str| cli_json(&["explain", path, id, "--json"]);
    let before = explain(BEFORE);
    let sentence = s(&before["text"], "text");
    assert!(
        s(&r["explainBefore"], "explain").contains(&format!("L{}", &sentence[1..])),
        "{}",
        r["explainBefore"]
    );
    assert_eq!(before["reason"]["boundaryId"], json!(BOUNDARY));
    assert_eq!(r["referenced"], json!(BOUNDARY));
    let boundary = explain(BOUNDARY);
    let sentence = s(&boundary["text"], "text");
    assert!(
        s(&r["explainBoundary"], "explain").contains(&format!("L{}", &sentence[1..])),
        "{}",
        r["explainBoundary"]
    );
    // K on both compact boundaries and on the last compaction summary line: the audit the
    // daemon gives, its span in lines; the boundary and its summary line carry the same one.
    let audits = r["audits"].as_object().expect("audits");
    assert_eq!(audits.len(), AUDITED.len());
    for id in AUDITED {
        let shown = &audits[id];
        assert_eq!(shown["shown"], json!(id));
        assert_eq!(shown["filetype"], json!("sessiondaudit"));
        assert!(s(&shown["name"], "name").starts_with("sessiond://audit/"));
        let ex = assert_audit(path, id, &shown["lines"]);
        let src = &ex["source"];
        let lines = strs(&shown["lines"], "audit line");
        let what = if ex["type"] == json!("system") {
            "compact boundary"
        } else {
            "compaction summary"
        };
        assert!(
            lines[0].starts_with(&format!(
                "# Audit of line {}, the {what} {id} — ",
                ex["line"]
            )),
            "{lines:#?}"
        );
        assert!(
            lines.contains(
                &format!(
                    "- summarizes {} lines {}…{}, keeps from {}",
                    src["count"],
                    s(&src["firstId"], "firstId"),
                    s(&src["lastId"], "lastId"),
                    s(&src["firstKeptEntryId"], "firstKeptEntryId")
                )
                .as_str()
            ),
            "{lines:#?}"
        );
        match src["previousCompactionId"].as_str() {
            Some(prev) => assert!(
                lines.contains(&format!("- after compact boundary {prev}").as_str()),
                "{lines:#?}"
            ),
            None => assert!(
                !lines.iter().any(|l| l.starts_with("- after ")),
                "{lines:#?}"
            ),
        }
        assert!(lines.contains(&"- <CR> on a fact jumps to the line it came from"));
    }
    assert_eq!(
        strs(&audits[BOUNDARY]["lines"], "line")[1..],
        strs(&audits[SUMMARY]["lines"], "line")[1..]
    );
    // The last boundary lost the last request; <CR> on it: its line in the tree, unfolded.
    let ex = explain(BOUNDARY);
    assert_eq!(ex["audit"]["lost"], json!(1));
    assert!(
        s(&r["lostJumpLine"], "line").starts_with("✗ lastUserRequest  Run a command again  ← "),
        "{}",
        r["lostJumpLine"]
    );
    assert_jump(&ex, "Run a command again", &r["lostJump"]);

    // The graph, line for line `sessiond graph`.
    assert_eq!(r["graph"]["lines"], r["graph"]["cli"]);
    assert!(lines_contain(&r["graph"]["lines"], "|\\"));

    // D: a leaf from before both compactions against the resume leaf.
    let wins = r["diff"].as_array().expect("windows");
    assert_eq!(wins.len(), 3);
    assert_eq!(
        [&wins[0]["diff"], &wins[1]["diff"], &wins[2]["diff"]],
        [&json!(true), &json!(true), &json!(false)]
    );
    assert_eq!(
        strs(&wins[0]["lines"], "line")[3],
        format!("- leaf: {OLD_LEAF}")
    );
    assert_eq!(
        strs(&wins[1]["lines"], "line")[3],
        format!("- leaf: {resume} (the resume leaf)")
    );
    let cmp = cli_json(&["diff", path, OLD_LEAF, resume, "--json"]);
    let report = strs(&wins[2]["lines"], "report line");
    assert_eq!(
        report[4],
        format!(
            "- fork point: {} (the last entry both paths share)",
            s(&cmp["forkPointId"], "fork point")
        )
    );
    let (only_b, _) = section_ids(&report, "On B only, after the fork point");
    assert_eq!(only_b, ids_of(&cmp["onlyB"]));
    let (ctx_a, _) = section_ids(&report, "Context at A, not at B");
    assert_eq!(ctx_a, ids_of(&cmp["contextOnlyA"]));

    // f: a new transcript beside it, from the newest compact boundary to the entry, as
    // `--fork-session` writes it; the plugin opened it as a Claude Code session.
    let fork = s(&r["fork"], "fork");
    let forked = fork
        .split(" into ")
        .nth(1)
        .and_then(|t| t.split(" (").next())
        .expect("the fork's path");
    let forked = Path::new(forked);
    assert_eq!(
        forked.parent().and_then(|p| p.canonicalize().ok()),
        project.canonicalize().ok()
    );
    assert_eq!(r["forkFormat"], json!("claude-code"));
    let fork_ctx = cli_json(&["context", "--json", forked.to_str().expect("utf-8")]);
    let source_ctx = cli_json(&["context", "--json", "--leaf", FORK_AT, path]);
    assert_eq!(fork_ctx["messages"], source_ctx["messages"]);
    assert_eq!(std::fs::read(&file).expect("read"), original);
}

/// Issue 47 on a root of real linear sessions (`tests/neovim/list.lua`): "1 leaf", never
/// "1 leaves"; the resume leaf's mark before the preview; explain of an entry below the leaf
/// in the CLI's words ("comes after the leaf", not "another branch"); a label on a version-1
/// file refused before any prompt, saying to fork it first (and the fork done); two copies
/// of one session told apart by their folders, in the picker and in the sessions view alike.
#[test]
fn neovim_linear_sessions_copies_and_version_1_files() {
    let Some(nvim) = find_nvim() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    let (a, b) = (root.join("a/linear.jsonl"), root.join("b/linear.jsonl"));
    for f in [&a, &b] {
        std::fs::create_dir_all(f.parent().expect("folder")).expect("mkdir");
        std::fs::copy(repo().join("examples/pi-v1-large-session.jsonl"), f).expect("copy");
    }
    let v1 = root.join("v1.jsonl");
    std::fs::copy(repo().join("examples/pi-v1-before-compaction.jsonl"), &v1).expect("copy");
    let v1_before = std::fs::read(&v1).expect("read");
    // A copy with a line that is not JSON: listed, with its corrupt spot said.
    let broken = root.join("c/broken.jsonl");
    std::fs::create_dir_all(broken.parent().expect("folder")).expect("mkdir");
    let text = std::fs::read_to_string(repo().join("examples/pi-v3-branched.jsonl")).expect("read");
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(100, "{not json");
    std::fs::write(&broken, lines.join("\n") + "\n").expect("write");
    let r = run_script(
        &nvim,
        "list.lua",
        dir.path(),
        &[
            ("SESSIOND_ROOT", &root),
            ("SESSIOND_COPY_A", &a),
            ("SESSIOND_COPY_B", &b),
            ("SESSIOND_V1", &v1),
        ],
    );

    assert_eq!(
        r["open"],
        json!("sessiond: linear.jsonl: 1018 entries, 1 leaf")
    );
    assert_eq!(
        r["tree"]["header"],
        json!("linear.jsonl · 1018 entries · 1 leaf · 0 branch points")
    );
    let leaf_line = s(&r["tree"]["leafLine"], "leaf line");
    assert!(
        leaf_line
            .starts_with("000003fb assistant             ◀ resume leaf  Oh wait, these errors"),
        "{leaf_line}"
    );
    assert_eq!(r["tree"]["markColumn"], json!(32));

    // Explain says what `sessiond explain` says.
    let cli = cli_json(&[
        "explain",
        a.to_str().expect("utf-8"),
        "00000009",
        "--leaf",
        "00000005",
        "--json",
    ]);
    let text = s(&cli["text"], "text");
    assert_eq!(
        text,
        "entry 00000009 (message) at leaf 00000005: not a context entry: it comes after the leaf \
         (below it, through 00000006)"
    );
    // The entry it points to (gr jumps to it): the first one after the leaf.
    let shown = s(&r["explainAfter"], "explain");
    assert!(
        shown.starts_with(&format!("sessiond: E{}.\n→ 00000006 ", &text[1..])),
        "{shown}"
    );
    assert!(!shown.contains("another branch"), "{shown}");

    // Version 1: refused before the prompt, in the daemon's words; the file untouched; the
    // fork offered and made.
    assert_eq!(r["asked"], json!(false));
    assert_eq!(r["v1Version"], json!(1));
    for key in ["labelV1", "labelV1Text"] {
        assert_eq!(
            r[key],
            json!(
                "sessiond: label: v1.jsonl is a version-1 session, only read (sessiond writes labels, \
                 names and entries to version-3 files); fork it to a version-3 file first (f, \
                 :SessiondFork)"
            ),
            "{key}"
        );
    }
    assert!(
        s(&r["compactV1"], "compact")
            .starts_with("sessiond: compact: v1.jsonl is a version-1 session"),
        "{}",
        r["compactV1"]
    );
    assert_eq!(std::fs::read(&v1).expect("read"), v1_before);
    assert!(s(&r["forkV1"], "fork").contains("forked at 00000005 into "));

    // The picker: the copies read alike but for their folders; the sessions view shows the
    // picker's lines, in its order.
    let items = strs(&r["list"]["items"], "item");
    let paths = strs(&r["list"]["paths"], "path");
    let line_of = |p: &Path| {
        let p = std::fs::canonicalize(p).expect("canonical");
        items[paths
            .iter()
            .position(|x| Path::new(x) == p)
            .expect("listed")]
    };
    let (la, lb) = (line_of(&a), line_of(&b));
    assert!(
        line_of(&broken).contains("3 leaves, ⚠ 1 corrupt spot  ·  "),
        "{}",
        line_of(&broken)
    );
    assert!(!la.contains("corrupt"), "{la}");
    let size = std::fs::metadata(&a).expect("stat").len();
    let listed = cli_json(&["list", "--root", root.to_str().expect("utf-8"), "--json"]);
    let row = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|x| {
            x["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("a/linear.jsonl"))
        })
        .expect("row");
    let want = |folder: &str| {
        format!(
            "pi › pi-mono  ·  {} ({folder}/linear.jsonl)  ·  1018 entries, 1 leaf  ·  ~{} tokens  ·  {}  ·  ",
            s(&row["firstMessage"], "firstMessage"),
            row["tokenEstimate"],
            size_text(size)
        )
    };
    assert!(la.starts_with(&want("a")), "{la}\n{}", want("a"));
    assert!(lb.starts_with(&want("b")), "{lb}\n{}", want("b"));
    assert_eq!(la.replace("(a/", "(b/"), lb);
    assert!(items.iter().all(|i| !i.contains(" 1 leaves")), "{items:#?}");

    let view = strs(&r["sessions"]["lines"], "sessions line");
    assert!(
        view[0].starts_with(&format!("sessiond: {} sessions under ", items.len())),
        "{view:#?}"
    );
    assert_eq!(&view[2..], &items[..]);
    assert_eq!(
        r["sessions"]["open"],
        json!("sessiond: open the tree of this session")
    );
    assert_eq!(
        r["sessions"]["opened"],
        json!(std::fs::canonicalize(&b).expect("canonical").to_str())
    );
}

/// `:SessiondGraph` as a terminal of 132 columns shows it, on the 1,018-entry and the
/// 1,002-entry real sessions (version 1, linear; the second compacted twice) and the branched
/// one: kept in `tests/neovim/graph-NAME.screen` (`SESSIOND_UPDATE_CAPTURE=1` writes them),
/// and row for row what `sessiond graph --json` says, every line whole (nothing past the
/// window's edge: the resume leaf's mark is on screen), a label before the preview.
#[test]
fn neovim_graph_terminal_captures() {
    let Some(nvim) = find_nvim() else { return };
    const COLUMNS: usize = 132;
    for (name, source) in [
        ("linear-1018", "examples/pi-v1-large-session.jsonl"),
        ("compacted-1002", "examples/pi-v1-before-compaction.jsonl"),
        ("branched-1033", EXAMPLE),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join(format!("{name}.jsonl"));
        std::fs::copy(repo().join(source), &file).expect("copy");
        let capture = dir.path().join("screen.txt");
        let status = headless(&nvim, "capture.lua", dir.path())
            .env("SESSIOND_NVIM_BIN", &nvim)
            .env("SESSIOND_ROOT", dir.path())
            .env("SESSIOND_FILE", &file)
            .env("SESSIOND_CAPTURE", &capture)
            .env("SESSIOND_CAPTURE_SIZE", format!("{COLUMNS}x30"))
            .env("SESSIOND_CAPTURE_CMD", "SessiondGraph")
            .env("SESSIOND_CAPTURE_UNTIL", "◀ resume leaf")
            .status()
            .expect("run nvim");
        let screen = std::fs::read_to_string(&capture).expect("capture written");
        assert!(
            status.success(),
            "{name}: the graph did not appear:\n{screen}"
        );

        let graph = cli_json(&["graph", "--json", file.to_str().expect("utf-8")]);
        let texts: Vec<&str> = graph["lines"]
            .as_array()
            .expect("lines")
            .iter()
            .map(|l| s(&l["text"], "line text"))
            .collect();
        let rows: Vec<&str> = screen.lines().collect();
        assert!(
            texts.len() < rows.len(),
            "{name}: the whole graph on one screen"
        );
        for (i, text) in texts.iter().enumerate() {
            assert!(
                text.chars().count() <= COLUMNS,
                "{name}: line {i} is cut at the window's edge: {text}"
            );
            assert_eq!(rows[i], text.trim_end(), "{name}: screen row {i}");
        }
        assert!(
            rows[texts.len()..]
                .iter()
                .all(|r| r.is_empty() || *r == "~"),
            "{name}: only the graph on screen:\n{screen}"
        );
        // A label comes right after the entry's type, before the preview (as in the tree
        // view), so a window narrower than the preview still shows it.
        for (i, text) in texts.iter().enumerate() {
            if let Some(at) = text.find(" [") {
                let before = text[..at].chars().count();
                assert!(
                    before < 40,
                    "{name}: line {i}: the label at column {before}: {text}"
                );
            }
        }
        if name == "branched-1033" {
            assert!(
                rows.contains(
                    &"*   ○ e82f60b2 user                  [before-refactor] alright, i think there's only one file left to fix up, tui-renderer.ts,…"
                ),
                "{screen}"
            );
        }

        let kept_path = repo().join(format!("tests/neovim/graph-{name}.screen"));
        if std::env::var_os("SESSIOND_UPDATE_CAPTURE").is_some() {
            std::fs::write(&kept_path, &screen).expect("write capture");
            continue;
        }
        let kept = std::fs::read_to_string(&kept_path)
            .unwrap_or_else(|e| panic!("{}: {e}", kept_path.display()));
        assert_eq!(
            screen, kept,
            "{name}: the graph view changed; if intended, run with SESSIOND_UPDATE_CAPTURE=1"
        );
    }
}

/// A file size as the session lines write it: bytes, KiB with one decimal under 10 KiB,
/// whole KiB under 1 MiB, else MiB with one decimal.
fn size_text(n: u64) -> String {
    const K: u64 = 1024;
    #[allow(clippy::cast_precision_loss)] // sizes of test files
    let f = n as f64;
    match n {
        n if n < K => format!("{n} B"),
        n if n < 10 * K => format!("{:.1} KiB", f / 1024.0),
        n if n < K * K => format!("{} KiB", (n + K / 2) / K),
        _ => format!("{:.1} MiB", f / (1024.0 * 1024.0)),
    }
}

/// `:SessiondSessions` follows the root without listing it again (`tests/neovim/live_list.lua`):
/// a session copied in appears, a session another process appends to shows its new entries,
/// size and tokens, a removed copy goes (and the other copy no longer needs its folder), each
/// from `session/didChangeList`; at the end the view's lines are a fresh listing's.
#[test]
fn neovim_sessions_view_follows_the_root() {
    let Some(nvim) = find_nvim() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    let (a, b) = (root.join("a/s.jsonl"), root.join("b/s.jsonl"));
    let linear = repo().join("tests/data/synthetic/linear-tool-calls-usage-session-info.jsonl");
    for f in [&a, &b] {
        std::fs::create_dir_all(f.parent().expect("folder")).expect("mkdir");
        std::fs::copy(&linear, f).expect("copy");
    }
    let append = json!({"type": "message", "id": "a100000c", "parentId": "a100000b",
        "timestamp": "2026-01-10T10:00:00.000Z",
        "message": {"role": "user", "content": "one more question, with some words to count", "timestamp": 1_768_039_200_000_i64}});
    let size_before = std::fs::metadata(&a).expect("stat").len();
    let out = dir.path().join("report.json");
    let status = headless(&nvim, "live_list.lua", dir.path())
        .env("SESSIOND_ROOT", &root)
        .env("SESSIOND_COPY_A", &a)
        .env("SESSIOND_COPY_B", &b)
        .env("SESSIOND_NEW", repo().join(EXAMPLE))
        .env("SESSIOND_NEW_AT", root.join("c/new.jsonl"))
        .env("SESSIOND_APPEND", append.to_string())
        .env("SESSIOND_OUT", &out)
        .status()
        .expect("run nvim");
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("no report ({status}): {e}")),
    )
    .expect("report is JSON");
    assert!(status.success(), "nvim failed: {r:#}");

    assert_eq!(
        r["announced"],
        json!(true),
        "initialize names session/didChangeList"
    );
    let before = strs(&r["before"], "line");
    assert_eq!(before.len(), 4, "{before:#?}");
    assert!(
        s(&r["appeared"], "appeared")
            .starts_with("pi › pi-mono  ·  Untangle run modes  ·  1033 entries, 3 leaves  ·  ~")
    );
    let (old, new) = (s(&r["grownBefore"], "before"), s(&r["grown"], "grown"));
    assert!(old.contains("  ·  11 entries, 1 leaf  ·  "), "{old}");
    assert!(new.contains("  ·  12 entries, 1 leaf  ·  "), "{new}");
    let size_after = std::fs::metadata(&a).expect("stat").len();
    assert!(size_after > size_before);
    let listed = cli_json(&["list", "--root", root.to_str().expect("utf-8"), "--json"]);
    let row = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|x| x["path"].as_str().is_some_and(|p| p.ends_with("a/s.jsonl")))
        .expect("row");
    assert_eq!(row["size"], json!(size_after));
    assert!(
        new.contains(&format!(
            "  ·  ~{} tokens  ·  {}  ·  ",
            row["tokenEstimate"],
            size_text(size_after)
        )),
        "{new} vs {row}"
    );
    assert!(
        old.contains(&format!("  ·  {}  ·  ", size_text(size_before))),
        "{old}"
    );
    assert_ne!(old, new);
    assert_eq!(r["removedGone"], json!([]));
    assert!(
        !s(&r["alone"], "alone").contains("(a/s.jsonl)"),
        "{}",
        r["alone"]
    );

    // Nothing listed again while following; each change applied from a notification.
    assert_eq!(r["listsWhileFollowing"], json!(0));
    assert!(
        r["applied"].as_u64().is_some_and(|n| n >= 3),
        "{}",
        r["applied"]
    );
    let after = strs(&r["after"], "line");
    assert!(
        after[0].starts_with("sessiond: 2 sessions under "),
        "{after:#?}"
    );
    assert_eq!(&after[2..], &strs(&r["picker"], "picker line")[..]);
}
