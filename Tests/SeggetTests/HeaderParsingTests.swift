import Testing
@testable import Segget

@Suite struct ContentRangeTests {
    /// A shorter answer from the asked start is a usable prefix; everything else stays unusable.
    @Test func answerToARequest() {
        func judge(_ header: String, _ asked: Range<Int64>, total: Int64? = 1000) -> ContentRange.Answer? {
            ContentRange(parsing: header)?.answer(asked: asked, total: total)
        }
        #expect(judge("bytes 100-199/1000", 100..<200) == .whole)
        #expect(judge("bytes 100-199/*", 100..<200) == .whole)
        #expect(judge("bytes 100-149/1000", 100..<200) == .prefix(end: 150))
        #expect(judge("bytes 100-100/1000", 100..<200) == .prefix(end: 101))
        // Another start, either way, is wrong (the `wrongrange` mode).
        #expect(judge("bytes 101-199/1000", 100..<200) == .mismatch)
        #expect(judge("bytes 99-199/1000", 100..<200) == .mismatch)
        // More than asked, or less without the total (or with another one), is not trusted.
        #expect(judge("bytes 100-200/1000", 100..<200) == .mismatch)
        #expect(judge("bytes 100-149/*", 100..<200) == .mismatch)
        #expect(judge("bytes 100-149/999", 100..<200) == .mismatch)
        #expect(judge("bytes 100-149/1000", 100..<200, total: nil) == .mismatch)
        #expect(ContentRange(first: nil, last: nil, completeLength: 1000).answer(asked: 100..<200, total: 1000) == .mismatch)
    }

    @Test func parsesSatisfiedRange() {
        #expect(ContentRange(parsing: "bytes 0-99/1000") == ContentRange(first: 0, last: 99, completeLength: 1000))
        #expect(ContentRange(parsing: "  BYTES 5-5/6 ") == ContentRange(first: 5, last: 5, completeLength: 6))
        #expect(ContentRange(parsing: "bytes 0-0/*") == ContentRange(first: 0, last: 0, completeLength: nil))
        #expect(ContentRange(parsing: "bytes 0-99/1000")?.byteCount == 100)
    }

    @Test func parsesUnsatisfiedRange() {
        #expect(ContentRange(parsing: "bytes */1000") == ContentRange(first: nil, last: nil, completeLength: 1000))
        #expect(ContentRange(parsing: "bytes */0")?.completeLength == 0)
    }

    @Test(arguments: [
        "", "bytes", "bytes ", "items 0-1/2", "bytes 0-99", "bytes 99-0/1000", "bytes 0-1000/1000",
        "bytes -1-5/10", "bytes 0--5/10", "bytes a-b/c", "bytes 0-1/-5", "bytes */*", "bytes 0-1/99999999999999999999",
        "bytes 0 - 1/2", "bytes 0-1/2/3",
        // A last byte of 2^63 - 1: its count of bytes is past Int64 (with `*` nothing else bounds it).
        "bytes 0-9223372036854775807/*", "bytes 9223372036854775807-9223372036854775807/*",
    ])
    func rejectsMalformed(_ value: String) {
        #expect(ContentRange(parsing: value) == nil)
        #expect(ContentRange(referenceParsing: value) == nil)
    }

    @Test func theLargestRangeHasACount() {
        let r = ContentRange(parsing: "bytes 0-9223372036854775806/*")
        #expect(r?.byteCount == Int64.max)
        #expect(ContentRange(parsing: "bytes 9223372036854775806-9223372036854775806/9223372036854775807")?.byteCount == 1)
    }

    @Test func decimalParsingRejectsOverflowAndSigns() {
        #expect(parseDecimal("9223372036854775807") == Int64.max)
        #expect(parseDecimal("9223372036854775808") == nil)
        #expect(parseDecimal("+1") == nil)
        #expect(parseDecimal("") == nil)
    }
}

@Suite struct ResponseHeadTests {
    /// A value's bytes as sent: a Latin-1 line one byte a character (a folded continuation too),
    /// any other line its UTF-8, whatever characters the two show.
    @Test func valuesKeepTheBytesTheServerSent() {
        var h = ResponseHead()
        h.append(line: "HTTP/1.1 302 Found\r\n", latin1: false)
        h.append(line: "Location: /caf\u{E9}\r\n", latin1: true)
        h.append(line: "Link: </caf\u{E9}>\r\n", latin1: false)
        h.append(line: "X-A: a\r\n", latin1: false)
        h.append(line: " \u{FF}\r\n", latin1: true)
        #expect(h.unsafeRawBytes("location") == Array("/caf".utf8) + [0xE9])
        #expect(h.unsafeRawBytes("Link") == Array("</caf".utf8) + [0xC3, 0xA9, UInt8(ascii: ">")])
        #expect(h.unsafeRawBytes("x-a") == [UInt8(ascii: "a"), UInt8(ascii: " "), 0xFF])
        #expect(h.unsafeRawBytes("etag") == nil)
        // What a message shows is the same either way.
        #expect(h.value("location")?.unsafeRawValue == "/caf\u{E9}")
    }

    func head(_ lines: [String]) -> ResponseHead {
        var h = ResponseHead()
        for l in lines { h.append(line: Substring(l)) }
        return h
    }

    @Test func collectsFieldsAndCompletes() {
        let h = head(["HTTP/1.1 206 Partial Content\r\n", "Content-Range: bytes 0-0/10\r\n", "ETag: \"abc\"\r\n",
                      "Accept-Ranges: none, bytes\r\n", "Content-Length: 1\r\n", "\r\n"])
        #expect(h.status == 206)
        #expect(h.isComplete)
        #expect(h.contentRange?.completeLength == 10)
        #expect(h.etag == "\"abc\"")
        #expect(h.acceptsByteRanges)
        #expect(h.contentLength == 1)
    }

    @Test func interimResponseIsReplaced() {
        let h = head(["HTTP/1.1 100 Continue\r\n", "\r\n", "HTTP/1.1 200 OK\r\n", "Transfer-Encoding: chunked\r\n", "\r\n"])
        #expect(h.status == 200)
        #expect(h.isChunked)
        #expect(h.isComplete)
    }

    @Test func incompleteUntilBlankLine() {
        let h = head(["HTTP/2 206\r\n", "content-range: bytes 0-0/5\r\n"])
        #expect(!h.isComplete)
        #expect(h.status == 206)
    }

    @Test func contentEncodingIdentityIsIgnored() {
        #expect(head(["HTTP/1.1 200 OK", "Content-Encoding: identity", ""]).contentEncoding == nil)
        #expect(head(["HTTP/1.1 200 OK", "Content-Encoding: gzip", ""]).contentEncoding == "gzip")
    }
}

@Suite struct ContentDispositionTests {
    @Test(arguments: [
        ("attachment; filename=\"report.pdf\"", "report.pdf"),
        ("attachment; filename=plain.txt", "plain.txt"),
        ("inline; filename=\"with \\\"quotes\\\".txt\"", "with \"quotes\".txt"),
        ("attachment; filename=\"a;b.txt\"", "a;b.txt"),
        ("attachment; filename*=UTF-8''na%C3%AFve%20file.txt", "naïve file.txt"),
        ("attachment; filename=\"fallback.txt\"; filename*=UTF-8''real.txt", "real.txt"),
        ("attachment; filename*=iso-8859-1'en'caf%E9.txt", "café.txt"),
    ])
    func extractsName(_ header: String, _ expected: String) {
        #expect(ContentDisposition.fileName(from: header) == expected)
    }

    @Test func badExtendedValueFallsBackToPlain() {
        #expect(ContentDisposition.fileName(from: "attachment; filename=\"ok.txt\"; filename*=UTF-8''%ZZ") == "ok.txt")
        #expect(ContentDisposition.fileName(from: "attachment; filename*=KOI8-R''x") == nil)
        #expect(ContentDisposition.fileName(from: "attachment") == nil)
    }
}

@Suite struct FileNameTests {
    @Test(arguments: [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("..\\..\\windows\\evil.exe", "evil.exe"),
        ("..", "download"),
        (".", "download"),
        ("", "download"),
        ("/", "download"),
        (".bashrc", "bashrc"),
        ("a\u{0}b\u{1F}c\u{7F}.txt", "abc.txt"),
        ("line\nbreak.txt", "linebreak.txt"),
        ("  spaced  ", "spaced"),
        ("invoice\u{202E}fdp.exe", "invoicefdp.exe"),
        ("dir/", "dir"),
        // The endings of segget's side files: the dot before them becomes an underscore.
        ("evil.segget-part", "evil_segget-part"),
        ("a.iso.segget-journal", "a.iso_segget-journal"),
        ("x/y.segget-progress", "y_segget-progress"),
        ("é.segget-part", "é_segget-part"),
        (".segget-part", "segget-part"),
        ("segget-part.bin", "segget-part.bin"),
    ])
    func sanitizes(_ input: String, _ expected: String) {
        #expect(FileName.sanitize(input) == expected)
    }

    @Test func longNamesAreCutOnCharacterBoundaries() {
        let name = String(repeating: "é", count: 300)
        let s = FileName.sanitize(name)
        #expect(s.utf8.count <= 200)
        #expect(s.allSatisfy { $0 == "é" })
    }

    @Test(arguments: [
        ("https://example.com/files/ubuntu.iso", "ubuntu.iso"),
        ("https://example.com/files/my%20file.bin?token=abc#frag", "my file.bin"),
        ("https://example.com/", "download"),
        ("https://example.com", "download"),
        ("http://h/a/%2e%2e%2fetc%2fpasswd", "passwd"),
        ("http://h/dir/", "dir"),
    ])
    func namesFromURLs(_ url: String, _ expected: String) {
        #expect(FileName.fromURLPath(url) == expected)
    }

    /// Whatever the input, the result is one safe, non-empty path component.
    @Test func propertyNeverEscapes() {
        var rng = SplitMix(seed: 42)
        let alphabet: [Character] = ["a", ".", "/", "\\", "\u{0}", "\n", " ", "é", "%", "2", "e", "f", "\u{202E}"]
        for _ in 0..<20_000 {
            let len = Int(rng.next() % 24)
            let s = String((0..<len).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
            for candidate in [FileName.sanitize(s), FileName.fromURLPath("http://h/" + s)] {
                #expect(!candidate.isEmpty)
                #expect(!candidate.contains("/") && !candidate.contains("\\"))
                #expect(candidate != "." && candidate != ".." && !candidate.hasPrefix("."))
                #expect(!candidate.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
            }
        }
    }
}

@Suite struct URLPartsTests {
    @Test func parses() {
        let u = URLParts("https://user:pw@Example.COM:8443/path?q")
        #expect(u?.scheme == "https")
        #expect(u?.host == "example.com")
        #expect(u?.hasUserInfo == true)
        #expect(URLParts("http://[::1]:8080/x")?.host == "[::1]")
        #expect(URLParts("ftp://h/x")?.isHTTPFamily == false)
        #expect(URLParts("not a url") == nil)
        #expect(URLParts("http:///nohost") == nil)
    }

    @Test func redactsCredentials() {
        #expect(URLParts.redactingCredentials("https://user:secret@host/f?a=b@c") == "https://host/f?a=b@c")
        #expect(URLParts.redactingCredentials("https://host/f") == "https://host/f")
    }

    /// The byte scan finds what `firstRange(of: "://")` found, on the edges too.
    @Test func findsTheSchemeSeparatorLikeFirstRange() {
        for s in ["http://h/x", "://", ":/", "a:/b://c", "x:", "", "no separator", "é://ü/ß", "h:/:/x://y://z", "a:://b"] {
            let found = schemeSeparator(in: s)
            #expect(found == s.firstRange(of: "://"), "\(s)")
            let sub = s.dropFirst()
            #expect(schemeSeparator(in: sub) == sub.firstRange(of: "://"), "\(sub)")
        }
    }
}

@Suite struct RetryAfterTests {
    @Test func secondsAndDates() {
        #expect(parseRetryAfter("120") == 120)
        #expect(parseRetryAfter(" 5 ") == 5)
        // 1994-11-06 08:49:37 UTC is 784111777.
        #expect(parseIMFFixdate("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(parseRetryAfter("Sun, 06 Nov 1994 08:49:47 GMT", now: 784_111_777) == 10)
        #expect(parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_999) == 0)
        #expect(parseRetryAfter("soon") == nil)
        #expect(parseRetryAfter("-3") == nil)
    }

    /// Delay-seconds past what an Int64 holds are a very long wait, not a missing field (read as
    /// none, segget retried after a second); at most `longestDelay`, which every message can show
    /// (2^63 - 1 seconds trapped converting to Int when the retry line named it).
    @Test func hugeDelaysAreLongWaits() {
        for v in ["9223372036854775807", "9223372036854775808", "99999999999999999999", String(repeating: "9", count: 400)] {
            #expect(parseRetryAfter(v) == longestDelay, "\(v)")
            #expect(Format.seconds(parseRetryAfter(v) ?? 0) == "more than 31 years", "\(v)")
        }
        #expect(parseRetryAfter("999999999") == 999_999_999)
        #expect(parseRetryAfter("1e9") == nil && parseRetryAfter("12 3") == nil && parseRetryAfter("+5") == nil)
        for v in [1e9, 9.3e18, 1e300, Double.greatestFiniteMagnitude] { #expect(Format.seconds(v) == "more than 31 years") }
        #expect(Format.seconds(999_999_999) == "277777h46m")
        for field in ["RateLimit: \"conc\";r=0;t=99999999999999999999", "RateLimit-Reset: 18446744073709551616"] {
            var head = ResponseHead()
            for line in ["HTTP/1.1 429 Too Many Requests", field, ""] { head.append(line: line + "\r\n") }
            #expect(head.rateLimitReset == longestDelay, "\(field)")
        }
    }

    /// Short times keep a digit that is not zero: `--timeout 0.001` was refused as "0.0 s".
    @Test func shortTimesAreShownInMilliseconds() {
        #expect(Format.seconds(0.001) == "1 ms")
        #expect(Format.seconds(0.0004) == "under 1 ms")
        #expect(Format.seconds(0.05) == "50 ms")
        #expect(Format.seconds(0.099) == "99 ms")
        #expect(Format.seconds(0.1) == "0.1 s")
        #expect(Format.seconds(0) == "0.0 s")
        #expect(Format.seconds(42) == "42 s")
    }
}

@Suite struct ByteSizeTests {
    @Test(arguments: [
        ("4096", Int64(4096)), ("1k", 1024), ("1K", 1024), ("1M", 1 << 20), ("1MiB", 1 << 20), ("20M/s", 20 << 20),
        ("1.5G", 3 << 29), ("512KB", 512 << 10), ("0", 0),
    ])
    func parses(_ text: String, _ value: Int64) {
        #expect(parseByteSize(text) == value)
    }

    @Test(arguments: ["", "M", "-1M", "1X", "1..5M", "abc", "1e9", "99999999T"])
    func rejects(_ text: String) {
        #expect(parseByteSize(text) == nil)
    }
}

/// The property tests' generator (see FuzzTests.swift).
typealias SplitMix = FuzzRandom
