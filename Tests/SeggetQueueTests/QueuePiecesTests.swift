import Segget
import SeggetTestServer
import SeggetVerify
import Testing

@testable import SeggetQueue

/// A Metalink task's piece hashes live in the queue's database: a restarted daemon checks every
/// piece as the first did.
@Suite(.serialized) struct QueuePiecesTests {
    static func pieces(of bytes: [UInt8], length: Int) -> PieceHashes {
        var digests: [UInt8] = []
        var at = 0
        while at < bytes.count {
            let d = Digester(.sha256)
            d.update(Array(bytes[at..<min(at + length, bytes.count)]))
            digests += d.finalize()
            at += length
        }
        return PieceHashes(algorithm: .sha256, length: Int64(length), digests: digests)!
    }

    @Test func piecesSurviveARestartAndStillCatchABadServer() async throws {
        let dir = try QueueTempDir()
        let good = QueueTestFiles.randomBytes(2 << 20, seed: 90)
        var bad = good
        bad[1_500_000] ^= 0x01
        let server = try QueueIntegrationTests.server(["good.bin": good, "bad.bin": bad])
        defer { server.stop() }
        let db = dir.path("q.sqlite")
        let settings = QueueSettings(downloadRoot: dir.path("root"))
        let hashes = Self.pieces(of: good, length: 256 << 10)
        var ids: [TaskID] = []
        do {
            // Added paused and never started: only the database carries the pieces to the next open.
            let queue = try DownloadQueue(databasePath: db, settings: settings)
            for name in ["good.bin", "bad.bin"] {
                ids.append(try queue.add(urls: [server.url(name)], options: TaskOptions(), paused: true, pieces: hashes))
            }
            await queue.shutdown()
        }
        let stored = try TaskStore(path: db).loadAll().records
        #expect(stored.count == 2 && stored.allSatisfy { $0.pieces == hashes })
        let queue = try DownloadQueue(databasePath: db, settings: settings)
        queue.start()
        for id in ids { try queue.resume(id) }
        #expect(
            await eventually(timeout: 60) {
                queue.snapshot(ids[0])?.status == .complete && queue.snapshot(ids[1])?.status == .error
            })
        #expect(QueueTestFiles.read(try #require(queue.snapshot(ids[0])?.path)) == good)
        // The altered byte fails its piece: no other server has it, so the task stops as a
        // verification failure (aria2's code 32), with no file under its name.
        #expect(queue.snapshot(ids[1])?.failure == .verification, "\(String(describing: queue.snapshot(ids[1])))")
        await queue.shutdown()
    }
}
