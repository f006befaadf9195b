import Testing
@testable import Segget

/// `ConnectionMachine`: every legal path of a connection's life, and the held-time bookkeeping the
/// slow rule and the stall timeout rely on. (Illegal events stop the process; they are listed in
/// `impossibleEventsAreNamed` as the states in which each event is refused.)
@Suite struct ConnectionMachineTests {
    typealias M = ConnectionMachine

    func receiving() -> M {
        var m = M()
        m.start()
        #expect(m.headArrived(refusal: nil) == .write)
        return m
    }

    @Test func startsIdle() {
        let m = M()
        #expect(m.state == .idle)
        #expect(m.isIdle && !m.isTransferring && !m.isPaused && !m.isWaiting && !m.headJudged)
        #expect(m.waitingUntil == nil && m.stopReason == nil)
        #expect(m.held(at: 100) == 0)
    }

    @Test func rampWaitsThenAsksForTheStart() {
        var m = M()
        m.wait(until: 1.5, .ramp)
        #expect(m.isWaiting && m.waitingUntil == 1.5 && !m.isIdle && !m.isTransferring)
        #expect(m.tick(now: 1.0) == .none)
        #expect(m.state == .waiting(until: 1.5, .ramp))
        #expect(m.tick(now: 1.5) == .startRequest(.ramp))
        #expect(m.state == .idle)
        // Ticks while idle do nothing.
        #expect(m.tick(now: 9) == .none)
        m.start()
        #expect(m.state == .awaitingHead && m.isTransferring && !m.headJudged)
    }

    @Test func retryWaitsThenAsksForTheStart() {
        var m = M()
        m.wait(until: 3, .retry)
        #expect(m.tick(now: 4) == .startRequest(.retry))
        #expect(m.isIdle)
    }

    @Test func aWaitingConnectionMayStartEarly() {
        var m = M()
        m.wait(until: 3, .ramp)
        m.start()
        #expect(m.state == .awaitingHead)
    }

    @Test func acceptedHeadLetsBytesThrough() {
        var m = receiving()
        #expect(m.state == .receiving && m.headJudged && m.isTransferring)
        #expect(m.bytesArrived(budgetAllows: true, now: 1) == .write)
        #expect(m.transferEnded(now: 2) == nil)
        #expect(m.isIdle)
    }

    @Test func refusedHeadAbortsAndKeepsItsReason() {
        var m = M()
        m.start()
        let why = StopReason.retry("HTTP 503", after: 2, kind: .httpStatus)
        #expect(m.headArrived(refusal: why) == .abort)
        #expect(m.state == .stopping(why) && m.headJudged && m.isTransferring)
        // Bytes libcurl still delivers are refused.
        #expect(m.bytesArrived(budgetAllows: true, now: 1) == .abort)
        #expect(m.transferEnded(now: 1) == why)
        #expect(m.isIdle)
    }

    @Test func transferEndingWithoutAHeadHasNoReason() {
        var m = M()
        m.start()
        #expect(m.transferEnded(now: 1) == nil)
        #expect(m.isIdle && !m.headJudged)
    }

    @Test func pauseCountsHeldTime() {
        var m = receiving()
        #expect(m.bytesArrived(budgetAllows: false, now: 10) == .pause)
        #expect(m.state == .paused(since: 10) && m.isPaused && m.isTransferring)
        #expect(m.held(at: 10.5) == 0.5)
        m.resume(now: 11)
        #expect(m.state == .receiving && m.heldTotal == 1)
        #expect(m.held(at: 20) == 1)
        // Paused again straight away when resumed bytes still find no budget.
        #expect(m.bytesArrived(budgetAllows: false, now: 12) == .pause)
        #expect(m.bytesArrived(budgetAllows: false, now: 12.5) == .pause)
        #expect(m.state == .paused(since: 12))
        #expect(m.bytesArrived(budgetAllows: true, now: 13) == .write)
        #expect(m.state == .receiving && m.heldTotal == 2)
    }

    @Test func pauseEndsWithTheTransfer() {
        var m = receiving()
        _ = m.bytesArrived(budgetAllows: false, now: 10)
        #expect(m.transferEnded(now: 12) == nil)
        #expect(m.isIdle && m.heldTotal == 2)
        var n = receiving()
        _ = n.bytesArrived(budgetAllows: false, now: 10)
        n.stop(.reachedEnd, now: 10.25)
        #expect(n.heldTotal == 0.25 && n.stopReason == .reachedEnd)
    }

    @Test func stopKeepsTheFirstReason() {
        var m = receiving()
        m.stop(.reachedEnd, now: 1)
        m.stop(.retry("x", after: nil, kind: .network), now: 1)
        #expect(m.stopReason == .reachedEnd)
        var n = M()
        n.start()
        n.stop(.reachedEnd, now: 0)
        #expect(n.transferEnded(now: 0) == .reachedEnd)
    }

    @Test func cancelOverridesAnyReasonAndDropsAWait() {
        var m = receiving()
        m.stop(.retry("x", after: nil, kind: .network), now: 1)
        m.cancel(now: 1)
        #expect(m.stopReason == .cancelled)
        #expect(m.transferEnded(now: 1) == .cancelled)
        var w = M()
        w.wait(until: 5, .retry)
        w.cancel(now: 1)
        #expect(w.isIdle)
        var i = M()
        i.cancel(now: 1)
        #expect(i.isIdle)
        var p = receiving()
        _ = p.bytesArrived(budgetAllows: false, now: 1)
        p.cancel(now: 3)
        #expect(p.state == .stopping(.cancelled) && p.heldTotal == 2)
        var h = M()
        h.start()
        h.cancel(now: 0)
        #expect(h.state == .stopping(.cancelled))
    }

    @Test func writerWaitsCountOnlyWhileTransferring() {
        var m = M()
        m.heldByWriter(1)
        #expect(m.heldTotal == 0)
        m.start()
        m.heldByWriter(0.5)
        m.heldByWriter(-1)
        #expect(m.heldTotal == 0.5)
        _ = m.headArrived(refusal: nil)
        m.heldByWriter(0.25)
        #expect(m.held(at: 0) == 0.75)
    }

    @Test func heldTimeSurvivesTransfers() {
        var m = receiving()
        _ = m.bytesArrived(budgetAllows: false, now: 0)
        m.resume(now: 1)
        _ = m.transferEnded(now: 2)
        m.wait(until: 3, .retry)
        _ = m.tick(now: 3)
        m.start()
        #expect(m.held(at: 4) == 1)
    }

    /// An impossible event stops the process at once (a bug in the engine, not a server's fault).
    @Test func impossibleEventsStopTheProcess() async {
        await #expect(processExitsWith: .failure) {
            var m = ConnectionMachine()
            m.resume(now: 0)
        }
        await #expect(processExitsWith: .failure) {
            var m = ConnectionMachine()
            _ = m.transferEnded(now: 0)
        }
        await #expect(processExitsWith: .failure) {
            var m = ConnectionMachine()
            m.start()
            m.start()
        }
        await #expect(processExitsWith: .failure) {
            var m = ConnectionMachine()
            m.start()
            _ = m.bytesArrived(budgetAllows: true, now: 0)
        }
        await #expect(processExitsWith: .failure) {
            var m = ConnectionMachine()
            m.start()
            m.wait(until: 1, .retry)
        }
        await #expect(processExitsWith: .failure) {
            var m = ConnectionMachine()
            m.wait(until: 1, .retry)
            _ = m.headArrived(refusal: nil)
        }
    }

    /// The states in which each event is legal; `ConnectionMachine` stops the process on any other.
    /// Kept as data so that a change to the rules shows up here.
    @Test func legalStatesPerEvent() {
        let all: [M.State] = [.idle, .waiting(until: 1, .retry), .awaitingHead, .receiving, .paused(since: 0), .stopping(.reachedEnd)]
        func legal(_ s: M.State, _ event: String) -> Bool {
            switch (event, s) {
            case ("wait", .idle): true
            case ("start", .idle), ("start", .waiting): true
            case ("headArrived", .awaitingHead): true
            case ("bytesArrived", .receiving), ("bytesArrived", .paused), ("bytesArrived", .stopping): true
            case ("resume", .paused): true
            case ("stop", .awaitingHead), ("stop", .receiving), ("stop", .paused), ("stop", .stopping): true
            case ("transferEnded", .awaitingHead), ("transferEnded", .receiving), ("transferEnded", .paused),
                ("transferEnded", .stopping): true
            case ("tick", _), ("cancel", _), ("heldByWriter", _): true
            default: false
            }
        }
        // Every transferring state may end; no idle or waiting one may.
        for s in all {
            var m = M()
            m.force(s)
            #expect(m.isTransferring == legal(s, "transferEnded"), "\(s)")
            #expect(legal(s, "stop") == m.isTransferring, "\(s)")
        }
        // Each legal event runs without stopping the process.
        for s in all {
            for event in ["wait", "start", "headArrived", "bytesArrived", "resume", "stop", "transferEnded", "tick", "cancel", "heldByWriter"] where legal(s, event) {
                var m = M()
                m.force(s)
                switch event {
                case "wait": m.wait(until: 2, .ramp)
                case "start": m.start()
                case "headArrived": _ = m.headArrived(refusal: nil)
                case "bytesArrived": _ = m.bytesArrived(budgetAllows: true, now: 1)
                case "resume": m.resume(now: 1)
                case "stop": m.stop(.cancelled, now: 1)
                case "transferEnded": _ = m.transferEnded(now: 1)
                case "tick": _ = m.tick(now: 5)
                case "cancel": m.cancel(now: 1)
                default: m.heldByWriter(1)
                }
            }
        }
    }
}

extension ConnectionMachine {
    /// Puts the machine in `s` by legal events (for tests).
    mutating func force(_ s: State) {
        self = ConnectionMachine()
        switch s {
        case .idle: break
        case .waiting(let t, let c): wait(until: t, c)
        case .awaitingHead: start()
        case .receiving:
            start()
            _ = headArrived(refusal: nil)
        case .paused(let since):
            start()
            _ = headArrived(refusal: nil)
            _ = bytesArrived(budgetAllows: false, now: since)
        case .stopping(let r):
            start()
            stop(r, now: 0)
        }
        precondition(state == s)
    }
}
