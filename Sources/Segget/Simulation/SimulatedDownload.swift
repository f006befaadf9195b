/// One download of a `SimulatedScenario`, driven through the engine's one entry point
/// (`EngineCore.handle`) exactly as `FetchEngine` drives it: a pass (due starts, assignment), the
/// bytes each transfer received since, the losers of races removed, then the end of the pass
/// (progress ticks and slow-rule rounds when due). The clock moves in `step` seconds.
struct SimulatedDownload {
    /// What the engine's policy is compared with.
    enum Policy: String, CaseIterable, Sendable {
        /// segget as it ships.
        case segget
        /// No re-dial of slow connections.
        case noRedial = "no-redial"
        /// No work stealing (end-game races and re-dials stay).
        case noStealing = "no-stealing"
        /// aria2-like: one static range per connection; no stealing, racing or re-dial.
        case staticSplit = "static-split"

        func configure(_ c: inout Coordinator.Config) {
            switch self {
            case .segget: break
            case .noRedial: c.redialSlow = false
            case .noStealing: c.stealing = false
            case .staticSplit:
                c.redialSlow = false
                c.stealing = false
                c.endGame = false
                c.pricedSplit = false
            }
        }
    }

    struct Outcome: Sendable {
        /// Simulated seconds to the end (finished, failed, or the time limit).
        var seconds: Double
        var finished: Bool
        /// What ended a download that did not finish (nil when it ran into the time limit).
        var failure: String?
        var requests = 0
        var connectionsOpened = 0
        var redials = 0
        var retries = 0
        /// Requests the server refused for its connection limit.
        var rejected = 0
        /// The most requests the server served at once.
        var maxInFlight = 0
        var receivedBytes: Int64 = 0
        /// Requests that reached the server before the wait its last refusal asked for (`Retry-After`,
        /// the `RateLimit` reset) had passed there: the host's word broken.
        var earlyRequests = 0
        /// Bytes received beyond the file's size (cut answers, lost races): fetched twice.
        var bytesTwice: Int64 { max(0, receivedBytes - fileSize) }
        var fileSize: Int64 = 0
        /// Bytes of the chunks not received when the download ended, those of a failing tail left
        /// out: what a rerun would fetch beyond the bytes no request could get.
        var unfinishedElsewhere: Int64 = 0
    }

    static let step = 0.01

    /// One request's transfer, as the network sees it.
    private struct Transfer {
        var active = false
        var tcp = 0
        var bytes: Range<Int64> = 0..<0
        /// Next byte the server sends.
        var pos: Int64 = 0
        /// When the request reaches the server, and when its head reaches the client (infinite while
        /// it waits in the server's queue for a worker).
        var arrivesAt = 0.0
        var headAt = 0.0
        /// It holds one of the server's workers (see `SimulatedScenario.workers`).
        var served = false
        /// The probe's transfer before the engine adopted it: held at its head, nothing delivered.
        var held = false
        /// It opened a new connection.
        var dialled = false
        var firstByteAt: Double?
        /// The source it went to (0: the main URL, 1...: the mirrors), with that path's round trip.
        var source = 0
        var rtt = 0.0
        var slow = false
        var rejected = false
        var carry = 0.0
        var head = ResponseHead()
    }

    let scenario: SimulatedScenario
    private var core: EngineCore
    private var random: SimRandom
    private var tcps: [SimulatedTCP] = []
    /// Kept-alive connections no transfer uses (libcurl's connection cache), with their sources.
    private var idleTCP: [(tcp: Int, source: Int)] = []
    private var transfers: [Transfer]
    private var now = 0.0
    private var outcome = Outcome(seconds: 0, finished: false)
    /// The server's count of requests; the probe was the first.
    private var serverRequests = 1
    private var losers: [Int] = []
    /// Requests waiting for a worker, in arrival order (ids of `transfers`, or abandoned ones as -1
    /// with their arrival), and when each busy worker of an abandoned request frees up.
    private var queue: [(id: Int, arrivesAt: Double)] = []
    private var ghostWorkers: [Double] = []
    /// The download has begun (with `probe`, once the probe's head is in).
    private var begun = false
    /// Until when the host asked that no request reach it (its last refusal's wait, at the server).
    private var quietUntil = -Double.infinity
    /// When the download began, and the scenario's mirrors that have joined it, in the order they
    /// did: the engine's source `k` (1...) is mirror `joined[k - 1]`.
    private var beganAt = 0.0
    private var joined: [Int] = []

    /// Prints the engine's trace lines and the network's events (`segget-sim --describe … --trace`).
    private let tracing: Bool

    init(_ scenario: SimulatedScenario, policy: Policy = .segget, tracing: Bool = false) {
        self.tracing = tracing
        self.scenario = scenario
        var config = Coordinator.Config()
        config.totalLength = scenario.fileSize
        // The scheme tells the engine how many handshakes a new connection pays (`Coordinator.handshakeSeconds`).
        config.url = scenario.tls ? "https://simulated/file" : "http://simulated/file"
        config.stallTimeout = 20
        config.jitter = { 1 }
        if scenario.probe {
            config.probeFirstAnswer = scenario.rtt * (scenario.tls ? 3 : 2) + scenario.firstByteDelay
        }
        policy.configure(&config)
        let plan = ChunkPlan(totalLength: scenario.fileSize, chunkSize: scenario.chunkSize)
        var c = Coordinator(plan: plan, connections: scenario.connections, config: config)
        c.tracing = tracing
        core = EngineCore(ranged: c)
        random = SimRandom(seed: scenario.seed)
        transfers = Array(repeating: Transfer(), count: scenario.connections)
    }

    /// Runs the download to its end or to `timeLimit` simulated seconds.
    static func run(_ scenario: SimulatedScenario, policy: Policy = .segget, timeLimit: Double, tracing: Bool = false) -> Outcome {
        var d = SimulatedDownload(scenario, policy: policy, tracing: tracing)
        return d.run(timeLimit: timeLimit)
    }

    private mutating func run(timeLimit: Double) -> Outcome {
        outcome.fileSize = scenario.fileSize
        if scenario.probe {
            // The probe: the whole file asked on a new connection, held at its head (see `Prober`).
            serverRequests = 0
            start(0, bytes: 0..<scenario.fileSize, fresh: true)
            transfers[0].held = true
        } else {
            begin()
        }
        while now < timeLimit {
            now += Self.step
            serve()
            if !begun {
                if transfers[0].headAt <= now { begin() }
                continue
            }
            for (m, mirror) in scenario.mirrors.enumerated() where !joined.contains(m) && beganAt + mirror.joinsAt <= now {
                joined.append(m)
                // Its probe's first answer took its dial, TLS and request round trips (`MirrorJoin`).
                let probe = mirror.rtt * (scenario.tls ? 3 : 2)
                handle(.sourceAdded(FetchSource(url: "\(scenario.tls ? "https" : "http")://mirror\(m + 1).simulated/file", firstAnswer: probe)))
            }
            handle(.pass(offered: nil))
            transmit()
            for id in losers where core.connections[id].machine.isTransferring {
                endTransfer(id)
                handle(.removed(id))
            }
            losers.removeAll()
            if core.wantsStillConnecting(passStartedAt: now) { tellStillConnecting() }
            handle(.performed(passStartedAt: now))
            if let stop = core.stop {
                outcome.failure = "\(stop)"
                break
            }
            if core.isComplete {
                outcome.finished = true
                break
            }
        }
        outcome.seconds = now
        outcome.receivedBytes = core.receivedBytes
        if let c = core.ranged {
            let plan = c.plan
            let failing = scenario.failingTail.map { plan.chunk(containing: scenario.fileSize - $0.bytes) } ?? plan.chunkCount
            outcome.unfinishedElsewhere = plan.bytes { $0 < failing && !c.scheduler.finished[$0] }
        }
        return outcome
    }

    private mutating func begin() {
        begun = true
        beganAt = now
        if scenario.probe { handle(.connected(0, roundTrip: scenario.rtt, newConnection: nil)) }
        handle(.begin)
    }

    // MARK: The engine's actions

    private mutating func handle(_ event: EngineCore.Event) {
        for action in core.handle(event, now: now) {
            switch action {
            case .start(let id, let bytes, let fresh, _):
                start(id, bytes: bytes, fresh: fresh)
            case .remove(let id):
                endTransfer(id)
            case .event(.redial):
                outcome.redials += 1
            case .event(.retry):
                outcome.retries += 1
            case .crossed(_, let crossing):
                losers += crossing.losers
            case .trace(let line):
                print("[\(Format.fixed(now, 2))] \(line)")
            default:
                break
            }
        }
    }

    /// A request goes out on a kept-alive connection, or on a new one when `fresh` or none is idle.
    /// Connection 0's first start continues the probe's held transfer (no request).
    private mutating func start(_ id: Int, bytes: Range<Int64>, fresh: Bool) {
        if id == 0, transfers[0].held {
            transfers[0].held = false
            let end = transfers[0].bytes.upperBound
            handle(.continued(0, sentAt: 0, requestEnd: end))
            return
        }
        outcome.requests += 1
        let s = scenario
        let source = core.connections[id].source == 0 ? 0 : joined[core.connections[id].source - 1] + 1
        let rtt = s.rtt(ofSource: source)
        var t = Transfer(active: true, bytes: bytes, pos: bytes.lowerBound)
        t.source = source
        t.rtt = rtt
        if !fresh, let i = idleTCP.lastIndex(where: { $0.source == source }) {
            let reuse = idleTCP.remove(at: i).tcp
            t.tcp = reuse
            t.arrivesAt = max(now, tcps[reuse].readyAt) + rtt / 2
        } else {
            outcome.connectionsOpened += 1
            let handshake = rtt * (s.tls ? 2 : 1)
            tcps.append(SimulatedTCP(readyAt: now + handshake))
            t.tcp = tcps.count - 1
            t.dialled = true
            t.arrivesAt = now + handshake + rtt / 2
        }
        guard source == 0 else {
            // A mirror: healthy, every request answered after its round trip.
            t.headAt = t.arrivesAt + rtt / 2
            t.head = Self.partialContent(bytes, of: s.fileSize, closing: false)
            transfers[id] = t
            if tracing { print("[\(Format.fixed(now, 2))] request to mirror \(source) on connection \(id) for \(bytes)\(fresh ? " (fresh)" : "")") }
            return
        }
        serverRequests += 1
        if t.arrivesAt < quietUntil { outcome.earlyRequests += 1 }
        t.headAt = t.arrivesAt + s.firstByteDelay + s.rtt / 2
        let inFlight = transfers.filter { $0.active && !$0.rejected && $0.source == 0 }.count
        if let limit = s.connectionLimit, inFlight >= limit {
            t.rejected = true
            outcome.rejected += 1
            t.head = Self.rejection(s.rejection, limit: limit)
        } else if let tail = s.failingTail, let status = tail.status, bytes.lowerBound >= s.fileSize - tail.bytes {
            // A request inside the bytes the server cannot read: an error answer at once.
            t.rejected = true
            outcome.rejected += 1
            t.head = Self.failure(status: status, retryAfter: tail.retryAfter)
        } else {
            outcome.maxInFlight = max(outcome.maxInFlight, inFlight + 1)
            if let which = s.slow.which {
                switch which {
                case .everyKth(let k): t.slow = k > 0 && serverRequests % k == 0
                case .fraction(let p): t.slow = random.unit() < p
                }
            }
            if t.slow, case .firstByteDelay(let d) = s.slow.behaviour { t.headAt += d }
            t.head = Self.partialContent(bytes, of: s.fileSize, closing: s.closesConnections)
            if s.workers != nil {
                // Its head waits for a worker (`serve`).
                t.headAt = .infinity
                queue.append((id, t.arrivesAt))
            }
        }
        transfers[id] = t
        if tracing {
            print("[\(Format.fixed(now, 2))] request \(serverRequests) on connection \(id) for \(bytes)\(fresh ? " (fresh)" : "")\(t.slow ? " slow" : "")\(t.rejected ? " refused" : "")")
        }
    }

    /// As the fetch loop does before a round of the slow rule or a progress tick: the transfers
    /// whose connection's handshakes have not ended (their request has not gone out).
    private mutating func tellStillConnecting() {
        for id in transfers.indices where id < core.connections.count && transfers[id].active && transfers[id].firstByteAt == nil
            && core.connections[id].machine.isTransferring && tcps[transfers[id].tcp].readyAt > now
        {
            handle(.stillConnecting(id))
        }
    }

    /// The server's workers take the requests that have arrived, in order: a request's head leaves
    /// `firstByteDelay` after a worker takes it. An abandoned request still costs its worker that long.
    private mutating func serve() {
        guard let workers = scenario.workers else { return }
        ghostWorkers.removeAll { $0 <= now }
        var busy = ghostWorkers.count + transfers.filter { $0.active && $0.served }.count
        while busy < workers, let next = queue.first, next.arrivesAt <= now {
            queue.removeFirst()
            busy += 1
            let startsAt = max(now - Self.step, next.arrivesAt)
            if next.id < 0 {
                ghostWorkers.append(startsAt + scenario.firstByteDelay)
                continue
            }
            transfers[next.id].served = true
            let slowExtra = transfers[next.id].slow ? slowHeadDelay : 0
            transfers[next.id].headAt = startsAt + scenario.firstByteDelay + scenario.rtt / 2 + slowExtra
        }
        outcome.maxInFlight = max(outcome.maxInFlight, busy)
    }

    /// What a slow answer's late head adds (the first-byte-delay shape), 0 otherwise.
    private var slowHeadDelay: Double {
        if case .firstByteDelay(let d) = scenario.slow.behaviour { d } else { 0 }
    }

    private static func partialContent(_ bytes: Range<Int64>, of size: Int64, closing: Bool) -> ResponseHead {
        var h = ResponseHead()
        h.append(line: "HTTP/1.1 206 Partial Content\r\n")
        h.append(line: Substring("Content-Range: bytes \(bytes.lowerBound)-\(bytes.upperBound - 1)/\(size)\r\n"))
        h.append(line: Substring("Content-Length: \(bytes.count)\r\n"))
        if closing { h.append(line: "Connection: close\r\n") }
        h.append(line: "\r\n")
        return h
    }

    private static func rejection(_ r: SimulatedScenario.Rejection, limit: Int) -> ResponseHead {
        switch r {
        case .tooManyRequests(let after): failure(status: 429, retryAfter: after)
        case .rateLimitFields: failure(status: 429, fields: ["RateLimit-Policy: \"conc\";q=\(limit);w=1", "RateLimit: \"conc\";r=0;t=1"])
        case .serviceUnavailable: failure(status: 503)
        }
    }

    /// An error answer with a short body, which the engine aborts: a refusal past the host's limit
    /// (`rejection`), or a failing tail's (`SimulatedScenario.FailingTail`).
    private static func failure(status: Int, retryAfter: Int? = nil, fields: [String] = []) -> ResponseHead {
        let reason = [429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"][status] ?? "Failed"
        var h = ResponseHead()
        h.append(line: Substring("HTTP/1.1 \(status) \(reason)\r\n"))
        if let retryAfter { h.append(line: Substring("Retry-After: \(retryAfter)\r\n")) }
        for field in fields { h.append(line: Substring(field + "\r\n")) }
        h.append(line: "Content-Length: 18\r\n")
        h.append(line: "\r\n")
        return h
    }

    /// Ends connection `id`'s transfer; an aborted one closes its TCP connection, a complete one
    /// keeps it alive for the next request (unless the server closes every connection). One still in
    /// the server's queue leaves its place to a request that costs a worker its think time.
    private mutating func endTransfer(_ id: Int, keepAlive: Bool = false) {
        guard transfers[id].active else { return }
        transfers[id].active = false
        transfers[id].served = false
        if let i = queue.firstIndex(where: { $0.id == id }) { queue[i].id = -1 }
        if keepAlive && (transfers[id].source > 0 || !scenario.closesConnections) {
            idleTCP.append((transfers[id].tcp, transfers[id].source))
        }
    }

    // MARK: The network

    /// What the slow behaviour lets transfer `t` send now, bytes per second.
    private func slowRate(_ t: Transfer) -> Double {
        guard t.slow, t.source == 0 else { return .infinity }
        let sent = t.pos - t.bytes.lowerBound
        switch scenario.slow.behaviour {
        case .trickle(let rate, let after): return sent >= after ? rate : .infinity
        case .silent(let after): return sent >= after ? 0 : .infinity
        case .slowdown(let seconds, let rate): return now - (t.firstByteAt ?? now) >= seconds ? rate : .infinity
        case .firstByteDelay, .cut: return .infinity
        }
    }

    /// Where a cut answer ends (`SlowShape.Behaviour.cut`), as a byte of the file; nil for any other.
    /// A failing tail (`SimulatedScenario.FailingTail`) closes an answer where it begins.
    private func cutEnd(_ t: Transfer) -> Int64? {
        guard t.source == 0 else { return nil }
        var end: Int64?
        if t.slow, case .cut(let after) = scenario.slow.behaviour { end = t.bytes.lowerBound + after }
        if let tail = scenario.failingTail, t.bytes.upperBound > scenario.fileSize - tail.bytes {
            end = min(end ?? .max, max(t.bytes.lowerBound, scenario.fileSize - tail.bytes))
        }
        return end
    }

    /// One step of the network: every transfer past its head gets its share of the bottleneck.
    private mutating func transmit() {
        let s = scenario
        let dt = Self.step
        var want = [Double](repeating: 0, count: transfers.count)
        var total = 0.0
        for id in transfers.indices where transfers[id].active && !transfers[id].rejected && !transfers[id].held && now >= transfers[id].headAt {
            let t = transfers[id]
            guard tcps[t.tcp].readyAt <= now else { continue }
            want[id] = min(tcps[t.tcp].offered(rtt: t.rtt), s.perRequestCap(ofSource: t.source), slowRate(t))
            total += want[id]
        }
        let full = total > s.bottleneck
        let scale = full ? s.bottleneck / total : 1
        for id in transfers.indices where transfers[id].active && !transfers[id].held {
            if transfers[id].rejected {
                if now >= transfers[id].headAt { deliverRejection(id) }
                continue
            }
            guard now >= transfers[id].headAt else { continue }
            let rate = want[id] * scale
            transfers[id].carry += rate * dt
            var n = Int64(transfers[id].carry)
            transfers[id].carry -= Double(n)
            let cut = cutEnd(transfers[id])
            n = min(n, (cut.map { min($0, transfers[id].bytes.upperBound) } ?? transfers[id].bytes.upperBound) - transfers[id].pos)
            if let cut, transfers[id].pos >= cut {
                // Closed before another byte (a failing tail's first byte): the head, then the end.
                closeShort(id)
                continue
            }
            let tcp = transfers[id].tcp
            tcps[tcp].advance(dt: dt, bytes: Double(n), now: now, rtt: transfers[id].rtt, loss: s.loss, full: full, random: &random)
            if n > 0 { deliver(id, Int(n)) }
        }
    }

    /// `n` body bytes reach the engine (the head with the first of them).
    private mutating func deliver(_ id: Int, _ n: Int) {
        if transfers[id].firstByteAt == nil {
            transfers[id].firstByteAt = now
            handle(.connected(id, roundTrip: transfers[id].rtt, newConnection: transfers[id].dialled))
        }
        transfers[id].pos += Int64(n)
        let actions = core.handle(.body(id, count: n, head: transfers[id].head, budgetAllows: true), now: now)
        for case .crossed(_, let crossing) in actions { losers += crossing.losers }
        let c = core.connections[id]
        if actions.last == .body(.abort) {
            endTransfer(id)
            handle(.ended(id, .transient("the write callback refused the bytes"), head: transfers[id].head))
        } else if transfers[id].pos >= transfers[id].bytes.upperBound {
            endTransfer(id, keepAlive: true)
            handle(.ended(id, .ok, head: transfers[id].head))
        } else if c.machine.stopReason != nil {
            // libcurl hands over the next bytes, which the callback refuses.
            endTransfer(id)
            handle(.ended(id, .transient("the write callback refused the bytes"), head: transfers[id].head))
        } else if let cut = cutEnd(transfers[id]), transfers[id].pos >= cut {
            // The server closes the connection short of the answer's end.
            endTransfer(id)
            handle(.ended(id, .partial, head: transfers[id].head))
        }
    }

    /// The server closes connection `id` where its answer is cut, no body byte left to send.
    private mutating func closeShort(_ id: Int) {
        if transfers[id].firstByteAt == nil {
            transfers[id].firstByteAt = now
            handle(.connected(id, roundTrip: transfers[id].rtt, newConnection: transfers[id].dialled))
        }
        endTransfer(id)
        handle(.ended(id, .partial, head: transfers[id].head))
    }

    /// A refused request's head and short body arrive; the engine refuses them. The server's refusal
    /// left it half a round trip ago, asking for its wait from then.
    private mutating func deliverRejection(_ id: Int) {
        let head = transfers[id].head
        handle(.connected(id, roundTrip: scenario.rtt, newConnection: transfers[id].dialled))
        if let wait = head.retryAfter ?? head.rateLimitReset {
            quietUntil = max(quietUntil, now - scenario.rtt / 2 + wait)
        }
        _ = core.handle(.body(id, count: 18, head: head, budgetAllows: true), now: now)
        // The refused body aborts the transfer, which closes its connection.
        endTransfer(id)
        handle(.ended(id, .transient("the write callback refused the bytes"), head: head))
    }
}
