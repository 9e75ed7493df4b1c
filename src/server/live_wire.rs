//! Wire types of the notifications about how an open session is followed: its file went
//! missing or came back, and the live mode changed. Shapes are documented in
//! `protocol/README.md` and `protocol/schema/`; [`super::convert`] builds them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_lsp_server::ls_types::notification::Notification;

/// `session/fileMissing` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileMissingParams {
    /// Canonical session file path (the path that no longer names a file).
    pub path: PathBuf,
    /// When the daemon found the file missing, `YYYY-MM-DDTHH:mm:ss.sssZ` (UTC).
    pub since: String,
    /// Revision of the last good state, which the session keeps.
    pub revision: Value,
}

/// `session/fileRestored` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileRestoredParams {
    /// Canonical session file path.
    pub path: PathBuf,
    /// Revision before anything the returned file holds is applied (a `didReload` or
    /// `didChange` follows when it differs).
    pub revision: Value,
}

/// `session/didChangeLiveMode` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DidChangeLiveModeParams {
    /// Canonical session file path.
    pub path: PathBuf,
    /// `events`, `polling` or `requests` (see `crate::watch::LiveMode`).
    pub live_mode: String,
}

/// `session/fileMissing`.
pub enum FileMissing {}
impl Notification for FileMissing {
    type Params = FileMissingParams;
    const METHOD: &'static str = "session/fileMissing";
}

/// `session/fileRestored`.
pub enum FileRestored {}
impl Notification for FileRestored {
    type Params = FileRestoredParams;
    const METHOD: &'static str = "session/fileRestored";
}

/// `session/didChangeLiveMode`.
pub enum DidChangeLiveMode {}
impl Notification for DidChangeLiveMode {
    type Params = DidChangeLiveModeParams;
    const METHOD: &'static str = "session/didChangeLiveMode";
}

/// A notification of this module waiting to be sent.
#[derive(Debug)]
pub enum LiveOutgoing {
    /// Sent as `session/fileMissing`.
    FileMissing(FileMissingParams),
    /// Sent as `session/fileRestored`.
    FileRestored(FileRestoredParams),
    /// Sent as `session/didChangeLiveMode`.
    DidChangeLiveMode(DidChangeLiveModeParams),
}
