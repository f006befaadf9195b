#!/usr/bin/env bash
# kill -9 and resume: downloads a 64 MiB random file from segget-testserver (throttled so that a run
# takes ~4 s at -n 8), SIGKILLs segget again and again at chosen moments — within 50 ms of the start
# (probe, preallocation), right after the start, mid-way, in the last chunks and after the last chunk
# (verify/sync/rename) — then lets it finish, and checks:
#   * the final file is byte-identical to the source (cmp) after every round;
#   * the final name never holds an incomplete file, not even right after a kill;
#   * bytes the server sent beyond one copy per round (= fetched twice) stay within the design bound
#     of the chunks in flight at each kill: kills × 8 connections × 1 MiB;
#   * in odd rounds every run passes --checksum sha256=…: a run killed while its hash reads the kept
#     part back, or takes the arriving bytes from memory, resumes into a file that verifies (exit 0).
# Needs SEGGET_BIN and SEGGET_TESTSERVER_BIN (scripts/test sets them; defaults: .build/debug).
# Usage: scripts/tests/kill-resume.sh [ROUNDS]        (default 5 rounds × 6 kills)
source "$(dirname "$0")/../lib/common.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
SEGGET_TESTSERVER_BIN="${SEGGET_TESTSERVER_BIN:-$ROOT/.build/debug/segget-testserver}"
ROUNDS="${1:-5}"
SIZE=$((64 << 20))
CHUNK=$((1 << 20))
CHUNKS=$((SIZE / CHUNK))
CONNECTIONS=8
RATE=2m                 # per connection: 8 × 2 MiB/s = 16 MiB/s, ~4 s per whole download
RUN_TIMEOUT=60          # seconds any single segget run may take

for b in "$SEGGET_BIN" "$SEGGET_TESTSERVER_BIN"; do
    [ -x "$b" ] || { echo "kill-resume: $b is missing; build first (swift build)" >&2; exit 1; }
done

WORK="$(mktemp -d /tmp/segget-kill-resume.XXXXXX)"
SERVER_PID=""
SEGGET_PID=""
cleanup() {
    stop_pid "$SEGGET_PID" KILL
    stop_pid "$SERVER_PID"
    rm -rf "$WORK"
}
trap cleanup EXIT

# The shell reports every SIGKILLed job ("Killed …") on its stderr; that is the point here, so the
# kill loop runs with stderr silenced and our own messages go to fd 3.
exec 3>&2

fail() {
    exec 2>&3
    echo "kill-resume: FAILED: $*" >&2
    if [ -n "$SERVER_PID" ] && ! kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "segget-testserver is gone: $(cat "$WORK/server.err" 2>/dev/null)" >&2
    fi
    tail -3 "$WORK/server.log" >&2 2>/dev/null || true
    for f in "$WORK"/segget-*.err; do
        [ -s "$f" ] && { echo "--- $(basename "$f")" >&2; tail -5 "$f" >&2; }
    done
    exit 1
}

now_ms() { date +%s%3N; }
START_MS="$(now_ms)"

head -c "$SIZE" /dev/urandom >"$WORK/source.bin"
SUM="$(sha256sum "$WORK/source.bin" | cut -d' ' -f1)"

"$SEGGET_TESTSERVER_BIN" --port 0 --file "big.bin=$WORK/source.bin" --log "$WORK/server.log" \
    >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
BASE="$(testserver_url "$WORK/server.out" "$SERVER_PID")"
kill -0 "$SERVER_PID" 2>/dev/null || fail "segget-testserver exited: $(cat "$WORK/server.err")"
[ -n "$BASE" ] || fail "segget-testserver did not report its address"
URL="$BASE/big.bin?rate=$RATE"

# Finished chunks according to the journal's written bitmap (0 when there is no readable journal yet).
# Layout (docs/journal-format.md): header length H = UInt32 LE at byte 12; written bitmap at H + 64.
chunks_done() {
    local j="$1" h bytes n=0 b
    [ -s "$j" ] || { echo 0; return; }
    h="$(od -An -tu4 -j12 -N4 "$j" 2>/dev/null | tr -d ' ')"
    [ -n "$h" ] || { echo 0; return; }
    bytes="$(od -An -tu1 -j$((h + 64)) -N$(((CHUNKS + 7) / 8)) "$j" 2>/dev/null)" || { echo 0; return; }
    for b in $bytes; do
        while [ "$b" -gt 0 ]; do n=$((n + (b & 1))); b=$((b >> 1)); done
    done
    echo "$n"
}

# rand_between LO HI: an integer in [LO, HI].
rand_between() { echo $(($1 + RANDOM % ($2 - $1 + 1))); }

# Waits for SEGGET_PID to end (at most RUN_TIMEOUT s) and sets RC to its exit status.
wait_segget() {
    local deadline=$(($(now_ms) + RUN_TIMEOUT * 1000))
    while kill -0 "$SEGGET_PID" 2>/dev/null; do
        if [ "$(now_ms)" -gt "$deadline" ]; then
            kill -KILL "$SEGGET_PID" 2>/dev/null || true
            wait "$SEGGET_PID" 2>/dev/null || true
            SEGGET_PID=""
            fail "a segget run took longer than ${RUN_TIMEOUT}s"
        fi
        sleep 0.01
    done
    set +e
    { wait "$SEGGET_PID"; } 2>/dev/null
    RC=$?
    set -e
    SEGGET_PID=""
}

RUNS=0
CHECKS=()   # --checksum sha256=… in odd rounds
start_segget() {
    RUNS=$((RUNS + 1))
    "$SEGGET_BIN" -q -n "$CONNECTIONS" "${CHECKS[@]}" "$URL" -o "$OUT" 2>"$WORK/segget-$RUNS.err" &
    SEGGET_PID=$!
}

KILLS=0
K_IMMEDIATE=0 K_EARLY=0 K_MID=0 K_LAST=0 K_AFTER=0
FINISHED_EARLY=0
PUBLISHED_AT_KILL=0
LEFTOVER_JOURNALS=0

# kill_now KIND: SIGKILLs the running segget; counts the kill if it was still running.
kill_now() {
    local kind="$1"
    ENDED_ITSELF=0
    if kill -KILL "$SEGGET_PID" 2>/dev/null; then
        wait_segget
        if [ "$RC" -eq 137 ]; then
            KILLS=$((KILLS + 1))
            case "$kind" in
                immediate) K_IMMEDIATE=$((K_IMMEDIATE + 1)) ;;
                early) K_EARLY=$((K_EARLY + 1)) ;;
                mid) K_MID=$((K_MID + 1)) ;;
                last) K_LAST=$((K_LAST + 1)) ;;
                after) K_AFTER=$((K_AFTER + 1)) ;;
            esac
            return
        fi
    else
        wait_segget
    fi
    # It ended on its own before the signal.
    [ "$RC" -eq 0 ] || fail "segget exited with $RC before the kill ($kind): $(cat "$WORK/segget-$RUNS.err")"
    FINISHED_EARLY=$((FINISHED_EARLY + 1))
    ENDED_ITSELF=1
}

# wait_for_chunks N: returns when the journal shows ≥ N finished chunks or segget has ended.
wait_for_chunks() {
    local want="$1"
    while kill -0 "$SEGGET_PID" 2>/dev/null; do
        [ "$(chunks_done "$OUT.segget-journal")" -ge "$want" ] && return
        sleep 0.01
    done
}

# After a kill: the final name holds nothing, or the complete file (published just before the kill).
check_after_kill() {
    if [ -e "$OUT" ]; then
        cmp -s "$OUT" "$WORK/source.bin" || fail "an incomplete or wrong file appeared at $OUT after a kill"
        PUBLISHED_AT_KILL=$((PUBLISHED_AT_KILL + 1))
        if [ -e "$OUT.segget-journal" ]; then
            LEFTOVER_JOURNALS=$((LEFTOVER_JOURNALS + 1))
            rm -f "$OUT.segget-journal"
        fi
        return 1
    fi
    return 0
}

exec 2>/dev/null
CHECKED_ROUNDS=0
for round in $(seq "$ROUNDS"); do
    OUT="$WORK/out-$round.bin"
    done_round=0
    CHECKS=()
    if [ $((round % 2)) -eq 1 ]; then
        CHECKS=(--checksum "sha256=$SUM")
        CHECKED_ROUNDS=$((CHECKED_ROUNDS + 1))
    fi
    # The last kind often finds segget already done (the final sync is short), hence three mid-way.
    for kind in immediate early mid mid mid last; do
        start_segget
        case "$kind" in
            immediate) sleep "0.0$(rand_between 0 5)$(rand_between 0 9)" ;;    # 0–59 ms
            early) sleep "0.$(rand_between 1 3)$(rand_between 0 9)" ;;          # 100–399 ms
            mid)
                have="$(chunks_done "$OUT.segget-journal")"
                lo=$((have + 4)); hi=$((have + (CHUNKS - have) * 2 / 3))
                [ "$hi" -lt "$lo" ] && hi="$lo"
                wait_for_chunks "$(rand_between "$lo" "$hi")"
                ;;
            last)
                # In the last chunks of every connection, or (target = all) after the last chunk:
                # while verifying, syncing or renaming. The journal marks a chunk a moment after its
                # bytes arrive (once the writer thread wrote them) and the final sync is short, so
                # aim a little earlier than the very end, or the run is usually over first.
                target="$(rand_between $((CHUNKS - 2 * CONNECTIONS)) "$CHUNKS")"
                wait_for_chunks "$target"
                [ "$target" -eq "$CHUNKS" ] && kind=after
                ;;
        esac
        kill_now "$kind"
        if [ "$ENDED_ITSELF" -eq 1 ]; then done_round=1; break; fi
        if ! check_after_kill; then done_round=1; break; fi
    done
    if [ "$done_round" -eq 0 ]; then
        start_segget
        wait_segget
        [ "$RC" -eq 0 ] || fail "the final run of round $round exited with $RC: $(cat "$WORK/segget-$RUNS.err")"
    fi
    [ -e "$OUT" ] || fail "round $round: no output file"
    cmp "$OUT" "$WORK/source.bin" >&3 || fail "round $round: the output differs from the source"
    [ ! -e "$OUT.segget-part" ] || fail "round $round: $OUT.segget-part left behind"
    [ ! -e "$OUT.segget-journal" ] || fail "round $round: $OUT.segget-journal left behind"
    rm -f "$OUT"
done

exec 2>&3

# Stop the server so that every request (killed ones included) is in the log, then add up.
kill -TERM "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
SENT="$(awk '{ s += $4 } END { printf "%d", s }' "$WORK/server.log")"
EXTRA=$((SENT - ROUNDS * SIZE))
BOUND=$((KILLS * CONNECTIONS * CHUNK))
ELAPSED_MS=$(($(now_ms) - START_MS))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

[ "$KILLS" -ge 20 ] || fail "only $KILLS kills landed (need at least 20)"
[ "$EXTRA" -ge 0 ] || fail "the server sent $SENT bytes, less than $ROUNDS copies of the file"
[ "$EXTRA" -le "$BOUND" ] || fail "fetched twice: $(mib "$EXTRA") exceeds the bound $(mib "$BOUND") ($KILLS kills × $CONNECTIONS × 1 MiB)"

note=""
[ "$PUBLISHED_AT_KILL" -gt 0 ] && note=", $PUBLISHED_AT_KILL kill(s) after publish ($LEFTOVER_JOURNALS left a stale journal)"
[ "$FINISHED_EARLY" -gt 0 ] && note="$note, $FINISHED_EARLY run(s) finished before their kill"
echo "kill-resume: OK: $ROUNDS rounds ($CHECKED_ROUNDS with --checksum), $RUNS runs, $KILLS kills ($K_IMMEDIATE immediate, $K_EARLY early, $K_MID mid-way, $K_LAST last-chunk, $K_AFTER after-last-chunk)$note; server sent $(mib "$SENT") for $(mib $((ROUNDS * SIZE))) of files: $(mib "$EXTRA") fetched twice (bound $(mib "$BOUND")); all outputs identical; $((ELAPSED_MS / 1000)).$(((ELAPSED_MS % 1000) / 100)) s"
