//! `sessiond search` and `session/search` through the real binary: the index in a temporary
//! directory over a handful of sessions, updated incrementally (append, branch, rewrite,
//! delete), corrupt and torn files indexed in part, a format-version change rebuilt, and the
//! daemon's answer and `$/progress` checked against the schemas. Claude Code's transcripts
//! (written by the real Claude Code) are searched beside pi's sessions, filtered by agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::{
    Daemon, checked, claude_prompt, cli_json, mixed_sessions, v3_session, write_v3_session,
};

fn append(path: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    writeln!(f, "{line}").unwrap();
}

fn search(root: &Path, index: &Path, extra: &[&str]) -> Value {
    search_in(&[root], index, extra)
}

/// `sessiond search --root ROOT… --index-dir INDEX --json EXTRA…`.
fn search_in(roots: &[&Path], index: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["search"];
    for root in roots {
        args.extend(["--root", root.to_str().unwrap()]);
    }
    args.extend(["--index-dir", index.to_str().unwrap(), "--json"]);
    args.extend_from_slice(extra);
    cli_json(&args)
}

/// A daemon (initialized) over `roots` that keeps its search index in `index`.
fn daemon_indexing(roots: &[&Path], index: &Path) -> Daemon {
    let spawn = support::Spawn {
        args: vec!["--index-dir", index.to_str().unwrap()],
        ..Default::default()
    };
    Daemon::start_with(roots, &spawn).0
}

/// `s0.jsonl` … in `dir`: `files` sessions of `entries` entries each.
fn write_sessions(dir: &Path, files: usize, entries: usize) {
    for i in 0..files {
        write_v3_session(&dir.join(format!("s{i}.jsonl")), entries);
    }
}

/// Sends `session/search` with `params` until an answer has a hit, for up to five seconds;
/// returns that answer and how many searches it took. The index follows the files through a
/// watch of its own: an open session's `session/didChange` comes from another watch, so it
/// says the line is on disk, not that the index's watch has been told yet (a search sent at
/// once found nothing now and then). Until the index has it, an answer has no hit and was
/// made without reconciling the roots.
fn search_until_found(d: &mut Daemon, params: &Value) -> (Value, usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut tries = 0;
    loop {
        let r = checked(d, "session/search", params.clone());
        tries += 1;
        assert_eq!(r["index"]["update"]["reconciled"], false, "{r}");
        if r["total"] != 0 {
            return (r, tries);
        }
        assert_eq!(r["hits"], json!([]), "{r}");
        assert!(
            std::time::Instant::now() < deadline,
            "no hit for {params} 5 s after its append: {r}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn cli_search_is_incremental_and_says_what_it_could_not_read() {
    let root = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    let a = root.path().join("a.jsonl");
    let b = root.path().join("sub/b.jsonl");
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    let a_entries = write_v3_session(&a, 20);
    write_v3_session(&b, 10);
    // A corrupt middle line and a torn tail: the readable part is indexed.
    let c = root.path().join("c.jsonl");
    let (header, entries) = v3_session(6);
    let mut text = header + "\n";
    for (i, (_, line)) in entries.iter().enumerate() {
        text.push_str(if i == 2 { "{not json" } else { line });
        text.push('\n');
    }
    text.push_str("{\"type\":\"message\",\"id\":\"torn");
    std::fs::write(&c, text).unwrap();
    std::fs::write(root.path().join("notes.jsonl"), "hello\n").unwrap();

    let r = search(root.path(), index.path(), &["question 4"]);
    let update = &r["index"]["update"];
    assert_eq!(
        (update["files"].as_u64(), update["indexed"].as_u64()),
        (Some(4), Some(3))
    );
    assert_eq!(update["skipped"].as_array().unwrap().len(), 1, "{update}");
    let problems = update["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{update}");
    assert!(problems[0]["path"].as_str().unwrap().ends_with("c.jsonl"));
    let detail = problems[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("line 4") && detail.contains("torn tail"),
        "{detail}"
    );
    // "question 4" is e0000004 of a, b and c (c's bad line is e0000002).
    let hits = r["hits"].as_array().unwrap();
    let paths: Vec<&str> = hits.iter().map(|h| h["path"].as_str().unwrap()).collect();
    assert_eq!(hits.len(), 3, "{paths:?}");
    let hit = hits
        .iter()
        .find(|h| h["path"].as_str().unwrap().ends_with("/a.jsonl"))
        .unwrap();
    assert_eq!(hit["entryId"], "e0000004");
    assert_eq!(hit["role"], "user");
    assert_eq!(hit["line"], 6);
    assert_eq!(hit["onDefaultPath"], true);
    assert_eq!(hit["timestamp"], "2025-01-01T00:00:04.000Z");
    assert!(
        hit["snippet"]
            .as_str()
            .unwrap()
            .contains("**question** **4**"),
        "{hit}"
    );

    // Phrases, prefixes and filters.
    let r = search(root.path(), index.path(), &["\"answer 13\""]);
    assert_eq!(r["total"], 1);
    let r = search(root.path(), index.path(), &["quest*", "--path", "sub/"]);
    assert_eq!(r["total"], 5, "{r}");
    let r = search(
        root.path(),
        index.path(),
        &["answer", "--role", "assistant", "--limit", "4"],
    );
    assert_eq!(r["hits"].as_array().unwrap().len(), 4);
    assert!(
        r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["role"] == "assistant")
    );
    let next = r["nextCursor"].as_str().unwrap().to_owned();
    let page2 = search(
        root.path(),
        index.path(),
        &[
            "answer",
            "--role",
            "assistant",
            "--limit",
            "4",
            "--cursor",
            &next,
        ],
    );
    assert_ne!(page2["hits"][0], r["hits"][0]);
    let r = search(
        root.path(),
        index.path(),
        &["question", "--before", "2025-01-01"],
    );
    assert_eq!(r["total"], 0);

    // Nothing changed: nothing read.
    let r = search(root.path(), index.path(), &["question"]);
    let u = &r["index"]["update"];
    assert_eq!(
        (u["indexed"].as_u64(), u["appended"].as_u64()),
        (Some(0), Some(0))
    );

    // An append is read from the indexed end, and is on the default path.
    let last = a_entries.last().unwrap().0.clone();
    append(
        &a,
        &json!({"type":"message","id":"n1","parentId":last,"timestamp":"2025-01-02T00:00:00.000Z",
        "message":{"role":"user","content":"zanzibar appended"}})
        .to_string(),
    );
    let r = search(root.path(), index.path(), &["zanzibar"]);
    let u = &r["index"]["update"];
    assert_eq!(
        (
            u["indexed"].as_u64(),
            u["appended"].as_u64(),
            u["entries"].as_u64()
        ),
        (Some(0), Some(1), Some(1)),
        "{u}"
    );
    assert_eq!(r["hits"][0]["entryId"], "n1");
    assert_eq!(r["hits"][0]["onDefaultPath"], true);

    // A new branch from an older entry: the file is indexed again and the old leaf's
    // entries are off the default path now.
    append(&a, &json!({"type":"message","id":"n2","parentId":"e0000001","timestamp":"2025-01-03T00:00:00.000Z",
        "message":{"role":"user","content":"quokka branch"}}).to_string());
    let r = search(root.path(), index.path(), &["zanzibar"]);
    assert_eq!(r["index"]["update"]["indexed"], 1);
    assert_eq!(r["hits"][0]["onDefaultPath"], false);

    // Rewritten (shorter, another header): indexed again; deleted: dropped.
    write_v3_session(&b, 3);
    let r = search(root.path(), index.path(), &["question", "--path", "sub/"]);
    assert_eq!(r["index"]["update"]["indexed"], 1);
    assert_eq!(r["total"], 2);
    std::fs::remove_file(&b).unwrap();
    let r = search(root.path(), index.path(), &["question", "--path", "sub/"]);
    assert_eq!(r["index"]["update"]["removed"], 1);
    assert_eq!(r["total"], 0);

    // An index of another format version is rebuilt, never read.
    let meta = index.path().join("meta.json");
    let mut s: Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    assert_eq!(s["payload"], "sessiond-index 5");
    // Version 2 indexed pi's sessions only, without their format.
    s["payload"] = json!("sessiond-index 2");
    std::fs::write(&meta, s.to_string()).unwrap();
    let r = search(root.path(), index.path(), &["zanzibar"]);
    assert_eq!(r["index"]["update"]["rebuilt"], true);
    assert_eq!(r["index"]["update"]["indexed"], 2);
    assert_eq!(r["total"], 1);

    // A date that cannot be read is a usage error.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args([
            "search",
            "--root",
            root.path().to_str().unwrap(),
            "--index-dir",
            index.path().to_str().unwrap(),
            "x",
            "--after",
            "someday",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    // A directory that is not a sessiond index and holds something is never emptied, by the
    // CLI or by the daemon: the search is refused and the files stay as they were.
    let foreign = tempfile::tempdir().unwrap();
    std::fs::write(foreign.path().join("notes.txt"), "keep me").unwrap();
    std::fs::create_dir(foreign.path().join("sub")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["search", "--root", root.path().to_str().unwrap()])
        .args(["--index-dir", foreign.path().to_str().unwrap(), "zanzibar"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a sessiond search index"), "{stderr}");
    assert!(
        stderr.contains(foreign.path().to_str().unwrap()),
        "{stderr}"
    );
    let (mut d, _) = Daemon::start_with(
        &[root.path()],
        &support::Spawn {
            args: vec!["--index-dir", foreign.path().to_str().unwrap()],
            ..Default::default()
        },
    );
    let e = d.request("session/search", json!({"query": "zanzibar"}));
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not a sessiond search index")),
        "{e}"
    );
    d.stop();
    assert_eq!(
        std::fs::read_to_string(foreign.path().join("notes.txt")).unwrap(),
        "keep me"
    );
    assert!(foreign.path().join("sub").is_dir());
    assert!(!foreign.path().join("meta.json").exists());
}

/// Every hit of `query` (up to 1,000) as (path, entry id, line, on the default path), sorted.
fn all_hits(roots: &[&Path], index: &Path, query: &str) -> Vec<(String, String, u64, bool)> {
    let r = search_in(roots, index, &[query, "--limit", "1000"]);
    let mut out: Vec<_> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_owned(),
                h["entryId"].as_str().unwrap().to_owned(),
                h["line"].as_u64().unwrap(),
                h["onDefaultPath"].as_bool().unwrap(),
            )
        })
        .collect();
    out.sort();
    assert_eq!(out.len() as u64, r["total"].as_u64().unwrap(), "{query}");
    out
}

#[test]
fn a_few_changed_files_update_the_index_as_a_build_from_nothing_would() {
    // 40 sessions: an update that changes a few of them reads only their state documents.
    let root = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    write_sessions(root.path(), 40, 6);
    let r = search(root.path(), index.path(), &["question"]);
    assert_eq!(r["index"]["update"]["indexed"], 40, "{r}");

    // One grown, one rewritten shorter, one deleted, one new.
    let grown = root.path().join("s1.jsonl");
    append(
        &grown,
        &json!({"type":"message","id":"n1","parentId":"e0000005","timestamp":"2025-01-02T00:00:00.000Z",
        "message":{"role":"user","content":"zanzibar appended"}})
        .to_string(),
    );
    write_v3_session(&root.path().join("s2.jsonl"), 3);
    std::fs::remove_file(root.path().join("s3.jsonl")).unwrap();
    let new = root.path().join("s40.jsonl");
    write_v3_session(&new, 2);
    append(
        &new,
        &json!({"type":"message","id":"q1","parentId":"e0000001","timestamp":"2025-01-02T00:00:00.000Z",
        "message":{"role":"user","content":"quokka arrives"}})
        .to_string(),
    );
    let r = search(root.path(), index.path(), &["zanzibar"]);
    let u = &r["index"]["update"];
    assert_eq!(
        (
            u["files"].as_u64(),
            u["indexed"].as_u64(),
            u["appended"].as_u64(),
            u["removed"].as_u64()
        ),
        (Some(40), Some(2), Some(1), Some(1)),
        "{u}"
    );

    let fresh = tempfile::tempdir().unwrap();
    for query in ["question", "answer", "zanzibar", "quokka", "\"answer 3\""] {
        let updated = all_hits(&[root.path()], index.path(), query);
        assert!(!updated.is_empty(), "{query}");
        assert_eq!(
            updated,
            all_hits(&[root.path()], fresh.path(), query),
            "{query}: the updated index and one built from nothing differ"
        );
    }
    // The deleted session's entries are gone, the shortened one's cut entries too.
    let answers = all_hits(&[root.path()], index.path(), "answer");
    assert!(!answers.iter().any(|h| h.0.ends_with("/s3.jsonl")));
    assert!(
        !answers
            .iter()
            .any(|h| h.0.ends_with("/s2.jsonl") && h.1 == "e0000005")
    );
}

#[test]
fn session_search_updates_before_answering_and_reports_progress() {
    let root = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    for i in 0..60 {
        write_v3_session(&root.path().join(format!("s{i:02}.jsonl")), 4);
    }
    let mut d = daemon_indexing(&[root.path()], index.path());
    let r = checked(
        &mut d,
        "session/search",
        json!({"query": "answer 3", "limit": 5, "workDoneToken": "idx-1"}),
    );
    assert_eq!(r["total"], 60);
    assert_eq!(r["index"]["update"]["indexed"], 60);
    assert_eq!(r["index"]["update"]["reconciled"], true);
    assert_eq!(r["hits"].as_array().unwrap().len(), 5);
    assert!(
        r["hits"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("**answer** **3**")
    );
    let progress: Vec<&Value> = d
        .inbox
        .iter()
        .filter(|m| m["method"] == "$/progress")
        .collect();
    assert!(progress.len() >= 2, "{:?}", d.inbox);
    assert_eq!(progress[0]["params"]["value"]["title"], "Indexing sessions");

    // An append (the daemon's session open and live, or not) is found by the next search.
    let file = root.path().join("s07.jsonl");
    d.call("session/open", json!({"path": file}));
    append(&file, &json!({"type":"message","id":"x1","parentId":"e0000003","timestamp":"2025-01-05T00:00:00.000Z",
        "message":{"role":"assistant","content":[{"type":"text","text":"platypus"}]}}).to_string());
    d.notification("session/didChange", Duration::from_secs(5))
        .expect("didChange");
    let (r, _) = search_until_found(
        &mut d,
        &json!({"query": "platypus", "roles": ["assistant"]}),
    );
    assert_eq!(r["total"], 1);
    assert_eq!(r["hits"][0]["entryId"], "x1");
    // Applied from the watcher's events (by its thread, or by this search if still pending):
    // no other session was looked at.
    assert_eq!(r["index"]["update"]["reconciled"], false);
    assert_eq!(r["index"]["update"]["indexed"], 0);
    let bad = d.request("session/search", json!({"query": "x", "limit": 0}));
    assert_eq!(support::error_of(&bad).0, -32602);
    let bad = d.request("session/search", json!({"query": "x", "roots": ["/"]}));
    assert_eq!(support::error_of(&bad).0, -33002);
    assert_eq!(d.stop(), Some(0));
}

/// The index follows the files from the daemon's file-system events: an append, a new file, a
/// rewrite and a deletion are in the answers without a search reconciling the roots, and an
/// append is found within a deadline after its `session/didChange` (the time from that
/// notification to the first answer with the entry is printed, with the searches it took;
/// scripts/bench-search.sh measures it on the large corpus).
#[test]
fn session_search_follows_watcher_events() {
    let root = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    let sub = root.path().join("project");
    std::fs::create_dir(&sub).unwrap();
    write_sessions(&sub, 5, 4);
    let mut d = daemon_indexing(&[root.path()], index.path());
    let search = |d: &mut Daemon, q: &str| checked(d, "session/search", json!({"query": q}));
    let first = search(&mut d, "answer");
    assert_eq!(first["index"]["update"]["reconciled"], true);
    assert_eq!(first["index"]["files"], 5);

    // An append to an open session: found after its didChange, applied from events.
    let file = sub.join("s2.jsonl");
    d.call("session/open", json!({"path": file}));
    let mut latencies = Vec::new();
    let mut parent = "e0000003".to_owned();
    for n in 0..5 {
        let id = format!("w{n}");
        let word = format!("wombat{n}");
        append(&file, &json!({"type":"message","id": id,"parentId": parent,"timestamp":"2025-01-05T00:00:00.000Z",
            "message":{"role":"user","content": format!("{word} here")}}).to_string());
        parent = id.clone();
        d.notification("session/didChange", Duration::from_secs(5))
            .expect("didChange");
        let t = std::time::Instant::now();
        let (r, tries) = search_until_found(&mut d, &json!({"query": word}));
        latencies.push((t.elapsed(), tries));
        assert_eq!(r["total"], 1, "{r}");
        assert_eq!(r["hits"][0]["entryId"], json!(id));
    }
    eprintln!("didChange to an answer with the appended entry (time, searches): {latencies:?}");

    // Left alone for the event thread: the next search has nothing left to apply.
    append(&file, &json!({"type":"message","id":"w9","parentId": parent,"timestamp":"2025-01-05T00:00:00.000Z",
        "message":{"role":"user","content":"echidna"}}).to_string());
    d.notification("session/didChange", Duration::from_secs(5))
        .expect("didChange");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let r = search(&mut d, "echidna");
        if r["total"] == 1 && r["index"]["update"]["appended"] == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{r}");
    }

    // A new file in a new directory, a rewrite, a deletion.
    let newdir = root.path().join("other");
    std::fs::create_dir(&newdir).unwrap();
    write_v3_session(&newdir.join("n.jsonl"), 2);
    std::fs::write(
        sub.join("s0.jsonl"),
        std::fs::read_to_string(sub.join("s0.jsonl"))
            .unwrap()
            .replace("answer 1", "narwhal 1"),
    )
    .unwrap();
    std::fs::remove_file(sub.join("s1.jsonl")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let r = search(&mut d, "answer 1");
        let narwhal = search(&mut d, "narwhal");
        assert_eq!(r["index"]["update"]["reconciled"], false);
        let paths: Vec<&str> = r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["path"].as_str().unwrap())
            .collect();
        let done = r["index"]["files"] == 5
            && narwhal["total"] == 1
            && paths.iter().any(|p| p.ends_with("other/n.jsonl"))
            && !paths
                .iter()
                .any(|p| p.ends_with("s1.jsonl") || p.ends_with("s0.jsonl"));
        if done {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{r} {narwhal}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(d.stop(), Some(0));
}

/// The daemon keeps its writer open: a CLI search meanwhile does not wait for it, finds the
/// index busy and answers from the daemon's last commit (kept fresh from file events). The
/// daemon killed (SIGKILL) while appends are being applied leaves its last commit, entries and
/// per-file state together: the CLI then updates from there, every appended entry found once —
/// no duplicate, none missing.
#[test]
fn cli_search_beside_the_daemons_writer_and_after_a_kill() {
    let top = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    // The daemon serves `a`; the CLI also searches `b`, which the daemon never indexes, so
    // the CLI has an update to make.
    let root = top.path().join("a");
    let other = top.path().join("b");
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(&other).unwrap();
    write_sessions(&root, 5, 4);
    write_v3_session(&other.join("o.jsonl"), 4);
    let both = |q: &str| search_in(&[&root, &other], index.path(), &[q]);
    let mut d = daemon_indexing(&[root.as_path()], index.path());
    let first = checked(&mut d, "session/search", json!({"query": "answer"}));
    let answers = first["total"].clone();
    assert_eq!(first["index"]["update"]["indexed"], 5);

    // The CLI beside the daemon's writer: busy, answers from what is committed.
    let r = both("answer");
    assert_eq!(r["index"]["update"]["busy"], true, "{r}");
    assert_eq!(r["total"], answers);

    // An append applied by the daemon from its events is what the CLI then finds.
    let file = root.join("s1.jsonl");
    append(&file, &json!({"type":"message","id":"d0","parentId":"e0000003","timestamp":"2025-01-05T00:00:00.000Z",
        "message":{"role":"user","content":"dugong"}}).to_string());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = both("dugong");
        assert_eq!(r["index"]["update"]["busy"], true, "{r}");
        if r["total"] == 1 {
            break;
        }
        assert!(r["total"] == 0, "{r}");
        assert!(std::time::Instant::now() < deadline, "{r}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Appends while the daemon applies them, then SIGKILL mid-way.
    let mut parent = "d0".to_owned();
    for n in 0..30 {
        let id = format!("k{n}");
        append(&file, &json!({"type":"message","id": id,"parentId": parent,"timestamp":"2025-01-05T00:00:00.000Z",
            "message":{"role":"user","content": format!("kiwi{n} here")}}).to_string());
        parent = id;
        std::thread::sleep(Duration::from_millis(7));
    }
    drop(d);

    let r = both("answer");
    assert_eq!(r["index"]["update"]["busy"], false, "{r}");
    assert_eq!(r["index"]["update"]["indexed"], 1, "{r}");
    assert_eq!(r["total"], answers.as_u64().unwrap() + 2, "{r}");
    for n in 0..30 {
        let r = both(&format!("kiwi{n}"));
        assert_eq!(r["total"], 1, "kiwi{n}: {r}");
        assert_eq!(r["hits"][0]["entryId"], json!(format!("k{n}")));
    }
    let r = both("dugong");
    assert_eq!(r["total"], 1, "{r}");
    assert_eq!(r["hits"][0]["onDefaultPath"], true);
}

/// An index whose first build never committed is sessiond's all the same: a first search with
/// `--no-update` makes tantivy's files without the commit payload, and the next search builds
/// the index there instead of refusing the directory. A directory holding the same files
/// without sessiond's marker (another program's index) is still refused and left as it is.
#[test]
fn an_index_that_never_committed_is_rebuilt_and_another_programs_is_not() {
    let root = tempfile::tempdir().unwrap();
    write_sessions(root.path(), 3, 4);
    let top = tempfile::tempdir().unwrap();
    let index = top.path().join("index");
    let r = search(root.path(), &index, &["answer", "--no-update"]);
    assert_eq!(r["total"], 0, "{r}");
    let meta = std::fs::read(index.join("meta.json")).unwrap();
    let uncommitted: Value = serde_json::from_slice(&meta).unwrap();
    assert!(uncommitted["payload"].is_null(), "{uncommitted}");

    let r = search(root.path(), &index, &["answer"]);
    assert_eq!(r["index"]["update"]["indexed"], 3, "{r}");
    assert!(r["total"].as_u64().unwrap() > 0, "{r}");

    let foreign = top.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("meta.json"), &meta).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["search", "--root", root.path().to_str().unwrap()])
        .args(["--index-dir", foreign.to_str().unwrap(), "answer"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a sessiond search index"), "{stderr}");
    assert_eq!(std::fs::read(foreign.join("meta.json")).unwrap(), meta);
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 1);
}

/// `--limit` takes 1..=1000 as `session/search` does: outside it the command line is refused
/// (exit 2, an `argument` error under `--json`) before any index is made.
#[test]
fn the_cli_limit_is_one_to_a_thousand() {
    let root = tempfile::tempdir().unwrap();
    write_v3_session(&root.path().join("a.jsonl"), 12);
    let index = root.path().join("index");
    for (limit, json) in [("0", false), ("1001", true)] {
        let mut cmd = std::process::Command::new(support::BIN);
        cmd.args(["search", "answer", "--limit", limit, "--root"])
            .arg(root.path())
            .arg("--index-dir")
            .arg(&index);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "--limit {limit}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("1..=1000"),
            "--limit {limit}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if json {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["error"]["kind"], "argument", "{v}");
        }
        assert!(!index.exists(), "--limit {limit} made an index");
    }
    // The bounds themselves are accepted.
    for limit in ["1", "1000"] {
        let r = search(root.path(), &index, &["answer", "--limit", limit]);
        let total = r["total"].as_u64().unwrap();
        assert!(total >= 2, "{r}");
        let expected = total.min(limit.parse().unwrap());
        assert_eq!(r["hits"].as_array().unwrap().len() as u64, expected, "{r}");
    }
}

/// The `(path, line, onDefaultPath)` of each hit, sorted.
fn places(r: &Value) -> Vec<(String, u64, bool)> {
    let mut out: Vec<(String, u64, bool)> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_owned(),
                h["line"].as_u64().unwrap(),
                h["onDefaultPath"].as_bool().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn claude_transcripts_are_searched_beside_pi_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let m = mixed_sessions(&tmp.path().join("projects"));
    let index = tmp.path().join("index");
    let find = |extra: &[&str]| search(&m.root, &index, extra);
    let compacted = m.compacted.to_str().unwrap().to_owned();

    // "answer": pi's answers and Claude Code's "Answer to: …" alike; the agent filter keeps
    // one format.
    let all = find(&["answer", "--limit", "100"]);
    assert_eq!(all["index"]["update"]["indexed"], 5, "{all}");
    let pi = find(&["answer", "--limit", "100", "--agent", "pi"]);
    let claude = find(&["answer", "--limit", "100", "--agent", "claude-code"]);
    // Two answers in each pi session; six "Answer to: …" responses in the transcripts.
    assert_eq!(pi["total"], 4, "{pi}");
    assert_eq!(claude["total"], 6, "{claude}");
    assert_eq!(all["total"], 10, "{all}");
    for (r, format) in [(&pi, "pi"), (&claude, "claude-code")] {
        assert!(
            r["hits"]
                .as_array()
                .unwrap()
                .iter()
                .all(|h| h["format"] == format),
            "{r}"
        );
    }

    // Tool calls and results are found, by the roles pi gives them.
    let r = find(&["referee", "--role", "toolResult"]);
    assert_eq!(
        places(&r),
        vec![
            (compacted.clone(), 9, false),
            (compacted.clone(), 81, false)
        ],
        "{r}"
    );
    assert_eq!(
        r["hits"][0]["entryId"].as_str().unwrap().len(),
        36,
        "a uuid: {r}"
    );
    let r = find(&["echo", "--role", "assistant", "--agent", "claude-code"]);
    assert!(
        r["total"].as_u64().unwrap() >= 4,
        "the Bash calls' commands: {r}"
    );

    // On the default path: the lines Claude Code loads, so what a compaction dropped is off it
    // and the segment it preserved is on it.
    let r = find(&["\"command printed\""]);
    assert_eq!(
        places(&r),
        vec![
            (compacted.clone(), 10, false),
            (compacted.clone(), 82, true)
        ],
        "{r}"
    );

    // The compaction summaries, as compaction entries.
    let r = find(&["\"being continued\"", "--role", "compaction"]);
    assert_eq!(r["total"], 2, "{r}");
    assert_eq!(r["hits"][0]["entryType"], "compaction", "{r}");
    assert!(r["hits"][0].get("role").is_none(), "{r}");

    // Not indexed: attachments (the agent listing names FleetView), the lines Claude Code
    // writes itself; thinking only on request.
    assert_eq!(find(&["FleetView"])["total"], 0);
    assert_eq!(find(&["\"Continue from where you left off\""])["total"], 0);
    assert_eq!(find(&["enough"])["total"], 0);
    assert_eq!(find(&["enough", "--thinking"])["total"], 2);

    // A subagent's transcript is a session of its own.
    let r = find(&["\"nearly empty\""]);
    let paths: Vec<&str> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 2, "{r}");
    assert!(paths.contains(&m.subagent.to_str().unwrap()), "{r}");
    assert!(paths.contains(&m.with_subagent.to_str().unwrap()), "{r}");

    // An append: only the new line is indexed, on the default path.
    append(
        &m.compacted,
        &claude_prompt(
            "0a0a0a0a-0000-4000-8000-000000000001",
            "ec228510-5a3b-4462-aad5-e3f6654df41b",
            "quokka sighting",
        ),
    );
    let r = find(&["quokka"]);
    let u = &r["index"]["update"];
    assert_eq!(
        (&u["appended"], &u["indexed"], &u["entries"]),
        (&json!(1), &json!(0), &json!(1)),
        "{r}"
    );
    assert_eq!(places(&r), vec![(compacted.clone(), 102, true)], "{r}");
    let r = find(&["\"command printed\""]);
    assert_eq!(r["index"]["update"]["appended"], 0, "{r}");

    // A rewind (a prompt under an earlier line, the run's last-prompt naming it): the path
    // changed for lines already indexed, so the file is indexed again.
    append(
        &m.compacted,
        &claude_prompt(
            "0a0a0a0a-0000-4000-8000-000000000002",
            "46cbca65-c7d6-48b4-8b63-6427f55f7d7c",
            "wombat instead",
        ),
    );
    append(
        &m.compacted,
        &json!({"type": "last-prompt", "lastPrompt": "wombat instead",
            "leafUuid": "0a0a0a0a-0000-4000-8000-000000000002",
            "sessionId": "6d2e238c-d8e6-4579-9b3a-0130d30ea9b9"})
        .to_string(),
    );
    let r = find(&["quokka OR wombat"]);
    assert_eq!(r["index"]["update"]["indexed"], 1, "{r}");
    assert_eq!(
        places(&r),
        vec![
            (compacted.clone(), 102, false),
            (compacted.clone(), 103, true)
        ],
        "{r}"
    );

    // The daemon: the same index shape, the agent as a parameter.
    let daemon_index = tmp.path().join("daemon-index");
    let (mut d, _) = Daemon::start_with(
        &[&m.root],
        &support::Spawn {
            args: vec!["--index-dir", daemon_index.to_str().unwrap()],
            ..Default::default()
        },
    );
    let r = checked(
        &mut d,
        "session/search",
        json!({"query": "answer", "agent": "claude-code", "limit": 100}),
    );
    assert_eq!(r["total"], 6, "{r}");
    assert!(
        r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["format"] == "claude-code"),
        "{r}"
    );
    let r = checked(
        &mut d,
        "session/search",
        json!({"query": "answer", "agent": "pi"}),
    );
    assert_eq!(r["total"], 4, "{r}");
    let e = d.request(
        "session/search",
        json!({"query": "answer", "agent": "gemini"}),
    );
    assert_eq!(support::error_of(&e).0, -32602, "{e}");
    d.stop();

    // The CLI refuses an agent it does not know as a usage error.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args([
            "search",
            "x",
            "--agent",
            "gemini",
            "--root",
            m.root.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Writes a v3 session to `path` whose user messages say `texts`, in order; returns their ids.
fn write_said(path: &Path, texts: &[&str]) -> Vec<String> {
    let mut text = r#"{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#.to_owned() + "\n";
    let mut parent = Value::Null;
    let mut ids = Vec::new();
    for (i, said) in texts.iter().enumerate() {
        let id = format!("u{i}");
        let line = json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": format!("2025-01-01T00:00:{i:02}.000Z"),
            "message": {"role": "user", "content": said, "timestamp": 1_735_689_600_000i64}});
        text.push_str(&format!("{line}\n"));
        parent = json!(id);
        ids.push(id);
    }
    std::fs::write(path, text).unwrap();
    ids
}

/// The entry ids of a search answer's hits, sorted.
fn hit_ids(r: &Value) -> Vec<String> {
    let mut ids: Vec<String> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["entryId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn what_a_user_types_is_searched_as_text_and_operators_still_work() {
    let root = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    write_said(
        &root.path().join("s.jsonl"),
        &[
            "panics at src/lib.rs:42 while reading",
            "returns std::io::Error when the disk is full",
            "calls fn(x) then format:json http://example.com/a?b=1",
            "unrelated words about lib and rs and io",
        ],
    );
    // Text that is not valid query syntax (a field that does not exist, `::`, parentheses
    // after a word, a caret, an unclosed quote or bracket): found as the words it holds, with
    // exit 0 from the CLI and no error from the daemon.
    let cases: &[(&str, &[&str])] = &[
        ("src/lib.rs:42", &["u0"]),
        ("std::io::Error", &["u1"]),
        ("fn(x)", &["u2"]),
        ("format:json", &["u2"]),
        ("http://example.com/a?b=1", &["u2"]),
        ("a^b^ panics", &[]),
        ("\"at src/lib", &["u0"]),
        ("[lib", &["u0", "u3"]),
        ("::", &[]),
    ];
    for (query, want) in cases {
        let r = search(root.path(), index.path(), &["--", query]);
        assert_eq!(hit_ids(&r), *want, "{query}: {r}");
    }
    // The operators stay: a phrase, an excluded word, OR, a prefix.
    for (query, want) in [
        ("\"disk is full\"", vec!["u1"]),
        ("lib -unrelated", vec!["u0"]),
        ("panics OR returns", vec!["u0", "u1"]),
        ("unrel*", vec!["u3"]),
    ] {
        let r = search(root.path(), index.path(), &["--", query]);
        assert_eq!(hit_ids(&r), want, "{query}: {r}");
    }
    // The daemon answers the same queries, never -32602.
    let mut d = daemon_indexing(&[root.path()], index.path());
    for (query, want) in cases {
        let r = checked(&mut d, "session/search", json!({"query": query}));
        assert_eq!(hit_ids(&r), *want, "{query}: {r}");
    }
    d.stop();
}

#[test]
fn words_inside_scripts_without_spaces_are_found() {
    let root = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    write_said(
        &root.path().join("s.jsonl"),
        &[
            "请检查配置文件是否正确",
            "設定ファイルを確認してください",
            "ภาษาไทยไม่มีช่องว่าง",
            "配 alone",
        ],
    );
    for (query, want) in [
        ("配置", vec!["u0"]),
        ("配置文件", vec!["u0"]),
        ("文件 正确", vec!["u0"]),
        ("\"检查配置\"", vec!["u0"]),
        ("ファイル", vec!["u1"]),
        ("確認", vec!["u1"]),
        ("ไทย", vec!["u2"]),
        ("配", vec!["u3"]),
        ("配置错误", vec![]),
    ] {
        let r = search(root.path(), index.path(), &["--", query]);
        assert_eq!(hit_ids(&r), want, "{query}: {r}");
        if let Some(hit) = r["hits"].as_array().unwrap().first() {
            assert!(
                hit["snippet"].as_str().unwrap().contains("**"),
                "{query}: {hit}"
            );
        }
    }
    // An index of the version before (one token per clause) is rebuilt, and then finds it.
    let meta = index.path().join("meta.json");
    let mut s: Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    s["payload"] = json!("sessiond-index 3");
    std::fs::write(&meta, s.to_string()).unwrap();
    let r = search(root.path(), index.path(), &["配置"]);
    assert_eq!(r["index"]["update"]["rebuilt"], true, "{r}");
    assert_eq!(hit_ids(&r), ["u0"]);
}
