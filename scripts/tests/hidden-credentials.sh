#!/usr/bin/env bash
# Secrets on segget's command line are out of the process list (`ps`, /proc/PID/cmdline, which every
# local user can read) while the download uses them: `-u USER:PASSWORD`'s password (also in a pack
# of one-letter options, `-fu USER:PASSWORD`), a URL's
# `user:password@`, an `Authorization` header and inline cookies. Against a Python server that
# answers 401 unless it gets the right credentials and sends its file slowly, so that the running
# process's command line can be read. The build before this check showed every one of them.
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
[ -x "$SEGGET_BIN" ] || { echo "hidden-credentials: $SEGGET_BIN is missing; build first (swift build)" >&2; exit 1; }
WORK="$(mktemp -d /tmp/segget-hidden.XXXXXX)"
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

failures=0
check() {  # check NAME CONDITION-STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1 ${3:-}"; failures=$((failures + 1)); fi
}

head -c $((2 << 20)) /dev/urandom > "$WORK/file"
SHA="$(sha256sum < "$WORK/file" | cut -d' ' -f1)"

cat > "$WORK/server.py" <<'PY'
import base64, http.server, sys, time
body = open(sys.argv[1], "rb").read()
basic = "Basic " + base64.b64encode(b"alice:topsecret-pw").decode()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        if self.path == "/bearer":
            ok = auth == "Bearer topsecret-token" and "sid=topsecret-cookie" in self.headers.get("Cookie", "")
        else:
            ok = auth == basic
        if not ok:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="t"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        # No ranges: one connection, the file in 64 KiB pieces at about 1.3 MB/s.
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for i in range(0, len(body), 65536):
            self.wfile.write(body[i:i + 65536])
            time.sleep(0.05)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$WORK/server.py" "$WORK/file" > "$WORK/port" 2> "$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
PORT="$(cat "$WORK/port")"
[ -n "$PORT" ] || { echo "hidden-credentials: the server did not start" >&2; cat "$WORK/server.err" >&2; exit 1; }

# run NAME EXPECTED-SHOWN ARGS...: downloads with ARGS, reads the command line 0.5 s in, and checks
# that no "topsecret" is in it, that EXPECTED-SHOWN is (the `*`ed form), and that the file came whole.
run() {
    local name="$1" expected="$2"; shift 2
    rm -f "$WORK/out"
    "$SEGGET_BIN" -q -n 1 -o "$WORK/out" "$@" > "$WORK/$name.log" 2>&1 &
    local pid=$!
    sleep 0.5
    local shown
    shown="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"
    local rc=0
    wait "$pid" || rc=$?
    check "$name: downloaded with its credentials (exit $rc)" \
        "$([ "$rc" -eq 0 ] && [ "$(sha256sum < "$WORK/out" | cut -d' ' -f1)" = "$SHA" ]; echo $?)" "$(cat "$WORK/$name.log")"
    check "$name: read while it ran" "$([ -n "$shown" ]; echo $?)"
    check "$name: no secret in the process list" "$(case "$shown" in *topsecret*) echo 1 ;; *) echo 0 ;; esac)" "$shown"
    check "$name: shown as '$expected'" "$(case "$shown" in *"$expected"*) echo 0 ;; *) echo 1 ;; esac)" "$shown"
}

run user "-u alice:************ http://127.0.0.1:$PORT/f" -u alice:topsecret-pw "http://127.0.0.1:$PORT/f"
run user-equals "--user=alice:************ " --user=alice:topsecret-pw "http://127.0.0.1:$PORT/f"
run pack "-fu alice:************ " -fu alice:topsecret-pw "http://127.0.0.1:$PORT/f"
run url "http://alice:************@127.0.0.1:$PORT/f" "http://alice:topsecret-pw@127.0.0.1:$PORT/f"
run header "-H Authorization: ********************** -b ********************" \
    -H "Authorization: Bearer topsecret-token" -b "sid=topsecret-cookie" "http://127.0.0.1:$PORT/bearer"

# Without them the server refuses: the checks above saw the credentials reach it.
rc=0
"$SEGGET_BIN" -q -n 1 -o "$WORK/out2" "http://127.0.0.1:$PORT/f" > "$WORK/none.log" 2>&1 || rc=$?
check "no credentials: refused (exit $rc)" "$([ "$rc" -ne 0 ]; echo $?)" "$(cat "$WORK/none.log")"

[ "$failures" -eq 0 ] && echo "hidden-credentials: all checks passed" || echo "hidden-credentials: $failures failed"
exit $(( failures > 0 ))
