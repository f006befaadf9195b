import SeggetCurl

/// A TLS alert about certificates that a server ended a connection with, read from libcurl's words
/// for the failure (OpenSSL's reason, "tlsv13 alert certificate required"). A server that wants a
/// client certificate and did not get one, or refused the one it got, says so with one of these:
/// over TLS 1.3 after the handshake, so libcurl reports a failed receive or send (Apache's
/// `SSLVerifyClient require`: "certificate required"; over TLS 1.2 "handshake failure", Go's
/// servers "bad certificate"). Retrying such a connection only repeats the refusal.
enum TLSAlert: Equatable, Sendable {
    case certificateRequired
    case handshakeFailure
    case badCertificate
    case unsupportedCertificate
    case certificateRevoked
    case certificateExpired
    case certificateUnknown
    case unknownAuthority
    case accessDenied

    /// OpenSSL's names of the alerts (`SSL_R_…` reason strings, after "alert ").
    private static let names: [(String, TLSAlert)] = [
        ("certificate required", .certificateRequired), ("handshake failure", .handshakeFailure),
        ("bad certificate", .badCertificate), ("unsupported certificate", .unsupportedCertificate),
        ("certificate revoked", .certificateRevoked), ("certificate expired", .certificateExpired),
        ("certificate unknown", .certificateUnknown), ("unknown ca", .unknownAuthority),
        ("access denied", .accessDenied),
    ]

    /// The alert in `detail` (`EasyHandle.failureDetail()`) of a transfer that ended with `code`; nil
    /// for other codes (a TLS alert ends a handshake, a receive or a send) and other words.
    init?(code: CurlCode, detail: String) {
        guard code == .tlsHandshakeFailed || code == .receiveError || code == .sendError,
            let at = detail.firstRange(of: " alert ")
        else { return nil }
        let rest = detail[at.upperBound...]
        guard let found = Self.names.first(where: { rest.hasPrefix($0.0) }) else { return nil }
        self = found.1
    }

    /// Whether a handshake that failed with `code` met something that is not TLS: OpenSSL's "wrong
    /// version number" for an answer that is no TLS record (a plain HTTP server at an https URL's
    /// port, or a plain HTTP proxy given as https://). Retrying meets the same answer.
    static func peerNotTLS(code: CurlCode, detail: String) -> Bool {
        code == .tlsHandshakeFailed && detail.contains("wrong version number")
    }

    /// What the alert says of a client certificate, in words.
    var words: String {
        switch self {
        case .certificateRequired: "certificate required"
        case .handshakeFailure: "handshake failure"
        case .badCertificate: "bad certificate"
        case .unsupportedCertificate: "a kind of certificate it does not accept"
        case .certificateRevoked: "the certificate has been revoked"
        case .certificateExpired: "the certificate has expired"
        case .certificateUnknown: "it cannot use the certificate"
        case .unknownAuthority: "no authority it trusts signed the certificate"
        case .accessDenied: "access denied"
        }
    }
}

extension Prober {
    /// The error for a connection a server (or an https proxy, `peer`) ended with `alert`: exit 3 and
    /// no retry (it will refuse again). Without a client certificate, every alert but a handshake
    /// failure says the peer wants one; a handshake failure may also be a TLS version or cipher in
    /// common lacking. With one, the peer refused it. `tls`: the files given for that peer.
    static func tlsAlertError(url: ServerText, tls: TLSFiles, alert: TLSAlert, peer: TLSPeer = .server) -> SeggetError {
        let who = peer.named(url)
        let option = peer.certificateOption
        let message =
            switch (tls.clientCertificate, alert) {
            case (nil, .handshakeFailure):
                "\(who) ended the TLS handshake (alert: handshake failure); it may require a client certificate \(peer.mayWantClientCertificate.cli), or accept no TLS version or cipher that segget offers."
            case (nil, _):
                "\(who) requires a client certificate (TLS alert: \(alert.words)); \(peer.giveClientCertificate.cli)."
            case (let file?, .certificateRequired):
                "\(who) asked again for a client certificate though the one in \(file) (\(option)) was offered; check that it is the certificate \(peer == .server ? "this server" : "this proxy") expects."
            case (let file?, _):
                "\(who) refused the client certificate in \(file) (\(option)) (TLS alert: \(alert.words)); give a certificate \(peer == .server ? "this server" : "this proxy") accepts."
            }
        return SeggetError(.network, message, retryAdvice: .never)
    }

    /// The error for a peer that answered the TLS handshake in plain text (`TLSAlert.peerNotTLS`):
    /// exit 3, no retry.
    static func notTLSError(url: ServerText, peer: TLSPeer) -> SeggetError {
        let message =
            switch peer {
            case .server:
                "the server of \(url) did not answer in TLS (OpenSSL: wrong version number): it likely serves plain HTTP at that port; check the URL's scheme and port."
            case .proxy(let p):
                "the proxy \(p) (for \(url)) did not answer in TLS (OpenSSL: wrong version number): it is likely a plain HTTP proxy; give it as http://HOST:PORT (--proxy, or the *_proxy variable): a proxy URL's scheme is how segget speaks to the proxy, not the scheme of the URLs it carries."
            }
        return SeggetError(.network, message, retryAdvice: .never)
    }
}
