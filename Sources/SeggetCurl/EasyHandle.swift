import CCurl

/// What a transfer's receiver wants done with the body bytes it was just handed.
package enum WriteDecision: Equatable, Sendable {
    /// The bytes were taken; go on receiving.
    case proceed
    /// Take none of these bytes now: libcurl keeps them and hands them over again, first of all,
    /// after `EasyHandle.unpause()`. (The C value is `CURL_WRITEFUNC_PAUSE`.)
    case pause
    /// End the transfer; it completes with `CurlCode.writeError`. Bytes of this call that the
    /// receiver already used stay used. (libcurl is told fewer bytes were taken than given.)
    case abort
}

/// Receives what one transfer delivers, from inside `curl_multi_perform` (or `curl_easy_perform`,
/// or `curl_easy_pause` when a paused transfer is resumed), on the thread that drives it.
package protocol TransferDelegate: AnyObject {
    /// Some body bytes; valid only during the call.
    func transfer(_ handle: EasyHandle, received body: UnsafeRawBufferPointer) -> WriteDecision
    /// One response header line as sent (CRLF included; a blank line ends the head), and whether it
    /// was read as Latin-1 because it is not UTF-8 (see `decodedHeaderLine`).
    func transfer(_ handle: EasyHandle, receivedHeaderLine line: String, latin1: Bool)
}

/// Which HTTP versions a request may use.
package enum HTTPVersion: Sendable {
    /// HTTP/1.1 only.
    case http1_1
    /// HTTP/2 over TLS when the server offers it, else HTTP/1.1 (`CURL_HTTP_VERSION_2TLS`).
    case http2OverTLS
}

/// One libcurl easy handle: one transfer at a time, reused (with `reset()`) for the next.
///
/// Every option has a named setter that throws `CurlError` when libcurl refuses the value or does not
/// know the option, so that nothing is silently left at its default. Body bytes and header lines go
/// to `delegate` (none set: they are dropped), never to libcurl's default of standard output.
package final class EasyHandle {
    private(set) var raw: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// Who receives this handle's body and header lines. Weak: the owner usually holds the handle.
    package weak var delegate: (any TransferDelegate)?
    /// True while the body is paused by `.pause` or `pause()`, until `unpause()`.
    package private(set) var isPaused = false
    /// The book of sockets of the multi handle this handle is on (nil: on none).
    private var sockets: UnsafeMutablePointer<segget_sockets>?

    /// libcurl's words for this handle's last failure (`CURLOPT_ERRORBUFFER`; libcurl empties it as
    /// a transfer starts). Its own text, with OpenSSL's reason for a TLS failure; read, never shown.
    private let errorBuffer: UnsafeMutablePointer<CChar> = {
        let b = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        b.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        return b
    }()

    package init() {
        CurlGlobal.ensure()
        guard let h = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        raw = h
        installCallbacks()
    }

    deinit {
        curl_easy_cleanup(raw)
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    /// libcurl's description of this handle's last failed transfer (empty if it gave none), e.g.
    /// "OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required, errno 0".
    /// It may quote a server's words: match it, do not print it.
    package func failureDetail() -> String {
        errorBuffer[Int(CURL_ERROR_SIZE) - 1] = 0
        return String(cString: errorBuffer)
    }

    /// Forgets all options (keeping live connections and caches), as between two transfers. The
    /// delegate stays.
    ///
    /// A handle whose transfer was removed from its multi handle while paused gets a new libcurl
    /// handle instead: libcurl 7.88, over HTTP/2 with multiplexing, keeps such a transfer's held body
    /// bytes (and goes on collecting its stream's data while other transfers read the connection) and
    /// hands them to the handle's next transfer at its first unpause, as that transfer's own bytes.
    /// The connections stay in the multi handle's cache either way.
    ///
    /// The corresponding C functions are `curl_easy_reset`, or `curl_easy_cleanup` and `curl_easy_init`.
    package func reset() {
        if isPaused && sockets == nil {
            curl_easy_cleanup(raw)
            guard let h = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
            raw = h
        } else {
            curl_easy_reset(raw)
        }
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
        isPaused = false
        installCallbacks()
        // The reset forgot the socket callbacks; a handle still on a multi handle keeps its book.
        if let sockets { try? trackSockets(in: sockets) }
    }

    /// Records the sockets this handle opens from now on in `book` (a multi handle's), and has them
    /// leave it when closed; nil stops recording. They are close-on-exec either way.
    func trackSockets(in book: UnsafeMutablePointer<segget_sockets>?) throws(CurlError) {
        try check(segget_easy_track_sockets(raw, book), "CURLOPT_SOCKOPTFUNCTION")
        sockets = book
    }

    /// Within this many bytes of the end of an answer whose length is known, and short of it, what
    /// arrived is acknowledged at once.
    ///
    /// Linux holds back an acknowledgement for up to 40 ms on a connection it judges interactive (a
    /// request sent soon after an answer arrived: every kept-alive connection that carries answer
    /// after answer). A server whose socket buffer filled before the end of an answer (nginx with
    /// `sendfile` and `tcp_nopush`, as Debian ships it, does so now and then on loopback) waits for
    /// that acknowledgement to send the rest, so the answer's last bytes came 40 ms late. An answer
    /// within these bytes of its end has little left to gain from the kernel's batching of
    /// acknowledgements, and a whole small answer is where the 40 ms weigh most.
    package static let promptAcknowledgementWindow: Int64 = 256 * 1024

    /// Marks this transfer's connection for an acknowledgement at once when the answer is near its
    /// end but not at it (`promptAcknowledgementWindow`, `promptAcknowledgementDue`); the multi
    /// handle sends it after the round (`MultiHandle.perform`). `curl_easy_getinfo` reads; no
    /// system call here.
    fileprivate func acknowledgeNearTheEnd() {
        guard let sockets else { return }
        var length: curl_off_t = -1
        var got: curl_off_t = 0
        guard segget_easy_getinfo_off(raw, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK,
              segget_easy_getinfo_off(raw, CURLINFO_SIZE_DOWNLOAD_T, &got) == CURLE_OK,
              Self.promptAcknowledgementDue(length: Int64(length), received: Int64(got))
        else { return }
        var port = 0
        guard segget_easy_getinfo_long(raw, CURLINFO_LOCAL_PORT, &port) == CURLE_OK else { return }
        segget_sockets_mark(sockets, port)
    }

    /// Whether an answer of `length` bytes (negative: not told) of which libcurl has counted
    /// `received` is near its end but not at it: the server may be waiting for an acknowledgement to
    /// send the rest. (libcurl counts a read's bytes before it hands them over in pieces, so the
    /// last read of an answer asks for nothing.)
    package static func promptAcknowledgementDue(length: Int64, received: Int64) -> Bool {
        guard length > 0 else { return false }
        let left = length - received
        return left > 0 && left <= promptAcknowledgementWindow
    }

    /// Points libcurl's write and header callbacks at this handle. These options exist in every
    /// libcurl, so a refusal is a broken library, not a condition to handle.
    private func installCallbacks() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        let data: [(CURLoption, String, UnsafeMutableRawPointer)] = [
            (CURLOPT_WRITEDATA, "CURLOPT_WRITEDATA", me), (CURLOPT_HEADERDATA, "CURLOPT_HEADERDATA", me),
            (CURLOPT_ERRORBUFFER, "CURLOPT_ERRORBUFFER", UnsafeMutableRawPointer(errorBuffer)),
        ]
        for (option, name, pointer) in data {
            let rc = CurlCode(segget_easy_setopt_ptr(raw, option, pointer))
            precondition(rc == .ok, CurlError(rc, name).description)
        }
        let functions: [(CURLoption, String, segget_curl_data_cb)] = [
            (CURLOPT_WRITEFUNCTION, "CURLOPT_WRITEFUNCTION", bodyTrampoline),
            (CURLOPT_HEADERFUNCTION, "CURLOPT_HEADERFUNCTION", headerTrampoline),
        ]
        for (option, name, function) in functions {
            let rc = CurlCode(segget_easy_setopt_data_cb(raw, option, function))
            precondition(rc == .ok, CurlError(rc, name).description)
        }
    }

    // MARK: Typed setters (private): each checks its CURLcode

    private func check(_ rc: CURLcode, _ name: String) throws(CurlError) {
        guard rc == CURLE_OK else { throw CurlError(CurlCode(rc), name) }
    }
    private func set(_ o: CURLoption, _ name: String, long v: Int) throws(CurlError) {
        try check(segget_easy_setopt_long(raw, o, v), name)
    }
    private func set(_ o: CURLoption, _ name: String, offset v: Int64) throws(CurlError) {
        try check(segget_easy_setopt_off(raw, o, curl_off_t(v)), name)
    }
    /// libcurl copies string options (since 7.17), so a temporary C string is fine.
    private func set(_ o: CURLoption, _ name: String, string v: String?) throws(CurlError) {
        let rc: CURLcode
        if let v { rc = v.withCString { segget_easy_setopt_string(raw, o, $0) } } else { rc = segget_easy_setopt_ptr(raw, o, nil) }
        try check(rc, name)
    }

    // MARK: Named setters

    /// The URL to fetch (`CURLOPT_URL`).
    package func setURL(_ url: String) throws(CurlError) { try set(CURLOPT_URL, "CURLOPT_URL", string: url) }
    /// The schemes a request may use, such as "http,https" (`CURLOPT_PROTOCOLS_STR`, libcurl 7.85).
    package func setAllowedProtocols(_ list: String) throws(CurlError) {
        try set(CURLOPT_PROTOCOLS_STR, "CURLOPT_PROTOCOLS_STR", string: list)
    }
    /// A byte range "first-last", or nil for the whole body (`CURLOPT_RANGE`).
    package func setRange(_ range: String?) throws(CurlError) { try set(CURLOPT_RANGE, "CURLOPT_RANGE", string: range) }
    /// The half-open byte range `bytes` (`CURLOPT_RANGE`).
    package func setRange(_ bytes: Range<Int64>) throws(CurlError) {
        try setRange("\(bytes.lowerBound)-\(bytes.upperBound - 1)")
    }
    /// Open a new connection for the next transfer instead of reusing a cached one (`CURLOPT_FRESH_CONNECT`).
    package func setFreshConnect(_ on: Bool) throws(CurlError) {
        try set(CURLOPT_FRESH_CONNECT, "CURLOPT_FRESH_CONNECT", long: on ? 1 : 0)
    }
    /// Close the connection after this transfer instead of keeping it for the next (`CURLOPT_FORBID_REUSE`).
    package func setForbidReuse(_ on: Bool) throws(CurlError) {
        try set(CURLOPT_FORBID_REUSE, "CURLOPT_FORBID_REUSE", long: on ? 1 : 0)
    }
    /// Bind the local end to `port`, or to one of the `tries` ports from it (`CURLOPT_LOCALPORT`,
    /// `CURLOPT_LOCALPORTRANGE`).
    package func setLocalPort(_ port: Int, tries: Int) throws(CurlError) {
        try set(CURLOPT_LOCALPORT, "CURLOPT_LOCALPORT", long: port)
        try set(CURLOPT_LOCALPORTRANGE, "CURLOPT_LOCALPORTRANGE", long: tries)
    }
    /// Never raise signals (timeouts without SIGALRM; needed with threads) (`CURLOPT_NOSIGNAL`).
    package func setNoSignal(_ on: Bool) throws(CurlError) { try set(CURLOPT_NOSIGNAL, "CURLOPT_NOSIGNAL", long: on ? 1 : 0) }
    /// Marks every socket libcurl opens close-on-exec, so that none leaks into a child process
    /// (`CURLOPT_SOCKOPTFUNCTION`).
    package func setCloseSocketsOnExec() throws(CurlError) {
        try check(segget_easy_set_cloexec_sockets(raw), "CURLOPT_SOCKOPTFUNCTION")
    }
    /// Let libcurl follow redirects itself (`CURLOPT_FOLLOWLOCATION`).
    package func setFollowRedirects(_ on: Bool) throws(CurlError) {
        try set(CURLOPT_FOLLOWLOCATION, "CURLOPT_FOLLOWLOCATION", long: on ? 1 : 0)
    }
    /// How many redirects libcurl follows when it follows them (`CURLOPT_MAXREDIRS`).
    package func setMaxRedirects(_ n: Int) throws(CurlError) { try set(CURLOPT_MAXREDIRS, "CURLOPT_MAXREDIRS", long: n) }
    /// `CURLOPT_USERAGENT`.
    package func setUserAgent(_ agent: String) throws(CurlError) { try set(CURLOPT_USERAGENT, "CURLOPT_USERAGENT", string: agent) }
    /// The longest a connection may take to open, in milliseconds (`CURLOPT_CONNECTTIMEOUT_MS`).
    package func setConnectTimeout(milliseconds ms: Int) throws(CurlError) {
        try set(CURLOPT_CONNECTTIMEOUT_MS, "CURLOPT_CONNECTTIMEOUT_MS", long: ms)
    }
    /// The longest the whole transfer may take, in milliseconds; 0 for no limit (`CURLOPT_TIMEOUT_MS`).
    package func setTimeout(milliseconds ms: Int) throws(CurlError) {
        try set(CURLOPT_TIMEOUT_MS, "CURLOPT_TIMEOUT_MS", long: ms)
    }
    /// Abort when fewer than `bytesPerSecond` arrive for `seconds` (`CURLOPT_LOW_SPEED_LIMIT`, `_TIME`).
    package func setLowSpeedLimit(bytesPerSecond: Int, seconds: Int) throws(CurlError) {
        try set(CURLOPT_LOW_SPEED_LIMIT, "CURLOPT_LOW_SPEED_LIMIT", long: bytesPerSecond)
        try set(CURLOPT_LOW_SPEED_TIME, "CURLOPT_LOW_SPEED_TIME", long: seconds)
    }
    /// Check the server's certificate, and that it names the host (`CURLOPT_SSL_VERIFYPEER`,
    /// `_VERIFYHOST`); with `proxy`, an https proxy's (`CURLOPT_PROXY_SSL_VERIFYPEER`, `_VERIFYHOST`).
    package func setVerifyTLS(_ on: Bool, proxy: Bool = false) throws(CurlError) {
        let (peer, host) = proxy ? (CURLOPT_PROXY_SSL_VERIFYPEER, CURLOPT_PROXY_SSL_VERIFYHOST) : (CURLOPT_SSL_VERIFYPEER, CURLOPT_SSL_VERIFYHOST)
        try set(peer, proxy ? "CURLOPT_PROXY_SSL_VERIFYPEER" : "CURLOPT_SSL_VERIFYPEER", long: on ? 1 : 0)
        try set(host, proxy ? "CURLOPT_PROXY_SSL_VERIFYHOST" : "CURLOPT_SSL_VERIFYHOST", long: on ? 2 : 0)
    }
    /// Verifies servers' certificates (with `proxy`, an https proxy's) against the PEM certificates in
    /// `file` instead of the system's: `CURLOPT_CAINFO` (`CURLOPT_PROXY_CAINFO`) names the file and
    /// `CURLOPT_CAPATH` (`CURLOPT_PROXY_CAPATH`) is cleared (Debian's libcurl also reads
    /// /etc/ssl/certs by default, which would trust every system authority besides).
    package func setCertificateAuthorities(file: String, proxy: Bool = false) throws(CurlError) {
        try set(proxy ? CURLOPT_PROXY_CAINFO : CURLOPT_CAINFO, proxy ? "CURLOPT_PROXY_CAINFO" : "CURLOPT_CAINFO", string: file)
        try set(proxy ? CURLOPT_PROXY_CAPATH : CURLOPT_CAPATH, proxy ? "CURLOPT_PROXY_CAPATH" : "CURLOPT_CAPATH", string: nil)
    }
    /// Shows the PEM certificate in `file` to a server (with `proxy`, an https proxy) that asks for
    /// one (`CURLOPT_SSLCERT`, `CURLOPT_PROXY_SSLCERT`), with its key from `key`, else from the same
    /// file (`CURLOPT_SSLKEY`, `CURLOPT_PROXY_SSLKEY`).
    package func setClientCertificate(_ file: String, key: String?, proxy: Bool = false) throws(CurlError) {
        let options = proxy
            ? [(CURLOPT_PROXY_SSLCERT, "CURLOPT_PROXY_SSLCERT", file), (CURLOPT_PROXY_SSLCERTTYPE, "CURLOPT_PROXY_SSLCERTTYPE", "PEM"),
               (CURLOPT_PROXY_SSLKEY, "CURLOPT_PROXY_SSLKEY", key ?? file), (CURLOPT_PROXY_SSLKEYTYPE, "CURLOPT_PROXY_SSLKEYTYPE", "PEM")]
            : [(CURLOPT_SSLCERT, "CURLOPT_SSLCERT", file), (CURLOPT_SSLCERTTYPE, "CURLOPT_SSLCERTTYPE", "PEM"),
               (CURLOPT_SSLKEY, "CURLOPT_SSLKEY", key ?? file), (CURLOPT_SSLKEYTYPE, "CURLOPT_SSLKEYTYPE", "PEM")]
        for (option, name, value) in options { try set(option, name, string: value) }
    }
    /// OpenSSL's verdict on the server's certificate in this handle's last TLS handshake
    /// (`CURLINFO_SSL_VERIFYRESULT`, an `X509_V_ERR_…` number; 0 when it passed or none was checked),
    /// or with `proxy` on an https proxy's (`CURLINFO_PROXY_SSL_VERIFYRESULT`).
    package func tlsVerifyResult(proxy: Bool = false) -> Int {
        var v = 0
        return segget_easy_getinfo_long(raw, proxy ? CURLINFO_PROXY_SSL_VERIFYRESULT : CURLINFO_SSL_VERIFYRESULT, &v) == CURLE_OK ? v : 0
    }
    /// Whether this transfer made no connection of its own (`CURLINFO_NUM_CONNECTS` 0): it went on a
    /// connection an earlier transfer made, or failed before connecting.
    package func reusedConnection() -> Bool {
        var made = 0
        return segget_easy_getinfo_long(raw, CURLINFO_NUM_CONNECTS, &made) == CURLE_OK && made == 0
    }
    /// The status a proxy answered this transfer's `CONNECT` with (`CURLINFO_HTTP_CONNECTCODE`); 0
    /// when no tunnel was asked for or no answer came (libcurl clears it when a transfer starts).
    package func tunnelStatus() -> Int {
        var v = 0
        return segget_easy_getinfo_long(raw, CURLINFO_HTTP_CONNECTCODE, &v) == CURLE_OK ? v : 0
    }
    /// `CURLOPT_HTTP_VERSION`.
    package func setHTTPVersion(_ v: HTTPVersion) throws(CurlError) {
        let value = switch v {
        case .http1_1: segget_curl_http_version_1_1()
        case .http2OverTLS: segget_curl_http_version_2tls()
        }
        try set(CURLOPT_HTTP_VERSION, "CURLOPT_HTTP_VERSION", long: value)
    }
    /// The receive buffer: large buffers mean fewer callbacks and syscalls (`CURLOPT_BUFFERSIZE`).
    package func setReceiveBufferSize(_ bytes: Int) throws(CurlError) {
        try set(CURLOPT_BUFFERSIZE, "CURLOPT_BUFFERSIZE", long: bytes)
    }
    /// `CURLOPT_TCP_KEEPALIVE`.
    package func setTCPKeepAlive(_ on: Bool) throws(CurlError) {
        try set(CURLOPT_TCP_KEEPALIVE, "CURLOPT_TCP_KEEPALIVE", long: on ? 1 : 0)
    }
    /// `user:password`, sent with Basic authentication on the first request as `curl -u` does
    /// (`CURLOPT_USERPWD`, `CURLOPT_HTTPAUTH`).
    package func setBasicCredentials(_ userAndPassword: String) throws(CurlError) {
        try set(CURLOPT_USERPWD, "CURLOPT_USERPWD", string: userAndPassword)
        try set(CURLOPT_HTTPAUTH, "CURLOPT_HTTPAUTH", long: segget_curl_auth_basic())
    }
    /// Read credentials from ~/.netrc when it has some for the host (`CURLOPT_NETRC`, `CURL_NETRC_OPTIONAL`).
    package func setUseNetrc() throws(CurlError) { try set(CURLOPT_NETRC, "CURLOPT_NETRC", long: 1) }
    /// A `Cookie` header value (`CURLOPT_COOKIE`).
    package func setCookie(_ cookie: String) throws(CurlError) { try set(CURLOPT_COOKIE, "CURLOPT_COOKIE", string: cookie) }
    /// A cookie file to read (`CURLOPT_COOKIEFILE`).
    package func setCookieFile(_ path: String) throws(CurlError) {
        try set(CURLOPT_COOKIEFILE, "CURLOPT_COOKIEFILE", string: path)
    }
    /// `CURLOPT_REFERER`.
    package func setReferer(_ referer: String) throws(CurlError) { try set(CURLOPT_REFERER, "CURLOPT_REFERER", string: referer) }
    /// Keeps a proxy's answer to `CONNECT` away from the header callback (`CURLOPT_SUPPRESS_CONNECT_HEADERS`,
    /// libcurl 7.54): its `200 Connection established` read as a complete head of the server's; its
    /// status stays readable (`tunnelStatus`).
    package func setSuppressConnectHeaders() throws(CurlError) {
        try set(CURLOPT_SUPPRESS_CONNECT_HEADERS, "CURLOPT_SUPPRESS_CONNECT_HEADERS", long: 1)
    }
    /// An explicit proxy; without one libcurl reads http_proxy, https_proxy and no_proxy (`CURLOPT_PROXY`).
    package func setProxy(_ proxy: String) throws(CurlError) { try set(CURLOPT_PROXY, "CURLOPT_PROXY", string: proxy) }
    /// Largest body accepted, in bytes (`CURLOPT_MAXFILESIZE_LARGE`).
    package func setMaxFileSize(_ bytes: Int64) throws(CurlError) {
        try set(CURLOPT_MAXFILESIZE_LARGE, "CURLOPT_MAXFILESIZE_LARGE", offset: bytes)
    }

    /// Replaces the extra request header lines (`Name: value`) (`CURLOPT_HTTPHEADER`).
    package func setHeaders(_ lines: [String]) throws(CurlError) {
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines {
            guard let longer = curl_slist_append(list, line) else {
                if let list { curl_slist_free_all(list) }
                throw CurlError(.outOfMemory, "curl_slist_append")
            }
            list = longer
        }
        let rc = segget_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, list)
        guard rc == CURLE_OK else {
            if let list { curl_slist_free_all(list) }
            throw CurlError(CurlCode(rc), "CURLOPT_HTTPHEADER")
        }
        // libcurl uses the list until the next transfer's options replace it: keep it until then.
        if let headerList { curl_slist_free_all(headerList) }
        headerList = list
    }

    // MARK: Pausing

    /// Stops delivering body bytes until `unpause()`, as a `.pause` decision does.
    ///
    /// The corresponding C function is `curl_easy_pause` with `CURLPAUSE_RECV`.
    package func pause() throws(CurlError) {
        try check(curl_easy_pause(raw, CURLPAUSE_RECV), "curl_easy_pause")
        isPaused = true
    }

    /// Resumes a paused transfer. libcurl hands over the bytes it held back at once, from inside this
    /// call, so the delegate may pause the transfer again before it returns, or abort it: then this
    /// throws `writeError`, and the transfer completes with that error on the next `perform`.
    ///
    /// The corresponding C function is `curl_easy_pause` with `CURLPAUSE_CONT`.
    package func unpause() throws(CurlError) {
        isPaused = false
        try check(curl_easy_pause(raw, CURLPAUSE_CONT), "curl_easy_pause")
    }

    // MARK: Blocking perform

    /// Runs the transfer to its end on the calling thread, outside any multi handle.
    ///
    /// The corresponding C function is `curl_easy_perform`.
    package func perform() -> CurlCode { CurlCode(curl_easy_perform(raw)) }

    // MARK: Info

    private func info(_ i: CURLINFO, _ name: String) throws(CurlError) -> Int {
        var v = 0
        try check(segget_easy_getinfo_long(raw, i, &v), name)
        return v
    }

    /// The last response's status code, 0 before any (`CURLINFO_RESPONSE_CODE`).
    package func responseCode() throws(CurlError) -> Int { try info(CURLINFO_RESPONSE_CODE, "CURLINFO_RESPONSE_CODE") }
    /// How many new connections the last transfer had to open: 0 when it reused a kept-alive one
    /// (`CURLINFO_NUM_CONNECTS`).
    package func newConnections() throws(CurlError) -> Int { try info(CURLINFO_NUM_CONNECTS, "CURLINFO_NUM_CONNECTS") }
    /// The local port of the last connection used (`CURLINFO_LOCAL_PORT`).
    package func localPort() throws(CurlError) -> Int { try info(CURLINFO_LOCAL_PORT, "CURLINFO_LOCAL_PORT") }
    /// The last URL used (`CURLINFO_EFFECTIVE_URL`).
    package func effectiveURL() throws(CurlError) -> String? {
        var p: UnsafeMutablePointer<CChar>?
        try check(segget_easy_getinfo_string(raw, CURLINFO_EFFECTIVE_URL, &p), "CURLINFO_EFFECTIVE_URL")
        return p.map { String(cString: $0) }
    }
    /// The body length the response announced, nil when it announced none
    /// (`CURLINFO_CONTENT_LENGTH_DOWNLOAD_T`).
    package func contentLength() throws(CurlError) -> Int64? {
        var v: curl_off_t = -1
        try check(segget_easy_getinfo_off(raw, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &v), "CURLINFO_CONTENT_LENGTH_DOWNLOAD_T")
        return v < 0 ? nil : Int64(v)
    }
    /// Whether the current transfer's connection is made and its request is going out: libcurl's
    /// pre-transfer time, 0 until then whatever the connection (new or reused, direct or through any
    /// kind of proxy, TLS or not), and set again for each transfer.
    package func requestGoingOut() -> Bool {
        var v: curl_off_t = 0
        return segget_easy_getinfo_off(raw, CURLINFO_PRETRANSFER_TIME_T, &v) == CURLE_OK && v > 0
    }
    /// Whether the last transfer had its connection: a new one whose handshakes ended (TCP's and,
    /// with `tls`, TLS's: libcurl's connect and app-connect times stay 0 until then), or a reused one
    /// (those times are 0 there too, but no new connection was made and the local port is known;
    /// after a connect timeout both are 0).
    package func handshakeDone(tls: Bool) -> Bool {
        var v: curl_off_t = 0
        if segget_easy_getinfo_off(raw, tls ? CURLINFO_APPCONNECT_TIME_T : CURLINFO_CONNECT_TIME_T, &v) == CURLE_OK, v > 0 { return true }
        var port = 0
        var made = 0
        return segget_easy_getinfo_long(raw, CURLINFO_LOCAL_PORT, &port) == CURLE_OK && port != 0
            && segget_easy_getinfo_long(raw, CURLINFO_NUM_CONNECTS, &made) == CURLE_OK && made == 0
    }
    /// Body bytes received by the last transfer (`CURLINFO_SIZE_DOWNLOAD_T`).
    package func bytesReceived() throws(CurlError) -> Int64 {
        var v: curl_off_t = 0
        try check(segget_easy_getinfo_off(raw, CURLINFO_SIZE_DOWNLOAD_T, &v), "CURLINFO_SIZE_DOWNLOAD_T")
        return Int64(v)
    }
}

// MARK: Callbacks

private func bodyTrampoline(
    _ ptr: UnsafeMutablePointer<CChar>?, _ size: Int, _ n: Int, _ ud: UnsafeMutableRawPointer?
) -> Int {
    let count = size * n
    guard let ud else { return count == 0 ? 1 : 0 }
    let handle = Unmanaged<EasyHandle>.fromOpaque(ud).takeUnretainedValue()
    handle.acknowledgeNearTheEnd()
    guard let delegate = handle.delegate else { return count }
    switch delegate.transfer(handle, received: UnsafeRawBufferPointer(start: ptr, count: count)) {
    case .proceed:
        return count
    case .pause:
        handle.markPaused()
        return Int(CURL_WRITEFUNC_PAUSE)
    case .abort:
        // Any count other than the one given (and other than the pause value) is an error.
        return count == 0 ? 1 : 0
    }
}

private func headerTrampoline(
    _ ptr: UnsafeMutablePointer<CChar>?, _ size: Int, _ n: Int, _ ud: UnsafeMutableRawPointer?
) -> Int {
    let count = size * n
    guard let ptr, let ud else { return count }
    let handle = Unmanaged<EasyHandle>.fromOpaque(ud).takeUnretainedValue()
    let line = decodedHeaderLine(UnsafeRawBufferPointer(start: ptr, count: count))
    handle.delegate?.transfer(handle, receivedHeaderLine: line.text, latin1: line.latin1)
    return count
}

extension EasyHandle {
    fileprivate func markPaused() { isPaused = true }
}
