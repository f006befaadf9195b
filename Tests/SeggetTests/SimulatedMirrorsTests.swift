import Testing
@testable import Segget

/// The engine with mirrors that join the running download, on the simulator (`SimulatedScenario.mirrors`):
/// scenarios of the `mirrors` family whose findings were mended, each failing on the engine before.
@Suite struct SimulatedMirrorsTests {
    static let MiB: Int64 = 1 << 20

    static func run(_ s: SimulatedScenario) -> (SimulatedDownload.Outcome, Double) {
        let ideal = SimulationIdeal.seconds(s)
        return (SimulatedDownload.run(s, timeLimit: 60), ideal)
    }

    /// The main URL capped at 1 MiB/s per answer, 16 MiB at `-n 16` (1 MiB a connection), an uncapped
    /// mirror 2 ms away that joins 10 ms after the download begins. Every run took under a second, so
    /// no connection was worth moving by `joinWorthSeconds`, and the mirror, holding none, was never
    /// measured: the download took 1.10 s at the main URL's pace. A source's first connection moves
    /// with a tenth of a second left (`scoutWorthSeconds`), and the rest follow once its rate is known.
    @Test func aMirrorThatJoinsBeforeEveryRunIsShortGetsItsFirstConnection() {
        var s = SimulatedScenario(fileSize: 16 * Self.MiB, connections: 16, rtt: 0.015, bottleneck: 272 * Double(Self.MiB),
                                  perRequestCap: Double(Self.MiB), tls: true)
        s.probe = true
        s.mirrors = [.init(rtt: 0.002, joinsAt: 0.004 + 0.006)]
        let (o, ideal) = Self.run(s)
        #expect(o.finished && o.seconds < 0.6, "\(EngineSimulation.summary(o, ideal: ideal))")
    }

    /// An uncapped main URL 58 ms away and a mirror 12 ms away capped at 4 MiB/s per answer, 64 MiB at
    /// `-n 8`. The mirror's shorter first-byte waits made the download's path round trip 30 ms, and the
    /// main URL's new connections, still in slow start on their 58 ms path, were judged slow and
    /// re-dialled again and again (14 re-dials, 2.52 s). Each source's connections are now judged on
    /// their own path's round trip.
    @Test func connectionsAreJudgedOnTheirOwnSourcesPath() {
        var s = SimulatedScenario(fileSize: 64 * Self.MiB, connections: 8, rtt: 0.058, bottleneck: 525 * Double(Self.MiB))
        s.probe = true
        s.mirrors = [.init(rtt: 0.012, perRequestCap: 4 * Double(Self.MiB), joinsAt: 0.024 + 0.2)]
        let (o, ideal) = Self.run(s)
        #expect(o.finished && o.seconds < 1.8, "\(EngineSimulation.summary(o, ideal: ideal))")
        #expect(o.redials <= 6, "\(EngineSimulation.summary(o, ideal: ideal))")
    }

    /// The main URL capped at 256 KiB/s per answer, a mirror beside it capped at 1 MiB/s, and an
    /// uncapped mirror 77 ms away that joins 0.16 s in; 64 MiB at `-n 4`. The far mirror's connection,
    /// 0.35 s past its first byte and still in slow start, was judged 3.7 times slower than the near
    /// one and moved there for good: 16.4 s. A connection still in slow start on its path is not
    /// measured for its source (`inSlowStart`).
    @Test func aMirrorStillInSlowStartIsNotJudgedSlow() {
        var s = SimulatedScenario(fileSize: 64 * Self.MiB, connections: 4, rtt: 0.005, bottleneck: 200 * Double(Self.MiB),
                                  perRequestCap: 256 * 1024)
        s.probe = true
        s.mirrors = [.init(rtt: 0.0005, perRequestCap: Double(Self.MiB), joinsAt: 0.001), .init(rtt: 0.077, joinsAt: 0.154 + 0.01)]
        let (o, ideal) = Self.run(s)
        #expect(o.finished && o.seconds < 5, "\(EngineSimulation.summary(o, ideal: ideal))")
    }

    /// Three mirrors: far and capped at 256 KiB/s, near and uncapped (joining at once), near and capped
    /// at 4 MiB/s; the main URL capped at 1 MiB/s; 16 MiB at `-n 16` over TLS. Once the uncapped
    /// mirror's rate was known, the main URL's idle connections still raced its last chunks from the
    /// main URL (a race goes to the racer's own source), holding them at 1 MiB/s while the mirror's
    /// connections had nothing left to race: 1.17 s. An idle connection now sends its next request to
    /// a source far faster per connection than its own (`sendToFasterSource`).
    @Test func theEndGamesRacesGoToTheFasterSource() {
        var s = SimulatedScenario(fileSize: 16 * Self.MiB, connections: 16, rtt: 0.015, bottleneck: 272 * Double(Self.MiB),
                                  perRequestCap: Double(Self.MiB), tls: true)
        s.probe = true
        s.mirrors = [
            .init(rtt: 0.074, perRequestCap: 256 * 1024, joinsAt: 0.222), .init(rtt: 0.002, joinsAt: 0.006),
            .init(rtt: 0.002, perRequestCap: 4 * Double(Self.MiB), joinsAt: 0.206),
        ]
        let (o, ideal) = Self.run(s)
        #expect(o.finished && o.seconds < 0.95, "\(EngineSimulation.summary(o, ideal: ideal))")
    }
}
