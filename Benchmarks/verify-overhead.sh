#!/usr/bin/env bash
# What does verification cost? Downloads one large random file from a local nginx, uncapped, with and
# without `--checksum sha256=<correct>`, interleaved, and reports wall time (best and median) and CPU
# seconds (user+sys) for both, plus the overhead ratio. The issue's target: best-of-N wall time with
# the checksum at most 1.10 x the time without.
#
# Usage: Benchmarks/verify-overhead.sh [REPS]
# Environment:
#   SEGGET     the binary to measure (default .build/release/segget; build it with
#              `swift build -c release --product segget`)
#   SIZE_MIB   file size in MiB (default 1024)
#   CONNS      connections, -n (default 8)
#   WORK       scratch directory (default a new one under /tmp, removed at the end)
#   OUT_DIR    where segget writes (default WORK/out); /dev/shm takes the disk (fsync) out of the
#              measurement and leaves CPU and page cache costs
#   KEEP=1     keep WORK
#   SCENARIO   uncapped (default) or capped (nginx limit_rate 16 MiB/s per connection, like a fast
#              real link, where the hasher has spare CPU)
# Exit status: 0 when the target is met, 1 when it is not, 2 on a failed run.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

REPS="${1:-3}"
SEGGET="${SEGGET:-$ROOT/.build/release/segget}"
SIZE_MIB="${SIZE_MIB:-1024}"
CONNS="${CONNS:-8}"
TARGET_RATIO="1.10"

[ -x "$SEGGET" ] || { echo "no segget binary at $SEGGET; build it: swift build -c release --product segget" >&2; exit 2; }
ensure_packages nginx time
command -v sha256sum >/dev/null

bench_workdir verify-overhead
OUT_DIR="${OUT_DIR:-$WORK/out}"
mkdir -p "$OUT_DIR"
# OUT_DIR may lie outside WORK (e.g. /dev/shm).
bench_cleanup_extra() {
    if [ -n "${OUT:-}" ]; then rm -f "$OUT" "$OUT.segget-part" "$OUT.segget-journal"; fi
}

FILE="$WORK/www/big.bin"
if [ ! -s "$FILE" ] || [ "$(stat -c %s "$FILE")" -ne $((SIZE_MIB << 20)) ]; then
    log "making a ${SIZE_MIB} MiB random file"
    head -c $((SIZE_MIB << 20)) /dev/urandom >"$FILE"
fi
log "hashing it with sha256sum"
SUM="$(sha256sum "$FILE" | cut -d' ' -f1)"
start_nginx "$WORK/nginx" "$WORK/www"
case "${SCENARIO:-uncapped}" in
    uncapped) URL="$NGINX_URL/big.bin" ;;
    capped) URL="$NGINX_URL/capped/big.bin" ;;
    *) echo "SCENARIO must be uncapped or capped" >&2; exit 2 ;;
esac
OUT="$OUT_DIR/big.bin"
log "segget: $SEGGET; url: $URL; sha256: $SUM"

# One timed run; appends "MODE WALL USER SYS" to $WORK/results.
run_one() {
    local mode="$1"
    local extra=()
    [ "$mode" = checksum ] && extra=(--checksum "sha256=$SUM")
    rm -f "$OUT" "$OUT.segget-part" "$OUT.segget-journal"
    sync
    local t="$WORK/time.txt"
    if ! /usr/bin/time -f '%e %U %S' -o "$t" "$SEGGET" -q -n "$CONNS" -f -o "$OUT" "${extra[@]}" "$URL"; then
        echo "segget failed ($mode)" >&2
        exit 2
    fi
    local size
    size="$(stat -c %s "$OUT")"
    [ "$size" -eq $((SIZE_MIB << 20)) ] || { echo "wrong size $size ($mode)" >&2; exit 2; }
    read -r wall user sys <"$t"
    printf '%s %s %s %s\n' "$mode" "$wall" "$user" "$sys" >>"$WORK/results"
    log "$(printf '%-9s wall %6.2fs  user %6.2fs  sys %6.2fs' "$mode" "$wall" "$user" "$sys")"
}

# A warm-up run of each (file in the page cache, nginx workers up), not counted.
log "warm-up"
run_one plain
run_one checksum
: >"$WORK/results"
for i in $(seq "$REPS"); do
    # Alternate which goes first so that drift (page cache, thermal) hits both alike.
    if [ $((i % 2)) -eq 1 ]; then run_one plain; run_one checksum; else run_one checksum; run_one plain; fi
done
# The last output was hashed by segget; check it once more independently.
[ "$(sha256sum "$OUT" | cut -d' ' -f1)" = "$SUM" ] || { echo "the downloaded file differs" >&2; exit 2; }

python3 - "$WORK/results" "$SIZE_MIB" "$CONNS" "$TARGET_RATIO" "${SCENARIO:-uncapped}" <<'PY'
import statistics, sys
path, size, conns, target, scenario = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5]
rows = {"plain": [], "checksum": []}
for line in open(path):
    mode, wall, user, sys_ = line.split()
    rows[mode].append((float(wall), float(user) + float(sys_)))
def stats(mode):
    walls = [w for w, _ in rows[mode]]
    cpus = [c for _, c in rows[mode]]
    return min(walls), statistics.median(walls), min(cpus), statistics.median(cpus), len(walls)
p, c = stats("plain"), stats("checksum")
print()
print(f"verify-overhead: {size} MiB, -n {conns}, {scenario} nginx on loopback, {p[4]} runs each")
print()
print("| mode | best wall (s) | median wall (s) | best MiB/s | median CPU user+sys (s) |")
print("| --- | ---: | ---: | ---: | ---: |")
for name, s in (("no checksum", p), ("--checksum sha256", c)):
    print(f"| {name} | {s[0]:.2f} | {s[1]:.2f} | {size / s[0]:.0f} | {s[3]:.2f} |")
ratio_best, ratio_median = c[0] / p[0], c[1] / p[1]
print()
print(f"wall ratio (checksum / plain): best {ratio_best:.3f}, median {ratio_median:.3f}; "
      f"extra CPU (median) {c[3] - p[3]:+.2f} s")
ok = ratio_best <= target
print(f"target best-of-N ratio <= {target:.2f}: {'MET' if ok else 'NOT MET'}")
sys.exit(0 if ok else 1)
PY
