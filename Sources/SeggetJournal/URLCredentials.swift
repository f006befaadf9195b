/// The one rule for the credentials a URL may carry: the `user:password@` of its authority, that is,
/// everything after the first `://` up to and including the last `@` before the first `/`, `?` or
/// `#` after it. `https://user:secret@host/f` keeps `https://host/f`; an `@` in the path, query or
/// fragment is left alone; a string without `://` has none. The journal keeps the URL without them,
/// the finished-file mark hashes it without them, and messages show it without them.
///
/// Found on the UTF-8 bytes: every delimiter is ASCII, so the cut never splits a character, and a
/// batch of small files pays nothing for Character walks (this runs several times per file).
public enum URLCredentials {
    /// The byte offsets of the `user:password@` within `bytes` (a URL's UTF-8), or nil if it has none.
    public static func userInfoRange(in bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        let n = bytes.count
        var sep = 0
        while sep + 2 < n, !(bytes[sep] == 0x3a && bytes[sep + 1] == 0x2f && bytes[sep + 2] == 0x2f) { sep += 1 }
        guard sep + 2 < n else { return nil }
        let start = sep + 3
        var end = start
        var lastAt: Int?
        while end < n, bytes[end] != 0x2f, bytes[end] != 0x3f, bytes[end] != 0x23 {
            if bytes[end] == 0x40 { lastAt = end }
            end += 1
        }
        return lastAt.map { start..<($0 + 1) }
    }

    /// `url` without its `user:password@`; `url` itself when it has none.
    public static func redacting(_ url: String) -> String {
        var text = url
        return text.withUTF8 { bytes in
            guard let cut = userInfoRange(in: bytes) else { return url }
            var kept = [UInt8]()
            kept.reserveCapacity(bytes.count - cut.count)
            kept.append(contentsOf: bytes[..<cut.lowerBound])
            kept.append(contentsOf: bytes[cut.upperBound...])
            return String(decoding: kept, as: UTF8.self)
        }
    }
}
