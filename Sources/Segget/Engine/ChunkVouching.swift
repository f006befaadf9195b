import SeggetJournal
import SeggetVerify
import Synchronization

/// The CRC-32C of each chunk, from its bytes as they are handed to the writer (for the journal), and of
/// the first part of a chunk a connection is writing (for its progress slot). Thread-safe: pieces may
/// be added from any thread, in any order.
///
/// Each piece is checksummed on its own and joined to what it continues with `CRC32C.combine`. A chunk's
/// bytes normally arrive in order from one connection, but in an end-game race a second connection
/// continues from where the first had got, and both may then hand over the same offsets (with the same
/// bytes); a retry continues where the connection stopped; a rerun continues a partial chunk from its
/// progress slot (`seed`). So the tracker keeps, per chunk, every offset up to which the bytes from the
/// chunk's start are covered (with their checksum), and pieces that start elsewhere until something
/// reaches their start. A chunk that is never covered end to end has no checksum: it is not recorded
/// in the journal, and is fetched again after a resume.
final class ChunkChecksums: Sendable {
    let plan: ChunkPlan

    private struct Coverage {
        /// Offset → checksum of the chunk's bytes from its start up to that offset.
        var reachable: [Int64: UInt32]
        /// Pieces whose start is not reachable yet: start → (end, checksum of the piece).
        var waiting: [Int64: [(end: Int64, crc: UInt32)]] = [:]
    }
    private let chunks = Mutex<[Int: Coverage]>([:])

    init(plan: ChunkPlan) { self.plan = plan }

    /// Takes in `bytes`, which are handed over for file offset `offset`.
    func add(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        var at = offset
        let end = offset + Int64(bytes.count)
        while at < end {
            let k = plan.chunk(containing: at)
            let pieceEnd = min(end, plan.byteRange(ofChunk: k).upperBound)
            let crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[Int(at - offset)..<Int(pieceEnd - offset)]))
            chunks.withLock { insert(&$0, chunk: k, from: at, to: pieceEnd, crc: crc) }
            at = pieceEnd
        }
    }

    /// Starts chunk `chunk` at `upTo` with `crc`, the checksum of its bytes before (a partial chunk of
    /// an earlier run, whose bytes on disk were checked against it).
    func seed(chunk: Int, upTo: Int64, crc: UInt32) {
        chunks.withLock { insert(&$0, chunk: chunk, from: plan.byteRange(ofChunk: chunk).lowerBound, to: upTo, crc: crc) }
    }

    /// The checksum of chunk `chunk`'s bytes from its start up to `upTo`, if they are covered.
    func crc(ofChunk chunk: Int, upTo: Int64) -> UInt32? {
        chunks.withLock { $0[chunk]?.reachable[upTo] }
    }

    /// The checksum of the whole of chunk `chunk`, if all of it is covered; forgets the chunk.
    func takeFinished(_ chunk: Int) -> UInt32? {
        chunks.withLock { $0.removeValue(forKey: chunk)?.reachable[plan.byteRange(ofChunk: chunk).upperBound] }
    }

    /// Forgets chunk `chunk` (it is to be fetched again from its start).
    func forget(_ chunk: Int) {
        _ = chunks.withLock { $0.removeValue(forKey: chunk) }
    }

    /// Records that the piece `from..<to` of chunk `chunk` has checksum `crc`, and follows every piece
    /// that now continues from the chunk's start.
    private func insert(_ all: inout [Int: Coverage], chunk: Int, from: Int64, to: Int64, crc: UInt32) {
        let start = plan.byteRange(ofChunk: chunk).lowerBound
        var c = all[chunk] ?? Coverage(reachable: [start: 0])
        var work = [(from: from, to: to, crc: crc)]
        while let p = work.popLast() {
            guard let before = c.reachable[p.from] else {
                c.waiting[p.from, default: []].append((p.to, p.crc))
                continue
            }
            guard c.reachable[p.to] == nil else { continue }
            c.reachable[p.to] = CRC32C.combine(before, p.crc, secondLength: p.to - p.from)
            for next in c.waiting.removeValue(forKey: p.to) ?? [] { work.append((p.to, next.end, next.crc)) }
        }
        all[chunk] = c
    }
}

/// Reads the chunks a resumed journal claims, behind the download, and checks each against its
/// recorded CRC-32C. The engine keeps a chunk only once it matched, fetches those that did not, and
/// does not finish before every claimed chunk was checked.
///
/// Reading runs on the read-back pool with `pread` on the data file's descriptor, which is safe beside the
/// writer: nobody writes a chunk that is waiting here (the scheduler counts it as finished until it
/// fails).
final class ChunkVoucher: @unchecked Sendable {
    /// One claimed chunk and the checksum its bytes must have.
    struct Claim: Equatable, Sendable {
        var chunk: Int
        var crc: UInt32
    }

    let claims: [Claim]
    private let data: BlockStorage
    private let plan: ChunkPlan
    private let lock = ConditionLock()
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
    // Guarded by `lock`.
    private var results: [(chunk: Int, matches: Bool)] = []
    private var next = 0
    private var stopping = false
    private var running = true
    // Loop thread only.
    private(set) var taken = 0

    /// Starts checking `claims` (in the order given) in the background: one chunk per step on the
    /// threads of `WorkerPool.readBack`, shared with every download's hasher.
    init(data: BlockStorage, plan: ChunkPlan, claims: [Claim]) {
        self.data = data
        self.plan = plan
        self.claims = claims
        WorkerPool.readBack.async { [self] in step() }
    }

    // Every step holds the voucher, so none runs any more when it goes.
    deinit { buffer.deallocate() }

    /// True once every claim was checked and its result taken.
    var isDone: Bool { taken == claims.count }

    /// The results produced since the last call: each claimed chunk, and whether its bytes matched.
    func take() -> [(chunk: Int, matches: Bool)] {
        let out: [(chunk: Int, matches: Bool)] = lock.withLock {
            defer { results.removeAll(keepingCapacity: true) }
            return results
        }
        taken += out.count
        return out
    }

    /// Stops reading and waits until the reader has let go of the data file.
    func stop() {
        lock.withLock {
            stopping = true
            while running { lock.wait() }
        }
    }

    /// One step: the next claimed chunk read and checked; then the next step, queued behind the
    /// other downloads' work.
    private func step() {
        let claim: Claim? = lock.withLock {
            guard !stopping, next < claims.count else {
                running = false
                lock.broadcast()
                return nil
            }
            next += 1
            return claims[next - 1]
        }
        guard let claim else { return }
        let matches = Self.crc(of: plan.byteRange(ofChunk: claim.chunk), in: data, buffer: buffer) == claim.crc
        lock.withLock { results.append((claim.chunk, matches)) }
        WorkerPool.readBack.async { [self] in step() }
    }

    /// The CRC-32C of the bytes `range` of `data`, or nil if they cannot all be read.
    static func crc(of range: Range<Int64>, in data: BlockStorage, buffer: UnsafeMutableRawBufferPointer) -> UInt32? {
        var crc: UInt32 = 0
        var at = range.lowerBound
        while at < range.upperBound {
            let want = Int(min(Int64(buffer.count), range.upperBound - at))
            let got: Int
            do {
                got = try data.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: at)
            } catch {
                return nil
            }
            guard got > 0 else { return nil }
            crc = CRC32C.update(crc, UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            at += Int64(got)
        }
        return crc
    }

    /// The partial chunks of an earlier run whose written prefix still matches the checksum its progress
    /// slot recorded; the others are fetched from their start. Reads at most one chunk per slot (what
    /// the earlier run's connections had in flight), whatever the file's size.
    static func keepMatchingPartials(
        _ partial: [Int: PartialChunk], data: BlockStorage, plan: ChunkPlan
    ) -> (kept: [Int: PartialChunk], rejected: Int) {
        guard !partial.isEmpty else { return ([:], 0) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var kept: [Int: PartialChunk] = [:]
        for (chunk, p) in partial {
            let start = plan.byteRange(ofChunk: chunk).lowerBound
            if crc(of: start..<p.upTo, in: data, buffer: buffer) == p.crc { kept[chunk] = p }
        }
        return (kept, partial.count - kept.count)
    }
}

extension FetchEngine {
    /// Sets the engine up to keep the claimed chunks only as `voucher` vouches for them: until then
    /// they do not count as being in the file (the hasher's prefix stops before them).
    func vouch(with voucher: ChunkVoucher) {
        vouching = voucher
        for c in voucher.claims { inFile[c.chunk] = false }
        prefixChunks = 0
        while prefixChunks < inFile.count && inFile[prefixChunks] { prefixChunks += 1 }
    }

    /// Takes the voucher's results: a chunk that matched is in the file; one that did not is fetched
    /// again. Tells the user once, when the last claim was checked, how many failed.
    func collectVouched() {
        guard let voucher = vouching, !voucher.isDone else { return }
        for (k, matches) in voucher.take() {
            if matches {
                chunkInFile(k)
            } else {
                rejectedChunks += 1
                rejectedBytes += Int64(plan.byteRange(ofChunk: k).count)
                chunkCRCs.forget(k)
                reopen(k)
            }
        }
        if voucher.isDone && rejectedChunks > 0 {
            onEvent?(.notice("\(rejectedChunks) of \(voucher.claims.count) chunks kept from the last run did not match their checksums (the partial file or its journal was changed); fetching them again."))
        }
    }
}

/// The part of a chunk an earlier run wrote, as its progress slot recorded it.
struct PartialChunk: Equatable, Sendable {
    /// The file offset up to which the chunk's bytes were written.
    var upTo: Int64
    /// The CRC-32C of the chunk's bytes from its start up to `upTo`.
    var crc: UInt32
}

extension FetchEngine {
    /// The partial chunks (`partialChunks`) are continued where they stopped: their checksums go on
    /// from the recorded ones.
    func continueChecksums(of partials: [Int: PartialChunk]) {
        for (chunk, p) in partials { chunkCRCs.seed(chunk: chunk, upTo: p.upTo, crc: p.crc) }
    }

    /// The partial chunks go into the last progress slots, which a connection writes only when a
    /// download grows to that many (slots are by connection), so that an interruption keeps them even
    /// where no connection continued them (a rerun with fewer connections than the run before). A
    /// connection that continues one records its own slot further on; the reader keeps the furthest
    /// record of a chunk.
    func recordKeptPartials(_ partials: [Int: PartialChunk]) {
        guard let slots = progressSlots, target.ranged else { return }
        var slot = ProgressSlots.slotCount - 1
        for (chunk, p) in partials.sorted(by: { $0.key < $1.key }) where slot >= core.connections.count {
            try? slots.record(slot: slot, chunk: chunk, upTo: p.upTo, crc: p.crc)
            slot -= 1
        }
    }
}
