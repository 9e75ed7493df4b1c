//! `sessiond rewind`: the files a session changed after an entry put back to their content at
//! that entry ([`crate::core::rewind`] plans it from the session's records,
//! [`crate::rewind`] applies it with a backup), and `--undo` of one. The session file is only
//! read (`--fork` writes a new one, as `sessiond fork` does). A refused rewind prints its plan
//! (what drifted, what is unknown) and ends with the refusal's exit code.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{Value, json};

use crate::cli::error::{CliError, Exit};
use crate::cli::open;
use crate::core::rewind::{FileStatus, Options, Plan, Refusal};
use crate::dialect::Dialect;
use crate::rewind::{RewindError, SystemDisk};
use crate::storage::publish::Reservations;
use crate::storage::writer::{self, ForkRequest};

/// `sessiond rewind`.
#[derive(Debug, Args)]
#[command(
    override_usage = "sessiond rewind [OPTIONS] <FILE> --to <ENTRY_ID>\n       sessiond rewind [OPTIONS] --undo <BACKUP_DIR>"
)]
pub struct RewindArgs {
    /// The session file (JSONL): a pi session or a Claude Code transcript; only read.
    #[arg(required_unless_present = "undo")]
    pub file: Option<PathBuf>,
    /// The entry to rewind the files to: its id or a unique prefix of it (on the leaf's path).
    #[arg(long, value_name = "ENTRY_ID", required_unless_present = "undo")]
    pub to: Option<String>,
    /// The leaf whose path is read (default: the resume leaf: pi's last entry; the line
    /// `claude --resume` continues from).
    #[arg(long, value_name = "ID")]
    pub leaf: Option<String>,
    /// The working directory instead of the session's (pi's header `cwd`, the `cwd` of a Claude
    /// Code transcript's leaf line); must be absolute
    /// after resolving against the current directory. Files outside it are never touched.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Print per file the unified diff of what would change; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Rewind files that changed since the session left them (drift), and beside an agent
    /// working on the session; with --undo, put back files changed since the rewind.
    #[arg(long)]
    pub force: bool,
    /// Leave this file as it is (repeatable): a file whose earlier content the session does
    /// not hold, or one you want to keep.
    #[arg(long, value_name = "PATH")]
    pub exclude: Vec<String>,
    /// Also fork the session at the entry (as `sessiond fork FILE ENTRY_ID`) so conversation
    /// and files agree; prints the new file.
    #[arg(long)]
    pub fork: bool,
    /// Where the backup directory is made (default: $XDG_STATE_HOME/sessiond/rewind, else
    /// ~/.local/state/sessiond/rewind).
    #[arg(long, value_name = "DIR")]
    pub backup_root: Option<PathBuf>,
    /// Put back the files a rewind replaced or removed, from its backup directory.
    #[arg(long, value_name = "BACKUP_DIR", conflicts_with_all = ["file", "to", "leaf", "cwd", "dry_run", "exclude", "fork"])]
    pub undo: Option<PathBuf>,
    /// Print `{path, entryId, leafId, cwd, dryRun, applied, refusal, files, backupDir, fork}` as
    /// JSON (`--undo`: `{backupDir, files}`).
    #[arg(long)]
    pub json: bool,
}

/// The exit code of a refusal.
pub fn refusal_exit(r: &Refusal) -> Exit {
    match r {
        Refusal::Drift { .. } => Exit::Conflict,
        Refusal::Unrestorable { .. } => Exit::Unrestorable,
        Refusal::RelativeCwd { .. } | Refusal::NoCwd | Refusal::MissingCwd { .. } => Exit::Error,
    }
}

fn rewind_error(e: RewindError) -> CliError {
    CliError::Rewind(e)
}

/// Runs `sessiond rewind`.
pub fn run(out: &mut dyn Write, args: &RewindArgs) -> Result<Exit, CliError> {
    if let Some(dir) = &args.undo {
        let files = crate::rewind::undo(dir, args.force).map_err(rewind_error)?;
        let doc = json!({"backupDir": dir.to_string_lossy(), "files": files});
        if args.json {
            writeln!(out, "{doc}")?;
        } else {
            for f in files.iter().rev() {
                let what = match f.backup {
                    Some(_) => "put back",
                    None => "removed",
                };
                writeln!(out, "{what} {}", f.path)?;
            }
            writeln!(out, "{} files put back from {}", files.len(), dir.display())?;
        }
        return Ok(Exit::Ok);
    }
    let (Some(file), Some(to)) = (&args.file, &args.to) else {
        return Err(CliError::Argument {
            arg: "--to",
            detail: "FILE and --to ENTRY_ID are required (or --undo BACKUP_DIR)".into(),
        });
    };
    let options = Options {
        cwd: args
            .cwd
            .as_ref()
            .map(|d| crate::paths::absolute(d).to_string_lossy().into_owned()),
        force: args.force,
        exclude: args.exclude.clone(),
    };
    let disk = SystemDisk::from_env();
    let session = crate::paths::absolute(file);
    let dialect = open::dialect_of(file)?;
    let read = match dialect {
        Dialect::Pi => read_pi(file, to, args.leaf.as_deref())?,
        Dialect::Claude => read_claude(file, to, args.leaf.as_deref())?,
        other => return Err(open::unsupported(file, other, "rewind")),
    };
    let plan = crate::core::rewind::plan(&read.records, &disk, &options);
    if let Some(r) = &plan.refusal {
        let doc = crate::rewind::document(&session, &plan, args.dry_run, None, None);
        print_plan(out, args.json, &doc, &plan)?;
        if !args.json {
            super::say(format_args!("{}: {}", file.display(), r.message()));
        }
        return Ok(refusal_exit(r));
    }
    if args.dry_run {
        let doc = crate::rewind::document(&session, &plan, true, None, None);
        print_plan(out, args.json, &doc, &plan)?;
        return Ok(Exit::Ok);
    }
    if !args.force
        && let Some(agent) = crate::session::activity::detect(&crate::session::activity::Probe {
            path: &std::fs::canonicalize(file).unwrap_or_else(|_| session.clone()),
            cwd: plan.cwd.as_deref(),
            turn_open: read.turn_open,
            agent_names: read.agent_names,
            mtime: read.mtime,
            writer_lock: None,
        })
    {
        return Err(CliError::AgentActive {
            path: file.clone(),
            agent,
        });
    }
    let root = args
        .backup_root
        .clone()
        .unwrap_or_else(crate::rewind::default_backup_root);
    let applied = crate::rewind::apply(&plan, &session, &root, &disk).map_err(rewind_error)?;
    let forked = if args.fork {
        let request = ForkRequest {
            entry_id: &read.entry_id,
            position: crate::dialect::pi::fork::Position::At,
            target_dir: None,
            session_id: None,
        };
        // The session file is never written: a fork is a new file (a Claude Code transcript
        // forks into a new transcript in its projects directory, as `sessiond fork` does).
        let f = match dialect {
            Dialect::Claude => {
                let strict = crate::storage::reader::open_session::<crate::dialect::claude::Claude>(
                    file,
                    crate::core::tree::Mode::Strict,
                )?;
                writer::fork_transcript(file, &strict.tree, request, &Reservations::new())?
            }
            _ => {
                let strict = writer::open_for_write(file)?;
                writer::fork(file, &strict.tree, request, &Reservations::new())?
            }
        };
        Some(json!(crate::view::convert::forked(&f)))
    } else {
        None
    };
    let doc = crate::rewind::document(&session, &plan, false, Some(&applied), forked.as_ref());
    print_plan(out, args.json, &doc, &plan)?;
    Ok(Exit::Ok)
}

/// What a rewind read from the session: its records, the entry's whole id, and what tells
/// whether an agent is at work on it.
struct Read {
    records: crate::core::rewind::Records,
    entry_id: String,
    turn_open: bool,
    agent_names: &'static [&'static str],
    mtime: Option<std::time::SystemTime>,
}

fn not_on_path(file: &Path, entry: &str, leaf: Option<String>) -> CliError {
    CliError::Argument {
        arg: "--to",
        detail: format!(
            "{}: entry {entry} is not on the path to leaf {} (give --leaf)",
            file.display(),
            leaf.unwrap_or_else(|| "null".into())
        ),
    }
}

/// A pi session's records ([`crate::dialect::pi::rewind::collect`]).
fn read_pi(file: &Path, to: &str, leaf: Option<&str>) -> Result<Read, CliError> {
    let opened = open::open(file, false, "rewind")?;
    let tree = &opened.session.tree;
    let leaf = open::resolve(tree, file, leaf)?;
    let entry = open::find(tree, file, to, "entry id")?;
    let entry_id = tree.node(entry).entry.id.to_string();
    if !tree.path_to(leaf).contains(&entry) {
        return Err(not_on_path(
            file,
            &entry_id,
            leaf.map(|l| tree.node(l).entry.id.to_string()),
        ));
    }
    let records = crate::dialect::pi::rewind::collect(tree, leaf, entry, &opened.lines).map_err(
        |source| CliError::Render {
            path: file.to_owned(),
            source,
        },
    )?;
    Ok(Read {
        records,
        entry_id,
        turn_open: crate::session::activity::turn_open(tree),
        agent_names: crate::session::activity::PI_NAMES,
        mtime: opened.session.stamp.mtime,
    })
}

/// A Claude Code transcript's records ([`crate::dialect::claude::rewind::collect`]), with the
/// checkpoints of its file history at the entry.
fn read_claude(file: &Path, to: &str, leaf: Option<&str>) -> Result<Read, CliError> {
    let read = super::transcript::read(file, false)?;
    let tree = &read.session.tree;
    let leaf = super::transcript::leaf(tree, file, leaf)?;
    let entry = open::find(tree, file, to, "entry id")?;
    let entry_id = tree.node(entry).entry.id.to_string();
    if !crate::dialect::claude::load::history(tree, leaf).contains(&entry) {
        return Err(not_on_path(
            file,
            &entry_id,
            Some(tree.node(leaf).entry.id.to_string()),
        ));
    }
    let checkpoints = crate::rewind::claude_checkpoints(file, &entry_id);
    let records =
        crate::dialect::claude::rewind::collect(tree, leaf, entry, &read.lines, &checkpoints)
            .map_err(|e| CliError::Transcript {
                path: file.to_owned(),
                detail: e.to_string(),
            })?;
    Ok(Read {
        records,
        entry_id,
        turn_open: crate::dialect::claude::turn_open(tree),
        agent_names: crate::session::activity::CLAUDE_NAMES,
        mtime: read.session.stamp.mtime,
    })
}

fn status_word(s: FileStatus) -> &'static str {
    match s {
        FileStatus::Restore => "restore",
        FileStatus::Remove => "remove",
        FileStatus::Unchanged => "unchanged",
        FileStatus::Unknown => "UNKNOWN",
        FileStatus::Outside => "OUTSIDE",
        FileStatus::Excluded => "excluded",
    }
}

fn print_plan(out: &mut dyn Write, json: bool, doc: &Value, plan: &Plan) -> Result<(), CliError> {
    if json {
        writeln!(out, "{doc}")?;
        return Ok(());
    }
    let applied = doc.get("applied").and_then(Value::as_bool) == Some(true);
    writeln!(
        out,
        "rewind to {} · leaf {} · cwd {}{}",
        plan.entry_id,
        plan.leaf_id.as_deref().unwrap_or("(none)"),
        plan.cwd.as_deref().unwrap_or("(none)"),
        if applied {
            ""
        } else if doc.get("dryRun").and_then(Value::as_bool) == Some(true) {
            " · dry run"
        } else {
            " · refused"
        }
    )?;
    for f in &plan.files {
        let name = f.relative.as_deref().unwrap_or(&f.path);
        writeln!(out, "{:<9} {name}: {}", status_word(f.status), f.reason)?;
        if let Some(d) = &f.drift {
            writeln!(out, "  DRIFT: {}", d.message)?;
            if let Some(diff) = &d.diff {
                for l in diff.lines() {
                    writeln!(out, "    {l}")?;
                }
            }
        }
        if !applied && let Some(diff) = &f.diff {
            out.write_all(diff.as_bytes())?;
            if !diff.ends_with('\n') {
                writeln!(out)?;
            }
        }
    }
    // A refusal before any file was looked at (no usable working directory) is said on stderr.
    if plan.files.is_empty() && plan.refusal.is_none() {
        writeln!(out, "no file was changed by the session after the entry")?;
    }
    if let Some(dir) = doc.get("backupDir").and_then(Value::as_str) {
        writeln!(
            out,
            "backup: {dir} (`sessiond rewind --undo {dir}` puts the files back)"
        )?;
    }
    if let Some(p) = doc
        .get("fork")
        .and_then(|f| f.get("path"))
        .and_then(Value::as_str)
    {
        writeln!(out, "forked: {p}")?;
    }
    Ok(())
}
