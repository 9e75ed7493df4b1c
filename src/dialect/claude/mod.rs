//! The Claude Code dialect: transcripts under `~/.claude/projects/<cwd>/<session>.jsonl` as
//! Claude Code 2.1 writes and resumes them (`docs/claude-code.md` holds the facts and the
//! evidence) — the line format, the tree of `uuid`/`parentUuid` with its bookkeeping lines, the
//! leaf `claude --resume` continues from, what the model is sent at a leaf, and a fork into a new
//! transcript. Read only: sessiond never writes to a Claude Code transcript (a fork is a new
//! file). Pure: no I/O.

pub mod attachment;
pub mod audit;
pub mod compare;
pub mod context;
pub mod explain;
pub mod fork;
pub mod format;
pub mod leaf;
pub mod lines;
pub mod load;
pub mod overview;
pub mod preview;
pub mod relocate;
pub mod resume_memo;
pub mod rewind;
pub mod search_text;
pub mod subagent;
pub mod verify;

#[cfg(test)]
mod tests;

pub use lines::Claude;

/// A Claude Code transcript's tree.
pub type Tree = crate::core::tree::Tree<format::Entry>;
/// A node of a Claude Code transcript's tree.
pub type Node = crate::core::tree::Node<format::Entry>;

/// The leaf a read without `--leaf` uses: the line `claude --resume` continues from (the
/// parent of the first line a resume writes, [`leaf::ResumeLeaf::continues_after`]). A
/// subagent's transcript (every line a sidechain), which no `--resume` continues, has its last
/// line.
pub fn default_leaf(tree: &Tree) -> Option<crate::core::tree::NodeIdx> {
    leaf::resume_leaf(tree)
        .map(|r| r.continues_after)
        .or_else(|| {
            let all_sidechain = tree.nodes().iter().all(|n| n.entry.sidechain);
            (all_sidechain && !tree.is_empty())
                .then(|| (tree.len() - 1) as crate::core::tree::NodeIdx)
        })
}

/// Whether Claude Code looks mid-turn in the transcript: its last line of the main thread (in
/// file order, sidechains left out) is a user line (a prompt or a tool result), an attachment
/// computed for the turn, or an assistant line with a `tool_use`: Claude is about to append.
/// An answer's text, an API error or a `system` line (`turn_duration`, a compact boundary)
/// closes it. For refusing a rewind beside a running Claude ([`crate::session::activity`]).
pub fn turn_open(tree: &Tree) -> bool {
    use format::Kind;
    let last = tree.nodes().iter().rev().find(|n| !n.entry.sidechain);
    last.is_some_and(|n| match &n.entry.kind {
        Kind::User { .. } | Kind::Attachment { .. } => true,
        Kind::Assistant {
            tool_use_ids,
            api_error,
            ..
        } => !tool_use_ids.is_empty() && !api_error,
        Kind::System { .. } => false,
    })
}

/// The lines Claude Code loads on the way to `leaf` ([`load::Loaded::path`] on the file as it
/// would resume it: the compaction re-link applied, the parallel tool results put back, the
/// lines hanging below the leaf appended); the tree's own path when the load drops the leaf.
pub fn path_to(tree: &Tree, leaf: crate::core::tree::NodeIdx) -> Vec<crate::core::tree::NodeIdx> {
    let loaded = load::Loaded::new(
        tree,
        load::Plan {
            size: load::size_read(tree),
            relink: true,
            prune: true,
            before_line: None,
        },
    );
    let path = loaded.path(leaf);
    if path.is_empty() {
        tree.path_to(Some(leaf))
    } else {
        path
    }
}
