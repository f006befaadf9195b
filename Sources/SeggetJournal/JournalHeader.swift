/// What a journal records about its download, besides the bitmaps.
///
/// The URLs never hold credentials: the initializer removes any `user:password@`, so a header that
/// exists cannot leak a password into the journal file. To compare a URL with a stored one, redact it
/// first with `redactingCredentials(_:)`.
public struct JournalHeader: Equatable, Sendable {
    /// The URL the user asked for, without credentials.
    public let url: String
    /// The URL after redirects, without credentials.
    public let finalURL: String
    /// The file's length in bytes (0 for an empty file).
    public let totalLength: Int64
    /// The length of every chunk but possibly the last, which may be shorter.
    public let chunkSize: Int64
    /// `ceil(totalLength / chunkSize)`: derived, so that a header's geometry is always consistent.
    public let chunkCount: Int
    /// The server's `ETag`, if it sent one.
    public let etag: String?
    /// The server's `Last-Modified`, if it sent one.
    public let lastModified: String?
    /// The Linux boot ID of the run that last opened the journal (at most 59 UTF-8 bytes; longer is cut).
    /// Stored in its own boot record, not in the header's bytes.
    public let bootID: String
    /// When the download started, in seconds since 1970.
    public let createdAt: Int64

    /// A header; credentials are removed from both URLs.
    ///
    /// - Precondition: `totalLength >= 0` and `chunkSize > 0`.
    public init(
        url: String, finalURL: String, totalLength: Int64, chunkSize: Int64,
        etag: String?, lastModified: String?, bootID: String, createdAt: Int64
    ) {
        precondition(totalLength >= 0, "a file cannot have a negative length")
        precondition(chunkSize > 0, "chunks must hold at least one byte")
        self.url = JournalHeader.redactingCredentials(url)
        self.finalURL = JournalHeader.redactingCredentials(finalURL)
        self.totalLength = totalLength
        self.chunkSize = chunkSize
        self.chunkCount = Int(JournalHeader.chunkCount(totalLength: totalLength, chunkSize: chunkSize))
        self.etag = etag
        self.lastModified = lastModified
        self.bootID = JournalHeader.fittingBootID(bootID)
        self.createdAt = createdAt
    }

    /// The same header with another boot ID.
    public func with(bootID: String) -> JournalHeader {
        JournalHeader(
            url: url, finalURL: finalURL, totalLength: totalLength, chunkSize: chunkSize,
            etag: etag, lastModified: lastModified, bootID: bootID, createdAt: createdAt)
    }

    /// `ceil(totalLength / chunkSize)` without overflow.
    public static func chunkCount(totalLength: Int64, chunkSize: Int64) -> Int64 {
        totalLength / chunkSize + (totalLength % chunkSize == 0 ? 0 : 1)
    }

    /// The bytes of chunk `i` in the file.
    public func byteRange(ofChunk i: Int) -> Range<Int64> {
        precondition(i >= 0 && i < chunkCount, "chunk \(i) is outside 0..<\(chunkCount)")
        let start = Int64(i) * chunkSize
        return start..<min(start + chunkSize, totalLength)
    }

    /// The longest boot ID stored, in UTF-8 bytes.
    public static let maximumBootIDLength = 59

    /// Cuts `id` to `maximumBootIDLength` bytes at a character boundary. A cut ID never equals the
    /// real one, which is the safe direction: it only makes the journal trust the durable bitmap.
    internal static func fittingBootID(_ id: String) -> String {
        if id.utf8.count <= maximumBootIDLength { return id }
        var result = ""
        for character in id {
            if result.utf8.count + String(character).utf8.count > maximumBootIDLength { break }
            result.append(character)
        }
        return result
    }

    /// `url` without the `user:password@` part of its authority, if any.
    ///
    /// `https://user:secret@host/f` becomes `https://host/f`. An `@` in the path, query or fragment is
    /// left alone. Strings without `scheme://` are returned unchanged.
    public static func redactingCredentials(_ url: String) -> String { URLCredentials.redacting(url) }
}
