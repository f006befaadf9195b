import Testing

@testable import SeggetRPC

/// The wrong-token throttle on a scripted clock: free failures, doubling delays up to the cap,
/// decay, bursts reported once, separate addresses, and a bounded table.
@Suite struct AuthThrottleTests {
    let t0 = ContinuousClock.now

    func at(_ seconds: Double) -> ContinuousClock.Instant { t0 + .milliseconds(Int64(seconds * 1000)) }

    @Test func firstFailuresAreFreeThenTheDelayDoublesUpToTheCap() {
        var throttle = AuthThrottle()
        var delays: [Duration] = []
        for _ in 0..<12 { delays.append(throttle.recordFailures(1, from: "127.0.0.1", at: t0).delay) }
        #expect(
            delays == [
                .zero, .zero, .zero, .zero, .zero, .milliseconds(100), .milliseconds(200), .milliseconds(400),
                .milliseconds(800), .milliseconds(1600), .seconds(2), .seconds(2),
            ])
    }

    @Test func delayIsBoundedHoweverManyFailures() {
        var throttle = AuthThrottle()
        #expect(throttle.recordFailures(1_000_000, from: "a", at: t0).delay == .seconds(2))
        for _ in 0..<1000 { _ = throttle.recordFailures(1000, from: "a", at: t0) }
        #expect(throttle.recordFailures(1, from: "a", at: t0).delay == .seconds(2))
        #expect(throttle.delay(forScore: .greatestFiniteMagnitude) == .seconds(2))
        #expect(throttle.delay(forScore: .infinity) == .seconds(2))
    }

    @Test func aBurstIsReportedOnceWhenItStarts() {
        var throttle = AuthThrottle()
        let first = throttle.recordFailures(1, from: "a", at: t0)
        #expect(first.startsBurst && first.previousBurst == nil)
        for i in 1..<50 { #expect(!throttle.recordFailures(1, from: "a", at: at(Double(i) * 0.1)).startsBurst) }
    }

    @Test func scoresDecayByHalfEveryHalfLife() {
        var throttle = AuthThrottle()
        _ = throttle.recordFailures(8, from: "a", at: t0)
        #expect(abs(throttle.score(of: "a", at: at(60)) - 4) < 1e-9)
        #expect(abs(throttle.score(of: "a", at: at(120)) - 2) < 1e-9)
        #expect(abs(throttle.score(of: "a", at: at(30)) - 8 / 2.0.squareRoot()) < 1e-9)
        #expect(throttle.score(of: "never", at: t0) == 0)
        // A clock that seems to run back does not raise a score.
        #expect(throttle.score(of: "a", at: t0 - .seconds(10)) == 8)
    }

    @Test func afterDecayFailuresAreFreeAgainAndANewBurstNamesThePreviousOne() {
        var throttle = AuthThrottle()
        for i in 0..<20 { _ = throttle.recordFailures(1, from: "a", at: at(Double(i))) }
        #expect(throttle.recordFailures(1, from: "a", at: at(20)).delay == .seconds(2))
        // 21 failures decay below one after about 5 half-lives.
        let later = throttle.recordFailures(1, from: "a", at: at(20 + 6 * 60))
        #expect(later.delay == .zero)
        #expect(later.startsBurst)
        #expect(later.previousBurst?.failures == 21)
        #expect(later.previousBurst?.lasted == .seconds(20))
    }

    @Test func aPauseShorterThanTheGapKeepsTheBurstEvenWhenTheScoreIsLow() {
        var throttle = AuthThrottle()
        #expect(throttle.recordFailures(1, from: "a", at: t0).startsBurst)
        #expect(!throttle.recordFailures(1, from: "a", at: at(59)).startsBurst)
        #expect(!throttle.recordFailures(1, from: "a", at: at(118)).startsBurst)
        let next = throttle.recordFailures(1, from: "a", at: at(178))
        #expect(next.startsBurst)
        #expect(next.previousBurst?.failures == 3)
        #expect(next.previousBurst?.lasted == .seconds(118))
    }

    @Test func theDelayFollowsTheDecayedScore() {
        var throttle = AuthThrottle()
        for _ in 0..<10 { _ = throttle.recordFailures(1, from: "a", at: t0) }
        // One half-life: 5 left, plus this one is 6: just past the free five.
        #expect(throttle.recordFailures(1, from: "a", at: at(60)).delay == .milliseconds(100))
    }

    @Test func addressesAreCountedApart() {
        var throttle = AuthThrottle()
        for _ in 0..<10 { _ = throttle.recordFailures(1, from: "10.0.0.1", at: t0) }
        let other = throttle.recordFailures(1, from: "10.0.0.2", at: t0)
        #expect(other.delay == .zero && other.startsBurst)
        #expect(throttle.recordFailures(1, from: "10.0.0.1", at: t0).delay > .zero)
    }

    @Test func oneAnswerCarryingManyFailuresCountsThemAll() {
        var throttle = AuthThrottle()
        #expect(throttle.recordFailures(5, from: "a", at: t0).delay == .zero)
        #expect(throttle.recordFailures(3, from: "a", at: t0).delay == .milliseconds(400))
    }

    @Test func theTableIsBoundedAndForgetsTheQuietestFirst() {
        var settings = AuthThrottle.Settings()
        settings.maxClients = 3
        var throttle = AuthThrottle(settings: settings)
        _ = throttle.recordFailures(50, from: "loud", at: t0)
        _ = throttle.recordFailures(1, from: "quiet", at: t0)
        _ = throttle.recordFailures(10, from: "middle", at: t0)
        _ = throttle.recordFailures(1, from: "new", at: t0)
        #expect(throttle.clients.count == 3)
        #expect(throttle.score(of: "quiet", at: t0) == 0)
        #expect(throttle.score(of: "loud", at: t0) == 50)
        // Much later every old entry has decayed below one: all are dropped to make room.
        _ = throttle.recordFailures(1, from: "another", at: at(3600))
        #expect(throttle.clients.keys.sorted() == ["another"])
    }

    @Test func customSettings() {
        var settings = AuthThrottle.Settings()
        settings.freeFailures = 0
        settings.firstDelay = .milliseconds(10)
        settings.maxDelay = .milliseconds(35)
        var throttle = AuthThrottle(settings: settings)
        let delays = (0..<4).map { _ in throttle.recordFailures(1, from: "a", at: t0).delay }
        #expect(delays == [.milliseconds(10), .milliseconds(20), .milliseconds(35), .milliseconds(35)])
    }
}
