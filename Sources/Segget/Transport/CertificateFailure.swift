import SeggetCurl

/// What a failed transfer's handshakes showed, read from its handle where it failed: the one reader
/// of the probe, the fetch and a document's fetch.
struct HandshakeOutcome {
    /// Whether the connection was made (TCP and TLS), read where a transfer timed out: libcurl's one
    /// code for a timeout means `--connect-timeout` only when this is false.
    var connected = true
    /// Whose TLS failed: the server's, or that of the https proxy on the way (see `TLSPeer.of`).
    var peer = TLSPeer.server
    /// OpenSSL's verdict on that peer's certificate, read where it failed verification (see
    /// `EasyHandle.tlsVerifyResult(proxy:)`).
    var verifyResult = 0
    /// The TLS alert about certificates the peer ended the connection with, if that is how it failed.
    var alert: TLSAlert?
    /// The peer answered the handshake with something that is not TLS (see `TLSAlert.peerNotTLS`).
    var notTLS = false
    /// libcurl's words for a proxy's failure (`CURLE_PROXY`): a SOCKS proxy's refusal of the
    /// credentials says so only there.
    var proxyDetail: String?
    /// A proxy refused the tunnel (its `CONNECT` answered 300 or more): the head the transfer
    /// collected is the proxy's, not the server's.
    var tunnelRefused = false
    /// The proxy's status for the `CONNECT` of this transfer's tunnel (`EasyHandle.tunnelStatus`), 0
    /// where there was none.
    var tunnelStatus = 0

    init() {}

    /// `proxy`: the proxy the request went through (`TransferOptions.proxy(for:)`).
    init(after code: CurlCode, of easy: EasyHandle, url: String, proxy: String?) {
        if code == .operationTimedOut {
            connected = easy.handshakeDone(tls: URLParts.isTLS(url) || proxy.map(ProxyRoute.isTLS) == true)
        }
        let tunnel = easy.tunnelStatus()
        tunnelStatus = tunnel
        tunnelRefused = tunnel >= 300
        peer = TLSPeer.of(url: url, proxy: proxy, tunnelStatus: tunnel, reused: easy.reusedConnection())
        if code == .peerFailedVerification { verifyResult = easy.tlsVerifyResult(proxy: peer != .server) }
        let detail = easy.failureDetail()
        alert = TLSAlert(code: code, detail: detail)
        notTLS = TLSAlert.peerNotTLS(code: code, detail: detail)
        if code == .proxyFailure { proxyDetail = detail }
    }
}

/// The peer of a failed TLS connection, and the options that change how segget meets it: the server
/// of the URL (`--ca-certificate`, `--certificate`, `-k`), or an https proxy on the way to it
/// (`--proxy-ca-certificate`, `--proxy-certificate`, `--proxy-insecure`). Before this was told apart,
/// an https proxy's certificate was reported as the server's, with advice that could not help.
enum TLSPeer: Equatable, Sendable {
    case server
    /// The proxy, as `URLParts.shown` gives it.
    case proxy(ServerText)

    /// Whose TLS a failed request to `url` through `proxy` met: an https proxy's when the URL is
    /// plain http (the proxy's is its only TLS), or when it is https and the proxy has not yet
    /// answered the `CONNECT` for its tunnel (`tunnelStatus` 0, `EasyHandle.tunnelStatus()`) on a
    /// connection of its own; else the server's. A transfer on a connection made before (`reused`)
    /// sent no `CONNECT`: its tunnel was made then, so what fails in it is the server's. Pure.
    static func of(url: String, proxy: String?, tunnelStatus: Int, reused: Bool = false) -> TLSPeer {
        guard let proxy, ProxyRoute.isTLS(proxy) else { return .server }
        return URLParts(url)?.scheme == "http" || (tunnelStatus == 0 && !reused) ? .proxy(URLParts.shown(proxy)) : .server
    }

    /// "the server of URL" or "the proxy P (for URL)".
    func named(_ url: ServerText) -> String {
        switch self {
        case .server: "the server of \(url)"
        case .proxy(let p): "the proxy \(p) (for \(url))"
        }
    }

    /// Its certificate, in words.
    func certificate(_ url: ServerText) -> String {
        switch self {
        case .server: "the TLS certificate of \(url)"
        case .proxy(let p): "the TLS certificate of the proxy \(p) (for \(url))"
        }
    }

    var caOption: String { self == .server ? "--ca-certificate" : "--proxy-ca-certificate" }
    var certificateOptions: String { self == .server ? "--certificate, --private-key" : "--proxy-certificate, --proxy-private-key" }
    var certificateOption: String { self == .server ? "--certificate" : "--proxy-certificate" }

    /// The files given for this peer.
    func files(_ options: TransferOptions) -> TLSFiles { self == .server ? options.tls : options.proxyTLS }

    /// The advice for a certificate a private authority may have signed, one whose authority is not
    /// in the file given, and one no authority would make valid.
    var trustPrivateAuthority: NextStep { self == .server ? .trustPrivateAuthority : .trustProxyAuthority }
    var checkAuthorityFile: NextStep { self == .server ? .checkAuthorityFile : .checkProxyAuthorityFile }
    var mustFixCertificate: NextStep { self == .server ? .serverMustFixCertificate : .proxyMustFixCertificate }
    var giveClientCertificate: NextStep { self == .server ? .giveClientCertificate : .giveProxyClientCertificate }
    var mayWantClientCertificate: NextStep { self == .server ? .mayWantClientCertificate : .mayWantProxyClientCertificate }
}

extension Prober {
    /// `networkError` for a failed transfer whose handshakes `handshake` read: whose TLS failed, its
    /// verdict, alert or plain-text answer, and that peer's files from `options` (the probe, the
    /// fetch and a document's fetch alike).
    static func networkError(
        _ code: CurlCode, url: String, head: ResponseHead = ResponseHead(), connected: Bool = true, connectTimeout: Double? = nil,
        proxy: String?, handshake h: HandshakeOutcome, options: TransferOptions
    ) -> SeggetError {
        networkError(code, url: url, head: head, connected: connected, connectTimeout: connectTimeout, proxy: proxy,
                     tls: h.peer.files(options), verifyResult: h.verifyResult, tlsAlert: h.alert, notTLS: h.notTLS, peer: h.peer,
                     proxyDetail: h.proxyDetail, tunnelStatus: h.tunnelStatus)
    }

    /// A server's certificate that failed verification (`CURLE_PEER_FAILED_VERIFICATION`),
    /// authorities that could not be loaded (`CURLE_SSL_CACERT_BADFILE`), or a client certificate
    /// that could not be used (`CURLE_SSL_CERTPROBLEM`): exit 3 for the first, with why (OpenSSL's
    /// verdict, `verifyResult`) and what to do; the others are the user's files (`--ca-certificate`,
    /// `--certificate`, exit 2). `url` as `URLParts.shown` gives it.
    static func certificateError(_ code: CurlCode, url: ServerText, tls: TLSFiles, verifyResult: Int = 0, peer: TLSPeer = .server) -> SeggetError {
        let caCertificate = tls.caCertificate
        if code == .caCertBadFile, let file = caCertificate {
            return SeggetError(.usage, "the certificates in \(file) (\(peer.caOption)) could not be loaded (\(code)); give a file of PEM certificates (-----BEGIN CERTIFICATE-----).", retryAdvice: .never)
        }
        if code == .clientCertificateProblem {
            let files = [tls.clientCertificate, tls.privateKey].compactMap { $0 }.joined(separator: " and ")
            let whom = peer == .server ? "\(url)" : peer.named(url)
            return SeggetError(.usage, "the client certificate in \(files) (\(peer.certificateOptions)) could not be used for \(whom) (\(code)); give a PEM certificate with the unencrypted private key that belongs to it.", retryAdvice: .never)
        }
        if code == .caCertBadFile {
            return SeggetError(.network, "this machine's trusted TLS authorities could not be loaded (\(code)), so \(peer == .server ? "no certificate of \(url) can" : "\(peer.certificate(url)) cannot") be verified; install them (apt-get install ca-certificates), or give the authority's certificate with \(peer.caOption) FILE.", retryAdvice: .never)
        }
        let (why, untrusted) = code == .peerFailedVerification ? certificateProblem(verifyResult, peer: peer) : ("\(code)", false)
        let against = caCertificate.map { " against the authorities in \($0) (\(peer.caOption))" } ?? ""
        let advice =
            if caCertificate == nil && untrusted {
                "if a private or company authority signed it, \(peer.trustPrivateAuthority.cli)"
            } else if caCertificate != nil && untrusted {
                peer.checkAuthorityFile.cli
            } else {
                peer.mustFixCertificate.cli
            }
        var e = SeggetError(.network, "\(peer.certificate(url)) could not be verified\(against): \(why); \(advice).", retryAdvice: .never)
        e.untrustedCertificate = true
        return e
    }

    /// Plain words for OpenSSL's verification errors (`X509_V_ERR_…`) a server's certificate meets
    /// most, and whether the cause is an authority missing from those trusted (where
    /// `--ca-certificate` helps). libcurl 7.88 sets 1 when a handshake begins and reads OpenSSL's
    /// verdict only after its own check of the host name, so 1 (or 0) with a failed verification is
    /// that check (seen against nginx with a trusted certificate for another name).
    static func certificateProblem(_ verifyResult: Int, peer: TLSPeer = .server) -> (words: String, untrusted: Bool) {
        let otherName = peer == .server ? "it does not name the host of the URL" : "it does not name the proxy's host"
        return switch verifyResult {
        case 0, 1: (otherName, false)
        case 2: ("the certificate of its issuer is missing (no chain to a trusted authority came with it)", true)
        case 7: ("its signature is invalid", false)
        case 9: ("it is not valid yet (check this machine's clock)", false)
        case 10: ("it has expired", false)
        case 18: ("it is self-signed", true)
        case 19: ("its chain ends in a self-signed authority that is not trusted", true)
        case 20: ("no trusted authority signed it (unable to get the local issuer certificate)", true)
        case 21: ("its signature cannot be checked (no chain to a trusted authority came with it)", true)
        case 23: ("it has been revoked", false)
        case 24: ("an authority in its chain may not sign certificates", false)
        case 26: ("it is not meant for a server", false)
        case 62: (otherName, false)
        default: ("OpenSSL's verification error \(verifyResult)", false)
        }
    }
}
