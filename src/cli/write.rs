//! The write subcommands: `fork`, `label`, `name`, `branch`, `append`, `salvage`. Each is one
//! call into `storage::writer`, so the CLI and the daemon write the same way. Exit codes: the
//! [`Exit`] table.

use crate::dialect::pi::Pi;
use crate::view::convert;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use serde_json::value::RawValue;

use super::error::{CliError, Exit};
use crate::dialect::pi::entries::ParentChoice;
use crate::dialect::pi::fork::Position;
use crate::session::activity;
use crate::storage::publish::Reservations;
use crate::storage::reader::OpenedSession;
use crate::storage::writer::{self, Change, ForkRequest, WriteOptions};

/// Options shared by the appending subcommands.
#[derive(Debug, Args)]
pub struct AppendOpts {
    /// The file's resume leaf as you last saw it: the id of its last entry, which `sessiond
    /// tree FILE` prints as "resume leaf" (`null` for a session with no entries). Every write
    /// requires it; when the file moved on, nothing is written (exit 4, naming the new leaf).
    #[arg(long, value_name = "ID")]
    pub expected_leaf: String,
    /// How long a torn last line must stay unchanged before it is moved aside (milliseconds).
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub torn_grace_ms: u64,
    /// How long to wait for another sessiond writer's lock (milliseconds).
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub lock_timeout_ms: u64,
    /// fdatasync after the append.
    #[arg(long)]
    pub sync: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `sessiond fork`.
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The session file: a pi session, or a Claude Code transcript (forked into a new
    /// transcript `claude --resume NEW_ID` continues, as `--fork-session` writes it).
    pub file: PathBuf,
    /// The entry to fork at: its id or a unique prefix of it.
    pub entry_id: String,
    /// Fork before the entry (up to its parent); the entry must be a user message (a typed
    /// prompt, for a Claude Code transcript).
    #[arg(long)]
    pub before: bool,
    /// Directory of the new file (default: the source's directory; for a Claude Code
    /// transcript, its projects directory, where `claude --resume` looks); created, owner-only
    /// (0700), when missing.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Id of the new session (default: a new UUIDv7; for a Claude Code transcript a new UUID,
    /// and a given one must be a UUID).
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `sessiond label`.
#[derive(Debug, Args)]
pub struct LabelArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// The entry to label: its id or a unique prefix of it.
    pub target_id: String,
    /// The new label (required unless --clear).
    #[arg(required_unless_present = "clear")]
    pub label: Option<String>,
    /// Clear the entry's label instead of setting one.
    #[arg(long, conflicts_with = "label")]
    pub clear: bool,
    /// Lock, fencing and output options.
    #[command(flatten)]
    pub opts: AppendOpts,
}

/// `sessiond name`.
#[derive(Debug, Args)]
pub struct NameArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// The session name (newlines become spaces, ends trimmed, as in pi).
    pub name: String,
    /// Lock, fencing and output options.
    #[command(flatten)]
    pub opts: AppendOpts,
}

/// `sessiond branch`.
#[derive(Debug, Args)]
pub struct BranchArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// The entry the new branch starts from, by id or a unique prefix (`null`: a new root).
    pub from_id: String,
    /// Summary of the branch being left.
    #[arg(long, default_value = "")]
    pub summary: String,
    /// Extra JSON stored as the entry's `details`.
    #[arg(long, value_name = "JSON")]
    pub details: Option<String>,
    /// Write even while an agent is working on the session (the entry then becomes a side
    /// branch the agent's next entry does not follow). Without it such a write is
    /// refused with exit 7.
    #[arg(long)]
    pub force: bool,
    /// Lock, fencing and output options.
    #[command(flatten)]
    pub opts: AppendOpts,
}

/// `sessiond append`.
#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// The entry as a JSON object with a `type`; `id`, `parentId`, `timestamp` are filled in.
    #[arg(long, value_name = "JSON")]
    pub entry: String,
    /// Parent id (`null`: a new root; default: the session's last entry).
    #[arg(long, value_name = "ID")]
    pub parent: Option<String>,
    /// Write even while an agent is working on the session (the entry then becomes a side
    /// branch the agent's next entry does not follow). Without it such a write is
    /// refused with exit 7.
    #[arg(long)]
    pub force: bool,
    /// Lock, fencing and output options.
    #[command(flatten)]
    pub opts: AppendOpts,
}

/// `sessiond salvage`.
#[derive(Debug, Args)]
pub struct SalvageArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// Directory of the new file (default: the source's directory); created, owner-only
    /// (0700), when missing.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

fn null_or(id: &str) -> Option<&str> {
    (id != "null").then_some(id)
}

fn options(o: &AppendOpts) -> WriteOptions {
    WriteOptions {
        torn_grace: Duration::from_millis(o.torn_grace_ms),
        lock_timeout: Duration::from_millis(o.lock_timeout_ms),
        sync: o.sync,
    }
}

/// Runs `fork`.
pub fn fork(out: &mut dyn Write, args: &ForkArgs) -> Result<Exit, CliError> {
    let req = |entry_id| ForkRequest {
        entry_id,
        position: if args.before {
            Position::Before
        } else {
            Position::At
        },
        target_dir: args.out.as_deref(),
        session_id: args.session_id.as_deref(),
    };
    let forked = match super::open::dialect_of(&args.file)? {
        crate::dialect::Dialect::Codex => {
            return Err(super::open::unsupported(
                &args.file,
                crate::dialect::Dialect::Codex,
                "fork",
            ));
        }
        crate::dialect::Dialect::Pi => {
            let session = writer::open_for_write(&args.file)?;
            let id = full_id(&args.file, &session.tree, &args.entry_id, "entry id")?;
            create_out_dir(args.out.as_deref())?;
            writer::fork(&args.file, &session.tree, req(&id), &Reservations::new())?
        }
        crate::dialect::Dialect::Claude => {
            // Only what reads strictly is forked.
            let session = crate::storage::reader::open_session::<crate::dialect::claude::Claude>(
                &args.file,
                crate::core::tree::Mode::Strict,
            )?;
            let id = full_id(&args.file, &session.tree, &args.entry_id, "entry id")?;
            create_out_dir(args.out.as_deref())?;
            writer::fork_transcript(&args.file, &session.tree, req(&id), &Reservations::new())?
        }
    };
    print(out, &convert::forked(&forked), args.json, |f| {
        format!(
            "wrote {} · {} · session {} · leaf {}",
            as_given(&f.path, &args.file, args.out.as_deref()).display(),
            crate::view::tree::count(f.entry_count, "entry", "entries"),
            f.session_id,
            f.leaf_id.as_deref().unwrap_or("null"),
        )
    })
}

/// Creates a missing `--out` directory and its missing parents, as `man --dir` does, with mode
/// 0700: the new file holds session content. An existing path is left to the writer, which
/// names what it is when it is not a directory. Errors: `Argument` when it cannot be made.
fn create_out_dir(out: Option<&Path>) -> Result<(), CliError> {
    let Some(dir) = out else { return Ok(()) };
    if std::fs::symlink_metadata(dir).is_ok() {
        return Ok(());
    }
    crate::search::create_owner_only_dirs(dir).map_err(|e| CliError::Argument {
        arg: "--out",
        detail: format!("{}: cannot create the directory: {e}", dir.display()),
    })
}

/// A new file's path in the style of the paths the user gave: beside a source named without a
/// directory (`s.jsonl`), the new file is named without one too (not `./…`).
fn as_given<'a>(new: &'a Path, source: &Path, out: Option<&Path>) -> &'a Path {
    let bare = out.is_none() && source.parent().is_none_or(|p| p.as_os_str().is_empty());
    match new.strip_prefix(".") {
        Ok(rest) if bare => rest,
        _ => new,
    }
}

/// The whole id of the entry an id argument names (a unique prefix is enough, as in git).
/// Errors: `UnknownEntry` for an id that names none or a prefix of several.
fn full_id<E: crate::core::tree::TreeEntry>(
    file: &Path,
    tree: &crate::core::tree::Tree<E>,
    id: &str,
    what: &'static str,
) -> Result<String, CliError> {
    let n = super::open::find(tree, file, id, what)?;
    Ok(tree.node(n).entry.id().as_str().to_owned())
}

/// `full_id` of an argument that may also be `null` (kept as given).
fn full_or_null<E: crate::core::tree::TreeEntry>(
    file: &Path,
    tree: &crate::core::tree::Tree<E>,
    id: &str,
    what: &'static str,
) -> Result<String, CliError> {
    match null_or(id) {
        None => Ok(id.to_owned()),
        Some(id) => full_id(file, tree, id, what),
    }
}

/// Runs `label`.
pub fn label(out: &mut dyn Write, args: &LabelArgs) -> Result<Exit, CliError> {
    super::open::require_pi(&args.file, "label")?;
    let mut session = writer::open_for_write(&args.file)?;
    let target = full_id(&args.file, &session.tree, &args.target_id, "target id")?;
    let change = Change::Label {
        target_id: &target,
        label: args.label.as_deref(),
    };
    append_change(
        out,
        &args.file,
        &mut session,
        "label",
        change,
        &args.opts,
        Guard::Off,
    )
}

/// Runs `name`.
pub fn name(out: &mut dyn Write, args: &NameArgs) -> Result<Exit, CliError> {
    super::open::require_pi(&args.file, "name")?;
    let mut session = writer::open_for_write(&args.file)?;
    let change = Change::SetName { name: &args.name };
    append_change(
        out,
        &args.file,
        &mut session,
        "session_info",
        change,
        &args.opts,
        Guard::Off,
    )
}

/// Runs `branch`.
pub fn branch(out: &mut dyn Write, args: &BranchArgs) -> Result<Exit, CliError> {
    super::open::require_pi(&args.file, "branch")?;
    let details = args
        .details
        .as_deref()
        .map(serde_json::from_str::<&RawValue>)
        .transpose()
        .map_err(|e| CliError::Argument {
            arg: "--details",
            detail: format!("not JSON: {e}"),
        })?;
    let mut session = writer::open_for_write(&args.file)?;
    let from = full_or_null(&args.file, &session.tree, &args.from_id, "from id")?;
    let change = Change::Branch {
        from_id: null_or(&from),
        summary: &args.summary,
        details,
    };
    append_change(
        out,
        &args.file,
        &mut session,
        "branch_summary",
        change,
        &args.opts,
        Guard::context(args.force),
    )
}

/// Runs `append`.
pub fn append(out: &mut dyn Write, args: &AppendArgs) -> Result<Exit, CliError> {
    super::open::require_pi(&args.file, "append")?;
    let mut session = writer::open_for_write(&args.file)?;
    let given = args
        .parent
        .as_deref()
        .map(|p| full_or_null(&args.file, &session.tree, p, "parent id"))
        .transpose()?;
    let parent = match given.as_deref() {
        None => ParentChoice::Leaf,
        Some(p) => ParentChoice::Explicit(null_or(p)),
    };
    let change = Change::Append {
        entry_json: &args.entry,
        parent,
    };
    append_change(
        out,
        &args.file,
        &mut session,
        "entry",
        change,
        &args.opts,
        Guard::context(args.force),
    )
}

/// Runs `salvage`.
pub fn salvage(out: &mut dyn Write, args: &SalvageArgs) -> Result<Exit, CliError> {
    super::open::require_pi(&args.file, "salvage")?;
    create_out_dir(args.out.as_deref())?;
    let salvaged = writer::salvage(&args.file, args.out.as_deref(), &Reservations::new())?;
    print(out, &convert::salvaged(&salvaged), args.json, |s| {
        let mut text = format!(
            "wrote {} · {} kept · {} dropped · {} re-attached",
            as_given(&s.path, &args.file, args.out.as_deref()).display(),
            crate::view::tree::count(s.kept, "entry", "entries"),
            crate::view::tree::count(s.dropped.len(), "line", "lines"),
            crate::view::tree::count(s.reattached.len(), "entry", "entries"),
        );
        for d in &s.dropped {
            text.push_str(&format!(
                "\ndropped line {} (byte {}): {}: {}",
                d.line, d.offset, d.kind, d.message
            ));
        }
        for r in &s.reattached {
            text.push_str(&format!(
                "\nre-attached {}: parent {} -> {}",
                r.id,
                r.was.as_deref().unwrap_or("null"),
                r.now.as_ref().map_or("root", |p| p.as_str())
            ));
        }
        text
    })
}

/// Whether a write first looks for an agent working on the session (SPEC §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    /// Labels and names never reach the model: they may land beside an agent.
    Off,
    /// A context-changing write: refused while an agent works on the session.
    Context,
    /// A context-changing write the user forces (`--force`).
    Forced,
}

impl Guard {
    /// `Context`, or `Forced` under `--force`.
    pub fn context(force: bool) -> Guard {
        if force { Guard::Forced } else { Guard::Context }
    }

    /// Refuses the write when it changes the context and an agent works on the session
    /// (`/proc`, looked at now). Errors: [`CliError::AgentActive`].
    pub fn check(self, file: &Path, session: &OpenedSession<Pi>) -> Result<(), CliError> {
        if self != Guard::Context {
            return Ok(());
        }
        match activity::detect_on(file, session) {
            None => Ok(()),
            Some(agent) => Err(CliError::AgentActive {
                path: file.to_owned(),
                agent,
            }),
        }
    }
}

/// Appends `change` (a `what`: `label`, `entry`...) and prints the entry's id and the file's
/// resume leaf after it: the next write's --expected-leaf.
fn append_change(
    out: &mut dyn Write,
    file: &Path,
    session: &mut OpenedSession<Pi>,
    what: &str,
    change: Change<'_>,
    o: &AppendOpts,
    guard: Guard,
) -> Result<Exit, CliError> {
    guard.check(file, session)?;
    let expected = expected_leaf(file, &session.tree, &o.expected_leaf)?;
    let written = writer::write_entry(file, session, change, null_or(&expected), &options(o))?;
    print(out, &convert::written(&written, true), o.json, |w| {
        let leaf = w.leaf_id.as_deref().unwrap_or("null");
        let mut text = format!("wrote {what} {} · resume leaf {leaf}", w.id);
        if !w.added_after.is_empty() {
            text.push_str(&format!(
                " ({} after it by another writer)",
                crate::view::tree::count(w.added_after.len(), "entry", "entries")
            ));
        }
        if let Some(r) = &w.repaired {
            text.push_str(&format!(
                "\ntorn tail ({} bytes at byte {}) moved to {}",
                r.len,
                r.offset,
                r.sidecar.display()
            ));
        }
        text
    })
}

/// `--expected-leaf` as a whole id: a unique prefix of an entry's id stands for it. An id no
/// entry has or begins with is kept as given: the fence then reports the file moved on (exit
/// 4), as it does for any leaf it does not hold. Errors: a prefix of several ids.
pub fn expected_leaf(
    file: &Path,
    tree: &crate::dialect::pi::Tree,
    given: &str,
) -> Result<String, CliError> {
    match full_or_null(file, tree, given, "expected leaf id") {
        Err(CliError::UnknownEntry { unknown, .. }) if !unknown.is_ambiguous() => {
            Ok(given.to_owned())
        }
        other => other,
    }
}

/// Prints a result as one JSON line or as text.
fn print<T: Serialize>(
    out: &mut dyn Write,
    value: &T,
    json: bool,
    text: impl FnOnce(&T) -> String,
) -> Result<Exit, CliError> {
    if json {
        serde_json::to_writer(&mut *out, value).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", text(value))?;
    }
    Ok(Exit::Ok)
}
