//! `sessiond graph`: the session tree as a commit-graph-like picture ([`crate::view::graph`]),
//! as text (`git log --graph` lanes, what Neovim shows) or as one self-contained SVG file. The
//! session is only read.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::error::{CliError, Exit};
use super::read;
use crate::view::convert;
use crate::view::graph;

/// `sessiond graph`.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// The leaf whose context is highlighted (default: the last entry in the file).
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
    /// Open a corrupt file read-only the way pi does (skip bad lines, orphans as roots).
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
    let opened = read::open(&args.file, args.allow_corrupt, "graph")?;
    let tree = &opened.session.tree;
    let leaf = read::resolve(tree, &args.file, args.leaf.as_deref())?;
    let g = graph::build(tree, leaf, &opened.lines);
    let document = if args.json {
        let mut doc = serde_json::to_string(&convert::graph(tree, &g, None))
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
            eprintln!(
                "sessiond: graph of {} ({}) written to {}",
                crate::view::tree::count(g.nodes.len(), "node", "nodes"),
                crate::view::tree::count(g.entry_count, "entry", "entries"),
                path.display()
            );
        }
        None => out.write_all(document.as_bytes())?,
    }
    Ok(Exit::Ok)
}
