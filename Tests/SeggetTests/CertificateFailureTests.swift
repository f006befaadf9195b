import SeggetCurl
import Testing

@testable import Segget

/// What a certificate that fails verification says, with and without `--ca-certificate`
/// (scripts/tests/ca-certificate.sh runs the same against nginx and a private authority).
@Suite struct CertificateFailureTests {
    let url = "https://files.example.com/a.iso"

    @Test func anUnknownAuthorityNamesTheOption() {
        let e = Prober.networkError(.peerFailedVerification, url: url, verifyResult: 20)
        #expect(e.kind == .network)
        #expect(e.message.contains("could not be verified: no trusted authority signed it"))
        #expect(e.message.contains("give that authority's certificate with --ca-certificate FILE"))
        #expect(e.message.contains("-k/--insecure only if you trust this server"))
        #expect(e.untrustedCertificate)
    }

    @Test func withAFileItNamesTheFile() {
        let e = Prober.networkError(.peerFailedVerification, url: url, tls: TLSFiles(caCertificate: "/etc/corp/ca.pem"), verifyResult: 20)
        #expect(e.kind == .network)
        #expect(e.message.contains("could not be verified against the authorities in /etc/corp/ca.pem (--ca-certificate): no trusted"))
        #expect(!e.message.contains("--ca-certificate FILE"))
        #expect(e.untrustedCertificate)
    }

    /// A certificate that expired, or names another host, is the server's to fix: no other
    /// authority would help, so the option is not offered.
    @Test(arguments: [(10, "it has expired"), (9, "it is not valid yet (check this machine's clock)"),
                      (62, "it does not name the host of the URL"), (0, "it does not name the host of the URL"), (1, "it does not name the host of the URL"),
                      (18, "it is self-signed"), (9999, "OpenSSL's verification error 9999")])
    func eachVerdictInWords(_ result: Int, _ words: String) {
        let e = Prober.networkError(.peerFailedVerification, url: url, verifyResult: result)
        #expect(e.message.contains(": \(words);"), "\(e.message)")
        #expect(e.message.contains("--ca-certificate FILE") == (result == 18), "\(e.message)")
    }

    /// A file libcurl cannot load is the user's to fix (exit 2); without one, the system's bundle is
    /// what failed, which is no usage error.
    @Test func aFileThatCannotBeLoadedIsAUsageError() {
        let given = Prober.networkError(.caCertBadFile, url: url, tls: TLSFiles(caCertificate: "/tmp/ca.pem"))
        #expect(given.kind == .usage)
        #expect(given.message.contains("/tmp/ca.pem (--ca-certificate) could not be loaded"))
        let system = Prober.networkError(.caCertBadFile, url: url)
        #expect(system.kind == .network)
        #expect(system.message.contains("this machine's trusted TLS authorities could not be loaded"), "\(system.message)")
        #expect(system.message.contains("apt-get install ca-certificates"), "\(system.message)")
        #expect(!system.message.contains("the server's certificate must be fixed"), "\(system.message)")
    }

    /// The verdicts where an authority missing from those trusted is the cause, and only those,
    /// offer `--ca-certificate`.
    @Test func untrustedVerdictsAreTheMissingAuthorities() {
        let offering = (0...80).filter { Prober.certificateProblem($0).untrusted }
        #expect(offering == [2, 18, 19, 20, 21])
    }
}
