/// `URLParts` found on the UTF-8 bytes of a URL that is pure ASCII.
///
/// In ASCII text every `Character` is one byte except "\r\n", and no delimiter (`:`, `/`, `?`, `#`,
/// `@`, `[`, `]`) is part of a larger one, so a byte scan finds exactly what `URLParts(reference:)`
/// finds on `Character`s, with no grapheme breaking. That parse cost tens of thousands of
/// instructions per URL, and it runs several times for every file of a batch. A URL with any other
/// byte is left to the reference (`notASCII`): there a combining mark after a delimiter makes one
/// `Character` that is not the delimiter, and only the `Character` walk says so.
enum ASCIIURL: Equatable {
    case parsed(Parts)
    /// Not an absolute URL with a scheme and a host (`URLParts` is nil).
    case invalid
    case notASCII

    struct Parts: Equatable {
        /// Lowercased.
        var scheme: String
        /// Lowercased; an IPv6 literal keeps its brackets.
        var host: String
        var hasUserInfo: Bool
        /// The number after the last colon of the host and port, read as `Int(_:)` reads it, when that
        /// colon is not inside an IPv6 literal's brackets (what `HostBudget.key` takes for the port).
        var port: Int?
    }

    init(_ url: String) {
        var text = url
        self = text.withUTF8 { Self.parse($0) }
    }

    private static let colon = UInt8(ascii: ":"), slash = UInt8(ascii: "/")

    static func parse(_ b: UnsafeBufferPointer<UInt8>) -> ASCIIURL {
        guard ASCIIBytes.isASCII(b) else { return .notASCII }
        let n = b.count
        // The first "://" ends the scheme.
        guard let sep = ASCIIBytes.schemeSeparator(in: b), sep > 0 else { return .invalid }
        for c in b[0..<sep] {
            let letter = (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z")
            let digit = c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")
            guard letter || digit || c == UInt8(ascii: "+") || c == UInt8(ascii: "-") || c == UInt8(ascii: ".") else {
                return .invalid
            }
        }
        // The authority runs to the first "/", "?" or "#"; user info ends at its last "@".
        let authorityStart = sep + 3
        var authorityEnd = authorityStart
        while authorityEnd < n, b[authorityEnd] != slash, b[authorityEnd] != UInt8(ascii: "?"),
            b[authorityEnd] != UInt8(ascii: "#")
        {
            authorityEnd += 1
        }
        var hostStart = authorityStart
        var hasUserInfo = false
        if let at = ASCIIBytes.lastIndex(of: UInt8(ascii: "@"), in: b, authorityStart..<authorityEnd) {
            hostStart = at + 1
            hasUserInfo = true
        }
        let lastColon = ASCIIBytes.lastIndex(of: colon, in: b, hostStart..<authorityEnd)
        let hostEnd: Int
        if hostStart < authorityEnd, b[hostStart] == UInt8(ascii: "[") {
            guard let close = ASCIIBytes.firstIndex(of: UInt8(ascii: "]"), in: b, hostStart..<authorityEnd) else {
                return .invalid
            }
            hostEnd = close + 1
        } else {
            hostEnd = lastColon ?? authorityEnd
        }
        guard hostEnd > hostStart else { return .invalid }
        var port: Int?
        if let c = lastColon, ASCIIBytes.firstIndex(of: UInt8(ascii: "]"), in: b, c..<authorityEnd) == nil {
            port = ASCIIBytes.int(b, c + 1..<authorityEnd)
        }
        return .parsed(
            Parts(
                scheme: ASCIIBytes.lowercased(b, 0..<sep), host: ASCIIBytes.lowercased(b, hostStart..<hostEnd),
                hasUserInfo: hasUserInfo,
                port: port))
    }
}
