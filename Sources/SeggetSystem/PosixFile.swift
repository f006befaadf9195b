/// A POSIX file opened by path and owning its descriptor: positioned reads and writes, `fdatasync`,
/// `ftruncate`, `posix_fallocate`, locks. The journal and the engine's data file both use it.
///
/// Every open adds `O_NOFOLLOW | O_CLOEXEC`: a symbolic link planted at the path is refused rather than
/// followed, and the descriptor does not leak into child processes.
///
/// Thread safety: `read` and `write` may be called from several threads at once (they are `pread` and
/// `pwrite`). `close()` must not race with any other call.
public final class PosixFile: @unchecked Sendable {
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

    /// The descriptor. Invalid after `close()`.
    public let descriptor: FileDescriptor
    /// The path the file was opened at, for messages.
    public let path: String
    private var isClosed = false

    /// The C descriptor number. Invalid after `close()`.
    public var fd: Int32 { descriptor.rawValue }

    private init(descriptor: FileDescriptor, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit {
        if !isClosed { descriptor.close() }
    }

    /// Opens or creates the file at `path`. The corresponding C function is `open`.
    public static func open(path: String, mode: OpenMode) throws(Errno) -> PosixFile {
        let options: FileDescriptor.OpenOptions = [.noFollow, .closeOnExec]
        let descriptor: FileDescriptor
        switch mode {
        case .createExclusive(let permissions):
            descriptor = try .open(
                path, .readWrite, options: options.union([.create, .exclusiveCreate]), permissions: UInt32(permissions))
        case .openExisting:
            descriptor = try .open(path, .readWrite, options: options)
        case .readOnly:
            descriptor = try .open(path, .readOnly, options: options)
        }
        return PosixFile(descriptor: descriptor, path: path)
    }

    /// A new, empty file without a name in `directory` (`O_TMPFILE`), open for writing: it is freed with
    /// its last descriptor, whatever stops the process, unless ``link(as:)`` names it first. Throws
    /// ``Errno/notSupported`` where the platform or the file system cannot make one (`EOPNOTSUPP`,
    /// `EISDIR` and `EINVAL` from older kernels all come back as that). `permissions` as for
    /// ``OpenMode/createExclusive(permissions:)``. The corresponding C function is `open`.
    public static func createUnnamed(inDirectory directory: String, permissions: UInt16) throws(Errno) -> PosixFile {
        guard let tmpfile = system_O_TMPFILE else { throw .notSupported }
        let descriptor: FileDescriptor
        do {
            descriptor = try .open(
                directory, .readWrite, options: [.closeOnExec, FileDescriptor.OpenOptions(rawValue: tmpfile)],
                permissions: UInt32(permissions))
        } catch {
            let unsupported: Set<Errno> = [.notSupported, .isDirectory, .invalidArgument]
            throw unsupported.contains(error) ? .notSupported : error
        }
        return PosixFile(descriptor: descriptor, path: directory)
    }

    /// Gives this file, made by ``createUnnamed(inDirectory:permissions:)``, the name `path`, atomically:
    /// the name appears with the whole file behind it, and fails with ``Errno/fileExists`` if anything
    /// (even a dangling symbolic link) is already there. The corresponding C function is `linkat`.
    public func link(as path: String) throws(Errno) {
        let fd = try openDescriptor().rawValue
        try valueOrErrno { system_link_descriptor(fd, path) }.map { _ in () }.get()
    }

    /// Closes the descriptor. Further calls throw `EBADF`; a second `close()` does nothing.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        descriptor.close()
    }

    private func openDescriptor() throws(Errno) -> FileDescriptor {
        // After close the number may belong to another file; never hand it to the kernel.
        if isClosed { throw .badFileDescriptor }
        return descriptor
    }

    /// Reads until `buffer` is full or end of file. The corresponding C function is `pread`.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        try openDescriptor().readAll(into: buffer, at: offset)
    }

    /// Writes all of `bytes`, retrying short writes. The corresponding C function is `pwrite`.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        try openDescriptor().writeAll(bytes, at: offset)
    }

    /// Writes all of `bytes` at `offset`.
    public func write(_ bytes: [UInt8], at offset: Int64) throws(Errno) {
        let descriptor = try openDescriptor()
        let progress = bytes.withUnsafeBytes {
            descriptor.writeAll($0, at: offset, continueAfterShortWrite: { _ in true })
        }
        if let error = progress.error { throw error }
    }

    /// Reads up to `count` bytes at `offset`; the array is shorter only at end of file.
    public func read(count: Int, at offset: Int64) throws(Errno) -> [UInt8] {
        let descriptor = try openDescriptor()
        var bytes = [UInt8](repeating: 0, count: count)
        let result = bytes.withUnsafeMutableBytes { buffer in
            retryingReads(count: buffer.count) { done in
                system_pread(descriptor.rawValue, buffer.baseAddress.map { $0 + done }, buffer.count - done, offset + Int64(done))
            }
        }
        let n = try result.get()
        if n < count { bytes.removeLast(count - n) }
        return bytes
    }

    /// Flushes the file's data (and the metadata needed to read it back, such as its length) to the
    /// device. The corresponding C function is `fdatasync`.
    public func sync() throws(Errno) {
        try openDescriptor().dataSync()
    }

    /// Starts writing back the dirty pages of `range` without waiting for them, so that a later
    /// `sync()` has little left to do. Errors are ignored: this is only a head start.
    ///
    /// The corresponding C function is `sync_file_range` with `SYNC_FILE_RANGE_WRITE`.
    public func startWriteback(_ range: Range<Int64>) {
        (try? openDescriptor())?.startWriteback(range)
    }

    /// Flushes data and all metadata. The corresponding C function is `fsync`.
    public func fullSync() throws(Errno) {
        try openDescriptor().sync()
    }

    /// The file's length. The corresponding C function is `fstat`.
    public func size() throws(Errno) -> Int64 {
        try openDescriptor().status().size
    }

    /// The file's type, size, identity and modification time. The corresponding C function is `fstat`.
    public func status() throws(Errno) -> FileStatus {
        try openDescriptor().status()
    }

    /// Sets the extended attribute `name` (such as `user.segget.finished`) to `value`, replacing an
    /// earlier value. Throws ``Errno/notSupported`` where the file system keeps no such attributes.
    /// The corresponding C function is `fsetxattr`.
    public func setAttribute(_ name: String, _ value: [UInt8]) throws(Errno) {
        let fd = try openDescriptor().rawValue
        let result = value.withUnsafeBytes { raw in valueOrErrno { system_fsetxattr(fd, name, raw) } }
        _ = try result.get()
    }

    /// Sets the file's length. The corresponding C function is `ftruncate`.
    public func truncate(to length: Int64) throws(Errno) {
        try openDescriptor().truncate(to: length)
    }

    /// Reserves disk blocks for `length` bytes, so that a full disk is found now rather than mid-download.
    ///
    /// Where the file system cannot reserve (`EOPNOTSUPP`, `EINVAL`), falls back to extending the file
    /// sparsely with `ftruncate` (never shrinking it). `ENOSPC` is thrown as is. The corresponding C function
    /// is `posix_fallocate`.
    public func preallocate(length: Int64) throws(Errno) {
        let descriptor = try openDescriptor()
        guard length > 0 else { return }
        do {
            try descriptor.allocate(length: length)
        } catch where error == .notSupported || error == .invalidArgument {
            if try size() < length { try truncate(to: length) }
        }
    }

    /// Takes the exclusive advisory lock on the file without waiting; throws ``Errno/wouldBlock`` while
    /// another open file (another process, or another `open` in this one) holds it. The lock goes with the
    /// descriptor's last close. The corresponding C function is `flock`.
    public func tryLockExclusively() throws(Errno) {
        try openDescriptor().tryLock(.exclusive)
    }

    /// A second descriptor on the same file that bypasses the page cache (`O_DIRECT`), for aligned writes
    /// and reads; nil where the platform or the file system refuses it. The caller closes it.
    public func openDirect(_ access: FileDescriptor.AccessMode = .readWrite) -> FileDescriptor? {
        guard let direct = FileDescriptor.OpenOptions.direct, let descriptor = try? openDescriptor() else { return nil }
        return try? descriptor.reopen(access, options: [.closeOnExec, direct])
    }

    // MARK: Paths (kept here for the journal's callers; see also `FileSystem`)

    /// Renames atomically, replacing any file at `to`. The corresponding C function is `rename`.
    public static func rename(from: String, to: String) throws(Errno) {
        try FileSystem.rename(from: from, to: to)
    }

    /// Makes a rename or create in the directory holding `path` durable: opens the directory and
    /// `fsync`s it.
    public static func syncDirectory(containing path: String) throws(Errno) {
        try FileSystem.syncDirectory(FileSystem.directoryName(of: path))
    }

    /// Removes the file at `path`; a missing file is not an error. The corresponding C function is `unlink`.
    public static func remove(path: String) throws(Errno) {
        try FileSystem.remove(path)
    }

    /// The length of the file at `path` without following a symbolic link, or nil if nothing is there.
    /// The corresponding C function is `lstat`.
    public static func fileSize(path: String) -> Int64? {
        FileSystem.status(path, followingLinks: false)?.size
    }

    /// Bytes an unprivileged user may still write on the file system holding `path`'s directory.
    /// The corresponding C function is `statvfs`.
    public static func freeSpace(directoryOf path: String) throws(Errno) -> Int64 {
        try system_statvfs_available(FileSystem.directoryName(of: path)).get()
    }

    /// Whether the file system holding `path`'s directory has no file entries (inodes) left for an
    /// unprivileged user, where it counts them: a "no space" error there is not about bytes.
    public static func outOfInodes(directoryOf path: String) -> Bool {
        system_statvfs_freeFiles(FileSystem.directoryName(of: path)) == 0
    }

    /// The most bytes this process may write into a file (`ulimit -f`, RLIMIT_FSIZE's soft limit),
    /// or nil where there is no such limit. Past it a write fails with `EFBIG` (segget ignores
    /// SIGXFSZ), as it does past the file system's own limit.
    public static var processFileSizeLimit: Int64? {
        system_file_size_limit()
    }

    /// The directory part of `path`: "." for a bare name, "/" for a file in the root.
    internal static func directoryName(of path: String) -> String {
        FileSystem.directoryName(of: path)
    }
}
