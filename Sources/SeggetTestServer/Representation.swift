#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One version of a resource's bytes plus its validators. Immutable once built, so connection threads
/// share it freely; replacing a resource swaps in a new `Representation`.
final class Representation: @unchecked Sendable {
    enum Storage {
        case memory([UInt8])
        /// Served with pread so that files of hundreds of MiB need no memory.
        case file(FileBacking)
        /// The `changing` mode's second version: every byte of `base` flipped, then a pattern past its end.
        case derived(Representation)
        /// A file that could not be opened: requests get a 500 saying why.
        case broken(String)
    }

    let storage: Storage
    let length: Int64
    let etag: String
    let lastModified: String

    private let digestLock = Lock()
    private var cachedSHA256: [UInt8]?
    private var cachedMD5: [UInt8]?

    static let defaultLastModified = "Tue, 15 Nov 1994 08:12:31 GMT"
    static let changedLastModified = "Wed, 16 Nov 1994 09:00:00 GMT"

    /// Unix seconds as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
    static func httpDate(_ seconds: Int64) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        var out = [CChar](repeating: 0, count: 64)
        let n = strftime(&out, out.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: out[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    init(storage: Storage, length: Int64, etag: String, lastModified: String) {
        self.storage = storage
        self.length = length
        self.etag = etag
        self.lastModified = lastModified
    }

    convenience init(bytes: [UInt8], etag: String?, lastModified: String?) {
        self.init(
            storage: .memory(bytes), length: Int64(bytes.count),
            etag: etag ?? Self.contentETag(bytes), lastModified: lastModified ?? Self.defaultLastModified)
    }

    convenience init(filePath: String, etag: String?, lastModified: String?) {
        let fd = open(filePath, O_RDONLY | O_CLOEXEC)
        var info = stat()
        guard fd >= 0, fstat(fd, &info) == 0 else {
            let reason = "cannot open \(filePath): \(String(cString: strerror(errno)))"
            if fd >= 0 { close(fd) }
            self.init(storage: .broken(reason), length: 0, etag: "\"broken\"", lastModified: Self.defaultLastModified)
            return
        }
        let backing = FileBacking(fd: fd)
        let length = Int64(info.st_size)
        // Hashing a 1 GiB file in a debug build takes too long, so a file's tag mixes its size, mtime,
        // inode and a sample of its first and last 64 KiB: content-derived enough for tests.
        var hash = FNV1a()
        hash.mix(UInt64(bitPattern: length))
        hash.mix(UInt64(bitPattern: Int64(info.st_mtim.tv_sec)))
        hash.mix(UInt64(bitPattern: Int64(info.st_mtim.tv_nsec)))
        hash.mix(UInt64(info.st_ino))
        let sample = 64 * 1024
        var buffer = [UInt8](repeating: 0, count: sample)
        for offset in [Int64(0), max(0, length - Int64(sample))] {
            let n = buffer.withUnsafeMutableBytes { backing.read(at: offset, into: $0) }
            buffer.withUnsafeBytes { hash.mix(UnsafeRawBufferPointer(rebasing: $0[..<max(0, n)])) }
        }
        self.init(
            storage: .file(backing), length: length,
            etag: etag ?? "\"\(String(length, radix: 16))-\(String(hash.value, radix: 16))\"",
            lastModified: lastModified ?? Self.defaultLastModified)
    }

    /// The `changing` mode's second version of `base`: different bytes, `length` long.
    convenience init(changedFrom base: Representation, length: Int64) {
        let inner = base.etag.hasPrefix("\"") && base.etag.hasSuffix("\"") && base.etag.count >= 2
            ? String(base.etag.dropFirst().dropLast()) : base.etag
        self.init(
            storage: .derived(base), length: length, etag: "\"\(inner)-v2-\(String(length, radix: 16))\"",
            lastModified: Self.changedLastModified)
    }

    /// A quoted strong tag from the length and an FNV-1a hash of the content.
    static func contentETag(_ bytes: [UInt8]) -> String {
        var hash = FNV1a()
        bytes.withUnsafeBytes { hash.mix($0) }
        return "\"\(String(bytes.count, radix: 16))-\(String(hash.value, radix: 16))\""
    }

    var brokenReason: String? {
        if case .broken(let reason) = storage { return reason }
        return nil
    }

    /// Copies up to `buffer.count` bytes starting at `offset`; returns how many (0 at or past the end).
    func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard offset >= 0, offset < length else { return 0 }
        let count = Int(min(Int64(buffer.count), length - offset))
        guard count > 0, let out = buffer.baseAddress else { return 0 }
        switch storage {
        case .memory(let bytes):
            bytes.withUnsafeBytes { src in
                if let base = src.baseAddress { out.copyMemory(from: base + Int(offset), byteCount: count) }
            }
            return count
        case .file(let backing):
            return backing.read(at: offset, into: UnsafeMutableRawBufferPointer(start: out, count: count))
        case .derived(let base):
            let fromBase = base.read(at: offset, into: UnsafeMutableRawBufferPointer(start: out, count: count))
            let bytes = out.assumingMemoryBound(to: UInt8.self)
            for i in 0..<count {
                if i < fromBase {
                    bytes[i] = ~bytes[i]
                } else {
                    bytes[i] = UInt8(truncatingIfNeeded: (offset + Int64(i)) &* 31 &+ 7)
                }
            }
            return count
        case .broken:
            return 0
        }
    }

    /// Sends `count` bytes from `offset` straight to `socket` without copying through a buffer:
    /// sendfile for files, the array's storage for memory. Nil when the bytes must be built
    /// (derived versions, or a span past the end), so the caller falls back to `read`.
    func sendDirect(to socket: Int32, at offset: Int64, count: Int) -> (written: Int, ok: Bool)? {
        guard offset >= 0, count >= 0, offset + Int64(count) <= length else { return nil }
        switch storage {
        case .memory(let bytes):
            return bytes.withUnsafeBytes { raw in
                Sock.sendAll(socket, UnsafeRawBufferPointer(rebasing: raw[Int(offset)..<(Int(offset) + count)]))
            }
        case .file(let backing):
            return Sock.sendFile(socket, from: backing.fd, at: offset, count: count)
        case .derived, .broken:
            return nil
        }
    }

    /// SHA-256 of the whole representation (cached).
    var sha256: [UInt8] {
        if let cached = digestLock.withLock({ cachedSHA256 }) { return cached }
        let hasher = SHA256Hasher()
        forEachBlock { hasher.update($0) }
        let digest = hasher.finalize()
        digestLock.withLock { cachedSHA256 = digest }
        return digest
    }

    /// MD5 of the whole representation (cached).
    var md5: [UInt8] {
        if let cached = digestLock.withLock({ cachedMD5 }) { return cached }
        let hasher = MD5Hasher()
        forEachBlock { hasher.update($0) }
        let digest = hasher.finalize()
        digestLock.withLock { cachedMD5 = digest }
        return digest
    }

    private func forEachBlock(_ body: (UnsafeRawBufferPointer) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        var offset: Int64 = 0
        while offset < length {
            let n = buffer.withUnsafeMutableBytes { read(at: offset, into: $0) }
            guard n > 0 else { break }
            buffer.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            offset += Int64(n)
        }
    }
}

/// An open file descriptor, closed when the last representation using it goes away.
final class FileBacking: @unchecked Sendable {
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    func read(at offset: Int64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let n = pread(fd, base + done, buffer.count - done, off_t(offset) + off_t(done))
            if n > 0 {
                done += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return done
    }

    deinit { close(fd) }
}

/// FNV-1a over 64-bit words (then the tail bytes): fast enough in debug builds for tens of MiB.
struct FNV1a {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325
    private static let prime: UInt64 = 0x0000_0100_0000_01b3

    mutating func mix(_ word: UInt64) {
        value = (value ^ word) &* Self.prime
    }

    mutating func mix(_ bytes: UnsafeRawBufferPointer) {
        let words = bytes.count / 8
        for i in 0..<words {
            mix(bytes.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self))
        }
        for i in (words * 8)..<bytes.count {
            mix(UInt64(bytes[i]))
        }
    }
}
