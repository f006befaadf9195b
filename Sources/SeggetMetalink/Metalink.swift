import SeggetVerify

/// A Metalink 4 document (RFC 5854, `.meta4`): the files it describes, each with the URLs that serve
/// it, its size, digests of the whole file and of its pieces. Read with ``init(parsing:limits:)``,
/// which refuses any document beyond `MetalinkLimits` or inconsistent in itself (see its errors).
public struct MetalinkDocument: Sendable, Equatable {
    public var files: [MetalinkFile]

    public init(files: [MetalinkFile]) { self.files = files }

    /// The file the document describes for a local `path` (or a bare file name): the one whose whole
    /// name ends the path (the longest such, `iso/x86/boot.iso` for `…/iso/x86/boot.iso`), else the only
    /// one of that file name, else the document's only file; nil when none fits or several do.
    public func file(for path: String) -> MetalinkFile? {
        let whole = files.filter { path == $0.name || path.hasSuffix("/" + $0.name) }
        if let best = whole.max(by: { $0.name.utf8.count < $1.name.utf8.count }),
            whole.filter({ $0.name.utf8.count == best.name.utf8.count }).count == 1
        {
            return best
        }
        let last = path.split(separator: "/").last.map(String.init) ?? path
        let named = files.filter { $0.fileName == last }
        if named.count == 1 { return named[0] }
        return named.isEmpty && files.count == 1 ? files[0] : nil
    }
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

    /// The last component of `name`: the file's own name.
    public var fileName: String { name.split(separator: "/").last.map(String.init) ?? name }

    /// The directories of `name` before its file name (`iso/x86` of `iso/x86/boot.iso`), nil when it has
    /// none: where under the output directory the file is saved, as RFC 5854 and aria2 have it.
    public var subdirectory: String? {
        let parts = name.split(separator: "/")
        return parts.count > 1 ? parts.dropLast().joined(separator: "/") : nil
    }

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
