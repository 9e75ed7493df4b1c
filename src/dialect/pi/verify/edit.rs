//! pi 1.6.0's `edit` and `write` tools, interpreted: the arguments as pi prepares them
//! (`prepareEditArguments`: `edits[]`, `edits` sent as a JSON string or as one object, the
//! legacy `oldText`/`newText`), and the edit applied as pi applies it (`edit.js`,
//! `edit-diff.js`: BOM split, LF normalization, exact then fuzzy matching with NFKC, trailing
//! whitespace, quotes, dashes and spaces, line widening after a fuzzy match, and the splice
//! back into the original line endings). Pure: strings in, strings out.
//!
//! Offsets are byte offsets into UTF-8 strings where pi uses UTF-16 indices; every offset
//! comes from a search in the same string, so both name the same places.

use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

/// One replacement of an `edit` call (`oldText` → `newText`; pi replaces one occurrence).
pub use crate::core::verify::Replace;

/// An `edit` call's arguments after pi's `prepareEditArguments` and `validateEditInput`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditCall {
    /// `path` as given (resolved against the working directory by the caller).
    pub path: String,
    /// The replacements, in the order pi matches them.
    pub edits: Vec<Replace>,
}

/// Why pi's edit tool would refuse an edit (pi's own messages, shortened).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EditError {
    /// The arguments are not an edit pi accepts (no path, no replacements).
    Invalid(String),
    /// `oldText` of edit `n` is empty.
    EmptyOldText(usize),
    /// Edit `n` is not found.
    NotFound(usize),
    /// Edit `n` is found more than once.
    Duplicate(usize, usize),
    /// Two edits overlap.
    Overlap(usize, usize),
    /// The edits change nothing.
    NoChange,
    /// pi's line widening after a fuzzy match failed.
    Widen,
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EditError::Invalid(d) => write!(f, "invalid edit arguments: {d}"),
            EditError::EmptyOldText(i) => write!(f, "edits[{i}].oldText is empty"),
            EditError::NotFound(i) => write!(f, "edits[{i}].oldText is not found"),
            EditError::Duplicate(i, n) => write!(f, "edits[{i}].oldText is found {n} times"),
            EditError::Overlap(a, b) => write!(f, "edits[{a}] and edits[{b}] overlap"),
            EditError::NoChange => write!(f, "the edits change nothing"),
            EditError::Widen => write!(f, "the fuzzy match could not be widened to lines"),
        }
    }
}

fn single_edit(v: &Value) -> Option<Value> {
    match v {
        Value::Object(o)
            if o.get("oldText").is_some_and(Value::is_string)
                && o.get("newText").is_some_and(Value::is_string) =>
        {
            Some(v.clone())
        }
        _ => None,
    }
}

/// pi's `prepareEditArguments` then `validateEditInput`: the call's path and replacements.
/// Errors: [`EditError::Invalid`] for arguments pi's tool refuses before touching the file.
pub fn edit_call(args: &Value) -> Result<EditCall, EditError> {
    let Value::Object(obj) = args else {
        return Err(EditError::Invalid("arguments are not an object".into()));
    };
    let mut edits: Option<Value> = obj.get("edits").cloned();
    match &edits {
        Some(Value::String(s)) => {
            // pi parses with JSON.parse and keeps the string when that fails.
            if let Ok(parsed) = crate::js::jsstr::parse_value(s.as_bytes()) {
                if parsed.is_array() {
                    edits = Some(parsed);
                } else if let Some(one) = single_edit(&parsed) {
                    edits = Some(Value::Array(vec![one]));
                }
            }
        }
        Some(v) => {
            if let Some(one) = single_edit(v) {
                edits = Some(Value::Array(vec![one]));
            }
        }
        None => {}
    }
    if let (Some(Value::String(old)), Some(Value::String(new))) =
        (obj.get("oldText"), obj.get("newText"))
    {
        let mut list = match edits {
            Some(Value::Array(a)) => a,
            _ => Vec::new(),
        };
        list.push(serde_json::json!({"oldText": old, "newText": new}));
        edits = Some(Value::Array(list));
    }
    let list = match edits {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => {
            return Err(EditError::Invalid(
                "edits must contain at least one replacement".into(),
            ));
        }
    };
    let path = match obj.get("path") {
        Some(Value::String(p)) => p.clone(),
        _ => return Err(EditError::Invalid("path is not a string".into())),
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        match (e.get("oldText"), e.get("newText")) {
            (Some(Value::String(o)), Some(Value::String(n))) => out.push(Replace {
                old_text: o.clone(),
                new_text: n.clone(),
                replace_all: false,
            }),
            _ => {
                return Err(EditError::Invalid(format!(
                    "edits[{i}] has no string oldText and newText"
                )));
            }
        }
    }
    Ok(EditCall { path, edits: out })
}

/// A `write` call's `path` and `content`, or `None` when either is not a string (pi's schema
/// refuses such a call).
pub fn write_call(args: &Value) -> Option<(String, &str)> {
    match (args.get("path"), args.get("content")) {
        (Some(Value::String(p)), Some(Value::String(c))) => Some((p.clone(), c.as_str())),
        _ => None,
    }
}

/// pi `normalizeToLF`: CRLF, then lone CR, to LF.
pub fn normalize_to_lf(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_owned();
    }
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// pi `splitBom`: the leading U+FEFF, if any, and the rest.
pub fn split_bom(text: &str) -> (&str, &str) {
    match text.strip_prefix('\u{FEFF}') {
        Some(rest) => ("\u{FEFF}", rest),
        None => ("", text),
    }
}

/// JavaScript's `String.prototype.trimEnd` whitespace (WhiteSpace and LineTerminator).
fn js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\u{B}'
            | '\u{C}'
            | ' '
            | '\u{A0}'
            | '\u{FEFF}'
            | '\n'
            | '\r'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

/// pi `normalizeForFuzzyMatch`: NFKC, trailing whitespace of each line stripped, smart
/// quotes, Unicode dashes and special spaces to ASCII.
pub fn normalize_for_fuzzy(text: &str) -> String {
    let nfkc: String = text.nfkc().collect();
    let stripped: Vec<&str> = nfkc
        .split('\n')
        .map(|l| l.trim_end_matches(js_space))
        .collect();
    stripped
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

/// pi `fuzzyFindText`'s answer.
struct Found {
    index: usize,
    len: usize,
    fuzzy: bool,
}

fn fuzzy_find(content: &str, old: &str) -> Option<Found> {
    if let Some(index) = content.find(old) {
        return Some(Found {
            index,
            len: old.len(),
            fuzzy: false,
        });
    }
    let fc = normalize_for_fuzzy(content);
    let fo = normalize_for_fuzzy(old);
    fc.find(&fo).map(|index| Found {
        index,
        len: fo.len(),
        fuzzy: true,
    })
}

/// pi `countOccurrences`: `fuzzy(content).split(fuzzy(old)).length - 1`.
fn count_occurrences(content: &str, old: &str) -> i64 {
    let fc = normalize_for_fuzzy(content);
    let fo = normalize_for_fuzzy(old);
    if fo.is_empty() {
        // "".split("") is [], "ab".split("") is ["a", "b"]: one piece per UTF-16 unit.
        return fc.encode_utf16().count() as i64 - 1;
    }
    fc.matches(fo.as_str()).count() as i64
}

/// One replacement at a byte range of the content it was matched in.
#[derive(Clone, Debug)]
struct Matched {
    edit: usize,
    index: usize,
    len: usize,
    new_text: String,
}

fn apply_replacements(content: &str, reps: &[Matched], offset: usize) -> String {
    let mut result = content.to_owned();
    for r in reps.iter().rev() {
        let at = r.index - offset;
        result.replace_range(at..at + r.len, &r.new_text);
    }
    result
}

/// pi `getLineSpans` (`/[^\n]*\n|[^\n]+/g`).
fn line_spans(content: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, b) in content.bytes().enumerate() {
        if b == b'\n' {
            spans.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < content.len() {
        spans.push((start, content.len()));
    }
    spans
}

/// pi `widenReplacementsToLines`.
fn widen(original: &str, base: &str, reps: &[Matched]) -> Result<Vec<Matched>, EditError> {
    let ol = line_spans(original);
    let bl = line_spans(base);
    if ol.len() != bl.len() {
        return Err(EditError::Widen);
    }
    let mut sorted = reps.to_vec();
    sorted.sort_by_key(|r| r.index);
    // (startLine, endLine exclusive, replacements)
    let mut groups: Vec<(usize, usize, Vec<Matched>)> = Vec::new();
    for r in sorted {
        let (s, e) = (r.index, r.index + r.len);
        let start = bl
            .iter()
            .position(|&(ls, le)| s >= ls && s < le)
            .ok_or(EditError::Widen)?;
        let mut end = start;
        while end < bl.len() && bl[end].1 < e {
            end += 1;
        }
        if end >= bl.len() {
            return Err(EditError::Widen);
        }
        let end = end + 1;
        if let Some(g) = groups.last_mut()
            && start < g.1
        {
            g.1 = g.1.max(end);
            g.2.push(r);
            continue;
        }
        groups.push((start, end, vec![r]));
    }
    Ok(groups
        .into_iter()
        .map(|(s, e, reps)| {
            let (gs, ge) = (bl[s].0, bl[e - 1].1);
            let os = ol[s].0;
            Matched {
                edit: reps.first().map_or(0, |r| r.edit),
                index: os,
                len: ol[e - 1].1 - os,
                new_text: apply_replacements(&base[gs..ge], &reps, gs),
            }
        })
        .collect())
}

/// pi `applyEditsToNormalizedContent`: the new LF content and the replacements made in
/// `normalized`. Errors: pi's refusals ([`EditError`]).
fn apply_normalized(
    normalized: &str,
    edits: &[Replace],
) -> Result<(String, Vec<Matched>), EditError> {
    let edits: Vec<Replace> = edits
        .iter()
        .map(|e| Replace {
            old_text: normalize_to_lf(&e.old_text),
            new_text: normalize_to_lf(&e.new_text),
            replace_all: false,
        })
        .collect();
    if let Some(i) = edits.iter().position(|e| e.old_text.is_empty()) {
        return Err(EditError::EmptyOldText(i));
    }
    let used_fuzzy = edits
        .iter()
        .any(|e| fuzzy_find(normalized, &e.old_text).is_some_and(|f| f.fuzzy));
    let fuzzy_base;
    let base: &str = if used_fuzzy {
        fuzzy_base = normalize_for_fuzzy(normalized);
        &fuzzy_base
    } else {
        normalized
    };
    let mut matched = Vec::with_capacity(edits.len());
    for (i, e) in edits.iter().enumerate() {
        let f = fuzzy_find(base, &e.old_text).ok_or(EditError::NotFound(i))?;
        let n = count_occurrences(base, &e.old_text);
        if n > 1 {
            return Err(EditError::Duplicate(i, n as usize));
        }
        matched.push(Matched {
            edit: i,
            index: f.index,
            len: f.len,
            new_text: e.new_text.clone(),
        });
    }
    matched.sort_by_key(|m| m.index);
    for w in matched.windows(2) {
        if w[0].index + w[0].len > w[1].index {
            return Err(EditError::Overlap(w[0].edit, w[1].edit));
        }
    }
    let reps = if used_fuzzy {
        widen(normalized, base, &matched)?
    } else {
        matched
    };
    // A match may end past the base when the fuzzy text is longer than the content it
    // came from; pi's substring clamps, and so does this.
    for r in &reps {
        if r.index + r.len > normalized.len()
            || !normalized.is_char_boundary(r.index)
            || !normalized.is_char_boundary(r.index + r.len)
        {
            return Err(EditError::Widen);
        }
    }
    let new = apply_replacements(normalized, &reps, 0);
    if new == normalized {
        return Err(EditError::NoChange);
    }
    Ok((new, reps))
}

/// pi `getLineEndingAt`.
fn line_ending_at(content: &str, offset: usize) -> &'static str {
    let lf = content[offset..]
        .find('\n')
        .map(|i| i + offset)
        .or_else(|| {
            memchr::memrchr(
                b'\n',
                &content.as_bytes()[..(offset + 1).min(content.len())],
            )
        });
    match lf {
        None if content.contains('\r') => "\r",
        None => "\n",
        Some(i) if i > 0 && content.as_bytes()[i - 1] == b'\r' => "\r\n",
        Some(_) => "\n",
    }
}

/// pi `applyReplacementsToOriginal`: replacements matched in the LF-normalized text spliced
/// into the original, which keeps its line endings.
fn apply_to_original(original: &str, reps: &[Matched]) -> String {
    let crlfs: Vec<usize> = memchr::memmem::find_iter(original.as_bytes(), b"\r\n").collect();
    let mut k = 0usize;
    let mut to_original = |offset: usize| {
        while k < crlfs.len() && crlfs[k] - k < offset {
            k += 1;
        }
        offset + k
    };
    let mut out = String::with_capacity(original.len());
    let mut ends_with_cr = false;
    let mut push = |out: &mut String, part: &str| {
        if part.is_empty() {
            return;
        }
        if ends_with_cr && part.starts_with('\n') {
            out.push('\n');
        }
        out.push_str(part);
        ends_with_cr = part.ends_with('\r');
    };
    let mut position = 0;
    for r in reps {
        let start = to_original(r.index);
        push(&mut out, &original[position..start]);
        let ending = line_ending_at(original, start);
        if ending == "\n" {
            push(&mut out, &r.new_text);
        } else {
            push(&mut out, &r.new_text.replace('\n', ending));
        }
        position = to_original(r.index + r.len);
    }
    push(&mut out, &original[position.min(original.len())..]);
    out
}

/// The file content pi's edit tool writes for `edits` on a file holding `raw` (decoded as
/// UTF-8 with U+FFFD for invalid bytes, as pi's `buffer.toString("utf-8")`). Errors: pi's
/// refusals ([`EditError`]); then pi writes nothing.
pub fn apply_edit(raw: &str, edits: &[Replace]) -> Result<String, EditError> {
    let (bom, content) = split_bom(raw);
    let normalized = normalize_to_lf(content);
    let (new, reps) = apply_normalized(&normalized, edits)?;
    let body = if content == normalized {
        new
    } else {
        apply_to_original(content, &reps)
    };
    Ok(format!("{bom}{body}"))
}

/// Whether `current` (the file now) shows the edit's effect without knowing the content it
/// was applied to: every `newText` (LF-normalized) is present in the LF-normalized file, and
/// an edit that deletes (`newText` empty) left its `oldText` absent.
pub fn edit_visible(current: &str, edits: &[Replace]) -> bool {
    let (_, content) = split_bom(current);
    let content = normalize_to_lf(content);
    edits.iter().all(|e| {
        let new = normalize_to_lf(&e.new_text);
        if new.is_empty() {
            let old = normalize_to_lf(&e.old_text);
            old.is_empty() || !content.contains(&old)
        } else {
            content.contains(&new)
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn r(o: &str, n: &str) -> Replace {
        Replace {
            old_text: o.into(),
            new_text: n.into(),
            replace_all: false,
        }
    }

    #[test]
    fn arguments_are_prepared_as_pi_prepares_them() {
        let one = edit_call(&json!({"path": "a", "edits": [{"oldText": "x", "newText": "y"}]}));
        assert_eq!(one.unwrap().edits, vec![r("x", "y")]);
        let s =
            edit_call(&json!({"path": "a", "edits": "[{\"oldText\":\"x\",\"newText\":\"y\"}]"}));
        assert_eq!(s.unwrap().edits, vec![r("x", "y")]);
        let s1 = edit_call(&json!({"path": "a", "edits": "{\"oldText\":\"x\",\"newText\":\"y\"}"}));
        assert_eq!(s1.unwrap().edits, vec![r("x", "y")]);
        let obj = edit_call(&json!({"path": "a", "edits": {"oldText": "x", "newText": "y"}}));
        assert_eq!(obj.unwrap().edits, vec![r("x", "y")]);
        let legacy = edit_call(&json!({"path": "a", "oldText": "x", "newText": "y"}));
        assert_eq!(legacy.unwrap().edits, vec![r("x", "y")]);
        let both = edit_call(
            &json!({"path": "a", "edits": [{"oldText": "p", "newText": "q"}], "oldText": "x", "newText": "y"}),
        );
        assert_eq!(both.unwrap().edits, vec![r("p", "q"), r("x", "y")]);
        assert!(edit_call(&json!({"path": "a", "edits": []})).is_err());
        assert!(edit_call(&json!({"path": "a", "edits": "not json"})).is_err());
    }

    #[test]
    fn edits_apply_as_pi_applies_them() {
        assert_eq!(
            apply_edit("a\nb\nc\n", &[r("b", "B"), r("c", "C")]).unwrap(),
            "a\nB\nC\n"
        );
        // CRLF kept, new lines get the line's ending; BOM kept.
        assert_eq!(
            apply_edit("\u{FEFF}a\r\nb\r\n", &[r("b", "x\ny")]).unwrap(),
            "\u{FEFF}a\r\nx\r\ny\r\n"
        );
        // Fuzzy: trailing spaces and smart quotes; the touched line is rewritten from the
        // normalized text, the others keep their bytes.
        assert_eq!(
            apply_edit(
                "keep  \nsay \u{201C}hi\u{201D}  \n",
                &[r("say \"hi\"", "say 'yo'")]
            )
            .unwrap(),
            "keep  \nsay 'yo'\n"
        );
        assert_eq!(
            apply_edit("x x", &[r("x", "y")]),
            Err(EditError::Duplicate(0, 2))
        );
        assert_eq!(
            apply_edit("abc", &[r("q", "y")]),
            Err(EditError::NotFound(0))
        );
        assert_eq!(apply_edit("abc", &[r("b", "b")]), Err(EditError::NoChange));
        assert_eq!(
            apply_edit("abcd", &[r("abc", "1"), r("cd", "2")]),
            Err(EditError::Overlap(0, 1))
        );
    }

    #[test]
    fn visible_edits() {
        assert!(edit_visible("a\r\nB\r\n", &[r("b", "B")]));
        assert!(!edit_visible("a\nb\n", &[r("b", "B")]));
        assert!(edit_visible("a\n", &[r("b\n", "")]));
        assert!(!edit_visible("a\nb\n", &[r("b\n", "")]));
    }
}
