import Testing

@testable import SeggetQueue

@Suite struct ScaleTests {
    /// 1,000 queued tasks: adding them (each committed on its own) and listing them stay cheap.
    @Test func aThousandTasks() throws {
        let dir = try QueueTempDir()
        let queue = try DownloadQueue(
            databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        let t0 = monotonicSeconds()
        for i in 0..<1000 {
            try queue.add(urls: ["http://127.0.0.1:9/file-\(i).bin"], options: TaskOptions(outputName: "f\(i)"))
        }
        let addSeconds = monotonicSeconds() - t0
        var samples: [Double] = []
        for _ in 0..<50 {
            let s = monotonicSeconds()
            let page = queue.waiting(offset: 0, count: 1000)
            samples.append(monotonicSeconds() - s)
            #expect(page.count == 1000)
        }
        samples.sort()
        let median = samples[samples.count / 2] * 1000
        let p99 = samples[samples.count * 99 / 100] * 1000
        print(
            "1000 adds: \(addSeconds) s, each committed with synchronous=FULL; waiting(0, 1000): median \(median) ms, p99 \(p99) ms"
        )
        #expect(median < 250, "listing 1,000 tasks took \(median) ms")
        // Reopening restores all of them in order.
        let reopened = try DownloadQueue(
            databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        #expect(reopened.waiting(offset: 0, count: 1000).map(\.id) == queue.waiting(offset: 0, count: 1000).map(\.id))
    }
}
