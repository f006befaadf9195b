#!/usr/bin/env bash
# The daemon's speed schedule through aria2's RPC: read back, refused when bad, followed live by a
# running download, kept across a restart (daemon_schedule.py).
# Needs SEGGET_BIN and SEGGET_TESTSERVER_BIN (scripts/test sets them; defaults: .build/debug).
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SEGGET_TESTSERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"
for b in "$SEGGET_BIN" "$SEGGET_TESTSERVER_BIN"; do
    [ -x "$b" ] || { echo "daemon-schedule: $b is missing; build first (swift build)" >&2; exit 1; }
done
WORK="$(mktemp -d /tmp/segget-daemon-schedule.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
python3 "$ROOT/scripts/tests/daemon_schedule.py" --segget "$SEGGET_BIN" --testserver "$SEGGET_TESTSERVER_BIN" --work "$WORK"
