#!/usr/bin/env bash
# HTTPS against a real nginx (TLS 1.2/1.3, a self-signed certificate, so `-k`): files on both sides
# of the first answer's size over TLS (8 KiB, see `Prober.tlsFirstAnswerBytes`) and of the probe's
# 1 MiB, each fetched with -n 8 and -n 1, a batch of all of them, one with --checksum and one streamed
# to stdout; every output must be byte-identical. Also checks, in nginx's log, that a download of
# several connections over TLS opens with the small first answer (`bytes=0-8191`) and that its first
# connection then asks for its range on the same TCP connection.
# Needs SEGGET_BIN (scripts/test sets it; default .build/debug/segget), nginx and openssl.
source "$(dirname "$0")/../lib/common.sh"
ensure_packages nginx openssl

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
[ -x "$SEGGET_BIN" ] || { echo "tls: $SEGGET_BIN is missing; build first (swift build)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/segget-tls.XXXXXX)"
chmod 755 "$WORK"
NGINX_PID=""
cleanup() { stop_nginx; rm -rf "$WORK"; }
trap cleanup EXIT

mkdir -p "$WORK/www" "$WORK/nginx/logs" "$WORK/nginx/tmp" "$WORK/out"
chmod 755 "$WORK/www"
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -days 2 \
    -keyout "$WORK/nginx/key.pem" -out "$WORK/nginx/cert.pem" >/dev/null 2>&1
sizes=(5000 8192 8193 300000 1048576 3145735 41943040)
for s in "${sizes[@]}"; do head -c "$s" /dev/urandom >"$WORK/www/f$s.bin"; done
chmod 644 "$WORK"/www/*

port="$(free_port)"
write_nginx_conf "$WORK/nginx" 1 "$(cat <<CONF
    log_format tls '\$connection \$status "\$http_range" \$request_uri';
    access_log $WORK/nginx/logs/access.log tls;
    keepalive_requests 10000;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $WORK/nginx/cert.pem;
        ssl_certificate_key $WORK/nginx/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        root $WORK/www;
    }
CONF
)"
launch_nginx "$WORK/nginx"
URL="https://127.0.0.1:$port"

fail=0
check() { # check NAME FILE EXPECTED
    if cmp -s "$2" "$3"; then return 0; fi
    echo "tls: FAILED $1: $2 differs from $3" >&2
    fail=1
}

for s in "${sizes[@]}"; do
    for n in 8 1; do
        out="$WORK/out/n$n-f$s.bin"
        if ! timeout 60 "$SEGGET_BIN" -q -k -n "$n" -o "$out" "$URL/f$s.bin"; then
            echo "tls: FAILED -n $n of $s bytes: exit $?" >&2
            fail=1
            continue
        fi
        check "-n $n, $s bytes" "$out" "$WORK/www/f$s.bin"
    done
done

# The first request of the 40 MiB -n 8 download asked for the small first answer, and the next
# request on its TCP connection was connection 0's range from byte 8192.
: >"$WORK/nginx/logs/access.log"
timeout 60 "$SEGGET_BIN" -q -k -n 8 -o "$WORK/out/logged.bin" "$URL/f41943040.bin" || { echo "tls: FAILED logged run" >&2; fail=1; }
check "logged run" "$WORK/out/logged.bin" "$WORK/www/f41943040.bin"
first="$(head -1 "$WORK/nginx/logs/access.log")"
first_conn="$(echo "$first" | cut -d' ' -f1)"
case "$first" in
*'"bytes=0-8191"'*) ;;
*) echo "tls: FAILED the first request over TLS was not bytes=0-8191: $first" >&2; fail=1 ;;
esac
# nginx logs a request once it has sent the answer, which may be a moment after segget has it all:
# wait (10 s at most) for the connection's second line rather than a fixed 0.2 s.
for _ in $(seq 200); do
    second_on_conn="$(awk -v c="$first_conn" '$1 == c' "$WORK/nginx/logs/access.log" | sed -n 2p)"
    [ -n "$second_on_conn" ] && break
    sleep 0.05
done
case "$second_on_conn" in
*'"bytes=8192-'*) ;;
*) echo "tls: FAILED connection 0 did not go on from byte 8192 on the probe's TCP connection: '$second_on_conn'" >&2; fail=1 ;;
esac

# A batch of every file, 4 at a time.
for s in "${sizes[@]}"; do echo "$URL/f$s.bin"; done >"$WORK/list.txt"
if timeout 120 "$SEGGET_BIN" -q -k -j 4 -i "$WORK/list.txt" -d "$WORK/out/batch"; then
    for s in "${sizes[@]}"; do check "batch, $s bytes" "$WORK/out/batch/f$s.bin" "$WORK/www/f$s.bin"; done
else
    echo "tls: FAILED the batch" >&2
    fail=1
fi

# A batch of 16 files of 64 KiB, 8 at a time (each may take 2 connections): its files share the
# host, so their first requests ask for the whole file, and each file takes one request. The first
# file's probe goes out while no other holds the host, and asks for 8 KiB as a single download does.
# Before, every file took two (8 KiB, then the rest): 32 requests.
mkdir -p "$WORK/www/small"
chmod 755 "$WORK/www/small"
for i in $(seq -w 1 16); do head -c 65536 /dev/urandom >"$WORK/www/small/s$i.bin"; echo "$URL/small/s$i.bin"; done >"$WORK/small.txt"
chmod 644 "$WORK"/www/small/*
before="$(wc -l <"$WORK/nginx/logs/access.log")"
if timeout 120 "$SEGGET_BIN" -q -k -j 8 -i "$WORK/small.txt" -d "$WORK/out/small"; then
    for i in $(seq -w 1 16); do check "small batch, s$i" "$WORK/out/small/s$i.bin" "$WORK/www/small/s$i.bin"; done
    sleep 0.3
    asked=$(($(wc -l <"$WORK/nginx/logs/access.log") - before))
    if [ "$asked" -gt 17 ]; then
        echo "tls: FAILED the batch of 16 small files made $asked requests (at most 17: one a file, two for the first)" >&2
        fail=1
    fi
else
    echo "tls: FAILED the batch of small files" >&2
    fail=1
fi

# A checked download and a stream.
sum="$(sha256sum "$WORK/www/f3145735.bin" | cut -d' ' -f1)"
timeout 60 "$SEGGET_BIN" -q -k -n 8 --checksum "sha256=$sum" -o "$WORK/out/checked.bin" "$URL/f3145735.bin" || { echo "tls: FAILED the checked download" >&2; fail=1; }
check "checked" "$WORK/out/checked.bin" "$WORK/www/f3145735.bin"
timeout 60 "$SEGGET_BIN" -q -k -n 8 -o - "$URL/f41943040.bin" >"$WORK/out/streamed.bin" || { echo "tls: FAILED the stream" >&2; fail=1; }
check "stream" "$WORK/out/streamed.bin" "$WORK/www/f41943040.bin"

if [ "$fail" -eq 0 ]; then
    echo "tls: ${#sizes[@]} sizes at -n 8 and -n 1, a batch, a checked download and a stream over HTTPS: identical; the first answer over TLS is 8 KiB and connection 0 continues on its connection; a batch of small files asked $asked requests for 16 files"
fi
exit "$fail"
