//! Turns a [`Projection`] into the model's messages, reading each context entry's line
//! through a [`LineSource`]. Matches pi 1.6.0 `sessionEntryToContextMessages`,
//! `projectContextEntry` and the `create*Message` helpers in `messages.js`.
//!
//! A `message` entry's message is passed through byte-for-byte unless pi changes it
//! (null content, the version-2 `hookMessage` role, a context edit); only then is it
//! re-serialized, keeping key order (`{...message, content}` semantics).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use thiserror::Error;

use super::format::{EntryKind, LineSpan, Role};
use super::projection::{ContextItem, Contribution, Projection};
use super::timestamp::js_time_of_raw;
use super::tree::Tree;

/// Gives the bytes of an entry's line (without the newline). Implemented by `storage`.
pub trait LineSource {
    /// Reads the line at `span`.
    fn line(&self, span: LineSpan) -> std::io::Result<Cow<'_, [u8]>>;
}

/// Why a message could not be rendered.
#[derive(Debug, Error)]
pub enum RenderError {
    /// The entry's line could not be read.
    #[error("cannot read line {line} (entry {id}): {source}")]
    Io {
        line: u32,
        id: String,
        source: std::io::Error,
    },
    /// The line no longer holds the entry it held when the tree was built.
    #[error("line {line} (entry {id}) changed since the session was read: {detail}")]
    Changed {
        line: u32,
        id: String,
        detail: String,
    },
}

/// One rendered message and the entry it came from.
#[derive(Debug)]
pub struct RenderedMessage {
    pub entry: super::tree::NodeIdx,
    pub message: Box<RawValue>,
}

/// Renders every message of `projection`, calling `emit` in order (so large contexts can
/// stream without being held in memory).
pub fn for_each_message(
    tree: &Tree,
    projection: &Projection,
    source: &dyn LineSource,
    mut emit: impl FnMut(RenderedMessage) -> std::io::Result<()>,
) -> Result<(), RenderError> {
    for item in &projection.items {
        for message in render_item(tree, item, source)? {
            let span = tree.node(item.node).entry.span;
            emit(RenderedMessage {
                entry: item.node,
                message,
            })
            .map_err(|source| RenderError::Io {
                line: span.line,
                id: tree.node(item.node).entry.id.to_string(),
                source,
            })?;
        }
    }
    Ok(())
}

/// The messages one context entry contributes (zero, one, or two for a compaction with a
/// `systemMessage` checkpoint).
pub fn render_item(
    tree: &Tree,
    item: &ContextItem,
    source: &dyn LineSource,
) -> Result<Vec<Box<RawValue>>, RenderError> {
    let entry = &tree.node(item.node).entry;
    let changed = |detail: &str| RenderError::Changed {
        line: entry.span.line,
        id: entry.id.to_string(),
        detail: detail.to_owned(),
    };
    if let Contribution::Nothing(_) = item.contribution {
        return Ok(Vec::new());
    }
    let bytes = source.line(entry.span).map_err(|source| RenderError::Io {
        line: entry.span.line,
        id: entry.id.to_string(),
        source,
    })?;
    let edit = match item.edit {
        Some(e) => Some(edit_replacement(tree, e, source)?),
        None => None,
    };
    let messages = match item.contribution {
        Contribution::Message => {
            let EntryKind::Message(info) = &entry.kind else {
                return Err(changed("not a message entry"));
            };
            let needs_rewrite =
                info.content_missing || info.role == Role::HookMessage || edit.is_some();
            if !needs_rewrite {
                #[derive(Deserialize)]
                struct M<'a> {
                    #[serde(borrow)]
                    message: &'a RawValue,
                }
                let m: M<'_> =
                    serde_json::from_slice(&bytes).map_err(|e| changed(&e.to_string()))?;
                vec![m.message.to_owned()]
            } else {
                let mut line = parse_object(&bytes).map_err(|e| changed(&e))?;
                let Some(Value::Object(mut message)) = line.remove("message") else {
                    return Err(changed("the message is not an object"));
                };
                if info.role == Role::HookMessage {
                    message.insert("role".into(), Value::String("custom".into()));
                }
                let content_missing = message.get("content").is_none_or(Value::is_null);
                match info.role {
                    Role::System if content_missing => {
                        message.insert("content".into(), Value::String(String::new()));
                    }
                    Role::User | Role::Assistant | Role::ToolResult if content_missing => {
                        message.insert("content".into(), Value::Array(Vec::new()));
                    }
                    _ => {}
                }
                let role = match info.role {
                    Role::HookMessage => &Role::Custom,
                    ref r => r,
                };
                apply_edit(&mut message, role, edit.as_ref());
                vec![to_raw(&Value::Object(message))]
            }
        }
        Contribution::CustomMessage => {
            let mut line = parse_object(&bytes).map_err(|e| changed(&e))?;
            let mut m = Map::new();
            m.insert("role".into(), Value::String("custom".into()));
            if let Some(v) = line.remove("customType") {
                m.insert("customType".into(), v);
            }
            let content = match line.remove("content") {
                None | Some(Value::Null) => Value::Array(Vec::new()),
                Some(v) => v,
            };
            m.insert("content".into(), content);
            for key in ["display", "details"] {
                if let Some(v) = line.remove(key) {
                    m.insert(key.into(), v);
                }
            }
            m.insert("timestamp".into(), js_time(&line));
            apply_edit(&mut m, &Role::Custom, edit.as_ref());
            vec![to_raw(&Value::Object(m))]
        }
        Contribution::BranchSummary => {
            let mut line = parse_object(&bytes).map_err(|e| changed(&e))?;
            let mut m = Map::new();
            m.insert("role".into(), Value::String("branchSummary".into()));
            for key in ["summary", "fromId"] {
                if let Some(v) = line.remove(key) {
                    m.insert(key.into(), v);
                }
            }
            m.insert("timestamp".into(), js_time(&line));
            vec![to_raw(&Value::Object(m))]
        }
        Contribution::CompactionSummary {
            with_system_message,
        } => {
            let mut line = parse_object(&bytes).map_err(|e| changed(&e))?;
            let mut out = Vec::with_capacity(2);
            if with_system_message {
                if let Some(system) = line.remove("systemMessage") {
                    out.push(to_raw(&system));
                }
            }
            let mut m = Map::new();
            m.insert("role".into(), Value::String("compactionSummary".into()));
            for key in ["summary", "tokensBefore"] {
                if let Some(v) = line.remove(key) {
                    m.insert(key.into(), v);
                }
            }
            m.insert("timestamp".into(), js_time(&line));
            out.push(to_raw(&Value::Object(m)));
            out
        }
        Contribution::Nothing(_) => Vec::new(),
    };
    Ok(messages)
}

/// The replacement of a context edit: `Some(content)` or `None` when `content` is absent.
struct Replacement(Option<Value>);

fn edit_replacement(
    tree: &Tree,
    edit: super::tree::NodeIdx,
    source: &dyn LineSource,
) -> Result<Replacement, RenderError> {
    let entry = &tree.node(edit).entry;
    let bytes = source.line(entry.span).map_err(|source| RenderError::Io {
        line: entry.span.line,
        id: entry.id.to_string(),
        source,
    })?;
    let mut line = parse_object(&bytes).map_err(|detail| RenderError::Changed {
        line: entry.span.line,
        id: entry.id.to_string(),
        detail,
    })?;
    Ok(match line.remove("replacement") {
        Some(Value::Object(mut r)) => Replacement(r.remove("content")),
        _ => Replacement(None),
    })
}

/// pi's `projectContextEntry` for a non-null replacement: user, assistant, toolResult and
/// custom messages get the replacement content (a string becomes one text block for
/// assistant and toolResult); other roles are unchanged.
fn apply_edit(message: &mut Map<String, Value>, role: &Role, edit: Option<&Replacement>) {
    let Some(Replacement(content)) = edit else {
        return;
    };
    if !matches!(
        role,
        Role::User | Role::Assistant | Role::ToolResult | Role::Custom
    ) {
        return;
    }
    match content {
        None => {
            message.shift_remove("content");
        }
        Some(Value::String(text)) if matches!(role, Role::Assistant | Role::ToolResult) => {
            let mut block = Map::new();
            block.insert("type".into(), Value::String("text".into()));
            block.insert("text".into(), Value::String(text.clone()));
            message.insert("content".into(), Value::Array(vec![Value::Object(block)]));
        }
        Some(v) => {
            message.insert("content".into(), v.clone());
        }
    }
}

/// `new Date(entry.timestamp).getTime()` as JSON (`null` for NaN).
fn js_time(line: &Map<String, Value>) -> Value {
    let raw = line
        .get("timestamp")
        .and_then(|v| serde_json::value::to_raw_value(v).ok());
    match js_time_of_raw(raw.as_deref()) {
        Some(ms) => Value::from(ms),
        None => Value::Null,
    }
}

fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("the line is not an object".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn to_raw(v: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).unwrap_or_else(|_| RawValue::NULL.to_owned())
}
