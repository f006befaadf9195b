/// Why a connection's transfer ends before libcurl ends it (decided when a head or bytes arrive, or
/// by the coordinator), acted on once the transfer is gone.
enum StopReason: Equatable {
    /// Reached the end of an assignment that shrank (stolen work, a race won): not an error.
    case reachedEnd
    /// Lost an end-game race.
    case cancelled
    /// Retry after a delay (seconds; nil means backoff); `kind` is the failure if retries run out.
    case retry(String, after: Double?, kind: FailureKind)
    /// The server answered a range with the whole file (same validators): ranges are unusable.
    case rangesIgnored(String)
    /// The resource changed on the server; the download must start over.
    case resourceChanged(String)
    case fatal(SeggetError)
}

/// The life of one connection as a pure value: events in, actions out (after async-http-client's
/// `HTTP1ConnectionStateMachine`). It replaces a set of independent flags (active, paused,
/// validated, stop, waiting, ramp start) whose combinations could contradict one another.
///
/// ```
///            wait(ramp/retry)          start
///   idle ───────────────────▶ waiting ───────▶ awaitingHead ──head ok──▶ receiving ◀──resume── paused
///    ▲  ◀─────────────── tick: due ─┘              │                        │ ──pause──────────▶ │
///    │                                              └──head refused─┐        └──stop─┐            │
///    │                                                              ▼               ▼            │
///    └───────────────────────── transferEnded ◀──────────────── stopping(reason) ◀─stop──────────┘
/// ```
/// (`transferEnded` and `cancel` lead back to `idle` from every transferring state.)
///
/// An event that cannot happen in the current state is a bug in the engine, not a server's fault:
/// it stops the process at once (`preconditionFailure`) rather than let a connection write bytes
/// it does not own. Every legal path is pinned by `ConnectionMachineTests`, so the check costs
/// nothing in a correct engine and names the broken transition in a broken one.
struct ConnectionMachine: Equatable {
    enum WaitCause: Equatable {
        /// Its first start, staggered (see `Coordinator.rampStep`).
        case ramp
        /// A retry after a failure or a stall.
        case retry
    }

    enum State: Equatable {
        /// No transfer, nothing scheduled.
        case idle
        /// No transfer; starts at `until`.
        case waiting(until: Double, WaitCause)
        /// A request is out; no response head has been judged yet.
        case awaitingHead
        /// The head was accepted; body bytes go to the file.
        case receiving
        /// Receiving, but held back by `--max-speed` since `since` (libcurl keeps the bytes).
        case paused(since: Double)
        /// The transfer must end for `reason`; it is still in libcurl until it is removed.
        case stopping(StopReason)
    }

    /// What the engine must do after an event.
    enum Action: Equatable {
        case none
        /// Send a request: a first start after the ramp, or a retry on a fresh TCP connection.
        case startRequest(WaitCause)
        /// Write the bytes that arrived.
        case write
        /// Make libcurl keep these bytes and pause the transfer.
        case pause
        /// Abort the transfer (refuse the bytes).
        case abort
    }

    private(set) var state = State.idle
    /// Seconds this connection was held back (paused for `--max-speed`, or the loop waiting for the
    /// writer), summed over its life, not counting a pause in progress.
    private(set) var heldTotal = 0.0

    /// A transfer is in libcurl (from the request until it is removed).
    var isTransferring: Bool {
        switch state {
        case .idle, .waiting: false
        case .awaitingHead, .receiving, .paused, .stopping: true
        }
    }
    /// Its answer was accepted and is still coming (or held by `--max-speed`).
    var isServed: Bool {
        switch state {
        case .receiving, .paused: true
        default: false
        }
    }
    var isPaused: Bool { if case .paused = state { true } else { false } }
    var isWaiting: Bool { if case .waiting = state { true } else { false } }
    /// Waiting for its first request (`.ramp`: staggered, or for a warm-up's connection).
    var isStarting: Bool { if case .waiting(_, .ramp) = state { true } else { false } }
    var isIdle: Bool { state == .idle }
    /// The head was judged (accepted or refused).
    var headJudged: Bool {
        switch state {
        case .receiving, .paused, .stopping: true
        case .idle, .waiting, .awaitingHead: false
        }
    }
    /// When a scheduled start is due.
    var waitingUntil: Double? { if case .waiting(let t, _) = state { t } else { nil } }
    /// The reason the transfer is ending, if one was decided.
    var stopReason: StopReason? { if case .stopping(let r) = state { r } else { nil } }

    /// Seconds held back so far, counting a pause in progress.
    func held(at now: Double) -> Double {
        if case .paused(let since) = state { return heldTotal + max(0, now - since) }
        return heldTotal
    }

    // MARK: Events

    /// Schedules a start at `until` (a ramp step, or a retry's delay).
    mutating func wait(until: Double, _ cause: WaitCause) {
        guard case .idle = state else { invalid("wait") }
        state = .waiting(until: until, cause)
    }

    /// A waiting connection's start comes forward to `now` (its wait was for something that came).
    mutating func hasten(to now: Double) {
        guard case .waiting(let t, let cause) = state, now < t else { return }
        state = .waiting(until: now, cause)
    }

    /// A request goes out (from idle, or a waiting connection started early).
    mutating func start() {
        switch state {
        case .idle, .waiting: state = .awaitingHead
        default: invalid("start")
        }
    }

    /// Time passes: a waiting connection whose time came is due to start (it becomes idle until the
    /// engine starts it, which it may not do if it was robbed of its work meanwhile).
    mutating func tick(now: Double) -> Action {
        guard case .waiting(let t, let cause) = state, t <= now else { return .none }
        state = .idle
        return .startRequest(cause)
    }

    /// The response head was judged: a stop reason refuses it, nil accepts it.
    mutating func headArrived(refusal: StopReason?) -> Action {
        guard case .awaitingHead = state else { invalid("headArrived") }
        if let refusal {
            state = .stopping(refusal)
            return .abort
        }
        state = .receiving
        return .write
    }

    /// Body bytes arrived; `budgetAllows` is false when `--max-speed` has nothing left to spend now.
    mutating func bytesArrived(budgetAllows: Bool, now: Double) -> Action {
        switch state {
        case .receiving:
            guard budgetAllows else {
                state = .paused(since: now)
                return .pause
            }
            return .write
        case .stopping:
            return .abort
        case .paused(let since):
            // libcurl hands over held bytes when the transfer is resumed, which `resume` announces
            // first; should it deliver them otherwise, the budget still decides.
            guard budgetAllows else { return .pause }
            heldTotal += max(0, now - since)
            state = .receiving
            return .write
        default: invalid("bytesArrived")
        }
    }

    /// The budget allows receiving again: a paused transfer continues.
    mutating func resume(now: Double) {
        guard case .paused(let since) = state else { invalid("resume") }
        heldTotal += max(0, now - since)
        state = .receiving
    }

    /// The transfer must end (the engine decided: end of a shrunk assignment, a lost race, a retry).
    /// A reason decided earlier stands.
    mutating func stop(_ reason: StopReason, now: Double) {
        switch state {
        case .awaitingHead, .receiving:
            state = .stopping(reason)
        case .paused(let since):
            heldTotal += max(0, now - since)
            state = .stopping(reason)
        case .stopping:
            break
        default: invalid("stop")
        }
    }

    /// The transfer is gone (libcurl finished it, or the engine removed it). Returns why it had to
    /// end, or nil when it ended by itself (the engine then looks at the curl code and the bytes).
    mutating func transferEnded(now: Double) -> StopReason? {
        var reason: StopReason?
        switch state {
        case .awaitingHead, .receiving: break
        case .paused(let since): heldTotal += max(0, now - since)
        case .stopping(let r): reason = r
        default: invalid("transferEnded")
        }
        state = .idle
        return reason
    }

    /// Lost an end-game race: a transfer must end as cancelled (whatever reason it had before: the
    /// chunk is written, so no retry or failure of this one matters), and a scheduled start is
    /// dropped.
    mutating func cancel(now: Double) {
        switch state {
        case .idle, .waiting:
            state = .idle
        case .paused(let since):
            heldTotal += max(0, now - since)
            state = .stopping(.cancelled)
        case .awaitingHead, .receiving, .stopping:
            state = .stopping(.cancelled)
        }
    }

    /// The loop waited `seconds` for the writer while this connection's transfer was in libcurl:
    /// it was not read meanwhile, which neither the slow rule nor the stall timeout may blame on the
    /// network.
    mutating func heldByWriter(_ seconds: Double) {
        guard isTransferring, seconds > 0 else { return }
        heldTotal += seconds
    }

    private func invalid(_ event: String) -> Never {
        preconditionFailure("connection: \(event) is impossible in state \(state)")
    }
}
