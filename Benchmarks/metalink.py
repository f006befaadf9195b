#!/usr/bin/env python3
"""Issue 40, Metalink: segget beside aria2c (and wget2) on loopback, with every server's log read.

Scenarios:
  mirrors    a .meta4 of a 256 MiB file on 4 mirrors (segget-testserver processes, each its own port and
             pace, one of them serving a copy with 1 MiB corrupted), 1 MiB SHA-256 pieces and the file's
             SHA-256: `segget -n 8 DOC.meta4` against `aria2c -x 8 -s 8 DOC.meta4`, interleaved, --reps
             repetitions. Per run: seconds, the output's SHA-256, bytes each mirror sent, and for segget
             the servers its finish line names as having sent bad pieces.
  redirector a redirector answering like openSUSE's download.opensuse.org (302 to the first mirror,
             `Link: <…>; rel=duplicate; pri=N` for each mirror, `Link: <….meta4>; rel=describedby`,
             `Digest: SHA-256=…`) in front of 2 mirrors, a 64 MiB file: segget, `wget2 --metalink` and
             aria2c on the same URL, with what each asked of each server.
  repair     a 1 GiB file with 3 damaged pieces (1 MiB SHA-256 pieces): `segget verify FILE --metalink
             DOC --repair` and, for comparison, `aria2c -V DOC.meta4` over the same damaged copy:
             seconds, requests and bytes from the server's log, the file identical after.

Usage: Benchmarks/metalink.py --segget BIN --testserver BIN [--reps 5] [--scenarios mirrors,redirector,repair]
       [--work DIR] [--out FILE]
Prints Markdown and writes it to OUT (default WORK/metalink.md).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.server
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "harness"))
from files import free_port, random_file as make_file, sha256_file, start_testserver  # noqa: E402

MiB = 1 << 20


def piece_hashes(path: Path, length: int) -> list[str]:
    out = []
    with open(path, "rb") as f:
        while b := f.read(length):
            out.append(hashlib.sha256(b).hexdigest())
    return out


def damage(path: Path, offset: int, count: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = bytearray(f.read(count))
        for i in range(len(b)):
            b[i] ^= 0x5A
        f.seek(offset)
        f.write(b)


def meta4(name: str, size: int, whole: str, pieces: list[str], piece_length: int, urls: list[tuple[str, int]]) -> str:
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<metalink xmlns="urn:ietf:params:xml:ns:metalink">',
             f'  <file name="{name}">', f"    <size>{size}</size>", f'    <hash type="sha-256">{whole}</hash>']
    for u, pri in urls:
        lines.append(f'    <url priority="{pri}">{u.replace("&", "&amp;")}</url>')
    lines.append(f'    <pieces length="{piece_length}" type="sha-256">')
    lines += [f"      <hash>{h}</hash>" for h in pieces]
    lines += ["    </pieces>", "  </file>", "</metalink>"]
    return "\n".join(lines) + "\n"


class TestServer:
    """segget-testserver serving one directory on a free loopback port; its log read per run
    (METHOD PATH?QUERY STATUS BODYBYTES REMOTEPORT ARRIVED SERVED)."""

    def __init__(self, binary: str, www: Path, log: Path):
        self.log = log
        self.proc, self.port = start_testserver(binary, www, self.log)

    def url(self, name: str, query: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{name}" + (f"?{query}" if query else "")

    def mark(self) -> int:
        """Where the log ends now: `requests(since:)` reads what was logged after."""
        return len(self.log.read_bytes())

    def requests(self, since: int) -> list[list[str]]:
        data = self.log.read_bytes()[since:].decode(errors="replace")
        return [l.split() for l in data.splitlines() if len(l.split()) >= 5]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def sent(requests: list[list[str]]) -> int:
    return sum(int(l[3]) for l in requests if l[0] == "GET")


def run(argv: list[str], cwd: Path | None = None, timeout: float = 900) -> tuple[float, int, str]:
    started = time.monotonic()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd, timeout=timeout)
    return time.monotonic() - started, r.returncode, r.stdout


def aria2c(n: int, out_dir: Path, *extra: str) -> list[str]:
    return ["aria2c", "-x", str(n), "-s", str(n), "-k", "1M", "--file-allocation=none", "--allow-overwrite=true",
            "--auto-file-renaming=false", "--console-log-level=warn", "--summary-interval=0", "-d", str(out_dir),
            *extra]


def finish_line(output: str) -> str:
    lines = [l for l in output.splitlines() if "piece" in l or "saved" in l.lower() or "done" in l.lower()]
    return lines[-1].strip() if lines else output.strip().splitlines()[-1] if output.strip() else ""


# MARK: mirrors

def scenario_mirrors(args, work: Path, md: list[str]) -> None:
    size = args.mirror_size * MiB
    src = work / "src" / "big.bin"
    src.parent.mkdir(parents=True, exist_ok=True)
    make_file(src, size)
    whole = sha256_file(src)
    pieces = piece_hashes(src, MiB)
    # 1 MiB corrupted across two 1 MiB pieces, on the first mirror (priority 1, the fastest): both tools
    # start there from byte 0, so its first request serves bad bytes to each of them. (At 1/32 or 1/2 of
    # the file neither tool happened to fetch the bad range from that mirror: nothing to repair.)
    bad_at = args.bad_at * 1024
    bad_mirror = 0
    paces = ["24m", "16m", "16m", "8m"]  # per answer
    servers = []
    for i, pace in enumerate(paces):
        www = work / f"mirror{i + 1}"
        www.mkdir(exist_ok=True)
        dst = www / "big.bin"
        if dst.exists():
            dst.unlink()
        if i == bad_mirror:
            shutil.copyfile(src, dst)
            damage(dst, bad_at, MiB)
        else:
            os.link(src, dst)
        servers.append(TestServer(args.testserver, www, work / f"mirror{i + 1}.log"))
    out = work / "out"
    results: dict[str, list[dict]] = {"segget": [], "aria2c": []}
    try:
        for rep in range(args.reps):
            order = ["segget", "aria2c"] if rep % 2 == 0 else ["aria2c", "segget"]
            for tool in order:
                marks = [s.mark() for s in servers]
                # No '&' in the URLs: wget2 sends a Metalink's &amp; as it stands.
                urls = [(s.url("big.bin", f"rate={paces[i]}"), i + 1) for i, s in enumerate(servers)]
                doc = work / "big.meta4"
                doc.write_text(meta4("big.bin", size, whole, pieces, MiB, urls))
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                alog = work / f"aria2c-{rep + 1}.log"
                if tool == "segget":
                    argv = [args.segget, "-n", "8", "-d", str(out), str(doc)]
                else:
                    alog.unlink(missing_ok=True)
                    argv = aria2c(8, out, f"--log={alog}", "--log-level=info", str(doc))
                seconds, rc, output = run(argv)
                (work / f"{tool}-{rep + 1}.txt").write_text(output)
                if tool == "aria2c" and alog.exists():
                    # aria2c names no server; its log says when a piece failed its hash.
                    failed = [l for l in alog.read_text(errors="replace").splitlines()
                              if re.search(r"(?i)(checksum|hash).*(fail|mismatch|invalid)|(fail|mismatch).*(checksum|hash)", l)]
                    output += f"\naria2c log: {len(failed)} piece hash failures" + (f": {failed[0][:200]}" if failed else "")
                got = sha256_file(out / "big.bin") if (out / "big.bin").exists() else "missing"
                per = [sent(s.requests(m)) for s, m in zip(servers, marks)]
                named = sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", " ".join(
                    l for l in output.splitlines() if "served bad" in l or "no more work" in l))))
                r = {"seconds": seconds, "rc": rc, "identical": got == whole, "sent": per,
                     "named": [f"mirror{[str(s.port) for s in servers].index(p) + 1}" for p in named
                               if p in [str(s.port) for s in servers]],
                     "tail": finish_line(output) if tool == "segget" else output.strip().splitlines()[-1]}
                results[tool].append(r)
                print(f"mirrors rep {rep + 1} {tool}: {seconds:.2f} s rc={rc} identical={r['identical']} "
                      f"sent(MiB)={[round(x / MiB, 1) for x in per]} named={r['named']} | {r['tail'][:300]}", flush=True)
    finally:
        for s in servers:
            s.stop()
    md += [f"### mirrors: {args.mirror_size} MiB, 4 mirrors (answers paced at {', '.join(paces)} B/s; mirror {bad_mirror + 1} serves "
           f"1 MiB corrupted at byte {bad_at}), 1 MiB SHA-256 pieces, {args.reps} interleaved repetitions", "",
           "| tool | median s | min | max | identical | exit codes | MiB sent per mirror (median) | bad mirror named |",
           "|---|---|---|---|---|---|---|---|"]
    for tool, rs in results.items():
        secs = [r["seconds"] for r in rs]
        per = [statistics.median([r["sent"][i] for r in rs]) / MiB for i in range(4)]
        md.append(f"| {tool} | {statistics.median(secs):.2f} | {min(secs):.2f} | {max(secs):.2f} | "
                  f"{sum(r['identical'] for r in rs)}/{len(rs)} | {sorted(set(r['rc'] for r in rs))} | "
                  f"{' / '.join(f'{x:.1f}' for x in per)} | "
                  f"{'; '.join(','.join(r['named']) or '-' for r in rs)} |")
    ratios = [s["seconds"] / a["seconds"] for s, a in zip(results["segget"], results["aria2c"])]
    md += ["", f"segget / aria2c per repetition: {', '.join(f'{x:.2f}' for x in ratios)}; median "
               f"{statistics.median(ratios):.2f}; medians' ratio "
               f"{statistics.median([r['seconds'] for r in results['segget']]) / statistics.median([r['seconds'] for r in results['aria2c']]):.2f}",
           "", "segget's last line, first repetition: `" + results["segget"][0]["tail"].replace("`", "'") + "`", ""]


# MARK: redirector

class Redirector(http.server.ThreadingHTTPServer):
    daemon_threads = True


def redirector_handler(state: dict):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def answer(self, body: bool):
            state["log"].append((self.command, self.path, self.headers.get("User-Agent", "")))
            path = self.path.split("?")[0]
            if path == "/f.iso.meta4":
                data = state["meta4"].encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/metalink4+xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)
                return
            if path != "/f.iso":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(302)
            self.send_header("Location", state["mirrors"][0])
            for i, m in enumerate(state["mirrors"]):
                self.send_header("Link", f'<{m}>; rel=duplicate; pri={i + 1}; geo=de')
            self.send_header("Link", f'<{state["base"]}/f.iso.meta4>; rel=describedby; type="application/metalink4+xml"')
            self.send_header("Digest", "SHA-256=" + state["digest"])
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            self.answer(True)

        def do_HEAD(self):
            self.answer(False)

    return H


def scenario_redirector(args, work: Path, md: list[str]) -> None:
    size = 64 * MiB
    src = work / "src" / "f.iso"
    src.parent.mkdir(parents=True, exist_ok=True)
    make_file(src, size)
    whole = sha256_file(src)
    pieces = piece_hashes(src, MiB)
    servers = []
    for i in range(2):
        www = work / f"rmirror{i + 1}"
        www.mkdir(exist_ok=True)
        if not (www / "f.iso").exists():
            os.link(src, www / "f.iso")
        servers.append(TestServer(args.testserver, www, work / f"rmirror{i + 1}.log"))
    port = free_port()
    state = {"log": [], "base": f"http://127.0.0.1:{port}",
             "digest": base64.b64encode(bytes.fromhex(whole)).decode()}
    httpd = Redirector(("127.0.0.1", port), redirector_handler(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    out = work / "rout"
    rows = []
    try:
        for tool in ["segget", "wget2", "aria2c"]:
            marks = [s.mark() for s in servers]
            state["mirrors"] = [s.url("f.iso", "rate=16m") for s in servers]
            state["meta4"] = meta4("f.iso", size, whole, pieces, MiB, [(u, i + 1) for i, u in enumerate(state["mirrors"])])
            state["log"] = []
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            url = f"http://127.0.0.1:{port}/f.iso"
            if tool == "segget":
                argv = [args.segget, "-n", "8", "-d", str(out), url]
            elif tool == "wget2":
                argv = ["wget2", "--metalink", "--max-threads=8", "--no-robots", "-q", "-P", str(out), url]
            else:
                argv = aria2c(8, out, url)
            seconds, rc, output = run(argv, cwd=out, timeout=300)
            files = sorted(p for p in out.rglob("*") if p.is_file())
            got = {str(p.relative_to(out)): (p.stat().st_size, sha256_file(p) == whole) for p in files}
            per = [s.requests(m) for s, m in zip(servers, marks)]
            asked = [f"{m} {p.split('?')[0]}" for m, p, _ in state["log"]]
            rows.append((tool, seconds, rc, got, [(len([l for l in r if l[0] == 'GET']), sent(r)) for r in per], asked,
                         finish_line(output)))
            print(f"redirector {tool}: {seconds:.2f} s rc={rc} files={got} mirrors={rows[-1][4]} redirector={asked} "
                  f"| {rows[-1][6][:300]}", flush=True)
    finally:
        httpd.shutdown()
        for s in servers:
            s.stop()
    md += ["### redirector: 302 + Link rel=duplicate (pri 1, 2) + rel=describedby meta4 (1 MiB SHA-256 pieces) + "
           "Digest, 2 mirrors paced at 16 MiB/s per answer, 64 MiB", "",
           "| tool | seconds | exit | files (size, SHA-256 right) | mirror 1 GETs / MiB | mirror 2 GETs / MiB | asked of the redirector |",
           "|---|---|---|---|---|---|---|"]
    for tool, seconds, rc, got, per, asked, tail in rows:
        md.append(f"| {tool} | {seconds:.2f} | {rc} | {', '.join(f'{k} ({v[0]}, {v[1]})' for k, v in got.items()) or 'none'} | "
                  f"{per[0][0]} / {per[0][1] / MiB:.1f} | {per[1][0]} / {per[1][1] / MiB:.1f} | {', '.join(asked)} |")
    md += ["", "segget's last line: `" + rows[0][6].replace("`", "'") + "`", ""]


# MARK: repair

def scenario_repair(args, work: Path, md: list[str]) -> None:
    size = args.repair_size * MiB
    src = work / "src" / "repair.bin"
    src.parent.mkdir(parents=True, exist_ok=True)
    make_file(src, size)
    whole = sha256_file(src)
    pieces = piece_hashes(src, MiB)
    www = work / "rwww"
    www.mkdir(exist_ok=True)
    if not (www / "repair.bin").exists():
        os.link(src, www / "repair.bin")
    server = TestServer(args.testserver, www, work / "repair.log")
    spots = [(size // 10 + 12345, 4096), (size // 2 + 7, 100), (size - MiB + 999, 1)]
    bad = sorted({o // MiB for o, _ in spots} | {(o + n - 1) // MiB for o, n in spots})
    rows = []
    try:
        for rep in range(args.repair_reps):
            for tool in (["segget", "aria2c"] if rep % 2 == 0 else ["aria2c", "segget"]):
                doc = work / "repair.meta4"
                doc.write_text(meta4("repair.bin", size, whole, pieces, MiB, [(server.url("repair.bin"), 1)]))
                out = work / "rout2"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                target = out / "repair.bin"
                shutil.copyfile(src, target)
                for o, n in spots:
                    damage(target, o, n)
                # The copy on the disk before the clock starts: segget syncs the repaired file (fdatasync),
                # which would otherwise write back the whole fresh copy inside its time.
                os.sync()
                if tool == "segget":
                    argv = [args.segget, "verify", str(target), "--metalink", str(doc), "--repair", "-n", "8"]
                else:
                    argv = aria2c(8, out, "-V", "--auto-save-interval=0", str(doc))
                mark = server.mark()
                seconds, rc, output = run(argv)
                reqs = [l for l in server.requests(mark) if l[0] == "GET"]
                identical = sha256_file(target) == whole
                rows.append((tool, seconds, rc, len(reqs), sent(reqs), identical, finish_line(output)))
                print(f"repair rep {rep + 1} {tool}: {seconds:.2f} s rc={rc} GETs={len(reqs)} sent={sent(reqs)} "
                      f"identical={identical} | {rows[-1][6][:400]}", flush=True)
    finally:
        server.stop()
    md += [f"### repair: {args.repair_size} MiB file, 1 MiB SHA-256 pieces, 3 damaged spots (pieces {bad}), one server", "",
           "| tool | seconds | exit | GETs | bytes sent | identical after |", "|---|---|---|---|---|---|"]
    for tool, seconds, rc, n, b, ok, tail in rows:
        md.append(f"| {tool} | {seconds:.2f} | {rc} | {n} | {b} ({b / MiB:.2f} MiB) | {ok} |")
    md += ["", f"The damaged pieces are {len(bad)} MiB; a probe costs segget 1 byte.",
           "segget's report: `" + next(r[6] for r in rows if r[0] == "segget").replace("`", "'") + "`", ""]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--segget", required=True)
    p.add_argument("--testserver", required=True)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--repair-reps", type=int, default=2)
    p.add_argument("--mirror-size", type=int, default=256, help="MiB")
    p.add_argument("--bad-at", type=int, default=256, help="KiB: where the bad mirror's 1 MiB of damage starts")
    p.add_argument("--repair-size", type=int, default=1024, help="MiB")
    p.add_argument("--scenarios", default="mirrors,redirector,repair")
    p.add_argument("--work", default="/tmp/segget-metalink-bench")
    p.add_argument("--out")
    args = p.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    md: list[str] = []
    for name in args.scenarios.split(","):
        {"mirrors": scenario_mirrors, "redirector": scenario_redirector, "repair": scenario_repair}[name](args, work, md)
    text = "\n".join(md) + "\n"
    print(text)
    Path(args.out or work / "metalink.md").write_text(text)


if __name__ == "__main__":
    main()
