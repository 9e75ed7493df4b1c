//! A Codex thread's files as one tree (`docs/codex.md` §6): a rollout file is linear and its
//! branches are other files — a fork's thread file, a revert segment — whose `session_meta`
//! hangs from the parent line where their `history_base` prefix ends; a legacy fork (no
//! `history_base`, a copy of its parent's lines instead) hangs by its `forked_from_id` from
//! the last parent line it copies ([`legacy_copy`]). [`Thread::read`] gathers every file
//! linked to a rollout so (up to the root file, down to every fork and segment) and lays
//! their lines into one [`Tree`]; what `graph`, `diff`, `export` and
//! `verify` read. Lines of the file asked for keep their ids (ordinal, or `line:N`); lines of
//! the other files are named `<tag>:<id>`, the tag being the last 8 characters of the file's
//! history id. Spans are laid end to end in one address space ([`ThreadLines`] reads them
//! back), so a node's span names its file too. Reads files line by line (no payload is held)
//! and takes no lock.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use crate::core::ids::{EntryId, LineSpan};
use crate::core::source::LineSource;
use crate::core::tree::{Mode, NodeIdx, Tree};
use crate::dialect::codex::format::{self, Entry, Header};
use crate::dialect::codex::leaf_replay::Replay;
use crate::dialect::codex::lineage::{
    HistoryBase, Index, LineageError, codex_home_of, open_rollout,
};
use crate::dialect::codex::replay::Fate;

/// One file of a thread's tree.
#[derive(Clone, Debug)]
pub struct ThreadFile {
    /// The file.
    pub path: PathBuf,
    /// Its history id (thread id, or a revert segment's id).
    pub history_id: String,
    /// Its thread id (`session_meta.id`).
    pub thread_id: Option<String>,
    /// `session_meta.forked_from_id`.
    pub forked_from: Option<String>,
    /// The prefix its `session_meta` continues.
    pub base: Option<HistoryBase>,
    /// A legacy fork's copy of its parent: how many of the parent's lines it holds after its
    /// own `session_meta` (the parent's first lines, timestamps aside).
    pub copied: Option<usize>,
    /// What its line ids are prefixed with (empty for the file asked for).
    pub tag: String,
    /// Where its bytes start in the tree's address space.
    pub start: u64,
    /// Its size when read.
    pub size: u64,
    /// The parent line its first line hangs from: (file, 0-based line).
    pub parent: Option<(usize, usize)>,
    /// Each 0-based line's node (`None`: a line that could not be read).
    pub nodes: Vec<Option<NodeIdx>>,
}

impl ThreadFile {
    /// What this file is to its thread: `root`, `fork` or `segment`.
    pub fn kind(&self) -> &'static str {
        match (&self.base, &self.forked_from) {
            (None, Some(_)) if self.copied.is_some() => "fork",
            (None, _) => "root",
            (Some(_), Some(_)) => "fork",
            (Some(_), None) => "segment",
        }
    }
}

/// A thread's files as one tree.
#[derive(Debug)]
pub struct Thread {
    /// The lines of every file, each file's first line hanging from its parent line.
    pub tree: Tree<Entry>,
    /// The files, parents before the files that continue them.
    pub files: Vec<ThreadFile>,
    /// The file asked for (index into `files`).
    pub own: usize,
    /// Each node's file and 0-based line.
    pub origin: Vec<(usize, usize)>,
    /// The `CODEX_HOME`'s rollouts, by history id.
    pub index: Index,
}

/// What goes wrong reading a thread.
#[derive(Debug, thiserror::Error)]
pub enum ThreadError {
    /// A file cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A line of the file asked for is corrupt (strict mode).
    #[error("{}:{line}: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: u32,
        /// What is wrong.
        detail: String,
    },
}

/// The tag of a history id: its last 8 characters.
fn tag_of(history_id: &str) -> String {
    let n = history_id.len();
    history_id[n.saturating_sub(8)..].to_owned()
}

/// How many lines of `parent` a legacy fork at `fork` copies: the fork's lines after its own
/// `session_meta` that equal the parent's from its first, each but for its `timestamp` (Codex
/// 0.144.6 writes the copies anew, with the time of the fork). Both files are read line by
/// line, side by side, as far as they agree. Errors: a file cannot be read.
pub fn legacy_copy(fork: &Path, parent: &Path) -> io::Result<usize> {
    let mut f = io::BufReader::with_capacity(1 << 16, open_rollout(fork)?);
    let mut p = io::BufReader::with_capacity(1 << 16, open_rollout(parent)?);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    // The fork's own session_meta.
    if f.read_until(b'\n', &mut a)? == 0 {
        return Ok(0);
    }
    let mut n = 0;
    loop {
        a.clear();
        b.clear();
        if f.read_until(b'\n', &mut a)? == 0 || p.read_until(b'\n', &mut b)? == 0 {
            return Ok(n);
        }
        if !same_but_time(&a, &b) {
            return Ok(n);
        }
        n += 1;
    }
}

/// Whether two rollout lines are the same record but for their `timestamp`: compared as
/// bytes after it when both open with it (as Codex writes them), else as JSON.
fn same_but_time(a: &[u8], b: &[u8]) -> bool {
    let trim = |l: &[u8]| -> Vec<u8> {
        let l = l.strip_suffix(b"\n").unwrap_or(l);
        l.strip_suffix(b"\r").unwrap_or(l).to_vec()
    };
    let (a, b) = (trim(a), trim(b));
    const HEAD: &[u8] = b"{\"timestamp\":\"";
    let after = |l: &[u8]| -> Option<usize> {
        let rest = l.strip_prefix(HEAD)?;
        let end = rest.iter().position(|&c| c == b'"')?;
        (rest.get(end + 1) == Some(&b',')).then_some(HEAD.len() + end + 2)
    };
    if let (Some(i), Some(j)) = (after(&a), after(&b)) {
        return a[i..] == b[j..];
    }
    let value = |l: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(l)
            .ok()
            .map(|mut v| {
                if let Some(m) = v.as_object_mut() {
                    m.shift_remove("timestamp");
                }
                v
            })
    };
    matches!((value(&a), value(&b)), (Some(x), Some(y)) if x == y)
}

/// Reads a rollout's entries line by line: each entry (ids as written) by 0-based line, and
/// where each line ends. Corrupt lines are `None` (and the first one is returned for a strict
/// caller).
#[allow(clippy::type_complexity)]
fn read_entries(
    path: &Path,
) -> Result<(Vec<Option<Entry>>, Vec<u64>, Option<(u32, String)>), ThreadError> {
    let io_err = |source| ThreadError::Io {
        path: path.to_owned(),
        source,
    };
    let f = open_rollout(path).map_err(io_err)?;
    let mut r = io::BufReader::with_capacity(1 << 16, f);
    let mut entries = Vec::new();
    let mut ends = Vec::new();
    let mut first_bad = None;
    let mut buf = Vec::new();
    let mut offset = 0u64;
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        let line_no = u32::try_from(entries.len() + 1).unwrap_or(u32::MAX);
        let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let span = LineSpan {
            line: line_no,
            offset,
            len: u32::try_from(body.len()).unwrap_or(u32::MAX),
        };
        let entry = if crate::core::lines::is_blank(body) {
            None
        } else {
            match format::parse_line(body, span) {
                Ok(e) => Some(e),
                Err(p) => {
                    first_bad.get_or_insert((line_no, p.detail));
                    None
                }
            }
        };
        offset += n as u64;
        entries.push(entry);
        ends.push(offset);
    }
    Ok((entries, ends, first_bad))
}

impl Thread {
    /// The thread of the rollout at `path`: every file of its `CODEX_HOME` linked to it by
    /// `history_base` (see the module docs). A corrupt line of `path` refuses the read in
    /// `Strict` mode; corrupt lines elsewhere, and in `Lenient` mode, are left out. A
    /// `history_base` that names no line is left unlinked (the file is a root of the tree).
    /// Errors: `Io`, `Corrupt`.
    pub fn read(path: &Path, mode: Mode) -> Result<Thread, ThreadError> {
        Thread::read_in(Index::scan(&codex_home_of(path)), path, mode)
    }

    /// [`Thread::read`] with only the files `admits` lets in looked for (the daemon's: inside
    /// its roots); no other file is opened.
    pub fn read_admitted(
        path: &Path,
        mode: Mode,
        admits: &dyn Fn(&Path) -> bool,
    ) -> Result<Thread, ThreadError> {
        Thread::read_in(
            Index::scan_admitted(&codex_home_of(path), admits),
            path,
            mode,
        )
    }

    /// [`Thread::read`] with the files looked for in `index`.
    pub fn read_in(index: Index, path: &Path, mode: Mode) -> Result<Thread, ThreadError> {
        let same = |a: &Path, b: &Path| {
            let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
            abs(a) == abs(b)
        };
        // The family: files linked through history ids, both ways, from `path`.
        let mut member: BTreeSet<usize> = BTreeSet::new();
        let start = index.files.iter().position(|f| same(&f.path, path));
        if let Some(s) = start {
            let mut todo = vec![s];
            while let Some(i) = todo.pop() {
                if !member.insert(i) {
                    continue;
                }
                let f = &index.files[i];
                // Linked: the history `f` continues and the files continuing `f`'s; for a
                // legacy fork (no `history_base`, a copy of its parent's lines instead) the
                // thread it was forked from, and the legacy forks of `f`'s.
                let linked = |g: &crate::dialect::codex::lineage::Indexed| {
                    f.base
                        .as_ref()
                        .is_some_and(|b| g.history_id == b.history_id)
                        || g.base
                            .as_ref()
                            .is_some_and(|b| b.history_id == f.history_id)
                        || (f.base.is_none() && f.forked_from.as_ref() == Some(&g.history_id))
                        || (g.base.is_none() && g.forked_from.as_ref() == Some(&f.history_id))
                };
                todo.extend(
                    index
                        .files
                        .iter()
                        .enumerate()
                        .filter(|(_, g)| linked(g))
                        .map(|(k, _)| k),
                );
            }
        }
        // Read every member; the file asked for even when the index does not hold it.
        struct Read {
            path: PathBuf,
            history_id: String,
            thread_id: Option<String>,
            forked_from: Option<String>,
            base: Option<HistoryBase>,
            entries: Vec<Option<Entry>>,
            ends: Vec<u64>,
            size: u64,
        }
        let mut reads: Vec<Read> = Vec::new();
        let mut own = None;
        let add = |reads: &mut Vec<Read>,
                   p: &Path,
                   hid: String,
                   tid: Option<String>,
                   fork: Option<String>,
                   base: Option<HistoryBase>,
                   is_own: bool|
         -> Result<(), ThreadError> {
            let (entries, ends, bad) = match read_entries(p) {
                Ok(r) => r,
                Err(e) if is_own => return Err(e),
                Err(_) => return Ok(()),
            };
            if is_own
                && mode == Mode::Strict
                && let Some((line, detail)) = bad
            {
                return Err(ThreadError::Corrupt {
                    path: p.to_owned(),
                    line,
                    detail,
                });
            }
            let size = ends.last().copied().unwrap_or(0);
            reads.push(Read {
                path: p.to_owned(),
                history_id: hid,
                thread_id: tid,
                forked_from: fork,
                base,
                entries,
                ends,
                size,
            });
            Ok(())
        };
        if start.is_none() {
            own = Some(0);
            let meta = std::fs::read(path).ok().and_then(|b| {
                let first = b.split(|&c| c == b'\n').next().map(<[u8]>::to_vec)?;
                super::lineage::session_meta(&first)
            });
            let hid = super::lineage::history_id(path, meta.as_ref()).unwrap_or_default();
            let s = |k: &str| {
                meta.as_ref()
                    .and_then(|m| m.get(k)?.as_str().map(str::to_owned))
            };
            add(
                &mut reads,
                path,
                hid,
                s("id"),
                s("forked_from_id"),
                meta.as_ref().and_then(HistoryBase::of),
                true,
            )?;
        }
        for &i in &member {
            let f = &index.files[i];
            let is_own = Some(i) == start;
            if is_own {
                own = Some(reads.len());
            }
            add(
                &mut reads,
                &f.path,
                f.history_id.clone(),
                f.thread_id.clone(),
                f.forked_from.clone(),
                f.base.clone(),
                is_own,
            )?;
        }
        let own = own.unwrap_or(0);
        // Each file's parent line: a file of the named history (not itself) with a line
        // ending at the byte offset whose ordinal is the one before the end; where two
        // qualify, the one whose name sorts last before this file's (as `lineage` does).
        let name = |p: &Path| p.file_name().map(|n| n.to_owned()).unwrap_or_default();
        let mut parent: Vec<Option<(usize, usize)>> = vec![None; reads.len()];
        for (k, r) in reads.iter().enumerate() {
            let Some(b) = &r.base else { continue };
            let mut found: Vec<(usize, usize)> = Vec::new();
            for (j, c) in reads.iter().enumerate() {
                if j == k || c.history_id != b.history_id {
                    continue;
                }
                let Ok(line) = c.ends.binary_search(&b.end_byte_offset) else {
                    continue;
                };
                let ordinal_ok = match b.end_ordinal_exclusive {
                    None => true,
                    Some(end) => c.entries[line]
                        .as_ref()
                        .and_then(|e| e.ordinal)
                        .is_some_and(|o| o + 1 == end),
                };
                if ordinal_ok {
                    found.push((j, line));
                }
            }
            found.sort_by_key(|&(j, _)| name(&reads[j].path));
            let own_name = name(&r.path);
            let pick = found
                .iter()
                .rposition(|&(j, _)| name(&reads[j].path) < own_name)
                .or(found.len().checked_sub(1));
            parent[k] = pick.map(|p| found[p]);
        }
        // A legacy fork hangs from the last parent line its copy holds (`docs/codex.md` §6.3).
        let mut copied: Vec<Option<usize>> = vec![None; reads.len()];
        for (k, r) in reads.iter().enumerate() {
            let (None, Some(from)) = (&r.base, &r.forked_from) else {
                continue;
            };
            let found = reads.iter().enumerate().find_map(|(j, c)| {
                if j == k || &c.history_id != from {
                    return None;
                }
                let n = legacy_copy(&r.path, &c.path).ok()?;
                (n > 0).then_some((j, n))
            });
            if let Some((j, n)) = found {
                parent[k] = Some((j, n - 1));
                copied[k] = Some(n);
            }
        }
        // Parents first: roots (by path), then the files that continue each placed file.
        let mut order: Vec<usize> = Vec::new();
        let mut placed = vec![false; reads.len()];
        let mut roots: Vec<usize> = (0..reads.len()).filter(|&k| parent[k].is_none()).collect();
        roots.sort_by(|&a, &b| reads[a].path.cmp(&reads[b].path));
        let mut queue: std::collections::VecDeque<usize> = roots.into_iter().collect();
        while let Some(k) = queue.pop_front() {
            if placed[k] {
                continue;
            }
            placed[k] = true;
            order.push(k);
            let mut kids: Vec<usize> = (0..reads.len())
                .filter(|&j| !placed[j] && parent[j].is_some_and(|(p, _)| p == k))
                .collect();
            kids.sort_by(|&a, &b| reads[a].path.cmp(&reads[b].path));
            queue.extend(kids);
        }
        // A loop of prefixes (no root): what is left goes last, unlinked.
        for k in 0..reads.len() {
            if !placed[k] {
                parent[k] = None;
                order.push(k);
            }
        }
        let mut tags: HashMap<String, usize> = HashMap::new();
        let mut at_of = vec![0usize; reads.len()];
        let mut files: Vec<ThreadFile> = Vec::with_capacity(reads.len());
        let mut next_start = 0u64;
        for (pos, &k) in order.iter().enumerate() {
            at_of[k] = pos;
            let r = &reads[k];
            let tag = if k == own {
                String::new()
            } else {
                let t = tag_of(&r.history_id);
                let n = tags.entry(t.clone()).or_insert(0);
                *n += 1;
                if *n == 1 { t } else { format!("{t}.{n}") }
            };
            files.push(ThreadFile {
                path: r.path.clone(),
                history_id: r.history_id.clone(),
                thread_id: r.thread_id.clone(),
                forked_from: r.forked_from.clone(),
                base: r.base.clone(),
                copied: copied[k],
                tag,
                start: next_start,
                size: r.size,
                parent: None,
                nodes: vec![None; r.entries.len()],
            });
            // One byte apart, so no span of one file ends where the next begins.
            next_start += r.size + 1;
        }
        let mut tree: Tree<Entry> = Tree::new(Header, Mode::Lenient);
        let mut origin = Vec::new();
        for (pos, &k) in order.iter().enumerate() {
            let r = &mut reads[k];
            let link = parent[k].map(|(p, line)| (at_of[p], line));
            files[pos].parent = link;
            let mut prev: Option<EntryId> = link
                .and_then(|(p, line)| files[p].nodes[line].map(|n| tree.node(n).entry.id.clone()));
            let tag = files[pos].tag.clone();
            let start = files[pos].start;
            for (line, e) in r.entries.iter_mut().enumerate() {
                let Some(mut e) = e.take() else { continue };
                if !tag.is_empty() {
                    e.id = EntryId::new(format!("{tag}:{}", e.id.as_str()));
                }
                e.span.offset += start;
                e.parent_id = prev.clone();
                prev = Some(e.id.clone());
                if let Ok(n) = tree.push(e) {
                    files[pos].nodes[line] = Some(n);
                    origin.push((pos, line));
                }
            }
        }
        Ok(Thread {
            tree,
            files,
            own: at_of[own],
            origin,
            index,
        })
    }

    /// The replay at node `leaf` (what Codex sends when it resumes there; [`Replay::at`] on its
    /// file and line). Errors: the chain's.
    pub fn replay_at(&self, leaf: NodeIdx) -> Result<Replay, LineageError> {
        let (file, line) = self.origin[leaf as usize];
        Replay::at(&self.index, &self.files[file].path, Some(line))
    }

    /// The node of each record of a replay made on this thread (`None`: a line of a file the
    /// thread does not hold).
    pub fn record_nodes(&self, r: &Replay) -> Vec<Option<NodeIdx>> {
        let files: Vec<Option<usize>> = r
            .chain
            .links
            .iter()
            .map(|l| self.file_of(&l.file.path))
            .collect();
        r.at.iter()
            .map(|&(link, line)| files[link as usize].and_then(|f| self.node_at(f, line as usize)))
            .collect()
    }

    /// The nodes whose content Codex sends at `leaf` (a sent item's line, a compaction whose
    /// replacement history is the base), in history order, and the replay. Errors: the
    /// chain's.
    pub fn context_nodes(&self, leaf: NodeIdx) -> Result<(Vec<NodeIdx>, Replay), LineageError> {
        let r = self.replay_at(leaf)?;
        let sent = sent_records(&r);
        let nodes = self
            .record_nodes(&r)
            .into_iter()
            .zip(sent)
            .filter(|(_, s)| *s)
            .filter_map(|(n, _)| n)
            .collect();
        Ok((nodes, r))
    }

    /// The node of line `line` (0-based) of file `file`.
    pub fn node_at(&self, file: usize, line: usize) -> Option<NodeIdx> {
        self.files.get(file)?.nodes.get(line).copied().flatten()
    }

    /// The file (index) whose path is `path`.
    pub fn file_of(&self, path: &Path) -> Option<usize> {
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
        self.files.iter().position(|f| abs(&f.path) == abs(path))
    }

    /// The file's last line that holds a node (its default leaf).
    pub fn last_node(&self, file: usize) -> Option<NodeIdx> {
        self.files.get(file)?.nodes.iter().rev().find_map(|n| *n)
    }

    /// The thread id of the file asked for.
    pub fn thread_id(&self) -> Option<&str> {
        self.files.get(self.own)?.thread_id.as_deref()
    }

    /// A source for the tree's spans (each file opened when first read).
    pub fn lines(&self) -> ThreadLines {
        ThreadLines {
            files: self
                .files
                .iter()
                .map(|f| (f.start, f.path.clone(), std::cell::OnceCell::new()))
                .collect(),
        }
    }
}

/// Whether each record of a replay reaches the model: a sent item, or a compaction some of
/// whose replacement history is still sent (a later compaction replaces an earlier one's).
pub fn sent_records(r: &Replay) -> Vec<bool> {
    let mut sent: Vec<bool> = r
        .replayed
        .fates
        .iter()
        .map(|f| matches!(f, Fate::Sent(_)))
        .collect();
    for o in &r.replayed.origins {
        if let crate::dialect::codex::replay::Origin::Replacement(c, _) = o
            && let Some(s) = sent.get_mut(*c)
        {
            *s = true;
        }
    }
    sent
}

/// Reads a [`Thread`]'s lines back by their spans: the span's offset names the file.
#[derive(Debug)]
pub struct ThreadLines {
    files: Vec<(u64, PathBuf, std::cell::OnceCell<Option<File>>)>,
}

impl LineSource for ThreadLines {
    fn line(&self, span: LineSpan) -> io::Result<Cow<'_, [u8]>> {
        use std::os::unix::fs::FileExt;
        let k = self
            .files
            .partition_point(|(start, _, _)| *start <= span.offset)
            .checked_sub(1)
            .ok_or_else(|| io::Error::other("a span before the first file"))?;
        let (start, path, file) = &self.files[k];
        let f = file
            .get_or_init(|| open_rollout(path).ok())
            .as_ref()
            .ok_or_else(|| io::Error::other(format!("{}: cannot be opened", path.display())))?;
        let mut buf = vec![0u8; span.len as usize];
        f.read_exact_at(&mut buf, span.offset - start)?;
        Ok(Cow::Owned(buf))
    }
}
