//! The searchable text of one entry, for the full-text index (`sessiond search`,
//! `session/search`). Pure: takes the parsed line.
//!
//! What is searchable: user and assistant text, tool calls (name and arguments, strings as
//! written), tool results, `bashExecution` commands and output, extension messages,
//! compaction and branch summaries, labels and session names. Thinking is kept apart
//! ([`EntryText::thinking`]) so that a search includes it only when asked; each field is cut
//! at [`crate::core::searchable::MAX_FIELD_BYTES`].

use serde_json::Value;

use crate::core::searchable::{EntryText, push, str_of, strings};

fn content(c: Option<&Value>, acc: &mut EntryText) {
    match c {
        Some(Value::String(s)) => push(&mut acc.text, s),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match str_of(b, "type") {
                    Some("text") => push(&mut acc.text, str_of(b, "text").unwrap_or("")),
                    Some("thinking") => {
                        push(&mut acc.thinking, str_of(b, "thinking").unwrap_or(""))
                    }
                    Some("toolCall") => {
                        push(&mut acc.text, str_of(b, "name").unwrap_or(""));
                        if let Some(args) = b.get("arguments") {
                            strings(args, &mut acc.text);
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The searchable text of a parsed entry line, or `None` for entries with nothing to find
/// (model and thinking-level changes, extension state, usage, context edits, the header).
pub fn entry_text(entry: &Value) -> Option<EntryText> {
    let mut acc = EntryText::default();
    let kind = match str_of(entry, "type")? {
        "message" => {
            let m = entry.get("message")?;
            let role = str_of(m, "role").unwrap_or("");
            match role {
                "toolResult" => {
                    push(&mut acc.text, str_of(m, "toolName").unwrap_or(""));
                    content(m.get("content"), &mut acc);
                }
                "bashExecution" => {
                    push(&mut acc.text, str_of(m, "command").unwrap_or(""));
                    push(&mut acc.text, str_of(m, "output").unwrap_or(""));
                }
                "branchSummary" | "compactionSummary" => {
                    push(&mut acc.text, str_of(m, "summary").unwrap_or(""))
                }
                _ => content(m.get("content"), &mut acc),
            }
            if role == "hookMessage" {
                "custom".to_owned()
            } else {
                role.to_owned()
            }
        }
        t @ ("compaction" | "branch_summary") => {
            push(&mut acc.text, str_of(entry, "summary").unwrap_or(""));
            t.to_owned()
        }
        "label" => {
            push(&mut acc.text, str_of(entry, "label").unwrap_or(""));
            "label".to_owned()
        }
        "session_info" => {
            push(&mut acc.text, str_of(entry, "name").unwrap_or(""));
            "session_info".to_owned()
        }
        "custom_message" => {
            push(&mut acc.text, str_of(entry, "customType").unwrap_or(""));
            content(entry.get("content"), &mut acc);
            "custom_message".to_owned()
        }
        _ => return None,
    };
    acc.kind = kind;
    acc.nonempty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_tool_calls_and_summaries() {
        let a = entry_text(
            &json!({"type":"message","message":{"role":"assistant","content":[
            {"type":"thinking","thinking":"ponder"},{"type":"text","text":"hello"},
            {"type":"toolCall","name":"bash","arguments":{"command":"cargo test"}}]}}),
        )
        .unwrap();
        assert_eq!(a.kind, "assistant");
        assert_eq!(a.text, "hello\nbash\ncommand\ncargo test");
        assert_eq!(a.thinking, "ponder");
        let c = entry_text(&json!({"type":"compaction","summary":"did X"})).unwrap();
        assert_eq!((c.kind.as_str(), c.text.as_str()), ("compaction", "did X"));
        let u = entry_text(&json!({"type":"message","message":{"role":"user","content":"hi"}}));
        assert_eq!(u.unwrap().text, "hi");
        assert!(entry_text(&json!({"type":"model_change","provider":"x"})).is_none());
        assert!(entry_text(&json!({"type":"label","label":""})).is_none());
    }
}
