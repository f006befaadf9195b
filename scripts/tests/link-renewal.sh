#!/usr/bin/env bash
# Links that expire (issue 25): segget-testserver's signed URLs expire every 1-2 s in the middle of a
# 64 MiB download at -n 8; --refresh-command renews them (identical file), a renewed link to another
# object is refused with nothing from it written (exit 7), no renewer says how (exit 4) and a fresh
# link resumes, and segget daemon's segget.onLinkExpired is answered with aria2.changeUri by a
# WebSocket client. About 40 s. See link_renewal.py.
# Needs SEGGET_BIN and SEGGET_TESTSERVER_BIN (scripts/test sets them; defaults: .build/debug).
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SEGGET_TESTSERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"
for b in "$SEGGET_BIN" "$SEGGET_TESTSERVER_BIN"; do
    [ -x "$b" ] || { echo "link-renewal: $b is missing; build first (swift build)" >&2; exit 1; }
done
WORK="$(mktemp -d /tmp/segget-link-renewal.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
python3 "$ROOT/scripts/tests/link_renewal.py" --segget "$SEGGET_BIN" --testserver "$SEGGET_TESTSERVER_BIN" --work "$WORK"
