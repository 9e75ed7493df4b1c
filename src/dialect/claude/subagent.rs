//! Subagents: Claude Code 2.1 writes each subagent's conversation as a transcript of its own,
//! `<session>/subagents/agent-<agentId>.jsonl` beside the parent's `<session>.jsonl`, with an
//! `agent-<agentId>.meta.json` whose `toolUseId` names the parent's `Agent` tool call
//! (docs/claude-code.md §5.3). This module knows those names and that metadata; reading the
//! files is the caller's. Pure.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::core::tree::NodeIdx;
use crate::dialect::claude::Tree;
use crate::dialect::claude::format::Kind;

/// A subagent's `agent-<id>.meta.json`, as far as sessiond reads it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// The agent's type (`general-purpose`, …).
    #[serde(default)]
    pub agent_type: Option<String>,
    /// What the parent asked it to do, in a few words.
    #[serde(default)]
    pub description: Option<String>,
    /// The parent's `tool_use` block that started it.
    #[serde(default)]
    pub tool_use_id: Option<String>,
}

/// Reads a `.meta.json` text; `None` when it is not the object Claude Code writes.
pub fn parse_meta(bytes: &[u8]) -> Option<Meta> {
    serde_json::from_slice(bytes).ok()
}

/// The agent id of a subagent transcript `…/subagents/agent-<id>.jsonl`; `None` for any
/// other path.
pub fn agent_id(path: &Path) -> Option<&str> {
    let dir = path.parent()?;
    if dir.file_name()? != "subagents" {
        return None;
    }
    path.file_name()?
        .to_str()?
        .strip_prefix("agent-")?
        .strip_suffix(".jsonl")
}

/// The parent transcript of a subagent transcript: `<dir>/<session>/subagents/agent-<id>.jsonl`
/// belongs to `<dir>/<session>.jsonl`. `None` for a path that is no subagent transcript.
pub fn parent_of(path: &Path) -> Option<PathBuf> {
    agent_id(path)?;
    let session_dir = path.parent()?.parent()?;
    let session = session_dir.file_name()?.to_str()?;
    Some(session_dir.with_file_name(format!("{session}.jsonl")))
}

/// The metadata file of a subagent transcript (`agent-<id>.meta.json` beside it).
pub fn meta_of(path: &Path) -> Option<PathBuf> {
    let id = agent_id(path)?;
    Some(path.with_file_name(format!("agent-{id}.meta.json")))
}

/// The folder where a transcript's subagents are written (`<session>/subagents/`).
pub fn subagents_dir(path: &Path) -> Option<PathBuf> {
    let stem = path.file_stem()?.to_str()?;
    Some(path.with_file_name(stem).join("subagents"))
}

/// The line of `tree` whose `tool_use` block has this id (the `Agent` call that started a
/// subagent).
pub fn tool_use_line(tree: &Tree, tool_use_id: &str) -> Option<NodeIdx> {
    tree.nodes()
        .iter()
        .position(|n| match &n.entry.kind {
            Kind::Assistant { tool_use_ids, .. } => {
                tool_use_ids.iter().any(|id| id.as_str() == tool_use_id)
            }
            _ => false,
        })
        .map(|i| i as NodeIdx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subagent_paths_name_their_parent_and_metadata() {
        let sub = Path::new("/h/.claude/projects/-w/abc/subagents/agent-a46c.jsonl");
        assert_eq!(agent_id(sub), Some("a46c"));
        assert_eq!(
            parent_of(sub),
            Some(PathBuf::from("/h/.claude/projects/-w/abc.jsonl"))
        );
        assert_eq!(
            meta_of(sub),
            Some(PathBuf::from(
                "/h/.claude/projects/-w/abc/subagents/agent-a46c.meta.json"
            ))
        );
        let main = Path::new("/h/.claude/projects/-w/abc.jsonl");
        assert_eq!(agent_id(main), None);
        assert_eq!(
            subagents_dir(main),
            Some(PathBuf::from("/h/.claude/projects/-w/abc/subagents"))
        );
        let meta = parse_meta(br#"{"agentType":"general-purpose","description":"d","toolUseId":"toolu_1","spawnDepth":1}"#);
        assert_eq!(meta.and_then(|m| m.tool_use_id).as_deref(), Some("toolu_1"));
    }
}
