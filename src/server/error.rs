//! Errors of the daemon's methods and the one function that assigns their JSON-RPC codes.
//!
//! Codes are stable and documented in `protocol/README.md`. sessiond's own codes live below
//! the range JSON-RPC reserves (-32768..-32000) so they never collide with the framework's
//! (-32700 parse error, -32600 invalid request, -32601 method not found, -32602 invalid
//! params, -32002 server not initialized).

use std::path::PathBuf;

use serde_json::json;
use thiserror::Error;
use tower_lsp_server::jsonrpc::{self, ErrorCode};

use crate::core::render::RenderError;
use crate::session::SessionError;
use crate::session::roots::RootError;
use crate::storage::reader::OpenError;

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
/// Invalid params (the JSON-RPC standard code).
pub const INVALID_PARAMS: i64 = -32602;

/// Why a method failed.
#[derive(Debug, Error)]
pub enum RpcError {
    #[error("{method}: invalid params: {detail}")]
    InvalidParams {
        method: &'static str,
        detail: String,
    },
    #[error(transparent)]
    Root(#[from] RootError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("{}: unknown entry id {id}", path.display())]
    UnknownEntry { path: PathBuf, id: String },
    #[error("{}: {source}", path.display())]
    Render { path: PathBuf, source: RenderError },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl RpcError {
    /// The JSON-RPC error: the only place codes are assigned.
    pub fn to_jsonrpc(&self) -> jsonrpc::Error {
        let path_data = |p: &PathBuf| json!({ "path": p });
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
                OpenError::Io { path, .. } => (IO_ERROR, Some(path_data(path))),
                OpenError::Corrupt { path, corruption } => {
                    let mut data = json!({
                        "path": path,
                        "kind": corruption.kind,
                        "line": corruption.line,
                        "offset": corruption.offset,
                    });
                    if let Some(id) = &corruption.id {
                        data["id"] = json!(id.as_str());
                    }
                    (SESSION_CORRUPT, Some(data))
                }
            },
            RpcError::Session(SessionError::NotOpen { path }) => {
                (SESSION_NOT_OPEN, Some(path_data(path)))
            }
            RpcError::Session(SessionError::OwnerGone { path }) => {
                (SESSION_NOT_OPEN, Some(path_data(path)))
            }
            RpcError::UnknownEntry { path, id } => {
                (UNKNOWN_ENTRY, Some(json!({ "path": path, "id": id })))
            }
            RpcError::Render { path, .. } | RpcError::Io { path, .. } => {
                (IO_ERROR, Some(path_data(path)))
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
