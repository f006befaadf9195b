#!/usr/bin/env bash
# aria2c and `segget daemon` side by side, field by field (daemon_aria2_fields.py): the same HTTP
# downloads from a real nginx driven through paused, active, paused, removed, error and complete on
# each; tellStatus must have aria2c's keys and value types in every state, getGlobalOption and
# getOption aria2c's key sets with booleans and numbers where aria2c has them.
# JSON-RPC over GET (a call, JSONP, a batch, malformed queries) answered as aria2c answers it.
# Needs SEGGET_BIN (default .build/debug/segget), aria2c, nginx and python3 (no packages from PyPI).
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
[ -x "$SEGGET_BIN" ] || { echo "daemon-aria2-fields: $SEGGET_BIN is missing; build first" >&2; exit 1; }
command -v aria2c >/dev/null || ensure_packages aria2
command -v nginx >/dev/null || ensure_packages nginx

bench_workdir daemon-aria2-fields
trap bench_cleanup EXIT
chmod 755 "$WORK" "$WORK/www"
head -c $((24 << 20)) /dev/urandom >"$WORK/www/big.bin"
head -c $((1 << 20)) /dev/urandom >"$WORK/www/small.bin"
chmod 644 "$WORK"/www/*
start_nginx "$WORK/nginx" "$WORK/www"
mkdir -p "$WORK/run"
python3 "$ROOT/scripts/tests/daemon_aria2_fields.py" --segget "$SEGGET_BIN" --url "$NGINX_URL" --work "$WORK/run"
