#!/usr/bin/env bash
# What does verification cost against what it cannot cost less than? Downloads one large random file
# from a local nginx, uncapped, without a digest and with each of sha256, md5 and both, and hashes the
# file alone with `openssl dgst` (both digests: two openssl processes side by side), all interleaved,
# round after round. For each digest it reports:
#   floor = max(best plain download, best hash alone,
#               (median CPU seconds of the plain download + median CPU seconds of the hash alone) / CPUs)
# and the best verified download against it (the issue's target: at most 1.15 x the floor), the
# bytes segget read back from the disk (read_bytes of /proc/PID/io, as GNU time's %I x 512: the kernel
# keeps one count for both) beside what segget says it read back from the file (its --json finish
# event, page-cache hits included), and the peak RSS (%M). Then, on a rate-limited link (segget's own
# --max-speed 128M, 1 GiB: 8 s), plain against sha256, interleaved, medians. It starts with the disk's
# `dd oflag=direct` rate, measured in the same run, on the file system segget writes to.
#
# Usage: Benchmarks/verify-floor.sh [ROUNDS]          (default 3)
# Environment:
#   SEGGET       the binary (default .build/release/segget; scripts/setup builds it)
#   SIZE_MIB     file size in MiB (default 1024)
#   CONNS        connections, -n (default 8)
#   DIGESTS      the verified modes, space-separated (default "sha256 md5 sha256+md5")
#   CAPPED_REPS  repetitions of the rate-limited pair (default 5; 0 skips it)
#   CAP          its --max-speed (default 128M)
#   WORK, KEEP=1 scratch directory (default a new one under /tmp), keep it
#   OUT_DIR      where segget writes (default WORK/out)
#   SEGGET_BASE  another build (the one before) to run beside it, each digest in every round
#                (reported as base-DIGEST)
# Exit status: 0 when every uncapped mode is within 1.15 x its floor with at most 10 % read back,
# 1 otherwise, 2 on a failed run.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

ROUNDS="${1:-3}"
SEGGET="${SEGGET:-$ROOT/.build/release/segget}"
SIZE_MIB="${SIZE_MIB:-1024}"
CONNS="${CONNS:-8}"
DIGESTS="${DIGESTS:-sha256 md5 sha256+md5}"
CAPPED_REPS="${CAPPED_REPS:-5}"
CAP="${CAP:-128M}"

[ -x "$SEGGET" ] || { echo "no segget binary at $SEGGET; build it: scripts/setup" >&2; exit 2; }
ensure_packages nginx time openssl
bench_workdir verify-floor
OUT_DIR="${OUT_DIR:-$WORK/out}"
mkdir -p "$OUT_DIR"
OUT="$OUT_DIR/big.bin"
bench_cleanup_extra() { rm -f "$OUT" "$OUT.segget-part" "$OUT.segget-journal" "$OUT_DIR/dd.bin"; }
RESULTS="$WORK/results"
: >"$RESULTS"

log "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
dd_line="$(dd if=/dev/zero of="$OUT_DIR/dd.bin" bs=1M count=1024 oflag=direct 2>&1 | tail -1)"
rm -f "$OUT_DIR/dd.bin"
log "disk: dd bs=1M count=1024 oflag=direct: $dd_line"
echo "dd $dd_line" >>"$RESULTS"

FILE="$WORK/www/big.bin"
if [ ! -s "$FILE" ] || [ "$(stat -c %s "$FILE")" -ne $((SIZE_MIB << 20)) ]; then
    log "making a ${SIZE_MIB} MiB random file"
    head -c $((SIZE_MIB << 20)) /dev/urandom >"$FILE"
fi
SHA256="$(sha256sum "$FILE" | cut -d' ' -f1)"
MD5="$(md5sum "$FILE" | cut -d' ' -f1)"
start_nginx "$WORK/nginx" "$WORK/www"
URL="$NGINX_URL/big.bin"
log "segget: $SEGGET; url: $URL"

# run_download MODE [extra segget options]: one timed download; appends
# "MODE WALL USER SYS MAXRSS_KIB READ_BYTES FROM_MEMORY READ_BACK" to $RESULTS.
run_download() {
    local mode="$1"
    shift
    local checks=() binary="$SEGGET"
    case "$mode" in
        base-*) binary="$SEGGET_BASE" ;;
    esac
    case "${mode#base-}" in
        sha256 | capped-sha256) checks=(--checksum "sha256=$SHA256") ;;
        md5) checks=(--checksum "md5=$MD5") ;;
        sha256+md5) checks=(--checksum "sha256=$SHA256" --checksum "md5=$MD5") ;;
    esac
    rm -f "$OUT" "$OUT.segget-part" "$OUT.segget-journal"
    sync
    if ! /usr/bin/time -f '%e %U %S %M %I' -o "$WORK/time.txt" \
        "$binary" --json -n "$CONNS" -f -o "$OUT" "${checks[@]}" "$@" "$URL" >"$WORK/events.json"; then
        echo "segget failed ($mode)" >&2
        exit 2
    fi
    [ "$(stat -c %s "$OUT")" -eq $((SIZE_MIB << 20)) ] || { echo "wrong size ($mode)" >&2; exit 2; }
    local wall user sys rss inputs hashing
    read -r wall user sys rss inputs <"$WORK/time.txt"
    hashing="$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["type"] == "finish":
        h = e.get("hashing") or {}
        print(h.get("fromMemory", 0), h.get("readBack", 0))
' "$WORK/events.json")"
    echo "$mode $wall $user $sys $rss $((inputs * 512)) $hashing" >>"$RESULTS"
    log "$(printf '%-14s wall %5.2fs  cpu %5.2fs  rss %4d MiB  read_bytes %5d MiB  hashed from memory / read back: %s' \
        "$mode" "$wall" "$(awk "BEGIN{print $user + $sys}")" $((rss >> 10)) $((inputs >> 11)) "$hashing")"
}

# run_hash MODE: the hash alone over the (cached) source file; appends "hash-MODE WALL USER SYS".
run_hash() {
    local mode="$1" script
    case "$mode" in
        sha256) script="openssl dgst -sha256 '$FILE'" ;;
        md5) script="openssl dgst -md5 '$FILE'" ;;
        sha256+md5) script="openssl dgst -sha256 '$FILE' & openssl dgst -md5 '$FILE' & wait" ;;
    esac
    /usr/bin/time -f '%e %U %S' -o "$WORK/time.txt" sh -c "$script" >/dev/null
    local wall user sys
    read -r wall user sys <"$WORK/time.txt"
    echo "hash-$mode $wall $user $sys" >>"$RESULTS"
    log "$(printf '%-14s wall %5.2fs  cpu %5.2fs' "hash-$mode" "$wall" "$(awk "BEGIN{print $user + $sys}")")"
}

cat "$FILE" >/dev/null
log "warm-up (not counted)"
run_download plain
run_download sha256
: >"$RESULTS.tmp"
grep '^dd ' "$RESULTS" >"$RESULTS.tmp"
mv "$RESULTS.tmp" "$RESULTS"

read -r -a modes <<<"$DIGESTS"
for round in $(seq "$ROUNDS"); do
    log "round $round of $ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg))"
    # Each round in another order, so that drift hits every mode alike.
    steps=(plain "${modes[@]}" "${modes[@]/#/hash-}")
    [ -n "${SEGGET_BASE:-}" ] && steps+=("${modes[@]/#/base-}")
    shift_by=$(((round - 1) % ${#steps[@]}))
    for i in "${!steps[@]}"; do
        step="${steps[$(((i + shift_by) % ${#steps[@]}))]}"
        case "$step" in
            hash-*) run_hash "${step#hash-}" ;;
            *) run_download "$step" ;;
        esac
    done
done
[ "$(sha256sum "$OUT" | cut -d' ' -f1)" = "$SHA256" ] || { echo "the downloaded file differs" >&2; exit 2; }

if [ "$CAPPED_REPS" -gt 0 ]; then
    log "rate-limited: --max-speed $CAP, $CAPPED_REPS repetitions"
    for i in $(seq "$CAPPED_REPS"); do
        if [ $((i % 2)) -eq 1 ]; then
            run_download capped-plain --max-speed "$CAP"
            run_download capped-sha256 --max-speed "$CAP"
        else
            run_download capped-sha256 --max-speed "$CAP"
            run_download capped-plain --max-speed "$CAP"
        fi
    done
fi
log "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$RESULTS" "$SIZE_MIB" "$CONNS" "$(nproc)" "$DIGESTS" <<'PY'
import statistics, sys
path, size, conns, cpus, digests = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5].split()
rows = {}
for line in open(path):
    f = line.split()
    if f[0] == "dd":
        print("disk (dd oflag=direct, 1 GiB):", " ".join(f[1:]))
        continue
    rows.setdefault(f[0], []).append(f[1:])
def walls(m): return [float(r[0]) for r in rows.get(m, [])]
def cpus_of(m): return [float(r[1]) + float(r[2]) for r in rows.get(m, [])]
plain_best, plain_cpu = min(walls("plain")), statistics.median(cpus_of("plain"))
print(f"\n{size} MiB from nginx on loopback, -n {conns}, {len(walls('plain'))} rounds; floor = max(plain, hash alone, "
      f"(CPU plain + CPU hash) / {cpus})\n")
print("| digest | plain best (s) | hash alone best (s) | CPU plain / hash (s) | floor (s) | verified best (s) | "
      "verified median (s) | ratio best / floor | read_bytes max (MiB) | read back (segget, max MiB) | peak RSS max (MiB) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
ok = True
for d in digests:
    hb, hc = min(walls("hash-" + d)), statistics.median(cpus_of("hash-" + d))
    floor = max(plain_best, hb, (plain_cpu + hc) / cpus)
    v = rows[d]
    vb, vm = min(walls(d)), statistics.median(walls(d))
    rb = max(int(r[4]) for r in v) / 2**20
    own = max(int(r[6]) for r in v) / 2**20
    rss = max(int(r[3]) for r in v) / 1024
    ratio = vb / floor
    ok = ok and ratio <= 1.15 and rb <= size * 0.10
    print(f"| {d} | {plain_best:.2f} | {hb:.2f} | {plain_cpu:.2f} / {hc:.2f} | {floor:.2f} | {vb:.2f} | {vm:.2f} | "
          f"{ratio:.2f} | {rb:.0f} | {own:.0f} | {rss:.0f} |")
if any(k.startswith("base-") for k in rows):
    print("\nthe build before (SEGGET_BASE), same rounds:\n")
    print("| digest | floor (s) | before: best (s) | median (s) | ratio best / floor | read_bytes max (MiB) | peak RSS max (MiB) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for d in digests:
        b = rows.get("base-" + d)
        if not b:
            continue
        hb, hc = min(walls("hash-" + d)), statistics.median(cpus_of("hash-" + d))
        floor = max(plain_best, hb, (plain_cpu + hc) / cpus)
        bw = walls("base-" + d)
        print(f"| {d} | {floor:.2f} | {min(bw):.2f} | {statistics.median(bw):.2f} | {min(bw) / floor:.2f} | "
              f"{max(int(r[4]) for r in b) / 2**20:.0f} | {max(int(r[3]) for r in b) / 1024:.0f} |")
print(f"\nplain: peak RSS max {max(int(r[3]) for r in rows['plain']) / 1024:.0f} MiB, "
      f"read_bytes max {max(int(r[4]) for r in rows['plain']) / 2**20:.0f} MiB")
for d in digests:
    print(f"{d}: walls {' '.join(f'{w:.2f}' for w in walls(d))}; hashed from memory (MiB) "
          f"{' '.join(str(int(r[5]) >> 20) for r in rows[d])}")
print(f"plain walls {' '.join(f'{w:.2f}' for w in walls('plain'))}")
for d in digests:
    if "base-" + d in rows:
        print(f"base-{d} walls {' '.join(f'{w:.2f}' for w in walls('base-' + d))}")
for d in digests:
    print(f"hash-{d} walls {' '.join(f'{w:.2f}' for w in walls('hash-' + d))}")
if "capped-plain" in rows:
    p, c = walls("capped-plain"), walls("capped-sha256")
    print(f"\nrate-limited (--max-speed): plain median {statistics.median(p):.2f} s ({' '.join(f'{w:.2f}' for w in p)}), "
          f"sha256 median {statistics.median(c):.2f} s ({' '.join(f'{w:.2f}' for w in c)}); "
          f"difference {statistics.median(c) - statistics.median(p):+.2f} s; "
          f"read_bytes max {max(int(r[4]) for r in rows['capped-sha256']) / 2**20:.0f} MiB, "
          f"peak RSS max {max(int(r[3]) for r in rows['capped-sha256']) / 1024:.0f} MiB")
print("\ntarget (ratio <= 1.15, read back <= 10 %):", "MET" if ok else "NOT MET")
sys.exit(0 if ok else 1)
PY
