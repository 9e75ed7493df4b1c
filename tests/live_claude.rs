//! The real Claude Code followed live: Claude Code 2.1.197 (installed under the repository by
//! `scripts/claude-deps.sh`) works in a temporary directory against the scripted Anthropic
//! Messages server `tests/claude/model-server.mjs` while `sessiond serve` follows its
//! transcript, from the file's birth on: a tool turn, resumes, a subagent (its transcript
//! written beside the parent's), edits, and a `--fork-session` (a new file).
//!
//! Without the install (or Node) the tests skip loudly, and fail under `CI`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/mod.rs"]
mod support;

#[path = "claude/lab.rs"]
mod lab;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lab::{BeforeResume, Lab, check_resume, lines_of, normalize, uuids_of};
use support::Daemon;

/// How long the daemon may stay silent before a burst of notifications is taken as complete.
const QUIET: Duration = Duration::from_millis(600);

/// The scripted model's answers (see the head of `tests/claude/model-server.mjs`).
fn script(work: &Path) -> Value {
    let notes = work.join("notes.txt");
    let notes = notes.to_str().unwrap();
    json!({
        "prompts": {
            "Run a command": [
                {"thinking": "A command is wanted.", "text": "Running it.",
                 "tools": [{"name": "Bash", "input": {"command": "echo live-one", "description": "Print live-one"}}]},
                {"text": "The command printed live-one."}
            ],
            "Delegate to an agent": [
                {"text": "Delegating.", "tools": [{"name": "Agent", "input": {"description": "Inspect the directory", "prompt": "SUBAGENT TASK: list the work directory and report.", "subagent_type": "general-purpose"}}]},
                {"text": "The agent reported back."}
            ],
            "SUBAGENT TASK": [
                {"tools": [{"name": "Bash", "input": {"command": "ls -a", "description": "List the directory"}}]},
                {"text": "Subagent report: the directory is nearly empty."}
            ],
            "Write then edit the notes": [
                {"text": "Writing.", "tools": [{"name": "Write", "input": {"file_path": notes, "content": "alpha\nbeta\n"}}]},
                {"text": "Editing.", "tools": [{"name": "Edit", "input": {"file_path": notes, "old_string": "beta", "new_string": "gamma"}}]},
                {"text": "The notes say alpha and gamma."}
            ]
        },
        "default": [{"text": "Answer to: {prompt}"}],
        "compact": "<summary>The user ran a command and asked more things.</summary>",
        "side": "Scripted side answer"
    })
}

/// Notifications of one method, as params.
fn of_method<'a>(notes: &'a [Value], method: &str) -> Vec<&'a Value> {
    notes
        .iter()
        .filter(|n| n["method"] == method)
        .map(|n| &n["params"])
        .collect()
}

/// Every notification the daemon sends within `QUIET` of the last one.
fn drain(d: &mut Daemon) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(m) = d.next_message(QUIET) {
        if m.get("method").is_some() {
            out.push(m);
        }
    }
    out
}

/// The ids `session/didChange` announced for `path`, in order.
fn announced(notes: &[Value], path: &Path) -> Vec<String> {
    of_method(notes, "session/didChange")
        .into_iter()
        .filter(|p| p["path"] == json!(path))
        .flat_map(|p| p["added"].as_array().unwrap().iter())
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Every message of `session/contextAt` at `leaf` (absent: the default leaf), page by page,
/// with the document's first page.
fn context(
    d: &mut Daemon,
    path: &Path,
    leaf: Option<&str>,
    model: Option<&str>,
) -> (Value, Vec<Value>) {
    let mut messages: Vec<Value> = Vec::new();
    let mut first = Value::Null;
    loop {
        let mut params = json!({"path": path, "offset": messages.len()});
        if let Some(leaf) = leaf {
            params["leafId"] = json!(leaf);
        }
        if let Some(model) = model {
            params["model"] = json!(model);
        }
        let r = d.call("session/contextAt", params);
        let page = r["messages"]
            .as_array()
            .expect("contextAt messages")
            .clone();
        let total = r["messageCount"].as_u64().expect("messageCount") as usize;
        let empty = page.is_empty();
        messages.extend(page);
        if first.is_null() {
            first = r;
        }
        if messages.len() >= total || empty {
            return (first, messages);
        }
    }
}

/// A recorded turn request's body.
fn body_of(request: &Value) -> Value {
    serde_json::from_str(request["raw"].as_str().unwrap()).unwrap()
}

/// Every transcript under `dir` (subagents' included), sorted.
fn transcripts(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The transcript holding the answer to request `n` (its lines carry `message.id` `msg_<n>`)
/// and the uuid of the first such line's parent: the leaf the request was built from.
fn answer_of(files: &[PathBuf], n: u64) -> Option<(PathBuf, String)> {
    let id = format!("msg_{n}");
    files.iter().find_map(|f| {
        lines_of(f)
            .into_iter()
            .find(|l| l["type"] == "assistant" && l["message"]["id"] == id.as_str())
            .map(|l| (f.clone(), l["parentUuid"].as_str().unwrap().to_owned()))
    })
}

/// What a resume is checked against: the daemon's context at the transcript's default leaf
/// just before Claude resumed it.
fn before_resume(lab: &Lab, d: &mut Daemon, file: &Path) -> BeforeResume {
    let (doc, messages) = context(d, file, None, None);
    BeforeResume::new(lab, file, &doc, messages)
}

/// Follow: the daemon follows a transcript from its birth while Claude runs a tool turn,
/// resumes it (a subagent, edits), and forks it with `--fork-session`:
///
/// * every line Claude appends with a `uuid` is announced by `session/didChange` once, in file
///   order, and nothing is reloaded or corrupt;
/// * the subagent's new transcript is announced once by `session/didCreate`, linked to its
///   parent (and to the `Agent` call that started it, when its metadata is written already);
/// * the fork is announced by `session/didCreate` as a session of its own, its lines never as
///   the source's;
/// * every turn request Claude sent equals the daemon's `contextAt` at the leaf it was built
///   from (docs/claude-code.md §10), in the parent, the subagent and the fork; and each resume
///   continued from the daemon's default leaf with its context plus the prompt.
#[test]
fn claude_followed_live_every_line_once_and_every_request_is_context_at() {
    let test = "claude_followed_live_every_line_once_and_every_request_is_context_at";
    if !lab::available(test) {
        return;
    }
    let lab = Lab::start(script);
    let projects = lab.projects();
    let (mut d, _) = Daemon::start(&[&projects]);
    let session = "5f0d3c9e-7a41-4b8e-9c2d-1e6f8a0b4c71";
    let file = lab.project().join(format!("{session}.jsonl"));
    let mut notes: Vec<Value> = Vec::new();
    let mut latencies_ms: Vec<f64> = Vec::new();
    let started = Instant::now();

    // Birth: Claude creates the file and writes its lines one by one; open it at once.
    let opened = std::thread::scope(|scope| {
        let run = scope.spawn(|| {
            lab.claude(&[
                "--session-id",
                session,
                "-p",
                "Run a command",
                "--allowedTools",
                "Bash",
            ])
        });
        let deadline = Instant::now() + lab::CLAUDE_TIMEOUT;
        while !file.exists() {
            assert!(
                Instant::now() < deadline,
                "Claude never created {}",
                file.display()
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        let opened = d.call("session/open", json!({"path": file}));
        // Follow while Claude works: notifications are timed as they arrive.
        while !run.is_finished() {
            if let Some(m) = d.next_message(Duration::from_millis(5)) {
                record(&mut notes, &mut latencies_ms, m);
            }
        }
        run.join().unwrap();
        opened
    });
    assert_eq!(opened["format"], "claude-code", "{opened}");
    notes.extend(drain(&mut d));

    // Resumes while the daemon follows, each checked against the daemon's default leaf.
    let mut resumes = 0;
    let mut run_followed = |lab: &Lab, d: &mut Daemon, notes: &mut Vec<Value>, args: &[&str]| {
        std::thread::scope(|scope| {
            let run = scope.spawn(|| lab.claude(args));
            while !run.is_finished() {
                if let Some(m) = d.next_message(Duration::from_millis(5)) {
                    record(notes, &mut latencies_ms, m);
                }
            }
            run.join().unwrap()
        });
        notes.extend(drain(d));
    };
    for (prompt, tools) in [
        ("Delegate to an agent", "Agent,Bash"),
        ("Write then edit the notes", "Write,Edit"),
    ] {
        let before = before_resume(&lab, &mut d, &file);
        run_followed(
            &lab,
            &mut d,
            &mut notes,
            &["--resume", session, "-p", prompt, "--allowedTools", tools],
        );
        check_resume(&lab, &file, &before, prompt);
        resumes += 1;
    }
    // A fork: Claude copies the path into a new file and continues there.
    let before_fork = std::fs::read(&file).unwrap();
    let fork_id = "0c8a4e21-93b7-4d6f-a5e0-7b2c9d1f3e84";
    run_followed(
        &lab,
        &mut d,
        &mut notes,
        &[
            "--resume",
            session,
            "--fork-session",
            "--session-id",
            fork_id,
            "-p",
            "A forked prompt",
        ],
    );
    let fork = lab.project().join(format!("{fork_id}.jsonl"));
    assert!(fork.is_file(), "Claude wrote the fork {}", fork.display());
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before_fork,
        "the fork left the source as it was"
    );
    // And the source goes on.
    let before = before_resume(&lab, &mut d, &file);
    run_followed(
        &lab,
        &mut d,
        &mut notes,
        &["--resume", session, "-p", "Back on the source"],
    );
    check_resume(&lab, &file, &before, "Back on the source");
    resumes += 1;

    // Every line with a uuid announced once, in file order, after what the open held.
    let reloads: Vec<&Value> = of_method(&notes, "session/didReload");
    for r in &reloads {
        assert_eq!(r["reason"], "born", "only the birth reloads: {reloads:?}");
    }
    let at_birth = match (opened["pending"] == true, reloads.as_slice()) {
        (true, [born]) => born["entryCount"].as_u64().unwrap() as usize,
        (false, []) => opened["entryCount"].as_u64().unwrap() as usize,
        _ => panic!("open {opened}, reloads {reloads:?}"),
    };
    assert!(
        of_method(&notes, "session/didCorrupt").is_empty(),
        "{notes:?}"
    );
    let ids = uuids_of(&file);
    let got = announced(&notes, &file);
    assert_eq!(
        got,
        ids[at_birth..].to_vec(),
        "every appended line announced once, in file order"
    );
    let distinct: HashSet<&String> = got.iter().collect();
    assert_eq!(distinct.len(), got.len(), "no line announced twice");

    // The new files: the subagent's linked to its parent, the fork a session of its own.
    let created: Vec<&Value> = of_method(&notes, "session/didCreate");
    let subagents: Vec<PathBuf> = transcripts(&lab.project())
        .into_iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("subagents")))
        .collect();
    assert_eq!(
        subagents.len(),
        1,
        "Claude wrote one subagent transcript: {subagents:?}"
    );
    let sub = &subagents[0];
    let of_sub: Vec<&&Value> = created.iter().filter(|c| c["path"] == json!(sub)).collect();
    assert_eq!(of_sub.len(), 1, "the subagent announced once: {created:?}");
    let link = &of_sub[0]["subagent"];
    assert_eq!(
        link["parentPath"],
        json!(file),
        "linked to its parent: {link}"
    );
    assert_eq!(of_sub[0]["format"], "claude-code");
    let agent_id = sub
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .strip_prefix("agent-")
        .unwrap();
    assert_eq!(link["agentId"], agent_id);
    // Claude may write the metadata after the transcript's first line: when it was there, it
    // names the parent's Agent call.
    if let Some(call) = link.get("toolUseId").and_then(Value::as_str) {
        assert!(
            std::fs::read_to_string(&file)
                .unwrap()
                .contains(&format!("\"id\":\"{call}\"")),
            "the Agent call {call} is in the parent"
        );
    }
    eprintln!("subagent announced as {link}");
    let of_fork: Vec<&&Value> = created
        .iter()
        .filter(|c| c["path"] == json!(fork))
        .collect();
    assert_eq!(of_fork.len(), 1, "the fork announced once: {created:?}");
    assert_eq!(
        of_fork[0]["subagent"],
        Value::Null,
        "the fork is no subagent"
    );
    assert_eq!(of_fork[0]["sessionId"], fork_id);
    assert_eq!(created.len(), 2, "nothing else is new: {created:?}");

    // The referee: every turn request equals contextAt at its leaf, in whichever file holds
    // its answer (the daemon opens the subagent's and the fork's transcripts).
    // The source first: the fork holds copies of its lines.
    let mut files = vec![file.clone()];
    files.extend(subagents.iter().cloned());
    files.push(fork.clone());
    assert_eq!(
        files.len(),
        transcripts(&lab.project()).len(),
        "no other transcript"
    );
    let mut checked: BTreeMap<String, usize> = BTreeMap::new();
    for r in lab.requests().iter().filter(|r| r["kind"] == "stream") {
        let n = r["n"].as_u64().unwrap();
        let (f, leaf) =
            answer_of(&files, n).unwrap_or_else(|| panic!("no line answers request {n}"));
        let is_sub = f.parent().is_some_and(|d| d.ends_with("subagents"));
        d.call("session/open", json!({"path": f}));
        let body = body_of(r);
        let (_, ours) = context(&mut d, &f, Some(&leaf), body["model"].as_str());
        let sent = body["messages"].as_array().unwrap();
        assert_eq!(
            Value::Array(normalize(sent, &ours, is_sub)),
            Value::Array(ours.clone()),
            "request {n} equals contextAt at its leaf {leaf} of {}",
            f.display()
        );
        *checked
            .entry(f.file_name().unwrap().to_string_lossy().into_owned())
            .or_default() += 1;
    }
    assert_eq!(
        checked.len(),
        3,
        "requests answered in the source, the subagent and the fork: {checked:?}"
    );

    latencies_ms.sort_by(f64::total_cmp);
    let q = |x: f64| latencies_ms[((latencies_ms.len() - 1) as f64 * x).round() as usize];
    eprintln!(
        "live claude: {} lines announced once ({} at birth), {resumes} resumes continued from the daemon's leaf, \
         {} files announced new, requests refereed per file {checked:?}; line timestamp → didChange median {:.1} ms, \
         p90 {:.1} ms, max {:.1} ms (Claude stamps a line before writing it); {:.1} s",
        got.len(),
        at_birth,
        created.len(),
        q(0.5),
        q(0.9),
        q(1.0),
        started.elapsed().as_secs_f64(),
    );
    d.stop();
}

/// Keeps a notification, and for a `didChange` how long after each added line's own
/// timestamp it arrived.
fn record(notes: &mut Vec<Value>, latencies_ms: &mut Vec<f64>, m: Value) {
    if m["method"] == "session/didChange" {
        let now = std::time::SystemTime::now();
        for n in m["params"]["added"].as_array().unwrap() {
            if let Some(ms) = n["timestamp"]
                .as_str()
                .and_then(sessiond::js::timestamp::parse_iso)
            {
                let written = std::time::UNIX_EPOCH + Duration::from_millis(ms as u64);
                latencies_ms.push(
                    now.duration_since(written)
                        .unwrap_or_default()
                        .as_secs_f64()
                        * 1000.0,
                );
            }
        }
    }
    if m.get("method").is_some() {
        notes.push(m);
    }
}
