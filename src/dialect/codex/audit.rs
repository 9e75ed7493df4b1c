//! Where a Codex compaction summary came from, and what it kept: for a `compacted` line with
//! `replacement_history`, the model-visible items it replaced and the retention probes of them
//! ([`crate::core::retention`]) looked up in its `message` and `replacement_history`
//! (`docs/codex.md` §4). Reads the thread's chain of files ([`super::lineage`]).
//!
//! The span is the history the replay ([`super::replay`]) held just before the compaction that
//! came from the rollout's own items: everything after the previous compaction (whose
//! replacement history is not the span's: an earlier summary) or the thread's start, less what
//! a rollback dropped — exactly the records `explain` calls `replacedByCompaction` by this line.
//! The compaction's own answer (the assistant item with `metadata.compaction_output`) is in the
//! span but not probed: it is the summary. The probes are pi's kinds read from Codex's items:
//! every file a command read (Codex's own reading of the command, the `parsed_cmd` entries of
//! type `read` on the call's `item_completed` or `exec_command_end` event; `read_file`'s
//! `file_path`), every file an `apply_patch` adds, updates, moves or deletes, the first line of
//! each failed output's own output (an exit code other than 0, or `apply_patch verification
//! failed`), each call without an output in the span, each open task (an unchecked `- [ ]`
//! item not checked later, and the steps the last `update_plan` left not completed), and the
//! first line of the last user message that opens a turn. The new context is the compaction's
//! `message` and every string of its `replacement_history` items, all found in the compaction
//! line itself. Codex keeps no line of the span verbatim (its replacement history holds copies
//! of the user messages), so `firstKeptEntryId` is null.
//!
//! What this cannot see: the summarization request (its prompt is not stored, §4).

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::core::ids::EntryId;
use crate::core::retention::{
    self, Probe, ProbeKind, Retention, SummarySource, first_line, task_items,
};
use crate::dialect::codex::leaf_replay::Replay;
use crate::dialect::codex::lineage::{Index, LineageError};
use crate::dialect::codex::replay::{Fate, is_user_turn_boundary};
use crate::dialect::codex::verify::{call_of, output_text, patch_of, patch_paths, reports_failure};

/// The audit of the `compacted` line `target` (0-based) of the rollout `path`: what it
/// replaced and the retention report. `None` when the line is no compaction with a
/// replacement history. Errors: the chain's.
pub fn audit(
    index: &Index,
    path: &Path,
    target: usize,
) -> Result<Option<(SummarySource, Retention)>, LineageError> {
    let r = Replay::at(index, path, Some(target))?;
    let own = r.chain.links.len() - 1;
    Ok(r.at
        .iter()
        .position(|&(l, i)| l as usize == own && i as usize == target)
        .and_then(|c| audit_in(&r, c)))
}

/// [`audit`] of the record `c` of a replay that holds it (at the compaction or any line after
/// it: what a compaction replaced is decided when it is replayed). `None` when the record is
/// no compaction with a replacement history.
pub fn audit_in(r: &Replay, c: usize) -> Option<(SummarySource, Retention)> {
    if r.replayed.fates.get(c) != Some(&Fate::Base) {
        return None;
    }
    let own = r.chain.links.len() - 1;
    let link_of = |k: usize| &r.chain.links[r.at[k].0 as usize];
    let record = |k: usize| link_of(k).file.record(r.at[k].1 as usize);
    let id = |k: usize| -> EntryId {
        let (link, line) = r.at[k];
        let ordinal = record(k).and_then(|v| v.get("ordinal").and_then(Value::as_u64));
        let bare = super::format::line_id(ordinal, line + 1);
        if link as usize == own {
            return bare;
        }
        // A line of another file of the chain, named as the thread's tree names it.
        let hid = link_of(k).history_id.as_deref().unwrap_or("");
        let tag = &hid[hid.len().saturating_sub(8)..];
        EntryId::new(format!("{tag}:{}", bare.as_str()))
    };
    let previous = (0..c).rev().find(|&k| r.replayed.fates[k] == Fate::Base);
    let span: Vec<usize> = (0..c)
        .filter(|&k| r.replayed.fates[k] == Fate::Compacted(c))
        .collect();
    let source = SummarySource {
        count: span.len(),
        first_id: span.first().map(|&k| id(k)),
        last_id: span.last().map(|&k| id(k)),
        first_kept_entry_id: None,
        previous_compaction_id: previous.map(id),
    };

    let items: Vec<(Value, EntryId)> = span
        .iter()
        .filter_map(|&k| record(k).map(|v| (v, id(k))))
        .filter(|(v, _)| v["metadata"]["compaction_output"] != Value::Bool(true))
        .map(|(mut v, at)| (v["payload"].take(), at))
        .collect();
    // Codex's reading of each command, from the events of the span's lines.
    let calls: HashSet<&str> = items
        .iter()
        .filter_map(|(p, _)| p.get("call_id").and_then(Value::as_str))
        .collect();
    let start = previous.map_or(0, |p| p + 1);
    let mut parsed: Vec<(String, Vec<Value>)> = Vec::new();
    for k in start..c {
        let (link, line) = r.at[k];
        let bytes = r.chain.links[link as usize].file.line(line as usize);
        if memchr::memmem::find(&bytes, b"\"parsed_cmd\"").is_none() {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        let p = &v["payload"];
        let (event, call) = match p.get("item") {
            Some(item) => (item, item.get("id")),
            None => (p, p.get("call_id")),
        };
        if let (Some(call), Some(Value::Array(cmds))) =
            (call.and_then(Value::as_str), event.get("parsed_cmd"))
            && calls.contains(call)
        {
            parsed.push((call.to_owned(), cmds.clone()));
        }
    }
    let probes = probes(&items, &parsed);

    let (link, target) = r.at[c];
    let line = r.chain.links[link as usize]
        .file
        .record(target as usize)
        .unwrap_or_default();
    let me = id(c);
    let payload = &line["payload"];
    let mut texts = vec![(
        me.clone(),
        payload["message"].as_str().unwrap_or("").to_owned(),
    )];
    if let Some(Value::Array(history)) = payload.get("replacement_history") {
        for item in history {
            let mut parts = Vec::new();
            strings(item, &mut parts);
            texts.push((me.clone(), parts.join("\n")));
        }
    }
    Some((source, retention::check_texts(probes, &texts)))
}

/// Every string in `v`, keys left out.
fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// What a failed output says: the first line of the command's own output (after the
/// `Output:` line of `exec_command`'s answer), else its first line.
fn error_line(text: &str) -> Option<String> {
    let own = text
        .split_once("\nOutput:\n")
        .and_then(|(_, rest)| first_line(rest));
    own.or_else(|| first_line(text))
}

/// The probes of a span's items (see the module docs), in pi's order; `parsed` holds the
/// `parsed_cmd` lists of the span's calls, by call id.
fn probes(items: &[(Value, EntryId)], parsed: &[(String, Vec<Value>)]) -> Vec<Probe> {
    let answered: HashSet<&str> = items
        .iter()
        .filter(|(p, _)| {
            matches!(
                p["type"].as_str(),
                Some("function_call_output" | "custom_tool_call_output")
            )
        })
        .filter_map(|(p, _)| p["call_id"].as_str())
        .collect();
    let mut read: Vec<(String, Option<EntryId>)> = Vec::new();
    let mut modified: Vec<(String, Option<EntryId>)> = Vec::new();
    let mut errors = Vec::new();
    let mut pending = Vec::new();
    let mut open: Vec<(String, Option<EntryId>)> = Vec::new();
    let mut plan: Vec<(String, Option<EntryId>)> = Vec::new();
    let mut last_request = None;
    let note = |list: &mut Vec<(String, Option<EntryId>)>, path: &str, at: &EntryId| {
        if !list.iter().any(|(p, _)| p == path) {
            list.push((path.to_owned(), Some(at.clone())));
        }
    };
    for (p, at) in items {
        let call = p["call_id"].as_str();
        if let Some((name, arguments)) = call_of(p) {
            if name == "apply_patch"
                && let Some(patch) = patch_of(&arguments)
            {
                for f in patch_paths(patch) {
                    note(&mut modified, &f, at);
                }
            }
            if name == "read_file"
                && let Some(f) = arguments["file_path"].as_str()
            {
                note(&mut read, f, at);
            }
            if name == "update_plan"
                && let Value::Array(steps) = &arguments["plan"]
            {
                // Each call writes the whole plan: the last one decides.
                plan = steps
                    .iter()
                    .filter(|s| s["status"].as_str() != Some("completed"))
                    .filter_map(|s| s["step"].as_str())
                    .map(|s| {
                        (
                            retention::cut_chars(s.trim(), retention::PROBE_TEXT_MAX_CHARS),
                            Some(at.clone()),
                        )
                    })
                    .collect();
            }
            for (_, cmds) in parsed.iter().filter(|(c, _)| Some(c.as_str()) == call) {
                for cmd in cmds.iter().filter(|c| c["type"] == "read") {
                    if let Some(f) = cmd["path"].as_str().or_else(|| cmd["name"].as_str()) {
                        note(&mut read, f, at);
                    }
                }
            }
            if let Some(c) = call.filter(|c| !answered.contains(c)) {
                pending.push(Probe {
                    kind: ProbeKind::PendingToolCall,
                    text: c.to_owned(),
                    entry_id: Some(at.clone()),
                    tool_call_id: Some(c.to_owned()),
                });
            }
            continue;
        }
        match p["type"].as_str() {
            Some("function_call_output" | "custom_tool_call_output") if reports_failure(p) => {
                let c = call.unwrap_or("").to_owned();
                errors.push(Probe {
                    kind: ProbeKind::ToolError,
                    text: error_line(&output_text(p)).unwrap_or_else(|| c.clone()),
                    entry_id: Some(at.clone()),
                    tool_call_id: Some(c),
                });
            }
            Some("message") => {
                let role = p["role"].as_str().unwrap_or("");
                let text = super::preview::content_text(p);
                if matches!(role, "user" | "assistant") {
                    for (checked, item) in task_items(&text) {
                        if checked {
                            open.retain(|(t, _)| *t != item);
                        } else if !open.iter().any(|(t, _)| *t == item) {
                            open.push((item, Some(at.clone())));
                        }
                    }
                }
                if role == "user"
                    && is_user_turn_boundary(p)
                    && let Some(line) = first_line(&text)
                {
                    last_request = Some((line, at.clone()));
                }
            }
            _ => {}
        }
    }
    retention::probes_in_order(read, modified, errors, pending, open, plan, last_request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> EntryId {
        EntryId::new(s)
    }

    #[test]
    fn the_probes_of_codex_items() {
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-x\n+y\n*** Add File: b.md\n+hi\n*** End Patch\n";
        let items = vec![
            (
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n</environment_context>"}]}),
                at("3"),
            ),
            (
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the build\nplease"}]}),
                at("7"),
            ),
            (
                json!({"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"cat src/a.rs\"}", "call_id": "c1"}),
                at("9"),
            ),
            (
                json!({"type": "function_call_output", "call_id": "c1", "output": "Chunk ID: x\nProcess exited with code 0\nOutput:\nfn main() {}\n"}),
                at("11"),
            ),
            (
                json!({"type": "custom_tool_call", "name": "apply_patch", "input": patch, "call_id": "c2"}),
                at("13"),
            ),
            (
                json!({"type": "custom_tool_call_output", "call_id": "c2", "output": "Exit code: 0\nOutput:\nSuccess. Updated the following files:\nM src/a.rs\n"}),
                at("14"),
            ),
            (
                json!({"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"cargo build\"}", "call_id": "c3"}),
                at("16"),
            ),
            (
                json!({"type": "function_call_output", "call_id": "c3", "output": "Chunk ID: y\nProcess exited with code 101\nOutput:\nerror[E0425]: cannot find value `z`\n"}),
                at("18"),
            ),
            (
                json!({"type": "function_call", "name": "update_plan", "arguments": "{\"plan\":[{\"step\":\"build\",\"status\":\"completed\"},{\"step\":\"run the tests\",\"status\":\"pending\"}]}", "call_id": "c4"}),
                at("20"),
            ),
            (
                json!({"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"sleep 9\"}", "call_id": "c5"}),
                at("22"),
            ),
        ];
        let parsed = vec![(
            "c1".to_owned(),
            vec![
                json!({"type": "read", "cmd": "cat src/a.rs", "name": "a.rs", "path": "src/lib.rs"}),
            ],
        )];
        let got: Vec<(ProbeKind, String, String)> = probes(&items, &parsed)
            .into_iter()
            .map(|p| (p.kind, p.text, p.entry_id.unwrap().as_str().to_owned()))
            .collect();
        let want = [
            (ProbeKind::ReadFile, "src/lib.rs", "9"),
            (ProbeKind::ModifiedFile, "b.md", "13"),
            (ProbeKind::ModifiedFile, "src/a.rs", "13"),
            (
                ProbeKind::ToolError,
                "error[E0425]: cannot find value `z`",
                "18",
            ),
            (ProbeKind::PendingToolCall, "c4", "20"),
            (ProbeKind::PendingToolCall, "c5", "22"),
            (ProbeKind::OpenTask, "run the tests", "20"),
            (ProbeKind::LastUserRequest, "fix the build", "7"),
        ];
        let want: Vec<(ProbeKind, String, String)> = want
            .iter()
            .map(|(k, t, e)| (*k, (*t).to_owned(), (*e).to_owned()))
            .collect();
        assert_eq!(got, want);
    }
}
