//! A Codex thread across files (`docs/codex.md` §6): the chain of `history_base` prefixes that
//! a rollout file continues — a fork's parent, a revert segment's earlier history — resolved to
//! files and lines, and the rollout files of a `CODEX_HOME` indexed by history id. The one
//! module of the dialect that reads files: a thread's history is spread over several, found by
//! name under `sessions/` (and `archived_sessions/`). Read only: it opens files for reading
//! and takes no lock, so Codex is never kept from writing.

use std::collections::BTreeMap;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// What goes wrong resolving a thread's files.
#[derive(Debug, thiserror::Error)]
pub enum LineageError {
    /// A file cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A `history_base` names no file with a line that ends at its byte offset and has the
    /// ordinal before its end.
    #[error(
        "{}: history_base names no rollout of history {history_id} with a line ending at byte \
         {end_byte_offset}{}",
        path.display(),
        end_ordinal_exclusive.map_or(String::new(), |o| format!(" and ordinal {}", o.saturating_sub(1)))
    )]
    NoBase {
        /// The file whose `session_meta` holds the `history_base`.
        path: PathBuf,
        /// `history_base.thread_id`.
        history_id: String,
        /// `history_base.end_byte_offset`.
        end_byte_offset: u64,
        /// `history_base.end_ordinal_exclusive`.
        end_ordinal_exclusive: Option<u64>,
    },
    /// The chain of `history_base` prefixes loops or is implausibly deep.
    #[error("{}: the chain of history_base prefixes loops (or is deeper than 64 files)", path.display())]
    Cycle {
        /// The file where it was noticed.
        path: PathBuf,
    },
    /// The leaf is not a line of the file.
    #[error("{}: line {line} is not in the file ({lines} lines)", path.display())]
    NoLine {
        /// The file.
        path: PathBuf,
        /// The 0-based line index asked for.
        line: usize,
        /// Lines in the file.
        lines: usize,
    },
}

/// A rollout file's lines: where each starts and ends, read in one streaming pass (no line is
/// held: a multi-GB rollout costs 16 bytes a line), each line read back from the file when it
/// is asked for.
#[derive(Debug)]
pub struct RolloutFile {
    /// The file.
    pub path: PathBuf,
    file: std::fs::File,
    /// Where each line ends (past its newline); a line starts where the one before ends.
    ends: Ends,
}

/// Line ends in chunks of a fixed size: filled without ever moving what is stored (a vector
/// grown by doubling copies itself and holds up to three times its due for a moment; a
/// million lines are 8 MB).
#[derive(Debug, Default)]
struct Ends {
    chunks: Vec<Vec<u64>>,
    len: usize,
}

impl Ends {
    /// Entries per chunk (512 KiB).
    const CHUNK: usize = 1 << 16;

    fn push(&mut self, end: u64) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < Self::CHUNK => c.push(end),
            _ => {
                let mut c = Vec::with_capacity(Self::CHUNK);
                c.push(end);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    /// The last chunk cut to its length.
    fn shrink_to_fit(&mut self) {
        if let Some(c) = self.chunks.last_mut() {
            c.shrink_to_fit();
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::ops::Index<usize> for Ends {
    type Output = u64;
    fn index(&self, i: usize) -> &u64 {
        &self.chunks[i / Self::CHUNK][i % Self::CHUNK]
    }
}

impl RolloutFile {
    /// Reads `path`'s line boundaries. Errors: `Io`.
    pub fn read(path: &Path) -> Result<RolloutFile, LineageError> {
        let io_err = |source| LineageError::Io {
            path: path.to_owned(),
            source,
        };
        let file = open_rollout(path).map_err(io_err)?;
        let mut ends = Ends::default();
        let mut start = 0u64;
        // One pass: newline positions relative to the file.
        let mut r = io::BufReader::with_capacity(1 << 16, file.try_clone().map_err(io_err)?);
        io::Seek::seek(&mut r, io::SeekFrom::Start(0)).map_err(io_err)?;
        let mut offset = 0u64;
        loop {
            let buf = r.fill_buf().map_err(io_err)?;
            if buf.is_empty() {
                break;
            }
            let n = buf.len();
            for i in memchr::memchr_iter(b'\n', buf) {
                let end = offset + i as u64 + 1;
                ends.push(end);
                start = end;
            }
            offset += n as u64;
            r.consume(n);
        }
        if start < offset {
            ends.push(offset);
        }
        ends.shrink_to_fit();
        Ok(RolloutFile {
            path: path.to_owned(),
            file,
            ends,
        })
    }

    /// Lines in the file (a last line without its newline counts).
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the file has no lines.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Line `i` (0-based) without its newline, read from the file (empty when it cannot be
    /// read).
    pub fn line(&self, i: usize) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let (s, e) = (self.start_of(i), self.ends[i]);
        let mut buf = vec![0u8; (e - s) as usize];
        if self.file.read_exact_at(&mut buf, s).is_err() {
            return Vec::new();
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        buf
    }

    /// Line `i` parsed; `None` for a line that is not a JSON object (torn, corrupt: Codex skips
    /// those too).
    pub fn record(&self, i: usize) -> Option<Value> {
        serde_json::from_slice::<Value>(&self.line(i))
            .ok()
            .filter(Value::is_object)
    }

    /// The byte where line `i` ends (past its newline).
    pub fn end_of(&self, i: usize) -> u64 {
        self.ends[i]
    }

    /// The byte where line `i` starts.
    pub fn start_of(&self, i: usize) -> u64 {
        i.checked_sub(1).map_or(0, |p| self.ends[p])
    }

    /// The `session_meta` payload of the first line, if it is one.
    pub fn meta(&self) -> Option<Value> {
        session_meta(&self.line(0))
    }

    /// Lines `0..=last` read in order in one pass (each without its newline), for a replay that
    /// must not hold the file. Errors: the file cannot be read.
    pub fn for_each_line(&self, last: usize, mut f: impl FnMut(usize, &[u8])) -> io::Result<()> {
        let mut r = io::BufReader::with_capacity(1 << 16, self.file.try_clone()?);
        io::Seek::seek(&mut r, io::SeekFrom::Start(0))?;
        let mut buf = Vec::new();
        for i in 0..=last.min(self.ends.len().saturating_sub(1)) {
            if self.ends.is_empty() {
                break;
            }
            buf.clear();
            r.read_until(b'\n', &mut buf)?;
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            f(i, &buf);
        }
        Ok(())
    }
}

/// The `session_meta` payload of a first line, if it is one.
pub fn session_meta(first: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(first).ok()?;
    (v.get("type")?.as_str()? == "session_meta").then(|| v.get("payload").cloned())?
}

/// The writer lock Codex holds while it writes the thread of a rollout whose first line is
/// `first` (`docs/codex.md` §8): `$CODEX_HOME/thread-writer-locks/<thread id>.lock`.
pub fn writer_lock_of(path: &Path, first: &[u8]) -> Option<PathBuf> {
    let id = session_meta(first)?.get("id")?.as_str()?.to_owned();
    if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
        return None;
    }
    Some(
        codex_home_of(path)
            .join("thread-writer-locks")
            .join(format!("{id}.lock")),
    )
}

/// The `CODEX_HOME` a rollout file belongs to: the directory above the last `sessions` (or
/// `archived_sessions`) of its path; else the file's own directory.
pub fn codex_home_of(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    for anc in abs.ancestors() {
        if matches!(
            anc.file_name().and_then(|n| n.to_str()),
            Some("sessions" | "archived_sessions")
        ) && let Some(home) = anc.parent()
        {
            return home.to_owned();
        }
    }
    abs.parent().map(Path::to_owned).unwrap_or_default()
}

/// The segment id in a revert segment's name (`rollout-<time>-<thread id>_<segment id>.jsonl`).
pub fn segment_id(path: &Path) -> Option<String> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    let (_, seg) = stem.rsplit_once('_')?;
    (seg.len() == 36 && seg.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
        .then(|| seg.to_owned())
}

/// The id a `history_base` names a file by: a revert segment's segment id, else its thread id
/// (`session_meta.id`).
pub fn history_id(path: &Path, meta: Option<&Value>) -> Option<String> {
    segment_id(path).or_else(|| meta?.get("id")?.as_str().map(str::to_owned))
}

/// What a new rollout file is to the thread it continues (`session/didCreate`'s `thread`): a
/// fork (a new thread whose `history_base` takes a prefix of its parent's history) or a revert
/// segment (the same thread, continued from before a reverted turn).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadLink {
    /// `fork` or `segment`.
    pub kind: String,
    /// The file's thread id (`session_meta.id`).
    pub thread_id: Option<String>,
    /// A fork's parent thread (`forked_from_id`).
    pub forked_from_id: Option<String>,
    /// The history its prefix is taken from (`history_base.thread_id`: a thread id, or a
    /// segment's id).
    pub history_id: String,
    /// The ordinal after the prefix (`history_base.end_ordinal_exclusive`).
    pub end_ordinal_exclusive: Option<u64>,
}

impl ThreadLink {
    /// The link a rollout's first line (`session_meta`) states; `None` for a thread's root
    /// file (no `history_base`; a legacy fork copies its parent and has none either).
    pub fn of_first_line(first: &[u8]) -> Option<ThreadLink> {
        let meta = session_meta(first)?;
        let base = HistoryBase::of(&meta)?;
        let s = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_owned);
        let forked_from_id = s("forked_from_id");
        Some(ThreadLink {
            kind: if forked_from_id.is_some() {
                "fork"
            } else {
                "segment"
            }
            .to_owned(),
            thread_id: s("id"),
            forked_from_id,
            history_id: base.history_id,
            end_ordinal_exclusive: base.end_ordinal_exclusive,
        })
    }
}

/// A `session_meta`'s `history_base`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryBase {
    /// The history id of the file whose prefix comes first.
    pub history_id: String,
    /// The ordinal after the prefix's last line.
    pub end_ordinal_exclusive: Option<u64>,
    /// The byte where the prefix ends.
    pub end_byte_offset: u64,
}

impl HistoryBase {
    /// The `history_base` of a `session_meta` payload.
    pub fn of(meta: &Value) -> Option<HistoryBase> {
        let b = meta.get("history_base")?;
        Some(HistoryBase {
            history_id: b.get("thread_id")?.as_str()?.to_owned(),
            end_ordinal_exclusive: b.get("end_ordinal_exclusive").and_then(Value::as_u64),
            end_byte_offset: b.get("end_byte_offset")?.as_u64()?,
        })
    }
}

/// One rollout file of a `CODEX_HOME`, as its first line describes it.
#[derive(Clone, Debug)]
pub struct Indexed {
    /// The file.
    pub path: PathBuf,
    /// Its history id ([`history_id`]).
    pub history_id: String,
    /// Its thread id (`session_meta.id`).
    pub thread_id: Option<String>,
    /// `session_meta.forked_from_id`.
    pub forked_from: Option<String>,
    /// Its `history_base`.
    pub base: Option<HistoryBase>,
}

/// The rollout files of a `CODEX_HOME` by history id.
#[derive(Debug, Default)]
pub struct Index {
    /// Every rollout file, sorted by path.
    pub files: Vec<Indexed>,
    by_history: BTreeMap<String, Vec<usize>>,
}

impl Index {
    /// Scans `home`'s `sessions/` and `archived_sessions/` for `rollout-*.jsonl`, reading each
    /// one's first line. Unreadable files and files without a `session_meta` are left out.
    pub fn scan(home: &Path) -> Index {
        Index::scan_admitted(home, &|_| true)
    }

    /// [`Index::scan`] of the files `admits` lets in only (the daemon's: inside its roots);
    /// no other file is opened.
    pub fn scan_admitted(home: &Path, admits: &dyn Fn(&Path) -> bool) -> Index {
        let mut paths = Vec::new();
        for sub in ["sessions", "archived_sessions"] {
            walk(&home.join(sub), &mut paths);
        }
        paths.retain(|p| admits(p));
        paths.sort();
        let mut index = Index::default();
        for path in paths {
            let Some(meta) = first_line(&path).and_then(|l| session_meta(&l)) else {
                continue;
            };
            let Some(hid) = history_id(&path, Some(&meta)) else {
                continue;
            };
            index
                .by_history
                .entry(hid.clone())
                .or_default()
                .push(index.files.len());
            let s = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_owned);
            index.files.push(Indexed {
                path,
                history_id: hid,
                thread_id: s("id"),
                forked_from: s("forked_from_id"),
                base: HistoryBase::of(&meta),
            });
        }
        index
    }

    /// The files of a history id.
    pub fn of_history(&self, id: &str) -> impl Iterator<Item = &Indexed> {
        self.by_history
            .get(id)
            .into_iter()
            .flatten()
            .map(|&i| &self.files[i])
    }

    /// The files of a thread (its root file and its revert segments), sorted by path.
    pub fn of_thread<'a>(&'a self, thread: &'a str) -> impl Iterator<Item = &'a Indexed> {
        self.files
            .iter()
            .filter(move |f| f.thread_id.as_deref() == Some(thread))
    }

    /// The file at `path`.
    pub fn get(&self, path: &Path) -> Option<&Indexed> {
        self.files.iter().find(|f| same_file(&f.path, path))
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    abs(a) == abs(b)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, out),
            Ok(t) if t.is_file() => {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("rollout-") && name.ends_with(".jsonl") {
                    out.push(p);
                }
            }
            _ => {}
        }
    }
}

/// Opens a rollout file for reading without following a symbolic link in its last component
/// and without waiting on a FIFO (`O_NOFOLLOW | O_NONBLOCK`), and refuses what the descriptor
/// shows is no regular file: a file swapped for a link or a pipe between the directory walk
/// and the open is not read. Errors: the open's, or `InvalidInput` for no regular file.
pub fn open_rollout(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a regular file", path.display()),
        ));
    }
    Ok(file)
}

fn first_line(path: &Path) -> Option<Vec<u8>> {
    let f = open_rollout(path).ok()?;
    let mut r = io::BufReader::new(f);
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).ok()?;
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    Some(line)
}

/// One file of a chain: the file and the last line of it that belongs to the history.
#[derive(Debug)]
pub struct Link {
    /// The file, read.
    pub file: RolloutFile,
    /// Its history id.
    pub history_id: Option<String>,
    /// The last line (0-based) of the file in the history.
    pub last_line: usize,
    /// The `history_base` that names this file's prefix (`None` for the leaf's own file).
    pub cut_by: Option<HistoryBase>,
}

/// The files a history is read from, the first file's prefix first, the leaf's file last.
#[derive(Debug)]
pub struct Chain {
    /// The links, oldest first.
    pub links: Vec<Link>,
}

impl Chain {
    /// The chain of the file at `path` up to its line `last_line` (0-based; `None`: its last
    /// line), with the prefixes its `history_base` names resolved in `index` and checked
    /// (a line ends exactly at the byte offset and has the ordinal before the end). Errors:
    /// `Io`, `NoBase`, `Cycle`, `NoLine`.
    pub fn resolve(
        index: &Index,
        path: &Path,
        last_line: Option<usize>,
    ) -> Result<Chain, LineageError> {
        let mut links = Vec::new();
        let mut file = RolloutFile::read(path)?;
        let mut last = match last_line {
            Some(l) if l >= file.len() => {
                return Err(LineageError::NoLine {
                    path: path.to_owned(),
                    line: l,
                    lines: file.len(),
                });
            }
            Some(l) => l,
            None => file.len().saturating_sub(1),
        };
        let mut cut_by = None;
        loop {
            if links.len() > 64 {
                return Err(LineageError::Cycle {
                    path: path.to_owned(),
                });
            }
            let meta = if file.is_empty() { None } else { file.meta() };
            let hid = history_id(&file.path, meta.as_ref());
            let base = meta.as_ref().and_then(HistoryBase::of);
            let own = file.path.clone();
            links.push(Link {
                file,
                history_id: hid,
                last_line: last,
                cut_by: cut_by.take(),
            });
            let Some(base) = base else { break };
            let (parent, line) = resolve_base(index, &base, &own)?;
            if links.iter().any(|l| same_file(&l.file.path, &parent.path)) {
                return Err(LineageError::Cycle { path: own });
            }
            file = parent;
            last = line;
            cut_by = Some(base);
        }
        links.reverse();
        Ok(Chain { links })
    }

    /// The history replayed ([`super::replay::Replayer`]), with the link (index into
    /// `links`) and the 0-based line of each record. Lines that are no JSON object are skipped,
    /// as Codex does. The files are read line by line, once, and only the lines that can
    /// change the history (model-visible response items, compactions, rollback markers) are
    /// parsed whole: a rollout of any size is replayed within the size of its history.
    /// Errors: a file cannot be read.
    pub fn replay(&self) -> Result<(super::replay::Replayed, Vec<(u32, u32)>), LineageError> {
        self.replay_keeping(true)
    }

    /// [`Chain::replay`] keeping only the history: no record's fate and no record's place
    /// (both empty), 24 bytes a line fewer. What `context` needs.
    pub fn replay_messages(&self) -> Result<super::replay::Replayed, LineageError> {
        Ok(self.replay_keeping(false)?.0)
    }

    fn replay_keeping(
        &self,
        keep: bool,
    ) -> Result<(super::replay::Replayed, Vec<(u32, u32)>), LineageError> {
        use super::format::{Kind, parse_line};
        // Sized once: a rollout of millions of lines must not leave twice its due behind.
        let lines: usize = self
            .links
            .iter()
            .filter(|l| !l.file.is_empty())
            .map(|l| l.last_line + 1)
            .sum();
        let (mut replayer, mut at) = match keep {
            true => (
                super::replay::Replayer::with_capacity(lines),
                Vec::with_capacity(lines),
            ),
            false => (super::replay::Replayer::messages(), Vec::new()),
        };
        let place = |at: &mut Vec<(u32, u32)>, k: usize, i: usize| {
            if keep {
                at.push((k as u32, u32::try_from(i).unwrap_or(u32::MAX)));
            }
        };
        let span = crate::core::ids::LineSpan {
            line: 0,
            offset: 0,
            len: 0,
        };
        for (k, link) in self.links.iter().enumerate() {
            if link.file.is_empty() {
                continue;
            }
            link.file
                .for_each_line(link.last_line, |i, bytes| {
                    let relevant = match parse_line(bytes, span) {
                        Ok(e) => match &e.kind {
                            Kind::ResponseItem { item, role } => {
                                super::replay::API_TYPES.contains(&item.as_str())
                                    && !(item == "message" && role.as_deref() == Some("system"))
                            }
                            Kind::Compacted => true,
                            Kind::EventMsg { event } => event == "thread_rolled_back",
                            _ => false,
                        },
                        // Not a rollout line; still a record if it is a JSON object.
                        Err(_) => {
                            if serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v.is_object()) {
                                place(&mut at, k, i);
                                replayer.push(None);
                            }
                            return;
                        }
                    };
                    if relevant {
                        match serde_json::from_slice::<Value>(bytes) {
                            Ok(v) => replayer.push(Some(&v)),
                            Err(_) => return,
                        }
                    } else {
                        replayer.push(None);
                    }
                    place(&mut at, k, i);
                })
                .map_err(|source| LineageError::Io {
                    path: link.file.path.clone(),
                    source,
                })?;
        }
        Ok((replayer.finish(), at))
    }
}

/// The file and line a `history_base` names: a file of that history other than `own` with a
/// line ending exactly at the byte offset whose ordinal is the one before the end. Where two
/// files qualify, the one whose name sorts last before `own`'s.
fn resolve_base(
    index: &Index,
    base: &HistoryBase,
    own: &Path,
) -> Result<(RolloutFile, usize), LineageError> {
    let mut found: Vec<(RolloutFile, usize)> = Vec::new();
    for cand in index.of_history(&base.history_id) {
        if same_file(&cand.path, own) {
            continue;
        }
        let Ok(file) = RolloutFile::read(&cand.path) else {
            continue;
        };
        let hit = (0..file.len()).find(|&i| file.end_of(i) >= base.end_byte_offset);
        let Some(i) = hit.filter(|&i| file.end_of(i) == base.end_byte_offset) else {
            continue;
        };
        let ordinal_ok = match base.end_ordinal_exclusive {
            None => true,
            Some(end) => file
                .record(i)
                .and_then(|r| r.get("ordinal").and_then(Value::as_u64))
                .is_some_and(|o| o + 1 == end),
        };
        if ordinal_ok {
            found.push((file, i));
        }
    }
    let name = |p: &Path| p.file_name().map(|n| n.to_owned()).unwrap_or_default();
    let own_name = name(own);
    found.sort_by_key(|(f, _)| name(&f.path));
    let pick = found
        .iter()
        .rposition(|(f, _)| name(&f.path) < own_name)
        .or(found.len().checked_sub(1));
    match pick {
        Some(k) => Ok(found.swap_remove(k)),
        None => Err(LineageError::NoBase {
            path: own.to_owned(),
            history_id: base.history_id.clone(),
            end_byte_offset: base.end_byte_offset,
            end_ordinal_exclusive: base.end_ordinal_exclusive,
        }),
    }
}
