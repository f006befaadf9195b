import Glibc

/// The coordinator's policy: rate estimates, what a race or a steal is worth, a speed cap, loans
/// (the periodic decisions built on the estimates are in `Coordinator+Periodic`; the stall timeout
/// is shared with `SingleStream`). The constants are named and cite the measurements that chose them.
extension Coordinator {
    /// The connections start one after another, `rampStep` apart, so that their first requests
    /// reach the server spread over about 0.1 s rather than in one burst. A pacing server (nginx's
    /// `limit_rate`) sends each response in bursts on a timer; requests that arrive together share one
    /// timer tick and are served one after another in it, so every burst waits for the others' sends.
    /// Measured on the capped benchmark (8 × 16 MiB/s, 8 connections on one nginx worker): 8 curl
    /// processes started at once took 8.23–8.44 s, started 15 ms apart 8.15–8.34 s including the
    /// stagger. The later connections lose nothing that work stealing does not make up at the end.
    ///
    /// Not on a long path (`firstAnswer`, how long the probe's first answer took, at least
    /// `longPathFirstAnswer`): there the later connections' start is what the download waits for at
    /// its end, since every request runs at the server's per-request pace. On link c of
    /// `scripts/bench wan` (40 ms, nginx `limit_rate 16m`, 8 connections) over HTTPS the stagger put
    /// the last request 75 ms after the first and the seven finished 2.44-2.62 s after the first
    /// request, against 2.33-2.64 s for aria2c's seven sent at once.
    static func rampStep(connections n: Int, firstAnswer: Double? = nil) -> Double {
        if let firstAnswer, firstAnswer >= longPathFirstAnswer { return 0 }
        return n <= 1 ? 0 : min(0.015, 0.1 / Double(n))
    }

    /// A probe whose first answer took this long crossed a WAN: it takes a TCP handshake and a request
    /// (two round trips; over TLS three or four), so a round trip of 10 ms or more (5-7 ms over TLS).
    /// On loopback it took 1 ms over HTTP and 5-6 ms over TLS.
    static let longPathFirstAnswer = 0.02

    /// Robbing a connection aborts its request at the cut (what is already in flight beyond it is
    /// wasted) and costs the thief a new request: worth it only when the victim would otherwise need
    /// a while for the rest. 0.2 s rather than 0.5 s shortened the uneven benchmark's tail (median of
    /// 4: 8.55 s against 8.84 s) and changed nothing measurable capped or uncapped.
    static let minStealSeconds = 0.2

    /// A steal must also bring the victim's finish forward by this much (see `worthStealing`). The
    /// thief's new request is a draw the victim's running one no longer is: against a server that
    /// trickles one request in three, taking the last not-started chunk from a connection about to
    /// start it (0.02–0.1 s left of its chunk in flight) gained nothing and, one time in three, cost
    /// the download 0.3 s. On `Benchmarks/slow-tail.sh`'s third phase (4 runs each, 2.35 s healthy)
    /// this took the trickle case from 2.64 s to 2.53 s and the trickle-after-256k case from 2.63 s to
    /// 2.59 s; the other phases did not change. Where the victim is slower than a thief, or holds two
    /// chunks not started, the gain is a chunk time or more and nothing changes.
    static let minStealGainSeconds = 0.1

    /// Racing a chunk costs a connection and up to a chunk of bandwidth: only worth it for one that
    /// is expected to take longer than this.
    static let minRaceSeconds = 0.5
    /// A second racer joins only when the first is slow too (see `Scheduler`).
    static let maxRacers = 2

    /// The least time a request must have had before its average rate stands for it.
    static let minEvidenceSeconds = 0.25
    /// Body bytes a continued request must have had before its rate stands for it (`continuationRate`).
    static let averageEvidenceBytes: Int64 = 1 << 20

    /// How often the slow rule judges, seconds: more often than progress ticks, so that a young request
    /// that trickles is caught soon after `SlowConnectionRule.minJudgeSeconds` (the loop wakes at least
    /// every 0.1 s). Judging reuses the tick's samples for the half-second window and costs microseconds.
    static let slowJudgeInterval = 0.05

    /// Re-dials allowed per download: three per connection, and more for a long download, in
    /// which a server that slows some requests down keeps drawing new slow ones.
    static func maxTotalRedials(connections: Int, chunks: Int) -> Int { 3 * connections + chunks / 8 }

    /// `-n auto`: start with `autoInitial` connections; every `autoInterval` seconds add `autoStep`
    /// while the total rate over the last interval grew by at least 10 %.
    static let autoInitial = 4
    static let autoStep = 2
    static let autoInterval = 2.0

    /// Where `-n auto` stands.
    struct AutoGrowth {
        var lastRate = 0.0
        var lastChange = 0.0
        /// More connections stopped raising the throughput: the limit stays.
        var settled = false
    }

    // MARK: A speed cap

    /// Whether a speed cap set the download's rate within the last `capMemorySeconds`. Then an
    /// end-game race cannot end the download sooner: its bytes come out of the same allowance as
    /// the owner's, so it only halves what each of them gets and pays for the chunk twice. With
    /// 8 connections on a file of 2 chunks at `--max-speed 400k` (through WAN link a), the 6 idle
    /// connections raced the 2 owners from their first second: 13.7 s and 5.7 MB for 2 MiB, where
    /// the cap alone takes 5.1 s. A capped download starts as if the cap had just held bytes back
    /// (idle connections raced owners still waiting for their first start), and races come back a
    /// second after the cap last held a byte (one trickling connection left alone no longer fills it).
    /// A connection the cap holds paused binds it all along: under a cap of a few KiB/s each of
    /// libcurl's 16 KiB reads waits more than a second for its allowance, with no byte and so no
    /// new hold between (at `--max-speed 10k` two idle connections raced the owner of a 1 MiB
    /// file's only chunk, 257 s where the cap alone takes 100 s).
    func capBinds(now: Double) -> Bool {
        now - capHeldAt < Self.capMemorySeconds || (config.speedCapped && connections.contains { $0.machine.isPaused })
    }
    static let capMemorySeconds = 1.0

    mutating func noteCapHeld(now: Double) { capHeldAt = max(capHeldAt, now) }

    mutating func noteUnread(_ id: Int, bytes: Int) {
        guard connections.indices.contains(id) else { return }
        connections[id].unread = max(0, bytes)
    }

    mutating func noteAnswering(_ id: Int) {
        guard connections.indices.contains(id) else { return }
        connections[id].answeredRequestAt = connections[id].requestStartedAt
    }

    /// Unread bytes in the kernel from which a connection is not judged slow: the server delivered
    /// them and segget did not read them (a loop starved of CPU by other work on the machine), so its
    /// rate measures segget, and a re-dial would throw them away and pay a request for nothing. A
    /// loop that keeps up leaves a few segments at most after it performed.
    static let unreadBehind = 64 << 10

    // MARK: Rates

    /// A victim waiting to retry has nothing in flight and may always be robbed (`rate` infinite).
    /// One that is receiving is robbed only on evidence, like a race: once its rate is known (else
    /// `rate` is negative) and its remainder would take a while, since a fast server may already
    /// have sent everything beyond the cut.
    ///
    /// And only when the best cut brings its finish forward by `minStealGainSeconds`: the victim
    /// needs `inFlightSeconds` for the rest of its chunk in flight and then a chunk time at its rate for
    /// each not-started chunk; a thief that takes `k` of them needs a first byte (`firstByteWait`) and
    /// `k` chunk times at the typical rate (`thiefChunkSeconds`, nil: the victim's). With one chunk
    /// not started and the victim as fast as the thief, the gain is only what is left of the chunk in
    /// flight, less the thief's first byte.
    static func worthStealing(rate: Double, notStartedChunks n: Int, chunkSize: Double, inFlightSeconds: Double = 0,
                              thiefChunkSeconds: Double? = nil, firstByteWait: Double = 0, price: Double = minStealGainSeconds) -> Bool {
        guard rate.isFinite else { return true }
        guard rate >= 0, n > 0 else { return false }
        let own = chunkSize / max(rate, 1)
        guard Double(n) * own >= minStealSeconds else { return false }
        let thief = thiefChunkSeconds ?? own
        let alone = inFlightSeconds + Double(n) * own
        var gain = 0.0
        for k in 1...n {
            let victimDone = inFlightSeconds + Double(n - k) * own
            let thiefDone = firstByteWait + Double(k) * thief
            gain = max(gain, alone - max(victimDone, thiefDone))
        }
        return gain >= price
    }

    /// `worthStealing` for a victim whose window still doubles every round trip (`SlowStart`): its
    /// time for `bytes` more is `SlowStart.seconds`, so half its work takes one round trip less
    /// than all of it, while a thief that dials starts from TCP's first window behind it. On WAN link
    /// a, 4 daemon tasks of 4 MiB at 2 connections each: every task's idle connection dialled at
    /// once to take half of its connection 0's chunks, 0.3 s in at 0.9-1.7 MiB/s (its slow start's
    /// rate so far), and brought them 0.1-0.5 s after connection 0 had its own half.
    static func worthStealing(
        inSlowStart s: SlowStart, leftBytes: Double, notStartedChunks n: Int, chunkSize: Double,
        thiefChunkSeconds: Double, firstByteWait: Double, price: Double
    ) -> Bool {
        guard n > 0 else { return false }
        let alone = s.seconds(leftBytes + Double(n) * chunkSize)
        var gain = 0.0
        for k in 1...n {
            let victimDone = s.seconds(leftBytes + Double(n - k) * chunkSize)
            gain = max(gain, alone - max(victimDone, firstByteWait + Double(k) * thiefChunkSeconds))
        }
        return gain >= price
    }

    /// A transfer whose window still grows on a long path, by `growth` a round trip (2 in TCP's slow
    /// start), a round trip of `roundTrip` (see `slowStartSeconds`). `brought`: what a window that
    /// grew so since the first byte brought so far (a doubling one, all it brought; see `init(window:growth:roundTrip:)`).
    struct SlowStart: Equatable, Sendable {
        var brought: Double
        var roundTrip: Double
        var growth = 2.0
        init(brought: Double, roundTrip: Double) {
            self.brought = brought
            self.roundTrip = roundTrip
        }
        /// A window of `window` bytes a round trip now, growing by `growth` (above 1) each round trip:
        /// the next `m` round trips bring `window · g · (g^m − 1) / (g − 1)`, as if it had brought
        /// `window · g / (g − 1)` so far (with `g` = 2, twice its window: a doubling's sum).
        init(window: Double, growth: Double, roundTrip: Double) {
            self.growth = min(2, max(growth, 1.01))
            self.brought = window * self.growth / (self.growth - 1)
            self.roundTrip = roundTrip
        }
        /// Seconds for `bytes` more while the window grows so.
        func seconds(_ bytes: Double) -> Double { roundTrip * log(1 + bytes / max(brought, 1)) / log(growth) }
    }

    /// What steal decisions read about every connection at `now` (see `worthStealing`).
    struct StealEstimates {
        /// Seconds each connection needs for its chunk in flight (`remainingSeconds`).
        let remaining: [Double]
        /// Each transferring connection's slow start on a long path, where it is in one
        /// (`slowStartState`): no racer, which would start from TCP's first window behind it,
        /// finishes its chunk sooner, and a thief must beat its doubling.
        var slowStart: [SlowStart?] = []
        /// Bytes each connection has left of its chunk in flight.
        var leftBytes: [Double] = []
        /// Each connection's rate as a victim: infinite when it has nothing in flight, negative while
        /// unknown.
        let rates: [Double]
        /// One chunk at the typical rate, nil while no rate is known.
        let chunkSeconds: Double?
        let chunkSize: Double
        let firstByteWait: Double
        /// What the steal's request costs beyond the thief's first byte (`Coordinator.stealPrice`),
        /// when it cuts a victim's transfer and when the victim has none out (waiting to retry).
        var price = Coordinator.minStealGainSeconds
        var priceUncut = Coordinator.minStealGainSeconds
        /// Until the host answered a request beside another at its usual speed, a steal is one more
        /// split of the work and must pay as one (`Coordinator.splitCount`): half the victim's work
        /// at its own rate must exceed a split's price (nil: the host was seen to serve side by side).
        var splitPrice: Double?

        /// How long an end-game racer needs for a chunk of `chunkBytes`: its first byte (and its
        /// handshakes when it dials), then the chunk at the faster of the typical rate and
        /// `ownRate`; nil while neither is known.
        /// A racer expected to finish after the owner does not race it (see `Scheduler`): 5 MiB at
        /// `-n 4` from a server that sends 1 MiB/s a connection raced the last chunk twice, from its
        /// start, at the rate of an owner already well into it: 1.7 MB fetched twice, no time saved.
        /// `ownRate`: what a new copy may get, where known (the best rate a transfer of the download
        /// had: after the others ended, the typical rate may be only the slow owner's).
        func racerSeconds(chunkBytes: Int64, ownRate: Double?) -> Double? {
            let perByte = [chunkSeconds.map { $0 / max(1, chunkSize) }, ownRate.map { 1 / max($0, 1) }].compactMap { $0 }.min()
            return perByte.map { firstByteWait + $0 * Double(chunkBytes) }
        }

        /// Whether robbing `victim` of some of its `notStartedChunks` brings its finish forward by
        /// more than the steal costs.
        func worthStealing(_ victim: Int, notStartedChunks n: Int) -> Bool {
            if let splitPrice, rates[victim].isFinite, rates[victim] > 0 {
                let alone = Double(n) * chunkSize / rates[victim] + min(remaining[victim], chunkSize / rates[victim])
                guard alone / 2 > splitPrice else { return false }
            }
            let price = rates[victim].isFinite ? price : priceUncut
            guard
                Coordinator.worthStealing(
                    rate: rates[victim], notStartedChunks: n, chunkSize: chunkSize, inFlightSeconds: remaining[victim],
                    thiefChunkSeconds: chunkSeconds, firstByteWait: firstByteWait, price: price)
            else { return false }
            guard slowStart.indices.contains(victim), let s = slowStart[victim] else { return true }
            return Coordinator.worthStealing(
                inSlowStart: s, leftBytes: leftBytes[victim], notStartedChunks: n, chunkSize: chunkSize,
                thiefChunkSeconds: chunkSeconds ?? chunkSize / max(rates[victim], 1), firstByteWait: firstByteWait, price: price)
        }
    }

    /// `thiefDials`: the thief has no open connection to reuse, so its first byte also waits for the
    /// handshakes (`dialSeconds`). `proven`: judge the busy connections by `provenRate`.
    func stealEstimates(now: Double, thiefDials: Bool = false, proven: Bool = false) -> StealEstimates {
        let typical = typicalRate(now: now)
        let wait = expectedFirstByteWait(now: now) ?? 0
        var e = StealEstimates(
            remaining: connections.map { c in
                // One about to make its first request (`isStarting`) is not late for a thief that must
                // dial when it waits for a warm-up's connection (which comes sooner than new
                // handshakes would end: see `warmUpGrace`), or starts, staggered, before they would
                // end: a race would only ask for the chunk twice at once. A 4 MiB file at `-n 8` (4
                // chunks) through WAN link a had its other 4 connections dial to race the first 4's
                // chunks while those waited 40 ms for the warm-ups: 16 requests, 11 connections and
                // 1.9 MiB fetched twice over HTTPS, 2 MiB and more over plain HTTP.
                if thiefDials, c.machine.isStarting, let start = c.machine.waitingUntil,
                    awaitingWarmUp.contains(c.id) || start - now <= expectedHandshakeSeconds
                {
                    return 0
                }
                // A request after a shorter answer waits for its head like a thief's: only the rest of it.
                guard let r = continuationRate(c) else { return remainingSeconds(c, now: now, proven: proven) }
                return max(0, wait - (now - c.requestStartedAt)) + Double(max(0, c.chunkEnd - c.pos)) / max(r, 1)
            },
            rates: connections.map { c in
                guard c.machine.isTransferring else { return .infinity }
                if let r = continuationRate(c) { return r }
                return (proven ? provenRate(c, now: now) : rate(c, now: now) ?? averageRate(c, now: now)) ?? -1
            },
            chunkSeconds: typical.map { Double(plan.chunkSize) / $0 }, chunkSize: Double(plan.chunkSize),
            firstByteWait: wait + (thiefDials ? dialSeconds(typical: typical) : 0))
        e.slowStart = connections.map { c in c.machine.isTransferring ? slowStartState(c, now: now) : nil }
        e.leftBytes = connections.map { c in Double(max(0, c.chunkEnd - c.pos)) }
        e.price = stealPrice(thiefDials: thiefDials, cuts: true, now: now)
        e.priceUncut = stealPrice(thiefDials: thiefDials, cuts: false, now: now)
        if !cost.servesSideBySide {
            e.splitPrice = RequestPrice.cost(of: .init(purpose: .split, saves: 0, dials: thiefDials, inFlight: inFlight), model: cost).total
        }
        return e
    }

    /// The rate of a connection whose request after a shorter answer awaits its head (the same
    /// transfer to the rate rules): what it had while it received. Its rate over time would count the
    /// server's think time, and on an origin where that is long, every idle connection stole from it
    /// as from a slow one. Nil for any other connection.
    func continuationRate(_ c: Connection) -> Double? {
        guard c.machine.isTransferring, !c.machine.headJudged, let first = c.firstByteAt, c.lastByteAt > first + 0.001,
            c.transferBytes - c.bytesAtFirstByte >= Self.averageEvidenceBytes
        else { return nil }
        return Double(c.transferBytes - c.bytesAtFirstByte) / (c.lastByteAt - first)
    }

    /// What a request on a new connection costs beyond one on an open one: the TCP handshake's round
    /// trip, TLS's (TLS 1.3: one more), and the slow start up to the typical rate (0 on a path whose
    /// round trip is not known yet, and next to nothing on a LAN).
    func dialSeconds(typical: Double?) -> Double {
        guard let rtt = pathRoundTrip else { return 0 }
        return handshakeSeconds + (typical.map { SlowConnectionRule.rampSeconds(rate: $0, rtt: rtt) } ?? 0)
    }

    /// The round trips of a new connection's handshakes before its request goes out: TCP's, and
    /// TLS's (TLS 1.3: one more).
    var handshakeRounds: Double { cost.tls ? 2 : 1 }

    /// What a new connection's handshakes take (`handshakeRounds`); 0 while the path's round trip
    /// is not known.
    var handshakeSeconds: Double {
        guard let rtt = pathRoundTrip else { return 0 }
        return handshakeRounds * rtt
    }

    /// `handshakeSeconds`, or before any round trip is known, as the probe's first answer shows them:
    /// it took them and its request's round trip (over TLS two of its three round trips, over plain
    /// HTTP one of two); 0 without either.
    var expectedHandshakeSeconds: Double {
        if pathRoundTrip != nil { return handshakeSeconds }
        return (config.probeFirstAnswer ?? 0) * handshakeRounds / (handshakeRounds + 1)
    }

    /// The path's round trip as the shortest recent first-byte wait shows it (a request on a kept-alive
    /// connection waits one round trip; on a new one, the handshake's too): nil before the first.
    var pathRoundTrip: Double? { firstByteWaits.min() }

    /// The current request's average rate, once it had `minEvidenceSeconds` free to receive (and, if
    /// no byte came yet, far longer than first bytes usually take, or than its place behind the
    /// host's other requests makes it wait); nil before.
    ///
    /// On a host that thinks before its heads (`RequestCostModel.isCostly`), a request's rate is
    /// measured from its first byte, once it had `minEvidenceSeconds` since: counted from the
    /// request, 0.2 s of an object store's think time made a fast answer look slow, and every idle
    /// connection stole from it; and a young one's average is still in TCP's slow start. Elsewhere it
    /// is counted from the request, so that one that trickles from its first byte is caught soon
    /// (the simulator's trickle families).
    func averageRate(_ c: Connection, now: Double) -> Double? {
        if cost.isCostly, let first = c.firstByteAt, first >= c.requestStartedAt {
            let free = now - first - (c.held(at: now) - c.heldAtFirstByte)
            guard free >= Self.minEvidenceSeconds else { return nil }
            return Double(c.pos - c.requestStart) / free
        }
        let elapsed = now - c.requestStartedAt - (c.held(at: now) - c.heldAtRequest)
        let expected = c.machine.headJudged ? 0 : max(4 * (usualFirstByteWait ?? 0), 1.5 * cost.expectedWait(ahead: c.aheadAtSend, dials: !c.linkWasOpen))
        guard elapsed >= max(Self.minEvidenceSeconds, expected) else { return nil }
        return Double(c.pos - c.requestStart) / elapsed
    }

    /// Seconds `c` still needs for its whole run at its current rate; nil while that is unknown.
    func runSeconds(_ c: Connection, now: Double) -> Double? {
        guard c.machine.isTransferring, !isRacing(c.id), let r = rate(c, now: now) else { return nil }
        return Double(max(0, end(of: c.id) - c.pos)) / max(r, 1)
    }

    /// The median rate of the connections receiving now, for sizing steals; nil if none is known.
    func typicalRate(now: Double) -> Double? {
        let rates = connections.compactMap { c in c.machine.isTransferring && !isRacing(c.id) ? rate(c, now: now) : nil }.sorted()
        guard !rates.isEmpty else { return nil }
        return max(1, rates[rates.count / 2])
    }

    /// Seconds `c` still needs for its in-flight chunk: large when it is waiting to retry, zero
    /// while its rate is not known yet (racing is decided on evidence, not at once), and while TCP's
    /// slow start lasts on a long path, the round trips of doubling it needs (`slowStartSeconds`).
    /// Until a second of samples is known, the request's average so far decides (`averageRate`): in
    /// the end game the idle connections have nothing better to do than race a request that
    /// trickles from its start.
    func remainingSeconds(_ c: Connection, now: Double, proven: Bool = false) -> Double {
        if !c.machine.isTransferring { return 1e9 }
        let left = Double(max(0, c.chunkEnd - c.pos))
        guard let r = proven ? provenRate(c, now: now) : rate(c, now: now) ?? averageRate(c, now: now) else { return 0 }
        let atRate = left / max(r, 1)
        return slowStartSeconds(c, bytes: left, now: now).map { min($0, atRate) } ?? atRate
    }

    /// Seconds connection `c` needs for `bytes` more while TCP's slow start still doubles its window
    /// each round trip, on a long path (a round trip of `ConnectionWarmUp.minRoundTrip` or more): in
    /// slow start, what a round trip brings next is about what the transfer brought so far, so the
    /// rest takes `log2(1 + bytes ÷ brought)` round trips. Nil where the transfer did not keep up with
    /// half of that doubling from `initialWindowBytes` since its first byte (its window stopped
    /// growing at a loss, a full link or a server's cap per connection, or never grew: a server that
    /// trickles; the doubling outruns any of them within a few round trips), where `--max-speed` held
    /// it, and on a short path: its rate so far tells there. That rate, counted from its request, is
    /// a fraction of what it has in slow start: through WAN link a the connections of a 4 MiB file at
    /// `-n 8` looked 0.5-0.9 s from the end of their chunks a quarter second in, and every idle one
    /// raced them; each had its chunk 0.3 s later, and the races fetched 0.4-1.1 MiB twice.
    func slowStartSeconds(_ c: Connection, bytes: Double, now: Double) -> Double? {
        slowStartState(c, now: now)?.seconds(bytes)
    }

    /// Connection `c`'s slow start, where its transfer is in one on a long path (see `slowStartSeconds`),
    /// or where its window still grows, if slower (`growingWindow`).
    func slowStartState(_ c: Connection, now: Double) -> SlowStart? {
        guard let rtt = cost.roundTrip, rtt >= ConnectionWarmUp.minRoundTrip, !config.speedCapped,
            let first = c.firstByteAt, c.held(at: now) <= c.heldAtFirstByte, c.transferBytes > 0
        else { return nil }
        let rounds = min(30, (now - first) / rtt)
        let brought = Double(c.transferBytes)
        guard brought >= 0.5 * Self.initialWindowBytes * (pow(2, rounds) - 1) else { return growingWindow(c, roundTrip: rtt) }
        return SlowStart(brought: brought, roundTrip: rtt)
    }

    /// A window that still grows, though slower than a slow start alone on its path: the rate over
    /// the newest two round trips above `growingRatio` times the two before, as the first split reads
    /// connection 0 (`decideSplit`). Its growth a round trip is taken from those two windows. On a
    /// link that other transfers share (a daemon's tasks, a batch's files) every slow start is
    /// slower than a doubling; through WAN link a, 4 daemon tasks of 4 MiB at 2 connections each,
    /// the first split of one kept its connection 0 alone ("first split: 1 of 2", at 0.9 MiB/s,
    /// its rate still growing), and 0.13 s later its idle connection dialled to steal half of its
    /// chunks at that rate. Connection 0, cut at 2 MiB, had it 0.8 s in; the thief, from TCP's
    /// first window on the busy link, ran at 1.4 MiB/s, and the task took 1.74 s where its
    /// neighbours alone took 0.74-0.81 s.
    func growingWindow(_ c: Connection, roundTrip rtt: Double) -> SlowStart? {
        guard let (recent, before) = c.windowRates(window: 2 * rtt), before > 0, recent > Self.growingRatio * before else { return nil }
        return SlowStart(window: recent * rtt, growth: (recent / before).squareRoot(), roundTrip: rtt)
    }

    /// A rate over two round trips at least this much above the one over the two before still grows
    /// (see `growingWindow`, `decideSplit`).
    static let growingRatio = 1.25

    /// How long `provenRate` looks back.
    static let provenRateWindow = 3.0

    /// A busy connection's rate for robbing or racing it from an idle connection that must dial a new
    /// TCP (and TLS) connection on a long path (`assignIdle`): the better of its last second and its
    /// last `provenRateWindow` seconds, or, for a request younger than that, its rate since its first
    /// byte (its average counts the round trip it waited for it).
    ///
    /// Loss recovery on a WAN takes a connection down for a few round trips and it grows back; read
    /// from the last second alone, that dip made a remainder of 0.3 s look like seconds, and so did a
    /// steal's young request whose average still held its first byte's round trip. On WAN link b
    /// (150 ms, 0.5 % loss, `scripts/bench wan`, 950fa29) idle connections whose last request had been
    /// cut at a steal dialled in the end game to take or race chunks of such victims: each new
    /// connection, starting from TCP's first window behind a bottleneck the others kept full, brought
    /// 0-0.9 MiB in 0.5-1.7 s; runs with three such dials or more took 13.9 s (median of 8) against
    /// 13.45 s (12 with fewer). With this, 2 extra connections in 12 HTTPS runs instead of 26, and a
    /// median 0.3 s shorter (`Benchmarks/RESULTS.md`). A slow server still shows over the window.
    func provenRate(_ c: Connection, now: Double) -> Double? {
        let lastSecond = rate(c, now: now) ?? averageRate(c, now: now)
        var longer = rate(c, now: now, window: Self.provenRateWindow)
        if longer == nil, now - c.requestStartedAt < Self.provenRateWindow, let first = c.firstByteAt {
            let free = now - first - (c.held(at: now) - c.heldAtFirstByte)
            if free >= Self.minEvidenceSeconds { longer = Double(c.transferBytes - c.bytesAtFirstByte) / free }
        }
        guard let lastSecond else { return longer }
        return max(lastSecond, longer ?? lastSecond)
    }
}
