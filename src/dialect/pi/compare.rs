//! Two leaves of a pi session compared ([`crate::core::compare`]): where their paths part, what
//! each side did after the fork point, and the difference of their contexts in `explain`'s
//! vocabulary. Built on [`projection`] and [`explain::Reasons`]; pure, lines read through
//! [`LineSource`].
//!
//! The context difference is over pi's context entries (`context`'s `entryIds`, pi's
//! `buildContextEntries`): an entry that is a context entry at one leaf and not at the other is
//! listed with the reason it is not at the other (after the fork point, summarized by a
//! compaction, a system message a kept range drops); one that is a context entry at both but
//! reaches the model differently (omitted or replaced by a context edit on one side, an older
//! compaction superseded on one side) is a change; the rest are common.
//!
//! The counts of a side are over its entries after the fork point: user and assistant
//! messages, tool calls by name, the files its `write` and `edit` calls changed (a call whose
//! result on the side reports success; the path read and resolved as `verify` reads it), and
//! its settings changes; its tokens are the context's at the leaf, as `list` counts them (pi's
//! `estimateProjectedContextTokens`).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::core::compare::{
    self, Comparison, ContextChange, ContextDifference, Differ, SettingChange, Side, Sides,
};
use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::compaction::prepare;
use crate::dialect::pi::explain::{Reason, Reasons};
use crate::dialect::pi::format::{EntryId, EntryKind, ModelRef, Role, SharedRaw};
use crate::dialect::pi::projection::{self, Projection};
use crate::dialect::pi::render::{LineSource, RenderError, content_blocks, line_value};
use crate::dialect::pi::verify;
use crate::js::jsstr;

/// Where file paths are resolved, as `verify` resolves them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'a> {
    /// The home directory (`~` in a path); `None`: left as written.
    pub home: Option<&'a str>,
}

/// Compares leaves `a` and `b` of `tree` (see the module docs). Errors: a line of a side that
/// cannot be read, or that changed since the tree was read.
pub fn compare(
    tree: &Tree,
    lines: &dyn LineSource,
    a: NodeIdx,
    b: NodeIdx,
    options: &Options<'_>,
) -> Result<Comparison<Reason>, RenderError> {
    let proj_a = projection::project(tree, Some(a));
    let proj_b = projection::project(tree, Some(b));
    let fork = compare::fork(&proj_a.path, &proj_b.path);
    let sides = Sides::new(&fork);
    let reasons_a = Reasons::new(tree, &proj_a);
    let reasons_b = Reasons::new(tree, &proj_b);
    let id = |n: NodeIdx| tree.node(n).entry.id.clone();

    let mut context_common = 0;
    let mut context_changed = Vec::new();
    // A's context entries not at B, then B's not at A; each reason is the other leaf's.
    let mut only = |here: &Projection,
                    there: &Reasons<'_>,
                    mine: &[NodeIdx],
                    letter: &str,
                    count_common: bool|
     -> Vec<ContextDifference<Reason>> {
        let mut out = Vec::new();
        for item in &here.items {
            let n = item.node;
            if there.is_context_entry(n) {
                if count_common {
                    let (ra, rb) = (reasons_a.of(n), reasons_b.of(n));
                    if ra == rb {
                        context_common += 1;
                    } else {
                        let text = change_text(tree, &sides, &ra, &rb);
                        let e = &tree.node(n).entry;
                        context_changed.push(ContextChange {
                            id: e.id.clone(),
                            entry_type: e.kind.type_name().to_owned(),
                            role: role(tree, n),
                            a: ra,
                            b: rb,
                            text,
                        });
                    }
                }
                continue;
            }
            // Off the other path: on this side, after the fork point (the side's entries
            // follow the shared prefix, which both paths hold).
            let reason = if there.on_path(n) {
                there.of(n)
            } else {
                Reason::NotOnPath {
                    diverges_at: fork.point.map(id),
                    branch_entry_id: id(mine[0]),
                }
            };
            let text = reason_text(tree, &sides, &reason, letter);
            let e = &tree.node(n).entry;
            out.push(ContextDifference {
                id: e.id.clone(),
                entry_type: e.kind.type_name().to_owned(),
                role: role(tree, n),
                reason,
                text,
            });
        }
        out
    };
    let context_only_a = only(&proj_a, &reasons_b, &fork.only_a, "A", true);
    let context_only_b = only(&proj_b, &reasons_a, &fork.only_b, "B", false);

    let header_cwd = tree.header().cwd.as_deref();
    let side_a = side(tree, lines, &fork.only_a, Some(a), header_cwd, options)?;
    let side_b = side(tree, lines, &fork.only_b, Some(b), header_cwd, options)?;
    Ok(Comparison {
        side_a,
        side_b,
        context_only_a,
        context_only_b,
        context_changed,
        context_common,
        thinking_level: differ(
            thinking_value(&proj_a.thinking_level),
            thinking_value(&proj_b.thinking_level),
        ),
        model: differ(
            model_value(proj_a.model.as_ref()),
            model_value(proj_b.model.as_ref()),
        ),
        ..Comparison::parted(tree, lines, (a, b), &fork)
    })
}

fn role(tree: &Tree, n: NodeIdx) -> Option<String> {
    tree.node(n)
        .entry
        .kind
        .role()
        .map(|r| r.as_str().to_owned())
}

fn differ(a: Value, b: Value) -> Option<Differ> {
    (a != b).then_some(Differ { a, b })
}

fn raw_value(raw: &SharedRaw) -> Value {
    jsstr::parse_value(raw.get().as_bytes()).unwrap_or(Value::Null)
}

/// The thinking level as `context` prints it (`null`: pi reports none).
fn thinking_value(level: &Option<SharedRaw>) -> Value {
    level.as_ref().map_or(Value::Null, raw_value)
}

/// The model as `context` prints it: `{provider, modelId}`, absent fields left out.
fn model_value(model: Option<&ModelRef>) -> Value {
    let Some(m) = model else {
        return Value::Null;
    };
    let mut out = serde_json::Map::new();
    if let Some(p) = &m.provider {
        out.insert("provider".into(), raw_value(p));
    }
    if let Some(id) = &m.model_id {
        out.insert("modelId".into(), raw_value(id));
    }
    Value::Object(out)
}

/// Why an entry is not a context entry at the other leaf, in a few words.
fn reason_text(tree: &Tree, sides: &Sides, reason: &Reason, letter: &str) -> String {
    let at = |id: &EntryId| sides.of_id(tree, id);
    match reason {
        Reason::NotOnPath { .. } => format!("after the fork point, on {letter} only"),
        Reason::SummarizedByCompaction { compaction_id, .. } => {
            format!(
                "summarized by compaction {compaction_id}, {}",
                at(compaction_id)
            )
        }
        Reason::SystemMessageInKeptRange { compaction_id } => format!(
            "a system message the kept range of compaction {compaction_id} drops, {}",
            at(compaction_id)
        ),
        other => how(tree, sides, other),
    }
}

/// How a context entry reaches the model, in a few words.
fn how(tree: &Tree, sides: &Sides, reason: &Reason) -> String {
    let at = |id: &EntryId| sides.of_id(tree, id);
    match reason {
        Reason::InContext => "in context".to_owned(),
        Reason::ReplacedByEdit { edit_id } => {
            format!("replaced by context edit {edit_id}, {}", at(edit_id))
        }
        Reason::OmittedByEdit { edit_id } => {
            format!("omitted by context edit {edit_id}, {}", at(edit_id))
        }
        Reason::SupersededCompaction { by_compaction_id } => format!(
            "superseded by compaction {by_compaction_id}, {}",
            at(by_compaction_id)
        ),
        Reason::EmptyBranchSummary => "an empty branch summary".to_owned(),
        Reason::NeverInContext { entry_type } => format!("a {entry_type} entry, no message"),
        Reason::NotOnPath { .. } => "not on the path".to_owned(),
        Reason::SummarizedByCompaction { compaction_id, .. } => {
            format!("summarized by compaction {compaction_id}")
        }
        Reason::SystemMessageInKeptRange { compaction_id } => {
            format!("dropped by compaction {compaction_id}'s kept range")
        }
    }
}

/// `at A: in context; at B: omitted by context edit e1, on B only`.
fn change_text(tree: &Tree, sides: &Sides, a: &Reason, b: &Reason) -> String {
    format!(
        "at A: {}; at B: {}",
        how(tree, sides, a),
        how(tree, sides, b)
    )
}

/// What a side did (see the module docs).
fn side(
    tree: &Tree,
    lines: &dyn LineSource,
    nodes: &[NodeIdx],
    leaf: Option<NodeIdx>,
    cwd: Option<&str>,
    options: &Options<'_>,
) -> Result<Side, RenderError> {
    let mut side = Side {
        entries: nodes.len(),
        ..Side::default()
    };
    // Each write or edit call: its target; then whether its result on the side succeeded.
    let mut changes: Vec<(String, String)> = Vec::new();
    let mut calls: HashSet<String> = HashSet::new();
    let mut succeeded: HashMap<String, bool> = HashMap::new();
    for &n in nodes {
        let entry = &tree.node(n).entry;
        match &entry.kind {
            EntryKind::Message(m) => match m.role {
                Role::User => side.user_turns += 1,
                Role::Assistant => {
                    side.assistant_messages += 1;
                    if m.tool_call_ids().is_empty() {
                        continue;
                    }
                    let line = line_value(tree, n, lines)?;
                    for block in content_blocks(&line) {
                        if block.get("type").and_then(Value::as_str) != Some("toolCall") {
                            continue;
                        }
                        let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                        *side.tool_calls.entry(name.to_owned()).or_default() += 1;
                        let (Some(call), "write" | "edit") =
                            (block.get("id").and_then(Value::as_str), name)
                        else {
                            continue;
                        };
                        let args = block.get("arguments").unwrap_or(&Value::Null);
                        if let Some(target) = verify::mutation_target(name, args) {
                            calls.insert(call.to_owned());
                            changes.push((call.to_owned(), target));
                        }
                    }
                }
                Role::ToolResult => {
                    let Some(call) = m.tool_call_id() else {
                        continue;
                    };
                    if !calls.contains(call.as_str()) {
                        continue;
                    }
                    let line = line_value(tree, n, lines)?;
                    let failed = line
                        .get("message")
                        .and_then(|m| m.get("isError"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    succeeded.entry(call.to_string()).or_insert(!failed);
                }
                _ => {}
            },
            EntryKind::ThinkingLevelChange { level } => side.setting_changes.push(SettingChange {
                id: entry.id.clone(),
                setting: "thinkingLevel",
                value: thinking_value(level),
            }),
            EntryKind::ModelChange { provider, model_id } => {
                side.setting_changes.push(SettingChange {
                    id: entry.id.clone(),
                    setting: "model",
                    value: model_value(Some(&ModelRef {
                        provider: provider.clone(),
                        model_id: model_id.clone(),
                    })),
                })
            }
            _ => {}
        }
    }
    for (call, target) in changes {
        if succeeded.get(&call) != Some(&true) {
            continue;
        }
        // As `verify` resolves it, against the session's working directory (an absolute one).
        let path = match cwd.filter(|c| c.starts_with('/')) {
            Some(cwd) => verify::resolve_path(&target, cwd, options.home),
            None => target,
        };
        if !side.files_changed.contains(&path) {
            side.files_changed.push(path);
        }
    }
    side.token_estimate =
        prepare::context_tokens(tree, &projection::project_path(tree, leaf), lines);
    Ok(side)
}
