import CCurl

/// Settings that apply to every HTTP request of a download.
public struct TransferOptions: Sendable, Equatable {
    public var userAgent = "segget/\(seggetVersion)"
    /// Extra request header lines, `Name: value`.
    public var headers: [String] = []
    /// Skip TLS certificate and host name verification (`-k`).
    public var insecure = false
    /// Allow HTTP/2 (multiplexed ranges share one connection, so off by default).
    public var http2 = false
    public var connectTimeout: Double = 15
    /// A connection that delivers no byte for this long is dropped and retried.
    public var stallTimeout: Double = 20
    /// Follow at most this many redirects.
    public var maxRedirects = 10
    /// Allow a redirect from https to plain http.
    public var allowInsecureRedirect = false
    /// `user:password` for HTTP authentication (`-u`).
    public var credentials: String?
    /// Read credentials from ~/.netrc (`--netrc`).
    public var useNetrc = false
    /// Cookie header value or cookie file (`-b`).
    public var cookie: String?
    public var referer: String?
    /// Explicit proxy; otherwise libcurl reads http_proxy / https_proxy / no_proxy.
    public var proxy: String?
    /// Receive buffer per connection; large buffers mean fewer callbacks and syscalls.
    public var receiveBufferSize = 512 * 1024

    public init() {}
}

public let seggetVersion = "0.1.0"

extension EasyHandle {
    /// Applies the options shared by probes and ranged fetches. Redirects are never followed by
    /// libcurl: the probe follows them itself so that it can apply segget's redirect policy.
    /// `lowSpeedBackstop`: let libcurl drop a silent connection too (the blocking probe has no loop
    /// of its own to watch it; the fetch loop measures stalls itself, to the second).
    func configure(url: String, options: TransferOptions, extraHeaders: [String] = [], lowSpeedBackstop: Bool = true) {
        set(CURLOPT_URL, url)
        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_NOSIGNAL, true)
        _ = segget_easy_set_cloexec_sockets(raw)
        set(CURLOPT_FOLLOWLOCATION, false)
        set(CURLOPT_USERAGENT, options.userAgent)
        set(CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout * 1000))
        if options.stallTimeout > 0 && lowSpeedBackstop {
            set(CURLOPT_LOW_SPEED_LIMIT, 1)
            set(CURLOPT_LOW_SPEED_TIME, max(1, Int(options.stallTimeout.rounded(.up))))
        }
        set(CURLOPT_SSL_VERIFYPEER, !options.insecure)
        set(CURLOPT_SSL_VERIFYHOST, options.insecure ? 0 : 2)
        set(CURLOPT_HTTP_VERSION, options.http2 ? segget_curl_http_version_2tls() : segget_curl_http_version_1_1())
        set(CURLOPT_BUFFERSIZE, options.receiveBufferSize)
        set(CURLOPT_TCP_KEEPALIVE, true)
        if let c = options.credentials {
            // Basic, sent with the first request as curl -u does: many file servers never send a 401.
            set(CURLOPT_USERPWD, c)
            set(CURLOPT_HTTPAUTH, segget_curl_auth_basic())
        }
        if options.useNetrc { set(CURLOPT_NETRC, 1) }  // CURL_NETRC_OPTIONAL
        if let c = options.cookie {
            // A value with '=' is a cookie string; anything else names a cookie file.
            if c.contains("=") { set(CURLOPT_COOKIE, c) } else { set(CURLOPT_COOKIEFILE, c) }
        }
        if let r = options.referer { set(CURLOPT_REFERER, r) }
        if let p = options.proxy { set(CURLOPT_PROXY, p) }
        setHeaders(options.headers + extraHeaders)
    }
}
