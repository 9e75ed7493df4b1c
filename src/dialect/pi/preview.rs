//! One-line previews of entries for trees and listings. Pure: takes the entry's line.
//!
//! Lines are read with [`jsstr::parse_value`] (JSON.parse), so a lone surrogate in the text stays
//! in the preview as the one character it is (written back as its escape on output).

use std::borrow::Cow;
use std::io::{self, Write};

use serde_json::Value;

use crate::js::jsstr;

/// Longest preview, in characters.
pub const PREVIEW_CHARS: usize = 80;

/// A one-line, human-readable summary of an entry line (at most [`PREVIEW_CHARS`] characters).
/// Unknown shapes give an empty string, never an error.
pub fn preview(line: &[u8]) -> String {
    jsstr::parse_value(line)
        .map(|v| entry_preview(&v))
        .unwrap_or_default()
}

/// [`preview`] of an already parsed entry.
pub fn entry_preview(entry: &Value) -> String {
    let Value::Object(e) = entry else {
        return String::new();
    };
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    let text = match e.get("type").and_then(Value::as_str).unwrap_or("") {
        "message" => {
            let m = e.get("message");
            let role = m
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                .unwrap_or("");
            match role {
                "bashExecution" => format!("$ {}", s(m.and_then(|m| m.get("command")))),
                _ => content_or_holding(m),
            }
        }
        "custom_message" => content_text(e.get("content")),
        "branch_summary" | "compaction" => s(e.get("summary")),
        "model_change" => format!("{}/{}", s(e.get("provider")), s(e.get("modelId"))),
        "thinking_level_change" => format!("thinking: {}", s(e.get("thinkingLevel"))),
        "label" => format!("label {} → {}", s(e.get("targetId")), s(e.get("label"))),
        "session_info" => format!("name: {}", s(e.get("name"))),
        "context_edit" => match e.get("replacement") {
            Some(Value::Object(_)) => format!("replace content of {}", s(e.get("targetId"))),
            _ => format!("omit {}", s(e.get("targetId"))),
        },
        "custom" => s(e.get("customType")),
        _ => String::new(),
    };
    one_line(&text)
}

/// A one-line summary of a projected message (any role, including pi's summary roles).
pub fn message_preview(message: &Value) -> String {
    let text = match message.get("role").and_then(Value::as_str) {
        Some("branchSummary" | "compactionSummary") => message
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        Some("bashExecution") => format!(
            "$ {}",
            message.get("command").and_then(Value::as_str).unwrap_or("")
        ),
        _ => content_or_holding(Some(message)),
    };
    one_line(&text)
}

/// A message's text ([`content_text`]), or, when it has none, what it holds instead: its
/// thinking (`(thinking) …`), else `(no content)` with why when the message says (an aborted
/// or failed turn: `stopReason`, `errorMessage`). A preview is never blank for a message.
fn content_or_holding(message: Option<&Value>) -> String {
    let text = content_text(message.and_then(|m| m.get("content")));
    if !text.trim().is_empty() {
        return text;
    }
    let field = |k: &str| message.and_then(|m| m.get(k)).and_then(Value::as_str);
    let blocks = message
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array);
    let thinking = blocks.into_iter().flatten().find_map(|b| {
        (b.get("type").and_then(Value::as_str) == Some("thinking")).then(|| {
            b.get("thinking")
                .and_then(Value::as_str)
                .filter(|t| !t.trim().is_empty())
                .map_or("(thinking, redacted)".to_owned(), |t| {
                    format!("(thinking) {t}")
                })
        })
    });
    if let Some(t) = thinking {
        return t;
    }
    let mut out = "(no content".to_owned();
    if let Some(reason) = field("stopReason").filter(|r| *r != "stop") {
        out.push_str(&format!(", {reason}"));
    }
    if let Some(error) = field("errorMessage").filter(|e| !e.trim().is_empty()) {
        out.push_str(&format!(": {error}"));
    }
    out.push(')');
    out
}

/// The first text of a message content (a string or an array of blocks); tool calls show
/// as `name(…)`, images as `[image]`.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(blocks)) => {
            let parts: Vec<String> = blocks
                .iter()
                .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b.get("text").and_then(Value::as_str).map(str::to_owned),
                    Some("toolCall") => Some(format!(
                        "{}(…)",
                        b.get("name").and_then(Value::as_str).unwrap_or("tool")
                    )),
                    Some("image") => Some("[image]".to_owned()),
                    _ => None,
                })
                .filter(|t| !t.trim().is_empty())
                .collect();
            parts.join(" ")
        }
        _ => String::new(),
    }
}

/// `text` on one line (whitespace runs become one space) and at most [`PREVIEW_CHARS`] code
/// points: a longer text keeps its first `PREVIEW_CHARS - 1` and ends with `…`.
pub fn one_line(text: &str) -> String {
    // Code points as JavaScript's string iterator yields them, so a lone surrogate (two
    // characters here) is never cut in half and counts as one, like `[...s].length`.
    let mut points: Vec<&str> = Vec::new();
    'words: for word in text.split_whitespace() {
        if !points.is_empty() {
            points.push(" ");
        }
        for c in jsstr::code_points(word) {
            if points.len() > PREVIEW_CHARS {
                break 'words;
            }
            points.push(c);
        }
    }
    if points.len() > PREVIEW_CHARS {
        points.truncate(PREVIEW_CHARS - 1);
        if points.last() == Some(&" ") {
            points.pop();
        }
        points.push("…");
    }
    points.concat()
}

/// Whether `c` is a character that acts on a terminal instead of showing: a C0 control other
/// than tab and newline (ESC starts escape sequences, BEL ends OSC ones, CR overwrites the
/// line), DEL, a C1 control (U+0080..U+009F: 8-bit CSI, OSC, ST), and the bidirectional
/// embeddings, overrides and isolates that reorder what follows. A carriage return just before
/// a newline is a line ending and is kept ([`visible`]).
fn acts_on_terminal(c: char) -> bool {
    (c < ' ' && c != '\t' && c != '\n')
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// Bytes that may start a character of [`acts_on_terminal`] (a quick test before the walk).
fn may_act(b: u8) -> bool {
    (b < 0x20 && b != b'\t' && b != b'\n') || b == 0x7f || b == 0xc2 || b == 0xe2
}

/// How a character of [`acts_on_terminal`] is shown: `\x1b` below U+0100, `\u{202e}` above.
fn push_shown(out: &mut String, c: char) {
    use std::fmt::Write as _;
    let n = c as u32;
    let _ = if n < 0x100 {
        write!(out, "\\x{n:02x}")
    } else {
        write!(out, "\\u{{{n:x}}}")
    };
}

/// `text` as it may be shown on a terminal: every character that would act on the terminal
/// ([`acts_on_terminal`]: ESC, BEL, a lone CR, C1 controls, bidirectional overrides...) is
/// written visibly as its escape (`\x1b`, `\u{202e}`); everything else, newlines and tabs
/// included, is unchanged. The one function every human output of the command line goes
/// through ([`Visible`]); JSON output is exact instead (JSON escapes C0 controls itself).
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.bytes().any(may_act) {
        return Cow::Borrowed(text);
    }
    if !text.chars().any(acts_on_terminal) {
        return Cow::Borrowed(text);
    }
    let mut chars = text.chars().peekable();
    let mut out = String::with_capacity(text.len() + 16);
    while let Some(c) = chars.next() {
        if !acts_on_terminal(c) || (c == '\r' && chars.peek() == Some(&'\n')) {
            out.push(c);
        } else {
            push_shown(&mut out, c);
        }
    }
    Cow::Owned(out)
}

/// A writer that passes text on through [`visible`]: what a command prints for a person goes
/// through it, so no session text (a preview, a label, a name, an id, a path) can act on the
/// terminal. Bytes that are not UTF-8 are shown as `\xNN` escapes. A character split across
/// writes (and a CR whose next character is not written yet) is held until the next write;
/// `flush` ends the text (what is held is shown then), as for
/// [`RestoringWriter`](super::jsstr::RestoringWriter). Turned off ([`Visible::new`]), bytes
/// pass through unchanged.
pub struct Visible<W: Write> {
    inner: W,
    on: bool,
    held: Vec<u8>,
}

impl<W: Write> Visible<W> {
    /// Wraps `inner`; `on: false` passes every byte through as it is (a JSON document).
    pub fn new(inner: W, on: bool) -> Self {
        Visible {
            inner,
            on,
            held: Vec::new(),
        }
    }

    /// The writer behind this one, once what this one held is written. Errors: that write's.
    pub fn get_mut(&mut self) -> io::Result<&mut W> {
        self.pass(&[], true)?;
        Ok(&mut self.inner)
    }

    /// Writes `bytes` (after what was held) shown visibly, holding back an incomplete last
    /// character or a last CR unless `last`.
    fn pass(&mut self, bytes: &[u8], last: bool) -> io::Result<()> {
        let joined;
        let mut rest: &[u8] = if self.held.is_empty() {
            bytes
        } else {
            let mut held = std::mem::take(&mut self.held);
            held.extend_from_slice(bytes);
            joined = held;
            &joined
        };
        loop {
            let (good, bad) = match std::str::from_utf8(rest) {
                Ok(s) => (s, None),
                Err(e) => {
                    let (good, _) = rest.split_at(e.valid_up_to());
                    // The checked prefix is UTF-8.
                    let good = std::str::from_utf8(good).unwrap_or_default();
                    (good, Some(e))
                }
            };
            let text = match bad {
                // A CR at the very end may start a CRLF: held until its next character.
                None if !last && good.ends_with('\r') => {
                    self.held.push(b'\r');
                    &good[..good.len() - 1]
                }
                _ => good,
            };
            self.inner.write_all(visible(text).as_bytes())?;
            let Some(e) = bad else { return Ok(()) };
            let after = &rest[e.valid_up_to()..];
            match e.error_len() {
                Some(n) => {
                    let mut shown = String::new();
                    for &b in &after[..n] {
                        let _ = std::fmt::Write::write_fmt(&mut shown, format_args!("\\x{b:02x}"));
                    }
                    self.inner.write_all(shown.as_bytes())?;
                    rest = &after[n..];
                }
                // An incomplete character at the end: the next write may complete it.
                None if !last => {
                    self.held.extend_from_slice(after);
                    return Ok(());
                }
                None => {
                    let mut shown = String::new();
                    for &b in after {
                        let _ = std::fmt::Write::write_fmt(&mut shown, format_args!("\\x{b:02x}"));
                    }
                    return self.inner.write_all(shown.as_bytes());
                }
            }
        }
    }
}

impl<W: Write> Write for Visible<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.on {
            self.pass(buf, false)?;
        } else {
            self.inner.write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.pass(&[], true)?;
        self.inner.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_message_without_text_says_what_it_holds() {
        let aborted = br#"{"type":"message","message":{"role":"assistant","content":[],"stopReason":"aborted","errorMessage":"Request was aborted"}}"#;
        assert_eq!(
            preview(aborted),
            "(no content, aborted: Request was aborted)"
        );
        let thinking = br#"{"type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"Plan  the\nsteps"}]}}"#;
        assert_eq!(preview(thinking), "(thinking) Plan the steps");
        let redacted = br#"{"type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"","redacted":true}],"stopReason":"stop"}}"#;
        assert_eq!(preview(redacted), "(thinking, redacted)");
        let empty = br#"{"type":"message","message":{"role":"toolResult","content":[]}}"#;
        assert_eq!(preview(empty), "(no content)");
        let message = serde_json::json!({"role": "user", "content": ""});
        assert_eq!(message_preview(&message), "(no content)");
        // Text wins; tool calls are text enough.
        let call = br#"{"type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"toolCall","name":"read"}]}}"#;
        assert_eq!(preview(call), "read(…)");
    }

    #[test]
    fn lone_surrogates_are_previewed_like_any_text() {
        let line = br#"{"type":"session_info","name":"fix \ud83d"}"#;
        assert_eq!(jsstr::restore_json(&preview(line)), r"name: fix \ud83d");
        let line = br#"{"type":"message","message":{"role":"user","content":"x \ude80"}}"#;
        assert_eq!(jsstr::restore_json(&preview(line)), r"x \ude80");
        // Cut at the limit without splitting the pair that holds a lone surrogate.
        let long = format!(
            r#"{{"type":"custom_message","content":"{}\ud83dbb"}}"#,
            "a".repeat(PREVIEW_CHARS - 2)
        );
        let p = preview(long.as_bytes());
        assert!(jsstr::restore_json(&p).ends_with(r"\ud83d…"), "{p}");
    }

    /// Previews as JavaScript counts code points (`[...s].length`).
    fn js_len(s: &str) -> usize {
        jsstr::code_points(s).count()
    }

    #[test]
    fn previews_are_at_most_80_code_points() {
        let session_info = |name: &str| preview(json_line("session_info", "name", name).as_bytes());
        // Exactly 80 stays whole; 81 is cut to 79 and an ellipsis.
        let eighty = format!("name: {}", "x".repeat(PREVIEW_CHARS - 6));
        assert_eq!(session_info(&eighty[6..]), eighty);
        let long = session_info(&"y".repeat(PREVIEW_CHARS));
        assert_eq!(js_len(&long), PREVIEW_CHARS);
        assert!(long.ends_with('…'));
        // A word that ends right at the limit, then a space: the cut never overshoots.
        for n in 70..90 {
            let text = format!("{} next words follow here", "w".repeat(n));
            let p = session_info(&text);
            assert!(js_len(&p) <= PREVIEW_CHARS, "{n}: {} {p}", js_len(&p));
            assert!(!p.ends_with(" …"), "{n}: {p}");
        }
        // Astral characters count once each (they are two UTF-16 units).
        let emoji = session_info(&"😀".repeat(100));
        assert_eq!(js_len(&emoji), PREVIEW_CHARS);
        assert_eq!(emoji.chars().count(), PREVIEW_CHARS);
    }

    fn json_line(kind: &str, key: &str, value: &str) -> String {
        serde_json::json!({"type": kind, key: value}).to_string()
    }

    #[test]
    fn control_characters_are_shown_not_sent() {
        assert!(matches!(
            visible("plain text\tand\nlines ✓"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            visible("a\u{1b}]52;c;eA==\u{7}b\u{9b}2Jc\rd\r\ne\u{202e}f\u{7f}"),
            "a\\x1b]52;c;eA==\\x07b\\x9b2Jc\\x0dd\r\ne\\u{202e}f\\x7f"
        );
        // A text ending in CR: nothing follows it, so it is not a line ending.
        assert_eq!(visible("x\r"), "x\\x0d");
    }

    #[test]
    fn the_visible_writer_sees_characters_split_across_writes() {
        let text = "é\u{9b}x\r\ny\u{202e}\rz\u{1b}";
        let want = visible(text).into_owned();
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut w = Visible::new(Vec::new(), true);
            w.write_all(&bytes[..cut]).unwrap();
            w.write_all(&bytes[cut..]).unwrap();
            w.flush().unwrap();
            assert_eq!(String::from_utf8(w.inner).unwrap(), want, "cut at {cut}");
        }
        // Bytes that are not UTF-8 are shown as bytes; off, everything passes as it is.
        let mut w = Visible::new(Vec::new(), true);
        w.write_all(b"a\x9bb\xe2").unwrap();
        w.flush().unwrap();
        assert_eq!(w.inner, b"a\\x9bb\\xe2");
        let mut w = Visible::new(Vec::new(), false);
        w.write_all(b"\x1b[2J").unwrap();
        assert_eq!(w.inner, b"\x1b[2J");
    }
}
