//! Compaction preparation: where to cut, what to summarize, the token estimate before, the
//! split turn and the file lists. Matches pi 1.6.0 `prepareCompaction`,
//! `findProjectedCutPoint`, `findProjectedTurnStartIndex`, `estimateProjectedContextTokens`,
//! `getMessagesFromProjectedEntryForCompaction` and `extractFileOperations`.
//!
//! Input shape: pi works on the *path* (`pathEntries`, root to leaf) and on its canonical
//! projection (`buildSessionProjection(pathEntries)`: the compaction-aware context entries,
//! each with the messages it contributes after context edits). [`projected_entries`] builds
//! that projection from the tree by rendering each context entry through a
//! [`LineSource`]; [`prepare`] is then a pure function of it and the path.

use serde::Serialize;
use serde_json::Value;

use super::CompactionError;
use super::files::{FileLists, FileOps};
use super::js::{self, TypeError};
use super::tokens::{current_system_message, estimate_context_tokens, estimate_tokens};
use crate::core::format::{EntryId, EntryKind};
use crate::core::projection::{Contribution, Projection, Silence};
use crate::core::render::{self, LineSource, RenderError};
use crate::core::tree::{NodeIdx, Tree};

/// pi's default `keepRecentTokens` (`DEFAULT_COMPACTION_SETTINGS`).
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = 20_000;

/// What kind of source entry a projected entry is, with the fields preparation reads.
#[derive(Clone, Debug)]
pub enum SourceKind {
    /// A `message` entry and its role.
    Message {
        /// The message's `role`.
        role: String,
    },
    /// A `compaction` entry: its `summary`, `details` and whether `fromHook` is truthy.
    Compaction {
        /// `summary` as stored (any JSON).
        summary: Option<Value>,
        /// `details` as stored (pi reads `readFiles`/`modifiedFiles` from it).
        details: Option<Value>,
        /// JavaScript truthiness of `fromHook`.
        from_hook: bool,
    },
    /// A `context_edit`: its target and whether `replacement` is exactly `null`.
    ContextEdit {
        /// The edited entry (`targetId`).
        target_id: Option<EntryId>,
        /// True when `replacement` is exactly `null` (the target is omitted).
        replacement_is_null: bool,
    },
    /// Any other type.
    Other,
}

/// One entry of pi's canonical projection (`projection.entries[i]`).
#[derive(Clone, Debug)]
pub struct ProjectedEntry {
    /// The entry's node in the tree.
    pub node: NodeIdx,
    /// The entry's id.
    pub id: EntryId,
    /// Its type, with the fields preparation reads.
    pub kind: SourceKind,
    /// `sessionEntryToContextMessages(sourceEntry).length > 0` and not a context edit: the
    /// entry would show messages if no edit omitted it.
    pub intrinsically_visible: bool,
    /// The messages it contributes (after context edits; none for an older compaction).
    pub messages: Vec<Value>,
}

/// One path entry as `estimateProjectedContextTokens` sees it (`branchEntries`).
#[derive(Clone, Debug)]
pub struct PathEntry {
    /// The entry's id.
    pub id: EntryId,
    /// `context_edit` or `compaction`: entries that invalidate earlier usage numbers.
    pub invalidates_usage: bool,
    /// A `compaction` entry.
    pub is_compaction: bool,
}

/// A message of the summarized span and the entry it came from.
#[derive(Clone, Debug)]
pub struct SpanMessage {
    /// The entry the message came from.
    pub entry_id: EntryId,
    /// The message as pi's projection builds it.
    pub message: Value,
}

/// pi's `CompactionPreparation`, plus the file lists and where the kept range starts.
#[derive(Clone, Debug)]
pub struct Preparation {
    /// Where the kept range starts (pi's `firstKeptEntryId`).
    pub first_kept_entry_id: EntryId,
    /// `tokensBefore`; `NaN` where pi's estimate is `NaN` (printed as `null`).
    pub tokens_before: f64,
    /// The cut splits a turn: the turn's start is summarized separately (pi's `isSplitTurn`).
    pub is_split_turn: bool,
    /// The newest compaction's `summary`, as stored.
    pub previous_summary: Option<Value>,
    /// The entry holding the previous summary.
    pub previous_compaction_id: Option<EntryId>,
    /// pi's `messagesToSummarize`: the span before the cut (or before the split turn).
    pub messages_to_summarize: Vec<SpanMessage>,
    /// pi's `turnPrefixMessages`: the start of a split turn; empty otherwise.
    pub turn_prefix_messages: Vec<SpanMessage>,
    /// Files read, written and edited in the span, plus the previous compaction's details.
    pub file_ops: FileOps,
    /// `readFiles` and `modifiedFiles` as pi computes them from `file_ops`.
    pub file_lists: FileLists,
    /// pi's `keepRecentTokens` setting, in tokens (default 20000).
    pub keep_recent_tokens: f64,
}

impl Preparation {
    /// The previous summary as pi's prompt uses it: `None` unless truthy, `String(x)` otherwise.
    pub fn previous_summary_text(&self) -> Option<String> {
        let v = self.previous_summary.as_ref();
        js::truthy(v).then(|| js::template_string(v))
    }
}

/// Why preparation found nothing to compact (pi returns `undefined`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NothingToCompact {
    /// The path is empty (an empty session, or the empty leaf).
    EmptyPath,
    /// The leaf is itself a compaction (pi: "Already compacted").
    LeafIsCompaction,
    /// No entry could be kept, or there is nothing before the cut to summarize
    /// (pi: "Nothing to compact (session too small)").
    NothingBeforeCut,
}

/// pi's canonical projection of a path, as [`projected_entries`] builds it.
#[derive(Clone, Debug)]
pub struct Projected {
    /// The path from the root to the leaf, as pi's `branchEntries`.
    pub path: Vec<PathEntry>,
    /// pi's `projection.entries`, in path order.
    pub entries: Vec<ProjectedEntry>,
}

/// Parses a rendered message or a session line as `JSON.parse` does ([`js::parse_json`]);
/// a failure means the line no longer holds the entry it held when the tree was built.
fn parse_line(bytes: &[u8], entry: &crate::core::format::Entry) -> Result<Value, RenderError> {
    js::parse_json(bytes).map_err(|e| RenderError::Changed {
        line: entry.span.line,
        id: entry.id.to_string(),
        detail: e.to_string(),
    })
}

/// Builds the path and pi's canonical projection of `projection` (see the module docs).
pub fn projected_entries(
    tree: &Tree,
    projection: &Projection,
    source: &dyn LineSource,
) -> Result<Projected, RenderError> {
    let path = projection
        .path
        .iter()
        .map(|&n| {
            let kind = &tree.node(n).entry.kind;
            let is_compaction = matches!(kind, EntryKind::Compaction { .. });
            PathEntry {
                id: tree.node(n).entry.id.clone(),
                invalidates_usage: is_compaction || matches!(kind, EntryKind::ContextEdit { .. }),
                is_compaction,
            }
        })
        .collect();
    let mut entries = Vec::with_capacity(projection.items.len());
    for item in &projection.items {
        let entry = &tree.node(item.node).entry;
        let messages = render::render_item(tree, item, source)?
            .into_iter()
            .map(|raw| parse_line(raw.get().as_bytes(), entry))
            .collect::<Result<Vec<Value>, RenderError>>()?;
        let read_line = || -> Result<Value, RenderError> {
            let bytes = source.line(entry.span).map_err(|e| RenderError::Io {
                line: entry.span.line,
                id: entry.id.to_string(),
                source: e,
            })?;
            parse_line(&bytes, entry)
        };
        let kind = match &entry.kind {
            EntryKind::Message(m) => SourceKind::Message {
                role: m.role.as_str().to_owned(),
            },
            EntryKind::Compaction { .. } => {
                let mut line = read_line()?;
                SourceKind::Compaction {
                    summary: line.get_mut("summary").map(Value::take),
                    details: line.get_mut("details").map(Value::take),
                    from_hook: js::truthy(line.get("fromHook")),
                }
            }
            EntryKind::ContextEdit { target_id, .. } => {
                let line = read_line()?;
                SourceKind::ContextEdit {
                    target_id: target_id.clone(),
                    replacement_is_null: matches!(line.get("replacement"), Some(Value::Null)),
                }
            }
            _ => SourceKind::Other,
        };
        let intrinsically_visible = !matches!(kind, SourceKind::ContextEdit { .. })
            && match item.contribution {
                Contribution::Nothing(Silence::NeverInContext | Silence::EmptyBranchSummary) => {
                    false
                }
                Contribution::Nothing(Silence::OmittedByEdit | Silence::SupersededCompaction) => {
                    true
                }
                _ => true,
            };
        entries.push(ProjectedEntry {
            node: item.node,
            id: entry.id.clone(),
            kind,
            intrinsically_visible,
            messages,
        });
    }
    Ok(Projected { path, entries })
}

fn role_of(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// pi `isCutPointMessage`.
fn is_cut_point_message(m: &Value) -> bool {
    matches!(
        role_of(m),
        "user" | "assistant" | "bashExecution" | "custom" | "branchSummary" | "compactionSummary"
    )
}

/// pi `isTurnStartMessage`.
fn is_turn_start_message(m: &Value) -> bool {
    matches!(
        role_of(m),
        "user" | "bashExecution" | "custom" | "branchSummary" | "compactionSummary"
    )
}

fn is_compaction(e: &ProjectedEntry) -> bool {
    matches!(e.kind, SourceKind::Compaction { .. })
}

/// pi `isProjectedTurnStart`.
fn is_projected_turn_start(e: &ProjectedEntry) -> bool {
    !is_compaction(e) && e.messages.iter().any(is_turn_start_message)
}

fn pi_error(id: &EntryId, e: TypeError) -> CompactionError {
    CompactionError::PiWouldThrow {
        entry_id: Some(id.clone()),
        detail: e.0,
    }
}

/// The result of pi `findProjectedCutPoint`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutPoint {
    /// Index into the projected entries of the first kept entry.
    pub first_kept_entry_index: usize,
    /// `None` for pi's -1.
    pub turn_start_index: Option<usize>,
    /// The kept range starts inside a turn (pi's `isSplitTurn`).
    pub is_split_turn: bool,
}

/// pi `findProjectedCutPoint(entries, start, end, keepRecentTokens)`.
pub fn find_projected_cut_point(
    entries: &[ProjectedEntry],
    start: usize,
    end: usize,
    keep_recent_tokens: f64,
) -> Result<CutPoint, CompactionError> {
    let cut_points: Vec<usize> = (start..end)
        .filter(|&i| {
            !is_compaction(&entries[i]) && entries[i].messages.iter().any(is_cut_point_message)
        })
        .collect();
    let Some(&first_cut) = cut_points.first() else {
        return Ok(CutPoint {
            first_kept_entry_index: start,
            turn_start_index: None,
            is_split_turn: false,
        });
    };
    let mut accumulated = 0.0;
    let mut exceeded = false;
    let mut cut = first_cut;
    for i in (start..end).rev() {
        let mut tokens = 0.0;
        for m in &entries[i].messages {
            tokens += estimate_tokens(m).map_err(|e| pi_error(&entries[i].id, e))?;
        }
        if tokens == 0.0 {
            continue;
        }
        accumulated += tokens;
        if accumulated >= keep_recent_tokens {
            exceeded = true;
            cut = cut_points
                .iter()
                .copied()
                .find(|&c| c >= i)
                .unwrap_or(cut_points[cut_points.len() - 1]);
            break;
        }
    }
    // A recovery attempt and its omission edits are invisible after the last visible input;
    // pi advances the cut past such a closed suffix only.
    let suffix = entries.get(cut + 1..end).unwrap_or(&[]);
    let is_omitted = |e: &ProjectedEntry| e.intrinsically_visible && e.messages.is_empty();
    let omitted_ids: Vec<&EntryId> = suffix
        .iter()
        .filter(|e| is_omitted(e))
        .map(|e| &e.id)
        .collect();
    let has_external_replacement = suffix.iter().any(|e| match &e.kind {
        SourceKind::ContextEdit {
            target_id,
            replacement_is_null,
        } => !replacement_is_null && !target_id.as_ref().is_some_and(|t| omitted_ids.contains(&t)),
        _ => false,
    });
    let recovery_suffix = exceeded
        && !has_external_replacement
        && suffix.iter().any(|e| {
            matches!(&e.kind, SourceKind::Message { role } if role == "assistant") && is_omitted(e)
        })
        && suffix
            .iter()
            .all(|e| !is_compaction(e) && (!e.intrinsically_visible || is_omitted(e)));
    if recovery_suffix {
        cut += 1;
    }
    while cut > start {
        let previous = &entries[cut - 1];
        if is_compaction(previous) || !previous.messages.is_empty() {
            break;
        }
        cut -= 1;
    }
    // `entries[cut]` may be past the end after the recovery step; pi then reads undefined
    // (and its caller finds no kept entry).
    let starts_turn = entries.get(cut).is_some_and(is_projected_turn_start);
    let turn_start = if starts_turn {
        None
    } else {
        (start..=cut.min(entries.len().saturating_sub(1)))
            .rev()
            .find(|&i| i < entries.len() && is_projected_turn_start(&entries[i]))
    };
    Ok(CutPoint {
        first_kept_entry_index: cut,
        turn_start_index: turn_start,
        is_split_turn: !starts_turn && turn_start.is_some(),
    })
}

/// pi `estimateProjectedContextTokens(projection, branchEntries).tokens`.
pub fn estimate_projected_context_tokens(
    path: &[PathEntry],
    entries: &[ProjectedEntry],
) -> Result<f64, CompactionError> {
    let flat: Vec<(&EntryId, &Value)> = entries
        .iter()
        .flat_map(|e| e.messages.iter().map(move |m| (&e.id, m)))
        .collect();
    let messages: Vec<&Value> = flat.iter().map(|(_, m)| *m).collect();
    let located = |e: TypeError| CompactionError::PiWouldThrow {
        entry_id: None,
        detail: e.0,
    };
    let (tokens, last_usage) = estimate_context_tokens(&messages).map_err(located)?;
    if let Some(index) = last_usage {
        let usage_entry = flat.get(index).map(|(id, _)| *id);
        let usage_entry_index = usage_entry.and_then(|id| path.iter().position(|p| &p.id == id));
        let latest_invalidating = path.iter().rposition(|p| p.invalidates_usage);
        let after = match (usage_entry_index, latest_invalidating) {
            (Some(u), Some(l)) => u > l,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if after {
            return Ok(tokens);
        }
    }
    let mut tokens = match current_system_message(&messages).map_err(located)? {
        Some(system) => estimate_tokens(&system).map_err(located)?,
        None => 0.0,
    };
    for (id, m) in &flat {
        if role_of(m) != "system" {
            tokens += estimate_tokens(m).map_err(|e| pi_error(id, e))?;
        }
    }
    Ok(tokens)
}

/// pi `getMessagesFromProjectedEntryForCompaction` over a range of entries.
fn span_messages(entries: &[ProjectedEntry]) -> Vec<SpanMessage> {
    entries
        .iter()
        .filter(|e| !is_compaction(e))
        .flat_map(|e| {
            e.messages
                .iter()
                .filter(|m| role_of(m) != "system")
                .map(|m| SpanMessage {
                    entry_id: e.id.clone(),
                    message: m.clone(),
                })
        })
        .collect()
}

/// pi `prepareCompaction(pathEntries, {keepRecentTokens})`. `Ok(Err(reason))` is pi's
/// `undefined` (nothing to compact); `Err` is an input on which pi itself would throw.
pub fn prepare(
    projected: &Projected,
    keep_recent_tokens: f64,
) -> Result<Result<Preparation, NothingToCompact>, CompactionError> {
    let (path, entries) = (&projected.path[..], &projected.entries[..]);
    match path.last() {
        None => return Ok(Err(NothingToCompact::EmptyPath)),
        Some(last) if last.is_compaction => return Ok(Err(NothingToCompact::LeafIsCompaction)),
        Some(_) => {}
    }
    let previous = entries
        .iter()
        .position(|e| is_compaction(e) && !e.messages.is_empty());
    let (previous_summary, boundary_start) = match previous {
        Some(i) => match &entries[i].kind {
            SourceKind::Compaction { summary, .. } => (summary.clone(), i + 1),
            _ => (None, i + 1),
        },
        None => (None, 0),
    };
    let boundary_end = entries.len();
    let tokens_before = estimate_projected_context_tokens(path, entries)?;
    let cut = find_projected_cut_point(entries, boundary_start, boundary_end, keep_recent_tokens)?;
    let Some(first_kept) = entries.get(cut.first_kept_entry_index) else {
        return Ok(Err(NothingToCompact::NothingBeforeCut));
    };
    if first_kept.id.as_str().is_empty() {
        return Ok(Err(NothingToCompact::NothingBeforeCut));
    }
    let history_end = match (cut.is_split_turn, cut.turn_start_index) {
        (true, Some(t)) => t,
        _ => cut.first_kept_entry_index,
    };
    let messages_to_summarize =
        span_messages(entries.get(boundary_start..history_end).unwrap_or(&[]));
    let turn_prefix_messages = match (cut.is_split_turn, cut.turn_start_index) {
        (true, Some(t)) => span_messages(&entries[t..cut.first_kept_entry_index]),
        _ => Vec::new(),
    };
    if messages_to_summarize.is_empty() && turn_prefix_messages.is_empty() {
        return Ok(Err(NothingToCompact::NothingBeforeCut));
    }
    let mut file_ops = FileOps::default();
    // pi reads the previous compaction's details only when a hook did not write them.
    if let Some(i) = previous
        && let SourceKind::Compaction {
            details: Some(details),
            from_hook: false,
            ..
        } = &entries[i].kind
        && js::truthy(Some(details))
    {
        file_ops.add_details(details);
    }
    for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_message(&m.message);
    }
    let file_lists = file_ops.lists();
    Ok(Ok(Preparation {
        first_kept_entry_id: first_kept.id.clone(),
        tokens_before,
        is_split_turn: cut.is_split_turn,
        previous_summary,
        previous_compaction_id: previous.map(|i| entries[i].id.clone()),
        messages_to_summarize,
        turn_prefix_messages,
        file_ops,
        file_lists,
        keep_recent_tokens,
    }))
}
