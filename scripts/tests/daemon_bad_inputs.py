"""Hostile and broken requests to an aria2-compatible daemon: each is sent, what came back is printed,
and for segget the answer is checked. The daemon must still answer afterwards (it never crashes).
With --target aria2c the same requests go to aria2c, for comparison (printed, not checked).

Usage: daemon_bad_inputs.py --target segget|aria2c --bin PATH --work DIR
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

from checks import free_port, recv_all

SECRET = "bad-inputs"


def raw_http(port, body, headers=None, method="POST", host=None):
    """Sends one request over a fresh socket; returns (status, body text)."""
    if isinstance(body, str):
        body = body.encode()
    host = host or f"127.0.0.1:{port}"
    head = f"{method} /jsonrpc HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {len(body)}\r\n"
    for k, v in (headers or {}).items():
        head += f"{k}: {v}\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(head.encode() + b"\r\n" + body)
    except OSError:
        pass  # the server may answer and close before reading an oversize body
    data = recv_all(s)
    s.close()
    if not data:
        return 0, ""
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data.split(b"\r\n\r\n", 1)[-1].decode(errors="replace")


def call(port, method, params, token=True):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                       "params": ([f"token:{SECRET}"] if token else []) + params})
    return raw_http(port, body)


def error_of(text):
    try:
        reply = json.loads(text)
    except ValueError:
        return None
    if isinstance(reply, list):
        reply = reply[0] if reply else {}
    e = reply.get("error")
    return (e.get("code"), e.get("message")) if e else None


def main():
    ap = argparse.ArgumentParser()
    for name in ("target", "bin", "work"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    root = os.path.join(a.work, "root")
    outside = os.path.join(a.work, "outside")
    os.makedirs(root)
    os.makedirs(outside)
    os.symlink(outside, os.path.join(root, "escape"))
    port = free_port()
    if a.target == "segget":
        argv = [a.bin, "daemon", "--rpc-listen-port", str(port), "--rpc-secret", SECRET, "--dir", root,
                "--database", os.path.join(a.work, "q.sqlite")]
    else:
        argv = [a.bin, "--enable-rpc", f"--rpc-listen-port={port}", f"--rpc-secret={SECRET}", f"--dir={root}",
                "--quiet=true", "--pause=true"]
    daemon = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(os.path.join(a.work, "daemon.err"), "w"))
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)

    checked = a.target == "segget"
    failures = []
    url = "http://127.0.0.1:9/file.bin"

    def row(name, got, expect=None):
        status, body = got
        err = error_of(body)
        shown = f"HTTP {status} " + (f"error {err[0]}: {err[1]}" if err else body.strip()[:90].replace("\n", " "))
        ok = expect(status, err) if (checked and expect) else None
        mark = "" if ok is None else ("ok   " if ok else "FAIL ")
        print(f"{mark}{name:<44} -> {shown}")
        if ok is False:
            failures.append(name)

    code = lambda c: (lambda s, e: e is not None and e[0] == c)
    refused = lambda s, e: e is not None  # any JSON-RPC error, none accepted

    row("malformed JSON", raw_http(port, '{"jsonrpc":"2.0","id":1,"method":'), code(-32700))
    row("not JSON at all (binary)", raw_http(port, bytes(range(256))), code(-32700))
    row("invalid UTF-8 in a string", raw_http(port, b'{"id":1,"method":"\xff\xfe"}'), lambda s, e: e is not None)
    row("nesting 100000 deep", raw_http(port, "[" * 100000), code(-32700))
    row("empty batch [] (aria2c: [] and 200)", raw_http(port, "[]"), lambda s, e: s == 200 and e is None)
    row("call without an id, not run (aria2c: -32600)",
        raw_http(port, json.dumps({"jsonrpc": "2.0", "method": "aria2.addUri", "params": [f"token:{SECRET}", ["http://127.0.0.1:9/x"]]})),
        code(-32600))
    row("request without method", raw_http(port, '{"id":1,"jsonrpc":"2.0"}'), code(-32600))
    row("params an object", raw_http(port, '{"id":1,"method":"aria2.getVersion","params":{}}'), code(-32602))
    row("unknown method", call(port, "aria2.frobnicate", []), code(1))
    row("addUri without URLs", call(port, "aria2.addUri", []), code(1))
    row("missing token", call(port, "aria2.getVersion", [], token=False),
        lambda s, e: e == (1, "Unauthorized"))
    row("wrong token", raw_http(port, json.dumps({"id": 1, "method": "aria2.getVersion", "params": ["token:guess"]})),
        lambda s, e: e == (1, "Unauthorized"))
    row("token one character short", raw_http(port, json.dumps(
        {"id": 1, "method": "aria2.getVersion", "params": ["token:" + SECRET[:-1]]})), lambda s, e: e == (1, "Unauthorized"))
    row("Host evil.example (DNS rebinding), token", raw_http(port, json.dumps(
        {"id": 1, "method": "aria2.getVersion", "params": [f"token:{SECRET}"]}), host=f"evil.example:{port}"),
        lambda s, e: s == 421 and e is None)
    row("dir /etc", call(port, "aria2.addUri", [[url], {"dir": "/etc"}]), refused)
    row("dir through a symlink out of the root", call(port, "aria2.addUri", [[url], {"dir": os.path.join(root, "escape")}]), refused)
    row("dir root/../outside", call(port, "aria2.addUri", [[url], {"dir": os.path.join(root, "..", "outside")}]), refused)
    row("out ../evil.bin", call(port, "aria2.addUri", [[url], {"out": "../evil.bin"}]), refused)
    row("out a/b.bin", call(port, "aria2.addUri", [[url], {"out": "a/b.bin"}]), refused)
    row("out /etc/passwd", call(port, "aria2.addUri", [[url], {"out": "/etc/passwd"}]), refused)
    row("header with CR LF", call(port, "aria2.addUri", [[url], {"header": "X-A: 1\r\nX-Injected: 1"}]), refused)
    row("header array with LF", call(port, "aria2.addUri", [[url], {"header": ["X-A: 1", "X-B: 2\nX-C: 3"]}]), refused)
    row("user-agent with CR LF", call(port, "aria2.addUri", [[url], {"user-agent": "UA\r\nX-Injected: 1"}]), refused)
    row("URL with a line break", call(port, "aria2.addUri", [["http://h/a\r\nX-Injected: 1"]]), refused)
    row("file:// URL", call(port, "aria2.addUri", [["file:///etc/passwd"]]), refused)
    row("tellWaiting with string offset", call(port, "aria2.tellWaiting", ["zero", "ten"]), refused)
    row("tellStatus of an unknown gid", call(port, "aria2.tellStatus", ["0123456789abcdef"]), refused)
    row("tellStatus of a malformed gid", call(port, "aria2.tellStatus", ["../../etc"]), refused)
    row("addTorrent", call(port, "aria2.addTorrent", ["AAAA"]), refused)
    big = json.dumps({"id": 1, "method": "aria2.addUri", "params": [f"token:{SECRET}", ["http://h/" + "a" * (3 << 20)]]})
    row("3 MiB request", raw_http(port, big), lambda s, e: s == 413)
    row("Content-Length 1 GiB, no body", raw_http_declared(port, 1 << 30), lambda s, e: s == 413)
    row("GET /jsonrpc", raw_http(port, "", method="GET"), lambda s, e: s in (400, 405) or s == 200)

    # Not HTTP at all, then a client that connects and says nothing: neither may hurt the daemon.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"\x00\x01garbage that is not HTTP\r\n\r\n")
    try:
        s.recv(100)
    except OSError:
        pass
    s.close()
    idle = socket.create_connection(("127.0.0.1", port), timeout=5)
    status, body = call(port, "aria2.getVersion", [])
    idle.close()
    alive = daemon.poll() is None and status == 200 and '"version"' in body
    print(f"{'ok   ' if alive else 'FAIL '}{'still answering afterwards':<44} -> HTTP {status}, "
          f"{'running' if daemon.poll() is None else f'exited {daemon.returncode}'}")
    if not alive:
        failures.append("daemon survived")
    if checked:
        # A second daemon on the same queue database is refused (exit 5, one sentence naming the
        # queue); before, it started, failed the first one's running tasks and then disagreed with it.
        second = subprocess.Popen([a.bin, "daemon", "--rpc-listen-port", str(free_port()), "--rpc-secret", SECRET,
                                   "--dir", root, "--database", os.path.join(a.work, "q.sqlite")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = second.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            second.terminate()
            _, err = second.communicate(timeout=15)
            err = "still running after 15 s; " + err
        refused = second.returncode == 5 and "another segget daemon is using the queue" in err
        print(f"{'ok   ' if refused else 'FAIL '}{'a second daemon on the same queue':<44} -> exit {second.returncode}, "
              f"{err.strip()[:160]!r}")
        if not refused:
            failures.append("second daemon on the same queue")
    daemon.terminate()
    daemon.wait(10)
    escaped = os.listdir(outside)
    if escaped:
        failures.append(f"files appeared outside the root: {escaped}")
    print(f"{a.target}: " + ("all bad inputs handled" if not failures else f"FAILED: {failures}"))
    return 1 if failures else 0


def raw_http_declared(port, length):
    """Declares a huge body and sends none: the answer must come from the header alone."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {length}\r\n\r\n".encode())
    data = recv_all(s)
    s.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data.split(b"\r\n\r\n", 1)[-1].decode(errors="replace")


if __name__ == "__main__":
    sys.exit(main())
