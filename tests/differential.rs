//! Randomized differential test: generates a few hundred seeded session trees, runs pi 1.6.0 (tests/oracle/batch.mjs)
//! over all of them once, and diffs `sessiond context --json` against it for the default leaf and random leaves,
//! and `sessiond tree --json` against pi's `getTree` (roots, and children in pi's sibling order) once per file.
//!
//! Environment: SESSIOND_ORACLE_DIR (required under CI, otherwise the test is skipped loudly),
//! SESSIOND_DIFF_SEED (a number, or "random" for a time-based seed; default fixed),
//! SESSIOND_DIFF_TREES (how many session files; default 300).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::generator::{Case, Run, generate, run_from_env};
use common::{context_args, diff_report, json_eq, restrict_to_context, sessiond_json, v1_line_id};
use serde_json::{Value, json};

const DEFAULT_SEED: u64 = 0x5e55_10d0_2026;
const DEFAULT_TREES: usize = 300;

#[test]
fn random_sessions_match_pi() {
    let Some(oracle) = common::oracle_dir("differential test") else {
        return;
    };
    let Run { seed, trees, dir } = run_from_env("differential", DEFAULT_SEED, DEFAULT_TREES);

    let cases: Vec<Case> = (0..trees).map(|i| generate(seed, i, &dir)).collect();
    let jobs: Vec<(PathBuf, Option<String>)> = cases
        .iter()
        .flat_map(|c| c.leaves.iter().map(|l| (c.file.clone(), l.clone())))
        .collect();
    let oracle_jobs: Vec<Value> = jobs
        .iter()
        .map(|(file, leaf)| json!({"file": file.to_string_lossy(), "leaf": leaf}))
        .collect();
    let expected = common::run_batch_oracle(&oracle, &oracle_jobs);

    let indexed: Vec<usize> = (0..jobs.len()).collect();
    let results = common::parallel_map(&indexed, |&i| {
        let (file, leaf) = &jobs[i];
        let pi = &expected[i];
        if let Some(error) = pi.get("error") {
            return Err(format!("pi itself failed: {error}"));
        }
        let args = context_args(file, leaf.as_deref());
        let actual = sessiond_json(&args)?;
        let context = restrict_to_context(&actual);
        if !json_eq(&pi["context"], &context) {
            return Err(format!(
                "`sessiond {}`: context differs: {}",
                args.join(" "),
                diff_report(&pi["context"], &context)
            ));
        }
        let ids = match &pi["entries"] {
            Value::Array(ids) => Value::Array(ids.clone()),
            _ => pi["entryLines"]
                .as_array()
                .map(|lines| {
                    lines
                        .iter()
                        .map(|l| json!(v1_line_id(l.as_u64().unwrap_or(0))))
                        .collect()
                })
                .unwrap_or_default(),
        };
        match actual.get("entryIds") {
            Some(got) if json_eq(&ids, got) => {}
            got => {
                return Err(format!(
                    "`sessiond {}`: entryIds differ: {}",
                    args.join(" "),
                    diff_report(&ids, got.unwrap_or(&Value::Null))
                ));
            }
        }
        match pi.get("tree") {
            Some(tree) => compare_tree(file, tree),
            None => Ok(()),
        }
    });

    let failures: Vec<(usize, String)> = results
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| r.err().map(|e| (i, e)))
        .collect();
    let trees = expected
        .iter()
        .filter(|pi| pi.get("tree").is_some())
        .count();
    eprintln!(
        "differential: seed {seed}, {} session files, {} cases ({trees} tree orders), {} failed",
        cases.len(),
        jobs.len(),
        failures.len()
    );
    if let Some((first, report)) = failures.first() {
        let listed: Vec<String> = failures
            .iter()
            .take(30)
            .map(|(i, _)| {
                format!(
                    "{} leaf {}",
                    jobs[*i].0.display(),
                    jobs[*i].1.as_deref().unwrap_or("<default>")
                )
            })
            .collect();
        panic!(
            "differential test: {} of {} cases differ from pi (seed {seed}; rerun with SESSIOND_DIFF_SEED={seed}).\n\
             Case files are kept in {}\nfailing cases (first 30):\n  {}\n\nfirst failure, {} leaf {}:\n{report}",
            failures.len(),
            jobs.len(),
            dir.display(),
            listed.join("\n  "),
            jobs[*first].0.display(),
            jobs[*first].1.as_deref().unwrap_or("<default>"),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sessiond tree --json` against pi's `getTree`: the roots and every node's children in the same
/// order (siblings are sorted by timestamp, and missing or unparsable ones make the comparator NaN).
fn compare_tree(file: &std::path::Path, pi: &Value) -> Result<(), String> {
    let args = [
        "tree".to_string(),
        file.to_string_lossy().into_owned(),
        "--json".to_string(),
    ];
    let ours = sessiond_json(&args)?;
    if !json_eq(&pi["roots"], &ours["roots"]) {
        return Err(format!(
            "`sessiond {}`: roots differ from pi's getTree: {}",
            args.join(" "),
            diff_report(&pi["roots"], &ours["roots"])
        ));
    }
    let nodes = ours["nodes"].as_array().cloned().unwrap_or_default();
    let pi_children = pi["children"].as_object().cloned().unwrap_or_default();
    if nodes.len() != pi_children.len() {
        return Err(format!(
            "`sessiond {}`: {} nodes, pi's getTree has {}",
            args.join(" "),
            nodes.len(),
            pi_children.len()
        ));
    }
    for node in &nodes {
        let id = node["id"].as_str().unwrap_or_default();
        let want = pi_children.get(id).unwrap_or(&Value::Null);
        if !json_eq(want, &node["children"]) {
            return Err(format!(
                "`sessiond {}`: children of {id} differ from pi's getTree order: {}",
                args.join(" "),
                diff_report(want, &node["children"])
            ));
        }
    }
    Ok(())
}
