"""webui-aria2 (the built app from shared/clients/) in headless Chromium against `segget daemon` started
with no secret (it makes its token file):

- opened with `index.html?host=127.0.0.1&port=PORT&token=TOKEN` (the link `segget token` prints), it
  connects over WebSocket and lists a paused task added over RPC (speed-capped, so that it is seen
  running); its resume button starts the download; expanded, the row paints a partial piece map from
  `bitfield` and reads "Connections" with a count and no "(Seeders)"; its pause button pauses it, resume
  again runs it to completion, byte-identical;
- its remove button removes a second task, which then reports aria2's errorCode 31;
- its Add → By Metalinks dialog (shown because getVersion lists Metalink) sends a chosen .meta4 through
  aria2.addMetalink, and the task it makes downloads the file, byte-identical;
- its Global Settings dialog shows a value for every option segget maps and no empty dropdown, and the
  user agent is segget's;
- opened with a wrong token it shows its "Authentication failed" alert and lists nothing;
- the daemon logs the burst of wrong tokens once.

Screenshots of each step go to --shots (artefacts; their paths are printed).
The app is served from another loopback port, so its calls are cross-origin, as from a hosted page.
Usage: daemon_webui.py --segget BIN --webui DIR --work DIR --shots DIR
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

from checks import check, free_port, rpc_reply, summary


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
    reply = rpc_reply(req, 10)
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply["result"]


# The options Aria2OptionTable maps onto segget settings (the rest have fixed values).
MAPPED = ["dir", "split", "max-connection-per-server", "max-concurrent-downloads", "max-overall-download-limit",
          "max-download-limit", "user-agent", "max-tries", "retry-wait", "timeout", "connect-timeout",
          "check-certificate", "piece-length", "min-split-size", "auto-save-interval", "rpc-listen-port",
          "rpc-listen-all", "rpc-max-request-size"]

# Each option row of the open settings dialog: its name, its visible control and the value shown.
SETTINGS_ROWS_JS = """
return Array.from(document.querySelectorAll('.modal .form-group')).map(function (g) {
  var label = g.querySelector('label.control-label');
  var sel = g.querySelector('select'), inp = g.querySelector('input[type=text]'), ta = g.querySelector('textarea');
  var shown = function (e) { return e && !e.classList.contains('ng-hide'); };
  var value = null, control = null;
  if (shown(sel)) {
    control = 'select';
    var o = sel.selectedIndex >= 0 ? sel.options[sel.selectedIndex] : null;
    value = o && o.value !== '?' && o.value !== '' ? o.text : '';
  } else if (shown(inp)) { control = 'input'; value = inp.value; }
  else if (shown(ta)) { control = 'textarea'; value = ta.value; }
  return [label ? label.textContent.trim() : '', control, value];
});
"""

# Pixels of the row's piece map canvas that are painted, and all of them.
PIECE_MAP_JS = """
var c = document.querySelector(arguments[0] + ' canvas.chunk-canvas');
if (!c || !c.width || !c.height) return null;
var d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, n = 0;
for (var i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
return [n, c.width * c.height];
"""


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--disable-extensions", "--window-size=1280,1000"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def main():
    ap = argparse.ArgumentParser()
    for name in ("segget", "webui", "work", "shots"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    work = a.work
    root = os.path.join(work, "root")
    site = os.path.join(work, "site")
    os.makedirs(root)
    os.makedirs(site)
    os.makedirs(a.shots, exist_ok=True)
    os.symlink(os.path.abspath(a.webui), os.path.join(site, "webui"))
    with open(os.path.join(site, "file.bin"), "wb") as f:
        f.write(os.urandom(12 << 20))
    with open(os.path.join(site, "other.bin"), "wb") as f:
        f.write(os.urandom(1 << 20))
    with open(os.path.join(site, "meta.bin"), "wb") as f:
        f.write(os.urandom(3 << 20))

    port = free_port()
    site_port = free_port()
    while site_port == port:
        site_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGGET_RPC")}
    env.update(XDG_STATE_HOME=os.path.join(work, "state"), HOME=work)
    log_path = os.path.join(work, "daemon.log")
    daemon = subprocess.Popen([a.segget, "daemon", "--rpc-listen-port", str(port), "--dir", root,
                               "--database", os.path.join(work, "q.sqlite")],
                              env=env, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", site,
                               str(site_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    driver = None
    shots = []

    def shot(name):
        path = os.path.join(a.shots, name + ".png")
        if driver is not None and driver.save_screenshot(path):
            shots.append(path)

    def click(selector):
        found = driver.find_elements(By.CSS_SELECTOR, selector)
        if found:
            # The app's connection alert may lie over a button; the click's handler is what matters.
            driver.execute_script("arguments[0].click();", found[0])
        return bool(found)

    def status(gid, keys=("status",)):
        return call(port, token, "aria2.tellStatus", [gid, list(keys)])

    try:
        if not (check("daemon listens", wait_listening(port, daemon)) and check("site served", wait_listening(site_port, server))):
            return 1
        token = open(os.path.join(work, "state", "segget", "rpc-secret")).read().strip()
        gid = call(port, token, "aria2.addUri", [[f"http://127.0.0.1:{site_port}/file.bin"],
                                                 {"pause": "true", "max-download-limit": "2M"}])
        shown = subprocess.run([a.segget, "token", "--rpc-port", str(port)], env=env, capture_output=True, text=True)
        link = next((line.split("open ", 1)[1] for line in shown.stdout.splitlines() if line.startswith("webui-aria2:")), "")
        check("segget token prints the webui-aria2 link with the token", link == f"index.html?host=127.0.0.1&port={port}&token={token}",
              shown.stdout)

        driver = browser()
        driver.get(f"http://127.0.0.1:{site_port}/webui/{link}")
        # Remove asks "Remove … and associated meta-data?"; answer yes.
        driver.execute_script("window.confirm = function () { return true; };")
        row = f'div.download[data-gid="{gid}"]'
        listed = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, row), 30)
        check("webui-aria2 with the token lists the paused task", listed, driver.page_source[:300])
        shot("1-added-paused")
        if listed:
            check("its resume button is there", len(driver.find_elements(By.CSS_SELECTOR, row + ' button[ng-click="resume(download)"]')) == 1)
            click(row + ' button[ng-click="resume(download)"]')
            running = wait_for(lambda: (s := status(gid, ("status", "completedLength")))["status"] == "active"
                               and int(s["completedLength"]) >= 2 << 20, 30)
            check("resume from webui-aria2 starts the download", running, status(gid))
            # A click on the row (not on its buttons) expands it: piece map, connections, graph.
            driver.execute_script("arguments[0].click();", driver.find_element(By.CSS_SELECTOR, row))
            painted = wait_for(lambda: (p := driver.execute_script(PIECE_MAP_JS, row)) and 0 < p[0] < p[1], 15)
            check("the expanded row paints a partial piece map from bitfield", painted,
                  f"{driver.execute_script(PIECE_MAP_JS, row)}, bitfield {status(gid, ('bitfield', 'numPieces'))}")
            label = driver.find_elements(By.CSS_SELECTOR, row + " span.download-connections")
            text = label[0].text.strip() if label else ""
            title = label[0].find_element(By.XPATH, "..").get_attribute("title") if label else ""
            check("it reads Connections with a count and no (Seeders)", text.isdigit() and int(text) >= 1
                  and title == "Connections", f"text {text!r}, title {title!r}")
            shot("2-active-piece-map")

            click(row + ' button[ng-click="pause(download)"]')
            check("its pause button pauses the download", wait_for(lambda: status(gid)["status"] == "paused", 20), status(gid))
            wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, row + ' button[ng-click="resume(download)"]'), 10)
            shot("3-paused")
            click(row + ' button[ng-click="resume(download)"]')
            done = wait_for(lambda: status(gid)["status"] == "complete", 60)
            check("resume from webui-aria2 runs the download to completion", done, status(gid, ("status", "errorMessage")))
            path = os.path.join(root, "file.bin")
            check("the file is byte-identical", os.path.exists(path) and filecmp.cmp(path, os.path.join(site, "file.bin"), shallow=False))
            wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, row + ' button[ng-click="restart(download)"]'), 10)
            shot("4-complete")

        other = call(port, token, "aria2.addUri", [[f"http://127.0.0.1:{site_port}/other.bin"], {"pause": "true"}])
        other_row = f'div.download[data-gid="{other}"]'
        if check("a second task is listed", wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, other_row), 30)):
            click(other_row + ' button[ng-click="remove(download)"]')
            removed = wait_for(lambda: status(other)["status"] == "removed", 20)
            check("its remove button removes it, with aria2's errorCode 31", removed
                  and status(other, ("errorCode",))["errorCode"] == "31", status(other, ("status", "errorCode")))
            time.sleep(1.5)
            shot("5-removed")

        # Add → By Metalinks: webui-aria2 shows it when getVersion lists the Metalink feature, reads the
        # chosen .meta4 as base64 and calls aria2.addMetalink; the task it makes downloads the file.
        meta = os.path.join(work, "meta.meta4")
        maker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib", "make_meta4.py")
        with open(meta, "w") as f:
            subprocess.run([sys.executable, maker, os.path.join(site, "meta.bin"), f"http://127.0.0.1:{site_port}/meta.bin"],
                           stdout=f, check=True)
        before = {d["gid"] for d in call(port, token, "aria2.tellStopped", [0, 100, ["gid"]])
                  + call(port, token, "aria2.tellActive", [["gid"]]) + call(port, token, "aria2.tellWaiting", [0, 100, ["gid"]])}
        menu = driver.find_elements(By.CSS_SELECTOR, 'a[ng-click="addMetalinks()"]')
        visible = bool(menu) and driver.execute_script(
            "return !arguments[0].closest('li').classList.contains('ng-hide');", menu[0])
        check("webui-aria2 offers Add by Metalinks", visible)
        click('a[ng-click="addMetalinks()"]')
        if wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, ".modal input[type=file]"), 10):
            field = driver.find_element(By.CSS_SELECTOR, ".modal input[type=file]")
            driver.execute_script("arguments[0].style.display='block'; arguments[0].style.visibility='visible';"
                                  "arguments[0].style.position='static'; arguments[0].style.clip='auto';", field)
            field.send_keys(meta)
            shot("5b-add-metalink")
            click(".modal .modal-footer button.btn-primary")

        def metalink_task():
            for d in call(port, token, "aria2.tellStopped", [0, 100, ["gid", "status", "files"]]):
                if d["gid"] not in before and d["status"] == "complete":
                    return d
            return None

        done = wait_for(metalink_task, 30)
        added = os.path.join(root, "meta.bin")
        check("its Start calls addMetalink and the task downloads the file, byte-identical", done and os.path.exists(added)
              and filecmp.cmp(added, os.path.join(site, "meta.bin"), shallow=False),
              json.dumps(call(port, token, "aria2.tellStopped", [0, 100, ["gid", "status", "errorMessage"]]))[:300])
        time.sleep(1.0)
        shot("5c-metalink-complete")

        click('a[ng-click="changeGSettings()"]')

        def settings_shown():
            # The dialog fills its values from getGlobalOption after it opens: wait for them (a loaded
            # machine takes longer than a fixed half second), not only for the rows.
            shown = {name: value for name, _, value in driver.execute_script(SETTINGS_ROWS_JS)}
            return len(shown) > 100 and all(shown.get(m) for m in MAPPED)

        wait_for(settings_shown, 20)
        rows = driver.execute_script(SETTINGS_ROWS_JS)
        check("the Global Settings dialog opens with aria2's options", len(rows) > 100, len(rows))
        values = {name: (control, value) for name, control, value in rows}
        blank = [m for m in MAPPED if not values.get(m, (None, ""))[1]]
        check("every option segget maps shows a value", not blank, blank)
        # Options aria2 answers only once set (enable-async-dns6, deprecated, has no default) stay blank
        # against aria2c as well; every option the daemon answers must fill its dropdown.
        answered = call(port, token, "aria2.getGlobalOption", [])
        empty_selects = [name for name, control, value in rows if control == "select" and not value]
        check("no dropdown of an answered option is empty", not [n for n in empty_selects if n in answered],
              empty_selects)
        print(f"     (left blank, as by aria2c: {', '.join(n for n in empty_selects if n not in answered) or 'none'})")
        ua = values.get("user-agent", (None, ""))[1]
        check("the user agent is segget's", ua.startswith("segget/"), ua)
        shot("6-global-settings")
        box = driver.find_elements(By.CSS_SELECTOR, ".modal input[ng-model=propFilter]")
        if box:
            box[0].send_keys("connect")
            time.sleep(0.5)
            shot("6b-global-settings-connections")
        driver.find_elements(By.CSS_SELECTOR, ".modal button.close") and click(".modal button.close")

        driver.get(f"http://127.0.0.1:{site_port}/webui/index.html?host=127.0.0.1&port={port}&token=wrong-token")
        alert = wait_for(lambda: "Authentication failed" in driver.page_source, 30)
        check("webui-aria2 with a wrong token shows its Authentication failed alert", alert)
        shot("7-wrong-token")
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
    for path in shots:
        print(f"artefact: {path}")
    return summary("daemon-webui")


if __name__ == "__main__":
    sys.exit(main())
