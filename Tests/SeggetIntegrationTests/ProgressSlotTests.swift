import Glibc
import Synchronization
import SeggetJournal
import SeggetTestServer
import Testing

@testable import Segget

/// The per-connection progress slots beside the journal: a rerun continues inside the chunks an
/// interrupted run was writing, instead of fetching those chunks again from their start.
@Suite(.serialized) struct ProgressSlotTests {
    static let chunk: Int64 = 64 * 1024

    func header(total: Int64, createdAt: Int64 = 1) -> JournalHeader {
        JournalHeader(url: "http://h/f", finalURL: "http://h/f", totalLength: total, chunkSize: Self.chunk,
                      etag: "\"e\"", lastModified: nil, bootID: "b", createdAt: createdAt)
    }

    @Test func slotsRoundTripAndRejectForeignOrOutOfChunkValues() throws {
        let dir = try TempDir()
        let path = dir.path("p")
        let plan = ChunkPlan(totalLength: 10 * Self.chunk, chunkSize: Self.chunk)
        let slots = try ProgressSlots.create(path: path, journal: header(total: plan.totalLength))
        try slots.record(slot: 0, chunk: 3, upTo: 3 * Self.chunk + 100, crc: 0xDEAD_BEEF)
        try slots.record(slot: 1, chunk: 5, upTo: 5 * Self.chunk, crc: 1)  // nothing written yet: ignored
        try slots.record(slot: 2, chunk: 6, upTo: 8 * Self.chunk, crc: 2)  // outside its chunk: ignored
        try slots.record(slot: 127, chunk: 9, upTo: 9 * Self.chunk + 1, crc: 0x0102_0304)
        slots.close()
        #expect(TestFiles.mode(path) == 0o600)
        let expected: [Int: PartialChunk] = [
            3: PartialChunk(upTo: 3 * Self.chunk + 100, crc: 0xDEAD_BEEF),
            9: PartialChunk(upTo: 9 * Self.chunk + 1, crc: 0x0102_0304),
        ]
        #expect(ProgressSlots.read(path: path, journal: header(total: plan.totalLength), plan: plan) == expected)
        // Bound to its journal: another journal (other creation time) sees nothing.
        #expect(ProgressSlots.read(path: path, journal: header(total: plan.totalLength, createdAt: 2), plan: plan).isEmpty)
        // A damaged or missing file sees nothing either.
        try TestFiles.truncate(path, to: 40)
        #expect(ProgressSlots.read(path: path, journal: header(total: plan.totalLength), plan: plan).isEmpty)
        #expect(ProgressSlots.read(path: dir.path("missing"), journal: header(total: plan.totalLength), plan: plan).isEmpty)
    }

    /// 4 connections and chunks of 1 MiB into `dir/out.bin`: with a server that sends 1 MiB/s a
    /// connection, connections are well inside a chunk when stopped.
    static func bigChunks(into dir: TempDir) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = 4
        o.chunkSize = 1 << 20
        o.outputPath = dir.path("out.bin")
        return o
    }

    @Test func rerunContinuesInsidePartlyWrittenChunks() throws {
        let body = TestFiles.pattern(8 << 20, seed: 77)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let o = Self.bigChunks(into: dir)
        let url = server.url("f", query: "rate=1m")
        let stop = InterruptFlag()
        let first = Result { () throws(SeggetError) -> DownloadResult in
            try Download(url: url, options: o).run(progress: { p in if p.completedBytes > 3 << 20 { stop.set() } }, interrupt: stop)
        }
        guard case .failure(let e) = first, e.kind == .interrupted else {
            Issue.record("the first run was not interrupted: \(first)")
            return
        }
        #expect(TestFiles.exists(dir.path("out.bin.segget-progress")))
        // What chunk-level resume alone would fetch again: every chunk the journal does not mark.
        let (journal, trusted) = try Journal.open(path: dir.path("out.bin.segget-journal"), currentBootID: Journal.currentBootID())
        journal.close()
        let unfinished = Int64(trusted.count - trusted.setCount) * (1 << 20)
        let kept = try LeftBehind.partlyWrittenBytes(
            journal: dir.path("out.bin.segget-journal"), progress: dir.path("out.bin.segget-progress"),
            total: Int64(body.count), chunkSize: 1 << 20)
        #expect(kept > 0)
        server.resetCounters()
        let completed = Mutex<[Int64]>([])
        let result = try Download(url: url, options: o).run(progress: { p in completed.withLock { $0.append(p.completedBytes) } })
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        // What the rerun reports: the kept parts are resumed, not fetched; the progress starts
        // with them and never goes back.
        let resumed = Int64(body.count) - unfinished + kept
        #expect(result.resumedBytes == resumed)
        let seen = completed.withLock { $0 }
        #expect(!seen.isEmpty && seen.allSatisfy { $0 >= resumed } && seen == seen.sorted(), "\(seen)")
        // What came beyond what the file lacked (the probe's byte among it) is counted as fetched twice.
        #expect(result.receivedBytes - result.tally.refetchedBytes == Int64(body.count) - resumed,
                "received \(result.receivedBytes), fetched twice \(result.tally.refetchedBytes), resumed \(resumed)")
        let ranged = server.requests.filter { $0.status == 206 && ($0.headers["range"] ?? "") != "bytes=0-0" }
        let midChunk = ranged.filter { r in
            guard let v = r.headers["range"], let dash = v.firstIndex(of: "-"), let start = Int64(v.dropFirst(6)[..<dash])
            else { return false }
            return start % (1 << 20) != 0
        }
        #expect(!midChunk.isEmpty, "no range started inside a chunk: \(ranged.map { $0.headers["range"] ?? "" })")
        #expect(server.bodyBytesSent < unfinished, "sent \(server.bodyBytesSent), chunk-level resume needs \(unfinished): \(server.requests.map { "\($0.headers["range"] ?? "") \($0.bodyBytesSent)" })")
        #expect(!TestFiles.exists(dir.path("out.bin.segget-progress")))
    }

    /// An interruption reports as saved what the rerun keeps, partly written chunks included. A
    /// rerun with fewer connections than the run before, interrupted before it continued every
    /// partly written chunk, keeps the ones it did not continue (the slots are by connection, and
    /// the progress file is new each run).
    @Test func savedIsWhatTheRerunKeepsAndFewerConnectionsLoseNothing() throws {
        let body = TestFiles.pattern(8 << 20, seed: 78)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.bigChunks(into: dir)
        let url = server.url("f", query: "rate=1m")

        /// Runs until `stopAt(first progress, this progress)` says so; the interruption's message
        /// and the bytes in the file at the first progress report (what the run started from).
        func interrupted(_ o: DownloadOptions, stopAt: @escaping @Sendable (Int64, Int64) -> Bool) -> (message: String, startedFrom: Int64)? {
            let stop = InterruptFlag()
            let first = Mutex<Int64?>(nil)
            let run = Result { () throws(SeggetError) -> DownloadResult in
                try Download(url: url, options: o).run(progress: { p in
                    let from = first.withLock { f in
                        if f == nil { f = p.completedBytes }
                        return f!
                    }
                    if stopAt(from, p.completedBytes) { stop.set() }
                }, interrupt: stop)
            }
            guard case .failure(let e) = run, e.kind == .interrupted else {
                Issue.record("the run was not interrupted: \(run)")
                return nil
            }
            return (e.message, first.withLock { $0 } ?? -1)
        }
        func saved(_ message: String) -> Substring? {
            guard let a = message.range(of: "interrupted with "), let b = message.range(of: " of 8.0 MiB saved") else { return nil }
            return message[a.upperBound..<b.lowerBound]
        }

        // Four connections, stopped a quarter in: each is inside a chunk of 1 MiB.
        guard let one = interrupted(o, stopAt: { _, done in done > 2 << 20 }) else { return }
        // One connection, stopped at its first progress report: it continues at most one of them.
        o.connections = 1
        guard let two = interrupted(o, stopAt: { _, _ in true }) else { return }
        #expect(saved(one.message) == Substring(Format.bytes(two.startedFrom)), "\(one.message) / the next run started from \(two.startedFrom)")
        #expect(two.startedFrom > 2 << 20, "\(two.startedFrom)")

        o.connections = 4
        server.resetCounters()
        let result = try Download(url: url, options: o).run()
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(result.resumedBytes >= two.startedFrom, "resumed \(result.resumedBytes), the run before started from \(two.startedFrom)")
        #expect(saved(two.message) == Substring(Format.bytes(result.resumedBytes)), "\(two.message) / resumed \(result.resumedBytes)")
        #expect(server.bodyBytesSent <= Int64(body.count) - two.startedFrom + (1 << 16), "sent \(server.bodyBytesSent)")
    }
}
