#!/usr/bin/env bash
# Issue 16, "no slow tail, ever": does a connection that trickles decide the finish time? A 64 MiB
# file from segget-testserver on 127.0.0.1, every response paced at 4 MiB/s (8 connections: 32 MiB/s,
# 2.0 s of transfer), three ways, interleaved:
#   healthy        ?rate=4m
#   trickle        ?rate=4m&slowevery=3&slowrate=1                 every third request sends 1 byte/s
#   trickle-256k   ?rate=4m&slowevery=3&slowrate=1&slowafter=256k  ... after a good 256 KiB at 4 MiB/s
# Each run gets its own query tag (`&run=N`), so that the server counts its requests from 1 and runs
# do not depend on each other. Which of segget's requests trickle is rotated with the repetition:
# before repetition r, (r - 1) mod 3 one-byte requests (curl) go to the run's URL, so that segget's
# probe is request 1, 2 or 3 (in the first phase its connections' first requests 3, 6 and 9 trickle;
# in the third the probe itself does). Every binary and case of a repetition gets the same phase.
# Every output is compared with the source (cmp). Prints every run, the medians and the ratio of each
# case to healthy as markdown tables. Builds nothing.
#
# Usage: Benchmarks/slow-tail.sh --segget BIN [--segget LABEL=BIN ...] --testserver BIN [--reps N]
#   --segget      a segget binary; repeat it (LABEL=BIN names it) to compare binaries in one run:
#                 every repetition runs every binary on every case, the order rotated by one each time
#   --testserver  the segget-testserver binary (swift build -c release --product segget-testserver)
#   --reps        repetitions (default 5)
# Environment: WORK (scratch directory; KEEP=1 keeps it), CONNECTIONS (default 8)
set -euo pipefail

REPS=5
SERVER=""
LABELS=()
BINS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --segget)
        v="$2"
        if [[ "$v" == *=* ]]; then LABELS+=("${v%%=*}"); BINS+=("${v#*=}"); else LABELS+=("segget${#BINS[@]}"); BINS+=("$v"); fi
        shift 2 ;;
    --testserver) SERVER="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
[ ${#BINS[@]} -gt 0 ] || { echo "give at least one --segget BIN" >&2; exit 2; }
[ ${#BINS[@]} -eq 1 ] && [ "${LABELS[0]}" = segget0 ] && LABELS[0]=segget
for b in "${BINS[@]}" "$SERVER"; do [ -x "$b" ] || { echo "not an executable: '$b'" >&2; exit 2; }; done
command -v curl >/dev/null || { echo "curl is needed (it shifts which requests trickle)" >&2; exit 2; }
N="${CONNECTIONS:-8}"

WORK="${WORK:-$(mktemp -d /tmp/segget-slow-tail.XXXXXX)}"
mkdir -p "$WORK/out"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(stat -c %s "$WORK/f" 2>/dev/null || echo 0)" = $((64 << 20)) ] || head -c 64M /dev/urandom >"$WORK/f"
"$SERVER" --port 0 --file "f=$WORK/f" >"$WORK/server.out" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do grep -q listening "$WORK/server.out" && break; sleep 0.05; done
BASE=$(grep -o 'http://[0-9.:]*' "$WORK/server.out" | head -1)
[ -n "$BASE" ] || { echo "the test server did not start:" >&2; cat "$WORK/server.out" >&2; exit 2; }

CASES=(healthy trickle trickle-256k)
query() {
    case "$1" in
    healthy) echo "rate=4m" ;;
    trickle) echo "rate=4m&slowevery=3&slowrate=1" ;;
    trickle-256k) echo "rate=4m&slowevery=3&slowrate=1&slowafter=256k" ;;
    esac
}

: >"$WORK/times"
run=0
for rep in $(seq "$REPS"); do
    # Every (binary, case) pair once per repetition, the order rotated by one each repetition.
    pairs=()
    for b in "${!BINS[@]}"; do for c in "${CASES[@]}"; do pairs+=("$b $c"); done; done
    k=$(((rep - 1) % ${#pairs[@]}))
    pairs=("${pairs[@]:k}" "${pairs[@]:0:k}")
    for p in "${pairs[@]}"; do
        read -r b c <<<"$p"
        run=$((run + 1))
        rm -f "$WORK/out/"*
        url="$BASE/f?$(query "$c")&run=$run"
        for _ in $(seq $(((rep - 1) % 3))); do curl -s -o /dev/null -r 0-0 "$url"; done
        t0=$(date +%s.%N)
        "${BINS[$b]}" -q -n "$N" -o "$WORK/out/f" "$url"
        t1=$(date +%s.%N)
        cmp -s "$WORK/out/f" "$WORK/f" || { echo "${LABELS[$b]} $c: the output differs from the source" >&2; exit 1; }
        t=$(echo "$t1 - $t0" | bc)
        echo "${LABELS[$b]} $c $t" | tee -a "$WORK/times" >&2
    done
done

python3 - "$WORK/times" "$REPS" "$N" "${LABELS[@]}" <<'PY'
import statistics, sys
path, reps, n, labels = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
cases = ["healthy", "trickle", "trickle-256k"]
runs = {}
for line in open(path):
    label, case, t = line.split()
    runs.setdefault((label, case), []).append(float(t))
print(f"64 MiB, -n {n}, every response paced at 4 MiB/s; {reps} interleaved repetitions (trickle phase rotated); every output checked with cmp.\n")
print("| binary | case | median s | / healthy | runs (s) |")
print("|---|---|---|---|---|")
for label in labels:
    healthy = statistics.median(runs[(label, "healthy")])
    for case in cases:
        ts = runs[(label, case)]
        m = statistics.median(ts)
        print(f"| {label} | {case} | {m:.2f} | {m / healthy:.2f}x | {' '.join(f'{t:.2f}' for t in ts)} |")
PY
