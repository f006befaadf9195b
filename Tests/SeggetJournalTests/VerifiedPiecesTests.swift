import Testing
@testable import SeggetJournal

/// The journal's record of verified pieces (format version 3): a fingerprint of the piece hashes
/// and one bit per chunk whose group matched them.
@Suite("Verified pieces in the journal")
struct VerifiedPiecesTests {
    let header = makeHeader(totalLength: 20 * 1000 + 7, chunkSize: 1000)
    let fingerprint = (0..<32).map { UInt8($0 * 7 + 1) }

    @Test func roundTripsWithTheFingerprint() throws {
        var verified = ChunkBitmap(count: 21)
        for k in [0, 3, 8, 20] { verified.set(k) }
        let bytes = JournalCodec.encode(
            header: header, written: patterned(21, every: 1), durable: patterned(21, every: 2),
            piecesFingerprint: fingerprint, verified: verified)
        let decoded = try JournalCodec.decode(bytes)
        #expect(decoded.version == 3)
        #expect(decoded.piecesFingerprint == fingerprint)
        #expect(decoded.verified == verified)
        // Without a fingerprint, bits vouch for nothing and read as none.
        let orphan = try JournalCodec.decode(JournalCodec.encode(
            header: header, written: patterned(21, every: 1), durable: patterned(21, every: 2), verified: verified))
        #expect(orphan.piecesFingerprint == nil)
        #expect(orphan.verified.setCount == 0)
    }

    @Test func everyDamageToThePiecesRecordReadsAsNoPieces() throws {
        var verified = ChunkBitmap(count: 21)
        verified.set(5)
        let full = JournalCodec.encode(
            header: header, written: patterned(21, every: 1), durable: patterned(21, every: 1),
            piecesFingerprint: fingerprint, verified: verified)
        let start = Int(JournalCodec.piecesRecordOffset(header: header))
        for byte in start..<(start + JournalCodec.piecesRecordLength) {
            for bit in 0..<8 {
                var damaged = full
                damaged[byte] ^= 1 << UInt8(bit)
                let decoded = try JournalCodec.decode(damaged)
                #expect(decoded.piecesFingerprint == nil, "byte \(byte) bit \(bit)")
                #expect(decoded.verified.setCount == 0)
                #expect(decoded.written == patterned(21, every: 1))
            }
        }
    }

    @Test func paddingBitsOfTheVerifiedBitmapAreRefused() {
        var bytes = JournalCodec.encode(
            header: header, written: ChunkBitmap(count: 21), durable: ChunkBitmap(count: 21), piecesFingerprint: fingerprint)
        bytes[bytes.count - 1] |= 0x80  // chunk 23 of 21
        #expect(decodeError(bytes) == .bitmapPaddingBitsSet)
    }

    /// A version 2 journal: the same bytes up to the checksum table, nothing after.
    func version2Image() -> [UInt8] {
        var bytes = JournalCodec.encode(header: header, written: patterned(21, every: 3), durable: patterned(21, every: 3))
        bytes.removeLast(bytes.count - Int(JournalCodec.encodedLength(header: header, version: 2)))
        bytes[8] = 2
        return resealed(bytes)
    }

    @Test func aVersion2JournalIsReadAndRecordsNothing() throws {
        let decoded = try JournalCodec.decode(version2Image())
        #expect(decoded.version == 2)
        #expect(decoded.written == patterned(21, every: 3))
        #expect(decoded.piecesFingerprint == nil && decoded.verified.setCount == 0)
        // Version 2 with version 3's trailer, or version 3 without it, is refused.
        var longer = JournalCodec.encode(header: header, written: ChunkBitmap(count: 21), durable: ChunkBitmap(count: 21))
        longer[8] = 2
        #expect(decodeError(resealed(longer)) == .trailingBytes)
        var shorter = version2Image()
        shorter[8] = 3
        #expect(decodeError(resealed(shorter)) == .truncated)

        let clock = CrashClock()
        let disk = SimulatedDisk(contents: version2Image(), clock: clock, seed: 1)
        let (journal, trusted) = try Journal.open(storage: disk, currentBootID: "other")
        #expect(journal.version == 2 && !journal.recordsPieces)
        #expect(trusted == patterned(21, every: 3))
        #expect(try journal.bindPieces(fingerprint: fingerprint) == false)
        try journal.markVerified(chunk: 0)
        #expect(!journal.verified[0])
        #expect(disk.cache.count == version2Image().count)
        #expect(try JournalCodec.decode(disk.cache).version == 2)
    }

    @Test func bindMarkClearAndReopen() throws {
        let clock = CrashClock()
        let disk = SimulatedDisk(contents: [], clock: clock, seed: 2)
        let journal = try Journal(creatingOn: disk, header: header)
        #expect(journal.recordsPieces && journal.piecesFingerprint == nil)
        // Nothing is recorded before the hashes are named.
        try journal.markVerified(chunk: 1)
        #expect(!journal.verified[1])
        #expect(try journal.bindPieces(fingerprint: fingerprint) == false)
        for k in [1, 2, 9] { try journal.markVerified(chunk: k) }
        try journal.clearVerified(chunks: [2, 4])
        var reopened = try Journal.open(storage: disk, currentBootID: "b").journal
        #expect(reopened.piecesFingerprint == fingerprint)
        #expect(reopened.verified.setIndices == [1, 9])
        #expect(try reopened.bindPieces(fingerprint: fingerprint) == true)
        #expect(reopened.verified.setIndices == [1, 9])
        // Other hashes: every bit goes.
        var other = fingerprint
        other[0] ^= 1
        #expect(try reopened.bindPieces(fingerprint: other) == false)
        #expect(reopened.verified.setCount == 0)
        reopened = try Journal.open(storage: disk, currentBootID: "b").journal
        #expect(reopened.piecesFingerprint == other && reopened.verified.setCount == 0)
    }

    @Test func aTornPiecesRecordLeavesNoBitForTheNextHashes() throws {
        // Bits on disk under a record that a power cut tore: they read as none, and binding new
        // hashes must not let them come back.
        var verified = ChunkBitmap(count: 21)
        for k in 0..<21 { verified.set(k) }
        var bytes = JournalCodec.encode(
            header: header, written: patterned(21, every: 1), durable: patterned(21, every: 1),
            piecesFingerprint: fingerprint, verified: verified)
        bytes[Int(JournalCodec.piecesRecordOffset(header: header))] ^= 0xFF
        let disk = SimulatedDisk(contents: bytes, clock: CrashClock(), seed: 3)
        let journal = try Journal.open(storage: disk, currentBootID: "b").journal
        #expect(journal.piecesFingerprint == nil && journal.verified.setCount == 0)
        var other = fingerprint
        other[5] ^= 1
        #expect(try journal.bindPieces(fingerprint: other) == false)
        let again = try Journal.open(storage: disk, currentBootID: "b").journal
        #expect(again.piecesFingerprint == other)
        #expect(again.verified.setCount == 0)
    }

    /// Power cuts at every point of a run that verifies chunks, fetches some again with other bytes,
    /// and binds other hashes: after each, every verified bit of a chunk whose bytes match its
    /// checksum names bytes that were verified against the recorded hashes.
    static func verifiedBitsHold(seed: UInt64, syncingClears: Bool) -> [String] {
        var rng = SplitMix64(seed: seed)
        let chunkCount = Int.random(in: 1...24, using: &rng)
        let chunkSize = Int64.random(in: 1...20, using: &rng)
        let header = JournalHeader(
            url: "https://example.com/f", finalURL: "https://example.com/f", totalLength: Int64(chunkCount) * chunkSize,
            chunkSize: chunkSize, etag: nil, lastModified: nil, bootID: "boot-0", createdAt: 0)
        func bytes(_ k: Int, _ version: UInt8) -> [UInt8] {
            (0..<Int(chunkSize)).map { UInt8(truncatingIfNeeded: k &* 31 &+ $0 &* 7) ^ version }
        }
        let first = [UInt8](repeating: 1, count: 32)
        let second = [UInt8](repeating: 2, count: 32)
        // What each fingerprint verified, per chunk: the bytes that were hashed.
        var verifiedAs: [[UInt8]: [Int: [UInt8]]] = [first: [:], second: [:]]
        let clock = CrashClock()
        let data = SimulatedDisk(
            contents: [UInt8](repeating: 0, count: chunkCount * Int(chunkSize)), clock: clock, seed: rng.next())
        let disk = SimulatedDisk(contents: [], clock: clock, seed: rng.next())
        var problems: [String] = []
        do throws(Errno) {
            let journal = try Journal(creatingOn: disk, header: header)
            journal.syncsVerifiedClears = syncingClears
            for k in 0..<chunkCount {
                try data.write(bytes(k, 0), at: Int64(k) * chunkSize)
                try journal.markWritten(chunk: k, crc: CRC32C.checksum(bytes(k, 0)))
            }
            try journal.checkpoint(syncingData: data)
            try journal.bindPieces(fingerprint: first)
            for k in 0..<chunkCount {
                try journal.markVerified(chunk: k)
                verifiedAs[first]![k] = bytes(k, 0)
            }
            clock.crashAt = clock.operations + Int.random(in: 1...(chunkCount * 8 + 8), using: &rng)
            // Some chunks fetched again with other bytes, the way the engine does: the bit first.
            for k in 0..<chunkCount where Bool.random(using: &rng) {
                try journal.clearVerified(chunks: [k])
                try data.write(bytes(k, 0x5A), at: Int64(k) * chunkSize)
                try journal.markWritten(chunk: k, crc: CRC32C.checksum(bytes(k, 0x5A)))
                if Int.random(in: 0..<4, using: &rng) == 0 { try journal.checkpoint(syncingData: data) }
            }
            try journal.checkpoint(syncingData: data)
            // Then other hashes, which verify some chunks as they now are.
            try journal.bindPieces(fingerprint: second)
            for k in 0..<chunkCount where Bool.random(using: &rng) {
                verifiedAs[second]![k] = Array(data.cache[(k * Int(chunkSize))..<((k + 1) * Int(chunkSize))])
                try journal.markVerified(chunk: k)
            }
            try journal.checkpoint(syncingData: data)
        } catch {}
        data.powerCut()
        disk.powerCut()
        clock.restart()
        guard let opened = try? Journal.open(storage: disk, currentBootID: "boot-1") else { return [] }
        let journal = opened.journal
        guard let recorded = journal.piecesFingerprint else { return [] }
        for k in journal.verified.setIndices where opened.trusted[k] {
            let onDisk = Array(data.cache[(k * Int(chunkSize))..<((k + 1) * Int(chunkSize))])
            guard CRC32C.checksum(onDisk) == journal.chunkCRCs[k] else { continue }  // a resume refetches it
            if verifiedAs[recorded]?[k] != onDisk {
                problems.append("seed \(seed): chunk \(k) is recorded verified for hashes \(recorded[0]) but its bytes were never verified against them")
            }
        }
        return problems
    }

    @Test func verifiedBitsSurvivePowerCutsOnlyWhereTrue() {
        var problems: [String] = []
        for seed in 0..<3000 as Range<UInt64> { problems += Self.verifiedBitsHold(seed: seed, syncingClears: true) }
        #expect(problems.isEmpty, "\(problems.prefix(5))")
    }

    @Test func theCheckCatchesUnsyncedClears() {
        var caught = 0
        for seed in 0..<3000 as Range<UInt64> where !Self.verifiedBitsHold(seed: seed, syncingClears: false).isEmpty { caught += 1 }
        #expect(caught > 0)
    }
}
