/// A source (the main URL or a mirror) that must get no more work: it served pieces that failed their
/// hashes, or it failed in a way its retries cannot mend while other sources serve the file. Its
/// connections move to the good sources (the one with the fewest connections first); a transfer
/// still running from it is removed and continues at once from where it got, on its new source.
/// Added for Metalink (issue 40) beside the policy, which it does not change: which work a
/// connection takes, and when, is decided as before.
extension Coordinator {
    /// The sources that still get work.
    var goodSources: [Int] { config.sources.indices.filter { !demotedSources.contains($0) } }

    /// Gives source `s` no more work. Returns nil, changing nothing, when no other source is left.
    mutating func dropSource(_ s: Int, now: Double) -> [Command]? {
        let good = goodSources.filter { $0 != s }
        guard !good.isEmpty else { return nil }
        demotedSources.insert(s)
        var commands: [Command] = []
        slowRule.forget(connections.indices.filter { connections[$0].source == s })
        for id in connections.indices where connections[id].source == s {
            let counts = good.map { g in connections.filter { $0.source == g }.count }
            connections[id].source = good[counts.indices.min { counts[$0] < counts[$1] } ?? 0]
            guard connections[id].machine.isTransferring else { continue }
            commands.append(restartOnItsSource(id, now: now))
        }
        if tracing { commands.append(.trace("source \(s) demoted; good sources \(good)")) }
        return commands
    }

    /// A transferring connection moves to a joining source only when the rest of its run takes at
    /// least this many times a new connection's price at its rate, and `joinWorthSeconds`
    /// (`scoutWorthSeconds` for a source that holds no connection yet).
    static let joinPriceFactor = 4.0
    static let joinWorthSeconds = 1.0
    /// For a source's first connection, `joinWorthSeconds` is this instead: on loopback, a main URL
    /// capped at 1 MiB/s per answer, 16 MiB at `-n 16`, every run of 1 MiB took under a second, and an
    /// uncapped mirror that joined at once took nothing (simulator, mirrors seed 477: 1.10 s).
    static let scoutWorthSeconds = 0.1

    /// A mirror whose probe agreed after the fetch began joins (the fetch starts from the main URL
    /// as soon as its probe answers, and a mirror slow to answer, or never answering, holds nothing
    /// up). It is owed its share of the connections, `connections / sources`, and takes them now and
    /// on later ticks (`takeOwedConnections`), as they can be moved.
    /// Connections not in use yet (above `connectionLimit`: `-n auto`'s growth, a batch's loans) are
    /// spread over the sources in turn, as at the start, for when they are.
    mutating func addSource(_ source: FetchSource, now: Double) -> [Command] {
        config.sources.append(source)
        let s = config.sources.count - 1
        for id in connections.indices where id >= connectionLimit && !connections[id].machine.isTransferring {
            connections[id].source = id % config.sources.count
        }
        let share = connectionLimit / config.sources.count
        guard share > 0 else { return [] }
        owedConnections[s] = share
        return takeOwedConnections(now: now)
    }

    /// Gives each joined source what it is still owed (`addSource`), each connection from the source
    /// holding the most while that one holds more than the share:
    /// - first connections holding no transfer: their next request goes to it, at no cost;
    /// - then transferring ones whose rest takes at least `joinPriceFactor` times a new
    ///   connection's price and `joinWorthSeconds` at their rate, the most left first; each
    ///   continues at once from where it got, on the mirror, as `dropSource` moves connections.
    ///   One still waiting for its first bytes waits for a rate (on a long path every connection's
    ///   request is out before a mirror's probe is back).
    /// Connection 0 (it may continue the probe's transfer), racers and connections waiting for a
    /// warm-up stay. What a source is owed only goes down, and a mirror that loses a connection to a
    /// faster source (`moveFromSlowSources`, `redialElsewhere`) is owed nothing more, so that no
    /// connection goes back and forth. Nothing moves once every chunk is in or the download is ending.
    mutating func takeOwedConnections(now: Double) -> [Command] {
        guard !owedConnections.isEmpty else { return [] }
        guard !isComplete, stop == nil else {
            owedConnections = [:]
            return []
        }
        // Of the connections in use (those above `connectionLimit` were spread by `addSource`).
        let inUse = Array(connections.prefix(connectionLimit))
        let share = inUse.count / config.sources.count
        let price = dialSeconds(typical: typicalRate(now: now)) + priceBeyondNetwork(.redial, now: now)
        let racing = scheduler.duplicates, warming = awaitingWarmUp
        let movable = { (c: Connection) in c.id != 0 && racing[c.id] == nil && !warming.contains(c.id) }
        // Free ones from the highest id down (the lowest are the first to start), then busy ones,
        // each with how long the rest of its run takes at its rate.
        var candidates: [(id: Int, seconds: Double)] = inUse.reversed().filter { movable($0) && !$0.machine.isTransferring }.map { ($0.id, .infinity) }
        candidates += inUse.compactMap { c -> (id: Int, left: Int64, seconds: Double)? in
            guard movable(c), c.machine.isTransferring, c.machine.headJudged, let r = joinRate(c, now: now), r > 0 else { return nil }
            let left = max(0, end(of: c.id) - c.pos)
            let seconds = Double(left) / r
            return seconds >= max(Self.joinPriceFactor * price, Self.scoutWorthSeconds) ? (c.id, left, seconds) : nil
        }.sorted { $0.left > $1.left }.map { ($0.id, $0.seconds) }
        var held: [Int: Int] = [:]
        for c in inUse { held[c.source, default: 0] += 1 }
        var commands: [Command] = []
        for s in owedConnections.keys.sorted() {
            while owedConnections[s, default: 0] > 0, !demotedSources.contains(s) {
                guard held[s, default: 0] < share else { break }
                // A source that holds no connection yet takes its first with less work left: until
                // one of its requests runs, nothing shows its speed, and nothing moves to it later.
                let worth = held[s, default: 0] == 0 ? 0 : Self.joinWorthSeconds
                let pick = candidates.filter { $0.seconds >= worth && connections[$0.id].source != s && held[connections[$0.id].source, default: 0] > share }
                    .max { held[connections[$0.id].source, default: 0] < held[connections[$1.id].source, default: 0] }?.id
                guard let id = pick else { break }
                candidates.removeAll { $0.id == id }
                owedConnections[s, default: 0] -= 1
                let from = connections[id].source
                connections[id].source = s
                held[from, default: 0] -= 1
                held[s, default: 0] += 1
                if connections[id].machine.isTransferring { commands.append(restartOnItsSource(id, now: now)) }
                if tracing { commands.append(.trace("connection \(id) moves from source \(from) to source \(s), which joined")) }
            }
            if owedConnections[s, default: 0] <= 0 || demotedSources.contains(s) { owedConnections[s] = nil }
        }
        return commands
    }

    /// Connection `c`'s rate for `addSource`: as sources are compared (`sourceRate`), or for a request
    /// younger than that measures, its average from its first byte once it is 0.1 s old.
    func joinRate(_ c: Connection, now: Double) -> Double? {
        if let r = sourceRate(c, now: now) { return r }
        guard let first = c.firstByteAt else { return nil }
        let seconds = now - first - (c.held(at: now) - c.heldAtFirstByte)
        return seconds >= 0.1 ? Double(c.transferBytes - c.bytesAtFirstByte) / seconds : nil
    }

    /// Ends connection `id`'s transfer, whose source was just changed, so that it continues at once
    /// from its position on the new source, as a retry does, with no attempt counted; a racer gives
    /// up its race instead. Returns the command that removes the transfer.
    mutating func restartOnItsSource(_ id: Int, now: Double) -> Command {
        _ = connections[id].machine.transferEnded(now: now)
        connections[id].leftLinkOpen = false
        if isRacing(id) {
            abandonRace(id)
        } else if scheduler.run(of: id) != nil {
            connections[id].machine.wait(until: now, .retry)
        }
        return .remove(id)
    }

    /// Connection `id`'s source failed for good (`why`): dropped when others are left (with a
    /// notice), so that the download goes on from them. Nil when it is the last source.
    mutating func sourceFailed(of id: Int, why: String, now: Double) -> [Command]? {
        let s = connections[id].source
        guard config.sources.count > 1, let commands = dropSource(s, now: now) else { return nil }
        if isRacing(id) { abandonRace(id) }
        connections[id].attempts = 0
        if scheduler.run(of: id) != nil, connections[id].machine.isIdle {
            connections[id].machine.wait(until: now, .retry)
        }
        let shown = URLParts.shown(config.sources[s].url)
        return commands + [.event(.notice("\(shown) gets no more work: \(RetryPolicy.sentence(why).dropLast()); the other servers go on."))]
    }
}

extension Coordinator {
    /// Every progress tick, with more than one good source: the connection of a source far slower per
    /// connection than another (`SourceChoice`) with the most left of its run stops and continues its
    /// run at once from where it got, on the faster source, as `dropSource` moves a demoted source's
    /// connections. One move per tick, so that the rates it changes are measured before the next;
    /// only where the bytes it still has to fetch save more than a new connection's price
    /// (`SourceChoice.worth`).
    mutating func moveFromSlowSources(now: Double) -> [Command] {
        guard goodSources.count > 1 else { return [] }
        let sources = measuredSources(now: now)
        let price = dialSeconds(typical: typicalRate(now: now)) + priceBeyondNetwork(.redial, now: now)
        var best: (id: Int, move: SourceChoice.Move, left: Int64)?
        for c in connections where c.machine.isTransferring && !isRacing(c.id) && !inSlowStart(c, now: now) {
            guard let move = SourceChoice.move(from: c.source, among: sources),
                let r = sourceRate(c, now: now) ?? sourceRates[c.source]
            else { continue }
            let left = max(0, end(of: c.id) - c.pos)
            guard SourceChoice.worth(bytesLeft: left, rate: r, gain: move.gain, priceSeconds: price),
                left > best?.left ?? 0
            else { continue }
            best = (c.id, move, left)
        }
        guard let best else { return [] }
        let from = connections[best.id].source
        connections[best.id].source = best.move.to
        // A joined mirror found slow is owed nothing more (`takeOwedConnections`).
        owedConnections[from] = nil
        var commands = [restartOnItsSource(best.id, now: now)]
        if tracing {
            commands.append(.trace("connection \(best.id) moves from source \(from) to \(best.move.to) (\(Format.fixed(best.move.gain, 2)) x faster per connection, \(best.left) bytes left)"))
        }
        return commands
    }

    /// Whether connection `c`'s rate still shows TCP's slow start on its source's path rather than what
    /// the source gives: its first byte came less than 4 round trips ago, or its rate over the newest
    /// two round trips still grows (`growingWindow`). A mirror 77 ms away, its connection 0.35 s past
    /// its first byte and still growing at 270 KiB/s, was judged 3.7 times slower than a mirror capped
    /// at 1 MiB/s per answer, and its connection moved there for good (simulator, mirrors seed 5857:
    /// 16.4 s for 64 MiB at `-n 4` where the uncapped mirror alone took under a second).
    func inSlowStart(_ c: Connection, now: Double) -> Bool {
        guard let rtt = pathRoundTrip(ofSource: c.source), rtt > 0, let first = c.firstByteAt else { return false }
        if now - first < 4 * rtt { return true }
        return growingWindow(c, roundTrip: rtt) != nil
    }

    /// Idle connection `id` is about to send a request for `bytes` (a run, a share, a race): it sends it
    /// to a source far faster per connection than its own where there is one (`SourceChoice.move`)
    /// and the bytes save more there than the dial it may cost (none where its own link is not open:
    /// it dials either way). Work handed to an idle connection of a slow source went to that source,
    /// the end game's races too: a main URL capped at 1 MiB/s per answer raced its own last chunks
    /// while an uncapped mirror's connections, 40 times faster, had none left to race (simulator,
    /// mirrors seed 477: 1.17 s for 16 MiB at `-n 16`).
    mutating func sendToFasterSource(_ id: Int, bytes: Int64, now: Double) -> Command? {
        let from = connections[id].source
        guard goodSources.count > 1 else { return nil }
        let sources = measuredSources(now: now)
        guard let move = SourceChoice.move(from: from, among: sources),
            let rate = sources.first(where: { $0.index == from })?.perConnection
        else { return nil }
        let price = connections[id].leftLinkOpen ? dialSeconds(typical: typicalRate(now: now)) : 0
        guard price == 0 || SourceChoice.worth(bytesLeft: bytes, rate: rate, gain: move.gain, priceSeconds: price) else { return nil }
        // Its request was let go within its own source's host limit; another host's must allow it too.
        guard hostKey(ofSource: from) == hostKey(ofSource: move.to) || allowsAnotherRequest(now: now, source: move.to) else { return nil }
        connections[id].source = move.to
        // Its open link is to the old source: the request dials.
        connections[id].leftLinkOpen = false
        owedConnections[from] = nil
        return .trace("connection \(id) sends its request to source \(move.to), not \(from) (\(Format.fixed(move.gain, 2)) x faster per connection)")
    }

    /// The good sources with what is known of their rates per connection: the connections receiving
    /// now, and what finished requests showed (requests cut short by steals are often too young to
    /// measure); `extra` adds one connection's rate to its source.
    func measuredSources(now: Double, extra: (source: Int, rate: Double)? = nil) -> [SourceChoice.Source] {
        var rates: [Int: [Double]] = [:]
        for c in connections where c.machine.isTransferring && !isRacing(c.id) && !inSlowStart(c, now: now) {
            if let r = sourceRate(c, now: now) { rates[c.source, default: []].append(r) }
        }
        if let extra { rates[extra.source, default: []].append(extra.rate) }
        return goodSources.map { SourceChoice.Source(index: $0, rates: (rates[$0] ?? []) + (sourceRates[$0].map { [$0] } ?? [])) }
    }

    /// Connection `id`, judged slow at `rate` (`judgeSlowConnections`), re-dials: to a source far
    /// faster per connection than its own when there is one (its own is what is slow, and another
    /// request there would be as slow), else to its own.
    mutating func redialElsewhere(_ id: Int, rate: Double, now: Double) -> [Command] {
        let from = connections[id].source
        guard goodSources.count > 1,
            let move = SourceChoice.move(from: from, among: measuredSources(now: now, extra: (from, rate)))
        else { return [] }
        connections[id].source = move.to
        owedConnections[from] = nil
        return tracing ? [.trace("connection \(id) re-dials to source \(move.to), not \(from) (\(Format.fixed(move.gain, 2)) x faster per connection)")] : []
    }

    /// With mirrors, source `s`'s own path round trip, as `pathRoundTrip` is the download's: from its
    /// own first-byte waits (the download's until it has one).
    func pathRoundTrip(ofSource s: Int) -> Double? {
        sourceFirstByteWaits[s]?.min() ?? pathRoundTrip
    }

    /// With mirrors, how long source `s`'s first bytes usually take: the median of its own waits; before
    /// it has one, its probe's first answer (the main URL's, or the mirror's as it joined).
    func usualFirstByteWait(ofSource s: Int) -> Double? {
        if let w = sourceFirstByteWaits[s], !w.isEmpty { return w.sorted()[w.count / 2] }
        return s == 0 ? config.probeFirstAnswer : config.sources[s].firstAnswer
    }

    mutating func noteFirstByteWait(_ wait: Double, source: Int) {
        guard config.sources.count > 1 else { return }
        sourceFirstByteWaits[source, default: []].append(wait)
        if sourceFirstByteWaits[source, default: []].count > 16 { sourceFirstByteWaits[source]?.removeFirst() }
    }

    /// A connection's rate for comparing sources: its last second, or for a younger request (runs cut
    /// by steals are often shorter than a second) its average so far (`averageRate`).
    func sourceRate(_ c: Connection, now: Double) -> Double? {
        rate(c, now: now) ?? averageRate(c, now: now)
    }

    /// Connection `c`'s request ended: its rate from its first byte to its last (held time left out)
    /// joins its source's (`sourceRates`, each new one weighing half), when it carried at least
    /// 256 KiB over 0.1 s. A connection still racing is left out (a race's losers are removed, not
    /// ended, and record nothing; a winner's request counts).
    ///
    /// A source with no rate yet also takes one from a request of 256 KiB or more (the slow rule's
    /// evidence) that was quicker: its bytes over the time from its first byte to its last, held time
    /// not taken out, plus one round trip of the source's path (what a request on an open connection
    /// waits for its first byte; its own wait may hold a dial and handshakes). A request of its own
    /// only, not one continuing a shorter answer or the probe's. A mirror on a fast path whose runs
    /// were each over within 0.1 s was never measured, so no connection left a source 100 times
    /// slower for it (nginx at 256 KiB/s per answer with h2o as the mirror on loopback, 16 MiB at
    /// `-n 8`: 4.0 s in half the runs, the main URL's connections re-dialling the main URL every
    /// 0.1 s; 0.6 s now).
    mutating func noteSourceRate(_ c: Connection, now: Double) {
        guard !isRacing(c.id), let first = c.firstByteAt else { return }
        var bytes = c.transferBytes - c.bytesAtFirstByte
        var seconds = c.lastByteAt - first - (c.held(at: now) - c.heldAtFirstByte)
        if seconds < 0.1, sourceRates[c.source] == nil, c.transferBytes >= 256 << 10, !c.continuesProbe,
            c.transferBytes == c.pos - c.requestStart, c.lastByteAt > c.requestStartedAt
        {
            bytes = c.transferBytes
            let wait = min(c.lastByteAt - c.requestStartedAt, pathRoundTrip(ofSource: c.source) ?? .infinity)
            seconds = max(0, c.lastByteAt - first) + wait
            guard seconds > 0 else { return }
        } else {
            guard bytes >= 256 << 10, seconds >= 0.1 else { return }
        }
        let r = Double(bytes) / seconds
        sourceRates[c.source] = sourceRates[c.source].map { ($0 + r) / 2 } ?? r
    }
}
