import SeggetMetalink
import SeggetSystem
import SeggetVerify

/// Metalink documents (`.meta4`, RFC 5854) as the library reads them, from a file or a URL, and each
/// file of one as a download: its URLs by priority (and location), its size, digests and pieces.
public enum MetalinkSource {
    /// The media type of a Metalink 4 document.
    public static let mediaType = "application/metalink4+xml"

    /// Whether `source` names a Metalink by its form: a path, or an http(s) URL whose path, ends in
    /// `.meta4`, or a URL asking for one as mirrorbits serves them (`…?meta4`).
    public static func looksLikeMetalink(_ source: String) -> Bool {
        let isURL = InputFile.urlProblem(source) == nil
        let name = isURL ? FileName.fromURLPath(source) : source
        if name.lowercased().hasSuffix(".meta4") { return true }
        // The query starts at the first "?" byte (found on UTF-8: a Character search costs more than
        // the rest of a batch's list reading, and a URL's delimiters are bytes).
        guard isURL, let q = source.utf8.firstIndex(of: UInt8(ascii: "?")) else { return false }
        let query = source[source.utf8.index(after: q)...].split(separator: "#").first ?? ""
        return query.split(separator: "&").contains { $0 == "meta4" || $0.hasPrefix("meta4=") }
    }

    /// Reads a Metalink to download from: `source` is an http(s) URL (fetched whole, under the
    /// redirect policy of every request; its answer must be a Metalink by its media type or by the
    /// URL's form), a path, or `-` (standard input). A document that is refused, or that names a file
    /// without an http(s) URL, is a usage error (exit 2) saying why; nothing of its files is fetched.
    public static func load(_ source: String, transfer: TransferOptions = TransferOptions()) throws(SeggetError) -> MetalinkDocument {
        let bytes: [UInt8]
        let shown: String
        if InputFile.urlProblem(source) == nil {
            let answer = try DocumentFetch(options: transfer, limit: MetalinkLimits().documentBytes).get(source)
            guard answer.mediaType == mediaType || looksLikeMetalink(source) || looksLikeMetalink(answer.finalURL) else {
                throw SeggetError(.usage, "\(URLParts.shown(source)) answered with \(answer.head.value("content-type") ?? "no Content-Type"), not a Metalink (\(mediaType)).")
            }
            bytes = answer.body
            shown = URLParts.shown(source).description
        } else {
            let limit = MetalinkLimits().documentBytes
            do throws(Errno) {
                let file = source == "-" ? FileDescriptor.standardInput : try FileDescriptor.open(source, .readOnly)
                defer { if source != "-" { file.close() } }
                bytes = try file.readToEnd(limit: limit + 1)
            } catch {
                throw SeggetError(.usage, "cannot read the Metalink \(source): \(error).")
            }
            shown = source == "-" ? "standard input" : source
        }
        do {
            return try MetalinkDocument.forDownload(parsing: bytes)
        } catch {
            throw SeggetError(.usage, "\(shown): \(error.message) Nothing was downloaded.")
        }
    }
}

extension MetalinkSource {
    /// The files of a Metalink document given as bytes (aria2's `addMetalink` sends it in base64),
    /// each as a download with its URLs in the order to use them. A refused document is a usage
    /// error saying why (see ``load(_:transfer:)``).
    public static func downloads(parsing bytes: [UInt8], preferring location: String? = nil) throws(SeggetError) -> [MetalinkDownload] {
        do {
            return try MetalinkDocument.forDownload(parsing: bytes).files.map { $0.download(preferring: location) }
        } catch {
            throw SeggetError(.usage, "the Metalink: \(error.message) Nothing was added.")
        }
    }

    /// As ``downloads(parsing:preferring:)``, from standard base64 (line breaks and spaces ignored).
    public static func downloads(base64 text: String, preferring location: String? = nil) throws(SeggetError) -> [MetalinkDownload] {
        let compact = String(text.unicodeScalars.filter { !" \t\r\n".unicodeScalars.contains($0) }.map(Character.init))
        guard compact.utf8.count <= (MetalinkLimits().documentBytes / 3 + 1) * 4 else {
            throw SeggetError(.usage, "the Metalink is larger than \(MetalinkLimits().documentBytes >> 20) MiB; nothing was added.")
        }
        guard let bytes = Base64.decode(Substring(compact)) else {
            throw SeggetError(.usage, "the Metalink is not standard base64 (RFC 4648); nothing was added.")
        }
        return try downloads(parsing: bytes, preferring: location)
    }
}

/// One file of a Metalink, as a download.
public struct MetalinkDownload: Sendable, Equatable {
    /// The URL to start from (the most preferred), and the others as mirrors.
    public var url: String
    public var mirrors: [String]
    /// The name to save it under (the last component of the Metalink's name).
    public var name: String
    /// The directories the Metalink's name puts it in, under the output directory (a relative path
    /// the parser checked: no `..`, `.` or empty component); nil when none.
    public var subdirectory: String?
    public var size: Int64?
    public var checksums: [ExpectedDigest]
    public var pieces: PieceHashes?

    public init(
        url: String, mirrors: [String] = [], name: String, subdirectory: String? = nil, size: Int64?,
        checksums: [ExpectedDigest] = [], pieces: PieceHashes? = nil
    ) {
        self.url = url
        self.mirrors = mirrors
        self.name = name
        self.subdirectory = subdirectory
        self.size = size
        self.checksums = checksums
        self.pieces = pieces
    }
}

extension MetalinkFile {
    /// This file as a download: its URLs in the order to use them (those in `location` first), at
    /// most `Download.maxSources`, its size, its strongest digest and its pieces.
    public func download(preferring location: String? = nil) -> MetalinkDownload {
        let urls = ordered(preferring: location).map(\.url).prefix(Download.maxSources)
        return MetalinkDownload(
            url: urls.first ?? "", mirrors: Array(urls.dropFirst()), name: fileName, subdirectory: subdirectory, size: size,
            checksums: digests.compactMap { ExpectedDigest(algorithm: $0.algorithm, bytes: $0.bytes) }, pieces: pieces)
    }
}

extension MetalinkDownload {
    /// The directory to save the file in: `base` (nil: the current one) with the Metalink's
    /// subdirectory under it.
    public func directory(under base: String?) -> String? {
        guard let sub = subdirectory else { return base }
        guard let base, !base.isEmpty else { return sub }
        return base.hasSuffix("/") ? base + sub : base + "/" + sub
    }
}

extension DownloadOptions {
    /// These options with what a Metalink says of the file: its mirrors, digests, pieces and size.
    public func applying(_ m: MetalinkDownload) -> DownloadOptions {
        var o = self
        o.mirrors = m.mirrors
        o.checksums += m.checksums.filter { d in !o.checksums.contains { $0.algorithm == d.algorithm } }
        o.pieces = m.pieces
        o.expectedLength = m.size
        return o
    }
}
