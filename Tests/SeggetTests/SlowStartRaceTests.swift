import Glibc
import Testing
@testable import Segget

/// The end game's races on a long path, where TCP's slow start makes a young request's rate so far a
/// fraction of what it has: a 4 MiB file at `-n 8` over HTTPS (4 chunks of 1 MiB, so 4 connections
/// own a chunk and 4 have nothing), 80 ms round trips, each connection's rate doubling every round
/// trip from TCP's first window (10 segments) up to 6 MB/s.
@Suite struct SlowStartRaceTests {
    static let MiB = 1 << 20
    static let rtt = 0.08

    static func script(warmUpsAnswered: Int) -> CoordinatorTests.Script {
        var s = CoordinatorTests.Script(size: 4 * Self.MiB, connections: 8) {
            $0.url = "https://example.test/f"
            $0.probeFirstAnswer = 0.247
            $0.redialSlow = false
        }
        s.handle(.warmedUp(WarmUpOutcome(sent: 7, accepted: warmUpsAnswered, lag: 0.0)))
        return s
    }

    /// Runs `s` to `t`: a request's first byte comes a round trip after it went out, and from then
    /// every connection is in slow start, except those in `capped` (a rate that never grows).
    static func run(_ s: inout CoordinatorTests.Script, until t: Double, capped: [Int: Double] = [:]) {
        while s.now < t - 1e-9, !s.c.isComplete {
            for c in s.c.connections {
                let since = c.firstByteAt ?? s.now
                let doubling = Coordinator.initialWindowBytes / rtt * pow(2, (s.now - since) / rtt)
                s.rates[c.id] = s.now < c.requestStartedAt + rtt - 1e-9 ? 0 : capped[c.id] ?? min(6e6, doubling)
            }
            s.run(until: s.now + 0.01)
        }
    }

    static func racers(_ s: CoordinatorTests.Script) -> [Int] { (4..<8).filter { !s.starts(of: $0).isEmpty } }

    /// At the start the warm-ups are still out: the owners of chunks 1-3 wait for them (at most the
    /// grace, 0.12 s), and the idle connections, which would dial, do not race those chunks (their
    /// handshakes take two of the probe's three round trips, 0.165 s). Before, each dialled a new
    /// connection at once and fetched a chunk twice (WAN link a: 16 requests, 11 connections, 1.9 MiB
    /// twice).
    @Test func aThiefThatMustDialDoesNotRaceAConnectionAboutToStart() {
        var s = Self.script(warmUpsAnswered: 0)
        s.handle(.connected(0, roundTrip: Self.rtt, newConnection: true))
        s.begin()
        for id in 1...3 { #expect(s.c.connections[id].machine.isWaiting, "connection \(id) waits for a warm-up") }
        Self.run(&s, until: 0.04)
        #expect(Self.racers(s).isEmpty, "raced at the start: \(Self.racers(s))")
        s.handle(.warmedUp(WarmUpOutcome(sent: 7, accepted: 7, lag: 0.0)))
        Self.run(&s, until: 0.06)
        for id in 0...3 { #expect(s.starts(of: id).count == 1, "connection \(id)") }
    }

    /// Every owner starts at once on a warm connection and doubles its rate each round trip: a
    /// quarter second in, its average since its request says half a second or more is left of its
    /// chunk, but the doubling brings it within 0.3 s. Nobody races: one request a chunk, nothing
    /// fetched twice. Before, every idle connection raced one at 0.25-0.3 s.
    @Test func onALongPathAConnectionInSlowStartIsNotRaced() {
        var s = Self.script(warmUpsAnswered: 7)
        s.handle(.connected(0, roundTrip: Self.rtt, newConnection: false))
        s.begin()
        Self.run(&s, until: 5)
        #expect(s.c.isComplete)
        #expect(Self.racers(s).isEmpty, "raced: \(Self.racers(s))")
        for id in 0...3 { #expect(s.starts(of: id).count == 1, "connection \(id)") }
    }

    /// The same with one owner whose server caps it at 128 KiB/s from the start (its window never
    /// grows): its 1 MiB would take 8 s, so the end game races it, and the race wins.
    @Test func aConnectionThatStoppedGrowingIsStillRaced() {
        var s = Self.script(warmUpsAnswered: 7)
        s.handle(.connected(0, roundTrip: Self.rtt, newConnection: false))
        s.begin()
        Self.run(&s, until: 4, capped: [2: 128 * 1024])
        #expect(s.c.isComplete)
        #expect(!Self.racers(s).isEmpty || s.starts(of: 2).count > 1 || (0...3).contains { s.starts(of: $0).count > 1 },
                "nobody raced the capped connection")
    }
}
