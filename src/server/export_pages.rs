//! `session/export`'s document in pages: a reply holds at most `limit` bytes of the document
//! (default [`LIMIT_DEFAULT`], at most [`LIMIT_MAX`]), so one export of hundreds of megabytes
//! never makes one frame that every other session's answer waits behind while it is written.
//! The document is made once, on the first page, and kept ([`Kept`]) for the pages after it
//! while the file is unchanged; the last page lets it go.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use crate::js::jsstr::MARK;
use crate::server::error::RpcError;
use crate::server::transport::Raw;
use crate::view::export::{Exported, Options};

/// `session/export`'s default `limit`: bytes of the document in one reply.
pub const LIMIT_DEFAULT: usize = 4 << 20;
/// `session/export`'s largest `limit`; a larger one is refused with -32602.
pub const LIMIT_MAX: usize = 16 << 20;

/// What a document was made from: the request (but its page) and the file as it was then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    path: PathBuf,
    leaf_id: Option<String>,
    format: &'static str,
    redact: bool,
    max_output_bytes: usize,
    /// Device, inode, size and modification time of the file; `None` when it cannot be read
    /// (no page after the first is then served from a kept document).
    stamp: Option<(u64, u64, u64, SystemTime)>,
}

impl Key {
    /// The key of an export of `path` (resolved) with these options, the file as it is now.
    pub fn new(path: &Path, leaf_id: Option<&str>, options: &Options) -> Key {
        use std::os::unix::fs::MetadataExt;
        let stamp = std::fs::metadata(path)
            .ok()
            .and_then(|m| Some((m.dev(), m.ino(), m.len(), m.modified().ok()?)));
        Key {
            path: path.to_owned(),
            leaf_id: leaf_id.map(str::to_owned),
            format: options.format.as_str(),
            redact: options.redact,
            max_output_bytes: options.max_output_bytes,
            stamp,
        }
    }
}

/// One exported document, kept between its pages.
#[derive(Debug)]
pub struct Document {
    key: Key,
    /// Names this document: the same on each of its pages, another for a document made again.
    id: String,
    /// The leaf exported.
    leaf_id: Option<String>,
    exported: Exported,
}

impl Document {
    /// A document just made for `key`, with a new id.
    pub fn new(key: Key, leaf_id: Option<String>, exported: Exported) -> Document {
        Document {
            key,
            id: uuid::Uuid::new_v4().simple().to_string(),
            leaf_id,
            exported,
        }
    }

    /// The page of `limit` bytes from `offset` as `session/export`'s result, and whether pages
    /// follow it. A page ends on a character (a lone surrogate, held as two characters, is
    /// never split) and holds at least one unless the document ends at `offset`. Errors:
    /// -32602 for an `offset` past the document's end or inside a character. Run it off the
    /// runtime: it serializes up to `limit` bytes.
    pub fn page(
        &self,
        path: &Path,
        offset: usize,
        limit: usize,
        options: &Options,
    ) -> Result<(Raw, bool), RpcError> {
        let doc = self.exported.document.as_str();
        if !starts_a_character(doc, offset) {
            return Err(RpcError::InvalidParams {
                method: "session/export",
                detail: format!(
                    "offset {offset} does not start a character of the document ({} bytes); \
                     ask from 0, then from each page's nextOffset",
                    doc.len()
                ),
            });
        }
        let end = page_end(doc, offset, limit);
        let e = &self.exported;
        let next_offset = (end < doc.len()).then_some(end);
        let result = crate::view::wire::ExportResult {
            path,
            format: options.format.as_str(),
            leaf_id: self.leaf_id.clone(),
            document: &doc[offset..end],
            offset,
            next_offset,
            document_bytes: doc.len(),
            document_id: &self.id,
            entries: e.entries,
            messages: e.messages,
            tool_calls: e.tool_calls,
            redactions: e.redactions,
            redacted: options.redact,
            truncated: e.truncated,
            images: e.images,
        };
        let raw = super::transport::to_raw_sized(path, &result, end - offset + 4096)?;
        Ok((raw, next_offset.is_some()))
    }
}

/// True when `offset` is where a character of `doc` starts (or its end), not inside a
/// lone surrogate's two characters.
fn starts_a_character(doc: &str, offset: usize) -> bool {
    doc.is_char_boundary(offset) && !(offset < doc.len() && doc[..offset].ends_with(MARK))
}

/// Where the page from `offset` (a character's start) ends: at most `limit` bytes on, at a
/// character's start, at least one character on (a lone surrogate's two) when any remain.
fn page_end(doc: &str, offset: usize, limit: usize) -> usize {
    let mut end = offset.saturating_add(limit).min(doc.len());
    while !starts_a_character(doc, end) {
        end -= 1;
    }
    if end == offset && offset < doc.len() {
        let mut chars = doc[offset..].chars();
        end = offset + chars.next().map_or(0, char::len_utf8);
        while !starts_a_character(doc, end) {
            end += chars.next().map_or(1, char::len_utf8);
        }
    }
    end
}

/// The document whose pages are being asked for (one at a time: an export asked from its
/// start replaces it), held by the daemon.
#[derive(Debug, Default)]
pub struct Kept(Mutex<Option<Arc<Document>>>);

impl Kept {
    /// The kept document made for `key`, if that is the one kept.
    pub fn get(&self, key: &Key) -> Option<Arc<Document>> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.as_ref()
            .filter(|d| d.key.stamp.is_some() && d.key == *key)
            .cloned()
    }

    /// Keeps `doc` for its next pages, or (`more` false: its last page was sent) lets it go
    /// when it is the one kept.
    pub fn after_page(&self, doc: &Arc<Document>, more: bool) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if more {
            *kept = Some(doc.clone());
        } else if kept.as_ref().is_some_and(|k| k.id == doc.id) {
            *kept = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(doc: &str, limit: usize) -> Vec<&str> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < doc.len() {
            let end = page_end(doc, at, limit);
            assert!(end > at);
            out.push(&doc[at..end]);
            at = end;
        }
        out
    }

    #[test]
    fn pages_end_on_characters_and_never_split_a_lone_surrogate() {
        let lone = format!("a{MARK}\u{E001}é");
        assert_eq!(pages(&lone, 1), vec!["a", &lone[1..7], "é"]);
        assert_eq!(pages(&lone, 4), vec!["a", &lone[1..7], "é"]);
        assert_eq!(pages(&lone, 7), vec![&lone[..7], "é"]);
        assert_eq!(pages("abcdé", 5), vec!["abcd", "é"]);
        assert_eq!(pages("abc", 100), vec!["abc"]);
        assert!(!starts_a_character(&lone, 4));
        assert!(!starts_a_character(&lone, 2));
        assert!(starts_a_character(&lone, lone.len()));
        assert_eq!(page_end("", 0, 10), 0);
    }
}
