//! `sessiond compact FILE`: plan a compaction of a leaf's path exactly as pi 1.6.0 prepares
//! it, summarize (the client's summary file or the embedded summarizer), check retention,
//! and append the compaction entry through the writer (lock, fencing, torn-tail repair) —
//! or, with `--dry-run`, report all of that and write nothing. The daemon's `session/compact`
//! runs the same code ([`crate::compact`]).
//!
//! "Nothing to compact" is a success (`{"nothingToCompact": true, "reason"}` with `--json`).
//! A dry run with `--allow-corrupt` plans on the tree pi would read from a corrupt file (bad
//! lines skipped, orphans as roots), as pi compacts such a file; a real compaction always
//! reads strictly and refuses a corrupt file. Exit codes: the [`Exit`] table.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::error::{CliError, Exit};
use super::open::{self, Opened};
use crate::compact::{self as shared, Committed, CompactRequest};
use crate::dialect::pi::compaction::SummarySource;
use crate::dialect::pi::compaction::entry::js_number;
use crate::dialect::pi::compaction::prepare::{DEFAULT_KEEP_RECENT_TOKENS, NothingToCompact};
use crate::dialect::pi::compaction::{self, CompactionPlan};
use crate::dialect::pi::format::EntryId;
use crate::model::{Api, CallOptions, ModelChoice, Progress, Summarizer};
use crate::storage::writer::{self, Expected, WriteOptions};

/// Arguments of `sessiond compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The pi session file (JSONL).
    pub file: PathBuf,
    /// Leaf entry id, or a unique prefix of one (default: the resume leaf, the last entry in the
    /// file).
    #[arg(long)]
    pub leaf: Option<String>,
    /// Compact even while an agent is working on the session (its next entry then continues
    /// from its own leaf, not from the compaction). Without it such a compaction is
    /// refused with exit 7.
    #[arg(long)]
    pub force: bool,
    /// pi's keepRecentTokens: roughly how many tokens of recent context to keep.
    #[arg(long, default_value_t = DEFAULT_KEEP_RECENT_TOKENS)]
    pub keep_recent_tokens: u64,
    /// Use this file's text, verbatim, as the summary instead of the embedded summarizer.
    #[arg(long, conflicts_with_all = ["summarizer", "model", "base_url", "api", "api_key_env"])]
    pub summary_file: Option<PathBuf>,
    /// Who writes the summary: `embedded` (the extractive digest, the default) or `model` (pi's
    /// request sent to a model endpoint: the session's current model from pi's models.json
    /// unless --model says otherwise). Any of --model, --base-url, --api, --api-key-env
    /// implies `model`.
    #[arg(long, value_name = "KIND", value_parser = ["embedded", "model"])]
    pub summarizer: Option<String>,
    /// The model to summarize with, as provider/id (default: the session's current model),
    /// looked up in pi's models.json ($PI_CODING_AGENT_DIR or ~/.pi/agent).
    #[arg(long, value_name = "PROVIDER/ID")]
    pub model: Option<String>,
    /// The model's API base URL (default: models.json's).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model's API (default: models.json's).
    #[arg(long, value_name = "API", value_parser = ["openai-completions", "anthropic-messages"])]
    pub api: Option<String>,
    /// An environment variable holding the API key (pi's runtime --api-key; default: pi's
    /// auth.json, then models.json's apiKey, then the provider's own variable).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Deadline of the whole model call, every retry included (milliseconds).
    #[arg(long, default_value_t = 300_000, value_name = "MS")]
    pub model_timeout_ms: u64,
    /// Retries of a transient model failure (HTTP 408/409/429/5xx, connection, broken stream).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub model_retries: u32,
    /// pi's customInstructions, added to the summarization request as "Additional focus".
    #[arg(long)]
    pub custom_instructions: Option<String>,
    /// Refuse to write when a retention probe is lost.
    #[arg(long)]
    pub require_retention: bool,
    /// The file's resume leaf as you last saw it: the id of its last entry, which `sessiond
    /// tree FILE` prints as "resume leaf" (`null` for a session with no entries). Required,
    /// as for every write; when the file moved on, nothing is written (exit 4, naming the new
    /// leaf). Optional with --dry-run, which then checks it if given.
    #[arg(long, value_name = "ID", required_unless_present = "dry_run")]
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
    /// With --dry-run: read a corrupt file the way pi does (skip bad lines, orphans as roots)
    /// and plan on that. A real compaction still refuses a corrupt file.
    #[arg(long)]
    pub allow_corrupt: bool,
    /// Print the report as JSON (with --dry-run: pi's firstKeptEntryId and tokensBefore, the
    /// serialized conversation and the exact summarization request).
    #[arg(long)]
    pub json: bool,
}

/// What a run produced, before printing.
enum Outcome {
    /// Nothing to compact, with the explanation when the run worked it out on the session it
    /// had read (a person's output only; else [`print_nothing`] reads the file again).
    Nothing(NothingToCompact, Option<Box<Explained>>),
    Planned {
        plan: Box<CompactionPlan>,
        written: bool,
    },
}

/// Runs `sessiond compact`, printing to `out`.
pub fn run(out: &mut dyn Write, args: &CompactArgs) -> Result<Exit, CliError> {
    super::open::require_pi(&args.file, "compact")?;
    let outcome = execute(args)?;
    match outcome {
        Outcome::Nothing(n, explained) if !args.json => print_nothing(out, args, n, explained)?,
        _ => print(out, args, &outcome)?,
    }
    Ok(Exit::Ok)
}

/// "Nothing to compact" for a person: why, in numbers, and what to do instead. The file is
/// read again for the numbers (as the run read it: leniently for a lenient dry run).
fn print_nothing(
    out: &mut dyn Write,
    args: &CompactArgs,
    reason: NothingToCompact,
    explained: Option<Box<Explained>>,
) -> Result<(), CliError> {
    let file = args.file.display();
    let Explained {
        detail: d,
        current_leaf,
    } = match explained {
        Some(e) => *e,
        None => {
            let Opened { session, lines } =
                open::open(&args.file, args.dry_run && args.allow_corrupt, "compact")?;
            explain(args, &session.tree, &lines, reason)?
        }
    };
    let leaf = d.leaf_id.as_ref().map_or("(empty)", EntryId::as_str);
    let tokens = |t: f64| format!("about {} tokens", js_number(t.round()));
    match reason {
        NothingToCompact::EmptyPath => {
            writeln!(out, "{file}: nothing to compact: the path is empty")?;
        }
        NothingToCompact::LeafIsCompaction => writeln!(
            out,
            "{file}: nothing to compact at leaf {leaf}: it is a compaction itself (already compacted)"
        )?,
        NothingToCompact::NothingBeforeCut => {
            let holds = match d.messages_since {
                1 => "holds",
                _ => "hold",
            };
            let since = match &d.compaction_id {
                Some(c) => format!(
                    "its context starts at compaction {c}; the {} after it {}",
                    crate::view::tree::count(d.messages_since, "message", "messages"),
                    holds
                ),
                None => format!(
                    "its {} {holds}",
                    crate::view::tree::count(d.messages_since, "message", "messages")
                ),
            };
            let why = if d.tokens_since < d.keep_recent_tokens as f64 {
                format!(
                    "fewer than the {} recent tokens a compaction keeps (--keep-recent-tokens)",
                    d.keep_recent_tokens
                )
            } else {
                "but no cut point leaves anything before it to summarize (pi cuts only where \
                 a user, assistant, custom or bash message starts)"
                    .to_owned()
            };
            writeln!(
                out,
                "{file}: nothing to compact at leaf {leaf}: {since} {}, {why}",
                tokens(d.tokens_since)
            )?;
        }
    }
    if d.other_leaves.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "{} more to compact at --keep-recent-tokens {}:",
        match d.other_leaves.len() {
            1 => "another leaf has",
            _ => "other leaves have",
        },
        d.keep_recent_tokens
    )?;
    // The command that would compact it, in the mode of this run.
    let mut then = String::new();
    if args.keep_recent_tokens != DEFAULT_KEEP_RECENT_TOKENS {
        then.push_str(&format!(
            " --keep-recent-tokens {}",
            args.keep_recent_tokens
        ));
    }
    if args.dry_run {
        then.push_str(" --dry-run");
    } else {
        then.push_str(&format!(" --expected-leaf {current_leaf}"));
    }
    for (other, before) in &d.other_leaves {
        writeln!(
            out,
            "  leaf {other}: {} before · sessiond compact {file} --leaf {other}{then}",
            tokens(*before)
        )?;
    }
    Ok(())
}

/// Why there was nothing to compact, in numbers, and the file's resume leaf (`null` for a
/// session without entries), for [`print_nothing`].
struct Explained {
    detail: shared::NothingDetail,
    current_leaf: String,
}

/// Works out [`Explained`] on a session already read.
fn explain(
    args: &CompactArgs,
    tree: &crate::dialect::pi::Tree,
    lines: &dyn crate::dialect::pi::render::LineSource,
    reason: NothingToCompact,
) -> Result<Explained, CliError> {
    let req = CompactRequest {
        leaf: args.leaf.as_deref(),
        keep_recent_tokens: args.keep_recent_tokens,
        ..CompactRequest::default()
    };
    Ok(Explained {
        detail: shared::explain_nothing(&args.file, tree, lines, &req, reason)?,
        current_leaf: tree
            .default_leaf()
            .map_or("null".to_owned(), |n| tree.node(n).entry.id.to_string()),
    })
}

/// The summarizer the arguments ask for.
fn summarizer(args: &CompactArgs) -> Summarizer {
    let explicit = args.model.is_some()
        || args.base_url.is_some()
        || args.api.is_some()
        || args.api_key_env.is_some();
    if args.summarizer.as_deref() == Some("model") || explicit {
        Summarizer::Model(ModelChoice {
            model: args.model.clone(),
            base_url: args.base_url.clone(),
            api: args.api.as_deref().and_then(Api::parse),
            api_key_env: args.api_key_env.clone(),
        })
    } else {
        Summarizer::Embedded
    }
}

/// A spinner on stderr while the model works, only when stderr is a terminal.
fn spinner() -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(100));
    bar.set_message("summarizing with the model");
    Some(bar)
}

/// Plans at the view, asks the model, then writes (or, with --dry-run, plans again with the
/// answer): nothing is written unless the model answered and every check passed.
fn execute_with_model(
    args: &CompactArgs,
    choice: &ModelChoice,
    req: CompactRequest<'_>,
    expected: Expected<'_>,
) -> Result<Outcome, CliError> {
    let job = {
        let Opened { session, lines } =
            open::open(&args.file, args.dry_run && args.allow_corrupt, "compact")?;
        let mut whole = String::new();
        let expected = whole_expected(&args.file, &session.tree, expected, &mut whole)?;
        match shared::model_job(&args.file, &session.tree, &lines, &req, expected)? {
            Err(n) => return Ok(Outcome::Nothing(n, None)),
            Ok(job) => job,
        }
    };
    let endpoint = job.endpoint(&args.file, choice)?;
    let opts = CallOptions {
        timeout: Duration::from_millis(args.model_timeout_ms),
        max_retries: args.model_retries,
        ..CallOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Output)?;
    let bar = spinner();
    let report = |p: Progress| {
        let Some(bar) = &bar else { return };
        bar.set_message(match p {
            Progress::Sending { part, attempt } if attempt > 1 => {
                format!("{} {part}: attempt {attempt}", endpoint.provider)
            }
            Progress::Sending { part, .. } => {
                format!("{} {part}: waiting for the model", endpoint.provider)
            }
            Progress::Receiving { part, chars } => {
                format!("{} {part}: {chars} characters", endpoint.provider)
            }
            Progress::Retrying {
                part, wait, reason, ..
            } => format!(
                "{} {part}: {reason}; retrying in {} ms",
                endpoint.provider,
                wait.as_millis()
            ),
        });
    };
    let summary = runtime.block_on(job.run(&args.file, &endpoint, &opts, &report));
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let summary = summary?;
    let req = CompactRequest {
        summary: Some(&summary),
        summary_source: SummarySource::Model,
        ..req
    };
    if args.dry_run {
        let Opened { session, lines } = open::open(&args.file, args.allow_corrupt, "compact")?;
        return Ok(
            match shared::dry_run(&args.file, &session.tree, &lines, &req, expected)? {
                Err(n) => Outcome::Nothing(n, None),
                Ok(plan) => Outcome::Planned {
                    plan: Box::new(plan),
                    written: false,
                },
            },
        );
    }
    commit(args, &req, expected)
}

/// `--expected-leaf` with a unique prefix of an id taken as the whole id (held in `whole`), as
/// every write command takes it ([`super::write::expected_leaf`]).
fn whole_expected<'a>(
    file: &std::path::Path,
    tree: &crate::dialect::pi::Tree,
    expected: Expected<'a>,
    whole: &'a mut String,
) -> Result<Expected<'a>, CliError> {
    match expected {
        Expected::Leaf(Some(given)) => {
            *whole = super::write::expected_leaf(file, tree, given)?;
            Ok(Expected::Leaf(Some(whole.as_str())))
        }
        other => Ok(other),
    }
}

fn commit(
    args: &CompactArgs,
    req: &CompactRequest<'_>,
    expected: Expected<'_>,
) -> Result<Outcome, CliError> {
    let opts = WriteOptions {
        torn_grace: Duration::from_millis(args.torn_grace_ms),
        lock_timeout: Duration::from_millis(args.lock_timeout_ms),
        // A compaction replaces much of the context the agent resumes with: worth a sync.
        sync: true,
    };
    // Strict, whatever --allow-corrupt says: nothing is ever written to a corrupt file.
    let mut session = writer::open_for_write(&args.file)?;
    super::write::Guard::context(args.force).check(&args.file, &session)?;
    let mut whole = String::new();
    let expected = whole_expected(&args.file, &session.tree, expected, &mut whole)?;
    Ok(
        match shared::commit(&args.file, &mut session, req, expected, &opts)? {
            Committed::Nothing(n) => Outcome::Nothing(n, None),
            Committed::Written { plan, .. } => Outcome::Planned {
                plan,
                written: true,
            },
        },
    )
}

fn execute(args: &CompactArgs) -> Result<Outcome, CliError> {
    let summary = args
        .summary_file
        .as_ref()
        .map(|f| {
            std::fs::read_to_string(f).map_err(|e| CliError::Argument {
                arg: "--summary-file",
                detail: format!("cannot read {}: {e}", f.display()),
            })
        })
        .transpose()?;
    let req = CompactRequest {
        leaf: args.leaf.as_deref(),
        keep_recent_tokens: args.keep_recent_tokens,
        summary: summary.as_deref(),
        summary_source: SummarySource::Client,
        custom_instructions: args.custom_instructions.as_deref(),
        require_retention: args.require_retention,
        // The conversation and the request are printed with --json only.
        with_request: args.json,
    };
    let expected = match args.expected_leaf.as_deref() {
        None if args.dry_run => Expected::Unfenced,
        // clap requires the flag without --dry-run; never write unfenced all the same.
        None => {
            return Err(CliError::Argument {
                arg: "--expected-leaf",
                detail: "required to write (the id of the file's last entry)".into(),
            });
        }
        Some("null") => Expected::Leaf(None),
        Some(id) => Expected::Leaf(Some(id)),
    };
    if let Summarizer::Model(choice) = summarizer(args) {
        return execute_with_model(args, &choice, req, expected);
    }
    if args.dry_run {
        let Opened { session, lines } = open::open(&args.file, args.allow_corrupt, "compact")?;
        let version = session.tree.header().version;
        if version < crate::dialect::pi::format::CURRENT_VERSION {
            // The plan is pi's; only the write is refused, which a dry run would not show.
            super::say(format_args!(
                "note: {} is a version-{version} file, which sessiond does not append \
                 to; `sessiond fork` of its leaf makes a version-3 copy that can be compacted",
                args.file.display()
            ));
        }
        let mut whole = String::new();
        let expected = whole_expected(&args.file, &session.tree, expected, &mut whole)?;
        let planned = shared::dry_run(&args.file, &session.tree, &lines, &req, expected)?;
        return Ok(match planned {
            // Explained on the session just read, not on a second reading of the file.
            Err(n) if !args.json => {
                let explained = explain(args, &session.tree, &lines, n)?;
                Outcome::Nothing(n, Some(Box::new(explained)))
            }
            Err(n) => Outcome::Nothing(n, None),
            Ok(plan) => Outcome::Planned {
                plan: Box::new(plan),
                written: false,
            },
        });
    }
    commit(args, &req, expected)
}

/// Prints a planned compaction, or (as JSON only) "nothing to compact"; a person's "nothing to
/// compact" is [`print_nothing`].
fn print(out: &mut dyn Write, args: &CompactArgs, outcome: &Outcome) -> io::Result<()> {
    match outcome {
        Outcome::Nothing(n, _) => writeln!(out, "{}", shared::nothing_json(*n)),
        Outcome::Planned { plan, written } => {
            if args.json {
                let report = shared::plan_json(plan, *written);
                return writeln!(out, "{}", shared::json_text(plan, &report));
            }
            print_human(out, &args.file, plan, *written)
        }
    }
}

fn print_human(
    out: &mut dyn Write,
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
        "tokens: {} before → {} after · summarized {}{} · summary: {}",
        tokens(prep.tokens_before),
        tokens(plan.tokens_after),
        crate::view::tree::count(prep.messages_to_summarize.messages, "message", "messages"),
        if prep.turn_prefix_messages.messages == 0 {
            String::new()
        } else {
            format!(
                " + {} of the turn prefix",
                prep.turn_prefix_messages.messages
            )
        },
        match plan.summary_source {
            compaction::SummarySource::Client => "client",
            compaction::SummarySource::Embedded => "embedded",
            compaction::SummarySource::Model => "model",
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
