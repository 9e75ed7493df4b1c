//! What `sessiond tree`, `sessiond check` and the daemon's `session/tree` say of a rollout's
//! thread beside its lines ([`report`]): the chain of `history_base` prefixes the file
//! continues, the forks and segments that take a prefix of it, the thread's current segment
//! (Codex's SQLite state, [`super::state`]) and, given the thread read as one tree
//! ([`Thread`]), each of its files as a run of lines of that tree. One function for the command
//! line and the daemon, so both say the same.

use std::path::Path;

use serde_json::{Value, json};

use super::lineage::{Chain, Index, RolloutFile, codex_home_of};
use super::thread::Thread;

/// What `tree` and `check` say of a rollout's thread beside its lines.
pub struct Report {
    /// The thread id (`session_meta.id`).
    pub thread_id: Option<String>,
    /// The `thread` field of the JSON document: `chain` (the files the history is read
    /// from), `continuedBy` (the files that take a prefix of this one), `current`,
    /// `isCurrent` and, given the thread's tree, `files`.
    pub json: Value,
    /// Lines of the report for a person.
    pub lines: Vec<String>,
}

/// The thread the rollout `file` belongs to, its files looked for in `index`: the chain of
/// `history_base` prefixes it continues, the forks and segments that take a prefix of it, and
/// which file Codex continues the thread in. With `thread` (the thread read as one tree from
/// the same index), `files` lists each file of it as a run of lines: `{file, kind, historyId,
/// threadId, tag, firstId, lastId, lines, parentId, copiedLines, own, current}` (`parentId`:
/// the line of another file its first line hangs from; `copiedLines`: a legacy fork's copy of
/// its parent's first lines, which it holds after its own `session_meta`; `current`: the file
/// Codex continues its thread in, a fork being a thread of its own).
pub fn report(index: &Index, file: &Path, thread: Option<&Thread>) -> Report {
    let first = RolloutFile::read(file)
        .ok()
        .and_then(|f| (!f.is_empty()).then(|| f.meta()).flatten());
    let thread_id = first
        .as_ref()
        .and_then(|m| m.get("id")?.as_str().map(str::to_owned));
    let mut lines = Vec::new();
    let chain = match Chain::resolve(index, file, None) {
        Ok(chain) => {
            let links: Vec<Value> = chain
                .links
                .iter()
                .map(|l| {
                    json!({
                        "file": l.file.path,
                        "historyId": l.history_id,
                        "lastLine": l.last_line + 1,
                        "endByteOffset": if l.file.is_empty() { 0 } else { l.file.end_of(l.last_line) },
                    })
                })
                .collect();
            for l in &chain.links[..chain.links.len() - 1] {
                lines.push(format!(
                    "continues {} up to line {} (a history_base prefix, checked)",
                    l.file.path.display(),
                    l.last_line + 1
                ));
            }
            json!({"ok": true, "links": links})
        }
        Err(e) => {
            lines.push(format!("history_base: {e}"));
            json!({"ok": false, "error": e.to_string()})
        }
    };
    let me = index.get(file).map(|f| f.history_id.clone());
    let continued: Vec<Value> = index
        .files
        .iter()
        .filter(|f| {
            f.base
                .as_ref()
                .is_some_and(|b| Some(&b.history_id) == me.as_ref())
        })
        .map(|f| {
            let kind = if f.forked_from.is_none() && f.thread_id == thread_id {
                "segment"
            } else {
                "fork"
            };
            let end = f.base.as_ref().map_or(0, |b| b.end_byte_offset);
            lines.push(format!(
                "{kind} {} takes this file up to byte {end}",
                f.path.display()
            ));
            json!({"file": f.path, "kind": kind, "endByteOffset": end,
                   "endOrdinalExclusive": f.base.as_ref().and_then(|b| b.end_ordinal_exclusive)})
        })
        .collect();
    let current = thread_id
        .as_deref()
        .and_then(|t| super::state::current(&codex_home_of(file), index, t));
    let is_current = current.as_ref().is_some_and(|c| same(&c.file, file));
    if let Some(c) = &current {
        lines.push(match (is_current, c.source) {
            (true, super::state::Source::State) => {
                "current: this file is the thread's current segment (threads.rollout_path in Codex's state)".to_owned()
            }
            (true, _) => "current: this file is the thread's current segment (no state database: its name sorts last)".to_owned(),
            (false, _) => format!("not current: Codex continues the thread in {}", c.file.display()),
        });
    }
    let mut doc = json!({"chain": chain, "continuedBy": continued,
                         "current": current, "isCurrent": is_current});
    if let Some(thread) = thread {
        // Each file against its own thread's current file (a fork is a thread of its own).
        let home = codex_home_of(file);
        let mut currents: std::collections::HashMap<String, Option<std::path::PathBuf>> =
            std::collections::HashMap::new();
        if let (Some(t), Some(c)) = (&thread_id, &current) {
            currents.insert(t.clone(), Some(c.file.clone()));
        }
        let mut is_current = |t: Option<&str>, p: &Path| {
            let Some(t) = t else { return false };
            currents
                .entry(t.to_owned())
                .or_insert_with(|| super::state::current(&home, index, t).map(|c| c.file))
                .as_ref()
                .is_some_and(|c| same(c, p))
        };
        doc["files"] = json!(files(thread, &mut is_current));
    }
    Report {
        thread_id,
        json: json!({ "thread": doc }),
        lines,
    }
}

/// Each file of `thread` as a run of lines of its tree (see [`report`]).
fn files(thread: &Thread, is_current: &mut dyn FnMut(Option<&str>, &Path) -> bool) -> Vec<Value> {
    let id = |n: crate::core::tree::NodeIdx| thread.tree.node(n).entry.id.as_str().to_owned();
    thread
        .files
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let nodes: Vec<_> = f.nodes.iter().flatten().copied().collect();
            let parent = f
                .parent
                .and_then(|(pf, line)| thread.files.get(pf)?.nodes.get(line).copied().flatten());
            json!({
                "file": f.path,
                "kind": f.kind(),
                "historyId": f.history_id,
                "threadId": f.thread_id,
                "tag": f.tag,
                "firstId": nodes.first().map(|&n| id(n)),
                "lastId": nodes.last().map(|&n| id(n)),
                "lines": nodes.len(),
                "parentId": parent.map(id),
                "copiedLines": f.copied,
                "own": k == thread.own,
                "current": is_current(f.thread_id.as_deref(), &f.path),
            })
        })
        .collect()
}

/// One line for a person per file of `thread` beside the file asked for: its kind, name and
/// run of lines, the line it hangs from, and whether Codex continues the thread in it.
pub fn file_lines(doc: &Value) -> Vec<String> {
    let Some(files) = doc["thread"]["files"].as_array() else {
        return Vec::new();
    };
    files
        .iter()
        .filter(|f| f["own"] != true)
        .map(|f| {
            let name = Path::new(f["file"].as_str().unwrap_or_default())
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            format!(
                "{} {name}: lines {}…{}{}{}{}",
                f["kind"].as_str().unwrap_or_default(),
                f["firstId"].as_str().unwrap_or("?"),
                f["lastId"].as_str().unwrap_or("?"),
                f["parentId"]
                    .as_str()
                    .map_or(String::new(), |p| format!(", from {p}")),
                f["copiedLines"].as_u64().map_or(String::new(), |n| format!(
                    " (a legacy fork: its lines after its session_meta begin with a copy of the \
                     parent's first {n})"
                )),
                if f["current"] == true {
                    " (current)"
                } else {
                    ""
                }
            )
        })
        .collect()
}

/// Whether two paths name the same file (both made absolute, symbolic links resolved where
/// they can be).
fn same(a: &Path, b: &Path) -> bool {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| crate::paths::absolute(p));
    real(a) == real(b)
}
