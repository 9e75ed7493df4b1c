//! The compaction entry line, as pi 1.6.0 `SessionManager.appendCompaction` writes it after a
//! manual compaction: `{type, id, parentId, timestamp, summary, firstKeptEntryId,
//! tokensBefore, details: {readFiles, modifiedFiles}, fromHook: false, systemMessage?}`.
//!
//! `systemMessage` is pi-ai `getCurrentSystemMessage` of the context at the leaf (every system
//! message replayed into one) with its `timestamp` replaced by the entry's time in epoch
//! milliseconds; it is present exactly when that function returns a message (some system
//! message in the context has a timestamp key, or some tool is declared). `usage` is absent
//! because no model was called, as pi omits an `undefined` field.

use serde_json::{Map, Value};

use crate::dialect::pi::compaction::files::FileLists;
use crate::dialect::pi::format::EntryId;
use crate::js::timestamp::format_iso;
use crate::js::value as js;

/// Everything a compaction entry holds.
#[derive(Clone, Debug)]
pub struct CompactionEntry {
    /// The new entry's id.
    pub id: EntryId,
    /// The leaf the entry is appended under.
    pub parent_id: Option<EntryId>,
    /// Epoch milliseconds of the write.
    pub time_ms: i64,
    /// The `summary` field, written as given.
    pub summary: String,
    /// Where the kept range starts (`firstKeptEntryId`).
    pub first_kept_entry_id: EntryId,
    /// `NaN` is written as `null`, as `JSON.stringify` does.
    pub tokens_before: f64,
    /// `readFiles`/`modifiedFiles`, stored in `details`.
    pub file_lists: FileLists,
    /// The replayed system message (its timestamp is replaced by `time_ms` when written).
    pub system_message: Option<Value>,
}

/// A JavaScript number as JSON (`NaN` and infinities become `null`).
pub fn js_number(f: f64) -> Value {
    if !f.is_finite() {
        return Value::Null;
    }
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        return Value::from(f as i64);
    }
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

impl CompactionEntry {
    /// The system message exactly as written (its timestamp is the entry's time).
    pub fn written_system_message(&self) -> Option<Value> {
        let mut system = self.system_message.clone()?;
        if let Value::Object(m) = &mut system {
            m.insert("timestamp".into(), Value::from(self.time_ms));
        }
        Some(system)
    }

    /// The entry as a JSON object, keys in pi's order.
    pub fn to_value(&self) -> Value {
        let mut e = Map::new();
        e.insert("type".into(), Value::String("compaction".into()));
        e.insert("id".into(), Value::String(self.id.to_string()));
        e.insert(
            "parentId".into(),
            self.parent_id
                .as_ref()
                .map_or(Value::Null, |p| Value::String(p.to_string())),
        );
        e.insert("timestamp".into(), Value::String(format_iso(self.time_ms)));
        e.insert("summary".into(), Value::String(self.summary.clone()));
        e.insert(
            "firstKeptEntryId".into(),
            Value::String(self.first_kept_entry_id.to_string()),
        );
        e.insert("tokensBefore".into(), js_number(self.tokens_before));
        let mut details = Map::new();
        details.insert(
            "readFiles".into(),
            Value::from(self.file_lists.read_files.clone()),
        );
        details.insert(
            "modifiedFiles".into(),
            Value::from(self.file_lists.modified_files.clone()),
        );
        e.insert("details".into(), Value::Object(details));
        e.insert("fromHook".into(), Value::Bool(false));
        if let Some(system) = self.written_system_message() {
            e.insert("systemMessage".into(), system);
        }
        Value::Object(e)
    }

    /// The entry as one JSON line without the newline, serialized as `JSON.stringify` does.
    pub fn to_json(&self) -> String {
        js::stringify(&self.to_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_keys_are_in_pi_order() {
        let entry = CompactionEntry {
            id: EntryId::new("abcd1234"),
            parent_id: Some(EntryId::new("leaf0001")),
            time_ms: 0,
            summary: "S".into(),
            first_kept_entry_id: EntryId::new("kept0001"),
            tokens_before: 42.0,
            file_lists: FileLists {
                read_files: vec!["a".into()],
                modified_files: vec![],
            },
            system_message: None,
        };
        assert_eq!(
            entry.to_json(),
            r#"{"type":"compaction","id":"abcd1234","parentId":"leaf0001","timestamp":"1970-01-01T00:00:00.000Z","summary":"S","firstKeptEntryId":"kept0001","tokensBefore":42,"details":{"readFiles":["a"],"modifiedFiles":[]},"fromHook":false}"#
        );
    }
}
