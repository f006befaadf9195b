import Testing
@testable import SeggetJournal

@Suite("CRC-32C")
struct CRC32CTests {
    /// Bit by bit, straight from the definition: what the table-driven code must agree with.
    static func reference(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    @Test func knownValues() {
        // The check value of the CRC catalogue, and the test vectors of RFC 3720 (iSCSI), B.4.
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum((0..<32).map { UInt8(31 - $0) }) == 0x113F_DB5C)
        #expect(CRC32C.checksum([UInt8]()) == 0)
    }

    @Test func agreesWithTheBitwiseDefinitionAtEveryLengthAndAlignment() {
        var rng = SplitMix64(seed: 32)
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &rng) }
        bytes.withUnsafeBytes { all in
            for start in 0..<9 {
                for length in 0...(bytes.count - start) where length < 40 || length % 13 == 0 {
                    let piece = UnsafeRawBufferPointer(rebasing: all[start..<(start + length)])
                    let want = Self.reference(Array(piece))
                    #expect(CRC32C.checksum(piece) == want, "start \(start), length \(length)")
                    // Both paths, whichever one this CPU uses for `checksum`.
                    #expect(CRC32C.updateWithTables(0, piece) == want, "tables: start \(start), length \(length)")
                }
            }
        }
    }

    /// Long pieces go through the instruction's three lanes (rounds of 3 × 4 KiB, folded together):
    /// the same checksums as the tables, at lengths about whole rounds and at every alignment.
    @Test func threeLanesAgreeWithTheTables() {
        var rng = SplitMix64(seed: 35)
        let bytes = (0..<(100 << 10)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let round = 3 * 4096
        bytes.withUnsafeBytes { all in
            for start in 0..<9 {
                for rounds in [1, 2, 5, 8] {
                    for extra in [-1, 0, 1, 7, 8, 9, 4095, 4096, 12287] where rounds * round + extra + start <= all.count {
                        let piece = UnsafeRawBufferPointer(rebasing: all[start..<(start + rounds * round + extra)])
                        let seed = UInt32.random(in: 0...UInt32.max, using: &rng)
                        #expect(
                            CRC32C.update(seed, piece) == CRC32C.updateWithTables(seed, piece),
                            "start \(start), length \(piece.count)")
                    }
                }
            }
        }
    }

    /// The x86-64 build uses the CPU's `crc32` instruction (every x86-64 CPU since 2008 has it).
    @Test func theInstructionIsUsedWhereTheCPUHasIt() {
        #if arch(x86_64)
        #expect(CRC32C.hardware)
        #endif
    }

    @Test func continuingPieceByPieceEqualsTheWhole() {
        var rng = SplitMix64(seed: 33)
        let bytes = (0..<5000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let whole = CRC32C.checksum(bytes)
        for _ in 0..<200 {
            var crc: UInt32 = 0
            var at = 0
            while at < bytes.count {
                let n = min(bytes.count - at, Int.random(in: 0...700, using: &rng))
                crc = bytes.withUnsafeBytes { CRC32C.update(crc, UnsafeRawBufferPointer(rebasing: $0[at..<(at + n)])) }
                at += n
            }
            #expect(crc == whole)
        }
    }

    @Test func combiningSeparatelyChecksummedPiecesEqualsTheWhole() {
        var rng = SplitMix64(seed: 34)
        let bytes = (0..<20_000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        for _ in 0..<300 {
            let cut = Int.random(in: 0...bytes.count, using: &rng)
            let end = Int.random(in: cut...bytes.count, using: &rng)
            let combined = CRC32C.combine(
                CRC32C.checksum(bytes[0..<cut]), CRC32C.checksum(bytes[cut..<end]), secondLength: Int64(end - cut))
            #expect(combined == CRC32C.checksum(bytes[0..<end]), "cut \(cut), end \(end)")
        }
        // A long second piece exercises high powers: 8 MiB of zeros after "123456789".
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var crc = CRC32C.checksum(Array("123456789".utf8))
        let zerosCRC = zeros.withUnsafeBytes { z in (0..<8).reduce(UInt32(0)) { c, _ in CRC32C.update(c, z) } }
        let combined = CRC32C.combine(crc, zerosCRC, secondLength: 8 << 20)
        crc = zeros.withUnsafeBytes { z in (0..<8).reduce(crc) { c, _ in CRC32C.update(c, z) } }
        #expect(combined == crc)
    }
}
