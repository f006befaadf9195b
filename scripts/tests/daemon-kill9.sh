#!/usr/bin/env bash
# kill -9 of `segget daemon` with 3 downloads active and 5 waiting (64 MiB each, 2 connections capped at
# 16 MiB/s, killed 2 s in, restarted 2 s later), then a restart: all 8 finish byte-identical, the kill
# makes the daemon fetch at most 1 % of their bytes twice (the files active at it, from segget-testserver's
# log of bytes sent, less the socket queues), a file still waiting at it is not sent more twice than the
# kernel's buffers hold at its cuts, and the history of downloads finished before the kill is intact.
# See daemon_kill9.py.
# Needs SEGGET_BIN and SEGGET_TESTSERVER_BIN (scripts/test sets them; defaults: .build/debug).
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SEGGET_TESTSERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"
for b in "$SEGGET_BIN" "$SEGGET_TESTSERVER_BIN"; do
    [ -x "$b" ] || { echo "daemon-kill9: $b is missing; build first (swift build)" >&2; exit 1; }
done
WORK="$(mktemp -d /tmp/segget-daemon-kill9.XXXXXX)"
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
python3 "$ROOT/scripts/tests/daemon_kill9.py" --segget "$SEGGET_BIN" --testserver "$SEGGET_TESTSERVER_BIN" --work "$WORK"
