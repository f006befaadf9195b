@testable import Segget
import SeggetTestServer
import Testing

/// Connections warmed beside a slow probe (`ConnectionWarmUp`), against the in-process test server:
/// its `firstbyte` delay stands for a long path (every answer's head 0.2 s after its request), and
/// the round trip that warms is lowered to loopback's (`warmUpMinRoundTrip`), but where a test says.
@Suite(.serialized) struct WarmUpTests {
    static let size = 16 << 20

    static func options(_ dir: TempDir, connections: Int, loopbackIsLong: Bool = true) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = connections
        o.outputPath = dir.path("out.bin")
        if loopbackIsLong { o.warmUpMinRoundTrip = 0 }
        return o
    }

    /// A file served and downloaded: `size` bytes of pattern `seed` served as /f, fetched as
    /// `/f?query` into out.bin (see `options`). The caller stops the server.
    struct Fetched {
        let server: TestServer
        let body: [UInt8]
        let dir: TempDir
        let run: BoundedRun
    }

    static func fetch(
        seed: UInt64, query: String, connections: Int, loopbackIsLong: Bool = true, hardLimit: Double = 30
    ) async throws -> Fetched {
        let body = TestFiles.pattern(size, seed: seed)
        let server = try TestServer.serving(body)
        do {
            let dir = try TempDir()
            let run = await boundedDownload(
                server.baseURL + "/f?" + query, options(dir, connections: connections, loopbackIsLong: loopbackIsLong),
                hardLimit: hardLimit)
            return Fetched(server: server, body: body, dir: dir, run: run)
        } catch {
            server.stop()
            throw error
        }
    }

    /// The ranged requests of connections 1-3 go over the connections that the warm-ups (requests
    /// for the first byte) opened: each warm connection carries a ranged request after its warm-up.
    /// (A later one may still dial: a steal's victim, cut at its new end, closes its connection.)
    /// Each answer is paced at 16 MiB/s, so that the ranges are worth their connections. That a warm
    /// connection's range brings bytes is not asked: on a loaded machine (a fresh clone's CI, once;
    /// 2 of 37 runs beside two busy loops) connection 0 may take a range whose answer's head, 0.2 s
    /// after its request, has not come yet, and that request, on the warm connection, is cut empty.
    @Test func theRangedRequestsReuseTheWarmConnections() async throws {
        let f = try await Self.fetch(seed: 7101, query: "firstbyte=0.2&rate=16m", connections: 4)
        defer { f.server.stop() }
        let (server, body, dir, run) = (f.server, f.body, f.dir, f.run)
        let requests = server.requests
        let context = "\(run); \(requests)"
        #expect(run.error == nil, "\(context)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil, "\(context)")
        let warmUps = requests.filter { $0.headers["range"] == "bytes=0-0" }
        #expect(warmUps.count == 3, "\(context)")
        #expect(warmUps.allSatisfy { $0.status == 206 && $0.bodyBytesSent == 1 }, "\(context)")
        let ranged = requests.filter { $0.headers["range"] != "bytes=0-0" }
        #expect(Set(warmUps.map(\.remotePort)).count == 3, "\(context)")
        for w in warmUps {
            #expect(ranged.contains { $0.remotePort == w.remotePort }, "port \(w.remotePort): \(context)")
        }
    }

    /// The probe's answer is held up (here the server holds the first request's head 3 s; on a WAN, a
    /// lost SYN waits 1 s for its timeout) while the warm-ups to the same URL answered in 0.1 s: the
    /// probe is asked again on a warm connection, and the download does not wait for the first.
    /// Two downloads from one host on one loop (a list's files, the daemon's tasks): the second's
    /// probe goes out on a connection the first left open, and it sends no warm-up, where it sent
    /// one request for a byte on each of the first's open connections.
    @Test func aProbeOnAConnectionLeftOpenWarmsNothing() async throws {
        let body = TestFiles.pattern(4 << 20, seed: 7111)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let loop = try #require(DownloadLoop.onOwnThread())
        let first = try TempDir(), second = try TempDir()
        let url = server.baseURL + "/f?firstbyte=0.2"
        _ = try await Download(url: url, options: Self.options(first, connections: 4)).start(on: loop).result()
        let earlier = server.requests
        _ = try await Download(url: url, options: Self.options(second, connections: 4)).start(on: loop).result()
        let later = server.requests.dropFirst(earlier.count)
        let context = "\(earlier.map { $0.headers["range"] ?? "-" }) then \(later.map { $0.headers["range"] ?? "-" })"
        #expect(earlier.filter { $0.headers["range"] == "bytes=0-0" }.count == 3, "\(context)")
        #expect(!later.isEmpty && !later.contains { $0.headers["range"] == "bytes=0-0" }, "\(context)")
        #expect(TestFiles.fileDifference(first.path("out.bin"), body) == nil)
        #expect(TestFiles.fileDifference(second.path("out.bin"), body) == nil)
    }

    /// A redirect to another host (here another server): the warm-ups that went to the first host
    /// while its answer was slow opened nothing the download can use, and as many go to the second
    /// while its answer is slow; the ranged requests take their connections. Every request is
    /// counted, the first host's warm-ups too.
    @Test func aRedirectToAnotherHostWarmsThere() async throws {
        let body = TestFiles.pattern(Self.size, seed: 7121)
        let target = try TestServer.serving(body)
        defer { target.stop() }
        let redirector = try TestServer.serving(body)
        defer { redirector.stop() }
        let dir = try TempDir()
        let url = redirector.baseURL + "/redirect/f?firstbyte=0.2&to=" + target.baseURL + "/f?firstbyte=0.2"
        let run = await boundedDownload(url, Self.options(dir, connections: 4), hardLimit: 30)
        let (first, second) = (redirector.requests, target.requests)
        let context = "\(run); first host \(first); second \(second)"
        #expect(run.error == nil, "\(context)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil, "\(context)")
        #expect(first.filter { $0.headers["range"] == "bytes=0-0" }.count == 3, "\(context)")
        let warmUps = second.filter { $0.headers["range"] == "bytes=0-0" }
        #expect(warmUps.count == 3, "\(context)")
        let ranged = second.filter { $0.headers["range"] != "bytes=0-0" }
        for w in warmUps {
            #expect(ranged.contains { $0.remotePort == w.remotePort }, "port \(w.remotePort): \(context)")
        }
        #expect(run.result?.tally.requests == first.count + second.count, "\(context)")
    }

    @Test func aProbeHeldUpIsAskedAgainOnAWarmConnection() async throws {
        let f = try await Self.fetch(seed: 7106, query: "firstbyte=0.1&slowfirst=1&slowfirstbyte=3", connections: 4)
        defer { f.server.stop() }
        let (server, body, dir, run) = (f.server, f.body, f.dir, f.run)
        let requests = server.requests
        let context = "\(run); \(requests)"
        #expect(run.error == nil, "\(context)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil, "\(context)")
        #expect(run.seconds < 2.5, "\(context)")
        #expect(requests.filter { $0.headers["range"] == "bytes=0-0" }.count == 3, "\(context)")
    }

    /// A server that answers at once (loopback, a LAN) gets no warm-up: a small file with `-n 8` is
    /// one request, as before.
    @Test func aFastServerGetsNoWarmUp() async throws {
        let body = TestFiles.pattern(64 << 10, seed: 7102)
        let server = try TestServer.serving(body, as: "small")
        defer { server.stop() }
        let dir = try TempDir()
        let run = await boundedDownload(server.baseURL + "/small", Self.options(dir, connections: 8), hardLimit: 30)
        #expect(run.error == nil, "\(run)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(server.requests.count == 1, "\(server.requests)")
        let big = TestFiles.pattern(Self.size, seed: 7103)
        server.addResource(name: "big", bytes: big)
        server.resetCounters()
        let dir2 = try TempDir()
        let run2 = await boundedDownload(server.baseURL + "/big", Self.options(dir2, connections: 8), hardLimit: 30)
        #expect(run2.error == nil, "\(run2)")
        #expect(!server.requests.contains { $0.headers["range"] == "bytes=0-0" }, "\(server.requests)")
    }

    /// With the default rule, a server slow to answer on a short path (loopback's round trip, far
    /// below 10 ms) gets no warm-up either: a new connection costs little there, and a busy machine
    /// that makes a probe slow does not make it warm.
    @Test func aSlowServerOnAShortPathGetsNoWarmUp() async throws {
        let f = try await Self.fetch(seed: 7105, query: "firstbyte=0.2", connections: 4, loopbackIsLong: false)
        defer { f.server.stop() }
        let (server, body, dir, run) = (f.server, f.body, f.dir, f.run)
        #expect(run.error == nil, "\(run)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(!server.requests.contains { $0.headers["range"] == "bytes=0-0" }, "\(server.requests)")
    }

    /// A server that takes 3 requests at once and refuses the rest (429 with `Retry-After`, or 503):
    /// the warm-ups beyond its limit are refused, which teaches the limit before the first ranged
    /// request; the download finishes identical, with the refusals bounded as for any download.
    @Test(arguments: ["reject=429&retryafter=1", "reject=503"])
    func refusedWarmUpsTeachTheLimit(_ variant: String) async throws {
        let f = try await Self.fetch(
            seed: 7104, query: "firstbyte=0.2&rate=8m&maxconc=3&" + variant, connections: 8, hardLimit: 60)
        defer { f.server.stop() }
        let (server, body, dir, run) = (f.server, f.body, f.dir, f.run)
        let stats = server.concurrency
        let context = "\(variant): \(run); server \(stats); \(server.requests)"
        #expect(run.error == nil, "\(context)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil, "\(context)")
        #expect(stats.maxInFlight <= 3, "\(context)")
        // The 5 warm-ups beyond the limit, and a few probes upwards.
        #expect(stats.rejected <= 10, "\(context)")
        let warmUps = server.requests.filter { $0.headers["range"] == "bytes=0-0" }
        #expect(warmUps.count == 7, "\(context)")
    }
}
