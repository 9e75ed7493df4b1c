//! Params of the `session/` methods as received. Field names are camelCase; shapes are
//! documented in `protocol/README.md` and `protocol/schema/`.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;
use tower_lsp_server::ls_types::ProgressToken;

/// Declares the params of methods on an open session: each struct is deserialized with
/// camelCase field names and starts with `path`, the open session file the method acts on.
macro_rules! session_params {
    ($($(#[$doc:meta])* $name:ident { $($fields:tt)* })*) => {$(
        $(#[$doc])*
        #[derive(Debug, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// Open session file.
            #[serde(deserialize_with = "crate::paths::deserialize_wire")]
            pub path: PathBuf,
            $($fields)*
        }
    )*};
}

/// `session/open` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenParams {
    /// Session file to open; must resolve inside a session root.
    #[serde(deserialize_with = "crate::paths::deserialize_wire")]
    pub path: PathBuf,
    /// Open a corrupt file read-only the way pi reads it (bad lines skipped, orphans as roots);
    /// default false.
    #[serde(default)]
    pub allow_corrupt: bool,
}

/// `session/close` params.
#[derive(Debug, Deserialize)]
pub struct CloseParams {
    /// Session file to stop following.
    #[serde(deserialize_with = "crate::paths::deserialize_wire")]
    pub path: PathBuf,
}

session_params! {
    /// `session/tree` params. At most one of `fromId`, `childrenOf` and `after` names where the
    /// page starts; none: at the roots.
    TreeParams {
        /// Start the page at this entry (included).
        pub from_id: Option<String>,
        /// Start the page at this entry's children (the entry itself is not included).
        pub children_of: Option<String>,
        /// Start the page at the siblings that follow this entry (in file order; for a root, the
        /// roots after it). Neither the entry nor its subtree is included.
        pub after: Option<String>,
        /// Levels below the first level of the page to include; default 64.
        pub depth: Option<usize>,
        /// Maximum number of nodes, 1 to 10000; default 1000. Out of range: -32602.
        pub limit: Option<usize>,
    }

    /// `session/entry` params.
    EntryParams {
        /// Id of the entry to return.
        pub id: String,
    }
}

/// `session/contextAt` `fields`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum FieldsParam {
    /// Only `entryIds`/`messageEntryIds`, no `messages` key.
    Ids,
    /// `{role, preview}` per message.
    Previews,
    /// Messages as pi 1.6.0 `buildSessionContext` builds them.
    #[default]
    Full,
}

session_params! {
    /// `session/contextAt` params.
    ContextAtParams {
        /// Leaf whose context is built; absent: the resume leaf (last entry in file order).
        pub leaf_id: Option<String>,
        /// Index of the first message returned; default 0.
        #[serde(default)]
        pub offset: usize,
        /// Maximum number of messages returned; absent: all from `offset`.
        pub limit: Option<usize>,
        /// How much of each message to return; default `full`.
        #[serde(default)]
        pub fields: FieldsParam,
        /// A Claude Code transcript's request model (attachments and thinking blocks depend on it);
        /// absent: the session's. Not for pi sessions.
        pub model: Option<String>,
    }

    /// `session/explain` params.
    ExplainParams {
        /// Entry to explain (a Claude Code transcript's line without a uuid: `line:N`).
        pub entry_id: String,
        /// Leaf whose context is asked about; absent: the resume leaf.
        pub leaf_id: Option<String>,
        /// A Claude Code transcript's request model; absent: the session's. Not for pi sessions.
        pub model: Option<String>,
    }

    /// `session/compareBranches` params.
    CompareBranchesParams {
        /// The first leaf (A).
        pub leaf_a: String,
        /// The second leaf (B).
        pub leaf_b: String,
        /// A Claude Code transcript's request model; absent: the session's. Not for pi sessions.
        pub model: Option<String>,
    }
}

/// `session/verifyResume` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyResumeParams {
    /// The session file (open or not; it must be inside a root).
    #[serde(deserialize_with = "crate::paths::deserialize_wire")]
    pub path: PathBuf,
    /// Leaf to verify; absent: the resume leaf (the last entry).
    pub leaf_id: Option<String>,
    /// Working directory to check instead of the header's `cwd`.
    pub cwd: Option<PathBuf>,
}

/// `session/rewind` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewindParams {
    /// The pi session file, open (`session/open`); only read.
    #[serde(deserialize_with = "crate::paths::deserialize_wire")]
    pub path: PathBuf,
    /// The entry to rewind the files to (on the leaf's path).
    pub to: String,
    /// The leaf whose path is read; absent: the resume leaf (the last entry).
    pub leaf_id: Option<String>,
    /// Working directory instead of the header's `cwd` (absolute).
    pub cwd: Option<PathBuf>,
    /// Plan only: the per-file diffs, nothing changed.
    #[serde(default)]
    pub dry_run: bool,
    /// Rewind files that drifted, and beside an agent working on the session.
    #[serde(default)]
    pub force: bool,
    /// Paths left alone (absolute, or relative to the working directory).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Also fork the session at the entry (as `session/fork` with `position: "at"`).
    #[serde(default)]
    pub fork: bool,
}

/// `session/export` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExportParams {
    /// The session file (open or not; it must be inside a root).
    #[serde(deserialize_with = "crate::paths::deserialize_wire")]
    pub path: PathBuf,
    /// Leaf whose branch is exported; absent: the resume leaf (the last entry).
    pub leaf_id: Option<String>,
    /// `md` (default) or `html`.
    #[serde(default)]
    pub format: Option<String>,
    /// Redact strings that look like secrets (default `true`).
    #[serde(default)]
    pub redact: Option<bool>,
    /// Longest tool output or argument shown, in bytes (default 8192).
    #[serde(default)]
    pub max_output_bytes: Option<usize>,
    /// Where the page starts in the document, in bytes (default 0: the document is made).
    #[serde(default)]
    pub offset: Option<usize>,
    /// Bytes of the document in the page (default 4 MiB, at most 16 MiB).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `session/search` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchParams {
    /// The query: words (all must match), `"phrases"`, `prefix*`, `-excluded`, `a OR b`.
    pub query: String,
    /// Directories to search (each inside a root); absent: every root.
    pub roots: Option<Vec<PathBuf>>,
    /// Hits per page (1..=1000, default 50).
    pub limit: Option<usize>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
    /// Only these roles or entry types.
    pub roles: Option<Vec<String>>,
    /// Only sessions of this agent's format (`pi`, `claude-code`).
    pub agent: Option<String>,
    /// Only sessions whose path contains this.
    pub path_contains: Option<String>,
    /// Only entries at or after this time (ISO 8601 or `YYYY-MM-DD`).
    pub after: Option<String>,
    /// Only entries before this time (ISO 8601 or `YYYY-MM-DD`).
    pub before: Option<String>,
    /// Search thinking too.
    #[serde(default)]
    pub thinking: bool,
    /// LSP work-done token: a long index build reports `$/progress` under it.
    pub work_done_token: Option<ProgressToken>,
}

/// `session/list` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    /// Directory to list; absent: every session root. Must be inside a root.
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
    /// Open session file to fork from (only read).
    #[serde(deserialize_with = "crate::paths::deserialize_wire")]
    pub path: PathBuf,
    /// Entry the fork is cut at.
    pub entry_id: String,
    /// Whether the new session ends with the entry or at its parent.
    pub position: ForkPosition,
    /// Directory of the new file; absent: the source's directory. Must be inside a root.
    pub target_dir: Option<PathBuf>,
    /// Session id of the new file; absent: a new UUIDv7.
    pub session_id: Option<String>,
}

/// `session/salvage` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SalvageParams {
    /// Session file to salvage (need not be open; stays byte-identical).
    #[serde(deserialize_with = "crate::paths::deserialize_wire")]
    pub path: PathBuf,
    /// Directory of the new file; absent: the source's directory. Must be inside a root.
    pub target_dir: Option<PathBuf>,
}

session_params! {
    /// `session/label` params.
    LabelParams {
        /// Entry whose label is set or cleared.
        pub target_id: String,
        /// `null` (or absent) clears the label.
        pub label: Option<String>,
        /// Id of the session's last entry in file order as the client saw it (`null`: no entries); a
        /// mismatch is a conflict (-33010).
        #[serde(default, deserialize_with = "nullable")]
        pub expected_leaf_id: Option<Option<String>>,
    }

    /// `session/setName` params.
    SetNameParams {
        /// New session name (pi's `appendSessionInfo`: newlines become spaces, ends trimmed).
        pub name: String,
        /// Id of the session's last entry in file order as the client saw it (`null`: no entries); a
        /// mismatch is a conflict (-33010).
        #[serde(default, deserialize_with = "nullable")]
        pub expected_leaf_id: Option<Option<String>>,
    }

    /// `session/branch` params.
    BranchParams {
        /// The entry the branch starts from; `null`: before the first entry.
        #[serde(default, deserialize_with = "nullable")]
        pub from_id: Option<Option<String>>,
        /// With a summary a `branch_summary` entry is written; without, nothing is.
        pub summary: Option<String>,
        /// Any JSON, stored as the `branch_summary` entry's `details`.
        pub details: Option<Value>,
        /// Id of the session's last entry in file order as the client saw it (`null`: no entries); a
        /// mismatch is a conflict (-33010).
        #[serde(default, deserialize_with = "nullable")]
        pub expected_leaf_id: Option<Option<String>>,
        /// Write even while an agent works on the session (otherwise -33019); default false.
        #[serde(default)]
        pub force: bool,
    }

    /// `session/append` params.
    AppendParams {
        /// The entry as a JSON object, or as JSON text (whose field bytes are kept exactly).
        pub entry: Value,
        /// Absent: the session's leaf; `null`: a new root.
        #[serde(default, deserialize_with = "nullable")]
        pub parent_id: Option<Option<String>>,
        /// Id of the session's last entry in file order as the client saw it (`null`: no entries); a
        /// mismatch is a conflict (-33010).
        #[serde(default, deserialize_with = "nullable")]
        pub expected_leaf_id: Option<Option<String>>,
        /// Write even while an agent works on the session (otherwise -33019); default false.
        #[serde(default)]
        pub force: bool,
    }

    /// `session/prepareCompaction` params.
    PrepareCompactionParams {
        /// Leaf whose path is compacted; absent: the last entry.
        pub leaf_id: Option<String>,
        /// Tokens of recent context to keep; absent: pi's 20000.
        pub keep_recent_tokens: Option<u64>,
        /// Extra focus added to pi's summarization prompt as `Additional focus: …`.
        pub custom_instructions: Option<String>,
    }
}

/// `session/compact`'s `summarizer`: `{"type": "embedded"}` or `{"type": "model", model?,
/// baseUrl?, api?, apiKeyEnv?, timeoutMs?, maxRetries?}` (the CLI's `--model`, `--base-url`,
/// `--api`, `--api-key-env`, `--model-timeout-ms`, `--model-retries`).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SummarizerParams {
    /// `embedded` or `model`.
    #[serde(rename = "type")]
    pub kind: SummarizerKind,
    /// `provider/id`; absent: the session's current model.
    pub model: Option<String>,
    /// API base URL; absent: pi's models.json.
    pub base_url: Option<String>,
    /// `openai-completions` or `anthropic-messages`; absent: pi's models.json.
    pub api: Option<SummarizerApi>,
    /// Environment variable (of the daemon) holding the API key.
    pub api_key_env: Option<String>,
    /// Deadline of the whole model call in milliseconds (default 300000).
    pub timeout_ms: Option<u64>,
    /// Retries of transient failures (default 3).
    pub max_retries: Option<u32>,
}

/// The kinds of summarizer.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum SummarizerKind {
    /// The embedded extractive digest.
    Embedded,
    /// A model endpoint.
    Model,
}

/// The APIs a model summarizer speaks (pi's names).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum SummarizerApi {
    /// OpenAI chat completions.
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    /// Anthropic messages.
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
}

session_params! {
    /// `session/compact` params.
    CompactParams {
        /// Leaf whose path is compacted; absent: the last entry.
        pub leaf_id: Option<String>,
        /// Id of the session's last entry as the client saw it; required unless `dryRun` (then checked
        /// when given).
        #[serde(default, deserialize_with = "nullable")]
        pub expected_leaf_id: Option<Option<String>>,
        /// Tokens of recent context to keep; absent: pi's 20000.
        pub keep_recent_tokens: Option<u64>,
        /// Summary stored verbatim; absent: the `summarizer` writes one.
        pub summary: Option<String>,
        /// Who writes the summary when `summary` is absent; absent: the embedded digest.
        pub summarizer: Option<SummarizerParams>,
        /// LSP work-done token: when given, a model summarizer reports `$/progress` under it.
        pub work_done_token: Option<ProgressToken>,
        /// Extra focus added to pi's summarization prompt as `Additional focus: …`.
        pub custom_instructions: Option<String>,
        /// Refuse (-33014, nothing written) when a retention probe would be lost; default false. Dry
        /// runs never refuse.
        #[serde(default)]
        pub require_retention: bool,
        /// Plan on the daemon's view and write nothing; default false.
        #[serde(default)]
        pub dry_run: bool,
        /// Write even while an agent works on the session (otherwise -33019); default false.
        #[serde(default)]
        pub force: bool,
    }

    /// `session/graph` params.
    GraphParams {
        /// The leaf whose context is highlighted; absent: the resume leaf (last entry in file order).
        pub leaf_id: Option<String>,
        /// The first row of the page (default 0).
        pub offset: Option<usize>,
        /// Rows in the page (default 1000, 1 to 10000).
        pub limit: Option<usize>,
    }
}
