//! The Codex corpus for the tests that read real rollouts: the real Codex CLIs (installed by
//! `scripts/codex-deps.sh`) run `tests/codex/corpus.mjs` against the scripted Responses API
//! server, once per test binary, or `SESSIOND_CODEX_CORPUS=DIR` names a corpus already made.
//! Without the install (or Node) a test skips loudly, and fails under `CI`.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the corpus may take (its own deadline is 5 minutes).
const CORPUS_TIMEOUT: Duration = Duration::from_secs(6 * 60);

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Skips the test loudly (fails it under `CI`).
pub fn skip(test: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}");
    }
    eprintln!();
    eprintln!("{}", "!".repeat(90));
    eprintln!("!!! SKIPPED {test}: {why}");
    eprintln!("{}", "!".repeat(90));
    eprintln!();
}

/// The Codex install, as corpus.mjs finds it.
pub fn codex_dir() -> PathBuf {
    match std::env::var_os("SESSIOND_CODEX_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => repo().join(".tools/codex"),
    }
}

pub const BIN: &str =
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";

/// Runs a command to its end, killing it through its own handle when it outlives `timeout`.
pub fn run_bounded(mut cmd: Command, timeout: Duration, what: &str) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut b);
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
        std::thread::sleep(Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The corpus: made now into a temporary directory, or the one `SESSIOND_CODEX_CORPUS` names.
/// `None` when it cannot be made here (the test is skipped, or fails under CI).
fn make_corpus() -> Option<(PathBuf, Option<tempfile::TempDir>)> {
    if let Some(dir) = std::env::var_os("SESSIOND_CODEX_CORPUS").filter(|d| !d.is_empty()) {
        return Some((PathBuf::from(dir), None));
    }
    let dir = codex_dir();
    if !dir.join(BIN).exists() {
        skip(
            "codex referee",
            &format!(
                "Codex is not installed at {} (run scripts/codex-deps.sh, or set SESSIOND_CODEX_DIR)",
                dir.display()
            ),
        );
        return None;
    }
    if Command::new("node").arg("--version").output().is_err() {
        skip(
            "codex referee",
            "node is not on PATH (tests/codex/corpus.mjs needs it)",
        );
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("corpus");
    let mut cmd = Command::new("node");
    cmd.arg(repo().join("tests/codex/corpus.mjs"))
        .arg(&out)
        .env("SESSIOND_CODEX_DIR", &dir);
    let run = run_bounded(cmd, CORPUS_TIMEOUT, "tests/codex/corpus.mjs");
    assert!(
        run.status.success(),
        "the corpus failed: {}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    Some((out, Some(tmp)))
}

/// The corpus, made once per test binary (kept until the binary ends). `None`: skipped.
pub fn corpus() -> Option<&'static Path> {
    static CORPUS: std::sync::OnceLock<Option<(PathBuf, Option<tempfile::TempDir>)>> =
        std::sync::OnceLock::new();
    CORPUS
        .get_or_init(make_corpus)
        .as_ref()
        .map(|(p, _)| p.as_path())
}
