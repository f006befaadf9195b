import Foundation
import Testing
@testable import Segget

/// Issue 16's slow tail in `SlowConnectionRule` (the rest of its tests are in `PlanTests.swift`).
@Suite struct SlowConnectionRuleTailTests {
    typealias Observation = SlowConnectionRule.Observation

    static let peers = (0..<3).map { Observation(id: $0, bytes: 2 << 20, seconds: 0.5, remainingBytes: 8 << 20) }

    /// A request that sent 256 KiB at the typical 4 MiB/s and then trickled averages 1.5 MiB/s after
    /// 0.17 s: below 0.4 of typical. With 0.75 MiB of its chunk left that average would need 0.5 s,
    /// less than two windows, but a fresh request needs 0.2 s: it is re-dialled now.
    @Test func aYoungRequestThatSlowedDownIsJudgedOnWhatAFreshOneWouldTake() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        func young(_ seconds: Double, left: Int64) -> Observation {
            Observation(id: 3, bytes: 256 << 10, seconds: seconds, remainingBytes: left)
        }
        #expect(rule.judge(Self.peers + [young(0.17, left: 768 << 10)], now: 0, usualFirstByteWait: 0.01).map(\.id) == [3])
        #expect(rule.judge(Self.peers + [young(0.17, left: 300 << 10)], now: 0, usualFirstByteWait: 0.01).map(\.id) == [3])
        // Above 0.4 of typical it is not slow, however little is left.
        #expect(rule.judge(Self.peers + [young(0.15, left: 768 << 10)], now: 0, usualFirstByteWait: 0.01).isEmpty)
        // 20 KiB left: it finishes at its average (0.013 s) before a fresh request would (0.015 s).
        #expect(rule.judge(Self.peers + [young(0.17, left: 20 << 10)], now: 0, usualFirstByteWait: 0.01).isEmpty)
    }

    /// A line too narrow for `minTypicalRate` a connection (20 Mbit/s over 8 connections, 2 % loss):
    /// the slowest connection, re-dialled to look for a faster answer, reads four times faster a moment
    /// later only because a loss had just halved its window, and no faster than the others; another
    /// connection is the slowest by then. That is no faster answer found: the tries keep their doubling
    /// hold-off. The next try came at once each time: a re-dial every half second here (exploratory run 10:
    /// 18 re-dials and 48 requests for 64 MiB, aria2c's 17).
    @Test func aNarrowLineIsExploredLessAndLess() {
        var rule = SlowConnectionRule(maxTotalRedials: 1000)
        var explored = 0
        var slowest = 0
        for round in 0..<60 {
            let observations = (0..<8).map { id in
                Observation(id: id, bytes: Int64(id == slowest ? 60 : 300) << 10, seconds: 2, remainingBytes: 16 << 20)
            }
            let verdicts = rule.judge(observations, now: Double(round) / 2, usualFirstByteWait: 0.3, rtt: 0.3)
            explored += verdicts.filter(\.exploring).count
            if !verdicts.isEmpty { slowest = (slowest + 1) % 8 }
        }
        #expect(explored >= 1 && explored <= 6, "\(explored) explorations in 30 s")
    }

    /// A long path (600 ms, TLS): every answer is slow for seconds while slow start doubles each
    /// connection's rate every round trip. Connections still growing like that are not re-dialled
    /// to look for a faster answer (a re-dial starts the climb again behind two round trips of
    /// handshakes: 32 MiB at -n 4 took 13.6 s, aria2c 10.9 s); the same rates no longer growing are.
    /// (4 s after their first bytes: past what slow start needs at 700 ms to reach 256 KiB/s, for
    /// which see `slowStartIsWaitedForOnAVeryLongPath`.)
    @Test func connectionsStillInSlowStartAreNotExplored() {
        func round(_ growth: Double?) -> Int {
            var rule = SlowConnectionRule(maxTotalRedials: 24)
            var explored = 0
            for tick in 0..<40 {
                let observations = (0..<4).map { id in
                    var o = Observation(id: id, bytes: Int64(200 + 20 * id) << 10, seconds: 2, remainingBytes: 8 << 20)
                    o.age = 4 + Double(tick) * 0.05
                    o.growth = growth
                    return o
                }
                explored += rule.judge(observations, now: 4 + Double(tick) * 0.05, usualFirstByteWait: 0.7, rtt: 0.7)
                    .filter(\.exploring).count
            }
            return explored
        }
        #expect(round(2.0) == 0)
        #expect(round(1.6) == 0)
        #expect(round(1.0) >= 1, "the counter-case: the same slow answers, not growing, are explored")
        #expect(round(nil) >= 1, "growth not known: explored as before")
    }

    /// A 1,000 ms path (1.18 s round trips, TLS) from a server whose TCP paces its sends (BBR): the
    /// first round trips brought about 40 KB each, flat, and the probe's connection, ahead of the
    /// others at 47 KiB/s, was re-dialled 2.4 s after its first byte (19.1 s and 12 requests for 32
    /// MiB at -n 4, against 14.7 s and 8). Slow start needs 5.2 s there to reach the 256 KiB/s below
    /// which every answer counts as slow: until then and a round trip more (6.4 s), a connection
    /// that has what slow start delivers over the same seconds of its age is not a candidate. A
    /// trickle at that age is, and so are the same rates past it (at 150 KiB/s, every connection:
    /// above 0.4 of 256 KiB/s, so only the end of the wait lets them be explored).
    @Test func slowStartIsWaitedForOnAVeryLongPath() {
        /// Bytes a second over the observation's seconds at `now`, per connection.
        typealias Rates = (_ id: Int, _ now: Double) -> Double
        func flat(_ kib: Double, others: Double = 31.5) -> Rates { { id, _ in (id == 0 ? kib : others) * 1024 } }
        // Connection 0 at 0.8 of what slow start at 1.18 s brings over the same seconds, the others at 0.6.
        let climbing: Rates = { id, now in
            let w = min(now, 2)
            let s = SlowConnectionRule.slowStartBytes(seconds: now, rtt: 1.18) - SlowConnectionRule.slowStartBytes(seconds: now - w, rtt: 1.18)
            return (id == 0 ? 0.8 : 0.6) * s / w
        }
        func explored(_ rates: Rates, from age: Double, rtt: Double? = 1.18, networkRTT: Double? = nil, ownRTT: Double? = nil) -> Int {
            var rule = SlowConnectionRule(maxTotalRedials: 24)
            var count = 0
            for tick in 0..<40 {
                let now = age + Double(tick) * 0.05
                let observations = (0..<4).map { id in
                    var o = Observation(id: id, bytes: Int64(rates(id, now) * min(now, 2)), seconds: min(now, 2),
                                        remainingBytes: id == 0 ? 8 << 20 : 6 << 20)
                    o.age = now
                    o.growth = 1
                    if let ownRTT { o.path = .init(roundTrip: ownRTT, usualFirstByteWait: ownRTT) }
                    return o
                }
                count += rule.judge(observations, now: now, usualFirstByteWait: rtt, rtt: rtt, networkRTT: networkRTT)
                    .filter(\.exploring).count
            }
            return count
        }
        #expect(explored(flat(47), from: 2.4) == 0, "what slow start delivers 2.4 s in")
        #expect(explored(climbing, from: 2.4) == 0, "and as it climbs, to 4.4 s")
        #expect(explored(climbing, from: 4.3) == 0, "to 6.3 s")
        #expect(explored(flat(4), from: 3.7) >= 1, "a trickle at the same age")
        #expect(explored(flat(47), from: 3.7) >= 1, "no climb: behind slow start by 4.9 s")
        // Once slow start had its time, only a trickle (under 0.4 of 256 KiB/s) is a candidate there.
        #expect(explored(flat(47), from: 6.5) >= 1, "47 KiB/s once slow start had its time")
        #expect(explored(flat(150, others: 150), from: 3.7) == 0)
        #expect(explored(flat(150, others: 150), from: 6.5) == 0)
        #expect(explored(flat(90, others: 90), from: 6.5) >= 1, "under 0.4 of 256 KiB/s")
        #expect(explored(flat(150, others: 150), from: 6.5, rtt: 0.1) >= 1, "a short path: as before")
        // No round trip known: as before, explored.
        #expect(explored(flat(47), from: 2.4, rtt: nil) >= 1)
        // A server that thinks 2 s before each head on a 10 ms path: the kernel's round trip counts.
        #expect(explored(flat(47), from: 2.4, rtt: 2, networkRTT: 0.01) >= 1)
        #expect(explored(flat(47), from: 2.4, rtt: 2) == 0, "the counter-case: no kernel round trip known")
        // A mirror's own round trip, where the download's is short.
        #expect(explored(flat(47), from: 2.4, rtt: 0.05, ownRTT: 1.18) == 0)
        #expect(explored(flat(47), from: 2.4, rtt: 0.05) >= 1)
    }

    /// What slow start is taken to deliver over a request's latest seconds, against its average.
    @Test func slowStartIsComparedOverTheSameSeconds() {
        func keepsUp(_ o: Observation, age: Double, rtt: Double?) -> Bool {
            SlowConnectionRule.keepsUpWithSlowStart(o, age: age, settled: 2, rtt: rtt, slowFraction: 0.4, floor: 262_144)
        }
        var o = Observation(id: 0, bytes: 60 << 10, seconds: 2, remainingBytes: 1 << 20)
        // 30 KiB/s over the last 2 s of 5 s at 1.18 s round trips: slow start brought 99 KB/s there
        // (its average since the first byte: 54 KB/s), so under 0.4 of it.
        #expect(!keepsUp(o, age: 5, rtt: 1.18))
        o.bytes = 100 << 10
        #expect(keepsUp(o, age: 5, rtt: 1.18))
        #expect(!keepsUp(o, age: 6.5, rtt: 1.18), "past 5.2 + 1.18 s: under 0.4 of 256 KiB/s")
        o.bytes = 220 << 10
        #expect(keepsUp(o, age: 6.5, rtt: 1.18))
        #expect(!keepsUp(o, age: 5, rtt: nil))
        #expect(!keepsUp(o, age: 5, rtt: 0.1), "a short path")
    }

    /// Every answer so far slow, and requests waiting for their first byte: none is re-dialled to
    /// look for a faster answer before any first byte came (a 1,000 ms path: the first requests
    /// were re-dialled after 1.06 s), nor before it waited four times the usual wait (a fresh
    /// connection's first byte comes three round trips after it is dialled).
    @Test func firstByteWaitsAreExploredOnlyAgainstAUsualWait() {
        func explored(usual: Double?, waited: Double, handshakes: Double = 0) -> Int {
            var rule = SlowConnectionRule(maxTotalRedials: 24)
            var count = 0
            for tick in 0..<20 {
                var observations = (0..<2).map { id in
                    var o = Observation(id: id, bytes: 40 << 10, seconds: 1, remainingBytes: 8 << 20)
                    o.age = 1
                    o.growth = 2
                    return o
                }
                var waiting = Observation(id: 2, bytes: 0, seconds: 0, waitingForFirstByte: waited, remainingBytes: 8 << 20)
                waiting.handshakeSeconds = handshakes
                observations.append(waiting)
                count += rule.judge(observations, now: Double(tick) * 0.1, usualFirstByteWait: usual, rtt: 1.0)
                    .filter(\.exploring).count
            }
            return count
        }
        #expect(explored(usual: nil, waited: 3) == 0, "no first byte came yet")
        #expect(explored(usual: 1.2, waited: 4.7) == 0, "under four times the usual wait")
        #expect(explored(usual: 1.2, waited: 4.9) >= 1, "past four times the usual wait")
        #expect(explored(usual: 1.2, waited: 4.9, handshakes: 2.4) == 0, "its new connection's handshakes come first")
        #expect(explored(usual: 1.2, waited: 14.5, handshakes: 2.4) >= 1, "past four times both")
    }

    /// A request whose connection is still being made waits for its handshakes before its request
    /// goes out: its first byte is due four times the usual wait and those later (600 ms, a 20 Mbit/s
    /// line with its queue full: a re-dial's new connection needs three round trips of 1.2 s, and was
    /// re-dialled again and again at 0 B/s after 4 x 0.71 s). Without handshakes ahead (its connection
    /// made, or kept open) it is judged on four usual waits.
    @Test func aRequestWhoseConnectionIsBeingMadeIsGivenItsHandshakes() {
        func verdicts(waited: Double, handshakes: Double, usual: Double = 0.71, rtt: Double = 0.6) -> [Int] {
            var rule = SlowConnectionRule(maxTotalRedials: 24)
            var silent = Observation(id: 3, bytes: 0, seconds: 0, waitingForFirstByte: waited, remainingBytes: 8 << 20)
            silent.handshakeSeconds = handshakes
            return rule.judge(Self.peers + [silent], now: 0, usualFirstByteWait: usual, rtt: rtt, handshakeSeconds: 2 * rtt).map(\.id)
        }
        #expect(verdicts(waited: 3, handshakes: 0) == [3])
        #expect(verdicts(waited: 3, handshakes: 1.2).isEmpty)
        #expect(verdicts(waited: 7.6, handshakes: 1.2).isEmpty)
        #expect(verdicts(waited: 7.7, handshakes: 1.2) == [3])
        // 20 ms: four times the usual wait, and the handshakes while they last.
        #expect(verdicts(waited: 0.125, handshakes: 0, usual: 0.03, rtt: 0.02) == [3])
        #expect(verdicts(waited: 0.115, handshakes: 0, usual: 0.03, rtt: 0.02).isEmpty)
        #expect(verdicts(waited: 0.285, handshakes: 0.04, usual: 0.03, rtt: 0.02) == [3])
        #expect(verdicts(waited: 0.275, handshakes: 0.04, usual: 0.03, rtt: 0.02).isEmpty)
    }

    /// What `growth` reads from a connection's samples: about 2 for a rate doubling every span (slow
    /// start), about 1 for a steady one, nothing where the samples do not cover two spans.
    @Test func growthReadsSlowStartFromTheSamples() throws {
        var doubling = Connection(id: 0)
        var steady = Connection(id: 1)
        for step in 0...40 {
            let t = Double(step) * 0.05
            // 1,000 bytes doubling every 0.5 s (ten samples), and 1,000 bytes a sample.
            var bytes = 1000.0
            for _ in 0..<(step / 10) { bytes *= 2 }
            doubling.transferBytes = Int64(bytes * (1 + Double(step % 10) / 10))
            doubling.sample(now: t)
            steady.transferBytes = Int64(step) * 1000
            steady.sample(now: t)
        }
        let g = try #require(doubling.growth(span: 0.5))
        #expect(g > 1.8 && g < 2.2, "\(g)")
        let one = try #require(steady.growth(span: 0.5))
        #expect(abs(one - 1) < 0.05, "\(one)")
        #expect(steady.growth(span: 1.5) == nil, "2 s of samples do not cover two spans of 1.5 s")
    }

    /// Samples are kept by time: with the slow rule's rounds (every 0.05 s) and the progress ticks
    /// (every 0.25 s) both sampling, 64 samples covered 2.7 s, and the growth over two round trips
    /// of a 1.5 s path was never known (with `-q`, fewer samples, it was).
    @Test func samplesCoverTwoRoundTripsOfAVeryLongPathHoweverOftenTaken() throws {
        var c = Connection(id: 0)
        var t = 0.0
        var ticks = 0
        while t < 3.7 {
            // Bytes doubling every 1.5 s.
            c.transferBytes = Int64(14_480 * pow(2, t / 1.5))
            c.sample(now: t)
            t += 0.05
            if Int(t / 0.25) > ticks {
                ticks = Int(t / 0.25)
                c.sample(now: t - 0.025)
            }
        }
        let g = try #require(c.growth(span: 1.5))
        #expect(g > 1.8 && g < 2.2, "\(g)")
        // Nothing older than `sampleSeconds` is kept.
        for step in 0..<400 { c.sample(now: 3.7 + Double(step) * 0.05) }
        #expect(c.samples.count <= Int(Connection.sampleSeconds / 0.05) + 1)
    }

    /// Rates measured on a source that was dropped (a fast mirror that sent bad pieces) are
    /// forgotten: the connections left on a slower mirror are judged against each other, not against
    /// the dropped one's rate (they were re-dialled "at 6.5 MiB/s against a typical 181 MiB/s").
    @Test func ratesOfADroppedSourceAreForgotten() {
        func at(_ id: Int, mibPerSecond: Int64) -> Observation {
            Observation(id: id, bytes: mibPerSecond << 20, seconds: 1, remainingBytes: 16 << 20)
        }
        // Connections 0 and 1 on the fast mirror, 2 and 3 on the slower one.
        let both = [at(0, mibPerSecond: 180), at(1, mibPerSecond: 180), at(2, mibPerSecond: 6), at(3, mibPerSecond: 5)]
        let left = [at(2, mibPerSecond: 6), at(3, mibPerSecond: 5)]
        var kept = SlowConnectionRule(maxTotalRedials: 24)
        _ = kept.judge(both, now: 0, usualFirstByteWait: 0.01)
        #expect(!kept.judge(left, now: 1, usualFirstByteWait: 0.01).isEmpty, "without forgetting, the dropped mirror's rate is typical")
        var forgot = SlowConnectionRule(maxTotalRedials: 24)
        _ = forgot.judge(both, now: 0, usualFirstByteWait: 0.01)
        forgot.forget([0, 1])
        #expect(forgot.typical == nil)
        #expect(forgot.judge(left, now: 1, usualFirstByteWait: 0.01).isEmpty)
        #expect((forgot.typical ?? 0) < Double(7 << 20))
    }

    /// The same request judged on a whole window keeps the two-window bar (measured on nginx's
    /// uneven benchmark): 0.75 MiB at 1.5 MiB/s is half a second, not worth a new connection.
    @Test func aWholeWindowKeepsTheTwoWindowBar() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        let mature = Observation(id: 3, bytes: 768 << 10, seconds: 0.5, remainingBytes: 768 << 10)
        #expect(rule.judge(Self.peers + [mature], now: 0, usualFirstByteWait: 0.01).isEmpty)
        let more = Observation(id: 3, bytes: 768 << 10, seconds: 0.5, remainingBytes: 2 << 20)
        #expect(rule.judge(Self.peers + [more], now: 0, usualFirstByteWait: 0.01).map(\.id) == [3])
    }

    /// On a long path (a new connection needs a while of slow start to reach the typical rate) a
    /// connection at a quarter of the typical rate is in loss recovery, not a slow answer: it is kept
    /// (WAN link b: re-dialled at 501-828 KiB/s against 1.3-2.5 MiB/s, every new connection crawled at
    /// 45-120 KiB/s for the remaining 10 s). A trickle far below a tenth is still re-dialled there; on a
    /// LAN the quarter is re-dialled as before.
    @Test func aLongPathKeepsAConnectionInLossRecovery() {
        func slow(_ kib: Int64) -> Observation {
            Observation(id: 3, bytes: kib << 11, seconds: 2, remainingBytes: 16 << 20)
        }
        var wan = SlowConnectionRule(maxTotalRedials: 24)
        #expect(wan.judge(Self.peers + [slow(1024)], now: 0, usualFirstByteWait: 0.3, rtt: 0.15).isEmpty)
        #expect(wan.judge(Self.peers + [slow(256)], now: 1, usualFirstByteWait: 0.3, rtt: 0.15).map(\.action) == [.redial])
        var lan = SlowConnectionRule(maxTotalRedials: 24)
        #expect(lan.judge(Self.peers + [slow(1024)], now: 0, usualFirstByteWait: 0.01, rtt: 0.0002).map(\.action) == [.redial])
    }

    /// A re-dial that did not pay (WAN link b: the new connection crawled at 28 KiB/s where the one it
    /// replaced had 256 KiB/s) is not followed by another at once, but after a hold-off; a new connection
    /// that is slow yet faster than the one it replaced (a slow server drawn again) may be re-dialled at
    /// once, as before. So is one on a LAN, where a new connection is at full speed at once.
    @Test func aRedialThatDidNotPayWaitsBeforeTheNext() {
        var rule = SlowConnectionRule(maxTotalRedials: 24)
        func slow(_ kib: Int64, redials: Int) -> Observation {
            Observation(id: 3, bytes: kib << 11, seconds: 2, remainingBytes: 16 << 20, consecutiveRedials: redials)
        }
        // 256 KiB/s against a typical 4 MiB/s: below a tenth, re-dialled even on a long path.
        #expect(rule.judge(Self.peers + [slow(256, redials: 0)], now: 0, usualFirstByteWait: 0.01, rtt: 0.15).map(\.action) == [.redial])
        // Its new connection at 28 KiB/s: unpaid; it keeps its chunk and waits.
        #expect(rule.judge(Self.peers + [slow(28, redials: 1)], now: 1, usualFirstByteWait: 0.01, rtt: 0.15).map(\.action) == [.keepOnlyTheChunkInFlight])
        #expect(rule.unpaidRedials == 1)
        #expect(rule.judge(Self.peers + [slow(28, redials: 1)], now: 2.9, usualFirstByteWait: 0.01, rtt: 0.15).map(\.action) == [.keepOnlyTheChunkInFlight])
        #expect(rule.unpaidRedials == 1)
        // After the hold-off (2 s), one more try.
        #expect(rule.judge(Self.peers + [slow(28, redials: 1)], now: 3.1, usualFirstByteWait: 0.01, rtt: 0.15).map(\.action) == [.redial])

        var other = SlowConnectionRule(maxTotalRedials: 24)
        #expect(other.judge(Self.peers + [slow(64, redials: 0)], now: 0, usualFirstByteWait: 0.01, rtt: 0.15).map(\.action) == [.redial])
        #expect(other.judge(Self.peers + [slow(128, redials: 1)], now: 1, usualFirstByteWait: 0.01, rtt: 0.15).map(\.action) == [.redial])
        #expect(other.unpaidRedials == 0)

        var lan = SlowConnectionRule(maxTotalRedials: 24)
        #expect(lan.judge(Self.peers + [slow(1024, redials: 0)], now: 0, usualFirstByteWait: 0.01, rtt: 0.0002).map(\.action) == [.redial])
        #expect(lan.judge(Self.peers + [slow(28, redials: 1)], now: 1, usualFirstByteWait: 0.01, rtt: 0.0002).map(\.action) == [.redial])
        #expect(lan.unpaidRedials == 0)
    }

    /// A full bottleneck (exploratory run 9: 100 Mbit/s, 80 ms): while the total holds up, the others
    /// took the slow connection's share, and a new connection would only take it back: it keeps its
    /// chunk in flight, no request spent, and nothing counts against its re-dials. Where the total fell
    /// by its deficit (a server's cap per answer: the others cannot take more), it is re-dialled as before.
    /// A request still waiting for its first byte is no share of the pipe: judged as before.
    @Test func aSlowConnectionWhoseShareTheOthersTookKeepsItsChunk() {
        let typical = 4.0 * 1048576  // the peers' rate
        func slow(_ kib: Int64) -> Observation {
            Observation(id: 3, bytes: kib << 11, seconds: 2, remainingBytes: 16 << 20)
        }
        var full = SlowConnectionRule(maxTotalRedials: 24)
        let heldUp = (current: 15.5 * 1048576, usual: 16.0 * 1048576)
        #expect(full.judge(Self.peers + [slow(256)], now: 0, usualFirstByteWait: 0.01, rtt: 0.15, pipe: heldUp).map(\.action) == [.keepOnlyTheChunkInFlight])
        #expect(full.totalRedials == 0)
        let fell = (current: 12.25 * 1048576, usual: 16.0 * 1048576)
        #expect(full.judge(Self.peers + [slow(256)], now: 1, usualFirstByteWait: 0.01, rtt: 0.15, pipe: fell).map(\.action) == [.redial])
        var waiting = SlowConnectionRule(maxTotalRedials: 24)
        let silent = Observation(id: 3, bytes: 0, seconds: 0, waitingForFirstByte: 2, remainingBytes: 16 << 20)
        #expect(waiting.judge(Self.peers + [silent], now: 0, usualFirstByteWait: 0.01, rtt: 0.15, pipe: heldUp).map(\.action) == [.redial])
        // The line between the two: half the deficit.
        let deficit = typical - 128 * 1024
        #expect(SlowConnectionRule.absorbs((16e6 - 0.49 * deficit, 16e6), deficit: deficit))
        #expect(!SlowConnectionRule.absorbs((16e6 - 0.51 * deficit, 16e6), deficit: deficit))
        #expect(!SlowConnectionRule.absorbs((16e6, 0), deficit: deficit))
    }
}
