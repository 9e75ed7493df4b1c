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

use super::files::FileLists;
use super::js;
use crate::core::format::EntryId;

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

/// `new Date(ms).toISOString()`: `YYYY-MM-DDTHH:mm:ss.sssZ` (years outside 0..=9999 use the
/// six-digit signed form).
pub fn iso_timestamp(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let year = if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else {
        format!("{}{:06}", if y < 0 { '-' } else { '+' }, y.abs())
    };
    format!(
        "{year}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
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
        e.insert(
            "timestamp".into(),
            Value::String(iso_timestamp(self.time_ms)),
        );
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

    /// The entry as one JSON line without the newline, serialized as `JSON.stringify` does
    /// (`lone`: whether the session's lone surrogates were mapped; see [`LoneSurrogates`]).
    pub fn to_json(&self) -> String {
        js::stringify(&self.to_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_timestamps_match_to_iso_string() {
        assert_eq!(iso_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_timestamp(1_767_225_600_123), "2026-01-01T00:00:00.123Z");
        assert_eq!(iso_timestamp(-1), "1969-12-31T23:59:59.999Z");
    }

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
