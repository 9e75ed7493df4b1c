//! pi sessions of a moved project (`restore --cwd`): the header's `cwd` rewritten, and the
//! `cwd` section of the system prompts pi records (`{"role":"system","sections":{"cwd":
//! "<cwd>\n/old\n</cwd>",…}}`, pi 1.6), and the file placed in the sessions directory pi
//! derives from the new cwd (`--<cwd without its leading '/', '/' '\' ':' as '-'>--`, as pi's
//! session manager names it).

use std::path::{Path, PathBuf};

/// The directory name pi keeps `cwd`'s sessions in.
pub fn session_dir_name(cwd: &str) -> String {
    let trimmed = cwd.strip_prefix(['/', '\\']).unwrap_or(cwd);
    format!("--{}--", trimmed.replace(['/', '\\', ':'], "-"))
}

/// `bytes` (a pi session archived from `source`, `<sessions>/<cwd dir>/<file>`) with its
/// header's cwd set to `new_cwd`, and the `cwd` section of every recorded system prompt that
/// names the old cwd set to the new one (as pi would have recorded it there: a resume there then
/// sends the prompt the file holds, with no patch for the cwd), and its path in `new_cwd`'s
/// directory beside the old one. The rest of the file is unchanged, byte for byte. Errors: no
/// header, or one without `cwd`.
pub fn moved(source: &Path, bytes: Vec<u8>, new_cwd: &str) -> Result<(PathBuf, Vec<u8>), String> {
    let end = memchr::memchr(b'\n', &bytes).unwrap_or(bytes.len());
    let header: serde_json::Value = serde_json::from_slice(&bytes[..end])
        .map_err(|e| format!("the session header cannot be read: {e}"))?;
    let old = header
        .get("cwd")
        .and_then(serde_json::Value::as_str)
        .ok_or("the session header has no cwd")?;
    let mut out = crate::core::raw_object::rewrite_path_field(&bytes[..end], "cwd", old, new_cwd);
    out.extend(replace_all(
        &bytes[end..],
        &cwd_section(old),
        &cwd_section(new_cwd),
    ));
    let sessions = source
        .parent()
        .and_then(Path::parent)
        .ok_or("the session file is not in a cwd directory")?;
    let name = source.file_name().ok_or("the session file has no name")?;
    Ok((sessions.join(session_dir_name(new_cwd)).join(name), out))
}

/// The `"cwd":"<cwd>\n…\n</cwd>"` member of a system prompt's sections that pi records for
/// `cwd` (compact JSON, as pi writes it; pi's prompt writes each backslash of the cwd as `/`).
fn cwd_section(cwd: &str) -> Vec<u8> {
    let value = format!("<cwd>\n{}\n</cwd>", cwd.replace('\\', "/"));
    format!("\"cwd\":{}", serde_json::Value::String(value)).into_bytes()
}

/// `bytes` with every `from` replaced by `to`.
fn replace_all(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = memchr::memmem::find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::Path;

    #[test]
    fn the_header_and_the_prompt_s_cwd_section_follow_the_new_cwd() {
        let bytes = concat!(
            r#"{"type":"session","version":3,"id":"s","cwd":"/old/p"}"#,
            "\n",
            r#"{"type":"message","id":"a","message":{"role":"system","content":"","sections":{"preamble":"P","cwd":"<cwd>\n/old/p\n</cwd>"}}}"#,
            "\n",
            r#"{"type":"message","id":"b","message":{"role":"user","content":"cd /old/p; \"cwd\":\"<cwd>\n/old/p/x\n</cwd>\""}}"#,
            "\n",
        );
        let (path, out) = super::moved(
            Path::new("/h/sessions/--old-p--/t_s.jsonl"),
            bytes.as_bytes().to_vec(),
            "/new/q r",
        )
        .unwrap();
        assert_eq!(path, Path::new("/h/sessions/--new-q r--/t_s.jsonl"));
        let want = concat!(
            r#"{"type":"session","version":3,"id":"s","cwd":"/new/q r"}"#,
            "\n",
            r#"{"type":"message","id":"a","message":{"role":"system","content":"","sections":{"preamble":"P","cwd":"<cwd>\n/new/q r\n</cwd>"}}}"#,
            "\n",
            r#"{"type":"message","id":"b","message":{"role":"user","content":"cd /old/p; \"cwd\":\"<cwd>\n/old/p/x\n</cwd>\""}}"#,
            "\n",
        );
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn directory_names_follow_pi() {
        assert_eq!(super::session_dir_name("/home/u/p"), "--home-u-p--");
        assert_eq!(super::session_dir_name("C:\\w\\p"), "--C--w-p--");
    }
}
