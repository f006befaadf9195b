#!/usr/bin/env python3
"""A client starved of CPU part-way through a download: does segget take its own slowness for a slow
server and re-dial?

segget-testserver sends a 64 MiB file at 16 MiB/s per connection; `segget -n 2 --json` starts at full
speed, and after `--after` seconds this script holds it stopped (SIGSTOP) for `--stop-ms` of every
`--period-ms` (SIGCONT for the rest) until it exits: the loop reads less than the server sends, and the
rest waits in the kernel's socket queues, as on a machine whose CPUs other work takes. Each binary runs
once per repetition, interleaved. Counted: seconds, requests (the server's log), re-dials (the
`redial` events), bytes the server sent twice, and whether the file is identical.

Usage: Benchmarks/starved-client.py --segget LABEL=BIN [--segget LABEL=BIN ...] --testserver BIN
       [--reps 5] [--after 1.0] [--stop-ms 80] [--period-ms 100] [--connections 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MiB = 1 << 20
SIZE = 64 * MiB


def starve(proc: subprocess.Popen, after: float, stop: float, period: float, done: threading.Event) -> None:
    if done.wait(after):
        return
    while not done.is_set():
        try:
            os.kill(proc.pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
        time.sleep(stop)
        try:
            os.kill(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        done.wait(period - stop)


def run_once(binary: str, base: str, work: Path, log: Path, args) -> dict:
    out = work / "out.bin"
    for leftover in work.glob("out.bin*"):
        leftover.unlink()
    log.write_text("")
    started = time.monotonic()
    proc = subprocess.Popen([binary, "-n", str(args.connections), "--json", "-o", str(out), f"{base}/f.bin?rate=16m"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    done = threading.Event()
    t = threading.Thread(target=starve, args=(proc, args.after, args.stop_ms / 1000, args.period_ms / 1000, done))
    t.start()
    lines = proc.stdout.read().splitlines()
    proc.wait()
    done.set()
    t.join()
    try:
        os.kill(proc.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    seconds = time.monotonic() - started
    events = [json.loads(l) for l in lines if l.startswith("{")]
    redials = sum(1 for e in events if e.get("event") == "redial")
    time.sleep(0.2)  # the server logs a request when its answer ends
    sent, requests = 0, 0
    for line in log.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3].isdigit():
            sent += int(fields[3])
            requests += 1
    identical = out.exists() and hashlib.sha256(out.read_bytes()).hexdigest() == args.digest
    return {"rc": proc.returncode, "seconds": seconds, "requests": requests, "redials": redials,
            "twice": sent - SIZE, "identical": identical}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--segget", action="append", required=True, help="LABEL=BIN")
    ap.add_argument("--testserver", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--after", type=float, default=1.0)
    ap.add_argument("--stop-ms", type=float, default=80)
    ap.add_argument("--period-ms", type=float, default=100)
    ap.add_argument("--connections", type=int, default=2)
    args = ap.parse_args()
    binaries = [s.split("=", 1) for s in args.segget]
    with tempfile.TemporaryDirectory(prefix="segget-starved.") as tmp:
        work = Path(tmp)
        www = work / "www"
        www.mkdir()
        data = os.urandom(SIZE)
        (www / "f.bin").write_bytes(data)
        args.digest = hashlib.sha256(data).hexdigest()
        log = work / "server.log"
        server = subprocess.Popen([args.testserver, "--port", "0", "--dir", str(www), "--log", str(log)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            base = server.stdout.readline().split()[2]
            results: dict[str, list[dict]] = {label: [] for label, _ in binaries}
            for rep in range(args.reps):
                for label, binary in binaries:
                    r = run_once(binary, base, work, log, args)
                    results[label].append(r)
                    print(json.dumps({"tool": label, "rep": rep + 1, **r,
                                      "load": os.getloadavg()[0]}), flush=True)
        finally:
            server.terminate()
            server.wait(10)
    print(f"\n64 MiB at -n {args.connections}, 16 MiB/s per connection; after {args.after} s stopped "
          f"{args.stop_ms:.0f} ms of every {args.period_ms:.0f} ms; medians of {args.reps}")
    print(f"{'binary':12} {'seconds':>8} {'requests':>9} {'re-dials':>9} {'MiB twice':>10} {'identical':>10}")
    failed = False
    for label, rs in results.items():
        ok = sum(1 for r in rs if r["identical"] and r["rc"] == 0)
        failed |= ok != len(rs)
        print(f"{label:12} {statistics.median(r['seconds'] for r in rs):8.2f} "
              f"{statistics.median(r['requests'] for r in rs):9.0f} {statistics.median(r['redials'] for r in rs):9.0f} "
              f"{statistics.median(r['twice'] for r in rs) / MiB:10.2f} {ok:>7}/{len(rs)}")
        print(f"{'':12} requests per run {[r['requests'] for r in rs]}, re-dials {[r['redials'] for r in rs]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
