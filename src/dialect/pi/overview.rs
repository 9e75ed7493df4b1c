//! What pi 1.6.0's session picker shows of a session (`buildSessionInfo`), from its tree: the
//! header's id, cwd and timestamp, the name (`getSessionName`), the first user message, the
//! message count, and the token estimate of the context at the default leaf
//! (`estimateProjectedContextTokens`). Pure: message bodies are read through a
//! [`LineSource`].

use serde_json::Value;

use crate::core::overview::Overview;
use crate::core::preview::one_line;
use crate::core::source::LineSource;
use crate::dialect::pi::Tree;
use crate::dialect::pi::compaction::prepare;
use crate::dialect::pi::format::{EntryKind, Role};
use crate::dialect::pi::projection;
use crate::js::jsstr;

/// The overview of a pi session (see the module docs).
pub fn overview(tree: &Tree, lines: &dyn LineSource) -> Overview {
    let header = tree.header();
    Overview {
        id: header.id.clone(),
        cwd: header.cwd.clone(),
        created: jsstr::parse_value(header.raw.get().as_bytes())
            .ok()
            .and_then(|v| v.get("timestamp").cloned())
            .unwrap_or(Value::Null),
        name: tree.name().map(str::to_owned),
        first_message: first_user_message(tree, lines),
        message_count: tree
            .nodes()
            .iter()
            .filter(|n| matches!(n.entry.kind, EntryKind::Message(_)))
            .count(),
        default_leaf: tree.default_leaf(),
        tokens: prepare::context_tokens(
            tree,
            &projection::project_path(tree, tree.default_leaf()),
            lines,
        ),
    }
}

/// pi 1.6.0 `buildSessionInfo`'s `firstMessage`: the text of the first user message in file
/// order whose text (a string content, or its `text` blocks joined by a space) is not empty,
/// as one line of at most 80 code points ([`one_line`]). `None` when there is none (pi shows
/// "(no messages)").
fn first_user_message(tree: &Tree, lines: &dyn LineSource) -> Option<String> {
    for node in tree.nodes() {
        let EntryKind::Message(m) = &node.entry.kind else {
            continue;
        };
        if m.role != Role::User || m.content_missing {
            continue;
        }
        let Ok(bytes) = lines.line(node.entry.span) else {
            continue;
        };
        let Ok(value) = jsstr::parse_value(&bytes) else {
            continue;
        };
        let text = match value.get("message").and_then(|m| m.get("content")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .map(|b| match b.get("text") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" "),
            _ => continue,
        };
        if !text.is_empty() {
            return Some(one_line(&text));
        }
    }
    None
}
