//! Where a `message` entry's message lies in its line, found while the probe reads the line,
//! so that rendering can hand the message on as written without reading the line as JSON a
//! second time.
//!
//! serde_json reports no positions, but a key read from text without escapes is borrowed
//! from the line. `Keyed` wraps the probe's reading of a line's top-level object and notes
//! the address of the `message` key, and whether another key follows it. pi writes the
//! message as a message entry's last field; in valid JSON its value then starts after
//! `"message"`, whitespace, `:` and whitespace, and ends before whitespace and the object's
//! closing `}`. A [`Verbatim`] keeps the start and a fingerprint of the whole line;
//! [`Verbatim::message`] gives the message only from a line with the same fingerprint, so a
//! line changed since it was read is read as JSON again, as before.
//!
//! Pure: no I/O.

use std::fmt;
use std::hash::BuildHasher;
use std::marker::PhantomData;
use std::num::NonZeroU16;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

/// The key whose value [`Keyed`] places.
const MESSAGE_KEY: &str = "message";

/// A `message` entry's message within its line, when it is the line's last field (as pi
/// writes every message entry): it starts `start` bytes into the line and ends at the `}`
/// before the line's closing `}` (and whitespace). Kept with a 32-bit fingerprint of the line:
/// 6 bytes in all, which fit in the padding of a message's node. Taken only from a line of
/// valid UTF-8 whose `message` key is written without escapes, is the object's last key, and
/// starts within 64 KiB of the line's start. (A session migrated from version 1 has `id` and
/// `parentId` after the message: its messages are read as JSON when rendered.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verbatim {
    start: NonZeroU16,
    /// The fingerprint as two halves, so that the whole is 2-byte aligned.
    fingerprint: [u16; 2],
}

impl Verbatim {
    /// The bounds of the message of `line` as [`Keyed`] found them (`keys`), with `line`'s
    /// fingerprint; `None` when the message is not the last field, its key could not be
    /// placed, or the bytes around it are not what valid JSON puts there.
    pub(crate) fn of(line: &[u8], keys: MessageKeys) -> Option<Verbatim> {
        let MessageKeys::Message(key) = keys else {
            return None;
        };
        let key_at = key.checked_sub(line.as_ptr() as usize)?;
        let after_key = key_at.checked_add(MESSAGE_KEY.len())?;
        if line.get(key_at..after_key)? != MESSAGE_KEY.as_bytes() || line.get(after_key)? != &b'"' {
            return None;
        }
        let colon = skip_space(line, after_key + 1);
        (line.get(colon)? == &b':').then_some(())?;
        let start = skip_space(line, colon + 1);
        (line.get(start)? == &b'{').then_some(())?;
        (message_end(line)? > start).then_some(())?;
        Some(Verbatim {
            start: NonZeroU16::new(u16::try_from(start).ok()?)?,
            fingerprint: halves(fingerprint(line)),
        })
    }

    /// The message's JSON text in `line`, as written, when `line` is the line this was taken
    /// from (by its fingerprint); `None` otherwise.
    pub fn message<'l>(&self, line: &'l [u8]) -> Option<&'l [u8]> {
        if halves(fingerprint(line)) != self.fingerprint {
            return None;
        }
        self.message_in_read_line(line)
    }

    /// The message's JSON text in `line`, which the caller knows to be the very line this was
    /// taken from (the reader, while it holds the bytes it read): no fingerprint is checked.
    /// `None` when `line` does not end as a line with a message as its last field does.
    pub fn message_in_read_line<'l>(&self, line: &'l [u8]) -> Option<&'l [u8]> {
        line.get(usize::from(self.start.get())..message_end(line)?)
    }
}

/// Where the last field's value ends in a line holding one JSON object: after the `}` that
/// precedes the object's closing `}` (whitespace aside); `None` when the line does not end so.
fn message_end(line: &[u8]) -> Option<usize> {
    let close = back_space(line, line.len()).checked_sub(1)?;
    (line.get(close)? == &b'}').then_some(())?;
    let end = back_space(line, close);
    (line.get(end.checked_sub(1)?)? == &b'}').then_some(end)
}

/// A fingerprint as two 16-bit halves.
fn halves(fingerprint: u32) -> [u16; 2] {
    [(fingerprint >> 16) as u16, fingerprint as u16]
}

/// A 32-bit fingerprint of a line's bytes (foldhash with a fixed seed, so the same bytes give
/// the same fingerprint on every thread and in every run).
fn fingerprint(line: &[u8]) -> u32 {
    const SEED: u64 = 0x5e55_10d0;
    // The high half: foldhash mixes its output's upper bits best.
    (foldhash::quality::FixedState::with_seed(SEED).hash_one(line) >> 32) as u32
}

/// The first byte at or after `at` that is not JSON whitespace.
fn skip_space(line: &[u8], mut at: usize) -> usize {
    while line.get(at).is_some_and(|b| is_space(*b)) {
        at += 1;
    }
    at
}

/// `at` moved back over the JSON whitespace before it.
fn back_space(line: &[u8], mut at: usize) -> usize {
    while at > 0 && line.get(at - 1).is_some_and(|b| is_space(*b)) {
        at -= 1;
    }
    at
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// What [`Keyed`] saw of an object's keys: where its `message` key is, if it is the last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum MessageKeys {
    /// No `message` key (yet).
    #[default]
    Unseen,
    /// The `message` key, borrowed from the text at this address, and no key after it (yet).
    Message(usize),
    /// A key came after the `message` key, or the `message` key was written with escapes (it
    /// was decoded into a buffer of its own and cannot be placed in the line).
    Lost,
}

impl MessageKeys {
    /// Notes the next key of the object: `key` as decoded, `borrowed` when it is the line's
    /// own text (no escapes).
    fn saw(&mut self, key: &str, borrowed: bool) {
        *self = match *self {
            MessageKeys::Unseen if key == MESSAGE_KEY && borrowed => {
                MessageKeys::Message(key.as_ptr() as usize)
            }
            MessageKeys::Unseen if key == MESSAGE_KEY => MessageKeys::Lost,
            MessageKeys::Message(_) => MessageKeys::Lost,
            keys => keys,
        };
    }
}

/// An object read by `T` (a derived `Deserialize`), with where its `message` key and the key
/// after it lie. Read it from the line's own text (`serde_json::from_str`) for the keys to be
/// borrowed.
pub(crate) struct Keyed<T> {
    /// The object as `T` reads it.
    pub fields: T,
    /// Its keys, as far as [`Verbatim::of`] needs them.
    pub keys: MessageKeys,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Keyed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(KeyedVisitor(PhantomData))
    }
}

struct KeyedVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for KeyedVisitor<T> {
    type Value = Keyed<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Keyed<T>, A::Error> {
        let mut keys = MessageKeys::default();
        let fields = T::deserialize(de::value::MapAccessDeserializer::new(Noting {
            map,
            keys: &mut keys,
        }))?;
        Ok(Keyed { fields, keys })
    }
}

/// A map whose keys are noted on their way to the reader.
struct Noting<'k, A> {
    map: A,
    keys: &'k mut MessageKeys,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Noting<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.map.next_key_seed(NotedKey {
            seed,
            keys: &mut *self.keys,
        })
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// A key read as a string, noted, then handed to the reader's own key seed.
struct NotedKey<'k, K> {
    seed: K,
    keys: &'k mut MessageKeys,
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for NotedKey<'_, K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<K::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, K: DeserializeSeed<'de>> Visitor<'de> for NotedKey<'_, K> {
    type Value = K::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<K::Value, E> {
        self.keys.saw(key, true);
        self.seed
            .deserialize(de::value::BorrowedStrDeserializer::new(key))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<K::Value, E> {
        self.keys.saw(key, false);
        self.seed.deserialize(de::value::StrDeserializer::new(key))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::core::raw_object::raw_field;
    use serde::de::IgnoredAny;

    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        #[allow(dead_code)]
        message: Option<IgnoredAny>,
    }

    /// Any JSON value whose objects, at every depth, have no key twice (the probe reads a line
    /// with duplicate keys on a copy where the last value won, and places nothing in it).
    struct NoDuplicates;

    impl<'de> Deserialize<'de> for NoDuplicates {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = NoDuplicates;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("JSON")
                }
                fn visit_map<A: MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<NoDuplicates, A::Error> {
                    let mut seen = std::collections::HashSet::new();
                    while let Some(key) = map.next_key::<String>()? {
                        if !seen.insert(key) {
                            return Err(de::Error::custom("a key twice"));
                        }
                        map.next_value::<NoDuplicates>()?;
                    }
                    Ok(NoDuplicates)
                }
                fn visit_seq<A: de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<NoDuplicates, A::Error> {
                    while seq.next_element::<NoDuplicates>()?.is_some() {}
                    Ok(NoDuplicates)
                }
                crate::core::scalars::visit_scalars!(NoDuplicates, _ => NoDuplicates);
            }
            d.deserialize_any(V)
        }
    }

    /// The message [`Verbatim`] places in `line`, if any.
    fn placed(line: &str) -> Option<String> {
        let keyed: Keyed<Probe> = serde_json::from_str(line).ok()?;
        let verbatim = Verbatim::of(line.as_bytes(), keyed.keys)?;
        let message = verbatim.message(line.as_bytes()).unwrap();
        Some(String::from_utf8(message.to_vec()).unwrap())
    }

    /// Wherever the message is placed, it is the text `raw_field` finds (as written).
    #[test]
    fn places_the_message_as_written() {
        let lines = [
            r#"{"type":"message","id":"a","message":{"role":"user","content":"hi"}}"#,
            "{ \"id\" : \"x\", \"message\" :\t{ \"a\" : [1, {\"b\":\"}\"}] }\n }",
            r#"{"z":{"message":{}},"message":{"k":"\"message\":{}"}}"#,
            r#"{"a":{"message":{"x":1}},"message":{"y":2}}"#,
            r#"{"message":{}}"#,
            "{\"message\":{\"t\":\"é 😀\"}  }  ",
        ];
        for line in lines {
            let expected = raw_field(line, "message")
                .unwrap()
                .unwrap()
                .get()
                .to_owned();
            assert_eq!(placed(line).as_deref(), Some(&*expected), "{line}");
        }
    }

    /// A message that is not an object or not the last field, an escaped key, or no message:
    /// nothing is placed.
    #[test]
    fn places_nothing_it_cannot_vouch_for() {
        let lines = [
            r#"{"id":"a","message":"text"}"#,
            r#"{"id":"a","message":[1]}"#,
            r#"{"id":"a","mess\u0061ge":{"role":"user"}}"#,
            r#"{"message":{"role":"user"},"\u0069d":"a"}"#,
            r#"{"type":"message","message":{"role":"user"},"id":"a","parentId":null}"#,
            r#"{"id":"a"}"#,
        ];
        for line in lines {
            assert_eq!(placed(line), None, "{line}");
        }
    }

    /// In every shipped session, each message the open placed is the text `raw_field` finds
    /// in its line, and every message entry of valid UTF-8 whose message is the last field is
    /// placed (so rendering takes the verbatim path, which the rendering tests then compare
    /// with the full reading); no other is.
    #[test]
    fn the_open_places_the_messages_of_the_shipped_sessions() {
        use crate::core::tree::Mode;
        use crate::dialect::pi::format::EntryKind;
        use crate::dialect::pi::render::LineSource;
        use crate::storage::reader::{FileLines, open_session};
        let (mut placed, mut messages) = (0, 0);
        for file in crate::testdata::session_files() {
            let Ok(session) = open_session::<crate::dialect::pi::Pi>(&file, Mode::Lenient) else {
                continue;
            };
            let lines = FileLines::open(&file).unwrap();
            for node in session.tree.nodes() {
                let EntryKind::Message(info) = &node.entry.kind else {
                    continue;
                };
                let line = lines.line(node.entry.span).unwrap();
                let Ok(text) = std::str::from_utf8(&line) else {
                    continue;
                };
                let Ok(object) =
                    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
                else {
                    continue;
                };
                if let Some(verbatim) = info.verbatim {
                    let expected = raw_field(text, "message").unwrap().unwrap().get();
                    let got = verbatim.message(&line).unwrap();
                    assert_eq!(
                        got,
                        expected.as_bytes(),
                        "{} {}",
                        file.display(),
                        node.entry.id
                    );
                }
                let last = object.keys().next_back().map(String::as_str) == Some("message");
                if !last {
                    assert_eq!(info.verbatim, None, "{} {}", file.display(), node.entry.id);
                }
                // (A line with a key twice, or content that is no string or array, is read on
                // a copy, where nothing is placed.)
                let odd_content = object
                    .get("message")
                    .and_then(|m| m.get("content"))
                    .is_some_and(|c| c.is_object() || c.is_number() || c.is_boolean());
                if last && !odd_content && serde_json::from_str::<NoDuplicates>(text).is_ok() {
                    messages += 1;
                    placed += usize::from(info.verbatim.is_some());
                }
            }
        }
        assert_eq!(placed, messages);
        assert!(placed > 1000, "{placed} placed");
    }

    /// A line changed after it was placed, even by one byte of the message, gives no message.
    #[test]
    fn a_changed_line_gives_no_message() {
        let line = r#"{"id":"a","message":{"role":"user","content":"hello"}}"#;
        let keyed: Keyed<Probe> = serde_json::from_str(line).unwrap();
        let verbatim = Verbatim::of(line.as_bytes(), keyed.keys).unwrap();
        assert!(verbatim.message(line.as_bytes()).is_some());
        for changed in [
            line.replace("hello", "hellO"),
            line.replace("hello", "hell"),
            line.replacen('{', "[", 1),
        ] {
            assert_eq!(verbatim.message(changed.as_bytes()), None, "{changed}");
        }
    }
}
