//! What a session picker shows of a Claude Code transcript, as Claude Code 2.1.197's own
//! session list reads the file (*source* `eDt`, `dLt`, `_2e`, `P$`; docs/claude-code.md §1–§2):
//!
//! * the id: the file name's stem — the id `claude --resume` takes (a subagent's transcript:
//!   `agent-<agentId>`), as `session/open` names it;
//! * the cwd: the first line's non-empty `cwd`, replaced by a `relocated` line's
//!   `relocatedCwd`; created: the first line's `timestamp` that is a date;
//! * the name: the latest `agent-name`, else `custom-title`, else `ai-title`, else `summary`
//!   bookkeeping line (Claude Code's title order, less its fallback to the first prompt);
//! * the first prompt (`dLt`): the first `user` line, in file order, that is no meta line, no
//!   compaction summary and holds no tool result, whose text (a string, or its `text` blocks
//!   one by one, newlines as spaces, trimmed) is not markup (`<tag …`), not an interruption
//!   notice and not a slash command; `<bash-input>` is shown as `! command`; with no such
//!   text, the first slash command's name (`/compact`);
//! * the message count: `user` and `assistant` lines on every branch (Claude Code keeps each
//!   content block of a response as a message of its own, §3);
//! * the tokens (`P$`): at the default leaf, the last response on the loaded path that is not
//!   synthetic reports `usage`; its `input_tokens + cache_creation_input_tokens +
//!   cache_read_input_tokens + output_tokens` — the context size Claude Code counts (what it
//!   compares with the window, before its estimate of any line after that response).
//!
//! Pure: line bodies are read through a [`LineSource`].

use std::path::Path;

use serde_json::Value;

use crate::core::ids::LineSpan;
use crate::core::overview::Overview;
use crate::core::preview::one_line;
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::format::Kind;
use crate::js::{jsstr, timestamp};

/// `message.model` of the lines Claude Code writes itself (no model answered them).
const SYNTHETIC: &str = "<synthetic>";

/// The overview of the transcript at `path` read into `tree` (see the module docs).
pub fn overview(tree: &Tree, lines: &dyn LineSource, path: &Path) -> Overview {
    let default_leaf = super::default_leaf(tree);
    let head = head_facts(tree, lines);
    Overview {
        id: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        cwd: head.cwd,
        created: head.created,
        name: name(tree, lines),
        first_message: first_prompt(tree, lines).map(|p| one_line(&p)),
        message_count: tree
            .nodes()
            .iter()
            .filter(|n| n.entry.kind.is_message())
            .count(),
        default_leaf,
        tokens: default_leaf.and_then(|leaf| context_tokens(tree, lines, leaf)),
    }
}

/// Every line's span, tree and bookkeeping lines merged back into file order.
fn spans_in_file_order(tree: &Tree) -> impl Iterator<Item = LineSpan> + '_ {
    let nodes = tree.nodes();
    let asides = tree.ext().asides();
    let (mut n, mut a) = (0usize, 0usize);
    std::iter::from_fn(move || match (nodes.get(n), asides.get(a)) {
        (Some(x), Some(y)) if y.span.line < x.entry.span.line => {
            a += 1;
            Some(y.span)
        }
        (Some(x), _) => {
            n += 1;
            Some(x.entry.span)
        }
        (None, Some(y)) => {
            a += 1;
            Some(y.span)
        }
        (None, None) => None,
    })
}

struct Head {
    cwd: Option<String>,
    created: Value,
}

/// The cwd and the creation time, from the first lines that carry them (`eDt`), the cwd
/// replaced by the last `relocated` line's.
fn head_facts(tree: &Tree, lines: &dyn LineSource) -> Head {
    let mut head = Head {
        cwd: None,
        created: Value::Null,
    };
    for span in spans_in_file_order(tree) {
        if head.cwd.is_some() && !head.created.is_null() {
            break;
        }
        let Some(v) = parsed(lines, span) else {
            continue;
        };
        if head.created.is_null()
            && let Some(Value::String(t)) = v.get("timestamp")
            && timestamp::parse_iso(t).is_some()
        {
            head.created = Value::String(t.clone());
        }
        if head.cwd.is_none() {
            head.cwd = nonempty(v.get("cwd"));
        }
    }
    if let Some(moved) = last_of(tree, lines, "relocated", "relocatedCwd") {
        head.cwd = Some(moved);
    }
    head
}

/// A line parsed as `JSON.parse` reads it; `None` when it cannot be read.
fn parsed(lines: &dyn LineSource, span: LineSpan) -> Option<Value> {
    let bytes = lines.line(span).ok()?;
    jsstr::parse_value(&bytes).ok()
}

/// A non-empty string value.
fn nonempty(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The last non-empty string `field` of the bookkeeping lines of type `kind`.
fn last_of(tree: &Tree, lines: &dyn LineSource, kind: &str, field: &str) -> Option<String> {
    tree.ext()
        .asides()
        .iter()
        .rev()
        .filter(|a| a.kind == kind)
        .find_map(|a| nonempty(parsed(lines, a.span)?.get(field)))
}

/// The name Claude Code gives the session, before it falls back to the first prompt (`_2e`).
pub fn name(tree: &Tree, lines: &dyn LineSource) -> Option<String> {
    [
        ("agent-name", "agentName"),
        ("custom-title", "customTitle"),
        ("ai-title", "aiTitle"),
        ("summary", "summary"),
    ]
    .into_iter()
    .find_map(|(kind, field)| last_of(tree, lines, kind, field))
    .map(|n| jsstr::trim(&n).to_owned())
    .filter(|n| !n.is_empty())
}

/// Claude Code's first prompt (`dLt` over the lines in file order; see the module docs).
pub fn first_prompt(tree: &Tree, lines: &dyn LineSource) -> Option<String> {
    let mut command = None;
    for node in tree.nodes() {
        let Kind::User {
            meta: false,
            compact_summary: false,
            tool_result: false,
            ..
        } = node.entry.kind
        else {
            continue;
        };
        let Some(v) = parsed(lines, node.entry.span) else {
            continue;
        };
        let texts: Vec<&str> = match v.get("message").and_then(|m| m.get("content")) {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(blocks)) => {
                if blocks
                    .iter()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                {
                    continue;
                }
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect()
            }
            _ => continue,
        };
        for text in texts {
            let text = text.replace('\n', " ");
            let text = jsstr::trim(&text);
            if text.is_empty() {
                continue;
            }
            if let Some(name) = between(text, "<command-name>", "</command-name>") {
                command.get_or_insert_with(|| name.to_owned());
                continue;
            }
            if let Some(input) = between(text, "<bash-input>", "</bash-input>") {
                return Some(format!("! {}", jsstr::trim(input)));
            }
            if is_markup(text) {
                continue;
            }
            return Some(text.to_owned());
        }
    }
    command
}

/// The text between the first `open` and the next `close` after it.
fn between<'t>(text: &'t str, open: &str, close: &str) -> Option<&'t str> {
    let from = text.find(open)? + open.len();
    let len = text[from..].find(close)?;
    Some(&text[from..from + len])
}

/// `/^(?:\s*<[a-z][\w-]*[\s>]|\[Request interrupted by user[^\]]*\])/`: a text that opens with
/// a tag (a command's output, a reminder) or is an interruption notice.
fn is_markup(text: &str) -> bool {
    let t = text.trim_start();
    if let Some(rest) = t.strip_prefix('<') {
        let mut chars = rest.chars();
        if !chars.next().is_some_and(|c| c.is_ascii_lowercase()) {
            return false;
        }
        for c in chars {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                continue;
            }
            return c == '>' || c.is_whitespace();
        }
        return false;
    }
    t.strip_prefix("[Request interrupted by user")
        .is_some_and(|rest| rest.contains(']'))
}

/// `P$` on the loaded path to `leaf`: the usage of the last response that is not synthetic.
fn context_tokens(tree: &Tree, lines: &dyn LineSource, leaf: NodeIdx) -> Option<u64> {
    let path = super::path_to(tree, leaf);
    // The first response from the end with a `usage` decides, as in Claude Code (a usage
    // without its counts gives no number there either).
    let usage = path.iter().rev().find_map(|&n| {
        let Kind::Assistant { model, .. } = &tree.node(n).entry.kind else {
            return None;
        };
        if model.as_deref() == Some(SYNTHETIC) {
            return None;
        }
        parsed(lines, tree.node(n).entry.span)?
            .get_mut("message")?
            .get_mut("usage")
            .map(Value::take)
    })?;
    let count = |k: &str| usage.get(k).and_then(Value::as_u64);
    Some(
        count("input_tokens")?
            + count("cache_creation_input_tokens").unwrap_or(0)
            + count("cache_read_input_tokens").unwrap_or(0)
            + count("output_tokens")?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_interruptions_are_no_prompt() {
        assert!(is_markup("<local-command-stdout>x</local-command-stdout>"));
        assert!(is_markup("  <system-reminder>\nx"));
        assert!(is_markup("[Request interrupted by user for tool use]"));
        assert!(!is_markup("<3 this"));
        assert!(!is_markup("<A>"));
        assert!(!is_markup("Run a command"));
        assert_eq!(
            between(
                "<command-name>/compact</command-name>",
                "<command-name>",
                "</command-name>"
            ),
            Some("/compact")
        );
    }
}
