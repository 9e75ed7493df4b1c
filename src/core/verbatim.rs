//! Where a `message` entry's message lies in its line, found while the probe reads the line,
//! so that rendering can hand the message on as written without reading the line as JSON a
//! second time.
//!
//! serde_json reports no positions, but a key read from text without escapes is borrowed
//! from the line. [`Keyed`] wraps the probe's reading of a line's top-level object and notes
//! the address of the `message` key and of the key after it. In valid JSON the message's
//! value then starts after `"message"`, whitespace, `:` and whitespace, and ends before
//! whitespace and the `,` in front of the next key (or, for the last field, before whitespace
//! and the object's closing `}`). A [`Verbatim`] keeps those bounds and a fingerprint of the
//! whole line; [`Verbatim::message`] gives the message only from a line with the same
//! fingerprint, so a line changed since it was read is read as JSON again, as before.
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

/// A `message` entry's message within its line: it starts `start` bytes into the line and
/// ends `tail` bytes before the line's end (the line read without its newline). Kept with a
/// 32-bit fingerprint of the line: 8 bytes in all, which a message's node grows by (from 144
/// to 152 bytes).
/// Taken only from a line of valid UTF-8 whose `message` key and the key after it are
/// written without escapes and whose message starts within 64 KiB of the line's start and
/// ends within 64 KiB of its end (every line pi writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verbatim {
    start: NonZeroU16,
    tail: u16,
    fingerprint: u32,
}

impl Verbatim {
    /// The bounds of the message of `line` as [`Keyed`] found them (`keys`), with `line`'s
    /// fingerprint; `None` when the keys could not be placed or the bytes around them are not
    /// what valid JSON puts there.
    pub(crate) fn of(line: &[u8], keys: MessageKeys) -> Option<Verbatim> {
        let (key, next) = match keys {
            MessageKeys::Message(key) => (key, None),
            MessageKeys::Placed { key, next } => (key, Some(next)),
            MessageKeys::Unseen | MessageKeys::Lost => return None,
        };
        let base = line.as_ptr() as usize;
        let key_at = key.checked_sub(base)?;
        let after_key = key_at.checked_add(MESSAGE_KEY.len())?;
        if line.get(key_at..after_key)? != MESSAGE_KEY.as_bytes() || line.get(after_key)? != &b'"' {
            return None;
        }
        let colon = skip_space(line, after_key + 1);
        (line.get(colon)? == &b':').then_some(())?;
        let start = skip_space(line, colon + 1);
        (line.get(start)? == &b'{').then_some(())?;
        let (limit, before) = match next {
            // The next key's opening quote, then `,` before it.
            Some(next) => (next.checked_sub(base)?.checked_sub(1)?, b','),
            // The end of the line, then the object's closing brace.
            None => (line.len(), b'}'),
        };
        let sep = back_space(line, limit).checked_sub(1)?;
        (line.get(sep)? == &before).then_some(())?;
        let end = back_space(line, sep);
        (end > start && line.get(end - 1)? == &b'}').then_some(())?;
        Some(Verbatim {
            start: NonZeroU16::new(u16::try_from(start).ok()?)?,
            tail: u16::try_from(line.len() - end).ok()?,
            fingerprint: fingerprint(line),
        })
    }

    /// The message's JSON text in `line`, as written, when `line` is the line this was taken
    /// from (by its length and fingerprint); `None` otherwise.
    pub fn message<'l>(&self, line: &'l [u8]) -> Option<&'l [u8]> {
        let end = line.len().checked_sub(usize::from(self.tail))?;
        let message = line.get(usize::from(self.start.get())..end)?;
        (fingerprint(line) == self.fingerprint).then_some(message)
    }
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

/// What [`Keyed`] saw of an object's keys: addresses of keys borrowed from the text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum MessageKeys {
    /// No `message` key (yet).
    #[default]
    Unseen,
    /// The `message` key at this address, and no key after it (yet).
    Message(usize),
    /// The `message` key and the key after it.
    Placed {
        /// Address of the `message` key's text.
        key: usize,
        /// Address of the next key's text.
        next: usize,
    },
    /// The `message` key or the key after it was written with escapes: it was decoded into a
    /// buffer of its own and cannot be placed in the line.
    Lost,
}

impl MessageKeys {
    /// Notes the next key of the object: `key` as decoded, `borrowed` when it is the line's
    /// own text (no escapes).
    fn saw(&mut self, key: &str, borrowed: bool) {
        let at = borrowed.then_some(key.as_ptr() as usize);
        *self = match (*self, at) {
            (MessageKeys::Unseen, Some(at)) if key == MESSAGE_KEY => MessageKeys::Message(at),
            (MessageKeys::Unseen, None) if key == MESSAGE_KEY => MessageKeys::Lost,
            (MessageKeys::Message(key), Some(next)) => MessageKeys::Placed { key, next },
            (MessageKeys::Message(_), None) => MessageKeys::Lost,
            (keys, _) => keys,
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
            r#"{"type":"message","message":{"role":"user"},"id":"a","parentId":null}"#,
            "{ \"message\" :\t{ \"a\" : [1, {\"b\":\"}\"}] }\n , \"id\" : \"x\" }",
            r#"{"message":{"k":"\"message\":{}"},"z":{"message":{}}}"#,
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

    /// A message that is not an object, an escaped key, or no message: nothing is placed.
    #[test]
    fn places_nothing_it_cannot_vouch_for() {
        let lines = [
            r#"{"message":"text","id":"a"}"#,
            r#"{"message":[1],"id":"a"}"#,
            r#"{"mess\u0061ge":{"role":"user"},"id":"a"}"#,
            r#"{"message":{"role":"user"},"\u0069d":"a"}"#,
            r#"{"id":"a"}"#,
        ];
        for line in lines {
            assert_eq!(placed(line), None, "{line}");
        }
    }

    /// In every shipped session, each message the open placed is the text `raw_field` finds
    /// in its line, and nearly every message entry of valid UTF-8 is placed (so rendering
    /// takes the verbatim path, which the rendering tests then compare with the full reading).
    #[test]
    fn the_open_places_the_messages_of_the_shipped_sessions() {
        use crate::core::format::EntryKind;
        use crate::core::render::LineSource;
        use crate::core::tree::Mode;
        use crate::storage::reader::{FileLines, open_session};
        let (mut placed, mut messages) = (0, 0);
        for file in crate::testdata::session_files() {
            let Ok(session) = open_session(&file, Mode::Lenient) else {
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
                messages += 1;
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
                    placed += 1;
                }
            }
        }
        assert!(
            placed * 100 >= messages * 95,
            "{placed} of {messages} placed"
        );
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
