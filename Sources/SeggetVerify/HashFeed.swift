/// Where the bytes of a download's hasher come from, and how far each digest got: the bookkeeping of
/// `PrefixHasher`, without its memory, reads or threads. Values in, values out.
///
/// The bytes of the file are offered from memory as the download hands them to its writer, in any
/// order (`offer`). Those inside the reorder window (`window`: `[hashed, hashed + capacity)`) are
/// kept, as long as the buffers behind them (`footprint`) stay within `memoryLimit`; the rest falls
/// out. A hole at the head of the window (bytes that fell out, bytes kept on disk from an earlier
/// run, bytes never offered) is read back from the file once the file holds it (`inFile`,
/// `takeRead`). Each digest hashes the held bytes in file order from where it got (`takeHash`), and
/// bytes are let go once every digest has passed them (`hashed`).
///
/// So a download whose connections stay within the window is hashed from memory alone, a resumed one
/// reads its kept part from the file and then, once the hash has caught up with the bytes arriving,
/// takes them from memory, and a hash that falls behind costs reads, never a wait for the network.
public struct HashFeed: Sendable, Equatable {
    /// The bytes held, and the hashed prefix (`window.handedOn`): every digest hashed everything
    /// below it.
    public private(set) var window: ReorderWindow
    /// The most memory the bytes kept from memory may hold (their buffers, which may be larger).
    public let memoryLimit: Int
    /// A digest starts a step once this many bytes are ready for it (fewer: see `takeHash`), so that
    /// the hash does not wake for every small offer.
    public let minimumStep: Int64
    /// Memory held now by bytes kept from memory, and the most it held.
    public private(set) var footprint = 0
    public private(set) var peakFootprint = 0
    /// Every byte below this offset is in the file.
    public private(set) var inFile: Int64 = 0
    /// The file's length, once known (the download ended).
    public private(set) var length: Int64?
    /// How far each digest hashed, and whether a step of it runs now.
    public private(set) var positions: [Int64]
    public private(set) var hashing: [Bool]
    /// The bytes being read back now, if any.
    public private(set) var reading: Range<Int64>?
    /// Bytes kept from memory (each is hashed from there), bytes read back from the file, and bytes
    /// offered that fell out of the window (or beyond the memory limit) and are read back instead.
    public private(set) var fromMemory: Int64 = 0
    public private(set) var readBack: Int64 = 0
    public private(set) var fellOut: Int64 = 0

    /// A feed for `digests` digests over a file, with a window of `capacity` bytes.
    public init(capacity: Int64, memoryLimit: Int, digests: Int, minimumStep: Int64 = 1 << 20) {
        window = ReorderWindow(capacity: max(1, capacity))
        self.memoryLimit = memoryLimit
        self.minimumStep = max(1, minimumStep)
        positions = Array(repeating: 0, count: digests)
        hashing = Array(repeating: false, count: digests)
    }

    /// Every digest hashed every byte below this offset.
    public var hashed: Int64 { window.handedOn }

    /// Every digest hashed the whole file.
    public var isComplete: Bool { length.map { hashed >= $0 } ?? false }

    /// What to do with bytes offered from memory.
    public struct Offer: Sendable, Equatable {
        /// The parts to keep (in order); empty when nothing is kept.
        public var keep: [Range<Int64>]
        /// Some of the bytes fell out: the hash reads them back from the file later.
        public var fellOut: Bool
    }

    /// Bytes `r`, held in memory by buffers of `footprint` bytes, are offered: keeps the parts inside
    /// the window that are not held already, unless their buffers would take the memory beyond
    /// `memoryLimit`. Bytes below the hashed prefix are not needed; bytes beyond the window fall out.
    public mutating func offer(_ r: Range<Int64>, footprint: Int) -> Offer {
        let r = length.map { r.clamped(to: 0..<$0) } ?? r
        let beyond = max(0, r.upperBound - max(r.lowerBound, window.limit))
        let parts = window.unheld(in: r)
        guard !parts.isEmpty else {
            fellOut += beyond
            return Offer(keep: [], fellOut: beyond > 0)
        }
        guard self.footprint + footprint <= memoryLimit else {
            fellOut += beyond + parts.reduce(0) { $0 + Int64($1.count) }
            return Offer(keep: [], fellOut: true)
        }
        for p in parts {
            window.arrived(p)
            fromMemory += Int64(p.count)
        }
        fellOut += beyond
        self.footprint += footprint
        peakFootprint = max(peakFootprint, self.footprint)
        return Offer(keep: parts, fellOut: beyond > 0)
    }

    /// The buffers of bytes kept from memory (`footprint` bytes) were let go.
    public mutating func returned(footprint: Int) {
        self.footprint -= footprint
    }

    /// Every byte below `offset` is in the file now; a smaller offset than before changes nothing.
    public mutating func advanceFile(to offset: Int64) {
        inFile = max(inFile, offset)
    }

    /// The file is `length` bytes long: every byte is there, and every one is to be hashed.
    public mutating func end(at length: Int64) {
        self.length = length
        advanceFile(to: length)
    }

    /// The next read back, if one can start: the hole at the head of the window, as far as the file
    /// holds it, at most `maxBytes`. Marks it as being read. Nil while a read runs.
    public mutating func takeRead(maxBytes: Int) -> Range<Int64>? {
        guard reading == nil, let gap = window.firstGap else { return nil }
        let end = min(gap.upperBound, inFile, gap.lowerBound + Int64(maxBytes), length ?? .max)
        guard gap.lowerBound < end else { return nil }
        reading = gap.lowerBound..<end
        return reading
    }

    /// The read that ran ended with its bytes up to `end` in memory (all of them, or fewer): returns
    /// the parts to keep, those not offered from memory meanwhile (a duplicate from an end-game race).
    public mutating func readEnded(through end: Int64) -> [Range<Int64>] {
        guard let asked = reading else { return [] }
        reading = nil
        let r = asked.lowerBound..<max(asked.lowerBound, min(end, asked.upperBound))
        readBack += Int64(r.count)
        let parts = window.unheld(in: r)
        for p in parts { window.arrived(p) }
        return parts
    }

    /// The read that ran failed.
    public mutating func readFailed() {
        reading = nil
    }

    /// The next bytes digest `d` may hash, at most `maxBytes` of the held bytes from where it got,
    /// and marks it as hashing. Nil while it hashes, when nothing is held for it, or when fewer than
    /// `minimumStep` bytes are and more are still to come before the file's finished prefix (then
    /// the hash is never behind the file, and from memory it runs in steps of `minimumStep`).
    public mutating func takeHash(_ d: Int, maxBytes: Int) -> Range<Int64>? {
        guard !hashing[d], let ready = window.ready else { return nil }
        let from = positions[d]
        let end = min(ready.upperBound, length ?? .max)
        guard from < end else { return nil }
        let worthIt = end - from >= minimumStep || length != nil || end >= window.limit || inFile >= end
        guard worthIt else { return nil }
        hashing[d] = true
        return from..<min(end, from + Int64(max(1, maxBytes)))
    }

    /// Digest `d` hashed everything below `end` (its step ended). Returns the hashed prefix: the
    /// bytes below it may be let go.
    @discardableResult
    public mutating func hashed(_ d: Int, upTo end: Int64) -> Int64 {
        positions[d] = max(positions[d], end)
        hashing[d] = false
        if let low = positions.min(), low > window.handedOn {
            window.handOn(low - window.handedOn)
        }
        return window.handedOn
    }

    /// Digest `d`'s step ended without hashing (the hash was cancelled or failed).
    public mutating func stepAbandoned(_ d: Int) {
        hashing[d] = false
    }
}
