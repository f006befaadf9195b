"""webui-aria2 (the built app from shared/clients/) in headless Chromium against `segget daemon` started
with no secret (it makes its token file):

- opened with `index.html?host=127.0.0.1&port=PORT&token=TOKEN` (the link `segget token` prints), it
  connects over WebSocket, lists a paused task added over RPC, and its resume button starts the
  download, which finishes byte-identical;
- opened with a wrong token it shows its "Authentication failed" alert and lists nothing;
- the daemon logs the burst of wrong tokens once.

The app is served from another loopback port, so its calls are cross-origin, as from a hosted page.
Usage: daemon_webui.py --segget BIN --webui DIR --work DIR
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

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(("ok   " if ok else "FAIL ") + name + (f" ({detail})" if detail and not ok else ""), flush=True)
    return ok


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(predicate, timeout, step=0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if predicate():
                return True
        except Exception:
            pass
        time.sleep(step)
    return False


def wait_listening(port, proc):
    return wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=0.2).close() is None
                    if proc.poll() is None else False, 20, 0.05)


def call(port, token, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": [f"token:{token}"] + params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/jsonrpc", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        reply = json.load(r)
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply["result"]


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--disable-extensions", "--window-size=1280,1000"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def main():
    ap = argparse.ArgumentParser()
    for name in ("segget", "webui", "work"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    work = a.work
    root = os.path.join(work, "root")
    site = os.path.join(work, "site")
    os.makedirs(root)
    os.makedirs(site)
    os.symlink(os.path.abspath(a.webui), os.path.join(site, "webui"))
    with open(os.path.join(site, "file.bin"), "wb") as f:
        f.write(os.urandom(3 << 20))

    port, site_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGGET_RPC")}
    env.update(XDG_STATE_HOME=os.path.join(work, "state"), HOME=work)
    log_path = os.path.join(work, "daemon.log")
    daemon = subprocess.Popen([a.segget, "daemon", "--rpc-listen-port", str(port), "--dir", root,
                               "--database", os.path.join(work, "q.sqlite")],
                              env=env, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", site,
                               str(site_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    driver = None
    try:
        if not (check("daemon listens", wait_listening(port, daemon)) and check("site served", wait_listening(site_port, server))):
            return 1
        token = open(os.path.join(work, "state", "segget", "rpc-secret")).read().strip()
        gid = call(port, token, "aria2.addUri", [[f"http://127.0.0.1:{site_port}/file.bin"], {"pause": "true"}])
        shown = subprocess.run([a.segget, "token", "--rpc-port", str(port)], env=env, capture_output=True, text=True)
        link = next((line.split("open ", 1)[1] for line in shown.stdout.splitlines() if line.startswith("webui-aria2:")), "")
        check("segget token prints the webui-aria2 link with the token", link == f"index.html?host=127.0.0.1&port={port}&token={token}",
              shown.stdout)

        driver = browser()
        driver.get(f"http://127.0.0.1:{site_port}/webui/{link}")
        row = f'div.download[data-gid="{gid}"]'
        listed = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, row), 30)
        check("webui-aria2 with the token lists the paused task", listed, driver.page_source[:300])
        if listed:
            resume = driver.find_elements(By.CSS_SELECTOR, row + ' button[ng-click="resume(download)"]')
            check("its resume button is there", len(resume) == 1)
            if resume:
                # The app's connection alert may lie over the button; the click's handler is what matters.
                driver.execute_script("arguments[0].click();", resume[0])
                done = wait_for(lambda: call(port, token, "aria2.tellStatus", [gid, ["status"]])["status"] == "complete", 30)
                check("resume from webui-aria2 runs the download to completion", done,
                      call(port, token, "aria2.tellStatus", [gid, ["status", "errorMessage"]]))
                path = os.path.join(root, "file.bin")
                check("the file is byte-identical", os.path.exists(path) and filecmp.cmp(path, os.path.join(site, "file.bin"), shallow=False))

        driver.get(f"http://127.0.0.1:{site_port}/webui/index.html?host=127.0.0.1&port={port}&token=wrong-token")
        alert = wait_for(lambda: "Authentication failed" in driver.page_source, 30)
        check("webui-aria2 with a wrong token shows its Authentication failed alert", alert)
        check("... and lists no task", not driver.find_elements(By.CSS_SELECTOR, "div.download[data-gid]"))
        with open(log_path, errors="replace") as f:
            log = f.read()
        check("the daemon logged the wrong tokens once", log.count("carried a wrong or missing RPC token") == 1, log[-500:])
    finally:
        if driver is not None:
            driver.quit()
        for p in (daemon, server):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
    failed = [r for r in results if not r[1]]
    print(f"daemon-webui: {len(results) - len(failed)}/{len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
