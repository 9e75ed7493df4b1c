#!/usr/bin/env python3
"""Reference prototype of the Claude Code dialect's context rule (stdlib only).

    python3 tests/claude/prototype_context.py FILE [--leaf UUID] [--lines N] [--model M] [--mid-conv on|off]

Prints one JSON document: {"leaf": UUID, "messages": [...], "sendTime": {...}} where `messages` is
the Anthropic Messages API `messages` array that Claude Code 2.1.197 sends when it continues the
transcript FILE at the leaf (default: the leaf `claude --resume` continues from), less what Claude
adds at send time that the file does not hold (listed under `sendTime`). `--lines N` reads only the
first N lines (the file as it was when a request was built). Two things depend on the model the
request goes to, not on the file: whether attachments travel as `role: "system"` messages, and
whether thinking blocks written by another model are sent; `--model` names it (default: the
model of the last assistant line, which a resume keeps). The rule, and the evidence for every
step, is docs/claude-code.md; the function names in comments are Claude Code's own minified names
in 2.1.197, for whoever needs to look again.
"""
import argparse
import copy
import json
import re
import sys
from datetime import datetime

TREE = ("user", "assistant", "attachment", "system")
NO_CONTENT = "(no content)"
SYNTHETIC_MODEL = "<synthetic>"
# Attachment types dropped when a transcript is loaded (nof / tof).
DROPPED_ATTACHMENTS = {"compaction_reminder", "companion_intro", "echo_activities", "pen_mode_enter",
                       "pen_mode_exit", "verify_plan_reminder"}
# Attachment types that render to nothing (the tail of normalizeAttachmentForAPI).
SILENT_ATTACHMENTS = {"autocheckpointing", "background_task_status", "todo", "task_progress", "ultramemory",
                      "compaction_reminder", "current_session_memory", "thinking_reminder", "companion_intro",
                      "pen_mode_enter", "pen_mode_exit", "ultrawork_request", "echo_activities",
                      "verify_plan_reminder"}
AMBIENT = "This is ambient context \u2014 do not narrate it to the user unless they ask or it is directly relevant to their request."
TIMESTAMP_FALLBACK_MS = 5000


class Unsupported(Exception):
    pass


def ms(ts):
    """Date.parse of an ISO timestamp, or None (NaN)."""
    if not isinstance(ts, str):
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


def reminder(text):
    """mw: the <system-reminder> wrapper."""
    return "<system-reminder>\n" + text + "\n</system-reminder>"


UNWRAP = re.compile(r"^<system-reminder>\n?([\s\S]*?)\n?</system-reminder>$")


def unwrap(text):
    """M8o: the text inside a <system-reminder> wrapper, or the text."""
    m = UNWRAP.match(text)
    return m.group(1) if m else text


# -----------------------------------------------------------------------------------------------
# Reading the file (rfe) and choosing the leaf.

BIG_FILE = 5242880  # zCe: files larger than this are read by uim


def read_lines(path, limit=None):
    """The parsed lines of the file (its first `limit` lines), as Claude's reader takes them: a
    file over 5 MiB is first pruned as uim does (big_file_lines)."""
    with open(path, "rb") as f:
        data = f.read()
    raws = data.split(b"\n")
    if limit is not None:
        raws = raws[:limit]
    size = sum(len(r) + 1 for r in raws) if limit is not None else len(data)
    out = []
    for raw in raws:
        if not raw.strip():
            continue
        try:
            out.append(json.loads(raw.decode("utf-8")))
        except (ValueError, UnicodeDecodeError):
            continue  # a torn or corrupt line: Claude's reader skips it too
    if size > BIG_FILE:
        out = big_file_lines(out)
    return out


def big_file_lines(lines):
    """uim (files over 5 MiB, unless CLAUDE_CODE_DISABLE_PRECOMPACT_SKIP): tree lines before the
    last compact boundary without a preserved segment are dropped; then, unless a boundary with a
    preserved segment follows, only the tree lines on the parent chain of the last non-sidechain
    tree line and on the chain of the last last-prompt's leafUuid are kept (all of them when a chain
    names a parent that is not there). Lines without a parentUuid are always kept."""
    tree = []  # indices of tree lines since the last reset
    kept_other = []
    preserved = False
    leaf = None
    for i, line in enumerate(lines):
        if not isinstance(line, dict):
            continue
        if line.get("type") == "last-prompt":
            if line.get("leafUuid"):
                leaf = line["leafUuid"]
            kept_other.append(i)
            continue
        if is_boundary(line):
            cm = line.get("compactMetadata") or {}
            if cm.get("preservedSegment") or cm.get("preservedMessages"):
                preserved = True
            else:
                tree, preserved, leaf = [], False, None
        if "parentUuid" in line and isinstance(line.get("uuid"), str):
            tree.append(i)
        else:
            kept_other.append(i)
    keep = set(tree)
    if not preserved:
        index = {lines[i]["uuid"]: i for i in tree}
        chain, phantom = set(), False

        def walk(i):
            nonlocal phantom
            seen = set()
            while i is not None and i not in seen:
                seen.add(i)
                chain.add(i)
                p = lines[i].get("parentUuid")
                if p is None:
                    return
                if p not in index:
                    phantom = True
                    return
                i = index[p]

        last = next((i for i in reversed(tree) if not lines[i].get("isSidechain")), None)
        walk(last)
        walk(index.get(leaf) if leaf else None)
        if not phantom:
            keep = chain
    other = set(kept_other)
    return [line for i, line in enumerate(lines) if i in keep or i in other]


class Transcript:
    def __init__(self, lines):
        self.entries = {}  # uuid -> entry, in first-seen order (a JS Map)
        progress = {}
        self.last_line = None  # O: the last non-sidechain tree line
        self.prompt_leaf = None  # L: leafUuid of the last last-prompt line since the last boundary
        self.explicit = False  # $
        self.cleared = False  # F
        for line in lines:
            if not isinstance(line, dict):
                continue
            t = line.get("type")
            if t == "progress" and isinstance(line.get("uuid"), str):
                p = line.get("parentUuid")
                progress[line["uuid"]] = progress.get(p) if p and p in progress else p
                continue
            if t in TREE:
                e = copy.deepcopy(line)
                p = e.get("parentUuid")
                if p and p in progress:
                    e["parentUuid"] = progress[p]
                self.entries[e.get("uuid")] = e
                if not e.get("isSidechain"):
                    self.last_line = e.get("uuid")
                    self.explicit = False
                    self.cleared = False
                if is_boundary(e):
                    self.prompt_leaf = None
                    self.explicit = False
            elif t == "last-prompt":
                if line.get("leafUuid"):
                    same = line["leafUuid"] == self.prompt_leaf
                    self.explicit = line.get("explicit") is True or (self.explicit and same)
                    self.prompt_leaf = line["leafUuid"]
                    self.cleared = False
                elif line.get("leafUuid", 0) is None and line.get("explicit") is True:
                    self.cleared = True
                    self.prompt_leaf = None
                    self.explicit = False
        self.raw = {k: copy.deepcopy(v) for k, v in self.entries.items()}
        self.tail = self.relink_compaction()

    def relink_compaction(self):
        """Dcc: re-link the preserved segment of the last compact boundary and drop every entry
        positioned before that boundary (except the preserved ones). Returns the preserved tail."""
        e = self.entries
        pos = {}
        meta = None
        meta_at = -1
        last_boundary = -1
        for i, (u, x) in enumerate(e.items()):
            pos[u] = i
            if is_boundary(x):
                last_boundary = i
                cm = x.get("compactMetadata") or {}
                if cm.get("preservedMessages") or cm.get("preservedSegment"):
                    meta = cm
                    meta_at = i
        if meta is None:
            return None
        same = meta_at == last_boundary
        preserved = None
        if same:
            preserved = preserved_of(meta, e)
            if preserved is None:
                return None
        seg = preserved if preserved and preserved["uuids"] else None
        if seg and any(u not in e for u in seg["uuids"]):
            return None
        uuids = seg["uuids"] if seg else []
        keep = set(uuids)
        if seg:
            prev = seg["anchorUuid"]
            for u in uuids:
                e[u] = {**e[u], "parentUuid": prev}
                prev = u
            for u, x in list(e.items()):
                if x.get("parentUuid") == seg["anchorUuid"] and u != uuids[0]:
                    e[u] = {**x, "parentUuid": uuids[-1]}
        dropped = [u for u in e if pos.get(u) is not None and pos[u] < last_boundary and u not in keep]
        for u in dropped:
            del e[u]
        if seg and dropped:
            gone = set(dropped)
            for u, x in list(e.items()):
                if x.get("type") in ("user", "assistant") and x.get("parentUuid") is not None and x["parentUuid"] in gone:
                    e[u] = {**x, "parentUuid": uuids[-1]}
        return uuids[-1] if uuids else None

    def nearest_message(self, uuid):
        """From uuid up to the first user/assistant line."""
        seen = set()
        x = self.entries.get(uuid)
        while x is not None:
            if x["uuid"] in seen:
                return None
            seen.add(x["uuid"])
            if x.get("type") in ("user", "assistant"):
                return x["uuid"]
            p = x.get("parentUuid")
            x = self.entries.get(p) if p else None
        return None

    def leaf_candidates(self):
        """rfe's G: the leafUuids set (one element unless several leaves tie)."""
        e = self.entries
        if self.cleared:
            return set()
        L = self.prompt_leaf
        explicit_ok = self.explicit and L and L in e and not e[L].get("isSidechain")
        if self.tail is None or explicit_ok:
            ne = L if L and L in e else None
            if ne and not self.explicit and self.last_line and self.last_line in e and self.last_line != ne:
                # a non-explicit last-prompt leaf that the last line descends from gives way to it
                cur, seen = self.last_line, set()
                while cur and cur not in seen:
                    if cur == ne:
                        ne = self.last_line
                        break
                    seen.add(cur)
                    cur = e[cur].get("parentUuid") if cur in e else None
            if self.tail is None and ne is None:
                ne = self.last_line
            if ne and ne in e:
                m = self.nearest_message(ne)
                if m:
                    return {m}
        parents = set()
        message_parents = set()
        for x in e.values():
            if x.get("parentUuid") is not None:
                parents.add(x["parentUuid"])
                if x.get("type") in ("user", "assistant"):
                    message_parents.add(x["parentUuid"])
        leaves = []
        for u, x in e.items():
            if u in parents:
                continue
            m = self.nearest_message(u)
            if m and m not in message_parents and m not in leaves:
                leaves.append(m)
        if len(leaves) > 1:
            ne = L if L and L in leaves else self.last_line
            if ne and ne in e:
                m = self.nearest_message(ne)
                if m:
                    return {m}
        return set(leaves)

    def resume_leaf(self):
        """UAe: the newest (by timestamp) non-sidechain user/assistant line among the candidates,
        or, with none and nothing cleared, the newest non-sidechain line."""
        cands = self.leaf_candidates()
        best, best_t = None, float("-inf")
        for u, x in self.entries.items():
            if u in cands and not x.get("isSidechain") and x.get("type") in ("user", "assistant"):
                t = ms(x.get("timestamp"))
                if t is not None and t > best_t:
                    best, best_t = u, t
        if best is None and not cands and not self.cleared:
            for u, x in self.entries.items():
                if not x.get("isSidechain"):
                    t = ms(x.get("timestamp"))
                    if t is not None and t > best_t:
                        best, best_t = u, t
        return best

    def path(self, leaf):
        """FAe: the path from the root to leaf, the parallel tool results recovered (Jsm), and the
        attachment/system lines hanging below the leaf appended (Ksm)."""
        e = self.entries
        out, seen = [], set()
        x = e.get(leaf)
        while x is not None:
            if x["uuid"] in seen:
                break
            seen.add(x["uuid"])
            out.append(x)
            p = x.get("parentUuid")
            if not p:
                break
            nxt = e.get(p)
            if nxt is None or nxt["uuid"] in seen:
                nxt = self.timestamp_fallback(x, seen)
            x = nxt
        out.reverse()
        out = recover_parallel_results(e, out, seen)
        children = {}
        for y in e.values():
            if y.get("parentUuid") and y.get("type") not in ("user", "assistant"):
                children.setdefault(y["parentUuid"], []).append(y)
        extra, queue = [], [leaf]
        while queue:
            u = queue.pop(0)
            for c in children.get(u, []):
                if c["uuid"] in seen:
                    continue
                seen.add(c["uuid"])
                extra.append(c)
                queue.append(c["uuid"])
        if len(extra) > 1:
            extra.sort(key=lambda y: y.get("timestamp") or "")
        return out + extra

    def timestamp_fallback(self, x, seen):
        """Xsm: a parent that names no line: the closest earlier line (same isSidechain) at most
        5 s older."""
        t = ms(x.get("timestamp"))
        if t is None:
            return None
        best, best_d = None, float("inf")
        for y in self.entries.values():
            if y["uuid"] in seen or bool(y.get("isSidechain")) != bool(x.get("isSidechain")):
                continue
            ty = ms(y.get("timestamp"))
            if ty is None:
                continue
            d = t - ty
            if 0 <= d <= TIMESTAMP_FALLBACK_MS and d < best_d:
                best, best_d = y, d
        return best


def is_boundary(x):
    return x.get("type") == "system" and x.get("subtype") == "compact_boundary"


def preserved_of(meta, e):
    """zsm: the preserved uuids, from preservedMessages or by walking tail → head."""
    if meta.get("preservedMessages"):
        return meta["preservedMessages"]
    seg = meta.get("preservedSegment")
    if not seg:
        return None
    seen, uuids = set(), []
    x = e.get(seg.get("tailUuid"))
    while x is not None and x["uuid"] not in seen:
        seen.add(x["uuid"])
        uuids.append(x["uuid"])
        if x["uuid"] == seg.get("headUuid"):
            uuids.reverse()
            return {"anchorUuid": seg.get("anchorUuid"), "uuids": uuids}
        p = x.get("parentUuid")
        x = e.get(p) if p else None
    return None


def recover_parallel_results(e, path, seen):
    """Jsm: assistant lines of one response (one message.id) and their tool_result lines that sit
    on other branches (parallel tool calls chain one under another) are put back after the last
    line of that response on the path."""
    on_path = [x for x in path if x.get("type") == "assistant"]
    if not on_path:
        return path
    last_of = {}
    for x in on_path:
        mid = x.get("message", {}).get("id")
        if mid:
            last_of[mid] = x
    by_id, results_under = {}, {}
    for x in e.values():
        if x.get("type") == "assistant" and x.get("message", {}).get("id"):
            by_id.setdefault(x["message"]["id"], []).append(x)
        elif (x.get("type") == "user" and x.get("parentUuid") and isinstance(x.get("message", {}).get("content"), list)
              and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in x["message"]["content"])):
            results_under.setdefault(x["parentUuid"], []).append(x)
    done, insert, count = set(), {}, 0
    for x in on_path:
        mid = x.get("message", {}).get("id")
        if not mid or mid in done:
            continue
        done.add(mid)
        lines = by_id.get(mid, [x])
        missing = [y for y in lines if y["uuid"] not in seen]
        results = []
        for y in lines:
            for r in results_under.get(y["uuid"], []):
                if r["uuid"] not in seen:
                    results.append(r)
        if not missing and not results:
            continue
        missing.sort(key=lambda y: y.get("timestamp") or "")
        results.sort(key=lambda y: y.get("timestamp") or "")
        both = missing + results
        for y in both:
            seen.add(y["uuid"])
        count += len(both)
        insert[last_of[mid]["uuid"]] = both
    if count == 0:
        return path
    out = []
    for x in path:
        out.append(x)
        out.extend(insert.get(x["uuid"], []))
    return out


# -----------------------------------------------------------------------------------------------
# Loading for resume (Zwo) and the query's slice (My).

def deserialize(msgs, notes):
    # U8t: messages retracted by a model_refusal_fallback system line
    retracted = set()
    for m in msgs:
        if m.get("type") == "system" and m.get("subtype") == "model_refusal_fallback" and m.get("retractedMessageUuids") is not None:
            retracted.update(u[:36] for u in m["retractedMessageUuids"])
    if retracted:
        msgs = [m for m in msgs if m.get("type") == "system" or (m.get("uuid") or "")[:36] not in retracted]
    out = []
    for m in msgs:
        if m.get("type") == "attachment" and m.get("attachment", {}).get("type") in DROPPED_ATTACHMENTS:
            continue
        if m.get("type") in ("user", "assistant") and isinstance(m["message"].get("content"), list):
            c = m["message"]["content"]
            kept = [b for b in c if not (isinstance(b, dict) and b.get("type") == "text" and not isinstance(b.get("text"), str))]
            if len(kept) != len(c):
                if not kept:
                    continue
                m = {**m, "message": {**m["message"], "content": kept}}
        out.append(m)
    out = drop_unresolved_tool_uses(out)
    out = drop_orphan_thinking(out)
    out = drop_whitespace_assistants(out)
    # What a resume adds (not applied: the file holds it once the resumed run writes anything).
    appends = []
    rest = [m for m in out if m.get("type") not in ("system", "progress")
            and not (m.get("type") == "assistant" and m.get("isApiErrorMessage"))]
    if rest and interrupted(rest):
        appends.append("a user line (isMeta) 'Continue from where you left off.'")
    if (rest and rest[-1].get("type") == "user") or appends:
        appends.append("an assistant line 'No response requested.' (model <synthetic>)")
    if appends:
        notes["resumeAppends"] = appends
    return out


def is_result_line(m):
    c = m.get("message", {}).get("content")
    return m.get("type") == "user" and ((isinstance(c, list) and c and c[0].get("type") == "tool_result") or bool(m.get("toolUseResult")))


def interrupted(rest):
    """oof (less the turn-ending tools and interruption markers): whether a resume at the end of
    these lines writes "Continue from where you left off."."""
    last = rest[-1]
    if last.get("type") == "user":
        return not last.get("isMeta") and not last.get("isCompactSummary") and is_result_line(last)
    if last.get("type") == "attachment":
        for m in reversed(rest[:-1]):
            if m.get("type") == "attachment":
                continue
            if m.get("type") == "assistant" or m.get("isCompactSummary"):
                return False
            break
        return True
    return False


def drop_unresolved_tool_uses(msgs):
    """xyt: assistant lines whose tool_use blocks all have no tool_result anywhere are dropped."""
    uses, results = set(), set()
    for m in msgs:
        if m.get("type") not in ("user", "assistant"):
            continue
        c = m["message"].get("content")
        if not isinstance(c, list):
            continue
        for b in c:
            if b.get("type") == "tool_use":
                uses.add(b.get("id"))
            if b.get("type") == "tool_result":
                results.add(b.get("tool_use_id"))
    missing = uses - results
    if not missing:
        return msgs
    out = []
    for m in msgs:
        if m.get("type") == "assistant" and isinstance(m["message"].get("content"), list):
            ids = [b.get("id") for b in m["message"]["content"] if b.get("type") == "tool_use"]
            if ids and all(i in missing for i in ids):
                continue
        out.append(m)
    return out


def is_thinking(b):
    return b.get("type") in ("thinking", "redacted_thinking")


def drop_orphan_thinking(msgs):
    """e6e: an assistant line holding only thinking blocks whose response (message.id) has no other
    block is dropped."""
    real = set()
    for m in msgs:
        if m.get("type") == "assistant" and isinstance(m["message"].get("content"), list):
            if any(not is_thinking(b) for b in m["message"]["content"]) and m["message"].get("id"):
                real.add(m["message"]["id"])
    out = []
    for m in msgs:
        c = m.get("message", {}).get("content") if m.get("type") == "assistant" else None
        if isinstance(c, list) and c and all(is_thinking(b) for b in c) and not (m["message"].get("id") in real):
            continue
        out.append(m)
    return out


def whitespace_only(content):
    """Dfc."""
    if not content:
        return False
    for b in content:
        if b.get("type") != "text":
            return False
        t = b.get("text")
        t = t.strip() if isinstance(t, str) else None
        if t is not None and t != "" and t != NO_CONTENT:
            return False
    return True


def drop_whitespace_assistants(msgs):
    """Z8e: assistant lines with only blank text (and no real sibling) are dropped, then adjacent
    user messages merged."""
    if not any(m.get("type") == "assistant" and isinstance(m["message"].get("content"), list)
               and m["message"]["content"] and whitespace_only(m["message"]["content"]) for m in msgs):
        return msgs
    real = set()
    for m in msgs:
        if m.get("type") != "assistant" or not m["message"].get("id") or not isinstance(m["message"].get("content"), list):
            continue
        for b in m["message"]["content"]:
            if is_thinking(b):
                continue
            if b.get("type") != "text" or ((b.get("text") or "").strip() not in ("", NO_CONTENT)):
                real.add(m["message"]["id"])
                break
    kept = []
    for m in msgs:
        if m.get("type") == "assistant" and m["message"].get("id") not in real:
            c = m["message"].get("content")
            if isinstance(c, list) and c and whitespace_only(c):
                continue
        kept.append(m)
    out = []
    for m in kept:
        if m.get("type") == "user" and out and out[-1].get("type") == "user":
            out[-1] = merge_users(out[-1], m)
        else:
            out.append(m)
    return out


# -----------------------------------------------------------------------------------------------
# Rendering attachments (normalizeAttachmentForAPI, `Ctr`): each renders to user isMeta messages
# whose text is wrapped in <system-reminder> (Ep).

def render_attachment(a):
    t = a.get("type")
    if t == "agent_listing_delta":
        parts = []
        if a.get("addedLines"):
            head = "Available agent types for the Agent tool:" if a.get("isInitial") else "New agent types are now available for the Agent tool:"
            parts.append(head + "\n" + "\n".join(a["addedLines"]))
        if a.get("removedTypes"):
            parts.append("The following agent types are no longer available:\n" + "\n".join("- " + r for r in a["removedTypes"]))
            parts.append(AMBIENT)
        if a.get("isInitial") and a.get("showConcurrencyNote"):
            parts.append("When you launch multiple agents for independent work, send them in a single message with multiple tool uses so they run concurrently.")
        return [meta_user(reminder("\n\n".join(parts)))]
    if t == "skill_listing":
        if not a.get("content"):
            return []
        return [meta_user(reminder("The following skills are available for use with the Skill tool:\n\n" + a["content"]))]
    if t == "task_reminder":
        # Only while the task tools are on (not CLAUDE_CODE_ENABLE_TASKS=0/false), the default.
        items = "\n".join(f"#{i.get('id')}. [{i.get('status')}] {i.get('subject')}" for i in a.get("content") or [])
        text = ("The task tools haven't been used recently. If you're working on tasks that would benefit from "
                "tracking progress, consider using TaskCreate to add new tasks and TaskUpdate to update task status "
                "(set to in_progress when starting, completed when done). Also consider cleaning up the task list if it "
                "has become stale. Only use these if relevant to the current work. This is just a gentle reminder - "
                "ignore if not applicable.\n")
        if items:
            text += "\n\nHere are the existing tasks:\n\n" + items
        return [meta_user(reminder(text))]
    if t == "todo_reminder":
        items = "\n".join(f"{k + 1}. [{i.get('status')}] {i.get('content')}" for k, i in enumerate(a.get("content") or []))
        text = ("The TodoWrite tool hasn't been used recently. If you're working on tasks that would benefit from "
                "tracking progress, consider using the TodoWrite tool to track progress. Also consider cleaning up the "
                "todo list if has become stale and no longer matches what you are working on. Only use it if it's "
                "relevant to the current work. This is just a gentle reminder - ignore if not applicable.\n")
        if items:
            text += "\n\nHere are the existing contents of your todo list:\n\n[" + items + "]"
        return [meta_user(reminder(text))]
    if t in SILENT_ATTACHMENTS:
        return []
    raise Unsupported(f"attachment type {t!r} is not rendered by this prototype")


def meta_user(content):
    return {"type": "user", "isMeta": True, "message": {"role": "user", "content": content}}


# -----------------------------------------------------------------------------------------------
# normalizeMessagesForAPI (`Ak`), with mid-conversation system messages (the
# mid-conversation-system beta, on for the models Claude Code 2.1.197 defaults to).

def blocks_of(content):
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def join_blocks(a, b):
    """tum: two block lists joined; when a ends and b starts with text, a's last text gains '\\n'."""
    if a and b and a[-1].get("type") == "text" and b[0].get("type") == "text":
        return a[:-1] + [{**a[-1], "text": a[-1]["text"] + "\n"}] + b
    return a + b


def results_first(blocks):
    """jfc: tool_result blocks first."""
    return [b for b in blocks if b.get("type") == "tool_result"] + [b for b in blocks if b.get("type") != "tool_result"]


def merge_users(a, b):
    """rdr."""
    content = results_first(join_blocks(blocks_of(a["message"]["content"]), blocks_of(b["message"]["content"])))
    return {**a, "uuid": b.get("uuid") if a.get("isMeta") else a.get("uuid"), "message": {**a["message"], "content": content}}


def fold_attachment(a, b):
    """Qcm / num: an attachment's user message joins the user message before it without the '\n'
    of a user merge; after a tool_result whose content is a string, its text goes into that
    result (D8o)."""
    e = blocks_of(a["message"]["content"])
    t = blocks_of(b["message"]["content"])
    last = e[-1] if e else None
    if last is not None and last.get("type") == "tool_result" and isinstance(last.get("content"), str) and all(x.get("type") == "text" for x in t):
        e = e[:-1] + [result_with_text(last, t)]
    else:
        e = e + t
    return {**a, "message": {**a["message"], "content": results_first(e)}}


def result_with_text(r, texts):
    """D8o for a string tool_result content and text blocks."""
    if not texts:
        return r
    if r.get("is_error"):
        texts = [x for x in texts if x.get("type") == "text"]
        if not texts:
            return r
    parts = [(r.get("content") or "").strip()] + [x["text"].strip() for x in texts]
    return {**r, "content": "\n\n".join(p for p in parts if p)}


def tool_uses_last(blocks):
    """Ufc: in one assistant message, tool_use blocks move after the others when a non-tool_use
    block follows one (unless thinking would be reordered)."""
    first = -1
    after = False
    thinking_pair = False
    prev_thinking = False
    tool_since = False
    for i, b in enumerate(blocks):
        if b.get("type") == "tool_use":
            if first == -1:
                first = i
            tool_since = True
        else:
            if first != -1:
                after = True
            c = is_thinking(b)
            if c and prev_thinking and tool_since:
                thinking_pair = True
            prev_thinking = c
            tool_since = False
    if not after or thinking_pair:
        return blocks
    return [b for b in blocks if b.get("type") != "tool_use"] + [b for b in blocks if b.get("type") == "tool_use"]


def merge_assistants(a, b):
    """Zcm."""
    n = [x for x in a["message"]["content"] + b["message"]["content"] if not (x.get("type") == "text" and not isinstance(x.get("text"), str))]
    r = []
    for i, x in enumerate(n):
        if x.get("type") != "text" or len(x["text"]) == 0 or x["text"].strip() != "":
            r.append(x)
            continue
        prev = n[i - 1].get("type") if i > 0 else None
        nxt = n[i + 1].get("type") if i + 1 < len(n) else None
        if prev in ("thinking", "redacted_thinking") and nxt in ("thinking", "redacted_thinking"):
            r.append(x)
    o = any(not is_thinking(x) for x in r)
    return {**a, "message": {**a["message"], "content": tool_uses_last(r if o else n)}}


def normalize_tool_input(name, value):
    """Kdc."""
    if name == "ExitPlanMode" and isinstance(value, dict) and ("plan" in value or "planFilePath" in value):
        return {k: v for k, v in value.items() if k not in ("plan", "planFilePath")}
    if name == "Edit" and isinstance(value, dict) and "edits" in value:
        return {k: v for k, v in value.items() if k not in ("old_string", "new_string", "replace_all")}
    return value


def reorder_attachments(msgs):
    """jcm: attachments move up past plain user messages to just after the nearest earlier
    assistant message or tool_result user message; virtual messages are dropped."""
    def virtual(m):
        return m.get("type") in ("user", "assistant") and m.get("isVirtual") is True
    if not any(m.get("type") == "attachment" or virtual(m) for m in msgs):
        return msgs
    r, held = [], []
    for m in reversed(msgs):
        if m.get("type") == "attachment":
            held.append(m)
            continue
        c = m.get("message", {}).get("content")
        anchor = m.get("type") == "assistant" or (m.get("type") == "user" and isinstance(c, list) and c and c[0].get("type") == "tool_result")
        if anchor and held:
            r.extend(held)
            if not virtual(m):
                r.append(m)
            held = []
        elif not virtual(m):
            r.append(m)
    r.extend(held)
    r.reverse()
    return r


def api_system(text):
    return {"type": "api_system", "message": {"role": "system", "content": text}}


def normalize_for_api(msgs, mid_conv=True):
    items = reorder_attachments(msgs)
    g = []
    held = []
    made_system = [False]

    def flush():
        if not held:
            return
        k = "\n\n".join(held)
        held.clear()
        last = g[-1] if g else None
        if last is not None and last["type"] == "api_system":
            last["message"]["content"] += "\n\n" + k
        elif last is not None and last["type"] == "user":
            made_system[0] = True
            g.append(api_system(k))
        else:
            g.append(meta_user(reminder(k)))

    for k in items:
        t = k.get("type")
        if t == "progress":
            continue
        if t == "system" and k.get("subtype") != "local_command":
            continue
        if t == "assistant" and k.get("isApiErrorMessage") is True and k.get("message", {}).get("model") == SYNTHETIC_MODEL:
            continue
        if t in ("system", "user"):
            # A local command's output goes to the model as a user message.
            d = {"type": "user", "uuid": k.get("uuid"), "message": {"role": "user", "content": k.get("content")}} if t == "system" else k
            if g and g[-1]["type"] == "user":
                g[-1] = merge_users(g[-1], d)
            else:
                g.append(d)
            continue
        if t == "assistant":
            content = k["message"]["content"]
            if isinstance(content, list):
                content = [{"type": "tool_use", "id": b.get("id"), "name": b.get("name"), "input": normalize_tool_input(b.get("name"), b.get("input"))}
                           if b.get("type") == "tool_use" else b for b in content]
            d = {**k, "message": {**k["message"], "content": content}}
            merged = False
            for i in range(len(g) - 1, -1, -1):
                x = g[i]
                is_result_user = x["type"] == "user" and isinstance(x["message"]["content"], list) and any(b.get("type") == "tool_result" for b in x["message"]["content"])
                if x["type"] != "assistant" and x["type"] != "api_system" and not is_result_user:
                    break
                if x["type"] == "assistant":
                    if x["message"].get("id") == d["message"].get("id"):
                        g[i] = merge_assistants(x, d)
                        merged = True
                        break
                    continue
            if not merged:
                flush()
                c = d["message"]["content"]
                if isinstance(c, list):
                    d = {**d, "message": {**d["message"], "content": tool_uses_last(c)}}
                g.append(d)
            continue
        if t == "attachment":
            rendered = render_attachment(k.get("attachment", {}))
            if mid_conv:
                texts = []
                ok = True
                for m in rendered:
                    c = m["message"]["content"]
                    if isinstance(c, str):
                        texts.append(unwrap(c))
                        continue
                    for b in c:
                        if b.get("type") != "text":
                            ok = False
                            break
                        texts.append(unwrap(b["text"]))
                    if not ok:
                        break
                text = "\n".join(texts) if ok else None
                if text is not None and text.strip():
                    held.append(text)
                    continue
            if g and g[-1]["type"] == "user":
                for m in rendered:
                    g[-1] = fold_attachment(g[-1], m)
            else:
                g.extend(rendered)
            continue
    flush()
    out = drop_orphan_thinking(g)
    out = drop_trailing_thinking(out)
    out = drop_whitespace_assistants(out)
    out = fill_empty_assistants(out)
    if mid_conv and made_system[0]:
        out = place_systems(out)
    return out


def drop_trailing_thinking(msgs):
    """Aum."""
    if not msgs or msgs[-1]["type"] != "assistant":
        return msgs
    c = msgs[-1]["message"]["content"]
    if not isinstance(c, list) or not c or not is_thinking(c[-1]):
        return msgs
    o = len(c) - 1
    while o >= 0 and is_thinking(c[o]):
        o -= 1
    kept = c[:o + 1] if o >= 0 else [{"type": "text", "text": "[No message content]", "citations": []}]
    return msgs[:-1] + [{**msgs[-1], "message": {**msgs[-1]["message"], "content": kept}}]


def fill_empty_assistants(msgs):
    """Hum."""
    out = list(msgs)
    for i in range(len(out) - 1):
        m = out[i]
        if m["type"] == "assistant" and isinstance(m["message"]["content"], list) and not m["message"]["content"]:
            out[i] = {**m, "message": {**m["message"], "content": [{"type": "text", "text": NO_CONTENT, "citations": []}]}}
    return out


def place_systems(msgs):
    """eum: a system message stays only right after a user message and before an assistant, another
    system message or the end; elsewhere it becomes a user <system-reminder>, and adjacent user
    messages merge."""
    t = None
    for n, r in enumerate(msgs):
        if r["type"] != "api_system":
            if t is not None:
                t.append(r)
            continue
        o = t[-1] if t is not None else (msgs[n - 1] if n > 0 else None)
        s = msgs[n + 1] if n + 1 < len(msgs) else None
        if o is not None and o["type"] == "api_system":
            if t is None:
                t = msgs[:n]
            o["message"]["content"] += "\n\n" + r["message"]["content"]
            continue
        if o is not None and o["type"] == "user" and (s is None or s["type"] in ("assistant", "api_system")):
            if t is not None:
                t.append(r)
            continue
        if t is None:
            t = msgs[:n]
        t.append(meta_user(reminder(r["message"]["content"])))
    if t is None:
        return msgs
    out = []
    for r in t:
        if r["type"] == "user" and out and out[-1]["type"] == "user":
            out[-1] = merge_users(out[-1], r)
        else:
            out.append(r)
    return out


def errors_text_only(msgs):
    """Vcm: an is_error tool_result with non-text blocks keeps only its text, joined."""
    out = []
    for m in msgs:
        c = m["message"]["content"] if m["type"] == "user" else None
        if isinstance(c, list) and any(b.get("type") == "tool_result" and b.get("is_error") and isinstance(b.get("content"), list)
                                       and not all(x.get("type") == "text" for x in b["content"]) for b in c):
            nc = []
            for b in c:
                if b.get("type") == "tool_result" and b.get("is_error") and isinstance(b.get("content"), list) and not all(x.get("type") == "text" for x in b["content"]):
                    texts = [x["text"] for x in b["content"] if x.get("type") == "text"]
                    b = {**b, "content": [{"type": "text", "text": "\n\n".join(texts)}] if texts else []}
                nc.append(b)
            m = {**m, "message": {**m["message"], "content": nc}}
        out.append(m)
    return out


def to_params(msgs):
    """xlm / klm without cache markers: user array content drops blank text blocks (ypc)."""
    out = []
    for m in msgs:
        if m["type"] == "api_system":
            out.append({"role": "system", "content": m["message"]["content"]})
        elif m["type"] == "user":
            c = m["message"]["content"]
            if isinstance(c, list):
                kept = [b for b in c if not (b.get("type") == "text" and (not isinstance(b.get("text"), str) or b["text"].strip() == ""))]
                c = kept if kept else [{"type": "text", "text": NO_CONTENT}]
            out.append({"role": "user", "content": c})
        else:
            out.append({"role": "assistant", "content": m["message"]["content"]})
    return out


# sxn: the models Claude Code 2.1.197 sends no mid-conversation system messages to.
NO_MID_CONV = {"claude-opus-4-0", "claude-opus-4-1", "claude-opus-4-5", "claude-opus-4-6", "claude-opus-4-7",
               "claude-sonnet-4-0", "claude-sonnet-4-5", "claude-sonnet-4-6", "claude-haiku-4-5"}


def model_of(msgs):
    """The model of the last assistant line that a model wrote (a resume keeps it)."""
    for m in reversed(msgs):
        if m.get("type") == "assistant" and m.get("message", {}).get("model") not in (None, SYNTHETIC_MODEL):
            return m["message"]["model"]
    return None


def mid_conv_for(model):
    base = re.sub(r"\[(1|2)m\]", "", model or "", flags=re.I)
    return not (base.startswith("claude-3-") or "claude-3-" in base or base in NO_MID_CONV)


def strip_foreign_thinking(msgs, model):
    """vpc / Kxo: signed thinking and redacted_thinking blocks of assistant lines that another
    model wrote are not sent."""
    base = re.sub(r"\[(1|2)m\]", "", model or "", flags=re.I)
    out = []
    for m in msgs:
        if m.get("type") == "assistant" and isinstance(m["message"].get("content"), list) and m["message"].get("model") not in (SYNTHETIC_MODEL, base):
            kept = [b for b in m["message"]["content"] if not (b.get("type") == "redacted_thinking" or (b.get("type") == "thinking" and b.get("signature")))]
            if len(kept) != len(m["message"]["content"]):
                m = {**m, "message": {**m["message"], "content": kept}}
        out.append(m)
    return out


def context(path, leaf=None, lines=None, mid_conv=None, model=None):
    raw = read_lines(path, lines)
    tr = Transcript(raw)
    notes = {}
    chosen = leaf
    if chosen is None:
        chosen = tr.resume_leaf()
    if chosen is None:
        return {"leaf": None, "messages": [], "sendTime": {}}
    if chosen not in tr.entries:
        if chosen in tr.raw:
            # before the last compact boundary: Claude's loader no longer reaches it; read the
            # file as it was when that leaf was current.
            tr.entries = {k: copy.deepcopy(v) for k, v in tr.raw.items()}
            tr.tail = None
        else:
            raise SystemExit(f"no line {chosen} in {path}")
    msgs = deserialize(tr.path(chosen), notes)
    # A resume's new lines hang below the last line that survives the resume filters.
    leaf_line = msgs[-1].get("uuid") if msgs else chosen
    # My: the query sends the messages from the last compact boundary on.
    for i in range(len(msgs) - 1, -1, -1):
        if is_boundary(msgs[i]):
            msgs = msgs[i:]
            break
    if model is None:
        model = model_of(msgs)
    if mid_conv is None:
        mid_conv = mid_conv_for(model)
    msgs = strip_foreign_thinking(msgs, model)
    api = to_params(errors_text_only(normalize_for_api(msgs, mid_conv)))
    send = {
        "userContext": "Claude prepends a user <system-reminder> (\"As you answer the user's questions, you can use the following context:\" with # currentDate and, when present, # claudeMd) merged into messages[0]",
        "cacheControl": "one cache_control {\"type\": \"ephemeral\"} marker on the last block of the last message (a string content becomes one text block)",
    }
    send.update(notes)
    return {"leaf": chosen, "continuesAfter": leaf_line, "model": model, "midConversationSystem": mid_conv, "messages": api, "sendTime": send}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--leaf")
    ap.add_argument("--lines", type=int)
    ap.add_argument("--model", help="the model the request goes to (default: the last assistant line's)")
    ap.add_argument("--mid-conv", choices=["on", "off"], help="system messages mid-conversation (default: by model)")
    a = ap.parse_args()
    try:
        mid = None if a.mid_conv is None else a.mid_conv == "on"
        doc = context(a.file, a.leaf, a.lines, mid, a.model)
    except Unsupported as e:
        print(f"prototype_context.py: {e}", file=sys.stderr)
        sys.exit(3)
    json.dump(doc, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
