// A scripted Anthropic Messages API server for the Claude Code referee: the real `claude` binary
// talks to it as to the model, and it answers from a script instead of thinking.
//
//   node tests/claude/model-server.mjs SCRIPT.json REQUESTS.jsonl
//
// Listens on 127.0.0.1 on a port the system picks and prints one line `{"port": N}` on stdout once
// it is ready. Serves `POST /v1/messages` (query strings such as `?beta=true` are ignored) with
// server-sent events when the body says `stream: true` and one JSON message otherwise, and
// `POST /v1/messages/count_tokens`. Anything else is a 404. Ends on SIGTERM or when stdin closes.
//
// Choosing the answer. A request's "prompt" is the text of the last message with role "user"
// whose text blocks, less those that are only a `<system-reminder>…</system-reminder>`, are not
// empty (Claude puts `role: "system"` entries into `messages` and system-reminder-only user
// messages; a user message holding only `tool_result` blocks is not a prompt either). The script
// maps the prompt (exact text, or else the first key that the prompt contains) to a list of
// steps; the number of assistant messages after the prompt message picks the step, so the
// answer depends only on the request and resumed or forked sessions get the same answers. Past
// the last step the answer is the text "done".
//
// The script (JSON):
//   {"prompts": {PROMPT: [STEP, ...]}, "default": [STEP, ...],
//    "compact": "SUMMARY TEXT",      the answer to a compaction request (recognized by Claude's
//                                    compact instruction in the last user message)
//    "side": "TEXT"}                 the answer to any other non-streaming request (titles etc.)
// A STEP is an object with any of
//   "thinking": "..."                 a thinking block first (with a scripted signature)
//   "text": "..."                     a text block
//   "tools": [{"name": "Bash", "input": {...}}, ...]   tool_use blocks (stop_reason "tool_use")
//   "delayMs": N                      the answer is sent N ms late (to keep two runs in flight)
// In "text", `{prompt}` stands for the prompt.
// Tool use ids are `toolu_<N>_<index>`; message ids are `msg_<N>` (N counts requests from 1), and
// Claude stores the message id as `message.id` of the assistant lines that answer request N.
//
// Every request is appended to REQUESTS.jsonl, before it is answered, as one line
//   {"n": N, "path": URL, "headers": {...}, "raw": BODY_TEXT, "kind": "stream" | "side" |
//    "compact" | "count_tokens"}
// `raw` is the body byte for byte; `headers` are the request's headers less the credentials
// (`x-api-key`, `authorization`).
import { appendFileSync } from "node:fs";
import { createServer } from "node:http";
import { listen, scriptAndLog, sendJson, whenRead } from "../support/model-server.mjs";

const { script, logPath } = scriptAndLog();

const REMINDER = /^\s*<system-reminder>[\s\S]*<\/system-reminder>\s*$/;

/** The prompt text of a user message, or null when it holds none (see the head of this file). */
function promptOf(message) {
  if (!message || message.role !== "user") return null;
  const content = message.content;
  const blocks = typeof content === "string" ? [{ type: "text", text: content }] : Array.isArray(content) ? content : [];
  const texts = blocks
    .filter((b) => b && b.type === "text" && typeof b.text === "string" && !REMINDER.test(b.text))
    .map((b) => b.text);
  const text = texts.join("\n").trim();
  return text === "" ? null : text;
}

/** Whether a request asks for a compaction summary (Claude's compact instruction). */
function isCompact(body) {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const last = messages[messages.length - 1];
  if (!last || last.role !== "user") return false;
  const text = JSON.stringify(last.content ?? "");
  return /create a detailed summary of the conversation/i.test(text) || /Your task is to create a detailed summary/i.test(text);
}

/** The step that answers a request. */
function stepFor(body) {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  let at = -1;
  let prompt = "";
  for (let i = messages.length - 1; i >= 0; i--) {
    const p = promptOf(messages[i]);
    if (p !== null) {
      at = i;
      prompt = p;
      break;
    }
  }
  const prompts = script.prompts ?? {};
  let steps = prompts[prompt];
  if (!steps) {
    const key = Object.keys(prompts).find((k) => prompt.includes(k));
    steps = key !== undefined ? prompts[key] : script.default ?? [];
  }
  const index = messages.slice(at + 1).filter((m) => m.role === "assistant").length;
  const step = steps[index] ?? { text: "done" };
  return typeof step.text === "string" ? { ...step, text: step.text.replaceAll("{prompt}", prompt) } : step;
}

/** The content blocks and stop reason of a step's answer to request n. */
function blocksOf(n, step) {
  const blocks = [];
  if (step.thinking) {
    blocks.push({ type: "thinking", thinking: step.thinking, signature: `sig-${n}-${Buffer.from(step.thinking).toString("base64").slice(0, 16)}` });
  }
  if (step.text) blocks.push({ type: "text", text: step.text });
  (step.tools ?? []).forEach((t, i) => {
    blocks.push({ type: "tool_use", id: `toolu_${n}_${i}`, name: t.name, input: t.input ?? {} });
  });
  if (blocks.length === 0) blocks.push({ type: "text", text: "done" });
  const stop = (step.tools ?? []).length > 0 ? "tool_use" : "end_turn";
  return { blocks, stop };
}

function usage(n) {
  return { input_tokens: 100 + n, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
}

function sendStream(n, model, blocks, stop, res) {
  const events = [];
  events.push(["message_start", {
    type: "message_start",
    message: { id: `msg_${n}`, type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage(n), output_tokens: 1 } },
  }]);
  blocks.forEach((b, index) => {
    if (b.type === "text") {
      events.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }]);
      // Two pieces, so Claude's streaming path joins deltas.
      const cut = Math.ceil(b.text.length / 2);
      events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: b.text.slice(0, cut) } }]);
      if (cut < b.text.length) events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: b.text.slice(cut) } }]);
    } else if (b.type === "thinking") {
      events.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } }]);
      events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: b.thinking } }]);
      events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "signature_delta", signature: b.signature } }]);
    } else if (b.type === "tool_use") {
      events.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "tool_use", id: b.id, name: b.name, input: {} } }]);
      const json = JSON.stringify(b.input);
      const cut = Math.ceil(json.length / 2);
      events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: json.slice(0, cut) } }]);
      events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: json.slice(cut) } }]);
    }
    events.push(["content_block_stop", { type: "content_block_stop", index }]);
  });
  events.push(["message_delta", { type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 10 } }]);
  events.push(["message_stop", { type: "message_stop" }]);
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", "request-id": `req_${n}` });
  for (const [event, data] of events) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  res.end();
}

function sendWhole(n, model, blocks, stop, res) {
  res.writeHead(200, { "content-type": "application/json", "request-id": `req_${n}` });
  res.end(JSON.stringify({ id: `msg_${n}`, type: "message", role: "assistant", model, content: blocks, stop_reason: stop, stop_sequence: null, usage: usage(n) }));
}

function recordedHeaders(req) {
  const out = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (k === "x-api-key" || k === "authorization") continue;
    out[k] = v;
  }
  return out;
}

const server = createServer((req, res) => {
  const path = req.url.split("?")[0];
  const messages = path.endsWith("/v1/messages");
  const count = path.endsWith("/v1/messages/count_tokens");
  if (req.method !== "POST" || !(messages || count)) {
    sendJson(res, 404, { type: "error", error: { type: "not_found_error", message: `no route ${req.method} ${req.url}` } });
    return;
  }
  whenRead(req, (n, bytes) => {
    const raw = bytes.toString("utf8");
    let body;
    try {
      body = JSON.parse(raw);
    } catch (e) {
      appendFileSync(logPath, JSON.stringify({ n, path: req.url, headers: recordedHeaders(req), raw, kind: "bad-json" }) + "\n");
      sendJson(res, 400, { type: "error", error: { type: "invalid_request_error", message: `bad JSON: ${e.message}` } });
      return;
    }
    const compact = messages && isCompact(body);
    const kind = count ? "count_tokens" : compact ? "compact" : body.stream === true ? "stream" : "side";
    appendFileSync(logPath, JSON.stringify({ n, path: req.url, headers: recordedHeaders(req), raw, kind }) + "\n");
    if (count) {
      sendJson(res, 200, { input_tokens: 100 + n });
      return;
    }
    const model = typeof body.model === "string" ? body.model : "scripted";
    let answer;
    if (compact) answer = { blocks: [{ type: "text", text: script.compact ?? "<summary>scripted summary</summary>" }], stop: "end_turn" };
    else if (body.stream !== true) answer = { blocks: [{ type: "text", text: script.side ?? "Scripted side answer" }], stop: "end_turn" };
    let delay = 0;
    if (!answer) {
      const step = stepFor(body);
      delay = step.delayMs ?? 0;
      answer = blocksOf(n, step);
    }
    const send = () => (body.stream === true ? sendStream : sendWhole)(n, model, answer.blocks, answer.stop, res);
    if (delay > 0) setTimeout(send, delay);
    else send();
  });
});

// Every request is logged before it is answered: nothing is lost by exiting at once.
listen(server);
