//! Retention probes, for every dialect: facts from the span a summary replaced (a path read or
//! modified, a failed tool result, a tool call without a result, an open task, the last user
//! request), each looked up verbatim in the text of the context the summary starts. The shapes
//! of the report and the lookup; which facts a span holds is the dialect's
//! (`dialect::pi::compaction::retention`, `dialect::claude::audit`). Pure.

use serde::Serialize;

use crate::core::ids::EntryId;

/// Longest probe text, in characters.
pub const PROBE_TEXT_MAX_CHARS: usize = 160;

/// What a probe checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProbeKind {
    /// A file the span read (pi's `readFiles`).
    ReadFile,
    /// A file the span wrote or edited (pi's `modifiedFiles`).
    ModifiedFile,
    /// The first non-empty line of a failed tool result (`isError`).
    ToolError,
    /// A tool call with no result in the span or the kept messages, probed by its `toolCallId`.
    PendingToolCall,
    /// An unchecked task item (`- [ ] text`) not checked later in the span.
    OpenTask,
    /// The first line of the last user request.
    LastUserRequest,
}

/// One fact to retain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// What the probe checks.
    pub kind: ProbeKind,
    /// The text looked up in the new context.
    pub text: String,
    /// The entry the fact came from (for a file only listed in the previous compaction's
    /// details: that compaction).
    pub entry_id: Option<EntryId>,
    /// The tool call the fact belongs to, for tool errors and pending tool calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// `kept` or `lost`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProbeStatus {
    /// The text occurs verbatim in the new context.
    Kept,
    /// The text occurs nowhere in the new context.
    Lost,
}

/// A probe and what the lookup found.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeResult {
    /// The probe, flattened into the result's JSON.
    #[serde(flatten)]
    pub probe: Probe,
    /// Whether the text was found.
    pub status: ProbeStatus,
    /// The entry of the first new-context message that contains the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_in: Option<EntryId>,
}

/// The retention report of one compaction.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    /// Number of probes kept.
    pub kept: usize,
    /// Number of probes lost.
    pub lost: usize,
    /// Every probe with its status, in probe order.
    pub probes: Vec<ProbeResult>,
}

impl Retention {
    /// The probes that were lost.
    pub fn lost_probes(&self) -> impl Iterator<Item = &ProbeResult> {
        self.probes.iter().filter(|p| p.status == ProbeStatus::Lost)
    }
}

/// The first non-empty line of `text`, trimmed and cut at [`PROBE_TEXT_MAX_CHARS`].
pub fn first_line(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| cut_chars(l, PROBE_TEXT_MAX_CHARS))
}

/// `text` cut to at most `max` characters.
pub fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => text[..i].to_owned(),
        None => text.to_owned(),
    }
}

/// Task items in `text`: `(checked, text)` for lines like `- [ ] x`, `* [x] x`, `1. [ ] x`.
pub fn task_items(text: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim_start();
        let rest = if let Some(r) = l.strip_prefix("- ").or_else(|| l.strip_prefix("* ")) {
            r
        } else {
            let digits = l.bytes().take_while(u8::is_ascii_digit).count();
            match l[digits..].strip_prefix(". ") {
                Some(r) if digits > 0 => r,
                _ => continue,
            }
        };
        let (checked, item) = if let Some(i) = rest.strip_prefix("[ ] ") {
            (false, i)
        } else if let Some(i) = rest
            .strip_prefix("[x] ")
            .or_else(|| rest.strip_prefix("[X] "))
        {
            (true, i)
        } else {
            continue;
        };
        let item = cut_chars(item.trim(), PROBE_TEXT_MAX_CHARS);
        if !item.is_empty() {
            out.push((checked, item));
        }
    }
    out
}

/// The entries a compaction replaced, by id (pi's `prepareCompaction` span, or the lines before
/// a Claude Code compact boundary).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SummarySource {
    /// Entries in the range (compactions not counted).
    pub count: usize,
    /// The range's first entry; `null` when it is empty.
    pub first_id: Option<EntryId>,
    /// The range's last entry; `null` when it is empty.
    pub last_id: Option<EntryId>,
    /// The first entry the compaction keeps (pi's `firstKeptEntryId`; Claude Code: the head
    /// of the preserved segment).
    pub first_kept_entry_id: Option<EntryId>,
    /// The previous compaction on the path, whose summary this one carries forward (Claude
    /// Code: the compact boundary the replaced lines follow).
    pub previous_compaction_id: Option<EntryId>,
}

/// The probes of a summarized span in the order every dialect reports them: files read (those
/// also modified left out), files modified, tool errors, pending calls, open tasks (`open` then
/// `more_open`, each text once), the last user request. Each file and task is `(text, entry)`.
pub fn probes_in_order(
    mut read: Vec<(String, Option<EntryId>)>,
    mut modified: Vec<(String, Option<EntryId>)>,
    errors: Vec<Probe>,
    pending: Vec<Probe>,
    open: Vec<(String, Option<EntryId>)>,
    more_open: Vec<(String, Option<EntryId>)>,
    last_request: Option<(String, EntryId)>,
) -> Vec<Probe> {
    let modified_set: std::collections::HashSet<&String> =
        modified.iter().map(|(p, _)| p).collect();
    read.retain(|(p, _)| !modified_set.contains(p));
    read.sort();
    modified.sort();
    let fact = |kind, (text, entry_id): (String, Option<EntryId>)| Probe {
        kind,
        text,
        entry_id,
        tool_call_id: None,
    };
    let mut out: Vec<Probe> = read
        .into_iter()
        .map(|f| fact(ProbeKind::ReadFile, f))
        .collect();
    out.extend(
        modified
            .into_iter()
            .map(|f| fact(ProbeKind::ModifiedFile, f)),
    );
    out.extend(errors);
    out.extend(pending);
    for t in open.into_iter().chain(more_open) {
        if !out
            .iter()
            .any(|p| p.kind == ProbeKind::OpenTask && p.text == t.0)
        {
            out.push(fact(ProbeKind::OpenTask, t));
        }
    }
    if let Some((text, entry)) = last_request {
        out.push(Probe {
            kind: ProbeKind::LastUserRequest,
            text,
            entry_id: Some(entry),
            tool_call_id: None,
        });
    }
    out
}

/// Looks every probe up in the new context, given as the searchable text of each message and
/// the entry it came from, in context order: `kept` (with the first message that holds it)
/// when the text occurs verbatim, case-sensitive.
pub fn check_texts(probes: Vec<Probe>, texts: &[(EntryId, String)]) -> Retention {
    let probes: Vec<ProbeResult> = probes
        .into_iter()
        .map(|probe| {
            let found = texts
                .iter()
                .find(|(_, t)| t.contains(&probe.text))
                .map(|(id, _)| id.clone());
            ProbeResult {
                status: if found.is_some() {
                    ProbeStatus::Kept
                } else {
                    ProbeStatus::Lost
                },
                found_in: found,
                probe,
            }
        })
        .collect();
    let kept = probes
        .iter()
        .filter(|p| p.status == ProbeStatus::Kept)
        .count();
    Retention {
        kept,
        lost: probes.len() - kept,
        probes,
    }
}

/// The report in a few words: `kept 31 of 43 facts, lost 12 (9 modified files, 2 tasks, the
/// last request)`.
pub fn retention_text(r: &Retention) -> String {
    let total = r.kept + r.lost;
    if total == 0 {
        return "no facts to check (nothing read, changed, failed, pending, open or asked)"
            .to_owned();
    }
    let fact = if total == 1 { "fact" } else { "facts" };
    if r.lost == 0 {
        return format!("kept all {total} {fact}");
    }
    let kinds = [
        (ProbeKind::ModifiedFile, "modified file", "modified files"),
        (ProbeKind::ReadFile, "read file", "read files"),
        (ProbeKind::ToolError, "tool error", "tool errors"),
        (
            ProbeKind::PendingToolCall,
            "pending tool call",
            "pending tool calls",
        ),
        (ProbeKind::OpenTask, "task", "tasks"),
    ];
    let mut parts: Vec<String> = kinds
        .iter()
        .filter_map(|&(kind, one, many)| {
            let n = r.lost_probes().filter(|p| p.probe.kind == kind).count();
            (n > 0).then(|| format!("{n} {}", if n == 1 { one } else { many }))
        })
        .collect();
    if r.lost_probes()
        .any(|p| p.probe.kind == ProbeKind::LastUserRequest)
    {
        parts.push("the last request".to_owned());
    }
    format!(
        "kept {} of {total} {fact}, lost {} ({})",
        r.kept,
        r.lost,
        parts.join(", ")
    )
}
