//! `context` and `explain` on a Claude Code transcript: what Claude Code sends the model at a
//! leaf (`dialect::claude::context`), and what became of a line. The document shapes are the
//! CLI's and the daemon's alike; the human output follows pi's (`cli::read`).

use std::io::{self, Write};
use std::path::Path;

use serde_json::{Value, json};

use super::Sink;
use super::error::{CliError, Exit};
use super::open::Ask;
use crate::core::preview::one_line;
use crate::core::tree::{Mode, NodeIdx};
use crate::dialect::claude::context;
use crate::dialect::claude::explain::{self, Target};
use crate::dialect::claude::{self, Claude, Tree, preview};
use crate::storage::reader::{self, FileLines, OpenError, OpenedSession};
use crate::view::convert;
use crate::view::tree::count;

/// A transcript read for one command, with a reader of its lines.
pub(crate) struct Read {
    /// The transcript as read.
    pub session: OpenedSession<Claude>,
    /// Its lines, read again by position.
    pub lines: FileLines,
}

/// Reads the transcript `file` strictly, or leniently with `allow_corrupt`, with a reader of
/// its lines. Errors: the open's.
pub(crate) fn read(file: &Path, allow_corrupt: bool) -> Result<Read, CliError> {
    let session = reader::open_session::<Claude>(file, Mode::allowing_corrupt(allow_corrupt))?;
    let lines = FileLines::open(file)
        .map(FileLines::read_ahead)
        .map_err(|source| OpenError::Io {
            path: file.to_owned(),
            source,
        })?;
    Ok(Read { session, lines })
}

/// The leaf `--leaf` names, or the leaf `claude --resume` continues from. Errors:
/// `UnknownEntry`, or `Argument` for a transcript without a leaf to continue.
pub(crate) fn leaf(tree: &Tree, file: &Path, id: Option<&str>) -> Result<NodeIdx, CliError> {
    match id {
        Some(id) => super::open::find(tree, file, id, "leaf id"),
        None => claude::default_leaf(tree).ok_or_else(|| CliError::Argument {
            arg: "FILE",
            detail: format!(
                "{}: the transcript has no leaf Claude Code would continue from (no message \
                 line, or an interactive /rewind cleared it); name one with --leaf",
                file.display()
            ),
        }),
    }
}

fn context_err(file: &Path) -> impl FnOnce(context::ContextError) -> CliError + '_ {
    move |e| CliError::Transcript {
        path: file.to_owned(),
        detail: e.to_string(),
    }
}

/// Runs `sessiond context` on a Claude Code transcript.
pub fn context(out: &mut dyn Sink, args: &Ask<'_>) -> Result<Exit, CliError> {
    let file = args.file;
    let Read { session, lines } = read(file, args.allow_corrupt)?;
    let tree = &session.tree;
    let leaf = leaf(tree, file, args.leaf)?;
    // A document written once leaves the results' text in the file until it is written.
    let options = context::ContextOptions {
        results_in_place: args.json,
        ..crate::view::transcript::options(args.model)
    };
    let ctx = context::context(tree, &lines, leaf, &options).map_err(context_err(file))?;
    if args.json {
        let doc = crate::view::transcript::ContextDocument::new(
            convert::claude_session_id(file),
            tree,
            session.torn_tail,
            &ctx,
        );
        let out = out.final_text()?;
        doc.write_to(&lines, &mut *out)?;
        writeln!(out)?;
        super::open::exiting_with((ctx, session));
        return Ok(Exit::Ok);
    }
    let id = |n: NodeIdx| tree.node(n).entry.id.as_str();
    writeln!(
        out,
        "Claude Code session {} · leaf {} · {} · model {} · attachments as {}",
        convert::claude_session_id(file).unwrap_or_default(),
        id(ctx.leaf),
        count(ctx.messages.len(), "message", "messages"),
        ctx.model.as_deref().unwrap_or("(none)"),
        if ctx.mid_conversation_system {
            "system messages"
        } else {
            "<system-reminder> text"
        },
    )?;
    for (i, (message, sources)) in ctx.messages.iter().zip(&ctx.sources).enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("?");
        let first = sources.first().map_or("", |&n| id(n));
        let more = match sources.len() {
            0 | 1 => String::new(),
            n => format!(" +{}", n - 1),
        };
        writeln!(
            out,
            "{:>4} {first}{more} {role:<9} {}",
            i + 1,
            preview::content_preview(message.get("content"))
        )?;
    }
    if !ctx.dropped.is_empty() {
        writeln!(
            out,
            "{} of the path not sent (`sessiond explain FILE ID` says why each)",
            count(ctx.dropped.len(), "line", "lines")
        )?;
    }
    if !ctx.send_time.resume_appends.is_empty() {
        writeln!(
            out,
            "a resume here would first write: {}",
            serde_json::to_string(&ctx.send_time.resume_appends).unwrap_or_default()
        )?;
    }
    if !ctx.not_rendered.is_empty() {
        writeln!(
            out,
            "not rendered (Claude sends text for these that sessiond does not know): {}",
            ctx.not_rendered.join(", ")
        )?;
    }
    writeln!(
        out,
        "not in the file, added by Claude at send time: the userContext reminder and a \
         cache_control marker (`--json`: sendTime)"
    )?;
    if let Some(t) = session.torn_tail {
        writeln!(
            out,
            "torn tail: line {} (byte {}) is incomplete and left out",
            t.line, t.offset
        )?;
    }
    for d in tree.diagnostics() {
        writeln!(out, "problem: {d}")?;
    }
    Ok(Exit::Ok)
}

/// Runs `sessiond explain` on a Claude Code transcript: `ENTRY_ID` is a uuid, or `line:N` for
/// any line (a bookkeeping line has no uuid).
pub fn explain(out: &mut dyn Write, args: &Ask<'_>, entry_id: &str) -> Result<Exit, CliError> {
    let file = args.file;
    let Read { session, lines } = read(file, args.allow_corrupt)?;
    let tree = &session.tree;
    let target = match entry_id.strip_prefix("line:").map(str::parse::<u32>) {
        Some(Ok(line)) => Target::Line(line),
        _ => Target::Node(super::open::find(
            tree,
            file,
            entry_id,
            "entry id (or line:N)",
        )?),
    };
    let leaf = leaf(tree, file, args.leaf)?;
    let ex = explain::explain(
        tree,
        &lines,
        leaf,
        target,
        &crate::view::transcript::options(args.model),
    )
    .map_err(|e| CliError::Transcript {
        path: file.to_owned(),
        detail: e.to_string(),
    })?;
    if args.json {
        let mut doc = serde_json::to_value(&ex).map_err(io::Error::from)?;
        doc["format"] = json!("claude-code");
        serde_json::to_writer(&mut *out, &doc).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", ex.text)?;
    }
    Ok(Exit::Ok)
}

/// How a transcript links to others: the parent whose `Agent` call started it (for a subagent's
/// transcript), and the subagents it started. As JSON fields and as lines for a person.
pub struct Links {
    /// `{"subagentOf": …, "subagents": […]}`.
    pub json: Value,
    /// One line per link.
    pub lines: Vec<String>,
}

/// The links of the transcript `file` (whose tree is `tree`): read from the subagents' metadata
/// files beside it (docs/claude-code.md §5.3). A missing or unreadable metadata file or parent
/// leaves that link out; it never fails the command.
pub fn links(file: &Path, tree: &Tree) -> Links {
    use crate::dialect::claude::subagent;
    let meta_at = |path: &Path| {
        subagent::meta_of(path)
            .and_then(|m| std::fs::read(m).ok())
            .and_then(|b| subagent::parse_meta(&b))
            .unwrap_or_default()
    };
    let mut lines = Vec::new();
    let mut parent_json = Value::Null;
    if let (Some(agent), Some(parent)) = (subagent::agent_id(file), subagent::parent_of(file)) {
        let meta = meta_at(file);
        let call = meta.tool_use_id.clone().unwrap_or_default();
        let line = reader::open_session::<Claude>(&parent, Mode::Lenient)
            .ok()
            .and_then(|p| {
                subagent::tool_use_line(&p.tree, &call).map(|n| p.tree.node(n).entry.id.to_string())
            });
        lines.push(format!(
            "subagent {agent}{} of session {}: started by tool_use {} ({})",
            meta.description
                .as_deref()
                .map_or(String::new(), |d| format!(" ({})", one_line(d))),
            convert::claude_session_id(&parent).unwrap_or_default(),
            if call.is_empty() { "unknown" } else { &call },
            line.as_deref()
                .map_or("its line is not in the parent".to_owned(), |l| format!(
                    "line {l} of the parent"
                )),
        ));
        parent_json = json!({
            "file": parent,
            "agentId": agent,
            "toolUseId": meta.tool_use_id,
            "toolUseEntryId": line,
            "description": meta.description,
            "agentType": meta.agent_type,
        });
    }
    let mut subagents = Vec::new();
    if let Some(dir) = subagent::subagents_dir(file)
        && let Ok(entries) = std::fs::read_dir(&dir)
    {
        let mut files: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| subagent::agent_id(p).is_some())
            .collect();
        files.sort();
        for sub in files {
            let meta = meta_at(&sub);
            let line = meta
                .tool_use_id
                .as_deref()
                .and_then(|id| subagent::tool_use_line(tree, id))
                .map(|n| tree.node(n).entry.id.to_string());
            lines.push(format!(
                "subagent {}{}: started by {} — `sessiond tree {}`",
                subagent::agent_id(&sub).unwrap_or_default(),
                meta.description
                    .as_deref()
                    .map_or(String::new(), |d| format!(" ({})", one_line(d))),
                line.as_deref()
                    .map_or("a call not in this file".to_owned(), |l| format!(
                        "line {l}"
                    )),
                sub.display(),
            ));
            subagents.push(json!({
                "file": sub,
                "agentId": subagent::agent_id(&sub),
                "toolUseId": meta.tool_use_id,
                "toolUseEntryId": line,
                "description": meta.description,
                "agentType": meta.agent_type,
            }));
        }
    }
    Links {
        json: json!({"subagentOf": parent_json, "subagents": subagents}),
        lines,
    }
}
