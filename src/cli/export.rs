//! `sessiond export`: the branch to a leaf of a pi session or a Claude Code transcript as a
//! Markdown or HTML document ([`crate::view::export`]), on stdout or into `--out` (written to a temporary file next to
//! it, then renamed, so a reader never sees half a document). The session is only read.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde_json::json;

use super::error::{CliError, Exit};
use super::{open, transcript};
use crate::dialect::Dialect;
use crate::storage::{reader, subagents};
use crate::view::export::claude::Subagent;
use crate::view::export::{self, DEFAULT_MAX_OUTPUT_BYTES, Format};

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Markdown (with `<details>` blocks).
    Md,
    /// One self-contained HTML file (no script, no network; light and dark).
    Html,
}

/// `sessiond export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The session file: a pi session, a Claude Code transcript or a Codex rollout (JSONL).
    pub file: PathBuf,
    /// Leaf entry id (or a unique prefix): the branch from the root to it is exported (default:
    /// the resume leaf: pi's last entry; the line `claude --resume` continues from).
    #[arg(long)]
    pub leaf: Option<String>,
    /// The document's format (default: `html` when --out ends in `.html` or `.htm`, else `md`).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Write the document to PATH (replaced atomically) instead of standard output.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Keep strings that look like API keys and tokens (redacted by default; the patterns are
    /// listed in docs/guide.md and named in the document).
    #[arg(long)]
    pub no_redact: bool,
    /// Longest tool output or argument shown, in bytes; longer ones are cut and their full
    /// size given.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_OUTPUT_BYTES)]
    pub max_output_bytes: usize,
    /// Print `{format, leafId, out, entries, messages, toolCalls, redactions, truncated,
    /// images}` (and `document` without --out) as JSON.
    #[arg(long)]
    pub json: bool,
    /// Open a corrupt file read-only: lines that are not JSON are skipped, other problems read
    /// past, and each listed with what its agent (pi, Claude Code, Codex) does there.
    #[arg(long)]
    pub allow_corrupt: bool,
}

fn format_of(args: &ExportArgs) -> Format {
    match args.format {
        Some(FormatArg::Md) => Format::Markdown,
        Some(FormatArg::Html) => Format::Html,
        None => match args
            .out
            .as_deref()
            .and_then(Path::extension)
            .and_then(|e| e.to_str())
        {
            Some("html" | "htm") => Format::Html,
            _ => Format::Markdown,
        },
    }
}

/// Runs `sessiond export`. Errors: the open errors of `context`, an unknown `--leaf`, an
/// unreadable line, or `--out` that cannot be written (`Argument`).
pub fn run(out: &mut dyn Write, args: &ExportArgs) -> Result<Exit, CliError> {
    let format = format_of(args);
    let options = export::Options {
        format,
        redact: !args.no_redact,
        max_output_bytes: args.max_output_bytes,
        file_name: args
            .file
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
    };
    let render_err = |source| CliError::Render {
        path: args.file.clone(),
        source,
    };
    let (exported, leaf_id) = match open::dialect_of(&args.file)? {
        Dialect::Codex => {
            // The history through the thread's files (a fork's parent prefix first).
            let thread = super::codex::thread(&args.file, args.allow_corrupt)?;
            let leaf = super::codex::thread_leaf(&thread, &args.file, args.leaf.as_deref())?;
            let e = export::codex::export(&thread, leaf, &thread.lines(), &options)
                .map_err(render_err)?;
            (e, leaf.map(|l| thread.tree.node(l).entry.id.to_string()))
        }
        Dialect::Pi => {
            let opened = open::open(&args.file, args.allow_corrupt, "export")?;
            let tree = &opened.session.tree;
            let leaf = open::resolve(tree, &args.file, args.leaf.as_deref())?;
            let e = export::export(tree, leaf, &opened.lines, &options).map_err(render_err)?;
            (e, leaf.map(|l| tree.node(l).entry.id.to_string()))
        }
        Dialect::Claude => {
            let read = transcript::read(&args.file, args.allow_corrupt)?;
            let tree = &read.session.tree;
            let leaf = transcript::leaf(tree, &args.file, args.leaf.as_deref())?;
            let files = subagents::read(&args.file, &|p| reader::open_regular_nofollow(p));
            let subs: Vec<Subagent<'_>> =
                files.iter().map(|f| Subagent::of(&args.file, f)).collect();
            let id = crate::view::convert::claude_session_id(&args.file).unwrap_or_default();
            let e = export::claude::export(tree, Some(leaf), &read.lines, &id, &subs, &options)
                .map_err(render_err)?;
            (e, Some(tree.node(leaf).entry.id.to_string()))
        }
    };
    if let Some(path) = &args.out {
        write_atomically(path, exported.document.as_bytes())?;
    }
    if args.json {
        let mut doc = json!({
            "format": format.as_str(),
            "leafId": leaf_id,
            "out": args.out.as_deref().map(crate::paths::absolute),
            "entries": exported.entries,
            "messages": exported.messages,
            "toolCalls": exported.tool_calls,
            "redactions": exported.redactions,
            "redacted": !args.no_redact,
            "truncated": exported.truncated,
            "images": exported.images,
        });
        if args.out.is_none() {
            doc["document"] = json!(exported.document);
        }
        writeln!(out, "{doc}")?;
    } else if args.out.is_none() {
        out.write_all(exported.document.as_bytes())?;
    }
    if !args.json {
        super::say(format_args!(
            "exported {} ({}, {}){}; {}",
            crate::view::tree::count(exported.entries, "entry", "entries"),
            crate::view::tree::count(exported.messages, "message", "messages"),
            crate::view::tree::count(exported.tool_calls, "tool call", "tool calls"),
            args.out
                .as_ref()
                .map_or(String::new(), |p| format!(" to {}", p.display())),
            if args.no_redact {
                "redaction off".to_owned()
            } else {
                format!(
                    "redacted {} string{} that look like secrets",
                    exported.redactions,
                    if exported.redactions == 1 { "" } else { "s" }
                )
            }
        ));
    }
    Ok(Exit::Ok)
}

/// Writes `bytes` to a temporary file in `path`'s directory and renames it over `path`: the
/// file is readable by its owner only (0600), as everything holding session content.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let err = |e: std::io::Error| CliError::Argument {
        arg: "--out",
        detail: format!("{}: {e}", path.display()),
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    // Said in the user's terms before the temporary file's own error could name it.
    let refuse = |detail: String| CliError::Argument {
        arg: "--out",
        detail,
    };
    if path.is_dir() || path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Err(refuse(format!(
            "{}: names a directory; give the name of the file to write",
            path.display()
        )));
    }
    if !dir.is_dir() {
        return Err(refuse(format!(
            "{}: no such directory {}",
            path.display(),
            dir.display()
        )));
    }
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(err)?;
    // The document holds session content: it keeps the temporary file's mode, 0600 (SPEC §8).
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}
