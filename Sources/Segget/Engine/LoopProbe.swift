import SeggetCurl
import SeggetSystem

/// One download's probe run by a `DownloadLoop`: the requests of a `ProbeWalk`, each started on
/// the loop's driver and looked at after every pass (held for the fetch or cut, as
/// `ProbeRequest` says). When `retrying`, a failure worth another try (`Download.probeRetryDelay`)
/// is tried again after its wait, timed by the loop. A refusal that the host budget takes for the
/// host's connection limit waits for a slot when `retrying`, and also when the probe
/// `waitsOutHostLimit` (a download's own probe with another URL left to try: the host said "not
/// now", which is no failure of the URL). Every probe of a download runs here: the first, its
/// mirrors' and a renewed link's.
final class LoopProbe: TransferClient {
    private unowned let loop: DownloadLoop
    private let download: Download
    private let prober: Prober
    private let retrying: Bool
    /// A refusal taken for the host's limit waits for a slot even where the probe is not `retrying`.
    private let waitsOutHostLimit: Bool
    private let events: (@Sendable (DownloadEvent) -> Void)?
    private let interrupt: InterruptFlag
    private let url: String
    /// The download's slots in its host's budget; `waitingForSlot` while the probe waits for one.
    private let hostShare: HostShare?
    private var waitingForSlot = false
    /// The slot was taken before the probe reached the loop (see `Download.prepare`).
    private let slotHeld: Bool
    /// Called once the probe has its slot, before its first request goes out.
    var onSlot: (() -> Void)?
    private var walk: ProbeWalk?
    private var request: ProbeRequest?
    private var attempt = 0
    private var retryAt: Double?
    /// Called once, with the result or the error.
    var done: ((Result<ProbeResult, SeggetError>) -> Void)?
    /// Called at most once, on a tick, when an answer's head gives the file's name (see
    /// `ProbeWalk.fileName(answeredIn:)`) before its body is in; not once the probe has ended.
    var onFileName: ((String) -> Void)?
    /// The connections to warm beside the request while its answer is slow (see `ConnectionWarmUp`),
    /// once per probe; `warmUps` once they went out, handed on with the result.
    var warmUp: ConnectionWarmUp?
    private var warmUps: ConnectionWarmUps?
    /// The rule and the host (`HostBudget.key`) of the warm-ups that went out: a redirect to another
    /// host sends them again there (see `answered`).
    private var warmedUp: (rule: ConnectionWarmUp, host: String)?
    private var probeResent = false
    /// When the probe began (or the probe before it whose failure is `priorFailure`).
    private var startedAt = monotonicSeconds()
    /// The failure of a probe made for this download before (a batch's or the daemon's first look
    /// at its files, `Download.prepare`, one attempt without retries): this probe's first attempt.
    /// What cannot change (a 404) ends it without a request, and a retry waits what the failure
    /// asks (a 503's `Retry-After`) before the request goes out, as after a failure of its own;
    /// a probe that is not `retrying` (another URL is left to try) ends with it at once. A refusal
    /// the host's budget took for its limit is none of these: the probe waits for a slot. A batch
    /// once sent a second request at once for every such failure: a 404 asked twice, a 503's
    /// `Retry-After: 2` answered two milliseconds later; and a daemon task whose first look was
    /// refused for the host's limit asked again at once, was refused again, and let a mirror stand
    /// in for a main URL that only said "not now".
    var priorFailure: SeggetError?
    /// Not before this time does the first request go out (see `priorFailure`).
    private var notBefore: Double?

    init(
        loop: DownloadLoop, download: Download, url: String, prober: Prober, retrying: Bool,
        waitsOutHostLimit: Bool = false, events: (@Sendable (DownloadEvent) -> Void)?, interrupt: InterruptFlag,
        hostShare: HostShare?, slotHeld: Bool = false
    ) {
        self.url = url
        self.hostShare = hostShare
        self.slotHeld = slotHeld
        self.loop = loop
        self.download = download
        self.prober = prober
        self.retrying = retrying
        self.waitsOutHostLimit = retrying || waitsOutHostLimit
        self.events = events
        self.interrupt = interrupt
    }

    /// The host whose budget the probe takes a slot of; nil without a budget.
    var hostKey: String? { hostShare?.key }
    var isWaitingForSlot: Bool { waitingForSlot }

    /// Starts once the host's budget gives the probe a slot (at once without a budget).
    func begin() {
        if let e = priorFailure {
            // The earlier probe's requests and time are this download's too.
            if let spent = e.probeSpent { tally = tally + spent }
            if let at = e.probeStartedAt { startedAt = min(startedAt, at) }
        }
        if let e = priorFailure, !e.takenForHostLimit || !waitsOutHostLimit {
            // Counted as this probe's first attempt (see `priorFailure`). A refusal the host's
            // budget took for its limit is not: the probe waits for a slot below, as that limit says.
            priorFailure = nil
            guard retrying else { return finish(.failure(e)) }
            guard let delay = retryDelay(after: e) else { return }
            notBefore = monotonicSeconds() + delay
        }
        guard let share = hostShare, !slotHeld else { return slotTaken() }
        waitingForSlot = true
        loop.waitForSlot(self, key: share.key)
    }

    /// Takes a slot if one is free, and goes on; ends when interrupted. False while it still waits
    /// (the loop offers again on its next pass, in turn with the other probes of the host).
    func trySlot() -> Bool {
        guard waitingForSlot, let share = hostShare else { return true }
        if interrupt.isSet {
            waitingForSlot = false
            endInterrupted()
            return true
        }
        guard share.reserveFirst() else { return false }
        waitingForSlot = false
        slotTaken()
        return true
    }

    private func slotTaken() {
        let s = onSlot
        onSlot = nil
        s?()
        start()
    }

    /// Starts (or, after a failure, starts again) from the download's URL.
    func start() {
        if let at = notBefore {
            // The wait the failure before this probe asked for, timed by the loop's ticks.
            notBefore = nil
            if monotonicSeconds() < at {
                retryAt = at
                return
            }
        }
        do throws(SeggetError) {
            walk = try ProbeWalk(prober: prober, url: url)
            try send()
        } catch {
            failed(error)
        }
    }

    private func send() throws(SeggetError) {
        guard let walk else { return }
        try walk.checkDeadline()
        let r = try libcurl { () throws(CurlError) in
            try prober.makeRequest(walk.current, options: walk.options, holding: prober.holdsTransfer)
        }
        try libcurl { () throws(CurlError) in try loop.driver.start(r.easy, for: self) }
        request = r
        tally.requests += 1
    }

    /// What the probe's requests cost so far (see `RequestTally`).
    private var tally = RequestTally()

    /// Counts the connection `easy`'s transfer opened (a held transfer's is counted by the engine
    /// that continues it).
    private func countConnection(_ easy: EasyHandle) {
        tally.connections += (try? easy.newConnections()) ?? 0
    }

    private func answered(_ r: ProbeRequest, code: CurlCode, held: HeldTransfer?) {
        do throws(SeggetError) {
            guard var w = walk else { return }
            if held == nil { countConnection(r.easy) }
            if r.context.head.status == 429 || r.context.head.status == 503 { tally.refusals += 1 }
            var result = try w.answered(r.context, code: code, held: held)
            walk = w
            if result != nil {
                result?.warmUps = warmUps
                result?.tally = tally
            }
            if let result {
                finish(.success(result))
            } else {
                rearmWarmUpsAfterRedirect(to: w.current)
                try send()
            }
        } catch {
            failed(error)
        }
    }

    /// The probe follows a redirect to `url`. Warm-ups that went to another host opened no
    /// connection the download can use (its requests go where the redirect points): their requests
    /// stay counted, and the same number go to the new host, by the same rule (its answer slow, its
    /// path long). Before, a download redirected to another host dialled all its other connections
    /// after the probe's answer, the warm-ups' round trips lost.
    private func rearmWarmUpsAfterRedirect(to url: String) {
        guard let sent = warmedUp, let old = warmUps, HostBudget.key(for: url) != sent.host else { return }
        tally = tally + old.outcome.spent
        warmUps = nil
        warmedUp = nil
        warmUp = sent.rule
    }

    private func failed(_ error: SeggetError) {
        // Refused while other downloads' requests to the host are out: the host's connection limit,
        // learnt for all of them; the probe waits for a slot and is not counted a failure.
        if waitsOutHostLimit, download.refusedByHost(error, share: hostShare) {
            hostShare?.sync(inFlight: 0)
            waitingForSlot = true
            if let share = hostShare { loop.waitForSlot(self, key: share.key) }
            return
        }
        guard retrying else { return finish(.failure(error)) }
        if let delay = retryDelay(after: error) { retryAt = monotonicSeconds() + delay }
    }

    /// Counts `error` as a failed attempt: the wait before the next one, or nil when none is worth
    /// it (the probe has ended with the failure).
    private func retryDelay(after error: SeggetError) -> Double? {
        attempt += 1
        do throws(SeggetError) {
            return try download.probeRetryDelay(
                after: error, attempt: attempt, deadline: prober.deadline, events: events, interrupt: interrupt)
        } catch {
            finish(.failure(error))
            return nil
        }
    }

    private func endInterrupted() {
        finish(.failure(SeggetError(.interrupted, "interrupted before the download started.")))
    }

    private func finish(_ result: Result<ProbeResult, SeggetError>) {
        waitingForSlot = false
        onFileName = nil
        let d = done
        done = nil
        d?(result.mapError { e in
            var e = e
            e.probeSpent = tally
            e.probeStartedAt = startedAt
            return e
        })
    }

    /// The driver failed as a whole: the probe ends with its error.
    func abandon(_ error: any Error) {
        if let r = request { loop.driver.cancel(r.easy) }
        request = nil
        finish(.failure(error as? SeggetError ?? SeggetError(.internalError, "unexpected error: \(error)")))
    }

    func transferDriver(_ driver: TransferDriver, completed handle: EasyHandle, with code: CurlCode) {
        guard let r = request, r.easy === handle else { return }
        request = nil
        if let w = walk { r.context.handshake = HandshakeOutcome(after: code, of: handle, url: w.current, proxy: w.options.proxy(for: w.current)) }
        answered(r, code: code, held: nil)
    }

    /// How often the loop ticks a probe: its retry, warm-up and resend timings are judged in round
    /// trips and tenths of a second. Not on every pass: a batch over HTTP/2 starts hundreds of
    /// probes at once, and ticking each on every pass took a tenth of its CPU.
    static let tickInterval = 0.005

    func transferDriverTick(_ driver: TransferDriver, now: Double) {
        // The loop offers slots to waiting probes, in order.
        if waitingForSlot { return }
        if interrupt.isSet, retryAt != nil || request != nil {
            // Ctrl-C while a retry waits, or while the answer is awaited (a server that does not
            // answer, a request libcurl holds for a connection): the probe ends now, not at its timeout.
            retryAt = nil
            if let r = request {
                request = nil
                countConnection(r.easy)
                driver.cancel(r.easy)
            }
            return endInterrupted()
        }
        if let at = retryAt {
            if now >= at {
                retryAt = nil
                start()
            }
            return
        }
        guard let r = request else { return }
        if let report = onFileName, r.context.head.isComplete, let name = walk?.fileName(answeredIn: r.context) {
            onFileName = nil
            report(name)
        }
        if let w = warmUp, let walk,
            w.due(waited: now - r.context.sentAt, answered: r.context.head.isComplete,
                  probeReused: (try? r.easy.newConnections()) == 0,
                  roundTrip: driver.multi.roundTrip(of: r.easy))
        {
            // To the URL the probe waits on (after a redirect, its target's host).
            warmUp = nil
            warmedUp = (w, HostBudget.key(for: walk.current))
            warmUps = ConnectionWarmUps(
                count: w.count, url: walk.current, options: walk.options, driver: driver, lag: now - r.context.sentAt)
        } else if let w = warmUps, !r.context.head.isComplete, !probeResent,
            ConnectionWarmUp.probeOverdue(waited: now - r.context.sentAt, lag: w.outcome.lag, warmUpRound: w.outcome.firstRound)
        {
            // Held up on its own connection: asked again on a warm one (libcurl takes an idle one).
            probeResent = true
            w.noteProbeResent()
            request = nil
            countConnection(r.easy)
            driver.cancel(r.easy)
            do throws(SeggetError) { try send() } catch { failed(error) }
            return
        }
        if r.holdDue() {
            // Left on the driver, paused, for the fetch to continue (or for `release` to end).
            request = nil
            let held = HeldTransfer(easy: r.easy, multi: driver.multi, context: r.context, releasing: { [loop] in loop.release($0) })
            answered(r, code: .writeError, held: held)
        } else if r.cutDue() {
            request = nil
            driver.cancel(r.easy)
            answered(r, code: .writeError, held: nil)
        }
    }
}
