//! The HTTP body pi 1.6.0 sends for one summarization prompt, and the reading of the answer.
//! Pure: no I/O.
//!
//! pi's `completeSummarization` calls `completeSimple(model, {systemPrompt, messages: [user
//! prompt]}, {cacheRetention: "none", maxTokens: model.maxTokens clamped to the context})`;
//! pi-ai then builds, for a non-reasoning model (or thinking off):
//! * `openai-completions`: `{model, messages: [{role: "system", content}, {role: "user",
//!   content: [{type: "text", text}]}], stream: true, stream_options: {include_usage: true},
//!   store: false, max_completion_tokens}` (`stream_options`, `store` and the max-tokens field
//!   per the compatibility settings), then `samplingParams` merged over it;
//! * `anthropic-messages`: `{model, messages: [{role: "user", content: [{type: "text",
//!   text}]}], max_tokens, stream: true, system: [{type: "text", text}]}`.
//!
//! Keys are in pi's order, so the bytes equal `JSON.stringify` of pi's body (checked against
//! pi itself in tests/model.rs).

use serde_json::{Map, Value, json};

use super::config::{Api, Endpoint};
use crate::dialect::pi::compaction::entry::js_number;

/// JavaScript's `String.prototype.length` (UTF-16 code units).
fn js_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// pi-ai's `clampMaxTokensToContext(model, context, model.maxTokens)` for a context of one
/// user message holding `prompt` (pi-ai estimates 3.5 characters per token and counts no
/// system prompt).
pub fn max_tokens(endpoint: &Endpoint, prompt: &str) -> f64 {
    let wanted = endpoint.max_tokens;
    if endpoint.context_window <= 0.0 {
        return wanted.max(1.0);
    }
    let input = (js_len(prompt) as f64 / 3.5).ceil();
    let margin = 4096f64.max((input * 0.15).ceil());
    let mut room = endpoint.context_window - input - margin;
    if room < 32768.0 {
        room = 32768f64.min(endpoint.context_window - input - 4096.0);
    }
    wanted.min(1f64.max(room))
}

/// The request body pi sends for one prompt (see the module docs), as JSON text with lone
/// surrogates written as pi's `JSON.stringify` writes them.
pub fn body(endpoint: &Endpoint, system_prompt: &str, prompt: &str) -> String {
    let max = js_number(max_tokens(endpoint, prompt));
    let user_content = json!([{"type": "text", "text": prompt}]);
    let mut m = Map::new();
    match endpoint.api {
        Api::OpenAiCompletions => {
            m.insert("model".into(), json!(endpoint.model_id));
            m.insert(
                "messages".into(),
                json!([
                    {"role": "system", "content": system_prompt},
                    {"role": "user", "content": user_content},
                ]),
            );
            m.insert("stream".into(), json!(true));
            if endpoint.compat.supports_usage_in_streaming {
                m.insert("stream_options".into(), json!({"include_usage": true}));
            }
            if endpoint.compat.supports_store {
                m.insert("store".into(), json!(false));
            }
            let field = if endpoint.compat.max_tokens_field {
                "max_tokens"
            } else {
                "max_completion_tokens"
            };
            m.insert(field.into(), max);
            if let Some(sampling) = &endpoint.sampling_params {
                for (k, v) in sampling {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
        Api::AnthropicMessages => {
            m.insert("model".into(), json!(endpoint.model_id));
            m.insert(
                "messages".into(),
                json!([{"role": "user", "content": user_content}]),
            );
            m.insert("max_tokens".into(), max);
            m.insert("stream".into(), json!(true));
            m.insert(
                "system".into(),
                json!([{"type": "text", "text": system_prompt}]),
            );
        }
    }
    crate::js::jsstr::restore_json(&Value::Object(m).to_string()).into_owned()
}

/// How an answer ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// The text blocks, joined by `\n` (pi's `contentText`).
    pub text: String,
    /// The provider's stop reason as sent (`stop`, `length`, `end_turn`, `max_tokens`, ...).
    pub stop_reason: Option<String>,
    /// The model tried to call a tool.
    pub tool_call: bool,
    /// An error the stream itself reported.
    pub error: Option<String>,
}

impl Answer {
    /// pi's `getSummarizationFailure` and tool-call check: why this answer must not become a
    /// summary, if it must not.
    pub fn failure(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(format!("the model reported an error: {e}"));
        }
        if matches!(self.stop_reason.as_deref(), Some("length" | "max_tokens")) {
            return Some("generation hit the token cap and the summary is incomplete".to_owned());
        }
        if self.tool_call {
            return Some("the model attempted to call a tool".to_owned());
        }
        if self.text.trim().is_empty() {
            return Some("the model answered with no text".to_owned());
        }
        None
    }
}

/// Reads streamed events (`data:` payloads, in order) into an [`Answer`].
#[derive(Debug, Default)]
pub struct StreamReader {
    api: Option<Api>,
    /// Text blocks so far (Anthropic can send several).
    blocks: Vec<String>,
    answer: Answer,
}

impl StreamReader {
    /// A reader for `api`.
    pub fn new(api: Api) -> StreamReader {
        StreamReader {
            api: Some(api),
            ..StreamReader::default()
        }
    }

    /// Characters of text received so far.
    pub fn chars(&self) -> usize {
        self.blocks.iter().map(|b| b.chars().count()).sum()
    }

    /// One event's `data`. Returns true at the end of the stream (`[DONE]`, `message_stop`).
    pub fn push(&mut self, data: &str) -> bool {
        if data.trim() == "[DONE]" {
            return true;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return false;
        };
        if let Some(e) = v.get("error") {
            self.answer.error = Some(error_message(e));
            return true;
        }
        match self.api {
            Some(Api::AnthropicMessages) => match v.get("type").and_then(Value::as_str) {
                Some("content_block_start") => {
                    let block = &v["content_block"];
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => self.blocks.push(
                            block
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_owned(),
                        ),
                        Some("tool_use") => self.answer.tool_call = true,
                        _ => {}
                    }
                }
                Some("content_block_delta") => {
                    if let Some(t) = v["delta"].get("text").and_then(Value::as_str) {
                        match self.blocks.last_mut() {
                            Some(b) => b.push_str(t),
                            None => self.blocks.push(t.to_owned()),
                        }
                    }
                }
                Some("message_delta") => {
                    if let Some(r) = v["delta"].get("stop_reason").and_then(Value::as_str) {
                        self.answer.stop_reason = Some(r.to_owned());
                    }
                }
                Some("message_stop") => return true,
                _ => {}
            },
            _ => {
                let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
                    return false;
                };
                let delta = &choice["delta"];
                if let Some(t) = delta.get("content").and_then(Value::as_str) {
                    match self.blocks.last_mut() {
                        Some(b) => b.push_str(t),
                        None => self.blocks.push(t.to_owned()),
                    }
                }
                if delta
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty())
                {
                    self.answer.tool_call = true;
                }
                if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                    self.answer.stop_reason = Some(r.to_owned());
                }
            }
        }
        false
    }

    /// The answer read so far.
    pub fn finish(mut self) -> Answer {
        self.answer.text = self.blocks.join("\n");
        self.answer
    }
}

/// Reads a complete (non-streamed) JSON answer, for servers that ignore `stream: true`.
pub fn parse_whole(api: Api, body: &Value) -> Answer {
    if let Some(e) = body.get("error") {
        return Answer {
            error: Some(error_message(e)),
            ..Answer::default()
        };
    }
    match api {
        Api::AnthropicMessages => {
            let blocks = body
                .get("content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            Answer {
                text: blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                stop_reason: body
                    .get("stop_reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                tool_call: blocks
                    .iter()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_use")),
                error: None,
            }
        }
        Api::OpenAiCompletions => {
            let choice = &body["choices"][0];
            Answer {
                text: choice["message"]
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                stop_reason: choice
                    .get("finish_reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                tool_call: choice["message"]
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty()),
                error: None,
            }
        }
    }
}

/// The message of a provider's error object (`{message}` or a string).
pub fn error_message(e: &Value) -> String {
    match e {
        Value::String(s) => s.clone(),
        _ => e
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| e.to_string(), str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::{OpenAiCompat, Secret};

    fn endpoint(api: Api) -> Endpoint {
        Endpoint {
            provider: "p".into(),
            model_id: "m1".into(),
            api,
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key: Some(Secret::new("k")),
            headers: vec![],
            context_window: 128_000.0,
            max_tokens: 4096.0,
            reasoning: false,
            sampling_params: None,
            compat: OpenAiCompat {
                supports_store: true,
                supports_usage_in_streaming: true,
                max_tokens_field: false,
            },
        }
    }

    #[test]
    fn bodies_as_pi_ai_writes_them() {
        // Captured from pi-ai 1.6.0's completeSimple with the same model and context.
        assert_eq!(
            body(&endpoint(Api::OpenAiCompletions), "SYS", "hello é 😀"),
            r#"{"model":"m1","messages":[{"role":"system","content":"SYS"},{"role":"user","content":[{"type":"text","text":"hello é 😀"}]}],"stream":true,"stream_options":{"include_usage":true},"store":false,"max_completion_tokens":4096}"#
        );
        assert_eq!(
            body(&endpoint(Api::AnthropicMessages), "SYS", "hello é 😀"),
            r#"{"model":"m1","messages":[{"role":"user","content":[{"type":"text","text":"hello é 😀"}]}],"max_tokens":4096,"stream":true,"system":[{"type":"text","text":"SYS"}]}"#
        );
    }

    #[test]
    fn max_tokens_leaves_room_for_the_input() {
        let mut e = endpoint(Api::OpenAiCompletions);
        e.context_window = 40_000.0;
        e.max_tokens = 30_000.0;
        // 35,000 characters ≈ 10,000 tokens: room = min(32768, 40000 - 10000 - 4096).
        assert_eq!(max_tokens(&e, &"x".repeat(35_000)), 25_904.0);
        e.context_window = 0.0;
        assert_eq!(max_tokens(&e, "x"), 30_000.0);
    }

    #[test]
    fn streams_are_read() {
        let mut r = StreamReader::new(Api::OpenAiCompletions);
        r.push(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#);
        r.push(r##"{"choices":[{"index":0,"delta":{"content":"Goal"},"finish_reason":null}]}"##);
        r.push(r#"{"choices":[{"index":0,"delta":{"content":"\nx"},"finish_reason":"stop"}]}"#);
        assert!(r.push("[DONE]"));
        let a = r.finish();
        assert_eq!(a.text, "Goal\nx");
        assert_eq!(a.failure(), None);
        let mut r = StreamReader::new(Api::AnthropicMessages);
        r.push(
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        );
        r.push(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
        );
        r.push(r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"}}"#);
        assert!(r.push(r#"{"type":"message_stop"}"#));
        let a = r.finish();
        assert_eq!(a.text, "hi");
        assert!(a.failure().is_some_and(|f| f.contains("token cap")));
    }
}
