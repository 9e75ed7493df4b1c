//! Entry timestamps as JavaScript's `new Date(value).getTime()` sees them.
//!
//! pi converts an entry's ISO timestamp to epoch milliseconds when it projects a
//! `custom_message`, `branch_summary` or `compaction` into a message, and when it
//! orders siblings in `getTree`. Matching those numbers exactly needs the ECMAScript
//! date-time string format (ECMA-262 §21.4.1.32), which is what V8 tries first.
//!
//! Deliberate limits: V8's legacy fallback parser (free-form strings such as
//! `"Tue Mar 05 2024"`, or the `"2026-01-10,x"` that an array of two items becomes) is not
//! emulated; such strings give `None` (pi would print a number or `null`). Date-time forms
//! without an offset are local time in JavaScript; sessiond reads them as UTC, which equals pi whenever the process runs with `TZ=UTC`.
//! pi itself always writes `toISOString()` output, so neither case occurs in files pi wrote.

use serde_json::Value;
use serde_json::value::RawValue;

use crate::js::value::number_to_string;

/// Largest magnitude of a valid JavaScript time value, in milliseconds (ECMA-262 §21.4.1.1).
const MAX_TIME_MS: i64 = 8_640_000_000_000_000;

/// Converts a raw JSON timestamp value the way `new Date(value).getTime()` does.
///
/// Returns `None` where JavaScript yields `NaN` (which `JSON.stringify` prints as `null`).
/// Strings use [`parse_iso`]; numbers are truncated toward zero; `null` is 0; an array is
/// read as the string JavaScript makes of it (its items joined with commas, so `["2026-01-10"]`
/// is a date); an object is `NaN`.
pub fn js_time_of_raw(raw: Option<&RawValue>) -> Option<i64> {
    let text = raw?.get();
    match text.as_bytes().first()? {
        b'"' => parse_iso(&crate::js::jsstr::decode_str(raw?)?),
        b'[' => parse_iso(&js_string(
            &crate::js::jsstr::parse_value(text.as_bytes()).ok()?,
        )),
        b'n' => Some(0),
        b't' => Some(1),
        b'f' => Some(0),
        b'-' | b'0'..=b'9' => {
            // Rust reads JSON number text as JavaScript does (`1e400` is infinite: NaN here).
            let n: f64 = text.parse().ok()?;
            let t = n.trunc();
            (t.is_finite() && t.abs() <= MAX_TIME_MS as f64).then_some(t as i64)
        }
        _ => None,
    }
}

/// `String(value)` in JavaScript, for a value inside an array as `Array.prototype.join` writes
/// it (`null` is empty there): the text `new Date(array)` parses.
fn js_string(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), number_to_string),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(js_string).collect::<Vec<_>>().join(","),
        Value::Object(_) => "[object Object]".to_owned(),
    }
}

/// Parses the ECMAScript date-time string format: `YYYY[-MM[-DD]][THH:mm[:ss[.s+]][Z|±HH:mm]]`,
/// with `±YYYYYY` extended years. Returns epoch milliseconds, or `None` for anything else.
pub fn parse_iso(s: &str) -> Option<i64> {
    // What pi writes (`toISOString`) is read by its fixed layout; anything else field by field.
    iso_fixed(s.as_bytes())
        .or_else(|| iso_fields(s))?
        .epoch_ms()
}

/// A date-time's fields as written, before they are checked ([`IsoFields::epoch_ms`]).
struct IsoFields {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    millis: u32,
    /// Whether a digit of the fraction past the milliseconds is not 0.
    sub_millis: bool,
    /// The offset from UTC, in minutes.
    offset_min: i64,
}

/// `YYYY-MM-DDTHH:mm:ss.sssZ` (24 bytes, as `toISOString` writes years 0..=9999), the
/// fields of which the general reading ([`iso_fields`]) gives the same; `None` for any other
/// text.
fn iso_fixed(b: &[u8]) -> Option<IsoFields> {
    const DIGITS: [usize; 17] = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22];
    const MARKS: [(usize, u8); 7] = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ];
    if b.len() != 24
        || MARKS.iter().any(|&(i, c)| b[i] != c)
        || DIGITS.iter().any(|&i| !b[i].is_ascii_digit())
    {
        return None;
    }
    let n = |from: usize, to: usize| {
        b[from..to]
            .iter()
            .fold(0u32, |v, &d| v * 10 + u32::from(d - b'0'))
    };
    Some(IsoFields {
        year: i64::from(n(0, 4)),
        month: n(5, 7),
        day: n(8, 10),
        hour: n(11, 13),
        minute: n(14, 16),
        second: n(17, 19),
        millis: n(20, 23),
        sub_millis: false,
        offset_min: 0,
    })
}

/// The fields of any text in the format [`parse_iso`] reads; `None` for text that is not.
fn iso_fields(s: &str) -> Option<IsoFields> {
    let mut p = Cursor {
        b: s.as_bytes(),
        i: 0,
    };
    let year = match p.peek() {
        Some(sign @ (b'+' | b'-')) => {
            p.i += 1;
            let y = p.digits(6)? as i64;
            if sign == b'-' && y == 0 {
                return None; // "-000000" is explicitly invalid
            }
            if sign == b'-' { -y } else { y }
        }
        _ => p.digits(4)? as i64,
    };
    let (mut month, mut day) = (1, 1);
    if p.eat(b'-') {
        month = p.digits(2)?;
        if p.eat(b'-') {
            day = p.digits(2)?;
        }
    }
    let (mut hour, mut minute, mut second, mut millis) = (0, 0, 0, 0);
    let mut sub_millis = false;
    let mut offset_min: i64 = 0;
    if p.eat(b'T') || p.eat(b't') {
        hour = p.digits(2)?;
        if !p.eat(b':') {
            return None;
        }
        minute = p.digits(2)?;
        if p.eat(b':') {
            second = p.digits(2)?;
            // V8 takes only `.` before the fraction (`,` gives NaN), and reads every digit of
            // it: past the milliseconds they count for nothing but `24:00`'s check.
            if p.eat(b'.') {
                let start = p.i;
                let mut scale = 100;
                while let Some(d @ b'0'..=b'9') = p.peek() {
                    millis += u32::from(d - b'0') * scale;
                    sub_millis |= scale == 0 && d != b'0';
                    scale /= 10;
                    p.i += 1;
                }
                if p.i == start {
                    return None;
                }
            }
        }
        match p.peek() {
            Some(b'Z' | b'z') => p.i += 1,
            Some(sign @ (b'+' | b'-')) => {
                p.i += 1;
                let oh = p.digits(2)? as i64;
                if !p.eat(b':') {
                    return None;
                }
                let om = p.digits(2)? as i64;
                if oh > 23 || om > 59 {
                    return None;
                }
                offset_min = (oh * 60 + om) * if sign == b'-' { -1 } else { 1 };
            }
            _ => {} // local time: read as UTC, see the module comment
        }
    } else if p.eat(b'Z') {
        // "2024-01-01Z" is not in the format
        return None;
    }
    if p.i != p.b.len() {
        return None;
    }
    Some(IsoFields {
        year,
        month,
        day,
        hour,
        minute,
        second,
        millis,
        sub_millis,
        offset_min,
    })
}

impl IsoFields {
    /// Epoch milliseconds of these fields; `None` where V8 finds them out of range.
    fn epoch_ms(self) -> Option<i64> {
        // V8 checks the day against 1..=31 only, whatever the month: "2023-02-29" and "2024-04-31"
        // roll over into the next month (MakeDay is linear in the day, and so is `days_from_civil`).
        if !(1..=12).contains(&self.month) || !(1..=31).contains(&self.day) {
            return None;
        }
        if self.hour > 24
            || self.minute > 59
            || self.second > 59
            || (self.hour == 24
                && ((self.minute | self.second | self.millis) != 0 || self.sub_millis))
        {
            return None;
        }
        let days = days_from_civil(self.year, self.month, self.day);
        let minutes =
            (days * 24 + i64::from(self.hour)) * 60 + i64::from(self.minute) - self.offset_min;
        let ms = minutes * 60_000 + i64::from(self.second) * 1000 + i64::from(self.millis);
        (ms.abs() <= MAX_TIME_MS).then_some(ms)
    }
}

/// Formats epoch milliseconds the way JavaScript's `Date.prototype.toISOString` does:
/// `YYYY-MM-DDTHH:mm:ss.sssZ`, with `±YYYYYY` years outside 0..=9999. This is the timestamp
/// pi writes into every entry and header, so new entries look exactly like pi's.
pub fn format_iso(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let year = if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else if y < 0 {
        format!("-{:06}", -y)
    } else {
        format!("+{y:06}")
    };
    format!("{year}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z")
}

/// The current time as [`format_iso`] text. Reads the clock, so it is the one impure helper
/// here; pure callers take a timestamp as an argument instead.
pub fn now_iso() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    format_iso(ms)
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.i += usize::from(hit);
        hit
    }
    /// Exactly `n` ASCII digits.
    fn digits(&mut self, n: usize) -> Option<u32> {
        let slice = self.b.get(self.i..self.i + n)?;
        let mut v = 0u32;
        for &d in slice {
            if !d.is_ascii_digit() {
                return None;
            }
            v = v * 10 + u32::from(d - b'0');
        }
        self.i += n;
        Some(v)
    }
}

/// Days since 1970-01-01 of the date `y`-`m`-`d` in the proleptic Gregorian calendar (Howard
/// Hinnant's algorithm; negative before 1970). `m` is 1..=12 and `d` 1..=31; other values give
/// a meaningless (but panic-free) number, so callers validate first.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `z` days after 1970-01-01 (negative: before) as (year, month 1..=12, day 1..=31),
/// proleptic Gregorian: the inverse of [`days_from_civil`] (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The fixed layout reads what the general reading reads: every `toISOString` form of
    /// random times, and that form with each byte replaced by a digit, a mark or a letter
    /// (out-of-range fields, misplaced marks).
    #[test]
    fn the_fixed_layout_reads_what_the_fields_read() {
        let mut rng = fastrand::Rng::with_seed(15);
        let general = |s: &str| iso_fields(s).and_then(IsoFields::epoch_ms);
        let mut fixed_read = 0;
        for _ in 0..2000 {
            let ms = rng.i64(-62_167_219_200_000..253_402_300_800_000);
            let text = format_iso(ms);
            assert_eq!(parse_iso(&text), Some(ms), "{text}");
            let mut bytes = text.into_bytes();
            let at = rng.usize(..bytes.len());
            bytes[at] = *rng.choice(b"0123456789-T:.Zz+ 9").unwrap_or(&b'0');
            let Ok(changed) = std::str::from_utf8(&bytes) else {
                continue;
            };
            if let Some(fields) = iso_fixed(changed.as_bytes()) {
                fixed_read += 1;
                assert_eq!(fields.epoch_ms(), general(changed), "{changed}");
            }
            assert_eq!(parse_iso(changed), general(changed), "{changed}");
        }
        assert!(fixed_read > 500, "{fixed_read}");
    }

    #[test]
    fn iso_forms_match_javascript() {
        // Values from node: new Date(s).getTime()
        assert_eq!(
            parse_iso("2025-11-20T23:33:01.550Z"),
            Some(1_763_681_581_550)
        );
        assert_eq!(parse_iso("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_iso("2024-01-01T24:00:00.0000Z"),
            Some(1_704_153_600_000)
        );
        assert_eq!(
            parse_iso("2024-01-01T23:59:59.9995Z"),
            Some(1_704_153_599_999)
        );
        assert_eq!(parse_iso("1970-01-01"), Some(0));
        assert_eq!(
            parse_iso("2024-02-29T12:00:00.1234Z"),
            Some(1_709_208_000_123)
        );
        assert_eq!(
            parse_iso("2024-01-01T01:00:00+01:00"),
            Some(1_704_067_200_000)
        );
        assert_eq!(parse_iso("1969-12-31T23:59:59.999Z"), Some(-1));
        assert_eq!(
            parse_iso("+010000-01-01T00:00:00Z"),
            Some(253_402_300_800_000)
        );
        assert_eq!(parse_iso("2024-01-01T24:00:00Z"), Some(1_704_153_600_000));
        // V8 rolls a day past the month's end over instead of refusing it.
        assert_eq!(parse_iso("2023-02-29"), Some(1_677_628_800_000));
        assert_eq!(parse_iso("2024-02-31"), Some(1_709_337_600_000));
        assert_eq!(parse_iso("2024-06-31T10:00"), Some(1_719_828_000_000));
    }

    #[test]
    fn format_round_trips_like_to_iso_string() {
        // Values from node: new Date(ms).toISOString()
        assert_eq!(format_iso(1_763_681_581_550), "2025-11-20T23:33:01.550Z");
        assert_eq!(format_iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_iso(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_iso(1_709_208_000_123), "2024-02-29T12:00:00.123Z");
        assert_eq!(
            format_iso(253_402_300_800_000),
            "+010000-01-01T00:00:00.000Z"
        );
        for ms in [-86_400_001, 951_782_400_000, 4_102_444_799_999] {
            assert_eq!(parse_iso(&format_iso(ms)), Some(ms), "{ms}");
        }
    }

    #[test]
    fn invalid_forms_are_nan() {
        for s in [
            "",
            "2024-02-32",
            "2024-02-00",
            "2024-13-01",
            "2024-01-01T25:00Z",
            // V8: a comma before the fraction, and 24:00 with any non-zero digit of it.
            "2024-01-01T00:00:00,000Z",
            "2024-01-01T24:00:00.0001Z",
            "2024-01-01T24:00:00.000000001Z",
            "2024-01-01T10",
            "nope",
            "-000000-01-01",
        ] {
            assert_eq!(parse_iso(s), None, "{s}");
        }
    }

    #[test]
    fn raw_values() {
        let raw = |s: &str| serde_json::from_str::<Box<RawValue>>(s).unwrap();
        assert_eq!(js_time_of_raw(Some(&raw("12.9"))), Some(12));
        assert_eq!(js_time_of_raw(Some(&raw("null"))), Some(0));
        assert_eq!(js_time_of_raw(Some(&raw("{}"))), None);
        assert_eq!(js_time_of_raw(None), None);
    }
}

#[cfg(test)]
mod format_tests {
    use super::*;

    #[test]
    fn formats_round_trip_with_parse() {
        for s in [
            "1970-01-01T00:00:00.000Z",
            "2000-02-29T23:59:59.999Z",
            "2025-12-31T12:34:56.789Z",
        ] {
            let ms = parse_iso(s);
            assert_eq!(ms.map(format_iso).as_deref(), Some(s));
        }
    }
}
