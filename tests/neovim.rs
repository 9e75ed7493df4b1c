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
        Some(12)
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
    assert!(leaf_lines[0].contains("8a9bb12f") && leaf_lines[0].ends_with("◀ leaf"));
    assert!(leaf_lines[1].contains("610f9c1e") && leaf_lines[1].ends_with("◀ default leaf"));
    assert!(leaf_lines[2].contains("de19adb3") && leaf_lines[2].ends_with("◀ leaf"));
    assert_eq!(tree["branchLines"].as_array().map(Vec::len), Some(4));
    assert!(s(&tree["labelled"], "labelled").ends_with("[before-refactor]"));
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
    assert!(s(&r["label"]["line"], "label line").ends_with("[before refactor]"));
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
        json!("- leaf: a0a0a0a0 (the default leaf)")
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

    // The picker lists the sessions under the root, with their counts and pi's token estimate
    // (the session has grown by three entries and a branch above).
    let items: Vec<&str> = strs(&r["list"]["items"], "item");
    assert!(
        items
            .iter()
            .any(|i| i
                .starts_with("Untangle run modes  ·  1036 entries, 4 leaves  ·  ~21507 tokens")),
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
