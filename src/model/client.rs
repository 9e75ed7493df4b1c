//! The HTTP side of summarizing with a model: pi's requests sent with `reqwest` (rustls),
//! answers read as server-sent events (`eventsource-stream`) or, from a server that ignores
//! `stream: true`, as one JSON document; transient failures retried; one deadline for the
//! whole call.
//!
//! Cancellation is by drop: the future owns the connection, so dropping it (a daemon request
//! cancelled with `$/cancelRequest`, the deadline) closes the connection and nothing after it
//! runs. Nothing here writes anything.
//!
//! Retried (at most [`CallOptions::max_retries`] times, backing off from
//! [`CallOptions::backoff`] and doubling, or waiting what `Retry-After` / `retry-after-ms`
//! asks up to [`MAX_RETRY_AFTER`]): HTTP 408, 409, 429 and 5xx, failures to connect, and a
//! stream that breaks before its end. Not retried: any other status (401 and 403 are
//! [`ModelError::Auth`]), an answer pi would refuse (token cap, tool call, error event).

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;
use thiserror::Error;

use super::config::{Api, ConfigError, Endpoint};
use super::request::{self, Answer, StreamReader};
use crate::dialect::pi::compaction::prompts::{
    NO_PRIOR_HISTORY, SummarizationRequest, assemble_summary,
};

/// The longest `Retry-After` honoured; a server asking for more fails the call at once.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How a call is bounded.
#[derive(Clone, Copy, Debug)]
pub struct CallOptions {
    /// Deadline of the whole call (every prompt, every attempt).
    pub timeout: Duration,
    /// Retries after the first attempt, per prompt.
    pub max_retries: u32,
    /// The first backoff without `Retry-After`; doubled each retry, at most 8 s.
    pub backoff: Duration,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            timeout: Duration::from_secs(300),
            max_retries: 3,
            backoff: Duration::from_millis(500),
        }
    }
}

/// What the call is doing, for a spinner or `$/progress`.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// A request is being sent (`part`: `history` or `turn prefix`; `attempt` from 1).
    Sending {
        /// Which prompt.
        part: &'static str,
        /// Attempt number, from 1.
        attempt: u32,
    },
    /// Text is arriving.
    Receiving {
        /// Which prompt.
        part: &'static str,
        /// Characters received so far for this prompt.
        chars: usize,
    },
    /// A transient failure; the next attempt follows after `wait`.
    Retrying {
        /// Which prompt.
        part: &'static str,
        /// The attempt that failed.
        attempt: u32,
        /// How long until the next one.
        wait: Duration,
        /// What failed (no credentials in it).
        reason: String,
    },
}

/// Why summarizing with a model failed. Nothing was written. Messages name the provider and
/// never hold a credential.
#[derive(Debug, Error)]
pub enum ModelError {
    /// No usable endpoint or key.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// HTTP 401 or 403: the key was refused.
    #[error(
        "provider {provider} refused the API key (HTTP {status}); check the key configured for {provider} (auth.json, models.json apiKey, the provider's variable, or --api-key-env)"
    )]
    Auth {
        /// The provider.
        provider: String,
        /// 401 or 403.
        status: u16,
    },
    /// An HTTP error that is not transient, or still failing after every retry.
    #[error("provider {provider} answered HTTP {status} after {attempts} attempt(s): {message}")]
    Http {
        /// The provider.
        provider: String,
        /// The last status.
        status: u16,
        /// The provider's error message, credentials removed.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The endpoint could not be reached, or the stream broke, after every retry.
    #[error("provider {provider}: {detail} (after {attempts} attempt(s))")]
    Connect {
        /// The provider.
        provider: String,
        /// What failed.
        detail: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The whole call took longer than its deadline.
    #[error("provider {provider}: no complete answer within {} ms (timeout)", after.as_millis())]
    Timeout {
        /// The provider.
        provider: String,
        /// The deadline.
        after: Duration,
    },
    /// The answer is one pi would not store (token cap, tool call, error event, no text).
    #[error("provider {provider}: {reason}")]
    Answer {
        /// The provider.
        provider: String,
        /// Why.
        reason: String,
    },
}

impl ModelError {
    /// A stable name of the kind: `config`, `auth`, `http`, `connect`, `timeout`, `answer`.
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::Config(_) => "config",
            ModelError::Auth { .. } => "auth",
            ModelError::Http { .. } => "http",
            ModelError::Connect { .. } => "connect",
            ModelError::Timeout { .. } => "timeout",
            ModelError::Answer { .. } => "answer",
        }
    }

    /// The provider the error names, when one was resolved.
    pub fn provider(&self) -> Option<&str> {
        match self {
            ModelError::Auth { provider, .. }
            | ModelError::Http { provider, .. }
            | ModelError::Connect { provider, .. }
            | ModelError::Timeout { provider, .. }
            | ModelError::Answer { provider, .. }
            | ModelError::Config(ConfigError::NoKey { provider, .. })
            | ModelError::Config(ConfigError::UnsupportedApi { provider, .. })
            | ModelError::Config(ConfigError::Incomplete { provider, .. }) => Some(provider),
            ModelError::Config(_) => None,
        }
    }

    /// The HTTP status, when one caused the error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Auth { status, .. } | ModelError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// One failed attempt.
enum Attempt {
    Retry {
        reason: String,
        status: Option<u16>,
        message: String,
        retry_after: Option<Duration>,
    },
    Fatal(ModelError),
}

/// Text with every credential of the endpoint replaced by `[redacted]`, cut to 500 characters.
fn scrub(endpoint: &Endpoint, text: &str) -> String {
    let mut out = text.to_owned();
    let secrets = endpoint
        .api_key
        .iter()
        .chain(endpoint.headers.iter().map(|(_, v)| v));
    for s in secrets {
        if !s.expose().is_empty() {
            out = out.replace(s.expose(), "[redacted]");
        }
    }
    crate::dialect::pi::compaction::retention::cut_chars(out.trim(), 500)
}

fn url(endpoint: &Endpoint) -> String {
    let base = endpoint.base_url.trim_end_matches('/');
    match endpoint.api {
        Api::OpenAiCompletions => format!("{base}/chat/completions"),
        // The Anthropic SDK appends /v1/messages to its base URL; pi uses the beta client.
        Api::AnthropicMessages => format!("{base}/v1/messages?beta=true"),
    }
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    get("retry-after")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|s| Duration::from_secs_f64(s.max(0.0)))
}

async fn attempt(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    body: &str,
    part: &'static str,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<Answer, Attempt> {
    let mut req = client
        .post(url(endpoint))
        .header("content-type", "application/json")
        .header("accept", "application/json");
    if let Some(key) = &endpoint.api_key {
        req = match endpoint.api {
            Api::OpenAiCompletions => req.bearer_auth(key.expose()),
            Api::AnthropicMessages => req.header("x-api-key", key.expose()),
        };
    }
    if endpoint.api == Api::AnthropicMessages {
        req = req.header("anthropic-version", "2023-06-01");
    }
    for (k, v) in &endpoint.headers {
        req = req.header(k.as_str(), v.expose());
    }
    let response = req.body(body.to_owned()).send().await.map_err(|e| {
        // reqwest's message names the URL (which holds no key), never the headers.
        Attempt::Retry {
            reason: format!("cannot reach {}: {}", url(endpoint), error_chain(&e)),
            status: None,
            message: String::new(),
            retry_after: None,
        }
    })?;
    let status = response.status().as_u16();
    if !response.status().is_success() {
        let wait = retry_after(response.headers());
        let text = response.text().await.unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.get("error").map(request::error_message))
            .unwrap_or(text);
        let message = scrub(endpoint, &message);
        if matches!(status, 401 | 403) {
            return Err(Attempt::Fatal(ModelError::Auth {
                provider: endpoint.provider.clone(),
                status,
            }));
        }
        if matches!(status, 408 | 409 | 429) || status >= 500 {
            return Err(Attempt::Retry {
                reason: format!("HTTP {status}"),
                status: Some(status),
                message,
                retry_after: wait,
            });
        }
        return Err(Attempt::Fatal(ModelError::Http {
            provider: endpoint.provider.clone(),
            status,
            message,
            attempts: 1,
        }));
    }
    let streamed = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    if !streamed {
        let text = response.text().await.map_err(|e| Attempt::Retry {
            reason: format!("the answer broke off: {}", error_chain(&e)),
            status: None,
            message: String::new(),
            retry_after: None,
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            Attempt::Fatal(ModelError::Answer {
                provider: endpoint.provider.clone(),
                reason: format!("the answer is neither an event stream nor JSON: {e}"),
            })
        })?;
        let answer = request::parse_whole(endpoint.api, &value);
        progress(Progress::Receiving {
            part,
            chars: answer.text.chars().count(),
        });
        return Ok(answer);
    }
    let mut events = response.bytes_stream().eventsource();
    let mut reader = StreamReader::new(endpoint.api);
    let mut ended = false;
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| Attempt::Retry {
            reason: format!("the stream broke off: {e}"),
            status: None,
            message: String::new(),
            retry_after: None,
        })?;
        let before = reader.chars();
        if reader.push(&event.data) {
            ended = true;
            break;
        }
        if reader.chars() != before {
            progress(Progress::Receiving {
                part,
                chars: reader.chars(),
            });
        }
    }
    let answer = reader.finish();
    if !ended && answer.stop_reason.is_none() && answer.error.is_none() {
        return Err(Attempt::Retry {
            reason: "the stream ended before the answer did".into(),
            status: None,
            message: String::new(),
            retry_after: None,
        });
    }
    Ok(answer)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Sends one prompt with retries; the answer's text.
async fn complete(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    system_prompt: &str,
    prompt: &str,
    part: &'static str,
    opts: &CallOptions,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<String, ModelError> {
    let body = request::body(endpoint, system_prompt, prompt);
    let mut backoff = opts.backoff;
    let mut attempt_no = 1;
    loop {
        progress(Progress::Sending {
            part,
            attempt: attempt_no,
        });
        match attempt(client, endpoint, &body, part, progress).await {
            Ok(answer) => {
                return match answer.failure() {
                    Some(reason) => Err(ModelError::Answer {
                        provider: endpoint.provider.clone(),
                        reason: scrub(endpoint, &reason),
                    }),
                    None => Ok(answer.text),
                };
            }
            Err(Attempt::Fatal(ModelError::Http {
                provider,
                status,
                message,
                ..
            })) => {
                return Err(ModelError::Http {
                    provider,
                    status,
                    message,
                    attempts: attempt_no,
                });
            }
            Err(Attempt::Fatal(e)) => return Err(e),
            Err(Attempt::Retry {
                reason,
                status,
                message,
                retry_after,
            }) => {
                let too_long = retry_after.is_some_and(|w| w > MAX_RETRY_AFTER);
                if attempt_no > opts.max_retries || too_long {
                    return Err(match status {
                        Some(status) => ModelError::Http {
                            provider: endpoint.provider.clone(),
                            status,
                            message: if too_long {
                                format!(
                                    "{message} (asked to retry after more than {} s)",
                                    MAX_RETRY_AFTER.as_secs()
                                )
                            } else {
                                message
                            },
                            attempts: attempt_no,
                        },
                        None => ModelError::Connect {
                            provider: endpoint.provider.clone(),
                            detail: reason,
                            attempts: attempt_no,
                        },
                    });
                }
                let wait = retry_after.unwrap_or(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(8));
                progress(Progress::Retrying {
                    part,
                    attempt: attempt_no,
                    wait,
                    reason,
                });
                tokio::time::sleep(wait).await;
                attempt_no += 1;
            }
        }
    }
}

/// The summary pi's `compact` would store, produced by `endpoint`: the history prompt's
/// answer (for a split turn with no history prompt, `previous_summary` or pi's
/// "No prior history."), the turn-prefix answer after pi's separator, then `file_blocks`.
/// Prompts are sent one after the other, as pi does. Errors: [`ModelError`]; dropping the
/// future aborts the call.
pub async fn summarize(
    endpoint: &Endpoint,
    request: &SummarizationRequest,
    previous_summary: Option<&str>,
    file_blocks: &str,
    opts: &CallOptions,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<String, ModelError> {
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| ModelError::Connect {
            provider: endpoint.provider.clone(),
            detail: format!("cannot start an HTTP client: {}", error_chain(&e)),
            attempts: 0,
        })?;
    let work = async {
        let history = match &request.prompt {
            Some(prompt) => {
                complete(
                    &client,
                    endpoint,
                    &request.system_prompt,
                    prompt,
                    "history",
                    opts,
                    progress,
                )
                .await?
            }
            None => previous_summary.unwrap_or(NO_PRIOR_HISTORY).to_owned(),
        };
        let prefix = match &request.turn_prefix_prompt {
            Some(prompt) => Some(
                complete(
                    &client,
                    endpoint,
                    &request.system_prompt,
                    prompt,
                    "turn prefix",
                    opts,
                    progress,
                )
                .await?,
            ),
            None => None,
        };
        Ok(assemble_summary(&history, prefix.as_deref(), file_blocks))
    };
    match tokio::time::timeout(opts.timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(ModelError::Timeout {
            provider: endpoint.provider.clone(),
            after: opts.timeout,
        }),
    }
}
