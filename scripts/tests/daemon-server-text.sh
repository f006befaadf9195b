#!/usr/bin/env bash
# Issue 23 against the real daemon: tasks that fail on a server's hostile text (a redirect whose
# Location carries OSC 52 and ESC[2J, a Content-Length with ESC[2J, a 404 with a hostile reason phrase
# and body) leave no raw control character (C0 but newline, DEL, C1, bidi controls) in the daemon's
# log or in tellStatus' errorMessage, `segget ls` included, and the Location shows there escaped.
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SEGGET_TESTSERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"
for b in "$SEGGET_BIN" "$SEGGET_TESTSERVER_BIN"; do
    [ -x "$b" ] || { echo "daemon-server-text: $b is missing; build first (swift build)" >&2; exit 1; }
done
WORK="$(mktemp -d /tmp/segget-daemon-text.XXXXXX)"
SERVER_PID="" DAEMON_PID=""
cleanup() {
    stop_pid "$DAEMON_PID" KILL
    stop_pid "$SERVER_PID"
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "daemon-server-text: FAILED: $*" >&2; exit 1; }

mkdir -p "$WORK/www" "$WORK/dl"
head -c $((1 << 20)) /dev/urandom >"$WORK/www/a.bin"
"$SEGGET_TESTSERVER_BIN" --port 0 --dir "$WORK/www" >"$WORK/server.out" 2>/dev/null &
SERVER_PID=$!
BASE="$(testserver_url "$WORK/server.out" "$SERVER_PID")"
[ -n "$BASE" ] || fail "segget-testserver did not start"

export SEGGET_RPC_PORT="$(free_port)" SEGGET_RPC_SECRET="text-secret"
"$SEGGET_BIN" daemon --rpc-listen-port "$SEGGET_RPC_PORT" --rpc-secret "$SEGGET_RPC_SECRET" --dir "$WORK/dl" \
    --database "$WORK/q.sqlite" 2>"$WORK/daemon.err" &
DAEMON_PID=$!
for _ in $(seq 600); do grep -q "serving" "$WORK/daemon.err" 2>/dev/null && break; sleep 0.05; done
grep -q "serving" "$WORK/daemon.err" || fail "the daemon did not start: $(cat "$WORK/daemon.err")"

python3 - "$SEGGET_RPC_PORT" "$SEGGET_RPC_SECRET" "$BASE" <<'PY' || fail "see above"
import json, sys, time, urllib.error, urllib.parse, urllib.request
port, secret, base = sys.argv[1], sys.argv[2], sys.argv[3]
ESC, BEL = "\x1b", "\x07"
osc52 = ESC + "]52;c;aGVsbG8=" + BEL + ESC + "[2J"
q = lambda s: urllib.parse.quote(s, safe="")

def call(method, *params):
    body = json.dumps({"jsonrpc": "2.0", "id": "1", "method": method, "params": ["token:" + secret, *params]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/jsonrpc", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            answer = json.load(r)
    except urllib.error.HTTPError as e:  # a failed call comes with 400, as from aria2c
        answer = json.load(e)
    if "error" in answer:
        raise SystemExit(f"{method}: {answer['error']}")
    return answer["result"]

def raw_controls(text):
    return [hex(ord(c)) for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0
            or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 or ord(c) in (0x61C, 0x200E, 0x200F, 0x2028, 0x2029)]

cases = {
    "location": (f"{base}/redirect/a.bin?to={q(base + '/x' + osc52)}&body={q(osc52)}", "\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J"),
    "content-length": (f"{base}/badlength/a.bin?value={q('1' + ESC + '[2J')}", "\\x1b[2J"),
    "reason and body": (f"{base}/status/a.bin?code=404&reason={q('Gone' + osc52)}&body={q(osc52 + chr(0x202E))}", None),
}
gids = {name: call("aria2.addUri", [url], {"max-tries": "1", "split": "2"}) for name, (url, _) in cases.items()}
deadline = time.time() + 30
for name, gid in gids.items():
    while True:
        st = call("aria2.tellStatus", gid, ["status", "errorMessage"])
        if st["status"] in ("error", "complete") or time.time() > deadline:
            break
        time.sleep(0.1)
    message = st.get("errorMessage", "")
    if st["status"] != "error":
        raise SystemExit(f"{name}: status {st['status']}, expected error")
    if raw_controls(message):
        raise SystemExit(f"{name}: raw {raw_controls(message)} in errorMessage {message!r}")
    shown = cases[name][1]
    if shown and shown not in message:
        raise SystemExit(f"{name}: errorMessage {message!r} does not show {shown!r}")
    print(f"daemon-server-text: {name}: errorMessage {message!r}")
for t in call("aria2.tellStopped", 0, 100):
    if raw_controls(json.dumps(t, ensure_ascii=False)):
        raise SystemExit(f"tellStopped holds raw {raw_controls(json.dumps(t, ensure_ascii=False))}")
PY

"$SEGGET_BIN" ls >"$WORK/ls.out" 2>&1 || fail "segget ls: $(cat "$WORK/ls.out")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=""
python3 - "$WORK/daemon.err" "$WORK/ls.out" <<'PY' || fail "see above"
import re, sys
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    # C0 but newline, DEL, C1 in UTF-8 (C2 80-9F), bidi overrides and isolates in UTF-8.
    bad = re.findall(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]", data)
    if bad:
        raise SystemExit(f"{path}: raw {bad[:5]} in {data[-600:]!r}")
log = open(sys.argv[1], encoding="utf-8").read()
if log.count(" failed: ") < 3:
    raise SystemExit(f"the daemon's log names {log.count(' failed: ')} failed tasks, expected 3:\n{log}")
if "\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J" not in log:
    raise SystemExit(f"the daemon's log does not show the Location escaped:\n{log}")
PY
echo "daemon-server-text: OK: no raw control characters in the daemon's log, errorMessage or segget ls; the Location shows escaped"
