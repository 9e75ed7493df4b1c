//! Where pi 1.6.0 looks for a provider's credential: the environment variables of pi-ai's
//! `getApiKeyEnvVars` / `getEnvApiKey` (`env-api-keys.js`), and the provider's key in
//! `auth.json` in pi's agent directory (`$PI_CODING_AGENT_DIR`, default `~/.pi/agent`;
//! `config.js` `getAuthPath`). Names only: no value is ever read here.

/// What counts as a configured credential for a provider in the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvRule {
    /// Any one of these variables set (non-empty).
    AnyOf(&'static [&'static str]),
    /// Any one group set in full (Amazon Bedrock's credential sources, Vertex's ADC).
    AnyGroup(&'static [&'static [&'static str]]),
}

impl EnvRule {
    /// Every variable name the rule looks at, for the report.
    pub fn names(&self) -> Vec<&'static str> {
        match self {
            EnvRule::AnyOf(n) => n.to_vec(),
            EnvRule::AnyGroup(g) => {
                let mut v: Vec<&str> = g.iter().flat_map(|g| g.iter().copied()).collect();
                v.dedup();
                v
            }
        }
    }

    /// Whether the rule is met, given which variables are set.
    pub fn met(&self, set: &dyn Fn(&str) -> bool) -> bool {
        match self {
            EnvRule::AnyOf(n) => n.iter().any(|v| set(v)),
            EnvRule::AnyGroup(g) => g.iter().any(|group| group.iter().all(|v| set(v))),
        }
    }
}

/// pi 1.6.0's environment rule for `provider`, or `None` for a provider pi knows no
/// variable for (custom providers from `models.json`, OAuth-only providers).
pub fn env_rule(provider: &str) -> Option<EnvRule> {
    use EnvRule::*;
    Some(match provider {
        "github-copilot" => AnyOf(&["COPILOT_GITHUB_TOKEN"]),
        "anthropic" => AnyOf(&[
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_OAUTH_TOKEN",
            "ANTHROPIC_API_KEY",
        ]),
        "ant-ling" => AnyOf(&["ANT_LING_API_KEY"]),
        "qwen-token-plan" => AnyOf(&["QWEN_TOKEN_PLAN_TEAM_API_KEY", "QWEN_TOKEN_PLAN_API_KEY"]),
        "qwen-token-plan-cn" => AnyOf(&[
            "QWEN_TOKEN_PLAN_TEAM_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ]),
        "qwen-token-plan-individual" => AnyOf(&[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_API_KEY",
            "QWEN_TOKEN_PLAN_API_KEY",
        ]),
        "qwen-token-plan-individual-cn" => AnyOf(&[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ]),
        "openai" => AnyOf(&["OPENAI_API_KEY"]),
        "azure" => AnyOf(&["AZURE_OPENAI_API_KEY"]),
        "nvidia" => AnyOf(&["NVIDIA_API_KEY"]),
        "deepseek" => AnyOf(&["DEEPSEEK_API_KEY"]),
        "google" => AnyOf(&["GEMINI_API_KEY"]),
        "google-vertex" => AnyGroup(&[
            &["GOOGLE_CLOUD_API_KEY"],
            &[
                "GOOGLE_APPLICATION_CREDENTIALS",
                "GOOGLE_CLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
            ],
            &[
                "GOOGLE_APPLICATION_CREDENTIALS",
                "GCLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
            ],
        ]),
        "amazon-bedrock" => AnyGroup(&[
            &["AWS_PROFILE"],
            &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
            &["AWS_BEARER_TOKEN_BEDROCK"],
            &["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"],
            &["AWS_CONTAINER_CREDENTIALS_FULL_URI"],
            &["AWS_WEB_IDENTITY_TOKEN_FILE"],
        ]),
        "groq" => AnyOf(&["GROQ_API_KEY"]),
        "cerebras" => AnyOf(&["CEREBRAS_API_KEY"]),
        "xai" => AnyOf(&["XAI_API_KEY"]),
        "typesafe" => AnyOf(&["TYPESAFE_API_KEY"]),
        "radius" => AnyOf(&["RADIUS_API_KEY"]),
        "openrouter" => AnyOf(&["OPENROUTER_API_KEY"]),
        "vercel-ai-gateway" => AnyOf(&["AI_GATEWAY_API_KEY"]),
        "zai" => AnyOf(&["ZAI_API_KEY"]),
        "zai-coding-cn" => AnyOf(&["ZAI_CODING_CN_API_KEY"]),
        "mistral" => AnyOf(&["MISTRAL_API_KEY"]),
        "minimax" => AnyOf(&["MINIMAX_API_KEY"]),
        "minimax-cn" => AnyOf(&["MINIMAX_CN_API_KEY"]),
        "moonshotai" | "moonshotai-cn" => AnyOf(&["MOONSHOT_API_KEY"]),
        "huggingface" => AnyOf(&["HF_TOKEN"]),
        "fireworks" => AnyOf(&["FIREWORKS_API_KEY"]),
        "together" => AnyOf(&["TOGETHER_API_KEY"]),
        "baseten" => AnyOf(&["BASETEN_API_KEY"]),
        "opencode" | "opencode-go" => AnyOf(&["OPENCODE_API_KEY"]),
        "kimi-coding" => AnyOf(&["KIMI_API_KEY"]),
        "meta" => AnyOf(&["META_API_KEY"]),
        "cloudflare-workers-ai" | "cloudflare-ai-gateway" => AnyOf(&["CLOUDFLARE_API_KEY"]),
        "xiaomi" => AnyOf(&["XIAOMI_API_KEY"]),
        "xiaomi-token-plan-cn" => AnyOf(&["XIAOMI_TOKEN_PLAN_CN_API_KEY"]),
        "xiaomi-token-plan-ams" => AnyOf(&["XIAOMI_TOKEN_PLAN_AMS_API_KEY"]),
        "xiaomi-token-plan-sgp" => AnyOf(&["XIAOMI_TOKEN_PLAN_SGP_API_KEY"]),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        let set = |v: &str| v == "AWS_ACCESS_KEY_ID";
        assert!(!env_rule("amazon-bedrock").is_some_and(|r| r.met(&set)));
        let set = |v: &str| v == "ANTHROPIC_API_KEY";
        assert!(env_rule("anthropic").is_some_and(|r| r.met(&set)));
        assert!(env_rule("my-custom").is_none());
    }
}
