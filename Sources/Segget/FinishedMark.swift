import SeggetJournal
import SeggetSystem
import SeggetVerify

/// What a finished download leaves on its file, in the extended attribute `user.segget.finished`,
/// so that the same command run again knows the file as its own: a list (`-i`) stopped part-way and
/// run again counts the files it finished as done, without a request, and a single download run again
/// after it finished says so and exits 0, where a file segget did not make under the name is still
/// refused (exit 5) unless `--force`.
///
/// The mark vouches for the file only while the file is as it was left: the same length and
/// modification time (a change to the contents moves the time), the same URL, and every digest the
/// run now expects among those the file was verified against. Anything else and the file is treated
/// as any file under the name. Where the file system keeps no extended attributes the mark is not
/// written and a rerun behaves as before. It also keeps the version of the server's file it was
/// downloaded as (its strong `ETag`, else its `Last-Modified`), so that a rerun whose probe finds
/// another version there, at the same length, knows the file for an older one
/// (``sameServerVersion(_:)``).
///
/// The value is 25 bytes, 9 more for the server's version and 9 more per verified digest, small
/// enough to stay inside an ext4 inode of 256 bytes with up to two digests (a longer value costs
/// each file a block of its own):
///
///     1                      version
///     8, little-endian       length
///     8, little-endian       modification time, nanoseconds since the epoch
///     8, little-endian       64-bit FNV-1a of the URL without credentials (no token of a signed
///                            URL can be read back from it)
///     then per digest:  1    algorithm (1 SHA-256, 2 MD5, 3 SHA-1, 4 SHA-512)
///                       8    the digest's first 8 bytes
///     and, where the answer had a strong validator:
///                       1    16
///                       8    ``version(of:url:)`` of the answer
public struct FinishedMark: Equatable, Sendable {
    /// The extended attribute that holds the mark.
    public static let attributeName = "user.segget.finished"

    /// A digest the file passed, as kept: its algorithm and its first 8 bytes.
    public struct Digest: Equatable, Sendable {
        public var algorithm: DigestAlgorithm
        public var prefix: UInt64

        public init(algorithm: DigestAlgorithm, prefix: UInt64) {
            self.algorithm = algorithm
            self.prefix = prefix
        }

        /// The digest as the run expects it.
        public init(_ expected: ExpectedDigest) {
            self.init(algorithm: expected.algorithm, prefix: expected.bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
        }

        /// A digest as `DownloadResult.verified` names it ("SHA-256=hex"); nil for anything else.
        public init?(verified text: String) {
            guard let eq = text.firstIndex(of: "="),
                let algorithm = DigestAlgorithm.allCases.first(where: { $0.displayName == text[..<eq] }),
                let bytes = decodeHex(text[text.index(after: eq)...]), bytes.count == algorithm.digestLength,
                let expected = ExpectedDigest(algorithm: algorithm, bytes: bytes)
            else { return nil }
            self.init(expected)
        }
    }

    /// The file's length when it was finished.
    public var size: Int64
    /// The file's modification time then (nanoseconds since the epoch).
    public var modified: Int64
    /// `FinishedMark.source(of:)` of the URL it was downloaded from.
    public var source: UInt64
    /// The digests it matched.
    public var verified: [Digest]
    /// ``version(of:url:)`` of the answer it was downloaded from; nil where the answer had no strong
    /// validator, came from another host, or the mark predates this field.
    public var serverVersion: UInt64?

    public init(size: Int64, modified: Int64, source: UInt64, verified: [Digest], serverVersion: UInt64? = nil) {
        self.size = size
        self.modified = modified
        self.source = source
        self.verified = verified
        self.serverVersion = serverVersion
    }

    /// The version of the server's file that `probe`'s answer names, for the download of `url`: its
    /// strong `ETag`, else a `Last-Modified` old enough to be a strong validator (the one sent as
    /// `If-Range`, `ProbeResult.ifRangeValidator`; a date of the last minute, as dynamic answers
    /// give, is none). Nil where the answer has neither, or came from another host than the URL's
    /// (a redirector sends each run to a mirror of its choosing, whose validators are its own).
    static func version(of probe: ProbeResult, url: String) -> UInt64? {
        guard let validator = probe.ifRangeValidator, URLParts(probe.finalURL)?.host == URLParts(url)?.host else { return nil }
        return version(validator: validator)
    }

    /// A validator as the mark keeps it: a 64-bit FNV-1a hash whose top bit says whether it is an
    /// `ETag` (set) or a date, so that only validators of one kind are compared.
    static func version(validator: String) -> UInt64 {
        let etag: UInt64 = validator.hasPrefix("\"") ? 1 << 63 : 0
        return fnv1a(validator.utf8) & ~(1 << 63) | etag
    }

    /// The 64-bit FNV-1a hash of `bytes`, continuing `hash` (by default its offset basis).
    private static func fnv1a(_ bytes: some Sequence<UInt8>, continuing hash: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
        var hash = hash
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return hash
    }

    /// Whether a server whose answer now names `version` may still hold the version the file was
    /// downloaded as: the same, or not comparable (unknown on either side, or one an `ETag` and the
    /// other a date: a server or cache that added or dropped its `ETag`). Then the length alone
    /// decides, as before marks kept the version.
    public func sameServerVersion(_ version: UInt64?) -> Bool {
        guard let serverVersion, let version, serverVersion >> 63 == version >> 63 else { return true }
        return serverVersion == version
    }

    /// The URL as the mark keeps it: the 64-bit FNV-1a hash of its UTF-8 without credentials (as the
    /// journal keeps it) and without its fragment, which is never sent (a link that ends in
    /// `#sha256=…` names the same file as the one without).
    public static func source(of url: String) -> UInt64 {
        // On the UTF-8 bytes, leaving out the credentials (`URLCredentials`) without building the
        // string without them.
        var text = url
        return text.withUTF8 { bytes in
            let end = bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
            // Up to the fragment, leaving the credentials out (clamped: a `#` before a scheme's
            // `://` would put them past it).
            let skip = URLCredentials.userInfoRange(in: bytes) ?? 0..<0
            let before = fnv1a(bytes[..<min(skip.lowerBound, end)])
            return fnv1a(bytes[min(skip.upperBound, end)..<end], continuing: before)
        }
    }

    private static let tags: [DigestAlgorithm: UInt8] = [.sha256: 1, .md5: 2, .sha1: 3, .sha512: 4]
    private static let versionTag: UInt8 = 16

    /// The mark's bytes, as stored.
    public var encoded: [UInt8] {
        var bytes: [UInt8] = [1]
        bytes.reserveCapacity(25 + 9 * verified.count)
        func append(_ v: UInt64) { for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }
        append(UInt64(bitPattern: size))
        append(UInt64(bitPattern: modified))
        append(source)
        for d in verified {
            bytes.append(Self.tags[d.algorithm] ?? 0)
            append(d.prefix)
        }
        if let serverVersion {
            bytes.append(Self.versionTag)
            append(serverVersion)
        }
        return bytes
    }

    /// Reads a stored mark; nil for anything that is not a version 1 mark of a valid length.
    public init?(decoding bytes: [UInt8]) {
        guard bytes.count >= 25, (bytes.count - 25) % 9 == 0, bytes[0] == 1 else { return nil }
        func word(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) } }
        let size = Int64(bitPattern: word(1))
        guard size >= 0 else { return nil }
        var verified: [Digest] = []
        var version: UInt64?
        for at in stride(from: 25, to: bytes.count, by: 9) {
            if bytes[at] == Self.versionTag, version == nil {
                version = word(at + 1)
                continue
            }
            guard let algorithm = Self.tags.first(where: { $0.value == bytes[at] })?.key else { return nil }
            verified.append(Digest(algorithm: algorithm, prefix: word(at + 1)))
        }
        self.init(size: size, modified: Int64(bitPattern: word(9)), source: word(17), verified: verified, serverVersion: version)
    }

    /// Whether the mark vouches for the file `file` describes as the download of `url`: a regular
    /// file of the marked length and modification time, from that URL, verified against each of
    /// `expected`.
    public func vouches(for url: String, file: FileStatus, expected: [ExpectedDigest]) -> Bool {
        file.kind == .regular && file.size == size && file.modified == modified
            && source == Self.source(of: url)
            && expected.allSatisfy { verified.contains(Digest($0)) }
    }

    /// The mark renewed for `file` as it is after a repair (`verify --repair`) that made every piece
    /// match again and checked `verified`: the same URL, the file's modification time now (the
    /// repair's writes moved it), and the digests of both. Nil where the repair cannot have restored
    /// the file this mark described: another length, not a regular file, or a digest of an
    /// algorithm the mark also has that differs from the mark's (another file's Metalink).
    public func renewed(as file: FileStatus, verified now: [Digest]) -> FinishedMark? {
        guard file.kind == .regular, file.size == size else { return nil }
        for d in now where verified.contains(where: { $0.algorithm == d.algorithm && $0.prefix != d.prefix }) { return nil }
        var digests = verified
        for d in now where !digests.contains(d) { digests.append(d) }
        return FinishedMark(size: size, modified: file.modified, source: source, verified: digests, serverVersion: serverVersion)
    }

    // MARK: The file system

    /// Marks `file`, just finished from `url` and verified against `verified` (as
    /// `DownloadResult.verified` names them), as it is now. Where the file system keeps no extended
    /// attributes, or refuses this one, nothing is marked: the mark only spares a rerun, and its
    /// absence leaves the rerun as it was without it.
    static func write(on file: PosixFile, url: String, verified: [String], serverVersion: UInt64?) {
        guard let status = try? file.status() else { return }
        var digests: [Digest] = []
        for d in verified.compactMap(Digest.init(verified:)) where !digests.contains(d) { digests.append(d) }
        let mark = FinishedMark(
            size: status.size, modified: status.modified, source: source(of: url), verified: digests, serverVersion: serverVersion)
        try? file.setAttribute(attributeName, mark.encoded)
    }

    /// After a repair of the file at `path` (open as `file`) that made every piece match and checked
    /// `verified` (as `RepairReport.verified` names them): renews the mark the file had from its
    /// download, if it had one and the repair can have restored what it described (see
    /// ``renewed(as:verified:)``), so that the download's command run again finds the file done
    /// rather than refusing it as a file changed since. True when it was renewed.
    @discardableResult
    static func renew(on file: PosixFile, path: String, verified: [String]) -> Bool {
        guard let bytes = FileSystem.attribute(path, attributeName, limit: 256), let mark = FinishedMark(decoding: bytes),
            let status = try? file.status(), let renewed = mark.renewed(as: status, verified: verified.compactMap(Digest.init(verified:)))
        else { return false }
        return (try? file.setAttribute(attributeName, renewed.encoded)) != nil
    }

    /// The size of the file at `path` when a mark vouches for it as the download of `url` checked
    /// against each of `expected`, and the server's answer, where one is in, still names that file:
    /// the same `length`, and a version ``sameServerVersion(_:)`` takes as the same. What a list and
    /// the daemon take as done without downloading it again.
    public static func stillServed(
        at path: String, url: String, expected: [ExpectedDigest], length: Int64?, version: UInt64?
    ) -> Int64? {
        guard let (size, checked, mark) = vouched(at: path, url: url, expected: expected), checked,
            length.map({ $0 == size }) != false, mark.sameServerVersion(version)
        else { return nil }
        return size
    }

    /// Whether the file at `path`, as it is now, is marked as finished by a download of another URL
    /// than `url` (what a list whose lines' names were swapped meets).
    public static func finishedFromAnotherURL(at path: String, url: String) -> Bool {
        guard let (status, mark) = marked(path) else { return false }
        return status.size == mark.size && status.modified == mark.modified && mark.source != source(of: url)
    }

    /// The regular file at `path` (not following a link) and the mark it carries, if it has one.
    private static func marked(_ path: String) -> (FileStatus, FinishedMark)? {
        guard let status = FileSystem.status(path, followingLinks: false), status.kind == .regular,
            let bytes = FileSystem.attribute(path, attributeName, limit: 256), let mark = FinishedMark(decoding: bytes)
        else { return nil }
        return (status, mark)
    }

    /// The file at `path` when a mark vouches for it as the download of `url`, whatever digests it
    /// was checked against: its size, whether the mark also vouches for each of `expected`
    /// (``vouches(for:file:expected:)``), and the mark itself. Nil where no mark vouches for it. One
    /// read of the mark.
    public static func vouched(
        at path: String, url: String, expected: [ExpectedDigest]
    ) -> (size: Int64, checked: Bool, mark: FinishedMark)? {
        guard let (status, mark) = marked(path), mark.vouches(for: url, file: status, expected: []) else { return nil }
        return (status.size, mark.vouches(for: url, file: status, expected: expected), mark)
    }
}
