import Testing

@testable import Segget

/// `RequestCostModel` and `RequestPrice`: what a request to a host costs, learnt from answers, and
/// the one question every request-spending decision asks. Pure values, no socket.
@Suite struct RequestCostModelTests {
    /// A host that thinks `think` seconds, whose `k`-th request (0 ahead, 1 ahead, …) waited behind
    /// the ones before it `slope` seconds each, on a path of `rtt`.
    static func model(think: Double, slope: Double, answers: Int, rtt: Double = 0.001, dialled: Bool = true) -> RequestCostModel {
        var m = RequestCostModel()
        m.measured(roundTrip: rtt)
        for k in 0..<answers {
            m.answered(ahead: k, wait: think + Double(k) * slope + m.networkSeconds(dialled: dialled), dialled: dialled, closes: false)
        }
        return m
    }

    @Test func theRoundTripsAreTakenOutOfTheThinkTime() {
        var m = RequestCostModel(tls: true)
        m.measured(roundTrip: 0.08)
        m.measured(roundTrip: 0.1)
        #expect(m.roundTrip == 0.08)
        #expect(abs(m.handshake - 0.16) < 1e-12)
        // A dialled TLS request waits three round trips before its head; a reused one, one.
        m.answered(ahead: 0, wait: 0.24 + 0.05, dialled: true, closes: false)
        m.answered(ahead: 0, wait: 0.08 + 0.05, dialled: false, closes: true)
        #expect(abs((m.baseThink ?? -1) - 0.05) < 1e-9)
        #expect(m.closesConnections)
        #expect(m.isCostly)
        #expect(!Self.model(think: 0.001, slope: 0, answers: 4).isCostly)
    }

    /// An answer that came before the path's round trip was known (a batch's probe on a connection
    /// the fetch does not take over) is not all think time: once a round trip is measured its
    /// handshakes and its own round trip come out of it, and a shorter one measured later takes out
    /// less.
    @Test func anAnswerBeforeTheRoundTripIsKnownIsWorkedOutAgain() {
        var m = RequestCostModel(tls: true)
        m.answered(ahead: 0, wait: 0.248, dialled: true, closes: false)
        #expect(abs((m.baseThink ?? -1) - 0.248) < 1e-9)
        #expect(m.isCostly)
        m.measured(roundTrip: 0.081)
        #expect(abs((m.baseThink ?? -1) - (0.248 - 3 * 0.081)) < 1e-9)
        #expect(!m.isCostly)
        m.answered(ahead: 1, wait: 0.081 + 0.004, dialled: false, closes: false)
        m.measured(roundTrip: 0.08)
        #expect(m.answers.map(\.ahead) == [0, 1])
        #expect(abs(m.answers[0].think - (0.248 - 0.24)) < 1e-9)
        #expect(abs(m.answers[1].think - 0.005) < 1e-9)
        // A longer round trip leaves the smallest one in force, and the answers as they were.
        let before = m.answers
        m.measured(roundTrip: 0.2)
        #expect(m.answers == before)
        // Never below zero: a wait shorter than its round trips is no think time at all.
        m.measured(roundTrip: 0.09 / 1.5)
        m.answered(ahead: 0, wait: 0.05, dialled: true, closes: false)
        #expect(m.answers.last?.think == 0)
    }

    @Test func anOriginWithManyWorkersDoesNotQueue() {
        let m = Self.model(think: 0.2, slope: 0, answers: 8)
        #expect(m.servedAtOnce() == nil)
        #expect(m.queueSlope() < 1e-9)
        #expect(m.servesSideBySide)
        #expect(abs(m.expectedWait(ahead: 7, dials: false) - (0.2 + 0.001)) < 1e-9)
    }

    @Test func anOriginThatTakesOneRequestAtATimeIsSeen() {
        // Each request waits for the one before: its think time and its body's 0.1 s.
        let m = Self.model(think: 0.2, slope: 0.3, answers: 6)
        #expect(m.servedAtOnce() == 1)
        #expect(abs(m.queueSlope() - 0.3) < 1e-9)
        #expect(!m.servesSideBySide)
        // Three workers: the fourth request is the first to wait.
        var three = RequestCostModel()
        for k in 0..<8 { three.answered(ahead: k, wait: k < 3 ? 0.2 : 0.2 + Double(k - 2) * 0.3, dialled: false, closes: false) }
        #expect(three.servedAtOnce() == 3)
    }

    /// The heads still awaited tell of a queue before they arrive, but a young one is no evidence of a
    /// fast answer.
    @Test func headsStillAwaitedCountAsLowerBounds() {
        let probeOnly = Self.model(think: 0.15, slope: 0, answers: 1)
        #expect(probeOnly.servedAtOnce() == nil)
        let waiting = (1...5).map { RequestCostModel.Answer(ahead: $0, think: 0.6) }
        #expect(probeOnly.servedAtOnce(pending: waiting) == 1)
        #expect(probeOnly.hasQueueEvidence(pending: waiting))
        let young = (1...5).map { RequestCostModel.Answer(ahead: $0, think: 0.05) }
        #expect(probeOnly.servedAtOnce(pending: young) == nil)
        #expect(!probeOnly.hasQueueEvidence(pending: young))
    }

    /// Heads late at random (a cache miss, a slow disk) come anywhere in the line: no queue.
    @Test func heedsLateAtRandomMakeNoQueue() {
        var m = RequestCostModel()
        let thinks = [0.2, 0.2, 1.5, 0.2, 0.2, 2.0, 0.2, 0.2]
        for (k, t) in thinks.enumerated() { m.answered(ahead: k, wait: t, dialled: false, closes: false) }
        #expect(m.servedAtOnce() == nil)
        #expect(m.queueSlope() < 0.01)
    }

    @Test func withoutEvidenceThePriorShareOfTheThinkTimeStands() {
        let m = Self.model(think: 0.4, slope: 0, answers: 1)
        #expect(!m.hasQueueEvidence())
        #expect(abs(m.queueSlope() - RequestCostModel.priorQueueShare * 0.4) < 1e-9)
        #expect(RequestCostModel().queueSlope() == 0)
    }

    @Test func theMemoryKeepsTheNewestAnswers() {
        var m = RequestCostModel()
        for k in 0..<(RequestCostModel.memory + 10) { m.answered(ahead: 0, wait: Double(k), dialled: false, closes: false) }
        #expect(m.answers.count == RequestCostModel.memory)
        #expect(m.answers.first?.think == 10)
        let first = m.requestSent(), second = m.requestSent()
        #expect(first == 1 && second == 2)
    }
}

@Suite struct RequestPriceTests {
    typealias P = RequestPrice.Proposal

    @Test func aRequestCostsItsFirstByteItsHandshakesAndTheQueue() {
        var m = RequestCostModelTests.model(think: 0.2, slope: 0.1, answers: 4, rtt: 0.01)
        let c = RequestPrice.cost(of: P(purpose: .split, saves: 0, dials: true, inFlight: 2, count: 3), model: m)
        #expect(abs(c.firstByte - (0.2 + 2 * 0.1 + 0.01)) < 1e-9)
        #expect(abs(c.handshake - 0.01) < 1e-9)
        #expect(abs(c.queue - 0.3) < 1e-9)
        #expect(c.cut == 0 && c.draw == 0)
        // A steal: its own wait is in its finish times; it pays the victim's connection and the draw.
        let steal = RequestPrice.cost(of: P(purpose: .steal, saves: 0, dials: true, cuts: true, inFlight: 2, waitInSaves: true), model: m)
        #expect(steal.firstByte == 0 && steal.handshake == 0)
        #expect(abs(steal.cut - 0.01) < 1e-9)
        #expect(steal.draw == Coordinator.minStealGainSeconds)
        // Where the server closes every connection, a cut costs no connection it would have kept.
        m.noteConnectionClose(true)
        #expect(RequestPrice.cost(of: P(purpose: .steal, saves: 0, dials: true, cuts: true, inFlight: 2, waitInSaves: true), model: m).cut == 0)
    }

    @Test func worthIsSavingMoreThanTheCost() {
        let m = RequestCostModelTests.model(think: 0.2, slope: 0, answers: 4)
        #expect(RequestPrice.worth(P(purpose: .redial, saves: 0.5, dials: true, inFlight: 3), model: m))
        #expect(!RequestPrice.worth(P(purpose: .redial, saves: 0.15, dials: true, inFlight: 3), model: m))
    }
}

/// `HostLimit` and `HostAllowance`: the host's word kept exactly.
@Suite struct HostWordTests {
    @Test func noRequestGoesOutBeforeTheWaitTheHostNamed() {
        var h = HostLimit()
        h.asked(wait: 1.5, now: 10)
        #expect(h.isQuiet(now: 11.4))
        let r1 = h.allowsAnother(inFlight: 0, wanted: true, now: 11.4)
        #expect(!r1)
        let r2 = h.allowsAnother(inFlight: 0, wanted: true, now: 11.5)
        #expect(r2)
        #expect(h.limit == nil, "a wait alone teaches no limit")
    }

    @Test func anOriginThatQueuesIsHeldAsIfItHadRefused() {
        var h = HostLimit()
        let r3 = h.saturated(servedAtOnce: 2, now: 0)
        #expect(r3)
        #expect(h.limit == 2)
        let r4 = h.saturated(servedAtOnce: 3, now: 0.1)
        #expect(!r4, "a higher count never raises the limit")
        let r5 = h.allowsAnother(inFlight: 2, wanted: true, now: 1)
        #expect(!r5)
        // Probed upwards after the hold-off, with work for it.
        let r6 = h.allowsAnother(inFlight: 2, wanted: true, now: HostLimit.initialHoldOff + 0.01)
        #expect(r6)
        #expect(h.limit == 3)
        // The probe queued too: back down, and the next probe waits twice as long.
        let r7 = h.saturated(servedAtOnce: 2, now: 2.5)
        #expect(r7)
        let r8 = h.allowsAnother(inFlight: 2, wanted: true, now: 2.5 + HostLimit.initialHoldOff + 0.01)
        #expect(!r8)
    }

    /// Bodies coming side by side show how many the host serves at once: a limit read from its
    /// heads' waits below that is dropped, back to the limit in force before the queue lowered it (a
    /// refusal's, or one a probe raised since), never below what was seen; a refusal's limit is not
    /// dropped; and no queue limit below the most seen side by side is taught again.
    @Test func aQueueLimitIsDroppedWhenMoreAreServedSideBySide() {
        var h = HostLimit()
        _ = h.saturated(servedAtOnce: 1, now: 0)
        #expect(h.servedSideBySide(1) == nil, "no more than the limit: it stands")
        #expect(h.servedSideBySide(3) == 1)
        #expect(h.limit == nil)
        #expect(h.servedSideBySide(5) == nil, "nothing left to drop")
        let below = h.saturated(servedAtOnce: 3, now: 1)
        #expect(!below, "below the most seen side by side: not taught")
        #expect(h.limit == nil)
        let above = h.saturated(servedAtOnce: 6, now: 1)
        #expect(above)

        var refused = HostLimit()
        refused.refused(inFlight: 4, wait: nil, now: 0)
        _ = refused.saturated(servedAtOnce: 2, now: 0.5)
        #expect(refused.limit == 2)
        #expect(refused.servedSideBySide(3) == 2)
        #expect(refused.limit == 4, "back to the refusal's limit")
        #expect(refused.servedSideBySide(6) == nil, "a refusal's word stands")
        #expect(refused.limit == 4)

        // A refusal's limit a probe raised since: the drop goes back to the raised one, not lower.
        var probed = HostLimit()
        probed.refused(inFlight: 2, wait: nil, now: 0)
        let raised = probed.allowsAnother(inFlight: 2, wanted: true, now: HostLimit.initialHoldOff + 0.01)
        #expect(raised && probed.limit == 3)
        probed.accepted()
        _ = probed.saturated(servedAtOnce: 2, now: 3)
        #expect(probed.servedSideBySide(3) == 2)
        #expect(probed.limit == 3, "not the first refusal's 2")
    }

    /// A queue limit's notice waits until the limit has stood for `SaturationNotice.hold`: one the
    /// bodies drop sooner is never announced, nor is its drop; one that stands is announced once,
    /// with the limit then in force; a drop after the notice is announced.
    @Test func aQueueLimitIsAnnouncedOnlyOnceItStands() {
        var n = SaturationNotice()
        n.taught(1, now: 0)
        #expect(n.due(now: 0.1, limit: 1) == nil, "held")
        let quiet = n.dropped()
        #expect(!quiet, "a drop of a limit never announced is not announced either")
        #expect(n.due(now: 1, limit: nil) == nil)

        n.taught(2, now: 2)
        n.taught(1, now: 2.3)
        #expect(n.due(now: 2.4, limit: 1) == nil)
        #expect(n.due(now: 2 + SaturationNotice.hold, limit: 1) == 1, "held from the first lesson, the limit in force")
        #expect(n.due(now: 3, limit: 1) == nil, "once")
        n.taught(1, now: 4)
        #expect(n.due(now: 5, limit: 1) == nil, "the same limit taught again is not announced again")
        n.taught(2, now: 6)
        #expect(n.due(now: 7, limit: 2) == 2, "another limit is")
        let said = n.dropped()
        #expect(said, "a drop after the notice is said")

        n.taught(3, now: 5)
        #expect(n.due(now: 6, limit: nil) == nil, "another download sharing the host dropped it meanwhile")
        let silent = n.dropped()
        #expect(!silent, "a drop of a limit this download never announced is not said")

        // Announced, then lowered (held), then dropped within the hold: the drop of the announced
        // limit is still said.
        n.taught(4, now: 10)
        #expect(n.due(now: 10.6, limit: 4) == 4)
        n.taught(2, now: 11)
        let lifted = n.dropped()
        #expect(lifted)
    }

    /// The limit is what the host counted: the other downloads' requests out and this one's ahead of
    /// the refused request, not the cooling slots of requests cut a moment ago (which taught a limit
    /// one above the host's, and a refusal every time a slot cooled off).
    @Test func coolingSlotsAreNotCountedAsTheHostsLimit() {
        var a = HostAllowance()
        let r9 = a.reserve(1, inFlight: 0, cap: nil, wanted: { true }, now: 0, forgetAfter: nil)
        #expect(r9)
        let r10 = a.reserve(1, inFlight: 1, cap: nil, wanted: { true }, now: 0, forgetAfter: nil)
        #expect(r10)
        a.sync(1, inFlight: 2)
        a.cancelled(1, now: 0)
        #expect(a.total == 3)
        let r = a.refused(2, inFlight: 1, wait: 1, now: 0.05)
        #expect(r?.lowered == true)
        #expect(a.learnt.limit == 3, "2 of download 1 and 1 of download 2 were out")
        #expect(a.learnt.isQuiet(now: 1.0))
    }
}

/// `Scheduler.respread`: the first split laid out again over the connections that start.
@Suite struct RespreadTests {
    @Test func theWorkIsLaidOutAgainOverTheConnectionsThatStart() {
        var s = Scheduler(plan: ChunkPlan(totalLength: 100 << 20, chunkSize: 1 << 20), connections: 8)
        s.respread(over: [0])
        #expect(s.run(of: 0) == 0..<100 && s.free.isEmpty && (1..<8).allSatisfy { s.run(of: $0) == nil })
        // Connection 0 finished 10 chunks meanwhile; the rest goes to it and two more.
        for k in 0..<10 { _ = s.chunkFinished(k, by: 0) }
        s.respread(over: [0, 3, 5])
        #expect(s.run(of: 0) == 10..<40 && s.run(of: 3) == 40..<70 && s.run(of: 5) == 70..<100)
        #expect(s.free.isEmpty)
    }

    /// A connection whose run is done while its answer runs on takes the work that follows: a free
    /// run, or the run of an owner that has not started on it (and only then).
    @Test func anAnswerThatRunsOnTakesTheWorkNobodyStarted() {
        var s = Scheduler(plan: ChunkPlan(totalLength: 12 << 20, chunkSize: 1 << 20), connections: 3)
        #expect(s.run(of: 0) == 0..<4 && s.run(of: 1) == 4..<8)
        for k in 0..<4 { _ = s.chunkFinished(k, by: 0) }
        #expect(s.run(of: 0) == nil)
        let refused = s.extend(0, after: 3) { _ in false }
        #expect(!refused.taken && s.run(of: 1) == 4..<8)
        let taken = s.extend(0, after: 3) { $0 == 1 }
        #expect(taken.taken && taken.robbed == 1)
        #expect(s.run(of: 0) == 4..<8 && s.run(of: 1) == nil)
        // A free run that follows is taken with no owner to rob.
        s.abandon(2)
        for k in 4..<8 { _ = s.chunkFinished(k, by: 0) }
        let free = s.extend(0, after: 7) { _ in false }
        #expect(free.taken && free.robbed == nil && s.run(of: 0) == 8..<12)
        // At the file's end there is nothing to take.
        for k in 8..<12 { _ = s.chunkFinished(k, by: 0) }
        #expect(!s.extend(0, after: 11) { _ in true }.taken)
    }

    /// In file order (a hasher reading the file as it grows), runs stay at most the hasher's size.
    @Test func inOrderTheRunsKeepTheirSize() {
        var s = Scheduler(plan: ChunkPlan(totalLength: 20 << 20, chunkSize: 1 << 20), connections: 4, maxRunChunks: 3)
        s.respread(over: [0, 2])
        #expect(s.run(of: 0) == 0..<3 && s.run(of: 2) == 3..<6)
        #expect(s.free == [6..<9, 9..<12, 12..<15, 15..<18, 18..<20])
        for k in 0..<3 { _ = s.chunkFinished(k, by: 0) }
        let next = s.extend(0, after: 2) { _ in false }
        #expect(!next.taken, "the next run is connection 2's, which started")
    }

    @Test func nothingMovesOnceAnotherConnectionHasWork() {
        var s = Scheduler(plan: ChunkPlan(totalLength: 16 << 20, chunkSize: 1 << 20), connections: 4)
        _ = s.chunkFinished(5, by: 1)
        let before = (s.runs, s.free)
        s.respread(over: [0, 1])
        #expect(s.runs == before.0 && s.free == before.1)
    }
}

/// The request price at work in the simulator: the shapes issue 37 named, each with what the
/// download may cost its origin.
@Suite struct RequestPricePolicyTests {
    static let MiB: Int64 = 1 << 20

    /// An origin that works on one request at a time, fast once it answers (an S3 emulator, a small
    /// application server): one connection's answer beats any split. One request, the probe's, in
    /// about the ideal's time; and where it is capped, so that a split looked worth it, the first
    /// answer still goes on through the work whose requests wait in the origin's queue.
    @Test(arguments: [false, true])
    func anOriginWithOneWorkerGetsFewRequests(closes: Bool) {
        var s = SimulatedScenario(fileSize: 256 * Self.MiB, connections: 8, rtt: 0.0005, bottleneck: 1e9)
        s.firstByteDelay = 0.24
        s.workers = 1
        s.closesConnections = closes
        s.probe = true
        let ideal = SimulationIdeal.seconds(s)
        let o = SimulatedDownload.run(s, timeLimit: 60)
        #expect(o.finished && o.requests == 1, "\(EngineSimulation.summary(o, ideal: ideal))")
        #expect(o.seconds <= 1.1 * ideal, "\(EngineSimulation.summary(o, ideal: ideal))")
        s.perRequestCap = 64 * Double(Self.MiB)
        let capped = SimulatedDownload.run(s, timeLimit: 60)
        let cappedIdeal = SimulationIdeal.seconds(s)
        #expect(capped.finished && capped.seconds <= 1.15 * cappedIdeal, "\(EngineSimulation.summary(capped, ideal: cappedIdeal))")
        #expect(capped.bytesTwice == 0)
    }

    /// Many workers, 200 ms before every head, 16 MiB/s per answer: the split is made at once and in
    /// full, within the floor a probe-then-split allows (the probe's think time, then the others'),
    /// with at most 2 n requests.
    @Test(arguments: [0.05, 0.2, 0.5])
    func manyWorkersWithASlowFirstByteAreSplitInFull(think: Double) {
        var s = SimulatedScenario(fileSize: 128 * Self.MiB, connections: 8, rtt: 0.0005, perRequestCap: 16 * Double(Self.MiB))
        s.firstByteDelay = think
        s.probe = true
        let o = SimulatedDownload.run(s, timeLimit: 60)
        // Connection 0 from the probe's head on, the others one think time later.
        let floor = think + (128.0 + 7 * 16 * think) / (8 * 16)
        #expect(o.finished && o.seconds <= 1.05 * floor + 0.05, "\(o.seconds) s against a floor of \(floor) s")
        #expect(o.requests <= 16)
    }

    /// A host that refuses a request past 3 in flight and asks for a second: the limit learnt is 3
    /// (the requests ahead of the first refused one), no request reaches it before its second is
    /// over, and a handful of refusals in all.
    @Test(arguments: [SimulatedScenario.Rejection.tooManyRequests(retryAfter: 1), .rateLimitFields])
    func aHostsWordIsKept(rejection: SimulatedScenario.Rejection) {
        var s = SimulatedScenario(fileSize: 192 * Self.MiB, connections: 8, rtt: 0.001, perRequestCap: 8 * Double(Self.MiB))
        s.connectionLimit = 3
        s.rejection = rejection
        s.probe = true
        let ideal = SimulationIdeal.seconds(s)
        let o = SimulatedDownload.run(s, timeLimit: 120)
        #expect(o.finished && o.earlyRequests == 0, "\(EngineSimulation.summary(o, ideal: ideal))")
        #expect(o.rejected <= 10 && o.maxInFlight <= 4)
        #expect(o.seconds < 1.25 * ideal, "\(EngineSimulation.summary(o, ideal: ideal))")
    }
}
