/// What a request's `Range` (and `If-Range`) asks of a representation, per RFC 9110 §14.
enum RangeDecision: Equatable {
    /// Serve the whole representation with 200.
    case full
    /// Serve `first...last` (inclusive) with 206.
    case partial(first: Int64, last: Int64)
    /// 416 with `Content-Range: bytes */N`.
    case unsatisfiable

    /// Only GET has range semantics (RFC 9110 §14.2); HEAD and others get the full answer.
    static func decide(for request: HTTPRequest, representation: Representation) -> RangeDecision {
        guard request.method == "GET", let header = request.headers["range"] else { return .full }
        if let ifRange = request.headers["if-range"], !ifRangeMatches(ifRange, representation) { return .full }
        return evaluate(header, length: representation.length)
    }

    /// An entity tag must match strongly; anything else is compared as an HTTP-date, exactly
    /// (RFC 9110 §13.1.5: the date must equal Last-Modified).
    static func ifRangeMatches(_ value: String, _ representation: Representation) -> Bool {
        let value = String(value.trimmingSpaces)
        if value.hasPrefix("W/") { return false }
        if value.hasPrefix("\"") { return value == representation.etag && !representation.etag.hasPrefix("W/") }
        return value == representation.lastModified
    }

    /// Parses `bytes=a-b`, `bytes=a-`, `bytes=-n`. A header we cannot parse is ignored (RFC 9110 §14.2)
    /// and several ranges are answered with the whole body, which the RFC allows.
    /// An empty representation has no satisfiable range, so every range on it is a 416 `bytes */0`.
    static func evaluate(_ header: String, length: Int64) -> RangeDecision {
        let trimmed = header.trimmingSpaces
        guard trimmed.lowercased().hasPrefix("bytes=") else { return .full }
        let specs = trimmed.dropFirst(6).split(separator: ",").map { $0.trimmingSpaces }
        guard specs.count == 1, let spec = specs.first, let dash = spec.firstIndex(of: "-") else { return .full }
        let firstText = spec[..<dash]
        let lastText = spec[spec.index(after: dash)...]
        if firstText.isEmpty {
            guard let suffix = Int64(lastText), !lastText.hasPrefix("+") else { return .full }
            guard suffix > 0, length > 0 else { return .unsatisfiable }
            return .partial(first: max(0, length - suffix), last: length - 1)
        }
        guard let first = Int64(firstText), !firstText.hasPrefix("+"), first >= 0 else { return .full }
        var last = length - 1
        if !lastText.isEmpty {
            guard let parsed = Int64(lastText), !lastText.hasPrefix("+"), parsed >= first else { return .full }
            last = min(parsed, length - 1)
        }
        guard first < length else { return .unsatisfiable }
        return .partial(first: first, last: last)
    }
}
