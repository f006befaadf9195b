import Dispatch

/// A serial queue with one thread of its own: its work runs one item at a time, in the order it was
/// given, always on that thread.
///
/// Unlike a serial `DispatchQueue`, whose items run on whichever thread of libdispatch's pool is
/// free, and for which the pool starts another thread when none looks free (one that is just
/// finishing an item does not count), a worker is one thread and stays one: a process that runs its
/// downloads on a loop and three workers has four threads, not four to six.
///
/// The thread waits on a condition variable while there is no work, and ends once the worker is gone
/// and its last item ran. When no thread can be had, the work runs on a `DispatchQueue` instead.
public final class SerialWorker: @unchecked Sendable {
    private final class State: @unchecked Sendable {
        let lock = ConditionLock()
        // Guarded by `lock`.
        var items: [() -> Void] = []
        var closed = false
        var waiting = false
    }

    private let state = State()
    private let fallback: DispatchQueue?

    /// `name`: the label of the dispatch queue that stands in when no thread can be had.
    public init(name: String) {
        let state = self.state
        do {
            try SystemThread.detach { SerialWorker.serve(state) }
            fallback = nil
        } catch {
            fallback = DispatchQueue(label: name)
        }
    }

    deinit {
        state.lock.withLock {
            state.closed = true
            state.lock.broadcast()
        }
    }

    /// Runs `work` after everything given before it; returns at once. From any thread.
    public func async(_ work: @escaping () -> Void) {
        if let fallback {
            let box = UncheckedWork(work)
            return fallback.async { box.run() }
        }
        state.lock.withLock {
            state.items.append(work)
            if state.waiting { state.lock.broadcast() }
        }
    }

    /// Runs `body` after everything given before it and returns its result once it ran. Not from
    /// the worker's own thread (it would wait for itself).
    public func sync<T>(_ body: @escaping () -> T) -> T {
        let done = ConditionLock()
        var result: T?
        async {
            let r = body()
            done.withLock {
                result = r
                done.broadcast()
            }
        }
        return done.withLock {
            while result == nil { done.wait() }
            return result!
        }
    }

    private static func serve(_ s: State) {
        while true {
            let batch: [() -> Void] = s.lock.withLock {
                while s.items.isEmpty && !s.closed {
                    s.waiting = true
                    s.lock.wait()
                    s.waiting = false
                }
                let b = s.items
                s.items = []
                return b
            }
            if batch.isEmpty { return }
            for w in batch { w() }
        }
    }
}

/// A closure handed to another thread that is its only user from then on.
private struct UncheckedWork: @unchecked Sendable {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}
