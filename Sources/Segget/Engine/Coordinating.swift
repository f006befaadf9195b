/// What `FetchEngine` asks of the pure value that decides for its connections: `Coordinator` for
/// ranged requests (chunks, steals, races, re-dials), `SingleStream` for one plain stream from
/// byte 0 (a server without ranges). Both are driven by a clock passed in and answer with
/// `Coordinator.Command`s; what they share (head verdicts, retries, the stall timeout, held time,
/// rate samples) is implemented once, below.
protocol Coordinating {
    var connections: [Connection] { get set }
    var config: Coordinator.Config { get }
    var tracing: Bool { get set }
    /// Bytes received from the network in this run.
    var receivedBytes: Int64 { get set }
    /// (time, receivedBytes) every progress tick, newest last.
    var rateSamples: [(Double, Int64)] { get set }
    /// How long recent first body bytes took after their request (held time left out), newest last.
    var firstByteWaits: [Double] { get set }
    /// The same wait, kept by source too where there are several (see `Coordinator.sourceFirstByteWaits`).
    mutating func noteFirstByteWait(_ wait: Double, source: Int)
    /// What ends the download, in this order of precedence: a failure, a changed resource, ranges
    /// that turned out unusable.
    var failure: SeggetError? { get set }
    var changed: String? { get set }
    var ignored: String? { get set }
    /// Unusable answers (`FailureKind.protocolViolation`: a `Content-Range` other than asked, a 206
    /// without one, more bytes than declared) since the last answer accepted, across connections.
    var unusableInARow: Int { get set }
    /// What a request to the host costs, as the download's own requests taught (see `RequestCostModel`).
    var cost: RequestCostModel { get set }
    /// Requests made, and refusals (429, 503 for a host's limit) met, in this run.
    var requestsMade: Int { get }

    /// Bytes done for good: finished chunks, or the stream's bytes.
    var finishedBytes: Int64 { get }
    /// Which chunks are received (empty for a stream).
    var finishedChunks: [Bool] { get }
    var isComplete: Bool { get }
    /// Where connection `id` must stop.
    func end(of id: Int) -> Int64
    /// Whether connection `id` races another for a chunk.
    func isRacing(_ id: Int) -> Bool

    /// The first requests.
    mutating func begin(now: Double) -> [Coordinator.Command]
    /// What the connections warmed beside the probe taught (see `ConnectionWarmUp`), before `begin`.
    mutating func learn(warmUp: WarmUpOutcome, now: Double) -> [Coordinator.Command]
    /// Starts the connections whose ramp step or retry delay has come.
    mutating func startDue(now: Double) -> [Coordinator.Command]
    /// Hands work to idle connections.
    mutating func assignIdle(now: Double) -> [Coordinator.Command]
    /// A speed cap held bytes back at `now` (see `EngineCore.Event.capHeld`).
    mutating func noteCapHeld(now: Double)
    /// The kernel held `bytes` of connection `id`'s answer received and not yet read, just before a
    /// round of the slow rule (see `EngineCore.Event.unread`).
    mutating func noteUnread(_ id: Int, bytes: Int)
    /// Connection `id`'s answer head is in (`EngineCore.Event.answering`).
    mutating func noteAnswering(_ id: Int)
    /// How many bytes connection `id` may write now; nil when it must write no more (the reason is
    /// decided).
    mutating func room(_ id: Int, now: Double) -> Int64?
    /// `count` bytes of connection `id` went to the writer; the chunk end they reached, if any.
    mutating func wrote(_ id: Int, _ count: Int, now: Double) -> Coordinator.Crossing?
    /// What follows when a transfer ended by itself (no stop reason was decided).
    mutating func endedByItself(_ id: Int, _ end: Coordinator.TransferEnd, now: Double) -> [Coordinator.Command]
    /// Notes a finished transfer's rate (for the slow rule).
    mutating func recordFinished(_ id: Int, now: Double)
    /// A racer gives up its race (its owner is still on the chunk).
    mutating func abandonRace(_ id: Int)
    /// Racer `id` failed: its chunk's races wait (see `RaceHolds`).
    mutating func holdRaces(afterFailureOf id: Int, reason: String, retryAfter: Double?, now: Double)
    /// A progress tick's decisions (after the shared samples and stall timeout).
    mutating func periodicDecisions(now: Double) -> [Coordinator.Command]
    /// Connections borrowed from a batch's lender (see `ConnectionLender`) and in use now.
    var loans: Int { get }
    /// Whether a borrowed connection would find work worth it now.
    func wouldUseLoan(now: Double) -> Bool
    /// Takes `count` borrowed connections into use.
    mutating func addLoans(_ count: Int)
    /// Stops using borrowed connections that have nothing to do; returns how many to give back.
    mutating func returnIdleLoans() -> Int
    /// The lender is short: one borrowed connection winds down to be given back (see `Coordinator.recallLoan`).
    mutating func recallLoan()
    /// The lender is short no longer.
    mutating func endRecall()
    mutating func judgeSlowConnections(now: Double) -> [Coordinator.Command]
    func progress(now: Double, elapsed: Double) -> DownloadProgress
    /// A chunk counted as finished must be fetched again.
    mutating func reopen(_ k: Int)
    /// Connection `id`'s response head was accepted.
    mutating func accepted(_ id: Int)
    /// Connection `id`'s request was refused with `head` (429 or 503, its `refusalWait` the wait it
    /// named): the commands when that is the host's connection limit, nil when it is a failure to retry.
    mutating func refusedByHost(_ id: Int, head: ResponseHead, now: Double) -> [Command]?
    /// The host's first bytes show it queues requests: the commands of the push-back.
    mutating func judgeSaturation(now: Double) -> [Command]
    /// Source `s` gets no more work; nil when it is the last (see `Coordinator+Sources.swift`).
    mutating func dropSource(_ s: Int, now: Double) -> [Command]?
    /// Connection `id`'s source failed for good: its commands when other sources go on, else nil.
    mutating func sourceFailed(of id: Int, why: String, now: Double) -> [Command]?
    /// A mirror joins the sources (see `Coordinator+Sources.swift`).
    mutating func addSource(_ source: FetchSource, now: Double) -> [Command]
}

extension Coordinating {
    typealias Command = Coordinator.Command

    /// The error that ends the download, if one was decided.
    var stop: (any Error)? {
        if let failure { return failure }
        if let changed { return ResourceChanged(reason: changed) }
        if let ignored { return RangesIgnored(reason: ignored) }
        return nil
    }

    /// Prepares connection `id`'s request for `bytes`, whose first byte lies in a chunk (or stream)
    /// ending at `chunkEnd`, and says so.
    mutating func start(_ id: Int, bytes: Range<Int64>, chunkEnd: Int64, fresh: Bool = false, newPath: Bool = false,
                        continuing: Bool = false, now: Double) -> Command {
        let source = connections[id].source
        let ahead = connections.reduce(0) { $0 + ($1.machine.isTransferring && $1.source == source && $1.id != id ? 1 : 0) }
        let open = !fresh && connections.contains { $0.leftLinkOpen && $0.source == source }
        connections[id].begin(bytes, chunkEnd: chunkEnd, continuing: continuing, now: now)
        connections[id].requestNumber = cost.requestSent()
        connections[id].aheadAtSend = ahead
        connections[id].dialled = nil
        connections[id].linkWasOpen = open || (continuing && !fresh)
        return .start(id, bytes: bytes, fresh: fresh, newPath: newPath)
    }

    /// Requests of the download sent so far.
    var requestsMade: Int { cost.sent }

    /// The shell reports how connection `id`'s request reached its server: the kernel's round trip
    /// on its connection, and whether it opened a new connection (before its head is judged).
    mutating func connected(_ id: Int, roundTrip: Double?, newConnection: Bool?) {
        if let roundTrip { cost.measured(roundTrip: roundTrip) }
        if let newConnection { connections[id].dialled = newConnection }
    }

    /// The heads still awaited, as lower bounds of their waits (see `RequestCostModel.servedAtOnce`).
    func pendingAnswers(now: Double) -> [RequestCostModel.Answer] {
        connections.compactMap { c in
            // A head without body bytes yet (a server that sends its head and then stalls) is not a
            // request waiting in the server's queue: counted, it taught a host limit of 1 that held
            // every other download to that host up in a daemon.
            guard c.machine.isTransferring, !c.machine.headJudged, c.answeredRequestAt != c.requestStartedAt, c.source == 0
            else { return nil }
            let waited = now - c.requestStartedAt - (c.held(at: now) - c.heldAtRequest)
            return .init(ahead: c.aheadAtSend, think: max(0, waited - cost.networkSeconds(dialled: !c.linkWasOpen)))
        }
    }

    // MARK: Receiving

    /// The first body bytes of connection `id`'s response arrived: judges its head (see
    /// `ResponseVerdict`). False refuses the bytes (the transfer is ending).
    mutating func headArrived(_ id: Int, head: ResponseHead, now: Double) -> Bool {
        guard connections[id].machine.headArrived(refusal: judge(id, head: head)) == .write else { return false }
        accepted(id)
        connections[id].skipContinuationWait(now: now)
        connections[id].startClockAtFirstByte(now: now)
        let c = connections[id]
        let wait = max(0, now - c.requestStartedAt - (c.held(at: now) - c.heldAtRequest))
        firstByteWaits.append(wait)
        if firstByteWaits.count > 16 { firstByteWaits.removeFirst() }
        noteFirstByteWait(wait, source: c.source)
        if c.source == 0 {
            let closes = head.closesConnection
            if c.continuesProbe {
                // Its wait was the probe's first answer, taught at `begin`.
                cost.noteConnectionClose(closes)
            } else {
                cost.answered(ahead: c.aheadAtSend, wait: wait, dialled: c.dialled ?? !c.linkWasOpen, closes: closes)
            }
        }
        if c.firstByteAt == nil {
            connections[id].firstByteAt = now
            connections[id].heldAtFirstByte = c.held(at: now)
            connections[id].bytesAtFirstByte = c.transferBytes
        }
        return true
    }

    /// Judges a response head: nil accepts it (a shorter honest answer moves `requestEnd`), a stop
    /// reason refuses it.
    mutating func judge(_ id: Int, head: ResponseHead) -> StopReason? {
        let c = connections[id]
        let src = config.sources[c.source % config.sources.count]
        let question = ResponseQuestion(
            range: c.requestStart..<c.requestEnd, ranged: config.ranged, totalLength: config.totalLength,
            etag: src.etag, lastModified: src.lastModified, url: config.url)
        switch ResponseVerdict(for: question, head: head) {
        case .accept:
            unusableInARow = 0
            return nil
        case .acceptPrefix(let end):
            // An honest shorter answer: take it, and `transferEnded` asks for the rest (not a failure).
            connections[id].requestEnd = end
            unusableInARow = 0
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

    /// Counts `count` written bytes of connection `id`; true when they reach its chunk's end.
    mutating func advance(_ id: Int, by count: Int, now: Double) -> Bool {
        connections[id].pos += Int64(count)
        connections[id].transferBytes += Int64(count)
        connections[id].bytesReceived += Int64(count)
        connections[id].lastByteAt = now
        receivedBytes += Int64(count)
        return connections[id].pos == connections[id].chunkEnd
    }

    /// The budget allows receiving again: a paused connection continues.
    mutating func resume(_ id: Int, now: Double) {
        connections[id].machine.resume(now: now)
        connections[id].lastByteAt = now
    }

    // MARK: Ending

    /// Connection `id`'s transfer was taken out of libcurl (a lost race, the end of the loop).
    mutating func removed(_ id: Int, now: Double) {
        if connections[id].machine.isTransferring { _ = connections[id].machine.transferEnded(now: now) }
        connections[id].leftLinkOpen = false
    }

    /// Connection `id`'s transfer is gone: `end` says how libcurl ended it, `head` is what came of
    /// the response. Decides what follows: nothing (idle), the rest of a shorter answer, a retry,
    /// or the end of the download.
    mutating func transferEnded(_ id: Int, _ end: Coordinator.TransferEnd, head: ResponseHead, now: Double) -> [Command] {
        let headJudged = connections[id].machine.headJudged
        if headJudged, connections[id].source == 0 { cost.transferEnded(at: now) }
        var reason = connections[id].machine.transferEnded(now: now)
        connections[id].leftLinkOpen = reason == nil && end == .ok
        recordFinished(id, now: now)
        // No response head at all (refused, reset, timed out): a network failure, not an HTTP answer.
        if reason == nil, !headJudged, head.status != 0 { reason = judge(id, head: head) }
        var commands: [Command] = []
        if tracing { commands.append(.trace("connection \(id) ended: \(reason.map { "\($0)" } ?? "none") pos=\(connections[id].pos) end=\(self.end(of: id))")) }
        switch reason {
        case .reachedEnd, .cancelled:
            if isRacing(id) { abandonRace(id) }
        case .fatal(let e):
            if let dropped = sourceFailed(of: id, why: e.message, now: now) { return commands + dropped }
            if failure == nil { failure = e }
        case .resourceChanged(let r):
            if let dropped = sourceFailed(of: id, why: r, now: now) { return commands + dropped }
            if changed == nil { changed = r }
        case .retry(let why, let after, let kind):
            if kind == .httpStatus, head.status == 429 || head.status == 503,
                let refused = refusedByHost(id, head: head, now: now)
            {
                commands += refused
            } else {
                commands += scheduleRetry(id, reason: why, after: after, kind: kind, now: now)
            }
        case .rangesIgnored(let r):
            if let dropped = sourceFailed(of: id, why: r, now: now) { return commands + dropped }
            if ignored == nil { ignored = r }
        case nil:
            commands += endedByItself(id, end, now: now)
        }
        return commands
    }

    /// The common end of a transfer that ended by itself short of its work: a retry for a transfer
    /// cut short or a transient error, the end of the download for any other error.
    ///
    /// `progressed`: the transfer brought enough bytes before it was cut (`CutContinuation`), and the
    /// next one continues from them: it goes out at once and starts a new count of failures.
    mutating func retryOrFail(_ id: Int, _ end: Coordinator.TransferEnd, missing: Int64, now: Double, progressed: Bool = false) -> [Command] {
        let after = progressed ? ", after \(connections[id].pos - connections[id].requestStart) bytes" : ""
        switch end {
        case .ok, .partial:
            // A body of unknown length (its end `Int64.max` until the server ends it) misses an
            // unknown number of bytes: "9223372036852678650 bytes early" said nothing true.
            let short = missing >= Int64.max / 2 ? "before the end of its answer" : "\(missing) byte\(missing == 1 ? "" : "s") early"
            return scheduleRetry(id, reason: "the connection ended \(short)\(after)", after: nil, kind: .network, now: now, atOnce: progressed)
        case .transient(let why, let cause):
            return scheduleRetry(id, reason: why + after, after: nil, kind: .network, now: now, atOnce: progressed, cause: cause)
        case .failed(let e):
            failure = e
            return []
        }
    }

    /// Counts a failure of connection `id` and schedules its retry, or ends the download when the
    /// retries or the time are used up.
    /// `atOnce`: the transfer made progress before it was cut (see `retryOrFail`): no backoff, and
    /// the count of failures starts again.
    /// `cause`: the kind of network failure it was (`TransferEnd.transient`), kept on the failure.
    mutating func scheduleRetry(
        _ id: Int, reason: String, after: Double?, kind: FailureKind, now: Double, atOnce: Bool = false, cause: NetworkCause? = nil
    ) -> [Command] {
        if kind == .protocolViolation { unusableInARow += 1 }
        if isRacing(id) {
            // A failed racer stops; the owner is still on it. It takes no work before a backoff of
            // its own: at once, it raced the same chunk again from the owner's position, request
            // after request while the owner waited out its backoff (a server that closed every
            // answer after 500,000 bytes was asked 840 times for a 32 MiB file). Nor is the chunk
            // raced again by any connection before its owner's next attempt (`RaceHolds`).
            holdRaces(afterFailureOf: id, reason: reason, retryAfter: after, now: now)
            abandonRace(id)
            // The first backoff, as `RetryPolicy` caps it; no deadline (the racer holds no work).
            if case .wait(let delay, _) = RetryPolicy.decide(
                attempt: 1, reason: reason, base: config.retryWait, retryAfter: nil, maxWait: config.maxRetryWait,
                deadline: nil, now: now, jitter: config.jitter())
            {
                connections[id].machine.wait(until: now + delay, .retry)
            }
            return []
        }
        if atOnce {
            // A continuation counts no failure, whatever `--retries` allows (0 included): the count
            // starts again at this retry.
            connections[id].attempts = 1
            connections[id].machine.wait(until: now, .retry)
            return [.event(.retry(connection: id, attempt: 1, delay: 0, reason: reason))]
        }
        connections[id].attempts += 1
        let attempts = connections[id].attempts
        // Every connection's answer unusable, one after another, and none accepted between: the
        // server mangles every range now (a shift in the middle of a download met 40 requests and
        // 18 s of backoff at -n 8 before the retries ran out). A glitch among good answers is
        // retried as before: an accepted answer starts the count again.
        let endsRun = kind == .protocolViolation && unusableInARow >= Self.unusableLimit(connections: connections.count)
            && attempts <= config.retries
        if attempts > config.retries || endsRun {
            if let dropped = sourceFailed(of: id, why: reason, now: now) {
                if endsRun { unusableInARow = 0 }
                return dropped
            }
            // A body of unknown length ends at `Int64.max` until the server ends it: "bytes
            // 5000-9223372036854775806" showed the sentinel, not a byte the file has.
            let last = end(of: id)
            let bytes = last >= Int64.max / 2 ? "\(connections[id].pos) onwards" : "\(connections[id].pos)-\(last - 1)"
            if endsRun {
                failure = SeggetError(kind, "\(unusableInARow) answers in a row were unusable, none accepted between them (last, for bytes \(bytes): \(reason)); \(NextStep.tryOneConnection.cli).")
                return []
            }
            let hint = kind == .protocolViolation ? "the server's answers are unusable; \(NextStep.tryOneConnection.cli)" : (config.ranged ? NextStep.resumeLaterOrRaiseRetries : .againOrRaiseRetries).cli
            var e = SeggetError(kind, "bytes \(bytes) failed \(attempts) time\(attempts == 1 ? "" : "s") (last: \(reason)); \(hint).")
            e.networkCause = cause
            failure = e
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

    /// How many unusable answers in a row end a download at once (`unusableInARow`): one from each
    /// of its connections, and at least 3.
    static func unusableLimit(connections: Int) -> Int { max(3, connections) }

    /// A write or journal failure ends the download (the first failure stands).
    mutating func fail(_ error: SeggetError) {
        if failure == nil { failure = error }
    }

    // MARK: Time

    /// The loop waited `seconds` for the writer: held time for every connection with a transfer,
    /// which neither the slow rule nor the stall timeout may blame on the network.
    mutating func heldByWriter(_ seconds: Double) {
        guard seconds > 0 else { return }
        for id in connections.indices where connections[id].machine.isTransferring {
            connections[id].machine.heldByWriter(seconds)
            connections[id].lastByteAt += seconds
        }
    }

    /// A progress tick: rate samples, the stall timeout, then what else the mode decides then.
    mutating func tick(now: Double) -> [Command] {
        for id in connections.indices where connections[id].machine.isTransferring { connections[id].sample(now: now) }
        for id in connections.indices { connections[id].sampleShown(now: now) }
        rateSamples.append((now, receivedBytes))
        if rateSamples.count > 20 { rateSamples.removeFirst() }
        return dropStalledConnections(now: now) + periodicDecisions(now: now)
    }

    /// Connection `id`'s connection is still being made (`EngineCore.Event.stillConnecting`): the
    /// stall clock is paused until it is, so that a stall timeout below the connection timeout does
    /// not cut a slow connect (libcurl ends one that outlasts its own timeout, named as such). Paused,
    /// not restarted. The slow rule gives a request whose connection is being made the time its
    /// handshakes take, and once it is made counts its wait from then (see `judgeSlowConnections`).
    mutating func stillConnecting(_ id: Int, now: Double) {
        guard connections.indices.contains(id), connections[id].machine.isTransferring else { return }
        let from = max(connections[id].requestStartedAt, connections[id].connectingCountedTo)
        connections[id].lastByteAt += max(0, now - from)
        connections[id].connectingCountedTo = now
        connections[id].heldWhenConnecting = connections[id].held(at: now)
        connections[id].stillConnecting = true
    }

    /// At the end of a pass: what the shell told of connections still being made held for that
    /// pass only (it tells again before the next round of the slow rule or progress tick).
    mutating func forgetStillConnecting() {
        for id in connections.indices where connections[id].stillConnecting { connections[id].stillConnecting = false }
    }

    /// A connection that delivered nothing for the stall timeout is dropped and retried from the
    /// byte it reached. (libcurl's low-speed limit averages over several seconds, so it reacts late.)
    /// Time held back (a `--max-speed` pause, the writer) does not count.
    mutating func dropStalledConnections(now: Double) -> [Command] {
        let limit = config.stallTimeout
        guard limit > 0 else { return [] }
        var commands: [Command] = []
        for id in connections.indices {
            let c = connections[id]
            guard c.machine.isTransferring, !c.machine.isPaused, now - c.lastByteAt > limit else { continue }
            if tracing { commands.append(.trace("connection \(id) stalled for \(Format.fixed(now - c.lastByteAt, 1)) s")) }
            commands.append(.remove(id))
            switch connections[id].machine.transferEnded(now: now) {
            case .reachedEnd, .cancelled:
                // It had finished its part (a race won or lost) and waited for its last bytes.
                if isRacing(id) { abandonRace(id) }
            default:
                commands += scheduleRetry(id, reason: "no data for \(Format.seconds(now - c.lastByteAt))", after: nil, kind: .network, now: now, cause: .timedOut)
            }
        }
        return commands
    }

    // MARK: Rates

    /// The rate of connection `c` over about the last `window` seconds; nil until known.
    func rate(_ c: Connection, now: Double, window: Double = 1) -> Double? {
        c.rate(now: now, window: window, interval: config.progressInterval)
    }

    /// The median of recent first-byte waits; nil before the first.
    var usualFirstByteWait: Double? {
        firstByteWaits.isEmpty ? nil : firstByteWaits.sorted()[firstByteWaits.count / 2]
    }

    /// The total rate over the newest `window` seconds of progress ticks.
    func totalRate(window: Double, minSpan: Double = 0) -> Double? {
        guard let last = rateSamples.last else { return nil }
        return sampledRate(rateSamples, endingAt: last.0, window: window, minSpan: minSpan)
    }
}
