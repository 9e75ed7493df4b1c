//! Compaction of a session file: plan at a leaf (pure, [`crate::dialect::pi::compaction`]) and commit
//! the entry through the writer ([`writer::write_prebuilt`]: lock, fencing, torn-tail repair,
//! one `write`). Shared by `sessiond compact` and the daemon's `session/prepareCompaction` and
//! `session/compact`, so both plan, refuse and write the same way.
//!
//! The plan of a committed compaction is made under the write lock, on the tree as the file
//! holds it then: the cut point, `tokensBefore` and the entry's parent are those of the moment
//! of writing, never of an earlier read.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::core::tree::UnknownId;
use crate::dialect::pi::Pi;
use crate::dialect::pi::Tree;
use crate::dialect::pi::compaction::entry::js_number;
use crate::dialect::pi::compaction::prepare::{DEFAULT_KEEP_RECENT_TOKENS, NothingToCompact};
use crate::dialect::pi::compaction::prompts::SummarizationRequest;
use crate::dialect::pi::compaction::retention::ProbeResult;
use crate::dialect::pi::compaction::{
    self, CompactionError, CompactionPlan, Options, SummarySource,
};
use crate::dialect::pi::entries::NewEntry;
use crate::dialect::pi::format::EntryId;
use crate::dialect::pi::render::LineSource;
use crate::js::value as js;
use crate::model::{self, CallOptions, Endpoint, ModelChoice, ModelError, Progress};
use crate::storage::reader::OpenedSession;
use crate::storage::writer::{self, Expected, WriteError, WriteOptions, Written};

/// What to compact and how (pi's `compact` arguments plus sessiond's retention gate).
#[derive(Clone, Copy, Debug)]
pub struct CompactRequest<'a> {
    /// The leaf whose path is compacted (default: the last entry in file order).
    pub leaf: Option<&'a str>,
    /// pi's `keepRecentTokens` (default [`DEFAULT_KEEP_RECENT_TOKENS`]).
    pub keep_recent_tokens: u64,
    /// A summary to store verbatim instead of the embedded summarizer's.
    pub summary: Option<&'a str>,
    /// Where `summary` came from (the client, or a model endpoint).
    pub summary_source: SummarySource,
    /// pi's `customInstructions`.
    pub custom_instructions: Option<&'a str>,
    /// Refuse to write when a retention probe is lost.
    pub require_retention: bool,
    /// Build the summarization request and the serialized conversation (the report's
    /// `conversation`, `turnPrefixConversation` and `request`, which a model job needs); they
    /// are as large as the summarized span's text, so leave them out when not shown or sent.
    pub with_request: bool,
}

impl Default for CompactRequest<'_> {
    fn default() -> Self {
        CompactRequest {
            leaf: None,
            keep_recent_tokens: DEFAULT_KEEP_RECENT_TOKENS,
            summary: None,
            summary_source: SummarySource::Client,
            custom_instructions: None,
            require_retention: false,
            with_request: true,
        }
    }
}

/// Why a compaction was not planned or not written. Nothing is written on any error.
#[derive(Debug, Error)]
pub enum CompactError {
    /// The write was refused or failed (conflict, busy, corrupt, unsupported version...).
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The leaf names no entry.
    #[error("{}: {}", path.display(), unknown.describe("leaf id"))]
    UnknownLeaf {
        /// The session file.
        path: PathBuf,
        /// The leaf id as given (an unknown id, or a prefix of several).
        unknown: UnknownId,
    },
    /// The plan failed (pi itself would throw on this session, or a line changed).
    #[error("{}: {source}", path.display())]
    Compaction {
        /// The session file.
        path: PathBuf,
        /// Why planning failed.
        source: CompactionError,
    },
    /// Summarizing with a model failed (or no model could be configured); nothing written.
    #[error("{}: summarizing with a model failed, nothing written: {source}", path.display())]
    Model {
        /// The session file.
        path: PathBuf,
        /// Why.
        source: ModelError,
    },
    /// `require_retention` and at least one probe is lost; the plan holds the report.
    #[error("{}: retention check failed, nothing written; lost: {}", path.display(), lost_list(plan))]
    RetentionLost {
        /// The session file.
        path: PathBuf,
        /// The plan, with the retention report naming the lost probes.
        plan: Box<CompactionPlan>,
    },
}

fn lost_list(plan: &CompactionPlan) -> String {
    plan.retention
        .lost_probes()
        .map(describe_probe)
        .collect::<Vec<_>>()
        .join("; ")
}

/// `kind "text" (entry id)` of a probe, for messages.
pub fn describe_probe(p: &ProbeResult) -> String {
    format!(
        "{} {:?} (entry {})",
        serde_json::to_value(p.probe.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        p.probe.text,
        p.probe.entry_id.as_ref().map_or("?", EntryId::as_str)
    )
}

/// What a commit did.
#[derive(Debug)]
pub enum Committed {
    /// pi's "nothing to compact"; nothing written.
    Nothing(NothingToCompact),
    /// The entry was appended.
    Written {
        /// The plan that was committed.
        plan: Box<CompactionPlan>,
        /// Where and what was appended.
        written: Written,
    },
}

/// pi's `generateId`: the first 8 hex digits of a random UUID, unused in the session.
fn new_entry_id(tree: &Tree) -> EntryId {
    crate::dialect::pi::entries::generate_id(&|id| tree.find(id).is_some(), &mut uuid::Uuid::new_v4)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Plans a compaction of the session at `path` (read into `tree`; lines through `lines`)
/// without writing: a new entry id, the current time. `Ok(Err(_))` is "nothing to compact".
/// Errors: `UnknownLeaf`, `Compaction`.
pub fn plan(
    path: &Path,
    tree: &Tree,
    lines: &dyn LineSource,
    req: &CompactRequest<'_>,
) -> Result<Result<CompactionPlan, NothingToCompact>, CompactError> {
    let leaf = tree
        .resolve_leaf(req.leaf)
        .map_err(|unknown| CompactError::UnknownLeaf {
            path: path.to_owned(),
            unknown,
        })?;
    let options = Options {
        keep_recent_tokens: req.keep_recent_tokens,
        summary: req.summary,
        summary_source: req.summary_source,
        custom_instructions: req.custom_instructions,
        new_entry_id: new_entry_id(tree),
        time_ms: now_ms(),
        with_request: req.with_request,
    };
    compaction::plan(tree, lines, leaf, &options).map_err(|source| CompactError::Compaction {
        path: path.to_owned(),
        source,
    })
}

/// The request checked against the session before any view is: the leaf to compact and the
/// expected leaf must name entries (entries are only appended, so what exists in `tree`
/// exists in any later state of the file). Errors: `UnknownLeaf`, the writer's `UnknownEntry`.
fn check_request(
    path: &Path,
    tree: &Tree,
    req: &CompactRequest<'_>,
    expected: Expected<'_>,
) -> Result<(), CompactError> {
    tree.resolve_leaf(req.leaf)
        .map_err(|unknown| CompactError::UnknownLeaf {
            path: path.to_owned(),
            unknown,
        })?;
    writer::check_expected_leaf(path, tree, expected)?;
    Ok(())
}

/// A dry run: [`plan`] on the tree as read, after checking the request and then the caller's
/// view against it ([`Tree::fence`] with nothing caught up) when `expected` is a leaf. Nothing
/// is written. Errors: `UnknownLeaf`, `UnknownEntry`, a stale view as the writer's `Conflict`,
/// then those of [`plan`].
pub fn dry_run(
    path: &Path,
    tree: &Tree,
    lines: &dyn LineSource,
    req: &CompactRequest<'_>,
    expected: Expected<'_>,
) -> Result<Result<CompactionPlan, NothingToCompact>, CompactError> {
    check_request(path, tree, req, expected)?;
    if let Expected::Leaf(view) = expected {
        tree.fence(view, tree.len())
            .map_err(|stale| WriteError::conflict(path, stale))?;
    }
    plan(path, tree, lines, req)
}

/// Plans and appends a compaction under the write lock (see the module docs). The session is
/// brought up to date and holds the new entry afterwards, as with [`writer::write_entry`].
/// The request (leaf, expected leaf) is checked under the lock before the view, as for every
/// write.
/// Errors: every [`CompactError`]; `RetentionLost` only with `require_retention`.
pub fn commit(
    path: &Path,
    session: &mut OpenedSession<Pi>,
    req: &CompactRequest<'_>,
    expected: Expected<'_>,
    opts: &WriteOptions,
) -> Result<Committed, CompactError> {
    let (written, planned) = writer::write_prebuilt(
        path,
        session,
        expected,
        opts,
        |tree: &Tree| check_request(path, tree, req, expected),
        |tree: &Tree, lines: &dyn LineSource| match plan(path, tree, lines, req)? {
            Err(nothing) => Ok((None, Err(nothing))),
            Ok(plan) => {
                if req.require_retention && plan.retention.lost > 0 {
                    return Err(CompactError::RetentionLost {
                        path: path.to_owned(),
                        plan: Box::new(plan),
                    });
                }
                let entry = NewEntry {
                    id: plan.entry.id.clone(),
                    parent_id: plan.entry.parent_id.clone(),
                    line: plan.entry_json(),
                };
                Ok((Some(entry), Ok(Box::new(plan))))
            }
        },
    )?;
    match (planned, written) {
        (Err(nothing), _) => Ok(Committed::Nothing(nothing)),
        (Ok(plan), Some(written)) => Ok(Committed::Written { plan, written }),
        (Ok(_), None) => Err(CompactError::Write(WriteError::Io {
            path: path.to_owned(),
            source: std::io::Error::other("the compaction entry was not written"),
        })),
    }
}

/// Why a leaf had nothing to compact, in numbers a person can act on: where its context
/// starts, how much it holds since then, and which other leaves do have something to compact.
#[derive(Clone, Debug)]
pub struct NothingDetail {
    /// pi's reason.
    pub reason: NothingToCompact,
    /// The leaf that was asked about (`None`: the empty leaf).
    pub leaf_id: Option<EntryId>,
    /// The compaction the leaf's context starts at, if any.
    pub compaction_id: Option<EntryId>,
    /// Messages after that compaction (the whole context without one).
    pub messages_since: usize,
    /// pi's token estimate of those messages.
    pub tokens_since: f64,
    /// The `keepRecentTokens` asked for.
    pub keep_recent_tokens: u64,
    /// Other leaves with something to compact at the same `keepRecentTokens`, with their
    /// `tokensBefore`; at most [`OTHER_LEAVES_LOOKED_AT`] leaves are looked at.
    pub other_leaves: Vec<(EntryId, f64)>,
}

/// How many other leaves [`explain_nothing`] plans, at most (each one reads its path).
pub const OTHER_LEAVES_LOOKED_AT: usize = 32;

/// The numbers behind a "nothing to compact" at `req.leaf` (see [`NothingDetail`]). Reads the
/// lines of the leaf's path and of the other leaves' paths. Errors: `UnknownLeaf`, or a line
/// that changed (`Compaction`).
pub fn explain_nothing(
    path: &Path,
    tree: &Tree,
    lines: &dyn LineSource,
    req: &CompactRequest<'_>,
    reason: NothingToCompact,
) -> Result<NothingDetail, CompactError> {
    use crate::dialect::pi::compaction::prepare;
    use crate::dialect::pi::projection;
    let failed = |source| CompactError::Compaction {
        path: path.to_owned(),
        source,
    };
    let leaf = tree
        .resolve_leaf(req.leaf)
        .map_err(|unknown| CompactError::UnknownLeaf {
            path: path.to_owned(),
            unknown,
        })?;
    let projection = projection::project_path(tree, leaf);
    let here = prepare::projected_entries(tree, &projection, lines)
        .map_err(CompactionError::from)
        .map_err(failed)?;
    // The newest compaction that contributes its summary starts the context (as in prepare).
    let start = here.context_start();
    let since = start.map_or(0, |i| i + 1)..here.len();
    let messages_since: usize = since.clone().map(|i| here.message_count(i)).sum();
    // The messages' estimates (a failed one counts 0): summed while projecting, or read again
    // from the file.
    let tokens_since = here
        .tokens_from(since.start)
        .map_err(CompactionError::from)
        .map_err(failed)?;
    let mut other_leaves = Vec::new();
    for other in tree
        .leaves()
        .filter(|&l| Some(l) != leaf)
        .take(OTHER_LEAVES_LOOKED_AT)
    {
        let projection = projection::project_path(tree, Some(other));
        let Ok(projected) = prepare::projected_entries(tree, &projection, lines) else {
            continue;
        };
        if let Ok(Ok(prep)) = prepare::prepare(&projected, req.keep_recent_tokens as f64) {
            other_leaves.push((tree.node(other).entry.id.clone(), prep.tokens_before));
        }
    }
    Ok(NothingDetail {
        reason,
        leaf_id: leaf.map(|l| tree.node(l).entry.id.clone()),
        compaction_id: start.map(|i| here.id(i).clone()),
        messages_since,
        tokens_since,
        keep_recent_tokens: req.keep_recent_tokens,
        other_leaves,
    })
}

/// The stable name of "nothing to compact" reasons: `emptyPath`, `leafIsCompaction`,
/// `nothingBeforeCut`.
pub fn nothing_json(n: NothingToCompact) -> Value {
    let reason = serde_json::to_value(n).unwrap_or(Value::Null);
    json!({"nothingToCompact": true, "reason": reason})
}

/// The JSON report of a planned compaction: the `session/compact` result plus the
/// preparation and the exact request (what `compact --dry-run --json` prints and
/// `session/prepareCompaction` returns). Its strings may hold mapped lone surrogates: print it
/// through [`json_text`].
pub fn plan_json(plan: &CompactionPlan, written: bool) -> Value {
    let prep = &plan.preparation;
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_owned(), v);
    };
    put("dryRun", json!(!written));
    put("written", json!(written));
    put("entryId", json!(plan.entry.id.as_str()));
    put("leafId", json!(plan.leaf_id.as_str()));
    put("firstKeptEntryId", json!(prep.first_kept_entry_id.as_str()));
    put("tokensBefore", js_number(prep.tokens_before));
    put("tokensAfter", js_number(plan.tokens_after));
    put("isSplitTurn", json!(prep.is_split_turn));
    put(
        "previousSummary",
        prep.previous_summary.clone().unwrap_or(Value::Null),
    );
    put(
        "messagesToSummarize",
        json!(prep.messages_to_summarize.messages),
    );
    put(
        "turnPrefixMessages",
        json!(prep.turn_prefix_messages.messages),
    );
    put("readFiles", json!(prep.file_lists.read_files));
    put("modifiedFiles", json!(prep.file_lists.modified_files));
    put("keepRecentTokens", js_number(prep.keep_recent_tokens));
    put("summarySource", json!(plan.summary_source));
    put("summary", json!(plan.entry.summary));
    put("fileOperations", json!(plan.file_operations()));
    // Present when planned with the request (`CompactRequest::with_request`).
    if let Some(conversation) = &plan.conversation {
        put("conversation", json!(conversation));
        put(
            "turnPrefixConversation",
            json!(plan.turn_prefix_conversation),
        );
    }
    if let Some(request) = &plan.request {
        put("request", json!(request));
    }
    put("retention", json!(plan.retention));
    put(
        "entry",
        js::parse_json(plan.entry_json().as_bytes()).unwrap_or(Value::Null),
    );
    Value::Object(m)
}

/// `value` (a report made from `_plan`) as JSON text, with lone surrogates written back as pi
/// writes them (see [`crate::js::jsstr::restore_json`]). Every decoded string holds its lone
/// surrogates the same way, so the text no longer depends on the plan; the parameter keeps the
/// callers' shape.
pub fn json_text(_plan: &CompactionPlan, value: &Value) -> String {
    crate::js::jsstr::restore_json(&value.to_string()).into_owned()
}

/// What a model needs from a planned compaction: pi's requests, the previous summary pi uses
/// as the history of a split turn with nothing before it, pi's file blocks, and the session's
/// model at the leaf (the default endpoint). Owned, so a daemon handler can hold it across
/// the model call without the session.
#[derive(Clone, Debug)]
pub struct ModelJob {
    /// The requests pi would send.
    pub request: SummarizationRequest,
    /// The previous compaction's summary as pi's prompt uses it.
    pub previous_summary: Option<String>,
    /// pi's `<read-files>`/`<modified-files>` blocks, appended to the answer.
    pub file_blocks: String,
    /// The session's `(provider, modelId)` at the leaf (pi's `buildSessionContext().model`).
    pub session_model: Option<(String, String)>,
}

/// A dry run ([`dry_run`]) planned with the request (whatever `req.with_request` says), as the
/// job a model runs. Errors: those of [`dry_run`].
pub fn model_job(
    path: &Path,
    tree: &Tree,
    lines: &dyn LineSource,
    req: &CompactRequest<'_>,
    expected: Expected<'_>,
) -> Result<Result<ModelJob, NothingToCompact>, CompactError> {
    let req = CompactRequest {
        with_request: true,
        ..*req
    };
    Ok(dry_run(path, tree, lines, &req, expected)?.map(|plan| ModelJob::new(plan, tree)))
}

impl ModelJob {
    /// The job of `plan`, made on `tree` (the tree it was planned on). `plan` holds its
    /// request: [`model_job`] plans with it.
    fn new(plan: CompactionPlan, tree: &Tree) -> ModelJob {
        let leaf = tree.find(plan.leaf_id.as_str());
        let projection = crate::dialect::pi::projection::project(tree, leaf);
        let text = |raw: &Option<crate::dialect::pi::format::SharedRaw>| {
            raw.as_ref()
                .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
                .and_then(|v| v.as_str().map(str::to_owned))
        };
        let session_model = projection
            .model
            .as_ref()
            .and_then(|m| Some((text(&m.provider)?, text(&m.model_id)?)));
        let previous_summary = plan.preparation.previous_summary_text();
        let file_blocks = plan.file_operations();
        let request = plan.request.unwrap_or_else(|| SummarizationRequest {
            system_prompt: crate::dialect::pi::compaction::prompts::SUMMARIZATION_SYSTEM_PROMPT
                .to_owned(),
            prompt: None,
            turn_prefix_prompt: None,
        });
        ModelJob {
            request,
            previous_summary,
            file_blocks,
            session_model,
        }
    }

    /// The endpoint for `choice` (the session's model by default), from pi's configuration in
    /// its agent directory ([`model::config::agent_dir`]). Reads files; may run a `!command`
    /// of pi's configuration. Errors: [`CompactError::Model`] with a config error.
    pub fn endpoint(&self, path: &Path, choice: &ModelChoice) -> Result<Endpoint, CompactError> {
        let agent = model::config::agent_dir(&model::process_env);
        let session = self
            .session_model
            .as_ref()
            .map(|(p, m)| (p.as_str(), m.as_str()));
        model::config::resolve(choice, session, agent.as_deref(), &model::process_env).map_err(
            |e| CompactError::Model {
                path: path.to_owned(),
                source: e.into(),
            },
        )
    }

    /// Runs the job against `endpoint`: the summary to commit (pi's `compact` result text).
    /// Nothing is written here; dropping the future aborts the call. Errors:
    /// [`CompactError::Model`].
    pub async fn run(
        &self,
        path: &Path,
        endpoint: &Endpoint,
        opts: &CallOptions,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<String, CompactError> {
        model::client::summarize(
            endpoint,
            &self.request,
            self.previous_summary.as_deref(),
            &self.file_blocks,
            opts,
            progress,
        )
        .await
        .map_err(|source| CompactError::Model {
            path: path.to_owned(),
            source,
        })
    }
}
