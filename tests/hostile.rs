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
fn sessiond_022<S: AsRef<OsStr>>(args: &[S]) -> Output {
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
    let (header, entries) = support::v3_session(n);
    let mut text = header + "\n";
    for (_, line) in &entries {
        text.push_str(line);
        text.push('\n');
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
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

#[test]
fn what_the_cli_writes_from_a_session_is_the_owner_s_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let dir = root.join("sessions");
    std::fs::create_dir(&dir).unwrap();
    set_mode(&dir, 0o700);
    let (src, ids) = session(&dir, "a.jsonl", 6);
    set_mode(&src, 0o600);

    // A fork gets the source's own mode: 0600 here, never the umask's 0644.
    let out = sessiond_022(&[
        OsStr::new("fork"),
        src.as_os_str(),
        OsStr::new(&ids[3]),
        OsStr::new("--json"),
    ]);
    let forked: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
    let fork = PathBuf::from(forked["path"].as_str().unwrap());
    assert_eq!(mode(&fork), 0o600, "fork of a 0600 session");
    // A group-readable source gives a group-readable fork, and nothing wider.
    set_mode(&src, 0o640);
    let out = sessiond_022(&[
        OsStr::new("fork"),
        src.as_os_str(),
        OsStr::new(&ids[3]),
        OsStr::new("--json"),
    ]);
    let forked: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
    assert_eq!(mode(Path::new(forked["path"].as_str().unwrap())), 0o640);
    set_mode(&src, 0o666);
    let out = sessiond_022(&[
        OsStr::new("fork"),
        src.as_os_str(),
        OsStr::new(&ids[3]),
        OsStr::new("--json"),
    ]);
    let forked: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
    assert_eq!(
        mode(Path::new(forked["path"].as_str().unwrap())),
        0o644,
        "the umask still applies"
    );
    set_mode(&src, 0o600);

    // A salvage of a corrupt 0600 session.
    let corrupt = dir.join("corrupt.jsonl");
    let text = std::fs::read_to_string(&src).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "{not json");
    std::fs::write(&corrupt, lines.join("\n") + "\n").unwrap();
    set_mode(&corrupt, 0o600);
    let before: Vec<PathBuf> = new_files(&dir, &[]);
    let out = sessiond_022(&[
        OsStr::new("salvage"),
        corrupt.as_os_str(),
        OsStr::new("--json"),
    ]);
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
        OsStr::new("name"),
        torn.as_os_str(),
        OsStr::new("renamed"),
        OsStr::new("--expected-leaf"),
        OsStr::new(&ids[5]),
        OsStr::new("--torn-grace-ms"),
        OsStr::new("0"),
        OsStr::new("--json"),
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
        let out = sessiond_022(&[
            OsStr::new(cmd),
            src.as_os_str(),
            OsStr::new("--out"),
            target.as_os_str(),
        ]);
        ok(&out);
        assert_eq!(mode(&target), 0o600, "{cmd} --out {name}");
    }

    // The search index and the listing cache: directories 0700, files 0600, also the
    // directories created on the way.
    let cache = root.join("cache");
    let index = cache.join("sessiond").join("index");
    let out = sessiond_022(&[
        OsStr::new("search"),
        OsStr::new("question"),
        OsStr::new("--root"),
        dir.as_os_str(),
        OsStr::new("--index-dir"),
        index.as_os_str(),
    ]);
    ok(&out);
    let list_cache = cache.join("sessiond").join("list").join("cache.json");
    let out = sessiond_022(&[
        OsStr::new("list"),
        OsStr::new("--root"),
        dir.as_os_str(),
        OsStr::new("--cache"),
        list_cache.as_os_str(),
    ]);
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

#[test]
fn what_the_daemon_writes_from_a_session_is_the_owner_s_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let dir = root.join("sessions");
    std::fs::create_dir(&dir).unwrap();
    set_mode(&dir, 0o700);
    let (src, ids) = session(&dir, "a.jsonl", 6);
    set_mode(&src, 0o600);
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
