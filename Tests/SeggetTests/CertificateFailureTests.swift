import SeggetCurl
import Testing

@testable import Segget

/// What a certificate that fails verification says, with and without `--ca-certificate`
/// (scripts/tests/ca-certificate.sh runs the same against nginx and a private authority).
@Suite struct CertificateFailureTests {
    let url = "https://files.example.com/a.iso"

    @Test func withoutAFileItNamesTheOption() {
        let e = Prober.networkError(.peerFailedVerification, url: url)
        #expect(e.kind == .network)
        #expect(e.message.contains("give the certificate of the authority that signed it with --ca-certificate FILE"))
        #expect(e.message.contains("-k/--insecure only if you trust this server"))
        #expect(e.untrustedCertificate)
    }

    @Test func withAFileItNamesTheFile() {
        let e = Prober.networkError(.peerFailedVerification, url: url, caCertificate: "/etc/corp/ca.pem")
        #expect(e.kind == .network)
        #expect(e.message.contains("against the authorities in /etc/corp/ca.pem (--ca-certificate)"))
        #expect(!e.message.contains("--ca-certificate FILE"))
        #expect(e.untrustedCertificate)
    }

    /// A file libcurl cannot load is the user's to fix (exit 2); without one, the system's bundle is
    /// what failed, which is no usage error.
    @Test func aFileThatCannotBeLoadedIsAUsageError() {
        let given = Prober.networkError(.caCertBadFile, url: url, caCertificate: "/tmp/ca.pem")
        #expect(given.kind == .usage)
        #expect(given.message.contains("/tmp/ca.pem (--ca-certificate) could not be loaded"))
        let system = Prober.networkError(.caCertBadFile, url: url)
        #expect(system.kind == .network)
    }
}
