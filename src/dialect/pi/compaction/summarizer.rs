//! The embedded extractive summarizer: compaction without a model. Deterministic (the same
//! preparation always gives the same bytes), in pi's checkpoint layout, built only from what
//! the summarized span says.
//!
//! Layout (pi's `SUMMARIZATION_PROMPT` sections, so a model or a later merge reads it as its
//! own): `## Goal` (the first request and the latest one, `/commands` skipped),
//! `## Constraints & Preferences` (user lines that state one: they start with never, always,
//! don't, must, make sure, avoid, prefer…; at most 8), `## Progress` with `### Done` grouped by
//! file (`Read N files: …`; one line per edited or written path with its number of edits and
//! what the last edit's own text says; `Ran N commands (last: …)`), `### In Progress` (tool
//! calls without a result, by `toolCallId`; unchecked task items), `### Blocked` (each failed
//! call with the first line of its error; failed bash), `## Key Decisions` (assistant lines
//! that state one: `Decision:`, "I decided", "I'll use", "going with"…; at most 8),
//! `## Next Steps` (the last user request, then the open tasks) and `## Critical Context`
//! (whether the last request is still unanswered, the last assistant line, and sections of a
//! previous summary that have no place in this layout). A previous summary is merged in: its
//! items come first in each section, new items follow, duplicates are dropped, and
//! `## Next Steps` is replaced when the span has its own. For a split turn the history part
//! is followed by pi's separator and a turn-context part in pi's turn-prefix layout
//! (`## Original Request`, `## Progress So Far`, `## Context Needed to Continue`). The
//! `<read-files>` / `<modified-files>` blocks follow exactly as pi appends them.
//!
//! Size bound: every free-text item is cut at [`ITEM_MAX_CHARS`] characters and the summary
//! before the file blocks is at most [`SUMMARY_MAX_CHARS`] characters (about 3,000 tokens by
//! pi's estimate). When over budget, items are dropped oldest first from the longest section,
//! items carrying a retention probe of this span last; each section then says how many items
//! it omitted. The file blocks are not bounded (pi does not bound them either).

use serde_json::Value;

use crate::dialect::pi::compaction::CompactionError;
use crate::dialect::pi::compaction::prepare::{Preparation, Span, SpanMessage, SpanSource};
use crate::dialect::pi::compaction::prompts::{
    NO_PRIOR_HISTORY, SPLIT_TURN_SEPARATOR, assemble_summary,
};
use crate::dialect::pi::compaction::retention::{
    self, content_text, cut_chars, first_line, is_error_result, result_call_id, tool_calls,
};
use crate::dialect::pi::format::EntryId;
use crate::js::value as js;

/// Longest free-text item, in characters.
pub const ITEM_MAX_CHARS: usize = 240;
/// Longest summary before the file-operation blocks, in characters.
pub const SUMMARY_MAX_CHARS: usize = 12_000;

/// How a user line states a constraint or preference: it starts with one of these (matched
/// case-insensitively, after a list marker), so complaints and questions that merely contain
/// "never" or "always" stay out.
const CONSTRAINT_STARTS: &[&str] = &[
    "never ",
    "always ",
    "don't ",
    "do not ",
    "must ",
    "make sure ",
    "avoid ",
    "prefer ",
    "only use ",
    "please don't ",
    "please do not ",
    "please never ",
    "please always ",
    "constraint:",
    "requirement:",
    "preference:",
];
/// How an assistant line states a decision: it starts with one of these.
const DECISION_STARTS: &[&str] = &[
    "decision:",
    "i decided ",
    "we decided ",
    "i'll use ",
    "i will use ",
    "we'll use ",
    "i chose ",
    "going with ",
    "i'm going with ",
];
/// Most items of the constraints and decisions sections.
const STATED_MAX: usize = 8;
/// Most file names listed inline in "Read N files".
const READ_LIST_MAX: usize = 12;

#[derive(Clone, Debug, Default)]
struct Item {
    text: String,
    /// Carries a retention probe of this span: dropped last.
    pinned: bool,
}

#[derive(Clone, Debug)]
struct Section {
    heading: &'static str,
    items: Vec<Item>,
    /// What to print when the section is empty (`None`: print nothing under it).
    empty: Option<&'static str>,
    omitted: usize,
}

impl Section {
    fn new(heading: &'static str, empty: Option<&'static str>) -> Self {
        Section {
            heading,
            items: Vec::new(),
            empty,
            omitted: 0,
        }
    }
    fn push(&mut self, text: String, pinned: bool) {
        if text.trim().is_empty() || self.items.iter().any(|i| i.text == text) {
            return;
        }
        self.items.push(Item { text, pinned });
    }
}

/// Section indices of the main layout.
const GOAL: usize = 0;
const CONSTRAINTS: usize = 1;
const DONE: usize = 2;
const IN_PROGRESS: usize = 3;
const BLOCKED: usize = 4;
const DECISIONS: usize = 5;
const NEXT: usize = 6;
const CRITICAL: usize = 7;

fn main_layout() -> Vec<Section> {
    vec![
        Section::new("## Goal", Some("- (no request in the summarized span)")),
        Section::new("## Constraints & Preferences", Some("- (none)")),
        Section::new("### Done", Some("- (none)")),
        Section::new("### In Progress", Some("- (none)")),
        Section::new("### Blocked", Some("- (none)")),
        Section::new("## Key Decisions", Some("- (none)")),
        Section::new("## Next Steps", Some("1. (none)")),
        Section::new("## Critical Context", Some("- (none)")),
    ]
}

fn turn_layout() -> Vec<Section> {
    vec![
        Section::new(
            "## Original Request",
            Some("(no request in the turn prefix)"),
        ),
        Section::new("## Progress So Far", Some("- (none)")),
        Section::new("## Context Needed to Continue", Some("- (none)")),
    ]
}

fn bullet(text: &str) -> String {
    format!("- {}", cut_chars(text, ITEM_MAX_CHARS))
}

/// A short description of a tool call: `name path` or `name command`, else its arguments.
fn describe_call(name: &str, args: &Value) -> String {
    for key in ["path", "command", "pattern", "query", "url"] {
        if let Some(s) = args.get(key).and_then(Value::as_str) {
            let s = cut_chars(s.lines().next().unwrap_or(""), 120);
            return format!("`{name}` {s}");
        }
    }
    let args = js::stringify(args);
    format!("`{name}` {}", cut_chars(&args, 120))
}

/// The lines of `text` that start (after a list marker) with one of `starts`.
fn lines_starting(text: &str, starts: &[&str]) -> Vec<String> {
    text.lines()
        .map(|l| {
            l.trim()
                .trim_start_matches(['-', '*', '>', ' '])
                .trim_start()
        })
        .filter(|l| !l.is_empty())
        .filter(|l| {
            let lower = l.to_lowercase();
            starts.iter().any(|m| lower.starts_with(m))
        })
        .map(|l| cut_chars(l, ITEM_MAX_CHARS))
        .collect()
}

/// What an edit or write changed, from its own text: the first non-empty line of the new
/// text (`edits[].newText`, `newText`, `content`), quoted.
fn change_of(name: &str, args: &Value) -> Option<String> {
    if name == "write" {
        let lines = args.get("content").and_then(Value::as_str)?.lines().count();
        return Some(format!(
            "wrote {lines} line{}",
            if lines == 1 { "" } else { "s" }
        ));
    }
    let first_new = args
        .get("edits")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
        .and_then(|e| e.get("newText"))
        .or_else(|| args.get("newText"))
        .or_else(|| args.get("new_string"))
        .and_then(Value::as_str)?;
    let line = first_new.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(format!("now `{}`", cut_chars(line, 100)))
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// The first line of a user message that states a request (not a `/command`).
fn request_line(m: &SpanMessage) -> Option<String> {
    if role(&m.message) != "user" {
        return None;
    }
    first_line(&content_text(&m.message)).filter(|l| !l.starts_with('/'))
}

/// One file's edits in the span, in order of first touch.
#[derive(Default)]
struct FileEdits {
    path: String,
    count: usize,
    last_change: Option<String>,
}

/// What one stretch of messages says, sorted into the main layout: the goal (first and
/// latest request), stated constraints and decisions, progress grouped by file (reads
/// counted, edits per path with what the edit's own text says, failures with their first
/// error line), open items (calls without a result, unchecked tasks, the last request).
/// `first_goal`: whether the span's first request opens the goal (not when a previous summary
/// already states it); `answered_later`: assistant text follows the span (kept messages or a
/// turn prefix), so its last request is not unanswered.
///
/// The span is read in passes (its messages are not held): the results and the span's last
/// facts, then (only when a result failed) which failed results have their call in the span,
/// then the items in order. Errors: a message that cannot be read again.
fn extract(
    source: &dyn SpanSource,
    span: &Span,
    kept_results: &[String],
    sections: &mut [Section],
    first_goal: bool,
    answered_later: bool,
) -> Result<(), CompactionError> {
    use std::collections::HashMap;
    use std::collections::HashSet;
    // Pass 1: results, requests, open tasks and how the span ends. What the results say, by
    // `toolCallId` (the first result of an id wins, as in a lookup of the span's results):
    // their ids, and the first error line of each failed one by position.
    let mut results = retention::ResultIds::with_capacity(source.tool_results_hint(span));
    let mut errors: HashMap<usize, String> = HashMap::new();
    let mut failed_ids: HashSet<String> = HashSet::new();
    let (mut first_request, mut latest_request, mut requests) = (None, None, 0usize);
    let mut open = retention::OpenTasks::default();
    let mut last_request: Option<(String, EntryId)> = None;
    // Some user message, and whether assistant text followed the last one.
    let (mut saw_user, mut answered) = (false, false);
    let mut last_assistant: Option<Option<String>> = None;
    source.for_each_message(span, &mut |m| {
        let msg = &m.message;
        if let Some(id) = result_call_id(msg) {
            let at = results.push(source, m, id);
            if is_error_result(msg) {
                let error = first_line(&content_text(msg)).unwrap_or_else(|| id.to_owned());
                errors.insert(at, error);
                failed_ids.insert(id.to_owned());
            }
        }
        if let Some(line) = request_line(m) {
            requests += 1;
            if first_request.is_none() {
                first_request = Some(line.clone());
            }
            latest_request = Some(line);
        }
        open.add(m);
        if let Some(request) = retention::user_request(m) {
            last_request = Some(request);
        }
        match role(msg) {
            "user" => (saw_user, answered) = (true, false),
            "assistant" => {
                let text = content_text(msg);
                if !text.trim().is_empty() {
                    answered = true;
                }
                last_assistant = Some(first_line(&text));
            }
            _ => {}
        }
        Ok(())
    })?;
    results.finish(source);
    // Pass 2: the failed results whose call is in the span.
    let mut called_failures: HashSet<String> = HashSet::new();
    if !failed_ids.is_empty() {
        source.for_each_message(span, &mut |m| {
            for call in tool_calls(m) {
                if failed_ids.contains(&call.id) {
                    called_failures.insert(call.id);
                }
            }
            Ok(())
        })?;
    }
    // The goal: the first request, then the latest one.
    if first_goal && let Some(first) = &first_request {
        sections[GOAL].push(bullet(&format!("First request: {first}")), true);
    }
    if let Some(last) = latest_request
        .as_ref()
        .filter(|_| !first_goal || requests > 1)
    {
        sections[GOAL].push(bullet(&format!("Latest request: {last}")), true);
    }
    let mut reads: Vec<String> = Vec::new();
    let mut edits: Vec<FileEdits> = Vec::new();
    let mut commands = 0usize;
    let mut last_command = String::new();
    let stated = |section: &mut Section, line: String| {
        if section.items.len() < STATED_MAX {
            section.push(format!("- {line}"), false);
        }
    };
    // Pass 3: the items, in the span's order.
    source.for_each_message(span, &mut |m| {
        let msg = &m.message;
        match role(msg) {
            "user" => {
                for l in lines_starting(&content_text(msg), CONSTRAINT_STARTS) {
                    stated(&mut sections[CONSTRAINTS], l);
                }
            }
            "assistant" => {
                for l in lines_starting(&content_text(msg), DECISION_STARTS) {
                    stated(&mut sections[DECISIONS], l);
                }
                for call in tool_calls(m) {
                    let what = describe_call(&call.name, &call.arguments);
                    let path = call.arguments.get("path").and_then(Value::as_str);
                    let result = results.first(source, &call.id).map(|at| errors.get(&at));
                    match result {
                        Some(Some(error)) => {
                            sections[BLOCKED].push(format!("- {what} failed: {error}"), true);
                        }
                        Some(None) => match (call.name.as_str(), path) {
                            ("read", Some(p)) => {
                                if !reads.iter().any(|r| r == p) {
                                    reads.push(p.to_owned());
                                }
                            }
                            ("edit" | "write", Some(p)) => {
                                let at = match edits.iter().position(|e| e.path == p) {
                                    Some(at) => at,
                                    None => {
                                        edits.push(FileEdits {
                                            path: p.to_owned(),
                                            ..FileEdits::default()
                                        });
                                        edits.len() - 1
                                    }
                                };
                                edits[at].count += 1;
                                if let Some(c) = change_of(&call.name, &call.arguments) {
                                    edits[at].last_change = Some(c);
                                }
                            }
                            ("bash", _) => {
                                commands += 1;
                                last_command = what;
                            }
                            _ => sections[DONE].push(format!("- [x] {what}"), false),
                        },
                        None if kept_results.contains(&call.id) => {}
                        None if !call.id.is_empty() => sections[IN_PROGRESS].push(
                            format!("- [ ] {what} (toolCallId `{}`): no result yet", call.id),
                            true,
                        ),
                        None => {}
                    }
                }
            }
            "toolResult" => {
                // A failed result whose call is not in the span still has to be reported.
                let id = result_call_id(msg).unwrap_or("");
                if is_error_result(msg) && !called_failures.contains(id) {
                    let error = first_line(&content_text(msg)).unwrap_or_else(|| id.to_owned());
                    sections[BLOCKED].push(
                        format!("- tool result (toolCallId `{id}`) failed: {error}"),
                        true,
                    );
                }
            }
            "bashExecution" => {
                let command = cut_chars(
                    msg.get("command")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .lines()
                        .next()
                        .unwrap_or(""),
                    120,
                );
                let code = msg.get("exitCode").and_then(Value::as_f64);
                if js::truthy(msg.get("cancelled")) {
                    sections[BLOCKED].push(format!("- bash `{command}` was cancelled"), false);
                } else if let Some(c) = code.filter(|c| *c != 0.0) {
                    sections[BLOCKED].push(
                        format!(
                            "- bash `{command}` exited with code {}",
                            js::number_to_string(c)
                        ),
                        false,
                    );
                } else {
                    commands += 1;
                    last_command = format!("`bash` {command}");
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    if !reads.is_empty() {
        let shown: Vec<&str> = reads
            .iter()
            .take(READ_LIST_MAX)
            .map(String::as_str)
            .collect();
        let more = reads.len().saturating_sub(READ_LIST_MAX);
        sections[DONE].push(
            format!(
                "- [x] Read {} file{}: {}{}",
                reads.len(),
                if reads.len() == 1 { "" } else { "s" },
                shown.join(", "),
                if more > 0 {
                    format!(" (+{more} more)")
                } else {
                    String::new()
                }
            ),
            false,
        );
    }
    for e in &edits {
        let times = if e.count > 1 {
            format!(" ({} edits)", e.count)
        } else {
            String::new()
        };
        let change = e
            .last_change
            .as_ref()
            .map_or(String::new(), |c| format!(" — {c}"));
        sections[DONE].push(
            bullet(&format!("[x] Edited {}{times}{change}", e.path)),
            false,
        );
    }
    if commands > 0 {
        sections[DONE].push(
            bullet(&format!(
                "[x] Ran {commands} command{} (last: {last_command})",
                if commands == 1 { "" } else { "s" }
            )),
            false,
        );
    }
    let open = open.into_vec();
    for (item, _) in &open {
        sections[IN_PROGRESS].push(format!("- [ ] {item}"), true);
    }
    if let Some((text, _)) = &last_request {
        sections[NEXT].push(format!("1. Continue the last user request: {text}"), true);
    }
    for (i, (item, _)) in open.into_iter().enumerate() {
        sections[NEXT].push(format!("{}. {item}", i + 2), false);
    }
    // The last request is unanswered when no assistant text follows it.
    if saw_user && !answered && !answered_later && last_request.is_some() {
        sections[CRITICAL].push(
            "- The last user request has no answer yet".to_owned(),
            false,
        );
    }
    if let Some(line) = last_assistant.flatten() {
        sections[CRITICAL].push(bullet(&format!("Last assistant message: {line}")), false);
    }
    Ok(())
}

/// Strips pi's file-operation blocks from a summary.
fn strip_file_blocks(summary: &str) -> String {
    let mut out = summary.to_owned();
    for tag in ["read-files", "modified-files"] {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        while let Some(start) = out.find(&open) {
            let Some(end) = out[start..].find(&close) else {
                break;
            };
            out.replace_range(start..start + end + close.len(), "");
        }
    }
    out
}

/// Sorts a previous summary's lines into the main layout (unknown sections go to Critical
/// Context, prefixed with their heading).
fn merge_previous(previous: &str, sections: &mut [Section]) {
    let text = strip_file_blocks(previous);
    let mut target = CRITICAL;
    let mut prefix = String::new();
    for raw in text.lines() {
        let line = raw.trim_end();
        let trimmed = line.trim();
        if trimmed.is_empty()
            || trimmed == "---"
            || trimmed == "**Turn Context (split turn):**"
            || trimmed == NO_PRIOR_HISTORY
        {
            continue;
        }
        if let Some(heading) = trimmed.strip_prefix('#') {
            let name = heading.trim_start_matches('#').trim();
            (target, prefix) = match name.to_lowercase().as_str() {
                "goal" | "original request" => (GOAL, String::new()),
                "constraints & preferences" | "constraints" => (CONSTRAINTS, String::new()),
                "progress" => (DONE, String::new()),
                "done" | "progress so far" => (DONE, String::new()),
                "in progress" => (IN_PROGRESS, String::new()),
                "blocked" => (BLOCKED, String::new()),
                "key decisions" => (DECISIONS, String::new()),
                "next steps" => (NEXT, String::new()),
                "critical context" | "context needed to continue" => (CRITICAL, String::new()),
                _ => (CRITICAL, format!("{name}: ")),
            };
            continue;
        }
        if matches!(
            trimmed,
            "- (none)" | "1. (none)" | "- (no request in the summarized span)"
        ) || (trimmed.starts_with("- (") && trimmed.ends_with("older items omitted)"))
        {
            continue;
        }
        let body = if trimmed.starts_with("- ") || trimmed.starts_with("* ") {
            trimmed.to_owned()
        } else {
            format!("- {trimmed}")
        };
        let item = if prefix.is_empty() {
            cut_chars(&body, ITEM_MAX_CHARS)
        } else {
            bullet(&format!("{prefix}{}", body.trim_start_matches("- ")))
        };
        sections[target].push(item, false);
    }
}

fn render(sections: &[Section], main: bool) -> String {
    let mut out = String::new();
    for (i, s) in sections.iter().enumerate() {
        if main && i == DONE {
            out.push_str("## Progress\n");
        }
        out.push_str(s.heading);
        out.push('\n');
        if s.items.is_empty()
            && s.omitted == 0
            && let Some(e) = s.empty
        {
            out.push_str(e);
            out.push('\n');
        }
        for item in &s.items {
            out.push_str(&item.text);
            out.push('\n');
        }
        if s.omitted > 0 {
            out.push_str(&format!("- ({} older items omitted)\n", s.omitted));
        }
        out.push('\n');
    }
    out.trim_end().to_owned()
}

fn size(parts: &[&[Section]]) -> usize {
    // Rendering is cheap next to a compaction; measure exactly.
    parts
        .iter()
        .enumerate()
        .map(|(i, s)| render(s, i == 0).chars().count())
        .sum::<usize>()
        + SPLIT_TURN_SEPARATOR.len()
}

/// Drops items until the rendered parts fit [`SUMMARY_MAX_CHARS`]: unpinned items first, each
/// time the oldest of the section with the most text. Sizes are tracked incrementally and
/// re-measured exactly whenever the estimate says the budget is met, so a span with
/// thousands of items costs one pass, not one render per dropped item.
fn fit(parts: &mut [Vec<Section>]) {
    let measure = |parts: &[Vec<Section>]| {
        let views: Vec<&[Section]> = parts.iter().map(Vec::as_slice).collect();
        size(&views)
    };
    let mut estimate = measure(parts);
    // Characters of droppable text per section, per pass.
    for pinned_pass in [false, true] {
        let mut lens: Vec<Vec<usize>> = parts
            .iter()
            .map(|part| {
                part.iter()
                    .map(|s| {
                        s.items
                            .iter()
                            .filter(|i| i.pinned == pinned_pass)
                            .map(|i| i.text.chars().count() + 1)
                            .sum()
                    })
                    .collect()
            })
            .collect();
        loop {
            if estimate <= SUMMARY_MAX_CHARS {
                estimate = measure(parts);
                if estimate <= SUMMARY_MAX_CHARS {
                    return;
                }
            }
            let mut best: Option<(usize, usize)> = None;
            for (p, part) in lens.iter().enumerate() {
                for (s, &len) in part.iter().enumerate() {
                    if len > 0 && best.is_none_or(|(bp, bs)| len > lens[bp][bs]) {
                        best = Some((p, s));
                    }
                }
            }
            let Some((p, s)) = best else { break };
            let section = &mut parts[p][s];
            let Some(at) = section.items.iter().position(|i| i.pinned == pinned_pass) else {
                lens[p][s] = 0;
                continue;
            };
            let item = section.items.remove(at);
            let removed = item.text.chars().count() + 1;
            lens[p][s] -= removed;
            estimate = estimate.saturating_sub(removed);
            section.omitted += 1;
        }
    }
}

/// The embedded summary of a preparation, file-operation blocks included. The spans'
/// messages are read from `source` (a few passes, one message at a time); `kept_messages`
/// are the messages kept after the cut. Errors: a message that cannot be read again.
pub fn summarize(
    prep: &Preparation,
    source: &dyn SpanSource,
    kept_messages: &[SpanMessage],
) -> Result<String, CompactionError> {
    let kept_results: Vec<String> = kept_messages
        .iter()
        .filter_map(|m| result_call_id(&m.message).map(str::to_owned))
        .collect();
    let history = &prep.messages_to_summarize;
    let prefix = &prep.turn_prefix_messages;
    let previous = prep.previous_summary_text();

    let mut main = main_layout();
    if let Some(previous) = &previous {
        merge_previous(previous, &mut main);
        if history.messages > 0 {
            // The span's own next steps replace the previous ones.
            main[NEXT].items.clear();
        }
    }
    let has_text = |m: &SpanMessage| {
        role(&m.message) == "assistant" && !content_text(&m.message).trim().is_empty()
    };
    // Results answered in the turn prefix or the kept messages close calls of the history.
    let mut later_results = kept_results.clone();
    let mut prefix_answer = false;
    source.for_each_message(prefix, &mut |m| {
        if let Some(id) = result_call_id(&m.message) {
            later_results.push(id.to_owned());
        }
        prefix_answer |= has_text(m);
        Ok(())
    })?;
    let kept_answer = kept_messages.iter().any(has_text);
    extract(
        source,
        history,
        &later_results,
        &mut main,
        previous.is_none(),
        kept_answer || prefix_answer,
    )?;

    let mut parts = vec![main];
    if prep.is_split_turn {
        let mut scratch = main_layout();
        extract(
            source,
            prefix,
            &kept_results,
            &mut scratch,
            true,
            kept_answer,
        )?;
        let mut turn = turn_layout();
        let mut last_request = None;
        source.for_each_message(prefix, &mut |m| {
            if let Some((text, _)) = retention::user_request(m) {
                last_request = Some(text);
            }
            Ok(())
        })?;
        let request = last_request.or_else(|| scratch[GOAL].items.first().map(|i| i.text.clone()));
        if let Some(r) = request {
            turn[0].push(r, true);
        }
        for s in [DONE, IN_PROGRESS, BLOCKED, DECISIONS] {
            for item in std::mem::take(&mut scratch[s].items) {
                turn[1].push(item.text, item.pinned);
            }
        }
        for s in [CONSTRAINTS, CRITICAL] {
            for item in std::mem::take(&mut scratch[s].items) {
                turn[2].push(item.text, item.pinned);
            }
        }
        parts.push(turn);
    }
    fit(&mut parts);

    let history_text = if history.messages == 0 && previous.is_none() && prep.is_split_turn {
        NO_PRIOR_HISTORY.to_owned()
    } else {
        render(&parts[0], true)
    };
    let turn_text = parts.get(1).map(|t| render(t, false));
    Ok(assemble_summary(
        &history_text,
        turn_text.as_deref(),
        &prep.file_lists.format(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::pi::compaction::files::FileOps;
    use crate::dialect::pi::compaction::retention::{ProbeKind, ProbeStatus, check, probes};
    use crate::dialect::pi::format::EntryId;
    use serde_json::json;

    fn span(id: &str, message: Value) -> SpanMessage {
        SpanMessage {
            entry_id: EntryId::new(id),
            message,
        }
    }

    fn preparation(messages: &[SpanMessage]) -> Preparation {
        let mut file_ops = FileOps::default();
        for m in messages {
            file_ops.add_message(&m.message);
        }
        Preparation {
            first_kept_entry_id: EntryId::new("kept"),
            first_kept_index: messages.len(),
            tokens_before: 0.0,
            is_split_turn: false,
            previous_summary: None,
            previous_compaction_id: None,
            messages_to_summarize: Span {
                entries: 0..messages.len(),
                messages: messages.len(),
            },
            turn_prefix_messages: Span::default(),
            file_lists: file_ops.lists(),
            file_ops,
            keep_recent_tokens: 1.0,
        }
    }

    fn session(failures: usize) -> Vec<SpanMessage> {
        let mut out = vec![span(
            "u1",
            json!({"role": "user", "content": "Fix the cart total.\n- [ ] add a test\nNever touch src/legacy.rs."}),
        )];
        for i in 0..failures {
            out.push(span(&format!("a{i}"), json!({"role": "assistant", "content": [
                {"type": "text", "text": "Trying again."},
                {"type": "toolCall", "id": format!("call{i}"), "name": "edit", "arguments": {"path": format!("src/f{i}.rs")}}]})));
            out.push(span(&format!("r{i}"), json!({"role": "toolResult", "toolCallId": format!("call{i}"), "isError": true,
                "content": [{"type": "text", "text": format!("error[E{i:04}]: {}\nmore", "x".repeat(100))}]})));
        }
        out.push(span("a-last", json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": "pending1", "name": "bash", "arguments": {"command": "cargo test"}}]})));
        out.push(span("u2", json!({"role": "user", "content": [{"type": "text", "text": "Please also update the changelog."}]})));
        out
    }

    /// The preparation of `messages` and the embedded summary of it.
    fn summarized(messages: &Vec<SpanMessage>) -> (Preparation, String) {
        let prep = preparation(messages);
        let summary = summarize(&prep, messages, &[]).unwrap_or_default();
        (prep, summary)
    }

    fn body_chars(summary: &str, prep: &Preparation) -> usize {
        summary.chars().count() - prep.file_lists.format().chars().count()
    }

    #[test]
    fn small_spans_keep_every_probe() {
        let messages = session(3);
        let (prep, summary) = summarized(&messages);
        assert_eq!(
            summary,
            summarize(&prep, &messages, &[]).unwrap_or_default(),
            "deterministic"
        );
        for heading in [
            "## Goal\n- First request: Fix the cart total.\n- Latest request: Please also update the changelog.",
            "### Blocked\n- `edit` src/f0.rs failed: error[E0000]",
            "### In Progress\n- [ ] `bash` cargo test (toolCallId `pending1`): no result yet",
            "## Next Steps\n1. Continue the last user request: Please also update the changelog.",
            "## Constraints & Preferences\n- Never touch src/legacy.rs.",
        ] {
            assert!(
                summary.contains(heading),
                "missing {heading:?} in\n{summary}"
            );
        }
        let context = vec![(
            EntryId::new("new"),
            json!({"role": "compactionSummary", "summary": summary}),
        )];
        let report = check(probes(&prep, &messages, &[]).unwrap_or_default(), &context);
        assert_eq!(report.lost, 0, "{report:?}");
        let kinds: Vec<ProbeKind> = report.probes.iter().map(|p| p.probe.kind).collect();
        for kind in [
            ProbeKind::ModifiedFile,
            ProbeKind::ToolError,
            ProbeKind::PendingToolCall,
            ProbeKind::OpenTask,
            ProbeKind::LastUserRequest,
        ] {
            assert!(kinds.contains(&kind), "no {kind:?} probe");
        }
    }

    #[test]
    fn progress_is_grouped_by_file_and_only_stated_constraints_and_decisions_count() {
        let read = |id: &str, path: &str| json!({"role": "assistant", "content": [{"type": "toolCall", "id": id, "name": "read", "arguments": {"path": path}}]});
        let ok = |id: &str| json!({"role": "toolResult", "toolCallId": id, "content": [{"type": "text", "text": "fine"}]});
        let messages = vec![
            span("u0", json!({"role": "user", "content": "/mode"})),
            span(
                "u1",
                json!({"role": "user", "content": "Port the theme to the selectors.\nI never liked the old colours.\nDon't touch the README."}),
            ),
            span("a1", read("r1", "src/a.ts")),
            span("t1", ok("r1")),
            span("a2", read("r2", "src/b.ts")),
            span("t2", ok("r2")),
            span(
                "a3",
                json!({"role": "assistant", "content": [
                {"type": "text", "text": "Decision: keep one theme object.\nThis is always tricky."},
                {"type": "toolCall", "id": "e1", "name": "edit", "arguments": {"path": "src/a.ts", "edits": [{"oldText": "x", "newText": "\n  const theme = load();"}]}}]}),
            ),
            span("t3", ok("e1")),
            span(
                "a4",
                json!({"role": "assistant", "content": [
                {"type": "toolCall", "id": "e2", "name": "edit", "arguments": {"path": "src/a.ts", "edits": [{"oldText": "y", "newText": "theme.apply();"}]}}]}),
            ),
            span("t4", ok("e2")),
            span("u2", json!({"role": "user", "content": "Now the footer."})),
        ];
        let (_, summary) = summarized(&messages);
        for want in [
            "## Goal\n- First request: Port the theme to the selectors.\n- Latest request: Now the footer.\n",
            "## Constraints & Preferences\n- Don't touch the README.\n\n",
            "- [x] Read 2 files: src/a.ts, src/b.ts\n",
            "- [x] Edited src/a.ts (2 edits) — now `theme.apply();`\n",
            "## Key Decisions\n- Decision: keep one theme object.\n\n",
            "- The last user request has no answer yet",
        ] {
            assert!(summary.contains(want), "missing {want:?} in\n{summary}");
        }
        for absent in ["never liked", "always tricky", "/mode"] {
            assert!(!summary.contains(absent), "{absent:?} in\n{summary}");
        }
    }

    #[test]
    fn large_spans_are_cut_to_the_bound_and_report_what_is_lost() {
        let messages = session(400);
        let (prep, summary) = summarized(&messages);
        assert!(
            body_chars(&summary, &prep) <= SUMMARY_MAX_CHARS,
            "{} chars",
            body_chars(&summary, &prep)
        );
        assert!(summary.contains("older items omitted)"));
        assert!(
            summary.ends_with(&prep.file_lists.format()),
            "file blocks close the summary"
        );
        // The first request and the last request survive the cut.
        assert!(summary.contains("- First request: Fix the cart total."));
        assert!(summary.contains("Please also update the changelog."));
        let context = vec![(
            EntryId::new("new"),
            json!({"role": "compactionSummary", "summary": summary}),
        )];
        let report = check(probes(&prep, &messages, &[]).unwrap_or_default(), &context);
        let lost_errors = report
            .probes
            .iter()
            .filter(|p| p.probe.kind == ProbeKind::ToolError && p.status == ProbeStatus::Lost)
            .count();
        assert!(
            lost_errors > 0,
            "400 long errors cannot all fit in {SUMMARY_MAX_CHARS} characters"
        );
        assert_eq!(report.lost, report.lost_probes().count());
    }
}
