//! Errors of the daemon's methods and the one function that assigns their JSON-RPC codes.
//!
//! Codes are stable and documented in `protocol/README.md`. sessiond's own codes live below
//! the range JSON-RPC reserves (-32768..-32000) so they never collide with the framework's
//! (-32700 parse error, -32600 invalid request, -32601 method not found, -32602 invalid
//! params, -32002 server not initialized).

use std::path::{Path, PathBuf};

use serde_json::json;
use thiserror::Error;
use tower_lsp_server::jsonrpc::{self, ErrorCode};

use crate::compact::CompactError;
use crate::core::diagnostics::Corruption;
use crate::core::tree::UnknownId;
use crate::dialect::Dialect;
use crate::dialect::pi::compaction::CompactionError;
use crate::dialect::pi::compaction::retention::ProbeResult;
use crate::dialect::pi::render::RenderError;
use crate::session::SessionError;
use crate::session::activity::Agent;
use crate::session::roots::RootError;
use crate::storage::publish::Taken;
use crate::storage::reader::{BIRTH_GRACE, OpenError};
use crate::storage::writer::{WriteError, WriteOptions};

/// The file does not exist (or is not a regular file).
pub const FILE_NOT_FOUND: i64 = -33001;
/// The path resolves outside every session root.
pub const OUTSIDE_ROOTS: i64 = -33002;
/// The session file is corrupt; `data` has `{kind, line, offset, id?}`.
pub const SESSION_CORRUPT: i64 = -33003;
/// No entry has the given id.
pub const UNKNOWN_ENTRY: i64 = -33004;
/// The path is not an open session (call `session/open` first).
pub const SESSION_NOT_OPEN: i64 = -33005;
/// Reading the file failed.
pub const IO_ERROR: i64 = -33006;
/// A write's `expectedLeafId` is stale; `data` has `{path, expectedLeafId, currentLeafId,
/// added}` (the ids of the entries after the expected leaf). Nothing was written.
pub const CONFLICT: i64 = -33010;
/// A writer is mid-line (an unterminated last line younger than the grace period) or another
/// sessiond holds the file's lock; `data` has `{path, reason, ageMs, retryAfterMs}`.
pub const BUSY: i64 = -33011;
/// The new session file's id is being created by another request (`reserved`) or a file with
/// it exists (`exists`); `data` has `{kind, sessionId, path?}`.
pub const SESSION_EXISTS: i64 = -33012;
/// The entry to write is malformed (or a requested session id is invalid); `data` has
/// `{path, detail}`.
pub const INVALID_ENTRY: i64 = -33013;
/// `requireRetention` and a retention probe would be lost; `data` has `{path, lost, retention}`.
/// Nothing was written.
pub const RETENTION_LOST: i64 = -33014;
/// Only version-3 sessions are appended to; `data` has `{path, version}`.
pub const UNSUPPORTED_VERSION: i64 = -33015;
/// `position: "before"` names an entry that is not a user message; `data` has `{path, id}`.
pub const NOT_A_USER_MESSAGE: i64 = -33016;
/// The file shrank or was replaced under the session during a write; `data` has `{path}`.
/// The session reloads; retry with the new view.
pub const FILE_CHANGED: i64 = -33017;
/// pi 1.6.0 itself would fail to compact this path (a malformed message); `data` has
/// `{path, entryId?}`.
pub const COMPACTION_FAILED: i64 = -33018;
/// An agent is working on the session (SPEC §4) and the write would change the context it
/// continues from; `data` has `{path, agent: {pid, command, evidence}}`. Nothing was written;
/// retry when the agent is done, or pass `force: true`.
pub const AGENT_ACTIVE: i64 = -33019;
/// Summarizing with a model failed or no model could be configured; `data` has `{path, kind,
/// provider?, status?}` (`kind`: `config`, `auth`, `http`, `connect`, `timeout`, `answer`).
/// Nothing was written; the message names the provider, never a credential.
pub const MODEL_FAILED: i64 = -33020;
/// The operation is not supported for the session's format (every write on a Claude Code
/// transcript but `fork`, and the methods not yet built for it); `data` has `{path, format,
/// operation}`. Nothing was written.
pub const UNSUPPORTED_FOR_FORMAT: i64 = -33021;
/// Invalid params (the JSON-RPC standard code).
pub const INVALID_PARAMS: i64 = -32602;

/// Every code an error response can carry: JSON-RPC's and LSP's as the transport and
/// tower-lsp-server send them (-32700 parse error, -32600 invalid request, -32601 method not
/// found, -32602 invalid params, -32002 server not initialized, -32800 request cancelled),
/// then sessiond's own. `protocol/README.md` and `protocol/schema/error.json` list exactly
/// these (a test checks).
pub const CODES: &[i64] = &[
    -32700,
    -32600,
    -32601,
    INVALID_PARAMS,
    -32002,
    -32800,
    FILE_NOT_FOUND,
    OUTSIDE_ROOTS,
    SESSION_CORRUPT,
    UNKNOWN_ENTRY,
    SESSION_NOT_OPEN,
    IO_ERROR,
    CONFLICT,
    BUSY,
    SESSION_EXISTS,
    INVALID_ENTRY,
    RETENTION_LOST,
    UNSUPPORTED_VERSION,
    NOT_A_USER_MESSAGE,
    FILE_CHANGED,
    COMPACTION_FAILED,
    AGENT_ACTIVE,
    MODEL_FAILED,
    UNSUPPORTED_FOR_FORMAT,
];

/// `unknownEntry`'s code and data: the path, the id as given and, for a prefix of several
/// ids, a few of them as `candidates`.
fn unknown_entry(path: &std::path::Path, unknown: &UnknownId) -> (i64, Option<serde_json::Value>) {
    let mut data = json!({ "path": path.to_string_lossy(), "id": unknown.id });
    if unknown.is_ambiguous() {
        data["candidates"] = json!(unknown.candidates);
    }
    (UNKNOWN_ENTRY, Some(data))
}

/// Why a method failed.
#[derive(Debug, Error)]
pub enum RpcError {
    /// Params are missing or of the wrong shape (-32602).
    #[error("{method}: invalid params: {detail}")]
    InvalidParams {
        /// The method whose params were rejected.
        method: &'static str,
        /// What was wrong, as serde reported it.
        detail: String,
    },
    /// A path is outside every session root or does not exist (-33002, -33001).
    #[error(transparent)]
    Root(#[from] RootError),
    /// The session is not open, could not be opened, or its owner is gone.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// An id in the params names no entry of the session, or is a prefix of several entries'
    /// ids (-33004; `data.candidates` then lists a few).
    #[error("{}: {unknown}", path.display())]
    UnknownEntry {
        /// The session file.
        path: PathBuf,
        /// The id as given, and the ids it begins when it is ambiguous.
        unknown: UnknownId,
    },
    /// Rendering a context or entry from the file failed (-33006).
    #[error("{}: {source}", path.display())]
    Render {
        /// The session file.
        path: PathBuf,
        /// The render failure.
        source: RenderError,
    },
    /// The session file could not be read, or a result not encoded (-33006).
    #[error("{}: {source}", path.display())]
    Io {
        /// The session file.
        path: PathBuf,
        /// The failed operation's error.
        source: std::io::Error,
    },
    /// A write was refused or failed (codes per [`WriteError`] kind).
    #[error(transparent)]
    Write(#[from] WriteError),
    /// Compaction was refused or failed (-33014, -33018, or a write error).
    #[error(transparent)]
    Compact(#[from] CompactError),
    /// The operation is not supported for the session's format (-33021).
    #[error(
        "{}: {operation} is not supported for a {} session (format {}): sessiond reads it but does not write to it",
        path.display(),
        format.agent(),
        format.as_str()
    )]
    UnsupportedForFormat {
        /// The session file.
        path: PathBuf,
        /// The session's format.
        format: Dialect,
        /// The refused operation (a method or command name).
        operation: &'static str,
    },
    /// A rewind could not be applied (I/O, or a file changed while it ran).
    #[error("{0}")]
    Rewind(crate::rewind::RewindError),
    /// A context-changing write while an agent works on the session (-33019).
    #[error(
        "{}: {agent}; the write would land beside it (force: true writes anyway)",
        path.display()
    )]
    AgentActive {
        /// The session file.
        path: PathBuf,
        /// The agent found.
        agent: Agent,
    },
}

fn corrupt_data(path: &Path, corruption: &Corruption) -> serde_json::Value {
    let mut data = json!({
        "path": path.to_string_lossy(),
        "kind": corruption.kind,
        "line": corruption.line,
        "offset": corruption.offset,
    });
    if let Some(id) = &corruption.id {
        data["id"] = json!(id.as_str());
    }
    data
}

/// The code and data of a writer error.
fn write_error(e: &WriteError) -> (i64, Option<serde_json::Value>) {
    let path_data = |p: &PathBuf| Some(json!({ "path": p.to_string_lossy() }));
    match e {
        WriteError::Io { path, .. } => (IO_ERROR, path_data(path)),
        WriteError::Corrupt { path, corruption } => {
            (SESSION_CORRUPT, Some(corrupt_data(path, corruption)))
        }
        WriteError::Conflict {
            path,
            expected,
            current_leaf,
            added,
        } => (
            CONFLICT,
            Some(json!({
                "path": path.to_string_lossy(),
                "expectedLeafId": expected,
                "currentLeafId": current_leaf,
                "added": added,
            })),
        ),
        WriteError::Busy {
            path,
            age_ms,
            reason,
        } => {
            let grace = WriteOptions::default().torn_grace.as_millis() as u64;
            // A young line is worth retrying once it is old enough to be judged; a held
            // lock, soon.
            let retry = if *age_ms > 0 && *age_ms < grace {
                grace - age_ms
            } else {
                250
            };
            (
                BUSY,
                Some(json!({
                    "path": path.to_string_lossy(),
                    "reason": reason,
                    "ageMs": age_ms,
                    "retryAfterMs": retry,
                })),
            )
        }
        WriteError::UnknownEntry { path, id, role } => (
            UNKNOWN_ENTRY,
            Some(json!({ "path": path.to_string_lossy(), "id": id, "role": role })),
        ),
        WriteError::InvalidEntry { path, source } => (
            INVALID_ENTRY,
            Some(json!({ "path": path.to_string_lossy(), "detail": source.to_string() })),
        ),
        WriteError::InvalidSessionId { id, .. } => (
            INVALID_ENTRY,
            Some(json!({ "sessionId": id, "detail": e.to_string() })),
        ),
        WriteError::NotAUserMessage { path, id } => (
            NOT_A_USER_MESSAGE,
            Some(json!({ "path": path.to_string_lossy(), "id": id })),
        ),
        WriteError::UnsupportedVersion { path, version } => (
            UNSUPPORTED_VERSION,
            Some(json!({ "path": path.to_string_lossy(), "version": version })),
        ),
        WriteError::Replaced { path, .. } => (FILE_CHANGED, path_data(path)),
        WriteError::Taken(Taken::Reserved { id, .. }) => (
            SESSION_EXISTS,
            Some(json!({ "kind": "reserved", "sessionId": id })),
        ),
        WriteError::UnsupportedForFormat { path, format } => (
            UNSUPPORTED_FOR_FORMAT,
            Some(json!({ "path": path.to_string_lossy(), "format": format, "operation": "write" })),
        ),
        WriteError::Taken(Taken::Exists { path, id }) => (
            SESSION_EXISTS,
            Some(json!({ "kind": "exists", "sessionId": id, "path": path.to_string_lossy() })),
        ),
    }
}

impl RpcError {
    /// A writer's refusal of the session's format ([`WriteError::UnsupportedForFormat`]) as
    /// the refusal of `operation`, so that the error names the method that was refused; any
    /// other error as it is.
    pub(crate) fn naming(self, operation: &'static str) -> RpcError {
        match self {
            RpcError::Write(WriteError::UnsupportedForFormat { path, format })
            | RpcError::Compact(CompactError::Write(WriteError::UnsupportedForFormat {
                path,
                format,
            })) => RpcError::UnsupportedForFormat {
                path,
                format,
                operation,
            },
            other => other,
        }
    }

    /// The JSON-RPC error: the only place codes are assigned.
    pub fn to_jsonrpc(&self) -> jsonrpc::Error {
        let path_data = |p: &PathBuf| json!({ "path": p.to_string_lossy() });
        let (code, data) = match self {
            RpcError::InvalidParams { .. } => (INVALID_PARAMS, None),
            RpcError::Root(RootError::Outside { path }) => (OUTSIDE_ROOTS, Some(path_data(path))),
            RpcError::Root(RootError::NotFound { path }) => (FILE_NOT_FOUND, Some(path_data(path))),
            RpcError::Root(RootError::Io { path, .. }) => (IO_ERROR, Some(path_data(path))),
            RpcError::Session(SessionError::Open(open)) => match open {
                OpenError::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                    (FILE_NOT_FOUND, Some(path_data(path)))
                }
                OpenError::NotAFile { path } => (FILE_NOT_FOUND, Some(path_data(path))),
                OpenError::NotInRoots { path } => (OUTSIDE_ROOTS, Some(path_data(path))),
                OpenError::Io { path, .. } => (IO_ERROR, Some(path_data(path))),
                OpenError::Corrupt { path, corruption } => {
                    (SESSION_CORRUPT, Some(corrupt_data(path, corruption)))
                }
                OpenError::Pending { path, age_ms } => (
                    BUSY,
                    Some(json!({
                        "path": path.to_string_lossy(),
                        "reason": "pending",
                        "ageMs": age_ms,
                        "retryAfterMs": (BIRTH_GRACE.as_millis() as u64).saturating_sub(*age_ms).max(50),
                    })),
                ),
            },
            RpcError::Session(SessionError::NotOpen { path }) => {
                (SESSION_NOT_OPEN, Some(path_data(path)))
            }
            RpcError::Session(SessionError::OwnerGone { path }) => {
                (SESSION_NOT_OPEN, Some(path_data(path)))
            }
            RpcError::UnknownEntry { path, unknown } => unknown_entry(path, unknown),
            RpcError::Render { path, .. } | RpcError::Io { path, .. } => {
                (IO_ERROR, Some(path_data(path)))
            }
            RpcError::Write(w) | RpcError::Compact(CompactError::Write(w)) => write_error(w),
            RpcError::Compact(CompactError::UnknownLeaf { path, unknown }) => {
                unknown_entry(path, unknown)
            }
            RpcError::Compact(CompactError::Compaction { path, source }) => match source {
                CompactionError::PiWouldThrow { entry_id, .. } => (
                    COMPACTION_FAILED,
                    Some(json!({ "path": path.to_string_lossy(), "entryId": entry_id })),
                ),
                CompactionError::Render(_) | CompactionError::IdTaken(_) => {
                    (IO_ERROR, Some(path_data(path)))
                }
            },
            RpcError::UnsupportedForFormat {
                path,
                format,
                operation,
            } => (
                UNSUPPORTED_FOR_FORMAT,
                Some(
                    json!({ "path": path.to_string_lossy(), "format": format, "operation": operation }),
                ),
            ),
            RpcError::Rewind(r) => match r {
                crate::rewind::RewindError::Changed { path, backup } => (
                    CONFLICT,
                    Some(json!({
                        "path": path.to_string_lossy(),
                        "backupDir": backup.to_string_lossy(),
                    })),
                ),
                crate::rewind::RewindError::UndoDrift { paths } => {
                    (CONFLICT, Some(json!({ "paths": paths })))
                }
                crate::rewind::RewindError::Io { path, .. }
                | crate::rewind::RewindError::Manifest { path, .. } => {
                    (IO_ERROR, Some(path_data(path)))
                }
            },
            RpcError::AgentActive { path, agent } => (
                AGENT_ACTIVE,
                Some(
                    json!({ "path": path.to_string_lossy(), "agent": crate::view::convert::agent(agent) }),
                ),
            ),
            RpcError::Compact(CompactError::Model { path, source }) => {
                let mut data = json!({"path": path.to_string_lossy(), "kind": source.kind()});
                if let Some(p) = source.provider() {
                    data["provider"] = json!(p);
                }
                if let Some(status) = source.status() {
                    data["status"] = json!(status);
                }
                (MODEL_FAILED, Some(data))
            }
            RpcError::Compact(CompactError::RetentionLost { path, plan }) => {
                let lost: Vec<&ProbeResult> = plan.retention.lost_probes().collect();
                (
                    RETENTION_LOST,
                    Some(json!({
                        "path": path.to_string_lossy(),
                        "lost": lost,
                        "retention": plan.retention,
                    })),
                )
            }
        };
        jsonrpc::Error {
            code: ErrorCode::from(code),
            message: self.to_string().into(),
            data,
        }
    }
}

impl From<RpcError> for jsonrpc::Error {
    fn from(e: RpcError) -> Self {
        e.to_jsonrpc()
    }
}
