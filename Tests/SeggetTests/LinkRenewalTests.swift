import Testing
@testable import Segget

/// The pure parts of renewing an expired link: which answers count as an expiry, what proves that a
/// renewed link serves the same file, when renewing stops, and the plan of the attempt after one.
@Suite struct LinkRenewalTests {
    @Test(arguments: [401, 403, 410])
    func expiryStatusesAreRecognised(status: Int) {
        let e = SeggetError(.httpStatus, "x answered HTTP \(status)", httpStatus: status)
        #expect(LinkExpiry.status(of: e) == status)
    }

    @Test(arguments: [400, 404, 416, 429, 500, 503])
    func otherStatusesAreNotAnExpiry(status: Int) {
        let e = SeggetError(.httpStatus, "x answered HTTP \(status)", httpStatus: status)
        #expect(LinkExpiry.status(of: e) == nil)
    }

    @Test func otherFailureKindsAreNotAnExpiry() {
        // A 403 status carried by another kind of failure (a protocol error) is not an expired link.
        #expect(LinkExpiry.status(of: SeggetError(.protocolViolation, "odd", httpStatus: 403)) == nil)
        #expect(LinkExpiry.status(of: SeggetError(.network, "reset")) == nil)
        #expect(LinkExpiry.status(of: SeggetError(.httpStatus, "no status")) == nil)
    }

    let original = ObjectIdentity(length: 1000, etag: "\"abc\"", lastModified: "Wed, 21 Oct 2026 07:28:00 GMT")

    @Test func theSameLengthAndValidatorsProveTheSameFile() {
        #expect(original.differences(from: original) == nil)
        let etagOnly = ObjectIdentity(length: 5, etag: "\"e\"", lastModified: nil)
        #expect(etagOnly.differences(from: etagOnly) == nil)
        let dateOnly = ObjectIdentity(length: 5, etag: nil, lastModified: "Mon, 01 Jan 2024 00:00:00 GMT")
        #expect(dateOnly.differences(from: dateOnly) == nil)
    }

    @Test func anotherLengthIsAnotherFile() throws {
        var other = original
        other.length = 999
        let why = try #require(original.differences(from: other))
        #expect(why.contains("999") && why.contains("1000"))
    }

    @Test func anotherOrMissingETagIsAnotherFile() throws {
        var other = original
        other.etag = "\"abd\""
        #expect(try #require(original.differences(from: other)).contains("ETag"))
        other.etag = nil
        #expect(try #require(original.differences(from: other)).contains("missing"))
        // A validator the expired link did not send is a difference too (as for a resume).
        let noETag = ObjectIdentity(length: 1000, etag: nil, lastModified: original.lastModified)
        #expect(noETag.differences(from: original) != nil)
    }

    @Test func anotherLastModifiedIsAnotherFile() throws {
        var other = original
        other.lastModified = "Thu, 22 Oct 2026 07:28:00 GMT"
        #expect(try #require(original.differences(from: other)).contains("Last-Modified"))
    }

    @Test func withoutValidatorsNothingProvesTheSameFile() throws {
        let bare = ObjectIdentity(length: 1000, etag: nil, lastModified: nil)
        #expect(try #require(bare.differences(from: bare)).contains("neither ETag nor Last-Modified"))
    }

    @Test func aServerETagIsShownEscaped() throws {
        var other = original
        other.etag = "\"\u{1B}[31mred\""
        let why = try #require(original.differences(from: other))
        #expect(!why.contains("\u{1B}"))
    }

    @Test func renewingStopsAfterThreeRenewalsWithoutProgress() {
        var count = RenewalCount()
        let allowed = (0..<4).map { _ in count.count(bytesDone: 100) }
        #expect(allowed == [true, true, true, false])
        #expect(count.total == 4)
    }

    @Test func progressResetsTheCountOfRenewalsWithoutProgress() {
        var count = RenewalCount()
        for done in [Int64(0), 0, 0, 10, 10, 10, 20] {
            let allowed = count.count(bytesDone: done)
            #expect(allowed, "at \(done)")
        }
        #expect(count.total == 7)
        #expect(count.withoutProgress == 1)
    }

    @Test func theAttemptAfterARenewalResumesTheSameFileFromTheNewLink() throws {
        let plan = AttemptPlan(fresh: true).renewed(url: "https://example.com/f?sig=2", outputPath: "/tmp/f")
        #expect(plan.url == "https://example.com/f?sig=2")
        #expect(plan.outputPath == "/tmp/f")
        #expect(!plan.fresh)
        #expect(plan.mustResume)
        // A later restart (the file changed) starts over as usual, from the renewed link.
        let (next, _) = try plan.next(after: .resourceChanged(reason: "ETag"))
        #expect(next.fresh && !next.mustResume && next.url == plan.url)
    }
}
