//! The subagent transcripts beside a Claude Code transcript (`<session>/subagents/agent-<id>.jsonl`
//! with its `agent-<id>.meta.json`, docs/claude-code.md §5.3), read for a view that shows them
//! with their parent (the export). Best effort: a subagent file that cannot be opened or read is
//! left out, never an error of the parent's. Each file is opened through the caller's opener
//! (the daemon's checks the session roots and follows no symlink), read leniently as Claude Code
//! reads it.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::core::tree::Mode;
use crate::dialect::claude::Claude;
use crate::dialect::claude::subagent::{self, Meta};
use crate::storage::reader::{self, FileLines, OpenError, OpenedSession};

/// Largest `.meta.json` read (Claude Code writes a few hundred bytes).
const MAX_META_BYTES: u64 = 64 * 1024;

/// One subagent's transcript, read.
pub struct SubagentFile {
    /// The agent id (`agent-<id>.jsonl`).
    pub agent_id: String,
    /// The transcript's path.
    pub path: PathBuf,
    /// Its metadata (empty when the file is missing or unreadable).
    pub meta: Meta,
    /// The transcript as read (leniently).
    pub session: OpenedSession<Claude>,
    /// Its lines, read again by position.
    pub lines: FileLines,
}

/// Opens a file for reading; the caller's policy (roots, symlinks).
pub type Opener<'a> = &'a dyn Fn(&Path) -> Result<File, OpenError>;

/// The subagent transcripts of the transcript at `transcript`, in file-name order, each opened
/// with `open`; those that cannot be opened or read are left out.
pub fn read(transcript: &Path, open: Opener<'_>) -> Vec<SubagentFile> {
    let Some(dir) = subagent::subagents_dir(transcript) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| subagent::agent_id(p).is_some())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let agent_id = subagent::agent_id(&path)?.to_owned();
            let file = open(&path).ok()?;
            let lines = FileLines::new(file.try_clone().ok()?);
            let session = reader::open_session_from::<Claude>(&path, file, Mode::Lenient).ok()?;
            let meta = subagent::meta_of(&path)
                .and_then(|m| open(&m).ok())
                .and_then(|f| {
                    let mut bytes = Vec::new();
                    f.take(MAX_META_BYTES).read_to_end(&mut bytes).ok()?;
                    subagent::parse_meta(&bytes)
                })
                .unwrap_or_default();
            Some(SubagentFile {
                agent_id,
                path,
                meta,
                session,
                lines,
            })
        })
        .collect()
}

/// The file name of a subagent transcript as a document names it: relative to the parent's
/// directory (`<session>/subagents/agent-<id>.jsonl`).
pub fn shown_name(transcript: &Path, sub: &Path) -> String {
    transcript
        .parent()
        .and_then(|d| sub.strip_prefix(d).ok())
        .unwrap_or(sub)
        .display()
        .to_string()
}
