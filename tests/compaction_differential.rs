//! Differential tests of compaction: `sessiond compact --dry-run --json` against pi 1.6.0's own
//! prepareCompaction, serializeConversation and compact() (tests/oracle/batch.mjs, op "compact"),
//! on every golden fixture leaf at several keepRecentTokens values and on a few hundred generated sessions.
//!
//! Compared: firstKeptEntryId (by physical line for version-1 files, whose ids pi invents), tokensBefore,
//! isSplitTurn, previousSummary, the number of messages to summarize and of the turn prefix, the file lists,
//! the serialized conversation byte for byte, the exact summarization requests, the details written, and how
//! pi assembles the summary around the model's answers. Where pi throws, sessiond must refuse (exit 6).
//!
//! Environment: SESSIOND_ORACLE_DIR, SESSIOND_DIFF_SEED, SESSIOND_DIFF_TREES (see tests/differential.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::generator::{Run, generate, run_from_env};
use common::{
    describe, diff_report, json_eq, parse_json, parse_json_output, repo_root, sessiond, v1_line_id,
};
use serde_json::{Value, json};

const DEFAULT_SEED: u64 = 0xc03a_c710_2026;
const DEFAULT_TREES: usize = 300;
const FIXTURE_KEEPS: &[u64] = &[1, 500, 2000, 20000];
/// Generated sessions are small (tens to hundreds of tokens), so their keeps are small too.
const RANDOM_KEEPS: &[u64] = &[1, 3, 10, 30, 100, 20000];
const SPLIT_TURN_SEPARATOR: &str = "\n\n---\n\n**Turn Context (split turn):**\n\n";

/// One comparison: a file, a leaf (None = default) and a keepRecentTokens.
#[derive(Clone, Debug)]
struct Job {
    file: PathBuf,
    leaf: Option<String>,
    keep: u64,
}

impl Job {
    fn oracle_job(&self) -> Value {
        json!({"op": "compact", "file": self.file.to_string_lossy(), "leaf": self.leaf, "keep": self.keep})
    }
    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "compact".to_string(),
            self.file.to_string_lossy().into_owned(),
            "--dry-run".to_string(),
            "--json".to_string(),
            "--keep-recent-tokens".to_string(),
            self.keep.to_string(),
        ];
        if let Some(leaf) = &self.leaf {
            args.extend(["--leaf".to_string(), leaf.clone()]);
        }
        args
    }
}

/// Where two long strings first differ, with some context on both sides.
fn string_diff(pi: &str, ours: &str) -> String {
    let at = pi
        .char_indices()
        .zip(ours.chars())
        .find(|((_, a), b)| a != b)
        .map_or(pi.len().min(ours.len()), |((i, _), _)| i);
    let at = (0..=at)
        .rev()
        .find(|&i| pi.is_char_boundary(i) && ours.is_char_boundary(i))
        .unwrap_or(0);
    let window = |s: &str| {
        let start = (0..=at.saturating_sub(120))
            .rev()
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        let end = (at + 120..=s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(s.len());
        format!("{:?}", s.get(start..end.min(s.len())).unwrap_or(""))
    };
    format!(
        "first difference at byte {at} (pi {} bytes, sessiond {} bytes)\n  pi:       {}\n  sessiond: {}",
        pi.len(),
        ours.len(),
        window(pi),
        window(ours)
    )
}

fn text_eq(name: &str, pi: &Value, ours: &Value) -> Result<(), String> {
    match (pi, ours) {
        (Value::String(a), Value::String(b)) if a != b => {
            Err(format!("{name} differs: {}", string_diff(a, b)))
        }
        _ => field_eq(name, pi, ours),
    }
}

fn field_eq(name: &str, pi: &Value, ours: &Value) -> Result<(), String> {
    if json_eq(pi, ours) {
        Ok(())
    } else {
        Err(format!("{name} differs: {}", diff_report(pi, ours)))
    }
}

/// What pi answered for a case, to show the suite is not vacuous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Compacted,
    SplitTurn,
    Nothing,
    PiThrows,
}

fn outcome(pi: &Value) -> Outcome {
    if pi.get("error").is_some() {
        Outcome::PiThrows
    } else if pi.get("nothingToCompact").is_some() {
        Outcome::Nothing
    } else if pi["isSplitTurn"] == json!(true) {
        Outcome::SplitTurn
    } else {
        Outcome::Compacted
    }
}

/// Checks one job against pi's answer.
fn check(job: &Job, pi: &Value) -> Result<(), String> {
    let output = sessiond(job.args());
    let cmd = format!("`sessiond {}`", job.args().join(" "));
    if let Some(error) = pi.get("error") {
        return match output.status.code() {
            Some(6) => Ok(()),
            _ => Err(format!(
                "{cmd}: pi throws ({}) but sessiond did not refuse with exit 6: {}",
                common::truncate(&error.to_string(), 300),
                describe(&output)
            )),
        };
    }
    if !output.status.success() {
        return Err(format!("{cmd} failed: {}", describe(&output)));
    }
    let ours = parse_json_output(&output)?;
    let at = |e: String| format!("{cmd}: {e}");
    if pi.get("nothingToCompact") == Some(&json!(true)) {
        return field_eq("nothingToCompact", &json!(true), &ours["nothingToCompact"]).map_err(at);
    }
    let kept = match pi["firstKeptEntryLine"].as_u64() {
        Some(line) if job_is_v1(&job.file) => json!(v1_line_id(line)),
        _ => pi["firstKeptEntryId"].clone(),
    };
    field_eq("firstKeptEntryId", &kept, &ours["firstKeptEntryId"]).map_err(at)?;
    for key in [
        "tokensBefore",
        "isSplitTurn",
        "previousSummary",
        "messagesToSummarize",
        "turnPrefixMessages",
        "readFiles",
        "modifiedFiles",
    ] {
        field_eq(key, &pi[key], &ours[key]).map_err(at)?;
    }
    text_eq("conversation", &pi["conversation"], &ours["conversation"]).map_err(at)?;
    for key in ["systemPrompt", "prompt", "turnPrefixPrompt"] {
        text_eq(
            &format!("request.{key}"),
            &pi["request"][key],
            &ours["request"][key],
        )
        .map_err(at)?;
    }
    field_eq("entry.details", &pi["details"], &ours["entry"]["details"]).map_err(at)?;
    // pi's compact(): the history answer (or the previous summary, or "No prior history." when a split turn
    // has nothing before it), the turn-prefix answer after the separator, then the file blocks.
    let mut expected = match (&ours["request"]["prompt"], &pi["previousSummary"]) {
        (Value::String(_), _) => "<<HISTORY>>".to_string(),
        (_, Value::String(previous)) => previous.clone(),
        _ => "No prior history.".to_string(),
    };
    if ours["request"]["turnPrefixPrompt"].is_string() {
        expected.push_str(SPLIT_TURN_SEPARATOR);
        expected.push_str("<<TURN PREFIX>>");
    }
    expected.push_str(ours["fileOperations"].as_str().unwrap_or(""));
    text_eq("summary assembly", &pi["summary"], &json!(expected)).map_err(at)
}

fn job_is_v1(file: &std::path::Path) -> bool {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let header: Value = text
        .lines()
        .next()
        .and_then(|l| parse_json(l.as_bytes()).ok())
        .unwrap_or(Value::Null);
    header.get("version").and_then(Value::as_u64).unwrap_or(1) < 2
}

fn run_all(
    name: &str,
    oracle: &std::path::Path,
    jobs: &[Job],
) -> (Vec<(usize, String)>, Vec<Outcome>) {
    let oracle_jobs: Vec<Value> = jobs.iter().map(Job::oracle_job).collect();
    let expected = common::run_batch_oracle(oracle, &oracle_jobs);
    let indexed: Vec<usize> = (0..jobs.len()).collect();
    let results = common::parallel_map(&indexed, |&i| check(&jobs[i], &expected[i]));
    let failures: Vec<(usize, String)> = results
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| r.err().map(|e| (i, e)))
        .collect();
    let outcomes: Vec<Outcome> = expected.iter().map(outcome).collect();
    let count = |o: Outcome| outcomes.iter().filter(|&&x| x == o).count();
    eprintln!(
        "{name}: {} compaction cases ({} compacted, {} split turns, {} nothing to compact, {} where pi throws), {} failed",
        jobs.len(),
        count(Outcome::Compacted),
        count(Outcome::SplitTurn),
        count(Outcome::Nothing),
        count(Outcome::PiThrows),
        failures.len()
    );
    (failures, outcomes)
}

fn report(failures: &[(usize, String)], total: usize, extra: &str) -> String {
    let listed: Vec<&str> = failures.iter().take(5).map(|(_, e)| e.as_str()).collect();
    format!(
        "{} of {total} compaction cases differ from pi{extra}:\n\n{}",
        failures.len(),
        listed.join("\n\n")
    )
}

#[test]
fn fixtures_compact_like_pi() {
    let Some(oracle) = common::oracle_dir("compaction fixtures test") else {
        return;
    };
    let dir = repo_root().join("tests/data/golden");
    let mut pairs: Vec<(PathBuf, Option<String>)> = std::fs::read_dir(&dir)
        .expect("tests/data/golden")
        .map(|e| e.expect("golden entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            // Goldens hold pi's context, lone surrogate escapes included.
            let golden = parse_json(&std::fs::read(&p).expect("read golden")).expect("golden JSON");
            (
                repo_root().join(golden["file"].as_str().expect("golden.file")),
                golden["leaf"].as_str().map(str::to_owned),
            )
        })
        .collect();
    pairs.sort();
    let jobs: Vec<Job> = pairs
        .iter()
        .flat_map(|(file, leaf)| {
            FIXTURE_KEEPS.iter().map(|&keep| Job {
                file: file.clone(),
                leaf: leaf.clone(),
                keep,
            })
        })
        .collect();
    let (failures, outcomes) = run_all("fixtures", &oracle, &jobs);
    assert!(failures.is_empty(), "{}", report(&failures, jobs.len(), ""));
    assert!(outcomes.contains(&Outcome::SplitTurn) && outcomes.contains(&Outcome::Compacted));
}

#[test]
fn random_sessions_compact_like_pi() {
    let Some(oracle) = common::oracle_dir("compaction differential test") else {
        return;
    };
    let Run { seed, trees, dir } = run_from_env("compaction-diff", DEFAULT_SEED, DEFAULT_TREES);
    let mut jobs = Vec::new();
    for i in 0..trees {
        let case = generate(seed, i, &dir);
        // The default leaf and one other, each at a keep chosen by the case index.
        for (k, leaf) in case.leaves.into_iter().take(2).enumerate() {
            jobs.push(Job {
                file: case.file.clone(),
                leaf,
                keep: RANDOM_KEEPS[(i + k) % RANDOM_KEEPS.len()],
            });
        }
    }
    let (failures, outcomes) = run_all(&format!("random (seed {seed})"), &oracle, &jobs);
    assert!(
        failures.is_empty(),
        "{}",
        report(
            &failures,
            jobs.len(),
            &format!(
                " (seed {seed}; rerun with SESSIOND_DIFF_SEED={seed}; files in {})",
                dir.display()
            )
        )
    );
    // A generator change that made every case trivial would pass silently otherwise.
    let real = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Compacted | Outcome::SplitTurn))
        .count();
    assert!(
        real * 3 >= jobs.len(),
        "only {real} of {} generated cases compact anything",
        jobs.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
