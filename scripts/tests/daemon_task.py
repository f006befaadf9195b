"""Adds one task to a running `segget daemon` and waits for it to end: prints its tellStatus
(status, errorMessage) as JSON. With --global KEY=VALUE, first checks that getGlobalOption answers
VALUE for KEY (exit 1 if not). Used by the scripts that start a daemon with options of its own
(ca-certificate.sh, https-proxy.sh).

Usage: daemon_task.py PORT SECRET URL [--option KEY=VALUE ...] [--global KEY=VALUE ...]
"""

import argparse
import json
import sys
import time
import urllib.error
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port")
    ap.add_argument("secret")
    ap.add_argument("url")
    ap.add_argument("--option", action="append", default=[])
    ap.add_argument("--global", dest="globals", action="append", default=[])
    a = ap.parse_args()

    def call(method, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": [f"token:{a.secret}", *params]}).encode()
        for _ in range(100):
            try:
                with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{a.port}/jsonrpc", body), timeout=5) as r:
                    return json.loads(r.read())["result"]
            except (ConnectionError, urllib.error.URLError):
                time.sleep(0.1)
        raise SystemExit("the daemon did not answer")

    answered = call("aria2.getGlobalOption") if a.globals else {}
    for pair in a.globals:
        key, value = pair.split("=", 1)
        if answered.get(key) != value:
            raise SystemExit(f"getGlobalOption answered {key}={answered.get(key)!r}, expected {value!r}")
    options = dict(pair.split("=", 1) for pair in a.option)
    gid = call("aria2.addUri", [a.url], options)
    for _ in range(600):
        st = call("aria2.tellStatus", gid, ["status", "errorMessage"])
        if st["status"] in ("complete", "error", "removed"):
            break
        time.sleep(0.1)
    print(json.dumps(st))


if __name__ == "__main__":
    sys.exit(main())
