/// Every decision of a ranged download's connections, as a pure value driven by a clock passed in:
/// who fetches what (the `Scheduler`'s runs, steals and end-game races), what the end of a transfer
/// means, and (in `Coordinator+Policy.swift`) which connection is re-dialled and how many
/// connections auto mode uses. What it shares with `SingleStream` (head verdicts, retries, the
/// stall timeout, held time) is in `Coordinating.swift`.
///
/// It never touches libcurl, the file or the clock: it returns `Command`s that the engine carries
/// out, so that scripted timelines test it without a socket (`CoordinatorTests`).
///
/// One fact in one place: whether a connection races is `scheduler.duplicates`; where its work
/// ends is the scheduler's run (`end(of:)`); which chunks are received is `scheduler.finished`.
///
/// Its stored state is internal so that `Coordinator+Policy.swift` can decide too; only the
/// coordinator changes it (the engine reads it).
struct Coordinator: Coordinating {
    /// The knobs the decisions depend on (from `FetchTarget` and `FetchSettings`).
    struct Config {
        /// Ranged requests, or one plain stream from byte 0 (a server without ranges).
        var ranged = true
        var totalLength: Int64?
        var url = ""
        /// Validators per source (main URL, then mirrors) that every answer must not contradict.
        var sources: [FetchSource] = [FetchSource(url: "")]
        var endGame = true
        /// Idle connections take not-started work from busy ones (off only in the simulator's
        /// baselines).
        var stealing = true
        var redialSlow = true
        /// An idle connection that must dial on a long path judges busy ones by `provenRate` (off only
        /// in tests that show what it changes).
        var provenRates = true
        var autoConnections = false
        /// Start with this many of the connections (a batch file's share of the budget); the others
        /// are used only while lent (see `ConnectionLender`). Nil: all of them from the start.
        var initialConnections: Int?
        /// Loans taken before the first request (`FetchSettings.borrowAtStart`), given back as any.
        var initialLoans = 0
        /// The download's slots in its host's budget, shared with the process's other downloads to
        /// that host (see `HostBudget`); nil: only this download's own `HostLimit`.
        var hostShare: HostShare?
        var maxRedialsPerConnection = 3
        var retries = 5
        var retryWait = 1.0
        var maxRetryWait = RetryPolicy.defaultMaxWait
        var deadline: Deadline?
        /// Seconds without a byte after which a connection is dropped and retried; 0: never.
        var stallTimeout = 0.0
        /// Seconds between progress ticks (rate samples are taken on them).
        var progressInterval = 0.25
        /// Decides how long a retry waits on top of the backoff (0.5…1.5; fixed in tests).
        var jitter: () -> Double = { .random(in: 0.5...1.5) }
        /// How long the probe's first answer took (see `rampStep`); nil: not measured.
        var probeFirstAnswer: Double?
        /// Other downloads of the run (a batch's files, the daemon's tasks) held slots of the host as
        /// the fetch began: the split's connections are dialled, not found idle (`splitDialsLongPath`).
        var contendedHost = false
        /// The first split may wait for connection 0's rate where requests cost (see `defersSplit`);
        /// off only in the simulator's aria2-like baseline.
        var pricedSplit = true
        /// A speed cap applies (`--max-speed`, or a limit shared with other downloads; see `capBinds`).
        var speedCapped = false
    }

    /// What the engine must do, in order.
    enum Command: Equatable {
        /// Send a request for `bytes` on the connection (its bookkeeping is already done);
        /// `fresh` forces a new TCP connection, `newPath` a random source port too.
        case start(Int, bytes: Range<Int64>, fresh: Bool, newPath: Bool)
        /// Hand what the connection has staged to the writer (before another connection races it).
        case settle(Int)
        /// Take the connection's transfer out of libcurl and hand over what it staged.
        case remove(Int)
        case event(DownloadEvent)
        /// A line for `SEGGET_DEBUG` (only when `tracing`).
        case trace(String)
    }

    /// What the end of a transfer was, as libcurl reported it (classified by the engine).
    enum TransferEnd: Equatable {
        case ok
        /// The body ended before its announced length.
        case partial
        /// A failure worth retrying (a transient network error, or our own abort), described, with the
        /// kind of network failure aria2 numbers apart where it is one (kept for the download's
        /// failure when the retries run out: a daemon task's `errorCode`).
        case transient(String, cause: NetworkCause? = nil)
        /// A failure no retry mends.
        case failed(SeggetError)
    }

    /// The chunk end a connection's bytes just reached.
    struct Crossing: Equatable {
        /// The chunk it finished first (ranged); nil when it was already finished by another.
        var finishedChunk: Int?
        /// Connections that lost the race for it and still have a transfer to remove.
        var losers: [Int] = []
    }

    var scheduler: Scheduler
    var connections: [Connection]
    /// Fixed once made, but for its sources: a mirror whose probe answers after the fetch began
    /// joins them (`addSource`).
    var config: Config
    var tracing = false
    var plan: ChunkPlan { scheduler.plan }
    /// When a speed cap last held bytes back (see `capBinds`).
    var capHeldAt = -Double.infinity
    /// The best rate a transfer of this download had from its first byte to its end (see
    /// `lastTransferRate`): what a new request may get, for an end-game racer's estimate.
    var peakTransferRate = 0.0
    /// Chunks whose races wait after a racer failed on them (see `RaceHolds`).
    var raceHolds = RaceHolds()

    /// How many connections may take work now (grows in auto mode).
    var connectionLimit: Int
    /// Connections this download has of its own; those from here to `connectionLimit` are borrowed
    /// (see `ConnectionLender`).
    var ownConnections: Int
    /// Connections borrowed now.
    var loans: Int { connectionLimit - ownConnections }
    /// The loan being given back to a short lender (`recallLoan`): no new work, no running on.
    var recalledLoan: Int?
    /// Chunk → offset up to which an earlier run (or the probe) wrote it, continued from there; an
    /// entry leaves once a connection continues it. `keptAtStart` keeps them all (for the progress).
    var partialChunks: [Int: Int64]
    let keptAtStart: [Int: Int64]
    /// Bytes received from the network in this run (see `Coordinating`).
    var receivedBytes: Int64 = 0
    /// (time, receivedBytes) every progress tick, newest last.
    var rateSamples: [(Double, Int64)] = []
    /// How long recent first body bytes took after their request (held time left out), newest last.
    var firstByteWaits: [Double] = []
    /// With mirrors, each source's recent first-byte waits (by source index), as `firstByteWaits`
    /// keeps every source's: each path's own round trip and usual wait (`pathRoundTrip(ofSource:)`).
    var sourceFirstByteWaits: [Int: [Double]] = [:]
    /// Decides which connections are too slow to keep their work (see `judgeSlowConnections`).
    var slowRule: SlowConnectionRule
    var auto = AutoGrowth()
    /// How many requests at once the host accepts, as its refusals taught (see `HostLimit`).
    var host = HostLimit()
    /// The notice of a limit the host's queue taught, held until it stands (see `SaturationNotice`).
    var saturationNotice = SaturationNotice()
    /// The limits of the mirrors' hosts other than the main URL's, by `HostBudget.key`, each learnt
    /// from its own refusals (see `Coordinator+HostLimit.swift`).
    var mirrorHosts: [String: HostLimit] = [:]
    /// The connections warmed beside the probe as last heard, the most requests `begin` sends at once
    /// when refused warm-ups taught a limit, and the connections waiting for a warm-up still out
    /// (see `Coordinator+WarmUp.swift`).
    var warmUp = WarmUpOutcome()
    var warmUpLimit: Int?
    var awaitingWarmUp: [Int] = []
    /// The first split waits for connection 0's rate from then on, sampled each pass (see
    /// `Coordinator+Price.swift`).
    var splitDueAt: Double?
    var splitSamples: [(Double, Int64)] = []
    /// The connections waiting for the first split's decision, in the order they would start.
    var splitCandidates: [Int] = []
    var failure: SeggetError?
    /// Sources that get no more work; each source's rate per connection (`Coordinator+Sources.swift`).
    var demotedSources: Set<Int> = []
    var sourceRates: [Int: Double] = [:]
    /// How many more connections each source that joined after the fetch began may still take
    /// (`Coordinator.addSource`).
    var owedConnections: [Int: Int] = [:]
    var changed: String?, ignored: String?, unusableInARow = 0
    /// What a request to the host costs (see `RequestCostModel`, `RequestPrice`).
    var cost: RequestCostModel

    init(plan: ChunkPlan, connections n: Int, config: Config, isFinished: (Int) -> Bool = { _ in false },
         maxRunChunks: Int? = nil, partialChunks: [Int: Int64] = [:]) {
        self.config = config
        precondition(config.ranged, "a stream is a SingleStream")
        cost = RequestCostModel(tls: config.url.lowercased().hasPrefix("https:"))
        if let initial = config.initialConnections {
            ownConnections = min(n, max(1, initial))
            connectionLimit = min(n, ownConnections + max(0, config.initialLoans))
        } else {
            connectionLimit = config.autoConnections ? min(n, Self.autoInitial) : n
            ownConnections = connectionLimit
        }
        slowRule = SlowConnectionRule(
            maxConsecutiveRedials: config.maxRedialsPerConnection,
            maxTotalRedials: Self.maxTotalRedials(connections: n, chunks: plan.chunkCount))
        self.partialChunks = partialChunks
        keptAtStart = partialChunks
        scheduler = Scheduler(
            plan: plan, connections: connectionLimit, isFinished: isFinished, maxRunChunks: maxRunChunks,
            runStarts: Set(partialChunks.keys))
        connections = (0..<n).map { Connection(id: $0) }
        for i in connections.indices { connections[i].source = i % max(1, config.sources.count) }
    }

    /// A download into a stream whose reader is behind: the reader sets the pace, so the slow rule
    /// judges no one (see `FetchEngine.limitToStreamWindow`).
    var readerBound = false

    // MARK: Reading

    /// Whether connection `id` races another for a chunk (the scheduler alone knows).
    func isRacing(_ id: Int) -> Bool { scheduler.duplicates[id] != nil }

    /// Where connection `id` must stop: the end of its run or of the chunk it races for, as the
    /// scheduler has them now (a robbed run ends at the cut); its position when it holds nothing.
    func end(of id: Int) -> Int64 {
        if let r = scheduler.run(of: id) { return plan.byteRange(ofChunk: r.upperBound - 1).upperBound }
        if let k = scheduler.duplicates[id] { return plan.byteRange(ofChunk: k).upperBound }
        return connections[id].pos
    }

    /// Every chunk is received.
    var isComplete: Bool { scheduler.isComplete }
    var finishedChunks: [Bool] { scheduler.finished }

    // MARK: Starting

    /// The first requests: the connections with work start `rampStep` apart (the first at once; all
    /// of them on a long path).
    mutating func begin(now: Double) -> [Command] {
        let starting = connections.map(\.id).filter { scheduler.run(of: $0) != nil }
        let step = Self.rampStep(connections: starting.count, firstAnswer: config.probeFirstAnswer)
        var commands0: [Command] = []
        if config.speedCapped { noteCapHeld(now: now) }
        // The probe was the host's first answer: what a request costs, as far as one can tell.
        if let first = config.probeFirstAnswer {
            cost.answered(ahead: 0, wait: first, dialled: true, closes: false)
        }
        if tracing, let think = probeThink {
            commands0.append(.trace("the probe's think time \(Format.fixed(think, 3)) s (round trip \(Format.fixed(cost.roundTrip ?? -1, 4)) s)"))
        }
        if defersSplit(connections: starting.count), starting.first == 0 {
            // Requests may cost here: the others wait for connection 0's rate (`decideSplit`), and
            // connection 0 holds the whole file meanwhile.
            splitDueAt = now + splitEvidenceDelay
            splitCandidates = Array(starting.dropFirst())
            scheduler.respread(over: [0])
            for id in splitCandidates { connections[id].machine.wait(until: now + 60, .ramp) }
            return commands0 + [start(0, bytes: runBytes(scheduler.run(of: 0) ?? 0..<1), now: now)]
        }
        var commands = commands0
        for (k, id) in starting.enumerated() {
            if k > 0 {
                // Beyond a limit that refused warm-ups taught: the work goes to the connections the
                // host serves (those started or waiting to start: k of them so far).
                if let l = warmUpLimit, k >= l {
                    scheduler.abandon(id)
                    continue
                }
                // A warm-up still out will bring a connection soon: waited for, not dialled.
                if k > warmUp.accepted, k <= warmUp.accepted + warmUp.stillOut {
                    connections[id].machine.wait(until: now + warmUpGrace, .ramp)
                    awaitingWarmUp.append(id)
                    continue
                }
            }
            if k == 0 || step == 0, let r = scheduler.run(of: id) {
                commands.append(start(id, bytes: runBytes(r), now: now))
            } else {
                connections[id].machine.wait(until: now + Double(k) * step, .ramp)
            }
        }
        return commands
    }

    /// Prepares connection `id`'s request for `bytes` and says so.
    mutating func start(_ id: Int, bytes: Range<Int64>, fresh: Bool = false, newPath: Bool = false,
                        continuing: Bool = false, now: Double) -> Command {
        let chunkEnd = plan.byteRange(ofChunk: plan.chunk(containing: bytes.lowerBound)).upperBound
        return start(id, bytes: bytes, chunkEnd: chunkEnd, fresh: fresh, newPath: newPath, continuing: continuing, now: now)
    }

    /// The bytes of a run, skipping the part of its first chunk an earlier run already wrote.
    private mutating func runBytes(_ r: Range<Int>) -> Range<Int64> {
        let bytes = plan.byteRange(ofChunks: r)
        guard let done = partialChunks.removeValue(forKey: r.lowerBound), done > bytes.lowerBound,
            done < plan.byteRange(ofChunk: r.lowerBound).upperBound
        else { return bytes }
        return done..<bytes.upperBound
    }

    /// Starts the connections whose ramp step or retry delay has come.
    mutating func startDue(now: Double) -> [Command] {
        var commands = splitDueAt == nil ? [] : decideSplit(now: now)
        for id in connections.indices {
            let due = connections[id].machine.tick(now: now)
            guard case .startRequest(let cause) = due else { continue }
            // Robbed of everything meanwhile: it is idle and gets work like any idle connection.
            guard isRacing(id) || scheduler.run(of: id) != nil else { continue }
            // Beyond what the host accepts: its work goes to the others.
            guard allowsAnotherRequest(now: now, source: connections[id].source) else {
                scheduler.abandon(id)
                continue
            }
            switch cause {
            case .ramp:
                if let r = scheduler.run(of: id) { commands.append(start(id, bytes: runBytes(r), now: now)) }
            case .retry:
                commands.append(start(id, bytes: connections[id].pos..<end(of: id), fresh: true, now: now))
            }
        }
        return commands
    }

    /// Hands work to the idle connections within the limit: a free run, a share stolen from a busy
    /// connection, or in the end game a race for the chunk expected to finish last.
    mutating func assignIdle(now: Double) -> [Command] {
        let idle = connections.prefix(connectionLimit).map(\.id).filter {
            connections[$0].machine.isIdle && scheduler.run(of: $0) == nil && scheduler.duplicates[$0] == nil && $0 != recalledLoan
        }
        var commands: [Command] = []
        // Connections that libcurl's pool holds open, each good for one request without a handshake
        // (libcurl hands them to whichever transfer starts next); the thieves beyond them dial.
        var openLinks = idle.filter { connections[$0].leftLinkOpen }.count
        // Work is spread over the connections the host will serve: with a limit learnt or a cap on
        // the host (the other downloads' requests counted), a free run handed out now is cut in as
        // many shares as requests may still go out, not as idle connections wait (16 idle
        // connections behind a limit of 3 took runs of one chunk each; 6 files of 64 MiB at `-j 4
        // -n 4` under `--max-connections-per-host 2`, each file's one connection taking a third of
        // a run at a time for the 3 that could not start, made 156 requests).
        let room = requestRoom.map { max(1, $0) }
        for id in idle { peakTransferRate = max(peakTransferRate, lastTransferRate(connections[id]) ?? 0) }
        let chunkPlan = plan
        // What a new copy may get: the best rate a transfer of the download had (a server that
        // trickles some answers serves others fast: a new request is a new draw, and a racer that
        // saw only trickles may still draw a fast one).
        let bestRate = max(peakTransferRate, connections.map(\.bestWindowRate).max() ?? 0)
        let racerRate = bestRate > 0 ? bestRate : rateBeforeEvidence(now: now)
        let heldOwners = ownersNotRaced(now: now)
        for (i, id) in idle.enumerated() {
            // No more than its host accepts (see `HostLimit`); a connection to another host may still go.
            guard allowsAnotherRequest(now: now, source: connections[id].source) || movedToHostWithRoom(id, now: now) else {
                if config.sources.count > 1 { continue } else { break }
            }
            // A racer that must dial first races only a chunk that keeps its owner busy for its
            // handshakes and slow start too, on a path where those take a while (as long as
            // `SlowConnectionRule.lossRecoveryRampSeconds`: WAN links a and b). On a fast short path
            // the dial is soon paid: counting it there held racers back from trickling owners
            // (simulator, trickle-every-kth seed 718: 39 ms, 719 MiB/s, 0.31 s of dial, every second
            // answer a trickle: 12.1 x the ideal against a bound of 12; 10.7 x without). There, too,
            // victims and owners are judged by their proven rate, not by a dip (`provenRate`).
            let dial = openLinks == 0 ? dialSeconds(typical: typicalRate(now: now)) : 0
            // Its request's round trip to the first byte counts too, as for a re-dial (`SlowConnectionRule.judge`).
            let longDial = dial > 0 && dial + (pathRoundTrip ?? 0) >= slowRule.lossRecoveryRampSeconds
            let minRace = Self.minRaceSeconds + (longDial ? dial : 0) + priceBeyondNetwork(.race, now: now)
            // Estimates are read before the scheduler is asked (it cannot be read while it decides).
            let estimates = stealEstimates(now: now, thiefDials: openLinks == 0, proven: longDial && config.provenRates)
            let runTimes = connections.map { runSeconds($0, now: now) }
            guard let assignment = scheduler.nextAssignment(
                for: id, allowDuplicates: config.endGame && !capBinds(now: now), remainingSeconds: { estimates.remaining[$0] },
                minRemainingSeconds: minRace, maxRacers: Self.maxRacers, thieves: max(1, min(idle.count - i, (room ?? Int.max) - i)),
                chunkSeconds: estimates.chunkSeconds, runSeconds: { runTimes[$0] },
                mayRace: { estimates.slowStart[$0] == nil && !heldOwners.contains($0) },
                racerSeconds: { k in estimates.racerSeconds(chunkBytes: Int64(chunkPlan.byteRange(ofChunk: k).count), ownRate: racerRate) },
                worthStealing: { config.stealing && estimates.worthStealing($0, notStartedChunks: $1) })
            else { continue }
            var a = assignment
            // A race for the chunk of an owner whose request has not gone out (its ramp step is to
            // come) would have the chunk fetched twice: the idle connection takes its run instead,
            // and the owner, when its time comes, gets work as an idle connection. On loopback,
            // where a chunk takes milliseconds, every connection on the ramp was raced so.
            if case .duplicate(_, let owner) = a, connections[owner].machine.isStarting,
                let r = scheduler.handOver(from: owner, to: id)
            {
                a = .run(r)
            }
            openLinks = max(0, openLinks - 1)
            if tracing {
                if case .duplicate(let chunk, let owner) = a {
                    let racer = estimates.racerSeconds(chunkBytes: Int64(chunkPlan.byteRange(ofChunk: chunk).count), ownRate: racerRate)
                    commands.append(.trace("connection \(id) gets \(a): the owner needs \(Format.seconds(estimates.remaining[owner])), a racer \(racer.map(Format.seconds) ?? "unknown") (best rate \(racerRate.map { Format.bytes(Int64($0)) } ?? "unknown")/s)"))
                } else {
                    commands.append(.trace("connection \(id) gets \(a)"))
                }
            }
            switch a {
            case .run(let r), .stolen(let r, _, _):
                // A victim's run now ends at the cut (`end(of:)` reads it from the scheduler).
                let bytes = runBytes(r)
                if config.sources.count > 1, let moved = sendToFasterSource(id, bytes: Int64(bytes.count), now: now), tracing {
                    commands.append(moved)
                }
                commands.append(start(id, bytes: bytes, now: now))
            case .duplicate(let chunk, let owner):
                let chunkRange = plan.byteRange(ofChunk: chunk)
                let from = max(chunkRange.lowerBound, min(connections[owner].pos, chunkRange.upperBound - 1))
                if config.sources.count > 1, let moved = sendToFasterSource(id, bytes: chunkRange.upperBound - from, now: now), tracing {
                    commands.append(moved)
                }
                // The racer fetches only from `from` on; what the owner received before it must reach
                // the file whoever wins (a losing owner's staged bytes are discarded), and before the
                // winner's journal bit, which is queued behind a later ticket.
                commands.append(.settle(owner))
                commands.append(start(id, bytes: from..<chunkRange.upperBound, now: now))
            }
        }
        return commands
    }

    // MARK: Receiving

    /// How many bytes connection `id` may write at its position now: up to its chunk's end, its
    /// work's end and its request's end. Nil when it must write no more (the reason is decided).
    mutating func room(_ id: Int, now: Double) -> Int64? {
        let c = connections[id]
        let end = end(of: id)
        // The assignment can reach past a shorter answer's end (see `ContentRange.Answer.prefix`).
        let room = min(end, c.requestEnd) - c.pos
        guard room <= 0 else { return min(room, c.chunkEnd - c.pos) }
        let reason: StopReason = c.requestEnd > end
            ? .reachedEnd : .retry("the server sent more bytes than the range it declared", after: nil, kind: .protocolViolation)
        connections[id].machine.stop(reason, now: now)
        return nil
    }

    /// `count` bytes of connection `id` went to the writer. Returns the chunk end they reached, if
    /// they did (the engine then settles the connection's bytes before recording the chunk).
    mutating func wrote(_ id: Int, _ count: Int, now: Double) -> Crossing? {
        guard advance(id, by: count, now: now) else { return nil }
        let c = connections[id]
        let k = plan.chunk(containing: c.chunkEnd - 1)
        let wasFinished = scheduler.finished[k]
        let wasRacing = isRacing(id)
        var crossing = Crossing()
        let losers = scheduler.chunkFinished(k, by: id)
        if !wasFinished {
            crossing.finishedChunk = k
            connections[id].attempts = 0
            connections[id].redials = 0
        }
        for l in losers {
            connections[l].machine.cancel(now: now)
            if connections[l].machine.isTransferring { crossing.losers.append(l) }
        }
        if wasRacing && c.pos < c.requestEnd {
            // The race is over either way; this connection is free again.
            connections[id].machine.stop(.reachedEnd, now: now)
        } else if !wasRacing, scheduler.run(of: id) == nil, c.pos < c.requestEnd, id != recalledLoan {
            // Its run is done but its answer runs on (an open-ended first answer): it goes on into
            // the work that follows while nobody else has started on it, rather than end the answer
            // and pay for a new request: the free run that follows; on a host whose requests cost
            // (`RequestCostModel.isCostly`), the run of a connection whose head has not come (on an
            // origin that serves one request at a time, that head would come only after this answer,
            // and elsewhere the request it wastes costs less than ending this answer and a new
            // request's think time); on any host, that of one whose head is late past the host's
            // usual think time (queued). On a host where requests are cheap the others start as they
            // always did, even a small file's that this answer could outrun.
            let others = connections
            let racing = scheduler.duplicates
            let costly = cost.isCostly
            let extended = scheduler.extend(id, after: k) { o in
                let owner = others[o]
                guard !owner.machine.headJudged, racing[o] == nil, owner.source == c.source, owner.machine.isTransferring else { return false }
                return costly || cost.isQueued(think: now - owner.requestStartedAt - cost.networkSeconds(dialled: !owner.linkWasOpen))
            }
            if let o = extended.robbed {
                if connections[o].machine.isTransferring {
                    connections[o].machine.cancel(now: now)
                    crossing.losers.append(o)
                }
            }
        }
        connections[id].chunkEnd = min(c.chunkEnd + plan.chunkSize, plan.totalLength)
        return crossing
    }

    /// A chunk counted as finished must be fetched again (its kept bytes failed their check).
    mutating func reopen(_ k: Int) {
        scheduler.reopen(k)
    }

    // MARK: Ending

    /// A transfer that ended by itself: done with its work (idle), the rest of a shorter answer
    /// asked for at once, or a retry.
    mutating func endedByItself(_ id: Int, _ end: TransferEnd, now: Double) -> [Command] {
        let c = connections[id]
        let stop = self.end(of: id)
        if c.pos >= stop {
            if isRacing(id) { abandonRace(id) }
            return []
        }
        if end == .ok && c.pos == c.requestEnd {
            // The server answered a shorter range than asked, in full: ask for the rest at once,
            // on the same connection, without counting a failure.
            var commands: [Command] = []
            if tracing { commands.append(.trace("connection \(id) continues at \(c.pos) after a shorter answer")) }
            return commands + [start(id, bytes: c.pos..<stop, continuing: true, now: now)]
        }
        // A cut after enough bytes (`CutContinuation`): the next request continues from them at once.
        // This request's bytes (a request after a shorter answer continues its transfer's count);
        // `retryOrFail` ends the download on a `.failed` end whatever they are.
        let progressed = CutContinuation.continuesAtOnce(bytes: c.pos - c.requestStart)
        return retryOrFail(id, end, missing: stop - c.pos, now: now, progressed: progressed)
    }

    mutating func recordFinished(_ id: Int, now: Double) {
        let c = connections[id]
        slowRule.recordFinished(id: id, bytes: c.transferBytes, seconds: now - c.transferStartedAt, heldSeconds: c.held(at: now) - c.heldAtTransfer, now: now)
        if config.sources.count > 1 { noteSourceRate(c, now: now) }
    }
}
