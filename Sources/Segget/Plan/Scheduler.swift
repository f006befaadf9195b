/// Which connection fetches which chunks: the pure state machine behind work stealing and the end
/// game. Values in, values out; the fetch loop owns one and asks it what to do next.
///
/// Every connection (numbered from 0) that has work holds a *run*: a contiguous range of
/// unfinished chunks whose first chunk is in flight and whose others are not started. Chunks nobody
/// holds sit in the free pool. An idle connection takes, in order of preference:
/// 1. the largest free run, or its first `1/thieves` when several idle connections are handed work at
///    once (a run given back by a slow connection is then spread over all of them);
/// 2. a share of the largest not-started remainder of a busy connection's run, sized so that the
///    helpers finish together (work stealing);
/// 3. in the end game, when nothing is left to steal, a duplicate of the in-flight chunk expected to
///    finish last. Whichever copy finishes first wins; the scheduler names the losers to cancel. A
///    chunk gets another racer (up to `maxRacers`) only when the racers it has are slow as well.
public struct Scheduler: Sendable {
    public let plan: ChunkPlan
    public private(set) var finished: [Bool]
    public private(set) var free: [Range<Int>]
    public private(set) var runs: [Int: Range<Int>] = [:]
    /// Racing connection → the chunk it races for (the only record of who races).
    public private(set) var duplicates: [Int: Int] = [:]
    public private(set) var finishedCount = 0

    /// What an idle connection should do next.
    public enum Assignment: Equatable, Sendable {
        /// Fetch this run of chunks (from the free pool).
        case run(Range<Int>)
        /// Fetch this run, taken from `victim`, whose run now ends at `victimNewEnd` (exclusive chunk).
        case stolen(Range<Int>, victim: Int, victimNewEnd: Int)
        /// Race `owner` for the rest of chunk `chunk`.
        case duplicate(chunk: Int, owner: Int)
    }

    /// Chunks from this one on are handed out to no one (a download into a stream: beyond its reorder
    /// window); a free run is cut there. Nil: no limit. It may only grow, so a run held or stolen
    /// stays below it.
    public var handOutLimit: Int?

    /// True when work is handed out front to back in runs of at most `maxRunChunks` (see `init`).
    public let inOrder: Bool
    /// The longest run handed out when `inOrder`.
    public let maxRunChunks: Int?

    /// Starts with the given chunks already finished (from a resumed journal) and the unfinished ones
    /// spread over up to `connections` connections (0, 1, …).
    ///
    /// With `maxRunChunks`, work is instead cut into runs of at most that many chunks handed out in
    /// file order (idle connections take the lowest free run), so that the finished prefix of the file
    /// grows with the download: what a hasher reading the file in order needs.
    ///
    /// Every chunk in `runStarts` begins a run of its own: a chunk partly written by an earlier run
    /// is continued from where that run got, which only the first chunk of a request can do.
    public init(
        plan: ChunkPlan, connections: Int, isFinished: (Int) -> Bool = { _ in false }, maxRunChunks: Int? = nil,
        runStarts: Set<Int> = []
    ) {
        defer { if !runStarts.isEmpty { cutRuns(at: runStarts) } }
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
        self.maxRunChunks = maxRunChunks.map { max(1, $0) }
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

    /// Splits every run (held or free) before each chunk of `starts` inside it; the pieces after the
    /// first of a held run go to the free pool.
    private mutating func cutRuns(at starts: Set<Int>) {
        func pieces(_ r: Range<Int>) -> [Range<Int>] {
            var out: [Range<Int>] = []
            var lo = r.lowerBound
            for k in r.dropFirst() where starts.contains(k) {
                out.append(lo..<k)
                lo = k
            }
            out.append(lo..<r.upperBound)
            return out
        }
        for (w, r) in runs {
            let p = pieces(r)
            runs[w] = p[0]
            free.append(contentsOf: p.dropFirst())
        }
        free = free.flatMap(pieces)
    }

    /// The chunks connection `w` holds, if any (its first one is in flight).
    public func run(of w: Int) -> Range<Int>? { runs[w] }

    /// Length of the finished prefix, in chunks.
    public func finishedPrefix(from start: Int) -> Int {
        var k = start
        while k < finished.count && finished[k] { k += 1 }
        return k
    }

    /// Hands idle connection `w` its next work, or nil when there is nothing useful for it to do.
    ///
    /// `remainingSeconds(connection)` estimates how long a busy connection (owner or racer) still needs for
    /// its in-flight chunk; the end game duplicates the chunk whose copies are expected to finish
    /// last, if that is at least `minRemainingSeconds` away, it has fewer than `maxRacers` racers,
    /// and a new copy could finish first: `racerSeconds(chunk)`, how long one takes from its request
    /// to the chunk's end (nil: unknown, no such bound), times `racerMargin` is shorter than that. `worthStealing(victim, notStartedChunks)` may veto robbing a connection
    /// that will soon finish anyway.
    ///
    /// How much a thief takes is decided so that everyone who can help finishes at about the same
    /// time (see `fairShare`). The helpers are the `thieves` idle connections being handed work in this
    /// round (this one included), the victim with its in-flight chunk, and every busy connection whose
    /// whole run ends sooner than that: `runSeconds(connection)` estimates when, nil if unknown. Without
    /// `chunkSeconds` (the time one chunk takes at a typical rate; nil while no rate is known) only
    /// the idle thieves and the victim count, and each takes `1/(thieves + 1)` of the not-started
    /// chunks. Halving instead would leave the first thief with the largest share, which nobody
    /// may take from it until its rate is known, and would hand a connection that runs out of work
    /// while the others are about to finish half of what should be spread over all of them.
    /// How much longer than a new copy's own time the chunk's copies must still need for a race
    /// (see `nextAssignment`).
    public static let racerMargin = 1.25

    public mutating func nextAssignment(
        for w: Int, allowDuplicates: Bool = true, remainingSeconds: (Int) -> Double = { _ in 0 },
        minRemainingSeconds: Double = 0, maxRacers: Int = 1, thieves: Int = 1,
        chunkSeconds: Double? = nil, runSeconds: (Int) -> Double? = { _ in nil },
        mayRace: (_ owner: Int) -> Bool = { _ in true },
        racerSeconds: (_ chunk: Int) -> Double? = { _ in nil },
        worthStealing: (_ victim: Int, _ notStartedChunks: Int) -> Bool = { _, _ in true }
    ) -> Assignment? {
        precondition(runs[w] == nil && duplicates[w] == nil, "connection \(w) is not idle")
        let pick: Int?
        if inOrder {
            pick = free.indices.min(by: { free[$0].lowerBound < free[$1].lowerBound })
        } else {
            pick = free.indices.max(by: { free[$0].count < free[$1].count || (free[$0].count == free[$1].count && $0 > $1) })
        }
        if let i = pick, free[i].lowerBound < handOutLimit ?? Int.max {
            var r = free.remove(at: i)
            if let cut = handOutLimit, r.upperBound > cut {
                free.append(cut..<r.upperBound)
                r = r.lowerBound..<cut
            }
            if !inOrder && thieves > 1 && r.count > 1 {
                let take = (r.count + thieves - 1) / thieves
                free.append((r.lowerBound + take)..<r.upperBound)
                r = r.lowerBound..<(r.lowerBound + take)
            }
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
            var busy = [Double](repeating: 0, count: max(1, thieves))
            let take: Int
            if let c = chunkSeconds, c > 0 {
                busy.append(max(0, remainingSeconds(v)))
                for (o, _) in runs where o != v && o != w {
                    if let s = runSeconds(o) { busy.append(max(0, s)) }
                }
                take = Self.fairShare(notStarted: notStarted, chunkSeconds: c, busy: busy)
            } else {
                busy.append(0)
                take = Self.fairShare(notStarted: notStarted, chunkSeconds: 1, busy: busy)
            }
            let cut = r.upperBound - take
            runs[v] = r.lowerBound..<cut
            let stolen = cut..<r.upperBound
            runs[w] = stolen
            return .stolen(stolen, victim: v, victimNewEnd: cut)
        }
        // Work left beyond `handOutLimit` is no end game: it waits for the limit to move.
        guard allowDuplicates, free.isEmpty else { return nil }
        // End game: race the in-flight chunk expected to finish last, of the owners `mayRace`
        // allows; it finishes when its first copy does.
        var racers: [Int: [Int]] = [:]
        for (d, c) in duplicates { racers[c, default: []].append(d) }
        var target: (owner: Int, chunk: Int, eta: Double)?
        for (v, r) in runs.sorted(by: { $0.key < $1.key }) where mayRace(v) {
            let copies = racers[r.lowerBound] ?? []
            guard copies.count < max(1, maxRacers) else { continue }
            let eta = copies.map(remainingSeconds).reduce(remainingSeconds(v), min)
            guard eta >= minRemainingSeconds else { continue }
            // A copy that cannot finish first only pays for the chunk twice: it must be expected to
            // end well before (`racerMargin`), since at equal rates the two estimates meet.
            if let s = racerSeconds(r.lowerBound), eta <= Self.racerMargin * s { continue }
            if eta > (target?.eta ?? -1) { target = (v, r.lowerBound, eta) }
        }
        guard let t = target else { return nil }
        duplicates[w] = t.chunk
        return .duplicate(chunk: t.chunk, owner: t.owner)
    }

    /// How many of `notStarted` chunks (each taking `chunkSeconds`) a thief that is free now takes,
    /// when the helpers are busy for `busy` seconds each (the thief itself among them with 0): the
    /// chunks are poured like water over the helpers' busy times, up to the level `T` where all of
    /// them are used, and the thief takes `T / chunkSeconds` of them, rounded up, at least one.
    /// Helpers busy beyond `T` get nothing. With `k` helpers all free that is `1/k` of the chunks.
    public static func fairShare(notStarted: Int, chunkSeconds: Double, busy: [Double]) -> Int {
        guard notStarted > 0 else { return 0 }
        let levels = busy.sorted()
        let work = Double(notStarted) * chunkSeconds
        var sum = 0.0
        var level = work
        for (i, b) in levels.enumerated() {
            sum += b
            level = (work + sum) / Double(i + 1)
            if i + 1 == levels.count || level <= levels[i + 1] { break }
        }
        let chunks = (level / chunkSeconds - 1e-9).rounded(.up)
        return min(notStarted, max(1, Int(chunks)))
    }

    /// Records that connection `w` wrote the last byte of chunk `k`. Returns the connections that must stop
    /// because the chunk they were racing for is done (losers of an end-game race); a returned
    /// connection holds nothing afterwards.
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

    /// The first split, decided once the first connection's answer showed what a request costs: the
    /// chunks from `ids[0]`'s chunk in flight to the end are laid out again as `ids.count` runs of
    /// equal size in file order, the first for `ids[0]`; every other connection's run and the free
    /// pool are given up to them. Only while `ids[0]` is the one connection that started: every
    /// chunk before its run is finished and none after (the caller checks that nothing else started).
    public mutating func respread(over ids: [Int]) {
        guard let first = ids.first, let held = runs[first], duplicates.isEmpty,
            finishedCount == held.lowerBound, finishedPrefix(from: 0) == held.lowerBound
        else { return }
        let lo = held.lowerBound, count = plan.chunkCount - lo
        runs = [:]
        free = []
        if let m = maxRunChunks {
            // In file order, runs of at most `m`: one to each connection, the rest in the pool.
            var a = lo
            for id in ids where a < plan.chunkCount {
                runs[id] = a..<min(a + m, plan.chunkCount)
                a += m
            }
            while a < plan.chunkCount {
                free.append(a..<min(a + m, plan.chunkCount))
                a += m
            }
            return
        }
        let k = max(1, min(ids.count, count))
        for (j, id) in ids.prefix(k).enumerated() {
            let a = lo + j * count / k, b = lo + (j + 1) * count / k
            if b > a { runs[id] = a..<b }
        }
    }

    /// Connection `w`, whose run ended with chunk `k` while its answer runs on, takes the work that
    /// follows: the free run that starts at `k + 1`, or the run of the connection `owner(k + 1)` names
    /// when `mayTake` allows (one that has not received a byte of it). Returns the connection robbed,
    /// if any (it holds nothing afterwards), or nil; false in `.1` when nothing was taken.
    public mutating func extend(_ w: Int, after k: Int, mayTake: (Int) -> Bool) -> (taken: Bool, robbed: Int?) {
        guard runs[w] == nil, duplicates[w] == nil, k + 1 < plan.chunkCount, !finished[k + 1] else { return (false, nil) }
        if let i = free.firstIndex(where: { $0.lowerBound == k + 1 }) {
            runs[w] = free.remove(at: i)
            return (true, nil)
        }
        guard let (o, r) = runs.first(where: { $0.value.lowerBound == k + 1 }), o != w, duplicates.values.contains(k + 1) == false,
            mayTake(o)
        else { return (false, nil) }
        runs[o] = nil
        runs[w] = r
        return (true, o)
    }

    /// Connection `w` keeps only its in-flight chunk and gives the rest of its run back (a slow connection
    /// about to be re-dialled).
    public mutating func releaseNotStarted(of w: Int) {
        guard let r = runs[w], r.count > 1 else { return }
        runs[w] = r.lowerBound..<(r.lowerBound + 1)
        addFree((r.lowerBound + 1)..<r.upperBound)
    }

    /// Chunk `k`, counted as finished, must be fetched again after all (its kept bytes failed their
    /// check): it becomes unfinished and goes back to the pool. Nobody holds a finished chunk, so no
    /// connection is affected.
    public mutating func reopen(_ k: Int) {
        guard finished[k] else { return }
        finished[k] = false
        finishedCount -= 1
        addFree(k..<(k + 1))
    }

    /// Connection `w`, idle or holding only a duplicate (dropped), takes over the whole run of `owner`,
    /// whose request has not gone out yet (a staggered start to come): rather than race its first
    /// chunk, which the owner would then fetch too. Returns the run, nil when `owner` holds none or
    /// `w` holds one.
    public mutating func handOver(from owner: Int, to w: Int) -> Range<Int>? {
        guard owner != w, let r = runs[owner], runs[w] == nil else { return nil }
        duplicates[w] = nil
        runs[owner] = nil
        runs[w] = r
        return r
    }

    /// Connection `w` stops for good (failed, or cancelled): everything it held returns to the pool.
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
