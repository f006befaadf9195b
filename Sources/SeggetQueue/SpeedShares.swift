/// How the overall download limit is shared out among the running tasks: each gets a cap of its
/// own, re-decided every second from what each received in the last one. All draw from one shared
/// limit as well (``DownloadQueue/overallSpeed``), which alone gave every token to whichever
/// download the loop served first after a refill: under a 3 MiB/s limit three equal tasks got
/// about 3,100, 4 and 0-12 KiB/s (exploratory run 7), where aria2 gives each about a third.
///
/// The caps are max-min fair shares of the limit (water-filling): a task that received less than
/// `boundFraction` of its last share is held back by something else (its server, its own cap, a
/// slow path) and is given what it used with room to grow (`growth`), at least `floorFraction` of an
/// equal share; the rest is shared equally by the others, none above its own cap
/// (`max-download-limit`). A task that uses most of its share asks for an equal share again the
/// next second, so a server that speeds up gets its share back within a second or two. What no task
/// can use is added to every task's share alike, so the shares always add up to the limit.
///
/// Pure: the queue passes the rates and the last shares.
struct SpeedShares {
    struct Task: Equatable {
        var id: TaskID
        /// The task's own cap (`max-download-limit`); nil: none.
        var ownCap: Int64?
        /// Bytes per second it received lately.
        var rate: Double
        /// Its share the last time, nil when it had none (it just started).
        var lastShare: Int64?
    }

    static let boundFraction = 0.8
    /// Above 1 / `boundFraction`: a task held back elsewhere, given its rate times this, stays
    /// below `boundFraction` of it (1.25 put it on the line, and it swung between the two shares).
    static let growth = 1.5
    static let floorFraction = 0.25

    /// Each task's cap under the overall limit `total` (bytes per second, above zero).
    static func shares(total: Int64, tasks: [Task]) -> [TaskID: Int64] {
        guard !tasks.isEmpty else { return [:] }
        let equal = Double(total) / Double(tasks.count)
        // What each could use: its own cap, and for one held back elsewhere what it used and more.
        let demands: [(id: TaskID, demand: Double)] = tasks.map { t in
            var d = Double.infinity
            if let last = t.lastShare, t.rate < boundFraction * Double(last) {
                d = max(t.rate * growth, floorFraction * equal)
            }
            if let own = t.ownCap { d = min(d, Double(own)) }
            return (t.id, d)
        }.sorted { ($0.demand, $0.id) < ($1.demand, $1.id) }
        var left = Double(total)
        var given: [(TaskID, Double)] = []
        for (i, t) in demands.enumerated() {
            let share = min(t.demand, left / Double(demands.count - i))
            given.append((t.id, share))
            left -= share
        }
        let extra = max(0, left) / Double(given.count)
        var out: [TaskID: Int64] = [:]
        for (id, share) in given { out[id] = max(1, Int64((share + extra).rounded(.down))) }
        return out
    }
}
