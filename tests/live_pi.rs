//! The loop with the real pi agent as a regression suite: pi 1.6.0 (on Node 22, both installed
//! under the repository by `scripts/live-deps.sh`) works in a temporary work tree against a
//! scripted model server on 127.0.0.1, while `sessiond serve` follows its session.
//!
//! Each test is bounded in time and stops every process it started through that process's own
//! handle. Without the install the tests skip loudly, and fail under `CI`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/mod.rs"]
mod support;

#[path = "live/mod.rs"]
mod live;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use live::{Lab, PiInstall, context_messages, drain_notifications, file_ids, referee_all};
use support::Daemon;
use support::common::{diff_report, restrict_to_context, run_batch_oracle};

/// How long the daemon may stay silent before a burst of notifications is taken as complete.
const QUIET: Duration = Duration::from_millis(600);

fn tool(name: &str, arguments: Value) -> Value {
    json!({"tools": [{"name": name, "arguments": arguments}]})
}

/// A script that exercises every tool: write, read, edit (`edits: [{oldText, newText}]`) and
/// bash, then a text answer; and a second prompt that edits again.
fn tools_script() -> Value {
    json!({
        "prompts": {
            "first": [
                tool("write", json!({"path": "notes.txt", "content": "alpha\nbeta\n"})),
                tool("read", json!({"path": "notes.txt"})),
                tool("edit", json!({"path": "notes.txt", "edits": [{"oldText": "alpha", "newText": "ALPHA"}]})),
                {"text": "Wrote and edited notes.txt."},
            ],
            "second": [
                tool("bash", json!({"command": "cat notes.txt && echo checked"})),
                tool("edit", json!({"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]})),
                {"text": "Edited again."},
            ],
        },
        "default": [{"text": "ok"}],
    })
}

/// The one session file pi wrote.
fn only_session(lab: &Lab) -> PathBuf {
    let files = lab.session_files();
    assert_eq!(files.len(), 1, "pi wrote one session file: {files:?}");
    files.into_iter().next().unwrap()
}

/// pi's own context (`buildSessionContext`) for a file's default leaf.
fn pi_context(lab: &Lab, file: &Path) -> Value {
    let results = run_batch_oracle(&lab.pi.dir, &[json!({"file": file, "leaf": null})]);
    let r = &results[0];
    assert!(
        r.get("error").is_none(),
        "pi could not read {}: {r}",
        file.display()
    );
    r["context"].clone()
}

/// Notifications of one kind, as params.
fn of_method<'a>(notes: &'a [Value], method: &str) -> Vec<&'a Value> {
    notes
        .iter()
        .filter(|n| n["method"] == method)
        .map(|n| &n["params"])
        .collect()
}

/// The notifications that describe a state newer than `revision` (a result's): a client drops
/// the others, whose changes that result already holds (the daemon may announce entries it read
/// while answering `session/open` before the answer arrives).
fn newer_than(notes: &[Value], revision: &Value) -> Vec<Value> {
    let key = |r: &Value| {
        (
            r["generation"].as_u64().unwrap(),
            r["entryCount"].as_u64().unwrap(),
        )
    };
    let at = key(revision);
    notes
        .iter()
        .filter(|n| n["params"].get("revision").is_none_or(|r| key(r) > at))
        .cloned()
        .collect()
}

/// The ids announced by `session/didChange`s, in order.
fn announced(notes: &[Value]) -> Vec<String> {
    of_method(notes, "session/didChange")
        .iter()
        .flat_map(|p| p["added"].as_array().unwrap().iter())
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Test 1, Follow: every entry pi writes while sessiond follows is announced exactly once, in
/// file order; no reload, no corruption; `contextAt` equals pi's own context.
#[test]
fn follow_announces_every_entry_once_and_context_equals_pi() {
    let Some(lab) = Lab::for_test(
        "follow_announces_every_entry_once_and_context_equals_pi",
        &tools_script(),
    ) else {
        return;
    };
    lab.print(&[], "first");
    let file = only_session(&lab);

    let (mut d, _) = Daemon::start(&[&lab.sessions]);
    let opened = d.call("session/open", json!({"path": file}));
    let before = file_ids(&file);
    assert_eq!(opened["entryCount"], before.len());

    let s = file.to_str().unwrap().to_owned();
    lab.print(&["--session", &s], "second");
    let notes = newer_than(&drain_notifications(&mut d, QUIET), &opened["revision"]);

    let after = file_ids(&file);
    assert!(
        after.len() > before.len() + 5,
        "pi appended a turn: {after:?}"
    );
    assert_eq!(
        announced(&notes),
        after[before.len()..].to_vec(),
        "every new entry announced once, in file order"
    );
    for m in ["session/didReload", "session/didCorrupt"] {
        assert!(of_method(&notes, m).is_empty(), "no {m}: {notes:?}");
    }
    let last = of_method(&notes, "session/didChange")
        .last()
        .cloned()
        .cloned()
        .unwrap();
    assert_eq!(last["leafId"], json!(after.last().unwrap()));

    let ours = d.call("session/contextAt", json!({"path": file}));
    let theirs = pi_context(&lab, &file);
    let report = diff_report(&theirs, &restrict_to_context(&ours));
    assert!(report.is_empty(), "contextAt differs from pi:\n{report}");
    assert_eq!(
        context_messages(&mut d, &file, None),
        theirs["messages"],
        "paged messages"
    );
    d.stop();
}

/// Test 2, Referee: each request pi sent to its model equals pi's own conversion of sessiond's
/// `contextAt` at the leaf that request was built from.
#[test]
fn referee_every_model_request_is_pi_conversion_of_context_at() {
    let Some(lab) = Lab::for_test(
        "referee_every_model_request_is_pi_conversion_of_context_at",
        &tools_script(),
    ) else {
        return;
    };
    lab.print(&[], "first");
    let file = only_session(&lab);
    let (mut d, _) = Daemon::start(&[&lab.sessions]);
    d.call("session/open", json!({"path": file}));
    let s = file.to_str().unwrap().to_owned();
    lab.print(&["--session", &s], "second");
    drain_notifications(&mut d, QUIET);

    let requests = lab.server.requests();
    assert_eq!(requests.len(), 7, "one request per scripted step");
    let checked = referee_all(&lab, &mut d, &requests);
    assert_eq!(checked, requests.len());
    // The work tree shows the tools ran.
    let notes = std::fs::read_to_string(lab.work.join("notes.txt")).unwrap();
    assert_eq!(notes, "ALPHA\nBETA\n");
    d.stop();
}

/// Every request pi sent passes the referee.
fn referee_every_request(lab: &Lab, d: &mut Daemon) {
    let requests = lab.server.requests();
    assert_eq!(referee_all(lab, d, &requests), requests.len());
}

/// The requests recorded after the first `skip`.
fn requests_after(lab: &Lab, skip: usize) -> Vec<Value> {
    lab.server.requests().into_iter().skip(skip).collect()
}

/// The request pi should send for a context extended by a new prompt: pi's own conversion of
/// `messages` plus the prompt as a user message.
fn predicted_request(lab: &Lab, messages: &Value, prompt: &str) -> Value {
    let mut messages = messages.as_array().unwrap().clone();
    messages.push(
        json!({"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": 0}),
    );
    lab.referee(&[Value::Array(messages)]).remove(0)
}

/// The part of a recorded request the referee predicts.
fn request_core(request: &Value) -> Value {
    let body = &request["body"];
    json!({"messages": body["messages"], "tools": body.get("tools").cloned().unwrap_or(Value::Null)})
}

/// Whether a request's messages hold a call of the tool `name`.
fn calls_tool(request: &Value, name: &str) -> bool {
    request["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .any(|c| c["function"]["name"] == name)
}

/// The id of the first entry of a file that satisfies `pred`.
fn first_entry(file: &Path, pred: impl Fn(&Value) -> bool) -> String {
    live::file_lines(file)
        .into_iter()
        .skip(1)
        .find(|e| pred(e))
        .and_then(|e| e["id"].as_str().map(str::to_owned))
        .expect("an entry that matches")
}

/// Test 3, fork then resume: sessiond forks the session (before the first user message, and at
/// the tool result just before an edit) and pi resumes each fork; pi's first request equals the
/// fork's context plus the new prompt, without the edit.
#[test]
fn fork_then_resume_sends_the_fork_context() {
    let Some(lab) = Lab::for_test("fork_then_resume_sends_the_fork_context", &tools_script())
    else {
        return;
    };
    lab.print(&[], "first");
    let file = only_session(&lab);
    let (mut d, _) = Daemon::start(&[&lab.sessions]);
    d.call("session/open", json!({"path": file}));

    let first_user = first_entry(&file, |e| e["message"]["role"] == "user");
    // The read's result: the next assistant message calls edit.
    let read_result = first_entry(&file, |e| e["message"]["toolName"] == "read");

    for (entry, position, prompt) in [
        (&first_user, "before", "again from the top"),
        (&read_result, "at", "stop before editing"),
    ] {
        let forked = d.call(
            "session/fork",
            json!({"path": file, "entryId": entry, "position": position}),
        );
        let fork_path = PathBuf::from(forked["path"].as_str().unwrap());
        d.call("session/open", json!({"path": fork_path}));
        let fork_context = context_messages(&mut d, &fork_path, None);
        let want = predicted_request(&lab, &fork_context, prompt);

        let seen = lab.server.requests().len();
        let s = fork_path.to_str().unwrap().to_owned();
        lab.print(&["--session", &s], prompt);
        let new = requests_after(&lab, seen);
        assert!(
            !new.is_empty(),
            "pi asked its model after resuming the fork"
        );
        let report = diff_report(&want, &request_core(&new[0]));
        assert!(
            report.is_empty(),
            "pi's first request after resuming the fork {position} {entry} is not the fork's context plus the prompt:\n{report}"
        );
        assert!(
            !calls_tool(&new[0], "edit"),
            "the fork has no edit: {}",
            new[0]
        );
    }
    // Every request, in the source and in both forks, passes the referee.
    referee_every_request(&lab, &mut d);
    d.stop();
}

/// Test 4, compact then resume: sessiond compacts the session (its own extractive summary) and
/// pi resumes it; pi's first request starts with sessiond's summary and equals the predicted
/// context.
#[test]
fn compact_then_resume_starts_with_the_summary() {
    let Some(lab) = Lab::for_test(
        "compact_then_resume_starts_with_the_summary",
        &tools_script(),
    ) else {
        return;
    };
    lab.print(&[], "first");
    let file = only_session(&lab);
    let s = file.to_str().unwrap().to_owned();
    lab.print(&["--session", &s], "second");
    let (mut d, _) = Daemon::start(&[&lab.sessions]);
    let opened = d.call("session/open", json!({"path": file}));

    let compacted = d.call(
        "session/compact",
        json!({"path": file, "expectedLeafId": opened["leafId"], "keepRecentTokens": 60}),
    );
    assert_eq!(compacted["written"], true, "compacted: {compacted}");
    let summary = compacted["summary"].as_str().unwrap().to_owned();
    assert!(!summary.is_empty());
    drain_notifications(&mut d, QUIET);
    let context = context_messages(&mut d, &file, None);
    assert_eq!(context[1]["role"], "compactionSummary", "{context}");
    let want = predicted_request(&lab, &context, "after compaction");

    let seen = lab.server.requests().len();
    lab.print(&["--session", &s], "after compaction");
    let new = requests_after(&lab, seen);
    assert!(!new.is_empty(), "pi asked its model after resuming");
    let got = request_core(&new[0]);
    let report = diff_report(&want, &got);
    assert!(
        report.is_empty(),
        "pi's first request after the compaction is not the predicted context:\n{report}"
    );
    // After the system prompt, the summary comes first.
    let first = got["messages"][1]["content"]
        .as_array()
        .and_then(|c| c[0]["text"].as_str())
        .or_else(|| got["messages"][1]["content"].as_str())
        .unwrap()
        .to_owned();
    assert!(
        first.contains(&summary),
        "the request starts with sessiond's summary: {first}"
    );
    referee_every_request(&lab, &mut d);
    d.stop();
}

/// Hazard, a session file born in pieces: sessiond opens pi's new file the moment it appears
/// (empty, a header alone, or more); nothing is corrupt, and every entry is in the tree at birth
/// or announced once after it, in file order.
#[test]
fn a_file_pi_is_creating_is_followed_from_its_birth() {
    let Some(lab) = Lab::for_test(
        "a_file_pi_is_creating_is_followed_from_its_birth",
        &tools_script(),
    ) else {
        return;
    };
    let (mut d, _) = Daemon::start(&[&lab.sessions]);
    let file = lab.sessions.join("born.jsonl");
    let s = file.to_str().unwrap().to_owned();
    let opened = std::thread::scope(|scope| {
        let run = scope.spawn(|| lab.print(&["--session", &s], "first"));
        // pi creates the file lazily, then writes its lines one by one: open it at once.
        let deadline = std::time::Instant::now() + live::PI_TIMEOUT;
        while !file.exists() {
            assert!(std::time::Instant::now() < deadline, "pi never created {s}");
            std::thread::sleep(Duration::from_micros(200));
        }
        let opened = d.call("session/open", json!({"path": file}));
        run.join().unwrap();
        opened
    });
    let notes = newer_than(&drain_notifications(&mut d, QUIET), &opened["revision"]);
    assert!(
        of_method(&notes, "session/didCorrupt").is_empty(),
        "{notes:?}"
    );
    let reloads = of_method(&notes, "session/didReload");
    let at_birth = if opened["pending"] == true {
        assert_eq!(reloads.len(), 1, "born once: {notes:?}");
        assert_eq!(reloads[0]["reason"], "born");
        reloads[0]["entryCount"].as_u64().unwrap() as usize
    } else {
        assert!(reloads.is_empty(), "{notes:?}");
        opened["entryCount"].as_u64().unwrap() as usize
    };
    let ids = file_ids(&file);
    assert_eq!(announced(&notes), ids[at_birth..].to_vec());
    eprintln!(
        "born: opened {} ({} entries then), {} at birth, {} announced after",
        if opened["pending"] == true {
            "pending"
        } else {
            "with a header"
        },
        opened["entryCount"],
        at_birth,
        ids.len() - at_birth
    );
    let theirs = pi_context(&lab, &file);
    let ours = d.call("session/contextAt", json!({"path": file}));
    let report = diff_report(&theirs, &restrict_to_context(&ours));
    assert!(report.is_empty(), "contextAt differs from pi:\n{report}");
    d.stop();
}

/// The first `session/didChange` (params) that `pred` accepts, within `timeout`.
fn wait_change(d: &mut Daemon, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let note = d
            .notification("session/didChange", left)
            .expect("the awaited session/didChange");
        if pred(&note) {
            return note;
        }
    }
}

/// Whether `pid` is pi's process `root` or a descendant of it (pi's launcher starts the
/// agent as a child process, and both are named `pi`).
fn is_pi_of(pid: &Value, root: u32) -> bool {
    let Some(mut cur) = pid.as_u64().and_then(|p| u32::try_from(p).ok()) else {
        return false;
    };
    for _ in 0..16 {
        if cur == root {
            return true;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{cur}/stat")) else {
            return false;
        };
        let Some(ppid) = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
        else {
            return false;
        };
        cur = ppid;
    }
    false
}

/// Hazard, writes while the agent runs: while pi (RPC mode) is mid-turn, context-changing
/// writes are refused with agentActive naming pi's process, labels are allowed, `force: true`
/// writes anyway (and the entry lands beside pi's path, which is why the refusal exists); once
/// pi has settled, writes go ahead.
#[test]
fn writes_while_pi_works_are_refused_unless_forced() {
    let Some(pi) = PiInstall::find("writes_while_pi_works_are_refused_unless_forced") else {
        return;
    };
    let mut script = tools_script();
    script["prompts"]["slow"] = json!([
        tool("bash", json!({"command": "sleep 4 && echo slept"})),
        {"text": "Rested."},
    ]);
    let lab = Lab::new(&pi, &script);
    lab.print(&[], "first");
    let file = only_session(&lab);
    let (mut d, _) = Daemon::start(&[&lab.sessions]);
    let opened = d.call("session/open", json!({"path": file}));
    assert_eq!(opened["agent"], Value::Null, "no agent yet: {opened}");
    let user = first_entry(&file, |e| e["message"]["role"] == "user");

    let mut rpc = lab.rpc(&file);
    rpc.send(json!({"type": "prompt", "message": "slow"}));
    // pi wrote the assistant message that calls bash; the tool sleeps now.
    let change = wait_change(&mut d, Duration::from_secs(60), |c| {
        c["added"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["role"] == "assistant")
    });
    let leaf = change["leafId"].clone();
    let custom = json!({"type": "custom_message", "customType": "note", "content": "from sessiond", "display": true});

    let refused = d.request(
        "session/append",
        json!({"path": file, "entry": custom, "expectedLeafId": leaf}),
    );
    let (code, message, data) = support::error_of(&refused);
    assert_eq!(code, -33019, "{refused}");
    assert!(
        is_pi_of(&data["agent"]["pid"], rpc.pid()),
        "names pi's process: {refused}"
    );
    assert_eq!(data["agent"]["command"], "pi");
    assert!(message.contains("agent"), "{message}");
    eprintln!("agentActive: {message}");
    for (method, params) in [
        (
            "session/branch",
            json!({"path": file, "fromId": user, "summary": "elsewhere", "expectedLeafId": leaf}),
        ),
        (
            "session/compact",
            json!({"path": file, "expectedLeafId": leaf, "keepRecentTokens": 10}),
        ),
    ] {
        let r = d.request(method, params);
        assert_eq!(support::error_of(&r).0, -33019, "{method}: {r}");
    }
    // The CLI refuses the same writes (exit 7, `agentActive`) and writes nothing.
    let before = std::fs::read(&file).unwrap();
    let (file_arg, leaf_arg, entry_arg) = (
        file.to_str().unwrap(),
        leaf.as_str().unwrap(),
        custom.to_string(),
    );
    for args in [
        vec![
            "append",
            file_arg,
            "--entry",
            &entry_arg,
            "--expected-leaf",
            leaf_arg,
            "--json",
        ],
        vec![
            "compact",
            file_arg,
            "--expected-leaf",
            leaf_arg,
            "--keep-recent-tokens",
            "10",
            "--json",
        ],
    ] {
        let out = std::process::Command::new(support::BIN)
            .args(&args)
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(7), "{args:?}: {doc}");
        assert_eq!(doc["error"]["kind"], "agentActive", "{args:?}: {doc}");
        assert!(is_pi_of(&doc["error"]["agent"]["pid"], rpc.pid()), "{doc}");
        assert!(
            doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--force"),
            "{doc}"
        );
    }
    let now = std::fs::read(&file).unwrap();
    assert_eq!(
        &now[..before.len().min(now.len())],
        &before[..before.len().min(now.len())]
    );
    assert!(
        !String::from_utf8_lossy(&now[before.len().min(now.len())..]).contains("from sessiond"),
        "the CLI wrote beside pi"
    );
    // Once the tool runs (and the daemon's look at /proc is a second old), the tool's
    // environment names the session.
    std::thread::sleep(Duration::from_millis(1200));
    let open_now = d.call("session/open", json!({"path": file}));
    assert!(is_pi_of(&open_now["agent"]["pid"], rpc.pid()), "{open_now}");
    assert_eq!(
        open_now["agent"]["evidence"], "toolEnvironment",
        "{open_now}"
    );
    // Labels never reach the model: allowed.
    let labelled = d.call(
        "session/label",
        json!({"path": file, "targetId": user, "label": "start", "expectedLeafId": leaf}),
    );
    // Forced: written, beside pi's path.
    let forced = d.call(
        "session/append",
        json!({"path": file, "entry": custom, "expectedLeafId": labelled["leafId"], "force": true}),
    );
    let forced_id = forced["id"].as_str().unwrap().to_owned();

    rpc.wait_for(Duration::from_secs(60), |v| v["type"] == "agent_settled");
    let settled = d.call("session/open", json!({"path": file}));
    let path = d.call("session/contextAt", json!({"path": file, "fields": "ids"}));
    assert!(
        !path["entryIds"]
            .as_array()
            .unwrap()
            .contains(&json!(forced_id)),
        "pi continued from its own entry, not from the forced one: {path}"
    );
    // pi is idle now: the same write goes ahead.
    let after = d.call(
        "session/append",
        json!({"path": file, "entry": custom, "expectedLeafId": settled["leafId"]}),
    );
    assert_eq!(after["written"], true);
    rpc.stop();
    d.stop();
}

/// The ids of the nodes of an open session, in `session/tree` order, sorted for comparison.
fn tree_ids(d: &mut Daemon, file: &Path) -> Vec<String> {
    let tree = d.call("session/tree", json!({"path": file, "limit": 10000}));
    assert_eq!(tree["complete"], true);
    let mut ids: Vec<String> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// The tree and context sessiond holds equal the file's entries and pi's own context.
fn assert_tree_is_the_file(lab: &Lab, d: &mut Daemon, file: &Path) {
    let mut want = file_ids(file);
    want.sort();
    assert_eq!(tree_ids(d, file), want, "sessiond's tree is the file's");
    let theirs = pi_context(lab, file);
    let ours = d.call("session/contextAt", json!({"path": file}));
    let report = diff_report(&theirs, &restrict_to_context(&ours));
    assert!(report.is_empty(), "contextAt differs from pi:\n{report}");
}

/// pi's rewrite path 1: pi migrates an older session file in place when it opens it. With
/// sessiond following, one `session/didReload` and a correct tree afterwards.
#[test]
fn pi_migrating_an_old_file_in_place_gives_one_reload() {
    let Some(lab) = Lab::for_test(
        "pi_migrating_an_old_file_in_place_gives_one_reload",
        &tools_script(),
    ) else {
        return;
    };
    let file = lab.sessions.join("old.jsonl");
    // pi refuses a session whose working directory does not exist: point it at the work tree.
    let old = std::fs::read_to_string(
        support::repo().join("tests/data/synthetic/v1-linear-compaction.jsonl"),
    )
    .unwrap()
    .replace(
        r#""cwd":"/home/dev/projects/webshop""#,
        &format!(r#""cwd":{}"#, json!(lab.work)),
    );
    std::fs::write(&file, old).unwrap();
    let (mut d, _) = Daemon::start(&[&lab.sessions]);
    let opened = d.call("session/open", json!({"path": file}));
    assert_eq!(opened["header"]["version"], Value::Null, "a version-1 file");
    let s = file.to_str().unwrap().to_owned();
    lab.print(&["--session", &s], "first");
    let notes = newer_than(&drain_notifications(&mut d, QUIET), &opened["revision"]);
    assert!(
        of_method(&notes, "session/didCorrupt").is_empty(),
        "{notes:?}"
    );
    let reloads = of_method(&notes, "session/didReload");
    assert_eq!(reloads.len(), 1, "one reload: {notes:?}");
    eprintln!("migration: reload reason {}", reloads[0]["reason"]);
    assert_eq!(
        live::file_lines(&file)[0]["version"],
        3,
        "pi migrated the file"
    );
    // Entries after the reload are announced once each.
    let at_reload = reloads[0]["entryCount"].as_u64().unwrap() as usize;
    assert_eq!(announced(&notes), file_ids(&file)[at_reload..].to_vec());
    assert_tree_is_the_file(&lab, &mut d, &file);
    d.stop();
}

/// pi's rewrite path 2: pi rewrites an empty file given to `--session` (a header, then its
/// entries). sessiond follows the young empty file as pending: one `session/didReload`
/// (`born`) and a correct tree afterwards.
#[test]
fn pi_rewriting_an_empty_session_file_gives_one_reload() {
    let Some(lab) = Lab::for_test(
        "pi_rewriting_an_empty_session_file_gives_one_reload",
        &tools_script(),
    ) else {
        return;
    };
    let file = lab.sessions.join("empty.jsonl");
    std::fs::write(&file, "").unwrap();
    let (mut d, _) = Daemon::start(&[&lab.sessions]);
    let opened = d.call("session/open", json!({"path": file}));
    assert_eq!(opened["pending"], true, "{opened}");
    let s = file.to_str().unwrap().to_owned();
    lab.print(&["--session", &s], "first");
    let notes = newer_than(&drain_notifications(&mut d, QUIET), &opened["revision"]);
    assert!(
        of_method(&notes, "session/didCorrupt").is_empty(),
        "{notes:?}"
    );
    let reloads = of_method(&notes, "session/didReload");
    assert_eq!(reloads.len(), 1, "one reload: {notes:?}");
    assert_eq!(reloads[0]["reason"], "born");
    let at_birth = reloads[0]["entryCount"].as_u64().unwrap() as usize;
    assert_eq!(announced(&notes), file_ids(&file)[at_birth..].to_vec());
    assert_tree_is_the_file(&lab, &mut d, &file);
    d.stop();
}

/// Resident memory of a process, in KiB (`VmRSS` of `/proc/PID/status`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// The `q` quantile of sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Prompts of the soak; each runs five turns (write, read, edit, bash, answer).
const SOAK_PROMPTS: usize = 60;

/// Test 5, RPC mode and a long soak: pi in RPC mode through many prompts (a few hundred turns)
/// with sessiond following. Every entry is announced once, in order; every request passes the
/// referee; the daemon's memory stays flat. Prints turns, entries and the `didChange` latency
/// (from the entry's own timestamp to the notification's arrival).
#[test]
fn rpc_soak_zero_mismatches_flat_memory() {
    let Some(pi) = PiInstall::find("rpc_soak_zero_mismatches_flat_memory") else {
        return;
    };
    let started = std::time::Instant::now();
    let mut script = tools_script();
    script["default"] = json!([
        tool("write", json!({"path": "soak.txt", "content": "one\ntwo\n"})),
        tool("read", json!({"path": "soak.txt"})),
        tool("edit", json!({"path": "soak.txt", "edits": [{"oldText": "one", "newText": "ONE"}]})),
        tool("bash", json!({"command": "cat soak.txt"})),
        {"text": "Soaked."},
    ]);
    let lab = Lab::new(&pi, &script);
    lab.print(&[], "first");
    let file = only_session(&lab);
    let (mut d, _) = Daemon::start(&[&lab.sessions]);
    let opened = d.call("session/open", json!({"path": file}));
    let before = file_ids(&file).len();
    let mut rpc = lab.rpc(&file);

    let mut notes: Vec<Value> = Vec::new();
    let mut latencies_ms: Vec<f64> = Vec::new();
    let mut turns = 0usize;
    let mut rss_start = 0;
    let deadline = started + Duration::from_secs(240);
    for i in 0..SOAK_PROMPTS {
        rpc.send(json!({"type": "prompt", "message": format!("soak {i}")}));
        let mut settled = false;
        while !settled {
            assert!(
                std::time::Instant::now() < deadline,
                "the soak ran out of time at prompt {i}"
            );
            while let Some(event) = rpc.try_next() {
                match event["type"].as_str() {
                    Some("turn_end") => turns += 1,
                    Some("agent_settled") => settled = true,
                    Some("response") if event["success"] == false => panic!("pi refused: {event}"),
                    _ => {}
                }
            }
            if let Some(m) = d.next_message(Duration::from_millis(2)) {
                let now = std::time::SystemTime::now();
                if m["method"] == "session/didChange" {
                    for n in m["params"]["added"].as_array().unwrap() {
                        let ts = n["timestamp"].as_str().unwrap();
                        let ms = sessiond::js::timestamp::parse_iso(ts).unwrap();
                        let written = std::time::UNIX_EPOCH + Duration::from_millis(ms as u64);
                        let lag = now.duration_since(written).unwrap_or_default();
                        latencies_ms.push(lag.as_secs_f64() * 1000.0);
                    }
                }
                if m.get("method").is_some() {
                    notes.push(m);
                }
            }
        }
        if i == 0 {
            // Measured once the daemon has followed a whole prompt: its working set is warm.
            rss_start = rss_kib(d.pid());
        }
    }
    notes.extend(drain_notifications(&mut d, QUIET));
    let rss_end = rss_kib(d.pid());
    rpc.stop();

    let notes = newer_than(&notes, &opened["revision"]);
    let ids = file_ids(&file);
    let announced = announced(&notes);
    assert_eq!(
        announced.len(),
        ids.len() - before,
        "every entry announced once"
    );
    assert_eq!(announced, ids[before..].to_vec(), "in file order");
    for m in ["session/didReload", "session/didCorrupt"] {
        assert!(of_method(&notes, m).is_empty(), "no {m}");
    }
    let requests = lab.server.requests();
    let checked = referee_all(&lab, &mut d, &requests);
    latencies_ms.sort_by(f64::total_cmp);
    let median = quantile(&latencies_ms, 0.5);
    let p99 = quantile(&latencies_ms, 0.99);
    eprintln!(
        "soak: {SOAK_PROMPTS} prompts, {turns} turns, {} entries ({} new), {checked} requests refereed, 0 mismatches; \
         didChange latency median {median:.1} ms, p90 {:.1} ms, p99 {p99:.1} ms, max {:.1} ms; \
         daemon RSS {rss_start} KiB after the first prompt, {rss_end} KiB at the end; {:.1} s",
        ids.len(),
        ids.len() - before,
        quantile(&latencies_ms, 0.9),
        latencies_ms.last().copied().unwrap_or(0.0),
        started.elapsed().as_secs_f64(),
    );
    assert!(turns >= 5 * SOAK_PROMPTS, "a few hundred turns: {turns}");
    assert!(
        rss_end < rss_start + 24 * 1024,
        "daemon memory grew from {rss_start} KiB to {rss_end} KiB"
    );
    // Latency is printed, never asserted (the machine may be loaded): speed belongs to the
    // benchmarks. Memory staying flat is the soak's point: a generous bound catches a leak.
    d.stop();
}

/// `sessiond ARGS` that must succeed; its `--json` document.
fn sessiond_json(args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(args)
        .output()
        .expect("run sessiond");
    assert!(
        out.status.success(),
        "sessiond {args:?}: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A project moved: pi's session, kept in pi's own sessions directory (no `--session-dir`),
/// is archived, the project renamed, and `restore --cwd NEWDIR` writes it (header `cwd`
/// rewritten) where pi looks for NEWDIR's sessions; `pi --continue` run in NEWDIR continues
/// it, its first request being sessiond's context of the restored file plus the new prompt,
/// and the original file is not touched.
#[test]
fn a_moved_project_restored_with_cwd_is_continued_by_pi_in_its_new_place() {
    let test = "a_moved_project_restored_with_cwd_is_continued_by_pi_in_its_new_place";
    let Some(lab) = Lab::for_test(test, &tools_script()) else {
        return;
    };
    let run_in = |cwd: &Path, args: &[&str]| {
        let mut cmd = lab.pi_command(args);
        cmd.current_dir(cwd);
        let out = live::run_bounded(cmd, live::PI_TIMEOUT, "pi --print");
        assert!(
            out.status.success(),
            "pi {args:?} failed ({:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run_in(&lab.work, &["--print", "first"]);
    let sessions = lab.agent.join("sessions");
    let dir_of = |cwd: &Path| {
        let name = cwd
            .to_str()
            .unwrap()
            .trim_start_matches('/')
            .replace('/', "-");
        sessions.join(format!("--{name}--"))
    };
    let jsonl_in = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        v.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
        v
    };
    let originals = jsonl_in(&dir_of(&lab.work));
    assert_eq!(originals.len(), 1, "pi kept its session for the work tree");
    let original = originals[0].clone();
    let header = live::file_lines(&original)[0].clone();
    assert_eq!(header["cwd"], lab.work.to_str().unwrap());
    let id = header["id"].as_str().unwrap().to_owned();

    let archive = lab.base().join("archive");
    let a = archive.to_str().unwrap();
    sessiond_json(&[
        "archive",
        "--root",
        sessions.to_str().unwrap(),
        "--to",
        a,
        "--json",
    ]);
    let moved = lab.work.with_file_name("moved project");
    std::fs::rename(&lab.work, &moved).unwrap();
    let original_bytes = std::fs::read(&original).unwrap();
    let restored = sessiond_json(&[
        "restore",
        a,
        &id,
        "--cwd",
        moved.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(restored["written"], true, "{restored}");
    let file = PathBuf::from(restored["path"].as_str().unwrap());
    assert_eq!(
        file,
        dir_of(&moved).join(original.file_name().unwrap()),
        "restored where pi looks for the new directory's sessions"
    );
    let restored_bytes = std::fs::read(&file).unwrap();
    let lines = live::file_lines(&file);
    assert_eq!(lines[0]["cwd"], moved.to_str().unwrap());
    // pi 1.6 records its system prompt in sections, the cwd among them: rewritten too.
    let new_section = format!("<cwd>\n{}\n</cwd>", moved.to_str().unwrap());
    let mut prompts = 0;
    for (r, o) in lines[1..].iter().zip(&live::file_lines(&original)[1..]) {
        let mut want = o.clone();
        if want["message"]["sections"]["cwd"].is_string() {
            want["message"]["sections"]["cwd"] = json!(new_section);
            prompts += 1;
        }
        assert_eq!(r, &want, "only the cwd changed");
    }
    assert!(prompts > 0, "pi recorded its prompt's cwd");

    // pi continues the most recent session of the new directory: the restored one.
    let ctx = sessiond_json(&["context", file.to_str().unwrap(), "--json"]);
    let want = predicted_request(&lab, &ctx["messages"], "second");
    let seen = lab.server.requests().len();
    run_in(&moved, &["--print", "--continue", "second"]);
    let new = requests_after(&lab, seen);
    assert!(!new.is_empty(), "pi asked its model after continuing");
    let report = diff_report(&want, &request_core(&new[0]));
    assert!(
        report.is_empty(),
        "pi's first request after continuing in the new place is not sessiond's context of the restored file plus the prompt:\n{report}"
    );
    let now = std::fs::read(&file).unwrap();
    assert!(
        now.starts_with(&restored_bytes) && now.len() > restored_bytes.len(),
        "pi appended to the restored file"
    );
    assert_eq!(
        jsonl_in(&dir_of(&moved)),
        vec![file.clone()],
        "and wrote no other"
    );
    let appended: Vec<Value> = live::file_lines(&file)[lines.len()..].to_vec();
    assert!(
        appended.iter().all(|l| l["message"]["role"] != "system"),
        "the prompt the restored file records is the one pi sends here: no patch: {appended:?}"
    );
    assert_eq!(
        std::fs::read(&original).unwrap(),
        original_bytes,
        "the original is untouched"
    );
    // The tool ran in the new place: the file the first run wrote there is edited again.
    assert_eq!(
        std::fs::read_to_string(moved.join("notes.txt")).unwrap(),
        "ALPHA\nBETA\n"
    );
}
