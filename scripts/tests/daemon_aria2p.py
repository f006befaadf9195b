"""Drives an aria2-compatible JSON-RPC daemon with aria2p (library and command line) and checks the
results on disk. The same scenario runs against `segget daemon` and against `aria2c --enable-rpc`, so
that it checks aria2's behaviour, not segget's idea of it.

Usage: daemon_aria2p.py --target segget|aria2c --bin PATH --base URL --www DIR --log NGINX_ACCESS_LOG --work DIR
Prints one line per check ("ok ..." / "FAIL ...") and a summary; exits 1 on any failure.
"""

import argparse
import filecmp
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time

import aria2p
from websockets.sync.client import connect as ws_connect

from checks import free_port

results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok), detail))
    print(("ok   " if ok else "FAIL ") + name + (f" ({detail})" if detail else ""), flush=True)
    return ok


def start_daemon(target, binary, port, secret, download_dir, work):
    """Starts the daemon; returns it and the token clients must give. segget is started as a user starts
    it, with no secret: it makes its own token file (in a state directory under `work`), which is read here
    as a user would paste it from `segget token`."""
    log = open(os.path.join(work, f"{target}.log"), "w")
    env = None
    if target == "segget":
        argv = [binary, "daemon", "--rpc-listen-port", str(port), "--dir", download_dir,
                "--database", os.path.join(work, "queue.sqlite")]
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(work, "state"))
        env.pop("SEGGET_RPC_SECRET", None)
    else:
        argv = [binary, "--enable-rpc", f"--rpc-listen-port={port}", f"--rpc-secret={secret}", f"--dir={download_dir}",
                "--quiet=true", "--daemon=false", "--check-certificate=false", "--auto-file-renaming=false",
                "--allow-overwrite=true"]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            if target == "segget":
                with open(os.path.join(work, "state", "segget", "rpc-secret")) as f:
                    secret = f.read().strip()
            return proc, secret
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"{target} exited with {proc.returncode}; see {log.name}")
            time.sleep(0.05)
    raise SystemExit(f"{target} did not listen on port {port} within 20 s")


class Notifications:
    """Collects aria2 notifications from the daemon's WebSocket in a thread."""

    def __init__(self, port):
        self.events = []
        self.url = f"ws://127.0.0.1:{port}/jsonrpc"
        self.ws = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        if not self.ready.wait(5):
            raise SystemExit(f"could not open {self.url}")

    def run(self):
        try:
            with ws_connect(self.url, open_timeout=5) as ws:
                self.ws = ws
                self.ready.set()
                for message in ws:
                    data = json.loads(message)
                    if "method" in data:
                        for p in data.get("params", []):
                            self.events.append((data["method"], p.get("gid")))
        except Exception:
            pass

    def has(self, method, gid):
        return (method, gid) in self.events

    def close(self):
        if self.ws is not None:
            self.ws.close()


def wait_for(predicate, timeout, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def status(api, gid):
    """The download's status fields; status "gone" once its result was removed."""
    try:
        return api.client.tell_status(gid, ["gid", "status", "completedLength", "totalLength"])
    except aria2p.ClientException as e:
        if "not found" in e.message:
            return {"gid": gid, "status": "gone", "completedLength": "0", "totalLength": "0"}
        raise


def run_cli(port, secret, *args):
    argv = [os.path.join(os.path.dirname(sys.executable), "aria2p"), "-p", str(port), "-s", secret, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def main():
    ap = argparse.ArgumentParser()
    for name in ("target", "bin", "base", "www", "log", "work"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    download_dir = os.path.join(a.work, "downloads")
    os.makedirs(os.path.join(download_dir, "sub"), exist_ok=True)
    port = free_port()
    proc, secret = start_daemon(a.target, a.bin, port, secrets.token_hex(8), download_dir, a.work)
    started = time.time()
    try:
        api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=port, secret=secret))
        notes = Notifications(port)

        # A wrong token is refused with aria2's exact error.
        bad = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=port, secret="wrong"))
        try:
            bad.get_downloads()
            check("wrong token refused", False, "call succeeded")
        except aria2p.ClientException as e:
            check("wrong token refused", e.code == 1 and e.message == "Unauthorized", f"{e.code} {e.message}")

        # Three URLs: one renamed with out, one into another dir, one with a header nginx logs.
        d_out = api.add_uris([f"{a.base}/a.bin"], options={"out": "renamed.bin"})
        d_dir = api.add_uris([f"{a.base}/b.bin"], options={"dir": os.path.join(download_dir, "sub")})
        marker = "h-" + secrets.token_hex(4)
        d_hdr = api.add_uris([f"{a.base}/c.bin"], options={"header": [f"X-Segget-Test: {marker}"]})
        # Two slow ones (nginx caps each connection) for pause/unpause and remove mid-download.
        slow_opts = {"split": "2", "max-connection-per-server": "2"}
        d_pause = api.add_uris([f"{a.base}/slow/d.bin"], options=slow_opts)
        d_remove = api.add_uris([f"{a.base}/slow/e.bin"], options=slow_opts)
        gids = {d.gid for d in (d_out, d_dir, d_hdr, d_pause, d_remove)}
        check("addUri returns 16-hex-digit gids", all(len(g) == 16 and int(g, 16) >= 0 for g in gids) and len(gids) == 5)

        listed = {d.gid for d in api.get_downloads()}
        check("list shows every added download", gids <= listed, f"{len(gids & listed)}/5")
        st = api.client.tell_status(d_pause.gid)
        keys = ["gid", "status", "totalLength", "completedLength", "uploadLength", "downloadSpeed", "uploadSpeed",
                "connections", "numSeeders", "pieceLength", "numPieces", "dir", "files"]
        missing = [k for k in keys if k not in st and not (k == "numSeeders")]
        check("tellStatus has the keys front-ends read", not missing, f"missing {missing}" if missing else "")
        check("every status value is a string", all(isinstance(st[k], str) for k in st if k != "files"))
        filtered = api.client.tell_status(d_pause.gid, ["gid", "status"])
        check("tellStatus keys filter", set(filtered) == {"gid", "status"}, str(sorted(filtered)))

        # Pause one mid-download, see it hold still, unpause it.
        def mid(gid):
            s = status(api, gid)
            return s["status"] == "active" and 0 < int(s["completedLength"]) < int(s["totalLength"] or 0)

        check("slow download is mid-way", wait_for(lambda: mid(d_pause.gid), 20))
        api.pause([d_pause])
        check("pause -> paused", wait_for(lambda: status(api, d_pause.gid)["status"] == "paused", 10),
              status(api, d_pause.gid)["status"])
        before = int(status(api, d_pause.gid)["completedLength"])
        time.sleep(1.0)
        after = int(status(api, d_pause.gid)["completedLength"])
        check("paused download holds still", after == before, f"{before} -> {after}")
        waiting = {d["gid"] for d in api.client.tell_waiting(0, 1000, ["gid"])}
        check("paused download is in tellWaiting", d_pause.gid in waiting)
        api.resume([d_pause])
        check("unpause -> active or done", wait_for(
            lambda: status(api, d_pause.gid)["status"] in ("active", "waiting", "complete"), 10))

        # A task that never ran, paused from the start and removed: no notification, as in aria2 (a
        # front-end counting events saw a pause or a stop with no start before it).
        d_quiet = api.add_uris([f"{a.base}/slow/e.bin"], options={"pause": "true", "out": "quiet.bin"})
        api.client.remove(d_quiet.gid)
        # (aria2c forgets a task removed before it ran; segget keeps it as removed.)
        check("a paused task removed -> removed",
              wait_for(lambda: status(api, d_quiet.gid)["status"] in ("removed", "gone"), 10),
              status(api, d_quiet.gid)["status"])

        # Remove one while it runs.
        check("download to remove is mid-way", wait_for(lambda: mid(d_remove.gid), 20))
        # The raw call: aria2p's API.remove also drops the result, and the history is checked below.
        api.client.remove(d_remove.gid)
        check("remove -> removed", wait_for(lambda: status(api, d_remove.gid)["status"] == "removed", 10),
              status(api, d_remove.gid)["status"])

        # Wait for the rest.
        rest = [d_out, d_dir, d_hdr, d_pause]
        done = wait_for(lambda: all(status(api, d.gid)["status"] == "complete" for d in rest), 90, 0.2)
        check("the other four complete", done, ", ".join(status(api, d.gid)["status"] for d in rest))
        expect = {
            os.path.join(download_dir, "renamed.bin"): "a.bin",
            os.path.join(download_dir, "sub", "b.bin"): "b.bin",
            os.path.join(download_dir, "c.bin"): "c.bin",
            os.path.join(download_dir, "d.bin"): "d.bin",
        }
        for path, name in expect.items():
            same = os.path.exists(path) and filecmp.cmp(path, os.path.join(a.www, name), shallow=False)
            check(f"{os.path.relpath(path, download_dir)} is byte-identical to {name}", same)
        with open(a.log) as f:
            header_seen = any(marker in line and "/c.bin" in line for line in f)
        check("the header option reached the server", header_seen)

        # A missing file: status error, aria2's code 3 (resource not found), a message, a notification.
        missing = api.client.add_uri([f"{a.base}/no-such-file.bin"])
        check("a 404 ends in status error", wait_for(lambda: status(api, missing)["status"] == "error", 20),
              status(api, missing)["status"])
        err = api.client.tell_status(missing, ["errorCode", "errorMessage"])
        check("errorCode 3 and a message for the 404", err.get("errorCode") == "3" and err.get("errorMessage"),
              json.dumps(err)[:160])
        check("onDownloadError for the 404", wait_for(lambda: notes.has("aria2.onDownloadError", missing), 5))
        gids.add(missing)

        stopped = {d["gid"]: d["status"] for d in api.client.tell_stopped(0, 1000, ["gid", "status"])}
        check("tellStopped lists the finished and the removed",
              all(stopped.get(d.gid) == "complete" for d in rest) and stopped.get(d_remove.gid) == "removed")
        newest = api.client.tell_stopped(-1, 1, ["gid"])
        check("tellStopped(-1, 1) gives one entry", len(newest) == 1)
        stat = api.client.get_global_stat()
        check("getGlobalStat values are strings", all(isinstance(v, str) for v in stat.values()), json.dumps(stat))

        # Notifications for the right gids.
        def notified():
            return (all(notes.has("aria2.onDownloadComplete", d.gid) for d in rest)
                    and notes.has("aria2.onDownloadPause", d_pause.gid)
                    and notes.has("aria2.onDownloadStop", d_remove.gid)
                    and all(notes.has("aria2.onDownloadStart", g) for g in gids))
        check("WebSocket notifications for the right gids", wait_for(notified, 5),
              f"{len(notes.events)} events")
        wrong = [e for e in notes.events if e[1] not in gids]
        check("no notification for an unknown gid, nor for a task that never ran", not wrong, str(wrong[:3]))
        notes.close()

        # A Metalink of one file at two URLs (nginx paces both), with its SHA-256 and 1 MiB piece hashes:
        # aria2p's add_metalink sends the document in base64; one download per file; getServers lists
        # each connection's uri, currentUri and downloadSpeed while it runs; the file ends identical.
        meta = os.path.join(a.work, "m.meta4")
        maker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib", "make_meta4.py")
        with open(meta, "w") as f:
            subprocess.run([sys.executable, maker, os.path.join(a.www, "m.bin"), f"{a.base}/slow/m.bin@1",
                            f"{a.base}/slow2/m.bin@2"], stdout=f, check=True)
        added = api.add_metalink(meta, options={"split": "4"})
        check("addMetalink gives one download per file", len(added) == 1 and len(added[0].gid) == 16,
              str([d.gid for d in added]))
        m_gid = added[0].gid if added else "0" * 16
        seen = {}

        def serving():
            s = api.client.get_servers(m_gid) if status(api, m_gid)["status"] == "active" else []
            servers = s[0].get("servers", []) if s else []
            if servers and any(int(x.get("downloadSpeed", "0")) > 0 for x in servers):
                seen["servers"] = s
                return True
            return False

        check("getServers lists the servers of an active download", wait_for(serving, 20, 0.1),
              json.dumps(seen.get("servers"))[:300])
        entry = (seen.get("servers") or [{}])[0]
        urls = {f"{a.base}/slow/m.bin", f"{a.base}/slow2/m.bin"}
        fields = entry.get("servers", [])
        check("getServers: index 1, uri, currentUri and downloadSpeed as strings",
              entry.get("index") == "1" and fields and all(
                  x.get("uri") in urls and isinstance(x.get("currentUri"), str) and x.get("downloadSpeed", "").isdigit()
                  for x in fields), json.dumps(entry)[:300])
        check("the Metalink download completes",
              wait_for(lambda: status(api, m_gid)["status"] == "complete", 60, 0.2), status(api, m_gid)["status"])
        got = os.path.join(download_dir, "m.bin")
        check("m.bin is byte-identical", os.path.exists(got) and filecmp.cmp(got, os.path.join(a.www, "m.bin"),
                                                                               shallow=False))

        # The aria2p command line: add, show, pause, resume, remove.
        r = run_cli(port, secret, "add", f"{a.base}/slow/e.bin", "-o", "out=cli.bin")
        cli_gid = r.stdout.strip().split()[-1] if r.returncode == 0 and r.stdout.strip() else ""
        check("aria2p add", r.returncode == 0 and len(cli_gid) == 16, (r.stdout + r.stderr).strip()[:200])
        r = run_cli(port, secret, "show")
        check("aria2p show lists it", r.returncode == 0 and cli_gid[:8] in r.stdout, r.stderr.strip()[:200])
        wait_for(lambda: status(api, cli_gid)["status"] == "active", 10)
        r = run_cli(port, secret, "pause", cli_gid)
        check("aria2p pause", r.returncode == 0 and wait_for(lambda: status(api, cli_gid)["status"] == "paused", 10),
              (r.stdout + r.stderr).strip()[:200])
        r = run_cli(port, secret, "resume", cli_gid)
        check("aria2p resume", r.returncode == 0 and wait_for(
            lambda: status(api, cli_gid)["status"] in ("active", "waiting", "complete"), 10),
            (r.stdout + r.stderr).strip()[:200])
        r = run_cli(port, secret, "remove", cli_gid)
        check("aria2p remove", r.returncode == 0 and wait_for(
            lambda: status(api, cli_gid)["status"] in ("removed", "gone"), 10), (r.stdout + r.stderr).strip()[:200])
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    failed = [r for r in results if not r[1]]
    print(f"{a.target}: {len(results) - len(failed)}/{len(results)} checks passed in {time.time() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
