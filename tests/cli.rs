//! The command line as a user meets it: the exit-code table as `--help` prints it and the
//! README repeats it, and the failing inputs of `tests/data/cases/` (pi 1.6.0's answers beside
//! them) read, checked and compacted through the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{describe, json_eq, repo_root, sessiond, sessiond_exits};
use serde_json::{Value, json};

/// The `Exit codes:` block of `sessiond ARGS --help`: the line and the indented lines after it.
fn exit_codes(args: &[&str]) -> String {
    let mut argv = args.to_vec();
    argv.push("--help");
    let output = sessiond(&argv);
    assert!(output.status.success(), "{}", describe(&output));
    let help = String::from_utf8(output.stdout).expect("utf-8 help");
    let block: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Exit codes:")
        .take_while(|l| *l == "Exit codes:" || l.starts_with("  "))
        .collect();
    assert!(!block.is_empty(), "no exit codes in {argv:?}:\n{help}");
    block.join("\n")
}

/// The codes (`0`, `2`, ...) of an `Exit codes:` block.
fn codes(block: &str) -> Vec<String> {
    block
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn help_and_readme_print_the_one_exit_code_table() {
    let all = exit_codes(&[]);
    assert_eq!(
        codes(&all),
        ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"],
        "{all}"
    );
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    assert!(
        readme.contains(&format!("```text\n{all}\n```")),
        "README.md must hold the exit codes exactly as `sessiond --help` prints them:\n{all}"
    );
    // Each command lists the codes it can end with, worded for it: only the writes that take
    // --expected-leaf mention it; only compact has 5 and 6; only serve has 1.
    let want: &[(&[&str], &[&str])] = &[
        (&["context"], &["0", "2", "3", "7"]),
        (&["tree"], &["0", "2", "3", "7"]),
        (&["explain"], &["0", "2", "3", "7"]),
        (&["diff"], &["0", "2", "3", "7"]),
        (&["graph"], &["0", "2", "3", "7"]),
        (&["check"], &["0", "2", "3", "7"]),
        (&["fork"], &["0", "2", "3", "4", "7", "10"]),
        (&["salvage"], &["0", "2", "3", "4", "7", "10"]),
        (&["label"], &["0", "2", "3", "4", "7", "10"]),
        (&["name"], &["0", "2", "3", "4", "7", "10"]),
        (&["branch"], &["0", "2", "3", "4", "7", "10"]),
        (&["append"], &["0", "2", "3", "4", "7", "10"]),
        (
            &["compact"],
            &["0", "2", "3", "4", "5", "6", "7", "9", "10"],
        ),
        (&["verify"], &["0", "2", "3", "7", "8"]),
        (&["rewind"], &["0", "2", "3", "4", "7", "10", "11"]),
        (&["export"], &["0", "2", "3", "7"]),
        (&["search"], &["0", "2"]),
        (&["serve"], &["0", "1"]),
        (&["completions"], &["0", "2"]),
        (&["man"], &["0", "2"]),
    ];
    for (args, want) in want {
        let block = exit_codes(args);
        assert_eq!(codes(&block), *want, "{args:?}:\n{block}");
        let fences = matches!(args[0], "label" | "name" | "branch" | "append" | "compact");
        assert_eq!(
            block.contains("--expected-leaf"),
            fences,
            "{args:?}:\n{block}"
        );
    }
}

/// The README's command table has one row per subcommand, no more and no fewer: its first
/// column holds exactly the subcommands clap offers, but `help`.
#[test]
fn the_readme_table_names_every_command() {
    use clap::CommandFactory;
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let table: Vec<String> = readme
        .split("## Commands")
        .nth(1)
        .expect("a Commands section")
        .lines()
        .skip_while(|l| !l.starts_with("| command |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.split('|')
                .nth(1)
                .expect("a first column")
                .trim()
                .trim_matches('`')
                .to_owned()
        })
        .collect();
    let mut commands: Vec<String> = sessiond::cli::Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .filter(|n| n != "help")
        .collect();
    let mut sorted = table.clone();
    sorted.sort();
    commands.sort();
    assert_eq!(sorted, commands, "README.md's command table: {table:?}");
}

/// The README stays a short user's guide: under 20,000 bytes, with room left, since the
/// benchmark rewrites its performance table and every new command adds a row.
#[test]
fn the_readme_stays_under_20000_bytes() {
    let size = std::fs::metadata(repo_root().join("README.md"))
        .expect("README.md")
        .len();
    assert!(
        size < 20_000,
        "README.md is {size} bytes; keep it under 20,000 (details belong in docs/)"
    );
}

/// Every command that appends to a session requires --expected-leaf (compact too, unless it
/// only plans with --dry-run); fork and salvage write new files and have no such flag.
#[test]
fn every_append_requires_the_expected_leaf_and_says_so() {
    let file = repo_root().join("examples/pi-v3-branched.jsonl");
    let file = file.to_str().expect("utf-8 path");
    let runs: &[&[&str]] = &[
        &["label", file, "00247798", "x"],
        &["label", file, "00247798", "--clear"],
        &["name", file, "x"],
        &["branch", file, "00247798", "--summary", "s"],
        &[
            "append",
            file,
            "--entry",
            r#"{"type":"custom","customType":"x"}"#,
        ],
        &["compact", file],
    ];
    for args in runs {
        let output = sessiond_exits(args, 2);
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.contains("--expected-leaf <ID>"), "{args:?}: {err}");
        let help = sessiond([args[0], "--help"]);
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(help.contains("resume leaf"), "{args:?} --help:\n{help}");
    }
    // A dry run writes nothing and needs no view.
    let output = sessiond(["compact", file, "--dry-run"]);
    assert!(output.status.success(), "{}", describe(&output));
    for sub in ["fork", "salvage"] {
        let help = sessiond([sub, "--help"]);
        assert!(!String::from_utf8_lossy(&help.stdout).contains("expected-leaf"));
    }
    // Setting and clearing a label are both said: a label given or --clear.
    let output = sessiond_exits(
        &["label", file, "00247798", "--expected-leaf", "610f9c1e"],
        2,
    );
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("(<LABEL> | --clear)"), "{err}");
}

/// A case file and pi's answer `name` beside it.
fn case(file: &str, answer: &str) -> (String, Value) {
    let dir = repo_root().join("tests/data/cases");
    let text = std::fs::read(dir.join(answer)).expect("pi's answer");
    let answer = serde_json::from_slice(&text).expect("pi's answer is JSON");
    (dir.join(file).to_string_lossy().into_owned(), answer)
}

/// stdout as exactly one JSON document.
fn one_document(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            describe(output)
        )
    })
}

const LENIENT: &str = "lenient-missing-parent-duplicate.jsonl";

/// pi compacts a file it reads leniently; so does a dry run with --allow-corrupt, with pi's
/// cut point and tokensBefore. A real compaction still refuses the corrupt file.
#[test]
fn a_lenient_dry_run_compacts_as_pi_and_a_real_compaction_refuses() {
    let (file, pi) = case(
        LENIENT,
        "lenient-missing-parent-duplicate.pi-compact-keep1.json",
    );
    let before = std::fs::read(&file).expect("read");
    let args = [
        "compact",
        &file,
        "--dry-run",
        "--allow-corrupt",
        "--json",
        "--keep-recent-tokens",
        "1",
    ];
    let output = sessiond(args);
    assert!(output.status.success(), "{}", describe(&output));
    let ours = one_document(&output);
    assert_eq!(pi["firstKeptEntryId"], "k5");
    assert_eq!(pi["tokensBefore"], 21);
    for (key, want) in pi.as_object().expect("pi's answer is an object") {
        assert!(
            json_eq(want, &ours[key]),
            "{key}: pi {want}, sessiond {}",
            ours[key]
        );
    }
    assert_eq!(ours["written"], json!(false));

    // Strictly, the file is corrupt: no plan, and no write with or without --allow-corrupt.
    let strict = sessiond(["compact", &file, "--dry-run", "--json"]);
    assert_eq!(strict.status.code(), Some(3), "{}", describe(&strict));
    assert_eq!(one_document(&strict)["error"]["kind"], "corrupt");
    for extra in [&[][..], &["--allow-corrupt"][..]] {
        let mut args = vec![
            "compact",
            &file,
            "--json",
            "--keep-recent-tokens",
            "1",
            "--expected-leaf",
            "k5",
        ];
        args.extend_from_slice(extra);
        let output = sessiond_exits(&args, 3);
        let doc = one_document(&output);
        assert_eq!(doc["error"]["kind"], "corrupt", "{doc}");
        assert_eq!(doc["error"]["corruption"]["line"], 4, "{doc}");
    }
    assert_eq!(
        std::fs::read(&file).expect("read"),
        before,
        "nothing written"
    );
}

/// Read leniently, the case's context is pi's, and each problem names what it is about as a
/// field: the missing parent `k3`, and both lines of the duplicate id `k5` (6, shadowed by 8).
#[test]
fn lenient_diagnostics_carry_the_missing_parent_and_both_duplicate_lines() {
    let (file, pi) = case(LENIENT, "lenient-missing-parent-duplicate.pi-context.json");
    let output = sessiond(["context", &file, "--json", "--allow-corrupt"]);
    assert!(output.status.success(), "{}", describe(&output));
    let ours = one_document(&output);
    for key in ["messages", "thinkingLevel", "model"] {
        assert!(
            json_eq(&pi[key], &ours[key]),
            "{key}: pi {}, sessiond {}",
            pi[key],
            ours[key]
        );
    }
    let corruptions: Vec<&Value> = ours["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| &d["corruption"])
        .collect();
    let of = |kind: &str| {
        corruptions
            .iter()
            .find(|c| c["kind"] == kind)
            .copied()
            .unwrap_or_else(|| panic!("no {kind} among {corruptions:?}"))
    };
    let missing = of("missingParent");
    assert_eq!(missing["id"], "k4");
    assert_eq!(missing["line"], 5);
    assert_eq!(missing["parentId"], "k3");
    let dup = of("duplicateId");
    assert_eq!(dup["id"], "k5");
    assert_eq!((&dup["line"], &dup["shadowedLine"]), (&json!(8), &json!(6)));
    let text = std::fs::read(&file).expect("read");
    let line_start = |n: usize| {
        let at = text
            .split(|&b| b == b'\n')
            .take(n - 1)
            .map(|l| l.len() + 1)
            .sum::<usize>();
        json!(at)
    };
    assert_eq!(
        (&dup["offset"], &dup["shadowedOffset"]),
        (&line_start(8), &line_start(6))
    );
    assert_eq!(of("invalidJson")["line"], 4);

    // Strictly the first problem refuses the file; a duplicate id's message names both lines.
    let strict = sessiond(["check", &file, "--json"]);
    assert_eq!(strict.status.code(), Some(3), "{}", describe(&strict));
    assert_eq!(one_document(&strict)["kind"], "invalidJson");
    let dup_file = repo_root().join("tests/data/corrupt/duplicate-id.jsonl");
    let strict = sessiond(["check", &dup_file.to_string_lossy(), "--json"]);
    let report = one_document(&strict);
    assert_eq!(report["kind"], "duplicateId");
    let message = report["message"].as_str().unwrap_or_default();
    assert!(message.contains("line 3"), "{report}");
}

/// What a successful write says, and the word after `prefix` (`wrote label `) that names what it
/// wrote.
fn wrote(output: &std::process::Output, prefix: &str) -> (String, String) {
    assert!(output.status.success(), "{}", describe(output));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let what = text
        .strip_prefix(prefix)
        .and_then(|t| t.split(' ').next())
        .unwrap_or_else(|| panic!("{text}"))
        .to_owned();
    (text, what)
}

/// A copy of the branched example in a temporary directory.
fn branched_copy(dir: &std::path::Path) -> String {
    let file = dir.join("s.jsonl");
    std::fs::copy(repo_root().join("examples/pi-v3-branched.jsonl"), &file).expect("copy");
    file.to_string_lossy().into_owned()
}

/// The request before the view: a malformed entry or an id that names nothing is reported as
/// what it is, whatever --expected-leaf says; only a valid request meets the fence.
#[test]
fn arguments_are_checked_before_the_fence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = branched_copy(dir.path());
    let before = std::fs::read(&file).expect("read");
    let stale = "de19adb3"; // a leaf, but not the file's last entry (610f9c1e)
    // (command, its arguments after the file, the expected leaf, exit code, error kind, words of
    // the message)
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, i32, &'a str, &'a str);
    let cases: &[Case] = &[
        (
            "append",
            &["--entry", "not json"],
            "x",
            2,
            "invalidEntry",
            "not JSON",
        ),
        (
            "append",
            &["--entry", "not json"],
            stale,
            2,
            "invalidEntry",
            "not JSON",
        ),
        (
            "label",
            &["nope", "x"],
            stale,
            2,
            "unknownEntry",
            "unknown target id nope",
        ),
        (
            "label",
            &["00247798", "x"],
            "x",
            2,
            "unknownEntry",
            "unknown entry id x (expected leaf)",
        ),
        ("name", &["n"], "x", 2, "unknownEntry", "(expected leaf)"),
        (
            "compact",
            &["--leaf", "nope"],
            stale,
            2,
            "unknownEntry",
            "unknown leaf id nope (`sessiond tree",
        ),
        (
            "compact",
            &["--dry-run"],
            "x",
            2,
            "unknownEntry",
            "(expected leaf)",
        ),
        (
            "label",
            &["00247798", "x"],
            stale,
            4,
            "conflict",
            "resume leaf is 610f9c1e",
        ),
        (
            "compact",
            &["--dry-run"],
            stale,
            4,
            "conflict",
            "resume leaf is 610f9c1e",
        ),
    ];
    for &(command, rest, expected, code, kind, words) in cases {
        let mut args = vec![command, file.as_str()];
        args.extend(rest);
        args.extend(["--expected-leaf", expected, "--json"]);
        let output = sessiond_exits(&args, code);
        let doc = one_document(&output);
        assert_eq!(doc["error"]["kind"], kind, "{args:?}: {doc}");
        let message = doc["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{args:?}: {message}");
        assert_eq!(
            std::fs::read(&file).expect("read"),
            before,
            "{args:?} wrote"
        );
    }
}

/// Wherever an entry id is taken a unique prefix does, as in git (a Claude Code uuid by its
/// first block); a prefix of several ids is refused naming a few, with the unknown-entry exit
/// code; an unknown id says where the ids are listed. A write stores the whole id.
#[test]
fn a_unique_id_prefix_names_its_entry() {
    let claude = "tests/data/claude/real/compacted.jsonl";
    let full = "ae800328-172e-4b1c-a40d-ccf52c5420db";
    assert_eq!(
        stdout_of(&["explain", claude, "ae800328"]),
        stdout_of(&["explain", claude, full])
    );
    assert_eq!(
        stdout_of(&["context", BRANCHED, "--leaf", "de19", "--json"]),
        stdout_of(&["context", BRANCHED, "--leaf", "de19adb3", "--json"])
    );
    assert_eq!(
        stdout_of(&["diff", BRANCHED, "de19", "610f9"]),
        stdout_of(&["diff", BRANCHED, "de19adb3", "610f9c1e"])
    );
    let output = sessiond_exits(&["explain", claude, "6", "--json"], 2);
    let doc = one_document(&output);
    assert_eq!(doc["error"]["kind"], "unknownEntry", "{doc}");
    let candidates = doc["error"]["candidates"].as_array().expect("candidates");
    assert_eq!(candidates.len(), 4, "{doc}");
    assert!(
        candidates
            .iter()
            .all(|c| c.as_str().is_some_and(|c| c.starts_with('6')))
    );
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ambiguous entry id (or line:N) 6: 6 ids begin with it: "),
        "{message}"
    );
    let output = sessiond_exits(&["context", BRANCHED, "--leaf", "nope"], 2);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains(&format!(
            "unknown leaf id nope (`sessiond tree {BRANCHED} --full` lists the ids)"
        )),
        "{err}"
    );

    // Writes: the label's target, the fork point and --expected-leaf by prefix.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = branched_copy(dir.path());
    let output = sessiond(["label", &file, "0024", "start", "--expected-leaf", "610f"]);
    let (_, new) = wrote(&output, "wrote label ");
    let text = std::fs::read_to_string(&file).expect("read");
    let line: Value = serde_json::from_str(text.lines().last().expect("a line")).expect("json");
    assert_eq!(
        (line["id"].as_str(), line["targetId"].as_str()),
        (Some(new.as_str()), Some("00247798"))
    );
    let output = sessiond_exits(&["label", &file, "0024", "x", "--expected-leaf", "6"], 2);
    assert!(String::from_utf8_lossy(&output.stderr).contains("ambiguous expected leaf id 6"));
    let forked = |at: &str| {
        let output = sessiond(["fork", &file, at, "--json"]);
        assert!(output.status.success(), "{}", describe(&output));
        one_document(&output)["entryCount"].clone()
    };
    assert_eq!(forked("de19"), forked("de19adb3"));
    // compact: --leaf and --expected-leaf by prefix; a prefix of a stale leaf is a conflict.
    let compact = |leaf: &str, expected: &str| {
        let args = [
            "compact",
            BRANCHED,
            "--dry-run",
            "--leaf",
            leaf,
            "--expected-leaf",
            expected,
            "--keep-recent-tokens",
            "1",
            "--json",
        ];
        let output = sessiond(args);
        let doc = one_document(&output);
        (
            output.status.code(),
            doc["error"]["kind"].clone(),
            doc["leafId"].clone(),
        )
    };
    assert_eq!(
        compact("de19a", "610f9"),
        (Some(0), Value::Null, json!("de19adb3"))
    );
    assert_eq!(
        compact("de19a", "610f9c1e"),
        compact("de19adb3", "610f9c1e")
    );
    assert_eq!(compact("de19a", "de19").1, "conflict");
    assert_eq!(compact("de19a", "6").1, "unknownEntry");
}

/// One name for the leaf every command reads without --leaf, the one the agent resumes from:
/// "resume leaf", in what `tree`, `graph` and `check` print for pi and Claude Code alike and
/// in every command's help; never "current leaf" or "default leaf".
#[test]
fn the_leaf_read_without_leaf_is_the_resume_leaf_everywhere() {
    let claude = "tests/data/claude/real/compacted.jsonl";
    for (file, leaf) in [
        (BRANCHED, "610f9c1e"),
        (claude, "ec228510-5a3b-4462-aad5-e3f6654df41b"),
    ] {
        let tree = stdout_of(&["tree", file]);
        assert!(
            tree.lines()
                .nth(1)
                .is_some_and(|l| l.starts_with(&format!("resume leaf {leaf}: "))),
            "{tree}"
        );
        assert!(
            // A row shows a uuid by its first 8 characters.
            tree.contains(&format!("{} ", &leaf[..8])) && tree.contains("◀ resume leaf"),
            "{tree}"
        );
        let graph = stdout_of(&["graph", file]);
        assert!(
            graph.contains(&format!("at the resume leaf {leaf} (")),
            "{graph}"
        );
        assert!(graph.contains("◀ resume leaf"), "{graph}");
        let svg = stdout_of(&["graph", file, "--svg"]);
        assert!(svg.contains("◀ resume leaf"), "{file}: svg");
        let check = stdout_of(&["check", file]);
        assert!(check.contains(&format!("resume leaf {leaf}")), "{check}");
        for text in [tree, graph, svg, check] {
            assert!(
                !text.contains("current leaf") && !text.contains("default leaf"),
                "{text}"
            );
        }
    }
    for command in [
        "tree", "graph", "context", "explain", "list", "export", "verify", "compact", "label",
        "append", "check", "diff", "fork",
    ] {
        let help = stdout_of(&[command, "--help"]);
        assert!(
            !help.contains("current leaf") && !help.contains("default leaf"),
            "{command} --help:\n{help}"
        );
    }
}

/// The commands that read every format say so in their help and in their man page: FILE names
/// pi, Claude Code and Codex, and `--allow-corrupt` promises nothing only pi does.
#[test]
fn reading_commands_name_every_format_they_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pages = dir.path().join("man1");
    stdout_of(&["man", "--dir", pages.to_str().expect("utf-8")]);
    for command in [
        "tree", "check", "context", "explain", "verify", "graph", "diff", "export",
    ] {
        let help = stdout_of(&[command, "--help"]);
        let page =
            std::fs::read_to_string(pages.join(format!("sessiond-{command}.1"))).expect("man page");
        for text in [&help, &page] {
            assert!(
                text.contains("a pi session, a Claude Code transcript or a Codex rollout"),
                "{command}:\n{text}"
            );
            assert!(
                !text.contains("The pi session file") && !text.contains("the way pi does"),
                "{command}:\n{text}"
            );
        }
    }
}

fn stdout_of(args: &[&str]) -> String {
    let output = sessiond(args);
    assert!(output.status.success(), "{args:?}: {}", describe(&output));
    String::from_utf8(output.stdout).expect("utf-8 output")
}

const BRANCHED: &str = "examples/pi-v3-branched.jsonl";

/// The folded tree fits a screen and keeps what a reader needs: the branch points, every leaf,
/// the resume leaf named once (and said in words at the top), labels and compactions. `--full`
/// prints every entry.
#[test]
fn tree_folds_long_runs_and_names_the_current_leaf() {
    let folded = stdout_of(&["tree", BRANCHED]);
    let lines: Vec<&str> = folded.lines().collect();
    assert!(lines.len() < 30, "{} lines:\n{folded}", lines.len());
    assert!(
        lines[0].starts_with("session d703a1a9") && lines[0].ends_with("1033 entries · 3 leaves"),
        "{folded}"
    );
    assert!(
        lines[1].starts_with("resume leaf 610f9c1e:") && lines[1].contains("--expected-leaf"),
        "{folded}"
    );
    for leaf in ["8a9bb12f", "de19adb3", "610f9c1e"] {
        assert!(folded.contains(leaf), "leaf {leaf} missing:\n{folded}");
    }
    let current: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("◀ resume leaf"))
        .collect();
    assert_eq!(current.len(), 1, "{folded}");
    assert!(current[0].contains("610f9c1e"), "{folded}");
    assert_eq!(folded.matches("◀ leaf").count(), 2, "{folded}");
    // Branch points show their branches; labels and compactions stay.
    for landmark in ["├─ 4c7af0b4", "└─ 12bbdff5", "├─ 92bfec97", "└─ de19adb3"] {
        assert!(folded.contains(landmark), "{landmark} missing:\n{folded}");
    }
    assert!(folded.contains("[before-refactor]"), "{folded}");
    assert!(folded.contains("4909db93 compaction"), "{folded}");
    assert!(folded.contains("entries folded:"), "{folded}");
    assert!(folded.contains("`sessiond tree --full` prints all 1033 entries"));

    let full = stdout_of(&["tree", BRANCHED, "--full"]);
    let rows = full
        .lines()
        .filter(|l| {
            let l = l.trim_start_matches(['│', '├', '└', '─', ' ']);
            l.len() > 9 && l.as_bytes()[..8].iter().all(u8::is_ascii_hexdigit)
        })
        .count();
    assert_eq!(rows, 1033, "{full}");
    assert!(!full.contains("folded"), "{full}");
}

/// Rows line up whatever the type's length, and no row is blank where a message has no text.
#[test]
fn tree_rows_line_up_and_every_message_says_what_it_holds() {
    let full = stdout_of(&["tree", BRANCHED, "--full"]);
    // Top-level rows: `id type preview`; the preview starts in the same column for every type.
    let column = |id: &str| {
        let line = full
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("no row {id}"));
        let after_type = line[9..].find(' ').expect("a type") + 9;
        after_type
            + line[after_type..]
                .find(|c: char| c != ' ')
                .expect("a preview")
    };
    let thinking = full
        .lines()
        .find(|l| l.get(9..30) == Some("thinking_level_change"))
        .expect("a thinking_level_change row at the top level");
    assert_eq!(column(&thinking[..8]), column("00247798"), "{thinking}");
    assert_eq!(column("9fa5bc95"), column("00247798"));
    // c62d6448 is an aborted assistant turn with no content.
    let aborted = full
        .lines()
        .find(|l| l.starts_with("c62d6448"))
        .expect("row");
    assert!(
        aborted.ends_with("(no content, aborted: Request was aborted)"),
        "{aborted}"
    );
    for line in full.lines().skip(2) {
        assert!(
            line.split_whitespace().count() >= 3,
            "a row without a preview: {line:?}"
        );
    }
    // Counts are words: "1 leaf", "1 entry".
    let v1 = stdout_of(&["tree", "examples/pi-v1-large-session.jsonl"]);
    assert!(
        v1.lines().next().is_some_and(|l| l.ends_with("· 1 leaf")),
        "{v1}"
    );
    assert!(v1.contains("1 run of entries folded"), "{v1}");
}

/// `check` names the resume leaf too: the id a write's --expected-leaf must be.
#[test]
fn check_states_the_current_and_the_default_leaf() {
    let output = sessiond(["check", BRANCHED, "--json"]);
    assert!(output.status.success(), "{}", describe(&output));
    let report = one_document(&output);
    assert_eq!(report["currentLeafId"], "610f9c1e", "{report}");
    assert_eq!(report["defaultLeafId"], "610f9c1e", "{report}");
    assert_eq!(
        report["leafIds"],
        json!(["8a9bb12f", "de19adb3", "610f9c1e"]),
        "{report}"
    );
    let human = stdout_of(&["check", BRANCHED]);
    assert!(human.contains("resume leaf 610f9c1e"), "{human}");
    // A write with that leaf goes through.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = branched_copy(dir.path());
    let current = one_document(&sessiond(["check", &file, "--json"]))["currentLeafId"]
        .as_str()
        .expect("resume leaf")
        .to_owned();
    let output = sessiond([
        "label",
        &file,
        "00247798",
        "start",
        "--expected-leaf",
        &current,
    ]);
    // It says what it wrote and the next view; the old view is one entry behind now.
    let (text, new) = wrote(&output, "wrote label ");
    assert_eq!(
        text.trim_end(),
        format!("wrote label {new} · resume leaf {new}")
    );
    let output = sessiond([
        "label",
        &file,
        "00247798",
        "again",
        "--expected-leaf",
        &current,
    ]);
    assert_eq!(output.status.code(), Some(4), "{}", describe(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains(&format!("resume leaf is {new} (1 entry added since)")),
        "{err}"
    );
}

/// Human output writes problems as sentences, never as JSON, in file order (a missing parent,
/// known only once every line is read, among the others by its line).
#[test]
fn human_output_writes_problems_as_sentences() {
    let file = repo_root().join("tests/data/cases").join(LENIENT);
    let file = file.to_str().expect("utf-8 path");
    for sub in ["context", "tree"] {
        let text = stdout_of(&[sub, file, "--allow-corrupt"]);
        let problems: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("problem: "))
            .collect();
        assert_eq!(problems.len(), 3, "{sub}:\n{text}");
        assert!(!text.contains("{\""), "{sub}:\n{text}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("missingParent, entry k4: parent k3")),
            "{problems:?}"
        );
        let lines: Vec<u32> = problems
            .iter()
            .filter_map(|p| {
                p.strip_prefix("problem: corrupt line ")?
                    .split(' ')
                    .next()?
                    .parse()
                    .ok()
            })
            .collect();
        assert_eq!(lines, [4, 5, 8], "{problems:?}");
    }
}

/// "Nothing to compact" says why in numbers (the compaction the context starts at, the tokens
/// since) and which leaves do have something to compact, with the command for each.
#[test]
fn nothing_to_compact_says_why_and_what_else_to_compact() {
    let text = stdout_of(&["compact", BRANCHED, "--dry-run"]);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    assert!(
        first.contains("nothing to compact at leaf 610f9c1e")
            && first.contains("compaction 4909db93")
            && first.contains("7 messages after it hold about 134 tokens")
            && first.contains("fewer than the 20000 recent tokens"),
        "{text}"
    );
    assert!(!text.contains("session too small"), "{text}");
    let rest: Vec<&str> = lines.collect();
    assert_eq!(rest.len(), 3, "{text}");
    for leaf in ["8a9bb12f", "de19adb3"] {
        let hint = format!("sessiond compact {BRANCHED} --leaf {leaf} --dry-run");
        assert!(rest.iter().any(|l| l.ends_with(&hint)), "{hint}:\n{text}");
        // And the hint is right: that leaf has something to compact.
        let plan = one_document(&sessiond([
            "compact",
            BRANCHED,
            "--leaf",
            leaf,
            "--dry-run",
            "--json",
        ]));
        assert_eq!(plan["written"], json!(false), "{plan}");
    }
    // The JSON answer stays the protocol's.
    let doc = one_document(&sessiond(["compact", BRANCHED, "--dry-run", "--json"]));
    assert_eq!(
        doc,
        json!({"nothingToCompact": true, "reason": "nothingBeforeCut"})
    );
}

/// `explain` and `context` speak one vocabulary: every entry `context --json` lists in
/// `entryIds` is "a context entry" to `explain`, every other entry "not a context entry"; an
/// entry without a message says what it adds instead (a setting, or nothing and why).
#[test]
fn explain_and_context_agree_on_every_entry() {
    let context = one_document(&sessiond(["context", BRANCHED, "--json"]));
    let entry_ids: Vec<&str> = context["entryIds"]
        .as_array()
        .expect("entryIds")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let human = stdout_of(&["context", BRANCHED]);
    // The header's count adds up: the entries without a message are named.
    assert!(
        human.contains(
            "\n3 context entries without a message: ce627076 custom, d61a47dd context_edit, \
             610f9c1e thinking_level_change ("
        ),
        "{human}"
    );
    assert!(
        human.starts_with(&format!(
            "session d703a1a9-1b7b-4fb1-b512-c9738b1fe617 · leaf 610f9c1e · 8 messages from {} context entries",
            entry_ids.len()
        )),
        "{human}"
    );
    // Every context entry and a few others (tests/explain.rs checks every entry in-process).
    let others = [
        "00247798", "818a7c7b", "9fa5bc95", "e2afcb90", "de19adb3", "8a9bb12f",
    ];
    let listing = human_context();
    for id in entry_ids.iter().copied().chain(others) {
        let ex = one_document(&sessiond(["explain", BRANCHED, id, "--json"]));
        let listed = entry_ids.contains(&id);
        assert_eq!(ex["contextEntry"], json!(listed), "{ex}");
        let text = ex["text"].as_str().expect("text");
        let human = stdout_of(&["explain", BRANCHED, id]);
        assert_eq!(human.trim_end(), text);
        assert!(!text.contains("never enters"), "{text}");
        if listed {
            assert!(text.contains(": a context entry"), "{text}");
        } else {
            assert!(text.contains(": not a context entry: "), "{text}");
        }
        if id == "610f9c1e" {
            assert_eq!(ex["contributes"], "setting", "{ex}");
            assert!(
                text.ends_with("a context entry that adds no message; it sets the thinking level (high), in effect here"),
                "{text}"
            );
        }
        if ex["inContext"] == json!(true) {
            // Numbered as `context` numbers its messages, from 1.
            let n = ex["messageIndexes"][0].as_u64().expect("index") + 1;
            assert!(text.contains(&format!("as message {n}")), "{text}");
            assert!(
                human_row(&listing, n).contains(id),
                "message {n} is not {id}"
            );
        }
    }
}

fn human_context() -> String {
    stdout_of(&["context", BRANCHED])
}

/// Row `n` of the human context listing.
fn human_row(context: &str, n: u64) -> String {
    context
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{n} ")))
        .unwrap_or_default()
        .to_owned()
}

/// A file that is no pi session (text, binary data, a bare JSON value) is named as such, and
/// salvage is suggested only where there is a header to start from.
#[test]
fn not_a_session_is_named_and_salvage_only_offered_where_it_can_help() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Written a while ago: a young file without a header is one pi is creating (pending).
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).expect("write");
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .and_then(|f| f.set_modified(old))
            .expect("set mtime");
        p.to_string_lossy().into_owned()
    };
    let mut binary: Vec<u8> = (0u8..=255).cycle().take(600).collect();
    binary.retain(|&b| b != b'\n');
    let cases = [
        (
            write("notes.txt", b"this is just a text file"),
            "missingHeader",
        ),
        (write("blob.bin", &binary), "missingHeader"),
        (
            write("lines.txt", b"first line\nsecond line\n"),
            "missingHeader",
        ),
        (write("array.jsonl", b"[1,2]\n"), "missingHeader"),
        (write("empty.jsonl", b""), "emptyFile"),
        (write("young.jsonl", b"{\"type\":\"sess"), "emptyFile"),
    ];
    for (file, kind) in &cases {
        let report = one_document(&sessiond(["check", file, "--json"]));
        assert_eq!(report["kind"], *kind, "{file}: {report}");
        assert_eq!(report["salvageable"], json!(false), "{report}");
        let message = report["message"].as_str().unwrap_or_default();
        if *kind == "missingHeader" {
            assert!(message.starts_with("not a session: line 1"), "{message}");
        }
        for args in [vec!["context", file], vec!["salvage", file]] {
            let output = sessiond_exits(&args, 3);
            let err = String::from_utf8_lossy(&output.stderr);
            assert!(!err.contains("salvage"), "{args:?}: {err}");
        }
    }
    // A JSON object of no format sessiond reads: the refusal names every format and the `type`
    // the line has.
    for (line, seen) in [
        (&b"{\"type\":\"banana\"}\n"[..], r#"with "type": "banana""#),
        (b"{\"type\":7,\"id\":\"a\"}\n", r#"with "type": 7"#),
        (b"{\"id\":\"a\"}\n", r#"without "type""#),
    ] {
        let file = write("other.jsonl", line);
        let report = one_document(&sessiond(["check", &file, "--json"]));
        assert_eq!(report["kind"], "missingHeader", "{report}");
        assert_eq!(report["format"], json!(null), "{report}");
        let message = report["message"].as_str().unwrap_or_default();
        for named in ["pi session header", "Claude Code", "Codex", seen] {
            assert!(message.contains(named), "{named}: {message}");
        }
    }
    let salvage_help = String::from_utf8(sessiond(["salvage", "--help"]).stdout).expect("utf-8");
    assert!(salvage_help.contains("3  not a session (no header line): nothing to salvage"));
    // A corrupt session with a header: the error says what salvage does.
    let corrupt = repo_root().join("tests/data/corrupt/invalid-json-middle.jsonl");
    let corrupt = corrupt.to_str().expect("utf-8 path");
    let output = sessiond(["context", corrupt]);
    assert_eq!(output.status.code(), Some(3));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("invalidJson")
            && err.contains("`sessiond salvage FILE` writes a pi session's readable entries"),
        "{err}"
    );
}

/// `check` offers salvage only for a format sessiond writes, and names the format a corrupt
/// file was read as: a corrupt pi session is salvageable; a corrupt Codex rollout is read only,
/// so the report points to `--allow-corrupt` instead.
#[test]
fn check_offers_salvage_only_for_a_format_sessiond_writes() {
    let pi = repo_root().join("tests/data/corrupt/invalid-json-middle.jsonl");
    let pi = pi.to_str().expect("utf-8 path");
    let report = one_document(&sessiond(["check", pi, "--json"]));
    assert_eq!(
        (&report["format"], &report["salvageable"]),
        (&json!("pi"), &json!(true)),
        "{report}"
    );
    let text = String::from_utf8_lossy(&sessiond_exits(&["check", pi], 3).stdout).into_owned();
    assert!(text.contains("`sessiond salvage FILE` writes"), "{text}");
    let dir = tempfile::tempdir().expect("tempdir");
    let rollout = dir.path().join("rollout-x.jsonl");
    std::fs::write(
        &rollout,
        concat!(
            r#"{"timestamp":"2026-01-01T00:00:00.000Z","ordinal":0,"type":"session_meta","payload":{"id":"t"}}"#,
            "\nnot json\n",
            r#"{"timestamp":"2026-01-01T00:00:01.000Z","ordinal":1,"type":"event_msg","payload":{}}"#,
            "\n",
        ),
    )
    .expect("write");
    let rollout = rollout.to_str().expect("utf-8 path");
    let report = one_document(&sessiond(["check", rollout, "--json"]));
    assert_eq!(report["format"], "codex", "{report}");
    assert_eq!(report["kind"], "invalidJson", "{report}");
    assert_eq!(report["line"], 2, "{report}");
    assert_eq!(report["salvageable"], false, "{report}");
    let text = String::from_utf8_lossy(&sessiond_exits(&["check", rollout], 3).stdout).into_owned();
    assert!(
        text.contains("--allow-corrupt reads it as Codex does") && !text.contains("salvage FILE"),
        "{text}"
    );
}

/// The README's first command: the demo shows the tree folded, the daemon's frames indented,
/// and ends with a fork, a label and a compaction on a temporary copy; the shipped file is
/// never changed.
#[test]
fn the_demo_shows_reads_the_daemon_and_writes_on_a_copy() {
    let example = repo_root().join(BRANCHED);
    let before = std::fs::read(&example).expect("read");
    let output = std::process::Command::new("bash")
        .arg(repo_root().join("scripts/demo.sh"))
        .env("SESSIOND_BIN", env!("CARGO_BIN_EXE_sessiond"))
        .current_dir(repo_root())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run scripts/demo.sh");
    assert!(output.status.success(), "{}", describe(&output));
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() < 250, "{} lines", lines.len());
    assert!(
        lines.iter().all(|l| l.chars().count() <= 180),
        "a line longer than 180 characters:\n{}",
        lines
            .iter()
            .find(|l| l.chars().count() > 180)
            .unwrap_or(&"")
    );
    for part in [
        "$ sessiond tree examples/pi-v3-branched.jsonl",
        "entries folded:",
        "◀ resume leaf",
        "$ sessiond context examples/pi-v3-branched.jsonl",
        "a context entry that adds no message; it sets the thinking level (high)",
        "→ session/open {",
        "← session/contextAt {",
        "$ sessiond fork pi-v3-branched.jsonl 92bfec97",
        "$ sessiond label pi-v3-branched.jsonl 521cf246",
        "wrote label ",
        "wrote compaction entry ",
        "[fork point]",
    ] {
        assert!(
            text.contains(part),
            "{part:?} missing from the demo:\n{text}"
        );
    }
    let end = &text[text
        .rfind("$ sessiond tree pi-v3-branched.jsonl")
        .expect("last tree")..];
    assert!(
        end.lines()
            .any(|l| l.contains("compaction") && l.ends_with("◀ resume leaf")),
        "{end}"
    );
    assert_eq!(std::fs::read(&example).expect("read"), before);
}

/// scripts/rpc.py says what is wrong, never with a Python traceback.
#[test]
fn rpc_py_explains_bad_arguments_and_a_missing_binary() {
    let rpc = repo_root().join("scripts/rpc.py");
    let run = |args: &[&str], bin: &str| {
        std::process::Command::new("python3")
            .arg(&rpc)
            .args(args)
            .env("SESSIOND_BIN", bin)
            .current_dir(repo_root())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run python3 scripts/rpc.py")
    };
    let bin = env!("CARGO_BIN_EXE_sessiond");
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["session/open", "{bad"],
            bin,
            "the params of session/open are not JSON",
        ),
        (&["session/open"], bin, "has no PARAMS_JSON"),
        (
            &["session/open", "3"],
            bin,
            "must be a JSON object or array",
        ),
        (
            &["session/open", "{}"],
            "/nonexistent/sessiond",
            "no sessiond binary at /nonexistent/sessiond",
        ),
    ];
    for (args, bin, words) in cases {
        let output = run(args, bin);
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(words), "{args:?}: {err}");
        assert!(!err.contains("Traceback"), "{args:?}: {err}");
    }
    // A request the daemon refuses: its error is printed, and the exit status says so.
    let output = run(
        &[
            "--root",
            "examples",
            "session/explain",
            r#"{"path":"examples/nope.jsonl","entryId":"x"}"#,
        ],
        bin,
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("-33001"));
}

/// The test command installs nothing outside the repository: pip only ever installs with
/// `--target` into `.tools/`, which git ignores, and never with a cache.
#[test]
fn test_dependencies_install_only_under_the_repository() {
    let mut installs = 0;
    for script in ["scripts/test.sh", "scripts/test-deps.sh"] {
        let text = std::fs::read_to_string(repo_root().join(script)).expect("script");
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            if line.trim_start().starts_with('#') || !line.contains("-m pip install") {
                continue;
            }
            // The command with its continuation lines.
            let mut whole = String::new();
            for l in &lines[n..] {
                whole.push_str(l);
                if !l.trim_end().ends_with('\\') {
                    break;
                }
            }
            installs += 1;
            assert!(
                whole.contains("--target \"$tools/python\"") && whole.contains("--no-cache-dir"),
                "{script}:{}: pip must install into .tools only: {line}",
                n + 1
            );
        }
    }
    assert_eq!(installs, 1, "the one pip install (Neovim) was not found");
    let ignore = std::fs::read_to_string(repo_root().join(".gitignore")).expect(".gitignore");
    // Without a trailing slash, so that a linked `.tools` is ignored too.
    assert!(ignore.lines().any(|l| l == "/.tools"), "{ignore}");
    let test = std::fs::read_to_string(repo_root().join("scripts/test.sh")).expect("test.sh");
    assert!(test.contains("SESSIOND_NVIM=\"$(bash scripts/test-deps.sh)\""));
}

/// The README's commands that install completions and manual pages work as shown in a home
/// where none of their directories exist yet (each line run alone, with `sh -e`).
#[test]
fn the_readme_completion_commands_work_in_a_fresh_home() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let block = readme
        .split("Shell completions")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("the README's completion commands");
    let home = tempfile::tempdir().expect("tempdir");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_sessiond"))
        .parent()
        .expect("bin dir")
        .to_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let output = std::process::Command::new("sh")
            .args(["-ec", line])
            .env("HOME", home.path())
            .env("PATH", &path)
            .output()
            .expect("sh");
        assert!(output.status.success(), "{line}: {}", describe(&output));
    }
    for made in [
        ".local/share/bash-completion/completions/sessiond",
        ".zfunc/_sessiond",
        ".config/fish/completions/sessiond.fish",
        ".local/share/man/man1/sessiond.1",
        ".local/share/man/man1/sessiond-tree.1",
    ] {
        let len = std::fs::metadata(home.path().join(made)).map_or(0, |m| m.len());
        assert!(len > 0, "{made} not written");
    }
}

/// Completions and manual pages come from the command line's definitions: every command and
/// its options are in them, and `man --dir` writes one page per command with its exit codes.
#[test]
fn completions_and_man_pages_cover_every_command() {
    let commands = [
        "context",
        "tree",
        "export",
        "graph",
        "list",
        "search",
        "explain",
        "diff",
        "compact",
        "check",
        "verify",
        "fork",
        "rewind",
        "label",
        "name",
        "branch",
        "append",
        "salvage",
        "archive",
        "restore",
        "completions",
        "man",
        "serve",
    ];
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for word in commands
            .iter()
            .chain(&["expected-leaf", "allow-corrupt", "full"])
        {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    sessiond_exits(&["completions", "tcsh"], 2);

    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH sessiond 1"), "{page}");
    let dir = tempfile::tempdir().expect("tempdir");
    let pages = dir.path().join("man1");
    let listed = stdout_of(&["man", "--dir", pages.to_str().expect("utf-8")]);
    assert_eq!(listed.lines().count(), commands.len() + 1, "{listed}");
    for sub in commands {
        let path = pages.join(format!("sessiond-{sub}.1"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        assert!(text.contains(&format!(".TH sessiond-{sub} 1")), "{text}");
        assert!(text.contains(&format!("sessiond {sub}")), "{text}");
        assert!(text.contains("Exit codes:"), "{sub}: {text}");
    }
    assert!(!pages.join("sessiond-help.1").exists());
}

/// Paths are said as the user gave them: a fork of `s.jsonl`, run beside it, is named without
/// a `./` that the user never typed; errors name the file as given.
#[test]
fn paths_are_said_as_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    branched_copy(dir.path());
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .args(args)
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run sessiond")
    };
    let output = run(&["fork", "s.jsonl", "92bfec97"]);
    let (text, name) = wrote(&output, "wrote ");
    assert!(
        !name.starts_with("./") && name.ends_with(".jsonl"),
        "{text}"
    );
    assert!(dir.path().join(name).is_file(), "{text}");
    let output = run(&["fork", "./s.jsonl", "92bfec97"]);
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("wrote ./"));
    for args in [
        &[
            "label",
            "s.jsonl",
            "nope",
            "x",
            "--expected-leaf",
            "610f9c1e",
        ][..],
        &["compact", "s.jsonl", "--leaf", "nope", "--dry-run"][..],
        &["explain", "s.jsonl", "nope"][..],
    ] {
        let output = run(args);
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.starts_with("sessiond: s.jsonl: "), "{args:?}: {err}");
    }
}

/// A command line clap refuses still gives one JSON document under `--json`.
#[test]
fn usage_errors_under_json_print_a_json_error() {
    for args in [
        &["context", "x.jsonl", "--json", "--bogus"][..],
        &["export", "x.jsonl", "--json", "--format", "pdf"][..],
        &["context", "--json"][..],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["error"]["kind"], "argument", "{args:?}");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            !message.is_empty() && !message.starts_with("error"),
            "{message}"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("error:"),
            "{args:?}"
        );
    }
    // Without --json: clap's message on stderr only.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["context", "x.jsonl", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

/// A `--json` document too long to hold in memory goes to a temporary file until it is
/// complete; when that file cannot be made, the error names the temporary directory, standard
/// output gets the one error document, and a short document (held in memory) is unaffected.
#[test]
fn a_json_document_whose_temporary_file_cannot_be_made_gives_one_error_naming_the_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("long.jsonl");
    let text = "word ".repeat(300_000);
    let lines = [
        json!({"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}),
        json!({"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z",
            "message":{"role":"user","content":text,"timestamp":1}}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, body).unwrap();
    let missing = dir.path().join("no-such-dir");
    let run = |path: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .arg("context")
            .arg(path)
            .arg("--json")
            .env("TMPDIR", &missing)
            .output()
            .unwrap()
    };

    let out = run(&file);
    assert_eq!(out.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["kind"], "io");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("temporary file") && message.contains(&*missing.to_string_lossy()),
        "{message}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&*missing.to_string_lossy()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let short = repo_root().join("examples/pi-v3-branched.jsonl");
    let out = run(&short);
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["messages"].is_array());
}

/// A directory that is not there is named as such: `fork --out` and `salvage --out` into a
/// missing directory (nothing is created), and `list --root` of a file.
#[test]
fn a_missing_or_odd_directory_is_named_for_what_it_is() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = branched_copy(dir.path());
    // A missing --out directory is made, as `man --dir` makes its own, owner-only (0700) with
    // its missing parents: what lands in it is session content.
    for (command, made) in [("fork", "forks/new"), ("salvage", "salvaged")] {
        let out = dir.path().join(made).to_string_lossy().into_owned();
        let mut args = vec![command, file.as_str()];
        if command == "fork" {
            args.push("92bfec97");
        }
        args.extend(["--out", &out]);
        let output = sessiond(&args);
        assert!(output.status.success(), "{args:?}: {}", describe(&output));
        let files = std::fs::read_dir(&out).expect("made").count();
        assert_eq!(files, 1, "{args:?}");
        let out = std::path::Path::new(&out);
        for made in [out, out.parent().expect("parent")] {
            if made == dir.path() {
                continue;
            }
            let mode = std::fs::metadata(made).expect("made").permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", made.display());
        }
    }
    // A file where the directory should be is named for what it is; nothing is made.
    for args in [
        vec!["fork", &file, "92bfec97", "--out", &file],
        vec!["salvage", &file, "--out", &file],
    ] {
        let output = sessiond_exits(&args, 2);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("{file}: not a directory")),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 3);

    let output = sessiond(["list", "--root", &file]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("{file}: not a directory")),
        "{stderr}"
    );
}

/// What a newcomer meets first, said plainly: an empty listing names its roots, a bad `--log`
/// filter and an unknown `--agent` are usage errors naming what is accepted, a fork cannot take
/// its source's own session id, and `restore` says what names a session.
#[test]
fn first_contact_errors_say_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let cache = dir.path().join("cache.json");
    let empty_s = empty.to_string_lossy().into_owned();
    let cache_s = cache.to_string_lossy().into_owned();
    let out = sessiond(["list", "--root", &empty_s, "--cache", &cache_s]);
    assert!(out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.stdout.is_empty() && err.contains("no sessions under") && err.contains("--root DIR"),
        "{}",
        describe(&out)
    );

    // A file the listing skips is named with why (here: empty, and not being written).
    let odd = dir.path().join("odd");
    std::fs::create_dir(&odd).expect("mkdir");
    let blank = odd.join("blank.jsonl");
    std::fs::File::create(&blank)
        .and_then(|f| {
            f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        })
        .expect("an empty file, an hour old");
    let odd_s = odd.to_string_lossy().into_owned();
    let out = sessiond(["list", "--root", &odd_s, "--cache", &cache_s]);
    assert!(out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}: line 1 (byte 0): emptyFile", blank.display()))
            && err.contains("; not listed"),
        "{}",
        describe(&out)
    );

    // A search with nothing to search says so, as the listing does, instead of a bare "0 of 0".
    let index_s = dir.path().join("index").to_string_lossy().into_owned();
    let out = sessiond([
        "search",
        "--root",
        &empty_s,
        "--index-dir",
        &index_s,
        "words",
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("0 of 0 hits")
            && err.contains(&format!("no sessions under {empty_s}"))
            && err.contains("--root DIR"),
        "{}",
        describe(&out)
    );

    let out = sessiond(["check", BRANCHED, "--log", "bogus==="]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a log filter"));

    let out = sessiond(["search", "--root", &empty_s, "--agent", "foo", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("one of pi, claude-code, codex"),
        "{}",
        describe(&out)
    );

    let file = branched_copy(dir.path());
    let before = std::fs::read_dir(dir.path()).expect("ls").count();
    let out = sessiond([
        "fork",
        &file,
        "521cf246",
        "--session-id",
        "d703a1a9-1b7b-4fb1-b512-c9738b1fe617",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the source session's own id"));
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), before);

    // A session from another machine: its working directory is said missing, not its files
    // drifted.
    let out = sessiond(["rewind", BRANCHED, "--to", "521cf246", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not exist or is not a directory"),
        "{}",
        describe(&out)
    );

    let archive = dir.path().join("archive");
    let archive_s = archive.to_string_lossy().into_owned();
    let out = sessiond(["archive", "--root", &empty_s, "--to", &archive_s]);
    assert!(out.status.success(), "{}", describe(&out));
    let out = sessiond(["restore", &archive_s, "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("sessiond list --archive"),
        "{}",
        describe(&out)
    );
}
