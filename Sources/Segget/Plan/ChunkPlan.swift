/// How a file of known length is cut into fixed-size chunks, the unit of the resume journal.
///
/// Chunk `k` covers bytes `k * chunkSize ..< min((k + 1) * chunkSize, totalLength)`; the last chunk
/// may be short; an empty file has no chunks.
public struct ChunkPlan: Equatable, Sendable {
    public let totalLength: Int64
    public let chunkSize: Int64

    public init(totalLength: Int64, chunkSize: Int64) {
        precondition(totalLength >= 0 && chunkSize > 0)
        self.totalLength = totalLength
        self.chunkSize = chunkSize
    }

    /// Written without `totalLength + chunkSize - 1`, which traps for a length near `Int64.max` (a
    /// server's `Content-Range` total).
    public var chunkCount: Int { Int(totalLength / chunkSize + (totalLength % chunkSize == 0 ? 0 : 1)) }

    /// Byte offsets of chunk `k`, half-open.
    public func byteRange(ofChunk k: Int) -> Range<Int64> {
        let start = Int64(k) * chunkSize
        return start..<min(start + chunkSize, totalLength)
    }

    /// Byte offsets of a run of chunks, half-open.
    public func byteRange(ofChunks run: Range<Int>) -> Range<Int64> {
        guard !run.isEmpty else { return 0..<0 }
        return byteRange(ofChunk: run.lowerBound).lowerBound..<byteRange(ofChunk: run.upperBound - 1).upperBound
    }

    /// The chunks for which `isIn` holds, as byte ranges, each run of neighbours as one range.
    public func byteRanges(ofChunksWhere isIn: (Int) -> Bool) -> [Range<Int64>] {
        var ranges: [Range<Int64>] = []
        var k = 0
        while k < chunkCount {
            guard isIn(k) else {
                k += 1
                continue
            }
            let first = k
            while k < chunkCount && isIn(k) { k += 1 }
            ranges.append(byteRange(ofChunks: first..<k))
        }
        return ranges
    }

    /// Bytes of the chunks for which `isIn` holds (the finished ones, the ones a journal marks).
    public func bytes(ofChunksWhere isIn: (Int) -> Bool) -> Int64 {
        (0..<chunkCount).reduce(Int64(0)) { $0 + (isIn($1) ? Int64(byteRange(ofChunk: $1).count) : 0) }
    }

    /// Bytes from the starts of chunks to the offsets given for them (chunk → offset inside it:
    /// the parts of unfinished chunks written so far).
    func bytes(upTo offsets: [Int: Int64]) -> Int64 {
        offsets.reduce(Int64(0)) { $0 + $1.value - byteRange(ofChunk: $1.key).lowerBound }
    }

    /// The chunk that holds byte `offset`.
    public func chunk(containing offset: Int64) -> Int { Int(offset / chunkSize) }

    /// Cuts the chunks that are not yet finished into at most `connections` contiguous runs of nearly
    /// equal size. Finished chunks split runs; when the unfinished chunks are fragmented there may be
    /// more fragments than connections, and the extra ones are returned in `unassigned`.
    public func initialRuns(connections: Int, isFinished: (Int) -> Bool) -> (runs: [Range<Int>], unassigned: [Range<Int>]) {
        precondition(connections >= 1)
        var holes: [Range<Int>] = []
        var k = 0
        let n = chunkCount
        while k < n {
            if isFinished(k) {
                k += 1
                continue
            }
            let start = k
            while k < n && !isFinished(k) { k += 1 }
            holes.append(start..<k)
        }
        let missing = holes.reduce(0) { $0 + $1.count }
        guard missing > 0 else { return ([], []) }
        // Give each hole a share of the connections in proportion to its size (largest remainder),
        // at least one each while connections last, then cut each hole into near-equal parts.
        var shares = [Int](repeating: 0, count: holes.count)
        if holes.count <= connections {
            let spare = connections - holes.count
            var remainders: [(Int, Int)] = []
            var given = 0
            for (i, h) in holes.enumerated() {
                let exact = spare * h.count
                shares[i] = 1 + exact / missing
                given += exact / missing
                remainders.append((exact % missing, i))
            }
            for (_, i) in remainders.sorted(by: { $0.0 > $1.0 || ($0.0 == $1.0 && $0.1 < $1.1) }).prefix(spare - given) {
                shares[i] += 1
            }
        } else {
            shares = [Int](repeating: 1, count: holes.count)
        }
        var pieces: [Range<Int>] = []
        for (i, hole) in holes.enumerated() {
            let parts = min(shares[i], hole.count)
            let base = hole.count / parts
            let extra = hole.count % parts
            var lo = hole.lowerBound
            for j in 0..<parts {
                let size = base + (j < extra ? 1 : 0)
                pieces.append(lo..<(lo + size))
                lo += size
            }
        }
        if pieces.count <= connections { return (pieces, []) }
        // Give the connections the largest fragments; the rest wait in the free pool.
        let order = pieces.indices.sorted { pieces[$0].count > pieces[$1].count || (pieces[$0].count == pieces[$1].count && $0 < $1) }
        let chosen = Set(order.prefix(connections))
        var runs: [Range<Int>] = []
        var rest: [Range<Int>] = []
        for (i, p) in pieces.enumerated() {
            if chosen.contains(i) { runs.append(p) } else { rest.append(p) }
        }
        return (runs, rest)
    }
}
