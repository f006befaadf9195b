import Foundation
import Testing

@testable import SeggetVerify

@Suite struct PrefixHasherTests {
    /// Writes `data` into `path` in shuffled chunk order, advancing the hasher to the contiguous finished
    /// prefix after every chunk, as the download engine does (see `writeChunks`).
    static func writeShuffled(_ data: [UInt8], to path: String, chunkSize: Int, seed: UInt64, hasher: PrefixHasher)
        throws
    {
        var generator = SeededGenerator(seed: seed)
        let chunkCount = (data.count + chunkSize - 1) / chunkSize
        let order = Array(0..<chunkCount).shuffled(using: &generator)
        writeChunks(data, path: path, chunkSize: chunkSize, order: order, hasher: hasher)
    }

    /// Writes `data` chunk by chunk in `order` (chunk indices) with `pwrite`, creating the file if needed
    /// (a preallocated file keeps its zeros beyond what is written), and advances the hasher to the
    /// finished prefix after each chunk. With `offer`, each chunk is also offered to the hasher's memory
    /// window after its write, as the engine does. With `paced`, waits after each chunk until the hasher
    /// has caught up (a download slower than hashing), so that no offer falls beyond the window.
    static func writeChunks(_ data: [UInt8], path: String, chunkSize: Int, order: [Int], hasher: PrefixHasher,
                            offer: Bool = false, paced: Bool = false) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        precondition(descriptor >= 0, "test open failed")
        defer { close(descriptor) }
        let chunkCount = (data.count + chunkSize - 1) / chunkSize
        var finished = [Bool](repeating: false, count: chunkCount)
        var prefix = 0
        data.withUnsafeBytes { all in
            for chunk in order {
                let start = chunk * chunkSize
                let end = min(start + chunkSize, all.count)
                let piece = UnsafeRawBufferPointer(rebasing: all[start..<end])
                precondition(pwrite(descriptor, piece.baseAddress, piece.count, off_t(start)) == piece.count, "test write failed")
                if offer { hasher.offer(piece, at: Int64(start)) }
                finished[chunk] = true
                while prefix < chunkCount && finished[prefix] { prefix += 1 }
                let offset = Int64(min(prefix * chunkSize, all.count))
                hasher.advance(to: offset)
                while paced && hasher.hashedBytes < offset / 4096 * 4096 { usleep(200) }
            }
        }
    }

    @Test func followsShuffledWritesAndMatchesDigestFile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("download.part")
        let data = patternBytes(count: 24 << 20 | 12345, seed: 42)
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256, .md5])
        try Self.writeShuffled(data, to: path, chunkSize: 256 << 10, seed: 7, hasher: hasher)

        let digests = try hasher.finish(length: Int64(data.count))
        #expect(hasher.hashedBytes == Int64(data.count))
        let expected = try digestFile(path: path, algorithms: [.sha256, .md5])
        #expect(digests == expected)
        #expect(digests.count == 2)
        // finish is idempotent.
        #expect(try hasher.finish(length: Int64(data.count)) == expected)
    }

    @Test(arguments: [1, 4093, 65537, 4 << 20, (4 << 20) + 1])
    func oddChunkSizesOverPreallocatedFile(chunkSize: Int) throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 9 << 20 | 77, seed: UInt64(chunkSize))
        // A preallocated (zero-filled) file, as the engine makes, so reads beyond the prefix would see zeros.
        let path = try directory.write([UInt8](repeating: 0, count: data.count), named: "pre")
        let hasher = try PrefixHasher(path: path, algorithms: [.md5])
        if chunkSize == 1 {
            // A byte at a time is too slow for 9 MiB; use a small file and sequential writes.
            let small = Array(data.prefix(20_000))
            let smallPath = try directory.write([UInt8](repeating: 0, count: small.count), named: "small")
            let smallHasher = try PrefixHasher(path: smallPath, algorithms: [.md5])
            try Self.writeShuffled(small, to: smallPath, chunkSize: 1, seed: 1, hasher: smallHasher)
            let expected = Digester(.md5)
            expected.update(small)
            #expect(try smallHasher.finish(length: Int64(small.count))[.md5] == expected.finalize())
            hasher.cancel()
            return
        }
        try Self.writeShuffled(data, to: path, chunkSize: chunkSize, seed: 3, hasher: hasher)
        let expected = Digester(.md5)
        expected.update(data)
        #expect(try hasher.finish(length: Int64(data.count))[.md5] == expected.finalize())
    }

    /// The hasher works behind the writer, before `finish`: after the first half is advanced, it gets hashed.
    @Test func hashesThePrefixBeforeFinish() throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 10 << 20, seed: 11)
        let half = data.count / 2
        let path = try directory.write(Array(data.prefix(half)), named: "growing")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256])
        hasher.advance(to: Int64(half))
        let deadline = Date().addingTimeInterval(10)
        while hasher.hashedBytes < Int64(half) && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.001)
        }
        #expect(hasher.hashedBytes == Int64(half))

        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(data[half...]))
        try handle.close()
        let expected = Digester(.sha256)
        expected.update(data)
        #expect(try hasher.finish(length: Int64(data.count))[.sha256] == expected.finalize())
    }

    @Test func emptyLengthAndDuplicateAlgorithms() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write([], named: "empty")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256, .sha256])
        let digests = try hasher.finish(length: 0)
        #expect(digests.count == 1)
        #expect(digests[.sha256].map(hexString) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func cancelStopsTheThread() throws {
        let directory = try TemporaryDirectory()
        let length = 64 << 20
        let path = try directory.write(patternBytes(count: length, seed: 5), named: "big")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256, .md5])
        hasher.advance(to: Int64(length))
        hasher.cancel()
        let stoppedAt = hasher.hashedBytes
        Thread.sleep(forTimeInterval: 0.05)
        #expect(hasher.hashedBytes == stoppedAt)
        #expect(stoppedAt < Int64(length))
        #expect {
            _ = try hasher.finish(length: Int64(length))
        } throws: { error in
            (error as? HashingError)?.code == .cancelled
        }
        hasher.cancel()  // harmless twice
    }

    @Test func cancelBeforeAnyWorkAndDroppingAreHarmless() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write([1, 2, 3], named: "tiny")
        let idle = try PrefixHasher(path: path, algorithms: [.md5])
        idle.cancel()
        #expect(idle.hashedBytes == 0)
        for _ in 0..<50 {
            let dropped = try PrefixHasher(path: path, algorithms: [.sha256])
            dropped.advance(to: 2)
        }
    }

    @Test func finishOnShortFileThrows() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write(patternBytes(count: 1000, seed: 9), named: "short")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256])
        hasher.advance(to: 500)
        #expect {
            _ = try hasher.finish(length: 5000)
        } throws: { error in
            guard let error = error as? HashingError else { return false }
            return error.code == .fileTooShort(expected: 5000, actual: 1000) && error.description.contains("1000 bytes")
        }
    }

    @Test func shortFileDuringAdvanceSurfacesFromFinish() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write(patternBytes(count: 1000, seed: 9), named: "short")
        let hasher = try PrefixHasher(path: path, algorithms: [.md5])
        hasher.advance(to: 3000)  // beyond the end: the thread fails now, finish reports it later
        Thread.sleep(forTimeInterval: 0.02)
        #expect(throws: HashingError.self) {
            _ = try hasher.finish(length: 3000)
        }
    }

    @Test func advancingPastLengthThrows() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write(patternBytes(count: 4000, seed: 1), named: "f")
        let hasher = try PrefixHasher(path: path, algorithms: [.md5])
        hasher.advance(to: 4000)
        #expect {
            _ = try hasher.finish(length: 1000)
        } throws: { error in
            (error as? HashingError)?.code == .advancedPastLength(advanced: 4000, length: 1000)
        }
    }

    @Test func missingFileThrowsAtInit() {
        #expect {
            _ = try PrefixHasher(path: "/nonexistent/segget/file", algorithms: [.sha256])
        } throws: { error in
            (error as? HashingError)?.code == .openFailed(errno: ENOENT)
        }
    }
}

/// The hasher over files written the way the engine writes them by default: read back with `O_DIRECT`,
/// and fed from its memory window where possible.
@Suite struct DirectPrefixHasherTests {
    @Test(arguments: [4093, 65537, 1 << 20, (4 << 20) + 1])
    func directReadsWithOddChunkSizes(chunkSize: Int) throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 9 << 20 | 77, seed: UInt64(chunkSize))
        let path = try directory.write([UInt8](repeating: 0, count: data.count), named: "pre")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256], direct: true)
        #expect(hasher.readsDirectly)
        try PrefixHasherTests.writeShuffled(data, to: path, chunkSize: chunkSize, seed: 5, hasher: hasher)
        let expected = Digester(.sha256)
        expected.update(data)
        #expect(try hasher.finish(length: Int64(data.count))[.sha256] == expected.finalize())
        #expect(hasher.bytesReadFromFile >= Int64(data.count))
    }

    /// Chunks written in order within the window are hashed from memory: nothing is read back, not
    /// even the file's last partial block.
    @Test func inOrderWritesAreHashedFromTheWindow() throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 12 << 20 | 1000, seed: 9)
        let path = try directory.write([UInt8](repeating: 0, count: data.count), named: "pre")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256, .md5], direct: true, memoryWindow: 2 << 20)
        let chunkSize = 256 << 10
        let chunks = (data.count + chunkSize - 1) / chunkSize
        PrefixHasherTests.writeChunks(data, path: path, chunkSize: chunkSize, order: Array(0..<chunks), hasher: hasher, offer: true, paced: true)
        let digests = try hasher.finish(length: Int64(data.count))
        let sha = Digester(.sha256), md5 = Digester(.md5)
        sha.update(data)
        md5.update(data)
        #expect(digests[.sha256] == sha.finalize())
        #expect(digests[.md5] == md5.finalize())
        #expect(hasher.bytesReadFromFile == 0)
    }

    /// Out-of-order writes spread wider than the window can span (3 MiB, what its read buffers
    /// need, for 256 KiB of memory): whatever misses the window is read back, whatever hits it is not,
    /// and the digest is right either way. A chunk more than 3 MiB beyond the first missing one always
    /// falls out, so the spread alone decides that some bytes are read back.
    @Test(arguments: [UInt64(1), 2, 3, 4])
    func shuffledWritesMixWindowAndReads(seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        let data = patternBytes(count: 8 << 20 | 4095, seed: seed)
        let path = try directory.write([UInt8](repeating: 0, count: data.count), named: "pre")
        let hasher = try PrefixHasher(path: path, algorithms: [.sha256], direct: true, memoryWindow: 256 << 10)
        let chunkSize = 65536 + 4096 * Int(seed)
        let chunks = (data.count + chunkSize - 1) / chunkSize
        // Shuffle within groups of 64 chunks (over 4 MiB): a spread like that of in-order runs on
        // many connections.
        var generator = SeededGenerator(seed: seed)
        var order: [Int] = []
        for group in stride(from: 0, to: chunks, by: 64) {
            order += Array(group..<min(group + 64, chunks)).shuffled(using: &generator)
        }
        PrefixHasherTests.writeChunks(data, path: path, chunkSize: chunkSize, order: order, hasher: hasher, offer: true)
        let expected = Digester(.sha256)
        expected.update(data)
        #expect(try hasher.finish(length: Int64(data.count))[.sha256] == expected.finalize())
        #expect(hasher.bytesReadFromFile > 0)
        #expect(hasher.bytesReadFromFile < Int64(data.count))
    }
}
