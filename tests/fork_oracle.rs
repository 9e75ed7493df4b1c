//! Forks compared with pi 1.6.0's createBranchedSession (tests/oracle/batch.mjs `fork` jobs):
//! every user message of the real fixtures (at and before), and every entry of the synthetic
//! sessions (labels inside the path, compactions that keep a label, old versions).
//!
//! Equal means: same header fields (but id, timestamp, parentSession), same entries in the
//! same order with the same fields and the same top-level key order, same parents. Ids must be
//! equal except where pi draws random ones (re-created labels; every entry of a version-1 file),
//! which are matched by position.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sessiond::core::tree::Mode;
use sessiond::dialect::pi::fork::{self, NewHeader, Position};
use sessiond::dialect::pi::format::{EntryKind, Role};
use sessiond::storage::reader::{self, FileLines};

struct Case {
    file: PathBuf,
    entry: String,
    position: Position,
    /// 1-based line of pi's fork leaf (the entry, or its parent for `before`).
    leaf_line: u32,
}

fn fixtures() -> Vec<(PathBuf, bool)> {
    let mut files = Vec::new();
    for (dir, every_entry) in [
        ("examples", false),
        ("tests/data/synthetic", true),
        ("tests/data/fork", true),
    ] {
        for f in common::jsonl_files(&common::repo(dir)) {
            files.push((f, every_entry));
        }
    }
    files
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (file, every_entry) in fixtures() {
        let s = reader::open_session::<sessiond::dialect::pi::Pi>(&file, Mode::Strict)
            .expect("fixture opens");
        let t = &s.tree;
        for node in t.nodes() {
            let e = &node.entry;
            let user = e.kind.role() == Some(&Role::User);
            if every_entry || user {
                out.push(Case {
                    file: file.clone(),
                    entry: e.id.to_string(),
                    position: Position::At,
                    leaf_line: e.span.line,
                });
            }
            if let (true, Some(p)) = (user, node.parent) {
                out.push(Case {
                    file: file.clone(),
                    entry: e.id.to_string(),
                    position: Position::Before,
                    leaf_line: t.node(p).entry.span.line,
                });
            }
        }
    }
    out
}

fn oracle(dir: &Path, cases: &[Case], out_dir: &Path) -> Vec<Value> {
    let jobs: Vec<Value> = cases
        .iter()
        .map(|c| {
            serde_json::json!({"op": "fork", "file": c.file, "leafLine": c.leaf_line,
                "outDir": out_dir})
        })
        .collect();
    common::run_batch_oracle(dir, &jobs)
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Compares our fork lines with pi's entries; returns a description of the first difference.
fn compare(ours: &[Value], pi: &[Value], v1: bool) -> Result<(), String> {
    if ours.len() != pi.len() {
        return Err(format!("{} lines, pi wrote {}", ours.len(), pi.len()));
    }
    let (h, ph) = (&ours[0], &pi[0]);
    if keys(h) != keys(ph) {
        return Err(format!("header keys {:?} vs pi {:?}", keys(h), keys(ph)));
    }
    for k in ["type", "version", "cwd"] {
        if h.get(k) != ph.get(k) {
            return Err(format!("header {k}: {:?} vs pi {:?}", h.get(k), ph.get(k)));
        }
    }
    // Ids pi draws at random are matched by position.
    let mut ids: HashMap<String, String> = HashMap::new();
    for (o, p) in ours.iter().zip(pi).skip(1) {
        let (oid, pid) = (o["id"].as_str(), p["id"].as_str());
        let random = v1 || p["type"] == "label";
        match (oid, pid) {
            (Some(a), Some(b)) if random || a == b => {
                ids.insert(a.to_owned(), b.to_owned());
            }
            _ => return Err(format!("id {oid:?} where pi has {pid:?}")),
        }
    }
    let map = |v: &Value| match v.as_str() {
        Some(s) => Value::String(ids.get(s).cloned().unwrap_or_else(|| s.to_owned())),
        None => v.clone(),
    };
    for (i, (o, p)) in ours.iter().zip(pi).enumerate().skip(1) {
        if keys(o) != keys(p) {
            return Err(format!(
                "line {}: keys {:?} vs pi {:?}",
                i + 1,
                keys(o),
                keys(p)
            ));
        }
        let mut o = o.clone();
        for k in ["id", "parentId", "firstKeptEntryId", "targetId"] {
            if let Some(v) = o.get(k).map(map) {
                o[k] = v;
            }
        }
        if &o != p {
            return Err(format!("line {}: {o} vs pi {p}", i + 1));
        }
    }
    Ok(())
}

/// A running batch oracle, fed one job at a time so each of our files can be deleted as soon
/// as pi's fork has been compared with it.
struct Oracle {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl Oracle {
    fn start(dir: &Path) -> Self {
        use std::io::BufRead;
        let mut child = common::batch_oracle(dir).spawn().expect("spawn node");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        Oracle {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, job: &Value) {
        writeln!(self.stdin, "{job}").expect("send job");
        self.stdin.flush().expect("flush job");
    }

    fn answer(&mut self) -> Value {
        let line = self.stdout.next().expect("oracle answered").expect("read");
        serde_json::from_str(&line).expect("oracle json")
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn forks_equal_pi_create_branched_session() {
    let Some(dir) = common::oracle_dir("forks_equal_pi_create_branched_session") else {
        return;
    };
    let cases = cases();
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut oracle = Oracle::start(&dir);
    let mut sessions = HashMap::new();
    let mut compared = 0;
    let mut failures = Vec::new();
    // One job in flight: pi forks case i while we plan case i + 1 (two cores, half the time).
    let mut in_flight: Option<(String, bool)> = None;
    let mut check = |pi: Value, what: String, conversation: bool| {
        if let Some(e) = pi.get("error") {
            failures.push(format!("{what}: oracle error {e}"));
        } else if pi["piWrote"] == false {
            // pi writes no file while the path has no user or assistant message; ours does.
            assert!(!conversation, "{what}: pi wrote nothing");
        } else {
            if pi["equal"] != true {
                failures.push(format!("{what}: {}", pi["diffs"]));
            }
            compared += 1;
        }
    };
    for (i, case) in cases.iter().enumerate() {
        let session = sessions.entry(case.file.clone()).or_insert_with(|| {
            reader::open_session::<sessiond::dialect::pi::Pi>(&case.file, Mode::Strict)
                .expect("fixture opens")
        });
        let lines = FileLines::open(&case.file).expect("lines");
        let cwd = session
            .tree
            .header()
            .cwd
            .clone()
            .map(|c| serde_json::value::to_raw_value(&c).expect("raw cwd"));
        let header = NewHeader {
            id: "new",
            timestamp: "2026-01-01T00:00:00.000Z",
            cwd: cwd.as_deref(),
            parent_session: Some("/parent.jsonl"),
        };
        // The same id sequence the oracle gives pi while it forks.
        let mut n = 0u128;
        let mut uuids = || {
            n += 1;
            uuid::Uuid::from_u128(n << 96)
        };
        let plan = fork::plan_fork(
            &session.tree,
            &lines,
            &case.entry,
            case.position,
            &header,
            &mut uuids,
        )
        .expect("plan");
        let conversation = plan.path_ids.iter().any(|id| {
            let n = session.tree.find(id.as_str()).expect("kept id");
            matches!(&session.tree.node(n).entry.kind, EntryKind::Message(m)
                if matches!(m.role, Role::User | Role::Assistant))
        });
        let ours = scratch.path().join(format!("ours-{}.jsonl", i % 2));
        let mut text = Vec::new();
        for l in &plan.lines {
            text.extend_from_slice(l);
            text.push(b'\n');
        }
        std::fs::write(&ours, text).expect("write ours");
        oracle.send(&serde_json::json!({"op": "fork", "file": case.file,
            "leafLine": case.leaf_line, "outDir": scratch.path(), "ours": ours}));
        if let Some((what, conv)) = in_flight.take() {
            check(oracle.answer(), what, conv);
        }
        let what = format!("{} {} {:?}", case.file.display(), case.entry, case.position);
        in_flight = Some((what, conversation));
    }
    if let Some((what, conv)) = in_flight.take() {
        check(oracle.answer(), what, conv);
    }
    eprintln!("compared {compared} forks with pi ({} cases)", cases.len());
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(compared > 300, "only {compared} forks compared");
}

/// The binary's fork writes the planned file: compare a few with pi through the CLI.
#[test]
fn cli_fork_writes_what_pi_writes() {
    let Some(dir) = common::oracle_dir("cli_fork_writes_what_pi_writes") else {
        return;
    };
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| c.file.starts_with(common::repo("tests/data/fork")))
        .filter(|c| c.position == Position::At)
        .collect();
    let scratch = tempfile::tempdir().expect("tempdir");
    let pi_dir = scratch.path().join("pi");
    std::fs::create_dir(&pi_dir).expect("mkdir");
    let results = oracle(&dir, &cases, &pi_dir);
    let mut compared = 0;
    for (i, (case, pi)) in cases.iter().zip(&results).enumerate() {
        let Some(pi_entries) = pi["entries"].as_array() else {
            continue;
        };
        let out = scratch.path().join(format!("ours-{i}"));
        std::fs::create_dir(&out).expect("mkdir");
        let (code, stdout, stderr) = common::run(&[
            "fork",
            case.file.to_str().expect("utf-8"),
            &case.entry,
            "--out",
            out.to_str().expect("utf-8"),
            "--json",
        ]);
        assert_eq!(code, 0, "{stderr}");
        let reply: Value = serde_json::from_str(&stdout).expect("json");
        let path = PathBuf::from(reply["path"].as_str().expect("path"));
        assert_eq!(common::jsonl_files(&out), vec![path.clone()]);
        let text = std::fs::read_to_string(&path).expect("read fork");
        let ours: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(
            ours[0]["parentSession"],
            Value::String(case.file.display().to_string())
        );
        assert_eq!(ours[0]["id"], reply["sessionId"]);
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let ts = ours[0]["timestamp"]
            .as_str()
            .expect("ts")
            .replace([':', '.'], "-");
        assert_eq!(
            name,
            format!("{ts}_{}.jsonl", reply["sessionId"].as_str().expect("id"))
        );
        compare(&ours, pi_entries, false).unwrap_or_else(|d| panic!("{}: {d}", case.entry));
        let (code, _, err) = common::run(&["check", path.to_str().expect("utf-8")]);
        assert_eq!(code, 0, "{err}");
        compared += 1;
    }
    assert!(compared >= 20, "only {compared} CLI forks compared");
}
