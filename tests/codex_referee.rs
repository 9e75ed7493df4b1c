//! The Codex referee: the real Codex CLI 0.171.0 and, for legacy rollouts, 0.144.6 (installed
//! under the repository by `scripts/codex-deps.sh`) run the corpus of `tests/codex/corpus.mjs`
//! (`codex exec`, `exec resume`, `exec fork`, `codex app-server` reverts, rollbacks and
//! compactions) against the scripted Responses API server `tests/codex/model-server.mjs`,
//! which records every request. Then, with `sessiond context FILE --leaf ID --json`:
//!
//! * leaf: for every recorded request, the context at the line just before its recorded answer
//!   equals the request's `input` after the normalizations of docs/codex.md §9 ([`normalize`]),
//!   item for item as compact JSON, key order included;
//! * resume: for every request that continues a stored thread, the context at the line Codex
//!   resumed from (the end of the file the step appended to, a new fork's or segment's first
//!   line, a legacy fork's parent end) is the request's normalized `input` minus the new turn,
//!   and every item of the new turn was written to a rollout during the step (a manual
//!   compaction's request has no new turn: the history and the summarization prompt).
//!
//! Without the install (or Node) the referee skips loudly, and fails under `CI`.
//! `SESSIOND_CODEX_CORPUS=DIR` reuses a corpus already made (`node tests/codex/corpus.mjs DIR`).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

#[path = "codex/support.rs"]
mod codex_support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use codex_support::{corpus, repo};

use serde_json::Value;

/// The opening of Codex's summarization prompt (N2).
const COMPACTION_PROMPT: &str = "You are performing a CONTEXT CHECKPOINT COMPACTION";

fn dumps(v: &Value) -> String {
    serde_json::to_string(v).unwrap()
}

fn text_of(item: &Value) -> String {
    item.get("content")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

fn without_id(item: &Value) -> Value {
    let mut item = item.clone();
    if let Value::Object(m) = &mut item {
        m.shift_remove("id");
    }
    item
}

/// Every line of `small` occurs in `big`, in order.
fn ordered_subset(small: &str, big: &str) -> bool {
    let mut it = big.split('\n');
    small.split('\n').all(|l| it.any(|b| b == l))
}

/// The request's `input` after docs/codex.md §9, each normalization checked before it is
/// applied: N1 (Codex 0.171.0's base-instructions message, id
/// `msg_<uuid5(uuid5(OID, thread id), text)>`, its lines drawn in order from the stored
/// `base_instructions`) removed; N2 (the summarization prompt ending a compaction request, no
/// id) removed. N3 (the legacy Codex sends no stored ids) is applied to sessiond's side by the
/// caller. Counts go to `counts`.
fn normalize(
    r: &Value,
    base_instructions: Option<&str>,
    counts: &mut HashMap<&'static str, usize>,
) -> Result<Vec<Value>, String> {
    let mut input: Vec<Value> = r["input"].as_array().cloned().unwrap_or_default();
    let first = input.first().cloned().unwrap_or(Value::Null);
    let is_base = first["type"] == "message"
        && first["role"] == "developer"
        && first["id"].as_str().is_some_and(|i| i.starts_with("msg_"))
        && first["content"].as_array().is_some_and(|c| c.len() == 1);
    if is_base {
        let text = text_of(&first);
        let thread = r["thread_id"].as_str().unwrap_or("");
        let ns = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, thread.as_bytes());
        let want = format!("msg_{}", uuid::Uuid::new_v5(&ns, text.as_bytes()));
        if first["id"] != want.as_str() {
            return Err(format!("N1: the first item's id is not {want}"));
        }
        if !base_instructions.is_some_and(|b| ordered_subset(&text, b)) {
            return Err(
                "N1: the base-instructions text is not drawn from session_meta.base_instructions"
                    .into(),
            );
        }
        *counts.entry("N1").or_default() += 1;
        input.remove(0);
    } else if r["instructions"]
        .as_str()
        .is_some_and(|i| Some(i) == base_instructions)
    {
        *counts.entry("legacy instructions").or_default() += 1;
    } else {
        return Err("no base instructions (neither a first developer message nor `instructions` equal to the stored text)".into());
    }
    let last = input.last().cloned().unwrap_or(Value::Null);
    if last["type"] == "message"
        && last["role"] == "user"
        && text_of(&last).starts_with(COMPACTION_PROMPT)
    {
        if last.get("id").is_some()
            || r["request_kind"]
                .as_str()
                .is_some_and(|k| k != "compaction")
        {
            return Err(
                "N2: a summarization prompt with an id, or outside a compaction request".into(),
            );
        }
        *counts.entry("N2").or_default() += 1;
        input.pop();
    } else if r["request_kind"] == "compaction" {
        return Err("N2: a compaction request without the summarization prompt last".into());
    }
    Ok(input)
}

/// `sessiond context FILE --leaf ID --json` at `leaf` (`{file, line, ordinal}` of the
/// manifest, the file relative to `root`).
fn context(root: &Path, leaf: &Value) -> Value {
    let file = root.join(leaf["file"].as_str().unwrap());
    let id = match leaf["ordinal"].as_u64() {
        Some(o) => o.to_string(),
        None => format!("line:{}", leaf["line"].as_u64().unwrap() + 1),
    };
    let out = Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["context", file.to_str().unwrap(), "--leaf", &id, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "context {} --leaf {id}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["format"], "codex");
    assert_eq!(doc["leafId"], id.as_str());
    doc
}

/// The stripped response items appended to any rollout during `step` (the new turn's source).
fn written_in_step(root: &Path, step: &Value, drop_ids: bool) -> Vec<String> {
    let mut items = Vec::new();
    for (f, _) in step["files_after"].as_object().unwrap() {
        let start = step["files_before"][f]["lines"].as_u64().unwrap_or(0) as usize;
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        for line in text.lines().skip(start) {
            let Ok(rec) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if rec["type"] == "response_item" {
                let mut item = rec["payload"].clone();
                if let Value::Object(m) = &mut item {
                    m.shift_remove("internal_chat_message_metadata_passthrough");
                }
                items.push(dumps(&if drop_ids { without_id(&item) } else { item }));
            }
        }
    }
    items
}

#[test]
fn sessiond_context_is_what_codex_sends() {
    let Some(root) = corpus() else {
        return;
    };
    let root = root.to_path_buf();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let legacy_version = manifest["codex"]["legacy"].clone();
    let steps: HashMap<&str, &Value> = manifest["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s))
        .collect();
    let mut counts: HashMap<&'static str, usize> = HashMap::new();
    let mut failures = Vec::new();
    for r in manifest["requests"].as_array().unwrap() {
        if r["input"].is_null() {
            continue;
        }
        *counts.entry("requests").or_default() += 1;
        let n = r["n"].as_u64().unwrap();
        let legacy = r["codex"] == legacy_version;
        let ids = |items: &[Value]| -> Vec<String> {
            items
                .iter()
                .map(|x| dumps(&if legacy { without_id(x) } else { x.clone() }))
                .collect()
        };
        let leaf = &r["leaf"];
        let at_leaf = (!leaf.is_null()).then(|| context(&root, leaf));
        let at_resume = (!r["resumed_from"].is_null()).then(|| context(&root, &r["resumed_from"]));
        let stored = at_leaf
            .as_ref()
            .or(at_resume.as_ref())
            .and_then(|d| d["baseInstructions"].as_str().map(str::to_owned));
        let got = match normalize(r, stored.as_deref(), &mut counts) {
            Ok(input) => input.iter().map(dumps).collect::<Vec<_>>(),
            Err(e) => {
                failures.push(format!("request {n} ({}): {e}", r["step"]));
                continue;
            }
        };
        if legacy {
            *counts.entry("N3").or_default() += 1;
        }
        if let Some(doc) = &at_leaf {
            *counts.entry("leaf compared").or_default() += 1;
            let want = ids(doc["messages"].as_array().unwrap());
            if want == got {
                *counts.entry("leaf equal").or_default() += 1;
            } else {
                let k = want.iter().zip(&got).take_while(|(a, b)| a == b).count();
                failures.push(format!(
                    "request {n} ({}) at {}:{}: sessiond {} items, Codex {}; first difference at {k}: sessiond {:.200} / Codex {:.200}",
                    r["step"], leaf["file"], leaf["line"], want.len(), got.len(),
                    want.get(k).map_or("-", String::as_str), got.get(k).map_or("-", String::as_str)
                ));
            }
        }
        if let Some(doc) = &at_resume {
            *counts.entry("resume compared").or_default() += 1;
            let base = ids(doc["messages"].as_array().unwrap());
            let rest = got.get(base.len()..).unwrap_or(&[]);
            let written = written_in_step(&root, steps[r["step"].as_str().unwrap()], legacy);
            if got.len() < base.len() || got[..base.len()] != base[..] {
                failures.push(format!(
                    "request {n} ({}): the context at the resumed line {}:{} ({} items) is not the request minus its new turn",
                    r["step"], r["resumed_from"]["file"], r["resumed_from"]["line"], base.len()
                ));
            } else if (rest.is_empty() && r["request_kind"] != "compaction")
                || rest.iter().any(|x| !written.contains(x))
            {
                // A manual compaction sends the stored history alone (its prompt is N2): no new
                // turn; any other continuation sends at least the prompt.
                failures.push(format!(
                    "request {n} ({}): the new turn ({} items) is not what the step wrote",
                    r["step"],
                    rest.len()
                ));
            } else {
                *counts.entry("resume equal").or_default() += 1;
            }
        }
    }
    // The current segment (docs/codex.md §7): for every thread, the file `sessiond tree` calls
    // current is the one Codex's state names after the last step run in its home.
    let mut last_current: HashMap<&str, &Value> = HashMap::new();
    for s in manifest["steps"].as_array().unwrap() {
        if s["current_after"].is_object() {
            last_current.insert(s["home"].as_str().unwrap(), &s["current_after"]);
        }
    }
    for (home, current) in &last_current {
        for (thread, file) in current.as_object().unwrap() {
            let file = root.join(file.as_str().unwrap());
            let out = Command::new(env!("CARGO_BIN_EXE_sessiond"))
                .args(["tree", file.to_str().unwrap(), "--json"])
                .output()
                .unwrap();
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            *counts.entry("current compared").or_default() += 1;
            let said = &doc["thread"]["current"];
            if doc["thread"]["isCurrent"] == true && said["source"] == "state" {
                *counts.entry("current equal").or_default() += 1;
            } else {
                failures.push(format!(
                    "{home}: thread {thread}: Codex's state names {}, sessiond says {said}",
                    file.display()
                ));
            }
        }
    }
    // A pi session, a Claude Code transcript and a Codex home list as one.
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["list", "--json", "--cache"])
        .arg(cache.path().join("cache.json"))
        .arg("--root")
        .arg(repo().join("examples"))
        .arg("--root")
        .arg(repo().join("tests/data/claude/real"))
        .arg("--root")
        .arg(root.join("home/.codex"))
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let formats: std::collections::BTreeSet<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["format"].as_str())
        .collect();
    assert_eq!(
        formats.into_iter().collect::<Vec<_>>(),
        ["claude-code", "codex", "pi"],
        "{listed}"
    );
    let c = |k: &str| counts.get(k).copied().unwrap_or(0);
    println!(
        "codex referee: {} requests; at the leaf {} compared, {} equal; at the resumed line {} compared, {} equal; N1 {}, N2 {}, N3 {}, legacy instructions {}; current segment {} compared, {} equal",
        c("requests"),
        c("leaf compared"),
        c("leaf equal"),
        c("resume compared"),
        c("resume equal"),
        c("N1"),
        c("N2"),
        c("N3"),
        c("legacy instructions"),
        c("current compared"),
        c("current equal")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The corpus is what docs/codex.md §10 describes: every kind of continuation is there.
    assert!(c("leaf compared") >= 30, "{counts:?}");
    assert!(c("resume compared") >= 20, "{counts:?}");
    assert!(c("N2") >= 2 && c("N3") >= 1, "{counts:?}");
    assert!(c("current compared") >= 3, "{counts:?}");
}
