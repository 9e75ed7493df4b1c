//! The fork plan: the lines of a new session file holding one root-to-entry path of a session.
//! Matches pi 1.6.0 `SessionManager.createBranchedSession` (and `AgentSessionRuntime.fork` for
//! the `before` position).
//!
//! What pi does, and so what the plan does:
//! * the path runs from the root to the fork point; entry ids are kept;
//! * `label` entries on the path are dropped, and an entry whose parent was a dropped label is
//!   re-chained to the previous kept entry;
//! * a compaction whose `firstKeptEntryId` names a dropped label now names the first kept entry
//!   after that label (which may be the compaction itself);
//! * then one new `label` entry per resolved label whose target is on the path, in pi's
//!   `labelsById` order, chained after the last path entry, each with a new id and the original
//!   label entry's timestamp;
//! * a new header `{type, version: 3, id, timestamp, cwd, parentSession}`.
//!
//! Lines are copied byte-for-byte from the source unless pi changes the entry; a changed entry
//! is re-serialized field by field ([`RawObject`]), so untouched values keep their bytes.
//!
//! Older sources (a deliberate choice, since pi migrates the whole file first): the new file is
//! always version 3, so each entry of a version-1 source gets its sessiond id
//! ([`EntryId::for_v1_line`], deterministic where pi's are random) and its `parentId` appended
//! after its own fields, and a compaction's `firstKeptEntryIndex` becomes `firstKeptEntryId`
//! (appended, the index deleted), in the key order pi's migration produces. Version-1 and -2
//! messages with role `hookMessage` get role `custom` in place. The source file is never
//! rewritten (pi rewrites it on open).
//!
//! Deliberate difference: pi writes a fork whose path holds no user or assistant message only
//! once the first message arrives (and `before` at a root message makes an empty session). The
//! plan always produces the file, header-only when the path is empty, so the caller gets a path
//! that exists.
//!
//! Pure: the caller passes the tree, the source lines ([`LineSource`]), the new header's fields
//! and a source of random UUIDs for label ids.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::value::RawValue;
use thiserror::Error;
use uuid::Uuid;

use crate::core::raw_object::{RawObject, raw_opt_string, raw_string};
use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::entries::generate_id;
use crate::dialect::pi::format::{CURRENT_VERSION, EntryId, EntryKind, Role, raw_str};
use crate::dialect::pi::render::{self, LineSource, RenderError};

/// Where the fork ends relative to the chosen entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// Up to and including the entry.
    At,
    /// Up to the entry's parent; the entry must be a user message (pi's fork from a user
    /// message, which puts the message text back into the editor).
    Before,
}

/// The new header's fields (pi: `{type: "session", version: 3, id, timestamp, cwd, parentSession}`).
#[derive(Clone, Debug)]
pub struct NewHeader<'a> {
    /// The new session id (pi: a UUIDv7).
    pub id: &'a str,
    /// ISO timestamp.
    pub timestamp: &'a str,
    /// The source header's `cwd` as raw JSON; omitted when `None`.
    pub cwd: Option<&'a RawValue>,
    /// Absolute path of the source file; omitted when `None`.
    pub parent_session: Option<&'a str>,
}

impl NewHeader<'_> {
    /// The header line (no newline).
    pub fn line(&self) -> String {
        let mut o = RawObject::new();
        o.push("type", Cow::Owned(raw_string("session")));
        o.set_value("version", &CURRENT_VERSION);
        o.push("id", Cow::Owned(raw_string(self.id)));
        o.push("timestamp", Cow::Owned(raw_string(self.timestamp)));
        if let Some(cwd) = self.cwd {
            o.push("cwd", Cow::Borrowed(cwd));
        }
        if let Some(p) = self.parent_session {
            o.push("parentSession", Cow::Owned(raw_string(p)));
        }
        o.to_line()
    }
}

/// Why a fork cannot be planned.
#[derive(Debug, Error)]
pub enum ForkError {
    /// The fork point is not in the session.
    #[error("unknown entry id {id}")]
    UnknownEntry {
        /// The id as given.
        id: String,
    },
    /// `before` was asked of an entry that is not a user message (pi refuses it too).
    #[error("entry {id} is not a user message; fork before needs one")]
    NotAUserMessage {
        /// The entry that is not a user message.
        id: String,
    },
    /// A line could not be read ([`RenderError::Io`]), or no longer holds the entry the tree
    /// was built from ([`RenderError::Changed`]).
    #[error(transparent)]
    Line(#[from] RenderError),
}

/// The planned file: its lines (header first, no newlines) and what the plan did.
#[derive(Debug)]
pub struct ForkPlan {
    /// The new file's lines, header first, without newlines.
    pub lines: Vec<Vec<u8>>,
    /// The fork's leaf (its last entry), `None` for a header-only file.
    pub leaf_id: Option<EntryId>,
    /// Ids of the path entries kept, root first.
    pub path_ids: Vec<EntryId>,
    /// Label entries dropped from the path.
    pub dropped_labels: Vec<EntryId>,
    /// Ids of the label entries re-created after the path.
    pub new_labels: Vec<EntryId>,
    /// Kept entries whose line was re-serialized (re-chained, fixed up or migrated).
    pub rewritten: Vec<EntryId>,
}

/// How a kept entry's line must change to be written into a version-3 file.
#[derive(Clone, Copy, Debug)]
pub struct LineEdit<'a> {
    /// The source file's version.
    pub version: u32,
    /// The entry's id (for version 1, the one sessiond assigned).
    pub id: &'a EntryId,
    /// The `parentId` the line must carry.
    pub parent: Option<&'a EntryId>,
    /// For compactions: the `firstKeptEntryId` the line must carry, if any.
    pub first_kept: Option<&'a EntryId>,
}

/// Rewrites one entry line per `edit`, or borrows it unchanged when nothing differs.
/// Errors: the line is not a JSON object any more.
pub fn edit_line<'b>(bytes: &'b [u8], edit: LineEdit<'_>) -> Result<Cow<'b, [u8]>, String> {
    let mut o = RawObject::parse(bytes)?;
    let mut changed = false;
    let is_compaction = o.get_str("type").as_deref() == Some("compaction");
    if edit.version < 2 {
        // pi's migrateV1ToV2: assign id and parentId, then turn the index into an id.
        o.set_value("id", edit.id.as_str());
        o.set("parentId", raw_opt_string(edit.parent.map(EntryId::as_str)));
        if is_compaction
            && o.get("firstKeptEntryIndex").is_some_and(|r| {
                r.get()
                    .starts_with(|c: char| c == '-' || c.is_ascii_digit())
            })
        {
            if let Some(kept) = edit.first_kept {
                o.set_value("firstKeptEntryId", kept.as_str());
            }
            o.remove("firstKeptEntryIndex");
        }
        changed = true;
    } else {
        let current = o.get("parentId");
        let same = match (current, edit.parent) {
            (Some(raw), None) => raw.get() == "null",
            (Some(raw), Some(p)) => raw_str(raw).as_deref() == Some(p.as_str()),
            (None, _) => false,
        };
        if !same {
            o.set("parentId", raw_opt_string(edit.parent.map(EntryId::as_str)));
            changed = true;
        }
    }
    if is_compaction
        && let Some(kept) = edit.first_kept
        && o.get_str("firstKeptEntryId").as_deref() != Some(kept.as_str())
    {
        o.set_value("firstKeptEntryId", kept.as_str());
        changed = true;
    }
    if edit.version < 3 && o.get_str("type").as_deref() == Some("message") {
        // pi's migrateV2ToV3: role hookMessage becomes custom, in place.
        if let Some(msg) = o.get("message")
            && let Ok(mut m) = RawObject::parse(msg.get().as_bytes())
            && m.get_str("role").as_deref() == Some("hookMessage")
        {
            m.set_value("role", "custom");
            let text = m.to_line();
            if let Ok(raw) = RawValue::from_string(text) {
                o.set("message", raw);
                changed = true;
            }
        }
    }
    Ok(if changed {
        Cow::Owned(o.to_line().into_bytes())
    } else {
        Cow::Borrowed(bytes)
    })
}

/// Plans a fork of `tree` at `entry_id`. Errors: `UnknownEntry`, `NotAUserMessage`, and
/// `Io`/`Changed` when a source line cannot be read back.
pub fn plan_fork(
    tree: &Tree,
    source: &dyn LineSource,
    entry_id: &str,
    position: Position,
    header: &NewHeader<'_>,
    uuids: &mut dyn FnMut() -> Uuid,
) -> Result<ForkPlan, ForkError> {
    let idx = tree.find(entry_id).ok_or_else(|| ForkError::UnknownEntry {
        id: entry_id.to_owned(),
    })?;
    let leaf = match position {
        Position::At => Some(idx),
        Position::Before => {
            let node = tree.node(idx);
            if node.entry.kind.role() != Some(&Role::User) {
                return Err(ForkError::NotAUserMessage {
                    id: entry_id.to_owned(),
                });
            }
            node.parent
        }
    };
    let path = tree.path_to(leaf);
    let version = tree.header().version;

    let mut lines = vec![header.line().into_bytes()];
    let mut path_ids = Vec::new();
    let mut dropped_labels = Vec::new();
    let mut rewritten = Vec::new();
    let mut pending_labels: Vec<&EntryId> = Vec::new();
    let mut replacement: HashMap<&EntryId, &EntryId> = HashMap::new();
    let mut parent: Option<&EntryId> = None;
    for &n in &path {
        let entry = &tree.node(n).entry;
        if matches!(entry.kind, EntryKind::Label { .. }) {
            pending_labels.push(&entry.id);
            dropped_labels.push(entry.id.clone());
            continue;
        }
        for label in pending_labels.drain(..) {
            replacement.insert(label, &entry.id);
        }
        let first_kept = match &entry.kind {
            EntryKind::Compaction {
                first_kept_entry_id: Some(kept),
                ..
            } if *kept != entry.id => Some(replacement.get(kept).copied().unwrap_or(kept)),
            EntryKind::Compaction {
                first_kept_entry_id: Some(kept),
                ..
            } => Some(kept),
            _ => None,
        };
        let bytes = render::read_line(tree, n, source)?;
        // Most lines are copied as they are; only parse those the tree says may change.
        let may_change = version < 2
            || (version < 3 && entry.kind.role() == Some(&Role::HookMessage))
            || first_kept.is_some()
            || parent.is_none()
            || entry.parent_id.as_ref() != parent;
        let out = if may_change {
            let edit = LineEdit {
                version,
                id: &entry.id,
                parent,
                first_kept,
            };
            match edit_line(&bytes, edit).map_err(|detail| changed(tree, n, detail))? {
                Cow::Owned(changed) => {
                    rewritten.push(entry.id.clone());
                    changed
                }
                Cow::Borrowed(same) => same.to_vec(),
            }
        } else {
            bytes.into_owned()
        };
        lines.push(out);
        path_ids.push(entry.id.clone());
        parent = Some(&entry.id);
    }

    let kept: HashSet<&str> = path_ids.iter().map(EntryId::as_str).collect();
    let mut taken: HashSet<String> = kept.iter().map(|s| (*s).to_owned()).collect();
    let mut new_labels = Vec::new();
    let mut label_parent = parent.cloned();
    for (target, label) in tree.labels() {
        if !kept.contains(target.as_str()) {
            continue;
        }
        let bytes = render::read_line(tree, label.entry, source)?;
        let o = RawObject::parse(&bytes).map_err(|detail| changed(tree, label.entry, detail))?;
        let id = generate_id(&|s| taken.contains(s), uuids);
        taken.insert(id.as_str().to_owned());
        let mut out = RawObject::new();
        out.push("type", Cow::Owned(raw_string("label")));
        out.push("id", Cow::Owned(raw_string(id.as_str())));
        out.push(
            "parentId",
            Cow::Owned(raw_opt_string(label_parent.as_ref().map(EntryId::as_str))),
        );
        if let Some(ts) = o.get("timestamp") {
            out.push("timestamp", Cow::Borrowed(ts));
        }
        out.push("targetId", Cow::Owned(raw_string(target.as_str())));
        match o.get("label") {
            Some(l) => out.push("label", Cow::Borrowed(l)),
            None => out.push("label", Cow::Owned(raw_string(&label.text))),
        }
        lines.push(out.to_line().into_bytes());
        label_parent = Some(id.clone());
        new_labels.push(id);
    }
    Ok(ForkPlan {
        lines,
        leaf_id: label_parent,
        path_ids,
        dropped_labels,
        new_labels,
        rewritten,
    })
}

impl ForkPlan {
    /// Entries in the new file: the kept path entries and the re-created labels (every line
    /// but the header), what `session/open` of the new file reports as `entryCount`.
    pub fn entry_count(&self) -> usize {
        self.lines.len().saturating_sub(1)
    }
}

fn changed(tree: &Tree, n: NodeIdx, detail: String) -> ForkError {
    ForkError::Line(render::changed(&tree.node(n).entry, &detail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lines::{Item, LineFormat};
    use crate::core::tree::Mode;
    use crate::dialect::pi::Pi;
    use crate::dialect::pi::format::{Expect, Line, LineSpan, parse_line};

    /// Lines held in memory, addressed by line number.
    struct Mem(Vec<String>);
    impl LineSource for Mem {
        fn line(&self, span: LineSpan) -> std::io::Result<Cow<'_, [u8]>> {
            Ok(Cow::Borrowed(self.0[span.line as usize - 1].as_bytes()))
        }
    }

    fn load(lines: &[&str]) -> (Tree, Mem) {
        let span = |i: usize| LineSpan {
            line: i as u32 + 1,
            offset: 0,
            len: lines[i].len() as u32,
        };
        let Ok(Line::Header(h)) = parse_line(lines[0].as_bytes(), span(0), Expect::Header) else {
            panic!("bad header")
        };
        let version = h.version;
        let mut t = Tree::new(h, Mode::Strict);
        for (i, l) in lines.iter().enumerate().skip(1) {
            let item = Pi::classify(l.as_bytes(), span(i), Some(version));
            assert!(matches!(item, Item::Entry(_)), "bad entry {l}");
            Pi::apply(&mut t, item).unwrap();
        }
        Pi::settle(&mut t).unwrap();
        (t, Mem(lines.iter().map(|s| (*s).to_owned()).collect()))
    }

    fn uuids() -> impl FnMut() -> Uuid {
        let mut n = 0u128;
        move || {
            n += 1;
            Uuid::from_u128((0xf0 + n) << 96)
        }
    }

    const HEADER: NewHeader<'static> = NewHeader {
        id: "new",
        timestamp: "T",
        cwd: None,
        parent_session: Some("/src.jsonl"),
    };

    fn text(plan: &ForkPlan) -> Vec<String> {
        plan.lines
            .iter()
            .map(|l| String::from_utf8(l.clone()).unwrap())
            .collect()
    }

    #[test]
    fn labels_on_the_path_are_dropped_rechained_and_recreated() {
        let (tree, src) = load(&[
            r#"{"type":"session","version":3,"id":"s","timestamp":"t"}"#,
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"x"}}"#,
            r#"{"type":"label","id":"L","parentId":"a","timestamp":"2025-01-01T00:00:02Z","targetId":"a","label":"first"}"#,
            r#"{"type":"compaction","id":"c","parentId":"L","timestamp":"2025-01-01T00:00:03Z","summary":"s","firstKeptEntryId":"L","tokensBefore":1}"#,
            r#"{"type":"message","id":"b","parentId":"c","timestamp":"2025-01-01T00:00:04Z","message":{"role":"user","content":"y"}}"#,
        ]);
        let plan = plan_fork(&tree, &src, "b", Position::At, &HEADER, &mut uuids()).unwrap();
        let lines = text(&plan);
        assert_eq!(
            lines[0],
            r#"{"type":"session","version":3,"id":"new","timestamp":"T","parentSession":"/src.jsonl"}"#
        );
        assert_eq!(lines[1], src.0[1]);
        assert_eq!(
            lines[2],
            r#"{"type":"compaction","id":"c","parentId":"a","timestamp":"2025-01-01T00:00:03Z","summary":"s","firstKeptEntryId":"c","tokensBefore":1}"#
        );
        assert_eq!(lines[3], src.0[4]);
        assert_eq!(
            lines[4],
            r#"{"type":"label","id":"000000f1","parentId":"b","timestamp":"2025-01-01T00:00:02Z","targetId":"a","label":"first"}"#
        );
        assert_eq!(plan.dropped_labels, vec![EntryId::new("L")]);
        assert_eq!(plan.rewritten, vec![EntryId::new("c")]);
        assert_eq!(plan.leaf_id, Some(EntryId::new("000000f1")));
    }

    #[test]
    fn before_needs_a_user_message_and_stops_at_its_parent() {
        let (tree, src) = load(&[
            r#"{"type":"session","version":3,"id":"s","timestamp":"t"}"#,
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"x"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"t","message":{"role":"assistant","content":[]}}"#,
        ]);
        let plan = plan_fork(&tree, &src, "a", Position::Before, &HEADER, &mut uuids()).unwrap();
        assert_eq!(plan.lines.len(), 1);
        assert!(matches!(
            plan_fork(&tree, &src, "b", Position::Before, &HEADER, &mut uuids()),
            Err(ForkError::NotAUserMessage { .. })
        ));
        assert!(matches!(
            plan_fork(&tree, &src, "zz", Position::At, &HEADER, &mut uuids()),
            Err(ForkError::UnknownEntry { .. })
        ));
    }

    #[test]
    fn version_one_entries_get_ids_parents_and_kept_ids() {
        let (tree, src) = load(&[
            r#"{"type":"session","id":"s","timestamp":"t"}"#,
            r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"x"}}"#,
            r#"{"type":"message","timestamp":"t","message":{"role":"hookMessage","content":"h"}}"#,
            r#"{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":2,"tokensBefore":1}"#,
        ]);
        let plan = plan_fork(&tree, &src, "00000004", Position::At, &HEADER, &mut uuids()).unwrap();
        let lines = text(&plan);
        assert_eq!(
            lines[1],
            r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"x"},"id":"00000002","parentId":null}"#
        );
        assert_eq!(
            lines[2],
            r#"{"type":"message","timestamp":"t","message":{"role":"custom","content":"h"},"id":"00000003","parentId":"00000002"}"#
        );
        assert_eq!(
            lines[3],
            r#"{"type":"compaction","timestamp":"t","summary":"s","tokensBefore":1,"id":"00000004","parentId":"00000003","firstKeptEntryId":"00000003"}"#
        );
    }
}
