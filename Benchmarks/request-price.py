#!/usr/bin/env python3
"""Issue 37, "every request has a price": segget against aria2c and axel on origins where a request
costs, every tool run side by side in each repetition (interleaved), with the requests counted on the
server's side.

Scenarios (each a file served by `segget-testserver` on 127.0.0.1, or by moto's S3 server):
  one-worker   an origin that works on one request at a time (`workers=1`), 0.1 or 0.25 s before
               every head (`firstbyte`), 128 or 256 MiB, kept alive and `Connection: close` (`close=1`);
               and, for information, the same capped at 64 MiB/s per answer
  moto         moto's S3 server (PyPI `moto[server]` and boto3, installed into a venv here), a
               presigned GET of a 256 MiB object; requests counted from its access log
  workers      many workers, 0.05, 0.2 and 0.5 s before every head, 16 MiB/s per answer, 128 MiB:
               against the ideal `first byte + size / (n x 16 MiB/s)` and the floor a probe-then-split
               download has (the probe's head, then the others' one think time later)
  refusal      429 past 3 requests in flight (`maxconc=3`), 8 MiB/s per answer, 192 MiB: with
               `Retry-After: 1`, and with the `RateLimit` fields only; refusals counted, and every
               request that reached the server before the wait its last refusal named (from the
               server's own arrival times) is an early one

Usage: Benchmarks/request-price.py --segget BIN --testserver BIN [--baseline BIN] [--reps 5]
       [--scenarios one-worker,moto,workers,refusal] [--tools segget,aria2c,axel] [--out DIR]
Prints Markdown tables (median, min and max seconds; median requests, TCP connections, refusals, early
requests; segget / aria2c per repetition, its median) and writes them to OUT/request-price.md.
"""

from __future__ import annotations

import argparse
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "harness"))
import tools as toolmod  # noqa: E402
from files import free_port, random_file as make_file, sha256_file as digest, start_testserver  # noqa: E402

MiB = 1 << 20
REPO = Path(__file__).resolve().parent.parent


class TestServer:
    """segget-testserver on a free loopback port, its log read per run."""

    def __init__(self, binary: str, www: Path, work: Path):
        self.log = work / "server.log"
        self.proc, self.port = start_testserver(binary, www, self.log)

    def url(self, name: str, query: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}?{query}"

    def idle(self, timeout: float = 60) -> None:
        """Waits until no worker is busy or queued (a client's abandoned requests still cost the
        origin's workers their think time; the next tool must not wait behind them)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    s.sendall(b"GET /_stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    data = b""
                    while chunk := s.recv(4096):
                        data += chunk
                text = data.decode(errors="replace")
                if "workers-busy=0 workers-queued=0" in text:
                    return
            except OSError:
                pass
            time.sleep(0.1)

    def lines_since(self, offset: int) -> tuple[list[list[str]], int]:
        data = self.log.read_bytes()
        return [l.split() for l in data[offset:].decode(errors="replace").splitlines() if l.strip()], len(data)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def server_counts(lines: list[list[str]], tag: str, retry_after: float | None) -> dict:
    """Requests, TCP connections (client ports), refusals and early requests among the log lines of
    the run tagged `tag` (METHOD PATH STATUS BODYBYTES REMOTEPORT ARRIVED SERVED)."""
    mine = [l for l in lines if len(l) >= 7 and re.search(rf"[?&]run={tag}$", l[1]) and l[0] == "GET"]
    mine.sort(key=lambda l: float(l[5]))
    refusals = [l for l in mine if l[2] in ("429", "503")]
    early = 0
    quiet_until = -1.0
    for l in mine:
        arrived = float(l[5])
        if arrived < quiet_until - 0.005:
            early += 1
        if l[2] in ("429", "503") and retry_after:
            quiet_until = max(quiet_until, arrived + retry_after)
    return {"requests": len(mine), "connections": len({l[4] for l in mine}), "refusals": len(refusals),
            "early": early, "sent": sum(int(l[3]) for l in mine)}


class Moto:
    """moto's S3 server from a venv of its own, a bucket, an object and a presigned URL."""

    def __init__(self, work: Path, source: Path):
        venv = REPO / ".build" / "moto-venv"
        py = venv / "bin" / "python"
        if not (venv / "bin" / "moto_server").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(py), "-m", "pip", "install", "-q", "moto[server]", "boto3"], check=True)
        self.port = free_port()
        self.log = work / "moto.log"
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen([str(venv / "bin" / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        script = (
            "import boto3,sys\n"
            f"s3=boto3.client('s3',endpoint_url='http://127.0.0.1:{self.port}',aws_access_key_id='k',"
            "aws_secret_access_key='s',region_name='us-east-1')\n"
            "s3.create_bucket(Bucket='segget-bench')\n"
            f"s3.put_object(Bucket='segget-bench',Key='object',Body=open('{source}','rb').read())\n"
            "print(s3.generate_presigned_url('get_object',Params={'Bucket':'segget-bench','Key':'object'},ExpiresIn=86400))\n")
        self.presigned = subprocess.run([str(py), "-c", script], check=True, capture_output=True, text=True).stdout.strip()

    def url(self, tag: str) -> str:
        return self.presigned + f"&run={tag}"

    def counts(self, tag: str) -> dict:
        text = re.sub(r"\x1b\[[0-9;]*m", "", self.log.read_text(errors="replace"))
        mine = [l for l in text.splitlines() if re.search(rf"[?&]run={tag}[ &]", l) and '"GET ' in l]
        refusals = [l for l in mine if re.search(r'" (429|503) ', l)]
        return {"requests": len(mine), "connections": None, "refusals": len(refusals), "early": 0, "sent": None}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.logf.close()


def run_tool(tool, n: int, out: Path, url: str, size: int) -> tuple[float, int]:
    for stale in out.parent.glob(out.name + "*"):
        stale.unlink()
    argv = tool.build(n, out, url, False, size, False)
    started = time.monotonic()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    seconds = time.monotonic() - started
    if r.returncode != 0:
        print(f"  {tool.name} exit {r.returncode}: {r.stderr.decode(errors='replace').strip()[-400:]}", file=sys.stderr)
    return seconds, r.returncode


def table(title: str, rows: dict, reps: int, ideal: float | None, floor: float | None) -> str:
    lines = [f"### {title}", ""]
    if ideal:
        lines.append(f"Ideal (the issue's: first byte + size / (n x rate)): {ideal:.3f} s" + (
            f"; a probe-then-split download's floor: {floor:.3f} s" if floor else "") + ".")
        lines.append("")
    lines.append("| tool | median s | min s | max s | requests | TCP connections | refusals | early | identical | exit |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for name, runs in rows.items():
        secs = [r["seconds"] for r in runs]
        med = lambda k: statistics.median([r[k] for r in runs]) if all(r[k] is not None for r in runs) else "-"
        lines.append(
            f"| {name} | {statistics.median(secs):.3f} | {min(secs):.3f} | {max(secs):.3f} | {med('requests')} | "
            f"{med('connections')} | {med('refusals')} | {med('early')} | "
            f"{sum(r['identical'] for r in runs)}/{len(runs)} | {','.join(sorted({str(r['exit']) for r in runs}))} |")
    if "segget" in rows and "aria2c" in rows:
        ratios = [s["seconds"] / a["seconds"] for s, a in zip(rows["segget"], rows["aria2c"])]
        lines.append("")
        lines.append(f"segget / aria2c per repetition: {', '.join(f'{x:.2f}' for x in ratios)}; median "
                     f"{statistics.median(ratios):.2f}.")
    if ideal and "segget" in rows:
        med = statistics.median([r["seconds"] for r in rows["segget"]])
        lines.append("")
        lines.append(f"segget's median / the ideal: {med / ideal:.2f}" + (f"; / the floor: {med / floor:.2f}" if floor else "") + ".")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--segget", required=True)
    p.add_argument("--testserver", required=True)
    p.add_argument("--baseline", help="another segget binary, run as segget-base")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--scenarios", default="one-worker,moto,workers,refusal")
    p.add_argument("--tools", default="segget,aria2c,axel")
    p.add_argument("--out", type=Path, default=REPO / "bench-out" / "request-price")
    p.add_argument("-n", type=int, default=8)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    www = args.out / "www"
    www.mkdir(exist_ok=True)
    for mib in (128, 192, 256):
        make_file(www / f"f{mib}", mib * MiB)
    sums = {mib: digest(www / f"f{mib}") for mib in (128, 192, 256)}
    tools = {}
    for name in args.tools.split(","):
        tools[name] = toolmod.make_segget(args.segget) if name == "segget" else toolmod.PEERS[name]
    if args.baseline:
        tools["segget-base"] = toolmod.make_segget(args.baseline, name="segget-base")
    out = args.out / "download"
    server = TestServer(args.testserver, www, args.out)
    report = [f"# Request price, {time.strftime('%Y-%m-%d %H:%M')}", "",
              f"Tools: {', '.join(tools)}; -n {args.n}; {args.reps} repetitions, every tool once per repetition in turn.", ""]
    counter = 0

    def scenario(title, mib, query, retry_after=None, ideal=None, floor=None, moto=None):
        nonlocal counter
        rows = {name: [] for name in tools}
        for rep in range(args.reps):
            for name, tool in tools.items():
                counter += 1
                tag = f"{counter}"
                if moto:
                    url = moto.url(tag)
                else:
                    server.idle()
                    _, offset = server.lines_since(0)
                    url = server.url(f"f{mib}", f"{query}&run={tag}" if query else f"run={tag}")
                seconds, code = run_tool(tool, args.n, out, url, mib * MiB)
                identical = out.exists() and digest(out) == sums[mib]
                if moto:
                    time.sleep(0.5)
                    counts = moto.counts(tag)
                else:
                    server.idle()
                    lines, _ = server.lines_since(offset)
                    counts = server_counts(lines, tag, retry_after)
                rows[name].append({"seconds": seconds, "exit": code, "identical": identical, **counts})
                print(f"  {title} rep {rep + 1} {name}: {seconds:.3f} s, exit {code}, {counts}", file=sys.stderr, flush=True)
        section = table(title, rows, args.reps, ideal, floor)
        report.append(section)
        print(section, flush=True)

    try:
        chosen = args.scenarios.split(",")
        if "one-worker" in chosen:
            for mib, fb in ((128, 0.1), (256, 0.25)):
                for close in (False, True):
                    scenario(f"one worker, {fb} s before each head, {mib} MiB, {'Connection: close' if close else 'kept alive'}",
                             mib, f"workers=1&firstbyte={fb}" + ("&close=1" if close else ""))
            scenario("one worker, 0.2 s before each head, 256 MiB, 64 MiB/s per answer (for information)",
                     256, "workers=1&firstbyte=0.2&rate=64m")
        if "workers" in chosen:
            for fb in (0.05, 0.2, 0.5):
                transfer = 128 / (args.n * 16)
                ideal = fb + transfer
                # Connection 0 from the probe's head on, the others one think time later.
                floor = fb + (128 + (args.n - 1) * 16 * fb) / (args.n * 16)
                scenario(f"many workers, {fb} s before each head, 16 MiB/s per answer, 128 MiB", 128,
                         f"firstbyte={fb}&rate=16m", ideal=ideal, floor=floor)
        if "refusal" in chosen:
            scenario("429 past 3 in flight with Retry-After: 1, 8 MiB/s per answer, 192 MiB (3 connections: 8.0 s)", 192,
                     "maxconc=3&reject=429&retryafter=1&rate=8m", retry_after=1)
            scenario("429 past 3 in flight with the RateLimit fields only (t=1), 8 MiB/s per answer, 192 MiB", 192,
                     "maxconc=3&reject=429&ratelimit=1&reset=1&rate=8m", retry_after=1)
        if "moto" in chosen:
            moto = Moto(args.out, www / "f256")
            try:
                scenario("moto's S3 server, presigned URL, 256 MiB", 256, "", moto=moto)
            finally:
                moto.stop()
    finally:
        server.stop()
    (args.out / "request-price.md").write_text("\n".join(report))


if __name__ == "__main__":
    main()
