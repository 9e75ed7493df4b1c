//! Token estimates by pi's chars/4 rule. Matches pi 1.6.0 `estimateTokens` in
//! `dist/core/compaction/compaction.js`: characters are JavaScript string lengths (UTF-16
//! code units), an image counts as 4800 characters, and each message rounds up on its own.

use serde_json::Value;

/// Characters pi counts for one image block.
pub const IMAGE_CHARS: u64 = 4800;

/// pi's `estimateTokens(message)`: `ceil(chars / 4)` for the roles pi knows, 0 otherwise.
///
/// Where pi would throw on a malformed message (a missing `text`, say) the missing part
/// counts as 0 characters. `JSON.stringify` of tool-call arguments is approximated by
/// serde_json's compact form, which agrees with JavaScript except for number spellings
/// such as `1.0` (JavaScript prints `1`).
pub fn estimate_tokens(message: &Value) -> u64 {
    let chars = match message.get("role").and_then(Value::as_str) {
        Some("system") => {
            let mut chars = content_chars(message.get("content"));
            if let Some(Value::Object(sections)) = message.get("sections") {
                chars += sections.values().map(|s| str_len(Some(s))).sum::<u64>();
            }
            if let Some(tools) = message.get("toolsAdded").filter(|t| js_truthy(t)) {
                chars += js_len(&tools.to_string());
            }
            chars
        }
        Some("user" | "custom" | "toolResult") => content_chars(message.get("content")),
        Some("assistant") => match message.get("content") {
            Some(Value::Array(blocks)) => blocks.iter().map(assistant_block_chars).sum(),
            _ => 0,
        },
        Some("bashExecution") => str_len(message.get("command")) + str_len(message.get("output")),
        Some("branchSummary" | "compactionSummary") => str_len(message.get("summary")),
        _ => return 0,
    };
    chars.div_ceil(4)
}

/// The sum of [`estimate_tokens`] over messages (pi's estimate for a context without usage).
pub fn estimate_context_tokens<'a>(messages: impl IntoIterator<Item = &'a Value>) -> u64 {
    messages.into_iter().map(estimate_tokens).sum()
}

fn assistant_block_chars(block: &Value) -> u64 {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => str_len(block.get("text")),
        Some("thinking") => str_len(block.get("thinking")),
        Some("toolCall") => {
            let args = block.get("arguments").map_or(0, |a| js_len(&a.to_string()));
            str_len(block.get("name")) + args
        }
        _ => 0,
    }
}

/// pi's `estimateTextAndImageContentChars`: a string's length, or the text and image blocks
/// of an array.
fn content_chars(content: Option<&Value>) -> u64 {
    match content {
        Some(Value::String(s)) => js_len(s),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => str_len(b.get("text")),
                Some("image") => IMAGE_CHARS,
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}

fn str_len(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_str).map_or(0, js_len)
}

/// JavaScript `string.length`: UTF-16 code units.
fn js_len(s: &str) -> u64 {
    s.encode_utf16().count() as u64
}

fn js_truthy(v: &Value) -> bool {
    !matches!(v, Value::Null | Value::Bool(false))
        && v.as_str() != Some("")
        && v.as_f64() != Some(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_like_pi() {
        // "héllo 😀" is 8 UTF-16 code units: ceil(8/4) = 2.
        assert_eq!(
            estimate_tokens(&json!({"role":"user","content":"héllo 😀"})),
            2
        );
        assert_eq!(
            estimate_tokens(&json!({"role":"user","content":[
                {"type":"text","text":"abcde"},{"type":"image","data":"x"}]})),
            (5 + IMAGE_CHARS).div_ceil(4)
        );
        assert_eq!(
            estimate_tokens(&json!({"role":"assistant","content":[
                {"type":"thinking","thinking":"abc"},
                {"type":"toolCall","name":"read","arguments":{"path":"a"}}]})),
            (3 + 4 + r#"{"path":"a"}"#.len() as u64).div_ceil(4)
        );
        assert_eq!(
            estimate_tokens(&json!({"role":"bashExecution","command":"ls","output":"a\nb"})),
            2
        );
        assert_eq!(
            estimate_tokens(&json!({"role":"compactionSummary","summary":"x".repeat(9)})),
            3
        );
        assert_eq!(
            estimate_tokens(&json!({"role":"other","content":"long"})),
            0
        );
    }
}
