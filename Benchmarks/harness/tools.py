"""The exact command line of every tool under test.

Every tool gets the same connection count N, writes to an output path on the same file system as the
source, and gets its "do not verify the certificate" flag for the TLS scenario (the certificate is
self-signed). Nothing else is tuned.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MiB = 1 << 20


@dataclass
class Invocation:
    argv: list[str]

    def __str__(self) -> str:
        return shlex.join(self.argv)


@dataclass
class Tool:
    """A download tool as the benchmark uses it.

    `build(n, out, url, tls, size, resume)` returns the command line; `resume` is True for the second
    and later attempts of the kill-and-resume scenario.
    """

    name: str
    binary: str
    connections: Callable[[int], int]
    build: Callable[[int, Path, str, bool, int, bool], list[str]]
    can_resume: bool
    version_argv: list[str]
    # Many files in one process: batch(url_list, curl_config, out_dir, jobs), or None when the tool
    # has no list mode. The URL list has one URL a line; the curl config pairs each with its output.
    batch: Callable[[Path, Path, Path, int], list[str]] | None = None


def _curl(n: int, out: Path, url: str, tls: bool, size: int, resume: bool) -> list[str]:
    return ["curl", "-sS", *(["-k"] if tls else []), "-o", str(out), url]


def _aria2c(extra: list[str]) -> Callable[..., list[str]]:
    def build(n: int, out: Path, url: str, tls: bool, size: int, resume: bool) -> list[str]:
        # --allow-overwrite: start from scratch when there is a file but no .aria2 control file
        # (otherwise aria2c renames its output to NAME.1). With a control file aria2c resumes from
        # it: running the same command again is how aria2 resumes its own downloads.
        return [
            "aria2c", "-x", str(n), "-s", str(n), "-k", "1M", "--file-allocation=none",
            "--allow-overwrite=true", *extra,
            *(["--check-certificate=false"] if tls else []),
            "-q", "-d", str(out.parent), "-o", out.name, url,
        ]
    return build


def _axel(n: int, out: Path, url: str, tls: bool, size: int, resume: bool) -> list[str]:
    # Running the same command again resumes from OUT.st.
    return ["axel", "-q", *(["-k"] if tls else []), "-n", str(n), "-o", str(out), url]


def _lftp(n: int, out: Path, url: str, tls: bool, size: int, resume: bool) -> list[str]:
    settings = "set ssl:verify-certificate no; " if tls else ""
    cont = "-c " if resume else ""
    # lftp 4.9 wants `-o` after the URL: `pget -n N -o OUT URL` fails with "invalid option -- 'o'".
    script = f"{settings}pget {cont}-n {n} {shlex.quote(url)} -o {shlex.quote(str(out))}"
    return ["lftp", "-c", script]


def wget2_chunk_size(size: int, n: int) -> int:
    """N equal chunks, rounded up to a whole MiB (wget2 hands one chunk to each of its threads)."""
    per = -(-size // n)
    return max(MiB, -(-per // MiB) * MiB)


def _wget2(n: int, out: Path, url: str, tls: bool, size: int, resume: bool) -> list[str]:
    chunk = wget2_chunk_size(size, n)
    return [
        "wget2", "-q", *(["--no-check-certificate"] if tls else []),
        f"--max-threads={n}", f"--chunk-size={chunk // MiB}M", "-O", str(out), url,
    ]


def _curl_batch(urls: Path, config: Path, out_dir: Path, jobs: int) -> list[str]:
    # The config file holds `url = ...` / `output = ...` pairs: -O would also work, but names the
    # outputs in the working directory only.
    return ["curl", "-sS", "--parallel", "--parallel-max", str(jobs), "-K", str(config)]


def _aria2c_batch(urls: Path, config: Path, out_dir: Path, jobs: int) -> list[str]:
    return ["aria2c", "-j", str(jobs), "--file-allocation=none", "--allow-overwrite=true", "-q",
            "-d", str(out_dir), "-i", str(urls)]


def _wget2_batch(urls: Path, config: Path, out_dir: Path, jobs: int) -> list[str]:
    return ["wget2", "-q", f"--max-threads={jobs}", "-P", str(out_dir), "-i", str(urls)]


def make_segget(binary: str, batch_connections: int | None = None, name: str | None = None) -> Tool:
    """segget; in batch scenarios with its default -n, or with `-n batch_connections` (tool segget-nK).
    `name` names another build of it (`--baseline`: segget-base), measured interleaved with the rest."""
    def build(n: int, out: Path, url: str, tls: bool, size: int, resume: bool) -> list[str]:
        # The same command resumes an interrupted download.
        return [binary, "-n", str(n), "-q", *(["-k"] if tls else []), "-o", str(out), url]

    def batch(urls: Path, config: Path, out_dir: Path, jobs: int) -> list[str]:
        n = ["-n", str(batch_connections)] if batch_connections else []
        return [binary, "-q", "-i", str(urls), "-j", str(jobs), *n, "-d", str(out_dir)]

    name = name or (f"segget-n{batch_connections}" if batch_connections else "segget")
    return Tool(name, binary, lambda n: n, build, True, [binary, "--version"], batch)


PEERS: dict[str, Tool] = {
    "curl": Tool("curl", "curl", lambda n: 1, _curl, False, ["curl", "--version"], _curl_batch),
    "aria2c": Tool("aria2c", "aria2c", lambda n: n, _aria2c([]), True, ["aria2c", "--version"],
                   _aria2c_batch),
    "axel": Tool("axel", "axel", lambda n: n, _axel, True, ["axel", "--version"]),
    "lftp": Tool("lftp", "lftp", lambda n: n, _lftp, True, ["lftp", "--version"]),
    "wget2": Tool("wget2", "wget2", lambda n: n, _wget2, False, ["wget2", "--version"], _wget2_batch),
}

# Extra entry for the kill-and-resume scenario only: aria2c saving its control file every second
# instead of every 60 s.
ARIA2C_AUTOSAVE1 = Tool(
    "aria2c-autosave1", "aria2c", lambda n: n, _aria2c(["--auto-save-interval=1"]), True,
    ["aria2c", "--version"],
)


def version_line(tool: Tool) -> str:
    try:
        r = subprocess.run(tool.version_argv, capture_output=True, text=True, timeout=10)
        text = (r.stdout or r.stderr).strip()
        return text.splitlines()[0] if text else f"(no output, exit {r.returncode})"
    except Exception as e:  # a missing binary or a tool without --version
        return f"(unknown: {e})"
