import Glibc

/// The coordinator's questions to the request price (`RequestPrice`, `RequestCostModel`): how many
/// connections the first split uses, whether a steal or a race pays for its request, what a re-dial
/// costs, and when the host's first bytes show that it queues requests (a push-back held as a
/// refusal's limit is).
extension Coordinator {
    /// A first split whose requests could cost less than this, even on an origin that queues them,
    /// goes out with the first connection's answer, as it always did (nginx on a LAN: a millisecond).
    static let splitDeferMinimum = 0.02

    /// The probe's think time: its first answer's wait less the round trips of a new connection.
    var probeThink: Double? {
        config.probeFirstAnswer.map { max(0, $0 - cost.networkSeconds(dialled: true)) }
    }

    /// Whether the first split waits for connection 0's rate (see `decideSplit`): at a download's
    /// start, when the `n − 1` requests it would send could cost more than `splitDeferMinimum` on an
    /// origin that queues them (the prior share of the probe's think time each). Not where warm-ups
    /// went out beside the probe: a long path's connections were opened for the split already.
    func defersSplit(connections n: Int) -> Bool {
        // A fresh download: nothing finished or partly written but the probe's prefix (which a held
        // probe may have brought, its last chunk partly).
        let prefix = scheduler.finishedPrefix(from: 0)
        guard config.pricedSplit, n > 1, prefix == scheduler.finishedCount, partialChunks.keys.allSatisfy({ $0 == prefix }),
            warmUp.sent == 0, let think = probeThink
        else { return false }
        return think * (1 + RequestCostModel.priorQueueShare * Double(n - 1)) > Self.splitDeferMinimum || splitDialsLongPath
    }

    /// The split's connections would dial on a long path (a round trip of `ConnectionWarmUp.minRoundTrip`
    /// or more, to the one host, whose connections other downloads of the run hold; no warm-ups went
    /// out): each a TCP and a TLS handshake and a slow start while connection 0's window keeps
    /// doubling. 8 files of 8 MiB over HTTPS through WAN link a at `-j 4` took 3.4 s split at once
    /// (70 requests, 41 connections), 2.3 s at `-n 1` (8 requests). A download alone on its host
    /// finds the connections of the one before it idle (a list at `-j 1`), or warmed them.
    var splitDialsLongPath: Bool {
        config.contendedHost && plan.totalLength <= Self.rampScopeBytes
            && (cost.roundTrip ?? 0) >= ConnectionWarmUp.minRoundTrip && config.sources.count == 1
    }

    /// How long after `begin` connection 0's rate is evidence: two round trips, at least 10 ms.
    var splitEvidenceDelay: Double { max(0.01, 2 * (cost.roundTrip ?? 0)) }

    /// How many connections the first split uses, of `n`, at connection 0's current rate: the count
    /// whose time saved most exceeds its price. Connection 0 alone would need `left ÷ rate`; k
    /// connections save `(1 − 1/k)` of that (at best: more connections may not add up on a shared
    /// bottleneck), and cost a first byte and handshakes, and on an origin that queues `k − 1`
    /// shares of the think time (`RequestPrice`).
    /// `growing`: the rate still grows (see `rampingSplitCount`, where the split would dial on a
    /// long path; elsewhere, as on an origin that thinks, the rate so far decides).
    func splitCount(of n: Int, rate: Double, growing: Bool = false) -> Int {
        if growing, splitDialsLongPath, let rtt = cost.roundTrip {
            return rampingSplitCount(of: n, rate: rate, roundTrip: rtt)
        }
        let alone = Double(max(0, plan.totalLength - connections[0].pos)) / max(rate, 1)
        return Self.bestSplit(of: n) { k in
            let p = RequestPrice.Proposal(purpose: .split, saves: alone * (1 - 1 / Double(k)), dials: true, inFlight: 1, count: k - 1)
            return p.saves - RequestPrice.cost(of: p, model: cost).total
        }
    }

    /// The count of 2…`n` connections whose `net` seconds saved is largest, the first of equals;
    /// 1 where none saves anything.
    static func bestSplit(of n: Int, net: (Int) -> Double) -> Int {
        var best = 1
        var bestNet = 0.0
        for k in 2...max(2, n) where k <= n {
            let saved = net(k)
            if saved > bestNet {
                best = k
                bestNet = saved
            }
        }
        return best
    }

    /// A new connection's first window: Linux's initial congestion window, 10 segments.
    static let initialWindowBytes = 14_480.0

    /// `splitCount` where connection 0's rate still grows at the decision, on a long path whose
    /// other connections would dial (`splitDialsLongPath`): TCP's slow start, which doubles its window
    /// each round trip. Its rate then says little of how long it would take alone (a 2 MiB file's
    /// connection at 1.1 MiB/s after two round trips, through WAN link a, had it all 0.25 s later),
    /// so both sides are counted in round trips of doubling: connection 0 alone from its window now
    /// (`rate × round trip`), and with `k − 1` more, each of which pays its request's price (a first
    /// byte, the handshakes it dials) and starts from `initialWindowBytes`. The count that ends
    /// soonest; one where none beats connection 0 alone (a later steal, priced at the rates then,
    /// may still split it). No ceiling is assumed on a window: hence only for files up to
    /// `rampScopeBytes`.
    func rampingSplitCount(of n: Int, rate: Double, roundTrip rtt: Double) -> Int {
        let left = Double(max(0, plan.totalLength - connections[0].pos))
        let window = max(rate * rtt, Self.initialWindowBytes)
        func seconds(_ bytes: Double, from w: Double) -> Double { rtt * log2(1 + bytes / w) }
        let alone = seconds(left, from: window)
        return Self.bestSplit(of: n) { k in
            let share = left / Double(k)
            let p = RequestPrice.Proposal(purpose: .split, saves: 0, dials: true, inFlight: 1, count: k - 1)
            let added = RequestPrice.cost(of: p, model: cost).total + seconds(share, from: Self.initialWindowBytes)
            return alone - max(seconds(share, from: window), added)
        }
    }

    /// The longest file whose split waits on a contended long path (`splitDialsLongPath`). Through
    /// WAN link a (interleaved rounds, HTTPS from nginx): 12 files of 2 MiB at `-j 4` 1.42-1.48 s
    /// against 2.62-3.07 s split at once, 8 of 8 MiB 2.43-2.60 s against 3.22-3.47 s; but 3 of
    /// 64 MiB at `-j 2` 5.74 s against 5.47 s (medians of 7): a window does stop growing (a loss,
    /// the link full), and a long file split late loses what a short one gains.
    static let rampScopeBytes: Int64 = 16 << 20

    /// Connection 0's rate over the newest `window` seconds of the split's samples, and over the
    /// window before (nil where the samples do not reach).
    func splitRates(window: Double) -> (recent: Double?, before: Double?) {
        guard let last = splitSamples.last else { return (nil, nil) }
        func rate(endingAt end: (Double, Int64)) -> Double? {
            guard let start = splitSamples.last(where: { end.0 - $0.0 >= window - 1e-9 }) else { return nil }
            return Double(end.1 - start.1) / (end.0 - start.0)
        }
        let recent = rate(endingAt: last)
        let middle = splitSamples.last(where: { last.0 - $0.0 >= window - 1e-9 })
        return (recent, middle.flatMap { rate(endingAt: $0) })
    }

    /// The longest the first split waits for connection 0's rate to settle: the probe's think time,
    /// between 50 and 150 ms (TCP's slow start to 1 GB/s takes 70 ms at a 7 ms round trip).
    /// Where the split would dial on a long path, three round trips more, so that the rates of the
    /// two windows of two round trips before the decision show whether it still grows (`decideSplit`).
    var splitEvidenceCap: Double {
        let cap = min(0.15, max(0.05, probeThink ?? 0))
        return splitDialsLongPath ? max(cap, 3 * (cost.roundTrip ?? 0)) : cap
    }

    /// The deferred first split (see `defersSplit`). Connection 0's rate is sampled every pass; the
    /// split is decided once that rate says one connection is enough (it can only grow while TCP's
    /// slow start lasts), or once it stopped growing (a window's rate within a quarter of the one
    /// before), or at `splitEvidenceCap`. The work is laid out again over the connections that start;
    /// the others stay idle, and join later only through a steal that pays for its request. Without
    /// any rate by the cap (or with connection 0 gone), every connection starts, as before.
    mutating func decideSplit(now: Double) -> [Command] {
        guard let due = splitDueAt else { return [] }
        let c = connections[0]
        if c.machine.isTransferring, c.firstByteAt != nil {
            if let last = splitSamples.last, now - last.0 < 0.001 {} else { splitSamples.append((now, c.transferBytes)) }
        }
        guard now >= due else { return [] }
        let waiting = splitCandidates.filter { connections[$0].machine.isWaiting }
        let n = waiting.count + 1
        let (recent, before) = splitRates(window: max(0.005, 2 * (cost.roundTrip ?? 0)))
        let settled = recent.map { r in before.map { r <= Self.growingRatio * $0 } ?? false } ?? false
        let growing = recent != nil && before != nil && !settled
        let k = recent.map { splitCount(of: n, rate: $0, growing: growing) }
        let capped = now >= due + splitEvidenceCap || !c.machine.isTransferring
        guard k == 1 || settled || capped else { return [] }
        splitDueAt = nil
        splitSamples = []
        splitCandidates = []
        let count = k ?? n
        let chosen = Array(waiting.prefix(count - 1))
        var commands: [Command] = []
        if tracing {
            commands.append(.trace("first split: \(count) of \(n) connections (a request's think time \(Format.fixed(cost.baseThink ?? -1, 3)) s; connection 0 at \(recent.map(Format.rate) ?? "an unknown rate")\(settled ? ", settled" : ""))"))
        }
        if scheduler.run(of: 0) != nil {
            scheduler.respread(over: [0] + chosen)
        } else {
            // Connection 0 is done or failed: the candidates take the work as idle connections do.
            for id in waiting { connections[id].machine.hasten(to: now) }
            return commands
        }
        for id in waiting { connections[id].machine.hasten(to: now) }
        return commands
    }

    /// The host's first bytes come later the more requests are out (see
    /// `RequestCostModel.servedAtOnce`): no more are sent than it serves at once, as if it had
    /// refused the next, and the limit is probed upwards by the same rule. The requests already
    /// waiting in its queue stay: the origin will work on them whether or not they are cancelled.
    mutating func judgeSaturation(now: Double) -> [Command] {
        // Bodies coming side by side contradict a queue of fewer: a server that works on N requests
        // at a time sends N bodies at a time. Heads that only looked queued (a loopback download
        // that keeps both CPUs busy reads the heads of new requests late) taught a limit that is
        // dropped then, and teach no lower one.
        var commands: [Command] = []
        // The main host's bodies only: a mirror's say nothing of it (its limit is its own).
        let servedNow = connections.reduce(0) { $0 + ($1.machine.isServed && onMainHost($1.source) ? 1 : 0) }
        if let dropped = config.hostShare != nil ? config.hostShare?.servedSideBySide(servedNow) : host.servedSideBySide(servedNow),
            saturationNotice.dropped()
        {
            commands.append(.event(.notice("the server answers \(servedNow) requests side by side after all; the limit of \(dropped) its waits suggested is dropped.")))
        }
        let pending = pendingAnswers(now: now)
        if let served = cost.servedAtOnce(pending: pending),
            config.hostShare?.saturated(servedAtOnce: served, now: now) ?? host.saturated(servedAtOnce: served, now: now)
        {
            if tracing {
                commands.append(.trace("the host queues requests: \(served) served at once (think \(Format.fixed(cost.baseThink ?? -1, 3)) s, \(Format.fixed(cost.queueSlope(pending: pending), 3)) s more per request out)"))
            }
            saturationNotice.taught(served, now: now)
        }
        if let limit = saturationNotice.due(now: now, limit: config.hostShare?.learntLimit ?? host.limit) {
            commands.append(.event(.notice("the server answers \(limit) request\(limit == 1 ? "" : "s") at a time (the others wait for their first byte); no more than \(limit) will be out at once.")))
        }
        return commands
    }

    /// What a steal costs beyond the thief's own first byte, which its finish time counts already
    /// (`stealGain`): the victim's cut connection where the server keeps connections, the queue, the
    /// draw of a new request.
    func stealPrice(thiefDials: Bool, cuts: Bool, now: Double) -> Double {
        RequestPrice.cost(
            of: .init(purpose: .steal, saves: 0, dials: thiefDials, cuts: cuts, inFlight: inFlight, waitInSaves: true),
            model: cost, pending: pendingAnswers(now: now)
        ).total
    }

    /// The wait for a new request's first byte now: the model's, or the recent waits' median before it knows.
    func expectedFirstByteWait(now: Double) -> Double? {
        guard cost.baseThink != nil else { return usualFirstByteWait }
        return cost.expectedWait(ahead: inFlight, dials: false, pending: pendingAnswers(now: now))
    }

    /// What a race or a re-dial's request costs beyond the round trips the rules count already: the
    /// server's think time, the wait behind the requests out, and the queue it adds.
    func priceBeyondNetwork(_ purpose: RequestPrice.Purpose, now: Double) -> Double {
        let pending = pendingAnswers(now: now)
        let c = RequestPrice.cost(of: .init(purpose: purpose, saves: 0, dials: false, inFlight: inFlight), model: cost, pending: pending)
        return max(0, c.total - (cost.roundTrip ?? 0))
    }
}
