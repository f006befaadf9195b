#!/usr/bin/env bash
# One connection budget per host (issue 25): segget-testserver answers more than 3 concurrent requests
# per client with 429 (maxconc=3&scope=client). A batch of 20 files of 2 MiB at -j 8 -n 4 must finish
# identical with the refusals bounded (the first burst, then a probe upwards per hold-off: the limit
# learnt in one file holds for the others); with --max-connections-per-host 3 none may be refused,
# nor with --http2 added (the batch multiplexes until this HTTP/1.1 server's first answer).
# Then the daemon with 8 tasks to the host, without a cap and after changeGlobalOption
# max-connection-per-server=3 (daemon_host_budget.py). Each round prints a line for RESULTS.md.
# Needs SEGGET_BIN and SEGGET_TESTSERVER_BIN (scripts/test sets them; defaults: .build/debug).
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SEGGET_TESTSERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"
for b in "$SEGGET_BIN" "$SEGGET_TESTSERVER_BIN"; do
    [ -x "$b" ] || { echo "host-budget: $b is missing; build first (swift build)" >&2; exit 1; }
done
WORK="$(mktemp -d /tmp/segget-host-budget.XXXXXX)"
SERVER_PID=""
cleanup() {
    stop_pid "$SERVER_PID"
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "host-budget: FAILED: $*" >&2; exit 1; }

head -c $((2 << 20)) /dev/urandom >"$WORK/src.bin"
"$SEGGET_TESTSERVER_BIN" --port 0 --file "f.bin=$WORK/src.bin" >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
BASE="$(testserver_url "$WORK/server.out" "$SERVER_PID")"
[ -n "$BASE" ] || fail "segget-testserver did not report its address"

stat_of() { grep -oE "$1=[0-9]+" <<<"$2" | cut -d= -f2; }
for round in nocap cap h2cap; do
    : >"$WORK/list"
    for k in $(seq 20); do
        printf '%s\n  out=f%d.bin\n' "$BASE/normal/f.bin?maxconc=3&scope=client&reject=429&rate=4m&r=$round$k" "$k" >>"$WORK/list"
    done
    extra=()
    [ "$round" = cap ] && extra=(--max-connections-per-host 3)
    # With --http2 the batch shares its connections as streams until the first answer shows
    # HTTP/1.1 (this server's): the 3 connections hold the requests until then, the cap after.
    [ "$round" = h2cap ] && extra=(--http2 --max-connections-per-host 3)
    rm -rf "$WORK/out"
    curl -s "$BASE/_stats?reset=1" >/dev/null
    start=$(date +%s.%N)
    rc=0
    timeout 120 "$SEGGET_BIN" -q -i "$WORK/list" -j 8 -n 4 --chunk-size 256k -d "$WORK/out" "${extra[@]}" 2>"$WORK/err" || rc=$?
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    stats="$(curl -s "$BASE/_stats")"
    refused=$(stat_of rejected "$stats")
    echo "batch, 20 files x 2 MiB, -j 8 -n 4 ${extra[*]:-(no cap)}: ${secs} s, exit $rc, $stats"
    [ "$rc" -eq 0 ] || { cat "$WORK/err" >&2; fail "$round: segget exited with $rc"; }
    for k in $(seq 20); do cmp -s "$WORK/out/f$k.bin" "$WORK/src.bin" || fail "$round: f$k.bin differs"; done
    if [ "$round" != nocap ]; then
        [ "$refused" -eq 0 ] || fail "$round: $refused requests refused with ${extra[*]}"
        [ "$(stat_of max-demand "$stats")" -le 3 ] || fail "$round: more than 3 requests at once"
    else
        # The first burst (8 probes at once: 5 refused), a probe upwards per hold-off (1-2 in 5 s),
        # and requests that reach the server in the microseconds between an answer's last byte and
        # the server freeing its slot (a race nginx's limit_conn has too): 6-14 in 8 runs of
        # f519b6a (6-12 in 8 CI runs before), 6-13 in 7 runs of the next build. The probes grow with
        # the batch's time, which a loaded machine stretches: 2 more allowed per 5 s past the first 5.
        # Without the learned budget, every request past the 3 slots would be refused: hundreds.
        allowed=$(python3 -c "import math; print(16 + 2 * max(0, math.ceil(($secs - 5) / 5)))")
        [ "$refused" -le "$allowed" ] || fail "nocap: $refused requests refused in $secs s (more than the first burst, the probes and the races: $allowed)"
    fi
done
kill -TERM "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
python3 "$ROOT/scripts/tests/daemon_host_budget.py" --segget "$SEGGET_BIN" --testserver "$SEGGET_TESTSERVER_BIN" --work "$WORK"
