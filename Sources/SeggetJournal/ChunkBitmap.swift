/// One bit per chunk: set when the chunk is finished.
///
/// Chunk `i` is bit `i % 8` (least significant first) of byte `i / 8`; the unused high bits of the last
/// byte are always zero. This is also the on-disk layout.
public struct ChunkBitmap: Equatable, Sendable {
    /// The number of chunks.
    public let count: Int
    /// The packed bits, `(count + 7) / 8` bytes.
    public private(set) var bytes: [UInt8]
    /// How many chunks are set (kept up to date, so that progress reports cost nothing).
    public private(set) var setCount: Int

    /// A bitmap of `count` chunks, none set.
    public init(count: Int) {
        precondition(count >= 0, "a bitmap cannot have a negative number of chunks")
        self.count = count
        self.bytes = [UInt8](repeating: 0, count: ChunkBitmap.byteCount(forChunks: count))
        self.setCount = 0
    }

    /// The bitmap stored in `bytes`, or nil if the length is wrong for `count` or a padding bit is set.
    public init?(bytes: [UInt8], count: Int) {
        guard count >= 0, bytes.count == ChunkBitmap.byteCount(forChunks: count) else { return nil }
        if count % 8 != 0, let last = bytes.last, last & ~ChunkBitmap.lastByteMask(count: count) != 0 {
            return nil
        }
        self.count = count
        self.bytes = bytes
        self.setCount = bytes.reduce(0) { $0 + $1.nonzeroBitCount }
    }

    /// The number of bytes needed for `count` chunks.
    public static func byteCount(forChunks count: Int) -> Int { count / 8 + (count % 8 == 0 ? 0 : 1) }

    /// The bits of the last byte that belong to chunks.
    private static func lastByteMask(count: Int) -> UInt8 {
        count % 8 == 0 ? 0xFF : UInt8(truncatingIfNeeded: (1 << (count % 8)) - 1)
    }

    /// Whether chunk `i` is set.
    public subscript(i: Int) -> Bool {
        precondition(i >= 0 && i < count, "chunk \(i) is outside 0..<\(count)")
        return bytes[i >> 3] & (1 << UInt8(i & 7)) != 0
    }

    /// Sets chunk `i` (setting a set chunk does nothing).
    public mutating func set(_ i: Int) {
        precondition(i >= 0 && i < count, "chunk \(i) is outside 0..<\(count)")
        let mask: UInt8 = 1 << UInt8(i & 7)
        if bytes[i >> 3] & mask == 0 {
            bytes[i >> 3] |= mask
            setCount += 1
        }
    }

    /// Clears bit `i` (a verified chunk fetched again; the written and durable bitmaps never do).
    public mutating func clear(_ i: Int) {
        precondition(i >= 0 && i < count, "chunk \(i) is outside 0..<\(count)")
        let mask: UInt8 = 1 << UInt8(i & 7)
        if bytes[i >> 3] & mask != 0 {
            bytes[i >> 3] &= ~mask
            setCount -= 1
        }
    }

    /// The index of the byte holding chunk `i`.
    public static func byteIndex(ofChunk i: Int) -> Int { i >> 3 }

    /// Whether every chunk is set (true for zero chunks).
    public var isComplete: Bool { setCount == count }

    /// The first chunk at or after `from` that is not set, or nil.
    public func firstUnset(from: Int) -> Int? {
        var i = max(from, 0)
        while i < count {
            // Whole finished bytes are skipped eight chunks at a time.
            if i & 7 == 0, bytes[i >> 3] == 0xFF {
                i += 8
                continue
            }
            if !self[i] { return i }
            i += 1
        }
        return nil
    }

    /// The chunks set in either bitmap. Both must have the same count.
    public func union(_ other: ChunkBitmap) -> ChunkBitmap {
        precondition(count == other.count, "bitmaps of \(count) and \(other.count) chunks")
        var result = self
        var total = 0
        for k in result.bytes.indices {
            result.bytes[k] |= other.bytes[k]
            total += result.bytes[k].nonzeroBitCount
        }
        result.setCount = total
        return result
    }

    /// Whether every chunk set here is also set in `other`. Both must have the same count.
    public func isSubset(of other: ChunkBitmap) -> Bool {
        precondition(count == other.count, "bitmaps of \(count) and \(other.count) chunks")
        for k in bytes.indices where bytes[k] & ~other.bytes[k] != 0 { return false }
        return true
    }

    /// The indices of the set chunks, in order.
    public var setIndices: [Int] { (0..<count).filter { self[$0] } }
}
