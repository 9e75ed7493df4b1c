//! The reading subcommands: `context`, `tree`, `explain`, `check`. None of them changes a
//! file; each opens the session (strictly, or leniently with `--allow-corrupt`), then prints.

use crate::server::convert;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{Value, json};

use super::error::{CliError, Exit};
use crate::core::explain::{self, Explanation, Reason};
use crate::core::format::EntryKind;
use crate::core::preview;
use crate::core::projection::{self, Projection};
use crate::core::render::{self, LineSource};
use crate::core::tree::{Mode, NodeIdx, Tree};
use crate::server::context_json::ContextJson;
use crate::storage::reader::{self, FileLines, OpenError, OpenedSession};

/// `sessiond context`.
#[derive(Debug, Args)]
pub struct ContextArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// Leaf entry id (default: the last entry in the file).
    #[arg(long)]
    pub leaf: Option<String>,
    /// Print `{messages, thinkingLevel, model}` as pi computes them, plus entryIds,
    /// messageEntryIds, leafId, diagnostics and tornTail.
    #[arg(long)]
    pub json: bool,
    /// Open a corrupt file read-only the way pi does (skip bad lines, orphans as roots).
    #[arg(long)]
    pub allow_corrupt: bool,
}

/// `sessiond tree`.
#[derive(Debug, Args)]
pub struct TreeArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// Print the tree as JSON (flat nodes with parent and child ids).
    #[arg(long)]
    pub json: bool,
    /// Open a corrupt file read-only the way pi does (skip bad lines, orphans as roots).
    #[arg(long)]
    pub allow_corrupt: bool,
}

/// `sessiond explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// The entry to explain.
    pub entry_id: String,
    /// Leaf entry id (default: the last entry in the file).
    #[arg(long)]
    pub leaf: Option<String>,
    /// Print the explanation as JSON.
    #[arg(long)]
    pub json: bool,
    /// Open a corrupt file read-only the way pi does (skip bad lines, orphans as roots).
    #[arg(long)]
    pub allow_corrupt: bool,
}

/// `sessiond check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// Print the result as JSON (`{"ok", "tornTail", ...}` or `{"kind", "line", "offset", ...}`).
    #[arg(long)]
    pub json: bool,
}

/// A session read for printing: its tree and a reader of its lines.
pub struct Opened {
    /// The session as read.
    pub session: OpenedSession,
    /// The file's lines, read again by position while printing.
    pub lines: FileLines,
}

/// Reads `file` strictly, or with `allow_corrupt` the way pi does (see [`Mode`]).
/// Errors: `Open` (I/O, not a file, corrupt).
pub fn open(file: &Path, allow_corrupt: bool) -> Result<Opened, CliError> {
    let mode = if allow_corrupt {
        Mode::Lenient
    } else {
        Mode::Strict
    };
    let session = reader::open_session(file, mode)?;
    let lines = FileLines::open(file).map_err(|source| OpenError::Io {
        path: file.to_owned(),
        source,
    })?;
    Ok(Opened { session, lines })
}

/// The leaf named by `--leaf`, or the default leaf (the last entry) without one.
fn resolve(tree: &Tree, file: &Path, id: Option<&str>) -> Result<Option<NodeIdx>, CliError> {
    tree.resolve_leaf(id)
        .map_err(|unknown| CliError::UnknownEntry {
            path: file.to_owned(),
            id: unknown.id,
            what: "leaf id",
        })
}

/// The entry with this id; `what` names the argument in the error.
fn find(tree: &Tree, file: &Path, id: &str, what: &'static str) -> Result<NodeIdx, CliError> {
    tree.find(id).ok_or_else(|| CliError::UnknownEntry {
        path: file.to_owned(),
        id: id.to_owned(),
        what,
    })
}

/// Runs `sessiond context`.
pub fn context(out: &mut dyn Write, args: &ContextArgs) -> Result<Exit, CliError> {
    let opened = open(&args.file, args.allow_corrupt)?;
    print_context(out, &opened, args)
}

/// Prints the context of a session already read (apart from [`context`] so that a test can
/// change the file between the read and the printing).
pub fn print_context(
    out: &mut dyn Write,
    opened: &Opened,
    args: &ContextArgs,
) -> Result<Exit, CliError> {
    let Opened { session, lines } = opened;
    let file = args.file.as_path();
    let tree = &session.tree;
    let leaf = resolve(tree, file, args.leaf.as_deref())?;
    let proj = projection::project(tree, leaf);
    let render_err = |source| CliError::Render {
        path: file.to_owned(),
        source,
    };
    if args.json {
        write_context_json(out, tree, &proj, lines, session, file)?;
    } else {
        let model = proj.model.as_ref().map_or("none".to_owned(), |m| {
            let text = |r: &Option<Box<serde_json::value::RawValue>>| {
                r.as_ref().map_or(String::new(), |r| {
                    crate::core::format::raw_str(r).map_or(r.get().to_owned(), |s| s.into_owned())
                })
            };
            format!("{}/{}", text(&m.provider), text(&m.model_id))
        });
        let thinking = proj
            .thinking_level
            .as_ref()
            .map_or("(unset)".to_owned(), |r| {
                r.get().trim_matches('"').to_owned()
            });
        writeln!(
            out,
            "session {} · leaf {} · {} messages from {} context entries · model {model} · thinking {thinking}",
            tree.header().id,
            leaf.map_or("(none)".to_owned(), |l| tree.node(l).entry.id.to_string()),
            proj.items
                .iter()
                .map(|i| crate::core::explain::message_count(i.contribution))
                .sum::<usize>(),
            proj.items.len(),
        )?;
        let mut index = 0usize;
        render::for_each_message(tree, &proj, lines, |m| {
            let value =
                crate::core::jsstr::parse_value(m.message.get().as_bytes()).unwrap_or(Value::Null);
            let role = value.get("role").and_then(Value::as_str).unwrap_or("?");
            writeln!(
                out,
                "{index:>4} {:<8} {:<17} {}",
                tree.node(m.entry).entry.id,
                role,
                preview::message_preview(&value)
            )?;
            index += 1;
            Ok(())
        })
        .map_err(|e| match e {
            // Writing stdout failed (a closed pipe, say): an output error, not a read error.
            render::RenderError::Emit(io) => CliError::Output(io),
            other => render_err(other),
        })?;
        write_problems(out, session, &proj)?;
    }
    Ok(Exit::Ok)
}

/// Writes the context document (see [`crate::server::context_json`]), rendering messages as it goes.
fn write_context_json(
    out: &mut dyn Write,
    tree: &Tree,
    proj: &Projection,
    lines: &dyn LineSource,
    session: &OpenedSession,
    file: &Path,
) -> Result<(), CliError> {
    let doc = ContextJson::new(tree, proj, lines, session.torn_tail);
    match serde_json::to_writer(&mut *out, &doc) {
        Ok(()) => Ok(writeln!(out)?),
        Err(e) => Err(match doc.take_render_error() {
            Some(source) => CliError::Render {
                path: file.to_owned(),
                source,
            },
            None => CliError::Output(e.into()),
        }),
    }
}

fn write_problems(
    out: &mut dyn Write,
    session: &OpenedSession,
    proj: &Projection,
) -> io::Result<()> {
    if let Some(t) = &session.torn_tail {
        writeln!(
            out,
            "torn tail: line {} at byte {} ({} bytes) left out",
            t.line, t.offset, t.len
        )?;
    }
    for d in session.tree.diagnostics().iter().chain(&proj.diagnostics) {
        writeln!(
            out,
            "diagnostic: {}",
            serde_json::to_string(d).unwrap_or_default()
        )?;
    }
    Ok(())
}

/// Runs `sessiond tree`.
pub fn tree(out: &mut dyn Write, args: &TreeArgs) -> Result<Exit, CliError> {
    let Opened { session, lines } = open(&args.file, args.allow_corrupt)?;
    let tree = &session.tree;
    let default_leaf = tree.default_leaf();
    let id = |n: NodeIdx| tree.node(n).entry.id.as_str();
    if args.json {
        // The daemon's node shape, from the one function that renders a node.
        let nodes: Vec<_> = (0..tree.len())
            .map(|i| convert::node(tree, &lines, i as NodeIdx, true))
            .collect();
        let doc = json!({
            "sessionId": tree.header().id,
            "header": crate::core::jsstr::parse_value(tree.header().raw.get().as_bytes()).unwrap_or(Value::Null),
            "name": tree.name(),
            "entryCount": tree.len(),
            "roots": tree.roots().iter().map(|&r| id(r)).collect::<Vec<_>>(),
            "leaves": tree.leaves().map(id).collect::<Vec<_>>(),
            "defaultLeafId": default_leaf.map(id),
            "tornTail": session.torn_tail.map(convert::torn_tail),
            "diagnostics": tree.diagnostics(),
            "nodes": nodes,
        });
        serde_json::to_writer(&mut *out, &doc).map_err(io::Error::from)?;
        writeln!(out)?;
        return Ok(Exit::Ok);
    }
    let leaves: Vec<NodeIdx> = tree.leaves().collect();
    writeln!(
        out,
        "session {}{} · {} entries · {} leaves",
        tree.header().id,
        tree.name().map_or(String::new(), |n| format!(" \"{n}\"")),
        tree.len(),
        leaves.len()
    )?;
    // Depth-first; indentation grows only where the tree branches, so a linear
    // conversation reads as a flat list.
    let mut stack: Vec<(NodeIdx, String, &str)> = tree
        .roots()
        .iter()
        .rev()
        .map(|&r| (r, String::new(), ""))
        .collect();
    while let Some((n, prefix, branch)) = stack.pop() {
        let node = tree.node(n);
        let e = &node.entry;
        let kind = match &e.kind {
            EntryKind::Message(m) => m.role.as_str().to_owned(),
            k => k.type_name().to_owned(),
        };
        let mut marks = String::new();
        if let Some(label) = tree.label_of(e.id.as_str()) {
            marks.push_str(&format!(" [{}]", label.text));
        }
        if node.children.is_empty() {
            marks.push_str(if Some(n) == default_leaf {
                "  ◀ leaf (default)"
            } else {
                "  ◀ leaf"
            });
        }
        writeln!(
            out,
            "{prefix}{branch}{} {kind:<17} {}{marks}",
            e.id,
            convert::node(tree, &lines, n, false).preview
        )?;
        let child_prefix = format!(
            "{prefix}{}",
            match branch {
                "├─ " => "│  ",
                "└─ " => "   ",
                _ => "",
            }
        );
        match node.children.as_slice() {
            [] => {}
            [only] => stack.push((*only, child_prefix, "")),
            many => {
                for (i, &c) in many.iter().enumerate().rev() {
                    stack.push((
                        c,
                        child_prefix.clone(),
                        if i + 1 == many.len() {
                            "└─ "
                        } else {
                            "├─ "
                        },
                    ));
                }
            }
        }
    }
    if let Some(t) = &session.torn_tail {
        writeln!(
            out,
            "torn tail: line {} at byte {} ({} bytes) left out",
            t.line, t.offset, t.len
        )?;
    }
    Ok(Exit::Ok)
}

/// Runs `sessiond explain`.
pub fn explain(out: &mut dyn Write, args: &ExplainArgs) -> Result<Exit, CliError> {
    let Opened { session, .. } = open(&args.file, args.allow_corrupt)?;
    let file = args.file.as_path();
    let tree = &session.tree;
    let target = find(tree, file, &args.entry_id, "entry id")?;
    let leaf = resolve(tree, file, args.leaf.as_deref())?;
    let proj = projection::project(tree, leaf);
    let ex = explain::explain(tree, &proj, target);
    if args.json {
        serde_json::to_writer(&mut *out, &ex).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", describe(&ex))?;
    }
    Ok(Exit::Ok)
}

/// One sentence for a human.
pub fn describe(ex: &Explanation) -> String {
    let leaf = ex
        .leaf_id
        .as_ref()
        .map_or("(empty leaf)".to_owned(), ToString::to_string);
    let head = format!("entry {} ({}) at leaf {leaf}: ", ex.entry_id, ex.entry_type);
    let why = match &ex.reason {
        Reason::InContext => format!("in context as message(s) {:?}", ex.message_indexes),
        Reason::ReplacedByEdit { edit_id } => {
            format!(
                "in context as message(s) {:?}, with content replaced by context edit {edit_id}",
                ex.message_indexes
            )
        }
        Reason::NotOnPath {
            diverges_at,
            branch_entry_id,
        } => match diverges_at {
            Some(d) => format!(
                "not in context: not on the leaf's path; the paths diverge after {d} (its branch starts at {branch_entry_id})"
            ),
            None => format!(
                "not in context: not on the leaf's path; it is under another root ({branch_entry_id})"
            ),
        },
        Reason::SummarizedByCompaction {
            compaction_id,
            first_kept_entry_id,
        } => format!(
            "not in context: summarized by compaction {compaction_id} (its kept range starts at {})",
            first_kept_entry_id
                .as_ref()
                .map_or("(none)".to_owned(), ToString::to_string)
        ),
        Reason::SystemMessageInKeptRange { compaction_id } => {
            format!(
                "not in context: a system message inside compaction {compaction_id}'s kept range is dropped"
            )
        }
        Reason::OmittedByEdit { edit_id } => {
            format!("not in context: omitted by context edit {edit_id}")
        }
        Reason::NeverInContext { entry_type } => {
            format!("not in context: a {entry_type} entry never enters the context")
        }
        Reason::EmptyBranchSummary => "not in context: the branch summary is empty".to_owned(),
        Reason::SupersededCompaction { by_compaction_id } => {
            format!(
                "not in context: an older compaction superseded by compaction {by_compaction_id}"
            )
        }
    };
    head + &why
}

/// Runs `sessiond check`: a report for a clean or corrupt file ([`Exit::Corrupt`]); an
/// unreadable file is an error.
pub fn check(out: &mut dyn Write, args: &CheckArgs) -> Result<Exit, CliError> {
    let file = args.file.as_path();
    let (report, text, exit) = match reader::open_session(file, Mode::Strict) {
        Ok(s) => (
            json!({
                "ok": true,
                "file": file,
                "version": s.tree.header().version,
                "entryCount": s.tree.len(),
                "leafCount": s.tree.leaves().count(),
                "tornTail": s.torn_tail.is_some(),
                "tornTailAt": s.torn_tail.map(convert::torn_tail),
            }),
            format!(
                "{}: ok · version {} · {} entries{}",
                file.display(),
                s.tree.header().version,
                s.tree.len(),
                s.torn_tail.map_or(String::new(), |t| format!(
                    " · torn tail at line {} (byte {})",
                    t.line, t.offset
                ))
            ),
            Exit::Ok,
        ),
        Err(e) => match &e {
            OpenError::Corrupt { corruption: c, .. } => (
                json!({
                    "ok": false,
                    "file": file,
                    "kind": c.kind,
                    "line": c.line,
                    "offset": c.offset,
                    "id": c.id,
                    "message": c.message,
                }),
                e.to_string(),
                Exit::Corrupt,
            ),
            _ => return Err(e.into()),
        },
    };
    if args.json {
        serde_json::to_writer(&mut *out, &report).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{text}")?;
    }
    Ok(exit)
}
