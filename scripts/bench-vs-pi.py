#!/usr/bin/env python3
# Side-by-side benchmark: sessiond vs pi 1.6.0's own implementation, vs the parsing floor,
# and the daemon. One command, one table.
#
#   python3 scripts/bench-vs-pi.py [--sizes 1,10,100] [--huge] [--runs 3] [--rounds 11] [--oracle DIR]
#                                  [--baseline REV] [--claude 10,100]
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
#     pipes): time to `session/open`, VmRSS after it, `session/contextAt` at the resume leaf
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
#   * with --baseline REV: the `sessiond` release binary of git revision REV, built in a git
#     worktree of its own (target/bench-baseline/src, target dir target/bench-baseline/target;
#     the binary is kept as target/bench-baseline/sessiond-<commit> and reused), runs
#     `context --json` and `check` on every pi session in the same rounds as the current binary,
#     the two alternating (which goes first changes from round to round) so both see the same
#     machine state: per row the ratio now / before of the wall time (the median of the rounds'
#     own ratios) and of the peak RSS;
#   * Claude Code transcripts (`--claude`, sizes in MB, default 10,100; gen-session --format
#     claude-code): `sessiond check FILE` (open) and `sessiond context FILE --json` against the
#     floor of the same file, in the same rounds, and their peak RSS against the budget of
#     64 MB + 10% of the file; append→`session/didChange` on a scratch copy (Claude Code `user`
#     lines, as the pi sessions get pi entries), held to the pi session nearest in size
#     measured in the same run (target: at most 2× its median).
#   * the archive (`--archive-sessions N`, default 10,000; 0: skipped): a corpus of N generated
#     pi sessions of about 0.1 MB (gen-session, seed i; target/bench/archive-corpus-N, reused);
#     `sessiond archive` into a new archive (the first pass) against `tar -c | zstd -3` of the
#     same files (time and bytes), both single-threaded, alternating, --runs times; then 100
#     appended lines (one to each of 100 sessions) and the incremental pass against the first;
#     the archive's bytes against the data's. And what the per-file layout gives up, measured
#     with the zstd CLI on the same files (one frame per file, as the archive's chunks): a
#     shared dictionary trained on 300 of them (`zstd --train`, 110 KB, stored once) and
#     grouping (one `tar | zstd -3` per directory of 100 sessions).
#     `--only-archive` runs only these rows and prints them.
# --huge adds a 1 GB session (pi is skipped there unless --huge-pi: it needs several GB).
# --quick is a smaller run (1 and 10 MB, 20,000-entry sessions, a 10 MB Claude Code transcript,
# fewer rounds, no compaction) for trying a change; its tables go to stdout only unless --write is
# given too.
#
# Prints the markdown tables and writes docs/performance.md (the method, the machine and these
# tables; the file's hand-written part after its HAND_WRITTEN line is kept) and the headline
# rows between the README's `bench:headline` markers. Nobody edits those numbers by hand.
import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERFORMANCE = os.path.join(ROOT, "docs", "performance.md")
README = os.path.join(ROOT, "README.md")
# docs/performance.md: everything after this line is written by hand and kept as it is.
HAND_WRITTEN = "<!-- Written by hand below this line; scripts/bench-vs-pi.py keeps it. -->"
HEADLINE_BEGIN = "<!-- bench:headline (written by scripts/bench-vs-pi.py) -->"
HEADLINE_END = "<!-- /bench:headline -->"


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


def build(only_archive=False):
    extra = [] if only_archive else ["--example", "floor", "--example", "bench-daemon"]
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "sessiond", "--example", "gen-session", *extra],
                   cwd=ROOT, check=True)


def baseline_binary(rev):
    """The release `sessiond` of git revision `rev`, built in a worktree of its own under
    target/bench-baseline/ (its own target dir), or the one built before for that commit.
    Returns (commit, path)."""
    commit = git_out(["rev-parse", "--verify", "--quiet", rev + "^{commit}"])
    if not commit:
        sys.exit(f"bench: --baseline {rev}: no such commit")
    base = os.path.join(ROOT, "target", "bench-baseline")
    binary = os.path.join(base, f"sessiond-{commit}")
    if os.path.exists(binary):
        return commit, binary
    src = os.path.join(base, "src")
    if os.path.exists(os.path.join(src, ".git")):
        subprocess.run(["git", "-C", src, "checkout", "--quiet", "--detach", commit], check=True)
    else:
        os.makedirs(base, exist_ok=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
        subprocess.run(["git", "worktree", "add", "--quiet", "--detach", src, commit], cwd=ROOT, check=True)
    print(f"bench: building sessiond at {commit[:12]} in {os.path.relpath(src, ROOT)}", file=sys.stderr)
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(base, "target"))
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "sessiond"], cwd=src, env=env, check=True)
    shutil.copy2(os.path.join(base, "target", "release", "sessiond"), binary + ".tmp")
    os.replace(binary + ".tmp", binary)
    return commit, binary


def run_copies(pairs):
    """Fresh copies of binaries, written the same way, to run from: a binary's start-up time and
    peak RSS depend on how its file sits in the page cache (the same binary measured 2.4 MB more
    peak RSS as a fresh copy than as the linker wrote it), and a build with debug info differs
    from one without in its file only. Each copy loses its debug info (`strip --strip-debug`,
    when there is a strip) so that both are written by the same tool. Returns the copies' paths."""
    run_dir = os.path.join(ROOT, "target", "bench-baseline", "run")
    os.makedirs(run_dir, exist_ok=True)
    out = []
    for name, path in pairs:
        dst = os.path.join(run_dir, name)
        shutil.copyfile(path, dst)
        os.chmod(dst, 0o755)
        if shutil.which("strip"):
            subprocess.run(["strip", "--strip-debug", dst], check=True)
        out.append(dst)
    return out


def oracle_dir(arg):
    d = arg or os.environ.get("SESSIOND_ORACLE_DIR") or os.path.join(ROOT, ".oracle")
    if not os.path.exists(os.path.join(d, "oracle.mjs")):
        sys.exit(f"bench: no pi oracle at {d} (run scripts/test.sh once, or pass --oracle DIR)")
    return d


def median(xs):
    return statistics.median(xs) if xs else None


def quartiles(xs):
    """The first and third quartiles of xs (None for fewer than two)."""
    if len(xs) < 2:
        return None
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


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
    ap.add_argument("--baseline", metavar="REV",
                    help="also run the sessiond of git revision REV (built under target/bench-baseline/) on every "
                         "pi session, alternating with the current one in the same rounds: ratios now / before")
    ap.add_argument("--claude", default="10,100",
                    help="sizes in MB of the generated Claude Code transcripts (empty: none)")
    ap.add_argument("--archive-sessions", type=int, default=10_000,
                    help="sessions of the archive corpus (0: no archive rows)")
    ap.add_argument("--only-archive", action="store_true",
                    help="run only the archive rows and print them (writes nothing)")
    ap.add_argument("--quick", action="store_true",
                    help="a smaller run for trying a change: --sizes 1,10 --entries 20000 --chain 20000 --runs 1 "
                         "--rounds 3 --context-runs 20 --appends 50 --compact-runs 0 --claude 10 (options given "
                         "override these); writes no file unless --write")
    ap.add_argument("--write", action="store_true", help="write docs/performance.md and the README's headline "
                    "even after --quick")
    ap.add_argument("--no-write", action="store_true", help="print the tables only")
    argv = sys.argv[1:]
    args = ap.parse_args(argv)
    if args.quick:
        quick = dict(sizes="1,10", entries=20_000, chain=20_000, runs=1, rounds=3, context_runs=20, appends=50,
                     compact_runs=0, claude="10", archive_sessions=1000)
        given = {a.split("=", 1)[0].lstrip("-").replace("-", "_") for a in argv if a.startswith("--")}
        for k, v in quick.items():
            if k not in given:
                setattr(args, k, v)
    write = (args.write or not args.quick) and not args.no_write
    started = time.time()
    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    oracle = None if args.only_archive else oracle_dir(args.oracle)
    if not os.path.exists("/usr/bin/time"):
        sys.exit("bench: needs GNU time (apt-get install time)")
    commit = built_commit()
    build(only_archive=args.only_archive)
    baseline = baseline_binary(args.baseline) if args.baseline else None
    rel = os.path.join(target_dir(), "release")
    sessiond, gen, floor = os.path.join(rel, "sessiond"), os.path.join(rel, "examples", "gen-session"), os.path.join(rel, "examples", "floor")
    daemon = os.path.join(rel, "examples", "bench-daemon")
    if baseline:
        # The two binaries compared run from copies made alike; this build's copy serves the
        # other rows of the pi sessions too.
        sessiond_now, before = run_copies([("sessiond-now", sessiond), ("sessiond-before", baseline[1])])
        baseline = (baseline[0], before)
    else:
        sessiond_now = sessiond
    if args.only_archive:
        if not args.archive_sessions:
            sys.exit("bench: --only-archive needs --archive-sessions N")
        res = archive_bench(sessiond, gen, args.archive_sessions, args.runs,
                            os.path.join(ROOT, "target", "bench"))
        print(describe_machine(load_start, commit)["line"])
        print()
        print(archive_table(res)[0])
        return
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
        res = {k: [] for k in ("ctx", "pi", "open", "floor", "ctx_base", "open_base")}
        for r in range(max(args.rounds, args.runs)):
            # With a baseline, the two binaries alternate; which goes first changes every round.
            order = [("", sessiond_now)] + ([("_base", baseline[1])] if baseline else [])
            if r % 2:
                order.reverse()
            for suffix, binary in order:
                res["ctx" + suffix].append(run([binary, "context", path, "--json"]))
            if with_pi and r < args.runs:
                res["pi"].append(run(["node", os.path.join(oracle, "oracle.mjs"), "context", path]))
            for suffix, binary in order:
                res["open" + suffix].append(run([binary, "check", path]))
            res["floor"].append(run([floor, path]))
        med = {k: (median([t for t, _ in v]), max(m for _, m in v)) if v else None for k, v in res.items()}
        # A round's commands meet the same machine: the ratio to the floor is taken round by
        # round, so that a machine whose speed drifts between rounds does not move it.
        paired = {k: median([t / f for (t, _), (f, _) in zip(res[k], res["floor"])]) for k in ("ctx", "open")}
        # Now against before, round by round likewise (time); peak RSS: the medians.
        before = {k: dict(time=median([t / b for (t, _), (b, _) in zip(res[k], res[k + "_base"])]),
                          spread=quartiles([t / b for (t, _), (b, _) in zip(res[k], res[k + "_base"])]),
                          now_rss=median([m for _, m in res[k]]), base_rss=median([m for _, m in res[k + "_base"]]))
                  for k in ("ctx", "open") if res[k + "_base"]}
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
                         append=d_append, inproc=d_inproc, ctx=d_ctx, before=before, rounds=len(res["ctx"])))
    claude = []
    for mb in (int(x) for x in args.claude.split(",") if x):
        path = os.path.join(outdir, f"claude-{mb}mb.jsonl")
        if not os.path.exists(path):
            subprocess.run([gen, path, str(mb), "1", "--format", "claude-code"], check=True)
        res = {k: [] for k in ("ctx", "open", "floor")}
        for _ in range(args.rounds):
            res["ctx"].append(run([sessiond_now, "context", path, "--json"]))
            res["open"].append(run([sessiond_now, "check", path]))
            res["floor"].append(run([floor, path]))
        # Append → `didChange` on the transcript, in the same run as the pi sessions' rows.
        d_append = run_json([daemon, sessiond, "append", scratch_copy(path, "scratch-claude-append.jsonl"),
                             str(args.appends), str(args.runs)])
        os.remove(os.path.join(outdir, "scratch-claude-append.jsonl"))
        claude.append(dict(label=f"{mb} MB", size=os.path.getsize(path), mb=mb, res=res, append=d_append,
                           **claude_facts(sessiond, path)))
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
    archive_res = (archive_bench(sessiond, gen, args.archive_sessions, args.runs, outdir)
                   if args.archive_sessions else None)
    rows, headline = table_rows(cols)
    main_md = markdown(cols, rows)
    before_md, before_headline = before_table(cols, baseline) if baseline else ("", [])
    claude_md, claude_headline = claude_table(claude, cols) if claude else ("", [])
    comp_md, comp_headline = compaction_table(compactions) if compactions else ("", [])
    arch_md, arch_headline = archive_table(archive_res) if archive_res else ("", [])
    machine = describe_machine(load_start, commit)
    print(machine["line"])
    print()
    print(main_md)
    for md in (before_md, claude_md, comp_md, arch_md):
        if md:
            print()
            print(md)
    if write:
        run_info = dict(
            command="python3 scripts/bench-vs-pi.py" + "".join(" " + shlex.quote(a) for a in argv),
            minutes=(time.time() - started) / 60, args=args)
        write_performance(machine, run_info, main_md, [before_md, claude_md, comp_md, arch_md])
        wrote = "docs/performance.md"
        if write_headline(machine, run_info,
                          headline + before_headline + claude_headline + comp_headline + arch_headline):
            wrote += " and the headline rows of README.md"
        print(f"\nwrote {wrote}", file=sys.stderr)


def budget_mb(size):
    """The memory budget of issue 15: 64 MB + 10% of a file of `size` bytes (the script's MiB)."""
    return 64 + 0.10 * size / 1048576


def markdown(cols, rows):
    """One table: a column per session, then the target and the verdict of each row."""
    out = ["| measure | " + " | ".join(c["label"] for c in cols) + " | target | |",
           "|---|" + "---|" * len(cols) + "---|---|"]
    for name, cells, target, v in rows:
        out.append(f"| {name} | " + " | ".join(cells) + f" | {target} | {v} |")
    return "\n".join(out)


def fmt_ms(x):
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:.0f} ms"
    if x >= 1:
        return f"{x:.1f} ms"
    return f"{x * 1000:.0f} µs"


def table_rows(cols):
    """The main table's rows, and its headline: one (measure, result, target, verdict) per row
    that has a target, with only the sessions the verdict is about."""
    big = next((c for c in cols if c["mb"] == 100), None)
    huge = next((c for c in cols if c["mb"] >= 1024), None)
    many = next((c for c in cols if c["mb"] == 0), None)
    rows = []  # (measure, [cell per column], target, verdict)
    headline = []

    def row(name, cell, target="", verdict_of=(), head=None, head_cell=None):
        """verdict_of: (column, value, ok) triples the verdict is made of, in order; head and
        head_cell: the headline's name for the row and its cell (default: the table's)."""
        verdicts, results = [], []
        for c, f, ok in verdict_of:
            if c is None or f(c) is None:
                verdicts.append("not measured")
                continue
            verdicts.append(("met" if ok(f(c)) else "**missed**") + (f" ({c['label']})" if len(verdict_of) > 1 else ""))
            results.append(f"{(head_cell or cell)(c)} ({c['label']})")
        verdict = "; ".join(verdicts)
        rows.append((name, [cell(c) for c in cols], target, verdict))
        if target:
            headline.append((head or name, "; ".join(results) or "—", target, verdict))

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

    small = [c for c in cols if c["mb"] == 0]
    row("speed-up (pi time / sessiond time)", lambda c: f"{speed(c):.1f}×" if speed(c) else "—",
        "≥ 10× on 100 MB", [(big, speed, lambda x: x >= 10)], "`context --json`: pi's time / sessiond's")
    row("peak RSS: sessiond", lambda c: f"{m(c, 'ctx', 1):.1f} MB")
    row("peak RSS: pi", lambda c: f"{m(c, 'pi', 1):.0f} MB" if c["med"]["pi"] else "—")
    row("RSS ratio (sessiond / pi)", lambda c: f"{rss_ratio(c):.3f}" if rss_ratio(c) else "—",
        "≤ 0.25 on 100 MB; ≤ 0.15 on small entries",
        [(big, rss_ratio, lambda x: x <= 0.25)] + [(c, rss_ratio, lambda x: x <= 0.15) for c in small],
        "`context --json`: peak RSS, sessiond / pi")

    def cf(c):
        return c["paired"]["ctx"]

    def of(c):
        return c["paired"]["open"]

    row("open (`check`)", lambda c: fmt_ms(m(c, "open", 0) * 1000))
    row("floor (read + validate JSON)", lambda c: fmt_ms(m(c, "floor", 0) * 1000))
    sized = [c for c in cols if c["mb"] > 0]
    worst = max(sized, key=of) if sized else None
    row("open / floor", lambda c: f"{of(c):.2f}", "≤ 1.5",
        [(worst, of, lambda x: x <= 1.5)] + [(c, of, lambda x: x <= 1.5) for c in small],
        "open (`check`) / floor (the slowest byte-sized session; the small-entry ones)")
    row("`context --json` / floor", lambda c: f"{cf(c):.2f}", "≤ 2 on small entries",
        [(c, cf, lambda x: x <= 2) for c in small])
    row("daemon `session/open`", lambda c: fmt_ms(median(c["open"]["openMs"])))
    row("daemon VmRSS after open", lambda c: f"{c['open']['rssMb']:.0f} MB")

    row("daemon RSS budget (64 MB + 10% of file)", lambda c: f"{budget_mb(c['size']):.0f} MB",
        "RSS ≤ budget on 1 GB", [(huge, lambda c: c["open"]["rssMb"] / budget_mb(c['size']), lambda x: x <= 1)],
        "daemon VmRSS after `session/open` / budget (64 MB + 10% of the file)",
        lambda c: f"{c['open']['rssMb']:.0f} MB / {budget_mb(c['size']):.0f} MB")
    row("messages in the context at the resume leaf", lambda c: f"{c['open']['messageCount']:,}")
    row("`contextAt` full, median / p99",
        lambda c: f"{fmt_ms(median(c['open']['contextFullMs']))} / {fmt_ms(p99(c['open']['contextFullMs']))}",
        "p99 ≤ 25 ms on 1 GB", [(huge, lambda c: p99(c["open"]["contextFullMs"]), lambda x: x <= 25)],
        "`session/contextAt` full messages at the resume leaf, median / p99")
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
        slowest = max(cols, key=lambda c, key=key: median(c["open"].get(key) or [0]), default=None)
        row(name,
            lambda c, key=key: f"{fmt_ms(median(c['open'].get(key, [])))} / {fmt_ms(p99(c['open'].get(key, [])))}",
            "median ≤ 0.1 ms", [(slowest, lambda c, key=key: median(c["open"].get(key) or []), lambda x: x <= 0.1)],
            name.replace(", median / p99", ", median / p99 (the slowest session)"))
    row("floor: the same answers from a peer that does nothing else, alternating, median / p99",
        lambda c: f"{fmt_ms(median(c['open'].get('entryFloorMs', [])))} / {fmt_ms(p99(c['open'].get('entryFloorMs', [])))}")

    def a(c, k, f=median):
        return f(c["append"][k]) if c["append"] else None

    def i(c, k):
        return median(c["inproc"][k]) if c["inproc"] else None

    row("append → `didChange`, median / p99",
        lambda c: f"{fmt_ms(a(c, 'didChangeMs'))} / {fmt_ms(a(c, 'didChangeMs', p99))}" if c["append"] else "—",
        "median < 20 ms",
        [(max((c for c in cols if c["append"]), key=lambda c: a(c, "didChangeMs"), default=None),
          lambda c: a(c, "didChangeMs"), lambda x: x < 20)],
        "append → `session/didChange`, median / p99 (the slowest session)")
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
        "≥ 1,000× at 100k entries", [(many, p_ratio, lambda x: x >= 1000)],
        "one appended entry: reopening / applying it (in-process)")
    return rows, headline


def claude_facts(sessiond, path):
    """What a Claude Code transcript holds, from sessiond's own answers (outside the timings)."""
    check = run_json([sessiond, "check", path, "--json"])
    doc = run_json([sessiond, "context", path, "--json"])
    with open(path, "rb") as f:
        lines = sum(1 for _ in f)
    return dict(lines=lines, entries=check["entryCount"], leaves=check["leafCount"],
                messages=len(doc["messages"]))


# A pi row is "not slower" when now / before (the median of the rounds' own ratios) is at most
# this. The middle half of the rounds' ratios is shown beside it: on a shared machine it can be
# wider than that (one binary against a copy of itself, 11 rounds at a load of 5 on 2 cores:
# medians from 0.92 to 1.12).
NOT_SLOWER = 1.05


def before_table(cols, baseline):
    """The pi sessions, the current binary against the baseline's, in the same rounds. Returns
    the markdown and the headline rows."""
    commit = baseline[0][:12]
    cols = [c for c in cols if c["before"]]
    rows, headline = [], []

    def m(c, k, i=0):
        v = c["med"][k]
        return v[i] if v else None

    for key, what in (("ctx", "`context --json`"), ("open", "open (`check`)")):
        def ratio(c, f, key=key):
            return c["before"][key][f]

        slower = [c for c in cols if ratio(c, "time") > NOT_SLOWER]

        def verdict(bad):
            return "met" if not bad else "**missed** (" + ", ".join(c["label"] for c in bad) + ")"

        rows += [
            (f"{what}: now / before", [f"{fmt_ms(m(c, key) * 1000)} / {fmt_ms(m(c, key + '_base') * 1000)}" for c in cols],
             "", ""),
            (f"{what}: time, now / before (the rounds' middle half)",
             [f"{ratio(c, 'time'):.2f}" + (" ({:.2f}–{:.2f})".format(*c["before"][key]["spread"])
                                           if c["before"][key]["spread"] else "") for c in cols],
             f"≤ {NOT_SLOWER}", verdict(slower)),
            (f"{what}: peak RSS, now / before (the difference)",
             [f"{c['before'][key]['now_rss']:.1f} MB / {c['before'][key]['base_rss']:.1f} MB "
              f"({c['before'][key]['now_rss'] - c['before'][key]['base_rss']:+.1f} MB)" for c in cols], "", ""),
        ]
        worst = max(cols, key=lambda c: ratio(c, "time"))
        headline.append((f"pi sessions, {what}: time now / before the dialect seam ({commit}), the largest ratio",
                         f"{ratio(worst, 'time'):.2f} ({worst['label']})", f"≤ {NOT_SLOWER}", verdict(slower)))
    md = (f"The pi sessions before and after: this build (now) and the build of commit {commit} (before), "
          f"alternating in the same {cols[0]['rounds']} rounds (times: medians, and the median of the rounds' own "
          "ratios; peak RSS: medians):\n\n" + markdown(cols, rows))
    return md, headline


def claude_table(cols, pi_cols):
    """Claude Code transcripts: open and `context --json` against the floor, peak RSS against
    the budget, append → `didChange` against a pi session's measured in the same run (the pi
    session of the same size, else the nearest in size). Returns the markdown and the headline
    rows."""
    def med(c, k, i=0):
        return median([x[i] for x in c["res"][k]])

    def to_floor(c, k):
        return median([t / f for (t, _), (f, _) in zip(c["res"][k], c["res"]["floor"])])

    def peak(c, k):
        return max(m for _, m in c["res"][k])

    def rss_ratio(c):
        return max(peak(c, "ctx"), peak(c, "open")) / budget_mb(c["size"])

    def verdict(f, ok):
        return "; ".join(("met" if ok(f(c)) else "**missed**") + f" ({c['label']})" for c in cols)

    def change(c, f=median):
        return f(c["append"]["didChangeMs"])

    def pi_peer(c):
        """The pi session whose append → `didChange` this transcript's is held to."""
        measured = [p for p in pi_cols if p.get("append")]
        return min(measured, key=lambda p: abs(p["size"] - c["size"]), default=None)

    def to_pi(c):
        p = pi_peer(c)
        return change(c) / median(p["append"]["didChangeMs"]) if p else None

    def pi_cell(c):
        p = pi_peer(c)
        if not p:
            return "—"
        return f"{fmt_ms(median(p['append']['didChangeMs']))} / {fmt_ms(p99(p['append']['didChangeMs']))} (pi {p['label']})"

    rows = [
        ("file size", [f"{c['size'] / 1048576:.0f} MB" for c in cols], "", ""),
        ("lines / tree lines / leaves", [f"{c['lines']:,} / {c['entries']:,} / {c['leaves']:,}" for c in cols], "", ""),
        ("messages in the context at the resume leaf", [f"{c['messages']:,}" for c in cols], "", ""),
        ("`context --json`", [fmt_ms(med(c, "ctx") * 1000) for c in cols], "", ""),
        ("open (`check`)", [fmt_ms(med(c, "open") * 1000) for c in cols], "", ""),
        ("floor (read + validate JSON)", [fmt_ms(med(c, "floor") * 1000) for c in cols], "", ""),
        ("open / floor", [f"{to_floor(c, 'open'):.2f}" for c in cols], "≤ 2",
         verdict(lambda c: to_floor(c, "open"), lambda x: x <= 2)),
        ("`context --json` / floor", [f"{to_floor(c, 'ctx'):.2f}" for c in cols], "≤ 2",
         verdict(lambda c: to_floor(c, "ctx"), lambda x: x <= 2)),
        ("peak RSS: `context --json` / open", [f"{peak(c, 'ctx'):.1f} MB / {peak(c, 'open'):.1f} MB" for c in cols], "", ""),
        ("budget (64 MB + 10% of file)", [f"{budget_mb(c['size']):.0f} MB" for c in cols], "", ""),
        ("peak RSS / budget (the larger of the two)", [f"{rss_ratio(c):.2f}" for c in cols], "≤ 1",
         verdict(rss_ratio, lambda x: x <= 1)),
        ("append → `didChange`, median / p99", [f"{fmt_ms(change(c))} / {fmt_ms(change(c, p99))}" for c in cols],
         "", ""),
        ("a pi session's, same run, median / p99", [pi_cell(c) for c in cols], "", ""),
        ("append → `didChange`: transcript / pi session (medians)",
         [f"{to_pi(c):.2f}" if to_pi(c) else "—" for c in cols], "≤ 2",
         verdict(lambda c: to_pi(c) or 0, lambda x: x <= 2)),
    ]
    md = (f"Claude Code transcripts (generated; medians of {len(cols[0]['res']['floor'])} rounds, peak RSS the "
          "largest of them):\n\n" + markdown(cols, rows))
    headline = [
        ("Claude Code transcript: open (`check`) / floor",
         "; ".join(f"{to_floor(c, 'open'):.2f} ({c['label']})" for c in cols), "≤ 2",
         verdict(lambda c: to_floor(c, "open"), lambda x: x <= 2)),
        ("Claude Code transcript: `context --json` / floor",
         "; ".join(f"{to_floor(c, 'ctx'):.2f} ({c['label']})" for c in cols), "≤ 2",
         verdict(lambda c: to_floor(c, "ctx"), lambda x: x <= 2)),
        ("Claude Code transcript: append → `didChange` / a pi session's (medians, same run)",
         "; ".join(f"{change(c):.1f} ms / {median(pi_peer(c)['append']['didChangeMs']):.1f} ms = {to_pi(c):.2f} "
                   f"({c['label']})" for c in cols if pi_peer(c)) or "—", "≤ 2",
         verdict(lambda c: to_pi(c) or 0, lambda x: x <= 2)),
        ("Claude Code transcript: peak RSS / budget (64 MB + 10% of the file)",
         "; ".join(f"{rss_ratio(c):.2f} ({c['label']})" for c in cols), "≤ 1", verdict(rss_ratio, lambda x: x <= 1)),
    ]
    return md, headline


def compaction_table(cols):
    """Compaction's memory: `sessiond compact --dry-run` vs pi's prepareCompaction, medians.
    Returns the markdown and the headline row."""
    def med(c, k, i):
        return median([x[i] for x in c[k]])

    def ratio(c):
        return med(c, 'ours', 1) / budget_mb(c['size'])

    verdict = "; ".join(("met" if ratio(c) <= 1 else "**missed**") + f" ({c['label']})" for c in cols)
    rows = [
        ("file size", lambda c: f"{c['size'] / 1048576:.0f} MB", ""),
        ("peak RSS: sessiond `compact --dry-run`", lambda c: f"{med(c, 'ours', 1):.1f} MB", ""),
        ("peak RSS: pi `prepareCompaction`", lambda c: f"{med(c, 'theirs', 1):.0f} MB", ""),
        ("budget (64 MB + 10% of file)", lambda c: f"{budget_mb(c['size']):.1f} MB", ""),
        ("sessiond / budget", lambda c: f"{ratio(c):.2f}", verdict),
        ("wall time: sessiond (plan, embedded summary, retention check) / pi (plan only)", lambda c: f"{fmt_ms(med(c, 'ours', 0) * 1000)} / {fmt_ms(med(c, 'theirs', 0) * 1000)}", ""),
    ]
    runs = len(cols[0]["ours"])
    md = (f"Compaction, pi's default keepRecentTokens (medians of {runs} runs each, alternating):\n\n"
          + markdown(cols, [(name, [cell(c) for c in cols], "peak RSS ≤ budget" if v else "", v)
                            for name, cell, v in rows]))
    headline = [("`compact --dry-run`: peak RSS / budget",
                 "; ".join(f"{ratio(c):.2f} ({c['label']})" for c in cols), "≤ 1", verdict)]
    return md, headline


def git_out(cmd):
    try:
        return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def built_commit():
    """The commit the binaries are built from (taken before the build: others may commit
    while the run goes on), and whether the measured code had changes of its own."""
    commit = git_out(["rev-parse", "--short=12", "HEAD"]) or "unknown"
    if git_out(["status", "--porcelain", "--untracked-files=no", "--", "src", "benches", "Cargo.toml",
                "Cargo.lock", "scripts/*.rs"]):
        commit += " with uncommitted changes"
    return commit


def describe_machine(load_start, commit):
    """The machine and the build the run measured."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            kb = next(int(l.split()[1]) for l in f if l.startswith("MemTotal:"))
            mem = f"{kb / 1048576:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    load_end = os.getloadavg() if hasattr(os, "getloadavg") else None

    def out(cmd):
        try:
            return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""

    fmt_load = (lambda l: " / ".join(f"{x:.1f}" for x in l) if l else "unknown")
    d = dict(cpu=cpu, cores=os.cpu_count(), system=f"{platform.system()} {platform.release()}", memory=mem or "unknown",
             load_start=fmt_load(load_start), load_end=fmt_load(load_end), commit=commit,
             rustc=out(["rustc", "--version"]) or "unknown", node=out(["node", "--version"]) or "unknown",
             date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    d["line"] = (f"machine: {d['cpu']}, {d['cores']} cores, {d['system']}, load average (1/5/15 min) "
                 f"{d['load_start']} at the start and {d['load_end']} at the end; commit {d['commit']}")
    return d


METHOD = """\
Each session is generated by `cargo run --release --example gen-session` (deterministic) under
`target/bench/`: sessions of 1, 10 and 100 MB (and 1 GB with `--huge`) whose entries are tens of
KB like real ones; `100k entries`, about 100,000 small entries with branches (the long-path
case); `100k chain`, one chain of 100,000 user / tool-call / tool-result turns whose whole path
is the context. Times are wall time, peak RSS is GNU time's maximum resident set (`MB` here is
MiB). Nothing is asserted: a row with a target says whether this run met it.

Rows of the first table, and what each is compared with:

* `context --json`: sessiond's answer of what the model sees at the resume leaf, printed as
  one JSON document, against **pi 1.6.0's own code** doing the same (its `loadEntriesFromFile`
  and `buildSessionContext`, run by the oracle in `.oracle/`): wall time, peak RSS, and the
  ratios of the two.
* open (`check`): read the file, validate every line, build the tree; against **the floor**, a
  program that reads the file and validates every line into serde's `IgnoredAny` (the least
  any correct reader must do; `scripts/floor.rs`). `context --json`, `check` and the floor run
  one after another in each round; each ratio to the floor is the median of the rounds' own
  ratios, so a machine whose speed drifts between rounds moves all three alike.
* daemon rows (`scripts/bench_daemon.rs`, a client speaking JSON-RPC to `sessiond serve` over
  its pipes, on one thread): time to `session/open`; VmRSS after it, against the **budget** of
  64 MB + 10% of the file; `session/contextAt` at the resume leaf (the longest path) with full
  messages and with `fields: "ids"` (the first full request after open, which counts the
  context's token estimate, shown apart; the client's parse of the answer is inside the time);
  the same full request through the library in one process (the owner's work without the
  transport).
* `session/entry` round trip: one small request at a time, 1,000 after open and 1,000 right
  after the `contextAt` requests; each is followed by the same request to **a peer that answers
  with the same result and does nothing else** (the floor of a round trip on this machine: the
  same client, the same kind of pipes), shown in the row below it.
* append → `didChange`: an entry appended as pi appends (open, one `write`, close) until the
  daemon's `session/didChange` arrives (default debounce), then `contextAt` ids at the new leaf.
* reopen / apply: one appended entry answered by `contextAt {leafId: new, fields: "ids"}`
  against **reopening the file** (`session/close` + `session/open`); through the daemon (the
  round trip included), and in-process (`Session::refresh` against `Session::open`: the work
  alone).

With `--baseline REV`, the pi sessions' `context --json` and `check` also run with the release
binary of an earlier commit (built by the script in a git worktree of its own under
`target/bench-baseline/`), alternating with this build in the same rounds, the order swapped
every round, so both meet the same machine: per session the ratio now / before of the wall time
(the median of the rounds' own ratios, with the middle half of them), and the peak RSS of each
(medians). A time ratio up to 1.05 counts as not slower; under load the rounds spread wider than
that (one binary against a copy of itself, 11 rounds at a load average of 5 on 2 cores: medians
from 0.92 to 1.12), so read the middle half beside each ratio. Both binaries run from fresh
copies written alike (`strip --strip-debug`): how a binary's file sits in the page cache moves
its start-up time and its peak RSS (the same binary measured 2.4 MB more as a fresh copy than
as the linker wrote it), and the earlier commit's release build kept debug info.

The Claude Code table reads transcripts made by `gen-session --format claude-code`
(`scripts/gen_claude.rs`, deterministic), of 10 and 100 MB: prompts with bookkeeping lines
(`queue-operation`, `file-history-snapshot`, `last-prompt`, `mode`), responses written one line
per content block sharing `message.id` (thinking, text, `tool_use`, some parallel calls), Bash /
Read / Grep / Edit results of a few hundred bytes to about 100 KB with their `toolUseResult`
copies and now and then an image, attachments (agent and skill listings, todo and task
reminders), a rewind branch every 50 prompts, and one manual `/compact` at a tenth of the file
whose boundary preserves the last answer. The context at the resume leaf (the leaf
`claude --resume` continues from) is everything after that boundary: nine tenths of the file,
the demanding case (a real session compacts again long before). Both files are over 5 MiB, so
they are read with Claude Code's pruning of large files (docs/claude-code.md §7.1), as sessiond
implements it. `check` (open) and `context --json` run against the same floor as pi's sessions,
one after another in each round, and their peak RSS against the budget of 64 MB + 10% of the
file.

The compaction table runs `sessiond compact --dry-run` (the plan, the embedded summary and the
retention check; nothing written) against **pi's `prepareCompaction`** (the plan only, so the
wall times are not the same work) on two sessions of about 200 MB: the generator's (a short
path since its last compaction) and one chain of 400,000 entries. Its target is peak RSS within
the budget of 64 MB + 10% of the file.
"""


def tree_bytes(d):
    """Bytes of every file below d (apparent sizes)."""
    total = 0
    for base, _, files in os.walk(d):
        for f in files:
            total += os.path.getsize(os.path.join(base, f))
    return total


def timed_shell(script, **env):
    """Runs a bash script (stdout discarded); returns its wall time in seconds."""
    start = time.perf_counter()
    p = subprocess.run(["bash", "-c", script], env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    if p.returncode != 0:
        sys.exit(f"bench: command failed: {script}")
    return time.perf_counter() - start


def archive_bench(sessiond, gen, n, runs, outdir):
    """The archive rows' measures (see the head of this file)."""
    corpus = os.path.join(outdir, f"archive-corpus-{n}")
    have = sum(len(fs) for _, _, fs in os.walk(corpus)) if os.path.isdir(corpus) else 0
    if have < n:
        print(f"bench: generating {n} sessions of 0.1 MB in {corpus}", file=sys.stderr)
        for i in range(1, n + 1):
            d = os.path.join(corpus, str(i % 100))
            os.makedirs(d, exist_ok=True)
            out = os.path.join(d, f"s{i}.jsonl")
            if not os.path.exists(out):
                subprocess.run([gen, out, "0.1", str(i)], check=True, stdout=subprocess.DEVNULL)
    data = tree_bytes(corpus)
    work = os.path.join(outdir, "archive-work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    archive, tarball = os.path.join(work, "archive"), os.path.join(work, "corpus.tar.zst")
    first, tar = [], []
    for r in range(max(1, runs)):
        order = ["archive", "tar"] if r % 2 == 0 else ["tar", "archive"]
        for which in order:
            if which == "archive":
                shutil.rmtree(archive, ignore_errors=True)
                first.append(run([sessiond, "archive", "--root", corpus, "--to", archive, "--json"]))
            else:
                tar.append((timed_shell('tar -cf - -C "$C" . | zstd -3 -q -T1 -o "$O" -f', C=corpus, O=tarball), 0))
    archive_size, tar_size = tree_bytes(archive), os.path.getsize(tarball)
    chunks = tree_bytes(os.path.join(archive, "sessions")) - sum(
        os.path.getsize(os.path.join(b, f)) for b, _, fs in os.walk(os.path.join(archive, "sessions"))
        for f in fs if f == "manifest.json")
    # 100 appends, one line each to 100 sessions, then the incremental pass.
    files = sorted(os.path.join(b, f) for b, _, fs in os.walk(corpus) for f in fs)
    step = max(1, len(files) // 100)
    incremental = []
    appended = files[::step][:100]
    sizes = {f: os.path.getsize(f) for f in appended}
    for r in range(max(1, runs)):
        for f in appended:
            with open(f, "a", encoding="utf-8") as h:
                h.write(json.dumps({"type": "custom", "customType": "bench-archive", "data": {"round": r}}) + "\n")
        incremental.append(run([sessiond, "archive", "--root", corpus, "--to", archive, "--json"]))
    for f, size in sizes.items():  # the corpus as generated, for the next run
        os.truncate(f, size)
    # What the per-file layout gives up, with the zstd CLI on the same files.
    per_file, dicted, grouped = (os.path.join(work, x) for x in ("per-file", "dict", "grouped"))
    t_per_file = timed_shell('zstd -3 -q -T1 -r "$C" --output-dir-mirror "$O"', C=corpus, O=per_file)
    sample = files[:: max(1, len(files) // 300)][:300]
    dictionary = os.path.join(work, "sessions.dict")
    start = time.perf_counter()
    subprocess.run(["zstd", "--train", "-q", "-o", dictionary, *sample], check=True, stdout=subprocess.DEVNULL)
    t_train = time.perf_counter() - start
    t_dict = timed_shell('zstd -3 -q -T1 -D "$D" -r "$C" --output-dir-mirror "$O"', D=dictionary, C=corpus, O=dicted)
    os.makedirs(grouped)
    t_grouped = timed_shell('for d in "$C"/*/; do n=$(basename "$d"); tar -cf - -C "$d" . | zstd -3 -q -T1 -o "$O/$n.tar.zst"; done',
                            C=corpus, O=grouped)
    # Sessions archived as they grow: each of `grow_n` sessions written in ten steps (cut at
    # line ends), a pass after each, so every version holds ten chunks, as under a daemon that
    # archives a live session; and the same pieces compressed one by one with the zstd CLI,
    # without and with the dictionary.
    grow_n = min(1000, len(files))
    growing, grown_archive, pieces = (os.path.join(work, x) for x in ("growing", "grown-archive", "pieces"))
    os.makedirs(pieces)
    steps = 10
    contents = [open(f, "rb").read() for f in files[:grow_n]]
    cuts = []
    for c in contents:
        ends = [0]
        for k in range(1, steps):
            i = c.find(b"\n", len(c) * k // steps)
            ends.append(len(c) if i < 0 else i + 1)
        ends.append(len(c))
        cuts.append(ends)
    t_grow = 0.0
    for k in range(steps):
        for j, (c, ends) in enumerate(zip(contents, cuts)):
            piece = c[ends[k]:ends[k + 1]]
            d = os.path.join(growing, str(j % 100))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"g{j}.jsonl"), "ab") as h:
                h.write(piece)
            with open(os.path.join(pieces, f"g{j}.{k}"), "wb") as h:
                h.write(piece)
        t_grow += run([sessiond, "archive", "--root", growing, "--to", grown_archive, "--json"])[0]
    grown_tar = os.path.join(work, "grown.tar.zst")
    timed_shell('tar -cf - -C "$C" . | zstd -3 -q -T1 -o "$O" -f', C=growing, O=grown_tar)

    def frames(src, tag):
        """Bytes of src's files compressed one by one: without, and with the dictionary."""
        plain, dicted = os.path.join(work, tag + "-plain"), os.path.join(work, tag + "-dict")
        timed_shell('zstd -3 -q -T1 -r "$C" --output-dir-mirror "$O"', C=src, O=plain)
        timed_shell('zstd -3 -q -T1 -D "$D" -r "$C" --output-dir-mirror "$O"', D=dictionary, C=src, O=dicted)
        return tree_bytes(plain), tree_bytes(dicted) + os.path.getsize(dictionary)

    # The same contents in pieces of a hundredth (a few KB: a daemon's chunk of one burst).
    small = os.path.join(work, "small-pieces")
    os.makedirs(small)
    for j, c in enumerate(contents):
        at = 0
        for k in range(1, 101):
            i = c.find(b"\n", len(c) * k // 100) if k < 100 else -1
            end = len(c) if i < 0 else i + 1
            if end > at:
                with open(os.path.join(small, f"g{j}.{k}"), "wb") as h:
                    h.write(c[at:end])
            at = end
    grown = dict(n=grow_n, steps=steps, time=t_grow, archive=tree_bytes(grown_archive),
                 tar=os.path.getsize(grown_tar), tenth=frames(pieces, "tenth"), hundredth=frames(small, "hundredth"))
    res = dict(n=len(files), data=data, grown=grown, first=first, tar=tar, archive_size=archive_size, chunks=chunks,
               tar_size=tar_size, incremental=incremental,
               per_file=(t_per_file, tree_bytes(per_file)),
               dict=(t_train + t_dict, tree_bytes(dicted) + os.path.getsize(dictionary), os.path.getsize(dictionary)),
               grouped=(t_grouped, tree_bytes(grouped)))
    shutil.rmtree(work, ignore_errors=True)
    return res


def archive_table(a):
    """The archive's rows: markdown and headline rows."""
    t_first, t_tar = median([t for t, _ in a["first"]]), median([t for t, _ in a["tar"]])
    t_inc = median([t for t, _ in a["incremental"]])
    time_ratio, size_ratio, inc_ratio = t_first / t_tar, a["archive_size"] / a["tar_size"], t_inc / t_first
    mb = lambda b: f"{b / 1048576:.1f} MB"
    met = lambda ok: "met" if ok else "**missed**"
    rows = [
        ("data", f"{a['n']:,} sessions, {mb(a['data'])}", "", ""),
        ("first pass: `sessiond archive` / `tar -c \\| zstd -3`, wall time",
         f"{t_first:.1f} s / {t_tar:.1f} s = {time_ratio:.2f}×", "≤ 1.5×", met(time_ratio <= 1.5)),
        ("archive bytes / `tar -c \\| zstd -3` bytes",
         f"{mb(a['archive_size'])} / {mb(a['tar_size'])} = {size_ratio:.2f}×", "≤ 1.1×", met(size_ratio <= 1.1)),
        ("… of which chunks (manifests are the rest)", mb(a["chunks"]), "", ""),
        ("archive bytes / data bytes", f"{a['archive_size'] / a['data']:.3f}", "", ""),
        ("peak RSS of the first pass", f"{max(m for _, m in a['first']):.0f} MB", "", ""),
        ("incremental pass after 100 appends / first pass, wall time",
         f"{t_inc * 1000:.0f} ms / {t_first:.1f} s = {inc_ratio * 100:.1f}%", "≤ 2%", met(inc_ratio <= 0.02)),
        ("experiment, zstd CLI: one frame per file, no dictionary (the chunks' layout)",
         f"{mb(a['per_file'][1])} = {a['per_file'][1] / a['tar_size']:.2f}× tar, {a['per_file'][0]:.1f} s", "", ""),
        ("experiment: one frame per file with a shared dictionary (trained on 300 files; size included)",
         f"{mb(a['dict'][1])} = {a['dict'][1] / a['tar_size']:.2f}× tar (dictionary {a['dict'][2] // 1024} KB), "
         f"{a['dict'][0]:.1f} s with training", "", ""),
        ("experiment: grouped, one `tar \\| zstd -3` per directory of 100 sessions",
         f"{mb(a['grouped'][1])} = {a['grouped'][1] / a['tar_size']:.2f}× tar, {a['grouped'][0]:.1f} s", "", ""),
    ]
    g = a["grown"]
    rows += [
        (f"experiment: {g['n']:,} sessions archived as they grow ({g['steps']} passes, {g['steps']} chunks each) / "
         "`tar -c \\| zstd -3` of the result",
         f"{mb(g['archive'])} / {mb(g['tar'])} = {g['archive'] / g['tar']:.2f}× ({g['time']:.1f} s of passes)", "", ""),
        ("experiment: those tenths as zstd frames one by one, without / with the dictionary (its size included)",
         f"{g['tenth'][0] / g['tar']:.2f}× / {g['tenth'][1] / g['tar']:.2f}× tar", "", ""),
        ("experiment: the same sessions in hundredths (a few KB each), without / with the dictionary",
         f"{g['hundredth'][0] / g['tar']:.2f}× / {g['hundredth'][1] / g['tar']:.2f}× tar", "", ""),
    ]
    runs = len(a["first"])
    md = (f"The archive (medians of {runs} run(s); the first pass and tar alternate; zstd single-threaded):\n\n"
          "| measure | this run | target | |\n|---|---|---|---|\n"
          + "\n".join(f"| {n} | {r} | {t} | {v} |" for n, r, t, v in rows))
    headline = [r for r in rows if r[2]]
    return md, headline


def write_performance(machine, run_info, main_md, tables):
    """docs/performance.md: the method, the machine, the tables; the hand-written part kept."""
    kept = ""
    try:
        with open(PERFORMANCE, encoding="utf-8") as f:
            text = f.read()
        if HAND_WRITTEN in text:
            kept = text[text.index(HAND_WRITTEN) + len(HAND_WRITTEN):].lstrip("\n")
    except FileNotFoundError:
        pass
    a = run_info["args"]
    parts = [
        "# Performance",
        "",
        "Written by `scripts/bench-vs-pi.py` (the benchmark command); do not edit the numbers by hand,",
        "run it again. Speed and memory are measured here, never asserted in tests. Earlier runs are in",
        "this file's git history.",
        "",
        "```sh",
        "python3 scripts/bench-vs-pi.py --huge     # the full run; needs pi's oracle (.oracle/, made by",
        "                                          # scripts/test.sh) and GNU time",
        "python3 scripts/bench-vs-pi.py --quick    # a smaller run for trying a change (prints only)",
        "python3 scripts/bench-vs-pi.py --baseline REV   # also the pi rows of commit REV, same rounds",
        "cargo build --profile profiling           # target/profiling/sessiond: release with line tables",
        "```",
        "",
        "## Method",
        "",
        METHOD.rstrip(),
        "",
    ]
    if a.quick:
        parts += [
            "This run is a `--quick` one, smaller than the full run: "
            f"the pi sessions of {a.sizes.replace(',', ', ')} MB and of {a.entries:,} entries and a {a.chain:,}-entry "
            f"chain, {max(a.rounds, a.runs)} rounds, {a.runs} run(s) of pi and of the daemon's measures, no "
            "compaction table; the options the command names override these.",
            "",
        ]
    parts += [
        "## The latest run",
        "",
        f"`{run_info['command']}` on {machine['date']}, "
        f"{'%.0f minutes' % run_info['minutes'] if run_info['minutes'] >= 1 else 'under a minute'}, "
        f"built from commit {machine['commit']}.",
        "",
        "| machine | |",
        "|---|---|",
        f"| CPU | {machine['cpu']} |",
        f"| cores (`nproc`) | {machine['cores']} |",
        f"| memory | {machine['memory']} |",
        f"| system | {machine['system']} |",
        f"| load average (1, 5, 15 min), at the start | {machine['load_start']} |",
        f"| load average, at the end | {machine['load_end']} |",
        f"| toolchain | {machine['rustc']}; Node {machine['node']} for pi |",
        "",
        f"`context --json`, `check` and the floor: medians of {max(a.rounds, a.runs)} rounds; pi: the first "
        f"{a.runs} of them; the daemon's measures: medians of {a.runs} runs ({a.context_runs} `contextAt` "
        f"requests per kind, 10 on 1 GB; {a.appends} appends).",
        "",
        main_md,
    ]
    for md in tables:
        if md:
            parts += ["", md]
    parts += ["", HAND_WRITTEN, "", kept.rstrip() if kept else "## What was tried and not kept", ""]
    with open(PERFORMANCE, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))


def write_headline(machine, run_info, headline):
    """The README's short table: the rows that have a target, between the headline markers.
    Returns whether the README had them."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    if HEADLINE_BEGIN not in text or HEADLINE_END not in text:
        print("bench: no headline markers in README.md; left it as it is", file=sys.stderr)
        return False
    lines = [HEADLINE_BEGIN,
             f"{machine['cores']} cores ({machine['cpu']}), load average {machine['load_end'].split(' / ')[0]} at "
             f"the end, {machine['date'][:10]}, `{run_info['command'].replace('python3 ', '')}`:",
             "",
             "| measure | this run | target | |",
             "|---|---|---|---|"]
    lines += [f"| {name} | {result} | {target} | {verdict} |" for name, result, target, verdict in headline]
    lines.append(HEADLINE_END)
    head, rest = text.split(HEADLINE_BEGIN, 1)
    _, tail = rest.split(HEADLINE_END, 1)
    with open(README, "w", encoding="utf-8") as f:
        f.write(head + "\n".join(lines) + tail)
    return True



if __name__ == "__main__":
    main()
