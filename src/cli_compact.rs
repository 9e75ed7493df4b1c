//! `sessiond compact FILE`: plan a compaction of a leaf's path exactly as pi 1.6.0 prepares
//! it, summarize (the client's summary file or the embedded summarizer), check retention,
//! and append the compaction entry under the file's lock — or, with `--dry-run`, report all
//! of that and write nothing.
//!
//! Exit codes: 0 success (also "nothing to compact", which prints `{"nothingToCompact":
//! true, "reason"}` with `--json`), 2 usage or I/O error, 3 corrupt session file, 4 stale
//! `--expected-leaf` (nothing written), 5 retention refused under `--require-retention`
//! (nothing written), 6 pi itself would fail on this session.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::cli::{self, CliError};
use crate::core::compaction::entry::js_number;
use crate::core::compaction::js;
use crate::core::compaction::prepare::{DEFAULT_KEEP_RECENT_TOKENS, NothingToCompact};
use crate::core::compaction::{self, CompactionError, CompactionPlan, Options};
use crate::core::format::EntryId;
use crate::core::render::LineSource;
use crate::core::tree::Tree;
use crate::storage::append::{self, AppendError};
use crate::storage::reader::{OpenError, OpenedSession};

/// Arguments of `sessiond compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
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
    /// Only write if the file's current leaf (its last entry) is still this id.
    #[arg(long)]
    pub expected_leaf: Option<String>,
    /// Report the compaction without writing anything.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Error)]
enum CompactError {
    #[error(transparent)]
    Cli(#[from] CliError),
    #[error("{}: {source}", path.display())]
    Compaction {
        path: PathBuf,
        source: CompactionError,
    },
    #[error(transparent)]
    Append(#[from] AppendError),
    #[error("{}: cannot read the summary file {}: {source}", path.display(), summary.display())]
    SummaryFile {
        path: PathBuf,
        summary: PathBuf,
        source: io::Error,
    },
    #[error("{}: stale view: expected leaf {expected}, the current leaf is {}", path.display(), current.as_deref().unwrap_or("(none)"))]
    Conflict {
        path: PathBuf,
        expected: String,
        current: Option<String>,
    },
    #[error("{}: retention check failed, nothing written; lost: {}", path.display(), lost.join("; "))]
    RetentionLost {
        path: PathBuf,
        lost: Vec<String>,
        /// The JSON report, as printed.
        report: String,
    },
    #[error("{}: version-1 sessions have no entry ids on disk; sessiond does not append to them (use --dry-run)", path.display())]
    Version1 { path: PathBuf },
}

impl CompactError {
    fn exit_code(&self) -> u8 {
        match self {
            CompactError::Cli(e) => e.exit_code(),
            CompactError::Append(AppendError::Open(OpenError::Corrupt { .. })) => 3,
            CompactError::Conflict { .. } => 4,
            CompactError::RetentionLost { .. } => 5,
            CompactError::Compaction {
                source: CompactionError::PiWouldThrow { .. },
                ..
            } => 6,
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
            if let (true, CompactError::RetentionLost { report, .. }) = (args.json, &e) {
                // The report is the useful part of this refusal for a script.
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
    if args.dry_run {
        let (session, lines) = cli::open(&args.file, false)?;
        check_expected(args, &session.tree)?;
        let planned = plan(args, &session.tree, &lines, summary.as_deref())?;
        return Ok(match planned {
            Err(n) => Outcome::Nothing(n),
            Ok(plan) => Outcome::Planned {
                plan: Box::new(plan),
                written: false,
            },
        });
    }
    append::append_under_lock(&args.file, |session: &OpenedSession, lines| {
        if session.tree.header().version < 2 {
            return Err(CompactError::Version1 {
                path: args.file.clone(),
            });
        }
        check_expected(args, &session.tree)?;
        match plan(args, &session.tree, lines, summary.as_deref())? {
            Err(n) => Ok((None, Outcome::Nothing(n))),
            Ok(plan) => {
                if args.require_retention && plan.retention.lost > 0 {
                    return Err(retention_refusal(args, &plan));
                }
                Ok((
                    Some(plan.entry_line()),
                    Outcome::Planned {
                        plan: Box::new(plan),
                        written: true,
                    },
                ))
            }
        }
    })
}

fn retention_refusal(args: &CompactArgs, plan: &CompactionPlan) -> CompactError {
    let lost = plan
        .retention
        .lost_probes()
        .map(|p| {
            format!(
                "{} {:?} (entry {})",
                serde_json::to_value(p.probe.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                p.probe.text,
                p.probe.entry_id.as_ref().map_or("?", EntryId::as_str)
            )
        })
        .collect();
    CompactError::RetentionLost {
        path: args.file.clone(),
        lost,
        report: json_text(
            plan,
            &json!({
                "error": "retentionLost",
                "written": false,
                "retention": plan.retention,
            }),
        ),
    }
}

fn check_expected(args: &CompactArgs, tree: &Tree) -> Result<(), CompactError> {
    let Some(expected) = &args.expected_leaf else {
        return Ok(());
    };
    let current = tree
        .default_leaf()
        .map(|l| tree.node(l).entry.id.to_string());
    if current.as_deref() != Some(expected.as_str()) {
        return Err(CompactError::Conflict {
            path: args.file.clone(),
            expected: expected.clone(),
            current,
        });
    }
    Ok(())
}

/// pi's `generateId`: the first 8 hex digits of a random UUID, unused in the session.
fn new_entry_id(tree: &Tree) -> EntryId {
    for _ in 0..100 {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let short = &id[..8];
        if tree.find(short).is_none() {
            return EntryId::new(short);
        }
    }
    EntryId::new(uuid::Uuid::new_v4().to_string())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn plan(
    args: &CompactArgs,
    tree: &Tree,
    lines: &dyn LineSource,
    summary: Option<&str>,
) -> Result<Result<CompactionPlan, NothingToCompact>, CompactError> {
    let leaf = cli::resolve(tree, &args.file, args.leaf.as_deref())?;
    let options = Options {
        keep_recent_tokens: args.keep_recent_tokens,
        summary,
        custom_instructions: args.custom_instructions.as_deref(),
        new_entry_id: new_entry_id(tree),
        time_ms: now_ms(),
    };
    compaction::plan(tree, lines, leaf, &options).map_err(|source| CompactError::Compaction {
        path: args.file.clone(),
        source,
    })
}

fn nothing_reason(n: NothingToCompact) -> &'static str {
    match n {
        NothingToCompact::EmptyPath => "the path is empty",
        NothingToCompact::LeafIsCompaction => "the leaf is a compaction (already compacted)",
        NothingToCompact::NothingBeforeCut => "nothing before the cut point (session too small)",
    }
}

/// The JSON report of a planned compaction (the `session/compact` result plus the
/// preparation and the exact request). Its strings may hold mapped lone surrogates: print it
/// through `json_text`.
pub fn plan_json(plan: &CompactionPlan, written: bool) -> Value {
    let prep = &plan.preparation;
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_owned(), v);
    };
    put("dryRun", json!(!written));
    put("written", json!(written));
    put("entryId", json!(plan.entry.id.as_str()));
    put("leafId", json!(plan.leaf_id.as_str()));
    put("firstKeptEntryId", json!(prep.first_kept_entry_id.as_str()));
    put("tokensBefore", js_number(prep.tokens_before));
    put("tokensAfter", js_number(plan.tokens_after));
    put("isSplitTurn", json!(prep.is_split_turn));
    put(
        "previousSummary",
        prep.previous_summary.clone().unwrap_or(Value::Null),
    );
    put(
        "messagesToSummarize",
        json!(prep.messages_to_summarize.len()),
    );
    put("turnPrefixMessages", json!(prep.turn_prefix_messages.len()));
    put("readFiles", json!(prep.file_lists.read_files));
    put("modifiedFiles", json!(prep.file_lists.modified_files));
    put("keepRecentTokens", js_number(prep.keep_recent_tokens));
    put("summarySource", json!(plan.summary_source));
    put("summary", json!(plan.entry.summary));
    put("fileOperations", json!(plan.file_operations()));
    put("conversation", json!(plan.conversation));
    put(
        "turnPrefixConversation",
        json!(plan.turn_prefix_conversation),
    );
    put("request", json!(plan.request));
    put("retention", json!(plan.retention));
    put(
        "entry",
        js::parse_json(plan.entry_json().as_bytes()).map_or(Value::Null, |(entry, _)| entry),
    );
    Value::Object(m)
}

/// `value` as JSON text, with the plan's lone surrogates written back as pi writes them
/// (a `Value` cannot hold them; see [`LoneSurrogates`](crate::core::compaction::js::LoneSurrogates)).
fn json_text(plan: &CompactionPlan, value: &Value) -> String {
    plan.lone_surrogates
        .restore_json(&value.to_string())
        .into_owned()
}

fn print(out: &mut impl Write, args: &CompactArgs, outcome: &Outcome) -> io::Result<()> {
    match outcome {
        Outcome::Nothing(n) => {
            if args.json {
                let reason = serde_json::to_value(n).unwrap_or(Value::Null);
                writeln!(
                    out,
                    "{}",
                    json!({"nothingToCompact": true, "reason": reason})
                )
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
