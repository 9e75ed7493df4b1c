//! The server's notifications: `session/didChange`, `didReload`, `didCorrupt`, `fileMissing`,
//! `fileRestored`, `didChangeLiveMode`, `didCreate` and `didChangeList`, their params and the queue of those waiting to go.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tower_lsp_server::ls_types::notification::Notification;

use crate::core::diagnostics::Corruption;
use crate::core::tree::NodeIdx;
use crate::js::timestamp;
use crate::session::opened::Opened;
use crate::session::owner::{ReloadReason, Session};
use crate::view::convert::{agent, leaf_id, leaves, node, revision};
use crate::view::wire::AgentInfo;

/// `session/didChange` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DidChangeParams {
    /// Canonical session file path.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// The new entries as nodes, in file order.
    pub added: Vec<Value>,
    /// Last entry in file order after the change.
    pub leaf_id: Option<String>,
    /// All entries without children, in file order.
    pub leaves: Vec<String>,
    /// Entries in the tree.
    pub entry_count: usize,
    /// Revision after the change, `{entryCount, appliedBytes, generation}`.
    pub revision: Value,
    /// The agent working on the session, as looked up at most a second before.
    pub agent: Option<AgentInfo>,
}

/// `session/didReload` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DidReloadParams {
    /// Canonical session file path.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// `shrank`, `replaced`, `rewritten`, or `born` (a pending session's header arrived).
    pub reason: String,
    /// Last entry in file order after the reload.
    pub leaf_id: Option<String>,
    /// All entries without children, in file order.
    pub leaves: Vec<String>,
    /// Entries in the tree.
    pub entry_count: usize,
    /// Revision after the reload, `{entryCount, appliedBytes, generation}`.
    pub revision: Value,
}

/// `session/didCorrupt` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DidCorruptParams {
    /// Canonical session file path.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// Corruption kind (`invalidJson`, `duplicateId`, ...), as in -33003's `data.kind`.
    pub kind: String,
    /// 1-based line number of the bad line.
    pub line: u32,
    /// Byte offset of the bad line.
    pub offset: u64,
    /// The bad entry's id, when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Human-readable description naming the problem.
    pub message: String,
    /// Revision of the last good state, which the session keeps.
    pub revision: Value,
}

/// `session/fileMissing` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileMissingParams {
    /// Canonical session file path (the path that no longer names a file).
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
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
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
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
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// `events`, `polling` or `requests` (see `crate::watch::LiveMode`).
    pub live_mode: String,
}

/// `session/didCreate` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DidCreateParams {
    /// Canonical path of the new session file.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// `pi`, `claude-code` or `codex`.
    pub format: String,
    /// The new session's id (pi's header `id`, a transcript's file name), null when unread.
    pub session_id: Option<String>,
    /// For a Claude Code subagent's transcript, the transcript that started it (as
    /// `session/list` marks it); null for any other session.
    pub subagent: Option<crate::listing::Subagent>,
    /// For a Codex fork or revert segment, what it continues; null for any other session.
    pub thread: Option<crate::dialect::codex::lineage::ThreadLink>,
}

/// `session/didChangeList` params: what changed under the roots the client listed.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DidChangeListParams {
    /// New or changed sessions, each exactly as a `session/list` result lists it.
    pub changed: Vec<crate::listing::ListedSession>,
    /// Paths of listed sessions that are gone (deleted, moved away, no longer a session), as
    /// `session/list` gave them.
    pub removed: Vec<String>,
}

/// Declares server notifications: a marker type per method, tied to its params.
macro_rules! notifications {
    ($($(#[$doc:meta])* $name:ident($params:ty) = $method:literal;)*) => {$(
        $(#[$doc])*
        pub enum $name {}
        impl Notification for $name {
            type Params = $params;
            const METHOD: &'static str = $method;
        }
    )*};
}

notifications! {
    /// `session/didChange`.
    DidChange(DidChangeParams) = "session/didChange";
    /// `session/didReload`.
    DidReload(DidReloadParams) = "session/didReload";
    /// `session/didCorrupt`.
    DidCorrupt(DidCorruptParams) = "session/didCorrupt";
    /// `session/fileMissing`.
    FileMissing(FileMissingParams) = "session/fileMissing";
    /// `session/fileRestored`.
    FileRestored(FileRestoredParams) = "session/fileRestored";
    /// `session/didChangeLiveMode`.
    DidChangeLiveMode(DidChangeLiveModeParams) = "session/didChangeLiveMode";
    /// `session/didCreate`.
    DidCreate(DidCreateParams) = "session/didCreate";
    /// `session/didChangeList`.
    DidChangeList(DidChangeListParams) = "session/didChangeList";
}

/// A notification waiting to be sent, in the order the sessions produced them.
#[derive(Debug)]
pub enum Outgoing {
    /// Sent as `session/didChange`.
    DidChange(DidChangeParams),
    /// Sent as `session/didReload`.
    DidReload(DidReloadParams),
    /// Sent as `session/didCorrupt`.
    DidCorrupt(DidCorruptParams),
    /// Sent as `session/fileMissing`.
    FileMissing(FileMissingParams),
    /// Sent as `session/fileRestored`.
    FileRestored(FileRestoredParams),
    /// Sent as `session/didChangeLiveMode`.
    DidChangeLiveMode(DidChangeLiveModeParams),
    /// Sent as `session/didCreate`.
    DidCreate(DidCreateParams),
    /// Sent as `session/didChangeList`.
    DidChangeList(DidChangeListParams),
}

/// `session/didChange` for entries just applied.
pub fn did_change(session: &Session, added: std::ops::Range<NodeIdx>) -> DidChangeParams {
    let source = session.source();
    let nodes = |added: std::ops::Range<NodeIdx>| -> Vec<Value> {
        match session.opened() {
            Opened::Pi(s) => added
                .map(|n| json!(node(s.tree(), source, n, false)))
                .collect(),
            Opened::Claude(s) => added
                .map(|n| json!(node(&s.tree, source, n, false)))
                .collect(),
            Opened::Codex(s) => added
                .map(|n| json!(node(&s.tree, source, n, false)))
                .collect(),
        }
    };
    let (leaf_id, leaves) = leaf_ids(session);
    DidChangeParams {
        path: session.path().to_owned(),
        added: nodes(added),
        leaf_id,
        leaves,
        entry_count: session.len(),
        revision: json!(revision(session.revision())),
        agent: session.agent().as_ref().map(agent),
    }
}

/// `session/didReload`.
pub fn did_reload(session: &Session, reason: ReloadReason) -> DidReloadParams {
    let (leaf_id, leaves) = leaf_ids(session);
    DidReloadParams {
        path: session.path().to_owned(),
        reason: reason.as_str().to_owned(),
        leaf_id,
        leaves,
        entry_count: session.len(),
        revision: json!(revision(session.revision())),
    }
}

/// `session/didCorrupt`.
pub fn did_corrupt(session: &Session, c: &Corruption) -> DidCorruptParams {
    DidCorruptParams {
        path: session.path().to_owned(),
        kind: c.kind.as_str().to_owned(),
        line: c.line,
        offset: c.offset,
        id: c.id.as_ref().map(ToString::to_string),
        message: c.message.clone(),
        revision: json!(revision(session.revision())),
    }
}

/// `session/fileMissing`. `since` is when the owner found the path empty (now, if unknown).
pub fn file_missing(session: &Session) -> FileMissingParams {
    let since = session
        .missing_since()
        .unwrap_or_else(std::time::SystemTime::now)
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    FileMissingParams {
        path: session.path().to_owned(),
        since: timestamp::format_iso(since),
        revision: json!(revision(session.revision())),
    }
}

/// `session/fileRestored`.
pub fn file_restored(session: &Session) -> FileRestoredParams {
    FileRestoredParams {
        path: session.path().to_owned(),
        revision: json!(revision(session.revision())),
    }
}

/// `session/didChangeLiveMode`.
pub fn did_change_live_mode(session: &Session) -> DidChangeLiveModeParams {
    DidChangeLiveModeParams {
        path: session.path().to_owned(),
        live_mode: session.live_mode().as_str().to_owned(),
    }
}

/// `session/didCreate` params for a session file that appeared beside an open session.
pub fn did_create(created: &crate::session::births::Created) -> DidCreateParams {
    DidCreateParams {
        path: created.path.clone(),
        format: created.dialect.as_str().to_owned(),
        session_id: created.session_id.clone(),
        subagent: created.subagent.clone(),
        thread: created.thread.clone(),
    }
}

/// `session/didChangeList` for a change of the listing.
pub fn did_change_list(change: crate::listing_live::ListChange) -> DidChangeListParams {
    DidChangeListParams {
        changed: change.changed,
        removed: change
            .removed
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
    }
}

/// The default leaf's id and the ids of every leaf, whatever the session's dialect.
fn leaf_ids(session: &Session) -> (Option<String>, Vec<String>) {
    match session.opened() {
        Opened::Pi(s) => (leaf_id(s.tree()), leaves(s.tree())),
        Opened::Claude(s) => (leaf_id(&s.tree), leaves(&s.tree)),
        Opened::Codex(s) => (leaf_id(&s.tree), leaves(&s.tree)),
    }
}
