import SeggetSystem

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
    ///
    /// With `direct`, the file is read with `O_DIRECT` (where the file system allows it), for files
    /// written that way: reading them through the page cache would cost a fresh page per 4 KiB.
    ///
    /// `memoryWindow` (bytes, used only when the file is read with `O_DIRECT`) sets aside a ring of
    /// memory for bytes handed over with `offer(_:at:)`: bytes found there are hashed without being read
    /// back from the device, which would compete with the download's own writes for it.
    public init(path: String, algorithms: [DigestAlgorithm], direct: Bool = false, memoryWindow: Int = 0) throws {
        let file = try ReadOnlyFile(path: path, direct: direct)
        let window = file.isDirect ? memoryWindow / directAlignment * directAlignment : 0
        let job = PrefixHashJob(file: file, digesters: uniqued(algorithms).map(Digester.init), window: window)
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

    /// Offers bytes just written at `offset` to the memory window: the whole 4 KiB blocks among them
    /// that fall inside the window ahead of the hashed prefix are copied there. Does nothing without a
    /// window. Call it from one thread at a time (the fetch loop).
    public func offer(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        job.offer(bytes, at: offset)
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

    /// How many bytes were read from the file (as opposed to taken from the memory window).
    var bytesReadFromFile: Int64 {
        job.bytesReadFromFile
    }

    /// True when the file is read with `O_DIRECT`.
    var readsDirectly: Bool {
        job.readsDirectly
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
    // The read pipeline (see `run`): blocks read and waiting to be hashed, in file
    // order, as (buffer index, the bytes within it); buffers free for the reader; the reader's end.
    private var filled: [(buffer: Int?, bytes: UnsafeRawBufferPointer)] = []
    private var freeBuffers: [Int] = []
    private var readerRunning = false
    private var readFromFile: Int64 = 0
    private var readerFailure: HashingError?

    // The memory window: `ringBlocks` blocks of `directAlignment` bytes; file block `b` lives in slot
    // `b % ringBlocks`, and `slotHolds[slot]` (guarded by `lock`) says which file block is there now.
    // Slots are written only for blocks within `hashed ..< hashed + window`, so a block the reader or
    // hasher is still using is never overwritten.
    private let ringBuffer: AlignedBuffer?
    private var ring: UnsafeMutableRawPointer? { ringBuffer?.base }
    private let ringBlocks: Int
    private var slotHolds: [Int64]

    init(file: ReadOnlyFile, digesters: [Digester], window: Int = 0) {
        self.file = file
        self.digesters = digesters
        ringBlocks = window / directAlignment
        slotHolds = Array(repeating: -1, count: ringBlocks)
        if ringBlocks > 0 {
            ringBuffer = AlignedBuffer(count: window, alignment: directAlignment)
        } else {
            ringBuffer = nil
        }
    }

    func offer(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        guard let ring, let base = bytes.baseAddress else { return }
        let a = Int64(directAlignment)
        let floor = lock.withLock { hashed }
        let window = Int64(ringBlocks) * a
        // Whole blocks only, and only those inside the window.
        var block = max((offset + a - 1) / a, (floor + a - 1) / a)
        let endBlock = min((offset + Int64(bytes.count)) / a, (floor + window) / a)
        while block < endBlock {
            let slot = Int(block % Int64(ringBlocks))
            let run = min(endBlock - block, Int64(ringBlocks - slot))
            (ring + slot * directAlignment).copyMemory(from: base + Int(block * a - offset), byteCount: Int(run * a))
            lock.withLock {
                for i in 0..<Int(run) { slotHolds[slot + i] = block + Int64(i) }
            }
            block += run
        }
    }

    /// How many bytes from `position` (block-aligned) on are in the window, up to `end` and at most one
    /// hashing block, without wrapping; 0 if the first block is not there. Call with `lock` held.
    private func cachedRun(at position: Int64, end: Int64) -> Int {
        guard ring != nil else { return 0 }
        let a = Int64(directAlignment)
        guard position % a == 0 else { return 0 }
        var block = position / a
        let slot = Int(block % Int64(ringBlocks))
        var count: Int64 = 0
        while count < Int64(hashingBlockSize), position + count < end, slot + Int(count / a) < ringBlocks,
            slotHolds[slot + Int(count / a)] == block
        {
            count += a
            block += 1
        }
        return Int(min(count, end - position))
    }

    var hashedBytes: Int64 {
        lock.withLock { hashed }
    }

    var bytesReadFromFile: Int64 {
        lock.withLock { readFromFile }
    }

    var readsDirectly: Bool { file.isDirect }

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

    /// How many blocks the read pipeline keeps: one being read, one being hashed, one spare.
    static let pipelineDepth = 3

    /// The thread's loop: hash blocks as the reader delivers them, until done or cancelled.
    ///
    /// Reads wait for the device (always with `O_DIRECT`), so a second thread reads the next blocks
    /// while this one hashes: the hasher then runs at hashing speed, not at hashing plus reading speed.
    func run() {
        let buffers = (0..<Self.pipelineDepth).map { _ in
            UnsafeMutableRawBufferPointer.allocate(byteCount: hashingBlockSize, alignment: directAlignment)
        }
        lock.withLock {
            freeBuffers = Array(buffers.indices)
            readerRunning = true
        }
        let shared = SharedBuffers(list: buffers)
        let started = startDetachedThread { [self] in readAhead(into: shared.list) }
        if started != 0 {
            lock.withLock {
                readerRunning = false
                readerFailure = HashingError(code: .threadStartFailed(errno: started), path: file.path)
            }
        }
        var position: Int64 = 0
        while true {
            let next: (buffer: Int?, bytes: UnsafeRawBufferPointer)? = lock.withLock {
                while true {
                    if cancelled { return nil }
                    if !filled.isEmpty { return filled.removeFirst() }
                    if !readerRunning { return nil }
                    lock.wait()
                }
            }
            guard let next else { break }
            let block = next.bytes
            for digester in digesters {
                digester.update(block)
            }
            position += Int64(block.count)
            lock.withLock {
                hashed = position
                if let b = next.buffer { freeBuffers.append(b) }
                lock.broadcast()
            }
        }
        // The reader may still be inside a read into one of the buffers: wait for it before freeing them.
        lock.withLock {
            cancelled = cancelled || readerFailure != nil
            lock.broadcast()
            while readerRunning {
                lock.wait()
            }
        }
        for b in buffers { b.deallocate() }
        lock.withLock {
            self.failure = readerFailure
            running = false
            lock.broadcast()
        }
    }

    /// The reading half of `run`: fills free buffers with the next bytes of the prefix.
    private func readAhead(into buffers: [UnsafeMutableRawBufferPointer]) {
        var position: Int64 = 0
        var failure: HashingError?
        while true {
            // Either bytes already in the memory window (no read needed) or a free buffer to read into.
            let work: (buffer: Int?, end: Int64, cached: Int)? = lock.withLock {
                while true {
                    if cancelled { return nil }
                    if let length, position >= length { return nil }
                    let end = min(target, length ?? .max)
                    if end > position {
                        let cached = cachedRun(at: position, end: end)
                        if cached > 0 { return (nil, end, cached) }
                        if let b = freeBuffers.popLast() { return (b, end, 0) }
                    }
                    lock.wait()
                }
            }
            guard let work else { break }
            if work.cached > 0, let ring {
                let slot = Int(position / Int64(directAlignment) % Int64(ringBlocks))
                let block = UnsafeRawBufferPointer(start: ring + slot * directAlignment, count: work.cached)
                position += Int64(work.cached)
                lock.withLock {
                    filled.append((nil, block))
                    lock.broadcast()
                }
                continue
            }
            let buffer = buffers[work.buffer!]
            do throws(HashingError) {
                // Read only up to the next block the window holds.
                var end = work.end
                let a = Int64(directAlignment)
                let limit = min(end, position + Int64(buffer.count))
                lock.withLock {
                    var probe = (position / a + 1) * a
                    while probe < limit {
                        if cachedRun(at: probe, end: limit) > 0 {
                            end = probe
                            break
                        }
                        probe += a
                    }
                }
                let block: UnsafeRawBufferPointer
                if file.isDirect {
                    block = try readDirect(into: buffer, from: position, to: end)
                } else {
                    let count = Int(min(Int64(buffer.count), end - position))
                    let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[..<count])
                    try file.readFully(into: slice, at: position, expectedEnd: end)
                    lock.withLock { readFromFile += Int64(count) }
                    block = UnsafeRawBufferPointer(slice)
                }
                position += Int64(block.count)
                lock.withLock {
                    filled.append((work.buffer, block))
                    lock.broadcast()
                }
            } catch {
                failure = error
                break
            }
        }
        lock.withLock {
            readerFailure = failure
            readerRunning = false
            lock.broadcast()
        }
    }

    /// Reads bytes from `position` towards `end` with aligned `O_DIRECT` reads (starting at the block
    /// that holds `position`); returns the part of `buffer` that holds `position..<min(end, …)`.
    private func readDirect(into buffer: UnsafeMutableRawBufferPointer, from position: Int64, to end: Int64)
        throws(HashingError) -> UnsafeRawBufferPointer
    {
        let a = Int64(directAlignment)
        let start = position / a * a
        let wanted = min(Int64(buffer.count), (end - start + a - 1) / a * a)
        var got = 0
        while Int64(got) < min(wanted, end - start) {
            let n = try file.read(
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[got..<Int(wanted)]), at: start + Int64(got))
            guard n > 0 else {
                throw HashingError(code: .fileTooShort(expected: end, actual: start + Int64(got)), path: file.path)
            }
            got += n
            lock.withLock { readFromFile += Int64(n) }
            // A short read that is not a whole number of blocks can only be the end of the file.
            if Int64(got) % a != 0 { break }
        }
        let stop = min(start + Int64(got), end)
        guard stop > position else {
            throw HashingError(code: .fileTooShort(expected: end, actual: stop), path: file.path)
        }
        return UnsafeRawBufferPointer(rebasing: buffer[Int(position - start)..<Int(stop - start)])
    }

}

/// Runs `body` on a new detached thread; returns 0, or the error number if the thread could not be created.
///
/// A plain thread rather than a dispatch queue: the work blocks in pread for its whole life, which would tie
/// up one of the few threads of a shared pool.
private func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
    do {
        try SystemThread.detach(body)
        return 0
    } catch {
        return error.rawValue
    }
}

/// The pipeline's buffers, handed to the reader thread; the job's lock orders every use of each buffer.
private struct SharedBuffers: @unchecked Sendable {
    let list: [UnsafeMutableRawBufferPointer]
}
