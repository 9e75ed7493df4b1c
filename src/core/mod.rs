//! The pure core: the pi session format, the tree, the projection, rendering of
//! messages, explanations, and the plans of writes (new entries, forks).
//!
//! Invariant: nothing in `core` does I/O or knows about JSON-RPC. Reading a line never
//! fails the whole parse by itself: the parser returns values plus problems, and whether a
//! problem refuses an open is the caller's policy ([`tree::Mode`]). Message bodies are read
//! through the [`render::LineSource`] trait, which `storage` implements.

pub mod ahead;
pub mod compaction;
pub mod diagnostics;
pub mod entries;
pub mod explain;
pub mod export;
pub mod fork;
pub mod format;
pub mod graph;
pub mod incremental;
pub mod jsstr;
pub mod preview;
pub mod projection;
pub mod raw_object;
pub mod recent;
pub mod redact;
pub mod render;
pub mod salvage;
pub mod search_text;
pub mod timestamp;
pub mod tree;
pub mod v8sort;
pub mod verbatim;
pub mod verify;
