//! Summarizing a compaction with a model endpoint instead of the embedded digest: which
//! endpoint and key ([`config`], from pi's own `models.json` and `auth.json`, or explicit
//! choices), the exact body pi 1.6.0 sends ([`request`]) and the HTTP call with streaming,
//! retries, a deadline and cancellation by drop ([`client`]).
//!
//! This is the only code that talks to a model; it never touches a session file. The caller
//! ([`crate::compact`], through the CLI or the daemon) plans the compaction, calls
//! [`client::summarize`] with the plan's request, and commits the answer under the write lock
//! only when the call succeeded (SPEC §4: nothing is written on any failure).

pub mod client;
pub mod config;
pub mod request;

pub use client::{CallOptions, ModelError, Progress};
pub use config::{Api, ConfigError, Endpoint, ModelChoice, Secret};

/// Which summarizer a compaction uses.
#[derive(Clone, Debug, Default)]
pub enum Summarizer {
    /// The embedded extractive digest (the default when nothing is configured).
    #[default]
    Embedded,
    /// A model endpoint.
    Model(ModelChoice),
}

/// The process environment as [`config::resolve`] reads it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}
