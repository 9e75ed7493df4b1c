//! `graph`, `diff`, `export` and `verify` on Codex rollouts written by the real Codex CLI (the
//! referee's corpus, `tests/codex/support.rs`), through the command line and the daemon: a
//! thread's files as one tree (forks and revert segments hang from the line their
//! `history_base` prefix ends at), the lines the graph marks as sent equal to what Codex sent
//! in every recorded request, two leaves in different files parting where the fork's file
//! begins, the history exported through the parent prefix, and Codex's tool calls verified.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "codex/support.rs"]
mod codex_support;
#[path = "support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

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

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// One rollout file of the main home, as its lines say.
#[derive(Debug, Clone)]
struct Rollout {
    path: PathBuf,
    history_id: String,
    base: Option<(String, u64)>,
    /// Ordinal → parsed line.
    lines: BTreeMap<u64, Value>,
    last: u64,
}

fn jsonl_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(jsonl_under(&p));
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn rollouts(home: &Path) -> Vec<Rollout> {
    let mut out = Vec::new();
    for f in jsonl_under(&home.join("sessions")) {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: BTreeMap<u64, Value> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|v| (v["ordinal"].as_u64().unwrap(), v))
            .collect();
        let meta = &lines.values().next().unwrap()["payload"];
        let name = f.file_name().unwrap().to_str().unwrap().to_owned();
        let stem = name.trim_end_matches(".jsonl");
        let history_id = match stem.rsplit_once('_') {
            Some((_, seg)) if seg.len() == 36 => seg.to_owned(),
            _ => meta["id"].as_str().unwrap().to_owned(),
        };
        let base = meta.get("history_base").map(|b| {
            (
                b["thread_id"].as_str().unwrap().to_owned(),
                b["end_ordinal_exclusive"].as_u64().unwrap(),
            )
        });
        let last = *lines.keys().last().unwrap();
        out.push(Rollout {
            path: f,
            history_id,
            base,
            lines,
            last,
        });
    }
    out
}

fn tag(history_id: &str) -> &str {
    &history_id[history_id.len() - 8..]
}

/// The corpus, its manifest and the main home's root file of thread A with every rollout.
fn setup() -> Option<(PathBuf, Value, PathBuf, Vec<Rollout>)> {
    let root = codex_support::corpus()?.to_path_buf();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let first = manifest["steps"][0]["files_after"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let files = rollouts(&root.join("home/.codex"));
    Some((root.clone(), manifest, root.join(first), files))
}

/// The id a thread's graph rooted at `own` gives line `ordinal` of `file`.
fn id_in(own: &Path, file: &Rollout, ordinal: u64) -> String {
    if file.path == own {
        ordinal.to_string()
    } else {
        format!("{}:{ordinal}", tag(&file.history_id))
    }
}

/// A stored item as Codex sends it.
fn strip(item: &Value) -> Value {
    let mut item = item.clone();
    if let Value::Object(m) = &mut item {
        m.shift_remove("internal_chat_message_metadata_passthrough");
    }
    item
}

#[test]
fn the_graph_hangs_forks_and_segments_where_their_prefix_ends() {
    let Some((_, _, root_file, files)) = setup() else {
        return;
    };
    let g = json_of(&sessiond(&["graph", s(&root_file), "--json"]));
    // Every file of the thread is in it: thread A's root, its segments, its forks, the fork of
    // a segment.
    let total: usize = files.iter().map(|f| f.lines.len()).sum();
    assert_eq!(
        g["entryCount"], total,
        "every line of every file of the thread"
    );
    let nodes = g["nodes"].as_array().unwrap();
    let row_of: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n["id"].as_str().unwrap(), i))
        .collect();
    let mut branches = 0;
    for f in &files {
        let Some((hid, end)) = &f.base else { continue };
        let parent = files
            .iter()
            .find(|p| &p.history_id == hid && p.path != f.path)
            .unwrap();
        let first = id_in(&root_file, f, *end);
        let row = row_of[first.as_str()];
        let p = &nodes[nodes[row]["parentRow"].as_u64().unwrap() as usize];
        let hangs_from = p.get("lastId").unwrap_or(&p["id"]).as_str().unwrap();
        assert_eq!(
            hangs_from,
            id_in(&root_file, parent, end - 1),
            "{} hangs from its history_base",
            f.path.display()
        );
        assert_eq!(nodes[row]["type"], "session_meta");
        branches += 1;
    }
    assert!(branches >= 5, "2 forks, 3 segments and a fork of a segment");
    // The daemon's pages are the CLI's graph.
    let (mut d, _) = support::Daemon::start(&[root_file.parent().unwrap()]);
    let _: Value = d.call("session/open", json!({"path": root_file}));
    let page = support::checked(
        &mut d,
        "session/graph",
        json!({"path": root_file, "limit": 10000}),
    );
    assert_eq!(page["nodes"], g["nodes"]);
    assert_eq!(page["contextEntryIds"], g["contextEntryIds"]);
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn the_lines_the_graph_marks_sent_are_what_codex_sent() {
    let Some((root, manifest, _, files)) = setup() else {
        return;
    };
    let current = manifest["codex"]["current"].clone();
    let mut compared = 0;
    for r in manifest["requests"].as_array().unwrap() {
        let leaf = &r["leaf"];
        if r["input"].is_null()
            || leaf.is_null()
            || r["codex"] != current
            || !leaf["file"].as_str().unwrap().starts_with("home/")
        {
            continue;
        }
        let file = root.join(leaf["file"].as_str().unwrap());
        let ordinal = leaf["ordinal"].as_u64().unwrap();
        let g = json_of(&sessiond(&[
            "graph",
            s(&file),
            "--leaf",
            &ordinal.to_string(),
            "--json",
        ]));
        // The lines marked, read back from their files: their items in order, a compaction's
        // replacement history in its place.
        let mut sent = Vec::new();
        for id in g["contextEntryIds"].as_array().unwrap() {
            let id = id.as_str().unwrap();
            let (f, o) = match id.split_once(':') {
                Some((t, o)) => (files.iter().find(|f| tag(&f.history_id) == t).unwrap(), o),
                None => (files.iter().find(|f| f.path == file).unwrap(), id),
            };
            let line = &f.lines[&o.parse::<u64>().unwrap()];
            match line["type"].as_str().unwrap() {
                "response_item" => sent.push(strip(&line["payload"])),
                "compacted" => sent.extend(
                    line["payload"]["replacement_history"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(strip),
                ),
                other => panic!("{id}: a {other} line marked as sent"),
            }
        }
        // What Codex sent, less its base instructions (N1) and a compaction's prompt (N2).
        let mut input: Vec<Value> = r["input"].as_array().unwrap()[1..].to_vec();
        if r["request_kind"] == "compaction" {
            input.pop();
        }
        assert_eq!(
            sent, input,
            "request {} ({}) at {}:{ordinal}",
            r["n"], r["step"], leaf["file"]
        );
        compared += 1;
    }
    assert!(compared >= 20, "{compared} requests compared");
}

#[test]
fn diff_parts_two_leaves_where_the_fork_or_segment_file_begins() {
    let Some((_, _, root_file, files)) = setup() else {
        return;
    };
    let root = files.iter().find(|f| f.path == root_file).unwrap();
    let (mut d, _) = support::Daemon::start(&[root_file.parent().unwrap()]);
    let _: Value = d.call("session/open", json!({"path": root_file}));
    let mut checked = 0;
    for f in files
        .iter()
        .filter(|f| f.base.as_ref().is_some_and(|b| b.0 == root.history_id))
    {
        let end = f.base.as_ref().unwrap().1;
        let b = id_in(&root_file, f, f.last);
        let a = root.last.to_string();
        let out = sessiond(&["diff", s(&root_file), &a, &b, "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cmp = json_of(&out);
        assert_eq!(cmp["format"], "codex");
        assert_eq!(
            cmp["forkPointId"],
            (end - 1).to_string(),
            "{}",
            f.path.display()
        );
        assert_eq!(cmp["onlyB"][0]["id"], id_in(&root_file, f, end));
        assert_eq!(cmp["onlyB"].as_array().unwrap().len(), f.lines.len());
        assert_eq!(
            cmp["onlyA"].as_array().unwrap().len() as u64,
            root.last + 1 - end,
            "A's side: the root file after the prefix"
        );
        // What B sends and A does not: B's own lines (not in A's history), or prefix lines a
        // compaction on A's side replaced (a segment cut before that compaction).
        for x in cmp["contextOnlyB"].as_array().unwrap() {
            if x["id"].as_str().unwrap().contains(':') {
                assert_eq!(x["reason"]["kind"], "notInHistory", "{x}");
            } else {
                assert_eq!(x["reason"]["kind"], "replacedByCompaction", "{x}");
                let by: u64 = x["reason"]["by"].as_str().unwrap().parse().unwrap();
                assert!(by >= end, "the compaction is on A's side: {x}");
                assert!(x["text"].as_str().unwrap().ends_with("on A only"), "{x}");
            }
        }
        for x in cmp["contextOnlyA"].as_array().unwrap() {
            let o: u64 = x["id"].as_str().unwrap().parse().unwrap();
            assert!(o >= end, "sent at A only, yet in B's prefix: {x}");
        }
        // Sent at A: common to both, or at A only (the graph marks the same lines).
        let g = json_of(&sessiond(&["graph", s(&root_file), "--leaf", &a, "--json"]));
        assert_eq!(
            cmp["contextCommon"].as_u64().unwrap() as usize
                + cmp["contextOnlyA"].as_array().unwrap().len(),
            g["contextEntryIds"].as_array().unwrap().len()
        );
        assert!(cmp["sideB"]["userTurns"].as_u64().unwrap() >= 1);
        // The daemon compares as the CLI does.
        let mut rpc = support::checked(
            &mut d,
            "session/compareBranches",
            json!({"path": root_file, "leafA": a, "leafB": b}),
        );
        rpc.as_object_mut().unwrap().remove("revision");
        assert_eq!(rpc, cmp);
        checked += 1;
    }
    assert!(
        checked >= 3,
        "a fork, a mid fork and a revert segment of the root file"
    );
    let bad = d.request(
        "session/compareBranches",
        json!({"path": root_file, "leafA": "0", "leafB": "zz:1"}),
    );
    assert_eq!(support::error_of(&bad).0, -33004);
    assert_eq!(d.stop(), Some(0));
}

/// `dir` copied into `to`, recursively.
fn copy_dir(dir: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn diff_names_the_files_a_side_s_patches_changed() {
    let Some((root, _, root_file, files)) = setup() else {
        return;
    };
    let main = files.iter().find(|f| f.path == root_file).unwrap();
    let fork = files
        .iter()
        .find(|f| f.base.as_ref().is_some_and(|b| b.0 == main.history_id))
        .unwrap();
    // A copy of the thread, the fork given two `apply_patch` calls as Codex writes them (a
    // custom tool call, then its output): one that reports success, one that fails.
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    copy_dir(&root.join("home"), &home);
    let moved = |p: &Path| home.join(p.strip_prefix(root.join("home")).unwrap());
    let cwd = fork
        .lines
        .values()
        .filter_map(|l| l["payload"]["cwd"].as_str())
        .next_back()
        .unwrap()
        .to_owned();
    let item = |k: u64, payload: Value| {
        json!({"timestamp": "2026-12-05T18:50:00.000Z", "ordinal": fork.last + k,
               "type": "response_item", "payload": payload})
        .to_string()
    };
    let lines = [
        item(
            1,
            json!({"type": "custom_tool_call", "status": "completed", "call_id": "call_ok",
            "name": "apply_patch", "input": "*** Begin Patch\n*** Add File: notes/todo.txt\n+first\n\
            *** Update File: src/../README.md\n@@\n-old\n+new\n*** End Patch\n"}),
        ),
        item(
            2,
            json!({"type": "custom_tool_call_output", "call_id": "call_ok",
            "output": "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following \
            files:\nA notes/todo.txt\nM README.md\n"}),
        ),
        item(
            3,
            json!({"type": "custom_tool_call", "status": "completed", "call_id": "call_bad",
            "name": "apply_patch", "input": "*** Begin Patch\n*** Update File: missing.txt\n@@\n\
            -a\n+b\n*** End Patch\n"}),
        ),
        item(
            4,
            json!({"type": "custom_tool_call_output", "call_id": "call_bad",
            "output": "apply_patch verification failed: Failed to find expected lines in missing.txt"}),
        ),
    ];
    let mut text = std::fs::read_to_string(moved(&fork.path)).unwrap();
    for l in &lines {
        text.push_str(l);
        text.push('\n');
    }
    std::fs::write(moved(&fork.path), text).unwrap();
    let a = main.last.to_string();
    let b = id_in(&root_file, fork, fork.last + 4);
    let file = moved(&root_file);
    let out = sessiond(&["diff", s(&file), &a, &b, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cmp = json_of(&out);
    assert_eq!(
        cmp["sideB"]["filesChanged"],
        json!([format!("{cwd}/notes/todo.txt"), format!("{cwd}/README.md")]),
        "the patch that reports success, resolved against the fork's cwd"
    );
    assert_eq!(cmp["sideB"]["toolCalls"]["apply_patch"], 2);
    assert_eq!(cmp["sideA"]["filesChanged"], json!([]));
    let human = String::from_utf8(sessiond(&["diff", s(&file), &a, &b]).stdout).unwrap();
    assert!(human.contains("todo.txt"), "{human}");
    // The daemon reads them as the CLI does.
    let (mut d, _) = support::Daemon::start(&[file.parent().unwrap()]);
    let _: Value = d.call("session/open", json!({"path": file}));
    let mut rpc = support::checked(
        &mut d,
        "session/compareBranches",
        json!({"path": file, "leafA": a, "leafB": b}),
    );
    rpc.as_object_mut().unwrap().remove("revision");
    assert_eq!(rpc, cmp);
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn export_reads_the_history_through_the_parent_prefix() {
    let Some((_, manifest, root_file, files)) = setup() else {
        return;
    };
    let fork_step = manifest["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fork")
        .unwrap();
    let fork = files
        .iter()
        .find(|f| f.history_id == fork_step["thread"].as_str().unwrap())
        .unwrap();
    let out = sessiond(&["export", s(&fork.path), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json_of(&out);
    let doc = r["document"].as_str().unwrap();
    // The parent's first prompt and its tool's output, then the fork's own prompt.
    let at = |needle: &str| {
        doc.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in the export"))
    };
    assert!(at("run a tool") < at("hello-from-tool"));
    assert!(at("hello-from-tool") < at("fork: say hi"));
    assert!(doc.contains("Compaction: the model reads its replacement history"));
    assert!(doc.contains("The history goes on in the fork"));
    assert_eq!(r["leafId"], fork.last.to_string());
    assert_eq!(
        r["entries"].as_u64().unwrap(),
        fork.base.as_ref().unwrap().1 + fork.lines.len() as u64,
        "the parent prefix and the fork's lines"
    );
    // The daemon exports as the CLI does, open or not.
    let (mut d, _) = support::Daemon::start(&[root_file.parent().unwrap()]);
    let closed = support::checked(&mut d, "session/export", json!({"path": fork.path}));
    let _: Value = d.call("session/open", json!({"path": fork.path}));
    let open = support::checked(&mut d, "session/export", json!({"path": fork.path}));
    for x in [&closed, &open] {
        assert_eq!(x["document"], r["document"]);
        assert_eq!(x["toolCalls"], r["toolCalls"]);
    }
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn verify_reads_codex_s_tool_calls_through_the_thread() {
    let Some((root, _, root_file, _)) = setup() else {
        return;
    };
    let cwd = root.join("work");
    let out = sessiond(&["verify", s(&root_file), "--cwd", s(&cwd), "--json"]);
    let r = json_of(&out);
    let kinds: Vec<(&str, &str)> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap(), f["status"].as_str().unwrap()))
        .collect();
    assert!(kinds.contains(&("cwd", "ok")), "{kinds:?}");
    assert!(
        kinds.iter().any(|k| k.0 == "credentials"),
        "Codex's credential looked for: {kinds:?}"
    );
    // The corpus' commands (`echo`, `sleep`) were read as shell commands and found runnable.
    assert!(kinds.contains(&("tool", "ok")), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k.0 == "failedTool"), "{kinds:?}");
    let (mut d, _) = support::Daemon::start(&[root_file.parent().unwrap()]);
    let params = json!({"path": root_file, "cwd": cwd});
    let closed = support::checked(&mut d, "session/verifyResume", params.clone());
    let _: Value = d.call("session/open", json!({"path": root_file}));
    let open = support::checked(&mut d, "session/verifyResume", params);
    for x in [&closed, &open] {
        assert_eq!(x["findings"], r["findings"]);
        assert_eq!(x["leafId"], r["leafId"]);
    }
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn tree_shows_the_thread_s_forks_and_segments_as_branches() {
    let Some((_, _, root_file, files)) = setup() else {
        return;
    };
    let t = json_of(&sessiond(&["tree", s(&root_file), "--json"]));
    let total: usize = files.iter().map(|f| f.lines.len()).sum();
    assert_eq!(t["entryCount"], total);
    let root = files.iter().find(|f| f.path == root_file).unwrap();
    assert_eq!(t["defaultLeafId"], root.last.to_string());
    assert_eq!(t["roots"], json!(["0"]), "one tree");
    let parent_of: HashMap<&str, &Value> = t["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), &n["parentId"]))
        .collect();
    for f in &files {
        let Some((hid, end)) = &f.base else { continue };
        let parent = files
            .iter()
            .find(|p| &p.history_id == hid && p.path != f.path)
            .unwrap();
        assert_eq!(
            parent_of[id_in(&root_file, f, *end).as_str()],
            &json!(id_in(&root_file, parent, end - 1)),
            "{}",
            f.path.display()
        );
    }
    // Each file a run of lines of the tree, hanging from its parent line; the file Codex
    // continues each thread in marked (a fork is a thread of its own).
    let runs = t["thread"]["files"].as_array().unwrap();
    assert_eq!(runs.len(), files.len(), "every file of the thread");
    for f in &files {
        let run = runs
            .iter()
            .find(|r| r["file"] == json!(f.path))
            .unwrap_or_else(|| panic!("{} not in {runs:?}", f.path.display()));
        let first = *f.lines.keys().next().unwrap();
        assert_eq!(run["firstId"], id_in(&root_file, f, first), "{run}");
        assert_eq!(run["lastId"], id_in(&root_file, f, f.last), "{run}");
        assert_eq!(run["lines"], f.lines.len());
        assert_eq!(run["own"], f.path == root_file);
        assert_eq!(run["historyId"], f.history_id.as_str());
        match &f.base {
            None => assert!(run["parentId"].is_null(), "{run}"),
            Some(_) => assert_eq!(
                &run["parentId"],
                parent_of[run["firstId"].as_str().unwrap()]
            ),
        }
    }
    let current = t["thread"]["current"]["file"].as_str().unwrap();
    assert_eq!(t["thread"]["current"]["source"], "state");
    let marked: Vec<&Value> = runs
        .iter()
        .filter(|r| r["current"] == true && r["threadId"] == t["sessionId"])
        .collect();
    assert_eq!(marked.len(), 1, "one current file of thread A: {runs:?}");
    assert_eq!(
        std::fs::canonicalize(marked[0]["file"].as_str().unwrap()).unwrap(),
        std::fs::canonicalize(current).unwrap()
    );
    assert_eq!(marked[0]["kind"], "segment", "the last revert's segment");
    let text = String::from_utf8(sessiond(&["tree", s(&root_file)]).stdout).unwrap();
    assert!(
        text.contains("other files of the thread beside this one"),
        "{text}"
    );
    assert!(text.contains(" (current)"), "{text}");

    // The daemon's `session/tree` is the same tree of files, page by page, with the same
    // report of the thread.
    let (mut d, _) = support::Daemon::start(&[root_file.parent().unwrap()]);
    let _: Value = d.call("session/open", json!({"path": root_file}));
    let mut nodes: Vec<Value> = Vec::new();
    let mut todo = vec![json!({"path": root_file, "limit": 40})];
    while let Some(params) = todo.pop() {
        let page = support::checked(&mut d, "session/tree", params);
        assert_eq!(page["format"], "codex");
        assert_eq!(page["entryCount"], total);
        assert_eq!(page["leafId"], t["defaultLeafId"]);
        assert_eq!(page["thread"], t["thread"], "the CLI's report");
        if let Some(roots) = page.get("roots") {
            assert_eq!(roots, &t["roots"]);
        }
        for next in page["next"].as_array().unwrap().iter().rev() {
            let mut more = json!({"path": root_file, "limit": 40});
            for (k, v) in next.as_object().unwrap() {
                more[k] = v.clone();
            }
            todo.push(more);
        }
        nodes.extend(page["nodes"].as_array().unwrap().iter().cloned());
    }
    let by_id = |ns: &[Value]| -> BTreeMap<String, Value> {
        ns.iter()
            .map(|n| {
                let mut n = n.clone();
                n.as_object_mut().unwrap().remove("children");
                (n["id"].as_str().unwrap().to_owned(), n)
            })
            .collect()
    };
    assert_eq!(nodes.len(), total, "every node once");
    assert_eq!(by_id(&nodes), by_id(t["nodes"].as_array().unwrap()));
    // A page below a line of another file, named as the CLI names it.
    let fork = runs.iter().find(|r| r["kind"] == "fork").unwrap();
    let below = support::checked(
        &mut d,
        "session/tree",
        json!({"path": root_file, "fromId": fork["firstId"], "depth": 0}),
    );
    assert_eq!(below["nodes"][0]["id"], fork["firstId"]);
    assert_eq!(below["nodes"][0]["parentId"], fork["parentId"]);
    let bad = d.request("session/tree", json!({"path": root_file, "fromId": "zz:1"}));
    assert_eq!(support::error_of(&bad).0, -33004);
    // The context at another file's line, named as the tree names it, is that file's context
    // there (what Codex sends when it resumes that fork or segment).
    let mut others = 0;
    for run in runs.iter().filter(|r| r["own"] == false) {
        let last = run["lastId"].as_str().unwrap();
        let at = support::checked(
            &mut d,
            "session/contextAt",
            json!({"path": root_file, "leafId": last}),
        );
        let cli = json_of(&sessiond(&[
            "context",
            run["file"].as_str().unwrap(),
            "--json",
        ]));
        assert_eq!(at["messages"], cli["messages"], "{last}");
        assert_eq!(at["leafId"], json!(last));
        others += 1;
    }
    assert!(others >= 2, "a fork and a segment: {runs:?}");
    let bad = d.request(
        "session/contextAt",
        json!({"path": root_file, "leafId": "zz:1"}),
    );
    assert_eq!(support::error_of(&bad).0, -33004);
    assert_eq!(d.stop(), Some(0));
}

/// A rollout's lines, each parsed, without its `timestamp`.
fn untimed(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().shift_remove("timestamp");
            v
        })
        .collect()
}

#[test]
fn a_legacy_fork_hangs_from_the_last_parent_line_it_copies() {
    let Some(root) = codex_support::corpus() else {
        return;
    };
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let home = root.join(manifest["homes"]["legacy"].as_str().unwrap());
    let files = jsonl_under(&home.join("sessions"));
    let meta = |f: &Path| untimed(f)[0]["payload"].clone();
    let fork = files
        .iter()
        .find(|f| meta(f)["forked_from_id"].is_string())
        .unwrap();
    let parent = files
        .iter()
        .find(|f| meta(f)["id"] == meta(fork)["forked_from_id"])
        .unwrap();
    assert!(meta(fork)["history_base"].is_null(), "a legacy fork");
    // The copy, as the files say: the fork's lines after its session_meta that equal the
    // parent's first lines but for their timestamps.
    let (p, f) = (untimed(parent), untimed(fork));
    let copied = p.iter().zip(&f[1..]).take_while(|(a, b)| a == b).count();
    assert!(copied >= 2 && copied < p.len(), "{copied} of {}", p.len());
    assert_eq!(
        f[1]["type"], "session_meta",
        "the parent's session_meta copied first"
    );
    let fork_tag = tag(meta(fork)["id"].as_str().unwrap()).to_owned();
    let parent_tag = tag(meta(parent)["id"].as_str().unwrap()).to_owned();

    // From the parent: the fork's session_meta hangs from the last copied line.
    let t = json_of(&sessiond(&["tree", s(parent), "--json"]));
    assert_eq!(t["entryCount"], p.len() + f.len());
    assert_eq!(t["roots"], json!(["line:1"]), "one tree");
    let node = |t: &Value, id: &str| {
        t["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no node {id}"))
    };
    let first = format!("{fork_tag}:line:1");
    assert_eq!(
        node(&t, &first)["parentId"],
        format!("line:{copied}").as_str()
    );
    let run = t["thread"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["file"] == json!(fork))
        .unwrap()
        .clone();
    assert_eq!(run["kind"], "fork");
    assert_eq!(run["copiedLines"], copied);
    assert_eq!(run["parentId"], format!("line:{copied}").as_str());
    assert_eq!(run["firstId"], first.as_str());
    assert_eq!(run["lines"], f.len());
    let text = String::from_utf8(sessiond(&["tree", s(parent)]).stdout).unwrap();
    assert!(text.contains("a legacy fork"), "{text}");

    // From the fork: the same tree, the parent's lines tagged.
    let t = json_of(&sessiond(&["tree", s(fork), "--json"]));
    assert_eq!(t["roots"], json!([format!("{parent_tag}:line:1")]));
    assert_eq!(
        node(&t, "line:1")["parentId"],
        format!("{parent_tag}:line:{copied}").as_str()
    );
    // The context at the fork's leaf is still the fork file's own (Codex replays it alone).
    let alone = json_of(&sessiond(&["context", s(fork), "--json"]));
    assert_eq!(
        alone["chain"].as_array().unwrap().len(),
        1,
        "{}",
        alone["chain"]
    );

    // The daemon's tree is the command line's.
    let (mut d, _) = support::Daemon::start(&[home.join("sessions").as_path()]);
    let _: Value = d.call("session/open", json!({"path": parent}));
    let page = support::checked(
        &mut d,
        "session/tree",
        json!({"path": parent, "limit": 10000}),
    );
    let cli = json_of(&sessiond(&["tree", s(parent), "--json"]));
    assert_eq!(page["thread"], cli["thread"]);
    assert_eq!(page["entryCount"], cli["entryCount"]);
    assert_eq!(
        page["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == first)
            .unwrap()["parentId"],
        format!("line:{copied}").as_str()
    );
    assert_eq!(d.stop(), Some(0));
}

/// The model-visible items of a file's lines in `range` (ordinals), as the replay keeps them:
/// a response item of a type Codex sends, not a `system` message.
fn visible(file: &Rollout, range: std::ops::Range<u64>) -> Vec<u64> {
    const SENT: [&str; 14] = [
        "message",
        "agent_message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "reasoning",
        "web_search_call",
        "image_generation_call",
        "tool_search_call",
        "tool_search_output",
        "compaction",
        "context_compaction",
    ];
    file.lines
        .range(range)
        .filter(|(_, l)| {
            let p = &l["payload"];
            l["type"] == "response_item"
                && SENT.contains(&p["type"].as_str().unwrap_or(""))
                && p["role"] != "system"
        })
        .map(|(o, _)| *o)
        .collect()
}

/// Every string of `v`, joined.
fn strings_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(strings_of).collect::<Vec<_>>().join("\n"),
        Value::Object(m) => m.values().map(strings_of).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// `explain`'s `source` of a compaction, computed from the file: the model-visible items
/// between the compaction before it (or the file's start) and it.
fn source_of(file: &Rollout, compaction: u64) -> Value {
    let previous = file
        .lines
        .range(..compaction)
        .filter(|(_, l)| l["type"] == "compacted")
        .map(|(o, _)| *o)
        .next_back();
    assert!(
        file.lines
            .range(previous.unwrap_or(0)..compaction)
            .all(|(_, l)| l["payload"]["type"] != "thread_rolled_back"),
        "no rollback in the span"
    );
    let span = visible(file, previous.map_or(0, |p| p + 1)..compaction);
    json!({
        "count": span.len(),
        "firstId": span.first().map(u64::to_string),
        "lastId": span.last().map(u64::to_string),
        "firstKeptEntryId": null,
        "previousCompactionId": previous.map(|p| p.to_string()),
    })
}

#[test]
fn explain_audits_a_codex_compaction() {
    let Some((root, _, root_file, files)) = setup() else {
        return;
    };
    let main = files.iter().find(|f| f.path == root_file).unwrap();
    let compactions: Vec<u64> = main
        .lines
        .iter()
        .filter(|(_, l)| l["type"] == "compacted")
        .map(|(o, _)| *o)
        .collect();
    assert_eq!(
        compactions.len(),
        2,
        "the auto-compaction and the manual one"
    );
    let (mut d, _) = support::Daemon::start(&[root_file.parent().unwrap()]);
    let _: Value = d.call("session/open", json!({"path": root_file}));
    // Each compaction's span (its size, as the corpus's script makes it: the first replaces
    // two turns with their context and a tool call, the second the turn after it) and the last
    // request before it, as the file says.
    let expected = [
        (compactions[0], 12, None, "compact me"),
        (compactions[1], 4, Some(compactions[0]), "say hi again"),
    ];
    for (c, count, previous, request) in expected {
        let id = c.to_string();
        let ex = json_of(&sessiond(&["explain", s(&root_file), &id, "--json"]));
        let source = source_of(main, c);
        assert_eq!(ex["source"], source, "{id}: the span, from the file");
        assert_eq!(source["count"], count, "{id}");
        assert_eq!(
            source["previousCompactionId"],
            json!(previous.map(|p| p.to_string()))
        );
        let at = main
            .lines
            .range(..c)
            .filter(|(_, l)| {
                l["payload"]["role"] == "user" && l["payload"]["content"][0]["text"] == request
            })
            .map(|(o, _)| o.to_string())
            .next_back()
            .unwrap();
        // Codex keeps every real user message in the replacement history: the request is
        // kept, found in the compaction itself.
        let history = strings_of(&main.lines[&c]["payload"]["replacement_history"]);
        assert!(history.contains(request));
        assert_eq!(
            ex["audit"],
            json!({"kept": 1, "lost": 0, "probes": [{"kind": "lastUserRequest", "text": request,
                   "entryId": at, "status": "kept", "foundIn": id}]}),
            "{id}"
        );
        assert!(
            ex["text"].as_str().unwrap().ends_with("; kept all 1 fact"),
            "{ex}"
        );
        // At a leaf before the compaction (after the leaf: not sent) the audit is the same.
        let before = json_of(&sessiond(&[
            "explain",
            s(&root_file),
            &id,
            "--leaf",
            &(c - 1).to_string(),
            "--json",
        ]));
        assert_eq!(before["reason"], "afterLeaf");
        assert_eq!(
            (&before["source"], &before["audit"]),
            (&ex["source"], &ex["audit"])
        );
        let mut rpc = support::checked(
            &mut d,
            "session/explain",
            json!({"path": root_file, "entryId": id}),
        );
        assert!(rpc["revision"].is_object());
        rpc.as_object_mut().unwrap().remove("revision");
        assert_eq!(rpc, ex, "the daemon explains as the CLI does");
    }
    // Another line has neither.
    let ex = json_of(&sessiond(&["explain", s(&root_file), "7", "--json"]));
    assert!(
        ex.get("source").is_none() && ex.get("audit").is_none(),
        "{ex}"
    );
    assert_eq!(d.stop(), Some(0));

    // A copy of the thread, the root file given one more turn as Codex writes it (a command
    // Codex reads as a file read, a patch, a failed command, a plan) and a compaction whose
    // summary names the patched file only.
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    copy_dir(&root.join("home"), &home);
    let file = home.join(root_file.strip_prefix(root.join("home")).unwrap());
    let o = main.last;
    let line = |k: u64, ty: &str, payload: Value| {
        json!({"timestamp": "2026-12-05T18:50:00.000Z", "ordinal": o + k, "type": ty,
               "payload": payload})
    };
    let user = |text: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
    let patch = "*** Begin Patch\n*** Add File: notes/todo.txt\n+first\n*** End Patch\n";
    let summary = "Another language model started to solve this problem …:\nSUMMARY: the user \
                   asked to edit notes; notes/todo.txt was added.";
    let lines = [
        line(1, "response_item", user("edit the notes\nthen build")),
        line(
            2,
            "response_item",
            json!({"type": "function_call", "name": "exec_command", "call_id": "call_cat",
                   "arguments": "{\"cmd\":\"cat docs/plan.md\"}"}),
        ),
        line(
            3,
            "event_msg",
            json!({"type": "item_completed", "item": {"type": "CommandExecution",
                   "id": "call_cat", "parsed_cmd": [{"type": "read", "cmd": "cat docs/plan.md",
                   "name": "plan.md", "path": "docs/plan.md"}]}}),
        ),
        line(
            4,
            "response_item",
            json!({"type": "function_call_output", "call_id": "call_cat",
                   "output": "Chunk ID: a\nProcess exited with code 0\nOutput:\n# plan\n"}),
        ),
        line(
            5,
            "response_item",
            json!({"type": "custom_tool_call", "name": "apply_patch", "call_id": "call_patch",
                   "input": patch}),
        ),
        line(
            6,
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": "call_patch",
                   "output": "Exit code: 0\nOutput:\nSuccess. Updated the following files:\nA notes/todo.txt\n"}),
        ),
        line(
            7,
            "response_item",
            json!({"type": "function_call", "name": "exec_command", "call_id": "call_build",
                   "arguments": "{\"cmd\":\"make\"}"}),
        ),
        line(
            8,
            "response_item",
            json!({"type": "function_call_output", "call_id": "call_build",
                   "output": "Chunk ID: b\nProcess exited with code 2\nOutput:\nmake: *** No targets.  Stop.\n"}),
        ),
        line(
            9,
            "response_item",
            json!({"type": "function_call", "name": "update_plan", "call_id": "call_plan",
                   "arguments": "{\"plan\":[{\"step\":\"add the notes\",\"status\":\"completed\"},{\"step\":\"fix the build\",\"status\":\"in_progress\"}]}"}),
        ),
        line(
            10,
            "response_item",
            json!({"type": "function_call_output", "call_id": "call_plan", "output": "Plan updated"}),
        ),
        line(
            11,
            "compacted",
            json!({"message": summary, "replacement_history": [user("edit the notes\nthen build"),
                   user(summary)]}),
        ),
    ];
    let mut text = std::fs::read_to_string(&file).unwrap();
    for l in &lines {
        text.push_str(&l.to_string());
        text.push('\n');
    }
    std::fs::write(&file, text).unwrap();
    let c = o + 11;
    let id = c.to_string();
    let edited = rollouts(&home.join(".codex"))
        .into_iter()
        .find(|f| f.path == file)
        .unwrap();
    let ex = json_of(&sessiond(&["explain", s(&file), &id, "--json"]));
    assert_eq!(ex["source"], source_of(&edited, c));
    assert_eq!(
        ex["source"]["previousCompactionId"],
        compactions[1].to_string()
    );
    let at = |k: u64| (o + k).to_string();
    let probe = |kind: &str, text: &str, k: u64, found: bool| {
        let mut p = json!({"kind": kind, "text": text, "entryId": at(k)});
        if matches!(kind, "toolError") {
            p["toolCallId"] = json!("call_build");
        }
        if found {
            p["status"] = json!("kept");
            p["foundIn"] = json!(id);
        } else {
            p["status"] = json!("lost");
        }
        p
    };
    assert_eq!(
        ex["audit"],
        json!({"kept": 2, "lost": 3, "probes": [
            probe("readFile", "docs/plan.md", 2, false),
            probe("modifiedFile", "notes/todo.txt", 5, true),
            probe("toolError", "make: *** No targets.  Stop.", 8, false),
            probe("openTask", "fix the build", 9, false),
            probe("lastUserRequest", "edit the notes", 1, true),
        ]}),
        "{ex}"
    );
    let human = String::from_utf8(sessiond(&["explain", s(&file), &id]).stdout).unwrap();
    assert!(
        human.contains("kept 2 of 5 facts, lost 3 (1 read file, 1 tool error, 1 task)"),
        "{human}"
    );
    let (mut d, _) = support::Daemon::start(&[file.parent().unwrap()]);
    let _: Value = d.call("session/open", json!({"path": file}));
    let mut rpc = support::checked(
        &mut d,
        "session/explain",
        json!({"path": file, "entryId": id, "leafId": id}),
    );
    rpc.as_object_mut().unwrap().remove("revision");
    assert_eq!(rpc, ex, "the daemon explains as the CLI does");
    assert_eq!(d.stop(), Some(0));
}
