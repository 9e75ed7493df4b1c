//! Compaction preparation: where to cut, what to summarize, the token estimate before, the
//! split turn and the file lists. Matches pi 1.6.0 `prepareCompaction`,
//! `findProjectedCutPoint`, `findProjectedTurnStartIndex`, `estimateProjectedContextTokens`,
//! `getMessagesFromProjectedEntryForCompaction` and `extractFileOperations`.
//!
//! Input shape: pi works on the *path* (`pathEntries`, root to leaf) and on its canonical
//! projection (`buildSessionProjection(pathEntries)`: the compaction-aware context entries,
//! each with the messages it contributes after context edits). [`projected_entries`] builds
//! that projection from the tree by rendering each context entry through a [`LineSource`];
//! [`prepare`] is then a pure function of it.
//!
//! Memory: the projection keeps no message bodies and no per-message facts. Each entry leaves
//! one byte, its flags (turn start, cut point, visibility) and number of messages
//! ([`PackedEntries`]);
//! pi's context token estimate is gathered while the projection is built (`TokenScan`);
//! the cut point reads the estimates of the newest entries again from the file, walking back
//! only as far as `keepRecentTokens` takes it. The messages the summarizer, the file lists
//! and the conversation need are read again from the file, one entry at a time, by
//! [`Projected::for_each_message`]. Only system messages (which pi-ai replays into one) are
//! held whole.

use std::ops::Range;

use serde::Serialize;
use serde_json::Value;

use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::compaction::CompactionError;
use crate::dialect::pi::compaction::files::{FileLists, FileOps};
use crate::dialect::pi::compaction::packed::PackedEntries;
use crate::dialect::pi::compaction::tokens::{
    assistant_usage, calculate_context_tokens, current_system_message, estimate_tokens,
};
use crate::dialect::pi::format::{EntryId, EntryKind, ToolCallId};
use crate::dialect::pi::projection::{Contribution, PathProjection, Silence};
use crate::dialect::pi::render::{self, LineSource, RenderError};
use crate::js::value::{self as js, TypeError};

/// pi's default `keepRecentTokens` (`DEFAULT_COMPACTION_SETTINGS`).
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = 20_000;

/// A message's `role`, as preparation tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `user`.
    User,
    /// `assistant`.
    Assistant,
    /// `toolResult`.
    ToolResult,
    /// `bashExecution`.
    BashExecution,
    /// `custom`.
    Custom,
    /// `branchSummary`.
    BranchSummary,
    /// `compactionSummary`.
    CompactionSummary,
    /// `system`.
    System,
    /// Any other role, or none.
    Other,
}

impl Role {
    /// The role of a message (`Other` when `role` is absent or not a known string).
    pub fn of(m: &Value) -> Role {
        match m.get("role").and_then(Value::as_str).unwrap_or("") {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "toolResult" => Role::ToolResult,
            "bashExecution" => Role::BashExecution,
            "custom" => Role::Custom,
            "branchSummary" => Role::BranchSummary,
            "compactionSummary" => Role::CompactionSummary,
            "system" => Role::System,
            _ => Role::Other,
        }
    }

    /// pi `isCutPointMessage`.
    fn is_cut_point(self) -> bool {
        matches!(
            self,
            Role::User
                | Role::Assistant
                | Role::BashExecution
                | Role::Custom
                | Role::BranchSummary
                | Role::CompactionSummary
        )
    }

    /// pi `isTurnStartMessage`.
    fn is_turn_start(self) -> bool {
        matches!(
            self,
            Role::User
                | Role::BashExecution
                | Role::Custom
                | Role::BranchSummary
                | Role::CompactionSummary
        )
    }
}

/// What [`TokenScan`] takes of one message: its usage event (`getAssistantUsage` and
/// `calculateContextTokens`, `None` when it has none), its `estimateTokens` and its role.
#[derive(Clone, Debug)]
struct MessageFacts {
    usage: Result<Option<f64>, TypeError>,
    tokens: Result<f64, TypeError>,
    role: Role,
}

impl MessageFacts {
    fn of(m: &Value, tokens: Result<f64, TypeError>, role: Role) -> Self {
        MessageFacts {
            usage: assistant_usage(m).and_then(|u| u.map(calculate_context_tokens).transpose()),
            tokens,
            role,
        }
    }
}

/// pi `estimateContextTokens` and `estimateProjectedContextTokens` of the projection's
/// messages, gathered in one pass in message order (the messages are not held):
/// the last message whose `getAssistantUsage` is valid or throws (pi walks back to it), the
/// estimate of the messages after it, and the estimates pi sums when it does not trust the
/// usage. Token estimates are integers (or `NaN`) far below 2^53, so their sums are exact in
/// any grouping.
#[derive(Clone, Debug, Default)]
struct TokenScan {
    /// The last usage event: its entry index and `calculateContextTokens(usage)` or the
    /// `TypeError` computing it.
    event: Option<(usize, Result<f64, TypeError>)>,
    /// Sum of `estimateTokens` of the messages after the event, in order.
    trailing: f64,
    /// The first `TypeError` of those estimates.
    trailing_error: Option<TypeError>,
    /// The first `TypeError` of any message's estimate.
    first_error: Option<TypeError>,
    /// Sum of the non-system messages' estimates.
    non_system: f64,
    /// The first `TypeError` of a non-system message's estimate, and its entry index.
    non_system_error: Option<(usize, TypeError)>,
}

impl TokenScan {
    /// Takes the next message, `tokens` its `estimateTokens`, `entry` its entry index.
    fn add(&mut self, m: &Value, tokens: &Result<f64, TypeError>, role: Role, entry: usize) {
        self.add_facts(&MessageFacts::of(m, tokens.clone(), role), entry);
    }

    /// [`TokenScan::add`] of a message's facts.
    fn add_facts(&mut self, facts: &MessageFacts, entry: usize) {
        let MessageFacts {
            usage,
            tokens,
            role,
        } = facts;
        let role = *role;
        match usage.clone() {
            Ok(None) => match tokens {
                Ok(t) if self.trailing_error.is_none() => self.trailing += t,
                Ok(_) => {}
                Err(e) => {
                    self.trailing_error.get_or_insert_with(|| e.clone());
                }
            },
            Ok(Some(u)) => self.reset((entry, Ok(u))),
            Err(e) => self.reset((entry, Err(e))),
        }
        if let Err(e) = tokens {
            self.first_error.get_or_insert_with(|| e.clone());
        }
        if role != Role::System {
            match tokens {
                Ok(t) if self.non_system_error.is_none() => self.non_system += t,
                Ok(_) => {}
                Err(e) => {
                    self.non_system_error
                        .get_or_insert_with(|| (entry, e.clone()));
                }
            }
        }
    }

    fn reset(&mut self, event: (usize, Result<f64, TypeError>)) {
        self.event = Some(event);
        self.trailing = 0.0;
        self.trailing_error = None;
    }
}

/// Sums of pi's estimates over some projected entries, gathered while the projection is
/// built, so that a caller that needs the sum of every entry does not read them all again:
/// the sum of each entry's estimate (as [`Projected::entry_tokens`] gives it) and the sum of
/// the messages' estimates with a `TypeError` counted 0. Kept only while every estimate is a
/// whole number from 0 to 2^53 (then any order of adding gives the same sum).
#[derive(Clone, Copy, Debug, Default)]
struct EstimateTotals {
    /// Sum of the entries' estimates.
    entries: f64,
    /// Sum of the messages' estimates, a `TypeError` counted 0.
    lenient: f64,
    /// Sum of the estimates of the entry being added.
    entry: f64,
    /// Some entry failed (`TypeError`), or an estimate or a sum is not a whole number from 0
    /// to 2^53: the sums are not used.
    inexact: bool,
}

/// Largest integer up to which every integer is an `f64`.
const EXACT_MAX: f64 = 9_007_199_254_740_992.0;

impl EstimateTotals {
    fn exact(x: f64) -> bool {
        (0.0..=EXACT_MAX).contains(&x) && x.fract() == 0.0
    }

    /// Adds the next message's estimate (of the entry being added).
    fn add_message(&mut self, tokens: &Result<f64, TypeError>) {
        match tokens {
            Ok(t) if Self::exact(*t) => {
                self.entry += t;
                self.lenient += t;
            }
            Ok(_) | Err(_) => self.inexact = true,
        }
    }

    /// Ends the entry whose messages were added.
    fn end_entry(&mut self) {
        self.entries += self.entry;
        self.entry = 0.0;
        if !Self::exact(self.entries) || !Self::exact(self.lenient) {
            self.inexact = true;
        }
    }

    fn join(self, other: EstimateTotals) -> EstimateTotals {
        let joined = EstimateTotals {
            entries: self.entries + other.entries,
            lenient: self.lenient + other.lenient,
            entry: 0.0,
            inexact: self.inexact || other.inexact,
        };
        EstimateTotals {
            inexact: joined.inexact || !Self::exact(joined.entries) || !Self::exact(joined.lenient),
            ..joined
        }
    }
}

/// Entry flags: some message starts a turn (pi `isTurnStartMessage`).
const TURN_START: u8 = 1;
/// Some message is a cut point (pi `isCutPointMessage`).
const CUT_POINT: u8 = 2;
/// `sessionEntryToContextMessages(sourceEntry).length > 0` and not a context edit: the entry
/// would show messages if no edit omitted it.
const VISIBLE: u8 = 4;
/// A context edit whose `replacement` is exactly `null`.
const REPLACEMENT_NULL: u8 = 8;

/// A `compaction` entry's fields preparation reads.
#[derive(Clone, Debug)]
pub struct CompactionSource {
    /// `summary` as stored (any JSON).
    pub summary: Option<Value>,
    /// `details` as stored (pi reads `readFiles`/`modifiedFiles` from it).
    pub details: Option<Value>,
    /// JavaScript truthiness of `fromHook`.
    pub from_hook: bool,
}

/// A message of the summarized span and the entry it came from.
#[derive(Clone, Debug)]
pub struct SpanMessage {
    /// The entry the message came from.
    pub entry_id: EntryId,
    /// The message as pi's projection builds it.
    pub message: Value,
}

/// Reads the messages of a [`Span`] in order, one at a time (from the file, for a
/// [`Projected`]; from a list, where a span's `entries` index the list).
pub trait SpanSource {
    /// Calls `f` with each message of `span`, in order. Errors: a message that cannot be read
    /// again, or `f`'s.
    fn for_each_message(
        &self,
        span: &Span,
        f: &mut dyn FnMut(&SpanMessage) -> Result<(), CompactionError>,
    ) -> Result<(), CompactionError>;

    /// The tree node of `m`'s entry when the tree holds `id` as that entry's `toolCallId`, so
    /// that a list of results can name the id by its node (4 bytes, see
    /// [`SpanSource::node_tool_call_id`]) instead of a copy; `None` otherwise.
    fn tool_result_node(&self, _m: &SpanMessage, _id: &str) -> Option<NodeIdx> {
        None
    }

    /// The `toolCallId` the tree holds for `node` (a node [`SpanSource::tool_result_node`]
    /// gave); `None` for any other node.
    fn node_tool_call_id(&self, _node: NodeIdx) -> Option<&str> {
        None
    }

    /// How many tool results the entries of `span` hold as the tree reads them: a capacity
    /// hint (0 when unknown; rendering may differ where a context edit applies).
    fn tool_results_hint(&self, _span: &Span) -> usize {
        0
    }
}

impl SpanSource for Vec<SpanMessage> {
    fn for_each_message(
        &self,
        span: &Span,
        f: &mut dyn FnMut(&SpanMessage) -> Result<(), CompactionError>,
    ) -> Result<(), CompactionError> {
        self.get(span.entries.clone())
            .unwrap_or(&[])
            .iter()
            .try_for_each(f)
    }
}

/// A stretch of projected entries and how many messages pi takes from it for compaction
/// (`getMessagesFromProjectedEntryForCompaction`: no compaction, no system message).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// Indices into the projected entries.
    pub entries: Range<usize>,
    /// Number of messages.
    pub messages: usize,
}

/// pi's `CompactionPreparation`, plus the file lists and where the kept range starts. The
/// spans' messages are read again from the file when needed ([`Projected::for_each_message`]).
#[derive(Clone, Debug)]
pub struct Preparation {
    /// Where the kept range starts (pi's `firstKeptEntryId`).
    pub first_kept_entry_id: EntryId,
    /// Index of the first kept entry among the projected entries.
    pub first_kept_index: usize,
    /// `tokensBefore`; `NaN` where pi's estimate is `NaN` (printed as `null`).
    pub tokens_before: f64,
    /// The cut splits a turn: the turn's start is summarized separately (pi's `isSplitTurn`).
    pub is_split_turn: bool,
    /// The newest compaction's `summary`, as stored.
    pub previous_summary: Option<Value>,
    /// The entry holding the previous summary.
    pub previous_compaction_id: Option<EntryId>,
    /// pi's `messagesToSummarize`: the span before the cut (or before the split turn).
    pub messages_to_summarize: Span,
    /// pi's `turnPrefixMessages`: the start of a split turn; empty otherwise.
    pub turn_prefix_messages: Span,
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

/// pi's canonical projection of a path, as [`projected_entries`] builds it: per entry of
/// context entry of `projection`, the facts of its messages; the bodies stay in the file.
pub struct Projected<'a> {
    tree: &'a Tree,
    source: &'a dyn LineSource,
    /// The projection (path and context entries) the entries come from.
    pub projection: &'a PathProjection,
    /// Per entry, [`TURN_START`], [`CUT_POINT`], [`VISIBLE`] and [`REPLACEMENT_NULL`], and its
    /// number of messages (1 byte an entry).
    entries: PackedEntries,
    /// Indices of the `system` messages (which compaction leaves out), in order.
    system_indices: Vec<u32>,
    /// The token estimate of the projection, gathered while building it.
    scan: TokenScan,
    /// The estimates of entry 0 (a compaction that starts the context, if any) and of the
    /// entries after it, summed while building.
    totals: [EstimateTotals; 2],
    /// `compaction` entries' fields, by entry index.
    compactions: Vec<(usize, CompactionSource)>,
    /// The messages pi-ai `getCurrentSystemMessage` looks at: system messages, and any `null`
    /// message (reading its role throws), in order.
    system_messages: Vec<Value>,
}

/// Parses a rendered message or a session line as `JSON.parse` does ([`js::parse_json`]);
/// a failure means the line no longer holds the entry it held when the tree was built.
fn parse_line(
    bytes: &[u8],
    entry: &crate::dialect::pi::format::Entry,
) -> Result<Value, RenderError> {
    js::parse_json(bytes).map_err(|e| render::changed(entry, &e.to_string()))
}

/// Builds pi's canonical projection of `projection` (see the module docs): every context
/// entry is rendered and parsed once, keeping its messages' facts. Errors: a line that cannot
/// be read or no longer holds its entry.
pub fn projected_entries<'a>(
    tree: &'a Tree,
    projection: &'a PathProjection,
    source: &'a dyn LineSource,
) -> Result<Projected<'a>, RenderError> {
    let mut out = Projected {
        tree,
        source,
        projection,
        entries: PackedEntries::with_capacity(projection.len()),
        system_indices: Vec::new(),
        scan: TokenScan::default(),
        totals: [EstimateTotals::default(); 2],
        compactions: Vec::new(),
        system_messages: Vec::new(),
    };
    for index in 0..projection.len() {
        let Some(item) = projection.item(tree, index) else {
            break;
        };
        let entry = &tree.node(item.node).entry;
        let first_message = out.entries.message_total();
        let mut count: u32 = 0;
        let mut flags = 0;
        let totals = &mut out.totals[index.min(1)];
        for raw in render::render_item(tree, &item, source)? {
            let message = parse_line(raw.get().as_bytes(), entry)?;
            let role = Role::of(&message);
            let tokens = estimate_tokens(&message);
            out.scan.add(&message, &tokens, role, index);
            totals.add_message(&tokens);
            if role.is_turn_start() {
                flags |= TURN_START;
            }
            if role.is_cut_point() {
                flags |= CUT_POINT;
            }
            if role == Role::System {
                out.system_indices.push(first_message.saturating_add(count));
            }
            if role == Role::System || message.is_null() {
                out.system_messages.push(message);
            }
            count = count.saturating_add(1);
        }
        out.totals[index.min(1)].end_entry();
        let read_line = || -> Result<Value, RenderError> {
            let bytes = render::read_line(tree, item.node, source)?;
            parse_line(&bytes, entry)
        };
        let mut replacement_is_null = false;
        let is_edit = matches!(entry.kind, EntryKind::ContextEdit { .. });
        match &entry.kind {
            EntryKind::Compaction { .. } => {
                let mut line = read_line()?;
                out.compactions.push((
                    index,
                    CompactionSource {
                        summary: line.get_mut("summary").map(Value::take),
                        details: line.get_mut("details").map(Value::take),
                        from_hook: js::truthy(line.get("fromHook")),
                    },
                ));
            }
            EntryKind::ContextEdit { .. } => {
                let line = read_line()?;
                replacement_is_null = matches!(line.get("replacement"), Some(Value::Null));
            }
            _ => {}
        }
        let intrinsically_visible = !is_edit
            && match item.contribution {
                Contribution::Nothing(Silence::NeverInContext | Silence::EmptyBranchSummary) => {
                    false
                }
                Contribution::Nothing(Silence::OmittedByEdit | Silence::SupersededCompaction) => {
                    true
                }
                _ => true,
            };
        if intrinsically_visible {
            flags |= VISIBLE;
        }
        if replacement_is_null {
            flags |= REPLACEMENT_NULL;
        }
        out.entries.push(flags, count as usize);
    }
    Ok(out)
}

impl Projected<'_> {
    /// Number of projected entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the projection has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The tree node of entry `i`.
    pub fn node(&self, i: usize) -> NodeIdx {
        self.projection.entries()[i]
    }

    /// The id of entry `i`.
    pub fn id(&self, i: usize) -> &EntryId {
        &self.tree.node(self.node(i)).entry.id
    }

    fn kind(&self, i: usize) -> &EntryKind {
        &self.tree.node(self.node(i)).entry.kind
    }

    /// Entry `i` is a `compaction`.
    pub fn is_compaction(&self, i: usize) -> bool {
        matches!(self.kind(i), EntryKind::Compaction { .. })
    }

    /// Number of messages entry `i` contributes.
    pub fn message_count(&self, i: usize) -> usize {
        self.entries.count(i)
    }

    /// Number of entry `i`'s messages that are not `system` messages.
    fn non_system_count(&self, i: usize) -> usize {
        if self.system_indices.is_empty() {
            return self.message_count(i);
        }
        let r = self.entries.range(i);
        let from = self.system_indices.partition_point(|&k| k < r.start);
        let to = self.system_indices.partition_point(|&k| k < r.end);
        r.len() - (to - from)
    }

    fn has_flag(&self, i: usize, flag: u8) -> bool {
        self.entries.has(i, flag)
    }

    /// pi's `estimateTokens` of each message of entry `i`, in order, read again from the
    /// file. Errors: a line that cannot be read or no longer holds its entry.
    pub fn message_tokens(&self, i: usize) -> Result<Vec<Result<f64, TypeError>>, RenderError> {
        if self.message_count(i) == 0 {
            return Ok(Vec::new());
        }
        let Some(item) = self.projection.item(self.tree, i) else {
            return Ok(Vec::new());
        };
        let entry = &self.tree.node(item.node).entry;
        let mut out = Vec::new();
        for raw in render::render_item(self.tree, &item, self.source)? {
            out.push(estimate_tokens(&parse_line(raw.get().as_bytes(), entry)?));
        }
        Ok(out)
    }

    /// The estimates of entries `start..` (to the end), gathered while the projection was
    /// built: `start` 0 or 1 (the context's start), every estimate a whole number, no
    /// `TypeError`. `None` otherwise (read them again).
    fn totals_from(&self, start: usize) -> Option<EstimateTotals> {
        let [first, rest] = self.totals;
        let totals = match start {
            0 => first.join(rest),
            1 => rest,
            _ => return None,
        };
        (!totals.inexact).then_some(totals)
    }

    /// The sum of pi's estimates of the messages of entries `start..` (to the end), a
    /// `TypeError` counted 0, without reading them again when the projection's build summed
    /// them (see `totals_from`). Errors: as [`Projected::message_tokens`].
    pub fn tokens_from(&self, start: usize) -> Result<f64, RenderError> {
        if let Some(totals) = self.totals_from(start) {
            // `Iterator::sum` of f64 starts at -0.0: with no message the sum below is -0.0.
            let messages = (start..self.len()).any(|i| self.message_count(i) > 0);
            return Ok(if messages { totals.lenient } else { -0.0 });
        }
        // Per entry, its messages' estimates (a failed one counts 0), read again.
        let per_entry = (start..self.len())
            .map(|i| {
                self.message_tokens(i)
                    .map(|tokens| tokens.into_iter().map(|t| t.unwrap_or(0.0)).sum::<f64>())
            })
            .collect::<Result<Vec<f64>, _>>()?;
        Ok(per_entry.into_iter().sum())
    }

    /// pi's token estimate of entry `i`'s messages, summed in order; the first `TypeError`.
    /// The messages are read again from the file. Errors: as [`Projected::message_tokens`].
    pub fn entry_tokens(&self, i: usize) -> Result<Result<f64, TypeError>, RenderError> {
        let mut tokens = 0.0;
        for t in self.message_tokens(i)? {
            match t {
                Ok(t) => tokens += t,
                Err(e) => return Ok(Err(e)),
            }
        }
        Ok(Ok(tokens))
    }

    /// The fields of compaction entry `i`, if it is one.
    pub fn compaction(&self, i: usize) -> Option<&CompactionSource> {
        self.compactions
            .iter()
            .find(|(at, _)| *at == i)
            .map(|(_, c)| c)
    }

    /// The newest compaction that contributes its summary (the start of the context), as pi's
    /// `prepareCompaction` finds it.
    pub fn context_start(&self) -> Option<usize> {
        self.compactions
            .iter()
            .map(|(at, _)| *at)
            .find(|&at| self.message_count(at) > 0)
    }

    /// pi-ai `getCurrentSystemMessage` of every message of the projection.
    pub fn current_system_message(&self) -> Result<Option<Value>, TypeError> {
        let refs: Vec<&Value> = self.system_messages.iter().collect();
        current_system_message(&refs)
    }

    /// Every message of entries `range` (system messages too when `with_system`; never a
    /// compaction's unless `with_system`), read again from the file.
    fn for_each_in(
        &self,
        range: Range<usize>,
        with_system: bool,
        f: &mut dyn FnMut(&SpanMessage) -> Result<(), CompactionError>,
    ) -> Result<(), CompactionError> {
        for i in range {
            if self.message_count(i) == 0 || (!with_system && self.is_compaction(i)) {
                continue;
            }
            if !with_system && self.non_system_count(i) == 0 {
                continue;
            }
            let Some(item) = self.projection.item(self.tree, i) else {
                continue;
            };
            let entry = &self.tree.node(item.node).entry;
            for raw in render::render_item(self.tree, &item, self.source)? {
                let message = parse_line(raw.get().as_bytes(), entry)?;
                if !with_system && Role::of(&message) == Role::System {
                    continue;
                }
                f(&SpanMessage {
                    entry_id: entry.id.clone(),
                    message,
                })?;
            }
        }
        Ok(())
    }

    /// Every message of the entries from `start` to the end, system messages included, in
    /// order (the kept range).
    pub fn messages_from(&self, start: usize) -> Result<Vec<SpanMessage>, CompactionError> {
        let mut out = Vec::new();
        self.for_each_in(start..self.len(), true, &mut |m| {
            out.push(m.clone());
            Ok(())
        })?;
        Ok(out)
    }

    /// Messages of entries `range` that compaction takes (no compaction, no system message).
    fn span(&self, range: Range<usize>) -> Span {
        let messages = range
            .clone()
            .filter(|&i| !self.is_compaction(i))
            .map(|i| self.non_system_count(i))
            .sum();
        Span {
            entries: range,
            messages,
        }
    }

    /// pi `isProjectedTurnStart`.
    fn is_turn_start(&self, i: usize) -> bool {
        !self.is_compaction(i) && self.has_flag(i, TURN_START)
    }

    fn is_cut_point(&self, i: usize) -> bool {
        !self.is_compaction(i) && self.has_flag(i, CUT_POINT)
    }

    fn is_omitted(&self, i: usize) -> bool {
        self.has_flag(i, VISIBLE) && self.message_count(i) == 0
    }
}

/// Reads a span's messages again from the file (pi's
/// `getMessagesFromProjectedEntryForCompaction`: compactions and system messages left out).
/// Errors: a line that cannot be read or no longer holds its entry, or `f`'s.
impl SpanSource for Projected<'_> {
    fn for_each_message(
        &self,
        span: &Span,
        f: &mut dyn FnMut(&SpanMessage) -> Result<(), CompactionError>,
    ) -> Result<(), CompactionError> {
        self.for_each_in(span.entries.clone(), false, f)
    }

    fn tool_result_node(&self, m: &SpanMessage, id: &str) -> Option<NodeIdx> {
        self.tree
            .find(m.entry_id.as_str())
            .filter(|&n| self.node_tool_call_id(n) == Some(id))
    }

    fn node_tool_call_id(&self, node: NodeIdx) -> Option<&str> {
        match &self.tree.nodes().get(node as usize)?.entry.kind {
            EntryKind::Message(info) => info.tool_call_id().map(ToolCallId::as_str),
            _ => None,
        }
    }

    fn tool_results_hint(&self, span: &Span) -> usize {
        span.entries
            .clone()
            .filter(|&i| {
                matches!(self.kind(i), EntryKind::Message(info) if info.tool_call_id().is_some())
            })
            .count()
    }
}

fn pi_error(id: &EntryId, e: TypeError) -> CompactionError {
    CompactionError::PiWouldThrow {
        entry_id: Some(id.clone()),
        detail: e.0,
    }
}

/// Entries whose estimates the cut point reads in its first block, walking back.
const CUT_WALK_BLOCK_MIN: usize = 64;
/// Most entries the cut point reads in one block (their estimates are held meanwhile).
const CUT_WALK_BLOCK_MAX: usize = 16_384;

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
    p: &Projected<'_>,
    start: usize,
    end: usize,
    keep_recent_tokens: f64,
) -> Result<CutPoint, CompactionError> {
    let Some(first_cut) = (start..end).find(|&i| p.is_cut_point(i)) else {
        return Ok(CutPoint {
            first_kept_entry_index: start,
            turn_start_index: None,
            is_split_turn: false,
        });
    };
    let mut accumulated = 0.0;
    let mut exceeded = false;
    let mut cut = first_cut;
    // pi walks back from the newest entry. The estimates are read again from the file in
    // blocks, each read forward (the line source reads ahead), the newest block first and
    // each twice the last (at most CUT_WALK_BLOCK_MAX entries); a TypeError only counts where
    // the walk reaches it.
    let mut hi = end;
    // When the build summed the estimates of every entry walked and the sum stays below
    // `keepRecentTokens`, the walk (each estimate a whole number >= 0) reaches its start
    // without exceeding it: nothing is read again.
    if end == p.len()
        && p.totals_from(start)
            .is_some_and(|t| t.entries < keep_recent_tokens)
    {
        hi = start;
    }
    let mut block = CUT_WALK_BLOCK_MIN;
    'walk: while hi > start {
        let lo = hi.saturating_sub(block).max(start);
        let mut estimates = Vec::with_capacity(hi - lo);
        for i in lo..hi {
            estimates.push(p.entry_tokens(i)?);
        }
        for (i, tokens) in (lo..hi).zip(estimates).rev() {
            let tokens = tokens.map_err(|e| pi_error(p.id(i), e))?;
            if tokens == 0.0 {
                continue;
            }
            accumulated += tokens;
            if accumulated >= keep_recent_tokens {
                exceeded = true;
                // The first cut point at or after i, else the last one.
                cut = (i..end)
                    .find(|&c| p.is_cut_point(c))
                    .or_else(|| (start..end).rev().find(|&c| p.is_cut_point(c)))
                    .unwrap_or(first_cut);
                break 'walk;
            }
        }
        hi = lo;
        block = (block * 2).min(CUT_WALK_BLOCK_MAX);
    }
    // A recovery attempt and its omission edits are invisible after the last visible input;
    // pi advances the cut past such a closed suffix only.
    let suffix = (cut + 1).min(end)..end;
    let omitted_ids: Vec<&EntryId> = suffix
        .clone()
        .filter(|&i| p.is_omitted(i))
        .map(|i| p.id(i))
        .collect();
    let has_external_replacement = suffix.clone().any(|i| match p.kind(i) {
        EntryKind::ContextEdit { target_id, .. } => {
            !p.has_flag(i, REPLACEMENT_NULL)
                && !target_id.as_ref().is_some_and(|t| omitted_ids.contains(&t))
        }
        _ => false,
    });
    let recovery_suffix = exceeded
        && !has_external_replacement
        && suffix.clone().any(|i| {
            matches!(p.kind(i), EntryKind::Message(m) if m.role.as_str() == "assistant")
                && p.is_omitted(i)
        })
        && suffix
            .clone()
            .all(|i| !p.is_compaction(i) && (!p.has_flag(i, VISIBLE) || p.is_omitted(i)));
    if recovery_suffix {
        cut += 1;
    }
    while cut > start {
        let previous = cut - 1;
        if p.is_compaction(previous) || p.message_count(previous) > 0 {
            break;
        }
        cut -= 1;
    }
    Ok(cut_at(p, start, cut))
}

/// The cut point whose first kept entry is `cut` (the turn it splits, if any), as
/// [`find_projected_cut_point`] ends: also how an existing compaction's cut is read back from
/// its `firstKeptEntryId`.
pub fn cut_at(p: &Projected<'_>, start: usize, cut: usize) -> CutPoint {
    // `entries[cut]` may be past the end after the recovery step; pi then reads undefined
    // (and its caller finds no kept entry).
    let starts_turn = cut < p.len() && p.is_turn_start(cut);
    let turn_start = if starts_turn {
        None
    } else {
        (start..=cut.min(p.len().saturating_sub(1)))
            .rev()
            .find(|&i| i < p.len() && p.is_turn_start(i))
    };
    CutPoint {
        first_kept_entry_index: cut,
        turn_start_index: turn_start,
        is_split_turn: !starts_turn && turn_start.is_some(),
    }
}

/// pi 1.6.0 `estimateProjectedContextTokens(projection, pathEntries).tokens` at the end of
/// `projection`, as `list` counts it: `None` where pi would throw, where the number is not
/// finite, or where a line could not be read again.
///
/// Read from the path's end first ([`estimate_from_tail`]): when the newest usage event lies
/// after the latest compaction or context edit (any session an assistant answered since), pi's
/// number is that usage plus the estimate of the messages after it, and only those entries are
/// read. Otherwise every context entry is read ([`projected_entries`]). A line before the
/// event is then not read at all, so a file changed there since it was opened is not noticed.
pub fn context_tokens(
    tree: &Tree,
    projection: &PathProjection,
    source: &dyn LineSource,
) -> Option<u64> {
    let tokens = match estimate_from_tail(tree, projection, source) {
        Some(decided) => decided.ok()?,
        None => {
            let projected = projected_entries(tree, projection, source).ok()?;
            estimate_projected_context_tokens(&projected).ok()?
        }
    };
    (tokens.is_finite() && tokens >= 0.0).then_some(tokens as u64)
}

/// [`estimate_projected_context_tokens`] read from the end of the context: the context entries
/// are rendered newest first until one holds a usage event (an assistant message whose
/// `getAssistantUsage` is valid or throws); when that entry stands after the latest compaction
/// or context edit on the path, pi's estimate is decided by it and the messages after it
/// (the same [`TokenScan`] over the same messages, in order). `None` when the end does not
/// decide: no event after the latest compaction or context edit (pi then sums every message).
/// Errors: as [`estimate_projected_context_tokens`]'s, for the entries read.
pub fn estimate_from_tail(
    tree: &Tree,
    projection: &PathProjection,
    source: &dyn LineSource,
) -> Option<Result<f64, CompactionError>> {
    let path = &projection.path;
    let latest_invalidating = path.iter().rposition(|&n| {
        matches!(
            tree.node(n).entry.kind,
            EntryKind::Compaction { .. } | EntryKind::ContextEdit { .. }
        )
    });
    // Entries newest first, each with its messages' facts (no message is held); `cursor` walks
    // the path back beside them (the context entries after the latest compaction or edit are
    // the path's, in its order).
    let mut read: Vec<(usize, Vec<MessageFacts>)> = Vec::new();
    let mut cursor = path.len();
    for index in (0..projection.len()).rev() {
        let node = projection.node(index)?;
        cursor = path[..cursor].iter().rposition(|&n| n == node)?;
        if latest_invalidating.is_some_and(|l| cursor <= l) {
            return None;
        }
        let item = projection.item(tree, index)?;
        let entry = &tree.node(node).entry;
        let rendered = render::render_item(tree, &item, source).and_then(|raws| {
            raws.iter()
                .map(|r| parse_line(r.get().as_bytes(), entry))
                .collect::<Result<Vec<Value>, _>>()
        });
        let messages: Vec<MessageFacts> = match rendered {
            Ok(messages) => messages
                .iter()
                .map(|m| MessageFacts::of(m, estimate_tokens(m), Role::of(m)))
                .collect(),
            Err(e) => return Some(Err(e.into())),
        };
        let event = messages.iter().any(|m| !matches!(m.usage, Ok(None)));
        read.push((index, messages));
        if event {
            let mut scan = TokenScan::default();
            for (index, messages) in read.iter().rev() {
                for m in messages {
                    scan.add_facts(m, *index);
                }
            }
            let located = |e: TypeError| CompactionError::PiWouldThrow {
                entry_id: None,
                detail: e.0,
            };
            let (_, usage) = scan.event?;
            return Some(match (usage, scan.trailing_error) {
                (Err(e), _) | (Ok(_), Some(e)) => Err(located(e)),
                (Ok(usage), None) => Ok(usage + scan.trailing),
            });
        }
    }
    None
}

/// pi `estimateProjectedContextTokens(projection, branchEntries).tokens`.
pub fn estimate_projected_context_tokens(p: &Projected<'_>) -> Result<f64, CompactionError> {
    let located = |e: TypeError| CompactionError::PiWouldThrow {
        entry_id: None,
        detail: e.0,
    };
    let scan = &p.scan;
    // pi `estimateContextTokens`: the last valid usage plus the estimate after it.
    if let Some((entry, usage)) = &scan.event {
        let usage = usage.clone().map_err(located)?;
        if let Some(e) = &scan.trailing_error {
            return Err(located(e.clone()));
        }
        let tokens = usage + scan.trailing;
        let path = &p.projection.path;
        let usage_node = p.node(*entry);
        let usage_entry_index = path.iter().position(|&n| n == usage_node);
        let latest_invalidating = path.iter().rposition(|&n| {
            matches!(
                p.tree.node(n).entry.kind,
                EntryKind::Compaction { .. } | EntryKind::ContextEdit { .. }
            )
        });
        let after = match (usage_entry_index, latest_invalidating) {
            (Some(u), Some(l)) => u > l,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if after {
            return Ok(tokens);
        }
    } else if let Some(e) = &scan.first_error {
        // Without a usage pi estimates every message first (and throws on the first failure).
        return Err(located(e.clone()));
    }
    let system = match p.current_system_message().map_err(located)? {
        Some(system) => estimate_tokens(&system).map_err(located)?,
        None => 0.0,
    };
    if let Some((entry, e)) = &scan.non_system_error {
        return Err(pi_error(p.id(*entry), e.clone()));
    }
    Ok(system + scan.non_system)
}

/// pi `prepareCompaction(pathEntries, {keepRecentTokens})`. `Ok(Err(reason))` is pi's
/// `undefined` (nothing to compact); `Err` is an input on which pi itself would throw. Reads
/// the summarized span's messages once more for the file lists.
pub fn prepare(
    p: &Projected<'_>,
    keep_recent_tokens: f64,
) -> Result<Result<Preparation, NothingToCompact>, CompactionError> {
    match p.projection.path.last() {
        None => return Ok(Err(NothingToCompact::EmptyPath)),
        Some(&last) if matches!(p.tree.node(last).entry.kind, EntryKind::Compaction { .. }) => {
            return Ok(Err(NothingToCompact::LeafIsCompaction));
        }
        Some(_) => {}
    }
    let (previous, boundary_start) = boundary(p);
    let tokens_before = estimate_projected_context_tokens(p)?;
    let cut = find_projected_cut_point(p, boundary_start, p.len(), keep_recent_tokens)?;
    let first_kept = cut.first_kept_entry_index;
    if first_kept >= p.len() || p.id(first_kept).as_str().is_empty() {
        return Ok(Err(NothingToCompact::NothingBeforeCut));
    }
    let first_kept_entry_id = p.id(first_kept).clone();
    preparation(
        p,
        (previous, boundary_start),
        cut,
        first_kept_entry_id,
        tokens_before,
        keep_recent_tokens,
    )
}

/// The newest compaction that starts the context (pi's previous compaction), and the first
/// entry after it: where the span to summarize starts.
fn boundary(p: &Projected<'_>) -> (Option<usize>, usize) {
    let previous = p.context_start();
    (previous, previous.map_or(0, |i| i + 1))
}

/// The preparation of a compaction already written, read back: the span it summarized, as
/// [`prepare`] chose it when the entry was written under the last entry of `p`'s path, from
/// the entry's `firstKeptEntryId` (its index in `p`, `p.len()` when the compaction keeps
/// nothing) and its `tokensBefore`. The spans, file lists and previous summary are then
/// what [`prepare`] gave at the time (the cut point is the one it wrote). `Ok(Err(_))`:
/// nothing before the cut.
pub fn prepare_written(
    p: &Projected<'_>,
    first_kept: usize,
    first_kept_entry_id: EntryId,
    tokens_before: f64,
) -> Result<Result<Preparation, NothingToCompact>, CompactionError> {
    let (previous, boundary_start) = boundary(p);
    let cut = if first_kept >= p.len() {
        // Keeps nothing: the whole span is summarized, no turn is split.
        CutPoint {
            first_kept_entry_index: p.len(),
            turn_start_index: None,
            is_split_turn: false,
        }
    } else {
        cut_at(p, boundary_start, first_kept.max(boundary_start))
    };
    preparation(
        p,
        (previous, boundary_start),
        cut,
        first_kept_entry_id,
        tokens_before,
        f64::NAN,
    )
}

/// The spans and file lists of a cut: what [`prepare`] gives once the cut is known.
fn preparation(
    p: &Projected<'_>,
    (previous, boundary_start): (Option<usize>, usize),
    cut: CutPoint,
    first_kept_entry_id: EntryId,
    tokens_before: f64,
    keep_recent_tokens: f64,
) -> Result<Result<Preparation, NothingToCompact>, CompactionError> {
    let previous_summary = previous.and_then(|i| p.compaction(i).and_then(|c| c.summary.clone()));
    let first_kept = cut.first_kept_entry_index;
    let history_end = match (cut.is_split_turn, cut.turn_start_index) {
        (true, Some(t)) => t,
        _ => first_kept,
    };
    let messages_to_summarize = if boundary_start <= history_end {
        p.span(boundary_start..history_end)
    } else {
        Span::default()
    };
    let turn_prefix_messages = match (cut.is_split_turn, cut.turn_start_index) {
        (true, Some(t)) => p.span(t..first_kept),
        _ => Span::default(),
    };
    if messages_to_summarize.messages == 0 && turn_prefix_messages.messages == 0 {
        return Ok(Err(NothingToCompact::NothingBeforeCut));
    }
    let mut file_ops = FileOps::default();
    // pi reads the previous compaction's details only when a hook did not write them.
    if let Some(i) = previous
        && let Some(CompactionSource {
            details: Some(details),
            from_hook: false,
            ..
        }) = p.compaction(i)
        && js::truthy(Some(details))
    {
        file_ops.add_details(details);
    }
    for span in [&messages_to_summarize, &turn_prefix_messages] {
        p.for_each_message(span, &mut |m| {
            file_ops.add_message(&m.message);
            Ok(())
        })?;
    }
    let file_lists = file_ops.lists();
    Ok(Ok(Preparation {
        first_kept_entry_id,
        first_kept_index: first_kept,
        tokens_before,
        is_split_turn: cut.is_split_turn,
        previous_summary,
        previous_compaction_id: previous.map(|i| p.id(i).clone()),
        messages_to_summarize,
        turn_prefix_messages,
        file_ops,
        file_lists,
        keep_recent_tokens,
    }))
}
