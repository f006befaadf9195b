import Glibc
import Segget
import SeggetJournal
import SeggetTestServer
import SeggetVerify
import Synchronization
import Testing

/// Downloads into a stream (`-o -`, `Download.stream`, `Download.bytes()`) against the in-process test
/// server: in order under uneven servers, within the reorder window behind a slow reader, and every
/// way a stream can end early.
@Suite(.serialized) struct StreamTests {
    static let chunk: Int64 = 64 << 10
    static let window: Int64 = 4 << 20

    static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    static func options(_ n: Int) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = n
        o.chunkSize = chunk
        o.retryWait = 0.05
        o.retries = 3
        return o
    }

    /// Collects what the stream hands on, optionally no faster than `bytesPerSecond`.
    final class Collector: @unchecked Sendable {
        private let lock = Mutex<[UInt8]>([])
        let bytesPerSecond: Double?
        let failAfter: Int?
        private let started = StreamTests.now()
        init(bytesPerSecond: Double? = nil, failAfter: Int? = nil) {
            self.bytesPerSecond = bytesPerSecond
            self.failAfter = failAfter
        }
        var bytes: [UInt8] { lock.withLock { $0 } }
        /// When the last piece was taken.
        let lastTakeAt = Atomic<UInt64>(0)
        func take(_ piece: UnsafeRawBufferPointer) throws {
            let total = lock.withLock { got -> Int in
                got.append(contentsOf: piece)
                return got.count
            }
            lastTakeAt.store(StreamTests.now().bitPattern, ordering: .relaxed)
            if let failAfter, total >= failAfter { throw Errno.brokenPipe }
            if let rate = bytesPerSecond {
                let ahead = Double(total) / rate - (StreamTests.now() - started)
                if ahead > 0 { usleep(useconds_t(ahead * 1_000_000)) }
            }
        }
    }

    @Test(arguments: ["rate=8m", "rate=8m&slowevery=3&slowrate=256k", "slowfirst=2&slowrate=64k", "rate=4m&firstbyte=0.05"])
    func streamIsTheFileInOrderUnderUnevenServers(_ query: String) throws {
        let body = TestFiles.pattern(24 << 20, seed: 5)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let out = Collector()
        let r = try Download(url: server.url("f", query: query), options: Self.options(8))
            .stream(to: out.take, settings: StreamSettings(window: Self.window))
        #expect(r.bytes == Int64(body.count))
        #expect(TestFiles.byteDifference(out.bytes, body) == nil)
        #expect(r.peakWindowBytes <= Self.window)
        #expect(r.usedRanges)
    }

    /// A stream keeps `--max-speed` as a file does: at least its size over the cap. Its probe brings
    /// no bytes, and the budget started full for it: 8 MiB at 2 MiB/s came in 3.93 s, a tenth of a
    /// second's burst ahead of the cap (exploratory testing, 7 December: 2.78-2.81 s against 2.86 s).
    @Test(arguments: [4, 1])
    func aStreamKeepsTheSpeedCap(connections: Int) throws {
        let body = TestFiles.pattern(2 << 20, seed: 41)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let out = Collector()
        var o = Self.options(connections)
        o.maxSpeed = 1 << 20
        let started = Self.now()
        let r = try Download(url: server.url("f"), options: o).stream(to: out.take, settings: StreamSettings(window: Self.window))
        let seconds = Self.now() - started
        #expect(TestFiles.byteDifference(out.bytes, body) == nil)
        #expect(r.bytes == Int64(body.count))
        #expect(seconds >= 2.0, "2 MiB at a 1 MiB/s cap streamed in \(seconds) s")
    }

    /// The stream returns as soon as its last byte is handed on: it used to wait for the loop's idle
    /// second whenever the download ended on a visit of the loop rather than on a transfer's end
    /// (the writer's last hand-over came after it), `-o -` exiting a second after its last byte in
    /// about two runs of three.
    @Test func theStreamEndsWithItsLastByte() throws {
        let body = TestFiles.pattern(24 << 20, seed: 12)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        var gaps: [Double] = []
        var options = DownloadOptions()
        options.connections = 8
        for _ in 0..<4 {
            let out = Collector()
            let r = try Download(url: server.url("f", query: "rate=4m"), options: options)
                .stream(to: out.take, settings: StreamSettings())
            gaps.append(Self.now() - Double(bitPattern: out.lastTakeAt.load(ordering: .relaxed)))
            #expect(r.bytes == Int64(body.count))
        }
        #expect(gaps.max()! < 0.5, "seconds from the last byte to the end: \(gaps)")
    }

    /// A reader at 8 MiB/s behind 8 connections of 4 MiB/s each: the window is the bound, connections
    /// pause instead of being re-dialled, and no new TCP connection is opened for them.
    @Test func slowReaderPausesConnectionsWithinTheWindow() throws {
        let body = TestFiles.pattern(20 << 20, seed: 6)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let out = Collector(bytesPerSecond: 8 * 1_048_576)
        let log = EventLog()
        let r = try Download(url: server.url("f", query: "rate=4m"), options: Self.options(8))
            .stream(to: out.take, settings: StreamSettings(window: Self.window), events: { log.append($0) })
        #expect(TestFiles.byteDifference(out.bytes, body) == nil)
        #expect(r.peakWindowBytes <= Self.window)
        #expect(r.peakWindowBytes >= Self.window / 2, "the reader was slow; the window should have filled")
        #expect(log.redials == 0)
        #expect(server.connectionsAccepted <= 9, "\(server.connectionsAccepted) connections")
    }

    @Test func theLibraryGetsAnAsyncSequenceOfChunks() async throws {
        let body = TestFiles.pattern(12 << 20 + 12345, seed: 7)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        var o = Self.options(6)
        let sha = Digester(.sha256)
        sha.update(body)
        o.checksums = [ExpectedDigest(algorithm: .sha256, bytes: sha.finalize())!]
        var got: [UInt8] = []
        let chunks = Download(url: server.url("f", query: "rate=8m&slowevery=4&slowrate=128k"), options: o)
            .bytes(settings: StreamSettings(window: Self.window))
        let it = chunks.makeAsyncIterator()
        while let chunk = try await it.next() {
            #expect(chunk.count <= 1 << 20)
            got += chunk
        }
        #expect(TestFiles.byteDifference(got, body) == nil)
        #expect(it.result?.verified.count == 1)
    }

    @Test func checksumMismatchFailsAfterTheLastByte() throws {
        let body = TestFiles.pattern(6 << 20, seed: 8)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        var o = Self.options(4)
        o.checksums = [ExpectedDigest(algorithm: .sha256, bytes: [UInt8](repeating: 7, count: 32))!]
        let out = Collector()
        #expect {
            try Download(url: server.url("f"), options: o).stream(to: out.take, settings: StreamSettings(window: Self.window))
        } throws: { ($0 as? SeggetError)?.kind == .verification }
        #expect(out.bytes.count == body.count)
    }

    /// The server answers 404 from its fifth request on: the stream ends with the server's status,
    /// after the bytes it had, and says where to continue.
    @Test func serverFailureMidStreamSaysHowFarItGot() throws {
        let body = TestFiles.pattern(16 << 20, seed: 9)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let out = Collector()
        var error: SeggetError?
        do {
            _ = try Download(url: server.url("f", mode: .status, query: "code=404&from=5&rate=8m"), options: Self.options(4))
                .stream(to: out.take, settings: StreamSettings(window: Self.window))
        } catch let e { error = e }
        #expect(error?.kind == .httpStatus)
        #expect(error?.message.contains("--stream-from \(out.bytes.count)") == true, "\(String(describing: error))")
        #expect(out.bytes.count < body.count)
        #expect(TestFiles.byteDifference(out.bytes, Array(body.prefix(out.bytes.count))) == nil)
    }

    @Test func aReaderThatGoesAwayStopsTheDownload() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        server.addResource(name: "f", bytes: TestFiles.pattern(64 << 20, seed: 10))
        let out = Collector(failAfter: 1 << 20)
        let started = StreamTests.now()
        #expect {
            try Download(url: server.url("f", query: "rate=4m"), options: Self.options(8))
                .stream(to: out.take, settings: StreamSettings(window: Self.window))
        } throws: { ($0 as? SeggetError)?.kind == .fileSystem && ($0 as? SeggetError)?.message.contains("broken pipe") == true }
        #expect(StreamTests.now() - started < 5)
    }

    @Test(arguments: [Int64(1), 1_000_003, 5 << 20])
    func streamFromAnOffsetIsTheRestOfTheFile(_ from: Int64) throws {
        let body = TestFiles.pattern(6 << 20 + 99, seed: 11)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let out = Collector()
        let r = try Download(url: server.url("f"), options: Self.options(4))
            .stream(to: out.take, settings: StreamSettings(window: Self.window, from: from))
        #expect(r.bytes == Int64(body.count) - from)
        #expect(TestFiles.byteDifference(out.bytes, Array(body[Int(from)...])) == nil)
    }

    /// Ranges honoured for the probe, then a 200 with the whole file for every request from number
    /// `after` on: the stream goes on over one plain stream from byte 0, handing on only what it had
    /// not, and the reader gets the file once, whole (it ended with exit 7 before, even with nothing
    /// handed on yet).
    @Test(arguments: [2, 6])
    func rangesThatStopBeingHonouredGoOnAsOnePlainStream(after: Int) throws {
        let body = TestFiles.pattern(12 << 20 + 7, seed: 14)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let out = Collector()
        let notices = Mutex<[String]>([])
        let r = try Download(url: server.url("f", mode: .mid200, query: "after=\(after)&rate=16m"), options: Self.options(4))
            .stream(to: out.take, settings: StreamSettings(window: Self.window), events: { e in
                if case .notice(let n) = e { notices.withLock { $0.append(n) } }
            })
        #expect(TestFiles.byteDifference(out.bytes, body) == nil)
        #expect(r.bytes == Int64(body.count))
        #expect(!r.usedRanges)
        let said = notices.withLock { $0 }
        #expect(said.contains { $0.hasPrefix("the server stopped honouring byte ranges (the server ignored the byte range") && $0.contains("streaming over one connection from the start") }, "\(said)")
        // The probe, the ranged requests up to the first whole answer, and the plain stream.
        #expect(server.requests.filter { $0.status == 200 }.count <= 5, "\(server.requests)")
    }

    /// The probe's answer is the whole file, and the stream continues it: one request, every byte
    /// sent once (before: the probe cut it, and the stream asked again).
    @Test(arguments: [FaultMode.noranges, .chunked])
    func serverWithoutRangesStreamsOverOneConnection(_ mode: FaultMode) throws {
        let body = TestFiles.pattern(9 << 20 + 3, seed: 12)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let out = Collector(bytesPerSecond: 32 * 1_048_576)
        let r = try Download(url: server.url("f", mode: mode), options: Self.options(8))
            .stream(to: out.take, settings: StreamSettings(window: Self.window))
        #expect(!r.usedRanges)
        #expect(TestFiles.byteDifference(out.bytes, body) == nil)
        #expect(r.peakWindowBytes <= Self.window)
        #expect(server.requests.count == 1, "\(server.requests)")
        #expect(server.bodyBytesSent == Int64(body.count))
        #expect(r.receivedBytes == Int64(body.count))
    }

    /// That answer cut on the way: the stream starts over from byte 0 and hands on only what it had
    /// not, so the reader gets the file once, whole.
    @Test func aCutAnswerWithoutRangesStartsTheStreamOver() throws {
        let body = TestFiles.pattern(6 << 20 + 5, seed: 13)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let out = Collector()
        let r = try Download(url: server.url("f", mode: .drop, query: "noranges=1&after=3000000&times=1&rate=64m"), options: Self.options(1))
            .stream(to: out.take, settings: StreamSettings(window: Self.window))
        #expect(!r.usedRanges)
        #expect(TestFiles.byteDifference(out.bytes, body) == nil)
        #expect(server.requests.count == 2, "\(server.requests)")
        // The first answer, continued, was the one cut (before, the probe cut it first itself).
        #expect(server.requests.first?.bodyBytesSent == 3_000_000, "\(server.requests)")
    }
}
