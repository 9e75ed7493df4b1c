//! The few JavaScript semantics compaction must reproduce to equal pi byte for byte: string
//! length in UTF-16 code units, `JSON.parse` of lone surrogates, `JSON.stringify` (key order,
//! number format, lone surrogates), `String(x)` inside `Array.prototype.join`, the default
//! `sort`, and truthiness.
//!
//! pi's token estimate is `Math.ceil(chars / 4)` over `string.length`, and its serialized
//! conversation embeds `JSON.stringify` of tool arguments, so a Rust `len()` or
//! `serde_json::to_string` would be off for non-ASCII text, integer-like keys and numbers
//! such as `1.0` or `1e21`. Arithmetic is done in `f64` so `NaN` propagates as in JavaScript.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

/// A JavaScript `TypeError` pi would throw on this input (reading a property of `null`,
/// iterating a non-iterable). The text names the operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeError(pub String);

/// Whether the strings of a compaction stand for lone UTF-16 surrogates.
///
/// A JavaScript string is any sequence of UTF-16 code units; pi writes a lone surrogate (text cut
/// inside an emoji) as an escape such as `\ud83d`, which a Rust `String` cannot hold.
/// [`parse_json`] then maps each lone surrogate unit `0xD800 + k` to the private-use character
/// `U+E000 + k`: one code unit either way, so lengths and slices in UTF-16 units stay exact. Once a
/// compaction has seen such a mapping ([`Mapped`](Self::Mapped)), every JSON text it produces
/// maps those characters back ([`stringify`], [`restore_json`](Self::restore_json)).
///
/// Limitation: while `Mapped`, a genuine U+E000..=U+E7FF character in the same session (or in a
/// client's summary) is indistinguishable from a mapped surrogate and is written as the
/// surrogate escape. Such characters are rare in practice; sessions without any lone surrogate
/// are never affected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoneSurrogates {
    /// No lone surrogate was parsed: every character is itself.
    #[default]
    Absent,
    /// Some were: U+E000..=U+E7FF stand for the code units 0xD800..=0xDFFF.
    Mapped,
}

/// The first private-use character [`LoneSurrogates::Mapped`] uses (for unit 0xD800).
const MAPPED_BASE: u32 = 0xE000;

impl LoneSurrogates {
    /// `Mapped` if either is.
    #[must_use]
    pub fn or(self, other: LoneSurrogates) -> LoneSurrogates {
        if self == LoneSurrogates::Mapped {
            self
        } else {
            other
        }
    }

    /// The surrogate code unit `c` stands for, if it stands for one.
    fn unit(self, c: char) -> Option<u16> {
        let c = u32::from(c);
        match self {
            LoneSurrogates::Mapped if (MAPPED_BASE..MAPPED_BASE + 0x800).contains(&c) => {
                u16::try_from(c - MAPPED_BASE + 0xD800).ok()
            }
            _ => None,
        }
    }

    /// The UTF-16 code units of `s` as JavaScript holds the string.
    pub fn units(self, s: &str) -> impl Iterator<Item = u16> + '_ {
        s.chars().flat_map(move |c| {
            let mut buf = [0u16; 2];
            let units: &[u16] = match self.unit(c) {
                Some(u) => {
                    buf[0] = u;
                    &buf[..1]
                }
                None => c.encode_utf16(&mut buf),
            };
            let (first, second) = (units[0], units.get(1).copied());
            std::iter::once(first).chain(second)
        })
    }

    /// JSON text as `JSON.stringify` writes it for the JavaScript strings it holds: each mapped
    /// character becomes its lowercase `\udXXX` escape, except that a mapped high surrogate
    /// directly followed by a mapped low one is a valid pair in JavaScript (two strings
    /// joined), written as the character itself. `json` must come from a serializer that
    /// writes non-ASCII characters unescaped (serde_json, [`stringify`]), so that every mapped
    /// character stands inside a string literal. `Absent` returns `json` unchanged.
    pub fn restore_json(self, json: &str) -> Cow<'_, str> {
        if self == LoneSurrogates::Absent || !json.chars().any(|c| self.unit(c).is_some()) {
            return Cow::Borrowed(json);
        }
        let mut out = String::with_capacity(json.len() + 16);
        let mut chars = json.chars().peekable();
        while let Some(c) = chars.next() {
            let Some(unit) = self.unit(c) else {
                out.push(c);
                continue;
            };
            let low = chars
                .peek()
                .and_then(|&next| self.unit(next))
                .filter(|l| (0xDC00..=0xDFFF).contains(l));
            match low {
                Some(low) if (0xD800..=0xDBFF).contains(&unit) => {
                    chars.next();
                    out.extend(char::decode_utf16([unit, low]).map(|r| r.unwrap_or('\u{FFFD}')));
                }
                _ => {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
        Cow::Owned(out)
    }
}

/// `JSON.parse` of one JSON text (a session line or a message), accepting the lone surrogate
/// escapes JavaScript accepts: when serde_json refuses the text and it holds such escapes,
/// each is mapped to its private-use character (see [`LoneSurrogates`]) and the text parsed
/// again. Errors: serde_json's, for text that is not JSON either way.
pub fn parse_json(bytes: &[u8]) -> Result<(Value, LoneSurrogates), serde_json::Error> {
    let error = match serde_json::from_slice(bytes) {
        Ok(value) => return Ok((value, LoneSurrogates::Absent)),
        Err(e) => e,
    };
    match std::str::from_utf8(bytes)
        .ok()
        .and_then(map_lone_surrogates)
    {
        Some(mapped) => serde_json::from_str(&mapped).map(|v| (v, LoneSurrogates::Mapped)),
        None => Err(error),
    }
}

/// `text` with every lone surrogate escape (`\uD800`..=`\uDFFF` not part of a valid pair)
/// replaced by the escape of its private-use character; `None` when there is none.
fn map_lone_surrogates(text: &str) -> Option<String> {
    let unit_at = |i: usize| {
        (text.get(i..i + 2) == Some("\\u"))
            .then(|| text.get(i + 2..i + 6))
            .flatten()
            .and_then(|h| u16::from_str_radix(h, 16).ok())
    };
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = unit_at(i) else {
            // Any other escape is two bytes; skipping both keeps `\\u…` from reading as `\u…`.
            i += 2;
            continue;
        };
        let paired = (0xD800..=0xDBFF).contains(&unit)
            && unit_at(i + 6).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low));
        if paired {
            i += 12;
        } else if (0xD800..=0xDFFF).contains(&unit) {
            out.push_str(&text[copied..i]);
            let _ = write!(out, "\\u{:04x}", u32::from(unit) - 0xD800 + MAPPED_BASE);
            i += 6;
            copied = i;
        } else {
            i += 6;
        }
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// `string.length`: UTF-16 code units (a mapped lone surrogate is one, as in JavaScript).
pub fn utf16_len(s: &str) -> f64 {
    s.encode_utf16().count() as f64
}

/// JavaScript truthiness of an optional JSON value (absent is `undefined`).
pub fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(_) | Value::Object(_)) => true,
    }
}

/// `value.length` of a property pi reads without a guard: a string's or array's length,
/// `undefined` (so `NaN` once added) for other values, and a `TypeError` for `null`/absent.
pub fn length_of(v: Option<&Value>, what: &str) -> Result<f64, TypeError> {
    match v {
        None | Some(Value::Null) => Err(TypeError(format!(
            "cannot read \"length\" of {} ({what})",
            if v.is_none() { "undefined" } else { "null" }
        ))),
        Some(Value::String(s)) => Ok(utf16_len(s)),
        Some(Value::Array(a)) => Ok(a.len() as f64),
        Some(_) => Ok(f64::NAN),
    }
}

/// `for (const x of v)`: the elements of an array, or the code points of a string (as
/// one-character strings); any other value throws.
pub fn iterate(v: Option<&Value>, what: &str) -> Result<Vec<Value>, TypeError> {
    match v {
        Some(Value::Array(a)) => Ok(a.clone()),
        Some(Value::String(s)) => Ok(s.chars().map(|c| Value::String(c.to_string())).collect()),
        _ => Err(TypeError(format!("{what} is not iterable"))),
    }
}

/// `x.prop` where `x` may be any JSON value: `null`/`undefined` throw, primitives have no
/// JSON properties (`undefined`).
pub fn prop<'a>(v: &'a Value, key: &str, what: &str) -> Result<Option<&'a Value>, TypeError> {
    match v {
        Value::Null => Err(TypeError(format!("cannot read \"{key}\" of null ({what})"))),
        Value::Object(m) => Ok(m.get(key)),
        _ => Ok(None),
    }
}

/// `v === "text"` for an optional value.
pub fn is_str(v: Option<&Value>, s: &str) -> bool {
    matches!(v, Some(Value::String(x)) if x == s)
}

/// `Number.prototype.toString()` of a finite double (shortest round-trip digits, with
/// JavaScript's switch to exponent form below 1e-6 and from 1e21).
pub fn number_to_string(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if f == 0.0 {
        return "0".into();
    }
    // `{:e}` gives the shortest round-trip digits as d.ddddde±x.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1; // position of the decimal point relative to the digits
    let mut out = String::new();
    if f < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        let e = n - 1;
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{}", if e >= 0 { "+" } else { "-" }, e.abs());
    }
    out
}

/// A JSON number as JavaScript holds it (a double).
pub fn number_value(n: &Number) -> f64 {
    n.as_f64().unwrap_or(f64::NAN)
}

/// The property order JavaScript gives an object built by `JSON.parse`: integer-like keys
/// (canonical array indices) ascending first, then the others in insertion order.
pub fn ordered_entries(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut index_keys: Vec<(u32, (&String, &Value))> = Vec::new();
    let mut others = Vec::with_capacity(map.len());
    for (k, v) in map {
        match array_index(k) {
            Some(i) => index_keys.push((i, (k, v))),
            None => others.push((k, v)),
        }
    }
    if index_keys.is_empty() {
        return others;
    }
    index_keys.sort_by_key(|(i, _)| *i);
    index_keys
        .into_iter()
        .map(|(_, e)| e)
        .chain(others)
        .collect()
}

fn array_index(k: &str) -> Option<u32> {
    if k.is_empty() || (k.len() > 1 && k.starts_with('0')) || !k.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    k.parse::<u32>().ok().filter(|&i| i != u32::MAX)
}

/// `JSON.stringify(value)` for a value that came from [`parse_json`] (`lone` says whether its
/// private-use characters stand for lone surrogates, written back as `\udXXX`).
pub fn stringify(value: &Value, lone: LoneSurrogates) -> String {
    let mut out = String::new();
    write_json(&mut out, value);
    match lone.restore_json(&out) {
        Cow::Borrowed(_) => out,
        Cow::Owned(restored) => restored,
    }
}

fn write_json(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let f = number_value(n);
            if f.is_finite() {
                out.push_str(&number_to_string(f));
            } else {
                out.push_str("null");
            }
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in ordered_entries(map).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_json(out, v);
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    // JSON.stringify and serde_json escape the same characters the same way.
    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
}

/// `String(x)` as `Array.prototype.join` applies it (`null` and `undefined` give "").
pub fn join_string(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => number_to_string(number_value(n)),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| join_string(Some(x)))
            .collect::<Vec<_>>()
            .join(","),
        Some(Value::Object(_)) => "[object Object]".into(),
    }
}

/// `String(x)` in a template literal (`undefined` and `null` are spelled out).
pub fn template_string(v: Option<&Value>) -> String {
    match v {
        None => "undefined".into(),
        Some(Value::Null) => "null".into(),
        other => join_string(other),
    }
}

/// JavaScript's default `Array.prototype.sort` order for strings: by UTF-16 code units (a
/// mapped lone surrogate sorts as its unit, not as a private-use character).
pub fn cmp_utf16(a: &str, b: &str, lone: LoneSurrogates) -> Ordering {
    lone.units(a).cmp(lone.units(b))
}

/// pi `sliceHead(text, maxUnits)`: `text.slice(0, maxUnits)` in UTF-16 code units, one unit
/// shorter when the cut would fall inside a surrogate pair. A mapped high surrogate directly
/// followed by a mapped low one is such a pair in JavaScript (two strings joined), so it is
/// kept out whole as well. A lone surrogate before the cut stays, as in pi.
pub fn slice_head_utf16(text: &str, max_units: usize, lone: LoneSurrogates) -> &str {
    let mut units = 0usize;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let w = c.len_utf16();
        if units + w > max_units {
            return &text[..i];
        }
        if units + w == max_units {
            let high = lone.unit(c).is_some_and(|u| (0xD800..=0xDBFF).contains(&u));
            let low_next = chars
                .peek()
                .and_then(|&(_, n)| lone.unit(n))
                .is_some_and(|u| (0xDC00..=0xDFFF).contains(&u));
            return if high && low_next {
                &text[..i]
            } else {
                &text[..i + c.len_utf8()]
            };
        }
        units += w;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_as_javascript_prints_them() {
        for (f, s) in [
            (1.0, "1"),
            (-0.0, "0"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (1.5e300, "1.5e+300"),
            (-2.5, "-2.5"),
            (12345678901234567890.0, "12345678901234567000"),
        ] {
            assert_eq!(number_to_string(f), s, "{f}");
        }
    }

    #[test]
    fn stringify_orders_index_keys_first() {
        let v: Value =
            serde_json::from_str(r#"{"b":1.0,"10":[true,null],"2":"x\u0001","a":{"01":1}}"#)
                .unwrap_or(Value::Null);
        assert_eq!(
            stringify(&v, LoneSurrogates::Absent),
            r#"{"2":"x\u0001","10":[true,null],"b":1,"a":{"01":1}}"#
        );
        assert_eq!(
            stringify(&json!("日本"), LoneSurrogates::Absent),
            "\"日本\""
        );
    }

    #[test]
    fn lengths_are_utf16() {
        let plain = LoneSurrogates::Absent;
        assert_eq!(utf16_len("a🚀é"), 4.0);
        assert_eq!(slice_head_utf16("ab🚀c", 3, plain), "ab");
        assert_eq!(slice_head_utf16("ab🚀c", 4, plain), "ab🚀");
        assert_eq!(slice_head_utf16("ab", 0, plain), "");
    }

    fn parse(text: &str) -> (Value, LoneSurrogates) {
        parse_json(text.as_bytes()).unwrap_or((Value::Null, LoneSurrogates::Absent))
    }

    #[test]
    fn lone_surrogates_parse_as_one_unit_and_stringify_back() {
        // A lone high, a lone low, a valid pair, an escaped backslash and two highs.
        let line =
            r#"{"t":"done \ud83d","u":"\ude80 a \ud83d\ude80 b \\ud83d","v":"\uD83D\uD83D"}"#;
        let (v, lone) = parse(line);
        assert_eq!(lone, LoneSurrogates::Mapped);
        assert_eq!(v["t"], json!("done \u{E03D}"));
        assert_eq!(v["u"], json!("\u{E680} a 🚀 b \\ud83d"));
        assert_eq!(utf16_len(v["t"].as_str().unwrap_or("")), 6.0);
        assert_eq!(
            stringify(&v, lone),
            r#"{"t":"done \ud83d","u":"\ude80 a 🚀 b \\ud83d","v":"\ud83d\ud83d"}"#
        );
        // Without a lone surrogate nothing is mapped, and a genuine private-use character
        // stays itself.
        let (v, lone) = parse(r#"{"t":"\ue03d \ud83d\ude80"}"#);
        assert_eq!(lone, LoneSurrogates::Absent);
        assert_eq!(stringify(&v, lone), "{\"t\":\"\u{E03D} 🚀\"}");
        assert!(parse_json(br#"{"t":"\ud83d"#).is_err());
    }

    #[test]
    fn mapped_halves_joined_are_a_pair() {
        let lone = LoneSurrogates::Mapped;
        // "\ud83d" + "\ude80" is "🚀" in JavaScript.
        let joined = "ab\u{E03D}\u{E680}c";
        assert_eq!(lone.restore_json(&json!(joined).to_string()), "\"ab🚀c\"");
        assert_eq!(
            lone.units(joined).collect::<Vec<_>>(),
            [0x61, 0x62, 0xD83D, 0xDE80, 0x63]
        );
        // sliceHead keeps a pair out whole, but keeps a lone surrogate before the cut.
        assert_eq!(slice_head_utf16(joined, 3, lone), "ab");
        assert_eq!(slice_head_utf16(joined, 4, lone), "ab\u{E03D}\u{E680}");
        assert_eq!(slice_head_utf16("ab\u{E03D}c", 3, lone), "ab\u{E03D}");
        assert_eq!(
            slice_head_utf16(joined, 3, LoneSurrogates::Absent),
            "ab\u{E03D}"
        );
        // A lone surrogate sorts as its unit: below U+E000 and below an astral character's
        // low half.
        assert_eq!(cmp_utf16("a\u{E03D}z", "a😀", lone), Ordering::Less);
        assert_eq!(cmp_utf16("a\u{E03D}", "a\u{E100}", lone), Ordering::Less);
        assert_eq!(
            cmp_utf16("a\u{E03D}z", "a😀", LoneSurrogates::Absent),
            Ordering::Greater
        );
    }
}
