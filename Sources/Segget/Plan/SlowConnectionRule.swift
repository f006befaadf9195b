/// Which connections receive so far below their peers that they must not keep their work: the pure
/// rule behind re-dialling. Values in, values out; the fetch loop measures, this decides.
///
/// A connection's *network rate* counts only the time it was free to receive. Time segget held it
/// back itself (paused for `--max-speed`, or the whole loop waiting for a writer that is behind the
/// network) is not the server's doing, so a stall of the disk never reads as a slow server. Leaving
/// held time out can only raise a connection's own rate (the same bytes over fewer seconds). A hold
/// of more than a tenth of the window stops all judging for two windows: while segget itself is the
/// bottleneck a slow path costs nothing, and right after a hold the peers' rates are not typical
/// either (a server pacing like nginx's `limit_rate` sends the arrears at full speed).
///
/// The typical rate is the upper quartile of the latest rates of every connection measured in the
/// last `memory` seconds, receiving now or not, once there are at least three (before any typical
/// rate was known, one); with fewer, the last one stands. A request too short to be judged still leaves its average (`recordFinished`), so
/// that a connection that was slow once and then finished quick requests does not stay slow here. Near the end of a download the connections still receiving are mostly the slow
/// ones (the others ran out of work), so a median over those alone would call a trickle typical.
/// A connection that has not received its first byte yet is judged once it waited much longer than
/// its peers' first bytes usually take, counted from when its request went out: the coordinator
/// counts the wait of a request whose connection the fetch loop saw being made from the end of its
/// handshakes (600 ms, 0.5 % loss, a 20 Mbit/s line with its 0.6 s queue full, -n 8: a re-dial's
/// new connection was judged silent after 4 x 0.71 s, when its three round trips behind the queue
/// took 3.6 s, re-dialled again up to five times in a row, and the download took 29-46 requests to
/// aria2c's 17). While its connection is still being made, the limit is that many usual waits and
/// its handshakes (`Observation.handshakeSeconds`), so that a connect that stalls is tried again.
///
/// A request younger than half the window is judged on what it received since its first byte, once
/// it had `minJudgeSeconds` (and four usual first-byte waits, so that TCP slow start on a long path is
/// not mistaken for a slow server) and a peer at the typical rate would have delivered
/// `evidenceBytes` in that time: then a shortfall below `slowFraction` is no accident of timing. This
/// is what keeps a server that trickles some of its answers from deciding the finish time (issue 16:
/// with one request in three trickling, each such request cost its connection 0.5–0.8 s before it was
/// judged on a half-second window, and one in three re-dials drew a trickle again).
///
/// A slow connection is re-dialled only when that is worth it. Judged on a whole window, the rest of
/// its work must take longer at its rate than a fresh request needs plus the window (two windows
/// before: a request that went silent with 270 KiB of its chunk left then held the download 0.3 s
/// longer, simulator trickle-every-kth seed 9). A young request's rate is its average since
/// its first byte, which lags behind a request that slowed down after a good start (256 KiB at 4 MiB/s,
/// then one byte a second, still averages 1.6 MiB/s after 0.16 s): it is re-dialled once the rest
/// would take it more than `worthFactor` times what a fresh request at the typical rate needs (a usual
/// first-byte wait plus the rest at the typical rate). With the two-window bar, such a request holding
/// the last 0.75 MiB of a chunk was judged only after 0.35 s, and one holding 0.3 MiB after 0.7 s.
///
/// A path with a long round trip is judged on what TCP can do there (`rtt`, when the fetch loop
/// knows it): a new request may be in slow start, which takes round trips to reach the typical rate,
/// so a young request is held against what slow start delivers in its time, not against the typical
/// rate; a request judged on a whole window is judged on a window of at least 8 round trips
/// (`window(rtt:)`), so that a loss that halves its congestion window, or a retransmission timeout,
/// does not read as a slow server; and a re-dial must also pay for its own slow start (`rampSeconds`).
/// Measured in the simulator (`docs/simulator.md`, family wan-loss): without these, a download over
/// 40-200 ms with 0.1-0.5 % loss was re-dialled 17 times on average.
///
/// The typical rate needs one measurement, not three, when that is all there is: with two
/// connections whose later answers both trickle, no third ever came, nobody was judged, and the
/// download never ended (simulator, trickle-every-kth).
///
/// Bounds: a connection is re-dialled at most `maxConsecutiveRedials` times in a row (the count
/// starts again when it finishes a chunk) and the download at most `maxTotalRedials` times. Past
/// either, a slow connection gives up its not-started work, so that it holds one chunk at most, and
/// is re-dialled again only after a hold-off of its own that doubles each time up to 8 s
/// (`lateHoldOff`): a server that keeps drawing slow answers costs a re-dial a while per connection,
/// never a download that does not end.
public struct SlowConnectionRule: Sendable {
    /// One connection's recent receiving, as the fetch loop measured it.
    public struct Observation: Sendable, Equatable {
        public var id: Int
        /// Bytes received over the last `seconds`.
        public var bytes: Int64
        public var seconds: Double
        /// Of `seconds`, how long segget itself held the connection back.
        public var heldSeconds: Double = 0
        /// Seconds its request has waited for a first body byte; nil once one arrived.
        public var waitingForFirstByte: Double?
        /// What the handshakes of the connection its request waits for take on this path, while that
        /// connection is still being made (0 once it is made, or over one kept open): its first byte is
        /// due that much later (see `judge`).
        public var handshakeSeconds = 0.0
        /// Bytes left in its assignment.
        public var remainingBytes: Int64
        /// Re-dials since it last finished a chunk.
        public var consecutiveRedials = 0
        /// Its rate over the newest round trips (nil: unknown), for what keeping it would cost: a young
        /// request's average lags behind one that went quiet after a good start.
        public var currentRate: Double?
        /// The best rate its request had over an earlier whole window: a request that proved its
        /// path is judged slow only far lower (`provenFraction`).
        public var provenRate = 0.0
        /// Seconds since its request's first byte (nil: `seconds`), for the slow start it may still be in.
        public var age: Double?
        /// Bytes over its newest round trip (at least 0.1 s) against the one before it (nil: not
        /// known): about 2 while TCP's slow start still doubles its window every round trip.
        public var growth: Double?
        /// Its own path's round trip and usual first-byte wait, where they are not the ones `judge` is
        /// given (a download with mirrors: each source's).
        public var path: Path?

        public struct Path: Sendable, Equatable {
            public var roundTrip: Double?
            public var usualFirstByteWait: Double?
            public init(roundTrip: Double?, usualFirstByteWait: Double?) {
                self.roundTrip = roundTrip
                self.usualFirstByteWait = usualFirstByteWait
            }
        }

        public init(id: Int, bytes: Int64, seconds: Double, heldSeconds: Double = 0, waitingForFirstByte: Double? = nil,
                    remainingBytes: Int64, consecutiveRedials: Int = 0) {
            self.id = id
            self.bytes = bytes
            self.seconds = seconds
            self.heldSeconds = heldSeconds
            self.waitingForFirstByte = waitingForFirstByte
            self.remainingBytes = remainingBytes
            self.consecutiveRedials = consecutiveRedials
        }

        /// Seconds it was free to receive.
        var freeSeconds: Double { max(0, seconds - min(max(0, heldSeconds), seconds)) }
    }

    /// What to do with a slow connection.
    public enum Action: Sendable, Equatable {
        /// Continue on a fresh connection from the byte reached, keeping only the chunk in flight.
        case redial
        /// Out of re-dials: keep receiving, but only the chunk in flight (the rest goes back).
        case keepOnlyTheChunkInFlight
    }

    public struct Verdict: Sendable, Equatable {
        public var id: Int
        public var action: Action
        /// Its network rate and the typical rate it fell short of (bytes per second).
        public var rate: Double
        public var typical: Double
        /// Not slower than the others: every answer so far was slow, and this re-dial looks for a
        /// faster one (see `explore`).
        public var exploring = false
    }

    /// The measuring window, seconds (see `Coordinator.judgeSlowConnections` for why 0.5 s).
    public var window: Double
    /// Slow means below this fraction of the typical rate.
    public var slowFraction = 0.4
    /// For a request that had the typical rate over a whole window before, slow means below this
    /// fraction: a TCP connection recovering from a loss halves its window once or twice and then
    /// grows back; a server that trickles drops far lower. On the simulator's lossy links (80 ms,
    /// 0.1 %) this took re-dials from 36 to 2 per download (see `docs/simulator.md`).
    public var provenFraction = 0.1
    /// Below this typical rate nobody is judged (too little to tell paths apart).
    public var minTypicalRate = 256.0 * 1024
    public var maxConsecutiveRedials: Int
    public var maxTotalRedials: Int
    /// A first byte may take this many times its peers' usual wait, and at least `minFirstByteWait`
    /// (nil: `minJudgeSeconds`).
    public var firstByteFactor = 4.0
    public var minFirstByteWait: Double?
    /// A young request is judged after this much free time since its first byte (see above), and a
    /// first byte is awaited at least this long. The slow rule runs every 0.05 s
    /// (`Coordinator.slowJudgeInterval`), so this is the second round of a request's life. It was
    /// 0.15 s: on `Benchmarks/slow-tail.sh` (4 MiB/s per connection, where `evidenceBytes` alone takes
    /// 0.06 s) every trickling request then held its connection 0.15–0.2 s.
    public var minJudgeSeconds = 0.08
    /// A young request is re-dialled only when the rest would take it this many times longer than a
    /// fresh request at the typical rate (see above).
    public var worthFactor = 2.0
    /// What a peer at the typical rate must have delivered in a young request's time before the
    /// request may be judged or counted towards the typical rate.
    public var evidenceBytes: Int64 = 256 << 10

    /// How long a connection's latest rate counts towards the typical rate, seconds.
    public var memory = 10.0
    /// Past the bounds, the first late re-dial waits this long; each one after, twice as long as the last.
    public var lateHoldOff = 0.5
    /// The hold-off doubles at most this many times (to 8 s), per connection: each connection that
    /// holds a slow answer gets a new draw that often at least, so a download always ends.
    public var maxLateDoublings = 4
    /// With no typical rate above `minTypicalRate` (every answer so far slow), the slowest connection
    /// is re-dialled after this long to look for a faster answer; each later try waits twice as long.
    public var exploreHoldOff = 0.5
    /// A connection whose newest round trip brought at least this many times the one before it is
    /// taken to be in slow start (which doubles it): not explored (see `explore`).
    public static let slowStartGrowth = 1.5
    /// TCP's initial window (10 segments of 1448 bytes), for the slow start a new request may be in.
    public static let initialWindowBytes = 14480.0

    /// The typical rate as of the last round (see above).
    public private(set) var typical: Double?
    public private(set) var totalRedials = 0
    /// Re-dials past the bounds, and per connection how many it had and when its next may come.
    public private(set) var lateRedials = 0
    private var late: [Int: (count: Int, at: Double)] = [:]
    /// Re-dials that did not pay: the new connection was judged slow again, at a rate no better than
    /// the one it replaced (see `judge`).
    public private(set) var unpaidRedials = 0
    /// A new connection this many times slower than the one its re-dial replaced did not pay, on a
    /// path where slow start to the typical rate takes at least `minUnpaidRampSeconds`.
    public var unpaidFactor = 4.0
    public var minUnpaidRampSeconds = 0.1
    /// On a path where slow start to the typical rate takes this long, slow means below
    /// `provenFraction` for every connection (see `judge`). WAN link b needs about 1.4 s (300 ms to a
    /// first byte behind a full queue, 1.3-2.5 MiB/s), link a about 0.9 s; with 0.1 s here, fast
    /// short paths counted too (simulator, silence seed 1779: 9 ms, 435 MiB/s, 0.13 s of slow start,
    /// answers silent after 1 MiB caught later, 8.1 x the ideal against a bound of 8).
    public var lossRecoveryRampSeconds = 0.5
    /// Per connection, the rate its last re-dial replaced, and whether (at which consecutive re-dial)
    /// a re-dial of it did not pay since it last finished a chunk.
    private var redialRate: [Int: Double] = [:]
    private var unpaidAt: [Int: Int] = [:]
    /// Re-dials that looked for a faster answer, and when the next may come (see `explore`).
    public private(set) var explorations = 0
    private var exploreAt: Double?
    /// The connection re-dialled last to look for a faster answer, its rate then, and when.
    private var explored: (id: Int, rate: Double, at: Double)?
    /// Each connection's latest rate over a whole window, and when it was measured.
    private var latest: [Int: (rate: Double, at: Double)] = [:]
    /// When a round last saw a connection held back for more than a tenth of the window.
    private var lastHoldAt: Double?

    /// True while judging waits after a hold (see above).
    func isSuspended(at now: Double) -> Bool { lastHoldAt.map { now - $0 < 2 * window } ?? false }

    public init(window: Double = 0.5, maxConsecutiveRedials: Int = 3, maxTotalRedials: Int) {
        self.window = window
        self.maxConsecutiveRedials = maxConsecutiveRedials
        self.maxTotalRedials = maxTotalRedials
    }

    /// Notes the average rate of a request that ended after `seconds` (`heldSeconds` of them held
    /// back), if it ran long enough or carried `evidenceBytes` (the same bar a young request in
    /// flight must clear to teach the typical rate).
    public mutating func recordFinished(id: Int, bytes: Int64, seconds: Double, heldSeconds: Double = 0, now: Double) {
        let free = seconds - min(max(0, heldSeconds), seconds)
        // A request of `evidenceBytes` counts however quick it was: against a fast server every request
        // may be over in a few milliseconds, and then no typical rate was ever known (a download whose
        // last chunks waited for heads 30 s late hung at 23 of 24 MiB: TrickleShapeTests).
        guard !isSuspended(at: now), free >= window / 2 || (bytes >= evidenceBytes && free > 0.0005) else { return }
        latest[id] = (Double(bytes) / seconds, now)
    }

    /// Forgets what connections `ids` measured: they served a source that was just dropped (a mirror
    /// that sent bad pieces, one that failed), whose rates say nothing of the sources left. The
    /// typical rate is learnt again from the connections' next measurements. Before, a fast mirror
    /// dropped for its bad bytes left its rate as the typical one for the 10 s it is remembered,
    /// and the only mirror left, at 5-6 MiB/s a connection, was re-dialled as slow "against a
    /// typical 181 MiB/s".
    public mutating func forget(_ ids: [Int]) {
        guard !ids.isEmpty else { return }
        for id in ids {
            latest[id] = nil
            redialRate[id] = nil
        }
        typical = nil
    }

    /// The window a whole-window judgement uses on a path with round trip `rtt`: at least 8 round
    /// trips (at most 2 s), so that one loss recovery is a small part of it.
    public func window(rtt: Double?) -> Double { max(window, min(2, 8 * (rtt ?? 0))) }

    /// Seconds a new request needs to reach `rate` by slow start at round trip `rtt` (0 without one).
    public static func rampSeconds(rate: Double, rtt: Double?) -> Double {
        guard let rtt, rtt > 0 else { return 0 }
        let rounds = (rate * rtt / initialWindowBytes).log2OrZero
        return rtt * rounds
    }

    /// The rate a healthy request `seconds` old can have averaged at round trip `rtt`: the typical
    /// rate, or less while slow start (from the initial window, doubling every round trip) limits it.
    public static func expectedRate(typical: Double, seconds: Double, rtt: Double?) -> Double {
        guard let rtt, rtt > 0, seconds > 0 else { return typical }
        return min(typical, slowStartBytes(seconds: seconds, rtt: rtt) / seconds)
    }

    /// What slow start from the initial window, doubling every round trip `rtt` (at least 0), brings
    /// in its first `seconds` (linear within a round trip).
    static func slowStartBytes(seconds: Double, rtt: Double) -> Double {
        guard seconds > 0 else { return 0 }
        let doublings = min(50, seconds / rtt)
        return initialWindowBytes * (Double(sign: .plus, exponent: Int(doublings), significand: 1) * (1 + (doublings - doublings.rounded(.down))) - 1)
    }

    /// The verdicts on one round of observations taken at `now`, in the order given.
    /// `usualFirstByteWait` is how long first bytes recently took, `rtt` the path's round trip (nil
    /// if unknown), `handshakeSeconds` what a new connection spends on its handshakes before its
    /// request goes out (TCP's round trip, and TLS's). Counts the re-dials it orders.
    /// `requestPrice`: what a fresh request costs beyond its round trips (the server's think time,
    /// the wait behind the requests out, the queue it adds: `RequestPrice`), which a re-dial must pay
    /// for too.
    ///
    /// `pipe`: the download's total rate over the latest window and its usual one over windows of
    /// the same length in the last few seconds (`usual`). Where the total holds up while a connection that was
    /// receiving is slow (`absorbs`), the others took its share of a full bottleneck, and a new
    /// connection in its place would take it back from them, not add to the total: on a path where a new
    /// connection's slow start takes `minUnpaidRampSeconds` it keeps only its chunk in flight, which
    /// costs no request.
    public mutating func judge(_ observations: [Observation], now: Double, usualFirstByteWait: Double? = nil,
                               rtt: Double? = nil, handshakeSeconds: Double = 0, requestPrice: Double = 0,
                               pipe: (current: Double, usual: Double)? = nil, networkRTT: Double? = nil) -> [Verdict] {
        if observations.contains(where: { $0.heldSeconds > window / 10 }) { lastHoldAt = now }
        guard !isSuspended(at: now) else { return [] }
        for o in observations where o.waitingForFirstByte == nil && o.seconds > 0
            && (o.freeSeconds >= window / 2 || (o.freeSeconds >= minJudgeSeconds && o.bytes >= evidenceBytes)) {
            latest[o.id] = (Double(o.bytes) / o.seconds, now)
        }
        latest = latest.filter { now - $0.value.at <= memory }
        // Three measurements replace a typical rate known before; before any, one is enough (see above).
        if latest.count >= 3 || (typical == nil && !latest.isEmpty) {
            // The upper quartile: when most answers trickle, their median would call a trickle typical
            // (simulator, trickle-fraction seed 442: 10 of 16 first answers at 4 KiB/s, and no request
            // was ever slower than "typical").
            typical = Self.upperQuartile(latest.values.map(\.rate))
        }
        guard let typical, typical > minTypicalRate else {
            return explore(observations, now: now, rtt: rtt, usualFirstByteWait: usualFirstByteWait, networkRTT: networkRTT)
        }
        var verdicts: [Verdict] = []
        for o in observations {
            let pathRTT = o.path.map(\.roundTrip) ?? rtt
            let usualFirstByteWait = o.path.map(\.usualFirstByteWait) ?? usualFirstByteWait
            let firstByteLimit = max(minFirstByteWait ?? minJudgeSeconds, firstByteFactor * ((usualFirstByteWait ?? 0) + o.handshakeSeconds))
            let youngLimit = max(minJudgeSeconds, firstByteFactor * (usualFirstByteWait ?? 0))
            let rate: Double
            var young = true
            var expected = typical
            if let waited = o.waitingForFirstByte {
                guard waited >= firstByteLimit else { continue }
                rate = 0
            } else {
                guard o.seconds > 0 else { continue }
                young = o.freeSeconds < window / 2
                if young && (o.freeSeconds < youngLimit || typical * o.freeSeconds < Double(evidenceBytes)) { continue }
                rate = Double(o.bytes) / o.freeSeconds
                // A young request may still be in slow start (see above).
                // Young or not, a request may still be in slow start on a long path (see above): at
                // 150 ms a request judged on its average since its first byte after 0.3 s was
                // re-dialled at 167 KiB/s against 626 KiB/s typical (WAN link b).
                expected = Self.expectedRate(typical: typical, seconds: o.age ?? o.freeSeconds, rtt: pathRTT)
            }
            // On a path where a new connection's slow start to the typical rate takes a while
            // (`lossRecoveryRampSeconds`), every connection is judged as one that had the typical rate:
            // a re-dial there replaces a connection in loss recovery, which grows back, by one that
            // starts from TCP's initial window behind a bottleneck that the others keep full. On WAN
            // link b (150 ms, 0.5 % loss, 200 Mbit/s) the first re-dials came 2.7-2.9 s in, at 501-828
            // KiB/s against a typical 1.3-2.5 MiB/s, and every new connection then crawled at 45-120
            // KiB/s for the remaining 10 s: one or two of 8 connections lost for most of the download.
            // A trickling server (a few KiB/s) is still far below a tenth.
            // What a re-dial costs counts its handshakes too, as the coordinator's dials do
            // (`Coordinator.dialSeconds`): on WAN link a (80 ms, 0.1 % loss, 400 Mbit/s) slow start
            // to a typical 2-2.5 MiB/s takes 0.44 s at the 0.106 s round trip segget sees, under the
            // bar, but with the handshakes a re-dial costs 0.55 s (HTTP) and 0.65 s (HTTPS). Judged
            // against 0.4 of typical, connections still behind their peers 1.0-1.1 s into the
            // download were re-dialled at 0.6-1.0 MiB/s, and each new connection then averaged
            // 130-250 KiB/s for 1.5-2 s behind the bottleneck the others kept full (and was
            // re-dialled again): up to 9 re-dials and 26 TCP connections in a run, 0.3-0.9 s slower.
            // The new connection's request waits a round trip for its first byte as well: `rtt` was
            // once read from first requests that waited for their handshakes too (0.106 s on link a),
            // and is the path's own since the first requests go over warm connections (0.081 s;
            // `ConnectionWarmUp`), which without it made link a a short path again (0.39-0.48 s) and
            // drew re-dials there (10 in 5 runs over HTTP against none).
            let longPath = isLongPath(handshakeSeconds: handshakeSeconds, rtt: pathRTT, rate: typical)
            let fraction = o.provenRate >= typical * slowFraction || longPath ? provenFraction : slowFraction
            guard rate < expected * fraction else { continue }
            // Only worth it when the rest would take a while at this rate, and longer than a fresh
            // request needs, its own slow start included (see above).
            let keeping = Double(o.remainingBytes) / max(min(rate, o.currentRate ?? rate), 1)
            let fresh = max(usualFirstByteWait ?? 0, requestPrice + (pathRTT ?? 0)) + Double(o.remainingBytes) / typical + Self.rampSeconds(rate: typical, rtt: pathRTT)
            guard keeping > (young ? worthFactor * fresh : fresh + window) else { continue }
            // Only on a path long enough for a new connection's start to be slow by itself (as for an
            // unpaid re-dial below), where its slow start behind the full bottleneck is what the
            // re-dial buys: on a short one a fresh request is at full speed at once, and against a
            // server that trickles a share of its answers it is a new draw (simulator,
            // trickle-fraction seed 430, 8 ms: kept, 41 % of answers trickling took 87.6 x the ideal).
            if Self.rampSeconds(rate: typical, rtt: pathRTT) >= minUnpaidRampSeconds, o.waitingForFirstByte == nil,
                let pipe, Self.absorbs(pipe, deficit: typical - rate) {
                verdicts.append(Verdict(id: o.id, action: .keepOnlyTheChunkInFlight, rate: rate, typical: typical))
                continue
            }
            // A re-dial that did not pay: the new connection is slow again, and far slower than the
            // one it replaced (`unpaidFactor`). A slow server draws a fast answer on a fresh request
            // more often than not, and a trickle drawn again is no slower than the last; a path whose
            // new connections crawl is another matter (WAN link b, 150 ms, 0.5 % loss, a 200 Mbit/s
            // bottleneck that seven established connections kept full: one connection at 1 MiB/s was
            // re-dialled, and then five times more in 7 s, each new connection at 14-76 KiB/s against
            // a typical 3 MiB/s). Until it finishes a chunk, that connection is then treated as past
            // the bounds, with a hold-off that also doubles with every unpaid re-dial of the download,
            // so that the next try comes seconds later.
            if o.consecutiveRedials == 0 { unpaidAt[o.id] = nil }
            // Only on a path long enough for a new connection's start to be slow by itself (its slow
            // start to the typical rate takes `minUnpaidRampSeconds`): on a LAN a new connection is
            // at full speed at once, and a slow one is the server's answer, worth another draw
            // (simulator, silence seed 202: a re-dial drew a second answer that went silent after
            // 128 KiB; held off, the download took 10.7 x its ideal).
            if o.consecutiveRedials > 0, unpaidAt[o.id] == nil, rate * unpaidFactor < (redialRate[o.id] ?? -1),
                Self.rampSeconds(rate: typical, rtt: pathRTT) >= minUnpaidRampSeconds {
                unpaidAt[o.id] = o.consecutiveRedials
                unpaidRedials += 1
                let count = (late[o.id]?.count ?? 0) + 1
                late[o.id] = (count, now + lateHoldOff * Double(1 << min(count + unpaidRedials, maxLateDoublings)))
            }
            let unpaid = unpaidAt[o.id] != nil
            if !unpaid && o.consecutiveRedials < maxConsecutiveRedials && totalRedials < maxTotalRedials {
                totalRedials += 1
                redialRate[o.id] = rate
                verdicts.append(Verdict(id: o.id, action: .redial, rate: rate, typical: typical))
            } else if now >= late[o.id]?.at ?? 0 {
                // Past the bounds: one more, after a hold-off that doubles (see above).
                let count = (late[o.id]?.count ?? 0) + 1
                late[o.id] = (count, now + lateHoldOff * Double(1 << min(count, maxLateDoublings)))
                totalRedials += 1
                lateRedials += 1
                redialRate[o.id] = rate
                verdicts.append(Verdict(id: o.id, action: .redial, rate: rate, typical: typical))
            } else {
                verdicts.append(Verdict(id: o.id, action: .keepOnlyTheChunkInFlight, rate: rate, typical: typical))
            }
        }
        return verdicts
    }

    /// Every answer so far was slow, so no typical rate tells a slow one from a fast one: a server that
    /// trickles a share of its answers may have trickled all of the first ones (simulator,
    /// trickle-fraction seed 49: four requests, all trickling after 64 KiB, no end in sight). The
    /// connection that would take longest is re-dialled to look for a faster answer, first
    /// `exploreHoldOff` after the first judgement and then after a hold-off that doubles. A try that
    /// finds an answer four times faster, and twice as fast as the others' upper quartile, makes the next
    /// try come at once, until enough fast answers set the typical rate and the rule proper takes over.
    /// A server that is simply slow costs a re-dial now and then, a doubling interval apart; so does a
    /// line too narrow for `minTypicalRate` a connection, where the connection re-dialled at its worst
    /// (a loss just halved its window) always reads four times faster a moment later, but no faster
    /// than the others: with four times alone the next try came at once, again and again (20 Mbit/s,
    /// 300 ms, 2 % loss, 8 connections: 18 re-dials and 48 requests for 64 MiB, aria2c's 17;
    /// exploratory run 10).
    private mutating func explore(_ observations: [Observation], now: Double, rtt: Double?, usualFirstByteWait: Double?,
                                  networkRTT: Double?) -> [Verdict] {
        if let e = explored, let l = latest[e.id], l.at > e.at, l.rate >= 4 * max(e.rate, 1),
            l.rate >= 2 * Self.upperQuartile(latest.filter { $0.key != e.id }.map(\.value.rate))
        {
            // It found a faster answer: the others may well find one too, so the next try comes at once.
            explored = nil
            explorations = 0
            exploreAt = now
        }
        // Not while requests may still be in slow start (a WAN download's first round trips are all
        // slow): a candidate has had a whole window since its first byte, or waited that long for it.
        // Nor while a candidate's rate still grows as slow start grows it: on a long path every
        // answer is slow for longer than any fixed time (600 ms, TLS: 72 KiB/s after 2.8 s, doubling
        // each round trip), and a re-dial starts that climb again behind two round trips of
        // handshakes (32 MiB at -n 4: 13.6 s against aria2c's 10.9 s).
        // A request still waiting for its first byte is a candidate once it waited `firstByteFactor`
        // times the usual wait and its handshakes (as in `judge`), and not before any first byte came: until then nothing says it is
        // slow (1,000 ms, TLS: the first requests were re-dialled after 1.06 s, their answers due
        // after 1 s, and the fresh connections again after 2 s, due after three round trips).
        // Nor, on a path so long that slow start needs longer than the settled time to reach
        // `minTypicalRate`, one that has what slow start delivers at its age, until slow start had
        // that time and a round trip more (`keepsUpWithSlowStart`): "every answer slow" says nothing
        // there until then, and growth over two round trips is not known before two round trips
        // or misses a sender that paces (BBR's first round trips at 1,000 ms brought about 40 KB
        // each, flat, then doubled: the probe's connection, ahead of the others at 47 KiB/s, was
        // re-dialled 2.4 s after its first byte, and the download took 19.1 s and 12 requests
        // against 14.7 s and 8). The round trip there is the kernel's where known: a first-byte
        // wait counts a server's think time too. Past that wait, on such a path only a clear trickle
        // is a candidate: slow start has only just brought a healthy connection to 256 KiB/s (at
        // 600 ms and -n 8, connections at 249 KiB/s, as fast as the others, were re-dialled 3.9 s in).
        let settled = max(minJudgeSeconds, window(rtt: rtt))
        let candidates = observations.filter { o in
            if let waited = o.waitingForFirstByte {
                return usualFirstByteWait.map { waited >= max(settled, firstByteFactor * ($0 + o.handshakeSeconds)) } ?? false
            }
            let age = o.age ?? o.freeSeconds
            return age >= settled && (o.growth ?? 1) < Self.slowStartGrowth
                && !Self.keepsUpWithSlowStart(o, age: age, settled: settled, rtt: [o.path?.roundTrip ?? rtt, networkRTT].compactMap { $0 }.min(),
                                              slowFraction: slowFraction, floor: minTypicalRate)
        }
        // Only among two or more: a download of one connection from a slow server is one request
        // (EngineTests.oneConnectionMakesOneRequest: 192 KiB at 64 KiB/s was re-dialled once).
        guard observations.count >= 2, !candidates.isEmpty else { return [] }
        guard let at = exploreAt else {
            exploreAt = now + exploreHoldOff
            return []
        }
        func seconds(_ o: Observation) -> Double {
            Double(o.remainingBytes) / max(min(Double(o.bytes) / max(o.freeSeconds, 1e-3), o.currentRate ?? .infinity), 1)
        }
        let holdOff = exploreHoldOff * Double(1 << min(explorations, 20))
        guard now >= at, let worst = candidates.max(by: { seconds($0) < seconds($1) }), seconds(worst) > 4 * holdOff else { return [] }
        explorations += 1
        exploreAt = now + 2 * holdOff
        let rate = Double(worst.bytes) / max(worst.freeSeconds, 1e-3)
        explored = (worst.id, rate, now)
        return [Verdict(id: worst.id, action: .redial, rate: rate, typical: typical ?? 0, exploring: true)]
    }
}
