import Segget
import SeggetTestServer
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

// Crash-safe resume, end to end: a real download from the in-process test server is stopped part-way
// (interrupt flag, SIGINT/SIGTERM to the CLI), the leftovers are damaged in every way a user or a crash
// can damage them, and the same download is run again. Whatever happened, the result is a byte-identical
// file (or a notice and a clean restart), never a crash and never a corrupt output.
//
// Each download is a few MiB in 64 KiB chunks over 4 connections throttled by the server, so that a
// whole download takes about a second and an interruption lands mid-way.

// MARK: - ResumeFixture

private enum ResumeGeometry {
    static let chunk: Int64 = 64 * 1024
    /// Not a multiple of the chunk size: the last chunk is short.
    static let size = 4 * 1024 * 1024 + 12_345
    static let connections = 4
    /// Per connection: 4 × 768 KiB/s ≈ 3 MiB/s, so a whole download takes ~1.4 s.
    static let rate = "768k"
    /// For the many damaged-state cases: 17 chunks (the last one short) in ~0.55 s.
    static let smallSize = 1024 * 1024 + 12_345
    static let smallRate = "512k"
}

/// One served file, one temporary directory, and the paths of one download into it.
private final class ResumeFixture: @unchecked Sendable {
    let server: TestServer
    let dir: TempDir
    let name = "file.bin"
    private(set) var bytes: [UInt8]

    let rate: String

    init(seed: UInt64 = 1, size: Int = ResumeGeometry.size, rate: String = ResumeGeometry.rate) throws {
        self.rate = rate
        bytes = TestFiles.pattern(size, seed: seed)
        server = try TestServer()
        server.addResource(name: name, bytes: bytes, etag: "\"v1\"")
        try server.start()
        dir = try TempDir(prefix: "segget-resume")
    }

    deinit { server.stop() }

    var url: String { "\(server.baseURL)/\(name)?rate=\(rate)" }
    var output: String { dir.path("out.bin") }
    var part: String { output + ".segget-part" }
    var journal: String { output + ".segget-journal" }

    func options(resume: Bool = true) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = ResumeGeometry.connections
        o.chunkSize = ResumeGeometry.chunk
        o.outputPath = output
        o.resume = resume
        o.retryWait = 0.05
        return o
    }

    /// Serves new bytes (and a new ETag) under the same name, as if the file changed on the server.
    func replace(with newBytes: [UInt8], etag: String) {
        bytes = newBytes
        server.replaceResource(name: name, bytes: newBytes, etag: etag, lastModified: nil)
    }

    /// Downloads until `fraction` of the file is done, then sets the interrupt flag from the progress
    /// callback. Expects `.interrupted`, the part file and the journal, and no final file.
    func interruptedRun(
        at fraction: Double = 0.4, url: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let flag = InterruptFlag()
        let total = Int64(bytes.count)
        let download = Download(url: url ?? self.url, options: options())
        let outcome = try await blocking { () -> Result<DownloadResult, SeggetError> in
            do {
                return .success(try download.run(
                    progress: { p in if p.completedBytes >= Int64(Double(total) * fraction) { flag.set() } },
                    interrupt: flag))
            } catch let e as SeggetError {
                return .failure(e)
            } catch {
                return .failure(SeggetError(.internalError, "\(error)"))
            }
        }
        switch outcome {
        case .success:
            Issue.record("the download finished although it was interrupted", sourceLocation: sourceLocation)
        case .failure(let error):
            #expect(error.kind == .interrupted, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains("run the same command to resume"), "\(error)", sourceLocation: sourceLocation)
        }
        #expect(!TestFiles.exists(output), "no final file after an interruption", sourceLocation: sourceLocation)
        #expect(TestFiles.size(part) == total, "the part file keeps its full length", sourceLocation: sourceLocation)
        #expect(TestFiles.exists(journal), "the journal is kept", sourceLocation: sourceLocation)
        // Let the server notice the closed connections before anyone counts its bytes.
        try await Task.sleep(for: .milliseconds(150))
    }

    /// Runs the download to the end (counting the server's bytes for this run only) and checks that the
    /// output equals the served bytes and that no temporary file is left.
    @discardableResult
    func completeRun(
        resume: Bool = true, url: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (result: DownloadResult, log: EventLog, sent: Int64) {
        server.resetCounters()
        let log = EventLog()
        let download = Download(url: url ?? self.url, options: options(resume: resume))
        let result = try await blocking { try download.run(events: { log.append($0) }) }
        let sent = server.bodyBytesSent
        #expect(result.path == output, sourceLocation: sourceLocation)
        #expect(result.bytes == Int64(bytes.count), sourceLocation: sourceLocation)
        let difference = TestFiles.fileDifference(output, bytes)
        #expect(difference == nil, "\(difference ?? "")", sourceLocation: sourceLocation)
        #expect(!TestFiles.exists(part), "the part file is gone after success", sourceLocation: sourceLocation)
        #expect(!TestFiles.exists(journal), "the journal is gone after success", sourceLocation: sourceLocation)
        return (result, log, sent)
    }

    /// The CLI arguments for this download.
    func cliArguments(_ extra: [String] = []) -> [String] {
        extra + ["-n", "\(ResumeGeometry.connections)", "--chunk-size", "64k", "--retry-wait", "0.05", url, "-o", output]
    }
}

/// Ways to damage what an interrupted download leaves behind, and the notice each must produce.
enum ResumeDamage: CustomTestStringConvertible, Sendable {
    case dataDeleted
    case dataTruncated
    case dataExtended
    case journalDeleted
    case journalEmpty
    /// Cut the journal to this fraction of its length (inside the header, the boot record, the bitmaps).
    case journalTruncated(Double)
    case journalOneByteShort
    case journalTrailingBytes
    /// Flip one bit at this offset from the start (inside the CRC-protected header).
    case headerBitFlipped(Int)
    /// Flip the last bit of the header CRC itself.
    case headerCRCFlipped
    case paddingBitSet
    case foreignVersion
    case randomGarbage
    case magicThenGarbage

    var testDescription: String {
        switch self {
        case .journalTruncated(let f): "journalTruncated(\(f))"
        case .headerBitFlipped(let o): "headerBitFlipped(@\(o))"
        default: "\(self)"
        }
    }

    /// A phrase the restart notice must contain.
    var expectedNotice: String {
        switch self {
        case .dataDeleted: "is missing"
        case .dataTruncated, .dataExtended: "bytes instead of"
        case .journalDeleted: "without its journal"
        case .foreignVersion: "unsupported version"
        case .randomGarbage: "not a journal"
        default: "is damaged"
        }
    }

    func apply(part: String, journal: String, size: Int) throws {
        var j = TestFiles.read(journal) ?? []
        let headerLength = j.count >= 16 ? Int(j[12]) | Int(j[13]) << 8 | Int(j[14]) << 16 | Int(j[15]) << 24 : 0
        switch self {
        case .dataDeleted:
            unlink(part)
            return
        case .dataTruncated:
            try TestFiles.truncate(part, to: Int64(size / 2))
            return
        case .dataExtended:
            try TestFiles.truncate(part, to: Int64(size + 1))
            return
        case .journalDeleted:
            unlink(journal)
            return
        case .journalEmpty:
            j = []
        case .journalTruncated(let f):
            j = Array(j.prefix(Int(Double(j.count) * f)))
        case .journalOneByteShort:
            j.removeLast()
        case .journalTrailingBytes:
            j += [0, 0, 0, 0]
        case .headerBitFlipped(let offset):
            precondition(offset < headerLength - 4)
            j[offset] ^= 0x10
        case .headerCRCFlipped:
            j[headerLength - 1] ^= 0x01
        case .paddingBitSet:
            // 17 or 65 chunks: the written bitmap's last byte uses one bit; set the highest padding bit.
            let chunks = (size + Int(ResumeGeometry.chunk) - 1) / Int(ResumeGeometry.chunk)
            precondition(chunks % 8 != 0)
            let lastWrittenByte = headerLength + 64 + (chunks + 7) / 8 - 1
            j[lastWrittenByte] |= 0x80
        case .foreignVersion:
            j[8] = 99  // a future format
            j[9] = 0
        case .randomGarbage:
            var g = SystemRandomNumberGenerator()
            j = (0..<j.count).map { _ in UInt8.random(in: 0...255, using: &g) }
            if j.starts(with: Array("SGGT".utf8)) { j[0] = 0 }
        case .magicThenGarbage:
            var g = SystemRandomNumberGenerator()
            j = Array("SGGTJRNL".utf8) + [2, 0] + (10..<j.count).map { _ in UInt8.random(in: 0...255, using: &g) }
        }
        try TestFiles.write(journal, j)
        chmod(journal, 0o600)
    }

    static let all: [ResumeDamage] = [
        .dataDeleted, .dataTruncated, .dataExtended, .journalDeleted, .journalEmpty,
        .journalTruncated(0.02), .journalTruncated(0.1), .journalTruncated(0.3), .journalTruncated(0.6),
        .journalTruncated(0.85), .journalTruncated(0.95), .journalOneByteShort, .journalTrailingBytes,
        .headerBitFlipped(0), .headerBitFlipped(10), .headerBitFlipped(13), .headerBitFlipped(17), .headerBitFlipped(26),
        .headerBitFlipped(35), .headerBitFlipped(44), .headerBitFlipped(52), .headerBitFlipped(70),
        .headerCRCFlipped, .paddingBitSet, .foreignVersion, .randomGarbage, .magicThenGarbage,
    ]
}

// MARK: - Tests

@Suite("ResumeTests: crash-safe resume")
struct ResumeTests {
    // MARK: Library level

    @Test("interrupted at ~40%: journal 0600, rerun completes identical and fetches only what is missing")
    func interruptThenResume() async throws {
        let f = try ResumeFixture(seed: 11)
        try await f.interruptedRun(at: 0.4)
        #expect(TestFiles.mode(f.journal) == 0o600)

        let (result, log, sent) = try await f.completeRun()
        let total = Int64(ResumeGeometry.size)
        #expect(result.resumedBytes > 0, "the rerun resumed")
        #expect(result.resumedBytes < total)
        #expect(log.hasNotice(containing: "resuming"), "notices: \(log.notices)")
        let remaining = total - result.resumedBytes
        let bound = remaining + Int64(ResumeGeometry.connections) * ResumeGeometry.chunk
        #expect(sent <= bound, "the server sent \(sent) bytes for \(remaining) missing (bound \(bound)); requests: \(f.server.requests.map(\.description)); events: \(log.all)")
        // Progress slots let each connection continue inside its last chunk: less than a chunk each.
        #expect(sent >= remaining - Int64(ResumeGeometry.connections) * ResumeGeometry.chunk)
    }

    @Test("a server that caps every answer (honest shorter 206s): interrupted, resumed, identical")
    func cappedAnswersResume() async throws {
        let f = try ResumeFixture()
        // 100 KiB answers end inside the 64 KiB chunks: the interruption leaves partial chunks.
        let url = "\(f.server.baseURL)/capped/\(f.name)?rate=\(f.rate)&max=100k"
        try await f.interruptedRun(at: 0.4, url: url)
        let (_, log, sent) = try await f.completeRun(url: url)
        #expect(log.retries == 0)
        #expect(sent < Int64(ResumeGeometry.size))
    }

    @Test("interrupted twice, then finished: still identical")
    func interruptTwice() async throws {
        let f = try ResumeFixture(seed: 12)
        try await f.interruptedRun(at: 0.25)
        try await f.interruptedRun(at: 0.6)
        let (result, _, sent) = try await f.completeRun()
        #expect(result.resumedBytes >= Int64(Double(ResumeGeometry.size) * 0.6) - Int64(ResumeGeometry.connections) * ResumeGeometry.chunk)
        #expect(sent <= Int64(ResumeGeometry.size) - result.resumedBytes + Int64(ResumeGeometry.connections) * ResumeGeometry.chunk, "requests: \(f.server.requests.map(\.description))")
    }

    @Test("the file changed on the server between runs: notice, restart, the new bytes", arguments: [false, true])
    func resourceReplaced(sizeChanges: Bool) async throws {
        let f = try ResumeFixture(seed: 21)
        try await f.interruptedRun(at: 0.4)
        let newBytes = TestFiles.pattern(ResumeGeometry.size + (sizeChanges ? 1000 : 0), seed: 22)
        f.replace(with: newBytes, etag: "\"v2\"")

        let (result, log, _) = try await f.completeRun()
        #expect(result.resumedBytes == 0)
        #expect(log.hasNotice(containing: "changed"), "notices: \(log.notices)")
        #expect(TestFiles.fileDifference(f.output, newBytes) == nil)
    }

    @Test("damaged leftovers: notice, clean restart, identical output", arguments: ResumeDamage.all)
    func damagedState(_ damage: ResumeDamage) async throws {
        let f = try ResumeFixture(seed: 31, size: ResumeGeometry.smallSize, rate: ResumeGeometry.smallRate)
        try await f.interruptedRun(at: 0.4)
        try damage.apply(part: f.part, journal: f.journal, size: ResumeGeometry.smallSize)

        let (result, log, sent) = try await f.completeRun()
        #expect(result.resumedBytes == 0, "nothing from a damaged state is trusted")
        #expect(log.hasNotice(containing: damage.expectedNotice), "notices: \(log.notices)")
        #expect(log.hasNotice(containing: "starting over"), "notices: \(log.notices)")
        #expect(sent >= Int64(ResumeGeometry.smallSize))
    }

    @Test("a damaged boot record reads as a reboot: only the durable bitmap is trusted, output identical")
    func bootRecordDamaged() async throws {
        let f = try ResumeFixture(seed: 32)
        try await f.interruptedRun(at: 0.5)
        var j = try #require(TestFiles.read(f.journal))
        let h = Int(j[12]) | Int(j[13]) << 8 | Int(j[14]) << 16 | Int(j[15]) << 24
        j[h + 3] ^= 0x01  // inside the boot ID: its CRC no longer matches
        try TestFiles.write(f.journal, j)

        let (result, log, _) = try await f.completeRun()
        // The interrupted run checkpointed on its way out, so the durable bitmap has everything written.
        #expect(result.resumedBytes > 0, "notices: \(log.notices)")
        #expect(!log.hasNotice(containing: "damaged"))
    }

    @Test("a stale boot ID (as after a reboot) with an empty durable bitmap trusts nothing")
    func rebootWithoutCheckpoint() async throws {
        let f = try ResumeFixture(seed: 33)
        try await f.interruptedRun(at: 0.5)
        var j = try #require(TestFiles.read(f.journal))
        let h = Int(j[12]) | Int(j[13]) << 8 | Int(j[14]) << 16 | Int(j[15]) << 24
        let b = (j.count - h - 64) / 2
        // Clear the durable bitmap and damage the boot record: a power cut before any checkpoint.
        for i in 0..<b { j[h + 64 + b + i] = 0 }
        j[h + 3] ^= 0x01
        try TestFiles.write(f.journal, j)
        // And let the data "not reach the disk": zeros where the written bitmap claims data.
        try TestFiles.write(f.part, [UInt8](repeating: 0, count: ResumeGeometry.size))

        let (result, _, sent) = try await f.completeRun()
        #expect(result.resumedBytes == 0)
        #expect(sent >= Int64(ResumeGeometry.size))
    }

    @Test("resume = false starts over even with a valid journal")
    func noResume() async throws {
        let f = try ResumeFixture(seed: 41)
        try await f.interruptedRun(at: 0.4)
        let (result, _, sent) = try await f.completeRun(resume: false)
        #expect(result.resumedBytes == 0)
        #expect(sent >= Int64(ResumeGeometry.size))
    }

    @Test("the journal never holds the password of a user:password@ URL, and resuming with it works")
    func noPasswordInJournal() async throws {
        let f = try ResumeFixture(seed: 51)
        #expect(f.url.hasPrefix("http://"))
        let url = "http://user:s3cr3t-pw@" + f.url.dropFirst("http://".count)
        try await f.interruptedRun(at: 0.4, url: url)
        let j = try #require(TestFiles.read(f.journal))
        #expect(!TestFiles.contains(j, Array("s3cr3t-pw".utf8)), "the password is in the journal")
        #expect(!TestFiles.contains(j, Array("user:".utf8)), "the user name with a colon is in the journal")
        #expect(TestFiles.contains(j, Array("127.0.0.1".utf8)), "the (redacted) URL is in the journal")

        let (result, _, _) = try await f.completeRun(url: url)
        #expect(result.resumedBytes > 0, "the same credentialed URL resumes")
    }

    // MARK: CLI level

    @Test("SIGTERM/SIGINT/SIGHUP mid-download: exit 130, how to resume on stderr, rerun identical", arguments: [SIGTERM, SIGINT, SIGHUP])
    func signalThenResume(signal sig: Int32) async throws {
        let f = try ResumeFixture(seed: 61)
        let p = try SpawnedProcess(executable: try SpawnedProcess.seggetPath(), arguments: f.cliArguments())
        let server = f.server
        // Wait and signal on one thread of its own, so that a busy test pool cannot delay the signal
        // until the download has finished.
        let (started, runningAtSignal, stderrSoFar) = try await blocking { () -> (Bool, Bool, String) in
            let started = waitUntil(timeout: 30) {
                server.bodyBytesSent >= Int64(Double(ResumeGeometry.size) * 0.4) || !p.isRunning
            }
            let running = p.isRunning
            p.signal(sig)
            return (started, running, p.stderrSoFar)
        }
        #expect(started, "the download did not get going")
        #expect(runningAtSignal, "segget ended before the signal: \(stderrSoFar)")
        let o = try await blocking { p.wait(timeout: 30) }
        #expect(!o.timedOut)
        #expect(o.exitCode == 130, "exit \(o.exitCode), stderr: \(o.stderr)")
        #expect(o.stderr.contains("run the same command to resume"), "stderr: \(o.stderr)")
        #expect(!TestFiles.exists(f.output))
        #expect(TestFiles.exists(f.part) && TestFiles.exists(f.journal))
        try await Task.sleep(for: .milliseconds(150))

        f.server.resetCounters()
        let r = try await runSeggetAsync(args: f.cliArguments())
        #expect(r.exitCode == 0, "stderr: \(r.stderr)")
        #expect(TestFiles.fileDifference(f.output, f.bytes) == nil)
        #expect(r.stderr.contains("resuming"), "stderr: \(r.stderr)")
        #expect(f.server.bodyBytesSent < Int64(ResumeGeometry.size), "the rerun fetched everything again")
        #expect(!TestFiles.exists(f.part) && !TestFiles.exists(f.journal))
    }

    /// A signal segget was started to ignore stays ignored (a script's background job has SIGINT
    /// ignored; `trap '' INT`): the download goes on through it, and one not ignored still stops it.
    @Test func aSignalStartedIgnoredStaysIgnored() async throws {
        let f = try ResumeFixture(seed: 64)
        let p = try SpawnedProcess(
            executable: "/bin/sh", arguments: ["-c", "trap '' INT; exec \"$0\" \"$@\"", try SpawnedProcess.seggetPath()] + f.cliArguments())
        let server = f.server
        let (started, runningAfterInterrupt) = try await blocking { () -> (Bool, Bool) in
            let started = waitUntil(timeout: 30) {
                server.bodyBytesSent >= Int64(Double(ResumeGeometry.size) * 0.3) || !p.isRunning
            }
            p.signal(SIGINT)
            usleep(300_000)
            let running = p.isRunning
            p.signal(SIGTERM)
            return (started, running)
        }
        #expect(started, "the download did not get going")
        #expect(runningAfterInterrupt, "an ignored SIGINT stopped segget")
        let o = try await blocking { p.wait(timeout: 30) }
        #expect(o.exitCode == 130, "exit \(o.exitCode), stderr: \(o.stderr)")
        // SIGTERM was the first signal it took: a caught SIGINT would have made it the second.
        #expect(!o.stderr.contains("stopped at once"), "stderr: \(o.stderr)")
        #expect(TestFiles.exists(f.part) && TestFiles.exists(f.journal))
    }

    @Test("a second signal stops at once: exit 130, and the rerun still resumes to an identical file")
    func secondSignalStopsAtOnce() async throws {
        let f = try ResumeFixture(seed: 63)
        let p = try SpawnedProcess(executable: try SpawnedProcess.seggetPath(), arguments: f.cliArguments())
        let server = f.server
        let (started, runningAtSignal) = try await blocking { () -> (Bool, Bool) in
            let started = waitUntil(timeout: 30) {
                server.bodyBytesSent >= Int64(Double(ResumeGeometry.size) * 0.4) || !p.isRunning
            }
            let running = p.isRunning
            // Two kinds, so that the second is not merged into the first while it is pending.
            p.signal(SIGINT)
            p.signal(SIGTERM)
            return (started, running)
        }
        #expect(started, "the download did not get going")
        #expect(runningAtSignal, "segget ended before the signals")
        let o = try await blocking { p.wait(timeout: 30) }
        #expect(!o.timedOut)
        #expect(o.exitCode == 130, "exit \(o.exitCode), stderr: \(o.stderr)")
        #expect(o.stderr.contains("stopped at once; run the same command to resume."), "stderr: \(o.stderr)")
        #expect(!TestFiles.exists(f.output))
        try await Task.sleep(for: .milliseconds(150))

        let r = try await runSeggetAsync(args: f.cliArguments())
        #expect(r.exitCode == 0, "stderr: \(r.stderr)")
        #expect(TestFiles.fileDifference(f.output, f.bytes) == nil)
    }

    @Test("--no-continue starts over")
    func cliNoContinue() async throws {
        let f = try ResumeFixture(seed: 71)
        try await f.interruptedRun(at: 0.4)
        f.server.resetCounters()
        let r = try await runSeggetAsync(args: f.cliArguments(["-q", "--no-continue"]))
        #expect(r.exitCode == 0, "stderr: \(r.stderr)")
        #expect(TestFiles.fileDifference(f.output, f.bytes) == nil)
        #expect(f.server.bodyBytesSent >= Int64(ResumeGeometry.size))
        #expect(!TestFiles.exists(f.part) && !TestFiles.exists(f.journal))
    }

    @Test("CLI: a damaged journal gives a notice on stderr and a clean restart")
    func cliDamagedJournal() async throws {
        let f = try ResumeFixture(seed: 72)
        try await f.interruptedRun(at: 0.4)
        try ResumeDamage.headerBitFlipped(20).apply(part: f.part, journal: f.journal, size: ResumeGeometry.size)
        let r = try await runSeggetAsync(args: f.cliArguments())
        #expect(r.exitCode == 0, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("is damaged"), "stderr: \(r.stderr)")
        #expect(TestFiles.fileDifference(f.output, f.bytes) == nil)
    }
}
