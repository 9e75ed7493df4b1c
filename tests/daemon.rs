//! Integration tests of `sessiond serve`: the real binary over pipes with LSP framing.
//! Lifecycle, every method against the fixtures and the schemas, live tailing with a writer
//! process, reloads, corruption, and bad input.
// Helpers fail the test by panicking, like assertions.
#![allow(clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::{
    Daemon, NOTE_WAIT, append, assert_schema, checked, cli_json, error_of, followed, repo,
    session_text, v3_session,
};

fn fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["examples", "tests/data/synthetic"] {
        for e in std::fs::read_dir(repo().join(dir))
            .expect("fixture dir")
            .flatten()
        {
            if e.path().extension().is_some_and(|x| x == "jsonl") {
                files.push(e.path());
            }
        }
    }
    files.sort();
    files
}

#[test]
fn lifecycle_and_every_method_on_a_fixture() {
    let examples = repo().join("examples");
    let (mut d, init) = Daemon::start(&[&examples]);
    let caps = &init["result"]["capabilities"]["experimental"]["sessiond"];
    assert_eq!(
        caps["protocolVersion"],
        json!(sessiond::server::PROTOCOL_VERSION)
    );
    assert_eq!(caps["methods"], json!(sessiond::server::METHODS));
    assert_eq!(
        caps["notifications"],
        json!(sessiond::server::NOTIFICATIONS)
    );

    let file = examples.join("pi-v3-branched.jsonl");
    let path = file.to_str().expect("utf-8 path");
    let open = checked(&mut d, "session/open", json!({"path": path}));
    let cli_tree = cli_json(&["tree", "--json", path]);
    assert_eq!(open["sessionId"], cli_tree["sessionId"]);
    assert_eq!(open["leaves"], cli_tree["leaves"]);
    assert_eq!(open["leafId"], cli_tree["defaultLeafId"]);
    assert_eq!(open["entryCount"], cli_tree["entryCount"]);
    assert_eq!(open["name"], cli_tree["name"]);

    // The whole tree in pages of 100 nodes, following each page's `next`, equals the CLI's.
    let mut seen: Vec<Value> = Vec::new();
    let mut todo: Vec<Value> = vec![json!({})];
    while let Some(cursor) = todo.pop() {
        let mut params = json!({"path": path, "limit": 100, "depth": 10});
        for (k, v) in cursor.as_object().expect("cursor") {
            params[k] = v.clone();
        }
        let page = checked(&mut d, "session/tree", params);
        seen.extend(page["nodes"].as_array().expect("nodes").iter().cloned());
        todo.extend(page["next"].as_array().expect("next").iter().cloned());
    }
    assert_eq!(
        seen.len(),
        cli_tree["nodes"].as_array().expect("nodes").len()
    );
    for n in &seen {
        let c = cli_tree["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|c| c["id"] == n["id"])
            .expect("node in CLI tree");
        for key in ["parentId", "type", "preview", "timestamp", "childCount"] {
            assert_eq!(n[key], c[key], "{key} of {}", n["id"]);
        }
    }

    let leaf = open["leaves"][0].as_str().expect("leaf").to_owned();
    let entry = checked(&mut d, "session/entry", json!({"path": path, "id": leaf}));
    let raw_line = std::fs::read_to_string(&file)
        .expect("read")
        .lines()
        .nth(entry["line"].as_u64().expect("line") as usize - 1)
        .expect("line")
        .to_owned();
    assert_eq!(entry["raw"], json!(raw_line));
    assert_eq!(entry["entry"]["id"], json!(leaf));

    let ctx = checked(
        &mut d,
        "session/contextAt",
        json!({"path": path, "leafId": leaf}),
    );
    let cli = cli_json(&["context", "--json", path, "--leaf", &leaf]);
    for (k, v) in cli.as_object().expect("object") {
        assert_eq!(&ctx[k], v, "contextAt {k}");
    }
    // The estimate function itself is checked against pi through compaction's tokensBefore
    // (tests/compaction_differential.rs); here: the daemon sums it over the whole context.
    let expected_tokens: f64 = cli["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            use sessiond::dialect::pi::compaction::tokens::estimate_tokens;
            estimate_tokens(m).expect("estimate")
        })
        .sum();
    assert_eq!(ctx["tokenEstimate"], json!(expected_tokens as u64));
    assert_eq!(
        ctx["messageCount"],
        json!(cli["messages"].as_array().map(Vec::len))
    );

    // Paging and fields.
    let page = checked(
        &mut d,
        "session/contextAt",
        json!({"path": path, "leafId": leaf, "offset": 1, "limit": 2, "fields": "previews"}),
    );
    assert_eq!(page["messages"].as_array().map(Vec::len), Some(2));
    assert_eq!(page["messages"][0]["role"], cli["messages"][1]["role"]);
    assert_eq!(
        page["messageEntryIds"],
        json!(cli["messageEntryIds"].as_array().expect("ids")[1..3])
    );
    let ids = checked(
        &mut d,
        "session/contextAt",
        json!({"path": path, "fields": "ids"}),
    );
    assert!(ids.get("messages").is_none());
    // The estimate counted while rendering every message (the first full request at a leaf)
    // equals the one read separately (a window, or ids only).
    assert_eq!(page["tokenEstimate"], ctx["tokenEstimate"]);
    let ids_at_leaf = checked(
        &mut d,
        "session/contextAt",
        json!({"path": path, "leafId": leaf, "fields": "ids"}),
    );
    assert_eq!(ids_at_leaf["tokenEstimate"], ctx["tokenEstimate"]);

    let first = cli_tree["nodes"][0]["id"].as_str().expect("id").to_owned();
    let ex = checked(
        &mut d,
        "session/explain",
        json!({"path": path, "entryId": first, "leafId": leaf}),
    );
    let cli_ex = cli_json(&["explain", "--json", path, &first, "--leaf", &leaf]);
    for (k, v) in cli_ex.as_object().expect("object") {
        assert_eq!(&ex[k], v, "explain {k}");
    }

    let list = checked(&mut d, "session/list", json!({}));
    let listed: BTreeSet<&str> = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["path"].as_str())
        .collect();
    assert_eq!(listed.len(), 3, "{list}");
    let me = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["path"] == json!(path))
        .expect("listed");
    assert_eq!(
        me["name"], open["name"],
        "open sessions are listed with their name"
    );
    assert_eq!(
        me["size"],
        json!(std::fs::metadata(&file).expect("stat").len())
    );

    checked(&mut d, "session/close", json!({"path": path}));
    let (code, message, _) = error_of(&d.request("session/tree", json!({"path": path})));
    assert_eq!(code, sessiond::server::error::SESSION_NOT_OPEN);
    assert!(message.contains("pi-v3-branched.jsonl"), "{message}");
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn context_at_equals_the_cli_on_every_fixture() {
    let roots = [repo().join("examples"), repo().join("tests/data/synthetic")];
    let (mut d, _) = Daemon::start(&[&roots[0], &roots[1]]);
    for file in fixtures() {
        let path = file.to_str().expect("utf-8");
        let open = d.call("session/open", json!({"path": path}));
        let mut leaves: Vec<Option<String>> = vec![None];
        if open["leaves"].as_array().map_or(0, Vec::len) <= 8 {
            leaves.extend(
                open["leaves"]
                    .as_array()
                    .expect("leaves")
                    .iter()
                    .map(|l| l.as_str().map(str::to_owned)),
            );
        }
        for leaf in leaves {
            let mut params = json!({"path": path});
            let mut args = vec!["context", "--json", path];
            if let Some(l) = &leaf {
                params["leafId"] = json!(l);
                args.extend(["--leaf", l]);
            }
            let ctx = d.call("session/contextAt", params);
            assert_schema("session/contextAt", "result", &ctx);
            let cli = cli_json(&args);
            for (k, v) in cli.as_object().expect("object") {
                assert_eq!(&ctx[k], v, "{} leaf {leaf:?}: {k}", file.display());
            }
            // Counted while the messages were rendered: pi's estimate of each, summed, over
            // the CLI's document read as `JSON.parse` reads it (lone surrogates kept).
            use sessiond::dialect::pi::compaction::tokens::estimate_tokens;
            use sessiond::js::value as js;
            let out = std::process::Command::new(support::BIN)
                .args(&args)
                .output()
                .expect("run sessiond context");
            let doc = js::parse_json(&out.stdout).expect("context --json");
            let expected: u64 = doc["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .map(|m| estimate_tokens(m).unwrap_or(0.0) as u64)
                .sum();
            assert_eq!(
                ctx["tokenEstimate"],
                json!(expected),
                "{} leaf {leaf:?}",
                file.display()
            );
        }
        d.call("session/close", json!({"path": path}));
    }
    assert_eq!(d.stop(), Some(0));
}

/// A daemon with `tests/data/text/NAME.jsonl` open, its path, and pi's context document for
/// it (`NAME.pi-context.json`, made by the oracle; see `tests/golden.rs`).
fn open_text_session(name: &str) -> (Daemon, String, Value) {
    let dir = repo().join("tests/data/text");
    let path = dir.join(format!("{name}.jsonl"));
    let pi = support::common::parse_json(
        &std::fs::read(dir.join(format!("{name}.pi-context.json"))).expect("pi's answer"),
    )
    .expect("pi's answer is JSON");
    let (mut d, _) = Daemon::start(&[&dir]);
    let path = path.to_str().expect("utf-8").to_owned();
    d.call("session/open", json!({"path": path}));
    (d, path, pi)
}

/// `session/contextAt` passes a message's text on as pi does: U+FDD0 followed by a
/// private-use character stays text, and an entry id holding a lone surrogate keeps pi's
/// escape (the test client reads an escape as its text, so the two stay apart).
#[test]
fn context_at_passes_message_text_on_as_pi_does() {
    let (mut d, path, pi) = open_text_session("noncharacter-text");
    let path = path.as_str();
    let ctx = d.call("session/contextAt", json!({"path": path}));
    assert_eq!(ctx["messages"], pi["messages"]);
    assert_eq!(ctx["entryIds"][1], json!(r"f3100002\ud800"));
    assert_eq!(d.stop(), Some(0));
}

/// `session/contextAt` gives pi's `thinkingLevel` and `model` where they hold U+FDD0 followed by
/// a private-use character (text, not a lone surrogate), with every kind of `fields`.
#[test]
fn context_at_gives_settings_text_as_pi_does() {
    let (mut d, path, pi) = open_text_session("noncharacter-settings");
    let path = path.as_str();
    for fields in ["full", "previews", "ids"] {
        let ctx = d.call("session/contextAt", json!({"path": path, "fields": fields}));
        assert_eq!(ctx["thinkingLevel"], pi["thinkingLevel"], "{fields}");
        assert_eq!(ctx["model"], pi["model"], "{fields}");
    }
    assert_eq!(d.stop(), Some(0));
}

/// `session/entry` gives each line as the file holds it: `raw` is its text and `entry` what
/// `JSON.parse` makes of it, for lines pi writes and for odd ones (spaces and needless escapes,
/// a duplicate key, U+FDD0 followed by a private-use character, a lone surrogate escape in the
/// id, bytes that are not UTF-8).
#[test]
fn entry_gives_each_line_as_the_file_holds_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("odd.jsonl");
    let mut text: Vec<u8> = Vec::new();
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
    let lines: [&[u8]; 4] = [
        br#"{ "type" : "message", "id":"e1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"caf\u00e9 \/ tab\t"} }"#,
        br#"{"type":"custom","id":"e2","parentId":"e1","timestamp":"2026-01-01T00:00:02.000Z","data":1,"data":{"x":[1,2.50,-0]}}"#,
        "{\"type\":\"message\",\"id\":\"e3\",\"parentId\":\"e2\",\"timestamp\":\"2026-01-01T00:00:03.000Z\",\"message\":{\"role\":\"user\",\"content\":\"keep \u{fdd0}\u{e000} as text\"}}".as_bytes(),
        b"{\"type\":\"message\",\"id\":\"e4\",\"parentId\":\"e3\",\"timestamp\":\"2026-01-01T00:00:04.000Z\",\"message\":{\"role\":\"user\",\"content\":\"not utf-8: \xff\xfe\"}}",
    ];
    text.extend_from_slice(header.as_bytes());
    text.push(b'\n');
    for line in lines {
        text.extend_from_slice(line);
        text.push(b'\n');
    }
    let surrogate_id = r#"{"type":"message","id":"e5\ud800","parentId":"e4","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"user","content":"x"}}"#;
    text.extend_from_slice(surrogate_id.as_bytes());
    text.push(b'\n');
    std::fs::write(&file, &text).expect("write");
    let path = file.to_str().expect("utf-8").to_owned();
    let (mut d, _) = Daemon::start(&[dir.path()]);
    d.call("session/open", json!({"path": path}));
    let expect = |entry: &Value, id: &str, line: &[u8], number: u64| {
        let lossy = String::from_utf8_lossy(line);
        assert_eq!(entry["raw"], json!(lossy), "raw of {id}");
        assert_eq!(
            entry["entry"],
            support::common::parse_json(lossy.as_bytes()).expect("a JSON line"),
            "entry of {id}"
        );
        assert_eq!(entry["line"], json!(number), "line of {id}");
        assert_schema("session/entry", "result", entry);
    };
    for (i, line) in lines.iter().enumerate() {
        let id = format!("e{}", i + 1);
        let entry = checked(&mut d, "session/entry", json!({"path": path, "id": id}));
        assert_eq!(entry["id"], json!(id));
        expect(&entry, &id, line, i as u64 + 2);
    }
    // The id's lone surrogate travels as its escape, both ways.
    let id = d.next_request_id() + 100;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"session/entry","params":{{"path":{},"id":"e5\ud800"}}}}"#,
        json!(path)
    );
    d.write_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    let answer = d.response(&json!(id));
    let entry = &answer["result"];
    assert_eq!(entry["id"], json!(r"e5\ud800"), "{answer}");
    expect(entry, "e5", surrogate_id.as_bytes(), 6);
    assert_eq!(d.stop(), Some(0));
}

/// A daemon over `root` with `files` open, and their paths.
fn open_all<const N: usize>(root: &Path, files: [&Path; N]) -> (Daemon, [String; N]) {
    let (mut d, _) = Daemon::start(&[root]);
    let paths = files.map(|f| f.to_str().expect("utf-8").to_owned());
    for path in &paths {
        d.call("session/open", json!({"path": path}));
    }
    (d, paths)
}

/// Polls `cond` until it holds; fails after 10 s, naming `what` it waited for.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "waited 10 s: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether process `pid` holds `file` open with `O_APPEND` (`/proc/PID/fdinfo` flags, octal).
fn open_for_append(pid: u32, file: &Path) -> bool {
    let want = std::fs::canonicalize(file).expect("the file exists");
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| target == want)
            && std::fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                fd.file_name().to_string_lossy()
            ))
            .ok()
            .and_then(|info| {
                let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
                u32::from_str_radix(flags.trim(), 8).ok()
            })
            .is_some_and(|flags| flags & 0o2000 != 0)
    })
}

/// The ids of the next `n` responses, in the order they came (each must be a result).
fn answer_order(d: &mut Daemon, n: usize) -> Vec<Value> {
    let mut order = Vec::new();
    while order.len() < n {
        let msg = d.next_message(NOTE_WAIT).expect("an answer");
        if msg.get("method").is_none() {
            assert!(msg.get("result").is_some(), "{msg}");
            order.push(msg["id"].clone());
        }
    }
    order
}

/// The daemon's runtime has one worker, so a long request on a large session must leave it
/// (`session::owner::Cost`): small requests on another session, sent one after another while
/// a whole context of 32 MB is being rendered, are answered before it.
#[test]
fn a_long_request_on_a_large_session_does_not_hold_up_another_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (header, entries) = v3_session(4000);
    let padding = "word ".repeat(1600);
    let mut large = header.clone() + "\n";
    for (_, line) in &entries {
        // Every message gets 8 KB of text more: 4,000 of them make the context 32 MB.
        large.push_str(
            &line
                .replacen("question ", &format!("question {padding}"), 1)
                .replacen("answer ", &format!("answer {padding}"), 1),
        );
        large.push('\n');
    }
    assert!(large.len() > 30 << 20, "{} bytes", large.len());
    let large_path = dir.path().join("large.jsonl");
    std::fs::write(&large_path, &large).expect("write");
    let small = session_text(&header, &entries[..10]);
    let small_path = dir.path().join("small.jsonl");
    std::fs::write(&small_path, &small).expect("write");
    let (mut d, [large_path, small_path]) = open_all(dir.path(), [&large_path, &small_path]);
    let long = d.next_request_id() + 1000;
    d.send(&json!({"jsonrpc": "2.0", "id": long, "method": "session/contextAt", "params": {"path": large_path}}));
    // Small requests one at a time, each sent when the one before is answered, until the
    // context comes. The first may run before the context starts (the runtime picks the
    // order of two requests it holds), so it proves nothing; a second one answered first was
    // sent after the first's answer, when the context was under way or queued: a context
    // holding the worker would have kept it waiting.
    let mut shorts_first = 0;
    for n in 1.. {
        let short = long + n;
        d.send(&json!({"jsonrpc": "2.0", "id": short, "method": "session/entry", "params": {"path": small_path, "id": entries[9].0}}));
        let first = answer_order(&mut d, 1);
        if first == [json!(long)] {
            assert_eq!(answer_order(&mut d, 1), [json!(short)]);
            break;
        }
        assert_eq!(first, [json!(short)]);
        shorts_first += 1;
    }
    assert!(
        shorts_first >= 2,
        "only {shorts_first} small request(s) answered while the 32 MB context was made"
    );
    assert_eq!(d.stop(), Some(0));
}

/// A write waits for the file's lock, which another process may hold for seconds; it must not
/// hold up the daemon (`session::owner::Cost::Wait`): while `flock` holds a small session's
/// lock, a label on it waits, and a request on another session is answered meanwhile.
#[test]
fn a_write_waiting_for_the_lock_does_not_hold_up_another_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (header, entries) = v3_session(10);
    let text = session_text(&header, &entries);
    let (locked, other) = (
        dir.path().join("locked.jsonl"),
        dir.path().join("other.jsonl"),
    );
    std::fs::write(&locked, &text).expect("write");
    std::fs::write(&other, &text).expect("write");
    let (mut d, [locked, other]) = open_all(dir.path(), [&locked, &other]);
    // util-linux `flock`: holds an exclusive lock on the file, as a writer would, from when it
    // creates `ready` until the test creates `release`.
    let (ready, release) = (dir.path().join("ready"), dir.path().join("release"));
    let mut holder = std::process::Command::new("flock")
        .args(["-x", &locked, "sh", "-c"])
        .arg(format!(
            "touch '{}'; while [ ! -e '{}' ]; do sleep 0.01; done",
            ready.display(),
            release.display()
        ))
        .spawn()
        .expect("flock (util-linux) runs");
    wait_until("flock holds the lock", || ready.exists());
    let (write, read) = (d.next_request_id() + 1000, d.next_request_id() + 1001);
    let label = json!({"path": locked, "targetId": entries[0].0, "label": "start", "expectedLeafId": entries[9].0});
    d.send(&json!({"jsonrpc": "2.0", "id": write, "method": "session/label", "params": label}));
    // The write waits for the lock once the daemon holds the file open for appending.
    let pid = d.pid();
    wait_until("the label opens the file to append", || {
        open_for_append(pid, Path::new(&locked))
    });
    let entry = json!({"path": other, "id": entries[9].0});
    d.send(&json!({"jsonrpc": "2.0", "id": read, "method": "session/entry", "params": entry}));
    // Answered while the lock is still held, so before the label.
    assert_eq!(answer_order(&mut d, 1), [json!(read)]);
    std::fs::write(&release, "").expect("release the lock");
    assert_eq!(answer_order(&mut d, 1), [json!(write)]);
    holder.wait().expect("flock ends");
    assert_eq!(d.stop(), Some(0));
}

/// A writer process appends 2,000 entries in random chunks that split lines mid-JSON, with
/// random pauses; the client must see every entry exactly once, in file order.
#[test]
fn live_tail_sees_every_entry_once_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("live.jsonl");
    let (header, entries) = v3_session(2010);
    let (initial, appended) = entries.split_at(10);
    let text = session_text(&header, initial);
    std::fs::write(&file, &text).expect("write");
    let payload = dir.path().join("payload");
    let mut bytes = String::new();
    for (_, line) in appended {
        bytes.push_str(line);
        bytes.push('\n');
    }
    std::fs::write(&payload, &bytes).expect("write payload");

    let (mut d, _) = Daemon::start(&[dir.path()]);
    let path = file.to_str().expect("utf-8");
    let open = d.call("session/open", json!({"path": path}));
    assert_eq!(open["entryCount"], json!(10));

    // The writer: random chunk sizes (1..300 bytes) and random pauses (0..2 ms).
    let script = r#"
import os, random, sys, time
random.seed(int(sys.argv[3]))
data = open(sys.argv[2], 'rb').read()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
i = 0
while i < len(data):
    n = random.randint(1, 300)
    os.write(fd, data[i:i+n])
    i += n
    if random.random() < 0.5:
        time.sleep(random.random() * 0.002)
os.close(fd)
"#;
    let seed = fastrand::u32(..);
    let mut writer = std::process::Command::new("python3")
        .args([
            "-c",
            script,
            path,
            payload.to_str().expect("utf-8"),
            &seed.to_string(),
        ])
        .spawn()
        .expect("python3 writer");

    let mut got: Vec<String> = Vec::new();
    while got.len() < appended.len() {
        let Some(change) = d.notification("session/didChange", NOTE_WAIT) else {
            panic!(
                "only {} of {} entries arrived (seed {seed})",
                got.len(),
                appended.len()
            );
        };
        assert_schema("session/didChange", "params", &change);
        for n in change["added"].as_array().expect("added") {
            got.push(n["id"].as_str().expect("id").to_owned());
        }
        assert_eq!(change["entryCount"], json!(10 + got.len()));
        assert_eq!(change["leafId"], json!(got.last()));
    }
    assert!(writer.wait().expect("writer").success());
    let want: Vec<String> = appended.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(got, want, "seed {seed}");
    assert!(
        d.notification("session/didChange", Duration::from_millis(200))
            .is_none()
    );

    let ctx = d.call("session/contextAt", json!({"path": path}));
    let cli = cli_json(&["context", "--json", path]);
    for (k, v) in cli.as_object().expect("object") {
        assert_eq!(&ctx[k], v, "contextAt {k} after tailing");
    }
    let tree = d.call(
        "session/tree",
        json!({"path": path, "limit": 10000, "depth": 10000}),
    );
    let cli_tree = cli_json(&["tree", "--json", path]);
    let ids = |nodes: &Value| -> Vec<Value> {
        nodes
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n["id"].clone())
            .collect()
    };
    assert_eq!(ids(&tree["nodes"]), ids(&cli_tree["nodes"]));
    assert_eq!(tree["complete"], json!(true));
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn rewrite_in_place_and_rename_replace_reload() {
    let mut live = followed("s.jsonl", 40, |h, e| session_text(h, &e[..20]));

    // Rewrite in place as pi does on migration: truncate, then write new content (every
    // line changes; the file grows, so only the changed bytes give it away).
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&live.file)
        .expect("open");
    let migrated = session_text(&live.header, &live.entries[..30])
        .replace("\"type\":\"message\",", "\"type\":\"message\",\"v\":1,");
    f.write_all(migrated.as_bytes()).expect("rewrite");
    drop(f);
    let reload = live
        .d
        .notification("session/didReload", NOTE_WAIT)
        .expect("didReload after rewrite");
    assert_schema("session/didReload", "params", &reload);
    assert!(
        matches!(reload["reason"].as_str(), Some("rewritten" | "shrank")),
        "{reload}"
    );
    // Notifications and requests agree with a fresh read of the file.
    let ctx = live.d.call("session/contextAt", json!({"path": live.path}));
    assert_eq!(ctx["entryIds"].as_array().map(Vec::len), Some(30));
    assert_eq!(
        ctx["messages"],
        cli_json(&["context", "--json", &live.path])["messages"]
    );

    // Replace by rename.
    let tmp = live.dir.path().join("s.jsonl.tmp");
    std::fs::write(&tmp, session_text(&live.header, &live.entries[..5])).expect("write tmp");
    std::fs::rename(&tmp, &live.file).expect("rename");
    let reload = live
        .d
        .notification_where("session/didReload", NOTE_WAIT, |r| {
            r["reason"] == json!("replaced")
        });
    assert_eq!(reload["entryCount"], json!(5));
    let tree = live.d.call("session/tree", json!({"path": live.path}));
    assert_eq!(tree["nodes"].as_array().map(Vec::len), Some(5));
    assert_eq!(tree["leafId"], json!(live.entries[4].0));

    // Shrink (truncate to fewer entries).
    std::fs::write(&live.file, session_text(&live.header, &live.entries[..3])).expect("truncate");
    live.d
        .notification_where("session/didReload", NOTE_WAIT, |r| {
            r["entryCount"] == json!(3)
        });
    assert_eq!(
        live.d.call("session/open", json!({"path": live.path}))["entryCount"],
        json!(3)
    );
    assert_eq!(live.d.stop(), Some(0));
}

#[test]
fn corrupt_appends_keep_the_last_good_state() {
    let mut live = followed("c.jsonl", 6, |h, e| session_text(h, &e[..2]));

    append(&live.file, &format!("{}\n", live.entries[2].1));
    let change = live.next_change();
    assert_eq!(change["entryCount"], json!(3));

    // A good line, a corrupt line, then more bytes: the good line is applied, the rest waits.
    let offset =
        std::fs::metadata(&live.file).expect("stat").len() + live.entries[3].1.len() as u64 + 1;
    append(
        &live.file,
        &format!("{}\n{{not json\n{}\n", live.entries[3].1, live.entries[4].1),
    );
    let bad = live
        .d
        .notification("session/didCorrupt", NOTE_WAIT)
        .expect("didCorrupt");
    assert_schema("session/didCorrupt", "params", &bad);
    assert_eq!(bad["kind"], json!("invalidJson"));
    assert_eq!(bad["line"], json!(6), "{bad}");
    assert_eq!(bad["offset"], json!(offset));
    let ctx = live.d.call("session/contextAt", json!({"path": live.path}));
    assert_eq!(ctx["leafId"], json!(live.entries[3].0));
    assert_eq!(ctx["revision"]["entryCount"], json!(4));

    // Truncating the bad bytes away lets tailing go on; a line whose parent names no entry
    // is corrupt too.
    std::fs::write(&live.file, session_text(&live.header, &live.entries[..4])).expect("repair");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        live.d.call("session/contextAt", json!({"path": live.path}))["revision"]["entryCount"],
        json!(4)
    );
    append(
        &live.file,
        &live.entries[5].1.replace(&live.entries[4].0, "ffffffff"),
    );
    append(&live.file, "\n");
    let bad = live
        .d
        .notification_where("session/didCorrupt", NOTE_WAIT, |bad| {
            bad["kind"] == json!("missingParent")
        });
    assert_eq!(bad["id"], json!(live.entries[5].0));
    assert!(live.d.alive());
    assert_eq!(live.d.stop(), Some(0));
}

#[test]
fn an_unterminated_line_reads_as_at_open_time() {
    let mut live = followed("p.jsonl", 5, |h, e| session_text(h, &e[..2]));
    // Half a line is a torn tail: nothing is applied while it is being written.
    let (first, second) = live.entries[2].1.split_at(live.entries[2].1.len() / 2);
    append(&live.file, first);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        live.d.call("session/open", json!({"path": live.path}))["entryCount"],
        json!(2)
    );
    // A complete JSON object without its newline is read as the open-time reader reads it.
    append(&live.file, second);
    let change = live.next_change();
    assert_eq!(change["added"][0]["id"], json!(live.entries[2].0));
    // Its newline (CRLF here) adds nothing; the next line is announced once.
    append(&live.file, &format!("\r\n{}\n", live.entries[3].1));
    let change = live.next_change();
    assert_eq!(change["added"].as_array().map(Vec::len), Some(1));
    assert_eq!(change["added"][0]["id"], json!(live.entries[3].0));
    assert_eq!(
        live.d.call("session/open", json!({"path": live.path}))["entryCount"],
        json!(4)
    );
    // A file opened with an unterminated but complete last line applies it, and the
    // newline that completes it later adds nothing.
    let other = live.dir.path().join("q.jsonl");
    std::fs::write(
        &other,
        session_text(&live.header, &live.entries[..2]) + &live.entries[2].1,
    )
    .expect("write");
    let q = other.to_str().expect("utf-8");
    assert_eq!(
        live.d.call("session/open", json!({"path": q}))["entryCount"],
        json!(3)
    );
    append(&other, &format!("\n{}\n", live.entries[3].1));
    let change = loop {
        let c = live.next_change();
        if c["path"] == json!(q) {
            break c;
        }
    };
    assert_eq!(change["added"].as_array().map(Vec::len), Some(1));
    assert_eq!(change["added"][0]["id"], json!(live.entries[3].0));
    assert_eq!(live.d.stop(), Some(0));
}

#[test]
fn bad_input_gets_documented_errors_and_the_daemon_keeps_serving() {
    use sessiond::server::error::*;
    let examples = repo().join("examples");
    let corrupt_dir = repo().join("tests/data/corrupt");
    let mut d = Daemon::spawn(&[&examples, &corrupt_dir]);

    // Before initialize: -32002.
    let r = d.request("session/list", json!({}));
    assert_eq!(error_of(&r).0, -32002);
    let init = d.request("initialize", json!({"capabilities": {}}));
    assert!(init.get("result").is_some());
    d.notify("initialized", json!({}));

    // Malformed frames and invalid JSON.
    d.write_raw(b"Content-Length: 7\r\n\r\n{nope!}");
    let r = d.next_message(NOTE_WAIT).expect("answer to invalid JSON");
    assert_eq!((r["id"].clone(), error_of(&r).0), (Value::Null, -32700));
    d.write_raw(b"this is not a header\r\n\r\n");
    let r = d.next_message(NOTE_WAIT).expect("answer to a bad header");
    assert_eq!(error_of(&r).0, -32700);
    d.write_raw(b"Content-Length: abc\r\n\r\n");
    let r = d.next_message(NOTE_WAIT).expect("answer to a bad length");
    assert_eq!(error_of(&r).0, -32700);
    d.send(&json!([1, 2]));
    let r = d.next_message(NOTE_WAIT).expect("answer to a batch");
    assert_eq!(error_of(&r).0, -32600);
    d.send(&json!({"jsonrpc": "2.0", "id": 77}));
    let r = d
        .next_message(NOTE_WAIT)
        .expect("answer to a request without method");
    assert_eq!((r["id"].clone(), error_of(&r).0), (json!(77), -32600));
    let body = "{\"jsonrpc\":\"2.0\",\"id\":78,\"method\":\"session/list\",\"params\":{}}";
    d.write_raw(format!("Content-Length: {}\r\n\r\n{}", body.len(), &body[..10]).as_bytes());
    d.write_raw(&body.as_bytes()[10..]);
    assert!(
        d.response(&json!(78)).get("result").is_some(),
        "a frame split across writes"
    );

    // Unknown method, invalid params.
    let r = d.request("session/nope", json!({}));
    assert_eq!(error_of(&r).0, -32601);
    let r = d.request("session/open", json!({"nopath": 1}));
    let (code, message, _) = error_of(&r);
    assert_eq!(code, INVALID_PARAMS);
    assert!(
        message.contains("session/open") && message.contains("path"),
        "{message}"
    );

    // Paths outside the roots (also through ..), missing files.
    for p in ["/etc/passwd", "/nonexistent/x.jsonl"] {
        let (code, message, data) = error_of(&d.request("session/open", json!({"path": p})));
        assert_eq!(code, OUTSIDE_ROOTS, "{p}");
        assert!(message.contains(p), "{message}");
        // It says how to add a root, on the command line and from an editor.
        assert!(
            message.contains("--root DIR") && message.contains("initializationOptions.roots"),
            "{message}"
        );
        assert_eq!(data["path"], json!(p));
    }
    let sneaky = format!("{}/../src/main.rs", examples.display());
    assert_eq!(
        error_of(&d.request("session/open", json!({"path": sneaky}))).0,
        OUTSIDE_ROOTS
    );
    let missing = examples.join("missing.jsonl");
    let (code, message, _) = error_of(&d.request("session/open", json!({"path": missing})));
    assert_eq!(code, FILE_NOT_FOUND);
    assert!(message.contains("missing.jsonl"), "{message}");

    // Not open, unknown ids.
    let file = examples.join("pi-v3-branched.jsonl");
    let (code, _, _) = error_of(&d.request("session/contextAt", json!({"path": file})));
    assert_eq!(code, SESSION_NOT_OPEN);
    d.call("session/open", json!({"path": file}));
    for (method, params) in [
        ("session/entry", json!({"path": file, "id": "deadbeef"})),
        (
            "session/contextAt",
            json!({"path": file, "leafId": "deadbeef"}),
        ),
        (
            "session/explain",
            json!({"path": file, "entryId": "deadbeef"}),
        ),
        ("session/tree", json!({"path": file, "fromId": "deadbeef"})),
    ] {
        let (code, message, data) = error_of(&d.request(method, params));
        assert_eq!(code, UNKNOWN_ENTRY, "{method}");
        assert!(
            message.contains("deadbeef") && message.contains("pi-v3-branched.jsonl"),
            "{message}"
        );
        assert_eq!(data["id"], json!("deadbeef"));
    }
    // An id may be a unique prefix, as in git; a prefix of several ids is the same error,
    // naming a few of them.
    assert_eq!(
        d.call(
            "session/contextAt",
            json!({"path": file, "leafId": "de19a"})
        ),
        d.call(
            "session/contextAt",
            json!({"path": file, "leafId": "de19adb3"})
        ),
    );
    assert_eq!(
        d.call("session/explain", json!({"path": file, "entryId": "0024"})),
        d.call(
            "session/explain",
            json!({"path": file, "entryId": "00247798"})
        ),
    );
    let (code, message, data) = error_of(&d.request(
        "session/explain",
        json!({"path": file, "entryId": "6", "leafId": "de19"}),
    ));
    assert_eq!(code, UNKNOWN_ENTRY);
    assert!(message.contains("ambiguous entry id 6"), "{message}");
    let candidates = data["candidates"].as_array().expect("candidates");
    assert_eq!(candidates.len(), 4, "{data}");
    assert!(
        candidates.iter().all(|c| c
            .as_str()
            .is_some_and(|c| c.starts_with('6') && c.len() == 8)),
        "{data}"
    );

    // Corrupt files: refused with {kind, line, offset}; allowCorrupt opens them.
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(corrupt_dir.join("expected.json")).expect("expected.json"),
    )
    .expect("json");
    let bad = corrupt_dir.join("invalid-json-middle.jsonl");
    let (code, message, data) = error_of(&d.request("session/open", json!({"path": bad})));
    assert_eq!(code, SESSION_CORRUPT);
    assert!(message.contains("invalid-json-middle.jsonl"), "{message}");
    let want = &expected["invalid-json-middle.jsonl"];
    if want.is_object() {
        for k in ["kind", "line", "offset"] {
            if let Some(v) = want.get(k) {
                assert_eq!(&data[k], v, "{k}");
            }
        }
    }
    assert_eq!(data["kind"], json!("invalidJson"));
    let lenient = d.call("session/open", json!({"path": bad, "allowCorrupt": true}));
    assert_schema("session/open", "result", &lenient);
    assert!(
        !lenient["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .is_empty()
    );

    // Still serving.
    assert!(d.alive());
    assert!(d.call("session/list", json!({}))["sessions"].is_array());
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn exit_without_shutdown_exits_1() {
    let (mut d, _) = Daemon::start(&[&repo().join("examples")]);
    d.notify("exit", Value::Null);
    assert_eq!(d.wait(), Some(1));
}

#[test]
fn long_listings_report_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (header, entries) = v3_session(1);
    for i in 0..450 {
        let sub = dir.path().join(format!("--cwd-{}--", i % 3));
        std::fs::create_dir_all(&sub).expect("mkdir");
        std::fs::write(
            sub.join(format!("{i:04}.jsonl")),
            session_text(&header, &entries),
        )
        .expect("write");
    }
    std::fs::write(dir.path().join("broken.jsonl"), "not a header\n").expect("write");
    let (mut d, _) = Daemon::start(&[dir.path()]);
    let list = d.call("session/list", json!({"workDoneToken": "list-1"}));
    assert_schema("session/list", "result", &list);
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(450));
    assert_eq!(list["skipped"].as_array().map(Vec::len), Some(1));
    let mut kinds = Vec::new();
    while let Some(p) = d.notification("$/progress", Duration::from_millis(200)) {
        assert_eq!(p["token"], json!("list-1"));
        kinds.push(p["value"]["kind"].as_str().unwrap_or("").to_owned());
    }
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("begin"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("end"), "{kinds:?}");
    assert!(
        kinds.iter().filter(|k| *k == "report").count() >= 2,
        "{kinds:?}"
    );
    assert_eq!(d.stop(), Some(0));
}

/// A CRLF file (git `core.autocrlf`, a Windows editor) tails like any other: each appended
/// entry, `\n`- or `\r\n`-terminated, is one `didChange`, never a reload.
#[test]
fn crlf_files_tail_without_reloads() {
    let mut live = followed("crlf.jsonl", 5, |h, e| {
        session_text(h, &e[..3]).replace('\n', "\r\n")
    });
    assert_eq!(live.opened["entryCount"], json!(3));
    append(&live.file, &format!("{}\n", live.entries[3].1));
    let change = live.next_change();
    assert_eq!(change["added"][0]["id"], json!(live.entries[3].0));
    append(&live.file, &format!("{}\r\n", live.entries[4].1));
    let change = live.next_change();
    assert_eq!(change["added"][0]["id"], json!(live.entries[4].0));
    let now = live.d.call("session/contextAt", json!({"path": live.path}));
    assert_eq!(now["revision"]["entryCount"], json!(5));
    assert_eq!(now["revision"]["generation"], json!(0));
    assert_eq!(
        live.d
            .notification("session/didReload", Duration::from_millis(300)),
        None,
        "an append to a CRLF file is not a rewrite"
    );
    assert_eq!(live.d.stop(), Some(0));
}

/// A FIFO named like a session never blocks an open or a listing: it is refused at once as not
/// a regular file, and the daemon keeps serving.
#[test]
fn a_fifo_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("s.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let path = fifo.to_str().expect("utf-8");
    for cmd in ["check", "context", "tree"] {
        let out = support::common::sessiond([cmd, path, "--json"]);
        assert_eq!(out.status.code(), Some(2), "{cmd} on a FIFO");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not a regular file")
                || String::from_utf8_lossy(&out.stdout).contains("not a regular file"),
            "{cmd}: {}",
            support::common::describe(&out)
        );
    }
    let (mut d, _) = Daemon::start(&[dir.path()]);
    let r = d.request("session/open", json!({"path": path}));
    let (_, message, _) = error_of(&r);
    assert!(message.contains("not a regular file"), "{message}");
    let list = checked(&mut d, "session/list", json!({}));
    assert!(list.to_string().len() < 100_000);
    assert_eq!(d.stop(), Some(0));
}

/// The case pi reads leniently (tests/data/cases/): a cut line 4 hides `k4`'s parent `k3`, and
/// line 8 repeats the id of line 6. Opened with `allowCorrupt`, its diagnostics name the
/// missing parent and both lines as fields (as the CLI prints them), its context is pi's, and
/// `session/prepareCompaction` and a dry-run `session/compact` plan it as pi compacts it; a
/// real compaction is refused as corrupt.
#[test]
fn a_lenient_session_names_its_problems_and_plans_compaction_like_pi() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = repo().join("tests/data/cases");
    let name = "lenient-missing-parent-duplicate";
    let file = dir.path().join(format!("{name}.jsonl"));
    std::fs::copy(cases.join(format!("{name}.jsonl")), &file).expect("copy case");
    let pi = |what: &str| -> Value {
        let text = std::fs::read(cases.join(format!("{name}.pi-{what}.json"))).expect("pi");
        serde_json::from_slice(&text).expect("pi's answer is JSON")
    };
    let path = file.to_str().expect("utf-8 path");
    let before = std::fs::read(&file).expect("read");
    let (mut d, _) = Daemon::start(&[dir.path()]);

    let open = checked(
        &mut d,
        "session/open",
        json!({"path": path, "allowCorrupt": true}),
    );
    let corruption = |kind: &str| -> Value {
        open["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .map(|d| d["corruption"].clone())
            .find(|c| c["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {}", open["diagnostics"]))
    };
    let missing = corruption("missingParent");
    assert_eq!(
        (&missing["id"], &missing["parentId"]),
        (&json!("k4"), &json!("k3"))
    );
    let dup = corruption("duplicateId");
    assert_eq!((&dup["line"], &dup["shadowedLine"]), (&json!(8), &json!(6)));
    // In file order, the missing parent (found once every line is read) among the others.
    let lines: Vec<&Value> = open["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| &d["corruption"]["line"])
        .collect();
    assert_eq!(
        lines,
        [&json!(4), &json!(5), &json!(8)],
        "{}",
        open["diagnostics"]
    );
    let cli = cli_json(&["context", path, "--json", "--allow-corrupt"]);
    assert_eq!(
        open["diagnostics"], cli["diagnostics"],
        "daemon and CLI agree"
    );

    let ctx = checked(&mut d, "session/contextAt", json!({"path": path}));
    let want = pi("context");
    for key in ["messages", "thinkingLevel", "model"] {
        assert_eq!(ctx[key], want[key], "{key}");
    }
    assert_eq!(ctx["diagnostics"], open["diagnostics"]);

    let want = pi("compact-keep1");
    let prepared = checked(
        &mut d,
        "session/prepareCompaction",
        json!({"path": path, "keepRecentTokens": 1}),
    );
    let dry = checked(
        &mut d,
        "session/compact",
        json!({"path": path, "keepRecentTokens": 1, "dryRun": true, "expectedLeafId": "k5"}),
    );
    for plan in [&prepared, &dry] {
        for (key, value) in want.as_object().expect("pi's answer is an object") {
            assert_eq!(&plan[key], value, "{key}");
        }
        assert_eq!(plan["written"], json!(false));
    }

    let refused = d.request(
        "session/compact",
        json!({"path": path, "keepRecentTokens": 1, "expectedLeafId": "k5"}),
    );
    let (code, _, data) = error_of(&refused);
    assert_eq!(code, sessiond::server::error::SESSION_CORRUPT, "{refused}");
    assert_eq!(data["line"], json!(4));
    assert_eq!(
        std::fs::read(&file).expect("read"),
        before,
        "nothing written"
    );
    assert_eq!(d.stop(), Some(0));
}

/// The daemon's log on a pipe (an editor's output channel) is plain text: no colour codes.
#[test]
fn logs_on_a_pipe_have_no_colour_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("not-yet");
    let (d, _) = Daemon::start_with(
        &[&missing],
        &support::Spawn {
            capture_stderr: true,
            ..Default::default()
        },
    );
    // The missing root is reported when the client is initialized.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !d.stderr().contains("does not exist") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = d.stderr();
    d.stop();
    assert!(
        log.contains("WARN") && log.contains("does not exist"),
        "{log}"
    );
    assert!(!log.contains('\u{1b}'), "{log:?}");
}

/// `sessiond serve --root ROOT` with the given stdio (stderr inherited unless given).
fn serve_with(
    root: &Path,
    stdin: std::process::Stdio,
    stdout: std::process::Stdio,
    stderr: Option<std::process::Stdio>,
) -> std::process::Child {
    let mut cmd = std::process::Command::new(support::BIN);
    cmd.args(["serve", "--root"])
        .arg(root)
        .env("SESSIOND_LOG", "warn")
        .stdin(stdin)
        .stdout(stdout);
    if let Some(stderr) = stderr {
        cmd.stderr(stderr);
    }
    cmd.spawn().expect("spawn sessiond")
}

/// The requests of a short session with the daemon: open the example, read its leaf entry,
/// shut down. Ids 1..=4.
fn short_conversation(example: &Path) -> Vec<Value> {
    vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
        json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/open", "params": {"path": example}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/entry", "params": {"path": example, "id": support::common::leaf_of(example)}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}),
        json!({"jsonrpc": "2.0", "method": "exit"}),
    ]
}

/// Sends [`short_conversation`] one message at a time, reading each answer before the next
/// message and calling `after_answer` then; returns the answers.
fn converse(
    to: &mut impl Write,
    from: &mut impl std::io::BufRead,
    example: &Path,
    mut after_answer: impl FnMut(),
) -> Vec<Value> {
    let mut answers = Vec::new();
    for msg in short_conversation(example) {
        to.write_all(&support::frame(&msg)).expect("write a frame");
        if msg.get("id").is_some() {
            let answer = support::read_frame(from).expect("an answer");
            support::check_message(&answer, msg["method"].as_str());
            answers.push(answer);
            after_answer();
        }
    }
    answers
}

/// Checks the answers to [`short_conversation`].
fn check_answers(answers: &[Value], example: &Path) {
    let by_id = |id: i64| {
        answers
            .iter()
            .find(|a| a["id"] == json!(id))
            .unwrap_or_else(|| panic!("no answer {id} in {answers:?}"))
    };
    assert!(
        by_id(1)["result"]["capabilities"].is_object(),
        "{answers:?}"
    );
    assert_eq!(
        by_id(2)["result"]["leafId"],
        json!(support::common::leaf_of(example))
    );
    assert_eq!(
        by_id(3)["result"]["id"],
        json!(support::common::leaf_of(example))
    );
    assert_eq!(by_id(4)["result"], Value::Null);
}

/// Converses with the daemon `child` over `writer` and `reader` until it exits, checks its
/// answers, then that `end` (an end it shared with its parent) is blocking again.
fn served_then_blocking(
    mut child: std::process::Child,
    writer: &mut impl std::io::Write,
    mut reader: impl std::io::BufRead,
    example: &Path,
    end: &impl std::os::fd::AsFd,
) {
    let answers = converse(writer, &mut reader, example, || {});
    assert_eq!(child.wait().expect("wait").code(), Some(0));
    check_answers(&answers, example);
    let flags = rustix::fs::fcntl_getfl(end).expect("flags");
    assert!(!flags.contains(rustix::fs::OFlags::NONBLOCK), "{flags:?}");
}

/// Node's `child_process` (VS Code, code-server) connects a server's stdio through a socket
/// pair, where Rust's `Command` uses pipes: the daemon serves both on its runtime's reactor,
/// and sets the ends it shares with its parent back to blocking when it exits. An end that is
/// also its stderr is left blocking.
#[test]
fn stdio_on_a_socket_pair_or_pipes_is_served_and_left_blocking() {
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    use std::process::Stdio;

    let example = repo().join("examples/pi-v3-branched.jsonl");
    let root = example.parent().expect("examples");

    // A socket pair for both ends.
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let child = serve_with(
        root,
        Stdio::from(OwnedFd::from(theirs.try_clone().expect("dup"))),
        Stdio::from(OwnedFd::from(theirs.try_clone().expect("dup"))),
        None,
    );
    let mut writer = ours.try_clone().expect("dup");
    let reader = std::io::BufReader::new(ours);
    served_then_blocking(child, &mut writer, reader, &example, &theirs);

    // Pipes, our copies of the daemon's ends kept open to look at their flags afterwards.
    let (stdin_r, mut stdin_w) = std::io::pipe().expect("pipe");
    let (stdout_r, stdout_w) = std::io::pipe().expect("pipe");
    let child = serve_with(
        root,
        Stdio::from(stdin_r.try_clone().expect("dup")),
        Stdio::from(stdout_w.try_clone().expect("dup")),
        None,
    );
    drop(stdout_w);
    let reader = std::io::BufReader::new(stdout_r);
    served_then_blocking(child, &mut stdin_w, reader, &example, &stdin_r);

    // Stdout that is also stderr (`2>&1` into one pipe) stays blocking while the daemon runs:
    // a full pipe must not make the log's writes fail.
    let (out_r, out_w) = std::io::pipe().expect("pipe");
    let mut child = serve_with(
        root,
        Stdio::piped(),
        Stdio::from(out_w.try_clone().expect("dup")),
        Some(Stdio::from(out_w.try_clone().expect("dup"))),
    );
    let mut stdin = child.stdin.take().expect("stdin");
    let mut reader = std::io::BufReader::new(out_r);
    let answers = converse(&mut stdin, &mut reader, &example, || {
        let flags = rustix::fs::fcntl_getfl(&out_w).expect("flags");
        assert!(!flags.contains(rustix::fs::OFlags::NONBLOCK), "{flags:?}");
    });
    assert_eq!(child.wait().expect("wait").code(), Some(0));
    check_answers(&answers, &example);
}

/// Ends that `epoll` refuses (regular files) are served by the blocking fallback, a thread
/// each: answers written to a file are complete and in order; requests read from a file are
/// all answered, in order (all but `initialize` with "not initialized": a file cannot wait
/// for `initialize`'s answer, as LSP asks of a client).
#[test]
fn stdio_on_files_is_served_by_the_blocking_fallback() {
    use std::process::{Command, Stdio};

    let example = repo().join("examples/pi-v3-branched.jsonl");
    let root = example.parent().expect("examples");
    let tmp = tempfile::tempdir().expect("tempdir");

    // Requests on a pipe, answers into a file.
    let answers_file = tmp.path().join("answers");
    let mut child = serve_with(
        root,
        Stdio::piped(),
        std::fs::File::create(&answers_file)
            .expect("create answers")
            .into(),
        None,
    );
    let mut stdin = child.stdin.take().expect("stdin");
    let mut seen = 0;
    for msg in short_conversation(&example) {
        stdin
            .write_all(&support::frame(&msg))
            .expect("write a frame");
        if msg.get("id").is_some() {
            // Wait for the answer in the file before the next request.
            seen += 1;
            let deadline = std::time::Instant::now() + NOTE_WAIT;
            loop {
                let mut reader =
                    std::io::BufReader::new(std::fs::File::open(&answers_file).expect("open"));
                if std::iter::from_fn(|| support::read_frame(&mut reader)).count() >= seen {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "no answer {seen}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    assert_eq!(child.wait().expect("wait").code(), Some(0));
    let mut reader = std::io::BufReader::new(std::fs::File::open(&answers_file).expect("open"));
    let answers: Vec<Value> = std::iter::from_fn(|| support::read_frame(&mut reader)).collect();
    check_answers(&answers, &example);

    // Requests from a file.
    let requests = tmp.path().join("requests");
    let mut input = Vec::new();
    // Without `exit`, which would cancel what is still in flight: the end of the file ends
    // the conversation.
    for msg in short_conversation(&example)
        .iter()
        .filter(|m| m["method"] != "exit")
    {
        input.extend_from_slice(&support::frame(msg));
    }
    std::fs::write(&requests, input).expect("write requests");
    let out = Command::new(support::BIN)
        .args(["serve", "--root"])
        .arg(root)
        .env("SESSIOND_LOG", "warn")
        .stdin(std::fs::File::open(&requests).expect("open requests"))
        .output()
        .expect("run sessiond");
    let mut reader = std::io::BufReader::new(&out.stdout[..]);
    let answers: Vec<Value> = std::iter::from_fn(|| support::read_frame(&mut reader)).collect();
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(
        ids,
        [&json!(1), &json!(2), &json!(3), &json!(4)],
        "{answers:?}"
    );
    // Read at once, answered as if the client had waited: `initialize` runs alone, so every
    // request behind it (`shutdown` too) is served, and the end of input exits 0.
    check_answers(&answers, &example);
    assert_eq!(out.status.code(), Some(0));
}

/// The size the daemon should give its output's buffer: `OUTPUT_BUFFER_BYTES`, as far as the
/// machine lets an unprivileged process have it.
fn expected_pipe_bytes() -> usize {
    let max = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    sessiond::server::stdio::OUTPUT_BUFFER_BYTES.min(max)
}

/// Runs `initialize` over `input` / `output` and returns its response.
fn initialize_over(input: &mut impl Write, output: &mut impl std::io::BufRead) -> Value {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"capabilities": {}}});
    input.write_all(&support::frame(&init)).expect("write");
    input.flush().expect("flush");
    support::read_frame(output).expect("initialize response")
}

#[test]
fn the_output_pipe_is_grown_for_large_answers() {
    use std::os::fd::AsFd;
    use std::process::{Command, Stdio};
    let root = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(support::BIN)
        .args(["serve", "--root"])
        .arg(root.path())
        .env("SESSIOND_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let before = rustix::pipe::fcntl_getpipe_size(stdout.as_fd()).expect("F_GETPIPE_SZ");
    let mut reader = std::io::BufReader::new(stdout);
    let init = initialize_over(&mut stdin, &mut reader);
    assert!(init["result"]["capabilities"].is_object(), "{init}");
    // The pipe is shared: the client's end sees the size the daemon set.
    let after = rustix::pipe::fcntl_getpipe_size(reader.get_ref().as_fd()).expect("F_GETPIPE_SZ");
    assert!(
        after >= expected_pipe_bytes().max(before),
        "pipe buffer {before} → {after} bytes"
    );
    drop(stdin);
    let _ = child.wait();
}

#[test]
fn the_output_socket_send_buffer_is_grown_for_large_answers() {
    use std::os::unix::net::UnixStream;
    use std::process::{Command, Stdio};
    let root = tempfile::tempdir().expect("tempdir");
    // As libuv starts a child (VS Code, Neovim): one socket of a pair as stdin and stdout.
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let watch = theirs.try_clone().expect("dup");
    let before = rustix::net::sockopt::socket_send_buffer_size(&watch).expect("SO_SNDBUF");
    let mut child = Command::new(support::BIN)
        .args(["serve", "--root"])
        .arg(root.path())
        .env("SESSIOND_LOG", "warn")
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(
            theirs.try_clone().expect("dup"),
        )))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .spawn()
        .expect("spawn");
    let mut input = ours.try_clone().expect("dup");
    let mut reader = std::io::BufReader::new(ours);
    let init = initialize_over(&mut input, &mut reader);
    assert!(init["result"]["capabilities"].is_object(), "{init}");
    let wmem_max = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    // The kernel reports twice what it granted.
    let want = 2 * sessiond::server::stdio::OUTPUT_BUFFER_BYTES.min(wmem_max);
    let after = rustix::net::sockopt::socket_send_buffer_size(&watch).expect("SO_SNDBUF");
    assert!(
        after >= want.max(before),
        "send buffer {before} → {after} bytes"
    );
    let _ = input.shutdown(std::net::Shutdown::Write);
    let _ = child.wait();
}

/// `exit` with requests still unanswered (no `shutdown` first): each of them gets one answer,
/// its result or -32800 (cancelled), and the process ends with exit code 1.
#[test]
fn exit_answers_what_is_still_unanswered_as_cancelled() {
    let dir = repo().join("tests/data/text");
    let path = dir.join("noncharacter-settings.jsonl");
    let path = path.to_str().expect("utf-8");
    let (mut d, _) = Daemon::start(&[&dir]);
    checked(&mut d, "session/open", json!({"path": path}));
    let first = d.next_request_id() + 100;
    let mut frames = Vec::new();
    for id in first..first + 20 {
        frames.extend(support::frame(&json!({
            "jsonrpc": "2.0", "id": id, "method": "session/contextAt", "params": {"path": path},
        })));
    }
    frames.extend(support::frame(&json!({"jsonrpc": "2.0", "method": "exit"})));
    d.write_raw(&frames);
    d.close_input();
    let mut answered = BTreeSet::new();
    while let Some(msg) = d.next_message(NOTE_WAIT) {
        let Some(id) = msg.get("id").and_then(Value::as_i64) else {
            continue;
        };
        if msg.get("error").is_some() {
            assert_eq!(error_of(&msg).0, -32800, "{msg}");
        } else {
            assert!(msg["result"]["messages"].is_array(), "{msg}");
        }
        assert!(answered.insert(id), "answered twice: {msg}");
    }
    assert_eq!(answered, (first..first + 20).collect::<BTreeSet<_>>());
    assert_eq!(d.wait(), Some(1));
}

/// A lenient session that grows: a later line repeating an id takes the earlier entry's
/// children, as pi's lookups by id do, and `session/contextAt` at a leaf it answered before
/// gives the new path (equal to a fresh read), not the one it kept.
#[test]
fn a_repeated_id_appended_to_a_lenient_session_moves_the_children_like_pi() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("dup.jsonl");
    let entry = |id: &str, parent: &str, second: u32, text: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:0{second}.000Z","message":{{"role":"user","content":"{text}","timestamp":{second}}}}}"#
        )
    };
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let first = [
        entry("r", "null", 1, "root r"),
        entry("x", "null", 2, "first x"),
        entry("b", r#""x""#, 3, "b"),
        entry("c", r#""b""#, 4, "c"),
    ];
    std::fs::write(&file, format!("{header}\n{}\n", first.join("\n"))).expect("write");
    let path = file.to_str().expect("utf-8");
    let (mut d, _) = Daemon::start(&[dir.path()]);
    checked(
        &mut d,
        "session/open",
        json!({"path": path, "allowCorrupt": true}),
    );
    let at_c = json!({"path": path, "leafId": "c", "allowCorrupt": true});
    let texts = |ctx: &Value| -> Vec<String> {
        ctx["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| m["content"].as_str().expect("text").to_owned())
            .collect()
    };
    let before = checked(&mut d, "session/contextAt", at_c.clone());
    assert_eq!(texts(&before), ["first x", "b", "c"]);

    append(&file, &format!("{}\n", entry("x", r#""r""#, 5, "second x")));
    d.notification("session/didChange", NOTE_WAIT)
        .expect("the append is seen");
    let after = checked(&mut d, "session/contextAt", at_c);
    assert_eq!(texts(&after), ["root r", "second x", "b", "c"]);
    assert_eq!(after["entryIds"], json!(["r", "x", "b", "c"]));
    let fresh = cli_json(&["context", path, "--leaf", "c", "--json", "--allow-corrupt"]);
    assert_eq!(after["messages"], fresh["messages"]);
    assert_eq!(d.stop(), Some(0));
}
