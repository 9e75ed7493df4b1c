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
    // Keeping only the history: the same messages and notes, no fates.
    let mut only = super::replay::Replayer::messages();
    for rec in &records {
        only.push(Some(rec));
    }
    let only = only.finish();
    assert_eq!(only.messages, r.messages);
    assert_eq!(only.origins, r.origins);
    assert_eq!(only.notes, r.notes);
    assert!(only.fates.is_empty());
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

#[test]
fn the_current_segment_is_codex_state_else_the_name_that_sorts_last() {
    use super::lineage::Index;
    use super::state::{Source, current};
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let day = home.path().join("sessions/2026/01/01");
    std::fs::create_dir_all(&day).unwrap_or_else(|e| panic!("{e}"));
    let thread = "01a2453e-a8be-7fd3-8041-bcaa744a1349";
    let meta = format!(
        "{{\"timestamp\":\"t\",\"ordinal\":0,\"type\":\"session_meta\",\"payload\":{{\"id\":\"{thread}\"}}}}\n"
    );
    let root = day.join(format!("rollout-2026-01-01T00-00-00-{thread}.jsonl"));
    let segment = day.join(format!(
        "rollout-2026-01-01T00-00-09-{thread}_01a2453e-cd9c-7712-9155-c5f42ef8a8d0.jsonl"
    ));
    for f in [&root, &segment] {
        std::fs::write(f, &meta).unwrap_or_else(|e| panic!("{e}"));
    }
    let index = Index::scan(home.path());
    let c = current(home.path(), &index, thread).unwrap_or_else(|| panic!("no current file"));
    assert_eq!((c.file, c.source), (segment.clone(), Source::LastByName));
    // Codex's state names the root file (as after a revert back to it): that wins.
    let db = home.path().join("state_5.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap_or_else(|e| panic!("{e}"));
    conn.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL); \
         INSERT INTO threads VALUES ('{thread}', '{}');",
        root.display()
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    // Read while Codex's connection is open, its writes in the WAL.
    let c = current(home.path(), &index, thread).unwrap_or_else(|| panic!("no current file"));
    assert_eq!((c.file, c.source), (root.clone(), Source::State));
    // The reader took no lock: Codex writes on.
    conn.execute(
        "UPDATE threads SET rollout_path = ?1 WHERE id = ?2",
        [segment.to_str().unwrap_or(""), thread],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let c = current(home.path(), &index, thread).unwrap_or_else(|| panic!("no current file"));
    assert_eq!(c.file, segment);
}

#[test]
fn a_rollout_is_opened_without_following_a_link_or_waiting_on_a_fifo() {
    use super::lineage::open_rollout;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("rollout-a.jsonl");
    std::fs::write(&file, "{}\n").unwrap_or_else(|e| panic!("{e}"));
    assert!(open_rollout(&file).is_ok());
    let link = dir.path().join("rollout-link.jsonl");
    std::os::unix::fs::symlink(&file, &link).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        open_rollout(&link).is_err(),
        "a symbolic link is not followed"
    );
    let fifo = dir.path().join("rollout-fifo.jsonl");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Refused at once (O_NONBLOCK), not after a writer comes.
    assert!(open_rollout(&fifo).is_err(), "a FIFO is no rollout");
    assert!(open_rollout(dir.path()).is_err(), "nor a directory");
}

/// A lenient read notes what it did about each bad line in Codex's terms, not another
/// agent's: Codex skips a line it cannot parse and a repeated ordinal.
#[test]
fn a_lenient_read_says_what_codex_does_with_a_bad_line() {
    let text = concat!(
        r#"{"timestamp":"2026-01-01T00:00:00.000Z","ordinal":0,"type":"session_meta","payload":{"id":"t"}}"#,
        "\n",
        "not json\n",
        r#"{"timestamp":"2026-01-01T00:00:01.000Z","ordinal":1}"#,
        "\n",
        r#"{"timestamp":"2026-01-01T00:00:02.000Z","ordinal":1,"type":"event_msg","payload":{}}"#,
        "\n",
        r#"{"timestamp":"2026-01-01T00:00:03.000Z","ordinal":1,"type":"event_msg","payload":{}}"#,
        "\n",
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("rollout-x.jsonl");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    let s = crate::storage::reader::open_session::<super::Codex>(
        &path,
        crate::core::tree::Mode::Lenient,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(u32, &str, &str)> = s
        .tree
        .diagnostics()
        .iter()
        .filter_map(|d| match d {
            crate::core::diagnostics::Diagnostic::Corrupt {
                corruption, action, ..
            } => Some((corruption.line, corruption.kind.as_str(), *action)),
            _ => None,
        })
        .collect();
    let repeated = "Codex skips a repeated ordinal, so its answers may differ here";
    assert_eq!(
        got,
        [
            (2, "invalidJson", "line skipped, as Codex does"),
            (
                3,
                "invalidEntry",
                "line skipped, as Codex skips a line it cannot parse"
            ),
            (
                5,
                "duplicateId",
                &*format!("the later line takes the ordinal; {repeated}")
            ),
            (5, "parentCycle", &*format!("treated as a root; {repeated}")),
        ]
    );
}

#[test]
fn a_chain_past_a_chunk_of_line_ends_replays_its_history_alone_as_whole() {
    use super::lineage::{Chain, Index, RolloutFile};
    use std::io::Write;
    // More lines than one chunk of line ends holds (65,536), with a compaction on the way.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("rollout-x.jsonl");
    let mut out = Vec::new();
    let meta = json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}});
    writeln!(out, "{meta}").unwrap_or_default();
    let lines = 70_000;
    for i in 1..lines {
        let rec = match i % 7 {
            0 => item(msg("user", &format!("u{i}"))),
            1 => item(msg("assistant", &format!("a{i}"))),
            _ if i == 66_000 => json!({"type": "compacted", "payload": {"message": "s",
                "replacement_history": [msg("user", "summary")]}}),
            _ => json!({"timestamp": "t", "type": "event_msg", "payload": {"type": "token_count"}}),
        };
        writeln!(out, "{rec}").unwrap_or_default();
    }
    std::fs::write(&path, &out).unwrap_or_else(|e| panic!("{e}"));
    let file = RolloutFile::read(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file.len(), lines);
    // Each line's bounds, across the chunk boundary, are the file's.
    let mut start = 0u64;
    for (i, l) in out.split_inclusive(|&b| b == b'\n').enumerate() {
        assert_eq!(file.start_of(i), start);
        start += l.len() as u64;
        assert_eq!(file.end_of(i), start);
    }
    assert_eq!(
        file.line(65_536),
        out.split(|&b| b == b'\n').nth(65_536).unwrap_or_default()
    );
    let chain = Chain::resolve(&Index::default(), &path, None).unwrap_or_else(|e| panic!("{e}"));
    let (whole, at) = chain.replay().unwrap_or_else(|e| panic!("{e}"));
    let alone = chain.replay_messages().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(whole.fates.len(), lines);
    assert_eq!(at.len(), lines);
    assert!(alone.fates.is_empty());
    assert_eq!(alone.messages, whole.messages);
    assert_eq!(alone.messages[0], msg("user", "summary"));
    assert_eq!(alone.messages.len(), 1 + 2 * (lines - 66_000) / 7);
}
