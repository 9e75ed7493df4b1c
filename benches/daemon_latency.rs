//! Benchmark (not a test) of `sessiond serve`: the delay from a writer's append to the
//! client's `session/didChange` (median and p99 over 1,000 appends), and the cost of
//! `session/contextAt` on the largest fixture. Run with `cargo bench --bench daemon_latency`;
//! prints a table.
// The table goes to stdout; a failed setup step ends the run with a message.
#![allow(clippy::print_stdout, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::fs::OpenOptions;
use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Daemon, repo, v3_session};

const APPENDS: usize = 1000;
const CONTEXT_RUNS: usize = 50;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn row(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "| {name:<44} | {:>6} | {:>9.2} | {:>9.2} | {:>9.2} |",
        samples.len(),
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.99)),
        ms(samples[samples.len() - 1]),
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bench.jsonl");
    let (header, entries) = v3_session(APPENDS + 1);
    std::fs::write(&file, format!("{header}\n{}\n", entries[0].1)).expect("write");
    let examples = repo().join("examples");
    let (mut d, _) = Daemon::start(&[dir.path(), &examples]);
    let path = file.to_str().expect("utf-8");
    d.call("session/open", json!({"path": path}));

    let mut out = OpenOptions::new().append(true).open(&file).expect("open");
    let mut append_latency = Vec::with_capacity(APPENDS);
    for (id, line) in &entries[1..] {
        let bytes = format!("{line}\n");
        let t0 = Instant::now();
        out.write_all(bytes.as_bytes()).expect("append");
        let change = d
            .notification("session/didChange", Duration::from_secs(10))
            .expect("didChange");
        append_latency.push(t0.elapsed());
        assert_eq!(
            change["added"][0]["id"],
            json!(id),
            "one append, one notification"
        );
        std::thread::sleep(Duration::from_millis(1));
    }

    let largest = examples.join("pi-v1-before-compaction.jsonl");
    let lp = largest.to_str().expect("utf-8");
    let t0 = Instant::now();
    let open = d.call("session/open", json!({"path": lp}));
    let open_time = t0.elapsed();
    let mut timed = |params: serde_json::Value| -> Vec<Duration> {
        (0..CONTEXT_RUNS)
            .map(|_| {
                let t0 = Instant::now();
                d.call("session/contextAt", params.clone());
                t0.elapsed()
            })
            .collect()
    };
    let full = timed(json!({"path": lp}));
    let ids = timed(json!({"path": lp, "fields": "ids"}));
    let page = timed(json!({"path": lp, "fields": "previews", "limit": 50}));

    let size = std::fs::metadata(&largest).map(|m| m.len()).unwrap_or(0);
    println!(
        "sessiond serve benchmark ({} entries, {:.1} MB in {})",
        open["entryCount"],
        size as f64 / 1e6,
        largest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    println!(
        "| {:<44} | {:>6} | {:>9} | {:>9} | {:>9} |",
        "measure", "n", "median ms", "p99 ms", "max ms"
    );
    println!(
        "|{}|{}|{}|{}|{}|",
        "-".repeat(46),
        "-".repeat(8),
        "-".repeat(11),
        "-".repeat(11),
        "-".repeat(11)
    );
    row("append → session/didChange", append_latency);
    row("session/open (largest fixture)", vec![open_time]);
    row("session/contextAt full (largest fixture)", full);
    row("session/contextAt fields=ids", ids);
    row("session/contextAt previews, limit 50", page);
    assert_eq!(d.stop(), Some(0));
}
