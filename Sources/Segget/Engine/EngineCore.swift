/// The engine's pure core, with one entry point: `handle(_:now:)` takes what happened (a pass of the
/// loop began or ended, a response's bytes arrived, a transfer ended, the writer held the loop, a
/// lender offered connections) and returns what the I/O shell must do, in order. The shell
/// (`FetchEngine`), the scripted tests and the network simulator drive this same entry point, so
/// the order of decisions lives here once and cannot drift between them.
///
/// It holds one of two modes for the download's life: `ranged` (a `Coordinator`: chunks, steals,
/// races, re-dials) or `stream` (a `SingleStream`: one plain stream from byte 0). What both share
/// (head verdicts, retries, the stall timeout) is implemented once over `Coordinating`.
struct EngineCore {
    /// What happened, as the shell saw it.
    enum Event {
        /// The download starts: its first requests.
        case begin
        /// Before `begin`: how the connections warmed beside the probe ended (see `ConnectionWarmUp`).
        case warmedUp(WarmUpOutcome)
        /// The top of a loop pass: start what is due, take or give back lent connections, hand out
        /// work. `offered` connections were borrowed from a batch's lender for this download, to keep
        /// or give back; nil when it has no lender (connections above its own are `-n auto`'s growth).
        /// `recall`: the lender is short (it lent more than it has), so a borrowed connection winds
        /// down to be given back.
        case pass(offered: Int?, recall: Bool = false)
        /// The transfers were performed; `passStartedAt` is when the pass began: progress ticks and
        /// slow-rule rounds, when due.
        case performed(passStartedAt: Double)
        /// A progress tick now, due or not (the last one of a download).
        case tick
        /// `count` body bytes arrived for connection `id`, with the response `head` collected so far
        /// (judged with the first bytes); `budgetAllows` is false when `--max-speed` has nothing left.
        case body(Int, count: Int, head: ResponseHead, budgetAllows: Bool)
        /// Connection `id`'s transfer ended by itself or was removed after a stop: `end` is how
        /// libcurl ended it, `head` what came of the response.
        case ended(Int, TransferEnd, head: ResponseHead)
        /// Connection `id`'s transfer was taken out of libcurl without a verdict (a lost race, the
        /// end of the loop, a request that could not be set up).
        case removed(Int)
        /// `--max-speed` allows connection `id` to receive again.
        case resumed(Int)
        /// Just before a pass whose `performed` runs the slow rule (`judgesSlow(passStartedAt:)`): the
        /// kernel holds `bytes` of connection `id`'s answer received and not yet read. A connection with
        /// many is not judged slow in that round (`Coordinator.unreadBehind`).
        case unread(Int, bytes: Int)
        /// Posted with `unread`: connection `id`'s answer head is in (a final status and its headers)
        /// though no body byte may have come. The server took the request up, so it is not waiting in
        /// the server's queue (see `Coordinator.pendingAnswers`).
        case answering(Int)
        /// A speed cap (`--max-speed`, or a limit shared with other downloads) held bytes back: it,
        /// not the connections, sets the download's rate now (see `Coordinator.capBinds`).
        case capHeld
        /// The loop waited this many seconds for the writer (held time for every transfer).
        case writerWaited(Double)
        /// A write, journal or request set-up failure ends the download.
        case failed(SeggetError)
        /// Chunk `k`, counted as finished, must be fetched again (its kept bytes failed their check).
        case reopened(Int)
        /// Connection `id`'s request, just started, continues a transfer sent at `sentAt` (the probe's,
        /// held open) that runs to `requestEnd`, past the connection's range when that ends sooner
        /// (it is cut there, as a shortened range is). Its wait for the first byte counts from
        /// `sentAt`, handshakes included, not from the moment it was handed over.
        case continued(Int, sentAt: Double, requestEnd: Int64)
        /// Connection `id`'s head is in (sent before its first body bytes): the kernel's round trip on
        /// its connection, and whether its request opened a new connection (nil: not known).
        case connected(Int, roundTrip: Double?, newConnection: Bool?)
        /// Connection `id`'s connection (TCP, and TLS where there is one) is still being made, told
        /// just before a round of the slow rule or a progress tick (`judgesSlow`, `ticks`): its stall
        /// clock does not run, since the connection timeout, not the stall timeout, limits a connect,
        /// and its handshakes are told from its wait for a first byte.
        case stillConnecting(Int)
        /// Source `s` served pieces that failed their hashes: it gets no more work.
        case sourceFailed(Int)
        /// A mirror joined the sources (its probe agreed after the fetch began).
        case sourceAdded(FetchSource)
    }

    typealias TransferEnd = Coordinator.TransferEnd
    typealias Crossing = Coordinator.Crossing

    /// What the shell must do, in order.
    enum Action: Equatable {
        /// Send a request for `bytes` on the connection; `fresh` forces a new TCP connection,
        /// `newPath` a random source port too.
        case start(Int, bytes: Range<Int64>, fresh: Bool, newPath: Bool)
        /// Hand what the connection has staged to the writer.
        case settle(Int)
        /// Take the connection's transfer out of libcurl and hand over what it staged.
        case remove(Int)
        case event(DownloadEvent)
        /// A line for `SEGGET_DEBUG` (only when tracing).
        case trace(String)
        /// Bytes `from..<from + count` of the body just delivered go to the file at `at`.
        case write(Int, from: Int, count: Int, at: Int64)
        /// The connection's bytes reached a chunk end (after the `write` before it).
        case crossed(Int, Crossing)
        /// What libcurl must do with the body just delivered (always the last action of `body`).
        case body(BodyDecision)
        /// Give this many borrowed connections back to the lender.
        case giveBack(Int)
        /// A progress tick: periodic I/O and a progress report.
        case progressTick
    }

    enum BodyDecision: Equatable {
        /// Take every byte.
        case proceed
        /// Keep the bytes in libcurl and pause (`--max-speed`).
        case pause
        /// Refuse them: the transfer ends.
        case abort
    }

    /// The ranged coordinator, if this is a ranged download; else `stream` is set. Two optionals
    /// rather than an enum with payloads: an event mutates the one set in place (`&ranged!`), and a
    /// read borrows the field it reads. Binding an enum's payload copied the whole coordinator (a
    /// retain of each of its arrays, and their release) on every body callback, about 1 % of the
    /// client's samples in a 1 GiB download over HTTP/2.
    private(set) var ranged: Coordinator?
    private(set) var stream: SingleStream?
    /// When progress was last ticked and the slow rule last judged.
    private var lastTick = -Double.infinity
    private var lastJudged = -Double.infinity
    /// The most transfers whose answer was accepted and still running at one time: the connections
    /// the server actually served at once (fewer than asked for where a host refused the rest).
    private(set) var mostServedAtOnce = 0

    init(ranged coordinator: Coordinator) { ranged = coordinator }
    init(stream: SingleStream) { self.stream = stream }

    /// The one entry point: applies `event` at `now` and returns what the shell must do.
    mutating func handle(_ event: Event, now: Double) -> [Action] {
        if ranged != nil {
            return Self.apply(event, to: &ranged!, now: now, lastTick: &lastTick, lastJudged: &lastJudged, mostServed: &mostServedAtOnce)
        }
        return Self.apply(event, to: &stream!, now: now, lastTick: &lastTick, lastJudged: &lastJudged, mostServed: &mostServedAtOnce)
    }

    private static func apply<C: Coordinating>(_ event: Event, to c: inout C, now: Double, lastTick: inout Double,
                                               lastJudged: inout Double, mostServed: inout Int) -> [Action] {
        switch event {
        case .begin:
            return actions(c.begin(now: now))
        case .warmedUp(let outcome):
            return actions(c.learn(warmUp: outcome, now: now))
        case .pass(let offered, let recall):
            var out = actions(c.startDue(now: now))
            guard let offered else { return out + actions(c.assignIdle(now: now)) }
            if recall { c.recallLoan() } else { c.endRecall() }
            // A borrowed connection joins only when it would find work worth it; one a pass, so that
            // the downloads still running share what is spare.
            let keep = offered > 0 && c.wouldUseLoan(now: now) ? 1 : 0
            c.addLoans(keep)
            if keep > 0, c.tracing { out.append(.trace("borrowed a connection; \(c.loans) borrowed")) }
            out += actions(c.assignIdle(now: now))
            let back = offered - keep + c.returnIdleLoans()
            if back > 0 { out.append(.giveBack(back)) }
            return out
        case .performed(let passStartedAt):
            var out: [Action] = []
            if tickDue(passStartedAt: passStartedAt, lastTick: lastTick, interval: c.config.progressInterval) {
                lastTick = passStartedAt
                // Samples are timed after the bytes they count (a perform can take a while).
                out += actions(c.tick(now: now))
                out.append(.progressTick)
            }
            if judges(passStartedAt: passStartedAt, lastJudged: lastJudged) {
                lastJudged = passStartedAt
                out += actions(c.judgeSaturation(now: now))
                out += actions(c.judgeSlowConnections(now: now))
            }
            c.forgetStillConnecting()
            return out
        case .tick:
            return actions(c.tick(now: now)) + [.progressTick]
        case .stillConnecting(let id):
            c.stillConnecting(id, now: now)
            return []
        case .body(let id, let count, let head, let budgetAllows):
            return body(id, count: count, head: head, budgetAllows: budgetAllows, c: &c, now: now, mostServed: &mostServed)
        case .capHeld:
            c.noteCapHeld(now: now)
            return []
        case .ended(let id, let end, let head):
            return actions(c.transferEnded(id, end, head: head, now: now))
        case .removed(let id):
            c.removed(id, now: now)
            return []
        case .resumed(let id):
            c.resume(id, now: now)
            return []
        case .writerWaited(let seconds):
            c.heldByWriter(seconds)
            return []
        case .unread(let id, let bytes):
            c.noteUnread(id, bytes: bytes)
            return []
        case .answering(let id):
            c.noteAnswering(id)
            return []
        case .failed(let error):
            c.fail(error)
            return []
        case .reopened(let k):
            c.reopen(k)
            return []
        case .continued(let id, let sentAt, let requestEnd):
            c.connections[id].requestStartedAt = min(c.connections[id].requestStartedAt, sentAt)
            c.connections[id].requestEnd = max(c.connections[id].requestEnd, requestEnd)
            // The probe's request: nothing was out ahead of it, and it dialled.
            c.connections[id].aheadAtSend = 0
            c.connections[id].linkWasOpen = false
            c.connections[id].continuesProbe = true
            return []
        case .connected(let id, let roundTrip, let newConnection):
            c.connected(id, roundTrip: roundTrip, newConnection: newConnection)
            return []
        case .sourceFailed(let s):
            return actions(c.dropSource(s, now: now) ?? [])
        case .sourceAdded(let source):
            return actions(c.addSource(source, now: now))
        }
    }

    /// The body callback's decisions: the head judged with the first bytes, the budget, then the
    /// bytes cut at chunk ends (each piece written, then its crossing recorded).
    private static func body<C: Coordinating>(_ id: Int, count n: Int, head: ResponseHead, budgetAllows: Bool,
                                              c: inout C, now: Double, mostServed: inout Int) -> [Action] {
        if !c.connections[id].machine.headJudged {
            guard c.headArrived(id, head: head, now: now) else { return [.body(.abort)] }
            mostServed = max(mostServed, c.connections.reduce(0) { $0 + ($1.machine.isServed ? 1 : 0) })
        }
        switch c.bytesArrived(id, budgetAllows: budgetAllows, now: now) {
        case .write: break
        case .pause: return [.body(.pause)]
        default: return [.body(.abort)]
        }
        var out: [Action] = []
        out.reserveCapacity(3)
        var offset = 0
        while offset < n {
            guard let room = c.room(id, now: now) else {
                out.append(.body(.abort))
                return out
            }
            let take = min(n - offset, Int(room))
            out.append(.write(id, from: offset, count: take, at: c.connections[id].pos))
            offset += take
            if let crossing = c.wrote(id, take, now: now) { out.append(.crossed(id, crossing)) }
            if c.connections[id].machine.stopReason != nil {
                out.append(.body(offset == n ? .proceed : .abort))
                return out
            }
        }
        out.append(.body(.proceed))
        return out
    }

    private static func actions(_ commands: [Coordinator.Command]) -> [Action] {
        commands.map {
            switch $0 {
            case .start(let id, let bytes, let fresh, let newPath): .start(id, bytes: bytes, fresh: fresh, newPath: newPath)
            case .settle(let id): .settle(id)
            case .remove(let id): .remove(id)
            case .event(let e): .event(e)
            case .trace(let line): .trace(line)
            }
        }
    }

    /// Work is handed out only below byte `limit` (a download into a stream: its reorder window);
    /// `readerBound`: the stream's reader is behind, so no connection is judged slow.
    mutating func limitHandOut(below limit: Int64, readerBound: Bool) {
        guard ranged != nil else { return }
        ranged!.limitHandOut(below: limit)
        ranged!.readerBound = readerBound
    }

    // MARK: Reading

    /// Whether `performed(passStartedAt:)` of a pass that began then runs a round of the slow rule
    /// (the shell tells the connections' unread bytes and those still being made before it:
    /// `Event.unread`, `Event.stillConnecting`).
    func judgesSlow(passStartedAt: Double) -> Bool {
        guard ranged != nil else { return false }
        return Self.judges(passStartedAt: passStartedAt, lastJudged: lastJudged)
    }

    /// Whether `performed(passStartedAt:)` of a pass that began then runs a progress tick (and with it
    /// the stall timeout): the shell tells the connections still being made before it
    /// (`Event.stillConnecting`).
    func ticks(passStartedAt: Double) -> Bool {
        Self.tickDue(passStartedAt: passStartedAt, lastTick: lastTick, interval: ranged?.config.progressInterval ?? stream!.config.progressInterval)
    }

    /// Whether the shell tells the connections still being made (`Event.stillConnecting`) before
    /// `performed(passStartedAt:)` of a pass that began then: where it runs a round of the slow rule
    /// or a progress tick, both of which read them (the flags last for that pass only).
    func wantsStillConnecting(passStartedAt: Double) -> Bool {
        judgesSlow(passStartedAt: passStartedAt) || ticks(passStartedAt: passStartedAt)
    }

    /// The cadence of progress ticks: a pass runs one once `interval` went by since the last that did.
    private static func tickDue(passStartedAt: Double, lastTick: Double, interval: Double) -> Bool {
        passStartedAt - lastTick >= interval
    }

    /// The cadence of the slow rule and the saturation check: a pass judges once
    /// `Coordinator.slowJudgeInterval` went by since the last that did.
    private static func judges(passStartedAt: Double, lastJudged: Double) -> Bool {
        passStartedAt - lastJudged >= Coordinator.slowJudgeInterval
    }

    /// A daemon task's own share lowered to `count` (see `Coordinator.lowerOwn`): how many of its
    /// connections became loans.
    mutating func lowerOwn(to count: Int) -> Int {
        guard ranged != nil else { return 0 }
        return ranged!.lowerOwn(to: count)
    }

    /// Before `begin`: a stream without ranges starts at `offset`, where the probe's answer, which
    /// it continues, got to (its bytes before are in the file). A retry still starts from byte 0.
    mutating func streamContinues(from offset: Int64) {
        stream?.startsAt = offset
    }

    var connections: [Connection] { ranged?.connections ?? stream!.connections }
    func isRacing(_ id: Int) -> Bool { ranged?.isRacing(id) ?? false }
    var isComplete: Bool { ranged?.isComplete ?? stream!.isComplete }
    var finishedChunks: [Bool] { ranged?.finishedChunks ?? stream!.finishedChunks }
    var finishedBytes: Int64 { ranged?.finishedBytes ?? stream!.finishedBytes }
    var receivedBytes: Int64 { ranged?.receivedBytes ?? stream!.receivedBytes }
    var loans: Int { ranged?.loans ?? stream!.loans }
    /// The error that ends the download, if one was decided.
    var stop: (any Error)? { ranged != nil ? ranged!.stop : stream!.stop }
    func end(of id: Int) -> Int64 { ranged?.end(of: id) ?? stream!.end(of: id) }
    func progress(now: Double, elapsed: Double) -> DownloadProgress {
        ranged?.progress(now: now, elapsed: elapsed) ?? stream!.progress(now: now, elapsed: elapsed)
    }
}
