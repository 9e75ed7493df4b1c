//! Session files as hostile input (issue 40): what sessiond writes from a session is readable
//! by its owner only, session text never acts on the terminal, one wide node cannot make an
//! output grow with the square of the input, a credential used as a name is redacted, and a
//! symlink swapped in for an open session is not followed. (That `verify` runs nothing a
//! repository configures is tested in `tests/verify.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::{BIN, Daemon, Spawn};

/// `sessiond ARGS` under umask 022, the mask most shells run with.
fn sessiond_022(args: &[&dyn AsRef<OsStr>]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("umask 022 && exec \"$0\" \"$@\"")
        .arg(BIN)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

fn ok(out: &Output) -> &Output {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Permission bits of a path (not following a final symlink).
fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn set_mode(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

/// A session of `n` chained messages in `dir` as `name`; returns its path and entry ids.
fn session(dir: &Path, name: &str, n: usize) -> (PathBuf, Vec<String>) {
    let path = dir.join(name);
    let entries = support::write_v3_session(&path, n);
    (path, entries.into_iter().map(|(id, _)| id).collect())
}

/// The files directly in `dir` other than `known`.
fn new_files(dir: &Path, known: &[&Path]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !known.contains(&p.as_path()))
        .collect();
    found.sort();
    found
}

/// Every file and directory under `dir` with a mode wider than owner-only.
fn wider_than_owner(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut wide = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        if mode(&d) & 0o077 != 0 {
            wide.push((d.clone(), mode(&d)));
        }
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if mode(&p) & 0o077 != 0 {
                wide.push((p.clone(), mode(&p)));
            }
        }
    }
    wide
}

// ---------------------------------------------------------------------------------------------
// Kind 2: outputs readable by the owner only (SPEC §8), under umask 022.

/// A 0600 session of 6 entries in a 0700 `sessions` folder of a temporary root: (the temporary
/// directory, the root, the folder, the session, its entry ids).
fn owner_only_session() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, Vec<String>) {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let dir = root.join("sessions");
    std::fs::create_dir(&dir).unwrap();
    set_mode(&dir, 0o700);
    let (src, ids) = session(&dir, "a.jsonl", 6);
    set_mode(&src, 0o600);
    (tmp, root, dir, src, ids)
}

#[test]
fn what_the_cli_writes_from_a_session_is_the_owner_s_only() {
    let (_tmp, root, dir, src, ids) = owner_only_session();

    // A fork gets the source's own mode: 0600 here, never the umask's 0644. A group-readable
    // source gives a group-readable fork, and nothing wider: the umask still applies.
    for (source, fork) in [(0o600, 0o600), (0o640, 0o640), (0o666, 0o644)] {
        set_mode(&src, source);
        let out = sessiond_022(&[&"fork", &src, &ids[3], &"--json"]);
        let forked: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
        let path = Path::new(forked["path"].as_str().unwrap());
        assert_eq!(mode(path), fork, "fork of a {source:o} session");
    }
    set_mode(&src, 0o600);

    // A salvage of a corrupt 0600 session.
    let corrupt = dir.join("corrupt.jsonl");
    let text = std::fs::read_to_string(&src).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "{not json");
    std::fs::write(&corrupt, lines.join("\n") + "\n").unwrap();
    set_mode(&corrupt, 0o600);
    let before: Vec<PathBuf> = new_files(&dir, &[]);
    let out = sessiond_022(&[&"salvage", &corrupt, &"--json"]);
    ok(&out);
    let known: Vec<&Path> = before.iter().map(PathBuf::as_path).collect();
    let salvaged = new_files(&dir, &known);
    assert_eq!(salvaged.len(), 1, "{salvaged:?}");
    assert_eq!(mode(&salvaged[0]), 0o600, "salvage of a 0600 session");

    // The sidecar of a torn tail moved aside before an append.
    let torn = dir.join("torn.jsonl");
    std::fs::write(&torn, text.clone() + "{\"type\":\"mess").unwrap();
    set_mode(&torn, 0o600);
    let out = sessiond_022(&[
        &"name",
        &torn,
        &"renamed",
        &"--expected-leaf",
        &ids[5],
        &"--torn-grace-ms",
        &"0",
        &"--json",
    ]);
    let named: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
    let sidecar = named["repaired"]["sidecar"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no sidecar: {named:#}"));
    assert_eq!(mode(&sidecar), 0o600, "the torn tail's sidecar");

    // Exports and graphs written to a file.
    let outdir = root.join("out");
    std::fs::create_dir(&outdir).unwrap();
    for (cmd, name) in [
        ("export", "a.md"),
        ("export", "a.html"),
        ("graph", "a.svg"),
        ("graph", "a.txt"),
    ] {
        let target = outdir.join(name);
        let out = sessiond_022(&[&cmd, &src, &"--out", &target]);
        ok(&out);
        assert_eq!(mode(&target), 0o600, "{cmd} --out {name}");
    }

    // The search index and the listing cache: directories 0700, files 0600, also the
    // directories created on the way.
    let cache = root.join("cache");
    let index = cache.join("sessiond").join("index");
    let out = sessiond_022(&[
        &"search",
        &"question",
        &"--root",
        &dir,
        &"--index-dir",
        &index,
    ]);
    ok(&out);
    let list_cache = cache.join("sessiond").join("list").join("cache.json");
    let out = sessiond_022(&[&"list", &"--root", &dir, &"--cache", &list_cache]);
    ok(&out);
    assert!(index.join("meta.json").exists());
    assert!(list_cache.exists());
    assert_eq!(
        wider_than_owner(&cache),
        vec![],
        "under {}",
        cache.display()
    );
}

/// A file a rewind creates again from session content (it was deleted since) is the owner's
/// only, as everything holding session content; a file that is there keeps its own mode.
#[test]
fn a_file_a_rewind_recreates_is_the_owner_s_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let work = root.join("work");
    std::fs::create_dir(&work).unwrap();
    let header = json!({"type": "session", "version": 3, "id": "s1",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": work});
    let user = |text: &str| json!({"role": "user", "content": text, "timestamp": 1});
    let write = |call: &str, path: &str, content: &str| {
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": call, "name": "write",
            "arguments": {"path": path, "content": content}}],
            "provider": "p", "model": "m", "stopReason": "toolUse", "timestamp": 2})
    };
    let done = |call: &str| {
        json!({"role": "toolResult", "toolCallId": call, "toolName": "write",
            "content": [{"type": "text", "text": "Successfully wrote"}], "isError": false,
            "timestamp": 3})
    };
    let mut lines = vec![header.to_string()];
    let mut parent: Option<&str> = None;
    for (id, message) in [
        ("u1", user("t1")),
        ("a1", write("w1", "secret.env", "KEY=one\n")),
        ("r1", done("w1")),
        ("a2", write("w2", "kept.txt", "one\n")),
        ("r2", done("w2")),
        ("u2", user("t2")),
        ("a3", write("w3", "secret.env", "KEY=two\n")),
        ("r3", done("w3")),
        ("a4", write("w4", "kept.txt", "two\n")),
        ("r4", done("w4")),
    ] {
        lines.push(
            json!({"type": "message", "id": id, "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z", "message": message})
            .to_string(),
        );
        parent = Some(id);
    }
    let file = root.join("s.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    // secret.env was deleted since the session wrote it; kept.txt is there, group-readable.
    std::fs::write(work.join("kept.txt"), "two\n").unwrap();
    set_mode(&work.join("kept.txt"), 0o640);
    let backups = root.join("backups");
    let out = sessiond_022(&[
        &"rewind",
        &file,
        &"--to",
        &"u2",
        &"--force",
        &"--backup-root",
        &backups,
        &"--json",
    ]);
    let doc: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
    assert_eq!(doc["applied"], true, "{doc}");
    assert_eq!(
        std::fs::read_to_string(work.join("secret.env")).unwrap(),
        "KEY=one\n"
    );
    assert_eq!(mode(&work.join("secret.env")), 0o600, "a recreated file");
    assert_eq!(
        std::fs::read_to_string(work.join("kept.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(mode(&work.join("kept.txt")), 0o640, "a replaced file");
    assert_eq!(wider_than_owner(&backups), vec![]);
}

#[test]
fn what_the_daemon_writes_from_a_session_is_the_owner_s_only() {
    let (_tmp, root, dir, src, ids) = owner_only_session();
    let index = root.join("cache").join("index");
    let index_arg = index.to_str().unwrap().to_owned();
    let mut d = Daemon::spawn_under(
        &[&dir],
        &Spawn {
            env: Vec::new(),
            capture_stderr: false,
            args: vec!["--index-dir", &index_arg],
        },
        Some("022"),
    );
    d.request("initialize", json!({"capabilities": {}}));
    d.notify("initialized", json!({}));
    d.call("session/open", json!({"path": src}));
    let forked = d.call(
        "session/fork",
        json!({"path": src, "entryId": ids[3], "position": "at"}),
    );
    assert_eq!(mode(Path::new(forked["path"].as_str().unwrap())), 0o600);

    let corrupt = dir.join("corrupt.jsonl");
    let text = std::fs::read_to_string(&src).unwrap();
    std::fs::write(&corrupt, text.replacen('\n', "\n{not json\n", 2)).unwrap();
    set_mode(&corrupt, 0o600);
    let salvaged = d.call("session/salvage", json!({"path": corrupt}));
    let salvaged = salvaged["path"].as_str().unwrap();
    assert_eq!(mode(Path::new(salvaged)), 0o600, "salvage");

    let torn = dir.join("torn.jsonl");
    std::fs::write(&torn, text + "{\"type\":\"mess").unwrap();
    set_mode(&torn, 0o600);
    d.call("session/open", json!({"path": torn}));
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let named = d.call(
        "session/setName",
        json!({"path": torn, "name": "renamed", "expectedLeafId": ids[5]}),
    );
    let sidecar = named["repaired"]["sidecar"]
        .as_str()
        .unwrap_or_else(|| panic!("no sidecar: {named:#}"));
    assert_eq!(mode(Path::new(sidecar)), 0o600, "sidecar");

    let found = d.call("session/search", json!({"query": "question"}));
    assert!(found["total"].as_u64().unwrap() > 0, "{found:#}");
    assert_eq!(wider_than_owner(&root.join("cache")), vec![]);
    d.stop();
}

// ---------------------------------------------------------------------------------------------
// Kind 3: session text never acts on the terminal. Human output shows control characters
// visibly; `--json` keeps the text exact (JSON escapes C0 controls itself).

/// Text that would act on a terminal: clear the screen, ring, set the clipboard (OSC 52),
/// plant a link (OSC 8), an 8-bit CSI, a carriage return that overwrites the line, a
/// right-to-left override.
const HOSTILE: &str = "x\u{1b}[2J\u{7}\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}]8;;http://e.example/\u{1b}\\l\u{9b}31m\rfake\u{202e}gnp.exe\u{7f}";

/// Bytes that must never reach a terminal from session text.
fn acting_bytes(out: &[u8]) -> Vec<String> {
    // (A CR just before a newline is a line ending: it overwrites nothing.)
    let text = String::from_utf8_lossy(out).replace("\r\n", "\n");
    text.chars()
        .filter(|&c| {
            (c < ' ' && c != '\n' && c != '\t')
                || ('\u{7f}'..='\u{9f}').contains(&c)
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
        })
        .map(|c| format!("U+{:04X}", c as u32))
        .collect()
}

/// A session whose previews, label, name, model and custom type carry [`HOSTILE`].
fn hostile_session(dir: &Path) -> PathBuf {
    let header = json!({"type": "session", "version": 3, "id": "s1",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": format!("/w/{HOSTILE}")});
    let e = |id: &str, parent: Option<&str>, rest: Value| {
        let mut v = json!({"id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z"});
        for (k, x) in rest.as_object().unwrap() {
            v[k] = x.clone();
        }
        v.to_string()
    };
    let lines = [
        header.to_string(),
        e(
            "u1",
            None,
            json!({"type": "message", "message": {"role": "user", "content": HOSTILE, "timestamp": 1}}),
        ),
        e(
            "a1",
            Some("u1"),
            json!({"type": "message", "message": {"role": "assistant",
            "content": [{"type": "text", "text": HOSTILE}, {"type": "toolCall", "id": "t1", "name": HOSTILE, "arguments": {}}],
            "provider": HOSTILE, "model": HOSTILE, "timestamp": 2}}),
        ),
        e(
            "m1",
            Some("a1"),
            json!({"type": "model_change", "provider": HOSTILE, "modelId": HOSTILE}),
        ),
        e(
            "l1",
            Some("m1"),
            json!({"type": "label", "targetId": "u1", "label": HOSTILE}),
        ),
        e(
            "n1",
            Some("l1"),
            json!({"type": "session_info", "name": HOSTILE}),
        ),
        e(
            "c1",
            Some("n1"),
            json!({"type": "custom", "customType": HOSTILE, "data": {}}),
        ),
        e(
            "u2",
            Some("u1"),
            json!({"type": "message", "message": {"role": "user", "content": HOSTILE, "timestamp": 3}}),
        ),
    ];
    let path = dir.join(format!("s-{}.jsonl", "\u{1b}[31m"));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn session_text_never_reaches_the_terminal_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let file = hostile_session(&dir);
    let f = file.to_str().unwrap();
    let index = dir.join("index");
    // The same session with a relative working directory, which `rewind` refuses, naming it.
    let relative = dir.join(format!("r-{}.jsonl", "\u{1b}[31m"));
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&relative, text.replacen("\"cwd\":\"/w/", "\"cwd\":\"w/", 1)).unwrap();
    let r = relative.to_str().unwrap();
    let runs: Vec<Vec<&str>> = vec![
        vec!["tree", f],
        vec!["tree", f, "--full"],
        vec!["context", f],
        vec!["context", f, "--leaf", "c1"],
        vec!["graph", f],
        vec!["graph", f, "--svg"],
        vec!["explain", f, "l1"],
        vec!["check", f],
        vec!["verify", f, "--all"],
        vec!["export", f],
        vec!["diff", f, "c1", "u2"],
        // The session's working directory (hostile) is not on this machine: refused, naming it.
        vec!["rewind", f, "--to", "u1", "--dry-run"],
        vec!["rewind", r, "--to", "u1"],
        vec!["rewind", r, "--to", "u1", "--dry-run"],
        vec![
            "list",
            "--root",
            dir.to_str().unwrap(),
            "--cache",
            "/dev/null/none",
        ],
        vec![
            "search",
            "fake",
            "--root",
            dir.to_str().unwrap(),
            "--index-dir",
            index.to_str().unwrap(),
        ],
    ];
    for args in &runs {
        let out = Command::new(BIN).args(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        // (`rewind` refuses a relative working directory, or one not on this machine: exit 2,
        // `error`.)
        let refused = args[0] == "rewind";
        assert!(
            out.status
                .code()
                .is_some_and(|c| c == 0 || c == 8 || (refused && c == 2)),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            acting_bytes(&out.stdout),
            Vec::<String>::new(),
            "{args:?} stdout:\n{stdout}"
        );
        assert_eq!(
            acting_bytes(&out.stderr),
            Vec::<String>::new(),
            "{args:?} stderr"
        );
        // (The SVG has no C0 control to show: XML cannot hold one, it is U+FFFD there.)
        if refused {
            assert!(
                String::from_utf8_lossy(&out.stderr).contains(r"\x1b"),
                "{args:?} shows ESC visibly on stderr"
            );
        } else if !matches!(args[0], "check" | "search" | "verify" | "explain")
            && !args.contains(&"--svg")
        {
            assert!(
                stdout.contains(r"\x1b"),
                "{args:?} shows ESC visibly:\n{stdout}"
            );
        }
    }
    // An error that names what the file holds (a duplicate id) goes to stderr shown visibly.
    let dup = dir.join("dup.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let bad_id = "d\u{1b}]52;c;eA==\u{7}";
    let line = json!({"type": "custom", "id": bad_id, "parentId": null, "timestamp": "2026-01-01T00:00:01.000Z", "customType": "x"}).to_string();
    std::fs::write(&dup, format!("{text}{line}\n{line}\n")).unwrap();
    let out = Command::new(BIN)
        .args(["tree", dup.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        acting_bytes(&out.stderr),
        Vec::<String>::new(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // --json is exact: the text comes back byte for byte.
    let out = Command::new(BIN)
        .args(["tree", f, "--json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
    assert_eq!(doc["name"], HOSTILE);
    let out = Command::new(BIN)
        .args(["context", f, "--json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
    assert_eq!(doc["messages"][0]["content"], HOSTILE);
}

// ---------------------------------------------------------------------------------------------
// Kind 5: a credential is redacted wherever the export shows it: as a value, as the name of a
// tool call's argument, and with zero-width characters hidden inside it.

const KEY: &str = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345";

/// `KEY` with zero-width characters inside (U+200B, U+200D, U+2060, U+FEFF, a soft hyphen).
fn hidden_key() -> String {
    "sk-\u{200b}ant-api03-abcd\u{200d}efghijkl\u{2060}mnopqrstuv\u{feff}wxyz0\u{ad}12345".to_owned()
}

fn credential_session(dir: &Path) -> PathBuf {
    let header = json!({"type": "session", "version": 3, "id": "s1",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let call = json!({"type": "message", "id": "a1", "parentId": "u1",
        "timestamp": "2026-01-01T00:00:02.000Z",
        "message": {"role": "assistant", "content": [
            {"type": "toolCall", "id": "t1", "name": "bash", "arguments": credential_arguments()}],
            "provider": "anthropic", "model": "m", "timestamp": 2}});
    let user = json!({"type": "message", "id": "u1", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "run it", "timestamp": 1}});
    let path = dir.join("cred.jsonl");
    std::fs::write(&path, format!("{header}\n{user}\n{call}\n")).unwrap();
    path
}

/// The document with zero-width characters taken out: a key in it would be readable.
fn leaks(document: &str) -> bool {
    let plain: String = document
        .chars()
        .filter(|c| !matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{ad}'))
        .collect();
    plain.contains("abcdefghijklmnopqrstuv") || plain.contains("sk-ant-api03")
}

#[test]
fn credentials_are_redacted_as_names_and_behind_zero_width_characters() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let file = credential_session(&dir);
    for format in ["md", "html"] {
        let out = Command::new(BIN)
            .args([
                "export",
                file.to_str().unwrap(),
                "--format",
                format,
                "--json",
            ])
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
        let document = doc["document"].as_str().unwrap();
        assert!(!leaks(document), "{format}:\n{document}");
        assert!(document.contains("[REDACTED:anthropic-key]"), "{format}");
        // Two names, a hidden one in a value, one in a nested object.
        assert_eq!(doc["redactions"], 4, "{format}: {}", doc["redactions"]);
    }
    let (mut d, _) = Daemon::start(&[&dir]);
    let r = d.call("session/export", json!({"path": file, "format": "html"}));
    assert!(!leaks(r["document"].as_str().unwrap()));
    d.stop();
}

/// The arguments of [`credential_session`]'s tool call: a key and a hidden key as names, a
/// hidden key in a value, a key as a nested name.
fn credential_arguments() -> Value {
    let mut args = serde_json::Map::new();
    args.insert(KEY.to_owned(), json!("as a name"));
    args.insert(hidden_key(), json!("as a hidden name"));
    args.insert(
        "command".to_owned(),
        json!(format!("curl -H 'x-api-key: {}'", hidden_key())),
    );
    args.insert("nested".to_owned(), json!({ KEY: 1 }));
    Value::Object(args)
}

/// A Claude Code transcript whose `Bash` call has [`credential_arguments`] as its input.
fn credential_transcript(dir: &Path) -> PathBuf {
    let session = "6d2e238c-d8e6-4579-9b3a-0130d30ea9b9";
    let line = |uuid: &str, parent: Option<&str>, kind: &str, message: Value| {
        json!({"parentUuid": parent, "isSidechain": false, "type": kind, "message": message,
            "uuid": uuid, "timestamp": "2026-12-04T18:00:00.000Z", "userType": "external",
            "cwd": "/w", "sessionId": session, "version": "2.1.197", "gitBranch": "HEAD"})
        .to_string()
    };
    let user = line(
        "11111111-1111-4111-8111-111111111111",
        None,
        "user",
        json!({"role": "user", "content": "run it"}),
    );
    let call = line(
        "22222222-2222-4222-8222-222222222222",
        Some("11111111-1111-4111-8111-111111111111"),
        "assistant",
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                "input": credential_arguments()}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}}),
    );
    let result = line(
        "33333333-3333-4333-8333-333333333333",
        Some("22222222-2222-4222-8222-222222222222"),
        "user",
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
            "content": "done"}]}),
    );
    let answer = line(
        "44444444-4444-4444-8444-444444444444",
        Some("33333333-3333-4333-8333-333333333333"),
        "assistant",
        json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "Done."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}),
    );
    let path = dir.join(format!("{session}.jsonl"));
    std::fs::write(&path, format!("{user}\n{call}\n{result}\n{answer}\n")).unwrap();
    path
}

/// A Codex rollout whose `function_call` has [`credential_arguments`] as its arguments.
fn credential_rollout(dir: &Path) -> PathBuf {
    let item = |payload: Value| {
        json!({"timestamp": "2026-12-04T00:00:01.000Z", "type": "response_item", "payload": payload})
            .to_string()
    };
    let lines = [
        json!({"timestamp": "2026-12-04T00:00:00.000Z", "type": "session_meta",
            "payload": {"id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "cwd": "/w"}})
        .to_string(),
        item(json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "run it"}]})),
        item(
            json!({"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "shell",
            "arguments": credential_arguments().to_string()}),
        ),
        item(json!({"type": "function_call_output", "call_id": "c1", "output": "done"})),
    ];
    let path = dir.join("rollout-2026-12-04T00-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn claude_code_and_codex_exports_redact_credentials_as_names_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let files = [credential_transcript(&dir), credential_rollout(&dir)];
    for file in &files {
        for format in ["md", "html"] {
            let out = Command::new(BIN)
                .args([
                    "export",
                    file.to_str().unwrap(),
                    "--format",
                    format,
                    "--json",
                ])
                .output()
                .unwrap();
            let doc: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
            let document = doc["document"].as_str().unwrap();
            let what = format!("{} {format}", file.display());
            assert!(document.contains("run it"), "{what}");
            assert!(!leaks(document), "{what}:\n{document}");
            assert!(
                document.contains("[REDACTED:anthropic-key]"),
                "{what}:\n{document}"
            );
            assert!(doc["redactions"].as_u64().unwrap() >= 4, "{what}: {doc}");
        }
    }
    let (mut d, _) = Daemon::start(&[&dir]);
    for file in &files {
        for format in ["md", "html"] {
            let r = d.call("session/export", json!({"path": file, "format": format}));
            assert!(
                !leaks(r["document"].as_str().unwrap()),
                "{}",
                file.display()
            );
        }
    }
    d.stop();
}

// ---------------------------------------------------------------------------------------------
// Kind 6: a symlink swapped in for an open session (or for its directory) is not followed: the
// daemon never reads the file outside the roots, nor reports its facts.

/// Every message the daemon sends within `wait`.
fn drain(d: &mut Daemon, wait: std::time::Duration) -> Vec<Value> {
    let deadline = std::time::Instant::now() + wait;
    let mut got = Vec::new();
    while let Some(m) =
        d.next_message(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        got.push(m);
    }
    got
}

#[test]
fn a_symlink_swapped_in_for_an_open_session_is_not_followed() {
    use std::time::Duration;
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let sessions = root.join("sessions");
    let sub = sessions.join("sub");
    let outside = root.join("outside");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let (file, ids) = session(&sessions, "a.jsonl", 4);
    let (nested, _) = session(&sub, "b.jsonl", 4);
    // Outside the roots: a session with other facts (12 entries, another leaf).
    let (secret, secret_ids) = session(&outside, "a.jsonl", 12);
    std::fs::copy(&secret, outside.join("b.jsonl")).unwrap();
    let outside_leaf = secret_ids.last().unwrap().clone();

    let (mut d, _) = Daemon::start(&[&sessions]);
    d.call("session/open", json!({"path": file}));
    d.call("session/open", json!({"path": nested}));

    // The file itself replaced by a symlink to the outside file.
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&secret, &file).unwrap();
    let seen = drain(&mut d, Duration::from_secs(3));
    for m in &seen {
        assert!(
            m["method"] != "session/didReload" && !m.to_string().contains(&outside_leaf),
            "the outside file's facts were reported: {m:#}"
        );
    }
    assert!(
        seen.iter().any(|m| m["method"] == "session/fileMissing"),
        "the swap is not reported: {seen:#?}"
    );
    let refused = d.request("session/tree", json!({"path": file}));
    assert_eq!(support::error_of(&refused).0, -33002, "{refused:#}");
    // Appends to the outside file wake the watcher again; nothing of it is read.
    let mut extra = std::fs::read_to_string(&secret).unwrap();
    extra.push_str(
        &extra
            .lines()
            .last()
            .unwrap()
            .replace(&outside_leaf, "zzzz0001"),
    );
    extra.push('\n');
    std::fs::write(&secret, &extra).unwrap();

    // Its directory replaced by a symlink to the outside directory.
    std::fs::rename(&sub, sessions.join("sub.old")).unwrap();
    std::os::unix::fs::symlink(&outside, &sub).unwrap();
    std::fs::write(outside.join("b.jsonl"), &extra).unwrap();
    let refused = d.request("session/tree", json!({"path": nested}));
    assert_eq!(support::error_of(&refused).0, -33002, "{refused:#}");

    let seen = drain(&mut d, Duration::from_secs(3));
    for m in &seen {
        let text = m.to_string();
        assert!(
            m["method"] != "session/didReload"
                && !text.contains(&outside_leaf)
                && !text.contains("zzzz0001"),
            "the outside file's facts were reported: {m:#}"
        );
    }

    // A regular file back at the path is read again.
    std::fs::remove_file(&file).unwrap();
    let (_, back_ids) = session(&sessions, "a.jsonl", 6);
    let reloaded = d
        .notification("session/didReload", Duration::from_secs(10))
        .expect("reloaded once a regular file is back");
    assert_eq!(
        reloaded["leafId"],
        json!(back_ids.last().unwrap()),
        "{reloaded:#}"
    );
    assert_ne!(back_ids.last(), ids.last());
    d.stop();
}

// ---------------------------------------------------------------------------------------------
// Kind 4: every output grows with the input's size, not its square. One entry with thousands
// of children, or thousands of nested branch points, drew lines as long as the branches were
// many: 10,000 children made 200 MB of `graph` text.

/// One entry with `n` children.
fn wide_session(dir: &Path, n: usize) -> PathBuf {
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"w","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
    );
    text.push('\n');
    let line = |id: &str, parent: Option<&str>, words: &str| {
        json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": words, "timestamp": 1}})
        .to_string()
    };
    text.push_str(&line("root", None, "the root"));
    text.push('\n');
    for i in 0..n {
        text.push_str(&line(
            &format!("c{i:06}"),
            Some("root"),
            &format!("child {i}"),
        ));
        text.push('\n');
    }
    let path = dir.join(format!("wide{n}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path
}

/// `n` nested branch points: each level's first child goes on, its second is a leaf.
fn comb_session(dir: &Path, n: usize) -> PathBuf {
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"c","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
    );
    text.push('\n');
    let line = |id: &str, parent: Option<&str>| {
        json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "x", "timestamp": 1}})
        .to_string()
    };
    text.push_str(&line("n0", None));
    text.push('\n');
    for i in 1..=n {
        let parent = format!("n{}", i - 1);
        text.push_str(&line(&format!("n{i}"), Some(&parent)));
        text.push('\n');
        text.push_str(&line(&format!("l{i}"), Some(&parent)));
        text.push('\n');
    }
    let path = dir.join(format!("comb{n}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Bytes of `sessiond ARGS` on stdout.
fn output_bytes(args: &[&str]) -> usize {
    let out = Command::new(BIN).args(args).output().unwrap();
    ok(&out).stdout.len()
}

#[test]
fn outputs_grow_with_the_input_not_its_square() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    for make in [wide_session, comb_session] {
        let (small, large) = (make(&dir, 1500), make(&dir, 3000));
        let size = |p: &Path| std::fs::metadata(p).unwrap().len() as usize;
        for args in [
            vec!["graph"],
            vec!["graph", "--svg"],
            vec!["graph", "--json"],
            vec!["tree"],
            vec!["tree", "--full"],
            vec!["tree", "--json"],
        ] {
            let run = |p: &Path| {
                let mut a = args.clone();
                a.insert(1, p.to_str().unwrap());
                output_bytes(&a)
            };
            let (a, b) = (run(&small), run(&large));
            // Twice the input, about twice the output; never more than a few bytes per byte.
            assert!(
                b * 10 < a * 25,
                "{args:?} on {}: {a} → {b} bytes for twice the input",
                large.display()
            );
            assert!(
                b < 12 * size(&large),
                "{args:?}: {b} bytes of output for {} of input",
                size(&large)
            );
        }
    }
}

/// `session/graph` comes in pages like `session/tree`: a page is bounded, and the pages in
/// turn give exactly the graph `sessiond graph --json` prints.
#[test]
fn the_daemon_s_graph_comes_in_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let file = wide_session(&dir, 5000);
    let out = Command::new(BIN)
        .args(["graph", file.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let whole: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
    let (mut d, _) = Daemon::start(&[&dir]);
    d.call("session/open", json!({"path": file}));
    let mut offset = json!(0);
    let (mut nodes, mut lines, mut pages) = (Vec::new(), Vec::new(), 0);
    while let Some(at) = offset.as_u64() {
        let page = support::checked(
            &mut d,
            "session/graph",
            json!({"path": file, "offset": at, "limit": 1000}),
        );
        assert!(
            page.to_string().len() < 1 << 20,
            "a page of 1000 rows is small"
        );
        assert_eq!(page["rowCount"], whole["rowCount"]);
        nodes.extend(page["nodes"].as_array().unwrap().iter().cloned());
        lines.extend(page["lines"].as_array().unwrap().iter().cloned());
        if at == 0 {
            assert_eq!(page["contextEntryIds"], whole["contextEntryIds"]);
        }
        offset = page["nextOffset"].clone();
        pages += 1;
    }
    assert_eq!(pages, 6);
    assert_eq!(Value::Array(nodes), whole["nodes"]);
    assert_eq!(Value::Array(lines), whole["lines"]);
    let too_many = d.request("session/graph", json!({"path": file, "limit": 100_000}));
    assert_eq!(support::error_of(&too_many).0, -32602);
    d.stop();
}

/// A client of `sessiond serve` that reads what the daemon writes at `rate` bytes a second,
/// as an editor that parses each reply before it reads on, and notes when each reply arrived.
struct SlowClient {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    replies: std::sync::mpsc::Receiver<(std::time::Instant, Value)>,
    next_id: i64,
}

impl SlowClient {
    fn start(root: &Path, rate: usize) -> SlowClient {
        use std::io::{BufRead, Read};
        use std::process::Stdio;
        let mut child = Command::new(BIN)
            .args(["serve", "--root"])
            .arg(root)
            .env("SESSIOND_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = std::io::BufReader::with_capacity(64 << 10, stdout);
            loop {
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    match line.trim_end().strip_prefix("Content-Length:") {
                        Some(n) => len = n.trim().parse().unwrap(),
                        None if line.trim_end().is_empty() => break,
                        None => panic!("header {line:?}"),
                    }
                }
                let mut body = vec![0; len];
                for chunk in body.chunks_mut(64 << 10) {
                    r.read_exact(chunk).unwrap();
                    let took = chunk.len() as f64 / rate as f64;
                    std::thread::sleep(std::time::Duration::from_secs_f64(took));
                }
                let reply = serde_json::from_slice(&body).unwrap();
                if tx.send((std::time::Instant::now(), reply)).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut c = SlowClient {
            child,
            stdin,
            replies,
            next_id: 1,
        };
        let init = c.send("initialize", json!({"capabilities": {}}));
        c.wait_for(init);
        c.notify("initialized", json!({}));
        c
    }

    fn write(&mut self, msg: &Value) {
        use std::io::Write;
        self.stdin.write_all(&support::frame(msg)).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request; returns its id.
    fn send(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The reply to `id` (other messages are dropped).
    fn wait_for(&mut self, id: i64) -> Value {
        loop {
            let (_, reply) = self
                .replies
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap();
            if reply["id"] == id {
                return reply;
            }
        }
    }
}

impl Drop for SlowClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One large `session/export` does not hold up the answers to other sessions: the document
/// comes in pages of bounded size, so an answer that arrives while one is being written waits
/// for that page only, not for the whole document. The client reads at 16 MiB/s, as an
/// editor parsing each reply might; the document is 40 MiB.
#[test]
fn a_large_export_does_not_hold_up_other_answers() {
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let (small, _) = session(&dir, "small.jsonl", 5);
    let big = dir.join("big.jsonl");
    let mut text = json!({"type": "session", "version": 3, "id": "big",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"})
    .to_string();
    let mut parent = Value::Null;
    let message: String = "the same words again and again; ".repeat(1 << 15);
    for i in 0..40 {
        let id = format!("m{i:04}");
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let content = if role == "user" {
            json!(message)
        } else {
            json!([{"type": "text", "text": message}])
        };
        let line = json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": role, "content": content, "timestamp": i}});
        text.push('\n');
        text.push_str(&line.to_string());
        parent = json!(id);
    }
    text.push('\n');
    std::fs::write(&big, text).unwrap();
    let out = Command::new(BIN)
        .args(["export", big.to_str().unwrap(), "--no-redact"])
        .output()
        .unwrap();
    let whole = String::from_utf8(ok(&out).stdout.clone()).unwrap();
    assert!(whole.len() > 40 << 20, "{}", whole.len());

    let mut c = SlowClient::start(&dir, 16 << 20);
    let opened = c.send("session/open", json!({"path": small}));
    assert!(c.wait_for(opened).get("result").is_some());
    let mut document = String::new();
    let (mut pages, mut document_id) = (0, Value::Null);
    let mut export = c.send("session/export", json!({"path": big, "redact": false}));
    let mut asked: Vec<(i64, Instant)> = Vec::new();
    let mut answered: Vec<(i64, Duration)> = Vec::new();
    let mut last_ask = Instant::now() - Duration::from_secs(1);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "no end to the export");
        if last_ask.elapsed() >= Duration::from_millis(100) {
            asked.push((
                c.send("session/tree", json!({"path": small})),
                Instant::now(),
            ));
            last_ask = Instant::now();
        }
        let Ok((at, reply)) = c.replies.recv_timeout(Duration::from_millis(20)) else {
            continue;
        };
        let id = reply["id"].as_i64().unwrap_or(-1);
        if let Some(&(_, sent)) = asked.iter().find(|(a, _)| *a == id) {
            assert!(reply.get("result").is_some(), "{reply}");
            answered.push((id, at - sent));
        } else if id == export {
            let page = &reply["result"];
            let text = page["document"]
                .as_str()
                .unwrap_or_else(|| panic!("{reply}"));
            assert!(text.len() <= 4 << 20, "a page is 4 MiB at most");
            assert_eq!(page["offset"], document.len());
            assert_eq!(page["documentBytes"], whole.len());
            if pages == 0 {
                document_id = page["documentId"].clone();
            }
            assert_eq!(page["documentId"], document_id, "one document");
            document.push_str(text);
            pages += 1;
            match page["nextOffset"].as_u64() {
                Some(offset) => {
                    assert_eq!(offset as usize, document.len());
                    export = c.send(
                        "session/export",
                        json!({"path": big, "redact": false, "offset": offset}),
                    );
                }
                None => break,
            }
        }
    }
    for (id, _) in &asked {
        if !answered.iter().any(|(a, _)| a == id) {
            let reply = c.wait_for(*id);
            assert!(reply.get("result").is_some(), "{reply}");
            let sent = asked.iter().find(|(a, _)| a == id).unwrap().1;
            answered.push((*id, sent.elapsed()));
        }
    }
    assert!(document == whole, "the pages make the document");
    assert_eq!(pages, whole.len().div_ceil(4 << 20));
    for params in [
        json!({"path": big, "limit": (16 << 20) + 1}),
        json!({"path": big, "limit": 0}),
        json!({"path": small, "offset": 1 << 30}),
    ] {
        let asked = c.send("session/export", params.clone());
        let reply = c.wait_for(asked);
        assert_eq!(reply["error"]["code"], -32602, "{params}: {reply}");
    }
    let slowest = answered.iter().map(|(_, d)| *d).max().unwrap();
    assert!(
        answered.len() >= 10 && slowest < Duration::from_secs(1),
        "{} answers to another session during the export; the slowest took {slowest:?}",
        answered.len()
    );
}

/// A Codex thread is gathered from the files inside the daemon's roots only: a fork of the open
/// rollout that lies outside them (another day's folder, `archived_sessions/`) is never read,
/// while the command line, which has no roots, finds it.
#[test]
fn a_codex_thread_is_read_inside_the_daemon_s_roots_only() {
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    let day = home.join("sessions/2026/01/01");
    let archived = home.join("archived_sessions");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::create_dir_all(&archived).unwrap();
    let (a, b) = (
        "01a2453e-a8be-7fd3-8041-bcaa744a1349",
        "01a2453e-b0b0-7fd3-8041-bcaa744a1350",
    );
    let user = |ordinal: u64, text: &str| {
        json!({"timestamp": "2026-01-01T00:00:01.000Z", "ordinal": ordinal,
            "type": "response_item", "payload": {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]}})
        .to_string()
    };
    let own = format!(
        "{}\n{}\n",
        json!({"timestamp": "2026-01-01T00:00:00.000Z", "ordinal": 0, "type": "session_meta",
            "payload": {"id": a, "cwd": "/w"}}),
        user(1, "inside the roots")
    );
    let file = day.join(format!("rollout-2026-01-01T00-00-00-{a}.jsonl"));
    std::fs::write(&file, &own).unwrap();
    let fork = format!(
        "{}\n{}\n",
        json!({"timestamp": "2026-01-01T00:00:02.000Z", "ordinal": 0, "type": "session_meta",
            "payload": {"id": b, "cwd": "/w", "forked_from_id": a,
                "history_base": {"thread_id": a, "end_ordinal_exclusive": 2,
                    "end_byte_offset": own.len()}}}),
        user(2, "OUTSIDE THE ROOTS")
    );
    std::fs::write(
        archived.join(format!("rollout-2026-01-01T00-00-02-{b}.jsonl")),
        fork,
    )
    .unwrap();
    // The command line reads the whole thread (it proves the fork is linked).
    let out = Command::new(BIN)
        .args(["export", file.to_str().unwrap()])
        .output()
        .unwrap();
    let cli = String::from_utf8_lossy(&ok(&out).stdout).into_owned();
    let out = Command::new(BIN)
        .args(["graph", file.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let cli_graph = String::from_utf8_lossy(&ok(&out).stdout).into_owned();
    assert!(
        cli.contains("OUTSIDE THE ROOTS") || cli_graph.contains("OUTSIDE THE ROOTS"),
        "the fork is part of the thread:\n{cli}\n{cli_graph}"
    );

    let (mut d, _) = Daemon::start(&[&day]);
    d.call("session/open", json!({"path": file}));
    let graph = d.call("session/graph", json!({"path": file}));
    let export = d.call("session/export", json!({"path": file}));
    let context = d.call("session/contextAt", json!({"path": file}));
    for (what, r) in [
        ("graph", &graph),
        ("export", &export),
        ("contextAt", &context),
    ] {
        assert!(
            !r.to_string().contains("OUTSIDE THE ROOTS"),
            "{what} read a file outside the roots: {r:#}"
        );
    }
    assert!(
        export["document"]
            .as_str()
            .unwrap()
            .contains("inside the roots")
    );
    d.stop();
}
