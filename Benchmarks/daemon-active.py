"""The daemon with a long queue and many downloads at once, against segget-testserver on loopback:
1,000 tasks added, 64 of them active (every response paced, so that they stay active), the rest
waiting. Over a window of a few seconds it samples the daemon's threads, RSS and CPU time (from
/proc), and the bytes the active tasks received, then prints one line per target.

The same run against `aria2c --enable-rpc` with --target aria2c (one connection per download, as
segget's budget of 64 gives each of 64 active tasks).

Usage: python3 Benchmarks/daemon-active.py --target segget|aria2c --bin PATH --testserver PATH
       [--tasks 1000] [--active 64] [--rate 1m] [--window 5] [--servers 1]
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class RPC:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def __call__(self, method, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": "b", "method": method, "params": ["token:bench", *params]})
        self.conn.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
        reply = json.loads(self.conn.getresponse().read())
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]


def status(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["Threads"]), int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True, choices=["segget", "aria2c"])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--testserver", required=True)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--active", type=int, default=64)
    ap.add_argument("--rate", default="1m", help="pace of every response (the test server's rate=)")
    ap.add_argument("--window", type=float, default=5.0, help="seconds of sampling once all are active")
    ap.add_argument("--servers", type=int, default=1,
                    help="test servers (ports) the tasks are spread over, in turn: segget's daemon lets 16 "
                         "connections at most to one host, so 64 connections at once take 4")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="segget-daemon-active.")
    www, dl = os.path.join(work, "www"), os.path.join(work, "dl")
    os.makedirs(www)
    os.makedirs(dl)
    with open(os.path.join(www, "big.bin"), "wb") as f:
        f.truncate(256 << 20)  # sparse: the server reads zeros
    servers = [subprocess.Popen([a.testserver, "--port", "0", "--dir", www], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True) for _ in range(max(1, a.servers))]
    bases = [s.stdout.readline().split()[2] for s in servers]
    port = free_port()
    if a.target == "segget":
        argv = [a.bin, "daemon", "--rpc-listen-port", str(port), "--rpc-secret", "bench", "--dir", dl,
                "--database", os.path.join(work, "q.sqlite"), "--max-concurrent-downloads", str(a.active),
                "--total-connections", str(a.active)]
    else:
        argv = [a.bin, "--enable-rpc", f"--rpc-listen-port={port}", "--rpc-secret=bench", f"--dir={dl}",
                f"--max-concurrent-downloads={a.active}", "--quiet=true", "--max-download-result=2000",
                "--file-allocation=none"]
    daemon = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        rpc = RPC(port)
        for i in range(a.tasks):
            rpc("aria2.addUri", [f"{bases[i % len(bases)]}/big.bin?rate={a.rate}&n={i}"], {"out": f"q{i}.bin"})
        deadline = time.time() + 60
        while time.time() < deadline and len(rpc("aria2.tellActive", ["gid"])) < a.active:
            time.sleep(0.2)
        time.sleep(2)
        peak_threads = 0
        rss = []
        done0 = sum(int(x["completedLength"]) for x in rpc("aria2.tellActive", ["completedLength"]))
        cpu0, t0 = cpu_seconds(daemon.pid), time.perf_counter()
        while time.perf_counter() - t0 < a.window:
            th, r, _ = status(daemon.pid)
            peak_threads = max(peak_threads, th)
            rss.append(r)
            time.sleep(0.05)
        cpu1, t1 = cpu_seconds(daemon.pid), time.perf_counter()
        active = rpc("aria2.tellActive", ["completedLength", "connections"])
        done1 = sum(int(x["completedLength"]) for x in active)
        _, _, hwm = status(daemon.pid)
        waiting = len(rpc("aria2.tellWaiting", 0, a.tasks, ["gid"]))
        cpu = (cpu1 - cpu0) / (t1 - t0)
        rate = (done1 - done0) / (t1 - t0) / (1 << 20)
        print(f"{a.target}: {len(active)} active ({sum(int(x['connections']) for x in active)} connections), "
              f"{waiting} waiting; threads peak {peak_threads}; RSS max {max(rss) / 1024:.1f} MiB "
              f"(peak {hwm / 1024:.1f}); CPU {cpu * 100:.1f} % of a core, {cpu * 100 / max(1, len(active)):.2f} % "
              f"per active task; received {rate:.1f} MiB/s in all over {t1 - t0:.1f} s")
        rpc.conn.close()
    finally:
        daemon.terminate()
        try:
            daemon.wait(15)
        except subprocess.TimeoutExpired:
            daemon.kill()
        for server in servers:
            server.terminate()
            server.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
