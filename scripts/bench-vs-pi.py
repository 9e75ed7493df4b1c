#!/usr/bin/env python3
# Side-by-side benchmark: sessiond vs pi 1.6.0's own implementation, vs the parsing floor,
# and the daemon. One command, one table.
#
#   python3 scripts/bench-vs-pi.py [--sizes 1,10,100] [--huge] [--runs 3] [--rounds 11] [--oracle DIR]
#
# Generates deterministic sessions (cargo example gen-session) under target/bench/: one per
# size in MB, one of about 100,000 small entries (`--entries`), the long-path case, and one
# chain of 100,000 user / tool-call / tool-result turns (`--chain`) whose whole path is the
# context. Then:
#   * per session, alternating within each round so both see the same machine state:
#     `sessiond context FILE --json` vs pi's loadEntriesFromFile + buildSessionContext (the
#     oracle's `context`): wall time and peak RSS, and their ratios; `sessiond check FILE`
#     (open: read, validate, build the tree) vs the floor (read the file and validate every
#     line into serde's IgnoredAny), and their ratio. `context --json`, `check` and the floor
#     run one after another in each of --rounds rounds (pi in the first --runs of them), and
#     each ratio to the floor is the median of the rounds' own ratios: a machine whose speed
#     drifts between rounds moves all three of a round alike;
#   * the daemon (cargo example bench-daemon, speaking JSON-RPC to `sessiond serve` over its
#     pipes): time to `session/open`, VmRSS after it, `session/contextAt` at the default leaf
#     (the session's longest path) with full messages and with `fields: "ids"` (the first
#     full request after open, which computes the context's token estimate, shown apart, and
#     the client's parse of the answer inside the time), and the same full request through
#     the library in one process (the owner's work without the transport); the round
#     trip of a small request (`session/entry`, one at a time, 1,000 times, before the
#     `contextAt` requests and again right after them), each request followed by the same
#     request to a peer that answers it with the same result and does nothing else (the
#     round trip's floor on this machine: the same client, the same kind of pipes);
#     append→`session/didChange` with the default debounce; one appended entry applied and
#     answered by `contextAt {leafId: new, fields: "ids"}` vs `session/open` of the same
#     file (reopen), both through the daemon and in-process (the owner's work alone).
#   * compaction's memory (`--compact-runs`, 0: skipped): `sessiond compact FILE --dry-run`
#     (the plan, nothing written) vs pi's prepareCompaction (the oracle's `compact`), both at
#     pi's default keepRecentTokens, alternating: peak RSS against the budget of 64 MB + 10%
#     of the file, and wall time, on two sessions of about 200 MB: the generator's (a short
#     path since its last compaction) and one chain of 400,000 entries (399,615 messages to
#     summarize).
# --huge adds a 1 GB session (pi is skipped there unless --huge-pi: it needs several GB).
# Prints two markdown tables (the README's Performance section shows the latest ones).
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    """Runs cmd with stdout discarded; returns (seconds, peak RSS in MB).

    GNU time forks the command from its own small process: measuring the child of this Python
    process directly would count Python's pages copied by fork into the child's peak RSS."""
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", report.name, *cmd],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        if p.returncode != 0:
            sys.exit(f"bench: command failed: {' '.join(cmd)}")
        return elapsed, int(report.read().split()[-1]) / 1024


def run_json(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit(f"bench: command failed: {' '.join(cmd)}")
    return json.loads(p.stdout)


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")


def build():
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "sessiond", "--example", "gen-session",
                    "--example", "floor", "--example", "bench-daemon"], cwd=ROOT, check=True)


def oracle_dir(arg):
    d = arg or os.environ.get("SESSIOND_ORACLE_DIR") or os.path.join(ROOT, ".oracle")
    if not os.path.exists(os.path.join(d, "oracle.mjs")):
        sys.exit(f"bench: no pi oracle at {d} (run scripts/test.sh once, or pass --oracle DIR)")
    return d


def median(xs):
    return statistics.median(xs) if xs else None


def p99(xs):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round((len(xs) - 1) * 0.99))]


def scratch_copy(path, name):
    """A copy to append to (the generated session stays as generated)."""
    dst = os.path.join(os.path.dirname(path), name)
    shutil.copyfile(path, dst)
    return dst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--entries", type=int, default=100_000, help="entries of the long-path session (0: none)")
    ap.add_argument("--chain", type=int, default=100_000,
                    help="entries of the one-chain session of user / tool-call / tool-result turns (0: none)")
    ap.add_argument("--huge", action="store_true", help="add a 1 GB session")
    ap.add_argument("--huge-pi", action="store_true", help="also run pi on the 1 GB session")
    ap.add_argument("--runs", type=int, default=3, help="runs of pi and of the daemon's measures")
    ap.add_argument("--rounds", type=int, default=11,
                    help="rounds of sessiond context, sessiond check and the floor, one after another in "
                         "each round (ratios are the median of the rounds' own ratios); pi runs in the first --runs")
    ap.add_argument("--context-runs", type=int, default=100, help="contextAt requests per session and kind")
    ap.add_argument("--appends", type=int, default=200, help="appended entries per session")
    ap.add_argument("--compact-runs", type=int, default=3,
                    help="runs of sessiond's and pi's compaction on each 200 MB session (0: skip them)")
    ap.add_argument("--oracle")
    args = ap.parse_args()
    oracle = oracle_dir(args.oracle)
    if not os.path.exists("/usr/bin/time"):
        sys.exit("bench: needs GNU time (apt-get install time)")
    build()
    rel = os.path.join(target_dir(), "release")
    sessiond, gen, floor = os.path.join(rel, "sessiond"), os.path.join(rel, "examples", "gen-session"), os.path.join(rel, "examples", "floor")
    daemon = os.path.join(rel, "examples", "bench-daemon")
    sessions = [(f"{mb} MB", f"session-{mb}mb.jsonl", [str(mb), "1"], mb) for mb in (int(s) for s in args.sizes.split(",") if s)]
    if args.huge:
        sessions.append(("1 GB", "session-1024mb.jsonl", ["1024", "1"], 1024))
    if args.entries:
        k = args.entries // 1000
        sessions.append((f"{k}k entries", f"session-{k}k-entries.jsonl", ["0", "1", "--entries", str(args.entries)], 0))
    if args.chain:
        k = args.chain // 1000
        sessions.append((f"{k}k chain", f"session-chain-{k}k.jsonl", ["0", "1", "--chain", str(args.chain)], 0))
    outdir = os.path.join(ROOT, "target", "bench")
    os.makedirs(outdir, exist_ok=True)
    cols = []
    for label, name, gen_args, mb in sessions:
        path = os.path.join(outdir, name)
        if not os.path.exists(path):
            subprocess.run([gen, path, *gen_args], check=True)
        huge = mb >= 1024
        with_pi = not huge or args.huge_pi
        res = {k: [] for k in ("ctx", "pi", "open", "floor")}
        for r in range(max(args.rounds, args.runs)):
            res["ctx"].append(run([sessiond, "context", path, "--json"]))
            if with_pi and r < args.runs:
                res["pi"].append(run(["node", os.path.join(oracle, "oracle.mjs"), "context", path]))
            res["open"].append(run([sessiond, "check", path]))
            res["floor"].append(run([floor, path]))
        med = {k: (median([t for t, _ in v]), max(m for _, m in v)) if v else None for k, v in res.items()}
        # A round's commands meet the same machine: the ratio to the floor is taken round by
        # round, so that a machine whose speed drifts between rounds does not move it.
        paired = {k: median([t / f for (t, _), (f, _) in zip(res[k], res["floor"])]) for k in ("ctx", "open")}
        ctx_runs = max(10, args.context_runs // 10) if huge else args.context_runs
        d_open = run_json([daemon, sessiond, "open", path, str(args.runs), str(ctx_runs)])
        # The owner's work alone, without the transport; the first request after open counts
        # the context's token estimate on the way.
        d_ctx = run_json([daemon, sessiond, "inproc-context", path, "1", str(min(ctx_runs, 10))])
        d_append = d_inproc = None
        if not huge:
            d_append = run_json([daemon, sessiond, "append", scratch_copy(path, "scratch-append.jsonl"), str(args.appends), str(args.runs)])
            d_inproc = run_json([daemon, sessiond, "inproc", scratch_copy(path, "scratch-inproc.jsonl"), str(args.appends), str(args.runs)])
            for f in ("scratch-append.jsonl", "scratch-inproc.jsonl"):
                os.remove(os.path.join(outdir, f))
        cols.append(dict(label=label, size=os.path.getsize(path), mb=mb, med=med, paired=paired, open=d_open,
                         append=d_append, inproc=d_inproc, ctx=d_ctx))
    compactions = []
    if args.compact_runs > 0:
        for label, name, gen_args in (("200 MB generated", "session-200mb.jsonl", ["200", "1"]),
                                      ("400k chain", "session-chain-400k.jsonl", ["0", "1", "--chain", "400000"])):
            path = os.path.join(outdir, name)
            if not os.path.exists(path):
                subprocess.run([gen, path, *gen_args], check=True)
            ours, theirs = [], []
            for _ in range(args.compact_runs):
                ours.append(run([sessiond, "compact", path, "--dry-run"]))
                theirs.append(run(["node", os.path.join(oracle, "oracle.mjs"), "compact", path]))
            compactions.append(dict(label=label, size=os.path.getsize(path), ours=ours, theirs=theirs))
    print_table(args, cols)
    if compactions:
        print()
        print_compaction_table(compactions)


def budget_mb(size):
    """The memory budget of issue 15: 64 MB + 10% of a file of `size` bytes (the script's MiB)."""
    return 64 + 0.10 * size / 1048576


def print_markdown(cols, rows):
    """One table: a column per session, then the target and the verdict of each row."""
    print("| measure | " + " | ".join(c["label"] for c in cols) + " | target | |")
    print("|---|" + "---|" * len(cols) + "---|---|")
    for name, cells, target, v in rows:
        print(f"| {name} | " + " | ".join(cells) + f" | {target} | {v} |")


def fmt_ms(x):
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:.0f} ms"
    if x >= 1:
        return f"{x:.1f} ms"
    return f"{x * 1000:.0f} µs"


def print_table(args, cols):
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
          f"load average {load:.1f} at the end; `context --json`, `check` and the floor: median of "
          f"{max(args.rounds, args.runs)} rounds, each ratio to the floor the median of the rounds' own ratios; "
          f"pi and the daemon: median of {args.runs} runs (daemon: {args.context_runs} contextAt, {args.appends} appends)")
    print()
    big = next((c for c in cols if c["mb"] == 100), None)
    huge = next((c for c in cols if c["mb"] >= 1024), None)
    many = next((c for c in cols if c["mb"] == 0), None)
    rows = []  # (measure, [cell per column], target, verdict)

    def row(name, cell, target="", verdict=""):
        rows.append((name, [cell(c) for c in cols], target, verdict))

    def m(c, k, i):
        v = c["med"][k]
        return v[i] if v else None

    row("file size", lambda c: f"{c['size'] / 1048576:.0f} MB")
    row("entries", lambda c: f"{c['open']['entryCount']:,}")
    row("`context --json`: sessiond", lambda c: fmt_ms(m(c, "ctx", 0) * 1000))
    row("`context --json`: pi", lambda c: fmt_ms(m(c, "pi", 0) * 1000) if c["med"]["pi"] else "—")

    def speed(c):
        return m(c, "pi", 0) / m(c, "ctx", 0) if c["med"]["pi"] else None

    def rss_ratio(c):
        return m(c, "ctx", 1) / m(c, "pi", 1) if c["med"]["pi"] else None

    def verdict(c, f, ok):
        if c is None or f(c) is None:
            return "not measured"
        return "met" if ok(f(c)) else "**missed**"

    row("speed-up (pi time / sessiond time)", lambda c: f"{speed(c):.1f}×" if speed(c) else "—",
        "≥ 10× on 100 MB", verdict(big, speed, lambda x: x >= 10))
    row("peak RSS: sessiond", lambda c: f"{m(c, 'ctx', 1):.1f} MB")
    row("peak RSS: pi", lambda c: f"{m(c, 'pi', 1):.0f} MB" if c["med"]["pi"] else "—")
    small = [c for c in cols if c["mb"] == 0]
    rss_verdict = verdict(big, rss_ratio, lambda x: x <= 0.25) + " (100 MB)"
    for c in small:
        rss_verdict += f"; {verdict(c, rss_ratio, lambda x: x <= 0.15)} ({c['label']})"
    row("RSS ratio (sessiond / pi)", lambda c: f"{rss_ratio(c):.3f}" if rss_ratio(c) else "—",
        "≤ 0.25 on 100 MB; ≤ 0.15 on small entries", rss_verdict)

    def cf(c):
        return c["paired"]["ctx"]

    ctx_verdict = "; ".join(f"{verdict(c, cf, lambda x: x <= 2)} ({c['label']})" for c in small)
    row("open (`check`)", lambda c: fmt_ms(m(c, "open", 0) * 1000))
    row("floor (read + validate JSON)", lambda c: fmt_ms(m(c, "floor", 0) * 1000))

    def of(c):
        return c["paired"]["open"]

    sized = [c for c in cols if c["mb"] > 0]
    worst = max(sized, key=of) if sized else None
    open_verdict = verdict(worst, of, lambda x: x <= 1.5) + " (byte-sized)"
    for c in small:
        open_verdict += f"; {verdict(c, of, lambda x: x <= 1.5)} ({c['label']})"
    row("open / floor", lambda c: f"{of(c):.2f}", "≤ 1.5", open_verdict)
    row("`context --json` / floor", lambda c: f"{cf(c):.2f}", "≤ 2 on small entries", ctx_verdict)
    row("daemon `session/open`", lambda c: fmt_ms(median(c["open"]["openMs"])))
    row("daemon VmRSS after open", lambda c: f"{c['open']['rssMb']:.0f} MB")

    row("daemon RSS budget (64 MB + 10% of file)", lambda c: f"{budget_mb(c['size']):.0f} MB",
        "RSS ≤ budget on 1 GB", verdict(huge, lambda c: c["open"]["rssMb"] / budget_mb(c['size']), lambda x: x <= 1))
    row("messages in the context at the default leaf", lambda c: f"{c['open']['messageCount']:,}")
    row("`contextAt` full, median / p99",
        lambda c: f"{fmt_ms(median(c['open']['contextFullMs']))} / {fmt_ms(p99(c['open']['contextFullMs']))}",
        "p99 ≤ 25 ms on 1 GB", verdict(huge, lambda c: p99(c["open"]["contextFullMs"]), lambda x: x <= 25))
    row("`contextAt` full, the first request after open / the rest's max",
        lambda c: f"{fmt_ms(c['open']['contextFullMs'][0])} / {fmt_ms(max(c['open']['contextFullMs'][1:], default=None))}"
        if c["open"].get("contextFullMs") else "—")
    row("of which the client's parse of the answer, median (answer size)",
        lambda c: f"{fmt_ms(median(c['open']['contextFullParseMs']))} ({c['open']['contextFullBytes'] / 1048576:.1f} MB)"
        if c["open"].get("contextFullParseMs") else "—")
    row("`contextAt` full in-process (the owner's work, no transport), first / the rest's median",
        lambda c: f"{fmt_ms(c['ctx']['contextFullMs'][0])} / {fmt_ms(median(c['ctx']['contextFullMs'][1:]))}")
    row("`contextAt` ids, median / p99",
        lambda c: f"{fmt_ms(median(c['open']['contextIdsMs']))} / {fmt_ms(p99(c['open']['contextIdsMs']))}")

    for key, name in (("entryMs", "`session/entry` round trip, median / p99"),
                      ("entryAfterContextMs", "`session/entry` right after the `contextAt` requests, median / p99")):
        row(name,
            lambda c, key=key: f"{fmt_ms(median(c['open'].get(key, [])))} / {fmt_ms(p99(c['open'].get(key, [])))}",
            "median ≤ 0.1 ms", verdict(max(cols, key=lambda c, key=key: median(c["open"].get(key) or [0]), default=None),
                                       lambda c, key=key: median(c["open"].get(key) or []), lambda x: x <= 0.1))
    row("floor: the same answers from a peer that does nothing else, alternating, median / p99",
        lambda c: f"{fmt_ms(median(c['open'].get('entryFloorMs', [])))} / {fmt_ms(p99(c['open'].get('entryFloorMs', [])))}")

    def a(c, k, f=median):
        return f(c["append"][k]) if c["append"] else None

    def i(c, k):
        return median(c["inproc"][k]) if c["inproc"] else None

    row("append → `didChange`, median / p99",
        lambda c: f"{fmt_ms(a(c, 'didChangeMs'))} / {fmt_ms(a(c, 'didChangeMs', p99))}" if c["append"] else "—",
        "median < 20 ms", verdict(max((c for c in cols if c["append"]), key=lambda c: a(c, "didChangeMs"), default=None),
                                  lambda c: a(c, "didChangeMs"), lambda x: x < 20))
    row("append → `didChange` → `contextAt` ids, median", lambda c: fmt_ms(a(c, "didChangeContextMs")))
    row("daemon: append + `contextAt` ids at the new leaf", lambda c: fmt_ms(a(c, "applyMs")))
    row("daemon: reopen (`session/close` + `session/open`)", lambda c: fmt_ms(a(c, "reopenMs")))

    def d_ratio(c):
        return a(c, "reopenMs") / a(c, "applyMs") if c["append"] else None

    row("daemon: reopen / append (round trip included)", lambda c: f"{d_ratio(c):,.0f}×" if d_ratio(c) else "—")
    row("in-process: apply one entry + `contextAt` ids", lambda c: fmt_ms(i(c, "applyMs")))
    row("in-process: reopen (`Session::open`)", lambda c: fmt_ms(i(c, "reopenMs")))

    def p_ratio(c):
        return i(c, "reopenMs") / i(c, "applyMs") if c["inproc"] else None

    row("in-process: reopen / apply", lambda c: f"{p_ratio(c):,.0f}×" if p_ratio(c) else "—",
        "≥ 1,000× at 100k entries", verdict(many, p_ratio, lambda x: x >= 1000))

    print_markdown(cols, rows)


def print_compaction_table(cols):
    """Compaction's memory: `sessiond compact --dry-run` vs pi's prepareCompaction, medians."""
    def med(c, k, i):
        return median([x[i] for x in c[k]])

    rows = [
        ("file size", lambda c: f"{c['size'] / 1048576:.0f} MB", ""),
        ("peak RSS: sessiond `compact --dry-run`", lambda c: f"{med(c, 'ours', 1):.1f} MB", ""),
        ("peak RSS: pi `prepareCompaction`", lambda c: f"{med(c, 'theirs', 1):.0f} MB", ""),
        ("budget (64 MB + 10% of file)", lambda c: f"{budget_mb(c['size']):.1f} MB", ""),
        ("sessiond / budget", lambda c: f"{med(c, 'ours', 1) / budget_mb(c['size']):.2f}",
         "; ".join(("met" if med(c, "ours", 1) <= budget_mb(c['size']) else "**missed**") + f" ({c['label']})" for c in cols)),
        ("wall time: sessiond (plan, embedded summary, retention check) / pi (plan only)", lambda c: f"{fmt_ms(med(c, 'ours', 0) * 1000)} / {fmt_ms(med(c, 'theirs', 0) * 1000)}", ""),
    ]
    runs = len(cols[0]["ours"])
    print(f"compaction, pi's default keepRecentTokens (medians of {runs} runs each, alternating):")
    print()
    print_markdown(cols, [(name, [cell(c) for c in cols], "peak RSS ≤ budget" if v else "", v)
                          for name, cell, v in rows])


if __name__ == "__main__":
    main()
