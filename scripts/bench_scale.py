#!/usr/bin/env python3
# Scale on a heavy user's machine (issue 48): many sessions at once, every figure a ratio to a
# floor or a peer measured in the same run.
#
#   python3 scripts/bench_scale.py [--sessions 10000] [--rounds 3] [--queries 50] [--write]
#
# The corpus is generated deterministically (`gen-session DIR 0 SEED --corpus N`, under
# target/bench/corpus-N/sessions/: 50 project directories, median 66 KB, 15 of every 10,000
# sessions of 5 to 50 MB; about 1.25 GB for 10,000). Then, in the same run:
#   * the floor: serde_json into IgnoredAny over every line of every file, one thread
#     (`floor DIR`);
#   * `sessiond list --json`, cold (no listing cache) and warm (the cache present), against
#     pi 1.6.0's own `SessionManager.listAll()` (scripts/pi-list-all.mjs) and the floor, and
#     the peak RSS of the cold listing against pi's; the three alternate within each round;
#   * `sessiond search`, the index built from nothing (wall and CPU time) against the floor,
#     the index's size against the data's, then `--queries` queries (rare words, frequent
#     words, phrases; each a process of its own with the index's freshness check, as a person
#     runs it) against `grep -rlF` of the same text, and the refresh after 100 appended entries
#     against the cold build;
#   * one big session: `sessiond compact --dry-run` on a 191 MiB chain with 1% side branches
#     and four 1 MB tool results (written here, not by gen-session), peak RSS against the
#     budget of 64 MB + 10% of the file.
#   * the daemon (`sessiond serve`, spoken to over its pipes as an editor does): 1,000
#     sessions opened, then its file descriptors, threads and RSS (the RSS against 64 MB + 5% of
#     the opened bytes); then 50 appends a second to ten of the open sessions, each timed from
#     its write to the `session/didChange` naming it, against the same with only those ten
#     sessions open (a notification not come within 2 s counts as missed).
#
# Prints a markdown table; with --write, puts it into docs/performance.md between the
# `bench:scale` markers (in the part of the file scripts/bench-vs-pi.py keeps). bench-vs-pi.py
# runs it too with `--scale N`.
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERFORMANCE = os.path.join(ROOT, "docs", "performance.md")
BEGIN = "<!-- bench:scale (written by scripts/bench_scale.py) -->"
END = "<!-- /bench:scale -->"


def timed(cmd, env=None, stdout=subprocess.DEVNULL):
    """Runs cmd under GNU time; returns (wall s, CPU s, peak RSS MiB, stdout or None)."""
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", report.name, *cmd],
                           stdout=stdout, stderr=subprocess.DEVNULL, env=env)
        wall = time.perf_counter() - start
        if p.returncode not in (0, 1) or (p.returncode == 1 and cmd[0] != "grep"):
            sys.exit(f"bench: command failed ({p.returncode}): {' '.join(cmd)}")
        user, sys_, rss = report.read().split()[-3:]
        return wall, float(user) + float(sys_), int(rss) / 1024, p.stdout


def median(xs):
    return statistics.median(xs) if xs else None


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round((len(xs) - 1) * 0.99))] if xs else None


def du(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total


def corpus(gen, n, seed=1):
    """The generated sessions directory of n sessions (made once, then reused)."""
    agent = os.path.join(ROOT, "target", "bench", f"corpus-{n}")
    done = os.path.join(agent, "generated")
    if not os.path.exists(done):
        shutil.rmtree(agent, ignore_errors=True)
        os.makedirs(agent)
        print(f"bench: generating {n} sessions in {os.path.relpath(agent, ROOT)}", file=sys.stderr)
        subprocess.run([gen, agent, "0", str(seed), "--corpus", str(n)], check=True)
        with open(done, "w") as f:
            f.write(f"{n} {seed}\n")
    return agent, os.path.join(agent, "sessions")


def big_session(path, entries=373_000, seed=48):
    """A chain of user / assistant / tool-result turns with 1% side branches (a user message
    off an earlier entry, answered once) and four 1 MB tool results: about 191 MiB for
    373,000 entries. Deterministic; written once."""
    if os.path.exists(path):
        return path
    rng = random.Random(seed)
    words = ("session tree leaf entry parse render context compaction token file read write "
             "async error result value index offset buffer stream config module test build").split()

    def text(n):
        out, size = [], 0
        while size < n:
            w = words[rng.randrange(len(words))]
            out.append(w)
            size += len(w) + 1
        return " ".join(out)

    ts = 1_764_000_000_000
    ids = []
    big_at = {entries * k // 5 // 3 * 3 + 2 for k in range(1, 5)}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps({"type": "session", "version": 3, "id": "0196a000-0000-7000-8000-000000000191",
                            "timestamp": "2025-11-24T16:00:00.000Z", "cwd": "/home/dev/big"}) + "\n")
        leaf, call = None, None
        for i in range(entries):
            ts += 700
            iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts // 1000)) + f".{ts % 1000:03d}Z"
            eid = f"{i + 1:08x}"
            parent = leaf
            side = bool(ids) and rng.random() < 0.01 and i not in big_at
            if side:
                parent = ids[rng.randrange(len(ids))]
                msg = {"role": "user", "content": [{"type": "text", "text": text(200)}], "timestamp": ts}
            elif i % 3 == 0:
                msg = {"role": "user", "content": [{"type": "text", "text": text(200)}], "timestamp": ts}
            elif i % 3 == 1:
                call = f"toolu_{i:016x}"
                msg = {"role": "assistant", "content": [{"type": "text", "text": text(120)},
                       {"type": "toolCall", "id": call, "name": "read", "arguments": {"path": "src/session.rs"}}],
                       "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                       "usage": {"input": 1000, "output": 200, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1200,
                                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                       "stopReason": "toolUse", "timestamp": ts}
            else:
                size = 1_000_000 if i in big_at else 260
                msg = {"role": "toolResult", "toolCallId": call or "toolu_0", "toolName": "read",
                       "content": [{"type": "text", "text": text(size)}], "isError": False, "timestamp": ts}
            f.write(json.dumps({"type": "message", "id": eid, "parentId": parent, "timestamp": iso,
                                "message": msg}, separators=(",", ":")) + "\n")
            ids.append(eid)
            if not side:
                leaf = eid
    os.replace(tmp, path)
    return path


def queries(n_sessions, k):
    """k queries: a third rare words (one session's ticket), a third frequent words, a third
    two-word phrases."""
    rng = random.Random(48)
    frequent = ["error", "session", "compaction", "buffer", "stream", "module", "token", "index"]
    out = []
    for i in range(k):
        kind = i % 3
        if kind == 0:
            out.append(("rare", f"ticket{rng.randrange(n_sessions):05d}", None))
        elif kind == 1:
            w = frequent[rng.randrange(len(frequent))]
            out.append(("frequent", w, None))
        else:
            a, b = rng.sample(frequent, 2)
            out.append(("phrase", f'"{a} {b}"', f"{a} {b}"))
    return out


def append_entries(paths, per_file):
    """Appends per_file user messages to the end of each file, chained from its last entry."""
    for p in paths:
        with open(p, "rb") as f:
            f.seek(max(0, os.path.getsize(p) - 65536))
            last = f.read().rstrip(b"\n").split(b"\n")[-1]
        leaf = json.loads(last)["id"]
        with open(p, "a") as f:
            for k in range(per_file):
                eid = f"bench{k:03d}{leaf[:6]}"
                f.write(json.dumps({"type": "message", "id": eid, "parentId": leaf,
                                    "timestamp": "2030-01-01T00:00:00.000Z",
                                    "message": {"role": "user", "content": "appended for the refresh",
                                                "timestamp": 1893456000000}}) + "\n")
                leaf = eid


def measure(sessiond, gen, floor, oracle, n, rounds=3, n_queries=50, search=True, compact=True, daemon=True):
    """Runs every measure; returns the facts the table is made of."""
    agent, sessions = corpus(gen, n)
    facts = dict(sessions=n, bytes=du(sessions), rounds=rounds)
    work = os.path.join(ROOT, "target", "bench", f"scale-work-{n}")
    os.makedirs(work, exist_ok=True)
    cache = os.path.join(work, "list-cache.json")
    env_pi = dict(os.environ, SESSIOND_ORACLE_DIR=oracle, PI_CODING_AGENT_DIR=agent)
    res = {k: [] for k in ("floor", "cold", "warm", "pi")}
    list_cmd = [sessiond, "list", "--root", sessions, "--cache", cache, "--json"]
    # One listing first, so that every measured one meets the files in the page cache.
    timed(list_cmd)
    for _ in range(rounds):
        res["floor"].append(timed([floor, sessions]))
        if os.path.exists(cache):
            os.remove(cache)
        res["cold"].append(timed(list_cmd))
        res["warm"].append(timed(list_cmd))
        res["pi"].append(timed(["node", os.path.join(ROOT, "scripts", "pi-list-all.mjs")], env=env_pi))
    pair = lambda a, b: median([x[0] / y[0] for x, y in zip(res[a], res[b])])
    facts.update(
        floor_s=median([r[0] for r in res["floor"]]),
        cold_s=median([r[0] for r in res["cold"]]), cold_cpu=median([r[1] for r in res["cold"]]),
        warm_s=median([r[0] for r in res["warm"]]),
        pi_s=median([r[0] for r in res["pi"]]),
        cold_vs_pi=pair("pi", "cold"), warm_vs_pi=pair("pi", "warm"), cold_vs_floor=pair("cold", "floor"),
        rss=median([r[2] for r in res["cold"]]) / median([r[2] for r in res["pi"]]),
        rss_mb=median([r[2] for r in res["cold"]]), pi_rss_mb=median([r[2] for r in res["pi"]]))
    if search:
        index = os.path.join(work, "index")
        shutil.rmtree(index, ignore_errors=True)
        search_cmd = [sessiond, "search", "--root", sessions, "--index-dir", index, "--limit", "20", "--json"]
        floor_before = timed([floor, sessions])
        build = timed(search_cmd + ["zzzzunfound"])
        floor_after = timed([floor, sessions])
        fl = (floor_before[0] + floor_after[0]) / 2
        facts.update(build_s=build[0], build_cpu=build[1], build_rss=build[2], build_floor_s=fl,
                     build_vs_floor=build[0] / fl, build_cpu_vs_floor=build[1] / fl,
                     index_bytes=du(index))
        ratios, ours, greps, kinds = [], [], [], {}
        for kind, q, grep_text in queries(n, n_queries):
            s = timed(search_cmd + [q])
            g = timed(["grep", "-rlF", grep_text or q, sessions])
            ratios.append(s[0] / g[0])
            ours.append(s[0])
            greps.append(g[0])
            kinds.setdefault(kind, []).append(s[0])
        facts.update(query_ratio_median=median(ratios), query_ratio_p99=p99(ratios),
                     query_ms_median=median(ours) * 1000, query_ms_p99=p99(ours) * 1000,
                     grep_ms_median=median(greps) * 1000,
                     query_kinds={k: median(v) * 1000 for k, v in kinds.items()})
        # The refresh: 100 entries appended to ten sessions, then one query.
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(sessions) for f in fs if f.endswith(".jsonl"))
        chosen = files[:: max(1, len(files) // 10)][:10]
        saved = []
        for p in chosen:
            saved.append((p, os.path.join(work, os.path.basename(p))))
            shutil.copyfile(p, saved[-1][1])
        append_entries(chosen, 10)
        refresh = timed(search_cmd + ["zzzzunfound"])
        for p, copy in saved:
            shutil.copyfile(copy, p)
            os.remove(copy)
        facts.update(refresh_s=refresh[0], refresh_vs_build=refresh[0] / build[0])
    if compact:
        big = big_session(os.path.join(ROOT, "target", "bench", "session-191mib-branches.jsonl"))
        size = os.path.getsize(big)
        runs = [timed([sessiond, "compact", big, "--dry-run"]) for _ in range(max(1, min(rounds, 3)))]
        facts.update(compact_size=size, compact_rss=median([r[2] for r in runs]),
                     compact_budget=64 + 0.10 * size / 1048576, compact_s=median([r[0] for r in runs]))
    if daemon:
        facts.update(measure_daemon(sessiond, sessions))
    return facts


def daemon_client(sessiond, root):
    """`sessiond serve --root ROOT`, initialized; returns (process, call). A thread reads every
    frame; `call` waits for its answer, and the notifications wait in `process.notes` (a
    queue), with the time each was read."""
    import queue
    import threading
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import rpc
    proc = subprocess.Popen([sessiond, "serve", "--root", root], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proc.notes, answers = queue.Queue(), queue.Queue()

    def read():
        while proc.poll() is None:
            line = proc.stdout.peek(1) if hasattr(proc.stdout, "peek") else b"x"
            if not line:
                return
            m = rpc.receive(proc)
            (proc.notes if "method" in m else answers).put((time.perf_counter(), m))

    threading.Thread(target=read, daemon=True).start()
    ids = iter(range(1, 1 << 30))

    def call(method, params):
        id_ = next(ids)
        rpc.send(proc, {"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        while True:
            _, m = answers.get(timeout=60)
            if m.get("id") == id_:
                if "error" in m:
                    sys.exit(f"bench: {method} failed: {m['error']}")
                return m["result"]

    call("initialize", {"capabilities": {}})
    rpc.send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
    return proc, call


def leaf_of(path):
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 65536))
        return json.loads(f.read().rstrip(b"\n").split(b"\n")[-1])["id"]


def did_change_latencies(proc, targets, appends, rate):
    """Appends `appends` entries round-robin to `targets` at `rate` a second; returns the
    milliseconds from each write to the `session/didChange` naming its entry, and how many
    never came within 2 s."""
    import queue
    leaves = {t: leaf_of(t) for t in targets}
    latencies, missed = [], 0
    start = time.perf_counter()
    for k in range(appends):
        due = start + k / rate
        time.sleep(max(0.0, due - time.perf_counter()))
        t = targets[k % len(targets)]
        eid = f"d{k:07d}"
        line = json.dumps({"type": "message", "id": eid, "parentId": leaves[t],
                           "timestamp": "2030-01-01T00:00:00.000Z",
                           "message": {"role": "user", "content": f"append {k}", "timestamp": 1893456000000}})
        leaves[t] = eid
        written = time.perf_counter()
        with open(t, "a") as f:
            f.write(line + "\n")
        while True:
            try:
                at, m = proc.notes.get(timeout=max(0.0, written + 2.0 - time.perf_counter()))
            except queue.Empty:
                missed += 1
                break
            if m.get("method") == "session/didChange" and m["params"].get("leafId") == eid:
                latencies.append((at - written) * 1000)
                break
    return latencies, missed


def measure_daemon(sessiond, sessions, n_open=1000, appends=250, rate=50):
    """The daemon's rows: 1,000 sessions open, then didChange at 1,000 and at 10 open."""
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(sessions) for f in fs if f.endswith(".jsonl"))
    files = files[:: max(1, len(files) // n_open)][:n_open]
    targets = files[:: max(1, len(files) // 10)][:10]
    saved = []
    for t in targets:
        saved.append((t, open(t, "rb").read()))
    facts = {}
    try:
        for n in (n_open, 10):
            opened = files if n == n_open else targets
            proc, call = daemon_client(sessiond, sessions)
            for f in opened:
                call("session/open", {"path": f})
            time.sleep(1)
            if n == n_open:
                status = open(f"/proc/{proc.pid}/status").read()
                rss = int(next(l for l in status.splitlines() if l.startswith("VmRSS")).split()[1]) / 1024
                facts.update(daemon_open=len(opened), daemon_fds=len(os.listdir(f"/proc/{proc.pid}/fd")),
                             daemon_threads=len(os.listdir(f"/proc/{proc.pid}/task")), daemon_rss=rss,
                             daemon_bytes=sum(os.path.getsize(f) for f in opened))
            lat, missed = did_change_latencies(proc, targets, appends, rate)
            key = "many" if n == n_open else "few"
            facts[f"did_change_{key}_ms"] = median(lat)
            facts[f"did_change_{key}_missed"] = missed
            proc.kill()
            proc.wait()
            for t, data in saved:
                with open(t, "wb") as f:
                    f.write(data)
    finally:
        for t, data in saved:
            with open(t, "wb") as f:
                f.write(data)
    return facts


def verdict(ok):
    return "met" if ok else "**missed**"


def table(f):
    """The markdown table of the measures in `f`, and the headline rows."""
    gb = f["bytes"] / 1e9
    rows = [
        ("`list --json` cold (no cache) vs pi's `SessionManager.listAll()`",
         f"{f['cold_vs_pi']:.1f}× faster ({f['cold_s'] * 1000:.0f} ms, CPU {f['cold_cpu'] * 1000:.0f} ms; "
         f"pi {f['pi_s'] * 1000:.0f} ms)", "≥ 5×", verdict(f["cold_vs_pi"] >= 5)),
        ("`list --json` cold vs the floor", f"{f['cold_vs_floor']:.2f}× (floor {f['floor_s'] * 1000:.0f} ms)",
         "≤ 2×", verdict(f["cold_vs_floor"] <= 2)),
        ("`list --json` warm (cache present) vs pi", f"{f['warm_vs_pi']:.0f}× faster ({f['warm_s'] * 1000:.0f} ms)",
         "≥ 50×", verdict(f["warm_vs_pi"] >= 50)),
        ("`list` peak RSS vs pi", f"{f['rss']:.2f} ({f['rss_mb']:.0f} MB / {f['pi_rss_mb']:.0f} MB)", "≤ 0.25",
         verdict(f["rss"] <= 0.25)),
    ]
    if "build_s" in f:
        rows += [
            ("`search`, cold index build vs the floor",
             f"{f['build_vs_floor']:.1f}× ({f['build_s']:.1f} s; CPU {f['build_cpu_vs_floor']:.1f}×; "
             f"peak RSS {f['build_rss']:.0f} MB)", "≤ 8×", verdict(f["build_vs_floor"] <= 8)),
            ("index size vs the data", f"{100 * f['index_bytes'] / f['bytes']:.0f}% "
             f"({f['index_bytes'] / 1048576:.0f} MB)", "≤ 20%", verdict(f["index_bytes"] <= 0.2 * f["bytes"])),
            ("query time (process start included) vs `grep -rlF`, median / p99",
             f"{f['query_ratio_median']:.2f}× / {f['query_ratio_p99']:.2f}× ({f['query_ms_median']:.0f} ms / "
             f"{f['query_ms_p99']:.0f} ms; grep {f['grep_ms_median']:.0f} ms; "
             + ", ".join(f"{k} {v:.0f} ms" for k, v in f["query_kinds"].items()) + ")",
             "≤ 0.05× / ≤ 0.2×", verdict(f["query_ratio_median"] <= 0.05 and f["query_ratio_p99"] <= 0.2)),
            ("refresh after 100 appended entries vs the cold build",
             f"{100 * f['refresh_vs_build']:.1f}% ({f['refresh_s'] * 1000:.0f} ms)", "≤ 2%",
             verdict(f["refresh_vs_build"] <= 0.02)),
        ]
    if "compact_rss" in f:
        rows.append(("`compact --dry-run` peak RSS, one session of "
                     f"{f['compact_size'] / 1048576:.0f} MiB (1% side branches, four 1 MB tool results)",
                     f"{f['compact_rss']:.0f} MiB ({f['compact_s']:.1f} s)",
                     f"≤ 64 MB + 10% ({f['compact_budget']:.0f} MiB)",
                     verdict(f["compact_rss"] <= f["compact_budget"])))
    if "daemon_fds" in f:
        n = f["daemon_open"]
        budget = 64 + 0.05 * f["daemon_bytes"] / 1e6
        rows += [
            (f"daemon with {n:,} sessions open: file descriptors", f"{f['daemon_fds']}",
             f"≤ 64 + 0.05 per session ({64 + 0.05 * n:.0f})", verdict(f["daemon_fds"] <= 64 + 0.05 * n)),
            (f"daemon threads / RSS with {n:,} open",
             f"{f['daemon_threads']} / {f['daemon_rss']:.0f} MB ({f['daemon_bytes'] / 1e6:.0f} MB opened)",
             f"≤ 16 / ≤ 64 MB + 5% ({budget:.0f} MB)",
             verdict(f["daemon_threads"] <= 16 and f["daemon_rss"] <= budget)),
            (f"didChange at {n:,} open vs 10 open, 50 appends/s",
             f"{f['did_change_many_missed'] + f['did_change_few_missed']} missed; median "
             f"{f['did_change_many_ms']:.1f} vs {f['did_change_few_ms']:.1f} ms",
             "0 missed, ≤ 2×",
             verdict(f["did_change_many_missed"] + f["did_change_few_missed"] == 0
                     and f["did_change_many_ms"] <= 2 * f["did_change_few_ms"])),
        ]
    md = [f"{f['sessions']:,} generated pi sessions, {gb:.2f} GB (`gen-session --corpus {f['sessions']}`); "
          f"list rows: medians of {f['rounds']} rounds, each ratio the median of the rounds' own:",
          "", "| measure | this run | goal | |", "|---|---|---|---|"]
    md += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(md), rows


def machine_line(load_start):
    load_end = os.getloadavg()
    fmt = lambda l: " / ".join(f"{x:.1f}" for x in l)
    return f"{os.cpu_count()} cores, load average (1/5/15 min) {fmt(load_start)} at the start, {fmt(load_end)} at the end"


def write(md):
    with open(PERFORMANCE, encoding="utf-8") as f:
        text = f.read()
    block = f"{BEGIN}\n{md}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n## Scale: many sessions (issue 48)\n\n" + block + "\n"
    with open(PERFORMANCE, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--no-search", action="store_true")
    ap.add_argument("--no-compact", action="store_true")
    ap.add_argument("--no-daemon", action="store_true")
    ap.add_argument("--oracle")
    ap.add_argument("--write", action="store_true", help="put the table into docs/performance.md")
    args = ap.parse_args()
    oracle = args.oracle or os.environ.get("SESSIOND_ORACLE_DIR") or os.path.join(ROOT, ".oracle")
    load_start = os.getloadavg()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "sessiond", "--example", "gen-session",
                    "--example", "floor"], cwd=ROOT, check=True)
    rel = os.path.join(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), "release")
    f = measure(os.path.join(rel, "sessiond"), os.path.join(rel, "examples", "gen-session"),
                os.path.join(rel, "examples", "floor"), oracle, args.sessions, args.rounds, args.queries,
                not args.no_search, not args.no_compact, not args.no_daemon)
    md, _ = table(f)
    md = f"{machine_line(load_start)}; `python3 scripts/bench_scale.py --sessions {args.sessions}`.\n\n{md}"
    print(md)
    print(json.dumps(f), file=sys.stderr)
    if args.write:
        write(md)


if __name__ == "__main__":
    main()
