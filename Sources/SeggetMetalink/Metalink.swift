import SeggetVerify

/// A Metalink 4 document (RFC 5854, `.meta4`): the files it describes, each with the URLs that serve
/// it, its size, digests of the whole file and of its pieces. Read with ``init(parsing:limits:)``,
/// which refuses any document beyond `MetalinkLimits` or inconsistent in itself (see its errors).
public struct MetalinkDocument: Sendable, Equatable {
    public var files: [MetalinkFile]

    public init(files: [MetalinkFile]) { self.files = files }
}

/// One `<file>` of a Metalink.
public struct MetalinkFile: Sendable, Equatable {
    /// The `name` attribute as given: a relative path (checked: no `..`, no absolute path, no
    /// control characters).
    public var name: String
    /// `<size>`, when given.
    public var size: Int64?
    /// The http(s) URLs, in the order a download should prefer them (see `ordered(preferring:)`).
    public var urls: [MetalinkURL]
    /// URLs the document lists that segget cannot use (another scheme, relative), counted for a notice.
    public var skippedURLs = 0
    /// `<hash type=…>` of the whole file, for the algorithms segget computes.
    public var digests: [(algorithm: DigestAlgorithm, bytes: [UInt8])] = []
    /// `<pieces>`, when given in an algorithm segget computes (the strongest of several).
    public var pieces: PieceHashes?

    public init(name: String, size: Int64?, urls: [MetalinkURL]) {
        self.name = name
        self.size = size
        self.urls = urls
    }

    public static func == (a: MetalinkFile, b: MetalinkFile) -> Bool {
        a.name == b.name && a.size == b.size && a.urls == b.urls && a.skippedURLs == b.skippedURLs && a.pieces == b.pieces
            && a.digests.map(\.algorithm) == b.digests.map(\.algorithm) && a.digests.map(\.bytes) == b.digests.map(\.bytes)
    }

    /// The last component of `name`: where the file is saved in the output directory.
    public var fileName: String { name.split(separator: "/").last.map(String.init) ?? name }

    /// The URLs in the order to use them: those in `location` first (ISO 3166 code, any case), then
    /// by priority (1 first; none given: last), then in document order.
    public func ordered(preferring location: String? = nil) -> [MetalinkURL] {
        let wanted = location?.lowercased()
        return urls.enumerated().sorted { x, y in
            let (a, b) = (x.element, y.element)
            let la = wanted != nil && a.location == wanted, lb = wanted != nil && b.location == wanted
            if la != lb { return la }
            if a.rank != b.rank { return a.rank < b.rank }
            return x.offset < y.offset
        }.map(\.element)
    }
}

/// One `<url>` of a file.
public struct MetalinkURL: Sendable, Equatable {
    public var url: String
    /// 1 (most preferred) to 999999; nil when absent or not a number in that range.
    public var priority: Int?
    /// The ISO 3166-1 country code, lower case, when given.
    public var location: String?

    public init(url: String, priority: Int? = nil, location: String? = nil) {
        self.url = url
        self.priority = priority
        self.location = location
    }

    /// Sorting key: a URL without a priority comes after every one with one.
    var rank: Int { priority ?? 1_000_000 }
}

/// How far a Metalink may go before segget refuses it.
public struct MetalinkLimits: Sendable, Equatable {
    /// The document's bytes (a Metalink of 16 GiB in 256 KiB SHA-256 pieces is about 6 MiB).
    public var documentBytes = 32 << 20
    /// Nesting depth of elements (a Metalink needs 4: metalink, file, pieces, hash).
    public var depth = 16
    /// Attributes of one element.
    public var attributes = 32
    /// Bytes of one text or attribute value (a URL, a name, a digest).
    public var textBytes = 16 << 10
    public var files = 10_000
    public var urlsPerFile = 1_000
    /// Piece digests in the whole document.
    public var pieces = 4 << 20
    /// The largest file size accepted (8 PiB: more than any disk, less than overflows).
    public var fileSize: Int64 = 1 << 53

    public init() {}
}

/// Why a Metalink was refused: one sentence.
public struct MetalinkError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
