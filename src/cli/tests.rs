//! In-process tests of the command line's output discipline: under `--json`, stdout holds
//! exactly one JSON document, even when a command fails after it started rendering.

use std::os::unix::fs::FileExt;
use std::path::Path;

use serde_json::Value;

use super::read::{self, ContextArgs};
use super::{Exit, emit};
use crate::core::jsstr::RestoringWriter;

/// A version-3 session of `n` user messages in a chain, each long enough that a context
/// document streamed to stdout would have been flushed in part before the last one.
fn session(path: &Path, n: usize) -> std::io::Result<Vec<u64>> {
    let mut text = String::from(
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}\n",
    );
    let mut offsets = Vec::new();
    for i in 0..n {
        offsets.push(text.len() as u64);
        let parent = match i {
            0 => "null".to_owned(),
            _ => format!("\"m{:07}\"", i - 1),
        };
        text.push_str(&format!(
            "{{\"type\":\"message\",\"id\":\"m{i:07}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{}\",\"timestamp\":1}}}}\n",
            "x".repeat(4000)
        ));
    }
    std::fs::write(path, text)?;
    Ok(offsets)
}

#[test]
fn a_json_command_that_fails_mid_document_prints_only_the_error_document()
-> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("s.jsonl");
    let offsets = session(&file, 8)?;
    let args = ContextArgs {
        file: file.clone(),
        leaf: None,
        json: true,
        allow_corrupt: false,
    };
    let opened = read::open(&file, false)?;
    // The last message's line changes after the session was read: rendering reaches it only
    // after seven messages (28 kB) of the document are out.
    let last = *offsets.last().ok_or("no entries")?;
    let handle = std::fs::OpenOptions::new().write(true).open(&file)?;
    handle.write_all_at(b"#", last)?;

    let mut stdout = RestoringWriter::new(Vec::new());
    let code = emit(&mut stdout, true, |out| {
        read::print_context(out, &opened, &args)
    });
    assert_eq!(code, Exit::Error.into());
    let text = String::from_utf8(stdout.into_inner()?)?;
    // Exactly one document: serde_json refuses trailing characters other than whitespace.
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
    assert_eq!(doc["error"]["kind"], "io", "{doc}");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("changed since the session was read"),
        "{message}"
    );
    assert!(
        !text.contains("xxxx"),
        "no message text reaches stdout: {text}"
    );

    // Once the line is whole again the same command prints the whole document, and only it.
    handle.write_all_at(b"{", last)?;
    let mut stdout = RestoringWriter::new(Vec::new());
    let code = emit(&mut stdout, true, |out| read::context(out, &args));
    assert_eq!(code, Exit::Ok.into());
    let doc: Value = serde_json::from_slice(&stdout.into_inner()?)?;
    assert_eq!(doc["messageEntryIds"].as_array().map(Vec::len), Some(8));
    Ok(())
}

#[test]
fn human_output_streams_and_the_error_goes_to_stderr_only() -> Result<(), Box<dyn std::error::Error>>
{
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("s.jsonl");
    let offsets = session(&file, 3)?;
    let args = ContextArgs {
        file: file.clone(),
        leaf: None,
        json: false,
        allow_corrupt: false,
    };
    let opened = read::open(&file, false)?;
    let last = *offsets.last().ok_or("no entries")?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)?
        .write_all_at(b"#", last)?;
    let mut stdout = RestoringWriter::new(Vec::new());
    let code = emit(&mut stdout, false, |out| {
        read::print_context(out, &opened, &args)
    });
    assert_eq!(code, Exit::Error.into());
    let text = String::from_utf8(stdout.into_inner()?)?;
    assert!(text.starts_with("session s · leaf m0000002"), "{text}");
    assert!(!text.contains("\"error\""), "{text}");
    Ok(())
}
