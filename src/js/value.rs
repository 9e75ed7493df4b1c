//! The few JavaScript semantics compaction must reproduce to equal pi byte for byte: string
//! length in UTF-16 code units, `JSON.parse` (through [`jsstr`], lone surrogates included),
//! `JSON.stringify` (key order, number format, lone surrogates), `String(x)` inside
//! `Array.prototype.join`, the default `sort`, and truthiness.
//!
//! pi's token estimate is `Math.ceil(chars / 4)` over `string.length`, and its serialized
//! conversation embeds `JSON.stringify` of tool arguments, so a Rust `len()` or
//! `serde_json::to_string` would be off for non-ASCII text, integer-like keys and numbers
//! such as `1.0` or `1e21`. Arithmetic is done in `f64` so `NaN` propagates as in JavaScript.
//! Strings hold lone surrogates as [`jsstr`] pairs, which every function here counts, orders and
//! writes as the one code unit they stand for.

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use crate::js::jsstr;

/// A JavaScript `TypeError` pi would throw on this input (reading a property of `null`,
/// iterating a non-iterable). The text names the operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeError(pub String);

/// `JSON.parse` of one JSON text (a session line or a message): [`jsstr::parse_value`].
/// Errors: text `JSON.parse` refuses.
pub fn parse_json(bytes: &[u8]) -> Result<Value, jsstr::ParseError> {
    jsstr::parse_value(bytes)
}

/// `string.length`: UTF-16 code units (a lone surrogate is one, as in JavaScript).
pub fn utf16_len(s: &str) -> f64 {
    jsstr::utf16_len(s) as f64
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
        Some(Value::String(s)) => Ok(jsstr::code_points(s)
            .map(|c| Value::String(c.to_owned()))
            .collect()),
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

/// `JSON.stringify(value)` for a value that came from [`parse_json`] (lone surrogates written
/// back as `\udXXX`, see [`jsstr::restore_json`]).
pub fn stringify(value: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, value);
    match jsstr::restore_json(&out) {
        std::borrow::Cow::Borrowed(_) => out,
        std::borrow::Cow::Owned(restored) => restored,
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

/// JavaScript's default `Array.prototype.sort` order for strings: by UTF-16 code units (a lone
/// surrogate sorts as its unit).
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    jsstr::cmp_utf16(a, b)
}

/// pi `sliceHead(text, maxUnits)`: see [`jsstr::slice_head_utf16`].
pub fn slice_head_utf16(text: &str, max_units: usize) -> &str {
    jsstr::slice_head_utf16(text, max_units)
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
            stringify(&v),
            r#"{"2":"x\u0001","10":[true,null],"b":1,"a":{"01":1}}"#
        );
        assert_eq!(stringify(&json!("日本")), "\"日本\"");
    }

    #[test]
    fn lengths_are_utf16() {
        assert_eq!(utf16_len("a🚀é"), 4.0);
        assert_eq!(slice_head_utf16("ab🚀c", 3), "ab");
        assert_eq!(slice_head_utf16("ab🚀c", 4), "ab🚀");
        assert_eq!(slice_head_utf16("ab", 0), "");
    }

    #[test]
    fn lone_surrogates_parse_as_one_unit_and_stringify_back() {
        // A lone high, a lone low, a valid pair, an escaped backslash and two highs.
        let line =
            r#"{"t":"done \ud83d","u":"\ude80 a \ud83d\ude80 b \\ud83d","v":"\uD83D\uD83D"}"#;
        let v = parse_json(line.as_bytes()).unwrap_or(Value::Null);
        assert_eq!(utf16_len(v["t"].as_str().unwrap_or("")), 6.0);
        assert_eq!(
            stringify(&v),
            r#"{"t":"done \ud83d","u":"\ude80 a 🚀 b \\ud83d","v":"\ud83d\ud83d"}"#
        );
        // A genuine private-use character stays itself, next to a lone surrogate or not.
        let v =
            parse_json(r#"{"t":"\ue03d \ud83d\ude80 \ud83d"}"#.as_bytes()).unwrap_or(Value::Null);
        assert_eq!(stringify(&v), "{\"t\":\"\u{E03D} 🚀 \\ud83d\"}");
        assert!(parse_json(br#"{"t":"\ud83d"#).is_err());
    }

    #[test]
    fn halves_joined_are_a_pair() {
        let high = parse_json(br#""ab\ud83d""#).unwrap_or(Value::Null);
        let low = parse_json(br#""\ude80c""#).unwrap_or(Value::Null);
        // "\ud83d" + "\ude80" is "🚀" in JavaScript.
        let joined = format!(
            "{}{}",
            high.as_str().unwrap_or(""),
            low.as_str().unwrap_or("")
        );
        assert_eq!(stringify(&json!(joined)), "\"ab🚀c\"");
        // sliceHead keeps a pair out whole, but keeps a lone surrogate before the cut.
        assert_eq!(slice_head_utf16(&joined, 3), "ab");
        assert_eq!(utf16_len(slice_head_utf16(&joined, 4)), 4.0);
        // A lone surrogate sorts as its unit: below U+E000 and below an astral character's
        // low half.
        let lone_z = format!("{}z", high.as_str().unwrap_or(""));
        assert_eq!(cmp_utf16(&lone_z, "ab😀"), Ordering::Less);
        assert_eq!(cmp_utf16(&lone_z, "ab\u{E100}"), Ordering::Less);
    }
}
