#!/usr/bin/env bash
# A fleet behind a shared cache: four segget processes download the same file at once with -n 8
# through a pull-through cache in front of an nginx origin, and the origin's access log tells how many
# body bytes it sent ($body_bytes_sent summed over the requests for that file). Then the same with
# four tasks of one `segget daemon` (four `segget add` of the URL to different output names; the
# daemon's default cap of 16 connections per host holds them to 16 together). Every
# output is compared with the source.
#
# Caches (each phase on a URL of its own, so that each starts cold):
#   varnish      Varnish 7 with its built-in VCL (a miss fetches the whole object once; requests that
#                arrive meanwhile wait for it and get their ranges from it)
#   nginx-slice  nginx proxy_cache with the slice module (1 MiB slices, each cached under its own key,
#                proxy_cache_lock on): the configuration the README recommends
#   nginx-whole  nginx proxy_cache, key without the Range, proxy_cache_lock on, proxy_force_ranges on,
#                no slices (for comparison)
#   nginx-nolock nginx proxy_cache with slices but without proxy_cache_lock (for comparison)
#   nginx-noforce as nginx-whole without proxy_force_ranges (for comparison; not run by default)
# Asserts origin bytes <= 1.05 x the file for varnish and nginx-slice (CLI and daemon); prints the
# others.
# Usage: Benchmarks/fleet-cache.sh [SIZE_MIB] [CACHES...]    (default 256, all four)
# SEGGET: the binary (default .build/release/segget, else .build/debug/segget). ORIGIN_RATE: a cap on
# each of the origin's connections (nginx limit_rate, e.g. 32m), as a CDN or a far origin has.
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$ROOT/scripts/lib/servers.sh"
MIB="${1:-256}"
shift || true
CACHES=("$@")
[ ${#CACHES[@]} -gt 0 ] || CACHES=(varnish nginx-slice nginx-whole nginx-nolock)
SEGGET="${SEGGET:-$ROOT/.build/release/segget}"
[ -x "$SEGGET" ] || SEGGET="$ROOT/.build/debug/segget"
[ -x "$SEGGET" ] || { echo "fleet-cache: no segget binary; build first" >&2; exit 1; }
ensure_server_packages nginx varnish openssl curl python3
FLEET=4

WORK="$(mktemp -d /tmp/segget-fleet.XXXXXX)"
chmod 755 "$WORK"
DAEMON_PID=""
cleanup() {
    if [ -n "$DAEMON_PID" ]; then kill -KILL "$DAEMON_PID" 2>/dev/null || true; wait "$DAEMON_PID" 2>/dev/null || true; fi
    stop_servers
    [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/www" "$WORK/out"
chmod 755 "$WORK/www"
SIZE=$((MIB << 20))
head -c "$SIZE" /dev/urandom >"$WORK/www/source.bin"
chmod 644 "$WORK/www/source.bin"
# One name per cache and client kind, all the same file (hard links: the same ETag), so that every
# phase starts with a cold cache.
for c in "${CACHES[@]}"; do
    for kind in cli daemon; do ln "$WORK/www/source.bin" "$WORK/www/$c-$kind.bin"; done
done
make_cert "$WORK/certs"
rate_conf=""
[ -n "${ORIGIN_RATE:-}" ] && rate_conf="    limit_rate $ORIGIN_RATE;"
start_nginx_origin "$WORK/origin" "$WORK/www" "$WORK/certs" "$rate_conf"
ORIGIN_LOG="$WORK/origin/logs/access.log"

# The caching nginx: one server per configuration, each with a zone of its own.
cache_ports=()
cache_servers=""
for c in nginx-slice nginx-whole nginx-nolock nginx-noforce; do
    p="$(server_port)"
    cache_ports+=("$c=$p")
    mkdir -p "$WORK/cache/$c"
    case "$c" in
    nginx-slice) conf="slice 1m; proxy_cache_key \$uri\$is_args\$args\$slice_range; proxy_set_header Range \$slice_range;
            proxy_cache_lock on; proxy_cache_lock_timeout 600s; proxy_cache_lock_age 600s;" ;;
    nginx-whole) conf="proxy_cache_key \$uri; proxy_force_ranges on;
            proxy_cache_lock on; proxy_cache_lock_timeout 600s; proxy_cache_lock_age 600s;" ;;
    nginx-nolock) conf="slice 1m; proxy_cache_key \$uri\$is_args\$args\$slice_range; proxy_set_header Range \$slice_range;" ;;
    nginx-noforce) conf="proxy_cache_key \$uri;
            proxy_cache_lock on; proxy_cache_lock_timeout 600s; proxy_cache_lock_age 600s;" ;;
    esac
    cache_servers="$cache_servers
    proxy_cache_path $WORK/cache/$c keys_zone=$c:10m max_size=2g inactive=1h use_temp_path=off;
    server {
        listen 127.0.0.1:$p;
        location / {
            proxy_pass $ORIGIN_URL;
            proxy_http_version 1.1;
            proxy_cache $c;
            proxy_cache_valid 200 206 1h;
            $conf
        }
    }"
done
chmod -R 777 "$WORK/cache"
write_nginx_conf "$WORK/cache-nginx" 2 "    access_log off;$cache_servers"
nginx -c "$WORK/cache-nginx/nginx.conf" -p "$WORK/cache-nginx" || server_fail nginx-cache "nginx -c failed" "$WORK/cache-nginx/logs/error.log"
server_register nginx-cache "$(server_pid_file nginx-cache "$WORK/cache-nginx/nginx.pid" "$WORK/cache-nginx/logs/error.log")"
cache_url() {
    local c="$1" e
    if [ "$c" = varnish ]; then echo "$VARNISH_URL"; return; fi
    for e in "${cache_ports[@]}"; do
        if [ "${e%%=*}" = "$c" ]; then echo "http://127.0.0.1:${e#*=}"; fi
    done
}
for e in "${cache_ports[@]}"; do server_wait "${e%%=*}" "$(cat "$WORK/cache-nginx/nginx.pid")" "$WORK/cache-nginx/logs/error.log" "http://127.0.0.1:${e#*=}/"; done
# Varnish's readiness check asks for a file of its own: the measured ones stay cold.
echo ready >"$WORK/www/ready.txt"
chmod 644 "$WORK/www/ready.txt"
start_varnish "$WORK/varnish" "$ORIGIN_HOSTPORT" /ready.txt "$((MIB * 2 + 64))M"

# origin_bytes NAME: body bytes the origin sent for /NAME, once its log stops growing.
origin_bytes() {
    local before=-1 now
    for _ in $(seq 50); do
        now="$(wc -c <"$ORIGIN_LOG")"
        [ "$now" = "$before" ] && break
        before="$now"
        sleep 0.2
    done
    awk -v p="/$1 " 'index($0, p) { s += $3 } END { printf "%d", s }' "$ORIGIN_LOG"
}

export SEGGET_RPC_PORT XDG_STATE_HOME="$WORK/state"
SEGGET_RPC_PORT="$(server_port)"
unset SEGGET_RPC_SECRET
"$SEGGET" daemon --rpc-listen-port "$SEGGET_RPC_PORT" --dir "$WORK/out" --database "$WORK/queue.sqlite" \
    --max-concurrent-downloads "$FLEET" 2>"$WORK/daemon.err" &
DAEMON_PID=$!
for _ in $(seq 300); do grep -q "serving" "$WORK/daemon.err" 2>/dev/null && break; sleep 0.05; done
grep -q "serving" "$WORK/daemon.err" || { echo "fleet-cache: the daemon did not start: $(cat "$WORK/daemon.err")" >&2; exit 1; }

fail=0
results=()
now() { date +%s.%N; }
for c in "${CACHES[@]}"; do
    base="$(cache_url "$c")"
    [ -n "$base" ] || { echo "fleet-cache: unknown cache $c" >&2; exit 2; }
    for kind in cli daemon; do
        name="$c-$kind.bin"
        t0="$(now)"
        if [ "$kind" = cli ]; then
            pids=()
            for i in $(seq "$FLEET"); do
                "$SEGGET" --json -n 8 -o "$WORK/out/$c-cli-$i.bin" "$base/$name" >"$WORK/$c-cli-$i.json" 2>"$WORK/$c-cli-$i.err" &
                pids+=("$!")
            done
            for i in "${!pids[@]}"; do
                wait "${pids[$i]}" || { echo "fleet-cache: $c client $((i + 1)) failed: $(tail -3 "$WORK/$c-cli-$((i + 1)).err")" >&2; fail=1; }
            done
        else
            gids=()
            for i in $(seq "$FLEET"); do gids+=("$("$SEGGET" add -n 8 -o "$c-daemon-$i.bin" "$base/$name")"); done
            for g in "${gids[@]}"; do
                for _ in $(seq 6000); do
                    st="$("$SEGGET" ls --json | python3 -c "import json,sys; print({t['gid']: t['status'] for t in json.load(sys.stdin)}.get('$g', 'gone'))")"
                    case "$st" in complete | error | removed | gone) break ;; esac
                    sleep 0.1
                done
                [ "$st" = complete ] || { echo "fleet-cache: $c daemon task $g ended $st" >&2; fail=1; }
            done
        fi
        t1="$(now)"
        for i in $(seq "$FLEET"); do
            cmp -s "$WORK/out/$c-$kind-$i.bin" "$WORK/www/source.bin" || { echo "fleet-cache: $c-$kind-$i.bin differs from the source" >&2; fail=1; }
            rm -f "$WORK/out/$c-$kind-$i.bin"
        done
        sent="$(origin_bytes "$name")"
        requests="$(grep -c "/$name " "$ORIGIN_LOG" || true)"
        ratio="$(awk -v s="$sent" -v f="$SIZE" 'BEGIN { printf "%.3f", s / f }')"
        single=""
        if [ "$kind" = cli ]; then
            # A client answered 200 to its ranged first request falls back to one stream.
            single=", $(cat "$WORK/$c"-cli-*.json | grep -c '"type":"finish".*"ranged":false' || true) of $FLEET on one stream"
        fi
        line="$(printf '%-13s %-6s %d x -n 8: origin sent %s x the file (%d bytes, %d requests), %.1f s%s' \
            "$c" "$kind" "$FLEET" "$ratio" "$sent" "$requests" "$(echo "$t1 - $t0" | bc)" "$single")"
        results+=("$line")
        echo "$line"
        case "$c" in
        varnish | nginx-slice)
            awk -v r="$ratio" 'BEGIN { exit !(r <= 1.05) }' || { echo "fleet-cache: FAILED $c $kind: $ratio x > 1.05 x" >&2; fail=1; } ;;
        esac
    done
done
echo "fleet-cache: $MIB MiB, $FLEET clients, origin connections capped at ${ORIGIN_RATE:-nothing}, $(nproc) CPUs, segget $("$SEGGET" --version 2>/dev/null | head -1), nginx $(server_version nginx), varnish $(server_version varnish)"
exit "$fail"
