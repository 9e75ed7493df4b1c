//! pi's token estimate: `chars / 4` per message (images count 4800 chars), the context
//! total from the last valid assistant usage, and the replayed system message. Matches pi
//! 1.6.0 `estimateTokens`, `calculateContextTokens`, `getAssistantUsage`,
//! `estimateContextTokens` and pi-ai `getCurrentSystemMessage`.
//!
//! Values are `f64` so that JavaScript's `NaN` (a non-string `text`, a usage field that is
//! not a number) propagates exactly as it does in pi; a shape on which pi throws gives
//! a [`TypeError`].

use serde_json::{Map, Value};

use crate::js::value::{self as js, TypeError};

/// Characters pi counts for one image block.
pub const ESTIMATED_IMAGE_CHARS: f64 = 4800.0;

fn text_and_image_chars(content: Option<&Value>, what: &str) -> Result<f64, TypeError> {
    if let Some(Value::String(s)) = content {
        return Ok(js::utf16_len(s));
    }
    let mut chars = 0.0;
    for block in js::iterate(content, what)? {
        let ty = js::prop(&block, "type", what)?;
        if js::is_str(ty, "text") {
            let text = js::prop(&block, "text", what)?;
            if js::truthy(text) {
                chars += js::length_of(text, what)?;
            }
        } else if js::is_str(ty, "image") {
            chars += ESTIMATED_IMAGE_CHARS;
        }
    }
    Ok(chars)
}

/// pi `estimateTokens(message)`: `Math.ceil(chars / 4)`, 0 for roles it does not count.
/// Lone surrogates count as the six characters `JSON.stringify` writes for one where pi
/// stringifies (tool arguments), and as one code unit in text.
pub fn estimate_tokens(message: &Value) -> Result<f64, TypeError> {
    let get = |k: &str| js::prop(message, k, "message");
    let role = get("role")?.and_then(Value::as_str).unwrap_or("");
    let chars = match role {
        "system" => {
            let mut chars = text_and_image_chars(get("content")?, "system content")?;
            let sections = get("sections")?;
            if js::truthy(sections) {
                for section in object_values(sections) {
                    if js::truthy(Some(&section)) {
                        chars += js::length_of(Some(&section), "system section")?;
                    }
                }
            }
            let tools = get("toolsAdded")?;
            if js::truthy(tools) {
                chars += tools.map_or(0.0, |t| js::utf16_len(&js::stringify(t)));
            }
            chars
        }
        "user" | "custom" | "toolResult" => text_and_image_chars(get("content")?, role)?,
        "assistant" => {
            let mut chars = 0.0;
            for block in js::iterate(get("content")?, "assistant content")? {
                let ty = js::prop(&block, "type", "assistant block")?;
                if js::is_str(ty, "text") {
                    chars += js::length_of(js::prop(&block, "text", "text block")?, "text")?;
                } else if js::is_str(ty, "thinking") {
                    chars +=
                        js::length_of(js::prop(&block, "thinking", "thinking block")?, "thinking")?;
                } else if js::is_str(ty, "toolCall") {
                    chars += js::length_of(js::prop(&block, "name", "tool call")?, "name")?;
                    match js::prop(&block, "arguments", "tool call")? {
                        // JSON.stringify(undefined) is undefined, whose length throws.
                        None => {
                            return Err(TypeError("tool call without arguments".into()));
                        }
                        Some(args) => chars += js::utf16_len(&js::stringify(args)),
                    }
                }
            }
            chars
        }
        "bashExecution" => {
            js::length_of(get("command")?, "command")? + js::length_of(get("output")?, "output")?
        }
        "branchSummary" | "compactionSummary" => js::length_of(get("summary")?, "summary")?,
        _ => return Ok(0.0),
    };
    Ok((chars / 4.0).ceil())
}

/// `Object.values(v)` for the shapes a session file can hold.
fn object_values(v: Option<&Value>) -> Vec<Value> {
    match v {
        Some(Value::Object(m)) => js::ordered_entries(m)
            .into_iter()
            .map(|(_, v)| v.clone())
            .collect(),
        Some(Value::Array(a)) => a.clone(),
        Some(Value::String(s)) => crate::js::jsstr::units(s)
            .map(|_| Value::String("x".into()))
            .collect(),
        _ => Vec::new(),
    }
}

fn num(v: Option<&Value>) -> f64 {
    match v {
        None => f64::NAN,
        Some(Value::Null) => 0.0,
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        Some(Value::Number(n)) => js::number_value(n),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(f64::NAN),
        Some(_) => f64::NAN,
    }
}

/// pi `calculateContextTokens(usage)`: `totalTokens || input + output + cacheRead + cacheWrite`.
pub fn calculate_context_tokens(usage: &Value) -> Result<f64, TypeError> {
    let get = |k: &str| js::prop(usage, k, "usage");
    let total = get("totalTokens")?;
    if js::truthy(total) {
        return Ok(num(total));
    }
    Ok(num(get("input")?) + num(get("output")?) + num(get("cacheRead")?) + num(get("cacheWrite")?))
}

/// pi `getAssistantUsage`: the usage of an assistant message that did not abort or fail
/// and whose context tokens are positive.
pub fn assistant_usage(message: &Value) -> Result<Option<&Value>, TypeError> {
    let Value::Object(m) = message else {
        return Ok(None);
    };
    if !js::is_str(m.get("role"), "assistant") || !m.contains_key("usage") {
        return Ok(None);
    }
    let stop = m.get("stopReason");
    if js::is_str(stop, "aborted") || js::is_str(stop, "error") {
        return Ok(None);
    }
    let usage = m.get("usage");
    if !js::truthy(usage) {
        return Ok(None);
    }
    let Some(usage) = usage else {
        return Ok(None);
    };
    Ok((calculate_context_tokens(usage)? > 0.0).then_some(usage))
}

/// pi `estimateContextTokens(messages)`: the last valid usage plus the estimate of the
/// messages after it, or the estimate of all messages. Returns `(tokens, lastUsageIndex)`.
pub fn estimate_context_tokens(messages: &[&Value]) -> Result<(f64, Option<usize>), TypeError> {
    let mut last = None;
    for (i, m) in messages.iter().enumerate().rev() {
        if let Some(u) = assistant_usage(m)? {
            last = Some((i, u));
            break;
        }
    }
    match last {
        None => {
            let mut tokens = 0.0;
            for m in messages {
                tokens += estimate_tokens(m)?;
            }
            Ok((tokens, None))
        }
        Some((index, usage)) => {
            let mut tokens = calculate_context_tokens(usage)?;
            let mut trailing = 0.0;
            for m in &messages[index + 1..] {
                trailing += estimate_tokens(m)?;
            }
            tokens += trailing;
            Ok((tokens, Some(index)))
        }
    }
}

/// pi-ai `getCurrentSystemMessage(messages)`: every system message replayed into one
/// (content joined by blank lines, sections patched by name, tools resolved by name), or
/// `None` when there is no system message with a timestamp and no tool. Key order is
/// pi's: `role, content, sections?, toolsAdded?, timestamp`.
pub fn current_system_message(messages: &[&Value]) -> Result<Option<Value>, TypeError> {
    let mut content: Vec<String> = Vec::new();
    let mut sections: Map<String, Value> = Map::new();
    // `undefined` is None, `null` is Some(Null): `??=` treats both as unset, but only
    // `undefined` means "no system message seen".
    let mut timestamp: Option<Value> = None;
    let mut tools: Map<String, Value> = Map::new();
    for m in messages {
        if !js::is_str(js::prop(m, "role", "message")?, "system") {
            continue;
        }
        if timestamp.as_ref().is_none_or(Value::is_null)
            && let Some(t) = m.get("timestamp")
        {
            timestamp = Some(t.clone());
        }
        let text = content_text(m.get("content"), "\n", "system content")?;
        if !text.is_empty() {
            content.push(text);
        }
        if let Some(Value::Object(s)) = m.get("sections") {
            for (name, value) in js::ordered_entries(s) {
                if value.is_null() {
                    sections.shift_remove(name);
                } else {
                    // A Map keeps the first insertion position when a key is set again.
                    sections.insert(name.clone(), value.clone());
                }
            }
        }
    }
    // getCurrentTools: a second pass over the same messages.
    for m in messages {
        if !js::is_str(m.get("role"), "system") {
            continue;
        }
        if let Some(removed) = m.get("toolsRemoved").filter(|v| !v.is_null()) {
            for tool in js::iterate(Some(removed), "toolsRemoved")? {
                let name = js::template_string(js::prop(&tool, "name", "tool")?);
                tools.shift_remove(&name);
            }
        }
        if let Some(added) = m.get("toolsAdded").filter(|v| !v.is_null()) {
            for tool in js::iterate(Some(added), "toolsAdded")? {
                let name = js::template_string(js::prop(&tool, "name", "tool")?);
                tools.insert(name, tool);
            }
        }
    }
    if timestamp.is_none() && tools.is_empty() {
        return Ok(None);
    }
    let mut out = Map::new();
    out.insert("role".into(), Value::String("system".into()));
    out.insert("content".into(), Value::String(content.join("\n\n")));
    if !sections.is_empty() {
        // Object.fromEntries: JavaScript reorders integer-like keys first.
        let ordered: Map<String, Value> = js::ordered_entries(&sections)
            .into_iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.insert("sections".into(), Value::Object(ordered));
    }
    if !tools.is_empty() {
        out.insert(
            "toolsAdded".into(),
            Value::Array(tools.into_values().collect()),
        );
    }
    out.insert(
        "timestamp".into(),
        timestamp.filter(|t| !t.is_null()).unwrap_or(Value::from(0)),
    );
    Ok(Some(Value::Object(out)))
}

/// pi-ai `contentText(content, separator)`: a string as is, or the `text` of the text blocks
/// joined by `separator`. Other values throw, as `content.filter` does in pi.
pub fn content_text(
    content: Option<&Value>,
    separator: &str,
    what: &str,
) -> Result<String, TypeError> {
    match content {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(blocks)) => {
            let mut parts = Vec::new();
            for block in blocks {
                if js::is_str(js::prop(block, "type", what)?, "text") {
                    parts.push(js::join_string(js::prop(block, "text", what)?));
                }
            }
            Ok(parts.join(separator))
        }
        _ => Err(TypeError(format!("{what} has no filter method"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn estimates_match_pi_rules() {
        let user = json!({"role": "user", "content": [{"type": "text", "text": "héllo 🚀"}, {"type": "image"}]});
        // 8 UTF-16 units + 4800 → ceil(4808 / 4)
        assert_eq!(estimate_tokens(&user), Ok(1202.0));
        let assistant = json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "abcd"},
            {"type": "toolCall", "name": "read", "arguments": {"path": "a"}}]});
        // 4 + 4 + len('{"path":"a"}') = 12 → 20 / 4
        assert_eq!(estimate_tokens(&assistant), Ok(5.0));
        assert_eq!(estimate_tokens(&json!({"role": "notification"})), Ok(0.0));
        assert!(estimate_tokens(&json!({"role": "custom", "content": null})).is_err());
        let odd =
            estimate_tokens(&json!({"role": "user", "content": [{"type": "text", "text": 5}]}));
        assert!(odd.is_ok_and(f64::is_nan));
    }

    #[test]
    fn usage_rules() {
        let m = json!({"role": "assistant", "content": [], "stopReason": "stop",
                       "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}});
        assert_eq!(
            assistant_usage(&m)
                .ok()
                .flatten()
                .map(calculate_context_tokens),
            Some(Ok(15.0))
        );
        let aborted =
            json!({"role": "assistant", "stopReason": "aborted", "usage": {"totalTokens": 9}});
        assert_eq!(assistant_usage(&aborted), Ok(None));
    }
}
