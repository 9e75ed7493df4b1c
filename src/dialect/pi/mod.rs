//! The pi dialect: `@earendil-works/pi-coding-agent` 1.6.0 session files — the format, the
//! projection (`buildSessionContext`), rendering of messages, explanations, the plans of writes
//! (new entries, forks, salvage), compaction and resume verification. Pure: no I/O; message
//! bodies are read through [`crate::core::source::LineSource`].

pub mod compaction;
pub mod compare;
pub mod entries;
pub mod explain;
pub mod fork;
pub mod format;
pub mod incremental;
pub mod lines;
pub mod overview;
pub mod preview;
pub mod projection;
pub mod relocate;
pub mod render;
pub mod rewind;
pub mod salvage;
pub mod search_text;
pub mod verbatim;
pub mod verify;

pub use lines::Pi;

/// A pi session's tree.
pub type Tree = crate::core::tree::Tree<format::Entry>;
/// A node of a pi session's tree.
pub type Node = crate::core::tree::Node<format::Entry>;
