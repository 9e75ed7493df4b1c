//! `sessiond list` and `session/list` with what a picker shows: name, first user message,
//! message, entry and leaf counts, cwd, size, modification time and the token estimate of the
//! default context, compared with pi 1.6.0's own (`SessionManager.listAll` and
//! `estimateProjectedContextTokens`, tests/oracle/list.mjs) on every real and synthetic
//! session; and the listing cache: an unchanged file is not read again (shown by changing a
//! file's bytes behind the cache's back, size, mtime and inode kept), a changed one is. Claude
//! Code's transcripts (written by the real Claude Code, `tests/data/claude/real/`) are listed
//! beside pi's sessions, a subagent's marked with the transcript that started it; the default
//! roots are pi's sessions directory and Claude Code's projects directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use support::{
    Daemon, Spawn, append, checked, claude_prompt, cli_json, common, mixed_sessions,
    write_v3_session,
};

/// pi's `firstMessage` as sessiond shows it: whitespace runs as one space, at most 80 code
/// points (a cut text ends with `…`).
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars: Vec<char> = joined.chars().collect();
    if chars.len() <= 80 {
        return joined;
    }
    let mut cut: String = chars[..79].iter().collect();
    if cut.ends_with(' ') {
        cut.pop();
    }
    cut + "…"
}

fn fixtures() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["examples", "tests/data/synthetic"] {
        for e in std::fs::read_dir(common::repo(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "jsonl") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

fn by_path(list: &Value) -> HashMap<String, Value> {
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["path"].as_str().unwrap().to_owned(), s.clone()))
        .collect()
}

/// `sessiond list --root ROOT --cache CACHE --json`.
fn list(root: &Path, cache: &Path) -> Value {
    cli_json(&[
        "list",
        "--root",
        root.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
        "--json",
    ])
}

#[test]
fn listed_facts_equal_pis_on_every_fixture() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    std::fs::create_dir(&root).unwrap();
    let cache = tmp.path().join("cache.json");
    let copies: Vec<PathBuf> = fixtures()
        .iter()
        .map(|f| common::copy_into(&root, f))
        .collect();
    assert!(copies.len() >= 25, "{} fixtures", copies.len());
    let root_s = root.to_str().unwrap();
    let cache_s = cache.to_str().unwrap();
    let listed = cli_json(&["list", "--root", root_s, "--cache", cache_s, "--json"]);
    assert_eq!(listed["read"], json!(copies.len()), "{listed}");
    let ours = by_path(&listed);
    let canonical_root = std::fs::canonicalize(&root).unwrap();
    for copy in &copies {
        let key = canonical_root.join(copy.file_name().unwrap());
        let s = &ours[key.to_str().unwrap()];
        let meta = std::fs::metadata(copy).unwrap();
        assert_eq!(s["size"], json!(meta.len()), "{s}");
        let mtime_ms = meta
            .modified()
            .unwrap()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert_eq!(s["modifiedMs"], json!(mtime_ms), "{s}");
    }

    // The daemon lists the same, through its own cache.
    let xdg = tmp.path().join("xdg");
    let xdg_s = xdg.to_str().unwrap().to_owned();
    let mut d = Daemon::spawn_with(
        &[&root],
        &Spawn {
            env: vec![("XDG_CACHE_HOME", &xdg_s)],
            ..Spawn::default()
        },
    );
    d.request("initialize", json!({"capabilities": {}}));
    d.notify("initialized", json!({}));
    let from_daemon = by_path(&checked(&mut d, "session/list", json!({})));
    assert_eq!(from_daemon, ours);
    assert!(
        xdg.join("sessiond/list-cache.json").is_file(),
        "the daemon keeps its listing cache in $XDG_CACHE_HOME/sessiond"
    );
    d.stop();

    let Some(oracle) = common::oracle_dir("session list facts against pi") else {
        return;
    };
    let mut compared = 0;
    for (line, copy) in common::oracle_lines(&oracle, "list.mjs", &copies)
        .iter()
        .zip(&copies)
    {
        let pi = common::parse_json(line).unwrap();
        let f = copy.file_name().unwrap().to_str().unwrap();
        assert!(pi.get("error").is_none(), "pi failed on {f}: {pi}");
        let key = canonical_root.join(f);
        let s = &ours[key.to_str().unwrap()];
        // pi's buildSessionInfo throws on a user message whose content is null, or neither a
        // string nor an array, and its picker leaves such a file out; sessiond lists it (the
        // counts and tokens are still pi's).
        if !pi["messageCount"].is_null() {
            assert_eq!(s["name"].as_str(), pi["name"].as_str(), "{f}: name");
            let first = pi["firstMessage"].as_str().unwrap();
            let expected = if first == "(no messages)" {
                Value::Null
            } else {
                json!(one_line(first))
            };
            assert_eq!(s["firstMessage"], expected, "{f}: firstMessage");
            assert_eq!(s["messageCount"], pi["messageCount"], "{f}: messageCount");
            assert_eq!(s["cwd"].as_str().unwrap_or(""), pi["cwd"], "{f}: cwd");
        } else {
            assert!(
                ["null-content-messages.jsonl", "content-of-any-type.jsonl"].contains(&f),
                "pi lists no info for {f}"
            );
        }
        assert_eq!(s["entryCount"], pi["entryCount"], "{f}: entryCount");
        assert_eq!(s["leafCount"], pi["leafCount"], "{f}: leafCount");
        match pi["tokens"].as_f64() {
            Some(t) => assert_eq!(s["tokenEstimate"], json!(t as u64), "{f}: tokenEstimate"),
            None => assert_eq!(s["tokenEstimate"], Value::Null, "{f}: tokenEstimate"),
        }
        compared += 1;
    }
    assert_eq!(compared, copies.len());
}

/// Rewrites `path` in place (same inode, same size) with `from` replaced by `to` (same
/// length), and puts its modification time back: only a read of the bytes can tell.
fn change_behind_the_cache(path: &Path, from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from));
    let changed = text.replacen(from, to, 1);
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::io::Write::write_all(&mut &f, changed.as_bytes()).unwrap();
    f.set_modified(mtime).unwrap();
}

fn touch(path: &Path) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() + Duration::from_secs(5))
        .unwrap();
}

#[test]
fn an_unchanged_file_is_answered_from_the_cache_a_changed_one_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    std::fs::create_dir(&root).unwrap();
    let file = root.join("a.jsonl");
    write_v3_session(&file, 4);
    let other = root.join("b.jsonl");
    std::fs::copy(&file, &other).unwrap();
    let cache = tmp.path().join("cache.json");
    let list = || list(&root, &cache);
    let first_of = |l: &Value, name: &str| {
        l["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["path"].as_str().unwrap().ends_with(name))
            .map(|s| s["firstMessage"].clone())
    };
    let l1 = list();
    assert_eq!(l1["read"], 2);
    assert_eq!(
        first_of(&l1, "a.jsonl"),
        Some(json!("question 0 with some words: ünïcödé ✓"))
    );
    assert_eq!(l1["sessions"][0]["entryCount"], 4);
    assert_eq!(l1["sessions"][0]["leafCount"], 1);

    // Same size, mtime and inode: answered from the cache, the old text is shown.
    change_behind_the_cache(&file, "question 0", "QUESTION 0");
    let l2 = list();
    assert_eq!(l2["read"], 0, "{l2}");
    assert_eq!(
        first_of(&l2, "a.jsonl"),
        Some(json!("question 0 with some words: ünïcödé ✓"))
    );

    // A new mtime: read again.
    touch(&file);
    let l3 = list();
    assert_eq!(l3["read"], 1, "{l3}");
    assert_eq!(
        first_of(&l3, "a.jsonl"),
        Some(json!("QUESTION 0 with some words: ünïcödé ✓"))
    );

    // Deleted: gone from the listing and the cache; a new file is read.
    std::fs::remove_file(&other).unwrap();
    let l4 = list();
    assert_eq!(l4["read"], 0);
    assert_eq!(first_of(&l4, "b.jsonl"), None);
    let cached = std::fs::read_to_string(&cache).unwrap();
    assert!(!cached.contains("b.jsonl"), "{cached}");

    // The daemon: a second session/list of unchanged files reads nothing either.
    let xdg = tmp.path().join("xdg");
    let xdg_s = xdg.to_str().unwrap().to_owned();
    let (mut d, _) = Daemon::start_with(
        &[&root],
        &Spawn {
            env: vec![("XDG_CACHE_HOME", &xdg_s)],
            ..Spawn::default()
        },
    );
    let a = checked(&mut d, "session/list", json!({}));
    assert_eq!(
        first_of(&a, "a.jsonl"),
        Some(json!("QUESTION 0 with some words: ünïcödé ✓"))
    );
    change_behind_the_cache(&file, "QUESTION 0", "question 0");
    let b = checked(&mut d, "session/list", json!({}));
    assert_eq!(
        first_of(&b, "a.jsonl"),
        Some(json!("QUESTION 0 with some words: ünïcödé ✓")),
        "an unchanged stamp is answered from the daemon's cache"
    );
    touch(&file);
    let c = checked(&mut d, "session/list", json!({}));
    assert_eq!(
        first_of(&c, "a.jsonl"),
        Some(json!("question 0 with some words: ünïcödé ✓"))
    );
    d.stop();
}

#[test]
fn a_cache_file_that_is_not_a_listing_cache_is_never_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    std::fs::create_dir(&root).unwrap();
    write_v3_session(&root.join("a.jsonl"), 2);
    // A file of the user's, a JSON file of another shape, and a directory.
    let notes = tmp.path().join("notes.txt");
    std::fs::write(&notes, "important notes\n").unwrap();
    let other_json = tmp.path().join("settings.json");
    std::fs::write(&other_json, r#"{"version":1,"theme":"dark"}"#).unwrap();
    let dir = tmp.path().join("a-directory");
    std::fs::create_dir(&dir).unwrap();
    for (cache, before) in [
        (&notes, Some("important notes\n")),
        (&other_json, Some(r#"{"version":1,"theme":"dark"}"#)),
        (&dir, None),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .args(["list", "--root", root.to_str().unwrap()])
            .args(["--cache", cache.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        // The listing itself is answered; only the cache is not kept.
        assert_eq!(out.status.code(), Some(0));
        let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("cannot save the listing cache"), "{stderr}");
        match before {
            Some(text) => assert_eq!(std::fs::read_to_string(cache).unwrap(), text),
            None => assert!(cache.is_dir()),
        }
    }
    // A listing cache (any version) is replaced as before.
    let cache = tmp.path().join("cache.json");
    std::fs::write(&cache, r#"{"version":0,"sessions":{}}"#).unwrap();
    let listed = list(&root, &cache);
    assert_eq!(listed["read"], 1);
    let kept: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
    assert_eq!(kept["version"], 3);
    assert_eq!(kept["sessions"].as_object().map(|s| s.len()), Some(1));
}

#[test]
fn a_root_that_does_not_exist_is_named_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-sessions-here");
    for command in [&["list"][..], &["search", "anything"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .args(command)
            .args(["--root", missing.to_str().unwrap(), "--json"])
            .env("XDG_CACHE_HOME", tmp.path().join("cache"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{command:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{}: no such directory", missing.display())),
            "{command:?}: {stderr}"
        );
        // stdout is still one JSON document.
        serde_json::from_slice::<Value>(&out.stdout).unwrap();
    }
}

/// A corrupt file is listed as its agent reads it, and marked with its corrupt spots, so a
/// user learns before opening it that strict reads refuse it: a line that is not JSON in a pi
/// session, a duplicate uuid and a dangling parent in Claude Code transcripts. Every count
/// equals the diagnostics `tree --allow-corrupt --json` reports for the same file; a clean
/// file says 0.
#[test]
fn corrupt_files_are_listed_with_their_corrupt_spots() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let repo = common::repo_root();
    let clean = root.join("clean.jsonl");
    std::fs::copy(repo.join("examples/pi-v3-branched.jsonl"), &clean).unwrap();
    let text = std::fs::read_to_string(&clean).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(500, "{not json");
    std::fs::write(root.join("garbage.jsonl"), lines.join("\n") + "\n").unwrap();
    for name in ["duplicate-uuid.jsonl", "dangling-parent.jsonl"] {
        std::fs::copy(repo.join("tests/data/claude").join(name), root.join(name)).unwrap();
    }
    let listed = by_path(&list(&root, &tmp.path().join("cache.json")));
    assert_eq!(listed.len(), 4, "{listed:?}");
    for (path, row) in &listed {
        let tree = cli_json(&["tree", path, "--allow-corrupt", "--json"]);
        let expected = tree["diagnostics"].as_array().map_or(0, Vec::len);
        assert_eq!(row["corruptions"], json!(expected), "{path}");
        assert_eq!(
            expected == 0,
            path.ends_with("clean.jsonl"),
            "{path}: {tree}"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["list", "--root", root.to_str().unwrap(), "--cache"])
        .arg(tmp.path().join("cache2.json"))
        .output()
        .unwrap();
    let human = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        human.matches("`sessiond check` says where").count(),
        3,
        "{human}"
    );
}

/// What a Claude Code transcript's lines say, counted here from the JSON: its `sessionId`, the
/// first `cwd` and `timestamp`, its `user`/`assistant` lines, its tree lines, and the tree
/// lines no line names as parent.
struct Counted {
    session_id: String,
    cwd: Value,
    created: Value,
    messages: usize,
    entries: usize,
    leaves: usize,
}

fn count_transcript(path: &Path) -> Counted {
    let lines: Vec<Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ty = |l: &Value| l["type"].as_str().unwrap_or("").to_owned();
    let tree: Vec<&Value> = lines
        .iter()
        .filter(|l| ["user", "assistant", "attachment", "system"].contains(&ty(l).as_str()))
        .collect();
    let parents: std::collections::HashSet<&str> = tree
        .iter()
        .filter_map(|l| l["parentUuid"].as_str())
        .collect();
    Counted {
        session_id: lines[0]["sessionId"].as_str().unwrap().to_owned(),
        cwd: lines.iter().find_map(|l| l.get("cwd")).cloned().unwrap(),
        created: lines[0]["timestamp"].clone(),
        messages: tree
            .iter()
            .filter(|l| ["user", "assistant"].contains(&ty(l).as_str()))
            .count(),
        entries: tree.len(),
        leaves: tree
            .iter()
            .filter(|l| !parents.contains(l["uuid"].as_str().unwrap()))
            .count(),
    }
}

#[test]
fn claude_transcripts_are_listed_beside_pi_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let m = mixed_sessions(&tmp.path().join("projects"));
    let cache = tmp.path().join("cache.json");
    let list = || {
        cli_json(&[
            "list",
            "--root",
            m.root.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
            "--json",
        ])
    };
    let listed = list();
    assert_eq!(listed["read"], 5, "{listed}");
    assert_eq!(listed["skipped"], json!([]), "{listed}");
    let ours = by_path(&listed);
    let at = |p: &Path| ours[p.to_str().unwrap()].clone();
    for pi in [&m.pi_beside, &m.pi_apart] {
        let s = at(pi);
        assert_eq!(
            (&s["format"], &s["id"], &s["messageCount"], &s["leafId"]),
            (
                &json!("pi"),
                &json!("4f9c7d0e-0000-4000-8000-000000000001"),
                &json!(4),
                &json!("e0000003")
            ),
            "{s}"
        );
        assert!(s.get("subagent").is_none(), "{s}");
    }
    // (file, first prompt, default leaf, tokens: the usage of the last response on the path
    // to that leaf, input + output, the cache counts being 0 in these files)
    let expected = [
        (
            &m.compacted,
            "Run a command",
            "ec228510-5a3b-4462-aad5-e3f6654df41b",
            119 + 10,
        ),
        (
            &m.with_subagent,
            "Delegate to an agent",
            "b5f25f4b-b9f4-4be5-8ccd-910aa1592fa4",
            125 + 10,
        ),
        (
            &m.subagent,
            "SUBAGENT TASK: list the work directory and report.",
            "79bd0d52-e4d7-410a-8077-4216dd3e7ef2",
            123 + 10,
        ),
    ];
    for (file, first, leaf, tokens) in expected {
        let s = at(file);
        let c = count_transcript(file);
        let id = if file == &m.subagent {
            file.file_stem().unwrap().to_str().unwrap().to_owned()
        } else {
            c.session_id.clone()
        };
        assert_eq!(s["format"], "claude-code", "{s}");
        assert_eq!(s["id"], json!(id), "{s}");
        assert_eq!((&s["cwd"], &s["created"]), (&c.cwd, &c.created), "{s}");
        assert_eq!(s["firstMessage"], first, "{s}");
        assert_eq!(s["messageCount"], json!(c.messages), "{s}");
        assert_eq!(s["entryCount"], json!(c.entries), "{s}");
        assert_eq!(s["leafCount"], json!(c.leaves), "{s}");
        assert_eq!(s["leafId"], leaf, "{s}");
        assert_eq!(s["tokenEstimate"], json!(tokens), "{s}");
        assert!(s.get("name").is_none(), "{s}");
    }
    assert!(at(&m.compacted).get("subagent").is_none());
    assert_eq!(
        at(&m.subagent)["subagent"],
        json!({"agentId": "a46c5597fd4041ded", "parentPath": m.with_subagent,
            "agentType": "general-purpose", "description": "Inspect the directory",
            "toolUseId": "toolu_21_0"})
    );

    // Printed for a person: the subagent under the transcript that started it.
    let out = Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["list", "--root", m.root.to_str().unwrap()])
        .args(["--cache", cache.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let parent = lines
        .iter()
        .position(|l| l.contains(m.with_subagent.to_str().unwrap()))
        .unwrap();
    assert!(
        lines[parent + 1].starts_with("    ")
            && lines[parent + 1].contains("claude-code  SUBAGENT TASK"),
        "{text}"
    );
    assert!(
        lines[parent + 2]
            .contains("subagent a46c5597fd4041ded (general-purpose: Inspect the directory)"),
        "{text}"
    );
    assert_eq!(text.matches("  pi  ").count(), 2, "{text}");

    // A name, in Claude Code's order whatever the order of the lines; only the changed file
    // is read again, and a line appended moves the leaf.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&m.compacted)
        .unwrap();
    for line in [
        json!({"type": "custom-title", "customTitle": "Referee run", "sessionId": "s"}),
        json!({"type": "ai-title", "aiTitle": "A later title of the model's", "sessionId": "s"}),
        json!({"type": "summary", "summary": "An older summary", "leafUuid": "x"}),
    ] {
        std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
    }
    let prompt = claude_prompt(
        "0a0a0a0a-0000-4000-8000-000000000001",
        "ec228510-5a3b-4462-aad5-e3f6654df41b",
        "One more thing",
    );
    std::io::Write::write_all(&mut f, format!("{prompt}\n").as_bytes()).unwrap();
    drop(f);
    let listed = list();
    assert_eq!(listed["read"], 1, "{listed}");
    let ours = by_path(&listed);
    let s = &ours[m.compacted.to_str().unwrap()];
    assert_eq!(s["name"], "Referee run", "{s}");
    assert_eq!(s["leafId"], "0a0a0a0a-0000-4000-8000-000000000001", "{s}");
    // No response after the new prompt: the tokens are still the last response's.
    assert_eq!(s["tokenEstimate"], 129, "{s}");

    // The daemon lists the same, through its own cache.
    let xdg = tmp.path().join("xdg");
    let xdg_s = xdg.to_str().unwrap().to_owned();
    let mut d = Daemon::spawn_with(
        &[&m.root],
        &Spawn {
            env: vec![("XDG_CACHE_HOME", &xdg_s)],
            ..Spawn::default()
        },
    );
    d.request("initialize", json!({"capabilities": {}}));
    d.notify("initialized", json!({}));
    let from_daemon = by_path(&checked(&mut d, "session/list", json!({})));
    assert_eq!(from_daemon, ours);
    d.stop();
}

#[test]
fn the_default_roots_are_pis_sessions_and_claude_codes_projects() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let pi_dir = home.join(".pi/agent/sessions/--work--");
    std::fs::create_dir_all(&pi_dir).unwrap();
    write_v3_session(&pi_dir.join("a.jsonl"), 2);
    let config = tmp.path().join("claude-config");
    let m = mixed_sessions(&config.join("projects"));
    let list = |claude_config: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .args(["list", "--json"])
            .env("HOME", &home)
            .env("CLAUDE_CONFIG_DIR", claude_config)
            .env("XDG_CACHE_HOME", tmp.path().join("cache"))
            .env_remove("PI_CODING_AGENT_DIR")
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::describe(&out));
        common::parse_json(&out.stdout).unwrap()
    };
    let pi_root = std::fs::canonicalize(home.join(".pi/agent/sessions")).unwrap();
    let listed = list(&config);
    assert_eq!(listed["roots"], json!([pi_root, m.root]), "{listed}");
    let formats: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["format"].as_str().unwrap())
        .collect();
    assert_eq!(
        formats.iter().filter(|f| **f == "pi").count(),
        3,
        "{listed}"
    );
    assert_eq!(
        formats.iter().filter(|f| **f == "claude-code").count(),
        3,
        "{listed}"
    );
    // No Claude Code projects directory: pi's only.
    let listed = list(&tmp.path().join("no-claude-here"));
    assert_eq!(listed["roots"], json!([pi_root]), "{listed}");
}

/// `session/list` without `root` lists every session root the daemon was started with (pi's
/// sessions directory and Claude Code's projects directory), each file once; with `root`, that
/// directory only.
#[test]
fn the_daemon_lists_every_root_without_a_root_param() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let pi_root = base.join("pi-sessions");
    std::fs::create_dir_all(&pi_root).unwrap();
    let pi_file = pi_root.join("only-pi.jsonl");
    write_v3_session(&pi_file, 3);
    let m = mixed_sessions(&base.join("projects"));
    let cache = base.join("cache");
    let options = Spawn {
        env: vec![("XDG_CACHE_HOME", cache.to_str().unwrap())],
        ..Default::default()
    };
    let (mut d, _) = Daemon::start_with(&[&pi_root, &m.root], &options);
    let paths = |r: &Value| -> Vec<String> {
        let mut v: Vec<String> = r["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["path"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    let all = d.call("session/list", json!({}));
    assert_eq!(all["roots"], json!([pi_root, m.root]), "{all}");
    assert_eq!(all["root"], json!(pi_root));
    let mut want: Vec<String> = [
        &pi_file,
        &m.compacted,
        &m.with_subagent,
        &m.subagent,
        &m.pi_beside,
        &m.pi_apart,
    ]
    .iter()
    .map(|p| p.to_str().unwrap().to_owned())
    .collect();
    want.sort();
    assert_eq!(paths(&all), want, "both roots' sessions, each once");
    let claude_only = d.call("session/list", json!({"root": m.root}));
    assert_eq!(claude_only["roots"], json!([m.root]));
    assert!(!paths(&claude_only).contains(&pi_file.to_str().unwrap().to_owned()));
    assert_eq!(paths(&claude_only).len(), 5);
    d.stop();
}

#[test]
fn a_file_name_that_is_not_utf8_is_listed_shown_as_text_and_named_by_its_uri() {
    use std::os::unix::ffi::OsStringExt;
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let index = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_file = cache.path().join("list-cache.json");
    support::write_v3_session(&root.join("good.jsonl"), 4);
    let latin1 = root.join(std::ffi::OsString::from_vec(
        b"caf\xe9-latin1.jsonl".to_vec(),
    ));
    support::write_v3_session(&latin1, 6);
    let uri = format!("file://{}/caf%E9-latin1.jsonl", root.display());
    let shown = format!("{}/caf\u{FFFD}-latin1.jsonl", root.display());

    // The CLI lists both (no panic), twice: the second listing from the cache for good.jsonl.
    for _ in 0..2 {
        let out = Command::new(support::BIN)
            .args(["list", "--root"])
            .arg(&root)
            .args(["--cache"])
            .arg(&cache_file)
            .arg("--json")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        let sessions = r["sessions"].as_array().unwrap();
        assert_eq!(sessions.len(), 2, "{r}");
        let bad = sessions.iter().find(|s| s["entryCount"] == 6).unwrap();
        assert_eq!(bad["path"], shown.as_str());
        assert_eq!(bad["pathUri"], uri.as_str());
        let good = sessions.iter().find(|s| s["entryCount"] == 4).unwrap();
        assert!(good.get("pathUri").is_none(), "{good}");
    }

    // The search names it by its URI, and finds the right file's text.
    let r = support::cli_json(&[
        "search",
        "--root",
        root.to_str().unwrap(),
        "--index-dir",
        index.path().to_str().unwrap(),
        "--json",
        "answer 5",
    ]);
    assert_eq!(r["total"], 1, "{r}");
    assert_eq!(r["hits"][0]["path"], shown.as_str());
    assert_eq!(r["hits"][0]["pathUri"], uri.as_str());
    assert!(
        r["hits"][0]["snippet"].as_str().unwrap().contains("**5**"),
        "{r}"
    );

    // The daemon lists the root whole, and opens the file by its URI.
    let (mut d, _) = support::Daemon::start(&[&root]);
    let r = checked(&mut d, "session/list", json!({"root": root}));
    let sessions = r["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{r}");
    let bad = sessions.iter().find(|s| s["entryCount"] == 6).unwrap();
    assert_eq!(bad["pathUri"], uri.as_str());
    let open = checked(&mut d, "session/open", json!({"path": uri}));
    assert_eq!(open["revision"]["entryCount"], 6, "{open}");
    let ctx = checked(
        &mut d,
        "session/contextAt",
        json!({"path": uri, "fields": "ids"}),
    );
    assert_eq!(ctx["entryIds"].as_array().unwrap().len(), 6, "{ctx}");
    d.stop();
}

/// Collects `session/didChangeList` notifications until `done` holds for what arrived (or
/// `wait` passes); returns each with the time it arrived.
fn list_changes(
    d: &mut Daemon,
    wait: Duration,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<(std::time::Instant, Value)> {
    let deadline = std::time::Instant::now() + wait;
    let mut got: Vec<(std::time::Instant, Value)> = Vec::new();
    while !done(&got.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>()) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        match d.notification("session/didChangeList", left) {
            Some(p) => got.push((std::time::Instant::now(), p)),
            None => break,
        }
    }
    got
}

/// The last row `changes` gave for `path`.
fn last_row(changes: &[Value], path: &str) -> Option<Value> {
    changes
        .iter()
        .flat_map(|c| c["changed"].as_array().unwrap().iter())
        .rfind(|r| r["path"] == json!(path))
        .cloned()
}

fn removed_in(changes: &[Value], path: &str) -> bool {
    changes
        .iter()
        .any(|c| c["removed"].as_array().unwrap().contains(&json!(path)))
}

/// A pi message entry appended after `parent`, as one line.
fn user_line(id: &str, parent: &str, text: &str) -> String {
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2025-01-02T00:00:00.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1_735_776_000_000i64}})
    .to_string()
        + "\n"
}

/// `session/didChangeList`: nothing before the client lists; then a session copied under the
/// root appears, one appended to grows (size, entries, tokens), one deleted is removed, each
/// row exactly as `session/list` then lists it; a burst of appends is coalesced, at most one
/// notification per 500 ms.
#[test]
fn list_changes_are_pushed_after_the_first_listing() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("sessions");
    let proj = root.join("--work--");
    std::fs::create_dir_all(&proj).unwrap();
    let grown = proj.join("grown.jsonl");
    let entries = write_v3_session(&grown, 6);
    let gone = proj.join("gone.jsonl");
    write_v3_session(&gone, 3);
    let source = common::repo("examples/pi-v3-branched.jsonl");
    let cache = base.join("cache");
    let options = Spawn {
        env: vec![("XDG_CACHE_HOME", cache.to_str().unwrap())],
        ..Default::default()
    };
    let (mut d, _) = Daemon::start_with(&[&root], &options);

    // Not subscribed yet: a file copied in is not announced.
    let early = proj.join("early.jsonl");
    std::fs::copy(&source, &early).unwrap();
    assert!(
        d.notification("session/didChangeList", Duration::from_millis(1500))
            .is_none(),
        "nothing is pushed before the first session/list"
    );
    let before = by_path(&checked(&mut d, "session/list", json!({})));
    assert_eq!(before.len(), 3, "{before:?}");
    let grown_path = grown.to_str().unwrap().to_owned();
    let old = before[&grown_path].clone();

    // A copy in a new folder, an append, a delete.
    let copy_dir = root.join("--copy--");
    std::fs::create_dir(&copy_dir).unwrap();
    let copy = copy_dir.join("early.jsonl");
    std::fs::copy(&source, &copy).unwrap();
    let copy_path = copy.to_str().unwrap().to_owned();
    let last = entries.last().unwrap().0.clone();
    append(
        &grown,
        &user_line("f0000001", &last, "one more question, a long one to count"),
    );
    std::fs::remove_file(&gone).unwrap();
    let gone_path = gone.to_str().unwrap().to_owned();

    let got = list_changes(&mut d, Duration::from_secs(10), |c| {
        last_row(c, &copy_path).is_some()
            && last_row(c, &grown_path).is_some_and(|r| r["entryCount"] == json!(7))
            && removed_in(c, &gone_path)
    });
    let changes: Vec<Value> = got.iter().map(|(_, v)| v.clone()).collect();
    assert!(
        last_row(&changes, &copy_path).is_some(),
        "the copy appears: {changes:?}"
    );
    assert!(
        removed_in(&changes, &gone_path),
        "the deleted session: {changes:?}"
    );
    let row = last_row(&changes, &grown_path).expect("the grown session");
    assert_eq!(row["entryCount"], json!(7));
    assert!(row["size"].as_u64() > old["size"].as_u64(), "{row} {old}");
    assert!(
        row["tokenEstimate"].as_u64() > old["tokenEstimate"].as_u64(),
        "{row} {old}"
    );
    assert_eq!(row["leafId"], json!("f0000001"));
    for c in &changes {
        assert!(
            !c["changed"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["path"] == json!(early.to_str().unwrap())),
            "an unchanged session listed before is not announced: {c}"
        );
    }

    // Each row is exactly the row session/list gives now.
    let after = by_path(&checked(&mut d, "session/list", json!({})));
    assert_eq!(last_row(&changes, &copy_path).unwrap(), after[&copy_path]);
    assert_eq!(row, after[&grown_path]);
    assert!(!after.contains_key(&gone_path));
    assert_eq!(after.len(), 3);

    // A burst of appends over about a second: coalesced, one notification per 500 ms at most.
    // Appended from another thread while this one reads the notifications as they come.
    let writer = {
        let grown = grown.clone();
        std::thread::spawn(move || {
            let mut parent = "f0000001".to_owned();
            for i in 2..=11 {
                let id = format!("f{i:07}");
                append(&grown, &user_line(&id, &parent, "and another"));
                parent = id;
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let got = list_changes(&mut d, Duration::from_secs(10), |c| {
        last_row(c, &grown_path).is_some_and(|r| r["entryCount"] == json!(17))
    });
    writer.join().unwrap();
    let changes: Vec<Value> = got.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(
        last_row(&changes, &grown_path).map(|r| r["entryCount"].clone()),
        Some(json!(17)),
        "{changes:?}"
    );
    assert!(
        (1..=4).contains(&got.len()),
        "ten appends over a second are coalesced: {} notifications",
        got.len()
    );
    for pair in got.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap >= Duration::from_millis(450),
            "notifications {gap:?} apart"
        );
    }
    d.stop();
}

/// Where the roots cannot be watched (`SESSIOND_WATCH=poll`), list changes still come, from
/// the passes over the roots.
#[test]
fn list_changes_come_without_file_system_events() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    write_v3_session(&root.join("a.jsonl"), 4);
    let cache = base.join("cache");
    let options = Spawn {
        env: vec![
            ("XDG_CACHE_HOME", cache.to_str().unwrap()),
            ("SESSIOND_WATCH", "poll"),
        ],
        ..Default::default()
    };
    let (mut d, _) = Daemon::start_with(&[&root], &options);
    checked(&mut d, "session/list", json!({}));
    let b = root.join("b.jsonl");
    write_v3_session(&b, 2);
    let b_path = b.to_str().unwrap().to_owned();
    // Its full count, not only a row: a pass can see the file between creation and write.
    let got = list_changes(&mut d, Duration::from_secs(8), |c| {
        last_row(c, &b_path).is_some_and(|r| r["entryCount"] == json!(2))
    });
    let changes: Vec<Value> = got.iter().map(|(_, v)| v.clone()).collect();
    let row = last_row(&changes, &b_path).expect("the new session, from a pass");
    assert_eq!(row["entryCount"], json!(2));
    d.stop();
}
