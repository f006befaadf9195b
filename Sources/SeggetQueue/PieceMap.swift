/// aria2's piece view of a download: the file cut into pieces of ``TaskSnapshot/pieceLength``, and
/// `bitfield`, one bit per piece (most significant bit first, the last byte padded with zero bits)
/// in lower-case hex, set for a piece whose every byte is finished.
public enum PieceMap {
    /// The number of pieces of a file of `totalLength` bytes; 0 while the length is unknown.
    public static func pieceCount(totalLength: Int64, pieceLength: Int64 = TaskSnapshot.pieceLength) -> Int {
        totalLength > 0 ? Int((totalLength + pieceLength - 1) / pieceLength) : 0
    }

    /// The hex bitfield for the finished byte ranges (sorted, apart); nil while the length is unknown.
    public static func bitfield(
        finished: [Range<Int64>], totalLength: Int64, pieceLength: Int64 = TaskSnapshot.pieceLength
    ) -> String? {
        let count = pieceCount(totalLength: totalLength, pieceLength: pieceLength)
        guard count > 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: (count + 7) / 8)
        var r = 0  // the first range that may still hold a later piece
        for i in 0..<count {
            let piece = Int64(i) * pieceLength..<min(Int64(i + 1) * pieceLength, totalLength)
            while r < finished.count && finished[r].upperBound <= piece.lowerBound { r += 1 }
            guard r < finished.count, finished[r].lowerBound <= piece.lowerBound,
                finished[r].upperBound >= piece.upperBound
            else { continue }
            bytes[i / 8] |= 0x80 >> UInt8(i % 8)
        }
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
    }
}
