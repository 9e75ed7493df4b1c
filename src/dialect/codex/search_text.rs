//! The searchable text of one Codex rollout line, for the full-text index (`sessiond search`,
//! `session/search`). Pure: takes the parsed line. Response items only, named as pi's roles are
//! (so that one `role` filter finds every agent's entries): a user message (`user`; context
//! Codex writes itself is left out), an assistant message (`assistant`), a tool call (its name
//! and arguments, `assistant`), a tool output (`toolResult`), and a compaction's summary
//! (`compaction`). Events, settings and world state are not indexed.

use serde_json::Value;

use crate::core::searchable::{EntryText, push, str_of};

/// The searchable text of a parsed rollout line, or `None` for a line with nothing to find.
pub fn entry_text(line: &Value) -> Option<EntryText> {
    let payload = line.get("payload")?;
    match str_of(line, "type")? {
        "response_item" => {}
        "compacted" => {
            let mut out = EntryText::new("compaction");
            push(&mut out.text, str_of(payload, "message").unwrap_or(""));
            return out.nonempty();
        }
        _ => return None,
    }
    let mut out = match (str_of(payload, "type")?, str_of(payload, "role")) {
        ("message", Some("user")) if !super::replay::is_user_turn_boundary(payload) => {
            return None;
        }
        ("message", Some("user")) => EntryText::new("user"),
        ("message", Some("assistant")) => EntryText::new("assistant"),
        ("function_call" | "custom_tool_call" | "local_shell_call", _) => {
            let mut out = EntryText::new("assistant");
            push(&mut out.text, str_of(payload, "name").unwrap_or(""));
            push(
                &mut out.text,
                str_of(payload, "arguments")
                    .or_else(|| str_of(payload, "input"))
                    .unwrap_or(""),
            );
            return out.nonempty();
        }
        ("function_call_output" | "custom_tool_call_output", _) => {
            let mut out = EntryText::new("toolResult");
            match payload.get("output") {
                Some(Value::String(s)) => push(&mut out.text, s),
                Some(other) => push(&mut out.text, &other.to_string()),
                None => {}
            }
            return out.nonempty();
        }
        _ => return None,
    };
    push(&mut out.text, &super::preview::content_text(payload));
    out.nonempty()
}
