//! Result shapes of the `session/` methods and of the CLI's `--json` output: what both front
//! doors print, built from the dialects' and storage's values by [`super::convert`]. Field
//! names are camelCase; shapes are documented in `protocol/README.md` and `protocol/schema/`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where the rest of a `session/tree` walk continues: the params to add (with `path`,
/// `depth` and `limit`) to ask for the next page. Serialized as `{"childrenOf": id}` or
/// `{"after": id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TreeCursor {
    /// None of this node's children is in the page.
    ChildrenOf(String),
    /// This node is in the page, some of its later siblings are not.
    After(String),
}

/// `session/export` result: the document and its counts. Borrows the document, which can be
/// hundreds of megabytes: it is serialized from where it was made, never copied into a `Value`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportResult<'a> {
    /// The session file.
    pub path: &'a Path,
    /// `md` or `html`.
    pub format: &'static str,
    /// The leaf exported (`null` for a session without entries).
    pub leaf_id: Option<String>,
    /// The page of the Markdown or HTML document: its bytes from `offset`.
    pub document: &'a str,
    /// Where the page starts in the document, in bytes.
    pub offset: usize,
    /// Where the next page starts; `None` on the last page.
    pub next_offset: Option<usize>,
    /// The whole document's length in bytes.
    pub document_bytes: usize,
    /// Names the document: the same on each of its pages.
    pub document_id: &'a str,
    /// Entries on the branch.
    pub entries: usize,
    /// Messages shown.
    pub messages: usize,
    /// Tool calls shown.
    pub tool_calls: usize,
    /// Strings redacted.
    pub redactions: usize,
    /// Whether redaction was on.
    pub redacted: bool,
    /// Outputs and arguments cut.
    pub truncated: usize,
    /// Images embedded.
    pub images: usize,
}

/// A revision: entry count, bytes of the file applied, and how many times the session was
/// reloaded. Equal revisions mean equal state.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    /// Entries in the tree.
    pub entry_count: usize,
    /// Bytes of the file applied so far.
    pub applied_bytes: u64,
    /// How many times the session was reloaded from the start.
    pub generation: u64,
}

/// One tree node.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// The entry's id.
    pub id: String,
    /// The entry's `parentId`; `None` for a root.
    pub parent_id: Option<String>,
    /// The entry's `type` (`message`, `compaction`, `label`, ...).
    #[serde(rename = "type")]
    pub entry_type: String,
    /// `message.role`; present for `message` entries only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The entry's current label, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// One line of at most 80 characters, counted as Unicode code points (JavaScript:
    /// `[...preview].length`; JSON Schema's `maxLength` counts the same way); a cut text ends
    /// with `…`.
    pub preview: String,
    /// The entry's `timestamp` as written (usually an ISO string).
    pub timestamp: Value,
    /// Number of children in the tree.
    pub child_count: usize,
    /// Child ids, present when every child is in the same message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<String>>,
}

/// `session/open` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenResult {
    /// The session's format: `pi` or `claude-code`.
    pub format: crate::dialect::Dialect,
    /// Canonical session file path.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// The header's `id`; `None` while the session is pending.
    pub session_id: Option<String>,
    /// The file has no session header yet and is younger than the grace period (2 s): it is
    /// being created. The session is followed; `session/didReload` with reason `born` tells
    /// when the header has arrived.
    pub pending: bool,
    /// The header line as parsed JSON; `null` while the session is pending.
    pub header: Value,
    /// Default leaf: the last entry in file order (`None` without entries).
    pub leaf_id: Option<String>,
    /// All entries without children, in file order.
    pub leaves: Vec<String>,
    /// Entries in the tree.
    pub entry_count: usize,
    /// Session name from the latest `session_info` entry, if any.
    pub name: Option<String>,
    /// `{line, offset, len}` of an unparsable unterminated last line, or `None`.
    pub torn_tail: Option<TornTail>,
    /// Problems found by a lenient (`allowCorrupt`) open; empty for a strict one.
    pub diagnostics: Value,
    /// Revision of the state this result describes.
    pub revision: Revision,
    /// How the daemon follows the file: `events`, `polling` or `requests`; changes are
    /// announced with `session/didChangeLiveMode`.
    pub live_mode: String,
    /// The agent working on the session right now, if any (see `crate::session::activity`).
    pub agent: Option<AgentInfo>,
}

/// An agent working on a session: a process found through `/proc`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct AgentInfo {
    /// Its process id.
    pub pid: u32,
    /// Its process name (`/proc/PID/comm`, e.g. `pi`); never the command line, which may hold
    /// credentials.
    pub command: String,
    /// Why it counts: `holdsFile` (holds the file open for writing), `toolEnvironment` (one of
    /// its tools has `PI_SESSION_FILE` naming the file) or `sessionCwd` (a `pi` in the
    /// session's cwd while the session's turn is open).
    pub evidence: String,
}

/// `session/tree` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeResult {
    /// Breadth-first from the page's start (the roots, `fromId`, the children of `childrenOf`
    /// or the siblings after `after`), each node once.
    pub nodes: Vec<Node>,
    /// Root ids (only on a page that starts at the roots).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roots: Option<Vec<String>>,
    /// True when `next` is empty: no node below the start was left out.
    pub complete: bool,
    /// The pages still to ask for, in breadth-first order. Asking for each (and for the
    /// `next` of those pages in turn) delivers every node below the start exactly once.
    pub next: Vec<TreeCursor>,
    /// Default leaf: the last entry in file order.
    pub leaf_id: Option<String>,
    /// Entries in the tree.
    pub entry_count: usize,
    /// Revision of the state this result describes.
    pub revision: Revision,
    /// A Codex rollout's thread ([`crate::dialect::codex::report::report`]): the chain it
    /// continues, the files that continue it, the current segment and each file of the tree
    /// as a run of lines. `None` for other formats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<Value>,
}

/// `session/graph` result and `sessiond graph --json`: the branch graph
/// ([`crate::view::graph`]), its nodes in row order and its text form.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphResult {
    /// The session file's format (`pi`, `claude-code`, `codex`).
    pub format: &'static str,
    /// The session name (the latest `session_info`), if any.
    pub name: Option<String>,
    /// Entries in the session.
    pub entry_count: usize,
    /// Entries without children.
    pub leaf_count: usize,
    /// Lanes of the widest row.
    pub lanes: usize,
    /// The default leaf: the last entry in file order.
    pub default_leaf_id: Option<String>,
    /// The leaf the context is computed at (`leafId`, else the default leaf).
    pub selected_leaf_id: Option<String>,
    /// The entries in context at the selected leaf, as `session/contextAt`'s `entryIds`; on
    /// the first page only (a page of a long path would otherwise repeat it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_entry_ids: Option<Vec<String>>,
    /// Rows of the whole graph.
    pub row_count: usize,
    /// The first row of this page.
    pub offset: usize,
    /// Where the next page starts; `null` on the last page.
    pub next_offset: Option<usize>,
    /// The page's nodes, one per row, depth-first.
    pub nodes: Vec<GraphNode>,
    /// The page's text form, one line each (`git log --graph` lanes), with the entry a line
    /// stands for: the header and legend on the first page, then each row's line and the
    /// connector under a branch point.
    pub lines: Vec<GraphLine>,
    /// Revision of the state this result describes (absent from the CLI's output).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<Revision>,
    /// A Claude Code subagent's own transcript: the transcript and tool call that started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<GraphParent>,
}

/// One node of [`GraphResult`]: an entry, or a fold of a single-child run.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphNode {
    /// `entry` or `fold`.
    pub kind: &'static str,
    /// The entry's id; for a fold, its first entry's.
    pub id: String,
    /// A fold's last entry (equal to `id` for an entry).
    pub last_id: String,
    /// How many entries the node holds.
    pub count: usize,
    /// The parent node's row; `null` for a root.
    pub parent_row: Option<usize>,
    /// The node's lane, 0 leftmost.
    pub lane: usize,
    /// The entry `type`.
    pub r#type: String,
    /// A message's role or the entry type; a fold's most frequent kinds (`8 assistant, 4 toolResult`).
    pub title: String,
    /// One line of the entry (a compaction: the range it summarizes); empty for a fold.
    pub preview: String,
    /// The resolved label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The name a `session_info` entry sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The (last) entry has no child.
    pub leaf: bool,
    /// The node holds the default leaf.
    pub default_leaf: bool,
    /// The node holds the selected leaf.
    pub selected_leaf: bool,
    /// The (last) entry has several children.
    pub branch_point: bool,
    /// The node's entries reach the model at the selected leaf.
    pub in_context: bool,
    /// The node is on the path from the root to the selected leaf.
    pub on_path: bool,
    /// A compaction's summarized range (pi's `prepareCompaction`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summarizes: Option<GraphRange>,
    /// The node belongs to a conversation apart from the main one (a subagent's sidechain);
    /// absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub apart: bool,
    /// A Claude Code compact boundary: the line it compacted (`logicalParentUuid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logical_parent_id: Option<String>,
    /// The row of `logicalParentId`, when that line is in the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logical_parent_row: Option<usize>,
    /// A Claude Code tool call that started a subagent's own transcript: that transcript.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent: Option<GraphSubagent>,
    /// The root of a sidechain written in the file: the tool call that started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_by: Option<GraphStartedBy>,
    /// A tool call that started a sidechain written in the file: the sidechain's root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidechain: Option<GraphRow>,
}

/// The subagent's own transcript a tool call started (`GraphNode::subagent`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphSubagent {
    /// The agent's id.
    pub agent_id: String,
    /// Its transcript, `<session>/subagents/agent-<agentId>.jsonl`.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: std::path::PathBuf,
    /// The `tool_use` block that started it.
    pub tool_use_id: String,
}

/// The tool call that started a sidechain (`GraphNode::startedBy`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphStartedBy {
    /// The line holding the call.
    pub id: String,
    /// Its row (never a fold).
    pub row: usize,
    /// The `tool_use` block's id.
    pub tool_use_id: String,
}

/// An entry and its row (never a fold).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphRow {
    /// The entry.
    pub id: String,
    /// Its row.
    pub row: usize,
}

/// A subagent's own transcript's graph: the transcript and tool call that started it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphParent {
    /// The parent's transcript (`<session>.jsonl`), whether or not it is there.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: std::path::PathBuf,
    /// The agent's id.
    pub agent_id: String,
    /// The parent's `tool_use` block that started it, from the agent's metadata; `null` when
    /// that cannot be read.
    pub tool_use_id: Option<String>,
}

/// The range of its path a compaction summarizes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphRange {
    /// Entries in the range (compactions not counted).
    pub count: usize,
    /// The first and last entry of the range; `null` when it is empty.
    pub first_id: Option<String>,
    /// See `firstId`.
    pub last_id: Option<String>,
    /// The compaction's `firstKeptEntryId`.
    pub first_kept_entry_id: Option<String>,
    /// The previous compaction on the path, whose summary this one carries forward.
    pub previous_compaction_id: Option<String>,
}

/// One line of the text form.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphLine {
    /// The line.
    pub text: String,
    /// The entry a reader jumps to from it (a fold: its first); `null` for header and connectors.
    pub entry_id: Option<String>,
}

/// `session/entry` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryResult {
    /// The entry's id.
    pub id: String,
    /// 1-based line number and byte offset of the entry's line.
    pub line: u32,
    /// Byte offset of the line's first byte in the file.
    pub offset: u64,
    /// The line as parsed JSON.
    pub entry: Value,
    /// The line exactly as stored (without its newline).
    pub raw: String,
    /// Revision of the state this result describes.
    pub revision: Revision,
}

impl EntryResult {
    /// The result as the JSON object its `Serialize` derive writes, built by moving the parsed
    /// entry in rather than serializing it into a second `Value` (a copy of every field).
    pub fn into_value(self) -> Value {
        let mut map = serde_json::Map::with_capacity(6);
        map.insert("id".into(), Value::String(self.id));
        map.insert("line".into(), Value::from(self.line));
        map.insert("offset".into(), Value::from(self.offset));
        map.insert("entry".into(), self.entry);
        map.insert("raw".into(), Value::String(self.raw));
        map.insert(
            "revision".into(),
            serde_json::to_value(self.revision).unwrap_or(Value::Null),
        );
        Value::Object(map)
    }
}

pub use crate::listing::ListedSession;

/// `session/list` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResult {
    /// The `root` asked for, else the first session root (canonical).
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub root: PathBuf,
    /// Every directory listed, canonical: the `root` asked for, else every session root.
    #[serde(serialize_with = "crate::paths::serialize_lossy_all")]
    pub roots: Vec<PathBuf>,
    /// Sessions found, newest `modified` first.
    pub sessions: Vec<ListedSession>,
    /// Files that end in `.jsonl` but have no readable session header (as text).
    #[serde(serialize_with = "crate::paths::serialize_lossy_all")]
    pub skipped: Vec<PathBuf>,
    /// Files being created: empty or with part of a header only, modified within the grace
    /// period (2 s). Listed again once their header is written. As text.
    #[serde(serialize_with = "crate::paths::serialize_lossy_all")]
    pub pending: Vec<PathBuf>,
}

// ---------------------------------------------------------------------------------------------
// Results of the storage layer, as the daemon and the CLI's `--json` print them. The storage and
// core types carry no wire format; `convert` builds these from them.

/// An unparsable final line without a newline, left out of the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TornTail {
    /// 1-based line number.
    pub line: u32,
    /// Byte offset where the torn bytes start.
    pub offset: u64,
    /// Number of torn bytes.
    pub len: u64,
}

/// A torn tail moved aside before an append.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repair {
    /// The sidecar file holding the torn bytes.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub sidecar: PathBuf,
    /// Byte offset where the torn bytes started in the session file.
    pub offset: u64,
    /// Number of torn bytes moved aside.
    pub len: u64,
}

/// An appended entry (`sessiond label|name|branch|append --json`; the daemon's write results
/// carry the same fields without `appliedLen`, with `written` and `revision`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    /// The new entry's id.
    pub id: String,
    /// The new entry's `parentId`.
    pub parent_id: Option<String>,
    /// Byte offset of the new line in the file.
    pub offset: u64,
    /// The session's last entry after the write.
    pub leaf_id: Option<String>,
    /// Entries found in the file before the write (appended by others since the last read).
    pub added: Vec<String>,
    /// Entries found after ours when reading back (appended by unlocked writers meanwhile).
    pub added_after: Vec<String>,
    /// The torn tail moved aside, if one was repaired.
    pub repaired: Option<Repair>,
    /// File length after the write, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_len: Option<u64>,
}

/// `session/fork`'s result (and `sessiond fork --json`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forked {
    /// The new session file.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// The new file's header `id`.
    pub session_id: String,
    /// The new file's last entry.
    pub leaf_id: Option<String>,
    /// Number of path entries copied.
    pub entry_count: usize,
    /// Label entries on the path that were left out (re-created after the path instead).
    pub dropped_labels: Vec<String>,
    /// Ids of the label entries re-created after the path.
    pub new_labels: Vec<String>,
    /// Entries whose line was re-serialized.
    pub rewritten: Vec<String>,
}

/// One line left out of a salvaged file.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    /// 1-based line number in the source.
    pub line: u32,
    /// Byte offset of the line in the source.
    pub offset: u64,
    /// `invalidJson`, `notAnObject`, `invalidEntry`, `duplicateId`, `tornTail`...
    pub kind: String,
    /// The line's entry id, when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What was wrong with the line.
    pub message: String,
}

/// An entry whose parent changed in a salvaged file.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reattached {
    /// The reattached entry.
    pub id: String,
    /// The parent the source names (missing or dropped).
    pub was: Option<String>,
    /// The nearest surviving ancestor, or `None` when it became a root.
    pub now: Option<String>,
}

/// `session/salvage`'s result (and `sessiond salvage --json`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Salvaged {
    /// The new session file (the source is untouched).
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// The new file's header `id`.
    pub session_id: String,
    /// Entries written.
    pub kept: usize,
    /// Lines left out of the new file, in source order.
    pub dropped: Vec<Dropped>,
    /// Entries whose parent became their nearest surviving ancestor.
    pub reattached: Vec<Reattached>,
}
