//! Is an agent working on a session file right now? Found through `/proc` (Linux), for
//! refusing context-changing writes that would land beside a running agent (SPEC §4) and for
//! telling editors "agent running".
//!
//! pi takes no lock and never re-reads its file while it runs, and it does not keep the file
//! open either: every entry is one `appendFileSync` (open, write, close). So an open file
//! descriptor alone rarely shows pi. Three kinds of evidence are used, most precise first:
//!
//! 1. [`Evidence::HoldsFile`]: a process other than this one holds the file open for writing
//!    (`/proc/PID/fd` names it, `/proc/PID/fdinfo` has `O_WRONLY` or `O_RDWR`) — an agent that
//!    keeps its file open, or pi caught in the middle of an append.
//! 2. [`Evidence::ToolEnvironment`]: a process has `PI_SESSION_FILE` naming the file in its
//!    environment — a tool pi is running for this session (pi sets it for its `bash` tool).
//!    The agent reported is the nearest ancestor named `pi`, else the process itself.
//! 3. [`Evidence::SessionCwd`]: a process named `pi` runs in the session's `cwd` while the
//!    session's turn is open (its last message is a user message, a tool result, or an
//!    assistant message that stopped for tool use: pi is about to append) and the file was
//!    modified within [`RECENT`]. pi's command line is not readable (pi overwrites it with its
//!    title), so this is the only sign of a pi waiting for its model. Claude Code (process
//!    `claude`, or `claude.exe` as its npm package installs it) does not keep its transcript
//!    open either; a rewind of a transcript asks for it the same way ([`CLAUDE_NAMES`], with
//!    the transcript's own open turn and `cwd`).
//!
//! A pi that is idle between prompts is not "active" (no open turn): writes then are allowed,
//! although an interactive pi would still continue from its own leaf on its next prompt.
//! Elsewhere than Linux nothing is found.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use crate::dialect::pi::Pi;
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::{EntryKind, Role};
use crate::storage::reader::OpenedSession;

/// How recently the file must have been modified for [`Evidence::SessionCwd`] to count.
pub const RECENT: Duration = Duration::from_secs(600);

/// The name pi gives its process (its `process.title`).
const PI_COMM: &str = "pi";

/// The process names of pi, for [`Probe::agent_names`].
pub const PI_NAMES: &[&str] = &[PI_COMM];

/// The process names of Claude Code (`claude`; `claude.exe`, the native binary its npm package
/// installs), for [`Probe::agent_names`].
pub const CLAUDE_NAMES: &[&str] = &["claude", "claude.exe"];

/// Why a process is taken to be an agent working on the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// It holds the file open for writing.
    HoldsFile,
    /// One of its tool processes has `PI_SESSION_FILE` naming the file.
    ToolEnvironment,
    /// A `pi` in the session's cwd while the session's turn is open.
    SessionCwd,
    /// It holds the agent's writer lock on the session (Codex's
    /// `thread-writer-locks/<thread id>.lock`, an exclusive `flock`, seen in `/proc/locks`).
    WriterLock,
}

impl Evidence {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::HoldsFile => "holdsFile",
            Evidence::ToolEnvironment => "toolEnvironment",
            Evidence::SessionCwd => "sessionCwd",
            Evidence::WriterLock => "writerLock",
        }
    }
}

/// A process found working on a session file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agent {
    /// Its process id.
    pub pid: u32,
    /// Its name as the kernel keeps it (`/proc/PID/comm`, at most 15 bytes), e.g. `pi`. The
    /// command line is not reported: it may hold credentials.
    pub command: String,
    /// Why it counts.
    pub evidence: Evidence,
}

/// `an agent is working on the session (pid 4242, pi, sessionCwd)`: how a refused write names
/// the agent, in the daemon's error and the CLI's alike.
impl std::fmt::Display for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "an agent is working on the session (pid {}, {}, {})",
            self.pid,
            self.command,
            self.evidence.as_str()
        )
    }
}

/// What is known about the session for [`detect`].
#[derive(Clone, Debug)]
pub struct Probe<'a> {
    /// The session file (canonical path).
    pub path: &'a Path,
    /// The header's `cwd`, if it has one.
    pub cwd: Option<&'a str>,
    /// Whether the session's turn is open (see the module docs).
    pub turn_open: bool,
    /// The names of the agent's process looked for in `cwd` ([`Evidence::SessionCwd`]).
    pub agent_names: &'a [&'a str],
    /// The file's modification time.
    pub mtime: Option<SystemTime>,
    /// The lock file the agent holds while it writes the session (Codex's writer lock), when
    /// the session's agent takes one. Only looked at, never locked: a lock sessiond held would
    /// itself keep the agent from writing.
    pub writer_lock: Option<PathBuf>,
}

/// Whether the session's turn is open: its last message is a user message, a tool result, or
/// an assistant message that stopped for tool use (pi is about to append; see the module docs).
pub fn turn_open(tree: &Tree) -> bool {
    let last = tree.nodes().iter().rev().find_map(|n| match &n.entry.kind {
        EntryKind::Message(m) => Some(m),
        _ => None,
    });
    last.is_some_and(|m| match m.role {
        Role::User | Role::ToolResult => true,
        Role::Assistant => !m.tool_call_ids().is_empty(),
        _ => false,
    })
}

/// The agent working on a session read into `opened` from `path`, looked up now ([`detect`]):
/// what the CLI's context-changing writes check before they write (SPEC §4).
pub fn detect_on(path: &Path, opened: &OpenedSession<Pi>) -> Option<Agent> {
    detect(&Probe {
        path,
        cwd: opened.tree.header().cwd.as_deref(),
        turn_open: turn_open(&opened.tree),
        agent_names: PI_NAMES,
        mtime: opened.stamp.mtime,
        writer_lock: None,
    })
}

/// The first agent found working on the session, by the evidence of the module docs, most
/// precise first; `None` when there is none (or `/proc` cannot be read). Processes that cannot
/// be inspected (another user's) are passed over. Costs one pass over `/proc`
/// ([`Snapshot::take`]); [`detect_in`] answers from a pass already made.
pub fn detect(probe: &Probe<'_>) -> Option<Agent> {
    detect_in(&Snapshot::take(), probe)
}

/// One pass over `/proc`, shared by every session that asks within its age ([`shared`]): per
/// process (this one left out) its name, the paths of its open file descriptors, and the
/// session file its environment names (`PI_SESSION_FILE`). What only a few processes need
/// (write flags of a matching descriptor, a `pi`'s working directory, the parent chain) is
/// read when a probe asks.
#[derive(Debug)]
pub struct Snapshot {
    taken: Instant,
    procs: Vec<Proc>,
}

#[derive(Debug)]
struct Proc {
    pid: u32,
    comm: Option<String>,
    /// Open descriptors naming a path: (descriptor number, target).
    files: Vec<(String, PathBuf)>,
    /// The value of `PI_SESSION_FILE` in its environment.
    session_file: Option<Vec<u8>>,
}

impl Snapshot {
    /// Looks at every process now.
    pub fn take() -> Snapshot {
        let me = std::process::id();
        let procs = pids()
            .into_iter()
            .filter(|pid| *pid != me)
            .map(|pid| Proc {
                pid,
                comm: comm(pid),
                files: open_paths(pid),
                session_file: environ_value(pid, b"PI_SESSION_FILE="),
            })
            .collect();
        Snapshot {
            taken: Instant::now(),
            procs,
        }
    }

    /// How long ago the pass was made.
    pub fn age(&self) -> Duration {
        self.taken.elapsed()
    }
}

/// The daemon-wide pass over `/proc`, at most `max_age` old: every open session reports its
/// `agent` with each change, and hundreds of busy sessions would otherwise make hundreds of
/// passes a second.
///
/// A pass costs about 50 µs per process (3.4–4.6 ms with 77 processes), so it is kept off the
/// request path: while sessions keep asking (within twice `max_age`), a thread of its own
/// (`refresh`) takes the next pass when the current one is three quarters of `max_age` old.
/// A caller finds a pass older than `max_age` only when nothing asked for a while (or the
/// thread could not start); it then takes one itself, under the lock, so sessions asking at
/// once wait for one pass instead of making one each.
pub fn shared(max_age: Duration) -> Arc<Snapshot> {
    let state = &*SHARED;
    {
        // The refresher keeps the smallest age asked for recently, and is woken when a caller
        // asks for a smaller one (or when it is idle).
        let mut asked = state.asked.lock().unwrap_or_else(PoisonError::into_inner);
        let (tighter, age) = match *asked {
            Some((_, kept)) if kept <= max_age => (false, kept),
            _ => (true, max_age),
        };
        *asked = Some((Instant::now(), age));
        if tighter {
            state.wake.notify_one();
        }
    }
    state.start_refresher();
    let mut current = state.current.lock().unwrap_or_else(PoisonError::into_inner);
    match &*current {
        Some(s) if s.age() < max_age => s.clone(),
        _ => {
            let fresh = Arc::new(Snapshot::take());
            *current = Some(fresh.clone());
            fresh
        }
    }
}

/// The state behind [`shared`].
struct Shared {
    /// The latest pass.
    current: Mutex<Option<Arc<Snapshot>>>,
    /// When a session last asked, and the smallest age asked for since the refresher was
    /// last idle; `None` once nobody asked for twice that age (the refresher then waits on
    /// `wake`).
    asked: Mutex<Option<(Instant, Duration)>>,
    wake: std::sync::Condvar,
    started: std::sync::Once,
}

static SHARED: std::sync::LazyLock<Shared> = std::sync::LazyLock::new(|| Shared {
    current: Mutex::new(None),
    asked: Mutex::new(None),
    wake: std::sync::Condvar::new(),
    started: std::sync::Once::new(),
});

impl Shared {
    /// Starts [`refresh`] on a thread of its own, once; without it (the thread could not
    /// start) every stale pass is taken by the caller.
    fn start_refresher(&'static self) {
        self.started.call_once(|| {
            let spawned = std::thread::Builder::new()
                .name("sessiond-agents".into())
                .spawn(move || refresh(self));
            if let Err(e) = spawned {
                tracing::warn!("cannot start the agent lookup's thread: {e}");
            }
        });
    }
}

/// Keeps [`Shared::current`] younger than the age sessions accept while they keep asking:
/// the next pass is taken at three quarters of that age. Waits on `wake` (never polls) while
/// nobody asks and between passes.
fn refresh(state: &Shared) {
    loop {
        let max_age = {
            let mut asked = state.asked.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                match *asked {
                    Some((at, max_age)) if at.elapsed() <= 2 * max_age => break max_age,
                    Some(_) => *asked = None,
                    None => {}
                }
                asked = state
                    .wake
                    .wait(asked)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        let due = max_age * 3 / 4;
        let age = state
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|s| s.age());
        match age {
            Some(age) if age < due => {
                // Until the pass is due, or a caller asks for a smaller age; checked under
                // the lock its notification takes, so none is missed.
                let asked = state.asked.lock().unwrap_or_else(PoisonError::into_inner);
                if asked.map(|(_, kept)| kept) == Some(max_age) {
                    let _ = state.wake.wait_timeout(asked, due - age);
                }
            }
            _ => {
                // Taken outside the lock: callers meanwhile get the pass before it.
                let fresh = Arc::new(Snapshot::take());
                *state.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(fresh);
            }
        }
    }
}

/// [`detect`] on a pass already made.
pub fn detect_in(snapshot: &Snapshot, probe: &Probe<'_>) -> Option<Agent> {
    if let Some(pid) = probe.writer_lock.as_deref().and_then(lock_holder) {
        return Some(agent(pid, Evidence::WriterLock));
    }
    let cwd = probe.cwd.map(PathBuf::from);
    let cwd_counts = probe.turn_open
        && probe
            .mtime
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_none_or(|age| age < RECENT);
    let mut env_match: Option<u32> = None;
    let mut cwd_match: Option<u32> = None;
    let wanted = probe.path.as_os_str().as_bytes();
    for p in &snapshot.procs {
        let writes = p.files.iter().any(|(fd, target)| {
            target == probe.path
                && std::fs::read_to_string(proc_path(p.pid, &format!("fdinfo/{fd}")))
                    .is_ok_and(|t| writable_flags(&t))
        });
        if writes {
            return Some(agent(p.pid, Evidence::HoldsFile));
        }
        if env_match.is_none() && p.session_file.as_deref() == Some(wanted) {
            env_match = Some(p.pid);
        }
        if cwd_counts
            && cwd_match.is_none()
            && let Some(cwd) = &cwd
            && p.comm
                .as_deref()
                .is_some_and(|c| probe.agent_names.contains(&c))
            && same_dir(&proc_path(p.pid, "cwd"), cwd)
        {
            cwd_match = Some(p.pid);
        }
    }
    if let Some(pid) = env_match {
        let pi = ancestor_named(pid, PI_COMM).unwrap_or(pid);
        return Some(agent(pi, Evidence::ToolEnvironment));
    }
    cwd_match.map(|pid| agent(pid, Evidence::SessionCwd))
}

/// The process holding an exclusive `flock` on `lock` (the lock file's device and inode
/// matched in `/proc/locks`, read now); `None` when the file is gone or nobody holds it (Codex
/// leaves the file behind when it is killed: a stale file is no writer).
pub fn lock_holder(lock: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(lock).ok()?;
    let dev = meta.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let want = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|l| {
        // `1: FLOCK  ADVISORY  WRITE 4242 00:2a:1234 0 EOF`; a waiter's line has `->` first.
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&"FLOCK")
            && f.get(3) == Some(&"WRITE")
            && f.get(5) == Some(&want.as_str()))
        .then(|| f.get(4)?.parse().ok())
        .flatten()
    })
}

fn agent(pid: u32, evidence: Evidence) -> Agent {
    Agent {
        pid,
        command: comm(pid).unwrap_or_default(),
        evidence,
    }
}

fn proc_path(pid: u32, what: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{what}"))
}

/// Every process id under `/proc`.
fn pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}

/// `/proc/PID/comm` without its newline.
fn comm(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(proc_path(pid, "comm")).ok()?;
    Some(text.trim_end_matches('\n').to_owned())
}

/// The parent pid, from `/proc/PID/stat` (the field after the parenthesised name, which may
/// itself hold spaces and parentheses).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(proc_path(pid, "stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The nearest ancestor of `pid` (itself included) whose name is `name`.
fn ancestor_named(pid: u32, name: &str) -> Option<u32> {
    let mut cur = pid;
    // A bounded walk: pid 1 ends it, and a cycle cannot happen but costs nothing to stop.
    for _ in 0..64 {
        if comm(cur).as_deref() == Some(name) {
            return Some(cur);
        }
        match parent(cur) {
            Some(p) if p > 1 && p != cur => cur = p,
            _ => return None,
        }
    }
    None
}

/// The open descriptors of `pid` that name a path (not sockets, pipes or anonymous inodes):
/// (descriptor number, target).
fn open_paths(pid: u32) -> Vec<(String, PathBuf)> {
    let Ok(fds) = std::fs::read_dir(proc_path(pid, "fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            target
                .is_absolute()
                .then(|| (fd.file_name().to_string_lossy().into_owned(), target))
        })
        .collect()
}

/// Whether an fdinfo text's `flags:` (octal) has write access (`O_WRONLY` or `O_RDWR`).
fn writable_flags(fdinfo: &str) -> bool {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| flags & 0o3 != 0)
}

/// The value of the variable `prefix` names (`NAME=`) in `/proc/PID/environ`, if set.
fn environ_value(pid: u32, prefix: &[u8]) -> Option<Vec<u8>> {
    let env = std::fs::read(proc_path(pid, "environ")).ok()?;
    env.split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(prefix))
        .map(<[u8]>::to_vec)
}

/// Whether two directories are the same (by path, or canonically).
fn same_dir(link: &Path, dir: &Path) -> bool {
    let Ok(target) = std::fs::read_link(link) else {
        return false;
    };
    target == dir
        || dir
            .canonicalize()
            .is_ok_and(|c| c == target || c.as_os_str() == OsStr::new(&target))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asked once, the shared pass is renewed by the refresher thread before it is
    /// `max_age` old, with nobody asking again; and what `shared` hands out is never older.
    #[test]
    fn the_shared_pass_is_renewed_off_the_request_path() {
        // Long beside a pass over `/proc` even on a loaded machine: the refresher stops
        // when nobody asked for twice this age, and the first pass is inside that time.
        let max_age = Duration::from_secs(2);
        let first = shared(max_age);
        assert!(first.age() < max_age);
        let current = || {
            SHARED
                .current
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while current().is_some_and(|c| Arc::ptr_eq(&c, &first)) {
            assert!(Instant::now() < deadline, "no pass after the first");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(shared(max_age).age() < max_age);
    }

    #[test]
    fn fdinfo_flags_tell_writers_from_readers() {
        assert!(!writable_flags("pos:\t0\nflags:\t0100000\nmnt_id:\t1\n"));
        assert!(writable_flags("pos:\t0\nflags:\t02102001\n"));
        assert!(writable_flags("pos:\t0\nflags:\t0100002\n"));
        assert!(!writable_flags("pos:\t0\n"));
    }

    /// An empty `s.jsonl` in a temporary folder, by its canonical path.
    fn empty_session() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let file = path.join("s.jsonl");
        std::fs::write(&file, "").unwrap_or_else(|e| panic!("{e}"));
        (dir, file)
    }

    /// A `sleep 5` holding `file` open on descriptor 3 through the shell's `redirect` (`<` to
    /// read, `>>` to write).
    fn holding(file: &Path, redirect: &str) -> std::process::Child {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec 3{redirect}\"$0\"; exec sleep 5"))
            .arg(file)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_process_holding_the_file_for_writing_is_found_and_a_reader_is_not() {
        let (_dir, file) = empty_session();
        let probe = Probe {
            path: &file,
            cwd: None,
            turn_open: false,
            agent_names: PI_NAMES,
            mtime: None,
            writer_lock: None,
        };
        // A child that only reads the file is no agent.
        let mut reader = holding(&file, "<");
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(detect(&probe), None);
        let _ = reader.kill();
        let _ = reader.wait();
        let mut writer = holding(&file, ">>");
        std::thread::sleep(Duration::from_millis(200));
        let found = detect(&probe);
        let _ = writer.kill();
        let _ = writer.wait();
        let found = found.unwrap_or_else(|| panic!("the writer was not found"));
        assert_eq!(found.pid, writer.id());
        assert_eq!(found.evidence, Evidence::HoldsFile);
        assert_eq!(found.command, "sleep");
    }

    #[test]
    fn one_shared_pass_serves_every_session_until_it_is_too_old() {
        let (_dir, file) = empty_session();
        let mut tool = std::process::Command::new("sleep")
            .arg("5")
            .env("PI_SESSION_FILE", &file)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        // Until the child has run `exec`, its environment is still a copy of ours.
        let environ = format!("/proc/{}/environ", tool.id());
        for _ in 0..500 {
            if std::fs::read(&environ)
                .is_ok_and(|env| env.windows(15).any(|w| w == b"PI_SESSION_FILE"))
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let fresh = shared(Duration::ZERO);
        let again = shared(Duration::from_secs(60));
        let other = file.with_file_name("other.jsonl");
        let probe = |path| Probe {
            path,
            cwd: None,
            turn_open: false,
            agent_names: PI_NAMES,
            mtime: None,
            writer_lock: None,
        };
        let found = detect_in(&again, &probe(&file));
        let elsewhere = detect_in(&again, &probe(&other));
        let _ = tool.kill();
        let _ = tool.wait();
        assert!(
            Arc::ptr_eq(&fresh, &again),
            "a pass younger than the limit is reused"
        );
        let found = found.unwrap_or_else(|| panic!("the tool was not found"));
        assert_eq!(found.pid, tool.id());
        assert_eq!(found.evidence, Evidence::ToolEnvironment);
        assert_eq!(elsewhere, None, "the tool names another session");
        // The pass was taken before the tool ended: a pass made now no longer sees it.
        assert_eq!(detect(&probe(&file)), None);
    }

    #[test]
    fn a_held_writer_lock_names_its_holder_and_a_stale_lock_file_names_none() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let lock = dir.path().join("thread.lock");
        std::fs::write(&lock, b"").unwrap_or_else(|e| panic!("{e}"));
        let (_d, file) = empty_session();
        let probe = |lock: &Path| Probe {
            path: &file,
            cwd: None,
            turn_open: false,
            agent_names: PI_NAMES,
            mtime: None,
            writer_lock: Some(lock.to_owned()),
        };
        assert_eq!(lock_holder(&lock), None, "nobody holds it");
        assert_eq!(detect(&probe(&lock)), None);
        // An exclusive flock held by another process, as Codex holds its writer lock.
        // (`-o`: the lock is flock's alone, not inherited by its `sleep`, which ends by itself.)
        let mut holder = std::process::Command::new("flock")
            .args(["-o", "-x"])
            .arg(&lock)
            .args(["sleep", "8"])
            .spawn()
            .unwrap_or_else(|e| panic!("flock: {e}"));
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock_holder(&lock).is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(lock_holder(&lock), Some(holder.id()));
        let found = detect(&probe(&lock)).unwrap_or_else(|| panic!("the holder is found"));
        assert_eq!(
            (found.pid, found.evidence),
            (holder.id(), Evidence::WriterLock)
        );
        assert_eq!(found.command, "flock");
        let _ = holder.kill();
        let _ = holder.wait();
        // The file stays behind; it is no writer.
        assert!(lock.exists());
        assert_eq!(lock_holder(&lock), None);
        assert_eq!(detect(&probe(&lock)), None);
        assert_eq!(lock_holder(&dir.path().join("gone.lock")), None);
    }
}
