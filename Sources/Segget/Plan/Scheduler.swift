/// Which connection fetches which chunks: the pure state machine behind work stealing and the end
/// game. Values in, values out; the fetch loop owns one and asks it what to do next.
///
/// Every connection ("worker", numbered from 0) that has work holds a *run*: a contiguous range of
/// unfinished chunks whose first chunk is in flight and whose others are not started. Chunks nobody
/// holds sit in the free pool. An idle worker takes, in order of preference:
/// 1. the largest free run;
/// 2. the upper half of the largest not-started remainder of a busy worker's run (work stealing);
/// 3. in the end game, when nothing is left to steal, a duplicate of the in-flight chunk expected to
///    finish last. Whichever copy finishes first wins; the scheduler names the loser to cancel.
public struct Scheduler: Sendable {
    public let plan: ChunkPlan
    public private(set) var finished: [Bool]
    public private(set) var free: [Range<Int>]
    public private(set) var runs: [Int: Range<Int>] = [:]
    /// Duplicate worker → the chunk it races for.
    public private(set) var duplicates: [Int: Int] = [:]
    public private(set) var finishedCount = 0

    /// What an idle worker should do next.
    public enum Assignment: Equatable, Sendable {
        /// Fetch this run of chunks (from the free pool).
        case run(Range<Int>)
        /// Fetch this run, taken from `victim`, whose run now ends at `victimNewEnd` (exclusive chunk).
        case stolen(Range<Int>, victim: Int, victimNewEnd: Int)
        /// Race `owner` for the rest of chunk `chunk`.
        case duplicate(chunk: Int, owner: Int)
    }

    /// True when work is handed out front to back in runs of at most `maxRunChunks` (see `init`).
    public let inOrder: Bool

    /// Starts with the given chunks already finished (from a resumed journal) and the unfinished ones
    /// spread over up to `connections` workers (0, 1, …).
    ///
    /// With `maxRunChunks`, work is instead cut into runs of at most that many chunks handed out in
    /// file order (idle workers take the lowest free run), so that the finished prefix of the file
    /// grows with the download: what a hasher reading the file in order needs.
    public init(plan: ChunkPlan, connections: Int, isFinished: (Int) -> Bool = { _ in false }, maxRunChunks: Int? = nil) {
        self.plan = plan
        let n = plan.chunkCount
        var done = [Bool](repeating: false, count: n)
        var count = 0
        for k in 0..<n where isFinished(k) {
            done[k] = true
            count += 1
        }
        finished = done
        finishedCount = count
        inOrder = maxRunChunks != nil
        if let m = maxRunChunks {
            var pieces: [Range<Int>] = []
            var k = 0
            while k < n {
                if done[k] {
                    k += 1
                    continue
                }
                let start = k
                while k < n && !done[k] && k - start < max(1, m) { k += 1 }
                pieces.append(start..<k)
            }
            for (w, r) in pieces.prefix(connections).enumerated() { runs[w] = r }
            free = Array(pieces.dropFirst(connections))
            return
        }
        let (initial, rest) = plan.initialRuns(connections: connections, isFinished: { done[$0] })
        free = rest
        for (w, r) in initial.enumerated() { runs[w] = r }
    }

    public var isComplete: Bool { finishedCount == finished.count }

    /// The chunks worker `w` holds, if any (its first one is in flight).
    public func run(of w: Int) -> Range<Int>? { runs[w] }

    /// Length of the finished prefix, in chunks.
    public func finishedPrefix(from start: Int) -> Int {
        var k = start
        while k < finished.count && finished[k] { k += 1 }
        return k
    }

    /// Hands idle worker `w` its next work, or nil when there is nothing useful for it to do.
    ///
    /// `remainingSeconds(worker)` estimates how long a busy worker still needs for its in-flight
    /// chunk; the end game duplicates the chunk with the largest estimate, if it is at least
    /// `minRemainingSeconds`. `worthStealing(victim, notStartedChunks)` may veto robbing a worker
    /// that will soon finish anyway.
    ///
    /// `thieves` is how many idle workers (this one included) are being handed work in this round.
    /// A thief takes `1/(thieves + 1)` of the victim's not-started chunks (the upper half when it is
    /// alone), so that one round leaves the victim and every thief with about equal shares: halving
    /// would leave the first thief with the largest share, which nobody may take from it until its
    /// rate is known.
    public mutating func nextAssignment(
        for w: Int, allowDuplicates: Bool = true, remainingSeconds: (Int) -> Double = { _ in 0 },
        minRemainingSeconds: Double = 0, thieves: Int = 1,
        worthStealing: (_ victim: Int, _ notStartedChunks: Int) -> Bool = { _, _ in true }
    ) -> Assignment? {
        precondition(runs[w] == nil && duplicates[w] == nil, "worker \(w) is not idle")
        let pick: Int?
        if inOrder {
            pick = free.indices.min(by: { free[$0].lowerBound < free[$1].lowerBound })
        } else {
            pick = free.indices.max(by: { free[$0].count < free[$1].count || (free[$0].count == free[$1].count && $0 > $1) })
        }
        if let i = pick {
            let r = free.remove(at: i)
            runs[w] = r
            return .run(r)
        }
        // Steal the top share of the largest not-started remainder.
        var victim: Int?
        var best = 0
        for (v, r) in runs.sorted(by: { $0.key < $1.key }) where r.count - 1 > best && worthStealing(v, r.count - 1) {
            best = r.count - 1
            victim = v
        }
        if let v = victim, let r = runs[v] {
            let notStarted = r.count - 1
            let shares = max(1, thieves) + 1
            let take = (notStarted + shares - 1) / shares
            let cut = r.upperBound - take
            runs[v] = r.lowerBound..<cut
            let stolen = cut..<r.upperBound
            runs[w] = stolen
            return .stolen(stolen, victim: v, victimNewEnd: cut)
        }
        guard allowDuplicates else { return nil }
        // End game: race the in-flight chunk expected to finish last, one duplicate per chunk.
        let raced = Set(duplicates.values)
        var target: (owner: Int, chunk: Int, eta: Double)?
        for (v, r) in runs.sorted(by: { $0.key < $1.key }) where !raced.contains(r.lowerBound) {
            let eta = remainingSeconds(v)
            guard eta >= minRemainingSeconds else { continue }
            if eta > (target?.eta ?? -1) { target = (v, r.lowerBound, eta) }
        }
        guard let t = target else { return nil }
        duplicates[w] = t.chunk
        return .duplicate(chunk: t.chunk, owner: t.owner)
    }

    /// Records that worker `w` wrote the last byte of chunk `k`. Returns the workers that must stop
    /// because the chunk they were racing for is done (losers of an end-game race); a returned
    /// worker holds nothing afterwards.
    public mutating func chunkFinished(_ k: Int, by w: Int) -> [Int] {
        var cancel: [Int] = []
        if !finished[k] {
            finished[k] = true
            finishedCount += 1
        }
        if duplicates[w] == k {
            duplicates[w] = nil
        } else if let r = runs[w], r.lowerBound == k {
            runs[w] = r.count > 1 ? (k + 1)..<r.upperBound : nil
        }
        // A racer can win a chunk whose owner gave it back meanwhile: drop it from the pool.
        if let i = free.firstIndex(where: { $0.contains(k) }) {
            let r = free.remove(at: i)
            addFree(r.lowerBound..<k)
            addFree((k + 1)..<r.upperBound)
        }
        // Anyone else racing for k lost.
        for (d, c) in duplicates where c == k {
            duplicates[d] = nil
            cancel.append(d)
        }
        for (o, r) in runs where r.lowerBound == k && o != w {
            // The owner of k lost the race; whatever it held after k goes back to the pool.
            runs[o] = nil
            if r.count > 1 { addFree((k + 1)..<r.upperBound) }
            cancel.append(o)
        }
        return cancel.sorted()
    }

    /// Worker `w` keeps only its in-flight chunk and gives the rest of its run back (a slow connection
    /// about to be re-dialled).
    public mutating func releaseNotStarted(of w: Int) {
        guard let r = runs[w], r.count > 1 else { return }
        runs[w] = r.lowerBound..<(r.lowerBound + 1)
        addFree((r.lowerBound + 1)..<r.upperBound)
    }

    /// Worker `w` stops for good (failed, or cancelled): everything it held returns to the pool.
    public mutating func abandon(_ w: Int) {
        if let r = runs[w] {
            runs[w] = nil
            // Chunks finished by a racing duplicate in the meantime are skipped.
            var lo = r.lowerBound
            while lo < r.upperBound {
                if finished[lo] {
                    lo += 1
                    continue
                }
                var hi = lo
                while hi < r.upperBound && !finished[hi] { hi += 1 }
                addFree(lo..<hi)
                lo = hi
            }
        }
        duplicates[w] = nil
    }

    private mutating func addFree(_ r: Range<Int>) {
        guard !r.isEmpty else { return }
        free.append(r)
    }
}
