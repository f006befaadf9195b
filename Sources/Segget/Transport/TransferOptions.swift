import Glibc
import SeggetCurl

/// Settings that apply to every HTTP request of a download.
public struct TransferOptions: Sendable, Equatable {
    public var userAgent = "segget/\(seggetVersion)"
    /// Extra request header lines, `Name: value`.
    public var headers: [String] = []
    /// Skip TLS certificate and host name verification (`-k`).
    public var insecure = false
    /// The authorities servers are verified against and the certificate this client shows.
    public var tls = TLSFiles()
    /// The same for an https proxy (`--proxy-ca-certificate`, `--proxy-certificate`,
    /// `--proxy-private-key`): a proxy's TLS is apart from the server's, as in curl.
    public var proxyTLS = TLSFiles()
    /// Skip an https proxy's certificate and host name verification (`--proxy-insecure`).
    public var proxyInsecure = false
    /// Allow HTTP/2 (`--http2`): a single download's ranges keep a connection each, as over HTTP/1.1;
    /// a batch's files share connections as streams (see `multiplexed`).
    public var http2 = false
    /// With `http2`, the download runs on a loop that multiplexes (a batch's, see `DownloadLoop`):
    /// its requests may go as streams on connections that others' requests use.
    public var multiplexed = false
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

    /// The proxy a request to `url` goes through (`--proxy`, else the environment's, as libcurl picks
    /// it; see `ProxyRoute`), for messages; nil when none.
    func proxy(for url: String) -> String? {
        ProxyRoute.proxy(for: url, explicit: proxy) { name in getenv(name).map { String(cString: $0) } }
    }
}

public let seggetVersion = "0.1.0"

/// Files that change how TLS connections are made, absolute paths checked when given (see the
/// command line's `caCertificateFile`, `clientCertificateFiles`).
public struct TLSFiles: Sendable, Equatable {
    /// PEM certificates of the authorities trusted instead of the system's (`--ca-certificate`);
    /// unused with `TransferOptions.insecure`.
    public var caCertificate: String?
    /// The PEM certificate this client shows a server that asks for one (`--certificate`), with its
    /// unencrypted key in the same file or in `privateKey` (`--private-key`).
    public var clientCertificate: String?
    public var privateKey: String?

    public init(caCertificate: String? = nil, clientCertificate: String? = nil, privateKey: String? = nil) {
        self.caCertificate = caCertificate
        self.clientCertificate = clientCertificate
        self.privateKey = privateKey
    }
}

extension EasyHandle {
    /// Applies the options shared by probes and ranged fetches. Redirects are never followed by
    /// libcurl: the probe follows them itself so that it can apply segget's redirect policy.
    /// `lowSpeedBackstop`: let libcurl drop a silent connection too (the blocking probe has no loop
    /// of its own to watch it; the fetch loop measures stalls itself, to the second).
    func configure(url: String, options: TransferOptions, extraHeaders: [String] = [], lowSpeedBackstop: Bool = true) throws(CurlError) {
        try setURL(url)
        try setAllowedProtocols("http,https")
        try setNoSignal(true)
        try setCloseSocketsOnExec()
        try setFollowRedirects(false)
        try setUserAgent(options.userAgent)
        try setConnectTimeout(milliseconds: Int(options.connectTimeout * 1000))
        if options.stallTimeout > 0 && lowSpeedBackstop {
            try setLowSpeedLimit(bytesPerSecond: 1, seconds: max(1, Int(options.stallTimeout.rounded(.up))))
        }
        try setVerifyTLS(!options.insecure)
        if let file = options.tls.caCertificate, !options.insecure { try setCertificateAuthorities(file: file) }
        if let certificate = options.tls.clientCertificate {
            try setClientCertificate(certificate, key: options.tls.privateKey)
        }
        do throws(CurlError) {
            try setHTTPVersion(options.http2 ? .http2OverTLS : .http1_1)
        } catch where error.code == .easy(.unsupportedProtocol) {
            // A libcurl built without HTTP/2 says so here; `--http2` only allows HTTP/2, so the
            // download goes on over HTTP/1.1 as it always did.
            try setHTTPVersion(.http1_1)
        }
        do throws(CurlError) {
            try setReceiveBufferSize(options.receiveBufferSize)
        } catch where error.code == .easy(.badFunctionArgument) {
            // libcurl 7.88 refuses a new size once the handle has its receive buffer, which a handle
            // reused after an HTTP/2 transfer keeps (the stream's connection lives on). The buffer it
            // has was made at this same size by the handle's first request, so nothing is lost.
        }
        try setTCPKeepAlive(true)
        if let c = options.credentials {
            // Basic, sent with the first request as curl -u does: many file servers never send a 401.
            try setBasicCredentials(c)
        }
        if options.useNetrc { try setUseNetrc() }
        if let c = options.cookie {
            // A value with '=' is a cookie string; anything else names a cookie file.
            if c.contains("=") { try setCookie(c) } else { try setCookieFile(c) }
        }
        if let r = options.referer { try setReferer(r) }
        if let p = options.proxy { try setProxy(p) }
        // Through a proxy's tunnel (`--proxy`, or https_proxy for an https URL) the proxy's answer to
        // CONNECT came to the head parser as a complete 200: a probe cut 0.25 s after a head took it
        // for the server's answer where the tunnel's TLS and request took longer (a path of 150 ms),
        // and said "the server ignored the byte range" (one connection, a partial download dropped,
        // a changed file not noticed). A refusal is read from its status (`tunnelStatus`).
        try setSuppressConnectHeaders()
        // For an https proxy, `--proxy` or the environment's (libcurl ignores these for others).
        // Set only when asked: a libcurl built without proxies knows no PROXY_ options at all.
        if options.proxyInsecure { try setVerifyTLS(false, proxy: true) }
        if let file = options.proxyTLS.caCertificate, !options.proxyInsecure { try setCertificateAuthorities(file: file, proxy: true) }
        if let certificate = options.proxyTLS.clientCertificate {
            try setClientCertificate(certificate, key: options.proxyTLS.privateKey, proxy: true)
        }
        try setHeaders(options.headers + extraHeaders)
    }
}

extension SeggetError {
    /// libcurl refused an option or failed a call that segget makes on every transfer: the libcurl
    /// installed is too old or built without something segget needs. Retrying cannot help.
    init(_ error: CurlError) {
        self.init(.internalError, error.description, retryAdvice: .never)
    }
}

/// Runs libcurl calls whose failure ends the download: a `CurlError` becomes the `SeggetError` above.
func libcurl<T>(_ body: () throws(CurlError) -> T) throws(SeggetError) -> T {
    do throws(CurlError) {
        return try body()
    } catch {
        throw SeggetError(error)
    }
}

extension TransferOptions {
    /// The same options with everything that identifies the user removed (for a cross-host redirect).
    func withoutCredentials() -> TransferOptions {
        var o = self
        o.credentials = nil
        o.useNetrc = false
        o.cookie = nil
        o.headers = headers.filter {
            let name = $0.split(separator: ":", maxSplits: 1).first?.trimmingASCIIWhitespace().lowercased() ?? ""
            return name != "authorization" && name != "cookie" && name != "proxy-authorization"
        }
        return o
    }
}
