//! Resume verification of a Claude Code transcript ([`crate::core::verify`] checks it against
//! the world): what is read from the transcript. The history of the leaf
//! ([`super::load::history`]: the path Claude Code follows to it, across its compact
//! boundaries, since what a tool did before a compaction is still done); its `Write`, `Edit`,
//! `MultiEdit` (older versions), `Read` and `Bash` tool calls paired with their `tool_result`
//! blocks by `tool_use_id`; `Write`/`Edit`/`MultiEdit` calls on other branches of the file (a
//! rewind, a concurrent run) with their results. A fork (by `--fork-session` or sessiond)
//! holds only its path, so an edit made on the source after the fork point is no effect of the
//! fork's: the file is found changed since the fork's last write.
//!
//! How Claude Code 2.1.197's tools act (observed, and *source* for `MultiEdit`, which that
//! version no longer offers): `Write {file_path, content}` writes the whole file; `Edit
//! {file_path, old_string, new_string, replace_all?}` replaces the one occurrence of
//! `old_string` (the tool refuses an ambiguous one) or, with `replace_all`, every one; an empty
//! `old_string` creates a file; `MultiEdit {file_path, edits: [{old_string, new_string,
//! replace_all?}]}` applies its edits in order; `Read {file_path, offset?, limit?}` answers with
//! numbered lines while the line's `toolUseResult.file.content` holds the text read.
//! A session's credential is Claude Code's own: an API key or token in the environment, or its
//! credentials file (presence only).

use std::collections::HashMap;

use serde_json::Value;

use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::core::verify::{
    Action, Call, Collected, Credential, CredentialPlaces, Facts, Finding, Outcome, Replace, World,
    credential_presence, tool_call_blocks,
};
use crate::dialect::claude::Tree;
use crate::dialect::claude::context::{ContextError, line_value};
use crate::dialect::claude::format::Kind as LineKind;
use crate::dialect::claude::load::history;

/// The tools whose calls are checked on the path; off it, only the first three.
const FILE_TOOLS: [&str; 3] = ["Write", "Edit", "MultiEdit"];

/// What a Claude Code tool call does (see the module docs); `None` for a tool not checked.
pub fn action(name: &str, input: &Value) -> Option<Action> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let path = s(input, "file_path");
    let replace = |e: &Value| {
        Some(Replace {
            old_text: s(e, "old_string")?,
            new_text: s(e, "new_string")?,
            replace_all: e.get("replace_all") == Some(&Value::Bool(true)),
        })
    };
    Some(match name {
        "Write" => Action::Write {
            path,
            content: s(input, "content"),
        },
        "Edit" => Action::Edit {
            path,
            edits: replace(input).map(|r| vec![r]),
            apply: apply_edits,
        },
        "MultiEdit" => Action::Edit {
            path,
            edits: input
                .get("edits")
                .and_then(Value::as_array)
                .filter(|e| !e.is_empty())
                .and_then(|edits| edits.iter().map(replace).collect()),
            apply: apply_edits,
        },
        "Read" => Action::Read {
            path,
            whole: input.get("offset").is_none_or(Value::is_null)
                && input.get("limit").is_none_or(Value::is_null),
        },
        "Bash" => Action::Bash {
            command: s(input, "command"),
        },
        _ => return None,
    })
}

/// Claude Code's `Edit`/`MultiEdit` on a file's text: each edit in order, `old_string` replaced
/// once (it must be there) or everywhere with `replace_all`; an empty `old_string` writes
/// `new_string` into an empty (new) file. `None` where the tool refuses.
pub fn apply_edits(text: &str, edits: &[Replace]) -> Option<String> {
    let mut out = text.to_owned();
    for e in edits {
        if e.old_text.is_empty() {
            if !out.is_empty() {
                return None;
            }
            out.clone_from(&e.new_text);
            continue;
        }
        if !out.contains(&e.old_text) {
            return None;
        }
        out = if e.replace_all {
            out.replace(&e.old_text, &e.new_text)
        } else {
            out.replacen(&e.old_text, &e.new_text, 1)
        };
    }
    Some(out)
}

/// The working directory of a path's last line that records one (Claude Code writes `cwd` on
/// every line; the leaf's is where it resumes). `path` runs from the root to the leaf.
/// Errors: a line that cannot be read again.
pub(crate) fn leaf_cwd(
    tree: &Tree,
    source: &dyn LineSource,
    path: &[NodeIdx],
) -> Result<Option<String>, ContextError> {
    for &n in path.iter().rev() {
        let v = line_value(tree, source, n)?;
        if let Some(cwd) = v.get("cwd").and_then(Value::as_str) {
            return Ok(Some(cwd.to_owned()));
        }
    }
    Ok(None)
}

/// The content blocks of a line's `message`.
pub(crate) fn blocks(v: &Value) -> impl Iterator<Item = &Value> {
    v.get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// A `tool_result` block as an [`Outcome`]; for a `Read`, the text read (the line's
/// `toolUseResult.file`), marked cut when the tool read less than the whole file.
fn outcome(block: &Value, line: &Value, read: bool) -> Outcome {
    let mut text = String::new();
    let mut image = false;
    match block.get("content") {
        Some(Value::String(s)) => text.push_str(s),
        Some(Value::Array(items)) => {
            for item in items {
                match item.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        text.push_str(item.get("text").and_then(Value::as_str).unwrap_or(""))
                    }
                    Some("image") => image = true,
                    _ => {}
                }
            }
        }
        _ => {}
    }
    let mut truncated = false;
    if read {
        let file = line.get("toolUseResult").and_then(|r| r.get("file"));
        let number = |k: &str| file.and_then(|f| f.get(k)).and_then(Value::as_u64);
        match file.and_then(|f| f.get("content")).and_then(Value::as_str) {
            Some(content) => {
                text = content.to_owned();
                truncated = number("startLine").is_some_and(|s| s > 1)
                    || number("numLines") != number("totalLines");
            }
            // An image, a notebook, or a read whose record is missing: no text to compare.
            None => image = true,
        }
    }
    Outcome {
        is_error: block.get("is_error") == Some(&Value::Bool(true)),
        text,
        truncated,
        image,
    }
}

/// Reads what verification needs from the transcript at `leaf` (see the module docs). Errors:
/// a line that cannot be read again or changed since the tree was built.
pub fn collect(
    tree: &Tree,
    leaf: Option<NodeIdx>,
    source: &dyn LineSource,
) -> Result<Collected, ContextError> {
    let path = leaf.map_or_else(Vec::new, |l| history(tree, l));
    let on_path: HashMap<NodeIdx, usize> = path.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut calls = Vec::new();
    // Tool call id → whether it is a Read, for the calls wanted on and off the path.
    let mut wanted_on: HashMap<String, bool> = HashMap::new();
    let mut wanted_off: HashMap<String, bool> = HashMap::new();
    for (idx, node) in tree.nodes().iter().enumerate() {
        let LineKind::Assistant { tool_use_ids, .. } = &node.entry.kind else {
            continue;
        };
        if tool_use_ids.is_empty() || node.entry.sidechain {
            continue;
        }
        let idx = idx as NodeIdx;
        let pos = on_path.get(&idx).copied();
        let v = line_value(tree, source, idx)?;
        for (b, block, id, name) in tool_call_blocks(blocks(&v), "tool_use") {
            if pos.is_none() && !FILE_TOOLS.contains(&name) {
                continue;
            }
            let Some(action) = action(name, block.get("input").unwrap_or(&Value::Null)) else {
                continue;
            };
            let read = matches!(action, Action::Read { .. });
            match pos {
                Some(_) => wanted_on.insert(id.to_owned(), read),
                None => wanted_off.insert(id.to_owned(), read),
            };
            calls.push(Call {
                entry_id: node.entry.id.to_string(),
                id: id.to_owned(),
                name: name.to_owned(),
                action,
                order: pos.map(|p| (p, b)),
            });
        }
    }
    let mut results_on = HashMap::new();
    let mut results_off = HashMap::new();
    for (idx, node) in tree.nodes().iter().enumerate() {
        let LineKind::User { result_ids, .. } = &node.entry.kind else {
            continue;
        };
        let idx = idx as NodeIdx;
        let on = on_path.contains_key(&idx);
        let wanted = if on { &wanted_on } else { &wanted_off };
        if !result_ids.iter().any(|id| wanted.contains_key(id.as_str())) {
            continue;
        }
        let v = line_value(tree, source, idx)?;
        for block in blocks(&v) {
            let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
                continue;
            };
            let Some(&read) = wanted.get(id) else {
                continue;
            };
            let o = outcome(block, &v, read);
            if on {
                results_on.insert(id.to_owned(), o);
            } else {
                results_off.insert(id.to_owned(), o);
            }
        }
    }
    calls.sort_by_key(|c| c.order.unwrap_or((usize::MAX, 0)));
    let session_cwd = leaf_cwd(tree, source, &path)?;
    Ok(Collected {
        facts: Facts {
            calls,
            results_on,
            results_off,
            summary: None,
        },
        session_cwd,
        leaf_id: leaf.map(|l| tree.node(l).entry.id.to_string()),
        credential: Credential {
            provider: None,
            check: credentials,
        },
    })
}

/// The environment variables Claude Code takes a credential from.
const CREDENTIAL_VARS: [&str; 3] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

/// The variables that send Claude Code to a cloud provider's credentials instead.
const CLOUD_VARS: [&str; 2] = ["CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"];

/// Claude Code's credential: one of [`CREDENTIAL_VARS`], a cloud provider ([`CLOUD_VARS`], not
/// checked further), or its credentials file `$CLAUDE_CONFIG_DIR/.credentials.json` (default
/// `~/.claude/.credentials.json`); presence only. A keychain or an `apiKeyHelper` is not looked
/// at, so none found is a warning, not a failure.
fn credentials(world: &dyn World, _provider: Option<&str>) -> Finding {
    let mut vars = CREDENTIAL_VARS.to_vec();
    vars.extend(CLOUD_VARS);
    let places = CredentialPlaces {
        agent: "Claude Code",
        vars: &vars,
        key_vars: &CREDENTIAL_VARS,
        dir_var: "CLAUDE_CONFIG_DIR",
        home_dir: ".claude",
        file: ".credentials.json",
        file_words: "its credentials file",
        unchecked: "a keychain or an apiKeyHelper is not checked",
    };
    credential_presence(world, &places)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(old: &str, new: &str, all: bool) -> Replace {
        Replace {
            old_text: old.into(),
            new_text: new.into(),
            replace_all: all,
        }
    }

    #[test]
    fn edits_apply_as_claude_s_tools_apply_them() {
        assert_eq!(
            apply_edits("a b b", &[r("b", "c", false)]).as_deref(),
            Some("a c b")
        );
        assert_eq!(
            apply_edits("a b b", &[r("b", "c", true)]).as_deref(),
            Some("a c c")
        );
        assert_eq!(apply_edits("a", &[r("x", "y", false)]), None);
        assert_eq!(
            apply_edits("", &[r("", "new", false)]).as_deref(),
            Some("new")
        );
        assert_eq!(
            apply_edits("one two", &[r("one", "1", false), r("two", "2", false)]).as_deref(),
            Some("1 2")
        );
        let multi = action(
            "MultiEdit",
            &json!({"file_path": "/f", "edits": [{"old_string": "a", "new_string": "b", "replace_all": true}]}),
        );
        let Some(Action::Edit { path, edits, .. }) = multi else {
            panic!("an edit")
        };
        assert_eq!(path.as_deref(), Some("/f"));
        assert_eq!(edits, Some(vec![r("a", "b", true)]));
        let bad = action("Edit", &json!({"file_path": "/f", "edits": []}));
        assert!(matches!(bad, Some(Action::Edit { edits: None, .. })));
        assert!(action("Glob", &json!({})).is_none());
    }
}
