import Glibc

/// An open file descriptor, as a typed integer: every call on it goes through the retrying wrappers of
/// this module.
///
/// A value, not an owner: whoever opened it closes it (``PosixFile`` does that for files it opens).
public struct FileDescriptor: RawRepresentable, Hashable, Sendable {
    /// The C descriptor number.
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Descriptor 0.
    public static let standardInput = FileDescriptor(rawValue: 0)
    /// Descriptor 1.
    public static let standardOutput = FileDescriptor(rawValue: 1)
    /// Descriptor 2.
    public static let standardError = FileDescriptor(rawValue: 2)

    /// The standard descriptors the process was started without (`segget ... >&-`), each given
    /// `/dev/null` in their place the first time this is read, which `main` does first thing: a
    /// descriptor left free is the next one any `open` or `socket` returns (libcurl's wake-up socket
    /// pair took 1, and `-o -` wrote the file into it and exited 0), so a message or stream meant for
    /// it would reach a file or a server instead.
    public static let closedAtStart: Set<FileDescriptor> = Set(
        system_occupyClosedStandardDescriptors().map(FileDescriptor.init(rawValue:)))

    /// Which of reading and writing a descriptor allows.
    public enum AccessMode: Sendable {
        case readOnly, writeOnly, readWrite

        var flags: Int32 {
            switch self {
            case .readOnly: system_O_RDONLY
            case .writeOnly: system_O_WRONLY
            case .readWrite: system_O_RDWR
            }
        }
    }

    /// Flags of `open` beyond the access mode.
    public struct OpenOptions: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// `O_CREAT`.
        public static let create = OpenOptions(rawValue: system_O_CREAT)
        /// `O_EXCL`: with `create`, fail with `EEXIST` if anything is at the path.
        public static let exclusiveCreate = OpenOptions(rawValue: system_O_EXCL)
        /// `O_NOFOLLOW`: refuse a symbolic link at the path (`ELOOP`).
        public static let noFollow = OpenOptions(rawValue: system_O_NOFOLLOW)
        /// `O_CLOEXEC`: do not leak the descriptor into child processes.
        public static let closeOnExec = OpenOptions(rawValue: system_O_CLOEXEC)
        /// `O_DIRECTORY`: fail unless the path is a directory.
        public static let directory = OpenOptions(rawValue: system_O_DIRECTORY)
        /// `O_DIRECT`: bypass the page cache; offsets, counts and buffer addresses must then be multiples of
        /// ``directIOAlignment``. Nil where the flag's value is unknown (not Linux).
        public static let direct: OpenOptions? = system_O_DIRECT.map { OpenOptions(rawValue: $0) }
    }

    /// Opens `path`. The corresponding C function is `open`.
    public static func open(
        _ path: String, _ access: AccessMode, options: OpenOptions = [.closeOnExec], permissions: UInt32 = 0
    ) throws(Errno) -> FileDescriptor {
        let flags = access.flags | options.rawValue
        return FileDescriptor(rawValue: try valueOrErrno { system_open(path, flags, mode_t(permissions)) }.get())
    }

    /// Opens the file this descriptor refers to once more, through `/proc/self/fd`, so that it is the same
    /// inode whatever happened to its path since (a second descriptor with other flags, e.g. `O_DIRECT`).
    /// Throws `EINVAL` if what opened is not the same file.
    public func reopen(_ access: AccessMode, options: OpenOptions) throws(Errno) -> FileDescriptor {
        let other = try FileDescriptor.open("/proc/self/fd/\(rawValue)", access, options: options)
        do throws(Errno) {
            let (a, b) = (try other.status(), try status())
            guard a.device == b.device && a.inode == b.inode else { throw .invalidArgument }
        } catch {
            other.close()
            throw error
        }
        return other
    }

    /// Closes the descriptor.
    ///
    /// `EINTR` is not retried: on Linux the descriptor is released even then, and retrying could close
    /// a descriptor another thread just opened. The corresponding C function is `close`.
    public func close() {
        _ = system_close(rawValue)
    }

    // MARK: Reading and writing

    /// Reads up to `buffer.count` bytes at `offset` in one call (retrying `EINTR`); returns 0 only at end of
    /// file. The corresponding C function is `pread`.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        try valueOrErrno { system_pread(rawValue, buffer.baseAddress, buffer.count, offset) }.get()
    }

    /// Reads until `buffer` is full or end of file; returns the number of bytes read.
    /// The corresponding C function is `pread`.
    public func readAll(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        try retryingReads(count: buffer.count) { done in
            system_pread(rawValue, buffer.baseAddress.map { $0 + done }, buffer.count - done, offset + Int64(done))
        }.get()
    }

    /// Reads from the current position (a pipe, standard input, a file just opened) until end of file or
    /// until more than `limit` bytes are in; returns at most `limit + 1` bytes, so that the caller can tell
    /// "too large" from "exactly `limit`". The corresponding C function is `read`.
    public func readToEnd(limit: Int) throws(Errno) -> [UInt8] {
        var bytes: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 65536)
        while bytes.count <= limit {
            let n = try block.withUnsafeMutableBytes { buffer in
                valueOrErrno { system_read(rawValue, buffer.baseAddress, buffer.count) }
            }.get()
            if n == 0 { break }
            bytes.append(contentsOf: block[..<min(n, limit + 1 - bytes.count)])
        }
        return bytes
    }

    /// Writes every byte of `bytes` at `offset`, retrying short writes and `EINTR`.
    /// The corresponding C function is `pwrite`.
    public func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        if let error = writeAll(bytes, at: offset, continueAfterShortWrite: { _ in true }).error { throw error }
    }

    /// Writes `bytes` at `offset`, retrying `EINTR` and short writes while `continueAfterShortWrite(written)`
    /// says so; returns how far it got and the error that stopped it, if any.
    ///
    /// For callers that can finish a write another way (an `O_DIRECT` write stopped off a block boundary).
    public func writeAll(
        _ bytes: UnsafeRawBufferPointer, at offset: Int64, continueAfterShortWrite: (Int) -> Bool
    ) -> WriteProgress {
        retryingWrites(count: bytes.count, continueAfterShortWrite: continueAfterShortWrite) { done in
            system_pwrite(rawValue, bytes.baseAddress.map { $0 + done }, bytes.count - done, offset + Int64(done))
        }
    }

    /// Writes every byte of `bytes` at the current position (a pipe, a terminal), retrying short writes and
    /// `EINTR`. The corresponding C function is `write`.
    public func writeAll(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        if let error = writeAllReporting(bytes).error { throw error }
    }

    /// `writeAll(_:)`, returning how far it got and the error that stopped it, if any (a pipe whose
    /// reader went away takes part of a write before `EPIPE`).
    public func writeAllReporting(_ bytes: UnsafeRawBufferPointer) -> WriteProgress {
        retryingWrites(count: bytes.count) { done in
            system_write(rawValue, bytes.baseAddress.map { $0 + done }, bytes.count - done)
        }
    }

    /// Writes all of `text` as UTF-8 (see ``writeAll(_:)-(UnsafeRawBufferPointer)``).
    public func writeAll(_ text: String) throws(Errno) {
        var text = text
        let result: Result<Void, Errno> = text.withUTF8 { bytes in
            do throws(Errno) {
                try writeAll(UnsafeRawBufferPointer(bytes))
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    // MARK: Durability and size

    /// Flushes the file's data (and the metadata needed to read it back). The corresponding C function is
    /// `fdatasync`.
    public func dataSync() throws(Errno) {
        _ = try valueOrErrno { system_fdatasync(rawValue) }.get()
    }

    /// Flushes data and all metadata (of a directory too). The corresponding C function is `fsync`.
    public func sync() throws(Errno) {
        _ = try valueOrErrno { system_fsync(rawValue) }.get()
    }

    /// Starts writing back the dirty pages of `range` without waiting. Errors are ignored: this is only a
    /// head start. The corresponding C function is `sync_file_range` with `SYNC_FILE_RANGE_WRITE`.
    public func startWriteback(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        _ = system_sync_file_range_write(rawValue, range.lowerBound, range.upperBound - range.lowerBound)
    }

    /// Sets the file's length. The corresponding C function is `ftruncate`.
    public func truncate(to length: Int64) throws(Errno) {
        _ = try valueOrErrno { system_ftruncate(rawValue, length) }.get()
    }

    /// Reserves disk blocks for `offset..<offset+length`. The corresponding C function is `posix_fallocate`,
    /// which returns the error instead of setting `errno`.
    public func allocate(offset: Int64 = 0, length: Int64) throws(Errno) {
        try returnedErrno { system_posix_fallocate(rawValue, offset, length) }.get()
    }

    /// What the kernel should expect of the access to a range of the file.
    public enum Advice: Sendable {
        case normal, sequential, random, willNeed, dontNeed

        var rawValue: Int32 {
            switch self {
            case .normal: POSIX_FADV_NORMAL
            case .sequential: POSIX_FADV_SEQUENTIAL
            case .random: POSIX_FADV_RANDOM
            case .willNeed: POSIX_FADV_WILLNEED
            case .dontNeed: POSIX_FADV_DONTNEED
            }
        }
    }

    /// Tells the kernel how `length` bytes from `offset` (0: to the end) will be used.
    /// The corresponding C function is `posix_fadvise`.
    public func advise(_ advice: Advice, offset: Int64 = 0, length: Int64 = 0) throws(Errno) {
        try returnedErrno { system_posix_fadvise(rawValue, offset, length, advice.rawValue) }.get()
    }

    /// The file's type, size and identity. The corresponding C function is `fstat`.
    public func status() throws(Errno) -> FileStatus {
        try system_fstat(rawValue).get()
    }

    // MARK: Locks

    /// The kind of an advisory whole-file lock.
    public enum LockKind: Sendable {
        /// Many holders at once (`LOCK_SH`).
        case shared
        /// One holder (`LOCK_EX`).
        case exclusive
    }

    /// Takes an advisory lock on the open file, held until `unlock()` or until every descriptor sharing
    /// this open file is closed. Non-blocking: a lock another open file holds throws ``Errno/wouldBlock``.
    /// The corresponding C function is `flock`.
    public func tryLock(_ kind: LockKind) throws(Errno) {
        let operation = (kind == .shared ? LOCK_SH : LOCK_EX) | LOCK_NB
        _ = try valueOrErrno { system_flock(rawValue, operation) }.get()
    }

    /// Releases a lock taken with ``tryLock(_:)``. The corresponding C function is `flock`.
    public func unlock() throws(Errno) {
        _ = try valueOrErrno { system_flock(rawValue, LOCK_UN) }.get()
    }
}

/// Offsets, counts and buffer addresses of `O_DIRECT` I/O are multiples of this (the logical block size
/// of every device segget has met; 512 would do on some, 4096 on all).
public let directIOAlignment = 4096

/// What `stat` says about a file: its type, size and identity.
public struct FileStatus: Equatable, Sendable {
    /// The kind of file.
    public enum Kind: Equatable, Sendable {
        case regular, directory, symbolicLink, other
    }

    public var kind: Kind
    /// Length in bytes.
    public var size: Int64
    /// Permission bits (`st_mode & 0o7777`).
    public var permissions: UInt32
    /// Device and inode: equal for two names or descriptors of the same file.
    public var device: UInt64
    public var inode: UInt64
    /// The last change of the contents (`st_mtim`), in nanoseconds since the epoch.
    public var modified: Int64

    public init(kind: Kind, size: Int64, permissions: UInt32, device: UInt64, inode: UInt64, modified: Int64) {
        self.kind = kind
        self.size = size
        self.permissions = permissions
        self.device = device
        self.inode = inode
        self.modified = modified
    }

    init(_ info: stat) {
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        default: kind = .other
        }
        size = Int64(info.st_size)
        permissions = UInt32(info.st_mode) & 0o7777
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        modified = Int64(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtim.tv_nsec)
    }
}
