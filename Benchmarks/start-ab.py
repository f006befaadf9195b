#!/usr/bin/env python3
"""Interleaved A/B of whole short processes (issue 24: one 1 MiB download per process).

    Benchmarks/start-ab.py N 'CMD A' 'CMD B' ...

Runs every command N times, in an order that alternates (A B C, C B A, ...) so that a machine
whose load drifts treats them alike, and prints per command the median and mean wall time and
CPU time (user + system of the process, from the kernel's accounting) in milliseconds. `{out}` in a
command is replaced by a scratch output path, removed before every run; a command that fails is
reported and counted. Start an nginx (or any server) first; this script only times.
"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def main() -> int:
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        print(__doc__.strip(), file=sys.stderr)
        return 2
    n, commands = int(sys.argv[1]), sys.argv[2:]
    out = os.path.join(tempfile.mkdtemp(prefix="start-ab-"), "out.bin")
    walls: dict[str, list[float]] = {c: [] for c in commands}
    cpus: dict[str, list[float]] = {c: [] for c in commands}
    failures = {c: 0 for c in commands}
    for i in range(n):
        for c in commands if i % 2 == 0 else reversed(commands):
            try:
                os.unlink(out)
            except FileNotFoundError:
                pass
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            rc = subprocess.run(["/bin/sh", "-c", "exec " + c.replace("{out}", out)], stdout=subprocess.DEVNULL).returncode
            t1 = time.perf_counter()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if rc != 0:
                failures[c] += 1
            walls[c].append((t1 - t0) * 1000)
            cpus[c].append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    for c in commands:
        w, u = walls[c], cpus[c]
        print(f"wall median {statistics.median(w):6.2f} mean {statistics.mean(w):6.2f} ms | "
              f"cpu median {statistics.median(u):6.2f} mean {statistics.mean(u):6.2f} ms | "
              f"{failures[c]} failed | {c}")
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
