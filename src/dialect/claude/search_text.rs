//! The searchable text of one Claude Code transcript line, for the full-text index
//! (`sessiond search`, `session/search`). Pure: takes the parsed line.
//!
//! What is searchable, by kind (named as pi's roles and entry types are, so that one `role`
//! filter finds both agents' entries):
//!
//! * `user`: what the user typed — a string content, or its `text` blocks;
//! * `toolResult`: a `user` line holding `tool_result` blocks — each result's text (a string,
//!   or its `text` blocks; images are not text), and any text beside them;
//! * `assistant`: `text` blocks, and `tool_use` (and `server_tool_use`) blocks as the tool's
//!   name and the strings of its input; `thinking` blocks apart, searched on request;
//! * `compaction`: the summary a `/compact` writes (`isCompactSummary`), which opens the
//!   context after the boundary.
//!
//! Not indexed: lines Claude Code writes itself (`isMeta`: the compaction caveat, "Continue
//! from where you left off."), `attachment` lines (agent and skill listings, reminders, files
//! read for a turn: context Claude Code computes, the same on every session, that would make
//! a common word match everywhere), `system` lines (boundaries, durations, errors) and the
//! bookkeeping lines (titles are the session's name in every hit instead).

use serde_json::Value;

use crate::core::searchable::{EntryText, push, str_of, strings};

/// The searchable text of a parsed transcript line, or `None` for a line with nothing to find
/// (see the module docs).
pub fn entry_text(line: &Value) -> Option<EntryText> {
    let ty = str_of(line, "type")?;
    let content = line.get("message").and_then(|m| m.get("content"));
    let flag = |k: &str| line.get(k) == Some(&Value::Bool(true));
    let mut out = match ty {
        "user" if flag("isMeta") => return None,
        "user" if flag("isCompactSummary") => EntryText::new("compaction"),
        "user" => {
            let results = content.and_then(Value::as_array).is_some_and(|blocks| {
                blocks
                    .iter()
                    .any(|b| str_of(b, "type") == Some("tool_result"))
            });
            EntryText::new(if results { "toolResult" } else { "user" })
        }
        "assistant" => EntryText::new("assistant"),
        _ => return None,
    };
    content_text(content, &mut out);
    out.nonempty()
}

/// The text of a `content` (a string, or an array of blocks) into `out`.
fn content_text(content: Option<&Value>, out: &mut EntryText) {
    match content {
        Some(Value::String(s)) => push(&mut out.text, s),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match str_of(b, "type") {
                    Some("text") => push(&mut out.text, str_of(b, "text").unwrap_or("")),
                    Some("thinking") => {
                        push(&mut out.thinking, str_of(b, "thinking").unwrap_or(""))
                    }
                    Some("tool_use" | "server_tool_use") => {
                        push(&mut out.text, str_of(b, "name").unwrap_or(""));
                        if let Some(input) = b.get("input") {
                            strings(input, &mut out.text);
                        }
                    }
                    Some("tool_result") => {
                        // A result's own content: text only (an image is no text), never a
                        // thinking.
                        let mut inner = EntryText::default();
                        content_text(b.get("content"), &mut inner);
                        push(&mut out.text, &inner.text);
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompts_responses_tool_calls_results_and_summaries() {
        let a = entry_text(&json!({"type":"assistant","message":{"content":[
            {"type":"thinking","thinking":"ponder"}]}}))
        .unwrap();
        assert_eq!((a.kind.as_str(), a.text.as_str()), ("assistant", ""));
        assert_eq!(a.thinking, "ponder");
        let call = entry_text(&json!({"type":"assistant","message":{"content":[
            {"type":"tool_use","id":"t","name":"Bash","input":{"command":"echo hi"}}]}}))
        .unwrap();
        assert_eq!(call.text, "Bash\ncommand\necho hi");
        let result = entry_text(&json!({"type":"user","message":{"content":[
            {"type":"tool_result","tool_use_id":"t","content":"hi"},
            {"type":"tool_result","tool_use_id":"u","content":[{"type":"text","text":"there"},
              {"type":"image","source":{"type":"base64","data":"AAAA"}}]}]}}))
        .unwrap();
        assert_eq!(
            (result.kind.as_str(), result.text.as_str()),
            ("toolResult", "hi\nthere")
        );
        let prompt =
            entry_text(&json!({"type":"user","message":{"content":"Run a command"}})).unwrap();
        assert_eq!(
            (prompt.kind.as_str(), prompt.text.as_str()),
            ("user", "Run a command")
        );
        let summary = entry_text(&json!({"type":"user","isCompactSummary":true,
            "message":{"content":"This session is being continued"}}))
        .unwrap();
        assert_eq!(summary.kind, "compaction");
        assert!(
            entry_text(&json!({"type":"user","isMeta":true,"message":{"content":"x"}})).is_none()
        );
        assert!(
            entry_text(&json!({"type":"attachment","attachment":{"type":"skill_listing"}}))
                .is_none()
        );
        assert!(entry_text(&json!({"type":"last-prompt","lastPrompt":"x"})).is_none());
    }
}
