import SeggetSystem
import Synchronization

/// One connection budget per host for every download of a process: a batch's files (`segget -i`)
/// or a daemon's tasks.
///
/// A host is the scheme, the host name and the port of a download's URL (`https://example.org` and
/// `https://example.org:443` are one host; `http://example.org` is another). Every request a
/// download sends to its URL's host counts: its probe and its ranges (mirrors count against the main
/// URL's host). The requests in flight to a host never exceed `maxPerHost`, and a limit learnt from
/// one download's 429 or 503 answers (see `HostLimit`) holds for all of them: the others stop
/// sending more at once, and the limit is probed upwards by whichever download has work for another
/// connection once the hold-off is over. A learnt limit is forgotten `forgetLearntAfter` seconds
/// after the host's last refusal (nil: never).
///
/// Safe from any thread: a lock around `HostAllowance` values.
public final class HostBudget: Sendable {
    private struct State {
        var maxPerHost: Int?
        /// Hosts whose cap is not `maxPerHost` (see `setCap`), by `key`.
        var caps: [String: Int] = [:]
        var hosts: [String: HostAllowance] = [:]
        var nextShare = 0

        func cap(_ key: String) -> Int? { caps[key] ?? maxPerHost }
    }

    private let state: Mutex<State>
    public let forgetLearntAfter: Double?

    /// The daemon's default: a learnt limit is kept 10 minutes after the host's last refusal.
    public static let daemonForgetAfter = 600.0

    public init(maxPerHost: Int? = nil, forgetLearntAfter: Double? = nil) {
        state = Mutex(State(maxPerHost: maxPerHost.map { max(1, $0) }))
        self.forgetLearntAfter = forgetLearntAfter
    }

    /// Requests at once per host; nil: only what hosts' refusals teach.
    public var maxPerHost: Int? {
        get { state.withLock { $0.maxPerHost } }
        set { state.withLock { $0.maxPerHost = newValue.map { max(1, $0) } } }
    }

    /// Sets the cap on requests in flight to `url`'s host alone, or with nil gives it `maxPerHost`
    /// again: a batch whose files share a host's HTTP/2 connections as streams caps the streams its
    /// capped connections carry there, once the host answered over HTTP/2.
    public func setCap(_ cap: Int?, forHostOf url: String) {
        let key = Self.key(for: url)
        state.withLock { $0.caps[key] = cap.map { max(1, $0) } }
    }

    /// Gives every host `maxPerHost` again (see `setCap`).
    public func dropHostCaps() { state.withLock { $0.caps = [:] } }

    /// The cap on requests in flight to `url`'s host (nil: none).
    public func cap(for url: String) -> Int? {
        let key = Self.key(for: url)
        return state.withLock { $0.cap(key) }
    }

    /// The limit learnt from `url`'s host, if it refused requests (and that is not forgotten).
    public func learntLimit(for url: String) -> Int? {
        let key = Self.key(for: url)
        let now = monotonicSeconds()
        return state.withLock { s in
            s.hosts[key]?.forgetIfStale(now: now, after: forgetLearntAfter)
            return s.hosts[key]?.learnt.limit
        }
    }

    /// Slots held for `url`'s host now (at least its requests in flight).
    public func held(for url: String) -> Int { state.withLock { $0.hosts[Self.key(for: url)]?.total ?? 0 } }

    /// `scheme://host:port`, lowercased, with the scheme's default port filled in; the URL itself
    /// when it has no host.
    public static func key(for url: String) -> String {
        switch ASCIIURL(url) {
        case .parsed(let u): return key(scheme: u.scheme, host: u.host, port: u.port)
        case .invalid: return url
        case .notASCII: return referenceKey(for: url)
        }
    }

    /// `key(for:)` on `Character`s: the reference the ASCII fast path must agree with, and the key of
    /// a URL that is not pure ASCII.
    static func referenceKey(for url: String) -> String {
        guard let parts = URLParts(reference: url), let sep = schemeSeparator(in: url) else { return url }
        var authority = url[sep.upperBound...]
        if let end = authority.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) { authority = authority[..<end] }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var port: Int?
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") {
            port = Int(authority[authority.index(after: colon)...])
        }
        return key(scheme: parts.scheme, host: parts.host, port: port)
    }

    private static func key(scheme: String, host: String, port: Int?) -> String {
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        return "\(scheme)://\(host):\(port ?? defaultPort ?? 0)"
    }

    /// A download's handle on its host's budget.
    func share(for url: String) -> HostShare {
        let id = state.withLock { s in
            defer { s.nextShare += 1 }
            return s.nextShare
        }
        return HostShare(budget: self, key: Self.key(for: url), id: id)
    }

    fileprivate func withHost<T>(_ key: String, _ body: (inout HostAllowance, Int?) -> T) -> T {
        state.withLock { s in
            var h = s.hosts[key] ?? HostAllowance()
            let result = body(&h, s.cap(key))
            s.hosts[key] = h.isIdle ? nil : h
            return result
        }
    }
}

extension HostBudget: Equatable {
    /// The same budget (a process's), not an equal state.
    public static func == (a: HostBudget, b: HostBudget) -> Bool { a === b }
}

/// One download's slots in its host's budget (see `HostAllowance`). Used by one download at a
/// time; what it holds is given back when it is released or goes away.
final class HostShare: @unchecked Sendable {
    let budget: HostBudget
    let key: String
    let id: Int

    init(budget: HostBudget, key: String, id: Int) {
        self.budget = budget
        self.key = key
        self.id = id
    }

    deinit { sync(inFlight: 0) }

    /// Whether one more request may go out, with `inFlight` out now (see `HostAllowance.reserve`).
    func reserve(inFlight: Int, wanted: () -> Bool, now: Double) -> Bool {
        budget.withHost(key) { h, cap in
            h.reserve(id, inFlight: inFlight, cap: cap, wanted: wanted, now: now, forgetAfter: budget.forgetLearntAfter)
        }
    }

    /// How many more requests this download, with `inFlight` out, may send now (see
    /// `HostAllowance.room`); nil: no cap and no learnt limit.
    func room(inFlight: Int) -> Int? { budget.withHost(key) { h, cap in h.room(id, inFlight: inFlight, cap: cap) } }

    /// Keeps as many slots as requests in flight.
    func sync(inFlight: Int) { budget.withHost(key) { h, _ in h.sync(id, inFlight: inFlight) } }

    func refused(inFlight: Int, wait: Double?, now: Double) -> (lowered: Bool, announce: Int?)? {
        budget.withHost(key) { h, _ in h.refused(id, inFlight: inFlight, wait: wait, now: now) }
    }

    func accepted(sentAt: Double = .infinity) { budget.withHost(key) { h, _ in h.accepted(sentAt: sentAt) } }

    /// The host asked for no request for `wait` seconds (see `HostLimit.asked`).
    func asked(wait: Double?, now: Double) { budget.withHost(key) { h, _ in h.asked(wait: wait, now: now) } }

    /// The host queues requests past `servedAtOnce` (see `HostLimit.saturated`).
    func saturated(servedAtOnce: Int, now: Double) -> Bool { budget.withHost(key) { h, _ in h.saturated(servedAtOnce: servedAtOnce, now: now) } }

    /// This download has `count` requests answered side by side (see `HostLimit.servedSideBySide`).
    func servedSideBySide(_ count: Int) -> Int? { budget.withHost(key) { h, _ in h.servedSideBySide(count) } }

    /// The host asked for no request before this (its last refusal's wait).
    var quietUntil: Double { budget.withHost(key) { h, _ in h.learnt.quietUntil } }

    /// `count` of this download's requests were cancelled mid-answer (see `HostAllowance.cancelled`).
    func cancelled(_ count: Int) {
        guard count > 0 else { return }
        let now = monotonicSeconds()
        budget.withHost(key) { h, _ in h.cancelled(count, now: now) }
    }

    /// The limit the host's refusals taught (for messages).
    var learntLimit: Int? { budget.withHost(key) { h, _ in h.learnt.limit } }

    /// Takes a slot for a download's first request (a probe) if one is free now.
    func reserveFirst() -> Bool { reserve(inFlight: 0, wanted: { true }, now: monotonicSeconds()) }

    /// Waits until one request (a probe) may go out: false when `interrupt` was set first.
    func waitForSlot(interrupt: InterruptFlag) -> Bool {
        while !interrupt.isSet {
            if reserveFirst() { return true }
            SystemThread.sleep(seconds: 0.02)
        }
        return false
    }
}
