//! The write subcommands: `fork`, `label`, `name`, `branch`, `append`, `salvage`. Each is one
//! call into `storage::writer`, so the CLI and the daemon write the same way.
//!
//! Exit codes: 0 success; 2 usage, I/O, unknown id, invalid entry or unsupported version;
//! 3 corrupt session (nothing written; try `salvage`); 4 conflict (`--expected-leaf` is stale,
//! or the new file's id is taken, or the file changed under us); 7 busy (a writer is mid-line
//! or holds the lock: retry).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::core::entries::ParentChoice;
use crate::core::fork::Position;
use crate::storage::publish::Reservations;
use crate::storage::writer::{self, Change, ForkRequest, WriteError, WriteOptions};

/// Help text listing the exit codes of the write subcommands.
pub const EXIT_CODES: &str = "Exit codes: 0 ok; 2 usage, I/O, unknown id or invalid entry; \
3 corrupt session (nothing written; see `salvage`); 4 conflict (stale --expected-leaf, id taken, \
file changed); 7 busy (a writer is mid-line or holds the lock; retry)";

/// Options shared by the appending subcommands.
#[derive(Debug, Args)]
pub struct AppendOpts {
    /// The id of the session's last entry as you last saw it (`null` for a session with no
    /// entries); the write is refused with exit 4 if the session moved on.
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
#[command(after_help = EXIT_CODES)]
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
#[command(after_help = EXIT_CODES)]
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
#[command(after_help = EXIT_CODES)]
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
#[command(after_help = EXIT_CODES)]
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
#[command(after_help = EXIT_CODES)]
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
#[command(after_help = EXIT_CODES)]
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

/// The exit code for a write error (see [`EXIT_CODES`]).
pub fn exit_code(e: &WriteError) -> u8 {
    match e {
        WriteError::Corrupt { .. } => 3,
        WriteError::Conflict { .. }
        | WriteError::Reserved { .. }
        | WriteError::Exists { .. }
        | WriteError::Replaced { .. } => 4,
        WriteError::Busy { .. } => 7,
        WriteError::Io { .. }
        | WriteError::UnknownEntry { .. }
        | WriteError::InvalidEntry { .. }
        | WriteError::NotAUserMessage { .. }
        | WriteError::UnsupportedVersion { .. }
        | WriteError::InvalidSessionId { .. } => 2,
    }
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
pub fn fork(args: ForkArgs) -> ExitCode {
    let result = writer::open_for_write(&args.file).and_then(|session| {
        writer::fork(
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
        )
    });
    report(result, args.json, |f| f.path.display().to_string())
}

/// Runs `label`.
pub fn label(args: LabelArgs) -> ExitCode {
    let change = Change::Label {
        target_id: &args.target_id,
        label: args.label.as_deref(),
    };
    append_change(&args.file, change, &args.opts)
}

/// Runs `name`.
pub fn name(args: NameArgs) -> ExitCode {
    append_change(&args.file, Change::SetName { name: &args.name }, &args.opts)
}

/// Runs `branch`.
pub fn branch(args: BranchArgs) -> ExitCode {
    let details = match args
        .details
        .as_deref()
        .map(serde_json::from_str::<&RawValue>)
    {
        None => None,
        Some(Ok(raw)) => Some(raw),
        Some(Err(e)) => {
            eprintln!("sessiond: --details is not JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let change = Change::Branch {
        from_id: null_or(&args.from_id),
        summary: &args.summary,
        details,
    };
    append_change(&args.file, change, &args.opts)
}

/// Runs `append`.
pub fn append(args: AppendArgs) -> ExitCode {
    let parent = match args.parent.as_deref() {
        None => ParentChoice::Leaf,
        Some(p) => ParentChoice::Explicit(null_or(p)),
    };
    let change = Change::Append {
        entry_json: &args.entry,
        parent,
    };
    append_change(&args.file, change, &args.opts)
}

/// Runs `salvage`.
pub fn salvage(args: SalvageArgs) -> ExitCode {
    let result = writer::salvage(&args.file, args.out.as_deref(), &Reservations::new());
    report(result, args.json, |s| {
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

fn append_change(file: &Path, change: Change<'_>, o: &AppendOpts) -> ExitCode {
    let result = writer::open_for_write(file).and_then(|mut session| {
        writer::write_entry(
            file,
            &mut session,
            change,
            null_or(&o.expected_leaf),
            &options(o),
        )
    });
    report(result, o.json, |w| {
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

/// Prints a result (JSON or text) or the error, and returns the exit code. With `--json`,
/// errors are also printed to stdout as `{"error": {"kind", "message", ...}}`.
fn report<T: Serialize>(
    result: Result<T, WriteError>,
    json: bool,
    text: impl FnOnce(&T) -> String,
) -> ExitCode {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let (body, code) = match &result {
        Ok(v) => (
            if json {
                serde_json::to_string(v).unwrap_or_default()
            } else {
                text(v)
            },
            0,
        ),
        Err(e) => {
            eprintln!("sessiond: {e}");
            if !json {
                return ExitCode::from(exit_code(e));
            }
            let mut err = json!({"kind": e.kind(), "message": e.to_string()});
            match e {
                WriteError::Conflict {
                    current_leaf,
                    added,
                    ..
                } => {
                    err["currentLeafId"] = json!(current_leaf);
                    err["added"] = json!(added);
                }
                WriteError::Busy { age_ms, .. } => err["ageMs"] = json!(age_ms),
                WriteError::Corrupt { corruption, .. } => err["corruption"] = json!(corruption),
                _ => {}
            }
            (json!({ "error": err }).to_string(), exit_code(e))
        }
    };
    match writeln!(out, "{body}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe && code == 0 => {
            eprintln!("sessiond: cannot write output: {e}");
            ExitCode::from(2)
        }
        _ => ExitCode::from(code),
    }
}
