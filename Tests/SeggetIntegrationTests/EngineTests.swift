import Glibc
import Segget
import SeggetTestServer
import Synchronization
import Testing

/// Downloads through the library against the in-process test server: every size edge for several
/// connection counts, and the server behaviours that must fall back to one stream.
@Suite(.serialized) struct EngineTests {
    static let chunk = 64 * 1024

    static func options(_ n: Int, dir: TempDir, name: String = "out.bin") -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = n
        o.chunkSize = Int64(chunk)
        o.outputPath = dir.path(name)
        o.retryWait = 0.05
        o.retries = 3
        o.checkpointInterval = 0.5
        return o
    }

    static func events() -> (log: EventLog, sink: @Sendable (DownloadEvent) -> Void) {
        let log = EventLog()
        return (log, { log.append($0) })
    }

    @Test(arguments: [1, 3, 8, 32])
    func sizeEdgesAreByteIdentical(_ n: Int) throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let sizes = [0, 1, Self.chunk - 1, Self.chunk, Self.chunk + 1, 5 * Self.chunk + 17, 40 * Self.chunk]
        for (i, size) in sizes.enumerated() {
            let body = TestFiles.pattern(size, seed: UInt64(100 + i))
            server.addResource(name: "f\(i)", bytes: body)
            let dir = try TempDir()
            let result = try Download(url: server.baseURL + "/f\(i)", options: Self.options(n, dir: dir)).run()
            #expect(result.bytes == Int64(size))
            #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil, "size \(size), n \(n)")
            #expect(!TestFiles.exists(dir.path("out.bin.segget-part")))
            #expect(!TestFiles.exists(dir.path("out.bin.segget-journal")))
        }
    }

    @Test func manyConnectionsReallyRunInParallel() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let body = TestFiles.pattern(64 * Self.chunk, seed: 9)
        server.addResource(name: "f", bytes: body)
        let dir = try TempDir()
        // 4 MiB at 1 MiB/s per connection: about half a second, longer than the connections' staggered
        // start (0.1 s), so every connection gets to work.
        _ = try Download(url: server.baseURL + "/f?rate=1m", options: Self.options(8, dir: dir)).run()
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        let ranged = server.requests.filter { $0.status == 206 && $0.path == "/f" }
        // The probe plus one range per connection at least; each from its own TCP connection.
        #expect(ranged.count >= 9)
        #expect(Set(ranged.map(\.remotePort)).count >= 8)
    }

    /// `--max-speed` caps the whole download, not each connection: 6 MiB at 2 MiB/s over 4 (or 1)
    /// unthrottled connections cannot take less than about 3 s (minus the budget's 0.2 MiB burst).
    @Test(arguments: [4, 1])
    func maxSpeedCapsTheWholeDownload(connections: Int) throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let body = TestFiles.pattern(6 << 20, seed: 21)
        server.addResource(name: "f", bytes: body)
        let dir = try TempDir()
        var o = Self.options(connections, dir: dir)
        o.chunkSize = 256 << 10
        o.maxSpeed = 2 << 20
        let started = ContinuousClock.now
        _ = try Download(url: server.baseURL + "/f", options: o).run()
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(seconds >= 2.6, "6 MiB at a 2 MiB/s cap took \(seconds) s")
    }

    @Test(arguments: ["noranges", "range200", "chunked", "close-delimited"])
    func serversWithoutRangesUseOneStream(_ mode: String) throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let body = TestFiles.pattern(10 * Self.chunk + 5, seed: 3)
        server.addResource(name: "f", bytes: body)
        let dir = try TempDir()
        let (log, sink) = Self.events()
        let result = try Download(url: server.baseURL + "/\(mode)/f", options: Self.options(8, dir: dir)).run(events: sink)
        #expect(!result.usedRanges)
        #expect(result.connections == 1)
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(log.notices.contains { $0.contains("one connection") }, "\(log.notices)")
    }

    @Test func emptyResourceOverEveryMode() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        server.addResource(name: "empty", bytes: [])
        for path in ["/empty", "/noranges/empty", "/chunked/empty"] {
            let dir = try TempDir()
            let r = try Download(url: server.baseURL + path, options: Self.options(4, dir: dir)).run()
            #expect(r.bytes == 0)
            #expect(TestFiles.size(dir.path("out.bin")) == 0, "\(path)")
        }
    }

    @Test func followsRedirectsAndUsesFinalName() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let body = TestFiles.pattern(3 * Self.chunk, seed: 4)
        server.addResource(name: "target.iso", bytes: body)
        let dir = try TempDir()
        var o = Self.options(3, dir: dir)
        o.outputPath = nil
        o.directory = dir.path
        let r = try Download(url: server.baseURL + "/redirect/target.iso?hops=3", options: o).run()
        #expect(r.path == dir.path("target.iso"))
        #expect(TestFiles.fileDifference(dir.path("target.iso"), body) == nil)
    }

    @Test func redirectLoopAndForeignSchemesAreRefused() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        server.addResource(name: "f", bytes: [1, 2, 3])
        let dir = try TempDir()
        #expect(throws: SeggetError.self) {
            try Download(url: server.baseURL + "/redirect/f?loop=1", options: Self.options(2, dir: dir)).run()
        }
        for to in ["file:///etc/passwd", "ftp://127.0.0.1/f"] {
            let error = downloadError(server.baseURL + "/redirect/f?to=\(to)", Self.options(2, dir: dir))
            #expect(error?.kind == .protocolViolation, "redirect to \(to)")
            #expect(error?.message.contains("only http and https") == true)
        }
        #expect(!TestFiles.exists(dir.path("out.bin")))
    }

    @Test func notFoundIsAnHTTPStatusError() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let error = downloadError(server.baseURL + "/missing", Self.options(4, dir: dir))
        #expect(error?.kind == .httpStatus)
        #expect(error?.httpStatus == 404)
        #expect(error?.exitCode == 4)
        #expect(!TestFiles.exists(dir.path("out.bin")))
        #expect(!TestFiles.exists(dir.path("out.bin.segget-part")))
    }

    @Test func hostileDispositionNameStaysInsideTheDirectory() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        server.addResource(name: "f", bytes: TestFiles.pattern(1000, seed: 5))
        let dir = try TempDir()
        var o = Self.options(2, dir: dir)
        o.outputPath = nil
        o.directory = dir.path
        let cd = "attachment%3B%20filename%3D%22..%2F..%2Fevil.sh%22"
        let r = try Download(url: server.baseURL + "/disposition/f?cd=\(cd)", options: o).run()
        #expect(r.path == dir.path("evil.sh"))
    }
}

/// Runs a download that is expected to fail and returns its error (nil if it succeeded).
func downloadError(_ url: String, _ options: DownloadOptions, events: (@Sendable (DownloadEvent) -> Void)? = nil) -> SeggetError? {
    let result = Result { () throws(SeggetError) -> DownloadResult in try Download(url: url, options: options).run(events: events) }
    switch result {
    case .success: return nil
    case .failure(let e): return e
    }
}

/// Collects events from the download thread.
final class EventLog: Sendable {
    private let items = Mutex<[DownloadEvent]>([])
    func append(_ e: DownloadEvent) { items.withLock { $0.append(e) } }
    var all: [DownloadEvent] { items.withLock { $0 } }
    var notices: [String] {
        all.compactMap { if case .notice(let t) = $0 { return t } else { return nil } }
    }
    func hasNotice(containing text: String) -> Bool { notices.contains { $0.contains(text) } }
    var retries: Int { all.filter { if case .retry = $0 { return true } else { return false } }.count }
    var redials: Int { all.filter { if case .redial = $0 { return true } else { return false } }.count }
}
