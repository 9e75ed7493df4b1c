//! Resume verification of a Codex thread ([`crate::core::verify`] checks it against the
//! world): what is read from the rollouts. The history of the leaf is the path through the
//! thread's files ([`Thread`]: a fork's or segment's parent prefix, then its own lines); its
//! tool calls are paired with their outputs by `call_id`; `apply_patch` calls in the thread's
//! other files (forks, revert segments, the reverted part of a file) are the edits off the
//! path.
//!
//! How Codex 0.171.0's tools act (observed: `exec_command`; *source*: `shell`, `apply_patch`):
//! `exec_command {cmd, workdir?}` runs a shell command and answers `… Process exited with code
//! N\nOutput:\n…` (a code other than 0 is a failure); `shell {command: [argv]}` likewise;
//! `apply_patch` (a custom tool call, its `input` the patch) adds (`*** Add File: P`, lines
//! `+`), updates (`*** Update File: P`, hunks after `@@` of context ` `, removed `-` and added
//! `+` lines) or deletes files. An update's hunk is one replacement of its old lines by its new
//! ones. The credential is Codex's own: `OPENAI_API_KEY` or `CODEX_API_KEY`, or
//! `$CODEX_HOME/auth.json` (default `~/.codex/auth.json`); presence only.

use std::collections::HashMap;

use serde_json::Value;

use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::core::verify::{
    Action, Call, Collected, Credential, CredentialPlaces, Facts, Finding, Outcome, Replace, World,
    credential_presence,
};
use crate::dialect::codex::format::Kind as LineKind;
use crate::dialect::codex::thread::Thread;

/// What a Codex tool call does (see the module docs); `None` for a tool not checked. A patch
/// that touches several files is read for its first.
pub fn action(name: &str, arguments: &Value) -> Option<Action> {
    match name {
        "exec_command" => Some(Action::Bash {
            command: arguments
                .get("cmd")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }),
        "shell" | "local_shell" => Some(Action::Bash {
            command: arguments.get("command").and_then(|c| match c {
                Value::Array(argv) => Some(
                    argv.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                Value::String(s) => Some(s.clone()),
                _ => None,
            }),
        }),
        "apply_patch" => patch_action(patch_of(arguments)?),
        _ => None,
    }
}

/// The action of a patch's first file.
fn patch_action(patch: &str) -> Option<Action> {
    let mut lines = patch.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(p) = l.strip_prefix("*** Add File: ") {
            let mut content = String::new();
            while let Some(n) = lines.peek().filter(|n| !n.starts_with("*** ")) {
                content.push_str(n.strip_prefix('+').unwrap_or(n));
                content.push('\n');
                lines.next();
            }
            return Some(Action::Write {
                path: Some(p.trim().to_owned()),
                content: Some(content),
            });
        }
        if let Some(p) = l.strip_prefix("*** Update File: ") {
            let mut edits = Vec::new();
            let (mut old, mut new) = (String::new(), String::new());
            let flush = |old: &mut String, new: &mut String, edits: &mut Vec<Replace>| {
                if !old.is_empty() || !new.is_empty() {
                    edits.push(Replace {
                        old_text: std::mem::take(old),
                        new_text: std::mem::take(new),
                        replace_all: false,
                    });
                }
            };
            while let Some(n) = lines.peek().filter(|n| !n.starts_with("*** ")) {
                let n = *n;
                lines.next();
                if n.starts_with("@@") {
                    flush(&mut old, &mut new, &mut edits);
                    continue;
                }
                let (tag, text) = n.split_at(n.len().min(1));
                match tag {
                    "-" => {
                        old.push_str(text);
                        old.push('\n');
                    }
                    "+" => {
                        new.push_str(text);
                        new.push('\n');
                    }
                    _ => {
                        old.push_str(text);
                        old.push('\n');
                        new.push_str(text);
                        new.push('\n');
                    }
                }
            }
            flush(&mut old, &mut new, &mut edits);
            return Some(Action::Edit {
                path: Some(p.trim().to_owned()),
                edits: (!edits.is_empty()).then_some(edits),
                apply: apply_hunks,
            });
        }
    }
    None
}

/// A patch's hunks on a file's text: each hunk's old lines replaced once by its new ones (they
/// must be there). `None` where `apply_patch` refuses.
pub fn apply_hunks(text: &str, edits: &[Replace]) -> Option<String> {
    let mut out = text.to_owned();
    for e in edits {
        if !out.contains(&e.old_text) {
            return None;
        }
        out = out.replacen(&e.old_text, &e.new_text, 1);
    }
    Some(out)
}

/// Every file a patch adds, updates (and the file it moves one to) or deletes, as written, in
/// the patch's order, each once.
pub fn patch_paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in patch.lines() {
        let p = [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ]
        .iter()
        .find_map(|h| l.strip_prefix(h));
        if let Some(p) = p.map(str::trim).filter(|p| !p.is_empty())
            && !out.iter().any(|o| o == p)
        {
            out.push(p.to_owned());
        }
    }
    out
}

/// The patch of an `apply_patch` call's arguments (see [`call_of`]): a custom tool call's
/// `input`, or a function call's `input` argument.
pub fn patch_of(arguments: &Value) -> Option<&str> {
    match arguments {
        Value::String(s) => Some(s.as_str()),
        v => v.get("input").and_then(Value::as_str),
    }
}

/// A tool call's name and arguments, from the `payload` of a `function_call` (its JSON
/// `arguments`), `custom_tool_call` (its `input`, a string) or `local_shell_call` (its
/// `action`); `None` for another item.
pub fn call_of(payload: &Value) -> Option<(&str, Value)> {
    let t = payload.get("type").and_then(Value::as_str)?;
    if !matches!(t, "function_call" | "custom_tool_call" | "local_shell_call") {
        return None;
    }
    let name = payload
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(if t == "local_shell_call" {
            "local_shell"
        } else {
            ""
        });
    let arguments = match payload.get("arguments").or_else(|| payload.get("action")) {
        Some(Value::String(a)) => serde_json::from_str(a).unwrap_or(Value::Null),
        Some(a) => a.clone(),
        None => payload.get("input").cloned().unwrap_or(Value::Null),
    };
    Some((name, arguments))
}

/// The text of a tool output's `payload` (its `output`: a string, or an object's `content`).
pub fn output_text(payload: &Value) -> String {
    match payload.get("output") {
        Some(Value::String(s)) => s.clone(),
        Some(o) => o
            .get("content")
            .and_then(Value::as_str)
            .map_or_else(|| o.to_string(), str::to_owned),
        None => String::new(),
    }
}

/// The exit code an output's text reports: `Process exited with code N` (`exec_command`),
/// `Exit code: N` (a tool run through Codex's shell formatter, `apply_patch` among them), or
/// `metadata.exit_code` of an output that is a JSON document (`shell`).
fn exit_code(text: &str) -> Option<i64> {
    let line = text.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix("Process exited with code ")
            .or_else(|| l.strip_prefix("Exit code: "))
    });
    match line {
        Some(c) => c.trim().parse::<i64>().ok(),
        None => serde_json::from_str::<Value>(text)
            .ok()?
            .get("metadata")?
            .get("exit_code")?
            .as_i64(),
    }
}

/// Whether a tool output (`function_call_output`, `custom_tool_call_output` payload) reports
/// success: an exit code of 0 ([`exit_code`]), or `apply_patch`'s `Success. Updated the
/// following files:`. An output that reports neither (Codex's synthetic `aborted`, an
/// interrupted command, `apply_patch verification failed: …`) does not.
pub fn reports_success(payload: &Value) -> bool {
    let text = output_text(payload);
    match exit_code(&text) {
        Some(code) => code == 0,
        None => text
            .lines()
            .any(|l| l.trim() == "Success. Updated the following files:"),
    }
}

/// Whether a tool output (`function_call_output`, `custom_tool_call_output` payload) reports
/// a failure: an exit code other than 0 ([`exit_code`]), or `apply_patch verification failed`.
/// An output that reports neither (Codex's synthetic `aborted`, an interrupted command, a tool
/// without an exit code) does not.
pub fn reports_failure(payload: &Value) -> bool {
    let text = output_text(payload);
    match exit_code(&text) {
        Some(code) => code != 0,
        None => text
            .trim_start()
            .starts_with("apply_patch verification failed"),
    }
}

/// An output's text, and whether it reports a failure (`Process exited with code N`, N ≠ 0).
fn outcome(payload: &Value) -> Outcome {
    let text = output_text(payload);
    let code = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Process exited with code "))
        .and_then(|c| c.trim().parse::<i64>().ok());
    Outcome {
        is_error: code.is_some_and(|c| c != 0),
        text,
        truncated: false,
        image: false,
    }
}

/// Reads what verification needs from `thread` at `leaf` (see the module docs). Lines that
/// cannot be read are passed over (verification reads what it can).
pub fn collect(thread: &Thread, leaf: Option<NodeIdx>, source: &dyn LineSource) -> Collected {
    let tree = &thread.tree;
    let path = tree.path_to(leaf);
    let on_path: HashMap<NodeIdx, usize> = path.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let value = |n: NodeIdx| -> Option<Value> {
        let bytes = source.line(tree.node(n).entry.span).ok()?;
        serde_json::from_slice(&bytes).ok()
    };
    let mut calls = Vec::new();
    let mut results_on = HashMap::new();
    let mut results_off = HashMap::new();
    let mut session_cwd = None;
    for (idx, node) in tree.nodes().iter().enumerate() {
        let idx = idx as NodeIdx;
        let pos = on_path.get(&idx).copied();
        let wanted = match &node.entry.kind {
            LineKind::ResponseItem { item, .. } => matches!(
                item.as_str(),
                "function_call"
                    | "custom_tool_call"
                    | "local_shell_call"
                    | "function_call_output"
                    | "custom_tool_call_output"
            ),
            LineKind::TurnContext | LineKind::SessionMeta => pos.is_some(),
            _ => false,
        };
        if !wanted {
            continue;
        }
        let Some(v) = value(idx) else { continue };
        let Some(p) = v.get("payload") else { continue };
        let s = |k: &str| p.get(k).and_then(Value::as_str);
        match s("type") {
            Some("function_call_output" | "custom_tool_call_output") => {
                if let Some(id) = s("call_id") {
                    let o = outcome(p);
                    if pos.is_some() {
                        results_on.insert(id.to_owned(), o);
                    } else {
                        results_off.entry(id.to_owned()).or_insert(o);
                    }
                }
            }
            Some("function_call" | "custom_tool_call" | "local_shell_call") => {
                let Some((name, arguments)) = call_of(p) else {
                    continue;
                };
                let Some(action) = action(name, &arguments) else {
                    continue;
                };
                // Off the path only the edits and writes count (another branch's effects).
                if pos.is_none() && matches!(action, Action::Bash { .. } | Action::Read { .. }) {
                    continue;
                }
                let id = s("call_id").unwrap_or_default().to_owned();
                calls.push(Call {
                    entry_id: node.entry.id.to_string(),
                    id,
                    name: name.to_owned(),
                    action,
                    order: pos.map(|p| (p, 0)),
                });
            }
            _ => {
                if pos.is_some()
                    && let Some(cwd) = s("cwd")
                {
                    session_cwd = Some((pos, cwd.to_owned()));
                }
            }
        }
    }
    calls.sort_by_key(|c| c.order.unwrap_or((usize::MAX, 0)));
    Collected {
        facts: Facts {
            calls,
            results_on,
            results_off,
            summary: None,
        },
        session_cwd: session_cwd.map(|(_, c)| c),
        leaf_id: leaf.map(|l| tree.node(l).entry.id.to_string()),
        credential: Credential {
            provider: None,
            check: credentials,
        },
    }
}

/// The environment variables Codex takes an API key from.
const CREDENTIAL_VARS: [&str; 2] = ["OPENAI_API_KEY", "CODEX_API_KEY"];

/// Codex's credential: one of [`CREDENTIAL_VARS`], or its `auth.json` in `$CODEX_HOME`
/// (default `~/.codex`); presence only. A provider configured in `config.toml` with a key of
/// its own is not looked at, so none found is a warning, not a failure.
fn credentials(world: &dyn World, _provider: Option<&str>) -> Finding {
    let places = CredentialPlaces {
        agent: "Codex",
        vars: &CREDENTIAL_VARS,
        key_vars: &CREDENTIAL_VARS,
        dir_var: "CODEX_HOME",
        home_dir: ".codex",
        file: "auth.json",
        file_words: "its auth.json",
        unchecked: "a provider's own key in config.toml is not checked",
    };
    credential_presence(world, &places)
}
