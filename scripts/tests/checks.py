"""What the real-daemon test scripts share: named checks, a summary line, a free port on loopback.

Import it from a script in this folder (`from checks import check, free_port, summary`); Python puts a
script's own folder on its path."""
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
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


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
