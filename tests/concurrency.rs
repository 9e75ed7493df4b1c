//! Several writers on one session at full speed: two processes on sessiond's append path (this
//! test binary re-run as a child) and one raw appender that writes like pi (plain `O_APPEND`
//! writes of whole lines, no lock). Afterwards every line parses, no line is interleaved, every
//! acknowledged write is present exactly once, every refused write wrote nothing, and the file
//! opens cleanly. Prints the sustained rate of locked appends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sessiond::core::tree::Mode;
use sessiond::dialect::pi::entries::ParentChoice;
use sessiond::storage::reader;
use sessiond::storage::writer::{self, Change, WriteError, WriteOptions};

const CHILD: &str = "SESSIOND_TEST_APPEND_CHILD";
const RUN_FOR: Duration = Duration::from_secs(3);

/// A small xorshift generator for pauses (no need for a crate).
struct Rng(u64);
impl Rng {
    fn seeded(salt: u64) -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        Rng(t ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Mostly no pause, sometimes up to `max_us` microseconds.
    fn pause(&mut self, max_us: u64) {
        if self.next().is_multiple_of(4) {
            std::thread::sleep(Duration::from_micros(self.next() % max_us));
        }
    }
}

fn header_and_root(path: &Path) {
    let lines = [
        r#"{"type":"session","version":3,"id":"stress","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","id":"root0000","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"go"}}"#,
    ];
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn locked_writers_and_a_raw_appender_keep_the_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stress.jsonl");
    header_and_root(&path);

    let children: Vec<_> = (0..2)
        .map(|w| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "append_child", "--nocapture", "--test-threads=1"])
                .env(CHILD, format!("{}|w{w}", path.display()))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();

    // The raw appender, like pi: its own leaf, one write per line, no lock, no reading.
    let mut raw = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    let mut rng = Rng::seeded(7);
    let mut parent = "root0000".to_owned();
    let mut raw_ids = Vec::new();
    let start = Instant::now();
    while start.elapsed() < RUN_FOR {
        let id = format!("r{:07}", raw_ids.len());
        let line = format!(
            "{{\"type\":\"custom\",\"id\":\"{id}\",\"parentId\":\"{parent}\",\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"customType\":\"raw\",\"data\":{{\"n\":{}}}}}\n",
            raw_ids.len()
        );
        raw.write_all(line.as_bytes()).unwrap();
        raw_ids.push(id.clone());
        parent = id;
        rng.pause(2000);
    }

    let mut acked: Vec<String> = Vec::new();
    let (mut conflicts, mut busy, mut elapsed) = (0u64, 0u64, Duration::ZERO);
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "append child failed:\n{text}");
        for line in text.lines() {
            // libtest may print "test append_child ... " in front of the first line.
            let line = ["ACK ", "STATS "]
                .iter()
                .find_map(|m| line.find(m).map(|i| &line[i..]))
                .unwrap_or(line);
            let mut f = line.split_whitespace();
            match f.next() {
                Some("ACK") => acked.push(f.next().unwrap().to_owned()),
                Some("STATS") => {
                    conflicts += f.next().unwrap().parse::<u64>().unwrap();
                    busy += f.next().unwrap().parse::<u64>().unwrap();
                    elapsed =
                        elapsed.max(Duration::from_millis(f.next().unwrap().parse().unwrap()));
                }
                _ => {}
            }
        }
    }

    // The file opens strictly: every line parses, ids unique, parents resolved, no torn tail.
    let session = reader::open_session::<sessiond::dialect::pi::Pi>(&path, Mode::Strict)
        .expect("the file opens cleanly");
    assert!(session.torn_tail.is_none());
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for node in session.tree.nodes() {
        *seen.entry(node.entry.id.as_str()).or_default() += 1;
    }
    for id in acked.iter().chain(&raw_ids) {
        assert_eq!(
            seen.get(id.as_str()),
            Some(&1),
            "entry {id} is not present exactly once"
        );
    }
    // Nothing but the root, the acknowledged and the raw entries: refused writes wrote nothing.
    let known: std::collections::HashSet<&str> = acked
        .iter()
        .chain(&raw_ids)
        .map(String::as_str)
        .chain(["root0000"])
        .collect();
    let unknown: Vec<String> = session
        .tree
        .nodes()
        .iter()
        .filter(|n| !known.contains(n.entry.id.as_str()))
        .map(|n| format!("line {}: {}", n.entry.span.line, n.entry.id))
        .collect();
    assert!(
        unknown.is_empty(),
        "entries nobody acknowledged: {unknown:?}"
    );
    assert_eq!(session.tree.len(), 1 + acked.len() + raw_ids.len());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    assert_eq!(
        text.lines().count(),
        2 + acked.len() + raw_ids.len(),
        "interleaved lines"
    );

    let secs = elapsed.as_secs_f64().max(0.001);
    eprintln!(
        "concurrency: {} locked appends from 2 processes in {secs:.2} s = {:.0} appends/s \
         ({conflicts} conflicts, {busy} busy refusals); {} raw appends alongside",
        acked.len(),
        acked.len() as f64 / secs,
        raw_ids.len()
    );
    assert!(acked.len() > 50, "only {} locked appends", acked.len());
    assert!(
        conflicts > 0,
        "the raw appender never moved the leaf under a locked writer"
    );
}

/// The child: appends through `storage::writer` until the time is up, fenced by its own view.
/// Prints `ACK id` per acknowledged write and `STATS conflicts busy elapsed_ms` at the end.
#[test]
fn append_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let (path, name) = spec.split_once('|').unwrap();
    let path = Path::new(path);
    let mut session = writer::open_for_write(path).unwrap();
    let opts = WriteOptions::default();
    let mut rng = Rng::seeded(name.len() as u64 + u64::from(std::process::id()));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let (mut conflicts, mut busy, mut n) = (0u64, 0u64, 0u64);
    let mut acks = Vec::new();
    let start = Instant::now();
    while start.elapsed() < RUN_FOR {
        let leaf = session
            .tree
            .default_leaf()
            .map(|l| session.tree.node(l).entry.id.to_string());
        let entry = format!(
            r#"{{"type":"custom","customType":"locked","data":{{"writer":"{name}","n":{n}}}}}"#
        );
        n += 1;
        let change = Change::Append {
            entry_json: &entry,
            parent: ParentChoice::Leaf,
        };
        match writer::write_entry(path, &mut session, change, leaf.as_deref(), &opts) {
            // Kept in memory until the end: a full stdout pipe would throttle the writer.
            Ok(w) => acks.push(w.id),
            Err(WriteError::Conflict { .. }) => conflicts += 1,
            // The raw appender's line can be seen half-written: a young torn tail, retried.
            Err(WriteError::Busy { .. }) => busy += 1,
            Err(e) => panic!("unexpected refusal: {e}"),
        }
        rng.pause(1000);
    }
    let elapsed = start.elapsed().as_millis();
    for id in acks {
        writeln!(out, "ACK {id}").unwrap();
    }
    writeln!(out, "STATS {conflicts} {busy} {elapsed}").unwrap();
}
