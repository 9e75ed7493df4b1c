//! What a listing shows of a Codex rollout ([`Overview`]): the thread id, working directory and
//! creation time from its `session_meta`, the first prompt (the first user message that is not
//! context Codex wrote itself), and the count of message items. Reads only the lines it needs
//! through a [`LineSource`].

use serde_json::Value;

use crate::core::overview::Overview;
use crate::core::preview::one_line;
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::dialect::codex::Tree;
use crate::dialect::codex::format::Kind;

/// The listing facts of the rollout `tree`, whose lines `lines` reads.
pub fn overview(tree: &Tree, lines: &dyn LineSource) -> Overview {
    let parse = |n: &crate::dialect::codex::format::Entry| -> Option<Value> {
        serde_json::from_slice(&lines.line(n.span).ok()?).ok()
    };
    let meta = tree
        .nodes()
        .iter()
        .find(|n| n.entry.kind == Kind::SessionMeta)
        .and_then(|n| parse(&n.entry))
        .and_then(|v| v.get("payload").cloned())
        .unwrap_or(Value::Null);
    let is_message = |k: &Kind| matches!(k, Kind::ResponseItem { item, .. } if item == "message");
    let first_message = tree
        .nodes()
        .iter()
        .filter(
            |n| matches!(&n.entry.kind, Kind::ResponseItem { role: Some(r), .. } if r == "user"),
        )
        .filter_map(|n| parse(&n.entry)?.get("payload").cloned())
        .find(super::replay::is_user_turn_boundary)
        .map(|p| one_line(&super::preview::content_text(&p)));
    Overview {
        id: meta
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        cwd: meta.get("cwd").and_then(Value::as_str).map(str::to_owned),
        created: meta.get("timestamp").cloned().unwrap_or(Value::Null),
        name: None,
        first_message,
        message_count: tree
            .nodes()
            .iter()
            .filter(|n| is_message(&n.entry.kind))
            .count(),
        default_leaf: (!tree.is_empty()).then(|| (tree.len() - 1) as NodeIdx),
        tokens: None,
    }
}
