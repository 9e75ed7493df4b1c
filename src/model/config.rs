//! Which model endpoint summarizes, and with which credentials: pi 1.6.0's own `models.json`
//! and `auth.json` in its agent directory (`$PI_CODING_AGENT_DIR`, default `~/.pi/agent`),
//! read only, or explicit choices (`--model provider/id`, `--base-url`, `--api`,
//! `--api-key-env VAR`).
//!
//! Precedence of the API key, as pi's docs/models.md states it: a runtime key (here
//! `--api-key-env VAR`) first, then a stored `auth.json` credential of type `api_key`, then the
//! provider's `apiKey` in `models.json`, then the provider's environment variable (pi's table
//! for the built-in providers). Values in `auth.json` and `models.json` resolve as pi's
//! `resolveConfigValue`: `!command` runs the command and uses its output, `$NAME` and `${NAME}`
//! interpolate environment variables (`$$` and `$!` are a literal `$` and `!`), anything else
//! is literal. OAuth credentials are not used (sessiond cannot refresh them): such a provider
//! needs `--api-key-env`.
//!
//! A key is held in a [`Secret`], whose `Debug` and `Display` never print it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use thiserror::Error;

/// The wire API of an endpoint (pi's `api` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI chat completions (`POST {baseUrl}/chat/completions`).
    OpenAiCompletions,
    /// Anthropic messages (`POST {baseUrl}/v1/messages?beta=true`, as pi's SDK sends it).
    AnthropicMessages,
}

impl Api {
    /// pi's name of the API.
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAiCompletions => "openai-completions",
            Api::AnthropicMessages => "anthropic-messages",
        }
    }

    /// The API named `s` (pi's names); `None` for an API sessiond does not speak.
    pub fn parse(s: &str) -> Option<Api> {
        match s {
            "openai-completions" => Some(Api::OpenAiCompletions),
            "anthropic-messages" => Some(Api::AnthropicMessages),
            _ => None,
        }
    }
}

/// A credential. Never printed: `Debug` and `Display` show `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    /// The credential itself, for the request header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// pi's `openai-completions` compatibility settings that shape a summarization request:
/// auto-detected from the provider and URL as pi's `getCompat` does, then overridden by
/// `compat` of the provider and of the model in `models.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenAiCompat {
    /// `store: false` is sent (`supportsStore`).
    pub supports_store: bool,
    /// `stream_options.include_usage` is sent (`supportsUsageInStreaming`).
    pub supports_usage_in_streaming: bool,
    /// `max_tokens` instead of `max_completion_tokens` (`maxTokensField`).
    pub max_tokens_field: bool,
}

/// A resolved model endpoint: everything needed to send pi's summarization request.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The provider id (`models.json` key), named in every error.
    pub provider: String,
    /// The model id sent to the API.
    pub model_id: String,
    /// The wire API.
    pub api: Api,
    /// The API base URL as pi holds it (no trailing slash added or removed).
    pub base_url: String,
    /// The API key; `None` when an `Authorization` header is configured instead.
    pub api_key: Option<Secret>,
    /// Extra request headers (provider's, then model's), values resolved.
    pub headers: Vec<(String, Secret)>,
    /// `contextWindow` in tokens (pi's default 128000).
    pub context_window: f64,
    /// `maxTokens` in tokens (pi's default 16384).
    pub max_tokens: f64,
    /// The model supports thinking (`reasoning`).
    pub reasoning: bool,
    /// `samplingParams` merged with `samplingParamsByThinkingLevel.off` (OpenAI only).
    pub sampling_params: Option<Map<String, Value>>,
    /// Compatibility settings (OpenAI only).
    pub compat: OpenAiCompat,
}

/// What the caller asked for; every field optional (see the module docs for defaults).
#[derive(Clone, Debug, Default)]
pub struct ModelChoice {
    /// `provider/id`; default: the session's current model.
    pub model: Option<String>,
    /// Base URL; default: the provider's in `models.json`.
    pub base_url: Option<String>,
    /// API; default: the model's or provider's in `models.json`.
    pub api: Option<Api>,
    /// Environment variable holding the API key (pi's runtime `--api-key`).
    pub api_key_env: Option<String>,
}

/// Why no endpoint could be resolved. Messages name the provider, never a key.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// No model given and the session names none.
    #[error(
        "no model to summarize with: the session records no model; pass --model provider/id (or `model` in the summarizer)"
    )]
    NoModel,
    /// `--model` is not `provider/id`.
    #[error("model {0:?} is not provider/id")]
    BadModel(String),
    /// A config file could not be read or parsed.
    #[error("{}: {detail}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The provider/model is not in `models.json` and no `--base-url`/`--api` complete it.
    #[error(
        "model {provider}/{model}: {detail} (define it in {}, or pass --base-url and --api)",
        models_json.display()
    )]
    Incomplete {
        /// The provider.
        provider: String,
        /// The model id.
        model: String,
        /// What is missing.
        detail: String,
        /// Where pi's models.json was looked for.
        models_json: PathBuf,
    },
    /// The API is one sessiond does not speak.
    #[error(
        "provider {provider}: api {api:?} is not supported (openai-completions, anthropic-messages)"
    )]
    UnsupportedApi {
        /// The provider.
        provider: String,
        /// The API named.
        api: String,
    },
    /// No API key from any source.
    #[error("no API key for provider {provider}: {detail}")]
    NoKey {
        /// The provider.
        provider: String,
        /// Where it was looked for.
        detail: String,
    },
}

/// pi's agent directory: `$PI_CODING_AGENT_DIR`, else `$HOME/.pi/agent` (pi's `getAgentDir`).
pub fn agent_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(d) = env("PI_CODING_AGENT_DIR").filter(|d| !d.is_empty()) {
        return Some(expand_home(&d, env));
    }
    env("HOME").map(|h| Path::new(&h).join(".pi").join("agent"))
}

fn expand_home(p: &str, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match (p.strip_prefix("~/"), env("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ if p == "~" => env("HOME").map_or_else(|| PathBuf::from(p), PathBuf::from),
        _ => PathBuf::from(p),
    }
}

/// pi's environment variable for a built-in provider's key (`env-api-keys.js`, the providers
/// that speak one of the two APIs or are commonly proxied).
fn provider_env_vars(provider: &str) -> &'static [&'static str] {
    match provider {
        "anthropic" => &[
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_OAUTH_TOKEN",
            "ANTHROPIC_API_KEY",
        ],
        "openai" => &["OPENAI_API_KEY"],
        "deepseek" => &["DEEPSEEK_API_KEY"],
        "groq" => &["GROQ_API_KEY"],
        "cerebras" => &["CEREBRAS_API_KEY"],
        "xai" => &["XAI_API_KEY"],
        "openrouter" => &["OPENROUTER_API_KEY"],
        "mistral" => &["MISTRAL_API_KEY"],
        "together" => &["TOGETHER_API_KEY"],
        "fireworks" => &["FIREWORKS_API_KEY"],
        "nvidia" => &["NVIDIA_API_KEY"],
        "zai" => &["ZAI_API_KEY"],
        "moonshotai" | "moonshotai-cn" => &["MOONSHOT_API_KEY"],
        "huggingface" => &["HF_TOKEN"],
        _ => &[],
    }
}

/// pi's `resolveConfigValue`: `!command` (its trimmed stdout), else `$NAME`/`${NAME}`
/// interpolation (`None` when a named variable is unset or empty), `$$` → `$`, `$!` → `!`.
pub fn resolve_config_value(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(command) = value.strip_prefix('!') {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        return (out.status.success() && !text.is_empty()).then_some(text);
    }
    let name_start = |c: char| c.is_ascii_alphabetic() || c == '_';
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.chars().next() {
            Some(c @ ('$' | '!')) => {
                out.push(c);
                rest = &after[1..];
            }
            Some('{') => match after.find('}') {
                None => {
                    out.push('$');
                    rest = after;
                }
                Some(end) => {
                    let name = &after[1..end];
                    if name.starts_with(name_start) && name.chars().all(name_char) {
                        out.push_str(&env(name).filter(|v| !v.is_empty())?);
                    } else {
                        out.push_str(&rest[i..i + 1 + end + 1]);
                    }
                    rest = &after[end + 1..];
                }
            },
            Some(c) if name_start(c) => {
                let len = after.find(|c: char| !name_char(c)).unwrap_or(after.len());
                out.push_str(&env(&after[..len]).filter(|v| !v.is_empty())?);
                rest = &after[len..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

fn read_json(path: &Path) -> Result<Option<Value>, ConfigError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ConfigError::File {
                path: path.to_owned(),
                detail: format!("not valid JSON: {e}"),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConfigError::File {
            path: path.to_owned(),
            detail: e.to_string(),
        }),
    }
}

/// pi's URL/provider detection for `openai-completions` (`getCompat`), only the fields that
/// shape a summarization request.
fn detect_compat(provider: &str, base_url: &str) -> OpenAiCompat {
    let has = |s: &str| base_url.contains(s);
    let zai = provider == "zai" || has("api.z.ai") || has("open.bigmodel.cn");
    let together = provider == "together" || has("api.together.ai") || has("api.together.xyz");
    let moonshot = provider == "moonshotai" || provider == "moonshotai-cn" || has("api.moonshot.");
    let cf_workers = provider == "cloudflare-workers-ai" || has("api.cloudflare.com");
    let cf_gateway = provider == "cloudflare-ai-gateway" || has("gateway.ai.cloudflare.com");
    let nvidia = provider == "nvidia" || has("integrate.api.nvidia.com");
    let ant_ling = provider == "ant-ling" || has("api.ant-ling.com");
    let cerebras = provider == "cerebras" || has("cerebras.ai");
    let deepseek = provider == "deepseek" || base_url.to_lowercase().contains("deepseek.com");
    let non_standard = nvidia
        || cerebras
        || provider == "xai"
        || has("api.x.ai")
        || together
        || has("chutes.ai")
        || deepseek
        || zai
        || moonshot
        || provider == "opencode"
        || has("opencode.ai")
        || cf_workers
        || cf_gateway
        || ant_ling;
    let use_max_tokens = has("chutes.ai")
        || deepseek
        || moonshot
        || cf_gateway
        || together
        || nvidia
        || ant_ling
        || zai;
    OpenAiCompat {
        supports_store: !non_standard,
        supports_usage_in_streaming: true,
        max_tokens_field: use_max_tokens,
    }
}

fn apply_compat(compat: &mut OpenAiCompat, over: Option<&Value>) {
    let Some(over) = over else { return };
    if let Some(b) = over.get("supportsStore").and_then(Value::as_bool) {
        compat.supports_store = b;
    }
    if let Some(b) = over
        .get("supportsUsageInStreaming")
        .and_then(Value::as_bool)
    {
        compat.supports_usage_in_streaming = b;
    }
    if let Some(f) = over.get("maxTokensField").and_then(Value::as_str) {
        compat.max_tokens_field = f == "max_tokens";
    }
}

/// Resolves the endpoint for `choice`, reading pi's `models.json` and `auth.json` under
/// `agent_dir` (missing files are empty) and variables through `env`. `session_model` is the
/// session's current `(provider, modelId)`, the default. Errors: [`ConfigError`].
pub fn resolve(
    choice: &ModelChoice,
    session_model: Option<(&str, &str)>,
    agent_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Endpoint, ConfigError> {
    let (provider, model_id) = match &choice.model {
        Some(m) => {
            let (p, id) = m
                .split_once('/')
                .filter(|(p, id)| !p.is_empty() && !id.is_empty())
                .ok_or_else(|| ConfigError::BadModel(m.clone()))?;
            (p.to_owned(), id.to_owned())
        }
        None => {
            let (p, id) = session_model.ok_or(ConfigError::NoModel)?;
            (p.to_owned(), id.to_owned())
        }
    };
    let models_path = agent_dir.map_or_else(
        || PathBuf::from("~/.pi/agent/models.json"),
        |d| d.join("models.json"),
    );
    let models = match agent_dir {
        Some(_) => read_json(&models_path)?,
        None => None,
    };
    let provider_cfg = models
        .as_ref()
        .and_then(|m| m.get("providers"))
        .and_then(|p| p.get(&provider))
        .cloned()
        .unwrap_or(Value::Null);
    let model_cfg = provider_cfg
        .get("models")
        .and_then(Value::as_array)
        .and_then(|ms| {
            ms.iter()
                .rev()
                .find(|m| m.get("id").and_then(Value::as_str) == Some(model_id.as_str()))
        })
        .cloned()
        .unwrap_or(Value::Null);
    let incomplete = |detail: &str| ConfigError::Incomplete {
        provider: provider.clone(),
        model: model_id.clone(),
        detail: detail.to_owned(),
        models_json: models_path.clone(),
    };
    let field = |k: &str| {
        model_cfg
            .get(k)
            .or_else(|| provider_cfg.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let api = match choice.api {
        Some(a) => a,
        None => {
            let name = field("api").ok_or_else(|| incomplete("no api"))?;
            Api::parse(&name).ok_or_else(|| ConfigError::UnsupportedApi {
                provider: provider.clone(),
                api: name,
            })?
        }
    };
    let base_url = match &choice.base_url {
        Some(u) => u.clone(),
        None => field("baseUrl").ok_or_else(|| incomplete("no baseUrl"))?,
    };
    let num = |k: &str, default: f64| model_cfg.get(k).and_then(Value::as_f64).unwrap_or(default);
    let mut headers = Vec::new();
    for source in [provider_cfg.get("headers"), model_cfg.get("headers")] {
        if let Some(Value::Object(map)) = source {
            for (k, v) in map {
                if let Some(v) = v.as_str().and_then(|v| resolve_config_value(v, env)) {
                    headers.retain(|(name, _): &(String, Secret)| !name.eq_ignore_ascii_case(k));
                    headers.push((k.clone(), Secret::new(v)));
                }
            }
        }
    }
    let has_auth_header = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
    let api_key = resolve_key(
        &provider,
        choice,
        provider_cfg.get("apiKey").and_then(Value::as_str),
        agent_dir,
        env,
    )?;
    if api_key.is_none() && !has_auth_header {
        let mut places = vec![];
        if let Some(var) = &choice.api_key_env {
            places.push(format!("--api-key-env {var} is unset or empty"));
        }
        places.push(format!(
            "no api_key credential in {}",
            agent_dir.map_or_else(
                || "auth.json".into(),
                |d| d.join("auth.json").display().to_string()
            )
        ));
        places.push("no apiKey in models.json".into());
        let vars = provider_env_vars(&provider);
        if !vars.is_empty() {
            places.push(format!("{} unset", vars.join(", ")));
        }
        return Err(ConfigError::NoKey {
            provider: provider.clone(),
            detail: places.join("; "),
        });
    }
    let mut compat = detect_compat(&provider, &base_url);
    apply_compat(&mut compat, provider_cfg.get("compat"));
    apply_compat(&mut compat, model_cfg.get("compat"));
    let mut sampling: Option<Map<String, Value>> = None;
    for source in [
        model_cfg.get("samplingParams"),
        model_cfg
            .get("samplingParamsByThinkingLevel")
            .and_then(|s| s.get("off")),
    ] {
        if let Some(Value::Object(m)) = source {
            let target = sampling.get_or_insert_with(Map::new);
            for (k, v) in m {
                target.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Endpoint {
        provider,
        model_id,
        api,
        base_url,
        api_key,
        headers,
        context_window: num("contextWindow", 128_000.0),
        max_tokens: num("maxTokens", 16_384.0),
        reasoning: model_cfg
            .get("reasoning")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        sampling_params: sampling,
        compat,
    })
}

/// The key by pi's precedence (see the module docs). Errors: unreadable `auth.json`, or an
/// OAuth credential with nothing after it.
fn resolve_key(
    provider: &str,
    choice: &ModelChoice,
    models_key: Option<&str>,
    agent_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Secret>, ConfigError> {
    if let Some(var) = &choice.api_key_env {
        // An explicit variable is the runtime key: unset means no key, not a fallback.
        return Ok(env(var).filter(|v| !v.is_empty()).map(Secret::new));
    }
    let auth: BTreeMap<String, Value> = match agent_dir {
        Some(d) => match read_json(&d.join("auth.json"))? {
            Some(Value::Object(m)) => m.into_iter().collect(),
            Some(_) => {
                return Err(ConfigError::File {
                    path: d.join("auth.json"),
                    detail: "expected an object".into(),
                });
            }
            None => BTreeMap::new(),
        },
        None => BTreeMap::new(),
    };
    let mut oauth = false;
    if let Some(cred) = auth.get(provider) {
        match cred.get("type").and_then(Value::as_str) {
            Some("api_key") => {
                if let Some(k) = cred.get("key").and_then(Value::as_str) {
                    let cred_env = |name: &str| {
                        cred.get("env")
                            .and_then(|e| e.get(name))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .filter(|v| !v.is_empty())
                            .or_else(|| env(name))
                    };
                    if let Some(v) = resolve_config_value(k, &cred_env) {
                        return Ok(Some(Secret::new(v)));
                    }
                }
            }
            Some("oauth") => oauth = true,
            _ => {}
        }
    }
    if let Some(k) = models_key
        && let Some(v) = resolve_config_value(k, env)
    {
        return Ok(Some(Secret::new(v)));
    }
    for var in provider_env_vars(provider) {
        if let Some(v) = env(var).filter(|v| !v.is_empty()) {
            return Ok(Some(Secret::new(v)));
        }
    }
    if oauth {
        return Err(ConfigError::NoKey {
            provider: provider.to_owned(),
            detail:
                "auth.json holds an OAuth login, which sessiond cannot use; pass --api-key-env VAR"
                    .into(),
        });
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn config_values_resolve_as_pi() {
        let env = env_of(&[("A", "x"), ("B_1", "y")]);
        assert_eq!(resolve_config_value("lit", &env).as_deref(), Some("lit"));
        assert_eq!(resolve_config_value("$A", &env).as_deref(), Some("x"));
        assert_eq!(
            resolve_config_value("k-${B_1}-$A.z", &env).as_deref(),
            Some("k-y-x.z")
        );
        assert_eq!(
            resolve_config_value("$$A $!", &env).as_deref(),
            Some("$A !")
        );
        assert_eq!(resolve_config_value("$MISSING", &env), None);
        assert_eq!(resolve_config_value("a$", &env).as_deref(), Some("a$"));
        assert_eq!(
            resolve_config_value("!echo hi", &env).as_deref(),
            Some("hi")
        );
    }

    #[test]
    fn precedence_runtime_auth_models_env() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let write = |name: &str, v: Value| {
            std::fs::write(dir.path().join(name), v.to_string()).unwrap_or_else(|e| panic!("{e}"));
        };
        write(
            "models.json",
            serde_json::json!({"providers": {"p": {"baseUrl": "http://h/v1", "api": "openai-completions",
                "apiKey": "$MODELS_KEY", "models": [{"id": "m", "maxTokens": 100}]}}}),
        );
        let choice = ModelChoice {
            model: Some("p/m".into()),
            ..ModelChoice::default()
        };
        let env = env_of(&[("MODELS_KEY", "from-models"), ("RUNTIME", "from-runtime")]);
        let e = resolve(&choice, None, Some(dir.path()), &env).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.api_key.as_ref().map(Secret::expose), Some("from-models"));
        assert_eq!(e.max_tokens, 100.0);
        assert_eq!(format!("{:?}", e.api_key), "Some([redacted])");
        write(
            "auth.json",
            serde_json::json!({"p": {"type": "api_key", "key": "from-auth"}}),
        );
        let e = resolve(&choice, None, Some(dir.path()), &env).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.api_key.as_ref().map(Secret::expose), Some("from-auth"));
        let runtime = ModelChoice {
            api_key_env: Some("RUNTIME".into()),
            ..choice.clone()
        };
        let e = resolve(&runtime, None, Some(dir.path()), &env).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.api_key.as_ref().map(Secret::expose), Some("from-runtime"));
        // The session's model is the default.
        let e = resolve(
            &ModelChoice::default(),
            Some(("p", "m")),
            Some(dir.path()),
            &env,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((e.provider.as_str(), e.model_id.as_str()), ("p", "m"));
        let missing = resolve(
            &ModelChoice {
                model: Some("q/m".into()),
                ..ModelChoice::default()
            },
            None,
            Some(dir.path()),
            &env,
        );
        assert!(matches!(missing, Err(ConfigError::Incomplete { .. })));
    }
}
