// What the scripted model servers share (tests/live, tests/claude and tests/codex
// model-server.mjs): the command line `model-server.mjs SCRIPT.json REQUESTS.jsonl`; reading a
// request and counting it, answering JSON; and the server's life: it listens on 127.0.0.1 on a
// port the system picks, prints one line `{"port": N}` on stdout once it is ready, and ends on
// SIGTERM or when stdin closes. Each server records a request before it answers it, so nothing
// is lost by exiting at once.
import { readFileSync } from "node:fs";

/** The parsed script and the path of the requests log, from the command line (exit 2 without them). */
export function scriptAndLog() {
  const [scriptPath, logPath] = process.argv.slice(2);
  if (!scriptPath || !logPath) {
    console.error("usage: model-server.mjs SCRIPT.json REQUESTS.jsonl");
    process.exit(2);
  }
  return { script: JSON.parse(readFileSync(scriptPath, "utf8")), logPath };
}

/** Starts `server` (a `node:http` server) as the head of this file says. */
export function listen(server) {
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
  });
  const stop = () => process.exit(0);
  process.on("SIGTERM", stop);
  process.stdin.on("end", stop);
  process.stdin.resume();
}

let counter = 0;

/** Reads a request's body whole, then calls `then(n, bytes)`; `n` counts the requests read, from 1. */
export function whenRead(req, then) {
  const parts = [];
  req.on("data", (d) => parts.push(d));
  req.on("end", () => then(++counter, Buffer.concat(parts)));
}

/** Answers with `value` as a JSON document. */
export function sendJson(res, status, value) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(value));
}

/** The body parsed as JSON, or undefined once the request is answered 400 (not JSON). */
export function jsonBody(res, text) {
  try {
    return JSON.parse(text);
  } catch (e) {
    sendJson(res, 400, { error: { message: `bad JSON: ${e.message}` } });
    return undefined;
  }
}
