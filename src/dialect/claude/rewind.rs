//! What a rewind of a Claude Code transcript reads from it ([`crate::core::rewind`] works out
//! the rest), as Claude Code 2.1.197 records it (observed; `docs/claude-code.md` §5.5):
//!
//! * On the history of the leaf ([`super::load::history`], across compact boundaries), every
//!   `Write`, `Edit` and `MultiEdit` (older versions; 2.1.197 answers "No such tool
//!   available") `tool_use` whose `tool_result` is not `is_error`, in the order of their
//!   results, each marked before or after the entry. Subagents' lines (sidechains) are not on
//!   the history: their edits are not rewound.
//! * The result line's `toolUseResult` says what the tool did: `Write` → `{type: "create" |
//!   "update", filePath, content, structuredPatch, originalFile}` (`originalFile` `null` for a
//!   new file); `Edit` → `{filePath, oldString, newString, replaceAll, originalFile,
//!   structuredPatch, userModified}`. Claude Code stores `originalFile` only up to 10,000
//!   characters (`null` above); then an edit is undone through its `structuredPatch`, and an
//!   `update` write over content the session never held is unknown.
//! * `Read` results are not used: `toolUseResult.file.content` is Claude's normalized view of
//!   the file (line endings turned into `\n`), not its bytes.
//! * The file history Claude Code keeps when checkpointing is on (interactive sessions, or
//!   `CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING`): `file-history-snapshot` lines `{messageId,
//!   snapshot: {messageId, trackedFileBackups: {PATH: {backupFileName, version,
//!   backupTime}}}, isSnapshotUpdate}`, the last one for a prompt holding every file tracked
//!   in its turn, each with its copy at the prompt (`backupFileName` under
//!   `~/.claude/file-history/<sessionId>/`, `null`: no file). When the entry is a prompt with
//!   such a snapshot, each copy is a [`Change::Checkpoint`] at the entry ([`snapshot_at`]
//!   reads the snapshot, [`backup_path`] names a copy; the caller reads them).
//!
//! Pure: no I/O. The transcript is only read.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::context::line_value;
use super::verify::{apply_edits, blocks, leaf_cwd};
use crate::core::rewind::{Change, EditRecord, Record, Records};
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::core::verify::{Replace, tool_call_blocks};
use crate::dialect::claude::Tree;
use crate::dialect::claude::context::ContextError;
use crate::dialect::claude::format::Kind;
use crate::dialect::claude::load::history;

/// The tools whose calls change files.
const FILE_TOOLS: [&str; 3] = ["Write", "Edit", "MultiEdit"];

/// A call waiting for its result.
struct Pending {
    name: String,
    input: Value,
}

/// The files a prompt's file-history snapshot tracks: path as Claude Code names it (relative
/// to the working directory, or absolute) → its copy's file name (`None`: no file then).
pub type Snapshot = BTreeMap<String, Option<String>>;

/// The last `file-history-snapshot` of the transcript `text` for the prompt `prompt_id` (its
/// `snapshot.messageId`; later lines for the prompt, `isSnapshotUpdate`, hold the whole map
/// again with the files tracked since); `None` when there is none.
pub fn snapshot_at(text: &[u8], prompt_id: &str) -> Option<Snapshot> {
    let mut found = None;
    for line in text.split(|&b| b == b'\n') {
        // Cheap filters before a parse.
        if !contains(line, b"file-history-snapshot") || !contains(line, prompt_id.as_bytes()) {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if v.get("type").and_then(Value::as_str) != Some("file-history-snapshot") {
            continue;
        }
        let snap = v.get("snapshot");
        if snap
            .and_then(|s| s.get("messageId"))
            .and_then(Value::as_str)
            != Some(prompt_id)
        {
            continue;
        }
        let Some(tracked) = snap
            .and_then(|s| s.get("trackedFileBackups"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        let mut map = Snapshot::new();
        for (path, b) in tracked {
            match b.get("backupFileName") {
                Some(Value::String(name)) => map.insert(path.clone(), Some(name.clone())),
                Some(Value::Null) => map.insert(path.clone(), None),
                _ => continue,
            };
        }
        found = Some(map);
    }
    found
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Where Claude Code keeps a copy named in a snapshot: `CONFIG/file-history/<sessionId>/<name>`
/// (`CONFIG`: `$CLAUDE_CONFIG_DIR`, else `~/.claude`); `None` for a name that is not one plain
/// file name.
pub fn backup_path(config_dir: &Path, session_id: &str, name: &str) -> Option<PathBuf> {
    let plain = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\0']);
    (plain(session_id) && plain(name))
        .then(|| config_dir.join("file-history").join(session_id).join(name))
}

/// Claude Code's configuration directory: `$CLAUDE_CONFIG_DIR`, else `HOME/.claude`.
pub fn config_dir(env_dir: Option<&Path>, home: &Path) -> PathBuf {
    match env_dir.filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_owned(),
        None => home.join(".claude"),
    }
}

/// A `structuredPatch` (`[{oldStart, oldLines, newStart, newLines, lines}]`) as a unified
/// patch's hunks.
fn unified_patch(v: &Value) -> Option<String> {
    let hunks = v.as_array().filter(|h| !h.is_empty())?;
    let mut out = String::new();
    for h in hunks {
        let n = |k: &str| h.get(k).and_then(Value::as_u64);
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            n("oldStart")?,
            n("oldLines")?,
            n("newStart")?,
            n("newLines")?
        ));
        for l in h.get("lines").and_then(Value::as_array)? {
            out.push_str(l.as_str()?);
            out.push('\n');
        }
    }
    Some(out)
}

fn text(v: Option<&Value>, key: &str) -> Option<String> {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The change a successful call made, with its path, from its input and the result line's
/// `toolUseResult` (used when it names the same file).
fn change_of(call: &Pending, line: &Value) -> Option<(String, Change)> {
    let input = &call.input;
    let path = text(Some(input), "file_path")?;
    let result = line
        .get("toolUseResult")
        .filter(|r| r.is_object() && text(Some(r), "filePath").as_deref() == Some(path.as_str()));
    let before = text(result, "originalFile");
    let patch = result
        .and_then(|r| r.get("structuredPatch"))
        .and_then(unified_patch);
    let replace = |e: &Value| {
        Some(Replace {
            old_text: text(Some(e), "old_string")?,
            new_text: text(Some(e), "new_string")?,
            replace_all: e.get("replace_all") == Some(&Value::Bool(true)),
        })
    };
    let change = match call.name.as_str() {
        "Write" => {
            let kind = text(result, "type");
            // What was written: the result's content when the user changed it, else the
            // input's.
            let modified = result.and_then(|r| r.get("userModified")) == Some(&Value::Bool(true));
            let content = match text(result, "content") {
                Some(c) if modified => c,
                _ => text(Some(input), "content")?,
            };
            Change::Write {
                content,
                created: match kind.as_deref() {
                    Some("create") => Some(true),
                    Some("update") => Some(false),
                    _ => None,
                },
                before: before.filter(|_| kind.as_deref() == Some("update")),
            }
        }
        "Edit" => {
            // The strings the tool applied (its result's), else the call's.
            let edit = match (text(result, "oldString"), text(result, "newString")) {
                (Some(old_text), Some(new_text)) => Replace {
                    old_text,
                    new_text,
                    replace_all: result.and_then(|r| r.get("replaceAll"))
                        == Some(&Value::Bool(true)),
                },
                _ => replace(input)?,
            };
            Change::Edit {
                edits: vec![edit],
                apply: apply_edits,
                record: EditRecord {
                    patch,
                    removed_lines: Vec::new(),
                    before,
                },
            }
        }
        "MultiEdit" => {
            let edits: Vec<Replace> = input
                .get("edits")
                .and_then(Value::as_array)
                .filter(|e| !e.is_empty())?
                .iter()
                .map(replace)
                .collect::<Option<_>>()?;
            Change::Edit {
                edits,
                apply: apply_edits,
                record: EditRecord {
                    patch,
                    removed_lines: Vec::new(),
                    before,
                },
            }
        }
        _ => return None,
    };
    Some((path, change))
}

/// Reads the records of the history of `leaf`; `entry` is the line rewound to (on that
/// history). `checkpoints`: the files of the entry's file-history snapshot with their content
/// there (`None`: no file), read by the caller ([`snapshot_at`], [`backup_path`]); each becomes
/// a [`Change::Checkpoint`] at the entry. Errors: a line that cannot be read again or changed
/// since the tree was built.
pub fn collect(
    tree: &Tree,
    leaf: NodeIdx,
    entry: NodeIdx,
    source: &dyn LineSource,
    checkpoints: &[(String, Option<String>)],
) -> Result<Records, ContextError> {
    let path = history(tree, leaf);
    let entry_pos = path.iter().position(|&n| n == entry);
    let mut pending: HashMap<String, Pending> = HashMap::new();
    let mut records = Vec::new();
    let mut checkpoints_placed = false;
    let place_checkpoints = |records: &mut Vec<Record>| {
        for (p, content) in checkpoints {
            records.push(Record {
                entry_id: tree.node(entry).entry.id.to_string(),
                tool_call_id: String::new(),
                path: p.clone(),
                change: Change::Checkpoint {
                    content: content.clone(),
                },
                after: true,
            });
        }
    };
    for (pos, &n) in path.iter().enumerate() {
        if !checkpoints_placed && entry_pos.is_some_and(|e| pos > e) {
            place_checkpoints(&mut records);
            checkpoints_placed = true;
        }
        let node = tree.node(n);
        if node.entry.sidechain {
            continue;
        }
        match &node.entry.kind {
            Kind::Assistant { tool_use_ids, .. } if !tool_use_ids.is_empty() => {
                let v = line_value(tree, source, n)?;
                for (_, block, id, name) in tool_call_blocks(blocks(&v), "tool_use") {
                    if FILE_TOOLS.contains(&name) {
                        pending.insert(
                            id.to_owned(),
                            Pending {
                                name: name.to_owned(),
                                input: block.get("input").cloned().unwrap_or(Value::Null),
                            },
                        );
                    }
                }
            }
            Kind::User { result_ids, .. }
                if result_ids
                    .iter()
                    .any(|id| pending.contains_key(id.as_str())) =>
            {
                let v = line_value(tree, source, n)?;
                for block in blocks(&v) {
                    let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
                        continue;
                    };
                    let Some(call) = pending.remove(id) else {
                        continue;
                    };
                    if block.get("is_error") == Some(&Value::Bool(true)) {
                        continue;
                    }
                    let Some((file, change)) = change_of(&call, &v) else {
                        continue;
                    };
                    records.push(Record {
                        entry_id: node.entry.id.to_string(),
                        tool_call_id: id.to_owned(),
                        path: file,
                        change,
                        after: entry_pos.is_some_and(|e| pos > e),
                    });
                }
            }
            _ => {}
        }
    }
    if !checkpoints_placed && entry_pos.is_some() {
        place_checkpoints(&mut records);
    }
    let session_cwd = leaf_cwd(tree, source, &path)?;
    Ok(Records {
        session_cwd,
        records,
        entry_id: tree.node(entry).entry.id.to_string(),
        leaf_id: Some(tree.node(leaf).entry.id.to_string()),
        entry_time_ms: tree.node(entry).entry.time_ms.ms(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_structured_patch_reads_as_unified_hunks() {
        let p = json!([{"oldStart": 1, "oldLines": 3, "newStart": 1, "newLines": 3,
            "lines": [" alpha", "-beta", "+BETA", " gamma"]}]);
        assert_eq!(
            unified_patch(&p).unwrap(),
            "@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n"
        );
        assert_eq!(unified_patch(&json!([])), None);
    }

    #[test]
    fn the_last_snapshot_of_a_prompt_wins_and_names_are_plain() {
        let t = concat!(
            r#"{"type":"file-history-snapshot","messageId":"p","snapshot":{"messageId":"p","trackedFileBackups":{}},"isSnapshotUpdate":false}"#,
            "\n",
            r#"{"type":"file-history-snapshot","messageId":"a","snapshot":{"messageId":"p","trackedFileBackups":{"n.txt":{"backupFileName":null,"version":1},"e.txt":{"backupFileName":"h@v1","version":1}}},"isSnapshotUpdate":true}"#,
            "\n",
            r#"{"type":"file-history-snapshot","messageId":"q","snapshot":{"messageId":"q","trackedFileBackups":{"x":{"backupFileName":"z@v1"}}},"isSnapshotUpdate":false}"#,
        );
        let s = snapshot_at(t.as_bytes(), "p").unwrap();
        assert_eq!(s.get("n.txt"), Some(&None));
        assert_eq!(s.get("e.txt"), Some(&Some("h@v1".to_owned())));
        assert_eq!(s.len(), 2);
        assert!(snapshot_at(t.as_bytes(), "r").is_none());
        let c = Path::new("/h/.claude");
        assert_eq!(
            backup_path(c, "s", "h@v1").unwrap(),
            Path::new("/h/.claude/file-history/s/h@v1")
        );
        assert!(backup_path(c, "s", "../x").is_none());
        assert!(backup_path(c, "..", "x").is_none());
    }
}
