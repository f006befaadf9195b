#!/usr/bin/env bash
# The real-server matrix: segget against servers of other projects, each installed from Debian (or
# PyPI, in a venv) and started here on loopback ports with a configuration of our own
# (scripts/lib/servers.sh): Apache 2.4 (HTTP; HTTPS with mod_ssl and mod_http2), lighttpd, Caddy (HTTP,
# HTTPS), h2o (HTTPS), nginx (HTTPS with http2), Varnish in front of nginx, squid as a forward proxy
# (plain and CONNECT), microsocks as a SOCKS5 proxy, moto's S3 server (a presigned URL) and Python's
# http.server (no ranges). For every server and protocol (HTTP/1.1, and HTTP/2 with --http2 where the
# server speaks it):
#   * a download at -n 8 byte-identical to the source (cmp), its --json lines checked (one finish
#     with the length, the connections and `ranged`, the summary last, nothing resumed, received
#     less refetched equal to the length less resumed; without ranges, one request), and in the
#     server's access log, where it keeps one, every request of the run in the protocol asked for;
#   * kill -9 in the middle (once the journal marks 8 of 33 chunks finished; --max-speed makes the
#     run last ~3 s), the same command again: identical, a "resuming" notice, and its --json finish
#     resumed at least the chunks the journal held at the kill (Python's http.server, without
#     ranges: killed once its progress shows 8 MiB; the rerun starts over as one stream and says
#     that the server ignored the range);
#   * the first download's command once more, without --json: "already completed", the file left as
#     it was, and one request (a probe for one byte) where the server keeps a log;
# a batch of 48 small files over HTTP/2 (-j 16: at most 16 connections) from nginx, Apache, Caddy and
# h2o (from the last three: one request a file), and one of 24 paced files from nginx under
# --max-connections-per-host 2 (at most 2 connections, more than 2 answers at once);
# PausedHandleReuseTests (SeggetCurlTests) against Caddy over HTTP/2, which needs a real HTTP/2
# server that goes on sending a reset stream's data; and one task of `segget daemon` (segget add -n 8)
# from Apache, identical.
# A server that does not start fails the script with its name. Needs SEGGET_BIN (default
# .build/debug/segget) and the test binary (swift build --build-tests).
source "$(dirname "$0")/../lib/common.sh"
source "$ROOT/scripts/lib/servers.sh"

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
[ -x "$SEGGET_BIN" ] || { echo "servers: $SEGGET_BIN is missing; build first (swift build)" >&2; exit 1; }
ensure_server_packages apache2 lighttpd caddy h2o nginx varnish squid microsocks openssl curl python3
T0="$(date +%s)"

WORK="$(mktemp -d /tmp/segget-servers.XXXXXX)"
chmod 755 "$WORK"
SEGGET_PID="" DAEMON_PID=""
FAILURES=()
cleanup() {
    stop_pid "$SEGGET_PID" KILL
    stop_pid "$DAEMON_PID" KILL
    stop_servers
    # A failed run keeps its outputs, part files, journals and --json lines for a look.
    if [ "${KEEP:-0}" = 1 ] || [ ${#FAILURES[@]} -gt 0 ]; then echo "servers: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

CHUNK=$((1 << 20))
SIZE=$((32 * CHUNK + 12345))   # not a whole number of chunks: the last chunk is short
CHUNKS=$(((SIZE + CHUNK - 1) / CHUNK))
KILL_AT_CHUNKS=8         # of 33: a quarter in
mkdir -p "$WORK/www" "$WORK/out" "$WORK/runs"
chmod 755 "$WORK/www"
head -c "$SIZE" /dev/urandom >"$WORK/www/m.bin"
chmod 644 "$WORK/www/m.bin"
make_cert "$WORK/certs"

log "starting the servers"
start_nginx_origin "$WORK/nginx" "$WORK/www" "$WORK/certs"
start_apache "$WORK/apache" "$WORK/www" "$WORK/certs"
start_lighttpd "$WORK/lighttpd" "$WORK/www"
start_caddy "$WORK/caddy" "$WORK/www" "$WORK/certs"
start_h2o "$WORK/h2o" "$WORK/www" "$WORK/certs"
start_varnish "$WORK/varnish" "$ORIGIN_HOSTPORT" /m.bin
start_squid "$WORK/squid" "$ORIGIN_URL/m.bin"
start_microsocks "$WORK/microsocks" "$ORIGIN_URL/m.bin"
start_python_http "$WORK/python" "$WORK/www"
start_moto "$WORK/moto"
MOTO_URL="$(moto_object "$WORK/www/m.bin" m.bin)" || server_fail moto "could not put the object through boto3" "$WORK/moto/moto.log"

# One case a line: NAME|URL|ACCESS LOG|PATTERN every new line of it must match|segget options. The
# patterns name the protocol only (squid's: the request it carried): a request segget cuts (a
# shortened range, a lost race) is logged with the status given to a closed request (nginx 499,
# squid TCP_MISS_ABORTED/000).
# The log is the server's own where it keeps one (the proxies': their access logs, where each request
# they carried shows); "-" for none.
CASES=(
    "apache http/1.1|$APACHE_HTTP_URL/m.bin|$WORK/apache/access.log|^HTTP/1\.1 |"
    "apache https http/1.1|$APACHE_HTTPS_URL/m.bin|$WORK/apache/access.log|^HTTP/1\.1 |-k"
    "apache https h2|$APACHE_HTTPS_URL/m.bin|$WORK/apache/access.log|^HTTP/2\.0 |-k --http2"
    "lighttpd http/1.1|$LIGHTTPD_URL/m.bin|-||"
    "caddy http/1.1|$CADDY_HTTP_URL/m.bin|$WORK/caddy/access.log|\"proto\": *\"HTTP/1\.1\"|"
    "caddy https http/1.1|$CADDY_HTTPS_URL/m.bin|$WORK/caddy/access.log|\"proto\": *\"HTTP/1\.1\"|-k"
    "caddy https h2|$CADDY_HTTPS_URL/m.bin|$WORK/caddy/access.log|\"proto\": *\"HTTP/2\.0\"|-k --http2"
    "h2o https http/1.1|$H2O_URL/m.bin|$WORK/h2o/access.log|^HTTP/1\.1 |-k"
    "h2o https h2|$H2O_URL/m.bin|$WORK/h2o/access.log|^HTTP/2 |-k --http2"
    "nginx https http/1.1|$ORIGIN_TLS_URL/m.bin|$WORK/nginx/logs/access.log|^HTTP/1\.1 |-k"
    "nginx https h2|$ORIGIN_TLS_URL/m.bin|$WORK/nginx/logs/access.log|^HTTP/2\.0 |-k --http2"
    "varnish+nginx http/1.1|$VARNISH_URL/m.bin|-||"
    "squid proxy http/1.1|$ORIGIN_URL/m.bin|$WORK/squid/access.log| GET http://127\.0\.0\.1:[0-9]+/m\.bin |--proxy $SQUID_PROXY"
    "squid proxy CONNECT https|$ORIGIN_TLS_URL/m.bin|$WORK/squid/access.log| CONNECT 127\.0\.0\.1:[0-9]+ |--proxy $SQUID_PROXY -k"
    "microsocks socks5h http/1.1|$ORIGIN_URL/m.bin|-||--proxy $SOCKS_PROXY"
    "moto s3 presigned http/1.1|$MOTO_URL|-||"
    "python http.server (no ranges)|$PYTHON_HTTP_URL/m.bin|-||"
)

case_failed() { FAILURES+=("$NAME: $*"); echo "servers: FAILED $NAME: $*" >&2; }

lines_of() { if [ -e "$1" ]; then wc -l <"$1"; else echo 0; fi; }
# small_batch SUB COUNT BASE LOG PATTERN OPTIONS...: COUNT new files of 64 KiB in www/SUB, from the
# server at BASE (an https:// URL) by one run of segget --json -k --http2 OPTIONS into out/SUB (its
# lines in runs/SUB-h2.json); checks its exit, every file against its source and every request of the
# run in the server's log LOG against PATTERN (its HTTP/2 lines) (case_failed). Sets FROM (the log's
# lines before the run); returns 1 when segget failed or a file differs.
small_batch() {
    local sub="$1" count="$2" base="$3" log="$4" pattern="$5" rc=0
    shift 5
    mkdir -p "$WORK/www/$sub" "$WORK/out/$sub"
    for i in $(seq -w 1 "$count"); do head -c 65536 /dev/urandom >"$WORK/www/$sub/f$i.bin"; done
    chmod 755 "$WORK/www/$sub"
    chmod 644 "$WORK/www/$sub/"*
    for i in $(seq -w 1 "$count"); do echo "$base/$sub/f$i.bin"; done >"$WORK/$sub-urls.txt"
    FROM="$(lines_of "$log")"
    timeout 120 "$SEGGET_BIN" --json -k --http2 "$@" -i "$WORK/$sub-urls.txt" -d "$WORK/out/$sub" \
        >"$WORK/runs/$sub-h2.json" 2>"$WORK/runs/$sub-h2.err" || rc=$?
    if [ "$rc" -ne 0 ]; then
        case_failed "segget exited $rc: $(tail -c 600 "$WORK/runs/$sub-h2.err")"
        return 1
    fi
    for i in $(seq -w 1 "$count"); do
        cmp -s "$WORK/out/$sub/f$i.bin" "$WORK/www/$sub/f$i.bin" || { case_failed "$sub/f$i.bin differs from the source"; return 1; }
    done
    check_log "$log" "$FROM" "$pattern"
}
# Runs one suite of the Swift tests alone, in a process of its own, with the environment given as
# VAR=value words: run_suite_alone SUITE TEST LOG VAR=value... Fails the case unless the process
# exits 0 and says TEST passed.
run_suite_alone() {
    local suite=$1 test=$2 log=$3 rc
    shift 3
    if [ ! -x "$ROOT/.build/debug/seggetPackageTests.xctest" ]; then
        case_failed "the test binary is missing; build with 'swift build --build-tests' first"
        return 1
    fi
    set +e
    (cd "$ROOT" && env "$@" timeout 300 .build/debug/seggetPackageTests.xctest --testing-library swift-testing \
        --filter "$suite" >"$log" 2>&1)
    rc=$?
    set -e
    if [ "$rc" -ne 0 ] || ! grep -q "Test $test passed" "$log"; then
        case_failed "exit status $rc: $(grep -E "✘|recorded an issue|error" "$log" | head -5)"
        return 1
    fi
}

# check_log LOG FROM PATTERN: the lines LOG gained after line FROM (servers log a request once it
# ended, so wait up to 5 s for the first) all match PATTERN.
check_log() {
    local log="$1" from="$2" pattern="$3" new
    for _ in $(seq 50); do
        new="$(tail -n +"$((from + 1))" "$log" 2>/dev/null || true)"
        [ -n "$new" ] && break
        sleep 0.1
    done
    sleep 0.3  # the run's last requests may end a moment after the first
    new="$(tail -n +"$((from + 1))" "$log")"
    [ -n "$new" ] || { case_failed "no request of the run in $log"; return; }
    local bad
    bad="$(grep -cvE "$pattern" <<<"$new" || true)"
    [ "$bad" -eq 0 ] || case_failed "$bad of $(wc -l <<<"$new") requests in $log do not match /$pattern/, e.g. $(grep -vE "$pattern" <<<"$new" | head -1)"
}

# run_segget TAG OUT URL OPTIONS...: one run in the foreground; sets RC.
run_segget() {
    local tag="$1" out="$2" url="$3"
    shift 3
    set +e
    timeout 120 "$SEGGET_BIN" --json -n 8 "$@" -o "$out" "$url" >"$RUN.$tag.json" 2>"$RUN.$tag.err"
    RC=$?
    set -e
}

case_no=0
for c in "${CASES[@]}"; do
    IFS='|' read -r NAME URL LOG PATTERN OPTS <<<"$c"
    read -ra opts <<<"$OPTS"
    case_no=$((case_no + 1))
    RUN="$WORK/runs/$case_no"
    ranged=yes connections=8
    case "$NAME" in python*) ranged=no connections=1 ;; esac
    failures_before=${#FAILURES[@]}
    t_case="$(date +%s%N)"

    # 1. A whole download.
    from=0
    [ "$LOG" != - ] && from="$(lines_of "$LOG")"
    py_from="$(lines_of "$WORK/python/http.server.log")"
    out="$WORK/out/$case_no.bin"
    run_segget full "$out" "$URL" "${opts[@]}"
    if [ "$RC" -ne 0 ]; then
        case_failed "segget exited $RC: $(tail -c 600 "$RUN.full.err") $(grep '"error"' "$RUN.full.json" | head -1)"
        continue
    fi
    cmp -s "$out" "$WORK/www/m.bin" || case_failed "the download at -n 8 differs from the source"
    no_ranges=()
    # Without ranges, one request: the stream continues the first answer (on loopback no warm-ups).
    [ "$ranged" = no ] && no_ranges=(--notice "ignored the byte range" --requests 1)
    full="$(python3 "$ROOT/scripts/lib/segget_runs.py" json "$RUN.full.json" --size "$SIZE" \
        --connections "$connections" --ranged "$ranged" --fresh "${no_ranges[@]}")" || case_failed "--json: $full"
    [ "$LOG" != - ] && check_log "$LOG" "$from" "$PATTERN"
    if [ "$ranged" = no ]; then
        # The server's own count: one GET, none cut (a cut answer leaves a traceback in its log).
        sleep 0.3
        py_new="$(tail -n +"$((py_from + 1))" "$WORK/python/http.server.log")"
        gets="$(grep -c '"GET /m\.bin' <<<"$py_new" || true)"
        cuts="$(grep -cE 'Broken pipe|reset by peer' <<<"$py_new" || true)"
        [ "$gets" -eq 1 ] && [ "$cuts" -eq 0 ] || case_failed "the server logged $gets requests and $cuts cut answers, expected 1 and 0"
    fi

    # 2. kill -9 in the middle, then the same command again.
    out="$WORK/out/$case_no-resumed.bin"
    "$SEGGET_BIN" --json -n 8 --max-speed 10M "${opts[@]}" -o "$out" "$URL" >"$RUN.killed.json" 2>"$RUN.killed.err" &
    SEGGET_PID=$!
    at=""
    if [ "$ranged" = yes ]; then
        held="$(python3 "$ROOT/scripts/lib/segget_runs.py" wait-chunks "$out.segget-journal" "$CHUNKS" "$KILL_AT_CHUNKS" "$SEGGET_PID")"
    else
        # No journal of chunks for a plain stream: its progress lines say how far it got.
        held="$(python3 "$ROOT/scripts/lib/segget_runs.py" wait-completed "$RUN.killed.json" $((KILL_AT_CHUNKS * CHUNK)) "$SEGGET_PID")"
    fi
    if [ "$ranged" = yes ]; then at="$held chunks in the journal"; else at="$((held >> 20)) MiB received"; fi
    if kill -KILL "$SEGGET_PID" 2>/dev/null; then
        wait "$SEGGET_PID" 2>/dev/null || true
        SEGGET_PID=""
        [ ! -e "$out" ] || case_failed "the output name exists right after kill -9 in the middle"
        [ -e "$out.segget-part" ] || case_failed "no $out.segget-part after the kill"
        cp "$out.segget-journal" "$RUN.journal-at-kill" 2>/dev/null || true
        if [ "$ranged" = yes ]; then
            [ "$held" -ge "$KILL_AT_CHUNKS" ] && [ "$held" -lt "$CHUNKS" ] ||
                case_failed "killed with $held of $CHUNKS chunks in the journal, not in the middle"
        else
            [ "$held" -ge $((KILL_AT_CHUNKS * CHUNK)) ] && [ "$held" -lt "$SIZE" ] ||
                case_failed "killed after $held of $SIZE bytes, not in the middle"
        fi
        run_segget resumed "$out" "$URL" --max-speed 10M "${opts[@]}"
        if [ "$RC" -ne 0 ]; then
            case_failed "the run after kill -9 exited $RC: $(tail -c 600 "$RUN.resumed.err")"
        else
            cmp -s "$out" "$WORK/www/m.bin" || case_failed "the download resumed after kill -9 differs from the source"
            if [ "$ranged" = yes ]; then
                resumed="$(python3 "$ROOT/scripts/lib/segget_runs.py" json "$RUN.resumed.json" --size "$SIZE" \
                    --connections 8 --ranged yes --resumed-at-least $((held * CHUNK)) --notice "resuming" \
                    --opened-at-least 8)" ||
                    case_failed "after kill -9, --json: $resumed"
            else
                # No ranges: nothing can be resumed; the run starts over as one stream.
                resumed="$(python3 "$ROOT/scripts/lib/segget_runs.py" json "$RUN.resumed.json" --size "$SIZE" \
                    --connections 1 --ranged no --fresh --notice "ignored the byte range")" ||
                    case_failed "after kill -9, --json: $resumed"
            fi
        fi
    else
        wait "$SEGGET_PID" 2>/dev/null || true
        SEGGET_PID=""
        case_failed "segget ended before the kill (held $held chunks): $(tail -c 300 "$RUN.killed.err")"
    fi
    # 3. The whole download's command once more, without --json (a single download, which probes the
    # server once for the name it gives the file; with a file already under the name, the probe asks
    # for one byte): exit 0, "already completed", the file left as it was (same inode, same
    # modification time, same bytes), and where the server keeps a log, one request in it.
    out="$WORK/out/$case_no.bin"
    before="$(stat -c '%i %Y.%y' "$out" 2>/dev/null || true)"
    [ "$LOG" != - ] && from="$(lines_of "$LOG")"
    set +e
    timeout 60 "$SEGGET_BIN" -n 8 "${opts[@]}" -o "$out" "$URL" >"$RUN.again.out" 2>"$RUN.again.err"
    RC=$?
    set -e
    again="exit $RC"
    if [ "$RC" -ne 0 ]; then
        case_failed "the finished download's command run again exited $RC: $(tail -c 600 "$RUN.again.err")"
    else
        grep -q "already completed by an earlier run" "$RUN.again.err" ||
            case_failed "run again, it did not say the file was already completed: $(tail -c 300 "$RUN.again.err")"
        [ "$(stat -c '%i %Y.%y' "$out" 2>/dev/null || true)" = "$before" ] ||
            case_failed "run again, the finished file was written again ($before, now $(stat -c '%i %Y.%y' "$out"))"
        cmp -s "$out" "$WORK/www/m.bin" || case_failed "run again, the file differs from the source"
        if [ "$LOG" != - ]; then
            check_log "$LOG" "$from" "$PATTERN"
            n="$(($(lines_of "$LOG") - from))"
            [ "$n" -eq 1 ] || case_failed "run again, $n requests in $LOG (one probe expected)"
            again="one request"
        else
            again="done"
        fi
    fi

    ms=$((($(date +%s%N) - t_case) / 1000000))
    if [ ${#FAILURES[@]} -eq "$failures_before" ]; then
        printf '  %-32s ok  %5.1f s  whole: %s; after kill -9 with %s: %s; run again: %s\n' "$NAME" \
            "$(awk -v m="$ms" 'BEGIN { print m / 1000 }')" "$full" "$at" "$resumed" "$again"
    fi
done

# 2b. A batch over HTTP/2: 48 files of 64 KiB from nginx, -j 16 --http2. The files go as streams on
# the host's connections, all 48 in flight at once (up to 32 per connection), on no more than the 16
# connections of -j (libcurl 7.88, its streams per connection capped without a cap on connections,
# opened one for nearly every request: 66-337 for 400 files through the WAN); every request in
# nginx's log over HTTP/2; every file identical.
NAME="nginx https h2: a batch of 48 small files"
failures_before=${#FAILURES[@]}
NGINX_H2=("$ORIGIN_TLS_URL" "$WORK/nginx/logs/access.log" "^HTTP/2\.0 ")
if small_batch batch 48 "${NGINX_H2[@]}" -j 16; then
    opened="$(python3 -c 'import json,sys; print([o for o in map(json.loads, open(sys.argv[1])) if o["type"] == "summary"][-1]["connectionsOpened"])' "$WORK/runs/batch-h2.json")"
    [ "$opened" -le 16 ] || case_failed "the batch opened $opened connections, expected at most 16 (-j 16)"
fi
[ ${#FAILURES[@]} -eq "$failures_before" ] && echo "  $NAME: identical, $opened connections opened, every request over HTTP/2"

# 2c. --max-connections-per-host caps a batch's HTTP/2 connections, not its streams: 24 files of
# 64 KiB that nginx paces at 256 KiB/s each (0.25 s an answer, so that answers at once overlap in its
# log), --http2 -j 8 --max-connections-per-host 2. At most 2 connections in nginx's log, and more than
# 2 answers at once on them: the files share the 2 connections as streams (before, the cap counted
# requests, 2 at a time: the 24 answers two by two, 3 s where they take 0.3 s together). And 24
# requests: at -j 8 a file may take 2 connections, and its probe over HTTP/2 is held at the head, so
# that a file one connection downloads takes one request (before, over TLS, the first 8 files' probes
# asked for 8 KiB and each file's rest was asked for again: 32 requests).
NAME="nginx https h2: a batch under --max-connections-per-host 2"
failures_before=${#FAILURES[@]}
if small_batch paced 24 "${NGINX_H2[@]}" -j 8 --max-connections-per-host 2; then
    # Every answer of the run: its connection, and the most answers in progress at one moment.
    read -r conns most < <(tail -n +"$((FROM + 1))" "$WORK/nginx/logs/access.log" | python3 -c '
import sys
spans, conns = [], set()
for line in sys.stdin:
    f = line.split()
    conn, end, took = f[-3], float(f[-2]), float(f[-1])
    conns.add(conn)
    spans += [(end - took, 1), (end, -1)]
now = most = 0
for _, d in sorted(spans, key=lambda s: (s[0], s[1])):
    now += d
    most = max(most, now)
print(len(conns), most)')
    [ "$conns" -le 2 ] || case_failed "nginx logged $conns connections, expected at most 2 (--max-connections-per-host 2)"
    [ "$most" -gt 2 ] || case_failed "at most $most answers at once: the cap of 2 held the streams, not the connections"
    asked="$(($(lines_of "$WORK/nginx/logs/access.log") - FROM))"
    [ "$asked" -eq 24 ] || case_failed "nginx logged $asked requests for the 24 files, expected one a file"
fi
[ ${#FAILURES[@]} -eq "$failures_before" ] && echo "  $NAME: identical, $conns connections, up to $most answers at once, $asked requests"

# 2d. The same batch from the other HTTP/2 servers of the matrix, whose streams and framing are not
# nginx's (Apache's mod_http2 allows 100 streams a connection, h2o 100, Caddy 250; nginx 128): 48 files
# of 64 KiB at -j 16 --http2. Every file identical, every request in the server's log over HTTP/2, at
# most the 16 connections of -j, and one request a file: the first 16 files' first requests ask for
# the whole file, the others' for their first 64 KiB, which is all of it (a second request for any
# file, or a request cut and asked again, shows as more than 48 here).
for server in apache caddy h2o; do
    case "$server" in
    apache) where=("$APACHE_HTTPS_URL" "$WORK/apache/access.log" "^HTTP/2\.0 ") ;;
    caddy) where=("$CADDY_HTTPS_URL" "$WORK/caddy/access.log" "\"proto\": *\"HTTP/2\.0\"") ;;
    h2o) where=("$H2O_URL" "$WORK/h2o/access.log" "^HTTP/2 ") ;;
    esac
    NAME="$server https h2: a batch of 48 small files"
    failures_before=${#FAILURES[@]}
    if small_batch "batch-$server" 48 "${where[@]}" -j 16; then
        read -r opened asked < <(python3 -c '
import json, sys
s = [o for o in map(json.loads, open(sys.argv[1])) if o["type"] == "summary"][-1]
print(s["connectionsOpened"], s["requests"])' "$WORK/runs/batch-$server-h2.json")
        logged="$(($(lines_of "${where[1]}") - FROM))"
        [ "$opened" -le 16 ] || case_failed "the batch opened $opened connections, expected at most 16 (-j 16)"
        [ "$asked" -eq 48 ] || case_failed "segget made $asked requests for the 48 files, expected one a file"
        [ "$logged" -eq 48 ] || case_failed "$server logged $logged requests for the 48 files, expected one a file"
    fi
    [ ${#FAILURES[@]} -eq "$failures_before" ] && echo "  $NAME: identical, $opened connections opened, $logged requests, every one over HTTP/2"
done

# 2e. The SOCKS proxy goes away in the middle of a download (a second microsocks of its own, killed by
# PID once a MiB of the file is in): segget says the proxy failed, naming it (before, only "Couldn't
# connect to server", as if the origin had gone), ends with exit 3 (network) after its one retry,
# keeps the part file and its journal and puts nothing under the final name; the same command through
# the matrix's microsocks then resumes it, identical. The file (4 MiB) comes over HTTPS from nginx's
# /paced/ (256 KiB/s an answer): unpaced, the proxy would have passed the whole file into the
# client's socket buffers before it was killed, and the download would have ended well.
NAME="microsocks killed mid-download"
failures_before=${#FAILURES[@]}
mkdir -p "$WORK/www/paced" "$WORK/microsocks-dies"
head -c $((4 * CHUNK + 12345)) /dev/urandom >"$WORK/www/paced/proxy-dies.bin"
chmod 644 "$WORK/www/paced/proxy-dies.bin"
p="$(server_port)"
microsocks -i 127.0.0.1 -p "$p" >"$WORK/microsocks-dies/microsocks.log" 2>&1 &
dying=$!
server_register microsocks-dies "$dying"
server_wait microsocks-dies "$dying" "$WORK/microsocks-dies/microsocks.log" "$ORIGIN_URL/m.bin" --proxy "socks5h://127.0.0.1:$p"
out="$WORK/out/proxy-dies.bin"
RUN="$WORK/runs/proxy-dies"
url="$ORIGIN_TLS_URL/paced/proxy-dies.bin"
timeout 120 "$SEGGET_BIN" --json -k -n 8 --retries 1 --proxy "socks5h://127.0.0.1:$p" -o "$out" "$url" >"$RUN.json" 2>"$RUN.err" &
SEGGET_PID=$!
held="$(python3 "$ROOT/scripts/lib/segget_runs.py" wait-completed "$RUN.json" "$CHUNK" "$SEGGET_PID")"
stop_pid "$dying"
set +e
wait "$SEGGET_PID"
rc=$?
set -e
SEGGET_PID=""
[ "$held" -ge "$CHUNK" ] || case_failed "the proxy was stopped after $held bytes, not in the middle"
[ "$rc" -eq 3 ] || case_failed "segget exited $rc, expected 3 (network): $(tail -c 400 "$RUN.err")"
grep -q "the proxy socks5h://127.0.0.1:$p failed" "$RUN.json" || case_failed "the failure does not name the proxy: $(grep '"error"' "$RUN.json" | head -c 400)"
[ ! -e "$out" ] || case_failed "a file under the final name after the proxy went away"
[ -e "$out.segget-part" ] && [ -e "$out.segget-journal" ] || case_failed "the part file or its journal is gone"
run_segget resumed "$out" "$url" -k --proxy "$SOCKS_PROXY"
if [ "$RC" -ne 0 ]; then
    case_failed "the run through the other proxy exited $RC: $(tail -c 400 "$RUN.resumed.err")"
else
    cmp -s "$out" "$WORK/www/paced/proxy-dies.bin" || case_failed "the download resumed through the other proxy differs from the source"
    resumed="$(python3 "$ROOT/scripts/lib/segget_runs.py" json "$RUN.resumed.json" --size $((4 * CHUNK + 12345)) \
        --connections 8 --ranged yes --resumed-at-least 1 --notice "resuming")" ||
        case_failed "through the other proxy, --json: $resumed"
fi
[ ${#FAILURES[@]} -eq "$failures_before" ] && echo "  $NAME: exit 3 naming the proxy after $((held >> 10)) KiB; resumed through another proxy, identical: $resumed"

# 3. A handle removed while paused and reused (PausedHandleReuseTests, SeggetCurlTests), against this
# Caddy over HTTP/2: libcurl 7.88 handed the removed transfer's held bytes to the next transfer.
NAME="caddy https h2: PausedHandleReuseTests"
if run_suite_alone PausedHandleReuseTests "aHandleRemovedWhilePausedStartsItsNextTransferClean()" \
    "$WORK/paused-reuse.log" SEGGET_H2_URL="$CADDY_HTTPS_URL/m.bin" SEGGET_H2_FILE="$WORK/www/m.bin"; then
    echo "  caddy https h2: a handle removed while paused gives its next transfer only that transfer's bytes (PausedHandleReuseTests)"
fi

# 3b. OpenSSL stays usable while the process exits (TLSExitTests against this nginx over TLS, and
# DigestAtExitTests where hashing is OpenSSL's first use), each in a test process of its own: a thread
# freeing a TLS connection beside OpenSSL's exit-time cleanup crashed a batch about once in 400 runs.
# Exit status 3: OpenSSL was cleaned up at exit.
NAME="nginx https: OpenSSL outlives the exit handlers (TLSExitTests)"
if run_suite_alone TLSExitTests "openSSLOutlivesTheExitHandlers()" "$WORK/exit-tls.log" \
    SEGGET_EXIT_URL="$ORIGIN_TLS_URL/m.bin"; then
    echo "  nginx https: OpenSSL still usable after the exit handlers, a TLS connection freed there (TLSExitTests)"
fi
NAME="OpenSSL outlives the exit handlers where hashing used it first (DigestAtExitTests)"
if run_suite_alone DigestAtExitTests "openSSLOutlivesTheExitHandlers()" "$WORK/exit-digest.log" SEGGET_EXIT_DIGEST=1; then
    echo "  OpenSSL still usable after the exit handlers where hashing used it first, a digester freed there (DigestAtExitTests)"
fi

# 3c. A file Apache serves the second after it was modified: its ETag weak (W/) for that second and
# strong after, and a date in If-Range honoured only once the file is 60 s old (every range before
# that answered 200 with the whole file). Before: the stream failed (exit 7), the file fell back to one
# connection, and a resume begun while the tag was weak started over. Each step writes the file anew.
NAME="apache http/1.1: a file modified just now"
failures_before=${#FAILURES[@]}
fresh="$WORK/www/fresh.bin"
head -c "$SIZE" /dev/urandom >"$fresh.tmp" && chmod 644 "$fresh.tmp" && mv "$fresh.tmp" "$fresh"
from="$(lines_of "$WORK/apache/access.log")"
set +e
timeout 120 "$SEGGET_BIN" -q -n 8 -o - "$APACHE_HTTP_URL/fresh.bin" >"$WORK/out/fresh-stream.bin" 2>"$WORK/runs/fresh-stream.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || case_failed "the stream (-o -) exited $rc: $(tail -c 400 "$WORK/runs/fresh-stream.err")"
[ "$rc" -ne 0 ] || cmp -s "$WORK/out/fresh-stream.bin" "$fresh" || case_failed "the stream differs from the source"
whole="$(tail -n +"$((from + 1))" "$WORK/apache/access.log" | grep -c ' 200 ' || true)"
[ "$whole" -eq 0 ] || case_failed "$whole of the stream's ranges were answered with the whole file (200)"
head -c "$SIZE" /dev/urandom >"$fresh.tmp" && chmod 644 "$fresh.tmp" && mv "$fresh.tmp" "$fresh"
RUN="$WORK/runs/fresh"
run_segget file "$WORK/out/fresh.bin" "$APACHE_HTTP_URL/fresh.bin"
[ "$RC" -eq 0 ] || case_failed "the download exited $RC: $(tail -c 400 "$RUN.file.err")"
[ "$RC" -ne 0 ] || cmp -s "$WORK/out/fresh.bin" "$fresh" || case_failed "the download differs from the source"
! grep -q "ignored the byte range" "$RUN.file.err" "$RUN.file.json" || case_failed "fell back to one connection: $(grep -h -m1 ignored "$RUN.file.err" "$RUN.file.json")"
# Interrupted within the tag's weak second, resumed after it.
head -c "$SIZE" /dev/urandom >"$fresh.tmp" && chmod 644 "$fresh.tmp" && mv "$fresh.tmp" "$fresh"
out="$WORK/out/fresh-resumed.bin"
"$SEGGET_BIN" -q -n 2 --max-speed 8M -o "$out" "$APACHE_HTTP_URL/fresh.bin" 2>"$RUN.killed.err" &
SEGGET_PID=$!
sleep 0.6
kill -KILL "$SEGGET_PID" 2>/dev/null || true
wait "$SEGGET_PID" 2>/dev/null || true
SEGGET_PID=""
sleep 1.2
run_segget resumed "$out" "$APACHE_HTTP_URL/fresh.bin"
[ "$RC" -eq 0 ] || case_failed "the resumed download exited $RC: $(tail -c 400 "$RUN.resumed.err")"
[ "$RC" -ne 0 ] || cmp -s "$out" "$fresh" || case_failed "the resumed download differs from the source"
! grep -q "changed" "$RUN.resumed.err" "$RUN.resumed.json" || case_failed "the resume started over: $(grep -h -m1 changed "$RUN.resumed.err" "$RUN.resumed.json")"
[ ${#FAILURES[@]} -eq "$failures_before" ] && echo "  $NAME: streamed at -n 8 with no range answered 200, saved at -n 8 without falling back to one connection, resumed after its ETag turned strong, each identical"

# 4. One task of the daemon, from Apache.
export SEGGET_RPC_PORT XDG_STATE_HOME="$WORK/state"
SEGGET_RPC_PORT="$(server_port)"
unset SEGGET_RPC_SECRET
NAME="daemon task (apache http/1.1)"
mkdir -p "$WORK/daemon"
"$SEGGET_BIN" daemon --rpc-listen-port "$SEGGET_RPC_PORT" --dir "$WORK/daemon" --database "$WORK/queue.sqlite" \
    2>"$WORK/daemon.err" &
DAEMON_PID=$!
for _ in $(seq 300); do grep -q "serving" "$WORK/daemon.err" 2>/dev/null && break; sleep 0.05; done
if gid="$("$SEGGET_BIN" add -n 8 -o daemon.bin "$APACHE_HTTP_URL/m.bin" 2>"$WORK/add.err")"; then
    st=""
    for _ in $(seq 600); do
        st="$("$SEGGET_BIN" ls --json | python3 -c "import json,sys; print({t['gid']: t['status'] for t in json.load(sys.stdin)}.get('$gid', 'gone'))")"
        case "$st" in complete | error | removed | gone) break ;; esac
        sleep 0.1
    done
    if [ "$st" != complete ]; then
        case_failed "the task ended $st: $(tail -3 "$WORK/daemon.err")"
    elif ! cmp -s "$WORK/daemon/daemon.bin" "$WORK/www/m.bin"; then
        case_failed "the daemon's file differs from the source"
    else
        echo "  daemon: segget add -n 8 from apache http/1.1: complete, identical"
    fi
else
    case_failed "segget add failed: $(cat "$WORK/add.err")"
fi
kill -TERM "$DAEMON_PID" 2>/dev/null || true
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=""

elapsed=$(($(date +%s) - T0))
if [ ${#FAILURES[@]} -gt 0 ]; then
    echo "servers: FAILED ${#FAILURES[@]} check(s) of ${#CASES[@]} server cases and the daemon task:" >&2
    printf '  %s\n' "${FAILURES[@]}" >&2
    exit 1
fi
echo "servers: OK: ${#CASES[@]} server/protocol cases (whole download at -n 8, --json, kill -9 and resume, each identical; run again: already completed) and a daemon task; $(( $(stat -c %s "$WORK/www/m.bin") >> 20 )) MiB file; ${elapsed} s"
