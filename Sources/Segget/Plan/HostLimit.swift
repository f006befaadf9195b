/// How many requests at once a host accepts from this download, learnt from its refusals: the pure
/// rule behind "a 429 or 503 on an extra connection is the host's connection limit, not a failure".
///
/// A request refused with 429 or 503 while others of the download are in flight means the host
/// allows no more than those: the limit becomes the number that was in flight ahead of it (requests
/// sent before it and still out, never the ones sent after it, which the host has not counted yet;
/// never more than a limit learnt before), and the refused request's work goes back to the others
/// without counting a failure. No request at all goes out before the wait the host named has passed
/// (`Retry-After`, or the `RateLimit` field's reset): that is a promise, not a hint. The
/// limit is probed upwards again only when the hold-off (`initialHoldOff`, doubling) is over, counted
/// from the end of that wait, and there is work a further connection would take; a probe
/// that is refused again doubles the hold-off. So a download of any length meets its first burst of
/// refusals (the requests already out when the first refusal came back) and then a refusal a
/// doubling interval at most.
struct HostLimit: Equatable, Sendable {
    /// Requests in flight the host accepts; nil until it refused one.
    private(set) var limit: Int?
    /// Refusals seen, and refusals of probes.
    private(set) var refusals = 0
    private(set) var probes = 0
    /// When the limit may be probed upwards.
    private(set) var probeAt = 0.0
    private var holdOff = HostLimit.initialHoldOff
    /// A probe is out: its refusal doubles the hold-off.
    private var probing = false
    /// When the probe went out: only a request sent then or later shows it was accepted.
    private var probeSentAt = -Double.infinity
    /// No request may go out before this: the end of the wait the host's last refusal named.
    private(set) var quietUntil = -Double.infinity
    /// The lowest limit said to the user (see `announce`).
    private var announced: Int?
    /// The limit is the host's queue read from its heads' waits (`saturated`), which what is served
    /// at once may contradict (`servedSideBySide`), not a refusal's word.
    private var fromQueue = false
    /// The limit in force when the queue first lowered it (nil: none): what a contradicted queue
    /// limit gives way to.
    private var beforeQueue: Int?
    /// The most requests seen answered side by side (bodies coming at once): no queue limit below it
    /// is taught, by this download or another sharing the host.
    private(set) var servedFloor = 0

    /// The hold-off before the first probe when the host named none, seconds.
    static let initialHoldOff = 2.0
    /// The longest hold-off, seconds.
    static let maxHoldOff = 60.0

    /// A request was refused while `inFlight` others were in flight; `wait` is what the host asked
    /// for (`Retry-After` or the `RateLimit` reset). Returns true when the limit went down.
    @discardableResult
    mutating func refused(inFlight: Int, wait: Double?, now: Double) -> Bool {
        refusals += 1
        if probing {
            probing = false
            holdOff = min(Self.maxHoldOff, holdOff * 2)
        }
        let before = limit
        limit = min(limit ?? Int.max, max(1, inFlight))
        fromQueue = false
        // The hold-off runs from the end of the wait the host named: a probe the moment the wait
        // was over made the first burst after it one more than the limit just learnt, and its refusal
        // stopped every request to the host for another whole wait (exploratory run 9: 4 at once,
        // `Retry-After: 3`, 60 files at -j 16: 4.2-6.9 s against 2.1 s at -j 4).
        probeAt = max(probeAt, now + (wait ?? 0) + holdOff)
        asked(wait: wait, now: now)
        return limit != before
    }

    /// The host's requests take longer to be answered the more are out (an origin that queues them):
    /// no more than `servedAtOnce` are worth sending, as if the host had refused the next one. Probed
    /// upwards after the same hold-off as a refused limit. True when the limit went down.
    @discardableResult
    mutating func saturated(servedAtOnce: Int, now: Double) -> Bool {
        let before = limit
        let l = max(1, servedAtOnce)
        guard l < (limit ?? Int.max), l >= servedFloor else { return false }
        if probing {
            probing = false
            holdOff = min(Self.maxHoldOff, holdOff * 2)
        }
        if !fromQueue { beforeQueue = limit }
        limit = l
        fromQueue = true
        probeAt = max(probeAt, now + holdOff)
        return limit != before
    }

    /// `count` of a download's requests to the host are being answered side by side (bodies
    /// coming): it serves that many at once, and no queue limit below that is taught from now on. A
    /// limit read from its queue (`saturated`) below it was wrong (heads late because this machine
    /// was busy, not the server) and gives way to the limit in force before the queue lowered it
    /// (none, or a refusal's or a probe's), never below `count`. The dropped limit, when it was.
    mutating func servedSideBySide(_ count: Int) -> Int? {
        servedFloor = max(servedFloor, count)
        guard fromQueue, let l = limit, count > l else { return nil }
        limit = beforeQueue.map { max($0, count) }
        fromQueue = false
        beforeQueue = nil
        return l
    }

    /// The host asked that no request come for `wait` seconds (a refusal's `Retry-After` or `RateLimit`
    /// reset), whether or not it taught a limit.
    mutating func asked(wait: Double?, now: Double) {
        if let wait, wait > 0 { quietUntil = max(quietUntil, now + wait) }
    }

    /// The host asked for no request before `quietUntil`.
    func isQuiet(now: Double) -> Bool { now < quietUntil }

    /// The host asked for a wait at some time (see `HostAllowance.isIdle`).
    var askedForWait: Bool { quietUntil > -Double.infinity }

    /// Whether one more request may go out now, with `inFlight` out and work for it (`wanted`):
    /// under the limit, or as a probe once the hold-off is over (which raises the limit by one).
    mutating func allowsAnother(inFlight: Int, wanted: @autoclosure () -> Bool, now: Double) -> Bool {
        guard now >= quietUntil else { return false }
        guard let l = limit else { return true }
        if inFlight < l { return true }
        guard now >= probeAt, wanted() else { return false }
        limit = l + 1
        probes += 1
        probing = true
        probeSentAt = now
        probeAt = now + holdOff
        return true
    }

    /// A request sent at `sentAt` was accepted: when it went out with the probe or after it, the probe
    /// succeeded. The in-limit requests sent before the probe and answered after it say nothing of
    /// it: taking their answers for its own, a probe refused again never doubled its hold-off (a
    /// host allowing 2, `Retry-After: 3`: probes exactly 3 s apart for 6 rounds, found by
    /// exploratory testing).
    mutating func accepted(sentAt: Double = .infinity) {
        if sentAt >= probeSentAt { probing = false }
    }

    /// The limit to tell the user, once per new low (a refused probe only returns to a limit said).
    mutating func announce() -> Int? {
        guard let l = limit, l < (announced ?? Int.max) else { return nil }
        announced = l
        return l
    }
}

/// The notice that the host queues requests (`HostLimit.saturated`), held back for `hold` seconds.
/// A limit read from the heads' waits that the bodies then contradict (`HostLimit.servedSideBySide`)
/// is dropped within 0.06-0.16 s where a fast loopback download keeps both CPUs busy, and a notice
/// followed by its retraction told the user something false for a moment. Held, such a limit is
/// never announced, nor its drop; one that stands is announced with the limit then in force.
struct SaturationNotice {
    static let hold = 0.5
    /// The limit taught, and when.
    private(set) var pending: (served: Int, at: Double)?
    /// The queue limit this download announced last, nil where none or where it was dropped since:
    /// the same limit taught again (after the host's learnt limit was forgotten, or probed upwards
    /// and refused) is not announced again (a server that answers only its first request had the
    /// same sentence printed 3 times in one run).
    private(set) var announcedLimit: Int?
    var announced: Bool { announcedLimit != nil }

    /// The queue taught a limit of `served`.
    mutating func taught(_ served: Int, now: Double) {
        if pending == nil { pending = (served, now) }
    }

    /// The queue's limit was dropped: whether to say so, only where this download announced one
    /// (in a batch another download sharing the host may drop a limit nobody announced).
    mutating func dropped() -> Bool {
        let say = announced
        pending = nil
        announcedLimit = nil
        return say
    }

    /// The limit to announce now: the one in force (`limit`), once the notice has been held for
    /// `hold` seconds and a limit still holds, unless it is the one announced last. Nil otherwise
    /// (the notice stays held or is let go).
    mutating func due(now: Double, limit: Int?) -> Int? {
        guard let p = pending, now - p.at >= Self.hold else { return nil }
        pending = nil
        guard let limit, limit != announcedLimit else { return nil }
        announcedLimit = limit
        return limit
    }
}
