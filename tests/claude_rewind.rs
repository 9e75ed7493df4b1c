//! `sessiond rewind` and `session/rewind` on Claude Code transcripts, against the real Claude
//! Code 2.1.197 (installed under the repository by `scripts/claude-deps.sh`): Claude itself,
//! answered by the scripted Anthropic Messages server `tests/claude/model-server.mjs`, creates,
//! edits and overwrites files with its `Write` and `Edit` tools in a git work tree (its
//! `MultiEdit` is asked for too: 2.1.197 answers "No such tool available", an error result that
//! changes nothing); the tree is snapshotted after each turn; rewinds to each turn's prompt must
//! equal the snapshot taken before that turn, and `--undo` the one after the last. Also: drift
//! refused (and forced), a `Write` over a file longer than Claude Code keeps in its record
//! (unknown until excluded), a symlink that leaves the working directory, the dry run's diffs;
//! with Claude's file checkpointing on, the same overwrite put back from its file history; a
//! `--fork` (a new transcript); and the daemon's plan equal to the CLI's. The transcript is
//! never written.
//!
//! Without the install (or Node) the test skips loudly, and fails under `CI`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/mod.rs"]
mod support;

#[path = "claude/lab.rs"]
mod lab;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::worktree::{assert_tree, git, plan_statuses, snapshot};

use lab::{Lab, lines_of};
use support::{Daemon, Spawn};

/// The session's id (Claude's `--session-id`).
const SESSION: &str = "3c6f2a1e-9b7d-4e05-8a41-2f0c5d7e9b13";

fn tool(name: &str, input: Value) -> Value {
    json!({"tools": [{"name": name, "input": input}]})
}

/// A file longer than the 10,000 characters of `originalFile` Claude Code keeps.
fn big() -> String {
    (0..800)
        .map(|i| format!("line {i} of a big file\n"))
        .collect()
}

fn script(work: &Path) -> Value {
    let p = |name: &str| work.join(name).to_string_lossy().into_owned();
    json!({
        "prompts": {
            // A new file, and an edit of a file that was there (read first, as Edit requires).
            "t1": [
                tool("Write", json!({"file_path": p("notes.txt"), "content": "one\ntwo\nthree\n"})),
                tool("Read", json!({"file_path": p("existing.txt")})),
                tool("Edit", json!({"file_path": p("existing.txt"), "old_string": "beta", "new_string": "BETA"})),
                {"text": "t1 done"},
            ],
            // An edit of the session's own file, a MultiEdit (gone in 2.1.197), an overwrite
            // of a file that was there, and an edit of every occurrence.
            "t2": [
                tool("Edit", json!({"file_path": p("notes.txt"), "old_string": "two", "new_string": "TWO"})),
                tool("MultiEdit", json!({"file_path": p("notes.txt"), "edits": [{"old_string": "one", "new_string": "ONE"}]})),
                tool("Read", json!({"file_path": p("config.ini")})),
                tool("Write", json!({"file_path": p("config.ini"), "content": "[new]\n"})),
                tool("Edit", json!({"file_path": p("existing.txt"), "old_string": "a", "new_string": "A", "replace_all": true})),
                {"text": "t2 done"},
            ],
            // One more edit, and a new file in a new directory.
            "t3": [
                tool("Edit", json!({"file_path": p("notes.txt"), "old_string": "three", "new_string": "THREE"})),
                tool("Write", json!({"file_path": p("src/new.rs"), "content": "fn main() {}\n"})),
                {"text": "t3 done"},
            ],
            // An overwrite of a file too long for the record to keep what it replaced, and an
            // edit of another long one (undone through its structuredPatch).
            "t4": [
                tool("Read", json!({"file_path": p("big.txt")})),
                tool("Write", json!({"file_path": p("big.txt"), "content": "small now\n"})),
                tool("Read", json!({"file_path": p("big2.txt")})),
                tool("Edit", json!({"file_path": p("big2.txt"), "old_string": "line 5 of", "new_string": "LINE 5 OF"})),
                {"text": "t4 done"},
            ],
            // A new file, then an answer that comes 8 s late: Claude at work.
            "slow": [
                tool("Write", json!({"file_path": p("slow.txt"), "content": "slow\n"})),
                {"delayMs": 8000, "text": "slow done"},
            ],
            // A write through a symlink that leaves the working directory.
            "t5": [
                tool("Write", json!({"file_path": p("out/escape.txt"), "content": "escaped\n"})),
                {"text": "t5 done"},
            ],
        },
        "default": [{"text": "ok"}],
        "side": "title",
    })
}

struct World {
    lab: Lab,
    file: PathBuf,
    state: PathBuf,
    /// Before t1, and after each of t1..t3.
    snaps: Vec<BTreeMap<String, Vec<u8>>>,
    checkpointing: bool,
}

impl World {
    /// Claude runs `prompt` in the work tree (the first turn starts the session, the others
    /// resume it), with its Write, Edit and Read tools allowed; `checkpointing` turns its file
    /// history on as the SDK does.
    fn turn(&self, prompt: &str) {
        let child = self.start(prompt);
        self.finish(child, prompt);
    }

    /// Starts Claude on `prompt` (see [`World::turn`]).
    fn start(&self, prompt: &str) -> std::process::Child {
        let resume;
        let mut args = vec!["-p", prompt];
        if self.file.exists() {
            resume = ["--resume", SESSION];
            args.extend(resume);
        } else {
            args.extend(["--session-id", SESSION]);
        }
        args.extend([
            "--allowedTools",
            "Write,Edit,Read,MultiEdit",
            "--permission-mode",
            "acceptEdits",
        ]);
        let mut cmd = self.lab.command(&args);
        if self.checkpointing {
            cmd.env("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING", "true");
        }
        cmd.spawn().expect("claude starts")
    }

    /// Waits for Claude started on `prompt` to end, at most [`lab::CLAUDE_TIMEOUT`].
    fn finish(&self, mut child: std::process::Child, prompt: &str) {
        let args = [prompt];
        let deadline = Instant::now() + lab::CLAUDE_TIMEOUT;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "claude {args:?}: still running after {:?}; killed",
                    lab::CLAUDE_TIMEOUT
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&format!("\"result\":\"{prompt} done\"")),
            "claude {args:?}: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `sessiond ARGS --json` with the lab's Claude configuration: (exit code, document).
    fn sessiond(&self, args: &[&str]) -> (i32, Value) {
        let out = Command::new(support::BIN)
            .args(args)
            .arg("--json")
            .env("XDG_STATE_HOME", &self.state)
            .env("CLAUDE_CONFIG_DIR", self.lab.home.join(".claude"))
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap(), doc)
    }

    fn path(&self) -> &str {
        self.file.to_str().unwrap()
    }
}

/// The uuid of the user line whose prompt is `prompt`.
fn prompt_entry(file: &Path, prompt: &str) -> String {
    lines_of(file)
        .into_iter()
        .find(|l| l["type"] == "user" && l["message"]["content"] == prompt)
        .and_then(|l| l["uuid"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no prompt line {prompt}"))
}

/// Claude runs t1..t3 in a git work tree; snapshots before and after each turn.
fn world(test: &str, checkpointing: bool) -> Option<World> {
    if !lab::available(test) {
        return None;
    }
    let lab = Lab::start(script);
    let w = lab.work.clone();
    std::fs::write(w.join("existing.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::write(w.join("config.ini"), "[old]\nkey = 1\n").unwrap();
    std::fs::write(w.join("big.txt"), big()).unwrap();
    std::fs::write(w.join("big2.txt"), big()).unwrap();
    std::fs::set_permissions(
        w.join("existing.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .unwrap();
    git(&w, &["init", "-q"]);
    git(&w, &["add", "."]);
    git(&w, &["commit", "-q", "-m", "start"]);
    let file = lab.project().join(format!("{SESSION}.jsonl"));
    let state = lab.home.parent().unwrap().join("state");
    let mut world = World {
        lab,
        file,
        state,
        snaps: Vec::new(),
        checkpointing,
    };
    world.snaps.push(snapshot(&w));
    for t in ["t1", "t2", "t3"] {
        world.turn(t);
        world.snaps.push(snapshot(&w));
    }
    // Claude did change the tree as scripted; its MultiEdit was refused and changed nothing.
    let s3 = &world.snaps[3];
    assert_eq!(s3["existing.txt"], b"AlphA\nBETA\ngAmmA\n");
    assert_eq!(s3["notes.txt"], b"one\nTWO\nTHREE\n");
    assert_eq!(s3["config.ini"], b"[new]\n");
    assert_eq!(s3["src/new.rs"], b"fn main() {}\n");
    let multi = lines_of(&world.file)
        .into_iter()
        .find(|l| {
            l["message"]["content"][0]["content"]
                .as_str()
                .is_some_and(|c| c.contains("No such tool available: MultiEdit"))
        })
        .expect("Claude Code 2.1.197 answers MultiEdit with an error");
    assert_eq!(multi["message"]["content"][0]["is_error"], true);
    Some(world)
}

#[test]
fn claude_rewinds_to_every_turn_match_the_snapshots_and_undo_puts_them_back() {
    let Some(w) = world(
        "claude_rewinds_to_every_turn_match_the_snapshots_and_undo_puts_them_back",
        false,
    ) else {
        return;
    };
    let work = &w.lab.work;
    let transcript_before = std::fs::read(&w.file).unwrap();
    for (k, prompt) in ["t3", "t2", "t1"].iter().enumerate() {
        let entry = prompt_entry(&w.file, prompt);
        let want = &w.snaps[2 - k];
        // The dry run: what would change, per file, and nothing changed.
        let (code, dry) = w.sessiond(&["rewind", w.path(), "--to", &entry, "--dry-run"]);
        assert_eq!(code, 0, "{dry}");
        assert_eq!(dry["applied"], false);
        assert_eq!(dry["refusal"], Value::Null, "{dry}");
        assert_tree(work, &w.snaps[3], "after a dry run");
        for f in dry["files"].as_array().unwrap() {
            if f["status"] == "restore" || f["status"] == "remove" {
                assert!(f["diff"].as_str().unwrap().contains("@@"), "{f}");
            }
        }
        let (code, done) = w.sessiond(&["rewind", w.path(), "--to", &entry]);
        assert_eq!(code, 0, "{done}");
        assert_eq!(done["applied"], true, "{done}");
        assert_tree(work, want, &format!("rewound to {prompt}"));
        let backup = done["backupDir"].as_str().unwrap().to_owned();
        assert!(backup.starts_with(w.state.to_str().unwrap()), "{backup}");
        // The mode of a replaced file is kept.
        let m = std::fs::metadata(work.join("existing.txt"))
            .unwrap()
            .permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&m) & 0o777, 0o640);
        let (code, undone) = w.sessiond(&["rewind", "--undo", &backup]);
        assert_eq!(code, 0, "{undone}");
        assert_tree(
            work,
            &w.snaps[3],
            &format!("undo of the rewind to {prompt}"),
        );
    }
    // What each file came from, at t1: created files removed, the others put back from the
    // records' originalFile.
    let (_, dry) = w.sessiond(&[
        "rewind",
        w.path(),
        "--to",
        &prompt_entry(&w.file, "t1"),
        "--dry-run",
    ]);
    let status = plan_statuses(&dry);
    assert_eq!(
        status,
        BTreeMap::from(
            [
                ("notes.txt", "remove"),
                ("existing.txt", "restore"),
                ("config.ini", "restore"),
                ("src/new.rs", "remove"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        ),
        "{dry}"
    );
    // The human dry run prints the diffs.
    let out = Command::new(support::BIN)
        .args([
            "rewind",
            w.path(),
            "--to",
            &prompt_entry(&w.file, "t2"),
            "--dry-run",
        ])
        .env("XDG_STATE_HOME", &w.state)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("--- a/config.ini\n+++ b/config.ini\n") && text.contains("+[old]\n"),
        "{text}"
    );
    assert_tree(work, &w.snaps[3], "after the human dry run");
    assert_eq!(
        std::fs::read(&w.file).unwrap(),
        transcript_before,
        "the transcript is never written"
    );
}

#[test]
fn claude_drift_refuses_unless_forced_and_unknown_and_outside_need_exclude() {
    let Some(w) = world(
        "claude_drift_refuses_unless_forced_and_unknown_and_outside_need_exclude",
        false,
    ) else {
        return;
    };
    let work = w.lab.work.clone();
    let t2 = prompt_entry(&w.file, "t2");

    // Drift: a line added to a file the session wrote.
    std::fs::write(work.join("notes.txt"), "one\nTWO\nTHREE\nmine\n").unwrap();
    let drifted = snapshot(&work);
    let (code, doc) = w.sessiond(&["rewind", w.path(), "--to", &t2]);
    assert_eq!(code, 4, "{doc}");
    assert_eq!(doc["applied"], false);
    assert_eq!(doc["refusal"]["kind"], "drift", "{doc}");
    let paths = doc["refusal"]["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 1, "{doc}");
    assert!(paths[0].as_str().unwrap().ends_with("/notes.txt"));
    let notes = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["relative"] == "notes.txt")
        .unwrap();
    assert!(
        notes["drift"]["diff"].as_str().unwrap().contains("+mine"),
        "{notes}"
    );
    assert_tree(&work, &drifted, "a refused rewind changes nothing");
    // Forced: rewound to t2's start, the drifted line goes with it.
    let (code, doc) = w.sessiond(&["rewind", w.path(), "--to", &t2, "--force"]);
    assert_eq!(code, 0, "{doc}");
    assert_tree(&work, &w.snaps[1], "forced rewind");
    let (code, _) = w.sessiond(&["rewind", "--undo", doc["backupDir"].as_str().unwrap()]);
    assert_eq!(code, 0);
    assert_tree(&work, &drifted, "undo of the forced rewind");
    std::fs::write(work.join("notes.txt"), "one\nTWO\nTHREE\n").unwrap();

    // An overwrite of a file longer than the record keeps: unknown, refused (exit 11) until
    // excluded; the long file only edited is undone through its structuredPatch.
    w.turn("t4");
    let record = lines_of(&w.file)
        .into_iter()
        .find(|l| {
            l["toolUseResult"]["filePath"]
                .as_str()
                .is_some_and(|p| p.ends_with("/big.txt"))
                && l["toolUseResult"]["type"] == "update"
        })
        .unwrap();
    assert_eq!(
        record["toolUseResult"]["originalFile"],
        Value::Null,
        "{record}"
    );
    let s4 = snapshot(&work);
    let t4 = prompt_entry(&w.file, "t4");
    let (code, doc) = w.sessiond(&["rewind", w.path(), "--to", &t4]);
    assert_eq!(code, 11, "{doc}");
    assert_eq!(doc["refusal"]["kind"], "unrestorable", "{doc}");
    let file = |doc: &Value, name: &str| {
        doc["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["relative"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {doc}"))
    };
    assert_eq!(file(&doc, "big.txt")["status"], "unknown", "{doc}");
    assert_eq!(file(&doc, "big2.txt")["status"], "restore", "{doc}");
    assert_tree(&work, &s4, "an unknown content changes nothing");
    let (code, doc) = w.sessiond(&["rewind", w.path(), "--to", &t4, "--exclude", "big.txt"]);
    assert_eq!(code, 0, "{doc}");
    let mut want = w.snaps[3].clone();
    want.insert("big.txt".into(), b"small now\n".to_vec());
    assert_tree(&work, &want, "rewound to t4 but big.txt");
    let (code, _) = w.sessiond(&["rewind", "--undo", doc["backupDir"].as_str().unwrap()]);
    assert_eq!(code, 0);
    assert_tree(&work, &s4, "undo");

    // A symlink that leaves the working directory: never written, refused until excluded.
    let outside = w.lab.home.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, work.join("out")).unwrap();
    w.turn("t5");
    assert_eq!(
        std::fs::read(outside.join("escape.txt")).unwrap(),
        b"escaped\n"
    );
    let t5 = prompt_entry(&w.file, "t5");
    let (code, doc) = w.sessiond(&["rewind", w.path(), "--to", &t5]);
    assert_eq!(code, 11, "{doc}");
    assert_eq!(doc["files"][0]["status"], "outside", "{doc}");
    let (code, doc) = w.sessiond(&[
        "rewind",
        w.path(),
        "--to",
        &t5,
        "--exclude",
        "out/escape.txt",
    ]);
    assert_eq!(code, 0, "{doc}");
    assert!(
        outside.join("escape.txt").is_file(),
        "nothing outside is touched"
    );
}

#[test]
fn claude_file_history_restores_what_the_record_dropped_fork_and_daemon() {
    let Some(w) = world(
        "claude_file_history_restores_what_the_record_dropped_fork_and_daemon",
        true,
    ) else {
        return;
    };
    let work = w.lab.work.clone();
    // Claude kept its file history: snapshot lines in the transcript, copies under HOME.
    let history = w.lab.home.join(".claude/file-history").join(SESSION);
    assert!(history.is_dir(), "no file history at {}", history.display());
    let s3 = snapshot(&work);
    w.turn("t4");
    let s4 = snapshot(&work);
    let t4 = prompt_entry(&w.file, "t4");
    let transcript_before = std::fs::read(&w.file).unwrap();

    // The overwrite whose record dropped originalFile comes back from the copy Claude kept.
    let (code, doc) = w.sessiond(&["rewind", w.path(), "--to", &t4, "--dry-run"]);
    assert_eq!(code, 0, "{doc}");
    let big = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["relative"] == "big.txt")
        .unwrap()
        .clone();
    assert_eq!(big["status"], "restore", "{big}");
    assert_eq!(big["calls"][0]["kind"], "checkpoint", "{big}");

    // The daemon's plan is the CLI's.
    let state = w.state.to_str().unwrap().to_owned();
    let config = w.lab.home.join(".claude");
    let config = config.to_str().unwrap();
    let projects = w.lab.projects();
    let (mut d, _) = Daemon::start_with(
        &[&projects],
        &Spawn {
            env: vec![("XDG_STATE_HOME", &state), ("CLAUDE_CONFIG_DIR", config)],
            ..Default::default()
        },
    );
    d.call("session/open", json!({"path": w.file}));
    let dry = d.call(
        "session/rewind",
        json!({"path": w.file, "to": t4, "dryRun": true}),
    );
    assert_eq!(dry["files"], doc["files"]);
    assert_tree(&work, &s4, "dry runs");

    // Applied by the daemon, with a fork: a new transcript in the projects directory.
    let done = d.call(
        "session/rewind",
        json!({"path": w.file, "to": t4, "fork": true}),
    );
    assert_eq!(done["applied"], true, "{done}");
    assert_tree(&work, &s3, "rewound to t4 from the file history");
    let forked = PathBuf::from(done["fork"]["path"].as_str().unwrap());
    assert!(forked.is_file(), "{done}");
    assert_eq!(forked.parent(), w.file.parent(), "{done}");
    assert_ne!(forked, w.file);
    let (code, _) = w.sessiond(&["rewind", "--undo", done["backupDir"].as_str().unwrap()]);
    assert_eq!(code, 0);
    assert_tree(&work, &s4, "undo");
    // The CLI's --fork too.
    let (code, doc) = w.sessiond(&["rewind", w.path(), "--to", &t4, "--fork"]);
    assert_eq!(code, 0, "{doc}");
    assert_tree(&work, &s3, "rewound by the CLI");
    assert!(
        Path::new(doc["fork"]["path"].as_str().unwrap()).is_file(),
        "{doc}"
    );
    assert_eq!(
        std::fs::read(&w.file).unwrap(),
        transcript_before,
        "the transcript is never written"
    );
    let (code, _) = w.sessiond(&["rewind", "--undo", doc["backupDir"].as_str().unwrap()]);
    assert_eq!(code, 0);
    assert_tree(&work, &s4, "undo of the CLI's rewind");

    // While Claude works on the transcript (its answer comes late), a rewind is refused: exit
    // 7 from the CLI, agentActive from the daemon; nothing changed.
    let child = w.start("slow");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&w.file)
        .unwrap_or_default()
        .contains(&format!(
            "File created successfully at: {}",
            work.join("slow.txt").display()
        ))
    {
        assert!(
            Instant::now() < deadline,
            "Claude did not write slow.txt within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let during = snapshot(&work);
    assert_eq!(during["slow.txt"], b"slow\n");
    let (code, doc) = w.sessiond(&["rewind", w.path(), "--to", &t4]);
    assert_eq!(code, 7, "{doc}");
    let refused = d.request("session/rewind", json!({"path": w.file, "to": t4}));
    let (code, message, _) = support::error_of(&refused);
    assert_eq!(code, -33019, "{refused}");
    assert!(message.contains("agent"), "{message}");
    assert_tree(&work, &during, "refused beside Claude");
    w.finish(child, "slow");
    // Claude is done: the rewind goes ahead.
    let slow = prompt_entry(&w.file, "slow");
    let (code, doc) = w.sessiond(&["rewind", w.path(), "--to", &slow]);
    assert_eq!(code, 0, "{doc}");
    assert_tree(&work, &s4, "rewound to the slow turn");
}
