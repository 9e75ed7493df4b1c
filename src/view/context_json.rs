//! The JSON document of a context at a leaf, in one place for `sessiond context --json` and
//! the daemon's `session/contextAt`:
//! `{messages, thinkingLevel?, model, entryIds, messageEntryIds, leafId, diagnostics, tornTail}`.
//!
//! Messages are rendered while the document is serialized (into the writer the caller
//! gives, with no intermediate `Value`), and a render failure stops serialization with a
//! typed error ([`ContextJson::take_render_error`]); the CLI serializes into a buffer that it
//! prints only on success. `thinkingLevel` is omitted exactly when pi omits it.

use std::cell::{Cell, RefCell};
use std::io::{self, Write as _};

use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::convert;
use crate::core::ahead;
use crate::core::diagnostics::Diagnostic;
use crate::dialect::pi::Tree;
use crate::dialect::pi::compaction::text_tokens;
use crate::dialect::pi::explain::message_count;
use crate::dialect::pi::preview;
use crate::dialect::pi::projection::{ContextItem, Projection};
use crate::dialect::pi::render::{self, LineSource, RenderError};
use crate::js::jsstr::{self, RestoringWriter};
use crate::storage::reader::TornTail;

/// How much of each message to include.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fields {
    /// No `messages` key; `messageEntryIds` still says which entry each message comes from.
    Ids,
    /// Each message as `{role, preview}` (a one-line preview, see `core::preview`).
    Previews,
    /// Each message as pi builds it, byte-faithful where pi passes it through.
    #[default]
    Full,
}

/// A range of message indexes: `offset` first, at most `limit` (all when `None`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Index of the first message included.
    pub offset: usize,
    /// Maximum number of messages; `None`: all from `offset`.
    pub limit: Option<usize>,
}

/// Whether a document with these `fields` and this `window` renders every message of the
/// context (so that it can count their token estimate on the way): messages are included
/// and the window is all of them.
pub fn renders_every_message(fields: Fields, window: Window) -> bool {
    fields != Fields::Ids && window == Window::default()
}

impl Window {
    fn contains(&self, i: usize) -> bool {
        i >= self.offset && self.limit.is_none_or(|l| i - self.offset < l)
    }
    fn past(&self, i: usize) -> bool {
        self.limit
            .is_some_and(|l| i >= self.offset.saturating_add(l))
    }
}

/// A context document ready to serialize. Render errors surface as a serialization error;
/// [`ContextJson::take_render_error`] gives the typed error back afterwards.
pub struct ContextJson<'a> {
    /// The session tree.
    pub tree: &'a Tree,
    /// The projection at the leaf (pi's `buildSessionContext` path).
    pub projection: &'a Projection,
    /// Where message lines are read from.
    pub source: &'a (dyn LineSource + Sync),
    /// The file's torn tail, reported as `tornTail`.
    pub torn_tail: Option<TornTail>,
    /// Which messages are included.
    pub window: Window,
    /// How much of each message is included.
    pub fields: Fields,
    /// Also sum pi's token estimate of every message rendered ([`ContextJson::counted_tokens`]).
    /// Only a whole window renders every message.
    pub count_tokens: bool,
    /// How [`ContextJson::write_to`] renders every message ahead of writing them.
    pub ahead: render::Ahead,
    counted: Cell<u64>,
    render_error: RefCell<Option<RenderError>>,
}

impl<'a> ContextJson<'a> {
    /// The whole context with full messages (the CLI's document).
    pub fn new(
        tree: &'a Tree,
        projection: &'a Projection,
        source: &'a (dyn LineSource + Sync),
        torn_tail: Option<TornTail>,
    ) -> Self {
        ContextJson {
            tree,
            projection,
            source,
            torn_tail,
            window: Window::default(),
            fields: Fields::Full,
            count_tokens: false,
            ahead: render::AHEAD,
            counted: Cell::new(0),
            render_error: RefCell::new(None),
        }
    }

    /// With [`ContextJson::count_tokens`] set and a whole window, after serializing: pi's
    /// token estimate of the context (`estimateTokens` summed over every message, one pi
    /// would throw on counting 0; matches pi 1.6.0 as
    /// [`crate::dialect::pi::compaction::text_tokens::estimate_tokens_text`] does). `None` when
    /// not counted, or when the window did not cover every message.
    pub fn counted_tokens(&self) -> Option<u64> {
        (self.count_tokens && renders_every_message(self.fields, self.window))
            .then(|| self.counted.get())
    }

    /// The error that stopped serialization while rendering a message, if any.
    pub fn take_render_error(&self) -> Option<RenderError> {
        self.render_error.borrow_mut().take()
    }

    /// Number of messages in the whole context (before windowing).
    pub fn message_count(&self) -> usize {
        self.projection
            .items
            .iter()
            .map(|i| message_count(i.contribution))
            .sum()
    }

    /// The entry id of each message, in message order (before windowing).
    pub fn message_entry_ids(&self) -> impl Iterator<Item = &'a str> + 'a {
        message_entry_ids(self.tree, self.projection)
    }
}

/// The entry id of each message of `projection`, in message order.
fn message_entry_ids<'a>(
    tree: &'a Tree,
    projection: &'a Projection,
) -> impl Iterator<Item = &'a str> + 'a {
    let ids = projection
        .items
        .iter()
        .map(move |i| tree.node(i.node).entry.id.as_str());
    per_message(&projection.items, ids)
}

/// `ids`, one for each item of `items`, each repeated as many times as its item gives
/// messages.
fn per_message<'a>(
    items: &'a [ContextItem],
    ids: impl Iterator<Item = &'a str> + Clone + 'a,
) -> impl Iterator<Item = &'a str> + Clone + 'a {
    items
        .iter()
        .zip(ids)
        .flat_map(|(i, id)| std::iter::repeat_n(id, message_count(i.contribution)))
}

/// An iterator written as a JSON array, without collecting it first.
struct Seq<I>(I);

impl<I> Serialize for Seq<I>
where
    I: Iterator + Clone,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.clone())
    }
}

struct Messages<'c, 'a>(&'c ContextJson<'a>);

impl Serialize for Messages<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let doc = self.0;
        let mut seq = s.serialize_seq(None)?;
        let mut ser_error = None;
        let result = doc.for_each_in_window(|_, message| {
            let element = match doc.fields {
                Fields::Full => seq.serialize_element(message),
                _ => {
                    let value = crate::js::jsstr::parse_value(message.get().as_bytes())
                        .unwrap_or(Value::Null);
                    seq.serialize_element(&serde_json::json!({
                        "role": value.get("role").cloned().unwrap_or(Value::Null),
                        "preview": preview::message_preview(&value),
                    }))
                }
            };
            element.map_err(|e| {
                ser_error = Some(e);
                io::Error::other("serialization failed")
            })
        });
        if let Some(e) = ser_error {
            return Err(e);
        }
        if let Err(e) = result {
            let message = e.to_string();
            *doc.render_error.borrow_mut() = Some(e);
            return Err(S::Error::custom(message));
        }
        seq.end()
    }
}

struct Model<'a>(&'a crate::dialect::pi::projection::ModelRef);

impl Serialize for Model<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(p) = &self.0.provider {
            map.serialize_entry("provider", &**p)?;
        }
        if let Some(id) = &self.0.model_id {
            map.serialize_entry("modelId", &**id)?;
        }
        map.end()
    }
}

impl Serialize for ContextJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let messages = (self.fields != Fields::Ids).then_some(Messages(self));
        self.after_messages().serialize_fields(s, messages)
    }
}

/// The document's fields after `messages` (as an object of their own): they depend on the
/// tree and the projection alone, not on rendering, so they can be written while the
/// messages render.
#[derive(Clone, Copy)]
struct AfterMessages<'a> {
    tree: &'a Tree,
    projection: &'a Projection,
    window: Window,
    torn_tail: Option<TornTail>,
}

impl Serialize for AfterMessages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_fields(s, None)
    }
}

/// How a full document starts: its `messages` array, opened (the messages and the rest
/// follow, [`ContextJson::write_after_messages`]).
pub const MESSAGES_OPEN: &[u8] = b"{\"messages\":[";

/// Closes the `messages` array and writes `rest`, the object of the fields after it:
/// `{"thinkingLevel"...}` goes on as `],"thinkingLevel"...}` (the object always has fields).
fn close_messages<W: io::Write + ?Sized>(out: &mut W, rest: &[u8]) -> serde_json::Result<()> {
    out.write_all(b"],").map_err(serde_json::Error::io)?;
    out.write_all(rest.get(1..).unwrap_or_default())
        .map_err(serde_json::Error::io)
}

/// Contexts of at least this many blocks' worth of entries ([`render::Ahead::block_items`];
/// 4,096 entries by [`render::AHEAD`]) write [`AfterMessages`] on the thread pool while their
/// messages render (200,000 ids take several milliseconds). Tied to the plan so that the
/// tests' small plans take this path too.
const AFTER_MESSAGES_AHEAD_FROM_BLOCKS: usize = 4;

/// The buffer in front of the restoring writer of a document of previews or ids, in bytes.
const RESTORE_BUFFER: usize = 64 << 10;

impl ContextJson<'_> {
    /// Writes the document to `out` as its final JSON text: what `serde_json::to_writer` writes,
    /// with every decoded lone surrogate written back as pi's escape
    /// ([`jsstr::restore_json`]), except that a full message is its JSON text as rendered (as the
    /// file holds it where pi passes it through). A U+FDD0 pair in that text is text pi passes
    /// on, not a decoded lone surrogate: pi 1.6.0 writes what `JSON.parse` read with
    /// `JSON.stringify`, which leaves both characters as they are. So the caller writes the text
    /// as it is, restoring nothing.
    ///
    /// Every message, as written (full fields, the whole window), is rendered ahead on the
    /// thread pool in blocks and written a block at a time ([`render::for_each_fragment`]).
    /// Generic over the writer so that a concrete one (the daemon's buffer) is written without a
    /// dynamic call per piece. Errors: writing `out` failed, or a message could not be rendered (then
    /// [`ContextJson::take_render_error`] gives the typed error).
    pub fn write_to<W: io::Write + ?Sized>(&self, out: &mut W) -> serde_json::Result<()> {
        if self.fields != Fields::Full {
            // Previews and ids are decoded text: all of it is restored, a buffer at a time
            // (not each of the many small pieces serde writes).
            let mut restoring = RestoringWriter::new(&mut *out);
            let mut buffered = io::BufWriter::with_capacity(RESTORE_BUFFER, &mut restoring);
            serde_json::to_writer(&mut buffered, self)?;
            buffered.flush().map_err(serde_json::Error::io)?;
            drop(buffered);
            return restoring
                .into_inner()
                .map(drop)
                .map_err(serde_json::Error::io);
        }
        out.write_all(MESSAGES_OPEN)
            .map_err(serde_json::Error::io)?;
        let after = self.after_messages();
        let written = if self.window == Window::default() {
            self.write_every_message(out, after)
        } else {
            self.write_window(out).map(|()| None)
        };
        let rest = match written {
            Ok(Some(rest)) => rest?,
            Ok(None) => after.restored()?,
            Err(RenderError::Emit(e)) => return Err(serde_json::Error::io(e)),
            Err(e) => {
                let message = e.to_string();
                *self.render_error.borrow_mut() = Some(e);
                return Err(serde_json::Error::custom(message));
            }
        };
        close_messages(out, &rest)
    }

    /// Writes the rest of a full document (every message, the whole window) whose start, its
    /// [`MESSAGES_OPEN`] and then its messages joined by commas, the caller wrote already (the
    /// reader wrote them while it read the session: `reader::open_session_rendering`); the
    /// whole is what [`ContextJson::write_to`] writes. Errors: writing `out` failed.
    pub fn write_after_messages<W: io::Write + ?Sized>(
        &self,
        out: &mut W,
    ) -> serde_json::Result<()> {
        close_messages(out, &self.after_messages().restored()?)
    }

    /// Writes every message, joined by commas, rendering ahead; a long context's
    /// [`AfterMessages`] are serialized on the pool meanwhile and returned (`None`: not
    /// serialized yet).
    fn write_every_message<W: io::Write + ?Sized>(
        &self,
        out: &mut W,
        after: AfterMessages<'_>,
    ) -> Result<Option<serde_json::Result<Vec<u8>>>, RenderError> {
        let estimate = |m: &str| text_tokens::estimate_tokens_text(m);
        let measure: Option<&render::Measure> = self.count_tokens.then_some(&estimate);
        let mut rest = None;
        rayon::in_place_scope(|scope| {
            let from = AFTER_MESSAGES_AHEAD_FROM_BLOCKS.saturating_mul(self.ahead.block_items);
            if self.projection.items.len() >= from && ahead::available() {
                scope.spawn(|_| rest = Some(after.restored()));
            }
            render::for_each_fragment(
                self.tree,
                self.projection,
                self.source,
                self.ahead,
                measure,
                |text, tokens| {
                    self.counted.set(self.counted.get() + tokens);
                    out.write_all(text)
                },
            )
        })?;
        Ok(rest)
    }

    /// Writes the messages within the window, joined by commas, in order.
    fn write_window<W: io::Write + ?Sized>(&self, out: &mut W) -> Result<(), RenderError> {
        let offset = self.window.offset;
        self.for_each_in_window(|i, message| {
            if i > offset {
                out.write_all(b",")?;
            }
            out.write_all(message.get().as_bytes())
        })
    }

    /// Renders the messages in order until the window is past, calling `each` with the index
    /// (in the whole context) and the JSON text of each one within the window, and counting
    /// the token estimate of every message rendered when [`ContextJson::count_tokens`] asks.
    /// Errors: [`render::for_each_message`]'s, `each`'s as [`RenderError::Emit`].
    fn for_each_in_window(
        &self,
        mut each: impl FnMut(usize, &RawValue) -> io::Result<()>,
    ) -> Result<(), RenderError> {
        let window = self.window;
        let mut index = 0usize;
        let mut past = false;
        let rendered = render::for_each_message(self.tree, self.projection, self.source, |m| {
            let i = index;
            index += 1;
            if self.count_tokens {
                let tokens = text_tokens::estimate_tokens_text(m.message.get());
                self.counted.set(self.counted.get() + tokens);
            }
            if window.past(i) {
                past = true;
                return Err(io::Error::other("the window is complete"));
            }
            if !window.contains(i) {
                return Ok(());
            }
            each(i, m.message)
        });
        match rendered {
            Err(RenderError::Emit(_)) if past => Ok(()),
            rendered => rendered,
        }
    }

    /// The document's fields after `messages`.
    fn after_messages(&self) -> AfterMessages<'_> {
        AfterMessages {
            tree: self.tree,
            projection: self.projection,
            window: self.window,
            torn_tail: self.torn_tail,
        }
    }
}

impl AfterMessages<'_> {
    /// These fields as a JSON object's text, with decoded lone surrogates written back as
    /// pi's escapes (an entry id may hold one). The raw `thinkingLevel` and `model` come
    /// through unchanged: they hold a U+FDD0 as its escape (`format::to_owned_raw`).
    fn restored(&self) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec(self).map(jsstr::restore_bytes)
    }

    /// The document as a map, with `messages` first when given.
    fn serialize_fields<S: Serializer>(
        &self,
        s: S,
        messages: Option<Messages<'_, '_>>,
    ) -> Result<S::Ok, S::Error> {
        let tree = self.tree;
        let proj = self.projection;
        let mut map = s.serialize_map(None)?;
        if let Some(messages) = messages {
            map.serialize_entry("messages", &messages)?;
        }
        if let Some(level) = &proj.thinking_level {
            map.serialize_entry::<str, RawValue>("thinkingLevel", level)?;
        }
        map.serialize_entry("model", &proj.model.as_ref().map(Model))?;
        // Each item's node is read once for both lists (a long context's nodes are far
        // apart in memory).
        let entry_ids: Vec<&str> = proj
            .items
            .iter()
            .map(|i| tree.node(i.node).entry.id.as_str())
            .collect();
        map.serialize_entry("entryIds", &entry_ids)?;
        let window = self.window;
        let message_ids = per_message(&proj.items, entry_ids.iter().copied())
            .enumerate()
            .filter(|(i, _)| window.contains(*i))
            .map(|(_, id)| id);
        map.serialize_entry("messageEntryIds", &Seq(message_ids))?;
        map.serialize_entry("leafId", &proj.leaf.map(|l| tree.node(l).entry.id.as_str()))?;
        let diagnostics: Vec<&Diagnostic> =
            tree.diagnostics().iter().chain(&proj.diagnostics).collect();
        map.serialize_entry("diagnostics", &diagnostics)?;
        map.serialize_entry("tornTail", &self.torn_tail.map(convert::torn_tail))?;
        map.end()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::core::ahead::Limit;
    use crate::core::tree::Mode;
    use crate::dialect::pi::projection;
    use crate::dialect::pi::render::{AHEAD, Ahead};
    use crate::storage::reader::{FileLines, open_session};
    use crate::testdata::{pool_of_several, session_files};

    /// Plans that render any context ahead: one entry per block, a few, many.
    const PLANS: [Ahead; 3] = [
        Ahead {
            from_bytes: 0,
            block_bytes: 1,
            block_items: 1,
            limit: Limit {
                items: 1,
                weight: 1,
            },
        },
        Ahead {
            from_bytes: 0,
            block_bytes: 700,
            block_items: 3,
            limit: Limit {
                items: 2,
                weight: 1000,
            },
        },
        Ahead {
            from_bytes: 0,
            block_bytes: 1 << 20,
            block_items: 1024,
            limit: Limit {
                items: 6,
                weight: usize::MAX,
            },
        },
    ];

    /// The document as serde writes it, message by message, and its counted token estimate.
    fn serialized(doc: &ContextJson<'_>) -> (Vec<u8>, Option<u64>) {
        let mut text = Vec::new();
        serde_json::to_writer(&mut text, doc).unwrap();
        (text, doc.counted_tokens())
    }

    /// `text` with every U+FDD0 pair written as a lone surrogate's escape: the final text of
    /// a document ([`ContextJson::write_to`]) and serde's text of it compare equal through this.
    fn restored(text: &[u8]) -> String {
        jsstr::restore_json(&String::from_utf8_lossy(text)).into_owned()
    }

    /// At every leaf of every shipped session that opens, `write_to` rendering ahead (by each
    /// plan) writes the bytes serde writes message by message and counts the same estimate.
    #[test]
    fn rendering_ahead_writes_the_serialized_document() {
        pool_of_several();
        let mut compared = 0;
        for file in session_files() {
            let Ok(session) = open_session::<crate::dialect::pi::Pi>(&file, Mode::Lenient) else {
                continue;
            };
            let lines = FileLines::open(&file).unwrap().read_ahead();
            let tree = &session.tree;
            for leaf in tree.leaves().map(Some).chain([None]) {
                let proj = projection::project(tree, leaf);
                let mut doc = ContextJson::new(tree, &proj, &lines, session.torn_tail);
                doc.count_tokens = true;
                let expected = serialized(&doc);
                for ahead in PLANS.into_iter().chain([AHEAD]) {
                    let mut doc = ContextJson::new(tree, &proj, &lines, session.torn_tail);
                    doc.count_tokens = true;
                    doc.ahead = ahead;
                    let mut text = Vec::new();
                    doc.write_to(&mut text).unwrap();
                    assert_eq!(
                        (restored(&text), doc.counted_tokens()),
                        (restored(&expected.0), expected.1),
                        "{} at {leaf:?} by {ahead:?}",
                        file.display()
                    );
                    compared += 1;
                }
            }
        }
        assert!(compared > 100, "{compared}");
    }

    /// The final text of every kind of document: a message's text stays as the file holds
    /// it (a U+FDD0 pair there is text, as pi writes it back), while decoded strings (an
    /// entry id with a lone surrogate, a preview) have their lone surrogates written back as
    /// escapes.
    #[test]
    fn documents_are_final_text() {
        pool_of_several();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/text/noncharacter-text.jsonl");
        let session = open_session::<crate::dialect::pi::Pi>(&path, Mode::Strict).unwrap();
        let lines = FileLines::open(&path).unwrap();
        let tree = &session.tree;
        let proj = projection::project(tree, tree.default_leaf());
        let text_pair = "Keep \u{FDD0}\u{E000} and";
        let cut = r"cut \ud83d here";
        let id = r#""f3100002\ud800""#;
        let write = |fields: Fields, window: Window, ahead: Ahead| {
            let mut doc = ContextJson::new(tree, &proj, &lines, None);
            (doc.fields, doc.window, doc.ahead) = (fields, window, ahead);
            let mut text = Vec::new();
            doc.write_to(&mut text).unwrap();
            String::from_utf8(text).unwrap()
        };
        let windowed = Window {
            offset: 0,
            limit: Some(2),
        };
        for (window, ahead) in PLANS
            .into_iter()
            .chain([AHEAD])
            .map(|a| (Window::default(), a))
            .chain([(windowed, AHEAD)])
        {
            let text = write(Fields::Full, window, ahead);
            assert!(text.contains(text_pair), "{window:?} {ahead:?}: {text}");
            assert!(text.contains(cut), "{text}");
            assert!(text.contains(id), "{text}");
        }
        let text = write(Fields::Full, windowed, AHEAD);
        assert!(
            text.contains(r#""messageEntryIds":["f3100001","f3100002\ud800"]"#),
            "{text}"
        );
        for fields in [Fields::Previews, Fields::Ids] {
            let text = write(fields, Window::default(), AHEAD);
            assert!(text.contains(id), "{fields:?}: {text}");
        }
    }

    /// A line that changed after the session was read stops rendering ahead with the error
    /// the message-by-message rendering gives, naming that line.
    #[test]
    fn rendering_ahead_reports_a_changed_line() {
        use std::io::Write as _;
        pool_of_several();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        writeln!(
            file,
            r#"{{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}}"#
        )
        .unwrap();
        let mut parent = "null".to_owned();
        for i in 0..50 {
            writeln!(
                file,
                r#"{{"type":"message","id":"e{i}","parentId":{parent},"timestamp":"2025-01-01T00:00:00.000Z","message":{{"role":"user","content":"line {i}"}}}}"#
            )
            .unwrap();
            parent = format!("\"e{i}\"");
        }
        drop(file);
        let session = open_session::<crate::dialect::pi::Pi>(&path, Mode::Strict).unwrap();
        let tree = &session.tree;
        let node = tree
            .nodes()
            .iter()
            .find(|n| n.entry.id.as_str() == "e30")
            .unwrap();
        let span = node.entry.span;
        let handle = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&handle, b"[", span.offset).unwrap();
        let lines = FileLines::open(&path).unwrap();
        let proj = projection::project(tree, tree.default_leaf());
        let doc = ContextJson::new(tree, &proj, &lines, None);
        assert!(serde_json::to_writer(Vec::new(), &doc).is_err());
        let expected = doc.take_render_error().unwrap().to_string();
        assert!(expected.contains("e30"), "{expected}");
        for ahead in PLANS {
            let mut doc = ContextJson::new(tree, &proj, &lines, None);
            doc.ahead = ahead;
            assert!(doc.write_to(&mut Vec::new()).is_err());
            let got = doc.take_render_error().map(|e| e.to_string());
            assert_eq!(got.as_deref(), Some(&*expected), "{ahead:?}");
        }
    }
}
