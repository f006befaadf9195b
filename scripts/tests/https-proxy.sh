#!/usr/bin/env bash
# An https proxy (Apache 2.4 as a forward proxy over TLS, its certificate from a private authority,
# as a company's proxy often is): its TLS is apart from the server's. Without --proxy-ca-certificate
# the download fails at once (exit 3) naming the proxy and that option, not the server's
# --ca-certificate; with it, -n 8 of an https URL (through the proxy's CONNECT tunnel) and of an
# http URL, a batch over --http2, and a proxy given by https_proxy are identical; --proxy-insecure
# skips the proxy's check. A proxy that requires a client certificate (SSLVerifyClient require, TLS
# 1.3 and 1.2): without one, or with one it does not trust, said at once naming
# --proxy-certificate (exit 3, no retries); with --proxy-certificate and --proxy-private-key
# identical. `segget daemon --proxy-ca-certificate --proxy-certificate` downloads a task through
# that proxy identical, and a daemon started without them fails its task naming its own options.
# A plain HTTP proxy given as https://, and an https URL at a plain HTTP port, are said at once (exit 3).
# A plain HTTP proxy whose tunnel opens 0.4 s after its answer to CONNECT: ranged, identical; one
# that refuses more than 2 tunnels with 503: the limit learnt, identical.
# A proxy's handshake broken off, and the server's inside the tunnel, are named as whose they were.
# Needs SEGGET_BIN (scripts/test sets it; default .build/debug/segget), apache2, openssl, curl, python3.
source "$(dirname "$0")/../lib/common.sh"
source "$(dirname "$0")/../lib/servers.sh"
ensure_packages apache2 openssl curl
# The proxies here are the script's own: none from the caller's environment, no host exempted.
unset http_proxy https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
[ -x "$SEGGET_BIN" ] || { echo "https-proxy: $SEGGET_BIN is missing; build first (swift build)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/segget-https-proxy.XXXXXX)"
chmod 755 "$WORK"
APACHE_PID="" DAEMON_PID="" DROPPER_PID="" SLOWPROXY_PID=""
cleanup() { stop_pid "$DAEMON_PID"; stop_pid "$APACHE_PID"; stop_pid "$DROPPER_PID"; stop_pid "$SLOWPROXY_PID"; [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
fail() { echo "https-proxy: FAILED: $*" >&2; exit 1; }

pki="$WORK/pki"
mkdir -p "$pki" "$WORK/www" "$WORK/out" "$WORK/apache"
chmod 777 "$WORK/apache"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=segget test proxy authority" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$pki/ca.key" -out "$pki/ca.pem" >/dev/null 2>&1
# One certificate for 127.0.0.1 serves the proxy and the server; a client certificate; a stranger's.
openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$pki/server.key" -out "$pki/server.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$pki/server.ext"
openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial -days 2 \
    -extfile "$pki/server.ext" -out "$pki/server.pem" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj /CN=segget-client -keyout "$pki/client.key" -out "$pki/client.csr" >/dev/null 2>&1
printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n' >"$pki/client.ext"
openssl x509 -req -in "$pki/client.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial -days 2 \
    -extfile "$pki/client.ext" -out "$pki/client.pem" >/dev/null 2>&1
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=stranger" -keyout "$pki/stranger.key" -out "$pki/stranger.pem" >/dev/null 2>&1
chmod 644 "$pki"/*

head -c $((16 << 20)) /dev/urandom >"$WORK/www/big.bin"
for i in 1 2 3; do head -c $((200000 * i)) /dev/urandom >"$WORK/www/s$i.bin"; done
chmod 755 "$WORK/www"; chmod 644 "$WORK"/www/*

proxy="$(free_port)" proxy13="$(free_port)" proxy12="$(free_port)" origin="$(free_port)" plain="$(free_port)" plainproxy="$(free_port)"
m=/usr/lib/apache2/modules
# proxy_vhost PORT EXTRA: a forward proxy over TLS that tunnels to the server's port only.
proxy_vhost() {
    printf '<VirtualHost 127.0.0.1:%s>\n    SSLEngine on\n    SSLCertificateFile %s\n    SSLCertificateKeyFile %s\n%s\n    ProxyRequests On\n    AllowCONNECT %s\n</VirtualHost>\n' \
        "$1" "$pki/server.pem" "$pki/server.key" "$2" "$origin"
}
cat >"$WORK/apache/httpd.conf" <<CONF
$(apache_head "$WORK/apache")
LoadModule proxy_module $m/mod_proxy.so
LoadModule proxy_connect_module $m/mod_proxy_connect.so
LoadModule proxy_http_module $m/mod_proxy_http.so
Listen 127.0.0.1:$proxy
Listen 127.0.0.1:$proxy13
Listen 127.0.0.1:$proxy12
Listen 127.0.0.1:$origin
Listen 127.0.0.1:$plain
Listen 127.0.0.1:$plainproxy
DocumentRoot $WORK/www
<Directory $WORK/www>
    Require all granted
</Directory>
<Proxy "*">
    Require all granted
</Proxy>
$(proxy_vhost "$proxy" "")
$(proxy_vhost "$proxy13" "    SSLProtocol TLSv1.3
    SSLCACertificateFile $pki/ca.pem
    SSLVerifyClient require")
$(proxy_vhost "$proxy12" "    SSLProtocol TLSv1.2
    SSLCACertificateFile $pki/ca.pem
    SSLVerifyClient require")
<VirtualHost 127.0.0.1:$origin>
    SSLEngine on
    SSLCertificateFile $pki/server.pem
    SSLCertificateKeyFile $pki/server.key
    Protocols h2 http/1.1
</VirtualHost>
<VirtualHost 127.0.0.1:$plain>
</VirtualHost>
<VirtualHost 127.0.0.1:$plainproxy>
    ProxyRequests On
    AllowCONNECT $origin
</VirtualHost>
CONF
apache2 -f "$WORK/apache/httpd.conf" -k start >"$WORK/apache/start.log" 2>&1 || fail "apache2 did not start: $(cat "$WORK/apache/start.log" "$WORK/apache/error.log" 2>/dev/null)"
for _ in $(seq 100); do [ -s "$WORK/apache/httpd.pid" ] && break; sleep 0.1; done
APACHE_PID="$(cat "$WORK/apache/httpd.pid")"
P="https://127.0.0.1:$proxy" P13="https://127.0.0.1:$proxy13" P12="https://127.0.0.1:$proxy12"
URL="https://127.0.0.1:$origin/big.bin" PLAIN="http://127.0.0.1:$plain/big.bin"
for _ in $(seq 100); do curl -s -o /dev/null --proxy "$P" --proxy-cacert "$pki/ca.pem" --cacert "$pki/ca.pem" "$URL" && break; sleep 0.1; done

run() { run_segget "$@"; }
same() { same_bytes "$@"; }
# refused NAME PATTERN ARGS...: exit 3 within 3 s (no retries: the first waits about 1 s, the
# second 2 s), saying PATTERN, leaving nothing under the name (no part file or journal either).
refused() {
    local name="$1" pattern="$2"; shift 2
    local t0 t1
    t0="$(date +%s%N)"
    run "$name" 3 -q -n 8 "$@" -o "$WORK/out/z.bin"
    t1="$(date +%s%N)"
    grep -q -- "$pattern" "$WORK/$name.err" || fail "$name said: $(cat "$WORK/$name.err")"
    [ $(((t1 - t0) / 1000000)) -le 3000 ] || fail "$name took $(((t1 - t0) / 1000000)) ms: retried"
    ! compgen -G "$WORK/out/z.bin*" >/dev/null || fail "$name left $(ls "$WORK"/out/z.bin*)"
}

CA=(--ca-certificate "$pki/ca.pem")
PCA=(--proxy-ca-certificate "$pki/ca.pem")
refused untrusted "the TLS certificate of the proxy $P (for $URL) could not be verified: no trusted authority signed it .*--proxy-ca-certificate FILE; pass --proxy-insecure only if you trust this proxy" \
    --proxy "$P" "${CA[@]}" "$URL"
refused untrustedplain "the TLS certificate of the proxy $P (for $PLAIN) could not be verified" --proxy "$P" "$PLAIN"
# A plain HTTP proxy given as https://, and an https URL at a plain HTTP port: said at once.
refused plainproxy "the proxy https://127.0.0.1:$plainproxy (for $URL) did not answer in TLS (OpenSSL: wrong version number): it is likely a plain HTTP proxy; give it as http://" \
    --proxy "https://127.0.0.1:$plainproxy" "${CA[@]}" "$URL"
refused plainserver "the server of https://127.0.0.1:$plain/big.bin did not answer in TLS" "https://127.0.0.1:$plain/big.bin"
run plainproxyhttp 0 -q -n 8 --proxy "http://127.0.0.1:$plainproxy" "${CA[@]}" -o "$WORK/out/plainproxy.bin" "$URL"
same "$WORK/out/plainproxy.bin" "$WORK/www/big.bin"
run tunnel 0 -q -n 8 --proxy "$P" "${PCA[@]}" "${CA[@]}" -o "$WORK/out/tunnel.bin" "$URL"
same "$WORK/out/tunnel.bin" "$WORK/www/big.bin"
run plain 0 -q -n 8 --proxy "$P" "${PCA[@]}" -o "$WORK/out/plain.bin" "$PLAIN"
same "$WORK/out/plain.bin" "$WORK/www/big.bin"
run insecure 0 -q -n 8 --proxy "$P" --proxy-insecure "${CA[@]}" -o "$WORK/out/insecure.bin" "$URL"
same "$WORK/out/insecure.bin" "$WORK/www/big.bin"
https_proxy="$P" run environment 0 -q -n 8 "${PCA[@]}" "${CA[@]}" -o "$WORK/out/environment.bin" "$URL"
same "$WORK/out/environment.bin" "$WORK/www/big.bin"
https_proxy="$P" refused environmentuntrusted "the TLS certificate of the proxy $P (for $URL)" "${CA[@]}" "$URL"
for i in 1 2 3; do echo "https://127.0.0.1:$origin/s$i.bin"; done >"$WORK/list.txt"
run batch 0 -q -j 3 --http2 --proxy "$P" "${PCA[@]}" "${CA[@]}" -i "$WORK/list.txt" -d "$WORK/out/batch"
for i in 1 2 3; do same "$WORK/out/batch/s$i.bin" "$WORK/www/s$i.bin"; done

# A plain HTTP proxy on a long path (its tunnel to the server opens 0.4 s after its "200 Connection
# established", as through a proxy 150 ms away): -n 8, ranged, identical. segget took that 200 for
# the server's answer where the tunnel's TLS and request took more than 0.25 s, said "the server
# ignored the byte range (answered 200)" and downloaded over one connection.
slowproxy="$(free_port)" capproxy="$(free_port)"
# tunnel_proxy PORT DELAY LIMIT: a plain HTTP CONNECT proxy whose tunnels open DELAY s after its
# answer; with LIMIT above 0, a CONNECT beyond LIMIT tunnels open at once is answered 503.
tunnel_proxy() {
exec python3 -c 'import socket,sys,threading,time
delay, limit = float(sys.argv[2]), int(sys.argv[3])
lock = threading.Lock()
active = [0]
def pipe(a, b):
    try:
        while (d := a.recv(65536)):
            b.sendall(d)
    except OSError:
        pass
    for x in (a, b):
        try:
            x.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(4096)
        if not d:
            return c.close()
        head += d
    with lock:
        full = limit > 0 and active[0] >= limit
        if not full:
            active[0] += 1
    if full:
        c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return c.close()
    try:
        host, port = head.split()[1].decode().rsplit(":", 1)
        o = socket.create_connection((host, int(port)))
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        time.sleep(delay)
        t = threading.Thread(target=pipe, args=(o, c), daemon=True)
        t.start()
        pipe(c, o)
        t.join()
    finally:
        with lock:
            active[0] -= 1
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()' "$@"
}
tunnel_proxy "$slowproxy" 0.4 0 &
SLOWPROXY_PID=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$slowproxy") 2>/dev/null && break; sleep 0.1; done
set +e
timeout 60 "$SEGGET_BIN" --json -n 8 --proxy "http://127.0.0.1:$slowproxy" "${CA[@]}" -o "$WORK/out/slowtunnel.bin" "$URL" \
    >"$WORK/slowtunnel.json" 2>"$WORK/slowtunnel.err"
rc=$?
set -e
stop_pid "$SLOWPROXY_PID"
[ "$rc" -eq 0 ] || fail "slowtunnel exited $rc: $(cat "$WORK/slowtunnel.err")"
same "$WORK/out/slowtunnel.bin" "$WORK/www/big.bin"
! grep -q "ignored the byte range" "$WORK/slowtunnel.err" || fail "slowtunnel took the proxy's 200 for the server's: $(cat "$WORK/slowtunnel.err")"
grep -q '"type":"finish".*"ranged":true' "$WORK/slowtunnel.json" || fail "slowtunnel was not ranged: $(cat "$WORK/slowtunnel.json")"
# A proxy that opens at most 2 tunnels at once and answers 503 to more: the limit is learnt from the
# refusal's status as from a server's (its head no longer reaches the parser), identical.
tunnel_proxy "$capproxy" 0 2 &
SLOWPROXY_PID=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$capproxy") 2>/dev/null && break; sleep 0.1; done
run captunnel 0 -n 8 --proxy "http://127.0.0.1:$capproxy" "${CA[@]}" -o "$WORK/out/captunnel.bin" "$URL"
stop_pid "$SLOWPROXY_PID"
same "$WORK/out/captunnel.bin" "$WORK/www/big.bin"
# The limit learnt is the number in flight at the refusal (1 or 2, as the tunnels happened to be open).
# It is said to be the proxy's (the build before said "the server refuses more than N requests").
grep -Eq "the proxy http://127\.0\.0\.1:$capproxy refuses more than [12] tunnels? to the server at once \(HTTP 503\)" "$WORK/captunnel.err" \
    || fail "captunnel did not learn the proxy's limit, as the proxy's: $(cat "$WORK/captunnel.err")"

# A proxy whose TLS handshake breaks off (a listener that reads the client's first flight and closes):
# named as the proxy's, where segget said "the request to URL failed: the TLS handshake failed". The
# server's certificate failing inside the tunnel, which libcurl 7.88 reports as a handshake broken
# off: named as the server's, inside the proxy's tunnel, with its likely cause.
dropper="$(free_port)"
python3 -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
while True:
    c, _ = s.accept(); c.recv(4096); c.close()' "$dropper" &
DROPPER_PID=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$dropper") 2>/dev/null && break; sleep 0.1; done
run brokeoff 3 -q --retries 0 -n 8 --proxy "https://127.0.0.1:$dropper" -o "$WORK/out/z.bin" "$URL"
grep -q -- "the TLS handshake with the proxy https://127.0.0.1:$dropper (for $URL) broke off" "$WORK/brokeoff.err" || fail "a proxy's broken handshake said: $(cat "$WORK/brokeoff.err")"
run intunnel 3 -q --retries 0 -n 8 --proxy "$P" "${PCA[@]}" -o "$WORK/out/z.bin" "$URL"
grep -q -- "the TLS handshake with the server of $URL, inside the tunnel of the proxy $P, broke off; .*give that authority's certificate with --ca-certificate FILE" "$WORK/intunnel.err" ||
    fail "the server's certificate inside the tunnel said: $(cat "$WORK/intunnel.err")"
! compgen -G "$WORK/out/z.bin*" >/dev/null || fail "a broken handshake left $(ls "$WORK"/out/z.bin*)"

# A proxy that requires a client certificate.
refused wanted13 "the proxy $P13 (for $URL) requires a client certificate (TLS alert: certificate required); give it with --proxy-certificate FILE" \
    --proxy "$P13" "${PCA[@]}" "${CA[@]}" "$URL"
refused wanted12 "the proxy $P12 (for $URL) ended the TLS handshake (alert: handshake failure); it may require a client certificate (give it with --proxy-certificate FILE)" \
    --proxy "$P12" "${PCA[@]}" "${CA[@]}" "$URL"
refused stranger "the proxy $P13 (for $URL) refused the client certificate in $pki/stranger.pem (--proxy-certificate)" \
    --proxy "$P13" "${PCA[@]}" "${CA[@]}" --proxy-certificate "$pki/stranger.pem" --proxy-private-key "$pki/stranger.key" "$URL"
# The server's --certificate is not shown to the proxy.
refused servers "the proxy $P13 (for $URL) requires a client certificate" \
    --proxy "$P13" "${PCA[@]}" "${CA[@]}" --certificate "$pki/client.pem" --private-key "$pki/client.key" "$URL"
run cert13 0 -q -n 8 --http2 --proxy "$P13" "${PCA[@]}" "${CA[@]}" --proxy-certificate "$pki/client.pem" --proxy-private-key "$pki/client.key" \
    -o "$WORK/out/cert13.bin" "$URL"
same "$WORK/out/cert13.bin" "$WORK/www/big.bin"
cat "$pki/client.pem" "$pki/client.key" >"$pki/client-both.pem"
run cert12 0 -q -n 8 --proxy "$P12" "${PCA[@]}" --proxy-certificate "$pki/client-both.pem" -o "$WORK/out/cert12.bin" "$PLAIN"
same "$WORK/out/cert12.bin" "$WORK/www/big.bin"
run keyonly 2 -q --proxy "$P13" --proxy-private-key "$pki/client.key" -o "$WORK/out/y.bin" "$URL"
grep -q -- "--proxy-private-key is the key of --proxy-certificate" "$WORK/keyonly.err" || fail "a key alone said: $(cat "$WORK/keyonly.err")"
run proxynokey 2 -q --proxy "$P13" --proxy-certificate "$pki/client.pem" -o "$WORK/out/y.bin" "$URL"
grep -q -- "holds no private key; give it with --proxy-private-key FILE" "$WORK/proxynokey.err" || fail "a certificate without its key said: $(cat "$WORK/proxynokey.err")"

# The daemon: its own options, for every task's proxy.
daemon_task() { # PORT URL PROXY: adds the task, waits, prints its status and errorMessage as JSON
    python3 "$ROOT/scripts/tests/daemon_task.py" "$1" s3cret "$2" --option "all-proxy=$3" --option split=8
}
start_daemon() { # DIR ARGS...
    local dir="$1"; shift
    rpc_port="$(free_port)"
    mkdir -p "$dir"
    "$SEGGET_BIN" daemon --rpc-listen-port "$rpc_port" --rpc-secret s3cret -d "$dir" --database "$dir.sqlite" "$@" \
        >"$dir.out" 2>"$dir.err" &
    DAEMON_PID=$!
}
start_daemon "$WORK/dl" "${CA[@]}" "${PCA[@]}" --proxy-certificate "$pki/client-both.pem"
st="$(daemon_task "$rpc_port" "$URL" "$P13")"
case "$st" in *'"complete"'*) ;; *) fail "the daemon's task through the proxy ended $st (log: $(tail -3 "$WORK/dl.err"))" ;; esac
same "$WORK/dl/big.bin" "$WORK/www/big.bin"
stop_pid "$DAEMON_PID"; DAEMON_PID=""
start_daemon "$WORK/dl2" "${CA[@]}"
st="$(daemon_task "$rpc_port" "$URL" "$P")"
case "$st" in *'"error"'*'start the daemon with --proxy-ca-certificate FILE'*) ;; *) fail "the daemon without the proxy's authority: $st" ;; esac
case "$st" in *"-k"* | *"--proxy-insecure"*) fail "the daemon's advice names an option it lacks: $st" ;; esac
stop_pid "$DAEMON_PID"; DAEMON_PID=""

echo "https-proxy: a plain HTTP proxy given as https:// and an https URL at a plain HTTP port said at once (exit 3); a plain HTTP proxy whose tunnel opens 0.4 s after its answer: -n 8 ranged, identical; one that refuses a third tunnel with 503: a limit learnt, identical; an https proxy's private authority refused without --proxy-ca-certificate (exit 3 at once, naming the proxy and that option, for an https and an http URL, from --proxy and from https_proxy); with it -n 8 through the tunnel and to an http URL, and a batch over HTTP/2, identical; --proxy-insecure identical; a proxy requiring a client certificate (TLS 1.3 and 1.2) without one, with a stranger's, or with only the server's --certificate said at once naming --proxy-certificate; with one identical; a proxy key alone or a certificate without its key refused (exit 2); the daemon through that proxy identical with its --proxy-ca-certificate and --proxy-certificate, and without them its task's error names them"
