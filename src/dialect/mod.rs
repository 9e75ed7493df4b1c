//! Agent dialects: each agent's session format, read exactly as that agent reads it.
//!
//! A dialect owns everything agent-specific — the line format, the projection (what the model
//! sees at a leaf), explanations, and the writes the format supports. Everything above the
//! dialects (storage, session owners, server, CLI, editors) speaks of entries, trees, leaves and
//! contexts, and chooses a dialect in one place: [`Dialect`], found by [`sniff`]ing a file's
//! first line. Adding an agent is a folder here and a variant of [`Dialect`]; the compiler then
//! lists every `match` that must learn it.

use serde::{Deserialize, Serialize};

pub mod claude;
pub mod codex;
pub mod moved;
pub mod pi;

/// The agents whose session files sessiond reads. A closed set: every site that treats
/// dialects differently matches on it exhaustively.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dialect {
    /// pi (`@earendil-works/pi-coding-agent` 1.6.0): a `session` header, then entries.
    #[serde(rename = "pi")]
    Pi,
    /// Claude Code (`@anthropic-ai/claude-code` 2.1): `uuid`/`parentUuid` lines, no header.
    #[serde(rename = "claude-code")]
    Claude,
    /// Codex CLI (`@openai/codex` 0.171.0, legacy 0.144.6): rollouts of
    /// `{timestamp, ordinal?, type, payload}` lines, a thread spread over files.
    #[serde(rename = "codex")]
    Codex,
}

impl Dialect {
    /// The format's name in documents (`"pi"`, `"claude-code"`): the `format` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Pi => "pi",
            Dialect::Claude => "claude-code",
            Dialect::Codex => "codex",
        }
    }

    /// The format named by its name in documents ([`Dialect::as_str`]); `None` for any other
    /// name.
    pub fn from_name(name: &str) -> Option<Dialect> {
        Dialect::ALL.into_iter().find(|d| d.as_str() == name)
    }

    /// Every format sessiond reads, in the order help texts name them.
    pub const ALL: [Dialect; 3] = [Dialect::Pi, Dialect::Claude, Dialect::Codex];

    /// The agent's name for people ("pi", "Claude Code").
    pub fn agent(self) -> &'static str {
        match self {
            Dialect::Pi => "pi",
            Dialect::Claude => "Claude Code",
            Dialect::Codex => "Codex",
        }
    }

    /// Whether sessiond writes to this format's files (appends, labels, names, branches,
    /// compactions). Claude Code takes no lock and never re-reads its file mid-run, so a write
    /// there would only fork the conversation silently: it is read only. Codex holds a writer
    /// lock sessiond must never take (`docs/codex.md` §8): read only too.
    pub fn writable(self) -> bool {
        match self {
            Dialect::Pi => true,
            Dialect::Claude | Dialect::Codex => false,
        }
    }

    /// Where this agent writes files linked to the session at `path`, beside its own
    /// directory: Claude Code's subagent transcripts (`<session>/subagents/`); pi, none.
    pub fn companion_dirs(self, path: &std::path::Path) -> Vec<std::path::PathBuf> {
        match self {
            Dialect::Pi | Dialect::Codex => Vec::new(),
            Dialect::Claude => claude::subagent::subagents_dir(path).into_iter().collect(),
        }
    }

    /// The session id of the file at `path` whose first line is `first`: pi's header `id`, a
    /// Claude Code transcript's file name (the id `claude --resume` takes), a Codex rollout's
    /// thread id (`session_meta.payload.id`, the id `codex resume` takes).
    pub fn session_id(self, path: &std::path::Path, first: &[u8]) -> Option<String> {
        match self {
            Dialect::Pi => serde_json::from_slice::<serde_json::Value>(first)
                .ok()?
                .get("id")?
                .as_str()
                .map(str::to_owned),
            Dialect::Claude => path.file_stem()?.to_str().map(str::to_owned),
            Dialect::Codex => codex::lineage::session_meta(first)?
                .get("id")?
                .as_str()
                .map(str::to_owned),
        }
    }
}

/// What the first line of a file says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sniffed {
    /// A format sessiond reads.
    Known(Dialect),
    /// Nothing to tell yet: an empty file, or a first line still being written that could be
    /// pi's header (read as pi, which says whether the file is pending or empty).
    Undecided,
    /// A file of no format sessiond reads; the text says what was seen.
    Unknown(String),
}

/// Tells a file's format from its first non-blank line (`first`, without its newline; it may be
/// unfinished when `complete` is false). Detected, never guessed from the file name:
///
/// * `{"type": "session", …}` is pi's header;
/// * an object with `uuid`/`parentUuid`/`sessionId`, or whose `type` is one of Claude Code's
///   line types (`user`, `assistant`, `attachment`, `system`, `summary`, `queue-operation`,
///   `last-prompt`, `mode`, `file-history-snapshot`, `progress`, …) is Claude Code's;
/// * `{"timestamp", "type": "session_meta", "payload"}` is a Codex rollout;
/// * anything else is unknown, and the text names what the line is.
pub fn sniff(first: &[u8], complete: bool) -> Sniffed {
    let text = first.trim_ascii();
    if text.is_empty() {
        return Sniffed::Undecided;
    }
    let value: serde_json::Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(_) if !complete => {
            // A line being written: decide from what is there, else leave it to pi's reader.
            let s = String::from_utf8_lossy(text);
            return if s.contains("\"parentUuid\"") || s.contains("\"queue-operation\"") {
                Sniffed::Known(Dialect::Claude)
            } else if s.contains("\"type\":\"session_meta\"") && s.contains("\"payload\"") {
                Sniffed::Known(Dialect::Codex)
            } else {
                Sniffed::Undecided
            };
        }
        // Not JSON: pi's reader says what it is ("not a session: …").
        Err(_) => return Sniffed::Undecided,
    };
    let serde_json::Value::Object(obj) = &value else {
        // pi's reader names what it is ("not a session: …").
        return Sniffed::Undecided;
    };
    let ty = obj.get("type").and_then(serde_json::Value::as_str);
    if ty == Some("session") {
        return Sniffed::Known(Dialect::Pi);
    }
    if ty == Some("session_meta") && obj.contains_key("payload") {
        return Sniffed::Known(Dialect::Codex);
    }
    const CLAUDE_TYPES: [&str; 12] = [
        "user",
        "assistant",
        "attachment",
        "system",
        "summary",
        "queue-operation",
        "last-prompt",
        "mode",
        "file-history-snapshot",
        "progress",
        "custom-title",
        "permission-mode",
    ];
    let claude_keys = ["uuid", "parentUuid", "sessionId", "leafUuid"]
        .iter()
        .any(|k| obj.contains_key(*k));
    if claude_keys || ty.is_some_and(|t| CLAUDE_TYPES.contains(&t)) {
        return Sniffed::Known(Dialect::Claude);
    }
    // Anything else (a pi entry without its header, another program's JSON): pi's reader says
    // what it is not ("not a session: line 1 is no pi session header, …").
    Sniffed::Undecided
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_lines_tell_the_format() {
        let pi = br#"{"type":"session","version":3,"id":"s"}"#;
        assert_eq!(sniff(pi, true), Sniffed::Known(Dialect::Pi));
        let claude = br#"{"type":"queue-operation","operation":"enqueue","sessionId":"s"}"#;
        assert_eq!(sniff(claude, true), Sniffed::Known(Dialect::Claude));
        let user = br#"{"parentUuid":null,"type":"user","uuid":"u"}"#;
        assert_eq!(sniff(user, true), Sniffed::Known(Dialect::Claude));
        assert_eq!(
            sniff(br#"{"parentUuid":null,"isSide"#, false),
            Sniffed::Known(Dialect::Claude)
        );
        assert_eq!(sniff(br#"{"type":"sess"#, false), Sniffed::Undecided);
        assert_eq!(sniff(b"", true), Sniffed::Undecided);
        assert_eq!(sniff(b"hello", true), Sniffed::Undecided);
        let codex = br#"{"timestamp":"t","type":"session_meta","payload":{}}"#;
        assert_eq!(sniff(codex, true), Sniffed::Known(Dialect::Codex));
        assert_eq!(sniff(b"[1]", true), Sniffed::Undecided);
        assert_eq!(
            sniff(br#"{"type":"message","id":"a"}"#, true),
            Sniffed::Undecided
        );
    }
}
