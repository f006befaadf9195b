import Glibc
import Synchronization
import Testing
@testable import SeggetSystem

/// `SerialWorker`: the steps and the writers of a `DownloadLoop` rely on its order and on its one thread.
@Suite struct SerialWorkerTests {
    /// The calling thread.
    static func threadID() -> UInt { UInt(pthread_self()) }

    @Test func itemsRunInOrderOnOneThreadOfItsOwn() {
        let worker = SerialWorker(name: "test-worker")
        let seen = Mutex<(order: [Int], threads: Set<UInt>)>(([], []))
        let caller = Self.threadID()
        // Given from several threads at once: each thread's items keep their order.
        let threads = 4, each = 500
        let started = Atomic<Int>(0)
        for t in 0..<threads {
            try? SystemThread.detach {
                for i in 0..<each {
                    worker.async {
                        let id = Self.threadID()
                        seen.withLock {
                            $0.order.append(t * each + i)
                            $0.threads.insert(id)
                        }
                    }
                }
                started.add(1, ordering: .releasing)
            }
        }
        while started.load(ordering: .acquiring) < threads { usleep(1000) }
        // `sync` runs after everything given before it, and hands back its value.
        let count = worker.sync { seen.withLock { $0.order.count } }
        #expect(count == threads * each)
        let (order, ids) = seen.withLock { ($0.order, $0.threads) }
        for t in 0..<threads {
            let mine = order.filter { $0 / each == t }
            #expect(mine == Array(t * each..<(t + 1) * each))
        }
        #expect(ids.count == 1)
        #expect(!ids.contains(caller))
    }

    /// Items that block (a write, a sync) do not bring in a second thread, as a dispatch queue's
    /// pool does when no thread looks free; `async` returns before its item runs.
    @Test func blockingItemsStayOnTheWorkersThread() {
        let worker = SerialWorker(name: "test-worker")
        let ids = Mutex<Set<UInt>>([])
        let ran = Atomic<Int>(0)
        // The first item waits for the caller's word (10 s at most, so that a worker that ran items on
        // the caller's thread fails the check below rather than hangs): whatever the machine's load,
        // none has finished when the caller looks.
        let gate = Mutex(false)
        for n in 0..<20 {
            worker.async {
                if n == 0 {
                    for _ in 0..<2000 where !gate.withLock({ $0 }) { usleep(5000) }
                }
                usleep(5000)
                let id = Self.threadID()
                ids.withLock { _ = $0.insert(id) }
                ran.add(1, ordering: .relaxed)
            }
        }
        // Handed over, not run by the caller.
        #expect(ran.load(ordering: .relaxed) == 0)
        gate.withLock { $0 = true }
        worker.sync {}
        #expect(ran.load(ordering: .relaxed) == 20)
        #expect(ids.withLock { $0.count } == 1)
    }
}
