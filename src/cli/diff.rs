//! `sessiond diff`: two leaves of one session compared — where their branches part, what each
//! side did, and what the model sees at one leaf and not at the other
//! ([`crate::core::compare`], printed by [`crate::view::compare`]). The session is only read.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Args;

use super::error::{CliError, Exit};
use super::open;
use crate::core::tree::{Mode, NodeIdx, Tree, TreeEntry};
use crate::dialect::Dialect;
use crate::storage::reader::TornTail;

/// `sessiond diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The session file: a pi session, a Claude Code transcript or a Codex rollout (JSONL).
    pub file: PathBuf,
    /// The first leaf (A): an entry id or a unique prefix of one (a line of another file of a
    /// Codex thread: `<tag>:<id>`, as `graph` names it).
    pub leaf_a: String,
    /// The second leaf (B), likewise.
    pub leaf_b: String,
    /// Claude Code transcripts: the model the requests go to; default: the session's.
    #[arg(long)]
    pub model: Option<String>,
    /// Print the comparison as JSON: `{leafA, leafB, forkPointId, onlyA, onlyB, sideA, sideB,
    /// contextOnlyA, contextOnlyB, contextChanged, contextCommon, thinkingLevel?, model?,
    /// diagnostics, tornTail}` (the daemon's `session/compareBranches`).
    #[arg(long)]
    pub json: bool,
    /// Open a corrupt file read-only: lines that are not JSON are skipped, other problems read
    /// past, and each listed with what its agent (pi, Claude Code, Codex) does there; the
    /// leaves are compared as read.
    #[arg(long)]
    pub allow_corrupt: bool,
}

/// The entry a leaf argument names. Errors: `UnknownEntry`.
fn leaf<E: TreeEntry>(tree: &Tree<E>, file: &Path, id: &str) -> Result<NodeIdx, CliError> {
    super::open::find(tree, file, id, "leaf id")
}

/// Runs `sessiond diff`. Errors: the open errors of `context`, an unknown leaf, a line that
/// cannot be read again.
pub fn run(out: &mut dyn Write, args: &DiffArgs) -> Result<Exit, CliError> {
    let file = args.file.as_path();
    let render = |source| CliError::Render {
        path: file.to_owned(),
        source,
    };
    match open::dialect_of(file)? {
        Dialect::Codex => {
            if args.model.is_some() {
                return Err(CliError::Argument {
                    arg: "--model",
                    detail: "applies to Claude Code transcripts only".to_owned(),
                });
            }
            // A rollout is linear: its branches are the thread's other files (forks, revert
            // segments), named `<tag>:<id>` as `graph` shows them.
            let thread = super::codex::thread(file, args.allow_corrupt)?;
            let (a, b) = (
                leaf(&thread.tree, file, &args.leaf_a)?,
                leaf(&thread.tree, file, &args.leaf_b)?,
            );
            let cmp = crate::dialect::codex::compare::compare(&thread, &thread.lines(), a, b)
                .map_err(|e| CliError::Transcript {
                    path: file.to_owned(),
                    detail: e.to_string(),
                })?;
            emit(out, args, &thread.tree, &cmp, None, Some("codex"))
        }
        Dialect::Pi => {
            if args.model.is_some() {
                return Err(CliError::Argument {
                    arg: "--model",
                    detail: "applies to Claude Code transcripts only".to_owned(),
                });
            }
            let opened = open::open(file, args.allow_corrupt, "diff")?;
            let tree = &opened.session.tree;
            let (a, b) = (
                leaf(tree, file, &args.leaf_a)?,
                leaf(tree, file, &args.leaf_b)?,
            );
            let home = std::env::var("HOME").ok();
            let options = crate::dialect::pi::compare::Options {
                home: home.as_deref(),
            };
            let cmp = crate::dialect::pi::compare::compare(tree, &opened.lines, a, b, &options)
                .map_err(render)?;
            emit(out, args, tree, &cmp, opened.session.torn_tail, None)
        }
        Dialect::Claude => {
            let session = crate::storage::reader::open_session::<crate::dialect::claude::Claude>(
                file,
                Mode::allowing_corrupt(args.allow_corrupt),
            )?;
            let lines = crate::storage::reader::FileLines::open(file)
                .map(crate::storage::reader::FileLines::read_ahead)
                .map_err(|source| crate::storage::reader::OpenError::Io {
                    path: file.to_owned(),
                    source,
                })?;
            let tree = &session.tree;
            let (a, b) = (
                leaf(tree, file, &args.leaf_a)?,
                leaf(tree, file, &args.leaf_b)?,
            );
            let options = crate::view::transcript::options(args.model.as_deref());
            let cmp = crate::dialect::claude::compare::compare(tree, &lines, a, b, &options)
                .map_err(|e| CliError::Output(io::Error::other(e.to_string())))?;
            emit(
                out,
                args,
                tree,
                &cmp,
                session.torn_tail,
                Some("claude-code"),
            )
        }
    }
}

/// Prints the comparison: the report, or the JSON document.
fn emit<E: crate::core::describe::Describe, R: serde::Serialize>(
    out: &mut dyn Write,
    args: &DiffArgs,
    tree: &Tree<E>,
    cmp: &crate::core::compare::Comparison<R>,
    torn_tail: Option<TornTail>,
    format: Option<&str>,
) -> Result<Exit, CliError> {
    if args.json {
        let doc =
            crate::view::compare::document(cmp, torn_tail, format).map_err(io::Error::from)?;
        serde_json::to_writer(&mut *out, &doc).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        crate::view::compare::print(out, tree, cmp)?;
        if let Some(t) = torn_tail {
            writeln!(
                out,
                "torn tail: line {} (byte {}) is incomplete and left out",
                t.line, t.offset
            )?;
        }
    }
    Ok(Exit::Ok)
}
