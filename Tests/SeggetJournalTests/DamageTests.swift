import Testing
@testable import SeggetJournal

/// Rewrites the header's CRC after a deliberate edit, so that the check behind the CRC is reached.
func resealed(_ bytes: [UInt8]) -> [UInt8] {
    var bytes = bytes
    let length = Int(bytes[12]) | Int(bytes[13]) << 8 | Int(bytes[14]) << 16 | Int(bytes[15]) << 24
    let crc = CRC32.checksum(bytes[0..<(length - 4)])
    for k in 0..<4 { bytes[length - 4 + k] = UInt8(truncatingIfNeeded: crc >> (8 * k)) }
    return bytes
}

func putLE64(_ bytes: inout [UInt8], _ value: Int64, at offset: Int) {
    for k in 0..<8 { bytes[offset + k] = UInt8(truncatingIfNeeded: value >> (8 * k)) }
}

func decodeError(_ bytes: [UInt8]) -> JournalDecodeError? {
    do {
        _ = try JournalCodec.decode(bytes)
        return nil
    } catch {
        return error
    }
}

@Suite("Damaged journals")
struct DamageTests {
    let header = makeHeader(
        url: "https://example.com/a/long/path/to/ファイル.iso", totalLength: 77 * 1000 + 3, chunkSize: 1000)
    var image: [UInt8] {
        JournalCodec.encode(header: header, written: patterned(78, every: 2), durable: patterned(78, every: 4))
    }

    @Test func everyTruncationIsRejected() {
        let full = image
        // Header, boot record, two 10-byte bitmaps, padding to a multiple of 4, 78 checksums, the
        // 40-byte pieces record and the 10-byte verified bitmap.
        let bitmapsEnd = JournalCodec.headerLength(of: header) + 64 + 20
        #expect(full.count == (bitmapsEnd + 3) / 4 * 4 + 4 * 78 + 40 + 10)
        for length in 0..<full.count {
            let error = decodeError(Array(full[0..<length]))
            #expect(error == .truncated, "a journal cut to \(length) of \(full.count) bytes")
        }
        #expect(decodeError(full) == nil)
    }

    @Test func everyHeaderBitFlipIsDetected() {
        let full = image
        let headerLength = JournalCodec.headerLength(of: header)
        var kinds: Set<JournalDecodeError> = []
        for byte in 0..<headerLength {
            for bit in 0..<8 {
                var damaged = full
                damaged[byte] ^= 1 << UInt8(bit)
                let error = decodeError(damaged)
                #expect(error != nil, "flipping bit \(bit) of byte \(byte) went unnoticed")
                if let error { kinds.insert(error) }
            }
        }
        // Magic, version, length and CRC each catch their own flips.
        #expect(kinds.isSuperset(of: [.badMagic, .headerChecksumMismatch, .truncated]))
        #expect(kinds.contains { if case .unsupportedVersion = $0 { true } else { false } })
    }

    @Test func bitmapAndChecksumFlipsAreNotCheckedHereButStayInBounds() {
        // The bitmaps and checksums are updated in place, so no checksum covers them; a flipped bit
        // decodes as a different, well-formed journal (padding bits excepted). What catches it is the
        // resume's check of each claimed chunk's bytes against its checksum.
        let full = image
        let start = Int(JournalCodec.writtenBitmapOffset(header: header))
        let padding = Int(JournalCodec.durableBitmapOffset(header: header)) + 10..<Int(JournalCodec.checksumTableOffset(header: header))
        #expect(!padding.isEmpty)
        for byte in start..<full.count {
            var damaged = full
            damaged[byte] ^= 0x01
            #expect(decodeError(damaged) == (padding.contains(byte) ? .nonZeroPadding : nil), "byte \(byte)")
        }
    }

    @Test func aVersion1JournalIsRefused() {
        // Version 1 had no checksums: its bitmaps alone cannot vouch for any byte.
        var old = image
        old[8] = 1
        #expect(decodeError(old) == .unsupportedVersion(1))
        #expect(decodeError(resealed(old)) == .unsupportedVersion(1))
    }

    @Test func wrongMagic() {
        var damaged = image
        damaged[0] = UInt8(ascii: "X")
        #expect(decodeError(damaged) == .badMagic)
        #expect(decodeError(Array("PK\u{3}\u{4} a zip file".utf8)) == .badMagic)
        #expect(decodeError(Array("SGG".utf8)) == .truncated)
        #expect(decodeError(Array("SGX".utf8)) == .badMagic)
    }

    @Test func futureVersion() {
        var damaged = image
        damaged[8] = 4
        #expect(decodeError(damaged) == .unsupportedVersion(4))
        damaged[8] = 0
        #expect(decodeError(damaged) == .unsupportedVersion(0))
        #expect(JournalDecodeError.unsupportedVersion(4).description.contains("version 4"))
    }

    @Test func geometryMismatches() {
        var damaged = image
        putLE64(&damaged, 79, at: 32)  // chunk count one too many
        #expect(decodeError(resealed(damaged)) == .inconsistentGeometry)

        damaged = image
        putLE64(&damaged, 78 * 1000 + 1, at: 16)  // length that needs 79 chunks
        #expect(decodeError(resealed(damaged)) == .inconsistentGeometry)

        damaged = image
        putLE64(&damaged, 0, at: 24)  // chunk size zero
        #expect(decodeError(resealed(damaged)) == .inconsistentGeometry)

        damaged = image
        putLE64(&damaged, -5, at: 16)  // negative length
        #expect(decodeError(resealed(damaged)) == .inconsistentGeometry)

        damaged = image
        putLE64(&damaged, Int64.max, at: 16)  // an absurd length cannot make decode allocate
        putLE64(&damaged, Int64.max, at: 32)
        putLE64(&damaged, 1, at: 24)
        #expect(decodeError(resealed(damaged)) == .inconsistentGeometry)

        damaged = image
        putLE64(&damaged, 1 << 40, at: 16)
        putLE64(&damaged, 1 << 40, at: 32)
        putLE64(&damaged, 1, at: 24)
        #expect(decodeError(resealed(damaged)) == .truncated)
    }

    @Test func paddingBitsInEitherBitmap() {
        // 78 chunks: the last byte of each bitmap uses 6 bits.
        let writtenStart = Int(JournalCodec.writtenBitmapOffset(header: header))
        var damaged = image
        damaged[writtenStart + 9] |= 0x80
        #expect(decodeError(damaged) == .bitmapPaddingBitsSet)
        damaged = image
        damaged[Int(JournalCodec.durableBitmapOffset(header: header)) + 9] |= 0x40
        #expect(decodeError(damaged) == .bitmapPaddingBitsSet)
    }

    @Test func trailingBytes() {
        #expect(decodeError(image + [0]) == .trailingBytes)
    }

    @Test func malformedHeaderFields() {
        // An unknown flag.
        var damaged = image
        damaged[10] |= 0x80
        #expect(decodeError(resealed(damaged)) == .malformedHeader)
        // Invalid UTF-8 in the URL (its length is at 48, its bytes from 52).
        damaged = image
        damaged[52] = 0xFF
        #expect(decodeError(resealed(damaged)) == .malformedHeader)
        // A string length running past the header.
        damaged = image
        damaged[51] = 0x7F
        #expect(decodeError(resealed(damaged)) == .malformedHeader)
        // A header length shorter than any header.
        damaged = image
        damaged[12] = 10
        damaged[13] = 0
        #expect(decodeError(damaged) == .malformedHeader)
    }

    @Test func aDamagedBootRecordReadsAsAnUnknownBoot() throws {
        // The boot record is rewritten at every open, so a power cut can tear it. That must not lose the
        // journal, only its trust in the written bitmap: any damage reads as the never-matching unknown ID.
        let full = image
        #expect(try JournalCodec.decode(full).header.bootID == header.bootID)
        let start = JournalCodec.headerLength(of: header)
        for byte in start..<(start + JournalCodec.bootRecordLength) {
            for bit in 0..<8 {
                var damaged = full
                damaged[byte] ^= 1 << UInt8(bit)
                let decoded = try JournalCodec.decode(damaged)
                #expect(decoded.header.bootID == Journal.unknownBootID, "bit \(bit) of boot record byte \(byte - start)")
                #expect(decoded.written == patterned(78, every: 2))
            }
        }
        // A torn rewrite: the first half of a new record over the second half of the old one.
        var torn = full
        let newRecord = JournalCodec.encodeBootRecord("a-completely-different-boot-id")
        torn.replaceSubrange(start..<(start + 32), with: newRecord[0..<32])
        #expect(try JournalCodec.decode(torn).header.bootID == Journal.unknownBootID)
    }

    @Test func everyErrorReadsAsASentence() {
        let all: [JournalDecodeError] = [
            .truncated, .badMagic, .unsupportedVersion(9), .headerChecksumMismatch, .malformedHeader,
            .inconsistentGeometry, .bitmapPaddingBitsSet, .trailingBytes, .nonZeroPadding,
        ]
        for error in all {
            #expect(error.description.first?.isUppercase == true && error.description.hasSuffix("."))
            #expect(!error.shortDescription.isEmpty && !error.shortDescription.hasSuffix("."))
        }
    }
}
