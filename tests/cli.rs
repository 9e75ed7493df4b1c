//! The command line as a user meets it: the exit-code table as `--help` prints it and the
//! README repeats it, and the failing inputs of `tests/data/cases/` (pi 1.6.0's answers beside
//! them) read, checked and compacted through the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{describe, repo_root, sessiond};

/// The `Exit codes: …` line of `sessiond --help`.
fn exit_codes_line() -> String {
    let output = sessiond(["--help"]);
    assert!(output.status.success(), "{}", describe(&output));
    let help = String::from_utf8(output.stdout).expect("utf-8 help");
    help.lines()
        .find(|l| l.starts_with("Exit codes: "))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no exit codes in --help:\n{help}"))
}

#[test]
fn help_and_readme_print_the_one_exit_code_table() {
    let line = exit_codes_line();
    for code in [
        "0 ok",
        "2 usage",
        "3 corrupt",
        "4 conflict",
        "5 retention",
        "6 pi",
        "7 busy",
    ] {
        assert!(line.contains(code), "{code:?} missing from {line}");
    }
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    assert!(
        readme.lines().any(|l| l == line),
        "README.md must hold the exit codes exactly as `sessiond --help` prints them:\n{line}"
    );
    for sub in ["context", "check", "compact", "label", "salvage"] {
        let output = sessiond([sub, "--help"]);
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(help.lines().any(|l| l == line), "{sub} --help:\n{help}");
    }
}
