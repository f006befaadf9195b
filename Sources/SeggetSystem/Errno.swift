import Glibc

/// An error number reported by the operating system.
///
/// `description` is the C library's message for the number (`strerror`), e.g.
/// "No space left on device".
public struct Errno: Error, Equatable, Hashable, Sendable, CustomStringConvertible, RawRepresentable {
    /// The C `errno` value.
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public var description: String { system_strerror(rawValue) }

    /// `EINTR`: a signal interrupted the call; retried by the wrappers, never thrown by them.
    public static let interrupted = Errno(rawValue: EINTR)
    /// `ENOENT`: no such file or directory.
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    /// `EEXIST`: the file exists (exclusive create).
    public static let fileExists = Errno(rawValue: EEXIST)
    /// `ELOOP`: the path names a symbolic link and `O_NOFOLLOW` was given.
    public static let tooManySymbolicLinkLevels = Errno(rawValue: ELOOP)
    /// `EIO`: an input/output error.
    public static let ioError = Errno(rawValue: EIO)
    /// `ENOSPC`: no space left on device.
    public static let noSpace = Errno(rawValue: ENOSPC)
    /// `EBADF`: the descriptor is not open (for example, used after `close()`).
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    /// `EINVAL`: an invalid argument.
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// `ENOSYS`: a system call this kernel does not have.
    public static let notImplemented = Errno(rawValue: ENOSYS)
    /// `EOPNOTSUPP`: the operation is not supported (for example, `fallocate` on some file systems).
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    /// `EACCES`: permission denied.
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// `EPERM`: the operation is not permitted.
    public static let notPermitted = Errno(rawValue: EPERM)
    /// `EROFS`: the file system is mounted read-only.
    public static let readOnlyFileSystem = Errno(rawValue: EROFS)
    /// `EWOULDBLOCK` (`EAGAIN`): a non-blocking call would have had to wait, e.g. for a lock another
    /// descriptor holds.
    public static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    /// `EISDIR`: the path is a directory (also what kernels before 3.11 answer to `O_TMPFILE`).
    public static let isDirectory = Errno(rawValue: EISDIR)
    /// `ENOTDIR`: a component of the path is not a directory.
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    /// `EPIPE`: the reading end of a pipe is closed.
    public static let brokenPipe = Errno(rawValue: EPIPE)
    /// `EFBIG`: the file would be larger than the file system (or the process's limit) allows.
    public static let fileTooLarge = Errno(rawValue: EFBIG)

    /// The calling thread's current `errno`, for wrappers right after a failed call.
    internal static var current: Errno { Errno(rawValue: errno) }
}
