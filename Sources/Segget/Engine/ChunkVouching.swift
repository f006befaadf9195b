import Dispatch
import SeggetJournal
import SeggetVerify

/// The CRC-32C of each chunk as its bytes are handed to the writer, for the journal (and of each
/// connection's partial chunk, for its progress slot). Loop thread only.
///
/// Bytes of one chunk arrive in file order from one connection, except in an end-game race, where a
/// second connection continues from where the first had got, and both may then hand over the same
/// offsets (with the same bytes). So a running checksum grows by whatever part of a piece lies beyond
/// what it already covers; a piece that starts beyond it (a gap) leaves it alone, and the chunk then
/// gets no checksum: it is not recorded in the journal and is fetched again after a resume.
struct ChunkCRCTracker {
    let plan: ChunkPlan
    /// Chunk → (offset up to which its bytes are covered, their CRC-32C).
    private(set) var running: [Int: (upTo: Int64, crc: UInt32)] = [:]

    init(plan: ChunkPlan) { self.plan = plan }

    /// Starts chunk `chunk`'s checksum at `upTo` with the checksum of its bytes before (a partial chunk
    /// of an earlier run, whose bytes on disk were checked against `crc`).
    mutating func seed(chunk: Int, upTo: Int64, crc: UInt32) {
        running[chunk] = (upTo, crc)
    }

    /// Takes in `bytes`, which are handed over for file offset `offset`.
    mutating func add(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        var at = offset
        let end = offset + Int64(bytes.count)
        while at < end {
            let k = plan.chunk(containing: at)
            let range = plan.byteRange(ofChunk: k)
            let pieceEnd = min(end, range.upperBound)
            let covered = running[k]?.upTo ?? range.lowerBound
            if covered >= at && covered < pieceEnd {
                let from = Int(covered - offset)
                let piece = UnsafeRawBufferPointer(rebasing: bytes[from..<Int(pieceEnd - offset)])
                running[k] = (pieceEnd, CRC32C.update(running[k]?.crc ?? 0, piece))
            }
            at = pieceEnd
        }
    }

    /// The checksum of chunk `chunk`'s bytes from its start up to `upTo`, if that is exactly how far
    /// it is covered.
    func crc(ofChunk chunk: Int, upTo: Int64) -> UInt32? {
        guard let r = running[chunk], r.upTo == upTo else { return nil }
        return r.crc
    }

    /// The checksum of the whole of chunk `chunk`, if all of it was covered; forgets the chunk.
    mutating func takeFinished(_ chunk: Int) -> UInt32? {
        guard let r = running.removeValue(forKey: chunk), r.upTo == plan.byteRange(ofChunk: chunk).upperBound else {
            return nil
        }
        return r.crc
    }

    /// Forgets chunk `chunk` (it is to be fetched again from its start).
    mutating func forget(_ chunk: Int) {
        running[chunk] = nil
    }
}

/// Reads the chunks a resumed journal claims, behind the download, and checks each against its
/// recorded CRC-32C. The engine keeps a chunk only once it matched, fetches those that did not, and
/// does not finish before every claimed chunk was checked.
///
/// Reading runs on its own queue with `pread` on the data file's descriptor, which is safe beside the
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
    // Guarded by `lock`.
    private var results: [(chunk: Int, matches: Bool)] = []
    private var produced = 0
    private var stopping = false
    private var running = true
    // Loop thread only.
    private(set) var taken = 0

    /// Starts checking `claims` (in the order given) in the background.
    init(data: BlockStorage, plan: ChunkPlan, claims: [Claim]) {
        self.data = data
        self.plan = plan
        self.claims = claims
        DispatchQueue(label: "segget.vouch").async { [self] in readAll() }
    }

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

    private func readAll() {
        let bufferSize = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 4096)
        defer {
            buffer.deallocate()
            lock.withLock {
                running = false
                lock.broadcast()
            }
        }
        for claim in claims {
            if lock.withLock({ stopping }) { return }
            let matches = Self.crc(of: plan.byteRange(ofChunk: claim.chunk), in: data, buffer: buffer) == claim.crc
            lock.withLock {
                results.append((claim.chunk, matches))
                produced += 1
            }
        }
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
                markInFile(k)
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
    /// Continues the partial chunks of an earlier run where they stopped: their checksums go on from
    /// the recorded ones.
    func resume(partials: [Int: PartialChunk]) {
        partialChunks = partials.mapValues(\.upTo)
        for (chunk, p) in partials { chunkCRCs.seed(chunk: chunk, upTo: p.upTo, crc: p.crc) }
    }
}
