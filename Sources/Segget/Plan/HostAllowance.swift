/// The requests one host gets from all the downloads of a process at once: the pure arithmetic behind
/// `HostBudget`.
///
/// Each download holds a number of slots, at least the requests it has in flight: before a request
/// goes out it asks for `inFlight + 1` (`reserve`), and between passes it gives back what it no
/// longer uses (`sync`). A slot is granted only while the slots of all downloads together stay within
/// the configured cap and within the limit learnt from the host's refusals (a `HostLimit` shared by
/// every download to the host, probed upwards as one download's would be). So the requests in flight
/// to the host never exceed the cap, whichever download sends them.
///
/// A request abandoned mid-answer (cancelled: a lost race, the end of a download) keeps a slot for
/// `coolingSeconds` after it was cancelled: the server counts it until it notices the closed
/// connection, and a new request in its place would be refused meanwhile.
///
/// A learnt limit is forgotten `forgetAfter` seconds after the last refusal (nil: kept while the
/// process lives).
struct HostAllowance: Equatable, Sendable {
    /// Slots by download.
    private(set) var held: [Int: Int] = [:]
    /// What the host's refusals taught, shared by its downloads.
    private(set) var learnt = HostLimit()
    private(set) var lastRefusal: Double?
    /// Until when each slot of a cancelled request still counts.
    private(set) var cooling: [Double] = []

    static let coolingSeconds = 0.25

    /// Slots held by all downloads, cooling ones included.
    var total: Int { held.values.reduce(0, +) + cooling.count }
    /// Nothing held, cooling or learnt: the entry may be dropped. A host that asked for a wait
    /// (`Retry-After`) is remembered too: dropped when the download's last request ended, its wait
    /// went with it, and the end game's racers asked the host again 0.3 s after it said 10 s.
    var isIdle: Bool { held.isEmpty && cooling.isEmpty && learnt.limit == nil && !learnt.askedForWait }

    /// `count` requests were cancelled at `now`: their slots count a while longer.
    mutating func cancelled(_ count: Int, now: Double) {
        cooling += repeatElement(now + Self.coolingSeconds, count: max(0, count))
    }

    /// Whether download `id`, with `inFlight` requests out, may send one more, under `cap` (nil: no
    /// cap) and the learnt limit; when it may, the slot is its own until `sync`. `wanted` says whether
    /// a further connection would find work (only a probe beyond the learnt limit asks).
    mutating func reserve(
        _ id: Int, inFlight: Int, cap: Int?, wanted: () -> Bool, now: Double, forgetAfter: Double?
    ) -> Bool {
        forgetIfStale(now: now, after: forgetAfter)
        cooling.removeAll { $0 <= now }
        let mine = held[id, default: 0]
        if mine > inFlight { return true }
        let others = total - mine
        if let cap, others + inFlight + 1 > cap { return false }
        guard learnt.allowsAnother(inFlight: others + inFlight, wanted: wanted(), now: now) else { return false }
        held[id] = inFlight + 1
        return true
    }

    /// How many more requests download `id`, with `inFlight` out, may send now beside the other
    /// downloads' slots, under `cap` and the learnt limit (nil: neither caps it). Slots it holds
    /// beyond `inFlight` count as its own room.
    func room(_ id: Int, inFlight: Int, cap: Int?) -> Int? {
        let others = total - held[id, default: 0]
        let limit = [cap, learnt.limit].compactMap { $0 }.min()
        return limit.map { max(0, $0 - others - inFlight) }
    }

    /// Download `id` has `inFlight` requests out: it keeps that many slots.
    mutating func sync(_ id: Int, inFlight: Int) {
        if inFlight > 0 { held[id] = inFlight } else { held[id] = nil }
    }

    /// A request of download `id` was refused with 429 or 503 while it had `inFlight` others out
    /// ahead of it. Nil when no other request to the host was out (then it is no connection limit);
    /// else whether the limit went down, and the limit to tell the user once per new low. What the
    /// host counted is the requests out: the other downloads' slots in use and this one's ahead, not
    /// the cooling slots of cancelled requests (counting those taught a limit one above the host's,
    /// and a refusal every time a slot cooled off).
    mutating func refused(_ id: Int, inFlight: Int, wait: Double?, now: Double) -> (lowered: Bool, announce: Int?)? {
        cooling.removeAll { $0 <= now }
        let others = held.filter { $0.key != id }.values.reduce(0, +) + inFlight
        guard others > 0 else { return nil }
        lastRefusal = now
        let lowered = learnt.refused(inFlight: others, wait: wait, now: now)
        return (lowered, learnt.announce())
    }

    /// A request was accepted: a probe out succeeded.
    mutating func accepted(sentAt: Double = .infinity) { learnt.accepted(sentAt: sentAt) }

    /// The host asked for no request for `wait` seconds (see `HostLimit.asked`).
    mutating func asked(wait: Double?, now: Double) { learnt.asked(wait: wait, now: now) }

    /// The host queues requests past `servedAtOnce` (see `HostLimit.saturated`).
    mutating func saturated(servedAtOnce: Int, now: Double) -> Bool { learnt.saturated(servedAtOnce: servedAtOnce, now: now) }

    /// A download has `count` requests answered side by side (see `HostLimit.servedSideBySide`).
    mutating func servedSideBySide(_ count: Int) -> Int? { learnt.servedSideBySide(count) }

    mutating func forgetIfStale(now: Double, after: Double?) {
        guard let after, let t = lastRefusal, now - t > after else { return }
        learnt = HostLimit()
        lastRefusal = nil
    }
}
