#!/usr/bin/env bash
# How close does segget get to what the server can deliver? On the capped location (nginx
# `limit_rate 16m` per connection), runs, interleaved: segget -n 8, and the best any 8-connection
# client could do — 8 curl processes fetching the 8 equal ranges into /dev/null at once (no disk, no
# scheduling, no probe). Reports the median wall time of each and the ratio. The 8 x 16 MiB/s "link"
# would take 8.00 s for 1 GiB; nginx's pacing usually delivers a little less.
#
# Usage: Benchmarks/capped-ceiling.sh [REPS]      (default 5)
# Environment: SEGGET (default .build/release/segget), WORK (scratch; KEEP=1 keeps it)
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

REPS="${1:-5}"
SEGGET="${SEGGET:-$ROOT/.build/release/segget}"
[ -x "$SEGGET" ] || { echo "no segget binary at $SEGGET; build it: swift build -c release --product segget" >&2; exit 2; }
ensure_packages nginx curl
SIZE=$((1 << 30))

bench_workdir ceiling
mkdir -p "$WORK/out"
[ -s "$WORK/www/big.bin" ] || head -c "$SIZE" /dev/urandom >"$WORK/www/big.bin"
start_nginx "$WORK/nginx" "$WORK/www"
URL="$NGINX_URL/capped/big.bin"

now() { date +%s.%N; }
curls() {
    local part=$((SIZE / 8)) pids=()
    for i in 0 1 2 3 4 5 6 7; do
        curl -s -o /dev/null -r "$((i * part))-$(((i + 1) * part - 1))" "$URL" &
        pids+=($!)
    done
    wait "${pids[@]}"
}
seg() {
    rm -f "$WORK/out/"*
    "$SEGGET" -q -n 8 -o "$WORK/out/big.bin" "$URL"
}
: >"$WORK/times"
for i in $(seq "$REPS"); do
    order="seg curls"
    [ $((i % 2)) -eq 0 ] && order="curls seg"
    for tool in $order; do
        t0=$(now); "$tool"; t1=$(now)
        echo "$tool $(echo "$t1 - $t0" | bc)" | tee -a "$WORK/times" >&2
    done
done
cmp -s "$WORK/out/big.bin" "$WORK/www/big.bin" || { echo "segget's output differs" >&2; exit 2; }
python3 - "$WORK/times" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tool, t = line.split()
    rows.setdefault(tool, []).append(float(t))
s, c = statistics.median(rows["seg"]), statistics.median(rows["curls"])
print(f"| client | median s | runs | % of 8 x 16 MiB/s |")
print(f"|---|---|---|---|")
print(f"| segget -n 8 (to disk, O_DIRECT + fdatasync) | {s:.2f} | {' '.join(f'{t:.2f}' for t in rows['seg'])} | {800 / s:.1f} % |")
print(f"| 8 x curl, one range each, to /dev/null | {c:.2f} | {' '.join(f'{t:.2f}' for t in rows['curls'])} | {800 / c:.1f} % |")
print(f"\nsegget / 8 curls: {s / c:.3f}")
PY
