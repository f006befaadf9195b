/// The `maxconc` parameter: at most `limit` requests for one target from one client address are
/// served at a time, as a CDN limits connections per client. Keyed by client address and request
/// target (path and query); on loopback every client is 127.0.0.1, so in practice per target.
///
/// A request beyond the limit is answered at once with `status` (429 or 503), with `Retry-After`
/// when asked, and with the rate-limit fields of `headers`; admitted responses carry those fields
/// too, with the quota that remains, as servers that send them do on every response.
struct ConcurrencyLimit: Equatable {
    enum RateLimitFields: Equatable {
        case none
        /// draft-ietf-httpapi-ratelimit-headers (-09 to -11): `RateLimit-Policy` and `RateLimit`.
        case draft
        /// The earlier drafts' `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`.
        case legacy
    }

    var limit: Int
    var status: Int
    /// The raw `Retry-After` value for rejections, if any.
    var retryAfter: String?
    var fields: RateLimitFields
    /// Seconds until a slot may be free, for `t=` and `RateLimit-Reset`.
    var reset: Int

    /// The limit `route` asks for, nil without `maxconc`.
    init?(route: Route) {
        guard let limit = route.int("maxconc"), limit >= 0 else { return nil }
        self.limit = Int(limit)
        status = route.int("reject") == 503 ? 503 : 429
        retryAfter = route.params["retryafter"]
        switch route.params["ratelimit"] {
        case "legacy": fields = .legacy
        case let value? where route.flag("ratelimit") || value == "draft": fields = .draft
        default: fields = .none
        }
        reset = Int(route.int("reset") ?? route.int("retryafter") ?? 1)
    }

    /// The rate-limit fields for a response after which `remaining` more requests may be in flight.
    func rateLimitHeaders(remaining: Int) -> [(String, String)] {
        switch fields {
        case .none:
            return []
        case .draft:
            return [
                ("RateLimit-Policy", "\"conc\";q=\(limit);qu=\"concurrent-requests\""),
                ("RateLimit", "\"conc\";r=\(remaining);t=\(reset)"),
            ]
        case .legacy:
            return [
                ("RateLimit-Limit", "\(limit)"),
                ("RateLimit-Remaining", "\(remaining)"),
                ("RateLimit-Reset", "\(reset)"),
            ]
        }
    }

    /// The answer to a request beyond the limit.
    func rejection() -> ResponsePlan {
        var headers = rateLimitHeaders(remaining: 0)
        if let retryAfter { headers.append(("Retry-After", retryAfter)) }
        return .text(
            status, "\(status) \(HTTPStatus.reason(status)): at most \(limit) requests at a time from one client\n",
            headers: headers)
    }
}

/// What the connection limits saw, over all targets, since the server started or `resetCounters()`.
public struct ConcurrencyStats: Sendable, Equatable, CustomStringConvertible {
    /// Requests admitted under a `maxconc` limit.
    public var admitted = 0
    /// Requests answered with the limit's 429 or 503.
    public var rejected = 0
    /// Admitted requests in flight now.
    public var inFlight = 0
    /// The most admitted requests in flight at once for one client and target: never above the limit.
    public var maxInFlight = 0
    /// The most requests that wanted service at once for one client and target (those in flight plus
    /// the one arriving, whether admitted or not): how far a client pushed past the limit.
    public var maxDemand = 0

    public init() {}

    public var description: String {
        "admitted=\(admitted) rejected=\(rejected) in-flight=\(inFlight) max-in-flight=\(maxInFlight) max-demand=\(maxDemand)"
    }
}

/// Requests in flight per key; admits or rejects arrivals and keeps the statistics. Pure: the
/// server calls it under its lock.
struct ConcurrencyLedger {
    private var inFlight: [String: Int] = [:]
    private(set) var stats = ConcurrencyStats()

    /// Admits a request for `key` if fewer than `limit` are in flight; returns how many more may
    /// then be in flight, or nil when it is rejected.
    mutating func admit(_ key: String, limit: Int) -> Int? {
        let current = inFlight[key, default: 0]
        stats.maxDemand = max(stats.maxDemand, current + 1)
        guard current < limit else {
            stats.rejected += 1
            return nil
        }
        inFlight[key] = current + 1
        stats.admitted += 1
        stats.inFlight += 1
        stats.maxInFlight = max(stats.maxInFlight, current + 1)
        return limit - current - 1
    }

    /// An admitted request for `key` finished or lost its connection.
    mutating func release(_ key: String) {
        guard let current = inFlight[key], current > 0 else { return }
        inFlight[key] = current == 1 ? nil : current - 1
        stats.inFlight -= 1
    }

    /// Starts the statistics afresh; requests in flight stay in flight.
    mutating func resetStats() {
        let now = stats.inFlight
        stats = ConcurrencyStats()
        stats.inFlight = now
        stats.maxInFlight = inFlight.values.max() ?? 0
        stats.maxDemand = stats.maxInFlight
    }
}
