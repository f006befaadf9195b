import Dispatch
import Segget
import SeggetTestServer
import Synchronization
import Testing

// Mirrors (`--mirror`), end to end against test servers: each is probed before the fetch, on the
// download's loop beside everything else, and kept only when it serves the same file.

private func server(host: String = "127.0.0.1", _ files: [String: [UInt8]]) throws -> TestServer {
    let s = try TestServer(host: host)
    for (name, bytes) in files { s.addResource(name: name, bytes: bytes, etag: "\"\(name)-\(bytes.count)\"") }
    try s.start()
    return s
}

/// When each server's first request ended (seconds on the monotonic clock).
private final class FirstAnswers: Sendable {
    private let times = Mutex<[Int: Double]>([:])

    func watch(_ s: TestServer, as key: Int) {
        s.onRequestFinished { [self] _ in
            let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
            times.withLock { if $0[key] == nil { $0[key] = now } }
        }
    }

    var all: [Double] { times.withLock { Array($0.values) } }
}

@Suite(.serialized) struct MirrorTests {
    static let size = 4 << 20

    /// Three mirrors whose probes each take 1.5 s to answer are probed at once, while the fetch runs
    /// from the main URL (paced, so that it lasts beyond the probes): their first answers end within a
    /// fraction of that of one another (one after another they would end 1.5 s apart). The one serving
    /// another length is dropped with a notice; the two others join the fetch and serve ranges.
    @Test func mirrorsAreProbedAtOnceAndOnlyAgreeingOnesAreKept() async throws {
        let body = TestFiles.pattern(2 * Self.size, seed: 41)
        let main = try server(["f.bin": body])
        let good1 = try server(["f.bin": body])
        let good2 = try server(["f.bin": body])
        let other = try server(["f.bin": Array(body.dropLast(1))])
        defer { [main, good1, good2, other].forEach { $0.stop() } }
        let answers = FirstAnswers()
        for (k, s) in [good1, good2, other].enumerated() { answers.watch(s, as: k) }
        let dir = try TempDir(prefix: "segget-mirrors")
        var o = DownloadOptions()
        o.connections = 4
        o.chunkSize = 256 << 10
        o.outputPath = dir.path("f.bin")
        // Only the first request to each mirror (its probe) is slow.
        o.mirrors = [good1, good2, other].map { $0.url("f.bin", query: "slowfirst=1&slowfirstbyte=1.5") }
        let log = EventLog()
        // 8 MiB at 512 KiB/s per answer over 4 connections: 4 s from the main URL alone.
        let download = Download(url: main.url("f.bin", query: "rate=512k"), options: o)
        _ = try await blocking { try download.run(events: { log.append($0) }) }

        #expect(fileBytes(dir.path("f.bin")) == body)
        let times = answers.all
        #expect(times.count == 3)
        let spread = (times.max() ?? 0) - (times.min() ?? 0)
        // Below one delay, with room for a loaded machine: one probe after another would be 3 s.
        #expect(spread < 1.2, "the mirrors' probes ended \(spread) s apart: probed one after another")
        #expect(log.notices.filter { $0.contains("dropping mirror") }.count == 1, "\(log.notices)")
        #expect(log.hasNotice(containing: "its length \(2 * Self.size - 1) differs from \(2 * Self.size)"))
        // The kept mirrors joined the running fetch and were asked for ranges, beyond their probes.
        #expect(good1.requests.count > 1 && good2.requests.count > 1, "\(good1.requests.count) and \(good2.requests.count) requests")
        #expect(other.requests.count == 1)
    }

    /// A mirror that does not answer holds nothing up: the fetch runs from the main URL while the
    /// mirror's probe waits, and the download ends when the file is in, not when the probe gives up
    /// (it took the probe's 20 s before; the main URL serves the file in a fraction of a second). The
    /// probe still out is let go, with no notice after the download.
    @Test func aMirrorThatDoesNotAnswerHoldsNothingUp() async throws {
        let body = TestFiles.pattern(Self.size, seed: 44)
        let main = try server(["f.bin": body])
        let silent = try server(["f.bin": body])
        defer { [main, silent].forEach { $0.stop() } }
        let dir = try TempDir(prefix: "segget-mirrors")
        var o = DownloadOptions()
        o.connections = 4
        o.chunkSize = 256 << 10
        o.outputPath = dir.path("f.bin")
        o.mirrors = [silent.url("f.bin", query: "firstbyte=30")]
        let log = EventLog()
        let began = DispatchTime.now().uptimeNanoseconds
        let download = Download(url: main.url("f.bin"), options: o)
        _ = try await blocking { try download.run(events: { log.append($0) }) }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        #expect(fileBytes(dir.path("f.bin")) == body)
        #expect(seconds < 10, "the download took \(seconds) s: it waited for the mirror's probe")
        #expect(!log.hasNotice(containing: "dropping mirror"), "\(log.notices)")
        #expect(silent.requests.count <= 1)
    }

    /// A mirror that cannot be reached is dropped with the reason, and the download goes on.
    @Test func anUnreachableMirrorIsDropped() async throws {
        let body = TestFiles.pattern(1 << 20, seed: 42)
        let main = try server(["f.bin": body])
        let gone = try server(["f.bin": body])
        let goneURL = gone.url("f.bin")
        gone.stop()
        defer { main.stop() }
        let dir = try TempDir(prefix: "segget-mirrors")
        var o = DownloadOptions()
        o.connections = 2
        o.chunkSize = 128 << 10
        o.outputPath = dir.path("f.bin")
        o.mirrors = [goneURL]
        let log = EventLog()
        // Paced, so that the download outlasts the refused probe (a notice after the end is not shown).
        let download = Download(url: main.url("f.bin", query: "rate=4m"), options: o)
        _ = try await blocking { try download.run(events: { log.append($0) }) }
        #expect(fileBytes(dir.path("f.bin")) == body)
        #expect(log.hasNotice(containing: "dropping mirror"), "\(log.notices)")
    }

    /// Credentials given for the main URL reach a mirror on the same host, never one on another.
    @Test func credentialsGoOnlyToMirrorsOnTheSameHost() async throws {
        let body = TestFiles.pattern(2 << 20, seed: 43)
        let main = try server(["f.bin": body])
        let sameHost = try server(["f.bin": body])
        let otherHost = try server(host: "127.0.0.2", ["f.bin": body])
        defer { [main, sameHost, otherHost].forEach { $0.stop() } }
        let dir = try TempDir(prefix: "segget-mirrors")
        var o = DownloadOptions()
        o.connections = 4
        o.chunkSize = 128 << 10
        o.outputPath = dir.path("f.bin")
        o.transfer.headers = ["Authorization: Bearer mirror-secret"]
        o.mirrors = [sameHost.url("f.bin"), otherHost.url("f.bin")]
        // Paced, so that both mirrors join before the file is in.
        let download = Download(url: main.url("f.bin", query: "rate=4m"), options: o)
        _ = try await blocking { try download.run() }
        #expect(fileBytes(dir.path("f.bin")) == body)
        #expect(!otherHost.requests.isEmpty)
        #expect(otherHost.requests.allSatisfy { $0.headers["authorization"] == nil })
        #expect(!sameHost.requests.isEmpty)
        #expect(sameHost.requests.allSatisfy { $0.headers["authorization"] == "Bearer mirror-secret" })
    }

    /// A stream (`-o -`) probes its mirrors the same way, on its loop of one beside the stream (paced
    /// here, so that it outlasts the probes), and drops the one that serves another length; the
    /// stream is the file.
    @Test func aStreamKeepsOnlyAgreeingMirrors() async throws {
        let body = TestFiles.pattern(Self.size, seed: 44)
        let main = try server(["f.bin": body])
        let good = try server(["f.bin": body])
        let other = try server(["f.bin": Array(body.dropLast(7))])
        defer { [main, good, other].forEach { $0.stop() } }
        var o = StreamTests.options(4)
        o.mirrors = [good.url("f.bin"), other.url("f.bin")]
        let out = StreamTests.Collector()
        let log = EventLog()
        let download = Download(url: main.url("f.bin", query: "rate=512k"), options: o)
        _ = try await blocking {
            try download.stream(to: out.take, settings: StreamSettings(window: StreamTests.window), events: { log.append($0) })
        }
        #expect(out.bytes == body)
        #expect(log.hasNotice(containing: "its length \(Self.size - 7) differs from \(Self.size)"), "\(log.notices)")
        #expect(good.requests.count > 1, "the agreeing mirror served no range: \(good.requests.count) requests")
    }

    /// A mirror that does not answer holds a stream up no more than a download: the stream starts
    /// from the main URL at once and ends when the file is through (it waited for the mirror's probe
    /// to time out before, 20 s).
    @Test func aStreamIsNotHeldUpByAMirrorThatDoesNotAnswer() async throws {
        let body = TestFiles.pattern(Self.size, seed: 46)
        let main = try server(["f.bin": body])
        let silent = try server(["f.bin": body])
        defer { [main, silent].forEach { $0.stop() } }
        var o = StreamTests.options(4)
        o.mirrors = [silent.url("f.bin", query: "firstbyte=30")]
        let out = StreamTests.Collector()
        let log = EventLog()
        let began = DispatchTime.now().uptimeNanoseconds
        let download = Download(url: main.url("f.bin"), options: o)
        _ = try await blocking {
            try download.stream(to: out.take, settings: StreamSettings(window: StreamTests.window), events: { log.append($0) })
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        #expect(out.bytes == body)
        #expect(seconds < 10, "the stream took \(seconds) s: it waited for the mirror's probe")
        #expect(!log.hasNotice(containing: "dropping mirror"), "\(log.notices)")
    }

    /// Servers word their `ETag`s each their own way from a file's time and size (Apache
    /// `"size-microseconds"`, nginx `"mtime-size"`, Caddy base 36), so a copied file's mirror on
    /// another server program never shares one. Mirrors whose `ETag`s are such other wordings of the
    /// main URL's length and `Last-Modified` join and serve ranges; an `ETag` of the main URL's own
    /// wording that differs (the file rewritten within the second) and a content hash are dropped,
    /// each named with why, though their length and `Last-Modified` agree.
    @Test func aMirrorWhoseETagWordsTheSameTimeAndSizeJoins() async throws {
        let body = TestFiles.pattern(Self.size, seed: 45)
        let modified = "Tue, 01 Dec 2026 10:00:00 GMT"  // 1796119200 = 0x6b0e9aa0; 4 MiB = 0x400000
        let main = try TestServer()
        let nginx = try TestServer()
        let caddy = try TestServer()
        let rewritten = try TestServer()
        let hashed = try TestServer()
        let all = [main, nginx, caddy, rewritten, hashed]
        defer { all.forEach { $0.stop() } }
        main.addResource(name: "f.bin", bytes: body, etag: "\"400000-6618f96e5ca40\"", lastModified: modified)
        nginx.addResource(name: "f.bin", bytes: body, etag: "\"6b0e9aa0-400000\"", lastModified: modified)
        caddy.addResource(name: "f.bin", bytes: body, etag: "\"tpd2g02hwcg\"", lastModified: modified)
        rewritten.addResource(name: "f.bin", bytes: body, etag: "\"400000-6618f96ede3f1\"", lastModified: modified)
        hashed.addResource(name: "f.bin", bytes: body, etag: "\"7320ef4f18aa47976b083e749d3af305\"", lastModified: modified)
        for s in all { try s.start() }
        let dir = try TempDir(prefix: "segget-mirrors")
        var o = DownloadOptions()
        o.connections = 6
        o.chunkSize = 256 << 10
        o.outputPath = dir.path("f.bin")
        o.mirrors = [nginx, caddy, rewritten, hashed].map { $0.url("f.bin") }
        let log = EventLog()
        // 4 MiB at 256 KiB/s per answer over 6 connections: 2.7 s from the main URL alone.
        let download = Download(url: main.url("f.bin", query: "rate=256k"), options: o)
        _ = try await blocking { try download.run(events: { log.append($0) }) }
        #expect(fileBytes(dir.path("f.bin")) == body)
        #expect(nginx.requests.count > 1, "\(nginx.requests.count) requests: the nginx-worded mirror did not join")
        #expect(caddy.requests.count > 1, "\(caddy.requests.count) requests: the Caddy-worded mirror did not join")
        #expect(rewritten.requests.count == 1 && hashed.requests.count == 1)
        #expect(log.notices.filter { $0.contains("dropping mirror") }.count == 2, "\(log.notices)")
        #expect(log.hasNotice(containing: "its ETag \"400000-6618f96ede3f1\" differs"), "\(log.notices)")
        #expect(log.hasNotice(containing: "its ETag \"7320ef4f18aa47976b083e749d3af305\" differs"), "\(log.notices)")
    }
}
