#!/usr/bin/env bash
# Hostile and broken JSON-RPC requests to `segget daemon` (malformed JSON, unknown method, bad token,
# dir outside the root through a symlink, out with '/', headers with CR/LF, oversize requests, bytes
# that are not HTTP): each answer is checked, and the daemon must still answer afterwards. The same
# requests then go to aria2c for comparison (printed only). See daemon_bad_inputs.py.
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
[ -x "$SEGGET_BIN" ] || { echo "daemon-bad-inputs: $SEGGET_BIN is missing; build first" >&2; exit 1; }
WORK="$(mktemp -d /tmp/segget-daemon-bad.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/segget" "$WORK/aria2c"
python3 "$ROOT/scripts/tests/daemon_bad_inputs.py" --target segget --bin "$SEGGET_BIN" --work "$WORK/segget"
if command -v aria2c >/dev/null; then
    echo "--- the same requests to aria2c, for comparison (not checked):"
    python3 "$ROOT/scripts/tests/daemon_bad_inputs.py" --target aria2c --bin "$(command -v aria2c)" --work "$WORK/aria2c" || true
fi
