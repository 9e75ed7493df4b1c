//! The Claude Code lab shared by the suites that run the real Claude Code (installed under the
//! repository by `scripts/claude-deps.sh`): a HOME, a work directory and the scripted Anthropic
//! Messages server `tests/claude/model-server.mjs`, Claude run in them to its end (bounded),
//! and the normalizations of docs/claude-code.md §10 that a recorded request needs before it
//! is compared with sessiond's context. Every process is stopped through its own handle.
// Test helpers fail the test by panicking, like assertions.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one Claude run may take.
pub const CLAUDE_TIMEOUT: Duration = Duration::from_secs(120);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The installed Claude Code binary, as `tests/claude/corpus.mjs` finds it.
pub fn claude_bin() -> PathBuf {
    match std::env::var_os("SESSIOND_CLAUDE_BIN") {
        Some(b) if !b.is_empty() => PathBuf::from(b),
        _ => repo().join(".tools/claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe"),
    }
}

/// Whether Claude Code and Node are there; without them the test is skipped loudly (it fails
/// under `CI`).
pub fn available(test: &str) -> bool {
    let why = if !claude_bin().is_file() {
        format!(
            "Claude Code is not installed at {} (run `bash scripts/claude-deps.sh`)",
            claude_bin().display()
        )
    } else if Command::new("node").arg("--version").output().is_err() {
        "node is not on PATH (the scripted server needs Node 18+)".to_owned()
    } else {
        return true;
    };
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}");
    }
    eprintln!(
        "\n{}\n!!! SKIPPED {test}: {why}\n{}\n",
        "!".repeat(90),
        "!".repeat(90)
    );
    false
}

/// A JSONL file's lines, parsed (blank lines left out).
pub fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `uuid`s of a transcript's lines that have one (the tree's lines), in file order.
pub fn uuids_of(path: &Path) -> Vec<String> {
    lines_of(path)
        .iter()
        .filter_map(|l| l["uuid"].as_str().map(str::to_owned))
        .collect()
}

/// A HOME, a work directory and the scripted server, for one test; the server is stopped (by
/// its own handle) when the lab is dropped.
pub struct Lab {
    dir: tempfile::TempDir,
    /// Claude's HOME (its projects directory is `.claude/projects` below it).
    pub home: PathBuf,
    /// The work directory Claude runs in.
    pub work: PathBuf,
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
    /// A lab whose model answers from the script `script(work directory)` (see the head of
    /// `tests/claude/model-server.mjs`).
    pub fn start(script: impl FnOnce(&Path) -> Value) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        // Canonical, so paths compare equal to the daemon's canonical paths.
        let base = dir.path().canonicalize().unwrap();
        let home = base.join("home");
        let work = base.join("work");
        std::fs::create_dir_all(home.join(".claude/projects")).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let script_path = base.join("script.json");
        std::fs::write(&script_path, script(&work).to_string()).unwrap();
        let log = base.join("requests.jsonl");
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
            dir,
            home,
            work,
            log,
            port,
            server,
        }
    }

    /// Claude Code's projects directory (a session root).
    pub fn projects(&self) -> PathBuf {
        self.home.join(".claude/projects")
    }

    /// Claude Code's project directory for the work directory (docs/claude-code.md §1).
    pub fn project(&self) -> PathBuf {
        self.project_of(&self.work)
    }

    /// Claude Code's project directory for the directory `cwd` (docs/claude-code.md §1).
    pub fn project_of(&self, cwd: &Path) -> PathBuf {
        let name: String = cwd
            .to_str()
            .unwrap()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        self.projects().join(name)
    }

    /// `claude ARGS --output-format json` in the work directory, with nothing inherited but
    /// what the lab sets, talking to the scripted server.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_in(&self.work, args)
    }

    /// [`Lab::command`] run in the directory `cwd` instead.
    pub fn command_in(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(claude_bin());
        cmd.args(args)
            .args(["--output-format", "json"])
            .current_dir(cwd)
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
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs `claude ARGS` (see [`Lab::command`]) to its end, at most [`CLAUDE_TIMEOUT`];
    /// returns its result document.
    pub fn claude(&self, args: &[&str]) -> Value {
        self.claude_in(&self.work, args)
    }

    /// [`Lab::claude`] run in the directory `cwd` instead.
    pub fn claude_in(&self, cwd: &Path, args: &[&str]) -> Value {
        let mut child = self.command_in(cwd, args).spawn().expect("claude starts");
        let deadline = Instant::now() + CLAUDE_TIMEOUT;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("claude {args:?}: still running after {CLAUDE_TIMEOUT:?}; killed");
            }
            std::thread::sleep(Duration::from_millis(20));
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

    /// The requests the server recorded, in order (`{n, path, headers, raw, kind}`).
    pub fn requests(&self) -> Vec<Value> {
        if !self.log.exists() {
            return Vec::new();
        }
        lines_of(&self.log)
    }
}

const USER_CONTEXT: &str =
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n";

/// The normalizations of docs/claude-code.md §10 for a turn's request (not a `/compact`),
/// applied to its recorded `messages`; `ours` is sessiond's context at the request's leaf:
///
/// * N1: the userContext block of `messages[0]` (added at send time) is removed;
/// * N2: every `cache_control` key (added at send time) is removed;
/// * N4: a message N1–N2 changed that is left with one plain text block equals that string
///   when sessiond has a string there;
/// * N5 (`subagent`): `role: "system"` messages sessiond does not have are dropped
///   (attachments computed during the agent's run are sent but not recorded).
pub fn normalize(messages: &[Value], ours: &[Value], subagent: bool) -> Vec<Value> {
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
    if subagent {
        let have: Vec<&Value> = ours
            .iter()
            .filter(|m| m["role"] == "system")
            .map(|m| &m["content"])
            .collect();
        msgs.retain(|m| m["role"] != "system" || have.contains(&&m["content"]));
    }
    msgs
}

/// The text of a user message (a string, or its text blocks joined).
pub fn text_of(m: &Value) -> String {
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

/// What a resume is checked against: sessiond's context at the transcript's default leaf (the
/// leaf `claude --resume` continues from) just before Claude resumed it, and how much of the
/// transcript and of the server's log there was then.
pub struct BeforeResume {
    /// The uuid of the line the context continues after (`continuesAfterId`).
    pub continues_after: String,
    /// The context's messages.
    pub messages: Vec<Value>,
    /// Requests the server had recorded.
    pub requests_seen: usize,
    /// Lines the transcript had.
    pub lines_seen: usize,
}

impl BeforeResume {
    /// From sessiond's context document (`context FILE --json`, or the daemon's
    /// `session/contextAt` with every page of `messages`) of `file`, now.
    pub fn new(lab: &Lab, file: &Path, doc: &Value, messages: Vec<Value>) -> BeforeResume {
        BeforeResume {
            continues_after: doc["continuesAfterId"].as_str().unwrap().to_owned(),
            messages,
            requests_seen: lab.requests().len(),
            lines_seen: lines_of(file).len(),
        }
    }
}

/// The resumed run continued `file` from sessiond's default leaf, and its first request is
/// sessiond's context there followed by the new prompt (and only the attachments Claude
/// computed for it), after the normalizations of [`normalize`].
pub fn check_resume(lab: &Lab, file: &Path, before: &BeforeResume, prompt: &str) {
    let new_lines: Vec<Value> = lines_of(file)[before.lines_seen..]
        .iter()
        .filter(|l| l["uuid"].is_string())
        .cloned()
        .collect();
    assert!(
        !new_lines.is_empty(),
        "{prompt}: Claude appended to {}",
        file.display()
    );
    assert_eq!(
        new_lines[0]["parentUuid"],
        before.continues_after.as_str(),
        "Claude continued from the line sessiond named"
    );
    let requests = lab.requests();
    let first = requests[before.requests_seen..]
        .iter()
        .find(|r| r["kind"] == "stream")
        .expect("the resumed run sent a turn");
    let body: Value = serde_json::from_str(first["raw"].as_str().unwrap()).unwrap();
    let sent = body["messages"].as_array().unwrap().clone();
    let norm = normalize(&sent, &before.messages, false);
    let ours = &before.messages;
    assert!(
        norm.len() > ours.len(),
        "{prompt}: the request adds to the context"
    );
    assert_eq!(
        Value::Array(norm[..ours.len()].to_vec()),
        Value::Array(ours.clone()),
        "{prompt}: the resumed request starts with sessiond's context at the default leaf"
    );
    let rest = &norm[ours.len()..];
    assert_eq!(rest[0]["role"], "user");
    assert_eq!(text_of(&rest[0]), prompt, "then the new prompt");
    assert!(
        rest[1..].iter().all(|m| m["role"] == "system"),
        "and only the attachments Claude computed for it: {rest:?}"
    );
}
