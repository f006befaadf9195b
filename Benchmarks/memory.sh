#!/usr/bin/env bash
# Peak memory (maximum resident set size, from GNU time) of segget downloading from a local nginx,
# uncapped: 1 GiB and 4 GiB at -n 8 and -n 64, and 1 GiB at -n 8 with --checksum sha256 (the three
# figures issue 13 asks for). Prints a Markdown table. Every output is compared with the source.
#
# Usage: Benchmarks/memory.sh
# Environment:
#   SEGGET   the binary (default .build/release/segget; build: swift build -c release --product segget)
#   SIZES    file sizes, IEC suffixes (default "1G 4G"); the --checksum run uses the first. A flat
#            peak RSS across them is the point: memory must not grow with the file.
#   WORK     scratch directory (default a new one under /tmp, removed at the end); KEEP=1 keeps it
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

SEGGET="${SEGGET:-$ROOT/.build/release/segget}"
[ -x "$SEGGET" ] || { echo "no segget binary at $SEGGET; build it: swift build -c release --product segget" >&2; exit 2; }
ensure_packages nginx time

bench_workdir memory
mkdir -p "$WORK/out"

read -r -a sizes <<<"${SIZES:-1G 4G}"
for size in "${sizes[@]}"; do
    f="$WORK/www/$size.bin"
    [ -s "$f" ] || { log "making a $size random file"; head -c "$(numfmt --from=iec "$size")" /dev/urandom >"$f"; }
done
SUM1="$(sha256sum "$WORK/www/${sizes[0]}.bin" | cut -d' ' -f1)"
start_nginx "$WORK/nginx" "$WORK/www"

echo "segget: $SEGGET ($("$SEGGET" --version 2>&1 | head -1)); $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| file | -n | checksum | peak RSS (MiB) | wall (s) |"
echo "| --- | ---: | --- | ---: | ---: |"
run() {
    local size="$1" n="$2" check="$3"
    local extra=()
    [ "$check" = sha256 ] && extra=(--checksum "sha256=$SUM1")
    rm -f "$WORK/out/"*
    /usr/bin/time -f '%M %e' -o "$WORK/time.txt" "$SEGGET" -q -n "$n" -o "$WORK/out/f" "${extra[@]}" "$NGINX_URL/$size.bin"
    cmp -s "$WORK/out/f" "$WORK/www/$size.bin" || { echo "output differs ($size, -n $n)" >&2; exit 2; }
    read -r kib wall <"$WORK/time.txt"
    printf '| %s | %s | %s | %.1f | %s |\n' "$size" "$n" "$check" "$(echo "$kib / 1024" | bc -l)" "$wall"
}
for n in 8 64; do
    for size in "${sizes[@]}"; do run "$size" "$n" none; done
done
run "${sizes[0]}" 8 sha256
