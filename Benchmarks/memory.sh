#!/usr/bin/env bash
# Peak memory (maximum resident set size, from GNU time) of segget downloading from a local nginx,
# uncapped: 1 GiB and 4 GiB at -n 8 and -n 64, and 1 GiB at -n 8 with --checksum sha256. Prints a
# Markdown table. Every output is compared with the source.
#
# Usage: Benchmarks/memory.sh
# Environment:
#   SEGGET   the binary (default .build/release/segget; build: swift build -c release --product segget)
#   WORK     scratch directory (default a new one under /tmp, removed at the end); KEEP=1 keeps it
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"

SEGGET="${SEGGET:-$ROOT/.build/release/segget}"
[ -x "$SEGGET" ] || { echo "no segget binary at $SEGGET; build it: swift build -c release --product segget" >&2; exit 2; }
ensure_packages nginx time

bench_workdir memory
mkdir -p "$WORK/out"

for gib in 1 4; do
    f="$WORK/www/$gib.bin"
    [ -s "$f" ] || { log "making a $gib GiB random file"; head -c $((gib << 30)) /dev/urandom >"$f"; }
done
SUM1="$(sha256sum "$WORK/www/1.bin" | cut -d' ' -f1)"
start_nginx "$WORK/nginx" "$WORK/www"

echo "| file | -n | checksum | peak RSS (MiB) | wall (s) |"
echo "| --- | ---: | --- | ---: | ---: |"
run() {
    local gib="$1" n="$2" check="$3"
    local extra=()
    [ "$check" = sha256 ] && extra=(--checksum "sha256=$SUM1")
    rm -f "$WORK/out/"*
    /usr/bin/time -f '%M %e' -o "$WORK/time.txt" "$SEGGET" -q -n "$n" -o "$WORK/out/f" "${extra[@]}" "$NGINX_URL/$gib.bin"
    cmp -s "$WORK/out/f" "$WORK/www/$gib.bin" || { echo "output differs ($gib GiB, -n $n)" >&2; exit 2; }
    read -r kib wall <"$WORK/time.txt"
    printf '| %s GiB | %s | %s | %.1f | %s |\n' "$gib" "$n" "$check" "$(echo "$kib / 1024" | bc -l)" "$wall"
}
run 1 8 none
run 4 8 none
run 1 64 none
run 4 64 none
run 1 8 sha256
