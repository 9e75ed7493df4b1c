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
// `{"n": N, "id": "resp-N", "body": BODY}` before it is answered.
import { appendFileSync, readFileSync } from "node:fs";
import { createServer } from "node:http";

const [scriptPath, logPath] = process.argv.slice(2);
if (!scriptPath || !logPath) {
  console.error("usage: model-server.mjs SCRIPT.json REQUESTS.jsonl");
  process.exit(2);
}
const script = JSON.parse(readFileSync(scriptPath, "utf8"));
let counter = 0;

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

function answer(n, body, res) {
  const id = `resp-${n}`;
  const step = stepFor(body);
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
  for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
  res.end("data: [DONE]\n\n");
}

const server = createServer((req, res) => {
  if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
    return;
  }
  const parts = [];
  req.on("data", (d) => parts.push(d));
  req.on("end", () => {
    const n = ++counter;
    let body;
    try {
      body = JSON.parse(Buffer.concat(parts).toString("utf8"));
    } catch (e) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `bad JSON: ${e.message}` } }));
      return;
    }
    appendFileSync(logPath, JSON.stringify({ n, id: `resp-${n}`, body }) + "\n");
    if (body.stream !== true) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "only stream: true is scripted" } }));
      return;
    }
    answer(n, body, res);
  });
});

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
});
// Every answer is written before its response ends: nothing is lost by exiting at once.
const stop = () => process.exit(0);
process.on("SIGTERM", stop);
process.stdin.on("end", stop);
process.stdin.resume();
