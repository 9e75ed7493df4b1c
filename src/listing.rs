//! Session listings with what a picker shows: the header's id, cwd and timestamp, the file's
//! size and modification time, and from the whole file the session name, the first user
//! message, message, entry and leaf counts and pi's token estimate of the default context.
//!
//! Reading a whole file is what a listing costs, so each listed session is kept in a
//! [`ListCache`] keyed by path and checked by size, modification time (nanoseconds), device and
//! inode: a second listing of unchanged files only stats them. The cache is one JSON file in the
//! user's cache directory ([`default_cache_file`]), shared by the CLI and the daemon, written
//! atomically; a cache that cannot be read is started afresh (it only saves work). Never writes
//! a session file.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::tree::Mode;
use crate::dialect::pi::Pi;
use crate::dialect::pi::Tree;
use crate::dialect::pi::compaction::prepare;
use crate::dialect::pi::format::{EntryKind, Role};
use crate::dialect::pi::render::LineSource;
use crate::dialect::pi::{preview, projection};
use crate::js::{jsstr, timestamp};
use crate::storage::reader::{self, FileLines, OpenError};

/// One session in a `session/list` result (and a line of `sessiond list`): the header's
/// facts, the file's, and what a picker shows, read from the whole file the way pi reads it
/// (cached by size, mtime and inode, in this module).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSession {
    /// Canonical session file path.
    pub path: PathBuf,
    /// The header's `id`.
    pub id: String,
    /// The header's `cwd`, when present and a string.
    pub cwd: Option<String>,
    /// The header's `timestamp`.
    pub created: Value,
    /// The file's modification time, ISO 8601 UTC.
    pub modified: Option<String>,
    /// The file's modification time in milliseconds since the Unix epoch.
    pub modified_ms: Option<i64>,
    /// File size in bytes.
    pub size: u64,
    /// The session name (pi 1.6.0 `getSessionName`: the latest `session_info`, trimmed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// pi's `firstMessage`: the first user message with text, in file order, as one line of
    /// at most 80 code points; `null` when there is none.
    pub first_message: Option<String>,
    /// Message entries in the file (pi's `messageCount`), on every branch.
    pub message_count: usize,
    /// Entries in the tree (the header not counted).
    pub entry_count: usize,
    /// Entries without children.
    pub leaf_count: usize,
    /// The default leaf (the file's last entry); `null` for a session without entries.
    pub leaf_id: Option<String>,
    /// pi's `estimateProjectedContextTokens` of the context at the default leaf (the last
    /// assistant usage plus the estimate of what follows it, or chars/4 of every message);
    /// `null` where pi would throw.
    pub token_estimate: Option<u64>,
}

/// Format of the cache file; a file of another version is ignored and rewritten.
const CACHE_VERSION: u32 = 1;

/// The default cache file: `$XDG_CACHE_HOME/sessiond/list-cache.json`, else
/// `$HOME/.cache/sessiond/list-cache.json` (next to the search index's default directory).
pub fn default_cache_file() -> PathBuf {
    let index = crate::search::default_dir();
    index
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
        .join("list-cache.json")
}

/// What listing one file found.
#[derive(Debug)]
pub enum Listed {
    /// A session (from the cache when the file is unchanged).
    Session(Box<ListedSession>),
    /// A file being created: no complete header yet, modified within the grace period.
    Pending,
    /// Not a readable session (no session header, unreadable, not a regular file).
    Skipped,
}

/// The file facts a cached listing is valid for: size, mtime (ns), device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    size: u64,
    mtime_ns: Option<u64>,
    dev: u64,
    ino: u64,
}

impl Stamp {
    fn of(m: &fs::Metadata) -> Self {
        Stamp {
            size: m.len(),
            mtime_ns: m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .and_then(|d| u64::try_from(d.as_nanos()).ok()),
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct CachedSession {
    stamp: Stamp,
    session: ListedSession,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    sessions: HashMap<PathBuf, CachedSession>,
}

/// True when `file` may be replaced by a cache: it does not exist, or it is a regular file
/// holding a listing cache of some version (`{"version": n, "sessions": ...}`).
fn replaceable(file: &Path) -> std::io::Result<bool> {
    match fs::symlink_metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
        Ok(m) if !m.file_type().is_file() => return Ok(false),
        Ok(_) => {}
    }
    /// The shape every version of the cache has; the sessions are skipped, not built.
    #[derive(Deserialize)]
    struct AnyVersion {
        #[serde(rename = "version")]
        _version: u64,
        #[serde(rename = "sessions")]
        _sessions: serde::de::IgnoredAny,
    }
    let text = fs::read(file)?;
    Ok(serde_json::from_slice::<AnyVersion>(&text).is_ok())
}

/// Listed sessions by path, each valid while its file's size, mtime, device and inode are
/// unchanged. See the module docs.
#[derive(Debug, Default)]
pub struct ListCache {
    sessions: HashMap<PathBuf, CachedSession>,
    dirty: bool,
    /// Files read (not answered from the cache) since the cache was loaded.
    reads: u64,
}

impl ListCache {
    /// Loads the cache from `file`; a missing, unreadable or other-version file gives an
    /// empty cache.
    pub fn load(file: &Path) -> Self {
        let sessions = fs::read(file)
            .ok()
            .and_then(|b| serde_json::from_slice::<CacheFile>(&b).ok())
            .filter(|c| c.version == CACHE_VERSION)
            .map(|c| c.sessions)
            .unwrap_or_default();
        ListCache {
            sessions,
            dirty: false,
            reads: 0,
        }
    }

    /// Writes the cache to `file` (atomically, through a temporary file in its directory)
    /// when it changed since it was loaded or last saved. A `file` that exists and is not a
    /// listing cache (of any version) is never replaced. Errors: I/O, or `AlreadyExists` for
    /// such a file (the cache is then simply not kept).
    pub fn save(&mut self, file: &Path) -> std::io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        if !replaceable(file)? {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the file exists and is not a sessiond listing cache; it is left as it is",
            ));
        }
        let dir = file.parent().unwrap_or(Path::new("."));
        // The cache holds session names and first messages: its directories are 0700 and
        // the file 0600 (the temporary file's mode), SPEC §8.
        crate::search::create_owner_only_dirs(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        let doc = CacheFileRef {
            version: CACHE_VERSION,
            sessions: &self.sessions,
        };
        serde_json::to_writer(std::io::BufWriter::new(tmp.as_file_mut()), &doc)
            .map_err(std::io::Error::other)?;
        tmp.persist(file).map_err(|e| e.error)?;
        self.dirty = false;
        Ok(())
    }

    /// How many files were read in full (not answered from the cache) since the cache was
    /// created or loaded.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// Lists one file: from the cache when its stamp is unchanged, else by reading it (the
    /// way pi reads it: corrupt lines are skipped) and caching the result.
    pub fn list_file(&mut self, path: &Path) -> Listed {
        let Ok(meta) = fs::metadata(path) else {
            return Listed::Skipped;
        };
        let stamp = Stamp::of(&meta);
        if let Some(c) = self.sessions.get(path)
            && c.stamp == stamp
        {
            return Listed::Session(Box::new(c.session.clone()));
        }
        self.reads += 1;
        match summarize(path) {
            Ok((session, stamp)) => {
                self.sessions.insert(
                    path.to_owned(),
                    CachedSession {
                        stamp,
                        session: session.clone(),
                    },
                );
                self.dirty = true;
                Listed::Session(Box::new(session))
            }
            Err(OpenError::Pending { .. }) => Listed::Pending,
            Err(_) => {
                if self.sessions.remove(path).is_some() {
                    self.dirty = true;
                }
                Listed::Skipped
            }
        }
    }

    /// Forgets the cached sessions under `root` whose path is not in `seen` (files deleted
    /// since they were listed).
    pub fn retain_under(&mut self, root: &Path, seen: &HashSet<PathBuf>) {
        let before = self.sessions.len();
        self.sessions
            .retain(|p, _| !p.starts_with(root) || seen.contains(p));
        if self.sessions.len() != before {
            self.dirty = true;
        }
    }
}

#[derive(Serialize)]
struct CacheFileRef<'a> {
    version: u32,
    sessions: &'a HashMap<PathBuf, CachedSession>,
}

/// Reads a whole session file (leniently, as pi does) and returns its listing and the stamp of
/// the file as opened. Errors: those of [`reader::open_session`] (`Pending` for a file being
/// created, `Corrupt` for one whose first line is no session header, I/O).
pub fn summarize(path: &Path) -> Result<(ListedSession, Stamp), OpenError> {
    let session = reader::open_session::<Pi>(path, Mode::Lenient)?;
    let lines = FileLines::open(path)
        .map(FileLines::read_ahead)
        .map_err(|source| OpenError::Io {
            path: path.to_owned(),
            source,
        })?;
    let tree = &session.tree;
    let header = tree.header();
    let modified_ms = session
        .stamp
        .mtime
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_millis()).ok());
    let listed = ListedSession {
        path: path.to_owned(),
        id: header.id.clone(),
        cwd: header.cwd.clone(),
        created: jsstr::parse_value(header.raw.get().as_bytes())
            .ok()
            .and_then(|v| v.get("timestamp").cloned())
            .unwrap_or(Value::Null),
        modified: modified_ms.map(timestamp::format_iso),
        modified_ms,
        size: session.stamp.size,
        name: tree.name().map(str::to_owned),
        first_message: first_user_message(tree, &lines),
        message_count: tree
            .nodes()
            .iter()
            .filter(|n| matches!(n.entry.kind, EntryKind::Message(_)))
            .count(),
        entry_count: tree.len(),
        leaf_count: tree.leaves().count(),
        leaf_id: tree
            .default_leaf()
            .map(|l| tree.node(l).entry.id.to_string()),
        token_estimate: token_estimate(tree, &lines),
    };
    let stamp = Stamp {
        size: session.stamp.size,
        mtime_ns: session
            .stamp
            .mtime
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok()),
        dev: session.stamp.dev,
        ino: session.stamp.ino,
    };
    Ok((listed, stamp))
}

/// pi 1.6.0 `buildSessionInfo`'s `firstMessage`: the text of the first user message in file
/// order whose text (a string content, or its `text` blocks joined by a space) is not empty,
/// as one line of at most 80 code points ([`preview::one_line`]). `None` when there is none
/// (pi shows "(no messages)").
fn first_user_message(tree: &Tree, lines: &dyn LineSource) -> Option<String> {
    for node in tree.nodes() {
        let EntryKind::Message(m) = &node.entry.kind else {
            continue;
        };
        if m.role != Role::User || m.content_missing {
            continue;
        }
        let Ok(bytes) = lines.line(node.entry.span) else {
            continue;
        };
        let Ok(value) = jsstr::parse_value(&bytes) else {
            continue;
        };
        let text = match value.get("message").and_then(|m| m.get("content")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .map(|b| match b.get("text") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" "),
            _ => continue,
        };
        if !text.is_empty() {
            return Some(preview::one_line(&text));
        }
    }
    None
}

/// pi 1.6.0 `estimateProjectedContextTokens(projection, branch).tokens` at the default leaf
/// (the number pi compares with the context window; the compaction code's `tokensBefore`).
/// `None` where pi would throw, or its number is not finite.
fn token_estimate(tree: &Tree, lines: &dyn LineSource) -> Option<u64> {
    let projection = projection::project_path(tree, tree.default_leaf());
    let projected = prepare::projected_entries(tree, &projection, lines).ok()?;
    let tokens = prepare::estimate_projected_context_tokens(&projected).ok()?;
    (tokens.is_finite() && tokens >= 0.0).then_some(tokens as u64)
}
