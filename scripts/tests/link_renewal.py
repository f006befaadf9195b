#!/usr/bin/env python3
"""Links that expire (issue 25), end to end with the real binaries on loopback.

segget-testserver's `expiring` mode signs URLs that answer 403 (S3's XML body) once their time is up;
`GET /_sign/NAME?ttl=S&...` mints a new one. A 64 MiB file at 2 MiB/s per request, 1 MiB per request,
over 8 connections takes about 4 s, and its links last 1-2 s, so they expire in the middle.

  - `segget -n 8 --refresh-command CMD`: identical file, at least one renewal, CMD saw SEGGET_* and its
    standard error is shown escaped;
  - a refresh command that mints a link to another object: exit 7, nothing from it written (the part
    file and journal byte for byte as they were when CMD ran), no final file;
  - no refresh command: exit 4 and a message naming --refresh-command; a rerun with a fresh link (a
    different URL) resumes the partial download;
  - a refresh command that fails, or runs past --refresh-timeout: exit 4 with the reason;
  - `segget daemon`: a WebSocket client answers `segget.onLinkExpired` with `aria2.changeUri`; the task
    completes identical; a task nobody renews fails after --link-renewal-wait with errorCode 22 (aria2's
    number for the expired link's 403).

Usage: link_renewal.py --segget BIN --testserver BIN --work DIR
       [--size-mib N --ttl S --query Q --renewals-only]   (Benchmarks/link-renewal.sh: 1 GiB, renewals only)"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from checks import check, free_port, rpc_reply, summary

SIZE = 64 << 20
QUERY = "rate=2m&max=1m"
TTL = 2
RENEWALS_ONLY = False


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def mint(base, name, extra=""):
    with urllib.request.urlopen(f"{base}/_sign/{name}?ttl={TTL}&{QUERY}{extra}", timeout=10) as r:
        return r.read().decode().strip()


def write_script(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)


def run_segget(segget, args, timeout=120):
    p = subprocess.run([segget] + args, capture_output=True, timeout=timeout)
    return p.returncode, p.stderr.decode(errors="replace")


class Notifications:
    """A WebSocket to the daemon that collects notifications in a thread (RFC 6455, text frames)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall((f"GET /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.s.recv(4096)
        self.buffer = data.partition(b"\r\n\r\n")[2]
        self.messages = []
        self.lock = threading.Lock()
        self.handlers = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _loop(self):
        try:
            while True:
                b0, b1 = self._read(2)
                length = b1 & 0x7F
                if length == 126:
                    length = int.from_bytes(self._read(2), "big")
                elif length == 127:
                    length = int.from_bytes(self._read(8), "big")
                data = self._read(length)
                if b0 & 0x0F == 1:
                    m = json.loads(data)
                    with self.lock:
                        self.messages.append(m)
                    for h in self.handlers:
                        h(m)
        except (OSError, ConnectionError, ValueError):
            pass

    def named(self, method):
        with self.lock:
            return [m for m in self.messages if m.get("method") == method]


class RPC:
    def __init__(self, port, secret):
        self.port, self.secret = port, secret

    def __call__(self, method, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                           "params": [f"token:{self.secret}"] + list(params)}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/jsonrpc", data=body,
                                     headers={"Content-Type": "application/json"})
        reply = rpc_reply(req, 15)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]


def wait_for(condition, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def cli_checks(args, base, www, work):
    want = sha256(os.path.join(www, "f.bin"))
    sign = f"{base}/_sign/f.bin?ttl={TTL}&{QUERY}"
    py_get = "python3 -c 'import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode().strip())'"

    # 1. Renewed by a command: identical, the environment as documented, stderr escaped.
    out = os.path.join(work, "one.bin")
    env_log = os.path.join(work, "env.log")
    refresh = os.path.join(work, "refresh.sh")
    write_script(refresh, f'echo "$SEGGET_STATUS $SEGGET_BYTES_DONE $SEGGET_TOTAL_BYTES $SEGGET_RENEWAL $SEGGET_OUTPUT $SEGGET_URL" >> {env_log}\n'
                          f'printf "renewing \\033[31mnow\\n" >&2\n{py_get} "{sign}"\n')
    first = mint(base, "f.bin")
    started = time.time()
    rc, err = run_segget(args.segget, ["-n", "8", "-o", out, "--refresh-command", refresh, first], timeout=1200)
    seconds = time.time() - started
    renewals = err.count("asking for a new link")
    check("--refresh-command: exit 0", rc == 0, err[-400:])
    check("--refresh-command: the file is identical", os.path.exists(out) and sha256(out) == want)
    check("--refresh-command: the link expired and was renewed at least once", renewals >= 1, err[-400:])
    lines = (read(env_log) or b"").decode().splitlines()
    first_env = lines[0].split(" ") if lines else []
    check("the command saw SEGGET_STATUS 403, the bytes done, the total, renewal 1, the output and the old URL",
          len(first_env) == 6 and first_env[0] == "403" and 0 < int(first_env[1]) < SIZE
          and first_env[2] == str(SIZE) and first_env[3] == "1" and first_env[4] == out and first_env[5] == first,
          str(lines[:2]))
    check("one run of the command per renewal", len(lines) == renewals, f"{len(lines)} runs, {renewals} renewals")
    check("the command's stderr is shown, escaped", "refresh command: renewing" in err and "\x1b" not in err, err[-300:])
    print(f"     ({SIZE >> 20} MiB at -n 8 with links valid {TTL} s: {renewals} renewals, {seconds:.1f} s)")
    if RENEWALS_ONLY:
        os.remove(out)
        return

    # 2. A renewed link to another object: refused, nothing from it written.
    out = os.path.join(work, "two.bin")
    snap = os.path.join(work, "snap")
    write_script(refresh, f'cp "$SEGGET_OUTPUT.segget-part" {snap}.part; cp "$SEGGET_OUTPUT.segget-journal" {snap}.journal\n'
                          f'{py_get} "{sign}&version=2"\n')
    rc, err = run_segget(args.segget, ["-n", "8", "-o", out, "--refresh-command", refresh, mint(base, "f.bin")])
    check("a renewed link to another object: exit 7", rc == 7, f"rc={rc} {err[-300:]}")
    check("the message says it serves a different file and nothing was written",
          "serves a different file" in err and "nothing from it was written" in err, err[-300:])
    check("no final file", not os.path.exists(out))
    check("the part file is byte for byte as when the link expired",
          read(snap + ".part") is not None and read(out + ".segget-part") == read(snap + ".part"))
    check("the journal is byte for byte as when the link expired",
          read(snap + ".journal") is not None and read(out + ".segget-journal") == read(snap + ".journal"))

    # 3. No way to renew: exit 4 and how to; a fresh link (another URL) resumes.
    out = os.path.join(work, "three.bin")
    rc, err = run_segget(args.segget, ["-n", "8", "-o", out, mint(base, "f.bin")])
    check("no --refresh-command: exit 4", rc == 4, f"rc={rc}")
    check("the message says the link expired, after how many bytes, and how to renew",
          "the link expired" in err and "answered HTTP 403 after" in err and "--refresh-command" in err
          and "fresh link" in err, err[-400:])
    # A fresh link (another URL, valid long enough) with no renewer: the partial download resumes.
    rc, err = run_segget(args.segget, ["-n", "8", "-o", out, mint(base, 'f.bin', '&ttl=600')])
    check("a rerun with a fresh link resumes the partial download and finishes identical",
          rc == 0 and "came from another URL" in err and "resuming:" in err and sha256(out) == want, err[-400:])
    # The same expired link again, now with --refresh-command: renewed before the first byte.
    out = os.path.join(work, "three-again.bin")
    expired = mint(base, "f.bin")
    rc, err = run_segget(args.segget, ["-n", "8", "-o", out, expired])
    write_script(refresh, f'{py_get} "{sign}"\n')
    rc, err = run_segget(args.segget, ["-n", "8", "-o", out, "--refresh-command", refresh, expired])
    check("rerunning the expired link with --refresh-command renews it at once and resumes",
          rc == 0 and "asking for a new link (renewal 1)" in err and "resuming:" in err and sha256(out) == want,
          err[-400:])

    # 4. A command that fails, or takes too long.
    out = os.path.join(work, "four.bin")
    write_script(refresh, "exit 3\n")
    rc, err = run_segget(args.segget, ["-n", "8", "-o", out, "--refresh-command", refresh, mint(base, "f.bin")])
    check("a failing refresh command: exit 4 with its status", rc == 4 and "exited with status 3" in err, err[-300:])
    write_script(refresh, "sleep 30\n")
    started = time.time()
    rc, err = run_segget(args.segget, ["-n", "8", "-o", out, "--refresh-command", refresh, "--refresh-timeout", "1",
                                       mint(base, "f.bin")])
    check("a refresh command past --refresh-timeout is stopped: exit 4",
          rc == 4 and "did not finish within" in err and time.time() - started < 20, err[-300:])


def daemon_checks(args, base, www, work):
    want = sha256(os.path.join(www, "f.bin"))
    port = free_port()
    downloads = os.path.join(work, "daemon")
    os.makedirs(downloads)
    log = open(os.path.join(work, "daemon.log"), "w")
    daemon = subprocess.Popen([args.segget, "daemon", "--rpc-listen-port", str(port), "--rpc-secret", "renew",
                               "--dir", downloads, "--database", os.path.join(work, "queue.sqlite"),
                               "--link-renewal-wait", "4"], stdout=log, stderr=subprocess.STDOUT)
    try:
        def listening():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return True
            except OSError:
                return False

        if not wait_for(lambda: daemon.poll() is None and listening(), 20):
            check("the daemon started", False)
            return
        rpc = RPC(port, "renew")
        ws = Notifications(port)
        answered = []

        def answer(m):
            if m.get("method") != "segget.onLinkExpired":
                return
            p = m["params"][0]
            if p["gid"] != renewing["gid"]:
                return
            fresh = mint(base, "f.bin")
            answered.append((p, rpc("aria2.changeUri", p["gid"], 1, [p["uri"]], [fresh])))

        renewing = {"gid": None}
        ws.handlers.append(answer)
        first = mint(base, "f.bin")
        started = time.time()
        renewing["gid"] = rpc("aria2.addUri", [first], {"split": "8", "out": "renewed.bin"})
        gid = renewing["gid"]
        done = wait_for(lambda: rpc("aria2.tellStatus", gid, ["status"])["status"] in ("complete", "error"), 1200)
        seconds = time.time() - started
        status = rpc("aria2.tellStatus", gid, ["status", "errorMessage", "files"])
        check("daemon: the task completes through changeUri", done and status["status"] == "complete", str(status))
        path = os.path.join(downloads, "renewed.bin")
        check("daemon: the file is identical", os.path.exists(path) and sha256(path) == want)
        check("daemon: segget.onLinkExpired came at least once and was answered", len(answered) >= 1)
        if answered:
            p, result = answered[0]
            check("daemon: the event names the expired URI, status 403, bytes done and total",
                  p["uri"] == first and p["status"] == "403" and 0 < int(p["completedLength"]) < SIZE
                  and p["totalLength"] == str(SIZE) and p["renewal"] == "1", str(p))
            check("daemon: changeUri answers [deleted, added] = [1, 1]", result == [1, 1], str(result))
        uris = [u["uri"] for u in rpc("aria2.getUris", gid)]
        check("daemon: the task's URI is the last renewed one", len(uris) == 1 and uris[0] != first, str(uris))
        print(f"     (daemon: {SIZE >> 20} MiB at split 8, {len(answered)} renewals through changeUri, {seconds:.1f} s)")
        if RENEWALS_ONLY:
            return

        # A task nobody renews fails after --link-renewal-wait.
        lonely = rpc("aria2.addUri", [mint(base, "f.bin")], {"split": "8", "out": "lonely.bin"})
        failed = wait_for(lambda: rpc("aria2.tellStatus", lonely, ["status"])["status"] == "error", 40)
        status = rpc("aria2.tellStatus", lonely, ["status", "errorCode", "errorMessage"])
        check("daemon: an unanswered segget.onLinkExpired fails the task after --link-renewal-wait",
              failed and "no RPC client gave a new link" in status.get("errorMessage", ""), str(status))
        check("daemon: its errorCode is 22 (aria2's number for a 403)", status.get("errorCode") == "22", str(status))
        check("daemon: the unanswered event was sent", any(m["params"][0]["gid"] == lonely
                                                           for m in ws.named("segget.onLinkExpired")))
        # changeUri's rules: the file index, and a task keeps one URI at least.
        try:
            rpc("aria2.changeUri", lonely, 2, [], [first])
            check("changeUri refuses file index 2", False)
        except RuntimeError:
            check("changeUri refuses file index 2", True)
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=15)
        except subprocess.TimeoutExpired:
            daemon.kill()


def main():
    global SIZE, TTL, QUERY, RENEWALS_ONLY
    parser = argparse.ArgumentParser()
    parser.add_argument("--segget", required=True)
    parser.add_argument("--testserver", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--ttl", type=int, default=2)
    parser.add_argument("--query", default="rate=2m&max=1m")
    parser.add_argument("--renewals-only", action="store_true")
    args = parser.parse_args()
    SIZE, TTL, QUERY, RENEWALS_ONLY = args.size_mib << 20, args.ttl, args.query, args.renewals_only
    www = os.path.join(args.work, "www")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "f.bin"), "wb") as f:
        for _ in range(SIZE >> 20):
            f.write(os.urandom(1 << 20))
    server = subprocess.Popen([args.testserver, "--port", "0", "--dir", www], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        base = server.stdout.readline().split()[2]
        cli_checks(args, base, www, args.work)
        daemon_checks(args, base, www, args.work)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return summary("link-renewal")


if __name__ == "__main__":
    sys.exit(main())
