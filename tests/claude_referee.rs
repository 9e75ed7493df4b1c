//! The Claude Code referee: the real Claude Code 2.1.197 (installed under the repository by
//! `scripts/claude-deps.sh`) runs the corpus of `tests/claude/corpus.mjs` against the scripted
//! Anthropic Messages server `tests/claude/model-server.mjs`, which records every request; then
//! for every recorded request sessiond's context at the request's leaf, on the transcript as
//! Claude saw it (its first `linesBefore` lines), must equal the request's `messages` after
//! the normalizations of docs/claude-code.md §10 ([`normalize`]); every resumed run must have
//! continued from the leaf [`resume_leaf`] names for the file as the run found it; and every
//! leaf experiment of §6.2 likewise.
//!
//! Without the install (or Node) the referee skips loudly, and fails under `CI`.
//! `SESSIOND_CLAUDE_CORPUS=DIR` reuses a corpus already made (`node tests/claude/corpus.mjs
//! DIR`) instead of running Claude. The hand-made corrupt transcripts of `tests/data/claude/`
//! are checked without any install.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use sessiond::core::tree::{Mode, NodeIdx};
use sessiond::dialect::claude::context::{ContextOptions, context};
use sessiond::dialect::claude::leaf::resume_leaf_sized;
use sessiond::dialect::claude::{Claude, Tree};
use sessiond::js::jsstr;
use sessiond::storage::reader::{FileLines, OpenError, open_session};

/// The benchmarks' Claude Code transcript generator (`gen-session --format claude-code`).
#[path = "../scripts/gen_claude.rs"]
mod gen_claude;

/// How long the corpus may take (its own deadline is 15 minutes).
const CORPUS_TIMEOUT: Duration = Duration::from_secs(16 * 60);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Skips the test loudly (fails it under `CI`).
fn skip(test: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}");
    }
    eprintln!();
    eprintln!("{}", "!".repeat(90));
    eprintln!("!!! SKIPPED {test}: {why}");
    eprintln!("{}", "!".repeat(90));
    eprintln!();
}

/// The installed Claude Code binary, as corpus.mjs finds it.
fn claude_bin() -> PathBuf {
    match std::env::var_os("SESSIOND_CLAUDE_BIN") {
        Some(b) if !b.is_empty() => PathBuf::from(b),
        _ => repo().join(".tools/claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe"),
    }
}

/// Runs a command to its end, killing it through its own handle when it outlives `timeout`.
fn run_bounded(mut cmd: Command, timeout: Duration, what: &str) -> std::process::Output {
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

/// JSON as `JSON.parse` reads it (Claude writes lone surrogates as escapes).
fn parse(bytes: &[u8]) -> Value {
    jsstr::parse_value(bytes).expect("JSON")
}

/// The first `lines` lines of `file`, as Claude saw the file then, in a file of their own.
fn truncated(file: &Path, lines: usize, dir: &Path) -> PathBuf {
    let data = std::fs::read(file).unwrap();
    let mut out = Vec::with_capacity(data.len());
    for line in data.split(|&b| b == b'\n').take(lines) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    let path = dir.join(format!(
        "{}-{lines}.jsonl",
        file.file_stem().unwrap().to_string_lossy()
    ));
    std::fs::write(&path, out).unwrap();
    path
}

/// A transcript opened as a lenient reader opens it (Claude skips what it cannot read).
fn open(path: &Path) -> Tree {
    open_session::<Claude>(path, Mode::Lenient)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .tree
}

const USER_CONTEXT: &str =
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n";
const COMPACT: &str = "Your task is to create a detailed summary";

/// The normalizations of docs/claude-code.md §10, applied to a recorded request's `messages`
/// (`ours` is sessiond's context, which N4 and N5 consult). Returns the normalized messages and
/// the names of the normalizations applied.
///
/// * N1: the userContext block (a text block of `messages[0]` starting "<system-reminder>\nAs
///   you answer the user's questions, …") is removed: added at send time.
/// * N2: every `cache_control` key is removed: added at send time.
/// * N3: in a `/compact` request, the last block of the last message (the compact instruction)
///   is removed, with the `"\n"` the merge appended to the block before it.
/// * N4: a message N1–N3 changed that is left with one plain text block equals that string
///   when sessiond has a string there (Claude turned the string into a block to mark it).
/// * N5: in a subagent's request, `role: "system"` messages sessiond does not have are
///   dropped (attachments computed during the agent's run are sent but not recorded).
fn normalize(
    messages: &[Value],
    kind: &str,
    ours: &[Value],
    subagent: bool,
) -> (Vec<Value>, Vec<&'static str>) {
    let mut msgs = messages.to_vec();
    let mut touched = std::collections::BTreeSet::new();
    let mut applied = Vec::new();
    if let Some(Value::Array(c)) = msgs.first_mut().and_then(|m| m.get_mut("content")) {
        let at = c.iter().position(|b| {
            b["type"] == "text"
                && b["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(USER_CONTEXT))
        });
        if let Some(at) = at {
            c.remove(at);
            touched.insert(0);
            applied.push("N1");
        }
    }
    for (i, m) in msgs.iter_mut().enumerate() {
        if let Some(Value::Array(c)) = m.get_mut("content") {
            for b in c {
                if let Some(o) = b.as_object_mut()
                    && o.remove("cache_control").is_some()
                {
                    touched.insert(i);
                    applied.push("N2");
                }
            }
        }
    }
    if kind == "compact" && !msgs.is_empty() {
        let last = msgs.len() - 1;
        let mut emptied = false;
        if let Some(Value::Array(c)) = msgs[last].get_mut("content")
            && c.last().is_some_and(|b| {
                b["type"] == "text" && b["text"].as_str().is_some_and(|t| t.contains(COMPACT))
            })
        {
            c.pop();
            if let Some(b) = c.last_mut()
                && b["type"] == "text"
                && let Some(t) = b["text"].as_str().and_then(|t| t.strip_suffix('\n'))
            {
                b["text"] = Value::String(t.to_owned());
            }
            touched.insert(last);
            applied.push("N3");
            emptied = c.is_empty();
        }
        if emptied {
            msgs.pop();
        }
    }
    for &i in &touched {
        let Some(m) = msgs.get_mut(i) else { continue };
        let single = match m.get("content") {
            Some(Value::Array(c)) if c.len() == 1 => c[0]
                .as_object()
                .filter(|o| o.len() == 2 && o.get("type") == Some(&json!("text")))
                .and_then(|o| o.get("text").and_then(Value::as_str))
                .map(str::to_owned),
            _ => None,
        };
        if let Some(text) = single
            && ours.get(i).is_some_and(|o| o["content"].is_string())
        {
            m["content"] = Value::String(text);
            applied.push("N4");
        }
    }
    if subagent {
        let have: Vec<&Value> = ours
            .iter()
            .filter(|m| m["role"] == "system")
            .map(|m| &m["content"])
            .collect();
        let before = msgs.len();
        msgs.retain(|m| m["role"] != "system" || have.contains(&&m["content"]));
        applied.extend(std::iter::repeat_n("N5", before - msgs.len()));
    }
    (msgs, applied)
}

/// Where two JSON values first differ (a JSON pointer) and the two sides there.
fn first_difference<'a>(
    a: &'a Value,
    b: &'a Value,
    at: String,
) -> Option<(String, Option<&'a Value>, Option<&'a Value>)> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => first_difference(p, q, format!("{at}/{k}")),
                (p, q) => Some((format!("{at}/{k}"), p, q)),
            })
        }
        (Value::Array(x), Value::Array(y)) => {
            (0..x.len().max(y.len())).find_map(|i| match (x.get(i), y.get(i)) {
                (Some(p), Some(q)) => first_difference(p, q, format!("{at}/{i}")),
                (p, q) => Some((format!("{at}/{i}"), p, q)),
            })
        }
        _ if a == b => None,
        _ => Some((at, Some(a), Some(b))),
    }
}

fn short(v: Option<&Value>) -> String {
    let s = v.map_or("<absent>".to_owned(), |v| {
        jsstr::restore_json(&v.to_string()).into_owned()
    });
    if s.chars().count() > 600 {
        format!("{}…", s.chars().take(600).collect::<String>())
    } else {
        s
    }
}

/// The checks' tally.
#[derive(Default)]
struct Report {
    passed: usize,
    failed: Vec<String>,
    requests: usize,
    resume_leaves: usize,
    experiments: usize,
    prototype_leaves: usize,
}

impl Report {
    fn check(&mut self, ok: bool, what: String, detail: impl FnOnce() -> String) {
        if ok {
            self.passed += 1;
            println!("ok   {what}");
        } else {
            let line = format!("FAIL {what}{}", detail());
            println!("{line}");
            self.failed.push(line);
        }
    }
}

/// The id of a node.
fn id_of(tree: &Tree, n: NodeIdx) -> String {
    tree.node(n).entry.id.to_string()
}

/// The resume leaf (and its continuation point) of the first `lines` lines of `file`.
fn resume_names(file: &Path, lines: usize, dir: &Path) -> (Option<String>, Option<String>) {
    let path = truncated(file, lines, dir);
    let size = std::fs::metadata(&path).unwrap().len();
    let tree = open(&path);
    match resume_leaf_sized(&tree, size) {
        Some(r) => (
            Some(id_of(&tree, r.leaf)),
            Some(id_of(&tree, r.continues_after)),
        ),
        None => (None, None),
    }
}

fn check_corpus(root: &Path, report: &mut Report) {
    let manifest = parse(&std::fs::read(root.join("manifest.json")).unwrap());
    let scratch = tempfile::tempdir().unwrap();
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in manifest["requests"].as_array().unwrap() {
        let kind = r["kind"].as_str().unwrap_or("");
        let (Some(file), Some(leaf)) = (r["file"].as_str(), r["leaf"].as_str()) else {
            continue;
        };
        if kind != "turn" && kind != "compact" {
            continue;
        }
        report.requests += 1;
        let subagent = file.contains("/subagents/");
        let beta = r["anthropicBeta"].as_str().unwrap_or("");
        let mid = beta.contains("mid-conversation-system");
        let what = format!(
            "request {} ({}, {kind}{}{}) at {}",
            r["n"],
            r["step"].as_str().unwrap_or(""),
            if subagent { ", subagent" } else { "" },
            if mid {
                ""
            } else {
                ", no mid-conversation system"
            },
            &leaf[..8.min(leaf.len())]
        );
        let lines = r["linesBefore"].as_u64().unwrap() as usize;
        let path = truncated(&root.join(file), lines, scratch.path());
        let size = std::fs::metadata(&path).unwrap().len();
        let tree = open(&path);
        let Some(node) = tree.find(leaf) else {
            report.check(false, what, || format!(": no line {leaf} in the file"));
            continue;
        };
        let source = FileLines::open(&path).unwrap().read_ahead();
        let options = ContextOptions {
            model: r["model"].as_str().map(str::to_owned),
            mid_conversation_system: Some(mid),
            file_size: Some(size),
            ..ContextOptions::default()
        };
        let ctx = match context(&tree, &source, node, &options) {
            Ok(c) => c,
            Err(e) => {
                report.check(false, what, || format!(": {e}"));
                continue;
            }
        };
        // The command a user runs says the same: `sessiond context FILE --leaf L --json`.
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sessiond"));
        // Read as the library reads it here: leniently (the experiments damage files on purpose).
        cmd.arg("context")
            .arg(&path)
            .args(["--leaf", leaf, "--json", "--allow-corrupt"]);
        if let Some(model) = r["model"].as_str() {
            cmd.args(["--model", model]);
        }
        let out = cmd.output().unwrap();
        let doc = parse(&out.stdout);
        report.check(
            out.status.success()
                && doc["messages"] == Value::Array(ctx.messages.clone())
                && doc["midConversationSystem"]
                    == Value::Bool(mid || subagent && ctx.mid_conversation_system),
            format!("{what}: `sessiond context --leaf` gives the same document"),
            || {
                format!(
                    ": exit {:?}, {}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                )
            },
        );
        let recorded: Vec<Value> = r["messages"].as_array().cloned().unwrap_or_default();
        let (want, applied) = normalize(&recorded, kind, &ctx.messages, subagent);
        for a in &applied {
            *counts.entry(a).or_default() += 1;
        }
        let mut shown: Vec<&str> = applied.clone();
        shown.sort_unstable();
        shown.dedup();
        let got = Value::Array(ctx.messages.clone());
        let want = Value::Array(want);
        let diff = first_difference(&want, &got, String::new());
        let not_rendered = ctx.not_rendered.clone();
        report.check(
            diff.is_none() && not_rendered.is_empty(),
            format!(
                "{what}: {} messages equal after {}",
                ctx.messages.len(),
                if shown.is_empty() {
                    "none".to_owned()
                } else {
                    shown.join(",")
                }
            ),
            || match diff {
                Some((at, x, y)) => format!(
                    "\n     first difference at {at}\n     request:  {}\n     sessiond: {}\n     (request has {} messages, sessiond {})",
                    short(x),
                    short(y),
                    want.as_array().map_or(0, Vec::len),
                    ctx.messages.len()
                ),
                None => format!(": attachments not rendered: {not_rendered:?}"),
            },
        );
    }
    println!(
        "normalizations applied: {}",
        counts
            .iter()
            .map(|(k, v)| format!("{k} ×{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    for s in manifest["steps"].as_array().unwrap() {
        for run in s["runs"].as_array().unwrap() {
            let (Some(file), Some(before), Some(from)) = (
                run["file"].as_str(),
                run["linesBeforeRun"].as_u64(),
                run["resumedFrom"].as_str(),
            ) else {
                continue;
            };
            let args: Vec<&str> = run["args"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if args.contains(&"--resume-session-at") || truthy(&run["forkOf"]) {
                continue;
            }
            report.resume_leaves += 1;
            // The run loaded the file at some moment between its start and its first line; with
            // a concurrent run writing meanwhile, any state in between may be the one it saw.
            let last = run["firstLineIndex"]
                .as_u64()
                .filter(|&n| n > 0)
                .unwrap_or(before);
            let mut named = Vec::new();
            let mut ok = false;
            for n in before..=before.max(last) {
                let (leaf, after) = resume_names(&root.join(file), n as usize, scratch.path());
                named.push(format!("{leaf:?}/{after:?}"));
                if leaf.as_deref() == Some(from) || after.as_deref() == Some(from) {
                    ok = true;
                    break;
                }
            }
            report.check(
                ok,
                format!(
                    "resume leaf of {}: Claude continued from {}",
                    s["name"].as_str().unwrap_or(""),
                    &from[..8.min(from.len())]
                ),
                || format!(", the rule names {}", named.join(", ")),
            );
        }
    }

    for e in manifest["experiments"].as_array().into_iter().flatten() {
        report.experiments += 1;
        let from = e["resumedFrom"].as_str().unwrap_or("");
        let (leaf, after) = resume_names(
            &root.join(e["file"].as_str().unwrap()),
            e["editedLines"].as_u64().unwrap() as usize,
            scratch.path(),
        );
        report.check(
            leaf.as_deref() == Some(from) || after.as_deref() == Some(from),
            format!(
                "experiment {}: Claude continued from {}",
                e["name"].as_str().unwrap_or(""),
                &from[..8.min(from.len())]
            ),
            || format!(", the rule names {leaf:?} (continuing after {after:?})"),
        );
    }
}

/// Prints, for a transcript, the reference prototype's context at its resume leaf (`default`)
/// and at every line as leaf (by uuid), as one JSON object.
const PROTOTYPE_DRIVER: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import prototype_context as p
path = sys.argv[2]
out = {}
def one(leaf):
    try:
        d = p.context(path, leaf)
        return {"leaf": d["leaf"], "continuesAfter": d.get("continuesAfter"), "messages": d["messages"]}
    except p.Unsupported as e:
        return {"unsupported": str(e)}
    except SystemExit as e:
        return {"error": str(e)}
out["default"] = one(None)
for u in p.Transcript(p.read_lines(path)).raw:
    if isinstance(u, str):
        out[u] = one(u)
sys.stdout.write(json.dumps(out))
"#;

/// Every transcript file under `dir`, sorted.
fn transcripts(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            transcripts(&p, out);
        } else if p.extension().is_some_and(|e| e == "jsonl") && !p.ends_with("requests.jsonl") {
            out.push(p);
        }
    }
}

/// sessiond against the reference prototype (tests/claude/prototype_context.py) at every line
/// of every transcript as leaf, and at the resume leaf: the same messages (and the same leaf).
/// Leaves the prototype refuses (a line the loader no longer reaches in a file over 5 MiB; an
/// attachment it does not render) are counted apart.
fn check_prototype(files: &[PathBuf], report: &mut Report) -> usize {
    let mut apart = 0;
    for file in files {
        let output = run_bounded(
            {
                let mut c = Command::new("python3");
                c.arg("-c")
                    .arg(PROTOTYPE_DRIVER)
                    .arg(repo().join("tests/claude"))
                    .arg(file);
                c
            },
            Duration::from_secs(300),
            "prototype_context.py",
        );
        assert!(
            output.status.success(),
            "the prototype failed on {}: {}",
            file.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        let reference = parse(&output.stdout);
        let tree = open(file);
        let source = FileLines::open(file).unwrap().read_ahead();
        let size = std::fs::metadata(file).unwrap().len();
        let name = file
            .strip_prefix(repo())
            .or_else(|_| file.strip_prefix(file.ancestors().nth(6).unwrap_or(file)))
            .unwrap_or(file)
            .display()
            .to_string();
        for (leaf, want) in reference.as_object().unwrap() {
            if want.get("messages").is_none() {
                apart += 1;
                continue;
            }
            report.prototype_leaves += 1;
            let node = if leaf == "default" {
                let resumed = resume_leaf_sized(&tree, size);
                let got = resumed.map(|r| (id_of(&tree, r.leaf), id_of(&tree, r.continues_after)));
                let same = json!(got.as_ref().map(|g| &g.0)) == want["leaf"]
                    && json!(got.as_ref().map(|g| &g.1)) == want["continuesAfter"];
                if !same {
                    report.check(false, format!("prototype: resume leaf of {name}"), || {
                        format!(
                            ": sessiond {got:?}, prototype {}/{}",
                            want["leaf"], want["continuesAfter"]
                        )
                    });
                    continue;
                }
                match resumed {
                    Some(r) => r.leaf,
                    None => continue,
                }
            } else {
                tree.find(leaf).unwrap()
            };
            let options = ContextOptions {
                file_size: Some(size),
                ..ContextOptions::default()
            };
            let what = format!("prototype: {name} at {}", &leaf[..8.min(leaf.len())]);
            match context(&tree, &source, node, &options) {
                Ok(ctx) => {
                    let got = Value::Array(ctx.messages);
                    let diff = first_difference(&want["messages"], &got, String::new());
                    report.check(diff.is_none(), what, || match diff {
                        Some((at, x, y)) => format!(
                            "\n     first difference at {at}\n     prototype: {}\n     sessiond:  {}",
                            short(x),
                            short(y)
                        ),
                        None => String::new(),
                    });
                }
                Err(e) => report.check(false, what, || format!(": {e}")),
            }
        }
    }
    apart
}

fn truthy(v: &Value) -> bool {
    !matches!(v, Value::Null | Value::Bool(false)) && v != "" && v != 0
}

/// The whole referee: the corpus made once, then every check; fails with the list of failures.
#[test]
fn claude_code_referee() {
    const TEST: &str = "claude_code_referee";
    let kept;
    let root = match std::env::var_os("SESSIOND_CLAUDE_CORPUS") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let bin = claude_bin();
            if !bin.is_file() {
                skip(
                    TEST,
                    &format!(
                        "Claude Code is not installed at {} (run `bash scripts/claude-deps.sh`)",
                        bin.display()
                    ),
                );
                return;
            }
            if Command::new("node").arg("--version").output().is_err() {
                skip(
                    TEST,
                    "node is not on PATH (the corpus driver needs Node 18+)",
                );
                return;
            }
            kept = tempfile::tempdir().unwrap();
            let out = kept.path().join("corpus");
            let mut cmd = Command::new("node");
            cmd.current_dir(repo())
                .arg(repo().join("tests/claude/corpus.mjs"))
                .arg(&out);
            let output = run_bounded(cmd, CORPUS_TIMEOUT, "corpus.mjs");
            assert!(
                output.status.success(),
                "corpus.mjs failed ({}):\n{}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            print!("{}", String::from_utf8_lossy(&output.stderr));
            out
        }
    };
    let mut report = Report::default();
    check_corpus(&root, &mut report);
    if Command::new("python3").arg("--version").output().is_ok() {
        let mut files = Vec::new();
        transcripts(&root.join("home"), &mut files);
        transcripts(&root.join("experiments"), &mut files);
        transcripts(&repo().join("tests/data/claude"), &mut files);
        // The experiments copy every transcript: each distinct file once.
        let mut seen = std::collections::HashSet::new();
        files.retain(|f| seen.insert(std::fs::read(f).unwrap()));
        let apart = check_prototype(&files, &mut report);
        println!(
            "prototype: {} leaves compared in {} transcripts ({apart} the prototype refuses)",
            report.prototype_leaves,
            files.len()
        );
    } else {
        skip(
            TEST,
            "python3 is not on PATH: sessiond is not compared with the prototype",
        );
    }
    println!(
        "{} passed, {} failed ({} requests compared, {} resume leaves, {} experiments, {} leaves \
         against the prototype)",
        report.passed,
        report.failed.len(),
        report.requests,
        report.resume_leaves,
        report.experiments,
        report.prototype_leaves
    );
    assert!(
        report.failed.is_empty(),
        "{} of {} checks failed:\n{}",
        report.failed.len(),
        report.passed + report.failed.len(),
        report.failed.join("\n")
    );
    assert!(
        report.requests > 0,
        "the manifest lists no request to compare"
    );
}

/// What each hand-made corrupt transcript of tests/data/claude/ must give: the strict open's
/// refusal, and a lenient open's resume leaf, context and diagnostics, each with what Claude
/// Code does there (expectations.json).
#[test]
fn corrupt_transcripts() {
    let dir = repo().join("tests/data/claude");
    let expectations = parse(&std::fs::read(dir.join("expectations.json")).unwrap());
    let mut failures = Vec::new();
    for (name, want) in expectations.as_object().unwrap() {
        let path = dir.join(name);
        let strict = open_session::<Claude>(&path, Mode::Strict);
        let strict_got = match &strict {
            Ok(_) => json!(null),
            Err(OpenError::Corrupt { corruption, .. }) => {
                json!({"kind": corruption.kind.as_str(), "line": corruption.line})
            }
            Err(e) => json!(e.to_string()),
        };
        if strict_got != want["strict"] {
            failures.push(format!(
                "{name}: strict open gave {strict_got}, expected {}",
                want["strict"]
            ));
        }
        let opened = open_session::<Claude>(&path, Mode::Lenient).unwrap();
        let tree = &opened.tree;
        let torn = opened.torn_tail.as_ref().map(|t| t.line);
        if json!(torn) != want["tornTailLine"] {
            failures.push(format!(
                "{name}: torn tail {torn:?}, expected {}",
                want["tornTailLine"]
            ));
        }
        let size = std::fs::metadata(&path).unwrap().len();
        let resumed = resume_leaf_sized(tree, size);
        let names = resumed.map(|r| (id_of(tree, r.leaf), id_of(tree, r.continues_after)));
        let got_leaf = json!(names.as_ref().map(|n| &n.0));
        let got_after = json!(names.as_ref().map(|n| &n.1));
        if got_leaf != want["leaf"] || got_after != want["continuesAfter"] {
            failures.push(format!(
                "{name}: resume leaf {got_leaf}/{got_after}, expected {}/{}",
                want["leaf"], want["continuesAfter"]
            ));
        }
        let Some(r) = resumed else { continue };
        let source = FileLines::open(&path).unwrap();
        let ctx = context(tree, &source, r.leaf, &ContextOptions::default()).unwrap();
        let got = Value::Array(ctx.messages.clone());
        if let Some((at, x, y)) = first_difference(&want["messages"], &got, String::new()) {
            failures.push(format!(
                "{name}: messages differ at {at}\n  expected: {}\n  sessiond: {}",
                short(x),
                short(y)
            ));
        }
        let diagnostics: Vec<Value> = tree
            .diagnostics()
            .iter()
            .filter_map(|d| match d {
                sessiond::core::diagnostics::Diagnostic::Corrupt {
                    corruption, action, ..
                } => Some(json!({
                    "kind": corruption.kind.as_str(),
                    "line": corruption.line,
                    "action": action,
                })),
                _ => None,
            })
            .collect();
        if Value::Array(diagnostics.clone()) != want["lenientDiagnostics"] {
            failures.push(format!(
                "{name}: lenient diagnostics {diagnostics:?}, expected {}",
                want["lenientDiagnostics"]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The median of `runs` timings of `f`, in milliseconds.
fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

/// Opening a large transcript (written by the benchmarks' generator, scripts/gen_claude.rs)
/// and computing its resume leaf and the context there, beside a parse floor (every line read
/// as JSON into nothing). A measurement, not a check: run with
/// `cargo test --release --test claude_referee measure -- --ignored --nocapture`
/// (`SESSIOND_CLAUDE_MEASURE_MB` sets the size, 50 by default).
#[test]
#[ignore = "a measurement; run it in release"]
fn measure_large_transcript() {
    let mb: u64 = std::env::var("SESSIOND_CLAUDE_MEASURE_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    for (shape, tools) in [
        ("chat (1 tool call a prompt)", 1),
        ("agentic (200 tool calls a prompt)", 200),
        ("one prompt, tool calls to the end", usize::MAX),
    ] {
        let path = dir.path().join(format!("t{tools}.jsonl"));
        let options = gen_claude::Options {
            bytes: mb << 20,
            seed: 1,
            tools_per_prompt: Some(tools),
            compact_at: None,
        };
        gen_claude::write(&path, &options).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        let floor = median_ms(3, || {
            let data = std::fs::read(&path).unwrap();
            for l in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                serde_json::from_slice::<serde::de::IgnoredAny>(l).unwrap();
            }
        });
        let value_floor = median_ms(3, || {
            let data = std::fs::read(&path).unwrap();
            for l in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                jsstr::parse_value(l).unwrap();
            }
        });
        let mut tree = None;
        let open_ms = median_ms(3, || tree = Some(open(&path)));
        let tree = tree.unwrap();
        let mut leaf = None;
        let leaf_ms = median_ms(3, || leaf = resume_leaf_sized(&tree, size));
        let leaf = leaf.unwrap();
        let mut messages = 0;
        let context_ms = median_ms(3, || {
            let source = FileLines::open(&path).unwrap().read_ahead();
            let ctx = context(&tree, &source, leaf.leaf, &ContextOptions::default()).unwrap();
            messages = ctx.messages.len();
        });
        println!(
            "{shape}: {:.1} MB, {} lines in the tree, {messages} messages: parse floor {floor:.0} ms \
             (into values {value_floor:.0} ms); open {open_ms:.0} ms; resume leaf {leaf_ms:.0} ms; context {context_ms:.0} ms",
            size as f64 / 1e6,
            tree.len()
        );
    }
}
