import Glibc
import SeggetJournal
import SeggetTestServer
import Synchronization
import Testing

@testable import Segget

/// Issue 13: "a stall of the disk must never be mistaken for a slow server". While the writer is
/// behind, the fetch loop waits for it and reads no connection; that time must not count against
/// the connections' rates (or towards the stall timeout).
///
/// A real disk that stalls on cue needs root and changes to the machine (cgroup io.max, dm-delay),
/// so the engine writes here through a `BlockStorage` that is a real file whose writes stop for a
/// while every so often, as when another process floods the disk. The engine, its writer thread
/// and its back-pressure are the real ones (page-cache path: every write goes through the storage).
@Suite(.serialized) struct DiskStallTests {
    /// A file whose writes wait while the "disk" is busy: for `busy` seconds out of every `period`.
    final class StallingDisk: BlockStorage, @unchecked Sendable {
        let file: PosixFile
        let period: Double
        let busy: Double
        let startedAt = nowSeconds()
        private let stalledSeconds = Mutex(0.0)

        init(file: PosixFile, period: Double, busy: Double) {
            self.file = file
            self.period = period
            self.busy = busy
        }

        /// Seconds writes spent waiting for the busy disk.
        var stalled: Double { stalledSeconds.withLock { $0 } }

        func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
            let phase = (nowSeconds() - startedAt).truncatingRemainder(dividingBy: period)
            // Busy at the end of each period, so the download starts on a free disk.
            if phase > period - busy {
                let wait = period - phase
                usleep(UInt32(wait * 1_000_000))
                stalledSeconds.withLock { $0 += wait }
            }
            try file.write(bytes, at: offset)
        }

        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
            try file.read(into: buffer, at: offset)
        }
        func sync() throws(Errno) { try file.sync() }
        func size() throws(Errno) -> Int64 { try file.size() }
        func truncate(to length: Int64) throws(Errno) { try file.truncate(to: length) }
    }

    /// 8 connections at 2 MiB/s each from a healthy server that pays arrears like nginx (48 MiB,
    /// 3 s), onto a disk that stops for 0.4 s of every 0.8 s: the loop waits for the writer again and
    /// again, yet no connection is re-dialled and none is dropped as stalled, and the file is exact.
    @Test func writerStallsAreNotSlowConnections() throws {
        let size = 48 << 20
        let body = TestFiles.pattern(size, seed: 61)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let path = dir.path("out.bin")
        let file = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o600))
        defer { file.close() }
        try file.truncate(to: Int64(size))
        let disk = StallingDisk(file: file, period: 0.8, busy: 0.4)

        var settings = FetchSettings()
        settings.connections = 8
        settings.writePath = .pageCache
        settings.retryWait = 0.05
        settings.transfer.stallTimeout = 2
        let plan = ChunkPlan(totalLength: Int64(size), chunkSize: 1 << 20)
        let target = FetchTarget(url: server.baseURL + "/f?rate=2m&catchup=1", totalLength: Int64(size), ranged: true)
        let loop = DownloadLoop()
        let engine = FetchEngine(target: target, settings: settings, data: disk, journal: nil, plan: plan, isFinished: { _ in false }, interrupt: InterruptFlag(), driver: loop.driver)
        let log = EventLog()
        engine.onEvent = { log.append($0) }
        if let error = loop.run([engine])[0] { throw error }

        #expect(TestFiles.fileDifference(path, body) == nil)
        // The disk did hold the download back (else this tests nothing) ...
        #expect(disk.stalled > 1, "the disk stalled for only \(disk.stalled) s")
        #expect(engine.writer.waitedSeconds > 0.5, "the loop waited for the writer for only \(engine.writer.waitedSeconds) s")
        // ... and no healthy connection was blamed for it.
        #expect(log.redials == 0, "\(log.all)")
        #expect(log.retries == 0, "\(log.all)")
    }
}
