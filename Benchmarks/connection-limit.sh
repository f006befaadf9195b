#!/usr/bin/env bash
# Issue 23, "servers that push back": a host that allows 3 requests at once per client and refuses the
# rest. A 192 MiB file from segget-testserver on 127.0.0.1, every response paced at 8 MiB/s
# (`maxconc=3&rate=8m`: 3 connections give 24 MiB/s, 8.0 s), refused four ways:
#   429+Retry-After  reject=429&retryafter=1
#   429+RateLimit    reject=429&ratelimit=1       (the IETF draft's fields only, no Retry-After)
#   429              reject=429
#   503              reject=503
# Each tool (segget -n 8, segget -n 3 as the reference, aria2c -x 8 -s 8, axel -n 8) gets a fresh query
# tag per run, so the server counts from zero; after each run the server's counts (GET /_stats?reset=1)
# say how many requests it admitted and refused and the most it served at once. Every output is
# compared with the source. Prints a markdown table: seconds, exit code, admitted, refused, max served.
# Usage: Benchmarks/connection-limit.sh --segget BIN --testserver BIN [--reps N]
set -euo pipefail
REPS=1
while [ $# -gt 0 ]; do
    case "$1" in
    --segget) SEGGET="$2"; shift 2 ;;
    --testserver) SERVER="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
WORK="$(mktemp -d /tmp/segget-connlimit.XXXXXX)"
head -c $((192 << 20)) /dev/urandom >"$WORK/src"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$SERVER" --port "$PORT" --file f="$WORK/src" >"$WORK/server.log" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null; rm -rf "$WORK"' EXIT
sleep 0.5
base="http://127.0.0.1:$PORT/normal/f"
echo "| refusal | tool | seconds | exit | identical | admitted | refused | max served at once |"
echo "|---|---|---|---|---|---|---|---|"
run=0
for rep in $(seq "$REPS"); do
    for variant in "reject=429&retryafter=1" "reject=429&ratelimit=1" "reject=429" "reject=503"; do
        for tool in segget-n8 segget-n3 aria2c axel; do
            run=$((run + 1))
            url="$base?maxconc=3&rate=8m&$variant&run=$run"
            out="$WORK/out-$run"
            case "$tool" in
            segget-n8) cmd=("$SEGGET" -q -n 8 -o "$out" "$url") ;;
            segget-n3) cmd=("$SEGGET" -q -n 3 -o "$out" "$url") ;;
            aria2c) cmd=(aria2c -q -x 8 -s 8 -k 1M --allow-overwrite=true -d "$WORK" -o "out-$run" "$url") ;;
            axel) cmd=(axel -q -n 8 -o "$out" "$url") ;;
            esac
            curl -s "http://127.0.0.1:$PORT/_stats?reset=1" >/dev/null
            start=$(date +%s.%N)
            set +e
            timeout 120 "${cmd[@]}" >/dev/null 2>"$WORK/err"
            rc=$?
            set -e
            secs=$(echo "$(date +%s.%N) - $start" | bc)
            stats=$(curl -s "http://127.0.0.1:$PORT/_stats")
            same=no
            cmp -s "$out" "$WORK/src" && same=yes
            admitted=$(grep -oE 'admitted=[0-9]+' <<<"$stats" | cut -d= -f2)
            refused=$(grep -oE 'rejected=[0-9]+' <<<"$stats" | cut -d= -f2)
            maxin=$(grep -oE 'max-in-flight=[0-9]+' <<<"$stats" | cut -d= -f2)
            printf '| %s | %s | %.2f | %s | %s | %s | %s | %s |\n' "$variant" "$tool" "$secs" "$rc" "$same" "$admitted" "$refused" "$maxin"
            rm -f "$out" "$out".*
        done
    done
done
