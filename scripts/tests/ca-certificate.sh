#!/usr/bin/env bash
# --ca-certificate against a real nginx whose certificate a private authority signed (as on a
# company's own servers): without it the download fails (exit 3) and says which option helps; with
# it a download at -n 8 over HTTP/1.1 and over --http2, a stream (-o -) and a batch are identical to
# the source; another authority's file fails (exit 3) and is named, a certificate for another name
# says so; a missing file, one without a PEM certificate and a DER one are refused before any
# request (exit 2); `segget daemon --ca-certificate` downloads a task identical and answers the file
# for `ca-certificate` in getGlobalOption. --certificate/--private-key against nginx with
# ssl_verify_client on: identical with the key apart or in the same file; an encrypted key, a
# certificate without its key, a key alone and another certificate's key are refused (exit 2); the
# daemon's task shows its certificate too.
# Needs SEGGET_BIN (scripts/test sets it; default .build/debug/segget), nginx, openssl, python3.
source "$(dirname "$0")/../lib/common.sh"
source "$(dirname "$0")/../lib/servers.sh"
ensure_packages nginx openssl apache2

SEGGET_BIN="${SEGGET_BIN:-$ROOT/.build/debug/segget}"
[ -x "$SEGGET_BIN" ] || { echo "ca-certificate: $SEGGET_BIN is missing; build first (swift build)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/segget-ca.XXXXXX)"
chmod 755 "$WORK"
NGINX_PID="" DAEMON_PID="" APACHE_PID=""
cleanup() { stop_pid "$DAEMON_PID"; stop_pid "$APACHE_PID"; stop_nginx; [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
fail() { echo "ca-certificate: FAILED: $*" >&2; exit 1; }

# Two authorities; nginx's certificate is signed by the first.
pki="$WORK/pki"
mkdir -p "$pki" "$WORK/www" "$WORK/out"
for ca in ca other; do
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=segget test $ca" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$pki/$ca.key" -out "$pki/$ca.pem" >/dev/null 2>&1
done
openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$pki/server.key" -out "$pki/server.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$pki/server.ext"
openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial -days 2 \
    -extfile "$pki/server.ext" -out "$pki/server.pem" >/dev/null 2>&1
printf 'subjectAltName=DNS:other.example\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$pki/elsewhere.ext"
openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial -days 2 \
    -extfile "$pki/elsewhere.ext" -out "$pki/elsewhere.pem" >/dev/null 2>&1
openssl x509 -in "$pki/ca.pem" -outform der -out "$pki/ca.der"
# A client certificate the same authority signed; its key also encrypted, and in one file with it.
openssl req -newkey rsa:2048 -nodes -subj /CN=segget-client -keyout "$pki/client.key" -out "$pki/client.csr" >/dev/null 2>&1
printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n' >"$pki/client.ext"
openssl x509 -req -in "$pki/client.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial -days 2 \
    -extfile "$pki/client.ext" -out "$pki/client.pem" >/dev/null 2>&1
cat "$pki/client.pem" "$pki/client.key" >"$pki/client-both.pem"
openssl pkey -in "$pki/client.key" -aes256 -passout pass:secret -out "$pki/client-encrypted.key" 2>/dev/null
echo "not a certificate" >"$pki/notpem.txt"
chmod 644 "$pki"/*

head -c $((24 << 20)) /dev/urandom >"$WORK/www/big.bin"
for i in 1 2 3; do head -c $((300000 * i)) /dev/urandom >"$WORK/www/s$i.bin"; done
chmod 755 "$WORK/www"; chmod 644 "$WORK"/www/*

port="$(free_port)" port2="$(free_port)" port3="$(free_port)"
write_nginx_conf "$WORK/nginx" 1 "$(cat <<CONF
    access_log off;
    server {
        listen 127.0.0.1:$port ssl http2;
        ssl_certificate $pki/server.pem;
        ssl_certificate_key $pki/server.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        root $WORK/www;
    }
    server {
        listen 127.0.0.1:$port2 ssl;
        ssl_certificate $pki/elsewhere.pem;
        ssl_certificate_key $pki/server.key;
        root $WORK/www;
    }
    server {
        listen 127.0.0.1:$port3 ssl http2;
        ssl_certificate $pki/server.pem;
        ssl_certificate_key $pki/server.key;
        ssl_client_certificate $pki/ca.pem;
        ssl_verify_client on;
        root $WORK/www;
    }
CONF
)"
launch_nginx "$WORK/nginx"
URL="https://127.0.0.1:$port"

run() { run_segget "$@"; }
same() { same_bytes "$@"; }

run untrusted 3 -q -n 8 -o "$WORK/out/untrusted.bin" "$URL/big.bin"
grep -q -- "no trusted authority signed it .*--ca-certificate FILE" "$WORK/untrusted.err" || fail "the verification failure did not name --ca-certificate: $(cat "$WORK/untrusted.err")"
[ ! -e "$WORK/out/untrusted.bin" ] || fail "a file was left under the final name after the verification failure"

run h1 0 -q -n 8 --ca-certificate "$pki/ca.pem" -o "$WORK/out/h1.bin" "$URL/big.bin"
same "$WORK/out/h1.bin" "$WORK/www/big.bin"
run h2 0 -q -n 8 --http2 --cacert "$pki/ca.pem" -o "$WORK/out/h2.bin" "$URL/big.bin"
same "$WORK/out/h2.bin" "$WORK/www/big.bin"
run stream 0 -q -n 8 --ca-certificate "$pki/ca.pem" -o - "$URL/big.bin" >"$WORK/out/stream.bin"
same "$WORK/out/stream.bin" "$WORK/www/big.bin"
for i in 1 2 3; do echo "$URL/s$i.bin"; done >"$WORK/list.txt"
# A relative path, from the directory that holds it.
(cd "$pki" && run batch 0 -q -j 3 --http2 --ca-certificate ca.pem -i "$WORK/list.txt" -d "$WORK/out/batch")
for i in 1 2 3; do same "$WORK/out/batch/s$i.bin" "$WORK/www/s$i.bin"; done

run other 3 -q -n 8 --ca-certificate "$pki/other.pem" -o "$WORK/out/other.bin" "$URL/big.bin"
grep -q "against the authorities in $pki/other.pem (--ca-certificate)" "$WORK/other.err" || fail "another authority's failure did not name its file: $(cat "$WORK/other.err")"
# A trusted authority's certificate for another name: the server's to fix, and said so.
run elsewhere 3 -q --ca-certificate "$pki/ca.pem" -o "$WORK/out/elsewhere.bin" "https://127.0.0.1:$port2/big.bin"
grep -q "it does not name the host of the URL; the server's certificate must be fixed" "$WORK/elsewhere.err" || fail "a certificate for another name said: $(cat "$WORK/elsewhere.err")"
run missing 2 -q --ca-certificate "$pki/nothing.pem" -o "$WORK/out/x.bin" "$URL/big.bin"
grep -q "cannot read the CA certificate file" "$WORK/missing.err" || fail "a missing file said: $(cat "$WORK/missing.err")"
run notpem 2 -q --ca-certificate "$pki/notpem.txt" -o "$WORK/out/x.bin" "$URL/big.bin"
run der 2 -q --ca-certificate "$pki/ca.der" -o "$WORK/out/x.bin" "$URL/big.bin"
grep -q "holds no PEM certificate" "$WORK/der.err" || fail "a DER file said: $(cat "$WORK/der.err")"
[ ! -e "$WORK/out/x.bin" ] || fail "a refused run left a file"

# A server that asks for a client certificate (nginx answers 400 without one).
CLIENT_URL="https://127.0.0.1:$port3/big.bin"
run nocert 4 -q --ca-certificate "$pki/ca.pem" -o "$WORK/out/nocert.bin" "$CLIENT_URL"
run cert 0 -q -n 8 --ca-certificate "$pki/ca.pem" --certificate "$pki/client.pem" --private-key "$pki/client.key" -o "$WORK/out/cert.bin" "$CLIENT_URL"
same "$WORK/out/cert.bin" "$WORK/www/big.bin"
run certboth 0 -q -n 8 --http2 --ca-certificate "$pki/ca.pem" --certificate "$pki/client-both.pem" -o "$WORK/out/certboth.bin" "$CLIENT_URL"
same "$WORK/out/certboth.bin" "$WORK/www/big.bin"
run encrypted 2 -q --ca-certificate "$pki/ca.pem" --certificate "$pki/client.pem" --private-key "$pki/client-encrypted.key" -o "$WORK/out/y.bin" "$CLIENT_URL"
grep -q "is encrypted" "$WORK/encrypted.err" || fail "an encrypted key said: $(cat "$WORK/encrypted.err")"
run nokey 2 -q --ca-certificate "$pki/ca.pem" --certificate "$pki/client.pem" -o "$WORK/out/y.bin" "$CLIENT_URL"
grep -q "holds no private key" "$WORK/nokey.err" || fail "a certificate without its key said: $(cat "$WORK/nokey.err")"
run keyonly 2 -q --private-key "$pki/client.key" -o "$WORK/out/y.bin" "$CLIENT_URL"
run wrongkey 2 -q --ca-certificate "$pki/ca.pem" --certificate "$pki/client.pem" --private-key "$pki/server.key" -o "$WORK/out/y.bin" "$CLIENT_URL"
grep -q "could not be used for" "$WORK/wrongkey.err" || fail "a key of another certificate said: $(cat "$WORK/wrongkey.err")"
[ ! -e "$WORK/out/y.bin" ] || fail "a refused client certificate left a file"

# Apache with `SSLVerifyClient require` ends the connection with a TLS alert instead: over TLS 1.3
# "certificate required" after the handshake (libcurl: a failed receive), over TLS 1.2 "handshake
# failure"; a certificate another authority signed gets "unknown ca". Each is said at once (exit 3),
# not retried as a broken connection.
apache_port="$(free_port)" apache_port12="$(free_port)"
mkdir -p "$WORK/apache"; chmod 777 "$WORK/apache"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=stranger" -keyout "$pki/stranger.key" -out "$pki/stranger.pem" >/dev/null 2>&1
chmod 644 "$pki"/stranger.*
vhost() {
    printf '<VirtualHost 127.0.0.1:%s>\n    SSLEngine on\n    %s\n    SSLCertificateFile %s\n    SSLCertificateKeyFile %s\n    SSLCACertificateFile %s\n    SSLVerifyClient require\n    Protocols h2 http/1.1\n</VirtualHost>\n' \
        "$1" "$2" "$pki/server.pem" "$pki/server.key" "$pki/ca.pem"
}
cat >"$WORK/apache/httpd.conf" <<CONF
$(apache_head "$WORK/apache")
Listen 127.0.0.1:$apache_port
Listen 127.0.0.1:$apache_port12
DocumentRoot $WORK/www
<Directory $WORK/www>
    Require all granted
</Directory>
$(vhost "$apache_port" "SSLProtocol TLSv1.3")
$(vhost "$apache_port12" "SSLProtocol TLSv1.2")
CONF
apache2 -f "$WORK/apache/httpd.conf" -k start >"$WORK/apache/start.log" 2>&1 || fail "apache2 did not start: $(cat "$WORK/apache/start.log" "$WORK/apache/error.log" 2>/dev/null)"
for _ in $(seq 100); do [ -s "$WORK/apache/httpd.pid" ] && break; sleep 0.1; done
APACHE_PID="$(cat "$WORK/apache/httpd.pid")"
A13="https://127.0.0.1:$apache_port/big.bin" A12="https://127.0.0.1:$apache_port12/big.bin"
for _ in $(seq 100); do curl -s -o /dev/null --cacert "$pki/ca.pem" --cert "$pki/client.pem" --key "$pki/client.key" "$A13" && break; sleep 0.1; done
# alert NAME URL PATTERN ARGS...: exit 3 within the first attempt's time (no retries), saying PATTERN.
alert() {
    local name="$1" url="$2" pattern="$3"; shift 3
    local t0=$SECONDS
    run "$name" 3 -q -n 8 --ca-certificate "$pki/ca.pem" "$@" -o "$WORK/out/z.bin" "$url"
    grep -q -- "$pattern" "$WORK/$name.err" || fail "$name said: $(cat "$WORK/$name.err")"
    [ $((SECONDS - t0)) -le 3 ] || fail "$name took $((SECONDS - t0)) s: retried"
}
alert alert13 "$A13" "requires a client certificate (TLS alert: certificate required); give it with --certificate FILE"
alert alert13h2 "$A13" "requires a client certificate" --http2
alert alert12 "$A12" "ended the TLS handshake (alert: handshake failure); it may require a client certificate"
alert stranger13 "$A13" "refused the client certificate in $pki/stranger.pem (--certificate) (TLS alert: no authority it trusts" \
    --certificate "$pki/stranger.pem" --private-key "$pki/stranger.key"
alert stranger12 "$A12" "refused the client certificate in $pki/stranger.pem" --certificate "$pki/stranger.pem" --private-key "$pki/stranger.key"
for i in 1 2 3; do echo "https://127.0.0.1:$apache_port/s$i.bin"; done >"$WORK/list13.txt"
(cd "$pki" && run alertbatch 3 -q -j 3 --ca-certificate ca.pem -i "$WORK/list13.txt" -d "$WORK/out/alertbatch")
grep -q "requires a client certificate" "$WORK/alertbatch.err" || fail "the batch said: $(cat "$WORK/alertbatch.err")"
[ ! -e "$WORK/out/z.bin" ] || fail "a refused connection left a file"
run apache13 0 -q -n 8 --http2 --ca-certificate "$pki/ca.pem" --certificate "$pki/client.pem" --private-key "$pki/client.key" -o "$WORK/out/a13.bin" "$A13"
same "$WORK/out/a13.bin" "$WORK/www/big.bin"
run apache12 0 -q -n 8 --ca-certificate "$pki/ca.pem" --certificate "$pki/client-both.pem" -o "$WORK/out/a12.bin" "$A12"
same "$WORK/out/a12.bin" "$WORK/www/big.bin"

# The daemon: every task verified against the file it was started with.
rpc_port="$(free_port)"
mkdir -p "$WORK/dl"
"$SEGGET_BIN" daemon --rpc-listen-port "$rpc_port" --rpc-secret s3cret -d "$WORK/dl" --database "$WORK/q.sqlite" \
    --ca-certificate "$pki/ca.pem" --certificate "$pki/client-both.pem" >"$WORK/daemon.out" 2>"$WORK/daemon.err" &
DAEMON_PID=$!
st="$(python3 "$ROOT/scripts/tests/daemon_task.py" "$rpc_port" s3cret "$CLIENT_URL" --global "ca-certificate=$pki/ca.pem")" \
    || fail "the daemon (log: $(tail -3 "$WORK/daemon.err"))"
case "$st" in *'"complete"'*) ;; *) fail "the daemon's task ended $st (log: $(tail -3 "$WORK/daemon.err"))" ;; esac
same "$WORK/dl/big.bin" "$WORK/www/big.bin"

echo "ca-certificate: a private authority's server refused without the option (exit 3, naming it); with it -n 8 over HTTP/1.1 and HTTP/2, a stream and a batch identical; another authority's file named (exit 3); a certificate for another name said so; missing, non-PEM and DER files refused (exit 2); a server that asks for a client certificate: without one 400 (exit 4), with one (key apart or in the same file, HTTP/1.1 and HTTP/2) identical, an encrypted, missing or wrong key refused (exit 2); Apache requiring one over TLS 1.3 and 1.2: without one or with an untrusted one said at once from its alert (exit 3, no retry), with one identical; a daemon task with both identical"
