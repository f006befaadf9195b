/// Connections opened beside a slow probe, so that the download's other connections find them
/// ready: the pure rules (how many, when, and what a refused one teaches). The requests themselves
/// are `ConnectionWarmUps`'s.
///
/// A download of several connections learns the file's length from its probe's answer and only then
/// sends its other requests; on a long path each of those first dials a TCP connection and, over
/// HTTPS, does a TLS handshake: two round trips (0.3 s on a 150 ms path) on every connection's
/// critical path. A warm-up is a request for the first byte (`Range: bytes=0-0`) to the URL the probe
/// waits on: libcurl opens a connection for it and, once its tiny answer is in, keeps the connection
/// in the multi handle's cache, where the download's ranged requests find it. (A connection opened
/// with `CURLOPT_CONNECT_ONLY` is never handed to another transfer, so it would not help.)
struct ConnectionWarmUp: Equatable, Sendable {
    /// How many connections the download starts with beyond the probe's.
    let count: Int
    /// The shortest round trip of the probe's connection that warms (see `minRoundTrip`).
    var shortestRoundTrip = ConnectionWarmUp.minRoundTrip

    /// A probe answered sooner than this warms nothing: on loopback or a LAN its answer comes before
    /// a warm-up could help, and a small file (whose size is unknown until that answer) pays for no
    /// extra connection there. On a long path this is a small part of what a warm-up saves (two
    /// round trips), and it lets the probe's request reach the server before the warm-ups', so that
    /// a server that limits requests at once refuses a warm-up rather than the probe.
    static let delay = 0.03

    /// Nor does a probe whose connection's round trip (the kernel's estimate, from the handshake on)
    /// is shorter than this, however long its answer takes: a server slow to answer, or a busy
    /// machine, on a short path, where a new connection's handshakes cost a few milliseconds. At
    /// 10 ms they cost 20-30 ms, what `Coordinator.longPathFirstAnswer` calls a WAN.
    static let minRoundTrip = 0.01

    /// The warm-ups for a download of `connections` (`autoConnections`: `-n auto`, which starts with
    /// `Coordinator.autoInitial`), none where they would not be the download's own: one connection,
    /// ranges multiplexed as HTTP/2 streams (`multiplexed`: they share one connection; a single
    /// download's ranges over HTTP/2 have connections of their own, and are warmed), mirrors (the
    /// connections are spread over hosts),
    /// a host whose connections other downloads of the run share (`sharedHost`: a batch's other
    /// files, the daemon's other downloads, or a cap per host below the connections; the warm-ups
    /// are not counted in that budget), or a probe for one byte only (a stream's, a resume's, a
    /// renewed link's).
    init(connections: Int, autoConnections: Bool, multiplexed: Bool, mirrors: Int, sharedHost: Bool, probeBytes: Int) {
        let starting = autoConnections ? min(connections, Coordinator.autoInitial) : connections
        guard starting > 1, !multiplexed, mirrors == 0, !sharedHost, probeBytes > 1 else {
            count = 0
            return
        }
        count = starting - 1
    }

    /// Whether the warm-ups go out now: `waited` seconds after the probe's request, whose answer's
    /// head is not complete yet (`answered`), on a connection whose round trip is `roundTrip` (nil:
    /// not connected yet, which on loopback or a LAN takes far less than `delay`).
    ///
    /// Not when the probe went out on a connection it found open (`probeReused`, asked only once it
    /// is connected, when libcurl's count of new connections says whether it dialled): an earlier
    /// download of the run (a list's file before it, a daemon's task) left the host's connections in
    /// the loop's cache, where this download's requests find them as they would warmed ones, and a
    /// warm-up would only be a request for one byte on one of them. A list of five 64 KiB files over
    /// HTTPS through WAN link a made 9 requests a file, 7 of them such warm-ups (8 connections in all).
    func due(waited: Double, answered: Bool, probeReused: @autoclosure () -> Bool = false, roundTrip: @autoclosure () -> Double?) -> Bool {
        guard count > 0, !answered, waited >= Self.delay else { return false }
        guard let rtt = roundTrip() else { return true }
        return rtt >= shortestRoundTrip && !probeReused()
    }

    /// How late the probe's head may be, as a multiple of a warm-up's time to its answer, before
    /// the probe is sent again on a warm connection (see `probeOverdue`).
    static let overdueFactor = 1.5

    /// Whether the probe, `waited` seconds after its request with no head yet, is overdue: a
    /// warm-up sent `lag` seconds after it to the same URL took `warmUpRound` seconds to its answer,
    /// and the probe, which should have taken about as long, took half as long again. What holds it
    /// is then its own connection (a SYN or a handshake segment lost, sent again after a timeout of
    /// a second or more), not the server: the probe is sent again, once, on a warm connection, where
    /// its answer takes one round trip.
    static func probeOverdue(waited: Double, lag: Double, warmUpRound: Double?) -> Bool {
        guard let round = warmUpRound else { return false }
        return waited >= lag + overdueFactor * round
    }
}

/// How the warm-ups ended (as far as they had when the download began).
struct WarmUpOutcome: Equatable, Sendable {
    /// Requests sent.
    var sent = 0
    /// Connections they opened (a warm-up that found one open in the cache took it).
    var opened = 0
    /// Answered with a head other than a refusal (a 206 of the first byte, as a rule).
    var accepted = 0
    /// Refused with 429 or 503: the host's limit of requests at once.
    var refused = 0
    /// Failed otherwise (no answer, a network error).
    var failed = 0
    /// The longest wait a refusal asked for (`Retry-After`, or the `RateLimit` reset).
    var wait: Double?
    /// Seconds between the probe's request and the warm-ups': they answer about that much after it.
    var lag = 0.0
    /// Seconds from the warm-ups' requests to the first answer that was not a refusal; nil before.
    var firstRound: Double?
    /// The probe was sent again on a warm connection (see `ConnectionWarmUp.probeOverdue`).
    var probeResent = false

    /// Warm-ups not answered yet.
    var stillOut: Int { max(0, sent - accepted - refused - failed) }

    /// What the warm-ups cost the server: a request each, and the connections they opened (one still
    /// out when this is read counts as opened).
    var spent: RequestTally { RequestTally(requests: sent, connections: opened + stillOut) }

    /// Requests the host took at once, when a warm-up was refused: the probe and the warm-ups it did
    /// not refuse (answered or still out: a refusal comes at once, and those were in flight beside
    /// it). Nil when none was refused (nothing learnt).
    var hostLimit: Int? {
        refused > 0 ? 1 + sent - refused - failed : nil
    }
}
