import SeggetCurl
import Testing

@testable import Segget

/// A server's TLS alert about certificates, read from libcurl's words for the failure, and what it
/// says (scripts/tests/ca-certificate.sh meets the first three from Apache).
@Suite struct TLSAlertTests {
    let url = "https://files.example.com/a.iso"

    @Test(arguments: [
        ("OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required, errno 0", TLSAlert.certificateRequired),
        ("OpenSSL/3.0.19: error:0A000410:SSL routines::sslv3 alert handshake failure", .handshakeFailure),
        ("OpenSSL/3.0.19: error:0A000418:SSL routines::tlsv1 alert unknown ca", .unknownAuthority),
        ("error:0A000412:SSL routines::sslv3 alert bad certificate", .badCertificate),
        ("error:0A000413:SSL routines::sslv3 alert unsupported certificate", .unsupportedCertificate),
        ("error:0A000414:SSL routines::sslv3 alert certificate revoked", .certificateRevoked),
        ("error:0A000415:SSL routines::sslv3 alert certificate expired", .certificateExpired),
        ("error:0A000416:SSL routines::sslv3 alert certificate unknown", .certificateUnknown),
        ("error:0A000419:SSL routines::tlsv1 alert access denied", .accessDenied),
    ])
    func readFromLibcurlsWords(_ detail: String, _ alert: TLSAlert) {
        for code in [CurlCode.receiveError, .sendError, .tlsHandshakeFailed] {
            #expect(TLSAlert(code: code, detail: detail) == alert)
        }
    }

    /// Other codes, other alerts and other words are no refusal of a certificate: a broken
    /// connection stays one to retry.
    @Test func otherFailuresAreNone() {
        let required = "OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required, errno 0"
        #expect(TLSAlert(code: .operationTimedOut, detail: required) == nil)
        #expect(TLSAlert(code: .peerFailedVerification, detail: required) == nil)
        #expect(TLSAlert(code: .receiveError, detail: "Recv failure: Connection reset by peer") == nil)
        #expect(TLSAlert(code: .receiveError, detail: "OpenSSL SSL_read: error:0A000438:SSL routines::tlsv1 alert internal error, errno 0") == nil)
        #expect(TLSAlert(code: .receiveError, detail: "") == nil)
        #expect(TLSAlert(code: .tlsHandshakeFailed, detail: "OpenSSL/3.0.19: error:0A00010B:SSL routines::wrong version number") == nil)
    }

    @Test func withoutACertificateItAsksForOne() {
        let e = Prober.networkError(.receiveError, url: url, tlsAlert: .certificateRequired)
        #expect(e.kind == .network)
        #expect(e.retryAdvice == .never)
        #expect(e.message == "the server of https://files.example.com/a.iso requires a client certificate (TLS alert: certificate required); give it with --certificate FILE (and --private-key FILE if the key is apart).")
        let bad = Prober.networkError(.receiveError, url: url, tlsAlert: .badCertificate)
        #expect(bad.message.contains("requires a client certificate (TLS alert: bad certificate)"))
    }

    /// A handshake failure may have other causes: said as a possibility.
    @Test func aHandshakeFailureSaysWhatItMayBe() {
        let e = Prober.networkError(.tlsHandshakeFailed, url: url, tlsAlert: .handshakeFailure)
        #expect(e.retryAdvice == .never)
        #expect(e.message.contains("ended the TLS handshake (alert: handshake failure); it may require a client certificate (give it with --certificate FILE), or accept no TLS version or cipher"))
    }

    @Test func withACertificateItNamesTheFile() {
        let tls = TLSFiles(clientCertificate: "/home/u/me.pem")
        let e = Prober.networkError(.tlsHandshakeFailed, url: url, tls: tls, tlsAlert: .unknownAuthority)
        #expect(e.retryAdvice == .never)
        #expect(e.message.contains("refused the client certificate in /home/u/me.pem (--certificate) (TLS alert: no authority it trusts signed the certificate)"))
        let again = Prober.networkError(.receiveError, url: url, tls: tls, tlsAlert: .certificateRequired)
        #expect(again.message.contains("asked again for a client certificate though the one in /home/u/me.pem (--certificate) was offered"))
    }

    /// The alert is read before a proxy's or a receive's words: the server's refusal is the cause.
    @Test func theAlertComesFirst() {
        let e = Prober.networkError(.receiveError, url: url, proxy: "http://proxy.example:3128", tlsAlert: .certificateRequired)
        #expect(e.message.contains("requires a client certificate"))
    }
}
