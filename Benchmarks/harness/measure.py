"""Run one command and measure it: wall time, user+sys CPU (wait4(2)), peak RSS (/usr/bin/time).

Peak RSS comes from /usr/bin/time, not from our own wait4: Linux carries the parent's RSS high-water
mark across fork+exec into ru_maxrss, so every child of this (40 MiB) Python process would report at
least 40 MiB. The tool is a child of /usr/bin/time (about 2 MiB) instead, whose `%M` is the tool's own
peak RSS (at least the ~2 MiB of `time` itself). CPU seconds are ru_utime + ru_stime from wait4 on
`time`, which includes its waited-for child, the tool (plus a millisecond for `time`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# The child being measured, so that Ctrl-C can kill it (see kill_current).
_current: subprocess.Popen | None = None


@dataclass
class Measured:
    exit_code: int          # negative: killed by that signal
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kib: int         # ru_maxrss is in KiB on Linux
    killed_by: str | None   # "timeout", "kill-after" or None
    started: float = 0.0    # time.monotonic() at spawn and at exit, for spans that go past the exit
    ended: float = 0.0

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group_except_leader(pgid: int) -> None:
    """SIGKILL every process of the group but its leader (/usr/bin/time), which then reports."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == pgid:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            pass


def _parse_time_output(path: Path) -> tuple[int, int | None]:
    """(peak RSS KiB, exit code or None) from `/usr/bin/time -f '%M %x'` output."""
    try:
        lines = path.read_text().strip().splitlines()
    except OSError:
        return 0, None
    rss, code = 0, None
    for line in lines:
        if line.startswith("Command terminated by signal"):
            code = -int(line.split()[-1])
        parts = line.split()
        if len(parts) == 2 and all(p.lstrip("-").isdigit() for p in parts):
            rss = int(parts[0])
            if code is None:
                code = int(parts[1])
    return rss, code


def run(argv: list[str], cwd: Path, log: Path, timeout: float, kill_after: float | None = None) -> Measured:
    """Run argv in its own process group; SIGKILL it after `kill_after` s or `timeout` s."""
    global _current
    stats = log.with_suffix(".time")
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        start = time.monotonic()
        proc = subprocess.Popen(
            ["/usr/bin/time", "-o", str(stats), "-f", "%M %x", *argv],
            cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
        )
    _current = proc
    why: list[str] = []

    def fire(reason: str) -> None:
        why.append(reason)
        _kill_group_except_leader(proc.pid)
        if reason == "timeout":
            time.sleep(1)
            _killpg(proc.pid)

    timers = [threading.Timer(timeout, fire, ("timeout",))]
    if kill_after is not None:
        timers.append(threading.Timer(kill_after, fire, ("kill-after",)))
    for t in timers:
        t.daemon = True
        t.start()
    try:
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
    finally:
        for t in timers:
            t.cancel()
        _current = None
    proc.returncode = os.waitstatus_to_exitcode(status)
    _killpg(proc.pid)  # anything the tool left behind in its group
    rss, code = _parse_time_output(stats)
    if code is None:  # `time` itself died (timeout): report how it ended
        code = proc.returncode
    return Measured(
        exit_code=code, wall_s=wall, user_s=ru.ru_utime, sys_s=ru.ru_stime,
        maxrss_kib=rss, killed_by=why[0] if why else None, started=start, ended=start + wall,
    )


def sync_all() -> float:
    """Run `sync(1)` (every file system) and return the seconds it took."""
    start = time.monotonic()
    subprocess.run(["sync"], stdin=subprocess.DEVNULL, check=False)
    return time.monotonic() - start


def kill_current() -> None:
    proc = _current
    if proc is not None and proc.returncode is None:
        _killpg(proc.pid)
        try:
            os.waitpid(proc.pid, 0)
        except ChildProcessError:
            pass
