//! The full-text index over every session under the roots (`sessiond search`,
//! `session/search`), built with tantivy and kept in a cache directory
//! ([`default_dir`]: `$XDG_CACHE_HOME/sessiond/index`, else `~/.cache/sessiond/index`).
//!
//! Every session sessiond reads is indexed, pi's and Claude Code's alike: one tantivy
//! document per entry that has something to find (its dialect's `search_text::entry_text`,
//! [`EntryText`]): the session path, its format, entry id, role or entry type, timestamp, line
//! and byte span, and whether the entry is on the session's default path as of indexing (pi:
//! root to the last entry; Claude Code: the lines it loads on the way to the leaf
//! `claude --resume` continues from); the text and thinking are indexed (with positions, for
//! phrases) but not stored — a hit's snippet is made from the line read again from the
//! session file, so the index holds only postings and a few numbers.
//!
//! Incremental ([`SearchIndex::update`]): one more document per session in the index itself
//! (a `state` document, keyed by `statePath`, its fields stored as JSON) records its size, mtime, inode, how many bytes are indexed, a hash of its header line and
//! of the 256 bytes before the indexed end, its default leaf, name and problems. A file whose
//! size and mtime are unchanged is skipped; one that grew, with the same header and bytes
//! before the indexed end, is read only from the indexed end (its new complete lines); one
//! that shrank, changed inode, or whose header or indexed bytes differ, is indexed again from
//! the start; one that is gone is dropped. The size, mtime and inode are fast fields of the
//! state document too: a search tells that nothing changed from those columns and a stat of
//! each file (taken with its directory as the walk reads it, several directories at once:
//! [`list::session_files_with_metadata`]). An update with files to read or drop reads the
//! state documents of just those files when they are at most one in eight of the indexed
//! (each alone), else every session's at once; a hit's session name is read from that
//! session's state document alone.
//! Files are read several at a time (rayon) and their documents added in file order. An append that moves the default path away from
//! the indexed leaf (a new branch from an older entry) re-indexes the file, so
//! `onDefaultPath` stays exact. A Claude Code transcript's default leaf can move with any
//! line (a `last-prompt` names it, a compaction re-links the path: docs/claude-code.md §6), so
//! an append to one reads the small fields of the whole file again to find its path — no line
//! already indexed is read or indexed again unless that path changed for one of them, which
//! re-indexes the file (a hash of the indexed lines on the path is kept to tell). A corrupt
//! file is read the way its agent reads it (bad lines skipped) and its problems are kept and
//! reported; a torn tail is left for later.
//!
//! Versioning and consistency: every commit carries [`FORMAT_VERSION`] as tantivy's commit
//! payload (`sessiond-index N` in `meta.json`); an index of another version (or without one:
//! the version 1 index kept its state in a `sessiond-state.json` beside it) is deleted and
//! rebuilt, never misread. A directory is marked as sessiond's (`sessiond-index.txt`) before
//! tantivy writes to it, so one whose first build never committed is rebuilt too; a
//! directory holding anything else is never emptied. A session's state document is replaced in the same commit as its
//! entries, so the state and the postings cannot disagree: a crash (or a failed commit) at any
//! point leaves the last commit, entries and state together, and the next update reads each
//! file from what that commit recorded — no duplicate and no missing hit. A commit writes the
//! state of the files it changed only (not the whole state, as version 1 did).
//!
//! One writer at a time (tantivy's lock). The daemon keeps its writer open across updates
//! ([`SearchIndex::keep_writer`]) and reloads its reader right after each commit; the CLI opens
//! a writer per run. A CLI run while a daemon holds the writer does not wait: an update with
//! files to index finds the index busy (`busy: true` in the report; with nothing to index no
//! writer is asked for) and it searches what the daemon last committed
//! (which the daemon keeps fresh from file events). An index of another format found while
//! another process holds its writer is reported as an error rather than deleted under it.
//!
//! Why tantivy rather than SQLite FTS5 (rusqlite): a pure-Rust, well-kept library (no C build),
//! BM25 scoring, phrase and prefix queries, snippets with highlighted ranges, and segment
//! files that are only appended to (incremental updates are cheap deletes plus new segments).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tantivy::collector::{Count, DocSetCollector, TopDocs};
use tantivy::query::{
    AllQuery, BooleanQuery, Occur, Query, QueryParser, RangeQuery, RegexQuery, TermQuery,
    TermSetQuery,
};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TantivyDocument,
    TextFieldIndexing, TextOptions, Value as _,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::{
    DocAddress, Index, IndexReader, IndexSettings, IndexWriter, ReloadPolicy, Term, doc,
};
use thiserror::Error;

use crate::core::ids::LineSpan;
use crate::core::lines::LineFormat;
use crate::core::searchable::{EntryText, is_entry_type};
use crate::core::source::LineSource;
use crate::core::tree::{Mode, NodeIdx, TreeEntry};
use crate::dialect::Dialect;
use crate::dialect::claude::{self, Claude};
use crate::dialect::codex::Codex;
use crate::dialect::pi::format::{Expect, Line, parse_line};
use crate::dialect::pi::{self, Pi};
use crate::js::jsstr;
use crate::js::timestamp::format_iso;
use crate::paths;
use crate::search_words;
use crate::storage::list;
use crate::storage::reader::{self, FileLines, OpenedSession};

/// The index format; an index written with another is rebuilt. Version 2: the per-file state
/// as documents in the index, the version as the commit payload. Version 3: Claude Code
/// transcripts, and each entry's session format (`format`, for the `agent` filter and hits).
/// Version 4: text cut by [`search_words`] (Chinese, Japanese and other scripts without spaces
/// in pairs of characters). Version 5: each state document's path and file stamp as fast
/// fields ([`Stamp`]), so that the freshness check reads columns rather than documents.
pub const FORMAT_VERSION: u32 = 5;
/// The `record` value of a state document (entry documents have no `record`).
const STATE_RECORD: &str = "state";

/// The commit payload an index of this format carries.
fn payload() -> String {
    format!("{PAYLOAD_PREFIX}{FORMAT_VERSION}")
}

/// What every version's payload starts with.
const PAYLOAD_PREFIX: &str = "sessiond-index ";

/// The file that marks a directory as sessiond's index, written before tantivy creates the
/// index in it: a directory whose first build never reached its first commit (a search with
/// `--no-update`, a process killed while indexing) holds tantivy's files without the commit
/// payload, and is still known to be sessiond's by this file.
const MARKER: &str = "sessiond-index.txt";

/// What [`MARKER`] says to someone who opens the directory.
const MARKER_TEXT: &str = "This directory is sessiond's search index. sessiond deletes and \
rebuilds everything in it when it needs to; keep nothing else here.\n";

/// True when `dir` holds an index some version of sessiond made: [`MARKER`], or tantivy's
/// `meta.json` whose `payload` is ours (indexes made before the marker). The payload is read
/// as plain JSON, so an index in an older tantivy format still counts.
fn made_by_sessiond(dir: &Path) -> bool {
    if dir.join(MARKER).is_file() {
        return true;
    }
    let Ok(text) = fs::read(dir.join("meta.json")) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&text).is_ok_and(|meta| {
        meta.get("payload")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|p| p.starts_with(PAYLOAD_PREFIX))
    })
}
/// Memory for tantivy's writer, in bytes.
const WRITER_HEAP: usize = 64 * 1024 * 1024;
/// Bytes before the indexed end whose hash tells an append from a rewrite.
const TAIL_CHECK: u64 = 256;
/// Longest snippet, in characters.
const SNIPPET_CHARS: usize = 160;

/// Why the index could not be used.
#[derive(Debug, Error)]
pub enum SearchError {
    /// tantivy failed on the index directory.
    #[error("search index {}: {source}", dir.display())]
    Index {
        /// The index directory.
        dir: PathBuf,
        /// tantivy's error.
        source: tantivy::TantivyError,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The directory holds files but no sessiond index: its contents are never replaced.
    #[error(
        "{}: not a sessiond search index and not empty; refusing to replace what it holds \
         (give --index-dir an empty or new directory)",
        dir.display()
    )]
    NotAnIndex {
        /// The directory given as the index directory.
        dir: PathBuf,
    },
    /// The query could not be parsed.
    #[error("query {query:?}: {detail}")]
    Query {
        /// The query as given.
        query: String,
        /// What is wrong with it.
        detail: String,
    },
}

/// The default index directory: `$XDG_CACHE_HOME/sessiond/index`, else
/// `$HOME/.cache/sessiond/index` (the XDG base directory rule).
pub fn default_dir() -> PathBuf {
    crate::paths::xdg_dir("XDG_CACHE_HOME", ".cache", "index")
}

#[derive(Clone, Copy)]
struct Fields {
    path: Field,
    /// The session's format (`pi`, `claude-code`).
    format: Field,
    entry_id: Field,
    kind: Field,
    timestamp: Field,
    line: Field,
    offset: Field,
    len: Field,
    on_path: Field,
    text: Field,
    thinking: Field,
    /// `state` on the per-file state documents.
    record: Field,
    /// A state document's session path.
    state_path: Field,
    /// A state document's [`FileState`] as JSON.
    state: Field,
    /// A state document's file stamp ([`Stamp`]), as fast fields.
    state_size: Field,
    state_mtime: Field,
    state_ino: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    // Indexed with positions (for phrases), not stored, cut into words by
    // `search_words::analyzer` (scripts without spaces in pairs of characters).
    let words = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(search_words::NAME)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        path: b.add_text_field("path", STRING | STORED),
        format: b.add_text_field("format", STRING | STORED),
        entry_id: b.add_text_field("entryId", STRING | STORED),
        kind: b.add_text_field("kind", STRING | STORED),
        timestamp: b.add_i64_field("timestamp", INDEXED | STORED | FAST),
        line: b.add_u64_field("line", STORED),
        offset: b.add_u64_field("offset", STORED),
        len: b.add_u64_field("len", STORED),
        on_path: b.add_bool_field("onDefaultPath", STORED),
        text: b.add_text_field("text", words.clone()),
        thinking: b.add_text_field("thinking", words),
        record: b.add_text_field("record", STRING),
        state_path: b.add_text_field("statePath", STRING | STORED | FAST),
        state: b.add_text_field("state", STORED),
        state_size: b.add_u64_field("stateSize", FAST),
        state_mtime: b.add_u64_field("stateMtime", FAST),
        state_ino: b.add_u64_field("stateIno", FAST),
    };
    (b.build(), fields)
}

/// What the index knows of one session file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileState {
    format: Dialect,
    size: u64,
    mtime_ns: Option<u128>,
    ino: u64,
    indexed_bytes: u64,
    /// The last indexed line has no newline yet (it may still grow).
    open_tail: bool,
    header_hash: String,
    tail_hash: String,
    version: u32,
    lines: u32,
    leaf_id: Option<String>,
    name: Option<String>,
    docs: u64,
    problems: Vec<String>,
    /// Claude Code: a hash of the indexed lines on the default path, in file order (an append
    /// that changes it re-indexes the file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path_hash: Option<String>,
}

/// What the index knows of every session, read from the state documents of the last commit.
#[derive(Debug, Default)]
struct State {
    files: BTreeMap<String, FileState>,
}

/// The file facts an unchanged file is told by: size, mtime (ns; `u64::MAX` for none) and
/// inode, as [`FileState`] holds them. Kept in fast fields of the state documents, so that
/// the freshness check of a search reads three columns instead of decompressing every
/// session's state document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: u64,
    ino: u64,
}

impl Stamp {
    fn of_meta(m: &fs::Metadata) -> Self {
        Stamp::new(m.len(), mtime_ns(m), m.ino())
    }
    fn of_state(st: &FileState) -> Self {
        Stamp::new(st.size, st.mtime_ns, st.ino)
    }
    fn new(size: u64, mtime_ns: Option<u128>, ino: u64) -> Self {
        Stamp {
            size,
            mtime_ns: mtime_ns
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(u64::MAX),
            ino,
        }
    }
}

/// An update reads the state documents of just the files it looks at while they are at most
/// one in this many of the indexed (each alone decompresses a block of the document store;
/// more of them read every session's at once: [`SearchIndex::apply`]).
const FEW_CHANGED: usize = 8;

/// Every indexed session's [`Stamp`] by key (hashed with foldhash: the keys are the index's
/// own, and a search hashes every session's).
type Stamps = HashMap<String, Stamp, foldhash::fast::RandomState>;

/// Every indexed session's [`Stamp`], by key, from the fast fields of the state documents of
/// the reader's commit. Each segment's dictionary of keys is read once, in order (looking
/// each document's key up by its ordinal decodes a block of the dictionary per document).
fn load_stamps(reader: &IndexReader, f: Fields) -> tantivy::Result<Stamps> {
    use tantivy::{DocSet, TERMINATED};
    let searcher = reader.searcher();
    let term = Term::from_field_text(f.record, STATE_RECORD);
    let mut out = Stamps::default();
    let mut key = String::new();
    for seg in searcher.segment_readers() {
        let fast = seg.fast_fields();
        let Some(paths) = fast.str("statePath")? else {
            continue;
        };
        let mut keys: Vec<Option<String>> = Vec::with_capacity(paths.num_terms());
        let mut terms = paths.dictionary().stream()?;
        while terms.advance() {
            keys.push(std::str::from_utf8(terms.key()).ok().map(str::to_owned));
        }
        let (size, mtime, ino) = (
            fast.u64("stateSize")?,
            fast.u64("stateMtime")?,
            fast.u64("stateIno")?,
        );
        let Some(mut docs) = seg
            .inverted_index(f.record)?
            .read_postings(&term, IndexRecordOption::Basic)?
        else {
            continue;
        };
        let mut doc = docs.doc();
        while doc != TERMINATED {
            if !seg.is_deleted(doc)
                && let Some(ord) = paths.term_ords(doc).next()
            {
                // Each key is one live document's: taken, not copied (a second live
                // document of a key, which a commit never leaves, reads it again).
                let known = usize::try_from(ord)
                    .ok()
                    .and_then(|i| keys.get_mut(i))
                    .and_then(Option::take);
                if let Some(k) = known {
                    key = k;
                } else {
                    key.clear();
                    paths.ord_to_str(ord, &mut key)?;
                }
                if let (Some(size), Some(mtime_ns), Some(ino)) =
                    (size.first(doc), mtime.first(doc), ino.first(doc))
                {
                    out.insert(
                        std::mem::take(&mut key),
                        Stamp {
                            size,
                            mtime_ns,
                            ino,
                        },
                    );
                }
            }
            doc = docs.advance();
        }
    }
    Ok(out)
}

/// What an [`SearchIndex::update`] did.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateReport {
    /// Session files found under the roots ([`SearchIndex::update_paths`]: sessions indexed).
    pub files: usize,
    /// Every file under the roots was looked at ([`SearchIndex::update`]); false when only
    /// the paths a watcher named were ([`SearchIndex::update_paths`]).
    pub reconciled: bool,
    /// Files indexed from the start (new, rewritten, or branched away from the indexed leaf).
    pub indexed: usize,
    /// Files read only from their indexed end.
    pub appended: usize,
    /// Files dropped (deleted, or no longer sessions).
    pub removed: usize,
    /// Entries added to the index.
    pub entries: u64,
    /// The index was rebuilt (a new or older format, or an interrupted commit).
    pub rebuilt: bool,
    /// The index is held by another writer: nothing was updated, the search uses what is there.
    pub busy: bool,
    /// Files that are not sessions or could not be read, with why.
    pub skipped: Vec<Problem>,
    /// Files indexed in part: corrupt lines skipped, a torn tail, with what was found.
    pub problems: Vec<Problem>,
}

/// A file and what is wrong with it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// The session file (as text).
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// What was found.
    pub detail: String,
}

/// A search.
#[derive(Clone, Debug, Default)]
pub struct SearchQuery {
    /// The query: words (all must match), `"phrases"`, `prefix*`, `-excluded`, `a OR b`.
    pub text: String,
    /// Only sessions under these directories (none: everything indexed).
    pub roots: Vec<PathBuf>,
    /// Hits per page.
    pub limit: usize,
    /// Hits to skip (from a cursor).
    pub offset: usize,
    /// Only these roles or entry types (none: all).
    pub roles: Vec<String>,
    /// Only sessions of this format (none: all).
    pub agent: Option<Dialect>,
    /// Only sessions whose path contains this.
    pub path_contains: Option<String>,
    /// Only entries at or after this time (epoch ms).
    pub after_ms: Option<i64>,
    /// Only entries before this time (epoch ms).
    pub before_ms: Option<i64>,
    /// Search thinking too.
    pub thinking: bool,
}

/// One hit.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// The session file, as text (a name that is not UTF-8 shown with U+FFFD).
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// The file's `file://` URI when its name is not UTF-8 (`path` then does not name it),
    /// to open it by; absent otherwise ([`crate::paths`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_uri: Option<String>,
    /// The session's format.
    pub format: Dialect,
    /// The session name, when it has one.
    pub name: Option<String>,
    /// The entry.
    pub entry_id: String,
    /// 1-based line of the entry.
    pub line: u64,
    /// The message role for a message entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The entry type for other entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_type: Option<String>,
    /// The entry's timestamp (ISO 8601), when it has a valid one.
    pub timestamp: Option<String>,
    /// Whether the entry is on the path from the root to the session's last entry.
    pub on_default_path: bool,
    /// Text around the match, matched terms wrapped in `**`.
    pub snippet: String,
    /// BM25 score (higher is better).
    pub score: f32,
    /// When the hit is in an archived session that the live roots do not offer (a search
    /// with an archive, [`crate::archive::view`]): its key in the archive; `path` is then the
    /// session's original path. Absent for a live session's hit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive_key: Option<String>,
    /// With `archive_key`: true when the original no longer exists, the archive being all
    /// that is left of the session (`restore` brings it back); false when it exists outside
    /// the roots searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_only: Option<bool>,
}

/// A page of hits.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    /// The hits, best first.
    pub hits: Vec<Hit>,
    /// All matching entries.
    pub total: usize,
    /// Pass as `cursor` for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// The index, open.
pub struct SearchIndex {
    dir: PathBuf,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// Every session's state, read from the state documents when an update has files to
    /// index or drop (the daemon keeps it); a search and an update that finds nothing changed
    /// read only the stamps.
    state: Option<State>,
    /// The stamps of the reader's commit ([`load_stamps`]), read once when asked for.
    stamps: std::sync::OnceLock<Stamps>,
    rebuilt: bool,
    /// The writer kept open across updates ([`SearchIndex::keep_writer`]).
    writer: Option<IndexWriter>,
    keep_writer: bool,
}

fn hash_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

fn mtime_ns(m: &fs::Metadata) -> Option<u128> {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
}

fn read_range(path: &Path, from: u64, to: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = fs::File::open(path)?;
    let mut buf = vec![0u8; to.saturating_sub(from) as usize];
    f.read_exact_at(&mut buf, from)?;
    Ok(buf)
}

/// The header line's hash (bytes up to the first newline, at most 64 KiB).
fn header_hash(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; 64 * 1024];
    let mut f = fs::File::open(path)?;
    let mut n = 0;
    while n < buf.len() {
        let k = f.read(&mut buf[n..])?;
        if k == 0 {
            break;
        }
        n += k;
        if buf[..n].contains(&b'\n') {
            break;
        }
    }
    let end = buf[..n].iter().position(|&b| b == b'\n').unwrap_or(n);
    Ok(hash_hex(&buf[..end]))
}

fn tail_hash(path: &Path, indexed: u64) -> io::Result<String> {
    let from = indexed.saturating_sub(TAIL_CHECK);
    Ok(hash_hex(&read_range(path, from, indexed)?))
}

/// Files read at once for the index, at most (see [`SearchIndex::write`]).
const BATCH_FILES: usize = 64;
/// Bytes of files read at once for the index: a batch ends once its files reach this.
const BATCH_BYTES: u64 = 64 << 20;

/// What reading one file for the index gave ([`SearchIndex::index_file`]).
struct Indexed {
    /// Read from the start: what was indexed of the file before is deleted first.
    full: bool,
    /// Its documents, in file order.
    docs: Vec<TantivyDocument>,
    /// Its state and how many documents, or why it is skipped.
    outcome: Result<(FileState, u64), String>,
}

/// How a file that changed is read.
enum Work {
    /// From the start.
    Full,
    /// From the indexed end given by its state.
    Append(Box<FileState>),
}

/// The state documents of the reader's commit. A state document that cannot be read is left
/// out: its file is then indexed again from the start (its entries deleted first).
fn load_state(reader: &IndexReader, f: Fields) -> tantivy::Result<State> {
    let searcher = reader.searcher();
    let q = TermQuery::new(
        Term::from_field_text(f.record, STATE_RECORD),
        IndexRecordOption::Basic,
    );
    let mut files = BTreeMap::new();
    for addr in searcher.search(&q, &DocSetCollector)? {
        let d: TantivyDocument = searcher.doc(addr)?;
        let key = d.get_first(f.state_path).and_then(|v| v.as_str());
        let st = d
            .get_first(f.state)
            .and_then(|v| v.as_str())
            .and_then(|j| serde_json::from_str::<FileState>(j).ok());
        if let (Some(key), Some(st)) = (key, st) {
            files.insert(key.to_owned(), st);
        }
    }
    Ok(State { files })
}

impl SearchIndex {
    /// Opens the index in `dir`, creating it when missing and rebuilding it when its format
    /// version (the commit payload) or schema differs. Errors: the directory cannot be
    /// created, tantivy cannot open it, or an index of another format is held by another
    /// process's writer (tantivy's `LockFailure`; it is not deleted under that process);
    /// [`SearchError::NotAnIndex`] when `dir` holds anything but an index sessiond made
    /// (nothing in it is touched then).
    pub fn open(dir: &Path) -> Result<SearchIndex, SearchError> {
        let io_err = |source| SearchError::Io {
            path: dir.to_owned(),
            source,
        };
        if dir.exists() && !dir.is_dir() {
            return Err(io_err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory (the index is a directory of its own)",
            )));
        }
        create_owner_only_dirs(dir).map_err(io_err)?;
        // Only an index sessiond made (of any version, committed or not) is opened, emptied
        // or rebuilt; any other directory with something in it is refused before tantivy
        // touches it (opening a writer there would leave a lock file behind).
        let existed = fs::read_dir(dir).map_err(io_err)?.next().is_some();
        if existed && !made_by_sessiond(dir) {
            return Err(SearchError::NotAnIndex {
                dir: dir.to_owned(),
            });
        }
        let (schema, fields) = schema();
        let tantivy_err = |source| SearchError::Index {
            dir: dir.to_owned(),
            source,
        };
        // An index an earlier version wrote with the umask's modes (0755, 0644), or an empty
        // directory given for one: the owner's only from now on.
        restrict_to_owner(dir).map_err(io_err)?;
        let directory = || -> Result<OwnerOnly, SearchError> {
            Ok(OwnerOnly {
                inner: tantivy::directory::MmapDirectory::open(dir).map_err(|e| {
                    SearchError::Io {
                        path: dir.to_owned(),
                        source: io::Error::other(e),
                    }
                })?,
                root: dir.to_owned(),
            })
        };
        let existing = Index::open(directory()?).ok();
        let current = existing.as_ref().is_some_and(|index| {
            index.load_metas().ok().and_then(|m| m.payload) == Some(payload())
                && index.schema() == schema
        });
        let (index, rebuilt) = match existing {
            Some(index) if current => (index, false),
            existing => {
                // Another version, or nothing yet: start afresh — unless another process
                // writes to it.
                if let Some(old) = &existing
                    && let Err(e @ tantivy::TantivyError::LockFailure(..)) =
                        old.writer::<TantivyDocument>(15_000_000)
                {
                    return Err(tantivy_err(e));
                }
                drop(existing);
                for e in fs::read_dir(dir).map_err(io_err)?.flatten() {
                    let p = e.path();
                    let _ = if p.is_dir() {
                        fs::remove_dir_all(&p)
                    } else {
                        fs::remove_file(&p)
                    };
                }
                // Marked before tantivy writes anything, so that no state of the directory
                // from here on is taken for someone else's.
                write_owner_only(&dir.join(MARKER), MARKER_TEXT.as_bytes()).map_err(|source| {
                    SearchError::Io {
                        path: dir.join(MARKER),
                        source,
                    }
                })?;
                let index = Index::create(directory()?, schema, IndexSettings::default())
                    .map_err(tantivy_err)?;
                (index, existed)
            }
        };
        index
            .tokenizers()
            .register(search_words::NAME, search_words::analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(tantivy_err)?;
        Ok(SearchIndex {
            dir: dir.to_owned(),
            index,
            reader,
            fields,
            state: None,
            stamps: std::sync::OnceLock::new(),
            rebuilt,
            writer: None,
            keep_writer: false,
        })
    }

    /// Keeps the writer open across updates (the daemon) instead of opening one per update
    /// and dropping it after its commit (the CLI, the default). While it is kept, other
    /// processes find the index busy.
    pub fn keep_writer(&mut self, keep: bool) {
        self.keep_writer = keep;
        if !keep {
            self.writer = None;
        }
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sessions indexed.
    pub fn files(&self) -> usize {
        match &self.state {
            Some(state) => state.files.len(),
            None => self.stamps().map_or(0, |s| s.len()),
        }
    }

    /// The stamps of the last commit, read from the index on first use. `None` when tantivy
    /// cannot read them.
    fn stamps(&self) -> Option<&Stamps> {
        if let Some(s) = self.stamps.get() {
            return Some(s);
        }
        let read = load_stamps(&self.reader, self.fields).ok()?;
        Some(self.stamps.get_or_init(|| read))
    }

    /// Every session's state, read from the last commit's state documents on first use.
    fn state(&mut self) -> Result<&mut State, SearchError> {
        if self.state.is_none() {
            let state = load_state(&self.reader, self.fields).map_err(|e| self.tantivy_err(e))?;
            self.state = Some(state);
        }
        Ok(self.state.get_or_insert_with(State::default))
    }

    /// Whether every file in `found` (distinct paths, with their metadata as the walk read
    /// it) has the stamp the index holds for it and no indexed file under `roots` is missing
    /// from `found`: an update would do nothing. Reads only the stamps; touches no file.
    fn unchanged(&self, roots: &[PathBuf], found: &[(PathBuf, Option<fs::Metadata>)]) -> bool {
        let Some(stamps) = self.stamps() else {
            return false;
        };
        let all_known = found.iter().all(|(p, m)| {
            m.as_ref().is_some_and(|m| {
                let key = p.to_str().map_or_else(
                    || std::borrow::Cow::Owned(key_of(p)),
                    std::borrow::Cow::Borrowed,
                );
                stamps.get(key.as_ref()) == Some(&Stamp::of_meta(m))
            })
        });
        // Every file found is indexed under its own key; none indexed under the roots is
        // missing exactly when as many are indexed under them as were found.
        all_known
            && (stamps.len() == found.len()
                || stamps.keys().filter(|k| under_any(k, roots)).count() == found.len())
    }

    fn tantivy_err(&self, source: tantivy::TantivyError) -> SearchError {
        SearchError::Index {
            dir: self.dir.clone(),
            source,
        }
    }

    /// Brings the index up to date with every `*.jsonl` under `roots` (as
    /// [`list::session_files`] finds them): new and rewritten files indexed, grown ones read
    /// from their indexed end, deleted ones dropped. `progress(done, total)` is called for
    /// each file that needs reading. Files known under other roots are left alone. Errors:
    /// tantivy failed to write, or the state file could not be saved.
    pub fn update(
        &mut self,
        roots: &[PathBuf],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<UpdateReport, SearchError> {
        let mut report = UpdateReport {
            rebuilt: std::mem::take(&mut self.rebuilt),
            ..UpdateReport::default()
        };
        // Each file's metadata is read with its directory (no path looked up again), and
        // the paths are sorted by their bytes: sorting `Path`s compares them component by
        // component, which was a fifth of a query's time over 2,000 sessions. A root inside
        // another gives some files twice.
        let mut stamped: Vec<(PathBuf, Option<fs::Metadata>)> = Vec::new();
        for r in roots {
            stamped.extend(list::session_files_with_metadata(r));
        }
        if roots.len() > 1 {
            stamped.sort_unstable_by(|a, b| a.0.as_os_str().cmp(b.0.as_os_str()));
            stamped.dedup_by(|a, b| a.0 == b.0);
        }
        report.files = stamped.len();
        report.reconciled = true;
        if self.state.is_none() && !report.rebuilt && self.unchanged(roots, &stamped) {
            return Ok(report);
        }
        // With the state not loaded, the stamps tell which files changed: when they are few,
        // only their state documents are read (each alone), not every session's.
        if self.state.is_none()
            && !report.rebuilt
            && let Some(stamps) = self.stamps()
        {
            let mut changed: Vec<PathBuf> = stamped
                .iter()
                .filter(|(p, m)| {
                    m.as_ref()
                        .is_some_and(|m| stamps.get(&key_of(p)) != Some(&Stamp::of_meta(m)))
                })
                .map(|(p, _)| p.clone())
                .collect();
            if changed.len() <= stamps.len() / FEW_CHANGED {
                changed.sort();
                let present: HashSet<String> = stamped.iter().map(|(p, _)| key_of(p)).collect();
                let gone: Vec<String> = stamps
                    .keys()
                    .filter(|k| !present.contains(*k) && under_any(k, roots))
                    .cloned()
                    .collect();
                return self.apply(changed, gone, report, progress);
            }
        }
        // Indexed in the order of their paths, as before.
        let mut found: Vec<PathBuf> = stamped.into_iter().map(|(p, _)| p).collect();
        found.sort();
        let present: HashSet<String> = found.iter().map(|p| key_of(p)).collect();
        let gone: Vec<String> = self
            .state()?
            .files
            .keys()
            .filter(|k| !present.contains(*k) && under_any(k, roots))
            .cloned()
            .collect();
        self.apply(found, gone, report, progress)
    }

    /// Brings the index up to date with just these paths, as a file watcher reported them:
    /// a session file under `roots` that exists is indexed (new, grown or rewritten, as
    /// [`SearchIndex::update`] decides), one that is gone is dropped; a directory that
    /// exists is scanned, one that is gone drops every file indexed below it. Paths outside
    /// the roots are ignored. `files` in the report is the number of sessions indexed.
    /// Errors: as [`SearchIndex::update`].
    pub fn update_paths(
        &mut self,
        roots: &[PathBuf],
        changed: &[PathBuf],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<UpdateReport, SearchError> {
        let report = UpdateReport {
            rebuilt: std::mem::take(&mut self.rebuilt),
            ..UpdateReport::default()
        };
        let mut found: Vec<PathBuf> = Vec::new();
        let mut gone: Vec<String> = Vec::new();
        for p in changed {
            if !roots.iter().any(|r| p.starts_with(r)) {
                continue;
            }
            match fs::metadata(p) {
                Ok(m) if m.is_file() => {
                    if p.extension().is_some_and(|e| e == "jsonl") {
                        found.push(p.clone());
                    }
                }
                Ok(m) if m.is_dir() => found.extend(list::session_files(p)),
                Ok(_) => {}
                Err(_) => {
                    let key = key_of(p);
                    let state = self.state()?;
                    if state.files.contains_key(&key) {
                        gone.push(key);
                    } else {
                        gone.extend(
                            state
                                .files
                                .keys()
                                .filter(|k| path_of(k).starts_with(p))
                                .cloned(),
                        );
                    }
                }
            }
        }
        found.sort();
        found.dedup();
        gone.sort();
        gone.dedup();
        let mut report = self.apply(found, gone, report, progress)?;
        report.files = self.files();
        Ok(report)
    }

    /// Indexes `found` (new, grown or rewritten files; unchanged ones are skipped) and drops
    /// `gone`, in one commit.
    fn apply(
        &mut self,
        found: Vec<PathBuf>,
        gone: Vec<String>,
        mut report: UpdateReport,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<UpdateReport, SearchError> {
        // Many files to look at (a rescanned directory, a first build): every session's state
        // is read at once, not each file's document alone.
        if self.state.is_none()
            && self
                .stamps()
                .is_none_or(|s| found.len() > s.len() / FEW_CHANGED)
        {
            self.state()?;
        }
        let mut work: Vec<(PathBuf, fs::Metadata, Work)> = Vec::new();
        let searcher = self.reader.searcher();
        for p in found {
            let Ok(meta) = fs::metadata(&p) else {
                continue;
            };
            let key = key_of(&p);
            match self.file_state(&searcher, &key).as_deref() {
                None => work.push((p, meta, Work::Full)),
                Some(st) => {
                    if st.size == meta.len()
                        && st.mtime_ns == mtime_ns(&meta)
                        && st.ino == meta.ino()
                    {
                        continue;
                    }
                    let rewritten = meta.ino() != st.ino
                        || meta.len() < st.indexed_bytes
                        || st.open_tail
                        || (st.format == Dialect::Pi && st.version != 3)
                        || header_hash(&p).ok().as_deref() != Some(st.header_hash.as_str())
                        || tail_hash(&p, st.indexed_bytes).ok().as_deref()
                            != Some(st.tail_hash.as_str());
                    let w = if rewritten {
                        Work::Full
                    } else {
                        Work::Append(Box::new(st.clone()))
                    };
                    work.push((p, meta, w));
                }
            }
        }
        if work.is_empty() && gone.is_empty() {
            return Ok(report);
        }
        let mut writer: IndexWriter = match self.writer.take() {
            Some(w) => w,
            None => match self.index.writer(WRITER_HEAP) {
                Ok(w) => w,
                Err(tantivy::TantivyError::LockFailure(..)) => {
                    report.busy = true;
                    return Ok(report);
                }
                Err(e) => return Err(self.tantivy_err(e)),
            },
        };
        let result = self.write(&mut writer, work, gone, &mut report, progress);
        match result {
            Ok(()) => {
                if self.keep_writer {
                    self.writer = Some(writer);
                }
                Ok(report)
            }
            Err(e) => {
                // The commit did not happen: drop the writer (and what it held) and take the
                // state back from the last commit.
                drop(writer);
                self.state = load_state(&self.reader, self.fields).ok();
                self.stamps = std::sync::OnceLock::new();
                Err(e)
            }
        }
    }

    /// The deletes and documents of one update, its state documents, and the commit (with
    /// the format as payload), then the reader reloaded.
    fn write(
        &mut self,
        writer: &mut IndexWriter,
        work: Vec<(PathBuf, fs::Metadata, Work)>,
        gone: Vec<String>,
        report: &mut UpdateReport,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(), SearchError> {
        let f = self.fields;
        for key in gone {
            writer.delete_term(Term::from_field_text(f.path, &key));
            writer.delete_term(Term::from_field_text(f.state_path, &key));
            if let Some(state) = &mut self.state {
                state.files.remove(&key);
            }
            report.removed += 1;
        }
        use rayon::prelude::*;
        let total = work.len();
        let mut done = 0;
        let mut work = work.into_iter().peekable();
        while work.peek().is_some() {
            progress(done, total);
            // A batch of files is read on rayon's pool, several at once (files are
            // independent; parsing lines and cutting text are most of a build's work besides
            // tantivy's own indexing threads); their documents are then added in file order,
            // so the index is the same whatever the threads did. A batch is bounded in bytes
            // as well as files: its documents are held until they are added.
            let mut batch = Vec::new();
            let mut bytes = 0u64;
            while let Some(next) =
                work.next_if(|_| batch.len() < BATCH_FILES && bytes < BATCH_BYTES)
            {
                bytes += next.1.len();
                batch.push(next);
            }
            done += batch.len();
            let this = &*self;
            let read: Vec<Indexed> = batch
                .par_iter()
                .with_max_len(1)
                .map(|(path, meta, w)| this.index_file(&key_of(path), path, meta, w))
                .collect();
            for ((path, _, _), r) in batch.into_iter().zip(read) {
                self.keep_indexed(writer, path, r, report)?;
            }
        }
        progress(total, total);
        let mut prepared = writer.prepare_commit().map_err(|e| self.tantivy_err(e))?;
        prepared.set_payload(&payload());
        prepared.commit().map_err(|e| self.tantivy_err(e))?;
        self.reader.reload().map_err(|e| self.tantivy_err(e))?;
        self.stamps = std::sync::OnceLock::new();
        Ok(())
    }

    /// Adds what reading one file gave to the index (after deleting its earlier documents
    /// when it was read from the start) with its state document, and to the report.
    fn keep_indexed(
        &mut self,
        writer: &IndexWriter,
        path: PathBuf,
        r: Indexed,
        report: &mut UpdateReport,
    ) -> Result<(), SearchError> {
        let f = self.fields;
        let key = key_of(&path);
        let Indexed {
            full,
            docs,
            outcome,
        } = r;
        if full {
            writer.delete_term(Term::from_field_text(f.path, &key));
        }
        for d in docs {
            // Only fails once the writer is gone (a panic in tantivy's threads): the commit
            // then reports it.
            let _ = writer.add_document(d);
        }
        {
            if outcome.is_ok() {
                if full {
                    report.indexed += 1;
                } else {
                    report.appended += 1;
                }
            }
            match outcome {
                Ok((st, added)) => {
                    report.entries += added;
                    if !st.problems.is_empty() {
                        report.problems.push(Problem {
                            path: path.clone(),
                            detail: st.problems.join("; "),
                        });
                    }
                    writer.delete_term(Term::from_field_text(f.state_path, &key));
                    let json = serde_json::to_string(&st).unwrap_or_default();
                    let stamp = Stamp::of_state(&st);
                    let _ = writer.add_document(doc!(
                        f.record => STATE_RECORD,
                        f.state_path => key.as_str(),
                        f.state => json,
                        f.state_size => stamp.size,
                        f.state_mtime => stamp.mtime_ns,
                        f.state_ino => stamp.ino,
                    ));
                    if let Some(state) = &mut self.state {
                        state.files.insert(key, st);
                    }
                }
                Err(detail) => {
                    writer.delete_term(Term::from_field_text(f.path, &key));
                    writer.delete_term(Term::from_field_text(f.state_path, &key));
                    if let Some(state) = &mut self.state {
                        state.files.remove(&key);
                    }
                    report.skipped.push(Problem { path, detail });
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn add_doc(
        &self,
        docs: &mut Vec<TantivyDocument>,
        key: &str,
        format: Dialect,
        id: &str,
        span: LineSpan,
        time_ms: Option<i64>,
        on_path: bool,
        t: EntryText,
    ) {
        let f = self.fields;
        let mut d = doc!(
            f.path => key,
            f.format => format.as_str(),
            f.entry_id => id,
            f.kind => t.kind,
            f.line => u64::from(span.line),
            f.offset => span.offset,
            f.len => u64::from(span.len),
            f.on_path => on_path,
            f.text => t.text,
            f.thinking => t.thinking,
        );
        if let Some(ms) = time_ms {
            d.add_i64(f.timestamp, ms);
        }
        docs.push(d);
    }

    /// Reads one file for the index: from its indexed end for `Work::Append` when that can
    /// be done, else from the start. Touches no index: the documents are returned, for the
    /// caller to add in file order (several files are read at once, [`SearchIndex::write`]).
    fn index_file(&self, key: &str, path: &Path, meta: &fs::Metadata, work: &Work) -> Indexed {
        let mut docs = Vec::new();
        if let Work::Append(st) = work {
            if let Some(r) = self.index_append(&mut docs, key, path, meta, st) {
                return Indexed {
                    full: false,
                    docs,
                    outcome: Ok(r),
                };
            }
            docs.clear();
        }
        let outcome = self.index_full(&mut docs, key, path, meta);
        Indexed {
            full: true,
            docs,
            outcome,
        }
    }

    /// Indexes a whole file (the caller deletes what was indexed of it). `Err` for a file
    /// that is no session or cannot be read.
    fn index_full(
        &self,
        docs: &mut Vec<TantivyDocument>,
        key: &str,
        path: &Path,
        meta: &fs::Metadata,
    ) -> Result<(FileState, u64), String> {
        let file = reader::open_regular(path).map_err(|e| e.to_string())?;
        let format = reader::sniff_file(path, &file).map_err(|e| e.to_string())?;
        // Read in blocks, not a read per line: every line of the file is read in order.
        let lines = FileLines::open(path)
            .map(FileLines::read_ahead)
            .map_err(|e| e.to_string())?;
        match format {
            Dialect::Pi => {
                let session = reader::open_session_from::<Pi>(path, file, Mode::Lenient)
                    .map_err(|e| e.to_string())?;
                let tree = &session.tree;
                let on_path: HashSet<NodeIdx> =
                    tree.path_to(tree.default_leaf()).into_iter().collect();
                let added = self.index_nodes(docs, key, format, &session, &lines, &on_path, 0);
                let mut st = file_state(path, meta, format, &session, tree.default_leaf())?;
                st.version = tree.header().version;
                st.name = tree.name().map(str::to_owned);
                st.docs = added;
                Ok((st, added))
            }
            Dialect::Claude => {
                let session = reader::open_session_from::<Claude>(path, file, Mode::Lenient)
                    .map_err(|e| e.to_string())?;
                self.index_claude(docs, key, path, meta, &session, &lines, None)
                    .ok_or_else(|| "the transcript changed while it was read".to_owned())
            }
            Dialect::Codex => {
                // A rollout is linear: every line is on the path to its last line.
                let session = reader::open_session_from::<Codex>(path, file, Mode::Lenient)
                    .map_err(|e| e.to_string())?;
                let tree = &session.tree;
                let leaf = tree.default_leaf();
                let on_path: HashSet<NodeIdx> = tree.path_to(leaf).into_iter().collect();
                let added = self.index_nodes(docs, key, format, &session, &lines, &on_path, 0);
                let mut st = file_state(path, meta, format, &session, leaf)?;
                st.docs = added;
                Ok((st, added))
            }
        }
    }

    /// Adds a document for each entry of `session` at or after byte `from` that has
    /// something to find, `on_path` telling which are on the default path; returns how many.
    #[allow(clippy::too_many_arguments)]
    fn index_nodes<F: LineFormat>(
        &self,
        docs: &mut Vec<TantivyDocument>,
        key: &str,
        format: Dialect,
        session: &OpenedSession<F>,
        lines: &dyn LineSource,
        on_path: &HashSet<NodeIdx>,
        from: u64,
    ) -> u64 {
        let mut added = 0u64;
        for (i, node) in session.tree.nodes().iter().enumerate() {
            let span = node.entry.span();
            if span.offset < from {
                continue;
            }
            let Ok(bytes) = lines.line(span) else {
                continue;
            };
            let Ok(value) = jsstr::parse_value(&bytes) else {
                continue;
            };
            if let Some(t) = entry_text(format, &value) {
                let idx = NodeIdx::try_from(i).unwrap_or(NodeIdx::MAX);
                self.add_doc(
                    docs,
                    key,
                    format,
                    node.entry.id().as_str(),
                    span,
                    node.entry.time().ms(),
                    on_path.contains(&idx),
                    t,
                );
                added += 1;
            }
        }
        added
    }

    /// Indexes a Claude Code transcript read whole into `session`: every line when `known` is
    /// `None`, else only the lines after its indexed end — when the indexed lines on the
    /// default path are still the ones indexed as on it (`None` otherwise: the file is then
    /// indexed from the start).
    #[allow(clippy::too_many_arguments)]
    fn index_claude(
        &self,
        docs: &mut Vec<TantivyDocument>,
        key: &str,
        path: &Path,
        meta: &fs::Metadata,
        session: &OpenedSession<Claude>,
        lines: &dyn LineSource,
        known: Option<&FileState>,
    ) -> Option<(FileState, u64)> {
        let tree = &session.tree;
        let leaf = claude::default_leaf(tree);
        let on_path: Vec<NodeIdx> = leaf.map_or_else(Vec::new, |l| claude::path_to(tree, l));
        let hash_below = |end: u64| {
            let mut ids: Vec<NodeIdx> = on_path
                .iter()
                .copied()
                .filter(|&n| tree.node(n).entry.span.offset < end)
                .collect();
            ids.sort_unstable();
            let text: Vec<&str> = ids
                .iter()
                .map(|&n| tree.node(n).entry.id.as_str())
                .collect();
            hash_hex(text.join("\n").as_bytes())
        };
        let from = match known {
            Some(st) if st.path_hash.as_deref() == Some(hash_below(st.indexed_bytes).as_str()) => {
                st.indexed_bytes
            }
            Some(_) => return None,
            None => 0,
        };
        let on_path_set: HashSet<NodeIdx> = on_path.iter().copied().collect();
        let added = self.index_nodes(
            docs,
            key,
            Dialect::Claude,
            session,
            lines,
            &on_path_set,
            from,
        );
        let mut st = file_state(path, meta, Dialect::Claude, session, leaf).ok()?;
        st.name = claude::overview::name(tree, lines);
        st.path_hash = Some(hash_below(st.indexed_bytes));
        st.docs = known.map_or(0, |k| k.docs) + added;
        Some((st, added))
    }

    /// Indexes the complete lines after the indexed end. `None` when the file must be indexed
    /// from the start instead (the default path changed for an indexed entry, or the new bytes
    /// could not be read).
    fn index_append(
        &self,
        docs: &mut Vec<TantivyDocument>,
        key: &str,
        path: &Path,
        meta: &fs::Metadata,
        st: &FileState,
    ) -> Option<(FileState, u64)> {
        match st.format {
            Dialect::Pi => self.index_append_pi(docs, key, path, meta, st),
            // Indexed again from the start (a rollout's lines are cheap to read).
            Dialect::Codex => None,
            Dialect::Claude => {
                let file = reader::open_regular(path).ok()?;
                let session =
                    reader::open_session_from::<Claude>(path, file, Mode::Lenient).ok()?;
                let lines = FileLines::open(path).ok()?;
                self.index_claude(docs, key, path, meta, &session, &lines, Some(st))
            }
        }
    }

    /// [`SearchIndex::index_append`] of a pi session: only the new lines are read. The new
    /// default leaf is the last new entry; the append is indexed as such when its path reaches
    /// the indexed leaf through new entries only.
    fn index_append_pi(
        &self,
        docs: &mut Vec<TantivyDocument>,
        key: &str,
        path: &Path,
        meta: &fs::Metadata,
        st: &FileState,
    ) -> Option<(FileState, u64)> {
        let bytes = read_range(path, st.indexed_bytes, meta.len()).ok()?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut entries = Vec::new();
        let mut problems = Vec::new();
        let mut line = st.lines;
        let mut offset = st.indexed_bytes;
        for raw in bytes[..complete].split_inclusive(|&b| b == b'\n') {
            line += 1;
            let body = raw.strip_suffix(b"\n").unwrap_or(raw);
            let span = LineSpan {
                line,
                offset,
                len: u32::try_from(body.len()).unwrap_or(u32::MAX),
            };
            offset += raw.len() as u64;
            if body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse_line(
                body,
                span,
                Expect::Entry {
                    version: st.version,
                },
            ) {
                Ok(Line::Entry(e)) => entries.push((e, body)),
                Ok(Line::Irregular(_, p)) => problems.push(format!("line {line}: {}", p.detail)),
                Ok(_) => problems.push(format!("line {line}: a second session header")),
                Err(p) => problems.push(format!("line {line}: {}", p.detail)),
            }
        }
        // The new default leaf is the last new entry; its path must reach the indexed leaf
        // through new entries only, or older entries' flags change.
        let mut on_path: HashSet<usize> = HashSet::new();
        let mut leaf_id = st.leaf_id.clone();
        if let Some(last) = entries.len().checked_sub(1) {
            let by_id: HashMap<&str, usize> = entries
                .iter()
                .enumerate()
                .map(|(i, (e, _))| (e.id.as_str(), i))
                .collect();
            let mut cur = last;
            loop {
                if !on_path.insert(cur) {
                    return None;
                }
                match entries[cur].0.parent_id.as_ref().map(|p| p.as_str()) {
                    p if p == st.leaf_id.as_deref() => break,
                    Some(p) => cur = *by_id.get(p)?,
                    None => return None,
                }
            }
            leaf_id = Some(entries[last].0.id.to_string());
        }
        let mut name = st.name.clone();
        let mut added = 0u64;
        for (i, (e, body)) in entries.iter().enumerate() {
            if let crate::dialect::pi::format::EntryKind::SessionInfo { name: n } = &e.kind {
                name = n.as_deref().map(str::to_owned);
            }
            let Ok(value) = jsstr::parse_value(body) else {
                continue;
            };
            if let Some(t) = pi::search_text::entry_text(&value) {
                self.add_doc(
                    docs,
                    key,
                    Dialect::Pi,
                    e.id.as_str(),
                    e.span,
                    e.time_ms.ms(),
                    on_path.contains(&i),
                    t,
                );
                added += 1;
            }
        }
        let indexed = st.indexed_bytes + complete as u64;
        let mut all_problems = st.problems.clone();
        all_problems.retain(|p| !p.starts_with("torn tail"));
        all_problems.extend(problems);
        Some((
            FileState {
                format: Dialect::Pi,
                size: meta.len(),
                mtime_ns: mtime_ns(meta),
                ino: meta.ino(),
                indexed_bytes: indexed,
                open_tail: false,
                header_hash: st.header_hash.clone(),
                tail_hash: tail_hash(path, indexed).ok()?,
                version: st.version,
                lines: line,
                leaf_id,
                name,
                docs: st.docs + added,
                problems: all_problems,
                path_hash: None,
            },
            added,
        ))
    }

    /// Runs a search over what is indexed. Errors: the query cannot be parsed, tantivy failed.
    pub fn search(&self, q: &SearchQuery) -> Result<Found, SearchError> {
        let f = self.fields;
        let mut fields = vec![f.text];
        if q.thinking {
            fields.push(f.thinking);
        }
        let mut parser = QueryParser::for_index(&self.index, fields.clone());
        parser.set_conjunction_by_default();
        parser.allow_regexes();
        let query_err = |detail: String| SearchError::Query {
            query: q.text.clone(),
            detail,
        };
        let text_query: Box<dyn Query> = if q.text.trim().is_empty() {
            // Every entry: not the state documents.
            Box::new(BooleanQuery::new(vec![
                (Occur::Must, Box::new(AllQuery) as Box<dyn Query>),
                (
                    Occur::MustNot,
                    Box::new(TermQuery::new(
                        Term::from_field_text(f.record, STATE_RECORD),
                        IndexRecordOption::Basic,
                    )),
                ),
            ]))
        } else {
            user_query(&parser, &q.text, q.thinking)
        };
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, text_query.box_clone())];
        if let Some(agent) = q.agent {
            clauses.push((
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.format, agent.as_str()),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        if !q.roles.is_empty() {
            let terms = q.roles.iter().map(|r| Term::from_field_text(f.kind, r));
            clauses.push((Occur::Must, Box::new(TermSetQuery::new(terms))));
        }
        if q.after_ms.is_some() || q.before_ms.is_some() {
            use std::ops::Bound;
            let lo = q.after_ms.map_or(Bound::Unbounded, |t| {
                Bound::Included(Term::from_field_i64(f.timestamp, t))
            });
            let hi = q.before_ms.map_or(Bound::Unbounded, |t| {
                Bound::Excluded(Term::from_field_i64(f.timestamp, t))
            });
            clauses.push((Occur::Must, Box::new(RangeQuery::new(lo, hi))));
        }
        if let Some(sub) = q.path_contains.as_deref().filter(|s| !s.is_empty()) {
            let re = format!(".*{}.*", regex::escape(sub));
            let rq = RegexQuery::from_pattern(&re, f.path).map_err(|e| query_err(e.to_string()))?;
            clauses.push((Occur::Must, Box::new(rq)));
        }
        // The roots as a filter only when something indexed lies outside them: the path
        // regex walks every indexed path's postings, a cost on each query for nothing when
        // the roots cover the whole index (the daemon's usual case).
        let under_roots = |k: &String| under_any(k, &q.roots);
        let covered = match &self.state {
            Some(state) => state.files.keys().all(under_roots),
            None => self.stamps().is_some_and(|s| s.keys().all(under_roots)),
        };
        if !q.roots.is_empty() && !covered {
            let mut any: Vec<(Occur, Box<dyn Query>)> = Vec::new();
            for r in &q.roots {
                // A file under the root by its text key, or by its URI key (a name that is
                // not UTF-8: [`key_of`]).
                for prefix in [r.to_string_lossy().into_owned(), paths::file_uri(r)] {
                    let re = format!("{}/.*", regex::escape(prefix.trim_end_matches('/')));
                    let rq = RegexQuery::from_pattern(&re, f.path)
                        .map_err(|e| query_err(e.to_string()))?;
                    any.push((Occur::Should, Box::new(rq)));
                }
            }
            clauses.push((Occur::Must, Box::new(BooleanQuery::new(any))));
        }
        let query = BooleanQuery::new(clauses);
        let searcher = self.reader.searcher();
        let limit = q.limit.max(1);
        let (top, total) = searcher
            .search(
                &query,
                &(
                    TopDocs::with_limit(limit)
                        .and_offset(q.offset)
                        .order_by_score(),
                    Count,
                ),
            )
            .map_err(|e| self.tantivy_err(e))?;
        let snippets: Vec<SnippetGenerator> = fields
            .iter()
            .filter_map(|&field| {
                let mut g = SnippetGenerator::create(&searcher, &*text_query, field).ok()?;
                g.set_max_num_chars(SNIPPET_CHARS);
                Some(g)
            })
            .collect();
        let mut hits = Vec::with_capacity(top.len());
        let mut names = HashMap::new();
        for (score, addr) in top {
            if let Some(hit) = self.hit(&searcher, addr, score, &snippets, &q.text, &mut names) {
                hits.push(hit);
            }
        }
        let next = q.offset + limit;
        Ok(Found {
            hits,
            total,
            next_cursor: (next < total).then(|| next.to_string()),
        })
    }

    fn hit(
        &self,
        searcher: &tantivy::Searcher,
        addr: DocAddress,
        score: f32,
        snippets: &[SnippetGenerator],
        query: &str,
        names: &mut HashMap<String, Option<String>>,
    ) -> Option<Hit> {
        let f = self.fields;
        let d: TantivyDocument = searcher.doc(addr).ok()?;
        let s = |field| {
            d.get_first(field)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let u = |field| d.get_first(field).and_then(|v| v.as_u64());
        let path = s(f.path)?;
        let format = s(f.format).and_then(|n| Dialect::from_name(&n))?;
        let entry_id = s(f.entry_id)?;
        let kind = s(f.kind).unwrap_or_default();
        let span = LineSpan {
            line: u32::try_from(u(f.line)?).ok()?,
            offset: u(f.offset)?,
            len: u32::try_from(u(f.len)?).ok()?,
        };
        let timestamp = d
            .get_first(f.timestamp)
            .and_then(|v| v.as_i64())
            .map(format_iso);
        let on_default_path = d
            .get_first(f.on_path)
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let text = read_range(
            &path_of(&path),
            span.offset,
            span.offset + u64::from(span.len),
        )
        .ok()
        .and_then(|b| jsstr::parse_value(&b).ok())
        .filter(|v| line_id(format, v).is_none_or(|i| i == entry_id))
        .and_then(|v| entry_text(format, &v));
        let snippet = text.map_or_else(String::new, |t| make_snippet(&t, snippets, query));
        let is_role = !is_entry_type(&kind);
        let name = match names.get(&path) {
            Some(name) => name.clone(),
            None => {
                let name = self.name_of(searcher, &path);
                names.insert(path.clone(), name.clone());
                name
            }
        };
        let path = path_of(&path);
        Some(Hit {
            path_uri: paths::uri_if_not_utf8(&path),
            path,
            format,
            name,
            entry_id,
            line: u64::from(span.line),
            role: is_role.then(|| kind.clone()),
            entry_type: (!is_role).then_some(kind),
            timestamp,
            on_default_path,
            snippet,
            score,
            archive_key: None,
            archived_only: None,
        })
    }
}

impl SearchIndex {
    /// The name of the indexed session `key`: from the state when it is loaded, else from its
    /// state document alone (a hit's session, not every session's).
    fn name_of(&self, searcher: &tantivy::Searcher, key: &str) -> Option<String> {
        self.file_state(searcher, key)?.into_owned().name
    }

    /// What the index knows of the session `key`: from the state when it is loaded, else
    /// from its state document alone, read through `searcher` (none when the stamps hold no
    /// such key). `None` when it is not indexed, or its state document cannot be read (it is
    /// then indexed again from the start, as [`load_state`] leaves such a document out).
    fn file_state(
        &self,
        searcher: &tantivy::Searcher,
        key: &str,
    ) -> Option<std::borrow::Cow<'_, FileState>> {
        if let Some(state) = &self.state {
            return state.files.get(key).map(std::borrow::Cow::Borrowed);
        }
        if self.stamps.get().is_some_and(|s| !s.contains_key(key)) {
            return None;
        }
        let f = self.fields;
        let q = TermQuery::new(
            Term::from_field_text(f.state_path, key),
            IndexRecordOption::Basic,
        );
        let addr = searcher
            .search(&q, &TopDocs::with_limit(1).order_by_score())
            .ok()?
            .into_iter()
            .next()?
            .1;
        let d: TantivyDocument = searcher.doc(addr).ok()?;
        let json = d.get_first(f.state).and_then(|v| v.as_str())?;
        serde_json::from_str::<FileState>(json)
            .ok()
            .map(std::borrow::Cow::Owned)
    }
}

/// Whether the session keyed `key` lies under one of `roots` (as [`Path::starts_with`] tells
/// of its path): on the text of the key where that is the path (a search checks every indexed
/// key), through the path for a URI key.
fn under_any(key: &str, roots: &[PathBuf]) -> bool {
    roots
        .iter()
        .any(|r| match (r.to_str(), key.starts_with("file:")) {
            (Some(root), false) => {
                let root = root.trim_end_matches('/');
                root.is_empty()
                    || key
                        .strip_prefix(root)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            }
            _ => path_of(key).starts_with(r),
        })
}

/// The searchable text of a line of a session of `format`.
fn entry_text(format: Dialect, line: &serde_json::Value) -> Option<EntryText> {
    match format {
        Dialect::Pi => pi::search_text::entry_text(line),
        Dialect::Claude => claude::search_text::entry_text(line),
        Dialect::Codex => crate::dialect::codex::search_text::entry_text(line),
    }
}

/// The id a line of a session of `format` names itself by (pi's `id`, Claude Code's `uuid`;
/// a Codex line's ordinal is no string and is not checked), to tell that a hit's line is still
/// the one indexed.
fn line_id(format: Dialect, line: &serde_json::Value) -> Option<&str> {
    let key = match format {
        Dialect::Pi => "id",
        Dialect::Claude => "uuid",
        Dialect::Codex => return None,
    };
    line.get(key).and_then(serde_json::Value::as_str)
}

/// The state of a session file just read into `session` (its size and inode as `meta` says,
/// the bytes, lines and problems as the read found them), with `leaf` as its default leaf;
/// the dialect's fields (`version`, `name`, `docs`, `path_hash`) are left for the caller.
fn file_state<F: LineFormat>(
    path: &Path,
    meta: &fs::Metadata,
    format: Dialect,
    session: &OpenedSession<F>,
    leaf: Option<NodeIdx>,
) -> Result<FileState, String> {
    let tree = &session.tree;
    let mut problems: Vec<String> = tree.diagnostics().iter().map(|d| d.to_string()).collect();
    if let Some(t) = &session.torn_tail {
        problems.push(format!(
            "torn tail at line {} (byte {}, {} bytes): not indexed until it is complete",
            t.line, t.offset, t.len
        ));
    }
    let indexed = session.position.offset;
    Ok(FileState {
        format,
        size: meta.len(),
        mtime_ns: mtime_ns(meta),
        ino: meta.ino(),
        indexed_bytes: indexed,
        open_tail: session.position.open,
        header_hash: header_hash(path).map_err(|e| e.to_string())?,
        tail_hash: tail_hash(path, indexed).map_err(|e| e.to_string())?,
        version: 0,
        lines: session.position.line,
        leaf_id: leaf.map(|l| tree.node(l).entry.id().to_string()),
        name: None,
        docs: 0,
        problems,
        path_hash: None,
    })
}

/// The snippet of the first field with a highlighted match, matched terms in `**`; without
/// one (a prefix match, which tantivy does not highlight), the text around the first word of
/// the query that occurs, else its start.
///
/// The snippet is looked for in the first [`SNIPPET_WINDOW`] bytes of a field first, and in the
/// whole field only when that part has no match: tokenizing a 64 KiB tool result for every hit
/// of a frequent word was most of such a query's time.
fn make_snippet(t: &EntryText, generators: &[SnippetGenerator], query: &str) -> String {
    let texts = [t.text.as_str(), t.thinking.as_str()];
    for (g, text) in generators.iter().zip(texts) {
        let mut sn = g.snippet(head(text, SNIPPET_WINDOW));
        if sn.highlighted().is_empty() && text.len() > SNIPPET_WINDOW {
            sn = g.snippet(text);
        }
        if !sn.highlighted().is_empty() {
            let frag = sn.fragment();
            let mut out = String::with_capacity(frag.len() + 8);
            let mut at = 0;
            for r in sn.highlighted() {
                if r.start < at || r.end > frag.len() {
                    continue;
                }
                out.push_str(&frag[at..r.start]);
                out.push_str("**");
                out.push_str(&frag[r.clone()]);
                out.push_str("**");
                at = r.end;
            }
            out.push_str(&frag[at..]);
            return one_line(&out);
        }
    }
    let window = head(&t.text, SNIPPET_WINDOW).to_lowercase();
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let lower = if words.iter().any(|w| window.contains(w.as_str())) {
        window
    } else {
        t.text.to_lowercase()
    };
    let start = words
        .iter()
        .find_map(|w| lower.find(w.as_str()))
        .unwrap_or(0);
    let start = start.min(t.text.len());
    let mut from = start.saturating_sub(40);
    while !t.text.is_char_boundary(from) {
        from -= 1;
    }
    let rest: String = t
        .text
        .get(from..)
        .unwrap_or("")
        .chars()
        .take(SNIPPET_CHARS)
        .collect();
    one_line(&rest)
}

/// Bytes of a field's text a snippet is first looked for in (see [`make_snippet`]).
const SNIPPET_WINDOW: usize = 4096;

/// The first `n` bytes of `text`, cut back to a character boundary.
fn head(text: &str, n: usize) -> &str {
    let mut end = n.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The key a session file is indexed under (its documents' `path`, its state's `statePath`):
/// the path as text when it is UTF-8, else its `file://` URI, which names its bytes exactly
/// ([`paths::file_uri`]; a path sessiond indexes is absolute, so the two never meet).
fn key_of(path: &Path) -> String {
    path.to_str()
        .map_or_else(|| paths::file_uri(path), str::to_owned)
}

/// The session file a key ([`key_of`]) names.
fn path_of(key: &str) -> PathBuf {
    paths::from_wire(key)
}

/// What the user typed as a query: with its operators (`"phrases"`, `-word`, `+word`, `a OR b`,
/// `prefix*`, parentheses) where it is valid query syntax, else as plain words — never an
/// error. A word with a colon is always text (`src/lib.rs:42`, `std::io::Error`, `http://x`):
/// tantivy would read `name:` as a field, which is not a search operator sessiond offers. A
/// query the parser refuses (`fn(x)`, `a^b`, an unclosed quote) is searched as its
/// whitespace-separated words, each as a phrase of its tokens (`fn(x)` finds `fn` followed by
/// `x`), all of them required; a query with no word left finds nothing.
fn user_query(parser: &QueryParser, text: &str, thinking: bool) -> Box<dyn Query> {
    let operators = rewrite_prefixes(&quote_colons(text), thinking);
    if let Ok(q) = parser.parse_query(&operators) {
        return q;
    }
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| w.replace(['"', '\\'], " "))
        .filter(|w| !w.trim().is_empty())
        .map(|w| format!("\"{}\"", w.trim()))
        .collect();
    parser
        .parse_query(&words.join(" "))
        .unwrap_or_else(|_| Box::new(tantivy::query::EmptyQuery))
}

/// Each bare word (outside a phrase) that holds a colon quoted as a phrase, its sign kept:
/// `-a:b` becomes `-"a:b"` (see [`user_query`]).
fn quote_colons(q: &str) -> String {
    let mut out = Vec::new();
    let mut in_quote = false;
    for tok in q.split(' ') {
        let quotes = tok.matches('"').count();
        if !in_quote && quotes == 0 && tok.contains(':') {
            let (sign, word) = match tok.strip_prefix(['+', '-']) {
                Some(w) => (&tok[..1], w),
                None => ("", tok),
            };
            out.push(format!("{sign}\"{}\"", word.replace('\\', " ")));
        } else {
            out.push(tok.to_owned());
        }
        if quotes % 2 == 1 {
            in_quote = !in_quote;
        }
    }
    out.join(" ")
}

/// Bare `word*` terms become the regex term query `text:/word.*/` (and `thinking:`),
/// lowercased as the index is: tantivy's parser takes patterns only on a named field.
fn rewrite_prefixes(q: &str, thinking: bool) -> String {
    let mut out = Vec::new();
    let mut in_quote = false;
    for tok in q.split(' ') {
        let quotes = tok.matches('"').count();
        let stem = tok.trim_start_matches(['+', '-']);
        let bare = !in_quote
            && quotes == 0
            && stem.len() > 1
            && stem.ends_with('*')
            && stem[..stem.len() - 1]
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
        if bare {
            let (sign, word) = match tok.strip_prefix(['+', '-']) {
                Some(w) => (&tok[..1], w),
                None => ("", tok),
            };
            // A regex over the lowercased terms: `word.*`.
            let w = word.trim_end_matches('*').to_lowercase();
            if thinking {
                out.push(format!("{sign}(text:/{w}.*/ OR thinking:/{w}.*/)"));
            } else {
                out.push(format!("{sign}text:/{w}.*/"));
            }
        } else {
            out.push(tok.to_owned());
        }
        if quotes % 2 == 1 {
            in_quote = !in_quote;
        }
    }
    out.join(" ")
}

/// Creates `dir` and any missing parent with mode 0700 (the index holds session text, SPEC
/// §8); an existing `dir` is left as it is (see [`restrict_to_owner`]).
pub(crate) fn create_owner_only_dirs(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Writes a new file (or replaces one) readable by the owner only.
fn write_owner_only(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    owner_only(path)?;
    f.write_all(bytes)
}

/// Takes the group's and others' permission bits off `path` (a file keeps its owner's).
fn owner_only(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::symlink_metadata(path)?.permissions().mode();
    if mode & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

/// [`owner_only`] for an index directory (sessiond's) and every file directly in it.
fn restrict_to_owner(dir: &Path) -> io::Result<()> {
    owner_only(dir)?;
    for e in fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_file() {
            owner_only(&e.path())?;
        }
    }
    Ok(())
}

/// tantivy's memory-mapped directory with every file it creates readable by the owner only:
/// tantivy creates segment and lock files with the umask's mode (0644 under 022), and they
/// hold session text (SPEC §8). Each new file is restricted right after its creation, before
/// tantivy writes into it; the index directory is 0700 ([`create_owner_only_dirs`]), so no
/// other user can reach a file even in that moment.
#[derive(Clone, Debug)]
struct OwnerOnly {
    inner: tantivy::directory::MmapDirectory,
    /// The directory `inner` opened (its file paths are relative to it).
    root: PathBuf,
}

impl tantivy::directory::Directory for OwnerOnly {
    fn get_file_handle(
        &self,
        path: &Path,
    ) -> Result<
        std::sync::Arc<dyn tantivy::directory::FileHandle>,
        tantivy::directory::error::OpenReadError,
    > {
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), tantivy::directory::error::DeleteError> {
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, tantivy::directory::error::OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(
        &self,
        path: &Path,
    ) -> Result<tantivy::directory::WritePtr, tantivy::directory::error::OpenWriteError> {
        let writer = self.inner.open_write(path)?;
        owner_only(&self.root.join(path)).map_err(|e| {
            tantivy::directory::error::OpenWriteError::wrap_io_error(e, path.to_owned())
        })?;
        Ok(writer)
    }

    fn atomic_read(
        &self,
        path: &Path,
    ) -> Result<Vec<u8>, tantivy::directory::error::OpenReadError> {
        self.inner.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        // Through a temporary file, created 0600; restricted again in case it was not.
        self.inner.atomic_write(path, data)?;
        owner_only(&self.root.join(path))
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.inner.sync_directory()
    }

    fn acquire_lock(
        &self,
        lock: &tantivy::directory::Lock,
    ) -> Result<tantivy::directory::DirectoryLock, tantivy::directory::error::LockError> {
        let held = self.inner.acquire_lock(lock)?;
        // An empty file; restricted all the same.
        let _ = owner_only(&self.root.join(&lock.filepath));
        Ok(held)
    }

    fn watch(
        &self,
        callback: tantivy::directory::WatchCallback,
    ) -> tantivy::Result<tantivy::directory::WatchHandle> {
        self.inner.watch(callback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_with_colons_are_text() {
        assert_eq!(quote_colons("src/lib.rs:42 x"), "\"src/lib.rs:42\" x");
        assert_eq!(quote_colons("-a:b \"c:d\""), "-\"a:b\" \"c:d\"");
    }

    #[test]
    fn prefixes_are_rewritten_outside_phrases() {
        assert_eq!(rewrite_prefixes("Comp* foo", false), "text:/comp.*/ foo");
        assert_eq!(
            rewrite_prefixes("\"a b*\" c*", false),
            "\"a b*\" text:/c.*/"
        );
        assert_eq!(
            rewrite_prefixes("-ab*", true),
            "-(text:/ab.*/ OR thinking:/ab.*/)"
        );
    }
}
