import Dispatch
import Foundation
import Glibc
import SeggetTestServer
import Synchronization
import Testing
@testable import Segget

/// A file the probe brings whole, in a loop that serves many downloads (a batch, the daemon): it is
/// created, written and linked on a writer thread, while the steps of other files go on. Serialized:
/// each test holds the two writer threads that every download of the process shares.
@Suite(.serialized) struct WholeSaveTests {
    /// Waits up to `seconds` for `done`.
    func wait(_ seconds: Double, until done: () -> Bool) -> Bool {
        let end = monotonicSeconds() + seconds
        while !done() {
            if monotonicSeconds() > end { return false }
            usleep(5_000)
        }
        return true
    }

    func start(_ url: String, _ options: DownloadOptions, on loop: DownloadLoop) -> LoopOutcome<DownloadResult> {
        let outcome = LoopOutcome<DownloadResult>()
        Download(url: url, options: options).run(on: loop) { result in
            outcome.set(result)
            loop.post {}
        }
        return outcome
    }

    /// Downloads a new file of `size` bytes, which its probe brings whole, on `loop` while both writer
    /// threads are held: the download has its bytes but cannot end and nothing is under its name, and
    /// `isFree` (asked meanwhile) says the thread that ran its steps goes on; once the writers go on,
    /// the file is there, whole, and nothing else is. (With the save on the steps, the download ended
    /// while the writers were held.)
    func checkSavedOnAWriter(on loop: DownloadLoop, size: Int, seed: UInt64, isFree: () -> Bool) throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let body = TestFiles.pattern(size, seed: seed)
        server.addResource(name: "w.bin", bytes: body, etag: "\"w\"")

        let gate = DispatchSemaphore(value: 0)
        let writers = StagedWriter.sharedQueues
        for w in writers { w.async { gate.wait() } }
        var options = DownloadOptions()
        options.outputPath = dir.path("w.bin")
        let outcome = start(server.baseURL + "/w.bin", options, on: loop)
        #expect(wait(5) { server.requests.contains { $0.path.hasSuffix("/w.bin") } })
        usleep(300_000)
        #expect(!outcome.isSet, "the download ended while every writer was held")
        #expect(TestFiles.size(options.outputPath!) == nil)
        #expect(isFree(), "the steps' thread waited for the writers")
        for _ in writers { gate.signal() }
        #expect(wait(5) { outcome.isSet })
        #expect(try outcome.get().bytes == Int64(body.count))
        // What it received is the probe's bytes, all of them (`--json`: received - refetched ==
        // bytes - resumed); it once said 0.
        #expect(try outcome.get().receivedBytes == Int64(body.count))
        #expect(try outcome.get().tally.refetchedBytes == 0)
        #expect(TestFiles.fileDifference(options.outputPath!, body) == nil)
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0 != "w.bin" }
        #expect(left.isEmpty, "\(left)")
    }

    /// The daemon's loop: the steps on a worker of their own, which stays free while the writers hold
    /// the file.
    @Test func aWholeFileIsSavedOnAWriterThreadWhileTheStepsGoOn() throws {
        let loop = try #require(DownloadLoop.onOwnThread())
        try checkSavedOnAWriter(on: loop, size: 100_000, seed: 11) { loop.steps.sync { true } }
    }

    /// A batch's loop: the steps on the loop thread, whole files saved on the writers; the loop thread
    /// goes on with other work while the writers hold the file.
    @Test func aBatchLoopSavesOnAWriterWhileTheLoopGoesOn() throws {
        let loop = DownloadLoop(stepsOnLoop: true, wholeSavesOnWriters: true)
        let stop = Atomic<Bool>(false)
        let stopped = DispatchSemaphore(value: 0)
        Thread {
            loop.run(until: { stop.load(ordering: .acquiring) })
            stopped.signal()
        }.start()
        defer {
            stop.store(true, ordering: .releasing)
            loop.post {}
            stopped.wait()
        }
        try checkSavedOnAWriter(on: loop, size: 90_000, seed: 13) {
            let ran = Atomic<Bool>(false)
            loop.post { ran.store(true, ordering: .releasing) }
            return wait(5) { ran.load(ordering: .acquiring) }
        }
    }

    /// A name already taken: the writer's link refuses it and the usual path runs on the steps queue:
    /// refused without `force` (the file as it was), replaced with it.
    @Test func aTakenNameGoesDownTheUsualPath() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let body = TestFiles.pattern(70_000, seed: 12)
        server.addResource(name: "t.bin", bytes: body, etag: "\"t\"")
        let loop = try #require(DownloadLoop.onOwnThread())
        let path = dir.path("t.bin")
        try TestFiles.write(path, [42])

        var options = DownloadOptions()
        options.outputPath = path
        let refused = start(server.baseURL + "/t.bin", options, on: loop)
        #expect(wait(10) { refused.isSet })
        do {
            _ = try refused.get()
            Issue.record("a taken name was overwritten without force")
        } catch {
            #expect(error.kind == .fileSystem)
            #expect(error.message.contains("already exists"), "\(error.message)")
        }
        #expect(TestFiles.size(path) == 1)

        options.force = true
        let replaced = start(server.baseURL + "/t.bin", options, on: loop)
        #expect(wait(10) { replaced.isSet })
        #expect(try replaced.get().bytes == Int64(body.count))
        #expect(TestFiles.fileDifference(path, body) == nil)
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0 != "t.bin" }
        #expect(left.isEmpty, "\(left)")
    }
}
