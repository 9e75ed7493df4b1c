//! The Codex rollout line format (Codex CLI 0.171.0 and the legacy 0.144.6; the facts are in
//! `docs/codex.md` §2): one JSON object per line, `{timestamp, ordinal?, type, payload}`, every
//! line a node. A file is linear, so each line's parent is the line before it; a line is named
//! by its `ordinal` (paginated files) or, without one (legacy files), by `line:N` (its 1-based
//! line number). Types sessiond does not know are kept as they are and shown by their name.
//!
//! Like the other dialects' probes, this one borrows from the line and keeps only the small
//! facts the tree and the replay need; bodies stay in the file. Pure: no I/O.

use ecow::EcoString;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::core::diagnostics::{LineProblem, ProblemKind};
use crate::core::ids::{EntryId, JsTime, LineSpan};
use crate::js::timestamp::js_time_of_raw;

/// A rollout has no header line (its `session_meta` is a line like the others); the tree's
/// header is this empty stand-in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header;

/// One rollout line: identity, parent (the line before), what it is and where it is.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The line's `ordinal` in decimal, or `line:N` for a line without one.
    pub id: EntryId,
    /// The line before it in the file (`None` for the first line).
    pub parent_id: Option<EntryId>,
    /// The line's `ordinal`, when it has one.
    pub ordinal: Option<u64>,
    /// What the line is.
    pub kind: Kind,
    /// `new Date(timestamp).getTime()`.
    pub time_ms: JsTime,
    /// Where the line is in the file.
    pub span: LineSpan,
}

/// What a rollout line is: its `type`, with the payload's own `type` (and a message's role)
/// where the type has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `session_meta`: the thread's (or a copied parent's) metadata.
    SessionMeta,
    /// `response_item`: a Responses API item (`payload.type`, a message's `role`).
    ResponseItem {
        /// `payload.type` (`message`, `function_call`, …).
        item: EcoString,
        /// A message's `role`.
        role: Option<EcoString>,
    },
    /// `event_msg` (`payload.type`: `task_started`, `thread_rolled_back`, …).
    EventMsg {
        /// `payload.type`.
        event: EcoString,
    },
    /// `turn_context`.
    TurnContext,
    /// `world_state`.
    WorldState,
    /// `compacted`.
    Compacted,
    /// `token_usage_record`.
    TokenUsageRecord,
    /// A type sessiond does not know (newer Codex versions add types): kept and shown.
    Other(EcoString),
}

impl Kind {
    /// The line's `type` as written.
    pub fn type_name(&self) -> &str {
        match self {
            Kind::SessionMeta => "session_meta",
            Kind::ResponseItem { .. } => "response_item",
            Kind::EventMsg { .. } => "event_msg",
            Kind::TurnContext => "turn_context",
            Kind::WorldState => "world_state",
            Kind::Compacted => "compacted",
            Kind::TokenUsageRecord => "token_usage_record",
            Kind::Other(t) => t,
        }
    }
}

/// The id of a line: its ordinal, or `line:N` without one.
pub fn line_id(ordinal: Option<u64>, line: u32) -> EntryId {
    match ordinal {
        Some(o) => EntryId::new(o.to_string()),
        None => EntryId::new(format!("line:{line}")),
    }
}

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow, default)]
    timestamp: Option<&'a RawValue>,
    #[serde(default)]
    ordinal: Option<serde_json::Value>,
    #[serde(rename = "type", default)]
    ty: Option<serde_json::Value>,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct PayloadProbe {
    #[serde(rename = "type", default)]
    ty: Option<serde_json::Value>,
    #[serde(default)]
    role: Option<serde_json::Value>,
}

fn problem(kind: ProblemKind, detail: impl Into<String>) -> LineProblem {
    LineProblem {
        kind,
        detail: detail.into(),
    }
}

/// Reads one complete line (without its newline) at `span`. The parent is left unset (the
/// reader links each line to the one before). Errors: not JSON, not an object, no string
/// `type`, an `ordinal` that is no unsigned integer.
pub fn parse_line(bytes: &[u8], span: LineSpan) -> Result<Entry, LineProblem> {
    let probe = match serde_json::from_slice::<Probe<'_>>(bytes) {
        Ok(p) => p,
        Err(e) if e.is_syntax() || e.is_eof() => {
            return Err(problem(
                ProblemKind::InvalidJson,
                format!("invalid JSON: {e}"),
            ));
        }
        Err(e) => {
            return Err(
                if serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|v| !v.is_object())
                {
                    problem(
                        ProblemKind::NotAnObject,
                        "the line is JSON but not an object",
                    )
                } else {
                    problem(ProblemKind::InvalidEntry, format!("unreadable line: {e}"))
                },
            );
        }
    };
    let ty = match &probe.ty {
        Some(serde_json::Value::String(s)) => s.as_str(),
        _ => {
            return Err(problem(
                ProblemKind::InvalidEntry,
                "a rollout line without a string \"type\"",
            ));
        }
    };
    let ordinal = match &probe.ordinal {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| {
            problem(
                ProblemKind::InvalidEntry,
                "\"ordinal\" is not an unsigned integer",
            )
        })?),
    };
    let payload = || -> PayloadProbe {
        probe
            .payload
            .and_then(|p| serde_json::from_str::<PayloadProbe>(p.get()).ok())
            .unwrap_or_default()
    };
    let str_of = |v: Option<serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => Some(EcoString::from(s)),
        _ => None,
    };
    let kind = match ty {
        "session_meta" => Kind::SessionMeta,
        "response_item" => {
            let p = payload();
            Kind::ResponseItem {
                item: str_of(p.ty).unwrap_or_default(),
                role: str_of(p.role),
            }
        }
        "event_msg" => Kind::EventMsg {
            event: str_of(payload().ty).unwrap_or_default(),
        },
        "turn_context" => Kind::TurnContext,
        "world_state" => Kind::WorldState,
        "compacted" => Kind::Compacted,
        "token_usage_record" => Kind::TokenUsageRecord,
        other => Kind::Other(other.into()),
    };
    Ok(Entry {
        id: line_id(ordinal, span.line),
        parent_id: None,
        ordinal,
        kind,
        time_ms: JsTime::new(js_time_of_raw(probe.timestamp)),
        span,
    })
}
