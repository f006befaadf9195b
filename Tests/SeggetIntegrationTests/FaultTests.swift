import Glibc
import Segget
import SeggetTestServer
import Testing

/// One test per server fault (and per hostile local condition): the download either ends with a
/// byte-identical file, or fails with the documented error kind / exit code and leaves NO file
/// under the final name. See docs/faults.md for the table these tests back.
@Suite(.serialized) struct FaultTests {
    static let chunk: Int64 = 64 * 1024

    static func options(_ n: Int, dir: TempDir, name: String = "out.bin") -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = n
        o.chunkSize = chunk
        o.outputPath = dir.path(name)
        o.retryWait = 0.05
        o.retries = 3
        o.checkpointInterval = 0.5
        o.syncBeforeRename = false
        return o
    }

    /// A started test server holding `f` (or `name`) with `body`.
    static func server(_ body: [UInt8], name: String = "f") throws -> TestServer {
        let s = try TestServer()
        s.addResource(name: name, bytes: body)
        try s.start()
        return s
    }

    /// The final name must hold nothing at all, or exactly `expected`.
    static func finalIsAbsent(_ dir: TempDir, _ name: String = "out.bin") -> Bool {
        !TestFiles.exists(dir.path(name))
    }

    // MARK: HTTP status faults

    /// 503 / 429 / 500 for the first N requests (with Retry-After): the download recovers.
    @Test(arguments: [503, 429, 500])
    func transientStatusRecovers(_ code: Int) async throws {
        let body = TestFiles.pattern(Int(6 * Self.chunk + 3), seed: 11)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        let outcome = await faultDownload(server.url("f", mode: .status, query: "code=\(code)&times=2&retryafter=0"), Self.options(4, dir: dir), trace: trace)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(trace.retries >= 2, "two failed answers mean two retries")
        #expect(server.requests.filter { $0.status == code }.count == 2)
    }

    /// A refusal's wait, as `Retry-After` or only as the `RateLimit` field's reset, is kept by the
    /// probe's retries and the fetch's alike (the probe took only `Retry-After`).
    @Test(arguments: [503, 429], ["retryafter=1", "ratelimit=1&reset=1"])
    func theWaitARefusalAsksForIsKept(_ code: Int, _ wait: String) async throws {
        let body = TestFiles.pattern(Int(4 * Self.chunk), seed: 12)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let started = nowSeconds()
        let outcome = await faultDownload(server.url("f", mode: .status, query: "code=\(code)&times=2&\(wait)"), Self.options(4, dir: dir))
        let elapsed = nowSeconds() - started
        #expect(outcome.error == nil)
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(elapsed >= 1.9, "a wait of 1 s (\(wait)) twice, but the download took only \(elapsed) s")
    }

    /// A status that never goes away: HTTP status error (exit 4) after the retries, nothing written.
    @Test func persistentServerErrorFailsCleanly() async throws {
        let server = try Self.server(TestFiles.pattern(1000, seed: 13))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(4, dir: dir)
        o.retries = 2
        let outcome = await faultDownload(server.url("f", mode: .status, query: "code=503&retryafter=0"), o)
        #expect(outcome.error?.kind == .httpStatus)
        #expect(outcome.error?.httpStatus == 503)
        #expect(outcome.error?.exitCode == 4)
        #expect(server.requests.count == 3, "one probe and two retries: \(server.requests)")
        #expect(Self.finalIsAbsent(dir))
        #expect(!TestFiles.exists(dir.path("out.bin.segget-part")))
    }

    // MARK: Connection faults

    /// The connection drops mid-body for the first 3 requests: every range resumes at the exact
    /// byte it reached, so the server sends the file (almost) exactly once.
    @Test func droppedConnectionsResumeByteExactly() async throws {
        let size = 2 * 1024 * 1024
        let body = TestFiles.pattern(size, seed: 14)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(4, dir: dir)
        o.endGame = false  // no racing duplicates: every byte sent beyond one copy is a resume bug
        o.redialSlowConnections = false
        let trace = FaultTrace()
        let outcome = await faultDownload(server.url("f", mode: .drop, query: "after=100000&times=3"), o, trace: trace)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        // The probe (request 1, `bytes=0-`, continued as connection 0's range) and requests 2 and 3 are
        // cut at 100000.
        #expect(trace.retries >= 2)
        // Byte-exact resume: each cut range is asked again from exactly the byte it reached.
        let requests = server.requests
        let dropped = requests.filter { $0.status == 206 && $0.bodyBytesSent == 100_000 }
        #expect(dropped.count == 3, "\(requests)")
        for d in dropped {
            let start = try #require(rangeStart(d.headers["range"]))
            #expect(requests.contains { rangeStart($0.headers["range"]) == start + 100_000 },
                    "no retry from byte \(start + 100_000): \(requests.map { $0.headers["range"] ?? "-" })")
        }
        // The server sends a little more than one copy: bytes already in flight on a connection
        // whose range was shortened by work stealing are discarded by the client.
        let sent = server.bodyBytesSent
        // (How much depends on socket buffers and timing; the bound only rules out re-fetching
        // the cut ranges from their start.)
        #expect(sent >= Int64(size) && sent <= Int64(size) + Int64(size) / 4, "server sent \(sent) bytes for a \(size)-byte file")
    }

    /// Every answer is cut 300,000 bytes in, within the probe's first chunk (1 MiB): what the probe
    /// brought is kept and the download goes on from it, every cut range from the byte it reached.
    /// Before, the probe was asked again from byte 0, cut again, until its retries ran out (exit 3).
    @Test func aFirstAnswerCutWithinItsFirstChunkIsContinued() async throws {
        let size = 3 * 1024 * 1024 + 5
        let body = TestFiles.pattern(size, seed: 16)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.chunkSize = 1 << 20
        o.retries = 5
        o.endGame = false
        o.redialSlowConnections = false
        let outcome = await faultDownload(server.url("f", mode: .drop, query: "after=300000"), o)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        let fromZero = server.requests.filter { rangeStart($0.headers["range"]) == 0 }
        #expect(fromZero.count == 1, "byte 0 asked again: \(server.requests.map { $0.headers["range"] ?? "-" })")
        #expect(server.requests.contains { rangeStart($0.headers["range"]) == 300_000 })
        let sent = server.bodyBytesSent
        #expect(sent >= Int64(size) && sent <= Int64(size) + Int64(size) / 4, "server sent \(sent) bytes for a \(size)-byte file")
    }

    /// A server that closes every answer after 500,000 bytes: each cut range is continued at once
    /// from the byte it reached (no backoff: it brought bytes), and a racer cut in the end game
    /// does not race again at once. Before: waits of 1-3 s after every cut (32 MiB took 11 s), and
    /// racers asked for the same chunk again and again (840 requests, 416 MB sent for 32 MiB).
    @Test func answersCutAfterProgressAreContinuedAtOnce() async throws {
        let size = 8 * 1024 * 1024 + 5
        let body = TestFiles.pattern(size, seed: 17)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(8, dir: dir)
        o.chunkSize = 1 << 20
        o.retries = 2
        let trace = FaultTrace()
        let outcome = await faultDownload(server.url("f", mode: .drop, query: "after=500000"), o, trace: trace)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(trace.retries > 0 && trace.retryDelays.allSatisfy { $0 == 0 }, "\(trace.retryDelays)")
        // At least one request per 500,000 bytes; races may add a few.
        let fewest = (size + 499_999) / 500_000
        #expect(server.requests.count <= fewest * 3 / 2 + 8, "\(server.requests.count) requests")
        let sent = server.bodyBytesSent
        #expect(sent <= Int64(size) + Int64(size) / 2, "server sent \(sent) bytes for a \(size)-byte file")
    }

    /// Every request drops before its first body byte: a network error (exit 3), no final file.
    @Test func alwaysDroppedIsANetworkError() async throws {
        let server = try Self.server(TestFiles.pattern(Int(4 * Self.chunk), seed: 15))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.retries = 2
        let outcome = await faultDownload(server.url("f", mode: .drop, query: "after=0"), o)
        #expect(outcome.error?.kind == .network, "\(String(describing: outcome.error))")
        #expect(outcome.error?.exitCode == 3)
        #expect(Self.finalIsAbsent(dir))
    }

    /// A connection that goes silent after 300000 bytes is dropped by the stall timeout and the
    /// range is retried from the byte it reached.
    @Test func stalledConnectionIsRetried() async throws {
        let size = 600_000
        let body = TestFiles.pattern(size, seed: 16)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(1, dir: dir)
        o.transfer.stallTimeout = 1
        o.endGame = false
        // The stall timeout is the backstop: the slow rule, which would re-dial the silent connection
        // sooner (see `aSilentConnectionIsRedialledBeforeTheStallTimeout`), is off here.
        o.redialSlowConnections = false
        let trace = FaultTrace()
        let started = nowSeconds()
        let outcome = await faultDownload(server.url("f", mode: .stall, query: "after=300000"), o, trace: trace)
        let elapsed = nowSeconds() - started
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(trace.retries >= 1)
        #expect(elapsed >= 1.0 && elapsed < 30, "took \(elapsed) s")
        // Byte-exact: the retry asked for exactly what was missing.
        #expect(server.bodyBytesSent <= Int64(size) + 1)
    }

    /// `--stall-timeout 1`: the silent connection is abandoned about one second after its last byte.
    @Test
    func stallIsDetectedWithinTheTimeout() async throws {
        let body = TestFiles.pattern(600_000, seed: 17)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(1, dir: dir)
        o.transfer.stallTimeout = 1
        o.redialSlowConnections = false
        let trace = FaultTrace()
        let outcome = await faultDownload(server.url("f", mode: .stall, query: "after=300000"), o, trace: trace)
        #expect(outcome.error == nil)
        let first = try #require(trace.firstRetryAt)
        #expect(first - trace.startedAt < 3.0, "the stall was noticed after \(first - trace.startedAt) s")
    }

    /// With the slow rule on (the default), one connection that goes silent after a good start is
    /// re-dialled from the byte it reached well before a 20 s stall timeout: its own earlier rate is the
    /// typical one (issue 23).
    @Test func aSilentConnectionIsRedialledBeforeTheStallTimeout() async throws {
        let size = 3 * Int(Self.chunk)
        let body = TestFiles.pattern(size, seed: 19)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(1, dir: dir)
        o.transfer.stallTimeout = 20
        let started = nowSeconds()
        let outcome = await faultDownload(server.url("f", mode: .stall, query: "after=1500000"), o, trace: FaultTrace())
        let elapsed = nowSeconds() - started
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(elapsed < 10, "took \(elapsed) s")
    }

    /// A connection that stalls on every request: network error (exit 3), the journal is kept.
    @Test func alwaysStallingIsANetworkErrorAndKeepsTheJournal() async throws {
        let server = try Self.server(TestFiles.pattern(Int(4 * Self.chunk), seed: 18))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(1, dir: dir)
        o.transfer.stallTimeout = 1
        o.retries = 1
        // No body byte at all: libcurl's speed average is 0 from the start, so it fires quickly.
        let outcome = await faultDownload(server.url("f", mode: .stall, query: "after=0"), o)
        #expect(outcome.error?.kind == .network, "\(String(describing: outcome.error))")
        #expect(Self.finalIsAbsent(dir))
    }

    /// The server disappears mid-download and comes back on the same port: the ranges retry and
    /// the download completes.
    @Test
    func serverRestartMidDownloadIsSurvived() async throws {
        let size = 2 * 1024 * 1024
        let body = TestFiles.pattern(size, seed: 19)
        let first = try Self.server(body)
        let port = first.port
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.retryWait = 0.3
        o.retries = 6
        let url = first.url("f", query: "rate=512k")
        let task = Task { await faultDownload(url, o) }
        #expect(waitUntil(timeout: 10) { first.bodyBytesSent > 200_000 })
        first.stop()
        usleep(200_000)
        let second = try TestServer(port: port)
        second.addResource(name: "f", bytes: body)
        try second.start()
        defer { second.stop() }
        let outcome = await task.value
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
    }

    /// The server disappears for good: a network error (exit 3) with the journal kept for a rerun.
    @Test
    func serverGoneIsANetworkError() async throws {
        let body = TestFiles.pattern(2 * 1024 * 1024, seed: 20)
        let server = try Self.server(body)
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.retries = 2
        let url = server.url("f", query: "rate=512k")
        let task = Task { await faultDownload(url, o) }
        #expect(waitUntil(timeout: 10) { server.bodyBytesSent > 200_000 })
        server.stop()
        let outcome = await task.value
        #expect(outcome.error?.kind == .network, "\(String(describing: outcome.error))")
        #expect(Self.finalIsAbsent(dir))
        #expect(TestFiles.exists(dir.path("out.bin.segget-journal")))
    }

    // MARK: Malformed ranges

    /// `short`: the body is one byte shorter than declared, then the connection closes. Even the
    /// probe's one-byte answer is empty, so nothing can be trusted: network error (exit 3).
    @Test func shortBodiesAreANetworkError() async throws {
        let server = try Self.server(TestFiles.pattern(Int(4 * Self.chunk), seed: 21))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(4, dir: dir)
        o.retries = 2
        let outcome = await faultDownload(server.url("f", mode: .short), o)
        #expect(outcome.error?.kind == .network, "\(String(describing: outcome.error))")
        #expect(outcome.error?.exitCode == 3)
        #expect(Self.finalIsAbsent(dir))
    }

    /// `short` by many bytes: each range keeps what arrived, and every retry again ends short, so
    /// the download fails (exit 3) without a final file.
    @Test func shortRangesNeverProduceAFile() async throws {
        let server = try Self.server(TestFiles.pattern(Int(8 * Self.chunk), seed: 22))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(4, dir: dir)
        o.retries = 2
        let outcome = await faultDownload(server.url("f", mode: .short, query: "missing=1000"), o)
        #expect(outcome.error != nil)
        #expect(outcome.error?.kind == .network, "\(String(describing: outcome.error))")
        #expect(Self.finalIsAbsent(dir))
    }

    /// `long`: a Content-Length one byte longer than the range asked: refused as a protocol error
    /// (exit 7) at once, since it contradicts the Content-Range; never a file under the final name.
    @Test func longRangesAreAProtocolError() async throws {
        let server = try Self.server(TestFiles.pattern(Int(8 * Self.chunk), seed: 23))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(4, dir: dir)
        o.retries = 2
        let outcome = await faultDownload(server.url("f", mode: .long), o)
        #expect(outcome.error?.kind == .protocolViolation, "\(String(describing: outcome.error))")
        #expect(outcome.error?.exitCode == 7)
        #expect(outcome.error?.message.contains("declared") == true, "\(outcome.error?.message ?? "")")
        #expect(Self.finalIsAbsent(dir))
    }

    /// `wrongrange`: a 206 for other bytes than asked. The probe already sees `bytes 1-1/N` for
    /// `bytes=0-0`, so segget never trusts ranges there and fetches one plain stream.
    @Test(arguments: [1, -1, 4096])
    func wrongRangesFallBackToOneStream(_ shift: Int) async throws {
        let body = TestFiles.pattern(Int(6 * Self.chunk + 9), seed: 24)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        let outcome = await faultDownload(server.url("f", mode: .wrongrange, query: "shift=\(shift)"), Self.options(4, dir: dir), trace: trace)
        if let error = outcome.error {
            // Acceptable too: refused as inconsistent, with nothing under the final name.
            #expect(error.kind == .protocolViolation, "\(error)")
            #expect(Self.finalIsAbsent(dir))
        } else {
            #expect(outcome.result?.usedRanges == false)
            #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        }
    }

    /// `wrongrange` from the 6th request on: in the middle of a download, every 206 carries a
    /// `Content-Range` (and bytes) moved by one. One unusable answer from each connection in a row,
    /// none accepted between, ends the download (exit 7), the journal kept, rather than each range's
    /// five retries and their backoff: 40 requests and 18 s at -n 8 before.
    @Test func rangesThatShiftInTheMiddleEndTheDownloadAfterOneRound() async throws {
        let body = TestFiles.pattern(Int(64 * Self.chunk), seed: 29)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(8, dir: dir)
        o.chunkSize = Self.chunk
        let outcome = await faultDownload(server.url("f", mode: .wrongrange, query: "from=6&rate=4m"), o)
        #expect(outcome.error?.kind == .protocolViolation, "\(String(describing: outcome.error))")
        #expect(outcome.error?.exitCode == 7)
        #expect(outcome.error?.message.contains("answers in a row were unusable") == true, "\(outcome.error?.message ?? "")")
        #expect(Self.finalIsAbsent(dir))
        #expect(TestFiles.exists(dir.path("out.bin.segget-journal")))
        // The probe and the four good answers, then at most a round of eight and the retries that
        // went out while it came in; each range's retries would make 40 and more.
        #expect(server.requests.count <= 5 + 16, "\(server.requests)")
    }

    /// A server that answers every range with at most `max` bytes and an honest `Content-Range`
    /// (RFC 9110 allows less than asked): every answer is written and the rest asked for, with no
    /// retry and no fallback to one stream. 100 KiB is not a multiple of the 64 KiB chunk, so answers
    /// end inside chunks; 1 MiB caps answers at 16 chunks of a 4 MiB run.
    @Test(arguments: [100 * 1024, 1 << 20])
    func cappedAnswersAreUsedAndTheRestAskedFor(_ cap: Int) async throws {
        let size = 8 * 1024 * 1024 + 9
        let body = TestFiles.pattern(size, seed: 40)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        let outcome = await faultDownload(server.url("f", mode: .capped, query: "max=\(cap)"), Self.options(8, dir: dir), trace: trace)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(outcome.result?.usedRanges == true)
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(trace.retries == 0, "\(trace.notices)")
        // Not absurdly many requests: each answer is a full `cap` except the last of each run, so
        // about size/cap plus a few per connection for the runs that work stealing and races cut.
        let ranged = server.requests.filter { $0.status == 206 }
        let least = (size + cap - 1) / cap
        #expect(ranged.count >= least && ranged.count <= least + 4 * 8, "\(ranged.count) requests for \(least) answers")
    }

    /// Ranges honoured only at offset 0 (`zeroonly`) or only for the first request (`mid200`): the
    /// engine notices the 200 and starts over as one stream; the file is identical.
    @Test(arguments: ["zeroonly", "mid200"])
    func partialRangeSupportFallsBackToOneStream(_ mode: String) async throws {
        let body = TestFiles.pattern(Int(10 * Self.chunk + 5), seed: 25)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        // Paced, so that the first answer does not bring the whole file before the others ask.
        let outcome = await faultDownload(server.baseURL + "/\(mode)/f?rate=1m", Self.options(4, dir: dir), trace: trace)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(outcome.result?.usedRanges == false)
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(trace.notices.contains { $0.contains("one connection") }, "\(trace.notices)")
        #expect(!TestFiles.exists(dir.path("out.bin.segget-part")))
        #expect(!TestFiles.exists(dir.path("out.bin.segget-journal")))
    }

    /// `encoding`: 206 answers carry `Content-Encoding: gzip`, so byte offsets are meaningless. The
    /// probe sees it and segget fetches one plain (unencoded) stream instead; never a mixed file.
    @Test func contentEncodingOnRangesFallsBackToOneStream() async throws {
        let body = TestFiles.pattern(Int(5 * Self.chunk), seed: 26)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        let outcome = await faultDownload(server.url("f", mode: .encoding), Self.options(4, dir: dir), trace: trace)
        if let error = outcome.error {
            #expect(error.kind == .protocolViolation)
            #expect(Self.finalIsAbsent(dir))
        } else {
            #expect(outcome.result?.usedRanges == false)
            #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
            #expect(trace.notices.contains { $0.contains("Content-Encoding") }, "\(trace.notices)")
        }
        // No ranged answer with a content coding was used: the probe's was the only range asked for.
        #expect(server.requests.filter { $0.status == 206 }.count == 1, "\(server.requests)")
    }

    /// `always416`: every range is "not satisfiable", but a plain GET works: one stream, as curl and
    /// aria2c do, with a notice; the result is identical and no range was ever written.
    @Test func alwaysUnsatisfiableFallsBackToOneStream() async throws {
        let body = TestFiles.pattern(Int(3 * Self.chunk), seed: 27)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let outcome = await faultDownload(server.url("f", mode: .always416), Self.options(4, dir: dir))
        #expect(outcome.error == nil, "\(String(describing: outcome.error))")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(!server.requests.contains { $0.status == 206 })
    }

    /// One 416 in the middle of a download whose `Content-Range: bytes */N` gives the length already
    /// known: a glitch of that request, retried; nothing fetched is thrown away (it was taken for a
    /// changed file and the download started over).
    @Test func oneUnsatisfiableAnswerOfTheSameLengthIsRetried() async throws {
        let size = Int(16 * Self.chunk)
        let body = TestFiles.pattern(size, seed: 26)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        var o = Self.options(2, dir: dir)
        o.chunkSize = Self.chunk
        let outcome = await faultDownload(
            server.url("f", mode: .always416, query: "from=2&times=1&rate=2m"), o, trace: trace)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(server.requests.contains { $0.status == 416 }, "\(server.requests)")
        #expect(!trace.notices.contains { $0.contains("changed") }, "\(trace.notices)")
        let sent = server.requests.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
        #expect(sent <= Int64(size) + 2 * Self.chunk, "\(server.requests)")
    }

    // MARK: A file that changes on the server

    /// After the probe every request sees a second version (new ETag): the engine restarts from
    /// zero and the result is exactly the second version, never a mix.
    @Test(arguments: [0, -1000, 70_000])
    func changedFileRestartsFromZero(_ lengthDelta: Int) async throws {
        let size = Int(8 * Self.chunk)
        let body = TestFiles.pattern(size, seed: 28)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let newLength = size + lengthDelta
        // Paced, so that the first answer does not bring the whole file before the others ask.
        let query = (lengthDelta == 0 ? "after=1" : "after=1&newlength=\(newLength)") + "&rate=1m"
        let trace = FaultTrace()
        let outcome = await faultDownload(server.url("f", mode: .changing, query: query), Self.options(4, dir: dir), trace: trace)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), secondVersion(of: body, length: newLength)) == nil)
        #expect(trace.notices.contains { $0.contains("changed") }, "\(trace.notices)")
    }

    // MARK: Redirect policy

    /// An http URL redirecting to https is followed (an upgrade is fine): the https endpoint here
    /// refuses connections, so the outcome is a network error and nothing is written.
    @Test func redirectToHTTPSIsFollowed() async throws {
        let server = try Self.server([1, 2, 3])
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.retries = 0
        let outcome = await faultDownload(server.url("f", mode: .redirect, query: "to=https://127.0.0.1:1/f"), o)
        #expect(outcome.error?.kind == .network, "\(String(describing: outcome.error))")
        #expect(outcome.error?.message.contains("https://127.0.0.1:1/f") == true)
        #expect(Self.finalIsAbsent(dir))
    }

    /// An https URL redirecting to plain http is refused (exit 7) unless --allow-insecure-redirect.
    /// The https side is a tiny Python TLS server with a throw-away self-signed certificate (-k).
    @Test(.enabled(if: TLSRedirector.isAvailable, "needs python3 with ssl and openssl"))
    func httpsToHTTPDowngradeIsRefused() async throws {
        let body = TestFiles.pattern(100_000, seed: 29)
        let server = try Self.server(body)
        defer { server.stop() }
        let redirector = try TLSRedirector(location: server.url("f"))
        defer { redirector.stop() }
        let dir = try TempDir()
        let out = dir.path("out.bin")

        let refused = try await runSeggetAsync(args: ["-q", "-k", "--retry-wait", "0.05", "-o", out, redirector.url], timeout: 60)
        #expect(refused.exitCode == 7, "stderr: \(refused.stderr)")
        #expect(refused.stderr.contains("https to plain http"), "\(refused.stderr)")
        #expect(!TestFiles.exists(out))
        #expect(!server.requests.contains { $0.path == "/f" }, "nothing may be fetched over plain http")

        let allowed = try await runSeggetAsync(args: ["-q", "-k", "--allow-insecure-redirect", "-o", out, redirector.url], timeout: 60)
        #expect(allowed.exitCode == 0, "stderr: \(allowed.stderr)")
        #expect(TestFiles.fileDifference(out, body) == nil)
    }

    /// Credentials (`-u`, an Authorization header, cookies) reach the host they were given for and
    /// never the host a redirect moves to, in the probe and in the ranged fetch alike.
    @Test func credentialsAreNotForwardedAcrossHosts() async throws {
        let body = TestFiles.pattern(Int(4 * Self.chunk), seed: 30)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(3, dir: dir)
        o.transfer.headers = ["Authorization: Bearer s3cret-token", "Cookie: session=s3cret"]
        // Paced, so that the first answer does not bring the whole file before the ranges go out.
        let target = "http://localhost:\(server.port)/f%3Frate%3D256k"
        let outcome = await faultDownload(server.url("f", mode: .redirect, query: "to=\(target)"), o)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        let requests = server.requests
        let first = try #require(requests.first)
        #expect(first.headers["host"] == "127.0.0.1:\(server.port)")
        #expect(first.headers["authorization"] == "Bearer s3cret-token")
        #expect(first.headers["cookie"] == "session=s3cret")
        let moved = requests.filter { $0.headers["host"] == "localhost:\(server.port)" }
        #expect(moved.count >= 2, "the probe and at least one range: \(requests)")
        for r in moved {
            #expect(r.headers["authorization"] == nil, "credentials leaked to localhost: \(r)")
            #expect(r.headers["cookie"] == nil, "cookie leaked to localhost: \(r)")
        }
    }

    /// `-u user:password` on the same host is kept across a same-host redirect (Basic, at once),
    /// and dropped on a cross-host one.
    @Test func userPasswordFollowsOnlyTheSameHost() async throws {
        let body = TestFiles.pattern(Int(3 * Self.chunk), seed: 31)
        let server = try Self.server(body)
        defer { server.stop() }
        for (crossHost, expectKept) in [(false, true), (true, false)] {
            server.resetCounters()
            let dir = try TempDir()
            var o = Self.options(2, dir: dir)
            o.transfer.credentials = "alice:pw"
            let host = crossHost ? "localhost" : "127.0.0.1"
            let outcome = await faultDownload(server.url("f", mode: .redirect, query: "to=http://\(host):\(server.port)/f"), o)
            #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
            let after = server.requests.dropFirst()
            #expect(!after.isEmpty)
            for r in after {
                #expect((r.headers["authorization"] != nil) == expectKept, "cross-host \(crossHost): \(r) \(r.headers)")
            }
        }
    }

    // MARK: Local file-system faults

    @Test func outputPathIsADirectory() async throws {
        let server = try Self.server([1, 2, 3])
        defer { server.stop() }
        let dir = try TempDir()
        mkdir(dir.path("sub"), 0o755)
        let r = try await runSeggetAsync(args: ["-q", "-o", dir.path("sub"), server.url("f")])
        #expect(r.exitCode == 5, "\(r.stderr)")
        #expect(r.stderr.contains("is a directory"), "\(r.stderr)")
        #expect(!TestFiles.exists(dir.path("sub.segget-part")))
    }

    @Test func missingParentDirectory() async throws {
        let server = try Self.server([1, 2, 3])
        defer { server.stop() }
        let dir = try TempDir()
        let r = try await runSeggetAsync(args: ["-q", "-o", dir.path("nope/out.bin"), server.url("f")])
        #expect(r.exitCode == 5, "\(r.stderr)")
        #expect(r.stderr.contains("does not exist"), "\(r.stderr)")
        #expect(!TestFiles.exists(dir.path("nope")))
    }

    /// A read-only directory (mode 0555). Root ignores permission bits, so the test cannot mean
    /// anything there and is skipped.
    @Test(.enabled(if: !FaultTests.permissionsAreIgnored, "running as root (or with CAP_DAC_OVERRIDE): a 0555 directory stays writable, so there is nothing to test"))
    func readOnlyDirectory() async throws {
        let server = try Self.server(TestFiles.pattern(5000, seed: 32))
        defer { server.stop() }
        let dir = try TempDir()
        let ro = dir.path("ro")
        mkdir(ro, 0o555)
        defer { chmod(ro, 0o755) }
        let r = try await runSeggetAsync(args: ["-q", "-o", ro + "/out.bin", server.url("f")])
        #expect(r.exitCode == 5, "\(r.stderr)")
        #expect(r.stderr.contains("permission denied"), "\(r.stderr)")
        #expect(!TestFiles.exists(ro + "/out.bin"))
    }

    /// True when this process can create files in a 0555 directory (root).
    static let permissionsAreIgnored: Bool = {
        guard let dir = try? TempDir(prefix: "segget-perm") else { return true }
        let ro = dir.path("ro")
        mkdir(ro, 0o555)
        defer { chmod(ro, 0o755) }
        let fd = open(ro + "/probe", O_WRONLY | O_CREAT | O_EXCL, 0o644)
        if fd >= 0 { close(fd); return true }
        return false
    }()

    /// A symbolic link planted at `OUT.segget-part` (no journal): it is not followed; the victim
    /// keeps its contents and the download lands as a regular file.
    @Test func plantedPartSymlinkIsNotFollowed() async throws {
        let body = TestFiles.pattern(Int(3 * Self.chunk), seed: 33)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let victim = dir.path("victim.txt")
        let precious = Array("do not overwrite me\n".utf8)
        try TestFiles.write(victim, precious)
        symlink(victim, dir.path("out.bin.segget-part"))
        let outcome = await faultDownload(server.url("f"), Self.options(3, dir: dir))
        #expect(TestFiles.read(victim) == precious, "the link target was written through")
        if let error = outcome.error {
            #expect(error.kind == .fileSystem, "\(error)")
            #expect(Self.finalIsAbsent(dir))
        } else {
            #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
            #expect(!isSymlink(dir.path("out.bin")))
        }
    }

    /// The nastier case: a real journal from an interrupted run, and the partial data file swapped
    /// for a link to a victim of the same size. Resuming must not write through the link.
    @Test func plantedPartSymlinkWithAJournalIsNotFollowed() async throws {
        let size = 1024 * 1024
        let body = TestFiles.pattern(size, seed: 34)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let out = dir.path("out.bin")
        let url = server.url("f", query: "rate=256k")
        let first = try await runSeggetAsync(args: ["-q", "-n", "2", "--chunk-size", "64k", "--timeout", "1", "-o", out, url], timeout: 30)
        #expect(first.exitCode == 3, "\(first.stderr)")
        try #require(TestFiles.exists(out + ".segget-journal"))
        let victim = dir.path("victim.bin")
        let precious = TestFiles.pattern(size, seed: 35)
        try TestFiles.write(victim, precious)
        unlink(out + ".segget-part")
        symlink(victim, out + ".segget-part")
        let second = try await runSeggetAsync(args: ["-q", "-n", "2", "--chunk-size", "64k", "-o", out, url], timeout: 60)
        #expect(TestFiles.read(victim) == precious, "the link target was written through")
        if second.exitCode == 0 {
            #expect(TestFiles.fileDifference(out, body) == nil)
            #expect(!isSymlink(out))
        } else {
            #expect(second.exitCode == 5, "\(second.stderr)")
            #expect(!TestFiles.exists(out))
        }
    }

    // MARK: Overall timeout

    /// `--timeout 1` on a throttled download: network error (exit 3), journal and data kept; the
    /// same command without the timeout resumes and fetches only what was missing.
    @Test func overallTimeoutKeepsTheJournalAndResumes() async throws {
        let size = 2 * 1024 * 1024
        let body = TestFiles.pattern(size, seed: 36)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let out = dir.path("out.bin")
        let url = server.url("f", query: "rate=256k")
        let started = nowSeconds()
        let first = try await runSeggetAsync(args: ["-q", "-n", "4", "--chunk-size", "64k", "--timeout", "1", "-o", out, url], timeout: 30)
        let elapsed = nowSeconds() - started
        #expect(first.exitCode == 3, "\(first.stderr)")
        #expect(first.stderr.contains("--timeout"), "\(first.stderr)")
        #expect(elapsed < 10, "--timeout 1 took \(elapsed) s")
        #expect(!TestFiles.exists(out))
        #expect(TestFiles.exists(out + ".segget-journal"))
        #expect(TestFiles.exists(out + ".segget-part"))
        let sentFirst = server.bodyBytesSent
        server.resetCounters()

        // The same command (same URL: the journal is bound to it) minus the timeout.
        let second = try await runSeggetAsync(args: ["-n", "4", "--chunk-size", "64k", "-o", out, url], timeout: 60)
        #expect(second.exitCode == 0, "\(second.stderr)")
        #expect(TestFiles.fileDifference(out, body) == nil)
        #expect(second.stderr.contains("resuming") || second.stdout.contains("resuming"), "\(second.stderr)")
        // Only the missing part (plus partial chunks in flight at the timeout) is fetched again.
        // (Generous: bytes the server had sent into socket buffers when the timeout struck were
        // counted by the server but never received.)
        #expect(server.bodyBytesSent < Int64(size))
        #expect(server.bodyBytesSent <= Int64(size) - sentFirst + 4 * Self.chunk + 512 * 1024,
                "first run got \(sentFirst), second fetched \(server.bodyBytesSent) of \(size)")
        #expect(!TestFiles.exists(out + ".segget-journal"))
    }
}

// MARK: - Helpers (file-private names, so they never clash with other test files)

/// How a library download ended.
struct FaultOutcome: Sendable {
    var result: DownloadResult?
    var error: SeggetError?
}

/// Runs a library download on its own thread (see `blocking`).
func faultDownload(_ url: String, _ options: DownloadOptions, trace: FaultTrace? = nil) async -> FaultOutcome {
    let t = trace ?? FaultTrace()
    let outcome = try? await blocking { () -> FaultOutcome in
        let sink: @Sendable (DownloadEvent) -> Void = { t.record($0) }
        let result = Result { () throws(SeggetError) -> DownloadResult in
            try Download(url: url, options: options).run(events: sink)
        }
        switch result {
        case .success(let r): return FaultOutcome(result: r, error: nil)
        case .failure(let e): return FaultOutcome(result: nil, error: e)
        }
    }
    return outcome ?? FaultOutcome(result: nil, error: SeggetError(.internalError, "could not start a thread"))
}

/// Events of one download, with the time of the first retry.
final class FaultTrace: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var events: [DownloadEvent] = []
    private var firstRetry: Double?
    let startedAt = nowSeconds()

    init() { pthread_mutex_init(&mutex, nil) }
    deinit { pthread_mutex_destroy(&mutex) }

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }

    func record(_ e: DownloadEvent) {
        locked {
            events.append(e)
            if case .retry = e, firstRetry == nil { firstRetry = nowSeconds() }
        }
    }

    var notices: [String] { locked { events.compactMap { if case .notice(let t) = $0 { t } else { nil } } } }
    var retries: Int { locked { events.filter { if case .retry = $0 { true } else { false } }.count } }
    /// The wait each retry announced, in order.
    var retryDelays: [Double] { locked { events.compactMap { if case .retry(_, _, let d, _) = $0 { d } else { nil } } } }
    var firstRetryAt: Double? { locked { firstRetry } }
}

/// The `changing` mode's second version: the base's bytes inverted, then `(offset * 31 + 7) & 0xFF`
/// past the base's end (see SeggetTestServer's Representation).
func secondVersion(of base: [UInt8], length: Int) -> [UInt8] {
    (0..<length).map { i in i < base.count ? ~base[i] : UInt8(truncatingIfNeeded: i &* 31 &+ 7) }
}

/// The first byte of a `bytes=a-b` request header.
func rangeStart(_ header: String?) -> Int64? {
    guard let h = header, h.hasPrefix("bytes="), let dash = h.firstIndex(of: "-") else { return nil }
    return Int64(h[h.index(h.startIndex, offsetBy: 6)..<dash])
}

func isSymlink(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK
}

/// A throw-away HTTPS server (python3 + ssl, self-signed certificate) whose every GET answers
/// `302 Location: location`; for testing the https→http downgrade policy without TLS in the test
/// server.
final class TLSRedirector: @unchecked Sendable {
    let process: SpawnedProcess
    let url: String
    private let dir: TempDir

    static let python: String? = ["/usr/bin/python3", "/usr/local/bin/python3", "/root/.pyenv/shims/python3"]
        .first { access($0, X_OK) == 0 }
    static let openssl: String? = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first { access($0, X_OK) == 0 }
    static var isAvailable: Bool { python != nil && openssl != nil }

    init(location: String) throws {
        guard let python = Self.python, let openssl = Self.openssl else { throw TestSupportError("python3/openssl missing") }
        dir = try TempDir(prefix: "segget-tls")
        let key = dir.path("key.pem"), cert = dir.path("cert.pem")
        let gen = try SpawnedProcess(executable: openssl, arguments: [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
            "-subj", "/CN=127.0.0.1",
        ])
        let g = gen.wait(timeout: 30)
        guard g.exitCode == 0 else { throw TestSupportError("openssl req failed: \(g.stderr)") }
        let script = """
            import http.server, socket, ssl, sys
            loc = sys.argv[3]
            class H(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    self.send_response(302)
                    self.send_header("Location", loc)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                def log_message(self, *a):
                    pass
            srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(sys.argv[1], sys.argv[2])
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
            print("port", srv.server_address[1], file=sys.stderr, flush=True)
            srv.serve_forever()
            """
        process = try SpawnedProcess(executable: python, arguments: ["-c", script, cert, key, location])
        var port = 0
        let deadline = nowSeconds() + 20
        while port == 0 && nowSeconds() < deadline {
            // The port goes to stderr: SpawnedProcess offers stderrSoFar.
            let out = process.stderrSoFar
            if let line = out.split(separator: "\n").first(where: { $0.hasPrefix("port ") }) {
                port = Int(line.dropFirst(5)) ?? 0
            }
            if !process.isRunning { break }
            usleep(20_000)
        }
        guard port != 0 else { throw TestSupportError("the TLS redirector did not start: \(process.stderrSoFar)") }
        url = "https://127.0.0.1:\(port)/file.bin"
    }

    func stop() {
        process.signal(SIGTERM)
        _ = process.wait(timeout: 5)
    }
}
