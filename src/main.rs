//! The `sessiond` executable: parses arguments, sends logs to stderr, returns an exit code.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = match sessiond::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return sessiond::cli::refused_command_line(e),
    };
    let filter = cli
        .log
        .clone()
        .or_else(|| std::env::var("SESSIOND_LOG").ok())
        .unwrap_or_else(|| "warn".to_owned());
    // Colours only for a person at a terminal: an editor reading the daemon's stderr into
    // its log would show the escape codes as text (and NO_COLOR turns them off anywhere).
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(EnvFilter::try_new(&filter).unwrap_or_else(|e| {
            // Only $SESSIOND_LOG gets here (`--log` is checked with the command line).
            eprintln!("sessiond: SESSIOND_LOG is not a log filter ({e}); logging at warn");
            EnvFilter::new("warn")
        }))
        .init();
    // The daemon is the server's front door, not the CLI's: the CLI prints documents, the
    // server speaks JSON-RPC (and writes protocol frames from its own thread).
    if let sessiond::cli::Command::Serve {
        roots,
        index_dir,
        archive,
    } = cli.command
    {
        return sessiond::server::serve(sessiond::server::ServeOptions {
            roots,
            index_dir,
            archive,
        });
    }
    sessiond::cli::run(cli)
}
