import SeggetCurl
import Testing

@testable import Segget

/// An https proxy's TLS is apart from the server's: a failure of its certificate or a client
/// certificate it asked for names the proxy and its own options (`--proxy-ca-certificate`,
/// `--proxy-certificate`, `--proxy-insecure`), never the server's, whose options cannot help
/// (scripts/tests/https-proxy.sh runs the same against Apache as an https forward proxy).
@Suite struct ProxyTLSTests {
    let https = "https://files.example.com/a.iso"
    let http = "http://files.example.com/a.iso"
    let proxy = "https://user:secret@proxy.example:3129"

    /// Whose TLS a failure met: the proxy's while its tunnel is not made, and always for a plain-http
    /// URL (the proxy's is its only TLS); never that of a proxy without TLS.
    @Test(arguments: [
        ("https://f/x", "https://p:1", 0, true), ("https://f/x", "https://p:1", 200, false),
        ("http://f/x", "https://p:1", 0, true), ("http://f/x", "HTTPS://p:1", 0, true),
        ("https://f/x", "http://p:1", 0, false), ("https://f/x", "p:3128", 0, false),
        ("https://f/x", "socks5h://p:1", 0, false), ("http://f/x", "http://p:1", 0, false),
    ])
    func whoseTLS(_ url: String, _ proxy: String, _ tunnel: Int, _ proxys: Bool) {
        let peer = TLSPeer.of(url: url, proxy: proxy, tunnelStatus: tunnel)
        #expect((peer != .server) == proxys, "\(url) via \(proxy), tunnel \(tunnel)")
        #expect(TLSPeer.of(url: url, proxy: nil, tunnelStatus: tunnel) == .server)
    }

    /// A transfer on a connection made before sent no `CONNECT` (its tunnel status reads 0): for an
    /// https URL the tunnel was made then, so a failure in it is the server's; an http URL's only TLS
    /// is still the proxy's.
    @Test func aReusedTunnelIsTheServers() {
        #expect(TLSPeer.of(url: https, proxy: proxy, tunnelStatus: 0, reused: true) == .server)
        #expect(TLSPeer.of(url: http, proxy: proxy, tunnelStatus: 0, reused: true) != .server)
    }

    /// A peer that answers the handshake in plain text: OpenSSL's "wrong version number", only for a
    /// failed handshake.
    @Test func aPlainTextAnswerIsSaidAtOnce() {
        let detail = "OpenSSL/3.0.19: error:0A00010B:SSL routines::wrong version number"
        #expect(TLSAlert.peerNotTLS(code: .tlsHandshakeFailed, detail: detail))
        #expect(!TLSAlert.peerNotTLS(code: .receiveError, detail: detail))
        #expect(!TLSAlert.peerNotTLS(code: .tlsHandshakeFailed, detail: "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to h:443"))
        let viaProxy = Prober.networkError(.tlsHandshakeFailed, url: https, proxy: proxy, notTLS: true, peer: peer)
        #expect(viaProxy.message.hasPrefix("the proxy https://proxy.example:3129 (for https://files.example.com/a.iso) did not answer in TLS (OpenSSL: wrong version number): it is likely a plain HTTP proxy; give it as http://HOST:PORT"), "\(viaProxy.message)")
        #expect(viaProxy.retryAdvice == .never && viaProxy.kind == .network)
        let server = Prober.networkError(.tlsHandshakeFailed, url: https, notTLS: true)
        #expect(server.message == "the server of https://files.example.com/a.iso did not answer in TLS (OpenSSL: wrong version number): it likely serves plain HTTP at that port; check the URL's scheme and port.")
        #expect(server.retryAdvice == .never)
        // Without the words, a failed handshake stays a transient failure.
        #expect(Prober.networkError(.tlsHandshakeFailed, url: https).retryAdvice != .never)
    }

    /// The proxy is named without its credentials.
    @Test func theProxyIsNamedWithoutCredentials() {
        #expect(TLSPeer.of(url: https, proxy: proxy, tunnelStatus: 0) == .proxy("https://proxy.example:3129"))
    }

    var peer: TLSPeer { TLSPeer.of(url: https, proxy: proxy, tunnelStatus: 0) }

    @Test func anUntrustedProxyNamesItsOption() {
        let e = Prober.networkError(.peerFailedVerification, url: https, proxy: proxy, verifyResult: 20, peer: peer)
        #expect(e.kind == .network)
        #expect(e.message.hasPrefix("the TLS certificate of the proxy https://proxy.example:3129 (for https://files.example.com/a.iso) could not be verified: no trusted authority signed it"), "\(e.message)")
        #expect(e.message.contains("with --proxy-ca-certificate FILE; pass --proxy-insecure only if you trust this proxy."), "\(e.message)")
        #expect(!e.message.contains("--ca-certificate FILE;") && !e.message.contains("-k"), "\(e.message)")
        #expect(!e.message.contains("secret"))
        #expect(e.untrustedCertificate)
    }

    @Test func withTheProxysFileItNamesThatFile() {
        let e = Prober.networkError(.peerFailedVerification, url: https, proxy: proxy, tls: TLSFiles(caCertificate: "/etc/corp/proxy-ca.pem"),
                                    verifyResult: 19, peer: peer)
        #expect(e.message.contains("could not be verified against the authorities in /etc/corp/proxy-ca.pem (--proxy-ca-certificate): its chain ends"), "\(e.message)")
        #expect(e.message.hasSuffix("check that the file holds the authority that signed the proxy's certificate, or pass --proxy-insecure only if you trust this proxy."), "\(e.message)")
    }

    @Test func aProxyCertificateForAnotherNameIsTheProxys() {
        let e = Prober.networkError(.peerFailedVerification, url: http, proxy: proxy, verifyResult: 62, peer: peer)
        #expect(e.message.contains(": it does not name the proxy's host; the proxy's certificate must be fixed; pass --proxy-insecure"), "\(e.message)")
    }

    @Test func aProxysFilesThatCannotBeUsedAreUsageErrors() {
        let ca = Prober.networkError(.caCertBadFile, url: https, proxy: proxy, tls: TLSFiles(caCertificate: "/tmp/p.pem"), peer: peer)
        #expect(ca.kind == .usage)
        #expect(ca.message.contains("/tmp/p.pem (--proxy-ca-certificate) could not be loaded"), "\(ca.message)")
        let cert = Prober.networkError(.clientCertificateProblem, url: https, proxy: proxy, tls: TLSFiles(clientCertificate: "/tmp/c.pem", privateKey: "/tmp/k.pem"), peer: peer)
        #expect(cert.kind == .usage)
        #expect(cert.message.contains("/tmp/c.pem and /tmp/k.pem (--proxy-certificate, --proxy-private-key) could not be used for the proxy https://proxy.example:3129"), "\(cert.message)")
        let system = Prober.networkError(.caCertBadFile, url: https, proxy: proxy, peer: peer)
        #expect(system.message.contains("so the TLS certificate of the proxy https://proxy.example:3129 (for https://files.example.com/a.iso) cannot be verified"), "\(system.message)")
        #expect(system.message.contains("give the authority's certificate with --proxy-ca-certificate FILE"), "\(system.message)")
    }

    @Test func aProxysAlertNamesTheProxy() {
        let wanted = Prober.networkError(.receiveError, url: https, proxy: proxy, tlsAlert: .certificateRequired, peer: peer)
        #expect(wanted.message == "the proxy https://proxy.example:3129 (for https://files.example.com/a.iso) requires a client certificate (TLS alert: certificate required); give it with --proxy-certificate FILE (and --proxy-private-key FILE if the key is apart).")
        #expect(wanted.retryAdvice == .never)
        let refused = Prober.networkError(.receiveError, url: https, proxy: proxy, tls: TLSFiles(clientCertificate: "/c.pem"), tlsAlert: .unknownAuthority, peer: peer)
        #expect(refused.message.contains("refused the client certificate in /c.pem (--proxy-certificate) (TLS alert: no authority it trusts signed the certificate); give a certificate this proxy accepts."), "\(refused.message)")
        let handshake = Prober.networkError(.tlsHandshakeFailed, url: https, proxy: proxy, tlsAlert: .handshakeFailure, peer: peer)
        #expect(handshake.message.contains("the proxy https://proxy.example:3129 (for https://files.example.com/a.iso) ended the TLS handshake (alert: handshake failure); it may require a client certificate (give it with --proxy-certificate FILE)"), "\(handshake.message)")
    }

    /// The server's own failure through the proxy's tunnel is still the server's.
    @Test func theServersFailureThroughTheTunnelIsTheServers() {
        let e = Prober.networkError(.peerFailedVerification, url: https, proxy: proxy, verifyResult: 20,
                                    peer: TLSPeer.of(url: https, proxy: proxy, tunnelStatus: 200))
        #expect(e.message.hasPrefix("the TLS certificate of https://files.example.com/a.iso could not be verified"), "\(e.message)")
        #expect(e.message.contains("--ca-certificate FILE"), "\(e.message)")
    }

    /// A proxy's handshake that broke off without an alert or plain text (a reset, an end of the
    /// connection) names the proxy and may be retried; the server's handshake broken off inside an
    /// https proxy's tunnel names both, and the cause libcurl 7.88 hides that way. Neither holds
    /// without an https proxy.
    @Test func aHandshakeThatBrokeOffNamesWhoseItWas() {
        let proxys = Prober.networkError(.tlsHandshakeFailed, url: https, proxy: proxy, peer: peer)
        #expect(proxys.message == "the TLS handshake with the proxy https://proxy.example:3129 (for https://files.example.com/a.iso) broke off; check that the proxy is up and serves TLS at that port, or try again later.")
        #expect(proxys.retryAdvice == .mayChange)
        let plainURL = Prober.networkError(.tlsHandshakeFailed, url: http, proxy: proxy, peer: TLSPeer.of(url: http, proxy: proxy, tunnelStatus: 0))
        #expect(plainURL.message.hasPrefix("the TLS handshake with the proxy https://proxy.example:3129 (for http://files.example.com/a.iso) broke off"))
        let servers = Prober.networkError(.tlsHandshakeFailed, url: https, proxy: proxy, peer: TLSPeer.of(url: https, proxy: proxy, tunnelStatus: 200))
        #expect(servers.message.hasPrefix("the TLS handshake with the server of https://files.example.com/a.iso, inside the tunnel of the proxy https://proxy.example:3129, broke off"), "\(servers.message)")
        #expect(servers.message.contains("give that authority's certificate with --ca-certificate FILE"))
        #expect(servers.retryAdvice == .mayChange)
        #expect(NextStep.forDaemon(servers.message).contains("start the daemon with --ca-certificate FILE"))
        for proxy in [nil, "http://proxy.example:3128", "socks5h://proxy.example:1080"] {
            let e = Prober.networkError(.tlsHandshakeFailed, url: https, proxy: proxy)
            #expect(e.message == "the request to https://files.example.com/a.iso failed: the TLS handshake failed; check the network, or try again later.", "\(proxy ?? "none")")
        }
    }

    /// In the daemon's words, the proxy's options are `segget daemon`'s.
    @Test func theDaemonsWords() {
        let e = Prober.networkError(.peerFailedVerification, url: https, proxy: proxy, verifyResult: 20, peer: peer)
        #expect(NextStep.forDaemon(e.message).hasSuffix("start the daemon with --proxy-ca-certificate FILE, that authority's certificate in FILE (a daemon always verifies certificates)."))
    }
}
