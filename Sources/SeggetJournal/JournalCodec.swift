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
    /// The file is longer than its header and bitmaps.
    case trailingBytes

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
            "The journal file is longer than its header and bitmaps, so it is damaged; the download will start over."
        }
    }
}

/// The on-disk format of a journal, as pure functions: values in, bytes out, and back.
///
/// Layout (all integers little-endian; see docs/journal-format.md):
///
///     0    8   magic "SGGTJRNL"
///     8    2   format version (1)
///     10   2   flags: bit 0 ETag present, bit 1 Last-Modified present
///     12   4   header length H, CRC included
///     16   8   total length          24  8  chunk size
///     32   8   chunk count           40  8  creation time (Unix seconds)
///     48   1   boot ID length n ≤ 63 49  63 boot ID, zero-padded
///     112  ... url, final URL, ETag, Last-Modified: each a UInt32 length + UTF-8
///     H-4  4   CRC-32 of bytes 0..<H-4
///     H    B   written bitmap, B = ceil(chunk count / 8)
///     H+B  B   durable bitmap
///
/// The boot ID has a fixed-size slot, so rewriting it never moves the bitmaps.
public enum JournalCodec {
    /// The magic bytes that open every journal.
    public static let magic: [UInt8] = Array("SGGTJRNL".utf8)
    /// The format version this build writes and reads.
    public static let currentVersion: UInt16 = 1

    static let flagETag: UInt16 = 1 << 0
    static let flagLastModified: UInt16 = 1 << 1
    static let fixedPrefixLength = 16
    static let bootIDOffset = 48
    static let bootIDSlot = 64
    static let stringsOffset = 112
    /// A header with four empty strings.
    static let minimumHeaderLength = stringsOffset + 4 * 4 + 4

    /// The header's length H in bytes (CRC included): where the written bitmap starts.
    public static func headerLength(of header: JournalHeader) -> Int {
        minimumHeaderLength + header.url.utf8.count + header.finalURL.utf8.count
            + (header.etag?.utf8.count ?? 0) + (header.lastModified?.utf8.count ?? 0)
    }

    /// The offset of the written bitmap.
    public static func writtenBitmapOffset(header: JournalHeader) -> Int64 {
        Int64(headerLength(of: header))
    }

    /// The offset of the durable bitmap.
    public static func durableBitmapOffset(header: JournalHeader) -> Int64 {
        writtenBitmapOffset(header: header) + Int64(ChunkBitmap.byteCount(forChunks: header.chunkCount))
    }

    /// The whole journal file's length.
    public static func encodedLength(header: JournalHeader) -> Int64 {
        durableBitmapOffset(header: header) + Int64(ChunkBitmap.byteCount(forChunks: header.chunkCount))
    }

    /// The header's bytes, CRC included.
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
        // JournalHeader already cut the boot ID to 63 bytes.
        let boot = Array(header.bootID.utf8.prefix(JournalHeader.maximumBootIDLength))
        out.append(UInt8(boot.count))
        out += boot
        out += [UInt8](repeating: 0, count: bootIDSlot - 1 - boot.count)
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

    /// The whole journal: header, written bitmap, durable bitmap.
    ///
    /// - Precondition: both bitmaps have `header.chunkCount` chunks.
    public static func encode(header: JournalHeader, written: ChunkBitmap, durable: ChunkBitmap) -> [UInt8] {
        precondition(written.count == header.chunkCount && durable.count == header.chunkCount,
                     "bitmaps must have one bit per chunk")
        return encodeHeader(header) + written.bytes + durable.bytes
    }

    /// Decodes a whole journal file. Throws rather than return anything it cannot vouch for.
    public static func decode(
        _ bytes: [UInt8]
    ) throws(JournalDecodeError) -> (header: JournalHeader, written: ChunkBitmap, durable: ChunkBitmap) {
        let (header, headerLength) = try decodeHeader(bytes)
        let bitmapLength = ChunkBitmap.byteCount(forChunks: header.chunkCount)
        let expected = headerLength + 2 * bitmapLength  // geometry checks keep this from overflowing
        if bytes.count < expected { throw .truncated }
        if bytes.count > expected { throw .trailingBytes }
        let writtenStart = headerLength
        let durableStart = headerLength + bitmapLength
        guard
            let written = ChunkBitmap(bytes: Array(bytes[writtenStart..<durableStart]), count: header.chunkCount),
            let durable = ChunkBitmap(bytes: Array(bytes[durableStart..<expected]), count: header.chunkCount)
        else { throw .bitmapPaddingBitsSet }
        return (header, written, durable)
    }

    /// The header length H declared by the first 16 bytes, after checking magic and version.
    static func declaredHeaderLength(_ bytes: [UInt8]) throws(JournalDecodeError) -> Int {
        let magicPrefix = min(bytes.count, magic.count)
        if !bytes[0..<magicPrefix].elementsEqual(magic[0..<magicPrefix]) { throw .badMagic }
        if bytes.count < fixedPrefixLength { throw .truncated }
        let version: UInt16 = readLE(bytes, at: 8)
        if version != currentVersion { throw .unsupportedVersion(version) }
        let length = Int(readLE(bytes, at: 12) as UInt32)
        if length < minimumHeaderLength { throw .malformedHeader }
        return length
    }

    /// Decodes the header at the start of `bytes` (bytes after it are ignored); returns it and its length.
    static func decodeHeader(_ bytes: [UInt8]) throws(JournalDecodeError) -> (JournalHeader, Int) {
        let length = try declaredHeaderLength(bytes)
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

        let bootLength = Int(bytes[bootIDOffset])
        if bootLength > JournalHeader.maximumBootIDLength { throw .malformedHeader }
        let bootStart = bootIDOffset + 1
        let padding = bytes[(bootStart + bootLength)..<(bootIDOffset + bootIDSlot)]
        if padding.contains(where: { $0 != 0 }) { throw .malformedHeader }
        let bootID = try text(bytes[bootStart..<(bootStart + bootLength)])

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
              // Both bitmaps must be addressable: 2 * ceil(count / 8) + H fits in Int.
              chunkCount <= Int64(Int.max - length) / 4
        else { throw .inconsistentGeometry }

        let header = JournalHeader(
            url: strings[0], finalURL: strings[1], totalLength: totalLength, chunkSize: chunkSize,
            etag: flags & flagETag != 0 ? strings[2] : nil,
            lastModified: flags & flagLastModified != 0 ? strings[3] : nil,
            bootID: bootID, createdAt: createdAt)
        return (header, length)
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
