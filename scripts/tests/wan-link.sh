#!/usr/bin/env bash
# The emulated WAN link of `scripts/bench wan` (Benchmarks/wan/wanlink.c, link.sh), small and fast:
#   1. 40 ms RTT, no loss: ping's RTT is 40 ms (min 39.5-45, average under 60), and a 4 MiB download
#      over HTTP through the link arrives byte-identical; then segget -n 8 of the same file from
#      segget-testserver: identical, and no connection races another still in TCP's slow start or
#      waiting for a warm-up: medians of 3 runs at most 12 requests and 8 connections, at most 256 KiB
#      fetched twice (the build before raced the 4 chunks' owners: 15 requests, 11 connections,
#      2-2.8 MiB twice, in every run);
#   2. a 40 Mbit/s bottleneck: the same download takes at least 90 % of 4 MiB / 40 Mbit/s;
#   3. 10 % loss each way: about 19 % of pings are lost (between 8 and 32 % of 400), and wanlink
#      counts its losses at about 10 % each way.
# Then it tears the link down and checks that the namespaces and wanlink are gone. Needs root, TUN
# and network namespaces; prints SKIP and exits 0 where they are not available. Needs SEGGET_BIN and
# SEGGET_TESTSERVER_BIN (default: the debug builds). About 17 s.
source "$(dirname "$0")/../lib/common.sh"
SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SEGGET_TESTSERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"

if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/net/tun ]; then
    echo "wan-link: SKIP (needs root and /dev/net/tun)"
    exit 0
fi
ensure_packages iproute2 iputils-ping gcc libc6-dev curl python3

NAME="segget-wantest-$$"
LINK="$ROOT/Benchmarks/wan/link.sh"
WORK="$(mktemp -d /tmp/segget-wan-link.XXXXXX)"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    "$LINK" down --name "$NAME" 2>/dev/null || true
    rm -rf "$WORK" "/tmp/$NAME"
}
trap cleanup EXIT

if ! ip netns add "$NAME-probe" 2>/dev/null; then
    echo "wan-link: SKIP (cannot create network namespaces here)"
    exit 0
fi
ip netns del "$NAME-probe"

fail() { echo "wan-link: FAIL: $*" >&2; exit 1; }
in_client() { ip netns exec "$NAME-cli" "$@"; }
ping_summary() {  # COUNT INTERVAL -> "sent received min avg max"
    in_client ping -q -n -c "$1" -i "$2" -W 1 198.18.0.2 | awk '
        /packets transmitted/ { sent = $1; recv = $4 }
        /^rtt/ { split($4, r, "/"); min = r[1]; avg = r[2]; max = r[3] }
        END { print sent, recv, min, avg, max }'
}
start_server() {
    ip netns exec "$NAME-srv" python3 -m http.server --bind 198.18.0.2 8000 --directory "$WORK/www" \
        >"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 100); do
        in_client curl -s -o /dev/null "http://198.18.0.2:8000/" && return 0
        sleep 0.1
    done
    fail "the HTTP server in the server namespace did not answer"
}
stop_server() { kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; }
download_seconds() {  # prints the seconds a download of f.bin took; fails when the bytes differ
    rm -f "$WORK/out.bin"
    local t
    t="$(in_client curl -sS -o "$WORK/out.bin" -w '%{time_total}' "http://198.18.0.2:8000/f.bin")" || fail "curl failed"
    cmp -s "$WORK/www/f.bin" "$WORK/out.bin" || fail "the download through the link differs from the source"
    echo "$t"
}

mkdir -p "$WORK/www"
head -c $((4 << 20)) /dev/urandom >"$WORK/www/f.bin"

log "wan-link: 40 ms RTT, no loss"
"$LINK" up --name "$NAME" --delay-ms 40 2>/dev/null
read -r sent recv min avg max <<<"$(ping_summary 20 0.05)"
echo "  ping: $recv/$sent back, RTT min/avg/max $min/$avg/$max ms"
[ "$recv" = "$sent" ] || fail "pings were lost on a link without loss ($recv of $sent back)"
awk -v m="$min" -v a="$avg" 'BEGIN { exit !(m >= 39.5 && m <= 45 && a < 60) }' \
    || fail "RTT min $min ms / avg $avg ms is not about 40 ms"
start_server
t="$(download_seconds)"
echo "  4 MiB over HTTP: $t s, byte-identical"
stop_server
[ -x "$SEGGET_BIN" ] && [ -x "$SEGGET_TESTSERVER_BIN" ] || fail "$SEGGET_BIN or $SEGGET_TESTSERVER_BIN is missing; build first (swift build)"
ip netns exec "$NAME-srv" "$SEGGET_TESTSERVER_BIN" --host 198.18.0.2 --port 8000 --dir "$WORK/www" >"$WORK/testserver.out" 2>&1 &
SERVER_PID=$!
BASE="$(testserver_url "$WORK/testserver.out" "$SERVER_PID")"
[ -n "$BASE" ] || fail "segget-testserver did not start in the server namespace"
# Three downloads, judged by their medians: one hiccup of the emulated link (a retransmission timeout
# while wanlink's thread waits for a CPU) can make a stalled connection's range worth splitting, which
# is the right answer then; a build that races connections in slow start does it every time.
runs=""
for run in 1 2 3; do
    rm -f "$WORK/seg.bin"
    SEGGET_DEBUG=1 in_client "$SEGGET_BIN" -n 8 --json -o "$WORK/seg.bin" "$BASE/f.bin" >"$WORK/seg.json" 2>"$WORK/seg.$run.err" \
        || fail "segget -n 8 through the link failed: $(tail -c 400 "$WORK/seg.$run.err")"
    cmp -s "$WORK/www/f.bin" "$WORK/seg.bin" || fail "segget's download through the link differs from the source"
    read -r requests opened twice < <(python3 -c '
import json, sys
f = [o for o in map(json.loads, open(sys.argv[1])) if o["type"] == "finish"][-1]
print(f["requests"], f["connectionsOpened"], f["refetched"])' "$WORK/seg.json")
    echo "  segget -n 8, 4 MiB, run $run: byte-identical, $requests requests, $opened connections, $twice bytes fetched twice"
    if ! { [ "$requests" -le 12 ] && [ "$opened" -le 8 ] && [ "$twice" -le $((256 << 10)) ]; }; then
        echo "  run $run is outside the bounds; its decisions, and the link's counters:"
        sed 's/^/    /' "$WORK/seg.$run.err"
        "$LINK" stats --name "$NAME" 2>/dev/null | sed 's/^/    /' || true
    fi
    runs+="$requests $opened $twice"$'\n'
done
read -r requests opened twice < <(printf '%s' "$runs" | python3 -c '
import sys, statistics
rows = [list(map(int, line.split())) for line in sys.stdin if line.strip()]
print(*(int(statistics.median(column)) for column in zip(*rows)))')
echo "  medians of 3: $requests requests, $opened connections, $twice bytes fetched twice"
[ "$requests" -le 12 ] && [ "$opened" -le 8 ] && [ "$twice" -le $((256 << 10)) ] \
    || fail "segget raced connections in slow start: medians of 3 runs $requests requests, $opened connections, $twice bytes twice"
stop_server

log "wan-link: 2 ms RTT, 40 Mbit/s bottleneck"
"$LINK" up --name "$NAME" --delay-ms 2 --rate-mbit 40 2>/dev/null
start_server
t="$(download_seconds)"
# 4 MiB of payload alone at 40 Mbit/s: 0.839 s; headers make the real floor a little higher.
echo "  4 MiB over HTTP: $t s (the bottleneck alone allows 0.84 s at best)"
awk -v t="$t" 'BEGIN { exit !(t >= 0.9 * 0.839 && t < 10) }' || fail "4 MiB took $t s through a 40 Mbit/s bottleneck"
stop_server

log "wan-link: 2 ms RTT, 10 % loss each way"
"$LINK" up --name "$NAME" --delay-ms 2 --loss 10% 2>/dev/null
read -r sent recv min avg max <<<"$(ping_summary 400 0.005)"
lost=$((sent - recv))
echo "  ping: $lost of $sent lost (expected about 19 %: 1 - 0.9 x 0.9)"
[ "$lost" -ge 32 ] && [ "$lost" -le 128 ] || fail "$lost of $sent pings lost; expected 8-32 %"
stats="$("$LINK" stats --name "$NAME")"
up_lost="$(awk '$1 == "up" { for (i = 2; i <= NF; i++) if ($i ~ /^lost=/) print substr($i, 6) }' <<<"$stats")"
echo "  wanlink: $up_lost of $sent echo requests lost on the way to the server"
[ "$up_lost" -ge 16 ] && [ "$up_lost" -le 80 ] || fail "wanlink lost $up_lost of $sent requests; expected 4-20 %"

log "wan-link: teardown"
pid="$(cat "/tmp/$NAME/pid")"
"$LINK" down --name "$NAME"
[ ! -d "/proc/$pid" ] || fail "wanlink (pid $pid) still runs after down"
! ip netns list | grep -q "^$NAME-" || fail "namespaces left after down: $(ip netns list | grep "^$NAME-")"
echo "wan-link: OK"
