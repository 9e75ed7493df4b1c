//! Shared helpers for the integration tests: running the sessiond binary and the pi oracle, and comparing JSON.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

pub mod generator;

/// The repository root (where Cargo.toml lives); golden file paths are relative to it.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the sessiond binary built for these tests, from the repository root.
pub fn sessiond<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .output()
        .expect("failed to start the sessiond binary")
}

/// A one-line account of a finished command, for failure messages.
pub fn describe(output: &Output) -> String {
    format!(
        "exit {:?}, stdout {} bytes, stderr: {}",
        output.status.code(),
        output.stdout.len(),
        truncate(String::from_utf8_lossy(&output.stderr).trim(), 600)
    )
}

/// Runs the sessiond binary with `args`, which must exit with `code`; its output.
pub fn sessiond_exits(args: &[&str], code: i32) -> Output {
    let output = sessiond(args);
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?}: {}",
        describe(&output)
    );
    output
}

/// Asserts that a finished command exited with `code`, showing its stderr where it did not.
pub fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Parses a command's JSON output: stdout, or stderr when stdout is empty (errors may go either way).
pub fn parse_json_output(output: &Output) -> Result<Value, String> {
    let text = if output.stdout.iter().all(u8::is_ascii_whitespace) {
        &output.stderr
    } else {
        &output.stdout
    };
    parse_json(text).map_err(|e| {
        format!(
            "output is not one JSON value ({e}): {}",
            truncate(&String::from_utf8_lossy(text), 600)
        )
    })
}

/// The arguments of `sessiond context FILE --json`, at `leaf` when given.
pub fn context_args(file: &Path, leaf: Option<&str>) -> Vec<String> {
    let mut args = vec![
        "context".to_string(),
        file.to_string_lossy().into_owned(),
        "--json".to_string(),
    ];
    if let Some(leaf) = leaf {
        args.extend(["--leaf".to_string(), leaf.to_string()]);
    }
    args
}

/// Runs sessiond with `args` and parses its JSON output; Err names the command and how it failed.
pub fn sessiond_json(args: &[String]) -> Result<Value, String> {
    let output = sessiond(args);
    if !output.status.success() {
        return Err(format!(
            "`sessiond {}` failed: {}",
            args.join(" "),
            describe(&output)
        ));
    }
    parse_json_output(&output)
}

/// Parses JSON the way JavaScript accepts it. pi's JSON.stringify writes a lone UTF-16 surrogate (a tool
/// output cut inside an emoji) as an escape like `\ud83d`, which serde_json refuses; such an escape is turned
/// into literal text (`\\ud83d`) on both sides of a comparison, so equal inputs still compare equal.
///
/// Text serde_json cannot read at all (nesting past its 128 levels, 1e400) is read with sessiond's
/// own `JSON.parse` (`jsstr::parse_value`), lone surrogates spelled the same way.
pub fn parse_json(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(error) => {
            let text = String::from_utf8_lossy(bytes);
            let fixed = escape_lone_surrogates(&text);
            let second = if fixed == text {
                Err(error)
            } else {
                serde_json::from_str(&fixed)
            };
            second.or_else(|e| match sessiond::js::jsstr::parse_value(bytes) {
                Ok(mut v) => {
                    lone_surrogates_as_text(&mut v);
                    Ok(v)
                }
                Err(_) => Err(e),
            })
        }
    }
}

/// Rewrites each lone surrogate sessiond holds (see `jsstr`) as the literal text of its escape,
/// the spelling [`parse_json`] gives them. Iterative: values may be nested deeply.
fn lone_surrogates_as_text(root: &mut Value) {
    fn text(s: &str) -> String {
        char::decode_utf16(sessiond::js::jsstr::units(s))
            .map(|r| match r {
                Ok(c) => c.to_string(),
                Err(e) => format!("\\u{:04x}", e.unpaired_surrogate()),
            })
            .collect()
    }
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if sessiond::js::jsstr::has_lone_surrogate(s) => *s = text(s),
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => {
                if map
                    .keys()
                    .any(|k| sessiond::js::jsstr::has_lone_surrogate(k))
                {
                    let old = std::mem::take(map);
                    for (k, v) in old {
                        map.insert(text(&k), v);
                    }
                }
                stack.extend(map.values_mut());
            }
            _ => {}
        }
    }
}

fn escape_lone_surrogates(text: &str) -> String {
    let unit = |s: &str| s.get(2..6).and_then(|h| u16::from_str_radix(h, 16).ok());
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut after_high = false;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(next) = rest[1..].chars().next() else {
            break;
        };
        if next != 'u' {
            let len = 1 + next.len_utf8();
            out.push_str(&rest[..len]);
            rest = &rest[len..];
            after_high = false;
            continue;
        }
        let code = unit(rest);
        let lone = match code {
            Some(0xD800..=0xDBFF) => {
                let paired = rest.get(6..8) == Some("\\u")
                    && matches!(unit(&rest[6..]), Some(0xDC00..=0xDFFF));
                after_high = paired;
                !paired
            }
            Some(0xDC00..=0xDFFF) => !std::mem::take(&mut after_high),
            _ => {
                after_high = false;
                false
            }
        };
        if lone {
            out.push('\\');
        }
        let len = if code.is_some() { 6 } else { 2 }.min(rest.len());
        out.push_str(&rest[..len]);
        rest = &rest[len..];
    }
    out.push_str(rest);
    out
}

pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}… [{} chars in all]", text.chars().count())
}

/// JSON equality as JavaScript sees it: numbers compare by value (1 == 1.0), objects ignore key order.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    first_difference(a, b).is_none()
}

/// The first place where two JSON values differ: (JSON pointer, left value, right value); None if equal.
pub fn first_difference<'a>(
    a: &'a Value,
    b: &'a Value,
) -> Option<(String, Option<&'a Value>, Option<&'a Value>)> {
    fn walk<'a>(
        path: &mut String,
        a: &'a Value,
        b: &'a Value,
    ) -> Option<(String, Option<&'a Value>, Option<&'a Value>)> {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                let same =
                    x == y || matches!((x.as_f64(), y.as_f64()), (Some(p), Some(q)) if p == q);
                (!same).then(|| (path.clone(), Some(a), Some(b)))
            }
            (Value::Array(xs), Value::Array(ys)) => children(
                path,
                (0..xs.len().max(ys.len())).map(|i| (i.to_string(), xs.get(i), ys.get(i))),
            ),
            (Value::Object(xs), Value::Object(ys)) => {
                let keys = xs.keys().chain(ys.keys().filter(|k| !xs.contains_key(*k)));
                children(
                    path,
                    keys.map(|k| {
                        let segment = k.replace('~', "~0").replace('/', "~1");
                        (segment, xs.get(k), ys.get(k))
                    }),
                )
            }
            _ => (a != b).then(|| (path.clone(), Some(a), Some(b))),
        }
    }
    /// The first difference among the children of two arrays or objects, each given as its
    /// pointer segment and the two sides' values.
    fn children<'a>(
        path: &mut String,
        pairs: impl Iterator<Item = (String, Option<&'a Value>, Option<&'a Value>)>,
    ) -> Option<(String, Option<&'a Value>, Option<&'a Value>)> {
        for (segment, x, y) in pairs {
            let len = path.len();
            path.push('/');
            path.push_str(&segment);
            let found = match (x, y) {
                (Some(x), Some(y)) => walk(path, x, y),
                (x, y) => Some((path.clone(), x, y)),
            };
            path.truncate(len);
            if found.is_some() {
                return found;
            }
        }
        None
    }
    walk(&mut String::new(), a, b)
}

/// A readable report of how `actual` differs from `expected` (empty if they are equal).
pub fn diff_report(expected: &Value, actual: &Value) -> String {
    let Some((pointer, want, got)) = first_difference(expected, actual) else {
        return String::new();
    };
    let show = |v: Option<&Value>| match v {
        None => "<absent>".to_string(),
        Some(v) => truncate(&serde_json::to_string_pretty(v).unwrap_or_default(), 2500),
    };
    let mut report = format!(
        "first difference at {}\n  expected (pi): {}\n  actual (sessiond): {}",
        if pointer.is_empty() { "/" } else { &pointer },
        show(want).replace('\n', "\n    "),
        show(got).replace('\n', "\n    "),
    );
    if let (Some(Value::Array(e)), Some(Value::Array(a))) =
        (expected.get("messages"), actual.get("messages"))
    {
        report.push_str(&format!(
            "\n  messages: pi has {}, sessiond has {}",
            e.len(),
            a.len()
        ));
    }
    report
}

/// Keeps only the keys pi prints for a context: messages, thinkingLevel, model (absent stays absent).
pub fn restrict_to_context(output: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in ["messages", "thinkingLevel", "model"] {
        if let Some(v) = output.get(key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// sessiond's deterministic id for the entry on a 1-based line of a version-1 file.
pub fn v1_line_id(line: u64) -> String {
    format!("{line:08x}")
}

/// The pi install to diff against, from SESSIOND_ORACLE_DIR. Without it the caller skips, except under CI,
/// where a missing oracle must not pass silently.
pub fn oracle_dir(test: &str) -> Option<PathBuf> {
    match std::env::var_os("SESSIOND_ORACLE_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "{test}: SESSIOND_ORACLE_DIR is not set under CI; run the suite through scripts/test.sh"
                );
            }
            eprintln!();
            eprintln!(
                "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
            );
            eprintln!("!!! SKIPPED {test}: SESSIOND_ORACLE_DIR is not set, so pi cannot be run.");
            eprintln!(
                "!!! Run `bash scripts/test.sh`, or set SESSIOND_ORACLE_DIR to a pi oracle install."
            );
            eprintln!(
                "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
            );
            eprintln!();
            None
        }
    }
}

/// Runs `node tests/oracle/SCRIPT FILE…` on the pi install `oracle` (list.mjs, odd.mjs), which
/// must succeed: its output lines, one per file.
pub fn oracle_lines(oracle: &Path, script: &str, files: &[PathBuf]) -> Vec<Vec<u8>> {
    let out = Command::new("node")
        .arg(repo("tests/oracle").join(script))
        .args(files)
        .env("SESSIOND_ORACLE_DIR", oracle)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {}", describe(&out));
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// tests/oracle/batch.mjs on the pi install `oracle`, its jobs on stdin and its results on stdout.
pub fn batch_oracle(oracle: &Path) -> Command {
    let mut node = Command::new("node");
    node.arg(repo_root().join("tests/oracle/batch.mjs"))
        .env("SESSIOND_ORACLE_DIR", oracle)
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    node
}

/// Runs tests/oracle/batch.mjs once over all jobs ({file, leaf}) and returns one result per job, in order.
pub fn run_batch_oracle(oracle: &Path, jobs: &[Value]) -> Vec<Value> {
    let mut child = batch_oracle(oracle)
        .stderr(Stdio::piped())
        .spawn()
        .expect("failed to start node for tests/oracle/batch.mjs");
    let mut input = String::new();
    for job in jobs {
        input.push_str(&job.to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().expect("node stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("node did not finish");
    writer
        .join()
        .expect("stdin writer")
        .expect("writing jobs to node");
    assert!(
        output.status.success(),
        "batch oracle failed: {}",
        truncate(&String::from_utf8_lossy(&output.stderr), 4000)
    );
    let results: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            parse_json(line.as_bytes()).expect("batch oracle printed a line that is not JSON")
        })
        .collect();
    assert_eq!(
        results.len(),
        jobs.len(),
        "batch oracle returned a different number of results"
    );
    results
}

/// Runs `f` over `items` on all cores, keeping the input order of the results.
pub fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(16);
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(|| part.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker thread panicked"))
            .collect()
    })
}

/// FNV-1a, to name file contents compactly in failure messages.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

// --- helpers for the write tests ---------------------------------------------------------

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

/// The session files (`*.jsonl`) under `dir` and its subdirectories, sorted; none when
/// `dir` cannot be read.
pub fn jsonl_files_under(dir: &Path) -> Vec<PathBuf> {
    fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        for e in read.flatten() {
            let p = e.path();
            if p.is_dir() {
                collect(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    collect(dir, &mut out);
    out.sort();
    out
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
