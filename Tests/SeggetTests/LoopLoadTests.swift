import Testing

@testable import Segget

/// How busy a loop counts (`LoopLoad`): the share of its recent time spent working, recent
/// seconds counting more than old ones.
@Suite struct LoopLoadTests {
    /// `load` after `count` passes of `worked` then `waited` seconds each.
    func after(_ count: Int, worked: Double, waited: Double, from load: LoopLoad = LoopLoad()) -> LoopLoad {
        var load = load
        for _ in 0..<count { load.pass(worked: worked, waited: waited) }
        return load
    }

    @Test func nothingYetIsIdle() {
        #expect(LoopLoad().fraction == 0)
        var load = LoopLoad()
        load.pass(worked: 0, waited: 0)
        #expect(load.fraction == 0)
    }

    @Test func onlyWorkIsFullyBusyAndOnlyWaitingIsIdle() {
        #expect(after(1000, worked: 0.0001, waited: 0).fraction == 1)
        #expect(after(1000, worked: 0, waited: 0.001).fraction == 0)
    }

    /// A steady share comes out as that share, whatever the length of the passes.
    @Test(arguments: [0.1, 0.3, 0.5, 0.8])
    func aSteadyShareIsThatShare(_ share: Double) {
        for pass in [0.00005, 0.001, 0.02] {
            let load = after(Int(2 / pass), worked: pass * share, waited: pass * (1 - share))
            #expect(abs(load.fraction - share) < 0.01, "share \(share), passes of \(pass) s: \(load.fraction)")
        }
    }

    /// A loop that was busy and then waits for half a second counts as mostly waiting, and the
    /// other way round: the last quarter-second weighs most.
    @Test func theRecentTimeWeighsMost() {
        let busyThenIdle = after(50, worked: 0, waited: 0.01, from: after(10_000, worked: 0.0001, waited: 0))
        #expect(busyThenIdle.fraction < 0.15, "\(busyThenIdle.fraction)")
        let idleThenBusy = after(5_000, worked: 0.0001, waited: 0, from: after(100, worked: 0, waited: 0.01))
        #expect(idleThenBusy.fraction > 0.85, "\(idleThenBusy.fraction)")
    }

    /// Times that a clock could give out of order count as none.
    @Test func negativeTimesCountAsNone() {
        var load = after(100, worked: 0.001, waited: 0.001)
        let before = load
        load.pass(worked: -0.5, waited: -0.5)
        #expect(load == before)
        load.pass(worked: -0.5, waited: 0.001)
        #expect(load.fraction < before.fraction)
    }
}
