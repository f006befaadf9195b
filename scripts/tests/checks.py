"""What the real-daemon test scripts share: named checks, a summary line, a free port on loopback.

Import it from a script in this folder (`from checks import check, free_port, summary`); Python puts a
script's own folder on its path."""
import random
import socket

results = []


def check(name, ok, detail=""):
    """Records and prints one named check; returns whether it passed."""
    results.append((name, bool(ok)))
    print(("ok   " if ok else "FAIL ") + name + (f" ({detail})" if detail and not ok else ""), flush=True)
    return ok


def summary(script):
    """Prints `SCRIPT: passed/all checks passed` and returns the exit status (1 when any failed)."""
    failed = [r for r in results if not r[1]]
    print(f"{script}: {len(results) - len(failed)}/{len(results)} checks passed")
    return 1 if failed else 0


def free_port():
    """A TCP port on 127.0.0.1 that nothing uses now, taken below the kernel's range of ephemeral ports
    when there is room: a port from that range (what binding to port 0 gives) can be handed to another
    socket between this call and the daemon's bind (a test server's, or an outgoing connection's local
    port, even one of a download to that very port), and the daemon would then fail to start."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    if low > 12000:
        for _ in range(200):
            port = random.randrange(10000, low)
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
            finally:
                s.close()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


if __name__ == "__main__":
    print(free_port())


def recv_all(s):
    """Everything a socket sends until it closes (or fails)."""
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data


def rpc_reply(request, timeout):
    """The JSON of a JSON-RPC reply over HTTP, a failed call's too: segget's daemon, as aria2c,
    sends a failed call with HTTP 400 (500 for a body that is not JSON), which urlopen raises."""
    import json
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        if e.code in (400, 500):
            return json.load(e)
        raise
