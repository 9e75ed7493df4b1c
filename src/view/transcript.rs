//! What both front doors print of a Claude Code transcript at a leaf: the context document
//! (`sessiond context --json`, `session/contextAt`) and the request options a leaf's context
//! is computed for.

use serde_json::{Value, json};

use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::context::{Context, ContextOptions};
use crate::storage::lines::TornTail;
use crate::view::convert;

/// The options of the request a context is for: `model` (the request's model; absent: the
/// session's, as Claude Code resumes).
pub fn options(model: Option<&str>) -> ContextOptions {
    ContextOptions {
        model: model.map(str::to_owned),
        ..ContextOptions::default()
    }
}

/// The context document of a transcript at a leaf: `{format: "claude-code", sessionId, leafId,
/// continuesAfterId, messages, entryIds, messageEntryIds, model, midConversationSystem, readAs,
/// sendTime, notRendered, dropped, diagnostics, tornTail}`. `messages` are exactly what Claude
/// Code sends (as it resumes at the leaf, docs/claude-code.md §7), less what it adds at send time,
/// which `sendTime` lists.
pub fn context_document(
    session_id: Option<String>,
    tree: &Tree,
    torn_tail: Option<TornTail>,
    ctx: &Context,
) -> Value {
    let id = |n: NodeIdx| tree.node(n).entry.id.as_str();
    let dropped: Vec<Value> = ctx
        .dropped
        .iter()
        .map(|(n, why)| json!({"id": id(*n), "line": tree.node(*n).entry.span.line, "why": why}))
        .collect();
    let message_entry_ids: Vec<Vec<&str>> = ctx
        .sources
        .iter()
        .map(|s| s.iter().map(|&n| id(n)).collect())
        .collect();
    json!({
        "format": "claude-code",
        "sessionId": session_id,
        "leafId": id(ctx.leaf),
        "continuesAfterId": id(ctx.continues_after),
        "messages": ctx.messages,
        "entryIds": ctx.entry_ids,
        "messageEntryIds": message_entry_ids,
        "model": ctx.model,
        "midConversationSystem": ctx.mid_conversation_system,
        "readAs": ctx.read_as,
        "sendTime": ctx.send_time,
        "notRendered": ctx.not_rendered,
        "dropped": dropped,
        "diagnostics": tree.diagnostics(),
        "tornTail": torn_tail.map(convert::torn_tail),
    })
}
