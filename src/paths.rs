//! Path helpers shared by the layers that take paths from users (session roots, the writer).
//! Lexical only: nothing here touches the disk except reading the working directory (and the
//! environment, for [`xdg_dir`]).
//!
//! Paths on the wire: a path is bytes on Linux, a JSON string is Unicode. Every path sessiond
//! sends is shown as text (`path`, invalid bytes as U+FFFD: [`serialize_lossy`]); one that is not
//! UTF-8 is named exactly beside it by its `file://` URI ([`file_uri`], `pathUri`, each byte
//! outside the URI's unreserved characters percent-encoded), and every `path` a client sends may
//! be such a URI ([`from_wire`]). A path sessiond reads is absolute, so a string that starts with
//! `file://` is never a path of its own.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Deserializer, Serializer};

/// The `file://` URI of an absolute `path`: every byte but ASCII letters, digits, `-._~/`
/// percent-encoded (`/tmp/caf\xe9.jsonl` → `file:///tmp/caf%E9.jsonl`).
pub fn file_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// [`file_uri`] of `path` when its name is not UTF-8 (the text of `path` does not name it), else
/// `None`: the `pathUri` sessiond sends beside a `path`.
pub fn uri_if_not_utf8(path: &Path) -> Option<String> {
    path.to_str().is_none().then(|| file_uri(path))
}

/// A path as a client sends it: a `file://` URI (`file:///…` or `file://localhost/…`) is
/// percent-decoded into the bytes it names; any other string is the path itself. A `%` not
/// followed by two hex digits stays as it is.
pub fn from_wire(s: &str) -> PathBuf {
    let Some(rest) = s
        .strip_prefix("file://")
        .map(|r| r.strip_prefix("localhost").unwrap_or(r))
        .filter(|r| r.starts_with('/'))
    else {
        return PathBuf::from(s);
    };
    let b = rest.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| char::from(c).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'%'));
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// Serializes a path as text, invalid UTF-8 shown as U+FFFD (see the module documentation):
/// for `#[serde(serialize_with)]`, so that a path that is not UTF-8 never fails a result.
pub fn serialize_lossy<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// Serializes paths as [`serialize_lossy`] does each.
pub fn serialize_lossy_all<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(paths.iter().map(|p| p.to_string_lossy()))
}

/// Deserializes a path a client sent ([`from_wire`]): for `#[serde(deserialize_with)]`.
pub fn deserialize_wire<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    String::deserialize(d).map(|s| from_wire(&s))
}

/// `path` made absolute against the working directory and lexically normalized: `.` dropped,
/// `..` removing the component before it (never above `/`). Symlinks are not followed, as in
/// Node's `path.resolve`, which pi uses for session paths. An empty path is the working
/// directory; when the working directory cannot be read (it was deleted), `/` stands in for it.
pub fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `$VAR/sessiond/<name>` for the XDG base directory variable `var` when it holds an absolute
/// path, else `$HOME/<fallback>/sessiond/<name>` (`.` for an unset `HOME`): the XDG base
/// directory rule (`xdg_dir("XDG_CACHE_HOME", ".cache", "index")`).
pub fn xdg_dir(var: &str, fallback: &str, name: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
                .join(fallback)
        })
        .join("sessiond")
        .join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_uri_names_any_bytes() {
        let p = PathBuf::from(OsString::from_vec(b"/tmp/caf\xe9 %x.jsonl".to_vec()));
        assert_eq!(file_uri(&p), "file:///tmp/caf%E9%20%25x.jsonl");
        assert_eq!(from_wire(&file_uri(&p)), p);
        assert_eq!(from_wire("file://localhost/a%2"), PathBuf::from("/a%2"));
        assert_eq!(from_wire("/a/b.jsonl"), PathBuf::from("/a/b.jsonl"));
        assert_eq!(uri_if_not_utf8(Path::new("/a")), None);
    }

    #[test]
    fn normalizes_without_touching_the_disk() {
        assert_eq!(absolute(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(absolute(Path::new("/../x")), PathBuf::from("/x"));
        assert_eq!(absolute(Path::new("/a/b/")), PathBuf::from("/a/b"));
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        assert_eq!(absolute(Path::new("x/../y")), cwd.join("y"));
        assert_eq!(absolute(Path::new("")), cwd);
    }
}
