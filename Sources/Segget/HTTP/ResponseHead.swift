/// The status line and header fields of one HTTP response, as collected from libcurl's header
/// callback.
///
/// libcurl reports the header lines of every response it reads on a handle (interim `100 Continue`,
/// redirects when following them); a new status line starts a new head, so `append(line:)` keeps only
/// the latest response.
public struct ResponseHead: Sendable, Equatable {
    public private(set) var status: Int = 0
    public private(set) var httpVersion: String = ""
    /// Field names lowercased, values trimmed, in arrival order.
    public private(set) var fields: [(name: String, value: String)] = []
    /// True once the empty line that ends the head has been seen.
    public private(set) var isComplete = false
    /// Bytes of header lines received for this response so far (status line included).
    public private(set) var byteCount = 0
    /// Fields continued on a following line (obs-fold, RFC 9112 §5.2), lowercased, in arrival order.
    public private(set) var foldedNames: [String] = []
    /// Fields with whitespace between the name and the colon (RFC 9112 §5.1), lowercased.
    public private(set) var spacedNames: [String] = []

    public init() {}

    public static func == (a: ResponseHead, b: ResponseHead) -> Bool {
        a.status == b.status && a.httpVersion == b.httpVersion && a.isComplete == b.isComplete
            && a.fields.elementsEqual(b.fields, by: { $0.name == $1.name && $0.value == $1.value })
            && a.foldedNames == b.foldedNames && a.spacedNames == b.spacedNames
    }

    /// Feeds one raw header line (with or without its CRLF).
    public mutating func append(line raw: Substring) {
        let line = raw.trimmingASCIIWhitespace()
        if line.hasPrefix("HTTP/") {
            self = ResponseHead()
            byteCount = raw.utf8.count
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
            httpVersion = parts.first.map(String.init) ?? ""
            if parts.count >= 2, let code = Int(parts[1]), (100...999).contains(code) { status = code }
            return
        }
        byteCount += raw.utf8.count
        if line.isEmpty {
            // An interim 1xx head is followed by the real one; keep waiting for it.
            if status >= 200 { isComplete = true }
            return
        }
        if let first = raw.unicodeScalars.first, first == " " || first == "\t", let last = fields.indices.last {
            // obs-fold: the line continues the previous field; a recipient reads it as one space.
            foldedNames.append(fields[last].name)
            fields[last].value = fields[last].value.isEmpty ? String(line) : fields[last].value + " " + line
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let rawName = line[..<colon]
        let name = rawName.trimmingASCIIWhitespace().lowercased()
        if rawName.unicodeScalars.last.map({ $0 == " " || $0 == "\t" }) ?? false { spacedNames.append(name) }
        let value = line[line.index(after: colon)...].trimmingASCIIWhitespace()
        fields.append((name, String(value)))
    }

    /// This head as the answer to a request for the rest of the representation from `offset`: the
    /// `Content-Range` and `Content-Length` of an answer to `bytes=0-` (all `total` bytes) rewritten
    /// to what is left of it from `offset`. A probe's open-ended answer, continued by the fetch after
    /// the probe kept its first `offset` bytes, is judged as what it now is.
    package func continuing(from offset: Int64, total: Int64) -> ResponseHead {
        var h = self
        h.fields = fields.filter { $0.name != "content-range" && $0.name != "content-length" }
        h.fields.append((name: "content-range", value: "bytes \(offset)-\(total - 1)/\(total)"))
        h.fields.append((name: "content-length", value: "\(total - offset)"))
        return h
    }

    /// All values of a field, one per field line, in arrival order.
    public func values(_ name: String) -> [String] {
        let n = name.lowercased()
        return fields.filter { $0.name == n }.map(\.value)
    }

    /// The first value of a field (case-insensitive name), or nil.
    public func value(_ name: String) -> String? {
        let n = name.lowercased()
        return fields.first(where: { $0.name == n })?.value
    }

    /// All values of a field joined with ", " as RFC 9110 allows for list fields; nil if absent.
    public func joinedValue(_ name: String) -> String? {
        let n = name.lowercased()
        let vs = fields.filter { $0.name == n }.map(\.value)
        return vs.isEmpty ? nil : vs.joined(separator: ", ")
    }

    /// The declared body length: the one value every `Content-Length` field and list member agrees
    /// on (`42, 42` is 42); nil when absent, malformed or disagreeing (see `framingProblem`).
    public var contentLength: Int64? {
        let members = values("content-length").flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
        let lengths = members.map { parseDecimal($0.trimmingASCIIWhitespace()) }
        guard let first = lengths.first, let n = first, lengths.allSatisfy({ $0 == n }) else { return nil }
        return n
    }
    public var contentRange: ContentRange? { value("content-range").flatMap { ContentRange(parsing: $0) } }
    public var etag: String? { value("etag") }
    public var lastModified: String? { value("last-modified") }
    public var isChunked: Bool {
        joinedValue("transfer-encoding")?.lowercased().contains("chunked") ?? false
    }
    /// True when the server says it accepts byte ranges (`Accept-Ranges: bytes`).
    public var acceptsByteRanges: Bool {
        joinedValue("accept-ranges")?.lowercased().split(separator: ",").contains {
            $0.trimmingASCIIWhitespace() == "bytes"
        } ?? false
    }
    /// A content coding other than identity, which makes byte offsets meaningless.
    public var contentEncoding: String? {
        guard let v = joinedValue("content-encoding")?.trimmingCharacters(), !v.isEmpty,
            v.lowercased() != "identity"
        else { return nil }
        return v
    }
}

extension String {
    func trimmingCharacters() -> String { String(Substring(self).trimmingASCIIWhitespace()) }
}
