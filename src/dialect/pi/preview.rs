//! One-line previews of entries for trees and listings. Pure: takes the entry's line.
//!
//! Lines are read with [`jsstr::parse_value`] (JSON.parse), so a lone surrogate in the text stays
//! in the preview as the one character it is (written back as its escape on output).

use serde_json::Value;

use crate::core::describe::{Describe, Mark};
pub use crate::core::preview::{PREVIEW_CHARS, one_line};
use crate::dialect::pi::format::{Entry, EntryKind};
use crate::js::jsstr;

/// pi's entries shown to a person: a message's role or the entry type, compactions, branch
/// summaries and names as landmarks, and [`preview`] of the line.
impl Describe for Entry {
    fn type_name(&self) -> &str {
        self.kind.type_name()
    }

    fn role(&self) -> Option<&str> {
        self.kind.role().map(|r| r.as_str())
    }

    fn kind_name(&self) -> &str {
        match &self.kind {
            EntryKind::Message(m) => m.role.as_str(),
            k => k.type_name(),
        }
    }

    fn landmark(&self) -> bool {
        matches!(
            self.kind,
            EntryKind::Compaction { .. }
                | EntryKind::BranchSummary { .. }
                | EntryKind::SessionInfo { .. }
        )
    }

    fn mark(&self) -> Option<Mark> {
        match self.kind {
            EntryKind::Compaction { .. } => Some(Mark::Compaction),
            EntryKind::BranchSummary { .. } => Some(Mark::Summary),
            _ => None,
        }
    }

    fn preview_value(&self, line: &Value) -> String {
        entry_preview(line)
    }
}

/// A one-line, human-readable summary of an entry line (at most [`PREVIEW_CHARS`] characters).
/// Unknown shapes give an empty string, never an error.
pub fn preview(line: &[u8]) -> String {
    jsstr::parse_value(line)
        .map(|v| entry_preview(&v))
        .unwrap_or_default()
}

/// [`preview`] of an already parsed entry.
pub fn entry_preview(entry: &Value) -> String {
    let Value::Object(e) = entry else {
        return String::new();
    };
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    let text = match e.get("type").and_then(Value::as_str).unwrap_or("") {
        "message" => {
            let m = e.get("message");
            let role = m
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                .unwrap_or("");
            match role {
                "bashExecution" => format!("$ {}", s(m.and_then(|m| m.get("command")))),
                _ => content_or_holding(m),
            }
        }
        "custom_message" => content_text(e.get("content")),
        "branch_summary" | "compaction" => s(e.get("summary")),
        "model_change" => format!("{}/{}", s(e.get("provider")), s(e.get("modelId"))),
        "thinking_level_change" => format!("thinking: {}", s(e.get("thinkingLevel"))),
        "label" => format!("label {} → {}", s(e.get("targetId")), s(e.get("label"))),
        "session_info" => format!("name: {}", s(e.get("name"))),
        "context_edit" => match e.get("replacement") {
            Some(Value::Object(_)) => format!("replace content of {}", s(e.get("targetId"))),
            _ => format!("omit {}", s(e.get("targetId"))),
        },
        "custom" => s(e.get("customType")),
        _ => String::new(),
    };
    one_line(&text)
}

/// A one-line summary of a projected message (any role, including pi's summary roles).
pub fn message_preview(message: &Value) -> String {
    let text = match message.get("role").and_then(Value::as_str) {
        Some("branchSummary" | "compactionSummary") => message
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        Some("bashExecution") => format!(
            "$ {}",
            message.get("command").and_then(Value::as_str).unwrap_or("")
        ),
        _ => content_or_holding(Some(message)),
    };
    one_line(&text)
}

/// A message's text ([`content_text`]), or, when it has none, what it holds instead: its
/// thinking (`(thinking) …`), else `(no content)` with why when the message says (an aborted
/// or failed turn: `stopReason`, `errorMessage`). A preview is never blank for a message.
fn content_or_holding(message: Option<&Value>) -> String {
    let text = content_text(message.and_then(|m| m.get("content")));
    if !text.trim().is_empty() {
        return text;
    }
    let field = |k: &str| message.and_then(|m| m.get(k)).and_then(Value::as_str);
    let blocks = message
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array);
    let thinking = blocks.into_iter().flatten().find_map(|b| {
        (b.get("type").and_then(Value::as_str) == Some("thinking")).then(|| {
            b.get("thinking")
                .and_then(Value::as_str)
                .filter(|t| !t.trim().is_empty())
                .map_or("(thinking, redacted)".to_owned(), |t| {
                    format!("(thinking) {t}")
                })
        })
    });
    if let Some(t) = thinking {
        return t;
    }
    let mut out = "(no content".to_owned();
    if let Some(reason) = field("stopReason").filter(|r| *r != "stop") {
        out.push_str(&format!(", {reason}"));
    }
    if let Some(error) = field("errorMessage").filter(|e| !e.trim().is_empty()) {
        out.push_str(&format!(": {error}"));
    }
    out.push(')');
    out
}

/// The first text of a message content (a string or an array of blocks); tool calls show
/// as `name(…)`, images as `[image]`.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(blocks)) => {
            let parts: Vec<String> = blocks
                .iter()
                .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b.get("text").and_then(Value::as_str).map(str::to_owned),
                    Some("toolCall") => Some(format!(
                        "{}(…)",
                        b.get("name").and_then(Value::as_str).unwrap_or("tool")
                    )),
                    Some("image") => Some("[image]".to_owned()),
                    _ => None,
                })
                .filter(|t| !t.trim().is_empty())
                .collect();
            parts.join(" ")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_message_without_text_says_what_it_holds() {
        let aborted = br#"{"type":"message","message":{"role":"assistant","content":[],"stopReason":"aborted","errorMessage":"Request was aborted"}}"#;
        assert_eq!(
            preview(aborted),
            "(no content, aborted: Request was aborted)"
        );
        let thinking = br#"{"type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"Plan  the\nsteps"}]}}"#;
        assert_eq!(preview(thinking), "(thinking) Plan the steps");
        let redacted = br#"{"type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"","redacted":true}],"stopReason":"stop"}}"#;
        assert_eq!(preview(redacted), "(thinking, redacted)");
        let empty = br#"{"type":"message","message":{"role":"toolResult","content":[]}}"#;
        assert_eq!(preview(empty), "(no content)");
        let message = serde_json::json!({"role": "user", "content": ""});
        assert_eq!(message_preview(&message), "(no content)");
        // Text wins; tool calls are text enough.
        let call = br#"{"type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"toolCall","name":"read"}]}}"#;
        assert_eq!(preview(call), "read(…)");
    }

    #[test]
    fn lone_surrogates_are_previewed_like_any_text() {
        let line = br#"{"type":"session_info","name":"fix \ud83d"}"#;
        assert_eq!(jsstr::restore_json(&preview(line)), r"name: fix \ud83d");
        let line = br#"{"type":"message","message":{"role":"user","content":"x \ude80"}}"#;
        assert_eq!(jsstr::restore_json(&preview(line)), r"x \ude80");
        // Cut at the limit without splitting the pair that holds a lone surrogate.
        let long = format!(
            r#"{{"type":"custom_message","content":"{}\ud83dbb"}}"#,
            "a".repeat(PREVIEW_CHARS - 2)
        );
        let p = preview(long.as_bytes());
        assert!(jsstr::restore_json(&p).ends_with(r"\ud83d…"), "{p}");
    }

    /// Previews as JavaScript counts code points (`[...s].length`).
    fn js_len(s: &str) -> usize {
        jsstr::code_points(s).count()
    }

    #[test]
    fn previews_are_at_most_80_code_points() {
        let session_info = |name: &str| preview(json_line("session_info", "name", name).as_bytes());
        // Exactly 80 stays whole; 81 is cut to 79 and an ellipsis.
        let eighty = format!("name: {}", "x".repeat(PREVIEW_CHARS - 6));
        assert_eq!(session_info(&eighty[6..]), eighty);
        let long = session_info(&"y".repeat(PREVIEW_CHARS));
        assert_eq!(js_len(&long), PREVIEW_CHARS);
        assert!(long.ends_with('…'));
        // A word that ends right at the limit, then a space: the cut never overshoots.
        for n in 70..90 {
            let text = format!("{} next words follow here", "w".repeat(n));
            let p = session_info(&text);
            assert!(js_len(&p) <= PREVIEW_CHARS, "{n}: {} {p}", js_len(&p));
            assert!(!p.ends_with(" …"), "{n}: {p}");
        }
        // Astral characters count once each (they are two UTF-16 units).
        let emoji = session_info(&"😀".repeat(100));
        assert_eq!(js_len(&emoji), PREVIEW_CHARS);
        assert_eq!(emoji.chars().count(), PREVIEW_CHARS);
    }

    fn json_line(kind: &str, key: &str, value: &str) -> String {
        serde_json::json!({"type": kind, key: value}).to_string()
    }
}
