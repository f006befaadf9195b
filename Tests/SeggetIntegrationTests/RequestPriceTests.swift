import Foundation
import Segget
import SeggetTestServer
import Testing

/// Issue 37 against the in-process test server and through the binary: origins where a request
/// costs (one worker, a slow first byte, `Connection: close`, a host that refuses past a limit and
/// names a wait), with the requests the server saw counted and compared with what segget says it
/// cost (`RequestTally`, the `--json` finish event).
@Suite(.serialized) struct RequestPriceTests {
    static let chunk: Int64 = 1 << 20

    /// `HostileServerTests`' options (quick retries, no sync at the end) with 1 MiB chunks.
    static func options(_ n: Int, dir: TempDir) -> DownloadOptions {
        var o = HostileServerTests.options(n, dir: dir)
        o.chunkSize = chunk
        return o
    }

    /// A server that closes every connection: each request opens one, and segget's own count says so.
    @Test func aClosingServersRequestsAreCountedOnBothSides() throws {
        let body = TestFiles.pattern(16 << 20, seed: 3701)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let result = try Download(url: server.url("f", query: "close=1&rate=16m"), options: Self.options(4, dir: dir)).run()
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        let gets = server.requests.filter { $0.method == "GET" && $0.path == "/f" }
        #expect(result.tally.requests == gets.count, "\(result.tally) against \(gets.count) requests")
        #expect(result.tally.connections == server.connectionsAccepted, "\(result.tally) against \(server.connectionsAccepted) connections")
        #expect(gets.count == server.connectionsAccepted, "one connection per request")
        // Every byte of a fresh download was received in this run, the probe's first ones included,
        // and no more than the server sent.
        let sent = gets.reduce(Int64(0)) { $0 + Int64($1.bodyBytesSent) }
        #expect(result.receivedBytes >= Int64(body.count) && result.receivedBytes <= sent, "received \(result.receivedBytes), sent \(sent)")
        #expect(gets.count >= 4 && gets.count <= 2 * 4, "\(gets.count) requests")
        #expect(result.tally.refusals == 0)
    }

    /// A host that refuses past 3 in flight and asks for a second: by the server's own clock, no
    /// request reached it before a second had passed since a refusal; the refusals are few, and
    /// segget counted each of them.
    @Test(arguments: ["reject=429&retryafter=1", "reject=429&ratelimit=1&reset=1", "reject=503&retryafter=1"])
    func noRequestComesBeforeTheWaitTheHostNamed(_ variant: String) throws {
        let body = TestFiles.pattern(24 << 20, seed: 3702)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let result = try Download(url: server.url("f", query: "rate=8m&maxconc=3&\(variant)"), options: Self.options(8, dir: dir)).run()
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        let gets = server.requests.filter { $0.method == "GET" && $0.path == "/f" }.sorted { $0.arrivedAt < $1.arrivedAt }
        let refusals = gets.filter { $0.status == 429 || $0.status == 503 }
        // A request the client sent before the refusal could have reached it is not early: the first
        // request of a connection dialled before then (segget sends it as soon as it is connected),
        // or a later request on a kept-alive connection. Each has 50 ms for the server's readings:
        // its single accepting thread stamps a burst of connections one after another, and each
        // connection's thread stamps its request, so under load a connection dialled in the same
        // burst as the refused request was stamped after the refusal (a full run failed so). A
        // request sent against the wait comes later: a slow request's re-dial waits 0.08 s at least.
        var early: [String] = []
        for r in gets {
            let violated = refusals.contains { f in
                guard f.arrivedAt <= r.arrivedAt, r.arrivedAt < f.arrivedAt + 1 - 0.01, f != r else { return false }
                let sent = r.indexOnConnection == 0 ? r.connectionAcceptedAt : r.arrivedAt
                return sent >= f.arrivedAt + 0.05
            }
            if violated {
                early.append("\(r.remotePort) \(r.headers["range"] ?? "-") \(r.status) #\(r.indexOnConnection) \(String(format: "%.3f", r.arrivedAt - (refusals.first?.arrivedAt ?? 0))) s after the first refusal")
            }
        }
        #expect(early.isEmpty, "\(variant): requests before the host's second was over: \(early)")
        #expect(!refusals.isEmpty && refusals.count <= 8, "\(variant): \(refusals.count) refusals")
        #expect(result.tally.refusals == refusals.count, "\(variant): \(result.tally) against \(refusals.count)")
        #expect(server.concurrency.maxInFlight <= 3)
    }

    /// Through the binary, as a user meets it: an origin that answers one request at a time after
    /// 0.2 s, kept alive or closing. One request for the whole file, said by `--json` and seen by
    /// the server.
    @Test(arguments: ["workers=1&firstbyte=0.2", "workers=1&firstbyte=0.2&close=1"])
    func anOriginWithOneWorkerGetsOneRequestThroughTheBinary(_ query: String) throws {
        let body = TestFiles.pattern(24 << 20, seed: 3703)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("out.bin")
        let r = try SeggetCLI.run(["--json", "-n", "8", "-o", out, server.url("f", query: query)])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(TestFiles.fileDifference(out, body) == nil)
        let finish = r.stdout.split(separator: "\n").first { $0.contains("\"type\":\"finish\"") }.map(String.init) ?? ""
        #expect(finish.contains("\"requests\":1,") && finish.contains("\"connectionsOpened\":1,") && finish.contains("\"refusals\":0,"), "\(finish)")
        let gets = server.requests.filter { $0.method == "GET" && $0.path == "/f" }
        #expect(gets.count == 1, "\(gets)")
        let summary = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        #expect(summary.contains("\"type\":\"summary\"") && summary.contains("\"requests\":1,"), "\(summary)")
        // The human finish line says so too, not the 8 connections asked for.
        let human = try SeggetCLI.run(["--force", "-n", "8", "-o", out, server.url("f", query: query)])
        #expect(human.exitCode == 0, "\(human.stderr)")
        #expect(human.stderr.contains("average, 1 connection of 8"), "\(human.stderr)")
    }

    /// A host that serves 3 requests at once and refuses the rest: the human finish line names the
    /// connections it served at once, not the 8 asked for nor the requests that went out over time
    /// (it said "10 connections of 16" of such a host).
    @Test func theFinishLineCountsTheConnectionsAHostServedAtOnce() throws {
        let body = TestFiles.pattern(12 << 20, seed: 3704)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("out.bin")
        let r = try SeggetCLI.run(["-n", "8", "-o", out, server.url("f", query: "maxconc=3&retryafter=1&rate=4m")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(TestFiles.fileDifference(out, body) == nil)
        let line = r.stderr.split(separator: "\n").first { $0.contains("segget: saved") }.map(String.init) ?? ""
        let used = line.firstMatch(of: /average, (\d+) connections? of 8/).flatMap { Int($0.1) }
        #expect(used.map { (1...3).contains($0) } == true, "\(line)")
        // And --json's finish event, the same number.
        let json = try SeggetCLI.run(["--json", "--force", "-n", "8", "-o", out, server.url("f", query: "maxconc=3&retryafter=1&rate=4m")])
        let finish = json.stdout.split(separator: "\n").first { $0.contains("\"type\":\"finish\"") }.map(String.init) ?? ""
        let served = finish.firstMatch(of: /"servedAtOnce":(\d+)/).flatMap { Int($0.1) }
        #expect(served.map { (1...3).contains($0) } == true, "\(finish)")
        #expect(server.concurrency.maxInFlight <= 3)
    }
}
