//! The reading subcommands: `context`, `tree`, `explain`, `check`. None of them changes a
//! file; each opens the session (strictly, or leniently with `--allow-corrupt`), then prints.

use crate::view::convert;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{Value, json};

use super::Sink;
use super::error::{CliError, Exit};
use super::open::{
    Ask, Opened, dialect_of, exiting_with, find, lines_of, open, resolve, with_lines,
};
use crate::core::describe::Describe;
use crate::core::diagnostics::{CorruptionKind, Diagnostic};
use crate::core::lines::LineFormat;
use crate::core::preview::one_line;
use crate::core::tree::TreeEntry;
use crate::core::tree::{Mode, NodeIdx};
use crate::dialect::Dialect;
use crate::dialect::claude::Claude;
use crate::dialect::codex::Codex;
use crate::dialect::pi::explain;
use crate::dialect::pi::incremental::{Following, MessagesAhead};
use crate::dialect::pi::preview;
use crate::dialect::pi::projection::{self, Projection};
use crate::dialect::pi::render::{self, LineSource};
use crate::dialect::pi::{Pi, Tree};
use crate::storage::reader::{self, FileLines, OpenError, OpenedSession, TornTail};
use crate::view::context_json::{ContextJson, MESSAGES_OPEN};
use crate::view::tree::DefaultLeaf;

/// `sessiond context`.
#[derive(Debug, Args)]
pub struct ContextArgs {
    /// The session file: a pi session, a Claude Code transcript or a Codex rollout (JSONL).
    pub file: PathBuf,
    /// Leaf entry id, or a unique prefix of one (default: the resume leaf: pi's last entry; the line `claude --resume` continues from).
    #[arg(long)]
    pub leaf: Option<String>,
    /// Print the context as JSON: pi's `{messages, thinkingLevel, model}` plus entryIds,
    /// messageEntryIds, leafId, diagnostics and tornTail; for a Claude Code transcript the
    /// `messages` Claude Code sends, with model, midConversationSystem, sendTime (what Claude
    /// adds at send time), dropped and notRendered.
    #[arg(long)]
    pub json: bool,
    /// Claude Code transcripts: the model the request goes to (attachments and thinking blocks
    /// depend on it); default: the session's model.
    #[arg(long)]
    pub model: Option<String>,
    /// Open a corrupt file read-only: lines that are not JSON are skipped, other problems read
    /// past, and each listed with what its agent (pi, Claude Code, Codex) does there.
    #[arg(long)]
    pub allow_corrupt: bool,
}

/// `sessiond tree`.
#[derive(Debug, Args)]
pub struct TreeArgs {
    /// The session file: a pi session, a Claude Code transcript or a Codex rollout (JSONL).
    pub file: PathBuf,
    /// Print every entry. By default runs of entries with one child each are folded to their
    /// landmarks: branch points and branch starts, leaves, the resume leaf, labels,
    /// compactions, branch summaries and names.
    #[arg(long)]
    pub full: bool,
    /// Print the tree as JSON (every entry as a flat node with parent and child ids).
    #[arg(long)]
    pub json: bool,
    /// Open a corrupt file read-only: lines that are not JSON are skipped, other problems read
    /// past, and each listed with what its agent (pi, Claude Code, Codex) does there.
    #[arg(long)]
    pub allow_corrupt: bool,
}

/// `sessiond explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The session file: a pi session, a Claude Code transcript or a Codex rollout (JSONL).
    pub file: PathBuf,
    /// The entry to explain: its id or a unique prefix of it (a Claude Code transcript's line
    /// without a uuid: `line:N`).
    pub entry_id: String,
    /// Leaf entry id, or a unique prefix of one (default: the resume leaf: pi's last entry; the line `claude --resume` continues from).
    #[arg(long)]
    pub leaf: Option<String>,
    /// Claude Code transcripts: the model the request goes to; default: the session's.
    #[arg(long)]
    pub model: Option<String>,
    /// Print the explanation as JSON.
    #[arg(long)]
    pub json: bool,
    /// Open a corrupt file read-only: lines that are not JSON are skipped, other problems read
    /// past, and each listed with what its agent (pi, Claude Code, Codex) does there.
    #[arg(long)]
    pub allow_corrupt: bool,
}

/// `sessiond check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The session file: a pi session, a Claude Code transcript or a Codex rollout (JSONL).
    pub file: PathBuf,
    /// Print the result as JSON (`{"ok", "format", "tornTail", ...}`, or for a corrupt file
    /// `{"ok": false, "format", "kind", "line", "offset", "salvageable", ...}`).
    #[arg(long)]
    pub json: bool,
}

/// [`open`], with the projection at the default leaf when the reading could work it out on
/// the way ([`Following`]: `Some` when the entries read form that path as they were read, a
/// session that grew as one chain; either way what [`projection::project`] gives).
fn open_projected(
    file: &Path,
    allow_corrupt: bool,
) -> Result<(Opened, Option<Projection>), CliError> {
    let mut follow = Following::new();
    let session = reader::open_session_visiting::<Pi>(
        file,
        Mode::allowing_corrupt(allow_corrupt),
        &mut |tree, node, _| follow.push(tree, node),
    )?;
    let projection = follow.finish(&session.tree);
    Ok((with_lines(file, session)?, projection))
}

/// [`open_projected`], writing the messages of that projection to `out` on the way
/// ([`MessagesAhead`]: the inside of a context document's `messages` array, joined by commas).
/// The flag is true when `out` then holds exactly the messages of the projection returned;
/// false when there is none, or the writing ahead was given up (a compaction, a branch, a
/// message that needs more than its own line...): the caller drops what `out` holds then.
/// Errors: the open's (an error writing `out` only gives the writing up).
pub(crate) fn open_rendering(
    file: &Path,
    mode: Mode,
    out: &mut dyn Write,
) -> Result<(OpenedSession<Pi>, Option<Projection>, bool), OpenError> {
    let mut follow = Following::new();
    let mut ahead = MessagesAhead::new(out);
    let session = reader::open_session_visiting::<Pi>(file, mode, &mut |tree, node, line| {
        follow.push(tree, node);
        ahead.followed(&follow, tree, line);
    })?;
    let projection = follow.finish(&session.tree);
    let holds = projection.as_ref().is_some_and(|p| ahead.holds(p));
    Ok((session, projection, holds))
}

/// Runs `sessiond context`.
pub fn context(out: &mut dyn Sink, args: &ContextArgs) -> Result<Exit, CliError> {
    let ask = Ask {
        file: &args.file,
        leaf: args.leaf.as_deref(),
        json: args.json,
        allow_corrupt: args.allow_corrupt,
        model: args.model.as_deref(),
    };
    match dialect_of(&args.file)? {
        Dialect::Codex => {
            no_model(ask.model)?;
            return super::codex::context(out, &ask);
        }
        Dialect::Claude => return super::transcript::context(out, &ask),
        Dialect::Pi => no_model(ask.model)?,
    }
    if args.json
        && args.leaf.is_none()
        && let Some(exit) = context_json_written_ahead(out, args)?
    {
        return Ok(exit);
    }
    // At the default leaf, the projection is worked out while the session is read.
    let (opened, projection) = match args.leaf {
        None => open_projected(&args.file, args.allow_corrupt)?,
        Some(_) => (open(&args.file, args.allow_corrupt, "context")?, None),
    };
    let exit = print_projected(out, &opened, args, projection);
    exiting_with(opened);
    exit
}

/// `sessiond context --json` at the default leaf into `document`, the command's document (not
/// printed yet): the messages are written into it while the session is read
/// ([`open_rendering`]), so that a session that grew as one chain (the common
/// case) is read once. Where that was given up, `document` is emptied and the context is
/// printed from the session as read, as at any other leaf. `None` when `out` is not a
/// document (standard output: nothing is written then).
fn context_json_written_ahead(
    out: &mut dyn Sink,
    args: &ContextArgs,
) -> Result<Option<Exit>, CliError> {
    let Some(document) = out.document()? else {
        return Ok(None);
    };
    document.write_all(MESSAGES_OPEN)?;
    let (session, projection, holds) = open_rendering(
        &args.file,
        Mode::allowing_corrupt(args.allow_corrupt),
        document,
    )?;
    let opened = with_lines(&args.file, session)?;
    let exit = match &projection {
        Some(proj) if holds => {
            let Opened { session, lines } = &opened;
            ContextJson::new(&session.tree, proj, lines, session.torn_tail)
                .write_after_messages(document)
                .map_err(|e| CliError::Output(e.into()))?;
            writeln!(document)?;
            Ok(Exit::Ok)
        }
        _ => {
            document.discard()?;
            print_projected(out, &opened, args, projection)
        }
    };
    exiting_with(opened);
    exit.map(Some)
}

/// Prints the context of a session already read (apart from [`context`] so that a test can
/// change the file between the read and the printing).
pub fn print_context(
    out: &mut dyn Sink,
    opened: &Opened,
    args: &ContextArgs,
) -> Result<Exit, CliError> {
    print_projected(out, opened, args, None)
}

/// [`print_context`], with `projected`: the projection at the leaf `args` names, when the
/// reading worked it out already.
fn print_projected(
    out: &mut dyn Sink,
    opened: &Opened,
    args: &ContextArgs,
    projected: Option<Projection>,
) -> Result<Exit, CliError> {
    let Opened { session, lines } = opened;
    let file = args.file.as_path();
    let tree = &session.tree;
    let leaf = resolve(tree, file, args.leaf.as_deref())?;
    let proj = projected
        .filter(|p| p.leaf == leaf)
        .unwrap_or_else(|| projection::project(tree, leaf));
    let render_err = |source| CliError::Render {
        path: file.to_owned(),
        source,
    };
    if args.json {
        // The document is final text ([`ContextJson::write_to`]).
        write_context_json(out.final_text()?, tree, &proj, lines, session, file)?;
    } else {
        // A string's text; any other value's JSON.
        let text = |r: &crate::dialect::pi::format::SharedRaw| {
            crate::dialect::pi::format::raw_str(r).map_or(r.get().to_owned(), |s| s.into_owned())
        };
        let model = proj.model.as_ref().map_or("none".to_owned(), |m| {
            let part = |r: &Option<crate::dialect::pi::format::SharedRaw>| {
                r.as_ref().map_or(String::new(), text)
            };
            format!("{}/{}", part(&m.provider), part(&m.model_id))
        });
        let thinking = proj
            .thinking_level
            .as_ref()
            .map_or("(unset)".to_owned(), text);
        writeln!(
            out,
            "session {} · leaf {} · {} from {} · model {model} · thinking {thinking}",
            tree.header().id,
            leaf.map_or("(none)".to_owned(), |l| tree.node(l).entry.id.to_string()),
            crate::view::tree::count(
                proj.items
                    .iter()
                    .map(|i| crate::dialect::pi::explain::message_count(i.contribution))
                    .sum::<usize>(),
                "message",
                "messages"
            ),
            crate::view::tree::count(proj.items.len(), "context entry", "context entries"),
        )?;
        // Numbered from 1, as `explain` and the editors number messages.
        let mut index = 1usize;
        render::for_each_message(tree, &proj, lines, |m| {
            let value =
                crate::js::jsstr::parse_value(m.message.get().as_bytes()).unwrap_or(Value::Null);
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
        write_silent(out, tree, &proj)?;
        write_problems(
            out,
            session.torn_tail,
            session.tree.diagnostics(),
            &proj.diagnostics,
        )?;
    }
    Ok(Exit::Ok)
}

/// Writes the context document (see [`crate::view::context_json`]), rendering messages as it goes.
fn write_context_json(
    out: &mut dyn Write,
    tree: &Tree,
    proj: &Projection,
    lines: &(dyn LineSource + Sync),
    session: &OpenedSession<Pi>,
    file: &Path,
) -> Result<(), CliError> {
    let doc = ContextJson::new(tree, proj, lines, session.torn_tail);
    match doc.write_to(&mut *out) {
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

/// The context entries that add no message (a setting, a label, extension state...), so the
/// count in the header adds up; `explain` says what each one does.
fn write_silent(out: &mut dyn Write, tree: &Tree, proj: &Projection) -> io::Result<()> {
    /// Named one by one up to this many; the rest are counted.
    const NAMED: usize = 8;
    let silent: Vec<String> = proj
        .items
        .iter()
        .filter(|i| explain::message_count(i.contribution) == 0)
        .map(|i| {
            let e = &tree.node(i.node).entry;
            format!("{} {}", e.id, e.kind.type_name())
        })
        .collect();
    if silent.is_empty() {
        return Ok(());
    }
    let mut named = silent[..silent.len().min(NAMED)].join(", ");
    if silent.len() > NAMED {
        named.push_str(&format!(" and {} more", silent.len() - NAMED));
    }
    writeln!(
        out,
        "{} without a message: {named} (`sessiond explain FILE ID` says what each does)",
        crate::view::tree::count(silent.len(), "context entry", "context entries"),
    )
}

/// The torn tail and the problems of the session as read (a lenient read's corrupt lines)
/// and of the projection (`diagnostics`: tool pairing), one sentence each.
fn write_problems(
    out: &mut dyn Write,
    torn_tail: Option<TornTail>,
    read: &[Diagnostic],
    diagnostics: &[Diagnostic],
) -> io::Result<()> {
    if let Some(t) = &torn_tail {
        writeln!(
            out,
            "torn tail: line {} (byte {}, {}) is incomplete and left out; a writer may still be \
             writing it",
            t.line,
            t.offset,
            crate::view::tree::count(t.len as usize, "byte", "bytes"),
        )?;
    }
    for d in read.iter().chain(diagnostics) {
        writeln!(out, "problem: {d}")?;
    }
    Ok(())
}

/// Runs `sessiond tree`, for any format sessiond reads.
pub fn tree(out: &mut dyn Write, args: &TreeArgs) -> Result<Exit, CliError> {
    let file = args.file.as_path();
    let mode = Mode::allowing_corrupt(args.allow_corrupt);
    match dialect_of(file)? {
        Dialect::Pi => {
            let Opened { session, lines } = open(file, args.allow_corrupt, "tree")?;
            let tree = &session.tree;
            let header = &tree.header();
            let head = TreeHead {
                format: Dialect::Pi,
                session_id: Some(header.id.clone()),
                header: crate::js::jsstr::parse_value(header.raw.get().as_bytes())
                    .unwrap_or(Value::Null),
                mark: "resume leaf",
                leaf_line: current_leaf_line(tree),
                extra: json!({}),
                footer: String::new(),
            };
            print_tree(out, args, &session, &lines, head)
        }
        Dialect::Claude => {
            let session = reader::open_session::<Claude>(file, mode)?;
            let lines = lines_of(file)?;
            let asides = session.tree.ext().asides();
            let bookkeeping: Vec<Value> = asides
                .iter()
                .map(|a| json!({"type": a.kind.as_str(), "line": a.span.line}))
                .collect();
            let subagent = crate::dialect::claude::subagent::agent_id(file).is_some();
            let leaf_line = match Describe::default_leaf(&session.tree) {
                Some(n) if subagent => format!(
                    "last line {}: a subagent's transcript is not resumed; the leaf read without \
                     --leaf",
                    session.tree.node(n).entry.id
                ),
                Some(n) => format!(
                    "resume leaf {}: the leaf `claude --resume` continues from, and the leaf read \
                     without --leaf",
                    session.tree.node(n).entry.id
                ),
                None => "no leaf to continue: no message line yet, or an interactive /rewind \
                         cleared it"
                    .to_owned(),
            };
            let links = super::transcript::links(file, &session.tree);
            let mut extra = links.json;
            extra["bookkeeping"] = json!(bookkeeping);
            let mut footer = links.lines;
            footer.push(bookkeeping_line(asides));
            let head = TreeHead {
                format: Dialect::Claude,
                session_id: convert::claude_session_id(file),
                header: Value::Null,
                mark: if subagent { "last line" } else { "resume leaf" },
                leaf_line,
                extra,
                footer: footer
                    .into_iter()
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            print_tree(out, args, &session, &lines, head)
        }
        Dialect::Codex => {
            // The thread's files as one tree: forks and revert segments are its branches,
            // hanging from the line their prefix ends at (their lines named `<tag>:<id>`).
            let session = reader::open_session::<Codex>(file, mode)?;
            let files = super::codex::thread(file, mode == Mode::Lenient)?;
            let tree = &files.tree;
            let thread = crate::dialect::codex::report::report(&files.index, file, Some(&files));
            let last = files.last_node(files.own);
            let mut leaf_line = match last {
                Some(n) => format!(
                    "last line {}: where `codex resume` continues this file, and the leaf read \
                     without --leaf",
                    tree.node(n).entry.id
                ),
                None => "no lines yet".to_owned(),
            };
            let others = crate::dialect::codex::report::file_lines(&thread.json);
            if !others.is_empty() {
                leaf_line.push_str(&format!(
                    "\n{} of the thread beside this one:\n  {}",
                    crate::view::tree::count(others.len(), "other file", "other files"),
                    others.join("\n  ")
                ));
            }
            let head = TreeHead {
                format: Dialect::Codex,
                session_id: thread.thread_id.clone(),
                header: Value::Null,
                mark: "last line",
                leaf_line,
                footer: thread.lines.join("\n"),
                extra: thread.json,
            };
            print_tree_of(
                out,
                args,
                tree,
                &files.lines(),
                (last, session.torn_tail),
                head,
            )
        }
    }
}

/// What `tree` prints about a session besides its entries, which differs by format.
struct TreeHead {
    format: Dialect,
    session_id: Option<String>,
    /// The header line as JSON (`null` for a format without one).
    header: Value,
    /// The default leaf's mark in a row.
    mark: &'static str,
    /// The sentence that says which entry is the default leaf and what it is for.
    leaf_line: String,
    /// More fields of the JSON document.
    extra: Value,
    /// A last line of the human report (empty: none).
    footer: String,
}

/// Prints `session`'s tree: as JSON (every entry as a flat node with parent and child ids) or
/// folded for a person (see [`crate::view::tree`]).
fn print_tree<F: LineFormat>(
    out: &mut dyn Write,
    args: &TreeArgs,
    session: &OpenedSession<F>,
    lines: &FileLines,
    head: TreeHead,
) -> Result<Exit, CliError>
where
    F::Entry: Describe,
{
    let tree = &session.tree;
    print_tree_of(
        out,
        args,
        tree,
        lines,
        (F::Entry::default_leaf(tree), session.torn_tail),
        head,
    )
}

/// [`print_tree`] of any tree, its lines read through `lines`, with its default leaf and the
/// torn tail of its file (a Codex thread's files as one tree).
fn print_tree_of<E: Describe>(
    out: &mut dyn Write,
    args: &TreeArgs,
    tree: &crate::core::tree::Tree<E>,
    lines: &dyn crate::core::source::LineSource,
    (default_leaf, torn_tail): (Option<NodeIdx>, Option<TornTail>),
    head: TreeHead,
) -> Result<Exit, CliError> {
    let id = |n: NodeIdx| tree.node(n).entry.id().as_str();
    if args.json {
        // The daemon's node shape, from the one function that renders a node.
        let nodes: Vec<_> = (0..tree.len())
            .map(|i| convert::node(tree, lines, i as NodeIdx, true))
            .collect();
        let mut doc = json!({
            "format": head.format,
            "sessionId": head.session_id,
            "header": head.header,
            "name": tree.name(),
            "entryCount": tree.len(),
            "roots": tree.roots().iter().map(|&r| id(r)).collect::<Vec<_>>(),
            "leaves": tree.leaves().map(id).collect::<Vec<_>>(),
            "defaultLeafId": default_leaf.map(id),
            "tornTail": torn_tail.map(convert::torn_tail),
            "diagnostics": tree.diagnostics(),
            "nodes": nodes,
        });
        if let (Value::Object(doc), Value::Object(extra)) = (&mut doc, head.extra) {
            doc.extend(extra);
        }
        serde_json::to_writer(&mut *out, &doc).map_err(io::Error::from)?;
        writeln!(out)?;
        return Ok(Exit::Ok);
    }
    let leaves = tree.leaves().count();
    let agent = match head.format {
        // pi's sessions were the only ones for long: their first line is unchanged.
        Dialect::Pi => String::new(),
        other => format!("{} ", other.agent()),
    };
    writeln!(
        out,
        "{agent}session {}{} · {} · {}",
        head.session_id.as_deref().unwrap_or("(no id)"),
        tree.name()
            .map_or(String::new(), |n| format!(" \"{}\"", one_line(n))),
        crate::view::tree::count(tree.len(), "entry", "entries"),
        crate::view::tree::count(leaves, "leaf", "leaves"),
    )?;
    writeln!(out, "{}", head.leaf_line)?;
    let default = DefaultLeaf {
        node: default_leaf,
        mark: head.mark,
    };
    crate::view::tree::print(out, tree, lines, args.full, default)?;
    if !head.footer.is_empty() {
        writeln!(out, "{}", head.footer)?;
    }
    write_problems(out, torn_tail, tree.diagnostics(), &[])?;
    Ok(Exit::Ok)
}

/// The bookkeeping lines of a transcript in one line: how many, of which types.
fn bookkeeping_line(asides: &[crate::dialect::claude::format::Aside]) -> String {
    if asides.is_empty() {
        return String::new();
    }
    let summary = crate::view::graph::fold_summary(asides.iter().map(|a| a.kind.as_str()));
    format!(
        "{} (never sent to the model, not tree nodes): {summary}",
        crate::view::tree::count(asides.len(), "bookkeeping line", "bookkeeping lines")
    )
}

/// The line that says which entry is the resume leaf and what it is for.
fn current_leaf_line(tree: &Tree) -> String {
    match tree.default_leaf() {
        Some(n) => format!(
            "resume leaf {}: the file's last entry, where pi resumes, the leaf read without \
             --leaf, and the --expected-leaf a write needs",
            tree.node(n).entry.id
        ),
        None => "no entries yet: a write needs --expected-leaf null".to_owned(),
    }
}

/// `--model` is for Claude Code transcripts (pi's model is the session's own).
fn no_model(model: Option<&str>) -> Result<(), CliError> {
    match model {
        None => Ok(()),
        Some(_) => Err(CliError::Argument {
            arg: "--model",
            detail: "applies to Claude Code transcripts only: a pi session's model is the one \
                     its path sets"
                .to_owned(),
        }),
    }
}

/// Runs `sessiond explain`.
pub fn explain(out: &mut dyn Write, args: &ExplainArgs) -> Result<Exit, CliError> {
    let ask = Ask {
        file: &args.file,
        leaf: args.leaf.as_deref(),
        json: args.json,
        allow_corrupt: args.allow_corrupt,
        model: args.model.as_deref(),
    };
    match dialect_of(&args.file)? {
        Dialect::Codex => {
            no_model(ask.model)?;
            return super::codex::explain(out, &ask, &args.entry_id);
        }
        Dialect::Claude => return super::transcript::explain(out, &ask, &args.entry_id),
        Dialect::Pi => no_model(ask.model)?,
    }
    let Opened { session, lines } = open(&args.file, args.allow_corrupt, "explain")?;
    let file = args.file.as_path();
    let tree = &session.tree;
    let target = find(tree, file, &args.entry_id, "entry id")?;
    let leaf = resolve(tree, file, args.leaf.as_deref())?;
    let proj = projection::project(tree, leaf);
    let ex = explain::explain_with_audit(tree, &proj, target, &lines).map_err(
        |source| match source {
            crate::dialect::pi::compaction::CompactionError::Render(source) => CliError::Render {
                path: file.to_owned(),
                source,
            },
            source => CliError::Compact(crate::compact::CompactError::Compaction {
                path: file.to_owned(),
                source,
            }),
        },
    )?;
    if args.json {
        serde_json::to_writer(&mut *out, &ex).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", ex.text)?;
    }
    Ok(Exit::Ok)
}

/// Runs `sessiond check`: a report for a clean or corrupt file ([`Exit::Corrupt`]), of any
/// format sessiond reads (`format` says which); an unreadable file is an error. A corrupt file
/// is `salvageable` when `salvage` can make a session of it: a pi session with a header (the
/// other formats are read only).
pub fn check(out: &mut dyn Write, args: &CheckArgs) -> Result<Exit, CliError> {
    let file = args.file.as_path();
    let (format, read) = match dialect_of(file) {
        Ok(d) => (Some(d), check_read(file, d)),
        Err(e) => (None, Err(e)),
    };
    let (report, text, exit) = match read {
        Ok((report, text)) => (report, format!("{}: ok · {text}", file.display()), Exit::Ok),
        Err(CliError::Open(e @ OpenError::Corrupt { .. })) => {
            let OpenError::Corrupt { corruption: c, .. } = &e else {
                return Err(e.into());
            };
            // A file that is no session at all names no format, whichever reader refused it.
            let format = format.filter(|_| {
                !matches!(
                    c.kind,
                    CorruptionKind::EmptyFile
                        | CorruptionKind::MissingHeader
                        | CorruptionKind::UnknownFormat
                )
            });
            let hint = super::error::salvage_hint(Some(c), super::error::Reporter::Check(format));
            (
                json!({
                    "ok": false,
                    "file": file,
                    "format": format,
                    "kind": c.kind,
                    "line": c.line,
                    "offset": c.offset,
                    "id": c.id,
                    "message": c.message,
                    "salvageable": c.kind.salvageable() && format.is_some_and(Dialect::writable),
                }),
                format!("{e}{hint}"),
                Exit::Corrupt,
            )
        }
        Err(e) => return Err(e),
    };
    if args.json {
        serde_json::to_writer(&mut *out, &report).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{text}")?;
    }
    Ok(exit)
}

/// `check`'s strict read of `file` as a `d` file: the report and text of a file that reads.
fn check_read(file: &Path, d: Dialect) -> Result<(Value, String), CliError> {
    match d {
        Dialect::Pi => {
            let s = reader::open_session::<Pi>(file, Mode::Strict)?;
            let tree = &s.tree;
            let id = |n: NodeIdx| tree.node(n).entry.id.as_str();
            let current = tree.default_leaf().map(id);
            let mut checked = checked(file, d, &s, "resume leaf");
            // The file's last entry: what a write's --expected-leaf must name (pi's default
            // leaf, the same entry).
            checked.0["currentLeafId"] = json!(current);
            checked.0["version"] = json!(tree.header().version);
            checked.1 = format!("version {} · {}", tree.header().version, checked.1);
            exiting_with(s);
            Ok(checked)
        }
        Dialect::Claude => {
            let s = reader::open_session::<Claude>(file, Mode::Strict)?;
            let mut checked = checked(file, d, &s, "resume leaf");
            checked.1 = format!("Claude Code transcript · {}", checked.1);
            checked.0["bookkeepingLines"] = json!(s.tree.ext().asides().len());
            checked.0["sessionId"] = json!(convert::claude_session_id(file));
            exiting_with(s);
            Ok(checked)
        }
        Dialect::Codex => {
            let s = reader::open_session::<Codex>(file, Mode::Strict)?;
            let mut checked = checked(file, d, &s, "last line");
            checked.1 = format!("Codex rollout · {}", checked.1);
            let thread = super::codex::thread_of(file);
            checked.0["sessionId"] = json!(thread.thread_id);
            checked.0["unknownLineTypes"] = json!(super::codex::unknown_types(&s.tree));
            exiting_with(s);
            Ok(checked)
        }
    }
}

/// `check`'s report of a file that read cleanly (perhaps with a torn tail), in any format:
/// the JSON document and the text after `FILE: ok · `, which calls the default leaf `leaf`.
fn checked<F: LineFormat>(
    file: &Path,
    format: Dialect,
    s: &OpenedSession<F>,
    leaf: &str,
) -> (Value, String)
where
    F::Entry: Describe,
{
    let tree = &s.tree;
    let id = |n: NodeIdx| tree.node(n).entry.id().as_str();
    let default = F::Entry::default_leaf(tree).map(id);
    let leaves = tree.leaves().count();
    let report = json!({
        "ok": true,
        "file": file,
        "format": format,
        "entryCount": tree.len(),
        "leafCount": leaves,
        // The leaf a read without --leaf uses: pi's last entry, the leaf `claude --resume`
        // continues from.
        "defaultLeafId": default,
        "leafIds": tree.leaves().map(id).collect::<Vec<_>>(),
        "tornTail": s.torn_tail.is_some(),
        "tornTailAt": s.torn_tail.map(convert::torn_tail),
    });
    let text = format!(
        "{} · {} · {leaf} {}{}",
        crate::view::tree::count(tree.len(), "entry", "entries"),
        crate::view::tree::count(leaves, "leaf", "leaves"),
        default.unwrap_or("null (no entries)"),
        s.torn_tail.map_or(String::new(), |t| format!(
            " · torn tail at line {} (byte {})",
            t.line, t.offset
        ))
    );
    (report, text)
}
