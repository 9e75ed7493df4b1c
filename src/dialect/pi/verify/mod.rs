//! Resume verification of a pi session ([`crate::core::verify`] checks it against the world):
//! what is read from the session. The active path (root to leaf, [`Tree::path_to`]); its
//! `edit`, `write`, `read` and `bash` tool calls paired with their results by `toolCallId`;
//! `edit`/`write` calls on other branches; the newest compaction or branch summary on the path
//! (its `<modified-files>` block, pi 1.6.0 `formatFileOperations`); the session model's provider
//! (the projection's `model`), whose credential [`credentials`] names. An `edit` is applied as
//! pi's tool applies it ([`edit`]).

pub mod credentials;
pub mod edit;

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use crate::core::tree::NodeIdx;
use crate::core::verify::{
    Action, Call, Collected, Credential, Facts, Finding, Kind, Outcome, Status, World, finding,
    tool_call_blocks,
};
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::{EntryKind, Role, raw_str};
use crate::dialect::pi::projection;
use crate::dialect::pi::render::{LineSource, RenderError, content_blocks};

fn parse_line(tree: &Tree, source: &dyn LineSource, n: NodeIdx) -> Result<Value, RenderError> {
    crate::dialect::pi::render::line_value(tree, n, source)
}

/// What a pi tool call does, read as pi's tools read their arguments.
fn action(name: &str, args: &Value) -> Action {
    let path = || args.get("path").and_then(Value::as_str).map(str::to_owned);
    match name {
        "write" => match edit::write_call(args) {
            Some((p, content)) => Action::Write {
                path: Some(p),
                content: Some(content.to_owned()),
            },
            None => Action::Write {
                path: path(),
                content: None,
            },
        },
        "edit" => match edit::edit_call(args) {
            Ok(call) => Action::Edit {
                path: Some(call.path),
                edits: Some(call.edits),
                apply: apply_edit,
            },
            Err(_) => Action::Edit {
                path: path(),
                edits: None,
                apply: apply_edit,
            },
        },
        "read" => Action::Read {
            path: path(),
            whole: !(args.get("offset").is_some_and(|v| !v.is_null())
                || args.get("limit").is_some_and(|v| !v.is_null())),
        },
        _ => Action::Bash {
            command: args
                .get("command")
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
    }
}

/// The file a `write` or `edit` call targets, as verification reads it: the path pi's tool
/// takes from its arguments (`write`: a string `path` with a string `content`; `edit`: pi's
/// `prepareEditArguments`), else the `path` argument as written. `None` for other tools and
/// calls without a string path.
pub fn mutation_target(name: &str, args: &Value) -> Option<String> {
    match action(name, args) {
        Action::Write { path, .. } | Action::Edit { path, .. } => path,
        _ => None,
    }
}

/// pi `resolveToCwd`, as verification resolves a tool's path ([`crate::core::verify`]).
pub use crate::core::verify::resolve_path;

/// pi's edit tool on a file's text ([`edit::apply_edit`]); `None` when pi refuses the edit.
fn apply_edit(text: &str, edits: &[edit::Replace]) -> Option<String> {
    edit::apply_edit(text, edits).ok()
}

fn read_facts(
    tree: &Tree,
    path: &[NodeIdx],
    source: &dyn LineSource,
) -> Result<Facts, RenderError> {
    let mut on_path: HashMap<NodeIdx, usize> = HashMap::with_capacity(path.len());
    for (i, &n) in path.iter().enumerate() {
        on_path.insert(n, i);
    }
    let mut calls = Vec::new();
    let mut wanted_on: HashSet<String> = HashSet::new();
    let mut wanted_off: HashSet<String> = HashSet::new();
    for (idx, node) in tree.nodes().iter().enumerate() {
        let EntryKind::Message(info) = &node.entry.kind else {
            continue;
        };
        if info.role != Role::Assistant || info.tool_call_ids().is_empty() {
            continue;
        }
        let idx = idx as NodeIdx;
        let pos = on_path.get(&idx).copied();
        let v = parse_line(tree, source, idx)?;
        for (b, block, id, name) in tool_call_blocks(content_blocks(&v), "toolCall") {
            let interesting = match pos {
                Some(_) => matches!(name, "edit" | "write" | "read" | "bash"),
                None => matches!(name, "edit" | "write"),
            };
            if !interesting {
                continue;
            }
            if pos.is_some() {
                wanted_on.insert(id.to_owned());
            } else {
                wanted_off.insert(id.to_owned());
            }
            let args = block.get("arguments").unwrap_or(&Value::Null);
            calls.push(Call {
                entry_id: node.entry.id.to_string(),
                id: id.to_owned(),
                name: name.to_owned(),
                action: action(name, args),
                order: pos.map(|p| (p, b)),
            });
        }
    }
    let mut results_on = HashMap::new();
    let mut results_off = HashMap::new();
    for (idx, node) in tree.nodes().iter().enumerate() {
        let EntryKind::Message(info) = &node.entry.kind else {
            continue;
        };
        let Some(call_id) = info.tool_call_id() else {
            continue;
        };
        let idx = idx as NodeIdx;
        let on = on_path.contains_key(&idx);
        let wanted = if on { &wanted_on } else { &wanted_off };
        if info.role != Role::ToolResult || !wanted.contains(call_id.as_ref()) {
            continue;
        }
        let v = parse_line(tree, source, idx)?;
        let m = v.get("message").cloned().unwrap_or(Value::Null);
        let mut text = String::new();
        let mut image = false;
        for block in m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(t) = block.get("text").and_then(Value::as_str) {
                        text.push_str(t);
                    }
                }
                Some("image") => image = true,
                _ => {}
            }
        }
        let truncated = m
            .get("details")
            .and_then(|d| d.get("truncation"))
            .is_some_and(|t| !t.is_null());
        // pi's read of an image answers with a note, not the file's text.
        let image = image || text.starts_with("Read image file");
        let outcome = Outcome {
            is_error: m.get("isError").and_then(Value::as_bool).unwrap_or(false),
            text,
            truncated,
            image,
        };
        if on {
            results_on.insert(call_id.to_string(), outcome);
        } else {
            results_off.insert(call_id.to_string(), outcome);
        }
    }
    let mut summary = None;
    for &n in path.iter().rev() {
        if matches!(
            tree.node(n).entry.kind,
            EntryKind::Compaction { .. } | EntryKind::BranchSummary { .. }
        ) {
            let v = parse_line(tree, source, n)?;
            if let Some(s) = v.get("summary").and_then(Value::as_str) {
                summary = Some((tree.node(n).entry.id.to_string(), modified_files(s)));
            }
            break;
        }
    }
    calls.sort_by_key(|c| c.order.unwrap_or((usize::MAX, 0)));
    Ok(Facts {
        calls,
        results_on,
        results_off,
        summary,
    })
}

/// Reads what verification needs from the session at `leaf`: the active path's tool calls
/// and results, other branches' edits and writes, the newest summary, the model's provider.
/// Errors: a line that cannot be read again or changed since the tree was built.
pub fn collect(
    tree: &Tree,
    leaf: Option<NodeIdx>,
    source: &dyn LineSource,
) -> Result<Collected, RenderError> {
    let path = tree.path_to(leaf);
    let facts = read_facts(tree, &path, source)?;
    let proj = projection::project(tree, leaf);
    let provider = proj
        .model
        .as_ref()
        .and_then(|m| m.provider.as_ref())
        .and_then(|p| raw_str(p).map(|s| s.into_owned()));
    Ok(Collected {
        facts,
        session_cwd: tree.header().cwd.clone(),
        leaf_id: leaf.map(|l| tree.node(l).entry.id.to_string()),
        credential: Credential {
            provider,
            check: credentials,
        },
    })
}

/// The paths of pi's `<modified-files>` block in a summary (one per line).
pub fn modified_files(summary: &str) -> Vec<String> {
    let Some(start) = summary.rfind("<modified-files>") else {
        return Vec::new();
    };
    let rest = &summary[start + "<modified-files>".len()..];
    let body = rest.split("</modified-files>").next().unwrap_or("");
    body.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// pi's credential check: an environment variable pi-ai reads for the provider, or the
/// provider's key in pi's auth file (presence only).
fn credentials(world: &dyn World, provider: Option<&str>) -> Finding {
    let Some(provider) = provider else {
        return finding(
            Status::Warn,
            Kind::Credentials,
            "The path names no model, so pi will choose one; no credential was checked".into(),
            None,
        );
    };
    let rule = credentials::env_rule(provider);
    let names: Vec<&str> = rule.as_ref().map(|r| r.names()).unwrap_or_default();
    let set: Vec<&str> = names.iter().copied().filter(|n| world.env_set(n)).collect();
    let env_ok = rule.as_ref().is_some_and(|r| r.met(&|n| world.env_set(n)));
    let auth = world.auth(provider);
    let evidence = json!({
        "provider": provider,
        "envVars": names,
        "envVarsSet": set,
        "authFile": auth.path,
        "authFileExists": auth.exists,
        "authFileHasProvider": auth.has_provider,
    });
    // What the auth file says about the provider, when it gives no credential.
    let auth_lacks = if auth.exists {
        format!("{} has no entry for it", auth.path)
    } else {
        format!("{} does not exist", auth.path)
    };
    let (status, message) = if env_ok || auth.has_provider {
        let how = match (env_ok, auth.has_provider) {
            (true, true) => format!("{} and {}", set.join(", "), auth.path),
            (true, false) => set.join(", "),
            _ => auth.path.clone(),
        };
        (
            Status::Ok,
            format!("A credential for provider {provider} is configured ({how})"),
        )
    } else if rule.is_none() {
        (
            Status::Warn,
            format!(
                "pi knows no environment variable for provider {provider} and {auth_lacks} (custom providers in models.json are not checked)"
            ),
        )
    } else {
        (
            Status::Fail,
            format!(
                "No credential for provider {provider}: none of {} is set and {auth_lacks}",
                names.join(", ")
            ),
        )
    };
    finding(status, Kind::Credentials, message, Some(evidence))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modified_files_block() {
        let s = "x\n\n<read-files>\na\n</read-files>\n\n<modified-files>\nsrc/a.rs\nb.txt\n</modified-files>";
        assert_eq!(modified_files(s), vec!["src/a.rs", "b.txt"]);
        assert!(modified_files("none").is_empty());
    }
}
