//! The parsing floor: reads a session file and validates every line with serde_json into
//! `IgnoredAny` — the least any correct reader must do. Benchmarks compare sessiond to it.
//!
//! `cargo run --release --example floor -- FILE` prints the number of lines validated.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::process::ExitCode;

use serde::de::IgnoredAny;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: floor FILE");
        return ExitCode::from(2);
    };
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("floor: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = Vec::new();
    let (mut ok, mut bad) = (0u64, 0u64);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => match serde_json::from_slice::<IgnoredAny>(&line) {
                Ok(_) => ok += 1,
                Err(_) => bad += 1,
            },
            Err(e) => {
                eprintln!("floor: {path}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    eprintln!("{ok} valid lines, {bad} invalid");
    ExitCode::SUCCESS
}
