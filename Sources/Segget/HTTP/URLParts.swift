import SeggetJournal

/// The few pieces of an absolute http(s) URL that segget's policies need. Parsing beyond that is
/// libcurl's job.
public struct URLParts: Equatable, Sendable {
    public let scheme: String
    public let host: String
    public let hasUserInfo: Bool

    /// Nil unless the string is an absolute URL with a scheme and a host.
    public init?(_ url: String) {
        switch ASCIIURL(url) {
        case .parsed(let u): self.init(scheme: u.scheme, host: u.host, hasUserInfo: u.hasUserInfo)
        case .invalid: return nil
        case .notASCII: self.init(reference: url)
        }
    }

    init(scheme: String, host: String, hasUserInfo: Bool) {
        self.scheme = scheme
        self.host = host
        self.hasUserInfo = hasUserInfo
    }

    /// The same parse on `Character`s: the reference that `ASCIIURL` must agree with, and the
    /// parser for URLs that are not pure ASCII (where a combining mark joins the delimiter before it
    /// into one `Character`, which then is not a delimiter).
    init?(reference url: String) {
        guard let cut = URLAuthority(url) else { return nil }
        self.scheme = cut.scheme.lowercased()
        self.host = cut.host.lowercased()
        self.hasUserInfo = cut.hasUserInfo
    }

    public var isHTTPFamily: Bool { scheme == "http" || scheme == "https" }

    /// Whether `url` is fetched over TLS (an `https` URL).
    static func isTLS(_ url: String) -> Bool { URLParts(url)?.scheme == "https" }

    /// A URL for a message: credentials removed, and escaped where it is shown, since after a
    /// redirect it is the server's text (a `Location`).
    public static func shown(_ url: String) -> ServerText { ServerText(redactingCredentials(url)) }
    public static func shown(_ url: ServerText) -> ServerText { shown(url.unsafeRawValue) }

    /// The URL with any `user:password@` removed, for logs and the journal.
    public static func redactingCredentials(_ url: String) -> String { URLCredentials.redacting(url) }
}

/// The first `://` in `text`, found by a plain scan of its UTF-8 bytes. `firstRange(of:)` goes through
/// the string-processing library's generic matcher, which took about 3 % of the CPU time of a batch
/// of small files (it runs several times per file).
func schemeSeparator<S: StringProtocol>(in text: S) -> Range<String.Index>? where S.Index == String.Index {
    let bytes = text.utf8
    var i = bytes.startIndex
    while i != bytes.endIndex {
        if bytes[i] == UInt8(ascii: ":") {
            let j = bytes.index(after: i)
            if j != bytes.endIndex, bytes[j] == UInt8(ascii: "/") {
                let k = bytes.index(after: j)
                if k != bytes.endIndex, bytes[k] == UInt8(ascii: "/") { return i..<bytes.index(after: k) }
            }
        }
        i = bytes.index(after: i)
    }
    return nil
}

/// An absolute URL cut at its authority, on `Character`s: the scheme, whether credentials come
/// before the host, the host (an IPv6 literal with its brackets) and port as written, and the rest
/// (path, query, fragment). What `URLParts(reference:)` and `ResourceKey` read. Nil without a
/// scheme of letters, digits, `+`, `-` and `.`, or without a host.
struct URLAuthority {
    let scheme: Substring
    let hasUserInfo: Bool
    let host: Substring
    let port: Substring
    let rest: Substring

    init?(_ url: String) {
        guard let sep = schemeSeparator(in: url) else { return nil }
        let scheme = url[..<sep.lowerBound]
        guard !scheme.isEmpty, scheme.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." })
        else { return nil }
        let afterScheme = url[sep.upperBound...]
        let authority = Self.authority(afterScheme)
        let end = authority.endIndex
        var hostPort = authority
        if let at = authority.lastIndex(of: "@") { hostPort = authority[authority.index(after: at)...] }
        var host = hostPort
        var port = hostPort[hostPort.endIndex...]
        if hostPort.first == "[" {
            guard let close = hostPort.firstIndex(of: "]") else { return nil }
            host = hostPort[...close]
            let after = hostPort[hostPort.index(after: close)...]
            if after.first == ":" { port = after.dropFirst() }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = hostPort[..<colon]
            port = hostPort[hostPort.index(after: colon)...]
        }
        guard !host.isEmpty else { return nil }
        self.scheme = scheme
        self.hasUserInfo = hostPort.startIndex != authority.startIndex
        self.host = host
        self.port = port
        self.rest = afterScheme[end...]
    }

    /// How many `@` come before the host of `url` (in its authority): more than one means an `@`
    /// inside the user name or password that was not written as `%40`, which libcurl and this parse
    /// read differently.
    static func atSignsBeforeHost(_ url: String) -> Int {
        guard let sep = schemeSeparator(in: url) else { return 0 }
        return authority(url[sep.upperBound...]).reduce(0) { $0 + ($1 == "@" ? 1 : 0) }
    }

    /// What follows a URL's `://` up to its path, query or fragment.
    private static func authority(_ afterScheme: Substring) -> Substring {
        afterScheme[..<(afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? afterScheme.endIndex)]
    }
}
