//! The searchable text of one entry, as every dialect gives it to the full-text index
//! (`sessiond search`, `session/search`): its kind (a role or an entry type), its text, and its
//! thinking kept apart so that a search includes it only when asked. Each field is cut at
//! [`MAX_FIELD_BYTES`] so that one huge tool output cannot dominate the index. Pure.

use serde_json::Value;

use crate::js::jsstr;

/// Longest text indexed per entry and field, in bytes (cut at a character boundary).
pub const MAX_FIELD_BYTES: usize = 64 * 1024;

/// The searchable text of an entry.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EntryText {
    /// A message role (`user`, `assistant`, `toolResult`, `bashExecution`, `custom`, ...), or
    /// an entry type (`compaction`, `branch_summary`, `label`, `session_info`,
    /// `custom_message`: [`is_entry_type`]).
    pub kind: String,
    /// Everything searchable but thinking, parts separated by newlines.
    pub text: String,
    /// Thinking blocks, searched only on request.
    pub thinking: String,
}

impl EntryText {
    /// An empty text of `kind`.
    pub fn new(kind: impl Into<String>) -> Self {
        EntryText {
            kind: kind.into(),
            ..EntryText::default()
        }
    }

    /// `Some(self)` when there is something to find.
    pub fn nonempty(self) -> Option<Self> {
        (!self.text.is_empty() || !self.thinking.is_empty()).then_some(self)
    }
}

/// The kinds that are entry types rather than message roles (a hit names them `entryType`).
pub const ENTRY_TYPES: [&str; 5] = [
    "compaction",
    "branch_summary",
    "label",
    "session_info",
    "custom_message",
];

/// Whether a kind is an entry type rather than a message role.
pub fn is_entry_type(kind: &str) -> bool {
    ENTRY_TYPES.contains(&kind)
}

/// Appends `s` to a field on a line of its own, up to [`MAX_FIELD_BYTES`] in all.
pub fn push(out: &mut String, s: &str) {
    if s.is_empty() || out.len() >= MAX_FIELD_BYTES {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    let room = MAX_FIELD_BYTES.saturating_sub(out.len());
    let mut end = s.len().min(room);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&jsstr::display(&s[..end]));
}

/// A string field of an object (`None` when absent or not a string).
pub fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// Appends the strings of a JSON value (tool-call arguments), keys and values, in order.
pub fn strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => push(out, s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => {
            for (k, x) in o {
                push(out, k);
                strings(x, out);
            }
        }
        Value::Number(n) => push(out, &n.to_string()),
        Value::Bool(_) | Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut() {
        let big = "é".repeat(MAX_FIELD_BYTES);
        let mut out = String::new();
        push(&mut out, &big);
        assert!(out.len() <= MAX_FIELD_BYTES && out.len() > MAX_FIELD_BYTES - 2);
    }
}
