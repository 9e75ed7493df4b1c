#!/usr/bin/env python3
"""The search index inside the daemon, for scripts/bench-search.sh:

    python3 scripts/bench-search-daemon.py BIN CORPUS INDEX_DIR

Starts `BIN serve --root CORPUS --index-dir INDEX_DIR` (INDEX_DIR should be empty: the first
search builds the index) and measures, over JSON-RPC on its pipes:
  * the build by the first session/search, with the daemon's RSS (VmRSS) sampled every 100 ms;
  * query latency with the index warm: the request's round trip over the pipe, median and p99,
    for single frequent terms, phrases, rare terms and prefixes;
  * one append reflected in search: a session is opened, a line with a new word appended, and
    the time from its session/didChange to the first session/search answer holding the hit
    (and from the write to that answer), over several appends.
Prints one line per figure. Speed is measured here, never asserted in tests.
"""

import os
import statistics
import subprocess
import sys
import threading
import time
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rpc import receive, send  # noqa: E402

bin_, corpus, index = sys.argv[1:4]
proc = subprocess.Popen(
    [bin_, "serve", "--root", corpus, "--index-dir", index],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
    env={**os.environ, "SESSIOND_LOG": "warn"},
)
inbox = []
next_id = [0]


def request(method, params):
    next_id[0] += 1
    i = next_id[0]
    send(proc, {"jsonrpc": "2.0", "id": i, "method": method, "params": params})
    while True:
        m = receive(proc)
        if m.get("id") == i:
            if "error" in m:
                sys.exit(f"{method}: {m['error']}")
            return m["result"]
        inbox.append(m)


def wait_notification(method, timeout=10.0):
    while True:
        for k, m in enumerate(inbox):
            if m.get("method") == method:
                return inbox.pop(k)
        # Frames arrive only on our pipe; a blocking read waits for the next one.
        m = receive(proc)
        inbox.append(m)


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


request("initialize", {"capabilities": {}})
send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})

samples = []
building = [True]


def sample():
    t0 = time.perf_counter()
    while building[0]:
        samples.append((time.perf_counter() - t0, rss_kb(proc.pid)))
        time.sleep(0.1)


t = threading.Thread(target=sample)
t.start()
t0 = time.perf_counter()
r = request("session/search", {"query": "zzzz", "limit": 1})
build_s = time.perf_counter() - t0
building[0] = False
t.join()
u = r["index"]["update"]
print(f"daemon: first search (full build) {build_s:.1f} s: {u['indexed']} sessions, {u['entries']} entries")
peak = max(kb for _, kb in samples) if samples else 0
quart = [samples[int(len(samples) * q) - 1][1] if samples else 0 for q in (0.25, 0.5, 0.75, 1.0)]
print(f"daemon RSS while building: peak {peak / 1024:.0f} MB; at 25/50/75/100% of the build "
      + "/".join(f"{kb / 1024:.0f}" for kb in quart) + " MB")
print(f"daemon RSS after the build: {rss_kb(proc.pid) / 1024:.0f} MB")

queries = {
    "single term": ["error", "function", "test", "file"],
    "phrase": ['"cargo test"', '"the file"', '"tool result"'],
    "rare term": ["xylophonequartz", "zzyzx", "quokka"],
    "prefix": ["compil*", "refact*"],
}
for q in sum(queries.values(), []):
    request("session/search", {"query": q, "limit": 20})
for kind, qs in queries.items():
    times = []
    for _ in range(25):
        for q in qs:
            t0 = time.perf_counter()
            request("session/search", {"query": q, "limit": 20})
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(f"daemon {kind:12} median {statistics.median(times):7.1f} ms   p99 {p99:7.1f} ms   ({len(times)} requests, round trip over the pipe, index warm)")
print(f"daemon RSS after {sum(len(q) for q in queries.values()) * 26} queries: {rss_kb(proc.pid) / 1024:.0f} MB")

# One append reflected in search.
first = None
for d, _, files in os.walk(corpus):
    for f in files:
        if f.endswith(".jsonl"):
            first = os.path.join(d, f)
            break
    if first:
        break
opened = request("session/open", {"path": first})
leaf = opened.get("leafId")
saved = open(first, "rb").read()
from_change, from_write = [], []
try:
    for n in range(20):
        word = f"appendedword{n}x"
        line = {"type": "message", "id": f"bench{n:04d}", "parentId": leaf, "timestamp": "2030-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": f"{word} appended"}}
        leaf = line["id"]
        tw = time.perf_counter()
        with open(first, "a") as f:
            f.write(json.dumps(line) + "\n")
        wait_notification("session/didChange")
        tc = time.perf_counter()
        while True:
            r = request("session/search", {"query": word, "limit": 1})
            if r["total"] >= 1:
                break
        now = time.perf_counter()
        from_change.append((now - tc) * 1000)
        from_write.append((now - tw) * 1000)
        time.sleep(0.2)
finally:
    with open(first, "wb") as f:
        f.write(saved)
for name, xs in (("didChange", from_change), ("the write", from_write)):
    xs.sort()
    print(f"daemon: one append found by session/search, from {name}: median {statistics.median(xs):.1f} ms, "
          f"max {xs[-1]:.1f} ms ({len(xs)} appends)")
request("shutdown", None)
send(proc, {"jsonrpc": "2.0", "method": "exit", "params": None})
proc.wait(timeout=10)
