import Foundation
import Glibc
import Synchronization
import SeggetCurl
import SeggetJournal
import SeggetTestServer
import Testing
@testable import Segget

/// `DownloadLoop.run(_:)`: several downloads' engines on the loop's one `TransferDriver` (one multi
/// handle), in one loop on the calling thread, as a batch runs its files.
@Suite struct SharedDriverTests {
    struct Job {
        let body: [UInt8]
        let path: String
        let file: PosixFile
        let engine: FetchEngine
    }

    /// A download of `name` (served in `mode`, none: normally), ranged unless `stream`.
    func job(_ server: TestServer, _ dir: TempDir, name: String, mode: String? = nil, stream: Bool = false, size: Int, seed: Int,
             connections: Int, driver: TransferDriver) throws -> Job {
        let body = TestFiles.pattern(size, seed: UInt64(seed))
        server.addResource(name: name, bytes: body, etag: "\"\(name)\"")
        let path = dir.path(name)
        let file = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o600))
        try file.truncate(to: Int64(size))
        var settings = FetchSettings()
        settings.connections = connections
        settings.writePath = .pageCache
        settings.retryWait = 0.05
        let plan = ChunkPlan(totalLength: Int64(size), chunkSize: 1 << 20)
        let ranged = !stream
        let url = server.baseURL + (mode.map { "/\($0)" } ?? "") + "/\(name)?rate=8m"
        let target = FetchTarget(url: url, totalLength: Int64(size), ranged: ranged, etag: "\"\(name)\"", lastModified: nil,
                                 ifRange: ranged ? "\"\(name)\"" : nil)
        let engine = FetchEngine(
            target: target, settings: settings, data: file, journal: nil, plan: plan, isFinished: { _ in false },
            interrupt: InterruptFlag(), driver: driver)
        return Job(body: body, path: path, file: file, engine: engine)
    }

    @Test func threeDownloadsShareOneDriverAndOneThread() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let loop = DownloadLoop()
        let driver = loop.driver
        let jobs = [
            try job(server, dir, name: "a.bin", size: 12 << 20, seed: 1, connections: 4, driver: driver),
            try job(server, dir, name: "b.bin", size: 5 << 20 + 777, seed: 2, connections: 3, driver: driver),
            try job(server, dir, name: "c.bin", mode: "noranges", stream: true, size: 3 << 20, seed: 3, connections: 1, driver: driver),
        ]
        defer { for j in jobs { j.file.close() } }
        let results = loop.run(jobs.map(\.engine))
        for (j, r) in zip(jobs, results) {
            #expect(r == nil, "\(j.path): \(String(describing: r))")
            #expect(TestFiles.fileDifference(j.path, j.body) == nil, "\(j.path)")
        }
        // Each ran as a ranged download with its connections, or as one stream, on one multi handle.
        #expect(jobs[0].engine.core.ranged != nil && jobs[2].engine.core.ranged == nil)
        #expect(driver.multi.handles.isEmpty)
    }

    @Test func oneDownloadFailingLeavesTheOthersRunning() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let loop = DownloadLoop()
        let driver = loop.driver
        let good = try job(server, dir, name: "good.bin", size: 6 << 20, seed: 4, connections: 4, driver: driver)
        let bad = try job(server, dir, name: "bad.bin", mode: "status", size: 2 << 20, seed: 5, connections: 2, driver: driver)
        defer { good.file.close(); bad.file.close() }
        let results = loop.run([good.engine, bad.engine])
        #expect(results[0] == nil)
        #expect(TestFiles.fileDifference(good.path, good.body) == nil)
        let failure = try #require(results[1] as? SeggetError)
        #expect(failure.kind == .httpStatus)
        #expect(driver.multi.handles.isEmpty)
    }
}

/// `DownloadLoop.post`: work the loop thread posts itself wakes nothing, so the loop must look at its
/// inbox before it waits; an idle loop waits up to a second.
@Suite struct LoopPostTests {
    /// A chain of work, each posting the next from the loop thread, runs at once on an idle loop: it
    /// does not wait for the idle poll's second (10 links would take 10 s).
    @Test func workTheLoopPostsItselfRunsWithoutAWake() throws {
        let loop = DownloadLoop(stepsOnLoop: true)
        let links = Mutex(0)
        let started = monotonicSeconds()
        @Sendable func link() {
            let n = links.withLock { $0 += 1; return $0 }
            if n < 10 { loop.post { link() } }
        }
        // Posted before the loop runs: the first link runs at its first turn, the others are posted by
        // the loop thread, each after the one before.
        loop.post { link() }
        loop.run(until: { links.withLock { $0 } >= 10 })
        #expect(links.withLock { $0 } == 10)
        // Below the one idle poll (1 s) that a single waiting link would cost.
        #expect(monotonicSeconds() - started < 0.9, "a link waited for the idle poll")
    }

    /// Work posted from another thread while the loop waits wakes it.
    @Test func workFromAnotherThreadWakesTheLoop() throws {
        let loop = DownloadLoop(stepsOnLoop: true)
        let ran = Mutex(false)
        // Timed from the post itself, not from the thread's start, which a loaded machine may delay.
        let posted = Mutex(Double.infinity)
        let poster = Thread {
            usleep(100_000)
            posted.withLock { $0 = monotonicSeconds() }
            loop.post { ran.withLock { $0 = true } }
        }
        poster.start()
        loop.run(until: { ran.withLock { $0 } })
        let waited = monotonicSeconds() - posted.withLock { $0 }
        // Below the idle poll's second, which an unwoken loop would wait.
        #expect(waited < 0.8, "the post did not wake the idle loop: \(waited) s")
    }

    /// Work posted without a wake (`post(_:wake: false)`) and then work with one, from another
    /// thread, while the loop waits: the wake is still sent (it is owed to the first work that asked
    /// for one, not to the first in the inbox), and both run, in order.
    @Test func aWakeBehindQuietWorkStillWakesTheLoop() throws {
        let loop = DownloadLoop(stepsOnLoop: true)
        let ran = Mutex<[String]>([])
        let posted = Mutex(Double.infinity)
        let poster = Thread {
            usleep(100_000)
            posted.withLock { $0 = monotonicSeconds() }
            loop.post({ ran.withLock { $0.append("quiet") } }, wake: false)
            loop.post({ ran.withLock { $0.append("woken") } }, wake: true)
        }
        poster.start()
        loop.run(until: { ran.withLock { $0.count } == 2 })
        let waited = monotonicSeconds() - posted.withLock { $0 }
        #expect(ran.withLock { $0 } == ["quiet", "woken"])
        #expect(waited < 0.8, "the wake behind quiet work did not wake the idle loop: \(waited) s")
    }
}
