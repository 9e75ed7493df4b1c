//! `sessiond compact FILE`: plan a compaction of a leaf's path exactly as pi 1.6.0 prepares
//! it, summarize (the client's summary file or the embedded summarizer), check retention,
//! and append the compaction entry through the writer (lock, fencing, torn-tail repair) —
//! or, with `--dry-run`, report all of that and write nothing. The daemon's `session/compact`
//! runs the same code ([`crate::compact`]).
//!
//! Exit codes: 0 success (also "nothing to compact", which prints `{"nothingToCompact":
//! true, "reason"}` with `--json`), 2 usage or I/O error, unknown leaf, unsupported version
//! (only version-3 files are appended to), 3 corrupt session file, 4 stale `--expected-leaf`
//! or the file changed under us (nothing written), 5 retention refused under
//! `--require-retention` (nothing written), 6 pi itself would fail on this session, 7 busy
//! (a writer is mid-line or holds the lock: retry).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::{Value, json};
use thiserror::Error;

use crate::cli::{self, CliError};
use crate::compact::{self as shared, Committed, CompactRequest};
use crate::core::compaction::entry::js_number;
use crate::core::compaction::prepare::{DEFAULT_KEEP_RECENT_TOKENS, NothingToCompact};
use crate::core::compaction::{self, CompactionError, CompactionPlan};
use crate::core::format::EntryId;
use crate::storage::writer::{self, Expected, WriteError, WriteOptions};

/// Arguments of `sessiond compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// Leaf entry id (default: the last entry in the file).
    #[arg(long)]
    pub leaf: Option<String>,
    /// pi's keepRecentTokens: roughly how many tokens of recent context to keep.
    #[arg(long, default_value_t = DEFAULT_KEEP_RECENT_TOKENS)]
    pub keep_recent_tokens: u64,
    /// Use this file's text, verbatim, as the summary instead of the embedded summarizer.
    #[arg(long)]
    pub summary_file: Option<PathBuf>,
    /// pi's customInstructions, added to the summarization request as "Additional focus".
    #[arg(long)]
    pub custom_instructions: Option<String>,
    /// Refuse to write when a retention probe is lost.
    #[arg(long)]
    pub require_retention: bool,
    /// Only write if the file's current leaf (its last entry) is still this id (`null` for a
    /// session with no entries); without it the write is not fenced. Exit 4 when it moved on.
    #[arg(long)]
    pub expected_leaf: Option<String>,
    /// How long a torn last line must stay unchanged before it is moved aside (milliseconds).
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub torn_grace_ms: u64,
    /// How long to wait for another sessiond writer's lock (milliseconds).
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub lock_timeout_ms: u64,
    /// Report the compaction without writing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON (with --dry-run: pi's firstKeptEntryId and tokensBefore, the
    /// serialized conversation and the exact summarization request).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Error)]
enum CompactError {
    #[error(transparent)]
    Cli(#[from] CliError),
    #[error(transparent)]
    Shared(#[from] shared::CompactError),
    #[error("{}: cannot read the summary file {}: {source}", path.display(), summary.display())]
    SummaryFile {
        path: PathBuf,
        summary: PathBuf,
        source: io::Error,
    },
}

impl CompactError {
    fn exit_code(&self) -> u8 {
        match self {
            CompactError::Cli(e) => e.exit_code(),
            CompactError::Shared(shared::CompactError::Write(w)) => match w {
                WriteError::Corrupt { .. } => 3,
                WriteError::Conflict { .. }
                | WriteError::Replaced { .. }
                | WriteError::Reserved { .. }
                | WriteError::Exists { .. } => 4,
                WriteError::Busy { .. } => 7,
                _ => 2,
            },
            CompactError::Shared(shared::CompactError::RetentionLost { .. }) => 5,
            CompactError::Shared(shared::CompactError::Compaction {
                source: CompactionError::PiWouldThrow { .. },
                ..
            }) => 6,
            _ => 2,
        }
    }
}

/// What a run produced, before printing.
enum Outcome {
    Nothing(NothingToCompact),
    Planned {
        plan: Box<CompactionPlan>,
        written: bool,
    },
}

/// Runs `sessiond compact`, printing to `out`.
pub fn run(out: &mut impl Write, args: CompactArgs) -> ExitCode {
    let result = execute(&args).and_then(|outcome| {
        print(out, &args, &outcome)
            .and_then(|()| out.flush())
            .map_err(|e| CompactError::Cli(CliError::Output(e)))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CompactError::Cli(CliError::Output(e))) if e.kind() == io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            if let (true, CompactError::Shared(shared::CompactError::RetentionLost { plan, .. })) =
                (args.json, &e)
            {
                // The report is the useful part of this refusal for a script.
                let report = shared::json_text(
                    plan,
                    &json!({
                        "error": "retentionLost",
                        "written": false,
                        "retention": plan.retention,
                    }),
                );
                let _ = writeln!(out, "{report}").and_then(|()| out.flush());
            }
            eprintln!("sessiond: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn execute(args: &CompactArgs) -> Result<Outcome, CompactError> {
    let summary = match &args.summary_file {
        None => None,
        Some(f) => {
            Some(
                std::fs::read_to_string(f).map_err(|source| CompactError::SummaryFile {
                    path: args.file.clone(),
                    summary: f.clone(),
                    source,
                })?,
            )
        }
    };
    let req = CompactRequest {
        leaf: args.leaf.as_deref(),
        keep_recent_tokens: args.keep_recent_tokens,
        summary: summary.as_deref(),
        custom_instructions: args.custom_instructions.as_deref(),
        require_retention: args.require_retention,
    };
    let expected = match args.expected_leaf.as_deref() {
        None => Expected::Unfenced,
        Some("null") => Expected::Leaf(None),
        Some(id) => Expected::Leaf(Some(id)),
    };
    if args.dry_run {
        let (session, lines) = cli::open(&args.file, false)?;
        let planned = shared::dry_run(&args.file, &session.tree, &lines, &req, expected)?;
        return Ok(match planned {
            Err(n) => Outcome::Nothing(n),
            Ok(plan) => Outcome::Planned {
                plan: Box::new(plan),
                written: false,
            },
        });
    }
    let opts = WriteOptions {
        torn_grace: Duration::from_millis(args.torn_grace_ms),
        lock_timeout: Duration::from_millis(args.lock_timeout_ms),
        // A compaction replaces much of the context the agent resumes with: worth a sync.
        sync: true,
    };
    let mut session = writer::open_for_write(&args.file).map_err(shared::CompactError::from)?;
    Ok(
        match shared::commit(&args.file, &mut session, &req, expected, &opts)? {
            Committed::Nothing(n) => Outcome::Nothing(n),
            Committed::Written { plan, .. } => Outcome::Planned {
                plan,
                written: true,
            },
        },
    )
}

fn nothing_reason(n: NothingToCompact) -> &'static str {
    match n {
        NothingToCompact::EmptyPath => "the path is empty",
        NothingToCompact::LeafIsCompaction => "the leaf is a compaction (already compacted)",
        NothingToCompact::NothingBeforeCut => "nothing before the cut point (session too small)",
    }
}

/// The JSON report of a planned compaction (see [`crate::compact::plan_json`]).
pub fn plan_json(plan: &CompactionPlan, written: bool) -> Value {
    shared::plan_json(plan, written)
}

fn json_text(plan: &CompactionPlan, value: &Value) -> String {
    shared::json_text(plan, value)
}

fn print(out: &mut impl Write, args: &CompactArgs, outcome: &Outcome) -> io::Result<()> {
    match outcome {
        Outcome::Nothing(n) => {
            if args.json {
                writeln!(out, "{}", shared::nothing_json(*n))
            } else {
                writeln!(
                    out,
                    "{}: nothing to compact: {}",
                    args.file.display(),
                    nothing_reason(*n)
                )
            }
        }
        Outcome::Planned { plan, written } => {
            if args.json {
                return writeln!(out, "{}", json_text(plan, &plan_json(plan, *written)));
            }
            print_human(out, &args.file, plan, *written)
        }
    }
}

fn print_human(
    out: &mut impl Write,
    file: &Path,
    plan: &CompactionPlan,
    written: bool,
) -> io::Result<()> {
    let prep = &plan.preparation;
    let tokens = |f: f64| js_number(f).to_string();
    writeln!(
        out,
        "{}: compaction of leaf {} keeps from {}{}",
        file.display(),
        plan.leaf_id,
        prep.first_kept_entry_id,
        if prep.is_split_turn {
            " (split turn)"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "tokens: {} before → {} after · summarized {} messages{} · summary: {}",
        tokens(prep.tokens_before),
        tokens(plan.tokens_after),
        prep.messages_to_summarize.len(),
        if prep.turn_prefix_messages.is_empty() {
            String::new()
        } else {
            format!(" + {} of the turn prefix", prep.turn_prefix_messages.len())
        },
        match plan.summary_source {
            compaction::SummarySource::Client => "client",
            compaction::SummarySource::Embedded => "embedded",
        }
    )?;
    writeln!(
        out,
        "retention: {} kept, {} lost",
        plan.retention.kept, plan.retention.lost
    )?;
    for p in plan.retention.lost_probes() {
        writeln!(
            out,
            "  lost {} {:?} from entry {}",
            serde_json::to_value(p.probe.kind).unwrap_or(Value::Null),
            p.probe.text,
            p.probe.entry_id.as_ref().map_or("?", EntryId::as_str)
        )?;
    }
    if written {
        writeln!(out, "wrote compaction entry {}", plan.entry.id)
    } else {
        writeln!(
            out,
            "dry run: nothing written (entry would be {})",
            plan.entry.id
        )
    }
}
