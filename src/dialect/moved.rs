//! Sessions of a moved project: an archived session's bytes rewritten to record a new cwd,
//! and the path where its agent looks for that cwd's sessions (`restore --cwd`). The seam
//! between the format-agnostic archive and the dialects: the format is sniffed from the first
//! line, and each dialect says which fields hold the cwd and where its sessions live.

use std::path::{Path, PathBuf};

use super::{Dialect, Sniffed, sniff};

/// `bytes` (the session file archived from `source`) rewritten for a project now at `new_cwd`,
/// and the path its agent would look for it at. Errors (as text): a format that records no
/// cwd sessiond knows of, or a file whose cwd cannot be found.
pub fn moved_session(
    source: &Path,
    root: &Path,
    bytes: Vec<u8>,
    new_cwd: &Path,
) -> Result<(PathBuf, Vec<u8>), String> {
    let first = bytes
        .split(|b| *b == b'\n')
        .find(|l| !l.trim_ascii().is_empty())
        .unwrap_or_default();
    let new_cwd = new_cwd
        .to_str()
        .ok_or_else(|| format!("{}: the new cwd is not UTF-8", new_cwd.display()))?;
    match sniff(first, true) {
        Sniffed::Known(Dialect::Pi) => super::pi::relocate::moved(source, bytes, new_cwd),
        Sniffed::Known(Dialect::Claude) => {
            super::claude::relocate::moved(source, root, bytes, new_cwd)
        }
        Sniffed::Known(Dialect::Codex) => Err(
            "a Codex rollout: sessiond reads Codex's files only, and --cwd would write one".into(),
        ),
        Sniffed::Undecided | Sniffed::Unknown(_) => Err(
            "not a pi session or a Claude Code transcript: --cwd knows no other format's cwd"
                .into(),
        ),
    }
}
