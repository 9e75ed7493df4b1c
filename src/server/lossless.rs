//! Carrying JSON that `serde_json::Value` cannot hold through the Value-based responses of
//! tower-lsp-server, unchanged.
//!
//! pi writes lone UTF-16 surrogate escapes (`"\ud83d"`) when it cuts text inside an emoji, and
//! JavaScript clients read them back as they were. A Rust `String` cannot hold a lone
//! surrogate, so [`parse`] maps each one to two characters: the noncharacter U+FDD0 (never
//! interchanged, so never in a session) followed by the private-use character
//! U+E000 + (unit − 0xD800). [`restore`] turns that pair back into the escape in every frame
//! the transport writes. Numbers round-trip exactly (serde_json's `float_roundtrip`).

use serde_json::Value;

const SENTINEL: char = '\u{FDD0}';

/// Parses JSON text into a `Value`, mapping lone surrogate escapes as described above.
/// Errors: serde_json's, for text that is not JSON.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        Err(e) => match std::str::from_utf8(bytes)
            .ok()
            .and_then(map_lone_surrogates)
        {
            Some(mapped) => serde_json::from_str(&mapped),
            None => Err(e),
        },
    }
}

/// A serialized frame body with every mapped lone surrogate written back as its `\udXXX` escape.
pub fn restore(body: Vec<u8>) -> Vec<u8> {
    const SENTINEL_UTF8: &[u8] = "\u{FDD0}".as_bytes();
    if memchr::memmem::find(&body, SENTINEL_UTF8).is_none() {
        return body;
    }
    // serde_json only writes UTF-8; anything else is passed on as it is.
    let text = match String::from_utf8(body) {
        Ok(t) => t,
        Err(e) => return e.into_bytes(),
    };
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            (SENTINEL, Some(p @ '\u{E000}'..='\u{E7FF}')) => {
                chars.next();
                let unit = 0xD800 + (u32::from(p) - 0xE000);
                out.push_str(&format!("\\u{unit:04x}"));
            }
            _ => out.push(c),
        }
    }
    out.into_bytes()
}

/// `text` with each lone surrogate escape replaced by the escapes of the sentinel pair, or
/// `None` when there is none. Backslashes only occur inside strings, so no string tracking is
/// needed; `\\` is skipped as a whole so `\\ud83d` (an escaped backslash) is left alone.
fn map_lone_surrogates(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let unit_at = |i: usize| -> Option<u32> {
        (b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u'))
            .then(|| std::str::from_utf8(b.get(i + 2..i + 6)?).ok())
            .flatten()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = unit_at(i) else {
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => match unit_at(i + 6) {
                Some(0xDC00..=0xDFFF) => {
                    i += 12;
                    continue;
                }
                _ => true,
            },
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let o = out.get_or_insert_with(String::new);
            o.push_str(&text[copied..i]);
            o.push_str(&format!("\\ufdd0\\u{:04x}", 0xE000 + (unit - 0xD800)));
            copied = i + 6;
        }
        i += 6;
    }
    let mut o = out?;
    o.push_str(&text[copied..]);
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_survive_a_round_trip() {
        let line = br#"{"a":"x\ud83d","b":"\ude80 pair \ud83d\ude80 escaped \\ud83d","n":0.000021000000000000002}"#;
        let value = parse(line).unwrap();
        let body = restore(serde_json::to_vec(&value).unwrap());
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "{\"a\":\"x\\ud83d\",\"b\":\"\\ude80 pair 🚀 escaped \\\\ud83d\",\"n\":0.000021000000000000002}"
        );
    }

    #[test]
    fn plain_json_is_untouched() {
        let body = br#"{"a":"caf\u00e9"}"#.to_vec();
        assert_eq!(restore(body.clone()), body);
        assert!(parse(b"{").is_err());
    }
}
