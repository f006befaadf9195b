#if canImport(Glibc)
import Glibc
#endif

/// Small file helpers for integration tests: read, write, compare, stat. Namespaced so that they
/// never clash with a test file's own private helpers.
enum TestFiles {
    /// The whole file, or nil when it cannot be opened.
    static func read(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if n == 0 { return out }
            out.append(contentsOf: buf[0..<n])
        }
    }

    /// Creates or replaces `path` with `bytes` (mode 0644).
    static func write(_ path: String, _ bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TestSupportError("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
            if n < 0 {
                if errno == EINTR { continue }
                throw TestSupportError("cannot write \(path): \(String(cString: strerror(errno)))")
            }
            off += n
        }
    }

    /// True when something (file, directory, dangling link) exists at `path`.
    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// The size in bytes, or nil when there is no such file.
    static func size(_ path: String) -> Int64? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return Int64(st.st_size)
    }

    /// The permission bits (e.g. 0o600), or nil when there is no such file.
    static func mode(_ path: String) -> mode_t? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return st.st_mode & 0o7777
    }

    /// Truncates (or extends with zeros) `path` to `length` bytes.
    static func truncate(_ path: String, to length: Int64) throws {
        guard Glibc.truncate(path, off_t(length)) == 0 else {
            throw TestSupportError("cannot truncate \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Deterministic, non-repeating bytes (xorshift64), so that a shifted, truncated or stale body is
    /// detectable. Different seeds give unrelated contents.
    static func pattern(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
        var state = seed == 0 ? 1 : seed
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBufferPointer { buf in
            var i = 0
            while i < count {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                var word = state
                for _ in 0..<8 where i < count {
                    buf[i] = UInt8(truncatingIfNeeded: word)
                    word >>= 8
                    i += 1
                }
            }
        }
        return out
    }

    /// How two byte sequences differ, or nil when they are identical. The text names the first differing
    /// offset, so a failed comparison of megabytes stays readable.
    static func byteDifference(_ actual: [UInt8], _ expected: [UInt8]) -> String? {
        if actual == expected { return nil }
        let common = min(actual.count, expected.count)
        var first = common
        actual.withUnsafeBufferPointer { a in
            expected.withUnsafeBufferPointer { e in
                for i in 0..<common where a[i] != e[i] {
                    first = i
                    break
                }
            }
        }
        var text = "lengths \(actual.count) and \(expected.count)"
        if first < common {
            text += "; first difference at byte \(first) (chunk \(first >> 16) of 64 KiB): got 0x\(String(actual[first], radix: 16)), expected 0x\(String(expected[first], radix: 16))"
        } else {
            text += "; one is a prefix of the other"
        }
        return text
    }

    /// How the file at `path` differs from `expected` (nil when identical; a message when missing).
    static func fileDifference(_ path: String, _ expected: [UInt8]) -> String? {
        guard let actual = read(path) else { return "\(path) cannot be read" }
        return byteDifference(actual, expected).map { "\(path): \($0)" }
    }

    /// How two files differ (nil when byte-identical).
    static func fileDifference(_ path: String, _ otherPath: String) -> String? {
        guard let other = read(otherPath) else { return "\(otherPath) cannot be read" }
        return fileDifference(path, other)
    }

    /// True when `needle` occurs anywhere in `haystack`.
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty else { return true }
        guard haystack.count >= needle.count else { return false }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}
