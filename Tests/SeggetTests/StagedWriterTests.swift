import Dispatch
import Foundation
import Synchronization
import SeggetJournal
import Testing

@testable import Segget

/// The write path of the engine: bytes staged per connection, written with `O_DIRECT` in aligned
/// blocks and through the page cache for partial blocks. Checked byte for byte against real files.
@Suite struct StagedWriterTests {
    static func temporaryFile(length: Int) throws -> (PosixFile, String) {
        let path = NSTemporaryDirectory() + "segget-staged-\(UUID().uuidString)"
        let file = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o600))
        try file.preallocate(length: Int64(length))
        return (file, path)
    }

    /// Several "connections" fill disjoint ranges (unaligned starts and ends included) in random
    /// piece sizes, flushing at random moments; the file must equal the source exactly.
    @Test(arguments: [(WritePath.direct, UInt64(1)), (.direct, 2), (.direct, 3), (.pageCache, 4), (.pageCache, 5), (.adaptive, 6), (.adaptive, 7)])
    func randomRangesAndPiecesLandExactly(writePath: WritePath, seed: UInt64) throws {
        var g = FuzzRandom(seed: seed)
        let length = 3 << 20 | Int.random(in: 0..<4096, using: &g)
        let source = (0..<length).map { _ in UInt8.random(in: 0...255, using: &g) }
        let (file, path) = try Self.temporaryFile(length: length)
        defer { file.close(); unlink(path) }
        let writer = StagedWriter(data: file, path: writePath, bufferSize: 64 << 10, maxInFlight: 4)
        #expect(writer.isDirect == (writePath != .pageCache))
        var flushedRuns: [(Int64, Int)] = []
        // A hasher that keeps every other run it is lent and gives them back only at the end: a kept
        // buffer must not be staged into again before then.
        var kept: [(bytes: UnsafeRawBufferPointer, copy: [UInt8], release: @Sendable () -> Void)] = []
        writer.lend = { bytes, offset, footprint, release in
            #expect(footprint == 64 << 10)
            flushedRuns.append((offset, bytes.count))
            guard flushedRuns.count % 2 == 0 else { return PrefixHasher.Lending(kept: false, fellOut: false) }
            kept.append((bytes, Array(bytes), release))
            return PrefixHasher.Lending(kept: true, fellOut: false)
        }

        // Cut the file at random (mostly unaligned) points into ranges, one staging buffer each.
        var cuts = Set([0, length])
        while cuts.count < 9 { cuts.insert(Int.random(in: 1..<length, using: &g)) }
        let bounds = cuts.sorted()
        let ranges = zip(bounds, bounds.dropFirst()).map { $0..<$1 }
        var buffers = ranges.map { _ in writer.makeStaging() }
        var positions = ranges.map(\.lowerBound)
        source.withUnsafeBytes { all in
            while positions.indices.contains(where: { positions[$0] < ranges[$0].upperBound }) {
                let i = Int.random(in: 0..<ranges.count, using: &g)
                guard positions[i] < ranges[i].upperBound else { continue }
                let n = min(ranges[i].upperBound - positions[i], Int.random(in: 1...20000, using: &g))
                _ = writer.append(buffers[i], all.baseAddress! + positions[i], count: n, at: Int64(positions[i]))
                positions[i] += n
                switch Int.random(in: 0..<10, using: &g) {
                case 0: writer.flush(buffers[i])
                case 1: _ = writer.flushWholeBlocks(buffers[i])
                default: break
                }
            }
        }
        for b in buffers { writer.flush(b) }
        buffers.removeAll()
        try writer.drain()
        #expect(try writer.completedTicket() == writer.submitted)
        let written = try file.read(count: length, at: 0)
        #expect(written == source)
        // Every byte was reported once, in runs that match the source.
        #expect(flushedRuns.map(\.1).reduce(0, +) == length)
        // What the hasher kept is unchanged, although the writer staged on after it.
        #expect(!kept.isEmpty)
        for k in kept { #expect(Array(k.bytes) == k.copy) }
        for k in kept { k.release() }
    }

    /// Bytes the hasher says fell out of its window go through the page cache on the adaptive path,
    /// where its read back finds them; with `--write-path direct` they stay direct.
    @Test func bytesThatFellOutOfTheHashWindowGoToThePageCache() throws {
        let (file, path) = try Self.temporaryFile(length: 4 << 20)
        defer { file.close(); unlink(path) }
        let bytes = [UInt8](repeating: 0x3C, count: 64 << 10)
        for (writePath, offset) in [(WritePath.adaptive, Int64(0)), (.direct, Int64(2 << 20))] {
            let writer = StagedWriter(data: file, path: writePath, bufferSize: 64 << 10, maxInFlight: 64)
            try #require(writer.isDirect, "the temporary directory refuses O_DIRECT")
            var lent = 0
            writer.lend = { _, offset, _, _ in
                lent += 1
                // Every other buffer falls out.
                return PrefixHasher.Lending(kept: false, fellOut: offset / Int64(64 << 10) % 2 == 1)
            }
            let s = writer.makeStaging()
            for i in 0..<16 {
                _ = bytes.withUnsafeBytes { writer.append(s, $0.baseAddress!, count: $0.count, at: offset + Int64(i) * Int64(bytes.count)) }
                try writer.drain()
            }
            #expect(lent == 16)
            if writePath == .adaptive {
                #expect(writer.bytesWritten == (direct: 512 << 10, pageCache: 512 << 10))
            } else {
                #expect(writer.bytesWritten == (direct: 1 << 20, pageCache: 0))
            }
        }
        #expect(try file.read(count: 1 << 20, at: 0) == [UInt8](repeating: 0x3C, count: 1 << 20))
    }

    /// A full buffer is handed to the writer as soon as it fills, and `append` says so; a partial one
    /// waits for `flush`. Tickets count hand-overs.
    @Test func fullBuffersAreHandedOverAtOnce() throws {
        let (file, path) = try Self.temporaryFile(length: 1 << 20)
        defer { file.close(); unlink(path) }
        let writer = StagedWriter(data: file, path: .direct, bufferSize: 64 << 10)
        let s = writer.makeStaging()
        let bytes = [UInt8](repeating: 0xAB, count: 100 << 10)
        let flushed = bytes.withUnsafeBytes { writer.append(s, $0.baseAddress!, count: $0.count, at: 0) }
        #expect(flushed)
        #expect(writer.submitted == 1)
        #expect(s.start == 64 << 10)
        #expect(s.end == 100 << 10)
        try writer.drain()
        #expect(try file.read(count: 64 << 10, at: 0) == Array(bytes.prefix(64 << 10)))
        #expect(try file.read(count: 1, at: 64 << 10) == [0])
        writer.flush(s)
        #expect(s.isEmpty)
        #expect(writer.submitted == 2)
        try writer.drain()
        #expect(try file.read(count: 100 << 10, at: 0) == bytes)
    }

    /// `flushWholeBlocks` writes the staged whole 4 KiB blocks at once and keeps the partial block at
    /// the end staged, so that appending continues seamlessly.
    @Test(arguments: [true, false])
    func wholeBlocksGoOutAndThePartialBlockStays(direct: Bool) throws {
        let (file, path) = try Self.temporaryFile(length: 1 << 20)
        defer { file.close(); unlink(path) }
        let writer = StagedWriter(data: file, path: direct ? .direct : .pageCache, bufferSize: 64 << 10)
        let s = writer.makeStaging()
        let bytes = (0..<(40 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        // Staged from 1000 to 1000 + 30000: blocks up to 28672 are whole, 28672..<31000 is partial.
        bytes.withUnsafeBytes { _ = writer.append(s, $0.baseAddress! + 1000, count: 30000, at: 1000) }
        #expect(writer.flushWholeBlocks(s))
        #expect(writer.submitted == 1)
        #expect(s.start == 28672 && s.end == 31000)
        try writer.drain()
        #expect(try file.read(count: 27672, at: 1000) == Array(bytes[1000..<28672]))
        #expect(try file.read(count: 2328, at: 28672) == [UInt8](repeating: 0, count: 2328))
        // Less than a whole block staged beyond a boundary: nothing to hand over.
        #expect(!writer.flushWholeBlocks(s))
        bytes.withUnsafeBytes { _ = writer.append(s, $0.baseAddress! + 31000, count: 9960, at: 31000) }
        #expect(writer.flushWholeBlocks(s))
        #expect(s.start == 40960 && s.end == 40960)
        try writer.drain()
        #expect(try file.read(count: 39960, at: 1000) == Array(bytes[1000..<40960]))
    }

    /// Adaptive: a writer that keeps up (each buffer written before the next arrives) writes every
    /// whole block with `O_DIRECT`; a burst that queues many buffers behind the first sends the queued
    /// ones through the page cache, so the sender does not wait for the device. Fixed paths never mix.
    @Test func adaptiveWritesDirectWhileTheDiskKeepsUpAndCachesABacklog() throws {
        let (file, path) = try Self.temporaryFile(length: 8 << 20)
        defer { file.close(); unlink(path) }
        let bytes = [UInt8](repeating: 0x5A, count: 64 << 10)
        func send(_ writer: StagedWriter, buffers: Int, from: Int64, drainingEach: Bool) throws {
            let s = writer.makeStaging()
            for i in 0..<buffers {
                _ = bytes.withUnsafeBytes { writer.append(s, $0.baseAddress!, count: $0.count, at: from + Int64(i) * Int64(bytes.count)) }
                if drainingEach { try writer.drain() }
            }
            writer.flush(s)
            try writer.drain()
        }
        let keepingUp = StagedWriter(data: file, path: .adaptive, bufferSize: 64 << 10, maxInFlight: 64)
        try #require(keepingUp.isDirect, "the temporary directory refuses O_DIRECT")
        try send(keepingUp, buffers: 16, from: 0, drainingEach: true)
        #expect(keepingUp.bytesWritten == (direct: 1 << 20, pageCache: 0))

        let burst = StagedWriter(data: file, path: .adaptive, bufferSize: 64 << 10, maxInFlight: 64)
        try send(burst, buffers: 48, from: 1 << 20, drainingEach: false)
        let split = burst.bytesWritten
        #expect(split.direct + split.pageCache == 3 << 20)
        #expect(split.direct >= 64 << 10, "the first buffer finds no backlog")
        #expect(split.pageCache > 0, "buffers queued behind a direct write go to the page cache")

        let alwaysDirect = StagedWriter(data: file, path: .direct, bufferSize: 64 << 10, maxInFlight: 64)
        try send(alwaysDirect, buffers: 48, from: 4 << 20, drainingEach: false)
        #expect(alwaysDirect.bytesWritten == (direct: 3 << 20, pageCache: 0))
        #expect(try file.read(count: 7 << 20, at: 0) == [UInt8](repeating: 0x5A, count: 7 << 20))
    }

    /// A write error (here: a descriptor opened read-only) surfaces from `completedTicket` and
    /// `drain`, and the writer does not hang.
    @Test func writeErrorsSurface() throws {
        let (file, path) = try Self.temporaryFile(length: 1 << 20)
        file.close()
        defer { unlink(path) }
        let readOnly = try PosixFile.open(path: path, mode: .readOnly)
        defer { readOnly.close() }
        let writer = StagedWriter(data: readOnly, path: .pageCache, bufferSize: 64 << 10, maxInFlight: 2)
        let s = writer.makeStaging()
        let bytes = [UInt8](repeating: 1, count: 300 << 10)
        _ = bytes.withUnsafeBytes { writer.append(s, $0.baseAddress!, count: $0.count, at: 0) }
        writer.flush(s)
        #expect(throws: Errno.self) { try writer.drain() }
        #expect(throws: Errno.self) { try writer.completedTicket() }
    }

    /// 1 MiB buffers up to 2 connections, then halving to stay within 2 MiB, never below 256 KiB.
    @Test func bufferSizesFollowTheConnectionCount() {
        #expect(StagedWriter.bufferSize(connections: 1) == 1 << 20)
        #expect(StagedWriter.bufferSize(connections: 2) == 1 << 20)
        #expect(StagedWriter.bufferSize(connections: 3) == 512 << 10)
        #expect(StagedWriter.bufferSize(connections: 4) == 512 << 10)
        #expect(StagedWriter.bufferSize(connections: 5) == 256 << 10)
        #expect(StagedWriter.bufferSize(connections: 8) == 256 << 10)
        #expect(StagedWriter.bufferSize(connections: 128) == 256 << 10)
        #expect(StagedWriter.maxInFlight(bufferSize: 1 << 20) == 4)
        #expect(StagedWriter.maxInFlight(bufferSize: 256 << 10) == 4)
    }

    /// With progress slots, at most a quarter of a chunk (never below 256 KiB), so that a slot moves
    /// inside a chunk even at 1 or 2 connections (issue 24).
    @Test func bufferSizesLeaveRoomForSlotsInsideAChunk() {
        #expect(StagedWriter.bufferSize(connections: 1, slotsInChunksOf: 1 << 20) == 256 << 10)
        #expect(StagedWriter.bufferSize(connections: 2, slotsInChunksOf: 1 << 20) == 256 << 10)
        #expect(StagedWriter.bufferSize(connections: 2, slotsInChunksOf: 2 << 20) == 512 << 10)
        #expect(StagedWriter.bufferSize(connections: 2, slotsInChunksOf: 64 << 20) == 1 << 20)
        #expect(StagedWriter.bufferSize(connections: 8, slotsInChunksOf: 64 << 20) == 256 << 10)
        #expect(StagedWriter.bufferSize(connections: 1, slotsInChunksOf: 64 << 10) == 256 << 10)
        #expect(StagedWriter.bufferSize(connections: 1, slotsInChunksOf: (3 << 20) + 5) % 4096 == 0)
    }

    /// A discarded buffer (a cancelled duplicate) writes nothing.
    @Test func discardWritesNothing() throws {
        let (file, path) = try Self.temporaryFile(length: 1 << 20)
        defer { file.close(); unlink(path) }
        let writer = StagedWriter(data: file, path: .direct)
        let s = writer.makeStaging()
        let bytes = [UInt8](repeating: 7, count: 10000)
        _ = bytes.withUnsafeBytes { writer.append(s, $0.baseAddress!, count: $0.count, at: 4096) }
        writer.discard(s)
        writer.flush(s)
        try writer.drain()
        #expect(writer.submitted == 0)
        #expect(try file.read(count: 20000, at: 0) == [UInt8](repeating: 0, count: 20000))
    }
}

/// Staging memory a dropped buffer leaves goes to the next buffer of the same size, up to the limit.
/// On a store of the test's own: the process's is shared with every download the tests run.
@Suite struct StagingMemoryTests {
    @Test func aDroppedBuffersMemoryIsReusedBySameSizeOnly() throws {
        let store = StagingMemory(limit: 1 << 20)
        let size = 37 * 4096
        var first: StagingBuffer? = StagingBuffer(capacity: size, store: store)
        let base = first!.base
        first = nil
        // Kept, for this size only, and taken once.
        #expect(store.take(capacity: 41 * 4096) == nil)
        let kept = try #require(store.take(capacity: size))
        #expect(kept.base == base)
        #expect(store.take(capacity: size) == nil)
        // A new buffer of the size stages into kept memory.
        store.keep(kept)
        let again = StagingBuffer(capacity: size, store: store)
        #expect(again.base == base)
        #expect(store.take(capacity: size) == nil)
    }

    @Test func memoryBeyondTheLimitIsFreed() {
        let store = StagingMemory(limit: 1 << 20)
        // Each is dropped at once: 768 KiB kept, then 512 KiB more would pass the 1 MiB limit.
        _ = StagingBuffer(capacity: 192 * 4096, store: store)
        _ = StagingBuffer(capacity: 128 * 4096, store: store)
        #expect(store.take(capacity: 128 * 4096) == nil)
        #expect(store.take(capacity: 192 * 4096) != nil)
    }
}

/// Where a file its probe brought whole is saved (`StagedWriter.saveWhole`): the first writer, until
/// it has a save waiting behind the one it runs and the second has fewer.
@Suite struct WholeSaveWriterTests {
    @Test(arguments: [
        ([0, 0], 0), ([1, 0], 0), ([1, 1], 0), ([0, 3], 0),
        ([2, 0], 1), ([2, 1], 1), ([5, 4], 1),
        ([2, 2], 0), ([2, 3], 0), ([3, 3], 0),
    ])
    func theFirstWriterUntilItHasASaveWaiting(queued: [Int], writer: Int) {
        #expect(StagedWriter.writerForWholeSave(queued: queued) == writer)
    }

    /// Saves given one after another while the first writer is held: the second takes the third
    /// (two are then queued on the first), and every save runs once the first goes on.
    @Test func aHeldFirstWriterSpillsToTheSecond() {
        let gate = DispatchSemaphore(value: 0)
        StagedWriter.sharedQueues[0].async { gate.wait() }
        let ran = Mutex<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        for k in 0..<3 {
            StagedWriter.saveWhole {
                ran.withLock { $0.append(k) }
                done.signal()
            }
        }
        // The first two wait on the held first writer; the third went to the second.
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(ran.withLock { $0 } == [2])
        gate.signal()
        for _ in 0..<2 { #expect(done.wait(timeout: .now() + 5) == .success) }
        #expect(ran.withLock { $0.sorted() } == [0, 1, 2])
    }
}
