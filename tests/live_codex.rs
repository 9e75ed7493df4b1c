//! The real Codex CLI followed live: Codex 0.171.0 (installed under the repository by
//! `scripts/codex-deps.sh`) works in a temporary home against the scripted Responses API server
//! `tests/codex/model-server.mjs` while `sessiond serve` follows its rollout: a resume appends
//! to the open file (every line announced by `session/didChange` once, in file order), and
//! `codex exec fork` writes a new file, announced by `session/didCreate` with what it
//! continues, while the open file gets nothing (and so does the fork file copied into a later
//! day's directory, where Codex puts a fork made on another day); while Codex writes, the
//! changes name it as the holder of the thread's writer lock; with no root configured,
//! `$CODEX_HOME/sessions` is one.
//! A revert (`codex app-server` `thread/revert`, then a turn) starts a segment file, announced
//! the same way and marked current in the root file's tree; the daemon's context at the
//! segment's first line, and at the leaf a later `codex exec resume` continues, is what Codex
//! sent minus the new turn.
//!
//! Without the install (or Node) the test skips loudly, and fails under `CI`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "codex/support.rs"]
mod codex_support;
#[path = "support/mod.rs"]
mod support;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use codex_support::{BIN, codex_dir, repo, run_bounded, skip};
use support::Daemon;

/// How long one Codex run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the daemon may stay silent before a burst of notifications is taken as complete.
const QUIET: Duration = Duration::from_millis(800);

/// The scripted model server, ended when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let script = dir.join("script.json");
        std::fs::write(
            &script,
            json!({
                "prompts": {
                    "run a tool": [{"tool": {"cmd": "echo live-tool"}}, {"text": "The tool ran."}],
                    "say hi": [{"text": "hi there", "delayMs": 1500}],
                    "fork: say hi": [{"text": "hi from the fork"}]
                },
                "default": [{"text": "default answer"}]
            })
            .to_string(),
        )
        .unwrap();
        let mut child = Command::new("node")
            .arg(repo().join("tests/codex/model-server.mjs"))
            .arg(&script)
            .arg(dir.join("requests.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = serde_json::from_str::<Value>(&line).unwrap()["port"]
            .as_u64()
            .unwrap() as u16;
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Codex home and work directory against the server.
struct Home {
    home: PathBuf,
    work: PathBuf,
}

impl Home {
    fn new(dir: &Path, port: u16) -> Home {
        let home = dir.join("home");
        let work = dir.join("work");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(
            home.join(".codex/config.toml"),
            format!(
                "model = \"mock-model\"\nmodel_provider = \"mock\"\napproval_policy = \"never\"\n\
                 sandbox_mode = \"danger-full-access\"\n\n[model_providers.mock]\nname = \"mock\"\n\
                 base_url = \"http://127.0.0.1:{port}/v1\"\nwire_api = \"responses\"\n\
                 env_key = \"SESSIOND_CODEX_FAKE_KEY\"\nrequest_max_retries = 0\n\
                 stream_max_retries = 0\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
                work.display()
            ),
        )
        .unwrap();
        Home { home, work }
    }

    fn sessions(&self) -> PathBuf {
        self.home.join(".codex/sessions")
    }

    /// Runs `codex exec --skip-git-repo-check ARGS` to its end.
    fn exec(&self, args: &[&str]) {
        let mut cmd = Command::new(codex_dir().join(BIN));
        cmd.arg("exec")
            .arg("--skip-git-repo-check")
            .args(args)
            .current_dir(&self.work)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("CODEX_HOME", self.home.join(".codex"))
            .env("SESSIOND_CODEX_FAKE_KEY", "sessiond-fake-key")
            .env("NO_COLOR", "1");
        let out = run_bounded(cmd, RUN_TIMEOUT, "codex exec");
        assert!(
            out.status.success(),
            "codex exec {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn rollouts(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.sessions(), &mut out);
        out.sort();
        out
    }
}

/// Every line's ordinal, in file order.
fn ordinals(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["ordinal"].to_string())
        .collect()
}

/// Runs `f` while keeping every notification the daemon sends, then until it is quiet.
fn followed(d: &mut Daemon, f: impl FnOnce() + Send) -> Vec<Value> {
    followed_with(d, f).0
}

/// [`followed`], with what `f` returns.
fn followed_with<R: Send>(d: &mut Daemon, f: impl FnOnce() -> R + Send) -> (Vec<Value>, R) {
    let mut notes = Vec::new();
    let out = std::thread::scope(|scope| {
        let run = scope.spawn(f);
        while !run.is_finished() {
            if let Some(m) = d.next_message(Duration::from_millis(5))
                && m.get("method").is_some()
            {
                notes.push(m);
            }
        }
        run.join().unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Some(m) = d.next_message(QUIET) {
        if m.get("method").is_some() {
            notes.push(m);
        }
        if Instant::now() > deadline {
            break;
        }
    }
    (notes, out)
}

/// A temporary directory, the scripted server and an isolated `CODEX_HOME` for `test`; `None`
/// (the test skipped, loudly, and failed under CI) without Codex or Node.
fn lab(test: &str) -> Option<(tempfile::TempDir, Server, Home)> {
    if !codex_dir().join(BIN).exists() {
        skip(test, "Codex is not installed (run scripts/codex-deps.sh)");
        return None;
    }
    if Command::new("node").arg("--version").output().is_err() {
        skip(test, "node is not on PATH");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let home = Home::new(dir.path(), server.port);
    Some((dir, server, home))
}

/// The ids `session/didChange` announced for `path`, in order.
fn announced(notes: &[Value], path: &Path) -> Vec<String> {
    notes
        .iter()
        .filter(|n| n["method"] == "session/didChange" && n["params"]["path"] == json!(path))
        .flat_map(|n| n["params"]["added"].as_array().unwrap().iter())
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn codex_followed_live_every_line_once_and_its_fork_announced() {
    let Some((dir, server, home)) =
        lab("codex_followed_live_every_line_once_and_its_fork_announced")
    else {
        return;
    };
    home.exec(&["run a tool"]);
    let files = home.rollouts();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = std::fs::canonicalize(&files[0]).unwrap();
    let thread = serde_json::from_str::<Value>(
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap()["payload"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let sessions = home.sessions();
    let (mut d, _) = Daemon::start(&[&sessions]);
    let opened = d.call("session/open", json!({"path": file}));
    assert_eq!(opened["format"], "codex", "{opened}");
    let before = ordinals(&file);

    // A resume appends to the open file: each new line announced once, in order.
    let notes = followed(&mut d, || home.exec(&["resume", &thread, "say hi"]));
    let after = ordinals(&file);
    assert!(after.len() > before.len() + 3, "the resume appended a turn");
    assert_eq!(
        announced(&notes, &file),
        after[before.len()..].to_vec(),
        "every appended line announced once, in file order"
    );
    assert!(
        !notes.iter().any(|n| n["method"] == "session/didReload"),
        "an append is no reload: {notes:?}"
    );
    let tree = d.call("session/tree", json!({"path": file}));
    assert_eq!(tree["entryCount"], after.len());
    // While Codex wrote (waiting for its answer), it held the thread's writer lock: the lines
    // announced then name it; once it is gone, nobody is.
    let agents: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "session/didChange")
        .map(|n| &n["params"]["agent"])
        .filter(|a| !a.is_null())
        .collect();
    assert!(!agents.is_empty(), "Codex seen while it wrote: {notes:?}");
    for a in &agents {
        assert_eq!(a["evidence"], "writerLock", "{a}");
        assert!(a["command"].as_str().unwrap().starts_with("codex"), "{a}");
    }
    let _: Value = d.call("session/close", json!({"path": file}));
    let reopened = d.call("session/open", json!({"path": file}));
    assert!(reopened["agent"].is_null(), "{reopened}");

    // A fork writes a new file: announced with what it continues; the parent is not touched.
    let notes = followed(&mut d, || home.exec(&["fork", &thread, "fork: say hi"]));
    assert!(announced(&notes, &file).is_empty(), "{notes:?}");
    let created: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "session/didCreate")
        .map(|n| &n["params"])
        .collect();
    assert_eq!(created.len(), 1, "{notes:?}");
    let c = created[0];
    let fork = home
        .rollouts()
        .into_iter()
        .map(|p| std::fs::canonicalize(p).unwrap())
        .find(|p| p != &file)
        .unwrap();
    assert_eq!(c["path"], json!(fork));
    assert_eq!(c["format"], "codex");
    assert_eq!(c["thread"]["kind"], "fork");
    assert_eq!(c["thread"]["forkedFromId"], thread.as_str());
    assert_eq!(c["thread"]["historyId"], thread.as_str());
    assert_eq!(
        c["thread"]["endOrdinalExclusive"],
        after.len(),
        "the fork takes the whole file"
    );
    assert_eq!(c["sessionId"], c["thread"]["threadId"]);
    support::assert_schema("session/didCreate", "params", c);
    // The open file's graph now holds the fork as a branch.
    let g = support::checked(
        &mut d,
        "session/graph",
        json!({"path": file, "limit": 10000}),
    );
    assert_eq!(
        g["entryCount"].as_u64().unwrap() as usize,
        after.len() + ordinals(&fork).len()
    );

    // Codex puts a fork into the directory of the day it is made (`sessions/YYYY/MM/DD`), which
    // `codex exec fork` cannot choose: the fork file Codex wrote, copied into a later day's new
    // directories, is announced the same way while the open rollout's own directory gets
    // nothing.
    let later = sessions.join("2099/01/02");
    let copy = later.join(fork.file_name().unwrap());
    let notes = followed(&mut d, || {
        std::fs::create_dir_all(&later).unwrap();
        std::fs::copy(&fork, &copy).unwrap();
    });
    let created: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "session/didCreate")
        .map(|n| &n["params"])
        .collect();
    assert_eq!(created.len(), 1, "{notes:?}");
    let c = created[0];
    assert_eq!(c["path"], json!(std::fs::canonicalize(&copy).unwrap()));
    assert_eq!(c["format"], "codex");
    assert_eq!(c["thread"]["kind"], "fork");
    assert_eq!(c["thread"]["forkedFromId"], thread.as_str());
    assert_eq!(c["thread"]["endOrdinalExclusive"], after.len());
    support::assert_schema("session/didCreate", "params", c);
    assert!(announced(&notes, &file).is_empty(), "{notes:?}");
    std::fs::remove_dir_all(sessions.join("2099")).unwrap();
    assert_eq!(d.stop(), Some(0));

    // With no root configured, `$CODEX_HOME/sessions` is one of the daemon's roots.
    let pi = dir.path().join("pi");
    let codex_home = home.home.join(".codex");
    let options = support::Spawn {
        env: vec![
            ("HOME", home.home.to_str().unwrap()),
            ("CODEX_HOME", codex_home.to_str().unwrap()),
            ("PI_CODING_AGENT_DIR", pi.to_str().unwrap()),
            ("CLAUDE_CONFIG_DIR", pi.to_str().unwrap()),
        ],
        ..support::Spawn::default()
    };
    let (mut d, init) = Daemon::start_with(&[], &options);
    let roots = &init["result"]["capabilities"]["experimental"]["sessiond"]["roots"];
    assert!(
        roots
            .as_array()
            .unwrap()
            .contains(&json!(std::fs::canonicalize(&sessions).unwrap())),
        "{roots}"
    );
    let listed = support::checked(&mut d, "session/list", json!({}));
    let codex: Vec<&Value> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["format"] == "codex")
        .collect();
    assert_eq!(codex.len(), 2, "the thread and its fork: {listed}");
    let opened = d.call("session/open", json!({"path": file}));
    assert_eq!(opened["format"], "codex");
    assert_eq!(d.stop(), Some(0));
    drop(server);
}

/// `codex app-server` over stdio in a home: JSON-RPC requests answered in turn, the
/// notifications kept. Killed when dropped if it has not ended.
struct AppServer {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<Value>,
    notes: Vec<Value>,
    next: u64,
}

impl AppServer {
    fn start(home: &Home) -> AppServer {
        let mut child = Command::new(codex_dir().join(BIN))
            .arg("app-server")
            .current_dir(&home.work)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home.home)
            .env("CODEX_HOME", home.home.join(".codex"))
            .env("SESSIOND_CODEX_FAKE_KEY", "sessiond-fake-key")
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let mut app = AppServer {
            stdin: child.stdin.take(),
            child,
            lines,
            notes: Vec::new(),
            next: 1,
        };
        app.call(
            "initialize",
            json!({"clientInfo": {"name": "sessiond-test", "title": null, "version": "0"},
                   "capabilities": {"experimentalApi": true, "requestAttestation": false}}),
        );
        app.send(&json!({"method": "initialized"}));
        app
    }

    fn send(&mut self, m: &Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{m}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message, within the run's time.
    fn receive(&mut self, what: &str) -> Value {
        let m = self
            .lines
            .recv_timeout(RUN_TIMEOUT)
            .unwrap_or_else(|e| panic!("codex app-server: no {what}: {e}"));
        if m.get("id").is_some() && m.get("method").is_some() {
            // A request of the server's (an approval): none is expected with approval_policy
            // never.
            let id = m["id"].clone();
            self.send(&json!({"id": id, "error": {"code": -32601, "message": "not answered"}}));
        }
        m
    }

    /// The result of `method`; panics on an error.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"id": id, "method": method, "params": params}));
        loop {
            let m = self.receive(method);
            if m["id"] == id && m.get("method").is_none() {
                assert!(m["error"].is_null(), "{method}: {m}");
                return m["result"].clone();
            }
            if m.get("id").is_none() {
                self.notes.push(m);
            }
        }
    }

    /// Starts a turn of `thread` with `text` and waits until it completes; its status.
    fn turn(&mut self, thread: &str, text: &str) -> Value {
        let r = self.call(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": text, "text_elements": []}]}),
        );
        let turn = r["turn"]["id"].clone();
        let done = |m: &Value| {
            m["method"] == "turn/completed"
                && m["params"]["threadId"] == thread
                && m["params"]["turn"]["id"] == turn
        };
        loop {
            if let Some(m) = self.notes.iter().find(|m| done(m)) {
                return m["params"]["turn"]["status"].clone();
            }
            let m = self.receive("turn/completed");
            if m.get("id").is_none() {
                self.notes.push(m);
            }
        }
    }

    /// Closes its input and waits for it to end (killed after 10 s): Codex lets go of the
    /// thread's writer lock.
    fn close(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Every line of a rollout, parsed.
fn records(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `input` of every request the model server recorded whose prompt (last user message)
/// is `prompt`, without Codex's base-instructions message (docs/codex.md §9, N1: the first
/// item, a developer message with a `msg_` id, whose text the context document gives as
/// `baseInstructions`).
fn inputs_for(dir: &Path, prompt: &str) -> Vec<Vec<Value>> {
    let text_of = |item: &Value| -> String {
        item["content"]
            .as_array()
            .map(|c| c.iter().filter_map(|p| p["text"].as_str()).collect())
            .unwrap_or_default()
    };
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|r| serde_json::from_str::<Value>(r["raw"].as_str()?).ok())
        .filter_map(|body| body["input"].as_array().cloned())
        .filter(|input| {
            input
                .iter()
                .rev()
                .find(|x| x["type"] == "message" && x["role"] == "user")
                .is_some_and(|x| text_of(x) == prompt)
        })
        .map(|mut input| {
            let first = &input[0];
            assert!(
                first["role"] == "developer"
                    && first["id"].as_str().is_some_and(|i| i.starts_with("msg_")),
                "N1: the base-instructions message first: {first}"
            );
            input.remove(0);
            input
        })
        .collect()
}

/// The response items written in `file` from its 0-based line `from` on, as Codex sends them.
fn written(file: &Path, from: usize) -> Vec<Value> {
    records(file)
        .into_iter()
        .skip(from)
        .filter(|r| r["type"] == "response_item")
        .map(|r| {
            let mut item = r["payload"].clone();
            item.as_object_mut()
                .unwrap()
                .shift_remove("internal_chat_message_metadata_passthrough");
            item
        })
        .collect()
}

/// `input` is `context` followed by items of `new` (the new turn, written by Codex).
fn continues(input: &[Value], context: &[Value], new: &[Value], what: &str) {
    assert!(
        input.len() > context.len(),
        "{what}: Codex sent {} items, sessiond's context has {}",
        input.len(),
        context.len()
    );
    for (k, (a, b)) in context.iter().zip(input).enumerate() {
        assert_eq!(a, b, "{what}: item {k}: sessiond / Codex");
    }
    for x in &input[context.len()..] {
        assert!(new.contains(x), "{what}: {x} is not of the new turn");
    }
}

#[test]
fn a_revert_segment_announced_live_and_read_as_codex_continues_it() {
    let Some((dir, server, home)) =
        lab("a_revert_segment_announced_live_and_read_as_codex_continues_it")
    else {
        return;
    };
    home.exec(&["run a tool"]);
    let file = std::fs::canonicalize(&home.rollouts()[0]).unwrap();
    let thread = records(&file)[0]["payload"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    home.exec(&["resume", &thread, "say hi"]);
    // The turns of the root file, by the line their `task_started` is on.
    let turns: Vec<(usize, String)> = records(&file)
        .iter()
        .enumerate()
        .filter(|(_, r)| r["type"] == "event_msg" && r["payload"]["type"] == "task_started")
        .map(|(i, r)| (i, r["payload"]["turn_id"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(turns.len(), 2, "{turns:?}");
    let root_lines = ordinals(&file);

    let sessions = home.sessions();
    let (mut d, _) = Daemon::start(&[&sessions]);
    let _: Value = d.call("session/open", json!({"path": file}));

    // `thread/revert` before the second turn, then a turn: a new segment file of the thread.
    let (notes, (segment, status, app)) = followed_with(&mut d, || {
        let mut app = AppServer::start(&home);
        app.call(
            "thread/resume",
            json!({"threadId": thread, "excludeTurns": true}),
        );
        let rv = app.call(
            "thread/revert",
            json!({"threadId": thread, "beforeTurnId": turns[1].1}),
        );
        let segment = PathBuf::from(rv["thread"]["path"].as_str().unwrap());
        let status = app.turn(&thread, "after revert");
        (segment, status, app)
    });
    app.close();
    assert_eq!(status, "completed");
    let segment = std::fs::canonicalize(segment).unwrap();
    assert_ne!(segment, file, "a revert starts a new file");
    let seg = records(&segment);
    let base = &seg[0]["payload"]["history_base"];
    // Codex cuts the history just before the reverted turn's `task_started` line.
    assert_eq!(base["thread_id"], thread.as_str(), "{base}");
    let cut = turns[1].0;
    assert_eq!(base["end_ordinal_exclusive"].to_string(), root_lines[cut]);
    // Announced once, linked to the history it continues; the open file gets no line.
    let created: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "session/didCreate")
        .map(|n| &n["params"])
        .collect();
    assert_eq!(created.len(), 1, "{notes:?}");
    let c = created[0];
    assert_eq!(c["path"], json!(segment));
    assert_eq!(c["thread"]["kind"], "segment");
    assert_eq!(c["thread"]["threadId"], thread.as_str());
    assert_eq!(c["thread"]["historyId"], thread.as_str());
    assert!(c["thread"]["forkedFromId"].is_null(), "{c}");
    assert_eq!(
        c["thread"]["endOrdinalExclusive"].to_string(),
        root_lines[cut]
    );
    support::assert_schema("session/didCreate", "params", c);
    assert!(announced(&notes, &file).is_empty(), "{notes:?}");

    // The open file's tree holds the segment, hanging from the line before the cut, and
    // marks it current (Codex's state names it now).
    let t = support::checked(
        &mut d,
        "session/tree",
        json!({"path": file, "limit": 10000}),
    );
    let runs = t["thread"]["files"].as_array().unwrap();
    let run = runs.iter().find(|r| r["file"] == json!(segment)).unwrap();
    assert_eq!(run["kind"], "segment");
    assert_eq!(run["parentId"], root_lines[cut - 1].as_str());
    assert_eq!(run["current"], true, "{run}");
    assert_eq!(t["thread"]["isCurrent"], false);
    assert_eq!(
        std::fs::canonicalize(t["thread"]["current"]["file"].as_str().unwrap()).unwrap(),
        segment
    );

    // What Codex sent for the turn after the revert: the context at the segment's first line
    // (where the revert left the history), then the turn.
    let seg_ids = ordinals(&segment);
    let opened = support::checked(&mut d, "session/open", json!({"path": segment}));
    assert_eq!(opened["sessionId"], thread.as_str());
    let first = support::checked(
        &mut d,
        "session/contextAt",
        json!({"path": segment, "leafId": seg_ids[0]}),
    );
    let sent = inputs_for(dir.path(), "after revert");
    assert_eq!(sent.len(), 1, "one request for the turn");
    continues(
        &sent[0],
        first["messages"].as_array().unwrap(),
        &written(&segment, 1),
        "the turn after the revert",
    );
    assert!(
        first["messages"].as_array().unwrap().len()
            < support::checked(&mut d, "session/contextAt", json!({"path": file}))["messages"]
                .as_array()
                .unwrap()
                .len(),
        "the reverted turn is not sent"
    );

    // The thread goes on in the segment: `codex exec resume` appends to it (announced on it,
    // not on the root file), and what it sends starts with the context at the segment's leaf
    // it resumed from.
    let before = seg_ids.len();
    let notes = followed(&mut d, || home.exec(&["resume", &thread, "say hi again"]));
    let after = ordinals(&segment);
    assert!(after.len() > before, "the resume appended to the segment");
    assert_eq!(ordinals(&file), root_lines, "the root file is untouched");
    assert!(announced(&notes, &file).is_empty(), "{notes:?}");
    assert_eq!(
        announced(&notes, &segment),
        after[before..].to_vec(),
        "every line the resume appended to the segment announced once, in order"
    );
    let leaf = support::checked(
        &mut d,
        "session/contextAt",
        json!({"path": segment, "leafId": seg_ids[before - 1]}),
    );
    let sent = inputs_for(dir.path(), "say hi again");
    assert_eq!(sent.len(), 1, "one request for the resumed turn");
    continues(
        &sent[0],
        leaf["messages"].as_array().unwrap(),
        &written(&segment, before),
        "the resume of the segment",
    );
    assert_eq!(d.stop(), Some(0));
    drop(server);
}
