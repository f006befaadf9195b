import Testing
@testable import SeggetJournal

func makeHeader(
    url: String = "https://example.com/file.iso", totalLength: Int64, chunkSize: Int64,
    etag: String? = "\"abc-123\"", lastModified: String? = "Sat, 21 Nov 2026 07:00:00 GMT",
    bootID: String = "8f6c5d2e-3b1a-4c9e-9f7d-0a1b2c3d4e5f"
) -> JournalHeader {
    JournalHeader(
        url: url, finalURL: url + "?redirected=1", totalLength: totalLength, chunkSize: chunkSize,
        etag: etag, lastModified: lastModified, bootID: bootID, createdAt: 1_795_000_000)
}

/// A bitmap with a reproducible pattern of set bits.
func patterned(_ count: Int, every step: Int, offset: Int = 0) -> ChunkBitmap {
    var bitmap = ChunkBitmap(count: count)
    var i = offset
    while i < count {
        bitmap.set(i)
        i += step
    }
    return bitmap
}

@Suite("CRC-32")
struct CRC32Tests {
    @Test func checkValue() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
    }
}

@Suite("ChunkBitmap")
struct ChunkBitmapTests {
    @Test func setCountAndCompletion() {
        var bitmap = ChunkBitmap(count: 10)
        #expect(bitmap.bytes.count == 2)
        #expect(!bitmap.isComplete)
        for i in 0..<10 { bitmap.set(i) }
        bitmap.set(3)
        #expect(bitmap.setCount == 10)
        #expect(bitmap.isComplete)
        #expect(bitmap.bytes == [0xFF, 0x03])
        #expect(ChunkBitmap(count: 0).isComplete)
    }

    @Test func bitOrderIsLeastSignificantFirst() {
        var bitmap = ChunkBitmap(count: 16)
        bitmap.set(0)
        bitmap.set(9)
        #expect(bitmap.bytes == [0x01, 0x02])
        #expect(bitmap[9] && !bitmap[8])
    }

    @Test func firstUnsetSkipsFinishedBytes() {
        var bitmap = ChunkBitmap(count: 30)
        for i in 0..<20 { bitmap.set(i) }
        bitmap.set(21)
        #expect(bitmap.firstUnset(from: 0) == 20)
        #expect(bitmap.firstUnset(from: 21) == 22)
        for i in 0..<30 { bitmap.set(i) }
        #expect(bitmap.firstUnset(from: 0) == nil)
    }

    @Test func unionAndSubset() {
        let a = patterned(20, every: 3)
        let b = patterned(20, every: 5)
        let u = a.union(b)
        #expect(a.isSubset(of: u) && b.isSubset(of: u))
        #expect(!u.isSubset(of: a))
        #expect(u.setCount == u.setIndices.count)
        #expect(u.setIndices == (0..<20).filter { $0 % 3 == 0 || $0 % 5 == 0 })
    }

    @Test func rejectsWrongLengthAndPaddingBits() {
        #expect(ChunkBitmap(bytes: [0x01], count: 9) == nil)
        #expect(ChunkBitmap(bytes: [0xFF, 0x02], count: 9) == nil)  // bit 9 is padding
        #expect(ChunkBitmap(bytes: [0xFF, 0x01], count: 9)?.setCount == 9)
        #expect(ChunkBitmap(bytes: [], count: 0) != nil)
    }
}

@Suite("Credentials")
struct CredentialTests {
    @Test func redaction() {
        #expect(JournalHeader.redactingCredentials("https://user:secret@host/f") == "https://host/f")
        #expect(JournalHeader.redactingCredentials("https://user@host:8443/f?q=1") == "https://host:8443/f?q=1")
        #expect(JournalHeader.redactingCredentials("ftp://u:p@ss@host") == "ftp://host")
        #expect(JournalHeader.redactingCredentials("https://host/a@b?c=d@e#f@g") == "https://host/a@b?c=d@e#f@g")
        #expect(JournalHeader.redactingCredentials("https://host?x@y") == "https://host?x@y")
        #expect(JournalHeader.redactingCredentials("not a url @ all") == "not a url @ all")
    }

    @Test func encodedJournalNeverHoldsThePassword() {
        let header = JournalHeader(
            url: "https://user:secret@host/f", finalURL: "https://user:secret@cdn.host/f", totalLength: 10,
            chunkSize: 4, etag: nil, lastModified: nil, bootID: "b", createdAt: 0)
        #expect(header.url == "https://host/f")
        let bytes = JournalCodec.encode(
            header: header, written: ChunkBitmap(count: 3), durable: ChunkBitmap(count: 3))
        let secret = Array("secret".utf8)
        let found = bytes.indices.dropLast(secret.count - 1).contains { bytes[$0..<($0 + secret.count)].elementsEqual(secret) }
        #expect(!found)
        #expect(!bytes.indices.dropLast(3).contains { bytes[$0..<($0 + 4)].elementsEqual(Array("user".utf8)) })
    }
}

@Suite("Journal codec")
struct CodecTests {
    func roundTrip(_ header: JournalHeader, _ written: ChunkBitmap, _ durable: ChunkBitmap) throws {
        // Checksums that differ per chunk and use all four bytes.
        let crcs = (0..<header.chunkCount).map { UInt32(truncatingIfNeeded: $0 &* 0x9E37_79B1 &+ 0x0102_0304) }
        let bytes = JournalCodec.encode(header: header, written: written, durable: durable, chunkCRCs: crcs)
        #expect(Int64(bytes.count) == JournalCodec.encodedLength(header: header))
        let decoded = try JournalCodec.decode(bytes)
        #expect(decoded.header == header)
        #expect(decoded.written == written)
        #expect(decoded.durable == durable)
        #expect(decoded.chunkCRCs == crcs)
        // The bitmaps and checksums sit where the offsets say; the table starts at a multiple of 4.
        let w = Int(JournalCodec.writtenBitmapOffset(header: header))
        let d = Int(JournalCodec.durableBitmapOffset(header: header))
        let t = Int(JournalCodec.checksumTableOffset(header: header))
        #expect(t % 4 == 0 && t - (d + durable.bytes.count) < 4)
        #expect(Array(bytes[w..<d]) == written.bytes)
        #expect(Array(bytes[d..<(d + durable.bytes.count)]) == durable.bytes)
        #expect(bytes[(d + durable.bytes.count)..<t].allSatisfy { $0 == 0 })
        for k in [0, header.chunkCount / 2, header.chunkCount - 1] where k >= 0 && k < header.chunkCount {
            let at = Int(JournalCodec.checksumOffset(header: header, chunk: k))
            #expect(Array(bytes[at..<(at + 4)]) == JournalCodec.encodeChecksum(crcs[k]))
        }
        // Without checksums given, every entry is 0: no chunk is vouched for.
        let plain = try JournalCodec.decode(JournalCodec.encode(header: header, written: written, durable: durable))
        #expect(plain.chunkCRCs.allSatisfy { $0 == 0 })
    }

    @Test func theDocumentedExampleLayout() throws {
        // docs/journal-format.md works this example through; keep the two in step.
        let header = JournalHeader(
            url: "https://example.com/f.iso", finalURL: "https://example.com/f.iso", totalLength: 10 << 20,
            chunkSize: 1 << 20, etag: "\"abc\"", lastModified: nil, bootID: "b", createdAt: 0)
        #expect(JournalCodec.headerLength(of: header) == 123)
        #expect(JournalCodec.bootRecordOffset(header: header) == 123)
        #expect(JournalCodec.writtenBitmapOffset(header: header) == 187)
        #expect(JournalCodec.durableBitmapOffset(header: header) == 189)
        #expect(JournalCodec.checksumTableOffset(header: header) == 192)
        #expect(JournalCodec.piecesRecordOffset(header: header) == 232)
        #expect(JournalCodec.verifiedBitmapOffset(header: header) == 272)
        #expect(JournalCodec.encodedLength(header: header) == 274)
        #expect(JournalCodec.encodedLength(header: header, version: 2) == 232)
        let bytes = JournalCodec.encode(header: header, written: ChunkBitmap(count: 10), durable: ChunkBitmap(count: 10))
        #expect(bytes.count == 274)
        #expect(Array(bytes[0..<8]) == Array("SGGTJRNL".utf8))
        #expect(bytes[8] == 3 && bytes[9] == 0)
        #expect(bytes[10] == 1)  // ETag present, Last-Modified absent
        #expect(bytes[12] == 123)
    }

    @Test func emptyFileHasNoChunks() throws {
        let header = makeHeader(totalLength: 0, chunkSize: 1 << 20)
        #expect(header.chunkCount == 0)
        try roundTrip(header, ChunkBitmap(count: 0), ChunkBitmap(count: 0))
    }

    @Test func oneShortChunk() throws {
        let header = makeHeader(totalLength: 1000, chunkSize: 1 << 20)
        #expect(header.chunkCount == 1)
        #expect(header.byteRange(ofChunk: 0) == 0..<1000)
        try roundTrip(header, patterned(1, every: 1), ChunkBitmap(count: 1))
    }

    @Test func eightChunksFillOneByte() throws {
        let header = makeHeader(totalLength: 8 << 20, chunkSize: 1 << 20)
        #expect(header.chunkCount == 8)
        try roundTrip(header, patterned(8, every: 1), patterned(8, every: 2))
    }

    @Test func aMillionAndOneChunks() throws {
        let header = makeHeader(totalLength: 1_000_001 << 20 - 5, chunkSize: 1 << 20)
        #expect(header.chunkCount == 1_000_001)
        #expect(header.byteRange(ofChunk: 1_000_000).count == (1 << 20) - 5)
        try roundTrip(header, patterned(1_000_001, every: 3), patterned(1_000_001, every: 6))
    }

    @Test func unicodeURLAndNoValidators() throws {
        let header = makeHeader(
            url: "https://例え.jp/ファイル/naïve 🚀.bin", totalLength: 12_345, chunkSize: 100, etag: nil,
            lastModified: nil)
        try roundTrip(header, patterned(124, every: 7), patterned(124, every: 14))
    }

    @Test func emptyValidatorsDifferFromAbsentOnes() throws {
        let header = makeHeader(totalLength: 10, chunkSize: 3, etag: "", lastModified: nil)
        let decoded = try JournalCodec.decode(
            JournalCodec.encode(header: header, written: ChunkBitmap(count: 4), durable: ChunkBitmap(count: 4)))
        #expect(decoded.header.etag == "")
        #expect(decoded.header.lastModified == nil)
    }

    @Test func longBootIDIsCutNotOverflowed() throws {
        let header = makeHeader(totalLength: 10, chunkSize: 3, bootID: String(repeating: "é", count: 40))
        #expect(header.bootID.utf8.count <= JournalHeader.maximumBootIDLength)
        try roundTrip(header, ChunkBitmap(count: 4), ChunkBitmap(count: 4))
    }

    @Test func rewritingTheBootIDKeepsTheBitmapsInPlace() {
        let header = makeHeader(totalLength: 100, chunkSize: 7, bootID: "a")
        let other = header.with(bootID: "unknown-and-much-longer-boot-id")
        #expect(JournalCodec.writtenBitmapOffset(header: header) == JournalCodec.writtenBitmapOffset(header: other))
    }
}
