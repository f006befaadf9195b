"""The disk under the download directory: what it is, how fast `dd` writes to it, and a writer that
keeps it busy (the `disk-busy` scenario).

Download times on a slow disk say little without the disk's own rate beside them, so every run
records `dd` into the download directory's file system before and after the scenarios.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

MiB = 1 << 20


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def read_through(paths: list[Path]) -> int:
    """Reads every byte of `paths` (into nothing) and returns how many bytes that was. What a run serves
    must be in the page cache when it starts: the host of the VMs this runs on pages out what was not
    touched for about a minute (a DAMON `pageout` scheme, age 12 x 5 s), so a source left alone between
    repetitions comes back partly from the disk, through nginx, in whichever tool's run is next (500
    files of 64 KiB were 56 % resident 10 minutes after a run, 44 % 20 s later)."""
    total = 0
    buf = bytearray(1 << 20)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return total


def mount_of(path: Path) -> dict:
    """Device, file system type, mount point and options of the file system holding `path`."""
    r = subprocess.run(["findmnt", "-n", "-o", "SOURCE,FSTYPE,TARGET,OPTIONS", "-T", str(path)],
                       capture_output=True, text=True)
    parts = r.stdout.split()
    if r.returncode != 0 or len(parts) < 4:
        return {"source": None, "fstype": None, "target": None, "options": None}
    return {"source": parts[0], "fstype": parts[1], "target": parts[2], "options": parts[3]}


def block_dir(source: str | None) -> Path | None:
    """/sys/class/block/DEV for a mount source such as /dev/vda or /dev/sda1 (None for tmpfs, overlay…)."""
    if not source or not source.startswith("/dev/"):
        return None
    d = Path("/sys/class/block") / Path(os.path.realpath(source)).name
    return d if (d / "stat").exists() else None


def queue_dir(dev: Path) -> Path:
    """The request queue is the whole disk's: a partition's lives in its parent's directory."""
    return dev / "queue" if (dev / "queue").exists() else dev.resolve().parent / "queue"


def sectors_written(dev: Path | None) -> int | None:
    """512-byte sectors written to the device since boot (field 7 of /sys/class/block/DEV/stat)."""
    if dev is None:
        return None
    text = _read(dev / "stat")
    try:
        return int(text.split()[6]) if text else None
    except (IndexError, ValueError):
        return None


def describe(path: Path) -> dict:
    m = mount_of(path)
    dev = block_dir(m["source"])
    info = dict(m, device=dev.name if dev else None, rotational=None, scheduler=None, model=None)
    if dev:
        q = queue_dir(dev)
        info["rotational"] = _read(q / "rotational")
        info["scheduler"] = _read(q / "scheduler")
        info["model"] = _read(q.parent / "device" / "model")
    return info


def _timed(argv: list[str], cwd: Path) -> dict:
    start = time.monotonic()
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    return {"cmd": " ".join(argv), "seconds": time.monotonic() - start, "exit_code": r.returncode,
            "error": r.stderr.strip().splitlines()[-1] if r.returncode != 0 and r.stderr.strip() else None}


def dd_rates(directory: Path, size: int) -> list[dict]:
    """Time three ways of writing `size` bytes of zeros into `directory`; each starts after a `sync`.

    - direct: `dd oflag=direct` into a new file, the rate an O_DIRECT writer gets;
    - direct into a fallocated file: the same over unwritten extents (segget preallocates);
    - buffered + fdatasync: through the page cache, then flushed, the rate a buffered writer
      followed by `sync` gets.
    Each `seconds` is the wall time of the dd process (fallocate not included).
    """
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "ddtest"
    count = max(1, size // MiB)
    dd = ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={count}", "status=none"]
    results = []
    for name, extra, falloc in (
        ("direct", ["oflag=direct"], False),
        ("direct into a fallocated file", ["oflag=direct", "conv=notrunc"], True),
        ("buffered + fdatasync", ["conv=fdatasync"], False),
    ):
        target.unlink(missing_ok=True)
        if falloc:
            subprocess.run(["fallocate", "-l", str(count * MiB), str(target)], check=False)
        subprocess.run(["sync"], check=False)
        r = _timed(dd + extra, directory)
        r.update(name=name, bytes=count * MiB,
                 mib_s=count / r["seconds"] if r["exit_code"] == 0 and r["seconds"] > 0 else None)
        results.append(r)
    target.unlink(missing_ok=True)
    subprocess.run(["sync"], check=False)
    return results


class BusyWriter:
    """`dd` writing zeros to a file in a loop, in its own process group, until stopped.

    mode "direct" uses `oflag=direct` (the disk is busy at once, the page cache untouched);
    "buffered" uses `conv=fdatasync` (the page cache fills with dirty pages, then write-back).
    """

    def __init__(self, directory: Path, mode: str, size: int):
        directory.mkdir(parents=True, exist_ok=True)
        self.target = directory / f"busy-{mode}.bin"
        flag = "oflag=direct" if mode == "direct" else "conv=fdatasync"
        self.cmd = (f"while :; do dd if=/dev/zero of={self.target} bs=1M count={max(1, size // MiB)} "
                    f"{flag} status=none || exit 1; done")
        self.proc = subprocess.Popen(["sh", "-c", self.cmd], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.target.unlink(missing_ok=True)
