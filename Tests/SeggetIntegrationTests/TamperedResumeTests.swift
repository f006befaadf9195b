import Segget
import SeggetJournal
import SeggetTestServer
import SeggetVerify
import Synchronization
import Testing

@testable import Segget

#if canImport(Glibc)
import Glibc
#endif

// Resume vouches for every byte it keeps. A download is stopped part-way, then what it left beside the
// file is changed the way a bad disk, a stray tool or a hostile hand could change it while keeping every
// format check happy: bitmaps that claim unfinished chunks, bytes altered or zeroed inside finished
// chunks, a data file cut short and grown back, a progress file that claims more than was written.
// The rerun must end with the served bytes exactly (fetching what it cannot vouch for again), never
// with a wrong file under the final name.

/// One served file and one download of it into a temporary directory.
private final class TamperFixture: @unchecked Sendable {
    let server: TestServer
    let dir: TempDir
    let bytes: [UInt8]
    let chunk: Int64
    let rate: String

    init(size: Int = 2 * 1024 * 1024 + 12_345, chunk: Int64 = 64 * 1024, rate: String = "512k", seed: UInt64 = 16) throws {
        bytes = TestFiles.pattern(size, seed: seed)
        self.chunk = chunk
        self.rate = rate
        server = try TestServer()
        server.addResource(name: "f.bin", bytes: bytes, etag: "\"v1\"")
        try server.start()
        dir = try TempDir(prefix: "segget-tamper")
    }

    deinit { server.stop() }

    var url: String { "\(server.baseURL)/f.bin?rate=\(rate)" }
    var output: String { dir.path("out.bin") }
    var part: String { output + ".segget-part" }
    var journal: String { output + ".segget-journal" }
    var progress: String { output + ".segget-progress" }
    var chunkCount: Int { Int((Int64(bytes.count) + chunk - 1) / chunk) }

    func options(checksum: ExpectedDigest? = nil) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = 4
        o.chunkSize = chunk
        o.outputPath = output
        o.retryWait = 0.05
        if let checksum { o.checksums = [checksum] }
        return o
    }

    func range(ofChunk k: Int) -> Range<Int> {
        Int(Int64(k) * chunk)..<min(bytes.count, Int(Int64(k + 1) * chunk))
    }

    /// Stops the download once `fraction` of it is done; returns the chunks its journal then claims.
    func interruptedRun(at fraction: Double = 0.4) async throws -> [Int] {
        let total = Int64(bytes.count)
        let outcome = try await interrupted(Download(url: url, options: options()), atCompleted: Int64(Double(total) * fraction))
        #expect(outcome?.kind == .interrupted, "\(String(describing: outcome))")
        #expect(TestFiles.size(part) == total)
        try await Task.sleep(for: .milliseconds(150))
        let (j, trusted) = try Journal.open(path: journal, currentBootID: Journal.currentBootID())
        j.close()
        return trusted.setIndices
    }

    /// Bytes of the partly written chunks the interrupted run recorded (see `LeftBehind`).
    func partlyWritten() throws -> Int64 {
        try LeftBehind.partlyWrittenBytes(journal: journal, progress: progress, total: Int64(bytes.count), chunkSize: chunk)
    }

    /// Runs the download again to the end; the output must be the served bytes.
    func completeRun(
        checksum: ExpectedDigest? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (result: DownloadResult, log: EventLog, sent: Int64) {
        server.resetCounters()
        let log = EventLog()
        let download = Download(url: url, options: options(checksum: checksum))
        let result = try await blocking { try download.run(events: { log.append($0) }) }
        let difference = TestFiles.fileDifference(output, bytes)
        #expect(difference == nil, "the final file differs: \(difference ?? "")", sourceLocation: sourceLocation)
        #expect(!TestFiles.exists(part) && !TestFiles.exists(journal), sourceLocation: sourceLocation)
        return (result, log, server.bodyBytesSent)
    }

    /// Edits the journal file in place with `body(bytes, header)`.
    func editJournal(_ body: (inout [UInt8], JournalHeader) -> Void) throws {
        let (j, _) = try Journal.open(path: journal, currentBootID: Journal.currentBootID())
        let header = j.header
        j.close()
        var image = try #require(TestFiles.read(journal))
        body(&image, header)
        try TestFiles.write(journal, image)
    }

    /// Overwrites bytes of the data file.
    func overwritePart(_ replacement: [UInt8], at offset: Int) throws {
        var image = try #require(TestFiles.read(part))
        image.replaceSubrange(offset..<(offset + replacement.count), with: replacement)
        try TestFiles.write(part, image)
    }
}

/// The data file as a disk that takes `delay` seconds for every read.
private final class SlowReads: BlockStorage, @unchecked Sendable {
    let file: PosixFile
    let delay: Double
    init(_ file: PosixFile, delay: Double) {
        self.file = file
        self.delay = delay
    }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        usleep(useconds_t(delay * 1_000_000))
        return try file.read(into: buffer, at: offset)
    }
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) { try file.write(bytes, at: offset) }
    func sync() throws(Errno) { try file.sync() }
    func size() throws(Errno) -> Int64 { try file.size() }
    func truncate(to length: Int64) throws(Errno) { try file.truncate(to: length) }
}

/// Sets every chunk's bit (and no padding bit) in the bitmap that starts at `offset`.
private func claimEveryChunk(_ image: inout [UInt8], bitmapAt offset: Int64, chunks: Int) {
    for k in 0..<chunks { image[Int(offset) + k / 8] |= UInt8(1 << (k % 8)) }
}

@Suite(.serialized) struct TamperedResumeTests {
    @Test func anHonestResumeKeepsEveryClaimedChunkAndRejectsNothing() async throws {
        let f = try TamperFixture()
        let claimed = try await f.interruptedRun()
        #expect(!claimed.isEmpty)
        let partly = try f.partlyWritten()
        let (result, log, sent) = try await f.completeRun()
        #expect(!log.notices.contains { $0.contains("did not match") }, "\(log.notices)")
        let kept = claimed.reduce(Int64(0)) { $0 + Int64(f.range(ofChunk: $1).count) }
        #expect(result.resumedBytes == kept + partly)
        #expect(sent <= Int64(f.bytes.count) - kept + 4 * f.chunk, "sent \(sent) with \(kept) kept")
    }

    @Test func everyRecordedChecksumIsTheChecksumOfTheServedBytes() async throws {
        // 2 MiB chunks: chunk 0 is finished by the connection that continues the probe's transfer
        // (held at its head for -n 4, or after its first bytes), from the probe's checksum. Stopped
        // at three quarters: the four connections started together, so their first chunks are done
        // (at half, each was three quarters into its chunk). Every claimed chunk's recorded
        // checksum must be the served bytes' own, and an undamaged resume must keep them all.
        let f = try TamperFixture(size: 12 << 20, chunk: 2 << 20, rate: "2m")
        let claimed = try await f.interruptedRun(at: 0.75)
        try #require(claimed.contains(0))
        let (j, _) = try Journal.open(path: f.journal, currentBootID: Journal.currentBootID())
        let recorded = j.chunkCRCs
        j.close()
        for k in claimed {
            #expect(recorded[k] == CRC32C.checksum(f.bytes[f.range(ofChunk: k)]), "chunk \(k)")
        }
        let partly = try f.partlyWritten()
        let (result, log, _) = try await f.completeRun()
        #expect(!log.notices.contains { $0.contains("did not match") }, "\(log.notices)")
        #expect(result.resumedBytes == claimed.reduce(partly) { $0 + Int64(f.range(ofChunk: $1).count) })
    }

    @Test func bitmapsThatClaimUnfinishedChunksAreCheckedNotTrusted() async throws {
        let f = try TamperFixture()
        let claimed = try await f.interruptedRun()
        #expect(claimed.count < f.chunkCount)
        try f.editJournal { image, header in
            claimEveryChunk(&image, bitmapAt: JournalCodec.writtenBitmapOffset(header: header), chunks: f.chunkCount)
            claimEveryChunk(&image, bitmapAt: JournalCodec.durableBitmapOffset(header: header), chunks: f.chunkCount)
        }
        let (_, log, sent) = try await f.completeRun()
        let unfinished = (0..<f.chunkCount).filter { !claimed.contains($0) }
        #expect(log.hasNotice(containing: "did not match their checksums"), "\(log.notices)")
        // Every chunk the first run had not finished came from the server again.
        let unfinishedBytes = unfinished.reduce(Int64(0)) { $0 + Int64(f.range(ofChunk: $1).count) }
        #expect(sent >= unfinishedBytes - 4 * f.chunk, "sent \(sent), unfinished \(unfinishedBytes)")
    }

    @Test func alteredOrZeroedBytesInFinishedChunksAreFetchedAgain() async throws {
        let f = try TamperFixture()
        let claimed = try await f.interruptedRun()
        try #require(claimed.count >= 3)
        let partly = try f.partlyWritten()
        // One flipped bit in one chunk, a whole other chunk zeroed, the last byte of a third changed.
        let a = f.range(ofChunk: claimed[0]), b = f.range(ofChunk: claimed[1]), c = f.range(ofChunk: claimed[2])
        try f.overwritePart([f.bytes[a.lowerBound + 1000] ^ 0x04], at: a.lowerBound + 1000)
        try f.overwritePart([UInt8](repeating: 0, count: b.count), at: b.lowerBound)
        try f.overwritePart([f.bytes[c.upperBound - 1] &+ 1], at: c.upperBound - 1)
        let (result, log, sent) = try await f.completeRun()
        #expect(log.hasNotice(containing: "3 of \(claimed.count) chunks kept from the last run did not match"), "\(log.notices)")
        // Only those three were fetched again, not everything that was kept.
        let kept = claimed.reduce(Int64(0)) { $0 + Int64(f.range(ofChunk: $1).count) }
        #expect(result.resumedBytes == kept - Int64(a.count + b.count + c.count) + partly)
        #expect(sent < Int64(f.bytes.count) - kept / 2, "sent \(sent) with \(kept) kept")
    }

    @Test func aPartFileCutShortAndGrownBackLosesNothingToZeros() async throws {
        let f = try TamperFixture()
        let claimed = try await f.interruptedRun(at: 0.6)
        try #require(claimed.contains { $0 >= f.chunkCount / 2 })
        try TestFiles.truncate(f.part, to: Int64(f.bytes.count / 2))
        try TestFiles.truncate(f.part, to: Int64(f.bytes.count))
        let (_, log, _) = try await f.completeRun()
        #expect(log.hasNotice(containing: "did not match their checksums"), "\(log.notices)")
    }

    @Test func aProgressFileThatClaimsMoreThanWasWrittenIsCaught() async throws {
        // Big chunks and a slow server, so that connections are inside a chunk when stopped.
        let f = try TamperFixture(size: 8 << 20, chunk: 1 << 20, rate: "1m")
        _ = try await f.interruptedRun(at: 0.35)
        var image = try #require(TestFiles.read(f.progress))
        var lies = 0
        for slot in 0..<ProgressSlots.slotCount {
            let base = ProgressSlots.headerLength + slot * ProgressSlots.slotLength
            var chunk: Int64 = 0
            for i in 0..<8 { chunk |= Int64(image[base + i]) << (8 * i) }
            guard chunk >= 0 && chunk < Int64(f.chunkCount) else { continue }
            // Claim all of the chunk but its last byte: most of that was never written.
            let upTo = (chunk + 1) * f.chunk - 1
            for i in 0..<8 { image[base + 8 + i] = UInt8(truncatingIfNeeded: upTo >> (8 * i)) }
            lies += 1
        }
        try #require(lies > 0, "no connection was inside a chunk")
        try TestFiles.write(f.progress, image)
        let (_, log, _) = try await f.completeRun()
        #expect(log.hasNotice(containing: "did not match the recorded checksum"), "\(log.notices)")
    }

    @Test func aTamperedChecksumOnlyCostsARefetch() async throws {
        let f = try TamperFixture()
        let claimed = try await f.interruptedRun()
        try #require(!claimed.isEmpty)
        let partly = try f.partlyWritten()
        try f.editJournal { image, header in
            image[Int(JournalCodec.checksumOffset(header: header, chunk: claimed[0]))] ^= 0x80
        }
        let (result, log, _) = try await f.completeRun()
        #expect(log.hasNotice(containing: "1 of \(claimed.count) chunks"), "\(log.notices)")
        let kept = claimed.reduce(Int64(0)) { $0 + Int64(f.range(ofChunk: $1).count) }
        #expect(result.resumedBytes == kept - Int64(f.range(ofChunk: claimed[0]).count) + partly)
    }

    @Test func theDigestCheckNeverSeesBytesThatWereNotVouchedFor() async throws {
        // With --checksum the file is hashed behind the download, in order. A kept chunk that turns out
        // damaged must be hashed only after it was fetched again, or the digest would fail.
        let f = try TamperFixture()
        let digester = Digester(.sha256)
        digester.update(f.bytes)
        let sha256 = try ExpectedDigest(parsing: "sha256=\(hexString(digester.finalize()))")
        let claimed = try await f.interruptedRun()
        try #require(!claimed.isEmpty)
        let first = f.range(ofChunk: claimed[0])
        try f.overwritePart([UInt8](repeating: 0xAA, count: 512), at: first.lowerBound)
        let (result, log, _) = try await f.completeRun(checksum: sha256)
        #expect(result.verified.count == 1)
        #expect(log.hasNotice(containing: "1 of \(claimed.count) chunks"), "\(log.notices)")
    }

    @Test func aJournalOfTheOldFormatStartsOverWithOneClearLine() async throws {
        let f = try TamperFixture()
        _ = try await f.interruptedRun()
        var image = try #require(TestFiles.read(f.journal))
        image[8] = 1
        image[9] = 0
        try TestFiles.write(f.journal, image)
        let (result, log, sent) = try await f.completeRun()
        #expect(log.notices.contains { $0.contains("unsupported version 1") && $0.hasSuffix("starting over.") }, "\(log.notices)")
        #expect(result.resumedBytes == 0)
        #expect(sent >= Int64(f.bytes.count))
    }

    @Test func keptChunksAreCheckedBehindTheDownloadNotBeforeIt() async throws {
        // Half of the file is kept from an "earlier run", one kept chunk of it damaged, and reading it
        // back is slow (0.2 s per chunk: 3.2 s for 16 chunks). The missing half must start arriving at
        // once (well before the check could end, with room for a loaded machine), the engine must not
        // finish before the last kept chunk was checked, and the damaged one must be fetched again.
        let f = try TamperFixture(size: 32 * 64 * 1024, rate: "1m")
        let plan = ChunkPlan(totalLength: Int64(f.bytes.count), chunkSize: f.chunk)
        var kept = [UInt8](repeating: 0, count: f.bytes.count)
        kept.replaceSubrange(0..<(16 * 65536), with: f.bytes[0..<(16 * 65536)])
        kept[3 * 65536 + 5] ^= 0xFF
        try TestFiles.write(f.part, kept)
        let file = try PosixFile.open(path: f.part, mode: .openExisting)
        defer { file.close() }
        var settings = FetchSettings()
        settings.connections = 4
        settings.checkpointInterval = 0
        let target = FetchTarget(url: f.url, totalLength: plan.totalLength, ranged: true, etag: "\"v1\"", lastModified: nil, ifRange: nil)
        let loop = DownloadLoop()
        let engine = FetchEngine(
            target: target, settings: settings, data: file, journal: nil, plan: plan, isFinished: { $0 < 16 },
            interrupt: InterruptFlag(), driver: loop.driver)
        let claims = (0..<16).map { k in
            ChunkVoucher.Claim(chunk: k, crc: CRC32C.checksum(f.bytes[f.range(ofChunk: k)]))
        }
        engine.vouch(with: ChunkVoucher(data: SlowReads(file, delay: 0.2), plan: plan, claims: claims))
        let firstBytes = Mutex<Double?>(nil)
        let started = nowSeconds()
        engine.onProgress = { p in
            if p.receivedBytes > 0 { firstBytes.withLock { $0 = $0 ?? nowSeconds() - started } }
        }
        if let error = loop.run([engine])[0] { throw error }
        let took = nowSeconds() - started
        let arrived = try #require(firstBytes.withLock { $0 })
        #expect(arrived < 2, "the first bytes came after \(arrived) s: the download waited for the check")
        #expect(took >= 3, "finished after \(took) s, before every kept chunk was checked")
        #expect(engine.rejectedChunks == 1)
        #expect(TestFiles.fileDifference(f.part, f.bytes) == nil)
    }
}
