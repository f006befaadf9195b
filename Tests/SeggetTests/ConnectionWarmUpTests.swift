import Testing
@testable import Segget

/// The warm-ups beside a slow probe (`ConnectionWarmUp`) and how the coordinator weighs them
/// (`Coordinator+WarmUp.swift`): which downloads warm connections, that a connection waits for a
/// warm-up still out rather than dialling, and that refused warm-ups teach the host's limit before
/// the first ranged request goes out.
@Suite struct ConnectionWarmUpTests {
    static let MiB = 1 << 20

    static func rule(
        connections: Int = 8, auto: Bool = false, multiplexed: Bool = false, mirrors: Int = 0, shared: Bool = false,
        probeBytes: Int = 1 << 20
    ) -> ConnectionWarmUp {
        ConnectionWarmUp(
            connections: connections, autoConnections: auto, multiplexed: multiplexed, mirrors: mirrors, sharedHost: shared,
            probeBytes: probeBytes)
    }

    @Test func onlyADownloadsOwnConnectionsAreWarmed() {
        #expect(Self.rule().count == 7)
        #expect(Self.rule(connections: 2).count == 1)
        // `-n auto` starts with `Coordinator.autoInitial`.
        #expect(Self.rule(connections: 16, auto: true).count == Coordinator.autoInitial - 1)
        #expect(Self.rule(connections: 1).count == 0)
        // Ranges multiplexed as HTTP/2 streams share one connection; over HTTP/2 with a connection
        // each (a single download's), they are warmed as over HTTP/1.1.
        #expect(Self.rule(multiplexed: true).count == 0)
        #expect(Self.rule(mirrors: 1).count == 0)
        #expect(Self.rule(shared: true).count == 0)
        // A stream's, a resume's or a renewed link's probe asks for one byte.
        #expect(Self.rule(probeBytes: 1).count == 0)
    }

    @Test func warmUpsGoOutOnlyWhileTheProbeIsSlow() {
        let w = Self.rule()
        #expect(!w.due(waited: 0.005, answered: false, roundTrip: nil))
        #expect(!w.due(waited: ConnectionWarmUp.delay - 0.001, answered: false, roundTrip: nil))
        // Still connecting after 30 ms (a SYN crossing a WAN), or connected over a long path.
        #expect(w.due(waited: ConnectionWarmUp.delay, answered: false, roundTrip: nil))
        #expect(w.due(waited: ConnectionWarmUp.delay, answered: false, roundTrip: 0.15))
        // Answered in time (loopback, a LAN): a small file pays for nothing.
        #expect(!w.due(waited: 1, answered: true, roundTrip: 0.15))
        // A slow server or a busy machine on a short path: a dial there costs milliseconds.
        #expect(!w.due(waited: 1, answered: false, roundTrip: 0.0001))
        #expect(!w.due(waited: 1, answered: false, roundTrip: ConnectionWarmUp.minRoundTrip - 0.001))
        #expect(!Self.rule(connections: 1).due(waited: 1, answered: false, roundTrip: nil))
        // A probe on a connection an earlier download left open: the host's connections are there.
        #expect(!w.due(waited: 1, answered: false, probeReused: true, roundTrip: 0.15))
        // Still connecting: it dials, whatever the count of new connections says so far.
        #expect(w.due(waited: 1, answered: false, probeReused: true, roundTrip: nil))
    }

    /// Link b over HTTP: the probe's answer takes 0.3 s; a warm-up sent 30 ms after it answered
    /// 0.3 s after its own request. Unanswered at 0.48 s, the probe lost a packet on its own connection
    /// (its SYN's timeout is 1 s) and is asked again on a warm connection; before that, or with no
    /// warm-up answered, it is not.
    @Test func aProbeLateBehindItsWarmUpsIsAskedAgain() {
        #expect(!ConnectionWarmUp.probeOverdue(waited: 0.47, lag: 0.03, warmUpRound: 0.3))
        #expect(ConnectionWarmUp.probeOverdue(waited: 0.48, lag: 0.03, warmUpRound: 0.3))
        #expect(!ConnectionWarmUp.probeOverdue(waited: 5, lag: 0.03, warmUpRound: nil))
    }

    @Test func refusalsTeachTheProbeAndTheWarmUpsNotRefused() {
        var o = WarmUpOutcome(sent: 7, accepted: 2, refused: 0)
        #expect(o.hostLimit == nil)
        #expect(o.stillOut == 5)
        o.refused = 4
        // The probe, 2 answered and 1 still out were in flight when the refusals came.
        #expect(o.hostLimit == 4)
        o.failed = 1
        #expect(o.hostLimit == 3)
        #expect(o.stillOut == 0)
    }

    /// On a long path (every connection starts at once), a connection finds a warm one for each
    /// warm-up answered; the others wait for those still out, and start as each ends.
    @Test func connectionsWaitForWarmUpsStillOut() {
        var s = CoordinatorTests.Script(size: 64 * Self.MiB, connections: 8) { $0.probeFirstAnswer = 0.45 }
        s.handle(.warmedUp(WarmUpOutcome(sent: 7, accepted: 3, lag: 0.03)))
        s.begin()
        for id in 0...3 { #expect(s.starts(of: id).count == 1, "connection \(id)") }
        for id in 4...7 {
            #expect(s.starts(of: id).isEmpty, "connection \(id)")
            #expect(s.c.connections[id].machine.isWaiting)
        }
        s.run(until: 0.05)
        #expect((4...7).allSatisfy { s.starts(of: $0).isEmpty })
        // Two more answered: two waiting connections start on the next pass, the others still wait.
        s.handle(.warmedUp(WarmUpOutcome(sent: 7, accepted: 5, lag: 0.03)))
        s.run(until: 0.06)
        #expect((4...7).filter { !s.starts(of: $0).isEmpty }.count == 2)
        // One lost a packet: dialled once the grace (the lag and half the probe's first answer) is over.
        #expect(abs(s.c.warmUpGrace - 0.255) < 1e-9)
        s.run(until: 0.25)
        #expect((4...7).filter { !s.starts(of: $0).isEmpty }.count == 2)
        s.run(until: 0.27)
        #expect((4...7).allSatisfy { s.starts(of: $0).count == 1 })
        #expect(s.events.isEmpty, "\(s.events)")
        s.run(until: 30)
        #expect(s.c.isComplete)
    }

    /// Without warm-ups (none sent, or all answered) every connection starts at once, as before.
    @Test func answeredWarmUpsHoldNobodyBack() {
        var s = CoordinatorTests.Script(size: 64 * Self.MiB, connections: 8) { $0.probeFirstAnswer = 0.45 }
        s.handle(.warmedUp(WarmUpOutcome(sent: 7, accepted: 7)))
        s.begin()
        for id in 0...7 { #expect(s.starts(of: id).count == 1, "connection \(id)") }
    }

    /// 5 of 7 warm-ups refused (a server that takes 3 requests at once): the first requests are the
    /// probe's connection and the two waiting for the warm-ups still out, which hold their places;
    /// nobody else is sent into a refusal, and the limit is said once. The refusals asked for 1 s:
    /// no request goes out before it has passed, however many the limit allows.
    @Test func refusedWarmUpsTeachTheHostsLimitBeforeTheFirstRequests() {
        var s = CoordinatorTests.Script(size: 64 * Self.MiB, connections: 8) { $0.probeFirstAnswer = 0.45 }
        s.handle(.warmedUp(WarmUpOutcome(sent: 7, accepted: 0, refused: 5, wait: 1)))
        s.begin()
        #expect(s.starts(of: 0).count == 1)
        #expect((1...7).allSatisfy { s.starts(of: $0).isEmpty })
        s.run(until: 0.1)
        // Still no request beyond the two warm-ups in flight.
        #expect((1...7).allSatisfy { s.starts(of: $0).isEmpty })
        s.handle(.warmedUp(WarmUpOutcome(sent: 7, accepted: 2, refused: 5, wait: 1)))
        s.run(until: 0.9)
        #expect((1...7).allSatisfy { s.starts(of: $0).isEmpty }, "a request before the host's Retry-After")
        s.run(until: 1.2)
        let started = (1...7).filter { !s.starts(of: $0).isEmpty }
        #expect(started.count == 2, "\(started)")
        #expect(s.c.inFlight <= 3)
        let notices = s.events.filter { if case .notice = $0 { true } else { false } }
        #expect(notices.count == 1, "\(s.events)")
        #expect(s.c.host.limit == 3)
        s.run(until: 60)
        #expect(s.c.isComplete)
    }
}
