//! The Claude Code rule on small hand-made transcripts: one test per branch of the leaf rule
//! (docs/claude-code.md §6.1), of the path (§7.2), the filters (§7.3–§7.5), normalization
//! (§7.6–§7.7), the attachments (§8) and explain.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::borrow::Cow;

use serde_json::{Value, json};

use crate::core::ids::{EntryId, LineSpan};
use crate::core::lines::LineFormat;
use crate::core::source::LineSource;
use crate::core::tree::{Mode, NodeIdx};
use crate::dialect::claude::context::{
    ContextOptions, Dropped, ReadAs, ResumeAppend, context, mid_conversation_system_for,
};
use crate::dialect::claude::explain::{Reason, Target, explain};
use crate::dialect::claude::format::Header;
use crate::dialect::claude::leaf::{resume_leaf, resume_leaf_sized};
use crate::dialect::claude::{Claude, Tree};
use crate::js::timestamp::format_iso;

/// Lines held in memory, addressed by their spans.
struct Mem(Vec<u8>);

impl LineSource for Mem {
    fn line(&self, span: LineSpan) -> std::io::Result<Cow<'_, [u8]>> {
        let start = span.offset as usize;
        Ok(Cow::Borrowed(&self.0[start..start + span.len as usize]))
    }
}

/// A transcript being written: tree lines get a timestamp one second after the line before
/// (unless they carry one) and `isSidechain: false`.
struct Doc {
    lines: Vec<Value>,
    clock: i64,
}

const T0: i64 = 1_780_000_000_000;

impl Doc {
    fn new() -> Doc {
        Doc {
            lines: Vec::new(),
            clock: T0,
        }
    }

    fn line(&mut self, mut v: Value) -> &mut Doc {
        self.clock += 1000;
        if v.get("uuid").is_some() && v.get("type") != Some(&json!("progress")) {
            let o = v.as_object_mut().unwrap();
            o.entry("timestamp")
                .or_insert_with(|| json!(format_iso(self.clock)));
            o.entry("isSidechain").or_insert(json!(false));
        }
        self.lines.push(v);
        self
    }

    fn user(&mut self, uuid: &str, parent: Option<&str>, content: Value) -> &mut Doc {
        self.line(json!({"type": "user", "uuid": uuid, "parentUuid": parent,
            "message": {"role": "user", "content": content}}))
    }

    fn result(&mut self, uuid: &str, parent: &str, tool: &str, text: &str) -> &mut Doc {
        self.line(json!({"type": "user", "uuid": uuid, "parentUuid": parent,
            "message": {"role": "user", "content": [{"tool_use_id": tool, "type": "tool_result", "content": text, "is_error": false}]},
            "toolUseResult": {"stdout": text}}))
    }

    fn assistant(&mut self, uuid: &str, parent: Option<&str>, id: &str, block: Value) -> &mut Doc {
        self.line(json!({"type": "assistant", "uuid": uuid, "parentUuid": parent,
            "message": {"id": id, "type": "message", "role": "assistant", "model": "claude-opus-4-8",
                "content": [block], "stop_reason": null}}))
    }

    fn text(&mut self, uuid: &str, parent: Option<&str>, id: &str, text: &str) -> &mut Doc {
        self.assistant(uuid, parent, id, json!({"type": "text", "text": text}))
    }

    fn attachment(&mut self, uuid: &str, parent: &str, a: Value) -> &mut Doc {
        self.line(
            json!({"type": "attachment", "uuid": uuid, "parentUuid": parent, "attachment": a}),
        )
    }

    fn skills(&mut self, uuid: &str, parent: &str) -> &mut Doc {
        self.attachment(
            uuid,
            parent,
            json!({"type": "skill_listing", "content": "- s: a skill", "isInitial": true}),
        )
    }

    fn system(
        &mut self,
        uuid: &str,
        parent: Option<&str>,
        subtype: &str,
        extra: Value,
    ) -> &mut Doc {
        let mut v =
            json!({"type": "system", "uuid": uuid, "parentUuid": parent, "subtype": subtype});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        self.line(v)
    }

    fn last_prompt(&mut self, leaf: &str) -> &mut Doc {
        self.line(json!({"type": "last-prompt", "leafUuid": leaf, "sessionId": "s"}))
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for l in &self.lines {
            out.extend_from_slice(l.to_string().as_bytes());
            out.push(b'\n');
        }
        out
    }

    fn build(&self) -> (Tree, Mem) {
        let bytes = self.bytes();
        let mut tree = Tree::new(Header, Mode::Lenient);
        let mut offset = 0usize;
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let span = LineSpan {
                line: i as u32 + 1,
                offset: offset as u64,
                len: line.len() as u32,
            };
            offset += line.len() + 1;
            if line.is_empty() {
                continue;
            }
            let item = Claude::classify(line, span, Some(()));
            Claude::apply(&mut tree, item).unwrap();
        }
        Claude::settle(&mut tree).unwrap();
        (tree, Mem(bytes))
    }
}

fn node(tree: &Tree, id: &str) -> NodeIdx {
    tree.find(id).unwrap_or_else(|| panic!("no line {id}"))
}

fn id(tree: &Tree, n: NodeIdx) -> &str {
    tree.node(n).entry.id.as_str()
}

/// The resume leaf and continuation point, as ids.
fn resumed(doc: &Doc) -> Option<(String, String)> {
    let (tree, _) = doc.build();
    resume_leaf(&tree).map(|r| {
        (
            id(&tree, r.leaf).to_owned(),
            id(&tree, r.continues_after).to_owned(),
        )
    })
}

fn pair(a: &str, b: &str) -> Option<(String, String)> {
    Some((a.to_owned(), b.to_owned()))
}

/// The messages at `leaf` with the default options.
fn messages(doc: &Doc, leaf: &str) -> Vec<Value> {
    messages_with(doc, leaf, &ContextOptions::default())
}

fn messages_with(doc: &Doc, leaf: &str, options: &ContextOptions) -> Vec<Value> {
    let (tree, mem) = doc.build();
    context(&tree, &mem, node(&tree, leaf), options)
        .unwrap()
        .messages
}

/// A prompt answered by thinking + text + tool_use, its result, then text: §3.
fn one_turn() -> Doc {
    let mut d = Doc::new();
    d.line(json!({"type": "queue-operation", "operation": "enqueue", "content": "Run"}))
        .user("u1", None, json!("Run a command"))
        .skills("x1", "u1")
        .assistant(
            "a1",
            Some("x1"),
            "msg_1",
            json!({"type": "thinking", "thinking": "echo", "signature": "sig"}),
        )
        .text("a2", Some("a1"), "msg_1", "Running it.")
        .assistant(
            "a3",
            Some("a2"),
            "msg_1",
            json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo hi"}, "caller": {"type": "direct"}}),
        )
        .result("r1", "a3", "t1", "hi")
        .text("a4", Some("r1"), "msg_2", "It printed hi.")
        .last_prompt("a4");
    d
}

// ---------------------------------------------------------------------------------------------
// §6.1: the leaf --resume continues from.

#[test]
fn without_last_prompt_the_last_tree_line_wins_over_the_newest() {
    // e2: `one` is written last; another leaf is an hour newer.
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .line(json!({"type": "assistant", "uuid": "newer", "parentUuid": "p", "timestamp": format_iso(T0 + 3_600_000),
            "message": {"id": "m2", "model": "m", "content": [{"type": "text", "text": "two"}]}}))
        .text("one", Some("p"), "m1", "one");
    assert_eq!(resumed(&d), pair("one", "one"));
}

#[test]
fn the_last_prompt_beats_the_last_line_and_the_newest_timestamp() {
    // e1.
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .text("one", Some("p"), "m1", "one")
        .last_prompt("one")
        .line(json!({"type": "assistant", "uuid": "two", "parentUuid": "p", "timestamp": format_iso(T0 + 3_600_000),
            "message": {"id": "m2", "model": "m", "content": [{"type": "text", "text": "two"}]}}));
    assert_eq!(resumed(&d), pair("one", "one"));
}

#[test]
fn a_dangling_leaf_uuid_falls_back_to_the_last_line() {
    // e3.
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .text("two", Some("p"), "m2", "two")
        .text("one", Some("p"), "m1", "one")
        .last_prompt("nowhere");
    assert_eq!(resumed(&d), pair("one", "one"));
}

#[test]
fn a_non_explicit_leaf_gives_way_to_a_last_line_below_it() {
    // e4: the last-prompt names the parent of the last line.
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .text("two", Some("p"), "m2", "two")
        .last_prompt("p")
        .text("one", Some("p"), "m1", "one");
    assert_eq!(resumed(&d), pair("one", "one"));
}

#[test]
fn an_explicit_leaf_keeps_its_leaf_and_a_resume_adds_no_response_requested() {
    // e5.
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .text("two", Some("p"), "m2", "two")
        .text("one", Some("p"), "m1", "one")
        .line(json!({"type": "last-prompt", "leafUuid": "p", "explicit": true}));
    assert_eq!(resumed(&d), pair("p", "p"));
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "p"), &ContextOptions::default()).unwrap();
    assert_eq!(
        ctx.send_time.resume_appends,
        vec![ResumeAppend::NoResponseRequested]
    );
    // A later tree line ends the explicit leaf's hold.
    d.text("three", Some("one"), "m3", "three");
    assert_eq!(resumed(&d), pair("three", "three"));
}

#[test]
fn an_explicit_leaf_on_an_attachment_walks_up_and_continues_after_the_attachments() {
    // e6: the leaf message is the prompt; the new line hangs below its last attachment.
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .attachment(
            "x1",
            "p",
            json!({"type": "agent_listing_delta", "addedLines": ["- a"], "isInitial": true}),
        )
        .skills("x2", "x1")
        .text("one", Some("x2"), "m1", "one")
        .line(json!({"type": "last-prompt", "leafUuid": "x1", "explicit": true}));
    assert_eq!(resumed(&d), pair("p", "x2"));
}

#[test]
fn an_explicit_null_leaf_clears_and_nothing_is_resumed() {
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .text("one", Some("p"), "m1", "one")
        .line(json!({"type": "last-prompt", "leafUuid": null, "explicit": true}));
    assert_eq!(resumed(&d), None);
}

#[test]
fn sidechain_lines_are_never_the_last_line() {
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .text("one", Some("p"), "m1", "one")
        .line(
            json!({"type": "user", "uuid": "side", "parentUuid": null, "isSidechain": true,
            "message": {"role": "user", "content": "agent prompt"}}),
        );
    assert_eq!(resumed(&d), pair("one", "one"));
}

#[test]
fn progress_lines_are_looked_through() {
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .line(json!({"type": "progress", "uuid": "pr1", "parentUuid": "p"}))
        .line(json!({"type": "progress", "uuid": "pr2", "parentUuid": "pr1"}))
        .text("one", Some("pr2"), "m1", "one");
    assert_eq!(resumed(&d), pair("one", "one"));
    assert_eq!(
        messages(&d, "one"),
        vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "one"}]})
        ]
    );
}

/// §4: a `/compact` of the leaf `b` (preserved), as Claude writes it.
fn compacted() -> Doc {
    let mut d = Doc::new();
    d.user("u1", None, json!("first"))
        .text("a1", Some("u1"), "m1", "Answer one")
        .user("u2", Some("a1"), json!("second"))
        .text("b", Some("u2"), "m2", "Answer two")
        .last_prompt("b")
        .system(
            "B",
            None,
            "compact_boundary",
            json!({"logicalParentUuid": "b", "compactMetadata": {"trigger": "manual",
                "preservedSegment": {"headUuid": "b", "anchorUuid": "S", "tailUuid": "b"}}}),
        )
        .line(json!({"type": "user", "uuid": "S", "parentUuid": "B", "isCompactSummary": true, "isVisibleInTranscriptOnly": true,
            "message": {"role": "user", "content": "This session is being continued. Summary: two prompts."}}))
        .line(json!({"type": "user", "uuid": "C1", "parentUuid": "S", "isMeta": true,
            "message": {"role": "user", "content": "<local-command-caveat>Caveat</local-command-caveat>"}}))
        .user("C2", Some("C1"), json!("<command-name>/compact</command-name>"))
        .user(
            "C3",
            Some("C2"),
            json!("<local-command-stdout>Compacted</local-command-stdout>"),
        )
        .attachment(
            "X",
            "C3",
            json!({"type": "agent_listing_delta", "addedLines": ["- a: agent"], "isInitial": true}),
        )
        .last_prompt("X");
    d
}

#[test]
fn after_compact_the_leaf_is_the_command_output_and_the_resume_continues_after_its_attachment() {
    let d = compacted();
    // The boundary resets the last-prompt: rule 2, the leaf messages of the re-linked tree.
    assert_eq!(resumed(&d), pair("C3", "X"));
    // The context: summary, the preserved answer, the command lines, the listing.
    assert_eq!(
        messages(&d, "C3"),
        vec![
            json!({"role": "user", "content": "This session is being continued. Summary: two prompts."}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "Answer two"}]}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "<local-command-caveat>Caveat</local-command-caveat>\n"},
                {"type": "text", "text": "<command-name>/compact</command-name>\n"},
                {"type": "text", "text": "<local-command-stdout>Compacted</local-command-stdout>"}]}),
            json!({"role": "system", "content": "Available agent types for the Agent tool:\n- a: agent"}),
        ]
    );
}

#[test]
fn a_leaf_before_the_last_boundary_is_read_as_the_file_was_then() {
    let d = compacted();
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "u2"), &ContextOptions::default()).unwrap();
    assert_eq!(ctx.read_as, ReadAs::BeforeLastBoundary);
    assert_eq!(
        ctx.messages,
        vec![
            json!({"role": "user", "content": "first"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "Answer one"}]}),
            json!({"role": "user", "content": "second"})
        ]
    );
    // Explained from the leaf after the compaction: summarized.
    let ex = explain(
        &tree,
        &mem,
        node(&tree, "C3"),
        Target::Node(node(&tree, "u2")),
        &ContextOptions::default(),
    )
    .unwrap();
    assert!(!ex.in_context);
    assert_eq!(
        ex.reason,
        Reason::BeforeCompactBoundary {
            boundary_id: EntryId::new("B"),
            summary_id: Some(EntryId::new("S"))
        }
    );
    assert!(ex.text.contains("compaction summary S"), "{}", ex.text);
}

#[test]
fn a_boundary_without_preserved_segment_keeps_the_leaf_and_sends_from_the_boundary() {
    let mut d = Doc::new();
    d.user("u1", None, json!("first"))
        .text("a1", Some("u1"), "m1", "Answer one")
        .last_prompt("a1")
        .system(
            "B",
            Some("a1"),
            "compact_boundary",
            json!({"compactMetadata": {"trigger": "auto"}}),
        )
        .line(
            json!({"type": "user", "uuid": "S", "parentUuid": "B", "isCompactSummary": true,
            "message": {"role": "user", "content": "Summary."}}),
        )
        .text("a2", Some("S"), "m2", "Go on");
    assert_eq!(resumed(&d), pair("a2", "a2"));
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "a2"), &ContextOptions::default()).unwrap();
    assert_eq!(ctx.messages.len(), 2);
    assert!(ctx.dropped.contains(&(
        node(&tree, "u1"),
        Dropped::BeforeCompactBoundary {
            boundary: EntryId::new("B")
        }
    )));
}

#[test]
fn a_tie_of_leaf_messages_goes_to_the_last_line() {
    // After a compaction with a preserved segment, two leaf messages: the last line's wins.
    let mut d = compacted();
    d.user("n1", Some("X"), json!("after"))
        .text("n2", Some("n1"), "m3", "reply")
        .user("side", Some("C3"), json!("other branch"));
    assert_eq!(resumed(&d), pair("side", "side"));
}

// ---------------------------------------------------------------------------------------------
// §7.2: the path.

#[test]
fn a_missing_parent_continues_through_the_line_at_most_five_seconds_older() {
    // e7: the prompt of the last answer is gone.
    let mut d = Doc::new();
    d.user("u1", None, json!("first"))
        .text("a1", Some("u1"), "m1", "one")
        .text("a2", Some("gone"), "m2", "two");
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "a2"), &ContextOptions::default()).unwrap();
    assert_eq!(
        ctx.entry_ids.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
        vec!["u1", "a1", "a2"]
    );
    // Two messages: both answers merge? No: different ids, so user, assistant, assistant.
    assert_eq!(ctx.messages.len(), 3);
    // More than 5 s: the chain ends.
    let mut far = Doc::new();
    far.user("u1", None, json!("first"))
        .line(json!({"type": "assistant", "uuid": "a2", "parentUuid": "gone", "timestamp": format_iso(T0 + 60_000),
            "message": {"id": "m2", "model": "m", "content": [{"type": "text", "text": "two"}]}}));
    assert_eq!(messages(&far, "a2").len(), 1);
}

/// Parallel tool calls: `[text, tool_use a, tool_use b]`, results under each, the answer under
/// the last result.
fn parallel() -> Doc {
    let mut d = Doc::new();
    d.user("u", None, json!("two commands"))
        .text("t", Some("u"), "msg_1", "Both.")
        .assistant(
            "ua",
            Some("t"),
            "msg_1",
            json!({"type": "tool_use", "id": "ta", "name": "Bash", "input": {"command": "a"}}),
        )
        .assistant(
            "ub",
            Some("ua"),
            "msg_1",
            json!({"type": "tool_use", "id": "tb", "name": "Bash", "input": {"command": "b"}}),
        )
        .result("ra", "ua", "ta", "A")
        .result("rb", "ub", "tb", "B")
        .text("end", Some("rb"), "msg_2", "Done.")
        .last_prompt("end");
    d
}

#[test]
fn parallel_tool_results_are_put_back() {
    let d = parallel();
    assert_eq!(
        messages(&d, "end"),
        vec![
            json!({"role": "user", "content": "two commands"}),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "Both."},
                {"type": "tool_use", "id": "ta", "name": "Bash", "input": {"command": "a"}},
                {"type": "tool_use", "id": "tb", "name": "Bash", "input": {"command": "b"}}]}),
            json!({"role": "user", "content": [
                {"tool_use_id": "ta", "type": "tool_result", "content": "A", "is_error": false},
                {"tool_use_id": "tb", "type": "tool_result", "content": "B", "is_error": false}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}),
        ]
    );
}

#[test]
fn a_file_over_5_mib_keeps_only_the_chains_and_drops_the_lost_tool_use() {
    // e9: the same lines behind a large bookkeeping line.
    let mut d = Doc::new();
    d.line(json!({"type": "file-history-snapshot", "padding": "x".repeat(5_300_000)}));
    for l in parallel().lines {
        d.line(l);
    }
    let (tree, mem) = d.build();
    assert!(crate::dialect::claude::load::size_read(&tree) > 5_242_880);
    let r = resume_leaf(&tree).unwrap();
    assert_eq!(id(&tree, r.leaf), "end");
    let ctx = context(&tree, &mem, r.leaf, &ContextOptions::default()).unwrap();
    assert_eq!(
        ctx.messages[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Both."},
            {"type": "tool_use", "id": "tb", "name": "Bash", "input": {"command": "b"}}]})
    );
    assert_eq!(ctx.messages[2]["content"].as_array().unwrap().len(), 1);
    // The first result is off the chains: explained as such.
    let ex = explain(
        &tree,
        &mem,
        r.leaf,
        Target::Node(node(&tree, "ra")),
        &ContextOptions::default(),
    )
    .unwrap();
    assert_eq!(ex.reason, Reason::PrunedBigFile);
    // The same file read as if small has both.
    let small = resume_leaf_sized(&tree, 1000).unwrap();
    assert_eq!(small.leaf, r.leaf);
    let whole = context(
        &tree,
        &mem,
        r.leaf,
        &ContextOptions {
            file_size: Some(1000),
            ..ContextOptions::default()
        },
    )
    .unwrap();
    assert_eq!(whole.messages[2]["content"].as_array().unwrap().len(), 2);
}

// ---------------------------------------------------------------------------------------------
// §7.3–§7.7: filters and normalization.

#[test]
fn one_turn_merges_blocks_and_sends_attachments_as_system_messages() {
    let d = one_turn();
    let want = vec![
        json!({"role": "user", "content": "Run a command"}),
        json!({"role": "system", "content": "The following skills are available for use with the Skill tool:\n\n- s: a skill"}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "echo", "signature": "sig"},
            {"type": "text", "text": "Running it."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo hi"}}]}),
        json!({"role": "user", "content": [{"tool_use_id": "t1", "type": "tool_result", "content": "hi", "is_error": false}]}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "It printed hi."}]}),
    ];
    assert_eq!(messages(&d, "a4"), want);
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "a4"), &ContextOptions::default()).unwrap();
    assert_eq!(ctx.model.as_deref(), Some("claude-opus-4-8"));
    assert!(ctx.mid_conversation_system);
    assert_eq!(ctx.sources[2].len(), 3);
    assert!(ctx.send_time.resume_appends.is_empty());
}

#[test]
fn without_system_messages_attachments_fold_into_the_user_message() {
    let d = one_turn();
    let got = messages_with(
        &d,
        "a4",
        &ContextOptions {
            model: Some("claude-sonnet-4-5".into()),
            ..ContextOptions::default()
        },
    );
    // The attachment that opens the conversation moves before the prompt (`jcm`), which then
    // merges into its message with the "\n" of a user merge; the other model's signed thinking
    // is not sent.
    assert_eq!(
        got[0],
        json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\nThe following skills are available for use with the Skill tool:\n\n- s: a skill\n</system-reminder>\n"},
            {"type": "text", "text": "Run a command"}]})
    );
    assert_eq!(
        got[1]["content"][0],
        json!({"type": "text", "text": "Running it."})
    );
    assert!(!mid_conversation_system_for(Some("claude-sonnet-4-5")));
    assert!(!mid_conversation_system_for(Some(
        "claude-3-5-haiku-20241022"
    )));
    assert!(!mid_conversation_system_for(Some("claude-opus-4-7[1m]")));
    assert!(mid_conversation_system_for(Some("claude-opus-4-8")));
    assert!(mid_conversation_system_for(None));
}

#[test]
fn an_attachment_after_a_string_tool_result_goes_into_the_result() {
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        .assistant(
            "a",
            Some("u"),
            "m1",
            json!({"type": "tool_use", "id": "t", "name": "Bash", "input": {}}),
        )
        .result("r", "a", "t", "  out  ")
        .attachment(
            "x",
            "r",
            json!({"type": "task_reminder", "content": [], "itemCount": 0}),
        );
    let got = messages_with(
        &d,
        "x",
        &ContextOptions {
            mid_conversation_system: Some(false),
            ..ContextOptions::default()
        },
    );
    let content = got[2]["content"][0]["content"].as_str().unwrap();
    assert!(
        content.starts_with("out\n\n<system-reminder>\nThe task tools"),
        "{content}"
    );
    // A resume there: the turn was interrupted after a tool result.
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "x"), &ContextOptions::default()).unwrap();
    assert_eq!(
        ctx.send_time.resume_appends,
        vec![
            ResumeAppend::ContinueFromWhereYouLeftOff,
            ResumeAppend::NoResponseRequested
        ]
    );
}

#[test]
fn a_system_message_not_after_a_user_message_becomes_a_reminder() {
    // Held attachment texts flushed before an assistant of another response, after an
    // assistant: a user <system-reminder> message.
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        .text("a1", Some("u"), "m1", "one")
        .skills("x", "a1")
        .text("a2", Some("x"), "m2", "two");
    let got = messages(&d, "a2");
    assert_eq!(
        got[2],
        json!({"role": "user", "content": "<system-reminder>\nThe following skills are available for use with the Skill tool:\n\n- s: a skill\n</system-reminder>"})
    );
}

#[test]
fn local_command_lines_are_sent_and_other_system_lines_are_not() {
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        .system(
            "s1",
            Some("u"),
            "local_command",
            json!({"content": "<local-command-stdout>ok</local-command-stdout>"}),
        )
        .system("s2", Some("s1"), "turn_duration", json!({"durationMs": 5}))
        .text("a", Some("s2"), "m1", "done");
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "a"), &ContextOptions::default()).unwrap();
    assert_eq!(
        ctx.messages[0],
        json!({"role": "user", "content": [
            {"type": "text", "text": "go\n"},
            {"type": "text", "text": "<local-command-stdout>ok</local-command-stdout>"}]})
    );
    let ex = explain(
        &tree,
        &mem,
        node(&tree, "a"),
        Target::Node(node(&tree, "s2")),
        &ContextOptions::default(),
    )
    .unwrap();
    assert_eq!(
        ex.reason,
        Reason::SystemNeverSent {
            subtype: "turn_duration".into()
        }
    );
    let ex = explain(
        &tree,
        &mem,
        node(&tree, "a"),
        Target::Node(node(&tree, "s1")),
        &ContextOptions::default(),
    )
    .unwrap();
    assert!(ex.in_context);
    assert!(matches!(
        ex.reason,
        Reason::MergedIntoMessage {
            message_index: 0,
            ..
        }
    ));
}

#[test]
fn the_resume_filters_drop_what_claude_drops() {
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        // 4: a tool_use nobody answered.
        .assistant(
            "lost",
            Some("u"),
            "m1",
            json!({"type": "tool_use", "id": "never", "name": "Bash", "input": {}}),
        )
        // 5: thinking alone in its response.
        .assistant(
            "think",
            Some("lost"),
            "m2",
            json!({"type": "thinking", "thinking": "hmm", "signature": "s"}),
        )
        // 6: blank text alone in its response.
        .text("blank", Some("think"), "m3", "  ")
        // 2: an attachment type dropped on load.
        .attachment("cr", "blank", json!({"type": "compaction_reminder"}))
        // 3: a text block whose text is not a string (the line keeps its other block).
        .line(json!({"type": "user", "uuid": "odd", "parentUuid": "cr",
            "message": {"role": "user", "content": [{"type": "text", "text": 5}, {"type": "text", "text": "more"}]}}))
        .text("a", Some("odd"), "m4", "done");
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "a"), &ContextOptions::default()).unwrap();
    assert_eq!(
        ctx.messages,
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "go\n"}, {"type": "text", "text": "more"}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "done"}]}),
        ]
    );
    let why = |id: &str| {
        ctx.dropped
            .iter()
            .find(|(n, _)| *n == node(&tree, id))
            .map(|(_, d)| d.clone())
    };
    assert_eq!(why("lost"), Some(Dropped::UnresolvedToolUse));
    assert_eq!(why("think"), Some(Dropped::OrphanThinking));
    assert_eq!(why("blank"), Some(Dropped::WhitespaceOnly));
    assert_eq!(
        why("cr"),
        Some(Dropped::AttachmentTypeDropped {
            attachment_type: "compaction_reminder".into()
        })
    );
    let ex = explain(
        &tree,
        &mem,
        node(&tree, "a"),
        Target::Node(node(&tree, "lost")),
        &ContextOptions::default(),
    )
    .unwrap();
    assert!(ex.text.contains("no tool_result answers"), "{}", ex.text);
}

#[test]
fn a_retracted_line_is_dropped() {
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        .text("bad", Some("u"), "m1", "refused")
        .system(
            "f",
            Some("bad"),
            "model_refusal_fallback",
            json!({"retractedMessageUuids": ["bad"]}),
        )
        .text("a", Some("f"), "m2", "retry");
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "a"), &ContextOptions::default()).unwrap();
    assert_eq!(ctx.messages.len(), 2);
    assert!(ctx.dropped.contains(&(
        node(&tree, "bad"),
        Dropped::Retracted {
            by: EntryId::new("f")
        }
    )));
}

#[test]
fn tool_use_blocks_are_rebuilt_and_tool_uses_go_last() {
    let mut d = Doc::new();
    d.user("u", None, json!("edit"))
        .assistant(
            "e",
            Some("u"),
            "m1",
            json!({"type": "tool_use", "id": "t", "name": "Edit", "caller": {}, "input": {"edits": [], "old_string": "a", "new_string": "b", "file_path": "f"}}),
        )
        .text("after", Some("e"), "m1", "and text")
        .result("r", "after", "t", "ok");
    let got = messages(&d, "r");
    assert_eq!(
        got[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "and text"},
            {"type": "tool_use", "id": "t", "name": "Edit", "input": {"edits": [], "file_path": "f"}}]})
    );
}

#[test]
fn trailing_thinking_is_dropped_and_an_error_result_keeps_its_text() {
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        .assistant(
            "a",
            Some("u"),
            "m1",
            json!({"type": "tool_use", "id": "t", "name": "Read", "input": {}}),
        )
        .line(json!({"type": "user", "uuid": "r", "parentUuid": "a",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": true,
                "content": [{"type": "text", "text": "bad"}, {"type": "image", "source": {}}, {"type": "text", "text": "worse"}]}]}}))
        .text("b", Some("r"), "m2", "hm")
        .assistant(
            "c",
            Some("b"),
            "m2",
            json!({"type": "thinking", "thinking": "…", "signature": "x"}),
        );
    let got = messages(&d, "c");
    assert_eq!(
        got[2]["content"][0]["content"],
        json!([{"type": "text", "text": "bad\n\nworse"}])
    );
    assert_eq!(
        got[3],
        json!({"role": "assistant", "content": [{"type": "text", "text": "hm"}]})
    );
}

#[test]
fn an_unknown_attachment_is_listed_not_guessed() {
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        .attachment("f", "u", json!({"type": "file", "filename": "a.txt"}))
        .attachment("t", "f", json!({"type": "todo"}))
        .text("a", Some("t"), "m1", "ok");
    let (tree, mem) = d.build();
    let ctx = context(&tree, &mem, node(&tree, "a"), &ContextOptions::default()).unwrap();
    assert_eq!(ctx.not_rendered, vec!["file".to_owned()]);
    assert_eq!(ctx.messages.len(), 2);
    let opts = ContextOptions::default();
    let ex = explain(
        &tree,
        &mem,
        node(&tree, "a"),
        Target::Node(node(&tree, "t")),
        &opts,
    )
    .unwrap();
    assert_eq!(
        ex.reason,
        Reason::RendersToNothing {
            attachment_type: "todo".into()
        }
    );
    let ex = explain(
        &tree,
        &mem,
        node(&tree, "a"),
        Target::Node(node(&tree, "f")),
        &opts,
    )
    .unwrap();
    assert_eq!(
        ex.reason,
        Reason::NotRendered {
            attachment_type: "file".into()
        }
    );
}

#[test]
fn a_repeated_uuid_keeps_the_first_position_and_the_later_line() {
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        .text("a", Some("u"), "m1", "first version")
        .text("a", Some("u"), "m1", "second version");
    let (tree, mem) = d.build();
    let leaf = node(&tree, "a");
    let got = context(&tree, &mem, leaf, &ContextOptions::default()).unwrap();
    assert_eq!(got.messages[1]["content"][0]["text"], "second version");
    // The earlier line: shadowed.
    let first = tree
        .nodes()
        .iter()
        .position(|n| n.entry.id.as_str() == "a")
        .unwrap() as NodeIdx;
    assert!(context(&tree, &mem, first, &ContextOptions::default()).is_err());
    let ex = explain(
        &tree,
        &mem,
        leaf,
        Target::Node(first),
        &ContextOptions::default(),
    )
    .unwrap();
    assert_eq!(ex.reason, Reason::Shadowed { by_line: 3 });
}

// ---------------------------------------------------------------------------------------------
// explain.

#[test]
fn explain_names_branches_bookkeeping_and_sidechains() {
    let mut d = Doc::new();
    d.user("p", None, json!("hi"))
        .text("one", Some("p"), "m1", "one")
        .text("two", Some("p"), "m2", "two")
        .line(
            json!({"type": "user", "uuid": "side", "parentUuid": null, "isSidechain": true,
            "message": {"role": "user", "content": "agent"}}),
        )
        .last_prompt("one");
    let (tree, mem) = d.build();
    let leaf = node(&tree, "one");
    let opts = ContextOptions::default();
    let ex = explain(&tree, &mem, leaf, Target::Node(node(&tree, "two")), &opts).unwrap();
    assert_eq!(
        ex.reason,
        Reason::NotOnPath {
            diverges_at: Some(EntryId::new("p")),
            branch_entry_id: EntryId::new("two")
        }
    );
    let ex = explain(&tree, &mem, leaf, Target::Node(node(&tree, "p")), &opts).unwrap();
    assert!(ex.in_context);
    assert_eq!(ex.message_indexes, vec![0]);
    assert_eq!(
        ex.text,
        "line 1 (user p) at leaf one: it reaches the model as message 1"
    );
    let ex = explain(&tree, &mem, leaf, Target::Line(5), &opts).unwrap();
    assert_eq!(
        ex.reason,
        Reason::Bookkeeping {
            line_type: "last-prompt".into()
        }
    );
    assert_eq!(ex.entry_id, None);
    let ex = explain(&tree, &mem, leaf, Target::Line(4), &opts).unwrap();
    assert_eq!(ex.reason, Reason::Sidechain);
    assert!(explain(&tree, &mem, leaf, Target::Line(99), &opts).is_err());
    let json = serde_json::to_value(&ex).unwrap();
    assert_eq!(json["reason"]["kind"], "sidechain");
    assert_eq!(json["inContext"], false);
}

#[test]
fn a_response_joins_across_tool_results_but_not_across_a_plain_prompt() {
    // A line of response m1 after a plain user message starts a message of its own; after a
    // user message that (once merged) holds a tool_result, it joins its response.
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        .text("a1", Some("u"), "m1", "first")
        .user("p", Some("a1"), json!("interjection"))
        .text("a2", Some("p"), "m1", "second");
    assert_eq!(
        messages(&d, "a2"),
        vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "first"}]}),
            json!({"role": "user", "content": "interjection"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "second"}]}),
        ]
    );
    let mut d = Doc::new();
    d.user("u", None, json!("go"))
        .assistant(
            "a1",
            Some("u"),
            "m1",
            json!({"type": "tool_use", "id": "t", "name": "Bash", "input": {}}),
        )
        .user("p", Some("a1"), json!("note"))
        .result("r", "p", "t", "out")
        .text("a2", Some("r"), "m1", "after");
    assert_eq!(
        messages(&d, "a2"),
        vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "after"},
                {"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]}),
            json!({"role": "user", "content": [
                {"tool_use_id": "t", "type": "tool_result", "content": "out", "is_error": false},
                {"type": "text", "text": "note"}]}),
        ]
    );
}

#[test]
fn hostile_lines_never_panic() {
    // Odd shapes everywhere Claude's lines have structure: each context, resume leaf and
    // explanation is computed without a panic.
    let mut d = Doc::new();
    d.user("u", None, json!(5))
        .line(json!({"type": "user", "uuid": "v", "parentUuid": "u", "message": "not an object"}))
        .line(json!({"type": "user", "uuid": "w", "parentUuid": "v", "message": {"content": [1, "x", null, {"type": 7}, {"type": "text"}]}}))
        .line(json!({"type": "assistant", "uuid": "x", "parentUuid": "w", "message": {"id": 3, "model": 4, "content": "a string"}}))
        .line(json!({"type": "assistant", "uuid": "y", "parentUuid": "x", "message": {"content": [{"type": "tool_use"}, {"type": "thinking"}, {"type": "text", "text": " "}]}}))
        .line(json!({"type": "attachment", "uuid": "z", "parentUuid": "y", "attachment": [1, 2]}))
        .line(json!({"type": "attachment", "uuid": "z2", "parentUuid": "z", "attachment": {"type": "agent_listing_delta", "addedLines": [null, 1, {}], "removedTypes": [null]}}))
        .line(json!({"type": "attachment", "uuid": "z3", "parentUuid": "z2", "attachment": {"type": "task_reminder", "content": [1, null, {"id": null}]}}))
        .line(json!({"type": "system", "uuid": "s1", "parentUuid": "z3", "subtype": "local_command"}))
        .line(json!({"type": "system", "uuid": "s2", "parentUuid": "s1", "subtype": "model_refusal_fallback", "retractedMessageUuids": "u"}))
        .line(json!({"type": "system", "uuid": "B", "parentUuid": "s2", "subtype": "compact_boundary",
            "compactMetadata": {"preservedSegment": {"headUuid": "nope", "anchorUuid": null, "tailUuid": "s2"}, "preservedMessages": {"uuids": ["u", "B", "u"]}}}))
        .line(json!({"type": "user", "uuid": "c1", "parentUuid": "c2", "message": {"content": "cycle"}}))
        .line(json!({"type": "user", "uuid": "c2", "parentUuid": "c1", "message": {"content": "cycle"}, "timestamp": "not a date"}))
        .line(json!({"type": "user", "uuid": "self", "parentUuid": "self", "message": {"content": "me"}}))
        .line(json!({"type": "user", "uuid": "err", "parentUuid": "self", "message": {"content": [
            {"type": "tool_result", "is_error": true, "content": [{"type": "image"}, {"type": "text", "text": 3}]}]}}))
        .line(json!({"type": "last-prompt", "leafUuid": 42, "explicit": "yes"}))
        .line(json!({"type": "progress", "uuid": "p", "parentUuid": null}))
        .line(json!({"type": "assistant", "uuid": "q", "parentUuid": "p", "message": {"id": "m", "content": []}}));
    let mut bytes = d.bytes();
    bytes.extend_from_slice(
        b"{\"type\":\"user\",\"uuid\":\"sur\",\"parentUuid\":\"q\",\"message\":{\"content\":\"\\ud800 lone\"},\"isMeta\":true,\"isMeta\":false}\n",
    );
    bytes.extend_from_slice(b"{\"type\":\"assistant\",\"uuid\":\"t\"");
    let mut tree = Tree::new(Header, Mode::Lenient);
    let mut offset = 0usize;
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let span = LineSpan {
            line: i as u32 + 1,
            offset: offset as u64,
            len: line.len() as u32,
        };
        offset += line.len() + 1;
        if !line.is_empty() {
            let _ = Claude::apply(&mut tree, Claude::classify(line, span, Some(())));
        }
    }
    let _ = Claude::settle(&mut tree);
    let mem = Mem(bytes);
    let _ = resume_leaf(&tree);
    let _ = resume_leaf_sized(&tree, 10 << 20);
    for mid in [None, Some(true), Some(false)] {
        let opts = ContextOptions {
            mid_conversation_system: mid,
            ..ContextOptions::default()
        };
        for n in 0..tree.len() as NodeIdx {
            let _ = context(&tree, &mem, n, &opts);
            for line in 1..30 {
                let _ = explain(&tree, &mem, n, Target::Line(line), &opts);
            }
        }
    }
    // A line changed on disk since the open is an error naming it.
    let (tree, _) = one_turn().build();
    let leaf = node(&tree, "u1");
    let err = context(
        &tree,
        &Mem(vec![b' '; 10_000]),
        leaf,
        &ContextOptions::default(),
    )
    .err()
    .map(|e| e.to_string());
    assert!(
        err.as_ref()
            .is_some_and(|e| e.starts_with("line 2 (u1): the line is no longer what was read")),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Where a compaction summary came from (audit.rs).

/// A span with every kind of fact, compacted with a summary that keeps some of them: a read
/// file, an edited file, a failed command, a call left without a result, a to-do list, a typed
/// request; the last answer preserved.
fn audited() -> Doc {
    let mut d = Doc::new();
    d.user("u1", None, json!("Fix the parser\nin src"))
        .assistant(
            "a1",
            Some("u1"),
            "m1",
            json!({"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/w/src/lexer.rs"}}),
        )
        .result("r1", "a1", "t1", "fn lex() {}")
        .assistant(
            "a2",
            Some("r1"),
            "m2",
            json!({"type": "tool_use", "id": "t2", "name": "Edit", "input": {"file_path": "/w/src/parser.rs", "old_string": "a", "new_string": "b"}}),
        )
        .result("r2", "a2", "t2", "edited")
        .assistant(
            "a3",
            Some("r2"),
            "m3",
            json!({"type": "tool_use", "id": "t3", "name": "Bash", "input": {"command": "cargo test"}}),
        )
        .line(json!({"type": "user", "uuid": "r3", "parentUuid": "a3",
            "message": {"role": "user", "content": [{"tool_use_id": "t3", "type": "tool_result",
                "content": "error[E0308]: mismatched types\n  --> src/parser.rs", "is_error": true}]}}))
        .assistant(
            "a4",
            Some("r3"),
            "m4",
            json!({"type": "tool_use", "id": "t4", "name": "TodoWrite", "input": {"todos": [
                {"content": "Fix the type error", "status": "in_progress"},
                {"content": "Read the lexer", "status": "completed"}]}}),
        )
        .result("r4", "a4", "t4", "ok")
        .assistant(
            "a5",
            Some("r4"),
            "m5",
            json!({"type": "tool_use", "id": "t5", "name": "Grep", "input": {"pattern": "lex"}}),
        )
        .text("a6", Some("a5"), "m6", "Stopping here.")
        .last_prompt("a6")
        .system(
            "B",
            None,
            "compact_boundary",
            json!({"logicalParentUuid": "a6", "compactMetadata": {"trigger": "manual",
                "preservedSegment": {"headUuid": "a6", "anchorUuid": "S", "tailUuid": "a6"}}}),
        )
        .line(json!({"type": "user", "uuid": "S", "parentUuid": "B", "isCompactSummary": true,
            "message": {"role": "user", "content": "Summary: the user asked to Fix the parser. Read /w/src/lexer.rs; the build fails."}}))
        .user("C1", Some("S"), json!("Carry on"))
        .last_prompt("C1");
    d
}

#[test]
fn a_compaction_is_audited_from_its_boundary_and_its_summary() {
    use crate::core::retention::{ProbeKind, ProbeStatus};
    use crate::dialect::claude::audit::audit;
    let d = audited();
    let (tree, mem) = d.build();
    let (source, retention) = audit(&tree, &mem, node(&tree, "B"), &ContextOptions::default())
        .unwrap()
        .unwrap();
    // The span: the path to the compacted leaf, less the preserved answer.
    assert_eq!(source.count, 10);
    assert_eq!(source.first_id, Some(EntryId::new("u1")));
    assert_eq!(source.last_id, Some(EntryId::new("a5")));
    assert_eq!(source.first_kept_entry_id, Some(EntryId::new("a6")));
    assert_eq!(source.previous_compaction_id, None);
    let got: Vec<(ProbeKind, &str, ProbeStatus, Option<&str>)> = retention
        .probes
        .iter()
        .map(|p| {
            (
                p.probe.kind,
                p.probe.text.as_str(),
                p.status,
                p.probe.entry_id.as_ref().map(EntryId::as_str),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                ProbeKind::ReadFile,
                "/w/src/lexer.rs",
                ProbeStatus::Kept,
                Some("a1")
            ),
            (
                ProbeKind::ModifiedFile,
                "/w/src/parser.rs",
                ProbeStatus::Lost,
                Some("a2")
            ),
            (
                ProbeKind::ToolError,
                "error[E0308]: mismatched types",
                ProbeStatus::Lost,
                Some("r3")
            ),
            (
                ProbeKind::OpenTask,
                "Fix the type error",
                ProbeStatus::Lost,
                Some("a4")
            ),
            (
                ProbeKind::LastUserRequest,
                "Fix the parser",
                ProbeStatus::Kept,
                Some("u1")
            ),
        ]
    );
    // The Grep call without a result is not a fact of the span: Claude does not send it (§7).
    assert_eq!((retention.kept, retention.lost), (2, 3));
    // The summary line gives the same answer; a line of the conversation gives none.
    let (again, _) = audit(&tree, &mem, node(&tree, "S"), &ContextOptions::default())
        .unwrap()
        .unwrap();
    assert_eq!(again.count, source.count);
    assert!(
        audit(&tree, &mem, node(&tree, "u1"), &ContextOptions::default())
            .unwrap()
            .is_none()
    );
    // Explain says it in its sentence and carries both.
    let ex = explain(
        &tree,
        &mem,
        node(&tree, "C1"),
        Target::Node(node(&tree, "B")),
        &ContextOptions::default(),
    )
    .unwrap();
    assert!(
        ex.text
            .contains("its compaction summarizes 10 lines u1…a5, keeps from a6; kept 2 of 5 facts"),
        "{}",
        ex.text
    );
    assert_eq!(ex.audit.unwrap().lost, 3);
}

#[test]
fn a_later_compaction_does_not_change_what_an_earlier_one_replaced() {
    use crate::dialect::claude::audit::audit;
    // A second /compact whose preserved segment is the line the first compaction kept.
    let mut d = audited();
    d.text("a7", Some("C1"), "m7", "Answer two")
        .system(
            "B2",
            None,
            "compact_boundary",
            json!({"logicalParentUuid": "a7", "compactMetadata": {"trigger": "manual",
                "preservedSegment": {"headUuid": "a7", "anchorUuid": "S2", "tailUuid": "a7"}}}),
        )
        .line(
            json!({"type": "user", "uuid": "S2", "parentUuid": "B2", "isCompactSummary": true,
            "message": {"role": "user", "content": "Summary two."}}),
        )
        .user("D1", Some("S2"), json!("after"))
        .last_prompt("D1");
    let (tree, mem) = d.build();
    let first = audit(&tree, &mem, node(&tree, "B"), &ContextOptions::default())
        .unwrap()
        .unwrap();
    assert_eq!(first.0.count, 10);
    assert_eq!(first.1.kept, 2);
    let (second, retention) = audit(&tree, &mem, node(&tree, "B2"), &ContextOptions::default())
        .unwrap()
        .unwrap();
    // The first summary, the answer it preserved (re-linked under it), the next prompt.
    assert_eq!(second.count, 3);
    assert_eq!(second.first_id, Some(EntryId::new("S")));
    assert_eq!(second.last_id, Some(EntryId::new("C1")));
    assert_eq!(second.first_kept_entry_id, Some(EntryId::new("a7")));
    assert_eq!(second.previous_compaction_id, Some(EntryId::new("B")));
    assert_eq!(
        retention
            .probes
            .iter()
            .map(|p| (p.probe.text.as_str(), p.status))
            .collect::<Vec<_>>(),
        vec![("Carry on", crate::core::retention::ProbeStatus::Lost)]
    );
}
