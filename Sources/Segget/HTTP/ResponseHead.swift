/// The status line and header fields of one HTTP response, as collected from libcurl's header
/// callback.
///
/// libcurl reports the header lines of every response it reads on a handle (interim `100 Continue`,
/// redirects when following them); a new status line starts a new head, so `append(line:)` keeps only
/// the latest response.
public struct ResponseHead: Sendable, Equatable {
    public private(set) var status: Int = 0
    public private(set) var httpVersion: ServerText = ""
    /// Field names lowercased, values trimmed, in arrival order. The values are the server's text: a
    /// message shows them escaped (`ServerText`).
    public var fields: [(name: String, value: ServerText)] { rawFields.map { ($0.name, ServerText($0.value)) } }
    /// `fields` as received, for the parsing below; never for a message.
    private var rawFields: [(name: String, value: String)] = []
    /// True once the empty line that ends the head has been seen.
    public private(set) var isComplete = false
    /// Bytes of header lines received for this response so far (status line included).
    public private(set) var byteCount = 0
    /// Fields continued on a following line (obs-fold, RFC 9112 §5.2), lowercased, in arrival order.
    public private(set) var foldedNames: [String] = []
    /// Fields with whitespace between the name and the colon (RFC 9112 §5.1), lowercased.
    public private(set) var spacedNames: [String] = []
    /// Fields with a line that was not UTF-8, read as Latin-1 (`decodedHeaderLine`), lowercased:
    /// each character of their values from U+0080 to U+00FF stands for one byte.
    private(set) var latin1Names: Set<String> = []

    /// The proxy that refused a tunnel with this status (`init(status:refusedBy:)`), as a message
    /// shows it; nil for a server's answer.
    public private(set) var tunnelRefusedBy: String?

    public init() {}

    /// A complete head of `status` and no fields: a refused tunnel's, whose own head libcurl keeps;
    /// `proxy` (shown) is the proxy that refused it.
    init(status: Int, refusedBy proxy: String) {
        append(line: "HTTP/1.1 \(status) \r\n")
        append(line: "\r\n")
        tunnelRefusedBy = proxy
    }

    public static func == (a: ResponseHead, b: ResponseHead) -> Bool {
        a.status == b.status && a.httpVersion == b.httpVersion && a.isComplete == b.isComplete
            && a.rawFields.elementsEqual(b.rawFields, by: { $0.name == $1.name && $0.value == $1.value })
            && a.foldedNames == b.foldedNames && a.spacedNames == b.spacedNames && a.latin1Names == b.latin1Names
            && a.tunnelRefusedBy == b.tunnelRefusedBy
    }

    /// `append(line:)` for a line read as Latin-1 or not (see `latin1Names`).
    mutating func append(line raw: Substring, latin1: Bool) {
        append(line: raw)
        if latin1, let last = rawFields.last { latin1Names.insert(last.name) }
    }

    /// Feeds one raw header line (with or without its CRLF).
    public mutating func append(line raw: Substring) {
        let foldable = !rawFields.isEmpty
        // A whole string (a header callback's line) becomes a String without a copy; `withUTF8` on a
        // Substring's view is a generic path that cost more than the scan.
        var text = String(raw)
        guard let line = text.withUTF8({ Self.scanASCII($0, foldable: foldable) }) else { return append(referenceLine: raw) }
        switch line {
        case .status(let version, let code):
            self = ResponseHead()
            byteCount = raw.utf8.count
            httpVersion = version
            status = code
            return
        case .end:
            if status >= 200 { isComplete = true }
        case .folded(let text):
            let last = rawFields.count - 1
            foldedNames.append(rawFields[last].name)
            rawFields[last].value = rawFields[last].value.isEmpty ? text : rawFields[last].value + " " + text
        case .field(let name, let value, let spaced):
            if spaced { spacedNames.append(name) }
            rawFields.append((name, value))
        case .ignored: break
        }
        byteCount += raw.utf8.count
    }

    /// `append(line:)` on `Character`s: the reference that `scanASCII` must agree with, and the reader
    /// of a line that is not pure ASCII.
    mutating func append(referenceLine raw: Substring) {
        let line = raw.trimmingASCIIWhitespace()
        if line.hasPrefix("HTTP/") {
            self = ResponseHead()
            byteCount = raw.utf8.count
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
            httpVersion = ServerText(parts.first ?? "")
            if parts.count >= 2, let code = Int(parts[1]), (100...999).contains(code) { status = code }
            return
        }
        byteCount += raw.utf8.count
        if line.isEmpty {
            // An interim 1xx head is followed by the real one; keep waiting for it.
            if status >= 200 { isComplete = true }
            return
        }
        if let first = raw.unicodeScalars.first, first == " " || first == "\t", let last = rawFields.indices.last {
            // obs-fold: the line continues the previous field; a recipient reads it as one space.
            foldedNames.append(rawFields[last].name)
            rawFields[last].value = rawFields[last].value.isEmpty ? String(line) : rawFields[last].value + " " + line
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let rawName = line[..<colon]
        let name = rawName.trimmingASCIIWhitespace().lowercased()
        if rawName.unicodeScalars.last.map({ $0 == " " || $0 == "\t" }) ?? false { spacedNames.append(name) }
        let value = line[line.index(after: colon)...].trimmingASCIIWhitespace()
        rawFields.append((name, String(value)))
    }

    /// This head as the answer to a request for the rest of an answer from byte 0 to `end` (exclusive)
    /// of a representation of `total` bytes, from `offset`: the `Content-Range` and `Content-Length`
    /// of an answer to `bytes=0-` (`end` is `total`) or to `bytes=0-N` (a shorter answer, `end` is N + 1)
    /// rewritten to what is left of it from `offset`. A probe's answer, continued by the fetch after
    /// the probe kept its first `offset` bytes, is judged as what it now is.
    ///
    /// The framing stays the server's: a `Content-Length` is rewritten only where the server sent
    /// one. A chunked answer (legal for a 206) has none, and one added here beside its
    /// `Transfer-Encoding` made the fetch refuse the server's own answer as smuggling.
    package func continuing(from offset: Int64, to end: Int64, total: Int64) -> ResponseHead {
        var h = self
        let hadLength = rawFields.contains { $0.name == "content-length" }
        h.rawFields = rawFields.filter { $0.name != "content-range" && $0.name != "content-length" }
        h.rawFields.append((name: "content-range", value: "bytes \(offset)-\(end - 1)/\(total)"))
        if hadLength { h.rawFields.append((name: "content-length", value: "\(end - offset)")) }
        return h
    }

    /// All values of a field, one per field line, in arrival order.
    public func values(_ name: String) -> [ServerText] { unsafeRawValues(name).map(ServerText.init) }

    /// The first value of a field (case-insensitive name), or nil.
    public func value(_ name: String) -> ServerText? { unsafeRawValue(name).map(ServerText.init) }

    /// All values of a field joined with ", " as RFC 9110 allows for list fields; nil if absent.
    public func joinedValue(_ name: String) -> ServerText? { unsafeRawJoinedValue(name).map(ServerText.init) }

    /// `values(_:)` as received, for parsing; never for a message.
    func unsafeRawValues(_ name: String) -> [String] {
        let n = Self.fieldName(name)
        var values: [String] = []
        for field in rawFields where field.name == n { values.append(field.value) }
        return values
    }

    /// `value(_:)` as received, for parsing; never for a message.
    func unsafeRawValue(_ name: String) -> String? {
        let n = Self.fieldName(name)
        return rawFields.first(where: { $0.name == n })?.value
    }

    /// The bytes of `value(_:)` as the server sent them: a value read as Latin-1 one byte a
    /// character, any other its UTF-8 (for a redirect's `Location`).
    func unsafeRawBytes(_ name: String) -> [UInt8]? {
        guard let value = unsafeRawValue(name) else { return nil }
        guard latin1Names.contains(Self.fieldName(name)) else { return Array(value.utf8) }
        return value.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }
    }

    /// `name` lowercased; the names asked for are lowercase ASCII, which `lowercased()` would copy.
    private static func fieldName(_ name: String) -> String {
        var text = name
        let isLowercaseASCII = text.withUTF8 { bytes in
            !bytes.contains { $0 >= 0x80 || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
        }
        return isLowercaseASCII ? name : name.lowercased()
    }

    /// `joinedValue(_:)` as received, for parsing; never for a message.
    func unsafeRawJoinedValue(_ name: String) -> String? {
        let vs = unsafeRawValues(name)
        return vs.isEmpty ? nil : vs.joined(separator: ", ")
    }

    /// The declared body length: the one value every `Content-Length` field and list member agrees
    /// on (`42, 42` is 42); nil when absent, malformed or disagreeing (see `framingProblem`).
    public var contentLength: Int64? {
        let members = unsafeRawValues("content-length").flatMap(listMembers)
        let lengths = members.map { parseDecimal($0.trimmingASCIIWhitespace()) }
        guard let first = lengths.first, let n = first, lengths.allSatisfy({ $0 == n }) else { return nil }
        return n
    }
    public var contentRange: ContentRange? { unsafeRawValue("content-range").flatMap { ContentRange(parsing: $0) } }
    public var etag: ServerText? { value("etag") }
    public var lastModified: ServerText? { value("last-modified") }
    /// Seconds the server asks to wait (`Retry-After`), when it says.
    public var retryAfter: Double? { unsafeRawValue("retry-after").flatMap { parseRetryAfter($0) } }
    public var isChunked: Bool {
        unsafeRawJoinedValue("transfer-encoding")?.lowercased().contains("chunked") ?? false
    }
    /// True when the server says it closes the connection after this answer (`Connection: close`).
    public var closesConnection: Bool {
        unsafeRawJoinedValue("connection")?.lowercased().split(separator: ",").contains {
            $0.trimmingASCIIWhitespace() == "close"
        } ?? false
    }
    /// True when the server says it accepts byte ranges (`Accept-Ranges: bytes`).
    public var acceptsByteRanges: Bool {
        unsafeRawJoinedValue("accept-ranges")?.lowercased().split(separator: ",").contains {
            $0.trimmingASCIIWhitespace() == "bytes"
        } ?? false
    }
    /// A content coding other than identity, which makes byte offsets meaningless.
    public var contentEncoding: ServerText? {
        guard let v = unsafeRawJoinedValue("content-encoding")?.trimmingCharacters(), !v.isEmpty,
            v.lowercased() != "identity"
        else { return nil }
        return ServerText(v)
    }
}

extension String {
    func trimmingCharacters() -> String { String(Substring(self).trimmingASCIIWhitespace()) }
}

extension ResponseHead {
    /// The seconds a refusal's `RateLimit` field (IETF httpapi draft: `"name";r=0;t=N`) or the older
    /// `RateLimit-Reset: N` says to wait; nil without them.
    var rateLimitReset: Double? {
        if let v = unsafeRawValue("ratelimit") {
            for param in v.split(separator: ";") {
                let p = Substring(param).trimmingASCIIWhitespace()
                if p.hasPrefix("t="), let n = parseDelaySeconds(p.dropFirst(2)) { return n }
            }
        }
        if let v = unsafeRawValue("ratelimit-reset"), let n = parseDelaySeconds(Substring(v).trimmingASCIIWhitespace()) { return n }
        return nil
    }

    /// The wait a refusal (429, 503) names: `Retry-After`, else the `RateLimit` reset; nil for any
    /// other status, or a refusal that names none. What the probe, the warm-ups and the fetch keep.
    var refusalWait: Double? {
        guard status == 429 || status == 503 else { return nil }
        return retryAfter ?? rateLimitReset
    }
}
