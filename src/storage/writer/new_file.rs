//! New session files: a fork of a path, and a salvage of a corrupt session. The source is only
//! read; the new file is published atomically under the daemon-wide reservations.

use std::path::{Path, PathBuf};

use uuid::Uuid;

use super::WriteError;
use crate::core::raw_object::RawObject;
use crate::core::tree::Mode;
use crate::dialect::claude::{self, Claude};
use crate::dialect::pi::Pi;
use crate::dialect::pi::Tree;
use crate::dialect::pi::fork::{self, ForkError, LineEdit, NewHeader, Position};
use crate::dialect::pi::format::{CURRENT_VERSION, EntryId, EntryKind, LineSpan};
use crate::dialect::pi::render::{LineSource, RenderError};
use crate::dialect::pi::salvage::{self, Dropped, Link, Reattached, TornLine};
use crate::js::timestamp;
use crate::storage::publish::{self, Reservations};
use crate::storage::reader::{self, FileLines, OpenedSession};

/// A fork request (`session/fork`).
#[derive(Clone, Copy, Debug)]
pub struct ForkRequest<'a> {
    /// The entry the fork is cut at.
    pub entry_id: &'a str,
    /// Whether the new session ends with the entry or at its parent (pi's `before`, to ask again).
    pub position: Position,
    /// Directory of the new file; default: the source's directory.
    pub target_dir: Option<&'a Path>,
    /// The new session id; default: a new UUIDv7 (pi's `createSessionId`).
    pub session_id: Option<&'a str>,
}

/// The result of a fork.
#[derive(Clone, Debug)]
pub struct Forked {
    /// The new session file.
    pub path: PathBuf,
    /// The new file's header `id`.
    pub session_id: String,
    /// The new file's last entry (`None` when it holds none): the last re-created label
    /// when labels were re-chained after the path, else the path's last entry. What
    /// `session/open` of the new file reports as `leafId`.
    pub leaf_id: Option<EntryId>,
    /// Entries in the new file (path entries and re-created labels, not the header), what
    /// `session/open` of the new file reports as `entryCount`.
    pub entry_count: usize,
    /// Label entries on the path that were left out (pi 1.6.0 `createBranchedSession` re-creates
    /// labels after the path instead).
    pub dropped_labels: Vec<EntryId>,
    /// Ids of the label entries re-created after the path, one per labelled kept entry.
    pub new_labels: Vec<EntryId>,
    /// Entries whose line was re-serialized.
    pub rewritten: Vec<EntryId>,
}

/// Forks the session at `path` (already read into `tree`, strictly) into a new file; the
/// source is only read. Errors: `UnknownEntry`, `NotAUserMessage`, `InvalidSessionId`,
/// `Reserved`, `Exists`, `Replaced` (a line changed under us), `Io`.
pub fn fork(
    path: &Path,
    tree: &Tree,
    req: ForkRequest<'_>,
    reservations: &Reservations,
) -> Result<Forked, WriteError> {
    let lines = FileLines::open(path).map_err(WriteError::io(path))?;
    let session_id = new_session_id(req.session_id)?;
    let now = timestamp::now_iso();
    let header = RawObject::parse(tree.header().raw.get().as_bytes()).unwrap_or_default();
    if header.get_str("id").as_deref() == Some(session_id.as_str()) {
        return Err(own_id(&session_id));
    }
    let cwd = header.get("cwd");
    let source = crate::paths::absolute(path);
    let new_header = NewHeader {
        id: &session_id,
        timestamp: &now,
        cwd,
        parent_session: Some(&source.to_string_lossy()),
    };
    let plan = fork::plan_fork(
        tree,
        &lines,
        req.entry_id,
        req.position,
        &new_header,
        &mut Uuid::new_v4,
    )
    .map_err(|e| match e {
        ForkError::UnknownEntry { id } => WriteError::UnknownEntry {
            path: path.to_owned(),
            id,
            role: "fork point",
        },
        ForkError::NotAUserMessage { id } => WriteError::NotAUserMessage {
            path: path.to_owned(),
            id,
        },
        ForkError::Line(RenderError::Io { source, .. }) => WriteError::Io {
            path: path.to_owned(),
            source,
        },
        // A changed line (and never `Emit`: a plan writes nothing).
        ForkError::Line(_) => WriteError::Replaced {
            path: path.to_owned(),
            detail: "a line changed since it was read",
        },
    })?;
    let dir = destination_dir(path, req.target_dir);
    let cwd_text = header
        .get_str("cwd")
        .map(|c| c.into_owned())
        .unwrap_or_default();
    let _reservation = reservations
        .reserve(&cwd_text, &session_id)
        .map_err(WriteError::from_publish)?;
    let name = publish::session_file_name(&now, &session_id);
    let out = publish::publish_new(
        &dir,
        &name,
        &session_id,
        &plan.lines,
        publish::mode_like(path),
    )
    .map_err(WriteError::from_publish)?;
    Ok(Forked {
        path: out,
        session_id,
        entry_count: plan.entry_count(),
        leaf_id: plan.leaf_id,
        dropped_labels: plan.dropped_labels,
        new_labels: plan.new_labels,
        rewritten: plan.rewritten,
    })
}

/// The mode of a forked Claude Code transcript: 0600, as Claude Code writes its transcripts, so
/// that the fork is readable by its owner only and Claude Code can append to it when it resumes.
const TRANSCRIPT_MODE: u32 = 0o600;

/// Forks the Claude Code transcript at `path` (already read into `tree`) into a new transcript
/// `<new id>.jsonl`, in the source's directory (Claude Code's projects directory of its working
/// directory, where `claude --resume <new id>` finds it) unless `req.target_dir` names another;
/// the source is only read. The new file holds the path Claude Code loads to the fork point
/// from the newest compact boundary on it ([`claude::fork`]). `req.position` `Before` forks at
/// the parent of a prompt (a user line Claude Code did not write itself). The new session id
/// is `req.session_id` (a UUID) or a new random UUID, as Claude Code's. Errors:
/// `UnknownEntry`, `NotAUserMessage`, `InvalidSessionId`, `Taken`, `Replaced` (a line changed
/// under us), `Io`.
pub fn fork_transcript(
    path: &Path,
    tree: &claude::Tree,
    req: ForkRequest<'_>,
    reservations: &Reservations,
) -> Result<Forked, WriteError> {
    use crate::dialect::claude::context::ContextError;
    use crate::dialect::claude::format::Kind;
    let lines = FileLines::open(path).map_err(WriteError::io(path))?;
    let unknown = |id: &str| WriteError::UnknownEntry {
        path: path.to_owned(),
        id: id.to_owned(),
        role: "fork point",
    };
    let node = tree
        .find(req.entry_id)
        .ok_or_else(|| unknown(req.entry_id))?;
    let leaf = match req.position {
        Position::At => node,
        Position::Before => {
            let e = &tree.node(node).entry;
            let prompt = matches!(
                e.kind,
                Kind::User {
                    meta: false,
                    compact_summary: false,
                    tool_result: false,
                    ..
                }
            );
            match (prompt, tree.node(node).parent) {
                (true, Some(parent)) => parent,
                _ => {
                    return Err(WriteError::NotAUserMessage {
                        path: path.to_owned(),
                        id: e.id.to_string(),
                    });
                }
            }
        }
    };
    let session_id = match req.session_id {
        None => Uuid::new_v4().to_string(),
        Some(id) => Uuid::parse_str(id)
            .map(|u| u.hyphenated().to_string())
            .map_err(|_| WriteError::InvalidSessionId {
                id: id.to_owned(),
                rule: "a Claude Code session id is a UUID",
            })?,
    };
    // A transcript's session id is its file name's stem.
    if path.file_stem().and_then(|s| s.to_str()) == Some(session_id.as_str()) {
        return Err(own_id(&session_id));
    }
    let size = std::fs::metadata(path).map_err(WriteError::io(path))?.len();
    let mode = claude::fork::last_mode(tree, &lines);
    let plan =
        claude::fork::plan_fork(tree, &lines, leaf, &session_id, Some(size), mode.as_deref())
            .map_err(|e| match e {
                ContextError::Read { source, .. } => WriteError::Io {
                    path: path.to_owned(),
                    source,
                },
                ContextError::Changed { .. } => WriteError::Replaced {
                    path: path.to_owned(),
                    detail: "a line changed since it was read",
                },
                ContextError::Shadowed { id, .. } => WriteError::UnknownEntry {
                    path: path.to_owned(),
                    id: id.to_string(),
                    role: "fork point (a later line with its uuid replaces it)",
                },
                ContextError::NoSuchNode(_) => unknown(req.entry_id),
            })?;
    let dir = destination_dir(path, req.target_dir);
    let _reservation = reservations
        .reserve(plan.cwd.as_deref().unwrap_or_default(), &session_id)
        .map_err(WriteError::from_publish)?;
    let out = publish::publish_new_as::<Claude>(
        &dir,
        &format!("{session_id}.jsonl"),
        &session_id,
        &plan.lines,
        TRANSCRIPT_MODE,
    )
    .map_err(WriteError::from_publish)?;
    // What `session/open` of the new file reports, read from the file itself.
    let written =
        reader::open_session::<Claude>(&out, Mode::Strict).map_err(WriteError::from_open)?;
    let leaf_id =
        claude::default_leaf(&written.tree).map(|n| written.tree.node(n).entry.id.clone());
    Ok(Forked {
        path: out,
        session_id,
        leaf_id,
        entry_count: written.tree.len(),
        dropped_labels: Vec::new(),
        new_labels: Vec::new(),
        rewritten: plan.rewritten,
    })
}

fn destination_dir(source: &Path, target: Option<&Path>) -> PathBuf {
    match target {
        Some(d) => d.to_owned(),
        None => match source.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        },
    }
}

/// The refusal of a requested session id that is the source's own: two sessions would share
/// an id, and the agent would resume either.
fn own_id(id: &str) -> WriteError {
    WriteError::InvalidSessionId {
        id: id.to_owned(),
        rule: "it is the source session's own id; a fork needs an id of its own",
    }
}

/// A requested session id checked as pi's `assertValidSessionId`, or a new UUIDv7.
fn new_session_id(requested: Option<&str>) -> Result<String, WriteError> {
    let Some(id) = requested else {
        return Ok(Uuid::now_v7().to_string());
    };
    let ok_end = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let valid = ok_end(id.chars().next())
        && ok_end(id.chars().last())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(id.to_owned())
    } else {
        Err(WriteError::InvalidSessionId {
            id: id.to_owned(),
            rule: "use letters, digits, '.', '_' and '-', starting and ending with a letter or digit",
        })
    }
}

/// The result of a salvage.
#[derive(Clone, Debug)]
pub struct Salvaged {
    /// The new session file (the source is untouched).
    pub path: PathBuf,
    /// The new file's header `id`.
    pub session_id: String,
    /// Entries written.
    pub kept: usize,
    /// Lines left out of the new file, in source order.
    pub dropped: Vec<Dropped>,
    /// Entries whose parent became their nearest surviving ancestor.
    pub reattached: Vec<Reattached>,
}

/// Writes the readable part of a corrupt (or clean) session into a NEW version-3 file; the
/// source stays byte-identical. Kept: every entry a lenient read keeps (as pi keeps them), the
/// later of two entries with one id (pi's lookups find the later one). Each kept entry's parent
/// is the nearest surviving ancestor: a dropped line that still names its own `id` and
/// `parentId` is stepped over; a parent never seen makes the entry a root; so does a cycle.
/// Errors: `Corrupt` when there is no usable header, `Reserved`/`Exists`/`Io` as for forks.
pub fn salvage(
    path: &Path,
    target_dir: Option<&Path>,
    reservations: &Reservations,
) -> Result<Salvaged, WriteError> {
    super::append::require_writable(path)?;
    let session = reader::open_session::<Pi>(path, Mode::Lenient).map_err(WriteError::from_open)?;
    let tree = &session.tree;
    let source = FileLines::open(path).map_err(WriteError::io(path))?;
    let version = tree.header().version;
    let torn = session.torn_tail.map(|t| TornLine {
        line: t.line,
        offset: t.offset,
        len: t.len,
    });
    let unreadable = salvage::unreadable_lines(tree, torn);
    // What dropped lines still say about the tree: their id and parent, when readable.
    let links = dropped_links(path, &session, &unreadable)?;
    let plan = salvage::plan_salvage(tree, unreadable, &links);

    let header = salvage_header(tree)?;
    let session_id = header.1.clone();
    let mut lines = vec![header.0];
    for &i in &plan.kept {
        let e = &tree.node(i).entry;
        let new_parent = plan.parent[i as usize].map(|p| &tree.node(p).entry.id);
        let first_kept = match &e.kind {
            EntryKind::Compaction {
                first_kept_entry_id,
                ..
            } => first_kept_entry_id.as_ref(),
            _ => None,
        };
        let bytes = reader_line(&source, path, e.span)?;
        let out = fork::edit_line(
            &bytes,
            LineEdit {
                version,
                id: &e.id,
                parent: new_parent,
                first_kept,
            },
        )
        .map_err(|_| WriteError::Replaced {
            path: path.to_owned(),
            detail: "a line changed since it was read",
        })?;
        lines.push(out.into_owned());
    }
    let kept = lines.len() - 1;
    let cwd_text = RawObject::parse(tree.header().raw.get().as_bytes())
        .ok()
        .and_then(|h| h.get_str("cwd").map(|c| c.into_owned()))
        .unwrap_or_default();
    let _reservation = reservations
        .reserve(&cwd_text, &session_id)
        .map_err(WriteError::from_publish)?;
    let dir = destination_dir(path, target_dir);
    let name = publish::session_file_name(&header.2, &session_id);
    let out = publish::publish_new(&dir, &name, &session_id, &lines, publish::mode_like(path))
        .map_err(WriteError::from_publish)?;
    Ok(Salvaged {
        path: out,
        session_id,
        kept,
        dropped: plan.dropped,
        reattached: plan.reattached,
    })
}

fn reader_line(source: &FileLines, path: &Path, span: LineSpan) -> Result<Vec<u8>, WriteError> {
    source
        .line(span)
        .map(|c| c.into_owned())
        .map_err(WriteError::io(path))
}

/// The salvaged file's header: the source header with a new id, version 3 and a new timestamp
/// (other fields, such as `cwd`, kept). Returns (line, id, timestamp).
fn salvage_header(tree: &Tree) -> Result<(Vec<u8>, String, String), WriteError> {
    let mut h = RawObject::parse(tree.header().raw.get().as_bytes()).unwrap_or_default();
    let id = Uuid::now_v7().to_string();
    let now = timestamp::now_iso();
    h.set_value("version", &CURRENT_VERSION);
    h.set_value("id", &id);
    h.set_value("timestamp", &now);
    Ok((h.to_line().into_bytes(), id, now))
}

/// The [`Link`]s of dropped lines that are objects with a string `id`.
fn dropped_links(
    path: &Path,
    session: &OpenedSession<Pi>,
    dropped: &[Dropped],
) -> Result<Vec<Link>, WriteError> {
    if session.tree.header().version < 2 {
        // Version 1 has no ids; the lenient tree already chains each entry to the previous one.
        return Ok(Vec::new());
    }
    let bytes = std::fs::read(path).map_err(WriteError::io(path))?;
    let mut links = Vec::new();
    for d in dropped {
        let Some(rest) = bytes.get(d.offset as usize..) else {
            continue;
        };
        let line = &rest[..memchr::memchr(b'\n', rest).unwrap_or(rest.len())];
        if let Ok(o) = RawObject::parse(line)
            && let Some(id) = o.get_str("id")
        {
            let parent = o.get_str("parentId").map(|p| p.into_owned());
            let parent_json = o
                .get("parentId")
                .filter(|raw| parent.is_none() && raw.get() != "null")
                .map(|raw| raw.get().to_owned());
            links.push(Link {
                id: id.into_owned(),
                parent,
                parent_json,
            });
        }
    }
    Ok(links)
}
