/// What a request to one host costs, learnt from the download's own requests as it goes: the pure
/// model behind every decision that spends a request (`RequestPrice`).
///
/// A request costs the time before its first byte: the server's think time and a round trip, and
/// on a new connection the handshakes (TCP's round trip, and TLS's). On an origin that works on one
/// request at a time (or a few), a request also waits for those ahead of it, and makes every request
/// sent after it wait as long: the think time grows with the number of requests out. That growth is
/// a push-back as plain as a 429, only silent: `servedAtOnce` is how many the origin serves without
/// making the next wait (`HostLimit.saturated` acts on it).
///
/// Fed by the engine's events (`Coordinating`): each request's head with the requests that were out
/// ahead of it when it was sent, whether it dialled, its wait, the kernel's round trip on its
/// connection, and whether the server closes its connections; and the heads still awaited.
struct RequestCostModel: Equatable, Sendable {
    /// One request's wait for its head, the network's round trips taken out.
    struct Answer: Equatable, Sendable {
        /// Requests of the download to this host that were out when it was sent (it not counted).
        var ahead: Int
        /// Seconds from the request to its head, less the round trips the network took (its
        /// handshakes when it dialled, and the request's own): the server's think time and queue.
        var think: Double
    }

    /// One request's wait for its head as measured, and whether it dialled: its think time is
    /// worked out again whenever the path's round trip is learnt or found shorter (`answers`).
    private struct Wait: Equatable, Sendable {
        var ahead: Int
        var seconds: Double
        var dialled: Bool
    }

    /// The newest waits, oldest first (at most `memory`).
    private var waits: [Wait] = []
    /// The newest answers, oldest first (at most `memory`): `waits` with the network's round trips
    /// taken out at the path's round trip as known now. An answer that came before any round trip
    /// was measured (a batch's probe whose connection the fetch does not take over) would otherwise
    /// keep its handshakes and its own round trip as think time: 0.25 s through WAN link a (80 ms,
    /// HTTPS), where the server took a millisecond.
    private(set) var answers: [Answer] = []
    /// The server said `Connection: close` on its last answer: every request dials.
    private(set) var closesConnections = false
    /// The kernel's round trip on the path (TCP_INFO), the smallest seen; nil until known.
    private(set) var roundTrip: Double?
    /// A TLS handshake costs one more round trip.
    var tls = false
    /// Requests sent so far (numbers the requests, in the order they went out).
    private(set) var sent = 0
    /// When a transfer of the host's last ended: on an origin that queues, the next in line's turn.
    private(set) var lastEndedAt = -Double.infinity

    static let memory = 32

    /// Until answers show otherwise, the share of the server's think time that one more request out
    /// is expected to add to every later one's: an origin may take one request at a time (then each
    /// adds all of it) or many (then none). A quarter: a split that would pay on an origin with many
    /// workers still goes ahead, while a split that saves less than its requests would cost one that
    /// queues them waits for evidence (see `docs/request-price.md`).
    static let priorQueueShare = 0.15

    init(tls: Bool = false) { self.tls = tls }

    // MARK: Events

    /// A request goes out; returns its number (1, 2, …).
    mutating func requestSent() -> Int {
        sent += 1
        return sent
    }

    /// The kernel's round trip measured on one of the host's connections.
    mutating func measured(roundTrip rtt: Double) {
        guard rtt > 0 else { return }
        let known = roundTrip
        roundTrip = min(roundTrip ?? rtt, rtt)
        if roundTrip != known { answers = waits.map(answer) }
    }

    /// A head arrived `wait` seconds after its request, which had `ahead` requests out before it and
    /// `dialled` a new connection; `closes`: the answer says `Connection: close`.
    mutating func answered(ahead: Int, wait: Double, dialled: Bool, closes: Bool) {
        closesConnections = closes
        let w = Wait(ahead: max(0, ahead), seconds: wait, dialled: dialled)
        waits.append(w)
        answers.append(answer(w))
        if waits.count > Self.memory {
            waits.removeFirst(waits.count - Self.memory)
            answers.removeFirst(answers.count - Self.memory)
        }
    }

    /// `w` as an answer: its wait less the network's round trips at the round trip known now.
    private func answer(_ w: Wait) -> Answer {
        Answer(ahead: w.ahead, think: max(0, w.seconds - networkSeconds(dialled: w.dialled)))
    }

    /// A transfer from the host ended (its answer read, or cut).
    mutating func transferEnded(at now: Double) { lastEndedAt = max(lastEndedAt, now) }

    /// Whether the server's last answer said `Connection: close`.
    mutating func noteConnectionClose(_ closes: Bool) { closesConnections = closes }

    // MARK: Estimates

    /// The round trips a request spends on the network before its head: its own, and its
    /// handshakes when it dials.
    func networkSeconds(dialled: Bool) -> Double {
        (roundTrip ?? 0) * (dialled ? (tls ? 3 : 2) : 1)
    }

    /// What a new connection's handshakes cost before its request goes out.
    var handshake: Double { (roundTrip ?? 0) * (tls ? 2 : 1) }

    /// The server's think time for a request with nothing ahead of it: the lower quartile of the
    /// answers that had the fewest ahead (nil before the first answer).
    var baseThink: Double? {
        guard let fewest = answers.map(\.ahead).min() else { return nil }
        let base = answers.filter { $0.ahead <= fewest + 1 }.map(\.think).sorted()
        return base[(base.count - 1) / 4]
    }

    /// The server thinks before its heads for longer than the network's jitter (`costlyThink`): a
    /// request costs more here than its round trips.
    var isCostly: Bool { (baseThink ?? 0) > Self.costlyThink }
    static let costlyThink = 0.02

    /// A think time this long is a queue, not the server's own time: twice the base, and beyond it
    /// the network's jitter and a loaded machine's scheduling (`queueMargin`, or two round trips).
    func isQueued(think: Double) -> Bool {
        guard let base = baseThink else { return false }
        return think > 2 * base + max(Self.queueMargin, 2 * (roundTrip ?? 0))
    }

    /// A wait this much longer than twice the usual is no queue yet: on a two-core machine busy with
    /// other work a server's head can take tens of milliseconds to be scheduled (an in-process test
    /// server's heads 3 ms apart were once read as a queue, and a download of 8 connections was held
    /// to one).
    static let queueMargin = 0.05

    /// How many requests the origin serves at once without making the next wait, when it queues
    /// them: one more than the most that were ahead of an answer that did not wait, provided the
    /// requests with more ahead mostly waited (`pending`: the waits so far of heads not in yet,
    /// lower bounds of theirs). Nil when it does not queue, or there is too little evidence.
    ///
    /// An origin with many workers answers the 8th request as soon as the 1st; one that takes one
    /// at a time answers each after the ones before it. Heads late at random (a slow disk, a cache
    /// miss) come at any place in the line, so they make no queue: the requests further back must
    /// have waited too.
    func servedAtOnce(pending: [Answer] = []) -> Int? {
        guard baseThink != nil else { return nil }
        // A head still awaited is no evidence of a fast answer (it may only be young), only of a slow one.
        let served = (answers.filter { !isQueued(think: $0.think) }.map(\.ahead).max() ?? 0) + 1
        let behind = (answers + pending.filter { isQueued(think: $0.think) }).filter { $0.ahead >= served }
        let queued = behind.filter { isQueued(think: $0.think) }
        guard queued.count >= 2, queued.count * 4 >= behind.count * 3 else { return nil }
        return served
    }

    /// Whether the host answered a request with another of the download's out ahead of it in no
    /// more than its usual think time: it serves requests side by side. Before that, one more request
    /// is a bet on how it takes them (`RequestPrice`).
    var servesSideBySide: Bool {
        answers.contains { $0.ahead >= 1 && !isQueued(think: $0.think) }
    }

    /// Whether answers (or heads awaited, `pending`) came with requests ahead of them: evidence of
    /// how the server treats requests side by side.
    func hasQueueEvidence(pending: [Answer] = []) -> Bool {
        answers.contains { $0.ahead >= 1 } || pending.contains { $0.ahead >= 1 && isQueued(think: $0.think) }
    }

    /// Seconds each request already out adds to the next one's think time: a robust slope (the
    /// median of the pairwise slopes, after Theil and Sen) over the answers; 0 on an origin that does
    /// not queue, about one request's service time on one that serves them one at a time. Before any
    /// answer had a request ahead of it, the prior (`priorQueueShare` of the think time).
    func queueSlope(pending: [Answer] = []) -> Double {
        guard hasQueueEvidence(pending: pending) else { return Self.priorQueueShare * (baseThink ?? 0) }
        let points = answers + pending.filter { isQueued(think: $0.think) }
        var slopes: [Double] = []
        for i in points.indices {
            for j in points.indices where j > i && points[j].ahead != points[i].ahead {
                slopes.append((points[j].think - points[i].think) / Double(points[j].ahead - points[i].ahead))
            }
        }
        guard !slopes.isEmpty else { return 0 }
        slopes.sort()
        return max(0, slopes[slopes.count / 2])
    }

    /// The expected wait for the head of a request sent now with `ahead` requests out.
    func expectedWait(ahead: Int, dials: Bool, pending: [Answer] = []) -> Double {
        (baseThink ?? 0) + Double(max(0, ahead)) * queueSlope(pending: pending) + networkSeconds(dialled: dials)
    }
}

/// Whether a request is worth what it costs: the one question that every decision spending a request
/// asks of the host's `RequestCostModel` (the first split, a steal, an end-game race, a re-dial, a
/// probe of a host's limit). `docs/request-price.md` works an example through.
///
/// A request is worth sending when the time it is expected to save (`Proposal.saves`, worked out
/// by the decision from the rates it knows) exceeds its price:
/// - its own first byte: the server's think time and the round trip (`firstByte`), plus the
///   handshakes when no kept-alive connection is free for it (`handshake`);
/// - the victim's connection when it cuts another transfer short (a steal): that connection's next
///   request dials, unless the server closes every connection anyway (`cut`);
/// - on an origin that queues, what it adds to the wait of every request after it (`queue`: the
///   queue slope, or its prior until answers show how the server takes requests side by side);
/// - and a new request is a new draw of a server's mood: the steal margin that trickling servers
///   taught (`draw`, `Coordinator.minStealGainSeconds`).
enum RequestPrice {
    enum Purpose: String, Sendable {
        /// The connections that start beside the first (after the probe).
        case split
        /// Part of a busy connection's work, taken by an idle one.
        case steal
        /// A second copy of a chunk in the end game.
        case race
        /// A slow connection's work on a new connection.
        case redial
        /// One request beyond the host's limit, to see whether it still holds.
        case probeLimit
    }

    struct Proposal: Sendable {
        var purpose: Purpose
        /// Seconds sooner the download is expected to end with the request than without it, before
        /// its price.
        var saves: Double
        /// No kept-alive connection is free for it: it pays the handshakes.
        var dials: Bool
        /// It cuts another connection's transfer short.
        var cuts = false
        /// Requests to the host out now (it not counted).
        var inFlight: Int
        /// How many requests this one stands for (a split of k connections: k − 1).
        var count = 1
        /// `saves` was worked out with the request's own first byte (and handshakes) in its timeline
        /// (a steal's finish times): those are not counted again.
        var waitInSaves = false
    }

    struct Cost: Equatable, Sendable {
        var firstByte = 0.0
        var handshake = 0.0
        var cut = 0.0
        var queue = 0.0
        var draw = 0.0
        var total: Double { firstByte + handshake + cut + queue + draw }
    }

    /// What `p` costs on the host `model` describes (`pending`: the heads still awaited).
    static func cost(of p: Proposal, model m: RequestCostModel, pending: [RequestCostModel.Answer] = []) -> Cost {
        var c = Cost()
        let slope = m.queueSlope(pending: pending)
        // The first of them waits for the ones out, and for its own think time and round trip; the
        // others of a split go out beside it and are paid for by the queue term.
        if !p.waitInSaves {
            c.firstByte = (m.baseThink ?? 0) + Double(p.inFlight) * slope + (m.roundTrip ?? 0)
            c.handshake = p.dials ? m.handshake : 0
        }
        c.cut = p.cuts && !m.closesConnections ? m.handshake : 0
        c.queue = Double(max(1, p.count)) * slope
        switch p.purpose {
        case .steal: c.draw = Coordinator.minStealGainSeconds
        case .split, .race, .redial, .probeLimit: c.draw = 0
        }
        return c
    }

    /// Whether `p` saves more than it costs.
    static func worth(_ p: Proposal, model: RequestCostModel, pending: [RequestCostModel.Answer] = []) -> Bool {
        p.saves > cost(of: p, model: model, pending: pending).total
    }
}
