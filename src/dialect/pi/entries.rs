//! New entries, written the way pi 1.6.0 writes them: `appendLabelChange`, `appendSessionInfo`,
//! `branchWithSummary`, and a generic append for front-ends that use sessiond as their store.
//!
//! Pure: the caller passes the tree, the leaf it is writing at, the timestamp and a source of
//! random UUIDs. Every builder returns one compact JSON line (no newline) whose keys are in pi's
//! order (`type`, `id`, `parentId`, `timestamp`, then the entry's own fields) and that the
//! format probe accepts, or an [`EntryError`] naming what is wrong. Nothing is written here.

use std::borrow::Cow;

use serde_json::value::RawValue;
use thiserror::Error;
use uuid::Uuid;

use crate::core::raw_object::{RawObject, raw_opt_string, raw_string};
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::{self, EntryId, Expect, LineSpan};

/// Why a new entry was refused. Nothing is written when a builder fails.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EntryError {
    /// An id the request names (target, parent, branch point) is not in the session.
    #[error("unknown entry id {id} ({role})")]
    UnknownEntry {
        /// The id as given.
        id: String,
        /// What the id was given as (`parent`, `label target`, ...).
        role: &'static str,
    },
    /// The entry is not a JSON object.
    #[error("the entry is not a JSON object: {detail}")]
    NotAnObject {
        /// What the entry was instead, or the JSON error.
        detail: String,
    },
    /// The entry has no string `type`.
    #[error("the entry has no string \"type\"")]
    MissingType,
    /// A field of a known entry type has the wrong shape.
    #[error("a {entry_type} entry needs {field} to be {expected}")]
    InvalidField {
        /// The entry's `type`.
        entry_type: String,
        /// The field with the wrong shape, as pi names it.
        field: &'static str,
        /// The shape pi relies on.
        expected: &'static str,
    },
    /// The entry names an id that the session already uses.
    #[error("entry id {id} is already used in the session")]
    DuplicateId {
        /// The id already in use.
        id: String,
    },
    /// `parentId` was given twice with different values (in the entry and as a parameter).
    #[error("parentId given both in the entry ({in_entry}) and as a parameter ({param})")]
    ConflictingParent {
        /// The entry's own `parentId`.
        in_entry: String,
        /// The `parentId` parameter.
        param: String,
    },
    /// A `type: "session"` header cannot be appended.
    #[error("a session header cannot be appended as an entry")]
    HeaderNotAllowed,
}

/// What every builder needs: the tree (ids, validation), the writer's leaf (the default
/// parent), the timestamp to write, and random UUIDs for ids.
pub struct EntryContext<'a> {
    /// The session as read; ids and targets are checked against it.
    pub tree: &'a Tree,
    /// The entry the new one is appended after (pi's `leafId`); `None` before the first entry.
    pub leaf: Option<&'a EntryId>,
    /// ISO timestamp, e.g. from [`super::timestamp::now_iso`].
    pub timestamp: &'a str,
    /// A source of random (version 4) UUIDs.
    pub uuids: &'a mut dyn FnMut() -> Uuid,
}

/// A built entry: its id and its line (compact JSON, no newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    /// The new entry's id.
    pub id: EntryId,
    /// The new entry's `parentId` (`None`: a root).
    pub parent_id: Option<EntryId>,
    /// The entry as one line of compact JSON, without its newline.
    pub line: String,
}

/// A new entry id, as pi's `generateId`: the first 8 hex characters of a random UUID, retried
/// up to 100 times while `taken`; then a whole UUID.
pub fn generate_id(taken: &dyn Fn(&str) -> bool, uuids: &mut dyn FnMut() -> Uuid) -> EntryId {
    for _ in 0..100 {
        let u = uuids().to_string();
        let short = &u[..8];
        if !taken(short) {
            return EntryId::new(short);
        }
    }
    EntryId::new(uuids().to_string())
}

fn new_id(cx: &mut EntryContext<'_>) -> EntryId {
    let tree = cx.tree;
    generate_id(&|id| tree.find(id).is_some(), cx.uuids)
}

fn require_entry(tree: &Tree, id: &str, role: &'static str) -> Result<(), EntryError> {
    match tree.find(id) {
        Some(_) => Ok(()),
        None => Err(EntryError::UnknownEntry {
            id: id.to_owned(),
            role,
        }),
    }
}

/// The four leading fields every entry has, in pi's order.
fn head<'a>(
    ty: &str,
    id: &EntryId,
    parent: Option<&EntryId>,
    timestamp: Cow<'a, RawValue>,
) -> RawObject<'a> {
    let mut o = RawObject::new();
    o.push("type", Cow::Owned(raw_string(ty)));
    o.push("id", Cow::Owned(raw_string(id.as_str())));
    o.push(
        "parentId",
        Cow::Owned(raw_opt_string(parent.map(EntryId::as_str))),
    );
    o.push("timestamp", timestamp);
    o
}

fn finish(o: &RawObject<'_>, id: EntryId, parent: Option<&EntryId>) -> NewEntry {
    NewEntry {
        id,
        parent_id: parent.cloned(),
        line: o.to_line(),
    }
}

/// A `label` entry setting (or with `label: None` clearing) the label of `target_id`; matches
/// pi's `appendLabelChange`: `{type, id, parentId: leaf, timestamp, targetId, label?}`.
/// An empty label also clears, as in pi. Errors: `UnknownEntry` for a missing target.
pub fn label(
    cx: &mut EntryContext<'_>,
    target_id: &str,
    label: Option<&str>,
) -> Result<NewEntry, EntryError> {
    require_entry(cx.tree, target_id, "label target")?;
    let id = new_id(cx);
    let mut o = head("label", &id, cx.leaf, Cow::Owned(raw_string(cx.timestamp)));
    o.push("targetId", Cow::Owned(raw_string(target_id)));
    if let Some(text) = label {
        o.push("label", Cow::Owned(raw_string(text)));
    }
    Ok(finish(&o, id, cx.leaf))
}

/// The name pi stores: runs of `\r`/`\n` become one space, then the ends are trimmed
/// (pi's `appendSessionInfo`; `trim` is JavaScript's, which also trims Unicode spaces).
pub fn sanitize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_break = false;
    for c in name.chars() {
        if c == '\r' || c == '\n' {
            if !in_break {
                out.push(' ');
            }
            in_break = true;
        } else {
            out.push(c);
            in_break = false;
        }
    }
    out.trim().to_owned()
}

/// A `session_info` entry naming the session; matches pi's `appendSessionInfo`:
/// `{type, id, parentId: leaf, timestamp, name}` with the name sanitized by [`sanitize_name`].
pub fn session_info(cx: &mut EntryContext<'_>, name: &str) -> Result<NewEntry, EntryError> {
    let id = new_id(cx);
    let mut o = head(
        "session_info",
        &id,
        cx.leaf,
        Cow::Owned(raw_string(cx.timestamp)),
    );
    o.push("name", Cow::Owned(raw_string(&sanitize_name(name))));
    Ok(finish(&o, id, cx.leaf))
}

/// A `branch_summary` entry that starts a branch at `branch_from` (`None`: a new root); matches
/// pi's `branchWithSummary`: `{type, id, parentId: branch_from, timestamp, fromId, summary,
/// details?}` where `fromId` is the leaf being left, or `"root"` when there is none.
/// `details` is raw JSON. Errors: `UnknownEntry` for a missing branch point.
pub fn branch_summary(
    cx: &mut EntryContext<'_>,
    branch_from: Option<&str>,
    summary: &str,
    details: Option<&RawValue>,
) -> Result<NewEntry, EntryError> {
    if let Some(from) = branch_from {
        require_entry(cx.tree, from, "branch point")?;
    }
    let parent = branch_from.map(EntryId::new);
    let id = new_id(cx);
    let mut o = head(
        "branch_summary",
        &id,
        parent.as_ref(),
        Cow::Owned(raw_string(cx.timestamp)),
    );
    o.push(
        "fromId",
        Cow::Owned(raw_string(cx.leaf.map_or("root", EntryId::as_str))),
    );
    o.push("summary", Cow::Owned(raw_string(summary)));
    if let Some(d) = details {
        o.push("details", Cow::Borrowed(d));
    }
    Ok(finish(&o, id, parent.as_ref()))
}

/// The parent a generic append asks for: the writer's leaf, or an explicit id or `null`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParentChoice<'a> {
    /// The current leaf (pi's default for every append).
    Leaf,
    /// This id, or `None` for a new root.
    Explicit(Option<&'a str>),
}

/// A generic entry from a front-end, given as JSON text. sessiond fills what pi fills:
/// `id` (unless the entry brings a string id not used in the session), `parentId` (from
/// `parent`, else the entry's own `parentId`, else the leaf) and `timestamp` (unless given as
/// a string). Keys are reordered to `type, id, parentId, timestamp`, then the entry's other
/// fields in their order, with their bytes untouched.
///
/// Known types are checked for the fields pi relies on (see [`check_shape`]). Errors:
/// `NotAnObject`, `MissingType`, `HeaderNotAllowed`, `InvalidField`, `UnknownEntry` (a parent,
/// target or kept entry that does not exist), `DuplicateId`, `ConflictingParent`.
pub fn append(
    cx: &mut EntryContext<'_>,
    entry_json: &str,
    parent: ParentChoice<'_>,
) -> Result<NewEntry, EntryError> {
    let given = RawObject::parse(entry_json.as_bytes()).map_err(|detail| {
        // Say so when the text is not JSON at all (a shell quoting slip, say).
        let detail = match serde_json::from_str::<serde::de::IgnoredAny>(entry_json) {
            Err(e) => format!("it is not JSON ({e})"),
            Ok(_) => detail,
        };
        EntryError::NotAnObject { detail }
    })?;
    let ty = given.get_str("type").ok_or(EntryError::MissingType)?;
    if ty == "session" {
        return Err(EntryError::HeaderNotAllowed);
    }
    let invalid = |field, expected| EntryError::InvalidField {
        entry_type: ty.to_string(),
        field,
        expected,
    };
    let id = match given.get("id") {
        None => new_id(cx),
        Some(raw) => {
            let id = format::raw_str(raw)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| invalid("id", "a non-empty string"))?;
            if cx.tree.find(&id).is_some() {
                return Err(EntryError::DuplicateId {
                    id: id.into_owned(),
                });
            }
            EntryId::new(id)
        }
    };
    let in_entry = match given.get("parentId") {
        None => None,
        Some(raw) if raw.get() == "null" => Some(None),
        Some(raw) => Some(Some(
            format::raw_str(raw).ok_or_else(|| invalid("parentId", "a string or null"))?,
        )),
    };
    let parent_id: Option<EntryId> = match (parent, in_entry) {
        (ParentChoice::Explicit(p), Some(e)) if p != e.as_deref() => {
            return Err(EntryError::ConflictingParent {
                in_entry: e.as_deref().unwrap_or("null").to_owned(),
                param: p.unwrap_or("null").to_owned(),
            });
        }
        (ParentChoice::Explicit(p), _) => p.map(EntryId::new),
        (ParentChoice::Leaf, Some(e)) => e.as_deref().map(EntryId::new),
        (ParentChoice::Leaf, None) => cx.leaf.cloned(),
    };
    if let Some(p) = &parent_id {
        require_entry(cx.tree, p.as_str(), "parent")?;
    }
    let timestamp = match given.get("timestamp") {
        None => Cow::Owned(raw_string(cx.timestamp)),
        Some(raw) if format::raw_str(raw).is_some() => Cow::Borrowed(raw),
        Some(_) => return Err(invalid("timestamp", "an ISO date string")),
    };
    check_shape(cx.tree, &ty, &id, &given)?;
    let mut o = head(&ty, &id, parent_id.as_ref(), timestamp);
    for (k, v) in given.fields() {
        if !matches!(k, "type" | "id" | "parentId" | "timestamp") {
            o.push(k, Cow::Borrowed(v));
        }
    }
    let line = o.to_line();
    // The line must read back as the entry we mean; this catches anything the checks above
    // missed (a field the probe reads with a shape it cannot use).
    let span = LineSpan {
        line: 0,
        offset: 0,
        len: 0,
    };
    match format::parse_line(line.as_bytes(), span, Expect::Entry { version: 3 }) {
        Ok(format::Line::Irregular(_, p)) => {
            return Err(EntryError::NotAnObject { detail: p.detail });
        }
        Err(p) => return Err(EntryError::NotAnObject { detail: p.detail }),
        Ok(_) => {}
    }
    Ok(NewEntry {
        id,
        parent_id,
        line,
    })
}

/// Checks the fields pi's code relies on for the known entry types:
/// * `message`: `message` is an object with a string `role`;
/// * `label`: `targetId` names an entry; `label` is a string, null or absent;
/// * `session_info`: `name` is a string;
/// * `branch_summary`: `fromId` and `summary` are strings;
/// * `compaction`: `summary` a string, `tokensBefore` a number, `firstKeptEntryId` the new
///   entry's own id or an entry of the session;
/// * `model_change`: `provider` and `modelId` strings; `thinking_level_change`: `thinkingLevel`
///   a string;
/// * `custom`: `customType` a string; `custom_message`: `customType` a string and `content` a
///   string or an array;
/// * `context_edit`: `targetId` names an entry; `replacement` is null or an object whose
///   `content` is a string or an array.
///
/// Other types (`usage`, unknown ones) pass as they are.
pub fn check_shape(
    tree: &Tree,
    ty: &str,
    own_id: &EntryId,
    o: &RawObject<'_>,
) -> Result<(), EntryError> {
    let invalid = |field, expected| EntryError::InvalidField {
        entry_type: ty.to_owned(),
        field,
        expected,
    };
    let string = |field: &'static str| o.get_str(field).ok_or_else(|| invalid(field, "a string"));
    let kind = |raw: Option<&RawValue>| raw.map(|r| r.get().as_bytes().first().copied());
    match ty {
        "message" => {
            let msg = o
                .get("message")
                .and_then(|m| RawObject::parse(m.get().as_bytes()).ok())
                .ok_or_else(|| invalid("message", "an object"))?;
            if msg.get_str("role").is_none() {
                return Err(invalid("message.role", "a string"));
            }
        }
        "label" => {
            let target = string("targetId")?;
            require_entry(tree, &target, "label target")?;
            match kind(o.get("label")) {
                None | Some(Some(b'"' | b'n')) => {}
                _ => return Err(invalid("label", "a string or null")),
            }
        }
        "session_info" => {
            string("name")?;
        }
        "branch_summary" => {
            string("fromId")?;
            string("summary")?;
        }
        "compaction" => {
            string("summary")?;
            match kind(o.get("tokensBefore")) {
                Some(Some(b'-' | b'0'..=b'9')) => {}
                _ => return Err(invalid("tokensBefore", "a number")),
            }
            let kept = string("firstKeptEntryId")?;
            if *kept != *own_id.as_str() {
                require_entry(tree, &kept, "first kept entry")?;
            }
        }
        "model_change" => {
            string("provider")?;
            string("modelId")?;
        }
        "thinking_level_change" => {
            string("thinkingLevel")?;
        }
        "custom" => {
            string("customType")?;
        }
        "custom_message" => {
            string("customType")?;
            match kind(o.get("content")) {
                Some(Some(b'"' | b'[')) => {}
                _ => return Err(invalid("content", "a string or an array")),
            }
        }
        "context_edit" => {
            let target = string("targetId")?;
            require_entry(tree, &target, "context edit target")?;
            match o.get("replacement") {
                Some(r) if r.get() == "null" => {}
                Some(r) => {
                    let rep = RawObject::parse(r.get().as_bytes())
                        .map_err(|_| invalid("replacement", "null or an object"))?;
                    match kind(rep.get("content")) {
                        Some(Some(b'"' | b'[')) => {}
                        _ => return Err(invalid("replacement.content", "a string or an array")),
                    }
                }
                None => return Err(invalid("replacement", "null or an object")),
            }
        }
        _ => {}
    }
    Ok(())
}

/// Checks an entry built by its caller (a compaction with the id it chose) before it is
/// written: one line of JSON that reads back as a version-3 entry with the [`NewEntry`]'s `id`
/// and `parentId`, an id the session does not use yet, and a parent that exists.
/// Errors: `NotAnObject` (not one line, not an entry, or other ids than claimed),
/// `DuplicateId`, `UnknownEntry` (role `parent`).
pub fn check_prebuilt(tree: &Tree, entry: &NewEntry) -> Result<(), EntryError> {
    let invalid = |detail: String| EntryError::NotAnObject { detail };
    if entry.line.contains(['\n', '\r']) {
        return Err(invalid(format!(
            "entry {} is not a single line of JSON",
            entry.id
        )));
    }
    let span = LineSpan {
        line: 0,
        offset: 0,
        len: 0,
    };
    let parsed = match format::parse_line(entry.line.as_bytes(), span, Expect::Entry { version: 3 })
    {
        Ok(format::Line::Entry(e)) => e,
        Ok(format::Line::Irregular(_, p)) => {
            return Err(invalid(format!("entry {}: {}", entry.id, p.detail)));
        }
        Ok(_) => return Err(invalid(format!("entry {} reads as a header", entry.id))),
        Err(p) => return Err(invalid(format!("entry {}: {}", entry.id, p.detail))),
    };
    if parsed.id != entry.id || parsed.parent_id != entry.parent_id {
        return Err(invalid(format!(
            "entry {}: the line says id {} and parentId {}",
            entry.id,
            parsed.id,
            parsed.parent_id.as_ref().map_or("null", EntryId::as_str)
        )));
    }
    if tree.find(entry.id.as_str()).is_some() {
        return Err(EntryError::DuplicateId {
            id: entry.id.to_string(),
        });
    }
    if let Some(p) = &entry.parent_id
        && tree.find(p.as_str()).is_none()
    {
        return Err(EntryError::UnknownEntry {
            id: p.to_string(),
            role: "parent",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::tree::Mode;
    use crate::dialect::pi::format::{Line, parse_line};

    fn tree_of(lines: &[&str]) -> Tree {
        let span = |i: usize| LineSpan {
            line: i as u32 + 1,
            offset: 0,
            len: 0,
        };
        let Ok(Line::Header(h)) = parse_line(lines[0].as_bytes(), span(0), Expect::Header) else {
            panic!("bad header")
        };
        let mut t = Tree::new(h, Mode::Strict);
        for (i, l) in lines.iter().enumerate().skip(1) {
            let Ok(Line::Entry(e)) =
                parse_line(l.as_bytes(), span(i), Expect::Entry { version: 3 })
            else {
                panic!("bad entry")
            };
            t.push(e).unwrap();
        }
        t.settle().unwrap();
        t
    }

    fn fixed_uuids() -> impl FnMut() -> Uuid {
        let mut n = 0u128;
        move || {
            n += 1;
            Uuid::from_u128(n << 96 | 0xabcdef)
        }
    }

    /// Runs `f` with an entry context on [`SESSION`] at `leaf` (an id of it) and `timestamp`,
    /// new ids counting up from `00000001`.
    fn in_session(leaf: Option<&str>, timestamp: &str, f: impl FnOnce(&mut EntryContext<'_>)) {
        let tree = tree_of(SESSION);
        let leaf = leaf.map(EntryId::new);
        let mut u = fixed_uuids();
        let mut cx = EntryContext {
            tree: &tree,
            leaf: leaf.as_ref(),
            timestamp,
            uuids: &mut u,
        };
        f(&mut cx);
    }

    const SESSION: &[&str] = &[
        r#"{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}"#,
    ];

    #[test]
    fn label_matches_pi_shape_and_refuses_missing_target() {
        in_session(Some("aaaaaaaa"), "2025-01-02T00:00:00.000Z", |cx| {
            let e = label(cx, "aaaaaaaa", Some("start")).unwrap();
            assert_eq!(
                e.line,
                r#"{"type":"label","id":"00000001","parentId":"aaaaaaaa","timestamp":"2025-01-02T00:00:00.000Z","targetId":"aaaaaaaa","label":"start"}"#
            );
            let cleared = label(cx, "aaaaaaaa", None).unwrap();
            assert!(!cleared.line.contains("\"label\":"));
            assert_eq!(
                label(cx, "nope", Some("x")),
                Err(EntryError::UnknownEntry {
                    id: "nope".into(),
                    role: "label target"
                })
            );
        });
    }

    #[test]
    fn session_info_folds_newlines_like_pi() {
        assert_eq!(sanitize_name("  a\r\n\nb\nc  "), "a b c");
    }

    #[test]
    fn branch_summary_names_the_leaf_left() {
        in_session(None, "t", |cx| {
            let e = branch_summary(cx, None, "s", None).unwrap();
            assert!(e.line.contains(r#""parentId":null"#) && e.line.contains(r#""fromId":"root""#));
        });
    }

    #[test]
    fn generic_append_fills_and_orders_fields() {
        in_session(Some("aaaaaaaa"), "T", |cx| {
            let e = append(
                cx,
                r#"{"message":{"role":"assistant","content":[]},"type":"message","x":1e3}"#,
                ParentChoice::Leaf,
            )
            .unwrap();
            assert_eq!(
                e.line,
                r#"{"type":"message","id":"00000001","parentId":"aaaaaaaa","timestamp":"T","message":{"role":"assistant","content":[]},"x":1e3}"#
            );
            let mut err = |json: &str, p| append(cx, json, p).unwrap_err();
            assert_eq!(
                err(r#"{"a":1}"#, ParentChoice::Leaf),
                EntryError::MissingType
            );
            assert!(matches!(
                err(
                    r#"{"type":"message","message":{"content":[]}}"#,
                    ParentChoice::Leaf
                ),
                EntryError::InvalidField {
                    field: "message.role",
                    ..
                }
            ));
            assert!(matches!(
                err(
                    r#"{"type":"custom","customType":"x"}"#,
                    ParentChoice::Explicit(Some("zz"))
                ),
                EntryError::UnknownEntry { .. }
            ));
            assert!(matches!(
                err(r#"{"type":"label","targetId":"zz"}"#, ParentChoice::Leaf),
                EntryError::UnknownEntry { .. }
            ));
            assert!(matches!(
                err(r#"{"type":"x","id":"aaaaaaaa"}"#, ParentChoice::Leaf),
                EntryError::DuplicateId { .. }
            ));
        });
    }

    #[test]
    fn generated_ids_avoid_taken_ones() {
        let mut u = fixed_uuids();
        let id = generate_id(&|s| s == "00000001", &mut u);
        assert_eq!(id.as_str(), "00000002");
    }
}
