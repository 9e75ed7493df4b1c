//! The session archive (`sessiond archive`, `restore`, `list --archive`, `serve --archive`):
//! a first pass over pi sessions, Claude Code transcripts with a subagent's and a Codex
//! rollout; an append adds one chunk of exactly the new bytes; a file rewritten in place keeps
//! its earlier content as a version; a deleted file stays archived and is restored byte for
//! byte; a restore never overwrites a different file; modes 0600/0700 under umask 022; a pass
//! killed with SIGKILL leaves an archive the next pass completes and that verifies whole; a
//! pass on a full file system (a small tmpfs) stops with one clear error, leaves nothing
//! half-written, and the next pass with room completes it;
//! `--prune` lists first and removes only with `--apply`; the daemon archives as files change.
//! Chunks are read back with the standard `zstd` tool, as docs/archive.md promises.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Daemon, Spawn};

const BIN: &str = env!("CARGO_BIN_EXE_sessiond");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env(
            "XDG_CACHE_HOME",
            std::env::temp_dir().join("sessiond-archive-test-cache"),
        )
        .output()
        .expect("run sessiond")
}

/// Runs a `--json` command that must succeed; its document.
fn json_ok(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn pass(root: &Path, archive: &Path) -> Value {
    json_ok(&[
        "archive",
        "--root",
        root.to_str().unwrap(),
        "--to",
        archive.to_str().unwrap(),
        "--json",
    ])
}

/// The session files of a small tree of every agent's layout, with their contents.
struct Tree {
    root: PathBuf,
    pi: PathBuf,
    claude: PathBuf,
    subagent: PathBuf,
    codex: PathBuf,
}

fn tree(dir: &Path) -> Tree {
    let root = dir.join("root");
    let pi = root.join("--home-u-p--/2025-01-01T00-00-00-000Z_0193-pi.jsonl");
    let claude = root.join("-home-u-q/6f0c3b1e-claude.jsonl");
    let subagent = root.join("-home-u-q/6f0c3b1e-claude/subagents/agent-a1.jsonl");
    let codex = root.join("2025/01/02/rollout-2025-01-02T10-00-00-0193codex.jsonl");
    let files = [
        (
            &pi,
            "{\"type\":\"session\",\"version\":3,\"id\":\"0193-pi\",\"timestamp\":\"2025-01-01T00:00:00.000Z\",\"cwd\":\"/home/u/p\"}\n\
             {\"type\":\"message\",\"id\":\"a1\",\"parentId\":null,\"timestamp\":\"2025-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
        ),
        (
            &claude,
            "{\"parentUuid\":null,\"type\":\"user\",\"uuid\":\"u1\",\"cwd\":\"/home/u/q\",\"sessionId\":\"6f0c3b1e-claude\",\"message\":{\"role\":\"user\",\"content\":\"go\"}}\n",
        ),
        (
            &subagent,
            "{\"parentUuid\":null,\"type\":\"user\",\"uuid\":\"s1\",\"cwd\":\"/home/u/q\",\"isSidechain\":true}\n",
        ),
        (
            &codex,
            "{\"timestamp\":\"2025-01-02T10:00:00Z\",\"type\":\"session_meta\",\"payload\":{\"id\":\"0193codex\",\"cwd\":\"/home/u/r\"}}\n",
        ),
    ];
    for (path, text) in files {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    Tree {
        root,
        pi,
        claude,
        subagent,
        codex,
    }
}

/// The manifest of the session archived from `source`.
fn manifest(archive: &Path, source: &Path) -> (PathBuf, Value) {
    for e in fs::read_dir(archive.join("sessions")).unwrap() {
        let dir = e.unwrap().path();
        let m: Value =
            serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        if Path::new(m["source"].as_str().unwrap())
            == fs::canonicalize(source).unwrap_or_else(|_| source.to_owned())
        {
            return (dir, m);
        }
    }
    panic!("{} is not archived", source.display());
}

/// A version's bytes, read with the standard tools: `cat v<N>/*.zst | zstd -d`.
fn zstd_cat(session_dir: &Path, version: u32) -> Vec<u8> {
    let out = Command::new("sh")
        .arg("-c")
        .arg("cat \"$1\"/*.zst | zstd -d -c")
        .arg("sh")
        .arg(session_dir.join(format!("v{version}")))
        .output()
        .expect("sh with zstd");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn chunk_lengths(m: &Value, version: usize) -> Vec<u64> {
    m["versions"][version]["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["length"].as_u64().unwrap())
        .collect()
}

#[test]
fn passes_add_only_new_bytes_keep_versions_and_deleted_files() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let archive = tmp.path().join("archive");
    let first = pass(&t.root, &archive);
    assert_eq!(first["files"], 4, "{first}");
    assert_eq!(first["added"], 4, "{first}");
    for f in [&t.pi, &t.claude, &t.subagent, &t.codex] {
        let (dir, m) = manifest(&archive, f);
        let bytes = fs::read(f).unwrap();
        assert_eq!(chunk_lengths(&m, 0), vec![bytes.len() as u64]);
        assert_eq!(zstd_cat(&dir, 1), bytes, "{}", f.display());
    }
    // A second pass over unchanged files reads nothing of them.
    let again = pass(&t.root, &archive);
    assert_eq!(
        (again["unchanged"].as_u64(), again["bytesRead"].as_u64()),
        (Some(4), Some(0))
    );

    // An append: one new chunk of exactly the appended bytes.
    let before = fs::read(&t.claude).unwrap();
    let added =
        "{\"parentUuid\":\"u1\",\"type\":\"assistant\",\"uuid\":\"u2\",\"cwd\":\"/home/u/q\"}\n";
    fs::OpenOptions::new()
        .append(true)
        .open(&t.claude)
        .unwrap()
        .write_all(added.as_bytes())
        .unwrap();
    let grown = pass(&t.root, &archive);
    assert_eq!(
        (grown["appended"].as_u64(), grown["unchanged"].as_u64()),
        (Some(1), Some(3)),
        "{grown}"
    );
    assert_eq!(grown["bytesAdded"], added.len());
    let (claude_dir, m) = manifest(&archive, &t.claude);
    assert_eq!(
        chunk_lengths(&m, 0),
        vec![before.len() as u64, added.len() as u64]
    );
    assert_eq!(m["versions"][0]["chunks"][1]["offset"], before.len());
    assert_eq!(zstd_cat(&claude_dir, 1), fs::read(&t.claude).unwrap());

    // Rewritten in place, same size: a new version; the earlier content stays as version 1.
    let old_pi = fs::read(&t.pi).unwrap();
    let rewritten = String::from_utf8(old_pi.clone())
        .unwrap()
        .replace("hi", "yo");
    assert_eq!(rewritten.len(), old_pi.len());
    fs::write(&t.pi, &rewritten).unwrap();
    let third = pass(&t.root, &archive);
    assert_eq!(third["newVersions"], 1, "{third}");
    let (pi_dir, m) = manifest(&archive, &t.pi);
    assert_eq!(m["versions"].as_array().unwrap().len(), 2);
    assert_eq!(zstd_cat(&pi_dir, 1), old_pi);
    assert_eq!(zstd_cat(&pi_dir, 2), rewritten.as_bytes());
    let out = tmp.path().join("restored");
    let r = json_ok(&[
        "restore",
        archive.to_str().unwrap(),
        "0193-pi",
        "--version",
        "1",
        "--to",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(fs::read(r["path"].as_str().unwrap()).unwrap(), old_pi);
    assert_eq!(
        Path::new(r["path"].as_str().unwrap()),
        out.join("--home-u-p--/2025-01-01T00-00-00-000Z_0193-pi.jsonl")
    );

    // Deleted at the source: stays archived, listed as gone, restored byte for byte.
    let codex_bytes = fs::read(&t.codex).unwrap();
    fs::remove_file(&t.codex).unwrap();
    let fourth = pass(&t.root, &archive);
    assert_eq!(fourth["files"], 3);
    let listed = json_ok(&["list", "--archive", archive.to_str().unwrap(), "--json"]);
    let archived = listed["archived"].as_array().unwrap();
    assert_eq!(archived.len(), 4);
    let gone: Vec<&Value> = archived
        .iter()
        .filter(|s| s["originalExists"] == false)
        .collect();
    assert_eq!(gone.len(), 1, "{listed}");
    assert!(
        gone[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("0193codex.jsonl")
    );
    let r = json_ok(&["restore", archive.to_str().unwrap(), "0193codex", "--json"]);
    assert_eq!(r["written"], true);
    assert_eq!(fs::read(&t.codex).unwrap(), codex_bytes);
    // Again: the same bytes are there, nothing written.
    let r = json_ok(&["restore", archive.to_str().unwrap(), "0193codex", "--json"]);
    assert_eq!(r["written"], false);
    // A different file in the way: refused (exit 4), untouched.
    fs::write(&t.codex, "other\n").unwrap();
    let refused = run(&["restore", archive.to_str().unwrap(), "0193codex", "--json"]);
    assert_eq!(refused.status.code(), Some(4));
    let doc: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(doc["error"]["kind"], "conflict");
    assert_eq!(fs::read(&t.codex).unwrap(), b"other\n");
    // ... and the archive did not lose the version it had when the file changed again.
    pass(&t.root, &archive);
    let (codex_dir, m) = manifest(&archive, &t.codex);
    assert_eq!(zstd_cat(&codex_dir, 1), codex_bytes);
    assert_eq!(m["versions"].as_array().unwrap().len(), 2);
}

#[test]
fn everything_written_is_private_under_umask_022() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let archive = tmp.path().join("archive");
    let target = tmp.path().join("restored");
    let sh = |args: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("umask 022 && exec \"$0\" {args}"))
            .arg(BIN)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    sh(&format!(
        "archive --root '{}' --to '{}'",
        t.root.display(),
        archive.display()
    ));
    sh(&format!(
        "restore '{}' agent-a1 --to '{}'",
        archive.display(),
        target.display()
    ));
    let mut checked = 0;
    for dir in [&archive, &target] {
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            assert_eq!(
                fs::metadata(&d).unwrap().permissions().mode() & 0o777,
                0o700,
                "{}",
                d.display()
            );
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
                    assert_eq!(mode, 0o600, "{}", p.display());
                    checked += 1;
                }
            }
        }
    }
    // archive.json, lock, four manifests and chunks, the restored file.
    assert_eq!(checked, 11);
}

/// Restores every archived session below `dir` and compares it with `root`'s files.
fn assert_archive_matches(archive: &Path, root: &Path, dir: &Path) {
    let listed = json_ok(&["list", "--archive", archive.to_str().unwrap(), "--json"]);
    let archived = listed["archived"].as_array().unwrap();
    let files = walk(root);
    assert_eq!(archived.len(), files.len());
    for s in archived {
        let r = json_ok(&[
            "restore",
            archive.to_str().unwrap(),
            s["key"].as_str().unwrap(),
            "--to",
            dir.to_str().unwrap(),
            "--json",
        ]);
        let source = Path::new(s["path"].as_str().unwrap());
        assert_eq!(
            fs::read(r["path"].as_str().unwrap()).unwrap(),
            fs::read(source).unwrap(),
            "{}",
            source.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_pass_killed_midway_is_completed_by_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    // 120 files of 400 kB of poorly compressible lines: a pass of some seconds in a debug build.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..120 {
        let dir = root.join(format!("--p{}--", i % 7));
        fs::create_dir_all(&dir).unwrap();
        let mut text = String::new();
        while text.len() < 400_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            text.push_str(&format!(
                "{{\"type\":\"message\",\"id\":\"{seed:016x}{:x}\"}}\n",
                seed.wrapping_mul(31)
            ));
        }
        fs::write(dir.join(format!("s{i:03}.jsonl")), text).unwrap();
    }
    let archive = tmp.path().join("archive");
    let mut child = Command::new(BIN)
        .args(["archive", "--root"])
        .arg(&root)
        .arg("--to")
        .arg(&archive)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once some sessions are archived, long before all are.
    let start = Instant::now();
    loop {
        let n = fs::read_dir(archive.join("sessions")).map_or(0, Iterator::count);
        if n >= 10 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the pass did not start"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the pass ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        archive.join("pass-running").exists(),
        "killed after the pass ended"
    );
    let partial = fs::read_dir(archive.join("sessions")).unwrap().count();
    assert!(
        partial < 120,
        "{partial} sessions: the pass was nearly done"
    );

    let next = pass(&root, &archive);
    assert_eq!(next["errors"], json!([]));
    assert_eq!(next["files"], 120);
    assert!(!archive.join("pass-running").exists());
    // No temporary file and no chunk file that no manifest names.
    for f in walk(&archive) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.starts_with(".tmp"), "{}", f.display());
        if name.ends_with(".zst") {
            let session = f.parent().unwrap().parent().unwrap();
            let m: Value =
                serde_json::from_slice(&fs::read(session.join("manifest.json")).unwrap()).unwrap();
            let listed = m["versions"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|v| v["chunks"].as_array().unwrap())
                .any(|c| c["file"] == name.as_str());
            assert!(listed, "{} is named by no manifest", f.display());
        }
    }
    assert_archive_matches(&archive, &root, &tmp.path().join("check"));
}

#[test]
fn leftovers_of_an_interrupted_pass_are_swept() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let archive = tmp.path().join("archive");
    pass(&t.root, &archive);
    let (dir, _) = manifest(&archive, &t.subagent);
    // What a crash between a chunk's rename and the manifest's could leave.
    fs::write(dir.join("v1/00000001.zst"), b"half").unwrap();
    fs::create_dir(dir.join("v2")).unwrap();
    fs::write(dir.join("v2/00000000.zst"), b"half").unwrap();
    fs::write(dir.join(".tmp-abc"), b"half").unwrap();
    fs::write(archive.join("pass-running"), b"").unwrap();
    let next = pass(&t.root, &archive);
    assert_eq!(next["unchanged"], 4);
    assert!(!dir.join("v1/00000001.zst").exists());
    assert!(!dir.join("v2").exists());
    assert!(!dir.join(".tmp-abc").exists());
    assert_eq!(zstd_cat(&dir, 1), fs::read(&t.subagent).unwrap());
}

#[test]
fn prune_lists_first_and_removes_only_with_apply() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let archive = tmp.path().join("archive");
    pass(&t.root, &archive);
    fs::remove_file(&t.claude).unwrap();
    let a = archive.to_str().unwrap();
    let dry = json_ok(&[
        "archive",
        "--to",
        a,
        "--prune",
        "--older-than",
        "0",
        "--json",
    ]);
    assert_eq!(dry["dryRun"], true);
    assert_eq!(dry["sessions"].as_array().unwrap().len(), 1, "{dry}");
    let (dir, _) = manifest(&archive, &t.claude);
    assert!(dir.join("manifest.json").exists());
    // Not old enough: nothing.
    let young = json_ok(&[
        "archive",
        "--to",
        a,
        "--prune",
        "--older-than",
        "1",
        "--json",
    ]);
    assert_eq!(young["sessions"], json!([]));
    let real = json_ok(&[
        "archive",
        "--to",
        a,
        "--prune",
        "--older-than",
        "0",
        "--apply",
        "--json",
    ]);
    assert_eq!(real["dryRun"], false);
    assert_eq!(real["sessions"][0]["key"], dry["sessions"][0]["key"]);
    assert!(!dir.exists());
    let listed = json_ok(&["list", "--archive", a, "--json"]);
    assert_eq!(listed["archived"].as_array().unwrap().len(), 3);
    // Usage: --prune needs its rule.
    assert_eq!(
        run(&["archive", "--to", a, "--prune"]).status.code(),
        Some(2)
    );
}

#[test]
fn a_directory_that_is_not_an_archive_is_never_written() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let other = tmp.path().join("other");
    fs::create_dir(&other).unwrap();
    fs::write(other.join("notes.txt"), "mine").unwrap();
    let out = run(&[
        "archive",
        "--root",
        t.root.to_str().unwrap(),
        "--to",
        other.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["kind"], "notAnArchive");
    assert_eq!(fs::read_dir(&other).unwrap().count(), 1);
}

#[test]
fn restore_cwd_moves_a_session_to_its_new_project() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let archive = tmp.path().join("archive");
    pass(&t.root, &archive);
    let a = archive.to_str().unwrap();
    let pi = json_ok(&["restore", a, "0193-pi", "--cwd", "/home/u/moved", "--json"]);
    let pi_path = PathBuf::from(pi["path"].as_str().unwrap());
    assert_eq!(
        pi_path,
        t.root
            .join("--home-u-moved--/2025-01-01T00-00-00-000Z_0193-pi.jsonl")
    );
    let text = fs::read_to_string(&pi_path).unwrap();
    let old = fs::read_to_string(&t.pi).unwrap();
    assert_eq!(
        text,
        old.replace("\"cwd\":\"/home/u/p\"", "\"cwd\":\"/home/u/moved\"")
    );
    let claude = json_ok(&[
        "restore",
        a,
        "6f0c3b1e-claude",
        "--cwd",
        "/home/u/moved",
        "--json",
    ]);
    assert_eq!(
        PathBuf::from(claude["path"].as_str().unwrap()),
        t.root.join("-home-u-moved/6f0c3b1e-claude.jsonl")
    );
    let sub = json_ok(&["restore", a, "agent-a1", "--cwd", "/home/u/moved", "--json"]);
    assert_eq!(
        PathBuf::from(sub["path"].as_str().unwrap()),
        t.root
            .join("-home-u-moved/6f0c3b1e-claude/subagents/agent-a1.jsonl")
    );
    assert!(
        fs::read_to_string(t.root.join("-home-u-moved/6f0c3b1e-claude.jsonl"))
            .unwrap()
            .contains("\"cwd\":\"/home/u/moved\"")
    );
    // A Codex rollout's cwd is not rewritten yet: refused, nothing written.
    let codex = run(&[
        "restore",
        a,
        "0193codex",
        "--cwd",
        "/home/u/moved",
        "--json",
    ]);
    assert_eq!(codex.status.code(), Some(10));
    // The originals are untouched.
    assert_eq!(fs::read_to_string(&t.pi).unwrap(), old);
}

/// Polls `f` for up to ten seconds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn archived_chunks(archive: &Path, source: &Path) -> Option<Vec<u64>> {
    if !archive.join("sessions").is_dir() {
        return None;
    }
    fs::read_dir(archive.join("sessions"))
        .ok()?
        .filter_map(|e| fs::read(e.ok()?.path().join("manifest.json")).ok())
        .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
        .find(|m| m["source"].as_str() == source.to_str())
        .map(|m| chunk_lengths(&m, m["versions"].as_array().unwrap().len() - 1))
}

#[test]
fn the_daemon_archives_as_files_change() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let root = fs::canonicalize(&t.root).unwrap();
    let archive = tmp.path().join("archive");
    let (d, _) = Daemon::start_with(
        &[&root],
        &Spawn {
            args: vec!["--archive", archive.to_str().unwrap()],
            ..Spawn::default()
        },
    );
    let claude = root.join("-home-u-q/6f0c3b1e-claude.jsonl");
    let size = fs::metadata(&claude).unwrap().len();
    eventually("the first pass", || {
        archived_chunks(&archive, &claude) == Some(vec![size])
    });
    fs::OpenOptions::new()
        .append(true)
        .open(&claude)
        .unwrap()
        .write_all(b"{\"type\":\"user\",\"uuid\":\"u9\"}\n")
        .unwrap();
    eventually("the append archived", || {
        archived_chunks(&archive, &claude) == Some(vec![size, 28])
    });
    // A session born after the daemon started.
    let born = root.join("-home-u-q/new-one.jsonl");
    fs::write(&born, "{\"type\":\"user\",\"uuid\":\"n1\"}\n").unwrap();
    // The whole file, not only a manifest: the watcher can see the file between its creation
    // and its first write and archive it empty, then archive the bytes on the next event.
    let born_size = fs::metadata(&born).unwrap().len();
    eventually("the new file archived", || {
        archived_chunks(&archive, &born) == Some(vec![born_size])
    });
    d.stop();

    // initializationOptions.archive, and one the daemon refuses.
    let archive2 = tmp.path().join("archive2");
    let mut d = Daemon::spawn(&[&root]);
    let init = d.request(
        "initialize",
        json!({"capabilities": {}, "initializationOptions": {"archive": archive2}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    eventually("archived from initializationOptions", || {
        archived_chunks(&archive2, &born).is_some()
    });
    d.stop();
    let mut d = Daemon::spawn(&[&root]);
    let init = d.request(
        "initialize",
        json!({"capabilities": {}, "initializationOptions": {"archive": 7}}),
    );
    assert_eq!(init["error"]["code"], -32602, "{init}");
    d.wait();
}

/// Text of `len` bytes that zstd cannot shrink much (64 symbols, random): lines of JSON.
fn noise(rng: &mut fastrand::Rng, len: usize) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        out.extend_from_slice(b"{\"type\":\"message\",\"text\":\"");
        out.extend((0..200).map(|_| ALPHABET[rng.usize(..ALPHABET.len())]));
        out.extend_from_slice(b"\"}\n");
    }
    out
}

/// Checks an archive copy left by a pass: no temporary file, no pass marker, no chunk file
/// that no manifest names, and every version of every session reads back whole (each chunk
/// against its checksum) as a prefix of its source. Returns each source's newest archived size.
fn assert_consistent(archive: &Path) -> std::collections::BTreeMap<PathBuf, u64> {
    assert!(
        !archive.join("pass-running").exists(),
        "the pass marker is gone"
    );
    let mut named = std::collections::BTreeSet::new();
    let mut sizes = std::collections::BTreeMap::new();
    for s in sessiond::archive::list_sessions(archive).unwrap() {
        let dir = archive.join("sessions").join(&s.key);
        named.insert(dir.join("manifest.json"));
        let source = fs::read(&s.manifest.source).unwrap();
        for v in &s.manifest.versions {
            for c in &v.chunks {
                named.insert(dir.join(v.dir()).join(&c.file));
            }
            let bytes = sessiond::archive::read_version(archive, &s.key, v).unwrap();
            assert_eq!(
                bytes[..],
                source[..bytes.len()],
                "{}: a prefix of the source",
                s.key
            );
        }
        sizes.insert(s.manifest.source.clone(), s.size);
    }
    for f in walk(&archive.join("sessions")) {
        assert!(named.contains(&f), "{} is named by a manifest", f.display());
    }
    sizes
}

/// A full disk: a pass into an archive on a 1 MiB tmpfs (mounted in a private user and mount
/// namespace, `unshare -rm`) that another file fills up. The pass stops at the first file that
/// does not fit with one clear error (`noSpace`, exit 2), leaves nothing half-written (no
/// temporary file, no chunk no manifest names, every session as complete as a pass left it,
/// its bytes checked); once the other file is removed the next pass archives the rest and the
/// archive restores every file byte for byte.
#[test]
fn a_full_disk_stops_the_pass_cleanly_and_the_next_completes() {
    let probe = Command::new("unshare")
        .args(["-rm", "true"])
        .stderr(Stdio::piped())
        .output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        let why = format!("unshare -rm is not available here: {probe:?}");
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!(
            "\n!!! SKIPPED a_full_disk_stops_the_pass_cleanly_and_the_next_completes: {why}\n"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("root");
    let extra = base.join("extra");
    let late = base.join("late");
    let mnt = base.join("mnt");
    let out = base.join("out");
    for d in [&root, &extra, &late, &mnt, &out] {
        fs::create_dir_all(d).unwrap();
    }
    let mut rng = fastrand::Rng::with_seed(46);
    // Eight sessions archived while there is room; then each grows, and eight new ones come.
    for i in 0..8 {
        let name = format!("s{i}.jsonl");
        fs::write(root.join(&name), noise(&mut rng, 24 * 1024)).unwrap();
        fs::write(extra.join(&name), noise(&mut rng, 8 * 1024)).unwrap();
        fs::write(late.join(format!("t{i}.jsonl")), noise(&mut rng, 32 * 1024)).unwrap();
    }
    let first_sizes: Vec<u64> = (0..8)
        .map(|i| {
            fs::metadata(root.join(format!("s{i}.jsonl")))
                .unwrap()
                .len()
        })
        .collect();
    let script = r#"
        set -u
        root=$1 extra=$2 late=$3 mnt=$4 out=$5 bin=$6
        mount -t tmpfs -o size=1m tmpfs "$mnt" || exit 90
        "$bin" archive --root "$root" --to "$mnt/archive" --json >"$out/pass0.json" 2>"$out/pass0.err"
        echo $? >"$out/pass0.rc"
        for f in "$extra"/*; do cat "$f" >>"$root/$(basename "$f")"; done
        mv "$late"/* "$root"/
        # Fill the file system, then give back 160 KiB: less than the pass needs.
        cat /dev/zero >"$mnt/filler" 2>/dev/null
        truncate -s -160K "$mnt/filler"
        "$bin" archive --root "$root" --to "$mnt/archive" --json >"$out/pass1.json" 2>"$out/pass1.err"
        echo $? >"$out/pass1.rc"
        cp -a "$mnt/archive" "$out/after-full"
        rm "$mnt/filler"
        "$bin" archive --root "$root" --to "$mnt/archive" --json >"$out/pass2.json" 2>"$out/pass2.err"
        echo $? >"$out/pass2.rc"
        cp -a "$mnt/archive" "$out/after-room"
    "#;
    let status = Command::new("unshare")
        .args(["-rm", "bash", "-c", script, "bash"])
        .args([&root, &extra, &late, &mnt, &out])
        .arg(BIN)
        .env(
            "XDG_CACHE_HOME",
            std::env::temp_dir().join("sessiond-archive-test-cache"),
        )
        .status()
        .unwrap();
    assert!(status.success(), "the script ran: {status:?}");
    let read = |name: &str| fs::read_to_string(out.join(name)).unwrap();
    assert_eq!(read("pass0.rc").trim(), "0", "{}", read("pass0.err"));
    let pass0: Value = serde_json::from_str(&read("pass0.json")).unwrap();
    assert_eq!(pass0["added"], 8, "{pass0}");

    // The pass on the full disk: one clear error, and an archive that is whole.
    assert_eq!(read("pass1.rc").trim(), "2", "{}", read("pass1.err"));
    let err: Value = serde_json::from_str(&read("pass1.json")).unwrap();
    assert_eq!(err["error"]["kind"], "noSpace", "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("No space left on device")
            && message.contains("the next pass with room archives the rest"),
        "{message}"
    );
    let full = assert_consistent(&out.join("after-full"));
    let sizes: Vec<u64> = full.values().copied().collect();
    let complete = full
        .iter()
        .filter(|(src, size)| fs::metadata(src).unwrap().len() == **size)
        .count();
    assert!(
        complete < 16,
        "the disk filled before the pass ended: {sizes:?}"
    );
    for i in 0..8 {
        let size = full[&root.join(format!("s{i}.jsonl"))];
        assert!(
            size == first_sizes[i]
                || size
                    == fs::metadata(root.join(format!("s{i}.jsonl")))
                        .unwrap()
                        .len(),
            "s{i}: as the first pass left it or complete, never part of an append: {size}"
        );
    }

    // With room again, the next pass completes it.
    assert_eq!(read("pass2.rc").trim(), "0", "{}", read("pass2.err"));
    let room = assert_consistent(&out.join("after-room"));
    assert_eq!(room.len(), 16);
    for (src, size) in &room {
        assert_eq!(*size, fs::metadata(src).unwrap().len(), "{}", src.display());
    }
    let restored = base.join("restored");
    assert_archive_matches(&out.join("after-room"), &root, &restored);
}

/// `search --json` hits for `query` over `roots`, with the archive when given.
fn search_hits(index: &Path, roots: &[&Path], archive: Option<&Path>, query: &str) -> Value {
    let mut args = vec![
        "search",
        query,
        "--json",
        "--index-dir",
        index.to_str().unwrap(),
    ];
    for r in roots {
        args.extend(["--root", r.to_str().unwrap()]);
    }
    if let Some(a) = archive {
        args.extend(["--archive", a.to_str().unwrap()]);
    }
    json_ok(&args)
}

/// The hits' (path, archiveKey present, archivedOnly) triples, sorted.
fn hit_origins(found: &Value) -> Vec<(String, bool, Value)> {
    let mut out: Vec<(String, bool, Value)> = found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_owned(),
                h.get("archiveKey").is_some(),
                h.get("archivedOnly").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Search over the archive: a session Claude's cleanup deleted is found there, its hits
/// marked `archivedOnly` and named by the original path (and `restore` takes its key); a
/// session found live is never found twice; one outside the roots searched comes from the
/// archive (`archivedOnly: false`), its appended bytes found after the next pass; a restored
/// one is found live again. The daemon's `session/search` does the same when it archives.
#[test]
fn search_over_the_archive_finds_sessions_deleted_at_the_source() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let root = fs::canonicalize(&t.root).unwrap();
    let claude = root.join("-home-u-q/6f0c3b1e-claude.jsonl");
    let pi = fs::canonicalize(&t.pi).unwrap();
    let append = |path: &Path, line: &str| {
        let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
        writeln!(f, "{line}").unwrap();
    };
    append(
        &claude,
        r#"{"parentUuid":"u1","type":"user","uuid":"u2","cwd":"/home/u/q","sessionId":"6f0c3b1e-claude","message":{"role":"user","content":"plant the marigold"}}"#,
    );
    append(
        &pi,
        r#"{"type":"message","id":"a2","parentId":"a1","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"user","content":"marigold as well"}}"#,
    );
    let archive = tmp.path().join("archive");
    let index = tmp.path().join("cache/index");
    pass(&root, &archive);
    let claude_bytes = fs::read(&claude).unwrap();
    fs::remove_file(&claude).unwrap();
    let (p, c) = (
        pi.to_str().unwrap().to_owned(),
        claude.to_str().unwrap().to_owned(),
    );

    let live = search_hits(&index, &[&root], None, "marigold");
    assert_eq!(hit_origins(&live), vec![(p.clone(), false, Value::Null)]);
    let both = search_hits(&index, &[&root], Some(&archive), "marigold");
    assert_eq!(
        hit_origins(&both),
        vec![
            (p.clone(), false, Value::Null),
            (c.clone(), true, json!(true))
        ],
        "{both}"
    );
    assert_eq!(both["total"], 2);
    let hit = both["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["path"] == c.as_str())
        .unwrap();
    assert_eq!(hit["entryId"], "u2");
    assert_eq!(hit["format"], "claude-code");
    assert!(
        hit["snippet"].as_str().unwrap().contains("**marigold**"),
        "{hit}"
    );
    let key = hit["archiveKey"].as_str().unwrap();
    let restored = json_ok(&["restore", archive.to_str().unwrap(), key, "--json"]);
    assert_eq!(fs::read(&claude).unwrap(), claude_bytes, "{restored}");
    let again = search_hits(&index, &[&root], Some(&archive), "marigold");
    assert_eq!(
        hit_origins(&again),
        vec![
            (p.clone(), false, Value::Null),
            (c.clone(), false, Value::Null)
        ],
        "restored, it is found live, once"
    );

    // A session outside the roots searched comes from the archive, and so do its appends.
    let pi_dir = pi.parent().unwrap();
    let outside = search_hits(&index, &[pi_dir], Some(&archive), "marigold");
    assert_eq!(
        hit_origins(&outside),
        vec![
            (p.clone(), false, Value::Null),
            (c.clone(), true, json!(false))
        ],
        "{outside}"
    );
    append(
        &claude,
        r#"{"parentUuid":"u2","type":"user","uuid":"u3","cwd":"/home/u/q","sessionId":"6f0c3b1e-claude","message":{"role":"user","content":"and the zinnia"}}"#,
    );
    assert!(
        search_hits(&index, &[pi_dir], Some(&archive), "zinnia")["hits"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    pass(&root, &archive);
    let grown = search_hits(&index, &[pi_dir], Some(&archive), "zinnia");
    assert_eq!(hit_origins(&grown), vec![(c.clone(), true, json!(false))]);
    assert_eq!(grown["hits"][0]["entryId"], "u3");

    // The daemon that archives searches the archive too.
    fs::remove_file(&claude).unwrap();
    let (mut d, _) = Daemon::start_with(
        &[&root],
        &Spawn {
            args: vec![
                "--archive",
                archive.to_str().unwrap(),
                "--index-dir",
                tmp.path().join("daemon-cache/index").to_str().unwrap(),
            ],
            ..Spawn::default()
        },
    );
    let found = d.call("session/search", json!({"query": "zinnia"}));
    assert_eq!(
        hit_origins(&found),
        vec![(c.clone(), true, json!(true))],
        "{found}"
    );
    d.stop();
}

/// The number of manifests the daemon's `n`th archive view sync read (from its debug log).
fn view_reads(d: &Daemon, n: usize) -> usize {
    let mut reads = Vec::new();
    eventually("the daemon logged its archive view sync", || {
        reads = d
            .stderr()
            .lines()
            .filter_map(|l| {
                l.split_once("archive view: ")?
                    .1
                    .split_once(" of ")?
                    .0
                    .parse()
                    .ok()
            })
            .collect::<Vec<usize>>();
        reads.len() >= n
    });
    assert_eq!(reads.len(), n, "one sync per search: {reads:?}");
    reads[n - 1]
}

/// The daemon's archive search keeps its view across searches: the first reads every
/// manifest, one with nothing archived since reads none, one after a session grew or was born
/// reads that one manifest; and the results stay right (the appended entry found in the
/// archived session, the new one too, the others as before).
#[test]
fn the_daemon_s_archive_search_reads_only_the_manifests_that_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let pi = |path: &Path, id: &str, text: &str| {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(
            path,
            format!(
                "{{\"type\":\"session\",\"version\":3,\"id\":\"{id}\",\"timestamp\":\"2025-01-01T00:00:00.000Z\",\"cwd\":\"/home/u/p\"}}\n\
                 {{\"type\":\"message\",\"id\":\"a1\",\"parentId\":null,\"timestamp\":\"2025-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\"}}}}\n"
            ),
        )
        .unwrap();
    };
    fs::create_dir_all(&root).unwrap();
    let root = fs::canonicalize(&root).unwrap();
    let keep = root.join("keep");
    let kept = keep.join("2025-01-01T00-00-00-000Z_k.jsonl");
    let other = root.join("other/2025-01-01T00-00-00-000Z_o.jsonl");
    let gone: Vec<PathBuf> = (1..=3)
        .map(|i| root.join(format!("gone/2025-01-01T00-00-00-000Z_g{i}.jsonl")))
        .collect();
    pi(&kept, "k", "marigold kept");
    pi(&other, "o", "marigold elsewhere");
    for (i, g) in gone.iter().enumerate() {
        pi(g, &format!("g{i}"), "marigold gone");
    }
    let archive = tmp.path().join("archive");
    let index = tmp.path().join("cache/index");
    let (mut d, _) = Daemon::start_with(
        &[&root],
        &Spawn {
            args: vec![
                "--archive",
                archive.to_str().unwrap(),
                "--index-dir",
                index.to_str().unwrap(),
            ],
            env: vec![("SESSIOND_LOG", "warn,sessiond::archive::view=debug")],
            capture_stderr: true,
        },
    );
    let all: Vec<PathBuf> = [kept.clone(), other.clone()]
        .into_iter()
        .chain(gone.iter().cloned())
        .collect();
    for f in &all {
        let size = fs::metadata(f).unwrap().len();
        eventually("the first pass", || {
            archived_chunks(&archive, f) == Some(vec![size])
        });
    }
    for g in &gone {
        fs::remove_file(g).unwrap();
    }
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    // Searched over keep/: the others come from the archive.
    let search = |d: &mut Daemon, q: &str| {
        d.call(
            "session/search",
            json!({"query": q, "roots": [keep.to_str().unwrap()]}),
        )
    };
    let mut marigold = vec![
        (s(&kept), false, Value::Null),
        (s(&other), true, json!(false)),
    ];
    marigold.extend(gone.iter().map(|g| (s(g), true, json!(true))));
    marigold.sort_by(|a, b| a.0.cmp(&b.0));

    let found = search(&mut d, "marigold");
    assert_eq!(hit_origins(&found), marigold, "{found}");
    assert_eq!(
        view_reads(&d, 1),
        5,
        "the first search reads every manifest"
    );
    let found = search(&mut d, "marigold");
    assert_eq!(hit_origins(&found), marigold, "{found}");
    assert_eq!(
        view_reads(&d, 2),
        0,
        "nothing archived since: no manifest read"
    );

    // One archived change: the session outside keep/ grows.
    let size = fs::metadata(&other).unwrap().len();
    fs::OpenOptions::new()
        .append(true)
        .open(&other)
        .unwrap()
        .write_all(b"{\"type\":\"message\",\"id\":\"a2\",\"parentId\":\"a1\",\"timestamp\":\"2025-01-01T00:00:02.000Z\",\"message\":{\"role\":\"user\",\"content\":\"and the zinnia\"}}\n")
        .unwrap();
    let grown = fs::metadata(&other).unwrap().len();
    eventually("the append archived", || {
        archived_chunks(&archive, &other) == Some(vec![size, grown - size])
    });
    let found = search(&mut d, "zinnia");
    assert_eq!(
        hit_origins(&found),
        vec![(s(&other), true, json!(false))],
        "{found}"
    );
    assert_eq!(found["hits"][0]["entryId"], "a2");
    assert_eq!(view_reads(&d, 3), 1, "one session grew: one manifest read");

    // And one born.
    let born = root.join("other/2025-01-01T00-00-00-000Z_n.jsonl");
    pi(&born, "n", "a zinnia too");
    // Its bytes, not only a manifest (it can be archived empty between creation and write).
    let born_size = fs::metadata(&born).unwrap().len();
    eventually("the new session archived", || {
        archived_chunks(&archive, &born) == Some(vec![born_size])
    });
    let found = search(&mut d, "zinnia");
    let mut zinnia = vec![
        (s(&other), true, json!(false)),
        (s(&born), true, json!(false)),
    ];
    zinnia.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(hit_origins(&found), zinnia, "{found}");
    assert_eq!(view_reads(&d, 4), 1, "one session born: one manifest read");
    let found = search(&mut d, "marigold");
    assert_eq!(hit_origins(&found), marigold, "{found}");
    assert_eq!(view_reads(&d, 5), 0);
    d.stop();
}
