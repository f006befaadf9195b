import Testing
@testable import Segget

/// `ResponseVerdict`: every answer a server can give to a ranged request or a plain stream, and the
/// order in which the checks name the reason. No sockets: heads are built line by line.
@Suite struct ResponseVerdictTests {
    static let url = "http://user:secret@example.com/f"

    func head(_ status: Int, _ lines: [String] = []) -> ResponseHead {
        var h = ResponseHead()
        h.append(line: Substring("HTTP/1.1 \(status) X\r\n"))
        for l in lines { h.append(line: Substring(l + "\r\n")) }
        h.append(line: "\r\n")
        return h
    }

    func ranged(_ range: Range<Int64> = 100..<200, total: Int64? = 1000, etag: String? = "\"v1\"", lastModified: String? = nil) -> ResponseQuestion {
        ResponseQuestion(range: range, ranged: true, totalLength: total, etag: etag, lastModified: lastModified, url: Self.url)
    }

    func stream(total: Int64? = 1000, etag: String? = "\"v1\"") -> ResponseQuestion {
        ResponseQuestion(range: 0..<(total ?? .max), ranged: false, totalLength: total, etag: etag, lastModified: nil, url: Self.url)
    }

    func verdict(_ q: ResponseQuestion, _ status: Int, _ lines: [String] = []) -> ResponseVerdict {
        ResponseVerdict(for: q, head: head(status, lines))
    }

    // MARK: Ranged requests

    @Test func exactRangeIsAccepted() {
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-199/1000", "Content-Length: 100", "ETag: \"v1\""]) == .accept)
        // No validators on either side, or only on one, is no change.
        #expect(verdict(ranged(etag: nil), 206, ["Content-Range: bytes 100-199/1000", "ETag: \"v2\""]) == .accept)
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-199/1000"]) == .accept)
        // An unknown complete length is no contradiction.
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-199/*"]) == .accept)
    }

    @Test func honestShorterAnswerIsAPrefix() {
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-149/1000", "Content-Length: 50"]) == .acceptPrefix(end: 150))
    }

    @Test func shorterAnswerWithoutTotalIsRetried() {
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-149/*"])
            == .retry("asked for bytes 100-199, the server sent bytes 100-149/*", after: nil, kind: .protocolViolation))
    }

    @Test(arguments: ["bytes 101-199/1000", "bytes 100-200/1000", "bytes 0-99/1000", "bytes */1000"])
    func wrongRangeIsRetried(_ cr: String) {
        #expect(verdict(ranged(), 206, ["Content-Range: \(cr)"])
            == .retry("asked for bytes 100-199, the server sent \(cr)", after: nil, kind: .protocolViolation))
    }

    @Test func missingOrGarbledContentRangeIsRetried() {
        let expected = ResponseVerdict.retry("a 206 without a usable Content-Range for bytes 100-199", after: nil, kind: .protocolViolation)
        #expect(verdict(ranged(), 206) == expected)
        #expect(verdict(ranged(), 206, ["Content-Range: lines 1-2/3"]) == expected)
    }

    @Test func changedLengthIsAChangedResource() {
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-199/2000"]) == .resourceChanged("its length changed from 1000 to 2000 bytes"))
    }

    @Test func changedValidatorsAreAChangedResource() {
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-199/1000", "ETag: \"v2\""])
            == .resourceChanged("its ETag changed from \"v1\" to \"v2\""))
        let lm = ranged(etag: nil, lastModified: "Mon, 02 Jan 2023 00:00:00 GMT")
        #expect(verdict(lm, 206, ["Content-Range: bytes 100-199/1000", "Last-Modified: Tue, 03 Jan 2023 00:00:00 GMT"])
            == .resourceChanged("its Last-Modified changed from Mon, 02 Jan 2023 00:00:00 GMT to Tue, 03 Jan 2023 00:00:00 GMT"))
        // A changed ETag outranks an honest prefix.
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-149/1000", "ETag: \"v2\""])
            == .resourceChanged("its ETag changed from \"v1\" to \"v2\""))
    }

    @Test func wholeFileForARangeMeansRangesAreIgnored() {
        #expect(verdict(ranged(), 200, ["Content-Length: 1000", "ETag: \"v1\""])
            == .rangesIgnored("the server ignored the byte range 100-199 and sent the whole file"))
        #expect(verdict(ranged(), 200) == .rangesIgnored("the server ignored the byte range 100-199 and sent the whole file"))
    }

    @Test func wholeOtherFileIsAChangedResource() {
        #expect(verdict(ranged(), 200, ["ETag: \"v2\""]) == .resourceChanged("its ETag changed from \"v1\" to \"v2\""))
        #expect(verdict(ranged(), 200, ["Content-Length: 999"]) == .resourceChanged("its length changed from 1000 to 999 bytes"))
    }

    @Test func codedOrMultipartRangeMeansRangesAreIgnored() {
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-199/1000", "Content-Encoding: gzip"])
            == .rangesIgnored("the server applied Content-Encoding 'gzip' to the byte range 100-199, which makes its offsets meaningless"))
        #expect(verdict(ranged(), 206, ["Content-Range: bytes 100-199/1000", "Content-Encoding: identity"]) == .accept)
        #expect(verdict(ranged(), 206, ["Content-Type: multipart/byteranges; boundary=X"])
            == .rangesIgnored("the server answered the byte range 100-199 with a multipart/byteranges body"))
    }

    @Test func unsatisfiableRangeIsAChangedResource() {
        #expect(verdict(ranged(), 416) == .resourceChanged("the server says bytes 100-199 no longer exist (416)"))
        #expect(verdict(ranged(), 416, ["Content-Range: bytes */100"]) == .resourceChanged("its length changed from 1000 to 100 bytes"))
        #expect(verdict(ranged(), 416, ["Content-Range: bytes */1000", "ETag: \"v2\""])
            == .resourceChanged("its ETag changed from \"v1\" to \"v2\""))
        // Nothing to compare the answer with: the length is unknown.
        #expect(verdict(ranged(total: nil), 416, ["Content-Range: bytes */1000"])
            == .resourceChanged("the server says bytes 100-199 no longer exist (416)"))
    }

    /// A 416 that gives the length already known for a range inside it contradicts itself: a fault of
    /// that request, retried (after its Retry-After if it has one), not a changed file.
    @Test func unsatisfiableRangeOfTheKnownLengthIsRetried() {
        let reason = "the server refused bytes 100-199 as beyond the end (416) yet gives the length as 1000 bytes, as before"
        #expect(verdict(ranged(), 416, ["Content-Range: bytes */1000"]) == .retry(reason, after: nil, kind: .protocolViolation))
        #expect(verdict(ranged(), 416, ["Content-Range: bytes */1000", "ETag: \"v1\"", "Retry-After: 3"])
            == .retry(reason, after: 3, kind: .protocolViolation))
        #expect(verdict(ranged(900..<1000), 416, ["Content-Range: bytes */1000"])
            == .retry("the server refused bytes 900-999 as beyond the end (416) yet gives the length as 1000 bytes, as before", after: nil, kind: .protocolViolation))
    }

    @Test(arguments: [301, 304, 400, 401, 403, 404, 410, 418])
    func otherStatusesAreFatal(_ status: Int) {
        #expect(verdict(ranged(), status) == .fatal(Prober.statusError(status, url: Self.url)))
    }

    /// A 401 to a request that carried a user and password says they were refused; without them, it
    /// asks for them (before, both asked for them).
    @Test func a401SaysWhetherCredentialsWereRefused() {
        #expect(Prober.statusError(401, url: Self.url, sentCredentials: true).message.contains("the user name and password given were refused; check them"))
        // A 400 from a port of its own on an http:// URL may be a TLS port (nginx's answer there).
        #expect(Prober.statusError(400, url: "http://h.example:8443/f").message.contains("if that port serves HTTPS, use https://"))
        #expect(Prober.statusError(400, url: "HTTP://[::1]:443/f").message.contains("use https://"))
        for plain in ["http://h.example/f", "http://h.example:80/f", "https://h.example:8443/f"] {
            #expect(Prober.statusError(400, url: plain).message.hasSuffix("answered HTTP 400; the server refused the request."), "\(plain)")
        }
        #expect(Prober.statusError(401, url: Self.url).message.contains("authentication is required; pass -u USER:PASSWORD or --netrc"))
        #expect(Prober.statusError(403, url: Self.url, sentCredentials: true).message.contains("access is forbidden"))
    }

    // MARK: Both kinds

    @Test(arguments: [408, 429, 500, 502, 503, 504, 599])
    func overloadedServerIsRetried(_ status: Int) {
        for q in [ranged(), stream()] {
            #expect(verdict(q, status) == .retry("HTTP \(status)", after: nil, kind: .httpStatus))
            #expect(verdict(q, status, ["Retry-After: 7"]) == .retry("HTTP \(status)", after: 7, kind: .httpStatus))
        }
    }

    @Test func ambiguousFramingIsFatalBeforeAnythingElse() {
        let lines = ["Content-Length: 100", "Content-Length: 101", "Content-Range: bytes 100-199/1000", "ETag: \"v2\""]
        let h = head(206, lines)
        let problem = try! #require(h.framingProblem)
        #expect(verdict(ranged(), 206, lines) == .fatal(Prober.framingError(problem, url: Self.url)))
        let streamLines = ["Content-Length: 1000", "Content-Length: 1001"]
        let sp = try! #require(head(200, streamLines).framingProblem)
        #expect(verdict(stream(), 200, streamLines) == .fatal(Prober.framingError(sp, url: Self.url)))
    }

    @Test func codingOutranksFraming() {
        // A coded range is unusable whatever its framing says: start over as one stream.
        let lines = ["Content-Length: 100", "Content-Length: 101", "Content-Encoding: br"]
        #expect(verdict(ranged(), 206, lines)
            == .rangesIgnored("the server applied Content-Encoding 'br' to the byte range 100-199, which makes its offsets meaningless"))
    }

    // MARK: Plain streams

    @Test func streamWantsA200OfTheSameFile() {
        #expect(verdict(stream(), 200, ["Content-Length: 1000", "ETag: \"v1\""]) == .accept)
        #expect(verdict(stream(total: nil), 200, ["Transfer-Encoding: chunked"]) == .accept)
        #expect(verdict(stream(), 200, ["Content-Length: 999"]) == .resourceChanged("its length changed from 1000 to 999 bytes"))
        #expect(verdict(stream(), 200, ["ETag: \"v2\""]) == .resourceChanged("its ETag changed from \"v1\" to \"v2\""))
        // Length is checked before validators.
        #expect(verdict(stream(), 200, ["Content-Length: 999", "ETag: \"v2\""]) == .resourceChanged("its length changed from 1000 to 999 bytes"))
    }

    @Test(arguments: [404, 416, 304])
    func streamRefusesAnyOtherStatus(_ status: Int) {
        #expect(verdict(stream(), status, ["Content-Range: bytes 0-999/1000"]) == .fatal(Prober.statusError(status, url: Self.url)))
    }

    /// A 206 to a request that asked for no range is the server contradicting itself (exit 7), not
    /// an HTTP error status (it said "answered HTTP 206; the server refused the request", exit 4).
    @Test func streamAnswered206IsAProtocolViolation() {
        guard case .fatal(let e) = verdict(stream(), 206, ["Content-Range: bytes 0-0/18446744073709551615"]) else {
            Issue.record("not fatal")
            return
        }
        #expect(e.kind == .protocolViolation && e.message.contains("206 Partial Content"), "\(e.message)")
    }

    @Test func streamIgnoresRangeHeadersItDidNotAskFor() {
        // A coded or multipart body is only a ranged request's problem.
        #expect(verdict(stream(), 200, ["Content-Encoding: gzip"]) == .accept)
    }
}
