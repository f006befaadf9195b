import SeggetSystem

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
        }
    }
}

/// The system's message for an errno value, such as "No such file or directory".
private func errorMessage(_ errno: Int32) -> String {
    Errno(rawValue: errno).description
}

/// An open file descriptor for positional reads; closed when the value is released. The only file
/// access of this module goes through here.
final class ReadOnlyFile: @unchecked Sendable {
    // The descriptor is immutable and pread does not move a shared offset, so concurrent use is safe.
    let descriptor: FileDescriptor
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
        if direct, let flag = FileDescriptor.OpenOptions.direct,
            let descriptor = try? FileDescriptor.open(path, .readOnly, options: [.closeOnExec, flag])
        {
            self.descriptor = descriptor
            isDirect = true
            return
        }
        do {
            descriptor = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec])
        } catch {
            throw HashingError(code: .openFailed(errno: error.rawValue), path: path)
        }
        isDirect = false
    }

    deinit {
        // Nothing useful can be done about a failed close of a read-only descriptor.
        descriptor.close()
    }

    /// Reads up to `buffer.count` bytes at `offset`, retrying interrupted calls; returns 0 only at end of file.
    ///
    /// The corresponding C function is `pread`.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(HashingError) -> Int {
        do {
            return try descriptor.read(into: buffer, at: offset)
        } catch {
            throw HashingError(code: .readFailed(errno: error.rawValue), path: path)
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

/// Offsets, counts and buffer addresses of `O_DIRECT` reads are multiples of this.
package let directAlignment = directIOAlignment

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
