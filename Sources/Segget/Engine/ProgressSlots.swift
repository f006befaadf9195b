import SeggetJournal

/// How far each connection got inside the chunk it was writing, kept beside the journal in
/// `NAME.segget-progress` so that a `kill -9` loses only bytes that never arrived, not whole chunks.
///
/// Layout (little-endian): magic `SGGTPRG2`, then the journal it belongs to (total length, chunk size,
/// the journal's creation time: 8 bytes each), then one 20-byte slot per connection: the chunk index
/// (-1 when empty), the file offset up to which that chunk's bytes were written, and the CRC-32C of
/// those bytes from the chunk's start.
///
/// A slot is written (one 20-byte `pwrite`, which never straddles a page) only after the data it
/// vouches for, like a bit of the written bitmap, and it is trusted only under the same conditions:
/// when the journal was reopened in the same boot. After a power cut or reboot it is ignored. Even
/// then, its bytes are kept only if they still match the checksum (`ChunkVoucher.keepMatchingPartials`).
final class ProgressSlots {
    static let magic: [UInt8] = Array("SGGTPRG2".utf8)
    static let headerLength = 32
    static let slotLength = 20
    static let slotCount = 128

    private let file: PosixFile
    private var scratch = [UInt8](repeating: 0, count: slotLength)

    private init(file: PosixFile) { self.file = file }

    /// The binding that ties a progress file to one journal.
    static func header(of journal: JournalHeader) -> [UInt8] {
        var out = magic
        for v in [journal.totalLength, journal.chunkSize, journal.createdAt] { out += littleEndian(v) }
        return out
    }

    /// Creates an empty progress file (replacing any old one) bound to `journal`.
    static func create(path: String, journal: JournalHeader) throws(Errno) -> ProgressSlots {
        try PosixFile.remove(path: path)
        let file = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o600))
        var image = header(of: journal)
        for _ in 0..<slotCount { image += littleEndian(Int64(-1)) + littleEndian(0) + [0, 0, 0, 0] }
        do {
            try file.write(image, at: 0)
        } catch {
            file.close()
            throw error
        }
        return ProgressSlots(file: file)
    }

    /// Reads the partial progress recorded for `journal`: chunk → offset up to which it is written, and
    /// the checksum of those bytes. Empty when the file is missing, foreign or damaged; only offsets
    /// strictly inside their chunk and within `plan` are returned.
    static func read(path: String, journal: JournalHeader, plan: ChunkPlan) -> [Int: PartialChunk] {
        guard let file = try? PosixFile.open(path: path, mode: .readOnly) else { return [:] }
        defer { file.close() }
        let length = headerLength + slotCount * slotLength
        guard let bytes = try? file.read(count: length, at: 0), bytes.count == length,
            Array(bytes[0..<headerLength]) == header(of: journal)
        else { return [:] }
        var out: [Int: PartialChunk] = [:]
        for i in 0..<slotCount {
            let base = headerLength + i * slotLength
            let chunk = int64(bytes, base)
            let upTo = int64(bytes, base + 8)
            let crc = UInt32(truncatingIfNeeded: int64(bytes, base + 16, count: 4))
            guard chunk >= 0, chunk < Int64(plan.chunkCount) else { continue }
            let range = plan.byteRange(ofChunk: Int(chunk))
            guard upTo > range.lowerBound, upTo < range.upperBound else { continue }
            if let seen = out[Int(chunk)], seen.upTo >= upTo { continue }
            out[Int(chunk)] = PartialChunk(upTo: upTo, crc: crc)
        }
        return out
    }

    /// Records that `chunk` is written from its start up to `offset` (exclusive), in `slot`, and that
    /// the CRC-32C of those bytes is `crc`.
    func record(slot: Int, chunk: Int, upTo offset: Int64, crc: UInt32) throws(Errno) {
        guard slot < Self.slotCount else { return }
        let c = Int64(chunk)
        for i in 0..<8 {
            scratch[i] = UInt8(truncatingIfNeeded: c >> (8 * i))
            scratch[8 + i] = UInt8(truncatingIfNeeded: offset >> (8 * i))
        }
        for i in 0..<4 { scratch[16 + i] = UInt8(truncatingIfNeeded: crc >> (8 * i)) }
        try file.write(scratch, at: Int64(Self.headerLength + slot * Self.slotLength))
    }

    func close() { file.close() }

    private static func littleEndian(_ v: Int64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) }
    }

    private static func int64(_ b: [UInt8], _ at: Int, count: Int = 8) -> Int64 {
        var v: Int64 = 0
        for i in 0..<count { v |= Int64(b[at + i]) << (8 * i) }
        return v
    }
}
