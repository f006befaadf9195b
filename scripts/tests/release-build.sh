#!/usr/bin/env bash
# The binary a user gets from scripts/setup, built by scripts/setup itself (the packages it
# installs, then `swift build -c release --product segget --static-swift-stdlib`), which the rest
# of the suite never builds.
# Checks what it loads at start, from the dynamic loader's own report (`LD_DEBUG=libs`): libcurl,
# but neither libgcc_s.so.1 (the unwinder comes from its archive, see
# build-support/static-libstdc++) nor SQLite (loaded only when the daemon's queue opens its
# database). Then downloads files below and above the probe's first answer from a real nginx at
# -n 8, and has a release daemon take one over its client verb `add` (SQLite loaded at run time);
# every output must be byte-identical.
source "$(dirname "$0")/../lib/common.sh"
ensure_packages nginx
cd "$ROOT"

WORK="$(mktemp -d /tmp/segget-release.XXXXXX)"
chmod 755 "$WORK"
NGINX_PID="" DAEMON_PID=""
cleanup() {
    stop_pid "$DAEMON_PID" KILL
    stop_nginx
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "release-build: FAILED: $*" >&2; exit 1; }

"$ROOT/scripts/setup" || fail "scripts/setup failed"
BIN="$ROOT/.build/release/segget"
[ -x "$BIN" ] || fail "$BIN is missing after the build"

LD_DEBUG=libs "$BIN" --version >/dev/null 2>"$WORK/libs.txt" || fail "segget --version failed"
grep -q "libcurl.so" "$WORK/libs.txt" || fail "the loader's report names no libcurl: $(head -5 "$WORK/libs.txt")"
! grep -q "libgcc_s" "$WORK/libs.txt" || fail "the release binary loads libgcc_s.so.1 at start"
! grep -q "libsqlite3" "$WORK/libs.txt" || fail "the release binary loads SQLite at start"

mkdir -p "$WORK/www" "$WORK/out" "$WORK/dl"
chmod 755 "$WORK/www"
for s in 65536 3145735; do head -c "$s" /dev/urandom >"$WORK/www/f$s.bin"; done
chmod 644 "$WORK"/www/*
start_nginx "$WORK/nginx" "$WORK/www"
for s in 65536 3145735; do
    "$BIN" -q -n 8 -o "$WORK/out/f$s.bin" "$NGINX_URL/f$s.bin" || fail "the download of f$s.bin failed"
    cmp -s "$WORK/out/f$s.bin" "$WORK/www/f$s.bin" || fail "f$s.bin differs from the source"
done

unset SEGGET_RPC_SECRET
export SEGGET_RPC_PORT="$(free_port)" XDG_STATE_HOME="$WORK/state"
"$BIN" daemon --rpc-listen-port "$SEGGET_RPC_PORT" --dir "$WORK/dl" --database "$WORK/q.sqlite" 2>"$WORK/daemon.err" &
DAEMON_PID=$!
for _ in $(seq 600); do grep -q "serving" "$WORK/daemon.err" 2>/dev/null && break; sleep 0.05; done
grep -q "serving" "$WORK/daemon.err" || fail "the release daemon did not start: $(cat "$WORK/daemon.err")"
grep -q "libsqlite3" "/proc/$DAEMON_PID/maps" || fail "the daemon serves without SQLite loaded"
"$BIN" add "$NGINX_URL/f3145735.bin" >/dev/null || fail "segget add failed"
for _ in $(seq 300); do cmp -s "$WORK/dl/f3145735.bin" "$WORK/www/f3145735.bin" && break; sleep 0.1; done
cmp -s "$WORK/dl/f3145735.bin" "$WORK/www/f3145735.bin" || fail "the daemon's download differs from the source or is missing"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "the release daemon exited $? on SIGTERM"
DAEMON_PID=""
echo "release-build: OK: the release binary loads neither libgcc_s nor SQLite at start; 64 KiB and 3 MiB at -n 8 from nginx, and a download through its daemon (SQLite loaded at run time), byte-identical"
