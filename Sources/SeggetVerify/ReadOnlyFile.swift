#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why hashing a file failed, with a full-sentence description for the user.
public struct HashingError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The kind of failure, stable for code to switch on.
    public enum Code: Sendable, Equatable {
        /// The file could not be opened; `errno` says why.
        case openFailed(errno: Int32)
        /// Reading failed; `errno` says why.
        case readFailed(errno: Int32)
        /// The file ended before the length that was to be hashed.
        case fileTooShort(expected: Int64, actual: Int64)
        /// The finished prefix was advanced beyond the length passed to `finish`.
        case advancedPastLength(advanced: Int64, length: Int64)
        /// `cancel()` was called before hashing completed.
        case cancelled
        /// The background hashing thread could not be started; `errno` says why.
        case threadStartFailed(errno: Int32)
    }

    /// What went wrong.
    public let code: Code
    /// The file being hashed.
    public let path: String

    /// What happened, as a sentence naming the file.
    public var description: String {
        switch code {
        case .openFailed(let errno):
            "Could not open “\(path)” to check its digest: \(errorMessage(errno))."
        case .readFailed(let errno):
            "Could not read “\(path)” to check its digest: \(errorMessage(errno))."
        case .fileTooShort(let expected, let actual):
            "“\(path)” holds \(actual) bytes but \(expected) were expected; the file was truncated while it was "
                + "being checked."
        case .advancedPastLength(let advanced, let length):
            "The finished part of “\(path)” was reported as \(advanced) bytes, beyond its length of \(length) bytes."
        case .cancelled:
            "Checking the digest of “\(path)” was cancelled."
        case .threadStartFailed(let errno):
            "Could not start a thread to check the digest of “\(path)”: \(errorMessage(errno))."
        }
    }
}

/// The system's message for an errno value, such as "No such file or directory".
///
/// The corresponding C function is `strerror`.
private func errorMessage(_ errno: Int32) -> String {
    guard let message = strerror(errno) else { return "error \(errno)" }
    return String(cString: message)
}

/// An open file descriptor for positional reads; closed when the value is released. The only file
/// syscalls of this module live here.
final class ReadOnlyFile: @unchecked Sendable {
    // The descriptor is immutable and pread does not move a shared offset, so concurrent use is safe.
    let descriptor: Int32
    let path: String

    /// True when reads bypass the page cache (`O_DIRECT`): offsets, counts and buffers must then be
    /// multiples of `directAlignment`.
    let isDirect: Bool

    /// Opens `path` for reading; with `direct`, tries `O_DIRECT` first and falls back to an ordinary
    /// descriptor where the file system refuses it.
    ///
    /// The corresponding C function is `open` (with `O_RDONLY | O_CLOEXEC`).
    init(path: String, direct: Bool = false) throws(HashingError) {
        self.path = path
        var descriptor: Int32 = -1
        if direct, let flag = directOpenFlag {
            repeat {
                descriptor = open(path, O_RDONLY | O_CLOEXEC | flag)
            } while descriptor < 0 && errno == EINTR
        }
        isDirect = descriptor >= 0
        if descriptor < 0 {
            repeat {
                descriptor = open(path, O_RDONLY | O_CLOEXEC)
            } while descriptor < 0 && errno == EINTR
        }
        guard descriptor >= 0 else {
            throw HashingError(code: .openFailed(errno: errno), path: path)
        }
        self.descriptor = descriptor
    }

    deinit {
        // Nothing useful can be done about a failed close of a read-only descriptor.
        _ = close(descriptor)
    }

    /// Reads up to `buffer.count` bytes at `offset`, retrying interrupted calls; returns 0 only at end of file.
    ///
    /// The corresponding C function is `pread`.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(HashingError) -> Int {
        while true {
            let count = pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            if count >= 0 { return count }
            if errno != EINTR {
                throw HashingError(code: .readFailed(errno: errno), path: path)
            }
        }
    }

    /// Fills `buffer` completely from `offset`, looping over short reads.
    ///
    /// Throws `fileTooShort` (reporting `expectedEnd`) if the file ends first.
    func readFully(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, expectedEnd: Int64)
        throws(HashingError)
    {
        var filled = 0
        while filled < buffer.count {
            let count = try read(
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]),
                at: offset + Int64(filled)
            )
            guard count > 0 else {
                throw HashingError(
                    code: .fileTooShort(expected: expectedEnd, actual: offset + Int64(filled)),
                    path: path
                )
            }
            filled += count
        }
    }
}

/// `O_DIRECT`, which Glibc's Swift overlay does not export; nil where its value is unknown.
package let directOpenFlag: Int32? = {
    #if os(Linux) && (arch(x86_64) || arch(i386))
        return 0o40000
    #elseif os(Linux) && arch(arm64)
        return 0o200000
    #else
        return nil
    #endif
}()

/// Offsets, counts and buffer addresses of `O_DIRECT` reads are multiples of this.
package let directAlignment = 4096

/// The size of the blocks files are read in: large enough that syscall and lock costs vanish next to hashing
/// (a block takes about 4 ms at SHA-256 speed), small enough that `cancel()` stays prompt.
let hashingBlockSize = 4 << 20

/// Hash a whole file on disk (for `segget verify FILE`).
///
/// Reads the file once, in 4 MiB blocks, and feeds every requested algorithm from the same buffer.
/// Throws `HashingError` if the file cannot be opened or read.
public func digestFile(path: String, algorithms: [DigestAlgorithm]) throws -> [DigestAlgorithm: [UInt8]] {
    let file = try ReadOnlyFile(path: path)
    let digesters = uniqued(algorithms).map(Digester.init)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: hashingBlockSize, alignment: 4096)
    defer { buffer.deallocate() }
    var offset: Int64 = 0
    while true {
        let count = try file.read(into: buffer, at: offset)
        if count == 0 { break }
        let chunk = UnsafeRawBufferPointer(rebasing: buffer[..<count])
        for digester in digesters {
            digester.update(chunk)
        }
        offset += Int64(count)
    }
    return Dictionary(uniqueKeysWithValues: digesters.map { ($0.algorithm, $0.finalize()) })
}

/// The algorithms in their first-seen order, each once.
func uniqued(_ algorithms: [DigestAlgorithm]) -> [DigestAlgorithm] {
    var seen: [DigestAlgorithm] = []
    for algorithm in algorithms where !seen.contains(algorithm) {
        seen.append(algorithm)
    }
    return seen
}
