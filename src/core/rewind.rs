//! Rewind, for every dialect: the files a session changed after an entry, each put back to
//! its content at that entry, worked out from the session's own records. Pure: the dialect
//! reads the records ([`Records`]: the successful writes, edits and whole-file reads on the
//! path, in order, each marked before or after the entry), the files as they are now are
//! asked through [`Disk`] (implemented with real files by `crate::rewind`, which also
//! applies the plan). Nothing here does I/O.
//!
//! Per file, the records are replayed forward from the last point where the session held
//! the whole content (a `write`, a read whose text is the whole file, the content before a
//! change where the tool kept it, or a checkpoint the agent kept of the file at the entry):
//! that gives the content at the entry and at the leaf exactly, with the agent's own edit rule
//! ([`ApplyEdit`]). Where the session never held the whole content (a file that existed
//! before the session and was only edited), the edits after the entry are undone in reverse
//! from the content at the leaf, or from the file as it is now when that is unknown: each
//! undo uses the edit's recorded patch where the tool kept one (pi 1.6.0's `details.patch`,
//! exact), else the unique place of its new text, and is accepted only when re-applying the
//! edit gives back the text it started from. A file whose first record is a `write`, with
//! nothing before it, was created by the session and is removed. Anything else (a `write`
//! over content the session never saw, a record that does not replay) is `unknown`.
//!
//! Drift: the file as it is now must be what the records say the leaf left (byte for byte
//! when the leaf content is known; where it is not, every undo must fit the file as it is,
//! which checks the regions the edits touched).

use serde::Serialize;

use super::verify::{ApplyEdit, Replace, resolve_path};

/// What one record did to a file.
#[derive(Clone, Debug)]
pub enum Change {
    /// The whole content written (pi `write`, Claude Code `Write`).
    Write {
        /// The content.
        content: String,
        /// Whether the tool said it created the file (`Some(true)`) or replaced one
        /// (`Some(false)`); `None` when its result does not say (pi's).
        created: Option<bool>,
        /// The whole content it replaced, when the tool kept it (Claude Code's
        /// `toolUseResult.originalFile`); `None` when it did not (pi's) or there was none.
        before: Option<String>,
    },
    /// Replacements applied by the agent's edit tool.
    Edit {
        /// The replacements, as the tool took them.
        edits: Vec<Replace>,
        /// How the tool applies them.
        apply: ApplyEdit,
        /// What the tool's result recorded of the change.
        record: EditRecord,
    },
    /// A read whose text is the whole file.
    Read {
        /// The file's text.
        text: String,
    },
    /// A copy of the file the agent kept at the entry (Claude Code's file history, taken when
    /// the entry's prompt was sent): the content there, `None` when there was no file. It
    /// decides the content at the entry over everything else.
    Checkpoint {
        /// The file's content, or `None`: no file.
        content: Option<String>,
    },
}

/// What an edit's result recorded about the change, each part optional.
#[derive(Clone, Debug, Default)]
pub struct EditRecord {
    /// A unified patch of the change on the LF-normalized text (pi 1.6.0 `details.patch`).
    pub patch: Option<String>,
    /// Lines the change removed, by their 1-based line number before it (older pi's display
    /// diff, `details.diff`): a check on an undo made without a patch.
    pub removed_lines: Vec<(usize, String)>,
    /// The whole file before the change, when the tool kept it (Claude Code's
    /// `toolUseResult.originalFile`).
    pub before: Option<String>,
}

/// One successful record on the path to the leaf.
#[derive(Clone, Debug)]
pub struct Record {
    /// The entry whose tool result says it applied.
    pub entry_id: String,
    /// The tool call's id.
    pub tool_call_id: String,
    /// The path as the call gives it.
    pub path: String,
    /// What it did.
    pub change: Change,
    /// Whether it happened after the rewind's entry (its result is later on the path).
    pub after: bool,
}

/// What the dialect read from the session for a rewind.
#[derive(Clone, Debug, Default)]
pub struct Records {
    /// The session's working directory (pi's header `cwd`).
    pub session_cwd: Option<String>,
    /// The records in path order.
    pub records: Vec<Record>,
    /// The entry rewound to.
    pub entry_id: String,
    /// The leaf whose path was read.
    pub leaf_id: Option<String>,
    /// When the entry was written (ms since the epoch), for telling a file the session
    /// created after it from one that was there before.
    pub entry_time_ms: Option<i64>,
}

/// A file as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Present {
    /// Nothing at the path.
    Missing,
    /// Something that is not a regular file.
    NotAFile,
    /// It could not be read (why).
    Unreadable(String),
    /// A regular file's bytes.
    Bytes(Vec<u8>),
}

/// Where a path lands once symlinks are resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// Inside the working directory: the resolved path.
    Inside(String),
    /// Outside it: the resolved path.
    Outside(String),
}

/// The files as a rewind sees them. Implemented with real files by `crate::rewind`.
pub trait Disk {
    /// The home directory, for `~` in tool paths.
    fn home(&self) -> Option<String>;
    /// The file at an absolute path, now.
    fn read(&self, path: &str) -> Present;
    /// Where `path` lands, symlinks resolved, relative to `cwd` (resolved too).
    fn place(&self, path: &str, cwd: &str) -> Place;
    /// Whether an absolute path names a directory (symlinks followed).
    fn is_dir(&self, path: &str) -> bool;
    /// When the file at an absolute path came into being (its birth time, ms since the epoch);
    /// `None` when it is not there or the file system does not keep it.
    fn born_ms(&self, path: &str) -> Option<i64>;
}

/// What the caller asks.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The working directory instead of the session's (`--cwd`).
    pub cwd: Option<String>,
    /// Rewind files that drifted too.
    pub force: bool,
    /// Paths left alone (as given: absolute, or relative to the working directory).
    pub exclude: Vec<String>,
}

/// What will be done to one file (camelCase on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FileStatus {
    /// Its content is put back.
    Restore,
    /// The session created it: removed.
    Remove,
    /// It already holds its content at the entry.
    Unchanged,
    /// Its content at the entry is not in the session's records; nothing can be done.
    Unknown,
    /// It lies outside the working directory (symlinks resolved): never touched.
    Outside,
    /// The caller excluded it.
    Excluded,
}

/// A file that is not what the session left at the leaf.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    /// One sentence.
    pub message: String,
    /// A short unified diff, the session's version (`---`) against the file now (`+++`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// A tool call behind a file's plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRef {
    /// The entry of its result.
    pub entry_id: String,
    /// The tool call's id.
    pub tool_call_id: String,
    /// `write`, `edit`, `read` or `checkpoint`.
    pub kind: &'static str,
}

/// What the rewind does to a file's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Write this content.
    Write(String),
    /// Remove the file.
    Remove,
    /// Nothing.
    Nothing,
}

/// The plan for one file.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePlan {
    /// The absolute path as the session names it (resolved against the working directory).
    pub path: String,
    /// The path relative to the working directory, when it is under it.
    pub relative: Option<String>,
    /// What will be done.
    pub status: FileStatus,
    /// Why, in one sentence.
    pub reason: String,
    /// When the file is not what the session left at the leaf.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// The unified diff of the change the rewind makes (the file now `---`, at the entry
    /// `+++`); `null` when nothing changes.
    pub diff: Option<String>,
    /// The records after the entry that touched it, oldest first.
    pub calls: Vec<CallRef>,
    /// The content to leave.
    #[serde(skip)]
    pub target: Target,
    /// Where to write (symlinks resolved).
    #[serde(skip)]
    pub real_path: Option<String>,
    /// The file as the plan read it (a rewind writes only over the same bytes).
    #[serde(skip)]
    pub present: Present,
}

/// Why a rewind is refused as a whole (camelCase on the wire).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Refusal {
    /// The working directory is relative (`--cwd`, or the session's): refused rather than
    /// taken against sessiond's own directory.
    RelativeCwd {
        /// The directory as named.
        cwd: String,
    },
    /// Neither `--cwd` nor the session names a working directory.
    NoCwd,
    /// The working directory does not exist here, or is not a directory (a session from
    /// another machine, or a moved checkout): every file would read as missing.
    MissingCwd {
        /// The directory as named.
        cwd: String,
    },
    /// Files whose content at the entry is unknown, or that lie outside the working
    /// directory; `--exclude` them.
    Unrestorable {
        /// Their paths.
        paths: Vec<String>,
    },
    /// Files changed since the session left them; `--force` rewinds them anyway.
    Drift {
        /// Their paths.
        paths: Vec<String>,
    },
}

impl Refusal {
    /// The refusal in one sentence.
    pub fn message(&self) -> String {
        match self {
            Refusal::RelativeCwd { cwd } => format!(
                "the working directory {cwd} is relative: refused, not taken against sessiond's own directory (give --cwd DIR)"
            ),
            Refusal::NoCwd => "the session names no working directory (give --cwd DIR)".into(),
            Refusal::MissingCwd { cwd } => format!(
                "the working directory {cwd} does not exist or is not a directory (a session from another machine, or a moved checkout?); nothing changed (give --cwd DIR)"
            ),
            Refusal::Unrestorable { paths } => format!(
                "cannot rewind {}: the session does not hold their content at the entry, or they lie outside the working directory; nothing changed (--exclude PATH leaves one alone)",
                paths.join(", ")
            ),
            Refusal::Drift { paths } => match paths.as_slice() {
                [one] => format!(
                    "{one} is not as the session's records leave it (its drift says why: changed or gone since, or records that do not apply to it); nothing changed (--force rewinds it anyway)"
                ),
                _ => format!(
                    "{} are not as the session's records leave them (each one's drift says why: changed or gone since, or records that do not apply to them); nothing changed (--force rewinds them anyway)",
                    paths.join(", ")
                ),
            },
        }
    }
}

/// The plan of a rewind: `{entryId, leafId, cwd, files, refusal}`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The entry rewound to.
    pub entry_id: String,
    /// The leaf whose path was read.
    pub leaf_id: Option<String>,
    /// The working directory (absolute).
    pub cwd: Option<String>,
    /// One plan per file changed after the entry, in path order.
    pub files: Vec<FilePlan>,
    /// Why it cannot be applied as asked, if so.
    pub refusal: Option<Refusal>,
}

/// The content at the entry, as found.
enum AtEntry {
    Content(String),
    /// The agent's own copy of the file at the entry.
    Checkpoint(String),
    Absent,
    /// Not found forward: undo the records after the entry in reverse.
    Reverse,
    Unknown(String),
}

/// Lines of context in the diffs a plan shows.
const DIFF_CONTEXT: usize = 3;
/// Longest drift diff kept, in lines.
const DRIFT_DIFF_LINES: usize = 40;

fn kind_of(c: &Change) -> &'static str {
    match c {
        Change::Write { .. } => "write",
        Change::Edit { .. } => "edit",
        Change::Read { .. } => "read",
        Change::Checkpoint { .. } => "checkpoint",
    }
}

/// A unified diff of `old` → `new`, headed with the two names; `None` when they are equal.
pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> Option<String> {
    if old == new {
        return None;
    }
    let diff = similar::TextDiff::from_lines(old, new);
    Some(
        diff.unified_diff()
            .context_radius(DIFF_CONTEXT)
            .header(old_name, new_name)
            .to_string(),
    )
}

fn shorten_diff(d: String) -> String {
    let lines: Vec<&str> = d.lines().collect();
    if lines.len() <= DRIFT_DIFF_LINES {
        return d;
    }
    let mut s = lines[..DRIFT_DIFF_LINES].join("\n");
    s.push_str(&format!(
        "\n… {} more lines\n",
        lines.len() - DRIFT_DIFF_LINES
    ));
    s
}

/// Works out the plan: per file changed after the entry, its content at the entry and
/// whether it is as the session left it. Never fails: what cannot be done is in the plan.
pub fn plan(records: &Records, disk: &dyn Disk, options: &Options) -> Plan {
    let named = options.cwd.clone().or_else(|| records.session_cwd.clone());
    let mut out = Plan {
        entry_id: records.entry_id.clone(),
        leaf_id: records.leaf_id.clone(),
        cwd: None,
        files: Vec::new(),
        refusal: None,
    };
    let cwd = match named {
        None => {
            out.refusal = Some(Refusal::NoCwd);
            return out;
        }
        Some(d) if !d.starts_with('/') => {
            out.refusal = Some(Refusal::RelativeCwd { cwd: d });
            return out;
        }
        Some(d) if !disk.is_dir(&d) => {
            out.cwd = Some(d.clone());
            out.refusal = Some(Refusal::MissingCwd { cwd: d });
            return out;
        }
        Some(d) => d,
    };
    out.cwd = Some(cwd.clone());
    let home = disk.home();
    // Files changed after the entry, in order of their first change.
    let mut order: Vec<String> = Vec::new();
    let mut by_file: std::collections::HashMap<String, Vec<&Record>> = Default::default();
    for r in &records.records {
        let abs = resolve_path(&r.path, &cwd, home.as_deref());
        let seen_only = matches!(r.change, Change::Read { .. } | Change::Checkpoint { .. });
        if r.after && !seen_only && !order.contains(&abs) {
            order.push(abs.clone());
        }
        by_file.entry(abs).or_default().push(r);
    }
    let excluded: Vec<String> = options
        .exclude
        .iter()
        .map(|p| resolve_path(p, &cwd, home.as_deref()))
        .collect();
    for abs in order {
        let recs = by_file.remove(&abs).unwrap_or_default();
        out.files.push(plan_file(
            &abs,
            &recs,
            &cwd,
            disk,
            &excluded,
            records.entry_time_ms,
        ));
    }
    let unrestorable: Vec<String> = out
        .files
        .iter()
        .filter(|f| matches!(f.status, FileStatus::Unknown | FileStatus::Outside))
        .map(|f| f.path.clone())
        .collect();
    let drifted: Vec<String> = out
        .files
        .iter()
        .filter(|f| f.status != FileStatus::Excluded && f.drift.is_some())
        .map(|f| f.path.clone())
        .collect();
    if !unrestorable.is_empty() {
        out.refusal = Some(Refusal::Unrestorable {
            paths: unrestorable,
        });
    } else if !drifted.is_empty() && !options.force {
        out.refusal = Some(Refusal::Drift { paths: drifted });
    }
    out
}

fn relative_to(abs: &str, cwd: &str) -> Option<String> {
    let base = cwd.trim_end_matches('/');
    abs.strip_prefix(base)
        .and_then(|r| r.strip_prefix('/'))
        .map(str::to_owned)
}

fn plan_file(
    abs: &str,
    recs: &[&Record],
    cwd: &str,
    disk: &dyn Disk,
    excluded: &[String],
    entry_time_ms: Option<i64>,
) -> FilePlan {
    let relative = relative_to(abs, cwd);
    let calls: Vec<CallRef> = recs
        .iter()
        .filter(|r| r.after)
        .map(|r| CallRef {
            entry_id: r.entry_id.clone(),
            tool_call_id: r.tool_call_id.clone(),
            kind: kind_of(&r.change),
        })
        .collect();
    let mut fp = FilePlan {
        path: abs.to_owned(),
        relative,
        status: FileStatus::Unknown,
        reason: String::new(),
        drift: None,
        diff: None,
        calls,
        target: Target::Nothing,
        real_path: None,
        present: Present::Missing,
    };
    if excluded.iter().any(|e| e == abs) {
        fp.status = FileStatus::Excluded;
        fp.reason = "excluded: left as it is".into();
        return fp;
    }
    let real = match disk.place(abs, cwd) {
        Place::Outside(real) => {
            fp.status = FileStatus::Outside;
            fp.reason = format!(
                "it resolves to {real}, outside the working directory {cwd}: never touched"
            );
            return fp;
        }
        Place::Inside(real) => real,
    };
    fp.real_path = Some(real.clone());
    let present = disk.read(&real);
    fp.present = present.clone();
    let present_text: Option<String> = match &present {
        Present::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };

    // Forward replay: the content at the entry and at the leaf, where the records hold it.
    let first_after = recs.iter().position(|r| r.after).unwrap_or(recs.len());
    let mut state: Option<String> = None;
    let mut seen_before = false;
    let mut lost: Option<String> = None;
    let mut at_entry: Option<AtEntry> = None;
    for (i, r) in recs.iter().enumerate() {
        if i == first_after {
            // A file born after the entry (its inode: a rewrite in place keeps it) was not
            // there at the entry.
            let born_after = match (disk.born_ms(&real), entry_time_ms) {
                (Some(born), Some(entry)) => Some(born >= entry),
                _ => None,
            };
            at_entry = Some(entry_content(&state, seen_before, born_after, &recs[i..]));
        }
        match &r.change {
            Change::Write { content, .. } => {
                state = Some(content.clone());
                lost = None;
            }
            Change::Read { text } => {
                state = Some(text.clone());
                lost = None;
            }
            Change::Checkpoint { content } => {
                state.clone_from(content);
                lost = None;
            }
            Change::Edit {
                edits,
                apply,
                record,
            } => {
                // The tool's own copy of the file before the change wins over the replay: the
                // file may have changed outside the session's records in between.
                let base = record.before.clone().or_else(|| state.take());
                state = match base.as_deref().map(|b| apply(b, edits)) {
                    Some(Some(next)) => Some(next),
                    Some(None) => {
                        lost = Some(format!(
                            "the edit at entry {} does not apply to the content the records give (changed outside the session, e.g. by a command)",
                            r.entry_id
                        ));
                        None
                    }
                    None => None,
                };
            }
        }
        if !r.after {
            seen_before = true;
        }
    }
    let at_entry = at_entry.unwrap_or(AtEntry::Unknown("no change after the entry".into()));
    let leaf = state;

    // Drift, where the leaf content is known.
    if let Some(l) = &leaf {
        match &present {
            Present::Bytes(b) if b.as_slice() == l.as_bytes() => {}
            Present::Bytes(_) => {
                fp.drift = Some(Drift {
                    message: "it changed after the session's last change to it".into(),
                    diff: unified(l, present_text.as_deref().unwrap_or(""), "session", "now")
                        .map(shorten_diff),
                });
            }
            Present::Missing => {
                fp.drift = Some(Drift {
                    message: "it is missing; the session left it present".into(),
                    diff: None,
                });
            }
            Present::NotAFile => {
                fp.drift = Some(Drift {
                    message: "it is not a regular file now".into(),
                    diff: None,
                });
            }
            Present::Unreadable(e) => {
                fp.drift = Some(Drift {
                    message: format!("it cannot be read: {e}"),
                    diff: None,
                });
            }
        }
    }

    let target = match at_entry {
        AtEntry::Content(c) => Ok((
            Target::Write(c),
            "its content at the entry, replayed from the session's records".to_owned(),
        )),
        AtEntry::Checkpoint(c) => Ok((
            Target::Write(c),
            "its content at the entry, from the copy the agent kept then (its file history)"
                .to_owned(),
        )),
        AtEntry::Absent => Ok((
            Target::Remove,
            "the session created it after the entry (its first record is a write, and the file was born after the entry)".to_owned(),
        )),
        AtEntry::Unknown(why) => Err(why),
        AtEntry::Reverse => {
            // Undo from the leaf's content, else from the file as it is now.
            let start = match (&leaf, &present_text) {
                (Some(l), _) => Some(l.clone()),
                (None, Some(p)) if matches!(present, Present::Bytes(_)) => Some(p.clone()),
                _ => None,
            };
            match start {
                None => Err("the session never held its whole content and it is not there now to undo the edits from".to_owned()),
                Some(start) => match undo_all(&start, &recs[first_after..]) {
                    Ok(c) => Ok((Target::Write(c), "the session's edits after the entry, undone in reverse".to_owned())),
                    Err(u) => {
                        if leaf.is_none() && u.last {
                            fp.drift = Some(Drift {
                                message: format!(
                                    "it no longer holds what the edit at entry {} left",
                                    u.entry_id
                                ),
                                diff: u.expected.as_deref().and_then(|e| {
                                    unified(e, u.found.as_deref().unwrap_or(""), "session", "now")
                                        .map(shorten_diff)
                                }),
                            });
                        }
                        Err(u.reason)
                    }
                },
            }
        }
    };
    let target = match (target, &lost) {
        // A record that does not replay after the entry: the leaf is not known; the entry's
        // content is, but the file may hold changes the session did not make.
        (Ok(t), Some(why)) if leaf.is_none() && fp.drift.is_none() => {
            fp.drift = Some(Drift {
                message: why.clone(),
                diff: None,
            });
            Ok(t)
        }
        (t, _) => t,
    };
    match target {
        Err(why) => {
            fp.status = FileStatus::Unknown;
            fp.reason = why;
        }
        Ok((t, why)) => {
            let same = match (&t, &present) {
                (Target::Write(c), Present::Bytes(b)) => b.as_slice() == c.as_bytes(),
                (Target::Remove, Present::Missing) => true,
                _ => false,
            };
            fp.reason = why;
            if same {
                fp.status = FileStatus::Unchanged;
                fp.target = Target::Nothing;
            } else {
                fp.status = match t {
                    Target::Remove => FileStatus::Remove,
                    _ => FileStatus::Restore,
                };
                let now = present_text.as_deref().unwrap_or("");
                let name = fp.relative.clone().unwrap_or_else(|| abs.to_owned());
                fp.diff = match &t {
                    Target::Write(c) => unified(now, c, &format!("a/{name}"), &format!("b/{name}")),
                    Target::Remove => unified(now, "", &format!("a/{name}"), "/dev/null"),
                    Target::Nothing => None,
                };
                fp.target = t;
            }
        }
    }
    fp
}

/// The content at the entry from the replay so far (`state`) and the records after it.
fn entry_content(
    state: &Option<String>,
    seen_before: bool,
    born_after: Option<bool>,
    after: &[&Record],
) -> AtEntry {
    // A checkpoint taken at the entry is the content there.
    if let Some(Change::Checkpoint { content }) = after.first().map(|r| &r.change) {
        return match content {
            Some(c) => AtEntry::Checkpoint(c.clone()),
            None => AtEntry::Absent,
        };
    }
    if let Some(s) = state {
        return AtEntry::Content(s.clone());
    }
    // The first record after the entry decides: a read shows the content at the entry, an
    // edit is undone from later content, a write needs what was there before.
    let Some(r) = after.first() else {
        return AtEntry::Unknown("no change after the entry".into());
    };
    match &r.change {
        Change::Read { text } => AtEntry::Content(text.clone()),
        Change::Checkpoint { .. } => AtEntry::Unknown("no change after the entry".into()),
        Change::Edit { record, .. } => match &record.before {
            Some(b) => AtEntry::Content(b.clone()),
            None => AtEntry::Reverse,
        },
        Change::Write {
            before: Some(b), ..
        } => AtEntry::Content(b.clone()),
        Change::Write { created, .. } if !seen_before => match (created, born_after) {
            (Some(true), _) | (None, Some(true)) => AtEntry::Absent,
            (Some(false), _) | (None, Some(false)) => AtEntry::Unknown(format!(
                "the write at entry {} replaced a file that was there before the entry, whose content the session never held",
                r.entry_id
            )),
            (None, None) => AtEntry::Unknown(format!(
                "whether the write at entry {} created the file cannot be told (the file is not there now, its file system keeps no birth time, or the entry has no time)",
                r.entry_id
            )),
        },
        Change::Write { .. } => AtEntry::Unknown(format!(
            "the write at entry {} replaced content the session never held whole",
            r.entry_id
        )),
    }
}

/// Why a reverse undo stopped.
struct UndoFailure {
    reason: String,
    entry_id: String,
    /// Whether it stopped at the last record (the file no longer holds what it left).
    last: bool,
    expected: Option<String>,
    found: Option<String>,
}

/// Undoes `after` (the records after the entry) in reverse from `start`, the content after
/// the last of them.
fn undo_all(start: &str, after: &[&Record]) -> Result<String, UndoFailure> {
    let mut cur = start.to_owned();
    for (k, r) in after.iter().enumerate().rev() {
        let last = k + 1 == after.len();
        match &r.change {
            Change::Read { text } => {
                if *text != cur {
                    return Err(UndoFailure {
                        reason: format!(
                            "the read at entry {} does not agree with the edits after it (changed outside the session?)",
                            r.entry_id
                        ),
                        entry_id: r.entry_id.clone(),
                        last,
                        expected: Some(text.clone()),
                        found: Some(cur),
                    });
                }
            }
            Change::Write {
                before: Some(b), ..
            } => cur = b.clone(),
            Change::Checkpoint { content: Some(c) } => cur = c.clone(),
            Change::Checkpoint { content: None } | Change::Write { .. } => {
                return Err(UndoFailure {
                    reason: format!(
                        "the write at entry {} replaced content the session never held whole",
                        r.entry_id
                    ),
                    entry_id: r.entry_id.clone(),
                    last: false,
                    expected: None,
                    found: None,
                });
            }
            Change::Edit {
                edits,
                apply,
                record,
            } => match undo_edit(&cur, edits, *apply, record) {
                Ok(prev) => cur = prev,
                Err(e) => {
                    return Err(UndoFailure {
                        reason: format!(
                            "the edit at entry {} cannot be undone: {}",
                            r.entry_id, e.reason
                        ),
                        entry_id: r.entry_id.clone(),
                        last,
                        expected: e.expected,
                        found: e.found,
                    });
                }
            },
        }
    }
    Ok(cur)
}

/// Why one edit cannot be undone.
#[derive(Debug)]
pub struct UndoError {
    /// One phrase.
    pub reason: String,
    /// What the record says should be there (the patch's new side), when it says.
    pub expected: Option<String>,
    /// What is there.
    pub found: Option<String>,
}

fn undo_err(reason: impl Into<String>) -> UndoError {
    UndoError {
        reason: reason.into(),
        expected: None,
        found: None,
    }
}

/// The text before an edit whose result is `after`: from the tool's record of the whole
/// file, else its patch reversed, else its replacements found by their new text. Accepted
/// only when applying the edit to it gives `after` again.
pub fn undo_edit(
    after: &str,
    edits: &[Replace],
    apply: ApplyEdit,
    record: &EditRecord,
) -> Result<String, UndoError> {
    let check = |cand: &str| apply(cand, edits).as_deref() == Some(after);
    if let Some(b) = &record.before
        && check(b)
    {
        return Ok(b.clone());
    }
    let (bom, body) = match after.strip_prefix('\u{FEFF}') {
        Some(rest) => ("\u{FEFF}", rest),
        None => ("", after),
    };
    let crlf = body.contains("\r\n");
    let normalized = if body.contains('\r') {
        body.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        body.to_owned()
    };
    let candidates_of = |base: String| {
        let mut v = vec![format!("{bom}{base}")];
        if crlf {
            v.push(format!("{bom}{}", base.replace('\n', "\r\n")));
        }
        v
    };
    if let Some(patch) = &record.patch {
        let base = reverse_patch(&normalized, patch)?;
        return candidates_of(base)
            .into_iter()
            .find(|c| check(c))
            .ok_or_else(|| {
                undo_err("re-applying it to the patch's old side does not give the file")
            });
    }
    // No patch: every replacement's new text must be found exactly once.
    let mut spots: Vec<(usize, &Replace)> = Vec::new();
    for e in edits {
        if e.new_text.is_empty() || e.replace_all {
            return Err(undo_err(
                "its result kept no patch and its new text cannot be found (empty, or replaced everywhere)",
            ));
        }
        let new_text = e.new_text.replace("\r\n", "\n");
        let mut found = normalized.match_indices(new_text.as_str());
        let (Some((at, _)), None) = (found.next(), found.next()) else {
            return Err(UndoError {
                reason: "its result kept no patch and its new text is not found exactly once"
                    .into(),
                expected: Some(new_text.clone()),
                found: None,
            });
        };
        spots.push((at, e));
    }
    spots.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    let mut base = normalized.clone();
    let mut end_prev = usize::MAX;
    for (at, e) in &spots {
        let new_text = e.new_text.replace("\r\n", "\n");
        if at + new_text.len() > end_prev {
            return Err(undo_err("its replacements overlap in the file"));
        }
        base.replace_range(*at..at + new_text.len(), &e.old_text.replace("\r\n", "\n"));
        end_prev = *at;
    }
    let lines: Vec<&str> = base.split('\n').collect();
    for (n, text) in &record.removed_lines {
        if lines.get(n.wrapping_sub(1)) != Some(&text.as_str()) {
            return Err(undo_err(format!(
                "line {n} it recorded as removed is not what undoing it gives"
            )));
        }
    }
    candidates_of(base)
        .into_iter()
        .find(|c| check(c))
        .ok_or_else(|| undo_err("re-applying it to the undone text does not give the file"))
}

/// One hunk of a unified patch: where its new side starts (0-based line) and both sides.
struct Hunk {
    new_start: usize,
    old: Vec<String>,
    new: Vec<String>,
}

fn parse_patch(patch: &str) -> Result<Vec<Hunk>, UndoError> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut lines = patch.split('\n').peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("@@ -") else {
            continue;
        };
        let bad = || {
            undo_err(format!(
                "its patch has a hunk header that cannot be read: {line}"
            ))
        };
        let (_, new_part) = rest.split_once(" +").ok_or_else(bad)?;
        let new_part = new_part.split(" @@").next().ok_or_else(bad)?;
        let (ns, nl) = match new_part.split_once(',') {
            Some((s, l)) => (
                s.parse::<usize>().map_err(|_| bad())?,
                l.parse::<usize>().map_err(|_| bad())?,
            ),
            None => (new_part.parse::<usize>().map_err(|_| bad())?, 1),
        };
        let mut h = Hunk {
            new_start: if nl == 0 { ns } else { ns.saturating_sub(1) },
            old: Vec::new(),
            new: Vec::new(),
        };
        while let Some(l) = lines.peek() {
            let (side_old, side_new, text) = match l.as_bytes().first() {
                Some(b' ') => (true, true, &l[1..]),
                Some(b'-') => (true, false, &l[1..]),
                Some(b'+') => (false, true, &l[1..]),
                _ => break,
            };
            let text = text.to_owned();
            lines.next();
            // "\ No newline at end of file" after a line: that line has no line feed.
            let eof = lines.peek().is_some_and(|n| n.starts_with('\\'));
            if eof {
                lines.next();
            }
            let full = if eof { text } else { format!("{text}\n") };
            if side_old {
                h.old.push(full.clone());
            }
            if side_new {
                h.new.push(full);
            }
        }
        hunks.push(h);
    }
    if hunks.is_empty() {
        return Err(undo_err("its patch has no hunk"));
    }
    Ok(hunks)
}

/// `after` (LF text) with the patch's hunks reversed: each new side, found at its line,
/// replaced by its old side.
fn reverse_patch(after: &str, patch: &str) -> Result<String, UndoError> {
    let hunks = parse_patch(patch)?;
    let mut lines: Vec<String> = after.split_inclusive('\n').map(str::to_owned).collect();
    let mut delta: isize = 0;
    for h in hunks {
        let at = h.new_start as isize + delta;
        let at =
            usize::try_from(at).map_err(|_| undo_err("its patch names a line before the file"))?;
        let end = at + h.new.len();
        if end > lines.len() || lines[at..end] != h.new[..] {
            let found = lines
                .get(at..end.min(lines.len()))
                .map(|l| l.concat())
                .unwrap_or_default();
            return Err(UndoError {
                reason: format!("the file does not hold its change at line {}", at + 1),
                expected: Some(h.new.concat()),
                found: Some(found),
            });
        }
        delta += h.old.len() as isize - h.new.len() as isize;
        lines.splice(at..end, h.old);
    }
    Ok(lines.concat())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn exact(text: &str, edits: &[Replace]) -> Option<String> {
        let mut out = text.to_owned();
        for e in edits {
            if out.matches(e.old_text.as_str()).count() != 1 {
                return None;
            }
            out = out.replacen(e.old_text.as_str(), &e.new_text, 1);
        }
        Some(out)
    }

    fn rep(old: &str, new: &str) -> Replace {
        Replace {
            old_text: old.into(),
            new_text: new.into(),
            replace_all: false,
        }
    }

    struct Fake(HashMap<String, Vec<u8>>);
    impl Disk for Fake {
        fn home(&self) -> Option<String> {
            None
        }
        fn read(&self, path: &str) -> Present {
            match self.0.get(path) {
                Some(b) => Present::Bytes(b.clone()),
                None => Present::Missing,
            }
        }
        fn born_ms(&self, path: &str) -> Option<i64> {
            // Files named `old*` were there before the entry (at 100).
            self.0
                .contains_key(path)
                .then(|| if path.contains("/old") { 50 } else { 150 })
        }
        fn is_dir(&self, path: &str) -> bool {
            !path.contains("/missing")
        }
        fn place(&self, path: &str, cwd: &str) -> Place {
            if path.starts_with(&format!("{cwd}/")) && !path.contains("/out/") {
                Place::Inside(path.to_owned())
            } else {
                Place::Outside(path.to_owned())
            }
        }
    }

    fn rec(entry: &str, path: &str, change: Change, after: bool) -> Record {
        Record {
            entry_id: entry.into(),
            tool_call_id: format!("c-{entry}"),
            path: path.into(),
            change,
            after,
        }
    }

    fn edit(old: &str, new: &str, patch: Option<&str>) -> Change {
        Change::Edit {
            edits: vec![rep(old, new)],
            apply: exact,
            record: EditRecord {
                patch: patch.map(str::to_owned),
                ..Default::default()
            },
        }
    }

    fn records(recs: Vec<Record>) -> Records {
        Records {
            session_cwd: Some("/w".into()),
            records: recs,
            entry_id: "e".into(),
            leaf_id: Some("l".into()),
            entry_time_ms: Some(100),
        }
    }

    #[test]
    fn forward_replay_restores_removes_and_refuses_drift() {
        let recs = records(vec![
            rec(
                "1",
                "a.txt",
                Change::Write {
                    created: None,
                    before: None,
                    content: "one\ntwo\n".into(),
                },
                false,
            ),
            rec("2", "a.txt", edit("two", "TWO", None), true),
            rec(
                "3",
                "b.txt",
                Change::Write {
                    created: None,
                    before: None,
                    content: "new\n".into(),
                },
                true,
            ),
        ]);
        let disk = Fake(HashMap::from([
            ("/w/a.txt".to_owned(), b"one\nTWO\n".to_vec()),
            ("/w/b.txt".to_owned(), b"new\n".to_vec()),
        ]));
        let p = plan(&recs, &disk, &Options::default());
        assert_eq!(p.refusal, None);
        assert_eq!(p.files[0].status, FileStatus::Restore);
        assert_eq!(p.files[0].target, Target::Write("one\ntwo\n".into()));
        assert_eq!(p.files[1].status, FileStatus::Remove);
        let drifted = Fake(HashMap::from([
            ("/w/a.txt".to_owned(), b"one\nTWO\nmine\n".to_vec()),
            ("/w/b.txt".to_owned(), b"new\n".to_vec()),
        ]));
        let p = plan(&recs, &drifted, &Options::default());
        assert_eq!(
            p.refusal,
            Some(Refusal::Drift {
                paths: vec!["/w/a.txt".into()]
            })
        );
        assert!(
            p.files[0]
                .drift
                .as_ref()
                .unwrap()
                .diff
                .as_ref()
                .unwrap()
                .contains("+mine")
        );
        let forced = plan(
            &recs,
            &drifted,
            &Options {
                force: true,
                ..Default::default()
            },
        );
        assert_eq!(forced.refusal, None);
        assert_eq!(forced.files[0].target, Target::Write("one\ntwo\n".into()));
    }

    #[test]
    fn edits_on_unseen_content_are_undone_by_patch_or_by_search() {
        let patch = "--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n x\n-y\n+Y\n z\n";
        let recs = records(vec![
            rec("2", "a.txt", edit("y", "Y", Some(patch)), true),
            rec("3", "a.txt", edit("z", "zz", None), true),
        ]);
        let disk = Fake(HashMap::from([(
            "/w/a.txt".to_owned(),
            b"x\nY\nzz\n".to_vec(),
        )]));
        let p = plan(&recs, &disk, &Options::default());
        assert_eq!(p.refusal, None, "{:?}", p.files);
        assert_eq!(p.files[0].target, Target::Write("x\ny\nz\n".into()));
        // The file no longer holds the last edit's new text: drift, and nothing to undo.
        let disk = Fake(HashMap::from([(
            "/w/a.txt".to_owned(),
            b"x\nY\nq\n".to_vec(),
        )]));
        let p = plan(&recs, &disk, &Options::default());
        assert_eq!(p.files[0].status, FileStatus::Unknown);
        assert!(p.files[0].drift.is_some());
        assert!(matches!(p.refusal, Some(Refusal::Unrestorable { .. })));
    }

    #[test]
    fn a_write_over_unseen_content_is_unknown_until_excluded_and_outside_is_refused() {
        let recs = records(vec![
            rec("1", "a.txt", edit("a", "b", None), false),
            rec(
                "2",
                "a.txt",
                Change::Write {
                    created: None,
                    before: None,
                    content: "new".into(),
                },
                true,
            ),
            rec(
                "3",
                "/w/out/x",
                Change::Write {
                    created: None,
                    before: None,
                    content: "x".into(),
                },
                true,
            ),
        ]);
        let disk = Fake(HashMap::from([
            ("/w/a.txt".to_owned(), b"new".to_vec()),
            ("/w/out/x".to_owned(), b"x".to_vec()),
        ]));
        let p = plan(&recs, &disk, &Options::default());
        assert_eq!(p.files[0].status, FileStatus::Unknown);
        assert_eq!(p.files[1].status, FileStatus::Outside);
        let p = plan(
            &recs,
            &disk,
            &Options {
                exclude: vec!["a.txt".into(), "/w/out/x".into()],
                ..Default::default()
            },
        );
        assert_eq!(p.refusal, None);
        assert!(p.files.iter().all(|f| f.status == FileStatus::Excluded));
        // A first write over a file born before the entry: it was there, unseen.
        let recs = records(vec![rec(
            "2",
            "old.txt",
            Change::Write {
                created: None,
                before: None,
                content: "new".into(),
            },
            true,
        )]);
        let disk = Fake(HashMap::from([("/w/old.txt".to_owned(), b"new".to_vec())]));
        let p = plan(&recs, &disk, &Options::default());
        assert_eq!(p.files[0].status, FileStatus::Unknown, "{:?}", p.files[0]);
    }

    #[test]
    fn a_read_after_the_entry_gives_the_content_and_a_relative_cwd_is_refused() {
        let recs = records(vec![
            rec("2", "a.txt", Change::Read { text: "r\n".into() }, true),
            rec(
                "3",
                "a.txt",
                Change::Write {
                    created: None,
                    before: None,
                    content: "w\n".into(),
                },
                true,
            ),
        ]);
        let disk = Fake(HashMap::from([("/w/a.txt".to_owned(), b"w\n".to_vec())]));
        let p = plan(&recs, &disk, &Options::default());
        assert_eq!(p.files[0].target, Target::Write("r\n".into()));
        let p = plan(
            &recs,
            &disk,
            &Options {
                cwd: Some("w".into()),
                ..Default::default()
            },
        );
        assert_eq!(p.refusal, Some(Refusal::RelativeCwd { cwd: "w".into() }));
        // A directory that is not here (another machine's) is said as such, not as files
        // that drifted.
        let p = plan(
            &recs,
            &disk,
            &Options {
                cwd: Some("/missing/w".into()),
                ..Default::default()
            },
        );
        assert_eq!(
            p.refusal,
            Some(Refusal::MissingCwd {
                cwd: "/missing/w".into()
            })
        );
        assert!(p.files.is_empty());
    }

    #[test]
    fn a_write_s_kept_original_and_a_checkpoint_give_the_content_at_the_entry() {
        let write = |content: &str, before: Option<&str>| Change::Write {
            content: content.into(),
            created: Some(before.is_none()),
            before: before.map(str::to_owned),
        };
        let recs = records(vec![
            rec("2", "old.txt", write("new\n", Some("was\n")), true),
            rec("3", "made.txt", write("m\n", None), true),
        ]);
        let disk = Fake(HashMap::from([
            ("/w/old.txt".to_owned(), b"new\n".to_vec()),
            ("/w/made.txt".to_owned(), b"m\n".to_vec()),
        ]));
        let p = plan(&recs, &disk, &Options::default());
        assert_eq!(p.refusal, None, "{:?}", p.files);
        assert_eq!(p.files[0].target, Target::Write("was\n".into()));
        assert_eq!(p.files[1].status, FileStatus::Remove);
        // A checkpoint at the entry wins, and one of no file removes it.
        let mut recs = recs;
        recs.records.insert(
            0,
            rec(
                "e",
                "old.txt",
                Change::Checkpoint {
                    content: Some("kept\n".into()),
                },
                true,
            ),
        );
        recs.records.insert(
            1,
            rec("e", "made.txt", Change::Checkpoint { content: None }, true),
        );
        let p = plan(&recs, &disk, &Options::default());
        assert_eq!(p.files.len(), 2, "a checkpoint alone names no file");
        assert_eq!(p.files[0].target, Target::Write("kept\n".into()));
        assert_eq!(p.files[0].calls[0].kind, "checkpoint");
        assert_eq!(p.files[1].status, FileStatus::Remove);
    }

    #[test]
    fn reversing_a_patch_handles_a_missing_final_newline() {
        let patch = "--- f\n+++ f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n";
        assert_eq!(reverse_patch("a\nc", patch).unwrap(), "a\nb");
    }

    #[test]
    fn a_drift_refusal_names_its_files_in_the_right_number() {
        let one = Refusal::Drift {
            paths: vec!["/w/main.ts".into()],
        }
        .message();
        assert!(
            one.starts_with("/w/main.ts is not as the session's records leave it (")
                && one.ends_with("--force rewinds it anyway)"),
            "{one}"
        );
        let two = Refusal::Drift {
            paths: vec!["/w/a".into(), "/w/b".into()],
        }
        .message();
        assert!(
            two.starts_with("/w/a, /w/b are not as the session's records leave them (")
                && two.ends_with("--force rewinds them anyway)"),
            "{two}"
        );
    }
}
