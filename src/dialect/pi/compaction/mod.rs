//! Compaction: pi's cut point and summarization request, an embedded extractive summarizer,
//! a retention check, and the entry line to append. Pure: session lines are read through
//! [`LineSource`]; writing the line is the caller's job (under the write rules of SPEC §4).
//!
//! [`plan`] runs the whole pipeline for one leaf:
//! 1. [`prepare`](prepare::prepare) — pi 1.6.0 `prepareCompaction` on the leaf's path:
//!    `firstKeptEntryId`, `tokensBefore`, split turn, previous summary, the messages to
//!    summarize and the turn prefix, read and modified files;
//! 2. the exact [`SummarizationRequest`] pi would send (for a client with a model);
//! 3. the summary: the client's, stored verbatim, or the [`summarizer`]'s;
//! 4. the entry pi's `appendCompaction` would write ([`entry`]), the context it starts
//!    (the summary plus the kept messages) and its token estimate (`tokensAfter`);
//! 5. the [`retention`] report of that context.
//!
//! Where pi itself would throw on a malformed message (a `null` content it iterates, a tool
//! call without arguments) the result is [`CompactionError::PiWouldThrow`] rather than a
//! guess.
//!
//! Messages are parsed with [`js::parse_json`] ([`crate::js::jsstr`]), which holds the lone
//! UTF-16 surrogates pi writes as marked pairs of characters; every JSON text leaving the plan
//! must pass through [`crate::js::jsstr::restore_json`] (the entry line already does).

pub mod audit;
pub mod entry;
pub mod files;
pub mod packed;
pub mod prepare;
pub mod prompts;
pub mod retention;
pub mod serialize;
pub mod summarizer;
pub mod text_tokens;
pub mod tokens;

use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;

use self::entry::CompactionEntry;
use self::prepare::{NothingToCompact, Preparation, Span, SpanSource};
use self::prompts::SummarizationRequest;
use self::retention::Retention;
use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::EntryId;
use crate::dialect::pi::projection::{self, is_system_message};
use crate::dialect::pi::render::{self, LineSource, RenderError};
use crate::js::value as js;

/// Why a compaction could not be planned.
#[derive(Debug, Error)]
pub enum CompactionError {
    /// pi 1.6.0 throws on this input (the entry, when known, holds the offending message).
    #[error("pi would fail on this session{}: {detail}", entry_id.as_ref().map_or(String::new(), |id| format!(" at entry {id}")))]
    PiWouldThrow {
        /// The entry holding the offending message, when known.
        entry_id: Option<EntryId>,
        /// What pi would throw on, naming the field.
        detail: String,
    },
    /// A line could not be read or no longer holds its entry.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// The id chosen for the new entry is already used in the session.
    #[error("entry id {0} is already used in the session")]
    IdTaken(EntryId),
}

/// Where the summary came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SummarySource {
    /// The client's summary, stored verbatim.
    Client,
    /// The embedded extractive summarizer.
    Embedded,
    /// A model endpoint's answer to the request (pi's `compact`, file blocks appended).
    Model,
}

/// What to compact and how.
#[derive(Clone, Debug)]
pub struct Options<'a> {
    /// pi's `keepRecentTokens` ([`prepare::DEFAULT_KEEP_RECENT_TOKENS`] by default).
    pub keep_recent_tokens: u64,
    /// A summary to store verbatim (a client that ran the request through its model appends
    /// [`CompactionPlan::file_operations`] itself if it wants pi's exact layout).
    pub summary: Option<&'a str>,
    /// Where `summary` came from ([`SummarySource::Client`] or [`SummarySource::Model`]).
    pub summary_source: SummarySource,
    /// pi's `customInstructions` (`Additional focus: …` in the request).
    pub custom_instructions: Option<&'a str>,
    /// The id of the entry to write (pi: 8 hex characters, unused in the session).
    pub new_entry_id: EntryId,
    /// The write time, epoch milliseconds.
    pub time_ms: i64,
    /// Build the summarization request and the serialized conversation
    /// ([`CompactionPlan::request`]); they hold the summarized span's text, as large as the
    /// span, so a caller that does not show or send them leaves them out.
    pub with_request: bool,
}

/// A planned compaction: everything needed to report it, and the exact line to append.
#[derive(Clone, Debug)]
pub struct CompactionPlan {
    /// The leaf the entry goes under.
    pub leaf_id: EntryId,
    /// pi's cut point and span for the leaf.
    pub preparation: Preparation,
    /// pi `serializeConversation(convertToLlm(messagesToSummarize))`; `None` unless asked for
    /// ([`Options::with_request`]).
    pub conversation: Option<String>,
    /// The same for the turn prefix of a split turn.
    pub turn_prefix_conversation: Option<String>,
    /// The summarization requests pi would send; `None` unless asked for.
    pub request: Option<SummarizationRequest>,
    /// Where the summary comes from: the caller's text or the embedded summarizer.
    pub summary_source: SummarySource,
    /// The compaction entry to append.
    pub entry: CompactionEntry,
    /// pi's estimate of the context after compaction (sum of `estimateTokens`).
    pub tokens_after: f64,
    /// The retention report of the summary against the new context.
    pub retention: Retention,
    /// The context after compaction: each message and its entry (the new entry's id for the
    /// summary and system message).
    pub new_context: Vec<(EntryId, Value)>,
}

impl CompactionPlan {
    /// The compaction entry as JSON, without the newline, lone surrogates written as pi writes
    /// them.
    pub fn entry_json(&self) -> String {
        self.entry.to_json()
    }

    /// The exact line to append: [`entry_json`](Self::entry_json) and `\n`.
    pub fn entry_line(&self) -> String {
        let mut line = self.entry_json();
        line.push('\n');
        line
    }

    /// pi's file-operation blocks (`formatFileOperations`), which pi appends to the model's
    /// summary.
    pub fn file_operations(&self) -> String {
        self.preparation.file_lists.format()
    }
}

/// The summarization request pi `compact` would send for `prep`, the spans' messages read
/// from `source` one at a time: the request, the conversation and the turn prefix's.
pub fn build_request(
    prep: &Preparation,
    source: &dyn SpanSource,
    custom_instructions: Option<&str>,
) -> Result<(SummarizationRequest, String, Option<String>), CompactionError> {
    let to_text = |span: &Span| -> Result<String, CompactionError> {
        let mut text = String::new();
        source.for_each_message(span, &mut |m| {
            for llm in serialize::convert_to_llm(&[&m.message]) {
                serialize::serialize_message(&llm, &mut text).map_err(|e| {
                    CompactionError::PiWouldThrow {
                        entry_id: None,
                        detail: e.0,
                    }
                })?;
            }
            Ok(())
        })?;
        Ok(text)
    };
    let conversation = to_text(&prep.messages_to_summarize)?;
    let previous = prep.previous_summary_text();
    let history =
        |conv: &str| prompts::history_prompt(conv, previous.as_deref(), custom_instructions);
    let split = prep.is_split_turn && prep.turn_prefix_messages.messages > 0;
    let (prompt, prefix_conversation, turn_prefix_prompt) = if split {
        let prefix = to_text(&prep.turn_prefix_messages)?;
        let prompt = (prep.messages_to_summarize.messages > 0).then(|| history(&conversation));
        let turn = prompts::turn_prefix_prompt(&prefix, custom_instructions);
        (prompt, Some(prefix), Some(turn))
    } else {
        (Some(history(&conversation)), None, None)
    };
    Ok((
        SummarizationRequest {
            system_prompt: prompts::SUMMARIZATION_SYSTEM_PROMPT.to_owned(),
            prompt,
            turn_prefix_prompt,
        },
        conversation,
        prefix_conversation,
    ))
}

/// Plans a compaction of the path ending at `leaf` (`None`: the empty leaf). `Ok(Err(_))`
/// is pi's "nothing to compact".
pub fn plan(
    tree: &Tree,
    source: &dyn LineSource,
    leaf: Option<NodeIdx>,
    options: &Options<'_>,
) -> Result<Result<CompactionPlan, NothingToCompact>, CompactionError> {
    if tree.find(options.new_entry_id.as_str()).is_some() {
        return Err(CompactionError::IdTaken(options.new_entry_id.clone()));
    }
    let projection = projection::project_path(tree, leaf);
    let projected = prepare::projected_entries(tree, &projection, source)?;
    let prep = match prepare::prepare(&projected, options.keep_recent_tokens as f64)? {
        Ok(p) => p,
        Err(nothing) => return Ok(Err(nothing)),
    };
    let Some(leaf) = leaf else {
        return Ok(Err(NothingToCompact::EmptyPath));
    };
    let (request, conversation, turn_prefix_conversation) = if options.with_request {
        let (request, conversation, prefix) =
            build_request(&prep, &projected, options.custom_instructions)?;
        (Some(request), Some(conversation), prefix)
    } else {
        (None, None, None)
    };
    let kept_messages = projected.messages_from(prep.first_kept_index)?;

    let (summary, summary_source) = match options.summary {
        Some(s) => (s.to_owned(), options.summary_source),
        None => (
            summarizer::summarize(&prep, &projected, &kept_messages)?,
            SummarySource::Embedded,
        ),
    };
    let system_message =
        projected
            .current_system_message()
            .map_err(|e| CompactionError::PiWouldThrow {
                entry_id: None,
                detail: e.0,
            })?;
    let entry = CompactionEntry {
        id: options.new_entry_id.clone(),
        parent_id: Some(tree.node(leaf).entry.id.clone()),
        time_ms: options.time_ms,
        summary,
        first_kept_entry_id: prep.first_kept_entry_id.clone(),
        tokens_before: prep.tokens_before,
        file_lists: prep.file_lists.clone(),
        system_message,
    };

    let new_context = context_after(tree, source, &projection.path, &entry)?;
    let mut tokens_after = 0.0;
    for (_, m) in &new_context {
        tokens_after += tokens::estimate_tokens(m).unwrap_or(f64::NAN);
    }
    let probes = retention::probes(&prep, &projected, &kept_messages)?;
    let retention = retention::check(probes, &new_context);
    drop(projected);
    Ok(Ok(CompactionPlan {
        leaf_id: tree.node(leaf).entry.id.clone(),
        preparation: prep,
        conversation,
        turn_prefix_conversation,
        request,
        summary_source,
        entry,
        tokens_after,
        retention,
        new_context,
    }))
}

/// The context the new compaction entry starts, as pi's `buildSessionProjection` will see it
/// once the entry is appended under the leaf: its system message and summary, then the path
/// from `firstKeptEntryId` to the leaf without system messages (edits within that range
/// apply; older compactions in it contribute nothing).
fn context_after(
    tree: &Tree,
    source: &dyn LineSource,
    path: &[NodeIdx],
    entry: &CompactionEntry,
) -> Result<Vec<(EntryId, Value)>, CompactionError> {
    let mut out = Vec::new();
    if let Some(system) = entry.written_system_message() {
        out.push((entry.id.clone(), system));
    }
    let mut summary = Map::new();
    summary.insert("role".into(), Value::String("compactionSummary".into()));
    summary.insert("summary".into(), Value::String(entry.summary.clone()));
    summary.insert("tokensBefore".into(), entry::js_number(entry.tokens_before));
    summary.insert("timestamp".into(), Value::from(entry.time_ms));
    out.push((entry.id.clone(), Value::Object(summary)));
    let kept: Vec<NodeIdx> = match path
        .iter()
        .position(|&n| tree.node(n).entry.id == entry.first_kept_entry_id)
    {
        Some(start) => path[start..]
            .iter()
            .copied()
            .filter(|&n| !is_system_message(tree, n))
            .collect(),
        None => Vec::new(),
    };
    for item in projection::context_items(tree, &kept, true) {
        let kept_entry = &tree.node(item.node).entry;
        for raw in render::render_item(tree, &item, source)? {
            let message = js::parse_json(raw.get().as_bytes())
                .map_err(|e| render::changed(kept_entry, &e.to_string()))?;
            out.push((kept_entry.id.clone(), message));
        }
    }
    Ok(out)
}
