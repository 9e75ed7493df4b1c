//! `sessiond search`: full-text search over every session under the roots (pi's and Claude
//! Code's; `--agent` for one of them), through the index in the cache directory
//! ([`crate::search`]), brought up to date first (a progress bar on a terminal while files are
//! read).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::error::{CliError, Exit};
use crate::archive;
use crate::dialect::Dialect;
use crate::js::timestamp::parse_iso;
use crate::search::{SearchIndex, SearchQuery};

/// `sessiond search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// The query: words (all must match), "a phrase", prefix*, -excluded, a OR b. Never an
    /// error: a word with a colon (src/lib.rs:42) is text, and a query that is not valid syntax
    /// (fn(x)) is searched as its words. Chinese, Japanese and other scripts without spaces are
    /// found by any two or more neighbouring characters.
    pub query: String,
    /// A directory of sessions to search (repeatable); default: pi's sessions directory, and
    /// Claude Code's projects and Codex's sessions directories when they exist.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// Hits to print (1 to 1000, as `session/search` takes).
    #[arg(long, default_value_t = 20,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub limit: usize,
    /// Continue after a previous page (`nextCursor` of --json).
    #[arg(long)]
    pub cursor: Option<String>,
    /// Only entries with this role or type (user, assistant, toolResult, bashExecution,
    /// custom, compaction, branch_summary, label, session_info, custom_message, or any other
    /// role as the file spells it; a Claude Code transcript's are user, assistant, toolResult
    /// and compaction; repeatable).
    #[arg(long = "role", value_name = "ROLE")]
    pub roles: Vec<String>,
    /// Only sessions of this agent: pi, claude-code or codex.
    #[arg(long, value_name = "AGENT", value_parser = agent)]
    pub agent: Option<Dialect>,
    /// Only sessions whose path contains TEXT.
    #[arg(long = "path", value_name = "TEXT")]
    pub path_contains: Option<String>,
    /// Only entries at or after DATE (YYYY-MM-DD or an ISO 8601 date-time).
    #[arg(long, value_name = "DATE")]
    pub after: Option<String>,
    /// Only entries before DATE (YYYY-MM-DD or an ISO 8601 date-time).
    #[arg(long, value_name = "DATE")]
    pub before: Option<String>,
    /// Search thinking too.
    #[arg(long)]
    pub thinking: bool,
    /// The index directory (default: $XDG_CACHE_HOME/sessiond/index, else ~/.cache/sessiond/index):
    /// new or empty, or an index sessiond made; any other directory is refused, never emptied.
    #[arg(long, value_name = "DIR")]
    pub index_dir: Option<PathBuf>,
    /// Search the sessions kept in this archive (`sessiond archive`) too: those whose original
    /// is gone (hits marked `archivedOnly`) or lies outside the roots searched. Their newest
    /// versions are decompressed into `archive-view/` beside the index directory and indexed
    /// as any session; hits name the original path and the archive key.
    #[arg(long, value_name = "ARCHIVE")]
    pub archive: Option<PathBuf>,
    /// Search what is indexed without reading the session files first.
    #[arg(long)]
    pub no_update: bool,
    /// Print `{hits, total, nextCursor, index}` as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--agent`: a format's name in documents ([`Dialect::as_str`]: `pi`, `claude-code`, `codex`).
fn agent(name: &str) -> Result<Dialect, String> {
    Dialect::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Dialect::ALL.iter().map(|d| d.as_str()).collect();
        format!("{name:?} is not an agent: one of {}", names.join(", "))
    })
}

/// A date argument as epoch milliseconds: `YYYY-MM-DD` is midnight UTC.
fn date(arg: &'static str, s: &Option<String>) -> Result<Option<i64>, CliError> {
    let Some(s) = s else { return Ok(None) };
    let full = if s.len() == 10 {
        format!("{s}T00:00:00.000Z")
    } else {
        s.clone()
    };
    parse_iso(&full)
        .map(Some)
        .ok_or_else(|| CliError::Argument {
            arg,
            detail: format!("{s:?} is not a date (YYYY-MM-DD or ISO 8601)"),
        })
}

fn search_err(e: crate::search::SearchError) -> CliError {
    CliError::Argument {
        arg: "search",
        detail: e.to_string(),
    }
}

/// Runs `sessiond search`. Errors: an unusable date or cursor (`Argument`), the
/// index cannot be opened or written.
pub fn run(out: &mut dyn Write, args: &SearchArgs) -> Result<Exit, CliError> {
    let after_ms = date("--after", &args.after)?;
    let before_ms = date("--before", &args.before)?;
    let offset = match &args.cursor {
        None => 0,
        Some(c) => c.parse().map_err(|_| CliError::Argument {
            arg: "--cursor",
            detail: format!("{c:?} is not a cursor from a previous page"),
        })?,
    };
    let mut roots = super::session_roots(&args.roots);
    let dir = args
        .index_dir
        .clone()
        .unwrap_or_else(crate::search::default_dir);
    let view = match &args.archive {
        None => None,
        Some(a) => {
            let vdir = archive::view::view_dir(&archive::view::cache_beside(&dir), a);
            let view = archive::view::sync(a, &vdir, &roots).map_err(CliError::Archive)?;
            roots.push(view.dir.clone());
            Some(view)
        }
    };
    let mut index = SearchIndex::open(&dir).map_err(search_err)?;
    let report = if args.no_update {
        None
    } else {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(0);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "indexing sessions {bar:30} {pos}/{len} files ({eta})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        let r = index
            .update(&roots, &mut |done, total| {
                if let Some(b) = &bar {
                    b.set_length(total as u64);
                    b.set_position(done as u64);
                }
            })
            .map_err(search_err)?;
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        Some(r)
    };
    let query = SearchQuery {
        text: args.query.clone(),
        roots,
        limit: args.limit,
        offset,
        roles: args.roles.clone(),
        agent: args.agent,
        path_contains: args.path_contains.clone(),
        after_ms,
        before_ms,
        thinking: args.thinking,
    };
    let mut found = index.search(&query).map_err(search_err)?;
    if let Some(v) = &view {
        v.relabel(&mut found.hits);
    }
    if args.json {
        let doc = json!({
            "hits": found.hits,
            "total": found.total,
            "nextCursor": found.next_cursor,
            "index": {"dir": index.dir(), "files": index.files(), "update": report},
        });
        writeln!(out, "{doc}")?;
        return Ok(Exit::Ok);
    }
    if let Some(r) = &report {
        if r.busy {
            super::say(format_args!(
                "another sessiond holds the index (a daemon keeps it up to date); searching what it last committed"
            ));
        }
        for p in &r.problems {
            super::say(format_args!(
                "{}: indexed its readable part: {}",
                p.path.display(),
                p.detail
            ));
        }
    }
    for h in &found.hits {
        writeln!(
            out,
            "{}:{} {} {} {} {}{}{}  {}",
            h.path.display(),
            h.line,
            h.format.as_str(),
            h.entry_id,
            h.role.as_deref().or(h.entry_type.as_deref()).unwrap_or("?"),
            h.timestamp.as_deref().unwrap_or("-"),
            if h.on_default_path {
                ""
            } else {
                " (off the default path)"
            },
            match (&h.archive_key, h.archived_only) {
                (Some(k), Some(true)) => format!(" (archived only: {k})"),
                (Some(k), _) => format!(" (archived: {k})"),
                _ => String::new(),
            },
            h.snippet
        )?;
    }
    if found.total == 0 && index.files() == 0 {
        let names: Vec<String> = query
            .roots
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        super::say(format_args!(
            "no sessions under {} (name another directory with --root DIR)",
            names.join(", ")
        ));
    }
    writeln!(
        out,
        "{} of {} hits{}",
        found.hits.len(),
        found.total,
        found
            .next_cursor
            .as_ref()
            .map_or(String::new(), |c| format!(" (more: --cursor {c})"))
    )?;
    Ok(Exit::Ok)
}
