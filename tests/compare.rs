//! `sessiond diff` and `session/compareBranches` against pi's own functions: for every pair of
//! leaves of the shipped branched session, and for pairs of leaves of generated trees (with
//! compactions on one side, branch summaries and context edits), the fork point and the two
//! sides are pi's paths (the oracle's `path`) after their longest shared prefix, the context
//! differences are exactly pi's context entries (`buildContextEntries`) of one leaf that are
//! not the other's, with a reason that says whether the entry is on the other path at all, and
//! the thinking level and model are reported exactly when pi's differ; each side's user turns,
//! assistant messages and tool calls by name are counted from pi's own entries of the path after
//! the fork point, and its tokens are pi's `estimateProjectedContextTokens` at the leaf. Then the bad inputs of
//! the issue: an unknown leaf, the same leaf twice, a lenient read; and the daemon's answer is
//! the CLI's.
//!
//! Environment: SESSIOND_ORACLE_DIR (required under CI, otherwise the oracle parts are skipped
//! loudly), SESSIOND_DIFF_SEED, SESSIOND_DIFF_TREES (generated files; default 80).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::common;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use common::generator::{Run, generate, run_from_env};
use common::{sessiond_exits, sessiond_json};
use serde_json::{Value, json};

const DEFAULT_SEED: u64 = 0xd1ff_2026;
const DEFAULT_TREES: usize = 80;
/// Leaves compared per generated file (every ordered pair of them).
const LEAVES_PER_FILE: usize = 3;

fn diff_json(file: &Path, a: &str, b: &str) -> Result<Value, String> {
    sessiond_json(&[
        "diff".to_owned(),
        file.to_string_lossy().into_owned(),
        a.to_owned(),
        b.to_owned(),
        "--json".to_owned(),
    ])
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|x| match x {
            Value::String(s) => s.clone(),
            x => x["id"].as_str().expect("an id").to_owned(),
        })
        .collect()
}

/// What pi says of one leaf: its path (ids, and the entries as pi loaded them), its context
/// entries, its settings, its projected context tokens.
struct Pi {
    path: Vec<String>,
    path_entries: Vec<Value>,
    entries: Vec<String>,
    thinking: Value,
    model: Value,
    tokens: Value,
}

fn pi_of(result: &Value) -> Pi {
    assert!(result.get("error").is_none(), "pi failed: {result}");
    Pi {
        path: ids(&result["path"]),
        path_entries: result["pathEntries"]
            .as_array()
            .expect("a side job's pathEntries")
            .clone(),
        entries: ids(&result["entries"]),
        thinking: result["context"]
            .get("thinkingLevel")
            .cloned()
            .unwrap_or(Value::Null),
        model: result["context"]
            .get("model")
            .cloned()
            .unwrap_or(Value::Null),
        tokens: result["tokens"].clone(),
    }
}

/// A side's counts computed from pi's entries after the fork point: user and assistant
/// messages, tool calls by name (an assistant message's `toolCall` blocks), and the leaf's
/// tokens as pi estimates them (`estimateProjectedContextTokens`, what `list` counts), whole.
fn side_of(entries: &[Value], tokens: &Value) -> Value {
    let role = |e: &Value| {
        if e["type"] == "message" {
            e["message"]["role"].as_str().unwrap_or("").to_owned()
        } else {
            String::new()
        }
    };
    let mut tools: BTreeMap<String, usize> = BTreeMap::new();
    for e in entries.iter().filter(|e| role(e) == "assistant") {
        for b in e["message"]["content"].as_array().into_iter().flatten() {
            if b["type"] == "toolCall" {
                *tools
                    .entry(b["name"].as_str().unwrap_or("").to_owned())
                    .or_default() += 1;
            }
        }
    }
    let tokens = match tokens.as_f64() {
        Some(t) if t.is_finite() && t >= 0.0 => json!(t as u64),
        _ => Value::Null,
    };
    json!({
        "userTurns": entries.iter().filter(|e| role(e) == "user").count(),
        "assistantMessages": entries.iter().filter(|e| role(e) == "assistant").count(),
        "toolCalls": tools,
        "tokenEstimate": tokens,
    })
}

/// Checks one comparison against pi's paths and contexts of its two leaves; `Err` says what
/// differs.
fn check_pair(cmp: &Value, a: &Pi, b: &Pi) -> Result<(), String> {
    let shared = a
        .path
        .iter()
        .zip(&b.path)
        .take_while(|(x, y)| x == y)
        .count();
    let fork = shared.checked_sub(1).map(|i| a.path[i].clone());
    let same = |what: &str, ours: &Value, want: &Value| -> Result<(), String> {
        if ours == want {
            Ok(())
        } else {
            Err(format!("{what}: sessiond says {ours}, pi {want}"))
        }
    };
    same("forkPointId", &cmp["forkPointId"], &json!(fork))?;
    same(
        "onlyA",
        &json!(ids(&cmp["onlyA"])),
        &json!(a.path[shared..]),
    )?;
    same(
        "onlyB",
        &json!(ids(&cmp["onlyB"])),
        &json!(b.path[shared..]),
    )?;
    for (side, only, count, pi) in [("A", "onlyA", "sideA", a), ("B", "onlyB", "sideB", b)] {
        let n = cmp[only].as_array().unwrap().len();
        same(
            &format!("{count}.entries ({side})"),
            &cmp[count]["entries"],
            &json!(n),
        )?;
        // The counts, from pi's own entries after the fork point.
        let want = side_of(&pi.path_entries[shared..], &pi.tokens);
        for key in [
            "userTurns",
            "assistantMessages",
            "toolCalls",
            "tokenEstimate",
        ] {
            same(&format!("{count}.{key}"), &cmp[count][key], &want[key])?;
        }
    }
    let in_b: HashSet<&String> = b.entries.iter().collect();
    let in_a: HashSet<&String> = a.entries.iter().collect();
    let want_a: Vec<&String> = a.entries.iter().filter(|e| !in_b.contains(e)).collect();
    let want_b: Vec<&String> = b.entries.iter().filter(|e| !in_a.contains(e)).collect();
    same(
        "contextOnlyA",
        &json!(ids(&cmp["contextOnlyA"])),
        &json!(want_a),
    )?;
    same(
        "contextOnlyB",
        &json!(ids(&cmp["contextOnlyB"])),
        &json!(want_b),
    )?;
    let both = a.entries.iter().filter(|e| in_b.contains(e)).count();
    let changed = ids(&cmp["contextChanged"]);
    same(
        "contextCommon + contextChanged",
        &json!(cmp["contextCommon"].as_u64().unwrap() as usize + changed.len()),
        &json!(both),
    )?;
    if let Some(c) = changed
        .iter()
        .find(|c| !in_a.contains(c) || !in_b.contains(c))
    {
        return Err(format!("changed entry {c} is not a context entry at both"));
    }
    // The reason names the other path: off it, the entry is after the fork point.
    for (list, other) in [("contextOnlyA", &b.path), ("contextOnlyB", &a.path)] {
        let on_other: HashSet<&String> = other.iter().collect();
        for d in cmp[list].as_array().unwrap() {
            let id = d["id"].as_str().unwrap().to_owned();
            let kind = d["reason"]["kind"].as_str().unwrap_or("");
            let ok = if on_other.contains(&id) {
                matches!(kind, "summarizedByCompaction" | "systemMessageInKeptRange")
            } else {
                kind == "notOnPath" && d["reason"]["divergesAt"] == json!(fork)
            };
            if !ok {
                return Err(format!("{list}: {id}'s reason {} ", d["reason"]));
            }
        }
    }
    for (key, x, y) in [
        ("thinkingLevel", &a.thinking, &b.thinking),
        ("model", &a.model, &b.model),
    ] {
        let want = if x == y {
            Value::Null
        } else {
            json!({"a": x, "b": y})
        };
        same(key, cmp.get(key).unwrap_or(&Value::Null), &want)?;
    }
    Ok(())
}

/// The ids of the entries of a generated file that no entry names as its parent.
fn leaves_of(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let entries: Vec<Value> = text
        .lines()
        .skip(1)
        .filter_map(|l| common::parse_json(l.as_bytes()).ok())
        .collect();
    let parents: HashSet<&str> = entries
        .iter()
        .filter_map(|e| e["parentId"].as_str())
        .collect();
    let mut out: Vec<String> = entries
        .iter()
        .filter_map(|e| e["id"].as_str())
        .filter(|id| !parents.contains(id))
        .map(str::to_owned)
        .collect();
    out.dedup();
    out
}

#[test]
fn every_pair_of_the_shipped_sessions_leaves_is_pis() {
    let Some(oracle) = common::oracle_dir("compare: shipped session") else {
        return;
    };
    let file = common::repo_root().join("examples/pi-v3-branched.jsonl");
    let leaves = ["8a9bb12f", "610f9c1e", "de19adb3"];
    let jobs: Vec<Value> = leaves
        .iter()
        .map(|l| json!({"file": file.to_string_lossy(), "leaf": l, "side": true}))
        .collect();
    let pi: Vec<Pi> = common::run_batch_oracle(&oracle, &jobs)
        .iter()
        .map(pi_of)
        .collect();
    let mut forks = BTreeMap::new();
    for (i, a) in leaves.iter().enumerate() {
        for (j, b) in leaves.iter().enumerate() {
            let cmp = diff_json(&file, a, b).unwrap();
            check_pair(&cmp, &pi[i], &pi[j]).unwrap_or_else(|e| panic!("{a} vs {b}: {e}"));
            forks.insert(format!("{a} {b}"), cmp["forkPointId"].clone());
        }
    }
    // What the report says of the shipped session (also in the daemon's README example).
    assert_eq!(forks["610f9c1e de19adb3"], json!("521cf246"));
    assert_eq!(forks["8a9bb12f 610f9c1e"], json!("088a3b48"));
    let cmp = diff_json(&file, "610f9c1e", "de19adb3").unwrap();
    let summarized: Vec<&Value> = cmp["contextOnlyB"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["reason"]["kind"] == "summarizedByCompaction")
        .collect();
    assert_eq!(summarized.len(), 338);
    assert!(
        summarized
            .iter()
            .all(|d| d["text"] == "summarized by compaction 4909db93, on A only")
    );
    assert_eq!(cmp["thinkingLevel"], json!({"a": "high", "b": "off"}));
    assert_eq!(cmp["sideA"]["toolCalls"], json!({"edit": 1, "read": 1}));
    assert_eq!(cmp["sideA"]["userTurns"], json!(1));
    let changed = cmp["sideA"]["filesChanged"].as_array().unwrap();
    assert_eq!(changed.len(), 1);
    assert!(
        changed[0]
            .as_str()
            .unwrap()
            .ends_with("/packages/coding-agent/src/main.ts"),
        "{changed:?}"
    );
}

#[test]
fn generated_pairs_match_pi() {
    let Some(oracle) = common::oracle_dir("compare: generated trees") else {
        return;
    };
    let Run { seed, trees, dir } = run_from_env("compare", DEFAULT_SEED, DEFAULT_TREES);
    // Version-3 files only: pi invents the ids of older ones.
    let mut files: Vec<(PathBuf, Vec<String>)> = Vec::new();
    let mut i = 0;
    while files.len() < trees {
        let case = generate(seed, i, &dir);
        i += 1;
        if !case.file.to_string_lossy().ends_with("-v3.jsonl") {
            continue;
        }
        let mut leaves = leaves_of(&case.file);
        leaves.truncate(LEAVES_PER_FILE - 1);
        // And one entry inside the tree, whose path is a prefix of others.
        if let Some(Some(inner)) = case.leaves.get(1) {
            leaves.push(inner.clone());
        }
        leaves.dedup();
        files.push((case.file, leaves));
    }
    let jobs: Vec<Value> = files
        .iter()
        .flat_map(|(f, leaves)| {
            leaves
                .iter()
                .map(move |l| json!({"file": f.to_string_lossy(), "leaf": l, "side": true}))
        })
        .collect();
    let answers = common::run_batch_oracle(&oracle, &jobs);
    let mut pairs = Vec::new();
    let mut at = 0;
    for (f, leaves) in &files {
        let base = at;
        at += leaves.len();
        for (x, a) in leaves.iter().enumerate() {
            for (y, b) in leaves.iter().enumerate() {
                pairs.push((f.clone(), a.clone(), b.clone(), base + x, base + y));
            }
        }
    }
    let results = common::parallel_map(&pairs, |(f, a, b, x, y)| {
        if answers[*x].get("error").is_some() || answers[*y].get("error").is_some() {
            return Ok(None);
        }
        let cmp = diff_json(f, a, b)?;
        check_pair(&cmp, &pi_of(&answers[*x]), &pi_of(&answers[*y]))
            .map_err(|e| format!("{} {a} vs {b}: {e}", f.display()))?;
        Ok::<_, String>(Some(cmp))
    });
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {} comparisons differ from pi; first: {}",
        failures.len(),
        pairs.len(),
        failures[0]
    );
    // The generated pairs cover what the comparison is for.
    let compared: Vec<&Value> = results
        .iter()
        .filter_map(|r| r.as_ref().ok().and_then(Option::as_ref))
        .collect();
    let one_side_has = |ty: &str| {
        compared
            .iter()
            .filter(|c| {
                let has = |k: &str| c[k].as_array().unwrap().iter().any(|e| e["type"] == ty);
                has("onlyA") != has("onlyB")
            })
            .count()
    };
    let coverage = [
        ("a compaction on one side", one_side_has("compaction")),
        (
            "a branch summary on one side",
            one_side_has("branch_summary"),
        ),
        ("a context edit on one side", one_side_has("context_edit")),
        (
            "entries a compaction on one side summarizes",
            compared
                .iter()
                .filter(|c| {
                    ["contextOnlyA", "contextOnlyB"].iter().any(|k| {
                        c[*k].as_array().unwrap().iter().any(|d| {
                            d["reason"]["kind"] == "summarizedByCompaction"
                                && !d["text"].as_str().unwrap().ends_with("on both")
                        })
                    })
                })
                .count(),
        ),
        (
            "an entry that reaches the model differently",
            compared
                .iter()
                .filter(|c| !c["contextChanged"].as_array().unwrap().is_empty())
                .count(),
        ),
        (
            "a side with tool calls and a token count",
            compared
                .iter()
                .filter(|c| {
                    ["sideA", "sideB"].iter().any(|s| {
                        !c[*s]["toolCalls"].as_object().unwrap().is_empty()
                            && c[*s]["tokenEstimate"].as_u64().is_some_and(|t| t > 0)
                    })
                })
                .count(),
        ),
        (
            "the same leaf twice",
            compared.iter().filter(|c| c["leafA"] == c["leafB"]).count(),
        ),
    ];
    for (what, n) in coverage {
        assert!(n > 0, "seed {seed}: no generated pair has {what}");
    }
}

#[test]
fn bad_input_is_as_the_issue_says() {
    let file = common::repo_root().join("examples/pi-v3-branched.jsonl");
    let f = file.to_str().unwrap();
    // An unknown leaf is the usual unknown-entry error, naming the id.
    let out = sessiond_exits(&["diff", f, "610f9c1e", "nope1234"], 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown leaf id nope1234"), "{err}");
    let out = sessiond_exits(&["diff", f, "nope1234", "610f9c1e", "--json"], 2);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nope1234"),
        "{doc}"
    );
    // The same leaf twice: a valid, empty comparison.
    let same = diff_json(&file, "de19adb3", "de19adb3").unwrap();
    assert_eq!(same["forkPointId"], "de19adb3");
    for k in [
        "onlyA",
        "onlyB",
        "contextOnlyA",
        "contextOnlyB",
        "contextChanged",
    ] {
        assert_eq!(same[k], json!([]), "{k}");
    }
    assert!(same.get("thinkingLevel").is_none() && same.get("model").is_none());
    assert_eq!(same["sideA"], same["sideB"]);

    // A corrupt file: refused, or compared as read with the problems attached.
    let lenient =
        common::repo_root().join("tests/data/cases/lenient-missing-parent-duplicate.jsonl");
    let l = lenient.to_str().unwrap();
    sessiond_exits(&["diff", l, "k2", "k6"], 3);
    let out = sessiond_exits(&["diff", l, "k2", "k6", "--json", "--allow-corrupt"], 0);
    let cmp: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cmp["forkPointId"], Value::Null, "two roots share nothing");
    assert_eq!(ids(&cmp["onlyA"]), ["k1", "k2"]);
    assert_eq!(ids(&cmp["onlyB"]), ["k4", "k5", "k6"]);
    assert_eq!(cmp["diagnostics"].as_array().unwrap().len(), 3, "{cmp}");
    let text = sessiond_exits(&["diff", l, "k2", "k6", "--allow-corrupt"], 0);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("no fork point"), "{text}");
    assert!(text.contains("read leniently: 3 problems"), "{text}");
}

/// The report a person reads, pinned on the shipped pair: the head line with the fork point,
/// both sides after it side by side (A's middle run folded, B's one entry), what each side did,
/// the context difference grouped by reason, and the thinking levels that differ.
#[test]
fn the_report_of_the_shipped_pair_reads_as_pinned() {
    let file = common::repo_root().join("examples/pi-v3-branched.jsonl");
    let out = sessiond_exits(&["diff", file.to_str().unwrap(), "610f9c1e", "de19adb3"], 0);
    let text = String::from_utf8(out.stdout).unwrap();
    let want = [
        "A 610f9c1e · B de19adb3 · fork point 521cf246 (user)",
        "A: 10 entries after the fork point                           │ B: 1 entry after the fork point",
        "92bfec97 assistant Plan: 1) extract runPrintMode 2) extract… │ de19adb3 user Actually, do not touch main.ts yet; list the …",
        "┆ 6 entries folded: 2 toolResult, 1 assistant, 1 custom, …   │",
        "4909db93 compaction ## Goal Split run modes out of packages… │",
        "886c2fdc user Now extract runRpcMode.                        │",
        "610f9c1e thinking_level_change thinking: high                │",
        "A did: 1 user turn · 2 assistant messages · 2 tool calls (edit 1, read 1) · changed main.ts · thinking → high (610f9c1e) · context 199 tokens at the leaf",
        "B did: 1 user turn · 0 assistant messages · context 90524 tokens at the leaf",
        "context: 11 entries at A, 340 at B; 1 the same at both, 0 reaching the model differently",
        "  context entries at A only, not at B: 10",
        "    10 after the fork point, on A only: 4909db93…610f9c1e",
        "  context entries at B only, not at A: 339",
        "    338 summarized by compaction 4909db93, on A only: 00247798…12bbdff5",
        "    1 after the fork point, on B only: de19adb3",
        "thinking level: A high, B off",
    ];
    assert_eq!(text.lines().collect::<Vec<_>>(), want, "{text}");
    assert!(
        text.ends_with('\n') && !text.lines().any(|l| l.ends_with(' ')),
        "{text:?}"
    );

    // A Claude Code transcript's rows show each uuid by its first 8 characters (unique in the
    // transcript), which `explain` takes as they are.
    let t = common::repo_root().join("tests/data/claude/real/compacted.jsonl");
    let out = sessiond_exits(&["diff", t.to_str().unwrap(), "0b5e3c50", "d49e5e29"], 0);
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .skip(2)
        .take_while(|l| l.contains('│'))
        .collect();
    assert!(
        rows.iter()
            .any(|r| r.starts_with("0bee5823 user Second prompt ")),
        "{text}"
    );
    assert!(
        rows.iter()
            .any(|r| r.ends_with("│ d49e5e29 assistant The command printed referee-one.")),
        "{text}"
    );
    assert!(!rows.iter().any(|r| r.contains("-6023-")), "{text}");
    let explained = sessiond_exits(&["explain", t.to_str().unwrap(), "0bee5823"], 0);
    assert!(String::from_utf8_lossy(&explained.stdout).contains("0bee5823"));
}

#[test]
fn the_daemon_answers_what_the_cli_prints() {
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
    for (a, b) in [("610f9c1e", "de19adb3"), ("8a9bb12f", "610f9c1e")] {
        let mut ours = d.call(
            "session/compareBranches",
            json!({"path": p, "leafA": a, "leafB": b}),
        );
        assert!(
            ours["revision"]["entryCount"] == 1033,
            "{}",
            ours["revision"]
        );
        ours.as_object_mut().unwrap().remove("revision");
        let cli = diff_json(&path, a, b).unwrap();
        assert_eq!(ours, cli, "{a} vs {b}");
    }
    let r = d.request(
        "session/compareBranches",
        json!({"path": p, "leafA": "610f9c1e", "leafB": "nope1234"}),
    );
    let (code, message, data) = support::error_of(&r);
    assert_eq!(code, -33004, "{message}");
    assert_eq!(data["id"], "nope1234");
    let r = d.request(
        "session/compareBranches",
        json!({"path": p, "leafA": "610f9c1e", "leafB": "de19adb3", "model": "x"}),
    );
    assert_eq!(support::error_of(&r).0, -32602);

    // A Claude Code transcript: the same document, `format` said.
    let t = dir.path().join("t.jsonl");
    std::fs::copy(
        common::repo_root().join("tests/data/claude/real/compacted.jsonl"),
        &t,
    )
    .unwrap();
    let t = std::fs::canonicalize(&t).unwrap();
    let tp = t.to_str().unwrap();
    d.call("session/open", json!({"path": tp}));
    let (a, b) = (
        "0b5e3c50-369b-45ad-a35e-c68a63fa334e",
        "d49e5e29-e5ef-46c2-a87c-bf2f85c28185",
    );
    let mut ours = d.call(
        "session/compareBranches",
        json!({"path": tp, "leafA": a, "leafB": b}),
    );
    ours.as_object_mut().unwrap().remove("revision");
    assert_eq!(ours, diff_json(&t, a, b).unwrap());
    assert_eq!(ours["format"], "claude-code");
}

/// A Claude Code transcript with a branch (a resume at an older line) and two compactions:
/// every pair of its leaves is compared over the logical paths, and the context differences
/// are exactly what `context` sends at one leaf and not the other.
#[test]
fn a_claude_code_transcripts_leaves_are_compared() {
    let file = common::repo_root().join("tests/data/claude/real/compacted.jsonl");
    let check = sessiond_json(&[
        "check".into(),
        file.to_string_lossy().into_owned(),
        "--json".into(),
    ])
    .unwrap();
    let leaves = ids(&check["leafIds"]);
    assert_eq!(leaves.len(), 5);
    let sent = |leaf: &str| -> Vec<String> {
        let ctx = sessiond_json(&common::context_args(&file, Some(leaf))).unwrap();
        ids(&ctx["entryIds"])
    };
    for a in &leaves {
        for b in &leaves {
            let cmp = diff_json(&file, a, b).unwrap();
            assert_eq!(cmp["format"], "claude-code");
            let (sa, sb) = (sent(a), sent(b));
            let only = |x: &[String], y: &[String]| -> Vec<String> {
                x.iter().filter(|e| !y.contains(e)).cloned().collect()
            };
            assert_eq!(ids(&cmp["contextOnlyA"]), only(&sa, &sb), "{a} vs {b}");
            assert_eq!(ids(&cmp["contextOnlyB"]), only(&sb, &sa), "{a} vs {b}");
            assert_eq!(
                cmp["contextCommon"],
                json!(sa.iter().filter(|e| sb.contains(e)).count())
            );
            // Each side ends at its leaf; the same leaf twice is empty.
            for (leaf, side) in [(a, "onlyA"), (b, "onlyB")] {
                if let Some(last) = ids(&cmp[side]).last() {
                    assert_eq!(last, leaf, "{a} vs {b}: {side}");
                } else {
                    assert_eq!(cmp["forkPointId"], json!(leaf), "{a} vs {b}");
                }
            }
        }
    }
    // The leaf the first compaction compacted is on the path of every leaf after it: the
    // compaction continues that conversation.
    let cmp = diff_json(
        &file,
        "7f1509ff-4e18-403f-ab85-226b98c46dbf",
        "ec228510-5a3b-4462-aad5-e3f6654df41b",
    )
    .unwrap();
    assert_eq!(cmp["forkPointId"], "7f1509ff-4e18-403f-ab85-226b98c46dbf");
    assert_eq!(cmp["onlyA"], json!([]));
    assert!(
        cmp["contextOnlyA"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["reason"]["kind"] == "beforeCompactBoundary"),
        "{}",
        cmp["contextOnlyA"]
    );
    // The rewind: two branches from one answer.
    let cmp = diff_json(
        &file,
        "0b5e3c50-369b-45ad-a35e-c68a63fa334e",
        "7f1509ff-4e18-403f-ab85-226b98c46dbf",
    )
    .unwrap();
    assert_eq!(cmp["forkPointId"], "f9cc853c-ba6a-4561-93ff-cb4f95759bd2");
    assert_eq!(
        cmp["sideA"]["toolCalls"],
        json!({"Bash": 3, "Read": 1, "Write": 1})
    );
    assert_eq!(cmp["sideB"]["userTurns"], 2);
}
