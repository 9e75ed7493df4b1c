//! The write subcommands: `fork`, `label`, `name`, `branch`, `append`, `salvage`. Each is one
//! call into `storage::writer`, so the CLI and the daemon write the same way. Exit codes: the
//! [`Exit`] table.

use crate::server::convert;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use serde_json::value::RawValue;

use super::error::{CliError, Exit};
use crate::core::entries::ParentChoice;
use crate::core::fork::Position;
use crate::storage::publish::Reservations;
use crate::storage::writer::{self, Change, ForkRequest, WriteOptions};

/// Options shared by the appending subcommands.
#[derive(Debug, Args)]
pub struct AppendOpts {
    /// The id of the session's last entry as you last saw it (`null` for a session with no
    /// entries); the write is refused as a conflict if the session moved on.
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
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// The entry to fork at.
    pub entry_id: String,
    /// Fork before the entry (up to its parent); the entry must be a user message.
    #[arg(long)]
    pub before: bool,
    /// Directory of the new file (default: the source's directory).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Id of the new session (default: a new UUIDv7).
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
    /// The entry to label.
    pub target_id: String,
    /// The label; omit it to clear the entry's label.
    pub label: Option<String>,
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
    /// The entry the new branch starts from (`null`: a new root).
    pub from_id: String,
    /// Summary of the branch being left.
    #[arg(long, default_value = "")]
    pub summary: String,
    /// Extra JSON stored as the entry's `details`.
    #[arg(long, value_name = "JSON")]
    pub details: Option<String>,
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
    /// Lock, fencing and output options.
    #[command(flatten)]
    pub opts: AppendOpts,
}

/// `sessiond salvage`.
#[derive(Debug, Args)]
pub struct SalvageArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// Directory of the new file (default: the source's directory).
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
    let session = writer::open_for_write(&args.file)?;
    let forked = writer::fork(
        &args.file,
        &session.tree,
        ForkRequest {
            entry_id: &args.entry_id,
            position: if args.before {
                Position::Before
            } else {
                Position::At
            },
            target_dir: args.out.as_deref(),
            session_id: args.session_id.as_deref(),
        },
        &Reservations::new(),
    )?;
    print(out, &convert::forked(&forked), args.json, |f| {
        f.path.display().to_string()
    })
}

/// Runs `label`.
pub fn label(out: &mut dyn Write, args: &LabelArgs) -> Result<Exit, CliError> {
    let change = Change::Label {
        target_id: &args.target_id,
        label: args.label.as_deref(),
    };
    append_change(out, &args.file, change, &args.opts)
}

/// Runs `name`.
pub fn name(out: &mut dyn Write, args: &NameArgs) -> Result<Exit, CliError> {
    let change = Change::SetName { name: &args.name };
    append_change(out, &args.file, change, &args.opts)
}

/// Runs `branch`.
pub fn branch(out: &mut dyn Write, args: &BranchArgs) -> Result<Exit, CliError> {
    let details = args
        .details
        .as_deref()
        .map(serde_json::from_str::<&RawValue>)
        .transpose()
        .map_err(|e| CliError::Argument {
            arg: "--details",
            detail: format!("not JSON: {e}"),
        })?;
    let change = Change::Branch {
        from_id: null_or(&args.from_id),
        summary: &args.summary,
        details,
    };
    append_change(out, &args.file, change, &args.opts)
}

/// Runs `append`.
pub fn append(out: &mut dyn Write, args: &AppendArgs) -> Result<Exit, CliError> {
    let parent = match args.parent.as_deref() {
        None => ParentChoice::Leaf,
        Some(p) => ParentChoice::Explicit(null_or(p)),
    };
    let change = Change::Append {
        entry_json: &args.entry,
        parent,
    };
    append_change(out, &args.file, change, &args.opts)
}

/// Runs `salvage`.
pub fn salvage(out: &mut dyn Write, args: &SalvageArgs) -> Result<Exit, CliError> {
    let salvaged = writer::salvage(&args.file, args.out.as_deref(), &Reservations::new())?;
    print(out, &convert::salvaged(&salvaged), args.json, |s| {
        let mut text = format!(
            "{} · {} entries kept · {} lines dropped · {} re-attached",
            s.path.display(),
            s.kept,
            s.dropped.len(),
            s.reattached.len()
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

fn append_change(
    out: &mut dyn Write,
    file: &Path,
    change: Change<'_>,
    o: &AppendOpts,
) -> Result<Exit, CliError> {
    let mut session = writer::open_for_write(file)?;
    let written = writer::write_entry(
        file,
        &mut session,
        change,
        null_or(&o.expected_leaf),
        &options(o),
    )?;
    print(out, &convert::written(&written, true), o.json, |w| {
        let mut text = w.id.to_string();
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
