//! `sessiond archive` (one incremental pass, or `--prune`), `sessiond restore`, and the
//! archive half of `sessiond list --archive`, over [`crate::archive`].

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::error::{CliError, Exit};
use crate::archive::{self, ArchiveError};
use crate::core::preview::visible;

/// `sessiond archive`.
#[derive(Debug, Args)]
pub struct ArchiveArgs {
    /// A directory of sessions to archive (repeatable); default: pi's sessions directory, and
    /// Claude Code's projects and Codex's sessions directories when they exist. Every `*.jsonl` file below it is
    /// archived, whatever its format.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// The archive directory: created when missing or empty; one that is neither must hold an
    /// archive sessiond made.
    #[arg(long = "to", value_name = "ARCHIVE")]
    pub to: PathBuf,
    /// Instead of a pass: list the archived sessions whose original no longer exists and to
    /// which nothing was added for --older-than days; they are removed only with --apply.
    #[arg(long, requires = "older_than")]
    pub prune: bool,
    /// With --prune: the age in days (of the newest archived bytes).
    #[arg(long, value_name = "DAYS", requires = "prune")]
    pub older_than: Option<u64>,
    /// With --prune: remove them (without it, nothing is removed: a dry run).
    #[arg(long, requires = "prune")]
    pub apply: bool,
    /// Print the pass's (or the prune's) report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `sessiond restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The archive directory.
    #[arg(value_name = "ARCHIVE")]
    pub archive: PathBuf,
    /// The session: its key in the archive (the `key` of `list --archive ARCHIVE --json`), its
    /// original path, its file name (with or without `.jsonl`), or the session id its file name
    /// ends with (pi's `<time>_<id>.jsonl`, Claude Code's `<id>.jsonl`, Codex's `rollout-…-<id>`).
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The version to restore (default: the newest); `list --archive` shows how many there are.
    #[arg(long, value_name = "N")]
    pub version: Option<u32>,
    /// Restore below DIR (at the file's path relative to the root it was archived from),
    /// instead of to its original path.
    #[arg(long, value_name = "DIR", conflicts_with = "cwd")]
    pub to: Option<PathBuf>,
    /// Restore as a session of the project now at NEWDIR: the cwd the file records rewritten,
    /// written as a new file where its agent looks for NEWDIR's sessions.
    #[arg(long, value_name = "NEWDIR")]
    pub cwd: Option<PathBuf>,
    /// Print what was restored as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `sessiond archive`. Errors: the archive's; files that could not be archived are
/// listed in the report (and on stderr) and end the command with [`Exit::Error`].
pub fn run(out: &mut dyn Write, args: &ArchiveArgs) -> Result<Exit, CliError> {
    if args.prune {
        let days = args.older_than.unwrap_or(u64::MAX);
        let pruned = archive::prune(&args.to, days, args.apply)?;
        if args.json {
            let doc = json!({
                "archive": crate::paths::absolute(&args.to),
                "rule": {"originalGone": true, "olderThanDays": days},
                "dryRun": !args.apply,
                "sessions": pruned,
            });
            writeln!(out, "{doc}")?;
        } else {
            let verb = if args.apply {
                "removed"
            } else {
                "would remove"
            };
            for p in &pruned {
                writeln!(
                    out,
                    "{verb} {}  {} bytes  {}",
                    p.key,
                    p.bytes,
                    visible(&p.source.display().to_string())
                )?;
            }
            writeln!(
                out,
                "{} session{} {verb}{}",
                pruned.len(),
                if pruned.len() == 1 { "" } else { "s" },
                if args.apply {
                    ""
                } else {
                    " (a dry run: --apply removes them)"
                }
            )?;
        }
        return Ok(Exit::Ok);
    }
    let roots = super::session_roots(&args.roots);
    let report = archive::archive_pass(&args.to, &roots)?;
    for f in &report.errors {
        super::say(format_args!("{}: {}", f.path.display(), f.message));
    }
    if args.json {
        writeln!(out, "{}", json!(report))?;
    } else {
        writeln!(
            out,
            "{} files: {} added, {} appended, {} new versions, {} unchanged; {} bytes added \
             ({} written); {} failed",
            report.files,
            report.added,
            report.appended,
            report.new_versions,
            report.unchanged,
            report.bytes_added,
            report.bytes_written,
            report.errors.len()
        )?;
    }
    Ok(if report.errors.is_empty() {
        Exit::Ok
    } else {
        Exit::Error
    })
}

/// Runs `sessiond restore`. Errors: the archive's; [`Exit::Conflict`] when the target exists
/// with other content.
pub fn restore(out: &mut dyn Write, args: &RestoreArgs) -> Result<Exit, CliError> {
    let moved = args.cwd.as_deref().map(crate::paths::absolute);
    let rewrite = moved.as_deref().map(|new_cwd| {
        move |m: &archive::Manifest, bytes: Vec<u8>| moved_session(m, bytes, new_cwd)
    });
    let restored = archive::restore(
        &args.archive,
        &args.session,
        args.version,
        args.to.as_deref(),
        rewrite
            .as_ref()
            .map(|f| f as &archive::restore::Rewrite<'_>),
    )?;
    if args.json {
        writeln!(out, "{}", json!(restored))?;
    } else {
        writeln!(
            out,
            "{} version {} ({} bytes) {} {}",
            restored.key,
            restored.version,
            restored.size,
            if restored.written {
                "restored to"
            } else {
                "already at"
            },
            visible(&restored.path.display().to_string())
        )?;
    }
    Ok(Exit::Ok)
}

/// The archived session `m` as a session of the project now at `new_cwd`: its agent's
/// dialect rewrites the cwd fields and says where that agent looks for the new file.
fn moved_session(
    m: &archive::Manifest,
    bytes: Vec<u8>,
    new_cwd: &Path,
) -> Result<(PathBuf, Vec<u8>), ArchiveError> {
    crate::dialect::moved::moved_session(&m.source, &m.root, bytes, new_cwd).map_err(|detail| {
        ArchiveError::Rewrite {
            path: m.source.clone(),
            detail,
        }
    })
}

/// `sessiond list --archive ARCHIVE`: the archived sessions, newest archived first, each with
/// whether its original still exists. Errors: the archive's.
pub fn list(out: &mut dyn Write, dir: &Path, as_json: bool) -> Result<Exit, CliError> {
    let sessions = archive::list_sessions(dir)?;
    if as_json {
        let items: Vec<_> = sessions
            .iter()
            .map(|s| {
                json!({
                    "key": s.key,
                    "path": s.manifest.source,
                    "root": s.manifest.root,
                    "originalExists": s.original_exists,
                    "size": s.size,
                    "versions": s.version_count,
                    "lastArchivedMs": s.last_archived_ms,
                })
            })
            .collect();
        let doc = json!({"archive": crate::paths::absolute(dir), "archived": items});
        writeln!(out, "{doc}")?;
        return Ok(Exit::Ok);
    }
    for s in &sessions {
        writeln!(
            out,
            "{}  {:>10} bytes  {} version{}  {}  {}  {}",
            crate::js::timestamp::format_iso(s.last_archived_ms),
            s.size,
            s.version_count,
            if s.version_count == 1 { " " } else { "s" },
            if s.original_exists {
                "original exists"
            } else {
                "original gone  "
            },
            visible(&s.key),
            visible(&s.manifest.source.display().to_string())
        )?;
    }
    Ok(Exit::Ok)
}

impl From<ArchiveError> for CliError {
    fn from(e: ArchiveError) -> Self {
        CliError::Archive(e)
    }
}
