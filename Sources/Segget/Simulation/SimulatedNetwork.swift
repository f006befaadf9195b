import Glibc

/// A deterministic model of the network and server a download meets, for proving the engine's
/// judgment (re-dial, steal, race, retry, connection limits) over thousands of seeded scenarios.
/// Time is simulated; nothing touches a socket. See `SimulatedDownload` for how it drives the
/// engine's entry point, and `docs/simulator.md` for what the model keeps and what it leaves out.
///
/// TCP: every connection opens with a handshake (one round trip, two with TLS), starts with an
/// initial window of 10 segments, doubles it every round trip in slow start and adds a segment per
/// round trip after; a loss event (at most one per round trip, drawn per packet sent) halves the
/// window, or, when the window is too small for fast retransmit (under 4 segments), costs a
/// retransmission timeout (Linux's 200 ms floor plus a round trip) with the window back at 1.
/// Flows share a bottleneck in proportion to what their windows offer; a window does not grow
/// while the bottleneck is full. The server may cap each response (nginx's `limit_rate`), answer
/// some requests slowly (`SlowShape`), and refuse requests beyond a per-client limit.
struct SimulatedScenario: Sendable, CustomStringConvertible {
    var fileSize: Int64
    var connections: Int
    var chunkSize: Int64 = 1 << 20
    /// Round-trip time, seconds.
    var rtt: Double
    /// Probability that a packet is lost.
    var loss: Double = 0
    /// Bottleneck rate shared by every connection, bytes per second (infinite: none).
    var bottleneck: Double = .infinity
    /// The server's cap per response, bytes per second (infinite: none).
    var perRequestCap: Double = .infinity
    /// Which requests the server answers slowly, and how.
    var slow: SlowShape = .none
    /// Requests in flight the server allows one client (nil: any number), and how it refuses more.
    var connectionLimit: Int?
    var rejection: Rejection = .tooManyRequests(retryAfter: nil)
    /// An extra round trip for every new connection's TLS handshake.
    var tls = false
    /// Seconds the server thinks before every answer's head (an object store, an application
    /// server, a cache's miss to its origin): on top of the round trips.
    var firstByteDelay: Double = 0
    /// Requests the server works on at once (nil: any number). Others wait in its queue, in the order
    /// they arrived; a request abandoned while it waits still costs a worker its `firstByteDelay`
    /// when its turn comes (the server reads it, thinks, and finds the connection closed when it
    /// writes), as a synchronous worker does.
    var workers: Int?
    /// The server closes the connection after every answer (`Connection: close`): no request finds
    /// a kept-alive connection.
    var closesConnections = false
    /// The download starts as segget's does: a probe for the whole file (`bytes=0-`) held at its
    /// head, which connection 0 then continues; the other connections start only once the head is in. Off: every connection starts at time 0 (the families before issue 37).
    var probe = false
    /// Mirrors of the file (the `mirrors` family), each a server of its own on a path of its own,
    /// healthy and always keeping connections alive. The main URL's server is the scenario's.
    var mirrors: [Mirror] = []
    /// The file's last bytes that no request can get (the `failing-tail` family): the download can
    /// only fail, and must do so within its retries, without a storm of requests.
    var failingTail: FailingTail?
    var seed: UInt64 = 1

    /// The last `bytes` of the file fail every request, as a server does whose storage cannot read
    /// them: an answer that starts before them has its head sent and is closed where they begin; a
    /// request that starts inside them is answered `status` (with `Retry-After` seconds, or none),
    /// or, when `status` is nil, with a 206 head and the connection closed before any byte.
    struct FailingTail: Sendable, Equatable {
        var bytes: Int64
        var status: Int?
        var retryAfter: Int?
    }

    /// A mirror: its round trip, its cap per response, and when it joins the download: seconds after
    /// the download begins (the main URL's probe answered), when its own probe has agreed, as
    /// `MirrorJoin` adds it to the running fetch.
    struct Mirror: Sendable, Equatable {
        var rtt: Double
        var perRequestCap: Double = .infinity
        var joinsAt: Double
    }

    /// Source `s`'s round trip and cap per response: 0 is the main URL, 1... the mirrors.
    func rtt(ofSource s: Int) -> Double { s == 0 ? rtt : mirrors[s - 1].rtt }
    func perRequestCap(ofSource s: Int) -> Double { s == 0 ? perRequestCap : mirrors[s - 1].perRequestCap }

    /// Which requests are slow (the probe was request 1) and what a slow one does.
    struct SlowShape: Sendable, Equatable {
        enum Which: Sendable, Equatable {
            case everyKth(Int)
            /// A random fraction, drawn per request from the scenario's seed.
            case fraction(Double)
        }
        enum Behaviour: Sendable, Equatable {
            /// At `rate` bytes per second from its first byte on, or after `after` bytes at full speed.
            case trickle(rate: Double, after: Int64)
            /// Full speed for `after` bytes, then nothing (the connection stays open).
            case silent(after: Int64)
            /// Full speed for `seconds`, then `rate` (a response that slows down mid-body).
            case slowdown(seconds: Double, rate: Double)
            /// The response head comes `seconds` late; the body is normal.
            case firstByteDelay(seconds: Double)
            /// Full speed for `after` bytes, then the server closes the connection (a cap on what one
            /// answer or connection may carry): the transfer ends short.
            case cut(after: Int64)
        }
        var which: Which?
        var behaviour: Behaviour = .trickle(rate: 1, after: 0)

        static let none = SlowShape(which: nil)
    }

    /// How a request beyond the server's limit is answered.
    enum Rejection: Sendable, Equatable {
        case tooManyRequests(retryAfter: Int?)
        /// 429 with the IETF draft's `RateLimit` / `RateLimit-Policy` fields and no `Retry-After`.
        case rateLimitFields
        case serviceUnavailable
    }

    var description: String {
        var parts = ["\(fileSize >> 20) MiB", "-n \(connections)", "rtt \(Int(rtt * 1000)) ms"]
        if loss > 0 { parts.append("loss \(loss * 100) %") }
        if bottleneck.isFinite { parts.append("link \(Format.rate(bottleneck))") }
        if perRequestCap.isFinite { parts.append("cap \(Format.rate(perRequestCap))") }
        if let w = slow.which { parts.append("slow \(w) \(slow.behaviour)") }
        if let l = connectionLimit { parts.append("limit \(l) (\(rejection))") }
        if tls { parts.append("tls") }
        if firstByteDelay > 0 { parts.append("first byte +\(Int(firstByteDelay * 1000)) ms") }
        if let w = workers { parts.append("\(w) worker\(w == 1 ? "" : "s")") }
        if closesConnections { parts.append("Connection: close") }
        if probe { parts.append("probe") }
        if let t = failingTail {
            let answer = t.status.map { "\($0)\(t.retryAfter.map { " Retry-After \($0)" } ?? "")" } ?? "closed"
            parts.append("last \(t.bytes) B fail (\(answer))")
        }
        for m in mirrors {
            parts.append("mirror rtt \(Int(m.rtt * 1000)) ms\(m.perRequestCap.isFinite ? " cap \(Format.rate(m.perRequestCap))" : "") joins +\(Format.fixed(m.joinsAt, 2)) s")
        }
        parts.append("seed \(seed)")
        return parts.joined(separator: ", ")
    }
}

/// A small, fast, seeded generator (SplitMix64): the same seed gives the same scenario and the same
/// losses on every machine.
struct SimRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 0x1234_5678 }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }
}

/// One simulated TCP connection's congestion state.
struct SimulatedTCP {
    static let segment = 1448.0
    static let initialWindow = 10.0
    /// What the receive window allows (Linux autotuning tops out around 6 MiB).
    static let maxWindow = 6.0 * 1024 * 1024 / segment

    /// Usable from this time on (the handshake ends, or a retransmission timeout runs out).
    var readyAt: Double
    var cwnd = initialWindow
    var ssthresh = Double.infinity
    /// No second loss event before this time (one per round trip).
    var quietUntil = 0.0

    /// Bytes per second its window offers at round trip `rtt`.
    func offered(rtt: Double) -> Double { cwnd * Self.segment / rtt }

    /// Advances the window over `dt` seconds in which `bytes` were sent, drawing losses; `full` is
    /// true while the bottleneck is saturated (the window then stops growing).
    mutating func advance(dt: Double, bytes: Double, now: Double, rtt: Double, loss: Double, full: Bool,
                          random: inout SimRandom) {
        if loss > 0, now >= quietUntil, bytes > 0 {
            let packets = bytes / Self.segment
            // P(at least one of `packets` is lost), without pow() for the common small case.
            let p = packets * loss < 0.01 ? packets * loss : 1 - exp(packets * log1p(-loss))
            if random.unit() < p {
                quietUntil = now + rtt
                if cwnd < 4 {
                    // Too few packets in flight for three duplicate ACKs: a retransmission timeout.
                    readyAt = now + 0.2 + rtt
                    ssthresh = max(2, cwnd / 2)
                    cwnd = 1
                } else {
                    cwnd = max(2, cwnd / 2)
                    ssthresh = cwnd
                }
                return
            }
        }
        guard !full else { return }
        if cwnd < ssthresh {
            cwnd = min(cwnd * exp2(dt / rtt), Self.maxWindow)
        } else {
            cwnd = min(cwnd + dt / rtt, Self.maxWindow)
        }
    }
}

