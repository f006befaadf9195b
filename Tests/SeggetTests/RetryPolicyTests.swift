import Testing
@testable import Segget

/// `RetryPolicy.decide`: backoff, `Retry-After` and its cap, and the `--timeout` bound.
@Suite struct RetryPolicyTests {
    func decide(
        attempt: Int = 1, base: Double = 1, retryAfter: Double? = nil, maxWait: Double = 300, deadline: Deadline? = nil,
        now: Double = 100, jitter: Double = 1
    ) -> RetryDecision {
        RetryPolicy.decide(
            attempt: attempt, reason: "HTTP 503", base: base, retryAfter: retryAfter, maxWait: maxWait, deadline: deadline,
            now: now, jitter: jitter)
    }

    @Test func backoffDoublesUpToAMinuteWithJitter() {
        #expect(decide(attempt: 1) == .wait(1, note: nil))
        #expect(decide(attempt: 3) == .wait(4, note: nil))
        #expect(decide(attempt: 3, jitter: 0.5) == .wait(2, note: nil))
        #expect(decide(attempt: 9) == .wait(60, note: nil))
        #expect(decide(attempt: 40, jitter: 1.5) == .wait(90, note: nil))
        #expect(decide(attempt: 9, maxWait: 10) == .wait(10, note: nil), "--max-retry-wait caps backoff too")
    }

    @Test func retryAfterIsHonouredAndLongOnesAreNamed() {
        #expect(decide(retryAfter: 2, jitter: 1.5) == .wait(2, note: nil), "no jitter on what the server asked")
        #expect(decide(retryAfter: 0) == .wait(0, note: nil))
        guard case .wait(120, let note?) = decide(retryAfter: 120) else {
            Issue.record("a two-minute Retry-After is announced")
            return
        }
        #expect(note.contains("Retry-After") && note.contains("2m00s"), "\(note)")
    }

    @Test func retryAfterBeyondTheCapWaitsTheCapAndSaysSo() {
        guard case .wait(300, let note?) = decide(retryAfter: 86400) else {
            Issue.record("a day is capped at 300 s")
            return
        }
        #expect(note.contains("24h00m") && note.contains("--max-retry-wait"), "\(note)")
        guard case .wait(5, _) = decide(retryAfter: 86400, maxWait: 5) else {
            Issue.record("the cap is --max-retry-wait")
            return
        }
    }

    /// A refusing host's quiet is what it asked, at most `--max-retry-wait`, as a retry's wait is.
    @Test func aHostsQuietIsCappedAsARetrysWaitIs() {
        #expect(RetryPolicy.hostWait(asked: nil, maxWait: 300) == nil)
        #expect(RetryPolicy.hostWait(asked: 5, maxWait: 300) == 5)
        #expect(RetryPolicy.hostWait(asked: 86400, maxWait: 300) == 300)
        #expect(RetryPolicy.hostWait(asked: longestDelay, maxWait: 0) == 0)
        for asked in [0.0, 1, 299, 300, 301, 1e9] {
            let retry = RetryPolicy.decide(
                attempt: 1, reason: "r", base: 1, retryAfter: asked, maxWait: 300, deadline: nil, now: 0, jitter: 1)
            guard case .wait(let w, _) = retry else { Issue.record("\(retry)"); continue }
            #expect(RetryPolicy.hostWait(asked: asked, maxWait: 300) == w, "\(asked)")
        }
    }

    /// The notice of a learnt limit names a wait of 10 s or more, and any wait the cap shortened.
    @Test func aHostsWaitIsNamedWhenLongOrCapped() {
        #expect(RetryPolicy.hostWaitNote(asked: nil, wait: nil) == nil)
        #expect(RetryPolicy.hostWaitNote(asked: 2, wait: 2) == nil)
        #expect(RetryPolicy.hostWaitNote(asked: 30, wait: 30) == "no new request for 30 s as it asked")
        #expect(RetryPolicy.hostWaitNote(asked: 86400, wait: 1) == "no new request for 1.0 s, the --max-retry-wait cap of the 24h00m it asked")
        #expect(RetryPolicy.hostWaitNote(asked: longestDelay, wait: 300) == "no new request for 5m00s, the --max-retry-wait cap of the more than 31 years it asked")
    }

    @Test func waitBeyondTheDeadlineGivesUpAtOnce() {
        let deadline = Deadline(limit: 15, from: 90)  // 5 s left at now = 100
        guard case .giveUp(let m) = decide(retryAfter: 86400, deadline: deadline) else {
            Issue.record("a day does not fit in 5 s")
            return
        }
        #expect(m.hasPrefix("HTTP 503. "), "\(m)")
        #expect(m.contains("Retry-After") && m.contains("24h00m") && m.contains("5.0 s left of --timeout 15 s"), "\(m)")
        guard case .giveUp(let b) = decide(attempt: 4, deadline: deadline) else {
            Issue.record("an 8 s backoff does not fit in 5 s")
            return
        }
        #expect(b.contains("retry 4 would wait 8.0 s") && b.contains("--timeout 15 s"), "\(b)")
        #expect(decide(attempt: 3, deadline: deadline) == .wait(4, note: nil), "4 s fits in 5 s")
        #expect(decide(retryAfter: 5, deadline: deadline) == .wait(5, note: nil))
        guard case .giveUp(let spent) = decide(deadline: Deadline(limit: 1, from: 0)) else {
            Issue.record("nothing fits once the deadline has passed")
            return
        }
        // Nothing left is said so (it read "more than the 0.0 s left of --timeout 1 ms").
        #expect(spent.contains("and --timeout 1 s is used up") && !spent.contains("0.0 s left"), "\(spent)")
    }

    @Test func deadlineShowsTheLimitAsGiven() {
        #expect(Deadline(limit: 3, from: 0).shown == "--timeout 3 s")
        #expect(Deadline(limit: 2.5, from: 0).shown == "--timeout 2.5 s")
        #expect(Deadline(limit: 3, from: 10).remaining(now: 12) == 1)
        #expect(Deadline(limit: 3, from: 10).remaining(now: 20) == 0)
        #expect(Deadline(limit: 3, from: 0).expired("the download").message.contains("within --timeout 3 s"))
        #expect(Deadline(limit: 3, from: 0).expired("the download").kind == .network)
    }

    @Test(arguments: [
        ("HTTP 503", "HTTP 503."), ("could not connect to x; check that it is up.", "could not connect to x; check that it is up."),
        ("Transferred a partial file.", "Transferred a partial file."), ("trailing ; ", "trailing."), ("two..", "two."),
    ])
    func reasonsBecomeSentences(_ reason: String, _ sentence: String) {
        #expect(RetryPolicy.sentence(reason) == sentence)
    }

    @Test func retryLineIsTwoCleanSentences() {
        let line = Format.retry(reason: "could not connect to http://h/f; check that the server is up and reachable.", attempt: 1, delay: 0.5)
        #expect(line == "could not connect to http://h/f; check that the server is up and reachable. Retry 1 in 0.5 s.")
        #expect(Format.retry(reason: "HTTP 503", attempt: 2, delay: 3) == "HTTP 503. Retry 2 in 3.0 s.")
    }

    @Test func aContinuationAtOnceSaysSo() {
        #expect(Format.retry(reason: "the connection ended 5 bytes early, after 70000 bytes", attempt: 1, delay: 0)
            == "the connection ended 5 bytes early, after 70000 bytes. Retry 1 at once.")
    }

    /// A cut transfer is continued at once when it brought at least `minimumBytes`; otherwise it is
    /// a failure with a backoff.
    @Test(arguments: [(Int64(65_536), true), (65_535, false), (0, false), (500_000, true), (1 << 40, true)])
    func aCutContinuesAtOnceAfterEnoughBytes(_ bytes: Int64, _ atOnce: Bool) {
        #expect(CutContinuation.continuesAtOnce(bytes: bytes) == atOnce)
    }
}
