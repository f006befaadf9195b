import Glibc
import Testing
@testable import Segget

/// `Coordinator` on scripted timelines: connections deliver bytes at rates the script sets, the
/// clock moves in 10 ms steps, and the commands it returns are recorded. No socket, no file.
@Suite struct CoordinatorTests {
    static let MiB = 1 << 20

    /// A download driven through the engine's one entry point (`EngineCore.handle`), as `FetchEngine`
    /// drives it: a pass (due starts, loans, assignment), the bytes each connection received in 10 ms,
    /// then the end of the pass (progress ticks and slow-rule rounds when due).
    struct Script {
        var core: EngineCore
        var now = 0.0
        var log: [EngineCore.Action] = []
        /// Bytes per second per connection (missing: `defaultRate`).
        var rates: [Int: Double] = [:]
        /// Bytes per second per connection of a source (by its index), where `rates` names none.
        var sourceRates: [Int: Double] = [:]
        var defaultRate = 8.0 * Double(1 << 20)
        var carry: [Double]
        /// Connections a batch's lender has spare for this download (nil: no lender); one is offered
        /// a pass, and what the core gives back returns here.
        var spare: Int?
        /// The lender lent more than it has (a daemon's task took its own share): nothing is
        /// offered, and the core is told to call loans back.
        var lenderShort = false
        /// Like the test server's `slowevery`/`slowrate`/`slowafter`: request number `requests` (the
        /// probe was 1) is slow when a multiple of `slowEvery`, at `slowRate` after `slowAfter` bytes.
        var slowEvery = 0
        var slowRate = 1.0
        var slowAfter: Int64 = 0
        var requests = 1
        /// Per connection: whether its current request is a slow one, and its bytes so far.
        var slowRequest: [Int: Bool] = [:]
        var requestBytes: [Int: Int64] = [:]
        /// Every transfer at or past this offset fails before its first byte (a server that fails
        /// every request for the file's tail).
        var failFrom: Int64?

        init(size: Int, chunk: Int = 1 << 20, connections n: Int, partialChunks: [Int: Int64] = [:],
             _ configure: (inout Coordinator.Config) -> Void = { _ in }) {
            var config = Coordinator.Config()
            config.totalLength = Int64(size)
            config.stallTimeout = 20
            config.jitter = { 1 }
            configure(&config)
            core = EngineCore(ranged: Coordinator(
                plan: ChunkPlan(totalLength: Int64(size), chunkSize: Int64(chunk)), connections: n, config: config,
                partialChunks: partialChunks))
            carry = Array(repeating: 0, count: n)
        }

        /// The coordinator as it stands (read-only).
        var c: Coordinator { core.ranged! }
        var events: [DownloadEvent] { log.compactMap { if case .event(let e) = $0 { e } else { nil } } }
        var redialled: [Int] { events.compactMap { if case .redial(let id, _) = $0 { id } else { nil } } }
        var retried: [Int] { events.compactMap { if case .retry(let id, _, _, _) = $0 { id } else { nil } } }
        func starts(of id: Int) -> [(bytes: Range<Int64>, fresh: Bool, newPath: Bool)] {
            log.compactMap { if case .start(id, let b, let f, let p) = $0 { (b, f, p) } else { nil } }
        }

        mutating func begin() { handle(.begin) }

        /// Hands `event` to the core now and logs what it decides, numbering the requests it starts
        /// and taking back the connections it gives back.
        @discardableResult
        mutating func handle(_ event: EngineCore.Event) -> [EngineCore.Action] {
            let actions = core.handle(event, now: now)
            log += actions
            for action in actions {
                switch action {
                case .start(let id, _, _, _):
                    requests += 1
                    slowRequest[id] = slowEvery > 0 && requests % slowEvery == 0
                    requestBytes[id] = 0
                case .giveBack(let n):
                    spare = (spare ?? 0) + n
                default:
                    break
                }
            }
            return actions
        }

        func rate(of id: Int) -> Double {
            if slowRequest[id] == true && (requestBytes[id] ?? 0) >= slowAfter { return slowRate }
            return rates[id] ?? sourceRates[c.connections[id].source] ?? defaultRate
        }

        /// Runs the clock to `t`.
        mutating func run(until t: Double, heldByWriter: (at: Double, seconds: Double)? = nil) {
            while now < t - 1e-9 {
                now += 0.01
                var offered: Int?
                if let left = spare {
                    offered = lenderShort ? 0 : min(left, 1)
                    spare = left - offered!
                }
                let passStartedAt = now
                handle(.pass(offered: offered, recall: lenderShort))
                for id in c.connections.indices where c.connections[id].machine.isTransferring {
                    if let f = failFrom, c.connections[id].pos >= f {
                        end(id, .transient("reset by the test's server"))
                        continue
                    }
                    carry[id] += rate(of: id) * 0.01
                    var n = Int(carry[id])
                    carry[id] -= Double(n)
                    if slowRequest[id] == true, slowAfter > 0, let got = requestBytes[id], got < slowAfter, got + Int64(n) > slowAfter {
                        // The slow request's good start ends here.
                        n = Int(slowAfter - got)
                        carry[id] = 0
                    }
                    // A server sends what the request asked for and no more.
                    n = min(n, Int(max(0, c.connections[id].requestEnd - c.connections[id].pos)))
                    requestBytes[id, default: 0] += Int64(n)
                    deliver(id, n)
                }
                if let h = heldByWriter, abs(now - h.at) < 0.005 {
                    // The loop was stuck in the writer: nobody was read, the clock jumped.
                    now += h.seconds
                    handle(.writerWaited(h.seconds))
                }
                handle(.performed(passStartedAt: passStartedAt))
                if c.isComplete { return }
            }
        }

        func head(_ id: Int) -> ResponseHead {
            let conn = c.connections[id]
            var h = ResponseHead()
            h.append(line: "HTTP/1.1 206 Partial Content\r\n")
            h.append(line: Substring("Content-Range: bytes \(conn.requestStart)-\(conn.requestEnd - 1)/\(c.plan.totalLength)\r\n"))
            h.append(line: "\r\n")
            return h
        }

        /// `n` bytes arrive for connection `id` (the first ones with its response head).
        mutating func deliver(_ id: Int, _ n: Int) {
            guard n > 0 else { return }
            let actions = handle(.body(id, count: n, head: head(id), budgetAllows: true))
            for case .crossed(_, let crossing) in actions {
                for l in crossing.losers { handle(.removed(l)) }
            }
            let conn = c.connections[id]
            if actions.last == .body(.abort) || conn.machine.stopReason != nil {
                end(id, .transient("aborted"))
            } else if conn.pos >= conn.requestEnd {
                end(id, .ok)
            }
        }

        mutating func end(_ id: Int, _ how: EngineCore.TransferEnd) {
            handle(.ended(id, how, head: head(id)))
        }
    }

    @Test func everyConnectionStartsOnARampAndTheDownloadCompletes() {
        var s = Script(size: 16 * Self.MiB, connections: 4)
        s.begin()
        #expect(s.starts(of: 0).count == 1)
        #expect(s.c.connections[1].machine.state == .waiting(until: Coordinator.rampStep(connections: 4), .ramp))
        s.run(until: 5)
        #expect(s.c.isComplete)
        #expect(s.c.finishedBytes == Int64(16 * Self.MiB))
        // The piece map's source: the finished chunks as one run.
        #expect(s.c.finishedRanges == [0..<Int64(16 * Self.MiB)])
        #expect(s.events.isEmpty, "\(s.events)")
    }

    @Test func afterASlowFirstAnswerEveryConnectionStartsAtOnce() {
        var s = Script(size: 16 * Self.MiB, connections: 4) { $0.probeFirstAnswer = 0.16 }
        // The probe's connection shows the round trip (as `FetchEngine.begin` reports it): its first
        // answer was the network's, not a server thinking.
        s.handle(.connected(0, roundTrip: 0.08, newConnection: nil))
        s.begin()
        for id in 0..<4 { #expect(s.starts(of: id).count == 1, "connection \(id)") }
        s.run(until: 5)
        #expect(s.c.isComplete)
    }

    /// A batch's 2 MiB file on a long path whose connections other downloads hold, on a connection
    /// an earlier file left open (2 MB/s at first): the split waits for connection 0's rate, sees it
    /// double (TCP's slow start), and leaves the file to it, since a new connection would pay its
    /// handshakes and start from its first window. Split at once before.
    @Test func onAContendedLongPathAGrowingConnectionKeepsASmallFile() {
        var s = Self.contendedLongPath(size: 2 * Self.MiB)
        s.begin()
        #expect(s.starts(of: 0).count == 1)
        for id in 1..<4 { #expect(s.starts(of: id).isEmpty, "connection \(id) waits for connection 0's rate") }
        Self.rampUp(&s, until: 3, initial: 2e6, ceiling: 50e6)
        #expect(s.c.isComplete)
        for id in 1..<4 { #expect(s.starts(of: id).isEmpty, "connection \(id) was started") }
    }

    /// The same, where the host caps each connection (its rate settles at once): the split goes on.
    @Test func onAContendedLongPathACappedConnectionSplits() {
        var s = Self.contendedLongPath(size: 16 * Self.MiB)
        s.rates[0] = 1e6
        s.begin()
        s.run(until: 1)
        for id in 1..<4 { #expect(s.starts(of: id).count >= 1, "connection \(id) never started") }
    }

    /// A file longer than `rampScopeBytes` splits at once there, as before.
    @Test func onAContendedLongPathALongFileSplitsAtOnce() {
        var s = Self.contendedLongPath(size: 64 * Self.MiB)
        s.begin()
        for id in 0..<4 { #expect(s.starts(of: id).count == 1, "connection \(id)") }
    }

    /// Alone on its host (`contendedHost` off), the same download splits at once as before: its
    /// other connections were warmed, or are the idle ones of the download before it.
    @Test func aloneOnALongPathTheSplitGoesAtOnce() {
        var s = Script(size: 2 * Self.MiB, connections: 4) { $0.probeFirstAnswer = 0.08 }
        s.handle(.connected(0, roundTrip: 0.08, newConnection: nil))
        s.begin()
        for id in 0..<2 { #expect(s.starts(of: id).count == 1, "connection \(id)") }
    }

    /// A download of `size` at 4 connections whose host other downloads hold, on a path of 80 ms
    /// (the probe's first answer one round trip: a connection left open).
    static func contendedLongPath(size: Int) -> Script {
        var s = Script(size: size, connections: 4) {
            $0.probeFirstAnswer = 0.08
            $0.contendedHost = true
        }
        s.handle(.connected(0, roundTrip: 0.08, newConnection: nil))
        return s
    }

    /// Runs `s` to `t` with connection 0's rate doubling every 80 ms from `initial`, up to `ceiling`.
    static func rampUp(_ s: inout Script, until t: Double, initial: Double, ceiling: Double) {
        var rate = initial
        while s.now < t - 1e-9, !s.c.isComplete {
            s.rates[0] = rate
            s.run(until: min(t, s.now + 0.08))
            rate = min(ceiling, rate * 2)
        }
    }

    @Test func aTricklingConnectionIsRedialled() {
        var s = Script(size: 64 * Self.MiB, connections: 4)
        s.rates[3] = 64 * 1024
        s.begin()
        while s.redialled.isEmpty && s.now < 2 { s.run(until: s.now + 0.05) }
        #expect(s.redialled.first == 3, "\(s.events)")
        // It continues from the byte it reached, on a new TCP connection and source port.
        let redial = s.starts(of: 3).last!
        #expect(redial.fresh && redial.newPath)
        #expect(s.log.contains(.remove(3)))
        // It continues its whole run (what thieves left of it) on the new connection, in one request.
        #expect(redial.bytes.upperBound == s.c.end(of: 3))
        s.run(until: 2)
        #expect(Set(s.redialled) == [3])
    }

    /// Issue 16: a server that trickles one request in three (from the first byte, or after 256 KiB;
    /// the probe was request 1, 2 or 3) must not decide the finish time: 64 MiB over 8 connections at
    /// 4 MiB/s each, 2.08 s healthy here, with no re-dial. On this timeline (10 ms steps) the six
    /// cases take 2.27–2.35 s: what is left is a connection that lost 0.1–0.25 s to re-dials finishing
    /// its last chunk that much later, as a whole chunk (0.25 s) cannot be split. At 0ae0447, with the
    /// probe as request 1, they took 2.65 s and 3.14 s; with a re-dial still giving its run back 2.35 s
    /// and 2.95 s; without `Coordinator.minStealGainSeconds` up to 2.41 s.
    @Test(arguments: [Int64(0), 256 << 10], [1, 2, 3])
    func oneRequestInThreeTricklingCostsLittle(slowAfter: Int64, probe: Int) {
        func finish(slowEvery: Int) -> (seconds: Double, redials: Int) {
            var s = Script(size: 64 * Self.MiB, connections: 8)
            s.defaultRate = 4.0 * Double(Self.MiB)
            s.slowEvery = slowEvery
            s.slowAfter = slowAfter
            s.requests = probe
            s.begin()
            s.run(until: 10)
            #expect(s.c.isComplete)
            return (s.now, s.redialled.count)
        }
        let healthy = finish(slowEvery: 0)
        #expect(healthy.redials == 0)
        let trickling = finish(slowEvery: 3)
        #expect(trickling.seconds <= 1.15 * healthy.seconds, "\(trickling.seconds) s against \(healthy.seconds) s healthy")
    }

    /// A batch's last file starts on its own one connection. Connections lent once the other files
    /// ended are taken only when stealing is worth it by the usual rule (the rate is known and the
    /// run has a while to go); they take the not-started chunks of its run, and all are given back
    /// when the file is done.
    @Test func borrowedConnectionsTakeWorkOnceItIsWorthItAndAreGivenBack() {
        func finish(lending: Int) -> Double {
            var s = Script(size: 8 * Self.MiB, connections: 4) { $0.initialConnections = 1 }
            s.defaultRate = 2.0 * Double(Self.MiB)
            s.begin()
            #expect(s.starts(of: 0).map(\.bytes) == [0..<Int64(8 * Self.MiB)])
            s.run(until: 0.02)
            // No rate is known yet: a new connection might only cost.
            #expect(!s.c.wouldUseLoan(now: s.now))
            s.run(until: 0.5)
            #expect(s.c.loans == 0 && s.starts(of: 1).isEmpty)
            #expect(s.c.wouldUseLoan(now: s.now))
            // The lender offers one connection a pass; the core keeps each while it is worth it.
            s.spare = lending
            s.run(until: 0.5 + 0.01 * Double(lending))
            #expect(s.c.loans == lending && s.spare == 0)
            s.run(until: 10)
            #expect(s.c.isComplete)
            #expect(s.c.finishedBytes == Int64(8 * Self.MiB))
            for id in 1...3 {
                // A borrowed connection works only when lent, and then on chunks not yet started.
                #expect(s.starts(of: id).isEmpty == (id > lending), "connection \(id): \(s.starts(of: id))")
                #expect(s.starts(of: id).allSatisfy { $0.bytes.lowerBound >= Int64(2 * Self.MiB) })
            }
            // Nothing is left for the borrowed ones: every loan goes back.
            #expect(!s.c.wouldUseLoan(now: s.now))
            s.run(until: s.now + 0.01)
            #expect(s.spare == lending, "\(s.c.connections.map { "\($0.id): \($0.machine.state)" })")
            #expect(s.c.loans == 0)
            return s.now
        }
        let alone = finish(lending: 0)
        let helped = finish(lending: 2)
        #expect(alone >= 3.9)
        // Three connections from 0.5 s on: the 7 MiB left take about a third of the time.
        #expect(helped <= 0.6 * alone, "\(helped) s with two borrowed connections against \(alone) s alone")
    }

    /// A daemon's lender goes short when a task that starts later takes its own share out of
    /// connections lent before. The download that borrowed gives them back one at a time, each
    /// once the chunk it is on is done: no byte received is lost, a recalled connection starts
    /// nothing more, and the download still completes on its own connections (and borrows again
    /// once the lender has spare).
    @Test func borrowedConnectionsAreCalledBackOneAtATimeWhenTheLenderIsShort() {
        var s = Script(size: 32 * Self.MiB, connections: 4) { $0.initialConnections = 1 }
        s.defaultRate = 2.0 * Double(Self.MiB)
        s.begin()
        s.run(until: 0.5)
        s.spare = 3
        s.run(until: 0.55)
        #expect(s.c.loans == 3 && s.spare == 0)
        s.run(until: 2)
        let before = (1...3).map { s.starts(of: $0).count }
        s.lenderShort = true
        // One chunk of 1 MiB at 2 MiB/s each, one after another: 1.5 s at most.
        var backAt: [Double] = []
        while s.now < 4, s.c.loans > 0 {
            let loans = s.c.loans
            s.run(until: s.now + 0.01)
            if s.c.loans < loans { backAt.append(s.now) }
        }
        #expect(s.c.loans == 0 && s.spare == 3, "\(s.c.loans) loans left")
        #expect(backAt.count == 3, "given back at \(backAt)")
        #expect((backAt.last ?? 9) <= 3.6, "given back at \(backAt)")
        #expect((1...3).map { s.starts(of: $0).count } == before)
        // Short no longer: it borrows again and completes with every byte.
        s.lenderShort = false
        s.run(until: 30)
        #expect(s.c.isComplete)
        #expect(s.c.finishedBytes == Int64(32 * Self.MiB))
    }

    /// A daemon's task borrows at its start (`FetchSettings.borrowAtStart`): the loans take work
    /// from the first request on, one run each, as connections of its own would (no steal cuts a
    /// long run later), and still go back as loans when called back.
    @Test func connectionsBorrowedAtTheStartGetRunsOfTheirOwn() {
        var s = Script(size: 32 * Self.MiB, connections: 8) {
            $0.initialConnections = 3
            $0.initialLoans = 5
        }
        s.spare = 0
        s.begin()
        s.run(until: 0.1)
        #expect(s.c.loans == 5)
        #expect((0..<8).allSatisfy { s.starts(of: $0).count == 1 }, "\((0..<8).map { s.starts(of: $0).count })")
        s.lenderShort = true
        s.run(until: 4)
        #expect(s.c.loans == 0 && s.spare == 5)
        s.lenderShort = false
        s.run(until: 30)
        #expect(s.c.isComplete && s.c.finishedBytes == Int64(32 * Self.MiB))
    }

    @Test func aDownloadWithoutSpareSlotsNeverWantsALoan() {
        var s = Script(size: 4 * Self.MiB, connections: 2)
        s.begin()
        s.run(until: 0.02)
        #expect(!s.c.wouldUseLoan(now: s.now))
        var lent = Script(size: 4 * Self.MiB, connections: 3) { $0.initialConnections = 3 }
        lent.begin()
        #expect(!lent.c.wouldUseLoan(now: lent.now))
        // Offered one, it gives it straight back.
        lent.spare = 1
        lent.run(until: 0.01)
        #expect(lent.spare == 1 && lent.c.loans == 0)
    }

    /// A steal must bring the victim's finish forward (`minStealGainSeconds`), not only take work
    /// that would take a while (`minStealSeconds`).
    @Test func aStealMustGainTime() {
        let mib = Double(Self.MiB)
        // One chunk not started at 4 MiB/s (0.25 s): worth taking while the victim still needs 0.2 s
        // for its chunk in flight, not when it is about to start it.
        #expect(Coordinator.worthStealing(rate: 4 * mib, notStartedChunks: 1, chunkSize: mib, inFlightSeconds: 0.2, firstByteWait: 0.02))
        #expect(!Coordinator.worthStealing(rate: 4 * mib, notStartedChunks: 1, chunkSize: mib, inFlightSeconds: 0.03, firstByteWait: 0.02))
        // A slow victim (1 MiB/s) is worth robbing of its last chunk by a typical thief (0.25 s a chunk).
        #expect(Coordinator.worthStealing(rate: mib, notStartedChunks: 1, chunkSize: mib, inFlightSeconds: 0.03, thiefChunkSeconds: 0.25))
        // Two chunks not started: the thief takes one and gains a chunk time.
        #expect(Coordinator.worthStealing(rate: 4 * mib, notStartedChunks: 2, chunkSize: mib, inFlightSeconds: 0.03, firstByteWait: 0.02))
        // As before: too little not started, an unknown rate, a victim waiting to retry.
        #expect(!Coordinator.worthStealing(rate: 16 * mib, notStartedChunks: 3, chunkSize: mib, inFlightSeconds: 0.05))
        #expect(!Coordinator.worthStealing(rate: -1, notStartedChunks: 8, chunkSize: mib))
        #expect(Coordinator.worthStealing(rate: .infinity, notStartedChunks: 1, chunkSize: mib))
    }

    /// A victim still in TCP's slow start on a long path halves its remaining time with one more
    /// round trip: a thief that must dial first is not worth sending, whatever its size. The rate
    /// rule alone says otherwise: at its rate so far (1 MiB/s) the victim's 2.5 MiB take 2.5 s.
    @Test func aVictimInSlowStartIsNotRobbedByAThiefThatDials() {
        let mib = Double(Self.MiB)
        let ss = Coordinator.SlowStart(brought: 0.5 * mib, roundTrip: 0.08)
        #expect(Coordinator.worthStealing(rate: mib, notStartedChunks: 2, chunkSize: mib, inFlightSeconds: 0.5,
                                          thiefChunkSeconds: 0.3, firstByteWait: 0.25))
        #expect(!Coordinator.worthStealing(inSlowStart: ss, leftBytes: 0.5 * mib, notStartedChunks: 2, chunkSize: mib,
                                           thiefChunkSeconds: 0.3, firstByteWait: 0.25, price: Coordinator.minStealGainSeconds))
        // 60 chunks of a large file: still under 0.8 s for the victim, far more for any thief.
        #expect(!Coordinator.worthStealing(inSlowStart: ss, leftBytes: 0.5 * mib, notStartedChunks: 60, chunkSize: mib,
                                           thiefChunkSeconds: 0.05, firstByteWait: 0.25, price: Coordinator.minStealGainSeconds))
        #expect(ss.seconds(60.5 * mib) < 0.6)
        // A thief whose first byte comes at once and whose rate is far above the victim's: worth it.
        #expect(Coordinator.worthStealing(inSlowStart: Coordinator.SlowStart(brought: 16_384, roundTrip: 0.08), leftBytes: mib,
                                          notStartedChunks: 8, chunkSize: mib, thiefChunkSeconds: 0.01, firstByteWait: 0.0,
                                          price: Coordinator.minStealGainSeconds))
    }

    /// A victim whose window still grows, though slower than a slow start alone on an 80 ms path
    /// (a link other transfers share: by 1.3 a round trip), is judged by that growth, not by its
    /// rate so far: a thief that dials does not rob it. One whose rate has settled is robbed as
    /// before, and so is one whose window grows on a short path (judged by its rate there).
    @Test func aVictimWhoseWindowStillGrowsIsNotRobbedByAThiefThatDials() {
        let mib = Double(Self.MiB)
        /// Connection 0 receiving `rate(t)` since its first byte at 0, the whole 4 MiB file its run,
        /// sampled every 50 ms to `now`.
        func coordinator(roundTrip: Double = 0.08, now: Double = 0.48, rate: (Double) -> Double) -> Coordinator {
            var config = Coordinator.Config()
            config.url = "http://example.com/f"
            var c = Coordinator(plan: ChunkPlan(totalLength: 4 * Int64(Self.MiB), chunkSize: Int64(Self.MiB)), connections: 2, config: config)
            c.cost.measured(roundTrip: roundTrip)
            c.firstByteWaits = [2 * roundTrip, roundTrip]
            var conn = c.connections[0]
            conn.machine.start()
            _ = conn.machine.headArrived(refusal: nil)
            _ = conn.machine.bytesArrived(budgetAllows: true, now: 0)
            conn.requestStart = 0
            conn.requestEnd = 4 * Int64(Self.MiB)
            conn.firstByteAt = 0
            var bytes = 0.0
            var t = 0.0
            conn.sample(now: t)
            while t < now - 1e-9 {
                bytes += rate(t) * 0.05
                t += 0.05
                conn.transferBytes = Int64(bytes)
                conn.sample(now: t)
            }
            conn.pos = conn.transferBytes
            conn.chunkEnd = Int64(Self.MiB)
            c.connections[0] = conn
            return c
        }
        let growing = coordinator { t in 150_000 * pow(1.3, t / 0.08) }
        let victim = growing.connections[0]
        // Off the curve of a doubling from TCP's first window, so judged by growth only.
        #expect(Double(victim.transferBytes) < 0.5 * Coordinator.initialWindowBytes * (pow(2, 0.48 / 0.08) - 1))
        let state = growing.slowStartState(victim, now: 0.48)
        #expect(state.map { $0.growth > 1.2 && $0.growth < 1.45 } == true, "\(String(describing: state))")
        let estimates = growing.stealEstimates(now: 0.48, thiefDials: true)
        #expect(!estimates.worthStealing(0, notStartedChunks: 2))
        #expect(!estimates.worthStealing(0, notStartedChunks: 3))
        // Its rest at its growth takes under a second; at its rate so far, seconds.
        #expect(growing.remainingSeconds(victim, now: 0.48) < 0.5)
        #expect(state!.seconds(4 * mib - Double(victim.pos)) < 1.2)
        // Settled at about the same rate: robbed.
        let settled = coordinator { _ in 0.6 * mib }
        #expect(settled.slowStartState(settled.connections[0], now: 0.48) == nil)
        #expect(settled.stealEstimates(now: 0.48, thiefDials: true).worthStealing(0, notStartedChunks: 2))
        // The same growth on a 10 ms path: its rate decides there.
        let short = coordinator(roundTrip: 0.01) { t in 150_000 * pow(1.3, t / 0.08) }
        #expect(short.slowStartState(short.connections[0], now: 0.48) == nil)
    }

    /// Issue 23: a thief with no open connection in libcurl's pool dials one, and its first byte waits
    /// for the TCP handshake (and TLS's), then slow start: on a WAN that is worth more than a chunk
    /// of a victim only a little slower than typical, which is then left to finish its own.
    @Test func aThiefThatMustDialPaysForIt() {
        let mib = Double(Self.MiB)
        for (url, handshakes) in [("https://example.com/f", 2.0), ("http://example.com/f", 1.0)] {
            var config = Coordinator.Config()
            config.url = url
            var c = Coordinator(plan: ChunkPlan(totalLength: 64 * Int64(Self.MiB), chunkSize: Int64(Self.MiB)), connections: 2, config: config)
            #expect(c.dialSeconds(typical: nil) == 0, "no round trip known yet")
            c.firstByteWaits = [0.30, 0.15, 0.16]
            #expect(abs(c.dialSeconds(typical: nil) - handshakes * 0.15) < 1e-9)
            // At 2.5 MiB/s over 150 ms, slow start takes several more round trips.
            let ramp = SlowConnectionRule.rampSeconds(rate: 2.5 * mib, rtt: 0.15)
            #expect(ramp > 0.5)
            #expect(abs(c.dialSeconds(typical: 2.5 * mib) - (handshakes * 0.15 + ramp)) < 1e-9)
            // A victim at 2 MiB/s with 0.3 s left of its chunk in flight and one chunk not started: an open
            // connection takes the chunk (first byte in one round trip), one that must dial does not.
            #expect(Coordinator.worthStealing(rate: 2 * mib, notStartedChunks: 1, chunkSize: mib, inFlightSeconds: 0.3,
                                              thiefChunkSeconds: 0.4, firstByteWait: 0.15))
            #expect(!Coordinator.worthStealing(rate: 2 * mib, notStartedChunks: 1, chunkSize: mib, inFlightSeconds: 0.3,
                                               thiefChunkSeconds: 0.4, firstByteWait: 0.15 + c.dialSeconds(typical: 2.5 * mib)))
        }
        // On a LAN the dial is next to nothing.
        var config = Coordinator.Config()
        config.url = "https://example.com/f"
        var lan = Coordinator(plan: ChunkPlan(totalLength: 64 * Int64(Self.MiB), chunkSize: Int64(Self.MiB)), connections: 2, config: config)
        lan.firstByteWaits = [0.0004]
        #expect(lan.dialSeconds(typical: 400 * mib) < 0.01)
    }

    /// Issue 23, WAN link b: an idle connection that must dial on a long path judges the busy ones by
    /// their proven rate (`provenRate`), not by a dip of loss recovery in their last second, nor by
    /// a young request's average that still holds its wait for the first byte: a new TCP and TLS
    /// connection and its slow start at 150 ms would finish later than the victim itself. A victim
    /// slow all along is robbed all the same.
    @Test func aDialOnALongPathIsNotDrawnByADip() {
        let mib = Double(Self.MiB)
        /// Connection 0 at 2.5 MiB/s since 0, connection 1 (the victim) asked at `asked`, first byte
        /// 0.15 s later, then `victimRate`; both sampled every 50 ms up to 5 s, each with `left` of
        /// its chunk in flight to come.
        func coordinator(asked: Double = 0, left: Double = 0.75, victimRate: @escaping (Double) -> Double) -> Coordinator {
            var config = Coordinator.Config()
            config.url = "https://example.com/f"
            var c = Coordinator(plan: ChunkPlan(totalLength: 64 * Int64(Self.MiB), chunkSize: Int64(Self.MiB)), connections: 3, config: config)
            c.firstByteWaits = [0.45, 0.15, 0.15]
            for (id, chunk, askedAt) in [(0, 0, 0.0), (1, 8, asked)] {
                let rate: (Double) -> Double = id == 0 ? { _ in 2.5 * mib } : victimRate
                var conn = c.connections[id]
                conn.machine.start()
                _ = conn.machine.headArrived(refusal: nil)
                _ = conn.machine.bytesArrived(budgetAllows: true, now: askedAt + 0.15)
                conn.requestStartedAt = askedAt
                conn.transferStartedAt = askedAt
                conn.firstByteAt = askedAt + 0.15
                conn.requestStart = Int64(chunk) * Int64(Self.MiB)
                conn.requestEnd = conn.requestStart + 3 * Int64(Self.MiB)
                conn.chunkEnd = conn.requestStart + Int64(Self.MiB)
                conn.pos = conn.chunkEnd - Int64(left * mib)
                var bytes = 0.0
                var t = askedAt + 0.15
                conn.sample(now: t)
                while t < 5 - 1e-9 {
                    bytes += rate(t) * 0.05
                    t += 0.05
                    conn.transferBytes = Int64(bytes)
                    conn.sample(now: t)
                }
                c.connections[id] = conn
            }
            return c
        }
        // 2.5 MiB/s, then a second of nothing (a retransmission timeout): 0.6 MiB/s over the last
        // second, 1.7 MiB/s over three.
        let dipped = coordinator { t in t < 4 ? 2.5 * mib : 0 }
        #expect(dipped.rate(dipped.connections[1], now: 5)! < 0.7 * mib)
        #expect(dipped.provenRate(dipped.connections[1], now: 5)! > 1.5 * mib)
        let plain = dipped.stealEstimates(now: 5, thiefDials: true)
        let proven = dipped.stealEstimates(now: 5, thiefDials: true, proven: true)
        #expect(plain.worthStealing(1, notStartedChunks: 1), "judged by its last second, the dip looks like seconds")
        #expect(!proven.worthStealing(1, notStartedChunks: 1))
        // Nor is it raced by a connection that must dial (`assignIdle`'s `minRace`).
        #expect(plain.remaining[1] > 1)
        #expect(proven.remaining[1] < Coordinator.minRaceSeconds + dipped.dialSeconds(typical: 2.5 * mib))
        // A steal's request 0.45 s old at 2.5 MiB/s since its first byte (0.75 MiB of its first chunk
        // in): its average (1.7 MiB/s) makes its three chunks not started worth a dial; its rate since
        // the first byte does not.
        let young = coordinator(asked: 4.55, left: 0.25) { _ in 2.5 * mib }
        #expect(young.averageRate(young.connections[1], now: 5)! < 1.8 * mib)
        #expect(young.stealEstimates(now: 5, thiefDials: true).worthStealing(1, notStartedChunks: 3))
        #expect(!young.stealEstimates(now: 5, thiefDials: true, proven: true).worthStealing(1, notStartedChunks: 3))
        // Slow all along (300 KiB/s): robbed all the same.
        let slow = coordinator { _ in 0.3 * mib }
        #expect(slow.stealEstimates(now: 5, thiefDials: true, proven: true).worthStealing(1, notStartedChunks: 1))
    }

    /// A re-dial pays its handshakes as well as its slow start. On WAN link a over HTTPS (80 ms, 0.1 %
    /// loss, 400 Mbit/s; segget saw a 0.106 s round trip) slow start to a typical 2.5 MiB/s takes
    /// 0.45 s, under `lossRecoveryRampSeconds`, so a connection still behind its peers a second into
    /// the download was judged against 0.4 of typical and re-dialled at 0.6-1.0 MiB/s; each new
    /// connection then averaged 130-250 KiB/s behind the bottleneck the others kept full. With TCP's and
    /// TLS's round trips (0.21 s) the re-dial costs 0.66 s: the connection is judged as in loss
    /// recovery (below a tenth is slow). A trickle is still re-dialled there, and the same connection
    /// on a short path is re-dialled as before.
    @Test func aRedialOnALongPathPaysItsHandshakes() {
        let mib = Double(Self.MiB)
        /// `FourConnectionsOneSlow` with a first byte at 0.35 s (on the LAN at 0.01 s).
        func redialled(url: String, waits: [Double], slowRate: Double, now: Double = 1.1) -> Bool {
            guard var c = FourConnectionsOneSlow.coordinator(url: url, waits: waits, slowRate: slowRate, now: now) else { return false }
            return FourConnectionsOneSlow.redialsTheSlowOne(&c, now: now)
        }
        let wan = [0.106, 0.33, 0.33, 0.35]
        #expect(!redialled(url: "https://198.18.0.2/f", waits: wan, slowRate: 0.6 * mib), "0.45 s of slow start and 0.21 s of handshakes")
        #expect(redialled(url: "https://198.18.0.2/f", waits: wan, slowRate: 0.05 * mib), "a trickle, far below a tenth")
        #expect(redialled(url: "https://example.com/f", waits: [0.001, 0.01, 0.01, 0.01], slowRate: 0.6 * mib), "a short path")
    }

    @Test func aWriterStallBlamesNobody() {
        var s = Script(size: 64 * Self.MiB, connections: 4) { $0.stallTimeout = 1 }
        s.begin()
        s.run(until: 3, heldByWriter: (at: 1.5, seconds: 1.5))
        #expect(s.redialled.isEmpty, "\(s.events)")
        #expect(s.retried.isEmpty, "\(s.events)")
        #expect(!s.log.contains { if case .remove = $0 { true } else { false } })
    }

    @Test func theSameStallNotHeldIsAStall() {
        // The counter-test: were the writer's wait not held time, the stall timeout would fire.
        var s = Script(size: 64 * Self.MiB, connections: 4) {
            $0.stallTimeout = 1
            $0.redialSlow = false
        }
        s.begin()
        s.run(until: 1.5)
        s.now += 1.5
        s.handle(.tick)
        #expect(Set(s.retried) == [0, 1, 2, 3])
    }

    @Test func aSilentConnectionIsDroppedAtTheStallTimeout() {
        var s = Script(size: 256 * Self.MiB, connections: 4) {
            $0.stallTimeout = 2
            $0.redialSlow = false
        }
        s.rates[2] = 0
        s.begin()
        s.run(until: 0.1)
        let from = s.c.connections[2].pos
        #expect(from == Int64(128 * Self.MiB))
        s.run(until: 2.1)
        #expect(s.retried.isEmpty)
        s.run(until: 2.6)
        #expect(s.log.contains(.remove(2)))
        #expect(s.events.contains(.retry(connection: 2, attempt: 1, delay: 1, reason: "no data for 2.2 s")), "\(s.events)")
        #expect(s.c.connections[2].machine.isWaiting)
        // After the delay it starts again, on a fresh connection, from where it was.
        s.rates[2] = nil
        s.run(until: 4)
        let retry = s.starts(of: 2).last!
        #expect(retry.fresh && retry.bytes.lowerBound == from)
        #expect(s.c.connections[2].machine.state == .receiving)
    }

    @Test func theEndGameRacesTheSlowLastChunk() {
        var s = Script(size: 8 * Self.MiB, connections: 2) { $0.redialSlow = false }
        s.rates[1] = 256 * 1024
        s.begin()
        // Connection 0 finishes its run, steals what is not started, then races 1's chunk.
        s.run(until: 3)
        let raced = s.starts(of: 0).last!.bytes
        #expect(s.c.plan.chunk(containing: raced.lowerBound) == s.c.plan.chunk(containing: s.c.connections[1].pos))
        s.run(until: 10)
        #expect(s.c.isComplete)
        // The racer won; the slow owner was cancelled and holds nothing.
        #expect(s.c.connections[1].machine.isIdle)
        #expect(!s.c.isRacing(0) && !s.c.isRacing(1))
        #expect(s.c.scheduler.run(of: 1) == nil)
    }

    /// A racer that would finish after the owner does not race: 5 chunks over 4 connections that
    /// each get 1 MiB/s (a server's cap per connection) leave one chunk to the end, whose owner is
    /// well into it when the others run out of work, and a copy from its start at the same rate
    /// could only fetch it twice (it did: 1.7 MB twice, no time saved). An owner far slower than
    /// the racer's own last rate is still raced.
    @Test func noRaceThatCannotFinishFirst() {
        var s = Script(size: 5 * Self.MiB, connections: 4) { $0.redialSlow = false }
        s.defaultRate = Double(Self.MiB)
        s.begin()
        var raced = false
        while !s.c.isComplete && s.now < 10 {
            s.run(until: s.now + 0.01)
            raced = raced || s.c.connections.indices.contains { s.c.isRacing($0) }
        }
        #expect(s.c.isComplete && !raced)
        #expect(s.c.receivedBytes == Int64(5 * Self.MiB))

        var slow = Script(size: 5 * Self.MiB, connections: 4) { $0.redialSlow = false }
        slow.defaultRate = Double(Self.MiB)
        slow.rates[3] = 64 * 1024
        slow.begin()
        var slowRaced = false
        while !slow.c.isComplete && slow.now < 30 {
            slow.run(until: slow.now + 0.01)
            slowRaced = slowRaced || slow.c.isRacing(0) || slow.c.isRacing(1) || slow.c.isRacing(2)
        }
        #expect(slow.c.isComplete && slowRaced)
    }

    /// Where a chunk takes less than a ramp step, the first connection is free before the others
    /// have sent their requests: it takes a waiting connection's run instead of racing its first
    /// chunk (which the owner would then fetch too), and no byte is fetched twice.
    @Test func aConnectionStillOnTheRampIsRelievedOfItsRunNotRaced() {
        var s = Script(size: 8 * Self.MiB, connections: 8)
        // A chunk in 17 ms; the eighth connection's ramp step comes at 87 ms.
        s.defaultRate = 60 * Double(Self.MiB)
        s.begin()
        var racedAStarter = false
        while !s.c.isComplete && s.now < 5 {
            s.run(until: s.now + 0.01)
            for id in s.c.connections.indices {
                if let k = s.c.scheduler.duplicates[id], let owner = s.c.scheduler.runs.first(where: { $0.value.lowerBound == k })?.key,
                    s.c.connections[owner].machine.isStarting
                {
                    racedAStarter = true
                }
            }
        }
        #expect(s.c.isComplete && !racedAStarter)
        #expect(s.c.receivedBytes == Int64(8 * Self.MiB))
    }

    /// A racer whose transfer fails waits a backoff of its own before it takes work again: at once,
    /// it raced the same chunk request after request.
    @Test func aFailedRacerWaitsBeforeItRacesAgain() {
        var s = Script(size: 2 * Self.MiB, connections: 2) { $0.redialSlow = false }
        s.rates[1] = 64 * 1024
        s.begin()
        while !s.c.isRacing(0) && s.now < 5 { s.run(until: s.now + 0.01) }
        #expect(s.c.isRacing(0))
        s.run(until: s.now + 0.02)
        let failedAt = s.now
        let startsBefore = s.starts(of: 0).count
        s.end(0, .transient("reset"))
        #expect(!s.c.isRacing(0) && s.c.connections[0].machine.isWaiting)
        s.run(until: failedAt + 0.9)
        #expect(s.starts(of: 0).count == startsBefore)
        s.run(until: failedAt + 1.2)
        #expect(s.starts(of: 0).count == startsBefore + 1 || s.c.isComplete)
    }

    /// A server that fails every request for the file's last chunk: its owner backs off (1, 2, 4, 8,
    /// 16 s) and the download fails after its retries, and the idle connections race the chunk at
    /// most once per attempt of its owner (`RaceHolds`). Each raced it after its own 1 s backoff
    /// before, every second while the owner waited: 216-556 requests in 30-50 s against a real
    /// server at -n 8 and -n 16.
    @Test func aChunkEveryRequestFailsIsRacedOncePerAttemptOfItsOwner() {
        var s = Script(size: 4 * Self.MiB, connections: 4) { $0.redialSlow = false }
        s.failFrom = 3 * Int64(Self.MiB)
        s.begin()
        while s.c.stop == nil && s.now < 60 { s.run(until: s.now + 0.05) }
        #expect(s.c.stop != nil)
        let tail = s.c.connections.indices.flatMap { s.starts(of: $0) }.filter { $0.bytes.upperBound > 3 * Int64(Self.MiB) }
        // The owner's 6 attempts (the first and 5 retries), and at most one racer beside each.
        #expect(tail.count >= 6)
        #expect(tail.count <= 12, "\(tail.count) requests for the failing chunk")
        #expect(s.c.raceHolds.failures(chunk: 3) >= 1)
    }

    /// While a speed cap sets the rate (`EngineCore.Event.capHeld`), an end-game race only splits the
    /// same allowance and pays for the chunk twice: none starts. A second after the cap last held
    /// bytes back, the slow last chunk is raced again.
    @Test func noRaceWhileASpeedCapSetsTheRate() {
        var s = Script(size: 8 * Self.MiB, connections: 2) { $0.redialSlow = false }
        s.rates[1] = 128 * 1024
        s.begin()
        var raced = false
        while s.now < 4 {
            s.handle(.capHeld)
            s.run(until: s.now + 0.01)
            raced = raced || s.c.isRacing(0)
        }
        #expect(!raced)
        #expect(!s.c.isComplete)
        s.run(until: 4 + Coordinator.capMemorySeconds + 0.5)
        #expect(s.c.isRacing(0) || s.c.isComplete)
        s.run(until: 20)
        #expect(s.c.isComplete)
    }

    /// A connection the cap holds paused for longer than the cap's memory (a low `--max-speed`:
    /// each read waits seconds for its allowance, with no byte and no new hold between) still
    /// binds the cap: no idle connection races it. Once it receives freely again, the race rule
    /// is as before.
    @Test func noRaceWhileTheCapHoldsAConnectionPaused() {
        var s = Script(size: 2 * Self.MiB, connections: 2) {
            $0.redialSlow = false
            $0.speedCapped = true
        }
        s.rates[1] = 64 * 1024
        s.begin()
        s.run(until: 0.5)
        #expect(s.c.connections[0].machine.isIdle)
        #expect(s.c.connections[1].machine.isTransferring)
        // The cap holds connection 1's next read back: paused, no byte, no hold noted after.
        s.handle(.capHeld)
        s.rates[1] = 0
        #expect(s.handle(.body(1, count: 16_384, head: s.head(1), budgetAllows: false)) == [.body(.pause)])
        #expect(s.c.connections[1].machine.isPaused)
        var raced = false
        while s.now < 0.5 + 3 * Coordinator.capMemorySeconds {
            s.run(until: s.now + 0.01)
            raced = raced || s.c.isRacing(0)
        }
        #expect(!raced)
        // Released, it crawls on without the cap: a second later the idle connection races it.
        s.handle(.resumed(1))
        s.rates[1] = 16 * 1024
        s.run(until: s.now + Coordinator.capMemorySeconds + 1)
        #expect(s.c.isRacing(0) || s.c.isComplete)
    }

    @Test func autoGrowthAddsConnectionsWhileThroughputRises() {
        var s = Script(size: 512 * Self.MiB, connections: 8) {
            $0.autoConnections = true
            $0.redialSlow = false
        }
        #expect(s.c.connectionLimit == Coordinator.autoInitial)
        s.begin()
        s.run(until: 2.5)
        #expect(s.c.connectionLimit == 6)
        s.run(until: 5)
        #expect(s.c.connectionLimit == 8)
        #expect(s.c.connections[7].machine.isTransferring)
        #expect(s.events.isEmpty, "\(s.events)")
    }

    @Test func autoGrowthStopsWhenThroughputDoesNot() {
        var s = Script(size: 512 * Self.MiB, connections: 8) {
            $0.autoConnections = true
            $0.redialSlow = false
        }
        s.begin()
        s.run(until: 2.5)
        #expect(s.c.connectionLimit == 6)
        // The link is full: six connections share what four had.
        s.defaultRate = 8.0 * Double(Self.MiB) * 4 / 6
        s.run(until: 7)
        #expect(s.c.connectionLimit == 6)
        #expect(s.events == [.notice("using 6 connections (more did not raise the throughput).")])
    }

    @Test func aRefusedHeadIsRetriedAndFailsAfterTheRetries() {
        var s = Script(size: 4 * Self.MiB, connections: 1) { $0.retries = 1 }
        s.begin()
        var h = ResponseHead()
        h.append(line: "HTTP/1.1 503 Busy\r\n")
        h.append(line: "Retry-After: 2\r\n")
        h.append(line: "\r\n")
        s.now = 0.1
        #expect(s.handle(.body(0, count: 100, head: h, budgetAllows: true)) == [.body(.abort)])
        s.handle(.ended(0, .transient("aborted"), head: h))
        #expect(s.events == [.retry(connection: 0, attempt: 1, delay: 2, reason: "HTTP 503")])
        #expect(s.c.connections[0].machine.state == .waiting(until: 2.1, .retry))
        s.now = 2.2
        s.handle(.pass(offered: nil))
        let retry = s.starts(of: 0).last!
        #expect(retry.bytes == 0..<Int64(4 * Self.MiB) && retry.fresh && !retry.newPath)
        #expect(s.handle(.body(0, count: 100, head: h, budgetAllows: true)) == [.body(.abort)])
        s.handle(.ended(0, .transient("aborted"), head: h))
        let failure = s.c.stop as? SeggetError
        #expect(failure?.kind == .httpStatus)
        #expect(failure?.message == "bytes 0-4194303 failed 2 times (last: HTTP 503); run the same command to resume later, or raise --retries.")
        // A daemon's task continues when its URL is added again; its retries are the daemon's.
        #expect(NextStep.forDaemon(failure?.message ?? "") == "bytes 0-4194303 failed 2 times (last: HTTP 503); add the URL again to resume later (the new task continues what this one saved), or with a higher max-tries.")
    }

    /// Answers whose `Content-Range` is not the range asked are retried like failures of the range,
    /// until as many as the download has connections (at least 3) come in a row with none accepted
    /// between them: then the download ends at once, before the range's retries run out. An accepted
    /// answer starts the count again, so a glitch among good answers does not add up.
    @Test func unusableAnswersInARowEndTheDownloadBeforeTheRetriesRunOut() {
        var s = Script(size: 4 * Self.MiB, connections: 1) { $0.retries = 5 }
        s.begin()
        func shifted() -> ResponseHead {
            let conn = s.c.connections[0]
            var h = ResponseHead()
            h.append(line: "HTTP/1.1 206 Partial Content\r\n")
            h.append(line: Substring("Content-Range: bytes \(conn.requestStart + 1)-\(conn.requestEnd - 1)/\(s.c.plan.totalLength)\r\n"))
            h.append(line: "\r\n")
            return h
        }
        /// The answer to connection 0's request now: shifted, or good and then cut after 100 bytes.
        func answer(shiftedBy: Bool) {
            let h = shiftedBy ? shifted() : s.head(0)
            let actions = s.handle(.body(0, count: 100, head: h, budgetAllows: true))
            #expect(actions.last == .body(shiftedBy ? .abort : .proceed), "\(actions)")
            s.handle(.ended(0, .transient(shiftedBy ? "aborted" : "reset"), head: h))
        }
        /// The retry's time comes.
        func retry() {
            guard case .waiting(let until, .retry) = s.c.connections[0].machine.state else {
                Issue.record("connection 0 waits for no retry: \(s.c.connections[0].machine.state)")
                return
            }
            s.now = until + 0.01
            s.handle(.pass(offered: nil))
        }
        s.now = 0.1
        answer(shiftedBy: true)
        retry()
        answer(shiftedBy: false)
        #expect(s.c.unusableInARow == 0)
        retry()
        answer(shiftedBy: true)
        retry()
        answer(shiftedBy: true)
        // Three unusable answers so far, but not in a row: the download goes on.
        #expect(s.c.unusableInARow == 2)
        #expect(s.c.stop == nil)
        retry()
        answer(shiftedBy: true)
        let failure = s.c.stop as? SeggetError
        #expect(failure?.kind == .protocolViolation)
        #expect(failure?.message == "3 answers in a row were unusable, none accepted between them (last, for bytes 100-4194303: asked for bytes 100-4194303, the server sent bytes 101-4194303/4194304); try -n 1 or another server.")
        // Five attempts of the range's six: the retries had not run out.
        #expect(s.c.connections[0].attempts == 5)
    }

    /// A download whose retries run out after a refused connection or a timeout keeps that cause on
    /// its failure (a daemon task's `errorCode`: aria2's 1 and 2, not its 6); one after a reset has none.
    @Test(arguments: [NetworkCause.couldNotConnect, .timedOut, nil] as [NetworkCause?])
    func theLastFailuresNetworkCauseIsKept(_ cause: NetworkCause?) {
        var s = Script(size: 4 * Self.MiB, connections: 1) { $0.retries = 1 }
        s.begin()
        s.now = 0.1
        s.handle(.ended(0, .transient("refused", cause: cause), head: ResponseHead()))
        #expect((s.c.stop as? SeggetError) == nil)
        s.now = 5
        s.handle(.pass(offered: nil))
        #expect(s.starts(of: 0).count == 2)
        s.handle(.ended(0, .transient("refused", cause: cause), head: ResponseHead()))
        let failure = s.c.stop as? SeggetError
        #expect(failure?.kind == .network)
        #expect(failure?.message.hasPrefix("bytes 0-4194303 failed 2 times (last: refused)") == true)
        #expect(failure?.networkCause == cause)
    }

    /// A connection silent past `--stall-timeout` until its retries ran out failed by a timeout.
    @Test func aStallsFailureIsATimeout() {
        var s = Self.oneSilentConnection()
        s.run(until: 3)
        let failure = s.c.stop as? SeggetError
        #expect(failure?.message.contains("no data for") == true)
        #expect(failure?.networkCause == .timedOut)
    }

    /// A connection still being made is not stalled: its stall clock starts once the shell stops
    /// saying so (`EngineCore.Event.stillConnecting`), so a stall timeout below the connection
    /// timeout does not cut a slow connect; silent after that, it is dropped as before.
    @Test func aConnectionStillBeingMadeIsNotStalled() {
        var s = Self.oneSilentConnection()
        for step in 1...40 {
            s.run(until: Double(step) * 0.1)
            s.handle(.stillConnecting(0))
        }
        #expect(s.c.stop == nil, "\(s.events)")
        #expect(s.c.connections[0].machine.isTransferring)
        s.run(until: 5.9)
        #expect(s.c.stop == nil, "\(s.events)")
        s.run(until: 6.5)
        let failure = s.c.stop as? SeggetError
        #expect(failure?.message.contains("no data for 2.") == true, "\(String(describing: failure))")
    }

    /// A request's wait for its first byte counts from the end of its handshakes, as the shell saw
    /// them (`EngineCore.Event.stillConnecting`, told before every round of the slow rule): on a line
    /// whose queue is full, a re-dial's new connection took three round trips of 1.2 s where the
    /// path's own is 0.6 s, and was judged silent before its request had gone out. While its
    /// connection is being made, it may wait its handshakes longer too, and a connect that stalls
    /// is still tried again.
    @Test func aFirstByteWaitCountsFromTheEndOfTheHandshakes() throws {
        /// Four connections over HTTPS whose first bytes take 0.3 s (a path of 0.3 s: handshakes
        /// of 0.6 s), then 8 MiB/s; the last silent, its connection still being made until
        /// `madeAt`: when it is re-dialled.
        func redialled(madeAt: Double) -> Double? {
            var s = Script(size: 256 * Self.MiB, connections: 4) { $0.url = "https://example.com/f" }
            for id in 0..<4 { s.rates[id] = 0 }
            s.begin()
            while s.now < 6 {
                if s.now >= 0.3 - 1e-9 { for id in 0..<3 { s.rates[id] = nil } }
                if s.now < madeAt { s.handle(.stillConnecting(3)) }
                s.run(until: s.now + 0.01)
                if s.redialled.contains(3) { return s.now }
            }
            return nil
        }
        let quick = try #require(redialled(madeAt: 0))
        let made = try #require(redialled(madeAt: 1))
        let stalled = try #require(redialled(madeAt: 100))
        let all = "made at once: \(quick), after 1 s: \(made), never: \(stalled)"
        // Four usual waits (1.16 s) from its request's start, or from the end of its handshakes.
        #expect(quick > 1.1 && quick < 1.4, "\(all)")
        #expect(made > 2.05 && made < 2.4, "\(all)")
        // Four times the usual wait and its handshakes (two round trips with TLS): 3.48 s.
        #expect(stalled > 3.3 && stalled < 3.7, "\(all)")
    }

    /// One connection, begun, that receives nothing; no retries, a stall timeout of 2 s.
    static func oneSilentConnection() -> Script {
        var s = Script(size: 256 * MiB, connections: 1) {
            $0.retries = 0
            $0.stallTimeout = 2
            $0.redialSlow = false
        }
        s.rates[0] = 0
        s.begin()
        return s
    }

    /// The progress counts the bytes in the file: the parts of chunks an earlier run (or the probe)
    /// wrote, before and after a connection continues them, and an owner's bytes while it waits to
    /// retry (its next request continues after them).
    @Test func progressCountsKeptPartsAndTheBytesOfAnOwnerWaitingToRetry() {
        let MiB = Int64(Self.MiB)
        var s = Script(size: 8 * Self.MiB, connections: 2, partialChunks: [0: 300_000, 4: 4 * MiB + 200_000])
        func completed(_ s: Script) -> Int64 { s.c.progress(now: s.now, elapsed: s.now).completedBytes }
        #expect(completed(s) == 500_000)
        s.begin()
        s.run(until: 0.3)
        #expect(s.starts(of: 0).first?.bytes.lowerBound == 300_000)
        #expect(s.starts(of: 1).first?.bytes.lowerBound == 4 * MiB + 200_000)
        #expect(s.c.receivedBytes > 0)
        #expect(completed(s) == 500_000 + s.c.receivedBytes)
        // Connection 0's transfer breaks inside a chunk: its bytes stay counted while it waits.
        let before = completed(s)
        s.end(0, .transient("reset"))
        #expect(s.c.connections[0].machine.isWaiting)
        #expect(completed(s) == before)
        var last = before
        while !s.c.isComplete && s.now < 10 {
            s.run(until: s.now + 0.05)
            #expect(completed(s) >= last)
            last = completed(s)
        }
        #expect(s.c.isComplete && completed(s) == 8 * MiB && s.c.receivedBytes == 8 * MiB - 500_000)
    }

    /// Each connection's shown rate is what it receives now: within its first second (it read 0
    /// until a transfer was 1.5 s old, so a connection on short requests showed 0 for most of a fast
    /// download), and falling to 0 once it receives nothing. The connections' rates add up to the
    /// download's.
    @Test func shownRatesAreEachConnectionsRateNow() {
        let MiB = Double(Self.MiB)
        var s = Script(size: 64 * Self.MiB, connections: 2)
        s.rates = [0: 8 * MiB, 1: 2 * MiB]
        s.begin()
        func shown(_ s: Script) -> [Double] { s.c.progress(now: s.now, elapsed: s.now).connections.map(\.bytesPerSecond) }
        s.run(until: 0.6)
        var r = shown(s)
        #expect(abs(r[0] - 8 * MiB) < 2 * MiB && abs(r[1] - 2 * MiB) < 0.5 * MiB, "\(r)")
        s.run(until: 2.5)
        let total = s.c.progress(now: s.now, elapsed: s.now).bytesPerSecond
        #expect(abs(shown(s).reduce(0, +) - total) < 0.1 * total, "\(shown(s)) against \(total)")
        // Connection 0 receives nothing more (its server went silent): its rate falls to 0.
        s.rates[0] = 0
        s.run(until: 3.5)
        r = shown(s)
        #expect(r[0] < 0.6 * 8 * MiB && abs(r[1] - 2 * MiB) < 0.5 * MiB, "\(r)")
        s.run(until: 4.8)
        #expect(shown(s)[0] == 0, "\(shown(s))")
    }

    /// Each connection's remaining bytes are those of the run it holds, also before its request
    /// goes out (they once counted from byte 0: 2, 4, 6 and 8 MiB for four runs of 2 MiB), and
    /// shrink as it receives.
    @Test func progressTellsEachRunsRemainingBytesBeforeItsRequest() {
        let MiB = Int64(Self.MiB)
        var s = Script(size: 8 * Self.MiB, connections: 4)
        s.begin()
        func remaining(_ s: Script) -> [Int64] { s.c.progress(now: s.now, elapsed: s.now).connections.map(\.remainingBytes) }
        #expect(s.c.connections[3].machine.isWaiting)
        #expect(remaining(s) == [2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB])
        s.run(until: 0.3)
        let now = remaining(s)
        #expect(s.c.receivedBytes > 0)
        #expect(now.reduce(0, +) == 8 * MiB - s.c.receivedBytes)
        #expect(now.allSatisfy { $0 <= 2 * MiB })
    }

    /// A connection cut short after enough bytes is continued at once from the byte it
    /// reached, and the cuts do not add up to a failure: a server that closes every answer after
    /// 3 MiB serves a 16 MiB file to one connection with `--retries 1`, and with `--retries 0`.
    /// (Before: each cut counted, with its backoff, and the second ended the download.)
    @Test(arguments: [1, 0]) func aCutAfterProgressIsContinuedAtOnceAndCountsNoFailure(retries: Int) {
        let MiB = Int64(Self.MiB)
        var s = Script(size: 16 * Self.MiB, connections: 1) { $0.retries = retries }
        s.begin()
        var cutAt: [Int64] = []
        var brought: [Int64] = []
        while !s.c.isComplete && s.now < 10 {
            s.run(until: s.now + 0.01)
            let conn = s.c.connections[0]
            if conn.machine.isTransferring && conn.transferBytes >= 3 * MiB {
                cutAt.append(conn.pos)
                brought.append(conn.transferBytes)
                s.end(0, .partial)
            }
        }
        #expect(s.c.isComplete && s.c.stop == nil && cutAt.count == 5)
        let retries = s.events.compactMap { if case .retry(_, let a, let d, let r) = $0 { (a, d, r) } else { nil } }
        #expect(retries.count == 5 && retries.allSatisfy { $0.0 == 1 && $0.1 == 0 })
        #expect(retries.map(\.2) == zip(cutAt, brought).map { "the connection ended \(16 * MiB - $0) bytes early, after \($1) bytes" })
        // Each request continued from the byte the one before reached.
        #expect(Array(s.starts(of: 0).map(\.bytes.lowerBound).dropFirst()) == cutAt)
        #expect(s.c.receivedBytes == 16 * MiB)
    }

    /// A cut before enough bytes (fewer than `CutContinuation.minimumBytes`) is a failure
    /// with its backoff, and the retries run out as for a transfer that brought nothing.
    @Test func aCutBeforeProgressWaitsItsBackoffAndCounts() {
        var s = Script(size: 4 * Self.MiB, connections: 1) { $0.retries = 1 }
        s.rates[0] = 1_000_000
        s.begin()
        s.run(until: 0.05)
        #expect(s.c.connections[0].transferBytes < CutContinuation.minimumBytes)
        s.end(0, .partial)
        guard case .retry(0, 1, let delay, _) = s.events.last else { Issue.record("no retry: \(s.events)"); return }
        #expect(delay == 1)
        s.run(until: s.now + 1.05)
        #expect(s.c.connections[0].machine.isTransferring)
        s.end(0, .partial)
        #expect((s.c.stop as? SeggetError)?.kind == .network)
    }

    @Test func aShorterAnswerIsContinuedWithoutAFailure() {
        var s = Script(size: 4 * Self.MiB, connections: 1)
        s.begin()
        var h = ResponseHead()
        h.append(line: "HTTP/1.1 206 Partial Content\r\n")
        h.append(line: Substring("Content-Range: bytes 0-99999/\(4 * Self.MiB)\r\n"))
        h.append(line: "\r\n")
        #expect(s.handle(.body(0, count: 100_000, head: h, budgetAllows: true)) == [.write(0, from: 0, count: 100_000, at: 0), .body(.proceed)])
        // libcurl ends the transfer there (a byte more would be refused: see `room`).
        #expect(s.c.connections[0].machine.stopReason == nil)
        s.now = 0.1
        #expect(s.handle(.ended(0, .ok, head: h)) == [.start(0, bytes: 100_000..<Int64(4 * Self.MiB), fresh: false, newPath: false)])
        #expect(s.c.connections[0].attempts == 0)
    }

    /// One stream of unknown length (no Content-Length), not yet begun.
    static func unknownLengthStream(retries: Int? = nil) -> EngineCore {
        var config = Coordinator.Config()
        config.ranged = false
        config.totalLength = nil
        if let retries { config.retries = retries }
        config.jitter = { 1 }
        return EngineCore(stream: SingleStream(config: config))
    }

    /// A 200 answer's head without a Content-Length.
    static var headWithoutLength: ResponseHead {
        var h = ResponseHead()
        h.append(line: "HTTP/1.1 200 OK\r\n")
        h.append(line: "\r\n")
        return h
    }

    @Test func aStreamRetriesFromByteZero() {
        var s = Self.unknownLengthStream()
        let h = Self.headWithoutLength
        #expect(s.handle(.begin, now: 0) == [.start(0, bytes: 0..<Int64.max, fresh: false, newPath: false)])
        #expect(s.handle(.body(0, count: 1000, head: h, budgetAllows: true), now: 0) == [.write(0, from: 0, count: 1000, at: 0), .body(.proceed)])
        #expect(s.handle(.ended(0, .transient("reset"), head: h), now: 0.5) == [.event(.retry(connection: 0, attempt: 1, delay: 1, reason: "reset"))])
        #expect(s.handle(.pass(offered: nil), now: 1.4).isEmpty)
        #expect(s.handle(.pass(offered: nil), now: 1.5) == [.start(0, bytes: 0..<Int64.max, fresh: true, newPath: false)])
        // A chunked body that ends cleanly ends the stream where it is.
        #expect(s.handle(.body(0, count: 2000, head: h, budgetAllows: true), now: 5) == [.write(0, from: 0, count: 2000, at: 0), .body(.proceed)])
        #expect(s.handle(.ended(0, .ok, head: h), now: 6).isEmpty)
        #expect(s.isComplete && s.finishedBytes == 2000)
        #expect(s.progress(now: 6, elapsed: 6).completedBytes == 2000)
        // No length, no piece map.
        #expect(s.progress(now: 6, elapsed: 6).finishedRanges.isEmpty)
    }

    /// A stream of unknown length whose retries run out names the bytes it missed in words: the
    /// end it does not know was `Int64.max`, and the failure said "bytes 5000-9223372036854775806"
    /// (found by an exploratory test of the daemon against a server that sent no Content-Length
    /// and stalled after 5000 bytes).
    @Test func aStreamOfUnknownLengthsFailureNamesNoEnd() {
        var s = Self.unknownLengthStream(retries: 0)
        let h = Self.headWithoutLength
        _ = s.handle(.begin, now: 0)
        #expect(s.handle(.body(0, count: 5000, head: h, budgetAllows: true), now: 0) == [.write(0, from: 0, count: 5000, at: 0), .body(.proceed)])
        _ = s.handle(.ended(0, .transient("stalled"), head: h), now: 1)
        let failure = s.stop as? SeggetError
        #expect(failure?.message.hasPrefix("bytes 5000 onwards failed 1 time (last: stalled); ") == true, "\(failure?.message ?? "none")")
        #expect(failure?.message.contains("922337") == false)
    }

    @Test func aStreamOfKnownLengthRefusesMoreAndRetriesWhenCutShort() {
        var config = Coordinator.Config()
        config.ranged = false
        config.totalLength = 100
        config.jitter = { 1 }
        var s = EngineCore(stream: SingleStream(config: config))
        _ = s.handle(.begin, now: 0)
        var h = ResponseHead()
        h.append(line: "HTTP/1.1 200 OK\r\n")
        h.append(line: "Content-Length: 100\r\n")
        h.append(line: "\r\n")
        #expect(s.handle(.body(0, count: 60, head: h, budgetAllows: true), now: 0) == [.write(0, from: 0, count: 60, at: 0), .body(.proceed)])
        #expect(s.handle(.ended(0, .ok, head: h), now: 1) == [.event(.retry(connection: 0, attempt: 1, delay: 1, reason: "the connection ended 40 bytes early"))])
        _ = s.handle(.pass(offered: nil), now: 2)
        // The whole stream again, and one byte more than announced: the extra byte is refused.
        #expect(s.handle(.body(0, count: 101, head: h, budgetAllows: true), now: 2) == [.write(0, from: 0, count: 100, at: 0), .crossed(0, Coordinator.Crossing()), .body(.abort)])
        #expect(s.connections[0].machine.stopReason == .fatal(SeggetError(.protocolViolation, "the server sent more than the 100 bytes it announced; the file on the server may have changed. Run the command again.")))
    }

    /// The shell's body callback and the tests take one path: a delivery that spans chunk ends is
    /// cut there, each piece written and then its crossing recorded; a paused budget keeps the bytes.
    @Test func aBodyIsCutAtChunkEndsAndTheBudgetPauses() {
        var s = Script(size: 4 * Self.MiB, chunk: Self.MiB, connections: 1)
        s.begin()
        let actions = s.handle(.body(0, count: Self.MiB + 10, head: s.head(0), budgetAllows: true))
        #expect(actions == [
            .write(0, from: 0, count: Self.MiB, at: 0), .crossed(0, Coordinator.Crossing(finishedChunk: 0)),
            .write(0, from: Self.MiB, count: 10, at: Int64(Self.MiB)), .body(.proceed),
        ])
        #expect(s.handle(.body(0, count: 5, head: s.head(0), budgetAllows: false)) == [.body(.pause)])
        s.handle(.resumed(0))
        #expect(s.handle(.body(0, count: 5, head: s.head(0), budgetAllows: true)) == [.write(0, from: 0, count: 5, at: Int64(Self.MiB) + 10), .body(.proceed)])
    }
}
