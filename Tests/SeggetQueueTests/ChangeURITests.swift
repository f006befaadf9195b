import Segget
import Testing

@testable import SeggetQueue

/// aria2's `changeUri` rules on a task's URI list, and the queue's checks around them.
@Suite struct ChangeURITests {
    let a = "https://a.example/f", b = "https://b.example/f", c = "https://c.example/f"

    @Test func eachDeletedURIRemovesOneMatchThenAddsGoToTheEnd() {
        let (urls, deleted) = DownloadQueue.editedURIs([a, b, a], delete: [a, "https://x.example/"], add: [c], position: nil)
        #expect(urls == [b, a, c])
        #expect(deleted == 1)
    }

    @Test func thePositionCountsAfterTheRemovalAndIsClamped() {
        #expect(DownloadQueue.editedURIs([a, b], delete: [a], add: [c], position: 0).urls == [c, b])
        #expect(DownloadQueue.editedURIs([a, b], delete: [], add: [c], position: 1).urls == [a, c, b])
        #expect(DownloadQueue.editedURIs([a, b], delete: [], add: [c], position: 9).urls == [a, b, c])
    }

    @Test func replacingTheOnlyURIKeepsOne() {
        let (urls, deleted) = DownloadQueue.editedURIs([a], delete: [a], add: [b], position: nil)
        #expect(urls == [b] && deleted == 1)
    }

    @Test func aPausedTaskTakesNewURIsThatAreStoredAndRefusesBadOnes() throws {
        let dir = try QueueTempDir()
        let db = dir.path("q.sqlite")
        var id: TaskID
        do {
            let queue = try DownloadQueue(databasePath: db, settings: QueueSettings(downloadRoot: dir.path("root")))
            id = try queue.add(urls: [a], options: TaskOptions(), paused: true)
            let changed = try queue.changeURIs(id, fileIndex: 1, delete: [a], add: [b, c], position: nil)
            #expect(changed.deleted == 1 && changed.added == 2)
            #expect(throws: QueueError.self) { try queue.changeURIs(id, fileIndex: 2, delete: [], add: [a], position: nil) }
            #expect(throws: QueueError.self) { try queue.changeURIs(id, fileIndex: 1, delete: [], add: ["ftp://x/f"], position: nil) }
            #expect(throws: QueueError.self) { try queue.changeURIs(id, fileIndex: 1, delete: [b, c], add: [], position: nil) }
        }
        // Stored: a queue opened again has the new list.
        let reopened = try DownloadQueue(databasePath: db, settings: QueueSettings(downloadRoot: dir.path("root")))
        #expect(reopened.snapshot(id)?.urls == [b, c])
    }
}
