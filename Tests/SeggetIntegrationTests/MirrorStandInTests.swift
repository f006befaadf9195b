import Foundation
import Synchronization
import Segget
import SeggetJournal
import SeggetTestServer
import Testing

// `--mirror`s when the main URL fails: the first mirror that answers stands in for it (its answer
// decides what the file is, and the mirrors after it are checked against it). Before, the main
// URL's failure was the download's: exit 3 after its retries with every mirror up.

private func serving(_ files: [String: [UInt8]], port: Int = 0, etag: String? = nil, lastModified: String? = nil) throws -> TestServer {
    let s = try TestServer(port: port)
    for (name, bytes) in files { s.addResource(name: name, bytes: bytes, etag: etag ?? "\"v1-\(bytes.count)\"", lastModified: lastModified) }
    try s.start()
    return s
}

/// 4 connections, chunks of 256 KiB, quick retries.
private func options(mirrors: [String]) -> DownloadOptions {
    var o = DownloadOptions()
    o.connections = 4
    o.chunkSize = 256 << 10
    o.retryWait = 0.05
    o.mirrors = mirrors
    return o
}

/// A dead port for the main URL, a directory, and the main URL (`f.bin` there).
private func partialFromMain(_ body: [UInt8]) throws -> (Int, TempDir, String) {
    let port = try deadPort()
    return (port, try TempDir(prefix: "segget-standin"), "http://127.0.0.1:\(port)/f.bin")
}

/// Serves `body` at `mainURL` (on `port`) for a run into `dir`/f.bin stopped at 3 MiB, and stops.
private func leavePartial(of body: [UInt8], from mainURL: String, port: Int, lastModified: String?, in dir: TempDir) async throws {
    let main = try serving(["f.bin": body], port: port, etag: "\"m1\"", lastModified: lastModified)
    defer { main.stop() }
    var o = options(mirrors: [])
    o.outputPath = dir.path("f.bin")
    let ended = try await interrupted(Download(url: mainURL + "?rate=2m", options: o), atCompleted: 3 << 20)
    #expect(ended?.kind == .interrupted, "\(String(describing: ended))")
}

/// A loopback port nothing listens at (taken and let go).
private func deadPort() throws -> Int {
    let (fd, port) = try loopbackListener()
    close(fd)
    return port
}

@Suite(.serialized) struct MirrorStandInTests {
    /// The main URL refuses connections and the first mirror answers 404: each is named in a notice,
    /// neither is retried, and the second mirror serves the file, saved under the name the main URL's
    /// path gives (not the mirror's), identical. The main URL is not asked again as a mirror.
    @Test func theFirstMirrorThatAnswersStandsInForAMainURLThatFails() throws {
        let body = cliTestBytes(3 << 20, seed: 71)
        let mirrors = try serving(["pub/other-name.bin": body])
        defer { mirrors.stop() }
        let main = "http://127.0.0.1:\(try deadPort())/files/f.bin"
        let missing = mirrors.url("nothing.bin")
        let dir = try CLITempDir()
        let began = Date()
        let run = try SeggetCLI.run(["-n", "4", "-d", dir.path("out"), "--mirror", missing, "--mirror", mirrors.url("pub/other-name.bin"), main])
        #expect(run.exitCode == 0, "\(run.stderr)")
        #expect(fileBytes(dir.path("out/f.bin")) == body)
        #expect(!FileManager.default.fileExists(atPath: dir.path("out/other-name.bin")))
        #expect(run.stderr.contains("the URL \(main) failed ("), "\(run.stderr)")
        #expect(run.stderr.contains("trying the mirror \(missing)"), "\(run.stderr)")
        #expect(run.stderr.contains("the mirror \(missing) failed (") && run.stderr.contains("404"), "\(run.stderr)")
        #expect(Date().timeIntervalSince(began) < 15, "a failed URL's probe was retried: \(run.stderr)")
        #expect(mirrors.requests.filter { $0.path == "/nothing.bin" }.count == 1, "\(mirrors.requests)")
    }

    /// Every mirror failing, the main URL is asked once more with its retries (its first probe had
    /// none), and its failure is the download's (no connection: exit 3), after a notice for each URL.
    /// Without mirrors nothing changes: the main URL's own error, no notice.
    @Test func whenEveryMirrorFailsTheMainURLIsAskedAgain() throws {
        let s = try serving([:])
        defer { s.stop() }
        let dir = try CLITempDir()
        let main = "http://127.0.0.1:\(try deadPort())/f.bin"
        let run = try SeggetCLI.run(["-d", dir.path("out"), "--retries", "1", "--mirror", s.url("gone.bin"), main])
        #expect(run.exitCode == 3, "\(run.stderr)")
        #expect(run.stderr.contains("the URL \(main) failed ("), "\(run.stderr)")
        #expect(run.stderr.contains("the mirror \(s.url("gone.bin")) failed (") && run.stderr.contains("trying the main URL again, with its retries, \(main)."), "\(run.stderr)")
        let alone = try SeggetCLI.run(["-d", dir.path("out"), s.url("gone.bin")])
        #expect(alone.exitCode == 4, "\(alone.stderr)")
        #expect(!alone.stderr.contains("trying the mirror"), "\(alone.stderr)")
    }

    /// A download a mirror stood in for, interrupted, is resumed by the same command once the main
    /// URL is back: under the same name, from the journal (the main URL sends what was missing, not
    /// the whole file), identical. The two servers word the same version's `ETag` their own ways
    /// (the mirror as nginx does, the main URL as Apache does), as servers of copied files do.
    @Test func aStandInsPartialDownloadResumesFromTheMainURL() async throws {
        let body = cliTestBytes(8 << 20, seed: 72)
        let modified = "Tue, 01 Dec 2026 10:00:00 GMT"  // 1796119200 = 0x6b0e9aa0; 8 MiB = 0x800000
        let mirror = try serving(["f.bin": body], etag: "\"6b0e9aa0-800000\"", lastModified: modified)
        defer { mirror.stop() }
        let port = try deadPort()
        let dir = try TempDir(prefix: "segget-standin")
        var o = options(mirrors: [])
        o.directory = dir.path("out")
        o.mirrors = [mirror.url("f.bin", query: "rate=2m")]
        let mainURL = "http://127.0.0.1:\(port)/f.bin"
        let outcome = try await interrupted(Download(url: mainURL, options: o), atCompleted: 3 << 20)
        #expect(outcome?.kind == .interrupted, "\(String(describing: outcome))")
        #expect(!TestFiles.exists(dir.path("out/f.bin")))
        // The download is the main URL's: its journal says so, whichever server stood in.
        let (journal, _) = try Journal.open(path: dir.path("out/f.bin.segget-journal"), currentBootID: Journal.currentBootID())
        #expect(journal.header.url == mainURL)
        journal.close()
        let main = try serving(["f.bin": body], port: port, etag: "\"800000-6618f96e5ca40\"", lastModified: modified)
        defer { main.stop() }
        mirror.resetCounters()
        let log = EventLog()
        let second = Download(url: mainURL, options: o)
        _ = try await blocking { try second.run(events: { log.append($0) }) }
        #expect(fileBytes(dir.path("out/f.bin")) == body)
        let fetched = main.bodyBytesSent + mirror.bodyBytesSent
        #expect(main.bodyBytesSent > 0)
        #expect(!log.hasNotice(containing: "starting over"), "\(log.notices)")
        #expect(fetched < Int64(body.count) - (1 << 20), "the resume fetched \(fetched) bytes of \(body.count)")
    }

    /// A partial download of the main URL's version is never given up for a mirror's: with the main
    /// URL down and the mirror's `Last-Modified` another, the download ends (exit 7) saying what to
    /// do, the partial download kept as it was; with the main URL back it resumes from there.
    @Test func aPartialDownloadOfTheMainURLsVersionIsKept() async throws {
        let body = cliTestBytes(8 << 20, seed: 73)
        let (port, dir, mainURL) = try partialFromMain(body)
        let modified = "Tue, 01 Dec 2026 10:00:00 GMT"
        try await leavePartial(of: body, from: mainURL, port: port, lastModified: modified, in: dir)
        var o = options(mirrors: [])
        o.outputPath = dir.path("f.bin")
        o.retries = 1
        let mirror = try serving(["f.bin": body], etag: "\"m1\"", lastModified: "Wed, 02 Dec 2026 08:00:00 GMT")
        defer { mirror.stop() }
        o.mirrors = [mirror.url("f.bin")]
        let part = try #require(fileBytes(dir.path("f.bin.segget-part")))
        let journal = try #require(fileBytes(dir.path("f.bin.segget-journal")))
        let second = Download(url: mainURL + "?rate=2m", options: o)
        let log = EventLog()
        let refused = try await failure(of: second, events: { log.append($0) })
        // The mirror could not continue it; the main URL, asked once more, is still down: its error.
        #expect(refused?.kind == .network, "\(String(describing: refused))")
        #expect(log.hasNotice(containing: "standing in for the main URL, sends another ETag or Last-Modified than the partial download's, so it cannot continue the partial download"), "\(log.notices)")
        #expect(fileBytes(dir.path("f.bin.segget-part")) == part && fileBytes(dir.path("f.bin.segget-journal")) == journal)
        #expect(!TestFiles.exists(dir.path("f.bin")))
        let main = try serving(["f.bin": body], port: port, etag: "\"m1\"", lastModified: modified)
        defer { main.stop() }
        let third = Download(url: mainURL + "?rate=2m", options: o)
        _ = try await blocking { try third.run() }
        #expect(fileBytes(dir.path("f.bin")) == body)
        #expect(main.bodyBytesSent < Int64(body.count) - (1 << 20), "the resume fetched \(main.bodyBytesSent) bytes")
    }

    /// A fetch that fails on the way (the main URL gone after 2 MiB, the mirror dropped as another
    /// version) is the download's failure, its journal kept for a rerun: no mirror stands in for it.
    @Test func aFetchThatFailsOnTheWayIsNotHandedToAMirror() async throws {
        let body = cliTestBytes(8 << 20, seed: 74)
        let main = try serving(["f.bin": body], etag: "\"a\"")
        let mirror = try serving(["f.bin": body], etag: "\"b\"")
        defer { main.stop(); mirror.stop() }
        let dir = try TempDir(prefix: "segget-standin")
        var o = options(mirrors: [mirror.url("f.bin")])
        o.outputPath = dir.path("f.bin")
        o.retries = 1
        let stopped = Mutex(false)
        let log = EventLog()
        let download = Download(url: main.url("f.bin", query: "rate=2m"), options: o)
        let outcome = try await failure(of: download, progress: { p in
            guard p.completedBytes >= 2 << 20, !stopped.withLock({ let was = $0; $0 = true; return was }) else { return }
            DispatchQueue.global().async { main.stop() }
        }, events: { log.append($0) })
        #expect(outcome?.kind == .network, "\(String(describing: outcome))")
        #expect(!log.hasNotice(containing: "trying the mirror"), "\(log.notices)")
        #expect(TestFiles.exists(dir.path("f.bin.segget-journal")) && !TestFiles.exists(dir.path("f.bin")))
    }

    /// A stand-in that does not serve ranges cannot continue the main URL's partial download: it is
    /// kept (before this was mended, it was deleted and the file fetched whole from that mirror), and
    /// the next mirror, serving the same version, continues it.
    @Test func aStandInWithoutRangesLeavesThePartialDownloadToTheNextMirror() async throws {
        let body = cliTestBytes(8 << 20, seed: 75)
        let (port, dir, mainURL) = try partialFromMain(body)
        try await leavePartial(of: body, from: mainURL, port: port, lastModified: nil, in: dir)
        var o = options(mirrors: [])
        o.outputPath = dir.path("f.bin")
        o.retries = 1
        let noRanges = try serving(["f.bin": body], etag: "\"m1\"")
        let mirrors = try serving(["f.bin": body], etag: "\"m1\"")
        defer { noRanges.stop(); mirrors.stop() }
        o.mirrors = [noRanges.url("f.bin", mode: .noranges), mirrors.url("f.bin")]
        let log = EventLog()
        let second = Download(url: mainURL, options: o)
        _ = try await blocking { try second.run(events: { log.append($0) }) }
        #expect(fileBytes(dir.path("f.bin")) == body)
        #expect(log.hasNotice(containing: "does not serve byte ranges, so it cannot continue the partial download"), "\(log.notices)")
        #expect(!log.hasNotice(containing: "starting over"), "\(log.notices)")
        #expect(mirrors.bodyBytesSent < Int64(body.count) - (1 << 20), "\(mirrors.bodyBytesSent) bytes fetched again")
    }

    /// A mirror standing in on another host gets none of the main URL's credentials, neither in its
    /// probe nor in its ranges (as a mirror does); one on the main URL's host gets them.
    @Test func aStandInOnAnotherHostGetsNoCredentials() async throws {
        let body = cliTestBytes(2 << 20, seed: 76)
        let other = try TestServer(host: "127.0.0.2")
        other.addResource(name: "f.bin", bytes: body, etag: "\"v1\"")
        try other.start()
        let same = try serving(["f.bin": body])
        defer { other.stop(); same.stop() }
        let mainURL = "http://127.0.0.1:\(try deadPort())/f.bin"
        for (mirror, expected) in [(other, nil), (same, "Bearer stand-in-secret")] as [(TestServer, String?)] {
            let dir = try TempDir(prefix: "segget-standin")
            var o = options(mirrors: [mirror.url("f.bin")])
            o.outputPath = dir.path("f.bin")
            o.transfer.headers = ["Authorization: Bearer stand-in-secret"]
            let download = Download(url: mainURL, options: o)
            _ = try await blocking { try download.run() }
            #expect(fileBytes(dir.path("f.bin")) == body)
            #expect(mirror.requests.count > 1, "\(mirror.requests)")
            #expect(mirror.requests.allSatisfy { $0.headers["authorization"] == expected }, "\(mirror.requests.map { $0.headers["authorization"] ?? "-" })")
        }
    }

    /// A file the main URL's run finished is not offered to a stand-in of another length (before,
    /// "pass --force" would have replaced it with the mirror's): the refusal names the mirror, the
    /// main URL is asked once more (still down: exit 3), and the file is untouched.
    @Test func aFinishedFileIsNotOfferedToAStandInOfAnotherLength() throws {
        let body = cliTestBytes(1 << 20, seed: 77)
        let port = try deadPort()
        let mainURL = "http://127.0.0.1:\(port)/f.bin"
        let dir = try CLITempDir()
        let out = dir.path("f.bin")
        do {
            let main = try serving(["f.bin": body], port: port)
            defer { main.stop() }
            let first = try SeggetCLI.run(["-q", "-o", out, mainURL])
            #expect(first.exitCode == 0, "\(first.stderr)")
        }
        let mirror = try serving(["f.bin": Array(body.dropLast(5))])
        defer { mirror.stop() }
        let run = try SeggetCLI.run(["--retries", "1", "-o", out, "--mirror", mirror.url("f.bin"), mainURL])
        #expect(run.exitCode == 3, "\(run.stderr)")
        #expect(run.stderr.contains("standing in for the main URL, serves \(body.count - 5) bytes where the file"), "\(run.stderr)")
        #expect(run.stderr.contains("pass --force to replace it with the mirror's"), "\(run.stderr)")
        #expect(fileBytes(out) == body)
    }

    /// A stand-in whose file changes on the way would start over: the partial download, the main
    /// URL's bytes in it, is kept instead, and the main URL asked once more (still down: its error).
    @Test func aStandInWhoseFileChangesOnTheWayKeepsThePartialDownload() async throws {
        let body = cliTestBytes(8 << 20, seed: 78)
        let (port, dir, mainURL) = try partialFromMain(body)
        try await leavePartial(of: body, from: mainURL, port: port, lastModified: nil, in: dir)
        // From its second request on it serves a second version (other bytes and ETag): the probe
        // agrees, the ranges after it do not.
        let mirror = try serving(["f.bin": body], etag: "\"m1\"")
        defer { mirror.stop() }
        var o = options(mirrors: [mirror.url("f.bin", mode: .changing, query: "after=2")])
        o.outputPath = dir.path("f.bin")
        o.retries = 1
        let log = EventLog()
        let download = Download(url: mainURL, options: o)
        let outcome = try await failure(of: download, events: { log.append($0) })
        #expect(outcome?.kind == .network, "\(String(describing: outcome))")
        // Seen as a changed file, or (its `If-Range` no longer matching) as ranges no longer honoured.
        #expect(log.hasNotice(containing: "standing in for the main URL, changed its file during the download")
            || log.hasNotice(containing: "standing in for the main URL, stopped honouring byte ranges"), "\(log.notices)")
        #expect(TestFiles.exists(dir.path("f.bin.segget-journal")) && !TestFiles.exists(dir.path("f.bin")))
    }

    /// A stand-in that redirects (a mirror's redirector) is not probed again as a mirror of itself: its
    /// URL is asked once, by its probe, and the ranges go where it led.
    @Test func aStandInThatRedirectsIsNotItsOwnMirror() async throws {
        let body = cliTestBytes(2 << 20, seed: 79)
        let mirror = try serving(["f.bin": body])
        defer { mirror.stop() }
        let dir = try TempDir(prefix: "segget-standin")
        var o = options(mirrors: [mirror.url("f.bin", mode: .redirect)])
        o.outputPath = dir.path("f.bin")
        let download = Download(url: "http://127.0.0.1:\(try deadPort())/f.bin", options: o)
        _ = try await blocking { try download.run() }
        #expect(fileBytes(dir.path("f.bin")) == body)
        let asked = mirror.requests.filter { $0.path.hasPrefix("/redirect/") }
        #expect(asked.count == 1, "\(mirror.requests)")
    }
}
