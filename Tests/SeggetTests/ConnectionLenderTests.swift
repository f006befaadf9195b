import Dispatch
import Testing
@testable import Segget

@Suite struct ConnectionLenderTests {
    @Test func lendsWhatItHasAndNoMore() {
        let lender = ConnectionLender()
        #expect(lender.borrow(upTo: 3) == 0)
        lender.lend(2)
        #expect(lender.spare == 2)
        #expect(lender.borrow(upTo: 3) == 2)
        #expect(lender.borrow(upTo: 1) == 0)
        lender.lend(0)
        lender.lend(-4)
        #expect(lender.spare == 0)
        lender.lend(5)
        #expect(lender.borrow(upTo: 1) == 1)
        #expect(lender.borrow(upTo: 0) == 0)
        #expect(lender.spare == 4)
    }

    /// Many threads borrowing and giving back at once: the count is never overdrawn, and what was
    /// lent is all there at the end.
    @Test func threadsNeverOverdrawIt() {
        let lender = ConnectionLender(spare: 5)
        let held = ManagedCounter()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<2_000 {
                let got = lender.borrow(upTo: 2)
                held.add(got)
                #expect(held.value <= 5)
                held.add(-got)
                lender.lend(got)
            }
        }
        #expect(lender.spare == 5)
    }
}

/// A counter of connections held by the test's threads.
private final class ManagedCounter: @unchecked Sendable {
    private let lock = DispatchSemaphore(value: 1)
    private var count = 0
    func add(_ n: Int) {
        lock.wait()
        count += n
        lock.signal()
    }
    var value: Int {
        lock.wait()
        defer { lock.signal() }
        return count
    }
}
