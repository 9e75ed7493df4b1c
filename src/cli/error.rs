//! The exit-code table and the one error type of every subcommand: its message for stderr,
//! its JSON document for stdout under `--json`, and its exit code (taken from [`Exit`]).

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};
use thiserror::Error;

use crate::compact::{self, CompactError};
use crate::core::diagnostics::Corruption;
use crate::core::tree::UnknownId;
use crate::dialect::Dialect;
use crate::dialect::pi::compaction::CompactionError;
use crate::dialect::pi::render::RenderError;
use crate::session::activity::Agent;
use crate::storage::reader::OpenError;
use crate::storage::writer::WriteError;

/// The process exit codes of every subcommand. The one table: every `--help` prints the part
/// of it that its command can end with ([`Exit::help`]), the top-level `--help` and the README
/// all of it, and every error maps onto it ([`CliError::exit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The command did what was asked (also "nothing to compact").
    Ok,
    /// `serve` only: the client sent `exit`, or closed stdin, without `shutdown` first (the LSP
    /// rule).
    NoShutdown,
    /// A usage error (clap's own code), an I/O error, an unknown id, an invalid entry or an
    /// unsupported version.
    Error,
    /// The session file is corrupt, or not a session at all; nothing was written.
    Corrupt,
    /// The writer's view is stale, the new file's id is taken, or the file changed under us.
    Conflict,
    /// `compact --require-retention` and a retention probe would be lost; nothing written.
    RetentionLost,
    /// pi 1.6.0 itself would fail to compact this session.
    PiWouldFail,
    /// A writer is mid-line, another sessiond writer holds the lock, or the file is being
    /// created (no session header yet); retry.
    Busy,
    /// `verify`: a finding is `warn` or `fail` (something needs attention before resuming).
    Attention,
    /// `compact` with a model: the model could not be configured, refused the key, failed,
    /// timed out or gave an answer pi would not store; nothing was written.
    ModelFailed,
    /// The session's format does not support the operation (a write on a Claude Code
    /// transcript, which sessiond only reads); nothing was written.
    UnsupportedForFormat,
    /// `rewind`: a file's content at the entry is not in the session's records, or the file
    /// lies outside the working directory; nothing was changed (`--exclude` leaves it alone).
    Unrestorable,
}

/// The commands that end with the same exit codes, for the `--help` of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `context`, `tree`, `explain`: read only.
    Read,
    /// `check`: read only; a corrupt file is its report, not its failure.
    Check,
    /// `label`, `name`, `branch`, `append`: one entry appended, fenced by `--expected-leaf`.
    Append,
    /// `compact`: one compaction entry appended, fenced by `--expected-leaf`.
    Compact,
    /// `fork`: a new file from the source's path; the source is only read.
    Fork,
    /// `salvage`: a new file from a corrupt source's readable entries.
    Salvage,
    /// `serve`: the daemon.
    Serve,
    /// `completions`, `man`: made from the command line's definitions.
    Tool,
    /// `verify`: read only; findings that need attention are its report, with their own code.
    Verify,
    /// `search`: reads the sessions, writes only its index in the cache directory.
    Search,
    /// `archive`, `restore`: write only into the archive, or a restored file that is new.
    Archive,
    /// `rewind`: writes the files of the session's working directory, never the session.
    Rewind,
}

impl Exit {
    /// Every exit code, in numeric order.
    pub const ALL: [Exit; 12] = [
        Exit::Ok,
        Exit::NoShutdown,
        Exit::Error,
        Exit::Corrupt,
        Exit::Conflict,
        Exit::RetentionLost,
        Exit::PiWouldFail,
        Exit::Busy,
        Exit::Attention,
        Exit::ModelFailed,
        Exit::UnsupportedForFormat,
        Exit::Unrestorable,
    ];

    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::NoShutdown => 1,
            Exit::Error => 2,
            Exit::Corrupt => 3,
            Exit::Conflict => 4,
            Exit::RetentionLost => 5,
            Exit::PiWouldFail => 6,
            Exit::Busy => 7,
            Exit::Attention => 8,
            Exit::ModelFailed => 9,
            Exit::UnsupportedForFormat => 10,
            Exit::Unrestorable => 11,
        }
    }

    /// What the code means for the commands of `family` (`None`: for any command, as the
    /// top-level `--help` says it), or `None` when they never end with it. The one table.
    pub fn meaning(self, family: Option<Family>) -> Option<&'static str> {
        use Family::*;
        let text = match (self, family) {
            (Exit::Ok, Some(Serve)) => "the client sent `shutdown`, then `exit`",
            (Exit::Ok, Some(Compact)) => "ok (also when there is nothing to compact)",
            (Exit::Ok, Some(Check)) => "clean, or only a torn tail (a writer may be mid-line)",
            (Exit::Ok, Some(Verify)) => "nothing needs attention: every finding is ok",
            (Exit::Ok, Some(Search)) => "ok (also when nothing matched)",
            (Exit::Ok, Some(Rewind)) => {
                "ok: rewound, put back (--undo), or a --dry-run that would apply"
            }
            (Exit::Error, Some(Rewind)) => {
                "usage, I/O, unknown id, an entry not on the leaf's path, a working directory \
                 that is relative, not named or missing, or a backup directory without a manifest"
            }
            (Exit::Corrupt, Some(Rewind)) => "corrupt session file, or not a session",
            (Exit::Conflict, Some(Rewind)) => {
                "drift: a file changed since the session left it (or, --undo, since the \
                 rewind); nothing changed (--force); or a file changed while the rewind ran \
                 (stopped there; the backup holds what was done)"
            }
            (Exit::Busy, Some(Rewind)) => {
                "busy: an agent is working on the session (--force rewinds beside it), or the \
                 file has no session header yet"
            }
            (Exit::UnsupportedForFormat, Some(Rewind)) => {
                "a Codex rollout (not rewound yet; pi sessions and Claude Code transcripts \
                 are); nothing changed"
            }
            (Exit::Unrestorable, None) => {
                "`rewind`: a file's content at the entry is not in the session, or it lies \
                 outside the working directory; nothing changed (--exclude it)"
            }
            (Exit::Unrestorable, Some(Rewind)) => {
                "a file's content at the entry is not in the session's records, or it lies \
                 outside the working directory (symlinks resolved); nothing changed (--exclude \
                 it)"
            }
            (Exit::Ok, _) => "ok",
            (Exit::NoShutdown, None | Some(Serve)) => {
                "`serve`: the client sent `exit` or closed stdin without `shutdown` first (the LSP rule)"
            }
            (Exit::Error, None) => {
                "usage, I/O, unknown id, invalid entry, invalid session id or unsupported version"
            }
            (Exit::Error, Some(Read)) => {
                "usage, I/O, or an id that names no entry (--leaf, diff's leaves, explain's ENTRY_ID)"
            }
            (Exit::Error, Some(Verify)) => "usage, I/O or unknown id (--leaf)",
            (Exit::Error, Some(Check)) => "usage or I/O",
            (Exit::Error, Some(Search)) => {
                "usage, I/O, a query, date or --cursor that cannot be read, or an index \
                 directory that cannot be opened"
            }
            (Exit::Error, Some(Append)) => {
                "usage, I/O, unknown id (an --expected-leaf that names no entry too), invalid \
                 entry, or a version-1/2 file (only version 3 is appended to)"
            }
            (Exit::Error, Some(Compact)) => {
                "usage, I/O, unknown id (--leaf, --expected-leaf), an unreadable --summary-file, \
                 or a version-1/2 file (only version 3 is appended to)"
            }
            (Exit::Error, Some(Fork)) => {
                "usage, I/O, unknown ENTRY_ID, --before at an entry that is not a user message, \
                 or an invalid --session-id"
            }
            (Exit::Error, Some(Salvage | Tool)) => "usage or I/O",
            (Exit::Error, Some(Archive)) => {
                "usage, I/O (archive: a file that could not be archived, listed in the report), \
                 a directory that is not an archive, or no such archived session or version"
            }
            (Exit::Corrupt, Some(Archive)) => {
                "the archive is damaged (a chunk or manifest fails its check)"
            }
            (Exit::Conflict, Some(Archive)) => {
                "restore: a different file exists where the session would go; nothing written"
            }
            (Exit::UnsupportedForFormat, Some(Archive)) => {
                "restore --cwd: the session's format records no cwd sessiond can rewrite"
            }
            (Exit::Corrupt, None) => "corrupt session file, or not a session (nothing written)",
            (Exit::Corrupt, Some(Read | Verify)) => {
                "corrupt session file (--allow-corrupt reads it as its agent does), or not a session"
            }
            (Exit::Corrupt, Some(Check)) => {
                "corrupt session file, or not a session: the report says where, and whether \
                 `salvage` can help"
            }
            (Exit::Corrupt, Some(Append | Compact)) => {
                "corrupt session file, or not a session: nothing written"
            }
            (Exit::Corrupt, Some(Fork)) => "corrupt source file, or not a session (see `salvage`)",
            (Exit::Corrupt, Some(Salvage)) => "not a session (no header line): nothing to salvage",
            (Exit::Conflict, None) => {
                "conflict (stale --expected-leaf, session id taken, file changed; nothing written)"
            }
            (Exit::Conflict, Some(Append | Compact)) => {
                "conflict: the file's last entry is not --expected-leaf any more, or the file was \
                 replaced; nothing written (the message names the resume leaf)"
            }
            (Exit::Conflict, Some(Fork)) => {
                "a session file with the new id exists (--session-id), or the source changed \
                 while it was read"
            }
            (Exit::Conflict, Some(Salvage)) => "the source changed while it was read",
            (Exit::RetentionLost, None | Some(Compact)) => {
                "retention lost (compact --require-retention; nothing written)"
            }
            (Exit::PiWouldFail, None | Some(Compact)) => {
                "pi itself would fail to compact this session"
            }
            (Exit::Busy, None) => {
                "busy (a writer is creating the file or is mid-line, another sessiond holds the \
                 lock, or an agent is working on the session; retry)"
            }
            (Exit::Busy, Some(Append | Compact)) => {
                "busy (a writer is creating the file or is mid-line, another sessiond holds the \
                 lock, or an agent is working on the session and the write changes its context; \
                 nothing written; retry, or --force for branch, append and compact)"
            }
            (Exit::Busy, Some(Read | Check | Fork | Salvage | Verify)) => {
                "busy: the file has no session header yet and changed moments ago (a writer is \
                 creating it); retry"
            }
            (Exit::Attention, None) => {
                "`verify`: something needs attention before resuming (a warn or fail finding)"
            }
            (Exit::Attention, Some(Verify)) => {
                "something needs attention before resuming: a finding is warn or fail (the \
                 report lists them)"
            }
            (Exit::ModelFailed, None) => {
                "the summarizer model failed or is not configured (compact; nothing written)"
            }
            (Exit::ModelFailed, Some(Compact)) => {
                "the summarizer model failed: no model or key configured, the key refused, an \
                 HTTP error after retries, a timeout, or an answer pi would not store; nothing \
                 written (the message names the provider, never the key)"
            }
            (Exit::UnsupportedForFormat, Some(Fork)) => {
                "the session's format does not support this (a Codex rollout is read only); \
                 nothing written"
            }
            (Exit::UnsupportedForFormat, None | Some(Append | Compact | Salvage)) => {
                "the session's format does not support this (Claude Code transcripts and Codex \
                 rollouts are read only but for `fork` of a transcript); nothing written"
            }
            _ => return None,
        };
        Some(text)
    }

    /// The codes that `family` can end with (`None`: all of them) as the block `--help` prints
    /// after the options: `Exit codes:`, then one indented line per code. The README holds the
    /// block for all commands.
    pub fn help(family: Option<Family>) -> String {
        let mut text = String::from("Exit codes:");
        for e in Exit::ALL {
            if let Some(m) = e.meaning(family) {
                text.push_str(&format!("\n  {}  {m}", e.code()));
            }
        }
        text
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e.code())
    }
}

/// Why a subcommand failed. Printed to stderr; under `--json` also to stdout as one document
/// ([`CliError::json_document`]) instead of the command's own.
#[derive(Debug, Error)]
pub enum CliError {
    /// The file could not be read or is corrupt.
    #[error("{0}{hint}", hint = salvage_hint(match .0 {
        OpenError::Corrupt { corruption, .. } => Some(corruption),
        _ => None,
    }, Reporter::Read))]
    Open(#[from] OpenError),
    /// An id argument names no entry.
    #[error("{}", unknown_entry(path, unknown, what))]
    UnknownEntry {
        /// The session file.
        path: PathBuf,
        /// The id as given (no entry has it or begins with it), or a prefix of several ids.
        unknown: UnknownId,
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
    /// A write was refused or failed.
    #[error("{0}{hint}", hint = salvage_hint(write_corruption(.0), Reporter::Write))]
    Write(#[from] WriteError),
    /// A compaction was refused or failed.
    #[error("{}", match .0 {
        CompactError::UnknownLeaf { path, unknown } => unknown_entry(path, unknown, "leaf id"),
        e => format!("{e}{}", salvage_hint(match e {
            CompactError::Write(w) => write_corruption(w),
            _ => None,
        }, Reporter::Write)),
    })]
    Compact(#[from] CompactError),
    /// A context-changing write (append, branch, compact) while an agent works on the session
    /// (SPEC §4): pi never re-reads its file, so the entry would become a side branch its next
    /// entry does not follow. `--force` writes anyway.
    #[error(
        "{}: {agent}; the entry would land beside it: nothing written; retry when it is done, or pass --force",
        path.display()
    )]
    AgentActive {
        /// The session file.
        path: PathBuf,
        /// The agent found.
        agent: Agent,
    },
    /// The file's format does not support the command (a write, or a command not built for it
    /// yet, on a Claude Code transcript). Nothing was read past the first line, nothing written.
    #[error(
        "{}: {operation} is not supported for a {} session (format {}){}",
        path.display(),
        format.agent(),
        format.as_str(),
        if format.writable() { "" } else { ": sessiond reads it but does not write to it" }
    )]
    UnsupportedForFormat {
        /// The session file.
        path: PathBuf,
        /// The file's format.
        format: Dialect,
        /// The command refused (`label`, `compact`, `export`, ...).
        operation: &'static str,
    },
    /// A Claude Code transcript's context could not be computed at the leaf (a line of the path
    /// cannot be read back or changed, or another line with its uuid replaces it), or a Codex
    /// rollout's (a file of its thread cannot be read, a `history_base` names no file).
    #[error("{}: {detail}", path.display())]
    Transcript {
        /// The transcript.
        path: PathBuf,
        /// What went wrong, naming the line and the uuid.
        detail: String,
    },
    /// An argument's value is unusable (a file that cannot be read, text that is not JSON).
    #[error("{arg}: {detail}")]
    Argument {
        /// The argument, as written on the command line (`--summary-file`, `--details`).
        arg: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// An archive could not be written or read, or a restore was refused.
    #[error("{0}")]
    Archive(crate::archive::ArchiveError),
    /// A rewind could not be applied, or undone.
    #[error("{0}")]
    Rewind(crate::rewind::RewindError),
    /// Writing to stdout failed.
    #[error("cannot write output: {0}")]
    Output(#[from] io::Error),
    /// The temporary file that holds a `--json` document until it is complete could not be
    /// written (standard output is untouched then, so the error document still goes there).
    #[error(
        "cannot hold the --json document in a temporary file in {}: {source}",
        dir.display()
    )]
    Spool {
        /// The temporary directory (`$TMPDIR`, else `/tmp`).
        dir: PathBuf,
        /// Why the write failed.
        source: io::Error,
    },
}

impl CliError {
    /// The exit code, from the [`Exit`] table.
    pub fn exit(&self) -> Exit {
        match self {
            CliError::Open(OpenError::Corrupt { .. }) => Exit::Corrupt,
            // A file being created: like a writer mid-line, retry.
            CliError::Open(OpenError::Pending { .. }) | CliError::AgentActive { .. } => Exit::Busy,
            CliError::Write(w) | CliError::Compact(CompactError::Write(w)) => write_exit(w),
            CliError::Compact(CompactError::RetentionLost { .. }) => Exit::RetentionLost,
            CliError::Compact(CompactError::Model { .. }) => Exit::ModelFailed,
            CliError::UnsupportedForFormat { .. } => Exit::UnsupportedForFormat,
            CliError::Archive(a) => archive_exit(a),
            CliError::Rewind(
                crate::rewind::RewindError::Changed { .. }
                | crate::rewind::RewindError::UndoDrift { .. },
            ) => Exit::Conflict,
            CliError::Rewind(_) => Exit::Error,
            CliError::Compact(CompactError::Compaction {
                source: CompactionError::PiWouldThrow { .. },
                ..
            }) => Exit::PiWouldFail,
            CliError::Open(_)
            | CliError::UnknownEntry { .. }
            | CliError::Render { .. }
            | CliError::Transcript { .. }
            | CliError::Compact(_)
            | CliError::Argument { .. }
            | CliError::Output(_)
            | CliError::Spool { .. } => Exit::Error,
        }
    }

    /// The document printed on stdout under `--json` in place of the command's own:
    /// `{"error": {"kind", "message", ...}}` with `kind` one of `corrupt` (and `corruption`),
    /// `notAFile`, `pending` (and `ageMs`: a file younger than its grace period without a header
    /// yet), `unknownEntry` (and `id`), `argument`, `io`, `piWouldThrow` (and `entryId`)
    /// or a write error's kind (`conflict` with `currentLeafId` and `added`, `busy` with
    /// `ageMs`, ...). A refused `--require-retention` prints the compaction report instead,
    /// with `"error": "retentionLost"`, `written: false` and the retention report.
    pub fn json_document(&self) -> String {
        if let CliError::Compact(CompactError::RetentionLost { plan, .. }) = self {
            // The report is the useful part of this refusal for a script.
            let report = json!({
                "error": "retentionLost",
                "written": false,
                "retention": plan.retention,
            });
            return compact::json_text(plan, &report);
        }
        let mut e = json!({"message": self.to_string()});
        let kind = match self {
            CliError::Open(OpenError::Corrupt { corruption, .. }) => {
                e["corruption"] = json!(corruption);
                "corrupt"
            }
            // (The CLI opens what it is given, symlinks included; only the daemon refuses.)
            CliError::Open(OpenError::NotAFile { .. } | OpenError::NotInRoots { .. }) => "notAFile",
            CliError::Open(OpenError::Pending { age_ms, .. }) => {
                e["ageMs"] = json!(age_ms);
                "pending"
            }
            CliError::UnknownEntry { unknown, .. }
            | CliError::Compact(CompactError::UnknownLeaf { unknown, .. }) => {
                e["id"] = json!(unknown.id);
                if unknown.is_ambiguous() {
                    e["candidates"] = json!(unknown.candidates);
                }
                "unknownEntry"
            }
            CliError::Write(w) | CliError::Compact(CompactError::Write(w)) => {
                write_details(w, &mut e);
                w.kind()
            }
            CliError::Compact(CompactError::Compaction {
                source: CompactionError::PiWouldThrow { entry_id, .. },
                ..
            }) => {
                e["entryId"] = json!(entry_id);
                "piWouldThrow"
            }
            CliError::Argument { .. } => "argument",
            CliError::Archive(a) => a.kind(),
            CliError::Rewind(r) => match r {
                crate::rewind::RewindError::Changed { .. } => "changed",
                crate::rewind::RewindError::UndoDrift { paths } => {
                    e["paths"] = json!(paths);
                    "drift"
                }
                crate::rewind::RewindError::Manifest { .. } => "manifest",
                crate::rewind::RewindError::Io { .. } => "io",
            },
            CliError::UnsupportedForFormat {
                format, operation, ..
            } => {
                e["format"] = json!(format);
                e["operation"] = json!(operation);
                "unsupportedForFormat"
            }
            CliError::AgentActive { agent, .. } => {
                e["agent"] = json!(crate::view::convert::agent(agent));
                "agentActive"
            }
            CliError::Compact(CompactError::Model { source, .. }) => {
                e["provider"] = json!(source.provider());
                e["modelError"] = json!(source.kind());
                if let Some(status) = source.status() {
                    e["status"] = json!(status);
                }
                "model"
            }
            CliError::Open(OpenError::Io { .. })
            | CliError::Render { .. }
            | CliError::Transcript { .. }
            | CliError::Compact(_)
            | CliError::Output(_)
            | CliError::Spool { .. } => "io",
        };
        e["kind"] = json!(kind);
        json!({ "error": e }).to_string()
    }
}

/// Who reports a corrupt file, for [`salvage_hint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reporter {
    /// A reading command, which also has --allow-corrupt.
    Read,
    /// A write, refused.
    Write,
    /// `check`, whose job is the report, on a file of this format (`None`: its first line
    /// names no format).
    Check(Option<Dialect>),
}

/// What to do about a corrupt file, after its error: salvage (and, for a command that reads,
/// a lenient read) when the file has a header to start from; nothing for a file that is no
/// session at all, where salvage has nothing to start from either. A format sessiond does not
/// write ([`Dialect::writable`]) cannot be salvaged: `check` points to a lenient read only.
pub fn salvage_hint(corruption: Option<&Corruption>, by: Reporter) -> String {
    match (corruption, by) {
        (Some(c), _) if !c.kind.salvageable() => String::new(),
        (None, _) => String::new(),
        (Some(_), Reporter::Read) => {
            let hint = " (--allow-corrupt reads it as its agent does; `sessiond salvage FILE` \
                        writes a pi session's readable entries to a new file)";
            hint.into()
        }
        (Some(_), Reporter::Write) => {
            " (nothing written; `sessiond salvage FILE` writes its readable entries to a new file)"
                .into()
        }
        (Some(_), Reporter::Check(Some(format))) if !format.writable() => format!(
            " (--allow-corrupt reads it as {} does; `salvage` writes pi sessions only)",
            format.agent()
        ),
        (Some(_), Reporter::Check(_)) => {
            " (`sessiond salvage FILE` writes its readable entries to a new file)".into()
        }
    }
}

/// The corruption a write error reports, if it is one.
fn write_corruption(e: &WriteError) -> Option<&Corruption> {
    match e {
        WriteError::Corrupt { corruption, .. } => Some(corruption),
        _ => None,
    }
}

/// The exit code of a write error.
fn write_exit(e: &WriteError) -> Exit {
    match e {
        WriteError::Corrupt { .. } => Exit::Corrupt,
        WriteError::Conflict { .. } | WriteError::Taken(_) | WriteError::Replaced { .. } => {
            Exit::Conflict
        }
        WriteError::Busy { .. } => Exit::Busy,
        WriteError::UnsupportedForFormat { .. } => Exit::UnsupportedForFormat,
        WriteError::Io { .. }
        | WriteError::UnknownEntry { .. }
        | WriteError::InvalidEntry { .. }
        | WriteError::NotAUserMessage { .. }
        | WriteError::UnsupportedVersion { .. }
        | WriteError::InvalidSessionId { .. } => Exit::Error,
    }
}

/// The fields a write error adds to its JSON error object.
fn write_details(e: &WriteError, err: &mut Value) {
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
}

/// An id for an error message, cut to 80 characters (a pasted blob should not flood stderr).
/// The words of an id argument that names no entry: where to list the ids, or, for a prefix
/// of several, a few of them.
fn unknown_entry(path: &Path, unknown: &UnknownId, what: &str) -> String {
    if unknown.is_ambiguous() {
        return format!("{}: {}", path.display(), unknown.describe(what));
    }
    format!(
        "{}: unknown {what} {} (`sessiond tree {} --full` lists the ids)",
        path.display(),
        shorten(&unknown.id),
        path.display()
    )
}

fn shorten(id: &str) -> String {
    match id.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &id[..at]),
        None => id.to_owned(),
    }
}

/// The exit code of an archive error.
fn archive_exit(e: &crate::archive::ArchiveError) -> Exit {
    match e {
        crate::archive::ArchiveError::Exists { .. } => Exit::Conflict,
        crate::archive::ArchiveError::Damaged { .. } => Exit::Corrupt,
        crate::archive::ArchiveError::Rewrite { .. } => Exit::UnsupportedForFormat,
        crate::archive::ArchiveError::Io { .. }
        | crate::archive::ArchiveError::NoSpace { .. }
        | crate::archive::ArchiveError::NotAnArchive { .. }
        | crate::archive::ArchiveError::NoSuchSession { .. } => Exit::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_numeric_order_and_every_code_is_distinct() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert!(codes.windows(2).all(|w| w[0] < w[1]), "{codes:?}");
        assert!(
            Exit::help(None).contains("\n  8  `verify`"),
            "{}",
            Exit::help(None)
        );
    }

    #[test]
    fn every_code_has_a_meaning_for_all_commands_and_each_family_a_subset() {
        use Family::*;
        for e in Exit::ALL {
            assert!(e.meaning(None).is_some(), "{e:?}");
        }
        for family in [
            Read, Check, Append, Compact, Fork, Salvage, Serve, Tool, Verify, Search, Rewind,
        ] {
            assert!(Exit::Ok.meaning(Some(family)).is_some(), "{family:?}");
        }
        // Only the appending commands have --expected-leaf.
        for family in [Read, Check, Fork, Salvage, Serve, Tool, Verify] {
            let help = Exit::help(Some(family));
            assert!(!help.contains("expected-leaf"), "{family:?}: {help}");
        }
        assert_eq!(Exit::NoShutdown.meaning(Some(Read)), None);
        assert_eq!(Exit::RetentionLost.meaning(Some(Append)), None);
    }
}
