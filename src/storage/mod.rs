//! Storage: the only code that touches session files.
//!
//! * [`lines`] — the one line policy (header, entries, blank lines, CRLF, torn tails,
//!   corruption) and the one [`lines::Position`] every reader resumes from.
//! * [`reader`] — opening a file: a streaming read into an [`reader::OpenedSession<Pi>`] (tree,
//!   position, stamp), which the session owner then keeps and the writer appends through.
//! * [`tail`] — cheap stamps and positioned reads of what was appended to an open file.
//! * [`list`] — headers for listings.
//! * [`subagents`] — the subagent transcripts beside a Claude Code transcript.
//! * [`writer`] — appends with lock and fencing, torn-tail repair, fork and salvage into new
//!   files, built on [`lock`] (the advisory write lock) and [`publish`] (atomic creation).
//! * [`faults`] — injected write faults, for tests only.
//!
//! [`WATCH_ENV`] chooses how session files and their directories are followed (by the open
//! sessions' watches and by the session list's).

pub mod faults;
pub mod lines;
pub mod list;
pub mod lock;
pub mod publish;
pub mod reader;
pub mod subagents;
pub mod tail;
pub mod writer;

/// The environment variable that chooses the watch backend: `poll` forces polling for every
/// directory (a test and diagnostic knob: it shows what clients see when inotify is used up);
/// unset, empty or `auto` means live events where the platform gives them.
pub const WATCH_ENV: &str = "SESSIOND_WATCH";
