import SeggetCurl

extension Prober {
    /// How to give a proxy that answered 407 its credentials.
    static let proxyCredentials = "give them in the proxy URL: http://USER:PASSWORD@HOST:PORT"

    /// What to do about a proxy that refused a request for want of credentials: give them, or, where
    /// its URL carried some, check them (they were refused).
    static func proxyCredentialsAdvice(_ proxy: String) -> String {
        URLParts(proxy)?.hasUserInfo == true ? refusedCredentials : "the proxy wants credentials; \(proxyCredentials)"
    }

    /// What to do about the credentials in a proxy URL the proxy refused.
    static let refusedCredentials = "the user name and password in the proxy URL were refused; check them (\(ProxyRoute.percentEncodeAdvice))"

    /// Whether libcurl's words for a SOCKS proxy's failure (`detail`) say it refused the credentials,
    /// or wanted some: "User was rejected by the SOCKS5 server", "No authentication method was
    /// acceptable" (libcurl 7.88's wording).
    static func socksRefusedCredentials(_ detail: String?) -> Bool {
        guard let d = detail?.lowercased() else { return false }
        return d.contains("user was rejected") || d.contains("no authentication method was acceptable")
            || d.contains("authentication failed")
    }

    /// The failures that are the proxy's, not the server's, for a request to `url` through `proxy`
    /// (both as given): it cannot be reached or resolved, it refused the tunnel (its answer to
    /// `CONNECT` is the head libcurl ended on), a SOCKS proxy failed, or an https proxy's TLS
    /// handshake broke off (`peer`, `TLSPeer.of`) without an alert or plain text, which before was
    /// told as the request's, naming no proxy. Also the server's handshake broken off inside an https
    /// proxy's tunnel, which is how libcurl 7.88 reports a server certificate that fails verification
    /// there (its verdict unread), so the advice names that cause too.
    static func proxyError(
        _ code: CurlCode, url: String, proxy: String, head: ResponseHead, connected: Bool, peer: TLSPeer = .server, detail: String? = nil,
        tunnelStatus: Int = 0
    ) -> SeggetError? {
        let u = URLParts.shown(url), p = URLParts.shown(proxy)
        // The proxy's refusal of the tunnel: its status, whatever code libcurl ended with. Its head no
        // longer reaches the parser (`EasyHandle.setSuppressConnectHeaders`): a head here is the server's.
        if tunnelStatus >= 300 { return tunnelRefusal(tunnelStatus, url: url, proxy: proxy) }
        let instead = "check that the proxy is up and reachable, or \(NextStep.otherProxy.cli)"
        switch code {
        case .couldNotConnect:
            return caused(SeggetError(.network, "could not connect to the proxy \(p) (for \(u)); \(instead)."), code)
        case .operationTimedOut where !connected && head.byteCount == 0:
            return caused(SeggetError(.network, "could not connect to the proxy \(p) (for \(u)) in time; \(instead)."), code)
        case .couldNotResolveProxy:
            return caused(SeggetError(.network, "could not resolve the host of the proxy \(p) (for \(u)); \(instead).", retryAdvice: .once), code)
        case .tlsHandshakeFailed where peer != .server:
            return SeggetError(
                .network, "the TLS handshake with the proxy \(p) (for \(u)) broke off; check that the proxy is up and serves TLS at that port, or try again later.",
                retryAdvice: .mayChange)
        case .tlsHandshakeFailed where ProxyRoute.isTLS(proxy) && URLParts.isTLS(url):
            return SeggetError(
                .network, "the TLS handshake with the server of \(u), inside the tunnel of the proxy \(p), broke off; inside an https proxy's tunnel libcurl reports a server certificate that fails verification this way, so if a private or company authority signed it, \(NextStep.trustPrivateAuthority.cli); else check the network, or try again later.",
                retryAdvice: .mayChange)
        case .proxyFailure where socksRefusedCredentials(detail):
            // No retry changes a refusal of the credentials: before, five retries took 27 s.
            let advice = URLParts(proxy)?.hasUserInfo == true
                ? refusedCredentials : "it wants a user name and password; give them in the proxy URL: socks5h://USER:PASSWORD@HOST:PORT"
            return SeggetError(.network, "the proxy \(p) refused the connection to \(u): \(advice).", retryAdvice: .never)
        case .proxyFailure:
            return SeggetError(.network, "the proxy \(p) failed to reach \(u) (\(code)); check that the proxy may connect there.")
        default:
            return nil
        }
    }

    /// The proxy `proxy` refused the tunnel to `url` with `status` (its answer to `CONNECT`).
    static func tunnelRefusal(_ status: Int, url: String, proxy: String) -> SeggetError {
        let u = URLParts.shown(url), p = URLParts.shown(proxy)
        if status == 407 {
            return SeggetError(
                .httpStatus,
                URLParts(proxy)?.hasUserInfo == true
                    ? "the proxy \(p) refused the user name and password in its URL (HTTP 407) for \(u); check them (\(ProxyRoute.percentEncodeAdvice))."
                    : "the proxy \(p) wants credentials (HTTP 407) to reach \(u); \(Self.proxyCredentials).",
                httpStatus: 407, retryAdvice: .never)
        }
        return SeggetError(
            .httpStatus, "the proxy \(p) refused the tunnel to \(u) with HTTP \(status); the proxy could not reach the server, or may not connect there.",
            httpStatus: status)
    }
}

/// `e` with the network cause libcurl's `code` names (as aria2 numbers a proxy's failures too).
func caused(_ e: SeggetError, _ code: CurlCode) -> SeggetError {
    var e = e
    e.networkCause = NetworkCause(code)
    return e
}

extension NetworkCause {
    /// The cause libcurl's code names, nil for the failures aria2 calls a "network problem" (6).
    init?(_ code: CurlCode) {
        switch code {
        case .couldNotResolveHost, .couldNotResolveProxy: self = .nameNotResolved
        case .couldNotConnect: self = .couldNotConnect
        case .operationTimedOut: self = .timedOut
        default: return nil
        }
    }
}
