//! The parsing floor: reads session files and validates every line with serde_json into
//! `IgnoredAny` — the least any correct reader must do — on one thread. Benchmarks compare
//! sessiond to it.
//!
//! `cargo run --release --example floor -- PATH...` prints the number of lines validated; a
//! directory stands for every `*.jsonl` below it (a sessions directory: the floor of a listing
//! or an index build).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::de::IgnoredAny;

/// Every `*.jsonl` below `dir`, sorted.
fn jsonl_below(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            jsonl_below(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "jsonl") {
            out.push(p);
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if args.is_empty() {
        eprintln!("usage: floor PATH...");
        return ExitCode::from(2);
    }
    let mut files = Vec::new();
    for a in &args {
        let listed = if a.is_dir() {
            jsonl_below(a, &mut files)
        } else {
            files.push(a.clone());
            Ok(())
        };
        if let Err(e) = listed {
            eprintln!("floor: {}: {e}", a.display());
            return ExitCode::from(2);
        }
    }
    let (mut ok, mut bad) = (0u64, 0u64);
    let mut line = Vec::new();
    for path in &files {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("floor: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        let mut reader = BufReader::with_capacity(1 << 20, file);
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => match serde_json::from_slice::<IgnoredAny>(&line) {
                    Ok(_) => ok += 1,
                    Err(_) => bad += 1,
                },
                Err(e) => {
                    eprintln!("floor: {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
        }
    }
    eprintln!("{ok} valid lines, {bad} invalid");
    ExitCode::SUCCESS
}
