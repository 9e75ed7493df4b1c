//! Redaction of strings that look like API keys, tokens and private keys, for documents
//! meant to be shared (`sessiond export`). Pure: text in, text and a count out.
//!
//! The patterns ([`PATTERNS`]) are the well-known, prefixed credential formats, chosen so
//! that ordinary prose and code rarely match: a false positive costs a readable word, a miss
//! leaks a credential, so each pattern requires the vendor prefix and a minimum length. A
//! match is replaced by `[REDACTED:<kind>]`; for `Bearer` tokens the word `Bearer` is kept.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// The redaction patterns: `(kind, regular expression)`, tried in this order (the more
/// specific prefixes first, so `sk-ant-…` is reported as `anthropic-key`, not `openai-key`).
/// Documented in docs/guide.md (`sessiond export`); keep the two lists equal.
pub const PATTERNS: &[(&str, &str)] = &[
    (
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
    ),
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai-key", r"\bsk-[A-Za-z0-9_\-]{20,}"),
    ("github-token", r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    ("github-token", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    ("gitlab-token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("aws-access-key-id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    ),
    (
        "bearer-token",
        r"(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{16,}=*",
    ),
];

static COMPILED: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    PATTERNS
        .iter()
        .filter_map(|(kind, re)| Regex::new(re).ok().map(|r| (*kind, r)))
        .collect()
});

/// Redacts secrets from text and counts what it replaced.
#[derive(Debug, Default)]
pub struct Redactor {
    enabled: bool,
    count: usize,
}

impl Redactor {
    /// A redactor; `enabled: false` passes every text through unchanged and counts nothing.
    pub fn new(enabled: bool) -> Self {
        Redactor { enabled, count: 0 }
    }

    /// Whether redaction is on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// How many matches were replaced so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// `text` with every match of [`PATTERNS`] replaced by `[REDACTED:<kind>]` (a bearer
    /// token keeps its `Bearer ` word). Characters that show as nothing ([`invisible`]: a
    /// zero-width space, a soft hyphen...) are looked through: a credential with one hidden
    /// inside reads as the credential, so it is matched as one and replaced with them.
    pub fn redact<'a>(&mut self, text: &'a str) -> Cow<'a, str> {
        if !self.enabled {
            return Cow::Borrowed(text);
        }
        let mut out = Cow::Borrowed(text);
        for (kind, re) in COMPILED.iter() {
            if out.chars().any(invisible) {
                if let Some(replaced) = replace_looking_through(&out, re, kind, &mut self.count) {
                    out = Cow::Owned(replaced);
                }
                continue;
            }
            if !re.is_match(&out) {
                continue;
            }
            let mut n = 0usize;
            let replaced = re
                .replace_all(&out, |caps: &regex::Captures<'_>| {
                    n += 1;
                    replacement(caps.get(1).map(|w| w.as_str()), kind)
                })
                .into_owned();
            self.count += n;
            out = Cow::Owned(replaced);
        }
        out
    }
}

/// What a match is replaced by: `[REDACTED:<kind>]`, after the kept word of a bearer token.
fn replacement(word: Option<&str>, kind: &str) -> String {
    match word {
        Some(word) => format!("{word} [REDACTED:{kind}]"),
        None => format!("[REDACTED:{kind}]"),
    }
}

/// Whether `c` shows as nothing (Unicode's `Default_Ignorable_Code_Point` characters: zero-width
/// spaces and joiners, the soft hyphen, word joiners, bidirectional marks, variation selectors,
/// the byte order mark, tags...). Looked through by [`Redactor::redact`].
pub fn invisible(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}'
        | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}'
        | '\u{3164}'
        | '\u{fe00}'..='\u{fe0f}'
        | '\u{feff}'
        | '\u{ffa0}'
        | '\u{fff0}'..='\u{fff8}'
        | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0000}'..='\u{e0fff}')
}

/// `text` with the matches of `re` in its visible characters replaced ([`replacement`]),
/// counted into `count`; `None` when there is none. A match's range in `text` runs from its
/// first visible character to its last, so the invisible characters inside it go with it and
/// those around it stay.
fn replace_looking_through(
    text: &str,
    re: &Regex,
    kind: &str,
    count: &mut usize,
) -> Option<String> {
    // Each visible character: its offset in `seen`, its offset and length in `text`.
    let mut seen = String::with_capacity(text.len());
    let mut at: Vec<(usize, usize, usize)> = Vec::new();
    for (o, c) in text.char_indices() {
        if !invisible(c) {
            at.push((seen.len(), o, c.len_utf8()));
            seen.push(c);
        }
    }
    if !re.is_match(&seen) {
        return None;
    }
    // `seen` offset → `text` offset of that character; the end of a match → the end of its
    // last character in `text`.
    let start_in_text = |s: usize| {
        let k = at.partition_point(|&(so, _, _)| so < s);
        at.get(k).map_or(text.len(), |&(_, o, _)| o)
    };
    let end_in_text = |e: usize| {
        let k = at.partition_point(|&(so, _, _)| so < e);
        k.checked_sub(1).map_or(0, |k| at[k].1 + at[k].2)
    };
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for caps in re.captures_iter(&seen) {
        let Some(m) = caps.get(0) else { continue };
        let (from, to) = (start_in_text(m.start()), end_in_text(m.end()));
        if from < copied || to < from {
            continue;
        }
        out.push_str(&text[copied..from]);
        out.push_str(&replacement(caps.get(1).map(|w| w.as_str()), kind));
        copied = to;
        *count += 1;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(COMPILED.len(), PATTERNS.len());
    }

    #[test]
    fn redacts_each_kind_and_counts() {
        let mut r = Redactor::new(true);
        let text = "keys: sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345 and \
                    sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX, ghp_abcdefghijklmnopqrstuvwxyz0123456789, \
                    github_pat_11ABCDEFG0123456789_abcdefghijkl, xoxb-1234567890-abcdef, \
                    AKIAIOSFODNN7EXAMPLE, AIzaSyA-1234567890abcdefghijklmnopqrstu, \
                    Authorization: Bearer abcdefghijklmnop.qrstuvwxyz";
        let out = r.redact(text);
        for kind in [
            "anthropic-key",
            "openai-key",
            "github-token",
            "slack-token",
            "aws-access-key-id",
            "google-api-key",
        ] {
            assert!(out.contains(&format!("[REDACTED:{kind}]")), "{kind}: {out}");
        }
        assert!(out.contains("Bearer [REDACTED:bearer-token]"), "{out}");
        assert!(!out.contains("sk-ant-api03"));
        assert!(!out.contains("IOSFODNN7"));
        assert_eq!(r.count(), 8);
    }

    #[test]
    fn private_key_blocks_are_one_redaction() {
        let mut r = Redactor::new(true);
        let out = r.redact(
            "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\nAAAA\n-----END OPENSSH PRIVATE KEY-----\ny",
        );
        assert_eq!(out, "x\n[REDACTED:private-key]\ny");
        assert_eq!(r.count(), 1);
    }

    #[test]
    fn invisible_characters_do_not_hide_a_credential() {
        let mut r = Redactor::new(true);
        let hidden = "key \u{200b}sk-ant-\u{200d}api03-abcdefghij\u{feff}klmnopqrstuvwxyz0\u{ad}12345\u{200b} end";
        assert_eq!(
            r.redact(hidden),
            "key \u{200b}[REDACTED:anthropic-key]\u{200b} end"
        );
        assert_eq!(r.count(), 1);
        let bearer = "Authorization: Bearer\u{2060} abcdefghij\u{200c}klmnopqrstuvwxyz";
        assert_eq!(
            r.redact(bearer),
            "Authorization: Bearer [REDACTED:bearer-token]"
        );
        // Joiners in ordinary text (an emoji family) are left as they are.
        let family = "👨\u{200d}👩\u{200d}👧 no secret";
        assert_eq!(r.redact(family), family);
        assert_eq!(r.count(), 2);
    }

    #[test]
    fn ordinary_text_and_disabled_redactor_pass_through() {
        let mut r = Redactor::new(true);
        let text = "task-list sk-short a bearer of news, AKIA in prose, ghp_ alone";
        assert!(matches!(r.redact(text), Cow::Borrowed(_)));
        assert_eq!(r.count(), 0);
        let mut off = Redactor::new(false);
        let secret = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345";
        assert_eq!(off.redact(secret), secret);
        assert_eq!(off.count(), 0);
    }
}
