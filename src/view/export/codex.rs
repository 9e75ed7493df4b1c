//! A Codex thread's history to a leaf as a document to read or share (`sessiond export`,
//! `session/export` on a rollout), in the same Markdown or HTML as a pi session's ([`super`]).
//! Pure: takes the thread's tree of files ([`Thread`]), a leaf and a [`LineSource`].
//!
//! The history is the path to the leaf through the thread's files: a fork's or a revert
//! segment's parent prefix first, then the file itself (`docs/codex.md` §6). Shown: user and
//! assistant messages, reasoning collapsed, each tool call (`function_call`,
//! `custom_tool_call`, `local_shell_call`) collapsed with its output (matched by `call_id`),
//! the context Codex writes itself (environment, permissions, skills, an interrupted turn)
//! collapsed, compactions marked (the model reads their replacement history in place of what
//! came before), in-file rollbacks marked, and where the history enters another file (a
//! fork, a segment). Events, turn settings, world state and token records are left out; other
//! files that continue from a line of the history are noted there. Every text goes through
//! the [`Redactor`], as for pi.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{
    Block, Build, Common, Exported, Kind, Options, Part, ResultPart, ToolResult, count_meta,
    leaf_meta, preview_of, read_values, str_of,
};
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::dialect::codex::compare::CONTEXT_OPENINGS;
use crate::dialect::codex::format::Kind as LineKind;
use crate::dialect::codex::thread::Thread;
use crate::dialect::codex::verify::output_text;
use crate::dialect::pi::render::RenderError;
use crate::js::timestamp::format_iso;

/// Openings of the messages Codex writes itself (context, not a person's words): those of user
/// messages ([`CONTEXT_OPENINGS`]) and these.
const MORE_CONTEXT_OPENINGS: [&str; 4] = [
    "<permissions instructions>",
    "<skills_instructions>",
    "<collaboration_mode>",
    "<model_switch>",
];

/// Builder state: the redactor and the counters (a rollout's history embeds no image).
struct Builder {
    c: Common,
}

impl Build for Builder {
    fn common(&mut self) -> &mut Common {
        &mut self.c
    }

    fn image_fields(_: &Value) -> Option<(&str, &str)> {
        None
    }
}

/// The text of a message's content parts.
fn content_text(item: &Value) -> String {
    crate::dialect::codex::preview::content_text(item)
}

/// Exports the history to `leaf` (`None`: nothing) of `thread` (lines through `source`) as
/// `options.format`. Errors: a line that cannot be read, or no longer holds what the tree was
/// built from ([`RenderError`]).
pub fn export(
    thread: &Thread,
    leaf: Option<NodeIdx>,
    source: &dyn LineSource,
    options: &Options,
) -> Result<Exported, RenderError> {
    let tree = &thread.tree;
    let path = tree.path_to(leaf);
    let values = read_values(tree, &path, source, |b| serde_json::from_slice::<Value>(b))?;
    let payload = |v: &Value| v.get("payload").cloned().unwrap_or(Value::Null);
    // Outputs by the call they answer, to show each inside its call.
    let mut outputs: HashMap<String, usize> = HashMap::new();
    for (i, v) in values.iter().enumerate() {
        let p = payload(v);
        if str_of(v, "type") == Some("response_item")
            && matches!(
                str_of(&p, "type"),
                Some("function_call_output" | "custom_tool_call_output")
            )
            && let Some(id) = str_of(&p, "call_id")
        {
            outputs.entry(id.to_owned()).or_insert(i);
        }
    }
    let mut b = Builder {
        c: Common::new(options),
    };
    let on_path: HashSet<NodeIdx> = path.iter().copied().collect();
    let mut consumed: HashSet<usize> = HashSet::new();
    let mut model: Option<String> = None;
    let mut blocks = Vec::new();
    for (i, &n) in path.iter().enumerate() {
        let e = &tree.node(n).entry;
        let v = &values[i];
        let p = payload(v);
        let time = e.time_ms.ms().map(format_iso);
        let block = |kind| Block {
            id: e.id.to_string(),
            time: time.clone(),
            label: None,
            kind,
        };
        let kind = match &e.kind {
            _ if consumed.contains(&i) => None,
            LineKind::SessionMeta if i > 0 => {
                let (file, _) = thread.origin[n as usize];
                let f = &thread.files[file];
                let name = f.path.file_name().unwrap_or_default().to_string_lossy();
                Some(Kind::Note {
                    class: "compaction",
                    title: match f.kind() {
                        "fork" => format!("The history goes on in the fork {name}"),
                        _ => format!("The history goes on in the revert segment {name}"),
                    },
                    body: Some(format!(
                        "Its history_base takes the lines above (the prefix of {}); what follows is \
                         this file's own.",
                        f.base.as_ref().map_or("?", |b| b.history_id.as_str())
                    )),
                })
            }
            LineKind::TurnContext => {
                model = str_of(&p, "model").map(str::to_owned).or(model);
                None
            }
            LineKind::Compacted => Some(Kind::Note {
                class: "compaction",
                title:
                    "Compaction: the model reads its replacement history in place of everything \
                        before"
                        .into(),
                body: str_of(&p, "message").map(|m| b.redact(m)),
            }),
            LineKind::EventMsg { event } if event == "thread_rolled_back" => Some(Kind::Note {
                class: "rewind",
                title: format!(
                    "Rollback: the last {} turn(s) are dropped from what follows",
                    p.get("num_turns").unwrap_or(&Value::Null)
                ),
                body: None,
            }),
            LineKind::ResponseItem { item, role } => match (item.as_str(), role.as_deref()) {
                ("message", Some(role)) => {
                    let text = content_text(&p);
                    let mut context = CONTEXT_OPENINGS.iter().chain(&MORE_CONTEXT_OPENINGS);
                    if context.any(|o| text.starts_with(o)) || role == "developer" {
                        let summary = text.lines().next().unwrap_or("").to_owned();
                        let summary = b.redact(&summary);
                        Some(Kind::message(
                            "attachment",
                            format!("Context Codex wrote ({role} message)"),
                            None,
                            vec![Part::Collapsed {
                                summary,
                                text: b.cut(&text),
                            }],
                        ))
                    } else if role == "assistant" {
                        let meta = model.as_deref().map(|m| b.redact(m));
                        let parts = vec![Part::Text(b.redact(&text))];
                        Some(Kind::message("assistant", "Assistant", meta, parts))
                    } else {
                        let parts = vec![Part::Text(b.redact(&text))];
                        Some(Kind::message("user", "User", None, parts))
                    }
                }
                ("reasoning", _) => {
                    let text = p
                        .get("summary")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|s| str_of(s, "text"))
                                .collect::<Vec<_>>()
                                .join("\n")
                        })
                        .unwrap_or_default();
                    let thinking = if text.is_empty() {
                        "(reasoning not stored in clear)".into()
                    } else {
                        b.redact(&text)
                    };
                    let parts = vec![Part::Thinking(thinking)];
                    Some(Kind::message("assistant", "Assistant", None, parts))
                }
                ("function_call" | "custom_tool_call" | "local_shell_call", _) => {
                    b.c.tool_calls += 1;
                    let name = b.redact(str_of(&p, "name").unwrap_or(item));
                    let raw = p
                        .get("arguments")
                        .or_else(|| p.get("input"))
                        .or_else(|| p.get("action"));
                    let args_value = match raw {
                        Some(Value::String(s)) => {
                            serde_json::from_str::<Value>(s).unwrap_or(Value::String(s.clone()))
                        }
                        Some(v) => v.clone(),
                        None => Value::Null,
                    };
                    let args = match &args_value {
                        Value::String(s) => vec![(None, b.cut(s))],
                        v => b.args(Some(v)),
                    };
                    let preview = preview_of(&args);
                    let result = str_of(&p, "call_id")
                        .and_then(|id| outputs.get(id))
                        .filter(|&&k| k > i)
                        .map(|&k| {
                            consumed.insert(k);
                            let text = output_text(&payload(&values[k]));
                            ToolResult {
                                is_error: false,
                                parts: vec![ResultPart::Text(b.cut(&text))],
                            }
                        });
                    let call = Part::ToolCall {
                        name,
                        preview,
                        args,
                        result,
                    };
                    Some(Kind::message("assistant", "Assistant", None, vec![call]))
                }
                ("function_call_output" | "custom_tool_call_output", _) => {
                    let text = match p.get("output") {
                        Some(Value::String(s)) => s.clone(),
                        Some(o) => o.to_string(),
                        None => String::new(),
                    };
                    Some(Kind::message(
                        "tool-result",
                        "Tool output (its call is not in this history)",
                        None,
                        vec![Part::Collapsed {
                            summary: "output".into(),
                            text: b.cut(&text),
                        }],
                    ))
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(kind) = kind {
            blocks.push(block(kind));
        }
        // Other files that continue from this line (forks, segments not on the path).
        for &c in tree.node(n).children.as_slice() {
            if on_path.contains(&c) {
                continue;
            }
            let (file, _) = thread.origin[c as usize];
            let f = &thread.files[file];
            blocks.push(Block {
                id: tree.node(c).entry.id.to_string(),
                time: None,
                label: None,
                kind: Kind::Note {
                    class: "rewind",
                    title: format!("A {} continues from here (not shown)", f.kind()),
                    body: Some(format!(
                        "{}: {} lines, its lines named {}:…",
                        f.path.file_name().unwrap_or_default().to_string_lossy(),
                        f.nodes.len(),
                        f.tag
                    )),
                },
            });
        }
    }
    let root_meta = values.first().map(payload).unwrap_or(Value::Null);
    let thread_id = thread.thread_id().unwrap_or_default().to_owned();
    let mut meta: Vec<(&str, String)> = vec![
        ("File", options.file_name.clone()),
        ("Thread", thread_id.clone()),
        ("Format", "Codex rollout".to_owned()),
    ];
    if let Some(cwd) = str_of(&root_meta, "cwd") {
        meta.push(("Working directory", b.redact(cwd)));
    }
    if let Some(created) = path.first().and_then(|&n| tree.node(n).entry.time_ms.ms()) {
        meta.push(("Created", format_iso(created)));
    }
    meta.push(leaf_meta(tree, leaf));
    if let Some(m) = &model {
        meta.push(("Model at the leaf", b.redact(m)));
    }
    let files: Vec<usize> = {
        let mut f: Vec<usize> = path.iter().map(|&n| thread.origin[n as usize].0).collect();
        f.dedup();
        f
    };
    if files.len() > 1 || files.first() != Some(&thread.own) {
        meta.push((
            "Files",
            files
                .iter()
                .map(|&k| {
                    thread.files[k]
                        .path
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect::<Vec<_>>()
                .join(" → "),
        ));
    }
    let lines = crate::view::tree::count(path.len(), "line", "lines");
    meta.push(count_meta("History", lines, &blocks, b.c.tool_calls));
    let compactions = path
        .iter()
        .filter(|&&n| matches!(tree.node(n).entry.kind, LineKind::Compacted))
        .count();
    if compactions > 0 {
        meta.push((
            "Compactions",
            format!("{compactions} in this history; the model sees what the last one kept and what follows"),
        ));
    }
    let title = format!("Codex thread {thread_id}");
    Ok(b.c.finish(options, &title, &meta, &blocks, &[], path.len()))
}
