import Dispatch
import Synchronization
import SeggetJournal
import SeggetSystem
import SeggetVerify

/// Writes received bytes to the data file through one staging buffer per connection, on a writer
/// thread, choosing for every buffer between `O_DIRECT` and the page cache.
///
/// Why two paths: on Linux, writing through the page cache costs CPU for every new page (allocation,
/// the copy, later writeback), about 2.5 CPU-seconds per GiB on the 2-core VM the benchmarks ran on,
/// more than the whole network side. `O_DIRECT` writes go from an aligned user buffer straight to the
/// device for about 0.1 CPU-seconds per GiB, but they wait for the device: on a disk slower than the
/// network (CI's virtio disk wrote 1 GiB in 2.0–3.3 s; throttled cloud volumes, HDDs) a download
/// written only with `O_DIRECT` runs at the disk's speed while the page cache could absorb it.
///
/// The adaptive rule (the default): a buffer is written with `O_DIRECT` while the disk keeps up, that
/// is while fewer than `directBacklogLimit` other buffers wait behind it; otherwise through the page
/// cache, which returns at memory speed. A disk that keeps up therefore sees only direct writes, and
/// one that does not sees as many direct writes as it can take, the rest going to the page cache:
/// the fetch loop never waits for the device while memory can absorb the data.
///
/// How: a connection copies what libcurl hands it into its `Staging`, which maps a window of the file
/// starting at a 4 KiB boundary. A full buffer is handed to the writer (`flush`) and the connection
/// continues in another buffer from a small pool. Every hand-over gets a ticket; `completedTicket()`
/// says up to which ticket the writes are done. The engine marks a chunk in the journal, records a
/// progress slot or tells the hasher about a prefix only once the ticket of the chunk's last bytes is
/// completed, so "bytes the journal vouches for are in the file" holds whichever path wrote them.
///
/// Pieces that do not cover a whole 4 KiB block (a range starting or ending inside a block: the file's
/// end, or a chunk size that is not a multiple of 4 KiB) go through the ordinary descriptor. If the
/// file system refuses `O_DIRECT` (at open or on the first write) everything goes through the ordinary
/// descriptor, still in large writes.
final class StagedWriter: @unchecked Sendable {
    static let alignment = directIOAlignment

    /// The ordinary descriptor (page cache).
    let data: BlockStorage
    let bufferSize: Int
    /// Called on the loop thread with every run of bytes as it is handed over, the size of the buffer
    /// that holds it, and a closure that gives the buffer back: the hasher may keep the buffer (it
    /// then calls the closure once it hashed the bytes, and the buffer is reused only after that and
    /// the write). Bytes it says fell out of its window, which it reads back from the file later, are
    /// written through the page cache (adaptive path), where that read finds them.
    var lend: ((UnsafeRawBufferPointer, Int64, Int, @escaping @Sendable () -> Void) -> PrefixHasher.Lending)?
    /// Called on the writer thread with every run of bytes just before it is written (the buffer is
    /// reused only after both): work on the written bytes that must not hold up the fetch loop, such as
    /// the chunk checksums of the journal. With the CPU's CRC instruction a 256 KiB buffer takes about
    /// 30 µs, less than handing it to another thread and waiting for it cost (1 GiB uncapped, 3 runs
    /// each, interleaved with runs without checksums: 0.86–1.05 s that way against 0.62–0.64 s; inline
    /// 0.73–0.92 s against 0.69–0.93 s). Set before the first hand-over.
    var besideWrite: (@Sendable (UnsafeRawBufferPointer, Int64) -> Void)?

    private let queue = StagedWriter.nextSharedQueue()
    /// Where the writers' writes run: two workers (a thread each), each download's writer on one of
    /// them in turn, so that two threads write for all the downloads of a process (a batch's or the
    /// daemon's). One writer thread for all of a batch made 100 files of 4 MiB 8 % slower than a
    /// thread per file; libdispatch's whole pool added threads past the batch's budget of four, and
    /// so did serial dispatch queues (the pool starts a thread when none looks free).
    static let sharedQueues = [SerialWorker(name: "segget-writer0"), SerialWorker(name: "segget-writer1")]
    private static let turn = Atomic<Int>(0)
    static func nextSharedQueue() -> SerialWorker {
        sharedQueues[turn.add(1, ordering: .relaxed).oldValue % sharedQueues.count]
    }
    /// Whole saves queued or running on each writer.
    private static let wholeSavesQueued = Mutex<[Int]>([0, 0])
    /// Runs `save` (a file that its probe brought whole: `WholeSave.save()`) on a writer: the first,
    /// unless it has a whole save queued behind the one it runs and the second has fewer. Where a
    /// file's save takes less than its download, one writer saves them all, one after another; where
    /// creation is slow, the second joins. 500 files of 64 KiB, 16 in flight, per-repetition medians
    /// ÷ the faster of curl and wget2 (interleaved, this project's 2-CPU VM): on a quiet file system
    /// 0.99 this way, 0.97 on the first writer alone, 1.10 on both in turn; right after many files
    /// were removed, when every creation on ext4 scans past the inodes freed in the last minutes,
    /// 0.67, 0.84 and 0.70. One busy writer beside the loop thread and the server is what two CPUs
    /// take best, and a writer still busy with the last file needs no wake for the next.
    static func saveWhole(_ save: @escaping @Sendable () -> Void) {
        let i = wholeSavesQueued.withLock { queued -> Int in
            let i = writerForWholeSave(queued: queued)
            queued[i] += 1
            return i
        }
        sharedQueues[i].async {
            save()
            wholeSavesQueued.withLock { $0[i] -= 1 }
        }
    }
    /// Which writer takes the next whole save, given how many each has queued or running (see
    /// `saveWhole`): the first, unless it has one waiting behind the one it runs and the second has
    /// fewer.
    static func writerForWholeSave(queued: [Int]) -> Int {
        queued[0] >= 2 && queued[1] < queued[0] ? 1 : 0
    }
    private let lock = ConditionLock()
    // Guarded by `lock`.
    private var direct: FileDescriptor?
    private var pool: [StagingBuffer] = []
    private var inFlight = 0
    private let maxInFlight: Int
    private var completed: Int64 = 0
    private var failure: Errno?
    private var directBytes: Int64 = 0
    private var pageCacheBytes: Int64 = 0
    private let adaptive: Bool
    // Loop thread only.
    private(set) var submitted: Int64 = 0
    /// Seconds `flush` waited for a free buffer: the writer behind the network (the fetch loop does not
    /// read any connection meanwhile).
    private(set) var waitedSeconds = 0.0

    /// `maxInFlight` bounds the memory: when that many buffers wait for the writer, `flush` waits too.
    init(data: BlockStorage, path: WritePath, bufferSize: Int = 256 << 10, maxInFlight: Int = 16) {
        self.data = data
        self.bufferSize = bufferSize
        self.maxInFlight = max(1, maxInFlight)
        adaptive = path == .adaptive
        if path != .pageCache, let file = data as? PosixFile { direct = file.openDirect() }
    }

    /// In adaptive mode, a buffer goes through the page cache when at least this many others wait
    /// behind it: the device has fallen behind the network. Two rather than one, so that a single
    /// slow write (a device flush, a busy neighbour) does not send the next buffer to the cache.
    static let directBacklogLimit = 2

    /// Bytes written with `O_DIRECT` and through the page cache so far (whole jobs; the partial
    /// blocks at a job's edges count as page cache).
    var bytesWritten: (direct: Int64, pageCache: Int64) { lock.withLock { (directBytes, pageCacheBytes) } }

    deinit {
        // Every queued write holds a reference to the writer, so no write is in flight here.
        direct?.close()
    }

    /// True while whole blocks may be written with `O_DIRECT`.
    var isDirect: Bool { lock.withLock { direct != nil } }

    /// The staging buffer size for `connections`: all of them together within 2 MiB, each between
    /// 256 KiB and 1 MiB (1 MiB up to 2 connections, 512 KiB up to 4, 256 KiB from 5). Smaller buffers
    /// keep the peak memory (32 MiB at `-n 8` is the goal) and what a `kill -9` loses small; larger
    /// ones make fewer `O_DIRECT` writes, each of which costs the VM a device round trip (1 GiB with
    /// only direct writes: 0.77 s with 1 MiB buffers, 0.91 s with 512 KiB, 1.17 s with 256 KiB). The
    /// adaptive path sends what direct writes cannot keep up with to the page cache, so the smaller
    /// size no longer slows the download.
    static func bufferSize(connections: Int) -> Int {
        let share = (2 << 20) / max(1, connections)
        var size = 1 << 20
        while size > share && size > 256 << 10 { size /= 2 }
        return size
    }

    /// The buffer of a download that keeps progress slots (it has a journal): as above, but at most a
    /// quarter of a chunk (in whole 4 KiB blocks, never below 256 KiB), so that buffers are handed over,
    /// and each connection's progress slot moves, inside its chunk. A buffer as large as the chunk (1 MiB
    /// up to 2 connections) filled only at the chunk's end, the slot never moved inside a chunk between
    /// ticks, and a `kill -9` lost every connection's partly written chunk: about 1 MiB per download of
    /// 2 connections at 16 MiB/s each, the daemon's usual task (issue 24).
    static func bufferSize(connections: Int, slotsInChunksOf chunkSize: Int64) -> Int {
        let quarter = Int(clamping: chunkSize / 4) / alignment * alignment
        return min(bufferSize(connections: connections), max(256 << 10, quarter))
    }

    /// How many buffers may wait for the writer: 1 MiB worth, at least 4. With the adaptive path
    /// the queue rarely holds more than `directBacklogLimit`; the bound matters when the page cache
    /// too is full of dirty pages and the kernel makes writers wait for the disk.
    static func maxInFlight(bufferSize: Int) -> Int { max(4, (1 << 20) / bufferSize) }

    /// A connection's staging area, with a buffer from the pool.
    func makeStaging() -> Staging { Staging(buffer: lock.withLock { pool.popLast() } ?? StagingBuffer(capacity: bufferSize)) }

    /// Appends `count` bytes for file offset `offset`, which must be where the staged data ends (or
    /// anything, when nothing is staged). Hands the buffer over whenever it fills; returns true if it
    /// did.
    @inline(__always)
    func append(_ s: Staging, _ ptr: UnsafeRawPointer, count: Int, at offset: Int64) -> Bool {
        if s.start == s.end {
            s.window = offset & ~Int64(Self.alignment - 1)
            s.start = offset
            s.end = offset
        }
        precondition(offset == s.end, "staged bytes must be contiguous")
        var p = ptr
        var left = count
        var flushed = false
        while left > 0 {
            let room = Int(s.window + Int64(s.buffer.capacity) - s.end)
            let n = min(room, left)
            (s.buffer.base + Int(s.end - s.window)).copyMemory(from: p, byteCount: n)
            s.end += Int64(n)
            p += n
            left -= n
            if s.end == s.window + Int64(s.buffer.capacity) {
                flush(s)
                flushed = true
            }
        }
        return flushed
    }

    /// Hands everything staged in `s` to the writer and empties `s`. The bytes are in the file once
    /// `completedTicket()` reaches `submitted`.
    func flush(_ s: Staging) {
        guard s.start < s.end else { return }
        let buffer = s.buffer
        var readBackSoon = false
        if let lend {
            // Two holders before the hasher sees it: it may give the buffer back before `lend` returns.
            buffer.holders.store(2, ordering: .relaxed)
            let bytes = UnsafeRawBufferPointer(start: buffer.base + Int(s.start - s.window), count: Int(s.end - s.start))
            let lent = lend(bytes, s.start, buffer.capacity) { [self] in giveBack(buffer) }
            if !lent.kept { buffer.holders.store(1, ordering: .relaxed) }
            readBackSoon = lent.fellOut
        } else {
            buffer.holders.store(1, ordering: .relaxed)
        }
        let job = WriteJob(buffer: buffer, window: s.window, range: s.start..<s.end, readBackSoon: readBackSoon)
        submitted += 1
        let ticket = submitted
        s.buffer = takeBuffer()
        lock.withLock { inFlight += 1 }
        let beside = besideWrite
        queue.async { [self] in
            beside?(UnsafeRawBufferPointer(start: job.buffer.base + Int(job.range.lowerBound - job.window), count: job.range.count), job.range.lowerBound)
            let error = lock.withLock { failure } == nil ? write(job) : nil
            lock.withLock {
                if let error, failure == nil { failure = error }
                completed = ticket
                inFlight -= 1
                if job.buffer.holders.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { pool.append(job.buffer) }
                lock.broadcast()
            }
        }
        s.window = s.end & ~Int64(Self.alignment - 1)
        s.start = s.end
    }

    /// Hands over the whole 4 KiB blocks staged in `s` and keeps the partial block at its end, if any,
    /// staged: what a slow connection received reaches the file without waiting for its buffer to fill
    /// (and a kill does not lose it). Returns true if it handed anything over.
    func flushWholeBlocks(_ s: Staging) -> Bool {
        let a = Int64(Self.alignment)
        let cut = s.end / a * a
        guard cut > s.start else { return false }
        let end = s.end
        let tail = Int(end - cut)
        guard tail > 0 else {
            flush(s)
            return true
        }
        return withUnsafeTemporaryAllocation(byteCount: tail, alignment: 16) { keep in
            keep.baseAddress!.copyMemory(from: s.buffer.base + Int(cut - s.window), byteCount: tail)
            s.end = cut
            flush(s)
            // `flush` left an empty staging whose window starts at `cut`: put the partial block back.
            s.buffer.base.copyMemory(from: keep.baseAddress!, byteCount: tail)
            s.end = end
            return true
        }
    }

    /// The hasher is done with a buffer lent to it: the buffer is reused once its write is done too.
    private func giveBack(_ buffer: StagingBuffer) {
        guard buffer.holders.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        lock.withLock { pool.append(buffer) }
    }

    /// Forgets what is staged (a cancelled duplicate whose chunk another connection finished).
    func discard(_ s: Staging) {
        s.start = s.end
    }

    /// Every hand-over up to this ticket is written. Throws the first write error.
    func completedTicket() throws(Errno) -> Int64 {
        try lock.withLock { () throws(Errno) -> Int64 in
            if let failure { throw failure }
            return completed
        }
    }

    /// Waits until every hand-over so far is written. Throws the first write error.
    func drain() throws(Errno) {
        let target = submitted
        try lock.withLock { () throws(Errno) in
            while completed < target && failure == nil { lock.wait() }
            if let failure { throw failure }
        }
    }

    /// A buffer to stage into while the full one is written: waits while `maxInFlight` buffers are
    /// queued, then reuses a written one or allocates.
    private func takeBuffer() -> StagingBuffer {
        var waitStart: Double?
        let reused: StagingBuffer? = lock.withLock {
            while inFlight >= maxInFlight && failure == nil {
                if waitStart == nil { waitStart = monotonicSeconds() }
                lock.wait()
            }
            return pool.popLast()
        }
        if let waitStart { waitedSeconds += monotonicSeconds() - waitStart }
        return reused ?? StagingBuffer(capacity: bufferSize)
    }

    /// Writes one job: partial blocks through the page cache; whole blocks with `O_DIRECT` unless the
    /// adaptive rule sends them to the page cache too (see `directBacklogLimit`).
    private func write(_ job: WriteJob) -> Errno? {
        let a = Int64(Self.alignment)
        var from = job.range.lowerBound
        let end = job.range.upperBound
        // Bytes the hasher will read back go to the page cache, unless the user asked for O_DIRECT.
        let useDirect = lock.withLock {
            direct != nil && (!adaptive || (inFlight - 1 < Self.directBacklogLimit && !job.readBackSoon))
        }
        do throws(Errno) {
            if useDirect {
                let bodyStart = (from + a - 1) / a * a
                let bodyEnd = end / a * a
                if bodyStart < bodyEnd {
                    if bodyStart > from {
                        try writeBuffered(job, from..<bodyStart)
                    }
                    let reached = try writeDirect(job, bodyStart..<bodyEnd)
                    lock.withLock { directBytes += reached - bodyStart }
                    from = reached
                }
            }
            if from < end {
                try writeBuffered(job, from..<end)
                lock.withLock { pageCacheBytes += end - from }
            }
            return nil
        } catch {
            return error
        }
    }

    private func writeBuffered(_ job: WriteJob, _ r: Range<Int64>) throws(Errno) {
        try data.write(UnsafeRawBufferPointer(start: job.buffer.base + Int(r.lowerBound - job.window), count: r.count), at: r.lowerBound)
    }

    /// Writes the aligned range with `O_DIRECT`; returns where it got. On `EINVAL` (a file system that
    /// accepts the flag but not the I/O) it stops using `O_DIRECT` and returns the start, so the caller
    /// writes the rest through the page cache.
    /// A short write that ends inside a block also returns where it got: the rest cannot go on with `O_DIRECT`.
    private func writeDirect(_ job: WriteJob, _ r: Range<Int64>) throws(Errno) -> Int64 {
        guard let fd = lock.withLock({ direct }) else { return r.lowerBound }
        let bytes = UnsafeRawBufferPointer(start: job.buffer.base + Int(r.lowerBound - job.window), count: r.count)
        let alignment = Int64(Self.alignment)
        let progress = fd.writeAll(bytes, at: r.lowerBound) { (r.lowerBound + Int64($0)) % alignment == 0 }
        let at = r.lowerBound + Int64(progress.written)
        switch progress.error {
        case nil:
            return at
        case .invalidArgument?:
            lock.withLock {
                if direct == fd {
                    fd.close()
                    direct = nil
                }
            }
            return at
        case let error?:
            throw error
        }
    }
}

/// How the data file is written.
public enum WritePath: String, Sendable, CaseIterable {
    /// `O_DIRECT` while the disk keeps up with the network, the page cache for what it cannot take
    /// (see `StagedWriter`). Falls back to the page cache where the file system refuses `O_DIRECT`.
    case adaptive
    /// Whole blocks always with `O_DIRECT` where the file system allows it: the download runs at most
    /// at the disk's speed, with the least CPU.
    case direct
    /// Always through the page cache.
    case pageCache = "page-cache"
}

/// Aligned memory for staged bytes. Its memory goes to a `StagingMemory` store when it is dropped,
/// for the next download of the process to stage into.
final class StagingBuffer: @unchecked Sendable {
    private let memory: AlignedBuffer
    private let store: StagingMemory
    // Copied out of `memory` so that the per-callback copy reads one field.
    let base: UnsafeMutableRawPointer
    let capacity: Int
    /// Who still needs the buffer once it is handed over: its write, and the hasher if it kept it.
    /// It goes back to the writer's pool when both are done.
    let holders = Atomic<Int>(0)

    init(capacity: Int, store: StagingMemory = .shared) {
        memory = store.take(capacity: capacity) ?? AlignedBuffer(count: capacity, alignment: StagedWriter.alignment)
        self.store = store
        base = memory.base
        self.capacity = capacity
    }

    deinit { store.keep(memory) }
}

/// Staging memory that ended downloads left, kept for the next ones in this process (at most
/// `limit` bytes): a batch runs one download after another on each of its workers, and fresh memory
/// costs the kernel a page fault and a zeroed page per 4 KiB the first time it is written. 100 files
/// of 4 MiB, 16 at a time: 70,000 page faults, 1.8 MiB of fresh memory per file.
final class StagingMemory: Sendable {
    /// The process's store: as much as a batch of 16 files on one connection each stages at once.
    static let shared = StagingMemory(limit: 32 << 20)

    let limit: Int
    private let kept = Mutex<(bytes: Int, buffers: [AlignedBuffer])>((0, []))

    init(limit: Int) { self.limit = limit }

    /// Kept memory of exactly `capacity` bytes, if there is some.
    func take(capacity: Int) -> AlignedBuffer? {
        kept.withLock { k in
            guard let i = k.buffers.lastIndex(where: { $0.count == capacity }) else { return nil }
            k.bytes -= capacity
            return k.buffers.remove(at: i)
        }
    }

    /// Keeps `memory` for a later `take`, unless `limit` bytes are kept already.
    func keep(_ memory: AlignedBuffer) {
        kept.withLock { k in
            guard k.bytes + memory.count <= limit else { return }
            k.bytes += memory.count
            k.buffers.append(memory)
        }
    }
}

/// One connection's staging area: a window of the file starting at a 4 KiB boundary, holding the
/// bytes `start..<end` (file offsets) not yet handed to the writer.
final class Staging {
    var buffer: StagingBuffer
    /// File offset of `buffer.base[0]`, a multiple of 4 KiB.
    var window: Int64 = 0
    var start: Int64 = 0
    var end: Int64 = 0

    init(buffer: StagingBuffer) { self.buffer = buffer }

    var isEmpty: Bool { start == end }
}

/// A full (or final) buffer on its way to the file.
private struct WriteJob: @unchecked Sendable {
    let buffer: StagingBuffer
    let window: Int64
    let range: Range<Int64>
    /// The hasher will read some of these bytes back (they fell out of its window).
    let readBackSoon: Bool
}
