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
    }

    static let step = 0.01

    /// One request's transfer, as the network sees it.
    private struct Transfer {
        var active = false
        var tcp = 0
        var bytes: Range<Int64> = 0..<0
        /// Next byte the server sends.
        var pos: Int64 = 0
        var headAt = 0.0
        var firstByteAt: Double?
        var slow = false
        var rejected = false
        var carry = 0.0
        var head = ResponseHead()
    }

    let scenario: SimulatedScenario
    private var core: EngineCore
    private var random: SimRandom
    private var tcps: [SimulatedTCP] = []
    /// Kept-alive connections no transfer uses (libcurl's connection cache).
    private var idleTCP: [Int] = []
    private var transfers: [Transfer]
    private var now = 0.0
    private var outcome = Outcome(seconds: 0, finished: false)
    /// The server's count of requests; the probe was the first.
    private var serverRequests = 1
    private var losers: [Int] = []

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
        handle(.begin)
        while now < timeLimit {
            now += Self.step
            handle(.pass(offered: nil))
            transmit()
            for id in losers where core.connections[id].machine.isTransferring {
                endTransfer(id)
                handle(.removed(id))
            }
            losers.removeAll()
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
        return outcome
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
    private mutating func start(_ id: Int, bytes: Range<Int64>, fresh: Bool) {
        outcome.requests += 1
        serverRequests += 1
        let s = scenario
        var t = Transfer(active: true, bytes: bytes, pos: bytes.lowerBound)
        if !fresh, let reuse = idleTCP.popLast() {
            t.tcp = reuse
            t.headAt = max(now, tcps[reuse].readyAt) + s.rtt
        } else {
            outcome.connectionsOpened += 1
            let handshake = s.rtt * (s.tls ? 2 : 1)
            tcps.append(SimulatedTCP(readyAt: now + handshake))
            t.tcp = tcps.count - 1
            t.headAt = now + handshake + s.rtt
        }
        let inFlight = transfers.filter { $0.active && !$0.rejected }.count
        if let limit = s.connectionLimit, inFlight >= limit {
            t.rejected = true
            outcome.rejected += 1
            t.head = Self.rejection(s.rejection, limit: limit)
        } else {
            outcome.maxInFlight = max(outcome.maxInFlight, inFlight + 1)
            if let which = s.slow.which {
                switch which {
                case .everyKth(let k): t.slow = k > 0 && serverRequests % k == 0
                case .fraction(let p): t.slow = random.unit() < p
                }
            }
            if t.slow, case .firstByteDelay(let d) = s.slow.behaviour { t.headAt += d }
            var h = ResponseHead()
            h.append(line: "HTTP/1.1 206 Partial Content\r\n")
            h.append(line: Substring("Content-Range: bytes \(bytes.lowerBound)-\(bytes.upperBound - 1)/\(s.fileSize)\r\n"))
            h.append(line: Substring("Content-Length: \(bytes.count)\r\n"))
            h.append(line: "\r\n")
            t.head = h
        }
        transfers[id] = t
        if tracing {
            print("[\(Format.fixed(now, 2))] request \(serverRequests) on connection \(id) for \(bytes)\(fresh ? " (fresh)" : "")\(t.slow ? " slow" : "")\(t.rejected ? " refused" : "")")
        }
    }

    private static func rejection(_ r: SimulatedScenario.Rejection, limit: Int) -> ResponseHead {
        var h = ResponseHead()
        switch r {
        case .tooManyRequests(let after):
            h.append(line: "HTTP/1.1 429 Too Many Requests\r\n")
            if let after { h.append(line: Substring("Retry-After: \(after)\r\n")) }
        case .rateLimitFields:
            h.append(line: "HTTP/1.1 429 Too Many Requests\r\n")
            h.append(line: Substring("RateLimit-Policy: \"conc\";q=\(limit);w=1\r\n"))
            h.append(line: "RateLimit: \"conc\";r=0;t=1\r\n")
        case .serviceUnavailable:
            h.append(line: "HTTP/1.1 503 Service Unavailable\r\n")
        }
        h.append(line: "Content-Length: 18\r\n")
        h.append(line: "\r\n")
        return h
    }

    /// Ends connection `id`'s transfer; an aborted one closes its TCP connection, a complete one
    /// keeps it alive for the next request.
    private mutating func endTransfer(_ id: Int, keepAlive: Bool = false) {
        guard transfers[id].active else { return }
        transfers[id].active = false
        if keepAlive { idleTCP.append(transfers[id].tcp) }
    }

    // MARK: The network

    /// What the slow behaviour lets transfer `t` send now, bytes per second.
    private func slowRate(_ t: Transfer) -> Double {
        guard t.slow else { return .infinity }
        let sent = t.pos - t.bytes.lowerBound
        switch scenario.slow.behaviour {
        case .trickle(let rate, let after): return sent >= after ? rate : .infinity
        case .silent(let after): return sent >= after ? 0 : .infinity
        case .slowdown(let seconds, let rate): return now - (t.firstByteAt ?? now) >= seconds ? rate : .infinity
        case .firstByteDelay: return .infinity
        }
    }

    /// One step of the network: every transfer past its head gets its share of the bottleneck.
    private mutating func transmit() {
        let s = scenario
        let dt = Self.step
        var want = [Double](repeating: 0, count: transfers.count)
        var total = 0.0
        for id in transfers.indices where transfers[id].active && !transfers[id].rejected && now >= transfers[id].headAt {
            let t = transfers[id]
            guard tcps[t.tcp].readyAt <= now else { continue }
            want[id] = min(tcps[t.tcp].offered(rtt: s.rtt), s.perRequestCap, slowRate(t))
            total += want[id]
        }
        let full = total > s.bottleneck
        let scale = full ? s.bottleneck / total : 1
        for id in transfers.indices where transfers[id].active {
            if transfers[id].rejected {
                if now >= transfers[id].headAt { deliverRejection(id) }
                continue
            }
            guard now >= transfers[id].headAt else { continue }
            let rate = want[id] * scale
            transfers[id].carry += rate * dt
            var n = Int64(transfers[id].carry)
            transfers[id].carry -= Double(n)
            n = min(n, transfers[id].bytes.upperBound - transfers[id].pos)
            let tcp = transfers[id].tcp
            tcps[tcp].advance(dt: dt, bytes: Double(n), now: now, rtt: s.rtt, loss: s.loss, full: full, random: &random)
            if n > 0 { deliver(id, Int(n)) }
        }
    }

    /// `n` body bytes reach the engine (the head with the first of them).
    private mutating func deliver(_ id: Int, _ n: Int) {
        if transfers[id].firstByteAt == nil { transfers[id].firstByteAt = now }
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
        }
    }

    /// A refused request's head and short body arrive; the engine refuses them.
    private mutating func deliverRejection(_ id: Int) {
        let head = transfers[id].head
        _ = core.handle(.body(id, count: 18, head: head, budgetAllows: true), now: now)
        // The refused body aborts the transfer, which closes its connection.
        endTransfer(id)
        handle(.ended(id, .transient("the write callback refused the bytes"), head: head))
    }
}
