//! Test support: a JSON-RPC client that spawns the real `sessiond serve` and speaks LSP
//! framing over its pipes, plus the protocol schemas to validate what it says.
//!
//! Every message the daemon sends is checked against `protocol/schema/` as it arrives (see
//! [`check_message`]): a result by the method of its request, an error against `error.json`,
//! a notification by its method, so a shape the docs do not describe fails whichever test
//! meets it. `SESSIOND_SCHEMA_CHECK=0` turns the check off (to debug something else).
// Test helpers fail the test by panicking, like assertions.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub mod worktree;

// JSON parsing that accepts the lone surrogate escapes pi writes (shared with the other suites).
#[path = "../common/mod.rs"]
pub mod common;

pub mod chromium;

pub const BIN: &str = env!("CARGO_BIN_EXE_sessiond");
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A program the tests drive, from `$VAR` or as `name` on `PATH`; `None` (the test skips, after
/// saying so) when it is missing, except under `CI=true`, where that fails. `how` says how to
/// get it.
pub fn find_program(var: &str, name: &str, how: &str) -> Option<PathBuf> {
    let found = std::env::var_os(var).map(PathBuf::from).or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{name} not found: {how} (or set {var})"
        );
        eprintln!("skipping: {name} not found ({how})");
    }
    found
}

/// A running daemon.
pub struct Daemon {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    /// Notifications (and stray messages) received while waiting for something else.
    pub inbox: VecDeque<Value>,
    next_id: i64,
    /// The method of each request sent with [`Daemon::request`] and not answered yet, by id,
    /// to check its result against the method's schema.
    sent: HashMap<String, String>,
    /// What the daemon wrote to stderr, when [`Spawn::capture_stderr`] was set.
    stderr: Arc<Mutex<String>>,
}

/// How to start a daemon, beyond its roots.
#[derive(Debug, Default)]
pub struct Spawn<'a> {
    /// Extra environment variables.
    pub env: Vec<(&'a str, &'a str)>,
    /// Keep stderr for [`Daemon::stderr`] instead of passing it through.
    pub capture_stderr: bool,
    /// Extra arguments of `sessiond serve` (`--index-dir DIR`).
    pub args: Vec<&'a str>,
}

impl Daemon {
    /// Starts `sessiond serve` with these roots.
    pub fn spawn(roots: &[&Path]) -> Daemon {
        Daemon::spawn_with(roots, &Spawn::default())
    }

    /// Starts `sessiond serve` with these roots and options.
    pub fn spawn_with(roots: &[&Path], options: &Spawn<'_>) -> Daemon {
        Daemon::spawn_under(roots, options, None)
    }

    /// [`Daemon::spawn_with`] under a file mode creation mask (`"022"`, as most shells set it):
    /// the daemon is started through `sh -c 'umask MASK && exec …'`.
    pub fn spawn_under(roots: &[&Path], options: &Spawn<'_>, umask: Option<&str>) -> Daemon {
        Daemon::spawn_after(roots, options, umask.map(|mask| format!("umask {mask}")))
    }

    /// [`Daemon::start`] of a daemon that may have at most `n` files open (`ulimit -n N`, the
    /// soft and hard limit, set by `sh` before it becomes the daemon).
    pub fn start_with_open_files(roots: &[&Path], n: u64) -> (Daemon, Value) {
        let mut d = Daemon::spawn_after(roots, &Spawn::default(), Some(format!("ulimit -n {n}")));
        let init = d.request("initialize", json!({"capabilities": {}}));
        d.notify("initialized", json!({}));
        (d, init)
    }

    /// Starts `sessiond serve` through `sh -c 'PRELUDE && exec …'` when a prelude is given.
    fn spawn_after(roots: &[&Path], options: &Spawn<'_>, prelude: Option<String>) -> Daemon {
        let mut cmd = match prelude {
            Some(prelude) => {
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("{prelude} && exec \"$0\" \"$@\""))
                    .arg(BIN);
                sh
            }
            None => Command::new(BIN),
        };
        cmd.arg("serve");
        for r in roots {
            cmd.arg("--root").arg(r);
        }
        cmd.args(&options.args);
        cmd.env("SESSIOND_LOG", "warn");
        for (k, v) in &options.env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if options.capture_stderr {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .expect("spawn sessiond serve");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take();
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let text = stderr.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    text.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || read_frames(stdout, &tx));
        Daemon {
            child,
            stdin,
            rx,
            inbox: VecDeque::new(),
            next_id: 1,
            sent: HashMap::new(),
            stderr,
        }
    }

    /// Starts a daemon with options and runs `initialize` + `initialized`.
    pub fn start_with(roots: &[&Path], options: &Spawn<'_>) -> (Daemon, Value) {
        let mut d = Daemon::spawn_with(roots, options);
        let init = d.request("initialize", json!({"capabilities": {}}));
        d.notify("initialized", json!({}));
        (d, init)
    }

    /// What the daemon wrote to stderr so far (empty unless captured).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Starts a daemon and runs `initialize` + `initialized`.
    pub fn start(roots: &[&Path]) -> (Daemon, Value) {
        let mut d = Daemon::spawn(roots);
        let init = d.request("initialize", json!({"capabilities": {}}));
        d.notify("initialized", json!({}));
        (d, init)
    }

    /// Writes raw bytes to the daemon's stdin.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends one framed JSON message.
    pub fn send(&mut self, msg: &Value) {
        self.write_raw(&frame(msg));
    }

    /// The id the next [`Daemon::request`] will carry.
    pub fn next_request_id(&self) -> i64 {
        self.next_id
    }

    /// Sends a request and returns its whole response (`result` or `error`).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.sent.insert(json!(id).to_string(), method.to_owned());
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&json!(id))
    }

    /// Sends a request and returns its `result`, failing the test on an error.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params.clone());
        match r.get("result") {
            Some(v) if r.get("error").is_none() => v.clone(),
            _ => panic!("{method} {params} failed: {r}"),
        }
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Waits for the response with this id.
    pub fn response(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let msg = self
                .recv_until(deadline)
                .unwrap_or_else(|| panic!("no response to {id}"));
            if msg.get("id") == Some(id) && msg.get("method").is_none() {
                return msg;
            }
            self.inbox.push_back(msg);
        }
    }

    /// The next message from the daemon (inbox first), or `None` after `timeout`.
    pub fn next_message(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(m) = self.inbox.pop_front() {
            return Some(m);
        }
        self.recv_until(Instant::now() + timeout)
    }

    /// Waits for the next notification with this method (others stay in the inbox).
    pub fn notification(&mut self, method: &str, timeout: Duration) -> Option<Value> {
        if let Some(i) = self
            .inbox
            .iter()
            .position(|m| m.get("method").and_then(Value::as_str) == Some(method))
        {
            return self.inbox.remove(i).and_then(|m| m.get("params").cloned());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let msg = self.recv_until(deadline)?;
            if msg.get("method").and_then(Value::as_str) == Some(method) {
                return msg.get("params").cloned();
            }
            self.inbox.push_back(msg);
        }
    }

    /// The next `method` notification whose params `pred` accepts, the others of that method
    /// skipped; each must come within `timeout`.
    pub fn notification_where(
        &mut self,
        method: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        loop {
            let params = self
                .notification(method, timeout)
                .unwrap_or_else(|| panic!("no {method} within {timeout:?}"));
            if pred(&params) {
                return params;
            }
        }
    }

    fn recv_until(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = self.rx.recv_timeout(left).ok()?;
        if schema_check_enabled() {
            let method = match msg.get("id") {
                Some(id) if msg.get("method").is_none() => self.sent.remove(&id.to_string()),
                _ => None,
            };
            check_message(&msg, method.as_deref());
        }
        Some(msg)
    }

    /// Closes the daemon's input (end of input, as a client that sent everything does); what
    /// it writes afterwards is still read.
    pub fn close_input(&mut self) {
        drop(self.stdin.take());
    }

    /// `shutdown` + `exit`; returns the exit code.
    pub fn stop(mut self) -> Option<i32> {
        let r = self.request("shutdown", Value::Null);
        assert!(r.get("error").is_none(), "shutdown failed: {r}");
        self.notify("exit", Value::Null);
        self.wait()
    }

    /// Waits for the process to end (at most [`TIMEOUT`]).
    pub fn wait(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("sessiond did not exit");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the process runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `msg` as one LSP frame: `Content-Length` header and JSON body.
pub fn frame(msg: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("json");
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(&body);
    frame
}

/// The next frame from the daemon's output, parsed; `None` at its end. Panics on a header
/// other than `Content-Length` or a body that is not JSON.
pub fn read_frame(r: &mut impl BufRead) -> Option<Value> {
    let mut len = None;
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            len = v.trim().parse::<usize>().ok();
        } else {
            panic!("unexpected header line on stdout: {line:?}");
        }
    }
    let mut body = vec![0; len.expect("Content-Length")];
    r.read_exact(&mut body).ok()?;
    Some(common::parse_json(&body).expect("stdout frame is JSON"))
}

fn read_frames(stdout: impl Read, tx: &mpsc::Sender<Value>) {
    let mut r = BufReader::new(stdout);
    while let Some(v) = read_frame(&mut r) {
        if tx.send(v).is_err() {
            return;
        }
    }
}

/// The JSON Schema for a method's `params` or `result` (`kind`), from `protocol/schema/`.
pub fn schema(method: &str, kind: &str) -> Value {
    let path = repo()
        .join("protocol/schema")
        .join(format!("{}.{kind}.json", method.replace('/', ".")));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("schema is JSON")
}

/// Fails the test when `instance` does not match the method's schema.
pub fn assert_schema(method: &str, kind: &str, instance: &Value) {
    assert_matches(
        &format!("{}.{kind}.json", method.replace('/', ".")),
        instance,
        &format!("{method} {kind}"),
    );
}

/// Whether every message from the daemon is checked against the schemas (default on).
pub fn schema_check_enabled() -> bool {
    std::env::var("SESSIOND_SCHEMA_CHECK").map_or(true, |v| v != "0")
}

/// The compiled schema `protocol/schema/<file>`, compiled once per test binary.
fn validator(file: &str) -> Arc<jsonschema::Validator> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(file.to_owned())
        .or_insert_with(|| {
            let path = repo().join("protocol/schema").join(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
            Arc::new(jsonschema::validator_for(&schema).expect("valid schema"))
        })
        .clone()
}

/// Fails the test when `instance` does not match `protocol/schema/<file>`; `what` names it.
pub fn assert_matches(file: &str, instance: &Value, what: &str) {
    let validator = validator(file);
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .take(10)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match {file}: {errors:?}\n{}",
        serde_json::to_string(instance)
            .unwrap_or_default()
            .chars()
            .take(2000)
            .collect::<String>()
    );
}

/// Checks one message from the daemon against the protocol: a notification's params by its
/// method (only `session/` notifications and `$/progress` are documented, anything else
/// fails), an error against `error.json`, a result against the schema of `method`, the
/// request it answers (`None`: a request sent raw, whose result is not checked).
pub fn check_message(msg: &Value, method: Option<&str>) {
    if let Some(m) = msg.get("method").and_then(Value::as_str) {
        assert!(
            m.starts_with("session/") || m == "$/progress",
            "the daemon sent an undocumented message {m}: {msg}"
        );
        assert!(msg.get("id").is_none(), "the daemon sent a request: {msg}");
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        assert_matches(
            &format!("{}.params.json", m.replace('/', ".")),
            &params,
            &format!("{m} notification"),
        );
    } else if let Some(error) = msg.get("error") {
        assert_matches(
            "error.json",
            error,
            &format!("the error answering {}", method.unwrap_or("a raw request")),
        );
    } else if let Some(result) = msg.get("result") {
        match method {
            None => {}
            Some("shutdown") => assert_eq!(result, &Value::Null, "shutdown result"),
            Some(m) => assert_matches(
                &format!("{}.result.json", m.replace('/', ".")),
                result,
                &format!("{m} result"),
            ),
        }
    } else {
        panic!("the daemon sent neither a result, an error nor a notification: {msg}");
    }
}

/// `sessiond <args>` → stdout parsed as JSON.
pub fn cli_json(args: &[&str]) -> Value {
    let out = Command::new(BIN).args(args).output().expect("run sessiond");
    assert!(
        out.status.success(),
        "sessiond {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::parse_json(&out.stdout).expect("JSON output")
}

/// How long a notification may take to come.
pub const NOTE_WAIT: Duration = Duration::from_secs(10);

/// Appends `text` to the file at `path` as it is.
pub fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open for append");
    f.write_all(text.as_bytes()).expect("append");
}

/// A session of `n` v3 entries in the file `name` of a temporary folder (its canonical path),
/// open in a daemon over the folder; the file starts as `text` makes it of the header and the entries.
pub struct Followed {
    pub dir: tempfile::TempDir,
    pub file: PathBuf,
    pub path: String,
    pub header: String,
    pub entries: Vec<(String, String)>,
    pub d: Daemon,
    /// The daemon's `session/open` result.
    pub opened: Value,
}

impl Followed {
    /// The next `session/didChange`, which must come within [`NOTE_WAIT`].
    pub fn next_change(&mut self) -> Value {
        self.d
            .notification("session/didChange", NOTE_WAIT)
            .expect("didChange")
    }
}

pub fn followed(
    name: &str,
    n: usize,
    text: impl FnOnce(&str, &[(String, String)]) -> String,
) -> Followed {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let file = root.join(name);
    let path = file.to_str().expect("utf-8").to_owned();
    let (header, entries) = v3_session(n);
    std::fs::write(&file, text(&header, &entries)).expect("write");
    let (mut d, _) = Daemon::start(&[&root]);
    let opened = checked(&mut d, "session/open", json!({"path": path}));
    Followed {
        dir,
        file,
        path,
        header,
        entries,
        d,
        opened,
    }
}

/// A session file's text: `header`, then the line of each entry, one per line.
pub fn session_text(header: &str, entries: &[(String, String)]) -> String {
    let mut text = format!("{header}\n");
    for (_, line) in entries {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// Writes [`v3_session`]`(n)` to `path`; returns its entries (id, line).
pub fn write_v3_session(path: &Path, n: usize) -> Vec<(String, String)> {
    let (header, entries) = v3_session(n);
    std::fs::write(path, session_text(&header, &entries)).expect("write session");
    entries
}

/// A v3 session: the header line and `n` message entries chained by parentId.
pub fn v3_session(n: usize) -> (String, Vec<(String, String)>) {
    let header = r#"{"type":"session","version":3,"id":"4f9c7d0e-0000-4000-8000-000000000001","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/work"}"#.to_owned();
    let mut entries = Vec::new();
    let mut parent: Option<String> = None;
    for i in 0..n {
        let id = format!("e{i:07x}");
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let content = if role == "user" {
            json!(format!("question {i} with some words: ünïcödé ✓"))
        } else {
            json!([{"type": "text", "text": format!("answer {i}")}])
        };
        let mut message =
            json!({"role": role, "content": content, "timestamp": 1_735_689_600_000i64 + i as i64});
        if role == "assistant" {
            message["provider"] = json!("anthropic");
            message["model"] = json!("claude-sonnet-4-5");
        }
        let line = json!({
            "type": "message",
            "id": id,
            "parentId": parent,
            "timestamp": format!("2025-01-01T00:{:02}:{:02}.000Z", (i / 60) % 60, i % 60),
            "message": message,
        });
        entries.push((id.clone(), serde_json::to_string(&line).expect("json")));
        parent = Some(id);
    }
    (header, entries)
}

/// Calls a method, validates params and result against the schemas, returns the result.
pub fn checked(d: &mut Daemon, method: &str, params: Value) -> Value {
    assert_schema(method, "params", &params);
    let result = d.call(method, params);
    assert_schema(method, "result", &result);
    result
}

/// The `(code, message, data)` of an error response.
pub fn error_of(response: &Value) -> (i64, String, Value) {
    let e = response
        .get("error")
        .unwrap_or_else(|| panic!("expected an error, got {response}"));
    (
        e["code"].as_i64().expect("code"),
        e["message"].as_str().unwrap_or("").to_owned(),
        e.get("data").cloned().unwrap_or(Value::Null),
    )
}

/// A directory of mixed sessions, laid out as Claude Code's projects directory keeps
/// transcripts ([`mixed_sessions`]).
pub struct Mixed {
    /// The root (a Claude Code projects directory), canonical.
    pub root: PathBuf,
    /// The compacted transcript of `tests/data/claude/real` (two `/compact`s, a rewind).
    pub compacted: PathBuf,
    /// The transcript that started a subagent.
    pub with_subagent: PathBuf,
    /// That subagent's transcript (`<session>/subagents/agent-<id>.jsonl`).
    pub subagent: PathBuf,
    /// A pi session in the same project directory as the transcripts.
    pub pi_beside: PathBuf,
    /// A pi session in a directory of its own.
    pub pi_apart: PathBuf,
}

/// The transcripts written by the real Claude Code (`tests/data/claude/real/`) copied under
/// `root` as Claude Code names them — `<root>/-tmp-corpus-final-work/<sessionId>.jsonl`, a
/// subagent's in `<sessionId>/subagents/` with its `.meta.json` — and two pi sessions of
/// [`v3_session`]`(4)`: one in that same project directory, one in `<root>/pi/`.
pub fn mixed_sessions(root: &Path) -> Mixed {
    let real = repo().join("tests/data/claude/real");
    let project = root.join("-tmp-corpus-final-work");
    std::fs::create_dir_all(&project).unwrap();
    let session_id = |file: &Path| -> String {
        let text = std::fs::read_to_string(file).unwrap();
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        first["sessionId"].as_str().unwrap().to_owned()
    };
    let compacted = project.join(format!(
        "{}.jsonl",
        session_id(&real.join("compacted.jsonl"))
    ));
    std::fs::copy(real.join("compacted.jsonl"), &compacted).unwrap();
    let id = session_id(&real.join("with-subagent.jsonl"));
    let with_subagent = project.join(format!("{id}.jsonl"));
    std::fs::copy(real.join("with-subagent.jsonl"), &with_subagent).unwrap();
    let subagents = project.join(&id).join("subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    let mut subagent = None;
    for e in std::fs::read_dir(real.join("with-subagent/subagents")).unwrap() {
        let from = e.unwrap().path();
        let to = subagents.join(from.file_name().unwrap());
        std::fs::copy(&from, &to).unwrap();
        if to.extension().is_some_and(|x| x == "jsonl") {
            subagent = Some(to);
        }
    }
    let pi_beside = project.join("pi-beside.jsonl");
    write_v3_session(&pi_beside, 4);
    std::fs::create_dir_all(root.join("pi")).unwrap();
    let pi_apart = root.join("pi").join("pi-apart.jsonl");
    write_v3_session(&pi_apart, 4);
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap();
    Mixed {
        root: canonical(root),
        compacted: canonical(&compacted),
        with_subagent: canonical(&with_subagent),
        subagent: canonical(&subagent.expect("the subagent's transcript")),
        pi_beside: canonical(&pi_beside),
        pi_apart: canonical(&pi_apart),
    }
}

/// A `user` line as Claude Code writes a typed prompt: `text` under `parent`.
pub fn claude_prompt(uuid: &str, parent: &str, text: &str) -> String {
    json!({"parentUuid": parent, "isSidechain": false, "type": "user",
        "message": {"role": "user", "content": text}, "uuid": uuid,
        "timestamp": "2026-12-04T18:00:00.000Z", "userType": "external",
        "cwd": "/tmp/corpus-final/work", "sessionId": "6d2e238c-d8e6-4579-9b3a-0130d30ea9b9",
        "version": "2.1.197", "gitBranch": "HEAD"})
    .to_string()
}
