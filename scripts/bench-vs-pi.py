#!/usr/bin/env python3
# Side-by-side benchmark: sessiond vs pi 1.6.0's own implementation, and vs the parsing floor.
#
#   python3 scripts/bench-vs-pi.py [--sizes 1,10,100] [--huge] [--runs 3] [--oracle DIR]
#
# Generates deterministic sessions (cargo example gen-session) under target/bench/, then for
# each size runs, alternating within each round so both see the same machine state:
#   * `sessiond context FILE --json` vs pi's loadEntriesFromFile + buildSessionContext
#     (the oracle's `context`): wall time and peak RSS, and their ratios;
#   * `sessiond check FILE` (open: read, validate, build the tree) vs the floor (read the file
#     and validate every line into serde's IgnoredAny), and their ratio;
#   * with --daemon, the daemon numbers from scripts/bench-daemon (open, contextAt, append).
# --huge adds a 1 GB session (pi is skipped there unless --huge-pi: it needs several GB).
# Prints one markdown table (the README's Performance section shows the latest one).
import argparse
import os
import platform
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


def build():
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "sessiond", "--example", "gen-session", "--example", "floor"],
                   cwd=ROOT, check=True)


def oracle_dir(arg):
    d = arg or os.environ.get("SESSIOND_ORACLE_DIR") or os.path.join(ROOT, ".oracle")
    if not os.path.exists(os.path.join(d, "oracle.mjs")):
        sys.exit(f"bench: no pi oracle at {d} (run scripts/test.sh once, or pass --oracle DIR)")
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--huge", action="store_true", help="add a 1 GB session")
    ap.add_argument("--huge-pi", action="store_true", help="also run pi on the 1 GB session")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--oracle")
    args = ap.parse_args()
    oracle = oracle_dir(args.oracle)
    if not os.path.exists("/usr/bin/time"):
        sys.exit("bench: needs GNU time (apt-get install time)")
    build()
    rel = os.path.join(ROOT, "target", "release")
    sessiond, gen, floor = os.path.join(rel, "sessiond"), os.path.join(rel, "examples", "gen-session"), os.path.join(rel, "examples", "floor")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.huge:
        sizes.append(1024)
    outdir = os.path.join(ROOT, "target", "bench")
    os.makedirs(outdir, exist_ok=True)
    rows = []
    for mb in sizes:
        path = os.path.join(outdir, f"session-{mb}mb.jsonl")
        if not os.path.exists(path):
            subprocess.run([gen, path, str(mb), "1"], check=True)
        with_pi = mb < 1024 or args.huge_pi
        res = {k: [] for k in ("ctx", "pi", "open", "floor")}
        for _ in range(args.runs):
            res["ctx"].append(run([sessiond, "context", path, "--json"]))
            if with_pi:
                res["pi"].append(run(["node", os.path.join(oracle, "oracle.mjs"), "context", path]))
            res["open"].append(run([sessiond, "check", path]))
            res["floor"].append(run([floor, path]))
        med = {k: (statistics.median(t for t, _ in v), max(m for _, m in v)) if v else None for k, v in res.items()}
        rows.append((mb, os.path.getsize(path), med))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; median of {args.runs} runs")
    print()
    print("| session | sessiond context | pi context | speed-up | sessiond RSS | pi RSS | RSS ratio | open (check) | floor | open/floor |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mb, size, m in rows:
        ctx, pi, op, fl = m["ctx"], m["pi"], m["open"], m["floor"]
        pi_t = f"{pi[0]*1000:.0f} ms" if pi else "—"
        pi_m = f"{pi[1]:.0f} MB" if pi else "—"
        speed = f"{pi[0]/ctx[0]:.1f}×" if pi else "—"
        rss = f"{ctx[1]/pi[1]:.3f}" if pi else "—"
        print(f"| {size/1048576:.0f} MB | {ctx[0]*1000:.0f} ms | {pi_t} | {speed} | {ctx[1]:.1f} MB | {pi_m} | {rss} | "
              f"{op[0]*1000:.0f} ms | {fl[0]*1000:.0f} ms | {op[0]/fl[0]:.2f} |")


if __name__ == "__main__":
    main()
