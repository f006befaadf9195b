/// A parsed `Content-Range` response header (RFC 9110 §14.4).
///
/// `bytes 0-99/1000` gives `first = 0, last = 99, completeLength = 1000`; `bytes */1000` (sent with
/// 416) gives `first = last = nil`; an unknown complete length (`/*`) gives `completeLength = nil`.
public struct ContentRange: Equatable, Sendable {
    public let first: Int64?
    public let last: Int64?
    public let completeLength: Int64?

    public init(first: Int64?, last: Int64?, completeLength: Int64?) {
        self.first = first
        self.last = last
        self.completeLength = completeLength
    }

    /// Number of bytes the range covers, or nil for an unsatisfied range.
    public var byteCount: Int64? {
        guard let first, let last else { return nil }
        return last - first + 1
    }

    /// Parses the header value; nil when it is malformed, inconsistent (last < first, last ≥ length,
    /// or a last byte of 2^63 - 1, whose count of bytes no Int64 holds: with a length of `*` nothing
    /// else bounds it, and `byteCount` trapped) or uses a unit other than bytes.
    public init?(parsing value: some StringProtocol) {
        switch value.utf8.withContiguousStorageIfAvailable({ Self.scanASCII($0) }) {
        case .parsed(let range)?: self = range
        case .invalid?: return nil
        case .notASCII?, nil: self.init(referenceParsing: value)
        }
    }

    /// `init(parsing:)` on `Character`s: the reference `scanASCII` must agree with, and the parser of
    /// a value that is not pure ASCII.
    init?(referenceParsing value: some StringProtocol) {
        var s = Substring(value).trimmingASCIIWhitespace()
        guard s.count > 6, s.prefix(6).lowercased() == "bytes " else { return nil }
        s = s.dropFirst(6).trimmingASCIIWhitespace()
        guard let slash = s.firstIndex(of: "/") else { return nil }
        let rangePart = s[..<slash]
        let lengthPart = s[s.index(after: slash)...]
        let length: Int64?
        if lengthPart == "*" {
            length = nil
        } else {
            guard let n = parseDecimal(lengthPart) else { return nil }
            length = n
        }
        if rangePart == "*" {
            guard length != nil else { return nil }
            self.init(first: nil, last: nil, completeLength: length)
            return
        }
        guard let dash = rangePart.firstIndex(of: "-"),
            let a = parseDecimal(rangePart[..<dash]),
            let b = parseDecimal(rangePart[rangePart.index(after: dash)...]),
            a <= b, b < Int64.max
        else { return nil }
        if let length, b >= length { return nil }
        self.init(first: a, last: b, completeLength: length)
    }
}

/// Parses a non-empty run of ASCII digits that fits in Int64; nil otherwise (no sign, no spaces).
func parseDecimal(_ s: some StringProtocol) -> Int64? {
    guard !s.isEmpty, s.utf8.count <= 19 else { return nil }
    var n: Int64 = 0
    for c in s.utf8 {
        guard c >= 48, c <= 57 else { return nil }
        let (m, o1) = n.multipliedReportingOverflow(by: 10)
        let (r, o2) = m.addingReportingOverflow(Int64(c - 48))
        guard !o1, !o2 else { return nil }
        n = r
    }
    return n
}

extension Substring {
    /// Drops spaces, tabs, CR and LF at both ends. Works on Unicode scalars because "\r\n" is a
    /// single `Character` in Swift.
    func trimmingASCIIWhitespace() -> Substring {
        let scalars = unicodeScalars
        func isSpace(_ u: Unicode.Scalar) -> Bool { u == " " || u == "\t" || u == "\r" || u == "\n" }
        guard let first = scalars.firstIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
        let last = scalars.lastIndex(where: { !isSpace($0) }) ?? first
        return Substring(scalars[first...last])
    }
}

extension ContentRange {
    /// How a 206's range answers a request for `asked` (half-open) of a `total`-byte resource.
    public enum Answer: Equatable, Sendable {
        /// Exactly what was asked.
        case whole
        /// Bytes from the asked start up to `end` (exclusive), before the asked end: RFC 9110 lets a
        /// server send less than asked (a cap per response, say). Write them and ask for the rest.
        case prefix(end: Int64)
        /// Anything else (another start, past the asked end, no byte positions, unknown total for a
        /// shorter answer): unusable.
        case mismatch
    }

    /// Judges this range against the request. A shorter answer is trusted only with the complete
    /// length stated, so that "less" cannot stand for "a different file".
    public func answer(asked: Range<Int64>, total: Int64?) -> Answer {
        guard let first, let last, first == asked.lowerBound, !asked.isEmpty else { return .mismatch }
        if last == asked.upperBound - 1 { return .whole }
        guard last < asked.upperBound - 1, let total, completeLength == total else { return .mismatch }
        return .prefix(end: last + 1)
    }
}
