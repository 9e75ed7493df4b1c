//! What an `attachment` line renders to in a request, as Claude Code 2.1.197 renders it
//! (docs/claude-code.md §8.2, *source* `Ctr`, normalizeAttachmentForAPI): user messages whose
//! text is wrapped in `<system-reminder>` tags. Only the types whose text is known are
//! rendered; any other type is [`Rendering::Unknown`], never guessed. Pure: no I/O.

use serde_json::Value;

use crate::js::value::{join_string, template_string, truthy};

/// Attachment types Claude Code drops when it loads a transcript for a resume (*source*
/// `nof`/`tof`, the resume filter 2 of §7.3).
pub const DROPPED_ON_LOAD: [&str; 6] = [
    "compaction_reminder",
    "companion_intro",
    "echo_activities",
    "pen_mode_enter",
    "pen_mode_exit",
    "verify_plan_reminder",
];

/// Attachment types that render to nothing (the tail of `Ctr`).
pub const SILENT: [&str; 14] = [
    "autocheckpointing",
    "background_task_status",
    "todo",
    "task_progress",
    "ultramemory",
    "compaction_reminder",
    "current_session_memory",
    "thinking_reminder",
    "companion_intro",
    "pen_mode_enter",
    "pen_mode_exit",
    "ultrawork_request",
    "echo_activities",
    "verify_plan_reminder",
];

const AMBIENT: &str = "This is ambient context \u{2014} do not narrate it to the user unless they ask or it is directly relevant to their request.";

const TASK_REMINDER: &str = "The task tools haven't been used recently. If you're working on tasks that would benefit from tracking progress, consider using TaskCreate to add new tasks and TaskUpdate to update task status (set to in_progress when starting, completed when done). Also consider cleaning up the task list if it has become stale. Only use these if relevant to the current work. This is just a gentle reminder - ignore if not applicable.\n";

const TODO_REMINDER: &str = "The TodoWrite tool hasn't been used recently. If you're working on tasks that would benefit from tracking progress, consider using the TodoWrite tool to track progress. Also consider cleaning up the todo list if has become stale and no longer matches what you are working on. Only use it if it's relevant to the current work. This is just a gentle reminder - ignore if not applicable.\n";

/// What an attachment renders to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendering {
    /// User messages (`isMeta`), each a string content already wrapped in `<system-reminder>`
    /// tags; none for a type that renders to nothing.
    Messages(Vec<String>),
    /// A type sessiond does not know the rendering of.
    Unknown,
}

/// `mw`: the `<system-reminder>` wrapper.
pub fn reminder(text: &str) -> String {
    format!("<system-reminder>\n{text}\n</system-reminder>")
}

/// `M8o`: the text inside a `<system-reminder>` wrapper
/// (`/^<system-reminder>\n?([\s\S]*?)\n?<\/system-reminder>$/`), or the text itself.
pub fn unwrap(text: &str) -> &str {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    if text.len() < OPEN.len() + CLOSE.len() || !text.starts_with(OPEN) || !text.ends_with(CLOSE) {
        return text;
    }
    let inner = &text[OPEN.len()..text.len() - CLOSE.len()];
    let inner = inner.strip_prefix('\n').unwrap_or(inner);
    inner.strip_suffix('\n').unwrap_or(inner)
}

/// The array at `key`, or nothing.
fn items<'a>(a: &'a Value, key: &str) -> &'a [Value] {
    a.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `${item.key}`.
fn field(item: &Value, key: &str) -> String {
    template_string(item.get(key))
}

/// Renders one attachment object (`attachment` of the line) as Claude Code 2.1.197 does
/// (§8.2): the exact texts of the types it knows, [`Rendering::Unknown`] for any other.
pub fn render(a: &Value) -> Rendering {
    let ty = a.get("type").and_then(Value::as_str).unwrap_or("");
    let text = match ty {
        "agent_listing_delta" => {
            let mut parts = Vec::new();
            let added = items(a, "addedLines");
            if !added.is_empty() {
                let head = if truthy(a.get("isInitial")) {
                    "Available agent types for the Agent tool:"
                } else {
                    "New agent types are now available for the Agent tool:"
                };
                let lines: Vec<String> = added.iter().map(|l| join_string(Some(l))).collect();
                parts.push(format!("{head}\n{}", lines.join("\n")));
            }
            let removed = items(a, "removedTypes");
            if !removed.is_empty() {
                let lines: Vec<String> = removed
                    .iter()
                    .map(|r| format!("- {}", template_string(Some(r))))
                    .collect();
                parts.push(format!(
                    "The following agent types are no longer available:\n{}",
                    lines.join("\n")
                ));
                parts.push(AMBIENT.to_owned());
            }
            if truthy(a.get("isInitial")) && truthy(a.get("showConcurrencyNote")) {
                parts.push("When you launch multiple agents for independent work, send them in a single message with multiple tool uses so they run concurrently.".to_owned());
            }
            parts.join("\n\n")
        }
        "skill_listing" => {
            if !truthy(a.get("content")) {
                return Rendering::Messages(Vec::new());
            }
            format!(
                "The following skills are available for use with the Skill tool:\n\n{}",
                template_string(a.get("content"))
            )
        }
        "task_reminder" => {
            // Only while the task tools are on (not CLAUDE_CODE_ENABLE_TASKS=0/false), the default.
            let lines: Vec<String> = items(a, "content")
                .iter()
                .map(|i| {
                    format!(
                        "#{}. [{}] {}",
                        field(i, "id"),
                        field(i, "status"),
                        field(i, "subject")
                    )
                })
                .collect();
            let mut text = TASK_REMINDER.to_owned();
            if !lines.is_empty() {
                text.push_str("\n\nHere are the existing tasks:\n\n");
                text.push_str(&lines.join("\n"));
            }
            text
        }
        "todo_reminder" => {
            let lines: Vec<String> = items(a, "content")
                .iter()
                .enumerate()
                .map(|(k, i)| {
                    format!(
                        "{}. [{}] {}",
                        k + 1,
                        field(i, "status"),
                        field(i, "content")
                    )
                })
                .collect();
            let mut text = TODO_REMINDER.to_owned();
            if !lines.is_empty() {
                text.push_str("\n\nHere are the existing contents of your todo list:\n\n[");
                text.push_str(&lines.join("\n"));
                text.push(']');
            }
            text
        }
        t if SILENT.contains(&t) => return Rendering::Messages(Vec::new()),
        _ => return Rendering::Unknown,
    };
    Rendering::Messages(vec![reminder(&text)])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renderings_and_the_wrapper() {
        let agents = json!({"type": "agent_listing_delta", "addedTypes": ["a"], "addedLines": ["- a: x", "- b: y"], "removedTypes": [], "isInitial": true, "showConcurrencyNote": true});
        assert_eq!(
            render(&agents),
            Rendering::Messages(vec![reminder(
                "Available agent types for the Agent tool:\n- a: x\n- b: y\n\nWhen you launch multiple agents for independent work, send them in a single message with multiple tool uses so they run concurrently."
            )])
        );
        let removed = json!({"type": "agent_listing_delta", "addedLines": [], "removedTypes": ["old"], "isInitial": false});
        assert_eq!(
            render(&removed),
            Rendering::Messages(vec![reminder(&format!(
                "The following agent types are no longer available:\n- old\n\n{AMBIENT}"
            ))])
        );
        let skills = json!({"type": "skill_listing", "content": "- s: t"});
        assert_eq!(
            render(&skills),
            Rendering::Messages(vec![reminder(
                "The following skills are available for use with the Skill tool:\n\n- s: t"
            )])
        );
        assert_eq!(
            render(&json!({"type": "skill_listing", "content": ""})),
            Rendering::Messages(vec![])
        );
        let tasks = json!({"type": "task_reminder", "content": [{"id": 1, "status": "pending", "subject": "x"}], "itemCount": 1});
        let Rendering::Messages(m) = render(&tasks) else {
            panic!("task_reminder renders")
        };
        assert!(
            m[0].ends_with(
                "\n\nHere are the existing tasks:\n\n#1. [pending] x\n</system-reminder>"
            )
        );
        assert_eq!(
            render(&json!({"type": "todo"})),
            Rendering::Messages(vec![])
        );
        assert_eq!(render(&json!({"type": "file"})), Rendering::Unknown);
        assert_eq!(render(&json!({})), Rendering::Unknown);
        assert_eq!(unwrap(&reminder("a\nb")), "a\nb");
        assert_eq!(unwrap("<system-reminder>x</system-reminder>"), "x");
        assert_eq!(unwrap("<system-reminder>\n\n</system-reminder>"), "");
        assert_eq!(unwrap("plain"), "plain");
        assert_eq!(unwrap("<system-reminder>"), "<system-reminder>");
    }
}
