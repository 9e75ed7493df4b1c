//! sessiond: makes pi coding-agent sessions inspectable and safe to work with.
//!
//! Architecture (each layer only calls the ones above it):
//! * [`core`] — pure: the session format, the tree, the projection (what the model sees),
//!   rendering, explanations. No I/O, no async, no protocol.
//! * [`storage`] — the only code that reads or writes session files (reader; writer with
//!   lock, fencing, torn-tail repair and atomic publish).
//! * [`cli`], [`cli_write`] — subcommands over the same core and storage.
//!
//! stdout belongs to the protocol or the command's output; logs go to stderr.

pub mod cli;
pub mod cli_compact;
pub mod cli_write;
pub mod core;
pub mod storage;
