//! `sessiond fork` of a Claude Code transcript, proved by the real Claude Code 2.1.197
//! (installed under the repository by `scripts/claude-deps.sh`): sessions are written by Claude
//! itself against the scripted Anthropic Messages server `tests/claude/model-server.mjs` (a
//! tool turn, a resume, a rewind with `--resume-session-at`, a `/compact`, a resume after it;
//! Write and Edit tool calls), forked by sessiond at several leaves, and each fork continued by
//! `claude --resume <new id> -p PROMPT`. The first request of that run must be sessiond's
//! context on the fork (`sessiond context FORK --json`) followed by the new prompt, after the
//! normalizations of docs/claude-code.md §10 ([`normalize`]); and, as the referee checks every
//! request, the context at the request's leaf on the fork as Claude then saw it must equal the
//! request. The forks of the real transcripts of `tests/data/claude/real/` are held to Claude
//! the same way. The sessions with edits are then verified (`sessiond verify`): Claude's Write
//! and Edit on the work tree, and a fork from before the edit that does not trust it.
//!
//! Without the install (or Node) the test skips loudly, and fails under `CI`.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Skips the test loudly (fails it under `CI`).
fn skip(test: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}");
    }
    eprintln!(
        "\n{}\n!!! SKIPPED {test}: {why}\n{}\n",
        "!".repeat(90),
        "!".repeat(90)
    );
}

/// The installed Claude Code binary, as `tests/claude/corpus.mjs` finds it.
fn claude_bin() -> PathBuf {
    match std::env::var_os("SESSIOND_CLAUDE_BIN") {
        Some(b) if !b.is_empty() => PathBuf::from(b),
        _ => repo().join(".tools/claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe"),
    }
}

fn sessiond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(args)
        .output()
        .expect("sessiond runs")
}

/// `sessiond ARGS --json`, which must succeed.
fn sessiond_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = sessiond(&all);
    assert!(
        out.status.success(),
        "sessiond {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The scripted model's answers (see the head of `tests/claude/model-server.mjs`).
fn script(work: &Path) -> Value {
    let notes = work.join("notes.txt");
    let notes = notes.to_str().unwrap();
    json!({
        "prompts": {
            "Run a command": [
                {"thinking": "A command is wanted.", "text": "Running it.",
                 "tools": [{"name": "Bash", "input": {"command": "echo fork-one", "description": "Print fork-one"}}]},
                {"text": "The command printed fork-one."}
            ],
            "Write then edit the notes": [
                {"text": "Writing.", "tools": [{"name": "Write", "input": {"file_path": notes, "content": "alpha\nbeta\n"}}]},
                {"text": "Editing.", "tools": [{"name": "Edit", "input": {"file_path": notes, "old_string": "beta", "new_string": "gamma"}}]},
                {"text": "The notes say alpha and gamma."}
            ]
        },
        "default": [{"text": "Answer to: {prompt}"}],
        "compact": "<summary>The user ran a command and asked two more things.</summary>",
        "side": "Scripted side answer"
    })
}

/// A HOME, a work directory and the scripted server, for one test; the server is stopped (by
/// its own handle) when the lab is dropped.
struct Lab {
    _dir: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
    log: PathBuf,
    port: u16,
    server: Child,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

impl Lab {
    fn start() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let script_path = dir.path().join("script.json");
        std::fs::write(&script_path, script(&work).to_string()).unwrap();
        let log = dir.path().join("requests.jsonl");
        let mut server = Command::new("node")
            .arg(repo().join("tests/claude/model-server.mjs"))
            .arg(&script_path)
            .arg(&log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node starts the scripted server");
        let mut first = String::new();
        BufReader::new(server.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let port = serde_json::from_str::<Value>(&first).unwrap()["port"]
            .as_u64()
            .unwrap() as u16;
        Lab {
            _dir: dir,
            home,
            work,
            log,
            port,
            server,
        }
    }

    /// Claude Code's projects directory for the work directory (docs/claude-code.md §1).
    fn project(&self) -> PathBuf {
        let name: String = self
            .work
            .to_str()
            .unwrap()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        self.home.join(".claude/projects").join(name)
    }

    /// Runs `claude ARGS --output-format json` in the work directory to its end (bounded);
    /// returns its result document.
    fn claude(&self, args: &[&str]) -> Value {
        let mut child = Command::new(claude_bin())
            .args(args)
            .args(["--output-format", "json"])
            .current_dir(&self.work)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .env("TZ", "UTC")
            .env(
                "ANTHROPIC_BASE_URL",
                format!("http://127.0.0.1:{}", self.port),
            )
            .env("ANTHROPIC_API_KEY", "sk-ant-referee-fake-key")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("claude starts");
        let deadline = Instant::now() + Duration::from_secs(120);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("claude {args:?}: still running after 120 s; killed");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "claude {args:?}: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.trim().lines().last().unwrap_or("")).unwrap_or_else(|e| {
            panic!("claude {args:?}: no JSON result ({e}): {stdout}");
        })
    }

    /// The requests the server recorded, in order.
    fn requests(&self) -> Vec<Value> {
        if !self.log.exists() {
            return Vec::new();
        }
        lines_of(&self.log)
    }
}

const USER_CONTEXT: &str =
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n";

/// The normalizations of docs/claude-code.md §10 that a resumed turn needs, applied to a
/// recorded request's `messages` (`ours`, sessiond's messages, decides N4):
///
/// * N1: the userContext block of `messages[0]` (added at send time) is removed;
/// * N2: every `cache_control` key (added at send time) is removed;
/// * N4: a message N1–N2 changed that is left with one plain text block equals that string when
///   sessiond has a string there.
///
/// (N3 is for `/compact` requests and N5 for subagents: neither is a fork's resume.)
fn normalize(messages: &[Value], ours: &[Value]) -> Vec<Value> {
    let mut msgs = messages.to_vec();
    let mut touched = std::collections::BTreeSet::new();
    if let Some(Value::Array(c)) = msgs.first_mut().and_then(|m| m.get_mut("content")) {
        let before = c.len();
        c.retain(|b| {
            !(b["type"] == "text"
                && b["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(USER_CONTEXT)))
        });
        if c.len() != before {
            touched.insert(0);
        }
    }
    for (i, m) in msgs.iter_mut().enumerate() {
        if let Some(Value::Array(c)) = m.get_mut("content") {
            for b in c {
                if let Some(o) = b.as_object_mut()
                    && o.remove("cache_control").is_some()
                {
                    touched.insert(i);
                }
            }
        }
    }
    for i in touched {
        let single = match msgs[i].get("content") {
            Some(Value::Array(c)) if c.len() == 1 => c[0]
                .as_object()
                .filter(|o| o.len() == 2 && o.get("type") == Some(&json!("text")))
                .and_then(|o| o["text"].as_str())
                .map(str::to_owned),
            _ => None,
        };
        if let Some(text) = single
            && ours.get(i).is_some_and(|o| o["content"].is_string())
        {
            msgs[i]["content"] = Value::String(text);
        }
    }
    msgs
}

/// The text of a user message (a string, or its text blocks joined).
fn text_of(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The first `n` lines of `file` in a file of their own (the transcript as Claude saw it).
fn truncated(file: &Path, n: usize, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = String::new();
    for l in text.lines().take(n) {
        out.push_str(l);
        out.push('\n');
    }
    let path = dir.join(format!("seen-{n}.jsonl"));
    std::fs::write(&path, out).unwrap();
    path
}

/// The uuid of the first tree line of `file` whose content holds `text`.
fn line_with(file: &Path, text: &str) -> String {
    lines_of(file)
        .into_iter()
        .find(|l| l["uuid"].is_string() && l["message"].to_string().contains(text))
        .unwrap_or_else(|| panic!("no line with {text:?} in {}", file.display()))["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Forks `source` at `at` (`--before` when `before`), resumes the fork with the real Claude
/// Code and checks its first request against sessiond's context on the fork. Returns the
/// fork's path.
fn fork_and_resume(lab: &Lab, source: &Path, at: &str, before: bool, prompt: &str) -> PathBuf {
    let mut args = vec!["fork", source.to_str().unwrap(), at];
    if before {
        args.push("--before");
    }
    let forked = sessiond_json(&args);
    let fork = PathBuf::from(forked["path"].as_str().unwrap());
    let id = forked["sessionId"].as_str().unwrap().to_owned();
    let what = format!(
        "fork of {} at {at}{}",
        source.display(),
        if before { " (before)" } else { "" }
    );
    // Where Claude looks for it, readable by its owner only.
    assert_eq!(fork.parent(), source.parent(), "{what}");
    assert_eq!(
        fork.file_name().unwrap().to_str().unwrap(),
        format!("{id}.jsonl")
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&fork).unwrap().permissions().mode() & 0o777,
        0o600,
        "{what}"
    );
    // The shape --fork-session writes: the path with the new session id, then a last-prompt.
    let written = lines_of(&fork);
    assert!(
        written.iter().all(|l| l["sessionId"] == id.as_str()),
        "{what}"
    );
    assert!(written.iter().all(|l| l.get("slug").is_none()), "{what}");
    assert_eq!(written.last().unwrap()["type"], "last-prompt");
    assert_eq!(written.last().unwrap()["leafUuid"], forked["leafId"]);
    let tree_lines = written.iter().filter(|l| l["uuid"].is_string()).count();
    assert_eq!(forked["entryCount"], tree_lines);

    let ctx = sessiond_json(&["context", fork.to_str().unwrap()]);
    let ours: Vec<Value> = ctx["messages"].as_array().unwrap().clone();
    let seen = lab.requests().len();
    let written_bytes = std::fs::read(&fork).unwrap();
    let result = lab.claude(&["--resume", &id, "-p", prompt]);
    assert_eq!(
        result["session_id"],
        id.as_str(),
        "{what}: Claude continued the fork"
    );
    let requests = lab.requests();
    let first = requests[seen..]
        .iter()
        .find(|r| r["kind"] == "stream")
        .unwrap_or_else(|| panic!("{what}: Claude sent no turn"));
    let body: Value = serde_json::from_str(first["raw"].as_str().unwrap()).unwrap();
    let sent = body["messages"].as_array().unwrap();

    // Claude wrote only after what sessiond wrote: the fork grew, its lines untouched.
    let now = std::fs::read(&fork).unwrap();
    assert!(
        now.starts_with(&written_bytes) && now.len() > written_bytes.len(),
        "{what}"
    );

    // The referee's check: the context at the request's leaf, on the fork as Claude saw it.
    let n = first["n"].as_u64().unwrap();
    let all = lines_of(&fork);
    let at_answer = all
        .iter()
        .position(|l| l["message"]["id"] == format!("msg_{n}"))
        .unwrap_or_else(|| panic!("{what}: the answer to request {n} is not in the fork"));
    let leaf = all[at_answer]["parentUuid"].as_str().unwrap().to_owned();
    let scratch = tempfile::tempdir().unwrap();
    let seen_file = truncated(&fork, at_answer, scratch.path());
    let at_leaf = sessiond_json(&["context", seen_file.to_str().unwrap(), "--leaf", &leaf]);
    let at_leaf_msgs = at_leaf["messages"].as_array().unwrap();
    assert_eq!(
        Value::Array(normalize(sent, at_leaf_msgs)),
        Value::Array(at_leaf_msgs.clone()),
        "{what}: the request equals sessiond's context at its leaf {leaf}"
    );

    // The fork's own context, then the new prompt: what the resume sent.
    let norm = normalize(sent, &ours);
    println!(
        "{what}: {} messages on the fork, {} sent: {}",
        ours.len(),
        norm.len(),
        norm[ours.len().min(norm.len())..]
            .iter()
            .map(|m| format!(
                "{}:{:?}",
                m["role"],
                text_of(m).chars().take(40).collect::<String>()
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(norm.len() > ours.len(), "{what}");
    assert_eq!(
        Value::Array(norm[..ours.len()].to_vec()),
        Value::Array(ours.clone()),
        "{what}: the request starts with sessiond's context on the fork"
    );
    let rest = &norm[ours.len()..];
    assert_eq!(rest[0]["role"], "user", "{what}");
    assert_eq!(text_of(&rest[0]), prompt, "{what}: then the new prompt");
    assert!(
        rest[1..].iter().all(|m| m["role"] == "system"),
        "{what}: and only the attachments Claude computed for it: {rest:?}"
    );
    fork
}

#[test]
fn the_real_claude_code_resumes_a_fork_sessiond_wrote() {
    let test = "the_real_claude_code_resumes_a_fork_sessiond_wrote";
    if !claude_bin().is_file() {
        return skip(
            test,
            "Claude Code is not installed (bash scripts/claude-deps.sh)",
        );
    }
    if Command::new("node").arg("--version").output().is_err() {
        return skip(test, "node is not on PATH");
    }
    let lab = Lab::start();
    // Session A, written by Claude: a tool turn, a resume, a rewind, a /compact, a resume.
    let a = lab.claude(&["-p", "Run a command", "--allowedTools", "Bash"]);
    let a_id = a["session_id"].as_str().unwrap().to_owned();
    let file = lab.project().join(format!("{a_id}.jsonl"));
    lab.claude(&["--resume", &a_id, "-p", "Second prompt"]);
    let first_answer = line_with(&file, "The command printed fork-one.");
    lab.claude(&[
        "--resume",
        &a_id,
        "--resume-session-at",
        &first_answer,
        "-p",
        "Branch prompt",
    ]);
    lab.claude(&["--resume", &a_id, "-p", "/compact"]);
    lab.claude(&["--resume", &a_id, "-p", "After compaction"]);
    let source = std::fs::read(&file).unwrap();

    // At the leaf Claude resumes (after the compaction: the fork starts at the boundary).
    let resume_leaf = sessiond_json(&["tree", file.to_str().unwrap()])["defaultLeafId"]
        .as_str()
        .unwrap()
        .to_owned();
    let f1 = fork_and_resume(&lab, &file, &resume_leaf, false, "Fork at the resume leaf");
    assert_eq!(lines_of(&f1)[1]["subtype"], "compact_boundary");
    // On the rewound branch, before the compaction: the whole path from the first prompt.
    let second = line_with(&file, "Answer to: Second prompt");
    let f2 = fork_and_resume(&lab, &file, &second, false, "Fork on the other branch");
    assert!(
        lines_of(&f2)
            .iter()
            .all(|l| l["subtype"] != "compact_boundary")
    );
    // Before a prompt: the fork ends at the prompt's parent.
    let branch_prompt = line_with(&file, "Branch prompt");
    fork_and_resume(
        &lab,
        &file,
        &branch_prompt,
        true,
        "Fork before the branch prompt",
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        source,
        "the source is only read"
    );

    // The real transcripts of tests/data/claude/real/, placed where Claude looks.
    for (name, at) in [
        ("compacted.jsonl", "ec228510-5a3b-4462-aad5-e3f6654df41b"),
        ("compacted.jsonl", "0b5e3c50-369b-45ad-a35e-c68a63fa334e"),
        (
            "with-subagent.jsonl",
            "b5f25f4b-b9f4-4be5-8ccd-910aa1592fa4",
        ),
    ] {
        let copy = lab.project().join(format!("{}.jsonl", uuid_of(name)));
        std::fs::copy(repo().join("tests/data/claude/real").join(name), &copy).unwrap();
        fork_and_resume(&lab, &copy, at, false, &format!("Fork of {name}"));
    }
}

/// A fixed session id for a copied transcript (its file name is its id).
fn uuid_of(name: &str) -> &'static str {
    match name {
        "compacted.jsonl" => "6d2e238c-d8e6-4579-9b3a-0130d30ea9b9",
        _ => "8a1c0f3e-2b7d-4c55-9e10-5f6a7b8c9d0e",
    }
}

/// Without Claude: at every line of the real transcripts, the fork's context (at its default
/// leaf) is the source's context at that line, and the fork reads strictly.
#[test]
fn a_fork_holds_the_context_of_its_leaf_at_every_line() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["compacted.jsonl", "with-subagent.jsonl"] {
        let file = dir.path().join(format!("{}.jsonl", uuid_of(name)));
        std::fs::copy(repo().join("tests/data/claude/real").join(name), &file).unwrap();
        let f = file.to_str().unwrap();
        let tree = sessiond_json(&["tree", f]);
        let mut forks = 0;
        for node in tree["nodes"].as_array().unwrap() {
            let at = node["id"].as_str().unwrap();
            let out = tempfile::tempdir().unwrap();
            let forked = sessiond_json(&["fork", f, at, "--out", out.path().to_str().unwrap()]);
            let fork = forked["path"].as_str().unwrap();
            let source_ctx = sessiond_json(&["context", f, "--leaf", at]);
            let fork_ctx = sessiond_json(&["context", fork]);
            assert_eq!(
                fork_ctx["messages"], source_ctx["messages"],
                "{name} at {at}"
            );
            // A resume of the fork continues where one at the line would (a prompt's leaf is
            // the last attachment below it, which the fork holds).
            assert_eq!(
                fork_ctx["continuesAfterId"], source_ctx["continuesAfterId"],
                "{name} at {at}"
            );
            assert_eq!(
                fork_ctx["entryIds"], source_ctx["entryIds"],
                "{name} at {at}"
            );
            let check = sessiond(&["check", fork]);
            assert!(check.status.success(), "{name} at {at}: {check:?}");
            forks += 1;
        }
        assert!(forks >= 9, "{name}");
    }
}

/// The daemon forks a transcript as the command line does; a fork point that is no prompt
/// cannot be forked `before`, a session id must be a UUID, and every other write is refused.
#[test]
fn the_daemon_forks_a_transcript_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir
        .path()
        .join("6d2e238c-d8e6-4579-9b3a-0130d30ea9b9.jsonl");
    std::fs::copy(repo().join("tests/data/claude/real/compacted.jsonl"), &file).unwrap();
    let elsewhere = dir.path().join("cli");
    std::fs::create_dir(&elsewhere).unwrap();
    let id = "0f8c2d6e-4a1b-4c3d-9e8f-7a6b5c4d3e2f";
    let leaf = "ec228510-5a3b-4462-aad5-e3f6654df41b";
    let cli = sessiond_json(&[
        "fork",
        file.to_str().unwrap(),
        leaf,
        "--session-id",
        id,
        "--out",
        elsewhere.to_str().unwrap(),
    ]);
    let (mut d, _) = support::Daemon::start(&[dir.path()]);
    let _: Value = d.call("session/open", json!({"path": file}));
    let r = support::checked(
        &mut d,
        "session/fork",
        json!({"path": file, "entryId": leaf, "position": "at", "sessionId": id}),
    );
    assert_eq!(
        r["path"],
        dir.path().join(format!("{id}.jsonl")).to_str().unwrap()
    );
    for key in ["sessionId", "leafId", "entryCount", "rewritten"] {
        assert_eq!(r[key], cli[key], "{key}");
    }
    assert_eq!(
        std::fs::read(r["path"].as_str().unwrap()).unwrap(),
        std::fs::read(cli["path"].as_str().unwrap()).unwrap()
    );
    // The same id again: taken.
    let again = d.request(
        "session/fork",
        json!({"path": file, "entryId": leaf, "position": "at", "sessionId": id}),
    );
    assert!(again.get("error").is_some(), "{again}");
    let not_uuid = d.request(
        "session/fork",
        json!({"path": file, "entryId": leaf, "position": "at", "sessionId": "fork-1"}),
    );
    let (_, message, _) = support::error_of(&not_uuid);
    assert!(message.contains("UUID"), "{message}");
    let not_prompt = d.request(
        "session/fork",
        json!({"path": file, "entryId": leaf, "position": "before"}),
    );
    let (code, _, _) = support::error_of(&not_prompt);
    assert_eq!(code, -33016, "{not_prompt}");
    d.stop();
}

/// The findings of `sessiond verify FILE [--leaf L] --json`, as (kind, status, message).
fn findings(file: &Path, leaf: Option<&str>) -> (Value, Vec<(String, String, String)>) {
    let mut args = vec!["verify", file.to_str().unwrap(), "--json"];
    if let Some(l) = leaf {
        args.extend(["--leaf", l]);
    }
    let out = sessiond(&args);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let list = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_owned(),
                f["status"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (report, list)
}

/// Claude's Write and Edit, made by the real Claude Code, checked against the work tree and
/// git: as they left the file; a fork from before the edit does not trust it; the edit seen
/// from before it, on the source, is another branch's; a change made since is found. The
/// daemon reports as the command line does.
#[test]
fn verify_checks_claude_s_writes_and_edits_and_a_fork_from_before_the_edit() {
    let test = "verify_checks_claude_s_writes_and_edits_and_a_fork_from_before_the_edit";
    if !claude_bin().is_file() {
        return skip(
            test,
            "Claude Code is not installed (bash scripts/claude-deps.sh)",
        );
    }
    if Command::new("node").arg("--version").output().is_err() {
        return skip(test, "node is not on PATH");
    }
    let lab = Lab::start();
    let git = |args: &[&str]| {
        Command::new("git")
            .args(["-C", lab.work.to_str().unwrap()])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &lab.home)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let with_git = git(&["init", "-q", "-b", "main"]);
    let e = lab.claude(&[
        "-p",
        "Write then edit the notes",
        "--allowedTools",
        "Write,Edit",
    ]);
    let id = e["session_id"].as_str().unwrap().to_owned();
    let file = lab.project().join(format!("{id}.jsonl"));
    let notes = lab.work.join("notes.txt");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "alpha\ngamma\n");

    // At the resume leaf: the file is as the Edit left it (the Write's content, edited).
    let (report, found) = findings(&file, None);
    assert_eq!(report["cwd"], lab.work.to_str().unwrap());
    let effect: Vec<_> = found.iter().filter(|f| f.0 == "fileEffect").collect();
    assert_eq!(effect.len(), 1, "{found:?}");
    assert_eq!(effect[0].1, "ok");
    assert!(effect[0].2.contains("is as the Edit at entry"), "{found:?}");
    if with_git {
        let g = found.iter().find(|f| f.0 == "git").unwrap();
        assert!(g.2.contains("1 of the paths this branch touched"), "{g:?}");
    }

    // A fork made before the edit holds the Write only: the file on disk is not as it left it.
    let write_result = lines_of(&file)
        .into_iter()
        .find(|l| {
            l["type"] == "user"
                && l["message"]["content"][0]["type"] == "tool_result"
                && l["toolUseResult"]["type"] == "create"
        })
        .unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let forked = sessiond_json(&["fork", file.to_str().unwrap(), &write_result]);
    let fork = PathBuf::from(forked["path"].as_str().unwrap());
    let (_, found) = findings(&fork, None);
    let changed: Vec<_> = found.iter().filter(|f| f.0 == "changedSince").collect();
    assert_eq!(changed.len(), 1, "{found:?}");
    assert!(
        changed[0].2.contains("changed after the Write at entry"),
        "{changed:?}"
    );
    assert!(found.iter().all(|f| f.0 != "fileEffect"), "{found:?}");

    // The source seen from the same point: the edit is another branch's, on disk.
    let (_, found) = findings(&file, Some(&write_result));
    assert!(
        found
            .iter()
            .any(|f| f.0 == "otherBranchEffect" && f.1 == "warn" && f.2.contains("Edit")),
        "{found:?}"
    );

    // A change since: found at the resume leaf.
    std::fs::write(&notes, "alpha\ngamma\ndelta\n").unwrap();
    let (report, found) = findings(&file, None);
    assert!(
        found
            .iter()
            .any(|f| f.0 == "changedSince" && f.2.contains("after the Edit")),
        "{found:?}"
    );
    assert_eq!(report["attention"], true);

    // The daemon, on the transcript closed and open, says the same.
    let (mut d, _) = support::Daemon::start(&[lab.project().as_path()]);
    let closed = support::checked(&mut d, "session/verifyResume", json!({"path": file}));
    let _: Value = d.call("session/open", json!({"path": file}));
    let open = support::checked(&mut d, "session/verifyResume", json!({"path": file}));
    for r in [&closed, &open] {
        assert_eq!(r["findings"], report["findings"]);
        assert_eq!(r["leafId"], report["leafId"]);
    }
    d.stop();
}
