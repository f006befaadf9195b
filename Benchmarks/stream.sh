#!/usr/bin/env bash
# Issue 25, -o -: 1 GiB from segget-testserver capped at 16 MiB/s per connection, `segget -n 8 -o - URL |
# sha256sum` against the same download to a file, interleaved; peak RSS of each (GNU time); then the
# stream behind a reader held to 10 MiB/s: RSS, the reorder window's peak, re-dials and TCP connections.
# Usage: Benchmarks/stream.sh [REPS] [SIZE_MIB]     (defaults 5, 1024). Builds nothing: set SEGGET and
# TESTSERVER, or it uses .build/release.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REPS="${1:-5}"
MIB="${2:-1024}"
SEGGET="${SEGGET:-$ROOT/.build/release/segget}"
TESTSERVER="${TESTSERVER:-$ROOT/.build/release/segget-testserver}"
WORK="$(mktemp -d /tmp/segget-stream-bench.XXXXXX)"
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

head -c $((MIB << 20)) /dev/urandom > "$WORK/f"
WANT="$(sha256sum < "$WORK/f" | cut -d' ' -f1)"
"$TESTSERVER" --port 0 --dir "$WORK" --log "$WORK/requests.log" > "$WORK/server.out" 2>&1 &
SERVER_PID=$!
for _ in $(seq 50); do grep -q listening "$WORK/server.out" 2>/dev/null && break; sleep 0.1; done
URL="$(sed -n 's/^listening on //p' "$WORK/server.out")/f?rate=16m"
echo "dd (1 GiB, O_DIRECT): $(dd if=/dev/zero of="$WORK/dd.bin" bs=1M count=1024 oflag=direct 2>&1 | tail -1)"
rm -f "$WORK/dd.bin"

now() { date +%s.%N; }
for i in $(seq "$REPS"); do
    rm -f "$WORK/out.bin"
    t0=$(now)
    /usr/bin/time -f %M -o "$WORK/rss.file" "$SEGGET" -q -n 8 -o "$WORK/out.bin" "$URL"
    t1=$(now)
    got="$(sha256sum < "$WORK/out.bin" | cut -d' ' -f1)"
    [ "$got" = "$WANT" ] || { echo "file download $i: wrong bytes" >&2; exit 1; }
    rm -f "$WORK/out.bin"
    printf 'file   %d %.2f s rss %d MiB\n' "$i" "$(echo "$t1 - $t0" | bc)" $(( $(cat "$WORK/rss.file") / 1024 ))
    t0=$(now)
    got="$(/usr/bin/time -f %M -o "$WORK/rss.stream" "$SEGGET" -q -n 8 -o - "$URL" | sha256sum | cut -d' ' -f1)"
    t1=$(now)
    [ "$got" = "$WANT" ] || { echo "stream $i: wrong bytes" >&2; exit 1; }
    printf 'stream %d %.2f s rss %d MiB\n' "$i" "$(echo "$t1 - $t0" | bc)" $(( $(cat "$WORK/rss.stream") / 1024 ))
done

# Behind a reader held to 10 MiB/s (the first 256 MiB: 25 s).
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
print(n, round(time.monotonic() - t0, 1))
PY
: > "$WORK/requests.log"
got="$(set +o pipefail; /usr/bin/time -f %M -o "$WORK/rss.slow" "$SEGGET" -n 8 -o - "$URL" 2> "$WORK/slow.err" | head -c $((256 << 20)) | python3 "$WORK/reader.py" 10 || true)"
echo "10 MiB/s reader: $got (bytes, seconds); peak RSS $(( $(tail -1 "$WORK/rss.slow") / 1024 )) MiB"
echo "re-dials: $(grep -c reconnecting "$WORK/slow.err" || true); requests: $(wc -l < "$WORK/requests.log"); TCP connections: $(awk '{print $5}' "$WORK/requests.log" | sort -u | wc -l)"
grep -v "^segget: [0-9]*%" "$WORK/slow.err" | tail -3
