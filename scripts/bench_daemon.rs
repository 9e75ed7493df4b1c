//! Daemon measurements for `scripts/bench-vs-pi.py`: drives a real `sessiond serve` over its
//! stdio pipes (JSON-RPC with LSP framing) and prints one JSON object of timings.
//!
//! `bench-daemon SESSIOND open FILE RUNS CONTEXT_RUNS`
//!   time to `session/open` (RUNS fresh opens: close, then open), the daemon's VmRSS and
//!   VmHWM after the first open, and `session/contextAt` at the default leaf (its path is
//!   the longest in a generated session) CONTEXT_RUNS times with full messages and with
//!   `fields: "ids"`; `session/entry` of the default leaf 1,000 times, one request at a time,
//!   before the `contextAt` requests (`entryMs`: the round trip of a small request) and again
//!   right after them (`entryAfterContextMs`); each of those requests is followed by the
//!   same request to a peer that answers it with the same result and does nothing else
//!   (`entryFloorMs`, 2,000 samples: this program's `echo` mode, the least a round trip
//!   through these pipes costs on the machine). A full
//!   answer's size in bytes (`contextFullBytes`) and the client's parse of it into a
//!   `Value` (`contextFullParseMs`, part of `contextFullMs`) are reported beside it. The
//!   client sends and reads on one thread.
//!
//! `bench-daemon SESSIOND append FILE APPENDS REOPENS`
//!   FILE is a scratch copy that gets entries appended. Per append, a complete line whose
//!   parent is the current leaf is appended as pi appends (open, one `write()`, close; timed
//!   with the rest), in the file's format (a pi entry, or a Claude Code `user` line when
//!   `session/open` says `claude-code`), then:
//!   * `apply`: `contextAt {leafId: new, fields: "ids"}` sent at once, so the request's own
//!     refresh applies the entry (the watcher's hint, debounced, comes later) — the cost
//!     of applying one entry and answering at the new leaf;
//!   * `didChange`: a second append, timed until its `session/didChange` arrives (the
//!     default debounce), then `contextAt` at the new leaf (`didChangeContext`).
//!
//!   Then REOPENS times `session/close` + `session/open` of the grown file (`reopen`).
//!
//! `bench-daemon SESSIOND inproc FILE APPENDS REOPENS`
//!   The same work without the daemon's pipes and threads, in this process through the
//!   library: `Session::open` (`reopen`), and per append `Session::refresh` (which applies
//!   the entry and builds and serializes the `didChange` params, as the daemon's sink does)
//!   plus the `contextAt {leafId: new, fields: "ids"}` result as the text the daemon sends
//!   (`apply`). This is
//!   the cost of applying one entry; the `append` mode adds the round trip of a request.
//!
//! `bench-daemon SESSIOND inproc-context FILE 1 CONTEXT_RUNS`
//!   `session/contextAt` with full messages at the default leaf, CONTEXT_RUNS times, through
//!   the library in this process (`contextFullMs`: the owner's work alone, the first request
//!   after open included), after one `Session::open`.
//!
//! `bench-daemon echo`
//!   The peer of `entryFloorMs`: reads a `result` (the first frame on stdin), then answers
//!   every later request with it, under the request's id, until stdin ends.
//!
//! Times are milliseconds, one number per sample; the script takes medians and p99s.

// The result goes to stdout for the script; setup failures end the run with a message.
#![allow(clippy::print_stdout)]

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sessiond::core::diagnostics::Corruption;
use sessiond::core::tree::{Mode, NodeIdx};
use sessiond::server::{handlers, notify, params};
use sessiond::session::owner::{EventSink, ReloadReason, Session};

const TIMEOUT: Duration = Duration::from_secs(600);
/// `session/entry` requests timed per `open` run.
const ENTRY_RUNS: usize = 1000;

/// A client of `sessiond serve` that sends and reads on one thread, as the issue's
/// "single-threaded client" does: a frame's answer is read where it is awaited, with no
/// hand-off between threads on this side of the pipe.
struct Daemon {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    inbox: VecDeque<Value>,
    next_id: i64,
    /// When the daemon is killed for not answering (see [`watchdog`]); `None` when no
    /// answer is awaited.
    deadline: Arc<Mutex<Option<Instant>>>,
    /// The last answer's frame size (bytes) and the time its parse into a `Value` took
    /// (milliseconds): part of what a call measures.
    last_answer: (usize, f64),
}

/// A message from the daemon, with its body's size in bytes and its parse time in ms.
struct Received {
    msg: Value,
    bytes: usize,
    parse_ms: f64,
}

type Res<T> = Result<T, String>;

impl Daemon {
    /// `sessiond serve`, initialized.
    fn start(sessiond: &str, root: &Path) -> Res<Daemon> {
        let mut serve = Command::new(sessiond);
        serve
            .arg("serve")
            .arg("--root")
            .arg(root)
            .env("SESSIOND_LOG", "warn");
        let mut d = Daemon::spawn(&mut serve)?;
        d.call("initialize", json!({"capabilities": {}}))?;
        d.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))?;
        Ok(d)
    }

    /// `program` as a client's peer on its stdio pipes.
    fn spawn(program: &mut Command) -> Res<Daemon> {
        let mut child = program
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", program.get_program()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let deadline = Arc::new(Mutex::new(None));
        let (pid, watched) = (child.id(), Arc::clone(&deadline));
        std::thread::spawn(move || watchdog(pid, &watched));
        Ok(Daemon {
            child,
            stdin,
            stdout: BufReader::with_capacity(1 << 20, stdout),
            inbox: VecDeque::new(),
            next_id: 1,
            deadline,
            last_answer: (0, 0.0),
        })
    }

    fn send(&mut self, msg: &Value) -> Res<()> {
        let body = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(&body);
        self.stdin
            .write_all(&frame)
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("cannot write to the daemon: {e}"))
    }

    /// The next message from the daemon; `what` names what was awaited in the error. The
    /// daemon is killed if it sends nothing for [`TIMEOUT`].
    fn receive(&mut self, what: &str) -> Res<Received> {
        let set = |d: &Mutex<Option<Instant>>, v| {
            *d.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = v;
        };
        set(&self.deadline, Some(Instant::now() + TIMEOUT));
        let received = read_frame(&mut self.stdout);
        set(&self.deadline, None);
        received.ok_or_else(|| format!("no {what}: the daemon closed its output"))
    }

    fn call(&mut self, method: &str, params: Value) -> Res<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let Received {
                msg,
                bytes,
                parse_ms,
            } = self.receive(&format!("answer to {method}"))?;
            if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                self.last_answer = (bytes, parse_ms);
                // Moved out, not cloned: a copy of a result of tens of megabytes would be
                // timed as if the daemon had spent it.
                let mut msg = msg;
                return match (msg.get_mut("result").map(Value::take), msg.get("error")) {
                    (Some(r), None) => Ok(r),
                    _ => Err(format!("{method} failed: {msg}")),
                };
            }
            self.inbox.push_back(msg);
        }
    }

    fn notification(&mut self, method: &str) -> Res<Value> {
        let is = |m: &Value| m.get("method").and_then(Value::as_str) == Some(method);
        if let Some(i) = self.inbox.iter().position(is) {
            return self
                .inbox
                .remove(i)
                .and_then(|m| m.get("params").cloned())
                .ok_or_else(|| "notification without params".to_owned());
        }
        loop {
            let msg = self.receive(method)?.msg;
            if is(&msg) {
                return msg
                    .get("params")
                    .cloned()
                    .ok_or_else(|| "notification without params".to_owned());
            }
            self.inbox.push_back(msg);
        }
    }

    /// `(VmRSS, VmHWM)` in MB from /proc.
    fn memory(&self) -> Res<(f64, f64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .map_err(|e| format!("cannot read /proc status: {e}"))?;
        let field = |name: &str| -> f64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|kb| kb.parse::<f64>().ok())
                .map_or(f64::NAN, |kb| kb / 1024.0)
        };
        Ok((field("VmRSS:"), field("VmHWM:")))
    }

    fn stop(mut self) {
        let _ = self.call("shutdown", Value::Null);
        let _ = self.send(&json!({"jsonrpc": "2.0", "method": "exit"}));
        let _ = self.child.wait();
    }

    /// Closes the peer's input (the echo peer ends there) and waits for it.
    fn close(self) {
        let Daemon {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let _ = child.wait();
    }
}

/// A peer that answers every request with `result`, prepared beforehand, and does nothing
/// else (this program's `echo` mode): the same client and the same kind of pipes as the
/// daemon's, so its round trip is the least one costs on the machine.
fn echo_peer(result: &Value) -> Res<Daemon> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut peer = Daemon::spawn(Command::new(me).arg("echo"))?;
    peer.send(result)?;
    Ok(peer)
}

/// The `echo` mode: reads the answer's `result` (the first frame on stdin), then answers
/// every later request with it, under the request's id, until stdin ends.
fn echo_serve() -> Res<()> {
    #[derive(serde::Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        id: &'a serde_json::value::RawValue,
    }
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut output = std::io::stdout().lock();
    let result = read_body(&mut input).ok_or("no result to answer with")?;
    while let Some(request) = read_body(&mut input) {
        let id = serde_json::from_slice::<Request<'_>>(&request)
            .map_err(|e| format!("a request without an id: {e}"))?
            .id;
        let body_len = r#"{"jsonrpc":"2.0","id":,"result":}"#.len() + id.get().len() + result.len();
        let mut frame = format!(
            "Content-Length: {body_len}\r\n\r\n{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":",
            id.get()
        )
        .into_bytes();
        frame.extend_from_slice(&result);
        frame.push(b'}');
        output
            .write_all(&frame)
            .and_then(|()| output.flush())
            .map_err(|e| format!("cannot answer: {e}"))?;
    }
    Ok(())
}

/// Kills the daemon `pid` once `deadline` has passed (an answer awaited for [`TIMEOUT`]):
/// its output closes and the awaiting read ends with an error instead of hanging the run.
fn watchdog(pid: u32, deadline: &Mutex<Option<Instant>>) {
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let due = *deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if due.is_some_and(|d| Instant::now() > d) {
            eprintln!(
                "bench-daemon: no answer in {} s, killing the daemon",
                TIMEOUT.as_secs()
            );
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            return;
        }
    }
}

/// One frame read from the daemon's output and parsed; `None` at its end or on a frame
/// that is not JSON.
fn read_frame(r: &mut impl BufRead) -> Option<Received> {
    let body = read_body(r)?;
    let t0 = Instant::now();
    let msg = serde_json::from_slice(&body).ok()?;
    Some(Received {
        msg,
        bytes: body.len(),
        parse_ms: ms(t0.elapsed()),
    })
}

/// One frame's body, as bytes; `None` at the end of the input or on a frame without a
/// `Content-Length`.
fn read_body(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            len = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; len?];
    r.read_exact(&mut body).ok()?;
    Some(body)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn timed<T>(f: impl FnOnce() -> Res<T>) -> Res<(f64, T)> {
    let t0 = Instant::now();
    let v = f()?;
    Ok((ms(t0.elapsed()), v))
}

fn root_of(file: &Path) -> Res<&Path> {
    file.parent()
        .ok_or_else(|| format!("{}: no parent directory", file.display()))
}

fn open(sessiond: &str, file: &Path, runs: usize, context_runs: usize) -> Res<Value> {
    let mut d = Daemon::start(sessiond, root_of(file)?)?;
    let p = json!({"path": file});
    let (first, opened) = timed(|| d.call("session/open", p.clone()))?;
    let (rss, hwm) = d.memory()?;
    let mut open_ms = vec![first];
    for _ in 1..runs {
        d.call("session/close", p.clone())?;
        open_ms.push(timed(|| d.call("session/open", p.clone()))?.0);
    }
    // The round trip of a small request: `session/entry` of the default leaf, one at a time,
    // each followed by the same request to a peer that answers it with the same result and
    // does nothing else (the floor), so that both see the machine in the same state.
    let q = json!({"path": file, "id": opened["leafId"]});
    let mut peer = if opened["leafId"].is_string() {
        Some(echo_peer(&d.call("session/entry", q.clone())?)?)
    } else {
        None
    };
    let mut entry_floor = Vec::new();
    let mut entries = |d: &mut Daemon| -> Res<Vec<f64>> {
        let mut times = Vec::new();
        if let Some(peer) = peer.as_mut() {
            for _ in 0..ENTRY_RUNS {
                times.push(timed(|| d.call("session/entry", q.clone()))?.0);
                entry_floor.push(timed(|| peer.call("session/entry", q.clone()))?.0);
            }
        }
        Ok(times)
    };
    let entry = entries(&mut d)?;
    let mut full = Vec::new();
    let mut full_parse = Vec::new();
    let mut full_bytes = 0;
    let mut ids = Vec::new();
    let mut message_count = Value::Null;
    for _ in 0..context_runs {
        let (t, r) = timed(|| d.call("session/contextAt", p.clone()))?;
        full.push(t);
        (full_bytes, _) = d.last_answer;
        full_parse.push(d.last_answer.1);
        message_count = r["messageCount"].clone();
        ids.push(timed(|| d.call("session/contextAt", json!({"path": file, "fields": "ids"})))?.0);
    }
    // Again right after the large answers: after a burst of work on both CPUs the scheduler may
    // keep the client and the daemon on different ones, and each answer then waits for an idle
    // CPU to wake (docs/performance.md's method; the measurements: `git show 5452ccf:README.md`).
    let entry_after = entries(&mut d)?;
    let (rss_after, hwm_after) = d.memory()?;
    d.stop();
    if let Some(peer) = peer {
        peer.close();
    }
    Ok(json!({
        "entryCount": opened["entryCount"],
        "openMs": open_ms,
        "rssMb": rss,
        "hwmMb": hwm,
        "rssAfterContextMb": rss_after,
        "hwmAfterContextMb": hwm_after,
        "messageCount": message_count,
        "contextFullMs": full,
        "contextFullParseMs": full_parse,
        "contextFullBytes": full_bytes,
        "contextIdsMs": ids,
        "entryMs": entry,
        "entryAfterContextMs": entry_after,
        "entryFloorMs": entry_floor,
    }))
}

/// The session file's dialect, as the daemon's `session/open` reports it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Pi,
    Claude,
}

/// A user message entry line (with its newline) whose parent is `parent`, in the file's
/// format: a pi `message` entry, or a Claude Code `user` line (as Claude appends a prompt).
fn entry_line(format: Format, n: usize, parent: &str) -> Res<(String, String)> {
    if format == Format::Claude {
        let id = format!("00000000-0000-4000-8000-{n:012x}");
        let line = json!({
            "parentUuid": parent,
            "isSidechain": false,
            "type": "user",
            "message": {"role": "user", "content": format!("appended question {n}")},
            "uuid": id,
            "timestamp": format!("2030-01-01T00:{:02}:{:02}.{:03}Z", n / 60_000 % 60, n / 1000 % 60, n % 1000),
            "sessionId": "bench",
            "cwd": "/bench",
            "version": "2.1.197",
            "userType": "external",
        });
        let s = serde_json::to_string(&line).map_err(|e| e.to_string())?;
        return Ok((id, s + "\n"));
    }
    let id = format!("b{n:07x}");
    let line = json!({
        "type": "message",
        "id": id,
        "parentId": parent,
        "timestamp": format!("2030-01-01T00:{:02}:{:02}.{:03}Z", n / 60_000 % 60, n / 1000 % 60, n % 1000),
        "message": {"role": "user", "content": [{"type": "text", "text": format!("appended question {n}")}], "timestamp": 1_893_456_000_000u64 + n as u64},
    });
    let s = serde_json::to_string(&line).map_err(|e| e.to_string())?;
    Ok((id, s + "\n"))
}

fn append(sessiond: &str, file: &Path, appends: usize, reopens: usize) -> Res<Value> {
    let mut d = Daemon::start(sessiond, root_of(file)?)?;
    let p = json!({"path": file});
    let opened = d.call("session/open", p.clone())?;
    let format = if opened["format"] == "claude-code" {
        Format::Claude
    } else {
        Format::Pi
    };
    let mut leaf = opened["leafId"]
        .as_str()
        .ok_or("the session has no leaf")?
        .to_owned();
    // As pi appends (`appendFileSync`: open, one write, close): a file held open for writing
    // would be reported as an agent at work in every `didChange` (see `session::activity`).
    let write = |line: &str| {
        OpenOptions::new()
            .append(true)
            .open(file)
            .and_then(|mut out| out.write_all(line.as_bytes()))
            .map_err(|e| format!("{}: {e}", file.display()))
    };
    let (mut apply, mut change, mut change_ctx) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..appends {
        // Applied by the contextAt request's own refresh.
        let (id, line) = entry_line(format, 2 * i, &leaf)?;
        let t0 = Instant::now();
        write(&line)?;
        let r = d.call(
            "session/contextAt",
            json!({"path": file, "leafId": id, "fields": "ids"}),
        )?;
        apply.push(ms(t0.elapsed()));
        if r["leafId"] != json!(id) {
            return Err(format!("contextAt answered for {} not {id}", r["leafId"]));
        }
        d.notification("session/didChange")?;
        leaf = id;
        std::thread::sleep(Duration::from_millis(10));
        d.inbox.clear();

        // Applied when the watcher's hint reaches the owner.
        let (id, line) = entry_line(format, 2 * i + 1, &leaf)?;
        let t0 = Instant::now();
        write(&line)?;
        let n = d.notification("session/didChange")?;
        change.push(ms(t0.elapsed()));
        d.call(
            "session/contextAt",
            json!({"path": file, "leafId": id, "fields": "ids"}),
        )?;
        change_ctx.push(ms(t0.elapsed()));
        if n["added"][0]["id"] != json!(id) {
            return Err(format!("didChange added {} not {id}", n["added"]));
        }
        leaf = id;
        std::thread::sleep(Duration::from_millis(5));
        d.inbox.clear();
    }
    let mut reopen = Vec::new();
    let mut entry_count = Value::Null;
    for _ in 0..reopens {
        d.call("session/close", p.clone())?;
        let (t, r) = timed(|| d.call("session/open", p.clone()))?;
        reopen.push(t);
        entry_count = r["entryCount"].clone();
    }
    d.stop();
    Ok(json!({
        "entryCount": entry_count,
        "applyMs": apply,
        "didChangeMs": change,
        "didChangeContextMs": change_ctx,
        "reopenMs": reopen,
    }))
}

/// Does on `appended` what the daemon's sink does on the owner's thread: builds the
/// `didChange` params (it also serializes them, on another thread; done here too).
struct Sink;

impl EventSink for Sink {
    fn appended(&self, session: &Session, added: std::ops::Range<NodeIdx>) {
        let params = notify::did_change(session, added);
        std::hint::black_box(serde_json::to_string(&params).unwrap_or_default());
    }
    fn reloaded(&self, _: &Session, _: ReloadReason) {}
    fn corrupt(&self, _: &Session, _: &Corruption) {}
}

fn inproc(file: &Path, appends: usize, reopens: usize) -> Res<Value> {
    let open = || Session::open(file, Mode::Strict).map_err(|e| e.to_string());
    let mut reopen = Vec::new();
    for _ in 0..reopens {
        reopen.push(timed(open)?.0);
    }
    let mut session = open()?;
    let tree = session.pi().ok_or("not a pi session")?.tree();
    let entry_count = tree.len();
    let mut leaf = tree
        .default_leaf()
        .map(|l| tree.node(l).entry.id.to_string())
        .ok_or("the session has no leaf")?;
    let ask = |id: &str| -> Res<params::ContextAtParams> {
        serde_json::from_value(json!({"path": file, "leafId": id, "fields": "ids"}))
            .map_err(|e| e.to_string())
    };
    // The first request at the default leaf projects the whole path once, as a client's
    // first request after opening does.
    handlers::context_at_result(&session, &ask(&leaf)?).map_err(|e| e.to_string())?;
    let mut out = OpenOptions::new()
        .append(true)
        .open(file)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let mut apply = Vec::new();
    for i in 0..appends {
        let (id, line) = entry_line(Format::Pi, i, &leaf)?;
        out.write_all(line.as_bytes())
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let params = ask(&id)?;
        let t0 = Instant::now();
        session.refresh(&Sink);
        let text = handlers::context_at_text(&session, &params).map_err(|e| e.to_string())?;
        apply.push(ms(t0.elapsed()));
        let r: Value = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
        if r["leafId"] != json!(id) {
            return Err(format!("contextAt answered for {} not {id}", r["leafId"]));
        }
        leaf = id;
    }
    Ok(json!({
        "entryCount": entry_count,
        "applyMs": apply,
        "reopenMs": reopen,
    }))
}

fn inproc_context(file: &Path, runs: usize) -> Res<Value> {
    let session = Session::open(file, Mode::Strict).map_err(|e| e.to_string())?;
    let params: params::ContextAtParams =
        serde_json::from_value(json!({"path": file, "fields": "full"}))
            .map_err(|e| e.to_string())?;
    let mut full = Vec::new();
    let mut bytes = 0;
    for _ in 0..runs {
        let t0 = Instant::now();
        let text = handlers::context_at_text(&session, &params).map_err(|e| e.to_string())?;
        full.push(ms(t0.elapsed()));
        bytes = text.len();
    }
    Ok(json!({"contextFullMs": full, "contextFullBytes": bytes}))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize| args.get(i).and_then(|s| s.parse::<usize>().ok());
    if args.get(1).is_some_and(|mode| mode == "echo") {
        return match echo_serve() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bench-daemon echo: {e}");
                ExitCode::from(2)
            }
        };
    }
    let result = match (args.get(1), args.get(2), args.get(3), num(4), num(5)) {
        (Some(sessiond), Some(mode), Some(file), Some(a), Some(b)) => match mode.as_str() {
            "open" => open(sessiond, Path::new(file), a.max(1), b),
            "append" => append(sessiond, Path::new(file), a, b),
            "inproc" => inproc(Path::new(file), a, b),
            "inproc-context" => inproc_context(Path::new(file), b),
            _ => Err(format!("unknown mode {mode}")),
        },
        _ => Err(
            "usage: bench-daemon SESSIOND open|append|inproc|inproc-context FILE N M | bench-daemon echo"
                .to_owned(),
        ),
    };
    match result {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench-daemon: {e}");
            ExitCode::from(2)
        }
    }
}
