//! A fork of a Claude Code transcript, in the shape `claude --resume ID --fork-session` writes
//! (docs/claude-code.md §5.2), less the new prompt and answer: a new transcript holding the
//! path Claude Code loads to the leaf (§7.1–§7.2: the path with the parallel tool results put
//! back and the attachments below the leaf) from the newest compact boundary on it, with the
//! same `uuid`s and `timestamp`s, every `parentUuid` as Claude Code re-links it (the preserved
//! segment under its summary), `sessionId` rewritten to the new id and the source's `slug`
//! dropped; then a `last-prompt` naming the leaf. `claude --resume NEW` continues it exactly as
//! it would have continued the source at that leaf.
//!
//! Pure: the lines are read through a [`LineSource`]; the caller publishes the new file.

use std::collections::HashSet;

use serde_json::json;

use crate::core::ids::EntryId;
use crate::core::raw_object::RawObject;
use crate::core::source::LineSource;
use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::context::ContextError;
use crate::dialect::claude::load::{Loaded, Plan, size_read};

/// The new transcript's lines and what they hold.
#[derive(Clone, Debug)]
pub struct ForkPlan {
    /// The lines, each without its newline: the `mode` line (when the source has one), the
    /// path, the `last-prompt`.
    pub lines: Vec<Vec<u8>>,
    /// The path's last line: the line `claude --resume` on the fork continues from.
    pub leaf_id: EntryId,
    /// Tree lines in the new file.
    pub entry_count: usize,
    /// Lines whose `parentUuid` differs from the source's (re-linked as Claude Code loads them).
    pub rewritten: Vec<EntryId>,
    /// The working directory the leaf's line names (`cwd`), if any.
    pub cwd: Option<String>,
    /// The compact boundary the path starts at, when it starts at one.
    pub from_boundary: Option<EntryId>,
}

/// The path Claude Code loads to `leaf`, from the newest compact boundary on it, with each line's
/// parent as it loads it: read as Claude Code reads the file (`size` bytes: over 5 MiB it is
/// pruned), or, for a leaf that reading no longer reaches, as the file was when that leaf was
/// current (as [`super::context::context`] reads it). Errors: a leaf no reading reaches.
pub fn loaded_path(
    tree: &Tree,
    leaf: NodeIdx,
    size: u64,
) -> Result<Vec<(NodeIdx, Option<EntryId>)>, ContextError> {
    let plans = [(true, true), (false, true), (true, false), (false, false)];
    let Some(loaded) = plans
        .into_iter()
        .map(|(relink, prune)| {
            Loaded::new(
                tree,
                Plan {
                    size,
                    relink,
                    prune,
                    before_line: None,
                },
            )
        })
        .find(|l| l.live(leaf))
    else {
        return Err(ContextError::shadowed(tree, leaf));
    };
    let mut path = loaded.path(leaf);
    if let Some(b) = path
        .iter()
        .rposition(|&n| tree.node(n).entry.kind.is_compact_boundary())
    {
        path.drain(..b);
    }
    let ids: HashSet<&str> = path
        .iter()
        .map(|&n| tree.node(n).entry.id.as_str())
        .collect();
    // A parent outside the copied lines (the first line's, a parent naming no line that Claude
    // Code replaced by the closest earlier line) becomes the line before it on the path.
    let mut out = Vec::with_capacity(path.len());
    for (i, &n) in path.iter().enumerate() {
        let parent = match loaded.parent_id(n) {
            Some(p) if ids.contains(p.as_str()) => Some(p.clone()),
            _ if i == 0 => None,
            _ => Some(tree.node(path[i - 1]).entry.id.clone()),
        };
        out.push((n, parent));
    }
    Ok(out)
}

/// The value of the source's last `mode` line (`normal`, `plan`, …), read through `source`;
/// `None` when it has none or it cannot be read.
pub fn last_mode(tree: &Tree, source: &dyn LineSource) -> Option<String> {
    let aside = tree
        .ext()
        .asides()
        .iter()
        .rev()
        .find(|a| a.kind == "mode")?;
    let bytes = source.line(aside.span).ok()?;
    RawObject::parse(&bytes)
        .ok()?
        .get_str("mode")
        .map(|m| m.into_owned())
}

/// Plans the fork of `tree` at `leaf` into session `session_id`: the new file's lines (see
/// the module docs). `file_size` is the source's size as `stat` gives it (default: the end of
/// the last line read); `mode` the value of the source's last `mode` line, if any. Errors:
/// [`ContextError`].
pub fn plan_fork(
    tree: &Tree,
    source: &dyn LineSource,
    leaf: NodeIdx,
    session_id: &str,
    file_size: Option<u64>,
    mode: Option<&str>,
) -> Result<ForkPlan, ContextError> {
    let path = loaded_path(tree, leaf, file_size.unwrap_or_else(|| size_read(tree)))?;
    let ids: HashSet<&str> = path
        .iter()
        .map(|&(n, _)| tree.node(n).entry.id.as_str())
        .collect();
    let mut lines = Vec::with_capacity(path.len() + 2);
    if let Some(mode) = mode {
        lines.push(
            json!({"type": "mode", "mode": mode, "sessionId": session_id})
                .to_string()
                .into_bytes(),
        );
    }
    let mut rewritten = Vec::new();
    let mut cwd = None;
    for (n, parent) in &path {
        let e = &tree.node(*n).entry;
        let bytes = source
            .line(e.span)
            .map_err(|err| ContextError::read(e, err))?;
        let mut obj =
            RawObject::parse(&bytes).map_err(|detail| ContextError::changed(e, detail))?;
        if obj.get_str("uuid").as_deref() != Some(e.id.as_str()) {
            return Err(ContextError::changed(e, "its uuid differs"));
        }
        if parent.as_ref() != e.parent_id.as_ref() {
            rewritten.push(e.id.clone());
        }
        obj.set_value("parentUuid", &parent.as_ref().map(EntryId::as_str));
        obj.set_value("sessionId", session_id);
        // The session's three-word name belongs to the source (`--fork-session` drops it).
        obj.remove("slug");
        // A boundary's logical parent that the fork does not hold would name no line.
        if let Some(logical) = obj.get_str("logicalParentUuid").map(|l| l.into_owned())
            && !ids.contains(logical.as_str())
        {
            obj.remove("logicalParentUuid");
            rewritten.push(e.id.clone());
        }
        if n == &leaf || cwd.is_none() {
            cwd = obj.get_str("cwd").map(|c| c.into_owned()).or(cwd);
        }
        lines.push(obj.to_line().into_bytes());
    }
    let last = path.last().map(|&(n, _)| n).unwrap_or(leaf);
    let leaf_id = tree.node(last).entry.id.clone();
    lines.push(
        json!({"type": "last-prompt", "leafUuid": leaf_id.as_str(), "sessionId": session_id})
            .to_string()
            .into_bytes(),
    );
    rewritten.dedup();
    Ok(ForkPlan {
        lines,
        leaf_id,
        entry_count: path.len(),
        rewritten,
        cwd,
        from_boundary: path
            .first()
            .map(|&(n, _)| &tree.node(n).entry)
            .filter(|e| e.kind.is_compact_boundary())
            .map(|e| e.id.clone()),
    })
}
