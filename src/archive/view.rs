//! The archive as plain session files, for the search index ([`crate::search`]) to read as it
//! reads any root: `search --archive ARCHIVE` and the daemon's `session/search` when it
//! archives. The index cannot read zstd chunks, and a second indexer would duplicate it; so
//! the sessions the live roots no longer offer — the original is gone (Claude Code's cleanup
//! deleted it), or it lies outside the roots searched — are decompressed (their newest
//! version, every chunk checked) into a cache directory, the *view*, kept in step
//! incrementally: bytes appended to an archived version are appended to its view file (so the
//! index reads only them), a new version replaces the file (the index re-reads it), and a
//! session whose original is searched live again leaves the view (the index drops it). A
//! session is never in both, so no entry is found twice.
//!
//! ```text
//! VIEW/<key>/<source file name>     the newest version's bytes
//! VIEW/<key>/version                its number, as text
//! ```
//!
//! Hits in the view are then told apart by their path ([`View::locate`]): the archive key and
//! the original path, which still names the session (and `restore` brings it back).
//! Everything in the view holds session content: directories 0700, files 0600.
//!
//! Kept across searches ([`ViewSync`], as the daemon keeps one), a sync reads only the
//! manifests replaced since the last one: a manifest is always replaced by a rename, so its
//! `stat` (inode, size, mtime, ctime) tells a changed one from one already read, and a search
//! after a pass that archived one session reads one manifest, not every one.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Archive, ArchiveError, Manifest, Version, io_at, make_dirs, read_chunk, write_atomic};

/// An archived session as the view holds it.
#[derive(Clone, Debug)]
pub struct Viewed {
    /// Its key in the archive.
    pub key: String,
    /// Its original path.
    pub source: PathBuf,
    /// Whether a file still exists there (false: the archive is all that is left).
    pub original_exists: bool,
}

/// The view of one archive, brought up to date.
#[derive(Clone, Debug)]
pub struct View {
    /// The view's directory (a root for the index).
    pub dir: PathBuf,
    /// The sessions in it, by key.
    pub sessions: BTreeMap<String, Viewed>,
    /// The view files and directories this sync wrote or removed: what an index over the
    /// view must read again (a watcher of the view may not have told it yet).
    pub changed: Vec<PathBuf>,
}

impl View {
    /// Hits in view files made hits of the archived sessions: the original path (and its
    /// URI when not UTF-8), the archive key, and whether the archive is all that is left.
    pub fn relabel(&self, hits: &mut [crate::search::Hit]) {
        for h in hits {
            if let Some(v) = self.locate(&h.path) {
                h.path_uri = crate::paths::uri_if_not_utf8(&v.source);
                h.path = v.source.clone();
                h.archive_key = Some(v.key.clone());
                h.archived_only = Some(!v.original_exists);
            }
        }
    }

    /// The archived session a view file belongs to, when `path` is one.
    pub fn locate(&self, path: &Path) -> Option<&Viewed> {
        let rest = path.strip_prefix(&self.dir).ok()?;
        let key = rest.components().next()?.as_os_str().to_str()?;
        self.sessions.get(key)
    }
}

/// The view directory of the archive at `archive` below `cache` (a directory of its own per
/// archive, named by a hash of the archive's absolute path).
pub fn view_dir(cache: &Path, archive: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let abs = crate::paths::absolute(archive);
    let digest = Sha256::digest(abs.as_os_str().as_bytes());
    cache.join(&super::hex(&digest)[..16])
}

/// Brings the view at `dir` in step with the archive at `archive` for a search over
/// `live_roots`, reading every manifest ([`ViewSync::sync`] with nothing read before).
/// Errors: as [`ViewSync::sync`].
pub fn sync(archive: &Path, dir: &Path, live_roots: &[PathBuf]) -> Result<View, ArchiveError> {
    ViewSync::new(archive, dir).sync(live_roots)
}

/// A manifest file's identity: a manifest is replaced by a rename, never written in place,
/// so a different one has another inode (and, were an inode reused, another ctime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    dev: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            ino: meta.ino(),
            dev: meta.dev(),
            size: meta.len(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
            ctime_ns: meta.ctime().saturating_mul(1_000_000_000) + meta.ctime_nsec(),
        }
    }
}

/// The view of one archive kept in step across searches: the manifests as last read (by
/// their files' [`Stamp`]s) and what each view file holds, so that a sync reads only the
/// manifests replaced since the last one and writes only the view files whose version grew
/// or changed.
#[derive(Debug)]
pub struct ViewSync {
    archive: PathBuf,
    dir: PathBuf,
    manifests: BTreeMap<String, (Stamp, Manifest)>,
    /// What each view file holds: its version's number and size.
    held: BTreeMap<String, (u32, u64)>,
    reads: usize,
}

impl ViewSync {
    /// The view at `dir` of the archive at `archive`, nothing read yet.
    pub fn new(archive: &Path, dir: &Path) -> ViewSync {
        ViewSync {
            archive: archive.to_owned(),
            dir: dir.to_owned(),
            manifests: BTreeMap::new(),
            held: BTreeMap::new(),
            reads: 0,
        }
    }

    /// Whether this is the view at `dir` of the archive at `archive`.
    pub fn is_of(&self, archive: &Path, dir: &Path) -> bool {
        self.archive == archive && self.dir == dir
    }

    /// How many manifests the last [`ViewSync::sync`] read (those replaced since the sync
    /// before it, or every one the first time).
    pub fn manifest_reads(&self) -> usize {
        self.reads
    }

    /// Brings the view in step with the archive for a search over `live_roots`: every
    /// archived session whose original is gone or not under `live_roots` is in it, with its
    /// newest version's bytes; nothing else is. Reads only the manifests replaced since the
    /// last sync (one `stat` each otherwise), and one `stat` of each original. Errors: the
    /// archive cannot be read (a damaged chunk or manifest of one session only leaves that
    /// session out, with a warning), the view cannot be written.
    pub fn sync(&mut self, live_roots: &[PathBuf]) -> Result<View, ArchiveError> {
        let archive = Archive::open(&self.archive)?;
        make_dirs(&self.dir)?;
        self.refresh_manifests(&archive)?;
        let mut view = View {
            dir: self.dir.clone(),
            sessions: BTreeMap::new(),
            changed: Vec::new(),
        };
        for (key, (_, m)) in &self.manifests {
            let original_exists = fs::symlink_metadata(&m.source).is_ok();
            let searched_live =
                original_exists && live_roots.iter().any(|r| m.source.starts_with(r));
            let Some(version) = m.versions.last() else {
                continue;
            };
            if searched_live {
                continue;
            }
            let Some(name) = m.source.file_name() else {
                continue;
            };
            let key_dir = self.dir.join(key);
            let file = key_dir.join(name);
            let held = (version.number, version.size);
            // Held already (the file still its size, in case another search rewrote it).
            let current = self.held.get(key) == Some(&held)
                && fs::symlink_metadata(&file).is_ok_and(|f| f.len() == version.size);
            let synced = if current {
                Ok(())
            } else {
                self.held.remove(key);
                view.changed.push(file.clone());
                sync_one(&archive, key, version, &key_dir, &file)
            };
            match synced {
                Ok(()) => {
                    self.held.insert(key.clone(), held);
                    view.sessions.insert(
                        key.clone(),
                        Viewed {
                            key: key.clone(),
                            source: m.source.clone(),
                            original_exists,
                        },
                    );
                }
                Err(e @ ArchiveError::Damaged { .. }) => {
                    tracing::warn!("archive search: {e}; the session is left out");
                }
                Err(e) => return Err(e),
            }
        }
        // What the view holds beyond that goes (the index drops it).
        self.held.retain(|k, _| view.sessions.contains_key(k));
        let keep: BTreeSet<&str> = view.sessions.keys().map(String::as_str).collect();
        for entry in fs::read_dir(&self.dir).map_err(io_at(&self.dir))?.flatten() {
            let name = entry.file_name();
            if !keep.contains(name.to_string_lossy().as_ref()) {
                let p = entry.path();
                let removed = if p.is_dir() {
                    fs::remove_dir_all(&p)
                } else {
                    fs::remove_file(&p)
                };
                removed.map_err(io_at(&p))?;
                view.changed.push(p);
            }
        }
        tracing::debug!(
            "archive view: {} of {} manifests read; {} sessions in the view",
            self.reads,
            self.manifests.len(),
            view.sessions.len()
        );
        Ok(view)
    }

    /// Re-reads the manifests whose file changed since the last sync (and the new ones),
    /// forgets those gone, and counts what it read.
    fn refresh_manifests(&mut self, archive: &Archive) -> Result<(), ArchiveError> {
        self.reads = 0;
        let sessions_dir = archive.sessions_dir();
        let entries = match fs::read_dir(&sessions_dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.manifests.clear();
                return Ok(());
            }
            Err(e) => return Err(io_at(&sessions_dir)(e)),
        };
        let mut present = BTreeSet::new();
        for entry in entries.flatten() {
            let key = entry.file_name().to_string_lossy().into_owned();
            // A directory of an interrupted first pass has no manifest: nothing archived yet.
            let Ok(meta) = fs::symlink_metadata(entry.path().join("manifest.json")) else {
                continue;
            };
            let stamp = Stamp::of(&meta);
            if self.manifests.get(&key).is_some_and(|(s, _)| *s == stamp) {
                present.insert(key);
                continue;
            }
            self.reads += 1;
            match archive.manifest(&key) {
                Ok(Some(m)) => {
                    self.manifests.insert(key.clone(), (stamp, m));
                    present.insert(key);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("{e}"),
            }
        }
        self.manifests.retain(|k, _| present.contains(k));
        Ok(())
    }
}

/// Makes `file` hold `version`'s bytes: nothing when it does, the missing chunks appended
/// when it holds a shorter run of the same version ending at a chunk's start, else the whole
/// version written anew.
fn sync_one(
    archive: &Archive,
    key: &str,
    version: &Version,
    key_dir: &Path,
    file: &Path,
) -> Result<(), ArchiveError> {
    let marker = key_dir.join("version");
    let held = fs::read_to_string(&marker)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    let size = fs::symlink_metadata(file).ok().map(|m| m.len());
    let vdir = archive.session_dir(key).join(version.dir());
    if held == Some(version.number)
        && let Some(size) = size
    {
        if size == version.size {
            return Ok(());
        }
        if let Some(first) = version.chunks.iter().position(|c| c.offset == size) {
            let mut out = fs::OpenOptions::new()
                .append(true)
                .open(file)
                .map_err(io_at(file))?;
            for c in &version.chunks[first..] {
                out.write_all(&read_chunk(&vdir, c)?).map_err(io_at(file))?;
            }
            return Ok(());
        }
    }
    // Anew: other files of this key (an older version's name) go first.
    if key_dir.is_dir() {
        fs::remove_dir_all(key_dir).map_err(io_at(key_dir))?;
    }
    make_dirs(key_dir)?;
    let mut bytes = Vec::with_capacity(usize::try_from(version.size).unwrap_or(0));
    for c in &version.chunks {
        bytes.extend_from_slice(&read_chunk(&vdir, c)?);
    }
    write_atomic(file, &bytes)?;
    write_atomic(&marker, format!("{}\n", version.number).as_bytes())?;
    Ok(())
}

/// Where the daemon and the CLI keep the views of archives: `archive-view/` beside the search
/// index directory `index_dir` (never inside it: the index's directory holds only the index).
pub fn cache_beside(index_dir: &Path) -> PathBuf {
    index_dir
        .parent()
        .map_or_else(|| PathBuf::from("archive-view"), |p| p.join("archive-view"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::fs;
    use std::io::Write;

    use super::ViewSync;

    fn file_in(view: &super::View, name: &str) -> Vec<u8> {
        let v = view
            .sessions
            .values()
            .find(|v| v.source.file_name().is_some_and(|n| n == name))
            .unwrap();
        fs::read(view.dir.join(&v.key).join(name)).unwrap()
    }

    #[test]
    fn a_sync_reads_only_the_manifests_replaced_since_the_last() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs::create_dir_all(&root).unwrap();
        let names: Vec<String> = (0..4).map(|i| format!("s{i}.jsonl")).collect();
        for n in &names {
            fs::write(root.join(n), format!("{{\"n\":\"{n}\"}}\n")).unwrap();
        }
        let archive = tmp.path().join("archive");
        let dir = tmp.path().join("view");
        let pass = || crate::archive::archive_pass(&archive, std::slice::from_ref(&root)).unwrap();
        pass();
        // Nothing searched live: every session is in the view.
        let mut sync = ViewSync::new(&archive, &dir);
        let view = sync.sync(&[]).unwrap();
        assert_eq!((sync.manifest_reads(), view.sessions.len()), (4, 4));
        assert_eq!(sync.sync(&[]).unwrap().sessions.len(), 4);
        assert_eq!(sync.manifest_reads(), 0);

        // One grows: one manifest read, its view file grown.
        let grown = root.join(&names[1]);
        writeln!(
            fs::OpenOptions::new().append(true).open(&grown).unwrap(),
            "{{\"more\":1}}"
        )
        .unwrap();
        pass();
        let view = sync.sync(&[]).unwrap();
        assert_eq!(sync.manifest_reads(), 1);
        assert_eq!(file_in(&view, &names[1]), fs::read(&grown).unwrap());

        // A view file changed behind its back (another search's sync) is written again
        // without a manifest read.
        let v = view.sessions.values().next().unwrap().clone();
        let name = v.source.file_name().unwrap().to_str().unwrap().to_owned();
        fs::write(view.dir.join(&v.key).join(&name), b"x").unwrap();
        let view = sync.sync(&[]).unwrap();
        assert_eq!(sync.manifest_reads(), 0);
        assert_eq!(file_in(&view, &name), fs::read(root.join(&name)).unwrap());

        // Searched live, sessions leave the view with no manifest read; a fresh sync agrees.
        let live = [fs::canonicalize(&root).unwrap()];
        let view = sync.sync(&live).unwrap();
        assert_eq!((sync.manifest_reads(), view.sessions.len()), (0, 0));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        let fresh = super::sync(&archive, &dir, &[]).unwrap();
        assert_eq!(fresh.sessions.len(), 4);
    }
}
