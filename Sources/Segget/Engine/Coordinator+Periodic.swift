import Glibc

/// The coordinator's periodic decisions, built on its rate estimates (`Coordinator+Policy`): the
/// re-dial of slow connections and `-n auto`'s growth.
extension Coordinator {
    /// A progress tick's own decisions: auto growth, the connections owed to a mirror that joined,
    /// and moves away from slow sources.
    mutating func periodicDecisions(now: Double) -> [Command] {
        (config.autoConnections ? growConnections(now: now) : []) + takeOwedConnections(now: now) + moveFromSlowSources(now: now)
    }

    /// A connection far slower than its peers (see `SlowConnectionRule`), owner or end-game racer,
    /// reconnects and continues its whole run on the new connection; out of re-dials, it gives back
    /// its not-started chunks instead.
    ///
    /// A re-dial keeps the run: a slow answer is the request's (or the path's), and the fresh request
    /// is as likely as any to be fast. Giving the run back cost every re-dial a second new request (the
    /// connection's next run once its chunk was done), and against a server that trickles one request
    /// in three each new request is another draw: in a run of `Benchmarks/slow-tail.sh`'s trickle case
    /// at 0ae0447, connection 1 made 7 requests (3 trickled); keeping the run, it made 2, and the case
    /// went from 1.15x to 1.03x the healthy time (median of 5, with the `minJudgeSeconds` and
    /// `worthFactor` changes of the same commit). A connection that stays slow is re-dialled again, and past its bound loses
    /// the run; thieves take from it like from anyone.
    mutating func judgeSlowConnections(now: Double) -> [Command] {
        guard config.redialSlow, !readerBound else { return [] }
        // Half a second tells a connection capped 8x lower from its peers: nginx sends a 2 MiB/s
        // connection its first 2 MiB at once and then nothing for a second, while a 16 MiB/s one gets
        // 2 MiB every 125 ms. On the uneven benchmark the slow ones were re-dialled after 0.76 s
        // instead of 1.26 s with a 1 s window (8 runs each: median 8.32 s against 8.37 s, slowest
        // 8.61 s against 9.09 s), and no capped run re-dialled anything.
        let rtt = pathRoundTrip
        let window = slowRule.window(rtt: rtt)
        // Sampled every round, so that a whole window is judged as soon as the request is that old.
        for id in connections.indices where connections[id].machine.isTransferring { connections[id].sample(now: now) }
        var observations: [SlowConnectionRule.Observation] = []
        // A request younger than the window is measured from its first byte; the rule judges it only
        // on clear evidence (see `SlowConnectionRule.minJudgeSeconds`).
        // On a host that queues requests, a head awaited behind others still out comes after theirs;
        // a re-dial would only send it to the back of the line.
        let queueing = cost.servedAtOnce(pending: pendingAnswers(now: now)) != nil
        var notJudged: [String] = []
        for c in connections where c.machine.isTransferring {
            // The kernel holds much of its answer unread: the server delivered, segget fell behind.
            if c.unread >= Self.unreadBehind {
                if tracing { notJudged.append("\(c.id) (\(c.unread >> 10) KiB)") }
                continue
            }
            let left = max(0, end(of: c.id) - c.pos)
            // With mirrors, a connection is judged on its own source's round trip and usual first-byte
            // wait: on another source's (shorter or longer), one still in slow start looked slow, or a
            // slow one young.
            let several = config.sources.count > 1
            let ownRTT = several ? pathRoundTrip(ofSource: c.source) : rtt
            let window = several ? slowRule.window(rtt: ownRTT) : window
            let path = several ? SlowConnectionRule.Observation.Path(roundTrip: ownRTT, usualFirstByteWait: usualFirstByteWait(ofSource: c.source)) : nil
            if !c.machine.headJudged, queueing,
                connections.contains(where: { $0.machine.isTransferring && $0.id != c.id && $0.requestNumber < c.requestNumber })
            {
                continue
            }
            if !c.machine.headJudged {
                // In a queue its own wait starts when its turn came: when the answer before it ended.
                var since = queueing ? max(c.requestStartedAt, cost.lastEndedAt) : c.requestStartedAt
                var heldBefore = c.heldAtRequest
                // A request whose connection was still being made when last told counts its wait from
                // then: its handshakes, however long the path made them (on a line whose queue is
                // full, three round trips of 1.2 s where the path's own is 0.6 s), are not a
                // server's slowness. Told before every round, so within a round of their end.
                if !c.stillConnecting, c.connectingCountedTo > since {
                    since = c.connectingCountedTo
                    heldBefore = c.heldWhenConnecting
                }
                // A mirror whose probe's answer took long is not counted that long against (a mirror
                // whose first byte takes 1.5 s was re-dialled every 0.125 s, up to its bound).
                let expected = config.sources[c.source].firstAnswer ?? 0
                let waited = max(0, now - since - (c.held(at: now) - heldBefore) - expected)
                var o = SlowConnectionRule.Observation(id: c.id, bytes: 0, seconds: 0, waitingForFirstByte: waited, remainingBytes: left, consecutiveRedials: c.redials)
                o.path = path
                if c.stillConnecting {
                    // Still being made: its first byte is due its handshakes later.
                    o.handshakeSeconds = several ? ownRTT.map { handshakeRounds * $0 } ?? expectedHandshakeSeconds : expectedHandshakeSeconds
                }
                observations.append(o)
            } else if now - c.transferStartedAt >= window, let m = c.recent(now: now, window: window, interval: Self.slowJudgeInterval) {
                var o = SlowConnectionRule.Observation(id: c.id, bytes: m.bytes, seconds: m.seconds, heldSeconds: m.held, remainingBytes: left, consecutiveRedials: c.redials)
                o.provenRate = c.bestWindowRate
                o.age = c.firstByteAt.map { now - $0 - (c.held(at: now) - c.heldAtFirstByte) }
                o.path = path
                o.growth = c.growth(span: max(0.1, ownRTT ?? 0))
                if o.freeSeconds > 0 { connections[c.id].bestWindowRate = max(c.bestWindowRate, Double(m.bytes) / o.freeSeconds) }
                observations.append(o)
            } else if let first = c.firstByteAt, now - first > 0 {
                var o = SlowConnectionRule.Observation(id: c.id, bytes: c.transferBytes - c.bytesAtFirstByte, seconds: now - first,
                    heldSeconds: c.held(at: now) - c.heldAtFirstByte, remainingBytes: left, consecutiveRedials: c.redials)
                o.age = o.freeSeconds
                o.path = path
                o.growth = c.growth(span: max(0.1, ownRTT ?? 0))
                // Its rate over the newest round trips (at least 0.1 s), held time left out.
                if let m = c.recent(now: now, window: max(0.1, 2 * (ownRTT ?? 0)), interval: Self.slowJudgeInterval), m.seconds - m.held > 0.05 {
                    o.currentRate = Double(m.bytes) / (m.seconds - m.held)
                }
                observations.append(o)
            }
        }
        let pipe = pipeRates(window: window)
        let verdicts = slowRule.judge(observations, now: now, usualFirstByteWait: usualFirstByteWait, rtt: rtt,
                                      handshakeSeconds: handshakeSeconds, requestPrice: priceBeyondNetwork(.redial, now: now),
                                      pipe: pipe, networkRTT: cost.roundTrip)
        var commands: [Command] = []
        if !notJudged.isEmpty { commands.append(.trace("not judged, their answers unread in the kernel: connections \(notJudged.joined(separator: ", "))")) }
        for v in verdicts {
            let c = connections[v.id]
            switch v.action {
            case .keepOnlyTheChunkInFlight:
                guard end(of: c.id) > c.chunkEnd else { continue }
                if tracing { commands.append(.trace("connection \(c.id) keeps only its chunk at \(Format.rate(v.rate)) vs typical \(Format.rate(v.typical))")) }
                // The run now ends with the chunk in flight (`end(of:)`).
                scheduler.releaseNotStarted(of: c.id)
            case .redial:
                // The host asked for no request before a time still ahead (`Retry-After`): the slow
                // connection keeps its request until then, and is judged again after.
                if isHostQuiet(now: now, source: c.source) { continue }
                connections[c.id].redials += 1
                if tracing {
                    commands.append(.trace("connection \(c.id) redial at \(Format.rate(v.rate)) vs typical \(Format.rate(v.typical)) (first bytes take \(Format.fixed(usualFirstByteWait ?? -1, 3)) s, path round trip \(Format.fixed(rtt ?? -1, 3)) s, request \(Format.fixed(now - c.requestStartedAt, 2)) s old, total \(pipe.map { "\(Format.rate($0.current)), usually \(Format.rate($0.usual))" } ?? "not known"))\(isRacing(c.id) ? " (racer)" : "")"))
                }
                // With every peer silent too (a server that stopped answering), a median of 0 B/s says nothing.
                let reason = v.exploring
                    ? "\(Format.rate(v.rate)), as slow as every answer so far: a new connection may find a faster one"
                    : v.typical > 0
                    ? "\(Format.rate(v.rate)) against a typical \(Format.rate(v.typical))"
                    : "\(Format.rate(v.rate)), no byte for \(Format.fixed(max(0, now - c.lastByteAt), 1)) s"
                commands.append(.event(.redial(connection: c.id, reason: reason)))
                // Abort now and continue on a fresh connection from the exact byte reached.
                commands.append(.remove(c.id))
                _ = connections[c.id].machine.transferEnded(now: now)
                commands += redialElsewhere(c.id, rate: v.rate, now: now)
                commands.append(start(c.id, bytes: c.pos..<end(of: c.id), fresh: true, newPath: true, now: now))
                // A re-dial is no failure, but it does not restart the silence the stall timeout
                // counts: the connection's last byte is still its last byte. A server that took
                // requests and never answered them again was re-dialled every few seconds for ever
                // (a re-dial's new request had reset the clock), where the stall timeout and the
                // retries it spends end such a download.
                connections[c.id].lastByteAt = c.lastByteAt
            }
        }
        return commands
    }

    /// The total rate over the latest `window`, and the usual one: the median over every `window` of
    /// the progress ticks' samples (the last 5 s), for `SlowConnectionRule.absorbs`; nil before two
    /// windows were seen. A median, not the best: what the connections read from the kernel comes in
    /// bursts, and over 0.65 s a 100 Mbit/s link (11.9 MiB/s) read as 15.7 MiB/s at best.
    func pipeRates(window: Double) -> (current: Double, usual: Double)? {
        let samples = rateSamples
        guard let last = samples.last, let first = samples.first, last.0 - first.0 >= 2 * window else { return nil }
        var rates: [Double] = []
        var current: Double?
        var start = 0
        for end in samples.indices {
            while start + 1 < end, samples[end].0 - samples[start + 1].0 >= window { start += 1 }
            let span = samples[end].0 - samples[start].0
            guard span >= window, span <= 1.5 * window + 0.25 else { continue }
            let rate = Double(samples[end].1 - samples[start].1) / span
            rates.append(rate)
            if end == samples.count - 1 { current = rate }
        }
        guard let current, rates.count >= 2 else { return nil }
        return (current, rates.sorted()[rates.count / 2])
    }

    /// `-n auto`: every `autoInterval` seconds, add `autoStep` connections while the total rate
    /// over the last interval grew by at least 10 %; stop at the first interval that did not.
    mutating func growConnections(now: Double) -> [Command] {
        guard !auto.settled, connectionLimit < connections.count else { return [] }
        if auto.lastChange == 0 {
            auto.lastChange = now
            return []
        }
        guard now - auto.lastChange >= Self.autoInterval else { return [] }
        let rate = totalRate(window: Self.autoInterval) ?? 0
        if auto.lastRate > 0 && rate < auto.lastRate * 1.10 {
            auto.settled = true
            return [.event(.notice("using \(connectionLimit) connections (more did not raise the throughput)."))]
        }
        auto.lastRate = rate
        auto.lastChange = now
        connectionLimit = min(connections.count, connectionLimit + Self.autoStep)
        return []
    }
}
