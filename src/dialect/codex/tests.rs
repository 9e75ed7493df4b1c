//! Unit tests of the Codex dialect on hand-made rollout lines: the reader, the replay rule and
//! the chain of files.

use serde_json::{Value, json};

use super::replay::{Fate, replay};
use crate::core::lines::LineFormat;

fn msg(role: &str, text: &str) -> Value {
    json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]})
}

fn item(payload: Value) -> Value {
    json!({"timestamp": "2026-01-01T00:00:00.000Z", "type": "response_item", "payload": payload})
}

#[test]
fn replay_keeps_items_drops_events_and_applies_compaction_and_rollback() {
    let mut with_passthrough = msg("user", "first");
    with_passthrough["internal_chat_message_metadata_passthrough"] = json!({"turn_id": "t"});
    let records = vec![
        json!({"type": "session_meta", "payload": {"id": "x"}}),
        item(with_passthrough),
        json!({"type": "event_msg", "payload": {"type": "task_started"}}),
        item(msg("assistant", "a1")),
        json!({"type": "compacted", "payload": {"message": "s", "replacement_history": [msg("user", "first"), msg("user", "summary")]}}),
        item(msg("user", "second")),
        item(msg("assistant", "a2")),
        item(msg("user", "third")),
        json!({"type": "event_msg", "payload": {"type": "thread_rolled_back", "num_turns": 1}}),
        item(json!({"type": "other"})),
    ];
    let r = replay(&records);
    assert_eq!(
        r.messages,
        vec![
            msg("user", "first"),
            msg("user", "summary"),
            msg("user", "second"),
            msg("assistant", "a2")
        ]
    );
    assert_eq!(r.fates[0], Fate::NotSent);
    assert_eq!(r.fates[1], Fate::Compacted(4));
    assert_eq!(r.fates[2], Fate::NotSent);
    assert_eq!(r.fates[4], Fate::Base);
    assert_eq!(r.fates[5], Fate::Sent(2));
    assert_eq!(r.fates[7], Fate::RolledBack(8));
    assert_eq!(r.fates[9], Fate::NotSent);
}

#[test]
fn a_call_without_output_gets_an_aborted_output_and_an_orphan_output_goes() {
    let records = vec![
        item(
            json!({"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "x", "arguments": "{}"}),
        ),
        item(json!({"type": "function_call_output", "call_id": "c9", "output": "lost"})),
    ];
    let r = replay(&records);
    assert_eq!(r.messages.len(), 2);
    assert_eq!(r.messages[1]["call_id"], "c1");
    assert_eq!(r.messages[1]["output"], "aborted");
    // uuid5(90d38d3e-6a5b-4d52-bfe2-2f1e634bfac4, "fco:fc_1"), as Codex names it.
    let id = r.messages[1]["id"].as_str().unwrap_or("");
    assert!(id.starts_with("fco_") && id.len() == 40, "{id}");
    assert_eq!(r.fates[1], Fate::Orphan);
}

#[test]
fn lines_are_linear_by_ordinal_and_unknown_types_survive() {
    let text = concat!(
        r#"{"timestamp":"2026-01-01T00:00:00.000Z","ordinal":5,"type":"session_meta","payload":{"id":"t"}}"#,
        "\n",
        r#"{"timestamp":"2026-01-01T00:00:01.000Z","ordinal":6,"type":"brand_new_type","payload":{}}"#,
        "\n",
        r#"{"timestamp":"2026-01-01T00:00:02.000Z","type":"event_msg","payload":{"type":"token_count"}}"#,
        "\n",
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("rollout-x.jsonl");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    let s = crate::storage::reader::open_session::<super::Codex>(
        &path,
        crate::core::tree::Mode::Strict,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = s.tree.nodes().iter().map(|n| n.entry.id.as_str()).collect();
    assert_eq!(ids, ["5", "6", "line:3"]);
    assert_eq!(s.tree.leaves().count(), 1);
    assert_eq!(s.tree.nodes()[1].entry.kind.type_name(), "brand_new_type");
    assert_eq!(
        s.tree.nodes()[2]
            .entry
            .parent_id
            .as_ref()
            .map(|p| p.as_str()),
        Some("6")
    );
    let _ = super::Codex::NAME;
}
