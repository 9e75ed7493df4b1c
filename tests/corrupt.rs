//! Corruption policy tests driven by tests/data/corrupt/expected.json: exit codes, error kind/line/offset,
//! torn tails, lenient reads, usage and I/O errors, and that no command ever changes a session file's bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::{describe, fnv1a, parse_json_output, repo_root, sessiond};
use serde_json::Value;

fn corrupt_dir() -> PathBuf {
    repo_root().join("tests/data/corrupt")
}

/// (file name, expectation) pairs from the manifest, sorted by name.
fn manifest() -> Vec<(String, Value)> {
    let text = std::fs::read(corrupt_dir().join("expected.json")).expect("read expected.json");
    let map: serde_json::Map<String, Value> =
        serde_json::from_slice(&text).expect("expected.json is a JSON object");
    let mut cases: Vec<(String, Value)> = map.into_iter().collect();
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    cases
}

/// The manifest's cases whose expected exit code is `code`: (file name, expectation, path).
fn exiting(code: i64) -> Vec<(String, Value, String)> {
    manifest()
        .into_iter()
        .filter(|(_, want)| want["exit"] == code)
        .map(|(name, want)| {
            let path = path_of(&name);
            (name, want, path)
        })
        .collect()
}

fn path_of(name: &str) -> String {
    format!("tests/data/corrupt/{name}")
}

/// Collects failures and reports them all at once.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }
    fn finish(self, checked: usize) {
        assert!(checked > 0, "the table ran no case");
        assert!(
            self.0.is_empty(),
            "{} problems in {checked} checks:\n- {}",
            self.0.len(),
            self.0.join("\n- ")
        );
    }
}

#[test]
fn check_reports_kind_line_and_offset() {
    let mut failures = Failures::default();
    let cases = manifest();
    for (name, want) in &cases {
        let output = sessiond(["check", &path_of(name), "--json"]);
        let code = want["exit"].as_i64().unwrap();
        failures.check(output.status.code() == Some(code as i32), || {
            format!("check {name}: want exit {code}, got {}", describe(&output))
        });
        let json = match parse_json_output(&output) {
            Ok(json) => json,
            Err(e) => {
                failures.0.push(format!("check {name}: {e}"));
                continue;
            }
        };
        if code == 3 {
            failures.check(json["kind"] == want["kind"], || {
                format!("check {name}: want kind {}, got {json}", want["kind"])
            });
            if want["line"].is_u64() {
                let mut accepted = vec![(want["line"].clone(), want["offset"].clone())];
                for alt in want["alsoAccept"].as_array().into_iter().flatten() {
                    accepted.push((alt["line"].clone(), alt["offset"].clone()));
                }
                let got = (json["line"].clone(), json["offset"].clone());
                failures.check(accepted.contains(&got), || {
                    format!(
                        "check {name}: want (line, offset) in {accepted:?}, got ({}, {}) in {json}",
                        got.0, got.1
                    )
                });
            }
        } else {
            let torn = json
                .get("tornTail")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let want_torn = want["tornTail"].as_bool().unwrap_or(false);
            failures.check(torn == want_torn, || {
                format!("check {name}: want tornTail {want_torn}, got {json}")
            });
        }
    }
    failures.finish(cases.len());
}

#[test]
fn every_command_refuses_a_corrupt_file() {
    let mut failures = Failures::default();
    let mut checked = 0;
    for (_, want, file) in exiting(3) {
        let commands: [Vec<&str>; 4] = [
            vec!["context", &file, "--json"],
            vec!["tree", &file, "--json"],
            vec!["explain", &file, "c0000001", "--json"],
            vec!["check", &file, "--json"],
        ];
        for args in commands {
            checked += 1;
            let output = sessiond(&args);
            failures.check(output.status.code() == Some(3), || {
                format!(
                    "`sessiond {}` ({}): want exit 3, got {}",
                    args.join(" "),
                    want["kind"],
                    describe(&output)
                )
            });
        }
    }
    failures.finish(checked);
}

/// With --allow-corrupt a damaged file opens the way pi opens it: bad lines skipped, orphans as roots.
/// The expected entry ids in the manifest were taken from pi (oracle.mjs entries).
#[test]
fn allow_corrupt_reads_like_pi() {
    let mut failures = Failures::default();
    let mut checked = 0;
    for (name, want) in manifest()
        .iter()
        .filter(|(_, w)| w.get("lenientEntryIds").is_some())
    {
        checked += 1;
        let args = ["context", &path_of(name), "--json", "--allow-corrupt"];
        let output = sessiond(args);
        if !output.status.success() {
            failures.0.push(format!(
                "`sessiond {}`: want success, got {}",
                args.join(" "),
                describe(&output)
            ));
            continue;
        }
        match parse_json_output(&output) {
            Ok(json) => failures.check(json["entryIds"] == want["lenientEntryIds"], || {
                format!(
                    "{name} --allow-corrupt: want entryIds {}, got {}",
                    want["lenientEntryIds"], json["entryIds"]
                )
            }),
            Err(e) => failures.0.push(format!("{name} --allow-corrupt: {e}")),
        }
    }
    failures.finish(checked);
}

/// Each lenient diagnostic says what the read did, and only a line that is not JSON claims pi
/// skips it too: JSON pi keeps is kept when sessiond can place it, and skipped with a warning
/// when it cannot.
#[test]
fn lenient_actions_say_what_was_done() {
    let cases = [
        ("invalid-json-middle.jsonl", "line skipped, as pi does"),
        ("untyped-entry.jsonl", "entry kept, as pi keeps it"),
        ("parent-not-a-string.jsonl", "entry kept, as pi keeps it"),
        (
            "not-an-object.jsonl",
            "line skipped; pi keeps this JSON as an entry, so its answers may differ here",
        ),
    ];
    for (name, action) in cases {
        let output = sessiond(["context", &path_of(name), "--json", "--allow-corrupt"]);
        let json = parse_json_output(&output).unwrap_or_else(|e| panic!("{name}: {e}"));
        let actions: Vec<&str> = json["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["corruption"]["line"] == 3)
            .map(|d| d["action"].as_str().unwrap())
            .collect();
        assert_eq!(actions, [action], "{name}: {}", json["diagnostics"]);
    }
}

/// Torn tails, a complete last line without newline and blank lines are not corruption: every command works.
#[test]
fn torn_tail_and_blank_lines_open_normally() {
    let mut failures = Failures::default();
    let mut checked = 0;
    for (name, want, file) in exiting(0) {
        checked += 1;
        let output = sessiond(["context", &file, "--json"]);
        match parse_json_output(&output) {
            Ok(json) if output.status.success() => {
                failures.check(json["entryIds"] == want["contextEntryIds"], || {
                    format!(
                        "context {name}: want entryIds {}, got {}",
                        want["contextEntryIds"], json["entryIds"]
                    )
                })
            }
            Ok(_) => failures
                .0
                .push(format!("context {name}: {}", describe(&output))),
            Err(e) => failures
                .0
                .push(format!("context {name}: {e} ({})", describe(&output))),
        }
        for args in [
            vec!["tree", &file, "--json"],
            vec!["explain", &file, "c0000001", "--json"],
        ] {
            checked += 1;
            let output = sessiond(&args);
            failures.check(
                output.status.success() && parse_json_output(&output).is_ok(),
                || {
                    format!(
                        "`sessiond {}`: want success with JSON, got {}",
                        args.join(" "),
                        describe(&output)
                    )
                },
            );
        }
    }
    failures.finish(checked);
}

/// No command, with or without --allow-corrupt, changes the bytes of any file it reads (pi's own loader
/// appends a newline to a torn file; sessiond must not).
#[test]
fn no_command_changes_file_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut sources: Vec<PathBuf> = Vec::new();
    for dir in ["tests/data/corrupt", "tests/data/synthetic"] {
        for entry in std::fs::read_dir(repo_root().join(dir)).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                sources.push(path);
            }
        }
    }
    sources.sort();
    let mut failures = Failures::default();
    let mut checked = 0;
    for (i, source) in sources.iter().enumerate() {
        let copy = tmp.path().join(format!(
            "{i:03}-{}",
            source.file_name().unwrap().to_string_lossy()
        ));
        std::fs::copy(source, &copy).expect("copy session file");
        let before = std::fs::read(&copy).expect("read copy");
        let file = copy.to_string_lossy().into_owned();
        let first_id = first_entry_id(&before).unwrap_or_else(|| "00000002".to_string());
        for lenient in [false, true] {
            let mut commands: Vec<Vec<&str>> = vec![
                vec!["context", &file, "--json"],
                vec!["tree", &file, "--json"],
                vec!["explain", &file, &first_id, "--json"],
                vec!["compact", &file, "--dry-run", "--json"],
            ];
            if lenient {
                for args in &mut commands {
                    args.push("--allow-corrupt");
                }
            } else {
                // `check` reports corruption itself; it has no lenient mode.
                commands.push(vec!["check", &file, "--json"]);
            }
            for args in commands {
                checked += 1;
                let output = sessiond(&args);
                failures.check(output.status.code().is_some(), || {
                    format!("`sessiond {}` was killed by a signal", args.join(" "))
                });
                // A usage error would mean the command never read the file at all.
                failures.check(
                    !String::from_utf8_lossy(&output.stderr).contains("Usage:"),
                    || {
                        format!(
                            "`sessiond {}` is a usage error: {}",
                            args.join(" "),
                            describe(&output)
                        )
                    },
                );
                let after = std::fs::read(&copy).expect("read copy after");
                if after != before {
                    failures.0.push(format!(
                        "`sessiond {}` changed {}: fnv {:016x} ({} bytes) -> {:016x} ({} bytes)",
                        args.join(" "),
                        source.display(),
                        fnv1a(&before),
                        before.len(),
                        fnv1a(&after),
                        after.len()
                    ));
                    std::fs::write(&copy, &before).expect("restore copy");
                }
            }
        }
    }
    let leftovers: Vec<String> = std::fs::read_dir(tmp.path())
        .expect("read tempdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !sources
                .iter()
                .enumerate()
                .any(|(i, s)| *n == format!("{i:03}-{}", s.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    failures.check(leftovers.is_empty(), || {
        format!("commands left new files next to the sessions: {leftovers:?}")
    });
    failures.finish(checked);
}

/// The id of the first entry after the header, if it has one (version 1 files do not).
fn first_entry_id(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .filter_map(|l| common::parse_json(l.as_bytes()).ok())
        .find(|v| v["type"] != "session")
        .and_then(|v| v["id"].as_str().map(str::to_string))
}

#[test]
fn usage_and_io_errors_exit_2() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp
        .path()
        .join("no-such-session.jsonl")
        .to_string_lossy()
        .into_owned();
    let directory = tmp.path().to_string_lossy().into_owned();
    let clean = "tests/data/synthetic/branches-labels.jsonl";
    let cases: Vec<Vec<&str>> = vec![
        vec!["check", &missing, "--json"],
        vec!["context", &missing, "--json"],
        vec!["tree", &missing, "--json"],
        vec!["explain", &missing, "b2000001", "--json"],
        vec!["check", &directory, "--json"],
        vec!["context", &directory, "--json"],
        vec!["tree", &directory, "--json"],
        vec!["context", clean, "--leaf", "ffffffff", "--json"],
        vec![
            "context",
            clean,
            "--leaf",
            "ffffffff",
            "--json",
            "--allow-corrupt",
        ],
        vec!["explain", clean, "b2000001", "--leaf", "ffffffff", "--json"],
        vec!["context"],
        vec!["check"],
        vec!["no-such-command"],
    ];
    let mut failures = Failures::default();
    for args in &cases {
        let output = sessiond(args);
        failures.check(output.status.code() == Some(2), || {
            format!(
                "`sessiond {}`: want exit 2, got {}",
                args.join(" "),
                describe(&output)
            )
        });
    }
    failures.finish(cases.len());
}

/// Sanity check of the manifest itself: every listed file exists and every offset is the start of its line.
#[test]
fn manifest_offsets_are_line_starts() {
    for (name, want) in manifest() {
        let bytes =
            std::fs::read(corrupt_dir().join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut points = vec![(want["line"].clone(), want["offset"].clone())];
        for alt in want["alsoAccept"].as_array().into_iter().flatten() {
            points.push((alt["line"].clone(), alt["offset"].clone()));
        }
        for (line, offset) in points {
            let (Some(line), Some(offset)) = (line.as_u64(), offset.as_u64()) else {
                continue;
            };
            assert_eq!(
                line_start(&bytes, line),
                Some(offset),
                "{name}: offset of line {line}"
            );
        }
    }
}

fn line_start(bytes: &[u8], line: u64) -> Option<u64> {
    if line == 1 {
        return Some(0);
    }
    let mut seen = 1;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' {
            seen += 1;
            if seen == line {
                return Some(i as u64 + 1);
            }
        }
    }
    None
}

/// A reader that goes away (`sessiond context FILE | head -1`) is not an error: every output
/// form exits 0 quietly once stdout is closed.
#[test]
fn a_closed_stdout_exits_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let file = repo_root().join("examples/pi-v1-large-session.jsonl");
    for args in [
        vec!["context"],
        vec!["context", "--json"],
        vec!["tree"],
        vec!["tree", "--json"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .args(&args)
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sessiond");
        let mut first = [0u8; 64];
        let mut stdout = child.stdout.take().expect("stdout");
        stdout.read_exact(&mut first).expect("some output");
        drop(stdout);
        let out = child.wait_with_output().expect("wait");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", describe(&out));
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// With `--json`, read commands also print their error on stdout, in the write commands' shape.
#[test]
fn json_errors_name_kind_line_and_id() {
    let corrupt = path_of("invalid-json-middle.jsonl");
    let out = sessiond(["context", corrupt.as_str(), "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON error on stdout");
    assert_eq!(v["error"]["kind"], "corrupt");
    assert_eq!(v["error"]["corruption"]["kind"], "invalidJson");
    assert_eq!(v["error"]["corruption"]["line"], 3);

    let clean = repo_root().join("examples/pi-v3-branched.jsonl");
    let clean = clean.to_str().expect("utf-8 path");
    let out = sessiond(["explain", clean, "nope", "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON error on stdout");
    assert_eq!(v["error"]["kind"], "unknownEntry");
    assert_eq!(v["error"]["id"], "nope");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown entry id nope"));
}
