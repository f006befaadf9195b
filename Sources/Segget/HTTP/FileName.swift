/// Turns a name suggested by a server or a URL into a safe single path component.
public enum FileName {
    /// The name used when nothing usable is left.
    public static let fallback = "download"

    /// Returns a name that contains no path separator, no control character, is not `.` or `..`, does
    /// not start with a dot (no hidden files, no `..` tricks), is at most 200 bytes of UTF-8, and is
    /// never empty. Only the last path component of the suggestion is kept.
    public static func sanitize(_ suggestion: String) -> String {
        // Work on Unicode scalars: a separator or dot followed by a combining mark is one Character in
        // Swift, and must not slip through as "not a slash".
        var scalars = Array(suggestion.unicodeScalars)
        // Keep the last component: "a/b/../c.iso" and "..\\..\\x.exe" reduce to "c.iso" and "x.exe".
        while let last = scalars.last, last == "/" || last == "\\" { scalars.removeLast() }
        if let sep = scalars.lastIndex(where: { $0 == "/" || $0 == "\\" }) {
            scalars.removeSubrange(...sep)
        }
        scalars.removeAll { u in
            switch u.value {
            case 0..<0x20, 0x7F, 0x80..<0xA0: true  // control characters, including C1
            case 0x202A...0x202E, 0x2066...0x2069: true  // bidirectional overrides that disguise extensions
            default: false
            }
        }
        // No leading dots (hidden files, "..") and no leading combining marks they could hide behind.
        while let f = scalars.first, f == " " || f == "." || f.properties.isGraphemeExtend
            || f.properties.generalCategory == .format
        {
            scalars.removeFirst()
        }
        while let l = scalars.last, l == " " { scalars.removeLast() }
        var name = String(String.UnicodeScalarView(scalars))
        if name.utf8.count > 200 { name = truncateUTF8(name, maxBytes: 200) }
        return name.isEmpty ? fallback : name
    }

    /// The name suggested by a URL's path: its last non-empty segment, percent-decoded, sanitised.
    public static func fromURLPath(_ url: String) -> String {
        var rest = Substring(url)
        if let scheme = schemeSeparator(in: rest) { rest = rest[scheme.upperBound...] }
        // Drop query and fragment, then the authority.
        if let q = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<q] }
        guard let slash = rest.firstIndex(of: "/") else { return fallback }
        let path = rest[slash...]
        guard let last = path.split(separator: "/").last else { return fallback }
        let decoded = percentDecode(last).flatMap { String(validating: $0, as: UTF8.self) } ?? String(last)
        return sanitize(decoded)
    }

    private static func truncateUTF8(_ s: String, maxBytes: Int) -> String {
        var out = ""
        var used = 0
        for ch in s {
            let n = ch.utf8.count
            if used + n > maxBytes { break }
            out.append(ch)
            used += n
        }
        return out
    }
}
