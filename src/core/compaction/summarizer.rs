//! The embedded extractive summarizer: compaction without a model. Deterministic (the same
//! preparation always gives the same bytes), in pi's checkpoint layout, built only from what
//! the summarized span says.
//!
//! Layout (pi's `SUMMARIZATION_PROMPT` sections): `## Goal` (the user requests),
//! `## Constraints & Preferences` (user lines with must/never/always/prefer/avoid/don't…),
//! `## Progress` with `### Done` (tool calls whose result succeeded, citing `toolCallId`s),
//! `### In Progress` (unchecked task items, tool calls without a result) and `### Blocked`
//! (failed tool results with their first error line, bash commands that failed),
//! `## Key Decisions` (assistant lines that decide or choose), `## Next Steps` (the last user
//! request, then the open tasks) and `## Critical Context` (where the work stopped, and
//! sections of a previous summary that have no place in this layout). A previous summary is
//! merged in: its items come first in each section, new items follow, duplicates are dropped,
//! and `## Next Steps` is replaced when the span has its own. For a split turn the history
//! part is followed by pi's separator and a turn-context part in pi's turn-prefix layout
//! (`## Original Request`, `## Progress So Far`, `## Context Needed to Continue`). The
//! `<read-files>` / `<modified-files>` blocks follow exactly as pi appends them.
//!
//! Size bound: every free-text item is cut at [`ITEM_MAX_CHARS`] characters and the summary
//! before the file blocks is at most [`SUMMARY_MAX_CHARS`] characters (about 3,000 tokens by
//! pi's estimate). When over budget, items are dropped oldest first from the longest section,
//! items carrying a retention probe of this span last; each section then says how many items
//! it omitted. The file blocks are not bounded (pi does not bound them either).

use serde_json::Value;

use super::js;
use super::prepare::{Preparation, SpanMessage};
use super::prompts::{NO_PRIOR_HISTORY, SPLIT_TURN_SEPARATOR, assemble_summary};
use super::retention::{
    self, content_text, cut_chars, first_line, is_error_result, result_call_id, tool_calls,
};

/// Longest free-text item, in characters.
pub const ITEM_MAX_CHARS: usize = 240;
/// Longest summary before the file-operation blocks, in characters.
pub const SUMMARY_MAX_CHARS: usize = 12_000;

/// Words that mark a user line as a constraint or preference (matched case-insensitively).
const CONSTRAINT_MARKERS: &[&str] = &[
    "must",
    "never",
    "always",
    "prefer",
    "avoid",
    "don't",
    "do not",
    "should not",
    "shouldn't",
    "without",
    "only use",
    "make sure",
];
/// Phrases that mark an assistant line as a decision.
const DECISION_MARKERS: &[&str] = &[
    "decided",
    "decision",
    "instead of",
    "i'll use",
    "i will use",
    "we'll use",
    "chose",
    "going with",
];

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

fn lines_with(text: &str, markers: &[&str]) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|l| {
            let lower = l.to_lowercase();
            markers.iter().any(|m| contains_word(&lower, m))
        })
        // A line that is itself a list item keeps only its text.
        .map(|l| l.trim_start_matches(['-', '*', ' ']).trim_start())
        .filter(|l| !l.is_empty())
        .map(|l| cut_chars(l, ITEM_MAX_CHARS))
        .collect()
}

fn contains_word(haystack: &str, needle: &str) -> bool {
    haystack.match_indices(needle).any(|(i, _)| {
        let before = haystack[..i].chars().next_back();
        let after = haystack[i + needle.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// What one stretch of messages says, sorted into the main layout.
fn extract(span: &[&SpanMessage], kept_results: &[String], sections: &mut [Section]) {
    // The first result of a call is the one that answered it.
    let mut results: std::collections::HashMap<&str, &Value> = std::collections::HashMap::new();
    for m in span {
        if let Some(id) = result_call_id(&m.message) {
            results.entry(id).or_insert(&m.message);
        }
    }
    let call_ids: std::collections::HashSet<String> = span
        .iter()
        .flat_map(|m| tool_calls(m))
        .map(|c| c.id)
        .collect();
    for m in span {
        let msg = &m.message;
        match role(msg) {
            "user" => {
                let text = content_text(msg);
                if let Some(line) = first_line(&text) {
                    // The first request states the goal; it is dropped last.
                    let first = sections[GOAL].items.is_empty();
                    sections[GOAL].push(bullet(&line), first);
                }
                for l in lines_with(&text, CONSTRAINT_MARKERS) {
                    sections[CONSTRAINTS].push(format!("- {l}"), false);
                }
            }
            "assistant" => {
                for l in lines_with(&content_text(msg), DECISION_MARKERS) {
                    sections[DECISIONS].push(format!("- **Decision**: {l}"), false);
                }
                for call in tool_calls(m) {
                    let what = describe_call(&call.name, &call.arguments);
                    let cite = format!("(toolCallId `{}`)", call.id);
                    match results.get(call.id.as_str()) {
                        Some(result) if is_error_result(result) => {
                            let error = first_line(&content_text(result))
                                .unwrap_or_else(|| call.id.clone());
                            sections[BLOCKED]
                                .push(format!("- {what} {cite} failed: {error}"), true);
                        }
                        Some(_) => sections[DONE].push(format!("- [x] {what} {cite}"), false),
                        None if kept_results.contains(&call.id) => {
                            sections[DONE]
                                .push(format!("- [x] {what} {cite}; result kept below"), false);
                        }
                        None => sections[IN_PROGRESS]
                            .push(format!("- [ ] {what} {cite}: no result yet"), true),
                    }
                }
            }
            "toolResult" => {
                // A failed result whose call is not in the span still has to be reported.
                let id = result_call_id(msg).unwrap_or("");
                if is_error_result(msg) && !call_ids.contains(id) {
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
                    sections[DONE].push(format!("- [x] bash `{command}`"), false);
                }
            }
            _ => {}
        }
    }
    for (item, _) in retention::open_tasks(span) {
        sections[IN_PROGRESS].push(format!("- [ ] {item}"), true);
    }
    let last_request = retention::last_user_request(span);
    if let Some((text, _)) = &last_request {
        sections[NEXT].push(format!("1. Continue the last user request: {text}"), true);
    }
    for (i, (item, _)) in retention::open_tasks(span).into_iter().enumerate() {
        sections[NEXT].push(format!("{}. {item}", i + 2), false);
    }
    let last_assistant = span
        .iter()
        .rev()
        .find(|m| role(&m.message) == "assistant")
        .and_then(|m| first_line(&content_text(&m.message)));
    if let Some(line) = last_assistant {
        sections[CRITICAL].push(bullet(&format!("Last assistant message: {line}")), false);
    }
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

/// The embedded summary of a preparation, file-operation blocks included.
pub fn summarize(prep: &Preparation, kept_messages: &[SpanMessage]) -> String {
    let kept_results: Vec<String> = kept_messages
        .iter()
        .filter_map(|m| result_call_id(&m.message).map(str::to_owned))
        .collect();
    let history: Vec<&SpanMessage> = prep.messages_to_summarize.iter().collect();
    let prefix: Vec<&SpanMessage> = prep.turn_prefix_messages.iter().collect();
    let previous = prep.previous_summary_text();

    let mut main = main_layout();
    if let Some(previous) = &previous {
        merge_previous(previous, &mut main);
        if !history.is_empty() {
            // The span's own next steps replace the previous ones.
            main[NEXT].items.clear();
        }
    }
    // Results answered in the turn prefix or the kept messages close calls of the history.
    let mut later_results = kept_results.clone();
    later_results.extend(
        prefix
            .iter()
            .filter_map(|m| result_call_id(&m.message).map(str::to_owned)),
    );
    extract(&history, &later_results, &mut main);

    let mut parts = vec![main];
    if prep.is_split_turn {
        let mut scratch = main_layout();
        extract(&prefix, &kept_results, &mut scratch);
        let mut turn = turn_layout();
        let request = retention::last_user_request(&prefix)
            .map(|(t, _)| t)
            .or_else(|| scratch[GOAL].items.first().map(|i| i.text.clone()));
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

    let history_text = if history.is_empty() && previous.is_none() && prep.is_split_turn {
        NO_PRIOR_HISTORY.to_owned()
    } else {
        render(&parts[0], true)
    };
    let turn_text = parts.get(1).map(|t| render(t, false));
    assemble_summary(
        &history_text,
        turn_text.as_deref(),
        &prep.file_lists.format(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::compaction::files::FileOps;
    use crate::core::compaction::retention::{ProbeKind, ProbeStatus, check, probes};
    use crate::core::format::EntryId;
    use serde_json::json;

    fn span(id: &str, message: Value) -> SpanMessage {
        SpanMessage {
            entry_id: EntryId::new(id),
            message,
        }
    }

    fn preparation(messages: Vec<SpanMessage>) -> Preparation {
        let mut file_ops = FileOps::default();
        for m in &messages {
            file_ops.add_message(&m.message);
        }
        Preparation {
            first_kept_entry_id: EntryId::new("kept"),
            tokens_before: 0.0,
            is_split_turn: false,
            previous_summary: None,
            previous_compaction_id: None,
            messages_to_summarize: messages,
            turn_prefix_messages: Vec::new(),
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

    fn body_chars(summary: &str, prep: &Preparation) -> usize {
        summary.chars().count() - prep.file_lists.format().chars().count()
    }

    #[test]
    fn small_spans_keep_every_probe() {
        let prep = preparation(session(3));
        let summary = summarize(&prep, &[]);
        assert_eq!(summary, summarize(&prep, &[]), "deterministic");
        for heading in [
            "## Goal\n- Fix the cart total.",
            "### Blocked\n- `edit` src/f0.rs (toolCallId `call0`) failed: error[E0000]",
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
        let report = check(probes(&prep, &[]), &context);
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
    fn large_spans_are_cut_to_the_bound_and_report_what_is_lost() {
        let prep = preparation(session(400));
        let summary = summarize(&prep, &[]);
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
        assert!(summary.contains("- Fix the cart total."));
        assert!(summary.contains("Please also update the changelog."));
        let context = vec![(
            EntryId::new("new"),
            json!({"role": "compactionSummary", "summary": summary}),
        )];
        let report = check(probes(&prep, &[]), &context);
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
