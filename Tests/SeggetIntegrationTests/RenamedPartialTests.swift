import Segget
import SeggetTestServer
import Testing

#if canImport(Glibc)
import Glibc
#endif

// A server that names the file (`Content-Disposition`) otherwise in every answer: a date, a build
// number or a request id in the name. An interrupted download is continued under the new name, and
// no side file of the old name stays behind; a partial download of another URL is left alone.

private final class RenamingFixture: @unchecked Sendable {
    let server: TestServer
    let dir: TempDir
    private(set) var bytes: [UInt8]
    static let size = 3 * 1024 * 1024 + 777

    init() throws {
        bytes = TestFiles.pattern(Self.size, seed: 41)
        server = try TestServer()
        server.addResource(name: "file.bin", bytes: bytes, etag: "\"v1\"")
        server.addResource(name: "other.bin", bytes: TestFiles.pattern(Self.size, seed: 42), etag: "\"o1\"")
        try server.start()
        dir = try TempDir(prefix: "segget-renamed")
    }

    deinit { server.stop() }

    /// `report-N.bin`, N the request's number (per URL) on the server.
    func url(_ name: String = "file.bin", stem: String = "report") -> String {
        server.url(name, mode: .disposition, query: "cd=attachment%3B%20filename%3D\(stem)-%7Bn%7D.bin&rate=768k")
    }

    func options() -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = 4
        o.chunkSize = 64 * 1024
        o.directory = dir.path
        o.retryWait = 0.05
        return o
    }

    func replace(with newBytes: [UInt8], etag: String) {
        bytes = newBytes
        server.replaceResource(name: "file.bin", bytes: newBytes, etag: etag, lastModified: nil)
    }

    /// Stops the download of `url` once 40 % of it is in; returns the names the run left.
    func interrupted(_ url: String) async throws -> [String] {
        let flag = InterruptFlag()
        let download = Download(url: url, options: options())
        let outcome = try await blocking { () -> SeggetError? in
            do {
                _ = try download.run(
                    progress: { p in if p.completedBytes >= Int64(Self.size) * 2 / 5 { flag.set() } }, interrupt: flag)
                return nil
            } catch let e as SeggetError {
                return e
            } catch {
                return SeggetError(.internalError, "\(error)")
            }
        }
        #expect(outcome?.kind == .interrupted, "\(String(describing: outcome))")
        try await Task.sleep(for: .milliseconds(150))
        return names()
    }

    func complete(_ url: String) async throws -> (result: DownloadResult, log: EventLog, sent: Int64) {
        server.resetCounters()
        let log = EventLog()
        let download = Download(url: url, options: options())
        let result = try await blocking { try download.run(events: { log.append($0) }) }
        return (result, log, server.bodyBytesSent)
    }

    func names() -> [String] { dir.names() }
}

@Suite("A partial download under a name the server no longer gives", .serialized)
struct RenamedPartialTests {
    @Test("continued under the server's new name, the old name's side files gone")
    func continuedUnderTheNewName() async throws {
        let f = try RenamingFixture()
        let left = try await f.interrupted(f.url())
        #expect(left.contains("report-1.bin.segget-part"), "\(left)")
        #expect(left.contains("report-1.bin.segget-journal"), "\(left)")

        let (result, log, sent) = try await f.complete(f.url())
        let name = String(result.path.split(separator: "/").last ?? "")
        #expect(name.hasPrefix("report-") && name != "report-1.bin", "\(result.path)")
        #expect(TestFiles.fileDifference(result.path, f.bytes) == nil)
        #expect(result.resumedBytes >= Int64(RenamingFixture.size) / 4, "resumed \(result.resumedBytes)")
        #expect(sent < Int64(RenamingFixture.size) * 4 / 5, "the server sent \(sent) bytes again")
        #expect(log.hasNotice(containing: "report-1.bin; the server now names the file"), "\(log.notices)")
        #expect(f.names() == [name], "only the file is left: \(f.names())")
    }

    @Test("a file that changed meanwhile starts over in the moved files, nothing of the old name left")
    func aChangedFileStartsOverWithoutLeftovers() async throws {
        let f = try RenamingFixture()
        _ = try await f.interrupted(f.url())
        f.replace(with: TestFiles.pattern(RenamingFixture.size + 5, seed: 43), etag: "\"v2\"")

        let (result, log, _) = try await f.complete(f.url())
        #expect(TestFiles.fileDifference(result.path, f.bytes) == nil)
        #expect(result.resumedBytes == 0)
        #expect(log.hasNotice(containing: "changed size"), "\(log.notices)")
        let name = String(result.path.split(separator: "/").last ?? "")
        #expect(f.names() == [name], "only the new file is left: \(f.names())")
    }

    @Test("another URL's partial download is left as it is")
    func anotherURLsPartialIsLeftAlone() async throws {
        let f = try RenamingFixture()
        let left = try await f.interrupted(f.url())

        let (result, log, _) = try await f.complete(f.url("other.bin", stem: "summary"))
        #expect(result.resumedBytes == 0)
        #expect(!log.hasNotice(containing: "the server now names the file"), "\(log.notices)")
        let name = String(result.path.split(separator: "/").last ?? "")
        #expect(f.names() == (left + [name]).sorted(), "\(f.names())")

        // And the first URL still continues its own.
        let (again, _, _) = try await f.complete(f.url())
        #expect(again.resumedBytes > 0)
        #expect(TestFiles.fileDifference(again.path, f.bytes) == nil)
    }

    @Test("a redirect to another name: continued under it")
    func aRedirectToAnotherNameContinues() async throws {
        let f = try RenamingFixture()
        // One file under many names (a "latest" link that leads to a versioned name); the redirect's
        // request number picks the name, and only the probe passes the redirect.
        for name in ["latest"] + (1...9).map({ "copy-\($0).bin" }) {
            f.server.addResource(name: name, bytes: f.bytes, etag: "\"v1\"")
        }
        let url = f.server.url("latest", mode: .redirect, query: "to=/copy-%7Bn%7D.bin%3Frate%3D768k")
        let left = try await f.interrupted(url)
        #expect(left.contains("copy-1.bin.segget-journal"), "\(left)")

        let (result, log, sent) = try await f.complete(url)
        #expect(result.path.hasSuffix("/copy-2.bin"), "\(result.path)")
        #expect(TestFiles.fileDifference(result.path, f.bytes) == nil)
        #expect(result.resumedBytes >= Int64(RenamingFixture.size) / 4, "resumed \(result.resumedBytes)")
        #expect(sent < Int64(RenamingFixture.size) * 4 / 5, "the server sent \(sent) bytes again")
        #expect(log.hasNotice(containing: "copy-1.bin; the server now names the file"), "\(log.notices)")
        #expect(f.names() == ["copy-2.bin"], "\(f.names())")
    }

    @Test("with -o the name is the user's: nothing is moved")
    func aNameOfTheUsersMovesNothing() async throws {
        let f = try RenamingFixture()
        let left = try await f.interrupted(f.url())
        var o = f.options()
        o.outputPath = f.dir.path("mine.bin")
        o.directory = nil
        let download = Download(url: f.url(), options: o)
        let result = try await blocking { try download.run() }
        #expect(result.resumedBytes == 0)
        #expect(f.names() == (left + ["mine.bin"]).sorted(), "\(f.names())")
    }
}
