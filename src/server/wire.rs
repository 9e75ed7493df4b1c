//! Wire types of the `session/` methods and notifications: params as received, results and
//! notifications as sent. Field names are camelCase like pi's. Shapes are documented in
//! `protocol/README.md` and `protocol/schema/`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_lsp_server::ls_types::ProgressToken;
use tower_lsp_server::ls_types::notification::Notification;

/// `session/open` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenParams {
    pub path: PathBuf,
    #[serde(default)]
    pub allow_corrupt: bool,
}

/// `session/close` params.
#[derive(Debug, Deserialize)]
pub struct CloseParams {
    pub path: PathBuf,
}

/// `session/tree` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeParams {
    pub path: PathBuf,
    pub from_id: Option<String>,
    pub depth: Option<usize>,
    pub limit: Option<usize>,
}

/// `session/entry` params.
#[derive(Debug, Deserialize)]
pub struct EntryParams {
    pub path: PathBuf,
    pub id: String,
}

/// `session/contextAt` `fields`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum FieldsParam {
    Ids,
    Previews,
    #[default]
    Full,
}

/// `session/contextAt` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextAtParams {
    pub path: PathBuf,
    pub leaf_id: Option<String>,
    #[serde(default)]
    pub offset: usize,
    pub limit: Option<usize>,
    #[serde(default)]
    pub fields: FieldsParam,
}

/// `session/explain` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplainParams {
    pub path: PathBuf,
    pub entry_id: String,
    pub leaf_id: Option<String>,
}

/// `session/list` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    pub root: Option<PathBuf>,
    /// LSP work-done token: when given, a long listing reports `$/progress` under it.
    pub work_done_token: Option<ProgressToken>,
}

/// A field that must be present and may be `null` (`expectedLeafId`, `fromId`): `None` when
/// absent, `Some(None)` for `null`. Use with `#[serde(default, deserialize_with = "nullable")]`.
pub fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// `session/fork` `position`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ForkPosition {
    /// The new session ends with the entry.
    At,
    /// The new session ends at the entry's parent (the entry must be a user message).
    Before,
}

/// `session/fork` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkParams {
    pub path: PathBuf,
    pub entry_id: String,
    pub position: ForkPosition,
    pub target_dir: Option<PathBuf>,
    pub session_id: Option<String>,
}

/// `session/salvage` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SalvageParams {
    pub path: PathBuf,
    pub target_dir: Option<PathBuf>,
}

/// `session/label` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelParams {
    pub path: PathBuf,
    pub target_id: String,
    /// `null` (or absent) clears the label.
    pub label: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub expected_leaf_id: Option<Option<String>>,
}

/// `session/setName` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetNameParams {
    pub path: PathBuf,
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub expected_leaf_id: Option<Option<String>>,
}

/// `session/branch` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchParams {
    pub path: PathBuf,
    /// The entry the branch starts from; `null`: before the first entry.
    #[serde(default, deserialize_with = "nullable")]
    pub from_id: Option<Option<String>>,
    /// With a summary a `branch_summary` entry is written; without, nothing is.
    pub summary: Option<String>,
    pub details: Option<Value>,
    #[serde(default, deserialize_with = "nullable")]
    pub expected_leaf_id: Option<Option<String>>,
}

/// `session/append` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendParams {
    pub path: PathBuf,
    /// The entry as a JSON object, or as JSON text (whose field bytes are kept exactly).
    pub entry: Value,
    /// Absent: the session's leaf; `null`: a new root.
    #[serde(default, deserialize_with = "nullable")]
    pub parent_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub expected_leaf_id: Option<Option<String>>,
}

/// `session/prepareCompaction` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepareCompactionParams {
    pub path: PathBuf,
    pub leaf_id: Option<String>,
    pub keep_recent_tokens: Option<u64>,
    pub custom_instructions: Option<String>,
}

/// `session/compact` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactParams {
    pub path: PathBuf,
    pub leaf_id: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub expected_leaf_id: Option<Option<String>>,
    pub keep_recent_tokens: Option<u64>,
    pub summary: Option<String>,
    pub custom_instructions: Option<String>,
    #[serde(default)]
    pub require_retention: bool,
    #[serde(default)]
    pub dry_run: bool,
}

/// A revision: entry count, bytes of the file applied, and how many times the session was
/// reloaded. Equal revisions mean equal state.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    pub entry_count: usize,
    pub applied_bytes: u64,
    pub generation: u64,
}

/// One tree node.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    pub id: String,
    pub parent_id: Option<String>,
    #[serde(rename = "type")]
    pub entry_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub preview: String,
    /// The entry's `timestamp` as written (usually an ISO string).
    pub timestamp: Value,
    pub child_count: usize,
    /// Child ids, present when every child is in the same message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<String>>,
}

/// `session/open` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenResult {
    pub path: PathBuf,
    pub session_id: String,
    pub header: Value,
    pub leaf_id: Option<String>,
    pub leaves: Vec<String>,
    pub entry_count: usize,
    pub name: Option<String>,
    pub torn_tail: Option<crate::storage::reader::TornTail>,
    pub diagnostics: Value,
    pub revision: Revision,
}

/// `session/tree` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeResult {
    /// Breadth-first from the roots (or from `fromId`, included).
    pub nodes: Vec<Node>,
    /// Root ids (only when `fromId` is absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roots: Option<Vec<String>>,
    /// True when no node in `nodes` has children left out.
    pub complete: bool,
    pub leaf_id: Option<String>,
    pub entry_count: usize,
    pub revision: Revision,
}

/// `session/entry` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryResult {
    pub id: String,
    /// 1-based line number and byte offset of the entry's line.
    pub line: u32,
    pub offset: u64,
    /// The line as parsed JSON.
    pub entry: Value,
    /// The line exactly as stored (without its newline).
    pub raw: String,
    pub revision: Revision,
}

/// One session in a `session/list` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSession {
    pub path: PathBuf,
    pub id: String,
    pub cwd: Option<String>,
    /// The header's `timestamp`.
    pub created: Value,
    /// The file's modification time, ISO 8601 UTC.
    pub modified: Option<String>,
    pub size: u64,
    /// The session name, given only for sessions the daemon has open (it needs a full read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `session/list` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResult {
    pub root: PathBuf,
    pub sessions: Vec<ListedSession>,
    /// Files that end in `.jsonl` but have no readable session header.
    pub skipped: Vec<PathBuf>,
}

/// `session/didChange` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DidChangeParams {
    pub path: PathBuf,
    pub added: Vec<Value>,
    pub leaf_id: Option<String>,
    pub leaves: Vec<String>,
    pub entry_count: usize,
    pub revision: Value,
}

/// `session/didReload` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DidReloadParams {
    pub path: PathBuf,
    pub reason: String,
    pub leaf_id: Option<String>,
    pub leaves: Vec<String>,
    pub entry_count: usize,
    pub revision: Value,
}

/// `session/didCorrupt` params.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DidCorruptParams {
    pub path: PathBuf,
    pub kind: String,
    pub line: u32,
    pub offset: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub message: String,
    pub revision: Value,
}

/// `session/didChange`.
pub enum DidChange {}
impl Notification for DidChange {
    type Params = DidChangeParams;
    const METHOD: &'static str = "session/didChange";
}

/// `session/didReload`.
pub enum DidReload {}
impl Notification for DidReload {
    type Params = DidReloadParams;
    const METHOD: &'static str = "session/didReload";
}

/// `session/didCorrupt`.
pub enum DidCorrupt {}
impl Notification for DidCorrupt {
    type Params = DidCorruptParams;
    const METHOD: &'static str = "session/didCorrupt";
}

/// A notification waiting to be sent.
#[derive(Debug)]
pub enum Outgoing {
    DidChange(DidChangeParams),
    DidReload(DidReloadParams),
    DidCorrupt(DidCorruptParams),
}
