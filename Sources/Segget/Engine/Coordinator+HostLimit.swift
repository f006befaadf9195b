/// The host's limit on requests at once, as the coordinator applies it (see `HostLimit`, and a batch's
/// `HostShare`).
extension Coordinator {
    /// Requests out now.
    var inFlight: Int { connections.reduce(0) { $0 + ($1.machine.isTransferring ? 1 : 0) } }

    /// Whether a further connection would find work now: chunks in the free pool, or a run with chunks
    /// not started that are worth stealing by the usual rule (the evidence a probe of the host's
    /// limit needs).
    func wantsAnotherConnection(now: Double) -> Bool {
        if !scheduler.free.isEmpty { return true }
        let estimates = stealEstimates(now: now)
        return connections.contains { c in
            guard let run = scheduler.run(of: c.id), run.count >= 2 else { return false }
            return estimates.worthStealing(c.id, notStartedChunks: run.count - 1)
        }
    }

    /// Whether the host asked for no request before a time still ahead (a refusal's `Retry-After`
    /// or `RateLimit` reset), for this download or, in a batch, any of the host's.
    func isHostQuiet(now: Double) -> Bool {
        if let share = config.hostShare { return now < share.quietUntil }
        return host.isQuiet(now: now)
    }

    /// Whether the host accepts one more request now (see `HostLimit`).
    mutating func allowsAnotherRequest(now: Double) -> Bool {
        // A connection waiting for a warm-up still out holds its place: the warm-up is in flight.
        let busy = inFlight + waitingForWarmUp
        if let share = config.hostShare {
            let coordinator = self
            return share.reserve(inFlight: busy, wanted: { coordinator.wantsAnotherConnection(now: now) }, now: now)
        }
        var h = host
        defer { host = h }
        return h.allowsAnother(inFlight: busy, wanted: wantsAnotherConnection(now: now), now: now)
    }

    mutating func accepted(_ id: Int) {
        host.accepted()
        config.hostShare?.accepted()
    }

    /// A 429 or 503 while other requests are out is the host's connection limit, not a failure of
    /// these bytes (see `HostLimit`): the work goes back to the pool for the connections the host
    /// serves, nothing is counted against the retries, and the limit learnt is said once. The limit is
    /// the requests out ahead of the refused one (sent before it): those sent after it in the same
    /// burst were not counted by the host when it refused, and many of them are refused in turn. The
    /// wait the host named holds every request to it, limit or not.
    mutating func refusedByHost(_ id: Int, head: ResponseHead, after: Double?, now: Double) -> [Command]? {
        let wait = after ?? head.rateLimitReset
        if let share = config.hostShare { share.asked(wait: wait, now: now) } else { host.asked(wait: wait, now: now) }
        guard !isRacing(id) else { return nil }
        let number = connections[id].requestNumber
        let others = connections.reduce(0) { $0 + ($1.machine.isTransferring && $1.id != id && $1.requestNumber < number ? 1 : 0) }
        let limit: Int?
        if let share = config.hostShare {
            // Other downloads' requests to the host count too: the limit is the host's, shared.
            guard let shared = share.refused(inFlight: others, wait: wait, now: now) else { return nil }
            limit = shared.announce
        } else {
            guard others > 0 else { return nil }
            host.refused(inFlight: others, wait: wait, now: now)
            limit = host.announce()
        }
        scheduler.abandon(id)
        var commands: [Command] = []
        if tracing { commands.append(.trace("connection \(id) refused (HTTP \(head.status)) with \(others) ahead of it; limit \(config.hostShare?.learntLimit ?? host.limit ?? -1)\(wait.map { ", quiet for \(Format.fixed($0, 1)) s" } ?? "")")) }
        if let l = limit {
            commands.append(.event(.notice("the server refuses more than \(l) request\(l == 1 ? "" : "s") at once (HTTP \(head.status)); continuing with \(l) connection\(l == 1 ? "" : "s").")))
        }
        return commands
    }
}
