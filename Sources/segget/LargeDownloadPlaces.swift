/// The places of a multiplexing batch's large downloads (see `Batch.isLarge`): at most `places` run
/// at once; a file started beyond them waits, in the order it asked, for one that ends.
///
/// Where a batch multiplexes (`--http2`, `-j` above 1), every file of the list can be in flight
/// from the start, before any answer shows whether its files are small: a file started while the
/// batch's `-j` places are full probes for its first `Batch.speculativeProbeBytes` only, a request
/// that brings a small file whole and of a large one only its head and first bytes, with no
/// transfer left running. What decides how many large files download at once is these places:
/// a list of large files runs `-j` of them at a time (about as many more whose probes held their
/// transfers, started while places were free), never the hundreds a list of small files has in flight.
struct LargeDownloadPlaces: Sendable {
    let places: Int
    /// Large downloads running now, and the most that ever ran at once.
    private(set) var running = 0
    private(set) var peak = 0
    /// Files waiting for a place, in the order they asked.
    private var waiting: [Int] = []

    init(places: Int) {
        self.places = max(1, places)
    }

    var waitingCount: Int { waiting.count }

    /// File `k` asks for a place: true when it takes one now, else it waits (see `release`).
    mutating func ask(_ k: Int) -> Bool {
        guard waiting.isEmpty, running < places else {
            waiting.append(k)
            return false
        }
        enter()
        return true
    }

    /// A large download that needed no place (its probe's transfer held, started while the batch's
    /// places were free) counts among those running.
    mutating func enter() {
        running += 1
        peak = max(peak, running)
    }

    /// A large download ended: the files that now take places, in the order they asked.
    mutating func release() -> [Int] {
        running = max(0, running - 1)
        var next: [Int] = []
        while running < places, !waiting.isEmpty {
            next.append(waiting.removeFirst())
            enter()
        }
        return next
    }
}
