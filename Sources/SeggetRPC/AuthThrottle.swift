import Glibc
import SeggetSystem

/// How the server slows down wrong tokens: per client address, a failure score that halves every
/// `halfLife`; past `freeFailures` each wrong-token answer to that address waits, twice as long per
/// further failure, up to `maxDelay`.
///
/// Only answers to wrong tokens wait. A call with the right token is never delayed or refused, so a
/// page that guesses from the user's own machine (the same address as the user's clients) cannot
/// lock the user out; it only slows its own guesses. A burst is a run of failures from one address
/// with less than `burstGap` between them; each is reported once, when it starts
/// (`Decision.startsBurst`), with the size of the address's previous burst. Pure: the clock is passed in.
public struct AuthThrottle: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Failures (after decay) answered without delay: typing mistakes.
        public var freeFailures: Double = 5
        /// The time in which a score falls by half.
        public var halfLife: Duration = .seconds(60)
        /// The delay of the first failure past `freeFailures`; it doubles with each further one.
        public var firstDelay: Duration = .milliseconds(100)
        /// The longest any answer waits.
        public var maxDelay: Duration = .seconds(2)
        /// A failure this long after the address's last one starts a new burst.
        public var burstGap: Duration = .seconds(60)
        /// Addresses remembered; past this the quietest is forgotten (an attacker on the network with
        /// many addresses cannot grow the table).
        public var maxClients: Int = 1024

        public init() {}
    }

    /// What to do with one answer that carries wrong tokens.
    public struct Decision: Sendable, Equatable {
        /// How long to hold the answer back.
        public var delay: Duration
        /// True for the first failure of a burst: the one to log.
        public var startsBurst: Bool
        /// The address's previous burst, when this one starts after it: its failures and the time from its
        /// first to its last.
        public var previousBurst: (failures: Int, lasted: Duration)?

        public static func == (a: Decision, b: Decision) -> Bool {
            a.delay == b.delay && a.startsBurst == b.startsBurst
                && a.previousBurst?.failures == b.previousBurst?.failures
                && a.previousBurst?.lasted == b.previousBurst?.lasted
        }
    }

    struct Client: Sendable {
        var score: Double
        /// The last failure.
        var updated: ContinuousClock.Instant
        var burstFailures: Int
        var burstStarted: ContinuousClock.Instant
    }

    public let settings: Settings
    private(set) var clients: [String: Client] = [:]

    public init(settings: Settings = Settings()) {
        self.settings = settings
    }

    /// Records `count` wrong tokens (one answer may carry several: a batch, `system.multicall`) from
    /// `client` at `now`, and says how long that answer waits.
    public mutating func recordFailures(
        _ count: Int, from client: String, at now: ContinuousClock.Instant
    ) -> Decision {
        precondition(count > 0, "recordFailures needs at least one failure.")
        var previous: (failures: Int, lasted: Duration)?
        var entry: Client
        let starts: Bool
        if let known = clients[client] {
            entry = known
            entry.score = decayed(known, at: now)
            starts = now - known.updated >= settings.burstGap
            if starts { previous = (known.burstFailures, known.updated - known.burstStarted) }
        } else {
            makeRoom(at: now)
            entry = Client(score: 0, updated: now, burstFailures: 0, burstStarted: now)
            starts = true
        }
        entry.updated = now
        if starts {
            entry.burstFailures = 0
            entry.burstStarted = now
        }
        entry.score += Double(count)
        entry.burstFailures += count
        clients[client] = entry
        return Decision(delay: delay(forScore: entry.score), startsBurst: starts, previousBurst: previous)
    }

    /// The current (decayed) score of `client`: 0 for an address never seen or forgotten.
    public func score(of client: String, at now: ContinuousClock.Instant) -> Double {
        clients[client].map { decayed($0, at: now) } ?? 0
    }

    /// The wait for an answer when the score after it is `score`.
    func delay(forScore score: Double) -> Duration {
        let excess = score - settings.freeFailures
        guard excess > 0 else { return .zero }
        // 2^(excess-1) passes the cap long before it could overflow; stop doubling there.
        var delay = settings.firstDelay
        var step = 1.0
        while step < excess && delay < settings.maxDelay {
            delay = delay * 2
            step += 1
        }
        return min(delay, settings.maxDelay)
    }

    func decayed(_ client: Client, at now: ContinuousClock.Instant) -> Double {
        let elapsed = max(.zero, now - client.updated)
        let halves = elapsed.inSeconds / max(settings.halfLife.inSeconds, 1e-9)
        return client.score * exp2(-halves)
    }

    /// Frees a slot when the table is full: drops every address whose score has decayed below one,
    /// else the one with the lowest score.
    mutating func makeRoom(at now: ContinuousClock.Instant) {
        guard clients.count >= settings.maxClients else { return }
        let quiet = clients.filter { decayed($0.value, at: now) < 1 }.map(\.key)
        for key in quiet { clients.removeValue(forKey: key) }
        guard clients.count >= settings.maxClients else { return }
        if let lowest = clients.min(by: { decayed($0.value, at: now) < decayed($1.value, at: now) })?.key {
            clients.removeValue(forKey: lowest)
        }
    }
}
