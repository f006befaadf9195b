/// What the coordinator knows about one connection: its state machine, where its current request
/// and its bytes are, and the samples its rate is measured from. A pure value; the libcurl handle,
/// the head being collected and the staging buffer live beside it in the engine (`ConnectionIO`).
struct Connection {
    let id: Int
    /// Idle, waiting, awaiting a head, receiving, paused or stopping (see `ConnectionMachine`).
    var machine = ConnectionMachine()
    /// Index into the target's sources (main URL, then mirrors).
    var source = 0

    /// What the current HTTP request asked for, half-open; `requestEnd` moves down to where a shorter
    /// answer ends.
    var requestStart: Int64 = 0
    var requestEnd: Int64 = 0
    /// Where this connection's bytes in its current chunk begin (for progress).
    var progressFrom: Int64 = 0
    /// Next byte to write.
    var pos: Int64 = 0
    /// Where a plain stream ends (see `Coordinator.end(of:)` for ranged requests).
    var streamEnd: Int64 = 0
    /// End of the chunk that holds `pos`.
    var chunkEnd: Int64 = 0

    /// Failed attempts at the current work since a chunk was last finished.
    var attempts = 0
    /// Re-dials since this connection last finished a chunk (see `SlowConnectionRule`).
    var redials = 0
    /// Bytes of its answer the kernel had received and segget had not read, as the shell last told
    /// before a round of the slow rule (`EngineCore.Event.unread`; 0 where it never tells, as in the
    /// simulator).
    var unread = 0
    /// `requestStartedAt` of the request whose answer head the shell last said is in
    /// (`EngineCore.Event.answering`): equal to it while the current request's head is in.
    var answeredRequestAt = -Double.infinity
    var transferStartedAt = 0.0
    var transferBytes: Int64 = 0
    /// When the last byte arrived (or the transfer started), for the stall timeout.
    var lastByteAt = 0.0
    /// When its current request was last told to be still connecting (see
    /// `Coordinating.stillConnecting`): up to then that time was added to `lastByteAt`, and the slow
    /// rule counts its first-byte wait from then once its connection is made. `held(at:)` at that time.
    var connectingCountedTo = 0.0
    var heldWhenConnecting = 0.0
    /// The shell said, in this pass, that its current request's connection is still being made
    /// (`Coordinating.stillConnecting`): the request has not gone out yet. Cleared at the end of
    /// every pass (`Coordinating.forgetStillConnecting`), so that it is never a pass out of date.
    var stillConnecting = false
    /// (time, transferBytes) samples for the rate, newest last.
    var samples: [(Double, Int64)] = []
    /// `held(at:)` at the time of each sample in `samples`.
    var heldSamples: [Double] = []
    /// Bytes this connection received in the whole download, and (time, that count) taken every
    /// progress tick whatever its state: the rate progress shows (`shownRate`). Apart from `samples`,
    /// which the rules judge and which start again with every request and stop while it is idle:
    /// shown from those, a connection on 1 MiB chunks read 0 for most of a fast download (a rate
    /// needs 1.5 s of one transfer) and an idle one kept the rate of its last transfer.
    var bytesReceived: Int64 = 0
    var shownSamples: [(Double, Int64)] = []
    /// When the current request went out, and `held(at:)` then and at `transferStartedAt`.
    var requestStartedAt = 0.0
    var heldAtRequest = 0.0
    var heldAtTransfer = 0.0
    /// When the current transfer's first body byte arrived, with `held(at:)` and `transferBytes` then
    /// (for judging a request younger than the slow rule's window).
    var firstByteAt: Double?
    var heldAtFirstByte = 0.0
    var bytesAtFirstByte: Int64 = 0
    /// The best rate the current transfer had over a whole slow-rule window (see `SlowConnectionRule`).
    var bestWindowRate = 0.0
    /// The last transfer ended with its whole answer read, so its TCP (and TLS) connection went back
    /// to libcurl's pool, open, for the next request; a transfer cut short or failed closed it.
    var leftLinkOpen = false
    /// The current request's number among the download's (`RequestCostModel.requestSent`), the
    /// requests to its host that were out ahead of it when it went out, and whether it dialled a new
    /// connection (as the shell saw; nil until it said, then judged by whether a kept connection
    /// was free).
    var requestNumber = 0
    var aheadAtSend = 0
    var dialled: Bool?
    /// A kept-alive connection was free in libcurl's pool when the request went out.
    var linkWasOpen = false
    /// The current request is the probe's, continued: its wait was the probe's first answer.
    var continuesProbe = false
    /// When the current request, the rest after a shorter answer, went out (nil for a new transfer).
    var continuedAt: Double?

    init(id: Int) { self.id = id }

    /// Seconds held back so far, counting a pause in progress.
    func held(at now: Double) -> Double { machine.held(at: now) }

    /// The rate over about the last `window` seconds, from samples taken every `interval`; nil until
    /// they span at least three quarters of it. The samples may reach back one interval further, or
    /// the rate would be unknown whenever the clock sits just before a sample.
    func rate(now: Double, window: Double, interval: Double) -> Double? {
        sampledRate(samples, endingAt: now, window: window + interval, minSpan: window * 0.75)
    }

    /// The rate over the newest `window` seconds of the samples, and over the `window` before that;
    /// nil where the samples do not reach that far back.
    func windowRates(window: Double) -> (recent: Double, before: Double)? {
        guard let last = samples.last, let middle = samples.last(where: { last.0 - $0.0 >= window - 1e-9 }),
            let start = samples.last(where: { middle.0 - $0.0 >= window - 1e-9 }), middle.0 > start.0
        else { return nil }
        return (Double(last.1 - middle.1) / (last.0 - middle.0), Double(middle.1 - start.1) / (middle.0 - start.0))
    }

    /// Bytes, seconds and held seconds over the same samples `rate(now:window:interval:)` uses.
    func recent(now: Double, window: Double, interval: Double) -> (bytes: Int64, seconds: Double, held: Double)? {
        let reach = window + interval
        guard let last = samples.indices.last, heldSamples.count == samples.count,
            let first = samples.firstIndex(where: { now - $0.0 <= reach + 0.01 }),
            samples[last].0 - samples[first].0 >= max(window * 0.75, 0.001)
        else { return nil }
        return (samples[last].1 - samples[first].1, samples[last].0 - samples[first].0, heldSamples[last] - heldSamples[first])
    }

    /// Bytes over the newest `span` seconds of `samples` against the `span` before them, when the
    /// samples cover both, held time in neither, and the earlier span brought something (see
    /// `SlowConnectionRule.Observation.growth`).
    func growth(span: Double) -> Double? {
        func at(_ t: Double) -> (Int64, Double)? {
            guard let i = samples.lastIndex(where: { $0.0 <= t + 0.01 }), heldSamples.count == samples.count else { return nil }
            return (samples[i].1, heldSamples[i])
        }
        guard let last = samples.last, let first = samples.first, last.0 - 2 * span >= first.0 - 0.01,
            let mid = at(last.0 - span), let start = at(last.0 - 2 * span), let end = at(last.0)
        else { return nil }
        guard end.1 == start.1, mid.0 > start.0 else { return nil }
        return Double(end.0 - mid.0) / Double(mid.0 - start.0)
    }

    /// A new transfer's head arrived: its clock starts now. The wait before it is the server's price
    /// for a request (`RequestCostModel`); counted into the transfer's time, a head that waited 0.2 s
    /// in an origin's queue made a transfer judged on a whole window look stalled at its first byte,
    /// and it was re-dialled to the back of the line.
    mutating func startClockAtFirstByte(now: Double) {
        guard continuedAt == nil, transferBytes == 0, !continuesProbe else { return }
        transferStartedAt = now
        heldAtTransfer = held(at: now)
        samples = []
        heldSamples = []
    }

    /// A request after a shorter answer got its head: the time it waited for it is taken out of the
    /// transfer's clock (its samples and first byte move later by as much), so that its rate is what
    /// it had while receiving. The wait is the server's price for a request (`RequestCostModel`), not
    /// the connection's speed: on an origin that thinks 0.2 s before each head, the wait made a fast
    /// connection look slow, and every idle connection stole from it.
    mutating func skipContinuationWait(now: Double) {
        guard let since = continuedAt else { return }
        continuedAt = nil
        let gap = now - since
        guard gap > 0 else { return }
        samples = samples.map { ($0.0 + gap, $0.1) }
        firstByteAt = firstByteAt.map { $0 + gap }
        transferStartedAt += gap
    }

    /// How far back samples are kept, seconds: more than the longest window judged (2 s) and than the
    /// two round trips `growth` compares on a 2 s path. By time, not by count: the progress ticks
    /// sample too, and 64 samples then covered 2.7 s instead of 3.2, less than two round trips of a
    /// 1.5 s path, whose growth was then never known.
    /// (Samples are at least 0.02 s apart, so at most 226 are kept.)
    static let sampleSeconds = 4.5

    /// Keeps a sample of the bytes received so far (taken every progress tick and slow-rule round).
    mutating func sample(now: Double) {
        if let last = samples.last, now - last.0 < 0.02 { return }
        samples.append((now, transferBytes))
        heldSamples.append(held(at: now))
        // The sample just taken is always kept.
        let drop = samples.firstIndex { now - $0.0 <= Self.sampleSeconds } ?? 0
        if drop > 0 {
            samples.removeFirst(drop)
            heldSamples.removeFirst(min(drop, heldSamples.count))
        }
    }

    /// The rate progress reports show: over the last `window` seconds up to the newest tick, from a
    /// fifth of a second of ticks on; 0 before.
    func shownRate(window: Double) -> Double {
        guard let last = shownSamples.last else { return 0 }
        return sampledRate(shownSamples, endingAt: last.0, window: window, minSpan: 0.2) ?? 0
    }

    /// Keeps a progress tick's sample of `bytesReceived`, and the last 3 s of them.
    mutating func sampleShown(now: Double) {
        shownSamples.append((now, bytesReceived))
        if let drop = shownSamples.firstIndex(where: { now - $0.0 <= 3 }), drop > 0 { shownSamples.removeFirst(drop) }
    }

    /// Prepares a request for `bytes` at `now`: a new transfer unless `continuing` (the rest after a
    /// shorter answer, the same transfer to the rate rules). `chunkEnd` is the end of the chunk that
    /// holds `bytes.lowerBound`.
    mutating func begin(_ bytes: Range<Int64>, chunkEnd: Int64, continuing: Bool, now: Double) {
        // Bytes of the chunk this connection already received before `bytes` still count as progress.
        if bytes.lowerBound != pos { progressFrom = bytes.lowerBound }
        requestStart = bytes.lowerBound
        requestEnd = bytes.upperBound
        pos = bytes.lowerBound
        self.chunkEnd = chunkEnd
        lastByteAt = now
        requestStartedAt = now
        heldAtRequest = held(at: now)
        continuesProbe = false
        continuedAt = continuing ? now : nil
        stillConnecting = false
        if !continuing {
            transferStartedAt = now
            heldAtTransfer = heldAtRequest
            transferBytes = 0
            firstByteAt = nil
            bestWindowRate = 0
            samples = []
            heldSamples = []
        }
        machine.start()
    }
}

/// Bytes per second over the newest `window` seconds (counted back from `end`) of (time, total
/// bytes) samples; nil when those samples span less than `minSpan` seconds.
func sampledRate(_ samples: [(Double, Int64)], endingAt end: Double, window: Double, minSpan: Double) -> Double? {
    guard let last = samples.last, let first = samples.first(where: { end - $0.0 <= window + 0.01 }),
        last.0 - first.0 >= max(minSpan, 0.001)
    else { return nil }
    return Double(last.1 - first.1) / (last.0 - first.0)
}
