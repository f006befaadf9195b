"""aria2c and `segget daemon` side by side, field by field: the same HTTP downloads driven through the
same states (paused before it starts, active, paused, removed, error, complete; errors from a 404,
a 401 and a 403, and failures mid-download within the task's max-tries and timeout: a server
that went away, whose port then refuses, and one that goes silent, also with those limits set for the
whole queue by changeGlobalOption) on each, and their answers compared. For every state: the same keys in tellStatus (numSeeders and seeder absent, bitfield
present once the length is known, errorCode and errorMessage only once stopped), every value of the
same JSON type, the same first URI status and errorCode. getGlobalOption and getOption: the same key
sets, "true"/"false" wherever aria2 answers a boolean, a number wherever aria2 answers a number.
JSON-RPC over GET (a call, JSONP, a batch, and four malformed queries): the same HTTP status, content
type and reply, results compared by the JSON types of their values.

Usage: daemon_aria2_fields.py --segget BIN --url BASE --work DIR
(BASE serves big.bin, small.bin and no missing.bin.)
"""

import argparse
import base64
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

from checks import check, free_port, summary


def wait_for(predicate, timeout, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception:
            pass
        time.sleep(step)
    return None


class Daemon:
    def __init__(self, name, argv, port, token, work):
        self.name, self.port, self.token = name, port, token
        self.log = open(os.path.join(work, name + ".log"), "w")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEGGET_RPC")}
        env.update(HOME=work, XDG_STATE_HOME=os.path.join(work, "state-" + name))
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        up = wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=0.2).close() is None
                      if self.proc.poll() is None else False, 20, 0.05)
        if not up:
            raise RuntimeError(f"{name} did not start listening (see {self.log.name})")

    def call(self, method, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                           "params": [f"token:{self.token}"] + list(params)}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/jsonrpc", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                reply = json.load(r)
        except urllib.error.HTTPError as e:
            reply = json.load(e)
        if "error" in reply:
            raise RuntimeError(f"{self.name} {method}: {reply['error']}")
        return reply["result"]

    def status(self, gid):
        return self.call("aria2.tellStatus", gid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def states(d, base, status_base):
    """Drives one daemon through the states; returns {state: tellStatus answer} and the option answers."""
    out = {}
    slow = {"max-download-limit": "2M", "pause": "true"}
    gid = d.call("aria2.addUri", [base + "/big.bin"], slow)
    out["paused before start"] = d.status(gid)
    out["getOption"] = d.call("aria2.getOption", gid)
    d.call("aria2.unpause", gid)
    # segget's state is taken once a piece is finished too: 3 MiB over 8 connections may all be in
    # chunks still under way (each 1 MiB chunk at 256 KiB/s takes 4 s), so the bitfield check
    # below would see none finished by chance of timing. A bitfield that never shows a finished
    # piece while active still fails: the state is then never reached.
    finished_piece = (lambda s: d.name != "segget" or int(s.get("bitfield") or "0", 16) != 0)
    out["active"] = wait_for(lambda: (s := d.status(gid))["status"] == "active"
                             and int(s["completedLength"]) >= 3 << 20 and finished_piece(s) and s, 30)
    d.call("aria2.pause", gid)
    out["paused"] = wait_for(lambda: (s := d.status(gid))["status"] == "paused" and s, 20)
    d.call("aria2.unpause", gid)
    wait_for(lambda: d.status(gid)["status"] == "active", 20)
    d.call("aria2.remove", gid)
    out["removed"] = wait_for(lambda: (s := d.status(gid))["status"] == "removed" and s, 20)
    bad = d.call("aria2.addUri", [base + "/missing.bin"])
    out["error"] = wait_for(lambda: (s := d.status(bad))["status"] == "error" and s, 30)
    for code in STATUSES:
        failing = d.call("aria2.addUri", [f"{status_base}/{code}/x.bin"])
        out[f"error {code}"] = wait_for(lambda: (s := d.status(failing))["status"] == "error" and s, 30)
    # Failures mid-download, each on a server of its own: the retries' last failure decides the
    # errorCode (aria2 1.36: a refused connection 1, a timeout 2; segget said 6 for both before),
    # within the task's own `max-tries` and `timeout` (the daemon kept 6 tries of 20 s before).
    fast = {"max-tries": "2", "retry-wait": "1", "timeout": "2", "split": "1"}
    gone = GoneAfterPart()
    failing = d.call("aria2.addUri", [gone.url], fast)
    out["error mid-download, refused"] = wait_for(lambda: (s := d.status(failing))["status"] == "error" and s, 40)
    gone.close()
    silent = SilentAfterPart()
    failing = d.call("aria2.addUri", [silent.url], fast)
    started = time.monotonic()
    out["error mid-download, silent"] = wait_for(lambda: (s := d.status(failing))["status"] == "error" and s, 40)
    out["silent seconds"] = time.monotonic() - started
    out["silent options"] = d.call("aria2.getOption", failing)
    silent.close()
    # The same, with the limits set for the whole queue (changeGlobalOption) and none on the task:
    # a task added after takes them, in aria2c as in segget (segget answered OK and kept its own).
    limits = ("max-tries", "retry-wait", "timeout")
    before = d.call("aria2.getGlobalOption")
    d.call("aria2.changeGlobalOption", {k: fast[k] for k in limits})
    silent = SilentAfterPart()
    # (A name of its own: the first silent task's partial file is not this server's to continue.)
    failing = d.call("aria2.addUri", [silent.url], {"split": "1", "out": "silent-queue.bin"})
    started = time.monotonic()
    out["error mid-download, silent, the queue's limits"] = wait_for(
        lambda: (s := d.status(failing))["status"] == "error" and s, 40)
    out["silent seconds, queue limits"] = time.monotonic() - started
    silent.close()
    d.call("aria2.changeGlobalOption", {k: before[k] for k in limits})
    small = d.call("aria2.addUri", [base + "/small.bin"])
    out["complete"] = wait_for(lambda: (s := d.status(small))["status"] == "complete" and s, 30)
    out["getGlobalOption"] = d.call("aria2.getGlobalOption")
    return out


# Failures whose aria2 errorCode is compared: aria2 1.36 numbers a 401 24, a 403 22.
STATUSES = (401, 403)


class StatusAnswers(http.server.BaseHTTPRequestHandler):
    """Answers GET /NNN/... with status NNN and a short body (Python's http.server)."""
    def do_GET(self):
        body = b"refused\n"
        self.send_response(int(self.path.split("/")[1]))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


PART_LENGTH = 8_000_000


def part_answer(request, sent=100_000):
    """The head and first `sent` bytes of an answer of PART_LENGTH bytes: a 206 for a `Range:
    bytes=A-`, else a 200, both taking ranges."""
    text = request.decode("latin-1")
    start = None
    for line in text.split("\r\n"):
        if line.lower().startswith("range: bytes="):
            start = int(line.split("=", 1)[1].split("-", 1)[0])
    if start is None:
        head = f"HTTP/1.1 200 OK\r\nAccept-Ranges: bytes\r\nContent-Length: {PART_LENGTH}\r\n\r\n"
    else:
        head = (f"HTTP/1.1 206 Partial Content\r\nAccept-Ranges: bytes\r\n"
                f"Content-Range: bytes {start}-{PART_LENGTH - 1}/{PART_LENGTH}\r\nContent-Length: {PART_LENGTH - start}\r\n\r\n")
    return head.encode() + b"x" * sent


class GoneAfterPart:
    """A server that answers its first request with part of the file, then closes the connection and
    stops listening: every later connection is refused."""
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/gone.bin"
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        conn, _ = self.sock.accept()
        conn.sendall(part_answer(conn.recv(65536)))
        time.sleep(0.2)
        # The port refuses before the connection ends: a re-dial in between would meet a reset (6),
        # not the refusal (1) this case compares.
        self.sock.close()
        conn.close()

    def close(self):
        self.sock.close()


class SilentAfterPart:
    """A server that answers every request with 16 KB of the file and then sends nothing more (a cut
    after fewer than 64 KiB counts as a failure for segget; after more it continues at once)."""
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/silent.bin"
        self.conns = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=lambda c=conn: c.sendall(part_answer(c.recv(65536), 16_000)), daemon=True).start()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the thread in accept()
        except OSError:
            pass
        self.sock.close()
        for c in self.conns:
            c.close()


def get_answers(d):
    """aria2's JSON-RPC over GET: each query's HTTP status, content type and body, with a result's
    values reduced to their JSON types (the daemons' versions and features differ)."""
    def b64(obj):
        return urllib.parse.quote(base64.b64encode(json.dumps(obj).encode()).decode(), safe="")
    token = [f"token:{d.token}"]
    queries = {
        "a call": f"method=aria2.tellActive&id=abc&params={b64(token)}",
        "JSONP": f"method=aria2.getGlobalStat&id=7&params={b64(token)}&jsoncallback=cb",
        "a batch": "params=" + b64([{"jsonrpc": "2.0", "method": "aria2.tellActive", "id": "q", "params": token},
                                    {"method": "aria2.tellStopped", "id": 2, "params": token + [0, 1, ["gid"]]}]),
        "no token": "method=aria2.tellActive&id=1",
        "no id": f"method=aria2.tellActive&params={b64(token)}",
        "params not base64": "method=aria2.tellActive&id=1&params=%40%40",
        "nothing": "",
    }
    def shape(v):
        if isinstance(v, dict):
            return {k: shape(x) for k, x in v.items()}
        if isinstance(v, list):
            return [shape(x) for x in v]
        return kind(v)
    out = {}
    for name, query in queries.items():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/jsonrpc?{query}", timeout=10) as r:
                status, ctype, body = r.status, r.headers.get("Content-Type"), r.read().decode()
        except urllib.error.HTTPError as e:
            status, ctype, body = e.code, e.headers.get("Content-Type"), e.read().decode()
        callback = body.startswith("cb(") and body.endswith(")")
        reply = json.loads(body[3:-1] if callback else body)
        for one in (reply if isinstance(reply, list) else [reply]):
            if "result" in one:
                one["result"] = shape(one["result"])
        out[name] = (status, ctype, callback, reply)
    return out


def kind(value):
    if isinstance(value, str):
        if value in ("true", "false"):
            return "bool-string"
        try:
            int(value)
            return "int-string"
        except ValueError:
            return "string"
    return type(value).__name__


def compare_status(state, a, s):
    if not check(f"{state}: both daemons reached it", a and s, f"aria2c {bool(a)}, segget {bool(s)}"):
        return
    check(f"{state}: tellStatus has aria2c's keys", set(a) == set(s),
          f"only aria2c: {sorted(set(a) - set(s))}, only segget: {sorted(set(s) - set(a))}")
    mismatched = [k for k in set(a) & set(s) if type(a[k]) is not type(s[k])]
    check(f"{state}: every value of aria2c's JSON type", not mismatched, mismatched)
    for key in ("errorCode",):
        if key in a:
            check(f"{state}: {key} as aria2c's", a.get(key) == s.get(key), f"aria2c {a.get(key)!r}, segget {s.get(key)!r}")
    fa, fs = a["files"][0], s["files"][0]
    check(f"{state}: files[0] has aria2c's keys", set(fa) == set(fs), f"{sorted(fa)} vs {sorted(fs)}")
    ua, us = fa["uris"][0]["status"], fs["uris"][0]["status"]
    check(f"{state}: the first URI is {ua!r} on both", ua == us, f"segget {us!r}")
    if "bitfield" in s:
        pieces = int(s["numPieces"])
        check(f"{state}: segget's bitfield has a bit per piece", len(s["bitfield"]) == 2 * ((pieces + 7) // 8),
              f"{len(s['bitfield'])} hex digits for {pieces} pieces")
    if state == "active":
        check("active: segget's bitfield shows finished pieces", int(s.get("bitfield", "0") or "0", 16) != 0,
              s.get("bitfield"))


# Answered by aria2 1.37.0 (the version segget's getVersion names), not yet by Debian 12's 1.36.0.
NEWER_THAN_1_36 = {"no-want-digest-header"}
# segget's own global options (Aria2OptionTable.seggetOnly), which aria2 does not have.
SEGGET_ONLY = {"speed-schedule"}


def compare_options(name, a, s):
    newer = (NEWER_THAN_1_36 if a.get("peer-agent") == "aria2/1.36.0" else set()) | SEGGET_ONLY
    check(f"{name}: aria2c's key set", set(a) | (newer & set(s)) == set(s),
          f"only aria2c: {sorted(set(a) - set(s))}, only segget: {sorted(set(s) - set(a) - newer)}")
    wrong = [f"{k}={s[k]!r} (aria2c {a[k]!r})" for k in set(a) & set(s)
             if kind(a[k]) in ("bool-string", "int-string") and kind(a[k]) != kind(s[k])]
    check(f"{name}: booleans and numbers where aria2c has them", not wrong, wrong)
    blank = [k for k in s if s[k] == ""]
    check(f"{name}: no blank values", not blank, blank)


def main():
    ap = argparse.ArgumentParser()
    for name in ("segget", "url", "work"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    token = "fields-test-token"
    answers = {}
    statuses = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StatusAnswers)
    threading.Thread(target=statuses.serve_forever, daemon=True).start()
    status_base = f"http://127.0.0.1:{statuses.server_address[1]}"
    for name in ("aria2c", "segget"):
        port = free_port()
        root = os.path.join(a.work, "dl-" + name)
        os.makedirs(root)
        argv = (["aria2c", "--enable-rpc", f"--rpc-listen-port={port}", f"--rpc-secret={token}", f"--dir={root}",
                 "--no-conf", "--quiet"] if name == "aria2c" else
                [a.segget, "daemon", "--rpc-listen-port", str(port), "--rpc-secret", token, "--dir", root,
                 "--database", os.path.join(a.work, "q.sqlite")])
        d = Daemon(name, argv, port, token, a.work)
        try:
            answers[name] = states(d, a.url, status_base)
            answers[name]["GET"] = get_answers(d)
        finally:
            d.stop()
    A, S = answers["aria2c"], answers["segget"]
    statuses.shutdown()
    for state in ("paused before start", "active", "paused", "removed", "error", "complete",
                  *(f"error {code}" for code in STATUSES), "error mid-download, refused",
                  "error mid-download, silent", "error mid-download, silent, the queue's limits"):
        compare_status(state, A[state], S[state])
    check("removed: segget's errorMessage is aria2c's", A["removed"] and S["removed"]
          and A["removed"].get("errorMessage") == S["removed"].get("errorMessage"))
    # The task's own tries and time limit held: two tries of 2 s each and a wait, not six of 20 s.
    check("silent: segget's task kept its max-tries and timeout",
          S["silent options"].get("max-tries") == "2" and S["silent options"].get("timeout") == "2",
          str({k: S["silent options"].get(k) for k in ("max-tries", "timeout", "retry-wait")}))
    check("silent: segget's task failed within its own limits (under 20 s)", S["silent seconds"] < 20,
          f"{S['silent seconds']:.1f} s (aria2c {A['silent seconds']:.1f} s)")
    check("silent: with the queue's limits, segget's task failed within them (under 20 s)",
          S["silent seconds, queue limits"] < 20,
          f"{S['silent seconds, queue limits']:.1f} s (aria2c {A['silent seconds, queue limits']:.1f} s)")
    compare_options("getGlobalOption", A["getGlobalOption"], S["getGlobalOption"])
    compare_options("getOption", A["getOption"], S["getOption"])
    for query, answer in A["GET"].items():
        check(f"GET, {query}: segget answers as aria2c does", S["GET"][query] == answer,
              f"aria2c {answer}, segget {S['GET'][query]}")
    check("segget's user-agent is its own", S["getGlobalOption"].get("user-agent", "").startswith("segget/"))
    return summary("daemon-aria2-fields")


if __name__ == "__main__":
    sys.exit(main())
