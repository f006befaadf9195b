#!/usr/bin/env bash
# `segget -o -` (issue 25): the file on standard output, in order, through a bounded reorder window.
# Against segget-testserver on loopback: byte-identical under even, trickling and range-less servers;
# a reader held to 16 MiB/s keeps the window (and RSS) bounded and no connection re-dialled; a
# checksum mismatch, a server failing mid-stream and a reader that goes away (EPIPE) each end non-zero
# with a message; --stream-from continues a stream; `| tar x` of a real tar file; a terminal refused.
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"
for b in "$SEGGET_BIN" "$SERVER_BIN"; do
    [ -x "$b" ] || { echo "stream: $b is missing; build first (swift build)" >&2; exit 1; }
done
WORK="$(mktemp -d /tmp/segget-stream.XXXXXX)"
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

failures=0
check() {  # check NAME CONDITION-STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1 ${3:-}"; failures=$((failures + 1)); fi
}

mkdir -p "$WORK/www"
head -c $((128 << 20)) /dev/urandom > "$WORK/www/f128"
head -c $(( (24 << 20) + 4321 )) /dev/urandom > "$WORK/www/f24"
# A real tar file: segget's own sources and docs, as they are.
tar cf "$WORK/www/tree.tar" -C "$ROOT" Sources docs
SHA128="$(sha256sum < "$WORK/www/f128" | cut -d' ' -f1)"
SHA24="$(sha256sum < "$WORK/www/f24" | cut -d' ' -f1)"

"$SERVER_BIN" --port 0 --dir "$WORK/www" --log "$WORK/requests.log" > "$WORK/server.out" 2> "$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 300); do grep -q listening "$WORK/server.out" 2>/dev/null && break; sleep 0.1; done
BASE="$(sed -n 's/^listening on //p' "$WORK/server.out")"
[ -n "$BASE" ] || { echo "stream: the test server did not start" >&2; exit 1; }

# A reader that takes at most $1 MiB/s and prints the SHA-256 of what it got.
cat > "$WORK/reader.py" <<'PY'
import hashlib, sys, time
rate = float(sys.argv[1]) * 1048576
h = hashlib.sha256(); n = 0; t0 = time.monotonic()
while True:
    b = sys.stdin.buffer.read(65536)
    if not b: break
    h.update(b); n += len(b)
    ahead = n / rate - (time.monotonic() - t0)
    if ahead > 0: time.sleep(ahead)
print(h.hexdigest())
PY

# The checks below report each failure and go on; the count decides the exit status.
set +e
# 1. In order, byte-identical: an even server, trickling connections, first requests trickling, no ranges.
for q in "f128?rate=16m" "f24?rate=8m&slowevery=3&slowrate=256k" "f24?slowfirst=2&slowrate=64k" "noranges/f24?rate=32m"; do
    want="$SHA128"; [[ "$q" == *f24* ]] && want="$SHA24"
    got="$("$SEGGET_BIN" -q -n 8 -o - "$BASE/$q" | sha256sum | cut -d' ' -f1; exit "${PIPESTATUS[0]}")"
    rc=$?
    [ "$rc" -eq 0 ] && [ "$got" = "$want" ]
    check "identical stream from $q" $? "(rc $rc)"
done

# 2. A reader held to 16 MiB/s behind 8 connections of 16 MiB/s, window 16M: the reorder window's peak
# stays within it, RSS within the window plus 48 MiB (a debug build), no re-dial, no new connection.
: > "$WORK/requests.log"
got="$(/usr/bin/time -f '%M' -o "$WORK/rss" "$SEGGET_BIN" -n 8 --stream-window 16M -o - "$BASE/f128?rate=16m" \
    2> "$WORK/slow.err" | python3 "$WORK/reader.py" 16)"
rc=$?
rss_kib="$(tail -1 "$WORK/rss")"
peak="$(sed -n 's/.*reorder window peak \([0-9.]*\) MiB of 16[.0]* MiB.*/\1/p' "$WORK/slow.err")"
ports="$(awk '{print $5}' "$WORK/requests.log" | sort -u | wc -l)"
[ "$rc" -eq 0 ] && [ "$got" = "$SHA128" ]; check "slow reader: identical" $? "(rc $rc)"
[ -n "$peak" ] && python3 -c "import sys; sys.exit(0 if 8 <= float('$peak') <= 16 else 1)"
check "slow reader: window peak ${peak:-?} MiB, filled and within 16 MiB" $?
[ "$rss_kib" -le $(( (16 + 48) * 1024 )) ]; check "slow reader: peak RSS $((rss_kib / 1024)) MiB <= 64 MiB" $?
! grep -q "reconnecting" "$WORK/slow.err"; check "slow reader: no connection re-dialled" $?
[ "$ports" -le 9 ]; check "slow reader: $ports TCP connections (8 and the probe's at most)" $?

# 3. A checksum that does not match: every byte out, then exit 6 and a message.
"$SEGGET_BIN" -q -n 4 --checksum "sha256=$(printf '0%.0s' $(seq 64))" -o - "$BASE/f24" > "$WORK/bad.bin" 2> "$WORK/bad.err"
rc=$?
[ "$rc" -eq 6 ] && grep -q "SHA-256 mismatch" "$WORK/bad.err" && [ "$(stat -c %s "$WORK/bad.bin")" -eq $(( (24 << 20) + 4321 )) ]
check "checksum mismatch: exit 6 after the last byte, message on stderr" $? "(rc $rc: $(cat "$WORK/bad.err"))"
"$SEGGET_BIN" -q -n 4 --checksum "sha256=$SHA24" -o - "$BASE/f24" > /dev/null
rc=$?
[ "$rc" -eq 0 ]; check "checksum match: exit 0" $?

# 4. The server fails mid-stream (404 from its 3rd request: the probe, a first run of 8 MiB, then the failure): exit 4 under pipefail, a message that
# says how far it got, and --stream-from that offset completes the file.
( set -o pipefail; "$SEGGET_BIN" -q -n 4 -o - "$BASE/status/f24?code=404&from=3&rate=8m" 2> "$WORK/fail.err" > "$WORK/part.bin" )
rc=$?
off="$(sed -n 's/.*--stream-from \([0-9]*\).*/\1/p' "$WORK/fail.err")"
[ "$rc" -eq 4 ] && [ -n "$off" ] && [ "$(stat -c %s "$WORK/part.bin")" -eq "$off" ]
check "server failure mid-stream: exit 4, message names the offset ($off)" $? "(rc $rc: $(cat "$WORK/fail.err"))"
if [ -n "$off" ]; then
    "$SEGGET_BIN" -q -n 4 --stream-from "$off" -o - "$BASE/f24" >> "$WORK/part.bin"
    [ "$(sha256sum < "$WORK/part.bin" | cut -d' ' -f1)" = "$SHA24" ]
    check "--stream-from $off completes the file" $?
fi
# Retries spent mid-stream (503 from its 3rd request on): the message says how to
# continue (--stream-from), never "run the same command to resume", which streams from byte 0.
( set -o pipefail; "$SEGGET_BIN" -q -n 4 --retries 1 --retry-wait 0.1 -o - "$BASE/status/f24?code=503&from=3&rate=8m" 2> "$WORK/drop.err" > /dev/null )
rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--stream-from" "$WORK/drop.err" && ! grep -q "run the same command to resume" "$WORK/drop.err"
check "retries spent mid-stream: continued with --stream-from, not a rerun" $? "(rc $rc: $(cat "$WORK/drop.err"))"

# 5. The reader goes away (head): exit 5 and "broken pipe", promptly, no hang.
start=$(date +%s.%N)
timeout 30 bash -c "set -o pipefail; '$SEGGET_BIN' -q -n 8 -o - '$BASE/f128?rate=8m' 2> '$WORK/epipe.err' | head -c 3000000 > /dev/null"
rc=$?
took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
[ "$rc" -eq 5 ] && grep -q "broken pipe" "$WORK/epipe.err"
check "reader gone: exit 5 with a message in ${took}s" $? "(rc $rc: $(cat "$WORK/epipe.err"))"
# It counts what the pipe took, head's 3,000,000 bytes at least (whole chunks only, it said 2 MiB).
taken=$(sed -n 's/.*broken pipe) after \([0-9]*\) bytes.*/\1/p' "$WORK/epipe.err")
[ -n "$taken" ] && [ "$taken" -ge 3000000 ]
check "reader gone: the bytes the pipe took counted ($taken)" $? "($(cat "$WORK/epipe.err"))"

# 6. | tar x of a real tar file, from a server capped at 4 MiB/s per connection.
mkdir -p "$WORK/x"
( set -o pipefail; "$SEGGET_BIN" -q -n 8 -o - "$BASE/tree.tar?rate=4m" | tar x -C "$WORK/x" )
rc=$?
[ "$rc" -eq 0 ] && diff -r "$ROOT/Sources" "$WORK/x/Sources" > /dev/null && diff -r "$ROOT/docs" "$WORK/x/docs" > /dev/null
check "| tar x: the extracted tree matches" $? "(rc $rc)"

# 7. A terminal as standard output is refused (exit 2) unless --force.
python3 - "$SEGGET_BIN" "$BASE/f24" > "$WORK/tty.out" <<'PY'
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "-q", "-o", "-", sys.argv[2]])
out = b""
while True:
    try:
        b = os.read(fd, 65536)
    except OSError:
        break
    if not b: break
    out += b
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), len(out), b"terminal" in out)
PY
read -r code len said < "$WORK/tty.out"
[ "$code" -eq 2 ] && [ "$said" = "True" ] && [ "$len" -lt 4096 ]
check "a terminal is refused (exit 2)" $? "($(cat "$WORK/tty.out"))"

[ "$failures" -eq 0 ] || { echo "stream: $failures check(s) failed" >&2; exit 1; }
echo "stream: all checks passed"
