import SeggetSystem

/// Hashes a file that is being filled in order-independent chunks, following its finished prefix.
/// `advance(to:)` is called (from any thread, cheap, non-blocking) whenever the contiguous finished prefix grows;
/// the new bytes are then read back (in large blocks, e.g. 4 MiB, reusing three buffers) and fed to every
/// requested digester, one block per step, on the threads of `WorkerPool.readBack`: a fixed pool that every
/// hasher of the process shares, so a daemon hashing 64 downloads still runs two hashing threads, not 128.
/// `finish(length:)` blocks until the whole length is hashed and returns the digests. `cancel()` stops the
/// steps. Read errors surface from finish as an Error.
///
/// The caller promises that bytes below an offset it passed to `advance(to:)` are written and will not change;
/// the hasher reads each byte exactly once, so a later rewrite would go unnoticed. Bytes are read back through
/// the page cache, so hashing costs memory bandwidth, not disk reads, while the download runs.
/// Dropping the hasher cancels it.
public final class PrefixHasher: Sendable {
    // All mutable state lives in `job`, behind its lock; this wrapper exists so that dropping the hasher
    // can cancel the steps, which themselves keep `job` alive until they end.
    private let job: PrefixHashJob

    /// Opens `path`; nothing is read before the first `advance(to:)`.
    ///
    /// Each algorithm is computed once however often it is listed. Throws `HashingError` if the file cannot be
    /// opened.
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
        job = PrefixHashJob(
            file: file, digesters: uniqued(algorithms).map(Digester.init), window: window, pool: .readBack)
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

    /// Stops the hashing and waits for its step in progress to end, at most one block's work later.
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

/// The state of one `PrefixHasher` and its steps. Two kinds of step run on the pool, each at most one
/// at a time: a read (the next block of the finished prefix into a free buffer, or found in the memory
/// window) and a hash (the oldest block read, fed to every digester). Each step, as it ends, starts
/// whatever can run next (`schedule`), so a hasher with work has a read and a hash in flight, as its
/// reader and hashing threads had.
private final class PrefixHashJob: @unchecked Sendable {
    private let file: ReadOnlyFile
    // Used only by the hash step in flight, then only by `finish`; the lock hands them over.
    private let digesters: [Digester]
    private let lock = ConditionLock()
    private let pool: WorkerPool
    /// The read pipeline's blocks: one being read, one being hashed, one spare.
    private let buffers: [UnsafeMutableRawBufferPointer]

    // Guarded by `lock`.
    private var target: Int64 = 0
    private var hashed: Int64 = 0
    /// How far the reads got (`hashed` plus the blocks in `filled`).
    private var readPosition: Int64 = 0
    private var length: Int64?
    private var cancelled = false
    private var failure: HashingError?
    private var result: [DigestAlgorithm: [UInt8]]?
    // Blocks read and waiting to be hashed, in file order, as (buffer index, the bytes within it; no
    // index for bytes in the memory window); buffers free for a read; the steps in flight.
    private var filled: [(buffer: Int?, bytes: UnsafeRawBufferPointer)] = []
    private var freeBuffers: [Int]
    private var reading = false
    private var hashing = false
    private var readFromFile: Int64 = 0

    // The memory window: `ringBlocks` blocks of `directAlignment` bytes; file block `b` lives in slot
    // `b % ringBlocks`, and `slotHolds[slot]` (guarded by `lock`) says which file block is there now.
    // Slots are written only for blocks within `hashed ..< hashed + window`, so a block a step is still
    // using is never overwritten.
    private let ringBuffer: AlignedBuffer?
    private var ring: UnsafeMutableRawPointer? { ringBuffer?.base }
    private let ringBlocks: Int
    private var slotHolds: [Int64]

    init(file: ReadOnlyFile, digesters: [Digester], window: Int = 0, pool: WorkerPool) {
        self.file = file
        self.digesters = digesters
        self.pool = pool
        buffers = (0..<Self.pipelineDepth).map { _ in
            UnsafeMutableRawBufferPointer.allocate(byteCount: hashingBlockSize, alignment: directAlignment)
        }
        freeBuffers = Array(buffers.indices)
        ringBlocks = window / directAlignment
        slotHolds = Array(repeating: -1, count: ringBlocks)
        if ringBlocks > 0 {
            ringBuffer = AlignedBuffer(count: window, alignment: directAlignment)
        } else {
            ringBuffer = nil
        }
    }

    // Every step holds the job, so no step runs any more when it goes.
    deinit {
        for b in buffers { b.deallocate() }
    }

    /// How many blocks the read pipeline keeps: one being read, one being hashed, one spare.
    static let pipelineDepth = 3

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
            schedule()
        }
    }

    func cancel() {
        lock.withLock {
            cancelled = true
            while reading || hashing {
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
            schedule()
            while reading || hashing || (hashed < length && failure == nil && !cancelled) {
                lock.wait()
            }
            if let failure { throw failure }
            if cancelled { throw HashingError(code: .cancelled, path: file.path) }
            let digests = Dictionary(uniqueKeysWithValues: digesters.map { ($0.algorithm, $0.finalize()) })
            result = digests
            return digests
        }
    }

    /// Starts the steps that can run now: a hash of the oldest block read, and a read of the next
    /// block of the prefix (from the memory window, or into a free buffer). Call with `lock` held.
    private func schedule() {
        guard !cancelled, failure == nil else { return }
        if !hashing, !filled.isEmpty {
            hashing = true
            pool.async { [self] in hashStep() }
        }
        let end = min(target, length ?? .max)
        if !reading, end > readPosition, !freeBuffers.isEmpty || cachedRun(at: readPosition, end: end) > 0 {
            reading = true
            pool.async { [self] in readStep() }
        }
    }

    /// One step: the oldest block read, fed to every digester.
    private func hashStep() {
        let next: (buffer: Int?, bytes: UnsafeRawBufferPointer)? = lock.withLock {
            guard !cancelled, failure == nil, !filled.isEmpty else {
                hashing = false
                lock.broadcast()
                return nil
            }
            return filled.removeFirst()
        }
        guard let next else { return }
        for digester in digesters {
            digester.update(next.bytes)
        }
        lock.withLock {
            hashed += Int64(next.bytes.count)
            if let b = next.buffer { freeBuffers.append(b) }
            hashing = false
            schedule()
            lock.broadcast()
        }
    }

    /// One step: the next bytes of the prefix, found in the memory window or read into a free buffer
    /// (only up to the next block the window holds).
    private func readStep() {
        let work: (buffer: Int?, position: Int64, end: Int64, cached: Int)? = lock.withLock {
            let end = min(target, length ?? .max)
            if !cancelled, failure == nil, end > readPosition {
                let cached = cachedRun(at: readPosition, end: end)
                if cached > 0 { return (nil, readPosition, end, cached) }
                if let b = freeBuffers.popLast() {
                    var stop = end
                    let a = Int64(directAlignment)
                    let limit = min(end, readPosition + Int64(hashingBlockSize))
                    var probe = (readPosition / a + 1) * a
                    while probe < limit {
                        if cachedRun(at: probe, end: limit) > 0 {
                            stop = probe
                            break
                        }
                        probe += a
                    }
                    return (b, readPosition, stop, 0)
                }
            }
            reading = false
            lock.broadcast()
            return nil
        }
        guard let work else { return }
        let block: UnsafeRawBufferPointer
        if let ring, work.cached > 0 {
            let slot = Int(work.position / Int64(directAlignment) % Int64(ringBlocks))
            block = UnsafeRawBufferPointer(start: ring + slot * directAlignment, count: work.cached)
        } else {
            let buffer = buffers[work.buffer!]
            do throws(HashingError) {
                if file.isDirect {
                    block = try readDirect(into: buffer, from: work.position, to: work.end)
                } else {
                    let count = Int(min(Int64(buffer.count), work.end - work.position))
                    let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[..<count])
                    try file.readFully(into: slice, at: work.position, expectedEnd: work.end)
                    lock.withLock { readFromFile += Int64(count) }
                    block = UnsafeRawBufferPointer(slice)
                }
            } catch {
                return lock.withLock {
                    failure = error
                    freeBuffers.append(work.buffer!)
                    reading = false
                    lock.broadcast()
                }
            }
        }
        lock.withLock {
            filled.append((work.buffer, block))
            readPosition += Int64(block.count)
            reading = false
            schedule()
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
