/// What segget tells whoever renews a link (a `--refresh-command`, a library closure, the daemon's
/// RPC clients) when the link stopped working in the middle of a download.
public struct LinkRenewalRequest: Sendable, Equatable {
    /// The URL that expired, as the download last used it (a renewed one after the first renewal).
    public let url: String
    /// The HTTP status that ended it: 401, 403 or 410 (see ``LinkExpiry``).
    public let status: Int
    /// Bytes already in the file that the download keeps (whole chunks in the journal, parts of
    /// others in the progress file); the renewed link fetches the rest.
    public let bytesDone: Int64
    public let totalLength: Int64
    /// 1 for the first renewal of this download, 2 for the second, …
    public let renewal: Int
    /// The file being downloaded (its final name).
    public let outputPath: String
    /// The download's stop flag: a renewer that waits (for a person, a command) gives up when it is
    /// set, by throwing.
    public let interrupt: InterruptFlag

    public init(
        url: String, status: Int, bytesDone: Int64, totalLength: Int64, renewal: Int, outputPath: String,
        interrupt: InterruptFlag = InterruptFlag()
    ) {
        self.url = url
        self.status = status
        self.bytesDone = bytesDone
        self.totalLength = totalLength
        self.renewal = renewal
        self.outputPath = outputPath
        self.interrupt = interrupt
    }

    /// Equal in what they say; the stop flag is not compared.
    public static func == (a: LinkRenewalRequest, b: LinkRenewalRequest) -> Bool {
        a.url == b.url && a.status == b.status && a.bytesDone == b.bytesDone && a.totalLength == b.totalLength
            && a.renewal == b.renewal && a.outputPath == b.outputPath
    }
}

/// Renews an expired link: given what expired, returns a new URL of the same file, or throws to give
/// up (the download then stops with the journal kept). Called on the download's thread, which waits
/// for it; the new URL must prove it serves the same file before any byte from it is kept (see
/// ``ObjectIdentity``).
public struct LinkRenewer: Sendable, Equatable {
    private let id: UInt64
    public let renew: @Sendable (LinkRenewalRequest) throws -> String

    public init(_ renew: @escaping @Sendable (LinkRenewalRequest) throws -> String) {
        self.renew = renew
        id = UInt64.random(in: 0...UInt64.max)
    }

    /// Two renewers are equal when they are the same closure, as made once by `init`.
    public static func == (a: LinkRenewer, b: LinkRenewer) -> Bool { a.id == b.id }
}

/// Which answers to a range request say "this link expired" rather than "this file is gone".
///
/// Only answers after the download started count (the first request of the attempt succeeded with
/// the same URL), and only these statuses: 401 (the token is no longer accepted), 403 (S3, GCS and
/// CDNs answer an expired signature with it) and 410 (links that say they are gone for good). Error
/// bodies are not read mid-download, so an expiry answered with another status (S3's `ExpiredToken`
/// comes as 400) is a plain HTTP error.
public enum LinkExpiry {
    public static let statuses: Set<Int> = [401, 403, 410]

    /// The status when `error` (a failure of the fetch, after the download started) says the link
    /// expired; nil for any other failure.
    static func status(of error: SeggetError) -> Int? {
        guard error.kind == .httpStatus, let status = error.httpStatus, statuses.contains(status) else { return nil }
        return status
    }
}

/// What identifies the file behind a URL: its length and validators. A renewed link, or a different
/// URL given to resume a partial download, must show the same before any byte from it is kept.
struct ObjectIdentity: Equatable, Sendable {
    var length: Int64
    var etag: String?
    var lastModified: String?

    /// Whether `other` proves it is the same file: the same length, and the same `ETag` and
    /// `Last-Modified` (each present on both sides or absent on both), at least one of them present.
    /// The reason it does not, for the user, else nil.
    func differences(from other: ObjectIdentity) -> String? {
        if other.length != length {
            return "its length is \(other.length) bytes, not \(length)"
        }
        if etag == nil && lastModified == nil {
            return "the server sends neither ETag nor Last-Modified, so nothing proves it is the same file"
        }
        if !AgedETag.sameVersion(kept: etag, got: other.etag, keptModified: lastModified, gotModified: other.lastModified) {
            return "its ETag is \(other.etag.map { "\(ServerText($0))" } ?? "missing"), not \(etag.map { "\(ServerText($0))" } ?? "missing")"
        }
        if lastModified != other.lastModified {
            return "its Last-Modified is \(other.lastModified.map { "\(ServerText($0))" } ?? "missing"), not \(lastModified.map { "\(ServerText($0))" } ?? "missing")"
        }
        return nil
    }
}
