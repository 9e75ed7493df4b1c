//! Two leaves of a Codex thread compared ([`crate::core::compare`]): a rollout is linear, so
//! its branches are the thread's other files — a fork, a revert segment — and two leaves part
//! where one file's prefix ends ([`super::thread::Thread`]'s tree). What each leaf sends is
//! Codex's replay there ([`super::context::Replay`]); a line sent at one leaf and not at the
//! other is listed with why not, in `explain`'s vocabulary (`replacedByCompaction`,
//! `reverted`, `orphanOutput`, `eventOnly`) or `notInHistory` (the line is not in the other
//! leaf's history at all: its side of the fork, or after the other leaf). A line sent at both
//! is sent the same way (Codex sends a stored item as stored), so nothing is ever "changed".
//!
//! The counts of a side are over its lines after the fork point: user turns (user messages
//! that are not context Codex wrote itself — `<environment_context>`, `<turn_aborted>`, …),
//! assistant messages, tool calls by name (`function_call`, `custom_tool_call`,
//! `local_shell_call`), the model changes (`turn_context.model`); its tokens are Codex's own
//! count at the leaf, the `usage.input_tokens + usage.output_tokens` of the last
//! `token_usage_record` on its path. The files changed are those of the side's `apply_patch`
//! calls whose output on the side reports success ([`verify::reports_success`]): every file a
//! patch adds, updates, moves to or deletes ([`verify::patch_paths`], the patch read as
//! `verify` reads it), a relative path resolved against the working directory at the leaf
//! (the last `turn_context` or `session_meta` `cwd` on its path, as `verify` takes it), in
//! first-touch order. Shell commands are not parsed for the files they write. Reads the
//! thread's lines through [`LineSource`]; the replays read the chain's files.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::core::compare::{
    self, Comparison, ContextDifference, Differ, SettingChange, Side, Sides,
};
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::dialect::codex::format::Kind;
use crate::dialect::codex::lineage::LineageError;
use crate::dialect::codex::replay::Fate;
use crate::dialect::codex::thread::Thread;
use crate::dialect::codex::verify;

/// Why a line sent at one leaf is not sent at the other (`session/compareBranches`' reason).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reason {
    /// `notInHistory`, `replacedByCompaction`, `reverted`, `orphanOutput` or `eventOnly`.
    pub kind: &'static str,
    /// The line that decided it (a compaction, a rollback marker), by id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// What Codex writes itself into user messages (context, not a user's turn).
pub const CONTEXT_OPENINGS: [&str; 8] = [
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
    "<user_shell_command>",
    "<subagent_notification>",
    "<skill>",
    "<hook_prompt",
];

/// Each record node of the replay at `leaf` with its fate; and the nodes sent there, in order.
#[allow(clippy::type_complexity)]
fn fates(
    thread: &Thread,
    leaf: NodeIdx,
) -> Result<(HashMap<NodeIdx, Fate>, Vec<NodeIdx>, Vec<Option<NodeIdx>>), LineageError> {
    let r = thread.replay_at(leaf)?;
    let nodes = thread.record_nodes(&r);
    let mut by_node = HashMap::new();
    let mut sent = Vec::new();
    let live = crate::dialect::codex::thread::sent_records(&r);
    for ((n, f), live) in nodes.iter().zip(&r.replayed.fates).zip(live) {
        if let Some(n) = *n {
            by_node.insert(n, *f);
            if live {
                sent.push(n);
            }
        }
    }
    Ok((by_node, sent, nodes))
}

/// Compares leaves `a` and `b` of `thread` (see the module docs), lines read through
/// `lines`. Errors: a chain of files that cannot be resolved.
pub fn compare(
    thread: &Thread,
    lines: &dyn LineSource,
    a: NodeIdx,
    b: NodeIdx,
) -> Result<Comparison<Reason>, LineageError> {
    let tree = &thread.tree;
    let (fates_a, sent_a, records_a) = fates(thread, a)?;
    let (fates_b, sent_b, records_b) = fates(thread, b)?;
    let path_a = tree.path_to(Some(a));
    let path_b = tree.path_to(Some(b));
    let fork = compare::fork(&path_a, &path_b);
    let sides = Sides::new(&fork);
    let id = |n: NodeIdx| tree.node(n).entry.id.clone();
    let set_a: HashSet<NodeIdx> = sent_a.iter().copied().collect();
    let set_b: HashSet<NodeIdx> = sent_b.iter().copied().collect();
    let record_at = |records: &[Option<NodeIdx>], k: usize| records.get(k).copied().flatten();
    let only = |here: &[NodeIdx],
                there: &HashSet<NodeIdx>,
                there_fates: &HashMap<NodeIdx, Fate>,
                there_records: &[Option<NodeIdx>],
                there_name: &str| {
        here.iter()
            .filter(|n| !there.contains(n))
            .map(|&n| {
                let (kind, by, text) = match there_fates.get(&n) {
                    None => (
                        "notInHistory",
                        None,
                        format!("not in the history at {there_name}: {}", sides.of(n)),
                    ),
                    Some(Fate::Compacted(k)) => {
                        let by = record_at(there_records, *k);
                        (
                            "replacedByCompaction",
                            by,
                            format!(
                                "replaced by compaction {}, {}",
                                by.map_or("?".into(), |b| id(b).to_string()),
                                by.map_or("", |b| sides.of(b))
                            ),
                        )
                    }
                    Some(Fate::RolledBack(k)) => {
                        let by = record_at(there_records, *k);
                        (
                            "reverted",
                            by,
                            format!(
                                "reverted by the rollback marker {}, {}",
                                by.map_or("?".into(), |b| id(b).to_string()),
                                by.map_or("", |b| sides.of(b))
                            ),
                        )
                    }
                    Some(Fate::Orphan) => (
                        "orphanOutput",
                        None,
                        format!("an output without its call at {there_name}"),
                    ),
                    Some(_) => ("eventOnly", None, format!("not sent at {there_name}")),
                };
                let e = &tree.node(n).entry;
                ContextDifference {
                    id: e.id.clone(),
                    entry_type: e.kind.type_name().to_owned(),
                    role: match &e.kind {
                        Kind::ResponseItem { role, .. } => role.as_ref().map(|r| r.to_string()),
                        _ => None,
                    },
                    reason: Reason {
                        kind,
                        by: by.map(|b| id(b).to_string()),
                    },
                    text,
                }
            })
            .collect::<Vec<_>>()
    };
    let context_only_a = only(&sent_a, &set_b, &fates_b, &records_b, "B");
    let context_only_b = only(&sent_b, &set_a, &fates_a, &records_a, "A");
    let common = sent_a.iter().filter(|n| set_b.contains(n)).count();
    let (side_a, model_a) = side(thread, lines, &fork.only_a, &path_a);
    let (side_b, model_b) = side(thread, lines, &fork.only_b, &path_b);
    Ok(Comparison {
        side_a,
        side_b,
        context_only_a,
        context_only_b,
        context_common: common,
        model: (model_a != model_b).then(|| Differ {
            a: model_a.map_or(Value::Null, Value::String),
            b: model_b.map_or(Value::Null, Value::String),
        }),
        ..Comparison::parted(tree, lines, (a, b), &fork)
    })
}

/// The line of node `n`, parsed (`None`: unreadable).
fn value(thread: &Thread, lines: &dyn LineSource, n: NodeIdx) -> Option<Value> {
    let bytes = lines.line(thread.tree.node(n).entry.span).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The counts of one side (its lines after the fork point), and the model at its leaf.
fn side(
    thread: &Thread,
    lines: &dyn LineSource,
    only: &[NodeIdx],
    path: &[NodeIdx],
) -> (Side, Option<String>) {
    let tree = &thread.tree;
    let mut s = Side {
        entries: only.len(),
        ..Side::default()
    };
    let on_side: HashSet<NodeIdx> = only.iter().copied().collect();
    let mut model: Option<String> = None;
    let mut tokens = None;
    let mut cwd: Option<String> = None;
    // The side's patches (call id, the files), and its outputs that report success.
    let mut patches: Vec<(String, Vec<String>)> = Vec::new();
    let mut succeeded: HashSet<String> = HashSet::new();
    for &n in path {
        let e = &tree.node(n).entry;
        let mine = on_side.contains(&n);
        match &e.kind {
            Kind::SessionMeta => {
                if let Some(c) = value(thread, lines, n)
                    .and_then(|v| v.get("payload")?.get("cwd")?.as_str().map(str::to_owned))
                {
                    cwd = Some(c);
                }
            }
            Kind::TurnContext => {
                let v = value(thread, lines, n);
                let payload = v.as_ref().and_then(|v| v.get("payload"));
                if let Some(c) = payload.and_then(|p| p.get("cwd")?.as_str()) {
                    cwd = Some(c.to_owned());
                }
                let m = payload.and_then(|p| p.get("model")?.as_str().map(str::to_owned));
                if m.is_some() && m != model {
                    if mine {
                        s.setting_changes.push(SettingChange {
                            id: e.id.clone(),
                            setting: "model",
                            value: m.clone().map_or(Value::Null, Value::String),
                        });
                    }
                    model = m;
                }
            }
            Kind::TokenUsageRecord => {
                tokens = value(thread, lines, n).and_then(|v| {
                    let u = v.get("payload")?.get("usage")?;
                    Some(
                        u.get("input_tokens")?.as_u64()?
                            + u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
                    )
                });
            }
            Kind::ResponseItem { item, role } if mine => match (item.as_str(), role.as_deref()) {
                ("message", Some("assistant")) => s.assistant_messages += 1,
                ("message", Some("user")) => {
                    let text = value(thread, lines, n)
                        .and_then(|v| v.get("payload").map(super::preview::content_text))
                        .unwrap_or_default();
                    if !CONTEXT_OPENINGS.iter().any(|o| text.starts_with(o)) {
                        s.user_turns += 1;
                    }
                }
                ("function_call" | "custom_tool_call" | "local_shell_call", _) => {
                    let v = value(thread, lines, n);
                    let payload = v.as_ref().and_then(|v| v.get("payload"));
                    let name = payload
                        .and_then(|p| p.get("name")?.as_str().map(str::to_owned))
                        .unwrap_or_else(|| item.to_string());
                    if name == "apply_patch"
                        && let Some(p) = payload
                        && let Some(call) = p.get("call_id").and_then(Value::as_str)
                        && let Some((_, arguments)) = verify::call_of(p)
                        && let Some(patch) = verify::patch_of(&arguments)
                    {
                        patches.push((call.to_owned(), verify::patch_paths(patch)));
                    }
                    *s.tool_calls.entry(name).or_default() += 1;
                }
                ("function_call_output" | "custom_tool_call_output", _) if !patches.is_empty() => {
                    if let Some(p) = value(thread, lines, n).and_then(|v| v.get("payload").cloned())
                        && let Some(call) = p.get("call_id").and_then(Value::as_str)
                        && patches.iter().any(|(c, _)| c == call)
                        && verify::reports_success(&p)
                    {
                        succeeded.insert(call.to_owned());
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    for (call, paths) in patches {
        if !succeeded.contains(&call) {
            continue;
        }
        for p in paths {
            // As `verify` resolves it, against the working directory (an absolute one).
            let p = match cwd.as_deref().filter(|c| c.starts_with('/')) {
                Some(cwd) => crate::core::verify::resolve_path(&p, cwd, None),
                None => p,
            };
            if !s.files_changed.contains(&p) {
                s.files_changed.push(p);
            }
        }
    }
    s.token_estimate = tokens;
    (s, model)
}
