//! The examples of `protocol/README.md`, produced by the real daemon from the real example
//! session, so they cannot go stale.
//!
//! A fixed sequence of requests runs against a copy of `examples/pi-v3-branched.jsonl` at
//! `/s/a.jsonl` (a temporary root written as `/s`). What changes from run to run is made
//! stable before it is shown: new entry ids, session ids and timestamps become fixed stand-ins
//! in order of first appearance; strings over [`MAX_STRING`] characters and arrays over
//! [`MAX_ITEMS`] items are shortened with `…`. Each example is the fenced block after a
//! `<!-- example: NAME -->` line of the README.
//!
//! The test fails when the README's examples differ from what this produces;
//! `scripts/protocol-examples.sh` (`SESSIOND_UPDATE_EXAMPLES=1`) writes them into the README.
//! Example blocks without a marker (those the daemon cannot be made to produce on demand)
//! are checked against the schemas instead.
// Helpers fail the test by panicking, like assertions.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use support::{Daemon, repo};

/// Strings longer than this many characters are cut in examples.
const MAX_STRING: usize = 120;
/// Arrays longer than this are cut in examples.
const MAX_ITEMS: usize = 16;
/// How long a notification may take to arrive.
const NOTE_WAIT: Duration = Duration::from_secs(10);
/// Where the README's examples say the session root is.
const SHOWN_ROOT: &str = "/s";

/// Stand-ins for new entry ids, in order of first appearance.
const IDS: &[&str] = &[
    "5e1a7c00", "9f00ab12", "b7c1d2e3", "c4d5e6f7", "e0f1a2b3", "f1e2d3c4", "a0b1c2d3", "d4c3b2a1",
];

/// Makes what changes between runs stable: new ids, session ids, times and the root.
struct Normalizer {
    root: String,
    known_ids: HashSet<String>,
    known_times: HashSet<String>,
    /// Replacements in order of first appearance.
    map: Vec<(String, String)>,
    mapped: HashMap<String, String>,
    ids: usize,
    uuids: usize,
    times: usize,
}

fn is_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_id(s: &str) -> bool {
    s.len() == 8 && is_hex(s)
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && parts.iter().all(|p| is_hex(p))
}

/// `YYYY-MM-DDTHH:mm:ss.sssZ`, or with `-` for `:` and `.` when `dashed` (file names).
fn is_time(s: &str, dashed: bool) -> bool {
    let b = s.as_bytes();
    let (c, d) = if dashed { (b'-', b'-') } else { (b':', b'.') };
    b.len() == 24
        && b.iter().enumerate().all(|(i, &x)| match i {
            4 | 7 => x == b'-',
            10 => x == b'T',
            13 | 16 => x == c,
            19 => x == d,
            23 => x == b'Z',
            _ => x.is_ascii_digit(),
        })
}

impl Normalizer {
    fn new(root: &Path, source: &str) -> Self {
        let mut known_ids = HashSet::new();
        let mut known_times = HashSet::new();
        for line in source.lines() {
            let v: Value = serde_json::from_str(line).expect("example line");
            if let Some(id) = v["id"].as_str() {
                known_ids.insert(id.to_owned());
            }
            if let Some(t) = v["timestamp"].as_str() {
                known_times.insert(t.to_owned());
            }
        }
        Normalizer {
            root: root.to_str().expect("utf-8 root").to_owned(),
            known_ids,
            known_times,
            map: Vec::new(),
            mapped: HashMap::new(),
            ids: 0,
            uuids: 0,
            times: 0,
        }
    }

    fn add(&mut self, from: &str, to: String) {
        if !self.mapped.contains_key(from) {
            self.mapped.insert(from.to_owned(), to.clone());
            self.map.push((from.to_owned(), to));
        }
    }

    fn time(&mut self, t: &str) -> String {
        if let Some(m) = self.mapped.get(t) {
            return m.clone();
        }
        let k = self.times;
        self.times += 1;
        let m = format!("2025-11-21T10:{:02}:{:02}.000Z", k / 60, k % 60);
        self.add(t, m.clone());
        m
    }

    /// Learns the stand-ins for every new value in `v`.
    fn learn(&mut self, v: &Value) {
        match v {
            Value::String(s) => self.learn_str(s),
            Value::Array(a) => a.iter().for_each(|x| self.learn(x)),
            Value::Object(o) => o.values().for_each(|x| self.learn(x)),
            _ => {}
        }
    }

    fn learn_str(&mut self, s: &str) {
        if self.mapped.contains_key(s) {
            return;
        }
        if is_id(s) && !self.known_ids.contains(s) {
            let to = IDS.get(self.ids).map_or_else(
                || format!("{:08x}", 0xa1b2_c3d4_u32 + self.ids as u32),
                |id| (*id).to_owned(),
            );
            assert!(
                !self.known_ids.contains(&to),
                "{to} is an id of the example"
            );
            self.ids += 1;
            self.add(s, to);
        } else if is_uuid(s) && !self.known_ids.contains(s) {
            self.uuids += 1;
            self.add(s, format!("0199a0b2-0000-7000-8000-{:012}", self.uuids));
        } else if is_time(s, false) && !self.known_times.contains(s) {
            self.time(s);
        } else if let Some(name) = s.strip_suffix(".jsonl").and_then(|p| p.rsplit('/').next())
            && let Some((stamp, uuid)) = name.split_once('_')
            && is_time(stamp, true)
        {
            // A new file: `<timestamp with - for : and .>_<session id>.jsonl`.
            let iso = format!(
                "{}:{}:{}.{}",
                &stamp[..13],
                &stamp[14..16],
                &stamp[17..19],
                &stamp[20..]
            );
            let mapped = self.time(&iso).replace([':', '.'], "-");
            self.add(stamp, mapped);
            self.learn_str(uuid);
        }
    }

    /// `v` with the root shown as `/s`, every learned value replaced and long values cut.
    fn show(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => {
                let mut s = s.replace(&self.root, SHOWN_ROOT);
                for (from, to) in &self.map {
                    if s.contains(from.as_str()) {
                        s = s.replace(from.as_str(), to);
                    }
                }
                if s.chars().count() > MAX_STRING {
                    s = s.chars().take(MAX_STRING - 1).collect::<String>() + "…";
                }
                Value::String(s)
            }
            Value::Array(a) => {
                let mut out: Vec<Value> = a.iter().take(MAX_ITEMS).map(|x| self.show(x)).collect();
                if a.len() > MAX_ITEMS {
                    out.truncate(MAX_ITEMS - 1);
                    out.push(json!("…"));
                }
                Value::Array(out)
            }
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, x)| (k.clone(), self.show(x))).collect())
            }
            other => other.clone(),
        }
    }
}

/// The examples as they are produced, by name.
struct Examples {
    norm: Normalizer,
    blocks: BTreeMap<String, Vec<String>>,
}

impl Examples {
    fn line(&mut self, name: &str, arrow: &str, msg: &Value) {
        self.norm.learn(msg);
        let shown = serde_json::to_string(&self.norm.show(msg)).unwrap();
        self.blocks
            .entry(name.to_owned())
            .or_default()
            .push(format!("{arrow} {shown}"));
    }

    /// Sends a request, waits for its response and for `notes` (notification methods, in
    /// this order), and records the request, the notifications and the response under
    /// `name` (in that order, however they arrived). Returns the response.
    fn exchange(
        &mut self,
        d: &mut Daemon,
        name: &str,
        method: &str,
        params: Value,
        notes: &[&str],
    ) -> Value {
        // Entries and files get the time of their request in milliseconds; apart, each new
        // time has its own stand-in.
        std::thread::sleep(Duration::from_millis(3));
        let id = d.next_request_id();
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let response = d.request(method, params);
        self.line(name, "→", &request);
        for m in notes {
            self.note(d, name, m);
        }
        self.line(name, "←", &response);
        response
    }

    /// Waits for a notification and records it.
    fn note(&mut self, d: &mut Daemon, name: &str, method: &str) -> Value {
        let p = d
            .notification(method, NOTE_WAIT)
            .unwrap_or_else(|| panic!("no {method}"));
        self.line(
            name,
            "←",
            &json!({"jsonrpc": "2.0", "method": method, "params": p}),
        );
        p
    }
}

fn result(response: &Value) -> &Value {
    response
        .get("result")
        .unwrap_or_else(|| panic!("an error: {response}"))
}

fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

/// A session with a torn line 17 (from the example's first 60 lines), for `session/salvage`.
fn broken_copy(source: &str, to: &Path) {
    let mut lines: Vec<String> = source.lines().take(60).map(str::to_owned).collect();
    lines[0] = lines[0].replace(
        "d703a1a9-1b7b-4fb1-b512-c9738b1fe617",
        "5a1f0a9e-7e57-4b0e-9d1c-000000000017",
    );
    lines[16] = lines[16].chars().take(80).collect();
    std::fs::write(to, lines.join("\n") + "\n").unwrap();
}

/// Runs the sequence and returns every example by name.
fn produce() -> BTreeMap<String, Vec<String>> {
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = std::fs::canonicalize(tmp.path()).unwrap().join("s");
    std::fs::create_dir(&root).unwrap();
    let source = std::fs::read_to_string(repo().join("examples/pi-v3-branched.jsonl")).unwrap();
    let a = root.join("a.jsonl");
    std::fs::write(&a, &source).unwrap();
    broken_copy(&source, &root.join("broken.jsonl"));
    // 2025-11-21T09:00:00Z and an hour before: the listing's order.
    set_mtime(&a, 1_763_715_600);
    set_mtime(&root.join("broken.jsonl"), 1_763_712_000);
    let path = a.to_str().unwrap().to_owned();
    let mut ex = Examples {
        norm: Normalizer::new(&root, &source),
        blocks: BTreeMap::new(),
    };
    // The mtimes set here are shown as they are, so `modified` and `modifiedMs` agree.
    for t in ["09:00", "08:00", "07:00"] {
        ex.norm
            .known_times
            .insert(format!("2025-11-21T{t}:00.000Z"));
    }

    let mut d = Daemon::spawn(&[]);
    ex.exchange(
        &mut d,
        "initialize",
        "initialize",
        json!({"initializationOptions": {"roots": [root]}}),
        &[],
    );
    d.notify("initialized", json!({}));

    let open = ex.exchange(&mut d, "open", "session/open", json!({"path": path}), &[]);
    let leaf = result(&open)["leafId"].clone();

    // Paging: a first page, the page its cursor names, and a wide node's children one by one.
    let page = ex.exchange(
        &mut d,
        "tree",
        "session/tree",
        json!({"path": path, "limit": 3}),
        &[],
    );
    let cursor = result(&page)["next"][0].clone();
    let mut params = json!({"path": path, "limit": 3});
    params
        .as_object_mut()
        .unwrap()
        .extend(cursor.as_object().unwrap().clone());
    ex.exchange(&mut d, "tree", "session/tree", params, &[]);
    let wide = ex.exchange(
        &mut d,
        "tree-wide",
        "session/tree",
        json!({"path": path, "childrenOf": "521cf246", "depth": 0, "limit": 1}),
        &[],
    );
    let after = result(&wide)["next"][0]["after"].clone();
    ex.exchange(
        &mut d,
        "tree-wide",
        "session/tree",
        json!({"path": path, "after": after, "depth": 0, "limit": 1}),
        &[],
    );

    ex.exchange(
        &mut d,
        "entry",
        "session/entry",
        json!({"path": path, "id": "00247798"}),
        &[],
    );
    ex.exchange(
        &mut d,
        "contextAt",
        "session/contextAt",
        json!({"path": path, "fields": "previews", "limit": 1}),
        &[],
    );
    ex.exchange(
        &mut d,
        "explain",
        "session/explain",
        json!({"path": path, "entryId": "00247798"}),
        &[],
    );
    for entry in [json!("521cf246"), leaf.clone()] {
        ex.exchange(
            &mut d,
            "explain",
            "session/explain",
            json!({"path": path, "entryId": entry}),
            &[],
        );
    }
    // Where a summary came from: the compaction's span and its audit.
    ex.exchange(
        &mut d,
        "explain-audit",
        "session/explain",
        json!({"path": path, "entryId": "4909db93"}),
        &[],
    );
    ex.exchange(
        &mut d,
        "compareBranches",
        "session/compareBranches",
        json!({"path": path, "leafA": "610f9c1e", "leafB": "de19adb3"}),
        &[],
    );
    ex.exchange(
        &mut d,
        "graph",
        "session/graph",
        json!({"path": path, "leafId": "de19adb3"}),
        &[],
    );
    ex.exchange(&mut d, "list", "session/list", json!({}), &[]);

    // Forking at the default leaf re-chains the label of an entry on its path.
    ex.exchange(
        &mut d,
        "fork",
        "session/fork",
        json!({"path": path, "entryId": leaf, "position": "at"}),
        &[],
    );
    ex.exchange(
        &mut d,
        "salvage",
        "session/salvage",
        json!({"path": root.join("broken.jsonl")}),
        &[],
    );

    let labelled = ex.exchange(
        &mut d,
        "label",
        "session/label",
        json!({"path": path, "targetId": "521cf246", "label": "before refactor", "expectedLeafId": leaf}),
        &["session/didChange"],
    );
    ex.exchange(
        &mut d,
        "label-conflict",
        "session/label",
        json!({"path": path, "targetId": "521cf246", "label": "x", "expectedLeafId": leaf}),
        &[],
    );
    let mut leaf = result(&labelled)["leafId"].clone();
    let named = ex.exchange(
        &mut d,
        "setName",
        "session/setName",
        json!({"path": path, "name": "Untangle run modes", "expectedLeafId": leaf}),
        &["session/didChange"],
    );
    leaf = result(&named)["leafId"].clone();
    let branched = ex.exchange(
        &mut d,
        "branch",
        "session/branch",
        json!({"path": path, "fromId": "521cf246", "summary": "Tried a rewrite of run modes; reverted.", "expectedLeafId": leaf}),
        &["session/didChange"],
    );
    leaf = result(&branched)["leafId"].clone();
    let appended = ex.exchange(
        &mut d,
        "append",
        "session/append",
        json!({"path": path, "entry": {"type": "message", "message": {"role": "user", "content": "next step", "timestamp": 1_763_719_200_000i64}}, "expectedLeafId": leaf}),
        &["session/didChange"],
    );
    leaf = result(&appended)["leafId"].clone();
    ex.exchange(
        &mut d,
        "append-invalid",
        "session/append",
        json!({"path": path, "entry": {"type": "session_info", "name": 7}, "expectedLeafId": leaf}),
        &[],
    );
    ex.exchange(
        &mut d,
        "prepareCompaction",
        "session/prepareCompaction",
        json!({"path": path, "keepRecentTokens": 2000}),
        &[],
    );
    ex.exchange(
        &mut d,
        "compact",
        "session/compact",
        json!({"path": path, "expectedLeafId": leaf, "keepRecentTokens": 2000, "summary": "Refactored run modes.", "requireRetention": true}),
        &[],
    );
    let compacted = ex.exchange(
        &mut d,
        "compact",
        "session/compact",
        json!({"path": path, "expectedLeafId": leaf, "keepRecentTokens": 2000}),
        &["session/didChange"],
    );
    leaf = result(&compacted)["entryId"].clone();

    // Progress: a listing of more than 200 files, under the client's token.
    let many = root.join("many");
    std::fs::create_dir(&many).unwrap();
    let header = source.lines().next().unwrap();
    for i in 0..201 {
        let id = format!("0b5e55ed-0000-4000-8000-{i:012}");
        let line = header.replace("d703a1a9-1b7b-4fb1-b512-c9738b1fe617", &id);
        let file = many.join(format!("{i:03}.jsonl"));
        std::fs::write(&file, line + "\n").unwrap();
        // One mtime for all: listed by path, one time shown.
        set_mtime(&file, 1_763_708_400);
        ex.norm.known_ids.insert(id);
    }
    let id = d.next_request_id();
    let params = json!({"root": many, "workDoneToken": "list-1"});
    let listed = d.request("session/list", params.clone());
    ex.line(
        "progress",
        "→",
        &json!({"jsonrpc": "2.0", "id": id, "method": "session/list", "params": params}),
    );
    while let Some(p) = d.notification("$/progress", Duration::from_millis(500)) {
        ex.line(
            "progress",
            "←",
            &json!({"jsonrpc": "2.0", "method": "$/progress", "params": p}),
        );
    }
    ex.line("progress", "←", &listed);
    assert_eq!(
        result(&listed)["sessions"].as_array().map(Vec::len),
        Some(201)
    );

    // Another process (pi) appends an entry.
    let line = json!({"type": "message", "id": "a1b2c3d4", "parentId": leaf,
        "timestamp": "2025-11-21T10:30:00.000Z",
        "message": {"role": "user", "content": "next step", "timestamp": 1_763_721_000_000i64}});
    let mut f = std::fs::OpenOptions::new().append(true).open(&a).unwrap();
    std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
    drop(f);
    ex.note(&mut d, "didChange", "session/didChange");

    // The file goes away and comes back; then a corrupt line; then a new file in its place.
    let away = root.join("a.jsonl.away");
    std::fs::rename(&a, &away).unwrap();
    ex.note(&mut d, "fileMissing", "session/fileMissing");
    std::fs::rename(&away, &a).unwrap();
    ex.note(&mut d, "fileRestored", "session/fileRestored");
    let good = std::fs::read(&a).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&a).unwrap();
    std::io::Write::write_all(&mut f, b"{\"type\":\"message\",\"id\":\n").unwrap();
    drop(f);
    ex.note(&mut d, "didCorrupt", "session/didCorrupt");
    let fresh = root.join("a.jsonl.new");
    std::fs::write(&fresh, &good).unwrap();
    std::fs::rename(&fresh, &a).unwrap();
    ex.note(&mut d, "didReload", "session/didReload");

    ex.exchange(&mut d, "close", "session/close", json!({"path": path}), &[]);
    ex.exchange(
        &mut d,
        "errors",
        "session/open",
        json!({"path": "/etc/passwd"}),
        &[],
    );
    ex.exchange(
        &mut d,
        "errors",
        "session/tree",
        json!({"path": path, "limit": 20000}),
        &[],
    );
    ex.exchange(&mut d, "shutdown", "shutdown", Value::Null, &[]);
    ex.exchange(&mut d, "shutdown", "session/list", json!({}), &[]);
    d.notify("exit", Value::Null);
    assert_eq!(d.wait(), Some(0));
    ex.blocks
}

const MARKER: &str = "<!-- example: ";

/// The README with each marked example block replaced by `blocks[name]`; also the names of
/// markers without a produced example.
fn rewrite(readme: &str, blocks: &BTreeMap<String, Vec<String>>) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut unknown = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        let Some(name) = line
            .strip_prefix(MARKER)
            .and_then(|l| l.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or_default();
        assert_eq!(fence, "```json", "the line after {line} opens a json block");
        out.push_str(fence);
        out.push('\n');
        let mut old = Vec::new();
        for l in lines.by_ref() {
            if l == "```" {
                break;
            }
            old.push(l.to_owned());
        }
        let new = match blocks.get(name) {
            Some(b) => b.clone(),
            None => {
                unknown.push(name.to_owned());
                old
            }
        };
        for l in new {
            out.push_str(&l);
            out.push('\n');
        }
        out.push_str("```\n");
    }
    (out, unknown)
}

fn readme_path() -> PathBuf {
    repo().join("protocol/README.md")
}

#[test]
fn readme_examples_are_what_the_daemon_says() {
    let blocks = produce();
    let readme = std::fs::read_to_string(readme_path()).unwrap();
    let (rewritten, unknown) = rewrite(&readme, &blocks);
    assert!(
        unknown.is_empty(),
        "markers without an example: {unknown:?}"
    );
    let marked: HashSet<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix(MARKER).and_then(|l| l.strip_suffix(" -->")))
        .collect();
    let unused: Vec<&String> = blocks
        .keys()
        .filter(|k| !marked.contains(k.as_str()))
        .collect();
    assert!(unused.is_empty(), "examples without a marker: {unused:?}");
    if std::env::var_os("SESSIOND_UPDATE_EXAMPLES").is_some() {
        std::fs::write(readme_path(), &rewritten).unwrap();
        return;
    }
    if rewritten != readme {
        let diff: Vec<String> = readme
            .lines()
            .zip(rewritten.lines())
            .filter(|(a, b)| a != b)
            .take(3)
            .map(|(a, b)| format!("README:   {a}\nproduced: {b}"))
            .collect();
        panic!(
            "protocol/README.md's examples differ from what the daemon says; run \
             scripts/protocol-examples.sh to regenerate them.\n{}",
            diff.join("\n")
        );
    }
}

/// Example messages that no marker covers (written by hand) still match the schemas.
#[test]
fn unmarked_examples_match_the_schemas() {
    let readme = std::fs::read_to_string(readme_path()).unwrap();
    let mut lines = readme.lines().peekable();
    let mut checked = 0;
    let mut marked = false;
    while let Some(line) = lines.next() {
        if line.starts_with(MARKER) {
            marked = true;
            continue;
        }
        if line != "```json" {
            continue;
        }
        let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        if std::mem::take(&mut marked) {
            continue;
        }
        for l in block {
            let Some(msg) = l.strip_prefix("← ") else {
                continue;
            };
            let msg: Value = serde_json::from_str(msg).expect("an example is JSON");
            support::check_message(&msg, None);
            checked += 1;
        }
    }
    assert!(checked >= 1);
}
