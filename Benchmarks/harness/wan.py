"""segget against its peers over an emulated WAN: real TCP through latency, loss and a bottleneck.

`scripts/bench wan ...` (see Benchmarks/README.md, "WAN"). For each link it brings up two network
namespaces joined by Benchmarks/wan/wanlink (through Benchmarks/wan/link.sh), runs nginx in the
server namespace over HTTP and HTTPS, and runs every tool in the client namespace, interleaved (the
order rotated each repetition). Each run records the wall time, the sha256 of the output against
the source's, the requests and TCP connections nginx logged, the SYNs wanlink forwarded, the
packets it dropped, and for segget the re-dials it traced (`SEGGET_DEBUG=1`).

Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

import disk  # noqa: E402
import measure  # noqa: E402
import tools as toolmod  # noqa: E402
from files import random_file  # noqa: E402
from nginx import LOG_FORMAT, Nginx  # noqa: E402

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]
LINK_SH = REPO / "Benchmarks" / "wan" / "link.sh"
CLIENT_IP, SERVER_IP = "198.18.0.1", "198.18.0.2"
HTTP_PORT, TLS_PORT, STATUS_PORT = 8080, 8443, 8081
# segget's SEGGET_DEBUG trace of a re-dial (Sources/Segget/Engine/Coordinator+Policy.swift):
# "[12.34] connection 3 redial at 1.2 MB/s vs typical 5.6 MB/s (first bytes take ...)".
REDIAL_TRACE = re.compile(r"^\[[\d.]+\] connection \d+ redial at ")
ALL_TOOLS = ["segget", "aria2c", "axel", "curl"]
CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class Link:
    name: str
    rtt_ms: float
    loss: float          # per packet and per direction
    rate_mbit: float     # 0: no bottleneck
    location: str        # nginx location: "uncapped", or "capped" (limit_rate 16m per request)
    queue_bytes: int = -1  # -1: wanlink's default, one bandwidth-delay product

    def describe(self) -> str:
        rate = f"{self.rate_mbit:g} Mbit/s" if self.rate_mbit else "no bottleneck"
        cap = ", nginx `limit_rate 16m` per request" if self.location == "capped" else ""
        return f"{self.rtt_ms:g} ms RTT, {self.loss * 100:g} % loss each way, {rate}{cap}"

    def ideal_s(self, size: int, connections: int) -> float:
        """The time the link's limit alone allows: the bottleneck, or N requests at 16 MiB/s."""
        rates = []
        if self.rate_mbit:
            rates.append(self.rate_mbit * 1e6 / 8)
        if self.location == "capped":
            rates.append(16 * MiB * connections)
        return size / min(rates) if rates else 0.0


LINKS = {
    "a": Link("a", 80, 0.001, 400, "uncapped"),
    "b": Link("b", 150, 0.005, 200, "uncapped"),
    "c": Link("c", 40, 0.0, 0, "capped"),
    # A long path, as through a geostationary satellite: not in the default set.
    "d": Link("d", 600, 0.0, 0, "uncapped"),
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the link ---------------------------------------------------------------------------------------

class WanLink:
    """Benchmarks/wan/link.sh up/down/stats for one link, under the namespace prefix `name`."""

    def __init__(self, name: str, link: Link, seed: int):
        self.name, self.link, self.seed = name, link, seed
        self.client_ns, self.server_ns = f"{name}-cli", f"{name}-srv"
        self.up_ = False

    def up(self) -> None:
        argv = [str(LINK_SH), "up", "--name", self.name, "--delay-ms", str(self.link.rtt_ms),
                "--loss", str(self.link.loss), "--rate-mbit", str(self.link.rate_mbit),
                "--queue-bytes", str(self.link.queue_bytes), "--seed", str(self.seed)]
        self.up_ = True  # so that down() runs even when `up` failed halfway
        subprocess.run(argv, check=True)

    def down(self) -> None:
        if self.up_:
            subprocess.run([str(LINK_SH), "down", "--name", self.name], check=False)
            self.up_ = False

    def stats(self) -> dict[str, dict[str, int]]:
        """wanlink's counters: {"up": {...}, "down": {...}} ("up" is client to server)."""
        r = subprocess.run([str(LINK_SH), "stats", "--name", self.name], capture_output=True, text=True)
        return parse_stats(r.stdout)

    def in_client(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.client_ns, *argv]

    def ping(self, count: int, interval: float = 0.05) -> dict:
        r = subprocess.run(self.in_client(["ping", "-q", "-n", "-c", str(count), "-i", str(interval), SERVER_IP]),
                           capture_output=True, text=True)
        return parse_ping(r.stdout)


def parse_stats(text: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        out[parts[0]] = {k: int(v) for k, v in (p.split("=", 1) for p in parts[1:] if "=" in p)}
    return out


def stats_delta(before: dict, after: dict) -> dict[str, dict[str, int]]:
    keys = ("rx_pkts", "rx_bytes", "lost", "queue_drops", "ring_drops", "syns")
    return {d: {k: after.get(d, {}).get(k, 0) - before.get(d, {}).get(k, 0) for k in keys}
            for d in ("up", "down")}


def parse_ping(text: str) -> dict:
    """{'sent', 'received', 'loss', 'min', 'avg', 'max', 'mdev'} from `ping -q` output."""
    out: dict = {}
    m = re.search(r"(\d+) packets transmitted, (\d+) received", text)
    if m:
        out["sent"], out["received"] = int(m.group(1)), int(m.group(2))
        out["loss"] = 1 - out["received"] / out["sent"] if out["sent"] else None
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", text)
    if m:
        out.update(zip(("min", "avg", "max", "mdev"), map(float, m.groups())))
    return out


# -- nginx in the server namespace ------------------------------------------------------------------

WAN_CONF = """\
# Generated by Benchmarks/harness/wan.py — do not edit, it is rewritten on every run.
daemon off;
master_process on;
worker_processes auto;
{user_line}
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;

events {{
    worker_connections 1024;
}}

http {{
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    server_tokens off;

    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;

    log_format bench "{log_format}";
    access_log {prefix}/access.log bench;

    server {{
        listen {server_ip}:{http_port};
{locations}
    }}

    server {{
        listen {server_ip}:{tls_port} ssl;
        ssl_certificate {prefix}/cert.pem;
        ssl_certificate_key {prefix}/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
{locations}
    }}

    # Polled by the harness inside the server namespace, never across the link.
    server {{
        listen 127.0.0.1:{status_port};
        access_log off;
        location = /nginx_status {{ stub_status; }}
    }}
}}
"""

WAN_LOCATIONS = """\
        location /uncapped/ {{ alias {data}/; }}
        location /capped/   {{ alias {data}/; limit_rate 16m; }}
"""


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def connect_in_netns(netns: str, addr: tuple[str, int], timeout: float) -> socket.socket:
    """A TCP connection made from inside `netns` (setns on this thread only, then back home)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        _setns(target)
        try:
            return socket.create_connection(addr, timeout=timeout)
        finally:
            _setns(home)
    finally:
        os.close(home)
        os.close(target)


class WanNginx(Nginx):
    """nginx inside the server namespace, on SERVER_IP; stub_status on its loopback."""

    # Its access log's fields (a subclass may log others, e.g. the Range asked for).
    log_format = LOG_FORMAT

    def __init__(self, prefix: Path, data_dir: Path, netns: str):
        super().__init__(prefix, data_dir)
        self.netns = netns
        self.http_port, self.tls_port = HTTP_PORT, TLS_PORT

    def _make_cert(self) -> None:
        cert, key = self.prefix / "cert.pem", self.prefix / "key.pem"
        if cert.exists() and key.exists():
            return
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
             "-out", str(cert), "-days", "30", "-subj", f"/CN={SERVER_IP}",
             "-addext", f"subjectAltName=IP:{SERVER_IP}"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _write_conf(self) -> Path:
        user_line = "user root;" if os.geteuid() == 0 else ""
        conf = WAN_CONF.format(
            prefix=self.prefix, user_line=user_line, log_format=self.log_format, server_ip=SERVER_IP,
            http_port=HTTP_PORT, tls_port=TLS_PORT, status_port=STATUS_PORT,
            locations=WAN_LOCATIONS.format(data=self.data_dir))
        path = self.prefix / "nginx.conf"
        path.write_text(conf)
        return path

    def start(self) -> None:
        self.prefix.mkdir(parents=True, exist_ok=True)
        (self.prefix / "tmp").mkdir(exist_ok=True)
        self._make_cert()
        conf = self._write_conf()
        if self.log_path.exists():
            self.log_path.unlink()
        with open(self.prefix / "stderr.log", "ab") as err:
            # `ip netns exec` execs nginx: self.proc.pid is the master's PID.
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", self.netns, "nginx", "-p", str(self.prefix),
                 "-e", str(self.prefix / "error.log"), "-c", str(conf)],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self._status() is not None:
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not start in {self.netns}; see {self.prefix}/error.log")

    def _status(self) -> int | None:
        try:
            with connect_in_netns(self.netns, ("127.0.0.1", STATUS_PORT), 2) as s:
                s.sendall(b"GET /nginx_status HTTP/1.0\r\nHost: localhost\r\n\r\n")
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
            m = re.search(rb"Active connections:\s*(\d+)", data)
            return int(m.group(1)) if m else None
        except OSError:
            return None

    def url(self, location: str, name: str, tls: bool) -> str:
        if tls:
            return f"https://{SERVER_IP}:{TLS_PORT}/{location}/{name}"
        return f"http://{SERVER_IP}:{HTTP_PORT}/{location}/{name}"


# -- runs -------------------------------------------------------------------------------------------

def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 * MiB):
            h.update(chunk)
    return h.hexdigest()


def count_redials(lines: list[str]) -> int:
    return sum(1 for l in lines if REDIAL_TRACE.match(l.strip()))


def ensure_random_file(data_dir: Path, size: int) -> Path:
    path = data_dir / f"random-{size}.bin"
    if path.exists() and path.stat().st_size == size:
        return path
    log(f"generating {path} ...")
    random_file(path, size)
    return path


class WanBench:
    def __init__(self, args: argparse.Namespace, tools: dict[str, toolmod.Tool]):
        self.args = args
        self.tools = tools
        self.out = args.out
        self.data_dir, self.dl_dir, self.logs_dir = self.out / "data", self.out / "dl", self.out / "logs"
        for d in (self.data_dir, self.dl_dir, self.logs_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.runs_path = self.out / "wan-runs.jsonl"
        self.runs_path.write_text("")
        self.records: list[dict] = []
        self.links: list[dict] = []  # per link: parameters, ping, wanlink totals
        self.link: WanLink | None = None
        self.nginx: WanNginx | None = None
        self.src: Path | None = None
        self.digest = ""
        self.disk: dict = {"filesystem": disk.describe(self.dl_dir), "dd_before": None}

    def clean_dl(self) -> None:
        for p in self.dl_dir.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()

    def argv_for(self, tool: toolmod.Tool, url: str, tls: bool, out: Path) -> list[str]:
        assert self.link is not None
        argv = tool.build(self.args.connections, out, url, tls, self.src.stat().st_size, False)
        if tool.name.startswith("segget"):
            # The re-dial trace goes to stderr, into the run's log; -q still hides the progress bar.
            argv = ["env", "SEGGET_DEBUG=1", *argv]
        return self.link.in_client(argv)

    def run_one(self, link: Link, tool: toolmod.Tool, tls: bool, rep: int) -> dict:
        assert self.link and self.nginx and self.src
        size = self.src.stat().st_size
        proto = "https" if tls else "http"
        url = self.nginx.url(link.location, self.src.name, tls)
        out = self.dl_dir / "download.bin"
        argv = self.argv_for(tool, url, tls, out)
        self.clean_dl()
        measure.sync_all()
        time.sleep(self.args.settle)
        log_path = self.logs_dir / f"wan-{link.name}-{proto}-{tool.name}.log"
        log_start = log_path.stat().st_size if log_path.exists() else 0
        offset = self.nginx.log_offset()
        before = self.link.stats()
        # Generous: a single connection over the lossy link may be far slower than the ideal.
        ideal = link.ideal_s(size, tool.connections(self.args.connections))
        timeout = max(10 * ideal, size / (2 * MiB)) + 60
        m = measure.run(argv, self.dl_dir, log_path, timeout)
        self.nginx.quiesce()
        after = self.link.stats()
        fail = None
        digest = None
        if m.killed_by == "timeout":
            fail = f"timeout after {m.wall_s:.0f} s"
        elif m.exit_code != 0:
            fail = f"exit code {m.exit_code}"
        elif not out.exists():
            fail = "no output file"
        else:
            digest = sha256_of(out)
            if digest != self.digest:
                fail = f"sha256 {digest[:16]}… differs from the source's {self.digest[:16]}…"
        self.clean_dl()
        with open(log_path, "rb") as f:
            f.seek(log_start)
            lines = f.read().decode("utf-8", "replace").splitlines()
        entries = self.nginx.entries_since(offset)
        delta = stats_delta(before, after)
        rec = {
            "link": link.name, "protocol": proto, "tool": tool.name, "rep": rep, "size": size,
            "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "cmd": shlex.join(argv), "ok": fail is None, "fail": fail, "exit_code": m.exit_code,
            "wall_s": m.wall_s, "cpu_s": m.cpu_s, "maxrss_kib": m.maxrss_kib,
            "mib_s": size / MiB / m.wall_s, "sha256": digest,
            "requests": len(entries), "connections": len({e.connection for e in entries}),
            "server_body_bytes": sum(e.body_bytes_sent for e in entries),
            "syns": delta["up"]["syns"],
            "lost_up": delta["up"]["lost"], "lost_down": delta["down"]["lost"],
            "queue_drops": delta["up"]["queue_drops"] + delta["down"]["queue_drops"],
            "ring_drops": delta["up"]["ring_drops"] + delta["down"]["ring_drops"],
            "down_pkts": delta["down"]["rx_pkts"],
            "redials": count_redials(lines) if tool.name.startswith("segget") else None,
        }
        return rec

    def save(self, rec: dict) -> None:
        self.records.append(rec)
        with open(self.runs_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        if rec["ok"]:
            red = f"  re-dials {rec['redials']}" if rec["redials"] is not None else ""
            log(f"  {rec['tool']:<8} {rec['protocol']:<5} {rec['wall_s']:7.2f} s  {rec['mib_s']:6.1f} MiB/s  "
                f"conns {rec['connections']} (SYNs {rec['syns']})  requests {rec['requests']}  "
                f"lost {rec['lost_up']}+{rec['lost_down']}  queue drops {rec['queue_drops']}{red}")
        else:
            log(f"  {rec['tool']:<8} {rec['protocol']:<5} FAIL: {rec['fail']}")

    def run_link(self, link: Link) -> None:
        self.link = WanLink(self.args.netns, link, self.args.seed)
        info: dict = {"link": link.name, "rtt_ms": link.rtt_ms, "loss": link.loss,
                      "rate_mbit": link.rate_mbit, "location": link.location,
                      "description": link.describe()}
        try:
            self.link.up()
            info["ping"] = self.link.ping(self.args.pings)
            p = info["ping"]
            log(f"[{link.name}] {link.describe()}: ping {p.get('received')}/{p.get('sent')} back, "
                f"RTT min/avg/max {p.get('min')}/{p.get('avg')}/{p.get('max')} ms")
            self.nginx = WanNginx(self.out / f"nginx-{link.name}", self.data_dir, self.link.server_ns)
            self.nginx.start()
            tools = [self.tools[t] for t in self.args.tools if t in self.tools]
            for rep in range(self.args.reps):
                for tls in self.args.tls_modes:
                    k = rep % len(tools)
                    order = tools[k:] + tools[:k]
                    proto = "https" if tls else "http"
                    log(f"[{link.name}/{proto}] rep {rep + 1}/{self.args.reps}: {', '.join(t.name for t in order)}")
                    for tool in order:
                        self.save(self.run_one(link, tool, tls, rep + 1))
            info["wanlink_totals"] = self.link.stats()
        finally:
            if self.nginx:
                self.nginx.stop()
                self.nginx = None
            self.link.down()
            self.links.append(info)

    def run(self) -> None:
        self.src = ensure_random_file(self.data_dir, self.args.size)
        self.digest = sha256_of(self.src)
        if self.args.dd_size > 0:
            log(f"dd: writing {self.args.dd_size // MiB} MiB into {self.out / 'ddtest'} three ways ...")
            self.disk["dd_before"] = disk.dd_rates(self.out / "ddtest", self.args.dd_size)
            for r in self.disk["dd_before"]:
                log(f"  {r['name']:<30} {r['seconds']:6.2f} s  {r['mib_s'] or 0:.0f} MiB/s")
        for name in self.args.links:
            self.run_link(LINKS[name])


# -- report -----------------------------------------------------------------------------------------

def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summarize(records: list[dict]) -> list[dict]:
    """One row per (link, protocol, tool): medians and ranges of the good runs, in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["link"], r["protocol"], r["tool"]), []).append(r)
    rows = []
    for (link, proto, tool), runs in groups.items():
        good = [r for r in runs if r["ok"]]
        walls = [r["wall_s"] for r in good]
        row = {"link": link, "protocol": proto, "tool": tool, "runs": len(runs), "ok": len(good),
               "median_s": _median(walls), "min_s": min(walls) if walls else float("nan"),
               "max_s": max(walls) if walls else float("nan"),
               "connections": [r["connections"] for r in good], "syns": [r["syns"] for r in good],
               "requests": [r["requests"] for r in good],
               "redials": [r["redials"] for r in good] if tool.startswith("segget") else None,
               "fails": [r["fail"] for r in runs if not r["ok"]]}
        rows.append(row)
    for row in rows:
        ref = next((o for o in rows if o["link"] == row["link"] and o["protocol"] == row["protocol"]
                    and o["tool"] == "aria2c"), None)
        row["ratio_aria2c"] = (row["median_s"] / ref["median_s"]
                               if ref and ref["ok"] and row["ok"] else None)
    return rows


def _list(xs: list | None) -> str:
    if xs is None:
        return "–"
    return ", ".join(str(x) for x in xs) if xs else "–"


def markdown(records: list[dict], context: dict) -> str:
    args = context["args"]
    machine = context["machine"]
    lines = [f"## WAN, {context['date'][:10]}, {machine['commit']}", ""]
    lines.append(
        f"{machine['nproc']} CPUs ({machine['cpu']}), {machine['memory_gib']} GiB, Linux {machine['kernel']}, "
        f"load average {', '.join(f'{x:.1f}' for x in machine['loadavg_at_start'])} at the start"
        + (f", {', '.join(f'{x:.1f}' for x in context['loadavg_at_end'])} at the end. " if context.get("loadavg_at_end") else ". ") +
        f"{args.size // MiB} MiB of random bytes, {args.reps} repetition(s), tools interleaved with the "
        f"order rotated each repetition, every output checked by sha256. "
        f"TCP congestion control {context['tcp_cc']}; client and server in namespaces of their own, "
        f"joined by `Benchmarks/wan/wanlink` (TUN, MTU 1500). Took {context['elapsed_s'] / 60:.1f} min.")
    lines.append("")
    dd = (context["disk"].get("dd_before") or [])
    if dd:
        lines.append("Disk (`dd` into the download directory, before the runs): " + "; ".join(
            f"{r['name']} {r['mib_s']:.0f} MiB/s" if r.get("mib_s") else f"{r['name']} failed" for r in dd) + ".")
        lines.append("")
    lines.append("Command: `" + context["command_line"] + "`")
    lines.append("")
    lines.append("| link | configured | ping RTT min / avg / max | ping loss (both ways) | wanlink: lost / queue drops (all runs) |")
    lines.append("|---|---|---|---|---|")
    for info in context["links"]:
        p = info.get("ping", {})
        tot = info.get("wanlink_totals", {})
        lost = sum(tot.get(d, {}).get("lost", 0) for d in ("up", "down"))
        pkts = sum(tot.get(d, {}).get("rx_pkts", 0) for d in ("up", "down"))
        qd = sum(tot.get(d, {}).get("queue_drops", 0) for d in ("up", "down"))
        share = f" ({lost / pkts * 100:.3f} % of {pkts} packets)" if pkts else ""
        ping = (f"{p['min']:.1f} / {p['avg']:.1f} / {p['max']:.1f} ms" if "avg" in p else "–")
        ploss = f"{p['loss'] * 100:.1f} % of {p['sent']}" if p.get("sent") else "–"
        lines.append(f"| {info['link']} | {info['description']} | {ping} | {ploss} | {lost}{share} / {qd} |")
    lines.append("")
    rows = summarize(records)
    size = args.size
    for link in [i["link"] for i in context["links"]]:
        for proto in ("http", "https"):
            rs = [r for r in rows if r["link"] == link and r["protocol"] == proto]
            if not rs:
                continue
            L = LINKS[link]
            ideal = L.ideal_s(size, args.connections)
            lines.append(f"### Link {link}, {proto.upper()}: {L.describe()}"
                         + (f" (ideal with {args.connections} connections {ideal:.2f} s)" if ideal else ""))
            lines.append("")
            lines.append("| tool | median | min | max | MiB/s (median) | / aria2c | re-dials | TCP connections (SYNs) | requests | good runs |")
            lines.append("|---|---|---|---|---|---|---|---|---|---|")
            for r in rs:
                ok = r["ok"] > 0
                ratio = f"{r['ratio_aria2c']:.2f}" if r["ratio_aria2c"] is not None else "–"
                lines.append(
                    f"| {r['tool']} | {r['median_s']:.2f} s | {r['min_s']:.2f} s | {r['max_s']:.2f} s | "
                    f"{size / MiB / r['median_s']:.1f} | {ratio} | {_list(r['redials'])} | "
                    f"{_list(r['connections'])} ({_list(r['syns'])}) | {_list(r['requests'])} | "
                    f"{r['ok']}/{r['runs']} |" if ok else
                    f"| {r['tool']} | FAIL | | | | | | | | 0/{r['runs']}: {'; '.join(r['fails'])[:120]} |")
            fails = [f for r in rs for f in r["fails"]]
            if fails and any(r["ok"] for r in rs):
                lines.append("")
                lines.append("Failed runs: " + "; ".join(f"{r['tool']}: {f}" for r in rs for f in r["fails"]))
            lines.append("")
    lines.append("Re-dials: segget's `SEGGET_DEBUG=1` trace lines \"connection N redial at …\", per run. "
                 "TCP connections: distinct `$connection` in nginx's log; SYNs: TCP SYNs wanlink forwarded "
                 "from the client (the same unless a connection never sent a request, or a SYN was lost and "
                 "sent again). Requests: lines in nginx's log.")
    lines.append("")
    lines.append("Versions: " + "; ".join(f"{k}: {v}" for k, v in context["versions"].items()))
    lines.append("")
    return "\n".join(lines)


def insert_into_results(section: str, path: Path) -> None:
    """Put the section under RESULTS.md's title, above the earlier (newest-first) sections."""
    text = path.read_text() if path.exists() else "# segget benchmark results\n"
    head, sep, rest = text.partition("\n## ")
    new = head.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n" + (("\n## " + rest) if sep else "")
    path.write_text(new)


# -- command line -----------------------------------------------------------------------------------

def parse_args(argv: list[str]) -> argparse.Namespace:
    import bench  # parse_size; imported here so that bench.py can import this module
    p = argparse.ArgumentParser(
        prog=os.environ.get("SEGGET_BENCH_PROG", "scripts/bench") + " wan",
        description="segget, aria2c, axel and curl over an emulated WAN (latency, loss, bottleneck).")
    p.add_argument("--quick", "--wan-quick", action="store_true",
                   help="A smoke check: 64 MiB, 1 repetition, no dd (default: 256 MiB, 3 repetitions).")
    p.add_argument("--size", type=bench.parse_size, help="Size of the test file (default 256M; --quick 64M).")
    p.add_argument("--reps", type=int, help="Repetitions (default 3; --quick 1).")
    p.add_argument("--links", default="a,b,c",
                   help="Comma-separated links (default a,b,c): " + "; ".join(
                       f"{k}: {v.describe()}" for k, v in LINKS.items()).replace("%", "%%") + ".")
    p.add_argument("--https", dest="https", action="store_true", default=True,
                   help="Run every link over HTTP and over HTTPS (the default).")
    p.add_argument("--no-https", dest="https", action="store_false", help="HTTP only.")
    p.add_argument("--https-only", action="store_true", help="HTTPS only.")
    p.add_argument("--tools", default=",".join(ALL_TOOLS), help=f"Comma-separated tools (default {','.join(ALL_TOOLS)}).")
    p.add_argument("--connections", "-n", type=int, default=8, help="Connections per tool (default 8; curl uses 1).")
    p.add_argument("--segget", help="Path of the segget binary (default .build/release/segget).")
    p.add_argument("--baseline", help="Path of another segget binary (an earlier commit's), run as tool segget-base "
                   "interleaved with the others.")
    p.add_argument("--out", type=Path, default=REPO / "bench-out" / "wan", help="Output directory (default bench-out/wan/).")
    p.add_argument("--dd-size", type=bench.parse_size, help="Bytes dd writes to measure the disk (default 1G; --quick 0).")
    p.add_argument("--settle", type=float, default=0.5, help="Seconds of rest after the sync before each run (default 0.5).")
    p.add_argument("--pings", type=int, default=50, help="Pings at 50 ms intervals to check each link's RTT (default 50).")
    p.add_argument("--seed", type=int, default=1, help="wanlink's loss PRNG seed (default 1).")
    p.add_argument("--netns", default="segget-wan", help="Namespace prefix: NAME-cli and NAME-srv (default segget-wan).")
    p.add_argument("--write-results", action="store_true",
                   help="Also insert the section at the top of Benchmarks/RESULTS.md.")
    args = p.parse_args(argv)
    args.size = args.size or (64 * MiB if args.quick else 256 * MiB)
    args.reps = args.reps or (1 if args.quick else 3)
    args.dd_size = args.dd_size if args.dd_size is not None else (0 if args.quick else 1 << 30)
    args.links = [l.strip() for l in args.links.split(",") if l.strip()]
    for l in args.links:
        if l not in LINKS:
            p.error(f"unknown link {l!r}; choose from {', '.join(LINKS)}")
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    for t in args.tools:
        if t not in ALL_TOOLS:
            p.error(f"unknown tool {t!r}; choose from {', '.join(ALL_TOOLS)}")
    args.tls_modes = [True] if args.https_only else ([False, True] if args.https else [False])
    if not 1 <= args.connections <= 16:
        p.error("--connections must be between 1 and 16 (aria2c allows at most 16 per server)")
    args.out = args.out.resolve()
    return args


def main(argv: list[str]) -> int:
    import bench
    args = parse_args(argv)
    if os.geteuid() != 0:
        log("scripts/bench wan: needs root (network namespaces, TUN devices).")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    command_line = shlex.join([os.environ.get("SEGGET_BENCH_PROG", "scripts/bench"), "wan", *argv])
    notes: list[str] = []
    tools: dict[str, toolmod.Tool] = {}
    for name in args.tools:
        if name == "segget":
            args.no_build = False
            binary = bench.find_segget(args, notes)
            if binary:
                tools[name] = toolmod.make_segget(binary)
        elif shutil.which(toolmod.PEERS[name].binary):
            tools[name] = toolmod.PEERS[name]
        else:
            notes.append(f"{name}: not installed; not run.")
    if args.baseline:
        if os.access(args.baseline, os.X_OK):
            tools["segget-base"] = toolmod.make_segget(args.baseline, name="segget-base")
            args.tools.insert(args.tools.index("segget") + 1 if "segget" in args.tools else 0, "segget-base")
        else:
            notes.append(f"segget-base: `{args.baseline}` is not an executable file; not run.")
    for n in notes:
        log(f"note: {n}")
    started = time.monotonic()
    started_at = dt.datetime.now(dt.timezone.utc)
    machine = bench.machine_info()
    wb = WanBench(args, tools)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    interrupted = False
    try:
        wb.run()
    except KeyboardInterrupt:
        interrupted = True
        notes.append("The run was interrupted; the tables hold only the runs that finished.")
    finally:
        measure.kill_current()
        if wb.nginx:
            wb.nginx.stop()
        if wb.link:
            wb.link.down()
    tcp_cc = subprocess.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"],
                            capture_output=True, text=True).stdout.strip()
    context = {
        "command_line": command_line, "date": started_at.isoformat(timespec="seconds"),
        "elapsed_s": time.monotonic() - started, "machine": machine, "disk": wb.disk, "args": args,
        "links": wb.links, "tcp_cc": tcp_cc or "unknown", "loadavg_at_end": os.getloadavg(),
        "versions": {t.name: toolmod.version_line(t) for t in tools.values()} | {"nginx": bench.nginx_version()},
    }
    md = markdown(wb.records, context)
    if notes:
        md += "\nNotes: " + " ".join(notes) + "\n"
    (args.out / "wan-results.md").write_text(md)
    header = {k: context[k] for k in ("command_line", "date", "elapsed_s", "machine", "disk", "links", "tcp_cc", "versions")}
    header["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    (args.out / "wan-header.json").write_text(json.dumps(header, indent=2) + "\n")
    print(md)
    if args.write_results and not interrupted:
        insert_into_results(md, REPO / "Benchmarks" / "RESULTS.md")
        log("inserted the section into Benchmarks/RESULTS.md")
    log(f"done in {context['elapsed_s'] / 60:.1f} min; wrote {args.out / 'wan-results.md'}, {wb.runs_path}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
