//! The world-facing half of resume verification ([`crate::core::verify`]): files hashed as
//! they stream (only files up to [`MAX_TEXT_BYTES`] are held, as text), the `git` program
//! (read-only commands with `GIT_OPTIONAL_LOCKS=0`, so not even the index is refreshed),
//! `PATH`, the environment and pi's auth file (`$PI_CODING_AGENT_DIR/auth.json`, default
//! `~/.pi/agent/auth.json`, as pi 1.6.0 `getAuthPath`). Nothing here runs anything from a
//! session, and no credential value is kept: the auth file is parsed only to see which
//! providers it names.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::core::render::{LineSource, RenderError};
use crate::core::tree::{NodeIdx, Tree};
use crate::core::verify::{
    self, AuthState, FileFacts, FileState, GitState, MAX_TEXT_BYTES, Options, Report, World,
};

/// Largest auth file read (pi's is a small JSON object).
const MAX_AUTH_BYTES: u64 = 4 * 1024 * 1024;

/// The real world: this machine's files, `git`, `PATH` and environment.
#[derive(Clone, Debug)]
pub struct SystemWorld {
    /// pi's agent directory (holding `auth.json`).
    pub agent_dir: PathBuf,
    /// The home directory, for `~` in tool paths.
    pub home: Option<PathBuf>,
}

impl SystemWorld {
    /// From the environment: `$PI_CODING_AGENT_DIR` (a leading `~` expanded), else
    /// `$HOME/.pi/agent` (pi 1.6.0 `getAgentDir`).
    pub fn from_env() -> Self {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let home_or_root = home.clone().unwrap_or_else(|| PathBuf::from("/"));
        let agent_dir = match std::env::var("PI_CODING_AGENT_DIR")
            .ok()
            .filter(|v| !v.is_empty())
        {
            Some(v) if v == "~" => home_or_root.clone(),
            Some(v) => match v.strip_prefix("~/") {
                Some(rest) => home_or_root.join(rest),
                None => PathBuf::from(v),
            },
            None => home_or_root.join(".pi").join("agent"),
        };
        SystemWorld { agent_dir, home }
    }
}

/// Hashes a file as it streams; keeps its bytes only when it is small.
fn read_file(path: &Path) -> FileState {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FileState::Missing,
        Err(e) => return FileState::Unreadable(e.to_string()),
    };
    if !meta.is_file() {
        return FileState::NotAFile;
    }
    let mut f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return FileState::Unreadable(e.to_string()),
    };
    let mut hasher = Sha256::new();
    let keep = meta.len() <= MAX_TEXT_BYTES;
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                size += n as u64;
                if keep && size <= MAX_TEXT_BYTES {
                    kept.extend_from_slice(&buf[..n]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return FileState::Unreadable(e.to_string()),
        }
    }
    let sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let text = (size <= MAX_TEXT_BYTES).then(|| String::from_utf8_lossy(&kept).into_owned());
    FileState::Present(FileFacts { size, sha256, text })
}

/// Runs `git` read-only in `dir`; `Err` when it cannot be started at all.
fn git(dir: &str, args: &[&str]) -> Result<std::process::Output, std::io::Error> {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
}

fn stdout_line(o: &std::process::Output) -> Option<String> {
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// A path with its directory resolved through symlinks, for comparing with git's paths.
fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = fs::canonicalize(p) {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) => canonical(dir).join(name),
        _ => p.to_owned(),
    }
}

fn executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl World for SystemWorld {
    fn home(&self) -> Option<String> {
        self.home.as_ref().map(|h| h.to_string_lossy().into_owned())
    }

    fn is_dir(&self, path: &str) -> bool {
        Path::new(path).is_dir()
    }

    fn file(&self, path: &str) -> FileState {
        read_file(Path::new(path))
    }

    fn git(&self, cwd: &str, paths: &[String]) -> GitState {
        let top = match git(cwd, &["rev-parse", "--show-toplevel"]) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return GitState::Unavailable("the git program is not on PATH".into());
            }
            Err(e) => return GitState::Unavailable(format!("git could not be run: {e}")),
            Ok(o) => match stdout_line(&o) {
                Some(t) => t,
                None => {
                    let err = String::from_utf8_lossy(&o.stderr);
                    if err.contains("not a git repository") {
                        return GitState::NotARepo;
                    }
                    return GitState::Unavailable(format!("git rev-parse failed: {}", err.trim()));
                }
            },
        };
        let head = git(&top, &["rev-parse", "--verify", "-q", "HEAD"])
            .ok()
            .and_then(|o| stdout_line(&o));
        let branch = git(&top, &["branch", "--show-current"])
            .ok()
            .and_then(|o| stdout_line(&o));
        let status = match git(
            &top,
            &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
        ) {
            Ok(o) if o.status.success() => o.stdout,
            Ok(o) => {
                return GitState::Unavailable(format!(
                    "git status failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
            }
            Err(e) => return GitState::Unavailable(format!("git could not be run: {e}")),
        };
        let top_canon = canonical(Path::new(&top));
        let mut dirty = Vec::new();
        let mut records = status.split(|&b| b == 0).filter(|r| !r.is_empty());
        while let Some(r) = records.next() {
            if r.len() < 4 {
                continue;
            }
            let rel = String::from_utf8_lossy(&r[3..]).into_owned();
            // A rename or copy is followed by its source path.
            if matches!(r[0], b'R' | b'C') {
                records.next();
            }
            dirty.push(top_canon.join(rel));
        }
        let mut dirty_touched = Vec::new();
        let mut matched = std::collections::HashSet::new();
        for p in paths {
            let c = canonical(Path::new(p));
            if let Some(i) = dirty.iter().position(|d| *d == c) {
                if !dirty_touched.contains(p) {
                    dirty_touched.push(p.clone());
                }
                matched.insert(i);
            }
        }
        GitState::Repo {
            toplevel: top,
            branch,
            head,
            dirty_touched,
            dirty_other: dirty.len() - matched.len(),
        }
    }

    fn program_exists(&self, program: &str, cwd: &str) -> bool {
        if program.contains('/') {
            return executable(&Path::new(cwd).join(program));
        }
        std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|dir| executable(&dir.join(program)))
        })
    }

    fn env_set(&self, name: &str) -> bool {
        std::env::var_os(name).is_some_and(|v| !v.is_empty())
    }

    fn auth(&self, provider: &str) -> AuthState {
        let path = self.agent_dir.join("auth.json");
        let mut state = AuthState {
            path: path.to_string_lossy().into_owned(),
            exists: path.is_file(),
            has_provider: false,
        };
        if state.exists
            && let Ok(f) = fs::File::open(&path)
        {
            let mut bytes = Vec::new();
            if f.take(MAX_AUTH_BYTES).read_to_end(&mut bytes).is_ok() {
                // Only the top-level keys are looked at; the parsed values are dropped here.
                let text = String::from_utf8_lossy(&bytes);
                let text = text.strip_prefix('\u{FEFF}').unwrap_or(&text);
                if let Ok(serde_json::Value::Object(map)) =
                    serde_json::from_str::<serde_json::Value>(text)
                {
                    state.has_provider = map.get(provider).is_some_and(|v| !v.is_null());
                }
            }
        }
        state
    }
}

/// Verifies a session read into `tree` (lines through `source`) at `leaf` against this
/// machine ([`SystemWorld::from_env`]). `file` names the session in the report. Errors: a
/// line that cannot be read again ([`RenderError`]). Blocking: run it off an async runtime.
pub fn verify_session(
    tree: &Tree,
    leaf: Option<NodeIdx>,
    source: &dyn LineSource,
    file: &Path,
    options: &Options,
) -> Result<Report, RenderError> {
    let world = SystemWorld::from_env();
    verify::verify(tree, leaf, source, &world, &file.to_string_lossy(), options)
}

/// Checks what [`verify::collect`] read against this machine ([`SystemWorld::from_env`]).
/// Blocking: run it off an async runtime.
pub fn evaluate_collected(collected: verify::Collected, file: &Path, options: &Options) -> Report {
    verify::evaluate(
        collected,
        &SystemWorld::from_env(),
        &file.to_string_lossy(),
        options,
    )
}
