#!/usr/bin/env bash
# aria2's JSON-RPC as front-ends use it: aria2p (the Python library and its command line) drives
# `segget daemon` and then `aria2c --enable-rpc` through the same scenario (daemon_aria2p.py): three
# downloads with out, dir and header, pause/unpause and remove mid-download, byte-identical files,
# WebSocket notifications for the right gids, addMetalink of a .meta4 (aria2p's add_metalink: base64)
# with getServers while it runs. Passing against aria2c shows that the script checks
# aria2's behaviour. Files come from a real nginx that logs the test header and caps /slow/.
# Needs SEGGET_BIN (default .build/debug/segget), python3-venv and PyPI for aria2p (cached in
# .build/aria2p-venv). Usage: scripts/tests/daemon-aria2p.sh [segget|aria2c ...]
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(segget aria2c)
[ -x "$SEGGET_BIN" ] || { echo "daemon-aria2p: $SEGGET_BIN is missing; build first" >&2; exit 1; }
command -v aria2c >/dev/null || ensure_packages aria2

VENV="$ROOT/.build/aria2p-venv"
if [ ! -x "$VENV/bin/aria2p" ]; then
    log "creating $VENV with aria2p and websockets"
    python3 -c 'import ensurepip' 2>/dev/null || ensure_packages python3-venv
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q aria2p websockets || {
        rm -rf "$VENV"
        echo "daemon-aria2p: could not install aria2p and websockets from PyPI (pip failed above); this test needs them." >&2
        exit 1
    }
fi

WORK="$(mktemp -d /tmp/segget-daemon-aria2p.XXXXXX)"
NGINX_PID=""
cleanup() { stop_nginx; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/www" "$WORK/nginx/logs" "$WORK/nginx/tmp"
chmod 755 "$WORK" "$WORK/www"
for f in a b c; do head -c $((8 << 20)) /dev/urandom >"$WORK/www/$f.bin"; done
for f in d e m; do head -c $((12 << 20)) /dev/urandom >"$WORK/www/$f.bin"; done
chmod 644 "$WORK"/www/*

port="$(free_port)"
write_nginx_conf "$WORK/nginx" 1 "$(cat <<CONF
    log_format test '\$status \$body_bytes_sent "\$request" hdr=\$http_x_segget_test';
    access_log $WORK/nginx/logs/access.log test;
    server {
        listen 127.0.0.1:$port;
        root $WORK/www;
        location /slow/ { alias $WORK/www/; limit_rate 1m; }
        location /slow2/ { alias $WORK/www/; limit_rate 1m; }
    }
CONF
)"
launch_nginx "$WORK/nginx"

status=0
summary=()
for target in "${TARGETS[@]}"; do
    bin="$SEGGET_BIN"
    [ "$target" = aria2c ] && bin="$(command -v aria2c)"
    mkdir -p "$WORK/$target"
    log "aria2p against $target"
    if "$VENV/bin/python" "$ROOT/scripts/tests/daemon_aria2p.py" --target "$target" --bin "$bin" \
        --base "http://127.0.0.1:$port" --www "$WORK/www" --log "$WORK/nginx/logs/access.log" \
        --work "$WORK/$target" >"$WORK/$target.out" 2>&1; then
        summary+=("$(tail -1 "$WORK/$target.out")")
    else
        status=1
        summary+=("$target: FAILED: $(tail -1 "$WORK/$target.out")")
        cat "$WORK/$target.out" >&2
        tail -20 "$WORK/$target/$target.log" >&2 2>/dev/null || true
    fi
done
# The checks side by side, one column per target.
if [ ${#TARGETS[@]} -gt 1 ]; then
    paste -d'|' "$WORK/${TARGETS[0]}.out" "$WORK/${TARGETS[1]}.out" | awk -F'|' '{ printf "%-60.60s | %s\n", $1, $2 }'
fi
printf 'daemon-aria2p: %s\n' "${summary[@]}"
exit $status
