#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Hashes a file that is being filled in order-independent chunks, following its finished prefix.
/// `advance(to:)` is called (from any thread, cheap, non-blocking) whenever the contiguous finished prefix grows;
/// a background thread preads the new bytes (in large blocks, e.g. 4 MiB, reusing one buffer) and feeds every
/// requested digester. `finish(length:)` blocks until the whole length is hashed and returns the digests.
/// `cancel()` stops the thread. Read errors surface from finish as an Error.
///
/// The caller promises that bytes below an offset it passed to `advance(to:)` are written and will not change;
/// the hasher reads each byte exactly once, so a later rewrite would go unnoticed. Bytes are read back through
/// the page cache, so hashing costs memory bandwidth, not disk reads, while the download runs.
/// Dropping the hasher cancels it.
public final class PrefixHasher: Sendable {
    // All mutable state lives in `job`, behind its lock; this wrapper exists so that dropping the hasher
    // can cancel the thread, which itself keeps `job` alive until it exits.
    private let job: PrefixHashJob

    /// Opens `path` and starts the background thread, which waits for the first `advance(to:)`.
    ///
    /// Each algorithm is computed once however often it is listed. Throws `HashingError` if the file cannot be
    /// opened or the thread cannot be started.
    public init(path: String, algorithms: [DigestAlgorithm]) throws {
        let file = try ReadOnlyFile(path: path)
        let job = PrefixHashJob(file: file, digesters: uniqued(algorithms).map(Digester.init))
        let status = startDetachedThread { job.run() }
        guard status == 0 else {
            throw HashingError(code: .threadStartFailed(errno: status), path: path)
        }
        self.job = job
    }

    deinit {
        job.cancel()
    }

    /// Tells the hasher that every byte below `offset` is written; smaller offsets than before are ignored.
    ///
    /// Takes a lock for a few instructions and wakes the thread; safe to call from any thread, including a
    /// libcurl write callback.
    public func advance(to offset: Int64) {
        job.advance(to: offset)
    }

    /// Waits until the first `length` bytes are hashed and returns one digest per requested algorithm.
    ///
    /// Treats `length` as finished even if `advance(to:)` never reached it. Calling it again returns the same
    /// digests. Throws `HashingError`: `.fileTooShort` if the file ends before `length`, `.readFailed`,
    /// `.cancelled` after `cancel()`, or `.advancedPastLength` if the prefix was advanced beyond `length`.
    public func finish(length: Int64) throws -> [DigestAlgorithm: [UInt8]] {
        try job.finish(length: length)
    }

    /// Stops the background thread and waits for it to stop reading, at most one block's work later.
    ///
    /// After this `finish` throws `.cancelled`. Calling it more than once, or after `finish`, is harmless.
    public func cancel() {
        job.cancel()
    }

    /// How many bytes from the start of the file have been hashed so far, for progress reports.
    public var hashedBytes: Int64 {
        job.hashedBytes
    }
}

/// The state shared by a `PrefixHasher` and its thread.
private final class PrefixHashJob: @unchecked Sendable {
    private let file: ReadOnlyFile
    // Used only by the worker thread while `running`, then only by `finish`; the lock hands them over.
    private let digesters: [Digester]
    private let lock = ConditionLock()

    // Guarded by `lock`.
    private var target: Int64 = 0
    private var hashed: Int64 = 0
    private var length: Int64?
    private var cancelled = false
    private var running = true
    private var failure: HashingError?
    private var result: [DigestAlgorithm: [UInt8]]?

    init(file: ReadOnlyFile, digesters: [Digester]) {
        self.file = file
        self.digesters = digesters
    }

    var hashedBytes: Int64 {
        lock.withLock { hashed }
    }

    func advance(to offset: Int64) {
        lock.withLock {
            guard offset > target else { return }
            target = offset
            lock.broadcast()
        }
    }

    func cancel() {
        lock.withLock {
            cancelled = true
            lock.broadcast()
            while running {
                lock.wait()
            }
        }
    }

    func finish(length: Int64) throws(HashingError) -> [DigestAlgorithm: [UInt8]] {
        try lock.withLock { () throws(HashingError) -> [DigestAlgorithm: [UInt8]] in
            if let result { return result }
            guard target <= length else {
                throw HashingError(code: .advancedPastLength(advanced: target, length: length), path: file.path)
            }
            self.length = length
            target = length
            lock.broadcast()
            while running {
                lock.wait()
            }
            if let failure { throw failure }
            if cancelled { throw HashingError(code: .cancelled, path: file.path) }
            let digests = Dictionary(uniqueKeysWithValues: digesters.map { ($0.algorithm, $0.finalize()) })
            result = digests
            return digests
        }
    }

    /// The worker thread's loop: wait for the prefix to grow, hash the new bytes, repeat until done or cancelled.
    func run() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: hashingBlockSize, alignment: 4096)
        var position: Int64 = 0
        var failure: HashingError?
        work: while let end = waitForWork(after: position) {
            do throws(HashingError) {
                while position < end {
                    let count = Int(min(Int64(buffer.count), end - position))
                    let block = UnsafeMutableRawBufferPointer(rebasing: buffer[..<count])
                    try file.readFully(into: block, at: position, expectedEnd: end)
                    for digester in digesters {
                        digester.update(UnsafeRawBufferPointer(block))
                    }
                    position += Int64(count)
                    let stop = lock.withLock {
                        hashed = position
                        return cancelled
                    }
                    if stop { break work }
                }
            } catch {
                failure = error
                break work
            }
        }
        buffer.deallocate()
        lock.withLock {
            self.failure = failure
            running = false
            lock.broadcast()
        }
    }

    /// Blocks until there are bytes beyond `position` to hash and returns where they end; nil when the thread
    /// should exit (cancelled, or the whole length is hashed).
    private func waitForWork(after position: Int64) -> Int64? {
        lock.withLock {
            while true {
                if cancelled { return nil }
                if let length, position >= length { return nil }
                let end = min(target, length ?? .max)
                if end > position { return end }
                lock.wait()
            }
        }
    }
}

/// A pthread mutex with one condition variable, heap-allocated because pthread objects must not move.
final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` holding the mutex.
    ///
    /// The corresponding C functions are `pthread_mutex_lock` and `pthread_mutex_unlock`.
    func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Releases the mutex until woken, then takes it again; call only inside `withLock`, in a loop that
    /// rechecks its condition, since wake-ups can be spurious.
    ///
    /// The corresponding C function is `pthread_cond_wait`.
    func wait() {
        pthread_cond_wait(condition, mutex)
    }

    /// Wakes every waiter.
    ///
    /// The corresponding C function is `pthread_cond_broadcast`.
    func broadcast() {
        pthread_cond_broadcast(condition)
    }
}

/// Runs `body` on a new detached thread; returns 0, or the error number if the thread could not be created.
///
/// A plain pthread rather than a dispatch queue: the work blocks in pread for its whole life, which would tie
/// up one of the few threads of a shared pool. The corresponding C function is `pthread_create`.
private func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var thread = pthread_t()
    let status = pthread_create(
        &thread, nil,
        { context in
            guard let context else { return nil }
            Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue().body()
            return nil
        }, context)
    guard status == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        return status
    }
    pthread_detach(thread)
    return 0
}

/// A closure boxed so that it can travel through pthread_create's `void *` argument.
private final class ThreadBody: Sendable {
    let body: @Sendable () -> Void

    init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
    }
}
