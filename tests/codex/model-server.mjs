// A scripted OpenAI Responses API server for the Codex referee: Codex talks to it as to a model,
// and it answers from a script instead of thinking.
//
//   node tests/codex/model-server.mjs SCRIPT.json REQUESTS.jsonl
//
// Listens on 127.0.0.1 on a port the system picks and prints one line `{"port": N}` on stdout once
// it is ready. Serves `POST .../responses` (Codex always streams) as server-sent events:
// `response.created`, per output item `response.output_item.added`, `response.output_text.delta`
// (text in two pieces) and `response.output_item.done`, then `response.completed` with `usage`.
// Any other request is recorded and answered 404. Ends on SIGTERM or when stdin closes.
//
// The script (JSON):
//   {"prompts": {TEXT: [STEP, ...]}, "prefixes": {TEXT: [STEP, ...]}, "default": [STEP, ...]}
// A request is answered by looking at the text of its last `input` item that is a user message
// (the prompt; for Codex's compaction request that is its summarization prompt): an exact key of
// `prompts`, else the longest key of `prefixes` the text starts with, else `default`. The number of
// model outputs (assistant messages, function and custom tool calls) after that user message picks
// the step, so the answer depends only on the request: resumed and forked threads get the same
// answers. Past the last step the answer is the text "done". A STEP is one of
//   {"text": "..."}                                    an assistant message
//   {"tool": {"cmd": "..."}}                           a call of the shell tool Codex offers in the
//                                                      request (`exec_command` {cmd}, or `shell`
//                                                      {command: ["bash", "-lc", cmd]}, or
//                                                      `shell_command` {command})
//   {"call": {"name": N, "arguments": {...}}}          a function call, as given
// and may add `"inputTokens": N`: the `usage.input_tokens` reported for this answer (default
// 1000 + the request's length / 4), so that a test can make Codex's auto-compaction fire
// (`-c model_auto_compact_token_limit=M` with M < N). Call ids are `call_<request>_<index>`; item
// ids `item_<request>_<index>`; the response id `resp-<request>`. `"delayMs": N` holds the answer
// back N ms (a turn in flight, for the writer-lock test).
//
// Every request, whatever its path, is appended to REQUESTS.jsonl before it is answered as one line
// `{"n": N, "method": M, "path": URL, "headers": {...}, "raw": BODY_TEXT}`: `raw` is the body byte
// for byte when it is UTF-8 (else `raw_base64`), `n` counts requests from 1.
import { appendFileSync } from "node:fs";
import { createServer } from "node:http";
import { jsonBody, listen, scriptAndLog, sendJson, whenRead } from "../support/model-server.mjs";

const { script, logPath } = scriptAndLog();

/** The text of a Responses API message's content (input_text / output_text pieces joined). */
function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((c) => c && typeof c.text === "string")
    .map((c) => c.text)
    .join("");
}

const OUTPUTS = new Set(["function_call", "custom_tool_call", "local_shell_call"]);

/** The prompt and the step that answers a request (see the head of this file). */
function stepFor(body) {
  const input = Array.isArray(body.input) ? body.input : [];
  let last = -1;
  for (let i = input.length - 1; i >= 0; i--) {
    const it = input[i];
    if (it && (it.type === "message" || it.type === undefined) && it.role === "user") {
      last = i;
      break;
    }
  }
  const prompt = last >= 0 ? textOf(input[last].content) : "";
  let steps = script.prompts?.[prompt];
  if (!steps) {
    let best = null;
    for (const key of Object.keys(script.prefixes ?? {})) {
      if (prompt.startsWith(key) && (best === null || key.length > best.length)) best = key;
    }
    steps = best !== null ? script.prefixes[best] : script.default ?? [];
  }
  const index = input
    .slice(last + 1)
    .filter((it) => it && (OUTPUTS.has(it.type) || (it.type === "message" && it.role === "assistant")))
    .length;
  return { prompt, step: steps[index] ?? { text: "done" } };
}

/** The shell tool the request offers, and the arguments that run `cmd` with it. */
function shellCall(body, cmd) {
  const names = new Set((body.tools ?? []).map((t) => t.name ?? t.function?.name).filter(Boolean));
  if (names.has("exec_command")) return { name: "exec_command", arguments: { cmd } };
  if (names.has("shell_command")) return { name: "shell_command", arguments: { command: cmd } };
  if (names.has("shell")) return { name: "shell", arguments: { command: ["bash", "-lc", cmd] } };
  throw new Error(`the request offers no shell tool (tools: ${[...names].join(", ")})`);
}

function sse(res, data) {
  res.write(`event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`);
}

function answer(n, body, res) {
  const id = `resp-${n}`;
  const { step } = stepFor(body);
  const items = [];
  if (step.text !== undefined) {
    items.push({
      type: "message",
      id: `item_${n}_${items.length}`,
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: step.text, annotations: [] }],
    });
  }
  const calls = [];
  if (step.tool) calls.push(shellCall(body, step.tool.cmd));
  if (step.call) calls.push({ name: step.call.name, arguments: step.call.arguments ?? {} });
  for (const c of calls) {
    items.push({
      type: "function_call",
      id: `item_${n}_${items.length}`,
      call_id: `call_${n}_${items.length}`,
      name: c.name,
      arguments: JSON.stringify(c.arguments),
      status: "completed",
    });
  }
  const raw = JSON.stringify(body);
  const inputTokens = step.inputTokens ?? 1000 + Math.floor(raw.length / 4);
  const outputTokens = 10;
  const base = { id, object: "response", created_at: Math.floor(Date.now() / 1000), model: body.model ?? "scripted" };
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  let seq = 0;
  const send = (d) => sse(res, { ...d, sequence_number: seq++ });
  send({ type: "response.created", response: { ...base, status: "in_progress", output: [] } });
  items.forEach((item, i) => {
    if (item.type === "message") {
      send({ type: "response.output_item.added", output_index: i, item: { ...item, status: "in_progress", content: [] } });
      const text = item.content[0].text;
      const cut = Math.ceil(text.length / 2);
      for (const piece of [text.slice(0, cut), text.slice(cut)]) {
        if (piece) send({ type: "response.output_text.delta", item_id: item.id, output_index: i, content_index: 0, delta: piece });
      }
    } else {
      send({ type: "response.output_item.added", output_index: i, item: { ...item, status: "in_progress" } });
    }
    send({ type: "response.output_item.done", output_index: i, item });
  });
  send({
    type: "response.completed",
    response: {
      ...base,
      status: "completed",
      output: items,
      usage: {
        input_tokens: inputTokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: outputTokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: inputTokens + outputTokens,
      },
    },
  });
  res.end();
}

const server = createServer((req, res) => {
  whenRead(req, (n, bytes) => {
    const text = bytes.toString("utf8");
    const utf8 = Buffer.from(text, "utf8").equals(bytes);
    const record = { n, method: req.method, path: req.url, headers: req.headers };
    if (utf8) record.raw = text;
    else record.raw_base64 = bytes.toString("base64");
    appendFileSync(logPath, JSON.stringify(record) + "\n");
    const path = req.url.split("?")[0];
    if (req.method !== "POST" || !path.endsWith("/responses")) {
      sendJson(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
      return;
    }
    const body = jsonBody(res, text);
    if (body === undefined) return;
    try {
      const { step } = stepFor(body);
      if (step.delayMs) setTimeout(() => answer(n, body, res), step.delayMs);
      else answer(n, body, res);
    } catch (e) {
      sendJson(res, 400, { error: { message: String(e.message ?? e) } });
    }
  });
});

// Every request is recorded before it is answered: nothing is lost by exiting at once.
listen(server);
