import Glibc
import Testing
import SeggetJournal

@testable import Segget

/// Seeded, bounded fuzz and property tests for the parsers that read what a server (or a user)
/// sends: random and mutated inputs never crash, and every parsed value keeps its invariants.
/// Deterministic (fixed seeds); the whole suite runs in well under 5 s in a debug build.
@Suite struct FuzzTests {
    // MARK: Content-Range

    static let rangeAlphabet: [String] = [
        "bytes", "BYTES", "Bytes", " ", "  ", "\t", "-", "/", "*", ",", "+", "0", "1", "9", "42", "00",
        "9223372036854775807", "9223372036854775808", "18446744073709551616", "99999999999999999999",
        "x", "\r\n", "é", "٣", "１", "e5", ".", "bytes=", ";",
    ]

    @Test func contentRangeRandomInputsKeepInvariants() {
        var rng = FuzzRandom(seed: 0xC0DE_0001)
        for _ in 0..<20_000 {
            let s = rng.string(from: Self.rangeAlphabet, maxParts: 10)
            checkContentRange(s)
        }
    }

    @Test func contentRangeValidValuesRoundTrip() {
        var rng = FuzzRandom(seed: 0xC0DE_0002)
        for i in 0..<20_000 {
            let (a, b, n) = rng.rangeTriple(huge: i % 4 == 0)
            let spaces = [" ", "", "\t"][rng.below(3)]
            let unit = ["bytes", "BYTES", "Bytes"][rng.below(3)]
            let text = "\(spaces)\(unit) \(a)-\(b)/\(n)\(spaces)"
            let cr = ContentRange(parsing: text)
            #expect(cr == ContentRange(first: a, last: b, completeLength: n), "\(text)")
            #expect(cr?.byteCount == b - a + 1)
            // Unknown complete length.
            #expect(ContentRange(parsing: "bytes \(a)-\(b)/*") == ContentRange(first: a, last: b, completeLength: nil))
            // Unsatisfied form.
            #expect(ContentRange(parsing: "bytes */\(n)") == ContentRange(first: nil, last: nil, completeLength: n))
            // Inconsistent values are refused, never normalised.
            if a < b { #expect(ContentRange(parsing: "bytes \(b)-\(a)/\(n)") == nil) }
            #expect(ContentRange(parsing: "bytes \(a)-\(n)/\(n)") == nil, "last = length")
        }
    }

    @Test func contentRangeMutationsKeepInvariants() {
        var rng = FuzzRandom(seed: 0xC0DE_0003)
        for _ in 0..<10_000 {
            let (a, b, n) = rng.rangeTriple(huge: rng.below(3) == 0)
            let mutated = rng.mutate("bytes \(a)-\(b)/\(n)", extra: ["-", "/", "*", " ", "0", "9", "+", "\u{0}"])
            checkContentRange(mutated)
        }
    }

    private func checkContentRange(_ s: String) {
        guard let cr = ContentRange(parsing: s) else { return }
        if let first = cr.first, let last = cr.last {
            #expect(first >= 0 && first <= last, "\(s.debugDescription) → \(cr)")
            if let n = cr.completeLength { #expect(last < n, "\(s.debugDescription) → \(cr)") }
            #expect((cr.byteCount ?? 0) >= 1)
        } else {
            #expect(cr.first == nil && cr.last == nil, "half a range from \(s.debugDescription)")
            #expect(cr.completeLength != nil, "bytes */* accepted from \(s.debugDescription)")
        }
        if let n = cr.completeLength { #expect(n >= 0) }
    }

    // MARK: Content-Disposition and file names

    static let dispositionTokens: [String] = [
        "attachment", "inline", ";", " ", "filename=", "FILENAME=", "filename*=", "name=", "\"", "\\", "'",
        "UTF-8''", "utf-8'en'", "iso-8859-1''", "koi8-r''", "%2F", "%5C", "%00", "%0A", "%2E%2E", "%C3%A9",
        "%FF", "%", "%G1", "..", ".", "/", "\\\\", "a", "evil.sh", "é", "\u{202E}gpj.exe", "\u{0}", "\u{7F}",
        "\u{85}", "\r", "\n", "=", "日本", "\u{2066}", "~", "-",
    ]

    @Test func dispositionNamesAreAlwaysSafeAfterSanitising() {
        var rng = FuzzRandom(seed: 0xD150_0001)
        for _ in 0..<15_000 {
            let value = rng.string(from: Self.dispositionTokens, maxParts: 14)
            let raw = ContentDisposition.fileName(from: value)
            let name = FileName.sanitize(raw ?? "")
            checkSafeName(name, from: value)
            checkSafeName(FileName.fromURLPath("http://h/d/" + value), from: "URL path " + value)
        }
    }

    @Test func extendedValuesDecodeAndWinOverPlainNames() {
        var rng = FuzzRandom(seed: 0xD150_0002)
        let pieces = ["a", "b", "é", "日", " ", "-", "_", "1"]
        for _ in 0..<5_000 {
            let plain = (0..<(1 + rng.below(8))).map { _ in pieces[rng.below(pieces.count)] }.joined()
            let encoded = plain.utf8.map { "%" + String($0, radix: 16, uppercase: true).leftPadded(2) }.joined()
            let header = "attachment; filename=\"fallback.bin\"; filename*=UTF-8''\(encoded)"
            #expect(ContentDisposition.fileName(from: header) == plain, "\(header)")
            // A quoted plain name with escapes unquotes to the original.
            let quoted = "\"" + plain.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
            #expect(ContentDisposition.fileName(from: "attachment; filename=\(quoted)") == plain)
        }
    }

    @Test func sanitiseOfRandomScalarsIsSafeAndIdempotent() {
        var rng = FuzzRandom(seed: 0xF11E_0001)
        // Everything but grapheme extenders right after a separator (see the disabled test below).
        let scalars: [Unicode.Scalar] = ["a", "Z", ".", " ", "/", "\\", "\u{0}", "\u{1F}", "\u{7F}", "\u{9F}", "\u{A0}",
                                          "é", "\u{202A}", "\u{202E}", "\u{2069}", "日", "😀", "-", "~", ":", "%"]
        for _ in 0..<15_000 {
            var view = String.UnicodeScalarView()
            for _ in 0..<rng.below(40) { view.append(scalars[rng.below(scalars.count)]) }
            let input = String(view)
            let once = FileName.sanitize(input)
            checkSafeName(once, from: input)
            #expect(FileName.sanitize(once) == once, "not idempotent for \(input.debugDescription)")
        }
        // Long names are cut to 200 bytes on a character boundary.
        for _ in 0..<200 {
            let s = String(repeating: ["a", "é", "日", "😀"][rng.below(4)], count: 50 + rng.below(300))
            let name = FileName.sanitize(s)
            #expect(name.utf8.count <= 200 && !name.isEmpty)
            #expect(s.hasPrefix(name))
            // Its extension is kept: the name still says what the file is.
            for ext in [".iso", ".tar.gz", ".AppImage"] {
                let cut = FileName.sanitize(s + ext)
                #expect(cut.utf8.count <= 200 && cut.hasSuffix(ext) && s.hasPrefix(String(cut.dropLast(ext.count))), "\(cut)")
                #expect(FileName.sanitize(cut) == cut)
            }
        }
        // An ending that is no extension (too long, or not letters and digits) is cut as the rest.
        let long = String(repeating: "L", count: 237)
        #expect(FileName.sanitize(long + ".tar.gz") == String(repeating: "L", count: 193) + ".tar.gz")
        #expect(FileName.sanitize(long + ".extension") == String(repeating: "L", count: 200))
        #expect(FileName.sanitize(long + ".a b") == String(repeating: "L", count: 200))
        #expect(FileName.sanitize(long + ".x.y.iso") == String(repeating: "L", count: 194) + ".y.iso", "two endings at most")
        // One character longer than the room left (a letter under 300 combining marks): not a hidden file.
        let heavy = FileName.sanitize("a" + String(repeating: "\u{301}", count: 300) + ".gz")
        #expect(heavy == FileName.fallback + ".gz", "\(heavy)")
    }

    /// A `/` followed by a combining mark is one Swift `Character` that is not equal to "/", so
    /// splitting on Characters keeps it: the sanitised name then contains a path separator byte.
    @Test
    func separatorsFollowedByCombiningMarksAreRemoved() {
        for input in ["a/\u{301}b", "x/\u{200D}y.txt", "dir/\u{301}../\u{301}evil", ".\u{301}hidden"] {
            let name = FileName.sanitize(input)
            checkSafeName(name, from: input)
            let fromHeader = FileName.sanitize(ContentDisposition.fileName(from: "attachment; filename*=UTF-8''a%2F%CC%81b") ?? "")
            checkSafeName(fromHeader, from: "filename*=UTF-8''a%2F%CC%81b")
        }
    }

    private func checkSafeName(_ name: String, from input: String) {
        let scalars = Array(name.unicodeScalars)
        #expect(!name.isEmpty, "empty name from \(input.debugDescription)")
        #expect(!scalars.contains { $0 == "/" || $0 == "\\" }, "separator in \(name.debugDescription) from \(input.debugDescription)")
        #expect(!scalars.contains { $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) },
                "control character in \(name.debugDescription) from \(input.debugDescription)")
        #expect(!scalars.contains { (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value) },
                "bidi override in \(name.debugDescription)")
        #expect(name != "." && name != "..", "\(name.debugDescription) from \(input.debugDescription)")
        #expect(scalars.first != ".", "hidden name \(name.debugDescription) from \(input.debugDescription)")
        #expect(name.utf8.count <= 200)
    }

    // MARK: Response heads

    static let headLines: [String] = [
        "HTTP/1.1 206 Partial Content\r\n", "HTTP/1.1 200 OK\r\n", "HTTP/1.1 100 Continue\r\n", "HTTP/2 416\r\n",
        "HTTP/1.0 302 Found", "HTTP/1.1 99999 Big\r\n", "HTTP/1.1 -1 Neg\r\n", "HTTP/1.1\r\n", "HTTP/", "HTTP/1.1 +200 x",
        "\r\n", "", "\n", "   ", "Content-Length: 10\r\n", "content-length:   99999999999999999999\r\n",
        "Content-Range: bytes 0-0/5\r\n", "Content-Range: bytes */0\r\n", "ETag: \"x\"\r\n", "ETag:\r\n",
        "Content-Encoding: gzip\r\n", "Content-Encoding: identity\r\n", "Transfer-Encoding: chunked\r\n",
        "Accept-Ranges: none, bytes\r\n", ": no name\r\n", "NoColon\r\n", "X-Ünïcode: välue\r\n", "\t folded\r\n",
        "Retry-After: 5\r\n", "Set-Cookie: a=b; c=d\r\n", "Location: http://h/x\r\n", " Spaced-Name : v \r\n",
    ]

    @Test func responseHeadRandomLinesKeepInvariants() {
        var rng = FuzzRandom(seed: 0x4EAD_0001)
        for _ in 0..<3_000 {
            var head = ResponseHead()
            var sawStatusLine = false
            for _ in 0..<rng.below(24) {
                var line = Self.headLines[rng.below(Self.headLines.count)]
                if rng.below(8) == 0 { line = rng.mutate(line, extra: [":", " ", "\r", "\n", "\u{0}", "H", "1"]) }
                let before = head
                head.append(line: Substring(line))
                if Substring(line).trimmingASCIIWhitespace().hasPrefix("HTTP/") {
                    sawStatusLine = true
                    #expect(head.fields.isEmpty && !head.isComplete, "a status line starts a new head")
                } else if before.isComplete == false && head.isComplete {
                    #expect(head.status >= 200)
                }
                #expect(head.status == 0 || (100...999).contains(head.status))
                for f in head.fields {
                    #expect(f.name == f.name.lowercased())
                    #expect(Substring(f.name).trimmingASCIIWhitespace() == Substring(f.name))
                    #expect(Substring(f.value.unsafeRawValue).trimmingASCIIWhitespace() == Substring(f.value.unsafeRawValue))
                }
                // Accessors never trap.
                _ = head.contentLength
                _ = head.contentRange
                _ = head.contentEncoding
                _ = head.isChunked
                _ = head.acceptsByteRanges
                _ = head.joinedValue("content-range")
                if let cl = head.contentLength { #expect(cl >= 0) }
            }
            if !sawStatusLine { #expect(head.status == 0) }
        }
    }

    @Test func interimHeadsAreReplacedByTheFinalOne() {
        var rng = FuzzRandom(seed: 0x4EAD_0002)
        for _ in 0..<2_000 {
            var head = ResponseHead()
            for _ in 0..<rng.below(3) {
                head.append(line: "HTTP/1.1 100 Continue\r\n")
                head.append(line: "X-Interim: \(rng.below(100))\r\n")
                head.append(line: "\r\n")
                #expect(!head.isComplete)
            }
            let status = [200, 206, 416, 503][rng.below(4)]
            head.append(line: Substring("HTTP/1.1 \(status) Whatever\r\n"))
            let n = rng.below(6)
            for i in 0..<n { head.append(line: Substring("X-F\(i):  v\(i) \r\n")) }
            head.append(line: "\r\n")
            #expect(head.status == status && head.isComplete)
            #expect(head.fields.count == n)
            #expect(head.value("x-interim") == nil)
            for i in 0..<n { #expect(head.value("X-F\(i)") == ServerText("v\(i)")) }
        }
    }

    // MARK: Retry-After

    @Test func retryAfterRandomInputsAreNilOrNonNegative() {
        var rng = FuzzRandom(seed: 0x2E72_0001)
        let tokens = ["Sun,", "Mon,", " ", "06", "31", "32", "0", "Nov", "nov", "Feb", "Xyz", "1994", "9999", "10000",
                      "08:49:37", "23:59:60", "24:00:00", "GMT", "UTC", "-", "+1", "120", "1.5", "99999999999999999999", "\t"]
        for _ in 0..<15_000 {
            let s = rng.string(from: tokens, maxParts: 8)
            if let v = parseRetryAfter(s, now: 784_111_777) {
                #expect(v >= 0 && v.isFinite, "\(s.debugDescription) → \(v)")
                #expect(!Format.seconds(v).isEmpty)
            }
        }
        for _ in 0..<5_000 {
            let n = Int64(bitPattern: rng.next() >> UInt64(1 + rng.below(63)))
            // Past `longestDelay` (31.7 years) every number is that longest wait.
            #expect(parseRetryAfter(" \(n) ") == min(Double(n), longestDelay))
            #expect(parseRetryAfter("-\(n)") == nil)
        }
    }

    @Test func imfFixdatesAgreeWithTimegm() {
        var rng = FuzzRandom(seed: 0x2E72_0002)
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        for _ in 0..<5_000 {
            let year = 1970 + rng.below(8030), month = rng.below(12), day = 1 + rng.below(28)
            let hh = rng.below(24), mm = rng.below(60), ss = rng.below(60)
            let text = "\(days[rng.below(7)]), \(String(day).leftPadded(2)) \(months[month]) \(year) "
                + "\(String(hh).leftPadded(2)):\(String(mm).leftPadded(2)):\(String(ss).leftPadded(2)) GMT"
            var tm = Glibc.tm()
            tm.tm_year = Int32(year - 1900)
            tm.tm_mon = Int32(month)
            tm.tm_mday = Int32(day)
            tm.tm_hour = Int32(hh)
            tm.tm_min = Int32(mm)
            tm.tm_sec = Int32(ss)
            let expected = Int64(timegm(&tm))
            #expect(parseIMFFixdate(Substring(text)) == expected, "\(text)")
            #expect(parseRetryAfter(text, now: expected - 30) == 30)
        }
    }

    // MARK: Byte sizes

    @Test func byteSizesParseOrRefuseWithoutTrapping() {
        var rng = FuzzRandom(seed: 0xB17E_0001)
        let tokens = ["0", "1", "9", "12", ".", "5", "k", "K", "m", "M", "g", "G", "t", "T", "i", "B", "b", "/s", "-", "+",
                      "e", "E", " ", "x", "١", "99999999", "nan", "inf", "0x10", "é"]
        for _ in 0..<20_000 {
            let s = rng.string(from: tokens, maxParts: 6)
            if let v = parseByteSize(s) {
                #expect(v >= 0 && Double(v) < 4.6e18, "\(s.debugDescription) → \(v)")
            }
        }
        let units: [(String, Int64)] = [("", 1), ("k", 1 << 10), ("K", 1 << 10), ("m", 1 << 20), ("MiB", 1 << 20), ("G", 1 << 30),
                                        ("gb", 1 << 30), ("T", 1 << 40), ("M/s", 1 << 20)]
        for _ in 0..<5_000 {
            let n = Int64(rng.below(100_000))
            let (suffix, mult) = units[rng.below(units.count)]
            #expect(parseByteSize("\(n)\(suffix)") == n * mult, "\(n)\(suffix)")
        }
    }

    // MARK: URLs

    static let urlTokens: [String] = [
        "http", "https", "HTTP", "ftp", "h+t-t.p", "://", ":", "/", "//", "@", "user", "pw", "%40", "[", "]", "::1",
        "Example.COM", "127.0.0.1", "8080", "?", "#", "q=a@b", "é", " ", "", "..", "x",
    ]

    /// The credentials rule (`URLCredentials`, on bytes) cuts what a Character-by-Character reading
    /// of the same rule cuts, on every generated URL: the journal, the finished-file mark and the
    /// messages had one each of these before they shared one.
    @Test func theCredentialsRuleOnBytesCutsWhatACharacterReadingCuts() {
        func reference(_ url: String) -> String {
            guard let schemeEnd = url.firstRange(of: "://") else { return url }
            let rest = url[schemeEnd.upperBound...]
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? url.endIndex
            guard let at = url[schemeEnd.upperBound..<authorityEnd].lastIndex(of: "@") else { return url }
            return String(url[..<schemeEnd.upperBound]) + String(url[url.index(after: at)...])
        }
        var rng = FuzzRandom(seed: 0x0721_0002)
        for _ in 0..<20_000 {
            let s = rng.string(from: Self.urlTokens, maxParts: 14)
            let cut = URLCredentials.redacting(s)
            #expect(cut == reference(s), "\(s.debugDescription)")
            #expect(URLParts.redactingCredentials(s) == cut && JournalHeader.redactingCredentials(s) == cut)
            #expect(FinishedMark.source(of: s) == FinishedMark.source(of: cut), "\(s.debugDescription)")
        }
        // Where the two readings part: a delimiter with a combining mark after it is one Character,
        // but libcurl, which sends the request, splits the authority at its byte as the rule does.
        let combining = "https://a/\u{301}@h/f"
        #expect(URLCredentials.redacting(combining) == combining)
        #expect(reference(combining) == "https://h/f")
    }

    @Test func urlPartsAndRedactionKeepInvariants() {
        var rng = FuzzRandom(seed: 0x0721_0001)
        for _ in 0..<15_000 {
            let s = rng.string(from: Self.urlTokens, maxParts: 12)
            let redacted = URLParts.redactingCredentials(s)
            #expect(URLParts.redactingCredentials(redacted) == redacted, "not idempotent: \(s.debugDescription)")
            #expect(redacted.count <= s.count)
            guard let u = URLParts(s) else { continue }
            #expect(!u.scheme.isEmpty && u.scheme == u.scheme.lowercased())
            #expect(!u.host.isEmpty && u.host == u.host.lowercased(), "\(s.debugDescription)")
            #expect(!u.host.contains("@") && !u.host.contains("/"), "\(s.debugDescription) → \(u.host)")
            let r = URLParts(redacted)
            #expect(r?.hasUserInfo == false, "credentials survive redaction: \(s.debugDescription) → \(redacted.debugDescription)")
            #expect(r?.host == u.host, "redaction moved the host: \(s.debugDescription)")
            #expect(r?.scheme == u.scheme)
        }
    }

    @Test func credentialsNeverSurviveRedaction() {
        var rng = FuzzRandom(seed: 0x0721_0002)
        let secretChars = Array("abcXYZ019:._~!$&'()*+,;=%")
        for _ in 0..<5_000 {
            let secret = "S3CR3T" + String((0..<rng.below(12)).map { _ in secretChars[rng.below(secretChars.count)] })
            let path = ["/f", "/a/b?x=1", "", "?q=@", "#frag@"][rng.below(5)]
            let url = "https://bob:\(secret)@host.example:8443\(path)"
            let redacted = URLParts.redactingCredentials(url)
            #expect(!redacted.contains("S3CR3T"), "\(url) → \(redacted)")
            #expect(redacted == "https://host.example:8443\(path)")
        }
    }
}

// MARK: - Generators

/// SplitMix64: small, fast, deterministic. The one generator of this test target.
struct FuzzRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in 0..<n (n > 0).
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    /// Up to `maxParts` tokens concatenated.
    mutating func string(from tokens: [String], maxParts: Int) -> String {
        var s = ""
        for _ in 0..<below(maxParts + 1) { s += tokens[below(tokens.count)] }
        return s
    }

    /// first ≤ last < length, small or spread over the whole Int64 range.
    mutating func rangeTriple(huge: Bool) -> (Int64, Int64, Int64) {
        let n: Int64 = huge ? Int64(bitPattern: next() >> 1) | 1 : Int64(1 + below(1 << 20))
        let a = Int64(bitPattern: next() >> 1) % n
        let b = a + Int64(bitPattern: next() >> 1) % (n - a)
        return (a, b, n)
    }

    /// 1–4 random edits: delete, duplicate, replace or insert a character (from `extra` or the string).
    mutating func mutate(_ s: String, extra: [Character]) -> String {
        var chars = Array(s)
        for _ in 0..<(1 + below(4)) {
            let pool = extra + chars
            switch below(4) {
            case 0 where !chars.isEmpty: chars.remove(at: below(chars.count))
            case 1 where !chars.isEmpty:
                let i = below(chars.count)
                chars.insert(chars[i], at: i)
            case 2 where !chars.isEmpty: chars[below(chars.count)] = pool[below(pool.count)]
            default: chars.insert(pool[below(pool.count)], at: below(chars.count + 1))
            }
        }
        return String(chars)
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }

    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let r = rest.firstRange(of: target) {
            out += rest[..<r.lowerBound] + replacement
            rest = rest[r.upperBound...]
        }
        return out + rest
    }
}
