#!/usr/bin/env python3
"""A list of 330 lines as people write them, through an emulated WAN: segget builds beside aria2c
(and curl), interleaved.

    sudo python3 Benchmarks/mixed-list.py [--delay-ms 200] [--loss 0.01] [--rate-mbit 200]
        [--reps 4] [--jobs 16] [--https] [--curl] NAME=SEGGET_BINARY ...

The list (made with `random.seed(9)`, as in exploratory run 9): 300 files of 1,000 B to 500 KB (1,000,
16,384, 65,536, 100,000, 200,000 and 500,000 bytes; 41.7 MB in all), 10 URLs that answer 404, 10 that
redirect (302) to files of the list, and 10 lines repeated, in a shuffled order. nginx serves it in
the server's namespace of `Benchmarks/wan/link.sh` (HTTP on port 31501, HTTPS with HTTP/2 offered on
31502, a self-signed certificate; `-k` and `--check-certificate=false`). Each repetition runs, in
this order: every segget build (`-q -i LIST -j JOBS`), `aria2c -q -j JOBS -i LIST` and, with
`--curl`, `curl -L --parallel --parallel-max JOBS`, each into a fresh directory. nginx's access log
gives each run's requests and TCP connections.

Prints one line per run and, per tool, the median time, requests and connections, and per segget
build the median of its paired ratios to aria2c (below 1: faster). Every run must leave the 300
files, identical. Needs root (network namespaces), nginx, aria2c, curl, openssl. Python 3.11
standard library only. Everything it starts it stops by PID; the link goes down at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK_SH = REPO / "Benchmarks" / "wan" / "link.sh"
NAME = "segget-mix"
CLIENT_NS, SERVER_NS, SERVER_IP = f"{NAME}-cli", f"{NAME}-srv", "198.18.0.2"
SIZES = [1000, 16384, 65536, 100000, 200000, 500000]

NGINX_CONF = """\
daemon off;
worker_processes 2;
{user}
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    default_type application/octet-stream;
    log_format mix '$connection $status $body_bytes_sent';
    access_log {d}/access.log mix;
    sendfile on;
    keepalive_requests 10000;
    client_body_temp_path {d}/tmp;
    proxy_temp_path {d}/tmp;
    fastcgi_temp_path {d}/tmp;
    uwsgi_temp_path {d}/tmp;
    scgi_temp_path {d}/tmp;
    server {{
        listen {ip}:31501;
        listen {ip}:31502 ssl http2;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        root {www};
        location /redir/ {{ rewrite ^/redir/(.*)$ /$1 redirect; }}
    }}
}}
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def make_files(www: Path) -> dict[str, str]:
    """The 300 files and their SHA-256, by name."""
    rng = random.Random(9)
    (www / "b").mkdir(parents=True, exist_ok=True)
    sums = {}
    for i in range(300):
        data = rng.randbytes(rng.choice(SIZES))
        name = f"f{i:03d}.bin"
        (www / "b" / name).write_bytes(data)
        sums[name] = hashlib.sha256(data).hexdigest()
    for d in (www, www / "b"):
        d.chmod(0o755)
    return sums


def make_list(base: str) -> list[str]:
    rng = random.Random(9)
    lines = [f"{base}/b/f{i:03d}.bin" for i in range(300)]
    lines += [f"{base}/b/missing{i}.bin" for i in range(10)]
    lines += [f"{base}/redir/b/f{i:03d}.bin" for i in range(10)]
    lines += rng.sample(lines[:300], 10)
    rng.shuffle(lines)
    return lines


def check(out: Path, sums: dict[str, str]) -> bool:
    """Every file of the list is there, identical, under its own name (a repeated one may also be
    there under a second name; nothing else is checked)."""
    for name, digest in sums.items():
        p = out / name
        if not p.is_file() or hashlib.sha256(p.read_bytes()).hexdigest() != digest:
            return False
    return True


def access_counts(log_path: Path, start: int) -> tuple[int, int, int]:
    """Requests, distinct connections and lines read, from line `start` of the access log on."""
    lines = log_path.read_text().splitlines()[start:]
    return len(lines), len({l.split()[0] for l in lines if l.split()}), len(lines) + start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--delay-ms", type=float, default=200)
    p.add_argument("--loss", type=float, default=0.01)
    p.add_argument("--rate-mbit", type=float, default=200)
    p.add_argument("--reps", type=int, default=4)
    p.add_argument("--jobs", type=int, default=16)
    p.add_argument("--https", action="store_true", help="HTTPS (HTTP/1.1 unless a tool asks for more)")
    p.add_argument("--curl", action="store_true", help="curl --parallel too")
    p.add_argument("builds", nargs="+", metavar="NAME=BINARY")
    a = p.parse_args()
    builds = dict(b.split("=", 1) for b in a.builds)
    if os.geteuid() != 0:
        sys.exit("mixed-list.py needs root (network namespaces)")

    work = Path(tempfile.mkdtemp(prefix="segget-mixed-list-"))
    os.chmod(work, 0o755)
    www = work / "www"
    sums = make_files(www)
    scheme, port = ("https", 31502) if a.https else ("http", 31501)
    lst = work / "list.txt"
    lst.write_text("\n".join(make_list(f"{scheme}://{SERVER_IP}:{port}")) + "\n")
    d = work / "nginx"
    (d / "tmp").mkdir(parents=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={SERVER_IP}",
                    "-addext", f"subjectAltName=IP:{SERVER_IP}", "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    user = "user root;" if os.geteuid() == 0 else ""
    (d / "nginx.conf").write_text(NGINX_CONF.format(user=user, d=d, ip=SERVER_IP, www=www))
    link_up = False
    nginx = None
    try:
        link_up = True
        subprocess.run([str(LINK_SH), "up", "--name", NAME, "--delay-ms", f"{a.delay_ms:g}", "--loss", f"{a.loss:g}",
                        "--rate-mbit", f"{a.rate_mbit:g}"], check=True)
        nginx = subprocess.Popen(["ip", "netns", "exec", SERVER_NS, "nginx", "-p", str(d), "-e", str(d / "error.log"),
                                  "-c", str(d / "nginx.conf")], stdin=subprocess.DEVNULL, start_new_session=True)
        for _ in range(100):
            r = subprocess.run(["ip", "netns", "exec", CLIENT_NS, "curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}",
                                f"{scheme}://{SERVER_IP}:{port}/b/f000.bin"], capture_output=True, text=True)
            if r.stdout == "200":
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"nginx did not start; see {d}")
        tools: dict[str, list[str]] = {
            n: [b, "-q", "-k", "-i", str(lst), "-j", str(a.jobs)] for n, b in builds.items()}
        tools["aria2c"] = ["aria2c", "-q", "--check-certificate=false", "-j", str(a.jobs), "-i", str(lst)]
        if a.curl:
            tools["curl"] = ["curl", "-s", "-k", "-L", "--parallel", "--parallel-max", str(a.jobs), "--remote-name-all",
                             *lst.read_text().split()]
        log_at = 0
        runs: dict[str, list[tuple[float, int, int]]] = {n: [] for n in tools}
        for rep in range(a.reps):
            for n, argv in tools.items():
                out = work / f"out-{n}-{rep}"
                out.mkdir()
                _, _, log_at = access_counts(d / "access.log", 0)
                t0 = time.monotonic()
                r = subprocess.run(["ip", "netns", "exec", CLIENT_NS, *argv], cwd=out, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                took = time.monotonic() - t0
                time.sleep(0.3)  # nginx writes its log lines as answers end
                reqs, conns, _ = access_counts(d / "access.log", log_at)
                ok = check(out, sums)
                print(f"rep {rep + 1} {n:12s} {took:7.2f} s  exit {r.returncode}  requests {reqs}  connections {conns}"
                      f"  {'identical' if ok else 'FILES MISSING OR DIFFERENT'}", flush=True)
                if not ok:
                    raise RuntimeError(f"{n}: files missing or different in {out}")
                runs[n].append((took, reqs, conns))
                shutil.rmtree(out)
        print(f"\n{a.delay_ms:g} ms, {a.loss * 100:g} % loss, {a.rate_mbit:g} Mbit/s, {scheme}, -j {a.jobs}, {a.reps} reps")
        print(f"{'tool':12s} {'median s':>9s} {'min':>7s} {'max':>7s} {'requests':>9s} {'conns':>6s}")
        for n, rs in runs.items():
            ts = [r[0] for r in rs]
            print(f"{n:12s} {statistics.median(ts):9.2f} {min(ts):7.2f} {max(ts):7.2f} "
                  f"{statistics.median(r[1] for r in rs):9g} {statistics.median(r[2] for r in rs):6g}")
        for n in builds:
            ratios = [s[0] / b[0] for s, b in zip(runs[n], runs["aria2c"])]
            print(f"{n} / aria2c: median of paired ratios {statistics.median(ratios):.3f} "
                  f"({', '.join(f'{x:.2f}' for x in ratios)})")
    finally:
        if nginx and nginx.poll() is None:
            nginx.terminate()
            nginx.wait(10)
        if link_up:
            subprocess.run([str(LINK_SH), "down", "--name", NAME], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
