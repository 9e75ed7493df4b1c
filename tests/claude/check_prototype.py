#!/usr/bin/env python3
"""Checks the reference prototype against every recorded request of a referee corpus (stdlib only).

    python3 tests/claude/check_prototype.py OUTDIR/manifest.json [-v]

For every request that continues a stored conversation (kind "turn": a streamed request whose
answer Claude wrote to a transcript; kind "compact": the summary request of /compact), the
prototype's `messages` at the request's leaf, on the transcript as it was then (its first
`linesBefore` lines), must equal the request's `messages` after the normalizations below; the
leaf experiments must continue from the leaf the prototype's resume rule names; and each resumed
run must continue from the prototype's default leaf of the file as the run found it (some state
between the run's start and its first line: a concurrent run may write meanwhile). Prints one
line per check and `N passed, M failed`; exits 1 on any failure.

Normalizations (docs/claude-code.md, "Comparing with the request", says why each is needed):
  N1 userContext  the block of messages[0] that is the "<system-reminder>\\nAs you answer the
                  user's questions, you can use the following context:" text is removed (it is the
                  first block, or follows the attachments that open the conversation when Claude
                  sends no system messages).
  N2 cache        every `cache_control` key is removed.
  N3 compact      in a compact request, the last block of the last message (the compact
                  instruction) is removed, with the "\\n" the merge appended to the block before it.
  N4 touched      a message that N1-N3 changed and that is left with one plain text block S equals
                  the string S (Claude turned a string content into a block to mark or merge it).
  N5 subagent     in a subagent's request, `role: "system"` messages that the agent file does not
                  hold (attachments computed during the agent's run are sent but not recorded).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prototype_context as proto  # noqa: E402

USER_CONTEXT = "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
COMPACT = "Your task is to create a detailed summary"


def normalize(messages, kind, proto_messages, subagent):
    msgs = json.loads(json.dumps(messages))
    touched = set()
    applied = []
    if msgs and isinstance(msgs[0].get("content"), list):
        c = msgs[0]["content"]
        at = next((k for k, b in enumerate(c) if b.get("type") == "text" and b.get("text", "").startswith(USER_CONTEXT)), None)
        if at is not None:
            msgs[0]["content"] = c[:at] + c[at + 1:]
            touched.add(0)
            applied.append("N1")
    for i, m in enumerate(msgs):
        if isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and "cache_control" in b:
                    del b["cache_control"]
                    touched.add(i)
                    applied.append("N2")
    if kind == "compact" and msgs:
        last = msgs[-1]
        c = last.get("content")
        if isinstance(c, list) and c and c[-1].get("type") == "text" and COMPACT in c[-1].get("text", ""):
            c.pop()
            if c and c[-1].get("type") == "text" and c[-1]["text"].endswith("\n"):
                c[-1] = {**c[-1], "text": c[-1]["text"][:-1]}
            touched.add(len(msgs) - 1)
            applied.append("N3")
            if not c:
                msgs.pop()
    for i in touched:
        if i >= len(msgs):
            continue
        c = msgs[i].get("content")
        if isinstance(c, list) and len(c) == 1 and set(c[0].keys()) == {"type", "text"} and c[0]["type"] == "text":
            if i < len(proto_messages) and isinstance(proto_messages[i].get("content"), str):
                msgs[i]["content"] = c[0]["text"]
                applied.append("N4")
    if subagent:
        have = [m["content"] for m in proto_messages if m.get("role") == "system"]
        kept = []
        for m in msgs:
            if m.get("role") == "system" and m.get("content") not in have:
                applied.append("N5")
                continue
            kept.append(m)
        msgs = kept
    return msgs, applied


def first_difference(a, b):
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            return i, x, y
    return None


def short(v, n=400):
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= n else s[:n] + "…"


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    manifest_path = sys.argv[1]
    verbose = "-v" in sys.argv[2:]
    root = os.path.dirname(os.path.abspath(manifest_path))
    with open(manifest_path) as f:
        m = json.load(f)
    passed = failed = 0
    counts = {}

    def report(ok, what, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok   {what}")
        else:
            failed += 1
            print(f"FAIL {what}{detail}")

    for r in m["requests"]:
        if r["kind"] not in ("turn", "compact") or not r.get("file") or not r.get("leaf"):
            continue
        path = os.path.join(root, r["file"])
        subagent = "/subagents/" in r["file"]
        what = f"request {r['n']} ({r['step']}, {r['kind']}{', subagent' if subagent else ''}{'' if 'mid-conversation-system' in (r.get('anthropicBeta') or '') else ', no mid-conversation system'}) at {r['leaf'][:8]}"
        try:
            mid_conv = "mid-conversation-system" in (r.get("anthropicBeta") or "")
            doc = proto.context(path, r["leaf"], r["linesBefore"], mid_conv, r.get("model"))
        except proto.Unsupported as e:
            report(False, what, f": {e}")
            continue
        got = doc["messages"]
        want, applied = normalize(r["messages"], r["kind"], got, subagent)
        for a in applied:
            counts[a] = counts.get(a, 0) + 1
        shown = ",".join(sorted(set(applied))) or "none"
        diff = first_difference(want, got)
        if diff is None:
            report(True, what + f": {len(got)} messages equal after {shown}")
        else:
            i, x, y = diff
            report(False, what, f": message {i} differs\n     request:   {short(x)}\n     prototype: {short(y)}")
            if verbose:
                print(json.dumps({"request": want, "prototype": got}, indent=1, ensure_ascii=False))

    for s in m["steps"]:
        for run in s["runs"]:
            if not run.get("file") or "linesBeforeRun" not in run or not run.get("resumedFrom"):
                continue
            if "--resume-session-at" in run["args"] or run.get("forkOf"):
                continue
            path = os.path.join(root, run["file"])
            # The run loaded the file at some moment between its start and its first line; with a
            # concurrent run writing meanwhile, any state in between may be the one it saw.
            last = run.get("firstLineIndex") or run["linesBeforeRun"]
            named = []
            ok = False
            for n in range(run["linesBeforeRun"], max(run["linesBeforeRun"], last) + 1):
                tr = proto.Transcript(proto.read_lines(path, n))
                leaf = tr.resume_leaf()
                after = proto.context(path, None, n)["continuesAfter"] if leaf else None
                named.append(f"{str(leaf)[:8]}/{str(after)[:8]}")
                if run["resumedFrom"] in (leaf, after):
                    ok = True
                    break
            report(ok, f"resume leaf of {s['name']}: Claude continued from {run['resumedFrom'][:8]}", "" if ok else f", the rule names {', '.join(sorted(set(named)))}")

    for e in m.get("experiments", []):
        path = os.path.join(root, e["file"])
        tr = proto.Transcript(proto.read_lines(path, e["editedLines"]))
        leaf = tr.resume_leaf()
        doc_leaf = proto.context(path, None, e["editedLines"])["continuesAfter"] if leaf else None
        ok = e["resumedFrom"] in (leaf, doc_leaf)
        report(ok, f"experiment {e['name']}: Claude continued from {str(e['resumedFrom'])[:8]}", "" if ok else f", the rule names {str(leaf)[:8]} (last line of its path {str(doc_leaf)[:8]})")

    print("normalizations applied: " + (", ".join(f"{k} ×{v}" for k, v in sorted(counts.items())) or "none"))
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
