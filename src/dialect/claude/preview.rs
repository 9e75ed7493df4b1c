//! Claude Code lines shown to a person: the type column (a `system` line by its subtype, a
//! user line holding tool results as `tool_result`), compact boundaries and summaries as
//! landmarks, subagent sidechains apart, and a one-line preview of each line. Pure.

use serde_json::Value;

use crate::core::describe::{Describe, Mark};
use crate::core::preview::one_line;
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::format::{Entry, Kind};

impl Describe for Entry {
    fn type_name(&self) -> &str {
        self.kind.type_name()
    }

    fn role(&self) -> Option<&str> {
        match self.kind {
            Kind::User { .. } => Some("user"),
            Kind::Assistant { .. } => Some("assistant"),
            _ => None,
        }
    }

    fn kind_name(&self) -> &str {
        match &self.kind {
            Kind::User {
                tool_result: true, ..
            } => "tool_result",
            Kind::System { subtype, .. } if !subtype.is_empty() => subtype,
            k => k.type_name(),
        }
    }

    fn landmark(&self) -> bool {
        match &self.kind {
            Kind::System { .. } => self.kind.is_compact_boundary(),
            Kind::User {
                compact_summary, ..
            } => *compact_summary,
            _ => false,
        }
    }

    fn apart(&self) -> bool {
        self.sidechain
    }

    fn continues(&self) -> Option<&str> {
        match &self.kind {
            Kind::System {
                logical_parent: Some(p),
                ..
            } => Some(p.as_str()),
            _ => None,
        }
    }

    fn mark(&self) -> Option<Mark> {
        match &self.kind {
            k if k.is_compact_boundary() => Some(Mark::Compaction),
            Kind::User {
                compact_summary: true,
                ..
            } => Some(Mark::Summary),
            _ => None,
        }
    }

    fn preview_value(&self, line: &Value) -> String {
        line_preview(line)
    }

    fn default_leaf(tree: &Tree) -> Option<NodeIdx> {
        crate::dialect::claude::default_leaf(tree)
    }
}

/// A one-line preview of a parsed transcript line (tree or bookkeeping).
pub fn line_preview(line: &Value) -> String {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    let text = match line.get("type").and_then(Value::as_str).unwrap_or("") {
        "user" | "assistant" => {
            let prefix = if line.get("isCompactSummary") == Some(&Value::Bool(true)) {
                "[compact summary] "
            } else {
                ""
            };
            format!(
                "{prefix}{}",
                content_text(line.get("message").and_then(|m| m.get("content")))
            )
        }
        "attachment" => {
            let a = line.get("attachment");
            format!("[{}]", s(a.and_then(|a| a.get("type"))))
        }
        "system" => {
            let subtype = s(line.get("subtype"));
            match subtype.as_str() {
                "compact_boundary" => {
                    let meta = line.get("compactMetadata");
                    let trigger = s(meta.and_then(|m| m.get("trigger")));
                    let tokens = meta
                        .and_then(|m| m.get("preTokens"))
                        .and_then(Value::as_u64)
                        .map_or(String::new(), |t| format!(", {t} tokens before"));
                    format!("compact boundary ({trigger}{tokens})")
                }
                _ => match line.get("content") {
                    Some(Value::String(c)) => c.clone(),
                    _ => subtype,
                },
            }
        }
        "last-prompt" => s(line.get("lastPrompt")),
        "summary" => s(line.get("summary")),
        "queue-operation" => {
            format!("{} {}", s(line.get("operation")), s(line.get("content")))
        }
        _ => String::new(),
    };
    one_line(&text)
}

/// A one-line preview of a message's `content` (a string, or blocks each in a few words), as a
/// user or assistant line holding it is previewed ([`line_preview`]) without its prefix.
pub fn content_preview(content: Option<&Value>) -> String {
    one_line(&content_text(content))
}

/// The text of a message's content: a string, or its blocks (text, thinking, tool calls and
/// results, images) each in a few words.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(block_text)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn block_text(block: &Value) -> String {
    let s = |k: &str| {
        block
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    match block.get("type").and_then(Value::as_str).unwrap_or("") {
        "text" => s("text"),
        "thinking" => format!("(thinking) {}", s("thinking")),
        "redacted_thinking" => "(redacted thinking)".to_owned(),
        "tool_use" => format!(
            "{}({})",
            s("name"),
            block.get("input").map_or(String::new(), Value::to_string)
        ),
        "tool_result" => format!("→ {}", content_text(block.get("content"))),
        "image" => "[image]".to_owned(),
        other => format!("[{other}]"),
    }
}
