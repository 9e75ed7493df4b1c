//! The text pi sends the summarizer: messages converted to LLM messages, then flattened to
//! `[User]: …`, `[Assistant]: …`, `[Assistant tool calls]: …`, `[Tool result]: …` parts with
//! long tool results truncated. Matches pi 1.6.0 `convertToLlm` / `bashExecutionToText`
//! (messages.js) and `serializeConversation` (compaction/utils.js).

use serde_json::{Map, Value, json};

use crate::dialect::pi::compaction::tokens::content_text;
use crate::js::value::{self as js, TypeError};

/// Longest tool result kept in the serialized conversation, in UTF-16 code units
/// (pi `TOOL_RESULT_MAX_CHARS`).
pub const TOOL_RESULT_MAX_CHARS: usize = 2000;

/// pi's wrapper around a compaction summary when it becomes a user message.
pub const COMPACTION_SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
/// Closes [`COMPACTION_SUMMARY_PREFIX`].
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
/// pi's wrapper around a branch summary when it becomes a user message.
pub const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
/// Closes [`BRANCH_SUMMARY_PREFIX`].
pub const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

/// pi `bashExecutionToText`.
pub fn bash_execution_to_text(m: &Value) -> String {
    let command = js::template_string(m.get("command"));
    let mut text = format!("Ran `{command}`\n");
    if js::truthy(m.get("output")) {
        text.push_str(&format!(
            "```\n{}\n```",
            js::template_string(m.get("output"))
        ));
    } else {
        text.push_str("(no output)");
    }
    let exit = m.get("exitCode");
    if js::truthy(m.get("cancelled")) {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = exit.filter(|c| !c.is_null() && !is_zero(c)) {
        text.push_str(&format!(
            "\n\nCommand exited with code {}",
            js::template_string(Some(code))
        ));
    }
    if js::truthy(m.get("truncated")) && js::truthy(m.get("fullOutputPath")) {
        text.push_str(&format!(
            "\n\n[Output truncated. Full output: {}]",
            js::template_string(m.get("fullOutputPath"))
        ));
    }
    text
}

fn is_zero(v: &Value) -> bool {
    v.as_f64() == Some(0.0)
}

fn user_text(text: String, timestamp: Option<&Value>) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), json!("user"));
    m.insert("content".into(), json!([{"type": "text", "text": text}]));
    if let Some(t) = timestamp {
        m.insert("timestamp".into(), t.clone());
    }
    Value::Object(m)
}

/// pi `convertToLlm`: bash executions (unless excluded), custom messages and summaries become
/// user messages; system, user, assistant and tool results pass through; other roles drop.
pub fn convert_to_llm(messages: &[&Value]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        match role {
            "bashExecution" => {
                if js::truthy(m.get("excludeFromContext")) {
                    continue;
                }
                out.push(user_text(bash_execution_to_text(m), m.get("timestamp")));
            }
            "custom" => {
                let content = match m.get("content") {
                    Some(Value::String(s)) => json!([{"type": "text", "text": s}]),
                    Some(v) => v.clone(),
                    None => Value::Null,
                };
                let mut u = Map::new();
                u.insert("role".into(), json!("user"));
                u.insert("content".into(), content);
                if let Some(t) = m.get("timestamp") {
                    u.insert("timestamp".into(), t.clone());
                }
                out.push(Value::Object(u));
            }
            "branchSummary" => out.push(user_text(
                format!(
                    "{BRANCH_SUMMARY_PREFIX}{}{BRANCH_SUMMARY_SUFFIX}",
                    js::template_string(m.get("summary"))
                ),
                m.get("timestamp"),
            )),
            "compactionSummary" => out.push(user_text(
                format!(
                    "{COMPACTION_SUMMARY_PREFIX}{}{COMPACTION_SUMMARY_SUFFIX}",
                    js::template_string(m.get("summary"))
                ),
                m.get("timestamp"),
            )),
            "system" | "user" | "assistant" | "toolResult" => out.push((*m).clone()),
            _ => {}
        }
    }
    out
}

/// pi's `truncateForSummary`: the head of `text` and a marker counting the cut units.
fn truncate_for_summary(text: &str, max: usize) -> String {
    let len = crate::js::jsstr::utf16_len(text);
    if len <= max {
        return text.to_owned();
    }
    format!(
        "{}\n\n[... {} more characters truncated]",
        js::slice_head_utf16(text, max),
        len - max
    )
}

/// pi `serializeConversation(llmMessages)`: the parts joined by blank lines. Thinking is
/// left out; tool results are cut at [`TOOL_RESULT_MAX_CHARS`]. The text keeps lone
/// surrogates as [`crate::js::jsstr`] pairs (one UTF-16 unit each), except inside tool
/// arguments, where `JSON.stringify` has already written their escapes.
pub fn serialize_conversation(messages: &[Value]) -> Result<String, TypeError> {
    let mut out = String::new();
    for m in messages {
        serialize_message(m, &mut out)?;
    }
    Ok(out)
}

/// Appends one LLM message's parts to a conversation `out` being serialized as
/// [`serialize_conversation`] does (a blank line before each part but the first), so a
/// conversation can be built one message at a time.
pub fn serialize_message(m: &Value, out: &mut String) -> Result<(), TypeError> {
    let mut parts: Vec<String> = Vec::new();
    {
        match m.get("role").and_then(Value::as_str) {
            Some("user") => {
                let content = content_text(m.get("content"), "", "user content")?;
                if !content.is_empty() {
                    parts.push(format!("[User]: {content}"));
                }
            }
            Some("assistant") => {
                let blocks = js::iterate(m.get("content"), "assistant content")?;
                let mut calls = Vec::new();
                for block in &blocks {
                    if !js::is_str(js::prop(block, "type", "assistant block")?, "toolCall") {
                        continue;
                    }
                    let args = match js::prop(block, "arguments", "tool call")? {
                        Some(Value::Object(map)) => js::ordered_entries(map)
                            .into_iter()
                            .map(|(k, v)| format!("{k}={}", js::stringify(v)))
                            .collect::<Vec<_>>(),
                        Some(Value::Array(items)) => items
                            .iter()
                            .enumerate()
                            .map(|(i, v)| format!("{i}={}", js::stringify(v)))
                            .collect(),
                        // Object.entries of a string: one entry per UTF-16 unit, so each
                        // half of a pair is a lone surrogate, which JSON.stringify escapes.
                        Some(Value::String(s)) => crate::js::jsstr::units(s)
                            .enumerate()
                            .map(|(i, u)| match char::from_u32(u32::from(u)) {
                                Some(c) => {
                                    format!("{i}={}", js::stringify(&Value::String(c.into())))
                                }
                                None => format!("{i}=\"\\u{u:04x}\""),
                            })
                            .collect(),
                        None | Some(Value::Null) => {
                            return Err(TypeError(
                                "Object.entries of a tool call without arguments".into(),
                            ));
                        }
                        Some(_) => Vec::new(),
                    };
                    let name = js::template_string(js::prop(block, "name", "tool call")?);
                    calls.push(format!("{name}({})", args.join(", ")));
                }
                // `msg.content.some(...)` throws on a string content.
                let Some(Value::Array(content)) = m.get("content") else {
                    return Err(TypeError("assistant content has no some method".into()));
                };
                let has_text = content
                    .iter()
                    .map(|b| js::prop(b, "type", "assistant block"))
                    .collect::<Result<Vec<_>, _>>()?
                    .into_iter()
                    .any(|t| js::is_str(t, "text"));
                if has_text {
                    let text = content_text(m.get("content"), "\n", "assistant content")?;
                    parts.push(format!("[Assistant]: {text}"));
                }
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Some("toolResult") => {
                let content = content_text(m.get("content"), "", "tool result content")?;
                if !content.is_empty() {
                    parts.push(format!(
                        "[Tool result]: {}",
                        truncate_for_summary(&content, TOOL_RESULT_MAX_CHARS)
                    ));
                }
            }
            _ => {}
        }
    }
    for part in parts {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&part);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_like_pi() {
        let long = "x".repeat(2005);
        let messages = convert_to_llm(&[
            &json!({"role": "user", "content": "fix the test"}),
            &json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hidden"},
                {"type": "text", "text": "Reading."},
                {"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": "a.rs", "limit": 1.0}}]}),
            &json!({"role": "toolResult", "toolCallId": "t1", "content": [{"type": "text", "text": long}]}),
            &json!({"role": "bashExecution", "command": "ls", "output": "", "exitCode": 2}),
            &json!({"role": "bashExecution", "command": "rm", "output": "x", "excludeFromContext": true}),
            &json!({"role": "notification", "content": "ignored"}),
        ]);
        let text = serialize_conversation(&messages).unwrap_or_default();
        let expected = format!(
            "[User]: fix the test\n\n[Assistant]: Reading.\n\n[Assistant tool calls]: read(path=\"a.rs\", limit=1)\n\n[Tool result]: {}\n\n[... 5 more characters truncated]\n\n[User]: Ran `ls`\n(no output)\n\nCommand exited with code 2",
            "x".repeat(2000)
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn lone_surrogates_serialize_like_pi() {
        // The message as parsed from `"text": "<1999 x>\ud83d\ude80"` (a valid pair across the
        // cut) and `"<1999 x>\ud83dy"` (a lone high surrogate before it), tool arguments with
        // a lone surrogate, and string arguments whose pair Object.entries splits.
        let line = format!(
            r#"[{{"role": "toolResult", "content": [{{"type": "text", "text": "{x}\ud83d\ude80"}}]}},
                {{"role": "toolResult", "content": [{{"type": "text", "text": "{x}\ud83dy"}}]}},
                {{"role": "assistant", "content": [{{"type": "toolCall", "name": "bash", "arguments": {{"command": "a\ude80"}}}},
                    {{"type": "toolCall", "name": "f", "arguments": "h🚀"}}]}}]"#,
            x = "x".repeat(1999)
        );
        let messages = js::parse_json(line.as_bytes()).unwrap_or_default();
        let messages: Vec<&Value> = messages.as_array().into_iter().flatten().collect();
        let text = serialize_conversation(&convert_to_llm(&messages)).unwrap_or_default();
        let json = crate::js::jsstr::restore_json(&json!(text).to_string()).into_owned();
        let x = "x".repeat(1999);
        assert_eq!(
            json,
            format!(
                r#""[Tool result]: {x}\n\n[... 1 more characters truncated]\n\n[Tool result]: {x}\ud83d\n\n[... 1 more characters truncated]\n\n[Assistant tool calls]: bash(command=\"a\\ude80\"); f(0=\"h\", 1=\"\\ud83d\", 2=\"\\ude80\")""#
            )
        );
    }
}
