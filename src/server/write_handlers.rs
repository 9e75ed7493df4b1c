//! The `session/` methods that write: appends (`label`, `setName`, `branch`, `append`,
//! `compact`) run on the session's owner through [`Session::write`], so they are ordered with
//! reads and watcher hints and announce what they add in one `session/didChange`; new files
//! (`fork`, `salvage`) are published atomically under the daemon-wide
//! [`Reservations`](crate::storage::publish::Reservations).
//! Every one is the same call into [`crate::storage::writer`] (or [`crate::compact`]) that the
//! CLI makes.

use std::path::{Path, PathBuf};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::Result as RpcResult;

use super::Backend;
use super::error::RpcError;
use super::handlers::{find, params, pi_of, to_value};
use super::lossless;
use crate::compact::{self, Committed, CompactRequest};
use crate::core::tree::Mode;
use crate::dialect::pi::compaction::CompactionPlan;
use crate::dialect::pi::compaction::SummarySource;
use crate::dialect::pi::compaction::prepare::DEFAULT_KEEP_RECENT_TOKENS;
use crate::dialect::pi::entries::ParentChoice;
use crate::dialect::pi::fork::Position;
use crate::js::jsstr;
use crate::model::{Api, CallOptions, ModelChoice, Progress};
use crate::server::params::{
    AppendParams, BranchParams, CompactParams, ForkParams, ForkPosition, LabelParams,
    PrepareCompactionParams, RewindParams, SalvageParams, SetNameParams, SummarizerApi,
    SummarizerKind,
};
use crate::session::owner::{EventSink, Session};
use crate::storage::writer::{self, Change, Expected, ForkRequest, WriteOptions, Written};
use crate::view::convert;

/// Fields of a compaction report that only `session/prepareCompaction` returns (they can be
/// megabytes): the serialized conversation and the summarization request.
const PREPARE_ONLY: &[&str] = &["conversation", "turnPrefixConversation", "request"];

fn expected_leaf(
    method: &'static str,
    v: Option<Option<String>>,
) -> Result<Option<String>, RpcError> {
    v.ok_or_else(|| RpcError::InvalidParams {
        method,
        detail: "expectedLeafId is required (null for a session with no entries)".into(),
    })
}

/// The result of an append: the entry, the session's leaf after it, what else was read.
fn written_json(s: &Session, w: &Written) -> Value {
    let mut value = json!(convert::written(w, false));
    if let Value::Object(map) = &mut value {
        map.insert("written".into(), Value::Bool(true));
    }
    with_revision(value, s)
}

fn with_revision(mut value: Value, s: &Session) -> Value {
    if let Value::Object(map) = &mut value {
        map.insert("revision".into(), json!(convert::revision(s.revision())));
    }
    value
}

/// The conflict error for a stale view, when nothing is to be written (navigation): the owner's
/// tree is the file as last read, so nothing was caught up ([`Tree::fence`]).
///
/// [`Tree::fence`]: crate::core::tree::Tree::fence
fn check_view(s: &Session, expected: Option<&str>) -> Result<(), RpcError> {
    let tree = pi_of(s, "navigation")?.tree();
    tree.fence(expected, tree.len())
        .map_err(|stale| crate::storage::writer::WriteError::conflict(s.path(), stale).into())
}

/// Whether a write is checked for an agent working on the session first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Guard {
    /// Labels and names: they never reach the model, so they may land beside an agent.
    Off,
    /// A context-changing write (append, branch with a summary, compaction), refused while an
    /// agent works on the session.
    Context,
    /// A context-changing write the caller forces (`force: true`).
    Forced,
}

impl Guard {
    fn context(force: bool) -> Guard {
        if force { Guard::Forced } else { Guard::Context }
    }
}

/// Refuses a context-changing write while an agent works on the session (SPEC §4): pi never
/// re-reads its file, so the entry would become a side branch its next entry does not follow.
/// Looks at `/proc` now, not through the cache. Errors: [`RpcError::AgentActive`].
fn refuse_beside_agent(s: &Session, guard: Guard) -> Result<(), RpcError> {
    if guard != Guard::Context {
        return Ok(());
    }
    match s.agent_now() {
        None => Ok(()),
        Some(agent) => Err(RpcError::AgentActive {
            path: s.path().to_owned(),
            agent,
        }),
    }
}

impl Backend {
    /// Runs `f` with write access on the session's owner and flattens the errors.
    async fn write_on<R: Send + 'static>(
        &self,
        path: &Path,
        f: impl FnOnce(&mut Session, &dyn EventSink) -> Result<R, RpcError> + Send + 'static,
    ) -> Result<R, RpcError> {
        let handle = self.open_session(path).await?;
        handle.update(f).await?
    }

    /// Appends one change through the owner (see [`Session::write`]) for `method`. `guard`: the
    /// change reaches the model's context, so it is refused while an agent works on the session
    /// ([`refuse_beside_agent`]). A format sessiond only reads is refused naming the method
    /// (`unsupportedForFormat`).
    async fn append_change(
        &self,
        method: &'static str,
        path: &Path,
        expected: Option<String>,
        owned: OwnedChange,
        guard: Guard,
    ) -> Result<Value, RpcError> {
        self.write_on(path, move |s, sink| {
            if s.pi().is_none() {
                return Err(super::handlers::unsupported(s, method));
            }
            refuse_beside_agent(s, guard)?;
            let w = s.write(sink, |path, opened| {
                writer::write_entry(
                    path,
                    opened,
                    owned.change(),
                    expected.as_deref(),
                    &WriteOptions::default(),
                )
                .map_err(RpcError::from)
            })?;
            Ok(written_json(s, &w))
        })
        .await
    }

    fn target_dir(&self, dir: Option<&Path>) -> Result<Option<PathBuf>, RpcError> {
        dir.map(|d| self.resolve(d)).transpose()
    }

    /// `session/fork {path, entryId, position, targetDir?, sessionId?}`: a pi session forks as
    /// pi does ([`writer::fork`]), a Claude Code transcript as `--fork-session` does
    /// ([`writer::fork_transcript`]).
    pub async fn fork(&self, p: Value) -> RpcResult<Value> {
        let p: ForkParams = params("session/fork", p)?;
        let target = self.target_dir(p.target_dir.as_deref())?;
        let reservations = self.reservations.clone();
        Ok(self
            .ask(&p.path, move |s| {
                let req = ForkRequest {
                    entry_id: &p.entry_id,
                    position: match p.position {
                        ForkPosition::At => Position::At,
                        ForkPosition::Before => Position::Before,
                    },
                    target_dir: target.as_deref(),
                    session_id: p.session_id.as_deref(),
                };
                let forked = fork_session(s, "session/fork", req, &reservations)?;
                let mut value = to_value(s.path(), &convert::forked(&forked))?;
                value["format"] = serde_json::json!(s.dialect().as_str());
                Ok(value)
            })
            .await?)
    }

    /// `session/rewind {path, to, leafId?, cwd?, dryRun, force, exclude, fork}`: the files the
    /// session (a pi session or a Claude Code transcript) changed after `to` put back to their
    /// content there ([`crate::core::rewind`]),
    /// or, with `dryRun`, the plan alone. The session is only read; the files are in its
    /// working directory, not under the roots. Refused (`agentActive`) while an agent works on
    /// the session, unless `force`; a plan that is refused (drift, unknown content) is the
    /// result, with `applied: false` and its `refusal`.
    pub async fn rewind(&self, p: Value) -> RpcResult<Value> {
        let p: RewindParams = params("session/rewind", p)?;
        if let Some(d) = p.cwd.as_deref().filter(|d| !d.is_absolute()) {
            return Err(RpcError::InvalidParams {
                method: "session/rewind",
                detail: format!("cwd must be an absolute directory, got {}", d.display()),
            }
            .into());
        }
        let options = crate::core::rewind::Options {
            cwd: p
                .cwd
                .as_deref()
                .map(|d| crate::paths::absolute(d).to_string_lossy().into_owned()),
            force: p.force,
            exclude: p.exclude.clone(),
        };
        let (to, leaf_id, dry_run, force) = (p.to.clone(), p.leaf_id.clone(), p.dry_run, p.force);
        let cwd_asked = options.cwd.clone();
        let (records, path, entry_id) = self
            .ask(&p.path, move |s| {
                let unknown = |unknown| RpcError::UnknownEntry {
                    path: s.path().to_owned(),
                    unknown,
                };
                let not_on_path = |id: &str| RpcError::InvalidParams {
                    method: "session/rewind",
                    detail: format!("entry {id} is not on the path to the leaf (give leafId)"),
                };
                let refuse_beside_agent = || match s.agent_now() {
                    Some(agent) if !dry_run && !force => Err(RpcError::AgentActive {
                        path: s.path().to_owned(),
                        agent,
                    }),
                    _ => Ok(()),
                };
                if let Some(tree) = s.claude() {
                    // A Claude Code transcript: its Write/Edit records and its file history.
                    let leaf = match leaf_id.as_deref() {
                        Some(id) => tree.lookup(id).map_err(unknown)?,
                        None => crate::dialect::claude::default_leaf(tree).ok_or_else(|| {
                            RpcError::InvalidParams {
                                method: "session/rewind",
                                detail: "the transcript has no leaf Claude Code would continue from; give leafId".into(),
                            }
                        })?,
                    };
                    let entry = tree.lookup(&to).map_err(unknown)?;
                    let entry_id = tree.node(entry).entry.id.to_string();
                    if !crate::dialect::claude::load::history(tree, leaf).contains(&entry) {
                        return Err(not_on_path(&entry_id));
                    }
                    refuse_beside_agent()?;
                    let checkpoints = crate::rewind::claude_checkpoints(s.path(), &entry_id);
                    let records = crate::dialect::claude::rewind::collect(
                        tree,
                        leaf,
                        entry,
                        s.source(),
                        &checkpoints,
                    )
                    .map_err(|e| RpcError::Io {
                        path: s.path().to_owned(),
                        source: std::io::Error::other(e.to_string()),
                    })?;
                    // Claude Code keeps no file open: a `claude` in the working directory
                    // while the transcript's turn is open.
                    let cwd = cwd_asked.as_deref().or(records.session_cwd.as_deref());
                    let probe = crate::session::activity::Probe {
                        path: s.path(),
                        cwd,
                        turn_open: crate::dialect::claude::turn_open(tree),
                        agent_names: crate::session::activity::CLAUDE_NAMES,
                        mtime: s.opened().stamp().mtime,
                        writer_lock: None,
                    };
                    if !dry_run
                        && !force
                        && let Some(agent) = crate::session::activity::detect(&probe)
                    {
                        return Err(RpcError::AgentActive {
                            path: s.path().to_owned(),
                            agent,
                        });
                    }
                    return Ok((records, s.path().to_owned(), entry_id));
                }
                let tree = pi_of(s, "session/rewind")?.tree();
                let leaf = tree.resolve_leaf(leaf_id.as_deref()).map_err(unknown)?;
                let entry = tree
                    .resolve_leaf(Some(&to))
                    .map_err(unknown)?
                    .ok_or_else(|| RpcError::InvalidParams {
                        method: "session/rewind",
                        detail: format!("no entry {to}"),
                    })?;
                if !tree.path_to(leaf).contains(&entry) {
                    return Err(not_on_path(tree.node(entry).entry.id.as_str()));
                }
                refuse_beside_agent()?;
                let records = crate::dialect::pi::rewind::collect(tree, leaf, entry, s.source())
                    .map_err(|source| RpcError::Render {
                        path: s.path().to_owned(),
                        source,
                    })?;
                Ok((
                    records,
                    s.path().to_owned(),
                    tree.node(entry).entry.id.to_string(),
                ))
            })
            .await?;
        let session = path.clone();
        let done = tokio::task::spawn_blocking(move || {
            let disk = crate::rewind::SystemDisk::from_env();
            let plan = crate::core::rewind::plan(&records, &disk, &options);
            if dry_run || plan.refusal.is_some() {
                return Ok((plan, None));
            }
            let root = crate::rewind::default_backup_root();
            crate::rewind::apply(&plan, &session, &root, &disk)
                .map(|a| (plan, Some(a)))
                .map_err(RpcError::Rewind)
        })
        .await
        .map_err(|e| RpcError::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        let (plan, applied) = done?;
        let forked = match (&applied, p.fork) {
            (Some(_), true) => {
                let reservations = self.reservations.clone();
                let v = self
                    .ask(&path, move |s| {
                        let req = ForkRequest {
                            entry_id: &entry_id,
                            position: Position::At,
                            target_dir: None,
                            session_id: None,
                        };
                        let forked = fork_session(s, "session/rewind", req, &reservations)?;
                        to_value(s.path(), &convert::forked(&forked))
                    })
                    .await?;
                Some(v)
            }
            _ => None,
        };
        Ok(crate::rewind::document(
            &path,
            &plan,
            dry_run,
            applied.as_ref(),
            forked.as_ref(),
        ))
    }

    /// `session/salvage {path, targetDir?}`: the session need not be open (a corrupt file
    /// opens only with `allowCorrupt`); when it is, the salvage runs on its owner.
    pub async fn salvage(&self, p: Value) -> RpcResult<Value> {
        let p: SalvageParams = params("session/salvage", p)?;
        let real = self.resolve(&p.path)?;
        let target = self.target_dir(p.target_dir.as_deref())?;
        let reservations = self.reservations.clone();
        let source = real.clone();
        let run = move || -> Result<Value, RpcError> {
            let salvaged = writer::salvage(&source, target.as_deref(), &reservations)?;
            to_value(&source, &convert::salvaged(&salvaged))
        };
        let result = match self.registry.get(&real).await {
            Ok(handle) => handle
                .query_waiting(move |_| run())
                .await
                .map_err(RpcError::from)?,
            Err(_) => tokio::task::spawn_blocking(run)
                .await
                .map_err(|e| RpcError::Io {
                    path: real.clone(),
                    source: std::io::Error::other(e),
                })?,
        };
        Ok(result.map_err(|e| e.naming("session/salvage"))?)
    }

    /// `session/label {path, targetId, label|null, expectedLeafId}`.
    pub async fn label(&self, p: Value) -> RpcResult<Value> {
        let p: LabelParams = params("session/label", p)?;
        let expected = expected_leaf("session/label", p.expected_leaf_id)?;
        let owned = OwnedChange::Label {
            target_id: p.target_id,
            label: p.label,
        };
        Ok(self
            .append_change("session/label", &p.path, expected, owned, Guard::Off)
            .await?)
    }

    /// `session/setName {path, name, expectedLeafId}`.
    pub async fn set_name(&self, p: Value) -> RpcResult<Value> {
        let p: SetNameParams = params("session/setName", p)?;
        let expected = expected_leaf("session/setName", p.expected_leaf_id)?;
        let owned = OwnedChange::SetName { name: p.name };
        Ok(self
            .append_change("session/setName", &p.path, expected, owned, Guard::Off)
            .await?)
    }

    /// `session/branch {path, fromId|null, summary?, details?, expectedLeafId}`.
    pub async fn branch(&self, p: Value) -> RpcResult<Value> {
        let p: BranchParams = params("session/branch", p)?;
        let expected = expected_leaf("session/branch", p.expected_leaf_id)?;
        let from = p.from_id.ok_or_else(|| RpcError::InvalidParams {
            method: "session/branch",
            detail: "fromId is required (null: before the first entry)".into(),
        })?;
        let details = match p.details {
            None => None,
            Some(v) => Some(
                RawValue::from_string(jsstr::restore_json(&v.to_string()).into_owned()).map_err(
                    |e| RpcError::InvalidParams {
                        method: "session/branch",
                        detail: format!("details: {e}"),
                    },
                )?,
            ),
        };
        let Some(summary) = p.summary else {
            // pi's `branch(fromId)`: only the leaf moves, which is the client's to keep.
            return Ok(self
                .ask(&p.path, move |s| {
                    // The entry's whole id, whatever prefix named it.
                    let leaf = match &from {
                        Some(id) => Some(s.opened().id(find(s, id)?).to_owned()),
                        None => None,
                    };
                    check_view(s, expected.as_deref())?;
                    Ok(json!({
                        "written": false,
                        "id": null,
                        "parentId": null,
                        "leafId": leaf,
                        "revision": convert::revision(s.revision()),
                    }))
                })
                .await?);
        };
        let owned = OwnedChange::Branch {
            from_id: from,
            summary,
            details,
        };
        Ok(self
            .append_change(
                "session/branch",
                &p.path,
                expected,
                owned,
                Guard::context(p.force),
            )
            .await?)
    }

    /// `session/append {path, entry, parentId?, expectedLeafId}`.
    pub async fn append(&self, p: Value) -> RpcResult<Value> {
        let p: AppendParams = params("session/append", p)?;
        let expected = expected_leaf("session/append", p.expected_leaf_id)?;
        // The request's strings are decoded (a lone surrogate held as a U+FDD0 pair): the line
        // written holds pi's escape for it, as pi writes one.
        let entry_json = match p.entry {
            Value::String(text) => jsstr::restore_json(&text).into_owned(),
            Value::Object(_) => jsstr::restore_json(&p.entry.to_string()).into_owned(),
            _ => {
                return Err(RpcError::InvalidParams {
                    method: "session/append",
                    detail: "entry must be a JSON object (or its JSON text)".into(),
                }
                .into());
            }
        };
        let owned = OwnedChange::Append {
            entry_json,
            parent_id: p.parent_id,
        };
        Ok(self
            .append_change(
                "session/append",
                &p.path,
                expected,
                owned,
                Guard::context(p.force),
            )
            .await?)
    }

    /// `session/prepareCompaction {path, leafId?, keepRecentTokens?, customInstructions?}`.
    pub async fn prepare_compaction(&self, p: Value) -> RpcResult<Value> {
        let p: PrepareCompactionParams = params("session/prepareCompaction", p)?;
        Ok(self
            .ask(&p.path, move |s| {
                let req = CompactRequest {
                    leaf: p.leaf_id.as_deref(),
                    keep_recent_tokens: p.keep_recent_tokens.unwrap_or(DEFAULT_KEEP_RECENT_TOKENS),
                    custom_instructions: p.custom_instructions.as_deref(),
                    ..CompactRequest::default()
                };
                let value = match compact::plan(
                    s.path(),
                    pi_of(s, "session/prepareCompaction")?.tree(),
                    s.source(),
                    &req,
                )? {
                    Err(nothing) => compact::nothing_json(nothing),
                    Ok(plan) => wire_value(&plan, compact::plan_json(&plan, false)),
                };
                Ok(with_revision(value, s))
            })
            .await?)
    }

    /// `session/compact {path, leafId?, expectedLeafId, keepRecentTokens?, summary?,
    /// customInstructions?, requireRetention?, dryRun?}`. A dry run plans on the owner's view
    /// (checking `expectedLeafId` when given); a commit plans again under the write lock.
    pub async fn compact(&self, p: Value) -> RpcResult<Value> {
        let p: CompactParams = params("session/compact", p)?;
        let path = p.path.clone();
        let expected = match (p.expected_leaf_id.clone(), p.dry_run) {
            (Some(e), _) => Some(e),
            (None, true) => None,
            (None, false) => Some(expected_leaf("session/compact", None)?),
        };
        if let Some(choice) = model_choice(&p)? {
            return Ok(self.compact_with_model(p, choice, expected).await?);
        }
        if p.dry_run {
            return Ok(self
                .ask(&path, move |s| {
                    let view = match &expected {
                        Some(e) => Expected::Leaf(e.as_deref()),
                        None => Expected::Unfenced,
                    };
                    let planned = compact::dry_run(
                        s.path(),
                        pi_of(s, "session/compact")?.tree(),
                        s.source(),
                        &request(&p),
                        view,
                    )?;
                    let value = match planned {
                        Err(nothing) => compact::nothing_json(nothing),
                        Ok(plan) => compact_report(&plan, false),
                    };
                    Ok(with_revision(value, s))
                })
                .await?);
        }
        let expected = expected.flatten();
        let guard = Guard::context(p.force);
        Ok(self
            .write_on(&path, move |s, sink| {
                if s.pi().is_none() {
                    return Err(super::handlers::unsupported(s, "session/compact"));
                }
                refuse_beside_agent(s, guard)?;
                commit_compaction(s, sink, &request(&p), expected.as_deref())
                    .map_err(|e| e.naming("session/compact"))
            })
            .await?)
    }
}

/// Forks the open session `s` as `req` asks, from what reads strictly (a lenient tree may hide
/// corruption, so it is read again strictly): a pi session into a new session file, a Claude
/// Code transcript into a new transcript (its only write). `method` names the request in a
/// refusal. Errors: the writer's, the strict read's, `unsupportedForFormat` for a Codex
/// rollout.
fn fork_session(
    s: &Session,
    method: &'static str,
    req: ForkRequest<'_>,
    reservations: &crate::storage::publish::Reservations,
) -> Result<writer::Forked, RpcError> {
    if let Some(tree) = s.claude() {
        return Ok(if s.mode() == Mode::Lenient {
            let fresh = crate::storage::reader::open_session::<crate::dialect::claude::Claude>(
                s.path(),
                Mode::Strict,
            )
            .map_err(crate::session::SessionError::Open)?;
            writer::fork_transcript(s.path(), &fresh.tree, req, reservations)?
        } else {
            writer::fork_transcript(s.path(), tree, req, reservations)?
        });
    }
    Ok(if s.mode() == Mode::Lenient {
        let fresh = writer::open_for_write(s.path())?;
        writer::fork(s.path(), &fresh.tree, req, reservations)?
    } else {
        writer::fork(s.path(), pi_of(s, method)?.tree(), req, reservations)?
    })
}

/// The model a `session/compact` asks to summarize with, if any. Errors: a summarizer beside a
/// `summary` (-32602).
fn model_choice(p: &CompactParams) -> Result<Option<(ModelChoice, CallOptions)>, RpcError> {
    let Some(s) = p
        .summarizer
        .as_ref()
        .filter(|s| s.kind == SummarizerKind::Model)
    else {
        return Ok(None);
    };
    if p.summary.is_some() {
        return Err(RpcError::InvalidParams {
            method: "session/compact",
            detail: "summary and a model summarizer exclude each other".into(),
        });
    }
    let choice = ModelChoice {
        model: s.model.clone(),
        base_url: s.base_url.clone(),
        api: s.api.map(|a| match a {
            SummarizerApi::OpenAiCompletions => Api::OpenAiCompletions,
            SummarizerApi::AnthropicMessages => Api::AnthropicMessages,
        }),
        api_key_env: s.api_key_env.clone(),
    };
    let defaults = CallOptions::default();
    let opts = CallOptions {
        timeout: s
            .timeout_ms
            .map_or(defaults.timeout, std::time::Duration::from_millis),
        max_retries: s.max_retries.unwrap_or(defaults.max_retries),
        ..defaults
    };
    Ok(Some((choice, opts)))
}

impl Backend {
    /// `session/compact` with a model summarizer: plan on the owner's view (fenced by
    /// `expectedLeafId`), call the model with pi's request outside the owner (reporting
    /// `$/progress` under `workDoneToken`), then commit the answer under the write lock, which
    /// plans again and refuses a moved file. A cancelled request drops this future during the
    /// call: the connection closes and nothing is written.
    async fn compact_with_model(
        &self,
        p: CompactParams,
        (choice, opts): (ModelChoice, CallOptions),
        expected: Option<Option<String>>,
    ) -> Result<Value, RpcError> {
        let path = p.path.clone();
        let view_expected = expected.clone();
        let leaf = p.leaf_id.clone();
        let keep = p.keep_recent_tokens;
        let custom = p.custom_instructions.clone();
        let planned = self
            .ask(&path, move |s| {
                let view = match &view_expected {
                    Some(e) => Expected::Leaf(e.as_deref()),
                    None => Expected::Unfenced,
                };
                let req = CompactRequest {
                    leaf: leaf.as_deref(),
                    keep_recent_tokens: keep.unwrap_or(DEFAULT_KEEP_RECENT_TOKENS),
                    custom_instructions: custom.as_deref(),
                    ..CompactRequest::default()
                };
                Ok(
                    match compact::model_job(
                        s.path(),
                        pi_of(s, "session/compact")?.tree(),
                        s.source(),
                        &req,
                        view,
                    )? {
                        Err(nothing) => Err(with_revision(compact::nothing_json(nothing), s)),
                        Ok(job) => Ok(job),
                    },
                )
            })
            .await?;
        let job = match planned {
            Err(nothing) => return Ok(nothing),
            Ok(job) => job,
        };
        let session_path = path.clone();
        let (job, endpoint) = {
            let file = session_path.clone();
            tokio::task::spawn_blocking(move || {
                let endpoint = job.endpoint(&file, &choice);
                (job, endpoint)
            })
            .await
            .map_err(|e| RpcError::Io {
                path: session_path.clone(),
                source: std::io::Error::other(e.to_string()),
            })?
        };
        let endpoint = endpoint?;
        let progress = match p.work_done_token.clone() {
            Some(token) => Some(
                self.client
                    .progress(
                        token,
                        format!(
                            "Summarizing with {}/{}",
                            endpoint.provider, endpoint.model_id
                        ),
                    )
                    .begin()
                    .await,
            ),
            None => None,
        };
        // Progress arrives from inside the call; the latest message is forwarded between
        // polls, at most every 200 ms.
        let (tx, mut rx) = tokio::sync::watch::channel(None::<String>);
        let report = move |p: Progress| {
            let message = match p {
                Progress::Sending { part, attempt } => {
                    format!("{part}: waiting for the model (attempt {attempt})")
                }
                Progress::Receiving { part, chars } => format!("{part}: {chars} characters"),
                Progress::Retrying {
                    part, wait, reason, ..
                } => format!("{part}: {reason}; retrying in {} ms", wait.as_millis()),
            };
            let _ = tx.send(Some(message));
        };
        let call = job.run(&session_path, &endpoint, &opts, &report);
        tokio::pin!(call);
        let summary = loop {
            tokio::select! {
                result = &mut call => break result,
                changed = rx.changed() => {
                    if changed.is_err() {
                        break (&mut call).await;
                    }
                    let message = rx.borrow_and_update().clone();
                    if let (Some(progress), Some(message)) = (&progress, message) {
                        progress.report(message).await;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
        };
        if let Some(progress) = progress {
            progress
                .finish_with_message(match &summary {
                    Ok(_) => "summary received".to_owned(),
                    Err(_) => "failed; nothing written".to_owned(),
                })
                .await;
        }
        let summary = summary?;
        let (leaf, custom) = (p.leaf_id.clone(), p.custom_instructions.clone());
        let keep = p.keep_recent_tokens.unwrap_or(DEFAULT_KEEP_RECENT_TOKENS);
        let require = p.require_retention;
        let request = move || CompactRequest {
            leaf: None,
            keep_recent_tokens: keep,
            summary: None,
            summary_source: SummarySource::Model,
            custom_instructions: None,
            require_retention: require,
            // The report leaves the request out (`PREPARE_ONLY`): not built.
            with_request: false,
        };
        if p.dry_run {
            return self
                .ask(&path, move |s| {
                    let view = match &expected {
                        Some(e) => Expected::Leaf(e.as_deref()),
                        None => Expected::Unfenced,
                    };
                    let req = CompactRequest {
                        leaf: leaf.as_deref(),
                        summary: Some(&summary),
                        custom_instructions: custom.as_deref(),
                        ..request()
                    };
                    let value = match compact::dry_run(
                        s.path(),
                        pi_of(s, "session/compact")?.tree(),
                        s.source(),
                        &req,
                        view,
                    )? {
                        Err(nothing) => compact::nothing_json(nothing),
                        Ok(plan) => compact_report(&plan, false),
                    };
                    Ok(with_revision(value, s))
                })
                .await;
        }
        let expected = expected.flatten();
        let guard = Guard::context(p.force);
        self.write_on(&path, move |s, sink| {
            refuse_beside_agent(s, guard)?;
            let req = CompactRequest {
                leaf: leaf.as_deref(),
                summary: Some(&summary),
                custom_instructions: custom.as_deref(),
                ..request()
            };
            commit_compaction(s, sink, &req, expected.as_deref())
                .map_err(|e| e.naming("session/compact"))
        })
        .await
    }
}

fn request(p: &CompactParams) -> CompactRequest<'_> {
    CompactRequest {
        leaf: p.leaf_id.as_deref(),
        keep_recent_tokens: p.keep_recent_tokens.unwrap_or(DEFAULT_KEEP_RECENT_TOKENS),
        summary: p.summary.as_deref(),
        summary_source: SummarySource::Client,
        custom_instructions: p.custom_instructions.as_deref(),
        require_retention: p.require_retention,
        // The report leaves the request out (`PREPARE_ONLY`): not built.
        with_request: false,
    }
}

/// The `session/compact` result: the compaction report without [`PREPARE_ONLY`] fields.
/// Writes the compaction `req` plans on the session, fenced by `expected`, and answers its
/// report (or why there is nothing to compact) with the session's revision.
fn commit_compaction(
    s: &mut Session,
    sink: &dyn EventSink,
    req: &CompactRequest<'_>,
    expected: Option<&str>,
) -> Result<Value, RpcError> {
    let committed = s.write(sink, |path, opened| {
        compact::commit(
            path,
            opened,
            req,
            Expected::Leaf(expected),
            &WriteOptions::default(),
        )
        .map_err(RpcError::from)
    })?;
    let value = match committed {
        Committed::Nothing(nothing) => compact::nothing_json(nothing),
        Committed::Written { plan, .. } => compact_report(&plan, true),
    };
    Ok(with_revision(value, s))
}

fn compact_report(plan: &CompactionPlan, written: bool) -> Value {
    let mut v = compact::plan_json(plan, written);
    if let Value::Object(map) = &mut v {
        for k in PREPARE_ONLY {
            map.remove(*k);
        }
    }
    wire_value(plan, v)
}

/// A compaction report ready for the wire: the plan's lone surrogates (held as private-use
/// characters while planning) become the escapes pi writes, carried by [`lossless`].
fn wire_value(plan: &CompactionPlan, report: Value) -> Value {
    lossless::parse(compact::json_text(plan, &report).as_bytes()).unwrap_or(report)
}

/// A [`Change`] that owns its text, so a handler can move it to the session's owner;
/// one variant per `Change` variant, with the same fields.
pub enum OwnedChange {
    /// [`Change::Label`]: set (`Some`) or clear (`None`) the label of `target_id`.
    Label {
        /// The entry whose label changes.
        target_id: String,
        /// The new label; `None` clears it.
        label: Option<String>,
    },
    /// [`Change::SetName`]: name the session.
    SetName {
        /// The name as given.
        name: String,
    },
    /// [`Change::Branch`]: a `branch_summary` entry starting a branch at `from_id`.
    Branch {
        /// The entry the branch starts from; `None`: before the first entry.
        from_id: Option<String>,
        /// The summary of the branch left.
        summary: String,
        /// Stored as the entry's `details`, byte for byte.
        details: Option<Box<RawValue>>,
    },
    /// [`Change::Append`]: a front-end's entry as JSON text.
    Append {
        /// The entry object as JSON text.
        entry_json: String,
        /// `None`: under the session's last entry; `Some(None)`: a new root; `Some(Some(id))`:
        /// under that entry (the `parentId` param: absent, `null` or an id).
        parent_id: Option<Option<String>>,
    },
}

impl OwnedChange {
    /// The change borrowing this one's text, for [`writer::write_entry`].
    pub fn change(&self) -> Change<'_> {
        match self {
            OwnedChange::Label { target_id, label } => Change::Label {
                target_id,
                label: label.as_deref(),
            },
            OwnedChange::SetName { name } => Change::SetName { name },
            OwnedChange::Branch {
                from_id,
                summary,
                details,
            } => Change::Branch {
                from_id: from_id.as_deref(),
                summary,
                details: details.as_deref(),
            },
            OwnedChange::Append {
                entry_json,
                parent_id,
            } => Change::Append {
                entry_json,
                parent: match parent_id {
                    None => ParentChoice::Leaf,
                    Some(p) => ParentChoice::Explicit(p.as_deref()),
                },
            },
        }
    }
}
