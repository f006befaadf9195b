#!/usr/bin/env bash
# `segget daemon` is safe by default (issue 26): token file made on first start (0600, kept across
# restarts) and required over HTTP and WebSocket from any origin; DNS-rebinding Host values refused
# (HTTP, preflight, WebSocket upgrade); wrong tokens slowed down and logged once per burst while the
# right token is answered at once; client verbs and `segget token` with no secret given;
# --rpc-insecure-no-secret on loopback only; the systemd unit with and without daemon.env. Standard
# library Python only, everything on loopback. See daemon_security.py.
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
[ -x "$SEGGET_BIN" ] || { echo "daemon-security: $SEGGET_BIN is missing; build first (swift build)" >&2; exit 1; }
WORK="$(mktemp -d /tmp/segget-daemon-security.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
python3 "$ROOT/scripts/tests/daemon_security.py" --segget "$SEGGET_BIN" --unit "$ROOT/contrib/segget-daemon.service" \
    --work "$WORK"
