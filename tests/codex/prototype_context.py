#!/usr/bin/env python3
"""Reference prototype of sessiond's Codex `context`: the Responses API `input` item list Codex
sends when it resumes a rollout at a leaf (docs/codex.md, "Replay"). Stdlib only.

    python3 tests/codex/prototype_context.py ROLLOUT [--line N | --ordinal N] [--codex-home DIR]

Prints {"messages": [...], "instructions": ..., "chain": [...], "notes": [...]} as JSON.
`messages` is what Codex sends after its base-instructions message (which it builds at send time,
see `base_instructions_message`); the leaf is the line (0-based) or ordinal given, else the last
line. `--codex-home` (default: the directory above `sessions/` in the path) is where parent files
named by `history_base` are looked for.

The rules, each checked against the real Codex by tests/codex/check_prototype.py:
  * a file's records are its lines up to the leaf; when its session_meta has `history_base`
    {thread_id, end_ordinal_exclusive, end_byte_offset}, the records of the parent file up to the
    line ending at byte end_byte_offset (whose ordinal must be end_ordinal_exclusive - 1) come
    first, recursively. The parent is the file whose history id is `thread_id`: a revert segment
    rollout-<time>-<thread>_<segment>.jsonl is named by its segment id, any other file by its
    thread id (session_meta.id);
  * replay, in order: a model-visible `response_item` is appended (its
    `internal_chat_message_metadata_passthrough` removed); `compacted` with `replacement_history`
    replaces everything so far with that list; `event_msg` `thread_rolled_back {num_turns}` drops
    the last num_turns user turns; every other line (event_msg, turn_context, world_state,
    token_usage_record, session_meta, unknown types) contributes nothing;
  * then the prompt normalization: a call without output gets a synthetic "aborted" output right
    after it, an output without call is dropped.
"""
import argparse
import json
import os
import sys
import uuid

# Response item types Codex keeps in model history (is_api_message); `compaction_trigger`,
# `other` and unknown types are not sent. Messages with role "system" are not sent either.
API_TYPES = {
    "message", "agent_message", "function_call", "function_call_output", "custom_tool_call",
    "custom_tool_call_output", "local_shell_call", "reasoning", "web_search_call",
    "image_generation_call", "tool_search_call", "tool_search_output", "compaction",
    "context_compaction",
}
# Fields of a stored item that Codex does not send.
UNSENT_FIELDS = ("internal_chat_message_metadata_passthrough",)

# User-message fragments that are context, not a user turn (rollback counts user turns).
CONTEXTUAL_USER_PREFIXES = (
    "<environment_context>", "<user_instructions>", "# agents.md instructions", "<turn_aborted>",
    "<user_shell_command>", "<subagent_notification>", "<skill>", "<hook_prompt",
)
# Developer-message fragments that rollback trims with the turn they precede.
CONTEXTUAL_DEV_PREFIXES = (
    "<permissions instructions>", "<model_switch>", "<collaboration_mode>", "<multi_agent_mode>",
    "<realtime_conversation>", "<skills_instructions>", "<personality_spec>", "<token_budget>",
    "<token_budget_reminder>", "<context_window>", "<context_window_guidance>", "<rollout_budget>",
)
SYNTHETIC_OUTPUT_NAMESPACE = uuid.UUID(int=0x90D38D3E6A5B4D52BFE22F1E634BFAC4)


class ReplayError(Exception):
    pass


def read_lines(path):
    """[(start, end, record or None)] for each line; `end` is past the newline."""
    with open(path, "rb") as f:
        data = f.read()
    out = []
    start = 0
    while start < len(data):
        nl = data.find(b"\n", start)
        end = len(data) if nl < 0 else nl + 1
        raw = data[start:nl if nl >= 0 else len(data)]
        try:
            rec = json.loads(raw)
        except ValueError:
            rec = None  # a torn or corrupt line: skipped, as Codex skips malformed lines
        out.append((start, end, rec))
        start = end
    return out


def codex_home_of(path):
    parts = os.path.abspath(path).split(os.sep)
    if "sessions" in parts:
        return os.sep.join(parts[: len(parts) - 1 - parts[::-1].index("sessions")])
    return os.path.dirname(os.path.abspath(path))


def history_id(path, meta):
    """The id a history_base names a file by: the segment id for a revert segment
    (rollout-<time>-<thread id>_<segment id>.jsonl), else the thread id (session_meta.id)."""
    name = os.path.basename(path)
    if name.endswith(".jsonl") and "_" in name:
        seg = name[: -len(".jsonl")].rsplit("_", 1)[1]
        if len(seg) == 36:
            return seg
    return (meta or {}).get("id")


class Index:
    """Rollout files under CODEX_HOME/sessions (and archived_sessions) by history id."""

    def __init__(self, codex_home):
        self.by_history = {}
        self.cache = {}
        for sub in ("sessions", "archived_sessions"):
            root = os.path.join(codex_home, sub)
            for dirpath, _, names in os.walk(root):
                for n in names:
                    if n.startswith("rollout-") and n.endswith(".jsonl"):
                        p = os.path.join(dirpath, n)
                        hid = history_id(p, self.meta(p))
                        if hid:
                            self.by_history.setdefault(hid, []).append(p)

    def lines(self, path):
        path = os.path.abspath(path)
        if path not in self.cache:
            self.cache[path] = read_lines(path)
        return self.cache[path]

    def meta(self, path):
        lines = self.lines(path)
        if lines and lines[0][2] and lines[0][2].get("type") == "session_meta":
            return lines[0][2].get("payload") or {}
        return None

    def resolve_base(self, base, own_path):
        """The parent file and line index that a history_base names."""
        tid = base.get("thread_id")
        end_byte = base.get("end_byte_offset")
        end_ord = base.get("end_ordinal_exclusive")
        found = []
        for p in self.by_history.get(tid, []):
            if os.path.abspath(p) == os.path.abspath(own_path):
                continue
            for i, (start, end, rec) in enumerate(self.lines(p)):
                if end == end_byte:
                    if end_ord is None or (rec and rec.get("ordinal") == end_ord - 1):
                        found.append((p, i))
                    break
                if end > end_byte:
                    break
        if not found:
            raise ReplayError(f"history_base {base} names no file of history {tid} with a line ending at byte {end_byte} "
                              f"and ordinal {None if end_ord is None else end_ord - 1}")
        if len(found) > 1:
            # Files of one thread sort by the time in their name: a base is older than its child.
            own = os.path.basename(own_path)
            older = [f for f in found if os.path.basename(f[0]) < own]
            found = older or found
            found.sort(key=lambda f: os.path.basename(f[0]))
            found = found[-1:]
        return found[0]


def records(index, path, upto, chain, depth=0):
    """The records of `path` up to line index `upto` (inclusive), its history_base prefix first."""
    if depth > 64:
        raise ReplayError("history_base chain too deep (a cycle?)")
    lines = index.lines(path)
    if upto is None:
        upto = len(lines) - 1
    if upto < 0 or upto >= len(lines):
        raise ReplayError(f"leaf line {upto} is outside {path} ({len(lines)} lines)")
    meta = index.meta(path) or {}
    out = []
    base = meta.get("history_base")
    if base:
        parent, pline = index.resolve_base(base, path)
        out.extend(records(index, parent, pline, chain, depth + 1))
    chain.append({"file": path, "last_line": upto})
    out.extend(rec for (_, _, rec) in lines[: upto + 1] if rec is not None)
    return out


def strip(item):
    item = dict(item)
    for k in UNSENT_FIELDS:
        item.pop(k, None)
    return item


def is_api_item(item):
    t = item.get("type")
    if t not in API_TYPES:
        return False
    if t == "message" and item.get("role") == "system":
        return False
    return True


def text_starts(content, prefixes):
    for c in content or []:
        if isinstance(c, dict) and c.get("type") == "input_text":
            t = c.get("text", "").lstrip().lower()
            if any(t.startswith(p) for p in prefixes):
                return True
    return False


def is_user_turn_boundary(item):
    if item.get("type") == "agent_message":
        return True
    if item.get("type") != "message":
        return False
    if item.get("role") == "user":
        return not text_starts(item.get("content"), CONTEXTUAL_USER_PREFIXES)
    return False


def drop_last_user_turns(items, n):
    if n <= 0:
        return items
    positions = [i for i, it in enumerate(items) if is_user_turn_boundary(it)]
    if not positions:
        return items
    first = positions[0]
    cut = first if n >= len(positions) else positions[len(positions) - n]
    # Context updates recorded just before the dropped turn go with it.
    while cut > first:
        prev = items[cut - 1]
        if prev.get("type") == "message" and prev.get("role") == "developer" and text_starts(prev.get("content"), CONTEXTUAL_DEV_PREFIXES):
            cut -= 1
        elif prev.get("type") == "message" and prev.get("role") == "user" and text_starts(prev.get("content"), CONTEXTUAL_USER_PREFIXES):
            cut -= 1
        else:
            break
    return items[:cut]


def synthetic_id(prefix, source):
    if not source:
        return None
    return f"{prefix}_{uuid.uuid5(SYNTHETIC_OUTPUT_NAMESPACE, f'{prefix}:{source}')}"


def normalize_for_prompt(items, notes):
    outputs = {it.get("call_id") for it in items if it.get("type") == "function_call_output"}
    custom_outputs = {it.get("call_id") for it in items if it.get("type") == "custom_tool_call_output"}
    out = []
    for it in items:
        out.append(it)
        t = it.get("type")
        if t in ("function_call", "local_shell_call") and it.get("call_id") and it["call_id"] not in outputs:
            notes.append(f"synthetic output for call {it['call_id']}")
            syn = {"type": "function_call_output"}
            sid = synthetic_id("fco", it.get("id"))
            if sid:
                syn["id"] = sid
            syn.update({"call_id": it["call_id"], "output": "aborted"})
            out.append(syn)
        elif t == "custom_tool_call" and it.get("call_id") not in custom_outputs:
            notes.append(f"synthetic custom output for call {it.get('call_id')}")
            syn = {"type": "custom_tool_call_output"}
            sid = synthetic_id("ctco", it.get("id"))
            if sid:
                syn["id"] = sid
            syn.update({"call_id": it.get("call_id"), "output": "aborted"})
            out.append(syn)
    calls = {it.get("call_id") for it in out if it.get("type") in ("function_call", "local_shell_call")}
    custom_calls = {it.get("call_id") for it in out if it.get("type") == "custom_tool_call"}
    kept = []
    for it in out:
        t = it.get("type")
        if t == "function_call_output" and it.get("call_id") not in calls:
            notes.append(f"orphan output dropped for call {it.get('call_id')}")
            continue
        if t == "custom_tool_call_output" and it.get("call_id") not in custom_calls:
            notes.append(f"orphan custom output dropped for call {it.get('call_id')}")
            continue
        kept.append(it)
    return kept


def replay(recs, notes):
    items = []
    for rec in recs:
        t = rec.get("type")
        p = rec.get("payload")
        if t == "response_item" and isinstance(p, dict):
            if is_api_item(p):
                items.append(strip(p))
        elif t == "compacted" and isinstance(p, dict):
            rh = p.get("replacement_history")
            if rh is None:
                raise ReplayError("compacted without replacement_history (older rollouts): not covered by the corpus")
            items = [strip(x) for x in rh if isinstance(x, dict)]
        elif t == "event_msg" and isinstance(p, dict) and p.get("type") == "thread_rolled_back":
            items = drop_last_user_turns(items, int(p.get("num_turns") or 0))
    return normalize_for_prompt(items, notes)


def leaf_line(index, path, line=None, ordinal=None):
    lines = index.lines(path)
    if line is not None:
        return line
    if ordinal is not None:
        for i, (_, _, rec) in enumerate(lines):
            if rec and rec.get("ordinal") == ordinal:
                return i
        raise ReplayError(f"no line with ordinal {ordinal} in {path}")
    return len(lines) - 1


def context(path, line=None, ordinal=None, codex_home=None, index=None):
    index = index or Index(codex_home or codex_home_of(path))
    notes = []
    chain = []
    upto = leaf_line(index, path, line, ordinal)
    recs = records(index, path, upto, chain)
    messages = replay(recs, notes)
    # The base instructions: the first session_meta of the chain that has them.
    instructions = None
    for link in chain:
        meta = index.meta(link["file"]) or {}
        bi = meta.get("base_instructions")
        if isinstance(bi, dict) and isinstance(bi.get("text"), str):
            instructions = bi["text"]
            break
    return {"messages": messages, "instructions": instructions, "chain": chain, "notes": notes}


def base_instructions_message(thread_id, text):
    """The developer message Codex 0.171.0 puts first in `input` (not stored in the rollout):
    id msg_<uuid5(uuid5(NAMESPACE_OID, thread id), text)>. `text` is the sent text, which is
    session_meta.base_instructions.text with sections about tools not offered left out."""
    ns = uuid.uuid5(uuid.NAMESPACE_OID, thread_id)
    return {"type": "message", "id": f"msg_{uuid.uuid5(ns, text)}", "role": "developer",
            "content": [{"type": "input_text", "text": text}]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rollout")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--line", type=int)
    g.add_argument("--ordinal", type=int)
    ap.add_argument("--codex-home")
    a = ap.parse_args()
    try:
        out = context(a.rollout, a.line, a.ordinal, a.codex_home)
    except ReplayError as e:
        print(f"prototype_context: {e}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
