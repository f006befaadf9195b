import Glibc
import Segget
import SeggetTestServer
import Testing

@testable import SeggetQueue

/// A running task's `max-download-limit` (aria2's `changeOption`, `TaskOptions.maxSpeed`) takes effect
/// at once, as in aria2 and as the overall limit does: the task's download reads its own live cap.
/// Before, the change was stored and answered "OK" but applied only at the task's next start (found
/// by exploratory testing: 100K asked, 4.19 MB/s kept to the end).
@Suite(.serialized) struct LiveSpeedTests {
    @Test func aRunningTasksSpeedCapChangesAtOnce() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(48 << 20, seed: 97)
        let server = try QueueIntegrationTests.server(["big.bin": bytes])
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        var options = TaskOptions(outputName: "big.bin")
        options.connections = 2
        // 2 × 4 MiB/s: 6 s for the file uncapped.
        let id = try queue.add(urls: [server.url("big.bin", query: "rate=4m")], options: options)
        queue.start()
        #expect(await eventually(timeout: 10) { (queue.snapshot(id)?.completedLength ?? 0) > 2 << 20 })
        options.maxSpeed = 256 << 10
        try queue.changeOptions(id, options)
        // The bytes already asked for and the cap's first burst come in; then 256 KiB/s.
        usleep(500_000)
        let before = queue.snapshot(id)?.completedLength ?? 0
        usleep(2_000_000)
        let after = queue.snapshot(id)?.completedLength ?? 0
        #expect(queue.snapshot(id)?.status == .active)
        #expect(after - before < 1 << 20, "\(after - before) bytes in 2 s under a cap of 256 KiB/s")
        try queue.remove(id, force: true)
        await queue.shutdown()
    }
}
