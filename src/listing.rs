//! Session listings with what a picker shows: the file's format, size and modification time,
//! and from the whole file what its dialect reads there ([`Overview`]: the session's id, cwd,
//! creation time, name, first prompt, message count, default leaf and context tokens) with the
//! tree's entry and leaf counts. A Claude Code subagent's transcript
//! (`<session>/subagents/agent-<id>.jsonl`) is listed as a session of its own, marked with the
//! transcript that started it ([`Subagent`]).
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

use crate::core::lines::LineFormat;
use crate::core::overview::Overview;
use crate::core::tree::{Mode, TreeEntry};
use crate::dialect::Dialect;
use crate::dialect::claude::{self, Claude, subagent};
use crate::dialect::codex::{self, Codex};
use crate::dialect::pi::{self, Pi};
use crate::js::timestamp;
use crate::storage::reader::{self, FileLines, OpenError, OpenedSession};

/// One session in a `session/list` result (and a line of `sessiond list`): the file's facts
/// and what a picker shows, read from the whole file the way its agent reads it (cached by
/// size, mtime and inode, in this module).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSession {
    /// Canonical session file path, as text (a name that is not UTF-8 shown with U+FFFD).
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub path: PathBuf,
    /// The path's `file://` URI when its name is not UTF-8 (`path` then does not name the file):
    /// what a client sends back as `path` ([`crate::paths`]). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_uri: Option<String>,
    /// The file's format (`pi`, `claude-code`).
    pub format: Dialect,
    /// The session's id: pi's header `id`; a Claude Code transcript's file name stem (the id
    /// `claude --resume` takes; `agent-<id>` for a subagent's).
    pub id: String,
    /// The working directory: pi's header `cwd`; the first `cwd` of a Claude Code transcript.
    pub cwd: Option<String>,
    /// When the session was created, as written: pi's header `timestamp`; the first
    /// `timestamp` of a Claude Code transcript.
    pub created: Value,
    /// The file's modification time, ISO 8601 UTC.
    pub modified: Option<String>,
    /// The file's modification time in milliseconds since the Unix epoch.
    pub modified_ms: Option<i64>,
    /// File size in bytes.
    pub size: u64,
    /// The session name (pi 1.6.0 `getSessionName`: the latest `session_info`, trimmed;
    /// Claude Code: the latest `agent-name`, `custom-title`, `ai-title` or `summary`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The first prompt as the agent's picker finds it (pi's `firstMessage`; Claude Code's
    /// first prompt), as one line of at most 80 code points; `null` when there is none.
    pub first_message: Option<String>,
    /// Message entries in the file, on every branch (pi's `messageCount`; Claude Code's `user`
    /// and `assistant` lines).
    pub message_count: usize,
    /// Entries in the tree (pi's header and Claude Code's bookkeeping lines not counted).
    pub entry_count: usize,
    /// Entries without children.
    pub leaf_count: usize,
    /// The default leaf (pi: the file's last entry; Claude Code: the line `claude --resume`
    /// continues from); `null` when there is none.
    pub leaf_id: Option<String>,
    /// The context size at the default leaf, in tokens, as the agent counts it: pi's
    /// `estimateProjectedContextTokens` (the last assistant usage plus the estimate of what
    /// follows it, or chars/4 of every message); Claude Code's usage of the last response on
    /// the leaf's path (input, cache creation, cache read and output tokens). `null` where pi
    /// would throw, or with no response on the path.
    pub token_estimate: Option<u64>,
    /// Corrupt spots the listing's lenient read skipped or repaired (lines that are not JSON, a
    /// duplicate id, a parent that names no entry, …; the tree's diagnostics): 0 for a clean
    /// file. A file with any is listed as its agent would read it, and strict reads (`check`,
    /// `tree`, `context`) refuse it until `--allow-corrupt`; `check` says where each is.
    pub corruptions: usize,
    /// A Claude Code subagent's transcript: the agent and the transcript that started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent: Option<Subagent>,
}

/// What marks a listed session as a Claude Code subagent's transcript
/// (`<session>/subagents/agent-<agentId>.jsonl`), with its `agent-<agentId>.meta.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Subagent {
    /// The agent's id (the file name's).
    pub agent_id: String,
    /// The transcript of the session that started it (`<session>.jsonl`), whether or not it
    /// is there.
    #[serde(serialize_with = "crate::paths::serialize_lossy")]
    pub parent_path: PathBuf,
    /// The agent's type (`general-purpose`, …), from its metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// What the parent asked of it in a few words, from its metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The parent's `Agent` tool call that started it, from its metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
}

/// Format of the cache file; a file of another version is ignored and rewritten.
/// Version 2: the format and the subagent marks. Version 3: `corruptions`.
const CACHE_VERSION: u32 = 3;

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
    /// Not a readable session (no format sessiond reads, unreadable, not a regular file), with
    /// why when the file was read (the open's error, naming the file: `emptyFile`,
    /// `missingHeader`, …); `None` when the walk that found it could not read its metadata.
    Skipped(Option<String>),
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

/// Cached sessions by path (as text: a path that is not UTF-8 is never kept), hashed with
/// foldhash (a warm listing looks every file up).
type CachedSessions = HashMap<String, CachedSession, foldhash::fast::RandomState>;

#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    sessions: CachedSessions,
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
    sessions: CachedSessions,
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
    /// way its agent reads it: corrupt lines are skipped) and caching the result.
    pub fn list_file(&mut self, path: &Path) -> Listed {
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) => return Listed::Skipped(Some(format!("{}: {e}", path.display()))),
        };
        match self.cached(path, &meta) {
            Some(listed) => listed,
            None => {
                let read = summarize(path);
                self.keep(path, read)
            }
        }
    }

    /// Lists `files`, in their order, as [`ListCache::list_file`] does each, with each file's
    /// metadata taken as it was found (by
    /// [`crate::storage::list::session_files_with_metadata`]; `None`: it could not be read,
    /// the file is skipped), so that an unchanged file is not statted again. The files the
    /// cache does not answer are read on rayon's pool, several at once. Files are independent
    /// and reading one is CPU-bound (parsing its lines), so a cold listing takes every core;
    /// a file of 4 MiB or more also parses its own lines on the same pool
    /// ([`reader`]), which shares the cores out without oversubscribing them.
    pub fn list_found(&mut self, files: &[(PathBuf, Option<fs::Metadata>)]) -> Vec<Listed> {
        use rayon::prelude::*;
        let mut out: Vec<Option<Listed>> = files
            .iter()
            .map(|(p, meta)| match meta {
                Some(meta) => self.cached(p, meta),
                None => Some(Listed::Skipped(None)),
            })
            .collect();
        let misses: Vec<usize> = (0..files.len()).filter(|&i| out[i].is_none()).collect();
        let read: Vec<_> = misses
            .par_iter()
            .with_max_len(1)
            .map(|&i| summarize(&files[i].0))
            .collect();
        for (i, r) in misses.into_iter().zip(read) {
            out[i] = Some(self.keep(&files[i].0, r));
        }
        out.into_iter()
            .map(|l| l.unwrap_or(Listed::Skipped(None)))
            .collect()
    }

    /// The listing of `path` from the cache when `meta`'s stamp is the cached one; `None` when
    /// it must be read.
    fn cached(&self, path: &Path, meta: &fs::Metadata) -> Option<Listed> {
        let stamp = Stamp::of(meta);
        self.sessions
            .get(path.to_str()?)
            .filter(|c| c.stamp == stamp)
            .map(|c| Listed::Session(Box::new(c.session.clone())))
    }

    /// Keeps what reading `path` gave (see [`ListCache::list_file`]) and returns its listing.
    fn keep(&mut self, path: &Path, read: Result<(ListedSession, Stamp), OpenError>) -> Listed {
        self.reads += 1;
        match read {
            // A path that is not UTF-8 is not kept: the cache is JSON, keyed by path as text.
            Ok((session, stamp)) => {
                let Some(key) = path.to_str() else {
                    return Listed::Session(Box::new(session));
                };
                self.sessions.insert(
                    key.to_owned(),
                    CachedSession {
                        stamp,
                        session: session.clone(),
                    },
                );
                self.dirty = true;
                Listed::Session(Box::new(session))
            }
            Err(OpenError::Pending { .. }) => Listed::Pending,
            Err(e) => {
                if path
                    .to_str()
                    .is_some_and(|k| self.sessions.remove(k).is_some())
                {
                    self.dirty = true;
                }
                Listed::Skipped(Some(e.to_string()))
            }
        }
    }

    /// Forgets the cached sessions under `root` whose path is not in `seen` (files deleted
    /// since they were listed).
    pub fn retain_under(&mut self, root: &Path, seen: &HashSet<PathBuf>) {
        let before = self.sessions.len();
        self.sessions
            .retain(|p, _| !Path::new(p).starts_with(root) || seen.contains(Path::new(p)));
        if self.sessions.len() != before {
            self.dirty = true;
        }
    }
}

#[derive(Serialize)]
struct CacheFileRef<'a> {
    version: u32,
    sessions: &'a CachedSessions,
}

/// Reads a whole session file (leniently, as its agent does) and returns its listing and the
/// stamp of the file as opened. Errors: those of [`reader::open_session`] (`Pending` for a
/// file being created, `Corrupt` for one of no format sessiond reads, I/O).
pub fn summarize(path: &Path) -> Result<(ListedSession, Stamp), OpenError> {
    let file = reader::open_regular(path)?;
    let format = reader::sniff_file(path, &file)?;
    let lines = FileLines::open(path)
        .map(FileLines::read_ahead)
        .map_err(|source| OpenError::Io {
            path: path.to_owned(),
            source,
        })?;
    Ok(match format {
        Dialect::Pi => {
            let session = reader::open_session_from::<Pi>(path, file, Mode::Lenient)?;
            let overview = pi::overview::overview(&session.tree, &lines);
            listed(path, format, &session, overview, None)
        }
        Dialect::Claude => {
            let session = reader::open_session_from::<Claude>(path, file, Mode::Lenient)?;
            let overview = claude::overview::overview(&session.tree, &lines, path);
            listed(path, format, &session, overview, subagent_of(path))
        }
        Dialect::Codex => {
            let session = reader::open_session_from::<Codex>(path, file, Mode::Lenient)?;
            let overview = codex::overview::overview(&session.tree, &lines);
            listed(path, format, &session, overview, None)
        }
    })
}

/// The listing of a session read as `session`, its dialect's `overview` of it, and the stamp
/// of the file it was read from.
fn listed<F: LineFormat>(
    path: &Path,
    format: Dialect,
    session: &OpenedSession<F>,
    overview: Overview,
    subagent: Option<Subagent>,
) -> (ListedSession, Stamp) {
    let tree = &session.tree;
    let since_epoch = session
        .stamp
        .mtime
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok());
    let modified_ms = since_epoch.and_then(|d| i64::try_from(d.as_millis()).ok());
    let listed = ListedSession {
        path: path.to_owned(),
        path_uri: crate::paths::uri_if_not_utf8(path),
        format,
        id: overview.id,
        cwd: overview.cwd,
        created: overview.created,
        modified: modified_ms.map(timestamp::format_iso),
        modified_ms,
        size: session.stamp.size,
        name: overview.name,
        first_message: overview.first_message,
        message_count: overview.message_count,
        entry_count: tree.len(),
        leaf_count: tree.leaves().count(),
        leaf_id: overview
            .default_leaf
            .map(|l| tree.node(l).entry.id().to_string()),
        token_estimate: overview.tokens,
        corruptions: tree.diagnostics().len(),
        subagent,
    };
    let stamp = Stamp {
        size: session.stamp.size,
        mtime_ns: since_epoch.and_then(|d| u64::try_from(d.as_nanos()).ok()),
        dev: session.stamp.dev,
        ino: session.stamp.ino,
    };
    (listed, stamp)
}

/// The subagent mark of a Claude Code transcript at `path`, when it is a subagent's: its id
/// and parent from the path, the rest from its `.meta.json` when that can be read (a missing
/// or unreadable metadata file leaves them out).
pub fn subagent_of(path: &Path) -> Option<Subagent> {
    let agent_id = subagent::agent_id(path)?.to_owned();
    let parent_path = subagent::parent_of(path)?;
    let meta = subagent::meta_of(path)
        .and_then(|m| fs::read(m).ok())
        .and_then(|bytes| subagent::parse_meta(&bytes))
        .unwrap_or_default();
    Some(Subagent {
        agent_id,
        parent_path,
        agent_type: meta.agent_type,
        description: meta.description,
        tool_use_id: meta.tool_use_id,
    })
}

/// The subagents' transcripts the Claude Code transcript at `path` started: each
/// `<session>/subagents/agent-<id>.jsonl` beside it with its mark ([`subagent_of`]), in path
/// order. None when the folder is missing or cannot be read.
pub fn subagents_of(path: &Path) -> Vec<(PathBuf, Subagent)> {
    let Some(dir) = subagent::subagents_dir(path) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| subagent::agent_id(p).is_some())
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|f| subagent_of(&f).map(|s| (f, s)))
        .collect()
}
