#!/usr/bin/env python3
# Sends JSON-RPC requests to `sessiond serve` by hand and prints every frame it answers with.
#
#   python3 scripts/rpc.py --root examples session/open '{"path":"examples/pi-v3-branched.jsonl"}' \
#       session/contextAt '{"path":"examples/pi-v3-branched.jsonl","fields":"previews","limit":3}'
#
# It runs the LSP lifecycle around the requests (initialize, initialized, ..., shutdown, exit),
# sends each METHOD PARAMS pair in order and waits for its answer. Uses target/release/sessiond
# (or $SESSIOND_BIN); build it first with `cargo build --release`.
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def send(proc, message):
    body = json.dumps(message).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def receive(proc):
    length = None
    while True:
        line = proc.stdout.readline()
        if not line:
            sys.exit("rpc: the daemon closed its output")
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(proc.stdout.read(length))


def call(proc, id_, method, params):
    send(proc, {"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
    while True:
        message = receive(proc)
        print(json.dumps(message, ensure_ascii=False))
        if message.get("id") == id_:
            return message


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", action="append", default=[], help="session root (repeatable)")
    ap.add_argument("calls", nargs="*", help="METHOD PARAMS_JSON pairs")
    args = ap.parse_args()
    if len(args.calls) % 2:
        sys.exit("rpc: give METHOD PARAMS_JSON pairs")
    binary = os.environ.get("SESSIOND_BIN", os.path.join(ROOT, "target", "release", "sessiond"))
    cmd = [binary, "serve"] + [a for r in args.root for a in ("--root", r)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    call(proc, 0, "initialize", {"capabilities": {}, "processId": None})
    send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
    for i in range(0, len(args.calls), 2):
        call(proc, i // 2 + 1, args.calls[i], json.loads(args.calls[i + 1]))
    call(proc, 10_000, "shutdown", None)
    send(proc, {"jsonrpc": "2.0", "method": "exit"})
    proc.wait(timeout=10)


if __name__ == "__main__":
    main()
