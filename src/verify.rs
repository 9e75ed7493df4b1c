//! The world-facing half of resume verification ([`crate::core::verify`], over what
//! [`crate::dialect::pi::verify`] and [`crate::dialect::claude::verify`] read): files hashed as
//! they stream (only files up to [`MAX_TEXT_BYTES`] are held, as text), the `git` program,
//! `PATH`, the environment and pi's auth file (`$PI_CODING_AGENT_DIR/auth.json`, default
//! `~/.pi/agent/auth.json`, as pi 1.6.0 `getAuthPath`). No credential value is kept: the auth
//! file is parsed only to see which providers it names.
//!
//! Nothing here executes anything a file controls. The session names a working directory, and
//! that directory (a shared repository, a downloaded archive) may hold a git repository whose
//! configuration names programs for git to run: an fsmonitor hook, clean and process filter
//! drivers (run for files whose stat no longer matches the index), hooks, a pager, transports
//! and `core.sshCommand` (a partial clone fetches missing objects lazily). `git` is therefore
//! run read-only (`GIT_OPTIONAL_LOCKS=0`) with every such option forced off on its command
//! line ([`git_command`]): `core.fsmonitor=false`, `core.hooksPath=/dev/null`, no transport
//! (`protocol.allow=never`, `GIT_NO_LAZY_FETCH`), no pager, submodules not entered, and the
//! `clean`/`smudge`/`process` command of every filter driver the repository's configuration
//! defines (includes followed, as git reads them) set empty, which makes git compare the bytes
//! as they are. A folder of plain files that git would take for a bare repository is refused
//! (`safe.bareRepository=explicit`); no `GIT_*` variable of sessiond's own environment reaches
//! git, nor the system configuration. Reading configuration files executes nothing; git is
//! stopped after [`GIT_TIMEOUT`] in case one of them is a FIFO that never ends.
//!
//! gitoxide was considered and not taken: its status applies the same configured filter
//! drivers (`gix-filter` spawns them), so it would need the same care, at the cost of some
//! hundred crates.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::core::tree::NodeIdx;
use crate::core::verify::{
    AuthState, Collected, FileFacts, FileState, GitState, MAX_TEXT_BYTES, Options, Report, World,
    evaluate,
};
use crate::dialect::pi::Tree;
use crate::dialect::pi::render::{LineSource, RenderError};

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

/// Hashes a file as it streams; keeps its bytes only when it is small. The file is opened
/// without waiting on a FIFO (`O_NONBLOCK`) and judged by the opened descriptor, so a path
/// swapped for a pipe or a directory after a look at it is never read from or waited on. (A
/// symbolic link in a work tree is followed: the file it names is the one the agent read.)
fn read_file(path: &Path) -> FileState {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(crate::storage::reader::NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FileState::Missing,
        Err(e) => return FileState::Unreadable(e.to_string()),
    };
    let meta = match f.metadata() {
        Ok(m) => m,
        Err(e) => return FileState::Unreadable(e.to_string()),
    };
    if !meta.is_file() {
        return FileState::NotAFile;
    }
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

/// How long one `git` command may take before it is stopped (a status of a large work tree
/// takes a few seconds; a configuration that includes a FIFO would never end).
pub const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Configuration forced on every `git` command verification runs, after the repository's own
/// (command-line configuration wins over every file): nothing git can be told to execute
/// while it reads state stays on. See the module docs.
const GIT_FORCED: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.useBuiltinFSMonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("safe.bareRepository", "explicit"),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
];

/// `GIT_*` variables of sessiond's environment that still reach git: where the user keeps
/// their global configuration, and how far up a repository is looked for. Every other one
/// (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, `GIT_CONFIG_PARAMETERS`, `GIT_EXTERNAL_DIFF`,
/// `GIT_SSH_COMMAND`...) would point git at another repository or add configuration.
const GIT_ENV_KEPT: &[&str] = &["GIT_CONFIG_GLOBAL", "GIT_CEILING_DIRECTORIES"];

/// `git -C dir ARGS` made safe to run in a directory a session names (see the module docs):
/// sessiond's `GIT_*` variables removed (but [`GIT_ENV_KEPT`]), [`GIT_FORCED`] and
/// `overrides` given as command-line configuration (`GIT_CONFIG_COUNT`, which takes any key,
/// also one with `=` in its name).
fn git_command(dir: &str, args: &[&str], overrides: &[(String, String)]) -> Command {
    let mut cmd = Command::new("git");
    for (name, _) in std::env::vars_os() {
        if name.as_encoded_bytes().starts_with(b"GIT_")
            && !GIT_ENV_KEPT.iter().any(|k| name == std::ffi::OsStr::new(k))
        {
            cmd.env_remove(name);
        }
    }
    let forced = GIT_FORCED
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .chain(overrides.iter().cloned());
    let mut count = 0usize;
    for (i, (key, value)) in forced.enumerate() {
        cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
            .env(format!("GIT_CONFIG_VALUE_{i}"), value);
        count = i + 1;
    }
    cmd.env("GIT_CONFIG_COUNT", count.to_string())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("LC_ALL", "C")
        .arg("--no-pager")
        .arg("-C")
        .arg(dir)
        .args(args);
    cmd
}

/// Runs `git` read-only in `dir` (see [`git_command`]), stopped after [`GIT_TIMEOUT`]. `Err`
/// when it cannot be started at all, or was stopped (`TimedOut`).
fn git_with(
    dir: &str,
    args: &[&str],
    overrides: &[(String, String)],
) -> Result<std::process::Output, std::io::Error> {
    let mut child = git_command(dir, args, overrides)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Both pipes are drained as git writes (a full pipe would stall it); each reader reports
    // when its pipe closes, which is when git exits.
    let (tx, rx) = std::sync::mpsc::channel::<(bool, Vec<u8>)>();
    for (is_out, pipe) in [
        (
            true,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            false,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            let _ = tx.send((is_out, bytes));
        });
    }
    let deadline = Instant::now() + GIT_TIMEOUT;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((true, bytes)) => stdout = bytes,
            Ok((false, bytes)) => stderr = bytes,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "git {} took longer than {} s",
                        args.join(" "),
                        GIT_TIMEOUT.as_secs()
                    ),
                ));
            }
        }
    }
    let status = child.wait()?;
    Ok(std::process::Output {
        status,
        stdout,
        stderr,
    })
}

/// [`git_with`] without overrides beyond [`GIT_FORCED`].
fn git(dir: &str, args: &[&str]) -> Result<std::process::Output, std::io::Error> {
    git_with(dir, args, &[])
}

/// Overrides that turn off every filter driver the configuration git reads in `top` defines:
/// its `clean`, `smudge` and `process` commands set empty (git then uses the bytes as they
/// are) and `required` false. Reading the configuration runs nothing.
fn filter_overrides(top: &str) -> Vec<(String, String)> {
    let Ok(out) = git(top, &["config", "-z", "--get-regexp", r"^filter\."]) else {
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    // `-z`: each record is `key\nvalue\0`; the key is `filter.<name>.<variable>`.
    for record in out.stdout.split(|&b| b == 0) {
        let key = record.split(|&b| b == b'\n').next().unwrap_or_default();
        let key = String::from_utf8_lossy(key);
        if let Some(name) = key
            .strip_prefix("filter.")
            .and_then(|rest| rest.rsplit_once('.'))
            .map(|(name, _)| name.to_owned())
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    let mut overrides = Vec::new();
    for name in names {
        for (variable, value) in [
            ("clean", ""),
            ("smudge", ""),
            ("process", ""),
            ("required", "false"),
        ] {
            overrides.push((format!("filter.{name}.{variable}"), value.to_owned()));
        }
    }
    overrides
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
        let (top, git_dir) = match git(cwd, &["rev-parse", "--show-toplevel", "--absolute-git-dir"])
        {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return GitState::Unavailable("the git program is not on PATH".into());
            }
            Err(e) => return GitState::Unavailable(format!("git could not be run: {e}")),
            Ok(o) => match stdout_line(&o).as_deref().and_then(|s| s.split_once('\n')) {
                Some((top, dir)) => (top.to_owned(), dir.to_owned()),
                None => {
                    let err = String::from_utf8_lossy(&o.stderr);
                    if err.contains("not a git repository") {
                        return GitState::NotARepo;
                    }
                    return GitState::Unavailable(format!("git rev-parse failed: {}", err.trim()));
                }
            },
        };
        let filters = filter_overrides(&top);
        let head = git(&top, &["rev-parse", "--verify", "-q", "HEAD"])
            .ok()
            .and_then(|o| stdout_line(&o));
        let branch = git(&top, &["branch", "--show-current"])
            .ok()
            .and_then(|o| stdout_line(&o));
        let status = match git_with(
            &top,
            &[
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                "--ignore-submodules=all",
            ],
            &filters,
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
            git_dir,
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

    fn env_path(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    fn exists(&self, path: &str) -> bool {
        Path::new(path).exists()
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

/// Verifies a pi session read into `tree` (lines through `source`) at `leaf` against this
/// machine ([`SystemWorld::from_env`]). `file` names the session in the report. Errors: a
/// line that cannot be read again ([`RenderError`]). Blocking: run it off an async runtime.
pub fn verify_session(
    tree: &Tree,
    leaf: Option<NodeIdx>,
    source: &dyn LineSource,
    file: &Path,
    options: &Options,
) -> Result<Report, RenderError> {
    let collected = crate::dialect::pi::verify::collect(tree, leaf, source)?;
    Ok(evaluate_collected(collected, file, options))
}

/// Checks what a dialect collected against this machine ([`SystemWorld::from_env`]).
/// Blocking: run it off an async runtime.
pub fn evaluate_collected(collected: Collected, file: &Path, options: &Options) -> Report {
    evaluate(
        collected,
        &SystemWorld::from_env(),
        &file.to_string_lossy(),
        options,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A FIFO or a directory where a file was named is no file, told at once (the open does
    /// not wait for a writer); a symbolic link to a file is read as that file.
    #[test]
    fn a_fifo_or_a_directory_is_not_a_file_and_is_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(matches!(read_file(&fifo), FileState::NotAFile));
        assert!(matches!(read_file(dir.path()), FileState::NotAFile));
        assert!(matches!(
            read_file(&dir.path().join("none")),
            FileState::Missing
        ));
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "text").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(!matches!(
            read_file(&link),
            FileState::NotAFile | FileState::Missing | FileState::Unreadable(_)
        ));
    }

    /// Every option that makes git execute something is forced off on the command, after any
    /// filter driver's overrides, with no `GIT_*` variable but those kept.
    #[test]
    fn git_runs_with_every_executing_option_off() {
        let overrides = vec![("filter.a=b.clean".to_owned(), String::new())];
        let cmd = git_command("/w", &["status"], &overrides);
        let env: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .and_then(|(_, v)| v.clone())
        };
        let pairs: Vec<(String, String)> = (0..get("GIT_CONFIG_COUNT").unwrap().parse().unwrap())
            .map(|i: usize| {
                (
                    get(&format!("GIT_CONFIG_KEY_{i}")).unwrap(),
                    get(&format!("GIT_CONFIG_VALUE_{i}")).unwrap(),
                )
            })
            .collect();
        for (k, v) in [
            ("core.fsmonitor", "false"),
            ("core.hooksPath", "/dev/null"),
            ("safe.bareRepository", "explicit"),
            ("protocol.allow", "never"),
            ("filter.a=b.clean", ""),
        ] {
            assert!(
                pairs.contains(&(k.to_owned(), v.to_owned())),
                "{k}: {pairs:?}"
            );
        }
        for (k, v) in [
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("GIT_NO_LAZY_FETCH", "1"),
        ] {
            assert_eq!(get(k).as_deref(), Some(v), "{k}");
        }
        let args: Vec<_> = cmd.get_args().collect();
        assert_eq!(args[..3], ["--no-pager", "-C", "/w"]);
    }
}
