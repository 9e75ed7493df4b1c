//! pi sessions of a moved project (`restore --cwd`): the header's `cwd` rewritten, and the
//! file placed in the sessions directory pi derives from the new cwd
//! (`--<cwd without its leading '/', '/' '\' ':' as '-'>--`, as pi's session manager names it).

use std::path::{Path, PathBuf};

/// The directory name pi keeps `cwd`'s sessions in.
pub fn session_dir_name(cwd: &str) -> String {
    let trimmed = cwd.strip_prefix(['/', '\\']).unwrap_or(cwd);
    format!("--{}--", trimmed.replace(['/', '\\', ':'], "-"))
}

/// `bytes` (a pi session archived from `source`, `<sessions>/<cwd dir>/<file>`) with its
/// header's cwd set to `new_cwd`, and its path in `new_cwd`'s directory beside the old one.
/// The rest of the file is unchanged, byte for byte. Errors: no header, or one without `cwd`.
pub fn moved(source: &Path, bytes: Vec<u8>, new_cwd: &str) -> Result<(PathBuf, Vec<u8>), String> {
    let end = memchr::memchr(b'\n', &bytes).unwrap_or(bytes.len());
    let header: serde_json::Value = serde_json::from_slice(&bytes[..end])
        .map_err(|e| format!("the session header cannot be read: {e}"))?;
    let old = header
        .get("cwd")
        .and_then(serde_json::Value::as_str)
        .ok_or("the session header has no cwd")?;
    let mut out = crate::core::raw_object::rewrite_path_field(&bytes[..end], "cwd", old, new_cwd);
    out.extend_from_slice(&bytes[end..]);
    let sessions = source
        .parent()
        .and_then(Path::parent)
        .ok_or("the session file is not in a cwd directory")?;
    let name = source.file_name().ok_or("the session file has no name")?;
    Ok((sessions.join(session_dir_name(new_cwd)).join(name), out))
}

#[cfg(test)]
mod tests {
    #[test]
    fn directory_names_follow_pi() {
        assert_eq!(super::session_dir_name("/home/u/p"), "--home-u-p--");
        assert_eq!(super::session_dir_name("C:\\w\\p"), "--C--w-p--");
    }
}
