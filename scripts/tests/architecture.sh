#!/usr/bin/env bash
# The architecture rules of issue 15 hold on Sources/ (see scripts/check-architecture), and the rule of
# issue 23 (raw server text only where decided) catches a violation planted in a copy of Sources/.
source "$(dirname "$0")/../lib/common.sh"
CHECK="$ROOT/scripts/check-architecture"
"$CHECK"

WORK="$(mktemp -d /tmp/segget-architecture.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "architecture: FAILED: $*" >&2; exit 1; }
# Each plant goes into a fresh copy of Sources/; the check must name the file and exit 1.
plant() {  # FILE CODE EXPECTED-MESSAGE
    rm -rf "$WORK/Sources" && cp -R "$ROOT/Sources" "$WORK/Sources"
    printf '%s\n' "$2" >>"$WORK/$1"
    set +e
    out="$("$CHECK" "$WORK" 2>&1)"
    rc=$?
    set -e
    [ "$rc" -eq 1 ] || fail "a planted $3 in $1 passed the check: $out"
    grep -q "$3.*$1" <<<"$out" || fail "the check did not name $1 for a planted $3: $out"
}
rm -rf "$WORK/Sources" && cp -R "$ROOT/Sources" "$WORK/Sources"
"$CHECK" "$WORK" >/dev/null || fail "a clean copy of Sources/ fails the check"
# A new message that quotes a Location raw, outside the files allowed to read it raw.
plant Sources/Segget/Download.swift \
    'func planted(_ h: ResponseHead) -> SeggetError { let l = h.value("location")?.unsafeRawValue ?? ""; return SeggetError(.network, "went to " + l) }' \
    "raw server text outside the files that decide with it"
plant Sources/segget/JSONOutput.swift 'func planted(_ h: ResponseHead) -> String? { h.unsafeRawValue("etag") }' \
    "raw server text outside the files that decide with it"
# Even where raw text is allowed, it never goes into a string interpolation.
plant Sources/Segget/Transport/Probe.swift \
    'func planted(_ t: ServerText) -> SeggetError { SeggetError(.network, "redirected to \(t.unsafeRawValue)") }' \
    "raw server text interpolated into a string"
echo "architecture: a planted raw use of server text is caught (outside the allowed files, and interpolated)"
