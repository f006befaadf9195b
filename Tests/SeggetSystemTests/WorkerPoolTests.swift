import Glibc
import Synchronization
import Testing
@testable import SeggetSystem

/// `WorkerPool`: every download's hasher and chunk checks share `WorkerPool.readBack`; its size must
/// not grow with the work, and its threads must run side by side.
@Suite struct WorkerPoolTests {
    func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    /// A thousand items from several threads all run, on the pool's two threads only.
    @Test func everyItemRunsOnThePoolsThreadsOnly() {
        let pool = WorkerPool(threads: 2)
        #expect(pool.threadCount == 2)
        let seen = Mutex<(count: Int, threads: Set<UInt>)>((0, []))
        let given = Atomic<Int>(0)
        let senders = 4, each = 250
        for _ in 0..<senders {
            try? SystemThread.detach {
                for _ in 0..<each {
                    pool.async {
                        let id = UInt(pthread_self())
                        seen.withLock {
                            $0.count += 1
                            $0.threads.insert(id)
                        }
                    }
                }
                given.add(1, ordering: .releasing)
            }
        }
        let deadline = now() + 10
        while seen.withLock({ $0.count }) < senders * each && now() < deadline { usleep(1000) }
        let (count, ids) = seen.withLock { ($0.count, $0.threads) }
        #expect(count == senders * each)
        #expect(ids.count <= 2)
        #expect(!ids.contains(UInt(pthread_self())))
    }

    /// Two items that each wait for the other finish: they run at once, on the two threads (a
    /// hasher's read and its hashing overlap so).
    @Test func twoItemsRunAtOnce() {
        let pool = WorkerPool(threads: 2)
        let arrived = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        for _ in 0..<2 {
            pool.async {
                arrived.add(1, ordering: .acquiringAndReleasing)
                let deadline = now() + 5
                while arrived.load(ordering: .acquiring) < 2 && now() < deadline { usleep(100) }
                if arrived.load(ordering: .acquiring) == 2 { finished.add(1, ordering: .releasing) }
            }
        }
        let deadline = now() + 10
        while finished.load(ordering: .acquiring) < 2 && now() < deadline { usleep(1000) }
        #expect(finished.load(ordering: .acquiring) == 2)
    }

    /// Items given while both threads are busy wait their turn and run in the order given.
    @Test func queuedItemsRunInTheOrderGiven() {
        let pool = WorkerPool(threads: 1)
        let order = Mutex<[Int]>([])
        for i in 0..<3000 { pool.async { order.withLock { $0.append(i) } } }
        let deadline = now() + 10
        while order.withLock({ $0.count }) < 3000 && now() < deadline { usleep(1000) }
        #expect(order.withLock { $0 } == Array(0..<3000))
    }
}
