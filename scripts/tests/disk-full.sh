#!/usr/bin/env bash
# Disk full: downloads into a small tmpfs (8 MiB) and checks, for each way space can run out:
#   1. the file is larger than the free space: exit 5 with "not enough space" before anything is
#      preallocated, and nothing is left behind;
#   2. another writer fills the disk while a download runs: the data file was preallocated, so the
#      download still completes byte-identical (the filler is the one that meets ENOSPC);
#   3. a write meets ENOSPC mid-download (a partial file whose unwritten regions are holes, as left
#      on file systems without fallocate, resumed on a disk that has since filled up): exit 5 with
#      the journal kept and consistent; after freeing space the same command resumes (re-fetching
#      little) and completes byte-identical;
#   4. a stream of unknown length from a server without ranges meets ENOSPC: exit 5, saying that a
#      rerun starts over (no journal: nothing to resume), and the rerun after freeing space succeeds;
#   5. the file fits exactly, its journal does not: exit 5 saying so and what to do, and the
#      reserved data file is not left filling the disk;
#   6. space is free but no inode is (a tmpfs of 8 inodes, all taken): exit 5 saying that, not
#      "the disk is full".
# Needs root (or another way to mount tmpfs); prints SKIP and exits 0 when mounting is not allowed.
# Needs SEGGET_BIN and SEGGET_TESTSERVER_BIN (scripts/test sets them; defaults: .build/debug).
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SEGGET_TESTSERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"
for b in "$SEGGET_BIN" "$SEGGET_TESTSERVER_BIN"; do
    [ -x "$b" ] || { echo "disk-full: $b is missing; build first (swift build)" >&2; exit 1; }
done

WORK="$(mktemp -d /tmp/segget-disk-full.XXXXXX)"
MNT="$WORK/mnt"
mkdir -p "$MNT"
SERVER_PID=""
FILLER_PID=""
MOUNTED=0
cleanup() {
    if [ -n "$FILLER_PID" ]; then kill "$FILLER_PID" 2>/dev/null || true; wait "$FILLER_PID" 2>/dev/null || true; fi
    stop_pid "$SERVER_PID"
    if [ "$MOUNTED" -eq 1 ]; then umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
    echo "disk-full: FAILED: $*" >&2
    echo "--- tmpfs contents:" >&2
    ls -la "$MNT" >&2 || true
    for f in "$WORK"/run-*.err; do
        [ -s "$f" ] && { echo "--- $(basename "$f")" >&2; tail -5 "$f" >&2; }
    done
    exit 1
}

if ! mount -t tmpfs -o size=8m,mode=0755 tmpfs "$MNT" 2>"$WORK/mount.err"; then
    echo "disk-full: SKIP: cannot mount a tmpfs here ($(head -1 "$WORK/mount.err")); run as root to test a full disk"
    exit 0
fi
MOUNTED=1
START=$SECONDS

head -c $((16 << 20)) /dev/urandom >"$WORK/big.bin"
head -c $((6 << 20)) /dev/urandom >"$WORK/six.bin"
head -c $(((8 << 20) - 2048)) /dev/urandom >"$WORK/near.bin"
"$SEGGET_TESTSERVER_BIN" --port 0 --file "big.bin=$WORK/big.bin" --file "six.bin=$WORK/six.bin" --file "near.bin=$WORK/near.bin" \
    --log "$WORK/server.log" >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
BASE="$(testserver_url "$WORK/server.out" "$SERVER_PID")"
[ -n "$BASE" ] || fail "segget-testserver did not start: $(cat "$WORK/server.err")"
case "$BASE" in http://127.0.0.1:*|http://\[::1\]:*) ;; *) fail "not a loopback address: $BASE" ;; esac

# segget NAME ARGS...: runs segget (60 s at most), stderr into run-NAME.err; sets RC.
run_segget() {
    local name="$1"; shift
    set +e
    timeout 60 "$SEGGET_BIN" "$@" >"$WORK/run-$name.out" 2>"$WORK/run-$name.err"
    RC=$?
    set -e
}

served() { awk '{ s += $4 } END { print s + 0 }' "$WORK/server.log"; }

# --- 1. larger than the disk --------------------------------------------------------------------
log "disk-full 1: a 16 MiB file into an 8 MiB tmpfs"
run_segget big -q -n 4 -o "$MNT/big.bin" "$BASE/big.bin"
[ "$RC" -eq 5 ] || fail "expected exit 5 for a file larger than the disk, got $RC"
grep -q "not enough space" "$WORK/run-big.err" || fail "no 'not enough space' message: $(cat "$WORK/run-big.err")"
[ -z "$(ls -A "$MNT")" ] || fail "something was left behind: $(ls -A "$MNT")"
echo "disk-full: ok: exit 5, \"$(head -c 120 "$WORK/run-big.err" | tr -d '\n')…\", nothing left behind"

# --- 2. another writer fills the disk during the download ----------------------------------------
log "disk-full 2: the disk fills up while a 6 MiB download runs"
URL2="$BASE/six.bin?rate=1m"
set +e
timeout 60 "$SEGGET_BIN" -q -n 2 --chunk-size 64k -o "$MNT/six.bin" "$URL2" >"$WORK/run-fill.out" 2>"$WORK/run-fill.err" &
SEG_PID=$!
set -e
# Up to 30 s for the start (4 s was the bound before: tight for a loaded machine); the rest takes 3 s.
for _ in $(seq 1500); do [ -e "$MNT/six.bin.segget-journal" ] && break; sleep 0.02; done
[ -e "$MNT/six.bin.segget-part" ] || fail "the download did not start"
set +e
dd if=/dev/zero of="$MNT/filler" bs=64k 2>"$WORK/dd.err"
dd_rc=$?
wait "$SEG_PID"
RC=$?
set -e
[ "$dd_rc" -ne 0 ] && grep -q "No space" "$WORK/dd.err" || fail "the filler did not fill the disk: $(cat "$WORK/dd.err")"
[ "$RC" -eq 0 ] || fail "with preallocated space the download should finish, got exit $RC: $(cat "$WORK/run-fill.err")"
cmp -s "$MNT/six.bin" "$WORK/six.bin" || fail "six.bin differs after the disk filled up"
echo "disk-full: ok: filler hit ENOSPC after $(stat -c %s "$MNT/filler") bytes; the preallocated download completed identical"
rm -f "$MNT/six.bin" "$MNT/filler"

# --- 3. ENOSPC on a write in the middle of the download ------------------------------------------
log "disk-full 3: a write meets ENOSPC mid-download; free space; the same command resumes"
OUT="$MNT/six.bin"
URL3="$BASE/six.bin?rate=1m&case=3"
# A first run stopped by --timeout leaves a preallocated part file and its journal.
run_segget t1 -q -n 2 --chunk-size 64k --sync-interval 0.2 --timeout 1.5 -o "$OUT" "$URL3"
[ "$RC" -eq 3 ] || fail "the --timeout run should exit 3, got $RC"
[ -e "$OUT.segget-journal" ] && [ -e "$OUT.segget-part" ] || fail "no journal/part after --timeout"
# Make the unwritten regions holes (what a file system without fallocate leaves), then fill the disk.
# (`fallocate --dig-holes` skips preallocated-but-unwritten extents, so zero runs are punched one by one.)
python3 - "$OUT.segget-part" <<'PY' >"$WORK/holes" || fail "could not find the unwritten regions"
import sys
block = 64 * 1024
zero = bytes(block)
runs, start, off = [], None, 0
with open(sys.argv[1], "rb") as f:
    while True:
        b = f.read(block)
        if not b:
            break
        if b == zero[:len(b)]:
            start = off if start is None else start
        elif start is not None:
            runs.append((start, off - start)); start = None
        off += len(b)
if start is not None:
    runs.append((start, off - start))
for s, n in runs:
    print(s, n)
PY
[ -s "$WORK/holes" ] || fail "the --timeout run left no unwritten region"
while read -r off len; do
    fallocate --punch-hole --offset "$off" --length "$len" "$OUT.segget-part" || fail "cannot punch holes here"
done <"$WORK/holes"
set +e
dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null
set -e
before=$(served)
run_segget enospc -q -n 2 --chunk-size 64k --sync-interval 0.2 -o "$OUT" "$URL3"
[ "$RC" -eq 5 ] || fail "a write meeting ENOSPC should exit 5, got $RC: $(cat "$WORK/run-enospc.err")"
grep -qi "disk is full\|no space\|not enough space" "$WORK/run-enospc.err" || fail "unclear message: $(cat "$WORK/run-enospc.err")"
[ ! -e "$OUT" ] || fail "a file appeared under the final name after ENOSPC"
[ -e "$OUT.segget-journal" ] && [ -e "$OUT.segget-part" ] || fail "the journal or the partial data is gone after ENOSPC"
echo "disk-full: ok: exit 5, \"$(head -c 120 "$WORK/run-enospc.err" | tr -d '\n')…\", journal kept"

rm -f "$MNT/filler"
before_resume=$(served)
run_segget resume -n 2 --chunk-size 64k -o "$OUT" "$URL3"
[ "$RC" -eq 0 ] || fail "the rerun after freeing space should succeed, got $RC: $(cat "$WORK/run-resume.err")"
cmp -s "$OUT" "$WORK/six.bin" || fail "the resumed file differs from the source"
grep -q "resuming" "$WORK/run-resume.err" || fail "the rerun did not resume: $(cat "$WORK/run-resume.err")"
[ ! -e "$OUT.segget-journal" ] && [ ! -e "$OUT.segget-part" ] || fail "journal or part left after success"
resume_bytes=$(( $(served) - before_resume ))
total=$((6 << 20))
# The journal was consistent: the resume fetched less than the whole file (only chunks not marked).
[ "$resume_bytes" -lt "$total" ] || fail "the resume re-fetched $resume_bytes bytes of $total: nothing was kept"
echo "disk-full: ok: resumed ($(grep -o 'resuming: [0-9.]* [KMGT]*i*B' "$WORK/run-resume.err" | head -1)), fetched $resume_bytes of $total bytes, identical"
rm -f "$OUT"

# --- 4. ENOSPC from a server without ranges (nothing to resume) ----------------------------------
log "disk-full 4: a stream of unknown length without ranges meets ENOSPC"
OUT4="$MNT/chunked.bin"
set +e
dd if=/dev/zero of="$MNT/filler" bs=64k count=64 2>/dev/null
set -e
run_segget chunked -q -o "$OUT4" "$BASE/chunked/six.bin"
[ "$RC" -eq 5 ] || fail "a stream meeting ENOSPC should exit 5, got $RC: $(cat "$WORK/run-chunked.err")"
grep -q "disk is full" "$WORK/run-chunked.err" || fail "unclear message: $(cat "$WORK/run-chunked.err")"
grep -q "starts over from the first byte" "$WORK/run-chunked.err" || fail "it should say a rerun starts over: $(cat "$WORK/run-chunked.err")"
if grep -q "to resume" "$WORK/run-chunked.err"; then fail "it promises a resume it cannot give: $(cat "$WORK/run-chunked.err")"; fi
[ ! -e "$OUT4" ] || fail "a file appeared under the final name after ENOSPC"
# Nothing in it can be continued: the part file goes, its space with it.
[ ! -e "$OUT4.segget-part" ] || fail "the part file of a download that cannot be continued was left behind"
echo "disk-full: ok: exit 5, \"$(head -c 160 "$WORK/run-chunked.err" | tr -d '\n')…\""
rm -f "$MNT/filler"
run_segget chunked2 -q -o "$OUT4" "$BASE/chunked/six.bin"
[ "$RC" -eq 0 ] || fail "the rerun after freeing space should succeed, got $RC: $(cat "$WORK/run-chunked2.err")"
cmp -s "$OUT4" "$WORK/six.bin" || fail "the rerun's file differs from the source"
echo "disk-full: ok: the rerun downloaded it again, identical"
rm -f "$OUT4"

# --- 5. the file fits, its journal does not ------------------------------------------------------
log "disk-full 5: a file that takes the whole disk, with no room left for its journal"
run_segget near -q -n 4 -o "$MNT/near.bin" "$BASE/near.bin"
[ "$RC" -eq 5 ] || fail "expected exit 5 when the journal does not fit, got $RC: $(cat "$WORK/run-near.err")"
grep -q "not enough space in .* for the journal" "$WORK/run-near.err" || fail "unclear message: $(cat "$WORK/run-near.err")"
grep -q "free some space and run the command again" "$WORK/run-near.err" || fail "no next step: $(cat "$WORK/run-near.err")"
[ -z "$(ls -A "$MNT")" ] || fail "the reserved data file was left filling the disk: $(ls -la "$MNT")"
echo "disk-full: ok: exit 5, \"$(head -c 160 "$WORK/run-near.err" | tr -d '\n')…\", nothing left behind"
# --- 6. no inodes left, though space is free ------------------------------------------------------
log "disk-full 6: a file system with space but no free inodes"
umount "$MNT"
MOUNTED=0
mount -t tmpfs -o size=8m,nr_inodes=8,mode=0755 tmpfs "$MNT" || fail "cannot mount a tmpfs with nr_inodes=8"
MOUNTED=1
for i in $(seq 1 16); do touch "$MNT/f$i" 2>/dev/null || break; done
run_segget inodes -q -o "$MNT/six.bin" "$BASE/six.bin"
[ "$RC" -eq 5 ] || fail "expected exit 5 without free inodes, got $RC: $(cat "$WORK/run-inodes.err")"
grep -q "no free inode" "$WORK/run-inodes.err" || fail "it should say no inodes are left, not that the disk is full: $(cat "$WORK/run-inodes.err")"
if grep -q "disk is full" "$WORK/run-inodes.err"; then fail "it says the disk is full with space free: $(cat "$WORK/run-inodes.err")"; fi
[ ! -e "$MNT/six.bin" ] || fail "a file appeared under the final name"
echo "disk-full: ok: exit 5, \"$(head -c 160 "$WORK/run-inodes.err" | tr -d '\n')…\""
echo "disk-full: all cases passed in $((SECONDS - START)) s"
