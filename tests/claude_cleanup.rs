//! The archive against the real Claude Code's own cleanup: Claude Code 2.1.197 deletes the
//! transcripts older than `cleanupPeriodDays` (by mtime; a deleted transcript's
//! `<session>/subagents/` directory goes with it) in its background housekeeping, which
//! starts about 5 s after launch, also under `-p`, unless `~/.claude/.last-cleanup` is less
//! than a day old. Here Claude, with `cleanupPeriodDays: 1`, is kept alive past that moment
//! by a scripted answer that comes 9 s late, while `sessiond serve --archive` archives its
//! projects directory: the backdated transcripts are gone from Claude's directory (asserted, so
//! the test cannot pass without a cleanup), a recent one is kept, the archive lists the
//! deleted ones as archived with their original gone, `restore` writes them back byte for
//! byte (the subagent's transcript too), and `claude --resume` continues a restored one.
//! And a project moved: its transcript, archived, restored with `restore --cwd NEWDIR`, is
//! resumed by `claude --resume` run in NEWDIR, which sends sessiond's context of the restored
//! file and leaves the original alone.
//!
//! Without the install (or Node) the test skips loudly, and fails under `CI`.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

#[path = "support/mod.rs"]
mod support;

#[path = "claude/lab.rs"]
mod lab;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use lab::{BeforeResume, Lab, check_resume, lines_of, uuids_of};
use support::{Daemon, Spawn};

const BIN: &str = env!("CARGO_BIN_EXE_sessiond");

/// How long the scripted model holds the answer of the run during which Claude cleans up:
/// longer than Claude's 5 s housekeeping delay, with room for a slow start.
const HOLD_MS: u64 = 9000;

fn script(_work: &Path) -> Value {
    json!({
        "prompts": {
            "Delegate to an agent": [
                {"text": "Delegating.", "tools": [{"name": "Agent", "input": {"description": "Inspect the directory", "prompt": "SUBAGENT TASK: list the work directory and report.", "subagent_type": "general-purpose"}}]},
                {"text": "The agent reported back: marigold."}
            ],
            "SUBAGENT TASK": [
                {"tools": [{"name": "Bash", "input": {"command": "ls -a", "description": "List the directory"}}]},
                {"text": "Subagent report: the directory is nearly empty."}
            ],
            "Take your time": [{"text": "Done waiting.", "delayMs": HOLD_MS}]
        },
        "default": [{"text": "Answer to: {prompt}"}],
        "side": "Scripted side answer"
    })
}

/// `sessiond ARGS` that must succeed; its `--json` document.
fn sessiond_json(args: &[&str]) -> Value {
    let out = Command::new(BIN).args(args).output().expect("run sessiond");
    assert!(
        out.status.success(),
        "sessiond {args:?}: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The archived size of `source` (its newest version's), from the manifests.
fn archived_size(archive: &Path, source: &Path) -> Option<u64> {
    fs::read_dir(archive.join("sessions"))
        .ok()?
        .filter_map(|e| fs::read(e.ok()?.path().join("manifest.json")).ok())
        .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
        .find(|m| m["source"].as_str() == source.to_str())
        .and_then(|m| m["versions"].as_array()?.last()?["size"].as_u64())
}

/// Polls `f` for up to `secs` seconds.
fn eventually(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(secs), "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sets `path`'s modification time `days` days back.
fn backdate(path: &Path, days: u64) {
    let when = SystemTime::now() - Duration::from_secs(days * 86_400);
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_times(fs::FileTimes::new().set_modified(when))
        .unwrap();
}

/// Every `*.jsonl` below `dir`.
fn jsonl_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn claude_cleanup_deletes_old_transcripts_the_archive_keeps_and_restores_them() {
    let test = "claude_cleanup_deletes_old_transcripts_the_archive_keeps_and_restores_them";
    if !lab::available(test) {
        return;
    }
    let lab = Lab::start(script);
    let projects = lab.projects();
    let old_a = "0a11d0c5-6e2b-4f7a-9b1c-3d5e7f901a2b";
    let old_b = "0b22e1d6-7f3c-4a8b-8c2d-4e6f80a12b3c";
    let recent = "0c33f2e7-8a4d-4b9c-9d3e-5f7091b23c4d";
    lab.claude(&[
        "--session-id",
        old_a,
        "-p",
        "Delegate to an agent",
        "--allowedTools",
        "Agent,Bash",
    ]);
    lab.claude(&["--session-id", old_b, "-p", "Remember the word heliotrope"]);
    lab.claude(&["--session-id", recent, "-p", "A recent question"]);
    let file_a = lab.project().join(format!("{old_a}.jsonl"));
    let file_b = lab.project().join(format!("{old_b}.jsonl"));
    let file_recent = lab.project().join(format!("{recent}.jsonl"));
    let subagents: Vec<PathBuf> = jsonl_below(&lab.project().join(old_a));
    assert_eq!(subagents.len(), 1, "one subagent transcript: {subagents:?}");
    let old_files: Vec<PathBuf> = [file_a.clone(), file_b.clone()]
        .into_iter()
        .chain(subagents.iter().cloned())
        .collect();
    for f in &old_files {
        backdate(f, 10);
    }
    let before: Vec<(PathBuf, Vec<u8>)> = old_files
        .iter()
        .chain([&file_recent])
        .map(|f| (f.clone(), fs::read(f).unwrap()))
        .collect();

    // The daemon archives Claude's projects directory continuously.
    let archive = lab.home.join("session-archive");
    let (d, _) = Daemon::start_with(
        &[&projects],
        &Spawn {
            args: vec!["--archive", archive.to_str().unwrap()],
            ..Spawn::default()
        },
    );
    for (f, bytes) in &before {
        eventually(10, &format!("{} archived", f.display()), || {
            archived_size(&archive, f) == Some(bytes.len() as u64)
        });
    }

    // Claude, told to keep transcripts one day, starts and cleans up while it works.
    fs::write(
        lab.home.join(".claude/settings.json"),
        json!({"cleanupPeriodDays": 1}).to_string(),
    )
    .unwrap();
    let sentinel = lab.home.join(".claude/.last-cleanup");
    let _ = fs::remove_file(&sentinel);
    let during = "0d44a3f8-9b5e-4cad-8e4f-6a81a2c34d5e";
    lab.claude(&["--session-id", during, "-p", "Take your time"]);
    assert!(
        sentinel.exists(),
        "Claude ran its cleanup (it writes {})",
        sentinel.display()
    );
    for f in &old_files {
        assert!(
            !f.exists(),
            "Claude's cleanup deleted the backdated {}",
            f.display()
        );
    }
    assert!(
        !lab.project().join(old_a).exists(),
        "and the deleted session's subagents directory"
    );
    assert!(file_recent.exists(), "a recent transcript is kept");
    let file_during = lab.project().join(format!("{during}.jsonl"));
    let during_size = fs::metadata(&file_during).unwrap().len();
    eventually(10, "the session Claude wrote meanwhile is archived", || {
        archived_size(&archive, &file_during) == Some(during_size)
    });
    d.stop();

    // The archive lists them, their originals gone.
    let listed = sessiond_json(&["list", "--archive", archive.to_str().unwrap(), "--json"]);
    let listed = listed["archived"].as_array().unwrap();
    for (f, bytes) in &before {
        let item = listed
            .iter()
            .find(|s| s["path"].as_str() == f.to_str())
            .unwrap_or_else(|| panic!("{} listed as archived: {listed:?}", f.display()));
        assert_eq!(item["originalExists"], json!(f.exists()), "{item}");
        assert_eq!(item["size"], json!(bytes.len()), "{item}");
    }

    // Restored byte for byte where Claude looks for them.
    let subagent_id = subagents[0].file_stem().unwrap().to_str().unwrap();
    for name in [old_a, old_b, subagent_id] {
        let restored = sessiond_json(&["restore", archive.to_str().unwrap(), name, "--json"]);
        assert_eq!(restored["written"], true, "{restored}");
    }
    for (f, bytes) in &before {
        assert_eq!(
            &fs::read(f).unwrap(),
            bytes,
            "{} restored byte for byte",
            f.display()
        );
    }

    // Claude resumes a restored session: it continues from the restored transcript's last line
    // and sends its history to the model.
    let last_before = uuids_of(&file_b).last().cloned().unwrap();
    let lines_before = lines_of(&file_b).len();
    let requests_before = lab.requests().len();
    let result = lab.claude(&["--resume", old_b, "-p", "What was the word"]);
    assert_eq!(result["session_id"], old_b, "{result}");
    let new_lines = lines_of(&file_b)[lines_before..].to_vec();
    let first_new = new_lines
        .iter()
        .find(|l| l["uuid"].is_string())
        .expect("the resume appended lines to the restored transcript");
    assert_eq!(
        first_new["parentUuid"],
        json!(last_before),
        "the resume continues from the restored transcript's last line"
    );
    let turn = lab.requests()[requests_before..]
        .iter()
        .find(|r| r["kind"] == "stream")
        .cloned()
        .expect("the resumed run asked the model");
    let raw = turn["raw"].as_str().unwrap();
    assert!(
        raw.contains("Remember the word heliotrope") && raw.contains("What was the word"),
        "the resumed request carries the restored history and the new prompt"
    );
}

/// A project moved: its transcript is archived, the directory renamed (`claude --resume <id>`
/// in NEWDIR then finds no conversation), and `restore --cwd NEWDIR` writes the session (same id, cwd fields rewritten) where Claude Code looks for
/// NEWDIR's sessions; `claude --resume <id>` run in NEWDIR continues it from sessiond's default
/// leaf, its first request being sessiond's context of the restored file plus the new prompt,
/// and the original transcript is not touched.
#[test]
fn a_moved_project_restored_with_cwd_resumes_under_its_new_path() {
    let test = "a_moved_project_restored_with_cwd_resumes_under_its_new_path";
    if !lab::available(test) {
        return;
    }
    let lab = Lab::start(script);
    let id = "0e55b4a9-ac6f-4dbe-9f50-7b92b3d45e6f";
    lab.claude(&["--session-id", id, "-p", "Remember the word heliotrope"]);
    lab.claude(&["--resume", id, "-p", "A recent question"]);
    let original = lab.project().join(format!("{id}.jsonl"));
    let old_cwd = lab.work.to_str().unwrap().to_owned();
    assert!(
        lines_of(&original)
            .iter()
            .any(|l| l["cwd"].as_str() == Some(old_cwd.as_str())),
        "Claude recorded its cwd"
    );
    let archive = lab.home.join("session-archive");
    let a = archive.to_str().unwrap();
    sessiond_json(&[
        "archive",
        "--root",
        lab.projects().to_str().unwrap(),
        "--to",
        a,
        "--json",
    ]);

    // The project moves; Claude's transcript stays under the old path's project directory.
    let moved = lab.work.with_file_name("moved project.v2");
    fs::rename(&lab.work, &moved).unwrap();
    let new_cwd = moved.to_str().unwrap();
    let original_bytes = fs::read(&original).unwrap();
    // Moved, the session is out of reach: Claude looks only in the new path's directory.
    let requests = lab.requests().len();
    let lost = lab
        .command_in(&moved, &["--resume", id, "-p", "Anyone there"])
        .output()
        .unwrap();
    assert!(
        !lost.status.success() && lab.requests().len() == requests,
        "before the restore, claude --resume in the new place finds nothing: {}",
        String::from_utf8_lossy(&lost.stderr)
    );
    let restored = sessiond_json(&["restore", a, id, "--cwd", new_cwd, "--json"]);
    assert_eq!(restored["written"], true, "{restored}");
    let file = PathBuf::from(restored["path"].as_str().unwrap());
    assert_eq!(
        file,
        lab.project_of(&moved).join(format!("{id}.jsonl")),
        "restored where Claude looks for the new directory's sessions"
    );
    assert_ne!(file.parent(), original.parent());
    let restored_lines = lines_of(&file);
    assert_eq!(restored_lines.len(), lines_of(&original).len());
    for l in &restored_lines {
        if let Some(cwd) = l["cwd"].as_str() {
            assert_eq!(cwd, new_cwd, "every cwd rewritten: {l}");
        }
        assert_eq!(
            l["sessionId"].as_str().unwrap_or(id),
            id,
            "the id kept: {l}"
        );
    }
    let restored_bytes = fs::read(&file).unwrap();

    // Claude resumes it from the new directory: sessiond's context of the restored file, then
    // the new prompt.
    let ctx = sessiond_json(&["context", file.to_str().unwrap(), "--json"]);
    let messages = ctx["messages"].as_array().unwrap().clone();
    assert!(messages.len() >= 4, "two turns of history: {ctx}");
    let before = BeforeResume::new(&lab, &file, &ctx, messages);
    let prompt = "What was the word";
    let result = lab.claude_in(&moved, &["--resume", id, "-p", prompt]);
    assert_eq!(result["session_id"], id, "{result}");
    check_resume(&lab, &file, &before, prompt);
    println!(
        "resumed in {new_cwd}: {} messages of context, then the prompt; {} lines appended",
        before.messages.len(),
        lines_of(&file).len() - restored_lines.len()
    );
    let now = fs::read(&file).unwrap();
    assert!(
        now.starts_with(&restored_bytes) && now.len() > restored_bytes.len(),
        "Claude appended to the restored file, after what sessiond wrote"
    );
    for l in &lines_of(&file)[restored_lines.len()..] {
        if let Some(cwd) = l["cwd"].as_str() {
            assert_eq!(cwd, new_cwd, "Claude runs in the new directory: {l}");
        }
    }
    assert_eq!(
        fs::read(&original).unwrap(),
        original_bytes,
        "the original transcript is untouched"
    );
    assert_eq!(
        jsonl_below(original.parent().unwrap()),
        vec![original.clone()],
        "and no transcript was added beside it"
    );
}
