//! `sessiond list`: the sessions under the roots with what a picker shows (the daemon's
//! `session/list`), pi's and Claude Code's, newest first, a Claude Code subagent's transcript
//! printed under the transcript that started it; through the listing cache
//! ([`crate::listing`]), so a second listing of unchanged files only stats them.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::error::{CliError, Exit};
use crate::listing::ListedSession;
use crate::listing::{ListCache, Listed};
use crate::storage::list;

/// `sessiond list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// A directory of sessions to list (repeatable); default: pi's sessions directory, and
    /// Claude Code's projects and Codex's sessions directories when they exist.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// The listing cache file (default: $XDG_CACHE_HOME/sessiond/list-cache.json, else
    /// ~/.cache/sessiond/list-cache.json). A file that is not a listing cache is never
    /// replaced: the listing is printed and the cache not kept.
    #[arg(long, value_name = "FILE")]
    pub cache: Option<PathBuf>,
    /// List the sessions kept in this archive instead (`sessiond archive`), each with whether
    /// its original still exists; with --json `{archive, archived}`.
    #[arg(long, value_name = "ARCHIVE")]
    pub archive: Option<PathBuf>,
    /// Print `{roots, sessions, skipped, pending, read}` as JSON (each session as in the
    /// daemon's `session/list`; `read`: files read in full, not answered from the cache).
    #[arg(long)]
    pub json: bool,
}

/// Runs `sessiond list`. Errors: output only; an unreadable root lists nothing, a cache that
/// cannot be written is reported on stderr.
pub fn run(out: &mut dyn Write, args: &ListArgs) -> Result<Exit, CliError> {
    if let Some(archive) = &args.archive {
        return super::archive::list(out, archive, args.json);
    }
    let roots = super::session_roots(&args.roots);
    let cache_file = args
        .cache
        .clone()
        .unwrap_or_else(crate::listing::default_cache_file);
    // The cache is read while the roots are walked (each file's metadata taken as it is found).
    let (mut cache, found) = rayon::join(
        || ListCache::load(&cache_file),
        || {
            roots
                .iter()
                .map(|r| {
                    let mut files = list::session_files_with_metadata(r);
                    files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    files
                })
                .collect::<Vec<_>>()
        },
    );
    let mut sessions: Vec<ListedSession> = Vec::new();
    let (mut skipped, mut pending) = (Vec::new(), Vec::new());
    let mut listed = HashSet::new();
    for (root, mut files) in roots.iter().zip(found) {
        let seen: HashSet<PathBuf> = files.iter().map(|(f, _)| f.clone()).collect();
        files.retain(|(f, _)| listed.insert(f.clone()));
        for ((f, _), l) in files.iter().zip(cache.list_found(&files)) {
            match l {
                Listed::Session(s) => sessions.push(*s),
                Listed::Pending => pending.push(f.clone()),
                Listed::Skipped(why) => skipped.push((f.clone(), why)),
            }
        }
        cache.retain_under(root, &seen);
    }
    if let Err(e) = cache.save(&cache_file) {
        super::say(format_args!(
            "cannot save the listing cache {}: {e}",
            cache_file.display()
        ));
    }
    sessions.sort_by(|a, b| {
        b.modified_ms
            .cmp(&a.modified_ms)
            .then_with(|| a.path.cmp(&b.path))
    });
    if args.json {
        /// The `--json` document, written straight to the output.
        #[derive(serde::Serialize)]
        struct Document<'a> {
            roots: Vec<String>,
            sessions: &'a [ListedSession],
            skipped: Vec<String>,
            pending: Vec<String>,
            read: u64,
        }
        // Paths as text (a name that is not UTF-8 with U+FFFD; a session's `pathUri` names it
        // exactly).
        let text = |ps: &[PathBuf]| -> Vec<String> {
            ps.iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect()
        };
        let doc = Document {
            roots: text(&roots),
            sessions: &sessions,
            skipped: skipped
                .iter()
                .map(|(p, _)| p.to_string_lossy().into_owned())
                .collect(),
            pending: text(&pending),
            read: cache.reads(),
        };
        let mut buffered = std::io::BufWriter::with_capacity(1 << 16, &mut *out);
        serde_json::to_writer(&mut buffered, &doc).map_err(std::io::Error::from)?;
        writeln!(buffered)?;
        buffered.flush()?;
        return Ok(Exit::Ok);
    }
    // A subagent's transcript is printed under its parent's when that is listed too, and in
    // its own place otherwise.
    let listed_paths: HashSet<&Path> = sessions.iter().map(|s| s.path.as_path()).collect();
    let under_parent = |s: &ListedSession| {
        s.subagent
            .as_ref()
            .is_some_and(|a| listed_paths.contains(a.parent_path.as_path()))
    };
    for s in sessions.iter().filter(|s| !under_parent(s)) {
        print_session(out, s, "")?;
        for child in sessions.iter().filter(|c| {
            under_parent(c) && c.subagent.as_ref().is_some_and(|a| a.parent_path == s.path)
        }) {
            print_session(out, child, "    ")?;
        }
    }
    for p in &pending {
        writeln!(out, "being created: {}", p.display())?;
    }
    for (p, why) in &skipped {
        match why {
            Some(why) => super::say(format_args!("{why}; not listed")),
            None => super::say(format_args!(
                "{}: not a session sessiond reads",
                p.display()
            )),
        }
    }
    if sessions.is_empty() && pending.is_empty() && skipped.is_empty() {
        let names: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        super::say(format_args!(
            "no sessions under {} (name another directory with --root DIR)",
            names.join(", ")
        ));
    }
    Ok(Exit::Ok)
}

/// Two lines for one listed session, each after `indent`: when, sizes, format and title; then
/// the path, cwd and bytes (and for a subagent, what it was asked).
fn print_session(out: &mut dyn Write, s: &ListedSession, indent: &str) -> Result<(), CliError> {
    let title = s
        .name
        .as_deref()
        .or(s.first_message.as_deref())
        .unwrap_or("(no messages)");
    writeln!(
        out,
        "{indent}{}  {:>5} {:<7} {:>3} {:<6} {:>8} tokens  {:<11}  {}",
        s.modified.as_deref().unwrap_or("-"),
        s.entry_count,
        if s.entry_count == 1 {
            "entry"
        } else {
            "entries"
        },
        s.leaf_count,
        if s.leaf_count == 1 { "leaf" } else { "leaves" },
        s.token_estimate
            .map_or_else(|| "-".to_owned(), |t| t.to_string()),
        s.format.as_str(),
        title
    )?;
    let agent = s.subagent.as_ref().map_or_else(String::new, |a| {
        let what = [a.agent_type.as_deref(), a.description.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(": ");
        format!(
            ", subagent {}{}",
            a.agent_id,
            if what.is_empty() {
                String::new()
            } else {
                format!(" ({what})")
            }
        )
    });
    let corrupt = match s.corruptions {
        0 => String::new(),
        n => format!(
            ", {}: `sessiond check` says where",
            crate::view::tree::count(n, "corrupt spot", "corrupt spots")
        ),
    };
    writeln!(
        out,
        "{indent}    {}  (cwd {}, {} bytes{agent}{corrupt})",
        s.path.display(),
        s.cwd.as_deref().unwrap_or("-"),
        s.size,
    )?;
    Ok(())
}
