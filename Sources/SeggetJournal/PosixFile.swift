/// A POSIX file opened by descriptor: positioned reads and writes, `fdatasync`, `ftruncate`,
/// `posix_fallocate`. The engine uses it for the data file too.
///
/// Every open adds `O_NOFOLLOW | O_CLOEXEC`: a symbolic link planted at the path is refused rather than
/// followed, and the descriptor does not leak into child processes.
///
/// Thread safety: `read` and `write` may be called from several threads at once (they are `pread` and
/// `pwrite`). `close()` must not race with any other call.
public final class PosixFile: BlockStorage, @unchecked Sendable {
    /// How to open a file.
    public enum OpenMode: Sendable {
        /// Create a new file, failing with `EEXIST` if anything, even a dangling symbolic link, is there.
        /// `permissions` is the mode, e.g. `0o600` (further reduced by the umask).
        case createExclusive(permissions: UInt16)
        /// Open an existing file for reading and writing.
        case openExisting
        /// Open an existing file for reading only.
        case readOnly
    }

    /// The file descriptor. Invalid after `close()`.
    public let fd: Int32
    /// The path the file was opened at, for messages.
    public let path: String
    private var isClosed = false

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit {
        if !isClosed { _ = system_close(fd) }
    }

    /// Opens or creates the file at `path`.
    ///
    /// The corresponding C function is `open`.
    public static func open(path: String, mode: OpenMode) throws(Errno) -> PosixFile {
        var flags = system_O_NOFOLLOW | system_O_CLOEXEC
        var permissions: UInt32 = 0
        switch mode {
        case .createExclusive(let mode):
            flags |= system_O_RDWR | system_O_CREAT | system_O_EXCL
            permissions = UInt32(mode)
        case .openExisting:
            flags |= system_O_RDWR
        case .readOnly:
            flags |= system_O_RDONLY
        }
        let fd = try valueOrErrno { system_open(path, flags, permissions) }.get()
        return PosixFile(fd: fd, path: path)
    }

    /// Closes the descriptor. Further calls throw `EBADF`; a second `close()` does nothing.
    ///
    /// `EINTR` is not retried: on Linux the descriptor is released even then, and retrying could close
    /// a descriptor another thread just opened. The corresponding C function is `close`.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        _ = system_close(fd)
    }

    private func openDescriptor() throws(Errno) -> Int32 {
        // After close the number may belong to another file; never hand it to the kernel.
        if isClosed { throw .badFileDescriptor }
        return fd
    }

    /// Reads until `buffer` is full or end of file. The corresponding C function is `pread`.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        try readAll(fd: try openDescriptor(), into: buffer, at: offset).get()
    }

    /// Writes all of `bytes`, retrying short writes. The corresponding C function is `pwrite`.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        try writeAll(fd: try openDescriptor(), bytes, at: offset).get()
    }

    /// Flushes the file's data (and the metadata needed to read it back, such as its length) to the
    /// device. The corresponding C function is `fdatasync`.
    public func sync() throws(Errno) {
        let fd = try openDescriptor()
        _ = try valueOrErrno { system_fdatasync(fd) }.get()
    }

    /// Starts writing back the dirty pages of `range` without waiting for them, so that a later
    /// `sync()` has little left to do. Errors are ignored: this is only a head start.
    ///
    /// The corresponding C function is `sync_file_range` with `SYNC_FILE_RANGE_WRITE`.
    public func startWriteback(_ range: Range<Int64>) {
        guard !range.isEmpty, let fd = try? openDescriptor() else { return }
        _ = system_sync_file_range_write(fd, range.lowerBound, range.upperBound - range.lowerBound)
    }

    /// Flushes data and all metadata. The corresponding C function is `fsync`.
    public func fullSync() throws(Errno) {
        let fd = try openDescriptor()
        _ = try valueOrErrno { system_fsync(fd) }.get()
    }

    /// The file's length. The corresponding C function is `fstat`.
    public func size() throws(Errno) -> Int64 {
        try system_fstat_size(try openDescriptor()).get()
    }

    /// Sets the file's length. The corresponding C function is `ftruncate`.
    public func truncate(to length: Int64) throws(Errno) {
        let fd = try openDescriptor()
        _ = try valueOrErrno { system_ftruncate(fd, length) }.get()
    }

    /// Reserves disk blocks for `length` bytes, so that a full disk is found now rather than mid-download.
    ///
    /// Where the file system cannot reserve (`EOPNOTSUPP`, `EINVAL`), falls back to extending the file
    /// sparsely with `ftruncate` (never shrinking it). `ENOSPC` is thrown as is. The corresponding C function
    /// is `posix_fallocate`, which returns the error instead of setting `errno`.
    public func preallocate(length: Int64) throws(Errno) {
        let fd = try openDescriptor()
        guard length > 0 else { return }
        switch returnedErrno({ system_posix_fallocate(fd, 0, length) }) {
        case .success:
            return
        case .failure(let error) where error == .notSupported || error == .invalidArgument:
            if try size() < length { try truncate(to: length) }
        case .failure(let error):
            throw error
        }
    }

    /// Renames atomically, replacing any file at `to`. The corresponding C function is `rename`.
    public static func rename(from: String, to: String) throws(Errno) {
        _ = try valueOrErrno { system_rename(from, to) }.get()
    }

    /// Makes a rename or create in the directory holding `path` durable: opens the directory and
    /// `fsync`s it.
    public static func syncDirectory(containing path: String) throws(Errno) {
        let directory = directoryName(of: path)
        let fd = try valueOrErrno {
            system_open(directory, system_O_RDONLY | system_O_DIRECTORY | system_O_CLOEXEC, 0)
        }.get()
        defer { _ = system_close(fd) }
        _ = try valueOrErrno { system_fsync(fd) }.get()
    }

    /// Removes the file at `path`; a missing file is not an error. The corresponding C function is `unlink`.
    public static func remove(path: String) throws(Errno) {
        switch valueOrErrno({ system_unlink(path) }) {
        case .success, .failure(.noSuchFileOrDirectory): return
        case .failure(let error): throw error
        }
    }

    /// The length of the file at `path` without following a symbolic link, or nil if nothing is there.
    /// The corresponding C function is `lstat`.
    public static func fileSize(path: String) -> Int64? {
        try? system_lstat_size(path).get()
    }

    /// Bytes an unprivileged user may still write on the file system holding `path`'s directory.
    /// The corresponding C function is `statvfs`.
    public static func freeSpace(directoryOf path: String) throws(Errno) -> Int64 {
        try system_statvfs_available(directoryName(of: path)).get()
    }

    /// The directory part of `path`: "." for a bare name, "/" for a file in the root.
    internal static func directoryName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = path[..<slash]
        return directory.isEmpty ? "/" : String(directory)
    }
}
