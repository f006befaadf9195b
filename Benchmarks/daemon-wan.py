#!/usr/bin/env python3
"""`segget daemon` against `aria2c --enable-rpc` through WAN link a (80 ms RTT, 0.1 % loss each way,
400 Mbit/s): how the daemon's shared connection budget (`--total-connections`, each running task's
own share plus connections it borrows up to its split) and its shared overall speed limit do.

    Benchmarks/daemon-wan.py --segget BIN [--scenarios one,queue,share] [--reps 5] [--share-reps N]
                             [--work /work/bench-daemon-wan]

nginx serves plain HTTP inside the server namespace of Benchmarks/harness/wan.py's link a; the
daemons (and the CLI) run in the client namespace, started afresh for every run (a new --dir and
queue database each time) and stopped by their PID after it; the RPC calls reach them on the client
namespace's loopback. Within a scenario the tools are interleaved, the order rotated by one each
repetition. Every request nginx logged for a run is counted (after the client is stopped and no
connection is left open), with the distinct TCP connections.

  one     one task of a 64 MiB file at split 8 (aria2c also max-connection-per-server=8,
          min-split-size=1M): seconds from addUri to `complete` (tellStatus polled every 20 ms),
          requests, connections, and when the task first reported 8 connections. Beside them the
          plain CLI, `segget -q -k -n 8 -o FILE URL` (seconds from spawn to exit).
  queue   8 tasks of 4 MiB added at once, max-concurrent-downloads 4: seconds from the first addUri
          to the last `complete`, requests. Two variants: `default` (segget's default split, aria2c's
          defaults: one connection a task) and `split2` (split=2 for both; aria2c also
          max-connection-per-server=2 and min-split-size=1M, without which it still uses one).
  share   3 tasks of 64 MiB added at once under max-overall-download-limit 6M, max-concurrent 5:
          each task's rate from 3 s to 7 s after the first add (completedLength deltas), their
          min/max ratio and their sum; then the tasks are removed.

Outputs of `one` and `queue` are checked (size and SHA-256 against the source). Prints one line per
run (stderr) and the tables (stdout); every run is appended as a JSON line to WORK/runs.jsonl.
Needs root (network namespaces), nginx, aria2c, cc. Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Benchmarks" / "harness"))
sys.dont_write_bytecode = True
from files import random_file, sha256_file  # noqa: E402
from wan import LINKS, SERVER_IP, STATUS_PORT, WanLink, WanNginx, connect_in_netns, stats_delta  # noqa: E402

WAN_NAME = "segget-dw"
CLIENT_NS, SERVER_NS = f"{WAN_NAME}-cli", f"{WAN_NAME}-srv"
HTTP_PORT = 8080
MiB = 1 << 20
PORTS = range(27100, 27200)
LINK = WanLink(WAN_NAME, LINKS["a"], seed=1)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class RangeNginx(WanNginx):
    """Benchmarks/harness/wan.py's nginx in the server namespace, its access log with `$http_range`."""

    log_format = "$msec\\t$connection\\t$connection_requests\\t$status\\t$body_bytes_sent\\t$request_time\\t$http_range\\t$request"

    def url(self, name: str) -> str:  # type: ignore[override]
        return super().url("uncapped", name, tls=False)

    def requests_since(self, offset: int) -> list[dict]:
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
        out = []
        for line in text.splitlines():
            p = line.split("\t", 7)
            if len(p) == 8:
                out.append({"end": float(p[0]), "conn": int(p[1]), "status": int(p[3]), "body": int(p[4]),
                            "secs": float(p[5]), "range": p[6], "request": p[7]})
        return out


def request_summary(entries: list[dict]) -> dict:
    """Requests, distinct connections, body bytes, and when each connection's first request began
    (seconds after the first request of the run)."""
    starts: dict[int, float] = {}
    for e in entries:
        s = e["end"] - e["secs"]
        starts[e["conn"]] = min(starts.get(e["conn"], s), s)
    t0 = min(starts.values()) if starts else 0.0
    return {"requests": len(entries), "connections": len(starts),
            "bodyBytes": sum(e["body"] for e in entries),
            "statuses": sorted({e["status"] for e in entries}),
            "connStarts": sorted(round(s - t0, 3) for s in starts.values())}


# -- RPC over the client namespace's loopback -------------------------------------------------------

class NetnsHTTP(http.client.HTTPConnection):
    def connect(self) -> None:
        self.sock = connect_in_netns(CLIENT_NS, (self.host, self.port), self.timeout)
        # As http.client's own connect does: without it each call waits ~40 ms for a delayed ACK.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class RPC:
    def __init__(self, port: int):
        self.conn = NetnsHTTP("127.0.0.1", port, timeout=30)

    def __call__(self, method: str, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": "b", "method": method, "params": ["token:bench", *params]})
        try:
            self.conn.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
            reply = json.loads(self.conn.getresponse().read())
        except (OSError, http.client.HTTPException):
            self.conn.close()  # once more on a fresh connection
            self.conn.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
            reply = json.loads(self.conn.getresponse().read())
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        self.conn.close()


# -- one run ----------------------------------------------------------------------------------------

_procs: list[subprocess.Popen] = []  # what is running now, stopped on the way out
_port_i = 0


def next_port() -> int:
    global _port_i
    port = PORTS[_port_i % len(PORTS)]
    _port_i += 1
    return port


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc in _procs:
        _procs.remove(proc)


class Run:
    """A fresh directory (and daemon) for one run of one tool, with what nginx and the link saw."""

    def __init__(self, bench: "Bench", name: str):
        self.bench, self.name = bench, name
        self.d = bench.work / "runs" / name
        shutil.rmtree(self.d, ignore_errors=True)
        self.dl = self.d / "dl"
        self.dl.mkdir(parents=True)
        self.log_path = self.d / "tool.log"
        self.proc: subprocess.Popen | None = None
        self.rpc: RPC | None = None

    def prepare(self, sources: list[Path]) -> None:
        for s in sources:  # into the page cache: the source is served from memory
            with open(s, "rb") as f:
                while f.read(8 * MiB):
                    pass
        subprocess.run(["sync"], check=False)
        time.sleep(self.bench.args.settle)
        self.offset = self.bench.nginx.log_offset()
        self.link0 = LINK.stats()
        self.load = os.getloadavg()[0]

    def start_daemon(self, tool: str, concurrent: int, overall: str | None = None) -> None:
        port = next_port()
        if tool == "segget":
            argv = [self.bench.args.segget, "daemon", "--dir", str(self.dl), "--database", str(self.d / "q.sqlite"),
                    "--rpc-listen-port", str(port), "--rpc-secret", "bench",
                    "--max-concurrent-downloads", str(concurrent)]
            if overall:
                argv += ["--max-overall-download-limit", overall]
        else:
            argv = ["aria2c", "--no-conf", "--enable-rpc", f"--rpc-listen-port={port}", "--rpc-secret=bench",
                    f"--dir={self.dl}", "--quiet=true", f"--max-concurrent-downloads={concurrent}"]
            if overall:
                argv.append(f"--max-overall-download-limit={overall}")
        self.argv = argv
        self.proc = subprocess.Popen(["ip", "netns", "exec", CLIENT_NS, *argv], stdin=subprocess.DEVNULL,
                                     stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        _procs.append(self.proc)
        rpc = RPC(port)
        deadline = time.monotonic() + 20
        while True:
            try:
                rpc("aria2.getVersion")
                break
            except (OSError, http.client.HTTPException, RuntimeError, ValueError):
                rpc.close()
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{tool} daemon did not answer on port {port}; see {self.log_path}")
                time.sleep(0.05)
        self.rpc = rpc

    def finish(self) -> dict:
        """Stop the client, wait until nginx has no connection open, and count what it logged."""
        if self.rpc:
            self.rpc.close()
        if self.proc:
            stop(self.proc)
        self.bench.nginx.quiesce()
        wire = stats_delta(self.link0, LINK.stats())["down"]
        return {**request_summary(self.bench.nginx.requests_since(self.offset)),
                "serverBytes": wire["rx_bytes"], "queueDrops": wire["queue_drops"], "load": round(self.load, 2)}

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-1500:]
        except OSError:
            return ""


def poll_until_done(rpc: RPC, gids: list[str], timeout: float, t0: float) -> tuple[dict, float | None, dict]:
    """tellStatus every 20 ms until every gid is complete (or failed, or the timeout): each gid's last
    status, the seconds from t0 to the last completion, and per gid: completion time, peak connections,
    and when it first reported 8 connections."""
    keys = ["gid", "status", "completedLength", "totalLength", "connections", "errorCode", "errorMessage"]
    last: dict[str, dict] = {}
    info = {g: {"done": None, "peakConns": 0, "t8": None} for g in gids}
    pending = list(gids)
    while pending:
        now = time.monotonic()
        if now - t0 > timeout:
            break
        for g in list(pending):
            st = rpc("aria2.tellStatus", g, keys)
            last[g] = st
            c = int(st.get("connections") or 0)
            i = info[g]
            i["peakConns"] = max(i["peakConns"], c)
            if c >= 8 and i["t8"] is None:
                i["t8"] = round(time.monotonic() - t0, 3)
            if st["status"] in ("complete", "error", "removed"):
                i["done"] = round(time.monotonic() - t0, 3)
                pending.remove(g)
        time.sleep(0.02)
    ok = all(last.get(g, {}).get("status") == "complete" for g in gids)
    end = max(i["done"] for i in info.values()) if ok else None
    return last, end, info


# -- the benchmark ----------------------------------------------------------------------------------

class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.work = args.work
        self.www = self.work / "www"
        self.records: list[dict] = []
        self.nginx: RangeNginx | None = None
        # Sources: one 64 MiB file (three hard links of it for `share`), eight of 4 MiB.
        self.big = self.www / "big64.bin"
        random_file(self.big, 64 * MiB)
        self.shares = []
        for i in range(3):
            p = self.www / f"s{i}.bin"
            if not p.exists():
                os.link(self.big, p)
            self.shares.append(p)
        self.small = [self.www / f"q{i}.bin" for i in range(8)]
        for p in self.small:
            random_file(p, 4 * MiB)
        self.digests = {p.name: sha256_file(p) for p in [self.big, *self.small]}

    def record(self, rec: dict) -> None:
        self.records.append(rec)
        log(json.dumps(rec))
        with open(self.work / "runs.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")

    def check_files(self, dl: Path, expected: list[str]) -> str | None:
        """None when dl holds exactly the expected files, each of the right size and SHA-256."""
        got = sorted(p.name for p in dl.iterdir())
        if got != sorted(expected):
            return f"files in dir {got} != {sorted(expected)}"
        for n in expected:
            p = dl / n
            src = self.www / n
            if p.stat().st_size != src.stat().st_size:
                return f"{n}: {p.stat().st_size} bytes, not {src.stat().st_size}"
            if sha256_file(p) != self.digests[n]:
                return f"{n}: SHA-256 differs from the source's"
        return None

    # -- one --

    def one(self, tool: str, rep: int) -> None:
        run = Run(self, f"one-{tool}-r{rep}")
        name = self.big.name
        url = self.nginx.url(name)
        rec = {"scenario": "one", "variant": "split8", "tool": tool, "rep": rep}
        fail = None
        run.prepare([self.big])
        try:
            if tool == "segget-cli":
                argv = ["ip", "netns", "exec", CLIENT_NS, self.args.segget, "-q", "-k", "-n", "8",
                        "-o", str(run.dl / name), url]
                t0 = time.monotonic()
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=open(run.log_path, "ab"),
                                        stderr=subprocess.STDOUT, start_new_session=True)
                _procs.append(proc)
                try:
                    rc = proc.wait(self.args.timeout)
                except subprocess.TimeoutExpired:
                    rc = None
                rec["seconds"] = round(time.monotonic() - t0, 3)
                stop(proc)
                if rc != 0:
                    fail = f"exit {rc}" if rc is not None else "timeout"
            else:
                daemon = "segget" if tool == "segget-daemon" else "aria2c"
                run.start_daemon(daemon, concurrent=5)
                opts = {"split": "8"} if daemon == "segget" else \
                    {"split": "8", "max-connection-per-server": "8", "min-split-size": "1M"}
                t0 = time.monotonic()
                gid = run.rpc("aria2.addUri", [url], opts)
                last, end, info = poll_until_done(run.rpc, [gid], self.args.timeout, t0)
                rec.update(seconds=end, peakConns=info[gid]["peakConns"], t8=info[gid]["t8"])
                if end is None:
                    st = last.get(gid, {})
                    fail = f"status {st.get('status')} {st.get('errorCode', '')} {st.get('errorMessage', '')}".strip()
        except Exception as e:  # noqa: BLE001 — recorded, and the benchmark goes on
            fail = f"{type(e).__name__}: {e}"
        rec.update(run.finish())
        if fail is None:
            fail = self.check_files(run.dl, [name])
        self.finish_record(run, rec, fail)

    # -- queue --

    def queue(self, tool: str, variant: str, rep: int) -> None:
        run = Run(self, f"queue-{variant}-{tool}-r{rep}")
        rec = {"scenario": "queue", "variant": variant, "tool": tool, "rep": rep}
        fail = None
        run.prepare(self.small)
        try:
            run.start_daemon(tool, concurrent=4)
            if variant == "default":
                opts = {}
            elif tool == "segget":
                opts = {"split": "2"}
            else:
                opts = {"split": "2", "max-connection-per-server": "2", "min-split-size": "1M"}
            t0 = time.monotonic()
            gids = [run.rpc("aria2.addUri", [self.nginx.url(p.name)], opts) for p in self.small]
            rec["addSeconds"] = round(time.monotonic() - t0, 3)
            last, end, info = poll_until_done(run.rpc, gids, self.args.timeout, t0)
            rec.update(seconds=end, done=sorted(i["done"] for i in info.values() if i["done"] is not None),
                       peakConns=[info[g]["peakConns"] for g in gids])
            if end is None:
                bad = {g: (s.get("status"), s.get("errorCode"), s.get("errorMessage")) for g, s in last.items()
                       if s.get("status") != "complete"}
                fail = f"not complete: {bad}"
        except Exception as e:  # noqa: BLE001
            fail = f"{type(e).__name__}: {e}"
        rec.update(run.finish())
        if fail is None:
            fail = self.check_files(run.dl, [p.name for p in self.small])
        self.finish_record(run, rec, fail)

    # -- share --

    def share(self, tool: str, rep: int) -> None:
        run = Run(self, f"share-{tool}-r{rep}")
        rec = {"scenario": "share", "variant": "6M", "tool": tool, "rep": rep}
        fail = None
        run.prepare(self.shares[:1])
        try:
            run.start_daemon(tool, concurrent=5, overall="6M")
            t0 = time.monotonic()
            gids = [run.rpc("aria2.addUri", [self.nginx.url(p.name)]) for p in self.shares]
            samples = []  # (seconds after t0, [completedLength per task], [connections per task])
            for k in range(self.args.share_start, self.args.share_start + self.args.share_window + 1):
                while time.monotonic() - t0 < k:
                    time.sleep(0.005)
                t = time.monotonic() - t0
                sts = [run.rpc("aria2.tellStatus", g, ["status", "completedLength", "connections", "errorMessage"])
                       for g in gids]
                samples.append((round(t, 3), [int(s["completedLength"]) for s in sts],
                                [int(s.get("connections") or 0) for s in sts], [s["status"] for s in sts]))
            (ta, a, _, _), (tb, b, conns, statuses) = samples[0], samples[-1]
            rates = [(y - x) / (tb - ta) / 1024 for x, y in zip(a, b)]
            per_second = [[round((y - x) / (s2[0] - s1[0]) / 1024) for x, y in zip(s1[1], s2[1])]
                          for s1, s2 in zip(samples, samples[1:])]
            rec.update(rates=[round(r) for r in rates], total=round(sum(rates)),
                       fairness=round(min(rates) / max(rates), 3) if max(rates) > 0 else None,
                       perSecond=per_second, connsAtEnd=conns, window=[ta, tb])
            if any(s != "active" for s in statuses):
                fail = f"statuses at the end of the window: {statuses}"
            tr = time.monotonic()
            for g in gids:
                try:
                    run.rpc("aria2.remove", g)
                except RuntimeError as e:
                    log(f"remove {g}: {e}; forceRemove")
                    run.rpc("aria2.forceRemove", g)
            pending = list(gids)
            while pending and time.monotonic() - tr < 15:
                pending = [g for g in pending if run.rpc("aria2.tellStatus", g, ["status"])["status"] != "removed"]
                time.sleep(0.02)
            rec["removeSeconds"] = round(time.monotonic() - tr, 3)
            if pending and fail is None:
                fail = f"not removed after 15 s: {pending}"
        except Exception as e:  # noqa: BLE001
            fail = f"{type(e).__name__}: {e}"
        rec.update(run.finish())
        rec["leftOnDisk"] = {p.name: p.stat().st_size for p in sorted(run.dl.iterdir())}
        self.finish_record(run, rec, fail)

    def finish_record(self, run: Run, rec: dict, fail: str | None) -> None:
        rec["ok"] = fail is None
        if fail:
            rec["fail"] = fail
            rec["argv"] = getattr(run, "argv", None)
            rec["logTail"] = run.log_tail()
        self.record(rec)
        shutil.rmtree(run.dl, ignore_errors=True)  # the outputs; the tool's log stays

    # -- all of it --

    def run(self) -> None:
        LINK.up()
        self.nginx = RangeNginx(self.work / "nginx", self.www, SERVER_NS)
        self.nginx.start()
        ping = LINK.ping(20)
        log(f"link a: ping {ping}")
        for scenario in self.args.scenarios:
            t_start = time.monotonic()
            if scenario == "one":
                jobs = [lambda rep, t=t: self.one(t, rep) for t in ("segget-daemon", "aria2c", "segget-cli")]
                reps = self.args.reps
                variants = [jobs]
            elif scenario == "queue":
                variants = [[lambda rep, t=t, v=v: self.queue(t, v, rep) for t in ("segget", "aria2c")]
                            for v in ("default", "split2")]
                reps = self.args.reps
            else:
                variants = [[lambda rep, t=t: self.share(t, rep) for t in ("segget", "aria2c")]]
                reps = self.args.share_reps or self.args.reps
            for rep in range(reps):
                for jobs in variants:
                    order = jobs[rep % len(jobs):] + jobs[:rep % len(jobs)]
                    for job in order:
                        job(rep)
            log(f"{scenario}: {time.monotonic() - t_start:.0f} s")


# -- report -----------------------------------------------------------------------------------------

def med_range(xs: list[float], fmt: str = ".2f") -> str:
    if not xs:
        return "–"
    return f"{statistics.median(xs):{fmt}} ({min(xs):{fmt}}–{max(xs):{fmt}})"


def paired(records: list[dict], num: str, den: str, key: str = "seconds") -> str:
    a = {r["rep"]: r[key] for r in records if r["tool"] == num and r["ok"]}
    b = {r["rep"]: r[key] for r in records if r["tool"] == den and r["ok"]}
    ratios = [a[k] / b[k] for k in sorted(a) if k in b]
    if not ratios:
        return f"{num} / {den}: –"
    return (f"{num} / {den}: median of paired ratios {statistics.median(ratios):.3f} "
            f"({', '.join(f'{x:.2f}' for x in ratios)}); ratio of medians "
            f"{statistics.median(a.values()) / statistics.median(b.values()):.3f}")


def report(records: list[dict]) -> None:
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["scenario"], r["variant"]), []).append(r)
    for (scenario, variant), rs in groups.items():
        tools = list(dict.fromkeys(r["tool"] for r in rs))
        print(f"\n### {scenario} ({variant})\n")
        if scenario in ("one", "queue"):
            extra = scenario == "one"
            heads = ["tool", "seconds median (min–max)", "requests", "connections", "body MB",
                     *(["8 connections at s"] if extra else []), "ok"]
            print("| " + " | ".join(heads) + " |")
            print("|" + "---|" * len(heads))
            for t in tools:
                good = [r for r in rs if r["tool"] == t and r["ok"]]
                cells = [t, med_range([r["seconds"] for r in good]),
                         med_range([r["requests"] for r in good], "g"), med_range([r["connections"] for r in good], "g"),
                         med_range([r["bodyBytes"] / 1e6 for r in good], ".1f")]
                if extra:
                    cells.append(med_range([r["t8"] for r in good if r.get("t8") is not None])
                                 if t != "segget-cli" else "–")
                cells.append(f"{len(good)}/{sum(r['tool'] == t for r in rs)}")
                print("| " + " | ".join(cells) + " |")
            print()
            if scenario == "one":
                print(paired(rs, "segget-daemon", "aria2c"))
                print(paired(rs, "segget-daemon", "segget-cli"))
                print(paired(rs, "segget-cli", "aria2c"))
            else:
                print(paired(rs, "segget", "aria2c"))
        else:
            print("| tool | rep | KiB/s per task (3 s → 7 s) | sum KiB/s | min/max | conns at 7 s | remove s | requests | ok |")
            print("|---|---|---|---|---|---|---|---|---|")
            for t in tools:
                for r in (r for r in rs if r["tool"] == t):
                    print(f"| {t} | {r['rep']} | {', '.join(map(str, r.get('rates', [])))} | {r.get('total', '–')} | "
                          f"{r.get('fairness', '–')} | {r.get('connsAtEnd', '–')} | {r.get('removeSeconds', '–')} | "
                          f"{r.get('requests', '–')} | {'ok' if r['ok'] else 'FAIL'} |")
            print()
            for t in tools:
                good = [r for r in rs if r["tool"] == t and r.get("fairness") is not None]
                print(f"{t}: min/max {med_range([r['fairness'] for r in good], '.3f')}, "
                      f"sum {med_range([r['total'] for r in good], '.0f')} KiB/s (limit 6144)")
        fails = [r for r in rs if not r["ok"]]
        for r in fails:
            print(f"FAIL {r['tool']} rep {r['rep']}: {r['fail']}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--segget", required=True)
    p.add_argument("--scenarios", default="one,queue,share")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--share-reps", type=int, default=0, help="repetitions of `share` (default: --reps)")
    p.add_argument("--share-start", type=int, default=3, help="share: seconds after the add the window starts")
    p.add_argument("--share-window", type=int, default=4, help="share: seconds the window lasts")
    p.add_argument("--settle", type=float, default=0.5, help="seconds of rest after the sync before each run")
    p.add_argument("--timeout", type=float, default=180, help="seconds a run of one or queue may take")
    p.add_argument("--work", type=Path, default=Path("/work/bench-daemon-wan"))
    args = p.parse_args()
    args.segget = str(Path(args.segget).resolve())
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    for s in args.scenarios:
        if s not in ("one", "queue", "share"):
            p.error(f"unknown scenario {s}")
    if os.geteuid() != 0:
        log("daemon-wan.py needs root (network namespaces)")
        return 2
    args.work.mkdir(parents=True, exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} load {os.getloadavg()}; {args.segget}")
    bench = Bench(args)
    st = os.stat(args.segget)
    aria2 = subprocess.run(["aria2c", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    bench.record({"header": True, "argv": sys.argv, "segget": args.segget, "seggetSha256": sha256_file(Path(args.segget)),
                  "seggetSize": st.st_size, "seggetMtime": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(st.st_mtime)),
                  "aria2c": aria2, "link": LINKS["a"].describe(), "date": time.strftime("%Y-%m-%d %H:%M:%S")})
    bench.records.pop()
    interrupted = False
    try:
        bench.run()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for proc in list(_procs):
            stop(proc)
        if bench.nginx:
            bench.nginx.stop()
        LINK.down()
    log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} load {os.getloadavg()}; {(time.monotonic() - started) / 60:.1f} min; "
        f"runs appended to {args.work / 'runs.jsonl'}")
    report(bench.records)
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
