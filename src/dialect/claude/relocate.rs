//! Claude Code transcripts of a moved project (`restore --cwd`): the `cwd` field of every line
//! rewritten, and the file placed in the projects directory Claude Code derives from the new
//! cwd (every character but ASCII letters and digits as `-`), subagent transcripts keeping their
//! place below their session's directory.

use std::path::{Path, PathBuf};

/// The directory under `projects/` that Claude Code keeps `cwd`'s transcripts in.
pub fn project_dir_name(cwd: &str) -> String {
    cwd.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// `bytes` (a transcript archived from `source` under `root`) with every line's `cwd` that is
/// the session's cwd (or below it) set to `new_cwd` (or below it), and its path under the
/// projects directory for `new_cwd`. Errors: no line records a cwd.
pub fn moved(
    source: &Path,
    root: &Path,
    bytes: Vec<u8>,
    new_cwd: &str,
) -> Result<(PathBuf, Vec<u8>), String> {
    let old = bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .find_map(|v| v.get("cwd").and_then(|c| c.as_str()).map(str::to_owned))
        .ok_or("no line of the transcript records a cwd")?;
    let mut out = Vec::with_capacity(bytes.len());
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        out.extend(crate::core::raw_object::rewrite_path_field(
            line, "cwd", &old, new_cwd,
        ));
    }
    // `<projects>/<project dir>/<rest>`: the project dir is the ancestor whose parent is the
    // projects directory (named `projects`, or the root it was archived from).
    let project = source
        .ancestors()
        .skip(1)
        .find(|a| {
            a.parent()
                .is_some_and(|p| p == root || p.file_name().is_some_and(|n| n == "projects"))
        })
        .ok_or("the transcript is not in a project directory")?;
    let projects = project.parent().ok_or("no projects directory")?;
    let rest = source
        .strip_prefix(project)
        .map_err(|_| "the transcript is not in its project directory")?;
    Ok((projects.join(project_dir_name(new_cwd)).join(rest), out))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn lines_and_place_follow_the_new_cwd() {
        let bytes = b"{\"type\":\"user\",\"cwd\":\"/old/p\",\"x\":1}\n{\"type\":\"assistant\",\"cwd\":\"/old/p/sub\"}\n".to_vec();
        let (path, out) = super::moved(
            Path::new("/h/.claude/projects/-old-p/s1/subagents/agent-a.jsonl"),
            Path::new("/h/.claude/projects"),
            bytes,
            "/new/q.r",
        )
        .unwrap();
        assert_eq!(
            path,
            Path::new("/h/.claude/projects/-new-q-r/s1/subagents/agent-a.jsonl")
        );
        assert_eq!(
            out,
            b"{\"type\":\"user\",\"cwd\":\"/new/q.r\",\"x\":1}\n{\"type\":\"assistant\",\"cwd\":\"/new/q.r/sub\"}\n".to_vec()
        );
    }
}
