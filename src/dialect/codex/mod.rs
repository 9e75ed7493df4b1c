//! The Codex dialect: rollouts under `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl` as Codex
//! CLI 0.171.0 (and the legacy 0.144.6) writes and resumes them (`docs/codex.md` holds the
//! facts and the evidence) — the line format, each file a linear run of lines, a thread spread
//! over files by `history_base` prefixes (forks, revert segments), and the Responses API `input`
//! Codex sends when it resumes at a line. Read only: sessiond never writes to a rollout.
//! [`format`], [`lines`], [`preview`] and [`replay`] are pure; [`lineage`] and [`context`] read
//! the other files of a thread.

pub mod audit;
pub mod compare;
pub mod context;
pub mod format;
pub mod leaf_replay;
pub mod lineage;
pub mod lines;
pub mod overview;
pub mod preview;
pub mod replay;
pub mod report;
pub mod search_text;
pub mod state;
pub mod thread;
pub mod verify;

#[cfg(test)]
mod tests;

pub use lines::Codex;

/// A Codex rollout's tree (linear: each line hangs from the one before).
pub type Tree = crate::core::tree::Tree<format::Entry>;
