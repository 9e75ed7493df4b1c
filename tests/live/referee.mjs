// The referee of the live tests: pi's own conversion of a context into a model request.
//
//   SESSIOND_PI_DIR=DIR node tests/live/referee.mjs < jobs.jsonl > requests.jsonl
//
// DIR holds node_modules/@earendil-works/pi-coding-agent (and its pi-ai), as scripts/live-deps.sh
// installs it. Input: one JSON object per line, {"model": MODEL, "messages": [AgentMessage]}:
// the messages of a context (sessiond's `session/contextAt` at some leaf) and the model as pi
// builds it from models.json ({id, api, provider, baseUrl, ...}). Output: one line per job, in
// order, {"messages": [...], "tools": [...] | null}: the `messages` and `tools` of the
// chat-completions request pi would send for that context, made by the calls pi's agent makes
// (pi-coding-agent `convertToLlm`, pi-ai `normalizeContext`, then the `openai-completions`
// provider's request builder, stopped in its `onPayload` hook before anything is sent).
// A job that throws prints {"error": MESSAGE}.
import { join } from "node:path";
import { createInterface } from "node:readline";

const dir = process.env.SESSIOND_PI_DIR;
if (!dir) {
  console.error("referee.mjs: set SESSIOND_PI_DIR to the directory holding node_modules/@earendil-works/pi-coding-agent");
  process.exit(2);
}
const modules = join(dir, "node_modules/@earendil-works");
const { convertToLlm } = await import(join(modules, "pi-coding-agent/dist/core/messages.js"));
const ai = await import(join(modules, "pi-ai/dist/index.js"));
const completions = await import(join(modules, "pi-ai/dist/api/openai-completions.js"));

class Captured extends Error {
  constructor(params) {
    super("captured");
    this.params = params;
  }
}

async function request(model, messages) {
  const context = ai.normalizeContext({ messages: convertToLlm(messages) });
  let params;
  const stream = completions.stream(model, context, {
    apiKey: "referee",
    onPayload: (p) => {
      params = p;
      throw new Captured(p);
    },
  });
  // The stream ends with the error thrown above; drain it.
  for await (const _ of stream) {
    if (params) break;
  }
  if (!params) {
    const result = await stream.result();
    throw new Error(`no request was built: ${result.errorMessage ?? "unknown"}`);
  }
  return { messages: params.messages, tools: params.tools ?? null };
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let out;
  try {
    const job = JSON.parse(line);
    out = await request(job.model, job.messages);
  } catch (e) {
    out = { error: String(e && e.stack ? e.stack : e) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
