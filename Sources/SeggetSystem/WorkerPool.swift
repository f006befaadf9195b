import Dispatch

/// A fixed number of threads sharing one queue of work: each item runs on whichever thread is free,
/// in the order given (two items may run at once, on two threads).
///
/// For work that blocks briefly and comes in steps (a hasher's read of one block, then its hashing):
/// any number of users share the same few threads, where a thread each would grow with them. The
/// threads start with the pool and wait on a condition variable while there is no work; a pool lives
/// as long as the process (they are meant as `static let`s). When no thread can be had, the work
/// runs on Dispatch's global queue instead.
public final class WorkerPool: @unchecked Sendable {
    private let lock = ConditionLock()
    // Guarded by `lock`: the queue (from `head` on) and how many threads wait for work.
    private var items: [() -> Void] = []
    private var head = 0
    private var waiting = 0
    private var threads = 0

    /// `threads`: how many threads serve the queue (at least 1).
    public init(threads count: Int) {
        for _ in 0..<max(1, count) {
            do {
                try SystemThread.detach { [self] in serve() }
                lock.withLock { threads += 1 }
            } catch {
                break
            }
        }
    }

    /// How many threads serve the pool (0 when none could be started: the work then goes to Dispatch).
    public var threadCount: Int { lock.withLock { threads } }

    /// Runs `work` on one of the pool's threads once those given before it have started; returns at
    /// once. From any thread.
    public func async(_ work: @escaping () -> Void) {
        let direct: Bool = lock.withLock {
            guard threads > 0 else { return true }
            items.append(work)
            if waiting > 0 { lock.broadcast() }
            return false
        }
        if direct {
            let box = PoolWork(work)
            DispatchQueue.global().async { box.run() }
        }
    }

    private func serve() {
        while true {
            let work: () -> Void = lock.withLock {
                while head == items.count {
                    waiting += 1
                    lock.wait()
                    waiting -= 1
                }
                let w = items[head]
                head += 1
                if head == items.count {
                    items.removeAll(keepingCapacity: true)
                    head = 0
                } else if head >= 1024 && head * 2 >= items.count {
                    items.removeFirst(head)  // a queue that never empties still gives its memory back
                    head = 0
                }
                return w
            }
            work()
        }
    }
}

extension WorkerPool {
    /// The two threads on which every download reads back what it wrote: its hasher's steps (a
    /// block read, a block hashed) and the check of the chunks a resumed download kept. Two, so that
    /// one reads while the other hashes, as a hasher's own reader and hashing threads did; however
    /// many downloads run, these stay two.
    public static let readBack = WorkerPool(threads: 2)
}

/// A closure handed to another thread that is its only user from then on.
private struct PoolWork: @unchecked Sendable {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}
