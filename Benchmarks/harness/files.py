"""Small helpers the benchmark scripts share (request-price.py, metalink.py, http2.py, and the harness's bench.py and wan.py):
a free loopback port, a file of random bytes made once, a file's SHA-256, segget-testserver started."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
from pathlib import Path

MiB = 1 << 20


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def random_file(path: Path, size: int) -> None:
    """`size` random bytes at `path`, unless a file of that size is there already. Written under a
    temporary name and renamed, so that an interrupted run never leaves a short file at `path`."""
    if path.exists() and path.stat().st_size == size:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        left = size
        while left:
            b = os.urandom(min(left, 8 * MiB))
            f.write(b)
            left -= len(b)
    tmp.rename(path)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(4 * MiB):
            h.update(b)
    return h.hexdigest()


def start_testserver(binary: str, www: Path, log: Path) -> tuple[subprocess.Popen, int]:
    """segget-testserver serving `www` on a free 127.0.0.1 port, logging its requests to `log`
    (emptied first); returns once it says it listens."""
    port = free_port()
    log.write_text("")
    proc = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", str(port), "--dir", str(www), "--log", str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if "listening" not in line:
        raise SystemExit(f"segget-testserver did not start: {line!r}")
    return proc, port
