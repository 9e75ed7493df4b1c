//! `sessiond rewind` and `session/rewind` against the real pi (1.6.0, `.tools/live`, see
//! tests/live): pi itself writes and edits files in a git work tree, driven by the scripted
//! model server; the tree is snapshotted after each turn; rewinds to each turn's prompt are
//! compared with the snapshot taken before that turn, and `--undo` with the one after the
//! last. Also: drift refused (and forced), a `write` over content the session never saw
//! (unknown until excluded), a symlink that leaves the working directory, the dry run's diffs,
//! `--fork`, and a rewind refused by the daemon while pi works. Skips loudly without the pi
//! install (fails under CI).
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

#[path = "live/mod.rs"]
mod live;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::worktree::{assert_tree, git, plan_statuses, snapshot};

use live::{Lab, PiInstall};
use support::Daemon;

fn tool(name: &str, arguments: Value) -> Value {
    json!({"tools": [{"name": name, "arguments": arguments}]})
}

/// `sessiond ARGS --json`: (exit code, document).
fn sessiond(args: &[&str], state: &Path) -> (i32, Value) {
    let out = Command::new(support::BIN)
        .args(args)
        .arg("--json")
        .env("XDG_STATE_HOME", state)
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

/// The id of the user message entry whose text is `prompt`.
fn prompt_entry(file: &Path, prompt: &str) -> String {
    live::file_lines(file)
        .into_iter()
        .skip(1)
        .find(|e| {
            e["message"]["role"] == "user"
                && (e["message"]["content"] == prompt
                    || e["message"]["content"][0]["text"] == prompt)
        })
        .and_then(|e| e["id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no user entry {prompt}"))
}

fn script() -> Value {
    json!({
        "prompts": {
            // A new file, and an edit of a file the session never read.
            "t1": [
                tool("write", json!({"path": "notes.txt", "content": "one\ntwo\nthree\n"})),
                tool("edit", json!({"path": "existing.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]})),
                {"text": "t1 done"},
            ],
            // A whole read, then a write over what it read; an edit of the session's own file.
            "t2": [
                tool("read", json!({"path": "readme.md"})),
                tool("write", json!({"path": "readme.md", "content": "# New\n"})),
                tool("edit", json!({"path": "notes.txt", "edits": [{"oldText": "two", "newText": "TWO"}]})),
                {"text": "t2 done"},
            ],
            // The older argument shape, and a new file in a new directory.
            "t3": [
                tool("edit", json!({"path": "existing.txt", "oldText": "gamma", "newText": "GAMMA"})),
                tool("write", json!({"path": "src/new.rs", "content": "fn main() {}\n"})),
                {"text": "t3 done"},
            ],
            // A write over a file the session never saw, and one more edit.
            "t4": [
                tool("write", json!({"path": "config.ini", "content": "[new]\n"})),
                tool("edit", json!({"path": "notes.txt", "edits": [{"oldText": "three", "newText": "THREE"}]})),
                {"text": "t4 done"},
            ],
            // A write through a symlink that leaves the working directory.
            "t5": [
                tool("write", json!({"path": "out/escape.txt", "content": "escaped\n"})),
                {"text": "t5 done"},
            ],
            "slow": [
                tool("bash", json!({"command": "sleep 4 && echo slept"})),
                tool("edit", json!({"path": "notes.txt", "edits": [{"oldText": "one", "newText": "ONE"}]})),
                {"text": "slow done"},
            ],
        },
        "default": [{"text": "ok"}],
    })
}

struct World {
    lab: Lab,
    file: PathBuf,
    state: PathBuf,
    snaps: Vec<BTreeMap<String, Vec<u8>>>,
}

/// pi runs t1..t3 in a git work tree; snapshots before and after each turn.
fn world(test: &str) -> Option<World> {
    let pi = PiInstall::find(test)?;
    let lab = Lab::new(&pi, &script());
    let w = &lab.work;
    std::fs::write(w.join("existing.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::write(w.join("readme.md"), "# Title\nold line\n").unwrap();
    std::fs::write(w.join("config.ini"), "[old]\nkey = 1\n").unwrap();
    std::fs::set_permissions(
        w.join("existing.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .unwrap();
    git(w, &["init", "-q"]);
    git(w, &["add", "."]);
    git(w, &["commit", "-q", "-m", "start"]);
    let state = lab.base().join("state");
    let mut snaps = vec![snapshot(w)];
    lab.print(&[], "t1");
    let file = lab.session_files().into_iter().next().unwrap();
    let s = file.to_str().unwrap().to_owned();
    snaps.push(snapshot(w));
    for t in ["t2", "t3"] {
        lab.print(&["--session", &s], t);
        snaps.push(snapshot(w));
    }
    // pi did change the tree as scripted.
    assert_eq!(snaps[3]["existing.txt"], b"alpha\nBETA\nGAMMA\n");
    assert_eq!(snaps[3]["notes.txt"], b"one\nTWO\nthree\n");
    assert_eq!(snaps[3]["readme.md"], b"# New\n");
    assert_eq!(snaps[3]["src/new.rs"], b"fn main() {}\n");
    Some(World {
        lab,
        file,
        state,
        snaps,
    })
}

#[test]
fn rewinds_to_every_turn_match_the_snapshots_and_undo_puts_them_back() {
    let Some(w) = world("rewinds_to_every_turn_match_the_snapshots_and_undo_puts_them_back") else {
        return;
    };
    let (file, work) = (w.file.to_str().unwrap(), &w.lab.work);
    let session_before = std::fs::read(&w.file).unwrap();
    for (k, prompt) in ["t3", "t2", "t1"].iter().enumerate() {
        let entry = prompt_entry(&w.file, prompt);
        let want = &w.snaps[2 - k];
        // The dry run: what would change, per file, and nothing changed.
        let (code, dry) = sessiond(&["rewind", file, "--to", &entry, "--dry-run"], &w.state);
        assert_eq!(code, 0, "{dry}");
        assert_eq!(dry["applied"], false);
        assert_eq!(dry["refusal"], Value::Null, "{dry}");
        assert_tree(work, &w.snaps[3], "after a dry run");
        for f in dry["files"].as_array().unwrap() {
            if f["status"] == "restore" || f["status"] == "remove" {
                assert!(f["diff"].as_str().unwrap().contains("@@"), "{f}");
            }
        }
        let (code, done) = sessiond(&["rewind", file, "--to", &entry], &w.state);
        assert_eq!(code, 0, "{done}");
        assert_eq!(done["applied"], true, "{done}");
        assert_tree(work, want, &format!("rewound to {prompt}"));
        let backup = done["backupDir"].as_str().unwrap().to_owned();
        assert!(backup.starts_with(w.state.to_str().unwrap()), "{backup}");
        let mode = std::fs::metadata(&backup).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o700
        );
        assert!(Path::new(&backup).join("manifest.json").is_file());
        // The mode of a replaced file is kept.
        if want.contains_key("existing.txt") {
            let m = std::fs::metadata(work.join("existing.txt"))
                .unwrap()
                .permissions();
            assert_eq!(std::os::unix::fs::PermissionsExt::mode(&m) & 0o777, 0o640);
        }
        let (code, undone) = sessiond(&["rewind", "--undo", &backup], &w.state);
        assert_eq!(code, 0, "{undone}");
        assert_tree(
            work,
            &w.snaps[3],
            &format!("undo of the rewind to {prompt}"),
        );
    }
    // What each file came from, at t1: a created file removed, an unseen file's edits undone
    // through pi's patches, a read's text restored.
    let (_, dry) = sessiond(
        &[
            "rewind",
            file,
            "--to",
            &prompt_entry(&w.file, "t1"),
            "--dry-run",
        ],
        &w.state,
    );
    let status = plan_statuses(&dry);
    assert_eq!(
        status,
        BTreeMap::from(
            [
                ("notes.txt", "remove"),
                ("existing.txt", "restore"),
                ("readme.md", "restore"),
                ("src/new.rs", "remove"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        ),
        "{dry}"
    );
    assert_eq!(
        std::fs::read(&w.file).unwrap(),
        session_before,
        "the session file is never written"
    );
}

#[test]
fn drift_refuses_unless_forced_and_unknown_and_outside_need_exclude() {
    let Some(w) = world("drift_refuses_unless_forced_and_unknown_and_outside_need_exclude") else {
        return;
    };
    let (file, work) = (w.file.to_str().unwrap(), w.lab.work.clone());
    let t2 = prompt_entry(&w.file, "t2");

    // Drift: a line added to a file the session wrote.
    std::fs::write(work.join("notes.txt"), "one\nTWO\nthree\nmine\n").unwrap();
    let drifted = snapshot(&work);
    let (code, doc) = sessiond(&["rewind", file, "--to", &t2], &w.state);
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
    let (code, doc) = sessiond(&["rewind", file, "--to", &t2, "--force"], &w.state);
    assert_eq!(code, 0, "{doc}");
    assert_tree(&work, &w.snaps[1], "forced rewind");
    let (code, _) = sessiond(
        &["rewind", "--undo", doc["backupDir"].as_str().unwrap()],
        &w.state,
    );
    assert_eq!(code, 0);
    assert_tree(&work, &drifted, "undo of the forced rewind");
    std::fs::write(work.join("notes.txt"), "one\nTWO\nthree\n").unwrap();

    // A write over a file the session never saw: unknown, refused (exit 11) until excluded.
    let s = w.file.to_str().unwrap().to_owned();
    w.lab.print(&["--session", &s], "t4");
    let s4 = snapshot(&work);
    let t4 = prompt_entry(&w.file, "t4");
    let (code, doc) = sessiond(&["rewind", file, "--to", &t4], &w.state);
    assert_eq!(code, 11, "{doc}");
    assert_eq!(doc["refusal"]["kind"], "unrestorable", "{doc}");
    let config = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["relative"] == "config.ini")
        .unwrap();
    assert_eq!(config["status"], "unknown", "{config}");
    assert_tree(&work, &s4, "an unknown content changes nothing");
    let (code, doc) = sessiond(
        &["rewind", file, "--to", &t4, "--exclude", "config.ini"],
        &w.state,
    );
    assert_eq!(code, 0, "{doc}");
    let mut want = w.snaps[3].clone();
    want.insert("config.ini".into(), b"[new]\n".to_vec());
    assert_tree(&work, &want, "rewound to t4 but config.ini");
    let (code, _) = sessiond(
        &["rewind", "--undo", doc["backupDir"].as_str().unwrap()],
        &w.state,
    );
    assert_eq!(code, 0);
    assert_tree(&work, &s4, "undo");

    // A symlink that leaves the working directory: never written, refused until excluded.
    let outside = w.lab.base().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, work.join("out")).unwrap();
    w.lab.print(&["--session", &s], "t5");
    assert_eq!(
        std::fs::read(outside.join("escape.txt")).unwrap(),
        b"escaped\n"
    );
    let t5 = prompt_entry(&w.file, "t5");
    let (code, doc) = sessiond(&["rewind", file, "--to", &t5], &w.state);
    assert_eq!(code, 11, "{doc}");
    assert_eq!(doc["files"][0]["status"], "outside", "{doc}");
    assert!(
        outside.join("escape.txt").is_file(),
        "nothing outside is touched"
    );
    let (code, doc) = sessiond(
        &["rewind", file, "--to", &t5, "--exclude", "out/escape.txt"],
        &w.state,
    );
    assert_eq!(code, 0, "{doc}");
    assert!(
        outside.join("escape.txt").is_file(),
        "nothing outside is touched"
    );
}

#[test]
fn fork_with_the_rewind_and_the_daemon_refuses_while_pi_works() {
    let Some(w) = world("fork_with_the_rewind_and_the_daemon_refuses_while_pi_works") else {
        return;
    };
    let work = w.lab.work.clone();
    let state = w.state.to_str().unwrap().to_owned();
    let (mut d, _) = Daemon::start_with(
        &[&w.lab.sessions],
        &support::Spawn {
            env: vec![("XDG_STATE_HOME", &state)],
            ..Default::default()
        },
    );
    d.call("session/open", json!({"path": w.file}));
    let t3 = prompt_entry(&w.file, "t3");

    // The daemon's dry run equals the CLI's.
    let dry = d.call(
        "session/rewind",
        json!({"path": w.file, "to": t3, "dryRun": true}),
    );
    let (_, cli) = sessiond(
        &["rewind", w.file.to_str().unwrap(), "--to", &t3, "--dry-run"],
        &w.state,
    );
    assert_eq!(dry["files"], cli["files"]);
    assert_tree(&work, &w.snaps[3], "dry run");
    // A relative working directory is refused, not taken against the daemon's own.
    let relative = d.request(
        "session/rewind",
        json!({"path": w.file, "to": t3, "cwd": "work"}),
    );
    assert_eq!(support::error_of(&relative).0, -32602, "{relative}");

    // While pi works on the session, a rewind is refused with agentActive.
    let mut rpc = w.lab.rpc(&w.file);
    rpc.send(json!({"type": "prompt", "message": "slow"}));
    // pi is at work once its bash call is in the file: the turn stays open while the call
    // sleeps its 4 s, and until the edit and the last message that follow it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&w.file)
        .unwrap_or_default()
        .contains("sleep 4 && echo slept")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "pi did not start the slow turn within 60 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let refused = d.request("session/rewind", json!({"path": w.file, "to": t3}));
    let (code, message, _) = support::error_of(&refused);
    assert_eq!(code, -33019, "{refused}");
    assert!(message.contains("agent"), "{message}");
    assert_tree(&work, &w.snaps[3], "refused beside pi");
    rpc.wait_for(Duration::from_secs(60), |v| {
        v.get("type") == Some(&json!("agent_settled"))
    });
    rpc.stop();
    let slow_done = snapshot(&work);
    assert_eq!(slow_done["notes.txt"], b"ONE\nTWO\nthree\n");

    // pi is done: the rewind goes ahead, with a fork at the entry.
    let done = d.call(
        "session/rewind",
        json!({"path": w.file, "to": t3, "fork": true}),
    );
    assert_eq!(done["applied"], true, "{done}");
    assert_tree(&work, &w.snaps[2], "rewound by the daemon");
    assert!(
        done["backupDir"].as_str().unwrap().starts_with(&state),
        "{done}"
    );
    let forked = PathBuf::from(done["fork"]["path"].as_str().unwrap());
    assert!(forked.is_file(), "{done}");
    let lines = live::file_lines(&forked);
    assert_eq!(
        lines.last().unwrap()["id"],
        t3,
        "the fork ends at the entry"
    );
}
