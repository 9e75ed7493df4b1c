// A scripted OpenAI-compatible chat-completions server for the live tests: pi talks to it as to
// a model, and it answers from a script instead of thinking.
//
//   node tests/live/model-server.mjs SCRIPT.json REQUESTS.jsonl
//
// Listens on 127.0.0.1 on a port the system picks and prints one line `{"port": N}` on stdout once
// it is ready. Serves `POST /v1/chat/completions` with `stream: true` (pi always streams) as
// server-sent events; anything else is a 404. Ends on SIGTERM or when stdin closes.
//
// The script (JSON): {"prompts": {PROMPT: [STEP, ...]}, "default": [STEP, ...]}. A request is
// answered by looking at its last user message (the prompt; a prompt not in `prompts` uses
// `default`) and counting the assistant messages after it: that count picks the step, so the
// answer depends only on the request and resumed or forked sessions get the same answers. Past
// the last step the answer is the text "done". A STEP is one of
//   {"text": "..."}                                  a plain answer (finish_reason "stop")
//   {"tools": [{"name": "read", "arguments": {...}}]} tool calls (finish_reason "tool_calls")
//   {"text": "...", "tools": [...]}                   both, text first
// Tool call ids are `call_<request>_<index>`.
//
// Every response id is `resp-<N>` (N counts requests from 1), which pi stores as the assistant
// message's `responseId`: the entry that answered request N names it, and that entry's parent is
// the leaf the request was built from. Every request is appended to REQUESTS.jsonl as one line
// `{"n": N, "id": "resp-N", "path": URL, "raw": BODY_TEXT, "body": BODY}` before it is answered
// (`raw` is the body byte for byte, for comparing two clients' requests exactly).
//
// Also served, for sessiond's model summarizer (tests/model.rs): `POST .../v1/messages` in
// Anthropic's event-stream format (text steps only). More script keys:
//   "requireKey": "K"        a request whose `Authorization: Bearer` / `x-api-key` is not K is
//                            answered 401 with an error message that quotes the key it got (as
//                            some providers do), so a client must keep it out of its own errors
//   "faults": [FAULT, ...]   FAULT n answers request n (from 1) instead of the script; later
//                            requests are answered normally. A FAULT is one of
//     {"status": 429, "retryAfter": "0", "message": "..."}   an HTTP error
//     {"delayMs": N}                                          the normal answer, N ms late
//     {"stallMs": N}                                          the first text piece, then nothing for
//                                                             N ms (a stream that hangs mid-answer)
//     {"whole": true}                                         the normal answer as one JSON document
//                                                             (a server that ignores `stream: true`)
import { appendFileSync } from "node:fs";
import { createServer } from "node:http";
import { jsonBody, listen, scriptAndLog, sendJson, whenRead } from "../support/model-server.mjs";

const { script, logPath } = scriptAndLog();

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .filter((c) => c && c.type === "text")
      .map((c) => c.text)
      .join("");
  }
  return "";
}

/** The step that answers a request (see the head of this file). */
function stepFor(body) {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  let lastUser = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === "user") {
      lastUser = i;
      break;
    }
  }
  const prompt = lastUser >= 0 ? textOf(messages[lastUser].content) : "";
  const steps = (script.prompts && script.prompts[prompt]) || script.default || [];
  const index = messages.slice(lastUser + 1).filter((m) => m.role === "assistant").length;
  return steps[index] ?? { text: "done" };
}

function chunk(id, delta, finishReason) {
  return {
    id,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model: "scripted",
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
}

function answer(n, body, res, fault) {
  const id = `resp-${n}`;
  const step = stepFor(body);
  if (fault && fault.whole) {
    const tools = step.tools ?? [];
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({
      id, object: "chat.completion", created: Math.floor(Date.now() / 1000), model: "scripted",
      choices: [{ index: 0, finish_reason: tools.length > 0 ? "tool_calls" : "stop",
        message: { role: "assistant", content: step.text ?? null } }],
    }));
    return;
  }
  const events = [chunk(id, { role: "assistant", content: "" }, null)];
  if (step.text) {
    // Two pieces, so pi's streaming path joins deltas.
    const cut = Math.ceil(step.text.length / 2);
    events.push(chunk(id, { content: step.text.slice(0, cut) }, null));
    if (cut < step.text.length) events.push(chunk(id, { content: step.text.slice(cut) }, null));
  }
  const tools = step.tools ?? [];
  tools.forEach((t, i) => {
    const args = JSON.stringify(t.arguments ?? {});
    const cut = Math.ceil(args.length / 2);
    events.push(
      chunk(id, {
        tool_calls: [
          { index: i, id: `call_${n}_${i}`, type: "function", function: { name: t.name, arguments: args.slice(0, cut) } },
        ],
      }, null),
    );
    events.push(chunk(id, { tool_calls: [{ index: i, function: { arguments: args.slice(cut) } }] }, null));
  });
  events.push(chunk(id, {}, tools.length > 0 ? "tool_calls" : "stop"));
  const usage = { prompt_tokens: 100 + n, completion_tokens: 10, total_tokens: 110 + n };
  events.push({ id, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: "scripted", choices: [], usage });
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  if (fault && fault.stallMs) {
    res.write(`data: ${JSON.stringify(events[0])}\n\n`);
    if (events[1]) res.write(`data: ${JSON.stringify(events[1])}\n\n`);
    setTimeout(() => res.destroy(), fault.stallMs);
    return;
  }
  for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
  res.end("data: [DONE]\n\n");
}

/** The answer in Anthropic's messages event stream (text only). */
function answerAnthropic(n, body, res, fault) {
  const step = stepFor(body);
  const text = step.text ?? "done";
  if (fault && fault.whole) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ id: `resp-${n}`, type: "message", role: "assistant", model: "scripted",
      content: [{ type: "text", text }], stop_reason: "end_turn", usage: { input_tokens: 100, output_tokens: 10 } }));
    return;
  }
  const cut = Math.ceil(text.length / 2);
  const events = [
    ["message_start", { type: "message_start", message: { id: `resp-${n}`, type: "message", role: "assistant", content: [], model: "scripted", stop_reason: null, usage: { input_tokens: 100, output_tokens: 1 } } }],
    ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
    ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: text.slice(0, cut) } }],
    ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: text.slice(cut) } }],
    ["content_block_stop", { type: "content_block_stop", index: 0 }],
    ["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 10 } }],
    ["message_stop", { type: "message_stop" }],
  ];
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = ([event, data]) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  if (fault && fault.stallMs) {
    events.slice(0, 3).forEach(send);
    setTimeout(() => res.destroy(), fault.stallMs);
    return;
  }
  events.forEach(send);
  res.end();
}

function keyOf(req) {
  const auth = req.headers.authorization;
  if (typeof auth === "string" && auth.startsWith("Bearer ")) return auth.slice(7);
  return req.headers["x-api-key"];
}

const server = createServer((req, res) => {
  const anthropic = req.method === "POST" && req.url.split("?")[0].endsWith("/v1/messages");
  if (req.method !== "POST" || !(anthropic || req.url.endsWith("/chat/completions"))) {
    sendJson(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
    return;
  }
  whenRead(req, (n, bytes) => {
    const raw = bytes.toString("utf8");
    const body = jsonBody(res, raw);
    if (body === undefined) return;
    appendFileSync(logPath, JSON.stringify({ n, id: `resp-${n}`, path: req.url, raw, body }) + "\n");
    if (body.stream !== true) {
      sendJson(res, 400, { error: { message: "only stream: true is scripted" } });
      return;
    }
    if (script.requireKey !== undefined && keyOf(req) !== script.requireKey) {
      sendJson(res, 401, { error: { message: `Incorrect API key provided: ${keyOf(req)}`, type: "invalid_request_error" } });
      return;
    }
    const fault = (script.faults ?? [])[n - 1];
    if (fault && fault.status) {
      const headers = { "content-type": "application/json" };
      if (fault.retryAfter !== undefined) headers["retry-after"] = String(fault.retryAfter);
      res.writeHead(fault.status, headers);
      res.end(JSON.stringify({ error: { message: fault.message ?? `scripted ${fault.status}` } }));
      return;
    }
    const go = () => (anthropic ? answerAnthropic : answer)(n, body, res, fault);
    if (fault && fault.delayMs) setTimeout(go, fault.delayMs);
    else go();
  });
});

// Every answer is written before its response ends: nothing is lost by exiting at once.
listen(server);
