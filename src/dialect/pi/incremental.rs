//! Incremental projection: the projection at one leaf, kept with the little state needed to
//! extend it when entries are appended below that leaf, and pi's token estimate of it.
//!
//! A live session grows at its leaf: each append adds a child of the current leaf. Projecting
//! from scratch walks the whole root-to-leaf path (100,000 entries in a long session) on every
//! request; extending walks only the new entries. The result is always what
//! [`projection::project`] gives for the new leaf (the tests check this entry by entry).
//!
//! Why extending is exact: a node's parent does not change once a batch of lines has
//! settled, so the new leaf's path is the old path plus the new entries. (Only a lenient read
//! relinks a settled node, when a later line repeats its parent's id; callers that keep a
//! projection compare [`Tree::relinks`] and project afresh when it moved.) A new plain entry adds one
//! context item at the end and can change the settings (model, thinking level) and the
//! tool pairing, which are kept as running state. A compaction or context edit among the new
//! entries changes earlier items, so [`LiveProjection::extend`] refuses and the caller
//! projects afresh.

use std::collections::HashMap;

use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::compaction::text_tokens;
use crate::dialect::pi::format::{EntryId, EntryKind};
use crate::dialect::pi::projection::{self, ContextItem, PairingEvent, Projection, ToolPairing};
use crate::dialect::pi::render::{self, LineSource, RenderError};

/// How many entries below the cached leaf an extension walks before it gives up and the
/// caller projects afresh (a batch of appends is usually a handful of entries).
pub const MAX_EXTEND: usize = 1024;

/// A projection that can follow appends, with its token estimate computed lazily.
#[derive(Clone, Debug)]
pub struct LiveProjection {
    projection: Projection,
    /// Target id → the latest context edit among the context entries.
    edits: HashMap<EntryId, NodeIdx>,
    pairing: ToolPairing,
    /// pi's `estimateTokens` summed over the messages of `items[..tokens_counted]`.
    tokens: u64,
    tokens_counted: usize,
}

impl LiveProjection {
    /// Projects the session at `leaf` (see [`projection::project`]).
    pub fn new(tree: &Tree, leaf: Option<NodeIdx>) -> Self {
        let projection = projection::project(tree, leaf);
        let mut edits = HashMap::new();
        let mut pairing = ToolPairing::default();
        for item in &projection.items {
            if let EntryKind::ContextEdit {
                target_id: Some(t), ..
            } = &tree.node(item.node).entry.kind
            {
                edits.insert(t.clone(), item.node);
            }
            pairing.push(tree, item);
        }
        LiveProjection {
            projection,
            edits,
            pairing,
            tokens: 0,
            tokens_counted: 0,
        }
    }

    /// The projection.
    pub fn projection(&self) -> &Projection {
        &self.projection
    }

    /// The leaf this projection is at.
    pub fn leaf(&self) -> Option<NodeIdx> {
        self.projection.leaf
    }

    /// Moves the projection down to `leaf` when the current leaf is an ancestor of it at
    /// most [`MAX_EXTEND`] entries up and no entry in between (`leaf` included) is a
    /// compaction or a context edit. Returns false, leaving the projection unchanged, when
    /// it cannot; then project afresh with [`LiveProjection::new`].
    pub fn extend(&mut self, tree: &Tree, leaf: NodeIdx) -> bool {
        let Some(from) = self.projection.leaf else {
            return false;
        };
        let mut added = Vec::new();
        let mut cur = leaf;
        while cur != from {
            if added.len() == MAX_EXTEND
                || matches!(
                    tree.node(cur).entry.kind,
                    EntryKind::Compaction { .. } | EntryKind::ContextEdit { .. }
                )
            {
                return false;
            }
            added.push(cur);
            match tree.node(cur).parent {
                Some(p) => cur = p,
                None => return false,
            }
        }
        let p = &mut self.projection;
        for &n in added.iter().rev() {
            p.path.push(n);
            projection::apply_setting(tree, n, &mut p.thinking_level, &mut p.model);
            let edit = self.edits.get(tree.node(n).entry.id.as_str()).copied();
            let item = projection::context_item(tree, n, !p.items.is_empty(), edit);
            self.pairing.push(tree, &item);
            p.items.push(item);
        }
        p.leaf = Some(leaf);
        p.diagnostics = self.pairing.diagnostics(tree);
        true
    }

    /// Whether [`LiveProjection::token_estimate`] would read every message of the context
    /// (none is counted yet), so that a caller about to render them all can count them on
    /// the way ([`LiveProjection::set_token_estimate`]) instead.
    pub fn tokens_uncounted(&self) -> bool {
        self.tokens_counted == 0 && !self.projection.items.is_empty()
    }

    /// Records the context's token estimate as summed by a caller that rendered every
    /// message of the projection ([`render::for_each_message`]) and added
    /// [`text_tokens::estimate_tokens_text`] of each: what [`LiveProjection::token_estimate`]
    /// would compute, without reading the lines a second time.
    pub fn set_token_estimate(&mut self, sum: u64) {
        self.tokens = sum;
        self.tokens_counted = self.projection.items.len();
    }

    /// pi's token estimate of the context (the sum of `estimateTokens` over its messages).
    /// Renders only the items not counted yet, so after [`LiveProjection::extend`] it reads
    /// just the new entries' lines. Errors: a line that cannot be read or has changed.
    pub fn token_estimate(
        &mut self,
        tree: &Tree,
        source: &dyn LineSource,
    ) -> Result<u64, RenderError> {
        let mut sum = self.tokens;
        for item in &self.projection.items[self.tokens_counted..] {
            // pi's estimateTokens; a message pi would throw on counts as 0.
            render::item_messages(tree, item, source, &mut |m| {
                sum += text_tokens::estimate_tokens_text(m.get());
                Ok(())
            })?;
        }
        self.tokens = sum;
        self.tokens_counted = self.projection.items.len();
        Ok(sum)
    }
}

/// The projection at the last entry pushed, followed while a session is read: the last
/// entry is pi's default leaf, and in a session that grows as one chain each entry is a child
/// of the one before. A command that reads a session to print its context at the default leaf
/// then has the path, its context items and what the tool pairing needs when the reading
/// ends, gathered entry by entry while each entry was at hand (and the reading waited for the
/// thread pool), instead of in one walk of the whole path afterwards.
///
/// An entry that is a root starts again; an entry whose parent is not the last entry, a
/// compaction or a context edit (which change earlier items), or a link the tree made or
/// broke between entries read before ([`Tree::relinks`]) ends the following, and
/// [`Following::finish`] gives `None`: project at the default leaf then
/// ([`projection::project`]).
#[derive(Debug, Default)]
pub struct Following {
    /// The path to the last entry, root first; empty before the first entry and once the
    /// following ended.
    path: Vec<NodeIdx>,
    /// The context item of each entry of `path`.
    items: Vec<ContextItem>,
    /// The last entries of `path` that set the thinking level and the model.
    settings: (Option<NodeIdx>, Option<NodeIdx>),
    /// The tool-pairing events of `items` in order, their ids copied into `ids` (one run of
    /// memory, read once at the end, instead of a visit to every entry's node).
    events: Vec<Event>,
    ids: String,
    /// [`Tree::relinks`] as of the last entry followed.
    relinks: u64,
    ended: bool,
}

/// A tool-pairing event of [`Following`]: a call (or a result, `result`) by the entry `node`
/// with the call id `ids[start..start + len]`.
#[derive(Debug)]
struct Event {
    node: NodeIdx,
    result: bool,
    start: usize,
    len: usize,
}

impl Following {
    /// Nothing followed yet.
    pub fn new() -> Self {
        Following::default()
    }

    /// Follows `node`, the entry just pushed into `tree` (its last node, with the links the
    /// push made).
    pub fn push(&mut self, tree: &Tree, node: NodeIdx) {
        if self.ended {
            return;
        }
        let n = tree.node(node);
        let kind = &n.entry.kind;
        let relinked = std::mem::replace(&mut self.relinks, tree.relinks()) != tree.relinks();
        let ends = matches!(
            kind,
            EntryKind::Compaction { .. } | EntryKind::ContextEdit { .. }
        );
        match n.parent {
            _ if ends => return self.end(),
            None => {
                self.path.clear();
                self.items.clear();
                self.settings = (None, None);
                self.events.clear();
                self.ids.clear();
            }
            Some(p) if !relinked && self.path.last() == Some(&p) => {}
            Some(_) => return self.end(),
        }
        match projection::sets(kind) {
            (true, _) => self.settings.0 = Some(node),
            (_, true) => self.settings.1 = Some(node),
            _ => {}
        }
        let item = projection::context_item(tree, node, !self.items.is_empty(), None);
        projection::pairing_events(tree, &item, |event| {
            let (result, id) = match event {
                PairingEvent::Call(id) => (false, id.as_str()),
                PairingEvent::Result(id) => (true, id),
            };
            self.events.push(Event {
                node,
                result,
                start: self.ids.len(),
                len: id.len(),
            });
            self.ids.push_str(id);
        });
        self.path.push(node);
        self.items.push(item);
    }

    /// The context items of the path followed so far (none once the following ended).
    pub fn items(&self) -> &[ContextItem] {
        &self.items
    }

    /// Whether the following ended ([`Following::finish`] will give `None`).
    pub fn ended(&self) -> bool {
        self.ended
    }

    fn end(&mut self) {
        *self = Following {
            ended: true,
            ..Following::default()
        };
    }

    /// The projection at the default leaf of `tree` (settled: every entry read), exactly as
    /// [`projection::project`] gives it, when the entries followed are still the path to it.
    /// `None` when the following ended, or the tree linked or unlinked an entry read before
    /// since the last one followed.
    pub fn finish(self, tree: &Tree) -> Option<Projection> {
        if self.ended
            || self.relinks != tree.relinks()
            || self.path.last().copied() != tree.default_leaf()
        {
            return None;
        }
        let mut pairing = ToolPairing::<&str>::with_capacity(self.items.len());
        for e in &self.events {
            let id = self.ids.get(e.start..e.start + e.len).unwrap_or_default();
            if e.result {
                pairing.result(id, e.node, tree);
            } else {
                pairing.call(id, e.node);
            }
        }
        let diagnostics = pairing.diagnostics(tree);
        Some(projection::project_path_items(
            tree,
            self.path,
            self.items,
            self.settings,
            diagnostics,
        ))
    }
}

/// The messages of a [`Following`] context written out entry by entry while the session is
/// read: the inside of the document's `messages` array (the messages joined by commas, each as
/// [`render::for_each_fragment`] renders it: matches pi 1.6.0 `buildSessionContext`), taken
/// from each line while the reader holds it ([`render::item_texts_in_read_line`]). A command
/// that prints the context at the default leaf then needs no second pass over the file.
///
/// Written ahead of knowing it will hold: the writing gives up for good when the following
/// ends or starts again, or a message cannot be rendered from its own line or written, and
/// the caller then drops what was written and renders the context as usual. What is written
/// is the context only when [`MessagesAhead::holds`] says so.
pub struct MessagesAhead<'w> {
    out: &'w mut dyn std::io::Write,
    /// Items of the followed context whose messages are written.
    written: usize,
    /// Whether a message is written (the next one comes after a comma).
    any: bool,
    given_up: bool,
}

impl<'w> MessagesAhead<'w> {
    /// Writes into `out` (bytes of UTF-8 JSON text).
    pub fn new(out: &'w mut dyn std::io::Write) -> Self {
        MessagesAhead {
            out,
            written: 0,
            any: false,
            given_up: false,
        }
    }

    /// Writes the messages of the entry `follow` took last, whose line is `line` as read. Call
    /// it after every [`Following::push`].
    pub fn followed(&mut self, follow: &Following, tree: &Tree, line: &[u8]) {
        if self.given_up {
            return;
        }
        let item = match follow.items() {
            items if !follow.ended() && items.len() == self.written + 1 => &items[self.written],
            _ => return self.given_up = true,
        };
        let (out, any) = (&mut *self.out, &mut self.any);
        let written = render::item_texts_in_read_line(tree, item, line, &mut |message| {
            if std::mem::replace(any, true) {
                out.write_all(b",")?;
            }
            out.write_all(message)
        });
        match written {
            Ok(()) => self.written += 1,
            Err(_) => self.given_up = true,
        }
    }

    /// Whether what was written is exactly the messages of `projection`, the projection
    /// [`Following::finish`] gave.
    pub fn holds(&self, projection: &Projection) -> bool {
        !self.given_up && self.written == projection.items.len()
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use serde_json::json;

    use super::*;
    use crate::core::tree::Mode;
    use crate::dialect::pi::format::{Expect, Line, LineSpan, parse_line};

    /// Lines held in memory, addressed by their spans.
    #[derive(Default)]
    struct MemLines(Vec<u8>);

    impl LineSource for MemLines {
        fn line(&self, span: LineSpan) -> std::io::Result<Cow<'_, [u8]>> {
            let start = span.offset as usize;
            Ok(Cow::Borrowed(&self.0[start..start + span.len as usize]))
        }
    }

    struct Builder {
        tree: Tree,
        lines: MemLines,
        line: u32,
    }

    impl Builder {
        fn new() -> Self {
            let h = r#"{"type":"session","version":3,"id":"s","cwd":"/w"}"#;
            let span = LineSpan {
                line: 1,
                offset: 0,
                len: h.len() as u32,
            };
            let Ok(Line::Header(header)) = parse_line(h.as_bytes(), span, Expect::Header) else {
                panic!("header");
            };
            let mut lines = MemLines::default();
            lines.0.extend_from_slice(h.as_bytes());
            lines.0.push(b'\n');
            Builder {
                tree: Tree::new(header, Mode::Strict),
                lines,
                line: 1,
            }
        }

        fn push(&mut self, v: serde_json::Value) -> NodeIdx {
            let text = v.to_string();
            self.line += 1;
            let span = LineSpan {
                line: self.line,
                offset: self.lines.0.len() as u64,
                len: text.len() as u32,
            };
            self.lines.0.extend_from_slice(text.as_bytes());
            self.lines.0.push(b'\n');
            let Ok(Line::Entry(e)) =
                parse_line(text.as_bytes(), span, Expect::Entry { version: 3 })
            else {
                panic!("entry {text}");
            };
            let n = self.tree.push(e).expect("push");
            self.tree.settle().expect("settle");
            n
        }
    }

    fn fresh_tokens(b: &Builder, leaf: Option<NodeIdx>) -> u64 {
        LiveProjection::new(&b.tree, leaf)
            .token_estimate(&b.tree, &b.lines)
            .expect("tokens")
    }

    /// A session grown one entry at a time, mostly at the leaf and sometimes on a branch,
    /// with every kind of entry that changes a projection: after each append the live
    /// projection, extended or rebuilt, equals a fresh projection, and so does its estimate.
    #[test]
    fn extending_equals_projecting_afresh() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut b = Builder::new();
        let mut live: Option<LiveProjection> = None;
        let mut ids: Vec<String> = Vec::new();
        let (mut extended, mut rebuilt) = (0, 0);
        for i in 0..600 {
            let id = format!("e{i:05}");
            let leaf = b.tree.default_leaf();
            let parent = match (leaf, rng.u8(..20)) {
                (Some(_), 0) if !ids.is_empty() => Some(ids[rng.usize(..ids.len())].clone()),
                (Some(l), _) => Some(b.tree.node(l).entry.id.to_string()),
                (None, _) => None,
            };
            let call = format!("call{}", i / 3);
            let any_id = ids.get(rng.usize(..ids.len().max(1))).cloned();
            let body = match rng.u8(..14) {
                0 | 1 => {
                    json!({"type":"message","message":{"role":"user","content":format!("question {i}")}})
                }
                2 | 3 => {
                    json!({"type":"message","message":{"role":"assistant","provider":"p","model":format!("m{}", i % 3),
                    "content":[{"type":"text","text":"ok"},{"type":"toolCall","id":call,"name":"read","arguments":{"path":"a"}}]}})
                }
                4 | 5 => {
                    json!({"type":"message","message":{"role":"toolResult","toolCallId":format!("call{}", i / 3 - rng.usize(..2)),
                    "content":[{"type":"text","text":"x".repeat(rng.usize(..200))}]}})
                }
                6 => json!({"type":"thinking_level_change","thinkingLevel":"high"}),
                7 => json!({"type":"model_change","provider":"q","modelId":"n"}),
                8 => json!({"type":"label","targetId":any_id,"label":"l"}),
                9 => json!({"type":"branch_summary","fromId":any_id,"summary":"went elsewhere"}),
                10 => json!({"type":"context_edit","targetId":any_id,"replacement":
                    if rng.bool() { json!(null) } else { json!({"content":"[elided]"}) }}),
                11 if ids.len() > 4 => {
                    json!({"type":"compaction","summary":"so far","tokensBefore":1,
                    "firstKeptEntryId": ids[ids.len() - rng.usize(1..5)]})
                }
                12 => {
                    json!({"type":"custom_message","customType":"x","content":"note","display":true})
                }
                _ => {
                    json!({"type":"message","message":{"role":"user","content":[{"type":"text","text":"go on"}]}})
                }
            };
            let mut entry =
                json!({"id": id, "parentId": parent, "timestamp": "2025-01-01T00:00:00.000Z"});
            for (k, v) in body.as_object().expect("object") {
                entry[k] = v.clone();
            }
            let n = b.push(entry);
            ids.push(id);

            // Ask at the new entry (as a client following the session does), or now and
            // then at an older one, with a live projection carried over from the last ask.
            let at = if rng.u8(..10) == 0 { rng.u32(..=n) } else { n };
            let mut l = match live.take() {
                Some(mut l) => {
                    if l.extend(&b.tree, at) {
                        extended += 1;
                        l
                    } else {
                        rebuilt += 1;
                        LiveProjection::new(&b.tree, Some(at))
                    }
                }
                None => LiveProjection::new(&b.tree, Some(at)),
            };
            let fresh = projection::project(&b.tree, Some(at));
            assert_eq!(
                format!("{:?}", l.projection()),
                format!("{fresh:?}"),
                "projection at entry {at} after {i} appends"
            );
            assert_eq!(
                l.token_estimate(&b.tree, &b.lines).expect("tokens"),
                fresh_tokens(&b, Some(at)),
                "token estimate at entry {at}"
            );
            live = Some(l);
        }
        assert!(
            extended > 300 && rebuilt > 50,
            "{extended} extended, {rebuilt} rebuilt"
        );
    }

    #[test]
    fn refuses_compactions_edits_and_other_branches() {
        let mut b = Builder::new();
        let a = b.push(json!({"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}));
        let c = b.push(json!({"type":"message","id":"c","parentId":"a","message":{"role":"user","content":"more"}}));
        let mut live = LiveProjection::new(&b.tree, Some(c));
        let sibling = b.push(json!({"type":"message","id":"s","parentId":"a","message":{"role":"user","content":"other"}}));
        assert!(!live.extend(&b.tree, sibling), "not below the cached leaf");
        assert!(!live.extend(&b.tree, a), "above the cached leaf");
        let edit = b.push(json!({"type":"context_edit","id":"x","parentId":"c","targetId":"a","replacement":null}));
        assert!(
            !live.extend(&b.tree, edit),
            "a context edit changes earlier messages"
        );
        let comp = b.push(json!({"type":"compaction","id":"k","parentId":"c","summary":"s","firstKeptEntryId":"c","tokensBefore":1}));
        assert!(
            !live.extend(&b.tree, comp),
            "a compaction restarts the context"
        );
        assert_eq!(live.leaf(), Some(c), "a refused extension changes nothing");
        let d = b.push(json!({"type":"message","id":"d","parentId":"c","message":{"role":"user","content":"and"}}));
        assert!(live.extend(&b.tree, d));
        assert_eq!(live.projection().items.len(), 3);
    }
}
