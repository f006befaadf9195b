import Dispatch
import Synchronization
import Testing
@testable import Segget

@Suite struct HostBudgetTests {
    /// Two downloads to one host under a cap of 3: together they never hold more than 3 slots, and
    /// what one gives back the other may take.
    @Test func capIsSharedAcrossDownloads() {
        var h = HostAllowance()
        let yes = { true }
        do { let ok = h.reserve(1, inFlight: 0, cap: 3, wanted: yes, now: 0, forgetAfter: nil); #expect(ok) }
        do { let ok = h.reserve(1, inFlight: 1, cap: 3, wanted: yes, now: 0, forgetAfter: nil); #expect(ok) }
        do { let ok = h.reserve(2, inFlight: 0, cap: 3, wanted: yes, now: 0, forgetAfter: nil); #expect(ok) }
        #expect(h.total == 3)
        do { let ok = h.reserve(2, inFlight: 1, cap: 3, wanted: yes, now: 0, forgetAfter: nil); #expect(!ok) }
        do { let ok = h.reserve(1, inFlight: 2, cap: 3, wanted: yes, now: 0, forgetAfter: nil); #expect(!ok) }
        // A slot reserved and not yet used is granted again without counting twice.
        do { let ok = h.reserve(2, inFlight: 0, cap: 3, wanted: yes, now: 0, forgetAfter: nil); #expect(ok) }
        #expect(h.total == 3)
        // Download 1 finishes: its share is free for download 2.
        h.sync(1, inFlight: 0)
        do { let ok = h.reserve(2, inFlight: 1, cap: 3, wanted: yes, now: 0, forgetAfter: nil); #expect(ok) }
        do { let ok = h.reserve(2, inFlight: 2, cap: 3, wanted: yes, now: 0, forgetAfter: nil); #expect(ok) }
        #expect(h.total == 3)
        h.sync(2, inFlight: 0)
        #expect(h.isIdle)
    }

    /// A host's `Retry-After` outlives the download's last request: once nothing was held, the
    /// host's entry (and the wait it asked for with it) was dropped, and the end game's racers asked
    /// the host again 0.3 s after it said 10 s (an exploratory test: 365 requests in 50 s at -n 8).
    @Test func aHostsWaitIsKeptWhenNothingIsInFlight() {
        let budget = HostBudget(maxPerHost: nil)
        let share = budget.share(for: "http://example.test/f")
        #expect(share.reserve(inFlight: 0, wanted: { true }, now: 0))
        share.asked(wait: 10, now: 0.02)
        share.sync(inFlight: 0)
        #expect(share.quietUntil == 10.02)
        #expect(!share.reserve(inFlight: 0, wanted: { true }, now: 0.3))
        #expect(!share.reserve(inFlight: 0, wanted: { true }, now: 10))
        #expect(share.reserve(inFlight: 0, wanted: { true }, now: 10.1))
        // The same through the arithmetic alone: an entry that asked for a wait is not idle.
        var h = HostAllowance()
        h.asked(wait: 10, now: 0)
        #expect(!h.isIdle)
    }

    /// A refusal in one download teaches the limit to the others: with 3 out across two downloads,
    /// a fourth request refused makes 3 the host's limit, and neither download sends a fourth until
    /// the hold-off is over; then one probe goes out, and its refusal doubles the hold-off.
    @Test func learntLimitHoldsForEveryDownloadAndIsProbed() {
        var h = HostAllowance()
        let yes = { true }
        for _ in 0..<2 { _ = h.reserve(1, inFlight: h.held[1, default: 0], cap: nil, wanted: yes, now: 0, forgetAfter: nil) }
        _ = h.reserve(2, inFlight: 0, cap: nil, wanted: yes, now: 0, forgetAfter: nil)
        _ = h.reserve(2, inFlight: 1, cap: nil, wanted: yes, now: 0, forgetAfter: nil)
        #expect(h.total == 4)
        // Download 2's second request is refused: one of its own and two of download 1's are out.
        let r = h.refused(2, inFlight: 1, wait: nil, now: 1)
        #expect(r?.lowered == true && r?.announce == 3)
        #expect(h.learnt.limit == 3)
        h.sync(2, inFlight: 1)
        do { let ok = h.reserve(2, inFlight: 1, cap: nil, wanted: yes, now: 1.5, forgetAfter: nil); #expect(!ok) }
        do { let ok = h.reserve(1, inFlight: 2, cap: nil, wanted: yes, now: 1.5, forgetAfter: nil); #expect(!ok) }
        // No probe when no download has work for another connection.
        do { let ok = h.reserve(1, inFlight: 2, cap: nil, wanted: { false }, now: 5, forgetAfter: nil); #expect(!ok) }
        // After the 2 s hold-off, one probe.
        do { let ok = h.reserve(1, inFlight: 2, cap: nil, wanted: yes, now: 5, forgetAfter: nil); #expect(ok) }
        #expect(h.learnt.limit == 4)
        do { let ok = h.reserve(2, inFlight: 1, cap: nil, wanted: yes, now: 5, forgetAfter: nil); #expect(!ok) }
        // The probe is refused too: back to 3, said once only, and the next probe waits 4 s.
        let again = h.refused(1, inFlight: 2, wait: nil, now: 5.1)
        #expect(again?.announce == nil)
        #expect(h.learnt.limit == 3)
        h.sync(1, inFlight: 2)
        do { let ok = h.reserve(1, inFlight: 2, cap: nil, wanted: yes, now: 8, forgetAfter: nil); #expect(!ok) }
        do { let ok = h.reserve(1, inFlight: 2, cap: nil, wanted: yes, now: 9.2, forgetAfter: nil); #expect(ok) }
    }

    /// A cancelled request keeps its slot a moment: the server counts it until it sees the close.
    @Test func cancelledRequestsCoolBeforeTheirSlotIsFree() {
        var h = HostAllowance()
        for _ in 0..<3 { _ = h.reserve(1, inFlight: h.held[1, default: 0], cap: 3, wanted: { true }, now: 0, forgetAfter: nil) }
        h.cancelled(2, now: 1)
        h.sync(1, inFlight: 1)
        do { let ok = h.reserve(2, inFlight: 0, cap: 3, wanted: { true }, now: 1.1, forgetAfter: nil); #expect(!ok) }
        do { let ok = h.reserve(2, inFlight: 0, cap: 3, wanted: { true }, now: 1 + HostAllowance.coolingSeconds, forgetAfter: nil); #expect(ok) }
        do { let ok = h.reserve(2, inFlight: 1, cap: 3, wanted: { true }, now: 1.3, forgetAfter: nil); #expect(ok) }
        #expect(h.total == 3)
    }

    /// A refusal while nothing else of the host's is out is no connection limit.
    @Test func aLoneRefusalTeachesNothing() {
        var h = HostAllowance()
        _ = h.reserve(1, inFlight: 0, cap: nil, wanted: { true }, now: 0, forgetAfter: nil)
        let r = h.refused(1, inFlight: 0, wait: 1, now: 0)
        #expect(r == nil)
        #expect(h.learnt.limit == nil)
    }

    /// The daemon forgets a learnt limit some time after the host's last refusal.
    @Test func learntLimitIsForgottenAfterAWhile() {
        var h = HostAllowance()
        for i in 0..<3 { _ = h.reserve(i, inFlight: 0, cap: nil, wanted: { true }, now: 0, forgetAfter: 600) }
        _ = h.refused(2, inFlight: 0, wait: nil, now: 10)
        #expect(h.learnt.limit == 2)
        h.sync(2, inFlight: 0)
        do { let ok = h.reserve(2, inFlight: 0, cap: nil, wanted: { false }, now: 300, forgetAfter: 600); #expect(!ok) }
        do { let ok = h.reserve(2, inFlight: 0, cap: nil, wanted: { false }, now: 611, forgetAfter: 600); #expect(ok) }
        #expect(h.learnt.limit == nil)
    }

    /// The room a download has is what the cap and the learnt limit leave beside the other
    /// downloads' slots (its own slots beyond its requests count as its room); none without either.
    @Test func roomCountsTheOtherDownloadsSlots() {
        var h = HostAllowance()
        let yes = { true }
        #expect(h.room(1, inFlight: 0, cap: nil) == nil)
        _ = h.reserve(2, inFlight: 0, cap: 4, wanted: yes, now: 0, forgetAfter: nil)
        #expect(h.room(1, inFlight: 0, cap: 4) == 3)
        #expect(h.room(1, inFlight: 2, cap: 4) == 1)
        #expect(h.room(1, inFlight: 5, cap: 4) == 0)
        _ = h.reserve(1, inFlight: 0, cap: 4, wanted: yes, now: 0, forgetAfter: nil)
        #expect(h.room(1, inFlight: 0, cap: 4) == 3)  // its reserved slot is its own room
        #expect(h.room(2, inFlight: 1, cap: 2) == 0)
    }

    /// A host's own cap (a batch sharing its HTTP/2 connections) holds for that host alone, and
    /// dropping it gives the host `maxPerHost` again.
    @Test func aHostsOwnCapHoldsForItAlone() {
        let budget = HostBudget(maxPerHost: 2)
        budget.setCap(5, forHostOf: "https://a.example/x")
        #expect(budget.cap(for: "https://a.example:443/y") == 5)
        #expect(budget.cap(for: "https://b.example/x") == 2)
        let a = budget.share(for: "https://a.example/x")
        let b = budget.share(for: "https://b.example/x")
        let took = (0..<7).filter { a.reserve(inFlight: $0, wanted: { true }, now: 0) }.count
        #expect(took == 5)
        #expect((0..<7).filter { b.reserve(inFlight: $0, wanted: { true }, now: 0) }.count == 2)
        budget.dropHostCaps()
        #expect(budget.cap(for: "https://a.example/x") == 2)
        a.sync(inFlight: 0)
        #expect((0..<7).filter { a.reserve(inFlight: $0, wanted: { true }, now: 0) }.count == 2)
    }

    @Test func hostIsSchemeNameAndPort() {
        #expect(HostBudget.key(for: "https://Example.org/a?b") == "https://example.org:443")
        #expect(HostBudget.key(for: "https://example.org:443/x") == "https://example.org:443")
        #expect(HostBudget.key(for: "http://example.org/x") == "http://example.org:80")
        #expect(HostBudget.key(for: "http://user:pw@example.org:8080/x") == "http://example.org:8080")
        #expect(HostBudget.key(for: "http://[::1]:9000/x") == "http://[::1]:9000")
        #expect(HostBudget.key(for: "http://[::1]/x") == "http://[::1]:80")
    }

    /// Many threads reserving and giving back through one budget: the slots held never exceed the cap.
    @Test func threadsNeverExceedTheCap() {
        let budget = HostBudget(maxPerHost: 3)
        let most = Mutex(0)
        let url = "http://127.0.0.1:1/f"
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let share = budget.share(for: url)
            var inFlight = 0
            for step in 0..<2000 {
                if step % 3 == 2 {
                    inFlight = max(0, inFlight - 1)
                    share.sync(inFlight: inFlight)
                } else if share.reserve(inFlight: inFlight, wanted: { true }, now: 0) {
                    inFlight += 1
                }
                let held = budget.held(for: url)
                most.withLock { $0 = max($0, held) }
            }
            share.sync(inFlight: 0)
        }
        #expect(most.withLock { $0 } <= 3)
        #expect(budget.held(for: url) == 0)
    }
}
