//! `context`, `explain`, `tree` and `check` on a Codex rollout: the leaf named by its ordinal
//! (or `line:N`), the thread's chain of files, and the context and explanation of
//! [`crate::dialect::codex::context`].

use std::io::{self, Write};
use std::path::Path;

use serde_json::{Value, json};

use super::error::{CliError, Exit};
use super::open::{Ask, dialect_of};
use crate::core::tree::{Mode, NodeIdx};
use crate::dialect::codex::context as cx;
use crate::dialect::codex::leaf_replay::Replay;
use crate::dialect::codex::lineage::LineageError;
use crate::dialect::codex::{Codex, Tree};
use crate::storage::reader;

fn lineage_err(path: &Path) -> impl Fn(LineageError) -> CliError + '_ {
    move |e| match e {
        LineageError::Io { path, source } => {
            CliError::Open(crate::storage::reader::OpenError::Io { path, source })
        }
        other => CliError::Transcript {
            path: path.to_owned(),
            detail: other.to_string(),
        },
    }
}

/// The 0-based line of the leaf `id` names in `tree` (an ordinal or `line:N`), or of the last
/// line without one. Errors: an id that names no line.
fn leaf_line(
    tree: &Tree,
    file: &Path,
    id: Option<&str>,
    what: &'static str,
) -> Result<Option<usize>, CliError> {
    let n: Option<NodeIdx> = match id {
        None => crate::core::describe::Describe::default_leaf(tree),
        Some(id) => Some(tree.lookup(id).map_err(|unknown| CliError::UnknownEntry {
            path: file.to_owned(),
            unknown,
            what,
        })?),
    };
    Ok(n.map(|n| tree.node(n).entry.span.line as usize - 1))
}

fn read(file: &Path, allow_corrupt: bool) -> Result<Tree, CliError> {
    Ok(reader::open_session::<Codex>(file, Mode::allowing_corrupt(allow_corrupt))?.tree)
}

/// Runs `sessiond context` on a Codex rollout: `messages` is the `input` item list Codex
/// sends when it resumes at the leaf (after its base-instructions message, which the document
/// gives as `baseInstructions`).
pub fn context(out: &mut dyn Write, ask: &Ask<'_>) -> Result<Exit, CliError> {
    let file = ask.file;
    let tree = read(file, ask.allow_corrupt)?;
    let line = leaf_line(&tree, file, ask.leaf, "leaf id")?;
    let leaf_id = line.and_then(|l| {
        tree.nodes()
            .iter()
            .find(|n| n.entry.span.line as usize == l + 1)
            .map(|n| n.entry.id.as_str().to_owned())
    });
    let index = cx::index_for(file);
    let doc = Replay::messages_at(&index, file, line)
        .map_err(lineage_err(file))?
        .document(leaf_id);
    if ask.json {
        serde_json::to_writer(&mut *out, &doc).map_err(io::Error::from)?;
        writeln!(out)?;
        return Ok(Exit::Ok);
    }
    writeln!(
        out,
        "Codex rollout {} · leaf {} · {} input items (after the base instructions)",
        file.display(),
        doc.leaf_id.as_deref().unwrap_or("(none)"),
        doc.message_count
    )?;
    for l in &doc.chain {
        writeln!(
            out,
            "  from {} up to line {} (byte {})",
            l.file.display(),
            l.last_line,
            l.end_byte_offset
        )?;
    }
    for (i, m) in doc.messages.iter().enumerate() {
        let role = m
            .get("role")
            .or_else(|| m.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let text = crate::dialect::codex::preview::line_preview(
            &json!({"type": "response_item", "payload": m}),
        );
        writeln!(out, "{:>4} {role:<22} {text}", i + 1)?;
    }
    for n in &doc.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(Exit::Ok)
}

/// Runs `sessiond explain` on a Codex rollout: why the line `entry_id` is or is not in what
/// Codex sends at the leaf.
pub fn explain(out: &mut dyn Write, ask: &Ask<'_>, entry_id: &str) -> Result<Exit, CliError> {
    let file = ask.file;
    let tree = read(file, ask.allow_corrupt)?;
    let target = leaf_line(&tree, file, Some(entry_id), "entry id")?.unwrap_or(0);
    let line = leaf_line(&tree, file, ask.leaf, "leaf id")?;
    let index = cx::index_for(file);
    let ex = cx::explain(&index, file, target, line).map_err(lineage_err(file))?;
    if ask.json {
        serde_json::to_writer(&mut *out, &ex).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{} (line {}, {}): {}",
            ex.entry_id, ex.line, ex.line_type, ex.text
        )?;
        for e in &ex.elsewhere {
            writeln!(out, "  {}", e.text)?;
        }
    }
    Ok(Exit::Ok)
}

/// What `check` says of a rollout's thread beyond its lines
/// ([`crate::dialect::codex::report::report`], without the thread's tree).
pub fn thread_of(file: &Path) -> crate::dialect::codex::report::Report {
    crate::dialect::codex::report::report(&cx::index_for(file), file, None)
}

/// The line types of `tree` that sessiond does not know, once each, in file order.
pub fn unknown_types(tree: &Tree) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in tree.nodes() {
        if let crate::dialect::codex::format::Kind::Other(t) = &n.entry.kind
            && !out.iter().any(|o| o == t.as_str())
        {
            out.push(t.to_string());
        }
    }
    out
}

/// Whether `file` is a Codex rollout.
pub fn is_codex(file: &Path) -> bool {
    dialect_of(file).is_ok_and(|d| d == crate::dialect::Dialect::Codex)
}

/// The thread of the rollout `file` as one tree of files
/// ([`crate::dialect::codex::thread::Thread`]), after `file` itself is read as `context`
/// reads it (so a corrupt line is refused, or skipped with `allow_corrupt`, the same way).
/// Errors: the open errors of `context`.
pub fn thread(
    file: &Path,
    allow_corrupt: bool,
) -> Result<crate::dialect::codex::thread::Thread, CliError> {
    read(file, allow_corrupt)?;
    crate::dialect::codex::thread::Thread::read(file, Mode::Lenient).map_err(|e| match e {
        crate::dialect::codex::thread::ThreadError::Io { path, source } => {
            CliError::Open(crate::storage::reader::OpenError::Io { path, source })
        }
        other => CliError::Transcript {
            path: file.to_owned(),
            detail: other.to_string(),
        },
    })
}

/// The node a leaf argument names in a thread's tree (an id of the file asked for, or
/// `<tag>:<id>` of another file of the thread), or the last line of the file asked for.
/// Errors: an id that names no line.
pub fn thread_leaf(
    thread: &crate::dialect::codex::thread::Thread,
    file: &Path,
    id: Option<&str>,
) -> Result<Option<NodeIdx>, CliError> {
    match id {
        None => Ok(thread.last_node(thread.own)),
        Some(id) => super::open::find(&thread.tree, file, id, "leaf id").map(Some),
    }
}
