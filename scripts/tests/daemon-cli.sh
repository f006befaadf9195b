#!/usr/bin/env bash
# segget's own client verbs against a running `segget daemon` started as a user starts it (no secret
# given: the daemon makes its token file, the verbs read it): add (with -o, -d, -H, --paused),
# ls (table and --json), pause, resume, rm, the exit code when no daemon runs, exit 2 on a wrong
# secret, --rpc-listen-all refused with --rpc-insecure-no-secret, and a clean stop on SIGTERM. Files
# come from segget-testserver; every finished file is compared with its source.
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SEGGET_TESTSERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"
for b in "$SEGGET_BIN" "$SEGGET_TESTSERVER_BIN"; do
    [ -x "$b" ] || { echo "daemon-cli: $b is missing; build first (swift build)" >&2; exit 1; }
done
WORK="$(mktemp -d /tmp/segget-daemon-cli.XXXXXX)"
SERVER_PID="" DAEMON_PID=""
cleanup() {
    stop_pid "$DAEMON_PID" KILL
    stop_pid "$SERVER_PID"
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "daemon-cli: FAILED: $*" >&2; tail -5 "$WORK/daemon.err" >&2 2>/dev/null; [ -n "${KEEP:-}" ] && cp "$WORK/daemon.err" /tmp/daemon-cli.err; exit 1; }

mkdir -p "$WORK/www" "$WORK/dl"
head -c $((4 << 20)) /dev/urandom >"$WORK/www/a.bin"
head -c $((8 << 20)) /dev/urandom >"$WORK/www/slow.bin"
"$SEGGET_TESTSERVER_BIN" --port 0 --dir "$WORK/www" >"$WORK/server.out" 2>/dev/null &
SERVER_PID=$!
BASE="$(testserver_url "$WORK/server.out" "$SERVER_PID")"
[ -n "$BASE" ] || fail "segget-testserver did not start"

# The token file goes to $WORK/state, not the user's.
unset SEGGET_RPC_SECRET
export SEGGET_RPC_PORT="$(free_port)" XDG_STATE_HOME="$WORK/state"
set +e
"$SEGGET_BIN" ls >/dev/null 2>"$WORK/ls-none.err"
rc=$?
set -e
[ "$rc" -eq 3 ] || fail "ls without a daemon exited $rc, expected 3"
grep -q "Cannot reach the segget daemon" "$WORK/ls-none.err" || fail "ls without a daemon said: $(cat "$WORK/ls-none.err")"

set +e
"$SEGGET_BIN" daemon --rpc-listen-all --rpc-insecure-no-secret --rpc-listen-port "$SEGGET_RPC_PORT" --dir "$WORK/dl" \
    --database "$WORK/x.sqlite" 2>"$WORK/all.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "loopback only" "$WORK/all.err" || fail "--rpc-listen-all without a secret: exit $rc, $(cat "$WORK/all.err")"

"$SEGGET_BIN" daemon --rpc-listen-port "$SEGGET_RPC_PORT" --dir "$WORK/dl" \
    --database "$WORK/q.sqlite" 2>"$WORK/daemon.err" &
DAEMON_PID=$!
for _ in $(seq 600); do grep -q "serving" "$WORK/daemon.err" 2>/dev/null && break; sleep 0.05; done
[ -s "$WORK/state/segget/rpc-secret" ] || fail "the daemon made no token file in \$XDG_STATE_HOME/segget"

set +e
SEGGET_RPC_SECRET=wrong "$SEGGET_BIN" ls >/dev/null 2>"$WORK/ls-bad.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "Unauthorized" "$WORK/ls-bad.err" || fail "ls with a wrong secret: exit $rc, $(cat "$WORK/ls-bad.err")"

g1="$("$SEGGET_BIN" add "$BASE/a.bin" -o renamed.bin -H "X-Test: 1")"
g2="$("$SEGGET_BIN" add "$BASE/a.bin" -d "$WORK/dl/sub" -n 2)"
g3="$("$SEGGET_BIN" add "$BASE/slow.bin?rate=512k" --paused)"
for g in "$g1" "$g2" "$g3"; do [[ "$g" =~ ^[0-9a-f]{16}$ ]] || fail "add printed '$g', not a GID"; done

"$SEGGET_BIN" ls >"$WORK/ls.txt"
for g in "$g1" "$g2" "$g3"; do grep -q "^$g " "$WORK/ls.txt" || fail "ls does not list $g: $(cat "$WORK/ls.txt")"; done
grep -q "^$g3  paused" "$WORK/ls.txt" || fail "ls does not show $g3 paused: $(cat "$WORK/ls.txt")"

status_of() { "$SEGGET_BIN" ls --json | python3 -c "import json,sys; print({t['gid']: t['status'] for t in json.load(sys.stdin)}.get('$1', 'gone'))"; }
wait_status() {
    for _ in $(seq 300); do [ "$(status_of "$1")" = "$2" ] && return 0; sleep 0.1; done
    fail "$1 did not reach $2 (is $(status_of "$1"))"
}
wait_status "$g1" complete
wait_status "$g2" complete
cmp -s "$WORK/dl/renamed.bin" "$WORK/www/a.bin" || fail "renamed.bin differs from the source"
cmp -s "$WORK/dl/sub/a.bin" "$WORK/www/a.bin" || fail "sub/a.bin differs from the source"

"$SEGGET_BIN" resume "$g3"
wait_status "$g3" active
"$SEGGET_BIN" pause "$g3"
wait_status "$g3" paused
# Several GIDs, one unknown: the others are still resumed, and the error says so (it stopped at the
# unknown one, silent about the first and never trying the third).
g4="$("$SEGGET_BIN" add "$BASE/slow.bin?rate=512k&n=4" --paused)"
set +e
"$SEGGET_BIN" resume "$g3" deadbeefdeadbeef "$g4" 2>"$WORK/resume-some.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "Resumed 2 of 3; 1 failed" "$WORK/resume-some.err" || fail "resume with an unknown GID: exit $rc, $(cat "$WORK/resume-some.err")"
# An unknown GID is said as such, without the daemon's method or a pointer to --help (which has
# nothing on it); 'rm all' is refused, not looked up as a GID.
set +e
"$SEGGET_BIN" rm deadbeefdeadbeef 2>"$WORK/rm-unknown.err"
rc=$?
"$SEGGET_BIN" rm all 2>"$WORK/rm-all.err"
rc_all=$?
set -e
[ "$rc" -eq 2 ] && grep -q "has no task with GID deadbeefdeadbeef; 'segget ls' lists" "$WORK/rm-unknown.err" \
    && ! grep -q -e "tellStatus" -e "--help" "$WORK/rm-unknown.err" || fail "rm of an unknown GID: exit $rc, $(cat "$WORK/rm-unknown.err")"
[ "$rc_all" -eq 2 ] && grep -q "rm takes GIDs, not 'all'" "$WORK/rm-all.err" || fail "rm all: exit $rc_all, $(cat "$WORK/rm-all.err")"
wait_status "$g3" active
wait_status "$g4" active
"$SEGGET_BIN" rm "$g4"
# aria2's per-task tries and time limits given to add reach the task, as getOption answers them.
g5="$("$SEGGET_BIN" add "$BASE/a.bin?tries" --paused --max-tries 2 --retry-wait 0 --stall-timeout 3 --connect-timeout 4)"
opts="$(python3 - "$SEGGET_RPC_PORT" "$(cat "$WORK/state/segget/rpc-secret")" "$g5" <<'PY'
import json, sys, urllib.request
port, token, gid = sys.argv[1:]
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "aria2.getOption", "params": ["token:" + token.strip(), gid]}).encode()
r = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/jsonrpc", body))["result"]
print(" ".join(f"{k}={r[k]}" for k in ("max-tries", "retry-wait", "timeout", "connect-timeout")))
PY
)"
[ "$opts" = "max-tries=2 retry-wait=0 timeout=3 connect-timeout=4" ] || fail "segget add's retry options reached the task as: $opts"
"$SEGGET_BIN" rm "$g5"
# A list with a URL the daemon refuses adds none of it.
set +e
"$SEGGET_BIN" add "$BASE/a.bin?never" ftp://example.invalid/x 2>"$WORK/add-bad.err" >"$WORK/add-bad.out"
rc=$?
set -e
[ "$rc" -eq 2 ] && [ ! -s "$WORK/add-bad.out" ] && grep -q "nothing was added" "$WORK/add-bad.err" || fail "add with an ftp URL: exit $rc, $(cat "$WORK/add-bad.out" "$WORK/add-bad.err")"
"$SEGGET_BIN" ls --json | grep -q "a.bin?never" && fail "add with an ftp URL added the http one"
"$SEGGET_BIN" rm "$g3"
wait_status "$g3" removed
"$SEGGET_BIN" rm "$g3"
[ "$(status_of "$g3")" = gone ] || fail "rm of a removed task did not drop it from the history"
"$SEGGET_BIN" rm "$g1"
[ "$(status_of "$g1")" = gone ] || fail "rm of a finished task did not drop it from the history"

g6="$("$SEGGET_BIN" add "$BASE/a.bin?kept" -o kept.bin --paused)"

kill -TERM "$DAEMON_PID"
set +e
wait "$DAEMON_PID"
rc=$?
set -e
DAEMON_PID=""
[ "$rc" -eq 0 ] || fail "the daemon exited $rc on SIGTERM"
grep -q "stopped" "$WORK/daemon.err" || fail "the daemon did not report a clean stop"

# A task a newer segget stored with an option this one does not know (its name with an escape
# character, as a damaged row could have): the daemon starts, names it on stderr escaped, does not
# list it, runs the rest, and leaves its row as it was.
row() {
    python3 - "$WORK/q.sqlite" <<'PY'
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT options, status, ord, directory FROM tasks WHERE urls LIKE '%kept%'").fetchall())
PY
}
python3 - "$WORK/q.sqlite" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("UPDATE tasks SET options = ? WHERE urls LIKE '%kept%'", (r'{"v":1,"tos\u001b[31m":"8"}',))
c.commit()
PY
before="$(row)"
[[ "$before" == *tos* ]] || fail "the row was not changed for the check: $before"
"$SEGGET_BIN" daemon --rpc-listen-port "$SEGGET_RPC_PORT" --dir "$WORK/dl" \
    --database "$WORK/q.sqlite" 2>"$WORK/daemon.err" &
DAEMON_PID=$!
for _ in $(seq 600); do grep -q "serving" "$WORK/daemon.err" 2>/dev/null && break; sleep 0.05; done
grep -q "serving" "$WORK/daemon.err" || fail "the daemon did not start beside a task of a newer segget"
grep -qF "task $g6 is not run or listed: its option 'tos\\x1b[31m' cannot be read" "$WORK/daemon.err" \
    || fail "the daemon did not name the unreadable task, escaped: $(cat -v "$WORK/daemon.err")"
grep -q $'\x1b' "$WORK/daemon.err" && fail "the daemon wrote the row's escape character raw"
[ "$(status_of "$g6")" = gone ] || fail "the unreadable task is listed"
[ "$(status_of "$g2")" = complete ] || fail "the other tasks did not come back beside the unreadable one"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || true
DAEMON_PID=""
[ "$(row)" = "$before" ] || fail "the unreadable task's row changed: $(row), was $before"
echo "daemon-cli: OK: with the daemon's own token file, no secret given: add (-o, -d, -H, -n, --paused, --max-tries and the time limits; a list with a bad URL adds nothing), ls (table, --json), pause, resume (several GIDs, one unknown), rm, exit 3 without a daemon, exit 2 on a wrong secret, --rpc-listen-all refused with --rpc-insecure-no-secret, clean SIGTERM, a task of a newer segget left aside untouched and named escaped"
