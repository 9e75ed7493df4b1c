//! The command line: subcommands over the same core, storage and shared layers the daemon
//! uses ([`crate::compact`], [`crate::view::context_json`], [`crate::core::tree::Tree`]'s leaf
//! resolution and fence), so the CLI stays thin. Human-readable output by default, `--json`
//! for machines. Exit codes: the [`Exit`] table, printed under `--help`.
//!
//! stdout discipline: under `--json` a command prints exactly one JSON document, its result
//! or, when it fails, one error document ([`CliError::json_document`]) — never a truncated
//! result followed by an error. The command renders into a buffer that reaches stdout only
//! once it succeeded ([`run`]). Human output streams (a 40 MB context is not held), so a
//! human-mode failure may follow partial output; the error goes to stderr.
//!
//! Human output is for a terminal, and session text must not act on it: everything a command
//! prints without `--json` goes through [`Visible`] (control characters shown as `\x1b`...),
//! and every line on stderr goes through `say` (errors, notes, refusals). A `--json`
//! document is exact.
//!
//! Modules: [`read`] (`context`, `tree`, `explain`, `check`), [`diff`] (two leaves compared), [`export`](mod@export), [`graph`](mod@graph), [`search`](mod@search), [`verify`](mod@verify), [`rewind`](mod@rewind), [`write`](mod@write) (`fork`, `label`,
//! `name`, `branch`, `append`, `salvage`), [`compact`], [`tree`] (the folded tree), [`shell`]
//! (completions and manual pages from these definitions), and [`error`] (the exit-code table
//! and the error type), which the others import; nothing imports this module but `main`.

// stderr is written in one place only, `say`, so no message can carry session text raw.
#![deny(clippy::print_stderr)]

use std::io::{self, Seek, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::core::preview::{Visible, visible};
use crate::js::jsstr::RestoringWriter;
use clap::{Parser, Subcommand};

pub mod archive;
pub mod codex;
pub mod compact;
pub mod diff;
pub mod error;
pub mod export;
pub mod graph;
pub mod list;
pub mod open;
pub mod read;
pub mod rewind;
pub mod search;
pub mod shell;
pub mod transcript;
pub mod verify;
pub mod write;

pub use error::{CliError, Exit, Family};

/// Inspect coding-agent sessions, pi's and (read only) Claude Code's and Codex's: the tree,
/// what the model sees and why; write to pi's safely, and serve them to editors (`sessiond serve`).
#[derive(Debug, Parser)]
#[command(name = "sessiond", version, after_help = Exit::help(None))]
pub struct Cli {
    /// Log filter for stderr (e.g. `info`, `sessiond=debug`); defaults to `$SESSIOND_LOG`, then `warn`.
    #[arg(long, global = true, value_parser = log_filter)]
    pub log: Option<String>,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// `--log`: a filter `tracing_subscriber`'s `EnvFilter` accepts (a bad one is a usage error,
/// exit 2, rather than a silent `warn`).
fn log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(text)
        .map(|_| text.to_owned())
        .map_err(|e| format!("not a log filter ({e}); e.g. `info` or `sessiond=debug`"))
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print what the model sees at a leaf (pi's buildSessionContext).
    ///
    /// One line per message, its first words; `--json` prints the messages whole (as the agent
    /// sends them), and `export` renders the branch as a document to read.
    #[command(after_help = Exit::help(Some(Family::Read)))]
    Context(read::ContextArgs),
    /// Print the session tree: branches, leaves, the resume leaf, labels, compactions (long runs folded).
    #[command(after_help = Exit::help(Some(Family::Read)))]
    Tree(read::TreeArgs),
    /// Explain whether an entry reaches the model at a leaf, and why not.
    ///
    /// On a pi or Claude Code compaction, or a branch summary, it also says where the summary came from (the
    /// entries it summarizes, the entry kept from, the previous compaction; for a branch
    /// summary the branch it left) and audits it: of the facts in what it summarizes (files
    /// read or modified, tool errors, tool calls without a result, open tasks, the last
    /// request), how many the summary kept and which it lost, each with its entry (`--json`:
    /// `source` or `branch`, and `audit`).
    #[command(after_help = Exit::help(Some(Family::Read)))]
    Explain(read::ExplainArgs),
    /// Compare two leaves: where their branches part, what each did, what the model sees at one and not the other.
    #[command(after_help = Exit::help(Some(Family::Read)))]
    Diff(diff::DiffArgs),
    /// Compact a leaf's path as pi does: summarize (embedded or --summary-file), check retention, append.
    #[command(after_help = Exit::help(Some(Family::Compact)))]
    Compact(compact::CompactArgs),
    /// Export the branch to a leaf as a readable Markdown or HTML document (secrets redacted).
    #[command(after_help = Exit::help(Some(Family::Read)))]
    Export(export::ExportArgs),
    /// Draw the session tree as a commit-graph-like picture: text lanes, or --svg (long runs folded).
    #[command(after_help = Exit::help(Some(Family::Read)))]
    Graph(graph::GraphArgs),
    /// List the sessions under the roots, pi's, Claude Code's and Codex's: name, first prompt,
    /// counts, cwd, size, tokens.
    #[command(after_help = Exit::help(Some(Family::Tool)))]
    List(list::ListArgs),
    /// Search every session under the roots, pi's, Claude Code's and Codex's (full text,
    /// through an index in the cache directory).
    #[command(after_help = Exit::help(Some(Family::Search)))]
    Search(search::SearchArgs),
    /// Check a session file: ok when clean (a torn tail is reported, not fatal), corrupt otherwise.
    ///
    /// An empty file (or one holding only part of its first line) is being created for two
    /// seconds after its last change: `pending`, exit 7 (try again); after that it is corrupt,
    /// kind `emptyFile` (exit 3). A script that has just created the file expects exit 7.
    #[command(after_help = Exit::help(Some(Family::Check)))]
    Check(read::CheckArgs),
    /// Check a leaf against the world now (files, git, programs, credentials) before resuming it.
    #[command(after_help = Exit::help(Some(Family::Verify)))]
    Verify(verify::VerifyArgs),
    /// Fork the path from the root to an entry into a new session file (pi's fork).
    #[command(after_help = Exit::help(Some(Family::Fork)))]
    Fork(write::ForkArgs),
    /// Put the files the session changed after an entry back to their content at that entry,
    /// from the session's own records (--dry-run shows the diffs; --undo puts them back).
    #[command(after_help = Exit::help(Some(Family::Rewind)))]
    Rewind(rewind::RewindArgs),
    /// Set or clear the label of an entry.
    #[command(
        after_help = Exit::help(Some(Family::Append)),
        override_usage = "sessiond label [OPTIONS] --expected-leaf <ID> <FILE> <TARGET_ID> (<LABEL> | --clear)"
    )]
    Label(write::LabelArgs),
    /// Name the session.
    #[command(after_help = Exit::help(Some(Family::Append)))]
    Name(write::NameArgs),
    /// Start a new branch at an entry, with a summary of the branch being left.
    #[command(after_help = Exit::help(Some(Family::Append)))]
    Branch(write::BranchArgs),
    /// Append an entry given as JSON (id, parentId and timestamp are filled in).
    #[command(after_help = Exit::help(Some(Family::Append)))]
    Append(write::AppendArgs),
    /// Write the readable entries of a corrupt session into a new file; the original is untouched.
    #[command(after_help = Exit::help(Some(Family::Salvage)))]
    Salvage(write::SalvageArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell); see the README.
    #[command(after_help = Exit::help(Some(Family::Tool)))]
    Completions(shell::CompletionsArgs),
    /// Print the manual page sessiond(1), or write every page into --dir.
    #[command(after_help = Exit::help(Some(Family::Tool)))]
    Man(shell::ManArgs),
    /// Mirror every session file under the roots into an archive (only what changed since the
    /// last pass), or --prune it by a stated rule.
    #[command(after_help = Exit::help(Some(Family::Archive)))]
    Archive(archive::ArchiveArgs),
    /// Write an archived session back where its agent looks for it (never over a different file).
    #[command(after_help = Exit::help(Some(Family::Archive)))]
    Restore(archive::RestoreArgs),
    /// Serve sessions as a daemon: JSON-RPC over stdin/stdout with LSP framing (protocol/README.md in the source).
    #[command(after_help = Exit::help(Some(Family::Serve)))]
    Serve {
        /// A directory sessions may be read from (repeatable); default: pi's sessions
        /// directory, and Claude Code's projects and Codex's sessions directories when they exist.
        #[arg(long = "root", value_name = "DIR")]
        roots: Vec<PathBuf>,
        /// The search index directory (default: $XDG_CACHE_HOME/sessiond/index, else
        /// ~/.cache/sessiond/index): new or empty, or an index sessiond made; never emptied otherwise.
        #[arg(long, value_name = "DIR")]
        index_dir: Option<PathBuf>,
        /// Keep an archive of every session file under the roots in DIR, updated as they change
        /// (as `sessiond archive` does); also `initializationOptions.archive`.
        #[arg(long, value_name = "DIR")]
        archive: Option<PathBuf>,
    },
}

impl Command {
    /// Whether the command was asked for JSON output (`--json`).
    pub fn json(&self) -> bool {
        match self {
            Command::Context(a) => a.json,
            Command::Tree(a) => a.json,
            Command::Explain(a) => a.json,
            Command::Diff(a) => a.json,
            Command::Compact(a) => a.json,
            Command::Check(a) => a.json,
            Command::Export(a) => a.json,
            Command::Graph(a) => a.json,
            Command::Search(a) => a.json,
            Command::List(a) => a.json,
            Command::Verify(a) => a.json,
            Command::Fork(a) => a.json,
            Command::Rewind(a) => a.json,
            Command::Label(a) => a.opts.json,
            Command::Name(a) => a.opts.json,
            Command::Branch(a) => a.opts.json,
            Command::Append(a) => a.opts.json,
            Command::Salvage(a) => a.json,
            Command::Archive(a) => a.json,
            Command::Restore(a) => a.json,
            Command::Completions(_) | Command::Man(_) | Command::Serve { .. } => false,
        }
    }
}

/// Runs a parsed command line other than `serve` (which `main` hands to the server): its
/// output on stdout, errors on stderr, the exit code from the [`Exit`] table.
pub fn run(cli: Cli) -> ExitCode {
    let json = cli.command.json();
    // Text for a person shows control characters visibly (session text must not act on the
    // terminal); a JSON document and clap's own generated text leave exactly as written.
    let for_person = !json && !matches!(cli.command, Command::Completions(_) | Command::Man(_));
    // Lone surrogates are held as private-use pairs (core::jsstr); they leave as pi's escapes.
    let mut stdout = RestoringWriter::new(Visible::new(output(), for_person));
    emit(&mut stdout, json, |out| dispatch(cli.command, out))
}

/// Ends a run whose command line clap refused: its message on stderr and clap's exit code
/// (2, `usage`, for a usage error; 0 for `--help` and `--version`, printed on stdout). Under
/// `--json` (anywhere on the command line) a usage error also prints
/// `{"error": {"kind": "argument", "message"}}` on stdout, as every other failure does.
pub fn refused_command_line(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let shown = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if !shown && std::env::args_os().skip(1).any(|a| a == "--json") {
        let text = e.render().to_string();
        // The error's own lines, up to the blank line before the tip or the usage.
        let message = text
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        let message = message.trim_start_matches("error: ");
        let doc = serde_json::json!({"error": {"kind": "argument", "message": message}});
        let mut stdout = io::stdout().lock();
        // Nothing more can be said if stdout is gone; stderr still gets the message.
        let _ = writeln!(stdout, "{doc}").and_then(|()| stdout.flush());
    }
    let _ = e.print();
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// Where a command's output goes: standard output itself on a terminal (line-buffered, so a
/// person sees each line as soon as it is written); otherwise a duplicate of its descriptor
/// behind a [`DOCUMENT_BUFFER`] buffer, written in large blocks — std's line buffering would
/// scan every byte of a document of megabytes for a newline and split the writes there.
/// Standard output as such when it cannot be duplicated.
fn output() -> Output {
    use std::io::IsTerminal;
    use std::os::fd::AsFd;
    let stdout = io::stdout();
    if !stdout.is_terminal()
        && let Ok(fd) = stdout.as_fd().try_clone_to_owned()
    {
        return Output::File(io::BufWriter::with_capacity(
            DOCUMENT_BUFFER,
            std::fs::File::from(fd),
        ));
    }
    Output::Terminal(stdout.lock())
}

/// Standard output, as [`output`] opens it.
enum Output {
    /// A terminal (or a descriptor that could not be duplicated).
    Terminal(io::StdoutLock<'static>),
    /// A pipe or a file, through a buffer.
    File(io::BufWriter<std::fs::File>),
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Terminal(w) => w.write(buf),
            Output::File(w) => w.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Output::Terminal(w) => w.write_all(buf),
            Output::File(w) => w.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Terminal(w) => w.flush(),
            Output::File(w) => w.flush(),
        }
    }
}

/// Standard output as [`finish`] sees it: a writer that can take a finished `--json` document.
trait Stdout: Write {
    /// Copies a finished document to this output, then flushes it.
    fn copy_document(&mut self, document: tempfile::SpooledData) -> io::Result<()> {
        match document {
            tempfile::SpooledData::InMemory(bytes) => self.write_all(bytes.get_ref())?,
            tempfile::SpooledData::OnDisk(mut file) => {
                file.rewind()?;
                io::copy(&mut file, self)?;
            }
        }
        self.flush()
    }
}

impl Stdout for Output {
    /// A document spooled to its file goes from file to file in the kernel when standard
    /// output is a pipe or a file (`io::copy` uses `copy_file_range`, `sendfile` or `splice`
    /// there) instead of through two copies in memory.
    fn copy_document(&mut self, document: tempfile::SpooledData) -> io::Result<()> {
        match (document, &mut *self) {
            (tempfile::SpooledData::OnDisk(mut file), Output::File(w)) => {
                w.flush()?;
                file.rewind()?;
                io::copy(&mut file, w.get_mut())?;
                Ok(())
            }
            (document, Output::Terminal(w)) => w.copy_document(document),
            (document, Output::File(w)) => w.copy_document(document),
        }
    }
}

/// What a command writes to: text written through it leaves with its decoded lone surrogates
/// written back as pi's escapes ([`RestoringWriter`]); text that is final already (a context
/// document, see [`ContextJson::write_to`](crate::view::context_json::ContextJson::write_to))
/// goes through [`Sink::final_text`] as it is.
pub trait Sink: Write {
    /// The writer behind the restoring one, once what that held back is written. Errors: that
    /// write's.
    fn final_text(&mut self) -> io::Result<&mut dyn Write>;

    /// [`Sink::final_text`] when this output is a `--json` document not printed yet, which
    /// can take back what was written ahead ([`Document`]); `None` for standard output, where
    /// text leaves as it is written. Errors: [`Sink::final_text`]'s.
    fn document(&mut self) -> io::Result<Option<&mut dyn Document>>;
}

impl<W: Destination> Sink for RestoringWriter<W> {
    fn final_text(&mut self) -> io::Result<&mut dyn Write> {
        Ok(self.get_mut()?)
    }

    fn document(&mut self) -> io::Result<Option<&mut dyn Document>> {
        Ok(self.get_mut()?.document())
    }
}

/// A `--json` document that is not printed yet ([`emit`]): final text written into it ahead
/// of knowing it will hold can be taken back.
pub trait Document: Write {
    /// Drops everything written so far. Errors: the temporary file's.
    fn discard(&mut self) -> io::Result<()>;
}

/// What a [`Sink`] writes to: standard output, or a `--json` document.
trait Destination: Write {
    /// This as a [`Document`]; `None` for standard output.
    fn document(&mut self) -> Option<&mut dyn Document>;
}

impl<T: Stdout> Destination for T {
    fn document(&mut self) -> Option<&mut dyn Document> {
        None
    }
}

impl Destination for io::BufWriter<Spool> {
    fn document(&mut self) -> Option<&mut dyn Document> {
        Some(self)
    }
}

impl Document for io::BufWriter<Spool> {
    fn discard(&mut self) -> io::Result<()> {
        // The buffer cannot be dropped by itself: it goes to the spool, cut back with the rest.
        self.flush()?;
        let spool = &mut self.get_mut().0;
        spool.set_len(0).map_err(spool_failed)?;
        spool.rewind().map_err(spool_failed)?;
        Ok(())
    }
}

impl<W: Stdout> Stdout for Visible<W> {
    /// A finished `--json` document is exact: it bypasses the escaping (which is off for a
    /// `--json` command anyway).
    fn copy_document(&mut self, document: tempfile::SpooledData) -> io::Result<()> {
        self.get_mut()?.copy_document(document)
    }
}

impl Stdout for io::StdoutLock<'_> {}
impl Stdout for io::BufWriter<std::fs::File> {}
#[cfg(test)]
impl Stdout for Vec<u8> {}

/// How much of a `--json` document is held in memory before the rest goes to a temporary
/// file (bytes): a context of 100,000 messages is a document of 50 MB, which would otherwise
/// double the command's peak memory. 1 MiB holds the whole document of most sessions (no
/// temporary file is made for them); a long document's first part is written twice (grown by
/// doubling, then moved to the file), which at the 4 MiB this was cost 3 ms of the context of
/// 100,000 messages.
const DOCUMENT_IN_MEMORY: usize = 1 << 20;
/// The write buffer in front of a `--json` document (bytes).
const DOCUMENT_BUFFER: usize = 64 << 10;

/// Runs `command` with its output bound for `stdout`: under `--json` into a buffer that
/// reaches `stdout` only when the command succeeded (in memory up to [`DOCUMENT_IN_MEMORY`],
/// then spooled to an anonymous temporary file), else straight to `stdout` (see the module
/// docs); then [`finish`]es.
fn emit(
    stdout: &mut RestoringWriter<impl Stdout>,
    json: bool,
    command: impl FnOnce(&mut dyn Sink) -> Result<Exit, CliError>,
) -> ExitCode {
    // Buffered: once spooled to its file, the document would otherwise cost a system call
    // for every piece serde writes. Restored on the way in, so that it can leave as it is.
    let mut document = RestoringWriter::new(io::BufWriter::with_capacity(
        DOCUMENT_BUFFER,
        Spool(tempfile::SpooledTempFile::new(DOCUMENT_IN_MEMORY)),
    ));
    let out: &mut dyn Sink = if json { &mut document } else { &mut *stdout };
    let result = command(out);
    finish(stdout, json, document, result)
}

/// The temporary file behind a `--json` document ([`emit`]). Its write errors are marked
/// ([`SpoolFailed`]) on their way through the command, so that [`spool_failure`] can tell
/// them from the command's own I/O errors.
struct Spool(tempfile::SpooledTempFile);

/// A failed write of a [`Spool`], carried inside an `io::Error`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct SpoolFailed(io::Error);

impl Write for Spool {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(spool_failed)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(spool_failed)
    }
}

fn spool_failed(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), SpoolFailed(e))
}

/// `e`, or [`CliError::Spool`] naming the temporary directory when `e` is a failed write of
/// the document's [`Spool`] (a full disk, a temporary directory that is missing or read-only).
fn spool_failure(e: CliError) -> CliError {
    let CliError::Output(io) = e else {
        return e;
    };
    if !io.get_ref().is_some_and(|inner| inner.is::<SpoolFailed>()) {
        return CliError::Output(io);
    }
    let kind = io.kind();
    match io.into_inner().map(|inner| inner.downcast::<SpoolFailed>()) {
        Some(Ok(failed)) => CliError::Spool {
            dir: std::env::temp_dir(),
            source: failed.0,
        },
        _ => CliError::Output(io::Error::from(kind)),
    }
}

fn dispatch(command: Command, out: &mut dyn Sink) -> Result<Exit, CliError> {
    match command {
        Command::Context(args) => read::context(out, &args),
        Command::Tree(args) => read::tree(out, &args),
        Command::Explain(args) => read::explain(out, &args),
        Command::Diff(args) => diff::run(out, &args),
        Command::Check(args) => read::check(out, &args),
        Command::Export(args) => export::run(out, &args),
        Command::Graph(args) => graph::run(out, &args),
        Command::Search(args) => search::run(out, &args),
        Command::List(args) => list::run(out, &args),
        Command::Verify(args) => verify::run(out, &args),
        Command::Compact(args) => compact::run(out, &args),
        Command::Fork(args) => write::fork(out, &args),
        Command::Rewind(args) => rewind::run(out, &args),
        Command::Label(args) => write::label(out, &args),
        Command::Name(args) => write::name(out, &args),
        Command::Branch(args) => write::branch(out, &args),
        Command::Append(args) => write::append(out, &args),
        Command::Salvage(args) => write::salvage(out, &args),
        Command::Archive(args) => archive::run(out, &args),
        Command::Restore(args) => archive::restore(out, &args),
        Command::Completions(args) => shell::completions(out, &args),
        Command::Man(args) => shell::man(out, &args),
        // `main` hands `serve` to the server before the CLI runs.
        Command::Serve { .. } => Ok(Exit::Ok),
    }
}

/// Writes one message for a person on stderr, after `sessiond: `, shown through [`visible`]:
/// a path, an id or a refusal can carry session text (a header's `cwd`, a tool call's path),
/// which must not act on the terminal. Every line the command line writes on stderr goes
/// through here (clap's own usage errors aside).
#[allow(clippy::print_stderr)]
pub(crate) fn say(message: std::fmt::Arguments<'_>) {
    eprintln!("sessiond: {}", visible(&message.to_string()));
}

/// Ends a command: on success the buffered JSON `document` (empty in human mode, where the
/// output was streamed) goes to `stdout`; on failure the error goes to stderr and, under
/// `--json`, its one error document to `stdout` while the partial document is dropped. A
/// reader that went away (`| head`) is not an error.
fn finish(
    stdout: &mut RestoringWriter<impl Stdout>,
    json: bool,
    document: RestoringWriter<io::BufWriter<Spool>>,
    result: Result<Exit, CliError>,
) -> ExitCode {
    let result = result
        .and_then(|exit| {
            let document = document
                .into_inner()?
                .into_inner()
                .map_err(io::IntoInnerError::into_error)?;
            stdout.flush()?;
            stdout.get_mut()?.copy_document(document.0.into_inner())?;
            Ok(exit)
        })
        .map_err(spool_failure);
    match result {
        Ok(exit) => exit.into(),
        Err(CliError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            // An error can name what a file holds (an id, a path): shown visibly.
            say(format_args!("{e}"));
            if json && !matches!(e, CliError::Output(_)) {
                let _ = writeln!(stdout, "{}", e.json_document()).and_then(|()| stdout.flush());
            }
            e.exit().into()
        }
    }
}

#[cfg(test)]
mod tests;

/// The `--root` directories of `list` and `search`, canonical where they exist (absolute
/// otherwise); when none is given, every agent's own directory (pi's sessions directory, and
/// Claude Code's projects directory when it exists: [`Roots::default_dirs`]). A root given
/// that is no directory is named on stderr (the listing or search then has nothing from it),
/// and so are the default ones when none of them is a directory.
///
/// [`Roots::default_dirs`]: crate::session::roots::Roots::default_dirs
pub(crate) fn session_roots(given: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let defaults = given.is_empty();
    let default = crate::session::roots::Roots::default_dirs();
    let roots = if defaults { &default[..] } else { given };
    let roots: Vec<std::path::PathBuf> = roots
        .iter()
        .map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| crate::paths::absolute(r)))
        .collect();
    // An empty answer should not leave a person guessing why.
    if defaults && roots.iter().any(|r| r.is_dir()) {
        return roots;
    }
    for r in roots.iter().filter(|r| !r.is_dir()) {
        let what = if r.exists() {
            "not a directory"
        } else {
            "no such directory"
        };
        say(format_args!(
            "{}: {what}; no sessions are read from it",
            r.display()
        ));
    }
    roots
}
