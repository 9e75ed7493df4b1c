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

/// `line` with every `"<field>":"<old>…"` (compact JSON, as the agents write it) whose value
/// is `old` or a path below it given `new` in its place; the rest of the line byte for byte.
pub fn rewrite_path_field(line: &[u8], field: &str, old: &str, new: &str) -> Vec<u8> {
    let quote = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let old_q = quote(old);
    let new_q = quote(new);
    // The value's opening quote and its text, without the closing quote: `old` whole, or
    // followed by `/`.
    let key = format!("\"{field}\":");
    let old_open = &old_q[..old_q.len() - 1];
    let new_open = &new_q[..new_q.len() - 1];
    let mut out = Vec::with_capacity(line.len() + 16);
    let mut rest = line;
    while let Some(at) = memchr::memmem::find(rest, key.as_bytes()) {
        let value = &rest[at + key.len()..];
        out.extend_from_slice(&rest[..at + key.len()]);
        let follows = value.get(old_open.len()).copied();
        if value.starts_with(old_open.as_bytes()) && matches!(follows, Some(b'"' | b'/')) {
            out.extend_from_slice(new_open.as_bytes());
            rest = &value[old_open.len()..];
        } else {
            rest = value;
        }
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::rewrite_path_field;

    #[test]
    fn only_the_old_cwd_and_paths_below_it_change() {
        let line = br#"{"cwd":"/a/b","x":{"cwd":"/a/b/c"},"y":"/a/b","z":{"cwd":"/a/bc"}}"#;
        let out = rewrite_path_field(line, "cwd", "/a/b", "/n");
        assert_eq!(
            out,
            br#"{"cwd":"/n","x":{"cwd":"/n/c"},"y":"/a/b","z":{"cwd":"/a/bc"}}"#.to_vec()
        );
    }
}
