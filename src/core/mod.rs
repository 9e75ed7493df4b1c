//! The neutral core: what every agent's session shares — entry ids and line spans, the tree
//! of ids and parents with its leaves and paths, the problems a file can have, redaction, resume
//! verification over the tool calls a dialect read, and small shared utilities. It knows no agent: each agent's format, projection and rules live
//! in its dialect ([`crate::dialect`]).
//!
//! Invariant: nothing in `core` does I/O or knows about JSON-RPC. Reading a line never
//! fails the whole parse by itself: the parser returns values plus problems, and whether a
//! problem refuses an open is the caller's policy ([`tree::Mode`]).

pub mod ahead;
pub mod compare;
pub mod describe;
pub mod diagnostics;
pub mod ids;
pub mod lines;
pub mod overview;
pub mod preview;
pub mod raw_object;
pub mod recent;
pub mod redact;
pub mod retention;
pub mod rewind;
pub mod scalars;
pub mod searchable;
pub mod source;
pub mod tree;
pub mod verify;
