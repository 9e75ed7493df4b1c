#!/usr/bin/env python3
"""Compares the reference prototype (prototype_context.py) with every request the real Codex sent
in a corpus (tests/codex/corpus.mjs), after the normalizations of docs/codex.md. Stdlib only.

    python3 tests/codex/check_prototype.py OUTDIR/manifest.json [-v]

For every recorded request:
  leaf check     the prototype's context at the request's leaf (the line before its recorded
                 answer) equals the request's `input` after normalization, item for item and byte
                 for byte as re-serialized (key order included);
  resume check   for the first request of a step that continued a stored thread: the context at
                 the point the step resumed from is a prefix of that normalized `input`, and every
                 item after it (the new turn) was written to a rollout file during the step.
Normalizations (each verified, never assumed):
  N1  Codex 0.171.0 sends the base instructions as the first input item, a developer message not
      stored in any rollout: it is checked (id msg_<uuid5(uuid5(OID, thread id), text)>, its
      lines an ordered subset of session_meta.base_instructions.text) and removed.
  N2  a compaction request ends with Codex's summarization prompt, a user message without id not
      stored in any rollout: it is checked and removed.
  N3  only for requests sent by the legacy Codex (0.144.6, manifest `codex.legacy`): it does not
      send the `id` of stored items, so `id` is removed from the prototype's items before the
      comparison (the current Codex sends the same stored ids; its requests get no N3).
Exits 1 if any check fails. Prints one line per request with -v, and a summary.
"""
import json
import os
import sys
import uuid

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prototype_context as pc  # noqa: E402

COMPACTION_PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION"


def dumps(x):
    return json.dumps(x, ensure_ascii=False, separators=(",", ":"))


def text_of(item):
    return "".join(c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict))


def without_id(item):
    return {k: v for k, v in item.items() if k != "id"}


def ordered_subset(small, big):
    """Every line of `small` occurs in `big`, in order."""
    it = iter(big.split("\n"))
    return all(any(line == b for b in it) for line in small.split("\n"))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    verbose = "-v" in sys.argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    manifest_path = os.path.abspath(args[0])
    out = os.path.dirname(manifest_path)
    m = json.load(open(manifest_path))
    indexes = {}
    steps = {s["name"]: s for s in m["steps"]}

    def index_for(file):
        home = pc.codex_home_of(os.path.join(out, file))
        if home not in indexes:
            indexes[home] = pc.Index(home)
        return indexes[home]

    def ctx(leaf, drop_ids=False):
        path = os.path.join(out, leaf["file"])
        c = pc.context(path, line=leaf["line"], index=index_for(leaf["file"]))
        if drop_ids:
            c["messages"] = [without_id(x) for x in c["messages"]]
        return c

    def written_in_step(step, drop_ids=False):
        """Stripped response items appended to any file during the step."""
        items = []
        for f in step["files_after"]:
            start = step["files_before"].get(f, {}).get("lines", 0)
            for (_, _, rec) in index_for(f).lines(os.path.join(out, f))[start:]:
                if rec and rec.get("type") == "response_item":
                    item = pc.strip(rec["payload"])
                    items.append(dumps(without_id(item) if drop_ids else item))
        return items

    stats = {"requests": 0, "leaf_pass": 0, "leaf_fail": 0, "resume_pass": 0, "resume_fail": 0,
             "no_leaf": 0, "N1": 0, "N2": 0, "N3": 0, "legacy_instructions": 0}
    base_texts = {}
    failures = []
    for r in m["requests"]:
        if r.get("input") is None:
            continue
        stats["requests"] += 1
        n = r["n"]
        problems = []
        inp = list(r["input"])
        leaf = r.get("leaf")
        legacy = r.get("codex") == m["codex"]["legacy"]
        if legacy:
            stats["N3"] += 1
        ref = None
        try:
            ref = ctx(leaf, legacy) if leaf else (ctx(r["resumed_from"], legacy) if r.get("resumed_from") else None)
        except pc.ReplayError as e:
            problems.append(f"prototype: {e}")
        # N1: the base-instructions message.
        first = inp[0] if inp else {}
        if first.get("type") == "message" and first.get("role") == "developer" and str(first.get("id", "")).startswith("msg_") and len(first.get("content") or []) == 1:
            text = text_of(first)
            want = pc.base_instructions_message(r["thread_id"], text)
            if dumps(want) != dumps(first):
                problems.append("N1: first item is not the base-instructions message Codex derives from the thread id and text")
            elif ref is not None and ref["instructions"] is not None and not ordered_subset(text, ref["instructions"]):
                problems.append("N1: base-instructions text is not drawn from session_meta.base_instructions")
            else:
                stats["N1"] += 1
                base_texts.setdefault(text, []).append(n)
                inp = inp[1:]
        elif r.get("instructions"):
            stats["legacy_instructions"] += 1
        else:
            problems.append("no base instructions found (neither a first developer message nor `instructions`)")
        # N2: the compaction prompt.
        last = inp[-1] if inp else {}
        if last.get("type") == "message" and last.get("role") == "user" and text_of(last).startswith(COMPACTION_PROMPT):
            if "id" in last or r.get("request_kind") not in (None, "compaction"):
                problems.append("N2: compaction prompt with an id, or in a request not marked compaction")
            else:
                stats["N2"] += 1
                inp = inp[:-1]
        elif r.get("request_kind") == "compaction":
            problems.append("N2: compaction request without the summarization prompt last")
        got = [dumps(x) for x in inp]
        # Leaf check.
        if leaf is None:
            stats["no_leaf"] += 1
        elif ref is not None:
            want = [dumps(x) for x in ref["messages"]]
            if want == got:
                stats["leaf_pass"] += 1
            else:
                stats["leaf_fail"] += 1
                k = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
                problems.append(f"leaf {leaf['file']}:{leaf['line']}: prototype {len(want)} items, request {len(got)}; first difference at {k}: "
                                f"prototype {want[k][:160] if k < len(want) else None} / request {got[k][:160] if k < len(got) else None}")
        # Resume check.
        rf = r.get("resumed_from")
        new_turn = None
        if rf:
            try:
                base = [dumps(x) for x in ctx(rf, legacy)["messages"]]
                written = written_in_step(steps[r["step"]], legacy)
                if got[: len(base)] != base:
                    problems.append(f"resume: the context at {rf['file']}:{rf['line']} ({len(base)} items) is not a prefix of the request")
                    stats["resume_fail"] += 1
                else:
                    rest = got[len(base):]
                    missing = [x for x in rest if x not in written]
                    new_turn = len(rest)
                    if missing:
                        problems.append(f"resume: {len(missing)} new-turn items were not written during the step: {missing[0][:160]}")
                        stats["resume_fail"] += 1
                    else:
                        stats["resume_pass"] += 1
            except pc.ReplayError as e:
                problems.append(f"resume prototype: {e}")
                stats["resume_fail"] += 1
        line = f"{n:3} {r['step']:<28} {r.get('codex')} {r.get('request_kind') or '-':<10} items {len(got):3}"
        if leaf:
            line += f" leaf {os.path.basename(leaf['file'])[-40:]}:{leaf['line']}"
        if rf:
            line += f" resumed@{rf['line']} (+{new_turn} new)"
        line += "  ok" if not problems else "  FAIL"
        if verbose or problems:
            print(line)
        for p in problems:
            print("      " + p)
        if problems:
            failures.append(n)
    print(f"requests {stats['requests']}: leaf checks {stats['leaf_pass']} passed, {stats['leaf_fail']} failed, "
          f"{stats['no_leaf']} without a recorded answer; resume checks {stats['resume_pass']} passed, {stats['resume_fail']} failed")
    print(f"normalizations: N1 base-instructions message removed from {stats['N1']} requests "
          f"({len(base_texts)} distinct texts); legacy `instructions` field in {stats['legacy_instructions']}; "
          f"N2 compaction prompt removed from {stats['N2']}; N3 stored ids left out for the {stats['N3']} requests of the legacy Codex")
    if failures:
        print(f"FAILED requests: {failures}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
