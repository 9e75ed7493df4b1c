//! `sessiond verify`: the session at a leaf checked against the world now (working
//! directory, git, file effects, other branches, stale reads, summary claims, processes,
//! programs, credentials). Read only; exit [`Exit::Attention`] when a finding is `warn` or
//! `fail`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::cli::error::{CliError, Exit};
use crate::cli::{open, transcript};
use crate::core::verify::{Options, Status};
use crate::dialect::Dialect;

/// `sessiond verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The session file: a pi session, a Claude Code transcript or a Codex rollout (JSONL).
    pub file: PathBuf,
    /// Leaf entry id, or a unique prefix of one (default: the resume leaf: pi's last entry; the line `claude --resume` continues from).
    #[arg(long)]
    pub leaf: Option<String>,
    /// The working directory to check instead of the session's (pi's header `cwd`, the `cwd`
    /// of a Claude Code transcript's leaf line).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Print `{path, leafId, cwd, repository, attention, counts, findings}` as JSON.
    #[arg(long)]
    pub json: bool,
    /// Open a corrupt file read-only: lines that are not JSON are skipped, other problems read
    /// past, and each listed with what its agent (pi, Claude Code, Codex) does there.
    #[arg(long)]
    pub allow_corrupt: bool,
    /// List every `ok` finding too (by default they are counted by kind on one line).
    #[arg(long)]
    pub all: bool,
}

/// Runs `sessiond verify`.
pub fn run(out: &mut dyn Write, args: &VerifyArgs) -> Result<Exit, CliError> {
    let options = Options {
        cwd: args
            .cwd
            .as_ref()
            .map(|d| crate::paths::absolute(d).to_string_lossy().into_owned()),
    };
    let file = crate::paths::absolute(&args.file);
    let format = open::dialect_of(&args.file)?;
    let report = match format {
        Dialect::Codex => {
            // The history through the thread's files; edits in its other files are off the path.
            let thread = super::codex::thread(&args.file, args.allow_corrupt)?;
            let leaf = super::codex::thread_leaf(&thread, &args.file, args.leaf.as_deref())?;
            let collected = crate::dialect::codex::verify::collect(&thread, leaf, &thread.lines());
            crate::verify::evaluate_collected(collected, &file, &options)
        }
        Dialect::Pi => {
            let opened = open::open(&args.file, args.allow_corrupt, "verify")?;
            let tree = &opened.session.tree;
            let leaf = open::resolve(tree, &args.file, args.leaf.as_deref())?;
            crate::verify::verify_session(tree, leaf, &opened.lines, &file, &options).map_err(
                |source| CliError::Render {
                    path: args.file.clone(),
                    source,
                },
            )?
        }
        Dialect::Claude => {
            let read = transcript::read(&args.file, args.allow_corrupt)?;
            let tree = &read.session.tree;
            let leaf = transcript::leaf(tree, &args.file, args.leaf.as_deref())?;
            let collected = crate::dialect::claude::verify::collect(tree, Some(leaf), &read.lines)
                .map_err(|e| CliError::Transcript {
                    path: args.file.clone(),
                    detail: e.to_string(),
                })?;
            crate::verify::evaluate_collected(collected, &file, &options)
        }
    };
    if args.json {
        let mut doc = serde_json::to_value(&report).map_err(std::io::Error::other)?;
        doc["format"] = serde_json::json!(format.as_str());
        serde_json::to_writer(&mut *out, &doc).map_err(std::io::Error::other)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "verify {} · leaf {} · cwd {}",
            report.path,
            report.leaf_id.as_deref().unwrap_or("(none)"),
            report.cwd.as_deref().unwrap_or("(none)")
        )?;
        // Which repository's state was read (git runs nothing the repository configures).
        match &report.repository {
            Some(r) => writeln!(
                out,
                "git repository inspected: {} (git directory {})",
                r.work_tree, r.git_dir
            )?,
            None => writeln!(out, "no git repository inspected")?,
        }
        let kind_of = |f: &crate::core::verify::Finding| {
            serde_json::to_value(f.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        // `ok` kinds in order of first appearance, with their counts.
        let mut ok_kinds: Vec<(String, usize)> = Vec::new();
        for f in &report.findings {
            let kind = kind_of(f);
            let status = match f.status {
                Status::Ok if !args.all => {
                    match ok_kinds.iter_mut().find(|(k, _)| *k == kind) {
                        Some((_, n)) => *n += 1,
                        None => ok_kinds.push((kind, 1)),
                    }
                    continue;
                }
                Status::Ok => "ok  ",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            // The tool call too: one entry can hold several calls of the same kind.
            let entry = match (f.entry_id.as_deref(), f.tool_call_id.as_deref()) {
                (Some(e), Some(call)) => format!(" [{e} {call}]"),
                (Some(e), None) => format!(" [{e}]"),
                (None, _) => String::new(),
            };
            writeln!(out, "{status} {kind:<18} {}{entry}", f.message)?;
        }
        if !ok_kinds.is_empty() {
            let kinds: Vec<String> = ok_kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
            writeln!(out, "ok   {} (--all lists them)", kinds.join(", "))?;
        }
        writeln!(
            out,
            "{} ok, {} warn, {} fail: {}",
            report.counts.ok,
            report.counts.warn,
            report.counts.fail,
            if report.attention {
                "needs attention before resuming"
            } else {
                "nothing needs attention"
            }
        )?;
    }
    Ok(if report.attention {
        Exit::Attention
    } else {
        Exit::Ok
    })
}
