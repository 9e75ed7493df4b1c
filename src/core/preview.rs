//! Text as a person sees it: one-line previews of any dialect's text, and the one function
//! through which every human output of the command line shows characters that would act on a
//! terminal ([`visible`]). Pure: text in, text out.

use std::borrow::Cow;
use std::io::{self, Write};

use crate::js::jsstr;

/// Characters kept in a one-line preview ([`one_line`]).
pub const PREVIEW_CHARS: usize = 80;

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

/// Characters a uuid is shown by in a row (as VS Code's rows show a Claude Code line's).
pub const SHORT_ID: usize = 8;

/// The uuids (`8-4-4-4-12` hex, a Claude Code transcript's) whose first [`SHORT_ID`]
/// characters begin no other id of the tree, so a row can show them short and the short form
/// still names one entry where an id argument is taken. Other ids are shown whole.
pub struct ShortIds(std::collections::HashMap<String, usize>);

impl ShortIds {
    /// Counts the ids of `tree` by their first [`SHORT_ID`] characters (uuids only).
    pub fn of<E: crate::core::tree::TreeEntry>(tree: &crate::core::tree::Tree<E>) -> Self {
        let mut counts = std::collections::HashMap::new();
        for n in 0..tree.len() {
            let id = tree
                .node(n as crate::core::tree::NodeIdx)
                .entry
                .id()
                .as_str();
            if let Some(short) = uuid_head(id) {
                *counts.entry(short.to_owned()).or_insert(0) += 1;
            }
        }
        ShortIds(counts)
    }

    /// `id` as a row shows it: a uuid by its first characters when they name it alone.
    pub fn show<'a>(&self, id: &'a str) -> &'a str {
        match uuid_head(id) {
            Some(short) if self.0.get(short) == Some(&1) => short,
            _ => id,
        }
    }
}

/// The first [`SHORT_ID`] characters of `id` when it is a uuid.
fn uuid_head(id: &str) -> Option<&str> {
    let b = id.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
    let uuid = b.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && hex(0..8)
        && hex(9..13)
        && hex(14..18)
        && hex(19..23)
        && hex(24..36);
    uuid.then(|| &id[..SHORT_ID])
}

#[cfg(test)]
mod short_id_tests {
    use super::{ShortIds, uuid_head};

    #[test]
    fn a_uuid_is_shown_short_where_its_head_names_it_alone() {
        let a = "0f3c9a1e-7b2d-4c5e-9f80-1a2b3c4d5e6f";
        let b = "0f3c9a1e-0000-4c5e-9f80-1a2b3c4d5e6f";
        let c = "12345678-7b2d-4c5e-9f80-1a2b3c4d5e6f";
        assert_eq!(uuid_head(a), Some("0f3c9a1e"));
        for not_uuid in [
            "610f9c1e",
            "line:12",
            "0f3c9a1e-7b2d-4c5e-9f80-1a2b3c4d5e6",
            "",
            "x",
        ] {
            assert_eq!(uuid_head(not_uuid), None, "{not_uuid}");
        }
        assert_eq!(uuid_head("0f3c9a1g-7b2d-4c5e-9f80-1a2b3c4d5e6f"), None);
        let mut counts = std::collections::HashMap::new();
        for id in [a, b, c] {
            *counts.entry(uuid_head(id).unwrap().to_owned()).or_insert(0) += 1;
        }
        let short = ShortIds(counts);
        assert_eq!(short.show(c), "12345678");
        assert_eq!(short.show(a), a, "two ids begin with 0f3c9a1e");
        assert_eq!(short.show("610f9c1e"), "610f9c1e");
    }
}
