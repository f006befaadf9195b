/// Gives every file of a batch its own output path, in list order.
///
/// The first file to claim a path keeps it; a later file that would land on the same path gets a
/// number before its extension: `file.bin`, `file.1.bin`, `file.2.bin`; `notes` → `notes.1`;
/// `src.tar.gz` → `src.1.tar.gz`. Only the batch's own claims are considered, never what is already
/// on disk, so running the same batch again picks the same names and resumes each file's partial
/// download. (A file that already exists under its final name is then refused unless `--force`.)
public struct OutputNames: Sendable {
    private var claimed: Set<String> = []

    public init() {}

    /// Claims a path for `name` in `directory` (nil or "." for the current directory) and returns it.
    public mutating func claim(name: String, directory: String?) -> String {
        var n = 0
        while true {
            let candidate = Self.join(directory, n == 0 ? name : Self.numbered(name, n))
            let key = Self.normalized(candidate)
            if !claimed.contains(key) {
                claimed.insert(key)
                return candidate
            }
            n += 1
        }
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
        let absolute = path.hasPrefix("/")
        let parts = path.split(separator: "/").filter { $0 != "." }
        return (absolute ? "/" : "") + parts.joined(separator: "/")
    }
}
