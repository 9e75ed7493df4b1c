//! What a rewind of a pi session reads from it ([`crate::core::rewind`] works out the rest):
//! on the path from the root to the leaf, every `write`, `edit` and whole-file `read` call
//! whose tool result says it applied (`isError` false), in the order of their results, each
//! marked before or after the entry. pi 1.6.0's arguments are read as its tools read them
//! ([`edit::edit_call`]: `{path, edits: [{oldText, newText}]}` and the older `{path, oldText,
//! newText}`; `write`: `{path, content}`); an edit's result keeps its patch
//! (`details.patch`, pi 1.6.0) or, in older files, a display diff (`details.diff`) whose
//! removed lines check an undo. A read counts when it read the whole file as text: no
//! `offset`/`limit`, no truncation (`details.truncation`), not an image.

use std::collections::HashMap;

use serde_json::Value;

use super::verify::edit;
use crate::core::rewind::{Change, EditRecord, Record, Records};
use crate::core::tree::NodeIdx;
use crate::core::verify::tool_call_blocks;
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::{EntryKind, Role};
use crate::dialect::pi::render::{LineSource, RenderError, content_blocks, line_value};

/// pi's edit tool, for [`crate::core::verify::ApplyEdit`].
fn apply(text: &str, edits: &[crate::core::verify::Replace]) -> Option<String> {
    edit::apply_edit(text, edits).ok()
}

/// A call waiting for its result.
struct Pending {
    name: String,
    args: Value,
}

/// The removed lines of pi's older display diff (`-  87 text`): (line number, text).
fn removed_lines(diff: &str) -> Vec<(usize, String)> {
    diff.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix('-')?;
            let trimmed = rest.trim_start_matches(' ');
            let (num, text) = trimmed.split_once(' ').unwrap_or((trimmed, ""));
            Some((num.parse().ok()?, text.to_owned()))
        })
        .collect()
}

/// Reads the records of the path to `leaf`; `entry` is the node rewound to (on that path).
/// Errors: a line that cannot be read again or changed since the tree was built.
pub fn collect(
    tree: &Tree,
    leaf: Option<NodeIdx>,
    entry: NodeIdx,
    source: &dyn LineSource,
) -> Result<Records, RenderError> {
    let path = tree.path_to(leaf);
    let entry_pos = path.iter().position(|&n| n == entry);
    let mut pending: HashMap<String, Pending> = HashMap::new();
    let mut records = Vec::new();
    for (pos, &n) in path.iter().enumerate() {
        let EntryKind::Message(info) = &tree.node(n).entry.kind else {
            continue;
        };
        match info.role {
            Role::Assistant if !info.tool_call_ids().is_empty() => {
                let v = line_value(tree, n, source)?;
                for (_, block, id, name) in tool_call_blocks(content_blocks(&v), "toolCall") {
                    if matches!(name, "write" | "edit" | "read") {
                        pending.insert(
                            id.to_owned(),
                            Pending {
                                name: name.to_owned(),
                                args: block.get("arguments").cloned().unwrap_or(Value::Null),
                            },
                        );
                    }
                }
            }
            Role::ToolResult => {
                let Some(id) = info.tool_call_id() else {
                    continue;
                };
                let Some(call) = pending.remove(id.as_ref()) else {
                    continue;
                };
                let v = line_value(tree, n, source)?;
                let m = v.get("message").cloned().unwrap_or(Value::Null);
                if m.get("isError").and_then(Value::as_bool).unwrap_or(false) {
                    continue;
                }
                let Some((path_arg, change)) = change_of(&call, &m) else {
                    continue;
                };
                records.push(Record {
                    entry_id: tree.node(n).entry.id.to_string(),
                    tool_call_id: id.to_string(),
                    path: path_arg,
                    change,
                    after: entry_pos.is_some_and(|e| pos > e),
                });
            }
            _ => {}
        }
    }
    Ok(Records {
        session_cwd: tree.header().cwd.clone(),
        records,
        entry_id: tree.node(entry).entry.id.to_string(),
        leaf_id: leaf.map(|l| tree.node(l).entry.id.to_string()),
        entry_time_ms: tree.node(entry).entry.time_ms.ms(),
    })
}

/// The change a successful call made (or, for a read, saw), with its path argument.
fn change_of(call: &Pending, result: &Value) -> Option<(String, Change)> {
    let details = result.get("details");
    match call.name.as_str() {
        "write" => {
            let (p, content) = edit::write_call(&call.args)?;
            Some((
                p,
                Change::Write {
                    content: content.to_owned(),
                    // pi's result says "Successfully wrote to PATH" either way.
                    created: None,
                    before: None,
                },
            ))
        }
        "edit" => {
            let c = edit::edit_call(&call.args).ok()?;
            let text = |k: &str| details.and_then(|d| d.get(k)).and_then(Value::as_str);
            let record = EditRecord {
                patch: text("patch").map(str::to_owned),
                removed_lines: text("diff").map(removed_lines).unwrap_or_default(),
                before: None,
            };
            Some((
                c.path,
                Change::Edit {
                    edits: c.edits,
                    apply,
                    record,
                },
            ))
        }
        "read" => {
            let a = &call.args;
            let partial = ["offset", "limit"]
                .iter()
                .any(|k| a.get(*k).is_some_and(|v| !v.is_null()));
            let truncated = details
                .and_then(|d| d.get("truncation"))
                .is_some_and(|t| !t.is_null());
            if partial || truncated {
                return None;
            }
            let blocks = result.get("content").and_then(Value::as_array)?;
            let mut text = String::new();
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => text.push_str(b.get("text").and_then(Value::as_str)?),
                    _ => return None,
                }
            }
            // pi's read of an image answers with a note, not the file's text.
            if text.starts_with("Read image file") {
                return None;
            }
            let p = a.get("path").and_then(Value::as_str)?;
            Some((p.to_owned(), Change::Read { text }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_lines_of_the_display_diff() {
        let d = "      ...\n   83   get state();\n-  87   get messages(): Message[];\n+  87   get x();\n";
        assert_eq!(
            removed_lines(d),
            vec![(87, "  get messages(): Message[];".to_owned())]
        );
    }
}
