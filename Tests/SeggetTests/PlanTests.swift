import Testing
@testable import Segget

@Suite struct ChunkPlanTests {
    @Test func geometry() {
        let p = ChunkPlan(totalLength: 10 * 1024 + 1, chunkSize: 1024)
        #expect(p.chunkCount == 11)
        #expect(p.byteRange(ofChunk: 0) == 0..<1024)
        #expect(p.byteRange(ofChunk: 10) == 10240..<10241)
        #expect(p.byteRange(ofChunks: 2..<4) == 2048..<4096)
        #expect(p.byteRanges { [0, 2, 3].contains($0) } == [0..<1024, 2048..<4096])
        #expect(p.chunk(containing: 1023) == 0)
        #expect(p.chunk(containing: 1024) == 1)
        #expect(ChunkPlan(totalLength: 0, chunkSize: 1024).chunkCount == 0)
        #expect(ChunkPlan(totalLength: 1024, chunkSize: 1024).chunkCount == 1)
        #expect(ChunkPlan(totalLength: 1023, chunkSize: 1024).chunkCount == 1)
        // A server's length near Int64.max: counted without overflow (it trapped).
        #expect(ChunkPlan(totalLength: Int64.max, chunkSize: 1 << 20).chunkCount == 1 << 43)
        #expect(ChunkPlan(totalLength: Int64.max - 1, chunkSize: 16 << 10).chunkCount == 1 << 49)
        // Bytes of chosen chunks (the short last one counts its own length), and of written parts.
        #expect(p.bytes(ofChunksWhere: { $0 == 0 || $0 == 10 }) == 1025)
        #expect(p.bytes(ofChunksWhere: { _ in true }) == p.totalLength)
        #expect(p.bytes(ofChunksWhere: { _ in false }) == 0)
        #expect(p.bytes(upTo: [0: 100, 3: 3072 + 7]) == 107)
        #expect(p.bytes(upTo: [:]) == 0)
    }

    @Test(arguments: [1, 2, 3, 7, 8, 32, 64, 128])
    func initialRunsAreBalancedAndCoverEverything(_ n: Int) {
        for chunks in [0, 1, 5, 8, 63, 64, 65, 1000, 1024] {
            let p = ChunkPlan(totalLength: Int64(chunks) * 100, chunkSize: 100)
            let (runs, rest) = p.initialRuns(connections: n, isFinished: { _ in false })
            #expect(rest.isEmpty)
            #expect(runs.count == min(n, chunks))
            #expect(runs.flatMap { Array($0) } == Array(0..<chunks))
            if let maxRun = runs.map(\.count).max(), let minRun = runs.map(\.count).min() {
                #expect(maxRun - minRun <= 1, "runs \(runs.map(\.count)) are not balanced")
            }
        }
    }

    @Test func initialRunsSkipFinishedChunks() {
        let p = ChunkPlan(totalLength: 20 * 10, chunkSize: 10)
        let done: Set<Int> = [0, 1, 5, 6, 7, 19]
        let (runs, rest) = p.initialRuns(connections: 3, isFinished: { done.contains($0) })
        let covered = (runs + rest).flatMap { Array($0) }.sorted()
        #expect(covered == (0..<20).filter { !done.contains($0) })
        #expect(runs.allSatisfy { r in r.allSatisfy { !done.contains($0) } })
    }

    @Test func fragmentedHolesLeaveExtraPiecesFree() {
        let p = ChunkPlan(totalLength: 10 * 10, chunkSize: 10)
        let (runs, rest) = p.initialRuns(connections: 2, isFinished: { $0 % 2 == 1 })
        #expect(runs.count == 2)
        #expect(rest.count == 3)
        let (r2, _) = p.initialRuns(connections: 8, isFinished: { $0 >= 3 && $0 < 5 })
        // Holes of 3 and 5 chunks share 8 connections 3 + 5: one chunk each.
        #expect(r2.count == 8 && r2.allSatisfy { $0.count == 1 })
    }
}

@Suite struct SchedulerTests {
    func plan(_ chunks: Int) -> ChunkPlan { ChunkPlan(totalLength: Int64(chunks) * 10, chunkSize: 10) }

    /// A partly written chunk (from an earlier run) begins a run, held or free, in both planning
    /// modes, so that its request can skip what is already written; nothing is lost or doubled.
    @Test(arguments: [nil, 3] as [Int?])
    func partlyWrittenChunksBeginRuns(maxRunChunks: Int?) {
        let starts: Set<Int> = [1, 5, 6, 13]
        let s = Scheduler(plan: plan(16), connections: 4, isFinished: { $0 == 0 }, maxRunChunks: maxRunChunks, runStarts: starts)
        let all = Array(s.runs.values) + s.free
        #expect(all.flatMap { Array($0) }.sorted() == Array(1..<16))
        for r in all { #expect(r.dropFirst().allSatisfy { !starts.contains($0) }, "\(r) holds a partial chunk past its start") }
        #expect(s.runs.count == 4)
        let unsplit = Scheduler(plan: plan(16), connections: 4, isFinished: { $0 == 0 }, maxRunChunks: maxRunChunks)
        #expect(unsplit.runs.values.contains { r in r.dropFirst().contains { starts.contains($0) } }, "the test needs runs that do get cut")
    }

    @Test func stealsUpperHalfOfLargestRemainder() {
        var s = Scheduler(plan: plan(16), connections: 2)
        #expect(s.run(of: 0) == 0..<8)
        #expect(s.run(of: 1) == 8..<16)
        // Worker 0 finishes its run.
        for k in 0..<8 { #expect(s.chunkFinished(k, by: 0).isEmpty) }
        #expect(s.run(of: 0) == nil)
        // Worker 1 is on chunk 8; 9..<16 (7 chunks) are not started: the thief takes the upper 4.
        let a = s.nextAssignment(for: 0)
        #expect(a == .stolen(12..<16, victim: 1, victimNewEnd: 12))
        #expect(s.run(of: 1) == 8..<12)
    }

    /// Several idle workers in one round split the victim's not-started chunks into equal shares
    /// instead of halving them again and again.
    @Test func thievesInOneRoundTakeEqualShares() {
        var s = Scheduler(plan: plan(40), connections: 4)
        #expect(s.run(of: 3) == 30..<40)
        for w in 0..<3 {
            for k in (w * 10)..<(w * 10 + 10) { _ = s.chunkFinished(k, by: w) }
        }
        // Worker 3 is on chunk 30; 31..<40 (9 chunks) are not started; three thieves ask in turn.
        #expect(s.nextAssignment(for: 0, thieves: 3) == .stolen(37..<40, victim: 3, victimNewEnd: 37))
        #expect(s.nextAssignment(for: 1, thieves: 2) == .stolen(35..<37, victim: 3, victimNewEnd: 35))
        #expect(s.nextAssignment(for: 2, thieves: 1) == .stolen(33..<35, victim: 3, victimNewEnd: 33))
        // The victim keeps its in-flight chunk and two more: 3 chunks; the thieves 3, 2 and 2.
        #expect(s.run(of: 3) == 30..<33)
    }

    @Test func fairShareFillsIdleHelpersEqually() {
        // k free helpers split n chunks: ceil(n / k) for the first.
        for n in 1...40 {
            for k in 1...9 {
                let take = Scheduler.fairShare(notStarted: n, chunkSeconds: 0.5, busy: Array(repeating: 0, count: k))
                #expect(take == (n + k - 1) / k, "n \(n) k \(k)")
            }
        }
        #expect(Scheduler.fairShare(notStarted: 0, chunkSeconds: 1, busy: [0]) == 0)
    }

    @Test func fairShareCountsHelpersAboutToFinish() {
        // 16 chunks of 1 s; the thief is free, the victim needs 1 s for its in-flight chunk, six others
        // finish in 1 s: the level is (16 + 7) / 8 ≈ 2.9 s, so the thief takes 3 chunks, not 8.
        #expect(Scheduler.fairShare(notStarted: 16, chunkSeconds: 1, busy: [0, 1, 1, 1, 1, 1, 1, 1]) == 3)
        // Helpers busy past the level do not count: with others busy for 100 s it is thief and victim.
        #expect(Scheduler.fairShare(notStarted: 16, chunkSeconds: 1, busy: [0, 0, 100, 100]) == 8)
        // The victim is far behind its in-flight chunk: the thief takes everything.
        #expect(Scheduler.fairShare(notStarted: 4, chunkSeconds: 1, busy: [0, 50]) == 4)
        // At least one chunk, even if the level is tiny.
        #expect(Scheduler.fairShare(notStarted: 4, chunkSeconds: 10, busy: [0, 0, 0, 0, 0, 0, 0, 0, 0]) == 1)
    }

    @Test func fairShareLeavesEveryHelperAtTheSameLevel() {
        // Whatever the busy times, pouring the thief's share on top of 0 and the rest over the others
        // never leaves anyone who got work finishing more than one chunk apart from the thief.
        var rng = FuzzRandom(seed: 17)
        for _ in 0..<2000 {
            let n = Int.random(in: 1...200, using: &rng)
            let c = Double.random(in: 0.01...2, using: &rng)
            let busy = [0.0] + (0..<Int.random(in: 0...12, using: &rng)).map { _ in Double.random(in: 0...20, using: &rng) }
            let take = Scheduler.fairShare(notStarted: n, chunkSeconds: c, busy: busy)
            #expect(take >= 1 && take <= n)
            // Level implied by the thief's share; the others can absorb the rest below it.
            let level = Double(take) * c
            let absorbed = busy.dropFirst().reduce(0.0) { $0 + max(0, level - $1) }
            #expect(Double(n - take) * c <= absorbed + 1e-6, "rest \(n - take) chunks do not fit under \(level)")
            // And one chunk less would not have been enough.
            if take > 1 {
                let lower = Double(take - 1) * c
                let room = busy.dropFirst().reduce(0.0) { $0 + max(0, lower - $1) }
                #expect(Double(n - take + 1) * c > room - 1e-6)
            }
        }
    }

    /// 80 chunks over 8 workers (worker w holds w*10..<w*10+10). Workers 0…6 finish their first
    /// `done` chunks; worker 0 always finishes all 10, so it is idle. Worker 7 is on chunk 70.
    private func eightWorkers(othersFinish done: Int) -> Scheduler {
        var s = Scheduler(plan: plan(80), connections: 8)
        for k in 0..<10 { _ = s.chunkFinished(k, by: 0) }
        for w in 1..<7 {
            for k in (w * 10)..<(w * 10 + done) { _ = s.chunkFinished(k, by: w) }
        }
        return s
    }

    @Test func stealSizedByWhenOthersFinish() {
        // Worker 7 has 0.5 s left on chunk 70, 71..<80 not started, a chunk takes 1 s. Nobody else
        // holds a run: thief and victim split the 9 chunks at the level (9 + 0.5) / 2.
        var t = eightWorkers(othersFinish: 10)
        let a = t.nextAssignment(for: 0, allowDuplicates: false, remainingSeconds: { _ in 0.5 },
            thieves: 1, chunkSeconds: 1, runSeconds: { $0 == 7 ? nil : 1 })
        #expect(a == .stolen(75..<80, victim: 7, victimNewEnd: 75))

        // Now workers 1…6 are each on their last chunk, which ends in 1 s: they will be free long
        // before the victim, so the thief leaves room for them. Levels 0, 0.5 and six times 1: the
        // common level is (9 + 6.5) / 8 ≈ 1.94 s, so the thief takes 2 chunks where halving took 5.
        var u = eightWorkers(othersFinish: 9)
        let b = u.nextAssignment(for: 0, allowDuplicates: false, remainingSeconds: { _ in 0.5 },
            thieves: 1, chunkSeconds: 1, runSeconds: { $0 == 7 ? nil : 1 })
        #expect(b == .stolen(78..<80, victim: 7, victimNewEnd: 78))

        // Without a typical rate (no chunkSeconds) it is thief and victim, half each.
        var v = eightWorkers(othersFinish: 9)
        #expect(v.nextAssignment(for: 0, allowDuplicates: false, runSeconds: { _ in 1 }) == .stolen(75..<80, victim: 7, victimNewEnd: 75))
    }

    @Test func connectionStartsAreSpreadOverATenthOfASecond() {
        #expect(Coordinator.rampStep(connections: 1) == 0)
        #expect(Coordinator.rampStep(connections: 2) == 0.015)
        #expect(Coordinator.rampStep(connections: 8) == 0.0125)
        for n in 2...256 {
            let step = Coordinator.rampStep(connections: n)
            #expect(step > 0 && step <= 0.015)
            #expect(Double(n - 1) * step < 0.1 + 1e-9)
        }
    }

    @Test func connectionsStartTogetherOnALongPath() {
        // A probe whose first answer crossed a WAN: no stagger, whatever the count.
        for n in [2, 8, 64] {
            #expect(Coordinator.rampStep(connections: n, firstAnswer: 0.16) == 0)
            #expect(Coordinator.rampStep(connections: n, firstAnswer: Coordinator.longPathFirstAnswer) == 0)
        }
        // On loopback (1-3 ms), or not measured: the stagger as before.
        #expect(Coordinator.rampStep(connections: 8, firstAnswer: 0.002) == 0.0125)
        #expect(Coordinator.rampStep(connections: 8, firstAnswer: nil) == 0.0125)
    }

    @Test func declinedStealLeavesVictimAlone() {
        var s = Scheduler(plan: plan(16), connections: 2)
        for k in 0..<8 { _ = s.chunkFinished(k, by: 0) }
        #expect(s.nextAssignment(for: 0, allowDuplicates: false, worthStealing: { _, _ in false }) == nil)
        #expect(s.run(of: 1) == 8..<16)
    }

    @Test func idleWorkerPrefersFreeWork() {
        var s = Scheduler(plan: plan(10), connections: 1)
        s.releaseNotStarted(of: 0)
        #expect(s.run(of: 0) == 0..<1)
        #expect(s.free == [1..<10])
        #expect(s.nextAssignment(for: 1) == .run(1..<10))
    }

    /// Work a slow connection gave back is spread over the idle workers of one round, not handed
    /// whole to the first of them while the others wait.
    @Test func freeRunIsSharedByTheIdleWorkersOfARound() {
        var s = Scheduler(plan: plan(10), connections: 1)
        s.releaseNotStarted(of: 0)
        #expect(s.nextAssignment(for: 1, thieves: 3) == .run(1..<4))
        #expect(s.nextAssignment(for: 2, thieves: 2) == .run(4..<7))
        #expect(s.nextAssignment(for: 3, thieves: 1) == .run(7..<10))
        #expect(s.free.isEmpty)
        // More idle workers than chunks: one chunk each, the rest get nothing to share.
        var t = Scheduler(plan: plan(3), connections: 1)
        t.releaseNotStarted(of: 0)
        #expect(t.nextAssignment(for: 1, allowDuplicates: false, thieves: 5) == .run(1..<2))
        #expect(t.nextAssignment(for: 2, allowDuplicates: false, thieves: 4) == .run(2..<3))
        #expect(t.nextAssignment(for: 3, allowDuplicates: false, thieves: 3) == nil)
    }

    @Test func endGameDuplicatesSlowestAndCancelsLoser() {
        var s = Scheduler(plan: plan(2), connections: 2)
        _ = s.chunkFinished(0, by: 0)
        // Worker 0 is idle, worker 1 holds only its in-flight chunk 1: nothing to steal.
        #expect(s.nextAssignment(for: 0, allowDuplicates: false) == nil)
        #expect(s.nextAssignment(for: 0, remainingSeconds: { _ in 5 }) == .duplicate(chunk: 1, owner: 1))
        // Only one duplicate per chunk.
        #expect(s.nextAssignment(for: 2) == nil)
        // The duplicate wins: the owner must stop.
        #expect(s.chunkFinished(1, by: 0) == [1])
        #expect(s.isComplete)
        #expect(s.run(of: 1) == nil)
        #expect(s.duplicates.isEmpty)
    }

    /// An owner `mayRace` rules out (one in TCP's slow start on a long path) is not raced, however
    /// late it looks; the slowest of the others is.
    @Test func anOwnerThatMayNotBeRacedIsLeftAlone() {
        var s = Scheduler(plan: plan(3), connections: 3)
        _ = s.chunkFinished(0, by: 0)
        #expect(s.nextAssignment(for: 0, remainingSeconds: { $0 == 1 ? 9 : 5 }, mayRace: { $0 != 1 }) == .duplicate(chunk: 2, owner: 2))
        var t = Scheduler(plan: plan(2), connections: 2)
        _ = t.chunkFinished(0, by: 0)
        #expect(t.nextAssignment(for: 0, remainingSeconds: { _ in 9 }, mayRace: { _ in false }) == nil)
    }

    /// A racer that is slow too (the server slows some requests, and the racer drew one) does not
    /// leave the chunk stuck: another idle worker may race it, up to `maxRacers`.
    @Test func aSlowRacerGetsCompanyUpToTheLimit() {
        var s = Scheduler(plan: plan(1), connections: 1)
        #expect(s.nextAssignment(for: 1, remainingSeconds: { _ in 9 }, minRemainingSeconds: 0.5, maxRacers: 2) == .duplicate(chunk: 0, owner: 0))
        // The first racer is fast: no second one.
        #expect(s.nextAssignment(for: 2, remainingSeconds: { $0 == 1 ? 0.1 : 9 }, minRemainingSeconds: 0.5, maxRacers: 2) == nil)
        // Slow as well: a second racer, but never a third.
        #expect(s.nextAssignment(for: 2, remainingSeconds: { _ in 9 }, minRemainingSeconds: 0.5, maxRacers: 2) == .duplicate(chunk: 0, owner: 0))
        #expect(s.nextAssignment(for: 3, remainingSeconds: { _ in 9 }, minRemainingSeconds: 0.5, maxRacers: 2) == nil)
        // Whoever wins, the other two are cancelled.
        #expect(s.chunkFinished(0, by: 2) == [0, 1])
        #expect(s.isComplete && s.duplicates.isEmpty)
    }

    @Test func racesOnlyChunksExpectedToTakeAWhile() {
        var s = Scheduler(plan: plan(1), connections: 1)
        // The only chunk is expected to finish in 0.1 s: a second connection would only waste bandwidth.
        #expect(s.nextAssignment(for: 1, remainingSeconds: { _ in 0.1 }, minRemainingSeconds: 0.5) == nil)
        #expect(s.duplicates.isEmpty)
        #expect(s.nextAssignment(for: 1, remainingSeconds: { _ in 2 }, minRemainingSeconds: 0.5) == .duplicate(chunk: 0, owner: 0))
    }

    @Test func inOrderModeHandsOutBoundedRunsFrontToBack() {
        var s = Scheduler(plan: plan(40), connections: 2, maxRunChunks: 8)
        #expect(s.run(of: 0) == 0..<8)
        #expect(s.run(of: 1) == 8..<16)
        for k in 0..<8 { _ = s.chunkFinished(k, by: 0) }
        // The lowest free run, not the largest.
        #expect(s.nextAssignment(for: 0) == .run(16..<24))
        let resumed = Scheduler(plan: plan(10), connections: 4, isFinished: { $0 < 3 }, maxRunChunks: 4)
        #expect(resumed.run(of: 0) == 3..<7)
        #expect(resumed.run(of: 1) == 7..<10)
    }

    @Test func ownerWinningCancelsDuplicate() {
        var s = Scheduler(plan: plan(1), connections: 1)
        #expect(s.nextAssignment(for: 1) == .duplicate(chunk: 0, owner: 0))
        #expect(s.chunkFinished(0, by: 0) == [1])
        #expect(s.isComplete)
    }

    @Test func abandonReturnsUnfinishedWork() {
        var s = Scheduler(plan: plan(6), connections: 1)
        _ = s.chunkFinished(0, by: 0)
        s.abandon(0)
        #expect(s.free == [1..<6])
        #expect(s.nextAssignment(for: 3) == .run(1..<6))
    }

    @Test func handOverMovesAWholeRunAndDropsTheTakersDuplicate() {
        var s = Scheduler(plan: plan(8), connections: 2)
        #expect(s.run(of: 0) == 0..<4 && s.run(of: 1) == 4..<8)
        _ = s.chunkFinished(0, by: 0); _ = s.chunkFinished(1, by: 0); _ = s.chunkFinished(2, by: 0); _ = s.chunkFinished(3, by: 0)
        #expect(s.handOver(from: 1, to: 1) == nil)
        #expect(s.handOver(from: 1, to: 0) == 4..<8)
        #expect(s.run(of: 1) == nil && s.run(of: 0) == 4..<8 && s.duplicates.isEmpty)
        #expect(s.handOver(from: 1, to: 0) == nil)
        checkInvariants(s)
    }

    @Test func resumeStartsOnlyUnfinished() {
        let s = Scheduler(plan: plan(8), connections: 4, isFinished: { $0 < 4 })
        #expect(s.finishedCount == 4)
        #expect(s.runs.values.flatMap { Array($0) }.sorted() == [4, 5, 6, 7])
    }

    /// Random interleavings of finishing, stealing, releasing, abandoning and racing keep the
    /// invariants: no chunk is held by two owners, every unfinished chunk is owned or free, and the
    /// download always completes.
    @Test func randomSchedulesAlwaysComplete() {
        var rng = SplitMix(seed: 7)
        for trial in 0..<400 {
            let chunks = Int(rng.next() % 200)
            let workers = 1 + Int(rng.next() % 12)
            var s = Scheduler(plan: plan(chunks), connections: workers)
            var steps = 0
            while !s.isComplete {
                steps += 1
                #expect(steps < 100_000, "trial \(trial) does not terminate")
                if steps >= 100_000 { return }
                let w = Int(rng.next() % UInt64(workers))
                if s.run(of: w) == nil && s.duplicates[w] == nil {
                    _ = s.nextAssignment(for: w, remainingSeconds: { Double($0) })
                    continue
                }
                switch rng.next() % 11 {
                case 10:
                    // An idle connection relieves `w` of its run.
                    if let idle = (0..<workers).first(where: { s.run(of: $0) == nil && s.duplicates[$0] == nil }) {
                        _ = s.handOver(from: w, to: idle)
                    }
                case 0:
                    s.releaseNotStarted(of: w)
                case 1:
                    s.abandon(w)
                default:
                    let k = s.duplicates[w] ?? s.run(of: w)!.lowerBound
                    let losers = s.chunkFinished(k, by: w)
                    for l in losers {
                        #expect(s.run(of: l) == nil && s.duplicates[l] == nil)
                    }
                }
                checkInvariants(s)
            }
            #expect(s.finished.allSatisfy { $0 })
        }
    }

    func checkInvariants(_ s: Scheduler) {
        var owner = [Int](repeating: 0, count: s.plan.chunkCount)
        for r in s.runs.values { for k in r { owner[k] += 1 } }
        for r in s.free { for k in r { owner[k] += 1 } }
        for k in 0..<s.plan.chunkCount where !s.finished[k] {
            #expect(owner[k] == 1, "chunk \(k) has \(owner[k]) owners")
        }
        for r in s.runs.values { #expect(!r.isEmpty && !s.finished[r.lowerBound]) }
        for (_, k) in s.duplicates { #expect(!s.finished[k]) }
    }
}

@Suite struct SlowConnectionRuleTests {
    typealias Observation = SlowConnectionRule.Observation
    static let mib: Int64 = 1 << 20

    /// Half a second at `mibPerSecond`, with `held` seconds of it held back by segget.
    static func seen(_ id: Int, _ mibPerSecond: Double, held: Double = 0, left: Int64 = 8 << 20, redials: Int = 0) -> Observation {
        Observation(id: id, bytes: Int64(mibPerSecond * 0.5 * Double(mib)), seconds: 0.5, heldSeconds: held, remainingBytes: left, consecutiveRedials: redials)
    }

    /// Where every answer so far is slow (a server at 100 KiB/s a connection), a re-dial looks for
    /// a faster answer now and then, and says so: it is not slower than the others (the message once
    /// read "99.9 KiB/s against a median of 99.9 KiB/s").
    @Test func aRedialWhereEveryAnswerIsSlowIsAnExploration() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        let slow = 100.0 / 1024
        var verdicts: [SlowConnectionRule.Verdict] = []
        var t = 0.0
        while t < 5, verdicts.isEmpty {
            verdicts = rule.judge((0..<4).map { Self.seen($0, slow, left: 4 << 20) }, now: t)
            t += 0.1
        }
        #expect(verdicts.count == 1)
        #expect(verdicts.first?.action == .redial && verdicts.first?.exploring == true)
        let fast = rule.judge([Self.seen(0, 16), Self.seen(1, 16), Self.seen(2, 15), Self.seen(3, 2)], now: t + 10)
        #expect(fast.allSatisfy { !$0.exploring })
    }

    @Test func aConnectionFarBelowTheMedianIsRedialled() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        let v = rule.judge([Self.seen(0, 16), Self.seen(1, 16), Self.seen(2, 15), Self.seen(3, 2)], now: 0)
        #expect(v.map(\.id) == [3])
        #expect(v.first?.action == .redial)
        #expect(v.first?.exploring == false)
        #expect(rule.typical == Double(16 << 20))
        #expect(rule.totalRedials == 1)
        // 0.4 of the median is the line; a connection at half of it is left alone.
        #expect(rule.judge([Self.seen(0, 16), Self.seen(1, 16), Self.seen(2, 8)], now: 0).isEmpty)
    }

    /// At the end of a download the connections still receiving are the slow ones: they are judged
    /// against the rates their peers had before running out of work, not against each other.
    @Test func theTailIsJudgedAgainstPeersThatJustFinished() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        // Before any typical rate, one measurement is enough: two connections, one of them trickling,
        // never measure a third (the download hung: simulator, trickle-every-kth).
        var two = SlowConnectionRule(maxTotalRedials: 24)
        #expect(two.judge([Self.seen(0, 16), Self.seen(1, 0.001)], now: 0).map(\.id) == [1])
        _ = rule.judge([Self.seen(0, 16), Self.seen(1, 16), Self.seen(2, 16), Self.seen(3, 16)], now: 1)
        // Three trickling connections left (an owner and two racers), 0-3 idle since.
        let tail = [Self.seen(4, 0.000001), Self.seen(5, 0.000002), Self.seen(6, 0.000001)]
        let v = rule.judge(tail, now: 2)
        #expect(v.map(\.id) == [4, 5, 6])
        #expect(v.allSatisfy { $0.action == .redial })
        // Long after the others finished (past `memory`), the last typical rate still stands.
        #expect(rule.judge(tail.prefix(2).map { $0 }, now: 30).map(\.id) == [4, 5])
        // But three fresh measurements replace it: if everything is that slow now, nothing is slow.
        #expect(rule.judge(tail, now: 31).isEmpty)
    }

    /// A connection once judged slow that then finished quick requests (each too short to judge)
    /// must not keep dragging the typical rate down.
    @Test func finishedRequestsRefreshAConnectionsRate() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        _ = rule.judge([Self.seen(0, 8), Self.seen(1, 0.001), Self.seen(2, 0.001), Self.seen(3, 0.001)], now: 0)
        #expect((rule.typical ?? 0) < Double(1 << 20))
        for id in 1...3 { rule.recordFinished(id: id, bytes: 1 << 20, seconds: 0.13, now: 1) }
        // A request of a few bytes over a moment says nothing.
        rule.recordFinished(id: 0, bytes: 10, seconds: 0.001, now: 1)
        let v = rule.judge([Self.seen(4, 0.001)], now: 2)
        #expect((rule.typical ?? 0) > Double(7 << 20))
        #expect(v.map(\.id) == [4])
    }

    /// Issue 13: connections held back by segget (the loop waiting for the writer, or --max-speed)
    /// must not look slow. A short hold is left out of the connection's own rate.
    @Test func aShortHoldIsLeftOutOfTheRate() {
        // 1.55 MiB in 0.5 s is 3.1 MiB/s, below 0.4 of the typical 8; but 0.04 s of it were held, and
        // over the 0.46 s free it is 3.4 MiB/s.
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        let peers = [Self.seen(0, 8), Self.seen(1, 8), Self.seen(2, 8)]
        #expect(rule.judge(peers + [Self.seen(3, 3.1, held: 0.04)], now: 0).isEmpty)
        var plain = SlowConnectionRule(maxTotalRedials: 24)
        #expect(plain.judge(peers + [Self.seen(3, 3.1)], now: 0).map(\.id) == [3])
    }

    /// A longer hold stops all judging for two windows, and what was measured meanwhile (a paced
    /// server catching up after the hold) is not remembered as typical.
    @Test func aLongHoldSuspendsJudging() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        let peers = [Self.seen(0, 8), Self.seen(1, 8), Self.seen(2, 8)]
        _ = rule.judge(peers, now: 0)
        #expect(rule.typical == Double(8 << 20))
        // The writer held the loop for 0.3 s; connection 3 got little even over its free time.
        #expect(rule.judge(peers.map { var o = $0; o.heldSeconds = 0.3; return o } + [Self.seen(3, 0.1, held: 0.3)], now: 1).isEmpty)
        // Catching up right after: the others at 40 MiB/s, connection 3 at its honest 8.
        let catchUp = [Self.seen(0, 40), Self.seen(1, 40), Self.seen(2, 40), Self.seen(3, 8)]
        #expect(rule.judge(catchUp, now: 1.5).isEmpty)
        rule.recordFinished(id: 4, bytes: 40 << 20, seconds: 1, now: 1.6)
        #expect(rule.typical == Double(8 << 20))
        // Two windows after the hold, judging resumes on fresh measurements.
        #expect(rule.judge(peers + [Self.seen(3, 0.1)], now: 2.1).map(\.id) == [3])
    }

    @Test func aConnectionHeldForMostOfTheWindowIsNotJudged() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        // All held for 0.4 of 0.5 s (the writer stalled the loop): nobody is judged, and the
        // typical rate is not learnt from such a window either.
        let stalled = (0..<4).map { Self.seen($0, $0 == 3 ? 0.01 : 8, held: 0.4) }
        #expect(rule.judge(stalled, now: 0).isEmpty)
        #expect(rule.typical == nil)
    }

    @Test func aFirstByteThatTakesFarLongerThanUsualIsSlow() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        let peers = [Self.seen(0, 8), Self.seen(1, 8), Self.seen(2, 8)]
        func waiting(_ s: Double) -> Observation {
            Observation(id: 3, bytes: 0, seconds: 0, waitingForFirstByte: s, remainingBytes: 8 << 20)
        }
        // First bytes usually take 0.01 s: at least `minJudgeSeconds` (0.08 s) of grace.
        #expect(rule.judge(peers + [waiting(0.07)], now: 0, usualFirstByteWait: 0.01).isEmpty)
        #expect(rule.judge(peers + [waiting(0.09)], now: 0, usualFirstByteWait: 0.01).map(\.id) == [3])
        // First bytes usually take 0.05 s: four times that.
        #expect(rule.judge(peers + [waiting(0.19)], now: 0, usualFirstByteWait: 0.05).isEmpty)
        #expect(rule.judge(peers + [waiting(0.21)], now: 0, usualFirstByteWait: 0.05).map(\.id) == [3])
        // A server whose first bytes take 0.5 s gets four times that.
        #expect(rule.judge(peers + [waiting(1.9)], now: 0, usualFirstByteWait: 0.5).isEmpty)
        #expect(rule.judge(peers + [waiting(2.1)], now: 0, usualFirstByteWait: 0.5).map(\.id) == [3])
    }

    /// Issue 16: a request that trickles from its start is judged on its own first moments, once a
    /// peer at the typical rate would have delivered `evidenceBytes`, not after a whole window.
    @Test func aYoungRequestThatTricklesIsJudgedAtOnce() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        let peers = [Self.seen(0, 4), Self.seen(1, 4), Self.seen(2, 4)]
        func young(_ seconds: Double, bytes: Int64) -> Observation {
            Observation(id: 3, bytes: bytes, seconds: seconds, remainingBytes: 8 << 20)
        }
        // 0.07 s is too soon, whatever arrived.
        #expect(rule.judge(peers + [young(0.07, bytes: 3)], now: 0, usualFirstByteWait: 0.01).isEmpty)
        // 0.09 s at one byte per second, where a peer would have sent 0.36 MiB: slow.
        #expect(rule.judge(peers + [young(0.09, bytes: 3)], now: 0, usualFirstByteWait: 0.01).map(\.id) == [3])
        // A young request near the typical rate is left alone.
        #expect(rule.judge(peers + [young(0.16, bytes: 600 << 10)], now: 0, usualFirstByteWait: 0.01).isEmpty)
        // On a long path (first bytes take 0.05 s) TCP is still opening its window: wait four of them
        // (from half a window on, the window's rule judges, as before).
        #expect(rule.judge(peers + [young(0.19, bytes: 3)], now: 0, usualFirstByteWait: 0.05).isEmpty)
        #expect(rule.judge(peers + [young(0.21, bytes: 3)], now: 0, usualFirstByteWait: 0.05).map(\.id) == [3])
    }

    /// Where the typical rate is low, a young request's shortfall is not yet evidence: a peer would
    /// have sent less than `evidenceBytes` in its time.
    @Test func aYoungRequestNeedsEnoughEvidence() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        let peers = [Self.seen(0, 1), Self.seen(1, 1), Self.seen(2, 1)]
        let young = Observation(id: 3, bytes: 0, seconds: 0.2, remainingBytes: 8 << 20)
        #expect(rule.judge(peers + [young], now: 0).isEmpty)
        // The half-second window judges it as before.
        #expect(rule.judge(peers + [Self.seen(3, 0.01)], now: 0).map(\.id) == [3])
    }

    /// Young requests that carried enough bytes make the typical rate known within the first tenths
    /// of a second, so that a trickle among the first requests is caught as early.
    @Test func youngRequestsTeachTheTypicalRate() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        let fast = (0..<3).map { Observation(id: $0, bytes: 640 << 10, seconds: 0.16, remainingBytes: 8 << 20) }
        let trickle = Observation(id: 3, bytes: 2, seconds: 0.16, remainingBytes: 8 << 20)
        #expect(rule.judge(fast + [trickle], now: 0.2).map(\.id) == [3])
        #expect(rule.typical == Double(640 << 10) / 0.16)
        // Too few bytes, or too short a time, teach nothing.
        var other = SlowConnectionRule(maxTotalRedials: 24)
        let thin = (0..<3).map { Observation(id: $0, bytes: 100 << 10, seconds: 0.16, remainingBytes: 8 << 20) }
        #expect(other.judge(thin + [trickle], now: 0.2).isEmpty)
        #expect(other.typical == nil)
    }

    @Test func redialsAreBoundedThenTheWorkIsTakenAway() {
        var rule = SlowConnectionRule(maxConsecutiveRedials: 3, maxTotalRedials: 4)
        let peers = [Self.seen(0, 8), Self.seen(1, 8), Self.seen(2, 8)]
        #expect(rule.judge(peers + [Self.seen(3, 0.1, redials: 2)], now: 0).first?.action == .redial)
        // Past its bound, a connection gets one late re-dial, and then only after a hold-off of its own
        // that doubles (0.5 s, 1 s, …): meanwhile it only loses its not-started work.
        #expect(rule.judge(peers + [Self.seen(3, 0.1, redials: 3)], now: 0).first?.action == .redial)
        #expect(rule.judge(peers + [Self.seen(3, 0.1, redials: 4)], now: 0.4).first?.action == .keepOnlyTheChunkInFlight)
        #expect(rule.judge(peers + [Self.seen(3, 0.1, redials: 4)], now: 1.0).first?.action == .redial)
        #expect(rule.judge(peers + [Self.seen(3, 0.1, redials: 5)], now: 1.9).first?.action == .keepOnlyTheChunkInFlight)
        #expect(rule.lateRedials == 2)
        for _ in 0..<3 { _ = rule.judge(peers + [Self.seen(2, 8), Self.seen(3, 8), Self.seen(4, 0.1)], now: 2) }
        // The download's budget is spent: a slow connection now waits for its own hold-off too.
        #expect(rule.judge(peers + [Self.seen(4, 0.1)], now: 2).first?.action == .keepOnlyTheChunkInFlight)
        #expect(rule.totalRedials == 5)
    }

    @Test func aSlowConnectionAboutToFinishIsLeftAlone() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        // 100 KiB left at 0.1 MiB/s is one second: not worth a new connection (> 2 windows needed).
        let peers = [Self.seen(0, 8), Self.seen(1, 8), Self.seen(2, 8)]
        #expect(rule.judge(peers + [Self.seen(3, 0.1, left: 50 << 10)], now: 0).isEmpty)
        #expect(rule.judge(peers + [Self.seen(3, 0.1, left: 200 << 10)], now: 0).map(\.id) == [3])
        // Too slow a download overall to tell paths apart.
        var slowAll = SlowConnectionRule(maxTotalRedials: 24)
        #expect(slowAll.judge([Self.seen(0, 0.2), Self.seen(1, 0.2), Self.seen(2, 0.2), Self.seen(3, 0.01)], now: 0).isEmpty)
    }
}

/// `HostLimit`: a host's connection limit learnt from refusals, probed upwards with bounded refusals.
@Suite struct HostLimitTests {
    @Test func refusalsSetTheLimitAndProbesWaitForTheHoldOff() {
        var h = HostLimit()
        let a1 = h.allowsAnother(inFlight: 100, wanted: true, now: 0)
        #expect(a1)
        // Five requests already out when the first refusal came back: the limit converges to 3.
        h.refused(inFlight: 7, wait: nil, now: 0.1)
        h.refused(inFlight: 5, wait: nil, now: 0.1)
        h.refused(inFlight: 3, wait: 1, now: 0.1)
        #expect(h.limit == 3)
        let first = h.announce()
        let second = h.announce()
        #expect(first == 3 && second == nil)
        // No request at all before the second the host asked for, under the limit too.
        let early = h.allowsAnother(inFlight: 2, wanted: false, now: 0.2)
        #expect(!early)
        let a2 = h.allowsAnother(inFlight: 2, wanted: false, now: 1.15)
        #expect(a2)
        let a3 = h.allowsAnother(inFlight: 3, wanted: true, now: 1.2)
        #expect(!a3)
        // After the hold-off (2 s), counted from the end of the 1 s the host named, one probe, and
        // only with work for it: not the moment the wait is over.
        let atWaitsEnd = h.allowsAnother(inFlight: 3, wanted: true, now: 2.2)
        #expect(!atWaitsEnd)
        let a4 = h.allowsAnother(inFlight: 3, wanted: false, now: 3.2)
        #expect(!a4)
        let a5 = h.allowsAnother(inFlight: 3, wanted: true, now: 3.2)
        #expect(a5)
        #expect(h.limit == 4 && h.probes == 1)
        // The probe is refused: back to 3, and the next probe waits twice as long.
        h.refused(inFlight: 3, wait: nil, now: 3.3)
        let again = h.announce()
        #expect(h.limit == 3 && again == nil)
        let a6 = h.allowsAnother(inFlight: 3, wanted: true, now: 7.0)
        #expect(!a6)
        let a7 = h.allowsAnother(inFlight: 3, wanted: true, now: 7.4)
        #expect(a7)
        // An accepted probe keeps the higher limit and the hold-off.
        h.accepted()
        #expect(h.limit == 4)
        #expect(h.refusals == 4)
    }

    @Test func theRateLimitFieldsResetIsTheWait() {
        var head = ResponseHead()
        head.append(line: "HTTP/1.1 429 Too Many Requests\r\n")
        head.append(line: "RateLimit-Policy: \"conc\";q=3;w=1\r\n")
        head.append(line: "RateLimit: \"conc\";r=0;t=7\r\n")
        head.append(line: "\r\n")
        #expect(head.rateLimitReset == 7)
        var legacy = ResponseHead()
        legacy.append(line: "HTTP/1.1 429 Too Many Requests\r\n")
        legacy.append(line: "RateLimit-Reset: 4\r\n")
        legacy.append(line: "\r\n")
        #expect(legacy.rateLimitReset == 4)
    }

    /// Only a request sent with the probe or after it shows the probe accepted: an in-limit request
    /// sent before it and answered meanwhile does not, so a probe refused again doubles the hold-off.
    @Test func aRequestSentBeforeTheProbeDoesNotAcceptIt() {
        var h = HostLimit()
        h.refused(inFlight: 2, wait: nil, now: 0)
        let probe = h.allowsAnother(inFlight: 2, wanted: true, now: 2.5)
        #expect(probe && h.limit == 3)
        h.accepted(sentAt: 1.0)
        // The probe is refused: the hold-off doubles to 4 s.
        h.refused(inFlight: 2, wait: nil, now: 2.6)
        let early = h.allowsAnother(inFlight: 2, wanted: true, now: 5.0)
        #expect(!early)
        let next = h.allowsAnother(inFlight: 2, wanted: true, now: 6.7)
        #expect(next)
        // This probe's own answer accepts it: the next refusal is no probe's, the hold-off stays 4 s.
        h.accepted(sentAt: 6.7)
        h.refused(inFlight: 3, wait: nil, now: 7.0)
        let after = h.allowsAnother(inFlight: 3, wanted: true, now: 11.1)
        #expect(after)
    }
}
