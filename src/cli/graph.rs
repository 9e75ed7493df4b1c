//! `sessiond graph`: the session tree as a commit-graph-like picture ([`crate::view::graph`]),
//! as text (`git log --graph` lanes, what Neovim shows) or as one self-contained SVG file, for
//! a pi session or a Claude Code transcript. The session is only read.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::error::{CliError, Exit};
use super::{open, transcript};
use crate::core::describe::Describe;
use crate::core::tree::Tree;
use crate::dialect::Dialect;
use crate::view::convert;
use crate::view::graph::{self, Graph, Lens};

/// `sessiond graph`.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The session file: a pi session, a Claude Code transcript or a Codex rollout (JSONL).
    pub file: PathBuf,
    /// The leaf whose context is highlighted, by id or a unique prefix (default: the resume
    /// leaf: pi's last entry; the line `claude --resume` continues from; a rollout's last
    /// line). A line of another file of a Codex thread is `<tag>:<id>`, as the graph names it.
    #[arg(long)]
    pub leaf: Option<String>,
    /// Draw an SVG document (no script, no network; light and dark) instead of text; implied
    /// by an --out ending in `.svg`.
    #[arg(long)]
    pub svg: bool,
    /// Write the graph to PATH (replaced atomically) instead of standard output.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Print the graph's model as JSON: `{name, entryCount, leafCount, lanes, defaultLeafId,
    /// selectedLeafId, contextEntryIds, rowCount, offset, nextOffset, nodes, lines}` (the
    /// daemon's `session/graph`, every row in one page).
    #[arg(long)]
    pub json: bool,
    /// Open a corrupt file read-only: lines that are not JSON are skipped, other problems read
    /// past, and each listed with what its agent (pi, Claude Code, Codex) does there.
    #[arg(long)]
    pub allow_corrupt: bool,
}

fn svg_wanted(args: &GraphArgs) -> bool {
    args.svg
        || args
            .out
            .as_deref()
            .and_then(Path::extension)
            .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
}

/// Runs `sessiond graph`. Errors: the open errors of `context`, an unknown `--leaf`, or an
/// `--out` that cannot be written (`Argument`).
pub fn run(out: &mut dyn Write, args: &GraphArgs) -> Result<Exit, CliError> {
    match open::dialect_of(&args.file)? {
        Dialect::Codex => {
            // A rollout is linear; its branches are the thread's other files (forks, revert
            // segments), drawn from the line their prefix ends at.
            let thread = super::codex::thread(&args.file, args.allow_corrupt)?;
            let leaf = super::codex::thread_leaf(&thread, &args.file, args.leaf.as_deref())?;
            let g = graph::build(&thread.tree, &Lens::codex(&thread, leaf), &thread.lines());
            write(out, args, Dialect::Codex, &thread.tree, &g)
        }
        Dialect::Pi => {
            let opened = open::open(&args.file, args.allow_corrupt, "graph")?;
            let tree = &opened.session.tree;
            let leaf = open::resolve(tree, &args.file, args.leaf.as_deref())?;
            let g = graph::build(tree, &Lens::pi(tree, leaf), &opened.lines);
            write(out, args, Dialect::Pi, tree, &g)
        }
        Dialect::Claude => {
            let read = transcript::read(&args.file, args.allow_corrupt)?;
            let tree = &read.session.tree;
            // A transcript with no line to continue from still draws; nothing is in context.
            let leaf = match args.leaf.as_deref() {
                Some(id) => Some(transcript::leaf(tree, &args.file, Some(id))?),
                None => crate::dialect::claude::default_leaf(tree),
            };
            let id = convert::claude_session_id(&args.file).unwrap_or_default();
            // Linked to the subagents' transcripts beside it, or to the one that started it.
            let lens = Lens::claude(tree, &read.lines, leaf, id).with_subagents(
                tree,
                crate::listing::subagent_of(&args.file),
                crate::listing::subagents_of(&args.file),
            );
            let g = graph::build(tree, &lens, &read.lines);
            write(out, args, Dialect::Claude, tree, &g)
        }
    }
}

/// Prints or writes the graph `g` of `tree` as `args` ask.
fn write<E: Describe>(
    out: &mut dyn Write,
    args: &GraphArgs,
    format: Dialect,
    tree: &Tree<E>,
    g: &Graph,
) -> Result<Exit, CliError> {
    let document = if args.json {
        let mut doc = serde_json::to_string(&convert::graph(format, tree, g, None))
            .map_err(|e| CliError::Output(std::io::Error::other(e)))?;
        doc.push('\n');
        doc
    } else if svg_wanted(args) {
        g.svg(tree)
    } else {
        let mut text = String::new();
        for line in g.text(tree) {
            text.push_str(&line.text);
            text.push('\n');
        }
        text
    };
    match &args.out {
        Some(path) => {
            super::export::write_atomically(path, document.as_bytes())?;
            super::say(format_args!(
                "graph of {} ({}) written to {}",
                crate::view::tree::count(g.nodes.len(), "node", "nodes"),
                crate::view::tree::count(g.entry_count, "entry", "entries"),
                path.display()
            ));
        }
        None => out.write_all(document.as_bytes())?,
    }
    Ok(Exit::Ok)
}
