import SeggetSystem

/// The memory behind kept bytes: a lent buffer (given back through `release` once no piece of it is
/// held), bytes handed over (`owned`, whose first byte is the file's byte `ownedStart`), or one of
/// the job's read buffers.
final class Loan {
    let release: (@Sendable () -> Void)?
    let footprint: Int
    let readBuffer: Int?
    let owned: (any OwnedBytes)?
    let ownedStart: Int64
    /// Pieces that still point into it.
    var pieces = 0

    init(
        release: (@Sendable () -> Void)?, footprint: Int, readBuffer: Int?, owned: (any OwnedBytes)? = nil,
        ownedStart: Int64 = 0
    ) {
        self.release = release
        self.footprint = footprint
        self.readBuffer = readBuffer
        self.owned = owned
        self.ownedStart = ownedStart
    }

    /// Runs `body` over the loan's bytes `from..<from + count` (file offsets), found at `base` when
    /// the loan is memory of the lender's.
    func withBytes(at base: UnsafeRawPointer?, from: Int64, count: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        if let base {
            body(UnsafeRawBufferPointer(start: base, count: count))
        } else if let owned {
            owned.withBytes { all in
                let start = Int(from - ownedStart)
                body(UnsafeRawBufferPointer(rebasing: all[start..<(start + count)]))
            }
        }
    }
}

/// Kept bytes: `range` of the file, starting at `base` in a loan's memory (nil: in its owned bytes).
struct Piece {
    let range: Range<Int64>
    let base: UnsafeRawPointer?
    let loan: Loan
}

/// The state of one `PrefixHasher` and its steps: the bookkeeping (`HashFeed`), the kept pieces in file
/// order, and the read buffers. Two kinds of step run on the pool: a read (the hole at the head of the
/// window, from the file into a free read buffer; one at a time) and a hash (a digest over the next held
/// bytes; one at a time per digest). Each step, as it ends, starts whatever can run next (`schedule`).
final class PrefixHashJob: @unchecked Sendable {
    private let file: ReadOnlyFile
    // Each used only by its digest's step in flight, then only by `finish`; the lock hands them over.
    private let digesters: [Digester]
    private let lock = ConditionLock()
    private let pool: WorkerPool
    /// The read buffers, allocated when first needed: one being read, the others held until hashed.
    private var buffers: [UnsafeMutableRawBufferPointer?]

    // Guarded by `lock`.
    private var state: HashFeed
    private var pieces: [Piece] = []
    private var freeBuffers: [Int]
    private var advanced: Int64 = 0
    private var steps = 0
    private var cancelled = false
    private var failure: HashingError?
    private var result: [DigestAlgorithm: [UInt8]]?
    private var readFromFile: Int64 = 0
    // The trace (`PrefixHasher.trace`): the sink, and what it reports.
    private var traceSink: (@Sendable (String) -> Void)?
    private var traceStep: Int64 = 0
    private var lentBytes: Int64 = 0
    private var farthestLent: Int64 = 0
    private var nextTrace: Int64 = 0

    /// How many read buffers, and the size of each: enough to read one block while the two before it
    /// are hashed.
    static let readBuffers = 3
    static let readBlockSize = 1 << 20
    /// The most bytes one hash step takes, so that `cancel()` stays prompt.
    static let hashStepBytes = hashingBlockSize

    init(file: ReadOnlyFile, digesters: [Digester], memoryLimit: Int, pool: WorkerPool) {
        self.file = file
        self.digesters = digesters
        self.pool = pool
        buffers = Array(repeating: nil, count: Self.readBuffers)
        freeBuffers = Array((0..<Self.readBuffers).reversed())
        // The window spans twice what may be kept from memory (bytes arrive with holes between the
        // connections' runs, so the memory fills before the span does), and at least what the read
        // buffers hold.
        let capacity = max(2 * Int64(memoryLimit), Int64(Self.readBuffers * Self.readBlockSize))
        state = HashFeed(capacity: capacity, memoryLimit: memoryLimit, digests: digesters.count)
    }

    // Every step holds the job, so no step runs any more when it goes; `cancel` gave every loan back.
    deinit {
        for b in buffers { b?.deallocate() }
    }

    var hashed: Int64 { lock.withLock { state.hashed } }

    var statistics: HashStatistics {
        lock.withLock {
            HashStatistics(
                fromMemory: state.fromMemory, readBack: readFromFile, fellOut: state.fellOut,
                peakMemory: state.peakFootprint)
        }
    }

    var readsDirectly: Bool { file.isDirect }

    func advance(to offset: Int64) {
        lock.withLock {
            advanced = max(advanced, offset)
            state.advanceFile(to: offset)
            schedule()
        }
    }

    func lend(
        _ bytes: UnsafeRawBufferPointer, at offset: Int64, footprint: Int, release: @escaping @Sendable () -> Void
    ) -> PrefixHasher.Lending {
        guard let base = bytes.baseAddress, !bytes.isEmpty, !digesters.isEmpty else {
            return PrefixHasher.Lending(kept: false, fellOut: false)
        }
        let (lending, line) = lock.withLock { () -> (PrefixHasher.Lending, String?) in
            guard !cancelled, failure == nil, result == nil else { return (PrefixHasher.Lending(kept: false, fellOut: false), nil) }
            let r = offset..<(offset + Int64(bytes.count))
            let offer = state.offer(r, footprint: footprint)
            let line = traceSink == nil ? nil : traceLine(lent: r)
            guard !offer.keep.isEmpty else { return (PrefixHasher.Lending(kept: false, fellOut: offer.fellOut), line) }
            let loan = Loan(release: release, footprint: footprint, readBuffer: nil)
            for part in offer.keep {
                insert(Piece(range: part, base: base + Int(part.lowerBound - offset), loan: loan))
            }
            schedule()
            return (PrefixHasher.Lending(kept: true, fellOut: offer.fellOut), line)
        }
        if let line { traceSink?(line) }
        return lending
    }

    func keep(_ bytes: some OwnedBytes, at offset: Int64) {
        guard bytes.count > 0, !digesters.isEmpty else { return }
        lock.withLock {
            guard !cancelled, failure == nil, result == nil else { return }
            let offer = state.offer(offset..<(offset + Int64(bytes.count)), footprint: bytes.count)
            guard !offer.keep.isEmpty else { return }
            let loan = Loan(release: nil, footprint: bytes.count, readBuffer: nil, owned: bytes, ownedStart: offset)
            for part in offer.keep {
                insert(Piece(range: part, base: nil, loan: loan))
            }
            schedule()
        }
    }

    func trace(every step: Int64, _ sink: @escaping @Sendable (String) -> Void) {
        lock.withLock {
            traceStep = max(1, step)
            traceSink = sink
        }
    }

    /// Counts bytes `r` lent; every `traceStep` bytes, the line to trace. Call with `lock` held.
    private func traceLine(lent r: Range<Int64>) -> String? {
        lentBytes += Int64(r.count)
        farthestLent = max(farthestLent, r.upperBound)
        guard lentBytes >= nextTrace else { return nil }
        nextTrace = lentBytes + traceStep
        let gap = state.window.firstGap.map { "\($0.lowerBound)" } ?? "none"
        return "hash: \(lentBytes) bytes lent (the farthest ends at \(farthestLent)), \(state.hashed) hashed, "
            + "first hole at \(gap), \(state.inFile) in the file; \(state.footprint) bytes of memory kept, "
            + "\(state.fromMemory) taken from memory, \(state.fellOut) fell out, \(readFromFile) read back"
    }

    func cancel() {
        let loans: [Loan] = lock.withLock {
            cancelled = true
            lock.broadcast()
            while steps > 0 { lock.wait() }
            return letGo(below: .max)
        }
        for loan in loans { loan.release?() }
    }

    func finish(length: Int64) throws(HashingError) -> [DigestAlgorithm: [UInt8]] {
        try lock.withLock { () throws(HashingError) -> [DigestAlgorithm: [UInt8]] in
            if let result { return result }
            guard advanced <= length else {
                throw HashingError(code: .advancedPastLength(advanced: advanced, length: length), path: file.path)
            }
            if !digesters.isEmpty {
                state.end(at: length)
                schedule()
                while steps > 0 || (!state.isComplete && failure == nil && !cancelled) {
                    lock.wait()
                }
            }
            if let failure { throw failure }
            if cancelled { throw HashingError(code: .cancelled, path: file.path) }
            let digests = Dictionary(uniqueKeysWithValues: digesters.map { ($0.algorithm, $0.finalize()) })
            result = digests
            return digests
        }
    }

    /// Starts the steps that can run now: a hash for each digest with bytes held for it, and a read
    /// of the hole at the head of the window into a free buffer. Call with `lock` held.
    private func schedule() {
        guard !cancelled, failure == nil, result == nil else { return }
        for d in digesters.indices {
            if let r = state.takeHash(d, maxBytes: Self.hashStepBytes) {
                steps += 1
                pool.async { [self] in hashStep(d, r) }
            }
        }
        // With O_DIRECT a read starts at the block holding its first byte: leave room for that.
        let room = Self.readBlockSize - (file.isDirect ? directAlignment : 0)
        if let i = freeBuffers.last, let r = state.takeRead(maxBytes: room) {
            freeBuffers.removeLast()
            if buffers[i] == nil {
                buffers[i] = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readBlockSize, alignment: directAlignment)
            }
            steps += 1
            pool.async { [self] in readStep(r, into: i) }
        }
    }

    /// One step: digest `d` over the held bytes `r`.
    private func hashStep(_ d: Int, _ r: Range<Int64>) {
        let parts: [HeldRun]? = lock.withLock {
            guard !cancelled, failure == nil else {
                state.stepAbandoned(d)
                steps -= 1
                lock.broadcast()
                return nil
            }
            return heldBytes(in: r)
        }
        guard let parts else { return }
        for part in parts {
            part.loan.withBytes(at: part.base, from: part.from, count: part.count) { digesters[d].update($0) }
        }
        let loans: [Loan] = lock.withLock { letGo(below: state.hashed(d, upTo: r.upperBound)) }
        // Given back before the step counts as ended, so that `finish` returns with every buffer back.
        for loan in loans { loan.release?() }
        lock.withLock {
            steps -= 1
            schedule()
            lock.broadcast()
        }
    }

    /// One step: bytes `r` read back from the file into read buffer `i`.
    private func readStep(_ r: Range<Int64>, into i: Int) {
        // The buffer is this step's alone until it ends (it left `freeBuffers`).
        guard let buffer = lock.withLock({ cancelled || failure != nil ? nil : buffers[i] }) else {
            return lock.withLock {
                state.readFailed()
                freeBuffers.append(i)
                steps -= 1
                lock.broadcast()
            }
        }
        do throws(HashingError) {
            let bytes: UnsafeRawBufferPointer
            if file.isDirect {
                bytes = try readDirect(into: buffer, from: r.lowerBound, to: r.upperBound)
            } else {
                let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[..<r.count])
                try file.readFully(into: slice, at: r.lowerBound, expectedEnd: r.upperBound)
                lock.withLock { readFromFile += Int64(r.count) }
                bytes = UnsafeRawBufferPointer(slice)
            }
            lock.withLock {
                let kept = state.readEnded(through: r.lowerBound + Int64(bytes.count))
                if let base = bytes.baseAddress, !kept.isEmpty {
                    let loan = Loan(release: nil, footprint: 0, readBuffer: i)
                    for part in kept {
                        insert(Piece(range: part, base: base + Int(part.lowerBound - r.lowerBound), loan: loan))
                    }
                } else {
                    freeBuffers.append(i)
                }
                steps -= 1
                schedule()
                lock.broadcast()
            }
        } catch {
            lock.withLock {
                if failure == nil { failure = error }
                state.readFailed()
                freeBuffers.append(i)
                steps -= 1
                lock.broadcast()
            }
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

    // MARK: Pieces (call with `lock` held)

    /// Adds a piece, keeping `pieces` in file order (they never overlap: `HashFeed` keeps only bytes
    /// not held).
    private func insert(_ piece: Piece) {
        piece.loan.pieces += 1
        var lo = pieces.count
        // Most pieces arrive near the end of the window.
        if let last = pieces.last, last.range.lowerBound > piece.range.lowerBound {
            var low = 0, high = pieces.count
            while low < high {
                let mid = (low + high) / 2
                if pieces[mid].range.lowerBound < piece.range.lowerBound { low = mid + 1 } else { high = mid }
            }
            lo = low
        }
        pieces.insert(piece, at: lo)
    }

    /// Held bytes of a step: `count` bytes from the file's byte `from`, at `base` (nil: in the
    /// loan's owned bytes).
    private struct HeldRun {
        let loan: Loan
        let base: UnsafeRawPointer?
        let from: Int64
        let count: Int
    }

    /// The held bytes of `r`, in order (the feed handed `r` out, so they are all held).
    private func heldBytes(in r: Range<Int64>) -> [HeldRun] {
        var parts: [HeldRun] = []
        var low = 0, high = pieces.count
        while low < high {
            let mid = (low + high) / 2
            if pieces[mid].range.upperBound <= r.lowerBound { low = mid + 1 } else { high = mid }
        }
        var i = low
        while i < pieces.count, pieces[i].range.lowerBound < r.upperBound {
            let p = pieces[i]
            let from = max(p.range.lowerBound, r.lowerBound), to = min(p.range.upperBound, r.upperBound)
            parts.append(HeldRun(loan: p.loan, base: p.base.map { $0 + Int(from - p.range.lowerBound) }, from: from, count: Int(to - from)))
            i += 1
        }
        return parts
    }

    /// Drops the pieces that end at or below `offset`: read buffers go back to `freeBuffers`, and the
    /// lent buffers no piece points into any more are returned, for the caller to release once it
    /// let go of the lock.
    private func letGo(below offset: Int64) -> [Loan] {
        var count = 0
        while count < pieces.count, pieces[count].range.upperBound <= offset || offset == .max { count += 1 }
        guard count > 0 else { return [] }
        var done: [Loan] = []
        for piece in pieces[..<count] {
            let loan = piece.loan
            loan.pieces -= 1
            guard loan.pieces == 0 else { continue }
            if let i = loan.readBuffer {
                freeBuffers.append(i)
            } else {
                state.returned(footprint: loan.footprint)
                done.append(loan)
            }
        }
        pieces.removeFirst(count)
        return done
    }
}
