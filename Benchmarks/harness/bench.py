"""segget against its peers: wall time, CPU, memory and server bytes on a local nginx.

Run through `scripts/bench` (which installs missing tools first); see Benchmarks/README.md.
Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import disk  # noqa: E402
import measure  # noqa: E402
import report  # noqa: E402
import tools as toolmod  # noqa: E402
from files import random_file  # noqa: E402
from nginx import Nginx  # noqa: E402

MiB = 1 << 20
# 200 empty files made in at most this many ms: the download directory is quiet (see `settle_inodes`).
INODE_PROBE_QUIET_MS = 25.0
GiB = 1 << 30
# segget's re-dial notice ("connection 3 is slow (...); reconnecting.") and its --json event.
REDIAL = re.compile(r"reconnecting|is slow|\"redial\"", re.IGNORECASE)
REPO = Path(__file__).resolve().parents[2]

ALL_SCENARIOS = ["uncapped", "capped", "uneven", "tls", "small", "seq-small", "batch-small",
                 "batch-busy", "batch-capped", "disk-busy", "memory", "killresume"]
# segget's peak-memory variants: -n 8, -n 64 and -n 8 with a digest check (issue 13's three figures).
MEMORY_VARIANTS = [("-n 8", 8, False), ("-n 64", 64, False), ("-n 8 --checksum sha256", 8, True)]
ALL_TOOLS = ["segget", "curl", "aria2c", "axel", "lftp", "wget2"]


@dataclass
class Scenario:
    name: str
    location: str       # nginx location: uncapped, capped or uneven
    tls: bool
    kind: str           # "throughput", "small", "seq", "batch", "diskbusy", "memory" or "killresume"
    description: str
    skip: dict[str, str] = field(default_factory=dict)  # tool -> why it does not take part
    cpu_hogs: bool = False  # batch: one busy loop per CPU runs through every run (see BusyCPUs)


SCENARIOS = {
    "uncapped": Scenario(
        "uncapped", "uncapped", False, "throughput",
        "no rate limit; bound by CPU, loopback and the page cache (the source is cached)"),
    "capped": Scenario(
        "capped", "capped", False, "throughput",
        "every connection limited to 16 MiB/s (`limit_rate 16m`); the limit is N x 16 MiB/s"),
    "uneven": Scenario(
        "uneven", "uneven", False, "throughput",
        "connections whose client port ends in 0 or 1 get 2 MiB/s, the others 16 MiB/s",
        skip={
            "curl": "one connection: its time only says whether its port ended in 0 or 1",
            "wget2": "one connection in practice (see Benchmarks/README.md), as for curl",
        }),
    "tls": Scenario(
        "tls", "uncapped", True, "throughput",
        "HTTPS (TLS 1.3, self-signed certificate, insecure flag), no rate limit: the cost of TLS on this CPU"),
    "small": Scenario(
        "small", "uncapped", False, "small",
        "a batch of sequential downloads of one 1 MiB file (fresh process each time): start-up "
        "and probe overhead"),
    "seq-small": Scenario(
        "seq-small", "uncapped", False, "seq",
        "one 1 MiB file downloaded again and again by a shell loop, one process per download, every "
        "output kept under its own name; the loop is timed as a whole"),
    "batch-small": Scenario(
        "batch-small", "uncapped", False, "batch",
        "many small files from one URL list in one process, no rate limit: the per-file costs "
        "(probe, connection, syncs)",
        skip={"axel": "no list mode (one URL per process)",
              "lftp": "its list mode (`mget`) is not set up here"}),
    "batch-busy": Scenario(
        "batch-busy", "uncapped", False, "batch",
        "the files of batch-small while every CPU also runs a busy loop (`yes > /dev/null`, one per "
        "CPU, started before each run and stopped after it): the machine someone is also compiling on",
        skip={"axel": "no list mode (one URL per process)",
              "lftp": "its list mode (`mget`) is not set up here"},
        cpu_hogs=True),
    "batch-capped": Scenario(
        "batch-capped", "capped", False, "batch",
        "many 4 MiB files from one URL list in one process, every connection limited to 16 MiB/s",
        skip={"axel": "no list mode (one URL per process)",
              "lftp": "its list mode (`mget`) is not set up here"}),
    "disk-busy": Scenario(
        "disk-busy", "capped", False, "diskbusy",
        "the capped download alone (quiet) and while `dd` writes to the download directory's disk "
        "in a loop; re-dials show as extra connections and, for segget, as \"is slow ... "
        "reconnecting\" lines (segget runs without -q here)",
        skip={"curl": "one connection at 16 MiB/s: the disk is never what limits it",
              "wget2": "one connection in practice, as for curl"}),
    "memory": Scenario(
        "memory", "uncapped", False, "memory",
        "peak resident memory of segget alone on the main file, uncapped, at -n 8, at -n 64 and at "
        "-n 8 with `--checksum sha256=…` (the digest computed as it downloads); the peers' peak RSS "
        "is in every other table"),
    "killresume": Scenario(
        "killresume", "capped", False, "killresume",
        "capped location; SIGKILL after a few seconds, run the same (resume) command again, "
        "repeat, then let it finish",
        skip={"curl": "no segmented resume", "wget2": "no segmented resume"}),
}


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 1G, 256M, 4096)")
    mult = {"": 1, "K": 1 << 10, "M": MiB, "G": GiB, "T": 1 << 40}[m.group(2).upper()]
    return int(float(m.group(1)) * mult)


def human_size(n: int) -> str:
    for unit, mult in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= mult and n % mult == 0:
            return f"{n // mult} {unit}"
    return f"{n} B"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- test data -------------------------------------------------------------------------------------

def ensure_random_file(data_dir: Path, size: int) -> Path:
    """data/random-SIZE.bin filled with random bytes; reused when it exists with the right size."""
    path = data_dir / f"random-{size}.bin"
    if path.exists() and path.stat().st_size == size:
        return path
    log(f"generating {path} ({human_size(size)}) ...")
    random_file(path, size)
    return path


def last_output_line(log_path: Path) -> str:
    """The first line the tool printed in its latest run (each run in the log starts with `$ `)."""
    try:
        lines = [l.strip() for l in log_path.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    starts = [i for i, l in enumerate(lines) if l.startswith("$ ")]
    latest = lines[starts[-1] + 1:] if starts else lines
    return latest[0][:200] if latest else ""


def with_reason(fail: str | None, log_path: Path) -> str | None:
    if fail is None or not fail.startswith("exit code"):
        return fail
    line = last_output_line(log_path)
    return f"{fail} ({line})" if line else fail


def same_bytes(a: Path, b: Path) -> bool:
    """Byte-for-byte comparison in Python, for many small files (no process per file)."""
    try:
        if a.stat().st_size != b.stat().st_size:
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                x, y = fa.read(4 * MiB), fb.read(4 * MiB)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


def parse_batch(text: str) -> tuple[int, int]:
    """'500x64K' -> (500, 65536)."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\S+)\s*", text)
    if not m or int(m.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"not COUNTxSIZE: {text!r} (try 500x64K)")
    return int(m.group(1)), parse_size(m.group(2))


def ensure_batch_files(data_dir: Path, count: int, size: int) -> tuple[Path, list[str]]:
    """data/batch-COUNTxSIZE/f0000.bin … of random bytes; reused when all are there with the right size."""
    d = data_dir / f"batch-{count}x{size}"
    names = [f"f{i:04d}.bin" for i in range(count)]
    d.mkdir(parents=True, exist_ok=True)
    if all((d / n).exists() and (d / n).stat().st_size == size for n in names):
        return d, names
    log(f"generating {count} files of {human_size(size)} in {d} ...")
    for n in names:
        (d / n).write_bytes(os.urandom(size))
    return d, names


def same_content(out: Path, src: Path) -> bool:
    """Byte-for-byte comparison (cmp reads both files; both are in the page cache)."""
    if not out.exists() or out.stat().st_size != src.stat().st_size:
        return False
    return subprocess.run(["cmp", "-s", str(src), str(out)]).returncode == 0


# -- the benchmark ---------------------------------------------------------------------------------

class Bench:
    def __init__(self, args: argparse.Namespace, tools: dict[str, toolmod.Tool], notes: list[str]):
        self.args = args
        self.tools = tools
        self.notes = notes
        self.out = args.out
        self.data_dir = self.out / "data"
        self.dl_dir = self.out / "dl"
        self.aside_dir = self.out / "aside"  # see clean_dl
        self.aside_count = 0
        self.logs_dir = self.out / "logs"
        for d in (self.data_dir, self.dl_dir, self.logs_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.nginx = Nginx(self.out / "nginx", self.data_dir)
        self.runs_path = self.out / "runs.jsonl"
        self.runs_path.write_text("")
        self.records: list[dict] = []
        self.files: dict[str, Path] = {}
        self.batches: dict[str, tuple[Path, list[str], Path, Path]] = {}  # dir, names, URL list, curl config
        self.device = disk.block_dir(disk.mount_of(self.dl_dir)["source"])
        self.disk: dict = {"filesystem": disk.describe(self.dl_dir), "dd_before": None, "dd_after": None}
        self.main_digest: str | None = None  # sha256 of the main file, for the memory scenario

    # -- helpers ---------------------------------------------------------------------------------

    def clean_dl(self) -> None:
        """Empties the download directory. What a run left is truncated to nothing and set aside under
        `aside/` (the same file system), not removed: on ext4 without a journal a new file's inode is
        searched for past every inode freed in the last 60-300 s (`recently_deleted`), so removing one
        run's 500 files slowed the next run's file creations, more with every run, for every tool
        alike (500 x 64 KiB: 0.11 s for curl in the first repetition, 1.2 s by the sixth). What is set
        aside is removed when the harness ends (`remove_aside`)."""
        self.aside_dir.mkdir(exist_ok=True)
        for p in self.dl_dir.iterdir():
            inside = p.rglob("*") if p.is_dir() and not p.is_symlink() else [p]
            for f in inside:
                if f.is_file() and not f.is_symlink():
                    os.truncate(f, 0)
            self.aside_count += 1
            p.rename(self.aside_dir / str(self.aside_count))

    def settle_inodes(self, scenario: str) -> None:
        """Waits until new files are cheap to make in the download directory again, before a scenario
        that makes many. `clean_dl` removes nothing, but whatever removed many files shortly before
        (an earlier harness's `remove_aside`, a build, a test run) makes every creation nearby scan
        the inodes it freed (`recently_deleted`: those of the last 60 s, of the last 6 min while their
        inode table is unwritten) for minutes: 200 creations took 4 ms in a quiet directory and 85-170
        ms in such a one, and a tool that creates its files on a second thread (segget) gained on one
        that does not (curl) by up to 40 %, in either direction from one run to the next. The probe
        makes 200 empty files in `dl/` (set aside like a run's) until they take at most
        `INODE_PROBE_QUIET_MS`, with a `sync` and 15 s between tries, for at most 7 minutes; what it
        saw goes into the results' header."""
        start = time.monotonic()
        tries: list[float] = []
        while True:
            probe = self.dl_dir / f"inode-probe-{len(tries)}"
            probe.mkdir()
            t0 = time.perf_counter()
            for i in range(200):
                os.close(os.open(probe / f"p{i}", os.O_CREAT | os.O_WRONLY, 0o644))
            tries.append(round((time.perf_counter() - t0) * 1000, 1))
            self.clean_dl()
            waited = time.monotonic() - start
            if tries[-1] <= INODE_PROBE_QUIET_MS or waited > 420:
                break
            measure.sync_all()
            time.sleep(15)
        quiet = tries[-1] <= INODE_PROBE_QUIET_MS
        self.disk.setdefault("inode_probe", {})[scenario] = {"ms": tries, "waited_s": round(waited, 1), "quiet": quiet}
        log(f"[{scenario}] 200 file creations: {', '.join(f'{t:g}' for t in tries)} ms"
            + (f"; waited {waited:.0f} s" if len(tries) > 1 else "")
            + ("" if quiet else "; still slow, measuring anyway"))
        if not quiet:
            self.notes.append(f"{scenario}: file creations in the download directory were still slow after "
                              f"{waited:.0f} s ({tries[-1]:g} ms for 200); its small-file runs pay for it.")

    def remove_aside(self) -> None:
        shutil.rmtree(self.aside_dir, ignore_errors=True)

    def settle(self, sources: list[Path]) -> None:
        """Flush what earlier runs (or anyone else) left dirty, read what the run will serve (`sources`,
        see `disk.read_through`), and let the disk go idle, so that no run pays for another's write-back
        or for nginx reading from the disk."""
        measure.sync_all()
        disk.read_through(sources)
        time.sleep(self.args.settle)

    def run_until_on_disk(
        self, argv: list[str], sources: list[Path], log_path: Path, timeout: float
    ) -> tuple[measure.Measured, dict]:
        """Run a tool after settle(sources), then `sync` at once: on_disk_s spans the tool's start to
        sync's end."""
        self.settle(sources)
        before = disk.sectors_written(self.device)
        m = measure.run(argv, self.dl_dir, log_path, timeout)
        sync_s = measure.sync_all()
        on_disk_s = time.monotonic() - m.started
        after = disk.sectors_written(self.device)
        written = (after - before) * 512 if before is not None and after is not None else None
        return m, {"sync_s": sync_s, "on_disk_s": on_disk_s, "device_written_bytes": written}

    def check_exit(self, m: measure.Measured) -> str | None:
        if m.killed_by == "timeout":
            return f"timeout after {m.wall_s:.0f} s"
        if m.exit_code != 0:
            return f"exit code {m.exit_code}"
        return None

    def check_files(self, out_dir: Path, expected: dict[str, Path]) -> str | None:
        """None when out_dir holds exactly the names in `expected`, each byte-for-byte its source."""
        found = {str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file()}
        missing = [n for n in expected if n not in found]
        extra = sorted(found - set(expected))
        if missing:
            return f"{len(missing)} of {len(expected)} files missing (first: {missing[0]})"
        if extra:
            return f"{len(extra)} unexpected files left (first: {extra[0]})"
        differ = [n for n, src in expected.items() if not same_bytes(out_dir / n, src)]
        if differ:
            return f"{len(differ)} of {len(expected)} files differ from the source (first: {differ[0]})"
        return None

    def check_output(self, m: measure.Measured, out: Path, src: Path) -> str | None:
        """None when the run is good, else why it FAILed."""
        if m.killed_by == "timeout":
            return f"timeout after {m.wall_s:.0f} s"
        if m.exit_code != 0:
            return f"exit code {m.exit_code}"
        if not out.exists():
            return "no output file"
        if out.stat().st_size != src.stat().st_size:
            return f"output has {out.stat().st_size} bytes, expected {src.stat().st_size}"
        if not same_content(out, src):
            return "output differs from the source"
        return None

    def timeout_for(self, scn: Scenario, tool: toolmod.Tool, size: int) -> float:
        conns = tool.connections(self.args.connections)
        if scn.kind == "batch":
            count, each = self.args.batch_spec[scn.name]
            rate = 16 * MiB * self.args.batch_jobs if scn.location == "capped" else 50 * MiB
            return 5 * (count * each / rate + count * 0.05) + 30
        if scn.kind == "seq":
            return self.args.seq_count * 30.0
        if scn.location == "capped":
            expected = size / (16 * MiB * conns)
        elif scn.location == "uneven":
            # Worst plausible case: a static split where one slow connection carries its 1/N share.
            expected = size / conns / (2 * MiB)
        else:
            expected = size / (50 * MiB)
        return 5 * expected + 30

    def server_stats(self, entries) -> dict:
        return {
            "server_bytes": sum(e.bytes_sent for e in entries),
            "server_body_bytes": sum(e.body_bytes_sent for e in entries),
            "requests": len(entries),
            "connections": len({e.connection for e in entries}),
            "slow_connections": len({e.connection for e in entries if e.slow_port}),
            "statuses": sorted({e.status for e in entries}),
        }

    def save(self, rec: dict) -> None:
        self.records.append(rec)
        with open(self.runs_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        label = rec["tool"] + (f" ({rec['variant']})" if rec.get("variant") else "")
        if rec["ok"]:
            if rec["scenario"] == "killresume":
                speed = f"kills {rec['kills']}, fetched twice {rec['twice_bytes'] / MiB:6.0f} MiB"
            else:
                speed = f"{rec['mib_s']:8.1f} MiB/s"
            extra = ""
            if rec.get("on_disk_s") is not None:
                extra += f"  on disk {rec['on_disk_s']:6.2f} s"
            if rec.get("redial_lines"):
                extra += f"  re-dial lines {rec['redial_lines']}"
            log(f"  {label:<22} {rec['wall_s']:7.2f} s  {speed}  "
                f"cpu {rec['cpu_s']:5.2f} s  rss {rec['maxrss_kib'] / 1024:6.1f} MiB  "
                f"conns {rec['connections']}{extra}")
        else:
            log(f"  {label:<22} FAIL: {rec['fail']}")

    def base_record(self, scn: Scenario, tool: toolmod.Tool, rep: int, size: int) -> dict:
        return {
            "scenario": scn.name, "tool": tool.name, "rep": rep, "size": size,
            "connections_asked": self.args.connections,
            "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }

    # -- one run of each kind --------------------------------------------------------------------

    def run_throughput(self, scn: Scenario, tool: toolmod.Tool, rep: int) -> dict:
        src = self.files["main"]
        size = src.stat().st_size
        url = self.nginx.url(scn.location, src.name, scn.tls)
        out = self.dl_dir / "download.bin"
        argv = tool.build(self.args.connections, out, url, scn.tls, size, False)
        self.clean_dl()
        offset = self.nginx.log_offset()
        log_path = self.logs_dir / f"{scn.name}-{tool.name}.log"
        m, on_disk = self.run_until_on_disk(argv, [src], log_path, self.timeout_for(scn, tool, size))
        self.nginx.quiesce()
        fail = with_reason(self.check_output(m, out, src), log_path)
        self.clean_dl()
        rec = self.base_record(scn, tool, rep, size)
        rec.update(
            cmd=shlex.join(argv), ok=fail is None, fail=fail, exit_code=m.exit_code,
            wall_s=m.wall_s, user_s=m.user_s, sys_s=m.sys_s, cpu_s=m.cpu_s, maxrss_kib=m.maxrss_kib,
            mib_s=size / MiB / m.wall_s, total_bytes=size, **on_disk,
            **self.server_stats(self.nginx.entries_since(offset)),
        )
        return rec

    def run_seq(self, scn: Scenario, tool: toolmod.Tool, rep: int) -> dict:
        """One shell loop of `seq_count` downloads of the small file, each to its own name."""
        src = self.files["small"]
        size = src.stat().st_size
        url = self.nginx.url(scn.location, src.name, scn.tls)
        seq_dir = self.dl_dir / "seq"
        names = [f"{i:03d}.bin" for i in range(self.args.seq_count)]
        commands = [tool.build(self.args.connections, seq_dir / n, url, scn.tls, size, False) for n in names]
        script = self.out / "lists" / f"{scn.name}-{tool.name}.sh"
        script.write_text("set -e\n" + "".join(shlex.join(c) + "\n" for c in commands))
        self.clean_dl()
        seq_dir.mkdir()
        offset = self.nginx.log_offset()
        log_path = self.logs_dir / f"{scn.name}-{tool.name}.log"
        m, on_disk = self.run_until_on_disk(["sh", str(script)], [src], log_path, self.timeout_for(scn, tool, size))
        self.nginx.quiesce()
        fail = with_reason(self.check_exit(m), log_path) or self.check_files(seq_dir, {n: src for n in names})
        self.clean_dl()
        rec = self.base_record(scn, tool, rep, size)
        total = size * len(names)
        rec.update(
            cmd=f"sh {script}  # {len(names)} lines like: {shlex.join(commands[0])}", ok=fail is None,
            fail=fail, exit_code=m.exit_code, batch=len(names), wall_s=m.wall_s, user_s=m.user_s,
            sys_s=m.sys_s, cpu_s=m.cpu_s, maxrss_kib=m.maxrss_kib, mib_s=total / MiB / m.wall_s,
            total_bytes=total, **on_disk, **self.server_stats(self.nginx.entries_since(offset)),
        )
        return rec

    def run_batch(self, scn: Scenario, tool: toolmod.Tool, rep: int) -> dict:
        """All files of the scenario's list in one process, `batch_jobs` at a time."""
        src_dir, names, url_list, curl_config = self.batches[scn.name]
        count, size = self.args.batch_spec[scn.name]
        out_dir = self.dl_dir / "batch"
        assert tool.batch is not None
        argv = tool.batch(url_list, curl_config, out_dir, self.args.batch_jobs)
        self.clean_dl()
        out_dir.mkdir()
        offset = self.nginx.log_offset()
        log_path = self.logs_dir / f"{scn.name}-{tool.name}.log"
        with BusyCPUs((os.cpu_count() or 1) if scn.cpu_hogs else 0):
            m, on_disk = self.run_until_on_disk(
                argv, [src_dir / n for n in names], log_path, self.timeout_for(scn, tool, size))
        self.nginx.quiesce()
        fail = (with_reason(self.check_exit(m), log_path)
                or self.check_files(out_dir, {n: src_dir / n for n in names}))
        self.clean_dl()
        rec = self.base_record(scn, tool, rep, size)
        total = count * size
        rec.update(
            cmd=shlex.join(argv), ok=fail is None, fail=fail, exit_code=m.exit_code, files=count,
            jobs=self.args.batch_jobs, wall_s=m.wall_s, user_s=m.user_s, sys_s=m.sys_s, cpu_s=m.cpu_s,
            maxrss_kib=m.maxrss_kib, mib_s=total / MiB / m.wall_s, total_bytes=total, **on_disk,
            **self.server_stats(self.nginx.entries_since(offset)),
        )
        return rec

    def run_diskbusy(self, scn: Scenario, tool: toolmod.Tool, rep: int, writer_mode: str | None) -> dict:
        """The capped download, with no other writer (writer_mode None) or with a `dd` loop writing."""
        src = self.files["main"]
        size = src.stat().st_size
        url = self.nginx.url(scn.location, src.name, scn.tls)
        out = self.dl_dir / "download.bin"
        argv = tool.build(self.args.connections, out, url, scn.tls, size, False)
        if tool.name.startswith("segget"):
            argv = [a for a in argv if a != "-q"]  # -q would hide the re-dial notices counted here
        self.clean_dl()
        self.settle([src])
        offset = self.nginx.log_offset()
        log_path = self.logs_dir / f"{scn.name}-{tool.name}.log"
        log_start = log_path.stat().st_size if log_path.exists() else 0
        writer = None
        try:  # the writer must not outlive an interrupted run
            if writer_mode:
                writer = disk.BusyWriter(self.out / "busy", writer_mode, self.args.busy_size)
                time.sleep(1.0)  # let the writer reach its steady rate before the clock starts
            before = disk.sectors_written(self.device)
            m = measure.run(argv, self.dl_dir, log_path, self.timeout_for(scn, tool, size))
            after = disk.sectors_written(self.device)
            writer_alive = writer.alive() if writer else True
        finally:
            if writer:
                writer.stop()
        self.nginx.quiesce()
        fail = with_reason(self.check_output(m, out, src), log_path)
        if fail is None and not writer_alive:
            fail = "the dd writer stopped before the download ended (disk full?); the run does not count"
        self.clean_dl()
        with open(log_path, "rb") as f:
            f.seek(log_start)
            output = f.read().decode("utf-8", "replace").splitlines()
        redials = [l.strip() for l in output if REDIAL.search(l)]
        rec = self.base_record(scn, tool, rep, size)
        rec.update(
            cmd=shlex.join(argv), variant=f"dd {writer_mode}" if writer_mode else "quiet",
            writer_cmd=writer.cmd if writer else None, ok=fail is None, fail=fail,
            exit_code=m.exit_code, wall_s=m.wall_s, user_s=m.user_s, sys_s=m.sys_s, cpu_s=m.cpu_s,
            maxrss_kib=m.maxrss_kib, mib_s=size / MiB / m.wall_s, total_bytes=size,
            device_written_bytes=(after - before) * 512 if before is not None and after is not None else None,
            redial_lines=len(redials), redial_examples=redials[:3],
            **self.server_stats(self.nginx.entries_since(offset)),
        )
        return rec

    def run_memory(self, scn: Scenario, tool: toolmod.Tool, rep: int, variant: tuple[str, int, bool]) -> dict:
        """segget alone, one of MEMORY_VARIANTS; -n 64 goes past --connections' limit of 16 on purpose."""
        label, n, checksum = variant
        src = self.files["main"]
        size = src.stat().st_size
        url = self.nginx.url(scn.location, src.name, scn.tls)
        out = self.dl_dir / "download.bin"
        argv = tool.build(n, out, url, scn.tls, size, False)
        if checksum:
            argv[-1:-1] = ["--checksum", f"sha256={self.main_sha256()}"]
        self.clean_dl()
        self.settle([src])
        offset = self.nginx.log_offset()
        log_path = self.logs_dir / f"{scn.name}-{tool.name}.log"
        m = measure.run(argv, self.dl_dir, log_path, self.timeout_for(scn, tool, size))
        self.nginx.quiesce()
        fail = with_reason(self.check_output(m, out, src), log_path)
        self.clean_dl()
        rec = self.base_record(scn, tool, rep, size)
        rec.update(
            cmd=shlex.join(argv), variant=label, ok=fail is None, fail=fail, exit_code=m.exit_code,
            wall_s=m.wall_s, user_s=m.user_s, sys_s=m.sys_s, cpu_s=m.cpu_s, maxrss_kib=m.maxrss_kib,
            mib_s=size / MiB / m.wall_s, total_bytes=size,
            **self.server_stats(self.nginx.entries_since(offset)),
        )
        return rec

    def main_sha256(self) -> str:
        if self.main_digest is None:
            h = hashlib.sha256()
            with open(self.files["main"], "rb") as f:
                while chunk := f.read(8 * MiB):
                    h.update(chunk)
            self.main_digest = h.hexdigest()
        return self.main_digest

    def run_small(self, scn: Scenario, tool: toolmod.Tool, rep: int) -> dict:
        src = self.files["small"]
        size = src.stat().st_size
        url = self.nginx.url(scn.location, src.name, scn.tls)
        out = self.dl_dir / "small.bin"
        argv = tool.build(self.args.connections, out, url, scn.tls, size, False)
        self.clean_dl()
        offset = self.nginx.log_offset()
        walls, cpu, user, sys_, rss, fail, codes = [], 0.0, 0.0, 0.0, 0, None, []
        self.settle([src])
        for _ in range(self.args.small_batch):
            log_path = self.logs_dir / f"{scn.name}-{tool.name}.log"
            m = measure.run(argv, self.dl_dir, log_path, 30)
            walls.append(m.wall_s)
            user, sys_, rss = user + m.user_s, sys_ + m.sys_s, max(rss, m.maxrss_kib)
            codes.append(m.exit_code)
            fail = fail or with_reason(self.check_output(m, out, src), log_path)
            self.clean_dl()
        self.nginx.quiesce()
        rec = self.base_record(scn, tool, rep, size)
        total = sum(walls)
        rec.update(
            cmd=shlex.join(argv), ok=fail is None, fail=fail, exit_code=max(codes, key=abs),
            batch=len(walls), wall_s=total, walls_s=walls, user_s=user, sys_s=sys_, cpu_s=user + sys_,
            maxrss_kib=rss, mib_s=size * len(walls) / MiB / total,
            **self.server_stats(self.nginx.entries_since(offset)),
        )
        return rec

    def run_killresume(self, scn: Scenario, tool: toolmod.Tool, rep: int) -> dict:
        src = self.files["kill"]
        size = src.stat().st_size
        url = self.nginx.url(scn.location, src.name, scn.tls)
        out = self.dl_dir / "download.bin"
        self.clean_dl()
        offset = self.nginx.log_offset()
        attempts = []
        log_path = self.logs_dir / f"{scn.name}-{tool.name}.log"
        self.settle([src])
        for i in range(self.args.kills + 1):
            final = i == self.args.kills
            argv = tool.build(self.args.connections, out, url, scn.tls, size, i > 0)
            m = measure.run(argv, self.dl_dir, log_path, self.timeout_for(scn, tool, size),
                            None if final else self.args.kill_after)
            killed = m.killed_by == "kill-after" and m.exit_code != 0
            attempts.append({"cmd": shlex.join(argv), "exit_code": m.exit_code, "wall_s": m.wall_s,
                             "cpu_s": m.cpu_s, "maxrss_kib": m.maxrss_kib, "killed": killed,
                             "timeout": m.killed_by == "timeout"})
            if not killed:
                break
            self.nginx.quiesce()
        self.nginx.quiesce()
        fail = with_reason(self.check_output(m, out, src), log_path)
        identical = same_content(out, src)
        leftovers = sorted(p.name for p in self.dl_dir.iterdir() if p.name != out.name)
        self.clean_dl()
        stats = self.server_stats(self.nginx.entries_since(offset))
        rec = self.base_record(scn, tool, rep, size)
        rec.update(
            cmd=attempts[0]["cmd"], resume_cmd=attempts[-1]["cmd"], ok=fail is None, fail=fail,
            exit_code=m.exit_code, identical=identical, kills=sum(a["killed"] for a in attempts), attempts=attempts,
            wall_s=sum(a["wall_s"] for a in attempts), cpu_s=sum(a["cpu_s"] for a in attempts),
            maxrss_kib=max(a["maxrss_kib"] for a in attempts),
            twice_bytes=stats["server_body_bytes"] - size, leftover_files=leftovers, **stats,
        )
        return rec

    # -- the whole thing -------------------------------------------------------------------------

    def scenario_tools(self, scn: Scenario) -> list[toolmod.Tool]:
        names = [t for t in self.tools if t not in scn.skip]
        result = []
        for name in names:
            tool = self.tools[name]
            if scn.kind == "batch":
                if tool.batch is None:
                    continue
                result.append(tool)
                if name == "segget":
                    # With its default -n, and with one connection per file as the peers use.
                    result.append(toolmod.make_segget(tool.binary, 1))
            elif scn.kind == "memory":
                if name == "segget":
                    result.append(tool)
            elif scn.kind == "killresume":
                if not tool.can_resume:
                    continue
                result.append(tool)
                if name == "aria2c":
                    result.append(toolmod.ARIA2C_AUTOSAVE1)
            else:
                result.append(tool)
        return result

    def write_lists(self, scn: Scenario) -> None:
        """The URL list (segget, aria2c, wget2) and the curl config (url/output pairs) of a batch."""
        count, size = self.args.batch_spec[scn.name]
        src_dir, names = ensure_batch_files(self.data_dir, count, size)
        lists = self.out / "lists"
        urls = [self.nginx.url(scn.location, f"{src_dir.name}/{n}", scn.tls) for n in names]
        url_list, curl_config = lists / f"{scn.name}.txt", lists / f"{scn.name}.curl"
        url_list.write_text("".join(u + "\n" for u in urls))
        out_dir = self.dl_dir / "batch"
        curl_config.write_text("".join(f'url = "{u}"\noutput = "{out_dir / n}"\n' for u, n in zip(urls, names)))
        self.batches[scn.name] = (src_dir, names, url_list, curl_config)

    def measure_disk(self, when: str) -> None:
        if self.args.dd_size <= 0:
            return
        log(f"dd: writing {human_size(self.args.dd_size)} into {self.out / 'ddtest'} three ways ({when}) ...")
        results = disk.dd_rates(self.out / "ddtest", self.args.dd_size)
        for r in results:
            rate = f"{r['mib_s']:.0f} MiB/s" if r["mib_s"] else f"failed: {r['error']}"
            log(f"  {r['name']:<30} {r['seconds']:6.2f} s  {rate}")
        self.disk[f"dd_{when}"] = results

    def run(self) -> None:
        scns = [SCENARIOS[s] for s in self.args.scenarios]
        (self.out / "lists").mkdir(exist_ok=True)
        if any(s.kind in ("throughput", "diskbusy", "memory") for s in scns):
            self.files["main"] = ensure_random_file(self.data_dir, self.args.size)
        if any(s.kind in ("small", "seq") for s in scns):
            self.files["small"] = ensure_random_file(self.data_dir, MiB)
        if any(s.kind == "killresume" for s in scns):
            self.files["kill"] = ensure_random_file(self.data_dir, self.args.kill_size)
        for scn in scns:
            if scn.kind == "batch":
                ensure_batch_files(self.data_dir, *self.args.batch_spec[scn.name])
        self.measure_disk("before")
        self.nginx.start()
        log(f"nginx pid {self.nginx.proc.pid} on 127.0.0.1:{self.nginx.http_port} "
            f"(TLS {self.nginx.tls_port}), prefix {self.nginx.prefix}")
        for scn in scns:
            if scn.kind == "batch":
                self.write_lists(scn)
            if scn.kind in ("small", "seq", "batch"):
                self.settle_inodes(scn.name)
            tools = self.scenario_tools(scn)
            reps = self.args.kill_reps if scn.kind == "killresume" else self.args.reps
            for rep in range(reps):
                k = rep % len(tools) if tools else 0
                order = tools[k:] + tools[:k]
                log(f"[{scn.name}] rep {rep + 1}/{reps}: {', '.join(t.name for t in order)}")
                for tool in order:
                    if scn.kind == "diskbusy":
                        # Quiet and busy runs of one tool back to back, their order rotated too.
                        variants: list[str | None] = [None, *self.args.busy_writers]
                        j = rep % len(variants)
                        for mode in variants[j:] + variants[:j]:
                            self.save(self.run_diskbusy(scn, tool, rep + 1, mode))
                        continue
                    if scn.kind == "memory":
                        j = rep % len(MEMORY_VARIANTS)
                        for variant in MEMORY_VARIANTS[j:] + MEMORY_VARIANTS[:j]:
                            self.save(self.run_memory(scn, tool, rep + 1, variant))
                        continue
                    runner = {"throughput": self.run_throughput, "small": self.run_small,
                              "seq": self.run_seq, "batch": self.run_batch,
                              "killresume": self.run_killresume}[scn.kind]
                    self.save(runner(scn, tool, rep + 1))
        self.nginx.stop()
        self.measure_disk("after")


class BusyCPUs:
    """`count` busy loops (`yes > /dev/null`), started on entry and stopped by their PIDs on exit,
    also when the run in between fails. Started before the `sync` and rest that precede a run, so
    that the scheduler has spread them by the time the clock starts."""

    def __init__(self, count: int):
        self.count = count
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "BusyCPUs":
        for _ in range(self.count):
            self.procs.append(subprocess.Popen(["yes"], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


# -- setup -----------------------------------------------------------------------------------------

def find_segget(args: argparse.Namespace, notes: list[str]) -> str | None:
    if args.segget:
        path = Path(args.segget)
        if os.access(path, os.X_OK):
            return str(path.resolve())
        notes.append(f"segget: `{args.segget}` is not an executable file; segget was not run.")
        return None
    path = REPO / ".build" / "release" / "segget"
    if not path.exists() and not args.no_build:
        build_log = args.out / "segget-build.log"
        log(f"building segget (swift build -c release --product segget --static-swift-stdlib, log in {build_log}) ...")
        with open(build_log, "wb") as f:
            try:
                r = subprocess.run(["swift", "build", "-c", "release", "--product", "segget", "--static-swift-stdlib"],
                                   cwd=REPO, stdout=f, stderr=f, timeout=1800)
                if r.returncode != 0:
                    notes.append(f"segget: the release build failed (exit {r.returncode}, see "
                                 f"{build_log}); segget was not run.")
                    return None
            except (OSError, subprocess.TimeoutExpired) as e:
                notes.append(f"segget: the release build did not finish ({e}); segget was not run.")
                return None
    if path.exists():
        return str(path)
    notes.append("segget: .build/release/segget is absent (build skipped); segget was not run.")
    return None


def machine_info() -> dict:
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "unknown"
    return {
        "nproc": os.cpu_count(), "memory_gib": round(mem_kib / (1 << 20), 1), "cpu": cpu,
        "kernel": platform.release(), "loadavg_at_start": os.getloadavg(), "commit": commit,
        "python": platform.python_version(),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=os.environ.get("SEGGET_BENCH_PROG", "scripts/bench"),
        description="Benchmark segget against curl, aria2c, axel, lftp and wget2 on a local nginx.")
    p.add_argument("--quick", action="store_true",
                   help="A smaller file (256 MiB), 2 repetitions, 1 kill-and-resume round: under 10 minutes.")
    p.add_argument("--size", type=parse_size, help="Size of the test file (default 1G; --quick 256M).")
    p.add_argument("--connections", "-n", type=int, default=8, help="Connections per tool (default 8).")
    p.add_argument("--reps", type=int, help="Repetitions per scenario (default 3; --quick 2).")
    p.add_argument("--scenarios", default=",".join(ALL_SCENARIOS),
                   help=f"Comma-separated scenarios (default {','.join(ALL_SCENARIOS)}).")
    p.add_argument("--tools", default=",".join(ALL_TOOLS),
                   help=f"Comma-separated tools (default {','.join(ALL_TOOLS)}).")
    p.add_argument("--segget", help="Path of the segget binary (default .build/release/segget, built if missing).")
    p.add_argument("--baseline", help="Path of another segget binary (an earlier commit's), run as tool segget-base "
                   "interleaved with the others, to tell a regression from the machine's mood.")
    p.add_argument("--no-build", action="store_true", help="Do not build segget when the binary is missing.")
    p.add_argument("--out", type=Path, default=REPO / "bench-out",
                   help="Output directory (default bench-out/, git-ignored).")
    p.add_argument("--write-results", action="store_true",
                   help="Also write Benchmarks/RESULTS.md and Benchmarks/throughput.svg.")
    p.add_argument("--kill-size", type=parse_size, default=GiB,
                   help="Size of the file for the kill-and-resume scenario (default 1G).")
    p.add_argument("--kill-after", type=float, default=3.0, help="Seconds before each SIGKILL (default 3).")
    p.add_argument("--kills", type=int, default=3, help="SIGKILLs before the final attempt (default 3).")
    p.add_argument("--kill-reps", type=int, help="Repetitions of kill-and-resume (default --reps; --quick 1).")
    p.add_argument("--small-batch", type=int,
                   help="Downloads of the 1 MiB file per small run (default 20; --quick 10).")
    p.add_argument("--seq-count", type=int, default=20,
                   help="Downloads of the 1 MiB file in one seq-small loop (default 20).")
    p.add_argument("--batch-small", type=parse_batch, default=(500, 64 << 10),
                   help="Files of batch-small, COUNTxSIZE (default 500x64K).")
    p.add_argument("--batch-capped", type=parse_batch, default=(100, 4 * MiB),
                   help="Files of batch-capped, COUNTxSIZE (default 100x4M).")
    p.add_argument("--batch-jobs", type=int, default=16,
                   help="Files in flight in the batch scenarios (default 16).")
    p.add_argument("--dd-size", type=parse_size, default=GiB,
                   help="Bytes dd writes to measure the disk before and after the runs (default 1G; 0 skips).")
    p.add_argument("--settle", type=float, default=0.5,
                   help="Seconds of rest after the `sync` that precedes every run (default 0.5).")
    p.add_argument("--busy-writers", default="direct,buffered",
                   help="disk-busy: the dd writers, each in runs of its own: direct (oflag=direct), "
                        "buffered (conv=fdatasync), or both comma-separated (default both).")
    p.add_argument("--busy-size", type=parse_size, default=4 * GiB,
                   help="disk-busy: bytes each dd of the writer loop writes (default 4G).")
    args = p.parse_args(argv)
    args.size = args.size or (256 * MiB if args.quick else GiB)
    args.reps = args.reps or (2 if args.quick else 3)
    args.kill_reps = args.kill_reps or (1 if args.quick else args.reps)
    args.small_batch = args.small_batch or (10 if args.quick else 20)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    for s in args.scenarios:
        if s not in SCENARIOS:
            p.error(f"unknown scenario {s!r}; choose from {', '.join(ALL_SCENARIOS)}")
    for t in args.tools:
        if t not in ALL_TOOLS:
            p.error(f"unknown tool {t!r}; choose from {', '.join(ALL_TOOLS)}")
    args.busy_writers = [w.strip() for w in args.busy_writers.split(",") if w.strip()]
    for w in args.busy_writers:
        if w not in ("direct", "buffered"):
            p.error(f"unknown --busy-writers entry {w!r}; choose from direct, buffered")
    if not 1 <= args.batch_jobs <= 32:
        p.error("--batch-jobs must be between 1 and 32 (segget's -j allows at most 32)")
    args.batch_spec = {"batch-small": args.batch_small, "batch-busy": args.batch_small,
                       "batch-capped": args.batch_capped}
    if args.connections < 1 or args.connections > 16:
        p.error("--connections must be between 1 and 16 (aria2c allows at most 16 per server)")
    args.out = args.out.resolve()
    return args


def main(argv: list[str]) -> int:
    if argv[:1] == ["wan"] or "--wan-quick" in argv:
        # The emulated-WAN benchmark has options of its own (Benchmarks/harness/wan.py).
        import wan
        return wan.main([a for a in argv if a != "wan"])
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    command_line = shlex.join([os.environ.get("SEGGET_BENCH_PROG", "scripts/bench"), *argv])
    notes: list[str] = []
    tools: dict[str, toolmod.Tool] = {}
    for name in args.tools:
        if name == "segget":
            binary = find_segget(args, notes)
            if binary:
                tools[name] = toolmod.make_segget(binary)
        elif name == "segget-base":
            continue
        elif shutil.which(toolmod.PEERS[name].binary):
            tools[name] = toolmod.PEERS[name]
        else:
            notes.append(f"{name}: not installed; not run.")
    if getattr(args, "baseline", None):
        if os.access(args.baseline, os.X_OK):
            tools["segget-base"] = toolmod.make_segget(args.baseline, name="segget-base")
        else:
            notes.append(f"segget-base: `{args.baseline}` is not an executable file; not run.")
    for n in notes:
        log(f"note: {n}")

    started = time.monotonic()
    started_at = dt.datetime.now(dt.timezone.utc)
    machine = machine_info()  # before the runs: its load average is the one at the start
    bench = Bench(args, tools, notes)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    interrupted = False
    try:
        bench.run()
    except KeyboardInterrupt:
        interrupted = True
        notes.append("The run was interrupted; the tables hold only the runs that finished.")
        log("interrupted")
    finally:
        measure.kill_current()
        bench.nginx.stop()
        bench.remove_aside()
    elapsed = time.monotonic() - started

    context = {
        "command_line": command_line, "date": started_at.isoformat(timespec="seconds"),
        "elapsed_s": elapsed, "machine": machine, "disk": bench.disk,
        "versions": {t.name: toolmod.version_line(t) for t in tools.values()}
        | {"nginx": nginx_version()},
        "args": args, "notes": notes, "scenarios": SCENARIOS, "tools": tools,
    }
    header = {k: context[k] for k in ("command_line", "date", "elapsed_s", "machine", "disk", "versions", "notes")}
    header["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    (args.out / "header.json").write_text(json.dumps(header, indent=2) + "\n")
    md = report.markdown(bench.records, context)
    svg = report.svg(bench.records, context)
    (args.out / "results.md").write_text(md)
    (args.out / "throughput.svg").write_text(svg)
    print(md)
    written = [args.out / "results.md", args.out / "header.json", args.out / "throughput.svg", bench.runs_path]
    if args.write_results and not interrupted:
        (REPO / "Benchmarks" / "RESULTS.md").write_text(md)
        (REPO / "Benchmarks" / "throughput.svg").write_text(svg)
        written += [REPO / "Benchmarks" / "RESULTS.md", REPO / "Benchmarks" / "throughput.svg"]
    log(f"done in {elapsed / 60:.1f} min; wrote " + ", ".join(str(p) for p in written))
    return 130 if interrupted else 0


def nginx_version() -> str:
    r = subprocess.run(["nginx", "-v"], capture_output=True, text=True)
    return (r.stderr or r.stdout).strip()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
