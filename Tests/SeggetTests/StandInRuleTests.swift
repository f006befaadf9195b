import SeggetVerify
import Testing
@testable import Segget

/// Which failures let another of a download's URLs take the failed one's place (`nextSource`): for
/// `--mirror`s only a failed probe (or a partial download a stand-in could not continue), never a
/// certificate, never a renewed link, and the main URL once more when every mirror failed; for a
/// Metalink's URLs (its size given) any failure of the source.
@Suite struct StandInRuleTests {
    let main = "http://main.example/f.bin"
    let mirrors = ["http://m1.example/f.bin", "http://m2.example/f.bin"]

    func download(metalink: Bool = false, main: String? = nil, mirrors: [String]? = nil, checksum: Bool = false) -> Download {
        var o = DownloadOptions()
        o.mirrors = mirrors ?? self.mirrors
        if metalink { o.expectedLength = 1000 }
        if checksum { o.checksums = [ExpectedDigest(algorithm: .sha256, bytes: Array(repeating: 7, count: 32))!] }
        return Download(url: main ?? self.main, options: o)
    }

    func plan(probeFailed: Bool) -> AttemptPlan {
        var p = AttemptPlan(fresh: false)
        p.probeFailed = probeFailed
        return p
    }

    @Test(arguments: [
        SeggetError(.network, "could not connect"), SeggetError(.httpStatus, "404", httpStatus: 404),
        SeggetError(.protocolViolation, "broken framing"),
    ])
    func aMirrorStandsInForAFailedProbe(error: SeggetError) {
        #expect(download().nextSource(after: plan(probeFailed: true), failed: main, error: error) == mirrors[0])
        // The next one once the first failed too, and none after the last.
        let second = plan(probeFailed: false).trying(mirrors[0], after: main)
        var failedAgain = second
        failedAgain.probeFailed = true
        #expect(download().nextSource(after: failedAgain, failed: mirrors[0], error: error) == mirrors[1])
        // Every mirror failed: the main URL once more, with its retries; then nothing.
        var last = failedAgain.trying(mirrors[1], after: mirrors[0])
        last.probeFailed = true
        #expect(download().nextSource(after: last, failed: mirrors[1], error: error) == main)
        var again = last.trying(main, after: mirrors[1])
        again.probeFailed = true
        #expect(download().nextSource(after: again, failed: main, error: error) == nil)
        #expect(!download().isStandIn(again))
    }

    @Test func aPartialDownloadAStandInCouldNotContinueGoesToTheNextMirror() {
        let standIn = plan(probeFailed: false).trying(mirrors[0], after: main)
        let refused = SeggetError.standInCannot(mirrors[0], "serves 5 bytes where the partial download has 6", continuing: "it")
        #expect(refused.keptForAnotherSource && refused.exitCode == 7)
        #expect(download().nextSource(after: standIn, failed: mirrors[0], error: refused) == mirrors[1])
    }

    @Test func aRenewedLinkIsNotStoodInFor() {
        var renewed = plan(probeFailed: false).renewed(url: "http://main.example/f.bin?sig=new", outputPath: "f.bin")
        renewed.probeFailed = true
        #expect(download().nextSource(after: renewed, failed: "http://main.example/f.bin?sig=new", error: SeggetError(.network, "reset")) == nil)
    }

    @Test func aPlainHTTPMirrorStandsInForAnHTTPSMainURLOnlyWithAChecksum() {
        let secure = "https://main.example/f.bin"
        let both = ["http://m1.example/f.bin", "https://m2.example/f.bin"]
        let e = SeggetError(.network, "could not connect")
        #expect(download(main: secure, mirrors: both).nextSource(after: plan(probeFailed: true), failed: secure, error: e) == both[1])
        #expect(download(main: secure, mirrors: both, checksum: true).nextSource(after: plan(probeFailed: true), failed: secure, error: e) == both[0])
        #expect(download(main: secure, mirrors: [both[0]]).nextSource(after: plan(probeFailed: true), failed: secure, error: e) == nil)
    }

    @Test func aFetchThatFailedOnTheWayKeepsItsJournalForARerun() {
        let e = SeggetError(.network, "connection reset")
        #expect(download().nextSource(after: plan(probeFailed: false), failed: main, error: e) == nil)
        // A Metalink's next URL is tried as before (its size and digests check it).
        #expect(download(metalink: true).nextSource(after: plan(probeFailed: false), failed: main, error: e) == mirrors[0])
    }

    @Test func noMirrorStandsInForACertificateThatFailed() {
        var e = SeggetError(.network, "the TLS certificate could not be verified", retryAdvice: .never)
        e.untrustedCertificate = true
        #expect(download().nextSource(after: plan(probeFailed: true), failed: main, error: e) == nil)
        // The certificate error the probe makes is marked.
        #expect(Prober.networkError(.peerFailedVerification, url: main).untrustedCertificate)
        #expect(!Prober.networkError(.couldNotConnect, url: main).untrustedCertificate)
    }

    @Test(arguments: [FailureKind.usage, .fileSystem, .verification, .interrupted, .internalError])
    func failuresThatAreNotTheSourcesAreTheDownloads(kind: FailureKind) {
        #expect(download().nextSource(after: plan(probeFailed: true), failed: main, error: SeggetError(kind, "x")) == nil)
    }

    @Test func aStandInIsKnownByItsPlan() {
        let d = download()
        #expect(!d.isStandIn(plan(probeFailed: true)))
        #expect(d.isStandIn(plan(probeFailed: true).trying(mirrors[0], after: main)))
        #expect(!download(metalink: true).isStandIn(plan(probeFailed: true).trying(mirrors[0], after: main)))
    }
}
