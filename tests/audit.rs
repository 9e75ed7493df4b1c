//! Where a summary came from: `explain` on a compaction or a branch summary gives the span it
//! replaced and the audit of it. On the shipped sessions' summaries (written by pi, with a
//! model or by hand) every probe is checked against the context at the summary (a kept fact is
//! in the message that holds it, a lost one in no message's text) and the numbers are pinned;
//! on compactions sessiond writes, the audit is exactly the retention report `compact` gave
//! when it wrote them — on the example at each of its leaves, over an earlier compaction, and
//! on generated trees, with small and default `--keep-recent-tokens` (split turns included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::common;

use std::path::{Path, PathBuf};

use common::generator::{Run, generate, run_from_env};
use common::{sessiond_json, v1_line_id};
use serde_json::{Value, json};

const DEFAULT_SEED: u64 = 0xa0d1_2026;
const DEFAULT_TREES: usize = 40;

fn explain(file: &Path, id: &str) -> Value {
    sessiond_json(&[
        "explain".into(),
        file.to_string_lossy().into_owned(),
        id.into(),
        "--json".into(),
    ])
    .unwrap()
}

/// The compactions and branch summaries of a file: `(id, type)`; a version-1 entry is named
/// by its line.
fn summaries(file: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(file).unwrap();
    let v1 = !text.lines().next().unwrap_or("").contains("\"version\"");
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let v = common::parse_json(l.as_bytes()).ok()?;
            let ty = v["type"].as_str()?;
            if ty != "compaction" && ty != "branch_summary" {
                return None;
            }
            let id = if v1 {
                v1_line_id(i as u64 + 1)
            } else {
                v["id"].as_str()?.to_owned()
            };
            Some((id, ty.to_owned()))
        })
        .collect()
}

/// Every string in a message where a probe may be found: its text and thinking, a summary,
/// tool calls (their JSON arguments too), a command and its output.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => {
            if let Some(args) = o.get("arguments") {
                out.push(args.to_string());
            }
            o.values().for_each(|x| strings(x, out));
        }
        _ => {}
    }
}

/// The text of a message a lost fact must be missing from: its text blocks and summary.
fn plain_text(m: &Value) -> String {
    let mut parts = Vec::new();
    match &m["content"] {
        Value::String(s) => parts.push(s.clone()),
        Value::Array(blocks) => {
            for b in blocks {
                if b["type"] == "text"
                    && let Some(t) = b["text"].as_str()
                {
                    parts.push(t.to_owned());
                }
            }
        }
        _ => {}
    }
    if let Some(s) = m["summary"].as_str() {
        parts.push(s.to_owned());
    }
    parts.join("\n")
}

/// Checks an audit against the context at the summary: counts add up, a kept fact is in the
/// message of the entry it names, a lost one in no message's text.
fn check_audit(file: &Path, id: &str, ex: &Value) {
    let audit = &ex["audit"];
    let probes = audit["probes"].as_array().expect("probes");
    let kept = probes.iter().filter(|p| p["status"] == "kept").count();
    assert_eq!(audit["kept"], json!(kept), "{id}");
    assert_eq!(audit["lost"], json!(probes.len() - kept), "{id}");
    let ctx = sessiond_json(&common::context_args(file, Some(id))).unwrap();
    let messages = ctx["messages"].as_array().unwrap();
    let owners = ctx["messageEntryIds"].as_array().unwrap();
    for p in probes {
        let text = p["text"].as_str().unwrap();
        assert!(
            p["entryId"].is_string(),
            "{id}: a probe without its entry: {p}"
        );
        if p["status"] == "kept" {
            let found = &p["foundIn"];
            let holds = messages.iter().zip(owners).any(|(m, o)| {
                let mut all = Vec::new();
                strings(m, &mut all);
                o == found && all.iter().any(|s| s.contains(text))
            });
            assert!(holds, "{id}: kept {p} is not in {found}'s message");
        } else {
            assert!(
                messages.iter().all(|m| !plain_text(m).contains(text)),
                "{id}: lost {p} is in the context's text"
            );
        }
    }
}

#[test]
fn the_shipped_summaries_are_audited() {
    let mut files: Vec<PathBuf> = common::jsonl_files(&common::repo_root().join("examples"));
    let real = common::repo_root().join("../shared/fixtures/real");
    if real.is_dir() {
        files.extend(common::jsonl_files(&real));
    }
    let mut seen = Vec::new();
    for file in &files {
        for (id, ty) in summaries(file) {
            let ex = explain(file, &id);
            let what = if ty == "compaction" {
                "source"
            } else {
                "branch"
            };
            assert!(ex[what].is_object(), "{id}: no {what}: {ex}");
            check_audit(file, &id, &ex);
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            seen.push((
                name,
                id,
                ex["audit"]["kept"].as_u64().unwrap(),
                ex["audit"]["lost"].as_u64().unwrap(),
                ex[what]["count"].as_u64().unwrap(),
            ));
        }
    }
    // The numbers (examples/ and ../shared/fixtures/real hold the same three sessions).
    let want = [
        ("pi-v1-before-compaction.jsonl", "00000168", 12, 6, 292),
        ("pi-v1-before-compaction.jsonl", "00000275", 7, 7, 257),
        ("pi-v3-branched.jsonl", "12bbdff5", 20, 11, 683),
        ("pi-v3-branched.jsonl", "4909db93", 0, 46, 338),
    ];
    for (name, id, kept, lost, count) in want {
        assert!(
            seen.iter()
                .any(|s| (s.0.as_str(), s.1.as_str(), s.2, s.3, s.4)
                    == (name, id, kept, lost, count)),
            "{name} {id}: {seen:?}"
        );
    }
    let ex = explain(
        &common::repo_root().join("examples/pi-v3-branched.jsonl"),
        "4909db93",
    );
    assert_eq!(
        ex["source"],
        json!({"count": 338, "firstId": "00247798", "lastId": "12bbdff5",
               "firstKeptEntryId": "521cf246", "previousCompactionId": null})
    );
    assert!(
        ex["text"].as_str().unwrap().ends_with(
            "it summarizes 338 entries 00247798…12bbdff5, keeps from 521cf246; kept 0 of 46 \
             facts, lost 46 (13 modified files, 6 read files, 8 tool errors, 18 pending tool \
             calls, the last request)"
        ),
        "{}",
        ex["text"]
    );
    let bs = explain(
        &common::repo_root().join("examples/pi-v3-branched.jsonl"),
        "12bbdff5",
    );
    assert_eq!(
        bs["branch"],
        json!({"fromId": "8a9bb12f", "leftAtId": "088a3b48", "count": 683,
               "firstId": "4c7af0b4", "lastId": "8a9bb12f"})
    );
}

/// Compacts `file` at `leaf` (`None`: the current leaf) and checks that `explain` on the new
/// entry audits it as `compact` reported. `None` when there was nothing to compact (or pi
/// would fail); else the new entry's id.
fn compact_and_audit(file: &Path, leaf: Option<&str>, keep: u64) -> Option<String> {
    let check = sessiond_json(&[
        "check".into(),
        file.to_string_lossy().into_owned(),
        "--json".into(),
    ])
    .unwrap();
    let current = check["currentLeafId"].as_str().unwrap_or("null").to_owned();
    let mut args = vec![
        "compact".to_owned(),
        file.to_string_lossy().into_owned(),
        "--expected-leaf".to_owned(),
        current,
        "--keep-recent-tokens".to_owned(),
        keep.to_string(),
        "--json".to_owned(),
    ];
    if let Some(l) = leaf {
        args.extend(["--leaf".to_owned(), l.to_owned()]);
    }
    let out = common::sessiond(&args);
    // pi would fail on the session (6), or its last line is torn (7): nothing written.
    if matches!(out.status.code(), Some(6 | 7)) {
        return None;
    }
    common::assert_exit(&out, 0);
    let report = common::parse_json_output(&out).unwrap();
    if report["written"] != json!(true) {
        return None;
    }
    let id = report["entryId"].as_str().unwrap().to_owned();
    let ex = explain(file, &id);
    assert_eq!(
        ex["audit"],
        report["retention"],
        "{}: the audit of {id} is not the report given at commit",
        file.display()
    );
    assert_eq!(
        ex["source"]["firstKeptEntryId"], report["firstKeptEntryId"],
        "{id}"
    );
    check_audit(file, &id, &ex);
    Some(id)
}

#[test]
fn sessionds_compactions_audit_as_they_were_reported() {
    let dir = tempfile::tempdir().unwrap();
    let example = common::repo_root().join("examples/pi-v3-branched.jsonl");
    // At each leaf of the example, with a small and the default budget, then once more over
    // the compaction just written (its details carried in).
    for (i, leaf) in ["8a9bb12f", "de19adb3", "610f9c1e"].iter().enumerate() {
        for keep in [2000, 20_000] {
            let file = dir.path().join(format!("ex-{i}-{keep}.jsonl"));
            std::fs::copy(&example, &file).unwrap();
            let first = compact_and_audit(&file, Some(leaf), keep);
            if let Some(first) = first {
                let again = compact_and_audit(&file, Some(&first), 500);
                let _ = again;
            }
        }
    }
    // Generated trees: compactions, context edits, branch summaries and odd shapes under
    // the cut.
    let Run { seed, trees, dir } = run_from_env("audit", DEFAULT_SEED, DEFAULT_TREES);
    let mut written = 0;
    let mut i = 0;
    let mut tried = 0;
    while tried < trees {
        let case = generate(seed, i, &dir);
        i += 1;
        if !case.file.to_string_lossy().ends_with("-v3.jsonl") {
            continue;
        }
        tried += 1;
        for keep in [1, 100, 1000] {
            if let Some(id) = compact_and_audit(&case.file, None, keep) {
                written += 1;
                if compact_and_audit(&case.file, Some(&id), 50).is_some() {
                    written += 1;
                }
            }
        }
    }
    eprintln!("audit: {written} compactions written on {tried} generated trees (seed {seed})");
    assert!(
        written >= trees / 2,
        "seed {seed}: only {written} compactions written"
    );
}

#[test]
fn the_daemon_explains_a_summary_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.jsonl");
    std::fs::copy(
        common::repo_root().join("examples/pi-v3-branched.jsonl"),
        &file,
    )
    .unwrap();
    let path = std::fs::canonicalize(&file).unwrap();
    let p = path.to_str().unwrap();
    let (mut d, _) = support::Daemon::start(&[dir.path()]);
    d.call("session/open", json!({"path": p}));
    for id in ["4909db93", "12bbdff5"] {
        let mut ours = d.call("session/explain", json!({"path": p, "entryId": id}));
        ours.as_object_mut().unwrap().remove("revision");
        assert_eq!(ours, explain(&path, id), "{id}");
    }
}

/// The compact boundaries of a Claude Code transcript: `(line, uuid)`, 1-based lines.
fn boundaries(lines: &[Value]) -> Vec<(usize, String)> {
    lines
        .iter()
        .enumerate()
        .filter(|(_, v)| v["subtype"] == "compact_boundary")
        .map(|(i, v)| (i + 1, v["uuid"].as_str().unwrap().to_owned()))
        .collect()
}

/// What boundary `at` (a 1-based line) replaced, walked here from the file alone: the chain of
/// `parentUuid`s from its `logicalParentUuid` in the lines before it, with the re-link the
/// compact boundary before it makes (its preserved head under its summary, the summary's
/// other children under the preserved tail), up to that boundary; less the lines the boundary
/// itself preserves. Returns (replaced ids in path order, the boundary before, the head kept).
fn replaced_by(lines: &[Value], at: usize) -> (Vec<String>, Option<String>, Option<String>) {
    let before = &lines[..at - 1];
    let by_uuid: std::collections::HashMap<&str, &Value> = before
        .iter()
        .filter_map(|v| Some((v["uuid"].as_str()?, v)))
        .collect();
    let segment = |b: &Value| {
        let s = &b["compactMetadata"]["preservedSegment"];
        (
            s["headUuid"].as_str().map(str::to_owned),
            s["anchorUuid"].as_str().map(str::to_owned),
            s["tailUuid"].as_str().map(str::to_owned),
        )
    };
    let previous = before
        .iter()
        .rev()
        .find(|v| v["subtype"] == "compact_boundary");
    let (p_head, p_anchor, p_tail) = previous.map(segment).unwrap_or_default();
    let parent = |v: &Value| -> Option<String> {
        let id = v["uuid"].as_str()?;
        if Some(id) == p_head.as_deref() {
            return p_anchor.clone();
        }
        let parent = v["parentUuid"].as_str().map(str::to_owned);
        if parent.is_some() && parent == p_anchor {
            return p_tail.clone();
        }
        parent
    };
    let boundary = &lines[at - 1];
    let (head, _, tail) = segment(boundary);
    let mut path = Vec::new();
    let mut cur = boundary["logicalParentUuid"].as_str().map(str::to_owned);
    while let Some(id) = cur {
        let v = by_uuid[id.as_str()];
        if v["subtype"] == "compact_boundary" {
            break;
        }
        path.push(id);
        cur = parent(v);
    }
    path.reverse();
    // The preserved segment: from its head to its tail, at the end of the path.
    let kept_from = path.iter().position(|id| Some(id) == head.as_ref());
    assert_eq!(
        path.last(),
        tail.as_ref(),
        "the compacted leaf is the preserved tail"
    );
    let replaced = path[..kept_from.unwrap_or(path.len())].to_vec();
    (
        replaced,
        previous.and_then(|v| v["uuid"].as_str().map(str::to_owned)),
        head,
    )
}

#[test]
fn claude_code_compactions_are_audited_as_the_file_was_when_each_was_written() {
    let file = common::repo_root().join("tests/data/claude/real/compacted.jsonl");
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let found = boundaries(&lines);
    assert_eq!(
        found.len(),
        2,
        "the real transcript holds two /compact runs"
    );
    // (kept, lost, the lost probes' texts): the scripted summaries name nothing of the span
    // but the first one's preserved answer repeats the last request.
    let pinned = [(1, 0, vec![]), (0, 1, vec!["Run a command again"])];
    for ((line, id), (kept, lost, lost_texts)) in found.iter().zip(pinned) {
        let (replaced, previous, head) = replaced_by(&lines, *line);
        let summary = lines[*line]["uuid"].as_str().unwrap();
        for target in [id.as_str(), summary] {
            let ex = explain(&file, target);
            let source = &ex["source"];
            assert_eq!(source["count"], json!(replaced.len()), "{target}");
            assert_eq!(source["firstId"], json!(replaced.first()), "{target}");
            assert_eq!(source["lastId"], json!(replaced.last()), "{target}");
            assert_eq!(source["firstKeptEntryId"], json!(head), "{target}");
            assert_eq!(source["previousCompactionId"], json!(previous), "{target}");
            let audit = &ex["audit"];
            assert_eq!(
                (audit["kept"].clone(), audit["lost"].clone()),
                (json!(kept), json!(lost))
            );
            let lost_now: Vec<&str> = audit["probes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["status"] == "lost")
                .map(|p| p["text"].as_str().unwrap())
                .collect();
            assert_eq!(lost_now, lost_texts, "{target}");
            // Every probe names a line of the span it came from.
            for p in audit["probes"].as_array().unwrap() {
                let from = p["entryId"].as_str().unwrap().to_owned();
                assert!(replaced.contains(&from), "{target}: {p}");
            }
            let text = ex["text"].as_str().unwrap();
            assert!(
                text.contains(&format!(
                    "its compaction summarizes {} lines",
                    replaced.len()
                )),
                "{text}"
            );
        }
    }
}

#[test]
fn the_daemon_explains_a_claude_code_compaction_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jsonl");
    std::fs::copy(
        common::repo_root().join("tests/data/claude/real/compacted.jsonl"),
        &file,
    )
    .unwrap();
    let path = std::fs::canonicalize(&file).unwrap();
    let p = path.to_str().unwrap();
    let lines: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (mut d, _) = support::Daemon::start(&[dir.path()]);
    d.call("session/open", json!({"path": p}));
    for (_, id) in boundaries(&lines) {
        let mut ours = d.call("session/explain", json!({"path": p, "entryId": id}));
        ours.as_object_mut().unwrap().remove("revision");
        assert!(ours["audit"].is_object(), "{ours}");
        assert_eq!(ours, explain(&path, &id), "{id}");
    }
}
