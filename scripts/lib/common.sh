# Shared helpers for segget's scripts. Source it; do not run it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

log() { printf '==> %s\n' "$*" >&2; }

# Installs Debian packages that are missing; idempotent, quiet when all are present.
ensure_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        local sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

# Prints a free TCP port on 127.0.0.1, below the kernel's ephemeral ports (see free_port in
# scripts/tests/checks.py: one of those may be handed to another socket before the caller binds it).
free_port() {
    python3 "$ROOT/scripts/tests/checks.py"
}

# run_segget NAME EXPECTED_EXIT ARGS...: runs $SEGGET_BIN ARGS for at most 60 s, its stderr in
# $WORK/NAME.err; ends the caller through its fail() unless it exits EXPECTED_EXIT.
run_segget() {
    local name="$1" want="$2"; shift 2
    set +e
    timeout 60 "$SEGGET_BIN" "$@" 2>"$WORK/$name.err"
    local rc=$?
    set -e
    [ "$rc" -eq "$want" ] || fail "$name exited $rc, expected $want: $(cat "$WORK/$name.err")"
}

# same_bytes A B: ends the caller through its fail() unless A and B hold the same bytes.
same_bytes() { cmp -s "$1" "$2" || fail "$1 differs from $2"; }

# stop_pid PID [SIGNAL]: sends SIGNAL (TERM) to PID, gives it 10 s to exit, then SIGKILL; and reaps it.
# A cleanup never waits on a signal alone: one sent to a background job between bash's fork and
# its exec can be taken by bash's own handler in the child and never reach the program.
stop_pid() {
    local pid="$1" sig="${2:-TERM}"
    [ -n "$pid" ] || return 0
    if kill -"$sig" "$pid" 2>/dev/null; then
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

# testserver_url OUT [PID]: the URL of segget-testserver's "listening on URL" line in OUT (its
# stdout), waiting up to 30 s for it; empty when it never comes or the server (PID) exited. OUT may
# not exist yet: the background job creates it.
testserver_url() {
    local url=""
    for _ in $(seq 600); do
        url="$(sed -n 's/^listening on \(http:[^ ]*\).*/\1/p' "$1" 2>/dev/null | head -1)" || url=""
        [ -n "$url" ] && break
        [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null && break
        sleep 0.05
    done
    printf '%s' "$url"
}

# start_nginx DIR ROOT: serves ROOT on a free loopback port with scenarios as locations:
#   /        uncapped          /capped/  16 MiB/s per connection
# Sets NGINX_PID and NGINX_URL. Stop it with stop_nginx.
# Sets up $WORK for a benchmark script (a new /tmp/segget-NAME.XXXXXX unless WORK is set), with www/
# for the files and nginx/ for the server, reachable by nginx's workers (another user; mktemp makes
# 0700), and an EXIT trap that stops nginx and removes $WORK unless KEEP=1. A script with more to
# clean defines bench_cleanup_extra.
bench_workdir() {
    WORK="${WORK:-$(mktemp -d "/tmp/segget-$1.XXXXXX")}"
    mkdir -p "$WORK/www" "$WORK/nginx"
    chmod 755 "$WORK" "$WORK/www"
    trap bench_cleanup EXIT
}
bench_cleanup() {
    stop_nginx
    if declare -F bench_cleanup_extra >/dev/null; then bench_cleanup_extra; fi
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; fi
}

start_nginx() {
    local dir="$1" root="$2"
    local port
    port="$(free_port)"
    write_nginx_conf "$dir" 2 "$(cat <<CONF
    log_format bytes '\$remote_port \$status \$bytes_sent \$body_bytes_sent "\$request"';
    access_log $dir/logs/access.log bytes;
    sendfile on;
    keepalive_requests 10000;
    server {
        listen 127.0.0.1:$port;
        root $root;
        location /capped/ { alias $root/; limit_rate 16m; }
    }
CONF
)"
    launch_nginx "$dir"
    NGINX_URL="http://127.0.0.1:$port"
    export NGINX_URL
}

# write_nginx_conf DIR WORKERS HTTP: DIR/nginx.conf for an nginx of our own run from DIR (its pid,
# error log and temporary files in DIR, which gets logs/ and tmp/), WORKERS worker processes, and HTTP
# (log formats, servers) inside its http block. Start it with launch_nginx DIR.
write_nginx_conf() {
    local dir="$1" workers="$2" http="$3"
    mkdir -p "$dir/logs" "$dir/tmp"
    cat >"$dir/nginx.conf" <<CONF
worker_processes $workers;
daemon on;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
    client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp; fastcgi_temp_path $dir/tmp;
    uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;
    default_type application/octet-stream;
$http
}
CONF
}

launch_nginx() {
    local dir="$1"
    nginx -c "$dir/nginx.conf" -p "$dir"
    for _ in $(seq 50); do [ -s "$dir/nginx.pid" ] && break; sleep 0.1; done
    NGINX_PID="$(cat "$dir/nginx.pid")"
    export NGINX_PID
}

stop_nginx() {
    if [ -n "${NGINX_PID:-}" ]; then
        kill "$NGINX_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.1; done
        NGINX_PID=""
    fi
}
