import Testing
@testable import Segget

/// A file's validators as Apache 2.4 words them in the minute after the file changed: the `ETag` weak
/// for the first second and strong after, and an `If-Range` date refused until the file is 60 s old.
@Suite struct AgedETagTests {
    static let modified = "Fri, 04 Dec 2026 09:51:21 GMT"
    static let later = "Fri, 04 Dec 2026 09:51:22 GMT"

    @Test func aWeakTagThatBecameStrongIsTheSameVersion() {
        #expect(AgedETag.sameVersion(kept: "W/\"4000000-661cbd17acf1a\"", got: "\"4000000-661cbd17acf1a\"",
                                     keptModified: Self.modified, gotModified: Self.modified))
        #expect(AgedETag.sameVersion(kept: "\"a\"", got: "\"a\"", keptModified: nil, gotModified: nil))
        #expect(AgedETag.sameVersion(kept: nil, got: nil, keptModified: nil, gotModified: nil))
    }

    @Test func anythingElseIsAnotherVersion() {
        // Another tag, strong then weak, a tag without the same Last-Modified beside it, one side missing.
        #expect(!AgedETag.sameVersion(kept: "W/\"a\"", got: "\"b\"", keptModified: Self.modified, gotModified: Self.modified))
        #expect(!AgedETag.sameVersion(kept: "\"a\"", got: "W/\"a\"", keptModified: Self.modified, gotModified: Self.modified))
        #expect(!AgedETag.sameVersion(kept: "W/\"a\"", got: "\"a\"", keptModified: Self.modified, gotModified: Self.later))
        #expect(!AgedETag.sameVersion(kept: "W/\"a\"", got: "\"a\"", keptModified: nil, gotModified: nil))
        #expect(!AgedETag.sameVersion(kept: "W/\"a\"", got: "\"a\"", keptModified: Self.modified, gotModified: nil))
        #expect(!AgedETag.sameVersion(kept: "W/\"a\"", got: nil, keptModified: Self.modified, gotModified: Self.modified))
        #expect(!AgedETag.sameVersion(kept: nil, got: "\"a\"", keptModified: Self.modified, gotModified: Self.modified))
        #expect(!AgedETag.sameVersion(kept: "W/\"a\"", got: "W/\"b\"", keptModified: Self.modified, gotModified: Self.modified))
    }

    @Test func theAnswerOfARangeAgreesOnceTheTagIsStrong() {
        let q = ResponseQuestion(range: 100..<200, ranged: true, totalLength: 1000, etag: "W/\"v1\"", lastModified: Self.modified, url: "http://h/f")
        func verdict(_ lines: [String]) -> ResponseVerdict {
            var h = ResponseHead()
            h.append(line: "HTTP/1.1 206 Partial Content\r\n")
            for l in ["Content-Range: bytes 100-199/1000", "Content-Length: 100"] + lines { h.append(line: Substring(l + "\r\n")) }
            h.append(line: "\r\n")
            return ResponseVerdict(for: q, head: h)
        }
        #expect(verdict(["ETag: \"v1\"", "Last-Modified: \(Self.modified)"]) == .accept)
        #expect(verdict(["ETag: W/\"v1\"", "Last-Modified: \(Self.modified)"]) == .accept)
        #expect(verdict(["ETag: \"v2\"", "Last-Modified: \(Self.modified)"]) == .resourceChanged("its ETag changed from W/\"v1\" to \"v2\""))
        #expect(verdict(["ETag: \"v1\""]) == .resourceChanged("its ETag changed from W/\"v1\" to \"v1\""))
        #expect(verdict(["ETag: \"v1\"", "Last-Modified: \(Self.later)"]) == .resourceChanged("its ETag changed from W/\"v1\" to \"v1\""))
    }

    private func probe(etag: String?, lastModified: String?, answeredAt: Int64?) -> ProbeResult {
        var p = ProbeResult(
            finalURL: "http://h/f", totalLength: 1000, acceptsRanges: true, etag: etag, lastModified: lastModified,
            suggestedFileName: "f", reprDigest: nil, digest: nil, contentMD5: nil, redirects: 0, noRangesReason: nil)
        p.answeredAt = answeredAt
        return p
    }

    @Test func ifRangeIsAStrongTagOrADateAMinuteOld() {
        let t = parseIMFFixdate(Substring(Self.modified))!
        // A strong ETag, whatever the date.
        #expect(probe(etag: "\"s\"", lastModified: Self.modified, answeredAt: t).ifRangeValidator == "\"s\"")
        // A weak ETag or none: the date, only once it is 60 s older than the answer.
        #expect(probe(etag: "W/\"w\"", lastModified: Self.modified, answeredAt: t).ifRangeValidator == nil)
        #expect(probe(etag: "W/\"w\"", lastModified: Self.modified, answeredAt: t + 59).ifRangeValidator == nil)
        #expect(probe(etag: "W/\"w\"", lastModified: Self.modified, answeredAt: t + 60).ifRangeValidator == Self.modified)
        #expect(probe(etag: nil, lastModified: Self.modified, answeredAt: t + 3600).ifRangeValidator == Self.modified)
        // A date in the future (a clock ahead), one that does not parse, or no time of answer: none.
        #expect(probe(etag: nil, lastModified: Self.modified, answeredAt: t - 3600).ifRangeValidator == nil)
        #expect(probe(etag: nil, lastModified: "yesterday", answeredAt: t).ifRangeValidator == nil)
        #expect(probe(etag: nil, lastModified: Self.modified, answeredAt: nil).ifRangeValidator == nil)
        #expect(probe(etag: nil, lastModified: nil, answeredAt: t).ifRangeValidator == nil)
    }
}
