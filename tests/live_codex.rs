//! The real Codex CLI followed live: Codex 0.171.0 (installed under the repository by
//! `scripts/codex-deps.sh`) works in a temporary home against the scripted Responses API server
//! `tests/codex/model-server.mjs` while `sessiond serve` follows its rollout: a resume appends
//! to the open file (every line announced by `session/didChange` once, in file order), and
//! `codex exec fork` writes a new file, announced by `session/didCreate` with what it
//! continues, while the open file gets nothing (and so does the fork file copied into a later
//! day's directory, where Codex puts a fork made on another day); while Codex writes, the changes name it as the
//! holder of the thread's writer lock; with no root configured, `$CODEX_HOME/sessions` is one.
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
    let mut notes = Vec::new();
    std::thread::scope(|scope| {
        let run = scope.spawn(f);
        while !run.is_finished() {
            if let Some(m) = d.next_message(Duration::from_millis(5))
                && m.get("method").is_some()
            {
                notes.push(m);
            }
        }
        run.join().unwrap();
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
    notes
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
    let test = "codex_followed_live_every_line_once_and_its_fork_announced";
    if !codex_dir().join(BIN).exists() {
        skip(test, "Codex is not installed (run scripts/codex-deps.sh)");
        return;
    }
    if Command::new("node").arg("--version").output().is_err() {
        skip(test, "node is not on PATH");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let home = Home::new(dir.path(), server.port);
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
