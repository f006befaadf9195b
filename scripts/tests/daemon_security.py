"""`segget daemon` is safe by default (issue 26): against the real daemon, with the standard library only.

- A default start (no --rpc-secret) makes a 128-bit token in its state directory, mode 0600, and
  refuses calls without it (code 1, "Unauthorized") over HTTP and WebSocket, from any Origin; CORS
  preflights from any origin are still answered, and system.listMethods needs no token.
- A DNS-rebinding Host (evil.example:PORT) is refused with 421 over HTTP, on the preflight and at the
  WebSocket upgrade, even with the right token; loopback names are answered, with any port (a tunnel). A hostile Host is logged
  escaped.
- Wrong tokens are slowed down (bounded) and logged once per burst; the right token is answered at once.
- The token file survives a restart unchanged; segget's client verbs and `segget token` work with no
  secret given; a token file others can read is refused.
- --rpc-insecure-no-secret works on loopback (loudly logged, Host checks still on) and is refused with
  --rpc-listen-all.
- The shipped systemd unit, started as systemd would start it with no daemon.env, requires the token;
  with SEGGET_RPC_SECRET in daemon.env it requires that one, which is not on its command line.
- A token given with --rpc-secret is overwritten with '*' in the process's command line.

Usage: daemon_security.py --segget BIN --unit contrib/segget-daemon.service --work DIR
Prints one line per check and exits 1 on any failure.
"""

import argparse
import base64
import json
import os
import re
import shlex
import signal
import socket
import stat
import subprocess
import urllib.parse
import sys
import time

from checks import check, free_port, recv_all, summary


def http(port, body, host=None, method="POST", origin="http://evil.example", extra=""):
    """One request on a fresh connection: (status, headers text, body text)."""
    body = body.encode() if isinstance(body, str) else body
    host = host if host is not None else f"127.0.0.1:{port}"
    head = f"{method} /jsonrpc HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nConnection: close\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    s.sendall(head.encode() + body)
    data = recv_all(s)
    s.close()
    if not data.startswith(b"HTTP/"):
        return 0, "", ""
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(data.split(b" ", 2)[1]), head.decode(errors="replace"), rest.decode(errors="replace")


def rpc(method, params, token=None, id=1):
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": method,
                       "params": ([f"token:{token}"] if token is not None else []) + params})


def error_of(text):
    try:
        reply = json.loads(text)
    except ValueError:
        return None
    e = reply.get("error") if isinstance(reply, dict) else None
    return (e.get("code"), e.get("message")) if e else None


class WebSocket:
    """A minimal RFC 6455 client: the upgrade with a chosen Host and Origin, masked text frames."""

    def __init__(self, port, host=None, origin="http://evil.example"):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=15)
        host = host if host is not None else f"127.0.0.1:{port}"
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall((f"GET /jsonrpc HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nUpgrade: websocket\r\n"
                        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.s.recv(4096)
            if not chunk:
                break
            data += chunk
        self.status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
        self.buffer = data.partition(b"\r\n\r\n")[2]

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def call(self, text):
        payload = text.encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        else:
            header += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        self.s.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        while True:
            b0, b1 = self._read(2)
            length = b1 & 0x7F
            if length == 126:
                length = int.from_bytes(self._read(2), "big")
            elif length == 127:
                length = int.from_bytes(self._read(8), "big")
            data = self._read(length)
            if b0 & 0x0F == 1:
                message = json.loads(data)
                if "method" not in message:  # skip notifications
                    return message

    def close(self):
        self.s.close()


class Daemon:
    def __init__(self, argv, env, log):
        self.log = log
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=open(log, "w"))

    def wait_listening(self, port):
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return True
            except OSError:
                if self.proc.poll() is not None:
                    return False
                time.sleep(0.05)
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()


def main():
    ap = argparse.ArgumentParser()
    for name in ("segget", "unit", "work"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    work = a.work
    home = os.path.join(work, "home")
    state = os.path.join(work, "state")
    root = os.path.join(work, "root")
    for d in (home, root):
        os.makedirs(d, exist_ok=True)
    # Nothing reaches the real user's state: HOME and XDG_STATE_HOME point into the work directory.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGGET_RPC")}
    env.update(HOME=home, XDG_STATE_HOME=state)
    token_path = os.path.join(state, "segget", "rpc-secret")
    port = free_port()
    env["SEGGET_RPC_PORT"] = str(port)
    argv = [a.segget, "daemon", "--rpc-listen-port", str(port), "--dir", root, "--database", os.path.join(work, "q.sqlite")]

    def segget(*args, extra_env=None):
        e = dict(env, **(extra_env or {}))
        return subprocess.run([a.segget, *args], env=e, capture_output=True, text=True, timeout=30)

    # 1. A default start makes the token file.
    d = Daemon(argv, env, os.path.join(work, "daemon-1.log"))
    try:
        check("default start listens", d.wait_listening(port), d.text()[-300:])
        st = os.stat(token_path) if os.path.exists(token_path) else None
        check("token file made in the state directory", st is not None, token_path)
        if st is None:
            raise SystemExit(1)
        token = open(token_path).read().strip()
        check("token file mode 0600", stat.S_IMODE(st.st_mode) == 0o600, oct(stat.S_IMODE(st.st_mode)))
        check("state directory mode 0700", stat.S_IMODE(os.stat(os.path.dirname(token_path)).st_mode) == 0o700)
        check("token is 128 bits of hex", re.fullmatch(r"[0-9a-f]{32}", token) is not None, token)
        check("start logs where the new token is", "made a new RPC token in " + token_path in d.text(), d.text()[-300:])

        # 2. HTTP from any origin: no token, a wrong token -> Unauthorized; addUri queues nothing.
        for origin in ("http://evil.example", "null", "http://127.0.0.1:8080"):
            status, _, body = http(port, rpc("aria2.getGlobalStat", []), origin=origin)
            # HTTP 400 with the error, as aria2 answers a failed call.
            check(f"HTTP without token from Origin {origin}: code 1 Unauthorized",
                  status == 400 and error_of(body) == (1, "Unauthorized"), f"{status} {body[:120]}")
        # The same by GET (aria2's JSON-RPC over GET, also JSONP): refused the same way, nothing queued.
        evil = base64.b64encode(json.dumps([["http://127.0.0.1:9/evil.bin"]]).encode()).decode()
        for cb in ("", "&jsoncallback=cb"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                c.sendall(f"GET /jsonrpc?method=aria2.addUri&id=1&params={urllib.parse.quote(evil, safe='')}{cb} HTTP/1.1\r\n"
                          f"Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example\r\nConnection: close\r\n\r\n".encode())
                answer = b""
                while chunk := c.recv(65536):
                    answer += chunk
            text = answer.decode(errors="replace")
            check(f"GET addUri without token{cb and ' (JSONP)'} refused", text.startswith("HTTP/1.1 400")
                  and '"code":1,"message":"Unauthorized"' in text, text[:300])
        status, _, body = http(port, rpc("aria2.addUri", [["http://127.0.0.1:9/evil.bin"]]))
        check("HTTP addUri without token refused", error_of(body) == (1, "Unauthorized"), body[:120])
        status, _, body = http(port, rpc("aria2.addUri", [["http://127.0.0.1:9/evil.bin"]], token="0" * 32))
        check("HTTP addUri with a wrong token refused", error_of(body) == (1, "Unauthorized"), body[:120])
        status, _, body = http(port, rpc("aria2.tellStopped", [0, 100, ["gid"]], token=token))
        check("nothing was queued by the refused calls", status == 200 and json.loads(body).get("result") == [], body[:200])
        status, head, _ = http(port, "", method="OPTIONS",
                               extra="Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\n")
        check("CORS preflight from another origin still answered",
              status == 200 and "access-control-allow-origin: *" in head.lower(), f"{status} {head[:200]}")
        status, _, body = http(port, rpc("system.listMethods", []))
        check("system.listMethods needs no token", status == 200 and "aria2.addUri" in body, body[:120])
        status, _, body = http(port, rpc("aria2.getVersion", [], token=token))
        check("HTTP with the token works", status == 200 and '"version"' in body, body[:120])

        # 3. WebSocket from any origin: the token on every call.
        ws = WebSocket(port)
        check("WebSocket from Origin evil.example is upgraded", ws.status == 101, str(ws.status))
        r = ws.call(rpc("aria2.getGlobalStat", []))
        check("WebSocket without token: code 1 Unauthorized", r.get("error") == {"code": 1, "message": "Unauthorized"}, str(r))
        r = ws.call(rpc("aria2.getGlobalStat", [], token=token))
        check("WebSocket with the token works", "numActive" in r.get("result", {}), str(r))
        r = ws.call(rpc("aria2.addUri", [["http://127.0.0.1:9/x"]], token="wrong"))
        check("WebSocket: a later call with a wrong token is refused", r.get("error", {}).get("code") == 1, str(r))
        r = ws.call(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "system.multicall", "params": [[
            {"methodName": "aria2.getVersion", "params": []},
            {"methodName": "aria2.getVersion", "params": [f"token:{token}"]}]]}))
        res = r.get("result", [])
        check("WebSocket multicall checks each call's token",
              len(res) == 2 and res[0] == {"code": 1, "message": "Unauthorized"} and "version" in res[1][0], str(r)[:200])
        ws.close()

        # 4. DNS rebinding: a Host that is not a loopback name is refused, even with the token; a
        # loopback name with another port (an SSH tunnel, ssh -L 6801:127.0.0.1:PORT) is answered.
        for host in (f"evil.example:{port}", "evil.example", f"localhost.evil.example:{port}", f"0.0.0.0:{port}"):
            status, _, body = http(port, rpc("aria2.getVersion", [], token=token), host=host)
            check(f"HTTP with Host {host} refused (421)", status == 421 and "version" not in body, f"{status} {body[:100]}")
        for host in (f"127.0.0.1:{port + 1}", "localhost"):
            status, _, body = http(port, rpc("aria2.getVersion", [], token=token), host=host)
            check(f"HTTP with Host {host} (a tunnel) answered", status == 200 and "version" in body, f"{status} {body[:100]}")
        status, _, _ = http(port, "", method="OPTIONS", host=f"evil.example:{port}",
                            extra="Access-Control-Request-Method: POST\r\n")
        check("preflight with a rebinding Host refused (421)", status == 421, str(status))
        ws = WebSocket(port, host=f"evil.example:{port}")
        check("WebSocket upgrade with a rebinding Host refused (421)", ws.status == 421, str(ws.status))
        ws.close()
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
            status, _, body = http(port, rpc("aria2.getVersion", [], token=token), host=host)
            check(f"Host {host} answered", status == 200 and '"version"' in body, f"{status} {body[:100]}")
        ws = WebSocket(port, host=f"localhost:{port}")
        check("WebSocket upgrade with Host localhost answered", ws.status == 101, str(ws.status))
        ws.close()
        # Control characters are refused by the HTTP parser before any check; bytes outside ASCII and a
        # backslash reach the Host check and must be logged escaped.
        http(port, rpc("aria2.getVersion", [], token=token), host="evil\u00e9\\x.example")
        log = d.text()
        check("a hostile Host is logged escaped", "'evil\\xc3\\xa9\\x5cx.example'" in log and "\u00e9" not in log,
              log[-400:])

        # 5. Wrong tokens: slowed down (bounded), one log line per burst; the right token at once.
        times = []
        for _ in range(8):
            started = time.time()
            http(port, rpc("aria2.getVersion", [], token="guess"))
            times.append(time.time() - started)
        check("repeated wrong tokens are slowed down", times[-1] >= 0.7, ", ".join(f"{t:.2f}" for t in times))
        check("the slow-down is bounded (2 s)", max(times) < 3.0, ", ".join(f"{t:.2f}" for t in times))
        started = time.time()
        status, _, body = http(port, rpc("aria2.getVersion", [], token=token))
        took = time.time() - started
        # At once: well under the 0.7 s and more that a wrong token waits by now, with room for a
        # loaded machine.
        check("the right token is answered at once meanwhile", '"version"' in body and took < 0.6, f"{took:.2f} s")
        ws = WebSocket(port)
        started = time.time()
        r = ws.call(rpc("aria2.getVersion", [], token=token))
        took = time.time() - started
        ws.close()
        check("... over WebSocket too", "version" in r.get("result", {}) and took < 0.6, f"{took:.2f} s")
        bursts = d.text().count("carried a wrong or missing RPC token")
        check("the burst of wrong tokens is logged once", bursts == 1, f"{bursts} lines")

        # 6. The client verbs and `segget token` with no secret given.
        r = segget("ls")
        check("segget ls works with no secret given", r.returncode == 0 and "GID" in r.stdout, r.stderr[-200:])
        r = segget("add", "http://127.0.0.1:9/x.bin", "--paused")
        gid = r.stdout.strip()
        check("segget add works with no secret given", r.returncode == 0 and re.fullmatch(r"[0-9a-f]{16}", gid),
              r.stderr[-200:])
        r1, r2, r3 = segget("resume", gid), segget("pause", gid), segget("rm", gid)
        check("segget resume, pause, rm work with no secret given",
              all(x.returncode == 0 for x in (r1, r2, r3)), (r1.stderr + r2.stderr + r3.stderr)[-200:])
        r = segget("token")
        check("segget token shows the token and the URLs",
              r.returncode == 0 and token in r.stdout and f"ws://127.0.0.1:{port}/jsonrpc" in r.stdout
              and f"token={token}" in r.stdout, r.stdout + r.stderr)
        r = segget("ls", extra_env={"SEGGET_RPC_SECRET": "wrong"})
        check("a wrong SEGGET_RPC_SECRET overrides the file and is refused (exit 2)",
              r.returncode == 2 and "Unauthorized" in r.stderr, r.stderr[-200:])
    finally:
        d.stop()

    # 7. A restart keeps the token.
    before = os.stat(token_path)
    d = Daemon(argv, env, os.path.join(work, "daemon-2.log"))
    try:
        check("restart listens", d.wait_listening(port), d.text()[-300:])
        after = os.stat(token_path)
        check("token file survives the restart unchanged (same file, same token, 0600)",
              after.st_ino == before.st_ino and open(token_path).read().strip() == token
              and stat.S_IMODE(after.st_mode) == 0o600)
        status, _, body = http(port, rpc("aria2.getVersion", [], token=token))
        check("the old token still works", '"version"' in body, body[:100])
        status, _, body = http(port, rpc("aria2.getVersion", []))
        check("and is still required", error_of(body) == (1, "Unauthorized"), body[:100])
        check("restart logs the token file it uses", "calls must carry the RPC token in " + token_path in d.text())
    finally:
        d.stop()

    # 8. A token file other users can read is refused, by the daemon and by the clients.
    os.chmod(token_path, 0o644)
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    check("daemon refuses a token file readable by others", r.returncode != 0 and "chmod 600" in r.stderr, r.stderr[-300:])
    r = segget("ls")
    check("client refuses it too", r.returncode != 0 and "chmod 600" in r.stderr, r.stderr[-300:])
    os.chmod(token_path, 0o600)

    # 9. --rpc-secret overrides the file.
    d = Daemon(argv + ["--rpc-secret", "given-secret"], env, os.path.join(work, "daemon-3.log"))
    try:
        d.wait_listening(port)
        _, _, body = http(port, rpc("aria2.getVersion", [], token=token))
        ok_file = error_of(body) == (1, "Unauthorized")
        _, _, body = http(port, rpc("aria2.getVersion", [], token="given-secret"))
        check("--rpc-secret overrides the token file", ok_file and '"version"' in body, body[:100])
        # Every local user can read a process's command line (ps, /proc/PID/cmdline): the token is
        # overwritten there, as aria2c does (it showed "--rpc-secret given-secret").
        with open(f"/proc/{d.proc.pid}/cmdline", "rb") as f:
            shown = f.read().split(b"\0")
        check("--rpc-secret's value is hidden from the process list",
              b"given-secret" not in b" ".join(shown) and b"*" * len("given-secret") in shown, str(shown))
    finally:
        d.stop()

    # 10. The explicit no-secret mode: loopback only, loud, Host checks still on.
    r = subprocess.run(argv + ["--rpc-insecure-no-secret", "--rpc-listen-all"], env=env, capture_output=True,
                       text=True, timeout=30)
    check("--rpc-insecure-no-secret refused with --rpc-listen-all",
          r.returncode == 2 and "loopback only" in r.stderr, f"exit {r.returncode}: {r.stderr[-300:]}")
    fresh = dict(env, XDG_STATE_HOME=os.path.join(work, "state-insecure"))
    d = Daemon(argv + ["--rpc-insecure-no-secret"], fresh, os.path.join(work, "daemon-4.log"))
    try:
        check("--rpc-insecure-no-secret starts on loopback", d.wait_listening(port), d.text()[-300:])
        check("... with a loud warning", "WARNING: --rpc-insecure-no-secret" in d.text(), d.text()[-300:])
        check("... and makes no token file", not os.path.exists(os.path.join(work, "state-insecure", "segget", "rpc-secret")))
        _, _, body = http(port, rpc("aria2.getVersion", []))
        check("... answers calls without a token", '"version"' in body, body[:100])
        ws = WebSocket(port)
        r = ws.call(rpc("aria2.getVersion", []))
        ws.close()
        check("... over WebSocket too", "version" in r.get("result", {}), str(r))
        status, _, _ = http(port, rpc("aria2.getVersion", []), host=f"evil.example:{port}")
        check("... still refuses a rebinding Host", status == 421, str(status))
        r = subprocess.run([a.segget, "ls"], env=fresh, capture_output=True, text=True, timeout=30)
        check("... and the client verbs work against it", r.returncode == 0, r.stderr[-200:])
    finally:
        d.stop()

    # 11. The systemd unit as systemd starts it: no daemon.env -> the token file; with one -> its secret.
    unit_home = os.path.join(work, "unit-home")
    os.makedirs(unit_home)
    for with_env in (False, True):
        if with_env:
            os.makedirs(os.path.join(unit_home, ".config", "segget"), exist_ok=True)
            with open(os.path.join(unit_home, ".config", "segget", "daemon.env"), "w") as f:
                f.write(f"SEGGET_RPC_SECRET=from-env-file\nSEGGET_DOWNLOAD_DIR={root}\n"
                        f"SEGGET_DAEMON_OPTIONS=--rpc-listen-port {port}\n")
        unit_argv, unit_env = systemd_command(a.unit, a.segget, unit_home, port)
        name = "with daemon.env" if with_env else "with no daemon.env"
        d = Daemon(unit_argv, unit_env, os.path.join(work, f"unit-{with_env}.log"))
        try:
            check(f"unit {name} starts", d.wait_listening(port), " ".join(unit_argv) + " " + d.text()[-300:])
            _, _, body = http(port, rpc("aria2.getVersion", []))
            check(f"unit {name} requires a token", error_of(body) == (1, "Unauthorized"), body[:100])
            expected = "from-env-file" if with_env else open(
                os.path.join(unit_home, ".local", "state", "segget", "rpc-secret")).read().strip()
            _, _, body = http(port, rpc("aria2.getVersion", [], token=expected))
            check(f"unit {name} accepts {'the env file secret' if with_env else 'the token file'}", '"version"' in body,
                  body[:100])
            with open(f"/proc/{d.proc.pid}/cmdline", "rb") as f:
                shown = f.read()
            check(f"unit {name}: no token on its command line", b"from-env-file" not in shown and b"rpc-secret" not in shown,
                  str(shown))
        finally:
            d.stop()

    return summary("daemon-security")


def systemd_command(unit_path, segget, home, port):
    """ExecStart of the unit expanded as systemd does for a user unit: %h is the home directory;
    Environment= lines in order, then EnvironmentFile= (a leading '-' makes it optional) overriding them;
    "${VAR}" becomes exactly one argument, a lone "$VAR" word becomes its value split at whitespace."""
    env = {"HOME": home, "PATH": os.environ.get("PATH", "")}
    exec_start = None
    files = []
    with open(unit_path) as f:
        for line in f:
            line = line.strip().replace("%h", home)
            if line.startswith("Environment="):
                for word in shlex.split(line[len("Environment="):]):
                    k, _, v = word.partition("=")
                    env[k] = v
            elif line.startswith("EnvironmentFile="):
                files.append(line[len("EnvironmentFile="):])
            elif line.startswith("ExecStart="):
                exec_start = line[len("ExecStart="):].replace("@BINDIR@/segget", segget)
    for path in files:
        optional = path.startswith("-")
        path = path.lstrip("-")
        if not os.path.exists(path):
            if optional:
                continue
            raise SystemExit(f"{path} is missing")
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, _, v = line.partition("=")
                    env[k] = v
    # Without daemon.env the unit listens on 6800, which may be taken here; the test moves it to a free
    # port as a drop-in (systemctl --user edit) would: Environment=SEGGET_DAEMON_OPTIONS=--rpc-listen-port N.
    if not env.get("SEGGET_DAEMON_OPTIONS"):
        env["SEGGET_DAEMON_OPTIONS"] = f"--rpc-listen-port {port}"
    argv = []
    for word in shlex.split(exec_start):
        lone = re.fullmatch(r"\$(\w+)", word)
        if lone:
            argv += env.get(lone.group(1), "").split()
        else:
            argv.append(re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), word))
    return argv, env


if __name__ == "__main__":
    sys.exit(main())
