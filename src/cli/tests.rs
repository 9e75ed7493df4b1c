//! In-process tests of the command line's output discipline: under `--json`, stdout holds
//! exactly one JSON document, even when a command fails after it started rendering.

use std::os::unix::fs::FileExt;
use std::path::Path;

use serde_json::Value;

use super::open;
use super::read::{self, ContextArgs};
use super::{Exit, emit};
use crate::js::jsstr::RestoringWriter;

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

/// `sessiond context` (`--json` or not) of a [`session`] of `n` messages in `dir`, the session
/// as read, and the file with its last line's offset: that line is broken (`#` for its `{`)
/// after the read.
fn broken_after_open(
    dir: &Path,
    n: usize,
    json: bool,
) -> Result<(ContextArgs, open::Opened, std::fs::File, u64), Box<dyn std::error::Error>> {
    let file = dir.join("s.jsonl");
    let offsets = session(&file, n)?;
    let args = ContextArgs {
        file: file.clone(),
        leaf: None,
        model: None,
        json,
        allow_corrupt: false,
    };
    let opened = open::open(&file, false, "context")?;
    let last = *offsets.last().ok_or("no entries")?;
    let handle = std::fs::OpenOptions::new().write(true).open(&file)?;
    handle.write_all_at(b"#", last)?;
    Ok((args, opened, handle, last))
}

/// The exit code of `command` run through `emit` (`--json` as `args` says) and what it printed.
fn printed(
    args: &ContextArgs,
    command: impl FnOnce(&mut dyn super::Sink) -> Result<Exit, super::CliError>,
) -> Result<(std::process::ExitCode, String), Box<dyn std::error::Error>> {
    let mut stdout = RestoringWriter::new(Vec::new());
    let code = emit(&mut stdout, args.json, command);
    Ok((code, String::from_utf8(stdout.into_inner()?)?))
}

#[test]
fn a_json_command_that_fails_mid_document_prints_only_the_error_document()
-> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    // The last message's line changes after the session was read: rendering reaches it only
    // after seven messages (28 kB) of the document are out.
    let (args, opened, handle, last) = broken_after_open(dir.path(), 8, true)?;

    let (code, text) = printed(&args, |out| read::print_context(out, &opened, &args))?;
    assert_eq!(code, Exit::Error.into());
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
    let (code, text) = printed(&args, |out| read::context(out, &args))?;
    assert_eq!(code, Exit::Ok.into());
    let doc: Value = serde_json::from_str(&text)?;
    assert_eq!(doc["messageEntryIds"].as_array().map(Vec::len), Some(8));
    Ok(())
}

#[test]
fn human_output_streams_and_the_error_goes_to_stderr_only() -> Result<(), Box<dyn std::error::Error>>
{
    let dir = tempfile::tempdir()?;
    let (args, opened, _file, _) = broken_after_open(dir.path(), 3, false)?;
    let (code, text) = printed(&args, |out| read::print_context(out, &opened, &args))?;
    assert_eq!(code, Exit::Error.into());
    assert!(text.starts_with("session s · leaf m0000002"), "{text}");
    assert!(!text.contains("\"error\""), "{text}");
    Ok(())
}

/// What `sessiond context FILE --json [--leaf LEAF]` prints, and whether it succeeded.
fn context_document(
    file: &Path,
    leaf: Option<String>,
    allow_corrupt: bool,
) -> Result<(bool, Vec<u8>), Box<dyn std::error::Error>> {
    let args = ContextArgs {
        file: file.to_owned(),
        leaf,
        model: None,
        json: true,
        allow_corrupt,
    };
    let mut stdout = RestoringWriter::new(Vec::new());
    let code = emit(&mut stdout, true, |out| read::context(out, &args));
    Ok((code == Exit::Ok.into(), stdout.into_inner()?))
}

/// `context --json` at the default leaf (its messages written while the session is read, or
/// given up and rendered after) prints what naming that same leaf prints (rendered after the
/// read, as at any leaf). Returns whether the file printed a context.
fn written_ahead_equals_rendered(
    file: &Path,
    allow_corrupt: bool,
) -> Result<bool, Box<dyn std::error::Error>> {
    let (ok, ahead) = context_document(file, None, allow_corrupt)?;
    // pi's documents may hold a lone surrogate's escape, which serde_json refuses.
    let doc = crate::js::jsstr::parse_value(&ahead)?;
    let Some(leaf) = doc["leafId"].as_str().filter(|_| ok) else {
        return Ok(false);
    };
    let (ok, rendered) = context_document(file, Some(leaf.to_owned()), allow_corrupt)?;
    assert!(ok, "{}: the default leaf by name", file.display());
    assert!(
        ahead == rendered,
        "{} (allow corrupt: {allow_corrupt}): written ahead\n{}\nrendered after\n{}",
        file.display(),
        String::from_utf8_lossy(&ahead),
        String::from_utf8_lossy(&rendered)
    );
    Ok(true)
}

#[test]
fn the_context_written_while_reading_is_the_context_rendered_after()
-> Result<(), Box<dyn std::error::Error>> {
    crate::testdata::pool_of_several();
    let mut printed = 0;
    for file in crate::testdata::session_files() {
        for allow_corrupt in [false, true] {
            printed += usize::from(written_ahead_equals_rendered(&file, allow_corrupt)?);
        }
    }
    assert!(printed > 40, "only {printed} contexts printed");
    Ok(())
}

/// A session long enough to be read in parallel and to spill its document to the temporary
/// file, written ahead to its last entry, and then the same session ending in a compaction,
/// a branch, or a new root: each gives up the writing ahead only at its last line, after
/// mebibytes were written, and the document is still the context rendered after the read.
#[test]
fn a_context_given_up_at_the_last_line_is_rendered_after() -> Result<(), Box<dyn std::error::Error>>
{
    crate::testdata::pool_of_several();
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("s.jsonl");
    let n = 1300;
    session(&file, n)?;
    assert!(std::fs::metadata(&file)?.len() > 5 << 20);
    let (session_read, projection, holds) = crate::cli::read::open_rendering(
        &file,
        crate::core::tree::Mode::Strict,
        &mut std::io::sink(),
    )?;
    assert!(holds && projection.is_some(), "a chain is written ahead");
    assert_eq!(session_read.tree.len(), n);
    assert!(written_ahead_equals_rendered(&file, false)?);

    let base = std::fs::read_to_string(&file)?;
    let last = format!("m{:07}", n - 1);
    let endings = [
        format!(
            "{{\"type\":\"compaction\",\"id\":\"c\",\"parentId\":\"{last}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"summary\":\"so far\",\"firstKeptEntryId\":\"m{:07}\",\"tokensBefore\":1}}\n",
            n - 3
        ),
        format!(
            "{{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"m{:07}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"elsewhere\",\"timestamp\":1}}}}\n",
            n - 5
        ),
        "{\"type\":\"message\",\"id\":\"r\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{\"role\":\"user\",\"content\":\"anew\",\"timestamp\":1}}\n".to_owned(),
    ];
    for ending in endings {
        std::fs::write(&file, format!("{base}{ending}"))?;
        let (_, _, holds) = crate::cli::read::open_rendering(
            &file,
            crate::core::tree::Mode::Strict,
            &mut std::io::sink(),
        )?;
        assert!(!holds, "given up at {ending}");
        assert!(written_ahead_equals_rendered(&file, false)?, "{ending}");
    }
    Ok(())
}
