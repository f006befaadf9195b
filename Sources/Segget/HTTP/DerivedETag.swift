/// The wording of an `ETag` that a static-file server derives from the file's modification time and
/// size alone, recognised only where it agrees with the answer's own length and `Last-Modified`.
///
/// Two servers holding one copied file (a mirror) word their `ETag`s each their own way, so the
/// `ETag`s differ although the bytes do not. Where both are of these wordings, of different kinds, and
/// each decodes to its answer's length and modification time, neither says more than the length and
/// `Last-Modified` do, and those are compared instead (`Download.keptMirrors`). Anything else (a
/// weak `ETag`, a content hash, lighttpd's hash, Apache's with the inode) is compared as it stands.
///
/// Recorded from Debian 12's servers (`Tests/SeggetTests/Fixtures/server-heads.txt`):
/// - nginx and h2o: `"<mtime hex>-<size hex>"`, e.g. `"6b0b9673-100001"`;
/// - Apache 2.4 (`FileETag MTime Size`, its default): `"<size hex>-<mtime in µs hex>"`, e.g.
///   `"100001-6616190777da7"`;
/// - Caddy: `"<mtime base 36><size base 36>"`, e.g. `"tp8twzmh35"`.
enum DerivedETag: Equatable, Sendable {
    case mtimeSize
    case sizeMicroseconds
    case base36

    /// The wording of `etag` where it decodes to `length` bytes modified at `modified` (seconds since
    /// 1970, from `Last-Modified`); nil where it is of none, or says anything else.
    init?(_ etag: String, length: Int64, modified: Int64) {
        let bytes = Array(etag.utf8)
        // A strong validator only: a weak one (W/) is the server's own judgment of equivalence.
        guard bytes.count >= 4, bytes.count <= 64, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") else {
            return nil
        }
        let inner = bytes[1..<(bytes.count - 1)]
        let parts = inner.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        if parts.count == 2, let a = Self.number(parts[0], radix: 16), let b = Self.number(parts[1], radix: 16) {
            if b == length && a == modified {
                self = .mtimeSize
                return
            }
            if a == length && b / 1_000_000 == modified {
                self = .sizeMicroseconds
                return
            }
            return nil
        }
        guard parts.count == 1, let size = Self.base36(length) else { return nil }
        let s = Array(size.utf8)
        guard inner.count > s.count, inner.suffix(s.count).elementsEqual(s),
            let mtime = Self.number(inner.dropLast(s.count), radix: 36), mtime == modified
        else { return nil }
        self = .base36
    }

    /// The digits of `radix` (lower case, as these servers write them) as a number; nil for anything
    /// else, or a number over 62 bits.
    static func number(_ digits: ArraySlice<UInt8>, radix: Int64) -> Int64? {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var n: Int64 = 0
        for d in digits {
            let v: Int64
            switch d {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = Int64(d - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = Int64(d - UInt8(ascii: "a")) + 10
            default: return nil
            }
            guard v < radix else { return nil }
            let (m, overflow) = n.multipliedReportingOverflow(by: radix)
            guard !overflow, m <= Int64.max >> 1 else { return nil }
            n = m + v
        }
        return n
    }

    /// `n` in base 36, lower case (Go's `strconv.FormatInt(n, 36)`, as Caddy writes it).
    static func base36(_ n: Int64) -> String? {
        guard n >= 0 else { return nil }
        return String(n, radix: 36)
    }
}
