import Testing

@testable import SeggetRPC

@Suite struct ConnectionBookTests {
    @Test func aStopClosesTheIdleAtOnceAndTheBusyAfterTheirAnswer() {
        var book = ConnectionBook<Int, String>()
        book.opened(1, "idle")
        book.opened(2, "busy")
        book.opened(3, "twice busy")
        let r1 = book.begin(2)
        #expect(r1)
        let r2 = book.begin(3)
        #expect(r2)
        let r3 = book.begin(3)
        #expect(r3)
        let r4 = book.stop()
        #expect(r4.sorted() == ["idle"])
        let r5 = book.begin(1)
        #expect(!r5)  // no new call once stopping
        let r6 = book.end(2)
        #expect(r6)  // its answer is written: close now
        let r7 = book.end(3)
        #expect(!r7)  // one more call in flight on it
        let r8 = book.end(3)
        #expect(r8)
        #expect(book.all.sorted() == ["busy", "idle", "twice busy"])  // until their close is seen
        book.closed(1)
        book.closed(2)
        book.closed(3)
        #expect(book.count == 0)
    }

    @Test func beforeAStopAnAnsweredConnectionStaysOpen() {
        var book = ConnectionBook<Int, String>()
        book.opened(1, "a")
        let r9 = book.begin(1)
        #expect(r9)
        let r10 = book.end(1)
        #expect(!r10)
        let r11 = book.begin(1)
        #expect(r11)
        let r12 = book.end(1)
        #expect(!r12)
        let r13 = book.end(1)
        #expect(!r13)  // an extra end does not go below zero
        let r14 = book.begin(1)
        #expect(r14)
        let r15 = book.stop()
        #expect(r15.isEmpty)
        let r16 = book.end(1)
        #expect(r16)
    }

    @Test func aConnectionAlreadyClosedTakesNoCall() {
        var book = ConnectionBook<Int, String>()
        book.opened(1, "a")
        book.closed(1)
        let r17 = book.begin(1)
        #expect(!r17)
        let r18 = book.end(1)
        #expect(!r18)
        _ = book.stop()
        let r19 = book.end(1)
        #expect(r19)
    }
}
