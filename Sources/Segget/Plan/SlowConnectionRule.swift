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
/// The typical rate is the median of the latest rates of every connection measured in the last
/// `memory` seconds, receiving now or not, once there are at least three; with fewer, the last such
/// median stands. A request too short to be judged still leaves its average (`recordFinished`), so
/// that a connection that was slow once and then finished quick requests does not stay slow here. Near the end of a download the connections still receiving are mostly the slow
/// ones (the others ran out of work), so a median over those alone would call a trickle typical.
/// A connection that has not received its first byte yet is judged once it waited much longer than
/// its peers' first bytes usually take.
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
/// its work must take more than two windows at its rate. A young request's rate is its average since
/// its first byte, which lags behind a request that slowed down after a good start (256 KiB at 4 MiB/s,
/// then one byte a second, still averages 1.6 MiB/s after 0.16 s): it is re-dialled once the rest
/// would take it more than `worthFactor` times what a fresh request at the typical rate needs (a usual
/// first-byte wait plus the rest at the typical rate). With the two-window bar, such a request holding
/// the last 0.75 MiB of a chunk was judged only after 0.35 s, and one holding 0.3 MiB after 0.7 s.
///
/// Bounds: a connection is re-dialled at most `maxConsecutiveRedials` times in a row (the count
/// starts again when it finishes a chunk) and the download at most `maxTotalRedials` times. Past
/// either, a slow connection only gives up its not-started work, so that it holds one chunk at most,
/// which the end game races.
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
        /// Bytes left in its assignment.
        public var remainingBytes: Int64
        /// Re-dials since it last finished a chunk.
        public var consecutiveRedials = 0

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
    }

    /// The measuring window, seconds (see `Coordinator.judgeSlowConnections` for why 0.5 s).
    public var window: Double
    /// Slow means below this fraction of the typical rate.
    public var slowFraction = 0.4
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

    /// The typical rate as of the last round (see above).
    public private(set) var typical: Double?
    public private(set) var totalRedials = 0
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
        guard !isSuspended(at: now), free >= window / 2 || (bytes >= evidenceBytes && free > 0.01) else { return }
        latest[id] = (Double(bytes) / seconds, now)
    }

    /// The verdicts on one round of observations taken at `now`, in the order given.
    /// `usualFirstByteWait` is how long first bytes recently took (nil if unknown). Counts the
    /// re-dials it orders.
    public mutating func judge(_ observations: [Observation], now: Double, usualFirstByteWait: Double? = nil) -> [Verdict] {
        if observations.contains(where: { $0.heldSeconds > window / 10 }) { lastHoldAt = now }
        guard !isSuspended(at: now) else { return [] }
        for o in observations where o.waitingForFirstByte == nil && o.seconds > 0
            && (o.freeSeconds >= window / 2 || (o.freeSeconds >= minJudgeSeconds && o.bytes >= evidenceBytes)) {
            latest[o.id] = (Double(o.bytes) / o.seconds, now)
        }
        latest = latest.filter { now - $0.value.at <= memory }
        if latest.count >= 3 {
            let rates = latest.values.map(\.rate).sorted()
            typical = rates[rates.count / 2]
        }
        guard let typical, typical > minTypicalRate else { return [] }
        let firstByteLimit = max(minFirstByteWait ?? minJudgeSeconds, firstByteFactor * (usualFirstByteWait ?? 0))
        let youngLimit = max(minJudgeSeconds, firstByteFactor * (usualFirstByteWait ?? 0))
        var verdicts: [Verdict] = []
        for o in observations {
            let rate: Double
            var young = true
            if let waited = o.waitingForFirstByte {
                guard waited >= firstByteLimit else { continue }
                rate = 0
            } else {
                guard o.seconds > 0 else { continue }
                young = o.freeSeconds < window / 2
                if young && (o.freeSeconds < youngLimit || typical * o.freeSeconds < Double(evidenceBytes)) { continue }
                rate = Double(o.bytes) / o.freeSeconds
            }
            guard rate < typical * slowFraction else { continue }
            // Only worth it when the rest would take a while at this rate (see above).
            let keeping = Double(o.remainingBytes) / max(rate, 1)
            let fresh = (usualFirstByteWait ?? 0) + Double(o.remainingBytes) / typical
            guard keeping > (young ? worthFactor * fresh : 2 * window) else { continue }
            if o.consecutiveRedials < maxConsecutiveRedials && totalRedials < maxTotalRedials {
                totalRedials += 1
                verdicts.append(Verdict(id: o.id, action: .redial, rate: rate, typical: typical))
            } else {
                verdicts.append(Verdict(id: o.id, action: .keepOnlyTheChunkInFlight, rate: rate, typical: typical))
            }
        }
        return verdicts
    }
}
