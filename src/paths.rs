//! Path helpers shared by the layers that take paths from users (session roots, the writer).
//! Lexical only: nothing here touches the disk except reading the working directory.

use std::path::{Component, Path, PathBuf};

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

#[cfg(test)]
mod tests {
    use super::*;

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
