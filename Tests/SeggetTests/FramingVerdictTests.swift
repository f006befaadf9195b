import Testing
@testable import Segget

/// `ResponseHead.framingProblem`: every shape of lying or ambiguous framing is named, and every
/// honest shape (including the legal odd ones) passes.
@Suite struct FramingVerdictTests {
    /// A complete head: the status line, `lines` with CRLF as libcurl delivers them, the blank line.
    func head(_ lines: [String]) -> ResponseHead { head(206, lines) }

    func head(_ status: Int, _ lines: [String]) -> ResponseHead {
        var h = ResponseHead()
        h.append(line: Substring("HTTP/1.1 \(status) X\r\n"))
        for l in lines { h.append(line: Substring(l + "\r\n")) }
        h.append(line: "\r\n")
        return h
    }

    @Test(arguments: [
        [String](),
        ["Content-Length: 100", "Content-Range: bytes 0-99/1000"],
        ["Content-Length: 100, 100", "Content-Range: bytes 0-99/1000"],
        ["Content-Length: 100", "Content-Length: 100", "Content-Range: bytes 0-99/1000"],
        ["Content-Range: bytes 0-99/1000", "Content-Range: bytes 0-99/1000"],
        ["Content-Range: bytes 0-99/1000", "content-range:  BYTES 0-99/1000 "],
        ["Transfer-Encoding: chunked", "Content-Range: bytes 0-99/1000"],
        ["Transfer-Encoding: Chunked", "Content-Range: bytes 0-99/1000"],
        ["Content-Range: bytes 0-99/1000"],
        ["Content-Length: 100", "X-Folded: a", " b", "Content-Range: bytes 0-99/1000"],
        ["X-Spaced : a", "Content-Length: 100", "Content-Range: bytes 0-99/*"],
        ["Content-Length: 5", "Content-Range: bytes */1000"],
    ])
    func honestFramingPasses(_ lines: [String]) {
        #expect(head(lines).framingProblem == nil, "\(lines)")
    }

    @Test func disagreeingLengthsAreRefused() {
        #expect(head(["Content-Length: 100", "Content-Length: 101"]).framingProblem == .conflictingContentLength(["100", "101"]))
        #expect(head(["Content-Length: 100, 101"]).framingProblem == .conflictingContentLength(["100, 101"]))
    }

    @Test(arguments: ["-1", "+5", "12x", "0x10", "", "1 2", "99999999999999999999", "1,", ",1", "1.0"])
    func invalidLengthsAreRefused(_ value: String) {
        let h = head(200, ["Content-Length: \(value)"])
        #expect(h.framingProblem == .invalidContentLength(ServerText(value)), "'\(value)'")
        #expect(h.contentLength == nil)
    }

    @Test func agreeingLengthListIsOneLength() {
        #expect(head(200, ["Content-Length: 42, 42"]).contentLength == 42)
        #expect(head(200, ["Content-Length: 42", "Content-Length: 42"]).contentLength == 42)
        #expect(head(200, ["Content-Length: 42", "Content-Length: 43"]).contentLength == nil)
    }

    @Test func disagreeingRangesAreRefused() {
        let h = head(["Content-Range: bytes 0-99/1000", "Content-Range: bytes 1-100/1000", "Content-Length: 100"])
        #expect(h.framingProblem == .conflictingContentRange(["bytes 0-99/1000", "bytes 1-100/1000"]))
        // A second one that does not even parse cannot vouch for the first either.
        #expect(head(["Content-Range: bytes 0-99/1000", "Content-Range: garbage"]).framingProblem
            == .conflictingContentRange(["bytes 0-99/1000", "garbage"]))
        #expect(head(["Content-Range: bytes 0-99/1000", "Content-Range: bytes 0-99/1001"]).framingProblem != nil)
    }

    @Test func lengthThatContradictsTheRangeIsRefused() {
        #expect(head(["Content-Range: bytes 0-99/1000", "Content-Length: 101"]).framingProblem
            == .lengthContradictsRange(contentLength: 101, range: "bytes 0-99/1000"))
        #expect(head(["Content-Range: bytes 0-0/1000", "Content-Length: 0"]).framingProblem != nil)
        // Only a 206's Content-Range describes its body.
        #expect(head(200, ["Content-Range: bytes 0-99/1000", "Content-Length: 1000"]).framingProblem == nil)
    }

    @Test func transferEncodingWithLengthIsRefused() {
        #expect(head(["Transfer-Encoding: chunked", "Content-Length: 100"]).framingProblem == .transferEncodingWithContentLength)
        #expect(head(["Content-Length: 100", "Transfer-Encoding: chunked"]).framingProblem == .transferEncodingWithContentLength)
    }

    @Test(arguments: [
        (["gzip, chunked"], "gzip, chunked"), (["chunked, chunked"], "chunked, chunked"), (["chunked", "chunked"], "chunked, chunked"),
        (["identity"], "identity"), (["xchunked"], "xchunked"), ([""], ""), (["chunked, "], "chunked,"), (["gzip"], "gzip"),
    ])
    func otherTransferCodingsAreRefused(_ values: [String], _ joined: String) {
        let h = head(200, values.map { "Transfer-Encoding: \($0)" } + ["Content-Length: 5"])
        #expect(h.framingProblem == .unsupportedTransferEncoding(ServerText(joined)), "\(values)")
    }

    @Test(arguments: ["Content-Length", "Transfer-Encoding", "Content-Range"])
    func foldedFramingFieldIsRefused(_ name: String) {
        let h = head([name + ":", " 100"])
        #expect(h.framingProblem == .foldedField(name.lowercased()))
        #expect(h.value(name) == "100", "the fold reads as one value")
        #expect(head([name + ": 1", "\t00"]).framingProblem == .foldedField(name.lowercased()))
    }

    @Test(arguments: ["Content-Length ", "Transfer-Encoding\t", "Content-Range  "])
    func spaceBeforeColonIsRefused(_ rawName: String) {
        let h = head(["\(rawName): 1"])
        #expect(h.framingProblem == .spaceBeforeColon(String(rawName.trimmingCharacters()).lowercased()))
    }

    @Test func problemsReadAsClauses() {
        let all: [FramingProblem] = [
            .conflictingContentLength(["1", "2"]), .invalidContentLength("-1"), .conflictingContentRange(["a", "b"]),
            .lengthContradictsRange(contentLength: 2, range: "bytes 0-0/5"), .transferEncodingWithContentLength,
            .unsupportedTransferEncoding("gzip"), .foldedField("content-length"), .spaceBeforeColon("content-range"),
        ]
        for p in all {
            #expect(p.description.hasPrefix("it"), "\(p)")
            #expect(!p.description.contains(";"), "\(p)")
            #expect(!p.description.hasSuffix("."), "\(p)")
        }
        #expect(FramingProblem.foldedField("content-length").description.contains("Content-Length"))
    }

    @Test func multipartIsRecognised() {
        #expect(head(["Content-Type: multipart/byteranges; boundary=X"]).isMultipartByteRanges)
        #expect(head(["Content-Type: Multipart/ByteRanges;boundary=X"]).isMultipartByteRanges)
        #expect(!head(["Content-Type: application/octet-stream"]).isMultipartByteRanges)
    }

    @Test func headCountsItsBytes() {
        let h = head(["A: b"])
        #expect(h.byteCount == "HTTP/1.1 206 X\r\n".utf8.count + "A: b\r\n".utf8.count + 2)
        var again = h
        again.append(line: "HTTP/1.1 200 OK\r\n")
        #expect(again.byteCount == 17, "a new status line starts a new head")
    }
}
