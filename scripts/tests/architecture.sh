#!/usr/bin/env bash
# The architecture rules hold on the repository (see scripts/check-architecture), and each rule catches a
# violation planted in a copy of the tree (Sources/, Tests/, Examples/, docs/, Package.swift): every form of
# a CCurl import, libc I/O calls (old and new names, module-qualified, in a file that sees libc only through
# FoundationEssentials, in SeggetRPC), a file over 500 lines, raw server text (issue 23), the doc's table of
# targets drifting from Package.swift, and an import of a module the target does not declare.
source "$(dirname "$0")/../lib/common.sh"
CHECK="$ROOT/scripts/check-architecture"
"$CHECK"

WORK="$(mktemp -d /tmp/segget-architecture.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "architecture: FAILED: $*" >&2; exit 1; }
fresh_copy() {
    rm -rf "${WORK:?}"/*
    cp -R "$ROOT/Sources" "$ROOT/Tests" "$ROOT/Examples" "$ROOT/docs" "$ROOT/Package.swift" "$WORK/"
}
# The check must exit 1 and print a line that names both FILE and EXPECTED-MESSAGE.
expect_caught() {  # FILE EXPECTED-MESSAGE WHAT
    set +e
    out="$("$CHECK" "$WORK" 2>&1)"
    rc=$?
    set -e
    [ "$rc" -eq 1 ] || fail "$3 in $1 passed the check: $out"
    grep -F "$1" <<<"$out" | grep -q "$2" || fail "the check did not name $1 for $3: $out"
    planted=$((planted + 1))
}
# Each plant goes into a fresh copy: CODE appended to FILE (a new file when it does not exist).
plant() {  # FILE CODE EXPECTED-MESSAGE
    fresh_copy
    printf '%s\n' "$2" >>"$WORK/$1"
    expect_caught "$1" "$3" "a planted '$2'"
}
# Or FILE edited with a sed expression, which must change it.
plant_edit() {  # FILE SED-EXPRESSION EXPECTED-MESSAGE [NAMED-FILE]
    fresh_copy
    sed -i "$2" "$WORK/$1"
    ! cmp -s "$ROOT/$1" "$WORK/$1" || fail "the edit '$2' did not change $1"
    expect_caught "${4:-$1}" "$3" "the edit '$2' of $1"
}
planted=0
fresh_copy
"$CHECK" "$WORK" >/dev/null || fail "a clean copy of the tree fails the check"

# 1. CCurl outside SeggetCurl, in every form of import.
for form in 'import CCurl' '@preconcurrency import CCurl' 'package import CCurl' 'internal import CCurl' \
    '@_implementationOnly import CCurl' 'public import CCurl' 'import struct CCurl.CURLMsg' '@testable internal import CCurl'; do
    plant Sources/Segget/Download.swift "$form" "CCurl imported outside Sources/SeggetCurl"
done

# 2. libc I/O outside SeggetSystem: the calls of issue 24, module-qualified calls, a file that sees libc
# only through FoundationEssentials, and the RPC target's client sockets.
libc_msg="libc I/O outside Sources/SeggetSystem"
plant Sources/Segget/HTTP/RetryAfter.swift 'func planted() { let f = fopen("/tmp/x", "w"); fclose(f) }' "$libc_msg"
plant Sources/Segget/HTTP/RetryAfter.swift 'func planted(_ fd: Int32) -> Int { Int(lseek(fd, 0, SEEK_END)) }' "$libc_msg"
plant Sources/Segget/HTTP/RetryAfter.swift 'func planted() { _ = linkat(AT_FDCWD, "/a", AT_FDCWD, "/b", 0) }' "$libc_msg"
plant Sources/segget/TerminalUI.swift 'func planted() { var ws = winsize(); _ = ioctl(2, UInt(TIOCGWINSZ), &ws) }' "$libc_msg"
plant Sources/SeggetQueue/TaskStore.swift 'func planted() { _ = truncate("/tmp/x", 0) }' "$libc_msg"
plant Sources/Segget/HTTP/RetryAfter.swift 'func planted(_ fd: Int32, _ v: UnsafePointer<iovec>) { _ = pwritev(fd, v, 1, 0) }' "$libc_msg"
plant Sources/Segget/HTTP/RetryAfter.swift 'func planted() { _ = Glibc.open("/tmp/x", O_RDONLY) }' "$libc_msg"
plant Sources/Segget/Planted.swift $'import FoundationEssentials\nfunc planted() { _ = write(1, "x", 1) }' "$libc_msg"
plant Sources/SeggetQueue/Planted.swift $'@preconcurrency internal import Glibc\nlet planted = unlink("/tmp/x")' "$libc_msg"
plant Sources/SeggetRPC/RPCServer.swift 'func planted() -> Int32 { socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0) }' "$libc_msg"
plant Sources/SeggetRPC/RPCServer.swift 'func planted(_ fd: Int32, _ b: UnsafeMutableRawPointer) -> Int { recv(fd, b, 1, 0) }' "$libc_msg"

# 3. A file over 500 lines.
fresh_copy
for _ in $(seq 501); do echo '// a line'; done >"$WORK/Sources/Segget/Planted.swift"
expect_caught Sources/Segget/Planted.swift "over 500 lines" "a planted file of 501 lines"

# 4. Raw server text (issue 23): a new message that quotes a Location raw, outside the files allowed to
# read it raw; even where raw text is allowed, it never goes into a string interpolation.
plant Sources/Segget/Download.swift \
    'func planted(_ h: ResponseHead) -> SeggetError { let l = h.value("location")?.unsafeRawValue ?? ""; return SeggetError(.network, "went to " + l) }' \
    "raw server text outside the files that decide with it"
plant Sources/segget/JSONOutput.swift 'func planted(_ h: ResponseHead) -> String? { h.unsafeRawValue("etag") }' \
    "raw server text outside the files that decide with it"
plant Sources/Segget/Transport/Probe.swift \
    'func planted(_ t: ServerText) -> SeggetError { SeggetError(.network, "redirected to \(t.unsafeRawValue)") }' \
    "raw server text interpolated into a string"

# 5. The doc's table of targets against Package.swift: a dependency the doc lacks, one it invents, a
# target without a row, a row without a target.
plant_edit docs/architecture.md '/^| `SeggetQueue` /s/| Segget, SeggetSystem, /| Segget, /' "the may-use column of SeggetQueue"
plant_edit docs/architecture.md '/^| `SeggetCurl` /s/| CCurl, CCrypto |$/| CCurl, CCrypto, SeggetSystem |/' "the may-use column of SeggetCurl"
plant_edit Package.swift 's/.target(name: "SeggetSystem", /.target(name: "SeggetSystem", dependencies: ["CCRC32C"], /' \
    "the may-use column of SeggetSystem" docs/architecture.md
plant_edit docs/architecture.md '/^| `segget-sim` /d' "has no row for target segget-sim"
plant_edit docs/architecture.md 's/^| `SeggetVerify` /| `SeggetDigest` /' "names SeggetDigest, which Package.swift does not declare"

# 6. An import of a module of the package that the target does not declare (DaemonCommand's SeggetQueue).
plant Sources/Segget/HTTP/RetryAfter.swift 'import SeggetQueue' "import of a module its target does not declare"
plant Sources/SeggetJournal/Journal.swift '@preconcurrency internal import SeggetVerify' "import of a module its target does not declare"
plant_edit Package.swift '/"Segget", "SeggetSystem", "SeggetVerify", "SeggetQueue", "SeggetRPC",/s/"SeggetQueue", //' \
    "imports SeggetQueue" Sources/segget/DaemonCommand.swift
plant Tests/SeggetRPCTests/RPCServerTests.swift 'import NIOPosix' "import of a module its target does not declare"

echo "architecture: $planted planted violations caught (CCurl imports, libc I/O, file length, raw server text, the doc's table, undeclared imports)"
