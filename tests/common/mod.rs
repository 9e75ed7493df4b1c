//! Helpers shared by the integration tests: the binary, the pi oracle, session files.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The sessiond binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sessiond"))
}

/// Runs sessiond with `args`; returns (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = bin().args(args).output().expect("spawn sessiond");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// A path inside the crate.
pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The pi oracle directory, or `None` (with a loud note) when it is not configured.
/// Under CI a missing oracle fails the test instead of skipping it.
pub fn oracle_dir(test: &str) -> Option<PathBuf> {
    match std::env::var_os("SESSIOND_ORACLE_DIR") {
        Some(d) => Some(PathBuf::from(d)),
        None if std::env::var_os("CI").is_some() => {
            panic!("{test}: SESSIOND_ORACLE_DIR is not set; the pi oracle is required under CI")
        }
        None => {
            // Straight to the stderr handle: the test harness captures eprintln! output.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPED {test}: set SESSIOND_ORACLE_DIR to a directory holding \
                 node_modules/@earendil-works/pi-coding-agent to compare with pi ***\n"
            );
            None
        }
    }
}

/// Copies a fixture into `dir` and returns the copy's path.
pub fn copy_into(dir: &Path, src: &Path) -> PathBuf {
    let dest = dir.join(src.file_name().expect("file name"));
    std::fs::copy(src, &dest).expect("copy fixture");
    dest
}

/// Writes `lines` (each gets a newline) as a file.
pub fn write_lines(path: &Path, lines: &[&str]) {
    let mut text = String::new();
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    std::fs::write(path, text).expect("write session");
}

/// The `defaultLeafId` that `sessiond tree --json` reports.
pub fn leaf_of(path: &Path) -> String {
    let (code, out, err) = run(&["tree", path.to_str().expect("utf-8 path"), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("tree json");
    v["defaultLeafId"].as_str().unwrap_or("null").to_owned()
}

/// The session files (`*.jsonl`) in a directory.
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    v.sort();
    v
}
