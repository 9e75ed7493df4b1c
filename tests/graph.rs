//! `sessiond graph` and `session/graph`: the branch graph of real sessions, run through the
//! real binary. The SVG's structure is checked against independent reads of the same file
//! (`tree --json` for the entries, `context --json` for what reaches the model, the
//! compactions' `firstKeptEntryId` for the ranges); the SVG is rendered by headless Chromium
//! with a screenshot kept in `target/test-artefacts/`; the text form of a branched session is
//! an insta snapshot.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;
use support::{chromium, cli_json, repo};

const BIN: &str = env!("CARGO_BIN_EXE_sessiond");

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().expect("run sessiond")
}

fn stdout(args: &[&str]) -> String {
    let r = run(args);
    assert!(
        r.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    String::from_utf8(r.stdout).unwrap()
}

/// The value of attribute `name` in one start tag.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    Some(&tag[at..at + tag[at..].find('"')?])
}

/// The start tags of `<g class="PREFIX…">` elements.
fn groups<'a>(svg: &'a str, prefix: &str) -> Vec<&'a str> {
    let open = format!("<g class=\"{prefix}");
    svg.match_indices(&open)
        .map(|(i, _)| &svg[i..i + svg[i..].find('>').unwrap()])
        .collect()
}

/// Parent of every entry, from `tree --json`.
struct Entries {
    parent: HashMap<String, Option<String>>,
    order: Vec<String>,
    raw: HashMap<String, Value>,
}

fn entries(file: &str) -> Entries {
    let tree = cli_json(&["tree", file, "--json"]);
    let mut parent = HashMap::new();
    let mut order = Vec::new();
    for n in tree["nodes"].as_array().unwrap() {
        let id = n["id"].as_str().unwrap().to_owned();
        parent.insert(id.clone(), n["parentId"].as_str().map(str::to_owned));
        order.push(id);
    }
    // The compactions' firstKeptEntryId, read from the file itself.
    let mut raw = HashMap::new();
    // Version 1 has no ids: sessiond names an entry by its line number (8 hex digits), and pi
    // migrates `firstKeptEntryIndex` (an index into the lines, the header at 0) to the id.
    for (i, line) in std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .enumerate()
        .skip(1)
    {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if let Some(k) = v["firstKeptEntryIndex"].as_u64().filter(|&k| k > 0) {
            v["firstKeptEntryId"] = Value::from(format!("{:08x}", k + 1));
        }
        let id = v["id"]
            .as_str()
            .map_or_else(|| format!("{:08x}", i + 1), str::to_owned);
        raw.insert(id, v);
    }
    Entries { parent, order, raw }
}

impl Entries {
    /// The entries from `last` up to `first` along parents, `last` first.
    fn run(&self, first: &str, last: &str) -> Vec<String> {
        let mut out = vec![last.to_owned()];
        let mut cur = last.to_owned();
        while cur != first {
            cur = self.parent[&cur].clone().expect("a fold is one chain");
            out.push(cur.clone());
        }
        out
    }

    /// Root-to-`id` path, `id` excluded.
    fn above(&self, id: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = self.parent[id].clone();
        while let Some(c) = cur {
            cur = self.parent[&c].clone();
            out.push(c);
        }
        out.reverse();
        out
    }
}

fn is_compaction(e: &Entries, id: &str) -> bool {
    e.raw[id]["type"] == "compaction"
}

/// The range a compaction summarizes, computed here from pi's rule: after the previous
/// compaction's kept start on the path (or from the root) up to `firstKeptEntryId`,
/// compactions not counted.
fn expected_range(e: &Entries, c: &str) -> Vec<String> {
    let above = e.above(c);
    let pos = |id: &Value| above.iter().position(|a| Some(a.as_str()) == id.as_str());
    let prev = above.iter().rposition(|a| is_compaction(e, a));
    let start = match prev {
        Some(p) => match pos(&e.raw[&above[p]]["firstKeptEntryId"]) {
            Some(k) if k < p => k,
            _ => p + 1,
        },
        None => 0,
    };
    let end = pos(&e.raw[c]["firstKeptEntryId"]).unwrap_or(above.len());
    above[start..end]
        .iter()
        .filter(|a| !is_compaction(e, a))
        .cloned()
        .collect()
}

#[test]
fn svg_of_real_sessions_matches_tree_context_and_compactions() {
    let cases: &[(&str, Option<&str>)] = &[
        ("pi-v3-branched", None),
        ("pi-v3-branched", Some("de19adb3")),
        ("pi-v3-branched", Some("886c2fdc")),
        ("pi-v1-before-compaction", None),
        ("pi-v1-large-session", None),
    ];
    let browser = chromium::find();
    let out_dir = chromium::artefacts();
    let mut ranges_seen = 0;
    for &(name, leaf) in cases {
        let file = repo().join(format!("examples/{name}.jsonl"));
        let file = file.to_str().unwrap();
        let mut args = vec!["graph", file, "--svg"];
        let mut ctx_args = vec!["context", file, "--json"];
        if let Some(l) = leaf {
            args.extend(["--leaf", l]);
            ctx_args.extend(["--leaf", l]);
        }
        let svg = stdout(&args);
        let what = format!("{name} at {leaf:?}");
        // One self-contained document: no script, no reference outside itself.
        assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("<script") && !svg.contains("href") && !svg.contains("url("));
        assert_eq!(
            svg.matches("http").count(),
            1,
            "only the SVG namespace: {what}"
        );
        assert!(svg.contains("prefers-color-scheme: dark"));

        let e = entries(file);
        let nodes = groups(&svg, "node ");
        assert!(
            nodes.len() < 40,
            "long runs are folded: {} nodes, {what}",
            nodes.len()
        );
        assert_eq!(
            attr(&svg, "data-nodes").unwrap().parse::<usize>().unwrap(),
            nodes.len()
        );
        // Every entry is drawn exactly once, by an entry node or inside one fold.
        let mut drawn: Vec<String> = Vec::new();
        let mut in_context: BTreeSet<String> = BTreeSet::new();
        for tag in &nodes {
            let (first, last) = (
                attr(tag, "data-id").unwrap(),
                attr(tag, "data-last").unwrap(),
            );
            let held = e.run(first, last);
            assert_eq!(
                held.len(),
                attr(tag, "data-count").unwrap().parse::<usize>().unwrap()
            );
            assert_eq!(tag.contains("node fold"), held.len() > 1, "{tag}");
            if attr(tag, "class")
                .unwrap()
                .split(' ')
                .any(|c| c == "in-context")
            {
                in_context.extend(held.iter().cloned());
            }
            drawn.extend(held);
        }
        let mut sorted = drawn.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), drawn.len(), "no entry twice: {what}");
        assert_eq!(drawn.len(), e.order.len(), "every entry: {what}");

        // The highlighted entries are exactly those that reach the model.
        let ctx = cli_json(&ctx_args);
        let want: BTreeSet<String> = ctx["entryIds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert!(!want.is_empty());
        assert_eq!(in_context, want, "{what}");
        // The selected leaf and the default leaf are marked.
        let leaf_id = ctx["leafId"].as_str().unwrap();
        let selected: Vec<_> = nodes
            .iter()
            .filter(|t| t.contains(" selected-leaf"))
            .collect();
        assert_eq!(selected.len(), 1, "{what}");
        assert!(
            e.run(
                attr(selected[0], "data-id").unwrap(),
                attr(selected[0], "data-last").unwrap()
            )
            .contains(&leaf_id.to_owned())
        );
        assert_eq!(
            nodes.iter().filter(|t| t.contains(" default-leaf")).count(),
            1
        );
        let leaves = nodes.iter().filter(|t| t.contains(" leaf")).count();
        assert_eq!(
            leaves.to_string(),
            attr(&svg, "data-leaves").unwrap(),
            "{what}"
        );

        // Each compaction's bracket spans the range pi summarized.
        let compactions: Vec<&String> = e.order.iter().filter(|id| is_compaction(&e, id)).collect();
        let ranges = groups(&svg, "range");
        assert_eq!(ranges.len(), compactions.len(), "{what}");
        for c in compactions {
            let range = ranges
                .iter()
                .find(|t| attr(t, "data-compaction") == Some(c.as_str()))
                .unwrap_or_else(|| panic!("range of {c}"));
            let want = expected_range(&e, c);
            assert_eq!(
                attr(range, "data-count").unwrap(),
                want.len().to_string(),
                "{c}"
            );
            assert_eq!(attr(range, "data-first"), want.first().map(String::as_str));
            assert_eq!(attr(range, "data-last"), want.last().map(String::as_str));
            ranges_seen += 1;
        }

        // Rendered by a browser: it parses, and a screenshot is kept.
        if let Some(bin) = &browser {
            let stem = format!(
                "graph-{name}{}",
                leaf.map_or(String::new(), |l| format!("-{l}"))
            );
            let path = out_dir.join(format!("{stem}.svg"));
            std::fs::write(&path, &svg).unwrap();
            let dom = chromium::dom(bin, &path);
            assert!(!dom.contains("parsererror"), "{what}: {dom}");
            assert_eq!(groups(&dom, "node ").len(), nodes.len(), "{what}");
            let shot = out_dir.join(format!("{stem}.png"));
            chromium::screenshot(bin, &path, &shot, "1100,500");
        }
    }
    assert!(
        ranges_seen >= 5,
        "the examples hold compactions: {ranges_seen}"
    );
}

#[test]
fn text_form_of_a_branched_session() {
    let text = stdout(&["graph", "tests/data/synthetic/branch-summaries.jsonl"]);
    insta::assert_snapshot!("branch_summaries", text);
    let real = stdout(&[
        "graph",
        "examples/pi-v3-branched.jsonl",
        "--leaf",
        "de19adb3",
    ]);
    insta::assert_snapshot!("pi_v3_branched_at_de19adb3", real);
}

#[test]
fn json_is_the_model_behind_the_text() {
    let doc = cli_json(&["graph", "examples/pi-v3-branched.jsonl", "--json"]);
    let nodes = doc["nodes"].as_array().unwrap();
    let lines = doc["lines"].as_array().unwrap();
    // One line per node, plus the header, the legend and one connector per branch point.
    let branch_points = nodes.iter().filter(|n| n["branchPoint"] == true).count();
    assert_eq!(lines.len(), nodes.len() + 2 + branch_points);
    let jumps: Vec<&str> = lines.iter().filter_map(|l| l["entryId"].as_str()).collect();
    let ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert_eq!(jumps, ids);
    assert_eq!(doc["defaultLeafId"], "610f9c1e");
    assert_eq!(doc["name"], "Untangle run modes");
    let c = nodes.iter().find(|n| n["type"] == "compaction").unwrap();
    assert_eq!(c["summarizes"]["firstKeptEntryId"], "521cf246");
    assert_eq!(c["summarizes"]["firstId"], "00247798");
}

#[test]
fn graph_writes_out_and_refuses_an_unknown_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.svg");
    let r = run(&[
        "graph",
        "examples/pi-v3-branched.jsonl",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success());
    assert!(r.stdout.is_empty());
    assert!(
        std::fs::read_to_string(&out).unwrap().contains("<svg"),
        "the extension picks SVG"
    );
    let r = run(&["graph", "examples/pi-v3-branched.jsonl", "--leaf", "nope"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("nope"));
}

#[test]
fn the_daemon_answers_the_same_graph_as_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    std::fs::copy(repo().join("examples/pi-v3-branched.jsonl"), &file).unwrap();
    let (mut d, _) = support::Daemon::start(&[dir.path()]);
    let _: Value = d.call("session/open", serde_json::json!({"path": file}));
    for leaf in [None, Some("de19adb3")] {
        let mut params = serde_json::json!({"path": file});
        let mut args = vec!["graph", file.to_str().unwrap(), "--json"];
        if let Some(l) = leaf {
            params["leafId"] = Value::from(l);
            args.extend(["--leaf", l]);
        }
        let mut r = support::checked(&mut d, "session/graph", params);
        assert_eq!(r["revision"]["entryCount"], 1033);
        r.as_object_mut().unwrap().remove("revision");
        assert_eq!(r, cli_json(&args), "{leaf:?}");
    }
    let bad = d.request(
        "session/graph",
        serde_json::json!({"path": file, "leafId": "zz"}),
    );
    assert_eq!(support::error_of(&bad).0, -33004);
    let _: Value = d.call("shutdown", Value::Null);
}

/// The in-context entries and the entries of every node of a `--json` graph, folds expanded
/// along `tree --json`'s parents.
fn drawn_entries(e: &Entries, doc: &Value) -> (Vec<String>, BTreeSet<String>) {
    let mut drawn = Vec::new();
    let mut in_context = BTreeSet::new();
    for n in doc["nodes"].as_array().unwrap() {
        let held = e.run(n["id"].as_str().unwrap(), n["lastId"].as_str().unwrap());
        assert_eq!(held.len(), n["count"].as_u64().unwrap() as usize);
        if n["inContext"] == true {
            in_context.extend(held.iter().cloned());
        }
        drawn.extend(held);
    }
    (drawn, in_context)
}

#[test]
fn claude_transcripts_graph_their_boundaries_rewinds_and_context() {
    let file = repo().join("tests/data/claude/real/compacted.jsonl");
    let file = file.to_str().unwrap();
    let e = entries(file);
    let tree = cli_json(&["tree", file, "--json"]);
    for leaf in [None, Some("0b5e3c50-369b-45ad-a35e-c68a63fa334e")] {
        let mut args = vec!["graph", file, "--json"];
        let mut ctx_args = vec!["context", file, "--json"];
        if let Some(l) = leaf {
            args.extend(["--leaf", l]);
            ctx_args.extend(["--leaf", l]);
        }
        let doc = cli_json(&args);
        let ctx = cli_json(&ctx_args);
        // Every line of the tree once; the highlighted ones are what Claude Code sends.
        let (drawn, in_context) = drawn_entries(&e, &doc);
        let mut sorted = drawn.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!((sorted.len(), drawn.len()), (e.order.len(), e.order.len()));
        let want: BTreeSet<String> = ctx["entryIds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(in_context, want, "{leaf:?}");
        assert_eq!(doc["defaultLeafId"], tree["defaultLeafId"]);
        let selected = leaf.map_or(tree["defaultLeafId"].clone(), Value::from);
        assert_eq!(doc["selectedLeafId"], selected);
        // Rewinds are branches: as many leaves as the tree has.
        assert_eq!(doc["leafCount"], 5);
        let nodes = doc["nodes"].as_array().unwrap();
        assert_eq!(nodes.iter().filter(|n| n["leaf"] == true).count(), 5);
        // Each compact boundary is a root linked to the line it compacted, which has its row.
        let boundaries: Vec<&Value> = nodes
            .iter()
            .filter(|n| n["type"] == "system" && n["title"] == "compact_boundary")
            .collect();
        assert_eq!(boundaries.len(), 2);
        for b in &boundaries {
            assert!(b["parentRow"].is_null());
            let row = b["logicalParentRow"].as_u64().unwrap() as usize;
            assert_eq!(nodes[row]["id"], b["logicalParentId"]);
            assert_eq!(nodes[row]["kind"], "entry");
        }
        assert_eq!(
            boundaries[0]["logicalParentId"],
            "7f1509ff-4e18-403f-ab85-226b98c46dbf"
        );
        // The text says the same: a mark on each boundary's line.
        let text: Vec<&str> = doc["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            text.iter()
                .filter(|l| l.contains("⇠ compacted 7f1509ff"))
                .count(),
            1
        );
    }
    // The SVG draws each link as a dashed edge, a boundary as a diamond and the summary as a
    // ring.
    let svg = stdout(&["graph", file, "--svg"]);
    let links: Vec<&str> = svg
        .match_indices("<path class=\"edge logical\"")
        .map(|(i, _)| &svg[i..i + svg[i..].find('>').unwrap()])
        .collect();
    assert_eq!(links.len(), 2);
    assert_eq!(
        attr(links[1], "data-compacted"),
        Some("d49e5e29-e5ef-46c2-a87c-bf2f85c28185")
    );
    assert_eq!(
        groups(&svg, "node entry")
            .iter()
            .filter(|t| t.contains(" compaction"))
            .count(),
        2
    );
    assert!(svg.contains("diamond: compact boundary"));
    // A subagent's transcript (every line a sidechain) is its own main conversation.
    let sub =
        repo().join("tests/data/claude/real/with-subagent/subagents/agent-a46c5597fd4041ded.jsonl");
    let doc = cli_json(&["graph", sub.to_str().unwrap(), "--json"]);
    assert!(
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["apart"].is_null())
    );
    assert_eq!(doc["contextEntryIds"].as_array().unwrap().len(), 5);
}

#[test]
fn sidechains_in_the_main_file_are_drawn_apart() {
    // Older Claude Code versions wrote a subagent's lines into the main transcript with
    // `isSidechain: true`: they are a conversation of their own, drawn after the main one.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    let line = |uuid: &str, parent: Option<&str>, side: bool, ty: &str, text: &str| {
        serde_json::json!({
            "type": ty, "uuid": uuid, "parentUuid": parent, "isSidechain": side,
            "timestamp": "2026-01-01T00:00:00.000Z", "sessionId": "s",
            "message": {"role": ty, "content": text, "id": format!("m-{uuid}"), "model": "claude-opus-4-8"},
        })
        .to_string()
    };
    let text = [
        line("u1", None, false, "user", "main prompt"),
        line("s1", None, true, "user", "subagent task"),
        line("s2", Some("s1"), true, "assistant", "subagent answer"),
        line("a1", Some("u1"), false, "assistant", "main answer"),
    ]
    .join("\n")
        + "\n";
    std::fs::write(&file, text).unwrap();
    let doc = cli_json(&["graph", file.to_str().unwrap(), "--json"]);
    let nodes = doc["nodes"].as_array().unwrap();
    let ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["u1", "a1", "s1", "s2"]);
    assert_eq!(
        nodes.iter().map(|n| n["apart"] == true).collect::<Vec<_>>(),
        [false, false, true, true]
    );
    let lines: Vec<&str> = doc["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(lines[4], "apart from the main conversation (1 sidechain):");
}

#[test]
fn the_daemon_graphs_a_claude_transcript_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir
        .path()
        .join("6d2e238c-d8e6-4579-9b3a-0130d30ea9b9.jsonl");
    std::fs::copy(repo().join("tests/data/claude/real/compacted.jsonl"), &file).unwrap();
    let (mut d, _) = support::Daemon::start(&[dir.path()]);
    let _: Value = d.call("session/open", serde_json::json!({"path": file}));
    let mut whole = cli_json(&["graph", file.to_str().unwrap(), "--json"]);
    // Two pages of the daemon's are the CLI's one, less the revision.
    let mut r = support::checked(
        &mut d,
        "session/graph",
        serde_json::json!({"path": file, "limit": 10}),
    );
    assert_eq!(r["nextOffset"], 10);
    let second = support::checked(
        &mut d,
        "session/graph",
        serde_json::json!({"path": file, "offset": 10}),
    );
    let o = r.as_object_mut().unwrap();
    o.remove("revision");
    for key in ["nodes", "lines"] {
        let mut all = o[key].as_array().unwrap().clone();
        all.extend(second[key].as_array().unwrap().iter().cloned());
        o.insert(key.into(), Value::Array(all));
    }
    o.insert("nextOffset".into(), Value::Null);
    whole.as_object_mut().unwrap().remove("revision");
    assert_eq!(r, whole);
    let _: Value = d.call("shutdown", Value::Null);
}

/// A key quoted in a previewed line is redacted in the graph's text, SVG and JSON, as an
/// export redacts it, for a pi session and a Claude Code transcript alike.
#[test]
fn the_graph_redacts_what_looks_like_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789";
    let pi = dir.path().join("pi.jsonl");
    let text = std::fs::read_to_string(repo().join("examples/pi-v3-branched.jsonl"))
        .unwrap()
        .replace("Now extract runRpcMode.", &format!("{key} runRpcMode."));
    std::fs::write(&pi, text).unwrap();
    let claude = dir.path().join("t.jsonl");
    let text = std::fs::read_to_string(repo().join("tests/data/claude/real/compacted.jsonl"))
        .unwrap()
        .replace("After the second compaction", &format!("{key} second"));
    std::fs::write(&claude, text).unwrap();
    for file in [&pi, &claude] {
        let f = file.to_str().unwrap();
        for args in [
            vec!["graph", f],
            vec!["graph", f, "--svg"],
            vec!["graph", f, "--json"],
        ] {
            let out = stdout(&args);
            assert!(!out.contains("sk-ant-"), "{args:?} shows the key");
            assert!(out.contains("[REDACTED:anthropic-key]"), "{args:?}");
        }
    }
}

/// The node of `doc` (a `graph --json` document) whose entry is `id`.
fn node<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("no node {id} in {doc}"))
}

/// The `Agent` call of the real `with-subagent.jsonl` and what it started.
const AGENT_CALL: &str = "b1326216-29c9-4f4d-b962-952158f6cccc";
const AGENT_ID: &str = "a46c5597fd4041ded";
const TOOL_USE: &str = "toolu_21_0";

/// The real transcript with a subagent (Claude Code 2.1.197 writes the subagent's conversation
/// to `<session>/subagents/agent-<id>.jsonl`): the parent's graph marks the `Agent` call with
/// the subagent's transcript, and the subagent's graph names the call that started it, in the
/// text, the SVG and the JSON, from the command line and from the daemon.
#[test]
fn a_subagent_s_transcript_and_the_call_that_started_it_link_both_ways() {
    let parent = repo().join("tests/data/claude/real/with-subagent.jsonl");
    let sub = repo().join(format!(
        "tests/data/claude/real/with-subagent/subagents/agent-{AGENT_ID}.jsonl"
    ));
    let (p, s) = (parent.to_str().unwrap(), sub.to_str().unwrap());

    // The parent: the Agent call has a row of its own, linked to the subagent's transcript.
    let doc = cli_json(&["graph", p, "--json"]);
    let call = node(&doc, AGENT_CALL);
    assert_eq!(call["kind"], "entry");
    assert!(call["preview"].as_str().unwrap().starts_with("Agent("));
    assert_eq!(
        call["subagent"],
        serde_json::json!({"agentId": AGENT_ID, "path": s, "toolUseId": TOOL_USE})
    );
    let linked: Vec<&Value> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| !n["subagent"].is_null())
        .collect();
    assert_eq!(linked.len(), 1, "{doc}");
    assert!(doc["parent"].is_null(), "{doc}");
    let text = stdout(&["graph", p]);
    let line = text
        .lines()
        .find(|l| l.contains(AGENT_CALL))
        .expect("the call's line");
    assert!(
        line.ends_with(&format!("  ↳ subagent agent-{AGENT_ID} ({s})")),
        "{line}"
    );
    assert!(text.contains("↳ a tool call and the subagent's transcript it started"));
    let svg = stdout(&["graph", p, "--svg"]);
    let calls = groups(&svg, "node entry");
    let calls: Vec<&&str> = calls
        .iter()
        .filter(|t| t.contains(" subagent-call"))
        .collect();
    assert_eq!(calls.len(), 1, "{svg}");
    assert_eq!(attr(calls[0], "data-id"), Some(AGENT_CALL));
    assert_eq!(attr(calls[0], "data-subagent"), Some(AGENT_ID));
    assert_eq!(attr(calls[0], "data-subagent-path"), Some(s));
    assert_eq!(attr(calls[0], "data-tool-use-id"), Some(TOOL_USE));
    assert!(svg.contains(&format!("↳ subagent agent-{AGENT_ID} ({s})")));

    // The subagent: its graph names the transcript and the call that started it.
    let doc = cli_json(&["graph", s, "--json"]);
    assert_eq!(
        doc["parent"],
        serde_json::json!({"path": p, "agentId": AGENT_ID, "toolUseId": TOOL_USE})
    );
    let said = format!("subagent agent-{AGENT_ID} started by tool_use {TOOL_USE} of {p}");
    let lines: Vec<&str> = doc["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(lines[1], said, "{lines:?}");
    assert_eq!(stdout(&["graph", s]).lines().nth(1), Some(said.as_str()));
    let svg = stdout(&["graph", s, "--svg"]);
    let at = svg
        .find("<text class=\"legend parent\"")
        .expect("the parent line");
    let tag = &svg[at..at + svg[at..].find('>').unwrap()];
    assert_eq!(attr(tag, "data-parent-path"), Some(p));
    assert_eq!(attr(tag, "data-tool-use-id"), Some(TOOL_USE));
    assert!(svg[at..].contains(&said));

    // The daemon says the same of copies under its root (paths as it names them: canonical).
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let parent_copy = root.join("838352e6-5330-4994-8c3d-53cbd81d2c36.jsonl");
    let subs = root.join("838352e6-5330-4994-8c3d-53cbd81d2c36/subagents");
    std::fs::create_dir_all(&subs).unwrap();
    std::fs::copy(&parent, &parent_copy).unwrap();
    for ext in ["jsonl", "meta.json"] {
        let name = format!("agent-{AGENT_ID}.{ext}");
        std::fs::copy(sub.with_file_name(&name), subs.join(&name)).unwrap();
    }
    let sub_copy = subs.join(format!("agent-{AGENT_ID}.jsonl"));
    let (mut d, _) = support::Daemon::start(&[&root]);
    for f in [&parent_copy, &sub_copy] {
        let _: Value = d.call("session/open", serde_json::json!({"path": f}));
    }
    let r = support::checked(
        &mut d,
        "session/graph",
        serde_json::json!({"path": parent_copy}),
    );
    assert_eq!(
        node(&r, AGENT_CALL)["subagent"],
        serde_json::json!({"agentId": AGENT_ID, "path": sub_copy, "toolUseId": TOOL_USE})
    );
    let mut whole = cli_json(&["graph", parent_copy.to_str().unwrap(), "--json"]);
    whole.as_object_mut().unwrap().remove("revision");
    let mut r = r;
    r.as_object_mut().unwrap().remove("revision");
    assert_eq!(r, whole);
    let r = support::checked(
        &mut d,
        "session/graph",
        serde_json::json!({"path": sub_copy}),
    );
    assert_eq!(
        r["parent"],
        serde_json::json!({"path": parent_copy, "agentId": AGENT_ID, "toolUseId": TOOL_USE})
    );
    let _: Value = d.call("shutdown", Value::Null);
}

/// Sidechains written in the main file (older Claude Code) are linked to the `Agent` or `Task`
/// call whose prompt is their first user message; one no call matches stays apart, unlinked.
#[test]
fn a_sidechain_in_the_main_file_links_to_the_call_whose_prompt_started_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    let line = |uuid: &str, parent: Option<&str>, side: bool, ty: &str, content: Value| {
        serde_json::json!({
            "type": ty, "uuid": uuid, "parentUuid": parent, "isSidechain": side,
            "timestamp": "2026-01-01T00:00:00.000Z", "sessionId": "s",
            "message": {"role": ty, "content": content, "id": format!("m-{uuid}"), "model": "claude-opus-4-8"},
        })
        .to_string()
    };
    let call = serde_json::json!([{"type": "tool_use", "id": "toolu_9", "name": "Task",
        "input": {"description": "look", "prompt": "subagent task"}}]);
    let result =
        serde_json::json!([{"type": "tool_result", "tool_use_id": "toolu_9", "content": "done"}]);
    let text = [
        line("u1", None, false, "user", Value::from("main prompt")),
        line("a1", Some("u1"), false, "assistant", call),
        line("s1", None, true, "user", Value::from("subagent task")),
        line(
            "s2",
            Some("s1"),
            true,
            "assistant",
            Value::from("subagent answer"),
        ),
        line("r1", Some("a1"), false, "user", result),
        line(
            "a2",
            Some("r1"),
            false,
            "assistant",
            Value::from("main answer"),
        ),
        line(
            "x1",
            None,
            true,
            "user",
            Value::from("a prompt no call made"),
        ),
    ]
    .join("\n")
        + "\n";
    std::fs::write(&file, text).unwrap();
    let f = file.to_str().unwrap();
    let doc = cli_json(&["graph", f, "--json"]);
    let ids: Vec<&str> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["u1", "a1", "r1", "a2", "s1", "s2", "x1"]);
    assert_eq!(
        node(&doc, "s1")["startedBy"],
        serde_json::json!({"id": "a1", "row": 1, "toolUseId": "toolu_9"})
    );
    assert_eq!(node(&doc, "s1")["apart"], true);
    assert_eq!(
        node(&doc, "a1")["sidechain"],
        serde_json::json!({"id": "s1", "row": 4})
    );
    assert!(node(&doc, "x1")["startedBy"].is_null());
    assert!(node(&doc, "a1")["subagent"].is_null());
    let text = stdout(&["graph", f]);
    let of = |id: &str| {
        text.lines()
            .find(|l| l.contains(&format!(" {id} ")))
            .unwrap()
    };
    assert!(
        of("s1").ends_with("⇠ started by a1 (tool_use toolu_9)"),
        "{text}"
    );
    assert!(of("a1").ends_with("↳ sidechain s1"), "{text}");
    assert!(!of("x1").contains("started by"), "{text}");
    assert!(text.contains("⇠ a sidechain and the tool call that started it"));
    let svg = stdout(&["graph", f, "--svg"]);
    let links: Vec<&str> = svg
        .match_indices("<path class=\"edge sidechain\"")
        .map(|(i, _)| &svg[i..i + svg[i..].find('>').unwrap()])
        .collect();
    assert_eq!(links.len(), 1, "{svg}");
    assert_eq!(attr(links[0], "data-sidechain"), Some("s1"));
    assert_eq!(attr(links[0], "data-call"), Some("a1"));
    assert_eq!(attr(links[0], "data-tool-use-id"), Some("toolu_9"));
    assert!(svg.contains("dotted: a sidechain and the tool call that started it"));
}
