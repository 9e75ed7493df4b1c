//! `sessiond completions SHELL` and `sessiond man`: shell completions and manual pages made
//! from the command line's own definitions ([`Cli`]), so they cannot drift from `--help`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;
use super::error::{CliError, Exit};

/// `sessiond completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `sessiond man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write sessiond.1 and one page per command (sessiond-tree.1, ...) into this directory
    /// (created if missing) instead of printing sessiond.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints the completion script for `args.shell`.
pub fn completions(out: &mut dyn Write, args: &CompletionsArgs) -> Result<Exit, CliError> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "sessiond", out);
    Ok(Exit::Ok)
}

/// Prints sessiond(1), or writes every page into `--dir`, naming each file written.
pub fn man(out: &mut dyn Write, args: &ManArgs) -> Result<Exit, CliError> {
    // No page for `help`: every page is the help.
    let cmd = Cli::command().disable_help_subcommand(true);
    let Some(dir) = &args.dir else {
        clap_mangen::Man::new(cmd).render(out)?;
        return Ok(Exit::Ok);
    };
    let io = |path: &Path| {
        let path = path.to_owned();
        move |e: std::io::Error| CliError::Argument {
            arg: "--dir",
            detail: format!("cannot write {}: {e}", path.display()),
        }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut pages = vec![("sessiond".to_owned(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        // The page is sessiond-tree(1); its usage line names the whole command: `sessiond tree`.
        let name = format!("sessiond-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("sessiond {}", sub.get_name()));
        pages.push((name, page));
    }
    for (name, page) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut bytes = Vec::new();
        clap_mangen::Man::new(page)
            .source(format!("sessiond {}", env!("CARGO_PKG_VERSION")))
            .render(&mut bytes)?;
        std::fs::write(&path, bytes).map_err(io(&path))?;
        writeln!(out, "{}", path.display())?;
    }
    Ok(Exit::Ok)
}
