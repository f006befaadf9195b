/// The host's limit on requests at once, as the coordinator applies it (see `HostLimit`, and a batch's
/// `HostShare`).
///
/// A limit is a host's: the main URL's host's (`host`, or `config.hostShare` shared with the run's
/// other downloads of that host) counts and bounds only the requests to that host, and a mirror on
/// another host has its own (`mirrorHosts`), learnt from its own refusals. One limit for every
/// source capped a mirror by the main host's refusals: with the main URL's host serving 2 requests
/// at once and a mirror serving any number, 32 MiB at `-n 8` (2 MiB/s an answer) took 4.1 s, as on 4
/// connections, where 8 took 2.1 s; and a mirror's refusals lowered the main host's limit.
extension Coordinator {
    /// Requests out now, to every source.
    var inFlight: Int { connections.reduce(0) { $0 + ($1.machine.isTransferring ? 1 : 0) } }

    /// The host of source `s` (`HostBudget.key`: scheme, name and port).
    func hostKey(ofSource s: Int) -> String { config.sources[s].hostKey }

    /// Whether source `s` is on the main URL's host, the one `host` and `config.hostShare` limit.
    func onMainHost(_ s: Int) -> Bool {
        s == 0 || config.sources.count <= 1 || !config.sources.indices.contains(s) || hostKey(ofSource: s) == hostKey(ofSource: 0)
    }

    /// Requests out now to the host of source `s`, those for which `counted` holds (all by default).
    func inFlight(toHostOf s: Int, counted: (Connection) -> Bool = { _ in true }) -> Int {
        guard config.sources.count > 1 else {
            return connections.reduce(0) { $0 + ($1.machine.isTransferring && counted($1) ? 1 : 0) }
        }
        let key = hostKey(ofSource: s)
        let same = config.sources.indices.map { hostKey(ofSource: $0) == key }
        return connections.reduce(0) { n, c in
            n + (c.machine.isTransferring && same.indices.contains(c.source) && same[c.source] && counted(c) ? 1 : 0)
        }
    }

    /// Requests out now to the main URL's host.
    var inFlightToMainHost: Int { inFlight(toHostOf: 0) }

    /// How many more requests may go out now, to every host together; nil: some host has no limit
    /// (neither a cap nor one learnt).
    var requestRoom: Int? {
        let main = inFlightToMainHost
        guard var room = config.hostShare.map({ $0.room(inFlight: main) }) ?? host.limit.map({ $0 - main }) else { return nil }
        var seen: Set<String> = []
        for s in goodSources where !onMainHost(s) {
            let key = hostKey(ofSource: s)
            guard seen.insert(key).inserted else { continue }
            guard let limit = mirrorHosts[key]?.limit else { return nil }
            room += max(0, limit - inFlight(toHostOf: s))
        }
        return room
    }

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

    /// Whether the host of source `s` asked for no request before a time still ahead (a refusal's
    /// `Retry-After` or `RateLimit` reset), for this download or, in a batch, any of the host's.
    func isHostQuiet(now: Double, source s: Int = 0) -> Bool {
        guard onMainHost(s) else { return mirrorHosts[hostKey(ofSource: s)]?.isQuiet(now: now) ?? false }
        if let share = config.hostShare { return now < share.quietUntil }
        return host.isQuiet(now: now)
    }

    /// Whether the host of source `s` accepts one more request now (see `HostLimit`).
    mutating func allowsAnotherRequest(now: Double, source s: Int = 0) -> Bool {
        guard onMainHost(s) else {
            let key = hostKey(ofSource: s)
            var h = mirrorHosts[key] ?? HostLimit()
            defer { mirrorHosts[key] = h }
            return h.allowsAnother(inFlight: inFlight(toHostOf: s), wanted: wantsAnotherConnection(now: now), now: now)
        }
        // A connection waiting for a warm-up still out holds its place: the warm-up is in flight.
        let busy = inFlightToMainHost + waitingForWarmUp
        if let share = config.hostShare {
            let coordinator = self
            return share.reserve(inFlight: busy, wanted: { coordinator.wantsAnotherConnection(now: now) }, now: now)
        }
        var h = host
        defer { host = h }
        return h.allowsAnother(inFlight: busy, wanted: wantsAnotherConnection(now: now), now: now)
    }

    /// Idle connection `id`, whose source's host takes no further request now, moves to a good
    /// source on another host that does (the first in order), and true; false where there is none.
    /// With the main URL's host serving 2 requests at once, its other connections sat idle beside a
    /// mirror that served any number (3.0 s for the 32 MiB above where 8 connections take 2.1 s).
    mutating func movedToHostWithRoom(_ id: Int, now: Double) -> Bool {
        let from = connections[id].source
        guard config.sources.count > 1, config.sources.indices.contains(from) else { return false }
        let own = hostKey(ofSource: from)
        for s in goodSources where hostKey(ofSource: s) != own {
            guard allowsAnotherRequest(now: now, source: s) else { continue }
            connections[id].source = s
            // Its open link, if any, is to the old host: the request dials.
            connections[id].leftLinkOpen = false
            return true
        }
        return false
    }

    mutating func accepted(_ id: Int) {
        let s = connections[id].source
        let sentAt = connections[id].requestStartedAt
        guard onMainHost(s) else {
            mirrorHosts[hostKey(ofSource: s)]?.accepted(sentAt: sentAt)
            return
        }
        host.accepted(sentAt: sentAt)
        config.hostShare?.accepted(sentAt: sentAt)
    }

    /// A 429 or 503 while other requests are out is the host's connection limit, not a failure of
    /// these bytes (see `HostLimit`): the work goes back to the pool for the connections the host
    /// serves, nothing is counted against the retries, and the limit learnt is said once. The limit is
    /// the requests out ahead of the refused one (sent before it): those sent after it in the same
    /// burst were not counted by the host when it refused, and many of them are refused in turn. The
    /// wait the host named holds every request to it, limit or not, up to `--max-retry-wait`.
    mutating func refusedByHost(_ id: Int, head: ResponseHead, now: Double) -> [Command]? {
        let asked = head.refusalWait
        let wait = RetryPolicy.hostWait(asked: asked, maxWait: config.maxRetryWait)
        let source = connections[id].source
        let main = onMainHost(source)
        let key = main ? nil : hostKey(ofSource: source)
        if let key {
            mirrorHosts[key, default: HostLimit()].asked(wait: wait, now: now)
        } else if let share = config.hostShare {
            share.asked(wait: wait, now: now)
        } else {
            host.asked(wait: wait, now: now)
        }
        guard !isRacing(id) else { return nil }
        let number = connections[id].requestNumber
        // Only the requests to the same host count: the limit is that host's.
        let others = inFlight(toHostOf: source) { $0.id != id && $0.requestNumber < number }
        let limit: Int?
        if let key {
            guard others > 0 else { return nil }
            var h = mirrorHosts[key] ?? HostLimit()
            h.refused(inFlight: others, wait: wait, now: now)
            limit = h.announce()
            mirrorHosts[key] = h
        } else if let share = config.hostShare {
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
        if tracing {
            let learnt = key.flatMap { mirrorHosts[$0]?.limit } ?? config.hostShare?.learntLimit ?? host.limit ?? -1
            commands.append(.trace("connection \(id) refused (HTTP \(head.status)) with \(others) ahead of it at its host; limit \(learnt)\(wait.map { ", quiet for \(Format.fixed($0, 1)) s" } ?? "")"))
        }
        if let l = limit {
            let server = main ? "the server" : "the mirror \(URLParts.shown(config.sources[source].url))"
            let quiet = RetryPolicy.hostWaitNote(asked: asked, wait: wait).map { ", and \($0)" } ?? ""
            let s = l == 1 ? "" : "s"
            // A proxy's cap on its tunnels (a CONNECT refused with 429 or 503) is the proxy's, said so.
            let refusal = head.tunnelRefusedBy.map { "the proxy \($0) refuses more than \(l) tunnel\(s) to \(server) at once" }
                ?? "\(server) refuses more than \(l) request\(s) at once"
            commands.append(.event(.notice("\(refusal) (HTTP \(head.status)); continuing with \(l) connection\(s)\(main ? "" : " to it")\(quiet).")))
        }
        return commands
    }
}
