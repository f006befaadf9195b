#!/usr/bin/env bash
# Links that expire at 1 GiB (issue 25's must-show): segget-testserver's signed links last TTL
# seconds (default 3) while a 1 GiB file comes at -n 8, 16 MiB/s per request, 4 MiB per request;
# `segget --refresh-command` and `segget daemon` with a WebSocket client answering
# segget.onLinkExpired with aria2.changeUri must both finish byte-identical. Prints the renewals and
# times. Uses .build/release binaries when built (swift build -c release), else .build/debug.
# Usage: Benchmarks/link-renewal.sh [SIZE_MIB] [TTL]
source "$(dirname "$0")/../scripts/lib/common.sh"

BUILD="$ROOT/.build/release"
[ -x "$BUILD/segget" ] && [ -x "$BUILD/segget-testserver" ] || BUILD="$ROOT/.build/debug"
WORK="$(mktemp -d /tmp/segget-link-renewal-bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
echo "binaries: $BUILD"
python3 "$ROOT/scripts/tests/link_renewal.py" --segget "$BUILD/segget" --testserver "$BUILD/segget-testserver" \
    --work "$WORK" --size-mib "${1:-1024}" --ttl "${2:-3}" --query "rate=16m&max=4m" --renewals-only
