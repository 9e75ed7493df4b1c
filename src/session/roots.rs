//! Session roots: the only directories the daemon reads or writes under. A path is checked
//! after `..` and symlinks are resolved, so neither can lead outside a root.

use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::paths::absolute;

/// Why a path was refused.
#[derive(Debug, Error)]
pub enum RootError {
    /// The path resolves outside every configured root; the message says how to add one.
    #[error(
        "{}: outside the session roots (add its directory: --root DIR, or initializationOptions.roots)",
        path.display()
    )]
    Outside {
        /// The path as given.
        path: PathBuf,
    },
    /// The path is inside a root but does not exist.
    #[error("{}: file not found", path.display())]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// The path could not be resolved.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The resolution error.
        source: io::Error,
    },
}

/// The configured session roots, each resolved to a canonical directory.
#[derive(Clone, Debug)]
pub struct Roots {
    dirs: Vec<PathBuf>,
}

impl Roots {
    /// Roots from directories, in the order given, each resolved now ([`canonical`]) and
    /// listed once: the same directory given twice (by `--root` and `initializationOptions`,
    /// or through different spellings or symlinks) is one root. A root that does not exist yet
    /// is resolved through its nearest existing ancestor, so it starts to work once it is
    /// created.
    pub fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut unique: Vec<PathBuf> = Vec::new();
        for d in dirs {
            let real = canonical(&d);
            if !unique.contains(&real) {
                unique.push(real);
            }
        }
        Roots { dirs: unique }
    }

    /// pi's sessions directory: `$PI_CODING_AGENT_SESSION_DIR`, else
    /// `$PI_CODING_AGENT_DIR/sessions`, else `~/.pi/agent/sessions` (pi 1.6.0 `getSessionsDir`).
    pub fn default_dir() -> PathBuf {
        let expand = |v: String| match v.strip_prefix("~/") {
            Some(rest) => home().join(rest),
            None if v == "~" => home(),
            None => PathBuf::from(v),
        };
        if let Some(dir) = std::env::var("PI_CODING_AGENT_SESSION_DIR")
            .ok()
            .filter(|v| !v.is_empty())
        {
            return expand(dir);
        }
        if let Some(dir) = std::env::var("PI_CODING_AGENT_DIR")
            .ok()
            .filter(|v| !v.is_empty())
        {
            return expand(dir).join("sessions");
        }
        home().join(".pi").join("agent").join("sessions")
    }

    /// Claude Code's projects directory: `$CLAUDE_CONFIG_DIR/projects`, else
    /// `~/.claude/projects` (where Claude Code 2.1 writes its transcripts).
    pub fn claude_projects_dir() -> PathBuf {
        match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir).join("projects"),
            None => home().join(".claude").join("projects"),
        }
    }

    /// Codex's sessions directory: `$CODEX_HOME/sessions`, else `~/.codex/sessions` (where
    /// Codex CLI writes its rollouts, `docs/codex.md` §1).
    pub fn codex_sessions_dir() -> PathBuf {
        match std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir).join("sessions"),
            None => home().join(".codex").join("sessions"),
        }
    }

    /// The roots when none is configured: every agent's own directory, as that agent finds it —
    /// pi's sessions directory always (it may be created later), Claude Code's projects
    /// directory and Codex's sessions directory when they exist.
    pub fn default_dirs() -> Vec<PathBuf> {
        let mut dirs = vec![Roots::default_dir()];
        for other in [Roots::claude_projects_dir(), Roots::codex_sessions_dir()] {
            if other.is_dir() {
                dirs.push(other);
            }
        }
        dirs
    }

    /// The roots, canonical.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Resolves an existing file or directory path and checks it is inside a root.
    /// Errors: [`RootError::Outside`] (checked first, also for paths that do not exist, so a
    /// probe cannot learn what exists outside the roots), [`RootError::NotFound`].
    pub fn resolve(&self, path: &Path) -> Result<PathBuf, RootError> {
        let abs = absolute(path);
        match std::fs::canonicalize(&abs) {
            Ok(real) if self.contains(&real) => Ok(real),
            Ok(_) => Err(RootError::Outside {
                path: path.to_owned(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Judge the nearest existing ancestor, so a symlinked directory is followed.
                let mut existing = abs.as_path();
                let mut rest = Vec::new();
                while let Some(parent) = existing.parent() {
                    rest.push(existing.file_name().map(PathBuf::from).unwrap_or_default());
                    existing = parent;
                    if let Ok(real) = std::fs::canonicalize(existing) {
                        let mut full = real;
                        full.extend(rest.iter().rev());
                        return Err(if self.contains(&full) {
                            RootError::NotFound {
                                path: path.to_owned(),
                            }
                        } else {
                            RootError::Outside {
                                path: path.to_owned(),
                            }
                        });
                    }
                }
                Err(RootError::Outside {
                    path: path.to_owned(),
                })
            }
            Err(source) => Err(RootError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Whether a canonical path lies inside a root.
    pub fn admits(&self, real: &Path) -> bool {
        self.contains(real)
    }

    fn contains(&self, real: &Path) -> bool {
        self.dirs.iter().any(|d| real.starts_with(d))
    }
}

/// `path` made absolute and resolved (`..`, symlinks): the canonical path when it exists,
/// else the canonical nearest existing ancestor joined with the rest (lexically normalized).
pub fn canonical(path: &Path) -> PathBuf {
    let abs = absolute(path);
    if let Ok(real) = std::fs::canonicalize(&abs) {
        return real;
    }
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    while let Some(parent) = existing.parent() {
        rest.push(existing.file_name().map(PathBuf::from).unwrap_or_default());
        existing = parent;
        if let Ok(mut real) = std::fs::canonicalize(existing) {
            real.extend(rest.iter().rev());
            return real;
        }
    }
    abs
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_dotdot_and_symlinks_out_of_a_root() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&root)?;
        std::fs::create_dir_all(&outside)?;
        std::fs::write(root.join("a.jsonl"), "x")?;
        std::fs::write(outside.join("b.jsonl"), "x")?;
        std::os::unix::fs::symlink(&outside, root.join("link"))?;
        let roots = Roots::new([root.clone()]);
        // Each path under the root as asked for, and what resolving it gives.
        for (rel, want) in [
            ("a.jsonl", "ok"),
            ("../outside/b.jsonl", "outside"),
            ("link/b.jsonl", "outside"),
            ("link/none.jsonl", "outside"),
            ("none.jsonl", "not found"),
        ] {
            let got = match roots.resolve(&root.join(rel)) {
                Ok(_) => "ok",
                Err(RootError::Outside { .. }) => "outside",
                Err(RootError::NotFound { .. }) => "not found",
                Err(e) => panic!("{rel}: {e}"),
            };
            assert_eq!(got, want, "{rel}");
        }
        Ok(())
    }

    #[test]
    fn the_same_directory_is_one_root() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root)?;
        std::os::unix::fs::symlink(&root, tmp.path().join("alias"))?;
        std::os::unix::fs::symlink(tmp.path(), tmp.path().join("up"))?;
        let other = tmp.path().join("other");
        let roots = Roots::new([
            root.clone(),
            tmp.path().join("alias"),
            root.join("."),
            tmp.path().join("root/"),
            tmp.path().join("x/../root"),
            other.clone(),
            // Not there yet: the same missing directory through a symlinked ancestor.
            tmp.path().join("up/other"),
        ]);
        let real = std::fs::canonicalize(&root)?;
        let other_real = std::fs::canonicalize(tmp.path())?.join("other");
        assert_eq!(roots.dirs(), [real, other_real]);
        Ok(())
    }
}
