//! sessiond: makes pi coding-agent sessions inspectable and safe to work with.
//!
//! Architecture (each layer only calls the ones above it):
//! * [`core`] — pure: the session format, the tree, the projection (what the model sees),
//!   rendering, explanations. No I/O, no async, no protocol.
//! * [`storage`] — the only code that reads or writes session files: reader, tail reads of
//!   appended bytes, header listings; writer with lock, fencing, torn-tail repair and atomic publish.
//! * [`session`] — one owner task per open session (tree, file offset, pending partial
//!   line), its handle and the registry of open sessions, and the session roots.
//! * [`watch`] — `notify` events on the parent directories of open sessions, turned into
//!   hints for the owners.
//! * [`server`] — the daemon (`sessiond serve`): the only code that knows JSON-RPC.
//! * [`paths`] — lexical path helpers shared by the session roots and the writer.
//! * [`compact`] — compaction planned and committed through the writer, shared by the CLI and
//!   the server.
//! * [`verify`] — the world-facing half of resume verification ([`core::verify`]): files,
//!   `git`, `PATH`, the environment and pi's auth file, read only.
//! * [`rewind`] — the world-facing half of a rewind ([`core::rewind`]): the files now, the plan
//!   applied atomically with a backup directory, and that backup put back.
//! * [`search`] — the full-text index over every session under the roots (tantivy, in the
//!   user's cache directory), updated incrementally from the files.
//! * [`watch_roots`] — the recursive watch of the session roots that the live listing, the
//!   search index and the continuous archive each keep.
//! * [`model`] — summarizing a compaction with a model endpoint (pi's models.json, HTTP).
//! * [`cli`] — subcommands over the same core, storage and shared layers.
//!
//! stdout belongs to the protocol or the command's output; logs go to stderr.

#![warn(missing_docs)]

pub mod archive;
pub mod cli;
pub mod compact;
pub mod core;
pub mod dialect;
pub mod js;
pub mod listing;
pub mod listing_live;
pub mod model;
pub mod paths;
pub mod rewind;
pub mod search;
pub mod search_live;
pub mod search_words;
pub mod server;
pub mod session;
pub mod storage;
pub mod verify;
pub mod view;
pub mod watch;
pub mod watch_roots;

#[cfg(test)]
pub(crate) mod testdata;
