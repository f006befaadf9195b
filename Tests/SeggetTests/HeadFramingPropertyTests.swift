import Testing

@testable import Segget

/// Whole response heads as servers write them, generated from the fields that decide framing
/// (`Transfer-Encoding`, `Content-Length`, `Content-Range`) in every combination, with the name's
/// case, blanks around the colon and the value, list members and duplicates varied:
///
/// - the byte-level reader (`append(line:)`) and the reference (`append(referenceLine:)`) end with
///   equal heads, and so equal verdicts;
/// - a head the fetch accepts for a range stays accepted when the probe's held answer is continued
///   from any offset inside it (`continuing(from:to:total:)`). A chunked 206 with no `Content-Length` was once given one by
///   `continuing`, and then refused as smuggling on every server that frames its 206s that way.
@Suite struct HeadFramingPropertyTests {
    static let nameCases = [
        ["Transfer-Encoding", "transfer-encoding", "TRANSFER-ENCODING", "Transfer-encoding"],
        ["Content-Length", "content-length", "CONTENT-LENGTH", "Content-length"],
        ["Content-Range", "content-range", "CONTENT-RANGE"],
    ]
    static let codings = ["chunked", "Chunked", "CHUNKED", " chunked ", "gzip, chunked", "chunked, chunked", "identity", "chunked;q=1"]
    static let separators = [": ", ":", ":  ", ":\t", " : "]

    /// One generated head for a 206 (or 200) answer to `range` of a file of `total` bytes.
    static func head(_ rng: inout FuzzRandom, range: Range<Int64>, total: Int64) -> (lines: [String], status: Int) {
        let status = rng.below(5) == 0 ? 200 : 206
        var fields: [String] = ["Accept-Ranges: bytes", "ETag: \"abc\"", "Date: Sun, 29 Nov 2026 02:44:24 GMT"]
        func name(_ k: Int) -> String { nameCases[k][rng.below(nameCases[k].count)] }
        func sep() -> String { separators[rng.below(rng.below(4) == 0 ? separators.count : 2)] }
        let length = status == 206 ? range.count : Int(total)
        let chunked = rng.below(2) == 0
        if chunked { fields.append(name(0) + sep() + (rng.below(4) == 0 ? codings[rng.below(codings.count)] : "chunked")) }
        // A length: always without chunked coding (most servers), seldom with it (smuggling).
        if !chunked || rng.below(6) == 0 {
            var value = "\(length)"
            switch rng.below(8) {
            case 0: value = "\(length), \(length)"
            case 1: value = "\(length + 1)"
            case 2: value = "+\(length)"
            default: break
            }
            fields.append(name(1) + sep() + value)
            if rng.below(10) == 0 { fields.append(name(1) + sep() + "\(length)") }
        }
        if status == 206 {
            var value = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)"
            if rng.below(10) == 0 { value = "bytes \(range.lowerBound)-\(range.upperBound - 1)/*" }
            fields.append(name(2) + sep() + value)
            if rng.below(12) == 0 { fields.append(name(2) + sep() + "bytes 0-0/\(total)") }
        }
        fields.shuffle(using: &rng)
        let status206 = ["HTTP/1.1 206 Partial Content", "HTTP/1.1 206", "HTTP/2 206"]
        let line = status == 206 ? status206[rng.below(3)] : "HTTP/1.1 200 OK"
        return ([line] + fields + [""], status)
    }

    static func parse(_ lines: [String], reference: Bool) -> ResponseHead {
        var h = ResponseHead()
        for l in lines {
            let raw = Substring(l + "\r\n")
            if reference { h.append(referenceLine: raw) } else { h.append(line: raw) }
        }
        return h
    }

    @Test func bothReadersAgreeAndContinuingKeepsTheVerdict() {
        var rng = FuzzRandom(seed: 0x5EED_0206)
        var accepted = 0, refused = 0, chunkedAccepted = 0
        for _ in 0..<8_000 {
            let total = Int64(1 + rng.below(1 << 26))
            let first = Int64(rng.below(Int(total)))
            let last = first + Int64(rng.below(Int(total - first)))
            let range = first..<(last + 1)
            let (lines, status) = Self.head(&rng, range: range, total: total)
            let fast = Self.parse(lines, reference: false)
            let reference = Self.parse(lines, reference: true)
            #expect(fast == reference, "\(lines)")
            guard status == 206 else { continue }
            let q = ResponseQuestion(range: range, ranged: true, totalLength: total, etag: "\"abc\"", lastModified: nil, url: "http://h/f")
            let verdict = ResponseVerdict(for: q, head: fast)
            #expect(verdict == ResponseVerdict(for: q, head: reference), "\(lines)")
            // The probe held this answer; the fetch continues it from `offset` to its end.
            let offset = range.lowerBound + Int64(rng.below(Int(range.count)))
            let continued = fast.continuing(from: offset, to: range.upperBound, total: total)
            let q2 = ResponseQuestion(range: offset..<range.upperBound, ranged: true, totalLength: total, etag: "\"abc\"", lastModified: nil, url: "http://h/f")
            let later = ResponseVerdict(for: q2, head: continued)
            switch verdict {
            case .accept:
                accepted += 1
                if fast.isChunked { chunkedAccepted += 1 }
                #expect(later == .accept, "\(lines) from \(offset): \(later)")
                #expect(continued.framingProblem == nil, "\(lines) from \(offset)")
            default:
                // The probe refuses such an answer before anything could continue it.
                if fast.framingProblem != nil { refused += 1 }
            }
        }
        // The corpus holds every kind: accepted plain and chunked answers, and refused framings.
        #expect(accepted > 1_000 && chunkedAccepted > 300 && refused > 300, "\(accepted) \(chunkedAccepted) \(refused)")
    }

    /// The named case: a chunked 206 without a length, as Python's and some application servers send.
    @Test func chunkedPartialAnswerContinues() {
        let h = Self.parse(["HTTP/1.1 206 Partial Content", "Transfer-Encoding: chunked", "Content-Range: bytes 0-16777215/268435456", ""], reference: false)
        #expect(h.framingProblem == nil)
        let c = h.continuing(from: 4096, to: 16_777_216, total: 268_435_456)
        #expect(c.framingProblem == nil)
        #expect(c.contentLength == nil)
        #expect(c.contentRange?.first == 4096)
        let withLength = Self.parse(["HTTP/1.1 206 Partial Content", "Content-Length: 16777216", "Content-Range: bytes 0-16777215/268435456", ""], reference: false)
        let continued = withLength.continuing(from: 4096, to: 16_777_216, total: 268_435_456)
        #expect(continued.contentLength == Int64(16_773_120))
    }
}
