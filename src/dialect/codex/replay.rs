//! Codex's replay rule (`docs/codex.md` §5): the Responses API `input` items Codex sends when it
//! resumes a thread at a line, from the records of the thread's chain of files up to that line,
//! and what became of every record on the way (for `explain`). Pure: no I/O.
//!
//! In order: a model-visible `response_item` is appended (without
//! `internal_chat_message_metadata_passthrough`); `compacted` with `replacement_history` replaces
//! everything so far with that list; `event_msg thread_rolled_back {num_turns}` drops the last
//! `num_turns` user turns; every other line contributes nothing. Then the prompt's
//! normalization: a call without its output gets a synthetic `"aborted"` output right after it,
//! and an output without its call is dropped.

use serde_json::{Map, Value};

/// Response item types Codex keeps in the model's history (`is_api_message`); `other`,
/// `compaction_trigger` and unknown types are not sent, nor are messages with role `system`.
pub const API_TYPES: [&str; 14] = [
    "message",
    "agent_message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "reasoning",
    "web_search_call",
    "image_generation_call",
    "tool_search_call",
    "tool_search_output",
    "compaction",
    "context_compaction",
];

/// Fields of a stored item that Codex does not send.
pub const UNSENT_FIELDS: [&str; 1] = ["internal_chat_message_metadata_passthrough"];

/// User-message openings that are context, not a user turn (a rollback counts user turns).
const CONTEXTUAL_USER_PREFIXES: [&str; 8] = [
    "<environment_context>",
    "<user_instructions>",
    "# agents.md instructions",
    "<turn_aborted>",
    "<user_shell_command>",
    "<subagent_notification>",
    "<skill>",
    "<hook_prompt",
];

/// Developer-message openings that a rollback trims with the turn they precede.
const CONTEXTUAL_DEV_PREFIXES: [&str; 12] = [
    "<permissions instructions>",
    "<model_switch>",
    "<collaboration_mode>",
    "<multi_agent_mode>",
    "<realtime_conversation>",
    "<skills_instructions>",
    "<personality_spec>",
    "<token_budget>",
    "<token_budget_reminder>",
    "<context_window>",
    "<context_window_guidance>",
    "<rollout_budget>",
];

/// The namespace of the ids Codex gives the synthetic outputs of calls left without one.
const SYNTHETIC_OUTPUT_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x90D3_8D3E_6A5B_4D52_BFE2_2F1E_634B_FAC4);

/// Where an item of the replayed history comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The `response_item` record at this index.
    Record(usize),
    /// Item `k` of the `replacement_history` of the `compacted` record at this index.
    Replacement(usize, usize),
    /// The synthetic output Codex adds after the call that the record at this index holds.
    Synthetic(usize),
}

/// What became of one record in the replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// A line the model never sees: an event, the turn's settings, the world state, token
    /// usage, the thread's metadata, a type sessiond does not know, or a response item that
    /// is not sent (`other`, a `system` message, …).
    NotSent,
    /// Sent, as item `.0` of the messages.
    Sent(usize),
    /// Replaced by the compaction at record `.0`.
    Compacted(usize),
    /// Dropped by the rollback marker at record `.0`.
    RolledBack(usize),
    /// An output whose call is not in the history: dropped from the prompt.
    Orphan,
    /// A compaction that set the base (its replacement history) for what follows.
    Base,
    /// A rollback marker that dropped turns.
    Rollback,
}

/// The replay's result.
#[derive(Clone, Debug, Default)]
pub struct Replayed {
    /// The `input` items, in order.
    pub messages: Vec<Value>,
    /// Where each message comes from.
    pub origins: Vec<Origin>,
    /// What became of each record (by index); empty from [`Replayer::messages`].
    pub fates: Vec<Fate>,
    /// Notes on what the normalization did (a synthetic output, an orphan dropped).
    pub notes: Vec<String>,
}

/// Replays `records` (parsed rollout lines, in order: the chain's prefixes first, then the
/// leaf's file up to the leaf). A record that is no object contributes nothing.
pub fn replay(records: &[Value]) -> Replayed {
    let mut r = Replayer::default();
    for rec in records {
        r.push(Some(rec));
    }
    r.finish()
}

/// The replay one record at a time, so that a rollout of any size is replayed without holding
/// its records: only the items of the history so far are kept (a compaction replaces them).
#[derive(Debug)]
pub struct Replayer {
    items: Vec<(Value, Origin)>,
    /// What became of each record so far; empty when they are not kept ([`Replayer::messages`]).
    fates: Vec<Fate>,
    /// Whether `fates` is kept.
    track: bool,
    /// Records pushed.
    records: usize,
}

impl Default for Replayer {
    fn default() -> Self {
        Replayer::with_capacity(0)
    }
}

/// What became of record `r`, where fates are kept.
fn mark(fates: &mut [Fate], r: usize, fate: Fate) {
    if let Some(f) = fates.get_mut(r) {
        *f = fate;
    }
}

impl Replayer {
    /// A replayer for about `records` records.
    pub fn with_capacity(records: usize) -> Replayer {
        Replayer {
            items: Vec::new(),
            fates: Vec::with_capacity(records),
            track: true,
            records: 0,
        }
    }

    /// A replayer that keeps only the history, not what became of each record: its
    /// [`Replayed::fates`] is empty. What `context` needs, without 16 bytes a line.
    pub fn messages() -> Replayer {
        Replayer {
            track: false,
            ..Replayer::with_capacity(0)
        }
    }

    /// The next record; `None` for a record known to contribute nothing (the caller probed
    /// its type and left it unparsed).
    pub fn push(&mut self, rec: Option<&Value>) {
        let i = self.records;
        self.records += 1;
        if self.track {
            self.fates.push(Fate::NotSent);
        }
        let Some(rec) = rec else { return };
        let ty = rec.get("type").and_then(Value::as_str).unwrap_or("");
        let Some(payload) = rec.get("payload").filter(|p| p.is_object()) else {
            return;
        };
        let fates = &mut self.fates;
        match ty {
            "response_item" if is_api_item(payload) => {
                self.items.push((strip(payload), Origin::Record(i)));
            }
            "compacted" => {
                let Some(Value::Array(history)) = payload.get("replacement_history") else {
                    return;
                };
                for (_, o) in &self.items {
                    if let Origin::Record(r) = o {
                        mark(fates, *r, Fate::Compacted(i));
                    }
                }
                self.items = history
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| x.is_object())
                    .map(|(k, x)| (strip(x), Origin::Replacement(i, k)))
                    .collect();
                mark(fates, i, Fate::Base);
            }
            "event_msg"
                if payload.get("type").and_then(Value::as_str) == Some("thread_rolled_back") =>
            {
                let n = payload
                    .get("num_turns")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let keep = keep_after_rollback(&self.items, n as usize);
                for (_, o) in &self.items[keep..] {
                    if let Origin::Record(r) = o {
                        mark(fates, *r, Fate::RolledBack(i));
                    }
                }
                self.items.truncate(keep);
                mark(fates, i, Fate::Rollback);
            }
            _ => {}
        }
    }

    /// The replay's result: the prompt's normalization applied.
    pub fn finish(self) -> Replayed {
        let Replayer {
            items, mut fates, ..
        } = self;
        let mut notes = Vec::new();
        let items = normalize_for_prompt(items, &mut fates, &mut notes);
        let (messages, origins): (Vec<_>, Vec<_>) = items.into_iter().unzip();
        for (k, o) in origins.iter().enumerate() {
            if let Origin::Record(r) = o {
                mark(&mut fates, *r, Fate::Sent(k));
            }
        }
        Replayed {
            messages,
            origins,
            fates,
            notes,
        }
    }
}

/// Whether Codex sends a stored response item.
pub fn is_api_item(item: &Value) -> bool {
    let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
    API_TYPES.contains(&ty)
        && !(ty == "message" && item.get("role").and_then(Value::as_str) == Some("system"))
}

fn strip(item: &Value) -> Value {
    match item {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !UNSENT_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

fn text_starts(item: &Value, prefixes: &[&str]) -> bool {
    let Some(Value::Array(parts)) = item.get("content") else {
        return false;
    };
    parts.iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("input_text")
            && c.get("text").and_then(Value::as_str).is_some_and(|t| {
                let t = t.trim_start().to_lowercase();
                prefixes.iter().any(|p| t.starts_with(p))
            })
    })
}

fn is_message(item: &Value, role: &str) -> bool {
    item.get("type").and_then(Value::as_str) == Some("message")
        && item.get("role").and_then(Value::as_str) == Some(role)
}

/// Whether an item opens a user turn: a user message that is not context, or an
/// `agent_message`.
pub fn is_user_turn_boundary(item: &Value) -> bool {
    match item.get("type").and_then(Value::as_str) {
        Some("agent_message") => true,
        Some("message") => {
            is_message(item, "user") && !text_starts(item, &CONTEXTUAL_USER_PREFIXES)
        }
        _ => false,
    }
}

/// How many items stay when the last `n` user turns are dropped: the cut is at the `n`-th last
/// turn boundary, never before the first, and the context updates just above it go too.
fn keep_after_rollback(items: &[(Value, Origin)], n: usize) -> usize {
    if n == 0 {
        return items.len();
    }
    let positions: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, (it, _))| is_user_turn_boundary(it))
        .map(|(i, _)| i)
        .collect();
    let Some(&first) = positions.first() else {
        return items.len();
    };
    let mut cut = if n >= positions.len() {
        first
    } else {
        positions[positions.len() - n]
    };
    while cut > first {
        let prev = &items[cut - 1].0;
        let contextual = (is_message(prev, "developer")
            && text_starts(prev, &CONTEXTUAL_DEV_PREFIXES))
            || (is_message(prev, "user") && text_starts(prev, &CONTEXTUAL_USER_PREFIXES));
        if !contextual {
            break;
        }
        cut -= 1;
    }
    cut
}

fn synthetic_id(prefix: &str, source: Option<&str>) -> Option<String> {
    let source = source.filter(|s| !s.is_empty())?;
    let name = format!("{prefix}:{source}");
    Some(format!(
        "{prefix}_{}",
        uuid::Uuid::new_v5(&SYNTHETIC_OUTPUT_NAMESPACE, name.as_bytes())
    ))
}

fn call_id(item: &Value) -> Option<&str> {
    item.get("call_id").and_then(Value::as_str)
}

fn ty(item: &Value) -> &str {
    item.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Codex's `normalize_history` for the prompt: synthetic outputs for calls without one, and
/// outputs without their call dropped.
fn normalize_for_prompt(
    items: Vec<(Value, Origin)>,
    fates: &mut [Fate],
    notes: &mut Vec<String>,
) -> Vec<(Value, Origin)> {
    let answered = |kind: &str| -> std::collections::HashSet<String> {
        items
            .iter()
            .filter(|(it, _)| ty(it) == kind)
            .filter_map(|(it, _)| call_id(it).map(str::to_owned))
            .collect()
    };
    let outputs = answered("function_call_output");
    let custom_outputs = answered("custom_tool_call_output");
    let mut out = Vec::with_capacity(items.len());
    for (it, origin) in items {
        let t = ty(&it).to_owned();
        let cid = call_id(&it).map(str::to_owned);
        let synth = match (t.as_str(), &cid) {
            ("function_call" | "local_shell_call", Some(c)) if !outputs.contains(c) => {
                Some(("function_call_output", "fco", c.clone()))
            }
            ("custom_tool_call", c) if !c.as_ref().is_some_and(|c| custom_outputs.contains(c)) => {
                Some((
                    "custom_tool_call_output",
                    "ctco",
                    c.clone().unwrap_or_default(),
                ))
            }
            _ => None,
        };
        let id = it.get("id").and_then(Value::as_str).map(str::to_owned);
        let source = match origin {
            Origin::Record(r) | Origin::Replacement(r, _) | Origin::Synthetic(r) => r,
        };
        out.push((it, origin));
        if let Some((kind, prefix, c)) = synth {
            notes.push(format!("synthetic output for call {c}"));
            let mut syn = Map::new();
            syn.insert("type".into(), Value::from(kind));
            if let Some(sid) = synthetic_id(prefix, id.as_deref()) {
                syn.insert("id".into(), Value::from(sid));
            }
            syn.insert("call_id".into(), Value::from(c));
            syn.insert("output".into(), Value::from("aborted"));
            out.push((Value::Object(syn), Origin::Synthetic(source)));
        }
    }
    let calls = |kinds: &[&str]| -> std::collections::HashSet<String> {
        out.iter()
            .filter(|(it, _)| kinds.contains(&ty(it)))
            .filter_map(|(it, _)| call_id(it).map(str::to_owned))
            .collect()
    };
    let fn_calls = calls(&["function_call", "local_shell_call"]);
    let custom_calls = calls(&["custom_tool_call"]);
    out.into_iter()
        .filter(|(it, origin)| {
            let orphan = match ty(it) {
                "function_call_output" => !call_id(it).is_some_and(|c| fn_calls.contains(c)),
                "custom_tool_call_output" => !call_id(it).is_some_and(|c| custom_calls.contains(c)),
                _ => false,
            };
            if orphan {
                notes.push(format!(
                    "orphan output dropped for call {}",
                    call_id(it).unwrap_or("")
                ));
                if let Origin::Record(r) = origin {
                    mark(fates, *r, Fate::Orphan);
                }
            }
            !orphan
        })
        .collect()
}
