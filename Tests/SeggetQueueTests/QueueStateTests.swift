import Testing

@testable import SeggetQueue

private func id(_ n: Int) -> TaskID { TaskID(UInt64(n)) }

private func starts(_ actions: [QueueState.Action]) -> [TaskID: QueueState.Grant] {
    var out: [TaskID: QueueState.Grant] = [:]
    for case .start(let id, let g) in actions { out[id] = g }
    return out
}

private func stops(_ actions: [QueueState.Action]) -> [TaskID] {
    actions.compactMap { if case .stop(let id) = $0 { id } else { nil } }
}

@Suite struct QueueStateTests {
    private func scheduling(_ limits: QueueState.Limits) -> QueueState {
        var s = QueueState(limits: limits)
        _ = s.startScheduling()
        return s
    }

    /// The history keeps at most `max-download-result` stopped tasks: the oldest whose download has
    /// ended go first; one still stopping stays until it has.
    @Test func theHistoryIsTrimmedOldestFirstSparingThoseStillStopping() throws {
        var s = scheduling(.init(maxActive: 1, connectionBudget: 16, defaultConnections: 4))
        // Task 1 starts; 2-6 wait paused and are removed (never started: nothing to stop).
        #expect(starts(s.add(id(1), want: .init(), paused: false, position: nil)).keys.sorted() == [id(1)])
        for n in 2...6 { _ = s.add(id(n), want: .init(), paused: true, position: nil) }
        _ = try s.remove(id(1))  // stopping: its download has not ended yet
        for n in 2...6 { _ = try s.remove(id(n)) }
        #expect(s.history == (1...6).map(id))
        #expect(s.trimHistory(limit: 10).isEmpty)
        let gone = s.trimHistory(limit: 3)
        #expect(gone == [id(2), id(3), id(4)], "task 1 is still stopping: the next oldest go")
        #expect(s.history == [id(1), id(5), id(6)])
        #expect(s.entry(id(2)) == nil && s.entry(id(1)) != nil)
        _ = s.downloadEnded(id(1), .interrupted)
        #expect(s.trimHistory(limit: 2) == [id(1)])
        #expect(s.history == [id(5), id(6)])
        #expect(QueueState.historyLimit == 1000)
    }

    @Test func maxActiveLeavesTheRestWaitingInOrder() {
        var s = scheduling(.init(maxActive: 2, connectionBudget: 16, defaultConnections: 4))
        #expect(starts(s.add(id(1), want: .init(), paused: false, position: nil)).keys.sorted() == [id(1)])
        #expect(starts(s.add(id(2), want: .init(), paused: false, position: nil)).keys.sorted() == [id(2)])
        #expect(starts(s.add(id(3), want: .init(), paused: false, position: nil)).isEmpty)
        #expect(s.entry(id(3))?.status == .waiting)
        #expect(s.position(of: id(3)) == 0)
        // When one ends, the waiting one starts.
        let a = s.downloadEnded(id(1), .completed)
        #expect(a.contains(.status(id(1), .complete)))
        #expect(starts(a).keys.sorted() == [id(3)])
        #expect(s.history == [id(1)])
    }

    @Test func nothingStartsBeforeSchedulingOrAfterShutdown() {
        var s = QueueState(limits: .init())
        #expect(starts(s.add(id(1), want: .init(), paused: false, position: nil)).isEmpty)
        #expect(starts(s.startScheduling()).keys.sorted() == [id(1)])
        #expect(s.shutdown() == [.stop(id(1))])
        // Status stays active (the store keeps saying active, so a restart resumes it).
        #expect(s.entry(id(1))?.status == .active)
        #expect(starts(s.add(id(2), want: .init(), paused: false, position: nil)).isEmpty)
        #expect(starts(s.downloadEnded(id(1), .interrupted)).isEmpty)
    }

    @Test func eachTaskStartsWithTheBudgetsShareOfASlotAndMayBorrowTheRest() {
        // Budget 16 over 5 slots: 3 connections of its own each, up to 8 in all with loans.
        var s = QueueState(limits: .init(maxActive: 5, connectionBudget: 16, defaultConnections: 8))
        for n in 1...3 { _ = s.add(id(n), want: .init(), paused: false, position: nil) }
        let g = starts(s.startScheduling())
        #expect(g.values.map(\.connections) == [3, 3, 3])
        #expect(g.values.allSatisfy { $0.withLoans == 8 })

        // Arriving one by one (a front-end adds URLs one call at a time), every task gets the same:
        // the first no longer took 8 and left the last three one connection each for their whole run.
        var t = scheduling(.init(maxActive: 5, connectionBudget: 16, defaultConnections: 8))
        var granted: [Int] = []
        for n in 1...6 {
            granted += starts(t.add(id(n), want: .init(), paused: false, position: nil)).values.map(\.connections)
        }
        #expect(granted == [3, 3, 3, 3, 3])
        #expect(t.grantedConnections == 15)
        #expect(t.entry(id(6))?.status == .waiting)
    }

    @Test func aTaskAskingForFewerConnectionsGetsWhatItAsks() {
        var s = scheduling(.init(maxActive: 3, connectionBudget: 16, defaultConnections: 8))
        let g = starts(s.add(id(1), want: .init(connections: 2), paused: false, position: nil))[id(1)]
        #expect(g?.connections == 2 && g?.withLoans == 2)
    }

    @Test func aBudgetSmallerThanMaxActiveRunsEverySlotOnOneConnection() {
        var s = scheduling(.init(maxActive: 5, connectionBudget: 2, defaultConnections: 8))
        for n in 1...6 { _ = s.add(id(n), want: .init(), paused: false, position: nil) }
        #expect(s.activeOrder == (1...5).map(id))
        #expect(s.tasks.values.compactMap(\.running).allSatisfy { $0.connections == 1 && $0.withLoans == 8 })
    }

    /// Exploratory run 7: with `max-concurrent-downloads` raised from 5 to 10 while 10 slow tasks
    /// were queued, still 5 ran (the 5 running held every connection of the budget, and a start
    /// waited for connections as well as a slot); aria2 ran 10.
    @Test func raisingMaxActiveStartsWaitingTasksAtOnce() {
        var s = scheduling(.init(maxActive: 5, connectionBudget: 16, defaultConnections: 8))
        for n in 1...10 { _ = s.add(id(n), want: .init(), paused: false, position: nil) }
        #expect(s.running.count == 5)
        let actions = s.setLimits(.init(maxActive: 10, connectionBudget: 16, defaultConnections: 8))
        let raised = starts(actions)
        #expect(raised.keys.sorted() == (6...10).map(id))
        // The first five come down to the new share (16 over 10 slots: 1), the rest of theirs held
        // as loans; the new five get one of their own each.
        #expect((1...5).allSatisfy { actions.contains(.shrink(id($0), 1)) }, "\(actions)")
        #expect(raised.values.allSatisfy { $0.connections == 1 })
        #expect(s.running.count == 10 && s.grantedConnections == 10)
        // 30 slots over a budget of 16: every one runs, on a connection of its own at least.
        var t = scheduling(.init(maxActive: 30, connectionBudget: 16, defaultConnections: 8))
        for n in 1...30 { _ = t.add(id(n), want: .init(), paused: false, position: nil) }
        #expect(t.running.count == 30)
    }

    @Test func aTasksOwnSpeedCapIsItsGrant() {
        var t = scheduling(.init(maxActive: 2))
        #expect(starts(t.add(id(1), want: .init(maxSpeed: 300), paused: false, position: nil))[id(1)]?.speed == 300)
        #expect(starts(t.add(id(2), want: .init(), paused: false, position: nil))[id(2)]?.speed == nil)
    }

    @Test func pauseOfActiveStopsItAndPutsItFirstResumeRestartsIt() throws {
        var s = scheduling(.init(maxActive: 1))
        _ = s.add(id(1), want: .init(), paused: false, position: nil)
        _ = s.add(id(2), want: .init(), paused: false, position: nil)
        let p = try s.pause(id(1))
        #expect(stops(p) == [id(1)])
        #expect(p.contains(.status(id(1), .paused)))
        // Still stopping: its connections are still counted, so task 2 waits for the end.
        #expect(starts(p).isEmpty)
        #expect(s.queue == [id(1), id(2)])
        #expect(starts(s.downloadEnded(id(1), .interrupted)).keys.sorted() == [id(2)])
        #expect(s.entry(id(1))?.status == .paused)
        #expect(try s.resume(id(1)) == [.status(id(1), .waiting)])
        #expect(starts(s.downloadEnded(id(2), .completed)).keys.sorted() == [id(1)])
    }

    /// Options changed under a running download (aria2's `changeOption`): it stops and starts again
    /// ahead of the tasks that were waiting, once its download has ended, never beside it.
    @Test func restartStopsAnActiveTaskAndStartsItFirstOnceEnded() {
        var s = scheduling(.init(maxActive: 1))
        _ = s.add(id(1), want: .init(), paused: false, position: nil)
        _ = s.add(id(2), want: .init(), paused: false, position: nil)
        let r = s.restart(id(1))
        #expect(stops(r) == [id(1)])
        #expect(r.contains(.status(id(1), .waiting)))
        #expect(starts(r).isEmpty)
        #expect(s.queue == [id(1), id(2)])
        let again = s.downloadEnded(id(1), .interrupted)
        #expect(starts(again).keys.sorted() == [id(1)])
        #expect(again.contains(.status(id(1), .active)))
        // A failure while it stops is the stop: it starts again all the same.
        _ = s.restart(id(1))
        #expect(starts(s.downloadEnded(id(1), .failed)).keys.sorted() == [id(1)])
        // Finished while stopping: complete, and the next one starts.
        _ = s.restart(id(1))
        let done = s.downloadEnded(id(1), .completed)
        #expect(done.contains(.status(id(1), .complete)))
        #expect(starts(done).keys.sorted() == [id(2)])
        // Only a running task restarts.
        #expect(s.restart(id(1)) == [])
        _ = s.add(id(3), want: .init(), paused: true, position: nil)
        #expect(s.restart(id(3)) == [])
        #expect(s.restart(id(99)) == [])
    }

    @Test func pauseAndResumeOfWaitingKeepTheirPlace() throws {
        var s = scheduling(.init(maxActive: 1))
        for n in 1...4 { _ = s.add(id(n), want: .init(), paused: false, position: nil) }
        #expect(try s.pause(id(3)) == [.status(id(3), .paused)])
        #expect(s.queue == [id(2), id(3), id(4)])
        // A paused task is skipped: 4 starts before 3.
        #expect(starts(s.downloadEnded(id(1), .completed)).keys.sorted() == [id(2)])
        #expect(starts(s.downloadEnded(id(2), .completed)).keys.sorted() == [id(4)])
        #expect(try s.pause(id(3)) == [])
        #expect(try s.resume(id(4)) == [])
    }

    @Test func removeOfEachKind() throws {
        var s = scheduling(.init(maxActive: 1))
        for n in 1...3 { _ = s.add(id(n), want: .init(), paused: n == 3, position: nil) }
        let r1 = try s.remove(id(1))
        #expect(stops(r1) == [id(1)])
        #expect(r1.contains(.status(id(1), .removed)))
        #expect(try s.remove(id(3)) == [.status(id(3), .removed)])
        #expect(s.history == [id(1), id(3)])
        // Removed while stopping: the end of its download does not make it complete.
        let end = s.downloadEnded(id(1), .completed)
        #expect(!end.contains(.status(id(1), .complete)))
        #expect(starts(end).keys.sorted() == [id(2)])
        #expect(s.entry(id(1))?.status == .removed)
        #expect(throws: QueueError.self) { try s.remove(id(1)) }
        #expect(throws: QueueError.self) { try s.pause(id(1)) }
        #expect(throws: QueueError.self) { try s.resume(id(3)) }
        #expect(throws: QueueError.self) { try s.remove(id(99)) }
    }

    @Test func pauseThenResumeWhileStoppingWaitsForTheEnd() throws {
        var s = scheduling(.init(maxActive: 2))
        _ = s.add(id(1), want: .init(), paused: false, position: nil)
        _ = try s.pause(id(1))
        // Resumed before its download has ended: it must not start a second download beside it.
        #expect(starts(try s.resume(id(1))).isEmpty)
        #expect(s.entry(id(1))?.status == .waiting)
        #expect(starts(s.downloadEnded(id(1), .interrupted)).keys.sorted() == [id(1)])
        #expect(s.entry(id(1))?.status == .active)
    }

    @Test func finishedWhilePausingIsComplete() throws {
        var s = scheduling(.init(maxActive: 1))
        _ = s.add(id(1), want: .init(), paused: false, position: nil)
        _ = try s.pause(id(1))
        #expect(s.downloadEnded(id(1), .completed).first == .status(id(1), .complete))
        #expect(s.queue.isEmpty && s.history == [id(1)])
        // Removed while stopping stays removed even when the download got to the end.
        _ = s.add(id(2), want: .init(), paused: false, position: nil)
        _ = try s.remove(id(2))
        #expect(s.downloadEnded(id(2), .completed) == [])
        #expect(s.entry(id(2))?.status == .removed)
        // A failure while pausing is the stop itself: still paused, and resume retries.
        _ = s.add(id(3), want: .init(), paused: false, position: nil)
        _ = try s.pause(id(3))
        #expect(s.downloadEnded(id(3), .failed) == [])
        #expect(s.entry(id(3))?.status == .paused)
    }

    @Test func shutdownKeepsActiveTasksActive() {
        var s = scheduling(.init(maxActive: 2))
        _ = s.add(id(1), want: .init(), paused: false, position: nil)
        _ = s.add(id(2), want: .init(), paused: false, position: nil)
        #expect(Set(stops(s.shutdown())) == [id(1), id(2)])
        #expect(s.downloadEnded(id(1), .interrupted) == [])
        #expect(s.entry(id(1))?.status == .active)
        // A download that completes during shutdown is still recorded as complete.
        #expect(s.downloadEnded(id(2), .completed) == [.status(id(2), .complete)])
        #expect(s.running.isEmpty)
    }

    @Test func failureGoesToHistoryAsError() {
        var s = scheduling(.init())
        _ = s.add(id(1), want: .init(), paused: false, position: nil)
        #expect(s.downloadEnded(id(1), .failed) == [.status(id(1), .error)])
        #expect(s.history == [id(1)])
        #expect(s.stoppedTotal == 1)
        // An end reported twice, or for a task that is not running, changes nothing.
        #expect(s.downloadEnded(id(1), .completed) == [])
    }

    @Test func unexpectedInterruptionRequeuesAtTheFront() {
        var s = scheduling(.init(maxActive: 1))
        _ = s.add(id(1), want: .init(), paused: false, position: nil)
        _ = s.add(id(2), want: .init(), paused: false, position: nil)
        let a = s.downloadEnded(id(1), .interrupted)
        #expect(a.first == .status(id(1), .waiting))
        #expect(starts(a).keys.sorted() == [id(1)])
    }

    @Test func removeResultAndPurge() throws {
        var s = scheduling(.init(maxActive: 1))
        for n in 1...3 { _ = s.add(id(n), want: .init(), paused: false, position: nil) }
        #expect(throws: QueueError.self) { try s.removeResult(id(1)) }
        _ = s.downloadEnded(id(1), .completed)
        _ = try s.remove(id(3))
        try s.removeResult(id(1))
        #expect(s.entry(id(1)) == nil)
        #expect(s.history == [id(3)])
        _ = try s.remove(id(2))
        // Task 2 is still stopping: purge keeps it until its download has ended.
        #expect(s.purgeResults() == [id(3)])
        _ = s.downloadEnded(id(2), .interrupted)
        #expect(s.purgeResults() == [id(2)])
        #expect(s.history.isEmpty && s.tasks.isEmpty)
        #expect(s.stoppedTotal == 3)
    }

    @Test func changePositionAllOrigins() throws {
        var s = QueueState(limits: .init())
        for n in 1...5 { _ = s.add(id(n), want: .init(), paused: false, position: nil) }
        #expect(try s.changePosition(id(5), 0, .set).0 == 0)
        #expect(s.queue == [5, 1, 2, 3, 4].map(id))
        #expect(try s.changePosition(id(5), 2, .current).0 == 2)
        #expect(s.queue == [1, 2, 5, 3, 4].map(id))
        #expect(try s.changePosition(id(1), 0, .end).0 == 4)
        #expect(s.queue == [2, 5, 3, 4, 1].map(id))
        #expect(try s.changePosition(id(1), -1, .end).0 == 3)
        #expect(try s.changePosition(id(2), 99, .set).0 == 4)
        #expect(try s.changePosition(id(2), -99, .current).0 == 0)
        let (same, none) = try s.changePosition(id(2), 0, .current)
        #expect(same == 0 && none.isEmpty)
        #expect(throws: QueueError.self) { _ = try s.changePosition(id(42), 0, .set) }
        // Stored orders follow the queue.
        #expect(zip(s.queue, s.queue.dropFirst()).allSatisfy { s.entry($0)!.order < s.entry($1)!.order })
    }

    @Test func addAtAPosition() {
        var s = QueueState(limits: .init())
        for n in 1...3 { _ = s.add(id(n), want: .init(), paused: false, position: nil) }
        #expect(s.add(id(4), want: .init(), paused: false, position: 1) == [.reordered])
        #expect(s.queue == [1, 4, 2, 3].map(id))
        #expect(s.add(id(5), want: .init(), paused: false, position: 10) == [])
        #expect(s.queue.last == id(5))
    }

    @Test func loweringLimitsStopsNothingAndRaisingStartsMore() {
        var s = scheduling(.init(maxActive: 2, connectionBudget: 16, defaultConnections: 4))
        for n in 1...4 { _ = s.add(id(n), want: .init(), paused: false, position: nil) }
        #expect(s.setLimits(.init(maxActive: 1, connectionBudget: 16, defaultConnections: 4)) == [])
        #expect(s.activeOrder.count == 2)
        _ = s.downloadEnded(id(1), .completed)
        #expect(s.activeOrder == [id(2)])
        #expect(
            starts(s.setLimits(.init(maxActive: 3, connectionBudget: 16, defaultConnections: 4))).keys.sorted() == [
                id(3), id(4),
            ])
    }

    @Test func restoreRestartsActiveFirstAndKeepsOrders() {
        var s = scheduling(.init(maxActive: 2))
        for n in 1...6 { _ = s.add(id(n), want: .init(connections: Int(n)), paused: n == 5, position: nil) }
        _ = s.downloadEnded(id(1), .completed)  // 3 starts
        _ = try? s.remove(id(6))
        let stored = s.tasks.map {
            QueueState.Stored(id: $0.key, status: $0.value.status, want: $0.value.want, order: $0.value.order)
        }
        var r = QueueState(limits: .init(maxActive: 1), restoring: stored)
        #expect(r.queue == [2, 3, 4, 5].map(id))
        #expect(r.history == [id(1), id(6)])
        let a = r.startScheduling()
        // Only one slot now: 2 starts, 3 is stored as waiting again.
        #expect(starts(a).keys.sorted() == [id(2)])
        #expect(a.contains(.status(id(3), .waiting)))
        #expect(r.entry(id(4))?.want.connections == 4)
        #expect(r.entry(id(5))?.status == .paused)
    }
}

/// Random walks over every event, checking the invariants after each step.
@Suite struct QueueStateWalkTests {
    struct Rng {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 33
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(1, n))) }
    }

    /// `limitsChanged`: the limits changed while some task now running was running (its grant was
    /// made under the old ones); `maxActiveLowered`: `maxActive` went down since then.
    static func checkInvariants(_ s: QueueState, limitsChanged: Bool, maxActiveLowered: Bool) -> [String] {
        var problems: [String] = []
        let budget = s.limits.connectionBudget
        if !limitsChanged, s.grantedConnections > max(budget, s.running.count) {
            problems.append("own connections \(s.grantedConnections) > max(budget \(budget), running \(s.running.count))")
        }
        if !maxActiveLowered, s.running.count > s.limits.maxActive {
            problems.append("running \(s.running.count) > maxActive \(s.limits.maxActive)")
        }
        for id in s.running {
            guard let g = s.entry(id)?.running else { continue }
            if g.connections < 1 || g.withLoans < g.connections { problems.append("\(id) granted \(g)") }
        }
        var seen = Set<TaskID>()
        for id in s.queue {
            if !(s.entry(id)?.status.isQueued ?? false) {
                problems.append("\(id) in queue with status \(String(describing: s.entry(id)?.status))")
            }
            if !seen.insert(id).inserted { problems.append("\(id) twice") }
        }
        for id in s.activeOrder {
            if s.entry(id)?.status != .active || s.entry(id)?.running == nil {
                problems.append("\(id) active but not running")
            }
            if !seen.insert(id).inserted { problems.append("\(id) twice") }
        }
        for id in s.history {
            if !(s.entry(id)?.status.isStopped ?? false) { problems.append("\(id) in history not stopped") }
            if !seen.insert(id).inserted { problems.append("\(id) twice") }
        }
        if seen != Set(s.tasks.keys) { problems.append("lists and tasks disagree") }
        for (a, b) in zip(s.queue, s.queue.dropFirst()) where s.entry(a)!.order >= s.entry(b)!.order {
            problems.append("queue order keys not increasing at \(a), \(b)")
        }
        for (a, b) in zip(s.history, s.history.dropFirst()) where s.entry(a)!.order >= s.entry(b)!.order {
            problems.append("history order keys not increasing")
        }
        // Liveness: a waiting task never sits idle while a slot is free, whatever the limits did.
        if s.scheduling, s.queue.contains(where: { s.entry($0)?.status == .waiting && s.entry($0)?.running == nil }),
            s.running.count < s.limits.maxActive
        {
            problems.append("a task waits although a slot is free")
        }
        return problems
    }

    @Test(arguments: 0..<40)
    func randomWalk(seed: Int) {
        var rng = Rng(state: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        var limits = QueueState.Limits(
            maxActive: 1 + rng.below(4), connectionBudget: 1 + rng.below(20), defaultConnections: 1 + rng.below(8))
        var s = QueueState(limits: limits)
        var nextID: UInt64 = 1
        var lowered = false
        for step in 0..<400 {
            let ids = Array(s.tasks.keys)
            let pick = ids.isEmpty ? TaskID(999_999) : ids[rng.below(ids.count)]
            var runningBefore = Set(s.running)
            var actions: [QueueState.Action] = []
            switch rng.below(13) {
            case 0, 1:
                actions += s.add(
                    TaskID(nextID),
                    want: .init(
                        connections: rng.below(3) == 0 ? nil : 1 + rng.below(10),
                        maxSpeed: rng.below(3) == 0 ? Int64(100 + rng.below(5000)) : nil,
                        perServer: rng.below(4) == 0 ? 1 + rng.below(4) : nil),
                    paused: rng.below(5) == 0, position: rng.below(3) == 0 ? rng.below(6) : nil)
                nextID += 1
            case 2: actions += (try? s.pause(pick)) ?? []
            case 3: actions += (try? s.resume(pick)) ?? []
            case 4: actions += (try? s.remove(pick)) ?? []
            case 5, 6:
                let running = s.running
                if !running.isEmpty {
                    let endings: [QueueState.Ending] = [.completed, .failed, .interrupted]
                    let ending = running[rng.below(running.count)]
                    // Its download has ended, so it may start again in this same step.
                    runningBefore.remove(ending)
                    actions += s.downloadEnded(ending, endings[rng.below(3)])
                }
            case 7:
                actions +=
                    (try? s.changePosition(pick, rng.below(7) - 3, [.set, .current, .end][rng.below(3)]))?.1 ?? []
            case 8: try? s.removeResult(pick)
            case 9: if rng.below(4) == 0 { _ = s.purgeResults() }
            case 10:
                if rng.below(4) == 0 {
                    let new = QueueState.Limits(
                        maxActive: 1 + rng.below(4), connectionBudget: 1 + rng.below(20),
                        defaultConnections: limits.defaultConnections)
                    if new.maxActive < limits.maxActive && !s.running.isEmpty { lowered = true }
                    limits = new
                    actions += s.setLimits(new)
                }
            case 11: if !s.scheduling && rng.below(3) == 0 { actions += s.startScheduling() }
            default:
                if rng.below(10) == 0 { actions += s.pauseAll() } else if rng.below(5) == 0 { actions += s.resumeAll() }
            }
            // Once nothing granted under the old limits is running, the invariants hold again.
            if s.running.isEmpty { lowered = false }
            // Shares granted under other limits come down with them: only a lower maxActive (tasks
            // running beyond it) lets the own connections pass the budget.
            var problems = Self.checkInvariants(s, limitsChanged: lowered, maxActiveLowered: lowered)
            for case .shrink(let shrunk, let count) in actions where count != s.limits.ownShare || s.entry(shrunk)?.running?.connections != count {
                problems.append("\(shrunk) shrunk to \(count), its share \(s.limits.ownShare)")
            }
            // Every grant as the rule makes it at that moment: what the task asks for (within its
            // per-server cap), the budget's share of a slot and what the running tasks' own leave,
            // at least one; loans up to what it asks for.
            var granted = s.grantedConnections
            for case .start(_, let g) in actions { granted -= g.connections }
            for case .start(let started, let g) in actions {
                guard let want = s.entry(started)?.want else { continue }
                let asks = want.connections(default: s.limits.defaultConnections)
                let own = max(1, min(asks, s.limits.ownShare, s.limits.connectionBudget - granted))
                if g.connections != own || g.withLoans != asks {
                    problems.append("\(started) granted \(g.connections)/\(g.withLoans), the rule gives \(own)/\(asks)")
                }
                granted += g.connections
            }
            for case .start(let started, _) in actions where runningBefore.contains(started) {
                problems.append("\(started) started while its download was still running")
            }
            #expect(problems.isEmpty, "seed \(seed) step \(step): \(problems)")
            if !problems.isEmpty { return }
        }
        // A restore from the stored fields reproduces the lists.
        let stored = s.tasks.map {
            QueueState.Stored(id: $0.key, status: $0.value.status, want: $0.value.want, order: $0.value.order)
        }
        let r = QueueState(limits: limits, restoring: stored)
        let wasActive = s.activeOrder
        #expect(r.queue == wasActive + s.queue, "seed \(seed)")
        #expect(r.history == s.history, "seed \(seed)")
    }
}
