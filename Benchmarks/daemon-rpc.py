"""The daemon under load, against segget-testserver on loopback:
  1. 1,000 tasks queued paused: latency of tellWaiting(0, 1000) over one keep-alive HTTP connection
     (median and p99 of N calls), plus the time to add them.
  2. 16 downloads active at once (rate-capped so that they stay active): the daemon's RSS.
The same runs against `aria2c --enable-rpc` with --target aria2c, for comparison.

Usage: python3 Benchmarks/daemon-rpc.py --target segget|aria2c --bin PATH --testserver PATH [--calls 200]
       [--total-connections 64]
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
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
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def __call__(self, method, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": "b", "method": method, "params": ["token:bench", *params]})
        self.conn.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
        reply = json.loads(self.conn.getresponse().read())
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True, choices=["segget", "aria2c"])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--testserver", required=True)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--total-connections", type=int, default=64, help="segget's connection budget (aria2c uses 1 per download)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="segget-daemon-bench.")
    www, dl = os.path.join(work, "www"), os.path.join(work, "dl")
    os.makedirs(www)
    os.makedirs(dl)
    with open(os.path.join(www, "big.bin"), "wb") as f:
        f.truncate(256 << 20)  # sparse: the server reads zeros, nothing is held in memory
    server = subprocess.Popen([a.testserver, "--port", "0", "--dir", www], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    base = server.stdout.readline().split()[2]
    port = free_port()
    if a.target == "segget":
        argv = [a.bin, "daemon", "--rpc-listen-port", str(port), "--rpc-secret", "bench", "--dir", dl,
                "--database", os.path.join(work, "q.sqlite"), "--max-concurrent-downloads", "16",
                "--total-connections", str(a.total_connections)]
    else:
        argv = [a.bin, "--enable-rpc", f"--rpc-listen-port={port}", "--rpc-secret=bench", f"--dir={dl}",
                "--max-concurrent-downloads=16", "--quiet=true", "--max-download-result=2000"]
    daemon = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        rpc = RPC(port)
        t0 = time.perf_counter()
        for i in range(1000):
            rpc("aria2.addUri", [f"{base}/big.bin?n={i}"], {"pause": "true", "out": f"q{i}.bin"})
        add_s = time.perf_counter() - t0
        times = []
        for _ in range(a.calls):
            t = time.perf_counter()
            got = rpc("aria2.tellWaiting", 0, 1000)
            times.append((time.perf_counter() - t) * 1000)
            assert len(got) == 1000, len(got)
        times.sort()
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(f"{a.target}: 1000 paused adds in {add_s:.2f} s ({add_s:.2f} ms each); tellWaiting(0, 1000) over "
              f"{a.calls} calls: median {statistics.median(times):.1f} ms, p99 {p99:.1f} ms, "
              f"reply {len(json.dumps(got)) / 1024:.0f} KiB")
        rss_queued, _ = rss_kib(daemon.pid)

        for g in [d["gid"] for d in rpc("aria2.tellWaiting", 0, 1000, ["gid"])]:
            rpc("aria2.remove", g)
        rpc("aria2.purgeDownloadResult")
        gids = [rpc("aria2.addUri", [f"{base}/big.bin?rate=1m&a={i}"], {"out": f"a{i}.bin"}) for i in range(16)]
        deadline = time.time() + 30
        while time.time() < deadline and len(rpc("aria2.tellActive", ["gid"])) < 16:
            time.sleep(0.2)
        active = rpc("aria2.tellActive", ["gid", "connections"])
        time.sleep(3)
        samples = []
        for _ in range(5):
            samples.append(rss_kib(daemon.pid))
            time.sleep(0.5)
        conns = sum(int(x["connections"]) for x in rpc("aria2.tellActive", ["connections"]))
        print(f"{a.target}: RSS with 1000 paused tasks {rss_queued / 1024:.1f} MiB; with {len(active)} active downloads "
              f"({conns} connections): {max(s[0] for s in samples) / 1024:.1f} MiB (peak {max(s[1] for s in samples) / 1024:.1f} MiB)")
        for g in gids:
            rpc("aria2.forceRemove", g)
        rpc.conn.close()
    finally:
        daemon.terminate()
        daemon.wait(15)
        server.terminate()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
