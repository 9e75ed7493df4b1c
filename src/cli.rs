//! The command line: subcommands over the same core and storage the daemon uses.
//! Human-readable output by default, `--json` for machines. Exit codes: 0 success,
//! 2 usage or I/O error, 3 corrupt session file; the write subcommands (in
//! [`crate::cli_write`]) add 4 conflict and 5 busy.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::{Value, json};
use thiserror::Error;

use crate::context_json::ContextJson;
use crate::core::explain::{self, Explanation, Reason};
use crate::core::format::EntryKind;
use crate::core::preview;
use crate::core::projection::{self, Projection};
use crate::core::render::{self, LineSource, RenderError};
use crate::core::tree::{Mode, NodeIdx, Tree};
use crate::storage::reader::{self, FileLines, OpenError, OpenedSession};

/// Exit codes of every subcommand, shown under `--help`.
const EXIT_CODES: &str = "Exit codes: 0 ok; 2 usage, I/O, unknown id or invalid entry; 3 corrupt session \
file (nothing written; see `salvage`); 4 conflict (stale --expected-leaf, id taken, file changed); \
5 retention lost (compact --require-retention); 6 pi itself would fail to compact this session; \
7 busy (a writer is mid-line or holds the lock; retry)";

/// Inspect pi coding-agent sessions (the tree, what the model sees and why), write to them
/// safely, and serve them to editors (`sessiond serve`).
#[derive(Debug, Parser)]
#[command(name = "sessiond", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// Log filter for stderr (e.g. `info`, `sessiond=debug`); defaults to `$SESSIOND_LOG`, then `warn`.
    #[arg(long, global = true)]
    pub log: Option<String>,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print what the model sees at a leaf (pi's buildSessionContext).
    Context {
        /// The pi session file (JSONL).
        file: PathBuf,
        /// Leaf entry id (default: the last entry in the file).
        #[arg(long)]
        leaf: Option<String>,
        /// Print `{messages, thinkingLevel, model}` as pi computes them, plus entryIds,
        /// messageEntryIds, leafId, diagnostics and tornTail.
        #[arg(long)]
        json: bool,
        /// Open a corrupt file read-only the way pi does (skip bad lines, orphans as roots).
        #[arg(long)]
        allow_corrupt: bool,
    },
    /// Print the session tree with labels, the name, leaves and the default leaf.
    Tree {
        /// The pi session file (JSONL).
        file: PathBuf,
        /// Print the tree as JSON (flat nodes with parent and child ids).
        #[arg(long)]
        json: bool,
        /// Open a corrupt file read-only the way pi does (skip bad lines, orphans as roots).
        #[arg(long)]
        allow_corrupt: bool,
    },
    /// Explain whether an entry reaches the model at a leaf, and why not.
    Explain {
        /// The pi session file (JSONL).
        file: PathBuf,
        /// The entry to explain.
        entry_id: String,
        /// Leaf entry id (default: the last entry in the file).
        #[arg(long)]
        leaf: Option<String>,
        /// Print the explanation as JSON.
        #[arg(long)]
        json: bool,
        /// Open a corrupt file read-only the way pi does (skip bad lines, orphans as roots).
        #[arg(long)]
        allow_corrupt: bool,
    },
    /// Compact a leaf's path as pi does: summarize (embedded or --summary-file), check retention, append.
    Compact(crate::cli_compact::CompactArgs),
    /// Check a session file: exit 0 when clean (a torn tail is reported, not fatal), 3 when corrupt.
    Check {
        /// The pi session file (JSONL).
        file: PathBuf,
        /// Print the result as JSON (`{"ok", "tornTail", ...}` or `{"kind", "line", "offset", ...}`).
        #[arg(long)]
        json: bool,
    },
    /// Fork the path from the root to an entry into a new session file (pi's fork).
    Fork(crate::cli_write::ForkArgs),
    /// Set or clear the label of an entry.
    Label(crate::cli_write::LabelArgs),
    /// Name the session.
    Name(crate::cli_write::NameArgs),
    /// Start a new branch at an entry, with a summary of the branch being left.
    Branch(crate::cli_write::BranchArgs),
    /// Append an entry given as JSON (id, parentId and timestamp are filled in).
    Append(crate::cli_write::AppendArgs),
    /// Write the readable entries of a corrupt session into a new file; the original is untouched.
    Salvage(crate::cli_write::SalvageArgs),
    /// Serve sessions as a daemon: JSON-RPC over stdin/stdout with LSP framing (see protocol/).
    Serve {
        /// A directory sessions may be read from (repeatable); default: pi's sessions directory.
        #[arg(long = "root", value_name = "DIR")]
        roots: Vec<PathBuf>,
    },
}

/// Errors a command reports on stderr; each maps to an exit code.
#[derive(Debug, Error)]
pub enum CliError {
    /// The file could not be read (exit 2) or is corrupt (exit 3).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// An id argument names no entry (exit 2).
    #[error("{}: unknown {what} {}", path.display(), shorten(id))]
    UnknownEntry {
        /// The session file.
        path: PathBuf,
        /// The id as given.
        id: String,
        /// Which argument named it: `leaf id` or `entry id`.
        what: &'static str,
    },
    /// A line could not be read, or changed since the session was read.
    #[error("{}: {source}", path.display())]
    Render {
        /// The session file.
        path: PathBuf,
        /// The render failure.
        source: RenderError,
    },
    /// Writing to stdout failed.
    #[error("cannot write output: {0}")]
    Output(#[from] io::Error),
}

impl CliError {
    /// `{"kind", "message", ...}`: `kind` is `corrupt` (with the corruption's `corruption`
    /// object), `unknownEntry` (with `id`), `notAFile` or `io`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"message": self.to_string()});
        match self {
            CliError::Open(OpenError::Corrupt { corruption, .. }) => {
                v["kind"] = json!("corrupt");
                v["corruption"] = json!(corruption);
            }
            CliError::Open(OpenError::NotAFile { .. }) => v["kind"] = json!("notAFile"),
            CliError::UnknownEntry { id, .. } => {
                v["kind"] = json!("unknownEntry");
                v["id"] = json!(id);
            }
            _ => v["kind"] = json!("io"),
        }
        v
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Open(OpenError::Corrupt { .. }) => 3,
            _ => 2,
        }
    }
}

/// Runs a parsed command line, writing results to stdout.
pub fn run(cli: Cli) -> ExitCode {
    // Before stdout is locked below: the daemon writes protocol frames from its own thread.
    if let Command::Serve { roots } = &cli.command {
        let roots = roots.clone();
        return crate::server::serve(crate::server::ServeOptions { roots });
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let json = match &cli.command {
        Command::Context { json, .. }
        | Command::Tree { json, .. }
        | Command::Explain { json, .. } => *json,
        _ => false,
    };
    let result = match cli.command {
        Command::Context {
            file,
            leaf,
            json,
            allow_corrupt,
        } => context(&mut out, &file, leaf.as_deref(), json, allow_corrupt),
        Command::Tree {
            file,
            json,
            allow_corrupt,
        } => tree(&mut out, &file, json, allow_corrupt),
        Command::Explain {
            file,
            entry_id,
            leaf,
            json,
            allow_corrupt,
        } => explain_cmd(
            &mut out,
            &file,
            &entry_id,
            leaf.as_deref(),
            json,
            allow_corrupt,
        ),
        Command::Check { file, json } => return check(&mut out, &file, json),
        Command::Compact(args) => return crate::cli_compact::run(&mut out, args),
        Command::Fork(args) => return crate::cli_write::fork(args),
        Command::Label(args) => return crate::cli_write::label(args),
        Command::Name(args) => return crate::cli_write::name(args),
        Command::Branch(args) => return crate::cli_write::branch(args),
        Command::Append(args) => return crate::cli_write::append(args),
        Command::Salvage(args) => return crate::cli_write::salvage(args),
        Command::Serve { .. } => return ExitCode::SUCCESS,
    };
    finish(out, result, json)
}

/// Flushes the output and turns the result into the exit code. Errors go to stderr; with
/// `--json` they are also printed on stdout as `{"error": {"kind", "message", ...}}`, as the
/// write commands do.
fn finish(mut out: impl Write, result: Result<(), CliError>, json: bool) -> ExitCode {
    let result = result.and_then(|()| out.flush().map_err(CliError::from));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`| head`) is not an error.
        Err(CliError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sessiond: {e}");
            if json && !matches!(e, CliError::Output(_)) {
                let _ =
                    writeln!(out, "{}", json!({ "error": e.to_json() })).and_then(|()| out.flush());
            }
            ExitCode::from(e.exit_code())
        }
    }
}

pub(crate) fn open(
    file: &Path,
    allow_corrupt: bool,
) -> Result<(OpenedSession, FileLines), CliError> {
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
    Ok((session, lines))
}

/// The leaf named by `--leaf`, or the default leaf (the last entry) without one.
pub(crate) fn resolve(
    tree: &Tree,
    file: &Path,
    id: Option<&str>,
) -> Result<Option<NodeIdx>, CliError> {
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

/// An id for an error message, cut to 80 characters (a pasted blob should not flood stderr).
fn shorten(id: &str) -> String {
    match id.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &id[..at]),
        None => id.to_owned(),
    }
}

fn context(
    out: &mut impl Write,
    file: &Path,
    leaf: Option<&str>,
    json: bool,
    allow_corrupt: bool,
) -> Result<(), CliError> {
    let (session, lines) = open(file, allow_corrupt)?;
    let tree = &session.tree;
    let leaf = resolve(tree, file, leaf)?;
    let proj = projection::project(tree, leaf);
    let render_err = |source| CliError::Render {
        path: file.to_owned(),
        source,
    };
    if json {
        write_context_json(out, tree, &proj, &lines, &session, file)
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
        render::for_each_message(tree, &proj, &lines, |m| {
            let value: Value = serde_json::from_str(m.message.get()).unwrap_or(Value::Null);
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
        write_problems(out, &session, &proj)?;
        Ok(())
    }
}

/// Writes the context document (see [`crate::context_json`]), streaming its messages.
fn write_context_json(
    out: &mut impl Write,
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
    out: &mut impl Write,
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

fn tree(
    out: &mut impl Write,
    file: &Path,
    json: bool,
    allow_corrupt: bool,
) -> Result<(), CliError> {
    let (session, lines) = open(file, allow_corrupt)?;
    let tree = &session.tree;
    let default_leaf = tree.default_leaf();
    let id = |n: NodeIdx| tree.node(n).entry.id.as_str();
    // One read per entry for previews and timestamps.
    let details = |n: NodeIdx| -> (String, Value) {
        let line = lines.line(tree.node(n).entry.span).ok();
        let value: Value = line
            .and_then(|l| serde_json::from_slice(&l).ok())
            .unwrap_or(Value::Null);
        (
            preview::entry_preview(&value),
            value.get("timestamp").cloned().unwrap_or(Value::Null),
        )
    };
    if json {
        let nodes: Vec<Value> = tree
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let (preview, timestamp) = details(i as NodeIdx);
                let e = &node.entry;
                let mut v = json!({
                    "id": e.id.as_str(),
                    "parentId": node.parent.map(id),
                    "type": e.kind.type_name(),
                    "timestamp": timestamp,
                    "preview": preview,
                    "childCount": node.children.len(),
                    "children": node.children.iter().map(|&c| id(c)).collect::<Vec<_>>(),
                });
                if let Some(role) = e.kind.role() {
                    v["role"] = json!(role.as_str());
                }
                if let Some(label) = tree.label_of(e.id.as_str()) {
                    v["label"] = json!(&*label.text);
                }
                v
            })
            .collect();
        let doc = json!({
            "sessionId": tree.header().id,
            "header": serde_json::from_str::<Value>(tree.header().raw.get()).unwrap_or(Value::Null),
            "name": tree.name(),
            "entryCount": tree.len(),
            "roots": tree.roots().iter().map(|&r| id(r)).collect::<Vec<_>>(),
            "leaves": tree.leaves().map(id).collect::<Vec<_>>(),
            "defaultLeafId": default_leaf.map(id),
            "tornTail": session.torn_tail,
            "diagnostics": tree.diagnostics(),
            "nodes": nodes,
        });
        serde_json::to_writer(&mut *out, &doc).map_err(io::Error::from)?;
        writeln!(out)?;
        return Ok(());
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
            details(n).0
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
    Ok(())
}

fn explain_cmd(
    out: &mut impl Write,
    file: &Path,
    entry_id: &str,
    leaf: Option<&str>,
    json: bool,
    allow_corrupt: bool,
) -> Result<(), CliError> {
    let (session, _lines) = open(file, allow_corrupt)?;
    let tree = &session.tree;
    let target = find(tree, file, entry_id, "entry id")?;
    let leaf = resolve(tree, file, leaf)?;
    let proj = projection::project(tree, leaf);
    let ex = explain::explain(tree, &proj, target);
    if json {
        serde_json::to_writer(&mut *out, &ex).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", describe(&ex))?;
    }
    Ok(())
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

fn check(out: &mut impl Write, file: &Path, json: bool) -> ExitCode {
    let result = reader::open_session(file, Mode::Strict);
    let (report, code) = match &result {
        Ok(s) => (
            json!({
                "ok": true,
                "file": file,
                "version": s.tree.header().version,
                "entryCount": s.tree.len(),
                "leafCount": s.tree.leaves().count(),
                "tornTail": s.torn_tail.is_some(),
                "tornTailAt": s.torn_tail,
            }),
            0u8,
        ),
        Err(OpenError::Corrupt { corruption: c, .. }) => (
            json!({
                "ok": false,
                "file": file,
                "kind": c.kind,
                "line": c.line,
                "offset": c.offset,
                "id": c.id,
                "message": c.message,
            }),
            3,
        ),
        Err(e) => {
            eprintln!("sessiond: {e}");
            return ExitCode::from(2);
        }
    };
    let written = if json {
        serde_json::to_writer(&mut *out, &report)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        match &result {
            Ok(s) => writeln!(
                out,
                "{}: ok · version {} · {} entries{}",
                file.display(),
                s.tree.header().version,
                s.tree.len(),
                s.torn_tail.map_or(String::new(), |t| format!(
                    " · torn tail at line {} (byte {})",
                    t.line, t.offset
                ))
            ),
            Err(e) => writeln!(out, "{e}"),
        }
    };
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            eprintln!("sessiond: cannot write output: {e}");
            ExitCode::from(2)
        }
        _ => ExitCode::from(code),
    }
}
