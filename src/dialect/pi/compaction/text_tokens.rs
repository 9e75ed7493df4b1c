//! pi's `estimateTokens` of one message read straight from its JSON text, without building a
//! `Value`: one pass of serde_json over the text that measures the strings pi counts and skips
//! the rest (a base64 image, a tool result's details) without copying it.
//!
//! This reading decides only the ordinary shapes: an object with a string `role`, `content` a
//! string or an array of objects whose `type`, `text`, `thinking` and `name` are strings, each
//! key at most once. Anything else (a `system` message, a `null` block, a number where pi
//! reads a length, a duplicated key, a lone surrogate escape, text serde_json refuses) gives
//! `None`, and [`estimate_tokens_text`] falls back to [`js::parse_json`] and
//! [`estimate_tokens`], which reproduce pi on every shape. A test checks the two readings
//! against each other on every message of the shipped sessions and on generated odd shapes.
//!
//! Pure: no I/O.

use std::fmt;

use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::dialect::pi::compaction::tokens::{ESTIMATED_IMAGE_CHARS, estimate_tokens};
use crate::js::value as js;

/// pi `estimateTokens(message)` of the message written as `text` (JSON), with a message pi
/// would throw on (or text `JSON.parse` refuses) counted as 0 tokens, as the context's token
/// estimate counts it. Matches pi 1.6.0 `estimateTokens` over `JSON.parse(text)`.
pub fn estimate_tokens_text(text: &str) -> u64 {
    let tokens = match fast_estimate(text) {
        Some(tokens) => tokens,
        None => match js::parse_json(text.as_bytes()) {
            Ok(v) => estimate_tokens(&v).unwrap_or(0.0),
            Err(_) => 0.0,
        },
    };
    // NaN (a length pi reads as `undefined`) is 0 here, as `as` converts it.
    tokens as u64
}

/// The fast reading alone: `Some(Math.ceil(chars / 4))` for the ordinary shapes (see the
/// module documentation), `None` where only the full reading can decide.
pub fn fast_estimate(text: &str) -> Option<f64> {
    let mut de = serde_json::Deserializer::from_str(text);
    let message = de.deserialize_map(MessageVisitor).ok()?;
    de.end().ok()?;
    let chars = message.chars()?;
    Some((chars / 4.0).ceil())
}

/// A JSON error that only says "the full reading decides".
fn undecided<E: de::Error>() -> E {
    E::custom("left to the full reading")
}

/// The keys this reading tells apart; `Other` is skipped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Role,
    Content,
    Command,
    Output,
    Summary,
    Type,
    Text,
    Thinking,
    Name,
    Arguments,
    Other,
}

impl Key {
    /// The bit that marks the key as seen, so that a repeated key is noticed (`JSON.parse`
    /// keeps the last one; this reading leaves such text to the full reading).
    fn bit(self) -> u16 {
        1 << self as u16
    }
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, k: &str) -> Result<Key, E> {
        Ok(match k {
            "role" => Key::Role,
            "content" => Key::Content,
            "command" => Key::Command,
            "output" => Key::Output,
            "summary" => Key::Summary,
            "type" => Key::Type,
            "text" => Key::Text,
            "thinking" => Key::Thinking,
            "name" => Key::Name,
            "arguments" => Key::Arguments,
            _ => Key::Other,
        })
    }
}

/// Marks `key` as seen in `seen`. Errors: it was seen before.
fn first_time<E: de::Error>(seen: &mut u16, key: Key) -> Result<(), E> {
    if *seen & key.bit() != 0 {
        return Err(undecided());
    }
    *seen |= key.bit();
    Ok(())
}

/// A string's length in UTF-16 code units (`string.length`). Anything but a string is left to
/// the full reading.
struct StrLen;

impl<'de> DeserializeSeed<'de> for StrLen {
    type Value = f64;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for StrLen {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<f64, E> {
        Ok(js::utf16_len(s))
    }
}

/// A string compared with the names this reading acts on; anything but a string is left to
/// the full reading.
struct Word;

impl<'de> DeserializeSeed<'de> for Word {
    type Value = WordIs;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<WordIs, D::Error> {
        d.deserialize_str(self)
    }
}

/// The value of a `role` or a block's `type`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WordIs {
    User,
    Custom,
    ToolResult,
    Assistant,
    BashExecution,
    BranchSummary,
    CompactionSummary,
    System,
    Text,
    Image,
    Thinking,
    ToolCall,
    Other,
}

impl Visitor<'_> for Word {
    type Value = WordIs;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<WordIs, E> {
        Ok(match s {
            "user" => WordIs::User,
            "custom" => WordIs::Custom,
            "toolResult" => WordIs::ToolResult,
            "assistant" => WordIs::Assistant,
            "bashExecution" => WordIs::BashExecution,
            "branchSummary" => WordIs::BranchSummary,
            "compactionSummary" => WordIs::CompactionSummary,
            "system" => WordIs::System,
            "text" => WordIs::Text,
            "image" => WordIs::Image,
            "thinking" => WordIs::Thinking,
            "toolCall" => WordIs::ToolCall,
            _ => WordIs::Other,
        })
    }
}

/// What the message's fields add up to, for whichever role it turns out to have (`role` may
/// come after `content`).
#[derive(Default)]
struct Message<'de> {
    role: Option<WordIs>,
    content: Option<Content<'de>>,
    command: Option<f64>,
    output: Option<f64>,
    summary: Option<f64>,
}

impl Message<'_> {
    /// The characters pi counts, or `None` where the full reading decides.
    fn chars(&self) -> Option<f64> {
        let Some(role) = self.role else {
            // `message.role` undefined: pi counts 0.
            return Some(0.0);
        };
        match role {
            WordIs::User | WordIs::Custom | WordIs::ToolResult => match self.content.as_ref()? {
                Content::Text(n) => Some(*n),
                Content::Blocks(b) => b.user_ok.then_some(b.user_chars),
                Content::Other => None,
            },
            WordIs::Assistant => match self.content.as_ref()? {
                Content::Text(_) | Content::Other => None,
                Content::Blocks(b) => {
                    if !b.assistant_ok {
                        return None;
                    }
                    let mut chars = b.assistant_chars;
                    for args in &b.arguments {
                        let v = js::parse_json(args.get().as_bytes()).ok()?;
                        chars += js::utf16_len(&js::stringify(&v));
                    }
                    Some(chars)
                }
            },
            WordIs::BashExecution => Some(self.command? + self.output?),
            WordIs::BranchSummary | WordIs::CompactionSummary => self.summary,
            WordIs::System => None,
            _ => Some(0.0),
        }
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message<'de>, A::Error> {
        let mut m = Message::default();
        let mut seen = 0u16;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match key {
                Key::Role | Key::Content | Key::Command | Key::Output | Key::Summary => {
                    first_time(&mut seen, key)?;
                }
                _ => {}
            }
            match key {
                Key::Role => m.role = Some(map.next_value_seed(Word)?),
                Key::Content => m.content = Some(map.next_value_seed(ContentSeed)?),
                Key::Command => m.command = Some(map.next_value_seed(StrLen)?),
                Key::Output => m.output = Some(map.next_value_seed(StrLen)?),
                Key::Summary => m.summary = Some(map.next_value_seed(StrLen)?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(m)
    }
}

/// A message's `content`: a string's length, or its blocks summed both as pi sums a user's
/// (text and images) and as it sums an assistant's (text, thinking and tool calls), or
/// anything else (which only a role pi does not count can have here).
enum Content<'de> {
    Text(f64),
    Blocks(Blocks<'de>),
    Other,
}

#[derive(Default)]
struct Blocks<'de> {
    /// pi's `textAndImageChars`: `text` of truthy text blocks, 4800 per image block.
    user_chars: f64,
    /// False when a block needs the full reading as a user's content.
    user_ok: bool,
    /// Text and thinking lengths and tool names of an assistant's content.
    assistant_chars: f64,
    /// False when a block needs the full reading as an assistant's content.
    assistant_ok: bool,
    /// The tool calls' `arguments`, whose `JSON.stringify` length is counted only if the
    /// message is an assistant's.
    arguments: Vec<&'de RawValue>,
}

struct ContentSeed;

impl<'de> DeserializeSeed<'de> for ContentSeed {
    type Value = Content<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Content<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ContentSeed {
    type Value = Content<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or an array")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Content<'de>, E> {
        Ok(Content::Text(js::utf16_len(s)))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Content<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Content::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content<'de>, A::Error> {
        let mut b = Blocks {
            user_ok: true,
            assistant_ok: true,
            ..Blocks::default()
        };
        while let Some(block) = seq.next_element_seed(BlockSeed)? {
            block.add_to(&mut b);
        }
        Ok(Content::Blocks(b))
    }
}

/// One content block's fields that pi reads.
#[derive(Default)]
struct Block<'de> {
    ty: Option<WordIs>,
    text: Option<f64>,
    thinking: Option<f64>,
    name: Option<f64>,
    arguments: Option<&'de RawValue>,
}

impl<'de> Block<'de> {
    fn add_to(self, b: &mut Blocks<'de>) {
        match self.ty {
            Some(WordIs::Text) => {
                // A user's: `if (block.text) chars += block.text.length`.
                b.user_chars += self.text.unwrap_or(0.0);
                // An assistant's: `block.text.length`, which throws when it is absent.
                match self.text {
                    Some(n) => b.assistant_chars += n,
                    None => b.assistant_ok = false,
                }
            }
            Some(WordIs::Image) => b.user_chars += ESTIMATED_IMAGE_CHARS,
            Some(WordIs::Thinking) => match self.thinking {
                Some(n) => b.assistant_chars += n,
                None => b.assistant_ok = false,
            },
            Some(WordIs::ToolCall) => match (self.name, self.arguments) {
                (Some(n), Some(args)) => {
                    b.assistant_chars += n;
                    b.arguments.push(args);
                }
                _ => b.assistant_ok = false,
            },
            _ => {}
        }
    }
}

struct BlockSeed;

impl<'de> DeserializeSeed<'de> for BlockSeed {
    type Value = Block<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Block<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BlockSeed {
    type Value = Block<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a content block object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block<'de>, A::Error> {
        let mut b = Block::default();
        let mut seen = 0u16;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match key {
                Key::Type | Key::Text | Key::Thinking | Key::Name | Key::Arguments => {
                    first_time(&mut seen, key)?;
                }
                _ => {}
            }
            match key {
                Key::Type => b.ty = Some(map.next_value_seed(Word)?),
                Key::Text => b.text = Some(map.next_value_seed(StrLen)?),
                Key::Thinking => b.thinking = Some(map.next_value_seed(StrLen)?),
                Key::Name => b.name = Some(map.next_value_seed(StrLen)?),
                Key::Arguments => b.arguments = Some(map.next_value::<&'de RawValue>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The full reading: `JSON.parse`, then pi's `estimateTokens`.
    fn full(text: &str) -> Option<f64> {
        estimate_tokens(&js::parse_json(text.as_bytes()).ok()?).ok()
    }

    #[test]
    fn ordinary_shapes_are_decided_and_equal_the_full_reading() {
        let cases = [
            json!({"role":"user","content":"héllo 🎉 wörld","timestamp":1}),
            json!({"role":"user","content":[{"type":"text","text":"abc"},{"type":"image","data":"AAAA","mimeType":"image/png"}]}),
            json!({"role":"user","content":[{"type":"text","text":""},{"type":"text"}]}),
            json!({"role":"toolResult","toolCallId":"c1","content":[{"type":"text","text":"out\nput"}],"isError":false}),
            json!({"role":"custom","customType":"x","content":"note","display":true}),
            json!({"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"ok"},
                {"type":"toolCall","id":"t","name":"bash","arguments":{"command":"ls -la","n":1.0,"2":[1e21,"é"]}}],
                "usage":{"input":1,"output":2},"stopReason":"toolUse"}),
            json!({"role":"assistant","content":[{"type":"image","data":"AAAA"}]}),
            json!({"role":"bashExecution","command":"ls","output":"a\nb","exitCode":0}),
            json!({"role":"branchSummary","summary":"we tried x","fromId":"a"}),
            json!({"role":"compactionSummary","summary":"so far","tokensBefore":5}),
            json!({"role":"somethingNew","content":5}),
            json!({"role":"somethingNew","content":{"text":"abc"},"more":[null]}),
            json!({"content":null,"role":"somethingNew"}),
            json!({"content":"no role"}),
        ];
        for case in cases {
            let text = case.to_string();
            let fast = fast_estimate(&text);
            assert!(fast.is_some(), "undecided: {text}");
            assert_eq!(fast, full(&text), "{text}");
        }
    }

    #[test]
    fn escaped_text_counts_as_decoded() {
        let text = r#"{"role":"user","content":"a\n\"b\"\u00e9\ud83c\udf89"}"#;
        assert_eq!(fast_estimate(text), Some(2.0)); // 7 units
        assert_eq!(fast_estimate(text), full(text));
    }

    #[test]
    fn odd_shapes_are_left_to_the_full_reading() {
        let cases = [
            r#"{"role":"system","content":"s"}"#,
            r#"{"role":"user","content":null}"#,
            r#"{"role":"user"}"#,
            r#"{"role":"user","content":[null]}"#,
            r#"{"role":"user","content":["text"]}"#,
            r#"{"role":"user","content":[["text","abc"]]}"#,
            r#"{"role":"user","content":[{"type":"text","text":5}]}"#,
            r#"{"role":"user","content":"a","content":"bb"}"#,
            r#"{"role":"user","content":[{"type":"text","text":"a","text":"bb"}]}"#,
            r#"{"role":"user","role":"assistant","content":"a"}"#,
            r#"{"role":"assistant","content":"text"}"#,
            r#"{"role":"assistant","content":[{"type":"text"}]}"#,
            r#"{"role":"assistant","content":[{"type":"toolCall","name":"x"}]}"#,
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":null}]}"#,
            r#"{"role":"bashExecution","command":"ls"}"#,
            r#"{"role":"user","content":"\ud800"}"#,
            r#"{"role":5,"content":"a"}"#,
            r#"["user","abc"]"#,
            r#"{"role":"user","content":"a"} x"#,
        ];
        for text in cases {
            assert_eq!(fast_estimate(text), None, "decided: {text}");
        }
    }

    #[test]
    fn the_estimate_falls_back_and_counts_a_throw_as_zero() {
        // A lone surrogate: only the full reading can read it.
        assert_eq!(
            estimate_tokens_text(r#"{"role":"user","content":"ab\ud800cd"}"#),
            2
        );
        // pi throws on a null block: 0.
        assert_eq!(
            estimate_tokens_text(r#"{"role":"user","content":[null]}"#),
            0
        );
        // A repeated key: the last one wins, as in JSON.parse.
        assert_eq!(
            estimate_tokens_text(r#"{"role":"user","content":"a","content":"abcdefghi"}"#),
            3
        );
        assert_eq!(estimate_tokens_text("not json"), 0);
    }
}
