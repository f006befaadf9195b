import Synchronization
import Dispatch
import Glibc
import Segget
import SeggetTestServer
import Testing

/// Hostile servers, round two (issue 16): every bound the user sets holds (the probe, redirects,
/// `Retry-After` and every retry wait fit inside `--timeout`), lying or ambiguous framing is refused
/// before a byte is written, and answers that cannot change on retry fail (or fall back) at once
/// with a message that names the problem. Bounds are asserted with a wide margin for a loaded
/// two-core machine: what they rule out is the old behaviour, which took tens of seconds.
@Suite(.serialized) struct HostileServerTests {
    static let chunk: Int64 = 64 * 1024

    static func options(_ n: Int, dir: TempDir) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = n
        o.chunkSize = chunk
        o.outputPath = dir.path("out.bin")
        o.retryWait = 0.05
        o.retries = 3
        o.checkpointInterval = 0.5
        o.syncBeforeRename = false
        return o
    }

    static func server(_ body: [UInt8]) throws -> TestServer {
        let s = try TestServer()
        s.addResource(name: "f", bytes: body)
        try s.start()
        return s
    }

    /// A download that is interrupted after `watchdog` seconds whatever happens, so that a test of a
    /// bound fails in bounded time on code that does not keep it (it then ends as `.interrupted`).
    static func bounded(_ url: String, _ options: DownloadOptions, watchdog: Double = 20, trace: FaultTrace? = nil)
        async -> (outcome: FaultOutcome, seconds: Double)
    {
        let t = trace ?? FaultTrace()
        // Timed on the download's own thread: resuming this task afterwards can wait for a thread of
        // the (two-thread) cooperative pool while other tests run, and that is not the download's time.
        let seconds = Mutex<Double>(0)
        let outcome = try? await blocking { () -> FaultOutcome in
            let started = nowSeconds()
            defer { seconds.withLock { $0 = nowSeconds() - started } }
            let stop = InterruptFlag()
            DispatchQueue.global().asyncAfter(deadline: .now() + watchdog) { stop.set() }
            let sink: @Sendable (DownloadEvent) -> Void = { t.record($0) }
            let result = Result { () throws(SeggetError) -> DownloadResult in
                try Download(url: url, options: options).run(events: sink, interrupt: stop)
            }
            switch result {
            case .success(let r): return FaultOutcome(result: r, error: nil)
            case .failure(let e): return FaultOutcome(result: nil, error: e)
            }
        }
        return (outcome ?? FaultOutcome(result: nil, error: SeggetError(.internalError, "could not start a thread")), seconds.withLock { $0 })
    }

    static func nothingLeftUnderFinalName(_ dir: TempDir) -> Bool { !TestFiles.exists(dir.path("out.bin")) }

    // MARK: --timeout bounds the whole run

    /// A server that accepts the probe and never answers: `--timeout 3` ends the run in about 3 s
    /// with a network failure (exit 3) that names the timeout. (Before: libcurl's 20 s low-speed
    /// limit per probe, then five retries, about two minutes.)
    @Test func silentProbeIsBoundedByTimeout() async throws {
        let server = try Self.server(TestFiles.pattern(10_000, seed: 1))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.timeout = 3
        let (outcome, seconds) = await Self.bounded(server.url("f", mode: .silent), o)
        #expect(outcome.error?.kind == .network, "\(outcome.error?.message ?? "no error")")
        #expect(outcome.error?.message.contains("--timeout") == true, "\(outcome.error?.message ?? "")")
        #expect(seconds >= 2.5 && seconds < 6, "--timeout 3 took \(seconds) s")
        #expect(Self.nothingLeftUnderFinalName(dir))
    }

    /// The probe answers, every range is silent: the fetch loop keeps the same bound.
    @Test func silentRangesAreBoundedByTimeout() async throws {
        let server = try Self.server(TestFiles.pattern(Int(8 * Self.chunk), seed: 2))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(4, dir: dir)
        o.timeout = 3
        let (outcome, seconds) = await Self.bounded(server.url("f", mode: .silent, query: "after=2"), o)
        #expect(outcome.error?.kind == .network, "\(outcome.error?.message ?? "no error")")
        #expect(outcome.error?.message.contains("--timeout 3 s") == true, "\(outcome.error?.message ?? "")")
        #expect(seconds >= 2.5 && seconds < 6, "--timeout 3 took \(seconds) s")
    }

    /// The probe gets 503 with `Retry-After: 86400` (and with an HTTP date a day ahead) under
    /// `--timeout 8`: the wait cannot fit, so the run fails at once and says why. (Before: it slept
    /// for five minutes.) At once is well under the 8 s that waiting into the timeout would take.
    @Test(arguments: ["86400", "Sun,%2006%20Nov%202044%2008:49:37%20GMT"])
    func probeRetryAfterBeyondTimeoutFailsAtOnce(_ retryAfter: String) async throws {
        let server = try Self.server(TestFiles.pattern(10_000, seed: 3))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.timeout = 8
        let (outcome, seconds) = await Self.bounded(server.url("f", mode: .status, query: "code=503&retryafter=\(retryAfter)"), o)
        let message = outcome.error?.message ?? "no error"
        #expect(outcome.error?.kind == .network, "\(message)")
        #expect(message.contains("Retry-After") && message.contains("--timeout"), "\(message)")
        #expect(seconds < 5, "failed after \(seconds) s instead of at once")
        #expect(server.requests.count == 1, "\(server.requests)")
    }

    /// Ranges get 503 with `Retry-After: 86400` after a good probe: the engine fails at once too.
    @Test func rangeRetryAfterBeyondTimeoutFailsAtOnce() async throws {
        let server = try Self.server(TestFiles.pattern(Int(8 * Self.chunk), seed: 4))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(4, dir: dir)
        o.timeout = 10
        let (outcome, seconds) = await Self.bounded(server.url("f", mode: .status, query: "code=503&from=2&retryafter=86400"), o)
        let message = outcome.error?.message ?? "no error"
        #expect(outcome.error?.kind == .network, "\(message)")
        #expect(message.contains("Retry-After") && message.contains("--timeout"), "\(message)")
        #expect(seconds < 6, "failed after \(seconds) s, not at once")
        #expect(Self.nothingLeftUnderFinalName(dir))
    }

    /// A backoff longer than what is left of `--timeout` fails at once instead of sleeping past it.
    @Test func probeBackoffBeyondTimeoutFailsAtOnce() async throws {
        let server = try Self.server(TestFiles.pattern(10_000, seed: 5))
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.timeout = 8
        o.retryWait = 20  // the first backoff is 10-30 s with jitter: never fits in 8 s
        let (outcome, seconds) = await Self.bounded(server.url("f", mode: .drop, query: "after=0"), o)
        let message = outcome.error?.message ?? "no error"
        #expect(outcome.error?.kind == .network, "\(message)")
        #expect(message.contains("--timeout"), "\(message)")
        #expect(seconds < 5, "failed after \(seconds) s, not at once")
    }

    // MARK: Framing conflicts are refused

    /// Two `Content-Range` fields: the first says what was asked, the second (and the body) are
    /// shifted by a byte. Refused as a protocol error at once; nothing under the final name.
    /// (Before: the first was trusted, exit 0 with a corrupt file.)
    @Test func conflictingContentRangeIsRefused() async throws {
        let server = try Self.server(TestFiles.pattern(Int(8 * Self.chunk), seed: 6))
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        let (outcome, _) = await Self.bounded(server.url("f", mode: .dupheader), Self.options(4, dir: dir), trace: trace)
        #expect(outcome.error?.kind == .protocolViolation, "\(outcome.error?.message ?? "no error: the shifted bytes were trusted")")
        #expect(outcome.error?.message.contains("Content-Range") == true, "\(outcome.error?.message ?? "")")
        #expect(trace.retries == 0)
        #expect(Self.nothingLeftUnderFinalName(dir))
    }

    /// Framing that a careful HTTP parser refuses: disagreeing `Content-Length` fields, malformed
    /// lengths, `Transfer-Encoding` with `Content-Length`, a coding other than plain chunked, an
    /// obs-folded length, a space before the colon. Each is a protocol error (exit 7) at once, with
    /// no retry ladder and nothing under the final name.
    @Test(arguments: [
        (FaultMode.dupheader, "field=length"), (.badlength, "value=-1"), (.badlength, "value=%2B5"),
        (.badlength, "value=12x"), (.smuggle, "kind=te-cl"), (.smuggle, "kind=te-other"), (.smuggle, "kind=fold"),
        (.smuggle, "kind=space"),
    ])
    func ambiguousFramingIsRefused(_ mode: FaultMode, _ query: String) async throws {
        let body = TestFiles.pattern(Int(8 * Self.chunk), seed: 7)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        let (outcome, _) = await Self.bounded(server.url("f", mode: mode, query: query), Self.options(4, dir: dir), trace: trace)
        #expect(outcome.error?.kind == .protocolViolation, "\(mode) \(query): \(outcome.error?.message ?? "no error")")
        #expect(outcome.error?.exitCode == 7)
        #expect(trace.retries == 0, "\(mode) \(query): retried \(trace.retries) times")
        #expect(Self.nothingLeftUnderFinalName(dir))
    }

    /// A server that frames every answer, 206 included, with `Transfer-Encoding: chunked` and no
    /// `Content-Length` (legal HTTP/1.1; chunk extensions too) is downloaded, with one connection and
    /// with several. The probe's held answer, continued by the fetch, was once judged with a length
    /// the server never sent beside its chunked coding, and refused as smuggling (exit 7).
    @Test(arguments: [(1, ""), (8, ""), (1, "ext=1"), (8, "ext=1")])
    func chunkedPartialAnswersAreDownloaded(_ n: Int, _ query: String) async throws {
        let body = TestFiles.pattern(Int(24 * Self.chunk + 321), seed: 17)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        // Paced with several connections, so that the split comes before the probe's answer brought
        // everything (on a busy machine it once did, and one request was all).
        let paced = n > 1 ? [query, "rate=8m"].filter { !$0.isEmpty }.joined(separator: "&") : query
        let (outcome, _) = await Self.bounded(server.url("f", mode: .chunked206, query: paced), Self.options(n, dir: dir), trace: trace)
        #expect(outcome.error == nil, "-n \(n) \(query): \(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(trace.retries == 0, "-n \(n) \(query): retried \(trace.retries) times")
        // Ranged, not one plain stream: more than one request when there are several connections.
        if n > 1 { #expect(server.requests.count > 1) }
    }

    /// A `multipart/byteranges` answer to one range is never written: on the probe it means "no
    /// usable ranges" (one plain stream), during the fetch the download starts over as one stream at
    /// once. (Before: six retries of the same range, then exit 7.)
    @Test(arguments: ["after=1", "after=2"])
    func multipartAnswerFallsBackAtOnce(_ query: String) async throws {
        let body = TestFiles.pattern(Int(8 * Self.chunk + 5), seed: 8)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        let (outcome, _) = await Self.bounded(server.url("f", mode: .multipart, query: query), Self.options(4, dir: dir), trace: trace)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(trace.retries == 0, "retried \(trace.retries) times")
        #expect(trace.notices.contains { $0.contains("multipart") }, "\(trace.notices)")
    }

    // MARK: Permanent answers and errors

    /// Ranges (not the probe's) come back gzip-coded with a shorter `Content-Length`, as a real
    /// compressing server sends them: nothing coded is written, the download starts over at once as
    /// one plain stream (as when the probe sees the coding). (Before: retried as a length mismatch,
    /// then exit 7.)
    @Test func codedRangesFallBackAtOnce() async throws {
        let body = TestFiles.pattern(Int(8 * Self.chunk), seed: 9)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        let (outcome, _) = await Self.bounded(server.url("f", mode: .encoding, query: "after=2&shrink=100"), Self.options(4, dir: dir), trace: trace)
        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(trace.retries == 0, "retried \(trace.retries) times")
        #expect(trace.notices.contains { $0.contains("Content-Encoding") }, "\(trace.notices)")
    }

    /// A host that does not resolve: said so after at most one quick, announced retry.
    @Test func unresolvableHostFailsQuickly() async throws {
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.retries = 5
        o.retryWait = 1
        let trace = FaultTrace()
        let (outcome, seconds) = await Self.bounded("http://segget-no-such-host.invalid/f", o, trace: trace)
        #expect(outcome.error?.kind == .network, "\(outcome.error?.message ?? "no error")")
        #expect(outcome.error?.message.contains("resolve") == true, "\(outcome.error?.message ?? "")")
        #expect(trace.retries <= 1, "retried \(trace.retries) times")
        // Generous: a slow resolver may take seconds per lookup. The retry count is what tells.
        #expect(seconds < 15, "took \(seconds) s")
    }

    /// One 200 kB header line (libcurl: "Out of memory") and a flood of 4000 header lines (libcurl:
    /// a receive error): both reported as headers too large, at once.
    @Test(arguments: ["size=200000", "lines=4000"])
    func oversizedHeadersAreNamed(_ query: String) async throws {
        let server = try Self.server(TestFiles.pattern(10_000, seed: 10))
        defer { server.stop() }
        let dir = try TempDir()
        let trace = FaultTrace()
        let (outcome, _) = await Self.bounded(server.url("f", mode: .bigheaders, query: query), Self.options(2, dir: dir), trace: trace)
        let message = outcome.error?.message ?? "no error"
        #expect(message.contains("headers are too large"), "\(message)")
        #expect(!message.lowercased().contains("memory"), "\(message)")
        #expect(outcome.error?.kind == .protocolViolation)
        #expect(trace.retries == 0, "retried \(trace.retries) times")
    }

    /// A redirect to a malformed URL or an empty Location says that, not "without a Location header".
    @Test(arguments: [("to=http%3A%2F%2F%5B%3A%3A1%2Ff", "not a valid URL"), ("to=", "empty Location")])
    func unusableRedirectIsNamed(_ query: String, _ expected: String) async throws {
        let server = try Self.server(TestFiles.pattern(1000, seed: 11))
        defer { server.stop() }
        let dir = try TempDir()
        let (outcome, _) = await Self.bounded(server.url("f", mode: .redirect, query: query), Self.options(2, dir: dir))
        let message = outcome.error?.message ?? "no error"
        #expect(outcome.error?.kind == .protocolViolation, "\(message)")
        #expect(message.contains(expected), "\(message)")
        #expect(!message.contains("without a Location"), "\(message)")
    }

    // MARK: The command line

    /// A server that hangs up without answering: the error says so in a user's words, and what to do
    /// (before, libcurl's "Server returned nothing (no headers, no data)."), exit 3.
    @Test func aHangUpIsSaidInPlainWords() async throws {
        let server = try ByteResponder(first: [])
        defer { server.stop() }
        let dir = try TempDir()
        let r = try await runSeggetAsync(
            args: ["--retries", "0", "-o", dir.path("out.bin"), "http://127.0.0.1:\(server.port)/f.bin"], timeout: 60)
        #expect(r.exitCode == 3, "\(r.stderr)")
        #expect(r.stderr.contains("failed: the server closed the connection without answering; check the network, or try again later."), "\(r.stderr)")
        #expect(!r.stderr.contains("returned nothing"), "\(r.stderr)")
    }

    /// Retry lines are clean sentences: no ".;" where a reason that ends a sentence meets the count.
    @Test func retryLinesReadAsSentences() async throws {
        let server = try Self.server(TestFiles.pattern(Int(4 * Self.chunk), seed: 12))
        defer { server.stop() }
        let dir = try TempDir()
        let url = server.url("f", mode: .drop, query: "after=0&times=2")
        let r = try await runSeggetAsync(args: ["-n", "2", "--retry-wait", "0.05", "-o", dir.path("out.bin"), url], timeout: 60)
        #expect(r.exitCode == 0, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n").filter { $0.contains("Retry ") || $0.contains("retry ") }
        #expect(!lines.isEmpty, "no retry line: \(r.stderr)")
        for line in lines {
            #expect(!line.contains(".;") && !line.contains("..") && line.hasSuffix("."), "\(line)")
            // In a user's words, not libcurl's ("Transferred a partial file", "Server returned nothing").
            #expect(!line.contains("Transferred a") && !line.contains("returned nothing") && !line.contains("Failure when"), "\(line)")
        }
    }

    /// A `Retry-After` longer than `--max-retry-wait` waits the cap, and the retry line says so.
    @Test func longRetryAfterIsCappedAndAnnounced() async throws {
        let body = TestFiles.pattern(Int(4 * Self.chunk), seed: 14)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let url = server.url("f", mode: .status, query: "code=503&times=1&retryafter=3600")
        let started = nowSeconds()
        let r = try await runSeggetAsync(args: ["-n", "2", "--max-retry-wait", "1", "-o", dir.path("out.bin"), url], timeout: 60)
        let seconds = nowSeconds() - started
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(seconds >= 0.9 && seconds < 6, "took \(seconds) s")
        let line = r.stderr.split(separator: "\n").first { $0.contains("Retry 1 in") }.map(String.init) ?? ""
        #expect(line.contains("Retry-After") && line.contains("1h00m") && line.contains("--max-retry-wait"), "\(r.stderr)")
        let bad = try await runSeggetAsync(args: ["--max-retry-wait", "-1", url], timeout: 30)
        #expect(bad.exitCode == 2, "\(bad.stderr)")
    }

    /// A `Retry-After` of 2^63 - 1 seconds, or of more digits than an Int64 holds, waits the cap and
    /// says the ask was more than 31 years. Before, the first crashed segget (converting it to Int
    /// for the retry line: exit 132) and the second was read as no `Retry-After` (a 1 s backoff).
    @Test(arguments: ["9223372036854775807", "99999999999999999999"])
    func hugeRetryAfterWaitsTheCap(_ retryAfter: String) async throws {
        let body = TestFiles.pattern(Int(2 * Self.chunk), seed: 15)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let url = server.url("f", mode: .status, query: "code=503&times=1&retryafter=\(retryAfter)")
        let r = try await runSeggetAsync(args: ["-n", "2", "--max-retry-wait", "1.5", "-o", dir.path("out.bin"), url], timeout: 60)
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        let line = r.stderr.split(separator: "\n").first { $0.contains("Retry 1 in") }.map(String.init) ?? ""
        #expect(line.contains("more than 31 years") && line.contains("--max-retry-wait") && line.contains("Retry 1 in 1.5 s"), "\(r.stderr)")
    }

    /// A host that serves 3 requests at once refuses the rest with `Retry-After: 86400`: no new
    /// request goes to it for `--max-retry-wait` (1 s here), not for the day it asked, and the notice
    /// says so. Before, the cap held only for a retry's wait: the refusal kept every new request
    /// from the host for a day, and the download hung once its three admitted ranges were done.
    @Test func aHostsLongQuietIsCappedByMaxRetryWait() async throws {
        let body = TestFiles.pattern(Int(256 * Self.chunk), seed: 16)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let url = server.url("f", query: "maxconc=3&retryafter=86400&rate=2m")
        let started = nowSeconds()
        let r = try await runSeggetAsync(args: ["-n", "8", "--max-retry-wait", "1", "-o", dir.path("out.bin"), url], timeout: 45)
        let seconds = nowSeconds() - started
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(server.concurrency.maxInFlight <= 3)
        #expect(seconds < 40, "took \(seconds) s")
        #expect(r.stderr.contains("no new request for 1.0 s, the --max-retry-wait cap of the 24h00m it asked"), "\(r.stderr)")
    }

    /// `segget --timeout 3` against a silent server: exit 3 in well under 9 s (the process's start
    /// and exit included, on a loaded machine; before, about two minutes), and it says why.
    @Test func timeoutBoundsTheCommand() async throws {
        let server = try Self.server(TestFiles.pattern(10_000, seed: 13))
        defer { server.stop() }
        let dir = try TempDir()
        let started = nowSeconds()
        let r = try await runSeggetAsync(args: ["--timeout", "3", "-o", dir.path("out.bin"), server.url("f", mode: .silent)], timeout: 60)
        let seconds = nowSeconds() - started
        #expect(r.exitCode == 3, "\(r.stderr)")
        #expect(r.stderr.contains("--timeout"), "\(r.stderr)")
        #expect(seconds < 9, "--timeout 3 took \(seconds) s")
    }
}
