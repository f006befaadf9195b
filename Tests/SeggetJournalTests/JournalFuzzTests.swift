import Testing

@testable import SeggetJournal

/// Random mutation fuzzing of `JournalCodec.decode`, beyond DamageTests' exhaustive single-bit flips
/// and truncations: several random edits at once (byte overwrites, insertions, deletions, splices of
/// another journal), with and without the header CRC recomputed so that the field parsers behind the
/// checksum are reached too. Decoding must never trap or allocate absurdly, and whatever it accepts
/// must re-encode to a journal that decodes to the same value. Seeded and bounded (< 1 s).
@Suite("Journal decoder fuzzing")
struct JournalFuzzTests {
    static let seeds: [[UInt8]] = {
        let headers = [
            JournalHeader(url: "https://example.com/f.iso", finalURL: "https://cdn.example.com/f.iso", totalLength: 10_000_003,
                          chunkSize: 1 << 20, etag: "\"e\"", lastModified: "Sat, 21 Nov 2026 07:00:00 GMT", bootID: "boot-a", createdAt: 1),
            JournalHeader(url: "http://h/ファイル", finalURL: "http://h/ファイル", totalLength: 0, chunkSize: 65536, etag: nil,
                          lastModified: nil, bootID: "", createdAt: 0),
            JournalHeader(url: "http://u:p@h/x", finalURL: "http://h/x", totalLength: 77, chunkSize: 16384, etag: "",
                          lastModified: nil, bootID: String(repeating: "b", count: 80), createdAt: -5),
        ]
        return headers.map { h in
            var written = ChunkBitmap(count: h.chunkCount)
            for i in stride(from: 0, to: h.chunkCount, by: 2) { written.set(i) }
            return JournalCodec.encode(header: h, written: written, durable: ChunkBitmap(count: h.chunkCount))
        }
    }()

    @Test func randomMutationsNeverTrapAndAcceptedValuesRoundTrip() {
        var rng = JournalFuzzRandom(seed: 0x5EED_7001)
        var accepted = 0
        for round in 0..<6_000 {
            var bytes = Self.seeds[round % Self.seeds.count]
            for _ in 0..<(1 + rng.below(5)) { mutate(&bytes, &rng) }
            if round % 2 == 0 { reseal(&bytes) }
            guard let decoded = try? JournalCodec.decode(bytes) else { continue }
            accepted += 1
            #expect(decoded.written.count == decoded.header.chunkCount)
            #expect(decoded.durable.count == decoded.header.chunkCount)
            #expect(decoded.header.totalLength >= 0 && decoded.header.chunkSize > 0)
            let again = JournalCodec.encode(
                header: decoded.header, written: decoded.written, durable: decoded.durable, chunkCRCs: decoded.chunkCRCs)
            let redecoded = try? JournalCodec.decode(again)
            #expect(redecoded?.header == decoded.header, "round \(round)")
            #expect(redecoded?.written == decoded.written)
            #expect(redecoded?.durable == decoded.durable)
            #expect(redecoded?.chunkCRCs == decoded.chunkCRCs)
        }
        // Bitmap-only edits and boot-record edits are accepted by design; make sure the fuzzer got there.
        #expect(accepted > 0)
    }

    @Test func garbageWithAValidMagicIsRejected() {
        var rng = JournalFuzzRandom(seed: 0x5EED_7002)
        for _ in 0..<4_000 {
            var bytes = JournalCodec.magic
            for _ in 0..<rng.below(300) { bytes.append(UInt8(truncatingIfNeeded: rng.next())) }
            if rng.below(2) == 0, bytes.count > 16 {
                // A plausible version and a header length within the buffer, then resealed.
                bytes[8] = UInt8(JournalCodec.currentVersion)
                bytes[9] = 0
                let length = min(bytes.count, 40 + rng.below(200))
                for k in 0..<4 { bytes[12 + k] = UInt8(truncatingIfNeeded: length >> (8 * k)) }
                reseal(&bytes)
            }
            #expect(throws: JournalDecodeError.self) { try JournalCodec.decode(bytes) }
        }
    }

    /// One random edit.
    private func mutate(_ bytes: inout [UInt8], _ rng: inout JournalFuzzRandom) {
        switch rng.below(6) {
        case 0 where !bytes.isEmpty:
            bytes[rng.below(bytes.count)] = UInt8(truncatingIfNeeded: rng.next())
        case 1:
            bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: rng.below(bytes.count + 1))
        case 2 where !bytes.isEmpty:
            bytes.remove(at: rng.below(bytes.count))
        case 3 where bytes.count > 24:
            // An 8-byte little-endian field set to an edge value.
            let edges: [UInt64] = [0, 1, 0x7FFF_FFFF_FFFF_FFFF, 0x8000_0000_0000_0000, 0xFFFF_FFFF_FFFF_FFFF, 1 << 32, 1 << 40]
            let v = edges[rng.below(edges.count)]
            let at = rng.below(bytes.count - 8)
            for k in 0..<8 { bytes[at + k] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(k))) }
        case 4:
            let other = Self.seeds[rng.below(Self.seeds.count)]
            let cut = rng.below(min(bytes.count, other.count) + 1)
            bytes = Array(bytes[..<cut]) + Array(other[cut...])
        default:
            if !bytes.isEmpty { bytes[rng.below(bytes.count)] ^= 1 << UInt8(rng.below(8)) }
        }
    }

    /// Recomputes the header CRC when the stored header length is plausible (else leaves it).
    private func reseal(_ bytes: inout [UInt8]) {
        guard bytes.count >= 20 else { return }
        let length = Int(bytes[12]) | Int(bytes[13]) << 8 | Int(bytes[14]) << 16 | Int(bytes[15]) << 24
        guard length >= 20, length <= bytes.count else { return }
        let crc = CRC32.checksum(bytes[0..<(length - 4)])
        for k in 0..<4 { bytes[length - 4 + k] = UInt8(truncatingIfNeeded: crc >> (8 * k)) }
    }
}

/// SplitMix64 (own copy, so that this file depends on nothing else in the target).
struct JournalFuzzRandom {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
