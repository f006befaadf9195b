import Glibc

/// The families of simulated scenarios the engine's policy is proven over, each a seeded generator
/// of `SimulatedScenario`s and a bound on finish time ÷ ideal that no scenario of it may exceed.
struct SimulationFamily: Sendable {
    let name: String
    let summary: String
    /// The most finish time ÷ ideal any scenario of the family may take with segget's policy.
    let bound: Double
    /// The most requests (the probe's included where it is simulated) a scenario may cost its server
    /// with segget's policy: what the download spent, bounded as its time is.
    var requestBound: @Sendable (SimulatedScenario) -> Int = { 4 * $0.connections + Int($0.fileSize >> 20) / 2 }
    /// Every scenario of the family must fail (a file some bytes of which no request can get): within
    /// its bound, and with every chunk that could be received received. A scenario that finishes or
    /// hangs, or leaves other bytes unfinished, is over the bound.
    var expectsFailure = false
    let make: @Sendable (inout SimRandom, UInt64) -> SimulatedScenario

    init(name: String, summary: String, bound: Double, expectsFailure: Bool = false, requestBound: (@Sendable (SimulatedScenario) -> Int)? = nil,
         make: @escaping @Sendable (inout SimRandom, UInt64) -> SimulatedScenario) {
        self.name = name
        self.summary = summary
        self.bound = bound
        self.expectsFailure = expectsFailure
        if let requestBound { self.requestBound = requestBound }
        self.make = make
    }

    func scenario(seed: UInt64) -> SimulatedScenario {
        var r = SimRandom(seed: seed &* 7919 &+ UInt64(truncatingIfNeeded: name.hashValueStable))
        var s = make(&r, seed)
        s.seed = seed
        return s
    }
}

extension String {
    /// A hash that is the same in every process (Swift's `hashValue` is seeded per process).
    var hashValueStable: UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in utf8 {
            h ^= UInt64(b)
            h = h &* 0x100_0000_01b3
        }
        return h
    }
}

extension SimRandom {
    mutating func pick<T>(_ xs: [T]) -> T { xs[Int(next() % UInt64(xs.count))] }
    mutating func between(_ a: Double, _ b: Double) -> Double { a + (b - a) * unit() }
    /// Log-uniform between `a` and `b`.
    mutating func logBetween(_ a: Double, _ b: Double) -> Double { exp(between(log(a), log(b))) }
}

/// The ideal a scenario's finish time is measured against, and why it is a fair bound.
enum SimulationIdeal {
    static let decisionRound = Coordinator.slowJudgeInterval

    /// The round trips before the first body byte (handshake, TLS, request) plus the file at the best
    /// steady rate the network allows `min(n, limit)` healthy connections: each at the lesser of the
    /// server's per-response cap and the steady rate of the model's TCP at this loss (a saw-tooth
    /// between 0.7 W and W that gains a segment per round trip and loses one packet in 1/p), together
    /// at most the bottleneck. Slow start, loss recovery, slow answers and refusals only add to it: a
    /// policy reaches it only with every connection healthy from its first round trip.
    ///
    /// One slow-rule round (`decisionRound`) is added: the engine decides every 50 ms, so a download
    /// of a few milliseconds is measured on the clock of its decisions, not on a ratio of milliseconds.
    static func seconds(_ s: SimulatedScenario) -> Double {
        let setup = s.rtt * (s.tls ? 3 : 2) + s.firstByteDelay + decisionRound
        let n = Double(min(s.connections, s.connectionLimit ?? s.connections, s.workers ?? s.connections))
        guard s.mirrors.isEmpty else { return setup + mirrorsSeconds(s, connections: n) }
        let rate = min(s.bottleneck, n * perConnection(s, source: 0))
        return setup + cutSeconds(s, connections: n) + Double(s.fileSize) / rate + failingTailSeconds(s)
    }

    /// A failing tail (`failing-tail`): the waits the failing chunk's retries keep before the download
    /// may give up, each what the server asked (`Retry-After`) or else `RetryPolicy`'s backoff for the
    /// attempt. The first answer to reach the tail starts before it and is cut where it begins; its
    /// continuation goes out at once as attempt 1 (`CutContinuation`), so the waits are those of
    /// attempts 2 to `retries` (2, 4, 8 and 16 s; four of the server's `Retry-After`). The ideal counts
    /// the file's other bytes as received meanwhile.
    static func failingTailSeconds(_ s: SimulatedScenario) -> Double {
        guard let tail = s.failingTail else { return 0 }
        let c = Coordinator.Config()
        guard c.retries > 1 else { return 0 }
        return (2...c.retries).reduce(0.0) { sum, attempt in
            sum + (tail.retryAfter.map(Double.init) ?? min(RetryPolicy.maxBackoff, c.retryWait * Double(1 << (attempt - 1))))
        }
    }

    /// The best steady rate of one healthy connection to source `source` (0: the main URL).
    static func perConnection(_ s: SimulatedScenario, source: Int) -> Double {
        let rtt = s.rtt(ofSource: source)
        var perConnection = s.perRequestCap(ofSource: source)
        if s.loss > 0 {
            let beta = 0.7
            let peak = (2 / ((1 - beta * beta) * s.loss)).squareRoot()
            let window = min((1 + beta) / 2 * peak, SimulatedTCP.maxWindow)
            perConnection = min(perConnection, window * SimulatedTCP.segment / rtt)
        } else {
            perConnection = min(perConnection, SimulatedTCP.maxWindow * SimulatedTCP.segment / rtt)
        }
        return perConnection
    }

    /// With mirrors (`mirrors`): from the main URL's first byte, the file at the best rate the sources
    /// that have joined allow, every connection on the fastest of them per connection, together at
    /// most the bottleneck. A mirror serves from its join plus one round trip of its path (a request's;
    /// the dial that a connection moved to it pays is left out). No policy does better.
    static func mirrorsSeconds(_ s: SimulatedScenario, connections n: Double) -> Double {
        var joins: [(at: Double, perConnection: Double)] = [(0, perConnection(s, source: 0))]
        for (k, m) in s.mirrors.enumerated() { joins.append((m.joinsAt + m.rtt, perConnection(s, source: k + 1))) }
        joins.sort { $0.at < $1.at }
        var left = Double(s.fileSize)
        var best = 0.0
        for (i, j) in joins.enumerated() {
            best = max(best, j.perConnection)
            let rate = min(s.bottleneck, n * best)
            let until = i + 1 < joins.count ? joins[i + 1].at : Double.infinity
            if left <= rate * (until - j.at) { return j.at + left / rate }
            left -= rate * (until - j.at)
        }
        return .infinity
    }

    /// Answers the server closes after `after` bytes (`cut-answers`): each cut costs a new request on
    /// a new connection, its dial's and its request's round trips, in a row on each of the `n`
    /// connections. A lower bound: the new connection's slow start is not counted.
    static func cutSeconds(_ s: SimulatedScenario, connections n: Double) -> Double {
        guard case .cut(let after) = s.slow.behaviour, case .everyKth(let k) = s.slow.which, k > 0, after > 0 else { return 0 }
        let cuts = Double(s.fileSize) / Double(after) / Double(k) / n
        return cuts * s.rtt * (s.tls ? 3 : 2)
    }
}

extension SimulationFamily {
    static let MiB: Int64 = 1 << 20

    /// Every family, in report order.
    static let all: [SimulationFamily] = [
        healthyLAN, capped, wanLoss, wanBottleneck, trickleEveryKth, trickleFraction, slowdown, silence, firstByteDelay,
        connectionLimit, manyConnections, firstByteWorkers, oneWorker, connectionClose, refusalRetryAfter, cutAnswers,
        mirrors, failingTail,
    ]

    static func named(_ name: String) -> SimulationFamily? { all.first { $0.name == name } }

    /// A fast server on a short path: no loss, no caps.
    static let healthyLAN = SimulationFamily(name: "healthy-lan", summary: "fast server, 0.2-2 ms, no loss", bound: 2) { r, _ in
        SimulatedScenario(
            fileSize: r.pick([4, 16, 64, 256]) * MiB, connections: r.pick([1, 2, 4, 8, 16]),
            rtt: r.logBetween(0.0002, 0.002), bottleneck: r.logBetween(50e6, 1e9))
    }

    /// A server that caps each response (nginx `limit_rate`), near or far.
    static let capped = SimulationFamily(name: "capped", summary: "2-16 MiB/s per response, 1-40 ms", bound: 2) { r, _ in
        SimulatedScenario(
            fileSize: r.pick([16, 64, 256, 512]) * MiB, connections: r.pick([2, 4, 8, 16]),
            rtt: r.logBetween(0.001, 0.04), perRequestCap: Double(r.pick([2, 4, 8, 16])) * Double(MiB))
    }

    /// Long fat pipes with random loss: loss recovery must not look like a slow server.
    static let wanLoss = SimulationFamily(name: "wan-loss", summary: "40-200 ms, 0-0.5 % loss, 25-100 MB/s", bound: 3) { r, _ in
        SimulatedScenario(
            fileSize: r.pick([64, 256]) * MiB, connections: r.pick([4, 8, 16]),
            rtt: r.between(0.04, 0.2), loss: r.pick([0, 0.0001, 0.001, 0.002, 0.005]),
            bottleneck: r.between(25e6, 100e6), tls: r.unit() < 0.5)
    }

    /// Long paths whose bottleneck the connections fill (a home line of 40-160 Mbit/s): a connection
    /// that slows after a loss gives its share to the others, so the download goes no faster for a
    /// new connection in its place (exploratory run 9: 100 Mbit/s, 80 ms, 0.1 %: 28-48 requests and
    /// up to 17 re-dials for 256 MiB where aria2c made 9 requests in the same time).
    static let wanBottleneck = SimulationFamily(name: "wan-bottleneck", summary: "40-200 ms, 0-0.2 % loss, 5-20 MB/s, full", bound: 3) { r, _ in
        SimulatedScenario(
            fileSize: r.pick([64, 256]) * MiB, connections: r.pick([4, 8, 16]),
            rtt: r.between(0.04, 0.2), loss: r.pick([0, 0.0001, 0.001, 0.002]),
            bottleneck: r.between(5e6, 20e6), tls: r.unit() < 0.5)
    }

    /// Servers of every speed that trickle every k-th answer, from its first byte or after a while.
    static let trickleEveryKth = SimulationFamily(name: "trickle-every-kth", summary: "every 2nd-5th answer trickles (1 B/s-64 KiB/s)", bound: 12, requestBound: { 8 * $0.connections + Int($0.fileSize >> 20) }) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([2, 8, 24, 64]) * MiB, connections: r.pick([2, 4, 8, 16]), rtt: r.logBetween(0.0005, 0.05),
            bottleneck: r.logBetween(30e6, 1e9), perRequestCap: r.unit() < 0.5 ? .infinity : Double(r.pick([4, 16])) * Double(MiB))
        s.slow = .init(which: .everyKth(r.pick([2, 3, 4, 5])), behaviour: .trickle(rate: r.pick([1, 1024, 65536]), after: r.pick([0, 256 << 10])))
        return s
    }

    /// A random share of answers trickles.
    static let trickleFraction = SimulationFamily(name: "trickle-fraction", summary: "10-50 % of answers trickle", bound: 32, requestBound: { 8 * $0.connections + Int($0.fileSize >> 20) }) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([8, 24, 64, 256]) * MiB, connections: r.pick([4, 8, 16]), rtt: r.logBetween(0.0005, 0.08),
            bottleneck: r.logBetween(30e6, 1e9))
        s.slow = .init(which: .fraction(r.between(0.1, 0.5)), behaviour: .trickle(rate: r.pick([1, 4096]), after: r.pick([0, 64 << 10, 1 << 20])))
        return s
    }

    /// Answers that start well and slow down mid-body.
    static let slowdown = SimulationFamily(name: "slowdown", summary: "answers slow to 1 B/s-32 KiB/s after 0.05-1 s", bound: 6) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([8, 24, 64, 256]) * MiB, connections: r.pick([4, 8]), rtt: r.logBetween(0.001, 0.05),
            perRequestCap: Double(r.pick([4, 8, 16])) * Double(MiB))
        s.slow = .init(which: r.unit() < 0.5 ? .everyKth(r.pick([3, 4])) : .fraction(0.25),
                       behaviour: .slowdown(seconds: r.between(0.05, 1), rate: r.pick([1, 32768])))
        return s
    }

    /// Answers that go silent after some bytes, the connection held open.
    static let silence = SimulationFamily(name: "silence", summary: "answers go silent after 0-1 MiB", bound: 8, requestBound: { 8 * $0.connections + Int($0.fileSize >> 20) }) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([8, 24, 64]) * MiB, connections: r.pick([4, 8, 16]), rtt: r.logBetween(0.0005, 0.05),
            bottleneck: r.logBetween(30e6, 500e6))
        s.slow = .init(which: .everyKth(r.pick([3, 5, 7])), behaviour: .silent(after: r.pick([0, 128 << 10, 1 << 20])))
        return s
    }

    /// Some answers' heads come late.
    static let firstByteDelay = SimulationFamily(name: "first-byte-delay", summary: "some heads come 0.5-5 s late", bound: 12, requestBound: { 8 * $0.connections + Int($0.fileSize >> 20) }) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([8, 64, 256]) * MiB, connections: r.pick([4, 8]), rtt: r.logBetween(0.001, 0.1),
            bottleneck: r.logBetween(30e6, 300e6))
        s.slow = .init(which: .fraction(r.between(0.1, 0.3)), behaviour: .firstByteDelay(seconds: r.between(0.5, 5)))
        return s
    }

    /// A host that allows a few requests in flight per client and refuses the rest.
    /// The bound was 3 until the host's `Retry-After` held every request (issue 37): a 16 MiB download
    /// of a fifth of a second then waits the second the host asked for.
    static let connectionLimit = SimulationFamily(name: "connection-limit", summary: "1-6 requests allowed, 429/503 beyond", bound: 6) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([16, 64, 192]) * MiB, connections: r.pick([4, 8, 16]), rtt: r.logBetween(0.0005, 0.08),
            perRequestCap: Double(r.pick([2, 8, 16])) * Double(MiB))
        s.connectionLimit = r.pick([1, 2, 3, 4, 6])
        s.rejection = r.pick([.tooManyRequests(retryAfter: 1), .tooManyRequests(retryAfter: nil), .rateLimitFields, .serviceUnavailable])
        return s
    }

    /// Many connections, small and large files.
    static let manyConnections = SimulationFamily(name: "many-connections", summary: "32-64 connections", bound: 5, requestBound: { 5 * $0.connections + Int($0.fileSize >> 20) }) { r, _ in
        SimulatedScenario(
            fileSize: r.pick([8, 64, 512]) * MiB, connections: r.pick([32, 64]), rtt: r.logBetween(0.0005, 0.1),
            loss: r.pick([0, 0.001]), bottleneck: r.logBetween(50e6, 1e9), perRequestCap: r.pick([.infinity, 4.0 * Double(MiB)]))
    }

    // MARK: Requests that cost (issue 37)

    /// Object stores and application servers with many workers: every head comes 50, 200 or 500 ms
    /// after its request reaches the server, each answer capped at 16 MiB/s. At most 2 n requests.
    static let firstByteWorkers = SimulationFamily(
        name: "first-byte-workers", summary: "50-500 ms before every head, many workers, 16 MiB/s per answer", bound: 2.6,
        requestBound: { 2 * $0.connections }
    ) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([32, 128, 256]) * MiB, connections: r.pick([4, 8, 16]), rtt: r.logBetween(0.0002, 0.02),
            perRequestCap: 16 * Double(MiB), tls: r.unit() < 0.3)
        s.firstByteDelay = r.pick([0.05, 0.2, 0.5])
        s.closesConnections = r.unit() < 0.5
        s.probe = true
        return s
    }

    /// An origin that answers one request at a time (a synchronous worker, an emulator, a busy origin
    /// behind a cache miss), 0.1-0.25 s before each head, kept alive or closing every connection, fast
    /// or capped. Extra connections buy nothing there: the ideal is one request's.
    static let oneWorker = SimulationFamily(
        name: "one-worker", summary: "one request at a time, 0.1-0.25 s before each head", bound: 1.5,
        requestBound: { $0.connections + 4 }
    ) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([64, 128, 256]) * MiB, connections: r.pick([4, 8, 16]), rtt: r.logBetween(0.0002, 0.01),
            bottleneck: r.logBetween(300e6, 2e9), perRequestCap: r.pick([.infinity, .infinity, 64 * Double(MiB), 200 * Double(MiB)]))
        s.firstByteDelay = r.between(0.1, 0.25)
        s.workers = 1
        s.closesConnections = r.unit() < 0.5
        s.probe = true
        return s
    }

    /// Healthy and capped servers that close the connection after every answer, near and far: every
    /// request pays its handshakes.
    static let connectionClose = SimulationFamily(
        name: "connection-close", summary: "Connection: close on every answer, 0.5-80 ms, capped or not", bound: 6
    ) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([16, 64, 256]) * MiB, connections: r.pick([4, 8, 16]), rtt: r.logBetween(0.0005, 0.08),
            bottleneck: r.logBetween(50e6, 1e9), perRequestCap: r.pick([.infinity, 4 * Double(MiB), 16 * Double(MiB)]), tls: r.unit() < 0.5)
        s.closesConnections = true
        s.probe = true
        return s
    }

    /// A host that refuses a request past 3 (or 2-4) in flight with 429 and `Retry-After: 1`, or with
    /// the `RateLimit` fields only, 8 MiB/s per answer: the download must settle at the limit with few
    /// refusals, and send nothing before the host's wait is over (`Outcome.earlyRequests`).
    static let refusalRetryAfter = SimulationFamily(
        name: "refusal-retry-after", summary: "429 past 2-4 in flight, Retry-After 1 s or RateLimit fields, 8 MiB/s", bound: 2.5,
        requestBound: { 3 * $0.connections + 12 }
    ) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([64, 192]) * MiB, connections: r.pick([8, 16]), rtt: r.logBetween(0.0005, 0.04),
            perRequestCap: 8 * Double(MiB))
        s.connectionLimit = r.pick([3, 3, 2, 4])
        s.rejection = r.pick([.tooManyRequests(retryAfter: 1), .rateLimitFields])
        s.probe = true
        return s
    }

    /// A server (or a proxy before it) that closes every answer, or every third, after 0.5-4 MiB:
    /// each cut range is continued by a new request on a new connection, which pays its handshakes
    /// and slow start again; the download must go on at once from the byte each reached, with a
    /// request per cut and not more (before `CutContinuation`: a backoff of 1-3 s after each cut, and
    /// racers asked for the same chunk again and again). The ideal counts the cuts' new
    /// requests' round trips (`SimulationIdeal.cutSeconds`), only their slow starts are beyond it.
    static let cutAnswers = SimulationFamily(
        name: "cut-answers", summary: "every answer (or every 3rd) closed after 0.5-4 MiB, 0.5-40 ms, TLS or not", bound: 8,
        requestBound: { s in
            // Every family's allowance, and a request per cut and a quarter more.
            let base = 4 * s.connections + Int(s.fileSize >> 20) / 2
            guard case .cut(let after) = s.slow.behaviour, case .everyKth(let k) = s.slow.which, k > 0 else { return base }
            return base + Int(s.fileSize / after) / k * 5 / 4
        }
    ) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([16, 64, 128]) * MiB, connections: r.pick([4, 8, 16]), rtt: r.logBetween(0.0005, 0.04),
            bottleneck: r.logBetween(50e6, 1e9), perRequestCap: r.pick([.infinity, 16 * Double(MiB)]), tls: r.unit() < 0.5)
        s.slow = .init(which: .everyKth(r.pick([1, 1, 3])), behaviour: .cut(after: r.pick([512 << 10, 1 << 20, 2 << 20, 4 << 20])))
        s.probe = true
        return s
    }

    // MARK: Mirrors

    /// The main URL and 1-3 mirrors, each on its own path (0.5-80 ms) and capped per answer (256 KiB/s
    /// to 16 MiB/s) or not, joining the running download as their probes agree: after their probe's
    /// round trips, some 0.2 or 1 s later (a slow server), one in five never (a probe that never
    /// answers). The main URL may be the slowest source or the fastest; the ideal
    /// (`SimulationIdeal.mirrorsSeconds`) puts every connection on the fastest source joined so far.
    static let mirrors = SimulationFamily(
        name: "mirrors", summary: "1-3 mirrors joining after 0-1 s (or never), 0.5-80 ms, 256 KiB/s-16 MiB/s per answer or not", bound: 8,
        requestBound: { 4 * $0.connections + Int($0.fileSize >> 20) / 2 + 2 * $0.connections * $0.mirrors.count }
    ) { r, _ in
        let caps: [Double] = [.infinity, .infinity, 256 * 1024, Double(MiB), 4 * Double(MiB), 16 * Double(MiB)]
        var s = SimulatedScenario(
            fileSize: r.pick([16, 64, 256]) * MiB, connections: r.pick([4, 8, 16]), rtt: r.logBetween(0.0005, 0.08),
            bottleneck: r.logBetween(30e6, 1e9), perRequestCap: r.pick(caps), tls: r.unit() < 0.5)
        s.probe = true
        let tls = s.tls
        s.mirrors = (0..<r.pick([1, 1, 2, 3])).map { _ in
            let rtt = r.logBetween(0.0005, 0.08)
            let late = r.unit() < 0.2 ? 1e9 : r.pick([0, 0, 0.2, 1.0])
            return SimulatedScenario.Mirror(rtt: rtt, perRequestCap: r.pick(caps), joinsAt: rtt * (tls ? 3 : 2) + late)
        }
        return s
    }

    // MARK: A file that cannot be finished

    /// A server that cannot serve the file's last 1000 bytes to 3 MiB (storage that fails to read
    /// them): answers that reach them are closed where they begin, requests inside them get 500, 503
    /// or 429 (with `Retry-After: 10` or `3`, or none), or are closed before a byte. The download must
    /// fail with every other chunk received, and without a storm of requests: at most two a retry of
    /// each failing chunk (its owner's and one race's, `RaceHolds`) beyond every family's allowance
    /// (exploratory testing, 7 December: 216-556 requests for a 3 MB file before 9701751). Its ideal
    /// counts the retries' waits (`SimulationIdeal.failingTailSeconds`). The bound, 2, is from the
    /// evidence: a 503 with `Retry-After` teaches the host's limit (the requests in flight) and holds
    /// every new request for its wait, so where two chunks fail they take turns at a limit of 1, a
    /// wait each (1.75 x at most over 1,000 scenarios).
    static let failingTail = SimulationFamily(
        name: "failing-tail", summary: "the last 1000 B-3 MiB fail every request (closed, 500, 503/429 with or without Retry-After)", bound: 2,
        expectsFailure: true,
        requestBound: { s in
            // Every family's allowance, and for each failing chunk a connection holds (each retries
            // on its own), its owner's attempts and a race beside each.
            let chunks = s.failingTail.map { Int(($0.bytes + s.chunkSize - 1) / s.chunkSize) + 1 } ?? 0
            return 4 * s.connections + Int(s.fileSize >> 20) / 2 + 2 * (Coordinator.Config().retries + 1) * min(s.connections, chunks)
        }
    ) { r, _ in
        var s = SimulatedScenario(
            fileSize: r.pick([4, 16, 64]) * MiB, connections: r.pick([1, 4, 8, 16]), rtt: r.logBetween(0.0005, 0.08),
            bottleneck: r.logBetween(30e6, 1e9), perRequestCap: r.pick([.infinity, 4 * Double(MiB)]), tls: r.unit() < 0.5)
        s.probe = true
        let answers: [(status: Int?, retryAfter: Int?)] = [(nil, nil), (500, nil), (503, 10), (429, 3), (503, nil)]
        let answer = r.pick(answers)
        s.failingTail = .init(bytes: r.pick([1000, 64 << 10, (1 << 20) + 4096, 3 << 20]), status: answer.status, retryAfter: answer.retryAfter)
        return s
    }
}
