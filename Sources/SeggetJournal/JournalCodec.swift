/// Why a journal's bytes could not be decoded. Every case means "start the download over";
/// none of them is ever turned into a partial success.
public enum JournalDecodeError: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The file ends before the header or the bitmaps do.
    case truncated
    /// The file does not start with the journal's magic bytes.
    case badMagic
    /// The journal was written by a format version this build does not read.
    case unsupportedVersion(UInt16)
    /// The header's CRC-32 does not match its bytes.
    case headerChecksumMismatch
    /// The header's fields do not fit its length, a string is not UTF-8, or an unknown flag is set.
    case malformedHeader
    /// Chunk count, total length and chunk size do not agree.
    case inconsistentGeometry
    /// A bit beyond the last chunk is set in a bitmap.
    case bitmapPaddingBitsSet
    /// The file is longer than its header, bitmaps and checksum table.
    case trailingBytes
    /// The padding before the checksum table is not zero.
    case nonZeroPadding

    /// A stable short form for logs and for embedding in a longer message, e.g. "header checksum mismatch".
    public var shortDescription: String {
        switch self {
        case .truncated: "truncated"
        case .badMagic: "not a journal"
        case .unsupportedVersion(let version): "unsupported version \(version)"
        case .headerChecksumMismatch: "header checksum mismatch"
        case .malformedHeader: "malformed header"
        case .inconsistentGeometry: "inconsistent chunk geometry"
        case .bitmapPaddingBitsSet: "bitmap padding bits set"
        case .trailingBytes: "trailing bytes"
        case .nonZeroPadding: "non-zero padding"
        }
    }

    public var description: String {
        switch self {
        case .truncated:
            "The journal file ends early, so it cannot be trusted; the download will start over."
        case .badMagic:
            "The file is not a segget journal."
        case .unsupportedVersion(let version):
            "The journal was written by journal format version \(version), which this segget does not read; the download will start over."
        case .headerChecksumMismatch:
            "The journal header's checksum does not match, so the journal is damaged; the download will start over."
        case .malformedHeader:
            "The journal header's fields are malformed, so the journal is damaged; the download will start over."
        case .inconsistentGeometry:
            "The journal's chunk count does not match its file length and chunk size, so the journal is damaged; the download will start over."
        case .bitmapPaddingBitsSet:
            "The journal marks chunks beyond the end of the file as finished, so it is damaged; the download will start over."
        case .trailingBytes:
            "The journal file is longer than its header, bitmaps and checksums, so it is damaged; the download will start over."
        case .nonZeroPadding:
            "The journal's padding bytes are not zero, so it is damaged; the download will start over."
        }
    }
}

/// The on-disk format of a journal, as pure functions: values in, bytes out, and back.
///
/// Layout (all integers little-endian; see docs/journal-format.md):
///
///     0      8   magic "SGGTJRNL"
///     8      2   format version (2)
///     10     2   flags: bit 0 ETag present, bit 1 Last-Modified present
///     12     4   header length H, CRC included
///     16     8   total length             24   8   chunk size
///     32     8   chunk count              40   8   creation time (Unix seconds)
///     48     ... URL, final URL, ETag, Last-Modified: each a UInt32 length + UTF-8
///     H-4    4   CRC-32 of bytes 0..<H-4
///     H      64  boot record: length n ≤ 59, n bytes of boot ID, zero padding, CRC-32 of its first 60 bytes
///     H+64   B   written bitmap, B = ceil(chunk count / 8)
///     H+64+B B   durable bitmap
///     …      P   zero padding, so that the table below starts at a multiple of 4 (P < 4)
///     T      4N  chunk checksums: CRC-32C of each written chunk's bytes, 0 where none was recorded
///     S      40  pieces record (version 3): SHA-256 fingerprint of the piece hashes the verified
///                bitmap is about (all zero: none), 4 zero bytes, CRC-32 of its first 36 bytes
///     S+40   B   verified bitmap (version 3): chunks whose piece group matched those hashes
///
/// A chunk's checksum is written before its written bit, and made durable before its durable bit (see
/// `Journal`). The bitmaps only say which chunks to check; a resume keeps a chunk only if its bytes in
/// the data file match its checksum.
///
/// The header is written once and never changes. Only the boot record is rewritten (at every open), so
/// a power cut during that rewrite can tear nothing but the boot record, whose own CRC then fails: that
/// reads as an unknown boot, which only makes a resume trust the durable bitmap. The pieces record is
/// rewritten the same way, and a torn one reads as "no pieces", which only makes a resume hash them.
///
/// Version 2 is version 3 without the pieces record and the verified bitmap: it is still read (a
/// journal of version 2 records no verified pieces), never written.
public enum JournalCodec {
    /// The magic bytes that open every journal.
    public static let magic: [UInt8] = Array("SGGTJRNL".utf8)
    /// The format version this build writes and reads.
    public static let currentVersion: UInt16 = 3
    /// The format versions this build reads.
    public static let readableVersions: ClosedRange<UInt16> = 2...3
    /// The length of the pieces record (version 3).
    public static let piecesRecordLength = 40
    /// The length of the boot record that follows the header.
    public static let bootRecordLength = 64

    static let flagETag: UInt16 = 1 << 0
    static let flagLastModified: UInt16 = 1 << 1
    static let fixedPrefixLength = 16
    static let stringsOffset = 48
    /// A header with four empty strings.
    static let minimumHeaderLength = stringsOffset + 4 * 4 + 4

    /// The header's length H in bytes (CRC included): where the boot record starts.
    public static func headerLength(of header: JournalHeader) -> Int {
        minimumHeaderLength + header.url.utf8.count + header.finalURL.utf8.count
            + (header.etag?.utf8.count ?? 0) + (header.lastModified?.utf8.count ?? 0)
    }

    /// The offset of the boot record.
    public static func bootRecordOffset(header: JournalHeader) -> Int64 {
        Int64(headerLength(of: header))
    }

    /// The offset of the written bitmap.
    public static func writtenBitmapOffset(header: JournalHeader) -> Int64 {
        bootRecordOffset(header: header) + Int64(bootRecordLength)
    }

    /// The offset of the durable bitmap.
    public static func durableBitmapOffset(header: JournalHeader) -> Int64 {
        writtenBitmapOffset(header: header) + Int64(ChunkBitmap.byteCount(forChunks: header.chunkCount))
    }

    /// The offset of the chunk checksum table: after the durable bitmap, rounded up to a multiple of 4
    /// so that no entry straddles a sector.
    public static func checksumTableOffset(header: JournalHeader) -> Int64 {
        let end = durableBitmapOffset(header: header) + Int64(ChunkBitmap.byteCount(forChunks: header.chunkCount))
        return (end + 3) / 4 * 4
    }

    /// The offset of chunk `chunk`'s checksum.
    public static func checksumOffset(header: JournalHeader, chunk: Int) -> Int64 {
        checksumTableOffset(header: header) + 4 * Int64(chunk)
    }

    /// The offset of the pieces record (version 3): right after the checksum table.
    public static func piecesRecordOffset(header: JournalHeader) -> Int64 {
        checksumTableOffset(header: header) + 4 * Int64(header.chunkCount)
    }

    /// The offset of the verified bitmap (version 3).
    public static func verifiedBitmapOffset(header: JournalHeader) -> Int64 {
        piecesRecordOffset(header: header) + Int64(piecesRecordLength)
    }

    /// The whole journal file's length, in format `version` (2 or 3).
    public static func encodedLength(header: JournalHeader, version: UInt16 = currentVersion) -> Int64 {
        version < 3
            ? piecesRecordOffset(header: header)
            : verifiedBitmapOffset(header: header) + Int64(ChunkBitmap.byteCount(forChunks: header.chunkCount))
    }

    /// The pieces record's 40 bytes for `fingerprint` (32 bytes; nil: no pieces).
    public static func encodePiecesRecord(_ fingerprint: [UInt8]?) -> [UInt8] {
        precondition(fingerprint == nil || fingerprint?.count == 32, "a fingerprint is 32 bytes")
        var out = fingerprint ?? [UInt8](repeating: 0, count: 32)
        out += [0, 0, 0, 0]
        appendLE(&out, CRC32.checksum(out))
        return out
    }

    /// The fingerprint in a pieces record; nil for none, and for a damaged record (a torn rewrite),
    /// which then vouches for no verified bit.
    static func decodePiecesRecord(_ record: ArraySlice<UInt8>) -> [UInt8]? {
        let bytes = Array(record)
        guard bytes.count == piecesRecordLength,
              CRC32.checksum(bytes[0..<36]) == readLE(bytes, at: 36) as UInt32,
              bytes[32..<36].allSatisfy({ $0 == 0 })
        else { return nil }
        let fingerprint = Array(bytes[0..<32])
        return fingerprint.allSatisfy { $0 == 0 } ? nil : fingerprint
    }

    /// One entry of the checksum table.
    public static func encodeChecksum(_ crc: UInt32) -> [UInt8] {
        var out: [UInt8] = []
        appendLE(&out, crc)
        return out
    }

    /// The header's bytes, CRC included (the boot ID is not part of them).
    public static func encodeHeader(_ header: JournalHeader) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(headerLength(of: header))
        out += magic
        appendLE(&out, currentVersion)
        var flags: UInt16 = 0
        if header.etag != nil { flags |= flagETag }
        if header.lastModified != nil { flags |= flagLastModified }
        appendLE(&out, flags)
        appendLE(&out, UInt32(headerLength(of: header)))
        appendLE(&out, header.totalLength)
        appendLE(&out, header.chunkSize)
        appendLE(&out, Int64(header.chunkCount))
        appendLE(&out, header.createdAt)
        // Redacting again costs nothing and keeps the codec safe on its own.
        for text in [
            JournalHeader.redactingCredentials(header.url), JournalHeader.redactingCredentials(header.finalURL),
            header.etag ?? "", header.lastModified ?? "",
        ] {
            let utf8 = Array(text.utf8)
            appendLE(&out, UInt32(utf8.count))
            out += utf8
        }
        appendLE(&out, CRC32.checksum(out))
        return out
    }

    /// The boot record's 64 bytes for `bootID` (cut to 59 UTF-8 bytes).
    public static func encodeBootRecord(_ bootID: String) -> [UInt8] {
        let id = Array(bootID.utf8.prefix(JournalHeader.maximumBootIDLength))
        var out = [UInt8(id.count)] + id
        out += [UInt8](repeating: 0, count: bootRecordLength - 4 - out.count)
        appendLE(&out, CRC32.checksum(out))
        return out
    }

    /// The boot ID in a boot record, or `unknownBootID` if the record is damaged (a torn rewrite).
    static func decodeBootRecord(_ record: ArraySlice<UInt8>) -> String {
        let bytes = Array(record)
        guard bytes.count == bootRecordLength,
              CRC32.checksum(bytes[0..<(bootRecordLength - 4)]) == readLE(bytes, at: bootRecordLength - 4) as UInt32
        else { return unknownBootID }
        let length = Int(bytes[0])
        guard length <= JournalHeader.maximumBootIDLength,
              !bytes[(1 + length)..<(bootRecordLength - 4)].contains(where: { $0 != 0 }),
              let id = String(validating: bytes[1..<(1 + length)], as: UTF8.self)
        else { return unknownBootID }
        return id
    }

    /// The boot ID that never matches the current one.
    public static let unknownBootID = "unknown"

    /// The whole journal: header, written bitmap, durable bitmap, chunk checksums (all 0 if nil), the
    /// pieces record and the verified bitmap (empty if nil).
    ///
    /// - Precondition: the bitmaps have `header.chunkCount` chunks, and so has `chunkCRCs` if given.
    public static func encode(
        header: JournalHeader, written: ChunkBitmap, durable: ChunkBitmap, chunkCRCs: [UInt32]? = nil,
        piecesFingerprint: [UInt8]? = nil, verified: ChunkBitmap? = nil
    ) -> [UInt8] {
        precondition(verified == nil || verified?.count == header.chunkCount, "one verified bit per chunk")
        precondition(written.count == header.chunkCount && durable.count == header.chunkCount,
                     "bitmaps must have one bit per chunk")
        precondition(chunkCRCs == nil || chunkCRCs?.count == header.chunkCount, "one checksum per chunk")
        var out = encodeHeader(header) + encodeBootRecord(header.bootID) + written.bytes + durable.bytes
        out += [UInt8](repeating: 0, count: Int(checksumTableOffset(header: header)) - out.count)
        out.reserveCapacity(Int(encodedLength(header: header)))
        if let chunkCRCs {
            for crc in chunkCRCs { appendLE(&out, crc) }
        } else {
            out += [UInt8](repeating: 0, count: 4 * header.chunkCount)
        }
        out += encodePiecesRecord(piecesFingerprint)
        out += (verified ?? ChunkBitmap(count: header.chunkCount)).bytes
        return out
    }

    /// Decodes a whole journal file. Throws rather than return anything it cannot vouch for.
    ///
    /// A damaged boot record is not an error: it decodes as `unknownBootID`, which a resume treats as
    /// a reboot (it trusts only the durable bitmap). A damaged pieces record decodes as no pieces,
    /// with no verified bit. The checksums are returned as stored: whether a chunk's bytes match its
    /// checksum is for the reader of the data file to find out. A version 2 journal decodes with
    /// `version` 2, no fingerprint and no verified bit.
    public static func decode(
        _ bytes: [UInt8]
    ) throws(JournalDecodeError) -> (
        header: JournalHeader, written: ChunkBitmap, durable: ChunkBitmap, chunkCRCs: [UInt32],
        version: UInt16, piecesFingerprint: [UInt8]?, verified: ChunkBitmap
    ) {
        let (withoutBoot, headerLength, version) = try decodeHeaderAndVersion(bytes)
        let count = withoutBoot.chunkCount
        let bitmapLength = ChunkBitmap.byteCount(forChunks: count)
        let writtenStart = headerLength + bootRecordLength
        let durableStart = writtenStart + bitmapLength
        let durableEnd = durableStart + bitmapLength  // the geometry check keeps these from overflowing
        let tableStart = (durableEnd + 3) / 4 * 4
        let recordStart = tableStart + 4 * count
        let verifiedStart = recordStart + piecesRecordLength
        let expected = version < 3 ? recordStart : verifiedStart + bitmapLength
        if bytes.count < expected { throw .truncated }
        if bytes.count > expected { throw .trailingBytes }
        guard
            let written = ChunkBitmap(bytes: Array(bytes[writtenStart..<durableStart]), count: count),
            let durable = ChunkBitmap(bytes: Array(bytes[durableStart..<durableEnd]), count: count)
        else { throw .bitmapPaddingBitsSet }
        if bytes[durableEnd..<tableStart].contains(where: { $0 != 0 }) { throw .nonZeroPadding }
        var crcs = [UInt32](repeating: 0, count: count)
        for k in 0..<count { crcs[k] = readLE(bytes, at: tableStart + 4 * k) }
        let header = withoutBoot.with(bootID: decodeBootRecord(bytes[headerLength..<writtenStart]))
        guard version >= 3 else { return (header, written, durable, crcs, version, nil, ChunkBitmap(count: count)) }
        let fingerprint = decodePiecesRecord(bytes[recordStart..<verifiedStart])
        guard let verified = ChunkBitmap(bytes: Array(bytes[verifiedStart..<expected]), count: count) else {
            throw .bitmapPaddingBitsSet
        }
        // Verified bits without the fingerprint they are about vouch for nothing.
        return (header, written, durable, crcs, version, fingerprint, fingerprint == nil ? ChunkBitmap(count: count) : verified)
    }

    /// The header length H declared by the first 16 bytes, after checking magic and version.
    static func declaredHeaderLength(_ bytes: [UInt8]) throws(JournalDecodeError) -> Int {
        try declaredHeaderLengthAndVersion(bytes).length
    }

    /// The header length H and the format version declared by the first 16 bytes, after checking
    /// magic and version.
    static func declaredHeaderLengthAndVersion(_ bytes: [UInt8]) throws(JournalDecodeError) -> (length: Int, version: UInt16) {
        let magicPrefix = min(bytes.count, magic.count)
        if !bytes[0..<magicPrefix].elementsEqual(magic[0..<magicPrefix]) { throw .badMagic }
        if bytes.count < fixedPrefixLength { throw .truncated }
        let version: UInt16 = readLE(bytes, at: 8)
        if !readableVersions.contains(version) { throw .unsupportedVersion(version) }
        let length = Int(readLE(bytes, at: 12) as UInt32)
        if length < minimumHeaderLength { throw .malformedHeader }
        return (length, version)
    }

    /// Decodes the header at the start of `bytes` (bytes after it are ignored); returns it, with
    /// `unknownBootID` for the boot ID, and its length.
    static func decodeHeader(_ bytes: [UInt8]) throws(JournalDecodeError) -> (JournalHeader, Int) {
        let (header, length, _) = try decodeHeaderAndVersion(bytes)
        return (header, length)
    }

    /// `decodeHeader`, with the format version.
    static func decodeHeaderAndVersion(_ bytes: [UInt8]) throws(JournalDecodeError) -> (JournalHeader, Int, UInt16) {
        let (length, version) = try declaredHeaderLengthAndVersion(bytes)
        if bytes.count < length { throw .truncated }
        let stored: UInt32 = readLE(bytes, at: length - 4)
        if CRC32.checksum(bytes[0..<(length - 4)]) != stored { throw .headerChecksumMismatch }

        // The CRC matched, so what follows only catches a writer's bugs or a forged file.
        let flags: UInt16 = readLE(bytes, at: 10)
        if flags & ~(flagETag | flagLastModified) != 0 { throw .malformedHeader }
        let totalLength: Int64 = readLE(bytes, at: 16)
        let chunkSize: Int64 = readLE(bytes, at: 24)
        let chunkCount: Int64 = readLE(bytes, at: 32)
        let createdAt: Int64 = readLE(bytes, at: 40)

        var cursor = stringsOffset
        var strings: [String] = []
        for _ in 0..<4 {
            if cursor + 4 > length - 4 { throw .malformedHeader }
            let count = Int(readLE(bytes, at: cursor) as UInt32)
            cursor += 4
            if count > length - 4 - cursor { throw .malformedHeader }
            strings.append(try text(bytes[cursor..<(cursor + count)]))
            cursor += count
        }
        if cursor != length - 4 { throw .malformedHeader }
        if flags & flagETag == 0 && !strings[2].isEmpty { throw .malformedHeader }
        if flags & flagLastModified == 0 && !strings[3].isEmpty { throw .malformedHeader }

        guard totalLength >= 0, chunkSize > 0,
              chunkCount == JournalHeader.chunkCount(totalLength: totalLength, chunkSize: chunkSize),
              // Bitmaps and table must be addressable: H + 64 + 2 * ceil(count / 8) + 3 + 4 * count fits in Int.
              chunkCount <= Int64(Int.max - length - bootRecordLength - 8) / 8
        else { throw .inconsistentGeometry }

        let header = JournalHeader(
            url: strings[0], finalURL: strings[1], totalLength: totalLength, chunkSize: chunkSize,
            etag: flags & flagETag != 0 ? strings[2] : nil,
            lastModified: flags & flagLastModified != 0 ? strings[3] : nil,
            bootID: unknownBootID, createdAt: createdAt)
        return (header, length, version)
    }

    private static func text(_ bytes: ArraySlice<UInt8>) throws(JournalDecodeError) -> String {
        guard let string = String(validating: bytes, as: UTF8.self) else { throw .malformedHeader }
        return string
    }

    private static func appendLE<T: FixedWidthInteger>(_ out: inout [UInt8], _ value: T) {
        withUnsafeBytes(of: value.littleEndian) { out += $0 }
    }

    private static func readLE<T: FixedWidthInteger>(_ bytes: [UInt8], at offset: Int) -> T {
        var value: T = 0
        for k in 0..<MemoryLayout<T>.size {
            value |= T(truncatingIfNeeded: bytes[offset + k]) << (8 * k)
        }
        return value
    }
}
