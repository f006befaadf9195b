import Testing

@testable import Segget

/// The byte-level fast paths (`ASCIIURL`, `ResponseHead.scanASCII`, `InputFile.asciiLines`) must read
/// every input exactly as the `Character`-level reference code does. Generated corpora of pieces
/// that matter to each parser (delimiters, case, user info, IPv6, ports, signs, CR and LF, blanks,
/// empty parts), plus non-ASCII pieces (combining marks next to delimiters, Latin-1) that must take
/// the reference path.
@Suite struct ASCIIFastPathTests {
    static let urlPieces: [String] = [
        "http", "https", "HTTP", "HtTpS", "ftp", "h+t-t.p", "1x", "://", ":", "/", "//", "@", "@@", "user", "pw",
        "u:p", "%40", "[", "]", "[::1]", "[fe80::1%25eth0]", "::", "Example.COM", "127.0.0.1", "8080", "443", "80",
        "+80", "-1", "0080", "99999999999999999999", "9223372036854775807", "-9223372036854775808", "?", "#",
        "q=a@b", "a:b", " ", "\t", "\r", "\n", "\r\n", "\u{7F}", "\u{1}", "", "..", ".", "x", "Z", "é", "\u{301}",
        ":\u{301}", "/\u{301}", "@\u{301}", "[\u{301}", "]\u{301}", "ß", "\u{FF}",
    ]

    /// A URL-like string, and its non-ASCII pieces dropped (an ASCII string of the same shape).
    static func urlCorpus(_ count: Int, seed: UInt64) -> [String] {
        var rng = FuzzRandom(seed: seed)
        let ascii = urlPieces.filter { $0.utf8.allSatisfy { $0 < 0x80 } }
        var out: [String] = []
        for k in 0..<count {
            // Half start like a real URL, so that the later parts get exercised.
            let prefix =
                k % 2 == 0 ? ["http://", "HTTPS://", "https://u:p@", "http://[::1]", "ftp://"][rng.below(5)] : ""
            out.append(prefix + rng.string(from: urlPieces, maxParts: 10))
            out.append(prefix + rng.string(from: ascii, maxParts: 10))
        }
        return out
    }

    @Test func urlPartsMatchTheReference() {
        var fast = 0
        for s in Self.urlCorpus(20_000, seed: 0x5EED_0001) {
            let isASCII = s.utf8.allSatisfy { $0 < 0x80 }
            let scan = ASCIIURL(s)
            #expect((scan == .notASCII) == !isASCII, "\(s.debugDescription)")
            if isASCII { fast += 1 }
            #expect(URLParts(s) == URLParts(reference: s), "\(s.debugDescription)")
            #expect(HostBudget.key(for: s) == HostBudget.referenceKey(for: s), "\(s.debugDescription)")
            #expect(InputFile.urlProblem(s) == InputFile.referenceURLProblem(s), "\(s.debugDescription)")
        }
        #expect(fast > 20_000)
    }

    @Test func urlEdges() {
        let cases = [
            "http://Host:8080/x", "http://host:+80/", "http://host:-1/", "http://host:/", "http://host:0080",
            "http://[::1]/", "http://[::1]:8443/", "http://[::1", "http://u@[::1]:1/", "http://a@b@c:2/",
            "https://h?x:1", "https://h#x:1", "https://h:99999999999999999999/", "https://h:9223372036854775807",
            "https://h:-9223372036854775808", "://h", "h://", "h:///", "x-y.z+w://H", "1://h", "ht tp://h",
            "http://h\r\n:80/", "http://h:8\r\n0", "http://\r\n/", "http://h /x", "http://h/x\u{7F}", "HTTP://H",
        ]
        for s in cases {
            #expect(URLParts(s) == URLParts(reference: s), "\(s.debugDescription)")
            #expect(HostBudget.key(for: s) == HostBudget.referenceKey(for: s), "\(s.debugDescription)")
            #expect(InputFile.urlProblem(s) == InputFile.referenceURLProblem(s), "\(s.debugDescription)")
        }
        #expect(HostBudget.key(for: "HTTPS://u:p@Example.COM/x") == "https://example.com:443")
        #expect(HostBudget.key(for: "http://[::1]:8080/x") == "http://[::1]:8080")
        // A combining mark after the slash makes "/\u{301}" one Character: not a delimiter, so the
        // host runs on. The reference says so; the fast path must not answer for it.
        #expect(ASCIIURL("http://h/\u{301}x") == .notASCII)
        #expect(URLParts("http://h:1/\u{301}x")?.host == URLParts(reference: "http://h:1/\u{301}x")?.host)
    }

    @Test func intMatchesTheStandardLibrary() {
        var rng = FuzzRandom(seed: 0x5EED_0002)
        let pieces = ["+", "-", "0", "1", "9", "5", "00", "922337203685477580", "7", "8", "x", " ", ""]
        var corpus = [
            "", "+", "-", "+-1", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
            "-9223372036854775809", "00000000000000000000000001",
        ]
        for _ in 0..<20_000 { corpus.append(rng.string(from: pieces, maxParts: 5)) }
        for s in corpus {
            var copy = s
            let fast = copy.withUTF8 { ASCIIBytes.int($0, 0..<$0.count) }
            #expect(fast == Int(s), "\(s.debugDescription)")
        }
    }

    static let headerPieces: [String] = [
        "HTTP/1.1", "HTTP/2", "HTTP/", "http/1.1", " ", "  ", "\t", "\r", "\n", "\r\n", "200", "206", "+200", "099",
        "1000", "OK", "Partial Content", "Content-Length", "content-RANGE", "X", ":", "::", "bytes 0-1/2", "42",
        "a b", "", "é", "\u{301}", ":\u{301}", " \u{301}", "\u{E9}", "\u{FF}", "\u{85}", "\u{A0}",
    ]

    /// Heads fed line by line on both paths end equal, `byteCount` included.
    @Test func responseHeadMatchesTheReference() {
        var rng = FuzzRandom(seed: 0x5EED_0003)
        let ascii = Self.headerPieces.filter { $0.utf8.allSatisfy { $0 < 0x80 } }
        var fast = 0
        for k in 0..<6_000 {
            var a = ResponseHead()
            var b = ResponseHead()
            for _ in 0..<(1 + rng.below(8)) {
                let pieces = k % 2 == 0 ? ascii : Self.headerPieces
                var line = rng.string(from: pieces, maxParts: 6)
                if rng.below(3) == 0 {
                    line = ["HTTP/1.1 ", "HTTP/1.1 200 OK", " ", "\t", "X:", "HTTP/2 206"][rng.below(6)] + line
                }
                if rng.below(2) == 0 { line += "\r\n" }
                let raw = Substring(line)
                if raw.utf8.withContiguousStorageIfAvailable({ ResponseHead.scanASCII($0, foldable: true) }) ?? nil
                    != nil
                {
                    fast += 1
                }
                a.append(line: raw)
                b.append(referenceLine: raw)
                #expect(a == b && a.byteCount == b.byteCount, "\(line.debugDescription)")
            }
        }
        #expect(fast > 10_000)
    }

    @Test func responseHeadEdges() {
        let lines = [
            "HTTP/1.1 200 OK\r\n", "Content-Length : 42\r\n", " folded\r\n", "\tmore\r\n", "No colon\r\n",
            "X-A:\r\n", " \r\n", "Content-Range:bytes 0-1/2\r\n", "HTTP/1.1  206  Partial\r\n", "HTTP/1.1\r\n",
            "HTTP/1.1 +200\r\n", "HTTP/1.1 99\r\n", "HTTP/1.1 1000\r\n", "HTTP/ 200\r\n", "\r\n", "A:b:c", "  :x",
        ]
        var a = ResponseHead()
        var b = ResponseHead()
        for line in lines {
            a.append(line: Substring(line))
            b.append(referenceLine: Substring(line))
            #expect(a == b && a.byteCount == b.byteCount, "\(line.debugDescription)")
        }
        // Latin-1 and combining marks take the reference path.
        #expect(ResponseHead.scanASCII(UnsafeBufferPointer(start: nil, count: 0), foldable: false) == .end)
        var latin = "X-\u{E9}: v"
        #expect(latin.withUTF8 { ResponseHead.scanASCII($0, foldable: false) } == nil)
    }

    static let inputPieces: [String] = [
        "http://h/a", "https://u:p@H:8/b?c#d", "ftp://x/y", "not a url", "\t", " ", "\n", "\r\n", "\r", "#", "# c",
        "out=f.bin", "dir=d", "OUT = x", "bogus=1", "split=4", "=", "checksum=sha-256=00", "é", "\u{301}",
        "\n\u{301}", "\t\u{301}", "", "http://[::1]:80/", "\u{7F}",
    ]

    /// Texts parse to the same entries, or fail with the same line and message, on both paths.
    @Test func inputFileMatchesTheReference() {
        var rng = FuzzRandom(seed: 0x5EED_0004)
        let ascii = Self.inputPieces.filter { $0.utf8.allSatisfy { $0 < 0x80 } }
        var parsed = 0
        for k in 0..<8_000 {
            let text = rng.string(from: k % 2 == 0 ? ascii : Self.inputPieces, maxParts: 14)
            let fast = Result { () throws(InputFileError) in try InputFile(parsing: text) }
            let reference = Result { () throws(InputFileError) in try InputFile(referenceParsing: text) }
            #expect(fast == reference, "\(text.debugDescription)")
            if case .success(let f) = fast, !f.entries.isEmpty { parsed += 1 }
        }
        #expect(parsed > 200)
    }

    @Test func inputFileEdges() throws {
        let texts = [
            "", "\n", "\r\n", "\r", "http://h/a\r\r\n", "http://h/a\r\r\r\n  out=x\r", "http://h/a\t\thttp://m/b \t\n",
            "  out=x\nhttp://h/a", "http://h/a\n  out=\n", "http://h/a\n\t# comment\n  out=y", "  \t  \n#x\nhttp://h/a",
            "http://h/a\n  dir = d \n", "http://h/a\rhttp://h/b",
        ]
        for text in texts {
            let fast = Result { () throws(InputFileError) in try InputFile(parsing: text) }
            let reference = Result { () throws(InputFileError) in try InputFile(referenceParsing: text) }
            #expect(fast == reference, "\(text.debugDescription)")
        }
        let list = try InputFile(parsing: "# list\r\nhttp://h/a\t http://m/a \r\n  out=x.bin\r\n\r\nhttps://h/b")
        #expect(list.entries.map(\.url) == ["http://h/a", "https://h/b"])
        #expect(list.entries[0].mirrors == ["http://m/a"] && list.entries[1].line == 5)
    }

    static let rangePieces: [String] = [
        "bytes", "BYTES", "Bytes", "byte", " ", "  ", "\t", "\r\n", "\r", "0", "1", "99", "100", "-", "--", "/", "//",
        "*", "**", "9223372036854775807", "9223372036854775808", "00", "+1", "x", "", "é", "\u{301}", "/\u{301}",
        "-\u{301}", "*\u{301}",
    ]

    @Test func contentRangeMatchesTheReference() {
        var rng = FuzzRandom(seed: 0x5EED_0005)
        let ascii = Self.rangePieces.filter { $0.utf8.allSatisfy { $0 < 0x80 } }
        var parsed = 0
        for k in 0..<30_000 {
            let pieces = k % 2 == 0 ? ascii : Self.rangePieces
            var s = rng.string(from: pieces, maxParts: 8)
            if rng.below(2) == 0 { s = ["bytes ", " bytes ", "bytes 0-", "BYTES */", "bytes 5-9/"][rng.below(5)] + s }
            if k % 3 == 0 {
                // Well-formed but for the odd piece.
                let n = ["0", "5", "99", "100", "*", "18446744073709551616", "", " 7"]
                s =
                    ["bytes ", "Bytes  ", " bytes\t"][rng.below(3)] + n[rng.below(n.count)] + "-"
                    + n[rng.below(n.count)] + "/"
                    + n[rng.below(n.count)] + ["", " ", "\r\n", "é"][rng.below(4)]
            }
            let fast = ContentRange(parsing: s)
            #expect(fast == ContentRange(referenceParsing: s), "\(s.debugDescription)")
            #expect(
                ContentRange(parsing: Substring(s)) == ContentRange(referenceParsing: Substring(s)),
                "\(s.debugDescription)")
            if fast != nil { parsed += 1 }
        }
        #expect(parsed > 300)
        #expect(ContentRange(parsing: " bytes 0-99/1000\r\n") == ContentRange(first: 0, last: 99, completeLength: 1000))
        #expect(ContentRange(parsing: "bytes 0-99/1\u{301}000") == nil)
    }

    @Test func listMembersMatchSplit() {
        var rng = FuzzRandom(seed: 0x5EED_0006)
        for _ in 0..<10_000 {
            let s = rng.string(from: ["1", ",", " ", "", "42", ",\u{301}", "é", "\r\n"], maxParts: 6)
            #expect(
                listMembers(s) == s.split(separator: ",", omittingEmptySubsequences: false), "\(s.debugDescription)")
        }
    }

    @Test func normalizedPathsMatchTheReference() {
        var rng = FuzzRandom(seed: 0x5EED_0007)
        let pieces = [
            "/", "//", ".", "./", "..", "a", "B.bin", "x y", "", "é", "\u{301}", "/\u{301}", ".\u{301}", "\r\n",
        ]
        for _ in 0..<20_000 {
            let path = rng.string(from: pieces, maxParts: 8)
            #expect(OutputNames.normalized(path) == OutputNames.referenceNormalized(path), "\(path.debugDescription)")
        }
        var same = "dl/x.bin"
        #expect(same.withUTF8 { OutputNames.normalizedASCII($0) } == .same)
        #expect(OutputNames.normalized("./dl//x/") == "dl/x" && OutputNames.normalized("/./a") == "/a")
    }

    @Test func fileNamesFromURLsMatchTheReference() {
        var rng = FuzzRandom(seed: 0x5EED_000B)
        let pieces = [
            "http://", "https://h", "/", "//", "?", "#", "%", "%41", "%2F", "%zz", "%e9", "%C3%A9", "a", ".bin", "..",
            " ",
            "é", "\u{301}", "\u{202E}", "://", "x:y",
        ]
        for _ in 0..<20_000 {
            let url = rng.string(from: pieces, maxParts: 8)
            #expect(FileName.fromURLPath(url) == FileName.referenceFromURLPath(url), "\(url.debugDescription)")
        }
        #expect(FileName.fromURLPath("https://h/dir/file%20name.iso?x#y") == "file name.iso")
        #expect(
            FileName.fromURLPath("https://h/") == FileName.fallback
                && FileName.fromURLPath("https://h") == FileName.fallback)
    }
}
