# Real servers of other projects, each started on free loopback ports with a configuration of our own
# in a folder of the caller's, for the server matrix (scripts/tests/servers.sh), the recorder of their
# response heads (scripts/record-heads) and the shared-cache benchmark (Benchmarks/fleet-cache.sh);
# scripts/tests/ca-certificate.sh takes apache_head for an Apache of its own.
# Source it after common.sh; do not run it.
#
# Every start_* function waits until its server answers, registers the server's PID and sets the
# variables it names; a server that does not answer ends the caller with the server's name and the
# tail of its log (server_fail). stop_servers stops every registered PID, newest first: SIGTERM, then
# SIGKILL after 10 s. Nothing is ever stopped by its name.

SERVER_NAMES=()
SERVER_PIDS=()
SERVER_PORTS_TAKEN=" "

# server_fail NAME WHY [LOG]: ends the caller, naming the server.
server_fail() {
    echo "servers: $1 did not start: $2" >&2
    if [ -n "${3:-}" ] && [ -s "$3" ]; then tail -n 15 "$3" | sed 's/^/    /' >&2; fi
    exit 1
}

# server_port: a free loopback port that no earlier call of this shell handed out.
server_port() {
    local p
    for _ in $(seq 20); do
        p="$(free_port)"
        case "$SERVER_PORTS_TAKEN" in *" $p "*) continue ;; esac
        SERVER_PORTS_TAKEN="$SERVER_PORTS_TAKEN$p "
        echo "$p"
        return 0
    done
    echo "servers: no free port" >&2
    return 1
}

server_register() { SERVER_NAMES+=("$1"); SERVER_PIDS+=("$2"); }

# server_wait NAME PID LOG URL [CURL OPTIONS]: waits (15 s at most) until URL gets an HTTP answer
# (any status: a folder without an index answers 403) through curl, failing with NAME when PID ends
# first or time runs out.
server_wait() {
    local name="$1" pid="$2" log="$3" url="$4"
    shift 4
    local code
    for _ in $(seq 150); do
        code="$(curl -s -k -o /dev/null -w '%{http_code}' --max-time 2 "$@" "$url" 2>/dev/null || true)"
        case "$code" in [1-5]??) return 0 ;; esac
        kill -0 "$pid" 2>/dev/null || server_fail "$name" "its process $pid ended" "$log"
        sleep 0.1
    done
    server_fail "$name" "no HTTP answer from $url within 15 s" "$log"
}

# server_pid_file NAME FILE LOG: the PID a daemonizing server wrote to FILE (waits 10 s for it).
server_pid_file() {
    for _ in $(seq 100); do
        if [ -s "$2" ]; then cat "$2"; return 0; fi
        sleep 0.1
    done
    server_fail "$1" "no PID in $2" "$3"
}

stop_servers() {
    local i
    for ((i = ${#SERVER_PIDS[@]} - 1; i >= 0; i--)); do
        stop_pid "${SERVER_PIDS[$i]}"
    done
    SERVER_NAMES=()
    SERVER_PIDS=()
}

# ensure_server_packages PKG...: ensure_packages, with Debian's post-install kept from starting the
# packaged services (they would listen on port 80 and others on every address): a policy-rc.d that
# refuses, removed afterwards only if this call made it.
ensure_server_packages() {
    local policy=/usr/sbin/policy-rc.d made=0 rc=0 sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod +x "$policy"
        made=1
    fi
    ensure_packages "${missing[@]}" || rc=$?
    [ "$made" -eq 0 ] || $sudo rm -f "$policy"
    return "$rc"
}

# server_version PKG: the Debian package's version, for reports.
server_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"; }

# make_cert DIR: DIR/cert.pem and DIR/key.pem, self-signed for 127.0.0.1 and localhost (clients use -k).
make_cert() {
    mkdir -p "$1"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
        -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -addext "basicConstraints=critical,CA:FALSE" \
        -keyout "$1/key.pem" -out "$1/cert.pem" >/dev/null 2>&1
    chmod 644 "$1/key.pem" "$1/cert.pem"  # read by servers that drop to another user first
}

# A folder a server that drops to another user can write its logs into.
server_dir() { mkdir -p "$1"; chmod 777 "$1"; }

# apache_head DIR: the lines every Apache of the tests begins its config with: modules for files
# over HTTP, HTTPS and HTTP/2, and its PID file, error log, mutex and TLS session cache in DIR.
apache_head() {
    local dir="$1" m=/usr/lib/apache2/modules
    cat <<CONF
ServerRoot /etc/apache2
ServerName 127.0.0.1
PidFile $dir/httpd.pid
ErrorLog $dir/error.log
DefaultRuntimeDir $dir
Mutex file:$dir default
LoadModule mpm_event_module $m/mod_mpm_event.so
LoadModule authz_core_module $m/mod_authz_core.so
LoadModule mime_module $m/mod_mime.so
LoadModule socache_shmcb_module $m/mod_socache_shmcb.so
LoadModule ssl_module $m/mod_ssl.so
LoadModule http2_module $m/mod_http2.so
TypesConfig /etc/mime.types
User www-data
Group www-data
SSLSessionCache shmcb:$dir/ssl_scache(512000)
CONF
}

# start_apache DIR WWW CERTS: Apache (mpm_event) serving WWW over HTTP and over HTTPS with mod_ssl
# and mod_http2 (`Protocols h2 http/1.1`). Access log DIR/access.log: "%H %s %B %r".
# Sets APACHE_HTTP_URL, APACHE_HTTPS_URL.
start_apache() {
    local dir="$1" www="$2" certs="$3" p1 p2
    server_dir "$dir"
    p1="$(server_port)"; p2="$(server_port)"
    cat >"$dir/httpd.conf" <<CONF
$(apache_head "$dir")
LogFormat "%H %>s %B \"%r\"" bytes
CustomLog $dir/access.log bytes
Listen 127.0.0.1:$p1
Listen 127.0.0.1:$p2
DocumentRoot $www
<Directory $www>
    Require all granted
</Directory>
<VirtualHost 127.0.0.1:$p2>
    SSLEngine on
    SSLCertificateFile $certs/cert.pem
    SSLCertificateKeyFile $certs/key.pem
    Protocols h2 http/1.1
</VirtualHost>
CONF
    apache2 -f "$dir/httpd.conf" -k start >"$dir/start.log" 2>&1 || server_fail apache "apache2 -k start failed" "$dir/start.log"
    local pid
    pid="$(server_pid_file apache "$dir/httpd.pid" "$dir/error.log")"
    server_register apache "$pid"
    APACHE_HTTP_URL="http://127.0.0.1:$p1"
    APACHE_HTTPS_URL="https://127.0.0.1:$p2"
    server_wait apache "$pid" "$dir/error.log" "$APACHE_HTTP_URL/"
    server_wait apache "$pid" "$dir/error.log" "$APACHE_HTTPS_URL/"
}

# start_lighttpd DIR WWW: lighttpd over HTTP. Sets LIGHTTPD_URL.
start_lighttpd() {
    local dir="$1" www="$2" p
    server_dir "$dir"
    p="$(server_port)"
    cat >"$dir/lighttpd.conf" <<CONF
server.document-root = "$www"
server.bind = "127.0.0.1"
server.port = $p
server.pid-file = "$dir/lighttpd.pid"
server.errorlog = "$dir/error.log"
server.username = "www-data"
server.groupname = "www-data"
index-file.names = ( "index.html" )
mimetype.assign = ( "" => "application/octet-stream" )
CONF
    lighttpd -f "$dir/lighttpd.conf" >"$dir/start.log" 2>&1 || server_fail lighttpd "lighttpd -f failed" "$dir/start.log"
    local pid
    pid="$(server_pid_file lighttpd "$dir/lighttpd.pid" "$dir/error.log")"
    server_register lighttpd "$pid"
    LIGHTTPD_URL="http://127.0.0.1:$p"
    server_wait lighttpd "$pid" "$dir/error.log" "$LIGHTTPD_URL/"
}

# start_caddy DIR WWW CERTS: Caddy over HTTP and HTTPS (h1, h2; h3 off, which would bind UDP too).
# `default_sni localhost`: clients that connect to an IP address send no SNI, and without it the
# handshake fails. JSON access log DIR/access.log. Sets CADDY_HTTP_URL, CADDY_HTTPS_URL.
start_caddy() {
    local dir="$1" www="$2" certs="$3" p1 p2
    server_dir "$dir"
    p1="$(server_port)"; p2="$(server_port)"
    cat >"$dir/Caddyfile" <<CONF
{
	admin off
	auto_https off
	default_sni localhost
	storage file_system $dir/data
	servers {
		protocols h1 h2
	}
}
http://127.0.0.1:$p1 {
	bind 127.0.0.1
	root * $www
	file_server
	log {
		output file $dir/access.log
	}
}
https://127.0.0.1:$p2, https://localhost:$p2 {
	bind 127.0.0.1
	tls $certs/cert.pem $certs/key.pem
	root * $www
	file_server
	log {
		output file $dir/access.log
	}
}
CONF
    XDG_DATA_HOME="$dir" XDG_CONFIG_HOME="$dir" caddy run --config "$dir/Caddyfile" --adapter caddyfile \
        >"$dir/caddy.log" 2>&1 &
    local pid=$!
    server_register caddy "$pid"
    CADDY_HTTP_URL="http://127.0.0.1:$p1"
    CADDY_HTTPS_URL="https://127.0.0.1:$p2"
    server_wait caddy "$pid" "$dir/caddy.log" "$CADDY_HTTP_URL/"
    server_wait caddy "$pid" "$dir/caddy.log" "$CADDY_HTTPS_URL/"
}

# start_h2o DIR WWW CERTS: h2o over HTTPS (h1 and h2). It drops to www-data. Access log
# DIR/access.log: "%H %s %b %r". Sets H2O_URL.
start_h2o() {
    local dir="$1" www="$2" certs="$3" p
    server_dir "$dir"
    p="$(server_port)"
    cat >"$dir/h2o.conf" <<CONF
user: www-data
error-log: $dir/error.log
access-log:
  path: $dir/access.log
  format: "%H %s %b \"%r\""
listen:
  port: $p
  host: 127.0.0.1
  ssl:
    certificate-file: $certs/cert.pem
    key-file: $certs/key.pem
    ocsp-update-interval: 0
hosts:
  default:
    paths:
      /:
        file.dir: $www
CONF
    h2o -c "$dir/h2o.conf" >"$dir/h2o.log" 2>&1 &
    local pid=$!
    server_register h2o "$pid"
    H2O_URL="https://127.0.0.1:$p"
    server_wait h2o "$pid" "$dir/h2o.log" "$H2O_URL/"
}

# start_nginx_origin DIR WWW CERTS [EXTRA]: nginx serving WWW over HTTP and over HTTPS with `http2`
# on the TLS listener, WWW/paced/ at 256 KiB/s per answer; EXTRA goes into its http block. Access log
# DIR/logs/access.log: "$server_protocol $status $body_bytes_sent $request $connection $msec
# $request_time" (the connection's number, the answer's end and length in seconds). Sets ORIGIN_URL,
# ORIGIN_TLS_URL, ORIGIN_HOSTPORT.
start_nginx_origin() {
    local dir="$1" www="$2" certs="$3" extra="${4:-}" p1 p2
    p1="$(server_port)"; p2="$(server_port)"
    write_nginx_conf "$dir" 2 "$(cat <<CONF
    log_format matrix '\$server_protocol \$status \$body_bytes_sent "\$request" \$connection \$msec \$request_time';
    access_log $dir/logs/access.log matrix;
    sendfile on;
    keepalive_requests 10000;
    server {
        listen 127.0.0.1:$p1;
        listen 127.0.0.1:$p2 ssl http2;
        ssl_certificate $certs/cert.pem;
        ssl_certificate_key $certs/key.pem;
        root $www;
        location /paced/ { limit_rate 256k; }
    }
$extra
CONF
)"
    nginx -c "$dir/nginx.conf" -p "$dir" >"$dir/start.log" 2>&1 || server_fail nginx "nginx -c failed" "$dir/start.log"
    local pid
    pid="$(server_pid_file nginx "$dir/nginx.pid" "$dir/logs/error.log")"
    server_register nginx "$pid"
    ORIGIN_URL="http://127.0.0.1:$p1"
    ORIGIN_TLS_URL="https://127.0.0.1:$p2"
    ORIGIN_HOSTPORT="127.0.0.1:$p1"
    server_wait nginx "$pid" "$dir/logs/error.log" "$ORIGIN_URL/"
}

# start_varnish DIR BACKEND CHECK [STORAGE]: Varnish on a free port in front of BACKEND (host:port),
# with the built-in VCL and STORAGE of memory (default 256M); ready once the path CHECK answers
# through it. Sets VARNISH_URL.
start_varnish() {
    local dir="$1" backend="$2" check="$3" storage="${4:-256M}" p
    mkdir -p "$dir"
    chmod 755 "$dir"
    p="$(server_port)"
    varnishd -a "127.0.0.1:$p" -b "$backend" -s "malloc,$storage" -n "$dir/work" -P "$dir/varnishd.pid" \
        >"$dir/varnishd.log" 2>&1 || server_fail varnish "varnishd failed" "$dir/varnishd.log"
    local pid
    pid="$(server_pid_file varnish "$dir/varnishd.pid" "$dir/varnishd.log")"
    server_register varnish "$pid"
    VARNISH_URL="http://127.0.0.1:$p"
    server_wait varnish "$pid" "$dir/varnishd.log" "$VARNISH_URL$check"
}

# start_squid DIR CHECK_URL: squid as a forward proxy for loopback clients, caching nothing (it
# passes ranges through), ready once CHECK_URL answers through it. Runs in the foreground (-N), as
# the proxy user. Sets SQUID_PROXY.
start_squid() {
    local dir="$1" check="$2" p
    server_dir "$dir"
    p="$(server_port)"
    cat >"$dir/squid.conf" <<CONF
http_port 127.0.0.1:$p
visible_hostname squid-matrix
pid_filename $dir/squid.pid
cache_log $dir/cache.log
access_log stdio:$dir/access.log
cache_store_log none
coredump_dir $dir
cache_effective_user proxy
pinger_enable off
dns_nameservers 127.0.0.1
http_access allow localhost
http_access deny all
cache deny all
shutdown_lifetime 1 seconds
CONF
    squid -N -f "$dir/squid.conf" >"$dir/squid.log" 2>&1 &
    local pid=$!
    server_register squid "$pid"
    SQUID_PROXY="http://127.0.0.1:$p"
    server_wait squid "$pid" "$dir/cache.log" "$check" --proxy "$SQUID_PROXY"
}

# start_microsocks DIR CHECK_URL: a SOCKS5 proxy on loopback, ready once CHECK_URL answers
# through it. Sets SOCKS_PROXY (socks5h: names resolved by the proxy).
start_microsocks() {
    local dir="$1" check="$2" p
    mkdir -p "$dir"
    p="$(server_port)"
    microsocks -i 127.0.0.1 -p "$p" >"$dir/microsocks.log" 2>&1 &
    local pid=$!
    server_register microsocks "$pid"
    SOCKS_PROXY="socks5h://127.0.0.1:$p"
    server_wait microsocks "$pid" "$dir/microsocks.log" "$check" --proxy "$SOCKS_PROXY"
}

# start_python_http DIR WWW: Python's http.server, which ignores Range. Sets PYTHON_HTTP_URL.
start_python_http() {
    local dir="$1" www="$2" p
    mkdir -p "$dir"
    p="$(server_port)"
    python3 -m http.server --bind 127.0.0.1 --directory "$www" "$p" >"$dir/http.server.log" 2>&1 &
    local pid=$!
    server_register python-http.server "$pid"
    PYTHON_HTTP_URL="http://127.0.0.1:$p"
    server_wait python-http.server "$pid" "$dir/http.server.log" "$PYTHON_HTTP_URL/"
}

# ensure_moto_venv: a venv with moto's server and boto3 from PyPI, kept in .build/moto-venv.
# Sets MOTO_VENV.
ensure_moto_venv() {
    MOTO_VENV="$ROOT/.build/moto-venv"
    if [ ! -x "$MOTO_VENV/bin/moto_server" ] || ! "$MOTO_VENV/bin/python" -c 'import boto3' 2>/dev/null; then
        python3 -c 'import ensurepip' 2>/dev/null || ensure_packages python3-venv
        rm -rf "$MOTO_VENV"
        python3 -m venv "$MOTO_VENV"
        log "installing moto[server] and boto3 from PyPI into $MOTO_VENV"
        "$MOTO_VENV/bin/pip" install -q 'moto[server]' boto3 >&2 || server_fail moto "pip could not install moto[server] and boto3"
    fi
}

# start_moto DIR: moto's S3 server. Sets MOTO_ENDPOINT. moto_object FILE KEY then uploads FILE.
start_moto() {
    local dir="$1" p
    mkdir -p "$dir"
    ensure_moto_venv
    p="$(server_port)"
    "$MOTO_VENV/bin/moto_server" -H 127.0.0.1 -p "$p" >"$dir/moto.log" 2>&1 &
    local pid=$!
    server_register moto "$pid"
    MOTO_ENDPOINT="http://127.0.0.1:$p"
    server_wait moto "$pid" "$dir/moto.log" "$MOTO_ENDPOINT/"
}

# moto_object FILE KEY: makes the bucket "matrix", puts FILE as KEY and prints a presigned GET URL.
moto_object() {
    "$MOTO_VENV/bin/python" - "$MOTO_ENDPOINT" "$1" "$2" <<'PY'
import sys
import boto3
from botocore.config import Config

endpoint, path, key = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="matrix",
                  aws_secret_access_key="matrix", config=Config(s3={"addressing_style": "path"}))
try:
    s3.create_bucket(Bucket="matrix")
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
s3.upload_file(path, "matrix", key)
print(s3.generate_presigned_url("get_object", Params={"Bucket": "matrix", "Key": key}, ExpiresIn=3600))
PY
}
