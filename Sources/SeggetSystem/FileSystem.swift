/// Operations on paths rather than open files: directories, renames, removal, `stat`.
public enum FileSystem {
    /// Renames atomically, replacing any file at `to`. The corresponding C function is `rename`.
    public static func rename(from: String, to: String) throws(Errno) {
        _ = try valueOrErrno { system_rename(from, to) }.get()
    }

    /// Renames atomically unless something is at `to` (a file, a directory, a link, even a dangling
    /// one): then throws ``Errno/fileExists`` and changes nothing. The corresponding C function is
    /// `renameat2` with `RENAME_NOREPLACE`; where the kernel or the file system does not offer it, the
    /// name is looked up first and then renamed, which a file made in between would still lose to.
    public static func renameWithoutReplacing(from: String, to: String) throws(Errno) {
        switch valueOrErrno({ system_rename_noreplace(from, to) }) {
        case .success: return
        case .failure(let e) where e == .notImplemented || e == .invalidArgument:
            if status(to, followingLinks: false) != nil { throw .fileExists }
            try rename(from: from, to: to)
        case .failure(let e): throw e
        }
    }

    /// Removes the file at `path`; a missing file is not an error. The corresponding C function is `unlink`.
    public static func remove(_ path: String) throws(Errno) {
        // Looks first: `unlink` takes the directory's lock exclusively even when the name is absent, and
        // a batch of downloads in one directory, 16 threads at a time, spent a fifth of its CPU spinning
        // on that lock (`rwsem_spin_on_owner`) over side files that were never made. A lookup takes no
        // lock; a name that appears in between is not this call's to remove.
        guard status(path, followingLinks: false) != nil else { return }
        switch valueOrErrno({ system_unlink(path) }) {
        case .success, .failure(.noSuchFileOrDirectory): return
        case .failure(let error): throw error
        }
    }

    /// Creates the directory `path` (its parent must exist). The corresponding C function is `mkdir`.
    public static func makeDirectory(_ path: String, permissions: UInt32 = 0o755) throws(Errno) {
        _ = try valueOrErrno { system_mkdir(path, permissions) }.get()
    }

    /// Creates the directory `path` and every missing one above it, like `mkdir -p`, the new ones with
    /// `permissions`; those that exist are left as they are. Throws the level that could not be made
    /// with its error: ``Errno/notDirectory`` where something other than a directory is there.
    public static func makeDirectories(_ path: String, permissions: UInt32 = 0o755) throws(DirectoryFailure) {
        if path.isEmpty || path == "." || path == "/" { return }
        if let s = status(path) {
            guard s.kind == .directory else { throw DirectoryFailure(path: path, error: .notDirectory) }
            return
        }
        try makeDirectories(directoryName(of: path), permissions: permissions)
        do {
            try makeDirectory(path, permissions: permissions)
        } catch where error == .fileExists {
            // Made in between by someone else: fine if it is a directory. A symbolic link whose
            // target does not exist is there too (it was "exists and is not a directory").
            guard isDirectory(path) else {
                throw DirectoryFailure(path: path, error: .notDirectory, danglingLink: status(path, followingLinks: false)?.kind == .symbolicLink)
            }
        } catch {
            throw DirectoryFailure(path: path, error: error)
        }
    }

    /// The level of a path `makeDirectories` could not make, and why.
    public struct DirectoryFailure: Error, Equatable, Sendable, CustomStringConvertible {
        public let path: String
        public let error: Errno
        /// `path` is a symbolic link to nothing.
        public let danglingLink: Bool
        public init(path: String, error: Errno, danglingLink: Bool = false) {
            self.path = path
            self.error = error
            self.danglingLink = danglingLink
        }

        /// "PATH exists and is not a directory", "PATH is a symbolic link to nothing …", or "could
        /// not create the directory PATH: ERROR".
        public var description: String {
            if danglingLink {
                return "\(path) is a symbolic link whose target cannot be reached (it does not exist, or is not a directory segget may search); make that directory, or give another"
            }
            return error == .notDirectory ? "\(path) exists and is not a directory" : "could not create the directory \(path): \(error)"
        }
    }

    /// Makes the creations, renames and removals in directory `path` durable: opens it and `fsync`s it.
    public static func syncDirectory(_ path: String) throws(Errno) {
        let directory = try FileDescriptor.open(path, .readOnly, options: [.directory, .closeOnExec])
        defer { directory.close() }
        try directory.sync()
    }

    /// What is at `path`, or nil if nothing is (or it cannot be looked at). With `followingLinks`, a
    /// symbolic link is described by what it points at. The corresponding C functions are `stat` and `lstat`.
    public static func status(_ path: String, followingLinks: Bool = true) -> FileStatus? {
        try? system_stat(path, followingLinks: followingLinks).get()
    }

    /// The value of extended attribute `name` of the file at `path` (not following a symbolic link),
    /// or nil when it is not set, longer than `limit` bytes, or cannot be read (no such file, a file
    /// system without extended attributes). The corresponding C function is `lgetxattr`.
    public static func attribute(_ path: String, _ name: String, limit: Int = 4096) -> [UInt8]? {
        // A buffer of at least one byte: with none, the call answers the value's length instead.
        var bytes = [UInt8](repeating: 0, count: max(1, limit))
        let n = bytes.withUnsafeMutableBytes { buffer in
            (try? valueOrErrno { system_lgetxattr(path, name, buffer) }.get()) ?? -1
        }
        guard n >= 0, n <= limit else { return nil }
        return Array(bytes[0..<n])
    }

    /// True when `path` is a directory, or a symbolic link to one.
    public static func isDirectory(_ path: String) -> Bool {
        status(path)?.kind == .directory
    }

    /// True when anything, even a dangling symbolic link, is at `path`.
    public static func exists(_ path: String) -> Bool {
        status(path, followingLinks: false) != nil
    }

    /// Every name in directory `path` but `.` and `..`, from one reading of it: none where the
    /// directory does not exist, nil where it cannot be read or holds more than `limit` entries.
    /// The corresponding C functions are `opendir` and `readdir`.
    public static func names(inDirectory path: String, limit: Int) -> [String]? {
        let listed = system_directory_names(path, limit: limit) { name, length in
            !(length == 1 && name[0] == 0x2e) && !(length == 2 && name[0] == 0x2e && name[1] == 0x2e)
        }
        switch listed {
        case .success(let names): return names
        case .failure(.noSuchFileOrDirectory): return []
        case .failure: return nil
        }
    }

    /// The absolute path of `path` with every symbolic link, `.` and `..` resolved; throws
    /// ``Errno/noSuchFileOrDirectory`` if it does not exist. The corresponding C function is `realpath`.
    public static func realPath(_ path: String) throws(Errno) -> String {
        try system_realpath(path).get()
    }

    /// The directory part of `path`: "." for a bare name, "/" for a file in the root.
    public static func directoryName(of path: String) -> String {
        // On the bytes of an ASCII path, where "/" is never part of a larger Character (this runs
        // for every file of a batch; the Character walk cost thousands of instructions).
        var text = path
        let isASCII = text.withUTF8 { !$0.contains { $0 >= 0x80 } }
        let lastSlash = isASCII ? path.utf8.lastIndex(of: UInt8(ascii: "/")) : path.lastIndex(of: "/")
        guard let slash = lastSlash else { return "." }
        let directory = path[..<slash]
        return directory.isEmpty ? "/" : String(directory)
    }
}
