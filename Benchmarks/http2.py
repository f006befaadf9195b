#!/usr/bin/env python3
"""HTTP/2 against HTTP/1.1 from the same servers (issue 38): one large file, and a batch of small files.

    Benchmarks/http2.py single --segget BIN [--servers nginx,h2o] [--size 1G] [--reps 5]
    Benchmarks/http2.py single --segget BIN --wan [--size 64M] [--reps 5]
    Benchmarks/http2.py batch  --segget BIN [--segget-prev BIN] [--count 400] [--file-size 64K] [--reps 5] [--no-wan]

`single`: one file over TLS at `-n 8 -k` from nginx (`listen ... ssl http2`) and h2o, each started
here on loopback (or, with --wan, nginx inside the server namespace of the emulated WAN link a of
Benchmarks/wan/link.sh: 80 ms RTT, 0.1 % loss each way, 400 Mbit/s). The ways, interleaved (the
order rotated each repetition):
  h1            segget -n 8 -k                     HTTP/1.1 (ALPN offers only http/1.1)
  h2            segget -n 8 -k --http2             HTTP/2, each range a connection of its own
  h2-streams    the same with SEGGET_HTTP2_RANGES=streams: the ranges multiplexed as streams on one
                connection (libcurl's CURLPIPE_MULTIPLEX; segget's behaviour before issue 38)
Outputs go to /dev/shm (the disk is not what is measured) and are checked against the source.

`batch`: COUNT files of FILE_SIZE over HTTPS from nginx through WAN link a (or loopback with
--no-wan): segget -j 16 over HTTP/1.1 and with --http2 (`segget-h2-32`: the same at -j 32, its
most, 32 connections; `h2-before`: SEGGET_HTTP2_BATCH=before,
the batch as it was before issue 38: 16 files at once, no multiplexing), curl --parallel (its default
parallelism, 50) over HTTP/1.1 and HTTP/2, wget2 over HTTP/2 (its defaults); with --segget-prev BIN,
that other build too (`prev-h2`, `prev-h1`), interleaved with the rest. Every run's files are
counted and their bytes compared with the sources. Two more tools for batches of larger files
(`--tools`): `segget-h1-n1` (segget at `-n 1`) and `aria2c` (`-x 8 -s 8 -k 1M -j JOBS`), e.g.
`batch --count 8 --file-size 8M --jobs 4 --tools segget-h1,segget-h1-n1,aria2c,curl-h1`.

Through the WAN link, every run also records what the server sent for it (`serverBytes`: the bytes
that entered the link towards the client, IP and TCP headers, retransmissions and bytes the client
threw away included) and the packets the link's queue dropped (`queueDrops`), from
Benchmarks/wan/link.sh's counters; the table shows their medians (`sent MB`, `drops`).

Prints one line per run and a table of medians; writes every run as JSON lines to --out (default
/tmp/segget-http2-bench/runs.jsonl). Needs root for --wan (network namespaces), nginx, h2o, curl,
wget2, openssl. Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Benchmarks" / "harness"))
from files import random_file, sha256_file as sha256  # noqa: E402
from wan import LINKS, WanLink, stats_delta  # noqa: E402

WAN_NAME = "segget-h2"
CLIENT_NS, SERVER_NS = f"{WAN_NAME}-cli", f"{WAN_NAME}-srv"
SERVER_IP = "198.18.0.2"
MiB = 1 << 20


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def size_arg(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def make_cert(d: Path) -> None:
    if (d / "cert.pem").exists():
        return
    d.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", f"subjectAltName=IP:127.0.0.1,IP:{SERVER_IP},DNS:localhost",
         "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for f in ("key.pem", "cert.pem"):
        (d / f).chmod(0o644)


# -- servers ----------------------------------------------------------------------------------------

NGINX_CONF = """\
daemon off;
worker_processes auto;
{user}
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    keepalive_requests 100000;
    client_body_temp_path {d}/tmp;
    proxy_temp_path {d}/tmp;
    fastcgi_temp_path {d}/tmp;
    uwsgi_temp_path {d}/tmp;
    scgi_temp_path {d}/tmp;
    server {{
        listen {addr}:{port} ssl http2;
        ssl_certificate {certs}/cert.pem;
        ssl_certificate_key {certs}/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        root {www};
    }}
}}
"""

H2O_CONF = """\
{user}
error-log: {d}/error.log
listen:
  port: {port}
  host: {addr}
  ssl:
    certificate-file: {certs}/cert.pem
    key-file: {certs}/key.pem
    ocsp-update-interval: 0
hosts:
  default:
    paths:
      /:
        file.dir: {www}
"""


class Server:
    def __init__(self, kind: str, work: Path, www: Path, certs: Path, addr: str, port: int, netns: str | None):
        self.kind, self.addr, self.port, self.netns = kind, addr, port, netns
        self.d = work / f"{kind}-{'wan' if netns else 'lo'}"
        self.d.mkdir(parents=True, exist_ok=True)
        (self.d / "tmp").mkdir(exist_ok=True)
        user = "user root;" if os.geteuid() == 0 else ""
        if kind == "nginx":
            conf = self.d / "nginx.conf"
            conf.write_text(NGINX_CONF.format(user=user, d=self.d, addr=addr, port=port, certs=certs, www=www))
            argv = ["nginx", "-p", str(self.d), "-e", str(self.d / "error.log"), "-c", str(conf)]
        else:
            conf = self.d / "h2o.conf"
            conf.write_text(H2O_CONF.format(user="user: root" if user else "", d=self.d, addr=addr, port=port,
                                            certs=certs, www=www))
            argv = ["h2o", "-c", str(conf)]
        if netns:
            argv = ["ip", "netns", "exec", netns, *argv]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=open(self.d / "stdout.log", "ab"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"https://{addr}:{port}"
        probe = ["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2", self.url + "/"]
        if netns:
            probe = ["ip", "netns", "exec", CLIENT_NS, *probe]
        for _ in range(100):
            r = subprocess.run(probe, capture_output=True, text=True)
            if r.stdout[:1] in "2345" and r.stdout:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{kind} did not start; see {self.d}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# WAN link a of Benchmarks/harness/wan.py (80 ms, 0.1 % loss, 400 Mbit/s), under its own namespaces.
LINK = WanLink(WAN_NAME, LINKS["a"], seed=1)


# -- runs -------------------------------------------------------------------------------------------

def run_timed(argv: list[str], env: dict[str, str], wan: bool, timeout: float) -> tuple[float, int, str, float]:
    """Wall seconds, exit status, output and the client's CPU seconds (user + system)."""
    if wan:
        argv = ["ip", "netns", "exec", CLIENT_NS, *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, r.returncode, r.stdout + r.stderr, cpu


def run_on_link(argv: list[str], env: dict[str, str], wan: bool, timeout: float) -> tuple[float, int, str, float, dict]:
    """`run_timed`, and through the WAN link what the server sent for the run: the bytes that
    entered the link towards the client (headers of IP and TCP, retransmissions and bytes the
    client threw away included), and the packets the link's queue dropped."""
    before = LINK.stats() if wan else None
    secs, rc, text, cpu = run_timed(argv, env, wan, timeout)
    if before is None:
        return secs, rc, text, cpu, {}
    down = stats_delta(before, LINK.stats())["down"]
    return secs, rc, text, cpu, {"serverBytes": down["rx_bytes"], "queueDrops": down["queue_drops"]}


def segget_summary(text: str) -> dict:
    """connectionsOpened and requests of segget's --json output (the batch summary or the finish)."""
    found: dict = {}
    for line in text.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get("type") in ("summary", "finish") and "connectionsOpened" in o:
            found = {"connectionsOpened": o["connectionsOpened"], "requests": o.get("requests")}
    return found


def single(args: argparse.Namespace) -> list[dict]:
    work = args.work
    www = work / "www"
    src = www / f"single-{args.size}.bin"
    random_file(src, args.size)
    src_sha = sha256(src)
    certs = work / "certs"
    make_cert(certs)
    dests = {"shm": Path("/dev/shm/segget-http2-bench"), "disk": Path("/var/tmp/segget-http2-bench")}
    for d in args.dests.split(","):
        if d not in dests:
            sys.exit(f"--dests: {d!r} is neither shm nor disk")
    ways = {
        "h1": ([], {}),
        "h2": (["--http2"], {}),
        "h2-streams": (["--http2"], {"SEGGET_HTTP2_RANGES": "streams"}),
    }
    servers: list[Server] = []
    records = []
    try:
        if args.wan:
            LINK.up()
            servers.append(Server("nginx", work, www, certs, SERVER_IP, 8443, SERVER_NS))
        else:
            for i, kind in enumerate(args.servers.split(",")):
                servers.append(Server(kind, work, www, certs, "127.0.0.1", args.port + i, None))
        for rep in range(args.reps):
            for server in servers:
                names = list(ways)
                names = names[rep % len(names):] + names[:rep % len(names)]
                for way, dest in [(w, d) for w in names for d in args.dests.split(",")]:
                    flags, env = ways[way]
                    out_dir = dests[dest]
                    shutil.rmtree(out_dir, ignore_errors=True)
                    out_dir.mkdir(parents=True)
                    out = out_dir / "out.bin"
                    argv = [args.segget, "-n", "8", "-k", "--json", *flags, "-o", str(out), f"{server.url}/{src.name}"]
                    secs, rc, text, cpu, wire = run_on_link(argv, env, args.wan, args.timeout)
                    ok = rc == 0 and out.exists() and out.stat().st_size == args.size
                    if ok and (rep == 0 or args.check_every):
                        ok = sha256(out) == src_sha
                    rec = {"kind": "single", "server": server.kind, "wan": args.wan, "way": way, "dest": dest, "rep": rep,
                           "seconds": round(secs, 3), "cpu": round(cpu, 3), "rc": rc, "identical": ok,
                           **segget_summary(text), **wire,
                           "load": os.getloadavg()[0]}
                    records.append(rec)
                    log(json.dumps(rec))
                    if not ok:
                        log(text[-2000:])
                    shutil.rmtree(out_dir, ignore_errors=True)
    finally:
        for s in servers:
            s.stop()
        if args.wan:
            LINK.down()
    return records


def batch(args: argparse.Namespace) -> list[dict]:
    work = args.work
    www = work / "www"
    bdir = www / f"batch-{args.count}x{args.file_size}"
    names = [f"f{i:04d}.bin" for i in range(args.count)]
    for n in names:
        random_file(bdir / n, args.file_size)
    certs = work / "certs"
    make_cert(certs)
    out_dir = Path("/dev/shm/segget-http2-bench-batch")
    wan = not args.no_wan
    server = None
    records = []
    try:
        if wan:
            LINK.up()
            server = Server("nginx", work, www, certs, SERVER_IP, 8443, SERVER_NS)
        else:
            server = Server("nginx", work, www, certs, "127.0.0.1", args.port, None)
        urls = [f"{server.url}/{bdir.name}/{n}" for n in names]
        url_list = work / "batch-urls.txt"
        url_list.write_text("".join(u + "\n" for u in urls))
        curl_config = work / "batch.curl"
        curl_config.write_text("".join(f'url = "{u}"\noutput = "{out_dir / n}"\n' for u, n in zip(urls, names)))
        seg = [args.segget, "-k", "--json", "-i", str(url_list), "-j", str(args.jobs), "-d", str(out_dir)]
        tools = {
            "segget-h1": (seg, {}),
            "segget-h2": ([*seg, "--http2"], {}),
            # The same at -j 32, the most -j allows: 32 connections (curl --parallel opens up to 50).
            "segget-h2-32": ([*seg[:-4], "-j", "32", *seg[-2:], "--http2"], {}),
            "segget-h2-before": ([*seg, "--http2"], {"SEGGET_HTTP2_BATCH": "before"}),
            "segget-h1-n1": ([*seg, "-n", "1"], {}),
            "curl-h1": (["curl", "-sS", "-k", "--parallel", "--http1.1", "-K", str(curl_config)], {}),
            "curl-h2": (["curl", "-sS", "-k", "--parallel", "--http2", "-K", str(curl_config)], {}),
            "wget2-h2": (["wget2", "-q", "--no-check-certificate", "--http2", "-P", str(out_dir),
                          "-i", str(url_list)], {}),
            "aria2c": (["aria2c", "-q", "--check-certificate=false", "-x", "8", "-s", "8", "-k", "1M",
                        "-j", str(args.jobs), "-d", str(out_dir), "-i", str(url_list)], {}),
        }
        if args.segget_prev:
            prev = [args.segget_prev, *seg[1:]]
            tools["prev-h2"] = ([*prev, "--http2"], {})
            tools["prev-h1"] = (prev, {})
        chosen = args.tools.split(",") if args.tools else list(tools)
        for rep in range(args.reps):
            order = chosen[rep % len(chosen):] + chosen[:rep % len(chosen)]
            for name in order:
                argv, env = tools[name]
                shutil.rmtree(out_dir, ignore_errors=True)
                out_dir.mkdir(parents=True)
                secs, rc, text, cpu, wire = run_on_link(argv, env, wan, args.timeout)
                got = sorted(p.name for p in out_dir.iterdir())
                ok = rc == 0 and got == names and all(
                    (out_dir / n).read_bytes() == (bdir / n).read_bytes() for n in names)
                rec = {"kind": "batch", "wan": wan, "tool": name, "rep": rep, "seconds": round(secs, 3),
                       "cpu": round(cpu, 3), "rc": rc,
                       "identical": ok, **(segget_summary(text) if name.startswith(("segget", "prev")) else {}),
                       **wire, "load": os.getloadavg()[0]}
                records.append(rec)
                log(json.dumps(rec))
                if not ok:
                    log(text[-2000:])
        shutil.rmtree(out_dir, ignore_errors=True)
    finally:
        if server:
            server.stop()
        if wan:
            LINK.down()
    return records


def report(records: list[dict]) -> None:
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        server = r.get("server", "nginx") + ("" if r.get("dest", "shm") == "shm" else f"/{r['dest']}")
        key = (server, r.get("way") or r.get("tool"))
        groups.setdefault(key, []).append(r)
    print(f"{'server':<10} {'way':<18} {'median s':>9} {'min':>7} {'max':>7} {'cpu s':>6} {'conns':>6} {'reqs':>6} "
          f"{'sent MB':>8} {'drops':>6} {'ok':>5}")
    for (server, way), rs in groups.items():
        secs = [r["seconds"] for r in rs]
        cpu = statistics.median(r["cpu"] for r in rs)

        def med(key: str, scale: float = 1, fmt: str = "g") -> str:
            xs = [r[key] / scale for r in rs if r.get(key) is not None]
            return format(statistics.median(xs), fmt) if xs else ""
        print(f"{server:<10} {way:<18} {statistics.median(secs):9.3f} {min(secs):7.3f} {max(secs):7.3f} {cpu:6.2f} "
              f"{med('connectionsOpened'):>6} {med('requests'):>6} {med('serverBytes', 1e6, '.1f'):>8} "
              f"{med('queueDrops'):>6} {sum(r['identical'] for r in rs)}/{len(rs)}")
    # Each way against the first of its server, repetition by repetition (interleaved runs pair up).
    for server in dict.fromkeys(k[0] for k in groups):
        ways = [w for (s, w) in groups if s == server]
        base = {r["rep"]: r["seconds"] for r in groups[(server, ways[0])]}
        for way in ways[1:]:
            ratios = [r["seconds"] / base[r["rep"]] for r in groups[(server, way)] if r["rep"] in base]
            if ratios:
                print(f"{server:<8} {way} / {ways[0]}: median of paired ratios {statistics.median(ratios):.3f} "
                      f"({', '.join(f'{x:.2f}' for x in ratios)})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["single", "batch"])
    p.add_argument("--segget", required=True)
    p.add_argument("--segget-prev", default=None,
                   help="batch: another build of segget, run as the tools prev-h2 and prev-h1 (interleaved with the rest)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--servers", default="nginx,h2o")
    p.add_argument("--size", type=size_arg, default=None)
    p.add_argument("--wan", action="store_true", help="single: nginx through WAN link a")
    p.add_argument("--no-wan", action="store_true", help="batch: on loopback instead of WAN link a")
    p.add_argument("--count", type=int, default=400)
    p.add_argument("--file-size", type=size_arg, default=64 << 10)
    p.add_argument("--jobs", type=int, default=16, help="segget's -j in the batch (default 16)")
    p.add_argument("--tools", default="", help="batch: a comma-separated subset of the tools")
    p.add_argument("--port", type=int, default=18443)
    p.add_argument("--dests", default="shm",
                   help="single: where the file goes, comma-separated: shm (/dev/shm, the default) and/or disk (/var/tmp)")
    p.add_argument("--check-every", action="store_true", help="single: sha256 every run, not only the first")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--work", type=Path, default=Path("/tmp/segget-http2-bench"))
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    args.segget = str(Path(args.segget).resolve())
    if args.segget_prev:
        args.segget_prev = str(Path(args.segget_prev).resolve())
    if args.size is None:
        args.size = (64 << 20) if args.wan else (1 << 30)
    args.work.mkdir(parents=True, exist_ok=True)
    log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} load {os.getloadavg()}")
    records = single(args) if args.what == "single" else batch(args)
    out = args.out or args.work / "runs.jsonl"
    with open(out, "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} load {os.getloadavg()}; runs appended to {out}")
    report(records)


if __name__ == "__main__":
    main()
