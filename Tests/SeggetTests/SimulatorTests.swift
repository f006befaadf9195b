import Testing
@testable import Segget

/// The network simulator (`SimulatedDownload`) drives the engine's one entry point; these runs are the
/// debug-build slice of it. `scripts/tests/simulator.sh` runs 10,000 scenarios of a release build.
@Suite struct SimulatorTests {
    static let MiB: Int64 = 1 << 20

    @Test func theSameSeedGivesTheSameDownload() {
        let s = SimulationFamily.wanLoss.scenario(seed: 7)
        let a = SimulatedDownload.run(s, timeLimit: 60)
        let b = SimulatedDownload.run(s, timeLimit: 60)
        #expect(a.finished && a.seconds == b.seconds && a.requests == b.requests && a.redials == b.redials)
        #expect(SimulationFamily.wanLoss.scenario(seed: 8).description != s.description)
    }

    /// A few seeds of every family stay within the family's bound.
    @Test(arguments: SimulationFamily.all.map(\.name))
    func everyFamilyStaysWithinItsBound(family: String) {
        let row = EngineSimulation.run(families: [family], seeds: 1..<9)[0]
        #expect(row.overBound == 0, "\(row.worst)")
        let mustFail = SimulationFamily.named(family)!.expectsFailure
        #expect(row.hangs == 0 && row.failures == (mustFail ? row.scenarios : 0))
    }

    /// Exploratory testing's failing tail (7 December): the last 1000 bytes of a file fail every
    /// request, -n 8 or 16. The download fails once the failing chunk's retries are spent, with the
    /// rest of the file received, asking no sooner than the host said, and with a request or two per
    /// retry: 216-556 requests before `RaceHolds` and the kept host wait.
    @Test(arguments: [(Int?.none, Int?.none, 16), (500, nil, 8), (503, 10, 8), (429, 10, 16)])
    func aTailThatFailsEveryRequestCostsARequestOrTwoARetry(answer: (status: Int?, retryAfter: Int?, connections: Int)) {
        let n = answer.connections
        var s = SimulatedScenario(fileSize: 16 * Self.MiB, connections: n, rtt: 0.001, bottleneck: 400e6)
        s.probe = true
        s.failingTail = .init(bytes: 1000, status: answer.status, retryAfter: answer.retryAfter)
        let ideal = SimulationIdeal.seconds(s)
        let o = SimulatedDownload.run(s, timeLimit: 200)
        let text = "\(s): \(EngineSimulation.summary(o, ideal: ideal))"
        #expect(o.failure != nil && o.unfinishedElsewhere == 0, "\(text)")
        // The waits the retries must keep after the cut's continuation: 2+4+8+16 s, or four of the host's 10 s.
        #expect(o.seconds >= SimulationIdeal.failingTailSeconds(s) && o.seconds < 1.2 * ideal, "\(text)")
        #expect(o.earlyRequests == 0, "\(text)")
        // The probe, a request per chunk run, the failing chunk's six attempts and a race beside each.
        #expect(o.requests <= 1 + n + 12, "\(text)")
    }

    /// Every answer closed after 1 MiB: a request per cut and a few more, nothing fetched twice,
    /// and the download goes on at once (before: a backoff of 1-3 s after each cut).
    @Test func answersCutAfterAMegabyteCostARequestEachAndNoWait() {
        var s = SimulatedScenario(fileSize: 32 * Self.MiB, connections: 8, rtt: 0.002, bottleneck: 400e6)
        s.slow = .init(which: .everyKth(1), behaviour: .cut(after: 1 << 20))
        s.probe = true
        let ideal = SimulationIdeal.seconds(s)
        let o = SimulatedDownload.run(s, timeLimit: 60)
        #expect(o.finished && o.seconds < 3 * ideal, "\(EngineSimulation.summary(o, ideal: ideal))")
        #expect(o.requests <= 32 + 8 + 2 && o.bytesTwice == 0, "\(EngineSimulation.summary(o, ideal: ideal))")
    }

    /// Issue 23's second finding: a fast server, a small file, every third answer at one byte a second.
    /// It hung at 23 of 24 MiB; the static split still does, which shows the simulator can tell.
    @Test func aFastServerWithASmallFileThatTricklesEveryThirdAnswerFinishes() {
        var s = SimulatedScenario(fileSize: 24 * Self.MiB, connections: 8, rtt: 0.0002, bottleneck: 400e6)
        s.slow = .init(which: .everyKth(3), behaviour: .trickle(rate: 1, after: 0))
        let ideal = SimulationIdeal.seconds(s)
        let o = SimulatedDownload.run(s, timeLimit: 60)
        #expect(o.finished && o.seconds < 12 * ideal, "\(EngineSimulation.summary(o, ideal: ideal))")
        let stuck = SimulatedDownload.run(s, policy: .staticSplit, timeLimit: 10)
        #expect(!stuck.finished)
        // Every trickling shape, on the same server.
        let shapes: [SimulatedScenario.SlowShape.Behaviour] = [
            .trickle(rate: 1, after: 256 << 10), .silent(after: 0), .silent(after: 512 << 10),
            .slowdown(seconds: 0.05, rate: 1), .firstByteDelay(seconds: 5),
        ]
        for shape in shapes {
            for which: SimulatedScenario.SlowShape.Which in [.everyKth(3), .fraction(0.3)] {
                var t = s
                t.slow = .init(which: which, behaviour: shape)
                let r = SimulatedDownload.run(t, timeLimit: 60)
                #expect(r.finished && r.seconds < 12 * ideal, "\(t): \(EngineSimulation.summary(r, ideal: ideal))")
            }
        }
    }

    /// A host that allows 3 requests at once: -n 8 finishes at about the speed of 3 connections, with
    /// a handful of refusals, whichever way the host says no.
    @Test(arguments: [SimulatedScenario.Rejection.tooManyRequests(retryAfter: 1), .tooManyRequests(retryAfter: nil), .rateLimitFields, .serviceUnavailable])
    func aHostThatAllowsThreeConnectionsIsUsedWithThree(rejection: SimulatedScenario.Rejection) {
        var s = SimulatedScenario(fileSize: 192 * Self.MiB, connections: 8, rtt: 0.001, perRequestCap: 8 * 1024 * 1024)
        s.connectionLimit = 3
        s.rejection = rejection
        let ideal = SimulationIdeal.seconds(s)
        let o = SimulatedDownload.run(s, timeLimit: 120)
        #expect(o.finished && o.seconds < 1.2 * ideal, "\(EngineSimulation.summary(o, ideal: ideal))")
        #expect(o.rejected <= 8, "\(o.rejected) refused")
        #expect(o.maxInFlight <= 4)
    }

    /// Loss recovery on a long path is not a slow server: a lossy WAN download re-dials rarely, and
    /// the baseline without re-dials is not faster.
    @Test func aLossyLinkIsNotASlowServer() {
        var redials = 0
        var seconds = 0.0
        var without = 0.0
        for seed: UInt64 in 1...4 {
            var s = SimulatedScenario(fileSize: 256 * Self.MiB, connections: 8, rtt: 0.08, loss: 0.001, bottleneck: 50e6)
            s.seed = seed
            let o = SimulatedDownload.run(s, timeLimit: 300)
            #expect(o.finished)
            redials += o.redials
            seconds += o.seconds
            without += SimulatedDownload.run(s, policy: .noRedial, timeLimit: 300).seconds
        }
        #expect(seconds <= without * 1.02, "\(seconds) s against \(without) s without re-dials")
        #expect(redials <= 4 * 12, "\(redials) re-dials in 4 downloads")
    }
}
