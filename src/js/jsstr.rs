//! JavaScript strings and `JSON.parse` in Rust: the one policy by which sessiond decodes the
//! JSON text of a session file, wherever it is read (the open-time probe, previews, names,
//! labels, timestamps, `session/entry`, rendering and compaction).
//!
//! pi reads each line with `JSON.parse`, and a JavaScript string is any sequence of UTF-16 code
//! units. pi writes a lone surrogate (text cut inside an emoji) as an escape such as `\ud83d`,
//! which a Rust `String` cannot hold and serde_json refuses. Here every decoded string holds a
//! lone surrogate unit `0xD800 + k` as two characters: [`MARK`] (U+FDD0, a noncharacter, never
//! interchanged) followed by U+E000 + k. [`units`], [`utf16_len`] and [`slice_head_utf16`] read
//! such a pair as the one code unit it stands for, and every JSON text sessiond writes passes
//! through [`restore_json`] (or [`RestoringWriter`]), which writes the pair back as the lowercase
//! `\udXXX` escape, as `JSON.stringify` does.
//!
//! Limitation: text that genuinely holds U+FDD0 directly followed by a character in
//! U+E000..=U+E7FF reads as a lone surrogate where sessiond decodes it (a name, a preview, an
//! id). A noncharacter followed by a private-use character does not occur in text pi writes.
//! Text that is never decoded is not restored either: a message a context document passes
//! through unchanged is the file's JSON text, written as it is
//! ([`ContextJson::write_to`](crate::view::context_json::ContextJson::write_to)); raw values
//! written among decoded fields (a context's `thinkingLevel` and `model`) hold a U+FDD0 as its
//! escape ([`escape_marks`]), so that restoring the document leaves them text.
//!
//! [`parse_value`] is `JSON.parse` into a `serde_json::Value`: serde_json where it accepts the
//! text (it then agrees with `JSON.parse`), and an iterative parser of this module where it does
//! not: lone surrogate escapes, numbers beyond the range of a double (`1e400` is `Infinity` in
//! JavaScript; a `Value` cannot hold that and holds `null`, which is how `JSON.stringify` writes
//! it), nesting deeper than serde_json's 128 levels, and invalid UTF-8 inside strings (read as
//! U+FFFD, as pi's `readFileSync(path, "utf8")` decodes it).
//!
//! Nesting: `JSON.parse` reads any depth, and so does [`parse_value`] (iteratively, on the heap),
//! but a `Value` is dropped, cloned, compared and serialized recursively, so a `Value` of this
//! module holds at most [`VALUE_DEPTH`] levels: an array or object that opens deeper is checked
//! in full (without recursion: serde_json's skipping of a value keeps its own stack) and held as
//! a string, its JSON text as written. Every `Value` sessiond makes of a line is then dropped,
//! cloned and serialized within a small, fixed stack, whatever the line's depth. A deep line is
//! an entry like any other: what the model sees passes the file's own JSON text through, exact at
//! any depth; an answer that shows a line as a `Value` (an entry, a tree node, an export) shows
//! the part deeper than [`VALUE_DEPTH`] as that text. pi itself cannot `JSON.stringify` a message
//! nested more than a few thousand levels (node's default stack), so it never sends one to a
//! model.
//!
//! Pure: no I/O.

use std::borrow::Cow;
use std::io::{self, Write};

use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use thiserror::Error;

/// Stands before a private-use character U+E000..=U+E7FF to say that the pair is one lone UTF-16
/// surrogate code unit (see the module documentation).
pub const MARK: char = '\u{FDD0}';

/// The private-use character that stands for unit 0xD800 after a [`MARK`].
const BASE: u32 = 0xE000;

/// The UTF-8 encoding of [`MARK`].
const MARK_UTF8: &[u8] = "\u{FDD0}".as_bytes();

/// The deepest nesting of arrays and objects a `Value` of this module holds: an array or object
/// that opens deeper is held as a string of its JSON text (see the module documentation).
pub const VALUE_DEPTH: usize = 1000;

/// Why JSON text is not what `JSON.parse` accepts. Offsets
/// are bytes from the start of the text.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ParseError {
    /// `JSON.parse` would throw a `SyntaxError`.
    #[error("{what} at byte {offset}")]
    Syntax {
        /// Where the problem was found.
        offset: usize,
        /// What was expected or found.
        what: &'static str,
    },
}

// ---------------------------------------------------------------------------------------------
// Lone surrogates in Rust strings.

/// The pair of characters that stands for the lone surrogate code unit `unit`
/// (0xD800..=0xDFFF); other units give `None`.
pub fn lone_surrogate(unit: u16) -> Option<[char; 2]> {
    if !(0xD800..=0xDFFF).contains(&unit) {
        return None;
    }
    char::from_u32(BASE + u32::from(unit) - 0xD800).map(|c| [MARK, c])
}

/// Appends one UTF-16 code unit that is not part of a pair: itself, or a [`MARK`] pair for a
/// surrogate.
fn push_unit(out: &mut String, unit: u16) {
    match (char::from_u32(u32::from(unit)), lone_surrogate(unit)) {
        (Some(c), _) => out.push(c),
        (None, Some(pair)) => out.extend(pair),
        (None, None) => out.push('\u{FFFD}'),
    }
}

/// The surrogate unit that `mark` followed by `next` stands for, if they are such a pair.
fn unit_of(mark: char, next: Option<char>) -> Option<u16> {
    if mark != MARK {
        return None;
    }
    let c = u32::from(next?);
    (BASE..BASE + 0x800)
        .contains(&c)
        .then(|| u16::try_from(c - BASE + 0xD800).ok())
        .flatten()
}

/// The UTF-16 code units of `s` as JavaScript holds the string (a [`MARK`] pair is one unit).
pub fn units(s: &str) -> impl Iterator<Item = u16> + '_ {
    let mut chars = s.chars().peekable();
    let mut pending: Option<u16> = None;
    std::iter::from_fn(move || {
        if let Some(u) = pending.take() {
            return Some(u);
        }
        let c = chars.next()?;
        if let Some(u) = unit_of(c, chars.peek().copied()) {
            chars.next();
            return Some(u);
        }
        let mut buf = [0u16; 2];
        let encoded = c.encode_utf16(&mut buf);
        if let Some(&second) = encoded.get(1) {
            pending = Some(second);
        }
        Some(encoded[0])
    })
}

/// `string.length`: the number of UTF-16 code units.
pub fn utf16_len(s: &str) -> usize {
    if !s.contains(MARK) {
        return utf16_units(s);
    }
    units(s).count()
}

/// `s.encode_utf16().count()` without decoding: every byte that starts a character is one
/// unit, and a four-byte character (a leading byte of 0xF0 or more) one more. Counted in
/// byte-wide lanes over blocks of 127 bytes (at most 254 units, no overflow), which the
/// compiler vectorizes: about 12× faster than decoding character by character, which was
/// most of the time of measuring a long tool result's text.
fn utf16_units(s: &str) -> usize {
    s.as_bytes()
        .chunks(127)
        .map(|block| {
            let units = block.iter().fold(0u8, |n, &b| {
                n + u8::from((b as i8) >= -0x40) + u8::from(b >= 0xF0)
            });
            usize::from(units)
        })
        .sum()
}

/// True when `s` holds at least one lone surrogate (a [`MARK`] pair).
pub fn has_lone_surrogate(s: &str) -> bool {
    // Almost every string has no MARK at all: one search for its bytes decides those.
    if memchr::memmem::find(s.as_bytes(), MARK_UTF8).is_none() {
        return false;
    }
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if unit_of(c, chars.peek().copied()).is_some() {
            return true;
        }
    }
    false
}

/// The characters of `s` grouped as JavaScript's string iterator (`for (const c of s)`) yields
/// code points: a [`MARK`] pair is one element, and a high surrogate pair directly followed by a
/// low one is one (they form a code point in JavaScript).
pub fn code_points(s: &str) -> impl Iterator<Item = &str> + '_ {
    let mut rest = s;
    std::iter::from_fn(move || {
        let mut chars = rest.chars();
        let c = chars.next()?;
        let mut len = c.len_utf8();
        let after = chars.clone();
        if let Some(u) = unit_of(c, after.clone().next()) {
            len += after.clone().next().map_or(0, char::len_utf8);
            let mut more = rest[len..].chars();
            if (0xD800..=0xDBFF).contains(&u)
                && let (Some(m), Some(lo)) = (more.next(), more.clone().next())
                && unit_of(m, Some(lo)).is_some_and(|l| (0xDC00..=0xDFFF).contains(&l))
            {
                len += m.len_utf8() + lo.len_utf8();
            }
        }
        let (head, tail) = rest.split_at(len);
        rest = tail;
        Some(head)
    })
}

/// pi `sliceHead(text, maxUnits)`: `text.slice(0, maxUnits)` in UTF-16 code units, one unit
/// shorter when the cut would fall inside a surrogate pair. A high lone surrogate directly
/// followed by a low one is such a pair in JavaScript (two strings joined), so it is kept out
/// whole as well. A lone surrogate before the cut stays, as in pi.
pub fn slice_head_utf16(text: &str, max_units: usize) -> &str {
    let mut taken = 0usize;
    let mut at = 0usize;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let (width, end, high) = match unit_of(c, chars.peek().map(|&(_, n)| n)) {
            Some(u) => {
                let (j, n) = chars.next().unwrap_or((i, c));
                (1, j + n.len_utf8(), (0xD800..=0xDBFF).contains(&u))
            }
            None => (c.len_utf16(), i + c.len_utf8(), false),
        };
        if taken + width > max_units {
            return &text[..at];
        }
        if taken + width == max_units {
            let low_next = high && {
                let mut rest = text[end..].chars();
                matches!(
                    (rest.next(), rest.next()),
                    (Some(m), n) if unit_of(m, n).is_some_and(|l| (0xDC00..=0xDFFF).contains(&l))
                )
            };
            return if low_next { &text[..i] } else { &text[..end] };
        }
        taken += width;
        at = end;
    }
    text
}

/// JavaScript's default `Array.prototype.sort` order of two strings: by UTF-16 code units.
pub fn cmp_utf16(a: &str, b: &str) -> std::cmp::Ordering {
    units(a).cmp(units(b))
}

/// `s` with each lone surrogate shown as U+FFFD, for text meant for a person rather than for
/// JSON (node writes a lone surrogate to a UTF-8 stream the same way).
pub fn display(s: &str) -> Cow<'_, str> {
    if !has_lone_surrogate(s) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if unit_of(c, chars.peek().copied()).is_some() {
            chars.next();
            out.push('\u{FFFD}');
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `String.prototype.trim`: removes JavaScript's WhiteSpace and LineTerminator characters from
/// both ends (U+FEFF is one; U+0085, which Rust's `str::trim` removes, is not).
pub fn trim(s: &str) -> &str {
    s.trim_matches(|c: char| c == '\u{FEFF}' || (c.is_whitespace() && c != '\u{85}'))
}

/// JSON text with every [`MARK`] pair written as its lowercase `\udXXX` escape, as
/// `JSON.stringify` writes a lone surrogate, except that a high one directly followed by a low
/// one is a valid pair in JavaScript (two strings joined) and is written as the character
/// itself. `json` must come from a serializer that writes non-ASCII characters unescaped
/// (serde_json does), so that every pair stands inside a string literal.
pub fn restore_json(json: &str) -> Cow<'_, str> {
    if memchr::memmem::find(json.as_bytes(), MARK_UTF8).is_none() {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        let Some(unit) = unit_of(c, chars.peek().copied()) else {
            out.push(c);
            continue;
        };
        chars.next();
        if (0xD800..=0xDBFF).contains(&unit) {
            let mut ahead = chars.clone();
            if let (Some(m), n) = (ahead.next(), ahead.next())
                && let Some(low) = unit_of(m, n).filter(|l| (0xDC00..=0xDFFF).contains(l))
            {
                chars.next();
                chars.next();
                out.extend(char::decode_utf16([unit, low]).map(|r| r.unwrap_or('\u{FFFD}')));
                continue;
            }
        }
        out.push_str(&format!("\\u{unit:04x}"));
    }
    Cow::Owned(out)
}

/// [`restore_json`] of a serialized body (bytes that are not UTF-8 are passed on unchanged).
pub fn restore_bytes(body: Vec<u8>) -> Vec<u8> {
    if memchr::memmem::find(&body, MARK_UTF8).is_none() {
        return body;
    }
    match String::from_utf8(body) {
        Ok(text) => match restore_json(&text) {
            Cow::Borrowed(_) => text.into_bytes(),
            Cow::Owned(restored) => restored.into_bytes(),
        },
        Err(e) => e.into_bytes(),
    }
}

/// JSON text of the file with every literal [`MARK`] written as the escape `\ufdd0`: the same
/// value to `JSON.parse` and to any JSON reader, which [`restore_json`] then leaves as it is. For
/// raw values a document writes as the file holds them among decoded fields that are restored
/// with it (a context's `thinkingLevel` and `model`): text holding U+FDD0 followed by a
/// private-use character stays that text instead of reading as a lone surrogate. Only for the
/// file's own JSON text: a serialized decoded string holds its lone surrogates as literal pairs,
/// which must be restored, not escaped. Borrowed when there is no [`MARK`].
pub fn escape_marks(json: &str) -> Cow<'_, str> {
    // The first byte of MARK's encoding is rare in names: most values are read without the
    // substring search.
    if memchr::memchr(MARK_UTF8[0], json.as_bytes()).is_none()
        || memchr::memmem::find(json.as_bytes(), MARK_UTF8).is_none()
    {
        return Cow::Borrowed(json);
    }
    // A MARK can only stand inside a string literal (JSON's syntax outside strings is ASCII).
    Cow::Owned(json.replace(MARK, "\\ufdd0"))
}

/// A writer that applies [`restore_json`] to everything written through it, streaming: at most
/// one pair of pairs (12 bytes) is held back between writes. Use it for every stream of JSON (or
/// text) sessiond prints that may hold decoded strings.
#[derive(Debug)]
pub struct RestoringWriter<W: Write> {
    inner: W,
    held: Vec<u8>,
}

impl<W: Write> RestoringWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        RestoringWriter {
            inner,
            held: Vec::new(),
        }
    }

    /// Writes out `bytes`, holding back a tail that may be the start of a pair whose end has not
    /// been written yet (unless `last`).
    fn pass(&mut self, bytes: &[u8], last: bool) -> io::Result<()> {
        let mut start = 0;
        let mut search = 0;
        while let Some(found) = memchr::memmem::find(&bytes[search..], MARK_UTF8) {
            let at = search + found;
            // A pair is 6 bytes; a high one may be followed by a low pair: 12 bytes decide.
            if !last && bytes.len() - at < 12 {
                self.inner.write_all(&bytes[start..at])?;
                self.held.extend_from_slice(&bytes[at..]);
                return Ok(());
            }
            let end = (at + 12).min(bytes.len());
            let consumed = restored_prefix_len(&bytes[at..end]);
            self.inner.write_all(&bytes[start..at])?;
            match std::str::from_utf8(&bytes[at..at + consumed]) {
                Ok(text) => self.inner.write_all(restore_json(text).as_bytes())?,
                Err(_) => self.inner.write_all(&bytes[at..at + consumed])?,
            }
            start = at + consumed;
            search = start;
        }
        // The end of the bytes may be the first bytes of a MARK.
        let keep = if last {
            0
        } else {
            (1..MARK_UTF8.len())
                .rev()
                .find(|&k| bytes.len() - start >= k && bytes.ends_with(&MARK_UTF8[..k]))
                .unwrap_or(0)
        };
        self.inner.write_all(&bytes[start..bytes.len() - keep])?;
        self.held.extend_from_slice(&bytes[bytes.len() - keep..]);
        Ok(())
    }

    /// The inner writer, after writing out what was held back: bytes written to it directly
    /// are passed as they are.
    pub fn get_mut(&mut self) -> io::Result<&mut W> {
        self.finish()?;
        Ok(&mut self.inner)
    }

    /// The wrapped writer (anything held back is written first).
    pub fn into_inner(mut self) -> io::Result<W> {
        self.finish()?;
        Ok(self.inner)
    }

    fn finish(&mut self) -> io::Result<()> {
        let held = std::mem::take(&mut self.held);
        self.pass(&held, true)
    }
}

/// How many bytes from the start of `window` (which starts with a MARK) form one restorable unit:
/// a pair of pairs (12 bytes), one pair (6), or the MARK alone (3).
fn restored_prefix_len(window: &[u8]) -> usize {
    let text = String::from_utf8_lossy(window);
    let mut chars = text.chars();
    let (Some(m), n) = (chars.next(), chars.next()) else {
        return MARK_UTF8.len().min(window.len());
    };
    let Some(unit) = unit_of(m, n) else {
        return MARK_UTF8.len();
    };
    if (0xD800..=0xDBFF).contains(&unit)
        && let (Some(m2), n2) = (chars.next(), chars.next())
        && unit_of(m2, n2).is_some_and(|l| (0xDC00..=0xDFFF).contains(&l))
    {
        return 12;
    }
    6
}

impl<W: Write> Write for RestoringWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.held.is_empty() {
            self.pass(buf, false)?;
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(buf);
            self.pass(&joined, false)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.finish()?;
        self.inner.flush()
    }
}

// ---------------------------------------------------------------------------------------------
// JSON.parse.

/// The text of a raw JSON string as `JSON.parse` gives it (lone surrogates as [`MARK`] pairs),
/// or `None` for any other JSON value.
pub fn decode_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    // (memchr: `str::contains` takes a byte-at-a-time path for the short strings ids,
    // roles and timestamps are.)
    if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
        // Valid JSON without escapes: the text between the quotes is the string.
        return Some(Cow::Borrowed(inner));
    }
    let mut p = Parser::new(text.as_bytes());
    match p.string() {
        Ok(s) if p.at == text.len() => Some(Cow::Owned(s)),
        _ => None,
    }
}

/// Text that serde_json decoded without validating it (its `deserialize_bytes` path: escapes
/// decoded, a lone surrogate escape written as the WTF-8 bytes of its code unit) as a string of
/// this module: lone surrogates as [`MARK`] pairs, any other invalid UTF-8 as U+FFFD.
pub fn from_wtf8(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                // ED A0..BF 80..BF: the three-byte form of a surrogate code unit.
                if let [0xED, b1 @ 0xA0..=0xBF, b2 @ 0x80..=0xBF, ..] = *bad {
                    let unit = 0xD000 | (u16::from(b1 & 0x3F) << 6) | u16::from(b2 & 0x3F);
                    push_unit(&mut out, unit);
                    rest = &bad[3..];
                } else {
                    out.push('\u{FFFD}');
                    rest = &bad[e.error_len().unwrap_or(bad.len())..];
                }
            }
        }
    }
    Cow::Owned(out)
}

/// `JSON.parse(text)` as a `Value` (see the module documentation for strings, numbers and
/// nesting deeper than [`VALUE_DEPTH`], which is held as text). Errors: text `JSON.parse` refuses.
pub fn parse_value(bytes: &[u8]) -> Result<Value, ParseError> {
    if let Ok(v) = serde_json::from_slice(bytes) {
        return Ok(v);
    }
    Parser::new(bytes).document()
}

/// True when `bytes` (JSON text, valid or not) nests arrays and objects deeper than `max`
/// levels anywhere outside strings. Text shorter than `2 * max` bytes cannot, and is not scanned.
pub fn exceeds_depth(bytes: &[u8], max: usize) -> bool {
    // (A torn line can end inside a string, right after a backslash.)
    if bytes.len() <= 2 * max {
        return false;
    }
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' => {
                // Skip the string: to the next quote not escaped by a backslash.
                i += 1;
                // `get`: an escape can be the text's last byte, so `i` may pass the end.
                while let Some(k) = bytes
                    .get(i..)
                    .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
                {
                    i += k;
                    if bytes[i] == b'\\' {
                        i += 2;
                    } else {
                        break;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// An open array or object while parsing (the parser keeps its own stack, so depth costs no
/// call stack).
enum Open {
    Array(Vec<Value>),
    Object(Map<String, Value>, String),
}

struct Parser<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn new(b: &'a [u8]) -> Self {
        Parser { b, at: 0 }
    }

    fn fail<T>(&self, what: &'static str) -> Result<T, ParseError> {
        Err(ParseError::Syntax {
            offset: self.at,
            what,
        })
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn document(mut self) -> Result<Value, ParseError> {
        let v = self.value()?;
        self.ws();
        if self.at != self.b.len() {
            return self.fail("unexpected text after the JSON value");
        }
        Ok(v)
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        let mut stack: Vec<Open> = Vec::new();
        loop {
            // Parse one value, or open a container.
            self.ws();
            let mut done = match self.peek() {
                Some(b'[' | b'{') if stack.len() >= VALUE_DEPTH => self.deep()?,
                Some(b'[') => {
                    self.at += 1;
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.at += 1;
                        Value::Array(Vec::new())
                    } else {
                        stack.push(Open::Array(Vec::new()));
                        continue;
                    }
                }
                Some(b'{') => {
                    self.at += 1;
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.at += 1;
                        Value::Object(Map::new())
                    } else {
                        let key = self.key()?;
                        stack.push(Open::Object(Map::new(), key));
                        continue;
                    }
                }
                Some(b'"') => Value::String(self.string()?),
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b't') => self.word("true", Value::Bool(true))?,
                Some(b'f') => self.word("false", Value::Bool(false))?,
                Some(b'n') => self.word("null", Value::Null)?,
                Some(_) => return self.fail("expected a JSON value"),
                None => return self.fail("unexpected end of the JSON text"),
            };
            // Hand the finished value to the containers it closes.
            loop {
                let Some(top) = stack.last_mut() else {
                    return Ok(done);
                };
                self.ws();
                let more = match self.peek() {
                    Some(b',') => true,
                    Some(b']') if matches!(top, Open::Array(_)) => false,
                    Some(b'}') if matches!(top, Open::Object(..)) => false,
                    Some(_) => return self.fail("expected ',' or the end of the array or object"),
                    None => return self.fail("unexpected end of the JSON text"),
                };
                self.at += 1;
                if more {
                    match stack.last_mut() {
                        Some(Open::Array(items)) => items.push(done),
                        Some(Open::Object(map, key)) => {
                            // `JSON.parse`: the last of duplicate keys wins, in the first one's
                            // place.
                            map.insert(std::mem::take(key), done);
                            self.ws();
                            *key = self.key()?;
                        }
                        None => return Ok(done),
                    }
                    break;
                }
                done = match stack.pop() {
                    Some(Open::Array(mut items)) => {
                        items.push(done);
                        Value::Array(items)
                    }
                    Some(Open::Object(mut map, key)) => {
                        map.insert(key, done);
                        Value::Object(map)
                    }
                    None => return Ok(done),
                };
            }
        }
    }

    /// The array or object that opens here, beyond [`VALUE_DEPTH`]: checked as `JSON.parse`
    /// reads it (serde_json's skipping of a value keeps its own stack, checks the syntax, and
    /// takes lone surrogate escapes, numbers beyond a double and any depth, as `JSON.parse`
    /// does), and held as a string of its JSON text (invalid UTF-8 as U+FFFD).
    fn deep(&mut self) -> Result<Value, ParseError> {
        let rest = &self.b[self.at..];
        let mut values =
            serde_json::Deserializer::from_slice(rest).into_iter::<serde::de::IgnoredAny>();
        match values.next() {
            Some(Ok(_)) => {}
            _ => return self.fail("invalid JSON in a deeply nested array or object"),
        }
        let end = self.at + values.byte_offset();
        let text = from_wtf8(&self.b[self.at..end]).into_owned();
        self.at = end;
        Ok(Value::String(text))
    }

    /// An object key and its colon.
    fn key(&mut self) -> Result<String, ParseError> {
        if self.peek() != Some(b'"') {
            return self.fail("expected a string key");
        }
        let key = self.string()?;
        self.ws();
        if self.peek() != Some(b':') {
            return self.fail("expected ':'");
        }
        self.at += 1;
        Ok(key)
    }

    fn word(&mut self, word: &'static str, v: Value) -> Result<Value, ParseError> {
        if self.b[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(v)
        } else {
            self.fail("expected a JSON value")
        }
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return self.fail("expected a digit"),
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return self.fail("expected a digit after '.'");
            }
            self.digits();
            integer = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return self.fail("expected a digit in the exponent");
            }
            self.digits();
            integer = false;
        }
        // ASCII by construction.
        let text = std::str::from_utf8(&self.b[start..self.at]).unwrap_or("0");
        // The same `Number` serde_json makes of this text: an integer when it fits, else a double.
        if integer {
            if !negative && let Ok(u) = text.parse::<u64>() {
                return Ok(Value::Number(u.into()));
            }
            if negative
                && let Ok(i) = text.parse::<i64>()
                && i != 0
            {
                return Ok(Value::Number(i.into()));
            }
        }
        let f: f64 = text.parse().unwrap_or(f64::NAN);
        // `Infinity` has no JSON spelling; `JSON.stringify` writes it as `null`.
        Ok(Number::from_f64(f).map_or(Value::Null, Value::Number))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
    }

    fn hex4(&mut self) -> Result<u16, ParseError> {
        let Some(h) = self.b.get(self.at..self.at + 4) else {
            return self.fail("unexpected end of a \\u escape");
        };
        let unit = std::str::from_utf8(h)
            .ok()
            .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
            .and_then(|h| u16::from_str_radix(h, 16).ok());
        match unit {
            Some(u) => {
                self.at += 4;
                Ok(u)
            }
            None => self.fail("invalid \\u escape"),
        }
    }

    /// A string literal at `self.at` (which is its opening quote).
    fn string(&mut self) -> Result<String, ParseError> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let rest = &self.b[self.at..];
            let Some(k) = memchr::memchr2(b'"', b'\\', rest) else {
                return self.fail("unterminated string");
            };
            let chunk = &rest[..k];
            if let Some(c) = chunk.iter().position(|&c| c < 0x20) {
                self.at += c;
                return self.fail("control character in a string");
            }
            out.push_str(&String::from_utf8_lossy(chunk));
            self.at += k;
            if self.b[self.at] == b'"' {
                self.at += 1;
                return Ok(out);
            }
            self.at += 1;
            let Some(e) = self.peek() else {
                return self.fail("unterminated string");
            };
            self.at += 1;
            match e {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let unit = self.hex4()?;
                    if (0xD800..=0xDBFF).contains(&unit)
                        && self.b.get(self.at..self.at + 2) == Some(b"\\u")
                    {
                        let back = self.at;
                        self.at += 2;
                        let low = self.hex4()?;
                        if (0xDC00..=0xDFFF).contains(&low) {
                            let c = char::decode_utf16([unit, low])
                                .next()
                                .and_then(Result::ok)
                                .unwrap_or('\u{FFFD}');
                            out.push(c);
                            continue;
                        }
                        self.at = back;
                    }
                    push_unit(&mut out, unit);
                }
                _ => {
                    self.at -= 1;
                    return self.fail("invalid escape");
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn escaped_marks_are_the_same_text_and_stay_through_a_restore() {
        let text = "\"a\u{FDD0}\u{E000}b\u{FDD0}\"";
        let escaped = escape_marks(text);
        assert_eq!(escaped, "\"a\\ufdd0\u{E000}b\\ufdd0\"");
        let read: String = serde_json::from_str(&escaped).unwrap();
        assert_eq!(read, "a\u{FDD0}\u{E000}b\u{FDD0}");
        assert_eq!(restore_json(&escaped), escaped);
        assert!(matches!(escape_marks("\"plain\""), Cow::Borrowed(_)));
    }

    #[test]
    fn depth_scan_survives_text_that_ends_inside_an_escape() {
        let mut torn = vec![b'['; 40];
        torn.extend_from_slice(b"\"abc\\");
        assert!(exceeds_depth(&torn, 10));
        let mut shallow = b"[\"".to_vec();
        shallow.extend(std::iter::repeat_n(b'x', 40));
        shallow.push(b'\\');
        assert!(!exceeds_depth(&shallow, 10));
    }
    use serde_json::json;

    fn lone(unit: u16) -> String {
        lone_surrogate(unit).unwrap().iter().collect()
    }

    #[test]
    fn strings_decode_like_json_parse() {
        let raw = |s: &str| serde_json::from_str::<Box<RawValue>>(s).unwrap();
        assert_eq!(decode_str(&raw(r#""plain""#)).unwrap(), "plain");
        assert_eq!(decode_str(&raw(r#""a\nb""#)).unwrap(), "a\nb");
        assert_eq!(
            decode_str(&raw(r#""fix \ud83d""#)).unwrap(),
            format!("fix {}", lone(0xD83D))
        );
        assert_eq!(decode_str(&raw(r#""\ud83d\ude80""#)).unwrap(), "🚀");
        assert_eq!(
            decode_str(&raw(r#""\ude80\ud83d""#)).unwrap(),
            format!("{}{}", lone(0xDE80), lone(0xD83D))
        );
        assert_eq!(decode_str(&raw(r#""\\ud83d""#)).unwrap(), "\\ud83d");
        assert_eq!(decode_str(&raw("12")), None);
    }

    #[test]
    fn nesting_beyond_the_value_depth_is_held_as_its_text() {
        // Exactly VALUE_DEPTH levels: an ordinary Value.
        let at = format!("{}{}", "[".repeat(VALUE_DEPTH), "]".repeat(VALUE_DEPTH));
        let mut v = parse_value(at.as_bytes()).unwrap();
        let mut levels = 0;
        while let Value::Array(mut items) = v {
            levels += 1;
            v = items.pop().unwrap_or(Value::Null);
        }
        assert_eq!(levels, VALUE_DEPTH);
        // A million levels under a key, with a lone surrogate escape, a number beyond a double
        // and a raw non-UTF-8 byte inside: read, the part below VALUE_DEPTH held as its text.
        let n = 1_000_000;
        let mut line = br#"{"a":1,"d":"#.to_vec();
        line.extend(b"[".repeat(n));
        line.extend(b"\"\\ud83d\xe9\",1e400");
        line.extend(b"]".repeat(n));
        line.extend(br#","z":2}"#);
        let v = parse_value(&line).unwrap();
        assert_eq!(v["z"], 2);
        let mut inner = &v["d"];
        for _ in 0..VALUE_DEPTH - 1 {
            inner = &inner[0];
        }
        let Value::String(text) = inner else {
            panic!("not held as text: {inner:?}")
        };
        let k = n - VALUE_DEPTH + 1;
        let expected = format!(
            "{}\"\\ud83d\u{FFFD}\",1e400{}",
            "[".repeat(k),
            "]".repeat(k)
        );
        assert!(*text == expected, "the deep part's text differs");
        // What JSON.parse refuses deep down is refused too.
        for bad in [&b"[1,]"[..], b"[\"\x01\"]", b"[01]", b"[", b"{\"a\" 1}"] {
            let mut line = b"[".repeat(VALUE_DEPTH);
            line.extend(bad);
            line.extend(b"]".repeat(VALUE_DEPTH));
            assert!(
                parse_value(&line).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        drop(v);
    }

    #[test]
    fn values_parse_like_json_parse() {
        let v = parse_value(br#"{"a":"x\ud83d","n":1e400,"m":-1e400,"b":1,"a":2}"#).unwrap();
        assert_eq!(v, json!({"a": 2, "n": null, "m": null, "b": 1}));
        let v = parse_value(br#"[123456789012345678901234567890,-0,5e-324,18446744073709551616]"#)
            .unwrap();
        assert_eq!(
            v,
            serde_json::from_str::<Value>(
                "[123456789012345678901234567890,-0,5e-324,18446744073709551616]"
            )
            .unwrap()
        );
        let deep = format!("{}1{}", "[".repeat(500), "]".repeat(500));
        assert!(parse_value(deep.as_bytes()).is_ok());
        let in_string = format!("\"{}\"", "[".repeat(5000));
        assert!(!exceeds_depth(in_string.as_bytes(), VALUE_DEPTH));
        for bad in [
            &b"{"[..],
            b"[1,]",
            b"{\"a\" 1}",
            b"\"\x01\"",
            b"01",
            b"1.",
            b"-",
            b"\"\\x\"",
            b"[] x",
            b"\"\\ud83",
        ] {
            assert!(
                parse_value(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // Invalid UTF-8 inside a string reads as U+FFFD, as pi decodes the file.
        assert_eq!(
            parse_value(b"\"a\xffb\\n\"").unwrap(),
            json!("a\u{FFFD}b\n")
        );
    }

    #[test]
    fn lengths_count_utf16_units_of_every_width() {
        let samples = [
            "",
            "plain ascii\n",
            "é ß ñ",
            "€ 中文 \u{FFFF}",
            "🚀🎉 emoji 𝄞",
            "\u{7F}\u{80}\u{7FF}\u{800}\u{FFFF}\u{10000}\u{10FFFF}",
        ];
        for s in samples {
            let long = s.repeat(37);
            for t in [s, long.as_str()] {
                assert_eq!(utf16_len(t), t.encode_utf16().count(), "{t:?}");
            }
        }
    }

    #[test]
    fn lengths_and_slices_count_a_lone_surrogate_once() {
        let s = format!("ab{}c🚀", lone(0xD83D));
        assert_eq!(utf16_len(&s), 6);
        assert_eq!(
            units(&s).collect::<Vec<_>>(),
            [0x61, 0x62, 0xD83D, 0x63, 0xD83D, 0xDE80]
        );
        assert_eq!(slice_head_utf16(&s, 3), format!("ab{}", lone(0xD83D)));
        assert_eq!(slice_head_utf16(&s, 5), format!("ab{}c", lone(0xD83D)));
        let joined = format!("ab{}{}c", lone(0xD83D), lone(0xDE80));
        assert_eq!(slice_head_utf16(&joined, 3), "ab");
        assert_eq!(code_points(&joined).count(), 4);
        assert_eq!(
            cmp_utf16(&format!("a{}", lone(0xD83D)), "a\u{E000}"),
            std::cmp::Ordering::Less
        );
        assert_eq!(trim("\u{FEFF} x\u{2028}"), "x");
        assert_eq!(trim("\u{85}x"), "\u{85}x");
    }

    #[test]
    fn restoring_writes_escapes_and_joins_pairs() {
        let text = format!(
            "{{\"a\":\"x{}\",\"b\":\"{}{}\",\"c\":\"\u{FDD0}z\"}}",
            lone(0xD83D),
            lone(0xD83D),
            lone(0xDE80)
        );
        let want = "{\"a\":\"x\\ud83d\",\"b\":\"🚀\",\"c\":\"\u{FDD0}z\"}";
        assert_eq!(restore_json(&text), want);
        // Streaming, split at every byte.
        for split in 0..text.len() {
            let mut w = RestoringWriter::new(Vec::new());
            w.write_all(&text.as_bytes()[..split]).unwrap();
            w.write_all(&text.as_bytes()[split..]).unwrap();
            w.flush().unwrap();
            assert_eq!(String::from_utf8(w.into_inner().unwrap()).unwrap(), want);
        }
        assert_eq!(display(&format!("x{}", lone(0xD83D))), "x\u{FFFD}");
    }
}
