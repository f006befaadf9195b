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

    public init() {}

    public static func == (a: ResponseHead, b: ResponseHead) -> Bool {
        a.status == b.status && a.httpVersion == b.httpVersion && a.isComplete == b.isComplete
            && a.fields.elementsEqual(b.fields, by: { $0.name == $1.name && $0.value == $1.value })
    }

    /// Feeds one raw header line (with or without its CRLF).
    public mutating func append(line raw: Substring) {
        let line = raw.trimmingASCIIWhitespace()
        if line.hasPrefix("HTTP/") {
            self = ResponseHead()
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
            httpVersion = parts.first.map(String.init) ?? ""
            if parts.count >= 2, let code = Int(parts[1]), (100...999).contains(code) { status = code }
            return
        }
        if line.isEmpty {
            // An interim 1xx head is followed by the real one; keep waiting for it.
            if status >= 200 { isComplete = true }
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].trimmingASCIIWhitespace().lowercased()
        let value = line[line.index(after: colon)...].trimmingASCIIWhitespace()
        fields.append((name, String(value)))
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

    public var contentLength: Int64? { value("content-length").flatMap { parseDecimal($0) } }
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
