import Testing

@testable import SeggetVerify

/// The hasher's bookkeeping without memory, files or threads: which offered bytes are kept, what
/// falls out, what is read back and when, and how the digests move the window.
@Suite struct HashFeedTests {
    /// Hashes everything digest `d` may take now, and says what the feed handed out.
    @discardableResult
    static func hashAll(_ feed: inout HashFeed, digest d: Int = 0, maxBytes: Int = 1 << 30) -> [Range<Int64>] {
        var taken: [Range<Int64>] = []
        while let r = feed.takeHash(d, maxBytes: maxBytes) {
            taken.append(r)
            feed.hashed(d, upTo: r.upperBound)
        }
        return taken
    }

    @Test func bytesOfferedInOrderAreKeptAndHashedFromMemoryWithoutReads() {
        var feed = HashFeed(capacity: 1000, memoryLimit: 1000, digests: 1, minimumStep: 100)
        #expect(feed.offer(0..<60, footprint: 64) == HashFeed.Offer(keep: [0..<60], fellOut: false))
        // Fewer than `minimumStep` bytes ready, and the file does not hold them yet: no step.
        #expect(feed.takeHash(0, maxBytes: 1000) == nil)
        #expect(feed.offer(60..<150, footprint: 96) == HashFeed.Offer(keep: [60..<150], fellOut: false))
        #expect(feed.footprint == 160)
        #expect(feed.takeHash(0, maxBytes: 100) == 0..<100)
        // One step at a time per digest.
        #expect(feed.takeHash(0, maxBytes: 100) == nil)
        #expect(feed.hashed(0, upTo: 100) == 100)
        // 50 bytes left: too few for a step until the file holds them.
        #expect(feed.takeHash(0, maxBytes: 100) == nil)
        feed.advanceFile(to: 150)
        #expect(feed.takeHash(0, maxBytes: 100) == 100..<150)
        feed.hashed(0, upTo: 150)
        #expect(feed.takeRead(maxBytes: 1000) == nil, "nothing is missing: nothing to read")
        feed.returned(footprint: 160)
        feed.end(at: 150)
        #expect(feed.isComplete)
        #expect(feed.fromMemory == 150 && feed.readBack == 0 && feed.fellOut == 0)
        #expect(feed.footprint == 0 && feed.peakFootprint == 160)
    }

    @Test func bytesBeyondTheWindowFallOutAndAreReadBackOnceTheFileHoldsThem() {
        var feed = HashFeed(capacity: 100, memoryLimit: 1000, digests: 1, minimumStep: 1)
        // A connection far ahead: only the part inside [0, 100) is kept.
        #expect(feed.offer(80..<130, footprint: 50) == HashFeed.Offer(keep: [80..<100], fellOut: true))
        #expect(feed.offer(200..<210, footprint: 10) == HashFeed.Offer(keep: [], fellOut: true))
        #expect(feed.fellOut == 40)
        // The head [0, 80) was never offered: it is read back, but only once the file holds it.
        #expect(feed.takeRead(maxBytes: 1000) == nil)
        feed.advanceFile(to: 50)
        #expect(feed.takeRead(maxBytes: 30) == 0..<30)
        #expect(feed.takeRead(maxBytes: 30) == nil, "one read at a time")
        #expect(feed.readEnded(through: 30) == [0..<30])
        #expect(Self.hashAll(&feed) == [0..<30])
        #expect(feed.takeRead(maxBytes: 1000) == 30..<50)
        // A read that got fewer bytes than asked keeps what it got; the rest is read again.
        #expect(feed.readEnded(through: 40) == [30..<40])
        feed.advanceFile(to: 200)
        #expect(feed.takeRead(maxBytes: 1000) == 40..<80, "up to the kept bytes")
        #expect(feed.readEnded(through: 80) == [40..<80])
        #expect(Self.hashAll(&feed) == [30..<100])
        // The window moved on: what fell out is now a hole at its head, read like any other.
        #expect(feed.takeRead(maxBytes: 1000) == 100..<200)
        #expect(feed.readEnded(through: 200) == [100..<200])
        #expect(feed.readBack == 180 && feed.fromMemory == 20)
    }

    @Test func whenTheMemoryIsFullNewBytesFallOutUntilSomeIsReturned() {
        var feed = HashFeed(capacity: 1000, memoryLimit: 100, digests: 1)
        #expect(feed.offer(0..<64, footprint: 64).keep == [0..<64])
        let full = feed.offer(64..<128, footprint: 64)
        #expect(full == HashFeed.Offer(keep: [], fellOut: true), "the buffer would take the memory beyond its limit")
        #expect(feed.fellOut == 64)
        feed.returned(footprint: 64)
        #expect(feed.offer(128..<192, footprint: 64).keep == [128..<192])
    }

    @Test func duplicatesAreKeptOnceAndBytesAlreadyHashedAreNotNeeded() {
        var feed = HashFeed(capacity: 1000, memoryLimit: 1000, digests: 1, minimumStep: 1)
        #expect(feed.offer(10..<20, footprint: 10).keep == [10..<20])
        #expect(feed.offer(30..<40, footprint: 10).keep == [30..<40])
        // An end-game race delivers bytes twice: only what is not held yet is kept.
        #expect(feed.offer(0..<50, footprint: 50).keep == [0..<10, 20..<30, 40..<50])
        Self.hashAll(&feed)
        #expect(feed.hashed == 50)
        #expect(feed.offer(0..<50, footprint: 50) == HashFeed.Offer(keep: [], fellOut: false))
        // Bytes offered while a read of them runs are kept; the read keeps only the rest.
        feed.advanceFile(to: 100)
        #expect(feed.takeRead(maxBytes: 1000) == 50..<100)
        #expect(feed.offer(60..<70, footprint: 10).keep == [60..<70])
        #expect(feed.readEnded(through: 100) == [50..<60, 70..<100])
        #expect(Self.hashAll(&feed) == [50..<100])
        #expect(feed.fromMemory == 60 && feed.readBack == 50)
    }

    /// A resumed download: its kept part is on disk from the start, and the fetched bytes arrive
    /// behind it. The hash reads the kept part while the first fetched bytes fall out (too far
    /// ahead), and once it caught up, takes the fetched bytes from memory.
    @Test func aResumedDownloadReadsItsKeptPartThenSwitchesToMemory() {
        var feed = HashFeed(capacity: 100, memoryLimit: 100, digests: 1, minimumStep: 1)
        feed.advanceFile(to: 300)  // chunks 0..<300 were kept from an earlier run
        // The fetch of 300..<400 starts at once; the hash has not read anything yet.
        #expect(feed.offer(300..<320, footprint: 20) == HashFeed.Offer(keep: [], fellOut: true))
        var position: Int64 = 320
        var readRanges: [Range<Int64>] = []
        while feed.hashed < 300 {
            let r = feed.takeRead(maxBytes: 40)!
            readRanges.append(r)
            #expect(feed.readEnded(through: r.upperBound) == [r])
            Self.hashAll(&feed)
            // Meanwhile the network delivers 10 bytes.
            _ = feed.offer(position..<(position + 10), footprint: 10)
            feed.advanceFile(to: position + 10)
            position += 10
        }
        #expect(readRanges.first == 0..<40)
        // What fell out while the kept part was hashed is read back too; everything after is memory.
        while let r = feed.takeRead(maxBytes: 40) {
            #expect(r.upperBound <= 400)
            _ = feed.readEnded(through: r.upperBound)
            Self.hashAll(&feed)
        }
        let readSoFar = feed.readBack
        for start in stride(from: position, to: 600, by: 10) {
            #expect(feed.offer(start..<(start + 10), footprint: 10).keep == [start..<(start + 10)])
            Self.hashAll(&feed)
            feed.returned(footprint: 10)
        }
        #expect(feed.hashed == 600)
        #expect(feed.readBack == readSoFar, "from memory once the hash caught up")
        #expect(feed.fromMemory >= 600 - position)
    }

    @Test func twoDigestsHashApartAndBytesGoOnlyOnceBothPassedThem() {
        var feed = HashFeed(capacity: 1000, memoryLimit: 1000, digests: 2, minimumStep: 1)
        _ = feed.offer(0..<100, footprint: 100)
        let a = feed.takeHash(0, maxBytes: 60)
        let b = feed.takeHash(1, maxBytes: 30)
        #expect(a == 0..<60 && b == 0..<30, "both digests run at once")
        #expect(feed.hashed(0, upTo: 60) == 0, "the other digest has not hashed anything yet")
        #expect(feed.hashed(1, upTo: 30) == 30)
        #expect(feed.takeHash(0, maxBytes: 1000) == 60..<100)
        #expect(feed.takeHash(1, maxBytes: 1000) == 30..<100)
        feed.hashed(0, upTo: 100)
        #expect(feed.hashed(1, upTo: 100) == 100)
    }

    @Test func theLengthEndsTheLastStepAndCompletesTheHash() {
        var feed = HashFeed(capacity: 1000, memoryLimit: 1000, digests: 1, minimumStep: 500)
        _ = feed.offer(0..<120, footprint: 120)
        #expect(feed.takeHash(0, maxBytes: 1000) == nil)
        feed.end(at: 100)
        #expect(feed.takeHash(0, maxBytes: 1000) == 0..<100, "nothing beyond the length is hashed")
        feed.hashed(0, upTo: 100)
        #expect(feed.isComplete)
        #expect(feed.offer(100..<110, footprint: 10) == HashFeed.Offer(keep: [], fellOut: false))
    }
}
