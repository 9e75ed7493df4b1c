//! `sessiond verify` and `session/verifyResume` on sessions written by pi 1.6.0's own
//! SessionManager (tests/oracle/verify-session.mjs) in temporary git repositories made with
//! the git program: a clean resume, a file edited after the session, a file deleted, an
//! interrupted edit, a fork made before an edit whose effect is on disk, a summary claiming a
//! file that was never changed, a failed edit, a missing program and a background process,
//! credentials present and absent (never printed), no git, a missing working directory, and
//! files larger than the text limit (hashed as they stream). Both the CLI and the daemon.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use support::common;

const ANTHROPIC_VARS: [&str; 3] = [
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_OAUTH_TOKEN",
    "ANTHROPIC_API_KEY",
];

/// Whether the git program runs; under CI its absence fails the test (scripts/test.sh
/// installs it).
fn git_available(test: &str) -> bool {
    let ok = Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: git is not installed under CI; scripts/test.sh installs it"
        );
        eprintln!("!!! SKIPPED {test}: the git program is not installed");
    }
    ok
}

/// A work tree, a session directory, a home and pi's agent directory in one temp dir.
struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    work: PathBuf,
    sessions: PathBuf,
    home: PathBuf,
    agent: PathBuf,
    oracle: PathBuf,
}

impl World {
    fn new(test: &str) -> Option<World> {
        let oracle = common::oracle_dir(test)?;
        Some(World::with_oracle(oracle))
    }

    /// [`World::new`] for a test that needs the git program: None without it as without pi
    /// (see [`git_available`]).
    fn with_git(test: &str) -> Option<World> {
        let w = World::new(test)?;
        git_available(test).then_some(w)
    }

    /// A world whose sessions are written by hand (pi is not run).
    fn new_plain() -> Option<World> {
        Some(World::with_oracle(PathBuf::new()))
    }

    fn with_oracle(oracle: PathBuf) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let w = World {
            work: root.join("work"),
            sessions: root.join("sessions"),
            home: root.join("home"),
            agent: root.join("agent"),
            root,
            _tmp: tmp,
            oracle,
        };
        for d in [&w.work, &w.sessions, &w.home, &w.agent] {
            std::fs::create_dir_all(d).unwrap();
        }
        w
    }

    fn git(&self, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.work)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", &self.home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `git init` with a local identity and one commit of `files`.
    fn repo(&self, files: &[(&str, &str)]) {
        self.git(&["init", "-q", "-b", "main"]);
        self.git(&["config", "user.name", "Test"]);
        self.git(&["config", "user.email", "test@example.com"]);
        for (p, text) in files {
            self.put(p, text);
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    }

    fn put(&self, rel: &str, text: &str) {
        let p = self.work.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn path(&self, rel: &str) -> String {
        self.work.join(rel).to_str().unwrap().to_owned()
    }

    /// Writes a session through pi's SessionManager; returns (file, marks). A step may be a list
    /// of steps (see [`done`]).
    fn session(&self, steps: Value) -> (PathBuf, Value) {
        let steps: Vec<Value> = steps
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|step| match step {
                Value::Array(steps) => steps.clone(),
                step => vec![step.clone()],
            })
            .collect();
        let script = json!({
            "cwd": self.work,
            "sessionDir": self.sessions,
            "steps": steps,
        });
        let mut child = Command::new("node")
            .arg(common::repo("tests/oracle/verify-session.mjs"))
            .env("SESSIOND_ORACLE_DIR", &self.oracle)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("node runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "verify-session.mjs failed");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            PathBuf::from(v["file"].as_str().unwrap()),
            v["marks"].clone(),
        )
    }

    /// `sessiond verify FILE --json ARGS`, with HOME and pi's agent directory in the temp
    /// dir and no Anthropic variable set unless `env` sets one.
    fn verify(&self, file: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Value, Output) {
        let out = self.verify_command(file, &[&["--json"], args].concat(), env);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", common::describe(&out));
        });
        support::assert_schema("session/verifyResume", "result", &report);
        (out.status.code().unwrap_or(-1), report, out)
    }

    /// `sessiond verify FILE ARGS…` in this world, as it ran.
    fn verify_command(&self, file: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sessiond"));
        cmd.arg("verify")
            .arg(file)
            .args(args)
            .env("HOME", &self.home)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null");
        for v in ANTHROPIC_VARS {
            cmd.env_remove(v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }
}

/// The findings of `kind`.
fn of_kind<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

/// A finding's message.
fn message(finding: &Value) -> &str {
    finding["message"].as_str().unwrap()
}

fn one<'a>(report: &'a Value, kind: &str) -> &'a Value {
    let found = of_kind(report, kind);
    assert_eq!(found.len(), 1, "{kind}: {report:#}");
    found[0]
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"op": "call", "id": id, "name": name, "arguments": args})
}

/// A tool call and its successful result.
fn done(id: &str, name: &str, args: Value) -> Value {
    json!([call(id, name, args), ok(id, name)])
}

fn ok(id: &str, name: &str) -> Value {
    json!({"op": "result", "id": id, "name": name, "text": format!("Successfully did {name}")})
}

fn user(text: &str) -> Value {
    json!({"op": "user", "text": text})
}

/// A session that writes a.txt, edits b.txt with both edit forms (edits[] as a JSON string,
/// and the legacy oldText/newText) and runs a few programs.
fn clean_steps() -> Value {
    json!([
        user("start"),
        done(
            "w1",
            "write",
            json!({"path": "a.txt", "content": "alpha\n"})
        ),
        done(
            "e1",
            "edit",
            json!({"path": "b.txt", "edits": "[{\"oldText\":\"one\",\"newText\":\"ONE\"}]"})
        ),
        done(
            "e2",
            "edit",
            json!({"path": "./b.txt", "oldText": "three\r\n", "newText": "3\n"})
        ),
        done(
            "b1",
            "bash",
            json!({"command": "ls -la | grep txt && git status"})
        ),
        json!({"op": "assistant", "text": "done"}),
    ])
}

#[test]
fn a_clean_resume_needs_no_attention_in_the_cli_and_the_daemon() {
    let Some(w) = World::with_git("verify clean") else {
        return;
    };
    w.repo(&[("b.txt", "one\r\ntwo\r\nthree\r\n")]);
    let (file, _) = w.session(clean_steps());
    // The effects, as pi's tools apply them: CRLF kept, the new line gets the file's ending.
    w.put("a.txt", "alpha\n");
    w.put("b.txt", "ONE\r\ntwo\r\n3\r\n");
    std::fs::write(
        w.agent.join("auth.json"),
        r#"{"anthropic":{"type":"api_key","key":"sk-file-secret"}}"#,
    )
    .unwrap();
    let (code, report, out) = w.verify(&file, &[], &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["attention"], false);
    assert_eq!(report["counts"]["warn"], 0);
    assert_eq!(report["counts"]["fail"], 0);
    let effects = of_kind(&report, "fileEffect");
    assert_eq!(effects.len(), 2, "{report:#}");
    assert_eq!(effects[0]["path"], w.path("a.txt"));
    assert_eq!(effects[1]["path"], w.path("b.txt"));
    assert_eq!(effects[1]["toolCallId"], "e2");
    let git = one(&report, "git");
    assert_eq!(git["evidence"]["branch"], "main");
    assert_eq!(
        git["evidence"]["dirtyTouched"],
        json!([w.path("a.txt"), w.path("b.txt")])
    );
    assert_eq!(
        one(&report, "credentials")["evidence"]["authFileHasProvider"],
        true
    );
    let tools = one(&report, "tool");
    assert_eq!(tools["evidence"]["programs"], json!(["ls", "grep", "git"]));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("sk-file-secret"));

    // The daemon: the same findings for the session closed and open.
    let agent = w.agent.to_str().unwrap().to_owned();
    let home = w.home.to_str().unwrap().to_owned();
    let (mut d, _) = support::Daemon::start_with(
        &[&w.sessions],
        &support::Spawn {
            env: vec![
                ("PI_CODING_AGENT_DIR", &agent),
                ("HOME", &home),
                ("ANTHROPIC_API_KEY", ""),
                ("ANTHROPIC_AUTH_TOKEN", ""),
                ("ANTHROPIC_OAUTH_TOKEN", ""),
            ],
            ..Default::default()
        },
    );
    let params = json!({"path": file});
    let closed = d.call("session/verifyResume", params.clone());
    assert_eq!(closed["findings"], report["findings"], "closed: {closed:#}");
    assert_eq!(closed["leafId"], report["leafId"]);
    d.call("session/open", params.clone());
    let open = d.call("session/verifyResume", params);
    assert_eq!(open["findings"], report["findings"], "open: {open:#}");
    let unknown = d.request(
        "session/verifyResume",
        json!({"path": file, "leafId": "nope"}),
    );
    assert_eq!(support::error_of(&unknown).0, -33004);
    d.stop();
}

#[test]
fn edited_deleted_failed_and_interrupted_files() {
    let Some(w) = World::with_git("verify effects") else {
        return;
    };
    w.repo(&[
        ("b.txt", "one\ntwo\n"),
        ("c.txt", "keep\n"),
        ("d.txt", "x\n"),
    ]);
    let (file, _) = w.session(json!([
        user("go"),
        done("w1", "write", json!({"path": "a.txt", "content": "alpha\nbeta\n"})),
        done("w2", "write", json!({"path": "gone.txt", "content": "soon gone\n"})),
        call("e1", "edit", json!({"path": "c.txt", "edits": [{"oldText": "nope", "newText": "yes"}]})),
        json!({"op": "result", "id": "e1", "name": "edit", "isError": true,
               "text": "Could not find the exact text in c.txt. The old text must match exactly including all whitespace and newlines."}),
        call("e2", "edit", json!({"path": "d.txt", "edits": [{"oldText": "x", "newText": "y"}]})),
    ]));
    // a.txt edited after the session, gone.txt deleted, d.txt half-way (nothing applied).
    w.put("a.txt", "alpha\nBETA\ngamma\n");
    let (code, report, _) = w.verify(&file, &[], &[("ANTHROPIC_API_KEY", "sk-env-secret")]);
    assert_eq!(code, 8, "{report:#}");
    assert_eq!(report["attention"], true);
    let changed = one(&report, "changedSince");
    assert_eq!(changed["status"], "warn");
    assert_eq!(changed["path"], w.path("a.txt"));
    assert_eq!(
        changed["evidence"]["diff"],
        json!({"firstChangedLine": 2, "linesRemoved": 1, "linesAdded": 2})
    );
    let missing = one(&report, "missingFile");
    assert_eq!(missing["status"], "fail");
    assert_eq!(missing["path"], w.path("gone.txt"));
    let failed = one(&report, "failedTool");
    assert_eq!(failed["status"], "warn");
    assert_eq!(failed["toolCallId"], "e1");
    assert!(message(failed).contains("Could not find the exact text"));
    let interrupted = one(&report, "interrupted");
    assert_eq!(interrupted["status"], "warn");
    assert_eq!(interrupted["toolCallId"], "e2");
    // The human lines name the entry and the tool call of each finding.
    let human = w.verify_command(&file, &[], &[]);
    let text = String::from_utf8_lossy(&human.stdout);
    for (kind, call) in [("failedTool", "e1"), ("interrupted", "e2")] {
        let entry = one(&report, kind)["entryId"].as_str().unwrap().to_owned();
        assert!(
            text.lines()
                .any(|l| l.contains(kind) && l.ends_with(&format!("[{entry} {call}]"))),
            "{text}"
        );
    }
    assert_eq!(interrupted["evidence"]["appliedNow"], false);
    // Credentials from the environment: named, never shown.
    let cred = one(&report, "credentials");
    assert_eq!(cred["status"], "ok");
    assert_eq!(cred["evidence"]["envVarsSet"], json!(["ANTHROPIC_API_KEY"]));
    assert!(!report.to_string().contains("sk-env-secret"));

    // The interrupted edit's change on disk after all: said so.
    w.put("d.txt", "y\n");
    let (_, report, _) = w.verify(&file, &[], &[]);
    assert_eq!(one(&report, "interrupted")["evidence"]["appliedNow"], true);
    // No credential anywhere: fail.
    let cred = one(&report, "credentials");
    assert_eq!(cred["status"], "fail", "{cred:#}");
    assert_eq!(cred["evidence"]["authFileExists"], false);
    // The message says what the evidence says: the auth file is missing, not without an entry.
    let said = message(cred);
    assert!(said.ends_with("auth.json does not exist"), "{said}");
}

#[test]
fn a_fork_before_an_edit_whose_effect_is_on_disk() {
    let Some(w) = World::with_git("verify fork") else {
        return;
    };
    w.repo(&[("lib.rs", "fn old() {}\n")]);
    let (file, marks) = w.session(json!([
        user("start"),
        json!({"op": "assistant", "text": "ready"}),
        json!({"op": "mark", "name": "fork"}),
        user("rename it"),
        done(
            "e1",
            "edit",
            json!({"path": "lib.rs", "edits": [{"oldText": "fn old()", "newText": "fn renamed()"}]})
        ),
        json!({"op": "assistant", "text": "renamed"}),
        json!({"op": "mark", "name": "edited"}),
        json!({"op": "branch", "to": "fork"}),
        user("do something else"),
        json!({"op": "assistant", "text": "sure"}),
    ]));
    w.put("lib.rs", "fn renamed() {}\n");
    let (code, report, _) = w.verify(&file, &[], &[]);
    assert_eq!(code, 8);
    let other = one(&report, "otherBranchEffect");
    assert_eq!(other["status"], "warn");
    assert_eq!(other["toolCallId"], "e1");
    assert_eq!(other["path"], w.path("lib.rs"));
    assert!(of_kind(&report, "fileEffect").is_empty());
    // On the edit's own branch the same file is simply as the edit left it.
    let edited = marks["edited"].as_str().unwrap();
    let (_, report, _) = w.verify(&file, &["--leaf", edited], &[]);
    assert_eq!(report["leafId"], edited);
    assert!(
        of_kind(&report, "otherBranchEffect").is_empty(),
        "{report:#}"
    );
    assert_eq!(one(&report, "fileEffect")["status"], "ok");
}

#[test]
fn a_summary_that_claims_a_file_that_was_never_changed() {
    let Some(w) = World::with_git("verify summary") else {
        return;
    };
    w.repo(&[("never.txt", "untouched\n"), ("real.txt", "v1\n")]);
    let (file, _) = w.session(json!([
        user("start"),
        done("e1", "edit", json!({"path": "real.txt", "edits": [{"oldText": "v1", "newText": "v2"}]})),
        json!({"op": "mark", "name": "kept"}),
        user("more"),
        json!({"op": "compaction", "firstKept": "kept",
               "summary": "Did things.\n\n<modified-files>\nnever.txt\nreal.txt\n</modified-files>"}),
        user("continue"),
    ]));
    w.put("real.txt", "v2\n");
    let (_, report, _) = w.verify(&file, &[], &[]);
    let claims = of_kind(&report, "summaryClaim");
    assert_eq!(claims.len(), 2, "{report:#}");
    assert_eq!(claims[0]["path"], w.path("never.txt"));
    assert_eq!(claims[0]["status"], "warn");
    assert_eq!(claims[1]["path"], w.path("real.txt"));
    assert_eq!(claims[1]["status"], "ok");
}

#[test]
fn missing_programs_and_background_processes() {
    let Some(w) = World::new("verify programs") else {
        return;
    };
    let (file, _) = w.session(json!([
        user("start"),
        done(
            "b1",
            "bash",
            json!({"command": "FOO=1 sessiond-no-such-program --x && echo ok"})
        ),
        done(
            "b2",
            "bash",
            json!({"command": "nohup python3 -m http.server 8000 > log 2>&1 &"})
        ),
    ]));
    let (code, report, _) = w.verify(&file, &[], &[]);
    assert_eq!(code, 8);
    let missing: Vec<&Value> = of_kind(&report, "tool")
        .into_iter()
        .filter(|f| f["status"] == "warn")
        .collect();
    assert_eq!(missing.len(), 1, "{report:#}");
    assert_eq!(
        missing[0]["evidence"]["program"],
        "sessiond-no-such-program"
    );
    assert_eq!(missing[0]["toolCallId"], "b1");
    let process = one(&report, "process");
    assert_eq!(process["status"], "warn");
    assert_eq!(process["toolCallId"], "b2");
}

#[test]
fn no_git_and_no_working_directory() {
    let Some(w) = World::new("verify no git") else {
        return;
    };
    let (file, _) = w.session(json!([
        user("start"),
        done(
            "w1",
            "write",
            json!({"path": "a.txt", "content": "alpha\n"})
        ),
    ]));
    w.put("a.txt", "alpha\n");
    let (two, _) = w.session(json!([
        user("start"),
        done("w1", "write", json!({"path": "a.txt", "content": "a\n"})),
        done(
            "w2",
            "write",
            json!({"path": "sub/b.txt", "content": "b\n"})
        ),
        done(
            "w3",
            "write",
            json!({"path": "/elsewhere/c.txt", "content": "c\n"})
        ),
    ]));
    // An empty PATH: git cannot be found; a warn, not a crash.
    let empty = w.root.join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let (_, report, _) = w.verify(&file, &[], &[("PATH", empty.to_str().unwrap())]);
    let git = one(&report, "git");
    assert_eq!(git["status"], "warn");
    assert!(message(git).starts_with("git not available"));
    assert_eq!(one(&report, "fileEffect")["status"], "ok");

    // --cwd elsewhere: said so, and relative paths resolve there.
    let other = w.root.join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let (_, report, _) = w.verify(&file, &["--cwd", other.to_str().unwrap()], &[]);
    let cwd = of_kind(&report, "cwd");
    assert_eq!(cwd.len(), 2, "{report:#}");
    assert_eq!(cwd[1]["status"], "warn");
    assert_eq!(
        one(&report, "missingFile")["path"],
        other.join("a.txt").to_str().unwrap()
    );

    // The session's working directory gone.
    std::fs::remove_dir_all(&w.work).unwrap();
    let (code, report, _) = w.verify(&file, &[], &[]);
    assert_eq!(code, 8);
    let cwd = one(&report, "cwd");
    assert_eq!(cwd["status"], "fail");
    assert_eq!(cwd["path"], w.work.to_str().unwrap());
    assert!(of_kind(&report, "git").is_empty());

    // (A session from another machine.) The missing directory is said once, first: the files
    // under it are counted in that finding, not one FAIL each; a file elsewhere is still
    // checked on its own. The daemon reports the same.
    let (code, report, _) = w.verify(&two, &[], &[]);
    assert_eq!(code, 8);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings[0]["kind"], "cwd", "{report:#}");
    assert_eq!(of_kind(&report, "cwd").len(), 1, "{report:#}");
    assert!(
        message(&findings[0]).contains(
            "the 2 files the session used under it are not checked one by one (2 findings: 2 missingFile)"
        ),
        "{report:#}"
    );
    assert_eq!(
        findings[0]["evidence"]["filesUnder"],
        json!([w.path("a.txt"), w.path("sub/b.txt")])
    );
    let missing = of_kind(&report, "missingFile");
    assert_eq!(missing.len(), 1, "{report:#}");
    assert_eq!(missing[0]["path"], "/elsewhere/c.txt");
    let human = w.verify_command(&two, &[], &[]);
    let text = String::from_utf8_lossy(&human.stdout);
    let fails: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(fails[0].starts_with("FAIL cwd"), "{text}");
    assert_eq!(
        fails
            .iter()
            .filter(|l| l.contains(w.work.to_str().unwrap()))
            .count(),
        1,
        "{text}"
    );
    let agent = w.agent.to_str().unwrap().to_owned();
    let home = w.home.to_str().unwrap().to_owned();
    let (mut d, _) = support::Daemon::start_with(
        &[&w.sessions],
        &support::Spawn {
            env: vec![
                ("PI_CODING_AGENT_DIR", &agent),
                ("HOME", &home),
                ("ANTHROPIC_API_KEY", ""),
                ("ANTHROPIC_AUTH_TOKEN", ""),
                ("ANTHROPIC_OAUTH_TOKEN", ""),
            ],
            ..Default::default()
        },
    );
    let daemon = d.call("session/verifyResume", json!({"path": two}));
    assert_eq!(daemon["findings"], report["findings"], "{daemon:#}");
    d.stop();
}

#[test]
fn files_above_the_text_limit_are_hashed_as_they_stream() {
    let Some(w) = World::new("verify large") else {
        return;
    };
    // Above the 4 MiB text limit: compared by streamed SHA-256 only.
    let big: String = "0123456789abcdef\n".repeat(300_000);
    assert!(big.len() > 4 * 1024 * 1024);
    let (file, _) = w.session(json!([
        user("start"),
        done("w1", "write", json!({"path": "big.txt", "content": big})),
        call("r1", "read", json!({"path": "huge.log"})),
        json!({"op": "result", "id": "r1", "name": "read", "text": "first\nsecond"}),
    ]));
    w.put("big.txt", &big);
    // A 64 MB file the session read whole when it was small.
    {
        use std::io::Write;
        let mut f = std::fs::File::create(w.work.join("huge.log")).unwrap();
        let chunk = vec![b'z'; 1 << 20];
        for _ in 0..64 {
            f.write_all(&chunk).unwrap();
        }
    }
    let (_, report, _) = w.verify(&file, &[], &[]);
    let effect = one(&report, "fileEffect");
    assert_eq!(effect["status"], "ok", "{effect:#}");
    assert_eq!(effect["evidence"]["actualSize"], big.len());
    let stale = one(&report, "staleRead");
    assert_eq!(stale["status"], "warn");
    assert_eq!(stale["evidence"]["actualSize"], 64 << 20);
    assert_eq!(stale["evidence"]["diff"], Value::Null);

    let mut changed = big.clone();
    changed.push('!');
    w.put("big.txt", &changed);
    std::fs::write(w.work.join("huge.log"), "first\nsecond\n").unwrap();
    let (_, report, _) = w.verify(&file, &[], &[]);
    let c = one(&report, "changedSince");
    assert_eq!(c["evidence"]["actualSize"], big.len() + 1);
    assert_eq!(c["evidence"]["expectedSize"], big.len());
    assert_eq!(one(&report, "staleRead")["status"], "ok");
}

/// The human report lists every warn and fail finding and counts the `ok` ones by kind on one
/// line; `--all` lists those too. Checked against the JSON report of the same run.
#[test]
fn the_human_report_counts_ok_findings_unless_asked_for_all() {
    let file = support::repo().join("examples/pi-v3-branched.jsonl");
    let run = |args: &[&str]| {
        let out = Command::new(support::BIN)
            .arg("verify")
            .arg(&file)
            .args(args)
            .output()
            .expect("run sessiond verify");
        assert_eq!(
            out.status.code(),
            Some(8),
            "the example's cwd does not exist here"
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let report: Value = serde_json::from_str(&run(&["--json"])).expect("JSON");
    let count = |s: &str| report["counts"][s].as_u64().expect("count") as usize;
    assert!(count("ok") > 0 && count("fail") > 0, "{}", report["counts"]);

    let short = run(&[]);
    let lines: Vec<&str> = short.lines().collect();
    let listed = |prefix: &str| lines.iter().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(listed("FAIL "), count("fail"), "{short}");
    assert_eq!(listed("WARN "), count("warn"), "{short}");
    let grouped: Vec<&&str> = lines.iter().filter(|l| l.starts_with("ok ")).collect();
    assert_eq!(grouped.len(), 1, "{short}");
    let summed: usize = grouped[0]
        .trim_start_matches("ok")
        .split(" (")
        .next()
        .unwrap_or_default()
        .split(", ")
        .filter_map(|part| part.trim().split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(summed, count("ok"), "{short}");

    let all = run(&["--all"]);
    let ok_lines = all.lines().filter(|l| l.starts_with("ok   ")).count();
    assert_eq!(ok_lines, count("ok"), "{all}");
}

// ---------------------------------------------------------------------------------------------
// A session's repository runs nothing (issue 40): `verify` reads git state with every option
// that executes a program forced off. The sessions here are written by hand (no pi needed).

/// A session file in `dir` whose header names `cwd`, with one write the report can check.
fn hand_session(dir: &Path, cwd: &str) -> PathBuf {
    let file = dir.join("s.jsonl");
    let header = json!({"type": "session", "version": 3, "id": "s1",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd});
    let user = json!({"type": "message", "id": "u1", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "write a", "timestamp": 1}});
    std::fs::write(&file, format!("{header}\n{user}\n")).unwrap();
    file
}

/// `sessiond verify FILE --json` run from `dir` with git's system and global config out of the way.
fn verify_from(dir: &Path, file: &Path, home: &Path) -> (Value, Output) {
    let out = Command::new(support::BIN)
        .arg("verify")
        .arg(file)
        .arg("--json")
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", common::describe(&out)));
    support::assert_schema("session/verifyResume", "result", &report);
    (report, out)
}

/// Plain files that git takes for a repository: `HEAD`, `objects/`, `refs/` and a `config`
/// whose `core.fsmonitor` names a command that leaves `marker` behind.
fn fake_repository(dir: &Path, marker: &Path) {
    std::fs::create_dir_all(dir.join("objects")).unwrap();
    std::fs::create_dir_all(dir.join("refs/heads")).unwrap();
    std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        dir.join("config"),
        format!(
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"touch '{}'; false\"\n",
            marker.display()
        ),
    )
    .unwrap();
}

#[test]
fn a_folder_that_git_takes_for_a_repository_runs_nothing() {
    if !git_available("verify fsmonitor") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let shared = root.join("shared");
    let evil = shared.join("evil");
    let marker = root.join("PWNED");
    fake_repository(&evil, &marker);
    let sessions = root.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    // The proof that the folder can run it: git itself runs the monitor.
    let git = Command::new("git")
        .arg("status")
        .current_dir(&evil)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(marker.exists(), "git ran the monitor: {git:?}");
    std::fs::remove_file(&marker).unwrap();

    // The CLI, run from the shared repository, with the header naming the folder.
    let file = hand_session(&sessions, evil.to_str().unwrap());
    let (report, out) = verify_from(&shared, &file, &home);
    assert!(!marker.exists(), "verify ran the repository's command");
    let git = one(&report, "git");
    assert_eq!(git["status"], "warn", "{report:#}");
    assert_eq!(report["repository"], Value::Null, "{report:#}");
    let human = Command::new(support::BIN)
        .arg("verify")
        .arg(&file)
        .current_dir(&shared)
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(!marker.exists(), "verify ran the repository's command");
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("no git repository inspected"), "{text}");
    drop(out);

    // A relative `cwd` is refused, not taken against the directory verify runs in.
    let file = hand_session(&sessions, "evil");
    let (report, _) = verify_from(&shared, &file, &home);
    assert!(!marker.exists(), "verify ran the repository's command");
    let cwd = one(&report, "cwd");
    assert_eq!(cwd["status"], "fail", "{report:#}");
    assert!(message(cwd).contains("relative"), "{cwd:#}");
    assert_eq!(report["cwd"], Value::Null);
    assert!(of_kind(&report, "git").is_empty(), "{report:#}");

    // The daemon, for the session closed and open.
    let file = hand_session(&sessions, evil.to_str().unwrap());
    let home_s = home.to_str().unwrap().to_owned();
    let (mut d, _) = support::Daemon::start_with(
        &[&sessions],
        &support::Spawn {
            env: vec![
                ("HOME", &home_s),
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ],
            ..Default::default()
        },
    );
    let params = json!({"path": file});
    let closed = d.call("session/verifyResume", params.clone());
    assert!(
        !marker.exists(),
        "session/verifyResume ran the repository's command"
    );
    assert_eq!(closed["repository"], Value::Null, "{closed:#}");
    d.call("session/open", params.clone());
    d.call("session/verifyResume", params);
    assert!(
        !marker.exists(),
        "session/verifyResume ran the repository's command"
    );
    // A relative `cwd` in the request is refused too.
    let relative = d.request("session/verifyResume", json!({"path": file, "cwd": "evil"}));
    assert_eq!(support::error_of(&relative).0, -32602, "{relative:#}");
    d.stop();
}

#[test]
fn a_repository_s_filter_drivers_and_hooks_run_nothing() {
    let Some(w) = World::new_plain() else {
        return;
    };
    if !git_available("verify filters") {
        return;
    }
    w.repo(&[
        ("a.txt", "alpha\n"),
        (".gitattributes", "* filter=x diff=x\n"),
    ]);
    let marker = w.root.join("PWNED");
    let m = marker.display().to_string();
    // Every program a repository's config can name for `git status` and what verify runs.
    for (key, value) in [
        ("filter.x.clean", format!("touch '{m}'; cat")),
        ("filter.x.smudge", format!("touch '{m}'; cat")),
        ("filter.x.required", "true".to_owned()),
        ("filter.\"odd=name\".clean", format!("touch '{m}'; cat")),
        ("diff.x.textconv", format!("touch '{m}'; cat")),
        ("diff.external", format!("touch '{m}'; true")),
        ("core.fsmonitor", format!("touch '{m}'; false")),
        ("core.pager", format!("touch '{m}'; cat")),
    ] {
        w.git(&["config", key, &value]);
    }
    std::fs::write(
        w.work.join(".git/hooks/post-index-change"),
        format!("#!/bin/sh\ntouch '{m}'\n"),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let hook = w.work.join(".git/hooks/post-index-change");
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // A tracked file whose stat no longer matches the index: git compares its content, through
    // the clean filter when one runs.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    w.put("a.txt", "alpha\n");
    let sessions = w.sessions.clone();
    let file = hand_session(&sessions, w.work.to_str().unwrap());
    let (report, _) = verify_from(&w.root, &file, &w.home);
    assert!(
        !marker.exists(),
        "verify ran a program the repository names: {report:#}"
    );
    let git = one(&report, "git");
    assert_eq!(git["status"], "ok", "{report:#}");
    assert_eq!(
        report["repository"],
        json!({"workTree": w.work, "gitDir": w.work.join(".git")}),
        "{report:#}"
    );

    // The long-running filter process variant.
    w.git(&[
        "config",
        "filter.x.process",
        &format!("sh -c \"touch '{m}'\""),
    ]);
    w.put("a.txt", "alpha\n");
    let (report, _) = verify_from(&w.root, &file, &w.home);
    assert!(!marker.exists(), "verify ran a filter process: {report:#}");
    assert_eq!(one(&report, "git")["status"], "ok", "{report:#}");

    let home = w.home.to_str().unwrap().to_owned();
    let (mut d, _) = support::Daemon::start_with(
        &[&sessions],
        &support::Spawn {
            env: vec![
                ("HOME", &home),
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ],
            ..Default::default()
        },
    );
    w.put("a.txt", "alpha\n");
    let r = d.call("session/verifyResume", json!({"path": file}));
    assert!(!marker.exists(), "session/verifyResume ran a filter: {r:#}");
    assert_eq!(r["repository"]["workTree"], json!(w.work), "{r:#}");
    d.stop();
}
