// Writes a session through pi 1.6.0's own SessionManager for tests/verify.rs.
//
//   SESSIOND_ORACLE_DIR=DIR node tests/oracle/verify-session.mjs < script.json
//
// Input: {"cwd", "sessionDir", "steps": [...]} with steps
//   {"op": "model", "provider", "modelId"}            appendModelChange
//   {"op": "user", "text"}                             a user message
//   {"op": "call", "id", "name", "arguments"}          an assistant message with one tool call
//   {"op": "result", "id", "name", "text", "isError"?} the tool result for that call
//   {"op": "assistant", "text"}                        an assistant text message
//   {"op": "mark", "name"}                             remember the current leaf id under a name
//   {"op": "branch", "to"}                             move the leaf to a marked entry (pi's branch)
//   {"op": "compaction", "summary", "firstKept"}       appendCompaction (firstKept: a mark)
// Output: {"file", "leaf", "marks": {name: id}}.
import { readFileSync } from "node:fs";
import { piCore } from "./pi.mjs";

const sm = await piCore("session-manager.js");
const script = JSON.parse(readFileSync(0, "utf-8"));
const session = sm.SessionManager.create(script.cwd, script.sessionDir);
const marks = {};
let clock = Date.parse("2026-01-01T00:00:00.000Z");
const now = () => (clock += 1000);
const usage = { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
let provider = "anthropic";
let model = "claude-sonnet-4-5";
for (const step of script.steps) {
  switch (step.op) {
    case "model":
      provider = step.provider;
      model = step.modelId;
      session.appendModelChange(step.provider, step.modelId);
      break;
    case "user":
      session.appendMessage({ role: "user", content: [{ type: "text", text: step.text }], timestamp: now() });
      break;
    case "call":
      session.appendMessage({
        role: "assistant",
        content: [{ type: "toolCall", id: step.id, name: step.name, arguments: step.arguments }],
        api: "anthropic-messages", provider, model, usage, stopReason: "toolUse", timestamp: now(),
      });
      break;
    case "result":
      session.appendMessage({
        role: "toolResult", toolCallId: step.id, toolName: step.name,
        content: [{ type: "text", text: step.text }], isError: !!step.isError, timestamp: now(),
      });
      break;
    case "assistant":
      session.appendMessage({
        role: "assistant", content: [{ type: "text", text: step.text }],
        api: "anthropic-messages", provider, model, usage, stopReason: "stop", timestamp: now(),
      });
      break;
    case "mark":
      marks[step.name] = session.getLeafId();
      break;
    case "branch":
      session.branch(marks[step.to]);
      break;
    case "compaction":
      session.appendCompaction(step.summary, marks[step.firstKept], 1000, { readFiles: [], modifiedFiles: [] });
      break;
    default:
      throw new Error(`unknown op ${step.op}`);
  }
}
console.log(JSON.stringify({ file: session.getSessionFile(), leaf: session.getLeafId(), marks }));
