import Testing
@testable import Segget

/// Which failures let another of a download's URLs take the failed one's place (`nextSource`): for
/// `--mirror`s only a failed probe, never a certificate; for a Metalink's URLs (its size given) any
/// failure of the source.
@Suite struct StandInRuleTests {
    let main = "https://main.example/f.bin"
    let mirrors = ["http://m1.example/f.bin", "http://m2.example/f.bin"]

    func download(metalink: Bool = false) -> Download {
        var o = DownloadOptions()
        o.mirrors = mirrors
        if metalink { o.expectedLength = 1000 }
        return Download(url: main, options: o)
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
        var last = failedAgain.trying(mirrors[1], after: mirrors[0])
        last.probeFailed = true
        #expect(download().nextSource(after: last, failed: mirrors[1], error: error) == nil)
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
