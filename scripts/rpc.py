#!/usr/bin/env python3
# Sends JSON-RPC requests to `sessiond serve` by hand and prints every frame it answers with.
#
#   python3 scripts/rpc.py --root examples session/open '{"path":"examples/pi-v3-branched.jsonl"}' \
#       session/contextAt '{"path":"examples/pi-v3-branched.jsonl","fields":"previews","limit":3}'
#
# It runs the LSP lifecycle around the requests (initialize, initialized, ..., shutdown, exit),
# sends each METHOD PARAMS pair in order and waits for its answer. Every frame is printed as one
# JSON line; --pretty prints the requests too (→) and each frame indented (←). Exit status: 0
# when every request was answered with a result, 1 when one got an error, 2 for bad arguments
# or a daemon that cannot be run. Uses target/release/sessiond (or $SESSIOND_BIN); build it
# first with `cargo build --release`.
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message):
    print(f"rpc: {message}", file=sys.stderr)
    sys.exit(2)


# --pretty: the lifecycle as one line each; other frames indented, short arrays of plain
# values on one line, strings cut at this many characters.
LONG_STRING = 160
LIFECYCLE = ("initialize", "initialized", "shutdown", "exit")


def pretty(value, indent=""):
    inner = indent + "  "
    if isinstance(value, str) and len(value) > LONG_STRING:
        value = value[:LONG_STRING] + f"… ({len(value) - LONG_STRING} more characters)"
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {pretty(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and value:
        if not any(isinstance(v, (dict, list)) for v in value):
            # Plain values packed into lines of up to 100 characters.
            rows, row = [], []
            for v in value:
                text = pretty(v)
                if row and len(inner) + len(", ".join(row + [text])) > 100:
                    rows.append(", ".join(row))
                    row = []
                row.append(text)
            rows.append(", ".join(row))
            if len(rows) == 1:
                return "[" + rows[0] + "]"
            return "[\n" + ",\n".join(inner + r for r in rows) + "\n" + indent + "]"
        return "[\n" + ",\n".join(inner + pretty(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)


class Printer:
    def __init__(self, pretty):
        self.pretty = pretty
        self.pending = {}

    def sent(self, message):
        method = message.get("method")
        if not self.pretty:
            return
        if "id" in message:
            self.pending[message["id"]] = method
        if method not in LIFECYCLE:
            print(f"→ {method} " + pretty(message.get("params")))

    def received(self, message):
        if not self.pretty:
            print(json.dumps(message, ensure_ascii=False))
            return
        method = self.pending.pop(message.get("id"), None)
        if method in LIFECYCLE and "result" in message:
            info = (message["result"] or {}).get("serverInfo", {})
            said = f"{info.get('name')} {info.get('version')}" if info else "ok"
            print(f"({method}: {said})")
        elif "method" in message:
            print(f"← notification {message['method']} " + pretty(message.get("params")))
        else:
            body = {k: v for k, v in message.items() if k not in ("jsonrpc", "id")}
            print(f"← {method or 'response'} " + pretty(body))


def send(proc, message):
    body = json.dumps(message).encode()
    try:
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        proc.stdin.flush()
    except BrokenPipeError:
        fail(f"the daemon exited (status {proc.wait()}) before it read {message.get('method')}")


def receive(proc):
    length = None
    while True:
        line = proc.stdout.readline()
        if not line:
            fail(f"the daemon closed its output (exit status {proc.wait()})")
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            try:
                length = int(value)
            except ValueError:
                fail(f"bad Content-Length header from the daemon: {value.strip()!r}")
    if length is None:
        fail("the daemon sent a frame without Content-Length")
    body = proc.stdout.read(length)
    try:
        return json.loads(body)
    except ValueError as e:
        fail(f"the daemon sent a frame that is not JSON ({e})")


def call(proc, printer, id_, method, params):
    request = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
    printer.sent(request)
    send(proc, request)
    while True:
        message = receive(proc)
        printer.received(message)
        if message.get("id") == id_:
            return message


def main():
    ap = argparse.ArgumentParser(
        description="Send JSON-RPC requests to `sessiond serve` and print what it answers."
    )
    ap.add_argument("--root", action="append", default=[], help="session root (repeatable)")
    ap.add_argument("--pretty", action="store_true", help="print requests too, and indent every frame")
    ap.add_argument("calls", nargs="*", metavar="METHOD PARAMS", help="METHOD PARAMS_JSON pairs")
    args = ap.parse_args()
    if len(args.calls) % 2:
        fail(f"give METHOD PARAMS_JSON pairs; {args.calls[-1]!r} has no PARAMS_JSON")
    calls = []
    for i in range(0, len(args.calls), 2):
        method, text = args.calls[i], args.calls[i + 1]
        try:
            params = json.loads(text)
        except ValueError as e:
            fail(f"the params of {method} are not JSON ({e}): {text}")
        if not isinstance(params, (dict, list)):
            fail(f"the params of {method} must be a JSON object or array, not {text}")
        calls.append((method, params))

    binary = os.environ.get("SESSIOND_BIN", os.path.join(ROOT, "target", "release", "sessiond"))
    if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
        how = "set SESSIOND_BIN to a sessiond binary" if "SESSIOND_BIN" in os.environ else (
            "build it with `cargo build --release` (or set SESSIOND_BIN)"
        )
        fail(f"no sessiond binary at {binary}: {how}")
    cmd = [binary, "serve"] + [a for r in args.root for a in ("--root", r)]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as e:
        fail(f"cannot run {binary}: {e.strerror}")

    printer = Printer(args.pretty)
    failed = False
    init = call(proc, printer, 0, "initialize", {"capabilities": {}, "processId": None})
    failed |= "error" in init
    note = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
    printer.sent(note)
    send(proc, note)
    for n, (method, params) in enumerate(calls, start=1):
        failed |= "error" in call(proc, printer, n, method, params)
    call(proc, printer, 10_000, "shutdown", None)
    send(proc, {"jsonrpc": "2.0", "method": "exit"})
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail("the daemon did not exit within 10 s of `exit`")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
