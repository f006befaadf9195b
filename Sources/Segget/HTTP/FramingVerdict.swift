/// Why a response's framing cannot be trusted: its own fields disagree on where the body ends or
/// which bytes it holds, or take a shape that HTTP parsers read in different ways (the raw material of
/// request smuggling, RFC 9112 §6 and §11.2). libcurl resolves some of these silently (it keeps the
/// last `Content-Length`, lets `Transfer-Encoding` win) while segget reads other fields; so nothing
/// from such a response is written, and asking again cannot help.
public enum FramingProblem: Equatable, Sendable, CustomStringConvertible {
    /// `Content-Length` fields or list members with different values.
    case conflictingContentLength([ServerText])
    /// A `Content-Length` that is not a plain decimal number (sign, spaces, letters, empty, too big).
    case invalidContentLength(ServerText)
    /// Two `Content-Range` fields that name different ranges.
    case conflictingContentRange([ServerText])
    /// A 206 whose `Content-Length` is not the size of its `Content-Range`.
    case lengthContradictsRange(contentLength: Int64, range: ServerText)
    /// `Transfer-Encoding` and `Content-Length` together.
    case transferEncodingWithContentLength
    /// A transfer coding other than plain `chunked`.
    case unsupportedTransferEncoding(ServerText)
    /// A framing field continued on the next line (obs-fold).
    case foldedField(String)
    /// Whitespace between a framing field's name and its colon.
    case spaceBeforeColon(String)

    /// A clause about the response ("it carries …"), for "the answer from URL cannot be trusted: …".
    public var description: String {
        switch self {
        case .conflictingContentLength(let v):
            "it carries Content-Length values that disagree (\(v.map { "'\($0)'" }.joined(separator: " and ")))"
        case .invalidContentLength(let v):
            "it carries an invalid Content-Length ('\(v)')"
        case .conflictingContentRange(let v):
            "it carries Content-Range headers that disagree (\(v.map { "'\($0)'" }.joined(separator: " and ")))"
        case .lengthContradictsRange(let n, let r):
            "it declared Content-Length \(n), which does not match its Content-Range '\(r)'"
        case .transferEncodingWithContentLength:
            "it carries both Transfer-Encoding and Content-Length (an ambiguous framing used for request smuggling)"
        case .unsupportedTransferEncoding(let v):
            "it carries Transfer-Encoding '\(v)' (only plain chunked is accepted)"
        case .foldedField(let name):
            "its \(Self.displayName(name)) header is folded over two lines"
        case .spaceBeforeColon(let name):
            "its \(Self.displayName(name)) header has whitespace before the colon"
        }
    }

    /// The fields that decide where a body ends and which bytes it holds.
    static let framingFields = ["content-length", "transfer-encoding", "content-range"]

    static func displayName(_ name: String) -> String {
        switch name {
        case "content-length": "Content-Length"
        case "transfer-encoding": "Transfer-Encoding"
        case "content-range": "Content-Range"
        default: name
        }
    }
}

extension ResponseHead {
    /// The first reason this response's framing cannot be trusted, or nil when it is unambiguous.
    /// Pure: looks only at the collected head.
    public var framingProblem: FramingProblem? {
        if let name = spacedNames.first(where: FramingProblem.framingFields.contains) { return .spaceBeforeColon(name) }
        if let name = foldedNames.first(where: FramingProblem.framingFields.contains) { return .foldedField(name) }
        let lengths = unsafeRawValues("content-length")
        let codings = unsafeRawValues("transfer-encoding")
        if !codings.isEmpty {
            let joined = codings.joined(separator: ", ")
            let tokens = joined.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingASCIIWhitespace().lowercased() }
            guard tokens == ["chunked"] else { return .unsupportedTransferEncoding(ServerText(joined)) }
            if !lengths.isEmpty { return .transferEncodingWithContentLength }
        }
        var declared: Int64?
        for field in lengths {
            for member in listMembers(field) {
                guard let n = parseDecimal(member.trimmingASCIIWhitespace()) else { return .invalidContentLength(ServerText(field)) }
                if let d = declared, d != n { return .conflictingContentLength(lengths.map(ServerText.init)) }
                declared = n
            }
        }
        let ranges = unsafeRawValues("content-range")
        if ranges.count > 1 {
            let parsed = ranges.map { ContentRange(parsing: $0) }
            if parsed.contains(where: { $0 == nil || $0 != parsed[0] }) {
                return .conflictingContentRange(ranges.map(ServerText.init))
            }
        }
        if status == 206, let n = declared, let raw = ranges.first, let count = ContentRange(parsing: raw)?.byteCount, count != n {
            return .lengthContradictsRange(contentLength: n, range: ServerText(raw))
        }
        return nil
    }

    /// A `multipart/byteranges` body: several parts with their own ranges, not the one range asked.
    public var isMultipartByteRanges: Bool {
        unsafeRawValue("content-type")?.lowercased().hasPrefix("multipart/byteranges") ?? false
    }
}

/// `value.split(separator: ",", omittingEmptySubsequences: false)`: a value without a comma byte (a
/// `Content-Length` almost always) is its own one member, found without walking its `Character`s.
func listMembers(_ value: String) -> [Substring] {
    value.utf8.contains(UInt8(ascii: ",")) ? value.split(separator: ",", omittingEmptySubsequences: false) : [value[...]]
}
