/// Gives every file of a batch its own output path, in list order.
///
/// The first file to claim a path keeps it; a later file that would land on the same path gets a
/// number before its extension: `file.bin`, `file.1.bin`, `file.2.bin`; `notes` → `notes.1`;
/// `src.tar.gz` → `src.1.tar.gz`. Only the batch's own claims are considered, never what is already
/// on disk, so running the same batch again picks the same names and resumes each file's partial
/// download. (A file that already exists under its final name is then refused unless `--force`.)
///
/// Paths named by `out=` are `reserved` for their own files: a file whose name comes from its URL or
/// its server is numbered around them wherever it stands in the list (`x.bin` from a URL, then
/// `out=x.bin` for another: the URL's file is `x.1.bin`, the `out=` file `x.bin`, as it asked).
public struct OutputNames: Sendable {
    private var claimed: Set<String> = []
    private let reserved: Set<String>

    /// `reserving`: the paths of the list's `out=` names (which no two lines share: see
    /// `InputFile.sameOutputName`).
    public init(reserving paths: [String] = []) {
        reserved = Set(paths.map(Self.normalized))
    }

    /// Claims a path for `name` in `directory` (nil or "." for the current directory) and returns it.
    public mutating func claim(name: String, directory: String?) -> String {
        var n = 0
        while true {
            let candidate = Self.join(directory, n == 0 ? name : Self.numbered(name, n))
            let key = Self.normalized(candidate)
            if !claimed.contains(key) && !reserved.contains(key) {
                claimed.insert(key)
                return candidate
            }
            n += 1
        }
    }

    /// Claims `name` in `directory` as it is, for the `out=` line that reserved it (numbered only
    /// where an earlier claim of the same `out=` path took it, which a checked list never has).
    public mutating func claim(outName name: String, directory: String?) -> String {
        let path = Self.join(directory, name)
        let key = Self.normalized(path)
        guard reserved.contains(key), !claimed.contains(key) else { return claim(name: name, directory: directory) }
        claimed.insert(key)
        return path
    }

    /// `name` with `.n` inserted before its extension (compound `.tar.*` extensions kept whole).
    public static func numbered(_ name: String, _ n: Int) -> String {
        let lower = name.lowercased()
        for compound in [".tar.gz", ".tar.bz2", ".tar.xz", ".tar.zst", ".tar.lz", ".tar.lzma"]
        where lower.hasSuffix(compound) && lower.count > compound.count {
            let stem = name.dropLast(compound.count)
            return "\(stem).\(n)\(name.suffix(compound.count))"
        }
        // A leading dot is not an extension separator (".profile" → ".profile.1").
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            return "\(name[..<dot]).\(n)\(name[dot...])"
        }
        return "\(name).\(n)"
    }

    /// `directory/name`, or `name` alone for the current directory.
    public static func join(_ directory: String?, _ name: String) -> String {
        guard let d = directory, !d.isEmpty, d != "." else { return name }
        return d.hasSuffix("/") ? d + name : d + "/" + name
    }

    /// Collapses `./`, duplicate and trailing slashes so that `dl/x` and `./dl//x` compare equal.
    static func normalized(_ path: String) -> String {
        var text = path
        switch text.withUTF8({ normalizedASCII($0) }) {
        case .same?: return path
        case .changed(let p)?: return p
        case nil: return referenceNormalized(path)
        }
    }

    enum Normalized: Equatable {
        case same
        case changed(String)
    }

    /// `normalized` on the bytes of an ASCII path, where "/" and "." are never part of a larger
    /// `Character`; nil for any other path. A path that is already normal (the usual case: it runs for
    /// every file of a batch) is not copied.
    static func normalizedASCII(_ b: UnsafeBufferPointer<UInt8>) -> Normalized? {
        guard ASCIIBytes.isASCII(b) else { return nil }
        let slash = UInt8(ascii: "/")
        var parts: [Range<Int>] = []
        var start = 0
        var kept = 0
        for i in 0...b.count where i == b.count || b[i] == slash {
            let part = start..<i
            if !part.isEmpty, !(part.count == 1 && b[part.lowerBound] == UInt8(ascii: ".")) {
                parts.append(part)
                kept += part.count
            }
            start = i + 1
        }
        let absolute = b.first == slash
        let length = (absolute ? 1 : 0) + kept + max(0, parts.count - 1)
        if length == b.count { return .same }
        var out: [UInt8] = absolute ? [slash] : []
        for (k, part) in parts.enumerated() {
            if k > 0 { out.append(slash) }
            out.append(contentsOf: b[part])
        }
        return .changed(String(decoding: out, as: UTF8.self))
    }

    /// `normalized` on `Character`s: the reference, and the normal form of a path that is not ASCII.
    static func referenceNormalized(_ path: String) -> String {
        let absolute = path.hasPrefix("/")
        let parts = path.split(separator: "/").filter { $0 != "." }
        return (absolute ? "/" : "") + parts.joined(separator: "/")
    }
}

/// Decides a batch's output paths in list order while its files learn what they want in any order.
///
/// A file's wanted name may come from the server (`Content-Disposition`, a redirect), so it is known
/// only after that file's probe, and probes end in any order. `OutputNames` must still see the
/// claims in list order, so that a rerun picks the same names. Each file reports its wish once; every
/// file whose predecessors have all reported is decided at once, by whichever report completed the
/// prefix. A file then waits only for the files before it to report, never for them to run in turn.
public struct OrderedNames: Sendable {
    /// What one file asks for.
    public enum Wish: Sendable, Equatable {
        /// This path exactly (`-o`), or nil when the download decides its own path; nothing is claimed.
        case path(String?)
        /// A name in a directory, numbered if an earlier file of the list claimed the same path.
        case name(String, directory: String?)
        /// An `out=` name: kept as given (see `OutputNames.claim(outName:directory:)`).
        case outName(String, directory: String?)
    }

    private var names: OutputNames
    private var wishes: [Wish?]
    private var paths: [String?]
    /// Files `0..<decided` have their paths.
    public private(set) var decided = 0

    /// `reserving`: the paths of the list's `out=` names (see `OutputNames`).
    public init(count: Int, reserving: [String] = []) {
        names = OutputNames(reserving: reserving)
        wishes = Array(repeating: nil, count: count)
        paths = Array(repeating: nil, count: count)
    }

    /// Records file `k`'s wish (once per file) and returns the files this decides, in list order:
    /// empty while an earlier file has not reported; else from the first undecided file through the
    /// last one whose predecessors have all reported.
    public mutating func wish(_ wish: Wish, for k: Int) -> Range<Int> {
        precondition(wishes[k] == nil && k >= decided, "file \(k) reported its wish twice")
        wishes[k] = wish
        let first = decided
        while decided < wishes.count, let w = wishes[decided] {
            switch w {
            case .path(let p): paths[decided] = p
            case .name(let n, let directory): paths[decided] = names.claim(name: n, directory: directory)
            case .outName(let n, let directory): paths[decided] = names.claim(outName: n, directory: directory)
            }
            wishes[decided] = nil
            decided += 1
        }
        return first..<decided
    }

    /// File `k`'s path, once decided (nil before, and for `.path(nil)`).
    public func path(of k: Int) -> String? { k < decided ? paths[k] : nil }
}
