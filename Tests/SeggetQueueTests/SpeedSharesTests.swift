import Testing

@testable import SeggetQueue

/// `SpeedShares`: the overall limit shared out as each running task's own cap.
@Suite struct SpeedSharesTests {
    func task(_ n: UInt64, rate: Double = 0, last: Int64? = nil, own: Int64? = nil) -> SpeedShares.Task {
        SpeedShares.Task(id: TaskID(n), ownCap: own, rate: rate, lastShare: last)
    }

    @Test func tasksJustStartedShareEqually() {
        let s = SpeedShares.shares(total: 3000, tasks: [task(1), task(2), task(3)])
        #expect(s == [TaskID(1): 1000, TaskID(2): 1000, TaskID(3): 1000])
    }

    @Test func aTaskHeldBackElsewhereLeavesTheRestToTheOthers() {
        // Task 2 used 200 of its 1000: it gets 300 (room to grow), the others share the 2700 left.
        let s = SpeedShares.shares(
            total: 3000, tasks: [task(1, rate: 990, last: 1000), task(2, rate: 200, last: 1000), task(3, rate: 1000, last: 1000)])
        #expect(s[TaskID(2)] == 300)
        #expect(s[TaskID(1)] == 1350 && s[TaskID(3)] == 1350)
    }

    @Test func aTasksOwnCapBoundsItsShareAndTheRestGoesToOthers() {
        let s = SpeedShares.shares(total: 1000, tasks: [task(1, own: 100), task(2)])
        #expect(s[TaskID(1)] == 100 && s[TaskID(2)] == 900)
    }

    @Test func whatNoTaskCanUseIsSharedAlikeSoTheSharesAddUpToTheLimit() {
        let s = SpeedShares.shares(total: 1000, tasks: [task(1, own: 100), task(2, own: 100)])
        #expect(s[TaskID(1)] == 500 && s[TaskID(2)] == 500)
    }

    @Test func aHeldBackTaskKeepsAFloor() {
        // It received nothing in the last second (its server stalled): a quarter of an equal share.
        let s = SpeedShares.shares(total: 4000, tasks: [task(1, rate: 0, last: 2000), task(2, rate: 2000, last: 2000)])
        #expect(s[TaskID(1)] == 500 && s[TaskID(2)] == 3500)
    }

    /// Round after round, with each task receiving the least of its share and what its server
    /// sends: the shares settle (no swing between two values), every task gets what it can use up
    /// to a fair share, and a server that speeds up gets its share back within two rounds.
    @Test(arguments: 0..<30)
    func sharesSettleFairlyOverRounds(seed: Int) {
        var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 7
        func next(_ n: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(n))
        }
        let total: Int64 = 1_000_000 + Int64(next(9_000_000))
        let n = 1 + next(6)
        // Each task's server: unbounded, or a fixed rate.
        var servers: [Double] = (0..<n).map { _ in next(2) == 0 ? .infinity : Double(1000 + next(Int(total))) }
        let owns: [Int64?] = (0..<n).map { _ in next(4) == 0 ? Int64(1000 + next(Int(total))) : nil }
        var last: [TaskID: Int64] = [:]
        var rates = [Double](repeating: 0, count: n)
        func round() -> [TaskID: Int64] {
            let tasks = (0..<n).map { i in task(UInt64(i + 1), rate: rates[i], last: last[TaskID(UInt64(i + 1))], own: owns[i]) }
            let s = SpeedShares.shares(total: total, tasks: tasks)
            for i in 0..<n {
                let share = Double(s[TaskID(UInt64(i + 1))]!)
                rates[i] = min(share, servers[i], owns[i].map(Double.init) ?? .infinity)
            }
            last = s
            return s
        }
        for _ in 0..<6 { _ = round() }
        let settled = round()
        #expect(round() == settled, "seed \(seed): shares still move")
        let sum = settled.values.reduce(0, +)
        #expect(sum <= total && sum >= total - Int64(n), "seed \(seed): shares add up to \(sum) of \(total)")
        // Max-min fairness: a task that gets less than it could use gets at least as much as any other receives.
        let received = rates
        for i in 0..<n {
            let could = min(servers[i], owns[i].map(Double.init) ?? .infinity)
            guard received[i] < could - 1 else { continue }
            for j in 0..<n where received[j] > received[i] + 1 {
                Issue.record("seed \(seed): task \(i + 1) receives \(received[i]) of \(could) while task \(j + 1) receives \(received[j])")
            }
        }
        // A bounded server that speeds up to unbounded gets an equal share or more within two rounds.
        if let i = servers.firstIndex(where: { $0 < .infinity }) {
            servers[i] = .infinity
            _ = round()
            _ = round()
            let fair = Double(total) / Double(n)
            let cap = owns[i].map(Double.init) ?? .infinity
            #expect(rates[i] >= min(fair, cap) - 1, "seed \(seed): \(rates[i]) after speeding up, fair \(fair)")
        }
    }
}
