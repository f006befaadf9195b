#!/usr/bin/env python3
"""A batch of small files, segget builds side by side with curl and wget2, interleaved.

    python3 Benchmarks/batch-ab.py --base-url http://127.0.0.1:PORT/dir --count 500 \\
        [--name 'f{i}'] [--reps 11] [--jobs 16] [--reused-dir] NAME=SEGGET_BINARY ...

Each repetition runs every tool once, in a random order (`--rotate`: the order of the command line,
rotated by one each repetition, as `scripts/bench` does): `curl --parallel --parallel-max JOBS -K
config`, `wget2 --max-threads=JOBS -i list` and each segget build as `segget -q -i list -j JOBS -d
DIR`. Before each run: `sync` and a rest of 0.2 s. Every run's outputs are kept, in a fresh directory
of their own (with `--reused-dir`: one directory whose files are truncated and moved aside before
each run, as `scripts/bench` does), and nothing is removed while the script runs: on ext4 without a
journal, creating files right after many were removed scans the freed inodes and measures the file
system rather than the tools (Benchmarks/RESULTS.md). The outputs are removed at the end.

Prints, per tool, the median wall time and user/sys CPU (`wait4`), and per segget build the
per-repetition ratio to the faster of curl and wget2, and its median. Every run must exit 0 with
COUNT files.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", required=True, help="the files are BASE_URL/NAME")
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--name", default="f{i}", help="file name pattern, {i} from 0 (default f{i})")
    p.add_argument("--reps", type=int, default=11)
    p.add_argument("--jobs", type=int, default=16)
    p.add_argument("--reused-dir", action="store_true")
    p.add_argument("--rotate", action="store_true",
                   help="rotate the order each repetition (as scripts/bench does) instead of shuffling it")
    p.add_argument("--work", help="where outputs go (default: a new directory under /tmp)")
    p.add_argument("builds", nargs="+", metavar="NAME=BINARY")
    a = p.parse_args()

    builds = dict(b.split("=", 1) for b in a.builds)
    work = a.work or tempfile.mkdtemp(prefix="segget-batch-ab-")
    os.makedirs(work, exist_ok=True)
    names = [a.name.format(i=i) for i in range(a.count)]
    urls = os.path.join(work, "urls.txt")
    with open(urls, "w") as f:
        f.writelines(f"{a.base_url}/{n}\n" for n in names)
    fixed, aside = os.path.join(work, "fixed"), os.path.join(work, "aside")

    def out_dir(tool: str, rep: int) -> str:
        if not a.reused_dir:
            d = os.path.join(work, f"{tool}-{rep}")
            os.makedirs(d)
            return d
        os.makedirs(fixed, exist_ok=True)
        os.makedirs(aside, exist_ok=True)
        for n in os.listdir(fixed):
            os.truncate(os.path.join(fixed, n), 0)
            os.rename(os.path.join(fixed, n), os.path.join(aside, f"{tool}-{rep}-{n}"))
        return fixed

    def command(tool: str, out: str) -> list[str]:
        if tool == "curl":
            config = os.path.join(work, "curl.cfg")
            with open(config, "w") as f:
                f.writelines(f'url = "{a.base_url}/{n}"\noutput = "{out}/{n}"\n' for n in names)
            return ["curl", "-sS", "--parallel", "--parallel-max", str(a.jobs), "-K", config]
        if tool == "wget2":
            return ["wget2", "-q", f"--max-threads={a.jobs}", "-P", out, "-i", urls]
        return [builds[tool], "-q", "-i", urls, "-j", str(a.jobs), "-d", out]

    tools = ["curl", "wget2", *builds]
    runs: dict[str, list[tuple[float, float, float]]] = {t: [] for t in tools}
    try:
        for rep in range(a.reps):
            order = tools[:]
            if a.rotate:
                order = order[rep % len(order):] + order[:rep % len(order)]
            else:
                random.shuffle(order)
            for tool in order:
                out = out_dir(tool, rep)
                argv = command(tool, out)
                subprocess.run(["sync"], check=True)
                time.sleep(0.2)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.monotonic()
                # curl --parallel draws a progress meter on stderr even with -s.
                done = subprocess.run(argv, stderr=subprocess.DEVNULL if tool == "curl" else None)
                wall = time.monotonic() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if done.returncode != 0:
                    raise SystemExit(f"{tool} exited {done.returncode}: {' '.join(argv)}")
                got = len(os.listdir(out))
                if got != a.count:
                    raise SystemExit(f"{tool} left {got} files, not {a.count}, in {out}")
                runs[tool].append((wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)

    for tool in tools:
        walls = [r[0] for r in runs[tool]]
        print(f"{tool:12s} wall median {statistics.median(walls) * 1000:7.1f} ms  "
              f"user {statistics.median(r[1] for r in runs[tool]) * 1000:5.1f}  "
              f"sys {statistics.median(r[2] for r in runs[tool]) * 1000:5.1f}  "
              f"runs {' '.join(f'{w * 1000:.0f}' for w in walls)}")
    for tool in builds:
        ratios = [runs[tool][i][0] / min(runs["curl"][i][0], runs["wget2"][i][0]) for i in range(a.reps)]
        print(f"{tool:12s} ÷ the faster of curl and wget2, per repetition: median {statistics.median(ratios):.2f}  "
              f"[{' '.join(f'{r:.2f}' for r in ratios)}]")


if __name__ == "__main__":
    main()
