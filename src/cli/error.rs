//! The exit-code table and the one error type of every subcommand: its message for stderr,
//! its JSON document for stdout under `--json`, and its exit code (taken from [`Exit`]).

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value, json};
use thiserror::Error;

use crate::compact::{self, CompactError};
use crate::core::compaction::CompactionError;
use crate::core::render::RenderError;
use crate::storage::reader::OpenError;
use crate::storage::writer::WriteError;

/// The process exit codes of every subcommand. The one table: `--help` prints it
/// ([`Exit::help`]) and every error maps onto it ([`CliError::exit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The command did what was asked (also "nothing to compact").
    Ok,
    /// A usage error (clap's own code), an I/O error, an unknown id, an invalid entry or an
    /// unsupported version.
    Error,
    /// The session file is corrupt; nothing was written.
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
}

impl Exit {
    /// Every exit code, in numeric order.
    pub const ALL: [Exit; 7] = [
        Exit::Ok,
        Exit::Error,
        Exit::Corrupt,
        Exit::Conflict,
        Exit::RetentionLost,
        Exit::PiWouldFail,
        Exit::Busy,
    ];

    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Error => 2,
            Exit::Corrupt => 3,
            Exit::Conflict => 4,
            Exit::RetentionLost => 5,
            Exit::PiWouldFail => 6,
            Exit::Busy => 7,
        }
    }

    /// What the code means, as `--help` says it.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Error => "usage, I/O, unknown id, invalid entry or unsupported version",
            Exit::Corrupt => "corrupt session file (nothing written; see `salvage`)",
            Exit::Conflict => "conflict (stale --expected-leaf, id taken, file changed)",
            Exit::RetentionLost => "retention lost (compact --require-retention)",
            Exit::PiWouldFail => "pi itself would fail to compact this session",
            Exit::Busy => "busy (a writer is mid-line or holds the lock; retry)",
        }
    }

    /// `Exit codes: 0 ok; 2 …; …`: the table as one paragraph, for `--help` and the README.
    pub fn help() -> String {
        let codes: Vec<String> = Exit::ALL
            .iter()
            .map(|e| format!("{} {}", e.code(), e.meaning()))
            .collect();
        format!("Exit codes: {}", codes.join("; "))
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
    #[error(transparent)]
    Open(#[from] OpenError),
    /// An id argument names no entry.
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
    /// A write was refused or failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A compaction was refused or failed.
    #[error(transparent)]
    Compact(#[from] CompactError),
    /// An argument's value is unusable (a file that cannot be read, text that is not JSON).
    #[error("{arg}: {detail}")]
    Argument {
        /// The argument, as written on the command line (`--summary-file`, `--details`).
        arg: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// Writing to stdout failed.
    #[error("cannot write output: {0}")]
    Output(#[from] io::Error),
}

impl CliError {
    /// The exit code, from the [`Exit`] table.
    pub fn exit(&self) -> Exit {
        match self {
            CliError::Open(OpenError::Corrupt { .. }) => Exit::Corrupt,
            // A file being created: like a writer mid-line, retry.
            CliError::Open(OpenError::Pending { .. }) => Exit::Busy,
            CliError::Write(w) | CliError::Compact(CompactError::Write(w)) => write_exit(w),
            CliError::Compact(CompactError::RetentionLost { .. }) => Exit::RetentionLost,
            CliError::Compact(CompactError::Compaction {
                source: CompactionError::PiWouldThrow { .. },
                ..
            }) => Exit::PiWouldFail,
            CliError::Open(_)
            | CliError::UnknownEntry { .. }
            | CliError::Render { .. }
            | CliError::Compact(_)
            | CliError::Argument { .. }
            | CliError::Output(_) => Exit::Error,
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
            CliError::Open(OpenError::NotAFile { .. }) => "notAFile",
            CliError::Open(OpenError::Pending { age_ms, .. }) => {
                e["ageMs"] = json!(age_ms);
                "pending"
            }
            CliError::UnknownEntry { id, .. }
            | CliError::Compact(CompactError::UnknownLeaf { id, .. }) => {
                e["id"] = json!(id);
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
            CliError::Open(OpenError::Io { .. })
            | CliError::Render { .. }
            | CliError::Compact(_)
            | CliError::Output(_) => "io",
        };
        e["kind"] = json!(kind);
        json!({ "error": e }).to_string()
    }
}

/// The exit code of a write error.
fn write_exit(e: &WriteError) -> Exit {
    match e {
        WriteError::Corrupt { .. } => Exit::Corrupt,
        WriteError::Conflict { .. }
        | WriteError::Reserved { .. }
        | WriteError::Exists { .. }
        | WriteError::Replaced { .. } => Exit::Conflict,
        WriteError::Busy { .. } => Exit::Busy,
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
fn shorten(id: &str) -> String {
    match id.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &id[..at]),
        None => id.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_numeric_order_and_every_code_is_distinct() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert!(codes.windows(2).all(|w| w[0] < w[1]), "{codes:?}");
        assert!(Exit::help().contains("7 busy"), "{}", Exit::help());
    }
}
