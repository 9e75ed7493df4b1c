//! The `session/` method handlers. Each one parses its params, resolves the path against
//! the session roots, then sends a single command to the session's owner and awaits the
//! answer (computed by the session's owner, already converted to wire JSON).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tower_lsp_server::jsonrpc::Result as RpcResult;

use crate::core::tree::{Mode, NodeIdx};
use crate::dialect::pi::Tree;
use crate::dialect::pi::explain;
use crate::dialect::pi::projection;
use crate::listing::{ListCache, Listed};
use crate::server::Backend;
use crate::server::error::RpcError;
use crate::server::export_pages;
use crate::server::lossless;
use crate::server::params::{
    CloseParams, CompareBranchesParams, ContextAtParams, EntryParams, ExplainParams, ExportParams,
    FieldsParam, GraphParams, ListParams, OpenParams, SearchParams, TreeParams, VerifyResumeParams,
};
use crate::server::transport::{Raw, raw_result, to_raw};
use crate::session::SessionHandle;
use crate::session::opened::{Opened, PiSession};
use crate::session::owner::Session;
use crate::storage::list;
use crate::storage::reader::{FileLines, OpenError, OpenedSession};
use crate::view::context_json::{self, ContextJson, Fields, Window};
use crate::view::convert::{self, TreeStart};
use crate::view::wire::{EntryResult, ListResult};

/// Default number of nodes in one `session/tree` answer.
const TREE_LIMIT_DEFAULT: usize = 1000;
/// `session/graph`'s default `limit` (rows in a page).
const GRAPH_LIMIT_DEFAULT: usize = 1000;
/// `session/graph`'s largest `limit`.
pub const GRAPH_LIMIT_MAX: usize = 10_000;
/// Largest `limit` of `session/tree`; a larger one is refused with -32602.
pub const TREE_LIMIT_MAX: usize = 10_000;
/// Default depth of one `session/tree` answer.
const TREE_DEPTH_DEFAULT: usize = 64;
/// `session/search` reports `$/progress` when more files than this need reading.
pub const SEARCH_PROGRESS_FROM: usize = 50;
/// Files per `$/progress` report in `session/list`.
const LIST_PROGRESS_EVERY: usize = 200;

pub(super) fn params<P: DeserializeOwned>(
    method: &'static str,
    value: Value,
) -> Result<P, RpcError> {
    serde_json::from_value(value).map_err(|e| RpcError::InvalidParams {
        method,
        detail: e.to_string(),
    })
}

pub(super) fn find(session: &Session, id: &str) -> Result<NodeIdx, RpcError> {
    session
        .opened()
        .find(id)
        .map_err(|unknown| RpcError::UnknownEntry {
            path: session.path().to_owned(),
            unknown,
        })
}

/// The pi session behind `s`; a Claude Code transcript is refused for `operation`
/// (`unsupportedForFormat`, -33021).
pub(super) fn pi_of<'s>(
    s: &'s Session,
    operation: &'static str,
) -> Result<&'s PiSession, RpcError> {
    s.pi().ok_or_else(|| RpcError::UnsupportedForFormat {
        path: s.path().to_owned(),
        format: s.dialect(),
        operation,
    })
}

/// The refusal of `operation` on `s`, whose format does not offer it (`unsupportedForFormat`).
pub(super) fn unsupported(s: &Session, operation: &'static str) -> RpcError {
    RpcError::UnsupportedForFormat {
        path: s.path().to_owned(),
        format: s.dialect(),
        operation,
    }
}

/// The leaf a request names ([`Tree::resolve_leaf`]): absent, the default leaf.
fn leaf(session: &Session, id: Option<&str>) -> Result<Option<NodeIdx>, RpcError> {
    session
        .opened()
        .resolve_leaf(id)
        .map_err(|unknown| RpcError::UnknownEntry {
            path: session.path().to_owned(),
            unknown,
        })
}

pub(super) fn to_value<T: serde::Serialize>(path: &Path, v: &T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e),
    })
}

/// `session/contextAt`'s result for an open session (run by its owner), as a `Value`
/// (see [`context_at_text`]; the daemon sends the text as it is). Public for the benchmarks.
pub fn context_at_result(s: &Session, p: &ContextAtParams) -> Result<Value, RpcError> {
    let text = context_at_text(s, p)?;
    lossless::parse(&text).map_err(|e| RpcError::Io {
        path: s.path().to_owned(),
        source: std::io::Error::other(e),
    })
}

/// `session/contextAt`'s result for an open session (run by its owner), as JSON text: the
/// context document with `messageCount`, `offset`, `tokenEstimate` and `revision` after its
/// fields. Messages pass through as written, and the text is what the transport sends (see
/// [`super::transport::raw_result`]): no `Value` is built for a result that can hold the
/// whole path's messages. The projection and its token estimate come from the session's
/// cache, so a request at a leaf just appended costs the new entries, not the whole path;
/// the first request at a leaf that renders every message counts the estimate as it renders
/// them. Errors: `UnknownEntry` (the leaf), `Render` (a line that cannot be read or has
/// changed), `Io`. Public for the benchmarks.
pub fn context_at_text(s: &Session, p: &ContextAtParams) -> Result<Vec<u8>, RpcError> {
    if let Some(tree) = s.claude() {
        return transcript_context_text(s, tree, p);
    }
    if p.model.is_some() {
        return Err(RpcError::InvalidParams {
            method: "session/contextAt",
            detail: "model applies to Claude Code transcripts only".to_owned(),
        });
    }
    if let Some(tree) = s.codex() {
        return rollout_context_text(s, tree, p);
    }
    let pi = pi_of(s, "session/contextAt")?;
    let tree: &Tree = pi.tree();
    let leaf = leaf(s, p.leaf_id.as_deref())?;
    let render_err = |source| RpcError::Render {
        path: s.path().to_owned(),
        source,
    };
    // Cached per leaf and extended on appends: no walk of the whole path and no
    // re-rendering of every message per request.
    let mut live = pi.context(leaf);
    let fields = match p.fields {
        FieldsParam::Ids => Fields::Ids,
        FieldsParam::Previews => Fields::Previews,
        FieldsParam::Full => Fields::Full,
    };
    let window = Window {
        offset: p.offset,
        limit: p.limit,
    };
    // The first request at a leaf that renders every message counts the estimate on the way;
    // any other reads only the messages not counted yet.
    let known = if context_json::renders_every_message(fields, window) && live.tokens_uncounted() {
        None
    } else {
        Some(live.token_estimate(tree, s.source()).map_err(render_err)?)
    };
    let proj = live.projection();
    let mut doc = ContextJson::new(tree, proj, s.source(), s.torn_tail());
    doc.window = window;
    doc.fields = fields;
    doc.count_tokens = known.is_none();
    let io_err = |e: serde_json::Error| RpcError::Io {
        path: s.path().to_owned(),
        source: std::io::Error::other(e),
    };
    // Into a buffer the transport has written before: a result of megabytes lands in memory
    // already mapped rather than in a fresh allocation of its size.
    let mut text = crate::server::transport::spare_buffer();
    if let Err(e) = doc.write_to(&mut text) {
        return Err(match doc.take_render_error() {
            Some(r) => render_err(r),
            None => io_err(e),
        });
    }
    let message_count = doc.message_count();
    let counted = doc.counted_tokens();
    drop(doc);
    let token_estimate = match (known, counted) {
        (Some(known), _) => known,
        (None, Some(counted)) => {
            live.set_token_estimate(counted);
            counted
        }
        (None, None) => live.token_estimate(tree, s.source()).map_err(render_err)?,
    };
    // The document is one object: its closing brace gives way to the fields added here,
    // which it does not have.
    if text.last() == Some(&b'}') {
        text.pop();
        let more = serde_json::to_string(&json!({
            "messageCount": message_count,
            "offset": p.offset,
            "tokenEstimate": token_estimate,
            "revision": convert::revision(s.revision()),
        }))
        .map_err(io_err)?;
        if text.last() != Some(&b'{') {
            text.push(b',');
        }
        text.extend_from_slice(&more.as_bytes()[1..]);
    }
    Ok(text)
}

/// The 0-based line of the leaf `id` names in a Codex rollout (an ordinal or `line:N`), or of
/// its last line without one. Errors: `UnknownEntry`.
fn rollout_line(
    s: &Session,
    tree: &crate::dialect::codex::Tree,
    id: Option<&str>,
) -> Result<Option<usize>, RpcError> {
    let n = match id {
        None => crate::core::describe::Describe::default_leaf(tree),
        Some(id) => Some(tree.lookup(id).map_err(|unknown| RpcError::UnknownEntry {
            path: s.path().to_owned(),
            unknown,
        })?),
    };
    Ok(n.map(|n| tree.node(n).entry.span.line as usize - 1))
}

/// The thread of the open rollout `s` as one tree of files
/// ([`crate::dialect::codex::thread::Thread`]), read now: only files inside the session's roots
/// are looked for. Errors: `Io`.
pub(super) fn rollout_thread(
    s: &Session,
) -> Result<crate::dialect::codex::thread::Thread, RpcError> {
    let admits = |p: &Path| s.roots().is_none_or(|r| r.admits(p));
    crate::dialect::codex::thread::Thread::read_admitted(s.path(), Mode::Lenient, &admits).map_err(
        |e| RpcError::Io {
            path: s.path().to_owned(),
            source: std::io::Error::other(e.to_string()),
        },
    )
}

/// The node a leaf id names in a thread's tree (an id of the open file, or `<tag>:<id>` of
/// another file of the thread), or the open file's last line. Errors: `UnknownEntry`.
pub(super) fn thread_leaf(
    s: &Session,
    thread: &crate::dialect::codex::thread::Thread,
    id: Option<&str>,
) -> Result<Option<NodeIdx>, RpcError> {
    match id {
        None => Ok(thread.last_node(thread.own)),
        Some(id) => thread
            .tree
            .lookup(id)
            .map(Some)
            .map_err(|unknown| RpcError::UnknownEntry {
                path: s.path().to_owned(),
                unknown,
            }),
    }
}

/// A Codex thread's files could not be read or resolved.
fn lineage_error(s: &Session, e: crate::dialect::codex::lineage::LineageError) -> RpcError {
    RpcError::Io {
        path: s.path().to_owned(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// `session/contextAt`'s result for a Codex rollout
/// ([`crate::dialect::codex::leaf_replay::Replay`]): the `input` items Codex sends when it resumes
/// at the leaf, windowed by `offset`/`limit` (`fields` does not apply: items are returned
/// whole), with the thread's chain of files, `messageCount`, `offset` and `revision`.
fn rollout_context_text(
    s: &Session,
    tree: &crate::dialect::codex::Tree,
    p: &ContextAtParams,
) -> Result<Vec<u8>, RpcError> {
    use crate::dialect::codex::context::index_admitted;
    use crate::dialect::codex::leaf_replay::Replay;
    // A leaf of another file of the thread (`<tag>:<id>`, as `session/tree` names it) is
    // replayed in that file, as Codex resumes that fork or segment.
    let (file, line, leaf_id) = match p.leaf_id.as_deref() {
        Some(id) if tree.lookup(id).is_err() && id.contains(':') => {
            let thread = rollout_thread(s)?;
            let node = thread_leaf(s, &thread, Some(id))?;
            match node.map(|n| thread.origin[n as usize]) {
                Some((f, l)) => (thread.files[f].path.clone(), Some(l), Some(id.to_owned())),
                None => (s.path().to_owned(), None, None),
            }
        }
        id => {
            let line = rollout_line(s, tree, id)?;
            let leaf_id = line.and_then(|l| {
                tree.nodes()
                    .iter()
                    .find(|n| n.entry.span.line as usize == l + 1)
                    .map(|n| n.entry.id.as_str().to_owned())
            });
            (s.path().to_owned(), line, leaf_id)
        }
    };
    let index = index_admitted(s.path(), &|p| s.roots().is_none_or(|r| r.admits(p)));
    let mut doc = Replay::messages_at(&index, &file, line)
        .map_err(|e| lineage_error(s, e))?
        .document(leaf_id);
    let total = doc.messages.len();
    let start = p.offset.min(total);
    let end = p
        .limit
        .map_or(total, |l| start.saturating_add(l).min(total));
    doc.messages.truncate(end);
    doc.messages.drain(..start);
    // Serialized straight from the document (no second tree of values: a rollout's context
    // can be tens of megabytes).
    #[derive(serde::Serialize)]
    struct Paged<'d> {
        #[serde(flatten)]
        doc: &'d crate::dialect::codex::context::Context,
        offset: usize,
        revision: Value,
    }
    serde_json::to_vec(&Paged {
        doc: &doc,
        offset: p.offset,
        revision: json!(convert::revision(s.revision())),
    })
    .map_err(|e| RpcError::Io {
        path: s.path().to_owned(),
        source: std::io::Error::other(e),
    })
}

/// `session/explain`'s result for a Codex rollout ([`crate::dialect::codex::context::explain`]).
fn rollout_explain(
    s: &Session,
    tree: &crate::dialect::codex::Tree,
    p: &ExplainParams,
) -> Result<Value, RpcError> {
    let target = rollout_line(s, tree, Some(&p.entry_id))?.unwrap_or(0);
    let line = rollout_line(s, tree, p.leaf_id.as_deref())?;
    let index = crate::dialect::codex::context::index_admitted(s.path(), &|p| {
        s.roots().is_none_or(|r| r.admits(p))
    });
    let ex = crate::dialect::codex::context::explain(&index, s.path(), target, line)
        .map_err(|e| lineage_error(s, e))?;
    let mut value = to_value(s.path(), &ex)?;
    if let Value::Object(map) = &mut value {
        map.insert("revision".into(), json!(convert::revision(s.revision())));
    }
    Ok(value)
}

/// `session/explain`'s result for a Claude Code transcript ([`crate::dialect::claude::explain`]):
/// the explanation with `format` and `revision`. `entryId` may be `line:N` (a bookkeeping line
/// has no uuid). Errors: `UnknownEntry`, `Io`.
fn transcript_explain(
    s: &Session,
    tree: &crate::dialect::claude::Tree,
    p: &ExplainParams,
) -> Result<Value, RpcError> {
    use crate::dialect::claude::explain::{Target, explain};
    let target = match p.entry_id.strip_prefix("line:").map(str::parse::<u32>) {
        Some(Ok(line)) => Target::Line(line),
        _ => Target::Node(find(s, &p.entry_id)?),
    };
    let io = |e: String| RpcError::Io {
        path: s.path().to_owned(),
        source: std::io::Error::other(e),
    };
    let Some(leaf) = leaf(s, p.leaf_id.as_deref())? else {
        return Err(io(
            "the transcript has no leaf Claude Code would continue from".into(),
        ));
    };
    let options = crate::view::transcript::options(p.model.as_deref());
    let ex = explain(tree, s.source(), leaf, target, &options).map_err(|e| io(e.to_string()))?;
    let mut value = to_value(s.path(), &ex)?;
    value["format"] = json!("claude-code");
    value["revision"] = json!(convert::revision(s.revision()));
    Ok(value)
}

/// `session/contextAt`'s result for a Claude Code transcript: the context document
/// ([`crate::view::transcript::context_document`]) with `messages` windowed and shaped by
/// `offset`, `limit` and `fields` as for pi, then `messageCount`, `offset` and `revision`.
/// Errors: `UnknownEntry` (the leaf), `Io` (a line of the path cannot be read or changed).
fn transcript_context_text(
    s: &Session,
    tree: &crate::dialect::claude::Tree,
    p: &ContextAtParams,
) -> Result<Vec<u8>, RpcError> {
    let io = |e: String| RpcError::Io {
        path: s.path().to_owned(),
        source: std::io::Error::other(e),
    };
    let Some(leaf) = leaf(s, p.leaf_id.as_deref())? else {
        return Err(io(
            "the transcript has no leaf Claude Code would continue from".into(),
        ));
    };
    let options = crate::view::transcript::options(p.model.as_deref());
    let mut ctx = crate::dialect::claude::context::context(tree, s.source(), leaf, &options)
        .map_err(|e| io(e.to_string()))?;
    // The messages are moved into the answer, never copied: the document is made without them.
    let messages = std::mem::take(&mut ctx.messages);
    let session_id = convert::claude_session_id(s.path());
    let mut doc = crate::view::transcript::context_document(session_id, tree, s.torn_tail(), &ctx);
    let count = messages.len();
    let start = p.offset.min(count);
    let end = p
        .limit
        .map_or(count, |l| start.saturating_add(l).min(count));
    let window = messages.into_iter().skip(start).take(end - start);
    match p.fields {
        FieldsParam::Full => doc["messages"] = Value::Array(window.collect()),
        FieldsParam::Previews => {
            doc["messages"] = window
                .map(|mut m| {
                    let preview =
                        crate::dialect::claude::preview::content_preview(m.get("content"));
                    let role = m.get_mut("role").map_or(Value::Null, Value::take);
                    Value::Object(Map::from_iter([
                        ("role".into(), role),
                        ("preview".into(), Value::String(preview)),
                    ]))
                })
                .collect()
        }
        FieldsParam::Ids => {
            if let Value::Object(map) = &mut doc {
                map.remove("messages");
            }
        }
    }
    doc["messageCount"] = json!(count);
    doc["offset"] = json!(p.offset);
    doc["revision"] = json!(convert::revision(s.revision()));
    let mut text = crate::server::transport::spare_buffer();
    serde_json::to_writer(&mut text, &doc).map_err(|e| io(e.to_string()))?;
    // Decoded lone surrogates go back out as the escapes the file holds.
    Ok(lossless::restore(text))
}

/// `session/entry`'s result for an open session (run by its owner), as the JSON text the
/// transport sends ([`super::transport::raw_result`]): `{id, line, offset, entry, raw,
/// revision}`. A line of valid UTF-8 that is a JSON object (every line pi writes) is its own
/// `entry`, written as the file holds it (as `contextAt` passes messages through), and the
/// same bytes as a JSON string are `raw`: no `Value` is built and serialized again. Any other
/// line (one that is not UTF-8, or that changed on disk since it was read) goes through
/// [`lossless::parse`] as before: `entry` is then what `JSON.parse` makes of it, or `null`.
/// Errors: `UnknownEntry`, `Io` (the line cannot be read). Public for the benchmarks.
pub fn entry_text(s: &Session, id: String) -> Result<Vec<u8>, RpcError> {
    let n = find(s, &id)?;
    let span = s.opened().span(n);
    let io_err = |source| RpcError::Io {
        path: s.path().to_owned(),
        source,
    };
    let bytes = s.source().line(span).map_err(io_err)?;
    let revision = convert::revision(s.revision());
    let as_written = std::str::from_utf8(&bytes).ok().filter(|text| {
        text.trim_start().starts_with('{')
            && !crate::js::jsstr::exceeds_depth(text.as_bytes(), crate::js::jsstr::VALUE_DEPTH)
            && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
    });
    let to_io = |e: serde_json::Error| io_err(std::io::Error::other(e));
    let Some(line) = as_written else {
        let entry = lossless::parse(&bytes).unwrap_or(Value::Null);
        let raw = String::from_utf8_lossy(&bytes).into_owned();
        let result = EntryResult {
            id,
            line: span.line,
            offset: span.offset,
            entry,
            raw,
            revision,
        };
        let mut value = result.into_value();
        value["format"] = json!(s.dialect().as_str());
        let text = serde_json::to_vec(&value).map_err(to_io)?;
        return Ok(lossless::restore(text));
    };
    // The fields in the order `EntryResult` declares them. The request's id may hold a lone
    // surrogate, decoded as the client sent it: its text is restored as every result's is.
    let mut head = serde_json::to_vec(&json!({"id": id, "line": span.line, "offset": span.offset}))
        .map_err(to_io)?;
    head.pop();
    let mut text = lossless::restore(head);
    text.reserve(2 * line.len() + 96);
    text.extend_from_slice(b",\"entry\":");
    text.extend_from_slice(line.as_bytes());
    text.extend_from_slice(b",\"raw\":");
    serde_json::to_writer(&mut text, line).map_err(to_io)?;
    text.extend_from_slice(b",\"revision\":");
    serde_json::to_writer(&mut text, &revision).map_err(to_io)?;
    text.extend_from_slice(b",\"format\":");
    serde_json::to_writer(&mut text, s.dialect().as_str()).map_err(to_io)?;
    text.push(b'}');
    Ok(text)
}

/// A session that is not open, read once, strictly, in its format, from one descriptor opened
/// without following a symlink and checked to be inside the roots (as the owner opens a
/// session), with the reader of its lines.
enum Closed {
    Pi(OpenedSession<crate::dialect::pi::Pi>, FileLines),
    Claude(OpenedSession<crate::dialect::claude::Claude>, FileLines),
    /// A Codex rollout: its thread's files as one tree, read now.
    Codex(Box<crate::dialect::codex::thread::Thread>),
}

/// Reads a session that is not open ([`Closed`]), in the format its first line tells.
fn read_closed_any(
    path: &Path,
    roots: &crate::session::roots::Roots,
    operation: &'static str,
) -> Result<Closed, RpcError> {
    use crate::storage::reader::{open_session_from, sniff_file};
    let open_err = |e| RpcError::Session(crate::session::SessionError::Open(e));
    let file = crate::session::owner::open_within_roots(path, roots).map_err(open_err)?;
    let read = file.try_clone().map_err(|source| {
        open_err(OpenError::Io {
            path: path.to_owned(),
            source,
        })
    })?;
    Ok(match sniff_file(path, &file).map_err(open_err)? {
        crate::dialect::Dialect::Pi => Closed::Pi(
            open_session_from(path, read, Mode::Strict).map_err(open_err)?,
            FileLines::new(file),
        ),
        crate::dialect::Dialect::Claude => Closed::Claude(
            open_session_from(path, read, Mode::Strict).map_err(open_err)?,
            FileLines::new(file),
        ),
        crate::dialect::Dialect::Codex => {
            let _ = operation;
            // Strict for the file asked for, as the other formats' closed reads.
            open_session_from::<crate::dialect::codex::Codex>(path, read, Mode::Strict)
                .map_err(open_err)?;
            Closed::Codex(Box::new(
                crate::dialect::codex::thread::Thread::read_admitted(path, Mode::Lenient, &|p| {
                    roots.admits(p)
                })
                .map_err(|e| RpcError::Io {
                    path: path.to_owned(),
                    source: std::io::Error::other(e.to_string()),
                })?,
            ))
        }
    })
}

fn collect_closed(
    path: &Path,
    leaf_id: Option<&str>,
    roots: &crate::session::roots::Roots,
) -> Result<(crate::dialect::Dialect, crate::core::verify::Collected), RpcError> {
    let unknown = |unknown: crate::core::tree::UnknownId| RpcError::UnknownEntry {
        path: path.to_owned(),
        unknown,
    };
    match read_closed_any(path, roots, "session/verifyResume")? {
        Closed::Pi(session, lines) => {
            let leaf = session.tree.resolve_leaf(leaf_id).map_err(unknown)?;
            crate::dialect::pi::verify::collect(&session.tree, leaf, &lines)
                .map(|c| (crate::dialect::Dialect::Pi, c))
                .map_err(|source| RpcError::Render {
                    path: path.to_owned(),
                    source,
                })
        }
        Closed::Claude(session, lines) => {
            let tree = &session.tree;
            let leaf = match leaf_id {
                Some(id) => Some(tree.lookup(id).map_err(unknown)?),
                None => crate::dialect::claude::default_leaf(tree),
            };
            transcript_collect(path, tree, leaf, &lines)
                .map(|c| (crate::dialect::Dialect::Claude, c))
        }
        Closed::Codex(thread) => {
            let leaf = match leaf_id {
                Some(id) => Some(thread.tree.lookup(id).map_err(unknown)?),
                None => thread.last_node(thread.own),
            };
            Ok((
                crate::dialect::Dialect::Codex,
                crate::dialect::codex::verify::collect(&thread, leaf, &thread.lines()),
            ))
        }
    }
}

/// `session/export`'s document for a Codex thread ([`crate::view::export::codex`]): the
/// history to the leaf through the thread's files. Errors: `UnknownEntry`, `Render`.
fn rollout_export_result(
    path: &Path,
    thread: &crate::dialect::codex::thread::Thread,
    leaf_id: Option<&str>,
    options: &crate::view::export::Options,
) -> Result<Made, RpcError> {
    let leaf = match leaf_id {
        Some(id) => Some(
            thread
                .tree
                .lookup(id)
                .map_err(|unknown| RpcError::UnknownEntry {
                    path: path.to_owned(),
                    unknown,
                })?,
        ),
        None => thread.last_node(thread.own),
    };
    let e = crate::view::export::codex::export(thread, leaf, &thread.lines(), options).map_err(
        |source| RpcError::Render {
            path: path.to_owned(),
            source,
        },
    )?;
    Ok((e, leaf.map(|l| thread.tree.node(l).entry.id.to_string())))
}

/// What verification needs of a Claude Code transcript at `leaf`
/// ([`crate::dialect::claude::verify::collect`]). Errors: `Io` (a line cannot be read back).
fn transcript_collect(
    path: &Path,
    tree: &crate::dialect::claude::Tree,
    leaf: Option<NodeIdx>,
    source: &dyn crate::core::source::LineSource,
) -> Result<crate::core::verify::Collected, RpcError> {
    crate::dialect::claude::verify::collect(tree, leaf, source).map_err(|e| RpcError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })
}

/// `session/export`'s document for a tree read by its owner or just now: the exported
/// document and its counts.
fn export_result(
    path: &Path,
    tree: &Tree,
    source: &dyn crate::dialect::pi::render::LineSource,
    leaf_id: Option<&str>,
    options: &crate::view::export::Options,
) -> Result<Made, RpcError> {
    let leaf = tree
        .resolve_leaf(leaf_id)
        .map_err(|unknown| RpcError::UnknownEntry {
            path: path.to_owned(),
            unknown,
        })?;
    let e = crate::view::export::export(tree, leaf, source, options).map_err(|source| {
        RpcError::Render {
            path: path.to_owned(),
            source,
        }
    })?;
    Ok((e, leaf.map(|l| tree.node(l).entry.id.to_string())))
}

/// `session/export`'s document for a Claude Code transcript read by its owner or just now:
/// the branch to the leaf with the subagents it started (their files opened with `open`).
fn transcript_export_result(
    path: &Path,
    tree: &crate::dialect::claude::Tree,
    source: &dyn crate::core::source::LineSource,
    leaf_id: Option<&str>,
    options: &crate::view::export::Options,
    open: crate::storage::subagents::Opener<'_>,
) -> Result<Made, RpcError> {
    use crate::view::export::claude::{Subagent, export};
    let leaf = match leaf_id {
        Some(id) => Some(tree.lookup(id).map_err(|unknown| RpcError::UnknownEntry {
            path: path.to_owned(),
            unknown,
        })?),
        None => crate::dialect::claude::default_leaf(tree),
    };
    let files = crate::storage::subagents::read(path, open);
    let subs: Vec<Subagent<'_>> = files.iter().map(|f| Subagent::of(path, f)).collect();
    let id = convert::claude_session_id(path).unwrap_or_default();
    let e = export(tree, leaf, source, &id, &subs, options).map_err(|source| RpcError::Render {
        path: path.to_owned(),
        source,
    })?;
    Ok((e, leaf.map(|l| tree.node(l).entry.id.to_string())))
}

/// An exported document and the leaf it was exported to.
type Made = (crate::view::export::Exported, Option<String>);

/// The first page `session/export` answers with for a document just made (kept in `kept` when
/// pages follow). Run it off the runtime.
fn first_page(
    path: &Path,
    kept: &export_pages::Kept,
    key: export_pages::Key,
    made: Made,
    page: (usize, usize),
    options: &crate::view::export::Options,
) -> Result<Raw, RpcError> {
    let (exported, leaf_id) = made;
    let doc = std::sync::Arc::new(export_pages::Document::new(key, leaf_id, exported));
    let (raw, more) = doc.page(path, page.0, page.1, options)?;
    kept.after_page(&doc, more);
    Ok(raw)
}

impl Backend {
    pub(super) fn resolve(&self, path: &Path) -> Result<PathBuf, RpcError> {
        Ok(self.roots().resolve(path)?)
    }

    pub(super) async fn open_session(&self, path: &Path) -> Result<SessionHandle, RpcError> {
        let real = self.resolve(path)?;
        Ok(self.registry.get(&real).await?)
    }

    /// Runs `f` on the session's owner and flattens the two layers of errors.
    pub(super) async fn ask<R: Send + 'static>(
        &self,
        path: &Path,
        f: impl FnOnce(&Session) -> Result<R, RpcError> + Send + 'static,
    ) -> Result<R, RpcError> {
        let handle = self.open_session(path).await?;
        handle.query(f).await?
    }

    /// `session/open {path, allowCorrupt?}`.
    pub async fn open(&self, p: Value) -> RpcResult<Value> {
        let p: OpenParams = params("session/open", p)?;
        let roots = self.roots();
        let real = roots.resolve(&p.path).map_err(RpcError::from)?;
        let mode = Mode::allowing_corrupt(p.allow_corrupt);
        let (handle, opening) = self
            .registry
            .open_held(&real, mode, &roots)
            .await
            .map_err(RpcError::from)?;
        let path = real.clone();
        let result = handle
            .answer_open(move |s| to_value(&path, &convert::open_result(s)))
            .await;
        // Requests waiting for this open go once its answer is made: they are answered after
        // it, as if the client had waited for it.
        drop(opening);
        let result = result.map_err(RpcError::from)??;
        Ok(result)
    }

    /// `session/close {path}`.
    pub async fn close(&self, p: Value) -> RpcResult<Value> {
        let p: CloseParams = params("session/close", p)?;
        let real = self.resolve(&p.path)?;
        self.registry.close(&real).await.map_err(RpcError::from)?;
        Ok(json!({ "path": real.to_string_lossy() }))
    }

    /// `session/tree {path, fromId? | childrenOf? | after?, depth?, limit?}`. Errors: -32602
    /// for more than one start or a `limit` outside 1..=10000, -33004 for a start that names no
    /// entry.
    pub async fn tree(&self, p: Value) -> RpcResult<Value> {
        let p: TreeParams = params("session/tree", p)?;
        let depth = p.depth.unwrap_or(TREE_DEPTH_DEFAULT);
        let limit = p.limit.unwrap_or(TREE_LIMIT_DEFAULT);
        if !(1..=TREE_LIMIT_MAX).contains(&limit) {
            return Err(RpcError::InvalidParams {
                method: "session/tree",
                detail: format!("limit must be between 1 and {TREE_LIMIT_MAX}, got {limit}"),
            }
            .into());
        }
        let starts = [&p.from_id, &p.children_of, &p.after]
            .iter()
            .filter(|s| s.is_some())
            .count();
        if starts > 1 {
            return Err(RpcError::InvalidParams {
                method: "session/tree",
                detail: "give at most one of fromId, childrenOf and after".into(),
            }
            .into());
        }
        Ok(self
            .ask(&p.path, move |s| {
                let start_at = |find: &dyn Fn(&str) -> Result<NodeIdx, RpcError>| {
                    Ok::<_, RpcError>(match (&p.from_id, &p.children_of, &p.after) {
                        (Some(id), _, _) => TreeStart::At(find(id)?),
                        (_, Some(id), _) => TreeStart::ChildrenOf(find(id)?),
                        (_, _, Some(id)) => TreeStart::After(find(id)?),
                        _ => TreeStart::Roots,
                    })
                };
                let result = if let Opened::Codex(_) = s.opened() {
                    // The thread's files as one tree, read now beside the owner's file, with
                    // what `sessiond tree --json` says of the thread.
                    let thread = rollout_thread(s)?;
                    let start =
                        start_at(&|id| Ok(thread_leaf(s, &thread, Some(id))?.unwrap_or_default()))?;
                    let report = crate::dialect::codex::report::report(
                        &thread.index,
                        s.path(),
                        Some(&thread),
                    );
                    convert::thread_tree_page(
                        s,
                        &thread,
                        start,
                        depth,
                        limit,
                        report.json["thread"].clone(),
                    )
                } else {
                    convert::tree_page(s, start_at(&|id| find(s, id))?, depth, limit)
                };
                let mut page = to_value(s.path(), &result)?;
                page["format"] = json!(s.dialect().as_str());
                Ok(page)
            })
            .await?)
    }

    /// `session/entry {path, id}`: the entry's line, as [`entry_text`] writes it.
    pub async fn entry(&self, p: Value) -> RpcResult<Value> {
        let p: EntryParams = params("session/entry", p)?;
        // One line's work: the owner answers it on the runtime's thread (`Cost::Line`).
        let handle = self.open_session(&p.path).await?;
        let text = handle
            .query_line(move |s| entry_text(s, p.id))
            .await
            .map_err(RpcError::from)??;
        Ok(raw_result(Raw::new(text)))
    }

    /// `session/contextAt {path, leafId?, offset?, limit?, fields?}`.
    pub async fn context_at(&self, p: Value) -> RpcResult<Value> {
        let p: ContextAtParams = params("session/contextAt", p)?;
        let path = p.path.clone();
        let text = self.ask(&path, move |s| context_at_text(s, &p)).await?;
        Ok(raw_result(Raw::new(text)))
    }

    /// `session/explain {path, entryId, leafId?}`.
    pub async fn explain(&self, p: Value) -> RpcResult<Value> {
        let p: ExplainParams = params("session/explain", p)?;
        let path = p.path.clone();
        Ok(self
            .ask(&path, move |s| {
                if let Some(tree) = s.claude() {
                    return transcript_explain(s, tree, &p);
                }
                if p.model.is_some() {
                    return Err(RpcError::InvalidParams {
                        method: "session/explain",
                        detail: "model applies to Claude Code transcripts only".to_owned(),
                    });
                }
                if let Some(tree) = s.codex() {
                    return rollout_explain(s, tree, &p);
                }
                let target = find(s, &p.entry_id)?;
                let leaf = leaf(s, p.leaf_id.as_deref())?;
                let tree = pi_of(s, "session/explain")?.tree();
                let proj = projection::project(tree, leaf);
                // A compaction or branch summary is audited: its span read again.
                let ex = explain::explain_with_audit(tree, &proj, target, s.source()).map_err(
                    |source| match source {
                        crate::dialect::pi::compaction::CompactionError::Render(source) => {
                            RpcError::Render {
                                path: s.path().to_owned(),
                                source,
                            }
                        }
                        source => RpcError::Compact(crate::compact::CompactError::Compaction {
                            path: s.path().to_owned(),
                            source,
                        }),
                    },
                )?;
                let mut value = to_value(s.path(), &ex)?;
                if let Value::Object(map) = &mut value {
                    map.insert("revision".into(), json!(convert::revision(s.revision())));
                }
                Ok(value)
            })
            .await?)
    }

    /// `session/compareBranches {path, leafA, leafB, model?}`: two leaves compared
    /// ([`crate::dialect::pi::compare`], [`crate::dialect::claude::compare`]) in the document
    /// `sessiond diff --json` prints ([`crate::view::compare::document`]), with `revision`.
    /// Off the runtime whatever the session's size: both contexts and both sides' lines are
    /// read. Errors: -33004 for a leaf that names no entry, -33006 for a line that cannot be
    /// read again, -32602 for `model` on a pi session.
    pub async fn compare_branches(&self, p: Value) -> RpcResult<Value> {
        let p: CompareBranchesParams = params("session/compareBranches", p)?;
        let handle = self.open_session(&p.path).await?;
        let home = std::env::var("HOME").ok();
        Ok(handle
            .query_waiting(move |s| {
                let io = |e: String| RpcError::Io {
                    path: s.path().to_owned(),
                    source: std::io::Error::other(e),
                };
                if let Opened::Codex(_) = s.opened() {
                    if p.model.is_some() {
                        return Err(RpcError::InvalidParams {
                            method: "session/compareBranches",
                            detail: "model applies to Claude Code transcripts only".to_owned(),
                        });
                    }
                    // Branches are the thread's other files: both leaves in its tree.
                    let thread = rollout_thread(s)?;
                    let a = thread_leaf(s, &thread, Some(&p.leaf_a))?.unwrap_or(0);
                    let b = thread_leaf(s, &thread, Some(&p.leaf_b))?.unwrap_or(0);
                    let cmp =
                        crate::dialect::codex::compare::compare(&thread, &thread.lines(), a, b)
                            .map_err(|e| io(e.to_string()))?;
                    let mut doc =
                        crate::view::compare::document(&cmp, s.torn_tail(), Some("codex"))
                            .map_err(|e| io(e.to_string()))?;
                    doc["revision"] = json!(convert::revision(s.revision()));
                    return to_raw(s.path(), &doc);
                }
                let a = find(s, &p.leaf_a)?;
                let b = find(s, &p.leaf_b)?;
                let mut doc = if let Some(tree) = s.claude() {
                    let options = crate::view::transcript::options(p.model.as_deref());
                    let cmp =
                        crate::dialect::claude::compare::compare(tree, s.source(), a, b, &options)
                            .map_err(|e| io(e.to_string()))?;
                    crate::view::compare::document(&cmp, s.torn_tail(), Some("claude-code"))
                } else {
                    if p.model.is_some() {
                        return Err(RpcError::InvalidParams {
                            method: "session/compareBranches",
                            detail: "model applies to Claude Code transcripts only".to_owned(),
                        });
                    }
                    let tree = pi_of(s, "session/compareBranches")?.tree();
                    let options = crate::dialect::pi::compare::Options {
                        home: home.as_deref(),
                    };
                    let cmp =
                        crate::dialect::pi::compare::compare(tree, s.source(), a, b, &options)
                            .map_err(|source| RpcError::Render {
                                path: s.path().to_owned(),
                                source,
                            })?;
                    crate::view::compare::document(&cmp, s.torn_tail(), None)
                }
                .map_err(|e| io(e.to_string()))?;
                doc["revision"] = json!(convert::revision(s.revision()));
                to_raw(s.path(), &doc)
            })
            .await
            .map_err(RpcError::from)
            .and_then(|r| r)
            .map(raw_result)?)
    }

    /// `session/graph {path, leafId?, offset?, limit?}`: a page of the branch graph
    /// ([`crate::view::graph`]) with the context at the leaf highlighted: the nodes of rows
    /// `offset..offset+limit` and their text form (what `sessiond graph --json` prints for the
    /// whole graph, plus the revision). Paged like `session/tree`, so one wide node cannot make
    /// one reply of hundreds of megabytes; only the page's previews are read. Errors: -33005,
    /// -33004 for an unknown `leafId`, -32602 for a `limit` outside 1 to 10000.
    pub async fn graph(&self, p: Value) -> RpcResult<Value> {
        let p: GraphParams = params("session/graph", p)?;
        let limit = p.limit.unwrap_or(GRAPH_LIMIT_DEFAULT);
        if !(1..=GRAPH_LIMIT_MAX).contains(&limit) {
            return Err(RpcError::InvalidParams {
                method: "session/graph",
                detail: format!("limit must be between 1 and {GRAPH_LIMIT_MAX}, got {limit}"),
            }
            .into());
        }
        let offset = p.offset.unwrap_or(0);
        let rows = offset..offset.saturating_add(limit);
        // Off the runtime whatever the file's size: the layout grows with the entries (20,000
        // children are a file of 3 MB), and the page is serialized there too.
        let handle = self.open_session(&p.path).await?;
        Ok(handle
            .query_waiting(move |s| {
                use crate::view::graph::{Lens, build_rows};
                let revision = Some(convert::revision(s.revision()));
                let page = match s.opened() {
                    Opened::Codex(_) => {
                        // The thread's files as one tree: forks and revert segments are its
                        // branches, read now beside the owner's file.
                        let thread = rollout_thread(s)?;
                        let leaf = thread_leaf(s, &thread, p.leaf_id.as_deref())?;
                        let lens = Lens::codex(&thread, leaf);
                        let g = build_rows(&thread.tree, &lens, &thread.lines(), rows.clone());
                        convert::graph_page(s.dialect(), &thread.tree, &g, rows, revision)
                    }
                    Opened::Pi(pi) => {
                        let leaf = leaf(s, p.leaf_id.as_deref())?;
                        let tree = pi.tree();
                        let g = build_rows(tree, &Lens::pi(tree, leaf), s.source(), rows.clone());
                        convert::graph_page(s.dialect(), tree, &g, rows, revision)
                    }
                    Opened::Claude(t) => {
                        let leaf = leaf(s, p.leaf_id.as_deref())?;
                        let tree = &t.tree;
                        let id = convert::claude_session_id(s.path()).unwrap_or_default();
                        let lens = Lens::claude(tree, s.source(), leaf, id).with_subagents(
                            tree,
                            crate::listing::subagent_of(s.path()),
                            crate::listing::subagents_of(s.path()),
                        );
                        let g = build_rows(tree, &lens, s.source(), rows.clone());
                        convert::graph_page(s.dialect(), tree, &g, rows, revision)
                    }
                };
                to_raw(s.path(), &page)
            })
            .await
            .map_err(RpcError::from)
            .and_then(|r| r)
            .map(raw_result)?)
    }

    /// `session/verifyResume {path, leafId?, cwd?}`: the leaf checked against the world now
    /// ([`crate::dialect::pi::verify`]); the result is the [`crate::core::verify::Report`]. An open
    /// session is read from its owner's tree; a closed one is read once, strictly, without
    /// being opened. The file, git and `PATH` work runs on the blocking pool; git runs nothing
    /// the repository configures ([`crate::verify`]). Errors: -33004 for an unknown `leafId`,
    /// -32602 for a relative `cwd`, the open errors of `session/open` for a closed file.
    pub async fn verify_resume(&self, p: Value) -> RpcResult<Value> {
        let p: VerifyResumeParams = params("session/verifyResume", p)?;
        let real = self.resolve(&p.path)?;
        // A relative directory would be taken against the daemon's own working directory.
        if let Some(d) = p.cwd.as_deref().filter(|d| !d.is_absolute()) {
            return Err(RpcError::InvalidParams {
                method: "session/verifyResume",
                detail: format!("cwd must be an absolute directory, got {}", d.display()),
            }
            .into());
        }
        let options = crate::core::verify::Options {
            cwd: p
                .cwd
                .as_deref()
                .map(|d| crate::paths::absolute(d).to_string_lossy().into_owned()),
        };
        let leaf_id = p.leaf_id;
        let collected = match self.registry.get(&real).await {
            Ok(handle) => handle
                .query(move |s| {
                    let leaf_of = |s| leaf(s, leaf_id.as_deref());
                    let collected = match s.opened() {
                        Opened::Pi(pi) => {
                            crate::dialect::pi::verify::collect(pi.tree(), leaf_of(s)?, s.source())
                                .map_err(|source| RpcError::Render {
                                    path: s.path().to_owned(),
                                    source,
                                })
                        }
                        Opened::Claude(t) => {
                            transcript_collect(s.path(), &t.tree, leaf_of(s)?, s.source())
                        }
                        Opened::Codex(_) => {
                            let thread = rollout_thread(s)?;
                            let leaf = thread_leaf(s, &thread, leaf_id.as_deref())?;
                            Ok(crate::dialect::codex::verify::collect(
                                &thread,
                                leaf,
                                &thread.lines(),
                            ))
                        }
                    };
                    collected.map(|c| (s.dialect(), c))
                })
                .await
                .map_err(RpcError::from)??,
            Err(_) => {
                let path = real.clone();
                let roots = self.roots();
                tokio::task::spawn_blocking(move || {
                    collect_closed(&path, leaf_id.as_deref(), &roots)
                })
                .await
                .map_err(|e| RpcError::Io {
                    path: real.clone(),
                    source: std::io::Error::other(e),
                })??
            }
        };
        let (format, collected) = collected;
        let path = real.clone();
        let report = tokio::task::spawn_blocking(move || {
            crate::verify::evaluate_collected(collected, &path, &options)
        })
        .await
        .map_err(|e| RpcError::Io {
            path: real.clone(),
            source: std::io::Error::other(e),
        })?;
        let mut value = to_value(&real, &report)?;
        value["format"] = json!(format.as_str());
        Ok(value)
    }

    /// `session/export {path, leafId?, format?, redact?, maxOutputBytes?, offset?, limit?}`:
    /// the branch to the leaf as a Markdown or HTML document ([`crate::view::export`]), in
    /// pages of at most `limit` bytes ([`export_pages`]): the document is made for the page at
    /// offset 0 and kept for the pages after it while the file is unchanged (made again
    /// otherwise, with another `documentId`). An open session is read from its owner's tree; a
    /// closed one is read once, strictly, without being opened. Errors: -32602 for an unknown
    /// `format`, a `limit` outside 1 to 16 MiB or an `offset` that starts no character of the
    /// document, -33004 for an unknown `leafId`, the open errors of `session/open` for a
    /// closed file.
    pub async fn export(&self, p: Value) -> RpcResult<Value> {
        let p: ExportParams = params("session/export", p)?;
        let format = match p.format.as_deref() {
            None => crate::view::export::Format::Markdown,
            Some(f) => {
                crate::view::export::Format::parse(f).ok_or_else(|| RpcError::InvalidParams {
                    method: "session/export",
                    detail: format!("format must be \"md\" or \"html\", got {f:?}"),
                })?
            }
        };
        let limit = p.limit.unwrap_or(export_pages::LIMIT_DEFAULT);
        if !(1..=export_pages::LIMIT_MAX).contains(&limit) {
            return Err(RpcError::InvalidParams {
                method: "session/export",
                detail: format!(
                    "limit must be between 1 and {} bytes, got {limit}",
                    export_pages::LIMIT_MAX
                ),
            }
            .into());
        }
        let offset = p.offset.unwrap_or(0);
        let real = self.resolve(&p.path)?;
        let options = crate::view::export::Options {
            format,
            redact: p.redact.unwrap_or(true),
            max_output_bytes: p
                .max_output_bytes
                .unwrap_or(crate::view::export::DEFAULT_MAX_OUTPUT_BYTES),
            file_name: real
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        };
        let leaf_id = p.leaf_id;
        let key = export_pages::Key::new(&real, leaf_id.as_deref(), &options);
        let kept = self.export_pages.clone();
        // A later page of the document kept: cut from it, off the runtime (a page is megabytes).
        if offset > 0
            && let Some(doc) = kept.get(&key)
        {
            let path = real.clone();
            return Ok(tokio::task::spawn_blocking(move || {
                let (raw, more) = doc.page(&path, offset, limit, &options)?;
                kept.after_page(&doc, more);
                Ok::<_, RpcError>(raw)
            })
            .await
            .map_err(|e| RpcError::Io {
                path: real.clone(),
                source: std::io::Error::other(e),
            })
            .and_then(|r| r)
            .map(raw_result)?);
        }
        let page = (offset, limit);
        let roots = self.roots();
        match self.registry.get(&real).await {
            // Off the runtime whatever the session's size: the work grows with the document.
            Ok(handle) => Ok(handle
                .query_waiting(move |s| {
                    let made = match s.opened() {
                        Opened::Pi(pi) => export_result(
                            s.path(),
                            pi.tree(),
                            s.source(),
                            leaf_id.as_deref(),
                            &options,
                        ),
                        Opened::Claude(t) => transcript_export_result(
                            s.path(),
                            &t.tree,
                            s.source(),
                            leaf_id.as_deref(),
                            &options,
                            &|p| crate::session::owner::open_within_roots(p, &roots),
                        ),
                        Opened::Codex(_) => {
                            let thread = rollout_thread(s)?;
                            rollout_export_result(s.path(), &thread, leaf_id.as_deref(), &options)
                        }
                    }?;
                    first_page(s.path(), &kept, key, made, page, &options)
                })
                .await
                .map_err(RpcError::from)
                .and_then(|r| r)
                .map(raw_result)?),
            Err(_) => {
                let path = real.clone();
                Ok(tokio::task::spawn_blocking(move || {
                    let open = |p: &Path| crate::session::owner::open_within_roots(p, &roots);
                    let made = match read_closed_any(&path, &roots, "session/export")? {
                        Closed::Pi(session, lines) => export_result(
                            &path,
                            &session.tree,
                            &lines,
                            leaf_id.as_deref(),
                            &options,
                        ),
                        Closed::Claude(session, lines) => transcript_export_result(
                            &path,
                            &session.tree,
                            &lines,
                            leaf_id.as_deref(),
                            &options,
                            &open,
                        ),
                        Closed::Codex(thread) => {
                            rollout_export_result(&path, &thread, leaf_id.as_deref(), &options)
                        }
                    }?;
                    first_page(&path, &kept, key, made, page, &options)
                })
                .await
                .map_err(|e| RpcError::Io {
                    path: real.clone(),
                    source: std::io::Error::other(e),
                })
                .and_then(|r| r)
                .map(raw_result)?)
            }
        }
    }

    /// `session/search {query, roots?, limit?, cursor?, roles?, agent?, pathContains?, after?,
    /// before?, thinking?, workDoneToken?}`: brings the index up to date with the files under
    /// the roots (new, grown, rewritten and deleted sessions, pi's and Claude Code's;
    /// [`crate::search`]), reporting `$/progress` under `workDoneToken` while more than
    /// [`SEARCH_PROGRESS_FROM`] files are read, then searches it. Errors: -32602 for a
    /// date, cursor, agent or limit that cannot be used, or a root outside the session roots;
    /// -33006 when the index cannot be opened or written.
    pub async fn search(&self, p: Value) -> RpcResult<Value> {
        let p: SearchParams = params("session/search", p)?;
        let invalid = |detail: String| RpcError::InvalidParams {
            method: "session/search",
            detail,
        };
        let limit = p.limit.unwrap_or(50);
        if !(1..=1000).contains(&limit) {
            return Err(invalid(format!("limit must be between 1 and 1000, got {limit}")).into());
        }
        let offset = match &p.cursor {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .map_err(|_| invalid(format!("{c:?} is not a cursor from a previous page")))?,
        };
        let date = |s: &Option<String>| -> Result<Option<i64>, RpcError> {
            let Some(s) = s else { return Ok(None) };
            let full = if s.len() == 10 {
                format!("{s}T00:00:00.000Z")
            } else {
                s.clone()
            };
            crate::js::timestamp::parse_iso(&full)
                .map(Some)
                .ok_or_else(|| invalid(format!("{s:?} is not a date (YYYY-MM-DD or ISO 8601)")))
        };
        let after_ms = date(&p.after)?;
        let before_ms = date(&p.before)?;
        let agent = match &p.agent {
            None => None,
            Some(a) => Some(
                crate::dialect::Dialect::from_name(a)
                    .ok_or_else(|| invalid(format!("agent {a:?} is none of pi, claude-code")))?,
            ),
        };
        let roots = match &p.roots {
            Some(rs) => rs
                .iter()
                .map(|r| self.resolve(r))
                .collect::<Result<Vec<_>, _>>()?,
            None => self.roots().dirs().to_vec(),
        };
        let query = crate::search::SearchQuery {
            text: p.query,
            roots: roots.clone(),
            limit,
            offset,
            roles: p.roles.unwrap_or_default(),
            agent,
            path_contains: p.path_contains,
            after_ms,
            before_ms,
            thinking: p.thinking,
        };
        let index = self.search.clone();
        let live = self.search_live.clone();
        let dir = self.index_dir.clone();
        let archive = self.archive_dir();
        let archive_view = self.archive_view.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, usize)>();
        let task = tokio::task::spawn_blocking(move || {
            // With an archive, the archived sessions the roots no longer offer are searched
            // too, from their view (crate::archive::view), kept across searches; a failing
            // archive only leaves them out.
            let (mut roots, mut query) = (roots, query);
            let view = archive.and_then(|a| {
                use crate::archive::view::{ViewSync, cache_beside, view_dir};
                let vdir = view_dir(&cache_beside(&dir), &a);
                let mut kept = archive_view
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let sync = match &mut *kept {
                    Some(s) if s.is_of(&a, &vdir) => s,
                    slot => slot.insert(ViewSync::new(&a, &vdir)),
                };
                sync.sync(&roots)
                    .map_err(|e| tracing::warn!("search: the archive is left out: {e}"))
                    .ok()
            });
            if let Some(v) = &view {
                roots.push(v.dir.clone());
                query.roots.push(v.dir.clone());
                live.mark(v.changed.iter().cloned());
            }
            let mut guard = index
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let idx = match &mut *guard {
                Some(idx) => idx,
                slot @ None => {
                    // The daemon keeps one writer across updates (see crate::search).
                    let mut idx = crate::search::SearchIndex::open(&dir)?;
                    idx.keep_writer(true);
                    slot.insert(idx)
                }
            };
            let report = live.prepare(idx, &roots, &mut |done, total| {
                let _ = tx.send((done, total));
            })?;
            let mut found = idx.search(&query)?;
            if let Some(v) = &view {
                v.relabel(&mut found.hits);
            }
            Ok::<_, crate::search::SearchError>((report, found, idx.files(), idx.dir().to_owned()))
        });
        let mut progress = None;
        while let Some((done, total)) = rx.recv().await {
            if progress.is_none()
                && total > SEARCH_PROGRESS_FROM
                && let Some(token) = p.work_done_token.clone()
            {
                progress = Some(
                    self.client
                        .progress(token, "Indexing sessions")
                        .with_percentage(0)
                        .begin()
                        .await,
                );
            }
            if let Some(pr) = &progress
                && (done % 50 == 0 || done == total)
            {
                pr.report_with_message(
                    format!("{done}/{total} files"),
                    u32::try_from(done * 100 / total.max(1)).unwrap_or(100),
                )
                .await;
            }
        }
        if let Some(pr) = progress {
            pr.finish().await;
        }
        let dir = self.index_dir.clone();
        let (report, found, files, dir) = task
            .await
            .map_err(|e| RpcError::Io {
                path: dir.clone(),
                source: std::io::Error::other(e),
            })?
            .map_err(|e| match e {
                crate::search::SearchError::Query { .. } => invalid(e.to_string()),
                other => RpcError::Io {
                    path: dir.clone(),
                    source: std::io::Error::other(other.to_string()),
                },
            })?;
        Ok(json!({
            "hits": found.hits,
            "total": found.total,
            "nextCursor": found.next_cursor,
            "index": {"dir": dir, "files": files, "update": report},
        }))
    }

    /// `session/list {root?, workDoneToken?}`.
    pub async fn list(&self, p: Value) -> RpcResult<Value> {
        let p: ListParams = params("session/list", p)?;
        let roots = self.roots();
        // The root asked for, else every session root (pi's and Claude Code's alike).
        let listed_roots: Vec<PathBuf> = match &p.root {
            Some(r) => vec![self.resolve(r)?],
            None => roots.dirs().to_vec(),
        };
        let Some(root) = listed_roots.first().cloned() else {
            return Err(RpcError::InvalidParams {
                method: "session/list",
                detail: "no session root is configured".into(),
            }
            .into());
        };
        let scan_roots = listed_roots.clone();
        // Each file once: a root may lie inside another.
        let files = tokio::task::spawn_blocking(move || {
            let mut files: Vec<_> = scan_roots
                .iter()
                .flat_map(|r| list::session_files_with_metadata(r))
                .collect();
            files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            files.dedup_by(|a, b| a.0 == b.0);
            files
        })
        .await
        .unwrap_or_default();
        let progress = match p.work_done_token {
            Some(token) if files.len() > LIST_PROGRESS_EVERY => Some(
                self.client
                    .progress(token, "Listing sessions")
                    .with_percentage(0)
                    .begin()
                    .await,
            ),
            _ => None,
        };
        let mut sessions = Vec::with_capacity(files.len());
        let mut skipped = Vec::new();
        let mut pending = Vec::new();
        let total = files.len().max(1);
        for (i, chunk) in files.chunks(LIST_PROGRESS_EVERY).enumerate() {
            let chunk = chunk.to_vec();
            let cache = self.list_cache.clone();
            let cache_file = self.list_cache_file.clone();
            let read = tokio::task::spawn_blocking(move || {
                let mut guard = cache.lock().unwrap_or_else(PoisonError::into_inner);
                let cache = guard.get_or_insert_with(|| ListCache::load(&cache_file));
                let listed = cache.list_found(&chunk);
                chunk
                    .into_iter()
                    .map(|(f, _)| f)
                    .zip(listed)
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
            for (path, listed) in read {
                match listed {
                    Listed::Session(s) => sessions.push(*s),
                    Listed::Pending => pending.push(path),
                    Listed::Skipped(_) => skipped.push(path),
                }
            }
            if let Some(progress) = &progress {
                let done = ((i + 1) * LIST_PROGRESS_EVERY).min(files.len());
                progress
                    .report_with_message(
                        format!("{done}/{} files", files.len()),
                        u32::try_from(done * 100 / total).unwrap_or(100),
                    )
                    .await;
            }
        }
        if let Some(progress) = progress {
            progress.finish().await;
        }
        {
            let cache = self.list_cache.clone();
            let cache_file = self.list_cache_file.clone();
            let seen: HashSet<PathBuf> = files.iter().map(|(f, _)| f.clone()).collect();
            let under = listed_roots.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let mut guard = cache.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(cache) = guard.as_mut() {
                    for root in &under {
                        cache.retain_under(root, &seen);
                    }
                    if let Err(e) = cache.save(&cache_file) {
                        tracing::warn!(
                            "cannot save the listing cache {}: {e}",
                            cache_file.display()
                        );
                    }
                }
            })
            .await;
        }
        sessions.sort_by(|a, b| b.modified.cmp(&a.modified).then(a.path.cmp(&b.path)));
        // The client has these rows now; changes under these roots are pushed from here on.
        self.list_feed.listed(&listed_roots, &sessions);
        Ok(to_value(
            &root,
            &ListResult {
                root: root.clone(),
                roots: listed_roots,
                sessions,
                skipped,
                pending,
            },
        )?)
    }
}
