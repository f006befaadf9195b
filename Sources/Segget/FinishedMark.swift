import SeggetSystem
import SeggetVerify

/// What a finished download leaves on its file, in the extended attribute `user.segget.finished`,
/// so that the same command run again knows the file as its own: a list (`-i`) stopped part-way and
/// run again counts the files it finished as done, without a request, and a single download run again
/// after it finished says so and exits 0, where a file segget did not make under the name is still
/// refused (exit 5) unless `--force`.
///
/// The mark vouches for the file only while the file is as it was left: the same length and
/// modification time (a change to the contents moves the time), the same URL (kept as a SHA-256, so
/// that no token of a signed URL is written beside the file), and every digest the run now expects
/// among those the file was verified against. Anything else and the file is treated as any file
/// under the name. Where the file system keeps no extended attributes the mark is not written and a
/// rerun behaves as before.
///
/// The value is text, one field a line:
///
///     segget-finished 1
///     size 65536
///     modified 1764451200123456789
///     source 3f0a…(64 hex digits)
///     verified SHA-256=9f86…
///
/// The `verified` line lists the digests that passed, comma-separated, and is empty when none was
/// checked. Unknown lines are ignored, so that a later version may add fields.
public struct FinishedMark: Equatable, Sendable {
    /// The extended attribute that holds the mark.
    public static let attributeName = "user.segget.finished"

    /// The file's length when it was finished.
    public var size: Int64
    /// The file's modification time then (nanoseconds since the epoch).
    public var modified: Int64
    /// `FinishedMark.source(of:)` of the URL it was downloaded from.
    public var source: String
    /// The digests it matched, as `DownloadResult.verified` names them ("SHA-256=hex").
    public var verified: [String]

    public init(size: Int64, modified: Int64, source: String, verified: [String]) {
        self.size = size
        self.modified = modified
        self.source = source
        self.verified = verified
    }

    /// The URL as the mark keeps it: the SHA-256 (lower-case hex) of the URL without credentials,
    /// the form the journal keeps.
    public static func source(of url: String) -> String {
        let digester = Digester(.sha256)
        var text = URLParts.redactingCredentials(url)
        text.withUTF8 { digester.update(UnsafeRawBufferPointer($0)) }
        return hexString(digester.finalize())
    }

    /// The mark's bytes, as stored.
    public var encoded: [UInt8] {
        let lines = [
            "segget-finished 1", "size \(size)", "modified \(modified)", "source \(source)",
            "verified \(verified.joined(separator: ","))",
        ]
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    /// Reads a stored mark; nil for anything that is not a version 1 mark with its three numbers and
    /// a well-formed source.
    public init?(decoding bytes: [UInt8]) {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last == "" { lines.removeLast() }
        guard lines.first == "segget-finished 1" else { return nil }
        var size: Int64?, modified: Int64?, source: String?, verified: [String] = []
        for line in lines.dropFirst() {
            let field = line.prefix { $0 != " " }
            let value = line.dropFirst(field.count + 1)
            switch field {
            case "size": size = Int64(value).flatMap { $0 >= 0 ? $0 : nil }
            case "modified": modified = Int64(value)
            case "source":
                let hex = value.utf8.count == 64 && value.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
                source = hex ? String(value) : nil
            case "verified": verified = value.split(separator: ",").map(String.init)
            default: continue
            }
        }
        guard let size, let modified, let source else { return nil }
        self.init(size: size, modified: modified, source: source, verified: verified)
    }

    /// Whether the mark vouches for the file `file` describes as the download of `url`: a regular
    /// file of the marked length and modification time, from that URL, verified against each of
    /// `expected`.
    public func vouches(for url: String, file: FileStatus, expected: [ExpectedDigest]) -> Bool {
        file.kind == .regular && file.size == size && file.modified == modified
            && source == Self.source(of: url)
            && expected.allSatisfy { verified.contains("\($0.algorithm.displayName)=\($0.hex)") }
    }

    // MARK: The file system

    /// Marks `file`, just finished from `url` and verified against `verified`, as it is now. Where
    /// the file system keeps no extended attributes, or refuses this one, nothing is marked: the mark
    /// only spares a rerun, and its absence leaves the rerun as it was without it.
    static func write(on file: PosixFile, url: String, verified: [String]) {
        guard let status = try? file.status() else { return }
        let mark = FinishedMark(size: status.size, modified: status.modified, source: source(of: url), verified: verified)
        try? file.setAttribute(attributeName, mark.encoded)
    }

    /// The size of the file at `path` when a mark vouches for it as the download of `url` (see
    /// ``vouches(for:file:expected:)``); nil otherwise.
    public static func vouchedSize(at path: String, url: String, expected: [ExpectedDigest]) -> Int64? {
        guard let status = FileSystem.status(path, followingLinks: false), status.kind == .regular,
            let bytes = FileSystem.attribute(path, attributeName), let mark = FinishedMark(decoding: bytes),
            mark.vouches(for: url, file: status, expected: expected)
        else { return nil }
        return status.size
    }
}
