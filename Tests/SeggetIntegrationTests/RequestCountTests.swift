import Foundation
import Segget
import SeggetTestServer
import Testing

/// What segget says it asked (`requests`, `seconds` in `--json`) is what the servers saw and what the
/// run took, also for requests made before the download proper: the first look of a batch at its file
/// when it failed and was retried, and the probes of mirrors, kept or dropped. Before, both were left
/// out (7 reported for 8 served; 8 for 9 with a mirror), and `seconds` was the fetch's alone ("saved
/// in 0.0 s" after 4 s of `Retry-After`).
@Suite(.serialized) struct RequestCountTests {
    static func finish(_ stdout: String) throws -> [String: Any] {
        let line = try #require(stdout.split(separator: "\n").first { $0.contains("\"type\":\"finish\"") })
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test func aFailedFirstLookIsCountedWithItsWait() throws {
        let body = TestFiles.pattern(4 << 20, seed: 95)
        let server = try TestServer()
        server.addResource(name: "f.bin", bytes: body)
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let url = server.url("f.bin", mode: .status, query: "code=503&times=2&retryafter=1")
        let r = try runSegget(args: ["--json", "-n", "4", url, "-o", dir.path("f.bin")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileBytes(dir.path("f.bin")) == body)
        let finish = try Self.finish(r.stdout)
        #expect(finish["requests"] as? Int == server.requests.count, "\(finish) against \(server.requests.map(\.description))")
        // Two waits of the 1 s the host asked for.
        #expect((finish["seconds"] as? Double ?? 0) >= 1.9, "\(finish)")
    }

    /// A download that fails once its fetch ran says what it cost, in its `error` object and in the
    /// summary: its probe's request and every range request of the attempt (both were left out).
    @Test func aFailedDownloadsRequestsAreCounted() throws {
        let body = TestFiles.pattern(4 << 20, seed: 97)
        let server = try TestServer()
        server.addResource(name: "f.bin", bytes: body)
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let url = server.url("f.bin", mode: .stall, query: "after=100000")
        let r = try runSegget(args: ["--json", "-n", "4", "--stall-timeout", "1", "--retries", "0", url, "-o", dir.path("f.bin")])
        #expect(r.exitCode == 3, "\(r.stderr)")
        let lines = try r.stdout.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        let error = try #require(lines.first { $0["type"] as? String == "error" })
        let summary = try #require(lines.last)
        #expect(server.requests.count >= 2, "\(server.requests.map(\.description))")
        #expect(error["requests"] as? Int == server.requests.count, "\(error) against \(server.requests.map(\.description))")
        #expect(summary["requests"] as? Int == server.requests.count, "\(summary)")
        #expect((error["connectionsOpened"] as? Int ?? 0) >= 1, "\(error)")
    }

    /// A download whose digest does not match says what it cost too (the failure comes after the fetch).
    @Test func aDigestMismatchsRequestsAreCounted() throws {
        let body = TestFiles.pattern(4 << 20, seed: 98)
        let server = try TestServer()
        server.addResource(name: "f.bin", bytes: body)
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let wrong = String(repeating: "0", count: 64)
        let r = try runSegget(args: ["--json", "-n", "4", "--checksum", "sha256=\(wrong)", server.url("f.bin"), "-o", dir.path("f.bin")])
        #expect(r.exitCode == 6, "\(r.stderr)")
        let error = try #require(r.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.first { $0["type"] as? String == "error" })
        #expect(error["requests"] as? Int == server.requests.count, "\(error) against \(server.requests.map(\.description))")

        // A file the probe brought whole, its digest checked in memory: the probe's request.
        server.resetCounters()
        let small = TestFiles.pattern(50_000, seed: 99)
        server.addResource(name: "s.bin", bytes: small)
        let r2 = try runSegget(args: ["--json", "--checksum", "sha256=\(wrong)", server.url("s.bin"), "-o", dir.path("s.bin")])
        #expect(r2.exitCode == 6, "\(r2.stderr)")
        let error2 = try #require(r2.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.first { $0["type"] as? String == "error" })
        #expect(error2["requests"] as? Int == server.requests.count, "\(error2) against \(server.requests.map(\.description))")
    }

    /// A file that changes on the server mid-download starts over: the run's `requests` are every
    /// attempt's (the first attempt's were left out: 4 reported of the 7 the server saw), and the bytes the
    /// first attempt received count as received and fetched twice, so `received - refetched` is
    /// still `bytes - resumed`.
    @Test func aRestartsEarlierAttemptIsCounted() throws {
        let body = TestFiles.pattern(8 << 20, seed: 94)
        let server = try TestServer()
        server.addResource(name: "f.bin", bytes: body)
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        // Every answer after the first is of a second version; paced so that the probe's answer does
        // not bring the file before the ranges ask.
        let url = server.url("f.bin", mode: .changing, query: "after=1&rate=4m")
        let r = try runSegget(args: ["--json", "-n", "4", url, "-o", dir.path("f.bin")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileBytes(dir.path("f.bin")) == secondVersion(of: body, length: body.count))
        #expect(r.stdout.contains("changed"), "\(r.stdout)")
        let finish = try Self.finish(r.stdout)
        #expect(finish["requests"] as? Int == server.requests.count, "\(finish) against \(server.requests.map(\.description))")
        let received = try #require(finish["received"] as? Int), refetched = try #require(finish["refetched"] as? Int)
        #expect(received - refetched == body.count - (finish["resumed"] as? Int ?? -1), "\(finish)")
        #expect(refetched > 0, "the first attempt's bytes: \(finish)")
    }

    @Test(arguments: [true, false]) func aMirrorsProbeIsCounted(agrees: Bool) throws {
        let body = TestFiles.pattern(8 << 20, seed: 96)
        let main = try TestServer()
        main.addResource(name: "f.bin", bytes: body, etag: "\"f-1\"")
        try main.start()
        defer { main.stop() }
        let mirror = try TestServer()
        mirror.addResource(name: "f.bin", bytes: body, etag: "\"f-1\"")
        try mirror.start()
        defer { mirror.stop() }
        let dir = try TempDir()
        let mirrorURL = agrees ? mirror.url("f.bin") : mirror.url("f.bin", mode: .status, query: "code=404")
        let r = try runSegget(args: ["--json", "-n", "4", "--mirror", mirrorURL, main.url("f.bin", query: "rate=8m"), "-o", dir.path("f.bin")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileBytes(dir.path("f.bin")) == body)
        let finish = try Self.finish(r.stdout)
        let served = main.requests.count + mirror.requests.count
        #expect(finish["requests"] as? Int == served, "\(finish) against \(main.requests.count) + \(mirror.requests.count)")
    }
}
