/// The digest of every piece of a file, as a Metalink publishes them (`<pieces length="L" type="sha-256">`):
/// piece `i` is the file's bytes `i·L ..< min((i+1)·L, size)`, and must hash to `digest(of: i)`.
///
/// The digests are kept in one flat array (a file of 16 GiB in pieces of 256 KiB has 65,536 of them).
public struct PieceHashes: Sendable, Equatable {
    public let algorithm: DigestAlgorithm
    /// The length of every piece but the last, which may be shorter.
    public let length: Int64
    /// The digests, `algorithm.digestLength` bytes each, in piece order.
    public let digests: [UInt8]

    /// Nil unless `length` is positive and `digests` holds whole digests.
    public init?(algorithm: DigestAlgorithm, length: Int64, digests: [UInt8]) {
        guard length > 0, digests.count % algorithm.digestLength == 0 else { return nil }
        self.algorithm = algorithm
        self.length = length
        self.digests = digests
    }

    /// How many pieces there are.
    public var count: Int { digests.count / algorithm.digestLength }

    /// The pieces a file of `size` bytes has: ceil(size / length) (0 for an empty file).
    public static func pieceCount(size: Int64, length: Int64) -> Int64 {
        size <= 0 ? 0 : (size - 1) / length + 1
    }

    /// Whether these pieces describe a file of `size` bytes exactly.
    public func fits(size: Int64) -> Bool {
        Int64(count) == Self.pieceCount(size: size, length: length)
    }

    /// The digest piece `index` must have.
    public func digest(of index: Int) -> ArraySlice<UInt8> {
        let n = algorithm.digestLength
        return digests[index * n..<(index + 1) * n]
    }

    /// The bytes of piece `index` in a file of `size` bytes.
    public func byteRange(of index: Int, size: Int64) -> Range<Int64> {
        let start = Int64(index) * length
        return start..<min(start + length, size)
    }

    /// The piece that holds byte `offset`.
    public func piece(containing offset: Int64) -> Int { Int(offset / length) }

    /// A SHA-256 of the algorithm, the length and every digest: what a journal keeps to know that it
    /// recorded pieces of these hashes, not of another document's.
    public var fingerprint: [UInt8] {
        let d = Digester(.sha256)
        d.update(Array(algorithm.textualName.utf8) + [0])
        var len = length.littleEndian
        withUnsafeBytes(of: &len) { d.update($0) }
        d.update(digests)
        return d.finalize()
    }

    /// The pieces as one line of text, for a store to keep (the daemon's queue): the algorithm's
    /// Metalink name, the piece length and the digests in lower-case hex, separated by spaces.
    public var stored: String { "\(algorithm.textualName) \(length) \(hexString(digests))" }

    /// The pieces `stored` wrote; nil for any other text.
    public init?(stored text: String) {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, let algorithm = DigestAlgorithm(textualName: String(parts[0])),
            let length = Int64(parts[1]), parts[2] == parts[2].lowercased(), let digests = decodeHex(parts[2])
        else { return nil }
        self.init(algorithm: algorithm, length: length, digests: digests)
    }

    /// Whether `digest` (of the bytes read for piece `index`) is the one piece `index` must have.
    public func matches(_ index: Int, digest: [UInt8]) -> Bool {
        self.digest(of: index).elementsEqual(digest)
    }
}
