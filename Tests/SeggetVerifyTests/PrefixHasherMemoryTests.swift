import Foundation
import Synchronization
import Testing

@testable import SeggetVerify

/// The hasher fed from memory: bytes lent as a download hands them to its writer. The file under
/// the hasher holds zeros wherever a test lends the bytes instead of writing them, so a right digest
/// proves they were hashed from memory, and a read back of them would make it wrong.
@Suite struct PrefixHasherMemoryTests {
    /// Buffers lent to a hasher, each given back once: counts what came back, and checks a buffer is
    /// given back only once.
    final class Lender: @unchecked Sendable {
        private let returned = Mutex<[Int: Int]>([:])
        private var buffers: [UnsafeMutableRawBufferPointer] = []

        deinit { for b in buffers { b.deallocate() } }

        /// Lends `bytes[range]` as buffer `id` (a copy that stays put until given back).
        func lend(_ bytes: [UInt8], _ range: Range<Int>, id: Int, to hasher: PrefixHasher) -> PrefixHasher.Lending {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: range.count, alignment: 16)
            bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[range])) }
            buffers.append(buffer)
            return hasher.lend(UnsafeRawBufferPointer(buffer), at: Int64(range.lowerBound), footprint: range.count) {
                [self] in
                returned.withLock { $0[id, default: 0] += 1 }
            }
        }

        var givenBack: [Int: Int] { returned.withLock { $0 } }
    }

    static func digest(_ algorithm: DigestAlgorithm, _ bytes: [UInt8]) -> [UInt8] {
        let d = Digester(algorithm)
        d.update(bytes)
        return d.finalize()
    }

    /// A download whose connections stay inside the window: every byte is hashed from memory (the
    /// file holds only zeros), nothing is read back, and every buffer is given back exactly once.
    @Test func inOrderLendingIsHashedFromMemoryAlone() throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 6 << 20 | 333, seed: 3)
        let path = try directory.write([UInt8](repeating: 0, count: data.count), named: "zeros")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256, .md5], memoryWindow: 4 << 20)
        let lender = Lender()
        let piece = 256 << 10
        var kept = 0
        for (id, start) in stride(from: 0, to: data.count, by: piece).enumerated() {
            let lent = lender.lend(data, start..<min(start + piece, data.count), id: id, to: hasher)
            #expect(!lent.fellOut)
            if lent.kept { kept += 1 }
            hasher.advance(to: Int64(min(start + piece, data.count)))
            // A download slower than the hash: it keeps up.
            let deadline = Date().addingTimeInterval(10)
            while hasher.hashedBytes < Int64(start) && Date() < deadline { usleep(200) }
        }
        let digests = try hasher.finish(length: Int64(data.count))
        #expect(digests[.sha256] == Self.digest(.sha256, data))
        #expect(digests[.md5] == Self.digest(.md5, data))
        #expect(hasher.statistics.fromMemory == Int64(data.count))
        #expect(hasher.statistics.readBack == 0)
        #expect(hasher.statistics.fellOut == 0)
        #expect(kept == (data.count + piece - 1) / piece)
        #expect(lender.givenBack == Dictionary(uniqueKeysWithValues: (0..<kept).map { ($0, 1) }))
    }

    /// Pieces lent out of order, far beyond a small window: those that fall out are read back from
    /// the file (which holds the right bytes there), the others come from memory (zeros in the file
    /// there), and the digest is right only if each came from the right place.
    @Test(arguments: [UInt64(1), 2, 3])
    func whatFallsOutIsReadBackAndTheRestComesFromMemory(seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 12 << 20 | 4095, seed: seed)
        let path = try directory.write([UInt8](repeating: 0, count: data.count), named: "part")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256], memoryWindow: 2 << 20)
        let lender = Lender()
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? file.close() }
        let piece = 128 << 10
        let count = (data.count + piece - 1) / piece
        // Four "connections" over runs of 16 pieces, interleaved.
        var generator = SeededGenerator(seed: seed)
        var order: [Int] = []
        for group in stride(from: 0, to: count, by: 64) {
            let runs = (0..<4).map { r in Array(stride(from: group + r * 16, to: min(group + r * 16 + 16, count), by: 1)) }
            var cursors = runs.map { $0.makeIterator() }
            var live = Array(runs.indices)
            while !live.isEmpty {
                let i = live[Int(generator.next() % UInt64(live.count))]
                if let next = cursors[i].next() { order.append(next) } else { live.removeAll { $0 == i } }
            }
        }
        var done = [Bool](repeating: false, count: count)
        var prefix = 0
        var kept = Set<Int>()
        for p in order {
            let range = (p * piece)..<min((p + 1) * piece, data.count)
            let lent = lender.lend(data, range, id: p, to: hasher)
            if lent.kept { kept.insert(p) }
            if lent.fellOut || !lent.kept {
                // Not kept whole: the file gets the bytes, for the read back.
                try file.seek(toOffset: UInt64(range.lowerBound))
                try file.write(contentsOf: Data(data[range]))
            }
            done[p] = true
            while prefix < count && done[prefix] { prefix += 1 }
            hasher.advance(to: Int64(min(prefix * piece, data.count)))
        }
        #expect(try hasher.finish(length: Int64(data.count))[.sha256] == Self.digest(.sha256, data))
        let stats = hasher.statistics
        #expect(stats.readBack > 0 && stats.fellOut > 0)
        #expect(stats.fromMemory > 0 && stats.fromMemory < Int64(data.count))
        #expect(stats.peakMemory <= 2 << 20)
        #expect(Set(lender.givenBack.keys) == kept)
        #expect(lender.givenBack.values.allSatisfy { $0 == 1 })
    }

    /// A resumed download: the first half is on disk, the second arrives and is lent (the file holds
    /// zeros there). The hash reads the kept half from the file while the second half downloads, and
    /// takes the rest from memory once it caught up.
    @Test func aResumeHashesTheDiskThenSwitchesToMemory() throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 8 << 20, seed: 8)
        let half = data.count / 2
        let path = try directory.write(Array(data[..<half]) + [UInt8](repeating: 0, count: half), named: "resumed")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256], memoryWindow: 8 << 20)
        hasher.advance(to: Int64(half))
        let lender = Lender()
        let piece = 256 << 10
        for (id, start) in stride(from: half, to: data.count, by: piece).enumerated() {
            #expect(lender.lend(data, start..<(start + piece), id: id, to: hasher).kept)
        }
        #expect(try hasher.finish(length: Int64(data.count))[.sha256] == Self.digest(.sha256, data))
        #expect(hasher.statistics.readBack == Int64(half))
        #expect(hasher.statistics.fromMemory == Int64(half))
        #expect(lender.givenBack.count == half / piece)
    }

    /// Cancelling gives back every buffer the hasher kept, hashed or not; bytes lent after that are
    /// not kept.
    @Test func cancelGivesEveryKeptBufferBack() throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 2 << 20, seed: 4)
        let path = try directory.write([UInt8](repeating: 0, count: data.count), named: "f")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256], memoryWindow: 4 << 20)
        let lender = Lender()
        // Behind a hole at 0..<64 KiB that never comes, so none of them can be hashed.
        for (id, start) in stride(from: 64 << 10, to: data.count, by: 64 << 10).enumerated() {
            #expect(lender.lend(data, start..<(start + (64 << 10)), id: id, to: hasher).kept)
        }
        #expect(hasher.hashedBytes == 0)
        hasher.cancel()
        #expect(lender.givenBack.count == 31)
        #expect(lender.givenBack.values.allSatisfy { $0 == 1 })
        #expect(!lender.lend(data, 0..<(64 << 10), id: 99, to: hasher).kept)
        #expect(throws: HashingError.self) { _ = try hasher.finish(length: Int64(data.count)) }
    }

    /// Bytes handed over as a value (the probe's first bytes) are kept without a copy and hashed.
    @Test func ownedBytesAreHashedFromMemory() throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 3 << 20, seed: 6)
        let path = try directory.write([UInt8](repeating: 0, count: data.count), named: "owned")
        let hasher = try PrefixHasher(path: path, algorithms: [.md5], memoryWindow: 4 << 20)
        hasher.offer(Array(data[..<(1 << 20)]), at: 0)
        hasher.offer(Array(data[(1 << 20)...]), at: 1 << 20)
        #expect(try hasher.finish(length: Int64(data.count))[.md5] == Self.digest(.md5, data))
        #expect(hasher.statistics.fromMemory == Int64(data.count))
    }
}
