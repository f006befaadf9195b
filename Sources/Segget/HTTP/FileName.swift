/// Turns a name suggested by a server or a URL into a safe single path component.
public enum FileName {
    /// The name used when nothing usable is left.
    public static let fallback = "download"

    /// Returns a name that contains no path separator, no control character, is not `.` or `..`, does
    /// not start with a dot (no hidden files, no `..` tricks), is at most 200 bytes of UTF-8 (a longer
    /// one is cut before its extension, which is kept), and is never empty. Only the last path component of the suggestion is kept.
    /// A name that ends as segget's side files do (`.segget-part`, `.segget-journal`,
    /// `.segget-progress`) gets an underscore for the dot before that ending (`x_segget-part`): saved
    /// as it stands, it would be taken for another download's unfinished file (and was refused, the
    /// download failing over a name the user never chose).
    public static func sanitize(_ suggestion: String) -> String {
        unlikeSideFiles(scrubbed(suggestion))
    }

    private static func unlikeSideFiles(_ name: String) -> String {
        guard let suffix = PartialDownload.Paths.sideFileSuffix(of: name) else { return name }
        return String(name.dropLast(suffix.count)) + "_" + suffix.dropFirst()
    }

    private static func scrubbed(_ suggestion: String) -> String {
        if isPlainASCIIName(suggestion.utf8) { return suggestion }
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
        if name.utf8.count > maxBytes { name = shortened(name) }
        return name.isEmpty ? fallback : name
    }

    /// The name suggested by a URL's path: its last non-empty segment, percent-decoded, sanitised.
    public static func fromURLPath(_ url: String) -> String {
        var text = url
        return text.withUTF8 { bytes in
            guard let last = lastSegment(bytes) else { return fallback }
            // Without a "%" there is nothing to decode, and the segment (cut at ASCII slashes of a
            // string) is valid UTF-8 as it is: no copy to decode into and no validation.
            if !last.contains(UInt8(ascii: "%")) { return sanitize(String(decoding: last, as: UTF8.self)) }
            let decoded = percentDecode(bytes: last).flatMap { String(validating: $0, as: UTF8.self) }
            return sanitize(decoded ?? String(decoding: last, as: UTF8.self))
        }
    }

    /// The last non-empty segment of the path of `url`'s bytes (after the scheme's "://", before any
    /// query or fragment, not the authority); nil when there is none.
    private static func lastSegment(_ bytes: UnsafeBufferPointer<UInt8>) -> Slice<UnsafeBufferPointer<UInt8>>? {
        let start = ASCIIBytes.schemeSeparator(in: bytes).map { $0 + 3 } ?? 0
        var end = bytes.count
        if let q = bytes[start..<end].firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) { end = q }
        guard let slash = bytes[start..<end].firstIndex(of: UInt8(ascii: "/")) else { return nil }
        while end > slash, bytes[end - 1] == UInt8(ascii: "/") { end -= 1 }
        guard end > slash else { return nil }
        var first = end
        while bytes[first - 1] != UInt8(ascii: "/") { first -= 1 }
        return bytes[first..<end]
    }

    /// `fromURLPath` as it was written first, on a copy of the bytes: the reference for the tests.
    static func referenceFromURLPath(_ url: String) -> String {
        let bytes = Array(url.utf8)
        var start = 0
        var end = bytes.count
        if let scheme = schemeSeparator(in: url) { start = url.utf8.distance(from: url.utf8.startIndex, to: scheme.upperBound) }
        // Drop query and fragment, then the authority.
        if let q = bytes[start..<end].firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) { end = q }
        guard let slash = bytes[start..<end].firstIndex(of: UInt8(ascii: "/")) else { return fallback }
        // The last non-empty segment.
        while end > slash, bytes[end - 1] == UInt8(ascii: "/") { end -= 1 }
        guard end > slash else { return fallback }
        var first = end
        while bytes[first - 1] != UInt8(ascii: "/") { first -= 1 }
        let last = bytes[first..<end]
        let decoded = percentDecode(bytes: last).flatMap { String(validating: $0, as: UTF8.self) }
        return sanitize(decoded ?? String(decoding: last, as: UTF8.self))
    }

    /// True for a name `sanitize` keeps as it is, decided on bytes: printable ASCII without a path
    /// separator, not starting with a dot or a space, not ending with a space, at most 200 bytes.
    private static func isPlainASCIIName(_ bytes: String.UTF8View) -> Bool {
        guard let first = bytes.first, let last = bytes.last, bytes.count <= maxBytes,
            first != UInt8(ascii: "."), first != UInt8(ascii: " "), last != UInt8(ascii: " ")
        else { return false }
        return bytes.allSatisfy { (0x20..<0x7F).contains($0) && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "\\") }
    }

    /// The most bytes of UTF-8 a name is given: room for a numbered copy (`NAME.12`) and the longest
    /// side file's ending (`.segget-progress`) within the 255 of most file systems.
    static let maxBytes = 200

    /// A name longer than `maxBytes` cut to fit, its extension kept (`….tar.gz`, `….iso`): up to
    /// two dotted endings of 1-8 ASCII letters and digits each, which say what the file is.
    static func shortened(_ name: String) -> String {
        var ext = Substring("")
        var rest = Substring(name)
        for _ in 0..<2 {
            guard let dot = rest.lastIndex(of: "."), dot > rest.startIndex else { break }
            let part = rest[rest.index(after: dot)...]
            guard (1...8).contains(part.utf8.count), part.utf8.allSatisfy({ isASCIILetterOrDigit($0) }) else { break }
            ext = name[dot...]
            rest = rest[..<dot]
        }
        let stem = truncateUTF8(String(rest), maxBytes: maxBytes - ext.utf8.count)
        // A stem of one huge character (a letter under hundreds of combining marks) cuts to nothing:
        // the name must still not start with a dot.
        return (stem.isEmpty ? fallback : stem) + ext
    }

    private static func isASCIILetterOrDigit(_ b: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b)
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
