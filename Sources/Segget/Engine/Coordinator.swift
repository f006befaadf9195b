/// Every decision of a download's connections, as a pure value driven by a clock passed in: who
/// fetches what (the `Scheduler`'s runs, steals and end-game races), what a response head and the
/// end of a transfer mean, when to retry, and (in `Coordinator+Policy.swift`) which connection is
/// re-dialled, dropped for a stall, and how many connections auto mode uses.
///
/// It never touches libcurl, the file or the clock: it returns `Command`s that the engine carries
/// out, so that scripted timelines test it without a socket (`CoordinatorTests`).
///
/// One fact in one place: whether a connection races is `scheduler.duplicates`; where its work
/// ends is the scheduler's run (`end(of:)`); which chunks are received is `scheduler.finished`.
///
/// Its stored state is internal so that `Coordinator+Policy.swift` can decide too; only the
/// coordinator changes it (the engine reads it).
struct Coordinator {
    /// The knobs the decisions depend on (from `FetchTarget` and `FetchSettings`).
    struct Config {
        /// Ranged requests, or one plain stream from byte 0 (a server without ranges).
        var ranged = true
        var totalLength: Int64?
        var url = ""
        /// Validators per source (main URL, then mirrors) that every answer must not contradict.
        var sources: [FetchSource] = [FetchSource(url: "")]
        var endGame = true
        var redialSlow = true
        var autoConnections = false
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
        /// A failure worth retrying (a transient network error, or our own abort), described.
        case transient(String)
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
    let config: Config
    var tracing = false
    var plan: ChunkPlan { scheduler.plan }

    /// How many connections may take work now (grows in auto mode).
    var connectionLimit: Int
    /// Chunk → offset up to which an earlier run wrote it (continued from there).
    var partialChunks: [Int: Int64]
    /// Bytes received from the network in this run, and bytes of finished chunks.
    var receivedBytes: Int64 = 0
    var finishedBytes: Int64 = 0
    /// (time, receivedBytes) every progress tick, newest last.
    var rateSamples: [(Double, Int64)] = []
    /// How long recent first body bytes took after their request (held time left out), newest last.
    var firstByteWaits: [Double] = []
    /// Decides which connections are too slow to keep their work (see `judgeSlowConnections`).
    var slowRule: SlowConnectionRule
    var auto = AutoGrowth()

    /// The download must end: the first failure, a changed resource, or unusable ranges (in this
    /// order of precedence).
    private(set) var failure: SeggetError?
    private(set) var changed: String?
    private(set) var ignored: String?

    init(plan: ChunkPlan, connections n: Int, config: Config, isFinished: (Int) -> Bool = { _ in false },
         maxRunChunks: Int? = nil, partialChunks: [Int: Int64] = [:]) {
        self.config = config
        connectionLimit = config.ranged && config.autoConnections ? min(n, Self.autoInitial) : n
        slowRule = SlowConnectionRule(
            maxConsecutiveRedials: config.maxRedialsPerConnection,
            maxTotalRedials: Self.maxTotalRedials(connections: n, chunks: plan.chunkCount))
        self.partialChunks = partialChunks
        scheduler = Scheduler(
            plan: plan, connections: connectionLimit, isFinished: isFinished, maxRunChunks: maxRunChunks,
            runStarts: Set(partialChunks.keys))
        connections = (0..<n).map { Connection(id: $0) }
        for i in connections.indices { connections[i].source = i % max(1, config.sources.count) }
        for k in 0..<plan.chunkCount where scheduler.finished[k] { finishedBytes += Int64(plan.byteRange(ofChunk: k).count) }
    }

    // MARK: Reading

    /// Whether connection `id` races another for a chunk (the scheduler alone knows).
    func isRacing(_ id: Int) -> Bool { scheduler.duplicates[id] != nil }

    /// Where connection `id` must stop: the end of its run or of the chunk it races for, as the
    /// scheduler has them now (a robbed run ends at the cut); its position when it holds nothing.
    func end(of id: Int) -> Int64 {
        guard config.ranged else { return connections[id].streamEnd }
        if let r = scheduler.run(of: id) { return plan.byteRange(ofChunk: r.upperBound - 1).upperBound }
        if let k = scheduler.duplicates[id] { return plan.byteRange(ofChunk: k).upperBound }
        return connections[id].pos
    }

    /// Every chunk is received (ranged), or the stream has ended.
    var isComplete: Bool {
        if config.ranged { return scheduler.isComplete }
        let c = connections[0]
        return c.machine.isIdle && c.pos >= c.streamEnd
    }

    /// The error that ends the download, if one was decided.
    var stop: (any Error)? {
        if let failure { return failure }
        if let changed { return ResourceChanged(reason: changed) }
        if let ignored { return RangesIgnored(reason: ignored) }
        return nil
    }

    // MARK: Starting

    /// The first requests: ranged, the connections with work start `rampStep` apart (the first at
    /// once); a stream starts its one request.
    mutating func begin(now: Double) -> [Command] {
        guard config.ranged else {
            connections[0].streamEnd = config.totalLength ?? Int64.max
            return [start(0, bytes: 0..<connections[0].streamEnd, now: now)]
        }
        let starting = connections.map(\.id).filter { scheduler.run(of: $0) != nil }
        let step = Self.rampStep(connections: starting.count)
        var commands: [Command] = []
        for (k, id) in starting.enumerated() {
            if k == 0, let r = scheduler.run(of: id) {
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
        let chunkEnd = config.ranged ? plan.byteRange(ofChunk: plan.chunk(containing: bytes.lowerBound)).upperBound : bytes.upperBound
        connections[id].begin(bytes, chunkEnd: chunkEnd, continuing: continuing, now: now)
        return .start(id, bytes: bytes, fresh: fresh, newPath: newPath)
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
        var commands: [Command] = []
        for id in connections.indices {
            switch connections[id].machine.tick(now: now) {
            case .startRequest(.ramp):
                // Robbed of everything meanwhile: it is idle and gets work like any idle connection.
                if let r = scheduler.run(of: id) { commands.append(start(id, bytes: runBytes(r), now: now)) }
            case .startRequest(.retry):
                if config.ranged {
                    guard isRacing(id) || scheduler.run(of: id) != nil else { continue }
                }
                // Without ranges a retry can only start over from byte 0.
                let from = config.ranged ? connections[id].pos : 0
                commands.append(start(id, bytes: from..<end(of: id), fresh: true, now: now))
            default:
                continue
            }
        }
        return commands
    }

    /// Hands work to the idle connections within the limit: a free run, a share stolen from a busy
    /// connection, or in the end game a race for the chunk expected to finish last.
    mutating func assignIdle(now: Double) -> [Command] {
        guard config.ranged else { return [] }
        let idle = connections.prefix(connectionLimit).map(\.id).filter {
            connections[$0].machine.isIdle && scheduler.run(of: $0) == nil && scheduler.duplicates[$0] == nil
        }
        var commands: [Command] = []
        for (i, id) in idle.enumerated() {
            // Estimates are read before the scheduler is asked (it cannot be read while it decides).
            let remaining = connections.map { remainingSeconds($0, now: now) }
            let runTimes = connections.map { runSeconds($0, now: now) }
            let stealRates = connections.map { $0.machine.isTransferring ? (rate($0, now: now) ?? averageRate($0, now: now) ?? -1) : Double.infinity }
            let chunkSeconds = typicalRate(now: now).map { Double(plan.chunkSize) / $0 }
            let chunkSize = Double(plan.chunkSize)
            guard let a = scheduler.nextAssignment(
                for: id, allowDuplicates: config.endGame, remainingSeconds: { remaining[$0] },
                minRemainingSeconds: Self.minRaceSeconds, maxRacers: Self.maxRacers, thieves: idle.count - i,
                chunkSeconds: chunkSeconds, runSeconds: { runTimes[$0] },
                worthStealing: { Self.worthStealing(rate: stealRates[$0], notStartedChunks: $1, chunkSize: chunkSize) })
            else { continue }
            if tracing { commands.append(.trace("w\(id) gets \(a)")) }
            switch a {
            case .run(let r), .stolen(let r, _, _):
                // A victim's run now ends at the cut (`end(of:)` reads it from the scheduler).
                commands.append(start(id, bytes: runBytes(r), now: now))
            case .duplicate(let chunk, let owner):
                let chunkRange = plan.byteRange(ofChunk: chunk)
                let from = max(chunkRange.lowerBound, min(connections[owner].pos, chunkRange.upperBound - 1))
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

    /// The first body bytes of connection `id`'s response arrived: judges its head (see
    /// `ResponseVerdict`). False refuses the bytes (the transfer is ending).
    mutating func headArrived(_ id: Int, head: ResponseHead, now: Double) -> Bool {
        guard connections[id].machine.headArrived(refusal: judge(id, head: head)) == .write else { return false }
        let c = connections[id]
        firstByteWaits.append(max(0, now - c.requestStartedAt - (c.held(at: now) - c.heldAtRequest)))
        if firstByteWaits.count > 16 { firstByteWaits.removeFirst() }
        if c.firstByteAt == nil {
            connections[id].firstByteAt = now
            connections[id].heldAtFirstByte = c.held(at: now)
            connections[id].bytesAtFirstByte = c.transferBytes
        }
        return true
    }

    /// Judges a response head: nil accepts it (a shorter honest answer moves `requestEnd`), a stop
    /// reason refuses it.
    private mutating func judge(_ id: Int, head: ResponseHead) -> StopReason? {
        let c = connections[id]
        let src = config.sources[c.source % config.sources.count]
        let question = ResponseQuestion(
            range: c.requestStart..<c.requestEnd, ranged: config.ranged, totalLength: config.totalLength,
            etag: src.etag, lastModified: src.lastModified, url: config.url)
        switch ResponseVerdict(for: question, head: head) {
        case .accept: return nil
        case .acceptPrefix(let end):
            // An honest shorter answer: take it, and `transferEnded` asks for the rest (not a failure).
            connections[id].requestEnd = end
            return nil
        case .retry(let why, let after, let kind): return .retry(why, after: after, kind: kind)
        case .rangesIgnored(let why): return .rangesIgnored(why)
        case .resourceChanged(let why): return .resourceChanged(why)
        case .fatal(let e): return .fatal(e)
        }
    }

    /// Body bytes arrived; `budgetAllows` is false when `--max-speed` has nothing to spend now.
    mutating func bytesArrived(_ id: Int, budgetAllows: Bool, now: Double) -> ConnectionMachine.Action {
        connections[id].machine.bytesArrived(budgetAllows: budgetAllows, now: now)
    }

    /// How many bytes connection `id` may write at its position now: up to its chunk's end, its
    /// work's end and its request's end. Nil when it must write no more (the reason is decided).
    mutating func room(_ id: Int, now: Double) -> Int64? {
        let c = connections[id]
        let end = end(of: id)
        // The assignment can reach past a shorter answer's end (see `ContentRange.Answer.prefix`).
        let room = min(end, c.requestEnd) - c.pos
        guard room <= 0 else { return min(room, c.chunkEnd - c.pos) }
        let reason: StopReason
        if c.requestEnd > end {
            reason = .reachedEnd
        } else if config.ranged {
            reason = .retry("the server sent more bytes than the range it declared", after: nil, kind: .protocolViolation)
        } else {
            reason = .fatal(SeggetError(.protocolViolation, "the server sent more than the \(end) bytes it announced; the file on the server may have changed. Run the command again."))
        }
        connections[id].machine.stop(reason, now: now)
        return nil
    }

    /// `count` bytes of connection `id` went to the writer. Returns the chunk end they reached, if
    /// they did (the engine then settles the connection's bytes before recording the chunk).
    mutating func wrote(_ id: Int, _ count: Int, now: Double) -> Crossing? {
        connections[id].pos += Int64(count)
        connections[id].transferBytes += Int64(count)
        connections[id].lastByteAt = now
        receivedBytes += Int64(count)
        guard connections[id].pos == connections[id].chunkEnd else { return nil }
        guard config.ranged else {
            connections[id].chunkEnd = connections[id].streamEnd
            return Crossing()
        }
        let c = connections[id]
        let k = plan.chunk(containing: c.chunkEnd - 1)
        let wasFinished = scheduler.finished[k]
        let wasRacing = isRacing(id)
        var crossing = Crossing()
        let losers = scheduler.chunkFinished(k, by: id)
        if !wasFinished {
            finishedBytes += Int64(plan.byteRange(ofChunk: k).count)
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
        }
        connections[id].chunkEnd = min(c.chunkEnd + plan.chunkSize, plan.totalLength)
        return crossing
    }

    /// The budget allows receiving again: a paused connection continues.
    mutating func resume(_ id: Int, now: Double) {
        connections[id].machine.resume(now: now)
        connections[id].lastByteAt = now
    }

    /// A chunk counted as finished must be fetched again (its kept bytes failed their check).
    mutating func reopen(_ k: Int) {
        guard scheduler.finished[k] else { return }
        scheduler.reopen(k)
        finishedBytes -= Int64(plan.byteRange(ofChunk: k).count)
    }

    // MARK: Ending

    /// The loser of a race was taken out of libcurl.
    mutating func removed(_ id: Int, now: Double) {
        if connections[id].machine.isTransferring { _ = connections[id].machine.transferEnded(now: now) }
    }

    /// Connection `id`'s transfer is gone: `end` says how libcurl ended it, `head` is what came of
    /// the response. Decides what follows: nothing (idle), the rest of a shorter answer, a retry,
    /// or the end of the download.
    mutating func transferEnded(_ id: Int, _ end: TransferEnd, head: ResponseHead, now: Double) -> [Command] {
        let headJudged = connections[id].machine.headJudged
        var reason = connections[id].machine.transferEnded(now: now)
        if config.ranged {
            let c = connections[id]
            slowRule.recordFinished(id: id, bytes: c.transferBytes, seconds: now - c.transferStartedAt, heldSeconds: c.held(at: now) - c.heldAtTransfer, now: now)
        }
        // No response head at all (refused, reset, timed out): a network failure, not an HTTP answer.
        if reason == nil, !headJudged, head.status != 0 { reason = judge(id, head: head) }
        var commands: [Command] = []
        if tracing { commands.append(.trace("w\(id) ended: \(reason.map { "\($0)" } ?? "none") pos=\(connections[id].pos) end=\(self.end(of: id))")) }
        switch reason {
        case .reachedEnd, .cancelled:
            becomeIdle(id)
        case .fatal(let e):
            if failure == nil { failure = e }
        case .resourceChanged(let r):
            if changed == nil { changed = r }
        case .retry(let why, let after, let kind):
            commands += scheduleRetry(id, reason: why, after: after, kind: kind, now: now)
        case .rangesIgnored(let r):
            if ignored == nil { ignored = r }
        case nil:
            if !config.ranged && config.totalLength == nil && end == .ok {
                // A chunked or close-delimited body ends when the server says so.
                connections[id].streamEnd = connections[id].pos
            }
            let c = connections[id]
            let stop = self.end(of: id)
            if c.pos >= stop {
                if config.ranged { becomeIdle(id) }
            } else if config.ranged && end == .ok && c.pos == c.requestEnd {
                // The server answered a shorter range than asked, in full: ask for the rest at once,
                // on the same connection, without counting a failure.
                if tracing { commands.append(.trace("w\(id) continues at \(c.pos) after a shorter answer")) }
                commands.append(start(id, bytes: c.pos..<stop, continuing: true, now: now))
            } else if end == .ok || end == .partial {
                commands += scheduleRetry(id, reason: "the connection ended \(stop - c.pos) bytes early", after: nil, kind: .network, now: now)
            } else if case .transient(let why) = end {
                commands += scheduleRetry(id, reason: why, after: nil, kind: .network, now: now)
            } else if case .failed(let e) = end {
                failure = e
            }
        }
        return commands
    }

    /// Connection `id` has nothing more to do; a racer gives up its race (its owner is still on it).
    mutating func becomeIdle(_ id: Int) {
        if isRacing(id) { scheduler.abandon(id) }
    }

    /// Counts a failure of connection `id` and schedules its retry, or ends the download when the
    /// retries or the time are used up.
    mutating func scheduleRetry(_ id: Int, reason: String, after: Double?, kind: FailureKind, now: Double) -> [Command] {
        if isRacing(id) {
            // A failed racer just stops; the owner is still on it.
            becomeIdle(id)
            return []
        }
        connections[id].attempts += 1
        let attempts = connections[id].attempts
        if attempts > config.retries {
            let hint = kind == .protocolViolation ? "the server's answers are unusable; try -n 1 or another server" : "run the same command to resume later, or raise --retries"
            failure = SeggetError(kind, "bytes \(connections[id].pos)-\(end(of: id) - 1) failed \(attempts) time\(attempts == 1 ? "" : "s") (last: \(reason)); \(hint).")
            return []
        }
        switch RetryPolicy.decide(
            attempt: attempts, reason: reason, base: config.retryWait, retryAfter: after, maxWait: config.maxRetryWait,
            deadline: config.deadline, now: now, jitter: config.jitter())
        {
        case .giveUp(let message):
            if failure == nil { failure = SeggetError(.network, message) }
            return []
        case .wait(let delay, let note):
            connections[id].machine.wait(until: now + delay, .retry)
            return [.event(.retry(connection: id, attempt: attempts, delay: delay, reason: note.map { "\(reason); \($0)" } ?? reason))]
        }
    }

    /// A write or journal failure ends the download (the first failure stands).
    mutating func fail(_ error: SeggetError) {
        if failure == nil { failure = error }
    }

    /// The loop waited `seconds` for the writer: held time for every connection with a transfer,
    /// which neither the slow rule nor the stall timeout may blame on the network.
    mutating func heldByWriter(_ seconds: Double) {
        guard seconds > 0 else { return }
        for id in connections.indices where connections[id].machine.isTransferring {
            connections[id].machine.heldByWriter(seconds)
            connections[id].lastByteAt += seconds
        }
    }
}
