#!/usr/bin/env bash
# webui-aria2 (the built app in shared/clients/webui-aria2, served on loopback) in headless Chromium
# against `segget daemon` started with no secret: with the token from the daemon's token file (the
# link `segget token` prints) it lists a task; its buttons resume, pause, resume and remove; the
# expanded row shows a piece map and "Connections" without "(Seeders)"; Global Settings shows segget's
# values; with a wrong token it shows its authentication alert. See daemon_webui.py. Screenshots of
# each step are kept as artefacts in .build/test-artefacts/daemon-webui (SEGGET_ARTEFACTS sets
# another parent). Needs Debian's chromium and chromium-driver and Selenium from PyPI (cached in
# .build/webui-venv).
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
[ -x "$SEGGET_BIN" ] || { echo "daemon-webui: $SEGGET_BIN is missing; build first" >&2; exit 1; }
WEBUI="${SEGGET_WEBUI_DIR:-$ROOT/../shared/clients/webui-aria2/docs}"
[ -f "$WEBUI/index.html" ] || { echo "daemon-webui: webui-aria2 is not at $WEBUI (set SEGGET_WEBUI_DIR)" >&2; exit 1; }
ensure_packages chromium chromium-driver

VENV="$ROOT/.build/webui-venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import selenium' 2>/dev/null; then
    log "creating $VENV with selenium"
    python3 -c 'import ensurepip' 2>/dev/null || ensure_packages python3-venv
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q selenium || {
        rm -rf "$VENV"
        echo "daemon-webui: could not install selenium from PyPI (pip failed above); this test needs it." >&2
        exit 1
    }
fi

WORK="$(mktemp -d /tmp/segget-daemon-webui.XXXXXX)"
SHOTS="${SEGGET_ARTEFACTS:-$ROOT/.build/test-artefacts}/daemon-webui"
rm -rf "$SHOTS"
trap 'rm -rf "$WORK"' EXIT
"$VENV/bin/python" "$ROOT/scripts/tests/daemon_webui.py" --segget "$SEGGET_BIN" --webui "$WEBUI" --work "$WORK" \
    --shots "$SHOTS"
