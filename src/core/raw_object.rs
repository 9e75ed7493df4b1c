//! A JSON object read as an ordered list of (key, raw value) pairs, for the few places where
//! sessiond must change one field of an entry and write the rest back untouched; and
//! [`rewrite_path_field`], one path-valued field changed in a line of compact JSON, byte for byte
//! around it (a moved project's cwd).
//!
//! Why not `serde_json::Value`: its numbers are re-printed (`1e3` becomes `1000.0`) and nested
//! text is re-escaped. Here every value we do not touch is written back as the exact bytes it
//! was read from; only the keys are re-escaped. Duplicate keys follow `JSON.parse`: the key keeps
//! its first position and takes its last value. (One JavaScript rule is not emulated: object
//! keys that look like array indices, `"0"`, `"1"`..., are enumerated first by JavaScript. pi
//! entries have no such keys.)

use std::borrow::Cow;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::js::jsstr;

/// An object's fields in file order, values as raw JSON borrowed from the line when unchanged.
#[derive(Clone, Debug, Default)]
pub struct RawObject<'a> {
    fields: Vec<(String, Cow<'a, RawValue>)>,
}

impl<'a> RawObject<'a> {
    /// Reads a JSON object. Errors: the text is not JSON, or not an object.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        Self::read(serde_json::Deserializer::from_slice(bytes))
    }

    /// [`RawObject::parse`] of text already known to be UTF-8: its fields are not checked
    /// again one by one (a message rendered from a line checked as a whole).
    pub fn parse_text(text: &'a str) -> Result<Self, String> {
        Self::read(serde_json::Deserializer::from_str(text))
    }

    fn read<R: serde_json::de::Read<'a>>(
        mut de: serde_json::Deserializer<R>,
    ) -> Result<Self, String> {
        let obj = (&mut de)
            .deserialize_any(ObjectVisitor)
            .map_err(|e| e.to_string())?;
        de.end().map_err(|e| e.to_string())?;
        obj.ok_or_else(|| "the JSON value is not an object".to_owned())
    }

    /// An empty object.
    pub fn new() -> Self {
        RawObject { fields: Vec::new() }
    }

    /// The raw value of a field.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The text of a string field (`None` when absent or not a string).
    pub fn get_str(&self, key: &str) -> Option<Cow<'_, str>> {
        self.get(key).and_then(jsstr::decode_str)
    }

    /// Whether the object has this key.
    pub fn contains(&self, key: &str) -> bool {
        self.fields.iter().any(|(k, _)| k == key)
    }

    /// Sets a field: replaced in place when present (JavaScript assignment keeps the key's
    /// position), appended otherwise.
    pub fn set(&mut self, key: &str, value: Box<RawValue>) {
        self.put(key, Cow::Owned(value));
    }

    /// [`RawObject::set`] for a value that may still borrow from a line (moved, not copied).
    pub fn put(&mut self, key: &str, value: Cow<'a, RawValue>) {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.fields.push((key.to_owned(), value)),
        }
    }

    /// Removes a field and returns its value (the other fields keep their order).
    pub fn take(&mut self, key: &str) -> Option<Cow<'a, RawValue>> {
        let at = self.fields.iter().position(|(k, _)| k == key)?;
        Some(self.fields.remove(at).1)
    }

    /// Sets a field to a serializable value (a string, `null`, a number...).
    pub fn set_value<T: serde::Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        if let Ok(raw) = RawValue::from_string(json_text(value)) {
            self.set(key, raw);
        }
    }

    /// Removes a field (JavaScript `delete`).
    pub fn remove(&mut self, key: &str) {
        self.fields.retain(|(k, _)| k != key);
    }

    /// The fields in order.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.fields.iter().map(|(k, v)| (k.as_str(), v.as_ref()))
    }

    /// Appends a field without checking for an existing key (for building new objects in a
    /// chosen key order).
    pub fn push(&mut self, key: &str, value: Cow<'a, RawValue>) {
        self.fields.push((key.to_owned(), value));
    }

    /// The object as a raw JSON value.
    pub fn to_raw(&self) -> Box<RawValue> {
        RawValue::from_string(self.to_line()).unwrap_or_else(|_| RawValue::NULL.to_owned())
    }

    /// The object as one line of compact JSON (no newline).
    pub fn to_line(&self) -> String {
        let mut out = String::with_capacity(
            2 + self
                .fields
                .iter()
                .map(|(k, v)| k.len() + v.get().len() + 4)
                .sum::<usize>(),
        );
        out.push('{');
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&json_text(k));
            out.push(':');
            out.push_str(v.get());
        }
        out.push('}');
        out
    }
}

/// A raw JSON string value for `text`, with lone surrogates written as pi writes them.
pub fn raw_string(text: &str) -> Box<RawValue> {
    RawValue::from_string(json_text(text)).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// `value` as JSON text, with decoded lone surrogates written back as `\udXXX` escapes (see
/// [`jsstr::restore_json`]); `null` if it cannot be serialized.
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    match serde_json::to_string(value) {
        Ok(text) => match jsstr::restore_json(&text) {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(restored) => restored,
        },
        Err(_) => "null".to_owned(),
    }
}

/// `null` or a raw JSON string.
pub fn raw_opt_string(text: Option<&str>) -> Box<RawValue> {
    text.map_or_else(|| RawValue::NULL.to_owned(), raw_string)
}

/// The raw value of one field of the JSON object `text` (the last one, as `JSON.parse` keeps
/// duplicates), read without collecting the other fields: `Ok(None)` when the object has no
/// such field. Accepts exactly what [`RawObject::parse_text`] accepts (keys compared as
/// `JSON.parse` decodes them). Errors: the text is not JSON, or not an object.
pub fn raw_field<'a>(text: &'a str, key: &str) -> Result<Option<&'a RawValue>, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let found = (&mut de)
        .deserialize_map(FieldVisitor { key })
        .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(found)
}

/// Visits an object for one field's raw value (see [`raw_field`]).
struct FieldVisitor<'k> {
    key: &'k str,
}

impl<'de> Visitor<'de> for FieldVisitor<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(wanted) = map.next_key_seed(KeyIs(self.key))? {
            if wanted {
                found = Some(map.next_value::<&'de RawValue>()?);
            } else {
                map.next_value::<de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Reads an object key as [`JsKey`] does and tells whether it is the given key.
struct KeyIs<'k>(&'k str);

impl<'de> de::DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_bytes(self)
    }
}

impl Visitor<'_> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_bytes<E>(self, b: &[u8]) -> Result<bool, E> {
        // A lone surrogate escape arrives as WTF-8, which no `&str` key equals.
        Ok(b == self.0.as_bytes())
    }
    fn visit_str<E>(self, s: &str) -> Result<bool, E> {
        Ok(s == self.0)
    }
}

/// An object key as `JSON.parse` reads it: read through serde_json's unvalidated byte path, so
/// a lone surrogate escape arrives (as WTF-8) and is held as a [`jsstr::MARK`] pair.
struct JsKey(String);

impl<'de> serde::Deserialize<'de> for JsKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = JsKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_bytes<E>(self, b: &[u8]) -> Result<JsKey, E> {
                Ok(JsKey(jsstr::from_wtf8(b).into_owned()))
            }
            fn visit_str<E>(self, s: &str) -> Result<JsKey, E> {
                Ok(JsKey(s.to_owned()))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// Visits an object into a [`RawObject`]; any other JSON value gives `None`.
struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Option<RawObject<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut obj = RawObject::new();
        while let Some(JsKey(key)) = map.next_key::<JsKey>()? {
            let value: &'de RawValue = map.next_value()?;
            match obj.fields.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => *v = Cow::Borrowed(value),
                None => obj.fields.push((key, Cow::Borrowed(value))),
            }
        }
        Ok(Some(obj))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    crate::core::scalars::visit_scalars!(Self::Value, _ => None);
}

/// `line` with every `"<field>":"<old>…"` (compact JSON, as the agents write it) whose value
/// is `old` or a path below it given `new` in its place; the rest of the line byte for byte.
pub fn rewrite_path_field(line: &[u8], field: &str, old: &str, new: &str) -> Vec<u8> {
    let quote = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let old_q = quote(old);
    let new_q = quote(new);
    // The value's opening quote and its text, without the closing quote: `old` whole, or
    // followed by `/`.
    let key = format!("\"{field}\":");
    let old_open = &old_q[..old_q.len() - 1];
    let new_open = &new_q[..new_q.len() - 1];
    let mut out = Vec::with_capacity(line.len() + 16);
    let mut rest = line;
    while let Some(at) = memchr::memmem::find(rest, key.as_bytes()) {
        let value = &rest[at + key.len()..];
        out.extend_from_slice(&rest[..at + key.len()]);
        let follows = value.get(old_open.len()).copied();
        if value.starts_with(old_open.as_bytes()) && matches!(follows, Some(b'"' | b'/')) {
            out.extend_from_slice(new_open.as_bytes());
            rest = &value[old_open.len()..];
        } else {
            rest = value;
        }
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_old_cwd_and_paths_below_it_change() {
        let line = br#"{"cwd":"/a/b","x":{"cwd":"/a/b/c"},"y":"/a/b","z":{"cwd":"/a/bc"}}"#;
        let out = rewrite_path_field(line, "cwd", "/a/b", "/n");
        assert_eq!(
            out,
            br#"{"cwd":"/n","x":{"cwd":"/n/c"},"y":"/a/b","z":{"cwd":"/a/bc"}}"#.to_vec()
        );
    }

    #[test]
    fn one_field_is_read_as_the_whole_object_reads_it() {
        let lines: [&str; 6] = [
            r#"{"type":"message","message":{"role":"user","content":"a\u00e9"},"x":[1,{"y":2}]}"#,
            r#"{"message":1,"message":{"role":"assistant"}}"#,
            r#"{"\u006dessage": {"role" : "user"} }"#,
            r#"{"type":"label","bad\ud800":"x"}"#,
            r#"{}"#,
            r#"{"message":null}"#,
        ];
        for line in lines {
            let mut whole = RawObject::parse_text(line).unwrap();
            let expected = whole.take("message").map(|v| v.get().to_owned());
            let got = raw_field(line, "message")
                .unwrap()
                .map(|v| v.get().to_owned());
            assert_eq!(got, expected, "{line}");
        }
        for bad in [
            "[1,2]",
            "{\"message\":1",
            "{\"message\":1} x",
            "\"message\"",
            "",
        ] {
            assert!(RawObject::parse_text(bad).is_err(), "{bad}");
            assert!(raw_field(bad, "message").is_err(), "{bad}");
        }
    }

    #[test]
    fn untouched_values_keep_their_bytes() {
        let line = br#"{"a":1e3,"b":{"x": "\u00e9"},"c":null}"#;
        let mut o = RawObject::parse(line).unwrap();
        o.set_value("c", "p");
        o.set_value("d", &7);
        assert_eq!(
            o.to_line(),
            r#"{"a":1e3,"b":{"x": "\u00e9"},"c":"p","d":7}"#
        );
    }

    #[test]
    fn duplicate_keys_keep_first_position_last_value() {
        let o = RawObject::parse(br#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(o.to_line(), r#"{"a":3,"b":2}"#);
    }

    #[test]
    fn non_objects_are_refused() {
        assert!(RawObject::parse(b"[1]").is_err());
        assert!(RawObject::parse(b"{").is_err());
        assert!(RawObject::parse(b"{} x").is_err());
    }
}
