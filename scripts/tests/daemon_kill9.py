"""kill -9 of `segget daemon` with 3 downloads active and 5 waiting, then a restart: every task must
finish byte-identical, at most 1 % of the bytes may be fetched twice (counted from the test server's
log of bytes sent), and the finished history from before the kill must still be there.

The setup of issue 24: eight 64 MiB tasks of 2 connections each from a server capped at 16 MiB/s per
connection, 3 active at a time; the daemon is killed 2 s after they were added (each active task is
then 34-57 MiB in, with the machine's load) and started again 2 s later. Before issue 24 a task of 2 connections lost both
connections' partly written chunks at a kill (its 1 MiB staging buffers filled only at chunk ends, so
its progress slots never moved inside a chunk): 0.6-0.8 % fetched twice, up to 1.1 % and once 3.9 % on a busy
machine; now 0.2-0.4 %.

The server's log counts what it wrote, and a loaded machine can leave megabytes of that in the kernel's
socket queues at the kill, never read by the daemon (a fresh clone's CI failed once at 1.01 %: the same
run without those queues would have passed). So the daemon is stopped (SIGSTOP) just before the kill,
the queues of the server's connections are read with `ss`, and the check is on what is left: the bytes
the daemon read and lost, or asked for twice. Both numbers are printed, with the excess per file.

What remains is not all the kill's doing: each file's first request is open-ended (`bytes=0-`) and is
cut where the next range starts, and whatever the server had queued past that point is sent twice: 64
KiB on an idle machine, 3-8 MiB for a file now and then on a loaded one. A fresh clone's CI failed at
2.27 % that way: the kill's share was 0.3 %, and 10.9 MiB were the cuts of two files that were still
waiting at the kill and first started after the restart. So the 1 % check counts the files that were
active at the kill (their excess less the socket queues); a file that was waiting is checked apart: its
excess may not pass what the kernel can hold at its cuts (one receive and one send buffer, at their
`tcp_rmem`/`tcp_wmem` maxima, per request after the first), which a file fetched twice would.

Usage: daemon_kill9.py --segget BIN --testserver BIN --work DIR [--aria2c BIN] [--kill-after S]
                       [--restart-after S] [--connections N]
With --aria2c the same scenario runs against aria2c instead (for comparison; it saves its session
every second with --save-session-interval=1 and reads it back with --input-file at the restart).
"""

import argparse
import filecmp
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from checks import free_port, rpc_reply

SIZE = 64 << 20          # per file; large enough that the chunks in flight at a kill stay under 1 %
HISTORY_SIZE = 1 << 20   # two small files finished before the kill: the history to keep
RATE = "16m"             # per connection, as nginx's capped location in the benchmarks
CONNECTIONS = "2"        # per task: 64 MiB at 32 MiB/s, so that 2 s in each active task is part-way
KILL_AFTER = 2.0         # seconds after the 8 tasks were added
RESTART_AFTER = 2.0      # seconds between the kill and the restart


class RPC:
    def __init__(self, port):
        self.url = f"http://127.0.0.1:{port}/jsonrpc"

    def __call__(self, method, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": "k", "method": method, "params": ["token:kill9", *params]})
        req = urllib.request.Request(self.url, body.encode(), {"Content-Type": "application/json"})
        reply = rpc_reply(req, 10)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]


def start_daemon(args, port, download_dir, db, tag):
    log = open(os.path.join(args.work, f"daemon-{tag}.log"), "w")
    if args.aria2c:
        session = os.path.join(args.work, "aria2.session")
        argv = [args.aria2c, "--enable-rpc", f"--rpc-listen-port={port}", "--rpc-secret=kill9", f"--dir={download_dir}",
                "--max-concurrent-downloads=3", f"--save-session={session}", "--save-session-interval=1",
                "--continue=true", "--quiet=true", "--max-download-result=1000"]
        if os.path.exists(session):
            argv.append(f"--input-file={session}")
    else:
        argv = [args.segget, "daemon", "--rpc-listen-port", str(port), "--rpc-secret", "kill9",
                "--dir", download_dir, "--database", db, "--max-concurrent-downloads", "3"]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"daemon exited with {proc.returncode}; see {log.name}")
            time.sleep(0.05)
    sys.exit("daemon did not listen within 20 s")


def kernel_queued(server_port):
    """Bytes in flight on loopback between the test server and its clients, by `ss`: the clients' receive
    queues (delivered, not yet read) and the server's send queues (written, not yet delivered)."""
    try:
        out = subprocess.run(["ss", "-tnH"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    total = 0
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 5 or not fields[1].isdigit() or not fields[2].isdigit():
            continue
        local, peer = fields[3].rsplit(":", 1)[-1], fields[4].rsplit(":", 1)[-1]
        if peer == str(server_port):
            total += int(fields[1])
        elif local == str(server_port):
            total += int(fields[2])
    return total


def kernel_buffer_maximum():
    """The most a cut connection can have in flight: a receive buffer and a send buffer at their maxima."""
    total = 0
    for name in ("tcp_rmem", "tcp_wmem"):
        with open(f"/proc/sys/net/ipv4/{name}") as f:
            total += int(f.read().split()[2])
    return total


def wait_for(predicate, timeout, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def main():
    ap = argparse.ArgumentParser()
    for name in ("segget", "testserver", "work"):
        ap.add_argument("--" + name, required=True)
    ap.add_argument("--aria2c")
    ap.add_argument("--kill-after", type=float, default=KILL_AFTER)
    ap.add_argument("--connections", default=CONNECTIONS, help="per task; 0: the daemon's default")
    ap.add_argument("--restart-after", type=float, default=RESTART_AFTER)
    args = ap.parse_args()
    www = os.path.join(args.work, "www")
    download_dir = os.path.join(args.work, "downloads")
    os.makedirs(www, exist_ok=True)
    os.makedirs(download_dir, exist_ok=True)
    names = [f"f{i}.bin" for i in range(8)]
    history = ["h0.bin", "h1.bin"]
    for name in names + history:
        with open(os.path.join(www, name), "wb") as f:
            f.write(os.urandom(HISTORY_SIZE if name in history else SIZE))

    server_log = os.path.join(args.work, "server.log")
    server = subprocess.Popen([args.testserver, "--port", "0", "--dir", www, "--log", server_log],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    base = server.stdout.readline().split()[2]
    port = free_port()
    db = os.path.join(args.work, "queue.sqlite")
    daemon = start_daemon(args, port, download_dir, db, "1")
    rpc = RPC(port)
    failures = []
    queued = 0
    waiting_names = set()
    try:
        # The history: two small downloads that finish before the kill.
        done_before = [rpc("aria2.addUri", [f"{base}/{h}"]) for h in history]
        if not wait_for(lambda: all(rpc("aria2.tellStatus", g, ["status"])["status"] == "complete" for g in done_before), 30):
            sys.exit("the history downloads did not finish")

        opts = {"split": args.connections, "max-connection-per-server": args.connections} if args.connections != "0" else {}
        added = time.time()
        gids = [rpc("aria2.addUri", [f"{base}/{n}?rate={RATE}"], opts) for n in names]

        time.sleep(max(0.0, added + args.kill_after - 0.1 - time.time()))
        active = rpc("aria2.tellActive", ["gid", "completedLength", "totalLength"])
        waiting = rpc("aria2.tellWaiting", 0, 100, ["gid"])
        time.sleep(max(0.0, added + args.kill_after - time.time()))
        # Stopped first, so that the bytes the kernel holds for its connections can be read: those the
        # server wrote that the daemon never read (its receive queues, the server's send queues) are lost at
        # any kill -9, by any client, and are counted apart from what the daemon itself read and lost.
        daemon.send_signal(signal.SIGSTOP)
        queued = kernel_queued(int(base.rsplit(":", 1)[1]))
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        done_list = ", ".join(f"{int(a['completedLength']) / 1048576:.1f}" for a in active)
        print(f"killed {time.time() - added:.2f} s after adding the 8 tasks, with {len(active)} active "
              f"({done_list} MiB done) and {len(waiting)} waiting")
        name_of = dict(zip(gids, names))
        waiting_names = {name_of[w["gid"]] for w in waiting if w["gid"] in name_of}
        if len(active) != 3 or len(waiting) != 5:
            sys.exit("the kill did not find 3 active and 5 waiting tasks; the scenario needs them")

        time.sleep(args.restart_after)
        daemon = start_daemon(args, port, download_dir, db, "2")
        def state(g):
            try:
                return rpc("aria2.tellStatus", g, ["status"])["status"]
            except RuntimeError:
                return "unknown"

        after = {g: state(g) for g in gids}
        known = sum(1 for s in after.values() if s in ("active", "waiting", "complete"))
        print(f"after restart: {known}/8 tasks known ({', '.join(sorted(set(after.values())))})")
        if known != 8:
            failures.append(f"only {known} of 8 tasks came back: {after}")

        started = time.time()
        back = [g for g in gids if after[g] != "unknown"]
        finished = back and wait_for(lambda: all(state(g) == "complete" for g in back), 180, 0.2) and len(back) == 8
        print(f"all 8 finished {time.time() - started:.1f} s after the restart" if finished else "not all finished")
        if not finished:
            failures.append("not every task finished: " + str({g: state(g) for g in gids}))

        for name in names + history:
            path = os.path.join(download_dir, name)
            if not (os.path.exists(path) and filecmp.cmp(path, os.path.join(www, name), shallow=False)):
                failures.append(f"{name} is missing or differs from the source")
        leftovers = [f for f in os.listdir(download_dir) if f.endswith((".segget-part", ".segget-journal"))]
        if leftovers:
            failures.append(f"left behind: {leftovers}")

        stopped = {s["gid"]: s["status"] for s in rpc("aria2.tellStopped", 0, 1000, ["gid", "status"])}
        if not all(stopped.get(g) == "complete" for g in done_before + gids):
            failures.append(f"the history lacks entries: {stopped}")
        else:
            print(f"history: {len(stopped)} complete entries, the 2 from before the kill included")
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            daemon.wait(10)
        server.terminate()
        server.wait(10)

    per_file, requests = {}, {}
    with open(server_log) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 4 and fields[3].isdigit():
                name = fields[1].split("?")[0].rsplit("/", 1)[-1]
                per_file[name] = per_file.get(name, 0) + int(fields[3])
                requests[name] = requests.get(name, 0) + 1
    sent = sum(per_file.values())
    twice = {n: b - (HISTORY_SIZE if n in history else SIZE) for n, b in per_file.items()}
    print("fetched twice per file, KiB (requests): "
          + ", ".join(f"{n} {twice[n] / 1024:.0f} ({requests[n]})" for n in sorted(twice) if n not in history))
    wanted = 8 * SIZE + 2 * HISTORY_SIZE
    extra = sent - wanted
    share = 100.0 * extra / (8 * SIZE)
    print(f"server sent {sent / 1048576:.1f} MiB for {wanted / 1048576:.1f} MiB of files: "
          f"{extra / 1048576:.2f} MiB fetched twice ({share:.2f} % of the 8 files)")
    if extra < 0:
        failures.append("the server sent less than the files' bytes")
    cuts = sum(twice.get(n, 0) for n in waiting_names)
    lost_by_daemon = 100.0 * (extra - cuts - queued) / (8 * SIZE)
    print(f"of those, {cuts / 1048576:.2f} MiB were cut short by files that were waiting at the kill "
          f"({', '.join(sorted(waiting_names))}), {queued / 1048576:.2f} MiB were in the kernel's socket queues "
          f"at the kill (written by the server, never read by the daemon); {lost_by_daemon:.2f} % the daemon read "
          f"and lost or asked for twice")
    if lost_by_daemon > 1.0:
        failures.append(f"{lost_by_daemon:.2f} % fetched twice, past what sat in the socket queues, exceeds 1 %")
    held = kernel_buffer_maximum()
    for n in sorted(waiting_names):
        if twice.get(n, 0) > (requests.get(n, 1) - 1) * held:
            failures.append(f"{n}, waiting at the kill, was sent {twice[n] / 1048576:.1f} MiB twice in "
                            f"{requests[n]} requests: more than the kernel's buffers hold at its cuts "
                            f"({held / 1048576:.0f} MiB each)")
    for f in failures:
        print("FAIL " + f)
    print("daemon-kill9: " + ("OK" if not failures else "FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
