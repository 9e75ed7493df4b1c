//! Codex rollout lines shown to a person: the type column (a response item by its item type or
//! a message's role, an event by its event type), compactions as landmarks, and a one-line
//! preview of each line. Pure.

use serde_json::Value;

use crate::core::describe::{Describe, Mark};
use crate::core::preview::one_line;
use crate::dialect::codex::format::{Entry, Kind};

impl Describe for Entry {
    fn type_name(&self) -> &str {
        self.kind.type_name()
    }

    fn role(&self) -> Option<&str> {
        match &self.kind {
            Kind::ResponseItem { role, .. } => role.as_deref(),
            _ => None,
        }
    }

    fn kind_name(&self) -> &str {
        match &self.kind {
            Kind::ResponseItem {
                role: Some(role), ..
            } => role,
            Kind::ResponseItem { item, .. } if !item.is_empty() => item,
            Kind::EventMsg { event } if !event.is_empty() => event,
            k => k.type_name(),
        }
    }

    fn landmark(&self) -> bool {
        matches!(
            &self.kind,
            Kind::Compacted | Kind::SessionMeta | Kind::Other(_)
        ) || matches!(&self.kind, Kind::EventMsg { event } if event == "thread_rolled_back")
    }

    fn mark(&self) -> Option<Mark> {
        match &self.kind {
            Kind::Compacted => Some(Mark::Compaction),
            _ => None,
        }
    }

    fn preview_value(&self, line: &Value) -> String {
        line_preview(line)
    }
}

/// The text of a message's content parts (`input_text`, `output_text`, …), joined.
pub fn content_text(item: &Value) -> String {
    match item.get("content") {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// A one-line preview of a parsed rollout line.
pub fn line_preview(line: &Value) -> String {
    let payload = line.get("payload").unwrap_or(&Value::Null);
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    let text = match line.get("type").and_then(Value::as_str).unwrap_or("") {
        "session_meta" => {
            let mut t = format!("thread {}", s(payload.get("id")));
            if let Some(f) = payload.get("forked_from_id").and_then(Value::as_str) {
                t.push_str(&format!(" · forked from {f}"));
            }
            if let Some(b) = payload.get("history_base") {
                t.push_str(&format!(
                    " · prefix of {} before ordinal {}",
                    s(b.get("thread_id")),
                    b.get("end_ordinal_exclusive").unwrap_or(&Value::Null)
                ));
            }
            t
        }
        "response_item" => match payload.get("type").and_then(Value::as_str).unwrap_or("") {
            "message" => content_text(payload),
            "function_call" | "custom_tool_call" => format!(
                "{}({})",
                s(payload.get("name")),
                payload
                    .get("arguments")
                    .or_else(|| payload.get("input"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
            "function_call_output" | "custom_tool_call_output" => match payload.get("output") {
                Some(Value::String(o)) => o.clone(),
                Some(o) => o.to_string(),
                None => String::new(),
            },
            other => other.to_owned(),
        },
        "event_msg" => {
            let ev = s(payload.get("type"));
            match ev.as_str() {
                "thread_rolled_back" => format!(
                    "rolled back {} turn(s)",
                    payload.get("num_turns").unwrap_or(&Value::Null)
                ),
                "user_message" | "agent_message" => s(payload.get("message")),
                _ => String::new(),
            }
        }
        "compacted" => s(payload.get("message")),
        "turn_context" => s(payload.get("model")),
        _ => String::new(),
    };
    one_line(&text)
}
