"""The daemon's speed schedule over aria2's RPC, against a real `segget daemon`:

- `--speed-schedule` is read back through getGlobalOption (`speed-schedule`, and
  `max-overall-download-limit` as the limit in force now: a whole-day window makes that
  independent of the clock);
- a running download follows changeGlobalOption live: about 1 MiB/s under `00:00-24:00=1M`, several
  times that once the schedule is `none`;
- a bad schedule is refused with a sentence and changes nothing;
- the schedule survives a restart of the daemon without the option, and the option replaces it; so do
  the other global options set over RPC (max-concurrent-downloads, max-overall-download-limit, split,
  max-connection-per-server), an option given to the daemon winning over its stored value.

Usage: daemon_schedule.py --segget BIN --testserver BIN --work DIR
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from checks import check, free_port, summary

SIZE = 64 << 20


class RPC:
    def __init__(self, port):
        self.url = f"http://127.0.0.1:{port}/jsonrpc"

    def raw(self, method, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": "s", "method": method, "params": ["token:sch", *params]})
        req = urllib.request.Request(self.url, body.encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            return json.load(e)

    def __call__(self, method, *params):
        reply = self.raw(method, *params)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]


def start(args, port, extra):
    log = open(os.path.join(args.work, "daemon.log"), "a")
    proc = subprocess.Popen(
        [args.segget, "daemon", "--rpc-listen-port", str(port), "--rpc-secret", "sch", "--dir",
         os.path.join(args.work, "dl"), "--database", os.path.join(args.work, "q.sqlite"), *extra],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                sys.exit("the daemon did not start; see daemon.log")
            time.sleep(0.05)


def stop(proc):
    proc.terminate()
    proc.wait(timeout=20)


def main():
    ap = argparse.ArgumentParser()
    for name in ("segget", "testserver", "work"):
        ap.add_argument("--" + name, required=True)
    args = ap.parse_args()
    www = os.path.join(args.work, "www")
    os.makedirs(www, exist_ok=True)
    os.makedirs(os.path.join(args.work, "dl"), exist_ok=True)
    with open(os.path.join(www, "big.bin"), "wb") as f:
        f.write(os.urandom(SIZE))
    server = subprocess.Popen([args.testserver, "--port", "0", "--dir", www],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    base = server.stdout.readline().split()[2]
    port = free_port()
    rpc = RPC(port)
    daemon = start(args, port, ["--speed-schedule", "00:00-24:00=1M", "--max-overall-download-limit", "3M"])
    try:
        g = rpc("aria2.getGlobalOption")
        check("getGlobalOption reads the schedule", g.get("speed-schedule") == "00:00-24:00=1M", g.get("speed-schedule"))
        check("max-overall-download-limit is the window's", g.get("max-overall-download-limit") == str(1 << 20),
              g.get("max-overall-download-limit"))

        gid = rpc("aria2.addUri", [f"{base}/big.bin?rate=4m"], {"split": "4"})

        def rate(seconds):
            # Over the time between the two answers, not the sleep asked: on a loaded machine a call
            # can take a while, and the bytes that arrive meanwhile would be counted against too little time.
            a = int(rpc("aria2.tellStatus", gid, ["completedLength"])["completedLength"])
            t0 = time.monotonic()
            time.sleep(seconds)
            b = int(rpc("aria2.tellStatus", gid, ["completedLength"])["completedLength"])
            return (b - a) / (time.monotonic() - t0)

        time.sleep(1.5)
        limited = rate(3)
        check("a running download keeps to the window's 1 MiB/s", limited < 1.3 * (1 << 20), f"{limited:.0f} B/s")

        reply = rpc.raw("aria2.changeGlobalOption", {"speed-schedule": "08:00-12:00=1M,11:00-13:00=2M"})
        check("an overlapping schedule is refused with a sentence",
              "error" in reply and "overlap" in reply["error"]["message"], reply)
        check("and changes nothing", rpc("aria2.getGlobalOption")["speed-schedule"] == "00:00-24:00=1M")

        rpc("aria2.changeGlobalOption", {"speed-schedule": "none"})
        g = rpc("aria2.getGlobalOption")
        check("changeGlobalOption clears the schedule", g["speed-schedule"] == "none", g["speed-schedule"])
        check("then the daemon's own limit is in force", g["max-overall-download-limit"] == str(3 << 20),
              g["max-overall-download-limit"])
        time.sleep(1.5)
        free = rate(2)
        print(f"under 00:00-24:00=1M: {limited / 1048576:.2f} MiB/s; after changeGlobalOption none (3M outside windows): "
              f"{free / 1048576:.2f} MiB/s")
        check("the running download speeds up at once", free > 2 * limited, f"{free:.0f} against {limited:.0f} B/s")

        rpc("aria2.changeGlobalOption", {"speed-schedule": "22:00-06:00=512k"})
        # The other global options set at run time are kept too (they came back at the command
        # line's values: a limit set from a front-end was gone after a reboot).
        rpc("aria2.changeGlobalOption", {"max-concurrent-downloads": "2", "max-overall-download-limit": "2M",
                                         "split": "6", "max-connection-per-server": "5"})
        rpc("aria2.remove", gid)
        stop(daemon)
        daemon = start(args, port, [])
        g = rpc("aria2.getGlobalOption")
        check("a restart keeps the schedule set at run time", g["speed-schedule"] == "22:00-06:00=512k", g["speed-schedule"])
        # (max-overall-download-limit answers the limit in force now, the window's at night: read below.)
        kept = {k: g.get(k) for k in ("max-concurrent-downloads", "split", "max-connection-per-server")}
        check("a restart keeps the global options set at run time",
              kept == {"max-concurrent-downloads": "2", "split": "6", "max-connection-per-server": "5"}, str(kept))
        stop(daemon)
        daemon = start(args, port, ["--speed-schedule", "none", "--max-concurrent-downloads", "4"])
        g = rpc("aria2.getGlobalOption")
        check("--speed-schedule replaces the stored one", g["speed-schedule"] == "none")
        check("an option given to the daemon wins over the stored value; the others stay",
              g.get("max-concurrent-downloads") == "4" and g.get("split") == "6"
              and g.get("max-overall-download-limit") == str(2 << 20),
              f'{g.get("max-concurrent-downloads")}, {g.get("split")}, {g.get("max-overall-download-limit")}')
        stop(daemon)
        daemon = start(args, port, [])
        check("and its stored value is gone: the default next time",
              rpc("aria2.getGlobalOption").get("max-concurrent-downloads") == "5")
    finally:
        if daemon.poll() is None:
            stop(daemon)
        server.terminate()
        server.wait()
    bad = subprocess.run([args.segget, "daemon", "--speed-schedule", "8-9=1M", "--rpc-listen-port", str(free_port())],
                         capture_output=True, text=True, timeout=20)
    check("a bad --speed-schedule exits with 2 and says why", bad.returncode == 2 and "HH:MM" in bad.stderr + bad.stdout,
          f"{bad.returncode}: {bad.stderr.strip()}")
    return summary("daemon-schedule")


if __name__ == "__main__":
    sys.exit(main())
